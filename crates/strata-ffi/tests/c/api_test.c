/*
 * api_test.c — exercises strata.h from C, linked against libstrata_ffi.so.
 *
 *   gcc -Wall -Werror -I crates/strata-ffi/include api_test.c -L<dir> -lstrata_ffi -o api_test
 *   ./api_test <empty directory on a filesystem that accepts O_DIRECT>
 *
 * Each CHECK that fails prints the line and the claim and makes the program
 * exit 1. The last line is "c api tests: N checks passed, M failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

static int checks_passed, checks_failed;

#define CHECK(cond, what)                                                          \
	do {                                                                       \
		if (cond) {                                                        \
			checks_passed++;                                           \
		} else {                                                           \
			checks_failed++;                                           \
			fprintf(stderr, "FAIL %s:%d: %s (%s)\n", __FILE__, __LINE__, what, #cond); \
		}                                                                  \
	} while (0)

/* Expects a call to have failed with `code` and a non-empty message; frees it. */
static void expect_error(strata_error_t **err, int status, int code, const char *what)
{
	CHECK(status == code, what);
	CHECK(*err != NULL, what);
	CHECK(strata_error_code(*err) == code, what);
	CHECK(strlen(strata_error_message(*err)) > 0, what);
	if (*err && status != code)
		fprintf(stderr, "  got status %d: %s\n", status, strata_error_message(*err));
	strata_error_free(*err);
	*err = NULL;
}

static strata_db_t *open_db(const char *dir)
{
	strata_error_t *err = NULL;
	/* TOML text; buffered so that the test runs on any filesystem. */
	strata_db_t *db = strata_open(dir, "io_mode = \"buffered\"\n", &err);

	if (!db)
		fprintf(stderr, "open %s: %s\n", dir, strata_error_message(err));
	strata_error_free(err);
	return db;
}

static void test_put_get_delete(strata_db_t *db)
{
	strata_error_t *err = NULL;
	char buf[64];
	size_t len = 0;
	char *value = NULL;
	int rc;

	CHECK(strata_put(db, "k1", 2, "hello", 5, 0, &err) == STRATA_OK, "put");
	CHECK(err == NULL, "put sets no error");
	rc = strata_get(db, "k1", 2, buf, sizeof(buf), &len, &err);
	CHECK(rc == STRATA_OK && len == 5 && memcmp(buf, "hello", 5) == 0, "get returns the value");

	rc = strata_get(db, "k1", 2, buf, 2, &len, &err);
	CHECK(rc == STRATA_BUFFER_TOO_SMALL && len == 5, "short buffer reports the length needed");
	strata_error_free(err);
	err = NULL;

	rc = strata_get_alloc(db, "k1", 2, &value, &len, &err);
	CHECK(rc == STRATA_OK && value && len == 5 && strcmp(value, "hello") == 0, "get_alloc returns a copy");
	strata_free(value);

	CHECK(strata_put(db, "empty", 5, NULL, 0, 0, &err) == STRATA_OK, "an empty value with a null pointer");
	rc = strata_get_alloc(db, "empty", 5, &value, &len, &err);
	CHECK(rc == STRATA_OK && value != NULL && len == 0, "an empty value reads back as empty, not missing");
	strata_free(value);
	len = 99;
	rc = strata_get(db, "empty", 5, NULL, 0, &len, &err);
	CHECK(rc == STRATA_OK && len == 0 && err == NULL, "an empty value fits a NULL zero-length buffer");

	CHECK(strata_delete(db, "k1", 2, 1, &err) == STRATA_OK, "delete (sync)");
	rc = strata_get(db, "k1", 2, buf, sizeof(buf), &len, &err);
	CHECK(rc == STRATA_NOT_FOUND && len == 0 && err == NULL, "deleted key is not found, no error set");
	rc = strata_get_alloc(db, "never", 5, &value, &len, &err);
	CHECK(rc == STRATA_NOT_FOUND && value == NULL && err == NULL, "get_alloc of a missing key");
}

static void test_batch(strata_db_t *db)
{
	strata_error_t *err = NULL;
	strata_writebatch_t *b = strata_writebatch_create();
	uint64_t lsn1 = 0, lsn2 = 0;
	char key[16], buf[16];
	size_t len;
	int i, ok = 1;

	for (i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "b%03d", i);
		CHECK(strata_writebatch_put(b, key, strlen(key), key, strlen(key), &err) == STRATA_OK, "batch put");
	}
	CHECK(strata_writebatch_delete(b, "b050", 4, &err) == STRATA_OK, "batch delete");
	CHECK(strata_writebatch_count(b) == 101, "batch counts its entries");
	CHECK(strata_write(db, b, 0, &lsn1, &err) == STRATA_OK, "write batch");
	strata_writebatch_clear(b);
	CHECK(strata_writebatch_count(b) == 0, "clear empties the batch");
	CHECK(strata_writebatch_put(b, "b000", 4, "new", 3, &err) == STRATA_OK, "batch put after clear");
	CHECK(strata_write(db, b, 1, &lsn2, &err) == STRATA_OK, "write batch (sync)");
	CHECK(lsn2 > lsn1, "LSNs increase");
	strata_writebatch_destroy(b);

	for (i = 1; i < 100; i++) {
		snprintf(key, sizeof(key), "b%03d", i);
		int rc = strata_get(db, key, strlen(key), buf, sizeof(buf), &len, &err);
		if (i == 50)
			ok &= rc == STRATA_NOT_FOUND;
		else
			ok &= rc == STRATA_OK && len == strlen(key) && memcmp(buf, key, len) == 0;
	}
	CHECK(ok, "every batch entry reads back; the deleted one is gone");
	CHECK(strata_get(db, "b000", 4, buf, sizeof(buf), &len, &err) == STRATA_OK && len == 3 &&
		      memcmp(buf, "new", 3) == 0,
	      "the later batch wins");
}

/* The read queue: gets submitted with their buffers and tags, reaped as they
 * complete, from the open layer and from a layer file; a full queue refuses;
 * cancelled gets come back cancelled or answered; destroy with gets in flight. */
static void test_read_queue(strata_db_t *db)
{
	strata_error_t *err = NULL;
	strata_read_queue_t *q;
	strata_read_completion_t done[64];
	static char bufs[64][16];
	char key[16];
	size_t n = 0, got = 0, cancelled = 0;
	int i, ok = 1, rc;

	for (i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "q%03d", i);
		if (i % 9 != 4)
			CHECK(strata_put(db, key, strlen(key), key, strlen(key), 0, &err) == STRATA_OK, "queue setup: put");
	}
	CHECK(strata_read_queue_create(db, 0, &err) == NULL && strata_error_code(err) == STRATA_INVALID_ARGUMENT,
	      "a queue of depth 0 is refused");
	q = strata_read_queue_create(db, 64, &err);
	CHECK(q != NULL, "queue create");
	if (!q)
		return;
	for (int round = 0; round < 2; round++) {
		for (i = 0; i < 64; i++) {
			snprintf(key, sizeof(key), "q%03d", i);
			memset(bufs[i], 0, sizeof(bufs[i]));
			rc = strata_read_queue_submit(q, key, strlen(key), bufs[i], i == 7 ? 2 : sizeof(bufs[i]),
						      1000 + i, &err);
			ok &= rc == STRATA_OK;
		}
		CHECK(ok, "64 gets submitted");
		CHECK(strata_read_queue_submit(q, "q000", 4, bufs[0], 16, 1, &err) == STRATA_INVALID_ARGUMENT,
		      "a full queue refuses a submit");
		CHECK(strata_read_queue_outstanding(q) == 64, "64 outstanding");
		got = 0;
		while (strata_read_queue_outstanding(q) > 0) {
			rc = strata_read_queue_reap(q, 1, 64, done, &n, &err);
			CHECK(rc == STRATA_OK && n >= 1, "reap moves at least one");
			if (rc != STRATA_OK || n == 0)
				break;
			for (size_t j = 0; j < n; j++) {
				int k = (int)(done[j].tag - 1000);
				snprintf(key, sizeof(key), "q%03d", k);
				if (k % 9 == 4)
					ok &= done[j].status == STRATA_NOT_FOUND && done[j].error == NULL;
				else if (k == 7)
					ok &= done[j].status == STRATA_BUFFER_TOO_SMALL && done[j].value_len == 4;
				else
					ok &= done[j].status == STRATA_OK && done[j].value_len == 4 &&
					      memcmp(bufs[k], key, 4) == 0 && done[j].error == NULL;
			}
			got += n;
		}
		CHECK(ok && got == 64, round == 0 ? "every get answers (open layer)" : "every get answers (layer file)");
		CHECK(strata_flush(db, &err) == STRATA_OK, "queue setup: flush");
	}
	/* Cancel: each get comes back once, cancelled (with its error) or answered. */
	for (i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "q%03d", i);
		ok &= strata_read_queue_submit(q, key, strlen(key), bufs[i], 16, 5, &err) == STRATA_OK;
	}
	strata_read_queue_cancel(q, 5);
	got = 0;
	while (strata_read_queue_outstanding(q) > 0 &&
	       strata_read_queue_reap(q, 1, 64, done, &n, &err) == STRATA_OK) {
		for (size_t j = 0; j < n; j++) {
			ok &= done[j].tag == 5;
			if (done[j].status == STRATA_CANCELLED) {
				ok &= done[j].error != NULL && strata_error_code(done[j].error) == STRATA_CANCELLED;
				cancelled++;
			} else {
				ok &= done[j].status == STRATA_OK || done[j].status == STRATA_NOT_FOUND;
			}
			strata_error_free(done[j].error);
		}
		got += n;
	}
	CHECK(ok && got == 64, "cancelled gets come back once each, cancelled or answered");
	if (getenv("STRATA_API_TEST_VERBOSE"))
		printf("cancelled %zu of 64\n", cancelled);
	for (i = 0; i < 32; i++)
		ok &= strata_read_queue_submit(q, "q001", 4, bufs[i], 16, i, &err) == STRATA_OK;
	CHECK(ok && strata_read_queue_commit(q, &err) == STRATA_OK, "submit and commit before destroy");
	strata_read_queue_destroy(q);
	strata_read_queue_destroy(NULL);
	strata_error_free(err);
}

static void test_multi_get(strata_db_t *db)
{
	strata_error_t *err = NULL;
	/* present, absent, deleted, present with a too-small buffer, present in a
	 * zero-length NULL buffer, an empty value, a duplicate of the first */
	const char *keys[7] = {"m-a", "m-absent", "m-del", "m-long", "m-a", "m-empty", "m-a"};
	size_t key_lens[7], buf_lens[7], value_lens[7], lens[7];
	char b0[16], b1[16], b2[16], b3[4], b5[4], b6[16];
	char *bufs[7] = {b0, b1, b2, b3, NULL, b5, b6};
	int statuses[7], rc, i;
	const char *one_key[1] = {"m-a"};
	size_t one_len[1] = {3}, one_cap[1] = {sizeof(b0)};
	char *one_buf[1] = {b0};
	static char too_long[5000]; /* keys are at most 4096 bytes */

	for (i = 0; i < 7; i++) {
		key_lens[i] = strlen(keys[i]);
		value_lens[i] = 12345;
		statuses[i] = -1;
	}
	buf_lens[0] = sizeof(b0);
	buf_lens[1] = sizeof(b1);
	buf_lens[2] = sizeof(b2);
	buf_lens[3] = sizeof(b3);
	buf_lens[4] = 0;
	buf_lens[5] = sizeof(b5);
	buf_lens[6] = sizeof(b6);
	CHECK(strata_put(db, "m-a", 3, "alpha", 5, 0, &err) == STRATA_OK, "multi_get setup: put");
	CHECK(strata_put(db, "m-del", 5, "gone", 4, 0, &err) == STRATA_OK, "multi_get setup: put");
	CHECK(strata_delete(db, "m-del", 5, 0, &err) == STRATA_OK, "multi_get setup: delete");
	CHECK(strata_put(db, "m-long", 6, "0123456789", 10, 0, &err) == STRATA_OK, "multi_get setup: put");
	CHECK(strata_put(db, "m-empty", 7, NULL, 0, 0, &err) == STRATA_OK, "multi_get setup: put empty");

	rc = strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err);
	CHECK(rc == STRATA_OK && err == NULL, "multi_get succeeds with per-key answers, no error set");
	CHECK(statuses[0] == STRATA_OK && value_lens[0] == 5 && memcmp(b0, "alpha", 5) == 0,
	      "multi_get: a present key");
	CHECK(statuses[1] == STRATA_NOT_FOUND && value_lens[1] == 0, "multi_get: an absent key");
	CHECK(statuses[2] == STRATA_NOT_FOUND && value_lens[2] == 0, "multi_get: a deleted key");
	CHECK(statuses[3] == STRATA_BUFFER_TOO_SMALL && value_lens[3] == 10,
	      "multi_get: a too-small buffer reports the length needed");
	CHECK(statuses[4] == STRATA_BUFFER_TOO_SMALL && value_lens[4] == 5,
	      "multi_get: a NULL zero-length buffer asks for the length");
	CHECK(statuses[5] == STRATA_OK && value_lens[5] == 0, "multi_get: an empty value is found, not missing");
	CHECK(statuses[6] == STRATA_OK && value_lens[6] == 5 && memcmp(b6, "alpha", 5) == 0,
	      "multi_get: a duplicate key answers again");

	/* value_lens may be the buf_lens array itself: capacities in, lengths out. */
	for (i = 0; i < 7; i++)
		lens[i] = buf_lens[i];
	rc = strata_multi_get(db, 7, keys, key_lens, bufs, lens, lens, statuses, &err);
	CHECK(rc == STRATA_OK && lens[0] == 5 && lens[1] == 0 && lens[3] == 10 && statuses[3] == STRATA_BUFFER_TOO_SMALL,
	      "multi_get: lengths in and out through one array");

	/* After a flush the values come from a layer file (the batched block reads). */
	CHECK(strata_flush(db, &err) == STRATA_OK, "multi_get setup: flush");
	memset(b0, 0, sizeof(b0));
	rc = strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err);
	CHECK(rc == STRATA_OK && statuses[0] == STRATA_OK && value_lens[0] == 5 && memcmp(b0, "alpha", 5) == 0 &&
		      statuses[1] == STRATA_NOT_FOUND && statuses[2] == STRATA_NOT_FOUND &&
		      statuses[3] == STRATA_BUFFER_TOO_SMALL && value_lens[3] == 10 && statuses[5] == STRATA_OK &&
		      value_lens[5] == 0,
	      "multi_get after a flush: the same answers");

	/* An empty value fits a NULL zero-length buffer. */
	one_key[0] = "m-empty";
	one_len[0] = 7;
	one_cap[0] = 0;
	one_buf[0] = NULL;
	rc = strata_multi_get(db, 1, one_key, one_len, one_buf, one_cap, value_lens, statuses, &err);
	CHECK(rc == STRATA_OK && statuses[0] == STRATA_OK && value_lens[0] == 0,
	      "multi_get: an empty value into a NULL zero-length buffer");
	one_key[0] = "m-a";
	one_len[0] = 3;
	one_cap[0] = sizeof(b0);
	one_buf[0] = b0;

	/* n = 0: nothing to read; the arrays may be NULL. */
	CHECK(strata_multi_get(db, 0, NULL, NULL, NULL, NULL, NULL, NULL, &err) == STRATA_OK && err == NULL,
	      "multi_get of no keys");

	/* Bad arguments: an error, and the output arrays are left alone. */
	statuses[0] = -1;
	value_lens[0] = 777;
	expect_error(&err, strata_multi_get(NULL, 1, one_key, one_len, one_buf, one_cap, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null db");
	expect_error(&err, strata_multi_get(db, 1, NULL, one_len, one_buf, one_cap, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null keys");
	expect_error(&err, strata_multi_get(db, 1, one_key, NULL, one_buf, one_cap, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null key_lens");
	expect_error(&err, strata_multi_get(db, 1, one_key, one_len, NULL, one_cap, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null bufs");
	expect_error(&err, strata_multi_get(db, 1, one_key, one_len, one_buf, NULL, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null buf_lens");
	expect_error(&err, strata_multi_get(db, 1, one_key, one_len, one_buf, one_cap, NULL, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null value_lens");
	expect_error(&err, strata_multi_get(db, 1, one_key, one_len, one_buf, one_cap, value_lens, NULL, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: null statuses");
	CHECK(statuses[0] == -1 && value_lens[0] == 777, "multi_get: a bad argument leaves the outputs alone");

	/* A NULL key among good ones names its index; so does an empty key. */
	keys[1] = NULL;
	rc = strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err);
	CHECK(rc == STRATA_INVALID_ARGUMENT && err && strstr(strata_error_message(err), "keys[1]"),
	      "multi_get: a null key is named by its index");
	strata_error_free(err);
	err = NULL;
	keys[1] = "m-absent";
	key_lens[2] = 0;
	expect_error(&err, strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: an empty key");
	key_lens[2] = strlen(keys[2]);
	bufs[1] = NULL;
	expect_error(&err, strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: a null buffer with a length");
	bufs[1] = b1;
	memset(too_long, 'k', sizeof(too_long));
	keys[0] = too_long;
	key_lens[0] = sizeof(too_long);
	expect_error(&err, strata_multi_get(db, 7, keys, key_lens, bufs, buf_lens, value_lens, statuses, &err),
		     STRATA_INVALID_ARGUMENT, "multi_get: a key over the limit is the engine's refusal");
	CHECK(statuses[0] == STRATA_INVALID_ARGUMENT && value_lens[0] == 0 && statuses[6] == STRATA_INVALID_ARGUMENT,
	      "multi_get: an engine refusal marks every key");
	keys[0] = "m-a";
	key_lens[0] = 3;
	/* A null err slot is allowed. */
	CHECK(strata_multi_get(db, 1, one_key, one_len, NULL, one_cap, value_lens, statuses, NULL) ==
		      STRATA_INVALID_ARGUMENT,
	      "multi_get: null err slot");
}

static void test_bad_arguments(strata_db_t *db)
{
	strata_error_t *err = NULL;
	char buf[8];
	size_t len;

	expect_error(&err, strata_put(NULL, "k", 1, "v", 1, 0, &err), STRATA_INVALID_ARGUMENT, "null db");
	expect_error(&err, strata_put(db, NULL, 1, "v", 1, 0, &err), STRATA_INVALID_ARGUMENT, "null key");
	expect_error(&err, strata_put(db, "k", 0, "v", 1, 0, &err), STRATA_INVALID_ARGUMENT, "empty key");
	expect_error(&err, strata_put(db, "k", 1, NULL, 5, 0, &err), STRATA_INVALID_ARGUMENT,
		     "null value with a length");
	expect_error(&err, strata_put(db, "k", (size_t)-1, "v", 1, 0, &err), STRATA_INVALID_ARGUMENT,
		     "absurd key length");
	expect_error(&err, strata_get(db, "k", 1, buf, sizeof(buf), NULL, &err), STRATA_INVALID_ARGUMENT,
		     "null value_len");
	expect_error(&err, strata_get(db, "k", 1, NULL, 8, &len, &err), STRATA_INVALID_ARGUMENT,
		     "null buffer with a length");
	expect_error(&err, strata_write(db, NULL, 0, NULL, &err), STRATA_INVALID_ARGUMENT, "null batch");
	expect_error(&err, strata_writebatch_put(NULL, "k", 1, "v", 1, &err), STRATA_INVALID_ARGUMENT,
		     "null batch put");
	expect_error(&err, strata_sync(NULL, &err), STRATA_INVALID_ARGUMENT, "null db sync");
	expect_error(&err, strata_close(NULL, &err), STRATA_INVALID_ARGUMENT, "null db close");
	CHECK(strata_stats_json(NULL, &err) == NULL, "stats of a null db is null");
	expect_error(&err, STRATA_INVALID_ARGUMENT, STRATA_INVALID_ARGUMENT, "stats of a null db sets an error");

	/* A null err is allowed: the status alone reports the failure. */
	CHECK(strata_put(db, NULL, 1, "v", 1, 0, NULL) == STRATA_INVALID_ARGUMENT, "null err slot");

	/* An error left in the slot is freed and replaced, not leaked. */
	strata_put(db, NULL, 1, "v", 1, 0, &err);
	CHECK(strata_put(NULL, "k", 1, "v", 1, 0, &err) == STRATA_INVALID_ARGUMENT && err != NULL,
	      "a second error replaces the first");
	strata_error_free(err);
	err = NULL;

	CHECK(strcmp(strata_error_message(NULL), "") == 0, "message of a null error is empty");
	CHECK(strata_error_code(NULL) == STRATA_OK, "code of a null error is OK");
}

static void test_config_errors(const char *dir)
{
	strata_error_t *err = NULL;
	strata_options_t *opts;
	char *json;

	CHECK(strata_open(dir, "{\"io_mode\": \"fast\"}", &err) == NULL, "bad io_mode refuses to open");
	CHECK(err && strata_error_code(err) == STRATA_CONFIG_ERROR && strstr(strata_error_message(err), "fast"),
	      "the message names the bad value");
	strata_error_free(err);
	err = NULL;

	CHECK(strata_open(dir, "{\"io_mod\": \"direct\"}", &err) == NULL, "unknown key refuses to open");
	CHECK(err && strstr(strata_error_message(err), "io_mod"), "the message names the unknown key");
	strata_error_free(err);
	err = NULL;

	CHECK(strata_open(dir, "{ not json", &err) == NULL && err && strata_error_code(err) == STRATA_CONFIG_ERROR,
	      "malformed JSON refuses to open");
	strata_error_free(err);
	err = NULL;

	CHECK(strata_open(NULL, "io_mode = \"buffered\"", &err) == NULL && err &&
		      strata_error_code(err) == STRATA_INVALID_ARGUMENT,
	      "no path anywhere is an error");
	strata_error_free(err);
	err = NULL;

	opts = strata_options_create();
	CHECK(strata_options_set(opts, "writer_buffer_bytes", "256KiB", &err) == STRATA_OK, "options_set size");
	expect_error(&err, strata_options_set(opts, "nope", "1", &err), STRATA_CONFIG_ERROR, "options_set unknown key");
	json = strata_options_to_json(opts, &err);
	CHECK(json && strstr(json, "\"writer_buffer_bytes\":262144"), "options_to_json shows the set value");
	strata_free(json);
	strata_options_destroy(opts);
}

/*
 * A remote store through the config key "remote" (a directory store beside
 * `dir`): written, synced to the store, then restored into an empty
 * directory from the store alone.
 */
static void test_remote(const char *dir)
{
	char config[4096], restored[4096];
	strata_error_t *err = NULL;
	strata_db_t *db;
	char buf[16];
	size_t len = 0;

	snprintf(config, sizeof(config), "{\"io_mode\": \"buffered\", \"remote\": \"%s.bucket\"}", dir);
	snprintf(restored, sizeof(restored), "%s.restored", dir);
	db = strata_open(NULL, "{\"remote\": \"ftp://nope\", \"path\": \"/nonexistent\"}", &err);
	CHECK(db == NULL && err && strata_error_code(err) == STRATA_CONFIG_ERROR &&
		      strstr(strata_error_message(err), "ftp://nope"),
	      "a remote URL no store has refuses to open, naming it");
	strata_error_free(err);
	err = NULL;
	{
		char written[4096];

		snprintf(written, sizeof(written), "%s.written", dir);
		db = strata_open(written, config, &err);
		CHECK(db != NULL, "open with a remote store");
		if (!db) {
			fprintf(stderr, "  %s\n", strata_error_message(err));
			strata_error_free(err);
			return;
		}
	}
	CHECK(strata_put(db, "far", 3, "away", 4, 0, &err) == STRATA_OK, "put");
	CHECK(strata_sync_remote(db, &err) == STRATA_OK, "sync_remote");
	CHECK(strata_close(db, &err) == STRATA_OK, "close");
	db = strata_open(restored, config, &err);
	CHECK(db != NULL, "open an empty directory from the store");
	if (!db)
		return;
	CHECK(strata_get(db, "far", 3, buf, sizeof(buf), &len, &err) == STRATA_OK && len == 4 &&
		      memcmp(buf, "away", 4) == 0,
	      "the restored database holds what was synced to the store");
	CHECK(strata_close(db, &err) == STRATA_OK, "close the restored one");
	/* A follower: reads the store's database, refuses writes. */
	{
		char follower[4096], follow_config[4096];
		uint64_t lsn = 0;

		snprintf(follower, sizeof(follower), "%s.follower", dir);
		snprintf(follow_config, sizeof(follow_config),
			 "{\"io_mode\": \"buffered\", \"remote\": \"%s.bucket\", \"remote_follower\": true}", dir);
		db = strata_open(follower, follow_config, &err);
		CHECK(db != NULL, "open a follower of the store");
		if (!db) {
			fprintf(stderr, "  %s\n", strata_error_message(err));
			strata_error_free(err);
			return;
		}
		CHECK(strata_get(db, "far", 3, buf, sizeof(buf), &len, &err) == STRATA_OK && len == 4 &&
			      memcmp(buf, "away", 4) == 0,
		      "the follower reads what the store holds");
		expect_error(&err, strata_put(db, "near", 4, "here", 4, 0, &err), STRATA_READ_ONLY,
			     "a follower refuses a put");
		CHECK(strata_refresh_remote(db, &lsn, &err) == STRATA_OK && lsn == 1,
		      "refresh_remote: the newest index's LSN");
		CHECK(strata_close(db, &err) == STRATA_OK, "close the follower");
	}
	/*
	 * The restored directory holds none of the layer files (they are read
	 * from the store): without the store it refuses to open, saying so.
	 */
	db = strata_open(restored, "{\"io_mode\": \"buffered\"}", &err);
	CHECK(db == NULL && err && strata_error_code(err) == STRATA_INVALID_ARGUMENT &&
		      strstr(strata_error_message(err), "opened with a remote store"),
	      "opened without its store, a restored directory says it needs it");
	strata_error_free(err);
	err = NULL;
	/* The directory that wrote (every file local) opens without the store,
	 * and there sync_remote is an error, not a crash. */
	{
		char written[4096];

		snprintf(written, sizeof(written), "%s.written", dir);
		db = open_db(written);
	}
	CHECK(db != NULL, "reopen without the store");
	if (db) {
		expect_error(&err, strata_sync_remote(db, &err), STRATA_INVALID_ARGUMENT, "sync_remote without a store");
		CHECK(strata_close(db, &err) == STRATA_OK, "close");
	}
}

int main(int argc, char **argv)
{
	strata_error_t *err = NULL;
	strata_db_t *db;
	char buf[16], *stats;
	size_t len = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s <empty dir>\n", argv[0]);
		return 2;
	}
	CHECK(strata_version() && strlen(strata_version()) > 0, "version string");
	test_config_errors(argv[1]);
	test_remote(argv[1]);

	db = open_db(argv[1]);
	CHECK(db != NULL, "open");
	if (!db)
		goto out;
	test_put_get_delete(db);
	test_batch(db);
	test_multi_get(db);
	test_read_queue(db);
	test_bad_arguments(db);
	CHECK(strata_put(db, "persist", 7, "across-reopen", 13, 0, &err) == STRATA_OK, "put before close");
	CHECK(strata_sync(db, &err) == STRATA_OK, "sync");
	CHECK(strata_flush(db, &err) == STRATA_OK, "flush");
	CHECK(strata_compact(db, &err) == STRATA_OK, "compact");
	stats = strata_stats_json(db, &err);
	CHECK(stats && stats[0] == '{', "stats is a JSON object");
	CHECK(stats && strstr(stats, "\"last_lsn\":") && strstr(stats, "\"io\":{") && strstr(stats, "\"log\":{"),
	      "stats has the engine's fields and per-file-class I/O counts");
	CHECK(stats && strstr(stats, "\"image\":{") && strstr(stats, "\"other\":{") &&
		      strstr(stats, "\"retries\":") && strstr(stats, "\"compaction_write_bytes\":"),
	      "stats has every file class, zeros included, read retries and compaction bytes");
	if (stats && getenv("STRATA_API_TEST_VERBOSE"))
		printf("%s\n", stats);
	strata_free(stats);
	CHECK(strata_close(db, &err) == STRATA_OK, "close");
	if (err)
		fprintf(stderr, "  %s\n", strata_error_message(err));

	/* Reopen: everything written before close is there. */
	db = open_db(argv[1]);
	CHECK(db != NULL, "reopen");
	if (!db)
		goto out;
	CHECK(strata_get(db, "persist", 7, buf, sizeof(buf), &len, &err) == STRATA_OK && len == 13 &&
		      memcmp(buf, "across-reopen", 13) == 0,
	      "a value persists across close and reopen");
	CHECK(strata_get(db, "b007", 4, buf, sizeof(buf), &len, &err) == STRATA_OK && len == 4,
	      "a batch persists across close and reopen");
	CHECK(strata_get(db, "k1", 2, buf, sizeof(buf), &len, &err) == STRATA_NOT_FOUND,
	      "a delete persists across close and reopen");
	CHECK(strata_close(db, &err) == STRATA_OK, "close after reopen");
out:
	strata_error_free(err);
	printf("c api tests: %d checks passed, %d failed\n", checks_passed, checks_failed);
	return checks_failed ? 1 : 0;
}

/*
 * strata.h — C API of the strata storage engine (libstrata_ffi.so).
 *
 * Hand-maintained; crates/strata-ffi/tests/header_matches_exports.rs checks
 * that every function and status code here matches the library's exports.
 *
 * Conventions (LevelDB c.h style), the same for every function:
 *  - All types are opaque pointers, created and destroyed only through this
 *    API.
 *  - Keys and values are passed as a pointer plus a length in bytes. Keys are
 *    1..=4096 bytes and never null. A value pointer may be null only with
 *    length 0. Bytes are copied; the caller keeps ownership of its buffers.
 *  - The last parameter is `strata_error_t **err`. Pass NULL if only the status
 *    matters. Otherwise `*err` should be NULL on entry; on failure it is set to
 *    a new error (an error already in `*err` is freed and replaced). Read it
 *    with strata_error_message() / strata_error_code(), free it with
 *    strata_error_free().
 *  - Functions return an int status: STRATA_OK (0) on success, one of the
 *    STRATA_* codes below otherwise. Constructors return a pointer, NULL on
 *    failure. STRATA_NOT_FOUND is an answer, not a failure: it sets no error.
 *  - Memory returned to the caller (strata_get_alloc values, JSON strings) is
 *    freed with strata_free().
 *  - No panic or exception crosses this boundary: an internal failure is
 *    STRATA_PANIC with a message.
 *  - Thread safety: a strata_db_t may be used by many threads at once, except
 *    strata_close(), which must be the last call on it. A write batch, an
 *    options object and an error are used by one thread at a time.
 *  - One process opens a database directory at a time.
 *
 * Configuration (strata_open, strata_options_load): JSON text (starts with
 * '{'), TOML text (holds '=' or a newline), or the path of a config file
 * (.json or .toml; other extensions by content). NULL reads the STRATA_CONFIG
 * environment variable (text or path; unset means defaults). Keys:
 *   path                  database directory, used when the path argument is NULL
 *   io_mode               "buffered" | "direct" | "direct-rw"
 *   io_engine             "sync" | "io-uring"
 *   layer_size_bytes_max  size: integer, or string like "64MiB"
 *   writer_buffer_bytes   size
 *   value_size_bytes_max  size
 *   fallback_to_buffered  true | false (use buffered I/O where O_DIRECT is refused)
 *   alignment_bytes       direct-I/O alignment override (power of two); null/"none": the kernel's
 *   history_lsns          versions kept below the last LSN; null/"none": all
 *   delta_block_bytes     target data block size of delta layers
 *   background_flush      true | false
 *   frozen_layers_max     frozen layers waiting for their flush before writers stall (1..=1024)
 *   create_if_missing     true | false
 * Unknown keys and bad values are STRATA_CONFIG_ERROR with a message naming
 * the key and the source.
 */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
#define STRATA_OK 0
#define STRATA_NOT_FOUND 1        /* get: no such key; no error is set */
#define STRATA_INVALID_ARGUMENT 2 /* null pointer, bad length, limit exceeded */
#define STRATA_CONFIG_ERROR 3     /* unreadable config, unknown key, bad value */
#define STRATA_IO_ERROR 4         /* OS I/O error, O_DIRECT refused */
#define STRATA_CORRUPTION 5       /* bytes on disk failed a check */
#define STRATA_BUFFER_TOO_SMALL 6 /* get: *value_len holds the size needed */
#define STRATA_CLOSED 7           /* database closed or stopped */
#define STRATA_PANIC 8            /* internal failure caught at the boundary */
#define STRATA_ERROR 9            /* any other engine error */
#define STRATA_NOT_DURABLE 10     /* write: applied, but maybe not durable (reopen, compare the last LSN) */
#define STRATA_CANCELLED 11       /* read queue: the get was cancelled */
#define STRATA_READ_ONLY 12       /* a follower (config "remote_follower"): only its writer writes */

typedef struct strata_db_t strata_db_t;
typedef struct strata_writebatch_t strata_writebatch_t;
typedef struct strata_options_t strata_options_t;
typedef struct strata_error_t strata_error_t;

/* Library */
extern const char *strata_version(void);
extern void strata_free(void *ptr);

/* Errors */
extern void strata_error_free(strata_error_t *err);
extern const char *strata_error_message(const strata_error_t *err); /* never NULL */
extern int strata_error_code(const strata_error_t *err);

/* Options */
extern strata_options_t *strata_options_create(void);
extern void strata_options_destroy(strata_options_t *opts);
/* config: text or path; NULL reads STRATA_CONFIG. On error nothing is applied. */
extern int strata_options_load(strata_options_t *opts, const char *config, strata_error_t **err);
/* One key in text form, e.g. ("io_mode", "buffered"). */
extern int strata_options_set(strata_options_t *opts, const char *key, const char *value,
                              strata_error_t **err);
/* The effective options as JSON; free with strata_free. */
extern char *strata_options_to_json(const strata_options_t *opts, strata_error_t **err);

/* Open and close */
/* path may be NULL when the config holds "path"; config NULL reads STRATA_CONFIG.
 * Both opens let STRATA_IO_MODE / STRATA_IO_ENGINE, where set, override the
 * options' io_mode / io_engine. */
extern strata_db_t *strata_open(const char *path, const char *config, strata_error_t **err);
extern strata_db_t *strata_open_with_options(const char *path, const strata_options_t *opts,
                                             strata_error_t **err);
/* Frees db whatever the status. */
extern int strata_close(strata_db_t *db, strata_error_t **err);
/* The database directory; free with strata_free. */
extern char *strata_db_path(const strata_db_t *db, strata_error_t **err);

/* Single writes: a batch of one. sync != 0: durable on return. */
extern int strata_put(const strata_db_t *db, const char *key, size_t key_len, const char *value,
                      size_t value_len, int sync, strata_error_t **err);
extern int strata_delete(const strata_db_t *db, const char *key, size_t key_len, int sync,
                         strata_error_t **err);

/* Reads.
 * strata_get copies into buf: STRATA_OK with *value_len = length;
 * STRATA_NOT_FOUND with *value_len = 0; STRATA_BUFFER_TOO_SMALL (nothing
 * copied) with *value_len = length needed. buf may be NULL when buf_len is 0.
 * strata_get_alloc returns a malloc'd copy in *value (free with strata_free;
 * NUL-terminated one byte past the end; NULL when not found). */
extern int strata_get(const strata_db_t *db, const char *key, size_t key_len, char *buf,
                      size_t buf_len, size_t *value_len, strata_error_t **err);
extern int strata_get_alloc(const strata_db_t *db, const char *key, size_t key_len, char **value,
                            size_t *value_len, strata_error_t **err);
/* strata_multi_get reads n keys at one point in time, their block reads
 * submitted together (one io_uring submission per round with io_engine
 * "io-uring" and O_DIRECT reads). Key i is keys[i] / key_lens[i]; its value is
 * copied into bufs[i] (capacity buf_lens[i]; bufs[i] may be NULL when
 * buf_lens[i] is 0). Per key, statuses[i] is STRATA_OK with value_lens[i] =
 * length; STRATA_NOT_FOUND with value_lens[i] = 0; or STRATA_BUFFER_TOO_SMALL
 * (nothing copied) with value_lens[i] = length needed. None of these sets an
 * error. Returns STRATA_OK when every key has its answer; otherwise the
 * failure, with *err set: a bad argument leaves the output arrays untouched,
 * an engine failure sets every statuses[i] to the returned code and
 * value_lens[i] to 0. value_lens may be the same array as buf_lens; buffers
 * must not overlap keys, arrays or each other. Arrays may be NULL when n is 0. */
extern int strata_multi_get(const strata_db_t *db, size_t n, const char *const *keys,
                            const size_t *key_lens, char *const *bufs, const size_t *buf_lens,
                            size_t *value_lens, int *statuses, strata_error_t **err);

/* Read queues: many gets in flight on one thread, without a thread per read.
 * Submit gets (each with the caller's buffer and tag), then reap them as their
 * reads complete: each get not answered from memory or the block cache is one
 * block read (and one more for a large value), submitted together with the
 * others on io_uring with registered buffers. A queue holds at most depth
 * (1..=4096) gets submitted and not yet reaped; a submit beyond is
 * STRATA_INVALID_ARGUMENT and submits nothing. Use a queue from one thread at
 * a time; it stays usable after strata_close (it keeps what it reads). */
typedef struct strata_read_queue_t strata_read_queue_t;
typedef struct {
    uint64_t tag;        /* the caller's tag from submit */
    int status;          /* STRATA_OK (value in the buffer), STRATA_NOT_FOUND,
                          * STRATA_BUFFER_TOO_SMALL (nothing copied), or an
                          * error code (STRATA_CANCELLED, STRATA_IO_ERROR, ...) */
    size_t value_len;    /* OK: bytes copied; BUFFER_TOO_SMALL: bytes needed; else 0 */
    strata_error_t *error; /* an error status: its error, free with strata_error_free; else NULL */
} strata_read_completion_t;
extern strata_read_queue_t *strata_read_queue_create(const strata_db_t *db, size_t depth,
                                                     strata_error_t **err);
/* Cancels what is in flight (writing into no buffer) and frees the queue. */
extern void strata_read_queue_destroy(strata_read_queue_t *q);
/* A get of key at the latest LSN; its value goes into buf (buf_len bytes; buf
 * may be NULL when buf_len is 0), which must stay writable until the get is
 * reaped or the queue destroyed. The key is copied. */
extern int strata_read_queue_submit(strata_read_queue_t *q, const char *key, size_t key_len,
                                    char *buf, size_t buf_len, uint64_t tag, strata_error_t **err);
/* Hands the gets submitted so far to the kernel without waiting (reap does it too). */
extern int strata_read_queue_commit(strata_read_queue_t *q, strata_error_t **err);
/* Reaps at least min (at most the gets outstanding) and at most max completed
 * gets into out (room for max), waiting as needed; *n says how many. A failure
 * here is the queue's, not a get's (a get's is in its completion). */
extern int strata_read_queue_reap(strata_read_queue_t *q, size_t min, size_t max,
                                  strata_read_completion_t *out, size_t *n, strata_error_t **err);
/* Cancels the gets in flight submitted with tag (reaped with STRATA_CANCELLED);
 * returns how many. */
extern size_t strata_read_queue_cancel(strata_read_queue_t *q, uint64_t tag);
/* Gets submitted and not yet reaped. */
extern size_t strata_read_queue_outstanding(const strata_read_queue_t *q);

/* Write batches: applied atomically at one LSN. */
extern strata_writebatch_t *strata_writebatch_create(void);
extern void strata_writebatch_destroy(strata_writebatch_t *batch);
extern void strata_writebatch_clear(strata_writebatch_t *batch);
extern size_t strata_writebatch_count(const strata_writebatch_t *batch);
extern int strata_writebatch_put(strata_writebatch_t *batch, const char *key, size_t key_len,
                                 const char *value, size_t value_len, strata_error_t **err);
extern int strata_writebatch_delete(strata_writebatch_t *batch, const char *key, size_t key_len,
                                    strata_error_t **err);
/* lsn may be NULL; the batch is unchanged (clear it to reuse it). */
extern int strata_write(const strata_db_t *db, const strata_writebatch_t *batch, int sync,
                        uint64_t *lsn, strata_error_t **err);

/* Maintenance */
extern int strata_sync(const strata_db_t *db, strata_error_t **err);  /* all writes durable */
extern int strata_flush(const strata_db_t *db, strata_error_t **err); /* in-memory layer to a file */
/* Flush, then compact every L0 layer into L1 runs: no compaction left due. */
extern int strata_compact(const strata_db_t *db, strata_error_t **err);
/* The remote store (config key "remote") holds every write made so far. */
extern int strata_sync_remote(const strata_db_t *db, strata_error_t **err);
/* A follower (config "remote_follower"): moves to the store's newest index,
 * if newer; *lsn (may be NULL) gets the LSN the database now shows. */
extern int strata_refresh_remote(const strata_db_t *db, uint64_t *lsn, strata_error_t **err);
/* Statistics as a JSON object; free with strata_free. */
extern char *strata_stats_json(const strata_db_t *db, strata_error_t **err);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_H */

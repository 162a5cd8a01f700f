/*
 * strata_engine.c — fio external ioengine over strata's C API (strata.h).
 *
 *   fio --ioengine=external:fio/build/libfio_strata.so [engine options] job.fio
 *
 * Built against fio 3.33's internal headers (Debian bookworm's fio) by
 * fio/build.sh; the engine struct layout must match the fio binary that
 * loads it, so the build refuses any other fio version.
 *
 * Mapping (see fio/README.md):
 *  - One strata database per fio job, at "<first file name of the job>.strata"
 *    (fio's directory= and filename= apply), or at the strata config's `path`
 *    with disrespect-fio-files. Jobs in one process (thread=1) that name the
 *    same directory share one open database (refcounted); jobs in separate
 *    processes must use distinct files (fio's default names are distinct), as
 *    one process at a time opens a database.
 *  - Each fio file is a key space: key = FNV-1a-64(file name) ++ big-endian
 *    block number, 16 bytes. The block size is the job's smallest block size
 *    (td_min_bs); an I/O unit of N blocks is one write batch of N puts, or N
 *    gets. A block never written reads as zeros; a trim deletes its blocks.
 *  - fsync=/fdatasync= (DDIR_SYNC, DDIR_DATASYNC, sync_file_range) call
 *    strata_sync; sync=1 makes every write batch synchronous.
 *  - direct=1 selects io_mode "direct-rw", direct=0 "buffered", unless
 *    disrespect-fio-direct (keep the config's io_mode).
 *  - A job that reads lays its files out first, as fio does for plain files:
 *    when a file's key space holds neither block 0 nor a layout marker, every
 *    block is written once with pseudo-random bytes (the marker key is the
 *    file prefix ++ 0xffffffffffffffff, value = laid-out bytes, LE u64).
 *
 * Engine options: strata-config=PATH (a JSON/TOML file or text; without it
 * STRATA_CONFIG is read), disrespect-fio-files, disrespect-fio-direct,
 * disrespect-fio-options (both of the above and sync=), strata-stats=PATH
 * (the engine's stats as JSON, written when the job ends).
 *
 * Synchronous engine (FIO_SYNCIO): each io_u completes inside ->queue.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "optgroup.h"

#include "strata.h"

#if FIO_IOOPS_VERSION != 31
#error "strata_engine.c is written for fio 3.33 (FIO_IOOPS_VERSION 31)"
#endif

#define STRATA_FIO_KEY_BYTES 16
#define STRATA_FIO_MARKER_BLOCK UINT64_MAX
/* Blocks per batch while laying a file out. */
#define STRATA_FIO_LAYOUT_BATCH_BYTES (1024 * 1024)
#define STRATA_FIO_PATH_BYTES_MAX 4096

struct strata_fio_options {
	void *pad; /* fio treats off1 == 0 as "no offset" */
	char *config;
	unsigned int disrespect_files;
	unsigned int disrespect_direct;
	unsigned int disrespect_options;
	char *stats_path;
};

static struct fio_option options[] = {
	{
		.name = "strata-config",
		.lname = "strata configuration",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct strata_fio_options, config),
		.help = "strata configuration: a .json/.toml file, or JSON/TOML text (default: $STRATA_CONFIG)",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "disrespect-fio-files",
		.lname = "keep strata's own paths",
		.type = FIO_OPT_STR_SET,
		.off1 = offsetof(struct strata_fio_options, disrespect_files),
		.help = "Open the database at the strata config's `path`, not next to fio's files",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "disrespect-fio-direct",
		.lname = "keep strata's own io mode",
		.type = FIO_OPT_STR_SET,
		.off1 = offsetof(struct strata_fio_options, disrespect_direct),
		.help = "Keep the strata config's io_mode instead of following direct=",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "disrespect-fio-options",
		.lname = "ignore fio's settings for strata",
		.type = FIO_OPT_STR_SET,
		.off1 = offsetof(struct strata_fio_options, disrespect_options),
		.help = "Take every strata setting (path, io mode, write sync) from the strata config only",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "strata-stats",
		.lname = "strata stats file",
		.type = FIO_OPT_STR_STORE,
		.off1 = offsetof(struct strata_fio_options, stats_path),
		.help = "Write strata's stats as JSON to this file when the job ends",
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = NULL,
	},
};

/* One open database, shared by the jobs of this process that name it. */
struct strata_fio_shared {
	struct strata_fio_shared *next;
	char *name; /* what jobs match on: the path, or "config:<text>" */
	char *path; /* the database directory, for messages */
	strata_db_t *db;
	unsigned int refs;
	pthread_mutex_t layout_lock;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct strata_fio_shared *shared_list;

/* Per-job engine state (td->io_ops_data). */
struct strata_fio_data {
	struct strata_fio_shared *shared;
	strata_writebatch_t *batch;
	unsigned long long block_bytes;
	int sync_writes;
	unsigned int errors_logged;
};

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = v & 0xff;
		v >>= 8;
	}
}

static void make_key(unsigned char key[STRATA_FIO_KEY_BYTES], const struct fio_file *f, uint64_t block)
{
	put_be64(key, f->engine_pos);
	put_be64(key + 8, block);
}

/* Logs a strata error (the first few per job) and returns the errno for the io_u. */
static int strata_fio_fail(struct thread_data *td, const char *what, strata_error_t *err)
{
	struct strata_fio_data *sd = td->io_ops_data;
	int code = strata_error_code(err);

	if (!sd || sd->errors_logged++ < 5)
		log_err("fio: strata: %s: %s\n", what, strata_error_message(err));
	strata_error_free(err);
	switch (code) {
	case STRATA_INVALID_ARGUMENT:
	case STRATA_CONFIG_ERROR:
		return EINVAL;
	case STRATA_CORRUPTION:
		return EILSEQ;
	default:
		return EIO;
	}
}

static unsigned long long strata_fio_block_bytes(struct thread_data *td)
{
	unsigned long long bs = td_min_bs(td);

	if (!bs)
		bs = min(td->o.min_bs[DDIR_READ], td->o.min_bs[DDIR_WRITE]);
	return bs;
}

/* Size of each fio file: filesize= if given, else size= split over the files. */
static int strata_fio_size_files(struct thread_data *td)
{
	struct fio_file *f;
	unsigned int i;
	unsigned long long each;

	if (td->o.file_size_low)
		each = td->o.file_size_low;
	else if (td->o.size && td->o.nr_files)
		each = td->o.size / td->o.nr_files;
	else {
		log_err("fio: strata: the job needs size= or filesize= (there is no file to take a size from)\n");
		return 1;
	}
	for_each_file(td, f, i) {
		f->real_file_size = each;
		fio_file_set_size_known(f);
	}
	return 0;
}

static int fio_strata_setup(struct thread_data *td)
{
	return strata_fio_size_files(td);
}

static int fio_strata_get_file_size(struct thread_data *td, struct fio_file *f)
{
	if (fio_file_size_known(f))
		return 0;
	return strata_fio_size_files(td);
}

/*
 * Opens the database at `path` (NULL: the config's path), or joins the one this
 * process already has open under the same `name` (the path, or for NULL the
 * configuration text that names it).
 */
static struct strata_fio_shared *shared_open(const char *name, const char *path, strata_options_t *opts)
{
	struct strata_fio_shared *s;
	strata_error_t *err = NULL;
	strata_db_t *db;

	pthread_mutex_lock(&shared_lock);
	for (s = shared_list; s; s = s->next) {
		if (!strcmp(s->name, name)) {
			s->refs++;
			pthread_mutex_unlock(&shared_lock);
			return s;
		}
	}
	db = strata_open_with_options(path, opts, &err);
	if (!db) {
		log_err("fio: strata: cannot open database %s: %s\n", path ? path : "(config path)",
			strata_error_message(err));
		strata_error_free(err);
		pthread_mutex_unlock(&shared_lock);
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (s) {
		char *real = strata_db_path(db, NULL);

		s->path = strdup(real ? real : (path ? path : ""));
		s->name = strdup(name);
		strata_free(real);
	}
	if (!s || !s->path || !s->name) {
		log_err("fio: strata: out of memory\n");
		strata_close(db, NULL);
		if (s) {
			free(s->path);
			free(s->name);
		}
		free(s);
		pthread_mutex_unlock(&shared_lock);
		return NULL;
	}
	s->db = db;
	s->refs = 1;
	pthread_mutex_init(&s->layout_lock, NULL);
	s->next = shared_list;
	shared_list = s;
	pthread_mutex_unlock(&shared_lock);
	return s;
}

static int shared_close(struct strata_fio_shared *s)
{
	struct strata_fio_shared **pp;
	strata_error_t *err = NULL;
	int ret = 0;

	pthread_mutex_lock(&shared_lock);
	if (--s->refs == 0) {
		for (pp = &shared_list; *pp; pp = &(*pp)->next) {
			if (*pp == s) {
				*pp = s->next;
				break;
			}
		}
		if (strata_close(s->db, &err) != STRATA_OK) {
			log_err("fio: strata: close %s: %s\n", s->path, strata_error_message(err));
			strata_error_free(err);
			ret = EIO;
		}
		pthread_mutex_destroy(&s->layout_lock);
		free(s->path);
		free(s->name);
		free(s);
	}
	pthread_mutex_unlock(&shared_lock);
	return ret;
}

static int fio_strata_init(struct thread_data *td)
{
	struct strata_fio_options *eo = td->eo;
	struct strata_fio_data *sd;
	strata_options_t *opts;
	strata_error_t *err = NULL;
	char path[STRATA_FIO_PATH_BYTES_MAX], name[STRATA_FIO_PATH_BYTES_MAX];
	const char *db_path = NULL, *config;
	int keep_files = eo->disrespect_files || eo->disrespect_options;
	int keep_direct = eo->disrespect_direct || eo->disrespect_options;

	sd = calloc(1, sizeof(*sd));
	if (!sd)
		return ENOMEM;
	sd->block_bytes = strata_fio_block_bytes(td);
	sd->sync_writes = !eo->disrespect_options && td->o.sync_io;

	opts = strata_options_create();
	/* NULL config reads STRATA_CONFIG (unset: defaults). */
	if (strata_options_load(opts, eo->config, &err) != STRATA_OK)
		goto fail_config;
	if (!keep_direct &&
	    strata_options_set(opts, "io_mode", td->o.odirect ? "direct-rw" : "buffered", &err) != STRATA_OK)
		goto fail_config;
	if (!keep_files) {
		if (!td->o.nr_files || !td->files || !td->files[0]) {
			log_err("fio: strata: the job has no file to name its database after\n");
			goto fail;
		}
		if (snprintf(path, sizeof(path), "%s.strata", td->files[0]->file_name) >= (int)sizeof(path)) {
			log_err("fio: strata: database path too long: %s.strata\n", td->files[0]->file_name);
			goto fail;
		}
		db_path = path;
		snprintf(name, sizeof(name), "%s", path);
	} else {
		config = eo->config ? eo->config : getenv("STRATA_CONFIG");
		if (snprintf(name, sizeof(name), "config:%s", config ? config : "") >= (int)sizeof(name)) {
			log_err("fio: strata: configuration text too long to share a database by\n");
			goto fail;
		}
	}
	sd->shared = shared_open(name, db_path, opts);
	if (!sd->shared)
		goto fail;
	strata_options_destroy(opts);
	sd->batch = strata_writebatch_create();
	td->io_ops_data = sd;
	return 0;

fail_config:
	log_err("fio: strata: bad configuration: %s\n", strata_error_message(err));
	strata_error_free(err);
fail:
	strata_options_destroy(opts);
	free(sd);
	return EINVAL;
}

static void fio_strata_cleanup(struct thread_data *td)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_options *eo = td->eo;

	if (!sd)
		return;
	if (eo && eo->stats_path && sd->shared) {
		char *json = strata_stats_json(sd->shared->db, NULL);
		FILE *out = fopen(eo->stats_path, "w");

		if (json && out)
			fprintf(out, "%s\n", json);
		else
			log_err("fio: strata: cannot write stats to %s\n", eo->stats_path);
		if (out)
			fclose(out);
		strata_free(json);
	}
	if (sd->shared)
		shared_close(sd->shared);
	strata_writebatch_destroy(sd->batch);
	free(sd);
	td->io_ops_data = NULL;
}

static void fill_pseudo_random(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	for (; i < len; i++)
		buf[i] = (unsigned char)(x >> (8 * (i & 7)));
}

/* Writes every block of f once, as fio lays out a plain file before reading it. */
static int strata_fio_layout(struct thread_data *td, struct fio_file *f)
{
	struct strata_fio_data *sd = td->io_ops_data;
	strata_db_t *db = sd->shared->db;
	unsigned long long bs = sd->block_bytes;
	uint64_t blocks = f->real_file_size / bs, b;
	unsigned char key[STRATA_FIO_KEY_BYTES], marker[8];
	size_t len = 0, per_batch = STRATA_FIO_LAYOUT_BATCH_BYTES / bs;
	strata_error_t *err = NULL;
	unsigned char *buf;
	int rc;

	make_key(key, f, STRATA_FIO_MARKER_BLOCK);
	rc = strata_get(db, (const char *)key, sizeof(key), (char *)marker, sizeof(marker), &len, &err);
	if (rc == STRATA_OK && len == 8) {
		uint64_t done = 0;
		int i;

		for (i = 7; i >= 0; i--)
			done = (done << 8) | marker[i];
		if (done >= blocks * bs)
			return 0;
	} else if (rc != STRATA_NOT_FOUND) {
		return strata_fio_fail(td, "layout marker", err);
	}
	make_key(key, f, 0);
	rc = strata_get(db, (const char *)key, sizeof(key), NULL, 0, &len, &err);
	if (rc == STRATA_BUFFER_TOO_SMALL) {
		strata_error_free(err);
		return 0; /* block 0 exists: an earlier write job laid the file out */
	}
	if (rc != STRATA_NOT_FOUND)
		return strata_fio_fail(td, "layout check", err);

	if (!per_batch)
		per_batch = 1;
	buf = malloc(bs);
	if (!buf)
		return ENOMEM;
	log_info("fio: strata: laying out %s (%llu MiB)\n", f->file_name,
		 (unsigned long long)(blocks * bs) >> 20);
	for (b = 0; b < blocks; b++) {
		make_key(key, f, b);
		fill_pseudo_random(buf, bs, f->engine_pos ^ b);
		if (strata_writebatch_put(sd->batch, (const char *)key, sizeof(key), (const char *)buf, bs, &err))
			goto fail;
		if (strata_writebatch_count(sd->batch) >= per_batch || b + 1 == blocks) {
			if (strata_write(db, sd->batch, 0, NULL, &err))
				goto fail;
			strata_writebatch_clear(sd->batch);
		}
	}
	free(buf);
	for (b = 0; b < 8; b++)
		marker[b] = (unsigned char)(((uint64_t)blocks * bs) >> (8 * b));
	make_key(key, f, STRATA_FIO_MARKER_BLOCK);
	if (strata_put(db, (const char *)key, sizeof(key), (const char *)marker, sizeof(marker), 0, &err))
		return strata_fio_fail(td, "layout marker", err);
	if (strata_sync(db, &err))
		return strata_fio_fail(td, "layout sync", err);
	return 0;
fail:
	free(buf);
	strata_writebatch_clear(sd->batch);
	return strata_fio_fail(td, "layout", err);
}

static int fio_strata_open_file(struct thread_data *td, struct fio_file *f)
{
	struct strata_fio_data *sd = td->io_ops_data;
	int ret = 0;

	f->engine_pos = fnv1a64(f->file_name);
	if (sd && td_read(td)) {
		pthread_mutex_lock(&sd->shared->layout_lock);
		ret = strata_fio_layout(td, f);
		pthread_mutex_unlock(&sd->shared->layout_lock);
		if (ret)
			td->error = ret;
	}
	return ret;
}

static int fio_strata_close_file(struct thread_data *td, struct fio_file *f)
{
	return 0;
}

static int fio_strata_unlink_file(struct thread_data *td, struct fio_file *f)
{
	return 0; /* the database directory stays; its keys are overwritten */
}

static int strata_fio_read(struct thread_data *td, struct io_u *io_u, uint64_t first, uint64_t count)
{
	struct strata_fio_data *sd = td->io_ops_data;
	unsigned long long bs = sd->block_bytes;
	unsigned char key[STRATA_FIO_KEY_BYTES];
	strata_error_t *err = NULL;
	uint64_t i;

	for (i = 0; i < count; i++) {
		char *dst = (char *)io_u->xfer_buf + i * bs;
		size_t len = 0;
		int rc;

		make_key(key, io_u->file, first + i);
		rc = strata_get(sd->shared->db, (const char *)key, sizeof(key), dst, bs, &len, &err);
		if (rc == STRATA_NOT_FOUND)
			memset(dst, 0, bs);
		else if (rc == STRATA_OK) {
			if (len < bs)
				memset(dst + len, 0, bs - len);
		} else
			return strata_fio_fail(td, "get", err);
	}
	return 0;
}

static int strata_fio_write(struct thread_data *td, struct io_u *io_u, uint64_t first, uint64_t count,
			    int trim)
{
	struct strata_fio_data *sd = td->io_ops_data;
	unsigned long long bs = sd->block_bytes;
	unsigned char key[STRATA_FIO_KEY_BYTES];
	strata_error_t *err = NULL;
	uint64_t i;
	int rc;

	strata_writebatch_clear(sd->batch);
	for (i = 0; i < count; i++) {
		make_key(key, io_u->file, first + i);
		if (trim)
			rc = strata_writebatch_delete(sd->batch, (const char *)key, sizeof(key), &err);
		else
			rc = strata_writebatch_put(sd->batch, (const char *)key, sizeof(key),
						   (const char *)io_u->xfer_buf + i * bs, bs, &err);
		if (rc)
			return strata_fio_fail(td, "batch", err);
	}
	rc = strata_write(sd->shared->db, sd->batch, sd->sync_writes, NULL, &err);
	strata_writebatch_clear(sd->batch);
	if (rc)
		return strata_fio_fail(td, trim ? "delete" : "write", err);
	return 0;
}

static enum fio_q_status fio_strata_queue(struct thread_data *td, struct io_u *io_u)
{
	struct strata_fio_data *sd = td->io_ops_data;
	unsigned long long bs = sd->block_bytes;
	strata_error_t *err = NULL;
	int ret = 0;

	fio_ro_check(td, io_u);

	if (ddir_sync(io_u->ddir)) {
		if (strata_sync(sd->shared->db, &err))
			ret = strata_fio_fail(td, "sync", err);
	} else if (io_u->offset % bs || io_u->xfer_buflen % bs) {
		if (sd->errors_logged++ < 5)
			log_err("fio: strata: I/O at offset %llu length %llu is not a multiple of the block size %llu "
				"(use one bs, or blockalign= equal to the smallest bs)\n",
				io_u->offset, io_u->xfer_buflen, bs);
		ret = EINVAL;
	} else {
		uint64_t first = io_u->offset / bs, count = io_u->xfer_buflen / bs;

		if (io_u->ddir == DDIR_READ)
			ret = strata_fio_read(td, io_u, first, count);
		else if (io_u->ddir == DDIR_WRITE)
			ret = strata_fio_write(td, io_u, first, count, 0);
		else if (io_u->ddir == DDIR_TRIM)
			ret = strata_fio_write(td, io_u, first, count, 1);
		else
			ret = EINVAL;
	}
	io_u->error = ret;
	if (!ret)
		io_u->resid = 0;
	return FIO_Q_COMPLETED;
}

struct ioengine_ops ioengine = {
	.name = "strata",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_SYNCIO | FIO_DISKLESSIO | FIO_NODISKUTIL,
	.setup = fio_strata_setup,
	.init = fio_strata_init,
	.queue = fio_strata_queue,
	.cleanup = fio_strata_cleanup,
	.open_file = fio_strata_open_file,
	.close_file = fio_strata_close_file,
	.unlink_file = fio_strata_unlink_file,
	.get_file_size = fio_strata_get_file_size,
	.options = options,
	.option_struct_size = sizeof(struct strata_fio_options),
};

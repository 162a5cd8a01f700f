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
 *    gets (the job's read queue, or one strata_multi_get: below). A
 *    block never written reads as zeros; a trim deletes its blocks.
 *  - fsync=/fdatasync= (DDIR_SYNC, DDIR_DATASYNC, sync_file_range) call
 *    strata_sync; sync=1 makes every write batch synchronous.
 *  - direct=1 selects io_mode "direct-rw", direct=0 "buffered", unless
 *    disrespect-fio-direct (keep the config's io_mode).
 *  - A job that reads lays its files out first, as fio does for plain files:
 *    when a file's key space holds neither block 0 nor a layout marker, every
 *    block is written once with pseudo-random bytes (the marker key is the
 *    file prefix ++ 0xffffffffffffffff, value = laid-out bytes, LE u64), then
 *    flushed to layer files.
 *
 * Engine options: strata-config=PATH (a JSON/TOML file or text; without it
 * STRATA_CONFIG is read), disrespect-fio-files, disrespect-fio-direct,
 * disrespect-fio-options (both of the above and sync=), strata-stats=PATH
 * (the engine's stats as JSON, written when the job ends; with ramp_time, the
 * stats as they were when the ramp ended go beside it, to PATH with ".json"
 * replaced by ".ramp.json" (or ".ramp" added), so what fio counted can be
 * told from what the ramp did).
 *
 * Queue: every job reads through one strata read queue (strata_read_queue_*),
 * owned by its fio thread, with no reader threads. With iodepth=1 the engine
 * is synchronous (FIO_SYNCIO): ->queue submits an io_u of at most 16 KiB as
 * gets and reaps them before it returns (a read on the queue's io_uring with
 * a registered buffer, measured faster at QD1 than the pread a strata_get
 * makes); a larger one is one strata_multi_get. With iodepth>1, ->queue
 * submits one
 * get per block of the io_u (tag = the io_u's index and the block), ->commit
 * hands them to the kernel, and ->getevents reaps them; an io_u completes when
 * its last block is reaped. The queue's depth is iodepth x the most blocks an
 * io_u covers, at most STRATA_FIO_QUEUE_DEPTH_MAX; when it is full, ->queue
 * reaps (waiting) before it submits more. The queue reads on its own io_uring
 * with registered buffers, whatever the database's io_engine. Writes/trims go
 * to one writer thread, which applies everything queued at that moment as ONE
 * write batch (group commit). ->getevents returns the writes the writer
 * completed and the reads reaped: while fewer than min_events are ready, it
 * waits in the kernel for a read if reads are outstanding, else sleeps until
 * the writer has completed enough. A sync waits (FIO_Q_BUSY) until nothing is
 * in flight, reads or writes, then calls strata_sync, so it covers every
 * write issued before it.
 *
 * io_engine: with iodepth>1 and direct=1 the engine sets io_engine "io-uring"
 * before it applies the strata config, so a config (or STRATA_IO_ENGINE) that
 * names io_engine wins; disrespect-fio-options leaves it to the config alone.
 * It no longer concerns the queued reads (the read queue has its own ring):
 * it sets how the database's own files are read and written (the writer's
 * log writes and syncs, flushes, compaction). Where io_uring is unavailable,
 * that implied choice falls back to "sync" with a message.
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
/*
 * Most blocks one strata_multi_get reads on the synchronous path (an io_u of
 * several blocks at iodepth=1): strata's io_uring ring has 64 entries, its
 * largest single submission. An io_u of more blocks is read in several calls.
 */
#define STRATA_FIO_MULTI_GET_BLOCKS 64
/*
 * The largest io_u the synchronous path reads through the read queue: one
 * slot's registered buffer (see strata_fio_read).
 */
#define STRATA_FIO_QUEUE_READ_BYTES_MAX (16 * 1024)
/* Most gets a read queue holds (strata_read_queue_create's bound). */
#define STRATA_FIO_QUEUE_DEPTH_MAX 4096U
/*
 * A read queue get's tag: the io_u's index (< iodepth) in the high 32 bits,
 * the block within the io_u in the low 32 (an io_u covers at most
 * td_max_bs / block size blocks, well below 2^32).
 */
#define STRATA_FIO_TAG_BLOCK_BITS 32

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

/* A FIFO of io_us; capacity = the job's iodepth, all fio ever has outstanding. */
struct strata_fio_ring {
	struct io_u **slots;
	unsigned int head, count;
};

/*
 * Scratch space for strata_multi_get, the synchronous path's (iodepth=1): up
 * to STRATA_FIO_MULTI_GET_BLOCKS keys (one per block) and their answers.
 */
struct strata_fio_mget {
	unsigned char keys[STRATA_FIO_MULTI_GET_BLOCKS][STRATA_FIO_KEY_BYTES];
	const char *key_ptrs[STRATA_FIO_MULTI_GET_BLOCKS];
	size_t key_lens[STRATA_FIO_MULTI_GET_BLOCKS];
	char *bufs[STRATA_FIO_MULTI_GET_BLOCKS];
	size_t buf_lens[STRATA_FIO_MULTI_GET_BLOCKS];
	size_t value_lens[STRATA_FIO_MULTI_GET_BLOCKS];
	int statuses[STRATA_FIO_MULTI_GET_BLOCKS];
	unsigned int owner[STRATA_FIO_MULTI_GET_BLOCKS]; /* index of the key's io_u in the caller's list */
	unsigned int n;
};

/*
 * The writer of a job with iodepth > 1: a single thread takes every write and
 * trim queued at that moment as one write batch (strata serializes writers
 * anyway, and one writer lets the queue build up into a group commit). Fields
 * after `lock` are guarded by it.
 */
struct strata_fio_pool {
	pthread_mutex_t lock;
	pthread_cond_t writes_ready; /* writes is non-empty, or stopping */
	pthread_cond_t done;         /* completed is non-empty */
	struct strata_fio_ring writes;
	struct io_u **completed; /* writes and trims done: completed[0..completed_count) */
	unsigned int completed_count;
	/*
	 * Every io_u queued and not yet returned by ->getevents: the writer's
	 * (until it completes them) and the reads (until ->getevents hands them
	 * out). The sync barrier in ->queue waits for it to be 0.
	 */
	unsigned int inflight;
	unsigned int awaited; /* ->getevents sleeps until completed_count reaches it; 0: not sleeping */
	unsigned int capacity;
	int stopping;
	pthread_t writer;
	int writer_started;
	struct io_u **events; /* what ->getevents last reaped, for ->event; fio thread only */
};

/*
 * The reads of a job, on the fio thread only (->queue,
 * ->commit, ->getevents; a strata read queue is used from one thread at a
 * time). An io_u's state is kept by its index (< iodepth): while it is queued,
 * blocks_left[i] counts its blocks not yet reaped (set to all of them before
 * the first submit, so reaping inside ->queue cannot finish it early) and
 * errs[i] holds its first errno; when blocks_left[i] reaches 0 it moves to
 * `done`, which ->getevents empties.
 */
struct strata_fio_reads {
	strata_read_queue_t *queue;
	size_t depth;                     /* gets the queue holds at once */
	strata_read_completion_t *reaped; /* depth entries, one reap's completions */
	struct io_u **io_us;              /* by index: the io_u queued under it */
	unsigned long long *blocks_left;  /* by index */
	int *errs;                        /* by index */
	struct strata_fio_ring done;      /* io_us whose every block is reaped */
	unsigned int capacity;            /* iodepth: entries of the arrays by index, and of done */
	int failed;                       /* the synchronous path: the queue's own failure (an errno), 0 */
};

/* Per-job engine state (td->io_ops_data). */
struct strata_fio_data {
	struct strata_fio_shared *shared;
	strata_writebatch_t *batch; /* the synchronous path's (and layout's) batch */
	unsigned long long block_bytes;
	int sync_writes;
	unsigned int errors_logged; /* atomic: the writer logs too */
	struct strata_fio_pool *pool;   /* NULL: synchronous */
	struct strata_fio_mget *mget;   /* the synchronous path's multi_get space */
	struct strata_fio_reads *reads; /* the job's read queue */
	char *ramp_stats;               /* strata_stats_json when the ramp ended; NULL before */
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

	if (!sd || __atomic_fetch_add(&sd->errors_logged, 1, __ATOMIC_RELAXED) < 5)
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
static struct strata_fio_shared *shared_open(const char *name, const char *path, strata_options_t *opts,
					     int uring_implied)
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
	if (!db && uring_implied && strstr(strata_error_message(err), "io_uring") &&
	    strata_options_set(opts, "io_engine", "sync", NULL) == STRATA_OK) {
		/* io-uring was the engine's choice, not the user's: fall back. */
		log_info("fio: strata: io_uring is unavailable (%s); using io_engine \"sync\"\n",
			 strata_error_message(err));
		strata_error_free(err);
		err = NULL;
		db = strata_open_with_options(path, opts, &err);
	}
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

static int pool_start(struct thread_data *td, struct strata_fio_data *sd);
static void pool_stop(struct strata_fio_data *sd);
static int reads_start(struct thread_data *td, struct strata_fio_data *sd);
static void reads_stop(struct strata_fio_data *sd);

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
	int uring_implied;

	sd = calloc(1, sizeof(*sd));
	if (!sd)
		return ENOMEM;
	sd->mget = malloc(sizeof(*sd->mget));
	if (!sd->mget) {
		free(sd);
		return ENOMEM;
	}
	sd->block_bytes = strata_fio_block_bytes(td);
	sd->sync_writes = !eo->disrespect_options && td->o.sync_io;

	opts = strata_options_create();
	/*
	 * Queued direct I/O defaults to io_engine io-uring for the database's own
	 * files (log writes and syncs, flushes, compaction; the queued reads use
	 * the read queue's ring whatever this says). Set before the config, so a
	 * config that names io_engine (or STRATA_IO_ENGINE) wins.
	 */
	uring_implied = !eo->disrespect_options && td->o.odirect && td->o.iodepth > 1;
	if (uring_implied && strata_options_set(opts, "io_engine", "io-uring", &err) != STRATA_OK)
		goto fail_config;
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
	sd->shared = shared_open(name, db_path, opts, uring_implied);
	if (!sd->shared)
		goto fail;
	strata_options_destroy(opts);
	sd->batch = strata_writebatch_create();
	td->io_ops_data = sd;
	if (reads_start(td, sd))
		return ENOMEM; /* ->cleanup frees sd; reads_start said why */
	if (td->o.iodepth > 1) {
		if (pool_start(td, sd)) {
			log_err("fio: strata: cannot start the writer thread\n");
			return ENOMEM;
		}
	} else {
		/* Per job, not in the shared ops struct: other jobs may queue. */
		td->flags |= (unsigned long long)FIO_SYNCIO << TD_ENG_FLAG_SHIFT;
	}
	return 0;

fail_config:
	log_err("fio: strata: bad configuration: %s\n", strata_error_message(err));
	strata_error_free(err);
fail:
	strata_options_destroy(opts);
	free(sd->mget);
	free(sd);
	return EINVAL;
}

/* Writes the stats taken when the ramp ended beside the job's stats file (see the top). */
static void write_ramp_stats(const char *stats_path, const char *json)
{
	size_t n = strlen(stats_path);
	int has_json = n >= 5 && !strcmp(stats_path + n - 5, ".json");
	char *path = malloc(n + sizeof(".ramp.json"));
	FILE *out;

	if (!path)
		return;
	sprintf(path, "%.*s%s", (int)(has_json ? n - 5 : n), stats_path, has_json ? ".ramp.json" : ".ramp");
	out = fopen(path, "w");
	if (out) {
		fprintf(out, "%s\n", json);
		fclose(out);
	} else {
		log_err("fio: strata: cannot write stats to %s\n", path);
	}
	free(path);
}

static void fio_strata_cleanup(struct thread_data *td)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_options *eo = td->eo;

	if (!sd)
		return;
	pool_stop(sd);
	reads_stop(sd); /* before the database closes; cancels what is still in flight */
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
		if (sd->ramp_stats)
			write_ramp_stats(eo->stats_path, sd->ramp_stats);
	}
	strata_free(sd->ramp_stats);
	if (sd->shared)
		shared_close(sd->shared);
	strata_writebatch_destroy(sd->batch);
	free(sd->mget);
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
	/*
	 * Flush and compact, not just sync: the laid-out blocks end up in
	 * settled layer files, as a plain file's are on disk, so the job's
	 * reads race neither the layout's flush backlog (in-memory layers
	 * being written out) nor the compaction it left due (paced in the
	 * background, it ran for seconds into a 2-second read job, past the
	 * ramp; measured: 4 MB of compaction reads in the counted part).
	 */
	if (strata_compact(db, &err))
		return strata_fio_fail(td, "layout compaction", err);
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

/*
 * Runs the keys gathered in m as one strata_multi_get and fills their blocks:
 * a value shorter than a block is padded with zeros, a never-written block
 * reads as zeros. A failure sets errs[] of the io_us concerned (the first
 * error of each io_u wins).
 */
static void strata_fio_mget_run(struct thread_data *td, struct strata_fio_data *sd, struct strata_fio_mget *m,
				int *errs)
{
	unsigned long long bs = sd->block_bytes;
	strata_error_t *err = NULL;
	unsigned int i;
	int rc;

	if (!m->n)
		return;
	rc = strata_multi_get(sd->shared->db, m->n, m->key_ptrs, m->key_lens, m->bufs, m->buf_lens, m->value_lens,
			      m->statuses, &err);
	if (rc != STRATA_OK) {
		int e = strata_fio_fail(td, "multi_get", err);

		for (i = 0; i < m->n; i++)
			if (!errs[m->owner[i]])
				errs[m->owner[i]] = e;
		m->n = 0;
		return;
	}
	for (i = 0; i < m->n; i++) {
		switch (m->statuses[i]) {
		case STRATA_OK:
			if (m->value_lens[i] < bs)
				memset(m->bufs[i] + m->value_lens[i], 0, bs - m->value_lens[i]);
			break;
		case STRATA_NOT_FOUND:
			memset(m->bufs[i], 0, bs);
			break;
		default:
			/* STRATA_BUFFER_TOO_SMALL: a value longer than a block is not fio's. */
			if (__atomic_fetch_add(&sd->errors_logged, 1, __ATOMIC_RELAXED) < 5)
				log_err("fio: strata: multi_get: the value of a block is %zu bytes, larger than the "
					"block size %llu (status %d)\n",
					m->value_lens[i], bs, m->statuses[i]);
			if (!errs[m->owner[i]])
				errs[m->owner[i]] = EIO;
		}
	}
	m->n = 0;
}

/*
 * Reads io_us[0..n) (reads; an io_u covers one or more blocks) with as few
 * strata_multi_get calls as STRATA_FIO_MULTI_GET_BLOCKS allows, and sets each
 * io_u's errs[i] (an errno, 0 on success).
 */
static void strata_fio_read_many(struct thread_data *td, struct strata_fio_data *sd, struct strata_fio_mget *m,
				 struct io_u **io_us, unsigned int n, int *errs)
{
	unsigned long long bs = sd->block_bytes;
	unsigned int u;

	m->n = 0;
	for (u = 0; u < n; u++) {
		struct io_u *io_u = io_us[u];
		uint64_t first = io_u->offset / bs, count = io_u->xfer_buflen / bs, b;

		errs[u] = 0;
		for (b = 0; b < count; b++) {
			unsigned int k = m->n++;

			make_key(m->keys[k], io_u->file, first + b);
			m->key_ptrs[k] = (const char *)m->keys[k];
			m->key_lens[k] = STRATA_FIO_KEY_BYTES;
			m->bufs[k] = (char *)io_u->xfer_buf + b * bs;
			m->buf_lens[k] = bs;
			m->owner[k] = u;
			if (m->n == STRATA_FIO_MULTI_GET_BLOCKS)
				strata_fio_mget_run(td, sd, m, errs);
		}
	}
	strata_fio_mget_run(td, sd, m, errs);
}

/* Adds io_u's blocks to `batch`: puts for a write, deletes for a trim. */
static int strata_fio_batch_add(struct thread_data *td, struct strata_fio_data *sd, strata_writebatch_t *batch,
				struct io_u *io_u)
{
	unsigned long long bs = sd->block_bytes;
	uint64_t first = io_u->offset / bs, count = io_u->xfer_buflen / bs, i;
	unsigned char key[STRATA_FIO_KEY_BYTES];
	strata_error_t *err = NULL;
	int rc;

	for (i = 0; i < count; i++) {
		make_key(key, io_u->file, first + i);
		if (io_u->ddir == DDIR_TRIM)
			rc = strata_writebatch_delete(batch, (const char *)key, sizeof(key), &err);
		else
			rc = strata_writebatch_put(batch, (const char *)key, sizeof(key),
						   (const char *)io_u->xfer_buf + i * bs, bs, &err);
		if (rc)
			return strata_fio_fail(td, "batch", err);
	}
	return 0;
}

/* Applies io_us[0..n) (writes and trims) as one atomic write batch. */
static int strata_fio_write(struct thread_data *td, struct strata_fio_data *sd, strata_writebatch_t *batch,
			    struct io_u **io_us, unsigned int n)
{
	strata_error_t *err = NULL;
	unsigned int i;
	int ret = 0;

	strata_writebatch_clear(batch);
	for (i = 0; i < n && !ret; i++)
		ret = strata_fio_batch_add(td, sd, batch, io_us[i]);
	if (!ret && strata_write(sd->shared->db, batch, sd->sync_writes, NULL, &err))
		ret = strata_fio_fail(td, "write", err);
	strata_writebatch_clear(batch);
	return ret;
}

/* An io_u the engine refuses before doing anything: 0 if fine, else an errno. */
static int strata_fio_check(struct thread_data *td, struct strata_fio_data *sd, struct io_u *io_u)
{
	unsigned long long bs = sd->block_bytes;

	if (io_u->ddir != DDIR_READ && io_u->ddir != DDIR_WRITE && io_u->ddir != DDIR_TRIM)
		return EINVAL;
	if (io_u->offset % bs || io_u->xfer_buflen % bs) {
		if (__atomic_fetch_add(&sd->errors_logged, 1, __ATOMIC_RELAXED) < 5)
			log_err("fio: strata: I/O at offset %llu length %llu is not a multiple of the block size %llu "
				"(use one bs, or blockalign= equal to the smallest bs)\n",
				io_u->offset, io_u->xfer_buflen, bs);
		return EINVAL;
	}
	return 0;
}

static void ring_push(struct strata_fio_ring *r, unsigned int capacity, struct io_u *io_u)
{
	assert(r->count < capacity);
	r->slots[(r->head + r->count) % capacity] = io_u;
	r->count++;
}

static struct io_u *ring_pop(struct strata_fio_ring *r, unsigned int capacity)
{
	struct io_u *io_u = r->slots[r->head];

	assert(r->count > 0);
	r->head = (r->head + 1) % capacity;
	r->count--;
	return io_u;
}

/*
 * Hands finished writes and trims to ->getevents: each failed with `ret` (an
 * errno, 0 on success). Called with the pool lock held.
 */
static void pool_complete(struct strata_fio_pool *pool, struct io_u **io_us, unsigned int n, int ret)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		io_us[i]->error = ret;
		if (!ret)
			io_us[i]->resid = 0;
		pool->completed[pool->completed_count++] = io_us[i];
	}
	assert(pool->completed_count <= pool->capacity);
	assert(pool->inflight >= n);
	pool->inflight -= n;
	/* Wake the reaper only when it has enough to return (saves switches). */
	if (pool->awaited && pool->completed_count >= pool->awaited) {
		pool->awaited = 0; /* one wake-up is enough; it sets awaited again if it sleeps again */
		pthread_cond_signal(&pool->done);
	}
}

static void *pool_writer(void *arg)
{
	struct thread_data *td = arg;
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_pool *pool = sd->pool;
	strata_writebatch_t *batch = strata_writebatch_create();
	struct io_u **taken = calloc(pool->capacity, sizeof(*taken));
	unsigned int n;
	int ret;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->writes.count && !pool->stopping)
			pthread_cond_wait(&pool->writes_ready, &pool->lock);
		if (!pool->writes.count)
			break;
		for (n = 0; pool->writes.count; n++)
			taken[n] = ring_pop(&pool->writes, pool->capacity);
		pthread_mutex_unlock(&pool->lock);
		ret = batch && taken ? strata_fio_write(td, sd, batch, taken, n) : ENOMEM;
		pthread_mutex_lock(&pool->lock);
		pool_complete(pool, taken, n, ret);
	}
	pthread_mutex_unlock(&pool->lock);
	free(taken);
	strata_writebatch_destroy(batch);
	return NULL;
}

/* Starts the writer thread. Non-zero on failure (pool_stop frees what there is). */
static int pool_start(struct thread_data *td, struct strata_fio_data *sd)
{
	struct strata_fio_pool *pool = calloc(1, sizeof(*pool));
	unsigned int cap = td->o.iodepth;

	if (!pool)
		return 1;
	sd->pool = pool;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->writes_ready, NULL);
	pthread_cond_init(&pool->done, NULL);
	pool->capacity = cap;
	pool->writes.slots = calloc(cap, sizeof(*pool->writes.slots));
	pool->completed = calloc(cap, sizeof(*pool->completed));
	pool->events = calloc(cap, sizeof(*pool->events));
	if (!pool->writes.slots || !pool->completed || !pool->events)
		return 1;
	if (pthread_create(&pool->writer, NULL, pool_writer, td))
		return 1;
	pool->writer_started = 1;
	return 0;
}

static void pool_stop(struct strata_fio_data *sd)
{
	struct strata_fio_pool *pool = sd->pool;

	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = 1;
	pthread_cond_broadcast(&pool->writes_ready);
	pthread_mutex_unlock(&pool->lock);
	if (pool->writer_started)
		pthread_join(pool->writer, NULL);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->writes_ready);
	pthread_cond_destroy(&pool->done);
	free(pool->writes.slots);
	free(pool->completed);
	free(pool->events);
	free(pool);
	sd->pool = NULL;
}

/*
 * Creates the job's read queue: room for iodepth io_us of the most blocks one
 * can cover (verify reads take the writes' sizes, so td_max_bs over every
 * direction), at most STRATA_FIO_QUEUE_DEPTH_MAX gets. Non-zero on failure,
 * logged (reads_stop frees what there is).
 */
static int reads_start(struct thread_data *td, struct strata_fio_data *sd)
{
	struct strata_fio_reads *r = calloc(1, sizeof(*r));
	unsigned long long blocks_max = td_max_bs(td) / sd->block_bytes;
	unsigned int cap = td->o.iodepth;
	strata_error_t *err = NULL;

	if (!r) {
		log_err("fio: strata: out of memory\n");
		return 1;
	}
	sd->reads = r;
	if (!blocks_max)
		blocks_max = 1;
	r->depth = blocks_max > STRATA_FIO_QUEUE_DEPTH_MAX / cap ? STRATA_FIO_QUEUE_DEPTH_MAX
								   : (size_t)(cap * blocks_max);
	assert(r->depth >= 1 && r->depth <= STRATA_FIO_QUEUE_DEPTH_MAX);
	/* A block's number within its io_u must fit the tag's low bits. */
	assert(blocks_max < (1ULL << STRATA_FIO_TAG_BLOCK_BITS));
	r->capacity = cap;
	r->reaped = calloc(r->depth, sizeof(*r->reaped));
	r->io_us = calloc(cap, sizeof(*r->io_us));
	r->blocks_left = calloc(cap, sizeof(*r->blocks_left));
	r->errs = calloc(cap, sizeof(*r->errs));
	r->done.slots = calloc(cap, sizeof(*r->done.slots));
	if (!r->reaped || !r->io_us || !r->blocks_left || !r->errs || !r->done.slots) {
		log_err("fio: strata: out of memory\n");
		return 1;
	}
	r->queue = strata_read_queue_create(sd->shared->db, r->depth, &err);
	if (!r->queue) {
		log_err("fio: strata: cannot create a read queue of depth %zu: %s\n", r->depth,
			strata_error_message(err));
		strata_error_free(err);
		return 1;
	}
	return 0;
}

static void reads_stop(struct strata_fio_data *sd)
{
	struct strata_fio_reads *r = sd->reads;

	if (!r)
		return;
	strata_read_queue_destroy(r->queue); /* cancels what is in flight, writing into no buffer */
	free(r->reaped);
	free(r->io_us);
	free(r->blocks_left);
	free(r->errs);
	free(r->done.slots);
	free(r);
	sd->reads = NULL;
}

/* Accounts `blocks` more of io_u's blocks as finished; the last moves it to done. */
static void reads_blocks_finished(struct strata_fio_reads *r, struct io_u *io_u, unsigned long long blocks)
{
	unsigned int i = io_u->index;

	assert(r->blocks_left[i] >= blocks);
	r->blocks_left[i] -= blocks;
	if (r->blocks_left[i])
		return;
	io_u->error = r->errs[i];
	if (!io_u->error)
		io_u->resid = 0;
	r->io_us[i] = NULL;
	ring_push(&r->done, r->capacity, io_u);
}

/*
 * Fills one reaped get's block: a value shorter than a block is padded with
 * zeros, a never-written block reads as zeros; a value larger than a block (not
 * fio's) or an error fails the io_u (its first error wins). Frees the
 * completion's error.
 */
static void reads_complete(struct thread_data *td, struct strata_fio_data *sd, strata_read_completion_t *c)
{
	struct strata_fio_reads *r = sd->reads;
	unsigned long long bs = sd->block_bytes;
	unsigned int i = (unsigned int)(c->tag >> STRATA_FIO_TAG_BLOCK_BITS);
	uint64_t b = c->tag & ((1ULL << STRATA_FIO_TAG_BLOCK_BITS) - 1);
	struct io_u *io_u;
	char *buf;
	int e = 0;

	assert(i < r->capacity && r->io_us[i]);
	io_u = r->io_us[i];
	assert(b < io_u->xfer_buflen / bs);
	buf = (char *)io_u->xfer_buf + b * bs;
	switch (c->status) {
	case STRATA_OK:
		assert(c->value_len <= bs);
		if (c->value_len < bs)
			memset(buf + c->value_len, 0, bs - c->value_len);
		break;
	case STRATA_NOT_FOUND:
		memset(buf, 0, bs);
		break;
	case STRATA_BUFFER_TOO_SMALL:
		if (__atomic_fetch_add(&sd->errors_logged, 1, __ATOMIC_RELAXED) < 5)
			log_err("fio: strata: read queue: the value of a block is %zu bytes, larger than the block "
				"size %llu\n",
				c->value_len, bs);
		e = EIO;
		break;
	default:
		if (c->error) {
			e = strata_fio_fail(td, "read queue", c->error); /* frees it */
			c->error = NULL;
		} else {
			if (__atomic_fetch_add(&sd->errors_logged, 1, __ATOMIC_RELAXED) < 5)
				log_err("fio: strata: read queue: a get failed with status %d\n", c->status);
			e = EIO;
		}
	}
	strata_error_free(c->error);
	c->error = NULL;
	if (e && !r->errs[i])
		r->errs[i] = e;
	reads_blocks_finished(r, io_u, 1);
}

/*
 * Reaps at least `min` completed gets (0: what is ready, without waiting), as
 * many as are ready up to the queue's depth, and fills their blocks. 0, or an
 * errno when the queue itself failed (logged).
 */
static int reads_reap(struct thread_data *td, struct strata_fio_data *sd, size_t min)
{
	struct strata_fio_reads *r = sd->reads;
	strata_error_t *err = NULL;
	size_t n = 0, k;

	if (strata_read_queue_reap(r->queue, min, r->depth, r->reaped, &n, &err) != STRATA_OK)
		return strata_fio_fail(td, "read queue reap", err);
	assert(n <= r->depth);
	for (k = 0; k < n; k++)
		reads_complete(td, sd, &r->reaped[k]);
	return 0;
}

/*
 * Queues io_u's blocks as gets in the read queue (the kernel sees them at
 * ->commit). When the queue is full, reaps first (waiting for the kernel).
 * A failure fails the io_u, which then completes through ->getevents.
 */
static void reads_submit(struct thread_data *td, struct strata_fio_data *sd, struct io_u *io_u)
{
	struct strata_fio_reads *r = sd->reads;
	unsigned long long bs = sd->block_bytes;
	uint64_t first = io_u->offset / bs, count = io_u->xfer_buflen / bs, b;
	unsigned int i = io_u->index;
	unsigned char key[STRATA_FIO_KEY_BYTES];
	strata_error_t *err = NULL;
	int e = 0;

	assert(i < r->capacity && !r->io_us[i]);
	assert(count < (1ULL << STRATA_FIO_TAG_BLOCK_BITS));
	r->io_us[i] = io_u;
	r->blocks_left[i] = count; /* all of them before the first submit: a reap below cannot finish it early */
	r->errs[i] = 0;
	for (b = 0; b < count; b++) {
		uint64_t tag = ((uint64_t)i << STRATA_FIO_TAG_BLOCK_BITS) | b;

		if (strata_read_queue_outstanding(r->queue) >= r->depth && (e = reads_reap(td, sd, 1)))
			break;
		make_key(key, io_u->file, first + b);
		if (strata_read_queue_submit(r->queue, (const char *)key, sizeof(key), (char *)io_u->xfer_buf + b * bs,
					     bs, tag, &err) != STRATA_OK) {
			e = strata_fio_fail(td, "read queue submit", err);
			break;
		}
	}
	if (e && !r->errs[i])
		r->errs[i] = e;
	/* Blocks never submitted are finished now (all of them for an io_u of none). */
	if (b < count || !count)
		reads_blocks_finished(r, io_u, count - b);
}

/*
 * Reads one io_u on the synchronous path (iodepth=1): a block's get submitted
 * to the read queue, then reaped; several blocks with strata_multi_get.
 * Returns an errno. After a failure of the
 * queue itself (not of a get), every read fails with that error: what the
 * queue still holds can no longer be told apart from the next io_u's.
 */
static int strata_fio_read(struct thread_data *td, struct strata_fio_data *sd, struct io_u *io_u)
{
	struct strata_fio_reads *r = sd->reads;
	int err = 0;

	/*
	 * The queue for small reads only: its ring reads a value of more than a
	 * slot's registered buffer (16 KiB) into a buffer of its own, allocated
	 * for the read; strata_multi_get reads large values and the blocks of a
	 * multi-block io_u better (1 MiB blocks at iodepth=1: 0.72-0.79 GiB/s
	 * through the queue, 1.06-1.63 GiB/s with multi_get, 3 pairs in turn).
	 */
	if (io_u->xfer_buflen > STRATA_FIO_QUEUE_READ_BYTES_MAX) {
		strata_fio_read_many(td, sd, sd->mget, &io_u, 1, &err);
		return err;
	}
	if (r->failed)
		return r->failed;
	reads_submit(td, sd, io_u);
	while (!r->done.count && !(r->failed = reads_reap(td, sd, 1)))
		;
	if (r->failed)
		return r->failed;
	assert(r->done.count == 1);
	return ring_pop(&r->done, r->capacity)->error;
}

static int strata_fio_sync(struct thread_data *td, struct strata_fio_data *sd)
{
	strata_error_t *err = NULL;

	if (strata_sync(sd->shared->db, &err))
		return strata_fio_fail(td, "sync", err);
	return 0;
}

static enum fio_q_status fio_strata_queue(struct thread_data *td, struct io_u *io_u)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_pool *pool = sd->pool;
	int ret;

	fio_ro_check(td, io_u);
	/* The first I/O fio counts: what strata did before it was the ramp's. */
	if (!sd->ramp_stats && td->o.ramp_time && td->ramp_time_over && ((struct strata_fio_options *)td->eo)->stats_path)
		sd->ramp_stats = strata_stats_json(sd->shared->db, NULL);

	if (ddir_sync(io_u->ddir)) {
		if (pool) {
			unsigned int inflight;

			pthread_mutex_lock(&pool->lock);
			inflight = pool->inflight;
			pthread_mutex_unlock(&pool->lock);
			if (inflight)
				return FIO_Q_BUSY; /* fio reaps, then queues the sync again */
		}
		ret = strata_fio_sync(td, sd);
	} else if ((ret = strata_fio_check(td, sd, io_u))) {
		/* refused: completes now with the error */
	} else if (pool) {
		pthread_mutex_lock(&pool->lock);
		assert(pool->inflight < pool->capacity);
		pool->inflight++;
		if (io_u->ddir != DDIR_READ) {
			ring_push(&pool->writes, pool->capacity, io_u);
			pthread_cond_signal(&pool->writes_ready);
		}
		pthread_mutex_unlock(&pool->lock);
		if (io_u->ddir == DDIR_READ)
			reads_submit(td, sd, io_u);
		return FIO_Q_QUEUED;
	} else if (io_u->ddir == DDIR_READ) {
		ret = strata_fio_read(td, sd, io_u);
	} else {
		ret = strata_fio_write(td, sd, sd->batch, &io_u, 1);
	}
	io_u->error = ret;
	if (!ret)
		io_u->resid = 0;
	return FIO_Q_COMPLETED;
}

/* Hands the gets queued since the last commit to the kernel; writes are already with the writer. */
static int fio_strata_commit(struct thread_data *td)
{
	struct strata_fio_data *sd = td->io_ops_data;
	strata_error_t *err = NULL;

	if (!sd->reads)
		return 0;
	if (strata_read_queue_commit(sd->reads->queue, &err) != STRATA_OK)
		return -strata_fio_fail(td, "read queue commit", err);
	return 0;
}

/*
 * Returns completed io_us: writes the writer completed and reads whose every
 * block is reaped. While fewer than min_events are ready: with reads
 * outstanding, reaps at least one get, waiting in the kernel (a write that
 * completes meanwhile is returned once a read has; reads take about a device
 * read); without, sleeps until the writer has completed enough. With a timeout
 * (fio 3.33 passes only a zero one, to poll), reads are reaped without waiting
 * and only the wait for the writer is timed.
 */
static int fio_strata_getevents(struct thread_data *td, unsigned int min_events, unsigned int max_events,
				const struct timespec *t)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_pool *pool = sd->pool;
	struct strata_fio_reads *r = sd->reads;
	struct timespec deadline;
	unsigned int n = 0, k;
	int ret = 0;

	if (!pool)
		return 0;
	if (t) {
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += t->tv_sec;
		deadline.tv_nsec += t->tv_nsec;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		/* Writes first: the writer may be waiting for nothing else. */
		k = min(pool->completed_count, max_events - n);
		memcpy(pool->events + n, pool->completed, k * sizeof(*pool->events));
		pool->completed_count -= k;
		memmove(pool->completed, pool->completed + k, pool->completed_count * sizeof(*pool->completed));
		n += k;
		/* Reads leave `inflight` here (the writes' left it when the writer completed them). */
		for (; n < max_events && r->done.count; n++) {
			pool->events[n] = ring_pop(&r->done, r->capacity);
			assert(pool->inflight > 0);
			pool->inflight--;
		}
		if (n >= min_events)
			break;
		if (strata_read_queue_outstanding(r->queue)) {
			unsigned int done_before = r->done.count;

			pthread_mutex_unlock(&pool->lock);
			ret = reads_reap(td, sd, t ? 0 : 1);
			pthread_mutex_lock(&pool->lock);
			if (ret)
				break;
			if (!t || r->done.count > done_before)
				continue;
		}
		pool->awaited = min_events - n;
		if (!t)
			pthread_cond_wait(&pool->done, &pool->lock);
		else if (pthread_cond_timedwait(&pool->done, &pool->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pool->awaited = 0;
	pthread_mutex_unlock(&pool->lock);
	assert(n <= max_events);
	/* The queue failed (not one get): fio stops the job, after what is ready. */
	if (ret && !n)
		return -ret;
	return n;
}

static struct io_u *fio_strata_event(struct thread_data *td, int event)
{
	struct strata_fio_data *sd = td->io_ops_data;

	return sd->pool->events[event];
}

struct ioengine_ops ioengine = {
	.name = "strata",
	.version = FIO_IOOPS_VERSION,
	/* FIO_SYNCIO is added per job in ->init when iodepth is 1. */
	.flags = FIO_DISKLESSIO | FIO_NODISKUTIL,
	.setup = fio_strata_setup,
	.init = fio_strata_init,
	.queue = fio_strata_queue,
	.commit = fio_strata_commit,
	.getevents = fio_strata_getevents,
	.event = fio_strata_event,
	.cleanup = fio_strata_cleanup,
	.open_file = fio_strata_open_file,
	.close_file = fio_strata_close_file,
	.unlink_file = fio_strata_unlink_file,
	.get_file_size = fio_strata_get_file_size,
	.options = options,
	.option_struct_size = sizeof(struct strata_fio_options),
};

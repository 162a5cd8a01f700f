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
 *    (td_min_bs); an I/O unit of N blocks is one write batch of N puts, or a
 *    multi_get of N keys. A block never written reads as zeros; a trim deletes
 *    its blocks.
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
 * (the engine's stats as JSON, written when the job ends), strata-threads=N,
 * strata-read-batch=N (below).
 *
 * Queue: with iodepth=1 the engine is synchronous (FIO_SYNCIO, each io_u
 * completes inside ->queue; its blocks are one strata_multi_get). With
 * iodepth>1, ->queue hands reads to reader threads (strata-threads=N): a
 * reader takes every read queued at that moment, up to strata-read-batch
 * blocks (at most 64; at least one io_u), and serves them with ONE
 * strata_multi_get, whose block reads strata submits together; ->getevents,
 * rather than sleep while reads wait, serves them the same way. Defaults: with
 * batched reads (io_engine io-uring and O_DIRECT reads) 64 blocks and
 * min(iodepth, 2) readers; otherwise a multi_get reads its blocks one after
 * another, so 1 block and min(iodepth, 16) readers, one read each.
 * Writes/trims go to one writer thread, which applies everything queued at
 * that moment as ONE write batch (group commit); ->getevents reaps what they
 * completed. A sync waits (FIO_Q_BUSY) until nothing is in flight, then calls
 * strata_sync, so it covers every write issued before it.
 *
 * io_engine: with iodepth>1 and direct=1 the engine sets io_engine "io-uring"
 * before it applies the strata config, so a config (or STRATA_IO_ENGINE) that
 * names io_engine wins; disrespect-fio-options leaves it to the config alone.
 * With "sync", a multi_get reads its blocks one after another. Where io_uring
 * is unavailable, that implied choice falls back to "sync" with a message.
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
 * Most blocks a reader serves with one strata_multi_get: strata's io_uring
 * ring has 64 entries, its largest single submission. An io_u of more blocks
 * is read in several calls.
 */
#define STRATA_FIO_MULTI_GET_BLOCKS 64

struct strata_fio_options {
	void *pad; /* fio treats off1 == 0 as "no offset" */
	char *config;
	unsigned int disrespect_files;
	unsigned int disrespect_direct;
	unsigned int disrespect_options;
	char *stats_path;
	unsigned int threads;
	unsigned int read_batch;
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
		.name = "strata-threads",
		.lname = "strata worker threads",
		.type = FIO_OPT_INT,
		.off1 = offsetof(struct strata_fio_options, threads),
		.help = "Reader threads when iodepth > 1 (0: min(iodepth, 2) with batched reads, else min(iodepth, 16)); "
			"writes use one writer thread",
		.def = "0",
		.maxval = 256,
		.category = FIO_OPT_C_ENGINE,
		.group = FIO_OPT_G_INVALID,
	},
	{
		.name = "strata-read-batch",
		.lname = "strata blocks per multi_get",
		.type = FIO_OPT_INT,
		.off1 = offsetof(struct strata_fio_options, read_batch),
		.help = "Most blocks a reader serves with one multi_get when iodepth > 1 (at most 64; 0: 64 with "
			"batched reads, else 1)",
		.def = "0",
		.maxval = STRATA_FIO_MULTI_GET_BLOCKS,
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

/*
 * Default reader threads. With batched reads (io_uring, O_DIRECT) each serves
 * a whole queue's worth of reads per multi_get, so a few keep the device busy
 * and more only add context switches (measured at iodepth=16 on 2 vCPUs: 2
 * readers ~38k IOPS, 16 readers ~15k). Otherwise a multi_get reads its blocks
 * one after another, so readers take one read each and many run at once.
 */
#define STRATA_FIO_THREADS_BATCHED_MAX 2U
#define STRATA_FIO_THREADS_UNBATCHED_MAX 16U

/* A FIFO of io_us; capacity = the job's iodepth, all fio ever has outstanding. */
struct strata_fio_ring {
	struct io_u **slots;
	unsigned int head, count;
};

/*
 * A reader's scratch space for strata_multi_get: up to
 * STRATA_FIO_MULTI_GET_BLOCKS keys (one per block) and their answers. A reader
 * thread owns one; the synchronous path uses the job's.
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

/* A reader thread's own state: its multi_get space and what it took. */
struct strata_fio_reader {
	struct thread_data *td;
	struct io_u **taken; /* capacity entries */
	int *errs;           /* errs[i]: taken[i]'s errno */
	struct strata_fio_mget mget;
};

/*
 * The workers of a job with iodepth > 1: reader threads take every read queued
 * (up to STRATA_FIO_MULTI_GET_BLOCKS blocks) and serve them with one multi_get;
 * a single writer thread takes every write and trim queued at that moment as
 * one write batch (strata serializes writers anyway, and one writer lets the
 * queue build up into a group commit). Fields after `lock` are guarded by it.
 */
struct strata_fio_pool {
	pthread_mutex_t lock;
	pthread_cond_t reads_ready;  /* reads is non-empty, or stopping */
	pthread_cond_t writes_ready; /* writes is non-empty, or stopping */
	pthread_cond_t done;         /* completed is non-empty */
	struct strata_fio_ring reads, writes;
	struct io_u **completed; /* completed[0..completed_count) */
	unsigned int completed_count;
	unsigned int inflight; /* queued and not yet completed */
	unsigned int awaited; /* ->getevents sleeps until completed_count reaches it; 0: not sleeping */
	unsigned int capacity;
	unsigned int read_batch; /* most blocks a reader takes at once */
	unsigned int readers_idle;  /* readers waiting for reads_ready */
	unsigned int readers_woken; /* of those, signalled and not yet running */
	int stopping;
	pthread_t *threads; /* [0] the writer, [1..] readers */
	unsigned int nr_threads;
	struct strata_fio_reader *readers; /* readers[i] runs in threads[i + 1]; the last is the fio thread's */
	unsigned int nr_readers;
	struct io_u **events; /* what ->getevents last reaped, for ->event; main thread only */
};

/* Per-job engine state (td->io_ops_data). */
struct strata_fio_data {
	struct strata_fio_shared *shared;
	strata_writebatch_t *batch; /* the synchronous path's (and layout's) batch */
	struct strata_fio_mget *mget; /* the synchronous path's multi_get space */
	unsigned long long block_bytes;
	int sync_writes;
	int batched_reads; /* the database submits a multi_get's block reads together */
	unsigned int errors_logged; /* atomic: workers log too */
	struct strata_fio_pool *pool; /* NULL: synchronous */
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

static int pool_start(struct thread_data *td, struct strata_fio_data *sd, unsigned int threads);
static void pool_stop(struct strata_fio_data *sd);

/* Case-insensitive: does `s` hold `word`? */
static int holds_word(const char *s, const char *word)
{
	size_t n = strlen(word);

	for (; s && *s; s++)
		if (!strncasecmp(s, word, n))
			return 1;
	return 0;
}

/*
 * Whether a database opened with `opts` submits a multi_get's block reads
 * together: io_engine io-uring with O_DIRECT reads (io_mode not "buffered"),
 * after strata's STRATA_IO_ENGINE / STRATA_IO_MODE overrides. (A filesystem
 * refusing O_DIRECT with fallback_to_buffered is not foreseen here.)
 */
static int strata_fio_batched_reads(const strata_options_t *opts)
{
	char *json = strata_options_to_json(opts, NULL);
	const char *env_engine = getenv("STRATA_IO_ENGINE"), *env_mode = getenv("STRATA_IO_MODE");
	int uring, buffered;

	if (!json)
		return 0;
	uring = strstr(json, "\"io_engine\":\"io-uring\"") != NULL;
	buffered = strstr(json, "\"io_mode\":\"buffered\"") != NULL;
	strata_free(json);
	if (env_engine && *env_engine)
		uring = holds_word(env_engine, "uring");
	if (env_mode && *env_mode)
		buffered = holds_word(env_mode, "buffered");
	return uring && !buffered;
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
	 * Queued direct reads default to io_uring: a reader's multi_get then puts
	 * all its block reads on the device at once (with "sync" they would be
	 * read one after another). Set before the config, so a config that names
	 * io_engine (or STRATA_IO_ENGINE) wins.
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
	sd->batched_reads = strata_fio_batched_reads(opts);
	strata_options_destroy(opts);
	sd->batch = strata_writebatch_create();
	td->io_ops_data = sd;
	if (td->o.iodepth > 1) {
		unsigned int threads = eo->threads ? eo->threads
					: min(td->o.iodepth, sd->batched_reads ? STRATA_FIO_THREADS_BATCHED_MAX
									     : STRATA_FIO_THREADS_UNBATCHED_MAX);

		if (pool_start(td, sd, threads)) {
			log_err("fio: strata: cannot start %u reader threads and a writer\n", threads);
			return ENOMEM; /* ->cleanup frees sd */
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

static void fio_strata_cleanup(struct thread_data *td)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_options *eo = td->eo;

	if (!sd)
		return;
	pool_stop(sd);
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
	 * Flush, not just sync: the laid-out blocks end up in layer files, as a
	 * plain file's are on disk, so the job's reads do not race the layout's
	 * own flush backlog (in-memory layers being written out).
	 */
	if (strata_flush(db, &err))
		return strata_fio_fail(td, "layout flush", err);
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

/* Reads one io_u (the synchronous path). Returns an errno. */
static int strata_fio_read(struct thread_data *td, struct strata_fio_data *sd, struct io_u *io_u)
{
	int err = 0;

	strata_fio_read_many(td, sd, sd->mget, &io_u, 1, &err);
	return err;
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
 * Hands finished io_us to ->getevents: io_us[i] failed with errs[i] (an
 * errno), or with `ret` for all when errs is NULL. Called with the pool lock
 * held.
 */
static void pool_complete(struct strata_fio_pool *pool, struct io_u **io_us, unsigned int n, const int *errs,
			  int ret)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		io_us[i]->error = errs ? errs[i] : ret;
		if (!io_us[i]->error)
			io_us[i]->resid = 0;
		pool->completed[pool->completed_count++] = io_us[i];
	}
	assert(pool->inflight >= n);
	pool->inflight -= n;
	/* Wake the reaper only when it has enough to return (saves switches). */
	if (pool->awaited && pool->completed_count >= pool->awaited) {
		pool->awaited = 0; /* one wake-up is enough; it sets awaited again if it sleeps again */
		pthread_cond_signal(&pool->done);
	}
}

/*
 * Wakes a sleeping reader for the reads queued, unless every sleeping reader
 * has already been woken (a woken reader takes everything queued when it
 * runs, so more wake-ups would only cost context switches). Called with the
 * pool lock held.
 */
static void pool_wake_reader(struct strata_fio_pool *pool)
{
	if (pool->readers_idle > pool->readers_woken) {
		pool->readers_woken++;
		pthread_cond_signal(&pool->reads_ready);
	}
}

/* Blocks an io_u covers. */
static unsigned long long io_u_blocks(const struct strata_fio_data *sd, const struct io_u *io_u)
{
	return io_u->xfer_buflen / sd->block_bytes;
}

/*
 * A reader takes every read queued at that moment, up to
 * STRATA_FIO_MULTI_GET_BLOCKS blocks (at least one io_u, however large), and
 * serves them with one strata_multi_get: their block reads go to the device
 * together.
 */
/*
 * Takes the reads queued (at least one must be), up to read_batch blocks (at
 * least one io_u, however large), serves them with one strata_multi_get as r,
 * and completes them. Called with the pool lock held; drops it meanwhile.
 */
static void pool_serve_reads(struct thread_data *td, struct strata_fio_data *sd, struct strata_fio_reader *r)
{
	struct strata_fio_pool *pool = sd->pool;
	unsigned long long blocks = 0;
	unsigned int n = 0;

	do {
		struct io_u *next = pool->reads.slots[pool->reads.head];

		if (n && blocks + io_u_blocks(sd, next) > pool->read_batch)
			break;
		blocks += io_u_blocks(sd, next);
		r->taken[n++] = ring_pop(&pool->reads, pool->capacity);
	} while (pool->reads.count);
	/* Reads left over: another reader serves them meanwhile. */
	if (pool->reads.count)
		pool_wake_reader(pool);
	pthread_mutex_unlock(&pool->lock);
	strata_fio_read_many(td, sd, &r->mget, r->taken, n, r->errs);
	pthread_mutex_lock(&pool->lock);
	pool_complete(pool, r->taken, n, r->errs, 0);
}

static void *pool_reader(void *arg)
{
	struct strata_fio_reader *r = arg;
	struct thread_data *td = r->td;
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_pool *pool = sd->pool;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->reads.count && !pool->stopping) {
			pool->readers_idle++;
			pthread_cond_wait(&pool->reads_ready, &pool->lock);
			pool->readers_idle--;
			if (pool->readers_woken)
				pool->readers_woken--;
		}
		if (!pool->reads.count)
			break; /* stopping, nothing left */
		pool_serve_reads(td, sd, r);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
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
		ret = batch ? strata_fio_write(td, sd, batch, taken, n) : ENOMEM;
		pthread_mutex_lock(&pool->lock);
		pool_complete(pool, taken, n, NULL, ret);
	}
	pthread_mutex_unlock(&pool->lock);
	free(taken);
	strata_writebatch_destroy(batch);
	return NULL;
}

/* Starts the writer and `readers` reader threads. Non-zero on failure. */
static int pool_start(struct thread_data *td, struct strata_fio_data *sd, unsigned int readers)
{
	struct strata_fio_pool *pool = calloc(1, sizeof(*pool));
	unsigned int cap = td->o.iodepth;

	if (!pool)
		return 1;
	sd->pool = pool;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->reads_ready, NULL);
	pthread_cond_init(&pool->writes_ready, NULL);
	pthread_cond_init(&pool->done, NULL);
	pool->capacity = cap;
	pool->read_batch = ((struct strata_fio_options *)td->eo)->read_batch;
	if (!pool->read_batch)
		pool->read_batch = sd->batched_reads ? STRATA_FIO_MULTI_GET_BLOCKS : 1;
	if (pool->read_batch > STRATA_FIO_MULTI_GET_BLOCKS)
		pool->read_batch = STRATA_FIO_MULTI_GET_BLOCKS;
	pool->reads.slots = calloc(cap, sizeof(*pool->reads.slots));
	pool->writes.slots = calloc(cap, sizeof(*pool->writes.slots));
	pool->completed = calloc(cap, sizeof(*pool->completed));
	pool->events = calloc(cap, sizeof(*pool->events));
	pool->threads = calloc(readers + 1, sizeof(*pool->threads));
	/* readers[readers] is the fio thread's own, for ->getevents. */
	pool->readers = calloc(readers + 1, sizeof(*pool->readers));
	if (!pool->reads.slots || !pool->writes.slots || !pool->completed || !pool->events || !pool->threads ||
	    !pool->readers)
		return 1;
	for (pool->nr_readers = 0; pool->nr_readers < readers + 1; pool->nr_readers++) {
		struct strata_fio_reader *r = &pool->readers[pool->nr_readers];

		r->td = td;
		r->taken = calloc(cap, sizeof(*r->taken));
		r->errs = calloc(cap, sizeof(*r->errs));
		if (!r->taken || !r->errs) {
			pool->nr_readers++; /* pool_stop frees what it got */
			return 1;
		}
	}
	if (pthread_create(&pool->threads[0], NULL, pool_writer, td))
		return 1;
	for (pool->nr_threads = 1; pool->nr_threads < readers + 1; pool->nr_threads++)
		if (pthread_create(&pool->threads[pool->nr_threads], NULL, pool_reader,
				   &pool->readers[pool->nr_threads - 1]))
			return 1;
	return 0;
}

static void pool_stop(struct strata_fio_data *sd)
{
	struct strata_fio_pool *pool = sd->pool;
	unsigned int i;

	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stopping = 1;
	pthread_cond_broadcast(&pool->reads_ready);
	pthread_cond_broadcast(&pool->writes_ready);
	pthread_mutex_unlock(&pool->lock);
	for (i = 0; i < pool->nr_threads; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->reads_ready);
	pthread_cond_destroy(&pool->writes_ready);
	pthread_cond_destroy(&pool->done);
	free(pool->reads.slots);
	free(pool->writes.slots);
	free(pool->completed);
	free(pool->events);
	free(pool->threads);
	for (i = 0; i < pool->nr_readers; i++) {
		free(pool->readers[i].taken);
		free(pool->readers[i].errs);
	}
	free(pool->readers);
	free(pool);
	sd->pool = NULL;
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
		if (io_u->ddir == DDIR_READ) {
			ring_push(&pool->reads, pool->capacity, io_u);
			pool_wake_reader(pool);
		} else {
			ring_push(&pool->writes, pool->capacity, io_u);
			pthread_cond_signal(&pool->writes_ready);
		}
		pool->inflight++;
		pthread_mutex_unlock(&pool->lock);
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

/* ->queue already woke a worker for each io_u. */
static int fio_strata_commit(struct thread_data *td)
{
	return 0;
}

static int fio_strata_getevents(struct thread_data *td, unsigned int min_events, unsigned int max_events,
				const struct timespec *t)
{
	struct strata_fio_data *sd = td->io_ops_data;
	struct strata_fio_pool *pool = sd->pool;
	struct timespec deadline;
	unsigned int n;

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
	while (pool->completed_count < min_events) {
		if (pool->reads.count) {
			/* Rather than sleep while reads wait: serve them here (saves a wake-up each way). */
			pool_serve_reads(td, sd, &pool->readers[pool->nr_readers - 1]);
			continue;
		}
		pool->awaited = min_events;
		if (!t)
			pthread_cond_wait(&pool->done, &pool->lock);
		else if (pthread_cond_timedwait(&pool->done, &pool->lock, &deadline) == ETIMEDOUT)
			break;
	}
	pool->awaited = 0;
	n = min(pool->completed_count, max_events);
	memcpy(pool->events, pool->completed, n * sizeof(*pool->events));
	pool->completed_count -= n;
	memmove(pool->completed, pool->completed + n, pool->completed_count * sizeof(*pool->completed));
	pthread_mutex_unlock(&pool->lock);
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

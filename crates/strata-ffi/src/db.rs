//! `strata_db_t` and the entry points that act on an open database: open,
//! close, put, get, multi_get, delete, write, sync, flush, stats.
//!
//! Invariants: a `strata_db_t` always holds an open `engine::Db`;
//! `strata_close` consumes the handle whatever the outcome.
//! Thread-safety: `engine::Db` is shared by reference, so any number of
//! threads may call these concurrently, except `strata_close`.

use std::ffi::{c_char, c_int};
use std::path::PathBuf;

use crate::batch::strata_writebatch_t;
use crate::config::Config;
use crate::engine;
use crate::error::{
    strata_error_t, FfiError, STRATA_BUFFER_TOO_SMALL, STRATA_ERROR, STRATA_NOT_FOUND, STRATA_OK,
};
use crate::guard::{bytes, guard, guard_ptr, handle, key, opt_str, BUFFER_BYTES_MAX};
use crate::malloc_copy;
use crate::options::strata_options_t;

/// An open database. Opaque in C.
#[allow(non_camel_case_types)]
pub struct strata_db_t {
    db: engine::Db,
    path: PathBuf,
}

impl strata_db_t {
    /// The engine's database.
    pub(crate) fn db(&self) -> &engine::Db {
        &self.db
    }
}

fn open(path: Option<&str>, config: &Config) -> Result<*mut strata_db_t, FfiError> {
    let path = match (path, &config.path) {
        (Some(p), _) if !p.is_empty() => PathBuf::from(p),
        (_, Some(p)) => p.clone(),
        _ => {
            return Err(FfiError::invalid(
                "no database path: pass a path or set `path` in the configuration".to_string(),
            ))
        }
    };
    // The C API, like the CLI, lets STRATA_IO_MODE / STRATA_IO_ENGINE
    // override the options (the fio engine documents it); the engine's
    // `Db::open` takes its options as given.
    let options = config.options.clone().with_env_overrides()?;
    let db = engine::Db::open(&path, options)?;
    Ok(Box::into_raw(Box::new(strata_db_t { db, path })))
}

/// The document `strata_stats_json` prints: the engine's own serde form of
/// `Stats` (its keys are written down on `strata::Stats`), the same the
/// CLI's `strata db DIR stats --json` prints.
pub fn stats_json(stats: &strata::Stats) -> Result<serde_json::Value, FfiError> {
    serde_json::to_value(stats)
        .map_err(|e| FfiError::new(STRATA_ERROR, format!("statistics as JSON: {e}")))
}

/// Opens (creating if needed) the database at `path` with `config` (JSON or
/// TOML text, or a config file path; null reads `STRATA_CONFIG`). `path` may be
/// null when the configuration has a `path` key. Null on failure.
///
/// # Safety
/// `path` and `config` are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn strata_open(
    path: *const c_char,
    config: *const c_char,
    err: *mut *mut strata_error_t,
) -> *mut strata_db_t {
    guard_ptr(err, || {
        let path = opt_str("path", path)?;
        let mut c = Config::default();
        c.load(opt_str("config", config)?)?;
        open(path, &c)
    })
}

/// Opens the database at `path` (or the options' `path`) with `opts`. Null on
/// failure. The options can be destroyed afterwards.
///
/// # Safety
/// `path` null or a NUL-terminated string; `opts` a live options handle.
#[no_mangle]
pub unsafe extern "C" fn strata_open_with_options(
    path: *const c_char,
    opts: *const strata_options_t,
    err: *mut *mut strata_error_t,
) -> *mut strata_db_t {
    guard_ptr(err, || {
        let opts = handle("opts", opts)?;
        open(opt_str("path", path)?, &opts.config)
    })
}

/// Closes the database: flushes what it must and frees the handle, whatever
/// the status. Null is an error.
///
/// # Safety
/// `db` is null or a live handle that no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn strata_close(
    db: *mut strata_db_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        if db.is_null() {
            return Err(FfiError::invalid("db is a null pointer"));
        }
        let h = Box::from_raw(db);
        h.db.close()?;
        Ok(STRATA_OK)
    })
}

/// The directory the database was opened at, valid until close. Never null.
///
/// # Safety
/// `db` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_db_path(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> *mut c_char {
    guard_ptr(err, || {
        let h = handle("db", db)?;
        Ok(malloc_copy(h.path.display().to_string().as_bytes())?.cast())
    })
}

/// Writes one key (a batch of one). `sync` non-zero makes it durable before
/// returning.
///
/// # Safety
/// `db` a live handle; buffers readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn strata_put(
    db: *const strata_db_t,
    key_ptr: *const c_char,
    key_len: usize,
    value: *const c_char,
    value_len: usize,
    sync: c_int,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        let mut b = engine::WriteBatch::new();
        b.put(key(key_ptr, key_len)?, bytes("value", value, value_len)?);
        h.db.write(&b, engine::WriteOptions { sync: sync != 0 })?;
        Ok(STRATA_OK)
    })
}

/// Deletes one key (deleting an absent key is not an error).
///
/// # Safety
/// `db` a live handle; `key` readable for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn strata_delete(
    db: *const strata_db_t,
    key_ptr: *const c_char,
    key_len: usize,
    sync: c_int,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        let mut b = engine::WriteBatch::new();
        b.delete(key(key_ptr, key_len)?);
        h.db.write(&b, engine::WriteOptions { sync: sync != 0 })?;
        Ok(STRATA_OK)
    })
}

/// Applies a batch atomically; `*lsn` (when not null) receives its LSN. The
/// batch is left as it was (clear it to reuse it).
///
/// # Safety
/// `db` a live handle; `batch` a live batch; `lsn` null or writable.
#[no_mangle]
pub unsafe extern "C" fn strata_write(
    db: *const strata_db_t,
    batch: *const strata_writebatch_t,
    sync: c_int,
    lsn: *mut u64,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        let b = handle("batch", batch)?;
        let at =
            h.db.write(&b.batch, engine::WriteOptions { sync: sync != 0 })?;
        if let Some(out) = lsn.as_mut() {
            *out = at;
        }
        Ok(STRATA_OK)
    })
}

/// Reads the newest value of a key into the caller's buffer.
/// Returns `STRATA_OK` with `*value_len` = the value's length;
/// `STRATA_NOT_FOUND` (no error set) with `*value_len` = 0; or
/// `STRATA_BUFFER_TOO_SMALL` (error set, nothing copied) with `*value_len` =
/// the length needed. `buf` may be null when `buf_len` is 0.
///
/// # Safety
/// `db` a live handle; `key` readable for `key_len`; `buf` writable for
/// `buf_len`; `value_len` writable.
#[no_mangle]
pub unsafe extern "C" fn strata_get(
    db: *const strata_db_t,
    key_ptr: *const c_char,
    key_len: usize,
    buf: *mut c_char,
    buf_len: usize,
    value_len: *mut usize,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        let k = key(key_ptr, key_len)?;
        let out_len = value_len
            .as_mut()
            .ok_or_else(|| FfiError::invalid("value_len is a null pointer"))?;
        if buf.is_null() && buf_len != 0 {
            return Err(FfiError::invalid(format!(
                "buf is a null pointer with buf_len = {buf_len}"
            )));
        }
        match h.db.get(k)? {
            None => {
                *out_len = 0;
                Ok(STRATA_NOT_FOUND)
            }
            Some(v) => {
                *out_len = v.len();
                if v.len() > buf_len {
                    return Err(FfiError::new(
                        STRATA_BUFFER_TOO_SMALL,
                        format!("value is {} bytes; buffer is {buf_len} bytes", v.len()),
                    ));
                }
                std::ptr::copy_nonoverlapping(v.as_ptr(), buf.cast::<u8>(), v.len());
                Ok(STRATA_OK)
            }
        }
    })
}

/// Reads the newest value of a key into a malloc'd buffer (`*value`, free
/// with `strata_free`; one NUL byte past the end, never null on success).
/// `STRATA_NOT_FOUND` sets `*value` = NULL and `*value_len` = 0.
///
/// # Safety
/// `db` a live handle; `key` readable for `key_len`; `value`, `value_len` writable.
#[no_mangle]
pub unsafe extern "C" fn strata_get_alloc(
    db: *const strata_db_t,
    key_ptr: *const c_char,
    key_len: usize,
    value: *mut *mut c_char,
    value_len: *mut usize,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        let k = key(key_ptr, key_len)?;
        let out = value
            .as_mut()
            .ok_or_else(|| FfiError::invalid("value is a null pointer"))?;
        let out_len = value_len
            .as_mut()
            .ok_or_else(|| FfiError::invalid("value_len is a null pointer"))?;
        *out = std::ptr::null_mut();
        *out_len = 0;
        match h.db.get(k)? {
            None => Ok(STRATA_NOT_FOUND),
            Some(v) => {
                *out = malloc_copy(&v)?.cast();
                *out_len = v.len();
                Ok(STRATA_OK)
            }
        }
    })
}

/// `n` elements of a C array as a slice; null is allowed only when `n` is 0.
///
/// # Safety
/// When non-null, `ptr` points to `n` readable, initialized elements that
/// stay valid for the returned lifetime.
unsafe fn array<'a, T>(what: &str, ptr: *const T, n: usize) -> Result<&'a [T], FfiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(FfiError::invalid(format!(
            "{what} is a null pointer with n = {n}"
        )));
    }
    Ok(std::slice::from_raw_parts(ptr, n))
}

/// Largest `n` for `strata_multi_get`: every array of `n` pointers or sizes
/// must fit a Rust slice (`isize::MAX` bytes).
const MULTI_GET_KEYS_MAX: usize = isize::MAX as usize / std::mem::size_of::<usize>();

/// Reads the newest values of `n` keys at one point in time, their block reads
/// submitted together (one io_uring submission per round when the database
/// uses `io_engine = "io-uring"` with O_DIRECT reads). Key `i` is
/// `keys[i]` / `key_lens[i]`; its value is copied into `bufs[i]` (capacity
/// `buf_lens[i]`; null allowed when that is 0; `value_lens` may be the same
/// array as `buf_lens`). Per key, `statuses[i]` is
/// `STRATA_OK` with `value_lens[i]` = the value's length, `STRATA_NOT_FOUND`
/// with `value_lens[i]` = 0, or `STRATA_BUFFER_TOO_SMALL` (nothing copied)
/// with `value_lens[i]` = the length needed; none of these sets `*err`.
///
/// Returns `STRATA_OK` when every key has its answer in `statuses`, else the
/// failure (and `*err`). A bad argument leaves the output arrays untouched;
/// a failure of the engine sets every `statuses[i]` to the returned code and
/// every `value_lens[i]` to 0, and copies nothing. The arrays may be null when
/// `n` is 0.
///
/// # Safety
/// `db` a live handle; each array (when `n` > 0) holds `n` elements; `keys[i]`
/// readable for `key_lens[i]` bytes; `bufs[i]` writable for `buf_lens[i]`
/// bytes, overlapping no key, no array and no other buffer; `value_lens` and
/// `statuses` writable for `n` elements.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // the C signature: parallel arrays, as LevelDB/RocksDB
pub unsafe extern "C" fn strata_multi_get(
    db: *const strata_db_t,
    n: usize,
    keys: *const *const c_char,
    key_lens: *const usize,
    bufs: *const *mut c_char,
    buf_lens: *const usize,
    value_lens: *mut usize,
    statuses: *mut c_int,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let h = handle("db", db)?;
        if n > MULTI_GET_KEYS_MAX {
            return Err(FfiError::invalid(format!(
                "n = {n} is larger than the largest array ({MULTI_GET_KEYS_MAX} elements)"
            )));
        }
        // Copies of the input arrays: an output array may be the same memory
        // as an input one (value_lens == buf_lens), so no reference into the
        // caller's arrays is held while the outputs are written.
        let key_ptrs = array("keys", keys, n)?.to_vec();
        let key_lens = array("key_lens", key_lens, n)?.to_vec();
        let buf_ptrs = array("bufs", bufs, n)?.to_vec();
        let buf_lens = array("buf_lens", buf_lens, n)?.to_vec();
        if n > 0 && value_lens.is_null() {
            return Err(FfiError::invalid(format!(
                "value_lens is a null pointer with n = {n}"
            )));
        }
        if n > 0 && statuses.is_null() {
            return Err(FfiError::invalid(format!(
                "statuses is a null pointer with n = {n}"
            )));
        }
        let mut ks: Vec<&[u8]> = Vec::with_capacity(n);
        for i in 0..n {
            let k = key(key_ptrs[i], key_lens[i])
                .map_err(|e| FfiError::new(e.code, format!("keys[{i}]: {}", e.message)))?;
            ks.push(k);
            if buf_ptrs[i].is_null() && buf_lens[i] != 0 {
                return Err(FfiError::invalid(format!(
                    "bufs[{i}] is a null pointer with buf_lens[{i}] = {}",
                    buf_lens[i]
                )));
            }
            if buf_lens[i] > BUFFER_BYTES_MAX {
                return Err(FfiError::invalid(format!(
                    "buf_lens[{i}] = {} is larger than the largest buffer",
                    buf_lens[i]
                )));
            }
        }
        if n == 0 {
            return Ok(STRATA_OK);
        }
        let result = h.db.multi_get(&ks).map_err(FfiError::from).and_then(|v| {
            if v.len() == n {
                Ok(v)
            } else {
                Err(FfiError::new(
                    STRATA_ERROR,
                    format!("the engine returned {} values for {n} keys", v.len()),
                ))
            }
        });
        drop(ks); // no borrowed key bytes outlive the engine call: the copies below write
        let answer = |i: usize, status: c_int, len: usize| {
            // SAFETY: i < n; both arrays are writable for n elements (checked non-null above).
            unsafe {
                statuses.add(i).write(status);
                value_lens.add(i).write(len);
            }
        };
        let values = match result {
            Ok(values) => values,
            Err(e) => {
                (0..n).for_each(|i| answer(i, e.code, 0));
                return Err(e);
            }
        };
        for (i, v) in values.into_iter().enumerate() {
            match v {
                None => answer(i, STRATA_NOT_FOUND, 0),
                Some(v) if v.len() > buf_lens[i] => answer(i, STRATA_BUFFER_TOO_SMALL, v.len()),
                Some(v) => {
                    // Nothing to copy for an empty value (its buffer may be null).
                    if !v.is_empty() {
                        std::ptr::copy_nonoverlapping(
                            v.as_ptr(),
                            buf_ptrs[i].cast::<u8>(),
                            v.len(),
                        );
                    }
                    answer(i, STRATA_OK, v.len());
                }
            }
        }
        Ok(STRATA_OK)
    })
}

/// Makes every write so far durable.
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_sync(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        handle("db", db)?.db.sync()?;
        Ok(STRATA_OK)
    })
}

/// Waits until the database's remote store (config key `remote`) holds
/// every write made so far (`Db::sync_remote`).
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_sync_remote(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        handle("db", db)?.db.sync_remote()?;
        Ok(STRATA_OK)
    })
}

/// A follower's move to its store's newest index (`Db::refresh_remote`):
/// `*lsn` (if not null) gets the LSN the database shows.
///
/// # Safety
/// `db` a live handle; `lsn` null or writable.
#[no_mangle]
pub unsafe extern "C" fn strata_refresh_remote(
    db: *const strata_db_t,
    lsn: *mut u64,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let at = handle("db", db)?.db.refresh_remote()?;
        if let Some(out) = lsn.as_mut() {
            *out = at;
        }
        Ok(STRATA_OK)
    })
}

/// Flushes the in-memory layer to a layer file.
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_flush(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        handle("db", db)?.db.flush()?;
        Ok(STRATA_OK)
    })
}

/// Flushes, then compacts every L0 layer into L1 runs before returning
/// (`Db::compact`): the database settled, no compaction left due.
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_compact(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        handle("db", db)?.db.compact()?;
        Ok(STRATA_OK)
    })
}

/// The engine's statistics as a JSON object, malloc'd and NUL-terminated;
/// free with `strata_free`. Null on failure.
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_stats_json(
    db: *const strata_db_t,
    err: *mut *mut strata_error_t,
) -> *mut c_char {
    guard_ptr(err, || {
        let h = handle("db", db)?;
        Ok(malloc_copy(stats_json(&h.db.stats())?.to_string().as_bytes())?.cast())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_json_is_the_engines_document_with_every_io_class_and_kind() {
        let dir = tempfile::tempdir().unwrap();
        let db = engine::Db::open(dir.path(), engine::Options::default()).unwrap();
        db.put(b"k", b"v", engine::WriteOptions::default()).unwrap();
        let v = stats_json(&db.stats()).unwrap();
        assert_eq!(v["last_lsn"], 1, "{v}");
        assert_eq!(v["point_lookup_reads"], 0, "{v}");
        assert_eq!(v["read_retries"], 0, "{v}");
        assert!(v["io"]["log"]["write"]["ops"].as_u64() > Some(0), "{v}");
        // Zeros included: a class that saw no operation is there.
        assert_eq!(v["io"]["image"]["read"]["ops"], 0, "{v}");
        assert_eq!(v["io"]["image"]["read"]["retries"], 0, "{v}");
        assert!(v["compaction_error"].is_null(), "{v}");
    }
}

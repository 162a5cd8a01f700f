//! `strata_read_queue_t`: the engine's read queue (`strata::ReadQueue`) in
//! C. A get is submitted with the caller's buffer and tag; when it is
//! reaped its value has been copied into that buffer, and the completion
//! says its tag, status and length.
//!
//! Invariants: each outstanding get has an entry in `pending` (the caller's
//! tag and buffer) under the internal tag the engine carries, freed when it
//! is reaped; nothing is written into a caller's buffer except while that
//! get's completion is reaped; destroying the queue cancels what is in
//! flight and writes nothing. The queue keeps the database's state alive
//! (like the engine's `ReadQueue`), so it stays usable after `strata_close`.
//! Thread-safety: one thread at a time per queue (the engine's queue is
//! `Send`, not `Sync`).

use std::ffi::{c_char, c_int};

use crate::db::strata_db_t;
use crate::engine;
use crate::error::{
    strata_error_t, FfiError, STRATA_BUFFER_TOO_SMALL, STRATA_NOT_FOUND, STRATA_OK,
};
use crate::guard::{guard, guard_ptr, handle, key, BUFFER_BYTES_MAX};

/// A read queue. Opaque in C.
#[allow(non_camel_case_types)]
pub struct strata_read_queue_t {
    queue: engine::ReadQueue,
    /// By internal tag: the caller's tag and buffer of an outstanding get.
    pending: Vec<Option<(u64, *mut u8, usize)>>,
    free: Vec<usize>,
}

/// A reaped get, as C sees it.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct strata_read_completion_t {
    /// The caller's tag given at submit.
    pub tag: u64,
    /// `STRATA_OK` (the value is in the buffer), `STRATA_NOT_FOUND`,
    /// `STRATA_BUFFER_TOO_SMALL` (nothing copied), or the error's code.
    pub status: c_int,
    /// OK: bytes copied; BUFFER_TOO_SMALL: bytes needed; else 0.
    pub value_len: usize,
    /// For an error status: the error (free with `strata_error_free`);
    /// else null.
    pub error: *mut strata_error_t,
}

fn queue_mut<'a>(q: *mut strata_read_queue_t) -> Result<&'a mut strata_read_queue_t, FfiError> {
    // SAFETY: the caller passes a live queue of this library (strata.h).
    unsafe { q.as_mut() }.ok_or_else(|| FfiError::invalid("queue is a null pointer"))
}

/// A queue of up to `depth` gets in flight (1..=4096). Null on failure.
///
/// # Safety
/// `db` a live handle.
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_create(
    db: *const strata_db_t,
    depth: usize,
    err: *mut *mut strata_error_t,
) -> *mut strata_read_queue_t {
    guard_ptr(err, || {
        let h = handle("db", db)?;
        let queue = h.db().read_queue(depth)?;
        Ok(Box::into_raw(Box::new(strata_read_queue_t {
            queue,
            pending: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
        })))
    })
}

/// Cancels what is in flight (writing into no buffer) and frees the queue.
/// Null is allowed.
///
/// # Safety
/// `q` null or a live queue, not used again.
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_destroy(q: *mut strata_read_queue_t) {
    if !q.is_null() {
        let q = std::panic::AssertUnwindSafe(Box::from_raw(q));
        let _ = std::panic::catch_unwind(move || drop(q));
    }
}

/// Submits a get of `key` at the latest LSN; when reaped, its value is in
/// `buf` (capacity `buf_len`, null allowed when 0). `STRATA_INVALID_ARGUMENT`
/// when `depth` gets are outstanding or the key is bad: nothing submitted.
///
/// # Safety
/// `q` a live queue; `key` readable for `key_len` bytes (copied); `buf`
/// writable for `buf_len` bytes until the get is reaped or the queue
/// destroyed.
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_submit(
    q: *mut strata_read_queue_t,
    key_ptr: *const c_char,
    key_len: usize,
    buf: *mut c_char,
    buf_len: usize,
    tag: u64,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let q = queue_mut(q)?;
        let k = key(key_ptr, key_len)?;
        if buf.is_null() && buf_len != 0 {
            return Err(FfiError::invalid(format!(
                "buf is a null pointer with buf_len = {buf_len}"
            )));
        }
        if buf_len > BUFFER_BYTES_MAX {
            return Err(FfiError::invalid(format!(
                "buf_len = {buf_len} is larger than the largest buffer"
            )));
        }
        let Some(&slot) = q.free.last() else {
            return Err(FfiError::from(strata::Error::from(
                strata::InvalidInput::QueueFull {
                    depth: q.pending.len(),
                },
            )));
        };
        q.queue.submit(slot as u64, k)?;
        q.free.pop();
        q.pending[slot] = Some((tag, buf.cast(), buf_len));
        Ok(STRATA_OK)
    })
}

/// Hands the gets submitted so far to the kernel without waiting (reap
/// does it too).
///
/// # Safety
/// `q` a live queue.
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_commit(
    q: *mut strata_read_queue_t,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        queue_mut(q)?.queue.commit()?;
        Ok(STRATA_OK)
    })
}

/// Reaps at least `min` (at most the outstanding gets) and at most `max`
/// completed gets into `out` (room for `max`), waiting as needed; `*n` is
/// how many. Each reaped get's value has been copied into its buffer.
/// A failure here is the queue's (the kernel refused it), not a get's.
///
/// # Safety
/// `q` a live queue; `out` writable for `max` completions; `n` writable.
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_reap(
    q: *mut strata_read_queue_t,
    min: usize,
    max: usize,
    out: *mut strata_read_completion_t,
    n: *mut usize,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let q = queue_mut(q)?;
        if n.is_null() {
            return Err(FfiError::invalid("n is a null pointer"));
        }
        if out.is_null() && max > 0 {
            return Err(FfiError::invalid(format!(
                "out is a null pointer with max = {max}"
            )));
        }
        let max = max.min(q.pending.len());
        n.write(0);
        let (pending, free) = (&mut q.pending, &mut q.free);
        let mut count = 0;
        // Each value goes from where the engine checked it into the
        // caller's buffer: one copy, no allocation.
        q.queue.reap_with(min, max, &mut |slot, result| {
            let Some((tag, buf, buf_len)) = pending.get_mut(slot as usize).and_then(Option::take)
            else {
                return;
            };
            free.push(slot as usize);
            let (status, value_len, error) = match result {
                Ok(None) => (STRATA_NOT_FOUND, 0, std::ptr::null_mut()),
                Ok(Some(v)) if v.len() > buf_len => {
                    (STRATA_BUFFER_TOO_SMALL, v.len(), std::ptr::null_mut())
                }
                Ok(Some(v)) => {
                    if !v.is_empty() {
                        // SAFETY: buf is writable for buf_len >= v.len() bytes
                        // until this get is reaped (the submit's contract).
                        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), buf, v.len()) };
                    }
                    (STRATA_OK, v.len(), std::ptr::null_mut())
                }
                Err(e) => {
                    let e = FfiError::from(e);
                    (e.code, 0, Box::into_raw(strata_error_t::from_ffi(e)))
                }
            };
            // SAFETY: count < max (the engine hands at most max); out is
            // writable for max completions, n writable.
            unsafe {
                out.add(count).write(strata_read_completion_t {
                    tag,
                    status,
                    value_len,
                    error,
                });
                count += 1;
                n.write(count);
            }
        })?;
        Ok(STRATA_OK)
    })
}

/// Cancels the gets in flight submitted with `tag` (each is reaped with
/// status `STRATA_CANCELLED`); returns how many.
///
/// # Safety
/// `q` a live queue or null (0).
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_cancel(q: *mut strata_read_queue_t, tag: u64) -> usize {
    let Ok(q) = queue_mut(q) else { return 0 };
    let slots: Vec<usize> = q
        .pending
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.filter(|p| p.0 == tag).map(|_| i))
        .collect();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        slots.into_iter().map(|s| q.queue.cancel(s as u64)).sum()
    }))
    .unwrap_or(0)
}

/// Gets submitted and not yet reaped.
///
/// # Safety
/// `q` a live queue or null (0).
#[no_mangle]
pub unsafe extern "C" fn strata_read_queue_outstanding(q: *const strata_read_queue_t) -> usize {
    q.as_ref().map_or(0, |q| q.queue.outstanding())
}

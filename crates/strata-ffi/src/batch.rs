//! `strata_writebatch_t`: a `engine::WriteBatch` behind a C handle.
//!
//! Thread-safety: one thread at a time per batch (the C caller's duty).

use std::ffi::{c_char, c_int};

use crate::engine;
use crate::error::{strata_error_t, STRATA_OK};
use crate::guard::{bytes, guard, handle_mut, key};

/// A write batch. Opaque in C.
#[allow(non_camel_case_types)]
pub struct strata_writebatch_t {
    pub(crate) batch: engine::WriteBatch,
    /// Entries added since creation or the last clear.
    pub(crate) count: usize,
}

/// A new, empty batch. Never null.
#[no_mangle]
pub extern "C" fn strata_writebatch_create() -> *mut strata_writebatch_t {
    Box::into_raw(Box::new(strata_writebatch_t {
        batch: engine::WriteBatch::new(),
        count: 0,
    }))
}

/// Frees a batch. Null is allowed.
///
/// # Safety
/// `b` is null or from `strata_writebatch_create`, not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn strata_writebatch_destroy(b: *mut strata_writebatch_t) {
    if !b.is_null() {
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(b)));
    }
}

/// Empties a batch so it can be reused. Null is ignored.
///
/// # Safety
/// `b` is null or a live batch.
#[no_mangle]
pub unsafe extern "C" fn strata_writebatch_clear(b: *mut strata_writebatch_t) {
    if let Some(b) = b.as_mut() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.batch.clear();
            b.count = 0;
        }));
    }
}

/// Number of puts and deletes in the batch; 0 for null.
///
/// # Safety
/// `b` is null or a live batch.
#[no_mangle]
pub unsafe extern "C" fn strata_writebatch_count(b: *const strata_writebatch_t) -> usize {
    b.as_ref().map_or(0, |b| b.count)
}

/// Adds a put. The key and value are copied.
///
/// # Safety
/// `b` a live batch; `key`/`value` readable for their lengths (value may be
/// null with length 0).
#[no_mangle]
pub unsafe extern "C" fn strata_writebatch_put(
    b: *mut strata_writebatch_t,
    key_ptr: *const c_char,
    key_len: usize,
    value: *const c_char,
    value_len: usize,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let b = handle_mut("batch", b)?;
        let k = key(key_ptr, key_len)?;
        let v = bytes("value", value, value_len)?;
        b.batch.put(k, v);
        b.count += 1;
        Ok(STRATA_OK)
    })
}

/// Adds a delete. The key is copied.
///
/// # Safety
/// `b` a live batch; `key` readable for `key_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn strata_writebatch_delete(
    b: *mut strata_writebatch_t,
    key_ptr: *const c_char,
    key_len: usize,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let b = handle_mut("batch", b)?;
        let k = key(key_ptr, key_len)?;
        b.batch.delete(k);
        b.count += 1;
        Ok(STRATA_OK)
    })
}

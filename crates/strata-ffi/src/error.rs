//! The error that crosses the C boundary: `strata_error_t`, its status codes
//! and the conversions from the engine's errors and from panics.
//!
//! Owns: every `STRATA_*` status code and the message text the C caller reads.
//! Invariants: a status code is never `STRATA_OK` inside a `strata_error_t`;
//! the message is a NUL-terminated C string without interior NULs.
//! Thread-safety: an error belongs to the caller that received it; nothing is
//! shared.

use std::ffi::{c_char, c_int, CString};
use std::fmt;

/// The call succeeded.
pub const STRATA_OK: c_int = 0;
/// The key has no value (get only); not an error, `*err` is left untouched.
pub const STRATA_NOT_FOUND: c_int = 1;
/// A null pointer, a bad length or a value outside the engine's limits.
pub const STRATA_INVALID_ARGUMENT: c_int = 2;
/// The configuration could not be read or holds an unknown key or a bad value.
pub const STRATA_CONFIG_ERROR: c_int = 3;
/// An operating-system I/O error (includes a filesystem refusing O_DIRECT).
pub const STRATA_IO_ERROR: c_int = 4;
/// Bytes on disk failed a check.
pub const STRATA_CORRUPTION: c_int = 5;
/// The caller's buffer is shorter than the value; `*value_len` holds the size needed.
pub const STRATA_BUFFER_TOO_SMALL: c_int = 6;
/// The database is closed, or stopped after a background error.
pub const STRATA_CLOSED: c_int = 7;
/// A panic inside the engine was caught at the boundary.
pub const STRATA_PANIC: c_int = 8;
/// Any other engine error (not a database, unsupported format version, ...).
pub const STRATA_ERROR: c_int = 9;
/// write: the batch was applied but could not be made durable as asked; it
/// may or may not survive a restart (reopen and compare the last LSN).
pub const STRATA_NOT_DURABLE: c_int = 10;
/// A read queue's get cancelled before it completed (`strata_read_queue_cancel`).
pub const STRATA_CANCELLED: c_int = 11;
/// A write, flush or compaction of a read-only follower (`Error::ReadOnly`).
pub const STRATA_READ_ONLY: c_int = 12;

/// An error as the C caller sees it. Opaque in C.
#[allow(non_camel_case_types)]
pub struct strata_error_t {
    code: c_int,
    message: CString,
}

/// An error on its way to the boundary: a status code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FfiError {
    pub code: c_int,
    pub message: String,
}

impl FfiError {
    pub fn new(code: c_int, message: impl Into<String>) -> Self {
        debug_assert!(
            code != STRATA_OK && code != STRATA_NOT_FOUND,
            "not an error code: {code}"
        );
        FfiError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        FfiError::new(STRATA_INVALID_ARGUMENT, message)
    }

    pub fn config(message: impl Into<String>) -> Self {
        FfiError::new(STRATA_CONFIG_ERROR, message)
    }
}

impl fmt::Display for FfiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<strata::Error> for FfiError {
    fn from(e: strata::Error) -> Self {
        let code = match &e {
            // A write refused while the flush fails: nothing was written.
            strata::Error::Io { .. }
            | strata::Error::DirectIoUnsupported { .. }
            | strata::Error::FlushBacklog { .. }
            | strata::Error::CompactionBacklog { .. }
            | strata::Error::Remote { .. } => STRATA_IO_ERROR,
            strata::Error::Corruption(_) => STRATA_CORRUPTION,
            strata::Error::InvalidInput(_) | strata::Error::BelowHorizon { .. } => {
                STRATA_INVALID_ARGUMENT
            }
            strata::Error::Closed | strata::Error::Poisoned(_) | strata::Error::Fenced { .. } => {
                STRATA_CLOSED
            }
            strata::Error::NotDurable { .. } => STRATA_NOT_DURABLE,
            strata::Error::Cancelled => STRATA_CANCELLED,
            strata::Error::ReadOnly { .. } => STRATA_READ_ONLY,
            _ => STRATA_ERROR,
        };
        FfiError::new(code, e.to_string())
    }
}

impl strata_error_t {
    pub(crate) fn from_ffi(e: FfiError) -> Box<Self> {
        // Interior NULs cannot come from the engine's messages in practice;
        // replace them rather than lose the message.
        let text = e.message.replace('\0', "\\0");
        let message = CString::new(text).unwrap_or_default();
        Box::new(strata_error_t {
            code: e.code,
            message,
        })
    }
}

/// Stores `e` in `*err` when the caller asked for errors. A previous error in
/// `*err` is freed first, so a caller may reuse one slot across calls.
///
/// # Safety
/// `err` is null or points to a slot holding null or a `strata_error_t*`
/// returned by this library.
pub(crate) unsafe fn set_error(err: *mut *mut strata_error_t, e: FfiError) -> c_int {
    let code = e.code;
    if !err.is_null() {
        let old = *err;
        if !old.is_null() {
            drop(Box::from_raw(old));
        }
        *err = Box::into_raw(strata_error_t::from_ffi(e));
    }
    code
}

/// Frees an error. Null is allowed.
///
/// # Safety
/// `err` is null or an error returned by this library, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn strata_error_free(err: *mut strata_error_t) {
    if !err.is_null() {
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(err)));
    }
}

/// The error's message, valid until the error is freed. Never null: a null
/// error gives an empty string.
///
/// # Safety
/// `err` is null or a live error returned by this library.
#[no_mangle]
pub unsafe extern "C" fn strata_error_message(err: *const strata_error_t) -> *const c_char {
    if err.is_null() {
        return c"".as_ptr();
    }
    (*err).message.as_ptr()
}

/// The error's status code (`STRATA_*`); `STRATA_OK` for a null error.
///
/// # Safety
/// `err` is null or a live error returned by this library.
#[no_mangle]
pub unsafe extern "C" fn strata_error_code(err: *const strata_error_t) -> c_int {
    if err.is_null() {
        return STRATA_OK;
    }
    (*err).code
}

//! The boundary guard: every entry point runs its body through [`guard`], so
//! that no panic unwinds into C and every failure becomes a status code plus a
//! `strata_error_t`. Also the checked conversions of C pointers and lengths.
//!
//! Invariants: a body returns `Ok(status)` with `status` in
//! {`STRATA_OK`, `STRATA_NOT_FOUND`, `STRATA_BUFFER_TOO_SMALL` when it set no
//! error} or an `FfiError`; the guard never returns `STRATA_OK` after storing
//! an error.

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{set_error, strata_error_t, FfiError, STRATA_PANIC};

/// Runs `body`, turning an `Err` or a panic into a status code and `*err`.
///
/// # Safety
/// `err` must satisfy [`set_error`]'s contract.
pub(crate) unsafe fn guard<F>(err: *mut *mut strata_error_t, body: F) -> c_int
where
    F: FnOnce() -> Result<c_int, FfiError>,
{
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => set_error(err, e),
        Err(payload) => set_error(err, panic_error(payload)),
    }
}

/// Like [`guard`] for entry points that return a pointer: null on failure.
///
/// # Safety
/// `err` must satisfy [`set_error`]'s contract.
pub(crate) unsafe fn guard_ptr<T, F>(err: *mut *mut strata_error_t, body: F) -> *mut T
where
    F: FnOnce() -> Result<*mut T, FfiError>,
{
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            set_error(err, e);
            std::ptr::null_mut()
        }
        Err(payload) => {
            set_error(err, panic_error(payload));
            std::ptr::null_mut()
        }
    }
}

fn panic_error(payload: Box<dyn std::any::Any + Send>) -> FfiError {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_string());
    FfiError::new(
        STRATA_PANIC,
        format!("internal error (panic caught at the C boundary): {what}"),
    )
}

/// Largest length a C caller may pass for one buffer; Rust slices cannot
/// exceed `isize::MAX` bytes.
pub(crate) const BUFFER_BYTES_MAX: usize = isize::MAX as usize;

/// A byte slice from a C pointer and length. Null is accepted only with
/// length 0 (an empty value).
///
/// # Safety
/// When non-null, `ptr` points to `len` readable bytes that stay valid and
/// unmodified for the returned lifetime.
pub(crate) unsafe fn bytes<'a>(
    what: &str,
    ptr: *const c_char,
    len: usize,
) -> Result<&'a [u8], FfiError> {
    if len > BUFFER_BYTES_MAX {
        return Err(FfiError::invalid(format!(
            "{what}_len = {len} is larger than the largest buffer ({BUFFER_BYTES_MAX} bytes)"
        )));
    }
    if ptr.is_null() {
        if len == 0 {
            return Ok(&[]);
        }
        return Err(FfiError::invalid(format!(
            "{what} is a null pointer with {what}_len = {len}"
        )));
    }
    Ok(std::slice::from_raw_parts(ptr.cast::<u8>(), len))
}

/// A key: like [`bytes`], and never empty.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn key<'a>(ptr: *const c_char, len: usize) -> Result<&'a [u8], FfiError> {
    if ptr.is_null() {
        return Err(FfiError::invalid("key is a null pointer"));
    }
    if len == 0 {
        return Err(FfiError::invalid("key_len is 0; keys are at least 1 byte"));
    }
    bytes("key", ptr, len)
}

/// A UTF-8 string from a NUL-terminated C string; `None` when `ptr` is null.
///
/// # Safety
/// When non-null, `ptr` is a NUL-terminated string valid for the call.
pub(crate) unsafe fn opt_str<'a>(
    what: &str,
    ptr: *const c_char,
) -> Result<Option<&'a str>, FfiError> {
    if ptr.is_null() {
        return Ok(None);
    }
    CStr::from_ptr(ptr)
        .to_str()
        .map(Some)
        .map_err(|e| FfiError::invalid(format!("{what} is not valid UTF-8: {e}")))
}

/// A reference from a C handle pointer; null is an error that names the handle.
///
/// # Safety
/// When non-null, `ptr` is a live handle of type `T` from this library.
pub(crate) unsafe fn handle<'a, T>(what: &str, ptr: *const T) -> Result<&'a T, FfiError> {
    ptr.as_ref()
        .ok_or_else(|| FfiError::invalid(format!("{what} is a null pointer")))
}

/// A mutable reference from a C handle pointer; null is an error.
///
/// # Safety
/// When non-null, `ptr` is a live handle of type `T` not used concurrently.
pub(crate) unsafe fn handle_mut<'a, T>(what: &str, ptr: *mut T) -> Result<&'a mut T, FfiError> {
    ptr.as_mut()
        .ok_or_else(|| FfiError::invalid(format!("{what} is a null pointer")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{strata_error_code, strata_error_free, strata_error_message, STRATA_OK};

    #[test]
    fn a_panic_becomes_strata_panic_with_its_message() {
        let mut err: *mut strata_error_t = std::ptr::null_mut();
        // SAFETY: err is a valid slot holding null.
        let status = unsafe { guard(&mut err, || panic!("boom {}", 7)) };
        assert_eq!(status, STRATA_PANIC);
        assert!(!err.is_null());
        // SAFETY: err was just set by the guard.
        unsafe {
            assert_eq!(strata_error_code(err), STRATA_PANIC);
            let msg = CStr::from_ptr(strata_error_message(err)).to_str().unwrap();
            assert!(msg.contains("boom 7"), "{msg}");
            strata_error_free(err);
        }
    }

    #[test]
    fn a_pointer_returning_entry_point_gives_null_on_panic() {
        // SAFETY: a null err slot is allowed.
        let p: *mut u8 = unsafe { guard_ptr(std::ptr::null_mut(), || panic!("x")) };
        assert!(p.is_null());
    }

    #[test]
    fn success_leaves_the_error_slot_alone() {
        let mut err: *mut strata_error_t = std::ptr::null_mut();
        // SAFETY: err is a valid slot holding null.
        assert_eq!(unsafe { guard(&mut err, || Ok(STRATA_OK)) }, STRATA_OK);
        assert!(err.is_null());
    }

    #[test]
    fn null_pointers_and_absurd_lengths_are_rejected() {
        // SAFETY: null pointers are checked before any read.
        unsafe {
            assert!(key(std::ptr::null(), 3).is_err());
            assert!(key(c"k".as_ptr(), 0).is_err());
            assert!(bytes("value", std::ptr::null(), 1).is_err());
            assert_eq!(bytes("value", std::ptr::null(), 0).unwrap(), b"");
            assert!(bytes("value", c"v".as_ptr(), usize::MAX).is_err());
            assert!(handle::<u8>("db", std::ptr::null())
                .unwrap_err()
                .message
                .contains("db is a null pointer"));
        }
    }
}

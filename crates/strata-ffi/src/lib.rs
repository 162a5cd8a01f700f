//! C ABI over the strata engine (issue 5): the functions declared in
//! `include/strata.h`, in LevelDB's `c.h` style.
//!
//! Conventions, the same for every function:
//! - Handles (`strata_db_t`, `strata_writebatch_t`, `strata_options_t`,
//!   `strata_error_t`) are opaque pointers created and destroyed only here.
//! - Keys and values are a pointer plus a length; a null pointer is allowed
//!   only with length 0, and only for values.
//! - The last parameter is `strata_error_t **err`: null when the caller wants
//!   only the status; otherwise on failure `*err` receives a new error (a
//!   previous error in `*err` is freed first). Free it with
//!   `strata_error_free`; read it with `strata_error_message` /
//!   `strata_error_code`.
//! - Functions return an `int` status (`STRATA_OK` = 0) or, for constructors,
//!   a pointer that is null on failure.
//! - Every entry point runs inside `catch_unwind`: a panic becomes
//!   `STRATA_PANIC` and a message, never an unwind into C.
//! - Thread-safety: a `strata_db_t` may be used from many threads at once,
//!   except `strata_close`, which must be the last call on it. A write batch,
//!   an options object and an error belong to one thread at a time.
//!
//! Modules: `error` (status codes, `strata_error_t`), `guard` (the panic and
//! pointer checks), `config` (JSON/TOML/env configuration), `options`,
//! `batch`, `db` (the entry points; stats as JSON are the engine's own serde
//! form of `Stats`), `engine` (the engine API this crate is written
//! against).

#![allow(clippy::missing_safety_doc)] // each entry point states its contract in strata.h

mod batch;
mod config;
mod db;
mod engine;
mod error;
mod guard;
mod options;
mod queue;

pub use batch::*;
pub use config::{Config, CONFIG_ENV, KEYS as CONFIG_KEYS};
pub use db::*;
pub use error::*;
pub use options::*;
pub use queue::*;

use std::ffi::c_char;

/// The library's version, a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn strata_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Frees memory this library returned to the caller (`strata_get_alloc`
/// values, `strata_stats_json` and `strata_options_to_json` strings). Null is
/// allowed.
///
/// # Safety
/// `ptr` is null or was returned by this library and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn strata_free(ptr: *mut std::ffi::c_void) {
    // Allocated with libc::malloc so that the contract would also hold for
    // free(3); strata_free keeps the door open to change that.
    libc::free(ptr);
}

/// Copies `bytes` into a malloc'd buffer (one extra NUL byte, so text is a C
/// string). Never returns null for an empty slice.
pub(crate) fn malloc_copy(bytes: &[u8]) -> Result<*mut u8, FfiError> {
    // SAFETY: malloc of len+1 >= 1 bytes; checked for null; the copy stays in bounds.
    unsafe {
        let p = libc::malloc(bytes.len() + 1).cast::<u8>();
        if p.is_null() {
            return Err(FfiError::new(
                STRATA_ERROR,
                format!("out of memory allocating {} bytes", bytes.len() + 1),
            ));
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *p.add(bytes.len()) = 0;
        Ok(p)
    }
}

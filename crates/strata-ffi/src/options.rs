//! `strata_options_t`: engine options built up from configuration text, a
//! config file, the `STRATA_CONFIG` variable, and single keys, before
//! `strata_open_with_options`.
//!
//! Invariant: a failed load or set leaves the options as they were.

use std::ffi::{c_char, c_int};

use crate::config::Config;
use crate::error::{strata_error_t, FfiError, STRATA_OK};
use crate::guard::{guard, guard_ptr, handle, handle_mut, opt_str};
use crate::malloc_copy;

/// Options for opening a database. Opaque in C.
#[allow(non_camel_case_types)]
pub struct strata_options_t {
    pub(crate) config: Config,
}

/// New options holding the engine's defaults. Never null.
#[no_mangle]
pub extern "C" fn strata_options_create() -> *mut strata_options_t {
    Box::into_raw(Box::new(strata_options_t {
        config: Config::default(),
    }))
}

/// Frees options. Null is allowed.
///
/// # Safety
/// `opts` is null or from `strata_options_create`, not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn strata_options_destroy(opts: *mut strata_options_t) {
    if !opts.is_null() {
        let _ = std::panic::catch_unwind(|| drop(Box::from_raw(opts)));
    }
}

/// Applies a configuration: JSON text, TOML text, or the path of a `.json` /
/// `.toml` file; null reads `STRATA_CONFIG` (text or path; unset applies
/// nothing). Unknown keys and bad values are `STRATA_CONFIG_ERROR`.
///
/// # Safety
/// `opts` is a live options handle; `config` null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn strata_options_load(
    opts: *mut strata_options_t,
    config: *const c_char,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let opts = handle_mut("opts", opts)?;
        let config = opt_str("config", config)?;
        opts.config.load(config)?;
        Ok(STRATA_OK)
    })
}

/// Sets one configuration key from its text form (`"io_mode"`,
/// `"direct-rw"`), with the same keys and checks as a configuration file.
///
/// # Safety
/// `opts` is a live options handle; `key` and `value` NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn strata_options_set(
    opts: *mut strata_options_t,
    key: *const c_char,
    value: *const c_char,
    err: *mut *mut strata_error_t,
) -> c_int {
    guard(err, || {
        let opts = handle_mut("opts", opts)?;
        let key = opt_str("key", key)?.ok_or_else(|| FfiError::invalid("key is a null pointer"))?;
        let value =
            opt_str("value", value)?.ok_or_else(|| FfiError::invalid("value is a null pointer"))?;
        opts.config.set(key, value)?;
        Ok(STRATA_OK)
    })
}

/// The effective options as a JSON object, malloc'd and NUL-terminated; free
/// with `strata_free`. Null on failure.
///
/// # Safety
/// `opts` is a live options handle.
#[no_mangle]
pub unsafe extern "C" fn strata_options_to_json(
    opts: *const strata_options_t,
    err: *mut *mut strata_error_t,
) -> *mut c_char {
    guard_ptr(err, || {
        let opts = handle("opts", opts)?;
        Ok(malloc_copy(opts.config.to_json().to_string().as_bytes())?.cast())
    })
}

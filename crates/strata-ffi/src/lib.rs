//! C ABI over the strata engine (see issue 5).

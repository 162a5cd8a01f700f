//! The strata lab.

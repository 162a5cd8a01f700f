//! strata

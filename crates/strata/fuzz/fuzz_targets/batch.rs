//! libFuzzer target: `strata::fuzzing::batch` on arbitrary bytes (see that
//! function for the properties checked). Seeds: `seeds/batch/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata::fuzzing::batch(data));

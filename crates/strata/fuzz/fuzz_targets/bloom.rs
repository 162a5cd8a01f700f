//! libFuzzer target: `strata::fuzzing::bloom` on arbitrary bytes (see that
//! function for the properties checked). Seeds: `seeds/bloom/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata::fuzzing::bloom(data));

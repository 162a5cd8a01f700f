//! libFuzzer target: `strata::fuzzing::block_index` on arbitrary bytes (see that
//! function for the properties checked). Seeds: `seeds/block_index/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata::fuzzing::block_index(data));

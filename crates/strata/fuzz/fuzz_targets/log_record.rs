//! libFuzzer target: `strata::fuzzing::log_record` on arbitrary bytes (see that
//! function for the properties checked). Seeds: `seeds/log_record/`.
//!
//! The mutator is libFuzzer's, followed half of the time by
//! `Target::fix_checksums`, so that mutations also reach the checks behind
//! the format's checksums instead of stopping at them.
#![no_main]

use strata::fuzzing::Target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| strata::fuzzing::log_record(data));

libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let size = libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    if seed % 2 == 0 {
        Target::LogRecord.fix_checksums(&mut data[..size]);
    }
    size
});

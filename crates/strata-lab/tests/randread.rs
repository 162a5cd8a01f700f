//! The device's random-read latency probe (`strata_lab::randread`) on real
//! files under CARGO_TARGET_TMPDIR (on the build's disk: O_DIRECT works
//! there, unlike on a tmpfs /tmp).

use std::time::Duration;

use strata_lab::randread::{
    measure, prepare_file, read_len, summarize, FileKind, Method, PointSpec,
};

const FILE_BYTES: u64 = 8 << 20;

#[test]
fn every_method_reads_both_files_at_every_size() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for kind in [FileKind::Unwritten, FileKind::Filled] {
        let path = dir.path().join(kind.name());
        prepare_file(&path, kind, FILE_BYTES, 7).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), FILE_BYTES);
        for method in Method::ALL {
            for size in [1usize, 512, 4096, 65536, 1 << 20] {
                let spec = PointSpec {
                    method,
                    size,
                    reads_max: 20,
                    reads_min: 20,
                    budget: Duration::from_secs(10),
                    seed: 3,
                };
                let s = summarize(&measure(&path, FILE_BYTES, spec).unwrap());
                assert_eq!(s.reads, 20, "{kind:?} {method:?} {size}");
                assert!(s.p50_ns > 0 && s.p50_ns <= s.p99_ns && s.p99_ns <= s.p999_ns);
                assert!(read_len(method, size) >= size);
            }
        }
    }
}

#[test]
fn a_read_larger_than_the_file_and_a_bad_file_size_are_errors() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("f");
    assert!(prepare_file(&path, FileKind::Filled, 1000, 1).is_err());
    prepare_file(&path, FileKind::Unwritten, 1 << 20, 1).unwrap();
    let spec = PointSpec {
        method: Method::Psync,
        size: 2 << 20,
        reads_max: 1,
        reads_min: 1,
        budget: Duration::ZERO,
        seed: 1,
    };
    let err = measure(&path, 1 << 20, spec).unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
}

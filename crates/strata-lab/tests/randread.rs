//! The device's random-read latency probe (`strata_lab::randread`) on real
//! files under CARGO_TARGET_TMPDIR (on the build's disk: O_DIRECT works
//! there, unlike on a tmpfs /tmp).

use std::time::Duration;

use strata_lab::randread::{
    line_latency_ns, measure, point_case, prepare_file, read_len, row_config, summarize, sweep,
    FileKind, Method, PointSpec, SweepParams, FIT_CASE,
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

#[test]
fn the_sweep_gives_a_row_per_point_and_fit_with_the_repeats_spread() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let params = SweepParams {
        file_bytes: 4 << 20,
        size_log2_max: 16,
        repeats: 2,
        reads_min: 4,
        reads_max: 4,
        budget: Duration::ZERO,
        seed: 9,
    };
    let mut filled_seen = Vec::new();
    let out = sweep(dir.path(), &params, |rep, path| {
        filled_seen.push((rep, std::fs::metadata(path).unwrap().len()));
    })
    .unwrap();
    // The filled file is handed over after each repeat, then removed.
    assert_eq!(filled_seen, vec![(0, 4 << 20), (1, 4 << 20)]);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // 2 files × 3 methods × 17 sizes (1 B … 64 KiB), then 6 fits.
    assert_eq!(out.rows.len(), 2 * 3 * 17 + 6);
    for row in &out.rows[..2 * 3 * 17] {
        assert_eq!(row.spread["lat_p50_us"].n, 2, "{row:?}");
        assert_eq!(row.metrics["reads"], 4.0);
        assert!(row.metrics["lat_p50_us"] > 0.0);
    }
    for kind in FileKind::ALL {
        for method in Method::ALL {
            let config = row_config(kind, method);
            assert!(out
                .rows
                .iter()
                .any(|r| r.case == FIT_CASE && r.config == config));
            assert!(out
                .rows
                .iter()
                .any(|r| r.case == point_case(4096) && r.config == config));
        }
    }
    let line = out.read_4k_latency_ns.unwrap();
    assert_eq!(Some(line), line_latency_ns(&out.rows));
    assert!(line > 0.0);
}

//! The ingest experiment (LAB.md §1): the reference matrix of Neon's
//! pageserver bench_ingest, run for strata in each io mode and for each peer
//! on the same workload, cases interleaved across engines (A B A B).
//!
//! Timing covers the writes and the end of the case: `freeze` for "write
//! delta = No", `flush` for "Yes". Opening and closing the engine are not
//! timed. Throughput = value bytes / elapsed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::aims::{Bound, Claim, Reference};
use crate::engine::{self, EngineConfig};
use crate::progress::Progress;
use crate::results::{interleave, DeviceSide, MetricSpec, Row};
use crate::workload::{for_each_batch, KeyLayout, ValueSource};

/// Keys the concurrent reader re-reads on every round (LAB.md §1).
pub const READER_WINDOW_KEYS: u64 = 32;

#[derive(Clone, Copy, Debug)]
pub struct IngestCase {
    pub value_len_bytes: usize,
    pub layout: KeyLayout,
    pub write_delta: bool,
    pub concurrent_reader: bool,
}

impl IngestCase {
    pub fn label(&self) -> String {
        let size = if self.value_len_bytes >= 1024 && self.value_len_bytes.is_multiple_of(1024) {
            format!("{} KiB", self.value_len_bytes / 1024)
        } else {
            format!("{} B", self.value_len_bytes)
        };
        let delta = if self.write_delta { "Yes" } else { "No" };
        let reader = if self.concurrent_reader {
            " +reader"
        } else {
            ""
        };
        format!("{size} {} delta={delta}{reader}", self.layout.label())
    }
}

/// The LAB.md §1 matrix plus the concurrent-reader row.
pub fn cases() -> Vec<IngestCase> {
    let c = |value_len_bytes, layout, write_delta, concurrent_reader| IngestCase {
        value_len_bytes,
        layout,
        write_delta,
        concurrent_reader,
    };
    vec![
        c(100, KeyLayout::Sequential, true, false),
        c(100, KeyLayout::Random, true, false),
        c(100, KeyLayout::RandomReuse(0x3ff), true, false),
        c(100, KeyLayout::Sequential, false, false),
        c(8192, KeyLayout::Sequential, true, false),
        c(8192, KeyLayout::Sequential, false, false),
        c(100, KeyLayout::Sequential, true, true),
    ]
}

#[derive(Clone, Copy, Debug)]
pub struct IngestParams {
    /// Value bytes written per round (LAB.md: 128 MiB).
    pub volume_bytes: u64,
    /// Samples per case and configuration, interleaved across engines.
    pub repeats: u32,
    /// A sample repeats whole rounds (fresh engine, the volume, the end of
    /// the case) until this much timed work was done.
    pub sample_work_s_min: f64,
}

/// The aim: strata's throughput on the 100 B cases at least this
/// multiple of RocksDB's.
pub const ROCKSDB_RATIO_AIM_MIN: f64 = 2.0;

/// Rounds one sample takes at most (a fast engine on a small volume).
pub const SAMPLE_ROUNDS_MAX: u32 = 64;

impl IngestParams {
    pub fn new(quick: bool) -> IngestParams {
        IngestParams {
            volume_bytes: if quick { 32 << 20 } else { 128 << 20 },
            repeats: 3,
            sample_work_s_min: 1.0,
        }
    }
}

/// Rows also carry `device_fraction` (mib_s / device write), which the
/// report shows as the "× device line" column.
pub fn metrics() -> Vec<MetricSpec> {
    vec![
        MetricSpec::new("mib_s", "Throughput (median)", "MiB/s", true).vs_device(DeviceSide::Write),
        MetricSpec::new("puts_s", "Puts", "puts/s", true),
        MetricSpec::new("elapsed_s", "Elapsed per round", "s", false),
        MetricSpec::new("work_s", "Timed work per sample", "s", false),
        MetricSpec::new("reader_gets_s", "Concurrent reader gets", "gets/s", true),
    ]
}

/// One timed round of `case` on a fresh engine in `dir` (removed afterwards).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunFigures {
    pub elapsed_s: f64,
    pub reader_gets: u64,
    pub reader_misses: u64,
}

pub fn run_case(
    config: &EngineConfig,
    case: &IngestCase,
    volume_bytes: u64,
    dir: &Path,
) -> Result<RunFigures> {
    let _ = std::fs::remove_dir_all(dir);
    let engine = engine::open(config, dir)?;
    let values = ValueSource::new(case.value_len_bytes);
    let puts = (volume_bytes / case.value_len_bytes as u64).max(1);
    let written = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let layout = case.layout;

    let outcome = std::thread::scope(|s| -> Result<RunFigures> {
        let reader = case.concurrent_reader.then(|| {
            let engine = &engine;
            let written = &written;
            let done = &done;
            s.spawn(move || -> Result<(u64, u64)> {
                let mut gets = 0u64;
                let mut misses = 0u64;
                while !done.load(Ordering::Acquire) {
                    let last = written.load(Ordering::Acquire);
                    for i in last.saturating_sub(READER_WINDOW_KEYS)..last {
                        if engine.get(&layout.key(i))?.is_none() {
                            misses += 1;
                        }
                        gets += 1;
                    }
                    if last == 0 {
                        std::thread::yield_now();
                    }
                }
                Ok((gets, misses))
            })
        });
        let start = Instant::now();
        let written_result = for_each_batch(layout, &values, puts, |first, batch| {
            engine.write(batch)?;
            written.store(first + batch.len() as u64, Ordering::Release);
            Ok(())
        })
        .and_then(|()| {
            if case.write_delta {
                engine.flush()
            } else {
                engine.freeze()
            }
        });
        let elapsed_s = start.elapsed().as_secs_f64();
        done.store(true, Ordering::Release);
        let (reader_gets, reader_misses) = match reader {
            Some(handle) => handle
                .join()
                .map_err(|_| anyhow::anyhow!("reader thread panicked"))??,
            None => (0, 0),
        };
        written_result?;
        Ok(RunFigures {
            elapsed_s,
            reader_gets,
            reader_misses,
        })
    });
    engine.close()?;
    let _ = std::fs::remove_dir_all(dir);
    outcome
}

/// One sample: whole rounds of `case` until `params.sample_work_s_min` of
/// timed work (at most [`SAMPLE_ROUNDS_MAX`] rounds), summed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub rounds: u32,
    pub figures: RunFigures,
}

pub fn run_sample(
    config: &EngineConfig,
    case: &IngestCase,
    params: &IngestParams,
    dir: &Path,
) -> Result<Sample> {
    let mut sample = Sample::default();
    while sample.rounds == 0
        || (sample.figures.elapsed_s < params.sample_work_s_min
            && sample.rounds < SAMPLE_ROUNDS_MAX)
    {
        let round = run_case(config, case, params.volume_bytes, dir)?;
        sample.rounds += 1;
        sample.figures.elapsed_s += round.elapsed_s;
        sample.figures.reader_gets += round.reader_gets;
        sample.figures.reader_misses += round.reader_misses;
    }
    Ok(sample)
}

/// Runs every case for every engine configuration, samples interleaved
/// across configurations (A B C A B C …), and returns one row per (case,
/// configuration) with the median and spread of its samples.
pub fn run(
    configs: &[EngineConfig],
    params: IngestParams,
    data_dir: &Path,
    device_write_mib_s: Option<f64>,
    notes: &mut Vec<String>,
) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut progress = Progress::new(
        "ingest",
        (cases().len() * configs.len()) as u64 * params.repeats as u64,
    );
    for case in cases() {
        let label = case.label();
        let puts = (params.volume_bytes / case.value_len_bytes as u64).max(1);
        let value_mib = (puts * case.value_len_bytes as u64) as f64 / (1024.0 * 1024.0);
        let mut misses = vec![(0u64, 0u64); configs.len()];
        let taken = interleave(params.repeats, configs.len(), |_rep, i| {
            let config = &configs[i];
            let dir = data_dir.join(format!("ingest-{}", config.kind.name()));
            let sample = run_sample(config, &case, &params, &dir).with_context(|| {
                format!(
                    "{} {} on {label}",
                    config.kind.name(),
                    config.io_mode.name()
                )
            });
            progress.inc(1);
            let Sample { rounds, figures } = sample?;
            let work_s = figures.elapsed_s;
            let mib_s = value_mib * rounds as f64 / work_s;
            let mut row = Row::new(&label, config.kind.name(), config.io_mode.name())
                .metric("mib_s", mib_s)
                .metric("puts_s", (puts * rounds as u64) as f64 / work_s)
                .metric("elapsed_s", work_s / rounds as f64)
                .metric("work_s", work_s);
            if let Some(device) = device_write_mib_s {
                row = row.metric("device_fraction", mib_s / device);
            }
            if case.concurrent_reader {
                row = row.metric("reader_gets_s", figures.reader_gets as f64 / work_s);
                misses[i].0 += figures.reader_misses;
                misses[i].1 += figures.reader_gets;
            }
            Ok(row.param("rounds", rounds))
        });
        let (samples, failed) = (taken.samples, taken.errors);
        for (i, config) in configs.iter().enumerate() {
            if let Some(err) = &failed[i] {
                progress.println(&format!("  ingest failed: {err:#}"));
                notes.push(format!("ingest failed: {err:#}"));
                continue;
            }
            let Some(row) = Row::from_samples(&samples[i]) else {
                continue;
            };
            let sample_mib_s: Vec<f64> = samples[i].iter().map(|r| r.metrics["mib_s"]).collect();
            let mut row = row
                .param("value_len_bytes", case.value_len_bytes as u64)
                .param("key_layout", case.layout.label())
                .param("write_delta", case.write_delta)
                .param("concurrent_reader", case.concurrent_reader)
                .param("puts_per_round", puts)
                .param(
                    "rounds_per_sample",
                    samples[i]
                        .iter()
                        .map(|r| r.params["rounds"].clone())
                        .collect::<Vec<_>>(),
                )
                .param("samples_mib_s", sample_mib_s);
            row.params.remove("rounds");
            let (reader_misses, reader_gets) = misses[i];
            if case.concurrent_reader {
                row = row.param("reader_misses", reader_misses);
                if reader_misses > 0 {
                    notes.push(format!(
                        "{} {}: the concurrent reader missed {reader_misses} of {reader_gets} keys already written",
                        config.kind.name(),
                        config.io_mode.name()
                    ));
                }
            }
            let mib_s = row.metrics.get("mib_s").copied().unwrap_or(f64::NAN);
            let spread = row
                .spread
                .get("mib_s")
                .map(|s| format!(" ({:.0}–{:.0})", s.min, s.max))
                .unwrap_or_default();
            progress.println(&format!(
                "  {:<38} {:<8} {:<9} {:>8.1} MiB/s{spread} {:>10.0} puts/s{}",
                label,
                config.kind.name(),
                config.io_mode.name(),
                mib_s,
                row.metrics.get("puts_s").copied().unwrap_or(f64::NAN),
                device_write_mib_s
                    .map(|d| format!("  {:.2}× device", mib_s / d))
                    .unwrap_or_default()
            ));
            rows.push(row);
        }
    }
    progress.finish("done");
    Ok(rows)
}

/// The aims checked on the rows: strata (best io mode) ahead of
/// every peer (best mode) on every case, and at least 2× RocksDB on the
/// 100 B cases. Empty without strata rows or without peers.
pub fn aims(rows: &[Row]) -> Vec<Claim> {
    let best = |case: &str, engine: &str| {
        rows.iter()
            .filter(|r| r.case == case && r.engine == engine)
            .filter_map(|r| r.metrics.get("mib_s").copied())
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| a.max(v)))
            })
    };
    let mut cases: Vec<&str> = Vec::new();
    let mut peers: Vec<&str> = Vec::new();
    for r in rows {
        if !cases.contains(&r.case.as_str()) {
            cases.push(&r.case);
        }
        if r.engine != "strata" && !peers.contains(&r.engine.as_str()) {
            peers.push(&r.engine);
        }
    }
    let mut behind = Vec::new();
    let mut ahead = 0;
    let mut rocks_checked = 0;
    let mut rocks_short = Vec::new();
    for case in &cases {
        let Some(strata) = best(case, "strata") else {
            continue;
        };
        let mut case_ahead = true;
        for peer in &peers {
            if let Some(p) = best(case, peer) {
                if p >= strata {
                    case_ahead = false;
                    behind.push(format!("{case}: {peer} {p:.0} vs strata {strata:.0} MiB/s"));
                }
            }
        }
        if case_ahead {
            ahead += 1;
        }
        if case.starts_with("100 B") {
            if let Some(r) = best(case, "rocksdb") {
                rocks_checked += 1;
                if strata < ROCKSDB_RATIO_AIM_MIN * r {
                    rocks_short.push(format!("{case}: {:.2}×", strata / r));
                }
            }
        }
    }
    if peers.is_empty() || !rows.iter().any(|r| r.engine == "strata") {
        return Vec::new();
    }
    let mut claims = vec![Claim::CaseCount {
        what: "strata (best io mode) ahead of every peer".to_string(),
        reference: Reference::Engine("every peer".to_string()),
        cases_label: "cases".to_string(),
        held: ahead,
        checked: cases.len(),
        misses: behind,
        misses_label: "behind on".to_string(),
    }];
    if rocks_checked > 0 {
        claims.push(Claim::CaseCount {
            what: format!("strata {}× RocksDB", Bound::AtLeast(ROCKSDB_RATIO_AIM_MIN)),
            reference: Reference::Engine("RocksDB".to_string()),
            cases_label: "100 B cases".to_string(),
            held: rocks_checked - rocks_short.len(),
            checked: rocks_checked,
            misses: rocks_short,
            misses_label: "short on".to_string(),
        });
    }
    // Issue 30's: large values written once put the 8 KiB sequential
    // ingest, flushes included, near the device's write line.
    let large = "8 KiB Sequential delta=Yes";
    let fraction = rows
        .iter()
        .filter(|r| r.case == large && r.engine == "strata")
        .filter_map(|r| r.metrics.get("device_fraction").copied())
        .fold(None, |acc: Option<f64>, v| {
            Some(acc.map_or(v, |a| a.max(v)))
        });
    if let (Some(x), Some(mib_s)) = (fraction, best(large, "strata")) {
        claims.push(Claim::Ratio {
            what: large.to_string(),
            strata: format!("strata {mib_s:.0} MiB/s"),
            ratio: x,
            decimals: 2,
            reference: Reference::Device("the device write line".to_string()),
            bound: Bound::AtLeast(LARGE_VALUE_DEVICE_AIM_MIN),
        });
    }
    claims
}

/// Issue 30's aim for strata's 8 KiB sequential ingest with its flushes,
/// as a fraction of the device's write line from the same run.
pub const LARGE_VALUE_DEVICE_AIM_MIN: f64 = 0.8;

/// [`aims`]' notes, one per aim.
pub fn aim_notes(rows: &[Row]) -> Vec<String> {
    crate::aims::notes(&aims(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, engine: &str, mib_s: f64) -> Row {
        Row::new(case, engine, "x").metric("mib_s", mib_s)
    }

    #[test]
    fn aims_name_the_cases_strata_is_behind_on() {
        let rows = vec![
            row("100 B a", "strata", 100.0),
            row("100 B a", "rocksdb", 40.0),
            row("8 KiB b", "strata", 100.0),
            row("8 KiB b", "lmdb", 150.0),
        ];
        let notes = aim_notes(&rows);
        assert!(notes[0].starts_with("aim not met"), "{notes:?}");
        assert!(notes[0].contains("8 KiB b: lmdb 150"), "{notes:?}");
        assert!(
            notes[1].starts_with("aim met: strata ≥ 2× RocksDB"),
            "{notes:?}"
        );
    }

    #[test]
    fn every_case_has_a_distinct_label() {
        let labels: std::collections::HashSet<String> =
            cases().iter().map(IngestCase::label).collect();
        assert_eq!(labels.len(), cases().len());
    }
}

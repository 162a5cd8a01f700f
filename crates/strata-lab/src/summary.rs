//! The verdict the report opens with: per experiment, strata against the
//! best peer and against the device line as ratios, and each aim met, not
//! met or not judged.
//! Pure functions of the results (no I/O), called by [`crate::report`], so
//! the arithmetic is unit-tested on hand-built results.
//!
//! Everything is taken on the experiment's primary metric. Invariants: every
//! ratio is finite and > 0 and oriented so that > 1 means strata is better
//! (strata ÷ peer when higher is better, peer ÷ strata otherwise); a row
//! whose figure is missing, zero or negative takes no part in a ratio; the
//! device line's own rows (engine `device` or `lab probe`) are never peers;
//! aims are read from the results' `aims`, and from notes only in results
//! written before that field ([`aims`]).

use crate::aims::Verdict;
use crate::results::{DeviceLine, DeviceSide, ExperimentResult, MetricSpec, Row};

/// The engine name of strata's rows (the io experiment's are `strata io`).
const STRATA_ENGINE: &str = "strata";
/// Engines of the rows that measure the device itself, not an engine.
const DEVICE_ENGINES: [&str; 2] = ["device", "lab probe"];

/// One experiment's line in the summary.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentSummary {
    pub experiment: String,
    pub title: String,
    /// The primary metric; `None` if the results do not describe it.
    pub metric: Option<MetricSpec>,
    /// `None` without strata rows, or without a peer on a case strata ran.
    pub vs_peer: Option<PeerRatio>,
    /// `None` unless the primary metric has a device side, the results a
    /// device line and strata a figure.
    pub vs_device: Option<DeviceRatio>,
    /// Each aim's verdict, in order ([`aims`]).
    pub aims: Vec<AimVerdict>,
    /// The device line itself; set for the device experiment only.
    pub device_line: Option<DeviceLine>,
}

/// Strata's best configuration against the best peer's, over the cases.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerRatio {
    /// Geometric mean of the per-case ratios.
    pub geo_mean: f64,
    /// Number of cases both strata and a peer have a figure for (≥ 1).
    pub cases: usize,
    /// The case with the smallest ratio (the first, on a tie).
    pub worst: CaseRatio,
    /// The peer that was best on the most cases (the first seen, on a tie).
    pub best_peer: String,
    pub best_peer_cases: usize,
}

/// One case's ratio of strata's best figure to the best peer's.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseRatio {
    pub case: String,
    /// The best peer on this case.
    pub peer: String,
    pub ratio: f64,
}

/// Strata's best figure as a fraction of the device line.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceRatio {
    /// Median over cases of strata's best figure ÷ the device line.
    pub median: f64,
    /// Number of cases strata has a figure for (≥ 1).
    pub cases: usize,
    pub side: DeviceSide,
    /// The device line's figure on `side`.
    pub line_mib_s: f64,
}

/// An aim's verdict as the summary shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AimVerdict {
    pub verdict: Verdict,
    /// The aim and its figures ([`crate::aims::Aim::text`]).
    pub text: String,
}

/// The summary of every experiment, in the order given.
pub fn summarize(results: &[ExperimentResult]) -> Vec<ExperimentSummary> {
    results.iter().map(summarize_experiment).collect()
}

pub fn summarize_experiment(r: &ExperimentResult) -> ExperimentSummary {
    let is_device = r.experiment == crate::device::EXPERIMENT_NAME;
    ExperimentSummary {
        experiment: r.experiment.clone(),
        title: r.title.clone(),
        metric: r.spec(&r.primary_metric).cloned(),
        vs_peer: peer_ratio(r),
        vs_device: device_ratio(r),
        aims: aims(r),
        device_line: if is_device {
            r.device_line.clone()
        } else {
            None
        },
    }
}

/// Strata's rows: engine `strata`, or `strata …` (the io experiment's
/// `strata io`: strata's own writer).
pub fn is_strata(engine: &str) -> bool {
    engine == STRATA_ENGINE
        || engine
            .strip_prefix(STRATA_ENGINE)
            .is_some_and(|rest| rest.starts_with(' '))
}

/// A peer: neither strata nor the device line's own probe.
pub fn is_peer(engine: &str) -> bool {
    !is_strata(engine) && !DEVICE_ENGINES.contains(&engine)
}

/// The row with the best positive figure for `spec` among `rows`, and that
/// figure; the first row on a tie.
fn best<'a>(rows: impl Iterator<Item = &'a Row>, spec: &MetricSpec) -> Option<(&'a Row, f64)> {
    let mut best: Option<(&Row, f64)> = None;
    for row in rows {
        let Some(v) = row.metrics.get(&spec.key).copied() else {
            continue;
        };
        if !(v.is_finite() && v > 0.0) {
            continue;
        }
        let better = match best {
            None => true,
            Some((_, b)) if spec.higher_is_better => v > b,
            Some((_, b)) => v < b,
        };
        if better {
            best = Some((row, v));
        }
    }
    best
}

/// `strata ÷ peer` when higher is better, `peer ÷ strata` otherwise: > 1
/// means strata is better either way. Both figures must be > 0.
pub fn oriented_ratio(strata: f64, peer: f64, higher_is_better: bool) -> f64 {
    assert!(strata > 0.0 && peer > 0.0, "ratio of {strata} and {peer}");
    let ratio = if higher_is_better {
        strata / peer
    } else {
        peer / strata
    };
    assert!(ratio.is_finite() && ratio > 0.0);
    ratio
}

/// Per case (in first-seen order): strata's best configuration against the
/// best peer's best configuration on the primary metric. Cases without both
/// are left out.
pub fn case_ratios(r: &ExperimentResult) -> Vec<CaseRatio> {
    let Some(spec) = r.spec(&r.primary_metric) else {
        return Vec::new();
    };
    r.cases()
        .into_iter()
        .filter_map(|case| {
            let case_name = case.as_str();
            let in_case = || r.rows.iter().filter(move |row| row.case == case_name);
            let (_, strata) = best(in_case().filter(|row| is_strata(&row.engine)), spec)?;
            let (peer_row, peer) = best(in_case().filter(|row| is_peer(&row.engine)), spec)?;
            Some(CaseRatio {
                case: case.clone(),
                peer: peer_row.engine.clone(),
                ratio: oriented_ratio(strata, peer, spec.higher_is_better),
            })
        })
        .collect()
}

/// The exponential of the mean logarithm; NaN for no values. Every value
/// must be > 0.
pub fn geo_mean(values: &[f64]) -> f64 {
    assert!(values.iter().all(|v| *v > 0.0), "geo-mean of {values:?}");
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// Strata against the best peer, summarized over the cases; `None` when no
/// case has both.
pub fn peer_ratio(r: &ExperimentResult) -> Option<PeerRatio> {
    let ratios = case_ratios(r);
    // `min_by` keeps the first of equal elements.
    let worst = ratios
        .iter()
        .min_by(|a, b| a.ratio.total_cmp(&b.ratio))?
        .clone();
    // Peers in first-seen order with the number of cases each was best on.
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for c in &ratios {
        match counts.iter_mut().find(|(peer, _)| *peer == c.peer) {
            Some((_, n)) => *n += 1,
            None => counts.push((&c.peer, 1)),
        }
    }
    // `max_by_key` keeps the last of equal elements: reversed, the first.
    let (best_peer, best_peer_cases) = *counts.iter().rev().max_by_key(|(_, n)| *n)?;
    let values: Vec<f64> = ratios.iter().map(|c| c.ratio).collect();
    Some(PeerRatio {
        geo_mean: geo_mean(&values),
        cases: ratios.len(),
        worst,
        best_peer: best_peer.to_string(),
        best_peer_cases,
    })
}

/// Median over cases of strata's best figure ÷ the device line on the
/// primary metric's device side; `None` when that cannot be taken.
pub fn device_ratio(r: &ExperimentResult) -> Option<DeviceRatio> {
    let spec = r.spec(&r.primary_metric)?;
    let side = spec.device_side?;
    let line = r.device_line.as_ref()?;
    let line_mib_s = match side {
        DeviceSide::Write => line.write_mib_s,
        DeviceSide::Read => line.read_mib_s,
    };
    if !(line_mib_s.is_finite() && line_mib_s > 0.0) {
        return None;
    }
    let fractions: Vec<f64> = r
        .cases()
        .into_iter()
        .filter_map(|case| {
            let strata = r
                .rows
                .iter()
                .filter(|row| row.case == case && is_strata(&row.engine));
            best(strata, spec).map(|(_, v)| v / line_mib_s)
        })
        .collect();
    if fractions.is_empty() {
        return None;
    }
    Some(DeviceRatio {
        median: crate::results::median(&fractions),
        cases: fractions.len(),
        side,
        line_mib_s,
    })
}

/// The phases experiment's headline for one engine: its read phase at the
/// last iteration it finished, against the device's 4 KiB random read.
#[derive(Clone, Debug, PartialEq)]
pub struct PhasesHeadline {
    pub engine: String,
    pub first_iteration: u32,
    pub last_iteration: u32,
    pub p50_us: f64,
    pub p99_us: f64,
    /// p50 and p99 ÷ the device's 4 KiB read latency (none without it).
    pub p50_x_device: Option<f64>,
    pub p99_x_device: Option<f64>,
    /// p50 ÷ the device's 4 KiB read p50 measured beside the phase's gets
    /// (`phases::PhaseRecord::device_4k_probe_ns`; none without it).
    pub p50_x_probe: Option<f64>,
    /// Last ÷ first iteration's read p50 and p99.
    pub p50_growth: f64,
    pub p99_growth: f64,
    pub device_reads_per_get: Option<f64>,
    /// strata's cache hit ratio ([`crate::get_reads`]); `None` for a peer.
    pub cache_hit_ratio: Option<f64>,
    pub data_mib: Option<f64>,
}

/// Per engine (first-seen order), from the read rows (`read #<n>`) of a
/// phases result; engines without a read row are left out.
pub fn phases_headlines(r: &ExperimentResult) -> Vec<PhasesHeadline> {
    let device_us = device_4k_us(r);
    r.engines()
        .into_iter()
        .filter_map(|engine| {
            let mut reads: Vec<(u32, &Row)> = r
                .rows
                .iter()
                .filter(|row| row.engine == engine)
                .filter_map(|row| match crate::phases::parse_case(&row.case)? {
                    (crate::phases::Phase::Read, it) => Some((it, row)),
                    _ => None,
                })
                .filter(|(_, row)| {
                    row.metrics.contains_key("latency_p50_us")
                        && row.metrics.contains_key("latency_p99_us")
                })
                .collect();
            reads.sort_by_key(|(it, _)| *it);
            let (first_iteration, first) = *reads.first()?;
            let (last_iteration, last) = *reads.last()?;
            let m = |row: &Row, k: &str| row.metrics[k];
            let (p50_us, p99_us) = (m(last, "latency_p50_us"), m(last, "latency_p99_us"));
            Some(PhasesHeadline {
                engine: engine.to_string(),
                first_iteration,
                last_iteration,
                p50_us,
                p99_us,
                p50_x_device: device_us.map(|d| p50_us / d),
                p99_x_device: device_us.map(|d| p99_us / d),
                p50_x_probe: last.metrics.get("p50_x_probe_4k").copied(),
                p50_growth: p50_us / m(first, "latency_p50_us"),
                p99_growth: p99_us / m(first, "latency_p99_us"),
                device_reads_per_get: last.metrics.get("device_reads_per_get").copied(),
                cache_hit_ratio: last
                    .metrics
                    .get(crate::get_reads::HIT_RATIO_METRIC)
                    .copied(),
                data_mib: last.metrics.get("data_mib").copied(),
            })
        })
        .collect()
}

/// Each aim's verdict, from the results' `aims`
/// ([`ExperimentResult::aims`]); the notes are not read. Results written
/// before aims were kept as data have no `aims`: for those only, the
/// verdicts are read back from their notes (`aim met: …` / `aim not met:
/// …` / `aim not judged: …`) by [`crate::aims::split_note`], the one reader left of that prose.
pub fn aims(r: &ExperimentResult) -> Vec<AimVerdict> {
    match &r.aims {
        Some(aims) => aims
            .iter()
            .map(|aim| AimVerdict {
                verdict: aim.verdict(),
                text: aim.text.clone(),
            })
            .collect(),
        None => aims_from_notes(&r.notes),
    }
}

/// The notes that state an aim's verdict (results without `aims`).
fn aims_from_notes(notes: &[String]) -> Vec<AimVerdict> {
    notes
        .iter()
        .filter_map(|note| {
            let (verdict, text) = crate::aims::split_note(note)?;
            Some(AimVerdict {
                verdict,
                text: text.to_string(),
            })
        })
        .collect()
}

/// The device's 4 KiB random-read latency the run used, µs.
pub fn device_4k_us(r: &ExperimentResult) -> Option<f64> {
    r.options
        .get("device_read_4k_latency_ns")?
        .as_f64()
        .filter(|v| *v > 0.0)
        .map(|ns| ns / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::tests::{sample, sample_claim};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// Two cases; strata in two configs, two peers, the device probe.
    fn ingest() -> ExperimentResult {
        let mut r = sample("ingest");
        r.rows = vec![
            Row::new("a", "strata", "Buffered").metric("mib_s", 100.0),
            Row::new("a", "strata", "DirectRw").metric("mib_s", 160.0),
            Row::new("a", "rocksdb", "Buffered").metric("mib_s", 40.0),
            Row::new("a", "rocksdb", "DirectRw").metric("mib_s", 80.0),
            Row::new("a", "fjall", "").metric("mib_s", 20.0),
            // The device's own figure is no peer, however fast.
            Row::new("a", "device", "").metric("mib_s", 1000.0),
            Row::new("b", "strata", "DirectRw").metric("mib_s", 50.0),
            Row::new("b", "rocksdb", "DirectRw").metric("mib_s", 60.0),
            Row::new("b", "fjall", "").metric("mib_s", 100.0),
            // A zero figure takes no part.
            Row::new("b", "redb", "").metric("mib_s", 0.0),
            // A case without a peer is left out.
            Row::new("c", "strata", "DirectRw").metric("mib_s", 120.0),
        ];
        r
    }

    #[test]
    fn strata_best_config_against_best_peer_per_case() {
        let ratios = case_ratios(&ingest());
        assert_eq!(
            ratios,
            vec![
                CaseRatio {
                    case: "a".to_string(),
                    peer: "rocksdb".to_string(),
                    ratio: 2.0, // 160 / 80
                },
                CaseRatio {
                    case: "b".to_string(),
                    peer: "fjall".to_string(),
                    ratio: 0.5, // 50 / 100
                },
            ]
        );
    }

    #[test]
    fn peer_ratio_is_the_geo_mean_with_the_worst_case() {
        let p = peer_ratio(&ingest()).unwrap();
        // √(2 × 0.5) = 1.
        assert!(close(p.geo_mean, 1.0), "{}", p.geo_mean);
        assert_eq!(p.cases, 2);
        assert_eq!(p.worst.case, "b");
        assert_eq!(p.worst.ratio, 0.5);
        // rocksdb and fjall were best once each: the first seen wins.
        assert_eq!((p.best_peer.as_str(), p.best_peer_cases), ("rocksdb", 1));
    }

    #[test]
    fn geo_mean_of_hand_computed_values() {
        assert!(close(geo_mean(&[4.0, 1.0]), 2.0));
        assert!(close(geo_mean(&[2.0, 4.0, 8.0]), 4.0));
        assert!(close(geo_mean(&[3.0]), 3.0));
        assert!(geo_mean(&[]).is_nan());
    }

    #[test]
    fn lower_is_better_metrics_are_oriented_peer_over_strata() {
        assert_eq!(oriented_ratio(2.0, 8.0, false), 4.0);
        assert_eq!(oriented_ratio(2.0, 8.0, true), 0.25);
        let mut r = ingest();
        r.metrics = vec![MetricSpec::new("insert_s", "Insert time", "s", false)];
        r.primary_metric = "insert_s".to_string();
        r.rows = vec![
            // strata's best is its fastest: 10 s; the best peer's is 30 s.
            Row::new("x", "strata", "Buffered").metric("insert_s", 20.0),
            Row::new("x", "strata", "DirectRw").metric("insert_s", 10.0),
            Row::new("x", "rocksdb", "").metric("insert_s", 30.0),
            Row::new("x", "lmdb", "").metric("insert_s", 45.0),
            Row::new("y", "strata", "DirectRw").metric("insert_s", 40.0),
            Row::new("y", "lmdb", "").metric("insert_s", 10.0),
        ];
        let p = peer_ratio(&r).unwrap();
        // x: 30 / 10 = 3 (strata 3× faster); y: 10 / 40 = 0.25.
        assert!(close(p.geo_mean, (3.0f64 * 0.25).sqrt()), "{}", p.geo_mean);
        assert_eq!(p.worst.case, "y");
        assert_eq!(p.worst.peer, "lmdb");
        assert_eq!(p.worst.ratio, 0.25);
        // rocksdb best on x, lmdb on y: a tie, rocksdb seen first.
        assert_eq!(p.best_peer, "rocksdb");
        // No device side on a time: no device ratio.
        assert_eq!(device_ratio(&r), None);
    }

    #[test]
    fn best_peer_is_the_one_best_on_most_cases() {
        let mut r = ingest();
        r.rows
            .push(Row::new("c", "fjall", "").metric("mib_s", 240.0));
        let p = peer_ratio(&r).unwrap();
        assert_eq!((p.best_peer.as_str(), p.best_peer_cases), ("fjall", 2));
        assert_eq!(p.cases, 3);
        // a: 2, b: 0.5, c: 120 / 240 = 0.5; the first of the two worst.
        assert_eq!((p.worst.case.as_str(), p.worst.ratio), ("b", 0.5));
        assert!(close(p.geo_mean, 0.5f64.cbrt()));
    }

    #[test]
    fn device_fraction_is_the_median_over_cases_of_strata_best() {
        // Device write line 200 MiB/s: a 160 → 0.8, b 50 → 0.25, c 120 → 0.6.
        let d = device_ratio(&ingest()).unwrap();
        assert!(close(d.median, 0.6), "{}", d.median);
        assert_eq!(d.cases, 3);
        assert_eq!(d.side, DeviceSide::Write);
        assert_eq!(d.line_mib_s, 200.0);
        // The read side uses the read line (400 MiB/s).
        let mut r = ingest();
        r.metrics[0].device_side = Some(DeviceSide::Read);
        assert!(close(device_ratio(&r).unwrap().median, 0.3));
        // No device line, no fraction.
        r.device_line = None;
        assert_eq!(device_ratio(&r), None);
    }

    #[test]
    fn experiments_without_strata_or_peers_get_no_peer_ratio() {
        // The io experiment: only strata's writer, compared with the device.
        let mut io = sample("io");
        io.rows = vec![
            Row::new("1 MiB", "strata io", "DirectRw").metric("mib_s", 180.0),
            Row::new("1 MiB", "strata io", "Buffered").metric("mib_s", 150.0),
        ];
        assert_eq!(peer_ratio(&io), None);
        assert!(close(device_ratio(&io).unwrap().median, 0.9));

        // The device experiment: probes only, and the line itself.
        let mut device = sample("device");
        device.metrics = vec![MetricSpec::new("mib_s", "Bandwidth", "MiB/s", true)];
        device.rows = vec![
            Row::new("sequential write 1 MiB", "lab probe", "O_DIRECT").metric("mib_s", 200.0),
            Row::new("sequential write 1 MiB", "fio", "").metric("mib_s", 210.0),
        ];
        let s = summarize_experiment(&device);
        assert_eq!(s.vs_peer, None);
        assert_eq!(s.vs_device, None);
        let line = s.device_line.unwrap();
        assert_eq!(
            (line.write_mib_s, line.fio_write_mib_s),
            (200.0, Some(210.0))
        );
        // Other experiments do not repeat the line.
        assert_eq!(summarize_experiment(&ingest()).device_line, None);
    }

    #[test]
    fn phases_headline_is_the_last_read_against_the_device_and_the_first() {
        let mut r = sample("phases");
        r.options.insert(
            "device_read_4k_latency_ns".to_string(),
            serde_json::json!(50_000.0),
        );
        let read = |engine: &str, it: u32, p50: f64, p99: f64| {
            Row::new(&format!("read #{it}"), engine, "")
                .metric("latency_p50_us", p50)
                .metric("latency_p99_us", p99)
                .metric("device_reads_per_get", it as f64 * 0.5)
        };
        r.rows = vec![
            read("strata", 1, 40.0, 100.0),
            // Other phases take no part.
            Row::new("append #3", "strata", "")
                .metric("latency_p50_us", 1.0)
                .metric("latency_p99_us", 1.0),
            read("strata", 3, 100.0, 300.0).metric("cache_hit_ratio", 0.1),
            read("strata", 2, 80.0, 200.0).metric("cache_hit_ratio", 0.5),
            read("lmdb", 1, 10.0, 60.0),
            read("lmdb", 2, 150.0, 240.0),
            Row::new("append #1", "redb", "").metric("latency_p50_us", 5.0),
        ];
        let h = phases_headlines(&r);
        assert_eq!(h.len(), 2, "redb has no read row");
        // strata: last is #3: 100 ÷ 50 = 2×, 300 ÷ 50 = 6×; growth 100 ÷ 40
        // = 2.5, 300 ÷ 100 = 3; 1.5 device reads per get.
        assert_eq!(h[0].engine, "strata");
        assert_eq!((h[0].first_iteration, h[0].last_iteration), (1, 3));
        assert_eq!(h[0].p50_x_device, Some(2.0));
        assert_eq!(h[0].p99_x_device, Some(6.0));
        assert_eq!(h[0].p50_growth, 2.5);
        assert_eq!(h[0].p99_growth, 3.0);
        assert_eq!(h[0].device_reads_per_get, Some(1.5));
        assert_eq!(h[0].cache_hit_ratio, Some(0.1));
        assert_eq!(h[1].cache_hit_ratio, None, "a peer has none");
        // lmdb: 150 ÷ 50 = 3×, 240 ÷ 50 = 4.8×, growth 15 and 4.
        assert_eq!(h[1].p50_x_device, Some(3.0));
        assert!(close(h[1].p99_x_device.unwrap(), 4.8));
        assert_eq!((h[1].p50_growth, h[1].p99_growth), (15.0, 4.0));
        // No device latency: no ratio to it.
        r.options.remove("device_read_4k_latency_ns");
        assert_eq!(phases_headlines(&r)[0].p50_x_device, None);
    }

    #[test]
    fn strata_engine_names() {
        assert!(is_strata("strata"));
        assert!(is_strata("strata io"));
        assert!(!is_strata("stratafoo"));
        assert!(is_peer("rocksdb") && is_peer("psync") && is_peer("io_uring"));
        assert!(!is_peer("device") && !is_peer("lab probe") && !is_peer("strata"));
    }

    #[test]
    fn aims_come_from_the_aims_field_not_the_notes() {
        let mut r = ingest();
        r.aims = Some(crate::aims::records(&[
            sample_claim(true),
            sample_claim(false),
        ]));
        // No note states a verdict; one that looks like one is not read.
        r.notes = vec![
            "a note".to_string(),
            "aim met: a verdict the aims do not hold".to_string(),
        ];
        assert_eq!(
            summarize_experiment(&r).aims,
            vec![
                AimVerdict {
                    verdict: Verdict::Met,
                    text: sample_claim(true).text(),
                },
                AimVerdict {
                    verdict: Verdict::NotMet,
                    text: sample_claim(false).text(),
                },
            ]
        );
        // Results with no aims show none.
        let s = summarize(&[ingest(), sample("bulk")]);
        assert_eq!(s.len(), 2);
        assert!(s[0].aims.is_empty() && s[1].aims.is_empty());
    }

    #[test]
    fn results_without_the_aims_field_read_their_verdicts_from_the_notes() {
        let mut r = ingest();
        r.aims = None;
        r.notes = vec![
            "a note".to_string(),
            "aim met: write amplification 1.02 (aim ≤ 1.1)".to_string(),
            "aim not met: 4 KiB random reads at qd16".to_string(),
            "aim not judged: 4 KiB random reads at qd1; cache hits".to_string(),
            "the aim met: is not at the start".to_string(),
        ];
        assert_eq!(
            aims(&r),
            vec![
                AimVerdict {
                    verdict: Verdict::Met,
                    text: "write amplification 1.02 (aim ≤ 1.1)".to_string(),
                },
                AimVerdict {
                    verdict: Verdict::NotMet,
                    text: "4 KiB random reads at qd16".to_string(),
                },
                AimVerdict {
                    verdict: Verdict::NotJudged,
                    text: "4 KiB random reads at qd1; cache hits".to_string(),
                },
            ]
        );
    }
}

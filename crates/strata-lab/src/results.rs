//! The results of one experiment as written to `<results dir>/<experiment>.json`
//! (schema documented in docs/lab.md; bump [`SCHEMA_VERSION`] on any
//! incompatible change: readers reject other versions, so a field added
//! with a default, which older files load without, keeps the version). The
//! report reads only these files, so a results folder can be rendered
//! anywhere, later.
//!
//! An experiment's aims live in [`ExperimentResult::aims`], as data
//! ([`crate::aims::Aim`]: the claim, its verdict and text); each is also
//! among the `notes`, as prose for people. [`ExperimentResult::load`]
//! checks every stored verdict against its claim's figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::aims::Aim;
use crate::machine::Machine;

pub const SCHEMA_VERSION: u32 = 2;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExperimentResult {
    pub schema_version: u32,
    /// The experiment's name (`device`, `io`, `ingest`, `bulk`, `fio`,
    /// `phases`).
    pub experiment: String,
    pub title: String,
    pub started_at_utc: String,
    pub duration_s: f64,
    pub quick: bool,
    /// `None` outside a git checkout; `+dirty` suffix for local changes.
    pub git_commit: Option<String>,
    pub machine: Machine,
    /// Experiment-wide parameters (volumes, buffer sizes, …).
    pub options: BTreeMap<String, serde_json::Value>,
    /// The device's sequential bandwidth measured in the same run; `None`
    /// only if the device experiment failed.
    pub device_line: Option<DeviceLine>,
    /// Key (in `metrics`) of the figure the summary plot and ratios use.
    pub primary_metric: String,
    /// The metrics rows carry, in display order.
    pub metrics: Vec<MetricSpec>,
    /// Keys of the metrics the report plots (the primary one first).
    #[serde(default)]
    pub plot_metrics: Vec<String>,
    pub rows: Vec<Row>,
    /// The experiment's aims checked on `rows`, in order; each is also a
    /// note. Empty for an experiment without aims, or one that failed or
    /// was skipped; `None` only in results written before aims were kept
    /// as data (their verdicts are in their notes alone).
    #[serde(default)]
    pub aims: Option<Vec<Aim>>,
    /// Anything the reader should know (skipped engines, fallbacks, each
    /// aim's verdict as prose…).
    pub notes: Vec<String>,
}

/// Sequential bandwidth of the data directory's device, 1 MiB blocks, O_DIRECT.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DeviceLine {
    pub write_mib_s: f64,
    pub read_mib_s: f64,
    pub block_bytes: u64,
    pub file_bytes: u64,
    /// fio's figures for the same job where fio is installed.
    pub fio_write_mib_s: Option<f64>,
    pub fio_read_mib_s: Option<f64>,
    /// The device's latency for one 4 KiB random read at queue depth 1 (p50,
    /// median of the repeats) of a file filled with data, through io_uring
    /// with O_DIRECT and a registered buffer; `None` where it was not
    /// measured (results written before it existed).
    #[serde(default)]
    pub read_4k_latency_ns: Option<f64>,
    /// fio's figure for the same read (randread, 4 KiB, QD1, direct=1).
    #[serde(default)]
    pub fio_read_4k_latency_ns: Option<f64>,
}

/// Which device figure a metric is compared with.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DeviceSide {
    Write,
    Read,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MetricSpec {
    pub key: String,
    pub label: String,
    pub unit: String,
    pub higher_is_better: bool,
    /// Set for bandwidths (MiB/s) that have a device line to compare with.
    pub device_side: Option<DeviceSide>,
}

impl MetricSpec {
    pub fn new(key: &str, label: &str, unit: &str, higher_is_better: bool) -> MetricSpec {
        MetricSpec {
            key: key.to_string(),
            label: label.to_string(),
            unit: unit.to_string(),
            higher_is_better,
            device_side: None,
        }
    }

    pub fn vs_device(mut self, side: DeviceSide) -> MetricSpec {
        self.device_side = Some(side);
        self
    }
}

/// One measured configuration of one case.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// The workload, e.g. `100 B Sequential delta=Yes`.
    pub case: String,
    /// `strata`, `rocksdb`, … or `device`, `fio`; in `fio`: `strata`,
    /// `psync`, `io_uring` (fio's engines).
    pub engine: String,
    /// The engine's configuration, e.g. `DirectRw` or `DirectRw/IoUring`.
    pub config: String,
    pub params: BTreeMap<String, serde_json::Value>,
    /// Figures keyed by `MetricSpec::key`; absent when not measurable. A
    /// figure measured more than once is the median of its samples.
    pub metrics: BTreeMap<String, f64>,
    /// For each figure measured more than once: its samples' spread.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<String, Spread>,
}

/// The samples behind a repeated figure: the row's metric is their median.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub max: f64,
    /// Number of samples.
    pub n: u32,
}

/// Samples of several configurations taken in turns: A B C A B C …,
/// repeats outermost, so that a drift of the machine touches every
/// configuration alike (the lab's like-for-like rule). Every experiment
/// that repeats takes its samples through [`interleave`] or
/// [`interleave_with`]: this is the lab's one sampling loop.
pub struct Interleaved<T> {
    /// Per configuration, its samples in order.
    pub samples: Vec<Vec<T>>,
    /// Per configuration, the error that ended its sampling, if one did.
    pub errors: Vec<Option<anyhow::Error>>,
}

impl<T> Interleaved<T> {
    /// The samples, or the first configuration's error if one failed.
    pub fn into_samples(self) -> Result<Vec<Vec<T>>> {
        match self.errors.into_iter().flatten().next() {
            Some(err) => Err(err),
            None => Ok(self.samples),
        }
    }
}

/// What a failed sample ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFailure {
    /// Its configuration, which is not sampled again; the others go on (an
    /// engine that fails does not stop its peers).
    DropConfig,
    /// The whole loop: nothing more is sampled (a probe whose failure
    /// voids the measurement).
    Stop,
}

/// Calls `sample(repeat, config)` for repeats `1..=repeats` and
/// configurations `0..configs` in turns. A configuration whose sample
/// fails is not sampled again; its error is kept, and its earlier samples
/// too.
pub fn interleave<T>(
    repeats: u32,
    configs: usize,
    sample: impl FnMut(u32, usize) -> Result<T>,
) -> Interleaved<T> {
    interleave_with(OnFailure::DropConfig, repeats, configs, sample)
}

/// [`interleave`], with a failed sample ending what `on_failure` says.
pub fn interleave_with<T>(
    on_failure: OnFailure,
    repeats: u32,
    configs: usize,
    mut sample: impl FnMut(u32, usize) -> Result<T>,
) -> Interleaved<T> {
    let mut out = Interleaved {
        samples: (0..configs).map(|_| Vec::new()).collect(),
        errors: (0..configs).map(|_| None).collect(),
    };
    for rep in 1..=repeats {
        for i in 0..configs {
            if out.errors[i].is_some() {
                continue;
            }
            match sample(rep, i) {
                Ok(row) => out.samples[i].push(row),
                Err(err) => {
                    out.errors[i] = Some(err);
                    if on_failure == OnFailure::Stop {
                        return out;
                    }
                }
            }
        }
    }
    debug_assert!(out.samples.iter().all(|s| s.len() <= repeats as usize));
    out
}

/// The median of `values` (the mean of the middle two for an even count);
/// NaN for none.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

impl Row {
    pub fn new(case: &str, engine: &str, config: &str) -> Row {
        Row {
            case: case.to_string(),
            engine: engine.to_string(),
            config: config.to_string(),
            params: BTreeMap::new(),
            metrics: BTreeMap::new(),
            spread: BTreeMap::new(),
        }
    }

    /// Sets `key` to the median of `samples` and records their spread.
    pub fn sampled(mut self, key: &str, samples: &[f64]) -> Row {
        let finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        if finite.is_empty() {
            return self;
        }
        self = self.metric(key, median(&finite));
        if finite.len() > 1 {
            self.spread.insert(
                key.to_string(),
                Spread {
                    min: finite.iter().copied().fold(f64::INFINITY, f64::min),
                    max: finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    n: finite.len() as u32,
                },
            );
        }
        self
    }

    pub fn metric(mut self, key: &str, value: f64) -> Row {
        if value.is_finite() {
            self.metrics.insert(key.to_string(), value);
        }
        self
    }

    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> Row {
        self.params.insert(key.to_string(), value.into());
        self
    }

    /// One row from repeated measurements of the same case and
    /// configuration: each metric is the median of the samples that have
    /// it, with their spread; params come from the first sample. `None` for
    /// no samples.
    pub fn from_samples(samples: &[Row]) -> Option<Row> {
        let first = samples.first()?;
        let mut row = Row {
            metrics: BTreeMap::new(),
            spread: BTreeMap::new(),
            ..first.clone()
        };
        let mut keys: Vec<&String> = samples.iter().flat_map(|r| r.metrics.keys()).collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let values: Vec<f64> = samples
                .iter()
                .filter_map(|r| r.metrics.get(key).copied())
                .collect();
            row = row.sampled(key, &values);
        }
        Some(row)
    }

    pub fn series(&self) -> String {
        if self.config.is_empty() {
            self.engine.clone()
        } else {
            format!("{} {}", self.engine, self.config)
        }
    }
}

impl ExperimentResult {
    pub fn file_name(experiment: &str) -> String {
        format!("{experiment}.json")
    }

    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(Self::file_name(&self.experiment));
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(&path, json + "\n").with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }

    pub fn load(path: &Path) -> Result<ExperimentResult> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let result: ExperimentResult =
            serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        if result.schema_version != SCHEMA_VERSION {
            bail!(
                "{}: schema version {} (this build reads {})",
                path.display(),
                result.schema_version,
                SCHEMA_VERSION
            );
        }
        for aim in result.aims.iter().flatten() {
            if let Err(why) = aim.check() {
                bail!("{}: {why}", path.display());
            }
        }
        Ok(result)
    }

    /// Every experiment result in `dir`, in the order of their file names
    /// (the report puts them in the lab's experiment order).
    pub fn load_dir(dir: &Path) -> Result<Vec<ExperimentResult>> {
        let mut results = Vec::new();
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "json") {
                paths.push(path);
            }
        }
        paths.sort();
        for path in paths {
            results.push(Self::load(&path)?);
        }
        Ok(results)
    }

    pub fn spec(&self, key: &str) -> Option<&MetricSpec> {
        self.metrics.iter().find(|m| m.key == key)
    }

    /// Distinct cases in first-seen order.
    pub fn cases(&self) -> Vec<String> {
        let mut cases: Vec<String> = Vec::new();
        for row in &self.rows {
            if !cases.contains(&row.case) {
                cases.push(row.case.clone());
            }
        }
        cases
    }

    /// Distinct engines in first-seen order.
    pub fn engines(&self) -> Vec<String> {
        let mut engines: Vec<String> = Vec::new();
        for row in &self.rows {
            if !engines.contains(&row.engine) {
                engines.push(row.engine.clone());
            }
        }
        engines
    }

    /// The strata row a peer's row is compared with: same case, same config
    /// if strata ran it, else strata's default config (DirectRw), else any.
    pub fn strata_row_for(&self, row: &Row) -> Option<&Row> {
        let strata = |r: &&Row| r.engine == "strata" && r.case == row.case;
        self.rows
            .iter()
            .filter(strata)
            .find(|r| r.config == row.config)
            .or_else(|| {
                self.rows
                    .iter()
                    .filter(strata)
                    .find(|r| r.config.starts_with("DirectRw"))
            })
            .or_else(|| self.rows.iter().find(strata))
    }

    /// `row`'s metric as a fraction of the device line, where it has one.
    pub fn device_fraction(&self, row: &Row, key: &str) -> Option<f64> {
        let line = self.device_line.as_ref()?;
        let value = *row.metrics.get(key)?;
        let reference = match self.spec(key)?.device_side? {
            DeviceSide::Write => line.write_mib_s,
            DeviceSide::Read => line.read_mib_s,
        };
        (reference > 0.0).then(|| value / reference)
    }

    /// `row`'s metric divided by strata's on the same case.
    pub fn strata_ratio(&self, row: &Row, key: &str) -> Option<f64> {
        let value = *row.metrics.get(key)?;
        let reference = *self.strata_row_for(row)?.metrics.get(key)?;
        (reference > 0.0).then(|| value / reference)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(experiment: &str) -> ExperimentResult {
        let spec =
            MetricSpec::new("mib_s", "Throughput", "MiB/s", true).vs_device(DeviceSide::Write);
        ExperimentResult {
            schema_version: SCHEMA_VERSION,
            experiment: experiment.to_string(),
            title: format!("{experiment} sample"),
            started_at_utc: "2026-01-01T00:00:00Z".to_string(),
            duration_s: 1.5,
            quick: true,
            git_commit: Some("abc".to_string()),
            machine: Machine::default(),
            options: BTreeMap::from([("volume_bytes".to_string(), serde_json::json!(1024))]),
            device_line: Some(DeviceLine {
                write_mib_s: 200.0,
                read_mib_s: 400.0,
                block_bytes: 1 << 20,
                file_bytes: 1 << 28,
                fio_write_mib_s: Some(210.0),
                fio_read_mib_s: None,
                read_4k_latency_ns: Some(60_000.0),
                fio_read_4k_latency_ns: None,
            }),
            primary_metric: "mib_s".to_string(),
            metrics: vec![spec, MetricSpec::new("puts_s", "Puts", "puts/s", true)],
            plot_metrics: vec!["mib_s".to_string(), "puts_s".to_string()],
            rows: vec![
                Row::new("100 B Sequential", "strata", "DirectRw")
                    .metric("mib_s", 100.0)
                    .metric("puts_s", 1e6),
                Row::new("100 B Sequential", "rocksdb", "Buffered").metric("mib_s", 50.0),
                Row::new("8 KiB Sequential", "strata", "DirectRw").metric("mib_s", 180.0),
                Row::new("8 KiB Sequential", "rocksdb", "DirectRw").metric("mib_s", 90.0),
            ],
            aims: Some(Vec::new()),
            notes: vec!["a note".to_string()],
        }
    }

    /// An aim on [`sample`]'s rows: strata's best ≥ 1.5× the peer's.
    pub(crate) fn sample_claim(met: bool) -> crate::aims::Claim {
        crate::aims::Claim::Ratio {
            what: "ingest at 100 B".to_string(),
            strata: "strata 100 MiB/s".to_string(),
            ratio: if met { 2.0 } else { 1.2 },
            decimals: 2,
            reference: crate::aims::Reference::Engine("rocksdb".to_string()),
            bound: crate::aims::Bound::AtLeast(1.5),
        }
    }

    #[test]
    fn json_round_trip_preserves_every_field() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let result = sample("ingest");
        let path = result.save(tmp.path()).unwrap();
        assert_eq!(path.file_name().unwrap(), "ingest.json");
        assert_eq!(ExperimentResult::load(&path).unwrap(), result);
    }

    #[test]
    fn a_result_round_trips_its_aims_through_json() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut result = sample("ingest");
        let claims = vec![sample_claim(true), sample_claim(false)];
        result.aims = Some(crate::aims::records(&claims));
        result.notes.extend(crate::aims::notes(&claims));
        let path = result.save(tmp.path()).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["aims"][0]["met"], true);
        assert_eq!(json["aims"][1]["met"], false);
        assert_eq!(json["aims"][1]["claim"]["kind"], "ratio");
        assert_eq!(json["aims"][1]["claim"]["bound"]["at_least"], 1.5);
        let loaded = ExperimentResult::load(&path).unwrap();
        assert_eq!(loaded, result);
        assert_eq!(loaded.aims.unwrap()[1].claim, claims[1]);
    }

    #[test]
    fn results_written_before_aims_were_data_still_load() {
        // Schema 2 as written before the `aims` field: the verdicts are
        // notes only.
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut result = sample("ingest");
        result.aims = None;
        result.notes = vec![sample_claim(true).note()];
        let mut json = serde_json::to_value(&result).unwrap();
        json.as_object_mut().unwrap().remove("aims");
        let path = tmp.path().join("ingest.json");
        std::fs::write(&path, json.to_string()).unwrap();
        let loaded = ExperimentResult::load(&path).unwrap();
        assert_eq!(loaded.aims, None);
        assert_eq!(loaded, result);
    }

    #[test]
    fn load_rejects_a_verdict_its_figures_contradict() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut result = sample("ingest");
        let mut aim = crate::aims::Aim::new(sample_claim(false));
        aim.met = true;
        result.aims = Some(vec![aim]);
        let path = result.save(tmp.path()).unwrap();
        let err = format!("{:#}", ExperimentResult::load(&path).unwrap_err());
        assert!(
            err.contains("stored as met but its figures say not met"),
            "{err}"
        );
    }

    #[test]
    fn a_device_line_without_the_latency_figures_still_loads() {
        // Results written before the random-read probe existed.
        let text = r#"{"write_mib_s": 1.0, "read_mib_s": 2.0, "block_bytes": 1, "file_bytes": 1,
            "fio_write_mib_s": null, "fio_read_mib_s": null}"#;
        let line: DeviceLine = serde_json::from_str(text).unwrap();
        assert_eq!(line.read_4k_latency_ns, None);
        assert_eq!(line.fio_read_4k_latency_ns, None);
    }

    #[test]
    fn load_rejects_another_schema_version() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let mut result = sample("ingest");
        result.schema_version = SCHEMA_VERSION + 1;
        let path = result.save(tmp.path()).unwrap();
        assert!(ExperimentResult::load(&path).is_err());
    }

    #[test]
    fn interleaving_takes_turns_and_drops_a_failed_configuration() {
        let mut order = Vec::new();
        let out = interleave(3, 3, |rep, i| {
            order.push((rep, i));
            if (rep, i) == (2, 1) {
                bail!("config 1 broke in repeat 2");
            }
            Ok(Row::new("c", &format!("e{i}"), "").metric("x", f64::from(rep)))
        });
        assert_eq!(
            order,
            vec![
                (1, 0),
                (1, 1),
                (1, 2),
                (2, 0),
                (2, 1),
                (2, 2),
                (3, 0),
                (3, 2)
            ]
        );
        assert_eq!(out.samples[0].len(), 3);
        assert_eq!(
            out.samples[1].len(),
            1,
            "the sample before the failure stays"
        );
        assert_eq!(out.samples[2].len(), 3);
        assert!(out.errors[0].is_none() && out.errors[2].is_none());
        assert_eq!(
            out.errors[1].as_ref().unwrap().to_string(),
            "config 1 broke in repeat 2"
        );
    }

    #[test]
    fn stopping_at_a_failure_samples_nothing_after_it() {
        let mut order = Vec::new();
        let out = interleave_with(OnFailure::Stop, 3, 2, |rep, i| {
            order.push((rep, i));
            if (rep, i) == (2, 0) {
                bail!("the probe broke in repeat 2");
            }
            Ok(f64::from(rep))
        });
        assert_eq!(order, vec![(1, 0), (1, 1), (2, 0)]);
        assert_eq!(out.samples, vec![vec![1.0], vec![1.0]]);
        assert_eq!(
            out.into_samples().unwrap_err().to_string(),
            "the probe broke in repeat 2"
        );
        // Without a failure, every sample, each configuration's in order.
        let out = interleave_with(OnFailure::Stop, 2, 2, |rep, i| Ok((rep, i)));
        assert_eq!(
            out.into_samples().unwrap(),
            vec![vec![(1, 0), (2, 0)], vec![(1, 1), (2, 1)]]
        );
    }

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn repeated_samples_give_the_median_and_the_spread() {
        let sample = |v: f64| Row::new("c", "strata", "DirectRw").metric("mib_s", v);
        let row = Row::from_samples(&[sample(3.0), sample(1.0), sample(2.0), sample(10.0)])
            .unwrap()
            .param("n", 4);
        assert_eq!(row.metrics["mib_s"], 2.5);
        assert_eq!(
            row.spread["mib_s"],
            Spread {
                min: 1.0,
                max: 10.0,
                n: 4
            }
        );
        // One sample: no spread to show.
        let one = Row::from_samples(&[sample(5.0)]).unwrap();
        assert_eq!(one.metrics["mib_s"], 5.0);
        assert!(one.spread.is_empty());
        assert!(Row::from_samples(&[]).is_none());
    }

    #[test]
    fn ratios_compare_with_strata_and_the_device() {
        let result = sample("ingest");
        let peer = &result.rows[1];
        assert_eq!(result.strata_ratio(peer, "mib_s"), Some(0.5));
        assert_eq!(result.device_fraction(peer, "mib_s"), Some(0.25));
        // No device side for puts/s.
        assert_eq!(result.device_fraction(&result.rows[0], "puts_s"), None);
        // A peer config strata also ran is compared with that config.
        assert_eq!(result.strata_ratio(&result.rows[3], "mib_s"), Some(0.5));
    }
}

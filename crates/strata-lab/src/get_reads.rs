//! How strata served its gets: from memory or from the device. LAB.md's
//! rule: "a read compared with the device reaches the device … every read
//! row reports its cache hit ratio; a 'win' made of cache hits is not a
//! win". This module turns strata's statistics (`Db::stats`, or the JSON
//! document the fio engine writes with `strata-stats=`) into the figures
//! every strata read row carries, and says when a read figure is made of
//! cache hits. Called by the fio experiment ([`crate::fio_exp`]) and the
//! phases experiment ([`crate::phases`]).
//!
//! What counts as a device read of a get: a layer data block read from its
//! file (`point_lookup_reads`: a block-cache miss) and a value read from a
//! value file (values of `Options::large_value_bytes` or more are kept
//! apart, and a get reads its pointer's block, usually cached, then the
//! value from the device). strata's statistics count the second as a read
//! of a log-class file (value files are logs kept as they were sealed), so
//! [`GetReads::value_reads`] is `io.log.read.ops`: it also holds a flush's
//! reads of its log during the interval (a layout's flush: one read of the
//! log's first sector in the fio runs measured), which can only lower the
//! hit ratio by as many reads. With O_DIRECT reads (`io_mode` `direct` or
//! `direct-rw`) each of these is a request to the device; with `buffered`
//! reads the page cache may have served them, and the hit ratio is
//! unknown ([`GetReads::hit_ratio`] is `None`).
//!
//! The hit ratio is `1 − device reads per get`, floored at 0: the share of
//! gets served without a device read when every other get reads once. A
//! get that reads twice (a block and its value, two layers) hides a hit, so
//! it is a lower bound of the share, and it is exactly the figure that
//! matters beside an engine that reads the device once per read: a figure
//! made of fewer device reads per get than that is made of memory.
//!
//! Pure functions, no I/O.

use serde::{Deserialize, Serialize};

use crate::results::MetricSpec;
use crate::results::Row;

/// The lab's rule (LAB.md): data read in a comparison with the device is at
/// least this many times every cache in play.
pub const DATA_PER_CACHE_MIN: u64 = 8;

/// The largest share of strata's gets that may be served without a device
/// read for a read figure to be judged: a cache holding 1 / 8 of the data
/// ([`DATA_PER_CACHE_MIN`]) serves at most 1 / 8 of uniformly random reads
/// (sequential reads of data read once, none). A larger share means some
/// memory the lab did not size against the data served the figure (the
/// data is not 8× the cache, or a memtable or page cache holds it): the
/// figure is not like for like with an engine that reads the device each
/// time.
pub const HIT_RATIO_JUDGED_MAX: f64 = 1.0 / DATA_PER_CACHE_MIN as f64;

/// strata's counters of point gets over an interval (or since open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetReads {
    /// Keys looked up by get and multi_get (`point_lookups`).
    pub gets: u64,
    /// Layer data blocks read from their files for them
    /// (`point_lookup_reads`).
    pub block_reads: u64,
    /// Reads of value files (`io.log.read.ops`, see the module comment).
    pub value_reads: u64,
    /// Block-cache lookups that hit and that missed (`block_cache_hits`,
    /// `block_cache_misses`).
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Reads bypass the page cache (`io_mode` is not `buffered`): each
    /// read counted is a device read.
    pub direct_reads: bool,
}

impl GetReads {
    /// The counters of `stats` (since the database was opened).
    pub fn of_stats(stats: &strata::Stats) -> GetReads {
        GetReads {
            gets: stats.point_lookups,
            block_reads: stats.point_lookup_reads,
            value_reads: stats
                .io
                .ops(strata::io::FileClass::Log, strata::io::OpKind::Read),
            block_cache_hits: stats.block_cache_hits,
            block_cache_misses: stats.block_cache_misses,
            direct_reads: stats.io_mode.direct_reads(),
        }
    }

    /// The counters of strata's statistics as JSON (`Stats`' document:
    /// `strata db DIR stats --json`, the C API's `strata_stats_json`, the
    /// fio engine's `strata-stats=` file); `None` when a key is missing.
    pub fn from_stats_json(stats: &serde_json::Value) -> Option<GetReads> {
        let n = |v: &serde_json::Value| v.as_u64();
        Some(GetReads {
            gets: n(&stats["point_lookups"])?,
            block_reads: n(&stats["point_lookup_reads"])?,
            value_reads: n(&stats["io"]["log"]["read"]["ops"])?,
            block_cache_hits: n(&stats["block_cache_hits"])?,
            block_cache_misses: n(&stats["block_cache_misses"])?,
            direct_reads: stats["io_mode"].as_str()? != "buffered",
        })
    }

    /// The counters from `earlier` to `self` (`self` taken later).
    pub fn since(&self, earlier: &GetReads) -> GetReads {
        GetReads {
            gets: self.gets.saturating_sub(earlier.gets),
            block_reads: self.block_reads.saturating_sub(earlier.block_reads),
            value_reads: self.value_reads.saturating_sub(earlier.value_reads),
            block_cache_hits: self
                .block_cache_hits
                .saturating_sub(earlier.block_cache_hits),
            block_cache_misses: self
                .block_cache_misses
                .saturating_sub(earlier.block_cache_misses),
            direct_reads: self.direct_reads && earlier.direct_reads,
        }
    }

    /// Reads strata made from its files for its gets.
    pub fn reads(&self) -> u64 {
        self.block_reads + self.value_reads
    }

    /// [`Self::reads`] per get; `None` without gets.
    pub fn reads_per_get(&self) -> Option<f64> {
        (self.gets > 0).then(|| self.reads() as f64 / self.gets as f64)
    }

    /// The share of gets served without a device read (see the module
    /// comment), in [0, 1]; `None` without gets, or when reads went
    /// through the page cache.
    pub fn hit_ratio(&self) -> Option<f64> {
        let per_get = self.reads_per_get().filter(|_| self.direct_reads)?;
        let ratio = (1.0 - per_get).max(0.0);
        debug_assert!((0.0..=1.0).contains(&ratio));
        Some(ratio)
    }

    /// The block cache's hits ÷ its lookups; `None` without lookups.
    pub fn block_cache_hit_ratio(&self) -> Option<f64> {
        let lookups = self.block_cache_hits + self.block_cache_misses;
        (lookups > 0).then(|| self.block_cache_hits as f64 / lookups as f64)
    }

    /// `row` with the figures (`cache_hit_ratio`, `strata_reads_per_get`,
    /// `block_cache_hit_ratio`, each where defined) and the counters
    /// (`strata_gets`, `strata_block_reads`, `strata_value_reads`).
    pub fn add_to(&self, mut row: Row) -> Row {
        if let Some(r) = self.hit_ratio() {
            row = row.metric(HIT_RATIO_METRIC, r);
        }
        if let Some(r) = self.reads_per_get() {
            row = row.metric("strata_reads_per_get", r);
        }
        if let Some(r) = self.block_cache_hit_ratio() {
            row = row.metric("block_cache_hit_ratio", r);
        }
        row.param("strata_gets", self.gets)
            .param("strata_block_reads", self.block_reads)
            .param("strata_value_reads", self.value_reads)
    }
}

/// The key of the hit ratio among a row's metrics.
pub const HIT_RATIO_METRIC: &str = "cache_hit_ratio";

/// Why a read figure of `row` is not judged, if it is not: its largest
/// hit ratio over the samples (the spread's maximum; the figure itself for
/// one sample) above [`HIT_RATIO_JUDGED_MAX`], or no hit ratio at all.
pub fn not_judged_why(row: &Row) -> Option<String> {
    let worst = row
        .spread
        .get(HIT_RATIO_METRIC)
        .map(|s| s.max)
        .or_else(|| row.metrics.get(HIT_RATIO_METRIC).copied());
    match worst {
        None => Some(
            "not judged: no cache hit ratio (strata's statistics are missing, or its reads went through the page cache)"
                .to_string(),
        ),
        Some(r) if r > HIT_RATIO_JUDGED_MAX => Some(format!(
            "not judged: {:.0}% of strata's gets were served without a device read (at most {:.1}% may be: the data is {DATA_PER_CACHE_MIN}× every cache): a figure made of cache hits",
            r * 100.0,
            HIT_RATIO_JUDGED_MAX * 100.0
        )),
        Some(_) => None,
    }
}

/// The hit ratio as the tables and aims show it: `12%`.
pub fn format_hit_ratio(r: f64) -> String {
    format!("{:.0}%", r * 100.0)
}

/// The metrics of strata's read rows (fio's and phases'): the hit ratio,
/// strata's reads per get, the block cache's own ratio.
pub fn metric_specs() -> [MetricSpec; 3] {
    [
        MetricSpec::new(
            HIT_RATIO_METRIC,
            "strata's gets served without a device read",
            "fraction",
            false,
        ),
        MetricSpec::new(
            "strata_reads_per_get",
            "strata's reads of blocks and values per get",
            "reads",
            false,
        ),
        MetricSpec::new(
            "block_cache_hit_ratio",
            "strata's block-cache hits ÷ lookups",
            "fraction",
            false,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(gets: u64, block_reads: u64, value_reads: u64) -> GetReads {
        GetReads {
            gets,
            block_reads,
            value_reads,
            block_cache_hits: gets,
            block_cache_misses: block_reads,
            direct_reads: true,
        }
    }

    #[test]
    fn a_get_that_reads_its_value_is_no_hit_even_when_its_block_is_cached() {
        // 4 KiB values in value files: every block cached, every value read.
        let r = reads(1000, 0, 1000);
        assert_eq!(r.block_cache_hit_ratio(), Some(1.0));
        assert_eq!(r.hit_ratio(), Some(0.0));
        assert_eq!(r.reads_per_get(), Some(1.0));
        // A block read as well does not make it less than none.
        assert_eq!(reads(1000, 300, 1000).hit_ratio(), Some(0.0));
    }

    #[test]
    fn gets_served_from_the_block_cache_are_hits() {
        // Values in the blocks: 900 of 1000 gets read no block.
        let r = reads(1000, 100, 0);
        assert!((r.hit_ratio().unwrap() - 0.9).abs() < 1e-12);
        assert!((r.reads_per_get().unwrap() - 0.1).abs() < 1e-12);
    }

    #[test]
    fn without_gets_or_with_buffered_reads_there_is_no_hit_ratio() {
        assert_eq!(reads(0, 0, 0).hit_ratio(), None);
        assert_eq!(reads(0, 0, 0).block_cache_hit_ratio(), None);
        let buffered = GetReads {
            direct_reads: false,
            ..reads(1000, 0, 1000)
        };
        assert_eq!(buffered.hit_ratio(), None);
        assert_eq!(buffered.reads_per_get(), Some(1.0));
    }

    #[test]
    fn counters_are_read_from_the_stats_json_of_the_fio_engine() {
        let json = serde_json::json!({
            "io_mode": "direct-rw",
            "point_lookups": 29940,
            "point_lookup_reads": 171,
            "block_cache_hits": 29767,
            "block_cache_misses": 171,
            "io": {"log": {"read": {"ops": 29939, "bytes": 138735104, "retries": 0}}},
        });
        let r = GetReads::from_stats_json(&json).unwrap();
        assert_eq!(
            r,
            GetReads {
                gets: 29940,
                block_reads: 171,
                value_reads: 29939,
                block_cache_hits: 29767,
                block_cache_misses: 171,
                direct_reads: true,
            }
        );
        assert_eq!(r.hit_ratio(), Some(0.0));
        let mut buffered = json.clone();
        buffered["io_mode"] = "buffered".into();
        assert_eq!(
            GetReads::from_stats_json(&buffered).unwrap().hit_ratio(),
            None
        );
        let mut missing = json;
        missing.as_object_mut().unwrap().remove("point_lookups");
        assert_eq!(GetReads::from_stats_json(&missing), None);
    }

    #[test]
    fn since_subtracts_an_earlier_snapshot() {
        let before = reads(1000, 100, 0);
        let after = reads(3000, 1100, 0);
        let d = after.since(&before);
        assert_eq!((d.gets, d.block_reads), (2000, 1000));
        assert_eq!(d.hit_ratio(), Some(0.5));
    }

    #[test]
    fn the_stats_of_an_open_database_give_the_same_counters_as_its_json() {
        let tmp = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let db = strata::Db::open(tmp.path(), strata::Options::default()).unwrap();
        db.put(b"k", b"v", strata::WriteOptions::default()).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        let stats = db.stats();
        let json = serde_json::to_value(&stats).unwrap();
        assert_eq!(
            GetReads::from_stats_json(&json),
            Some(GetReads::of_stats(&stats))
        );
        assert_eq!(GetReads::of_stats(&stats).gets, 1);
    }

    #[test]
    fn a_row_gets_the_figures_and_a_read_figure_of_cache_hits_is_not_judged() {
        let row = reads(1000, 100, 0).add_to(Row::new("c", "strata", ""));
        assert!((row.metrics[HIT_RATIO_METRIC] - 0.9).abs() < 1e-12);
        assert_eq!(row.metrics["block_cache_hit_ratio"], 1000.0 / 1100.0);
        assert_eq!(row.params["strata_value_reads"], 0);
        let why = not_judged_why(&row).unwrap();
        assert!(why.contains("90% of strata's gets"), "{why}");
        // Every get read from the device: judged.
        let row = reads(1000, 0, 1000).add_to(Row::new("c", "strata", ""));
        assert_eq!(not_judged_why(&row), None);
        // At the bound, judged; one sample above it is enough to refuse.
        let at = |r: f64| Row::new("c", "strata", "").metric(HIT_RATIO_METRIC, r);
        assert_eq!(not_judged_why(&at(HIT_RATIO_JUDGED_MAX)), None);
        let spread = Row::from_samples(&[at(0.0), at(0.0), at(0.6)]).unwrap();
        assert_eq!(spread.metrics[HIT_RATIO_METRIC], 0.0);
        assert!(not_judged_why(&spread).is_some());
        // No hit ratio: not judged either.
        assert!(not_judged_why(&Row::new("c", "strata", ""))
            .unwrap()
            .contains("no cache hit ratio"));
    }
}

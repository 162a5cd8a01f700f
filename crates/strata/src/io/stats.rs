//! I/O statistics: operations and bytes by kind (read, write, sync) and by
//! file class (log, delta, image, manifest, other), and the reads made again
//! after bytes read failed their check (`io::read_verified`), by class.
//!
//! A snapshot serializes (serde) as `{<class>: {<kind>: {ops, bytes}}}` over
//! every class and kind, zeros included (so a key never disappears), with
//! the read retries of a class beside its reads' counters
//! (`<class>.read.retries`): the `io` object of `Stats`' document.
//!
//! Every operation of the io layer is counted here, so the lab can report
//! write amplification and device reads per get. Counters are relaxed atomics
//! behind an `Arc`: cloning an `IoStats` shares the counters; a snapshot may be
//! taken at any time from any thread, and is consistent per counter (not
//! across counters, which no reader needs).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What kind of file an operation touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FileClass {
    /// Log file of an in-memory layer (the write-ahead log).
    Log,
    /// Delta layer file.
    Delta,
    /// Image layer file.
    Image,
    /// Manifest.
    Manifest,
    /// Anything else (benchmarks, probes).
    #[default]
    Other,
}

impl FileClass {
    /// Every class, in counter order.
    pub const ALL: [FileClass; 5] = [
        FileClass::Log,
        FileClass::Delta,
        FileClass::Image,
        FileClass::Manifest,
        FileClass::Other,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            FileClass::Log => "log",
            FileClass::Delta => "delta",
            FileClass::Image => "image",
            FileClass::Manifest => "manifest",
            FileClass::Other => "other",
        }
    }
}

/// The kind of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Read,
    Write,
    Sync,
}

impl OpKind {
    /// Every kind, in counter order.
    pub const ALL: [OpKind; 3] = [OpKind::Read, OpKind::Write, OpKind::Sync];

    fn index(self) -> usize {
        self as usize
    }

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Sync => "sync",
        }
    }
}

const CLASSES: usize = FileClass::ALL.len();
const KINDS: usize = OpKind::ALL.len();

#[derive(Default)]
struct Counters {
    ops: [[AtomicU64; KINDS]; CLASSES],
    bytes: [[AtomicU64; KINDS]; CLASSES],
    read_retries: [AtomicU64; CLASSES],
}

/// Shared I/O counters. Clone to share.
#[derive(Clone, Default)]
pub struct IoStats {
    counters: Arc<Counters>,
}

impl IoStats {
    /// Fresh counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one operation of `bytes` bytes.
    pub fn record(&self, class: FileClass, kind: OpKind, bytes: u64) {
        let (c, k) = (class.index(), kind.index());
        self.counters.ops[c][k].fetch_add(1, Ordering::Relaxed);
        self.counters.bytes[c][k].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts one read made again because the bytes of the one before
    /// failed their check (see `io::read_verified`).
    pub fn record_read_retry(&self, class: FileClass) {
        self.counters.read_retries[class.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> IoStatsSnapshot {
        let mut snap = IoStatsSnapshot::default();
        for c in 0..CLASSES {
            snap.read_retries[c] = self.counters.read_retries[c].load(Ordering::Relaxed);
            for k in 0..KINDS {
                snap.ops[c][k] = self.counters.ops[c][k].load(Ordering::Relaxed);
                snap.bytes[c][k] = self.counters.bytes[c][k].load(Ordering::Relaxed);
            }
        }
        snap
    }
}

impl std::fmt::Debug for IoStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStatsSnapshot {
    ops: [[u64; KINDS]; CLASSES],
    bytes: [[u64; KINDS]; CLASSES],
    read_retries: [u64; CLASSES],
}

impl IoStatsSnapshot {
    /// Operations of `kind` on files of `class`.
    pub fn ops(&self, class: FileClass, kind: OpKind) -> u64 {
        self.ops[class.index()][kind.index()]
    }

    /// Bytes moved by operations of `kind` on files of `class`.
    pub fn bytes(&self, class: FileClass, kind: OpKind) -> u64 {
        self.bytes[class.index()][kind.index()]
    }

    /// Reads of files of `class` made again because the bytes of the read
    /// before failed their check (the reads themselves are counted as
    /// reads too).
    pub fn read_retries(&self, class: FileClass) -> u64 {
        self.read_retries[class.index()]
    }

    /// [`Self::read_retries`] over all classes.
    pub fn read_retries_total(&self) -> u64 {
        self.read_retries.iter().sum()
    }

    /// Operations of `kind` over all classes.
    pub fn ops_total(&self, kind: OpKind) -> u64 {
        FileClass::ALL.iter().map(|&c| self.ops(c, kind)).sum()
    }

    /// Bytes of `kind` over all classes.
    pub fn bytes_total(&self, kind: OpKind) -> u64 {
        FileClass::ALL.iter().map(|&c| self.bytes(c, kind)).sum()
    }

    /// Bytes written to files of all classes.
    pub fn bytes_written_total(&self) -> u64 {
        self.bytes_total(OpKind::Write)
    }

    /// Bytes read from files of all classes.
    pub fn bytes_read_total(&self) -> u64 {
        self.bytes_total(OpKind::Read)
    }

    /// Counters accumulated since `earlier`.
    pub fn since(&self, earlier: &IoStatsSnapshot) -> IoStatsSnapshot {
        let mut out = *self;
        for c in 0..CLASSES {
            out.read_retries[c] = self.read_retries[c].saturating_sub(earlier.read_retries[c]);
            for k in 0..KINDS {
                out.ops[c][k] = self.ops[c][k].saturating_sub(earlier.ops[c][k]);
                out.bytes[c][k] = self.bytes[c][k].saturating_sub(earlier.bytes[c][k]);
            }
        }
        out
    }
}

/// `{<class>: {<kind>: {ops, bytes}}}`, every class and kind, and
/// `<class>.read.retries` (see the module comment).
impl Serialize for IoStatsSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut classes = s.serialize_map(Some(CLASSES))?;
        for class in FileClass::ALL {
            classes.serialize_entry(class.name(), &ClassCounters { io: self, class })?;
        }
        classes.end()
    }
}

/// One class's counters in a snapshot's serialized form.
struct ClassCounters<'a> {
    io: &'a IoStatsSnapshot,
    class: FileClass,
}

impl Serialize for ClassCounters<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (io, class) = (self.io, self.class);
        let mut kinds = s.serialize_map(Some(KINDS))?;
        for kind in OpKind::ALL {
            let counters = KindCounters {
                ops: io.ops(class, kind),
                bytes: io.bytes(class, kind),
                retries: (kind == OpKind::Read).then(|| io.read_retries(class)),
            };
            kinds.serialize_entry(kind.name(), &counters)?;
        }
        kinds.end()
    }
}

/// One class and kind's counters; retries only for reads.
#[derive(Serialize)]
struct KindCounters {
    ops: u64,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    retries: Option<u64>,
}

impl std::fmt::Debug for IoStatsSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for class in FileClass::ALL {
            for kind in OpKind::ALL {
                let ops = self.ops(class, kind);
                if ops > 0 {
                    map.entry(
                        &format_args!("{}.{:?}", class.name(), kind),
                        &format_args!("{} ops, {} bytes", ops, self.bytes(class, kind)),
                    );
                }
            }
            let retries = self.read_retries(class);
            if retries > 0 {
                map.entry(
                    &format_args!("{}.read_retries", class.name()),
                    &format_args!("{retries}"),
                );
            }
        }
        map.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_counters_and_since_subtracts() {
        let stats = IoStats::new();
        let other = stats.clone();
        stats.record(FileClass::Log, OpKind::Write, 4096);
        let first = other.snapshot();
        other.record(FileClass::Log, OpKind::Write, 8192);
        other.record(FileClass::Delta, OpKind::Sync, 0);
        let second = stats.snapshot();
        assert_eq!(second.ops(FileClass::Log, OpKind::Write), 2);
        assert_eq!(second.bytes_written_total(), 12288);
        let delta = second.since(&first);
        assert_eq!(delta.bytes(FileClass::Log, OpKind::Write), 8192);
        assert_eq!(delta.ops_total(OpKind::Sync), 1);
    }

    #[test]
    fn read_retries_are_counted_by_class_and_shown_when_nonzero() {
        let stats = IoStats::new();
        assert!(!format!("{stats:?}").contains("read_retries"));
        stats.record_read_retry(FileClass::Delta);
        let first = stats.snapshot();
        stats.record_read_retry(FileClass::Delta);
        stats.record_read_retry(FileClass::Manifest);
        let second = stats.snapshot();
        assert_eq!(second.read_retries(FileClass::Delta), 2);
        assert_eq!(second.read_retries(FileClass::Log), 0);
        assert_eq!(second.read_retries_total(), 3);
        assert_eq!(second.since(&first).read_retries_total(), 2);
        assert_eq!(second.ops_total(OpKind::Read), 0, "a retry is not a read");
        let text = format!("{second:?}");
        assert!(text.contains("delta.read_retries: 2"), "{text}");
    }

    #[test]
    fn a_snapshot_serializes_every_class_and_kind_with_zeros_and_retries_beside_reads() {
        let stats = IoStats::new();
        stats.record(FileClass::Image, OpKind::Write, 8192);
        stats.record_read_retry(FileClass::Delta);
        let value = serde_json::to_value(stats.snapshot()).unwrap();
        let classes = value.as_object().unwrap();
        assert_eq!(classes.len(), FileClass::ALL.len(), "{value}");
        for class in FileClass::ALL {
            let kinds = value[class.name()].as_object().unwrap();
            assert_eq!(kinds.len(), OpKind::ALL.len(), "{value}");
            for kind in OpKind::ALL {
                let counters = value[class.name()][kind.name()].as_object().unwrap();
                let mut keys: Vec<&str> = counters.keys().map(String::as_str).collect();
                keys.sort_unstable();
                let want: &[&str] = match kind {
                    OpKind::Read => &["bytes", "ops", "retries"],
                    _ => &["bytes", "ops"],
                };
                assert_eq!(keys, want, "{}.{}", class.name(), kind.name());
            }
        }
        assert_eq!(value["image"]["write"]["ops"], 1);
        assert_eq!(value["image"]["write"]["bytes"], 8192);
        assert_eq!(value["delta"]["read"]["retries"], 1);
        assert_eq!(value["delta"]["read"]["ops"], 0);
        assert_eq!(value["log"]["sync"]["bytes"], 0);
    }
}

//! Ordered range scans over every layer: a merge of per-layer sources.
//!
//! Each source yields, in key order, the newest version of each key with
//! lsn <= the scan's LSN within its layer, except the keys a newer image
//! answers for (its *masks*, see `Version::run_layers`). Layers cover
//! disjoint, increasing LSN ranges, so for a key held by several sources
//! the newest layer's version wins; tombstones are then dropped. The scan
//! holds the version it reads, so a concurrent flush or compaction cannot
//! pull a file from under it.

use crate::error::Result;
use crate::layer::delta::reader::DeltaRangeIterOwned;
use crate::layer::file::LayerFile;
pub(crate) use crate::types::Item;
use crate::types::{Cover, Lsn, ValueKind};
use crate::version::Version;
use std::sync::Arc;

/// One layer's contribution to a scan.
pub(crate) enum Source {
    /// An in-memory layer's entries, already picked and read.
    Memory(std::vec::IntoIter<Item>),
    /// A delta layer's entries (every version), read lazily.
    Delta(Box<DeltaSource>),
}

/// A delta layer's scan state.
pub(crate) struct DeltaSource {
    pub iter: DeltaRangeIterOwned<LayerFile>,
    pub lsn: Lsn,
    /// The first entry of the next key, read ahead; empty between keys.
    pub pending: Option<(Vec<u8>, Lsn, ValueKind, Vec<u8>)>,
    /// Keys that newer images answer for: skipped.
    pub masks: Vec<Cover>,
}

impl DeltaSource {
    /// A source of `iter`'s newest versions at or below `lsn`, but for the
    /// keys of `masks`.
    pub(crate) fn new(iter: DeltaRangeIterOwned<LayerFile>, lsn: Lsn, masks: Vec<Cover>) -> Self {
        DeltaSource {
            iter,
            lsn,
            pending: None,
            masks,
        }
    }
}

impl Source {
    /// The next key's newest version <= lsn.
    fn next_item(&mut self) -> Option<Result<Item>> {
        match self {
            Source::Memory(it) => it.next().map(Ok),
            Source::Delta(d) => loop {
                let DeltaSource {
                    iter,
                    lsn,
                    pending,
                    masks,
                } = &mut **d;
                let first = match pending.take() {
                    Some(e) => e,
                    None => match iter.next()? {
                        Ok(e) => e,
                        Err(e) => return Some(Err(e)),
                    },
                };
                // Versions of one key come in ascending LSN order: keep the
                // last one <= lsn, stop at the next key.
                let mut best = (first.1 <= *lsn).then_some((first.2, first.3));
                let key = first.0;
                loop {
                    match iter.next() {
                        None => break,
                        Some(Err(e)) => return Some(Err(e)),
                        Some(Ok(e)) if e.0 == key => {
                            if e.1 <= *lsn {
                                best = Some((e.2, e.3));
                            }
                        }
                        Some(Ok(e)) => {
                            *pending = Some(e);
                            break;
                        }
                    }
                }
                if let Some((kind, value)) = best {
                    if !masks.iter().any(|m| m.contains(&key)) {
                        return Some(Ok((key, kind, value)));
                    }
                }
            },
        }
    }
}

/// An ordered scan: `(key, value)` of every live key in the range at the
/// scan's LSN. After an error it yields nothing more.
pub struct Scan {
    /// Sources, newest layer first, each with its current head.
    sources: Vec<(Source, Option<Item>)>,
    started: bool,
    failed: bool,
    /// Yields pointers as they are (`ValueKind::Pointer`), not the values
    /// they point at: an image moves pointers, not bytes.
    raw: bool,
    /// The version the sources come from: while the scan lives, its layer
    /// files stay on disk (a compaction's inputs are deleted only when no
    /// version that a reader holds lists them).
    version: Arc<Version>,
}

impl Scan {
    pub(crate) fn new(sources: Vec<Source>, version: Arc<Version>) -> Self {
        Scan {
            sources: sources.into_iter().map(|s| (s, None)).collect(),
            started: false,
            failed: false,
            raw: false,
            version,
        }
    }

    fn advance(&mut self, i: usize) -> Result<()> {
        let (source, head) = &mut self.sources[i];
        *head = source.next_item().transpose()?;
        Ok(())
    }

    /// The scan's items as they are stored: a put's value, or a pointer
    /// (`ValueKind::Pointer`) to a value in a value file.
    pub(crate) fn raw(mut self) -> Self {
        self.raw = true;
        self
    }

    /// The next live key: its kind (`Put`, or `Pointer` in a raw scan) and
    /// value.
    pub(crate) fn next_item(&mut self) -> Option<Result<Item>> {
        if self.failed {
            return None;
        }
        match self.step() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn step(&mut self) -> Result<Option<Item>> {
        if !self.started {
            self.started = true;
            for i in 0..self.sources.len() {
                self.advance(i)?;
            }
        }
        loop {
            // The smallest key among the heads; among equals the newest source (lowest index).
            let mut min: Option<usize> = None;
            for (i, (_, head)) in self.sources.iter().enumerate() {
                if let Some((k, _, _)) = head {
                    if min.is_none_or(|m| k < &self.sources[m].1.as_ref().expect("head present").0)
                    {
                        min = Some(i);
                    }
                }
            }
            let Some(m) = min else { return Ok(None) };
            let (key, kind, value) = self.sources[m].1.take().expect("head present");
            self.advance(m)?;
            for i in m + 1..self.sources.len() {
                if self.sources[i].1.as_ref().is_some_and(|h| h.0 == key) {
                    self.advance(i)?;
                }
            }
            if self.raw {
                if kind.is_value() {
                    return Ok(Some((key, kind, value)));
                }
                continue;
            }
            if let Some(value) = self.version.value(&key, kind, value)? {
                return Ok(Some((key, ValueKind::Put, value)));
            }
        }
    }
}

impl Iterator for Scan {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_item().map(|r| r.map(|(k, _, v)| (k, v)))
    }
}

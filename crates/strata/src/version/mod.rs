//! The version: an immutable picture of the live layers that reads see.
//!
//! What it owns: the open in-memory layer, the frozen in-memory layers
//! waiting for their flush (oldest first), and the layer files on disk with
//! what they cover (L0 delta layers, oldest first; then the runs). A reader
//! takes an `Arc<Version>` and keeps it for the whole read, so it never
//! sees a change in part, and the layers it reads stay alive under it (an
//! unlinked file stays readable through its descriptor).
//!
//! Versions are made in one place: [`set::VersionSet`] builds each one
//! from the manifest's state after an edit is durable, and checks it
//! ([`Version::check`]) before it is installed. The invariants: the
//! layers, from the oldest L1 run through the L0 layers and the frozen
//! layers to the open one, cover disjoint LSN ranges in increasing order;
//! an L1 run's files have disjoint key ranges; an image run's files have
//! disjoint covers (the key spans they answer for, which may leave parts of
//! the key space to older runs) and hold no key outside them; no image is
//! above an L0 layer. A breach is a bug, reported as `Error::Internal`,
//! never installed.
//!
//! Two searches answer reads. [`Version::candidates`], for get and
//! multi_get: the layers that can hold a key at an LSN, newest first,
//! ending at the newest image whose cover holds the key; the first version
//! at or below the LSN found in that order is the answer.
//! [`Version::run_layers`], for scans and images: the run layers that meet
//! a key range, each with the covers of the newer images that hide part of
//! it (a key an image answers for is the image's, whatever older layers
//! hold). Reads below `gc_lsn`, where GC removed history, are refused
//! before either runs.

use crate::error::{Error, Result};
use crate::keyspace::{Span, Union};
use crate::layer::inmemory::InMemoryLayer;
use crate::manifest::Level;
use crate::table_cache::Layer;
use crate::types::Cover;
use crate::types::{Lsn, ValueKind};
use crate::value::{read_pointed, ValueFiles};
use std::cmp::Reverse;
use std::sync::Arc;

pub(crate) mod set;

/// A layer a search visits.
pub(crate) enum Candidate<'a> {
    Memory(&'a Arc<InMemoryLayer>),
    Disk(&'a Arc<Layer>),
}

/// A run: layers with disjoint spans, sorted by key. An L1 run holds
/// every version of one LSN range (the L0 layers one compaction merged);
/// an image run holds one version per key at one LSN (`lsn_min` =
/// `lsn_max`), for the keys its files' covers hold.
#[derive(Clone)]
pub(crate) struct Run {
    pub(crate) image: bool,
    pub(crate) lsn_min: Lsn,
    pub(crate) lsn_max: Lsn,
    pub(crate) layers: Vec<Arc<Layer>>,
}

impl Run {
    /// Its smallest and largest key; `None` if it holds none (an image of
    /// nothing).
    pub(crate) fn key_range(&self) -> Option<(&[u8], &[u8])> {
        let first = self.layers.iter().find(|l| !l.is_empty())?;
        let last = self.layers.iter().rev().find(|l| !l.is_empty())?;
        Some((&first.desc.key_min, &last.desc.key_max))
    }

    /// Whether its files' spans hold the whole key space (an image that
    /// answers for every key).
    pub(crate) fn covers_all(&self) -> bool {
        let mut union = Union::default();
        for l in &self.layers {
            union.add(l.span());
        }
        union.holds(&Span::ALL)
    }

    /// The layer whose span holds `key`, if one does. (An L1 run's by
    /// plain key comparisons: this is on every get's path.)
    fn layer_for(&self, key: &[u8]) -> Option<&Arc<Layer>> {
        if !self.image {
            let i = self
                .layers
                .partition_point(|l| l.desc.key_max.as_slice() < key);
            return self
                .layers
                .get(i)
                .filter(|l| l.desc.key_min.as_slice() <= key);
        }
        let at = crate::keyspace::Edge::Key(key, crate::keyspace::Side::Before);
        let i = self.layers.partition_point(|l| l.span().to <= at);
        self.layers.get(i).filter(|l| l.span().contains(key))
    }
}

/// The live layers, replaced whole on every change.
#[derive(Clone)]
pub(crate) struct Version {
    pub(crate) open: Arc<InMemoryLayer>,
    /// Frozen in-memory layers, oldest first.
    pub(crate) frozen: Vec<Arc<InMemoryLayer>>,
    /// L0 delta layers, oldest first.
    pub(crate) l0: Vec<Arc<Layer>>,
    /// L1 and image runs, newest first (by their newest LSN; an L1 run
    /// before an image at the same LSN); all below the L0 layers.
    pub(crate) runs: Vec<Run>,
    /// Reads below this LSN are refused: GC removed history below it
    /// (the manifest's record of it).
    pub(crate) gc_lsn: Lsn,
    /// The value files the layers' pointers point into, by id.
    pub(crate) values: ValueFiles,
}

impl Version {
    /// What a found version of `key` answers: `None` for a tombstone, the
    /// value of a put, and for a pointer the value it points at, read from
    /// its value file and checked (never the pointer's bytes).
    pub(crate) fn value(
        &self,
        key: &[u8],
        kind: ValueKind,
        value: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        match kind {
            ValueKind::Delete => Ok(None),
            ValueKind::Put => Ok(Some(value)),
            ValueKind::Pointer => {
                let dir = self
                    .open
                    .path()
                    .parent()
                    .unwrap_or(std::path::Path::new(""));
                read_pointed(&self.values, dir, key, &value).map(Some)
            }
        }
    }

    /// A version of these layers (L0 in the order given, L1 grouped into
    /// runs by LSN range), if they keep the invariants.
    pub(crate) fn new(
        open: Arc<InMemoryLayer>,
        frozen: Vec<Arc<InMemoryLayer>>,
        layers: Vec<Arc<Layer>>,
    ) -> Result<Version> {
        let (l0, l1): (Vec<_>, Vec<_>) =
            layers.into_iter().partition(|l| l.desc.level == Level::L0);
        let mut runs: Vec<Run> = Vec::new();
        let mut l1 = l1;
        let order = |l: &Arc<Layer>| {
            (
                Reverse(l.desc.lsn_max),
                l.desc.level == Level::Image,
                Reverse(l.desc.lsn_min),
            )
        };
        l1.sort_by(|a, b| (order(a), a.span().from).cmp(&(order(b), b.span().from)));
        for layer in l1 {
            let image = layer.desc.level == Level::Image;
            match runs.last_mut() {
                Some(run)
                    if (run.image, run.lsn_min, run.lsn_max)
                        == (image, layer.desc.lsn_min, layer.desc.lsn_max) =>
                {
                    run.layers.push(layer)
                }
                _ => runs.push(Run {
                    image,
                    lsn_min: layer.desc.lsn_min,
                    lsn_max: layer.desc.lsn_max,
                    layers: vec![layer],
                }),
            }
        }
        let v = Version {
            open,
            frozen,
            l0,
            runs,
            gc_lsn: 0,
            values: ValueFiles::new(),
        };
        v.check()?;
        Ok(v)
    }

    /// Checks the invariants (see the module's doc).
    pub(crate) fn check(&self) -> Result<()> {
        let runs = self
            .runs
            .iter()
            .rev()
            .filter(|r| !r.image)
            .map(|r| ((r.lsn_min, r.lsn_max), r.layers[0].desc.id));
        let disk = self
            .l0
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| (l.lsn_range(), l.desc.id));
        let memory = self
            .frozen
            .iter()
            .chain(std::iter::once(&self.open))
            .filter(|l| !l.is_empty())
            .map(|l| (l.lsn_range(), l.file_id));
        let mut prev: Option<(Lsn, u64)> = None;
        for ((min, max), id) in runs.chain(disk).chain(memory) {
            // The open layer's range grows while this runs: its minimum is
            // u64::MAX until its first write, never below its real value.
            if min > max && min != Lsn::MAX {
                return Err(invariant(&format!("layer {id} has LSNs {min}..={max}")));
            }
            if let Some((prev_max, prev_id)) = prev {
                if min <= prev_max {
                    return Err(invariant(&format!(
                        "layer {id} starts at LSN {min}, not above layer {prev_id}'s {prev_max}"
                    )));
                }
            }
            prev = Some((max, id));
        }
        for run in &self.runs {
            for pair in run.layers.windows(2) {
                if pair[0].span().to > pair[1].span().from {
                    return Err(invariant(&format!(
                        "layers {} and {} of one run overlap in keys",
                        pair[0].desc.id, pair[1].desc.id
                    )));
                }
            }
            for l in &run.layers {
                // An image may hold no key (all in its cover were deleted);
                // an L1 layer holds some.
                let whole = match (&l.desc.cover, run.image) {
                    (Some(_), true) => l.span().holds(&l.keys()),
                    (None, false) => !l.is_empty(),
                    _ => false,
                };
                if !whole {
                    return Err(invariant(&format!(
                        "layer {} ({:?}, cover {:?}) is not what its run needs",
                        l.desc.id, l.desc.level, l.desc.cover
                    )));
                }
            }
        }
        // An image is never above the L0 layers (it is made from runs).
        if let (Some(image), Some(l0)) = (
            self.runs.iter().find(|r| r.image),
            self.l0.iter().find(|l| !l.is_empty()),
        ) {
            if image.lsn_max >= l0.desc.lsn_min {
                return Err(invariant(&format!(
                    "an image at LSN {} is not below L0 layer {} at {}",
                    image.lsn_max, l0.desc.id, l0.desc.lsn_min
                )));
            }
        }
        Ok(())
    }

    /// The in-memory and L0 layers a read at `lsn` visits, newest first:
    /// every in-memory layer, and the L0 layers that hold an LSN at or
    /// below `lsn` and a key the read wants (`wanted`).
    pub(crate) fn upper<'a>(
        &'a self,
        lsn: Lsn,
        wanted: impl Fn(&Layer) -> bool + 'a,
    ) -> impl Iterator<Item = Candidate<'a>> + 'a {
        let memory = std::iter::once(&self.open)
            .chain(self.frozen.iter().rev())
            .map(Candidate::Memory);
        let l0 = self
            .l0
            .iter()
            .rev()
            .filter(move |l| l.lsn_range().0 <= lsn && wanted(l))
            .map(Candidate::Disk);
        memory.chain(l0)
    }

    /// The layers that can hold `key` at `lsn`, newest first: those of
    /// [`Self::upper`], then in each run that holds an LSN at or below
    /// `lsn` the layer whose span holds `key`, up to and including the
    /// first image layer that does (it answers for the key: nothing older
    /// is needed).
    pub(crate) fn candidates<'a>(
        &'a self,
        key: &'a [u8],
        lsn: Lsn,
    ) -> impl Iterator<Item = Candidate<'a>> + 'a {
        let mut done = false;
        let runs = self
            .runs
            .iter()
            .filter(move |r| r.lsn_min <= lsn)
            .filter_map(move |r| Some((r.image, r.layer_for(key)?)))
            .take_while(move |&(image, _)| {
                let visit = !done;
                done |= image;
                visit
            })
            .map(|(_, l)| Candidate::Disk(l));
        // L0 layers by plain key comparisons: this is on every get's path.
        self.upper(lsn, move |l| l.holds_key(key)).chain(runs)
    }

    /// The run layers a read at `lsn` of the keys in `span` visits, newest
    /// first, each with the covers of the newer images that meet it: a
    /// key in one of those is the image's, and the layer's versions of it
    /// are not to be read (older layers may still hold a key the image
    /// says was deleted, or GC may have taken the newer history of it). A
    /// layer whose part of `span` newer images cover whole is left out,
    /// and so are the runs past an image that covers the rest of `span`.
    pub(crate) fn run_layers<'a>(
        &'a self,
        span: Span<'a>,
        lsn: Lsn,
    ) -> Vec<(&'a Arc<Layer>, Vec<Cover>)> {
        let mut imaged = Union::default();
        let mut out = Vec::new();
        for run in self.runs.iter().filter(|r| r.lsn_min <= lsn) {
            if imaged.holds(&span) {
                break;
            }
            for layer in &run.layers {
                let wanted = layer.span().intersect(&span);
                if wanted.is_empty() || imaged.holds(&wanted) {
                    continue;
                }
                if !layer.is_empty() {
                    out.push((layer, imaged.covers_meeting(&wanted)));
                }
            }
            // An image's files have disjoint covers: they do not hide one
            // another, only what is older.
            if run.image {
                for layer in &run.layers {
                    imaged.add(layer.span());
                }
            }
        }
        out
    }

    /// Bytes of the frozen layers' indexes and filters.
    pub(crate) fn frozen_index_bytes(&self) -> usize {
        self.frozen.iter().map(|l| l.index_memory_bytes()).sum()
    }

    /// The oldest LSN reads may ask for (see `gc_lsn`).
    pub(crate) fn horizon(&self) -> Lsn {
        self.gc_lsn
    }

    /// Every layer file: L0 oldest first, then the runs newest first.
    pub(crate) fn layers(&self) -> impl Iterator<Item = &Arc<Layer>> {
        self.l0
            .iter()
            .chain(self.runs.iter().flat_map(|r| &r.layers))
    }

    /// Each value file's live bytes: what the layers' pointers hold of it
    /// (from their descriptors; an entry an image and a delta both point
    /// at counts twice), by id.
    pub(crate) fn value_live_bytes(&self) -> std::collections::BTreeMap<u64, u64> {
        crate::manifest::value_live_bytes(
            self.values.keys().copied(),
            self.layers().map(|l| &l.desc),
        )
    }
}

fn invariant(what: &str) -> Error {
    Error::Internal(format!("version: {what}"))
}

#[cfg(test)]
mod tests;

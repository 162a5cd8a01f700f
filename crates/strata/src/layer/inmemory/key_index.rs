//! The in-memory layer's index of keys: `key → versions`, in key order.
//!
//! Keys that arrive in ascending order (a sequential ingest, a bulk load of
//! sorted keys, the first keys of any layer) are appended to a sorted run:
//! entries packed in chunks of growing, then fixed, size, 64 bytes a key
//! (a 40-byte `IndexKey` and a 24-byte `Versions`) with no node to split
//! and no comparison but with the last key. Every other key goes to a
//! B-tree, about 124 bytes a key (its nodes are half empty when keys come
//! in order, which is why the run exists: it halves the index's memory of
//! a sequential ingest and spends a third of its CPU less on inserts).
//!
//! A chunk's pages are mapped when it is allocated (`populate`), one call
//! rather than a page fault per page at first write.
//!
//! Invariants: the run is strictly ascending; every key of the tree is
//! below the run's last key (a key is appended only when it is above the
//! last, and the last only grows), so a key lies in at most one of the
//! two, and a key above the run's last is in neither; chunks are full
//! except the last; the memory counted (`memory_bytes`) covers every
//! allocation but the vector of chunk pointers; `run_owns_heap` is set
//! once an entry of the run owns memory (a key on the heap, a key's
//! versions in a vector), and until then the drop frees the run's chunks
//! without a walk over their entries.

use super::LogVersion;
use std::borrow::Borrow;
use std::collections::btree_map::{self, BTreeMap};
use std::ops::Bound;

/// The versions of one key, ascending by LSN. Most keys have one version, so
/// it is stored inline without a second allocation; the vector of a key
/// with more is boxed, so that the enum takes no more than one version (24
/// bytes, its tag in `ValueKind`'s spare values) in every entry.
#[derive(Debug, Clone)]
pub(crate) enum Versions {
    One(LogVersion),
    // The box is the point: a bare vector (24 bytes) would make every
    // entry 32.
    #[allow(clippy::box_collection)]
    Many(Box<Vec<LogVersion>>),
}

const _: () = assert!(std::mem::size_of::<Versions>() == std::mem::size_of::<LogVersion>());

impl Versions {
    pub(crate) fn as_slice(&self) -> &[LogVersion] {
        match self {
            Versions::One(v) => std::slice::from_ref(v),
            Versions::Many(v) => v,
        }
    }

    /// Adds `v`, which has the highest LSN so far, or replaces the version of
    /// the same LSN (the last write of a key within a batch wins); true when
    /// it added one.
    fn push(&mut self, v: LogVersion) -> bool {
        match self {
            Versions::One(one) if one.lsn == v.lsn => {
                *one = v;
                false
            }
            Versions::One(one) => {
                *self = Versions::Many(Box::new(vec![*one, v]));
                true
            }
            Versions::Many(many) => match many.last_mut() {
                Some(last) if last.lsn == v.lsn => {
                    *last = v;
                    false
                }
                _ => {
                    many.push(v);
                    true
                }
            },
        }
    }

    /// The newest version with `lsn <= at`.
    pub(crate) fn at(&self, at: u64) -> Option<LogVersion> {
        let s = self.as_slice();
        let i = s.partition_point(|v| v.lsn <= at);
        i.checked_sub(1).map(|i| s[i])
    }
}

/// Keys up to this length are stored inline in the index, without an
/// allocation of their own: 16-byte page keys and 32-byte hashes.
pub(crate) const INLINE_KEY_BYTES: usize = 32;

/// A key of the in-memory index. Short keys (the common cases: 16-byte page
/// keys, 32-byte hashes) live inline and compare as four big-endian words
/// with no pointer to follow, which is what makes ingest of short keys fast
/// and keeps a lookup's cache misses to the index's own memory; longer keys
/// are boxed. Invariants: a key is inline exactly when it is at most
/// `INLINE_KEY_BYTES` long, and inline bytes past `len` are zero, so
/// zero-padded word comparison followed by a length comparison is bytewise
/// order.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum IndexKey {
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES],
    },
    Heap(Box<[u8]>),
}

impl IndexKey {
    pub(crate) fn new(key: &[u8]) -> Self {
        if key.len() <= INLINE_KEY_BYTES {
            let mut bytes = [0u8; INLINE_KEY_BYTES];
            bytes[..key.len()].copy_from_slice(key);
            IndexKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            IndexKey::Heap(key.into())
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            IndexKey::Inline { len, bytes } => &bytes[..*len as usize],
            IndexKey::Heap(b) => b,
        }
    }

    /// Bytes of the key's own allocation (none when inline).
    fn heap_bytes(&self) -> usize {
        match self {
            IndexKey::Inline { .. } => 0,
            IndexKey::Heap(b) => b.len(),
        }
    }
}

impl Ord for IndexKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (IndexKey::Inline { len: la, bytes: a }, IndexKey::Inline { len: lb, bytes: b }) => {
                // Two big-endian halves compare as the bytes do; the second
                // half and the length only when the first halves tie.
                let half = |x: &[u8; INLINE_KEY_BYTES], i: usize| {
                    u128::from_be_bytes(x[i * 16..i * 16 + 16].try_into().expect("16 bytes"))
                };
                half(a, 0)
                    .cmp(&half(b, 0))
                    .then_with(|| half(a, 1).cmp(&half(b, 1)))
                    .then_with(|| la.cmp(lb))
            }
            _ => self.as_slice().cmp(other.as_slice()),
        }
    }
}

impl PartialOrd for IndexKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Borrow<[u8]> for IndexKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

/// Bytes of index memory per key of the tree beyond a long key's own
/// allocation: its share of the B-tree's nodes, which hold 11 entries of a
/// 40-byte `IndexKey` and 24-byte `Versions` each. Measured (450 Ki keys,
/// RSS): 124 bytes per key inserted in order (a split at the right edge
/// leaves the left node half full), 99 for random keys; the larger is
/// counted, so that `Options::in_memory_index_bytes_max` holds.
pub(crate) const TREE_KEY_BYTES: usize = 124;

/// Bytes of one entry of the run.
pub(crate) const RUN_KEY_BYTES: usize = std::mem::size_of::<(IndexKey, Versions)>();

const _: () = assert!(RUN_KEY_BYTES == 64);

/// Bytes of index memory per version of a key beyond its first (the
/// versions' vector, grown by doubling: 24 bytes each, up to half again,
/// and its box).
pub(crate) const INDEX_VERSION_BYTES: usize = 40;

/// Entries of the run's first chunk; each next chunk doubles, up to
/// `RUN_CHUNK_ENTRIES_MAX` (256 KiB): a small layer takes little memory, a
/// large one never copies its run to grow it.
const RUN_CHUNK_ENTRIES_MIN: usize = 64;
const RUN_CHUNK_ENTRIES_MAX: usize = 4096;

/// Where a key was put: whether it was new to the index, and the bytes of
/// memory that took.
pub(crate) struct Inserted {
    pub new_key: bool,
    pub memory_bytes: usize,
}

/// The index: a sorted run of keys that came in order, and a B-tree of the
/// rest (see the module documentation).
#[derive(Default)]
pub(crate) struct KeyIndex {
    run: Vec<Vec<(IndexKey, Versions)>>,
    tree: BTreeMap<IndexKey, Versions>,
    /// Some entry of the run holds memory of its own (a key on the heap,
    /// or a key's versions in a vector); while none does, the run's chunks
    /// are freed without a walk over their entries (`Drop`).
    run_owns_heap: bool,
    /// Keys held (in the run and the tree).
    keys: usize,
}

impl Drop for KeyIndex {
    /// Frees the run's chunks without dropping their entries one by one
    /// when none of them holds memory of its own: a walk over every entry
    /// (64 bytes a key, far from any cache once the flush has read them)
    /// only to find nothing to free. Measured on the index of a 32 MiB
    /// ingest of 100-byte values in key order (335,544 keys, a release
    /// build, two drops each way): 0.9 and 2.3 ms against 4.7 and 5.3 ms;
    /// `examples/ingest_profile 32 100 seq yes defaults`, DirectRw, 4 runs
    /// in turn each way: 228-236 MiB/s against 202-228, ahead in each pair.
    fn drop(&mut self) {
        if !self.run_owns_heap {
            for chunk in &mut self.run {
                // SAFETY: every entry is an inline key with one inline
                // version (`run_owns_heap` is set before any other kind
                // enters the run), which own nothing: not dropping them
                // leaks nothing, and the chunk's memory is freed below.
                unsafe { chunk.set_len(0) };
            }
        }
    }
}

impl KeyIndex {
    /// Whether no key is in it.
    pub(crate) fn is_empty(&self) -> bool {
        self.run.is_empty() && self.tree.is_empty()
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.keys
    }

    /// Adds version `v` of `key` (a version of the highest LSN so far for
    /// it, or one that replaces the version of the same LSN).
    pub(crate) fn insert(&mut self, key: IndexKey, v: LogVersion) -> Inserted {
        let above_run = match self.run.last().and_then(|c| c.last()) {
            None => true,
            Some((last, _)) => key > *last,
        };
        if above_run {
            return self.append(key, v);
        }
        if let Some(versions) = self.run_get_mut(&key) {
            let added = versions.push(v);
            self.run_owns_heap |= added;
            return Inserted {
                new_key: false,
                memory_bytes: if added { INDEX_VERSION_BYTES } else { 0 },
            };
        }
        match self.tree.entry(key) {
            btree_map::Entry::Occupied(mut o) => Inserted {
                new_key: false,
                memory_bytes: if o.get_mut().push(v) {
                    INDEX_VERSION_BYTES
                } else {
                    0
                },
            },
            btree_map::Entry::Vacant(vacant) => {
                let memory_bytes = TREE_KEY_BYTES + vacant.key().heap_bytes();
                vacant.insert(Versions::One(v));
                self.keys += 1;
                Inserted {
                    new_key: true,
                    memory_bytes,
                }
            }
        }
    }

    /// Appends `key`, above every key of the index, to the run.
    fn append(&mut self, key: IndexKey, v: LogVersion) -> Inserted {
        let mut memory_bytes = key.heap_bytes();
        self.run_owns_heap |= matches!(key, IndexKey::Heap(_));
        let full = self.run.last().is_none_or(|c| c.len() == c.capacity());
        if full {
            let entries = self.run.last().map_or(RUN_CHUNK_ENTRIES_MIN, |c| {
                (c.capacity() * 2).min(RUN_CHUNK_ENTRIES_MAX)
            });
            let chunk = Vec::with_capacity(entries);
            populate(&chunk);
            self.run.push(chunk);
            memory_bytes += entries * RUN_KEY_BYTES;
        }
        self.run
            .last_mut()
            .expect("a chunk with room")
            .push((key, Versions::One(v)));
        self.keys += 1;
        Inserted {
            new_key: true,
            memory_bytes,
        }
    }

    /// The chunk of the run that would hold `key` and `key`'s place in it.
    fn run_find<Q>(&self, key: &Q) -> Option<(usize, Result<usize, usize>)>
    where
        IndexKey: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let c = self
            .run
            .partition_point(|chunk| chunk[0].0.borrow() <= key)
            .checked_sub(1)?;
        Some((
            c,
            self.run[c].binary_search_by(|(k, _)| k.borrow().cmp(key)),
        ))
    }

    fn run_get_mut(&mut self, key: &IndexKey) -> Option<&mut Versions> {
        match self.run_find(key)? {
            (c, Ok(i)) => Some(&mut self.run[c][i].1),
            _ => None,
        }
    }

    /// The versions of `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&Versions>
    where
        IndexKey: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        match self.run_find(key) {
            Some((c, Ok(i))) => Some(&self.run[c][i].1),
            _ => self.tree.get(key),
        }
    }

    /// The run's position of the first key not below `bound` (as a start
    /// bound: the first key in range).
    fn run_position(&self, bound: Bound<&[u8]>) -> RunPos {
        let key = match bound {
            Bound::Unbounded => return RunPos { chunk: 0, at: 0 },
            Bound::Included(k) | Bound::Excluded(k) => k,
        };
        let Some((c, found)) = self.run_find(key) else {
            return RunPos { chunk: 0, at: 0 };
        };
        let at = match (found, bound) {
            (Ok(i), Bound::Excluded(_)) => i + 1,
            (Ok(i) | Err(i), _) => i,
        };
        RunPos { chunk: c, at }.normalized(&self.run)
    }

    /// The entries with keys in the range, in key order (none when the
    /// range is empty: its start above its end, or one key excluded).
    pub(crate) fn range<'a>(
        &'a self,
        mut start: Bound<&'a [u8]>,
        mut end: Bound<&'a [u8]>,
    ) -> Iter<'a> {
        if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
            (start, end)
        {
            let both_included = matches!((start, end), (Bound::Included(_), Bound::Included(_)));
            if s > e || (s == e && !both_included) {
                // The empty range the B-tree accepts (it panics on some
                // empty ones).
                (start, end) = (Bound::Included(s), Bound::Excluded(s));
            }
        }
        Iter {
            run: RunIter {
                run: &self.run,
                pos: self.run_position(start),
                end,
            },
            tree: self.tree.range::<[u8], _>((start, end)).peekable(),
            run_next: None,
        }
        .primed()
    }

    /// Every entry, in key order.
    pub(crate) fn iter(&self) -> Iter<'_> {
        self.range(Bound::Unbounded, Bound::Unbounded)
    }
}

/// Maps the whole pages of `chunk`'s allocation in one call instead of a
/// page fault each on first write (`prefetch::populate_pages`). Measured
/// on a 100-byte sequential ingest into one layer: the run's page faults
/// were 16 % of the writer's CPU (82 Ki faults for 5.4 Mi keys); mapped
/// this way, about 6 % less CPU a put. The index counts a chunk's whole
/// capacity as its memory already, so the pages mapped early are ones it
/// counts.
fn populate(chunk: &Vec<(IndexKey, Versions)>) {
    crate::prefetch::populate_pages(chunk.as_ptr().cast(), chunk.capacity() * RUN_KEY_BYTES);
}

/// A place in the run: entry `at` of chunk `chunk` (past the end when
/// `chunk == run.len()`).
#[derive(Clone, Copy)]
struct RunPos {
    chunk: usize,
    at: usize,
}

impl RunPos {
    /// The same place with `at` inside its chunk (moved to the next chunk's
    /// start when past the end of one).
    fn normalized(mut self, run: &[Vec<(IndexKey, Versions)>]) -> Self {
        while self.chunk < run.len() && self.at >= run[self.chunk].len() {
            self.chunk += 1;
            self.at = 0;
        }
        self
    }
}

/// The run's entries from a place up to an end bound.
#[derive(Clone)]
struct RunIter<'a> {
    run: &'a [Vec<(IndexKey, Versions)>],
    pos: RunPos,
    end: Bound<&'a [u8]>,
}

impl<'a> Iterator for RunIter<'a> {
    type Item = (&'a IndexKey, &'a Versions);

    fn next(&mut self) -> Option<Self::Item> {
        let (k, vs) = self.run.get(self.pos.chunk)?.get(self.pos.at)?;
        let inside = match self.end {
            Bound::Unbounded => true,
            Bound::Included(e) => k.as_slice() <= e,
            Bound::Excluded(e) => k.as_slice() < e,
        };
        if !inside {
            self.pos.chunk = self.run.len();
            return None;
        }
        self.pos.at += 1;
        self.pos = self.pos.normalized(self.run);
        Some((k, vs))
    }
}

/// The index's entries in key order: the run's and the tree's merged (they
/// hold no key in common). Cloning it keeps its place.
#[derive(Clone)]
pub(crate) struct Iter<'a> {
    run: RunIter<'a>,
    tree: std::iter::Peekable<btree_map::Range<'a, IndexKey, Versions>>,
    run_next: Option<(&'a IndexKey, &'a Versions)>,
}

impl<'a> Iter<'a> {
    fn primed(mut self) -> Self {
        self.run_next = self.run.next();
        self
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a IndexKey, &'a Versions);

    fn next(&mut self) -> Option<Self::Item> {
        let take_run = match (self.run_next, self.tree.peek()) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((a, _)), Some((b, _))) => a < *b,
        };
        if take_run {
            let item = self.run_next;
            self.run_next = self.run.next();
            item
        } else {
            self.tree.next()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ValueKind;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn index_key_order_is_bytewise_order(
            a in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8), any::<u8>()], 0..40),
            b in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(255u8), any::<u8>()], 0..40),
        ) {
            let (ka, kb) = (IndexKey::new(&a), IndexKey::new(&b));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            prop_assert_eq!(ka == kb, a == b);
            prop_assert_eq!(ka.as_slice(), &a[..]);
        }

        /// The index answers as a plain ordered map of every version, for
        /// keys in any order (runs of ascending keys among random ones,
        /// repeats, long keys), through `get`, `iter` and `range` with every
        /// kind of bound; and counts the memory of the run's chunks.
        #[test]
        fn the_index_answers_as_an_ordered_map(
            keys in prop::collection::vec(
                prop_oneof![
                    (0u16..600).prop_map(|k| k.to_be_bytes().to_vec()),
                    (0u16..600, 0u8..3).prop_map(|(k, n)| {
                        let mut v = k.to_be_bytes().to_vec();
                        v.resize(2 + n as usize * 20, 7);
                        v
                    }),
                ],
                0..400,
            ),
            ascending in 0usize..2000,
            bounds in prop::collection::vec((0u8..3, 0u16..700, 0u8..3, 0u16..700), 8),
        ) {
            // The first `ascending` puts are ascending keys, the rest as drawn.
            let mut all: Vec<Vec<u8>> = (0..ascending.min(1500) as u16)
                .step_by(3)
                .map(|k| k.to_be_bytes().to_vec())
                .collect();
            all.extend(keys);
            let mut index = KeyIndex::default();
            let mut model: BTreeMap<Vec<u8>, Vec<LogVersion>> = BTreeMap::new();
            let mut chunk_bytes = 0;
            for (lsn, key) in all.iter().enumerate() {
                let v = LogVersion { lsn: lsn as u64 + 1, offset: lsn as u64, len: 1, kind: ValueKind::Put, out_of_line: false };
                let chunks = index.run.len();
                let inserted = index.insert(IndexKey::new(key), v);
                if index.run.len() > chunks {
                    chunk_bytes += index.run.last().unwrap().capacity() * RUN_KEY_BYTES;
                }
                let model_new = !model.contains_key(key);
                model.entry(key.clone()).or_default().push(v);
                prop_assert_eq!(inserted.new_key, model_new);
            }
            let run_chunks: usize = index.run.iter().map(|c| c.capacity() * RUN_KEY_BYTES).sum();
            prop_assert_eq!(run_chunks, chunk_bytes);
            prop_assert_eq!(index.len(), model.len());
            // The run's entries are dropped one by one exactly when one of
            // them owns memory (else its drop would leak it).
            let owns = index.run.iter().flatten().any(|(k, vs)| {
                matches!(k, IndexKey::Heap(_)) || matches!(vs, Versions::Many(_))
            });
            prop_assert_eq!(index.run_owns_heap, owns);
            for (k, vs) in &model {
                let got = index.get(&k[..]).map(|v| v.as_slice().to_vec());
                prop_assert_eq!(got.as_ref(), Some(vs));
                prop_assert_eq!(index.get(&IndexKey::new(k)).map(|v| v.as_slice().len()), Some(vs.len()));
            }
            prop_assert!(index.get(&[9u8, 9, 9][..]).is_none());
            let flat = |it: Iter<'_>| it.map(|(k, vs)| (k.as_slice().to_vec(), vs.as_slice().to_vec())).collect::<Vec<_>>();
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(flat(index.iter()), want);
            for (sk, s, ek, e) in bounds {
                let (s, e) = (s.to_be_bytes(), e.to_be_bytes());
                let bound = |kind: u8, k: &'_ [u8; 2]| -> Bound<Vec<u8>> {
                    match kind {
                        0 => Bound::Unbounded,
                        1 => Bound::Included(k.to_vec()),
                        _ => Bound::Excluded(k.to_vec()),
                    }
                };
                let (sb, eb) = (bound(sk, &s), bound(ek, &e));
                let valid = match (&sb, &eb) {
                    (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                        a < b || (a == b && matches!((&sb, &eb), (Bound::Included(_), Bound::Included(_))))
                    }
                    _ => true,
                };
                let want: Vec<_> = if valid {
                    model
                        .range::<Vec<u8>, _>((sb.as_ref(), eb.as_ref()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                } else {
                    Vec::new()
                };
                let got = flat(index.range(
                    sb.as_ref().map(|k| &k[..]),
                    eb.as_ref().map(|k| &k[..]),
                ));
                prop_assert_eq!(got, want);
            }
        }
    }
}

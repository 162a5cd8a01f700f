//! Spans of the key space: what a layer answers for, as the version and the
//! compaction policies compare them.
//!
//! What it owns: [`Edge`], a place on the key line between keys (just
//! before a key, just after it, or past every key), and [`Span`], the
//! half-open stretch `[from, to)` between two edges. Every range the engine
//! speaks of maps onto them exactly: an L1 layer's keys `min..=max` are
//! `[before min, after max)`, an image's cover is its bounds' edges, a scan's
//! range its bounds'. So "is this key in it", "does this cover that" and
//! "do these two meet" are comparisons of edges, whatever the bounds'
//! kinds. Invariant: a span is empty exactly when `from >= to`.

use crate::types::Cover;
use std::ops::Bound;

/// Which side of a key an edge lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Side {
    Before,
    After,
}

/// A place on the key line. Ordered along it: by key, just before a key
/// before just after it, and `End` after every key. `Key(b"", Before)` is
/// the start of the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Edge<'a> {
    Key(&'a [u8], Side),
    End,
}

/// The start of the key space.
pub(crate) const START: Edge<'static> = Edge::Key(b"", Side::Before);

impl<'a> Edge<'a> {
    /// The edge a range starting at `b` starts at.
    pub(crate) fn start(b: Bound<&'a [u8]>) -> Edge<'a> {
        match b {
            Bound::Included(k) => Edge::Key(k, Side::Before),
            Bound::Excluded(k) => Edge::Key(k, Side::After),
            Bound::Unbounded => START,
        }
    }

    /// The edge a range ending at `b` ends at.
    pub(crate) fn end(b: Bound<&'a [u8]>) -> Edge<'a> {
        match b {
            Bound::Included(k) => Edge::Key(k, Side::After),
            Bound::Excluded(k) => Edge::Key(k, Side::Before),
            Bound::Unbounded => Edge::End,
        }
    }

    /// The bound of a range that starts here.
    pub(crate) fn as_start(self) -> Bound<Vec<u8>> {
        match self {
            e if e == START => Bound::Unbounded,
            Edge::Key(k, Side::Before) => Bound::Included(k.to_vec()),
            Edge::Key(k, Side::After) => Bound::Excluded(k.to_vec()),
            // Nothing starts past every key; an empty span's start.
            Edge::End => Bound::Excluded(vec![0xff; crate::types::KEY_BYTES_MAX]),
        }
    }

    /// The bound of a range that ends here.
    pub(crate) fn as_end(self) -> Bound<Vec<u8>> {
        match self {
            Edge::Key(k, Side::Before) => Bound::Excluded(k.to_vec()),
            Edge::Key(k, Side::After) => Bound::Included(k.to_vec()),
            Edge::End => Bound::Unbounded,
        }
    }
}

/// A bound on owned keys as one on borrowed keys.
pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// The stretch `[from, to)` of the key line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span<'a> {
    pub from: Edge<'a>,
    pub to: Edge<'a>,
}

impl<'a> Span<'a> {
    /// The whole key space.
    pub(crate) const ALL: Span<'static> = Span {
        from: START,
        to: Edge::End,
    };

    /// No key at all.
    pub(crate) const NONE: Span<'static> = Span {
        from: START,
        to: START,
    };

    /// The range `start..end` (as bounds).
    pub(crate) fn of_range(start: Bound<&'a [u8]>, end: Bound<&'a [u8]>) -> Span<'a> {
        Span {
            from: Edge::start(start),
            to: Edge::end(end),
        }
    }

    /// The keys `min..=max`.
    pub(crate) fn of_keys(min: &'a [u8], max: &'a [u8]) -> Span<'a> {
        Span {
            from: Edge::Key(min, Side::Before),
            to: Edge::Key(max, Side::After),
        }
    }

    /// An image's cover.
    pub(crate) fn of_cover(cover: &'a Cover) -> Span<'a> {
        Span::of_range(as_ref(&cover.start), as_ref(&cover.end))
    }

    /// The cover of exactly this span.
    pub(crate) fn to_cover(self) -> Cover {
        Cover {
            start: self.from.as_start(),
            end: self.to.as_end(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.from >= self.to
    }

    /// Whether `key` is in it.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        let at = Edge::Key(key, Side::Before);
        self.from <= at && at < self.to
    }

    /// Whether it holds every key of `other` (an empty `other` is held).
    pub(crate) fn holds(&self, other: &Span<'_>) -> bool {
        other.is_empty() || (self.from <= other.from && other.to <= self.to)
    }

    /// Whether some key is in both.
    pub(crate) fn meets(&self, other: &Span<'_>) -> bool {
        !self.intersect(other).is_empty()
    }

    /// The keys in both.
    pub(crate) fn intersect<'b>(&self, other: &Span<'b>) -> Span<'b>
    where
        'a: 'b,
    {
        Span {
            from: self.from.max(other.from),
            to: self.to.min(other.to),
        }
    }
}

/// A union of spans, kept sorted, disjoint and with no two touching (each
/// span added merges with those it meets or touches).
#[derive(Debug, Clone, Default)]
pub(crate) struct Union<'a> {
    spans: Vec<Span<'a>>,
}

impl<'a> Union<'a> {
    pub(crate) fn add(&mut self, span: Span<'a>) {
        if span.is_empty() {
            return;
        }
        // The spans that end before it starts stay before it; those that
        // start after it ends stay after; the rest merge with it.
        let first = self.spans.partition_point(|s| s.to < span.from);
        let last = self.spans.partition_point(|s| s.from <= span.to);
        let mut merged = span;
        for s in &self.spans[first..last] {
            merged.from = merged.from.min(s.from);
            merged.to = merged.to.max(s.to);
        }
        self.spans.splice(first..last, std::iter::once(merged));
    }

    /// Whether every key of `span` is in the union.
    pub(crate) fn holds(&self, span: &Span<'_>) -> bool {
        if span.is_empty() {
            return true;
        }
        let at = self.spans.partition_point(|s| s.to <= span.from);
        self.spans.get(at).is_some_and(|s| s.holds(span))
    }

    /// The parts of the union that meet `span`, as covers.
    pub(crate) fn covers_meeting(&self, span: &Span<'_>) -> Vec<Cover> {
        self.spans
            .iter()
            .filter(|s| s.meets(span))
            .map(|s| s.to_cover())
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn spans(&self) -> &[Span<'a>] {
        &self.spans
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(min: &'static str, max: &'static str) -> Span<'static> {
        Span::of_keys(min.as_bytes(), max.as_bytes())
    }

    #[test]
    fn bounds_map_onto_edges_exactly() {
        let inc = |k: &'static str| Bound::Included(k.as_bytes());
        let exc = |k: &'static str| Bound::Excluded(k.as_bytes());
        let s = Span::of_range(inc("b"), exc("d"));
        assert!(!s.contains(b"a") && s.contains(b"b") && s.contains(b"c\xff"));
        assert!(!s.contains(b"d"));
        let s = Span::of_range(exc("b"), inc("d"));
        assert!(!s.contains(b"b") && s.contains(b"b\0") && s.contains(b"d"));
        assert!(!s.contains(b"d\0"));
        assert!(Span::ALL.contains(b"") && Span::ALL.contains(&[0xff; 8]));
        assert!(Span::NONE.is_empty() && !Span::NONE.contains(b""));
        assert!(Span::of_range(exc("b"), exc("b")).is_empty());
        assert!(Span::of_range(inc("b"), inc("b")).contains(b"b"));
        // Round trip through a cover.
        for s in [
            keys("a", "c"),
            Span::of_range(exc("a"), exc("c")),
            Span::ALL,
        ] {
            let cover = s.to_cover();
            assert_eq!(Span::of_cover(&cover), s);
        }
        assert_eq!(Span::ALL.to_cover(), Cover::everything());
        // A cover from "b" on holds "b".."z" and meets what reaches "b".
        assert!(Span::of_range(inc("b"), Bound::Unbounded).holds(&keys("b", "z")));
        assert!(keys("a", "b").meets(&Span::of_range(inc("b"), Bound::Unbounded)));
        assert!(!keys("a", "b").meets(&Span::of_range(exc("b"), Bound::Unbounded)));
    }

    #[test]
    fn a_union_merges_what_meets_or_touches_and_holds_only_what_it_covers() {
        let mut u = Union::default();
        u.add(keys("d", "f"));
        u.add(keys("a", "b"));
        assert!(u.holds(&keys("a", "b")) && u.holds(&keys("e", "f")));
        assert!(!u.holds(&keys("b", "d")), "the gap after b");
        assert!(!u.holds(&keys("a", "f")));
        // [after b, before d) fills the gap exactly: one span.
        u.add(Span::of_range(Bound::Excluded(b"b"), Bound::Excluded(b"d")));
        assert_eq!(u.spans().len(), 1);
        assert!(u.holds(&keys("a", "f")));
        assert!(!u.holds(&keys("a", "f\0")));
        u.add(Span::ALL);
        assert!(u.holds(&keys("", "\u{7f}")) && u.spans().len() == 1);
        // An empty span adds nothing and is always held.
        let mut e = Union::default();
        e.add(Span::NONE);
        assert!(e.spans().is_empty() && e.holds(&Span::NONE));
        assert!(!e.holds(&keys("a", "a")));
        assert_eq!(u.covers_meeting(&keys("x", "y")), [Cover::everything()]);
    }
}

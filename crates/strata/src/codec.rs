//! Fixed-width little-endian fields: the one place where the on-disk
//! formats (log file and record headers, write batch entries, delta layer
//! headers, blocks, index and footer, bloom filters, the manifest) turn
//! integers into bytes and back.
//!
//! Readers: [`Decoder`], a cursor over a field sequence, and `u16_at`,
//! `u32_at`, `u64_at` for formats laid out by offset constants. Writers:
//! `put_u16`, `put_u32`, `put_u64` append to a `Vec<u8>`; `write_u32_at`
//! and `write_u64_at` patch a field of a buffer the caller laid
//! out (a header filled in after its payload, a checksum).
//!
//! Invariant: every read is bounds-checked and says so in its type (`None`,
//! or [`Truncated`]) when its field runs past the end; no input, however
//! short or malformed, makes a read panic, and a failed read does not move
//! a cursor. A write at an offset past the end of the caller's buffer is a
//! bug in the caller's layout and panics. Integers only: what the fields
//! mean (lengths, limits, checksums) is each format's to check.
//!
//! Pure functions on borrowed bytes: thread-safe. Imports nothing from the
//! engine, so every format can use it without a cycle.

/// A field that runs past the end of the bytes being decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {needed}-byte field at byte {at} runs past the end of {len} bytes")]
pub(crate) struct Truncated {
    /// Where the field starts.
    pub at: usize,
    /// Bytes the field takes.
    pub needed: usize,
    /// Bytes there were.
    pub len: usize,
}

/// The `N` bytes at `at`, or `None` when they do not fit.
#[inline]
fn array_at<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    let field = bytes.get(at..at.checked_add(N)?)?;
    field.try_into().ok()
}

/// The `u16` at `at` in `bytes`, or `None` when it does not fit.
#[inline]
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    array_at(bytes, at).map(u16::from_le_bytes)
}

/// The `u32` at `at` in `bytes`, or `None` when it does not fit.
#[inline]
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    array_at(bytes, at).map(u32::from_le_bytes)
}

/// The `u64` at `at` in `bytes`, or `None` when it does not fit.
#[inline]
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    array_at(bytes, at).map(u64::from_le_bytes)
}

/// A cursor over fields laid out back to back: each read takes its field
/// and moves past it, or returns [`Truncated`] and stays where it was.
#[derive(Debug, Clone)]
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    /// Offset of the next field; `at <= bytes.len()`.
    at: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Decoder { bytes, at: 0 }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// The next `n` bytes.
    #[inline]
    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let truncated = Truncated {
            at: self.at,
            needed: n,
            len: self.bytes.len(),
        };
        let end = self.at.checked_add(n).ok_or(truncated)?;
        let field = self.bytes.get(self.at..end).ok_or(truncated)?;
        self.at = end;
        debug_assert!(self.at <= self.bytes.len());
        Ok(field)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let field = array_at(self.bytes, self.at).ok_or(Truncated {
            at: self.at,
            needed: N,
            len: self.bytes.len(),
        })?;
        self.at += N;
        Ok(field)
    }

    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, Truncated> {
        self.array().map(u8::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u16(&mut self) -> Result<u16, Truncated> {
        self.array().map(u16::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, Truncated> {
        self.array().map(u32::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, Truncated> {
        self.array().map(u64::from_le_bytes)
    }
}

/// Appends `v`.
#[inline]
pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v`.
#[inline]
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v`.
#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Writes `N` bytes at `at`; panics if the caller's layout puts them past
/// the end of `buf`.
#[inline]
fn write_array_at<const N: usize>(buf: &mut [u8], at: usize, field: [u8; N]) {
    let len = buf.len();
    let Some(slot) = at.checked_add(N).and_then(|end| buf.get_mut(at..end)) else {
        panic!("a {N}-byte field at {at} is past the end of a {len}-byte buffer");
    };
    slot.copy_from_slice(&field);
}

/// Writes `v` at `at` of `buf`, which the caller laid out to hold it.
#[inline]
pub(crate) fn write_u32_at(buf: &mut [u8], at: usize, v: u32) {
    write_array_at(buf, at, v.to_le_bytes());
}

/// Writes `v` at `at` of `buf`, which the caller laid out to hold it.
#[inline]
pub(crate) fn write_u64_at(buf: &mut [u8], at: usize, v: u64) {
    write_array_at(buf, at, v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_are_little_endian() {
        let mut out = Vec::new();
        out.push(0x01);
        put_u16(&mut out, 0x0302);
        put_u32(&mut out, 0x0706_0504);
        put_u64(&mut out, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(out, (1..=15).collect::<Vec<u8>>());
        assert_eq!(u16_at(&out, 1), Some(0x0302));
        assert_eq!(u32_at(&out, 3), Some(0x0706_0504));
        assert_eq!(u64_at(&out, 7), Some(0x0f0e_0d0c_0b0a_0908));
    }

    #[test]
    fn offset_reads_past_the_end_are_none() {
        let bytes = [0u8; 8];
        assert_eq!(u64_at(&bytes, 0), Some(0));
        assert_eq!(u64_at(&bytes, 1), None);
        assert_eq!(u32_at(&bytes, 5), None);
        assert_eq!(u16_at(&bytes, 7), None);
        assert_eq!(u16_at(&bytes, 8), None);
        assert_eq!(u16_at(&bytes, usize::MAX), None);
        assert_eq!(u64_at(&bytes, usize::MAX - 3), None);
        assert_eq!(u32_at(&[], 0), None);
    }

    #[test]
    fn a_truncated_read_says_where_and_does_not_move_the_cursor() {
        let mut d = Decoder::new(&[1, 2, 3]);
        assert_eq!(d.u16(), Ok(0x0201));
        let truncated = Truncated {
            at: 2,
            needed: 4,
            len: 3,
        };
        assert_eq!(d.u32(), Err(truncated));
        assert_eq!(
            d.bytes(usize::MAX),
            Err(Truncated {
                needed: usize::MAX,
                ..truncated
            })
        );
        assert_eq!(d.remaining(), 1);
        assert_eq!(d.u8(), Ok(3));
        assert_eq!(d.remaining(), 0);
        assert_eq!(d.bytes(0), Ok(&[][..]));
        assert!(d.u8().is_err());
    }

    #[test]
    fn writes_at_an_offset_patch_only_their_field() {
        let mut buf = [0xffu8; 16];
        write_u32_at(&mut buf, 2, 0x0504_0302);
        write_u64_at(&mut buf, 8, 0x100f_0e0d_0c0b_0a09);
        assert_eq!(buf[..8], [0xff, 0xff, 2, 3, 4, 5, 0xff, 0xff]);
        assert_eq!(u64_at(&buf, 8), Some(0x100f_0e0d_0c0b_0a09));
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn a_write_past_the_buffer_is_a_layout_bug() {
        write_u32_at(&mut [0u8; 4], 1, 0);
    }

    /// A field of each width, as the formats use them.
    #[derive(Debug, Clone)]
    enum Field {
        U8(u8),
        U16(u16),
        U32(u32),
        U64(u64),
        Bytes(Vec<u8>),
    }

    fn field() -> impl Strategy<Value = Field> {
        prop_oneof![
            any::<u8>().prop_map(Field::U8),
            any::<u16>().prop_map(Field::U16),
            any::<u32>().prop_map(Field::U32),
            any::<u64>().prop_map(Field::U64),
            proptest::collection::vec(any::<u8>(), 0..20).prop_map(Field::Bytes),
        ]
    }

    fn encode(fields: &[Field]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            match f {
                Field::U8(v) => out.push(*v),
                Field::U16(v) => put_u16(&mut out, *v),
                Field::U32(v) => put_u32(&mut out, *v),
                Field::U64(v) => put_u64(&mut out, *v),
                Field::Bytes(v) => out.extend_from_slice(v),
            }
        }
        out
    }

    /// Offset of `d`'s next field in `bytes`, the bytes it reads.
    fn position(d: &Decoder<'_>, bytes: &[u8]) -> usize {
        bytes.len() - d.remaining()
    }

    /// Reads `f`'s kind of field; whether it read the value `f` holds.
    fn read(d: &mut Decoder<'_>, f: &Field) -> Result<bool, Truncated> {
        Ok(match f {
            Field::U8(v) => d.u8()? == *v,
            Field::U16(v) => d.u16()? == *v,
            Field::U32(v) => d.u32()? == *v,
            Field::U64(v) => d.u64()? == *v,
            Field::Bytes(v) => d.bytes(v.len())? == &v[..],
        })
    }

    proptest! {
        #[test]
        fn fields_round_trip(fields in proptest::collection::vec(field(), 0..40)) {
            let bytes = encode(&fields);
            let mut d = Decoder::new(&bytes);
            for f in &fields {
                let at = position(&d, &bytes);
                prop_assert_eq!(read(&mut d, f), Ok(true));
                match f {
                    Field::U16(v) => prop_assert_eq!(u16_at(&bytes, at), Some(*v)),
                    Field::U32(v) => prop_assert_eq!(u32_at(&bytes, at), Some(*v)),
                    Field::U64(v) => prop_assert_eq!(u64_at(&bytes, at), Some(*v)),
                    Field::U8(_) | Field::Bytes(_) => {}
                }
            }
            prop_assert_eq!(d.remaining(), 0);
        }

        #[test]
        fn truncated_fields_fail_where_they_start(
            fields in proptest::collection::vec(field(), 1..40),
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = encode(&fields);
            let len = cut.index(bytes.len() + 1);
            let cut_bytes = &bytes[..len];
            let mut d = Decoder::new(cut_bytes);
            for f in &fields {
                let at = position(&d, cut_bytes);
                match read(&mut d, f) {
                    Ok(read_back) => prop_assert!(read_back),
                    Err(e) => {
                        prop_assert_eq!((e.at, e.len), (at, len));
                        prop_assert!(at + e.needed > len);
                        prop_assert_eq!(position(&d, cut_bytes), at);
                        break;
                    }
                }
            }
        }

        #[test]
        fn arbitrary_reads_of_arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
            reads in proptest::collection::vec((0u8..5, any::<usize>()), 0..40),
        ) {
            let mut d = Decoder::new(&bytes);
            for (kind, n) in reads {
                let before = position(&d, &bytes);
                let took = match kind {
                    0 => d.u8().map(|_| 1),
                    1 => d.u16().map(|_| 2),
                    2 => d.u32().map(|_| 4),
                    3 => d.u64().map(|_| 8),
                    _ => d.bytes(n % 80).map(<[u8]>::len),
                };
                match took {
                    Ok(n) => prop_assert_eq!(position(&d, &bytes), before + n),
                    Err(_) => prop_assert_eq!(position(&d, &bytes), before),
                }
                prop_assert!(d.remaining() <= bytes.len());
                let _ = (u16_at(&bytes, n), u32_at(&bytes, n), u64_at(&bytes, n));
                let _ = u64_at(&bytes, n % 80);
            }
        }
    }
}

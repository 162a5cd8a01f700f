//! `AlignedBuf`: an owned byte buffer whose address and capacity are multiples
//! of an alignment chosen at construction.
//!
//! O_DIRECT requires the memory address, the file offset and the length of
//! every transfer to be multiples of the device's direct-I/O alignment. This
//! type guarantees the address and the capacity; the filled length is free
//! while a caller appends, and [`AlignedBuf::aligned_len`] rounds it up for a
//! transfer ([`AlignedBuf::padded_slice`] zeroes the bytes from `len` to
//! there first, so a padded transfer writes zeros).
//!
//! Invariants: `alignment` is a power of two; `ptr % alignment == 0`;
//! `capacity % alignment == 0`; `len <= capacity`; every byte up to the
//! capacity is initialized (zero at allocation; bytes past `len` hold
//! whatever was there: emptying a buffer does not zero it, which cost a
//! memset of each 1 MiB buffer a writer handed off, 14% of a 100-byte
//! ingest's CPU). The buffer is `Send` and `Sync` (plain owned memory).
//!
//! Mapped buffers of a writer's size are not given back to the kernel when
//! dropped but kept, up to [`POOL_BYTES_MAX`] in all, for the next buffer
//! of the same capacity, zeroed again when taken (see [`Pool`]).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// An owned, aligned, fixed-capacity byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    capacity: usize,
    alignment: usize,
    /// The memory came from mmap (large buffers) rather than the allocator.
    mapped: bool,
}

/// Buffers at least this large are mapped from the kernel (zero pages on
/// demand) instead of allocated and memset: a 128 MiB log read for a flush
/// would otherwise spend most of its time zeroing memory it overwrites.
const MAP_THRESHOLD_BYTES: usize = 1 << 20;
/// The alignment mmap guarantees.
const PAGE_BYTES: usize = 4096;
/// Most bytes of mapped buffers the pool keeps, process-wide.
const POOL_BYTES_MAX: usize = 8 << 20;
/// The largest buffer the pool keeps: a writer's (the log's are 1 MiB);
/// a larger one, e.g. a whole log read back, is unmapped when dropped.
const POOL_BUFFER_BYTES_MAX: usize = 4 << 20;

/// Mapped buffers dropped, kept for the next of the same capacity.
///
/// A fresh mapping costs a page fault per 4 KiB page on its first write,
/// and here (a virtual machine that reports free pages to its host) each
/// fault cost about 8 µs: every log's three 1 MiB writer buffers were 768
/// faults, a quarter of a 100-byte ingest's faults in its writer thread.
/// A kept buffer is zeroed again when taken (`AlignedBuf::with_capacity`:
/// a memset of pages already mapped, tens of microseconds a MiB), so a
/// buffer from the pool is exactly what a fresh mapping is. The pool never
/// holds more than its bound; what does not fit is unmapped, as before.
struct Pool {
    /// (address, capacity) of each mapping kept.
    kept: Vec<(usize, usize)>,
    bytes: usize,
    bytes_max: usize,
}

static POOL: std::sync::Mutex<Pool> = std::sync::Mutex::new(Pool::new(POOL_BYTES_MAX));

impl Pool {
    const fn new(bytes_max: usize) -> Pool {
        Pool {
            kept: Vec::new(),
            bytes: 0,
            bytes_max,
        }
    }

    /// The process's pool (a poisoned lock is taken as it is: the pool's
    /// two fields are updated together, with nothing between that panics).
    fn global() -> std::sync::MutexGuard<'static, Pool> {
        POOL.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The address of a kept mapping of exactly `capacity` bytes, no longer
    /// kept; `None` if there is none.
    fn take(&mut self, capacity: usize) -> Option<usize> {
        let at = self.kept.iter().position(|&(_, c)| c == capacity)?;
        self.bytes -= capacity;
        Some(self.kept.swap_remove(at).0)
    }

    /// Keeps the mapping at `addr` of `capacity` bytes; false (and nothing
    /// kept: the caller unmaps it) when it is too large or the pool full.
    fn keep(&mut self, addr: usize, capacity: usize) -> bool {
        if capacity > POOL_BUFFER_BYTES_MAX || self.bytes + capacity > self.bytes_max {
            return false;
        }
        self.bytes += capacity;
        self.kept.push((addr, capacity));
        true
    }
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads the bytes.
unsafe impl Sync for AlignedBuf {}

/// Rounds `value` up to a multiple of the power-of-two `alignment`.
pub fn align_up(value: u64, alignment: usize) -> u64 {
    debug_assert!(alignment.is_power_of_two());
    let mask = alignment as u64 - 1;
    (value + mask) & !mask
}

/// Rounds `value` down to a multiple of the power-of-two `alignment`.
pub fn align_down(value: u64, alignment: usize) -> u64 {
    debug_assert!(alignment.is_power_of_two());
    value & !(alignment as u64 - 1)
}

/// True when `value` is a multiple of the power-of-two `alignment`.
pub fn is_aligned(value: u64, alignment: usize) -> bool {
    value & (alignment as u64 - 1) == 0
}

impl AlignedBuf {
    /// An empty buffer of at least `capacity_bytes` (rounded up to the
    /// alignment, at least one alignment unit), zero-filled.
    ///
    /// Panics if `alignment` is not a power of two (a programming error:
    /// alignments come from the kernel or from validated options).
    pub fn with_capacity(capacity_bytes: usize, alignment: usize) -> Self {
        assert!(
            alignment.is_power_of_two(),
            "alignment {alignment} is not a power of two"
        );
        let capacity = (align_up(capacity_bytes.max(1) as u64, alignment)) as usize;
        if capacity >= MAP_THRESHOLD_BYTES && alignment <= PAGE_BYTES {
            let kept = Pool::global()
                .take(capacity)
                .and_then(|addr| NonNull::new(addr as *mut u8));
            if let Some(ptr) = kept {
                // SAFETY: a mapping of `capacity` bytes that no buffer owns
                // any more (taken out of the pool under its lock): zeroed,
                // as a fresh mapping is.
                unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, capacity) };
            }
            let mapped = kept.or_else(|| {
                // SAFETY: an anonymous private mapping; checked for failure below.
                let raw = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        capacity,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                (raw != libc::MAP_FAILED)
                    .then(|| NonNull::new(raw as *mut u8))
                    .flatten()
            });
            if let Some(ptr) = mapped {
                return AlignedBuf {
                    ptr,
                    len: 0,
                    capacity,
                    alignment,
                    mapped: true,
                };
            }
            // Fall through to the allocator, which reports exhaustion itself.
        }
        let layout = Layout::from_size_align(capacity, alignment)
            .expect("capacity rounded to a power-of-two alignment is a valid layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf {
            ptr,
            len: 0,
            capacity,
            alignment,
            mapped: false,
        }
    }

    /// A buffer of capacity zero that allocates nothing: a placeholder while
    /// the real buffer is elsewhere (e.g. in flight).
    pub fn empty(alignment: usize) -> Self {
        assert!(
            alignment.is_power_of_two(),
            "alignment {alignment} is not a power of two"
        );
        // An aligned, non-null, never dereferenced address (capacity is zero).
        let ptr = NonNull::new(alignment as *mut u8).expect("alignment is non-zero");
        AlignedBuf {
            ptr,
            len: 0,
            capacity: 0,
            alignment,
            mapped: false,
        }
    }

    /// A buffer of `len` zero bytes (capacity rounded up to the alignment).
    pub fn zeroed(len: usize, alignment: usize) -> Self {
        let mut buf = Self::with_capacity(len, alignment);
        buf.len = len;
        buf
    }

    /// The alignment of the address and the capacity.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Bytes the buffer holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes filled.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that still fit.
    pub fn remaining(&self) -> usize {
        self.capacity - self.len
    }

    /// The filled length rounded up to the alignment: the length of a
    /// padded transfer. Never exceeds the capacity.
    pub fn aligned_len(&self) -> usize {
        align_up(self.len as u64, self.alignment) as usize
    }

    /// The filled bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for capacity bytes, len <= capacity.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The filled bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for capacity bytes, len <= capacity; &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The filled bytes followed by zero padding up to [`Self::aligned_len`]
    /// (zeroed here: less than one alignment unit).
    pub fn padded_slice(&mut self) -> &[u8] {
        let (len, padded) = (self.len, self.aligned_len());
        // SAFETY: len..padded lies within capacity; &mut self is exclusive.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(len), 0, padded - len) };
        // SAFETY: padded <= capacity; every byte is initialized (invariant).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), padded) }
    }

    /// The whole capacity, for a read to fill; follow with [`Self::set_len`].
    pub fn spare_capacity_full(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for capacity bytes; all bytes are initialized (invariant).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Sets the filled length after a read into [`Self::spare_capacity_full`].
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity,
            "set_len {len} beyond capacity {}",
            self.capacity
        );
        self.len = len;
    }

    /// Appends as much of `data` as fits; returns the number of bytes taken.
    pub fn extend_from_slice(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.remaining());
        // SAFETY: len + n <= capacity; source and destination do not overlap
        // (the caller cannot hold a borrow of our spare capacity).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(self.len), n);
        }
        self.len += n;
        n
    }

    /// Empties the buffer (its bytes stay as they were, unread).
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Shortens the filled length to `len` (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Drops the first `n` filled bytes, moving the rest to the front.
    pub fn consume_front(&mut self, n: usize) {
        assert!(n <= self.len, "consume_front {n} beyond len {}", self.len);
        let rest = self.len - n;
        if n > 0 {
            // SAFETY: both ranges lie within capacity; copy handles overlap.
            unsafe { std::ptr::copy(self.ptr.as_ptr().add(n), self.ptr.as_ptr(), rest) };
        }
        self.truncate(rest);
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity == 0 {
            return; // `empty`: nothing was allocated
        }
        if self.mapped {
            if Pool::global().keep(self.ptr.as_ptr() as usize, self.capacity) {
                return;
            }
            // SAFETY: mapped in with_capacity with exactly this length.
            unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.capacity) };
            return;
        }
        let layout = Layout::from_size_align(self.capacity, self.alignment)
            .expect("layout was valid at allocation");
        // SAFETY: allocated with this exact layout in with_capacity.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .field("alignment", &self.alignment)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_and_capacity_are_aligned() {
        for alignment in [512, 4096, 65536] {
            let buf = AlignedBuf::with_capacity(1000, alignment);
            assert_eq!(buf.as_slice().as_ptr() as usize % alignment, 0);
            assert_eq!(buf.capacity() % alignment, 0);
            assert!(buf.capacity() >= 1000);
        }
    }

    #[test]
    fn padding_past_len_reads_as_zero_after_truncate() {
        let mut buf = AlignedBuf::with_capacity(4096, 4096);
        buf.extend_from_slice(&[7u8; 100]);
        buf.truncate(10);
        assert_eq!(buf.padded_slice().len(), 4096);
        assert!(buf.padded_slice()[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn consume_front_keeps_the_tail() {
        let mut buf = AlignedBuf::with_capacity(16, 8);
        buf.extend_from_slice(b"0123456789");
        buf.consume_front(8);
        assert_eq!(buf.as_slice(), b"89");
        assert!(buf.padded_slice()[2..].iter().all(|&b| b == 0));
    }

    /// The pool hands back a mapping of the capacity asked for only, never
    /// holds more than its bound nor a buffer above its largest.
    #[test]
    fn the_pool_keeps_within_its_bound_and_takes_by_capacity() {
        let mut pool = Pool::new(3 << 20);
        assert!(
            !pool.keep(0x1000, POOL_BUFFER_BYTES_MAX + 4096),
            "too large"
        );
        assert!(pool.keep(0x1000, 1 << 20));
        assert!(pool.keep(0x200000, 2 << 20));
        assert!(!pool.keep(0x900000, 1 << 20), "full");
        assert_eq!(pool.bytes, 3 << 20);
        assert_eq!(pool.take(3 << 20), None);
        assert_eq!(pool.take(2 << 20), Some(0x200000));
        assert_eq!(pool.take(2 << 20), None);
        assert!(pool.keep(0x900000, 1 << 20));
        let mut taken = [pool.take(1 << 20), pool.take(1 << 20)];
        taken.sort();
        assert_eq!(taken, [Some(0x1000), Some(0x900000)]);
        assert_eq!((pool.bytes, pool.take(1 << 20)), (0, None));
    }

    /// A buffer of a size the pool keeps is zero when taken, whether it is
    /// a kept one that held other bytes or a fresh mapping (other tests
    /// share the process's pool, so which one it is cannot be known here).
    #[test]
    fn a_kept_mapping_comes_back_zeroed() {
        let capacity = (1 << 20) + 7 * 4096;
        for _ in 0..4 {
            let mut bufs: Vec<AlignedBuf> = (0..3)
                .map(|_| AlignedBuf::with_capacity(capacity, 4096))
                .collect();
            for buf in &mut bufs {
                assert!(buf.mapped);
                assert!(buf.spare_capacity_full().iter().all(|&b| b == 0));
                buf.extend_from_slice(&vec![0xA5; capacity]);
            }
        }
    }

    #[test]
    fn large_buffers_are_mapped_zeroed_and_aligned() {
        let mut buf = AlignedBuf::zeroed(3 << 20, 4096);
        assert!(buf.mapped);
        assert_eq!(buf.as_slice().as_ptr() as usize % 4096, 0);
        assert!(buf.iter().all(|&b| b == 0));
        buf[12345] = 9;
        buf.truncate(100);
        assert!(buf.padded_slice()[..4096].iter().skip(100).all(|&b| b == 0));
    }

    #[test]
    fn extend_stops_at_capacity() {
        let mut buf = AlignedBuf::with_capacity(8, 8);
        assert_eq!(buf.extend_from_slice(&[1u8; 20]), 8);
        assert_eq!(buf.remaining(), 0);
    }
}

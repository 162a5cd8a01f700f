//! BufferedWriter on real files, in every io mode and engine: content equals
//! what was written, every write that reached the file was aligned, sync makes
//! everything durable and writing on after a sync rewrites the tail block, and
//! a failing write surfaces as an error with nothing later reported written.

use proptest::prelude::*;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata::io::{
    is_aligned, AlignedBuf, BlockFile, BufferedWriter, FileOptions, IoEngine, IoFile, IoMode,
    IoStats, SharedBytes, ShutdownMode,
};
use strata::{Error, Result};

fn test_dir() -> tempfile::TempDir {
    // Under target/: the project disk, which supports O_DIRECT (tmpfs does not).
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

fn open(path: &Path, mode: IoMode, engine: IoEngine) -> IoFile {
    let opts = FileOptions {
        mode,
        engine,
        ..FileOptions::default()
    };
    IoFile::create(path, &opts, &IoStats::new()).expect("create")
}

/// An open-or-shut gate: writes through a `Recording` that has one wait
/// until it is open.
type Gate = Arc<(Mutex<bool>, std::sync::Condvar)>;

/// Records every write that reaches the file, and fails the Nth one if
/// asked; with a gate, each write first waits for it to open.
struct Recording {
    inner: IoFile,
    writes: Mutex<Vec<(u64, usize, usize)>>,
    fail_write_n: Option<usize>,
    write_count: AtomicUsize,
    gate: Option<Gate>,
}

impl Recording {
    fn new(inner: IoFile, fail_write_n: Option<usize>) -> Self {
        Recording {
            inner,
            writes: Mutex::new(Vec::new()),
            fail_write_n,
            write_count: AtomicUsize::new(0),
            gate: None,
        }
    }
}

/// A direct-I/O `Recording` of a new file at `path` whose writes wait
/// for the gate it comes with, shut until [`open_gate`].
fn gated(path: &Path) -> (Recording, Gate) {
    let gate: Gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let file = Recording {
        gate: Some(Arc::clone(&gate)),
        ..Recording::new(open(path, IoMode::DirectRw, IoEngine::Sync), None)
    };
    (file, gate)
}

/// Lets every write waiting at `gate` go on, and every later one.
fn open_gate(gate: &Gate) {
    let (open, cv) = &**gate;
    *open.lock().unwrap() = true;
    cv.notify_all();
}

impl BlockFile for Recording {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if let Some(gate) = &self.gate {
            let (open, cv) = &**gate;
            let _open = cv.wait_while(open.lock().unwrap(), |open| !*open).unwrap();
        }
        let n = self.write_count.fetch_add(1, Ordering::SeqCst) + 1;
        if Some(n) == self.fail_write_n {
            return Err(Error::io(
                "recording",
                "write",
                std::io::Error::other("injected write failure"),
            ));
        }
        self.writes
            .lock()
            .unwrap()
            .push((offset, buf.len(), buf.as_ptr() as usize));
        self.inner.write_all_at(buf, offset)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn sync_data(&self) -> Result<()> {
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> Result<()> {
        self.inner.set_len(len)
    }
    fn alignment(&self) -> usize {
        self.inner.alignment()
    }
    fn direct_writes(&self) -> bool {
        self.inner.mode().direct_writes()
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn assert_all_aligned(rec: &Recording, check_addr: bool) {
    let a = rec.alignment();
    for &(offset, len, addr) in rec.writes.lock().unwrap().iter() {
        assert!(is_aligned(offset, a), "write at unaligned offset {offset}");
        assert!(is_aligned(len as u64, a), "write of unaligned length {len}");
        if check_addr {
            assert!(
                is_aligned(addr as u64, a),
                "write from unaligned address {addr:#x}"
            );
        }
    }
}

const MODES: [(IoMode, IoEngine); 6] = [
    (IoMode::Buffered, IoEngine::Sync),
    (IoMode::Buffered, IoEngine::IoUring),
    (IoMode::Direct, IoEngine::Sync),
    (IoMode::Direct, IoEngine::IoUring),
    (IoMode::DirectRw, IoEngine::Sync),
    (IoMode::DirectRw, IoEngine::IoUring),
];

fn run_sequence(
    mode: IoMode,
    engine: IoEngine,
    sizes: &[usize],
    capacity: usize,
    buffers: usize,
    syncs: &[bool],
    shutdown: ShutdownMode,
) {
    let dir = test_dir();
    let path = dir.path().join("f");
    let rec = Recording::new(open(&path, mode, engine), None);
    let mut w = BufferedWriter::with_buffers(Arc::new(rec), capacity, buffers, 0).unwrap();
    let mut expected = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let data = pattern(i as u64, size);
        w.write(&data).unwrap();
        expected.extend_from_slice(&data);
        assert_eq!(w.end_offset(), expected.len() as u64);
        if syncs.get(i).copied().unwrap_or(false) {
            w.sync().unwrap();
            let on_disk = std::fs::read(&path).unwrap();
            assert!(
                on_disk.len() >= expected.len(),
                "after sync the file holds everything written"
            );
            assert_eq!(
                &on_disk[..expected.len()],
                &expected[..],
                "content after sync"
            );
        }
    }
    let rec = w.finish(shutdown).unwrap();
    assert_all_aligned(&rec, mode.direct_writes());
    let on_disk = std::fs::read(&path).unwrap();
    let a = rec.alignment();
    match shutdown {
        ShutdownMode::PadThenTruncate => assert_eq!(on_disk, expected),
        ShutdownMode::ZeroPadToAlignment => {
            assert_eq!(
                on_disk.len() as u64,
                strata::io::align_up(expected.len() as u64, a)
            );
            assert_eq!(&on_disk[..expected.len()], &expected[..]);
            assert!(on_disk[expected.len()..].iter().all(|&b| b == 0));
        }
        ShutdownMode::DropTail => {
            let whole = strata::io::align_down(expected.len() as u64, a) as usize;
            assert!(on_disk.len() >= whole);
            assert_eq!(&on_disk[..whole], &expected[..whole]);
        }
    }
}

fn size_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..200,
        3 => 200usize..9000,
        2 => 9000usize..70_000,
        1 => 70_000usize..300_000,
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn file_equals_concatenation_and_every_write_is_aligned(
        sizes in prop::collection::vec(size_strategy(), 1..40),
        syncs in prop::collection::vec(prop::bool::weighted(0.2), 40),
        capacity in prop_oneof![Just(4096usize), Just(8192), Just(65536)],
        buffers in 2usize..=4,
        shutdown in prop_oneof![Just(ShutdownMode::PadThenTruncate), Just(ShutdownMode::ZeroPadToAlignment), Just(ShutdownMode::DropTail)],
    ) {
        for (mode, engine) in MODES {
            run_sequence(mode, engine, &sizes, capacity, buffers, &syncs, shutdown);
        }
    }
}

#[test]
fn large_aligned_writes_bypass_the_buffer() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let rec = Recording::new(open(&path, IoMode::DirectRw, IoEngine::Sync), None);
    let a = rec.alignment();
    let mut w = BufferedWriter::new(rec, 4 * a, 0).unwrap();
    w.write(&[1u8; 10]).unwrap();
    let mut big = strata::io::AlignedBuf::zeroed(64 * a, a);
    big.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    // Offset 10 + (a - 10) head reaches alignment; the middle starts at big[a-10], aligned in
    // memory only if big's address + a - 10 is aligned: write from an offset slice so it is.
    let src = &big[10..];
    w.write(src).unwrap();
    let rec = w.finish(ShutdownMode::PadThenTruncate).unwrap();
    let writes = rec.writes.lock().unwrap().clone();
    assert!(
        writes.iter().any(|&(_, len, _)| len >= 32 * a),
        "a large write went straight to the file: {writes:?}"
    );
    let mut expected = vec![1u8; 10];
    expected.extend_from_slice(src);
    assert_eq!(std::fs::read(&path).unwrap(), expected);
}

#[test]
fn a_buffer_is_written_in_the_requests_its_steps_give() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let rec = Recording::new(open(&path, IoMode::DirectRw, IoEngine::Sync), None);
    let a = rec.alignment();
    let mut w = BufferedWriter::new(rec, 16 * a, 0).unwrap();
    // Two alignments per request, then four, then one alignment minus one
    // (rounded down to nothing: one alignment), in turn.
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let turn = std::sync::Arc::clone(&asked);
    w.set_write_steps(std::sync::Arc::new(move || {
        [2 * a, 4 * a, a - 1][turn.fetch_add(1, Ordering::SeqCst) % 3]
    }));
    let data = pattern(7, 40 * a);
    for chunk in data.chunks(3 * a + 5) {
        w.write(chunk).unwrap();
    }
    let rec = w.finish(ShutdownMode::PadThenTruncate).unwrap();
    assert_all_aligned(&rec, true);
    let writes = rec.writes.lock().unwrap().clone();
    // The full buffers (16 alignments each) went out in steps: none larger
    // than four alignments, every size the steps gave.
    assert!(asked.load(Ordering::SeqCst) >= 2 * 16 / 4, "{writes:?}");
    assert!(writes.iter().all(|&(_, len, _)| len <= 4 * a), "{writes:?}");
    for size in [a, 2 * a, 4 * a] {
        assert!(
            writes.iter().any(|&(_, len, _)| len == size),
            "{size}: {writes:?}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

#[test]
fn writing_after_sync_rewrites_the_tail_block() {
    for (mode, engine) in MODES {
        let dir = test_dir();
        let path = dir.path().join("f");
        let rec = Recording::new(open(&path, mode, engine), None);
        let a = rec.alignment();
        let mut w = BufferedWriter::new(rec, 16 * a, 0).unwrap();
        w.write(&vec![b'x'; a + 100]).unwrap();
        w.sync().unwrap();
        assert_eq!(
            &std::fs::read(&path).unwrap()[..a + 100],
            &vec![b'x'; a + 100][..]
        );
        w.write(&[b'y'; 50]).unwrap();
        w.sync().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), 2 * a, "tail block padded");
        assert_eq!(&on_disk[a..a + 100], &vec![b'x'; 100][..]);
        assert_eq!(&on_disk[a + 100..a + 150], &[b'y'; 50][..]);
        assert!(on_disk[a + 150..].iter().all(|&b| b == 0));
        let rec = w.finish(ShutdownMode::PadThenTruncate).unwrap();
        // The second sync wrote only the tail block, at offset a, rewriting it.
        let writes = rec.writes.lock().unwrap().clone();
        assert_eq!(
            writes.last().map(|w| (w.0, w.1)),
            Some((a as u64, a)),
            "{writes:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap().len(), a + 150);
    }
}

/// Bytes shared with the writer are written from where they lie, with the
/// tail a sync kept replaced by their first block; the file is what copied
/// writes would have made it. Shared bytes that do not continue what the
/// writer holds, or are not whole blocks, are refused, and the writer is
/// failed from then on.
#[test]
fn shared_bytes_are_written_as_they_are() {
    for (mode, engine) in MODES {
        let dir = test_dir();
        let path = dir.path().join("f");
        let rec = Recording::new(open(&path, mode, engine), None);
        let a = rec.alignment();
        let mut w = BufferedWriter::with_buffers(Arc::new(rec), 4 * a, 2, 0).unwrap();
        let all = pattern(7, 9 * a + 300);
        w.write(&all[..a + 100]).unwrap();
        w.sync().unwrap();
        // From the block the writer is in (offset a), its 100 bytes first.
        for (from, to) in [(a, 3 * a), (3 * a, 9 * a)] {
            let mut buf = AlignedBuf::with_capacity(to - from, a);
            buf.extend_from_slice(&all[from..to]);
            let buf: SharedBytes = Arc::new(buf);
            w.write_shared(buf).unwrap();
        }
        assert_eq!(w.end_offset(), 9 * a as u64);
        w.write(&all[9 * a..]).unwrap();
        assert!(
            w.read_range(0, all.len()).unwrap() == all,
            "{mode:?} {engine:?}"
        );
        w.sync().unwrap();
        let on_disk = std::fs::read(&path).unwrap();
        assert!(on_disk[..all.len()] == all[..], "{mode:?} {engine:?}");
        let rec = w.file().clone();
        let writes = rec.writes.lock().unwrap().clone();
        assert!(
            writes.iter().any(|w| (w.0, w.1) == (a as u64, 2 * a))
                && writes.iter().any(|w| (w.0, w.1) == (3 * a as u64, 6 * a)),
            "each shared buffer in one write of its own: {writes:?}"
        );
        assert_all_aligned(&rec, mode.direct_writes());
        // Not the writer's next bytes (its tail is 300 bytes of `all`).
        let mut wrong = AlignedBuf::with_capacity(a, a);
        wrong.extend_from_slice(&vec![0xee; a]);
        let err = w
            .write_shared(Arc::new(wrong))
            .expect_err("not the writer's bytes");
        assert!(matches!(err, Error::Internal(_)), "{err}");
        assert!(w.write(b"x").is_err(), "failed from then on");
    }
    let dir = test_dir();
    let rec = Recording::new(
        open(&dir.path().join("g"), IoMode::DirectRw, IoEngine::Sync),
        None,
    );
    let a = rec.alignment();
    let mut w = BufferedWriter::new(rec, 4 * a, 0).unwrap();
    let mut short = AlignedBuf::with_capacity(a, a);
    short.extend_from_slice(&vec![1; a - 1]);
    assert!(w.write_shared(Arc::new(short)).is_err(), "not whole blocks");
}

#[test]
fn writer_can_start_at_an_unaligned_offset_of_an_existing_file() {
    for (mode, engine) in MODES {
        let dir = test_dir();
        let path = dir.path().join("f");
        let mut w = BufferedWriter::new(open(&path, mode, engine), 8192, 0).unwrap();
        w.write(&pattern(1, 5000)).unwrap();
        w.finish(ShutdownMode::PadThenTruncate).unwrap();
        let opts = FileOptions {
            mode,
            engine,
            ..FileOptions::default()
        };
        let file = IoFile::open(&path, &opts, &IoStats::new()).unwrap();
        let mut w = BufferedWriter::new(file, 8192, 5000).unwrap();
        w.write(&pattern(2, 7000)).unwrap();
        assert_eq!(
            w.read_range(4990, 20).unwrap(),
            [&pattern(1, 5000)[4990..], &pattern(2, 10)[..]].concat()
        );
        w.finish(ShutdownMode::PadThenTruncate).unwrap();
        let mut expected = pattern(1, 5000);
        expected.extend_from_slice(&pattern(2, 7000));
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}

#[test]
fn read_range_sees_file_flight_and_buffer() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let mut w =
        BufferedWriter::new(open(&path, IoMode::DirectRw, IoEngine::IoUring), 4096, 0).unwrap();
    let data = pattern(9, 50_000);
    for chunk in data.chunks(777) {
        w.write(chunk).unwrap();
    }
    for (off, len) in [
        (0usize, 10usize),
        (4000, 200),
        (12_345, 20_000),
        (49_000, 1000),
        (0, 50_000),
    ] {
        assert_eq!(
            w.read_range(off as u64, len).unwrap(),
            &data[off..off + len]
        );
    }
    assert!(
        w.read_range(49_999, 2).is_err(),
        "reading past the end is an error"
    );
}

#[test]
fn failed_write_surfaces_and_nothing_later_is_reported_written() {
    for fail_at in 1..6 {
        let dir = test_dir();
        let path = dir.path().join("f");
        let rec = Recording::new(open(&path, IoMode::DirectRw, IoEngine::Sync), Some(fail_at));
        let mut w = BufferedWriter::new(rec, 4096, 0).unwrap();
        let mut first_error = None;
        for i in 0..200 {
            match w.write(&pattern(i, 1000)) {
                Ok(()) => {}
                Err(e) => {
                    first_error = Some(i);
                    assert!(
                        e.to_string().contains("injected") || matches!(e, Error::Poisoned(_)),
                        "{e}"
                    );
                    break;
                }
            }
        }
        assert!(
            first_error.is_some(),
            "the injected failure surfaced on a write"
        );
        assert!(
            w.write(b"more").is_err(),
            "the writer refuses writes after a failure"
        );
        assert!(w.sync().is_err(), "sync after a failure is an error");
        assert!(w.finish(ShutdownMode::PadThenTruncate).is_err());
    }
}

#[test]
fn no_write_reaches_the_file_after_a_failed_one() {
    // Buffers of 4 KiB, written one after another: the flusher must not
    // write the buffer queued behind a failed one, or the file gets a hole
    // of zeros below data (issue 9, defect 4).
    for fail_at in 1..5 {
        let dir = test_dir();
        let path = dir.path().join("f");
        let rec = Recording::new(open(&path, IoMode::DirectRw, IoEngine::Sync), Some(fail_at));
        let mut w = BufferedWriter::new(rec, 4096, 0).unwrap();
        for i in 0..256 {
            if w.write(&pattern(i, 1000)).is_err() {
                break;
            }
        }
        drop(w.finish(ShutdownMode::PadThenTruncate));
        let bytes = std::fs::read(&path).unwrap();
        let len = bytes.len();
        let holes = bytes
            .chunks(4096)
            .position(|block| block.iter().all(|&b| b == 0));
        if let Some(hole) = holes {
            assert!(
                bytes[hole * 4096..].iter().all(|&b| b == 0),
                "fail_at {fail_at}: data after a hole at block {hole} of {len} bytes"
            );
        }
    }
}

#[test]
fn failed_sync_write_is_reported_by_sync() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let rec = Recording::new(open(&path, IoMode::DirectRw, IoEngine::Sync), Some(1));
    let mut w = BufferedWriter::new(rec, 65536, 0).unwrap();
    w.write(b"hello").unwrap();
    let err = w.sync().unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert!(w.write(b"x").is_err());
}

#[test]
fn direct_io_on_tmpfs_is_refused_or_falls_back() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let path = dir.path().join("f");
    let opts = FileOptions {
        mode: IoMode::DirectRw,
        ..FileOptions::default()
    };
    match IoFile::create(&path, &opts, &IoStats::new()) {
        Err(Error::DirectIoUnsupported { .. }) => {
            let opts = FileOptions {
                fallback_to_buffered: true,
                ..opts
            };
            let f = IoFile::create(&path, &opts, &IoStats::new()).unwrap();
            assert_eq!(f.mode(), IoMode::Buffered);
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(f) => assert_eq!(f.mode(), IoMode::DirectRw, "this tmpfs accepts O_DIRECT"),
    }
}

#[test]
fn unaligned_direct_write_is_an_error_not_a_panic() {
    let dir = test_dir();
    let f = open(&dir.path().join("f"), IoMode::DirectRw, IoEngine::Sync);
    let err = f.write_all_at(b"abc", 0).unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err}");
}

#[test]
fn stats_count_operations_by_class() {
    let dir = test_dir();
    let stats = IoStats::new();
    let opts = FileOptions {
        class: strata::io::FileClass::Log,
        ..FileOptions::default()
    };
    let f = IoFile::create(dir.path().join("f"), &opts, &stats).unwrap();
    let mut w = BufferedWriter::new(f, 8192, 0).unwrap();
    w.write(&[0u8; 20_000]).unwrap();
    w.sync().unwrap();
    let snap = stats.snapshot();
    use strata::io::{FileClass, OpKind};
    assert!(snap.bytes(FileClass::Log, OpKind::Write) >= 20_000);
    assert_eq!(snap.ops(FileClass::Log, OpKind::Sync), 1);
    assert_eq!(snap.ops(FileClass::Delta, OpKind::Write), 0);
    let _ = Arc::new(0);
}

#[test]
fn alignment_comes_from_the_kernel_or_defaults_to_4096() {
    let dir = test_dir();
    let f = open(&dir.path().join("f"), IoMode::DirectRw, IoEngine::Sync);
    eprintln!(
        "alignment reported for {}: {}",
        dir.path().display(),
        f.alignment()
    );
    assert!(f.alignment().is_power_of_two() && f.alignment() >= 512);
    let opts = FileOptions {
        alignment_bytes: Some(3000),
        ..FileOptions::default()
    };
    assert!(
        IoFile::create(dir.path().join("g"), &opts, &IoStats::new()).is_err(),
        "non-power-of-two override"
    );
    let opts = FileOptions {
        alignment_bytes: Some(65536),
        ..FileOptions::default()
    };
    assert_eq!(
        IoFile::create(dir.path().join("h"), &opts, &IoStats::new())
            .unwrap()
            .alignment(),
        65536
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, .. ProptestConfig::default() })]

    /// Reads interleaved with writes see exactly what was written, whether
    /// the bytes are in the file, in a buffer the flusher is writing, or in
    /// the buffer being filled.
    #[test]
    fn reads_during_writes_see_what_was_written(
        steps in prop::collection::vec((size_strategy(), any::<u64>(), 1usize..3000, prop::bool::weighted(0.1)), 1..60),
        engine in prop_oneof![Just(IoEngine::Sync), Just(IoEngine::IoUring)],
        buffers in 2usize..=4,
    ) {
        let dir = test_dir();
        let file = Arc::new(open(&dir.path().join("f"), IoMode::DirectRw, engine));
        let mut w = BufferedWriter::with_buffers(file, 8192, buffers, 0).unwrap();
        let mut model = Vec::new();
        for (i, (size, at, len, sync)) in steps.into_iter().enumerate() {
            let data = pattern(i as u64, size);
            w.write(&data).unwrap();
            model.extend_from_slice(&data);
            if sync {
                w.sync().unwrap();
            }
            if !model.is_empty() {
                let off = (at % model.len() as u64) as usize;
                let len = len.min(model.len() - off);
                prop_assert_eq!(w.read_range(off as u64, len).unwrap(), &model[off..off + len]);
            }
        }
        let file = w.finish(ShutdownMode::PadThenTruncate).unwrap();
        drop(file);
        prop_assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), model);
    }
}

/// A writer takes 2 to `WRITER_BUFFERS_MAX` buffers; other counts are a
/// typed error, and nothing is written.
#[test]
fn a_buffer_count_out_of_range_is_refused() {
    let dir = test_dir();
    let path = dir.path().join("f");
    for buffers in [0, 1, strata::io::WRITER_BUFFERS_MAX + 1] {
        let file = Arc::new(open(&path, IoMode::DirectRw, IoEngine::Sync));
        match BufferedWriter::with_buffers(file, 8192, buffers, 0) {
            Err(Error::InvalidInput(e)) => {
                assert!(e.to_string().contains("writer buffers"), "{buffers}: {e}")
            }
            other => panic!("{buffers} buffers: {:?}", other.map(|_| ())),
        }
    }
    let file = Arc::new(open(&path, IoMode::DirectRw, IoEngine::Sync));
    let w = BufferedWriter::with_buffers(file, 8192, strata::io::WRITER_BUFFERS_MAX, 0).unwrap();
    w.finish(ShutdownMode::PadThenTruncate).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

/// With `n` buffers, `n - 1` full ones are handed to the flusher without
/// waiting for its writes (here held back until the end): the appender
/// goes on while they are in flight; the next hand-off waits. Then every
/// byte reaches the file.
#[test]
fn hand_offs_wait_only_when_every_spare_buffer_is_in_flight() {
    for buffers in [2usize, 3, 4] {
        let dir = test_dir();
        let path = dir.path().join("f");
        let (file, gate) = gated(&path);
        let cap = file.alignment();
        let mut w = BufferedWriter::with_buffers(Arc::new(file), cap, buffers, 0).unwrap();
        let data = pattern(buffers as u64, buffers * cap + 1);
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            // A buffer is handed off as it fills: chunk i fills buffer i.
            for (i, chunk) in data.chunks(cap).enumerate() {
                w.write(chunk).unwrap();
                tx.send(i).unwrap();
            }
            (w, data)
        });
        // Chunks 0 ..= buffers - 2 get through (buffers - 1 hand-offs);
        // the next one's hand-off waits for a write. (Seen first, checked
        // after the gate opens: a writer dropped with writes held back
        // would wait for them for ever.)
        let through: Vec<_> = (0..buffers - 1)
            .map(|_| rx.recv_timeout(std::time::Duration::from_secs(30)))
            .collect();
        let waited = rx.recv_timeout(std::time::Duration::from_millis(300));
        open_gate(&gate);
        let expected: Vec<_> = (0..buffers - 1).map(Ok).collect();
        assert_eq!(through, expected, "{buffers} buffers: a hand-off waited");
        assert!(
            waited.is_err(),
            "{buffers} buffers: a hand-off went on with no spare buffer"
        );
        let (w, data) = writer.join().unwrap();
        w.finish(ShutdownMode::PadThenTruncate).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data, "{buffers} buffers");
    }
}

/// Shared bytes in flight give no buffer back when written: a hand-off
/// of the writer's own that finds no spare buffer waits past them for one
/// of its own, and does not take their completion for a free buffer.
#[test]
fn a_hand_off_after_shared_bytes_waits_for_a_buffer_of_its_own() {
    let dir = test_dir();
    let path = dir.path().join("f");
    let (file, gate) = gated(&path);
    let a = file.alignment();
    let mut w = BufferedWriter::with_buffers(Arc::new(file), a, 2, 0).unwrap();
    let data = pattern(11, 4 * a + 7);
    let writer = std::thread::spawn(move || {
        let mut shared = AlignedBuf::with_capacity(a, a);
        shared.extend_from_slice(&data[..a]);
        w.write_shared(Arc::new(shared))?;
        // Three buffers of its own after it, with two buffers: the third
        // hand-off finds every buffer in flight behind the shared bytes.
        w.write(&data[a..])?;
        w.finish(ShutdownMode::PadThenTruncate)?;
        Ok::<_, Error>(data)
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    open_gate(&gate);
    let data = writer.join().unwrap().expect("the writes go on");
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

/// A large read goes to the device in steps of at most
/// `BACKGROUND_IO_BYTES_MAX` (a foreground read queued behind one request
/// waits for all of it), and returns the same bytes.
#[test]
fn a_large_read_is_made_in_bounded_steps() {
    let d = test_dir();
    let path = d.path().join("large");
    for mode in [IoMode::DirectRw, IoMode::Buffered] {
        let stats = IoStats::new();
        let opts = FileOptions {
            mode,
            ..FileOptions::default()
        };
        let f = IoFile::create(&path, &opts, &stats).expect("create");
        let len = 10 * strata::io::BACKGROUND_IO_BYTES_MAX + 5000;
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut w = BufferedWriter::new(f, 1 << 20, 0).expect("writer");
        w.write(&bytes).expect("write");
        let f = w.finish(ShutdownMode::PadThenTruncate).expect("finish");
        let before = stats.snapshot().ops_total(strata::io::OpKind::Read);
        assert_eq!(f.read_range(100, len - 100).expect("read"), bytes[100..]);
        let reads = stats.snapshot().ops_total(strata::io::OpKind::Read) - before;
        if mode.direct_reads() {
            assert_eq!(reads, 11, "{mode:?}: {reads} reads for {len} bytes");
        }
    }
}

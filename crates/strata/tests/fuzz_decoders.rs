//! Fuzzing of every on-disk decoder on the stable toolchain: the same target
//! functions as the cargo-fuzz targets (`strata::fuzzing`), driven by a seeded
//! mutator instead of libFuzzer.
//!
//! For each target: every valid seed (from the engine's writers) and every
//! committed regression input (`crates/strata/fuzz/seeds/<target>/`) runs as
//! is; then a fixed number of inputs, each a seed mutated by bit flips, byte
//! sets, truncations, length-field overwrites with huge values, arithmetic on
//! fields, splices and range copies, with the checksums recomputed half of
//! the time so that mutations reach the checks behind them.
//!
//! A finding fails the test: a panic (a property violation or a decoder bug;
//! the input is saved under the test's temporary directory), an allocation
//! larger than `ALLOCATION_BYTES_MAX` (the capped global allocator aborts the
//! run after naming the case), or a case running longer than
//! `CASE_SECONDS_MAX` (the watchdog aborts the run after naming the case).
//!
//! Every case is reproducible on its own from (seed, target, case number).
//! Environment: `STRATA_FUZZ_ITERATIONS` (cases per target, default
//! `ITERATIONS_DEFAULT`), `STRATA_FUZZ_SEED` (default `SEED_DEFAULT`),
//! `STRATA_FUZZ_DUMP=<target>:<case>` (write that case's input to a file
//! instead of running the target).
//!
//! Run: `cargo test -p strata --features fuzzing --test fuzz_decoders`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use strata::fuzzing::Target;

/// Largest single allocation a decoder may make here. Inputs are at most
/// `INPUT_BYTES_MAX`; the largest legitimate allocation is a re-encoding
/// writer's block buffer at the format's largest block target (16 MiB).
const ALLOCATION_BYTES_MAX: usize = 64 << 20;
/// Longest input a mutation may produce.
const INPUT_BYTES_MAX: usize = 64 << 10;
/// Mutated cases per target.
const ITERATIONS_DEFAULT: u64 = 200_000;
/// Seed of the mutation RNG.
const SEED_DEFAULT: u64 = 0x5354_5241_5441_465a;
/// Longest one case may run before the watchdog calls it an infinite loop.
const CASE_SECONDS_MAX: u64 = 10;
/// Most mutations stacked on one input.
const MUTATIONS_PER_CASE_MAX: u64 = 4;

// ---------------------------------------------------------------------------
// Allocation cap.

/// The system allocator, refusing any single allocation above
/// `ALLOCATION_BYTES_MAX` after naming the running case on stderr.
struct CappedAlloc;

#[global_allocator]
static ALLOCATOR: CappedAlloc = CappedAlloc;

thread_local! {
    /// The case this thread runs: (index in `Target::ALL` + 1, case number); 0 when none.
    static CASE: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

// SAFETY: every method forwards to `System` unchanged, or returns null
// (allocation failure), which `GlobalAlloc` allows.
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_BYTES_MAX {
            report_oversized_allocation(layout.size());
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOCATION_BYTES_MAX {
            report_oversized_allocation(layout.size());
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOCATION_BYTES_MAX {
            report_oversized_allocation(new_size);
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

/// Names the running case on stderr without allocating; the caller then
/// fails the allocation and the runtime aborts the test binary.
fn report_oversized_allocation(size: usize) {
    let (target, case) = CASE.try_with(Cell::get).unwrap_or((0, 0));
    let mut line = [0u8; 256];
    let mut len = 0;
    let mut push = |bytes: &[u8]| {
        let n = bytes.len().min(line.len() - len);
        line[len..len + n].copy_from_slice(&bytes[..n]);
        len += n;
    };
    push(b"\nfuzz_decoders: FINDING: an allocation of ");
    push(decimal(size as u64, &mut [0; 20]));
    push(b" bytes (more than ALLOCATION_BYTES_MAX) in target ");
    match target.checked_sub(1).and_then(|i| Target::ALL.get(i)) {
        Some(t) => push(t.name().as_bytes()),
        None => push(b"(none)"),
    }
    push(b", case ");
    push(decimal(case, &mut [0; 20]));
    push(b"; STRATA_FUZZ_DUMP=<target>:<case> writes the input\n");
    // SAFETY: writes `len` initialized bytes of `line` to stderr.
    unsafe { libc::write(2, line.as_ptr().cast(), len) };
}

fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

// ---------------------------------------------------------------------------
// Randomness: SplitMix64, one stream per case.

struct Rng(u64);

impl Rng {
    fn for_case(seed: u64, target: Target, case: u64) -> Rng {
        let name_hash = target
            .name()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        Rng(seed ^ name_hash ^ case.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`; 0 when `n` is 0.
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

// ---------------------------------------------------------------------------
// Mutations.

/// Values that break length and count fields: zero, one, sign and width
/// boundaries, the format's limits, and huge ones (2^60 must not allocate 2^60 bytes).
const INTERESTING: [u64; 20] = [
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    4096,
    4097,
    0x7fff,
    0xffff,
    0x1_0000,
    64 << 20,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    1 << 32,
    1 << 60,
    i64::MAX as u64,
    u64::MAX,
];

/// An offset to mutate: half of the time in the first 64 bytes, where the
/// prefixes and headers with their length fields are.
fn pick_offset(rng: &mut Rng, len: usize) -> usize {
    if rng.chance(2) {
        rng.below(len.min(64))
    } else {
        rng.below(len)
    }
}

fn write_int(data: &mut [u8], at: usize, width: usize, value: u64) {
    let bytes = value.to_le_bytes();
    let n = width.min(data.len().saturating_sub(at));
    data[at..at + n].copy_from_slice(&bytes[..n]);
}

fn read_int(data: &[u8], at: usize, width: usize) -> u64 {
    let mut bytes = [0u8; 8];
    let n = width.min(data.len().saturating_sub(at));
    bytes[..n].copy_from_slice(&data[at..at + n]);
    u64::from_le_bytes(bytes)
}

fn mutate_once(rng: &mut Rng, data: &mut Vec<u8>, corpus: &[(String, Vec<u8>)]) {
    let len = data.len();
    let other = &corpus[rng.below(corpus.len())].1;
    match rng.below(10) {
        // Flip a bit.
        0 if len > 0 => {
            let at = pick_offset(rng, len);
            data[at] ^= 1 << rng.below(8);
        }
        // Set a byte.
        1 if len > 0 => {
            let at = pick_offset(rng, len);
            data[at] = [0, 1, 0x7f, 0x80, 0xff, rng.next() as u8][rng.below(6)];
        }
        // Truncate.
        2 => data.truncate(rng.below(len + 1)),
        // Overwrite a length field with an interesting value.
        3 | 4 if len > 0 => {
            let at = pick_offset(rng, len);
            let width = [2, 4, 8][rng.below(3)];
            let value = match rng.below(4) {
                0 => len as u64 + rng.below(3) as u64 - 1,
                _ => INTERESTING[rng.below(INTERESTING.len())],
            };
            write_int(data, at, width, value);
        }
        // Add to or subtract from a field.
        5 if len > 0 => {
            let at = pick_offset(rng, len);
            let width = [1, 2, 4, 8][rng.below(4)];
            let delta = 1 + rng.below(16) as u64;
            let value = read_int(data, at, width);
            let value = if rng.chance(2) {
                value.wrapping_add(delta)
            } else {
                value.wrapping_sub(delta)
            };
            write_int(data, at, width, value);
        }
        // Splice: this input's head, another's tail.
        6 => {
            let head = rng.below(len + 1);
            let tail = rng.below(other.len() + 1);
            data.truncate(head);
            data.extend_from_slice(&other[tail..]);
        }
        // Insert a chunk of another input.
        7 => {
            let start = rng.below(other.len() + 1);
            let end = start + rng.below(other.len() - start + 1);
            let at = rng.below(len + 1);
            data.splice(at..at, other[start..end].iter().copied());
        }
        // Delete a range.
        8 if len > 0 => {
            let start = rng.below(len);
            let end = start + 1 + rng.below((len - start).min(64));
            data.drain(start..end);
        }
        // Duplicate a range of this input.
        _ if len > 0 => {
            let start = rng.below(len);
            let end = start + 1 + rng.below((len - start).min(256));
            let chunk = data[start..end].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, chunk);
        }
        _ => data.extend_from_slice(&other[..other.len().min(64)]),
    }
}

fn mutated_case(rng: &mut Rng, target: Target, corpus: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut data = corpus[rng.below(corpus.len())].1.clone();
    for _ in 0..1 + rng.below(MUTATIONS_PER_CASE_MAX as usize) {
        mutate_once(rng, &mut data, corpus);
    }
    data.truncate(INPUT_BYTES_MAX);
    if rng.chance(2) {
        target.fix_checksums(&mut data);
    }
    data
}

// ---------------------------------------------------------------------------
// The driver.

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

fn seeds_dir(target: Target) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target.name())
}

/// The valid seeds and every committed input of the target's seed directory
/// (regression inputs from findings among them).
fn corpus(target: Target) -> Vec<(String, Vec<u8>)> {
    let mut corpus = target.seeds();
    if let Ok(dir) = std::fs::read_dir(seeds_dir(target)) {
        let mut files: Vec<PathBuf> = dir.map(|e| e.expect("read seed dir").path()).collect();
        files.sort();
        for path in files {
            let bytes = std::fs::read(&path).expect("read seed");
            corpus.push((path.display().to_string(), bytes));
        }
    }
    corpus
}

fn save_input(target: Target, label: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz_decoders");
    std::fs::create_dir_all(&dir).expect("create the findings directory");
    let safe: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("{}-{safe}.bin", target.name()));
    std::fs::write(&path, input).expect("save the input");
    path
}

/// Runs one case; a panic becomes a test failure naming the case and where
/// its input was saved.
fn run_case(target: Target, label: &str, input: &[u8], started_ms: &AtomicU64, epoch: Instant) {
    started_ms.store(epoch.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| target.run(input)));
    started_ms.store(0, Ordering::Relaxed);
    if let Err(panic) = outcome {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        let path = save_input(target, label, input);
        panic!(
            "FINDING in {} ({label}): {message}\ninput: {} bytes, saved to {}",
            target.name(),
            input.len(),
            path.display()
        );
    }
}

fn fuzz(target: Target) {
    let seed = env_u64("STRATA_FUZZ_SEED", SEED_DEFAULT);
    let iterations = env_u64("STRATA_FUZZ_ITERATIONS", ITERATIONS_DEFAULT);
    let dump = std::env::var("STRATA_FUZZ_DUMP").ok().and_then(|v| {
        let (name, case) = v.split_once(':')?;
        (name == target.name()).then(|| case.parse::<u64>().expect("STRATA_FUZZ_DUMP case number"))
    });
    let corpus = corpus(target);
    let target_number = Target::ALL
        .iter()
        .position(|&t| t == target)
        .expect("listed")
        + 1;

    let epoch = Instant::now();
    let started_ms = AtomicU64::new(0);
    let current_case = AtomicU64::new(u64::MAX);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The watchdog: a case that runs too long is an infinite loop.
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let started = started_ms.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64 + 1;
                if started != 0 && now - started > CASE_SECONDS_MAX * 1000 {
                    eprintln!(
                        "fuzz_decoders: FINDING: case {} of {} runs longer than {CASE_SECONDS_MAX} s \
                         (u64::MAX: a seed; STRATA_FUZZ_DUMP={}:<case> writes a case's input)",
                        current_case.load(Ordering::Relaxed),
                        target.name(),
                        target.name(),
                    );
                    std::process::abort();
                }
            }
        });
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            for (name, input) in &corpus {
                CASE.with(|c| c.set((target_number, u64::MAX)));
                run_case(target, name, input, &started_ms, epoch);
            }
            for case in 0..iterations {
                let mut rng = Rng::for_case(seed, target, case);
                let input = mutated_case(&mut rng, target, &corpus);
                if dump == Some(case) {
                    let path = save_input(target, &format!("case-{case}"), &input);
                    eprintln!(
                        "fuzz_decoders: wrote case {case} of {} to {}",
                        target.name(),
                        path.display()
                    );
                    return;
                }
                CASE.with(|c| c.set((target_number, case)));
                current_case.store(case, Ordering::Relaxed);
                run_case(
                    target,
                    &format!("case {case}, STRATA_FUZZ_SEED={seed}"),
                    &input,
                    &started_ms,
                    epoch,
                );
            }
        }));
        CASE.with(|c| c.set((0, 0)));
        done.store(true, Ordering::Relaxed);
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    });
    eprintln!(
        "fuzz_decoders: {}: {} seeds and {iterations} mutated cases in {:.1} s",
        target.name(),
        corpus.len(),
        epoch.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// One test per target.

#[test]
fn log_record_decoder_survives_mutated_logs() {
    fuzz(Target::LogRecord);
}

#[test]
fn batch_decoder_survives_mutated_batches() {
    fuzz(Target::Batch);
}

#[test]
fn delta_block_decoder_survives_mutated_blocks() {
    fuzz(Target::DeltaBlock);
}

#[test]
fn block_index_decoder_survives_mutated_indexes() {
    fuzz(Target::BlockIndex);
}

#[test]
fn bloom_decoder_survives_mutated_filters() {
    fuzz(Target::Bloom);
}

#[test]
fn footer_decoder_survives_mutated_layer_files() {
    fuzz(Target::Footer);
}

#[test]
fn manifest_decoder_survives_mutated_manifests() {
    fuzz(Target::Manifest);
}

/// The committed `valid-*` seeds are what the generator makes today, so the
/// libFuzzer runs start from current encodings.
#[test]
fn committed_seeds_match_the_generator() {
    for target in Target::ALL {
        let dir = seeds_dir(target);
        let mut stale = Vec::new();
        let generated = target.seeds();
        for (name, bytes) in &generated {
            let path = dir.join(format!("valid-{name}"));
            if std::fs::read(&path).ok().as_ref() != Some(bytes) {
                stale.push(path.display().to_string());
            }
        }
        let committed = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("valid-"))
                    .count()
            })
            .unwrap_or(0);
        assert!(
            stale.is_empty() && committed == generated.len(),
            "{}: the committed seeds are stale ({stale:?}, {committed} committed, {} generated); \
             regenerate: cargo run -p strata --features fuzzing --example fuzz_seeds",
            target.name(),
            generated.len()
        );
    }
}

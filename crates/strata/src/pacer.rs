//! The pacer of background compaction: how fast a job writes, when it gives
//! the device to point lookups, and the I/O class of its thread.
//!
//! What it owns: the job's token bucket (`Options::compaction_bytes_per_sec`
//! of output), the watch on the foreground (the point lookups' layer-file
//! reads and the writers' LSN, each a counter that moves), and the
//! compaction's [`Urgency`] as the L0 backlog sets it.
//!
//! The rule: reads come first unless writers need the compaction. A job
//! that is not hurried waits while point lookups read layer files (at most
//! `FOREGROUND_PAUSE_MAX` a job, so reads that never stop cannot starve it)
//! and runs its I/O in the idle class while they do. It is hurried (no
//! waiting, no pacing, best-effort I/O) while writers are slowed by the L0
//! backlog ([`Urgency::WritersWaiting`]), or while it is behind
//! ([`Urgency::Behind`]: L0 at twice the trigger) and either writes go on
//! (they pile L0 up further: every read's layer count and the pinned
//! indexes grow) or nothing reads (no one to give the device to). Behind
//! with the writers quiet and reads going on, the backlog cannot grow, so
//! the reads get the device: a hurried merge beside a read-only stretch
//! put its 64 KiB requests in front of every get (phases experiment, quick:
//! the job hurried by the next load's flushes kept running hurried through
//! the read phase, 7 KiB read a get where the get itself needs 4, read p50
//! 1.12–1.34× the device's).
//!
//! Invariants: the urgency only rises between two job starts (a flush or a
//! slowed writer raises it; the job start sets it from the L0 count); the
//! pacer never blocks a job longer than 100 ms a step, so urgency, the
//! database closing and cancellation are seen.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes between two calls to the pacer.
pub(crate) const PACE_EVERY_BYTES: u64 = 64 << 10;

/// How long after the point lookups' read counter last moved they still
/// count as reading (`Activity::recent`).
const FOREGROUND_QUIET: Duration = Duration::from_millis(100);

/// How long after the last write the writers still count as writing: a
/// job behind runs hurried while they do. Shorter than the reads' quiet
/// period: writers that stop leave nothing to hurry for, and a job kept
/// hurried for 100 ms after the last write put its I/O beside the first
/// gets of a read-only stretch (phases experiment, quick: 37 MB read by
/// the merge in the first 100 ms of the read phase, as much as the
/// phase's 10,000 gets read, 6–7 KiB read a get where a get needs 4).
/// Writes that go on move the LSN far more often than this (a write
/// every few hundred µs in the phases' mixed phase; a bulk load, every
/// few µs), and writers slowed by the backlog hurry a job whatever this
/// says (`Urgency::WritersWaiting`).
const WRITES_QUIET: Duration = Duration::from_millis(20);

/// The longest a background job waits for foreground reads in all
/// (`Pacer::yield_to_reads`).
const FOREGROUND_PAUSE_MAX: Duration = Duration::from_secs(10);

/// How much the writers need compaction now, from the L0 backlog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Urgency {
    /// Not behind: paced, giving way to reads.
    Calm = 0,
    /// Behind (L0 at twice the trigger): hurried while writes go on or
    /// nothing reads.
    Behind = 1,
    /// Writers are slowed or stopped by the L0 backlog: hurried.
    WritersWaiting = 2,
}

impl Urgency {
    fn from_u8(v: u8) -> Urgency {
        match v {
            0 => Urgency::Calm,
            1 => Urgency::Behind,
            _ => Urgency::WritersWaiting,
        }
    }
}

/// A counter the foreground moves, and when this watcher last saw it move.
#[derive(Debug)]
struct Activity {
    counter: Arc<AtomicU64>,
    seen: Mutex<(u64, Option<Instant>)>,
    /// How long after it last moved the counter still counts as moving.
    quiet: Duration,
}

impl Activity {
    /// Watches `counter`, active for `quiet` after each move; it has not
    /// moved yet.
    fn new(counter: Arc<AtomicU64>, quiet: Duration) -> Activity {
        let now = counter.load(Ordering::Relaxed);
        Activity {
            counter,
            seen: Mutex::new((now, None)),
            quiet,
        }
    }

    /// Whether the counter moved in the last `quiet`.
    fn recent(&self) -> bool {
        let value = self.counter.load(Ordering::Relaxed);
        let Ok(mut seen) = self.seen.lock() else {
            return true;
        };
        let now = Instant::now();
        if value != seen.0 {
            *seen = (value, Some(now));
        }
        seen.1.is_some_and(|at| now.duration_since(at) < self.quiet)
    }
}

/// Paces background compaction to `bytes_per_sec` of output (a token
/// bucket holding at most 50 ms of budget; a job that overdraws it sleeps
/// the debt off in steps of at most 100 ms, so that urgency and
/// cancellation are seen), and chooses the I/O class of its thread
/// (`follow_foreground`). Written here: the pacing is a few lines, and a
/// rate-limiter crate would bring an async or a clock abstraction with it.
#[derive(Debug)]
pub(crate) struct Pacer {
    bytes_per_sec: u64,
    /// An [`Urgency`].
    urgency: AtomicU8,
    /// When the budget was last topped up, and the budget (negative: debt).
    budget: Mutex<(Instant, f64)>,
    /// Data blocks point lookups have read from layer files
    /// (`LayerIo::point_reads`).
    reads: Activity,
    /// The last LSN made visible: it moves with every write.
    writes: Activity,
    /// How long the current job has waited for foreground reads, of at
    /// most `pause_max` (`FOREGROUND_PAUSE_MAX`); reset as each job starts.
    paused: Mutex<Duration>,
    pause_max: Duration,
    /// Set when the database closes: no more waiting.
    stopping: AtomicBool,
}

impl Pacer {
    /// A pacer of `bytes_per_sec` (0 never waits) that yields the device
    /// while `foreground_reads` moves, unless `foreground_writes` moving
    /// makes a backlog urgent.
    pub(crate) fn new(
        bytes_per_sec: u64,
        foreground_reads: Arc<AtomicU64>,
        foreground_writes: Arc<AtomicU64>,
    ) -> Self {
        Pacer {
            bytes_per_sec,
            urgency: AtomicU8::new(Urgency::Calm as u8),
            budget: Mutex::new((Instant::now(), 0.0)),
            reads: Activity::new(foreground_reads, FOREGROUND_QUIET),
            writes: Activity::new(foreground_writes, WRITES_QUIET),
            paused: Mutex::new(Duration::ZERO),
            pause_max: FOREGROUND_PAUSE_MAX,
            stopping: AtomicBool::new(false),
        }
    }

    /// A job starts: its pause budget is whole again, and its urgency is
    /// `urgency` (from the L0 count now).
    pub(crate) fn start_job(&self, urgency: Urgency) {
        if let Ok(mut paused) = self.paused.lock() {
            *paused = Duration::ZERO;
        }
        self.urgency.store(urgency as u8, Ordering::Relaxed);
        self.follow_foreground();
    }

    /// The backlog grew to `urgency` (a flush, a slowed writer): the
    /// urgency rises to it, never falls.
    pub(crate) fn raise(&self, urgency: Urgency) {
        self.urgency.fetch_max(urgency as u8, Ordering::Relaxed);
    }

    /// The database closes: a job waits for foreground reads no more.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Whether the job runs hurried now: no waiting for reads, no pacing,
    /// best-effort I/O (the module's rule).
    pub(crate) fn hurried(&self) -> bool {
        match Urgency::from_u8(self.urgency.load(Ordering::Relaxed)) {
            Urgency::Calm => false,
            Urgency::Behind => self.writes.recent() || !self.foreground_reading(),
            Urgency::WritersWaiting => true,
        }
    }

    /// Waits while point lookups read layer files, unless the job is
    /// hurried, the database closes, or the job has waited
    /// `FOREGROUND_PAUSE_MAX` already. The idle I/O class orders the
    /// requests waiting for the device; it does not take the device from a
    /// request of the job already there, and a get that arrives behind one
    /// waits for it (a 64 KiB read or write: the read phases' p99). The
    /// budget keeps a job from starving under reads that never stop: past
    /// it, the job runs on in the idle class.
    pub(crate) fn yield_to_reads(&self) {
        let step = FOREGROUND_QUIET / 4;
        loop {
            if self.stopping.load(Ordering::Relaxed) || !self.foreground_reading() || self.hurried()
            {
                return;
            }
            let Ok(mut paused) = self.paused.lock() else {
                return;
            };
            if *paused >= self.pause_max {
                return;
            }
            *paused += step;
            drop(paused);
            std::thread::sleep(step);
        }
    }

    /// Whether a point lookup read a layer file in the last
    /// `FOREGROUND_QUIET`.
    pub(crate) fn foreground_reading(&self) -> bool {
        self.reads.recent()
    }

    /// The size of a background job's next request (`io::IoSteps`): small
    /// while point lookups read layer files, large when none does.
    pub(crate) fn step_bytes(&self) -> usize {
        crate::io::background_step_bytes(self.foreground_reading())
    }

    /// [`Self::step_bytes`] as a background writer or reader asks it.
    pub(crate) fn steps(self: &Arc<Self>) -> crate::io::IoSteps {
        let pacer = Arc::clone(self);
        Arc::new(move || pacer.step_bytes())
    }

    /// On the background thread, sets its I/O class for what runs now:
    /// idle while foreground reads need the device (a get must not queue
    /// behind a merge's I/O), best effort when the job is hurried or no
    /// read is waiting (a merge starved by the idle class through a
    /// write-heavy stretch falls behind for nothing). See `io::priority`.
    pub(crate) fn follow_foreground(&self) {
        crate::io::priority::set_best_effort(self.hurried() || !self.foreground_reading());
    }

    /// Accounts for `bytes` written, sleeping while the job is ahead of its
    /// pace (unpaced while hurried); on the background thread, also sets
    /// its I/O class (`follow_foreground`).
    pub(crate) fn pace(&self, bytes: u64) {
        self.yield_to_reads();
        self.follow_foreground();
        if self.bytes_per_sec == 0 || self.hurried() {
            return;
        }
        let rate = self.bytes_per_sec as f64;
        let wait = {
            let Ok(mut budget) = self.budget.lock() else {
                return;
            };
            let now = Instant::now();
            let topped = budget.1 + now.duration_since(budget.0).as_secs_f64() * rate;
            let left = topped.min(rate * 0.05) - bytes as f64;
            *budget = (now, left);
            (left < 0.0).then(|| -left / rate)
        };
        if let Some(secs) = wait {
            std::thread::sleep(Duration::from_secs_f64(secs.min(0.1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter() -> Arc<AtomicU64> {
        Arc::default()
    }

    /// Moves `counter` every 5 ms for 400 ms on a thread; the flag is set
    /// when it stops.
    fn moving(counter: Arc<AtomicU64>) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let t = std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(400) {
                counter.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
            d.store(true, Ordering::Relaxed);
        });
        (t, done)
    }

    #[test]
    fn background_requests_are_small_only_while_point_lookups_read() {
        let reads = counter();
        let pacer = Arc::new(Pacer::new(0, Arc::clone(&reads), counter()));
        let steps = pacer.steps();
        assert_eq!(steps(), crate::io::BACKGROUND_IO_IDLE_BYTES_MAX);
        reads.fetch_add(1, Ordering::Relaxed);
        assert_eq!(steps(), crate::io::BACKGROUND_IO_BYTES_MAX);
        std::thread::sleep(FOREGROUND_QUIET + FOREGROUND_QUIET / 2);
        assert_eq!(steps(), crate::io::BACKGROUND_IO_IDLE_BYTES_MAX);
    }

    #[test]
    fn the_pacer_holds_a_job_to_its_rate_unless_hurried() {
        // 4 MiB/s: 512 KiB, less the 50 ms of budget it may start with
        // (none here: it starts empty), takes at least 125 ms.
        let pacer = Pacer::new(4 << 20, counter(), counter());
        let started = Instant::now();
        for _ in 0..8 {
            pacer.pace(64 << 10);
        }
        // Each step sleeps what it overdrew (at most 100 ms): the last
        // step's debt may be left for the next call.
        assert!(
            started.elapsed() >= Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
        // Behind with nothing reading, or writers waiting: unpaced.
        for urgency in [Urgency::Behind, Urgency::WritersWaiting] {
            pacer.start_job(urgency);
            let started = Instant::now();
            pacer.pace(1 << 40);
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{urgency:?}: it waits"
            );
        }
        let unpaced = Pacer::new(0, counter(), counter());
        let started = Instant::now();
        unpaced.pace(1 << 40);
        assert!(started.elapsed() < Duration::from_secs(5), "0 never waits");
    }

    #[test]
    fn a_job_waits_while_foreground_reads_go_on_unless_hurried_stopped_or_out_of_budget() {
        let reads = counter();
        let pacer = Pacer::new(0, Arc::clone(&reads), counter());
        let (t, done) = moving(Arc::clone(&reads));
        std::thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        pacer.pace(1);
        // It waited for the reads to stop (and for the quiet period).
        assert!(done.load(Ordering::Relaxed), "{:?}", start.elapsed());
        assert!(start.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        // Writers waiting, or stopping: no wait.
        for (urgency, stop) in [(Urgency::WritersWaiting, false), (Urgency::Calm, true)] {
            let pacer = Pacer::new(0, Arc::clone(&reads), counter());
            pacer.start_job(urgency);
            if stop {
                pacer.stop();
            }
            let (t, done) = moving(Arc::clone(&reads));
            std::thread::sleep(Duration::from_millis(20));
            pacer.pace(1);
            assert!(!done.load(Ordering::Relaxed), "waited: {urgency:?} {stop}");
            t.join().unwrap();
        }
        // Out of budget: it goes on while the reads do; a new job waits
        // again.
        let mut pacer = Pacer::new(0, Arc::clone(&reads), counter());
        pacer.pause_max = Duration::from_millis(50);
        let (t, done) = moving(Arc::clone(&reads));
        std::thread::sleep(Duration::from_millis(20));
        pacer.pace(1);
        pacer.pace(1);
        assert!(!done.load(Ordering::Relaxed), "waited past the budget");
        pacer.start_job(Urgency::Calm);
        let start = Instant::now();
        pacer.pace(1);
        assert!(!done.load(Ordering::Relaxed), "a budget of 50 ms");
        assert!(
            start.elapsed() >= Duration::from_millis(40),
            "a new job waits again"
        );
        t.join().unwrap();
    }

    #[test]
    fn a_job_behind_gives_way_to_reads_only_while_no_write_piles_l0_up() {
        let reads = counter();
        let writes = counter();
        // Reads with no writes: behind, it still waits for them.
        let pacer = Pacer::new(0, Arc::clone(&reads), Arc::clone(&writes));
        pacer.start_job(Urgency::Behind);
        let (t, done) = moving(Arc::clone(&reads));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!pacer.hurried(), "behind, reads, no writes");
        pacer.pace(1);
        assert!(done.load(Ordering::Relaxed), "behind, it waited for reads");
        t.join().unwrap();
        // Reads and writes together: it does not.
        let (tr, reads_done) = moving(Arc::clone(&reads));
        let (tw, _) = moving(Arc::clone(&writes));
        std::thread::sleep(Duration::from_millis(20));
        // (Seen within a few tries: a writes' quiet period is short, and a
        // loaded machine may stall the moving thread past it once.)
        let hurried = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(1));
            pacer.hurried()
        });
        assert!(hurried, "behind while writes go on");
        pacer.pace(1);
        assert!(!reads_done.load(Ordering::Relaxed), "waited beside writes");
        tr.join().unwrap();
        tw.join().unwrap();
        // The urgency only rises until the next job start.
        pacer.raise(Urgency::Calm);
        std::thread::sleep(FOREGROUND_QUIET + FOREGROUND_QUIET / 2);
        assert!(pacer.hurried(), "behind, nothing reads: hurried");
        pacer.start_job(Urgency::Calm);
        assert!(!pacer.hurried());
    }

    #[test]
    fn a_job_behind_gives_way_to_reads_soon_after_the_writes_stop() {
        let reads = counter();
        let writes = counter();
        let pacer = Pacer::new(0, Arc::clone(&reads), Arc::clone(&writes));
        pacer.start_job(Urgency::Behind);
        let hurried = (0..50).any(|_| {
            reads.fetch_add(1, Ordering::Relaxed);
            writes.fetch_add(1, Ordering::Relaxed);
            pacer.hurried()
        });
        assert!(hurried, "behind while writes go on");
        // The writes stop; the reads go on. Well within the reads' quiet
        // period, the writes' is over: the job gives the device to reads.
        std::thread::sleep(WRITES_QUIET + WRITES_QUIET / 2);
        reads.fetch_add(1, Ordering::Relaxed);
        assert!(WRITES_QUIET * 2 < FOREGROUND_QUIET);
        assert!(pacer.foreground_reading());
        assert!(!pacer.hurried(), "writers quiet, reads going on");
        writes.fetch_add(1, Ordering::Relaxed);
        assert!(pacer.hurried(), "writes again");
    }

    #[test]
    fn foreground_reads_count_as_reading_until_they_stop_for_a_while() {
        let reads = counter();
        let pacer = Pacer::new(0, Arc::clone(&reads), counter());
        assert!(!pacer.foreground_reading(), "no read yet");
        reads.fetch_add(1, Ordering::Relaxed);
        assert!(pacer.foreground_reading(), "a read just now");
        std::thread::sleep(FOREGROUND_QUIET / 2);
        assert!(pacer.foreground_reading(), "within the quiet period");
        std::thread::sleep(FOREGROUND_QUIET);
        assert!(!pacer.foreground_reading(), "quiet for longer");
        reads.fetch_add(1, Ordering::Relaxed);
        assert!(pacer.foreground_reading(), "reading again");
    }
}

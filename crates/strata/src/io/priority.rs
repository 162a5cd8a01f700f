//! The CPU and I/O priority of the engine's background compaction thread.
//!
//! What it owns: lowering the calling thread's niceness and its I/O class
//! (`setpriority(2)`, `ioprio_set(2)`; the libc crate wraps neither
//! ioprio call), and moving its I/O between the idle and the best-effort
//! class as `compaction::Pacer::follow_foreground` decides.
//!
//! While foreground reads need the device, the compaction thread's I/O
//! runs in the **idle** class: Linux's
//! mq-deadline and BFQ schedulers dispatch an idle request only while no
//! request of a higher class is queued or in flight (and any request that
//! waited 10 s, mq-deadline's `prio_aging_expire`), so a get does not
//! queue behind a merge's 64 KiB writes and read-ahead (it may still find
//! one in flight), and the merge uses what the foreground leaves. Measured with `cargo bench -p strata --bench
//! point_read` (gets and raw 4 KiB preads back to back while a paced L0
//! merge runs; two runs each): get p50 35–39 µs against 39–43 µs in the
//! best-effort class, p90 42–48 against 77–99 µs, p99 81–106 against
//! 347–391 µs, p99.9 0.4–0.6 ms against 0.55–1.5 ms; the merge took 14–15 s
//! instead of 1.3–1.4 s beside that loop, which leaves the device no rest.
//! A merge that falls behind must not be starved so: while it is hurried
//! (`pacer::Pacer::hurried`: writers slowed by the L0 backlog, or L0 at
//! twice the trigger while writes go on), [`set_best_effort`] puts the
//! thread back in the best-effort class. So it does while no point lookup has read a layer file for
//! 100 ms: a write-heavy stretch (a bulk load) has no read to protect,
//! and a merge kept idle through it (the device is rarely idle while the
//! log and flushes write) left L0 at twice the trigger, and the merge to
//! run hurried in the next read-heavy stretch: phases experiment, one
//! compaction in four iterations, read p99 up to 776 µs.
//!
//! Invariants: only a thread that called [`yield_to_foreground`] ever has
//! its priority changed here (a writer that compacts inline, or a caller of
//! `Db::compact`, keeps its own); every call is best effort: where the
//! system refuses (a scheduler without classes, such as `none`, just
//! ignores them), the thread runs as it was.

use std::cell::Cell;

/// The compaction thread's CPU niceness: on a machine with few cores, a
/// merge that is busy decoding, checksumming and encoding would otherwise
/// hold a core for whole scheduler slices (milliseconds) while a
/// foreground read waits for one.
const BACKGROUND_NICE: libc::c_int = 10;

const IOPRIO_WHO_PROCESS: libc::c_long = 1;
const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
const IOPRIO_CLASS_BE: libc::c_long = 2;
const IOPRIO_CLASS_IDLE: libc::c_long = 3;

thread_local! {
    /// `Some(best_effort)` on a thread that yields to the foreground.
    static BACKGROUND: Cell<Option<bool>> = const { Cell::new(None) };
}

/// Sets the calling thread's I/O priority (an `IOPRIO_PRIO_VALUE`).
fn set_io_priority(value: libc::c_long) {
    // SAFETY: plain system calls on the calling thread's id, no pointers.
    unsafe {
        let tid = libc::gettid();
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            tid as libc::c_long,
            value,
        );
    }
}

/// Makes the calling thread a background thread: niceness
/// `BACKGROUND_NICE`, I/O in the idle class until [`set_best_effort`].
pub(crate) fn yield_to_foreground() {
    // SAFETY: a plain system call on the calling thread's id.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, BACKGROUND_NICE);
    }
    set_io_priority(IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT);
    BACKGROUND.set(Some(false));
}

/// On a background thread: `true` puts its I/O in the best-effort class
/// (lowest level), served beside the foreground's; `false`, back in the
/// idle class. A no-op on any other thread, and when nothing changes.
pub(crate) fn set_best_effort(best_effort: bool) {
    if BACKGROUND.get() == Some(!best_effort) {
        set_io_priority(if best_effort {
            (IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | 7
        } else {
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT
        });
        BACKGROUND.set(Some(best_effort));
    }
}

/// The calling thread's I/O priority class (`ioprio_get`), for tests.
#[cfg(test)]
fn io_class() -> libc::c_long {
    // SAFETY: plain system calls on the calling thread's id, no pointers.
    let value = unsafe {
        libc::syscall(
            libc::SYS_ioprio_get,
            IOPRIO_WHO_PROCESS,
            libc::gettid() as libc::c_long,
        )
    };
    value >> IOPRIO_CLASS_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_background_thread_changes_class_and_best_effort_raises_it() {
        let before = io_class();
        set_best_effort(true);
        set_best_effort(false);
        assert_eq!(io_class(), before, "a foreground thread keeps its class");
        std::thread::spawn(|| {
            yield_to_foreground();
            assert_eq!(io_class(), IOPRIO_CLASS_IDLE);
            set_best_effort(true);
            assert_eq!(io_class(), IOPRIO_CLASS_BE);
            set_best_effort(true);
            assert_eq!(io_class(), IOPRIO_CLASS_BE);
            set_best_effort(false);
            assert_eq!(io_class(), IOPRIO_CLASS_IDLE);
        })
        .join()
        .unwrap();
        assert_eq!(io_class(), before, "the class is per thread");
    }
}

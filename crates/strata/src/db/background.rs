//! The background scheduler: one [`Worker`] per kind of background job
//! (the flush, the compaction), each run by the one loop
//! ([`Worker::run`]) with the one error policy.
//!
//! A worker owns its wake-up state (a job is pending, the database is
//! shutting down, the last error) and the condition variable its thread,
//! and the writers stalled on its backlog, wait on.
//!
//! Error policy, the same for every job: a failed job changed nothing
//! acknowledged (its inputs stay; its outputs are unlisted garbage the
//! next open removes), so it never poisons the database (only the version
//! set does, when a durable edit cannot be shown). The worker keeps the
//! error (for `stats()`, and for writers stalled on its backlog, who are
//! refused with it rather than kept waiting), waits `RETRY_FIRST`, doubling
//! up to `RETRY_MAX`, and tries again; a success clears the error. The
//! loop stops at shutdown or once the database is poisoned.

use crate::error::{Error, Result};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(10);

/// A worker's wake-up state.
#[derive(Default)]
pub(super) struct WorkerState {
    /// A job may be due: the loop runs a round.
    pub(super) pending: bool,
    pub(super) shutdown: bool,
    /// The last error, until a round succeeds.
    pub(super) error: Option<String>,
}

/// One kind of background job's state and condition variable.
#[derive(Default)]
pub(super) struct Worker {
    state: Mutex<WorkerState>,
    cv: Condvar,
}

impl Worker {
    pub(super) fn lock(&self) -> Result<MutexGuard<'_, WorkerState>> {
        self.state
            .lock()
            .map_err(|_| Error::Poisoned("a background worker's lock is poisoned".into()))
    }

    /// A job may be due: wakes the loop (and whoever waits on the worker).
    pub(super) fn signal(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.pending = true;
        }
        self.cv.notify_all();
    }

    /// Wakes whoever waits on the worker (writers stalled on its backlog,
    /// after progress).
    pub(super) fn notify(&self) {
        self.cv.notify_all();
    }

    /// Stops the loop (after its current job) and wakes every waiter.
    pub(super) fn shut_down(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.shutdown = true;
        }
        self.cv.notify_all();
    }

    pub(super) fn is_shut_down(&self) -> bool {
        self.state.lock().map_or(true, |s| s.shutdown)
    }

    /// The last error, until a round succeeds.
    pub(super) fn error(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.error.clone())
    }

    /// A job succeeded: its kind's error is history.
    pub(super) fn clear_error(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.error = None;
        }
    }

    /// Waits on the worker for at most `timeout` (a stalled writer's wait:
    /// it looks again at its backlog, the error and shutdown after it).
    pub(super) fn wait<'a>(
        &self,
        s: MutexGuard<'a, WorkerState>,
        timeout: Duration,
    ) -> Result<MutexGuard<'a, WorkerState>> {
        Ok(self
            .cv
            .wait_timeout(s, timeout)
            .map_err(|_| Error::Poisoned("a background worker's lock is poisoned".into()))?
            .0)
    }

    /// The background thread's loop: waits for a signal, then runs
    /// `round` until it says no job is left (`Ok(false)`); a failed round
    /// is retried under the error policy (see the module's doc). Returns
    /// at shutdown, or when `poisoned()`.
    pub(super) fn run(&self, poisoned: impl Fn() -> bool, mut round: impl FnMut() -> Result<bool>) {
        let mut backoff = RETRY_FIRST;
        loop {
            {
                let Ok(mut s) = self.state.lock() else {
                    return;
                };
                while !s.pending && !s.shutdown {
                    s = match self.cv.wait(s) {
                        Ok(s) => s,
                        Err(_) => return,
                    };
                }
                if s.shutdown {
                    return;
                }
                s.pending = false;
            }
            loop {
                match round() {
                    Ok(again) => {
                        backoff = RETRY_FIRST;
                        self.clear_error();
                        if !again {
                            break;
                        }
                    }
                    Err(_) if poisoned() => {
                        self.cv.notify_all();
                        return;
                    }
                    Err(e) => {
                        if !self.back_off(&e, &mut backoff) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The error policy's step after a failed round: keeps `error` (waking
    /// whoever waits, so that stalled writers see it at once), and waits
    /// out `backoff` (then doubles it, up to `RETRY_MAX`) or until
    /// shutdown. Whether the loop goes on.
    fn back_off(&self, error: &Error, backoff: &mut Duration) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        s.error = Some(error.to_string());
        self.cv.notify_all();
        let Ok((s, _)) = self.cv.wait_timeout_while(s, *backoff, |s| !s.shutdown) else {
            return false;
        };
        *backoff = (*backoff * 2).min(RETRY_MAX);
        !s.shutdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_failed_round_is_kept_as_the_error_and_retried_until_it_passes() {
        let worker = Arc::new(Worker::default());
        let rounds = Arc::new(AtomicU32::new(0));
        let (w, r) = (Arc::clone(&worker), Arc::clone(&rounds));
        let thread = std::thread::spawn(move || {
            w.run(
                || false,
                || match r.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(Error::Poisoned("first".into())),
                    1 => Ok(true),
                    _ => Ok(false),
                },
            )
        });
        worker.signal();
        // The error is kept while the loop backs off, then cleared.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut seen = false;
        while rounds.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < deadline {
            seen |= worker.error().is_some();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(seen);
        assert_eq!(rounds.load(Ordering::SeqCst), 3);
        assert_eq!(worker.error(), None);
        worker.shut_down();
        thread.join().unwrap();
    }

    #[test]
    fn a_poisoned_database_stops_the_loop() {
        let worker = Worker::default();
        worker.signal();
        worker.run(|| true, || Err(Error::Poisoned("bug".into())));
        assert_eq!(worker.error(), None);
    }
}

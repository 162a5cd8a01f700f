//! [`FaultyRemote`]: a remote store that fails the way a network and a
//! server do, in front of a real one, for the simulation tests (feature
//! `sim`, as `io::sim`). Deterministic from a seed, as `SimStorage`.
//!
//! The model: every call is one operation, counted from 1
//! ([`FaultyRemote::ops`]). A fault ([`RemoteFault`]) applies at one
//! operation number, or to each call with a probability (one in `n`,
//! [`FaultyRemote::random`]):
//! - `Before`: the call fails without reaching the store (a refused
//!   connection): nothing happened.
//! - `After`: the call reaches the store and takes effect, and the caller
//!   is told it failed (the answer was lost): a put is there, a delete done.
//! - `Duplicate`: the call reaches the store twice, the caller gets the
//!   second answer (a client's retry after a lost answer): a create-only
//!   put whose first attempt wrote the object is told `AlreadyExists`.
//! - `Stop`: from this operation on every call fails before reaching the
//!   store (the process died here); a test then drops what used it and
//!   opens the store behind it again ([`FaultyRemote::inner`]).
//!
//! Every injected error is `RemoteErrorKind::Transport` saying it was
//! injected and how, so a test can tell it from the store's own.
//! Latency: each call can be delayed ([`FaultyRemote::set_latency`]).

use super::{remote_error, ObjectInfo, Payload, PutMode, RemoteStore};
use crate::error::{RemoteErrorKind, Result};
use crate::io::sim::SimRng;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a fault does to its call (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteFault {
    Before,
    After,
    Duplicate,
    Stop,
}

struct State {
    ops: u64,
    rng: SimRng,
    /// Faults at an operation number.
    at: Vec<(u64, RemoteFault)>,
    /// Each call: with probability 1/n, one of these faults (never `Stop`).
    random: Option<(u64, Vec<RemoteFault>)>,
    stopped: bool,
    latency: Option<Duration>,
    injected: u64,
}

/// A store with injected faults in front of `inner`.
pub struct FaultyRemote {
    inner: Arc<dyn RemoteStore>,
    state: Mutex<State>,
}

impl FaultyRemote {
    /// No faults yet; `seed` decides the random ones.
    pub fn new(inner: Arc<dyn RemoteStore>, seed: u64) -> FaultyRemote {
        FaultyRemote {
            inner,
            state: Mutex::new(State {
                ops: 0,
                rng: SimRng::new(seed),
                at: Vec::new(),
                random: None,
                stopped: false,
                latency: None,
                injected: 0,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store behind the faults (what a process that restarts sees).
    pub fn inner(&self) -> &Arc<dyn RemoteStore> {
        &self.inner
    }

    /// `fault` at operation number `op` (counted from 1).
    pub fn fail_at(&self, op: u64, fault: RemoteFault) {
        self.state().at.push((op, fault));
    }

    /// Each call from now on: with probability `1 / one_in`, one of
    /// `faults` (chosen at random; `Stop` is ignored here).
    pub fn random(&self, one_in: u64, faults: &[RemoteFault]) {
        let faults: Vec<RemoteFault> = faults
            .iter()
            .copied()
            .filter(|f| *f != RemoteFault::Stop)
            .collect();
        self.state().random = (!faults.is_empty()).then_some((one_in, faults));
    }

    /// Delays every call by `latency` (`None`: no delay).
    pub fn set_latency(&self, latency: Option<Duration>) {
        self.state().latency = latency;
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// Faults injected so far (a stopped store's refusals included).
    pub fn injected(&self) -> u64 {
        self.state().injected
    }

    /// Counts a call and decides its fault.
    fn next(&self) -> Option<RemoteFault> {
        let (fault, latency) = {
            let mut s = self.state();
            s.ops += 1;
            let op = s.ops;
            if s.at
                .iter()
                .any(|&(at, f)| at == op && f == RemoteFault::Stop)
            {
                s.stopped = true;
            }
            let fault = if s.stopped {
                Some(RemoteFault::Stop)
            } else if let Some(&(_, f)) = s.at.iter().find(|&&(at, _)| at == op) {
                Some(f)
            } else if let Some((one_in, faults)) = s.random.clone() {
                if s.rng.one_in(one_in) {
                    let i = s.rng.below(faults.len() as u64) as usize;
                    Some(faults[i])
                } else {
                    None
                }
            } else {
                None
            };
            if fault.is_some() {
                s.injected += 1;
            }
            (fault, s.latency)
        };
        if let Some(latency) = latency {
            std::thread::sleep(latency);
        }
        fault
    }

    fn injected_error(
        &self,
        op: &'static str,
        key: &str,
        fault: RemoteFault,
    ) -> crate::error::Error {
        let how = match fault {
            RemoteFault::Before => "injected fault: the call did not reach the store",
            RemoteFault::After => "injected fault: the call took effect, its answer was lost",
            RemoteFault::Duplicate => "injected fault: the call was made twice",
            RemoteFault::Stop => "injected fault: the process stopped here",
        };
        remote_error(
            self.inner.url(),
            op,
            key,
            RemoteErrorKind::Transport(how.into()),
        )
    }

    /// Runs `call` as the fault for this operation says.
    fn run<T>(&self, op: &'static str, key: &str, call: impl Fn() -> Result<T>) -> Result<T> {
        match self.next() {
            None => call(),
            Some(f @ (RemoteFault::Before | RemoteFault::Stop)) => {
                Err(self.injected_error(op, key, f))
            }
            Some(f @ RemoteFault::After) => {
                call()?;
                Err(self.injected_error(op, key, f))
            }
            Some(RemoteFault::Duplicate) => {
                let _ = call();
                call()
            }
        }
    }
}

impl RemoteStore for FaultyRemote {
    fn url(&self) -> &str {
        self.inner.url()
    }

    fn put(&self, key: &str, bytes: Payload, mode: PutMode) -> Result<()> {
        self.run("put", key, || self.inner.put(key, bytes.clone(), mode))
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        self.run("get", key, || self.inner.get(key))
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        self.run("get range", key, || {
            self.inner.get_range(key, range.clone())
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        self.run("list", prefix, || self.inner.list(prefix))
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.run("delete", key, || self.inner.delete(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::DirRemote;

    fn store() -> (tempfile::TempDir, FaultyRemote) {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn RemoteStore> = Arc::new(DirRemote::open(dir.path()).unwrap());
        (dir, FaultyRemote::new(inner, 7))
    }

    #[test]
    fn each_fault_does_what_it_says() {
        let (_dir, s) = store();
        s.fail_at(1, RemoteFault::Before);
        s.fail_at(2, RemoteFault::After);
        s.fail_at(4, RemoteFault::Duplicate);
        let e = s
            .put("a", b"1".to_vec().into(), PutMode::Create)
            .unwrap_err();
        assert!(e.to_string().contains("did not reach"), "{e}");
        assert!(s.inner().get("a").is_err(), "a Before fault wrote");
        let e = s
            .put("a", b"2".to_vec().into(), PutMode::Create)
            .unwrap_err();
        assert!(e.to_string().contains("answer was lost"), "{e}");
        assert_eq!(
            s.inner().get("a").unwrap(),
            b"2",
            "an After fault did not write"
        );
        assert_eq!(s.get("a").unwrap(), b"2");
        // A create-only put made twice: written, and told it was there.
        let e = s
            .put("b", b"3".to_vec().into(), PutMode::Create)
            .unwrap_err();
        assert!(
            matches!(
                e,
                crate::Error::Remote {
                    kind: RemoteErrorKind::AlreadyExists,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(s.inner().get("b").unwrap(), b"3");
        assert_eq!(s.ops(), 4);
        assert_eq!(s.injected(), 3);
    }

    #[test]
    fn a_stop_fails_every_later_call_before_the_store() {
        let (_dir, s) = store();
        s.fail_at(2, RemoteFault::Stop);
        s.put("a", b"1".to_vec().into(), PutMode::Create).unwrap();
        for i in 0..3 {
            assert!(s
                .put(&format!("b{i}"), b"x".to_vec().into(), PutMode::Create)
                .is_err());
        }
        assert!(s.get("a").is_err());
        let keys: Vec<String> = s
            .inner()
            .list("")
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert_eq!(keys, vec!["a".to_string()]);
    }

    #[test]
    fn random_faults_follow_the_seed() {
        let outcomes = |seed: u64| {
            let dir = tempfile::tempdir().unwrap();
            let inner: Arc<dyn RemoteStore> = Arc::new(DirRemote::open(dir.path()).unwrap());
            let s = FaultyRemote::new(inner, seed);
            s.random(
                3,
                &[RemoteFault::Before, RemoteFault::After, RemoteFault::Stop],
            );
            (0..60)
                .map(|i| {
                    s.put(&format!("k{i}"), vec![1].into(), PutMode::Overwrite)
                        .is_ok()
                })
                .collect::<Vec<bool>>()
        };
        let a = outcomes(11);
        assert_eq!(a, outcomes(11));
        assert_ne!(a, outcomes(12));
        let failed = a.iter().filter(|ok| !**ok).count();
        assert!(
            (5..=40).contains(&failed),
            "{failed} of 60 failed at 1 in 3"
        );
    }
}

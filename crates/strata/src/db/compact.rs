//! Compaction in the engine: when it runs (the background thread, a
//! writer that hits `l0_stop_layers`, `Db::compact`), one job at a time,
//! and how its result is installed: the outputs durable and verified, then
//! one edit (`Compacted`) through `VersionSet::log_and_apply`, which marks
//! the inputs obsolete (their files go when no reader holds them).
//!
//! Error policy (`background`, the flush's too): a failed compaction
//! changed nothing (its outputs are removed, or, after a failed manifest
//! append, left unlisted for the next open to remove). The background
//! thread keeps the error for `stats()`, waits (100 ms, doubling to 10 s)
//! and tries again; it never poisons the database, since nothing
//! acknowledged depends on it. Writers stalled on L0 are refused with the
//! error while it fails, rather than wait forever.

use super::*;
use crate::compaction::{
    file_views, gc_plan, image_plan, merge_into_run, plan, rewrite_layers, run_views, tier_plan,
    write_image, JobOptions, Policy, Relocate,
};
use crate::pacer::Urgency;
use crate::types::Cover;

/// How long a job waits for the reads still holding its inputs.
const RELEASE_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// Drops a job's obsolete inputs once no read holds them, so that this
/// thread deletes their files rather than a reader: the last holder of a
/// layer deletes it, and unlinking a large file costs milliseconds on ext4
/// (28 ms measured for a ~60 MiB layer file), which a get would add to its
/// latency. A get holds its version for microseconds; a scan may hold one
/// for as long as its caller keeps it, and after `RELEASE_WAIT_MAX` its
/// drop deletes the files instead.
fn release_when_unread(layers: Vec<Arc<Layer>>) {
    let deadline = std::time::Instant::now() + RELEASE_WAIT_MAX;
    while layers.iter().any(|l| Arc::strong_count(l) > 1) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Ends a job's count of its outputs on the disk when dropped (see
/// `DbInner::job_ended`).
struct JobEnd<'a>(&'a DbInner);

impl Drop for JobEnd<'_> {
    fn drop(&mut self) {
        self.0.job_ended();
    }
}

/// Most layers one relocation job writes again (each is about
/// `target_file_bytes` of pointers and small values).
const RELOCATE_LAYERS_MAX: usize = 8;

/// A job on its own merges at most this many triggers' worth of L0 bytes
/// (`l0_compaction_trigger` full layers each): twice what it merges when
/// it keeps up, so that L0 shrinks step by step as a backlog is worked off
/// (see `Policy::max_input_bytes`).
const L0_JOB_TRIGGERS_MAX: u64 = 2;

impl DbInner {
    fn policy(&self) -> Policy {
        let trigger = self.opts.l0_compaction_trigger;
        Policy {
            trigger,
            max_inputs: (self.opts.compaction_memory_bytes
                / crate::options::COMPACTION_INPUT_READAHEAD_MIN_BYTES)
                .max(2),
            max_input_bytes: L0_JOB_TRIGGERS_MAX
                .saturating_mul(trigger as u64)
                .saturating_mul(self.opts.layer_size_bytes_max),
        }
    }

    pub(super) fn signal_compaction(&self) {
        self.compaction.signal();
    }

    fn compaction_cancelled(&self) -> bool {
        self.compaction.is_shut_down()
    }

    /// A job's options; `paced` for a background job (see `Pacer`); it
    /// moves the live values of the value files in `relocate` into its
    /// outputs.
    fn job_options(&self, paced: bool, relocate: &Relocate) -> JobOptions<'_> {
        JobOptions {
            room: self.output_room(),
            relocate: relocate.clone(),
            target_file_bytes: self.opts.target_file_bytes,
            memory_bytes: self.opts.compaction_memory_bytes,
            writer_buffer_bytes: self.opts.writer_buffer_bytes,
            block_bytes: self.opts.delta_block_bytes,
            pacer: paced.then(|| Arc::clone(&self.pacer)),
            bytes: Arc::clone(&self.compaction_bytes),
        }
    }

    /// How urgent compaction is with `l0` L0 layers: writers waiting from
    /// `l0_slowdown_layers`; behind at two jobs' worth
    /// (`2 × l0_compaction_trigger`) or half of `l0_slowdown_layers`;
    /// calm below (`pacer::Urgency`). Taken at a job's start and raised
    /// after each flush.
    pub(super) fn l0_urgency(&self, l0: usize) -> Urgency {
        let trigger = self.opts.l0_compaction_trigger;
        if trigger == 0 {
            Urgency::Calm
        } else if l0 >= self.opts.l0_slowdown_layers {
            Urgency::WritersWaiting
        } else if l0 >= (2 * trigger).min(self.opts.l0_slowdown_layers.div_ceil(2)) {
            Urgency::Behind
        } else {
            Urgency::Calm
        }
    }

    /// The LSN below which history may go: `history_lsns` behind the last
    /// LSN, or the caller's (`Db::set_horizon`), whichever is higher; never
    /// above the oldest live snapshot.
    pub(super) fn gc_horizon(&self) -> Lsn {
        let last = self.visible_lsn.load(Ordering::Acquire);
        let by_option = self.opts.history_lsns.map_or(0, |n| last.saturating_sub(n));
        let horizon = by_option.max(self.caller_horizon.load(Ordering::Acquire));
        match self
            .snapshots
            .lock()
            .ok()
            .and_then(|s| s.keys().next().copied())
        {
            Some(oldest) => horizon.min(oldest),
            None => horizon,
        }
    }

    /// Runs one job if a policy (or `force`) calls for one, in this order:
    /// L0 into an L1 run, an image, runs of like size into one (a tier), GC,
    /// relocation of the values of garbage-laden value files.
    /// Returns whether it did one.
    pub(super) fn compact_once(&self, force: bool) -> Result<bool> {
        let _job = lock(&self.compact_lock)?;
        // However the job ends, its outputs are no longer counted apart.
        let outputs_counted = JobEnd(self);
        self.check_poisoned()?;
        self.make_room()?;
        let version = self.version()?;
        let descs: Vec<&LayerDesc> = version.l0.iter().map(|l| &l.desc).collect();
        let cancelled = || self.compaction_cancelled() && !force;
        self.pacer.start_job(self.l0_urgency(version.l0.len()));
        let take_id = || self.versions.take_file_id();
        let runs = run_views(&version);
        let files = file_views(&version);
        let relocate = Relocate::of(&version, self.opts.value_garbage_percent);
        // Layers (the oldest L0 layers, or adjacent runs) merged into one
        // L1 run: the inputs, and the run's layers.
        let merge = |inputs: Vec<Arc<Layer>>| {
            let outputs = merge_into_run(
                &inputs,
                &self.layer_io,
                &self.job_options(!force, &relocate),
                take_id,
                &cancelled,
            )?;
            Ok::<_, Error>((inputs, outputs))
        };
        // The layers replaced, their replacement, and the LSN reads are
        // refused below from now on (0: no change).
        let (remove, outputs, gc_lsn): (Vec<Arc<Layer>>, _, Lsn) =
            if let Some(plan) = plan(&descs, &self.policy(), force) {
                let inputs = version.l0[..plan.inputs.len()].to_vec();
                let newest = inputs
                    .iter()
                    .filter(|l| l.desc.entries > 0)
                    .map(|l| l.desc.lsn_max)
                    .max();
                if let Some(lsn) = newest.filter(|&lsn| force && self.gc_horizon() >= lsn) {
                    // Everything up to `lsn` may go: one image of it
                    // replaces the inputs and every run (all below them).
                    let outputs = write_image(
                        &version,
                        &inputs,
                        lsn,
                        &[Cover::everything()],
                        &self.layer_io,
                        &self.job_options(false, &relocate),
                        take_id,
                        &cancelled,
                    )?;
                    let runs = version.runs.iter().flat_map(|r| r.layers.iter().cloned());
                    (inputs.iter().cloned().chain(runs).collect(), outputs, lsn)
                } else {
                    let (inputs, outputs) = merge(inputs)?;
                    (inputs, outputs, 0)
                }
            } else if let Some((lsn, covers)) = image_plan(
                &files,
                self.opts.image_run_threshold,
                // A forced image only where GC can then use it: with no
                // horizon it would be a second copy of the data beside the
                // history (the threshold still makes images for reads).
                force && self.gc_horizon() > 0,
            ) {
                let outputs = write_image(
                    &version,
                    &[],
                    lsn,
                    &covers,
                    &self.layer_io,
                    &self.job_options(!force, &relocate),
                    take_id,
                    &cancelled,
                )?;
                (Vec::new(), outputs, 0)
            } else if let Some(tier) = tier_plan(
                &runs,
                self.opts.image_run_threshold,
                self.policy().max_inputs,
            ) {
                let (inputs, outputs) = merge(
                    tier.iter()
                        .flat_map(|&i| version.runs[i].layers.iter().cloned())
                        .collect(),
                )?;
                (inputs, outputs, 0)
            } else if let Some((gone, gc_lsn)) = gc_plan(&files, self.gc_horizon()) {
                let layers = version
                    .layers()
                    .filter(|l| gone.contains(&l.desc.id))
                    .cloned()
                    .collect();
                (layers, Vec::new(), gc_lsn)
            } else {
                // Value files mostly garbage: the run layers that point
                // into them written again with those values in place (L0
                // layers move them when they are merged).
                let touched: Vec<Arc<Layer>> = version
                    .runs
                    .iter()
                    .flat_map(|r| &r.layers)
                    .filter(|l| relocate.touches(&l.desc))
                    .take(RELOCATE_LAYERS_MAX)
                    .cloned()
                    .collect();
                if touched.is_empty() {
                    return Ok(false);
                }
                let outputs = rewrite_layers(
                    &touched,
                    &self.layer_io,
                    &self.job_options(!force, &relocate),
                    take_id,
                    &cancelled,
                )?;
                (touched, outputs, 0)
            };
        drop(files);
        drop(version);
        // A job that changes nothing is not recorded (and is not progress:
        // the caller's loop would run it again forever).
        if remove.is_empty() && outputs.is_empty() {
            return Ok(false);
        }
        let edit = Edit::Compacted {
            remove: remove.iter().map(|l| l.desc.id).collect(),
            add: outputs.iter().map(|(d, _)| d.clone()).collect(),
            gc_lsn,
        };
        let layers = outputs
            .into_iter()
            .map(|(desc, reader)| Layer::with_reader(desc, Arc::clone(&self.layer_io), reader))
            .collect();
        drop(remove);
        let removed = self
            .versions
            .log_and_apply(edit, NewFiles::layers(layers))?;
        self.compactions.fetch_add(1, Ordering::Relaxed);
        self.compaction.notify();
        release_when_unread(removed);
        drop(outputs_counted);
        // As after a flush: an eviction that fails is tried again later.
        let _ = self.evict_to_budget();
        Ok(true)
    }

    /// The background thread: compacts while the policy calls for it,
    /// after each flush, until shutdown (see `background::Worker::run`).
    pub(super) fn compaction_loop(&self) {
        crate::io::priority::yield_to_foreground();
        self.compaction.run(
            || self.check_poisoned().is_err(),
            || self.compact_once(false),
        );
    }

    /// Before a write: while the L0 layers are at `l0_stop_layers` and
    /// their compaction fails, the write is refused
    /// (`Error::CompactionBacklog`, nothing written) rather than let L0
    /// grow without bound. Without a background thread, the writer compacts
    /// first, and that compaction's failure refuses it the same way.
    pub(super) fn check_l0_backlog(&self) -> Result<()> {
        if self.opts.l0_compaction_trigger == 0 {
            return Ok(());
        }
        if self.versions.l0_layers() < self.opts.l0_stop_layers {
            return Ok(());
        }
        let refused = |error: String| Error::CompactionBacklog {
            l0: self.versions.l0_layers(),
            error,
        };
        if !self.opts.background_flush {
            loop {
                match self.compact_once(false) {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(e @ Error::Poisoned(_)) => return Err(e),
                    Err(e) => return Err(refused(e.to_string())),
                }
            }
        }
        match &self.compaction.lock()?.error {
            Some(e) => Err(refused(e.clone())),
            None => Ok(()),
        }
    }

    /// Write backpressure on L0: from `l0_slowdown_layers` each write
    /// sleeps 1 ms; from `l0_stop_layers` it waits for a compaction (or,
    /// without a background thread, compacts).
    pub(super) fn wait_for_l0_backlog(&self) -> Result<()> {
        if self.opts.l0_compaction_trigger == 0 {
            return Ok(());
        }
        let l0 = || self.versions.l0_layers();
        let n = l0();
        if n < self.opts.l0_slowdown_layers {
            return Ok(());
        }
        self.pacer.raise(Urgency::WritersWaiting);
        if n < self.opts.l0_stop_layers {
            std::thread::sleep(std::time::Duration::from_millis(1));
            return Ok(());
        }
        if !self.opts.background_flush {
            while self.compact_once(false)? {}
            return Ok(());
        }
        self.signal_compaction();
        let mut s = self.compaction.lock()?;
        while l0() >= self.opts.l0_stop_layers && !s.shutdown {
            self.check_poisoned()?;
            if let Some(e) = &s.error {
                return Err(Error::CompactionBacklog {
                    l0: l0(),
                    error: e.clone(),
                });
            }
            s = self
                .compaction
                .wait(s, std::time::Duration::from_millis(50))?;
        }
        Ok(())
    }
}

//! `SimStorage`: a simulated [`Storage`] for tests — files in memory,
//! deterministic from a seed, with the faults a real disk has.
//!
//! Who uses it: unit tests of the engine and `crates/strata/tests/*.rs`
//! (through the `sim` feature, which the crate's dev-dependency on itself
//! enables), by opening a `Db` with `Options::storage` set to a
//! `SimStorage`. Not part of the engine: nothing in it runs in production.
//!
//! The model:
//! - A file is an inode (bytes) named by entries of a directory. What reads
//!   see changes at once; what survives a power loss changes only when made
//!   durable: a file's writes and length changes by `sync_data` of that
//!   file, a directory's entries (create, rename, remove, mkdir) by
//!   `sync_dir` of that directory (a rename belongs to the directory of its
//!   destination). ext4 is stricter in practice; the engine must not rely on
//!   that.
//! - Power loss ([`SimStorage::power_loss`]): every change not made durable
//!   is, independently, kept, dropped, or (a write) torn: a torn write keeps
//!   a random subset of its 512-byte sectors, and a sector is written whole
//!   or not at all. Unsynced directory changes are kept or lost, each on its
//!   own; entries whose directory is lost go with it. Locks are released.
//!   Every handle from before — files, the storage handle itself — fails
//!   from then on, so a `Db` that was open is dead; the returned handle
//!   opens the storage as it would be found after the reboot.
//! - A failed `sync_data` (an injected fault) leaves the file's unsynced
//!   changes volatile for good: a later successful sync does not make them
//!   durable (Linux drops the dirty pages of a failed writeback and reports
//!   the error once).
//! - Faults ([`Fault`]): every seam call is one operation, counted from 1
//!   ([`SimStorage::ops`]); a fault fails the operation numbered `at_op`
//!   with EIO or ENOSPC, once or, if `persistent`, from then on (persistent
//!   ENOSPC fails only the calls that allocate: writes, creates, mkdir,
//!   growing `set_len`, a lock that creates its file; reads and syncs still
//!   work). A failed call changes nothing. A test counts a workload's
//!   operations once, then replays it with a fault at every N.
//! - Corruption on read ([`ReadCorruption`]): at the Nth read, or with a
//!   probability per read, what a read returns gets a flipped bit, a zeroed
//!   512-byte sector, or the bytes of another offset (a misdirected read);
//!   the stored bytes stay intact. There is no page cache to forget: a
//!   file's `forget_cached` is counted ([`SimStorage::forgotten_ranges`]),
//!   so a test sees each read the engine makes again after a failed check
//!   (and recovery's second read of a log's tail).
//! - Alignment: files report 512 bytes ([`SECTOR_BYTES`]) unless the
//!   options ask for more, and direct reads and writes must be aligned in
//!   address, length and offset, as with O_DIRECT: an unaligned one is an
//!   `InvalidInput::Unaligned` error.
//!
//! Determinism: the same seed and the same sequence of calls give the same
//! results, faults and power-loss outcomes. The engine's background threads
//! (the flush thread, a writer's flusher) can reorder calls between runs;
//! tests that replay a fault at every N turn the background flush off.
//!
//! Thread safety: the state is behind one mutex; a `SimStorage` is a cheap
//! handle (clone it), and its files may be used from any thread.

use super::aligned_buf::align_down;
use super::file::{check_aligned, choose_alignment};
use super::mode::{BlockFile, FileOptions, IoMode};
use super::stats::{FileClass, IoStats, OpKind};
use super::storage::{EntryKind, Storage, StorageFile, StorageLock};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

#[cfg(test)]
mod tests;

/// The unit a simulated device writes atomically, and the alignment its
/// files report.
pub const SECTOR_BYTES: usize = 512;

/// A small deterministic generator (splitmix64).
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator whose sequence is a function of `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `1 / n` (always when `n` <= 1).
    pub fn one_in(&mut self, n: u64) -> bool {
        n <= 1 || self.below(n) == 0
    }
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// EIO: the device failed the operation.
    Eio,
    /// ENOSPC: the device is full.
    Enospc,
}

impl FaultError {
    fn errno(self) -> i32 {
        match self {
            FaultError::Eio => libc::EIO,
            FaultError::Enospc => libc::ENOSPC,
        }
    }
}

/// An injected failure of the operation numbered `at_op` (from 1; see
/// [`SimStorage::ops`]), and, when `persistent`, of every later one (for
/// ENOSPC, every later one that allocates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub at_op: u64,
    pub error: FaultError,
    pub persistent: bool,
}

impl Fault {
    /// Fails the operation numbered `at_op` only.
    pub fn once(at_op: u64, error: FaultError) -> Self {
        Fault {
            at_op,
            error,
            persistent: false,
        }
    }

    /// Fails the operation numbered `at_op` and every later one it applies
    /// to.
    pub fn from_op(at_op: u64, error: FaultError) -> Self {
        Fault {
            at_op,
            error,
            persistent: true,
        }
    }

    fn hits(&self, op_number: u64, allocating: bool) -> bool {
        if self.persistent {
            op_number >= self.at_op && (self.error == FaultError::Eio || allocating)
        } else {
            op_number == self.at_op
        }
    }
}

/// What a corrupted read returns instead of the stored bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorruptionKind {
    /// One bit of the returned bytes flipped.
    BitFlip,
    /// One 512-byte sector (of the file) read as zeros.
    ZeroSector,
    /// The bytes of another offset of the file (a misdirected read).
    Misdirected,
}

/// Which reads return corrupted bytes. Reads are counted from 1 over all
/// files (each read of a batch is one); a read that returns no bytes is
/// never corrupted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadCorruption {
    /// The read numbered this is corrupted; empty: none by number.
    pub at_read: Option<u64>,
    /// Each read is corrupted with probability `1 / one_in_reads`; empty:
    /// none by chance.
    pub one_in_reads: Option<u64>,
    /// The corruption; empty: a random kind each time.
    pub kind: Option<CorruptionKind>,
}

/// The operations counted, named as in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Create,
    Open,
    Read,
    Write,
    Sync,
    SetLen,
    Len,
    Stat,
    List,
    Mkdir,
    Remove,
    Rename,
    SyncDir,
    Lock,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Open => "open",
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "fdatasync",
            Op::SetLen => "set_len",
            Op::Len => "stat",
            Op::Stat => "stat",
            Op::List => "list directory",
            Op::Mkdir => "create directory",
            Op::Remove => "remove",
            Op::Rename => "rename",
            Op::SyncDir => "fsync directory",
            Op::Lock => "lock",
        }
    }
}

/// A change to a file's bytes.
#[derive(Debug, Clone)]
enum FileChange {
    Write { offset: u64, bytes: Vec<u8> },
    SetLen(u64),
}

impl FileChange {
    fn apply(&self, image: &mut Vec<u8>) {
        match self {
            FileChange::Write { offset, bytes } => write_into(image, *offset, bytes),
            FileChange::SetLen(len) => image.resize(to_usize(*len), 0),
        }
    }
}

#[derive(Debug)]
struct LoggedChange {
    change: FileChange,
    /// A sync covered it: it survives a power loss.
    durable: bool,
    /// A sync that should have covered it failed: it stays volatile.
    doomed: bool,
}

/// A file's bytes: what reads see, and what a power loss can leave.
#[derive(Debug, Default)]
struct Inode {
    /// What reads see now.
    data: Vec<u8>,
    /// The bytes before every change of `log`: durable.
    base: Vec<u8>,
    /// Changes since `base`, oldest first.
    log: Vec<LoggedChange>,
    /// Open handles of the current epoch.
    handles: usize,
}

impl Inode {
    fn change(&mut self, change: FileChange) {
        change.apply(&mut self.data);
        self.log.push(LoggedChange {
            change,
            durable: false,
            doomed: false,
        });
    }

    fn sync(&mut self) {
        for c in &mut self.log {
            c.durable |= !c.doomed;
        }
        if self.log.iter().all(|c| c.durable) {
            for c in self.log.drain(..) {
                c.change.apply(&mut self.base);
            }
            debug_assert_eq!(self.base, self.data, "a clean sync leaves base = data");
        }
    }

    fn fail_sync(&mut self) {
        for c in &mut self.log {
            c.doomed |= !c.durable;
        }
    }

    /// The bytes found after a power loss.
    fn lose_power(&mut self, rng: &mut SimRng) {
        let mut image = std::mem::take(&mut self.base);
        for c in self.log.drain(..) {
            if c.durable {
                c.change.apply(&mut image);
                continue;
            }
            match c.change {
                FileChange::SetLen(_) => {
                    if rng.one_in(2) {
                        c.change.apply(&mut image);
                    }
                }
                FileChange::Write { offset, ref bytes } => match rng.below(3) {
                    0 => c.change.apply(&mut image),
                    1 => {}
                    _ => {
                        // Torn: each sector the write touches, whole or not at all.
                        let end = offset + bytes.len() as u64;
                        let mut sector = align_down(offset, SECTOR_BYTES);
                        while sector < end {
                            let from = sector.max(offset);
                            let to = (sector + SECTOR_BYTES as u64).min(end);
                            if rng.one_in(2) {
                                let piece = &bytes[to_usize(from - offset)..to_usize(to - offset)];
                                write_into(&mut image, from, piece);
                            }
                            sector += SECTOR_BYTES as u64;
                        }
                    }
                },
            }
        }
        self.data = image.clone();
        self.base = image;
        self.handles = 0;
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).expect("simulated files fit in memory")
}

fn write_into(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = to_usize(offset);
    let end = start + bytes.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(bytes);
}

/// A change to a directory's entries.
#[derive(Debug, Clone)]
enum DirOp {
    Link { path: PathBuf, ino: u64 },
    Unlink { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
    Mkdir { path: PathBuf },
}

#[derive(Debug, Clone)]
struct DirChange {
    /// The directory whose sync makes it durable.
    dir: PathBuf,
    op: DirOp,
}

/// Names: files (path → inode) and directories. The roots `/` and `.`
/// always exist.
#[derive(Debug, Clone, Default)]
struct Namespace {
    files: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
}

impl Namespace {
    fn apply(&mut self, op: &DirOp) {
        match op {
            DirOp::Link { path, ino } => {
                self.files.insert(path.clone(), *ino);
            }
            DirOp::Unlink { path } => {
                self.files.remove(path);
            }
            DirOp::Rename { from, to } => {
                if let Some(ino) = self.files.remove(from) {
                    self.files.insert(to.clone(), ino);
                }
            }
            DirOp::Mkdir { path } => {
                self.dirs.insert(path.clone());
            }
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        is_root(path) || self.dirs.contains(path)
    }

    /// Drops entries whose directory does not exist (parents sort before
    /// their children, so one pass suffices).
    fn drop_orphans(&mut self) {
        let mut kept = BTreeSet::new();
        for d in std::mem::take(&mut self.dirs) {
            let parent = parent_of(&d);
            if is_root(&parent) || kept.contains(&parent) {
                kept.insert(d);
            }
        }
        self.dirs = kept;
        let dirs = &self.dirs;
        self.files.retain(|p, _| {
            let parent = parent_of(p);
            is_root(&parent) || dirs.contains(&parent)
        });
    }
}

fn is_root(path: &Path) -> bool {
    path == Path::new("/") || path == Path::new(".")
}

/// `path` without `.` components; `.` when nothing is left.
fn normalize(path: &Path) -> PathBuf {
    let p: PathBuf = path
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    if p.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        p
    }
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}

fn os_error(path: &Path, op: Op, errno: i32) -> Error {
    Error::io(path, op.name(), std::io::Error::from_raw_os_error(errno))
}

struct State {
    seed: u64,
    /// Bumped by each power loss; handles of an older epoch fail.
    epoch: u64,
    ops: u64,
    reads: u64,
    corrupted_reads: u64,
    forgotten_ranges: u64,
    power_losses: u64,
    /// Draws for read corruption.
    rng: SimRng,
    faults: Vec<Fault>,
    corruption: ReadCorruption,
    direct_io_supported: bool,
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    /// What calls see.
    live: Namespace,
    /// What a power loss leaves, before the unsynced directory changes.
    durable: Namespace,
    /// Directory changes not yet durable, oldest first.
    dir_log: Vec<DirChange>,
    /// Locked paths and the id of the guard holding each.
    locks: BTreeMap<PathBuf, u64>,
    next_lock_id: u64,
}

impl State {
    /// Counts one operation of a handle of `epoch` and applies the fault
    /// plan to it.
    fn begin(&mut self, epoch: u64, op: Op, allocating: bool, path: &Path) -> Result<()> {
        if epoch != self.epoch {
            return Err(Error::io(
                path,
                op.name(),
                std::io::Error::other(
                    "the simulated machine lost power; this handle is from before",
                ),
            ));
        }
        self.ops += 1;
        let n = self.ops;
        if let Some(f) = self.faults.iter().find(|f| f.hits(n, allocating)) {
            return Err(os_error(path, op, f.error.errno()));
        }
        Ok(())
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        self.inodes
            .get_mut(&ino)
            .expect("an inode with an open handle or a name exists")
    }

    /// Frees inodes that no name, pending change or handle refers to.
    fn collect_garbage(&mut self) {
        let mut used: BTreeSet<u64> = self.live.files.values().copied().collect();
        used.extend(self.durable.files.values().copied());
        for c in &self.dir_log {
            if let DirOp::Link { ino, .. } = c.op {
                used.insert(ino);
            }
        }
        self.inodes
            .retain(|ino, inode| inode.handles > 0 || used.contains(ino));
    }

    fn resolve_mode(&self, path: &Path, opts: &FileOptions) -> Result<IoMode> {
        if !opts.mode.direct_reads() || self.direct_io_supported {
            return Ok(opts.mode);
        }
        if opts.fallback_to_buffered {
            return Ok(IoMode::Buffered);
        }
        Err(Error::DirectIoUnsupported {
            path: path.to_owned(),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })
    }

    fn new_inode(&mut self) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::default());
        ino
    }

    fn link(&mut self, path: &Path, ino: u64) {
        self.live.files.insert(path.to_owned(), ino);
        self.dir_log.push(DirChange {
            dir: parent_of(path),
            op: DirOp::Link {
                path: path.to_owned(),
                ino,
            },
        });
    }

    fn lose_power(&mut self) {
        self.power_losses += 1;
        self.epoch += 1;
        let mut rng = SimRng::new(self.seed ^ SimRng::new(self.power_losses).next_u64());
        let mut names = self.durable.clone();
        for c in std::mem::take(&mut self.dir_log) {
            if rng.one_in(2) {
                names.apply(&c.op);
            }
        }
        names.drop_orphans();
        self.live = names.clone();
        self.durable = names;
        self.locks.clear();
        for inode in self.inodes.values_mut() {
            inode.handles = 0;
        }
        self.collect_garbage();
        for inode in self.inodes.values_mut() {
            inode.lose_power(&mut rng);
        }
    }

    /// Corrupts `buf`, the `buf.len()` bytes just read at `offset` of
    /// `ino`, if the plan says this read is one to corrupt.
    fn maybe_corrupt(&mut self, ino: u64, offset: u64, buf: &mut [u8]) {
        self.reads += 1;
        if buf.is_empty() {
            return;
        }
        let plan = &self.corruption;
        let by_number = plan.at_read == Some(self.reads);
        let one_in = plan.one_in_reads;
        let kind = plan.kind;
        let by_chance = one_in.is_some_and(|n| self.rng.one_in(n));
        if !(by_number || by_chance) {
            return;
        }
        self.corrupted_reads += 1;
        let kind = kind.unwrap_or_else(|| match self.rng.below(3) {
            0 => CorruptionKind::BitFlip,
            1 => CorruptionKind::ZeroSector,
            _ => CorruptionKind::Misdirected,
        });
        let n = buf.len() as u64;
        match kind {
            CorruptionKind::BitFlip => {
                let i = to_usize(self.rng.below(n));
                buf[i] ^= 1 << self.rng.below(8);
            }
            CorruptionKind::ZeroSector => {
                let at = offset + self.rng.below(n);
                let sector = align_down(at, SECTOR_BYTES);
                let from = to_usize(sector.max(offset) - offset);
                let to = to_usize((sector + SECTOR_BYTES as u64).min(offset + n) - offset);
                buf[from..to].fill(0);
            }
            CorruptionKind::Misdirected => {
                let shift = (1 + self.rng.below(8)) * SECTOR_BYTES as u64;
                let other = if offset >= shift && self.rng.one_in(2) {
                    offset - shift
                } else {
                    offset + shift
                };
                let data = &self.inode(ino).data;
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = data.get(to_usize(other) + i).copied().unwrap_or_default();
                }
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
}

/// A simulated storage (see the module documentation). A handle: clones
/// share the storage; a power loss returns a new handle and kills the old.
#[derive(Clone)]
pub struct SimStorage {
    shared: Arc<Shared>,
    /// The epoch this handle belongs to.
    epoch: u64,
}

impl std::fmt::Debug for SimStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("SimStorage");
        d.field("epoch", &self.epoch);
        if let Ok(st) = self.shared.state.try_lock() {
            d.field("seed", &st.seed)
                .field("ops", &st.ops)
                .field("power_losses", &st.power_losses);
        }
        d.finish()
    }
}

impl SimStorage {
    /// An empty storage (only the roots `/` and `.` exist) whose random
    /// choices follow from `seed`.
    pub fn new(seed: u64) -> Self {
        let state = State {
            seed,
            epoch: 0,
            ops: 0,
            reads: 0,
            corrupted_reads: 0,
            forgotten_ranges: 0,
            power_losses: 0,
            rng: SimRng::new(seed),
            faults: Vec::new(),
            corruption: ReadCorruption::default(),
            direct_io_supported: true,
            inodes: BTreeMap::new(),
            next_ino: 1,
            live: Namespace::default(),
            durable: Namespace::default(),
            dir_log: Vec::new(),
            locks: BTreeMap::new(),
            next_lock_id: 1,
        };
        SimStorage {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
            }),
            epoch: 0,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock left a consistent
        // state (every change is applied whole under the lock).
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.state().seed
    }

    /// Operations counted so far; the next one is numbered `ops() + 1`.
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// Reads counted so far (for [`ReadCorruption::at_read`]).
    pub fn reads(&self) -> u64 {
        self.state().reads
    }

    /// Reads that returned corrupted bytes so far.
    pub fn corrupted_reads(&self) -> u64 {
        self.state().corrupted_reads
    }

    /// Calls of a file's `forget_cached` so far: one before each read made
    /// again after bytes read failed their check (`io::read_verified`), and
    /// before recovery reads a log's tail again to compare it.
    pub fn forgotten_ranges(&self) -> u64 {
        self.state().forgotten_ranges
    }

    /// Power losses so far.
    pub fn power_losses(&self) -> u64 {
        self.state().power_losses
    }

    /// Adds `fault` to the fault plan.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push(fault);
    }

    /// Empties the fault plan.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Sets which reads return corrupted bytes.
    pub fn set_read_corruption(&self, corruption: ReadCorruption) {
        self.state().corruption = corruption;
    }

    /// Whether files may be opened for direct I/O; where not, opening one
    /// fails like on tmpfs (or falls back, as the options say).
    pub fn set_direct_io_supported(&self, supported: bool) {
        self.state().direct_io_supported = supported;
    }

    /// Cuts the power: the storage as it is found after the reboot (see the
    /// module documentation), as a new handle. Every handle from before,
    /// this one included, fails from now on.
    pub fn power_loss(&self) -> SimStorage {
        let mut st = self.state();
        st.lose_power();
        SimStorage {
            shared: Arc::clone(&self.shared),
            epoch: st.epoch,
        }
    }

    /// The bytes reads of `path` would return now (uncorrupted), without
    /// counting an operation; empty when no file has that name.
    pub fn file_bytes(&self, path: impl AsRef<Path>) -> Option<Vec<u8>> {
        let mut st = self.state();
        let ino = *st.live.files.get(&normalize(path.as_ref()))?;
        Some(st.inode(ino).data.clone())
    }

    /// Changes the stored bytes of `path` in place, as decay on the medium
    /// or a device bug would, without counting an operation: `damage` gets
    /// what reads see now, and the durable bytes get the same change at the
    /// same offsets. Returns false when no file has that name.
    pub fn rot(&self, path: impl AsRef<Path>, damage: impl Fn(&mut [u8])) -> bool {
        let mut st = self.state();
        let Some(&ino) = st.live.files.get(&normalize(path.as_ref())) else {
            return false;
        };
        let inode = st.inode(ino);
        let before = inode.data.clone();
        damage(&mut inode.data);
        for (i, (&was, &now)) in before.iter().zip(&inode.data).enumerate() {
            if was != now {
                if let Some(b) = inode.base.get_mut(i) {
                    *b ^= was ^ now;
                }
            }
        }
        true
    }

    /// The paths of every file, without counting an operation.
    pub fn file_paths(&self) -> Vec<PathBuf> {
        self.state().live.files.keys().cloned().collect()
    }

    fn open_file(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
        create: bool,
    ) -> Result<Arc<dyn StorageFile>> {
        let path = normalize(path);
        let mut st = self.state();
        let op = if create { Op::Create } else { Op::Open };
        st.begin(self.epoch, op, create, &path)?;
        if st.live.is_dir(&path) {
            return Err(os_error(&path, op, libc::EISDIR));
        }
        if !st.live.is_dir(&parent_of(&path)) {
            return Err(os_error(&path, op, libc::ENOENT));
        }
        let mode = st.resolve_mode(&path, opts)?;
        let alignment = choose_alignment(Some(SECTOR_BYTES), opts.alignment_bytes)?;
        let ino = match (st.live.files.get(&path).copied(), create) {
            (Some(ino), true) => {
                st.inode(ino).change(FileChange::SetLen(0));
                ino
            }
            (Some(ino), false) => ino,
            (None, true) => {
                let ino = st.new_inode();
                st.link(&path, ino);
                ino
            }
            (None, false) => return Err(os_error(&path, op, libc::ENOENT)),
        };
        st.inode(ino).handles += 1;
        Ok(Arc::new(SimFile {
            sim: self.clone(),
            ino,
            path,
            mode,
            alignment,
            class: opts.class,
            stats: stats.clone(),
        }))
    }
}

impl Storage for SimStorage {
    fn create(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        self.open_file(path, opts, stats, true)
    }

    fn open(
        &self,
        path: &Path,
        opts: &FileOptions,
        stats: &IoStats,
    ) -> Result<Arc<dyn StorageFile>> {
        self.open_file(path, opts, stats, false)
    }

    fn entry_kind(&self, path: &Path) -> Result<Option<EntryKind>> {
        let path = normalize(path);
        let mut st = self.state();
        st.begin(self.epoch, Op::Stat, false, &path)?;
        Ok(if st.live.is_dir(&path) {
            Some(EntryKind::Dir)
        } else if st.live.files.contains_key(&path) {
            Some(EntryKind::File)
        } else {
            None
        })
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<OsString>> {
        let dir = normalize(dir);
        let mut st = self.state();
        st.begin(self.epoch, Op::List, false, &dir)?;
        if !st.live.is_dir(&dir) {
            let errno = if st.live.files.contains_key(&dir) {
                libc::ENOTDIR
            } else {
                libc::ENOENT
            };
            return Err(os_error(&dir, Op::List, errno));
        }
        let names: BTreeSet<OsString> = st
            .live
            .files
            .keys()
            .chain(&st.live.dirs)
            .filter(|p| parent_of(p) == dir)
            .filter_map(|p| p.file_name().map(|n| n.to_owned()))
            .collect();
        Ok(names.into_iter().collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        let mut st = self.state();
        st.begin(self.epoch, Op::Mkdir, true, &dir)?;
        let mut path = PathBuf::new();
        let mut missing = Vec::new();
        for c in dir.components() {
            path.push(c);
            if st.live.files.contains_key(&path) {
                return Err(os_error(&path, Op::Mkdir, libc::ENOTDIR));
            }
            if !st.live.is_dir(&path) {
                missing.push(path.clone());
            }
        }
        for path in missing {
            st.live.dirs.insert(path.clone());
            st.dir_log.push(DirChange {
                dir: parent_of(&path),
                op: DirOp::Mkdir { path },
            });
        }
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let path = normalize(path);
        let mut st = self.state();
        st.begin(self.epoch, Op::Remove, false, &path)?;
        if st.live.files.remove(&path).is_none() {
            let errno = if st.live.is_dir(&path) {
                libc::EISDIR
            } else {
                libc::ENOENT
            };
            return Err(os_error(&path, Op::Remove, errno));
        }
        st.dir_log.push(DirChange {
            dir: parent_of(&path),
            op: DirOp::Unlink { path },
        });
        st.collect_garbage();
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (from, to) = (normalize(from), normalize(to));
        let mut st = self.state();
        st.begin(self.epoch, Op::Rename, false, &to)?;
        if st.live.is_dir(&to) {
            return Err(os_error(&to, Op::Rename, libc::EISDIR));
        }
        if !st.live.is_dir(&parent_of(&to)) {
            return Err(os_error(&to, Op::Rename, libc::ENOENT));
        }
        let Some(ino) = st.live.files.remove(&from) else {
            return Err(os_error(&from, Op::Rename, libc::ENOENT));
        };
        st.live.files.insert(to.clone(), ino);
        st.dir_log.push(DirChange {
            dir: parent_of(&to),
            op: DirOp::Rename { from, to },
        });
        st.collect_garbage();
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let dir = normalize(dir);
        let mut st = self.state();
        st.begin(self.epoch, Op::SyncDir, false, &dir)?;
        if !st.live.is_dir(&dir) {
            return Err(os_error(&dir, Op::SyncDir, libc::ENOENT));
        }
        let (now, later): (Vec<DirChange>, Vec<DirChange>) = std::mem::take(&mut st.dir_log)
            .into_iter()
            .partition(|c| c.dir == dir);
        for c in &now {
            st.durable.apply(&c.op);
        }
        st.dir_log = later;
        st.collect_garbage();
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<StorageLock> {
        let path = normalize(path);
        let mut st = self.state();
        let exists = st.live.files.contains_key(&path);
        st.begin(self.epoch, Op::Lock, !exists, &path)?;
        if !st.live.is_dir(&parent_of(&path)) {
            return Err(os_error(&path, Op::Lock, libc::ENOENT));
        }
        if st.locks.contains_key(&path) {
            return Err(Error::io(
                &path,
                "lock (is another process using this database?)",
                std::io::Error::from_raw_os_error(libc::EWOULDBLOCK),
            ));
        }
        if !exists {
            let ino = st.new_inode();
            st.link(&path, ino);
        }
        let id = st.next_lock_id;
        st.next_lock_id += 1;
        st.locks.insert(path.clone(), id);
        Ok(StorageLock::new(SimLockGuard {
            shared: Arc::clone(&self.shared),
            path,
            id,
        }))
    }
}

/// Holds a simulated lock; dropping it releases the lock, unless a power
/// loss released it already.
struct SimLockGuard {
    shared: Arc<Shared>,
    path: PathBuf,
    id: u64,
}

impl Drop for SimLockGuard {
    fn drop(&mut self) {
        let mut st = self
            .shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if st.locks.get(&self.path) == Some(&self.id) {
            st.locks.remove(&self.path);
        }
    }
}

/// A file of a [`SimStorage`].
pub struct SimFile {
    sim: SimStorage,
    ino: u64,
    path: PathBuf,
    mode: IoMode,
    alignment: usize,
    class: FileClass,
    stats: IoStats,
}

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFile")
            .field("path", &self.path)
            .field("ino", &self.ino)
            .field("mode", &self.mode)
            .field("alignment", &self.alignment)
            .finish()
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.sim.state();
        if st.epoch == self.sim.epoch {
            st.inode(self.ino).handles -= 1;
            st.collect_garbage();
        }
    }
}

impl BlockFile for SimFile {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.mode.direct_writes() {
            check_aligned(self.alignment, buf.as_ptr() as usize, buf.len(), offset)?;
        }
        {
            let mut st = self.sim.state();
            st.begin(self.sim.epoch, Op::Write, true, &self.path)?;
            st.inode(self.ino).change(FileChange::Write {
                offset,
                bytes: buf.to_vec(),
            });
        }
        self.stats
            .record(self.class, OpKind::Write, buf.len() as u64);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        if self.mode.direct_reads() {
            check_aligned(self.alignment, buf.as_ptr() as usize, buf.len(), offset)?;
        }
        let n = {
            let mut st = self.sim.state();
            st.begin(self.sim.epoch, Op::Read, false, &self.path)?;
            let data = &st.inode(self.ino).data;
            let start = to_usize(offset).min(data.len());
            let n = (data.len() - start).min(buf.len());
            buf[..n].copy_from_slice(&data[start..start + n]);
            st.maybe_corrupt(self.ino, offset, &mut buf[..n]);
            n
        };
        self.stats.record(self.class, OpKind::Read, n as u64);
        Ok(n)
    }

    fn sync_data(&self) -> Result<()> {
        {
            let mut st = self.sim.state();
            if let Err(e) = st.begin(self.sim.epoch, Op::Sync, false, &self.path) {
                if st.epoch == self.sim.epoch {
                    st.inode(self.ino).fail_sync();
                }
                return Err(e);
            }
            st.inode(self.ino).sync();
        }
        self.stats.record(self.class, OpKind::Sync, 0);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let mut st = self.sim.state();
        let grows = st.epoch == self.sim.epoch && len > st.inode(self.ino).data.len() as u64;
        st.begin(self.sim.epoch, Op::SetLen, grows, &self.path)?;
        st.inode(self.ino).change(FileChange::SetLen(len));
        Ok(())
    }

    fn alignment(&self) -> usize {
        self.alignment
    }

    fn direct_writes(&self) -> bool {
        self.mode.direct_writes()
    }
}

impl StorageFile for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn mode(&self) -> IoMode {
        self.mode
    }

    fn class(&self) -> FileClass {
        self.class
    }

    fn len(&self) -> Result<u64> {
        let mut st = self.sim.state();
        st.begin(self.sim.epoch, Op::Len, false, &self.path)?;
        Ok(st.inode(self.ino).data.len() as u64)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn forget_cached(&self, _offset: u64, _len: u64) {
        self.sim.state().forgotten_ranges += 1;
    }
}

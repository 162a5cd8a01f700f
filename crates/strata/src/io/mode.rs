//! The storage seam's vocabulary: how a file is opened (its I/O mode and
//! engine, `FileOptions`, the alignment limits) and what a writer needs of
//! a file (`BlockFile`). It imports no implementation: the operating
//! system's files (`file.rs`), the simulated storage (`sim.rs`) and the
//! seam's traits (`storage.rs`) all build on it.
//!
//! Invariants: an `IoMode` or `IoEngine` reads back from its `Display`
//! text, and an `IoMode` serializes (serde) as that same name;
//! `FileOptions::default()` is buffered I/O through pread/pwrite.

use super::stats::FileClass;
use crate::error::{InvalidInput, Result};
use std::str::FromStr;

/// The alignment used where the kernel does not report a direct-I/O alignment.
pub const ALIGNMENT_DEFAULT_BYTES: usize = 4096;
/// The largest alignment accepted as an override.
pub const ALIGNMENT_MAX_BYTES: usize = 1 << 20;

/// Whether reads and writes bypass the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoMode {
    /// Page cache for reads and writes.
    Buffered,
    /// O_DIRECT reads, buffered writes.
    Direct,
    /// O_DIRECT reads and writes.
    #[default]
    DirectRw,
}

/// How operations reach the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IoEngine {
    /// pread / pwrite / fdatasync system calls.
    #[default]
    Sync,
    /// io_uring submissions (a ring per thread).
    IoUring,
}

impl IoMode {
    /// Every mode.
    pub const ALL: [IoMode; 3] = [IoMode::Buffered, IoMode::Direct, IoMode::DirectRw];
    /// The variable that overrides the mode.
    pub const ENV: &'static str = "STRATA_IO_MODE";

    /// The mode named by `STRATA_IO_MODE`, if set; an unknown name is an error.
    pub fn from_env() -> Result<Option<IoMode>> {
        env_value(Self::ENV)
    }

    /// True when reads use O_DIRECT.
    pub fn direct_reads(self) -> bool {
        !matches!(self, IoMode::Buffered)
    }

    /// True when writes use O_DIRECT.
    pub fn direct_writes(self) -> bool {
        matches!(self, IoMode::DirectRw)
    }

    /// The name accepted by `FromStr` and the variable.
    pub fn name(self) -> &'static str {
        match self {
            IoMode::Buffered => "buffered",
            IoMode::Direct => "direct",
            IoMode::DirectRw => "direct-rw",
        }
    }
}

impl IoEngine {
    /// Every engine.
    pub const ALL: [IoEngine; 2] = [IoEngine::Sync, IoEngine::IoUring];
    /// The variable that overrides the engine.
    pub const ENV: &'static str = "STRATA_IO_ENGINE";

    /// The engine named by `STRATA_IO_ENGINE`, if set; an unknown name is an error.
    pub fn from_env() -> Result<Option<IoEngine>> {
        env_value(Self::ENV)
    }

    /// The name accepted by `FromStr` and the variable.
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Sync => "sync",
            IoEngine::IoUring => "io-uring",
        }
    }
}

fn env_value<T: FromStr<Err = InvalidInput>>(var: &str) -> Result<Option<T>> {
    match std::env::var(var) {
        Ok(value) if value.is_empty() => Ok(None),
        Ok(value) => Ok(Some(value.parse()?)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(InvalidInput::UnknownOptionValue {
            option: "environment variable",
            value: v.to_string_lossy().into_owned(),
            expected: "UTF-8",
        }
        .into()),
    }
}

impl FromStr for IoMode {
    type Err = InvalidInput;
    fn from_str(s: &str) -> std::result::Result<Self, InvalidInput> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "buffered" => Ok(IoMode::Buffered),
            "direct" => Ok(IoMode::Direct),
            "direct-rw" | "directrw" => Ok(IoMode::DirectRw),
            _ => Err(InvalidInput::UnknownOptionValue {
                option: "io_mode",
                value: s.to_owned(),
                expected: "buffered, direct, direct-rw",
            }),
        }
    }
}

impl FromStr for IoEngine {
    type Err = InvalidInput;
    fn from_str(s: &str) -> std::result::Result<Self, InvalidInput> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "sync" | "psync" => Ok(IoEngine::Sync),
            "io-uring" | "iouring" | "uring" => Ok(IoEngine::IoUring),
            _ => Err(InvalidInput::UnknownOptionValue {
                option: "io_engine",
                value: s.to_owned(),
                expected: "sync, io-uring",
            }),
        }
    }
}

impl std::fmt::Display for IoMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// As its name (`"direct-rw"`), the form `FromStr` reads.
impl serde::Serialize for IoMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for IoEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to open a file.
#[derive(Debug, Clone, Default)]
pub struct FileOptions {
    pub mode: IoMode,
    pub engine: IoEngine,
    /// The class the file's operations are counted under.
    pub class: FileClass,
    /// Where the filesystem refuses O_DIRECT, open in `Buffered` mode instead
    /// of failing.
    pub fallback_to_buffered: bool,
    /// Overrides the alignment read from the kernel; must be a power of two,
    /// at least the kernel's, at most [`ALIGNMENT_MAX_BYTES`]. `None`: the
    /// kernel's (statx DIO alignment), or 4096 where it reports none.
    pub alignment_bytes: Option<usize>,
}

impl FileOptions {
    /// Applies `STRATA_IO_MODE` and `STRATA_IO_ENGINE` where set.
    pub fn with_env_overrides(mut self) -> Result<Self> {
        if let Some(mode) = IoMode::from_env()? {
            self.mode = mode;
        }
        if let Some(engine) = IoEngine::from_env()? {
            self.engine = engine;
        }
        Ok(self)
    }
}

/// What a [`super::BufferedWriter`] needs from a file. `IoFile` is the real
/// one; tests wrap it to record or to fail operations.
pub trait BlockFile: Send + Sync + 'static {
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Reads into `buf` at `offset`; returns bytes read (short only at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;
    /// Makes written data durable (fdatasync).
    fn sync_data(&self) -> Result<()>;
    /// Sets the file's length.
    fn set_len(&self, len: u64) -> Result<()>;
    /// The alignment of offsets, lengths and (when `direct_writes`) addresses.
    fn alignment(&self) -> usize;
    /// True when writes bypass the page cache, so memory must be aligned too.
    fn direct_writes(&self) -> bool;
}

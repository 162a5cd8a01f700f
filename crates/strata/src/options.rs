//! Options of a database and of a write, with their limits.
//!
//! Every limit is a named constant; `Options::validate` checks an options
//! value against them before anything is created, so a bad option is a typed
//! error and nothing is written.

use crate::error::{InvalidInput, Result};
use crate::io::{IoEngine, IoMode, Storage};
use std::sync::Arc;

/// Longest key, bytes. Keys are 1..=KEY_BYTES_MAX bytes.
pub const KEY_BYTES_MAX: usize = 4096;
/// Default value size limit, bytes (`Options::value_size_bytes_max`).
pub const VALUE_BYTES_MAX_DEFAULT: usize = 16 << 20;
/// The highest value size limit an option may set, bytes.
pub const VALUE_BYTES_MAX_LIMIT: usize = crate::layer::delta::VALUE_BYTES_MAX;
/// Largest serialized batch, bytes (the log record's length field is u32).
pub const BATCH_BYTES_MAX: usize = 1 << 30;
/// Smallest and largest in-memory layer size cap, bytes.
pub const LAYER_BYTES_MIN: u64 = 64 << 10;
pub const LAYER_BYTES_MAX: u64 = 4 << 30;
/// Default in-memory layer size cap, bytes.
pub const LAYER_BYTES_DEFAULT: u64 = 128 << 20;
/// Default capacity of each of a writer's two buffers, bytes.
pub const WRITER_BUFFER_BYTES_DEFAULT: usize = 1 << 20;
/// Default of `Options::frozen_layers_max`.
pub const FROZEN_LAYERS_MAX_DEFAULT: usize = 4;
/// Target size of a delta layer's data block, bytes.
pub const DELTA_BLOCK_BYTES_DEFAULT: usize = 4 << 10;

/// Checks a key against the key limits (1..=KEY_BYTES_MAX bytes).
pub(crate) fn check_key(key: &[u8]) -> std::result::Result<(), InvalidInput> {
    if key.is_empty() {
        return Err(InvalidInput::KeyEmpty { max: KEY_BYTES_MAX });
    }
    if key.len() > KEY_BYTES_MAX {
        return Err(InvalidInput::KeyTooLong {
            len: key.len(),
            max: KEY_BYTES_MAX,
        });
    }
    Ok(())
}

/// How a database is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// Page cache or O_DIRECT (`STRATA_IO_MODE` overrides it).
    pub io_mode: IoMode,
    /// pread/pwrite or io_uring (`STRATA_IO_ENGINE` overrides it).
    pub io_engine: IoEngine,
    /// Where the filesystem refuses O_DIRECT, use buffered I/O instead of failing.
    pub fallback_to_buffered: bool,
    /// Size at which the open in-memory layer (its log) is frozen.
    pub layer_size_bytes_max: u64,
    /// Capacity of each of the log writer's two buffers.
    pub writer_buffer_bytes: usize,
    /// Overrides the direct-I/O alignment the kernel reports (power of two).
    pub alignment_bytes: Option<usize>,
    /// Versions newer than `last LSN - history_lsns` stay readable with
    /// `get_at`/`scan_at`; `None` keeps every version. (Nothing is collected
    /// before compaction exists; the option is validated and recorded.)
    pub history_lsns: Option<u64>,
    /// Largest value accepted, bytes.
    pub value_size_bytes_max: usize,
    /// Target data block size of delta layers, bytes.
    pub delta_block_bytes: usize,
    /// Flush frozen layers in a background thread (otherwise `flush()` does,
    /// or a writer when the backlog passes `frozen_layers_max`).
    pub background_flush: bool,
    /// Most frozen layers waiting for their flush before writers stall.
    pub frozen_layers_max: usize,
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Where the database's files live: every operating-system call goes
    /// through it. Empty: the operating system's ([`crate::io::OsStorage`]);
    /// tests put a simulated storage here.
    pub storage: Option<Arc<dyn Storage>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            io_mode: IoMode::DirectRw,
            io_engine: IoEngine::Sync,
            fallback_to_buffered: true,
            layer_size_bytes_max: LAYER_BYTES_DEFAULT,
            writer_buffer_bytes: WRITER_BUFFER_BYTES_DEFAULT,
            alignment_bytes: None,
            history_lsns: None,
            value_size_bytes_max: VALUE_BYTES_MAX_DEFAULT,
            delta_block_bytes: DELTA_BLOCK_BYTES_DEFAULT,
            background_flush: true,
            frozen_layers_max: FROZEN_LAYERS_MAX_DEFAULT,
            create_if_missing: true,
            storage: None,
        }
    }
}

impl Options {
    /// Applies `STRATA_IO_MODE` / `STRATA_IO_ENGINE` where set.
    pub fn with_env_overrides(mut self) -> Result<Self> {
        if let Some(mode) = IoMode::from_env()? {
            self.io_mode = mode;
        }
        if let Some(engine) = IoEngine::from_env()? {
            self.io_engine = engine;
        }
        Ok(self)
    }

    /// Checks every option against its limits.
    pub fn validate(&self) -> Result<()> {
        let range = |option: &'static str, value: u64, lo: u64, hi: u64, why: &'static str| {
            if value < lo || value > hi {
                Err(InvalidInput::OptionOutOfRange { option, value, why })
            } else {
                Ok(())
            }
        };
        range(
            "layer_size_bytes_max",
            self.layer_size_bytes_max,
            LAYER_BYTES_MIN,
            LAYER_BYTES_MAX,
            "64 KiB ..= 4 GiB",
        )?;
        range(
            "writer_buffer_bytes",
            self.writer_buffer_bytes as u64,
            4096,
            256 << 20,
            "4 KiB ..= 256 MiB",
        )?;
        range(
            "value_size_bytes_max",
            self.value_size_bytes_max as u64,
            0,
            VALUE_BYTES_MAX_LIMIT as u64,
            "at most 64 MiB (the delta layer format limit)",
        )?;
        range(
            "delta_block_bytes",
            self.delta_block_bytes as u64,
            512,
            16 << 20,
            "512 B ..= 16 MiB",
        )?;
        range(
            "frozen_layers_max",
            self.frozen_layers_max as u64,
            1,
            1024,
            "1 ..= 1024",
        )?;
        if let Some(a) = self.alignment_bytes {
            if !a.is_power_of_two() {
                return Err(InvalidInput::OptionOutOfRange {
                    option: "alignment_bytes",
                    value: a as u64,
                    why: "must be a power of two",
                }
                .into());
            }
        }
        Ok(())
    }
}

/// How a write is made.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// Durable before `write` returns (fdatasync of the log, shared with
    /// concurrent writers: group commit).
    pub sync: bool,
}

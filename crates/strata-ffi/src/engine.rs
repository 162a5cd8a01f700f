//! The engine API the C layer calls: `Db`, `Options`, `WriteBatch`,
//! `WriteOptions`, re-exported from `strata`.
//!
//! `strata::Db` is still being written. Until it lands, this module defines a
//! stand-in with the same signatures whose `open` fails with a message saying
//! so, so that the workspace builds and the C API, its tests and the fio
//! engine can be built against the final shape. Building with
//! `RUSTFLAGS="--cfg strata_ffi_real_db"` uses `strata`'s own types instead.
//! TODO(issue 5): drop the stand-in when `strata::Db` is in `lib.rs`.

#[cfg(strata_ffi_real_db)]
pub use strata::{Db, Options, WriteBatch, WriteOptions};

#[cfg(not(strata_ffi_real_db))]
pub use pending::{Db, Options, WriteBatch, WriteOptions};

#[cfg(not(strata_ffi_real_db))]
#[allow(dead_code)] // a stand-in: fields mirror the real API
mod pending {
    use std::path::Path;

    use strata::{Error, IoEngine, IoMode};

    #[derive(Debug, Clone)]
    pub struct Options {
        pub io_mode: IoMode,
        pub io_engine: IoEngine,
        pub layer_size_bytes_max: u64,
        pub writer_buffer_bytes: usize,
        pub value_size_bytes_max: usize,
        pub fallback_to_buffered: bool,
        pub alignment_bytes: Option<usize>,
        pub history_lsns: Option<u64>,
        pub delta_block_bytes: usize,
        pub background_flush: bool,
        pub create_if_missing: bool,
    }

    impl Default for Options {
        fn default() -> Self {
            Options {
                io_mode: IoMode::default(),
                io_engine: IoEngine::default(),
                layer_size_bytes_max: 64 << 20,
                writer_buffer_bytes: 1 << 20,
                value_size_bytes_max: 16 << 20,
                fallback_to_buffered: true,
                alignment_bytes: None,
                history_lsns: None,
                delta_block_bytes: 16 << 10,
                background_flush: true,
                create_if_missing: true,
            }
        }
    }

    #[derive(Debug, Clone, Copy, Default)]
    pub struct WriteOptions {
        pub sync: bool,
    }

    #[derive(Debug, Default)]
    pub struct WriteBatch;

    impl WriteBatch {
        pub fn new() -> Self {
            WriteBatch
        }
        pub fn put(&mut self, _key: &[u8], _value: &[u8]) {}
        pub fn delete(&mut self, _key: &[u8]) {}
    }

    /// Never constructed: `open` always fails.
    pub struct Db(std::convert::Infallible);

    impl Db {
        pub fn open(path: impl AsRef<Path>, _options: Options) -> Result<Db, Error> {
            Err(Error::NotADatabase {
                path: path.as_ref().to_path_buf(),
                why: "this build of strata-ffi predates strata::Db (see crates/strata-ffi/src/engine.rs)".into(),
            })
        }
        pub fn write(&self, _batch: &WriteBatch, _options: WriteOptions) -> Result<u64, Error> {
            match self.0 {}
        }
        pub fn get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
            match self.0 {}
        }
        pub fn sync(&self) -> Result<(), Error> {
            match self.0 {}
        }
        pub fn flush(&self) -> Result<(), Error> {
            match self.0 {}
        }
        pub fn stats(&self) -> &'static str {
            match self.0 {}
        }
        pub fn close(self) -> Result<(), Error> {
            match self.0 {}
        }
    }
}

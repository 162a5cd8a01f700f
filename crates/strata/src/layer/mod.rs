//! Layer files: the immutable, sorted files that frozen in-memory layers are
//! flushed to and that compaction rewrites.
//!
//! - [`delta`]: the delta layer (key range × LSN range, every version), its
//!   writer and its reader.
//! - [`file`]: a finished layer file read through the io layer.
//! - [`bloom`]: the bloom filter over a layer's distinct keys, shared by the
//!   layer formats.
//!
//! Every layer file is written once, in order, through a
//! [`delta::LayerSink`], and read positionally through a [`delta::ReadAt`];
//! the byte layout is documented in `docs/format.md`.

pub(crate) mod bloom;
pub(crate) mod delta;
pub(crate) mod file;
pub(crate) mod inmemory;

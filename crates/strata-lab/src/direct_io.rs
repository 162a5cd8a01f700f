//! O_DIRECT for the lab's own probes (the device line, the random-read
//! sweep): a heap buffer aligned for direct I/O, an owned file descriptor,
//! and opening a file with O_DIRECT (with an error that says why a
//! filesystem may refuse it).
//!
//! Invariants: a `DirectBuf` is aligned to `ALIGNMENT_BYTES` and zeroed when
//! made; an `Fd` is closed exactly once, when dropped.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Result};

/// Alignment of the probes' buffers and offsets; a multiple of every DIO
/// alignment Linux reports.
pub(crate) const ALIGNMENT_BYTES: usize = 4096;

/// A heap buffer aligned for O_DIRECT.
pub(crate) struct DirectBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl DirectBuf {
    pub(crate) fn new(len: usize) -> Result<DirectBuf> {
        if len == 0 {
            bail!("a direct-I/O buffer of 0 bytes");
        }
        let layout = std::alloc::Layout::from_size_align(len, ALIGNMENT_BYTES)?;
        // SAFETY: layout has a non-zero size (checked above).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("out of memory for a {len}-byte buffer");
        }
        Ok(DirectBuf { ptr, layout })
    }

    /// The buffer's first byte, for a system call.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The buffer's first byte, for a system call that fills it.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is a live allocation of layout.size() bytes we own.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for DirectBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

pub(crate) struct Fd(pub(crate) libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

pub(crate) fn open_direct(path: &Path, flags: libc::c_int) -> Result<Fd> {
    let c_path = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: c_path is a valid NUL-terminated string.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            flags | libc::O_DIRECT | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        bail!(
            "open {} with O_DIRECT: {err} (tmpfs and some filesystems refuse O_DIRECT; use --dir on a real disk)",
            path.display()
        );
    }
    Ok(Fd(fd))
}

//! What every frame reader hands out and how it fails: a frame with its time, the error
//! that names the file, frame and byte, and the magic numbers that make a file a capture.
//! A leaf module: the capture reader ([`crate::pcap`]) and the BinaryFILE reader
//! ([`crate::binaryfile`]) both use it.

use std::fmt;
use std::path::PathBuf;

/// A file-level error: what went wrong, in which file, at which frame and byte.
#[derive(Debug)]
pub struct PcapError {
    pub path: PathBuf,
    /// 1-based frame number, when the error concerns a frame.
    pub frame: Option<u64>,
    pub offset: Option<u64>,
    pub reason: String,
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(n) = self.frame {
            write!(f, ": frame {n}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " (byte {o})")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for PcapError {}

/// A captured frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub ts_ns: u64,
    pub data: &'a [u8],
    /// Length on the wire (may exceed `data.len()` when the capture was cut short).
    pub orig_len: u32,
}

impl Frame<'_> {
    /// Whether the capture kept less of the frame than was on the wire (its snapshot
    /// length).
    #[inline]
    pub fn is_cut_short(&self) -> bool {
        self.orig_len as usize > self.data.len()
    }
}

/// Whether `head` (a file's first bytes) is a pcap or pcapng magic number.
pub fn capture_magic(head: &[u8]) -> bool {
    head.first_chunk::<4>().is_some_and(|m| {
        matches!(u32::from_le_bytes(*m), 0xa1b2_c3d4 | 0xa1b2_3c4d | 0xd4c3_b2a1 | 0x4d3c_b2a1 | 0x0a0d_0d0a)
    })
}

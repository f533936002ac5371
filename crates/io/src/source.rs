//! Where frames come from. A [`Source`] gives each frame with its input and its receive
//! time; the runner ([`crate::runner`]) drives the arbitrator and the later stages from it,
//! the same way whatever the source is. Captures replayed in time order
//! ([`MergedReader`]) are a source today; a live socket is one more implementation, with
//! nothing downstream changed.

use tickplant_core::LinkType;

use crate::pcap::{Frame, MergedReader, PcapError};

/// Frames of one or more inputs (A, B, ...), each with its receive time.
pub trait Source {
    /// Why a frame could not be had (a capture that breaks its format, a socket error).
    type Error: std::error::Error + Send + Sync + 'static;
    /// The next frame of any input, with the input's index; `Ok(None)` when every input
    /// has ended.
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, Self::Error>;
    /// How many inputs there are.
    fn inputs(&self) -> usize;
    /// The link layer of an input's frames.
    fn link_type(&self, input: usize) -> LinkType;
    /// An input's name for messages (the capture's path, the group's address).
    fn input_name(&self, input: usize) -> String;
    /// Frames read so far from an input (the last one handed out included).
    fn frames_read(&self, input: usize) -> u64;
}

impl Source for MergedReader {
    type Error = PcapError;
    #[inline]
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, PcapError> {
        MergedReader::next_frame(self)
    }
    fn inputs(&self) -> usize {
        self.readers().len()
    }
    fn link_type(&self, input: usize) -> LinkType {
        self.readers()[input].link_type()
    }
    fn input_name(&self, input: usize) -> String {
        self.readers()[input].path().display().to_string()
    }
    fn frames_read(&self, input: usize) -> u64 {
        self.readers()[input].frames_read()
    }
}

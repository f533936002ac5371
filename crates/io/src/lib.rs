//! Everything of tickplant that touches the OS. So far: pcap and pcapng files, read and
//! written, with time-ordered merging of several captures for replay.

pub mod clock;
pub mod fix_store;
pub mod fixnet;
pub mod itch;
pub mod pcap;
pub mod pipeline;
pub mod tstamp;

pub use pcap::{Format, Frame, FrameReader, FrameWriter, MergedReader, PcapError};

// The feed-handler guide's Rust examples run as doctests of this crate.
#[doc = include_str!("../../../docs/feed-handler.md")]
#[cfg(doctest)]
pub struct FeedHandlerGuide;

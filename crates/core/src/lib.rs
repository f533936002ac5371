//! Sans-IO state machines of tickplant.
//!
//! Nothing in this crate touches the OS: no sockets, threads, clocks or files. Time comes in
//! as `now` (u64 nanoseconds) and output goes out through `poll_*` methods, so a replay from
//! a pcap file is exact: the same input gives the same output, byte for byte.
// Two audited exceptions, each with its SAFETY note: the order-table prefetch hint in `book`,
// and the read of a field's first eight bytes in the tick-to-trade walk (`ttt`).
#![deny(unsafe_code)]

pub mod arb;
pub mod book;
pub mod error;
pub mod event;
pub mod feed;
pub mod fix_session;
mod fxhash;
pub mod glimpse;
pub mod itch;
pub mod matcher;
pub mod naive;
pub mod nyse;
pub mod opra_binary;
pub mod opra_fast;
pub mod packed;
pub mod risk;
pub mod route;
pub mod seq;
mod series;
pub mod trigger;
pub mod ttt;

pub use arb::{
    Action, ArbConfig, ArbEvent, ArbSink, ArbStats, Arbitrator, Decision, DestinationConflict, GapReason, GapReport,
    InputStats, OutputId, OutputStats, Policy, Released, Rerequest, RerequestConfig, RerequestStats, ResetKind,
    Verdict,
};
pub use seq::{
    CountSpec, Endian, Endpoint, FieldSpec, LinkType, Other, OtherReason, PacketInfo, PacketKind, Protocol, Sequencer,
    SequencerConfig,
};

// The matching guide's Rust examples run as doctests of this crate. Its `text file=NAME`
// blocks are files its CLI test writes out; rustdoc does not know the attribute.
#[doc = include_str!("../../../docs/matching.md")]
#[cfg(doctest)]
#[allow(rustdoc::invalid_codeblock_attributes)]
pub struct MatchingGuide;

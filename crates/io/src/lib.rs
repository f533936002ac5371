//! Everything of tickplant that touches the OS: pcap and pcapng files, read and written,
//! with time-ordered merging of several captures for replay (`pcap`); live UDP groups as a
//! source and as outputs (`live`, `outputs`); paced replay (`replay`); the feed-handler
//! pipeline and its threads (`pipeline`, driven by `runner` from any `source`); FIX over
//! TCP (`fixnet`); network namespaces for tests and benchmarks (`netns`).
//!
//! Unsafe code is denied here but for the calls into the OS that need it, each allowed
//! where it stands with its `SAFETY` note: `madvise` ([`huge_pages`]), the time-stamp
//! counter and the thread's CPU clock (`clock`), `setsockopt`/`recvmsg` for kernel receive
//! time stamps (`tstamp`), `setsockopt`/`recvmmsg`/`poll`/`sendmmsg` of live groups
//! (`live`), and the memory maps of captures (`pcap`) and ITCH files (`itch`).
#![deny(unsafe_code)]

pub mod binaryfile;
pub mod clock;
pub mod columns;
pub mod config;
pub mod control;
pub mod events;
pub mod export;
pub mod fix_store;
pub mod fixnet;
pub mod frame;
pub mod hist;
pub mod itch;
pub mod json;
pub mod live;
pub mod metrics;
pub mod nautilus;
pub mod netns;
pub mod outputs;
pub mod pcap;
pub mod pipeline;
pub mod recovery;
pub mod replay;
pub mod runner;
pub mod source;
pub mod trailer;
pub mod tstamp;

pub use pcap::{Format, Frame, FrameReader, FrameWriter, MergedReader, PcapError};
pub use source::{AnySource, Source, SourceError};

/// Ask the OS to back `len` bytes at `addr` with huge pages (Linux `madvise`,
/// `MADV_HUGEPAGE`) where transparent huge pages are on "madvise", the usual default; a
/// hint: where it is refused or means nothing, nothing changes. For large tables the hot
/// path reads at random (the order table), before they are first written.
pub fn huge_pages(addr: *const u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        // madvise wants a page-aligned start: the pages wholly inside the range.
        let page = 4096usize;
        let start = (addr as usize).next_multiple_of(page);
        let end = (addr as usize).saturating_add(len) & !(page - 1);
        if end > start {
            // SAFETY: MADV_HUGEPAGE changes only how the kernel backs these pages, never
            // their contents or whether they may be read or written; the range lies inside
            // one live allocation of the caller's (page-aligned inward), and a failure (an
            // old kernel, huge pages off) is harmless, so its result is not needed.
            #[allow(unsafe_code)]
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (addr, len);
}

// The feed-handler guide's Rust examples run as doctests of this crate.
#[doc = include_str!("../../../docs/feed-handler.md")]
#[cfg(doctest)]
pub struct FeedHandlerGuide;

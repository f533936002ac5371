//! Helpers the CLI tests share.
// Each test binary takes the helpers it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use tickplant_core::{LinkType, Protocol, Sequencer, SequencerConfig};
use tickplant_io::FrameReader;

/// A command line's words, split at spaces: one line per invocation, where a list of string
/// literals would take one line per word (the arguments hold no spaces).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The project's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `tickplant` command lines (their arguments) of the first `sh` block after `heading`
/// in the project's doc `doc` (`docs/feeds.md`); an empty heading: the doc's first block.
pub fn doc_commands(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let section = if heading.is_empty() {
        &text[..]
    } else {
        text.split(heading).nth(1).unwrap_or_else(|| panic!("{doc}: no {heading:?}"))
    };
    let block = section.split("```sh\n").nth(1).unwrap_or_else(|| panic!("{doc}: no sh block after {heading:?}"));
    let block = block.split("```").next().unwrap_or_default();
    block
        .lines()
        .filter_map(|l| l.strip_prefix("tickplant "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The messages (sequence numbers) of a MoldUDP64 capture's data packets, in capture order.
pub fn messages(path: &Path) -> Vec<u64> {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
    let mut r = FrameReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        let info = seq.classify(LinkType::Ethernet, f.data).unwrap();
        if info.count > 0 && info.count < 0xffff {
            out.extend(info.seq..info.seq + u64::from(info.count));
        }
    }
    out
}

/// Wait for a child at most `limit`: killed and a failure if it outlives it; on exit, its
/// success, with its stderr in the message when it failed.
pub fn finish(c: &mut Child, limit: Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = c.stderr.take() {
                use std::io::Read;
                e.read_to_string(&mut err).unwrap();
            }
            assert!(st.success(), "a live process failed: {err}");
            return;
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            panic!("a live process outlived its duration");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The symbols an ITCH 5.0 capture's Stock Directory messages name, by stock locate (the
/// instrument id), read straight from the MoldUDP64 packets' bytes.
pub fn itch_symbols(path: &Path) -> std::collections::HashMap<u32, String> {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
    let mut r = FrameReader::open(path).unwrap();
    let mut out = std::collections::HashMap::new();
    while let Some(f) = r.next_frame().unwrap() {
        let info = seq.classify(LinkType::Ethernet, f.data).unwrap();
        let p = &f.data[usize::from(info.payload_offset)..][..usize::from(info.payload_len)];
        let mut at = 20;
        while at + 2 <= p.len() {
            let n = usize::from(u16::from_be_bytes([p[at], p[at + 1]]));
            let m = &p[at + 2..at + 2 + n];
            if m[0] == b'R' {
                let locate = u32::from(u16::from_be_bytes([m[1], m[2]]));
                out.insert(locate, String::from_utf8_lossy(&m[11..19]).trim_end().to_string());
            }
            at += 2 + n;
        }
    }
    out
}

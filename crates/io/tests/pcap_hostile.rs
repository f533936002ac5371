//! The capture reader on hostile files: valid captures of every format (pcap in µs and ns,
//! either byte order, pcapng) with bytes changed, cut or inserted at random. Whatever the
//! file, reading it ends (frames, then the end or an error that names the file and says
//! what was wrong), never panics, and hands out no frame longer than a frame may be.

use proptest::prelude::*;
use tickplant_io::pcap::{Format, FrameReader, FrameWriter};

/// Largest frame the reader hands out (its documented limit).
const MAX_FRAME: usize = 262_144;

fn capture(format: Format, frames: &[Vec<u8>], big_endian: bool) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c");
    let mut w = FrameWriter::create(&p, tickplant_core::LinkType::Ethernet, format).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 1_000, f).unwrap();
    }
    w.finish().unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    if big_endian && format != Format::PcapNg {
        // The same capture written by a big-endian machine: every header word swapped.
        let swap = |b: &mut [u8], at: usize, n: usize| b[at..at + n].reverse();
        swap(&mut bytes, 0, 4);
        swap(&mut bytes, 4, 2);
        swap(&mut bytes, 6, 2);
        for at in [8, 12, 16, 20] {
            swap(&mut bytes, at, 4);
        }
        let mut at = 24;
        while at + 16 <= bytes.len() {
            let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            for k in 0..4 {
                swap(&mut bytes, at + 4 * k, 4);
            }
            at += 16 + incl;
        }
    }
    bytes
}

#[derive(Debug, Clone)]
enum Change {
    Set(usize, u8),
    /// A 32-bit word at a 4-byte boundary: lengths, block types, magic numbers.
    Word(usize, u32),
    Cut(usize),
    Insert(usize, Vec<u8>),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Change::Set(a, b)),
        3 => (any::<usize>(), prop_oneof![Just(0u32), Just(u32::MAX), Just(0x7fff_ffff), Just(262_145), any::<u32>()])
            .prop_map(|(a, w)| Change::Word(a, w)),
        1 => any::<usize>().prop_map(Change::Cut),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..24)).prop_map(|(a, v)| Change::Insert(a, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, c: &Change) {
    if bytes.is_empty() {
        return;
    }
    match c {
        Change::Set(a, b) => {
            let n = bytes.len();
            bytes[a % n] = *b;
        }
        Change::Word(a, w) => {
            if bytes.len() >= 4 {
                let at = (a % (bytes.len() / 4)) * 4;
                bytes[at..at + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        Change::Cut(a) => bytes.truncate(a % (bytes.len() + 1)),
        Change::Insert(a, v) => {
            let at = a % (bytes.len() + 1);
            bytes.splice(at..at, v.iter().copied());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn hostile_captures_end_in_frames_or_an_error(
        format in prop_oneof![Just(Format::PcapNs), Just(Format::PcapUs), Just(Format::PcapNg)],
        big_endian: bool,
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
        changes in proptest::collection::vec(change(), 1..6),
    ) {
        let mut bytes = capture(format, &frames, big_endian);
        for c in &changes {
            apply(&mut bytes, c);
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hostile.pcap");
        std::fs::write(&p, &bytes).unwrap();
        let Ok(mut r) = FrameReader::open(&p) else { return Ok(()) };
        // A frame takes at least a record header (16 bytes) or a block (32): the file can
        // hold no more frames than that.
        let bound = bytes.len() / 16 + 1;
        let mut n = 0;
        loop {
            match r.next_frame() {
                Ok(Some(f)) => {
                    prop_assert!(f.data.len() <= MAX_FRAME);
                    n += 1;
                    prop_assert!(n <= bound, "more frames than the file can hold");
                }
                Ok(None) => break,
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(msg.contains("hostile.pcap"), "the error names the file: {msg}");
                    break;
                }
            }
        }
    }
}

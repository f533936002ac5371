//! Hardware time stamps that capture taps append to each frame: what a capture's frames were
//! received at, by the tap's clock, in place of the capturing host's.
//!
//! An Arista 7130 (Metamako MetaWatch) tap appends a trailer after the frame's own bytes:
//!
//! ```text
//! original FCS (4) | extensions (TLVs, when flagged) | seconds (4) | nanoseconds (4)
//!   | flags (1) | device id (2) | port id (1) | [a new FCS (4), when the capture kept it]
//! ```
//!
//! big-endian, the time in UTC. Wireshark's `metamako` dissector reads it the same way
//! (from the end: first without a final FCS, then with one), and the tests check a written
//! trailer against it where tshark is installed.

use tickplant_core::LinkType;

/// Where a capture's frame times come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TimeSource {
    /// The capture's own record times (the capturing host's clock).
    #[default]
    Capture,
    /// The Arista 7130 (Metamako MetaWatch) trailer of each frame; a frame without a valid
    /// one keeps the capture's time (and is counted: [`crate::pcap::FrameReader::trailer_missing`]).
    MetaWatch,
}

impl std::str::FromStr for TimeSource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "capture" => Ok(TimeSource::Capture),
            "metawatch" => Ok(TimeSource::MetaWatch),
            _ => Err(format!(
                "timestamps {s:?}: \"capture\" (the capture's own times) or \"metawatch\" (an Arista 7130 / Metamako \
                 MetaWatch tap's trailer)"
            )),
        }
    }
}

/// A trailer's time is taken only within this much of the capture's own time (Wireshark's
/// heuristic: 30 days), so that bytes that merely look like one are not.
const WITHIN_S: u64 = 30 * 86_400;

/// The MetaWatch time (ns since the UNIX epoch) of a frame whose UDP datagram ends before the
/// frame does, where the bytes after it are a valid trailer; `capture_ns` is the capture's own
/// time of the frame. `None`: no trailer (a frame that is not a UDP datagram has none either).
pub fn metawatch_ns(link: LinkType, frame: &[u8], capture_ns: u64) -> Option<u64> {
    let end = tickplant_core::seq::udp_payload_range(link, frame).ok()?.end;
    let trailer = frame.get(end..)?;
    // Without a final FCS first, then with one (as Wireshark tries them).
    [0usize, 4].into_iter().find_map(|fcs| {
        let t = trailer.get(..trailer.len().checked_sub(fcs)?)?;
        // The original FCS (4 bytes) comes before the time, at least.
        let at = t.len().checked_sub(12).filter(|&a| a >= 4)?;
        let word = |i: usize| u64::from(u32::from_be_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]));
        let (secs, nanos) = (word(at), word(at + 4));
        let near = secs.abs_diff(capture_ns / 1_000_000_000) <= WITHIN_S;
        (secs > 3_600 && nanos < 1_000_000_000 && near).then_some(secs * 1_000_000_000 + nanos)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet/IPv4/UDP frame of `payload`, then `trailer`.
    pub(crate) fn frame(payload: &[u8], trailer: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 8 + payload.len()) as u16;
        f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 233, 54, 12, 111]);
        let udp = (8 + payload.len()) as u16;
        f.extend_from_slice(&[0x12, 0x34, 0x66, 0x90, (udp >> 8) as u8, udp as u8, 0, 0]);
        f.extend_from_slice(payload);
        f.extend_from_slice(trailer);
        f
    }

    pub(crate) fn metawatch(secs: u32, nanos: u32) -> Vec<u8> {
        let mut t = vec![0xde, 0xad, 0xbe, 0xef];
        t.extend_from_slice(&secs.to_be_bytes());
        t.extend_from_slice(&nanos.to_be_bytes());
        t.extend_from_slice(&[0x01, 0x00, 0x07, 0x03]);
        t
    }

    #[test]
    fn a_trailer_gives_the_time_with_or_without_a_final_fcs() {
        let now = 1_795_184_400u64 * 1_000_000_000;
        let secs = 1_795_184_400u32;
        let f = frame(b"market data", &metawatch(secs, 123_456_789));
        assert_eq!(metawatch_ns(LinkType::Ethernet, &f, now), Some(now + 123_456_789));
        let mut with_fcs = metawatch(secs, 5);
        with_fcs.extend_from_slice(&[1, 2, 3, 4]);
        let f = frame(b"x", &with_fcs);
        assert_eq!(metawatch_ns(LinkType::Ethernet, &f, now), Some(now + 5));
        // Padding of a short frame before the trailer.
        let mut padded = vec![0u8; 10];
        padded.extend_from_slice(&metawatch(secs, 7));
        assert_eq!(metawatch_ns(LinkType::Ethernet, &frame(b"x", &padded), now), Some(now + 7));
    }

    #[test]
    fn what_is_not_a_trailer_gives_none() {
        let now = 1_795_184_400u64 * 1_000_000_000;
        assert_eq!(metawatch_ns(LinkType::Ethernet, &frame(b"no trailer", &[]), now), None);
        assert_eq!(metawatch_ns(LinkType::Ethernet, &frame(b"x", &[0; 8]), now), None, "too short");
        assert_eq!(metawatch_ns(LinkType::Ethernet, &frame(b"x", &metawatch(1_795_184_400, 1_000_000_000)), now), None);
        // Two months away from the capture's time: bytes that look like one, not a tap's.
        assert_eq!(metawatch_ns(LinkType::Ethernet, &frame(b"x", &metawatch(1_790_000_000, 1)), now), None);
        assert_eq!(metawatch_ns(LinkType::Ethernet, &[0u8; 30], now), None, "not UDP");
    }
}

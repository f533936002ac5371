//! The sequencer: finds a packet's sequence number and message count in a captured frame.
//!
//! Protocol-agnostic: the sequence number and the message count are read from configured
//! positions in the UDP payload (offset, width, endianness), or the count is fixed. Presets
//! exist for MoldUDP64, NYSE XDP and OPRA. A frame that is not market data (not IPv4/UDP, a
//! fragment, another port or group, too short for the header) is classified as *other* with
//! the reason; it is never an error and never dropped silently.
//!
//! Where a protocol's message boundaries are known (MoldUDP64, XDP), [`Sequencer::trim`]
//! rewrites a packet to start at a later message, fixing the IP and UDP lengths and
//! checksums, so an overlapping packet can be delivered without repeating messages.
//!
//! One file (about 820 lines, 220 of them tests): the sequencer and the well-formedness
//! checks it runs per protocol.

use serde::{Deserialize, Serialize};
use tickplant_wire::{ethernet, ipv4, moldudp64, opra, read_uint, udp, write_uint, xdp};

use crate::error::{BadText, InvalidConfig, UnknownName};

/// Byte order of a configured field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endian {
    Big,
    Little,
}

/// Where an integer field sits in the UDP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    pub offset: usize,
    /// Width in bytes, 1..=8.
    pub bytes: u8,
    pub endian: Endian,
}

impl FieldSpec {
    pub const fn new(offset: usize, bytes: u8, endian: Endian) -> Self {
        FieldSpec { offset, bytes, endian }
    }
    #[inline]
    fn end(&self) -> usize {
        self.offset + usize::from(self.bytes)
    }
    #[inline(always)]
    fn read(&self, payload: &[u8]) -> u64 {
        read_uint(&payload[self.offset..self.end()], self.endian == Endian::Big)
    }
    fn write(&self, payload: &mut [u8], v: u64) {
        let end = self.end();
        write_uint(&mut payload[self.offset..end], v, self.endian == Endian::Big)
    }
}

/// How many messages a packet carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CountSpec {
    /// Read from a field of the payload.
    Field(FieldSpec),
    /// Every packet carries this many messages.
    Fixed(u32),
}

/// The protocol, which decides presets, control packets, resets and trimming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Moldudp64,
    Xdp,
    Opra,
    Custom,
}

impl std::str::FromStr for Protocol {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "moldudp64" => Ok(Protocol::Moldudp64),
            "xdp" => Ok(Protocol::Xdp),
            "opra" => Ok(Protocol::Opra),
            "custom" => Ok(Protocol::Custom),
            _ => Err(UnknownName { what: "protocol", name: s.into(), expected: "moldudp64, xdp, opra or custom" }),
        }
    }
}

/// The link layer of captured frames (the pcap link type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1), untagged or with up to two VLAN tags (802.1Q, QinQ).
    Ethernet,
    /// LINKTYPE_RAW (101) / LINKTYPE_IPV4 (228): the frame starts with the IPv4 header.
    RawIp,
    /// LINKTYPE_LINUX_SLL (113): the 16-byte Linux "cooked" header.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): the 20-byte one, what `tcpdump -i any` writes since
    /// libpcap 1.10 (the protocol first, then the interface index).
    LinuxSll2,
}

impl LinkType {
    /// The link type of a pcap LINKTYPE_ value, if supported.
    pub fn from_pcap(v: u32) -> Option<LinkType> {
        match v {
            1 => Some(LinkType::Ethernet),
            101 | 228 | 12 | 14 => Some(LinkType::RawIp),
            113 => Some(LinkType::LinuxSll),
            276 => Some(LinkType::LinuxSll2),
            _ => None,
        }
    }
    /// The pcap LINKTYPE_ value written for this link type.
    pub fn to_pcap(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
        }
    }
}

/// An accepted destination (multicast group and/or port). `None` matches any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub group: Option<[u8; 4]>,
    pub port: Option<u16>,
}

impl std::str::FromStr for Endpoint {
    type Err = BadText;
    /// `PORT`, `GROUP:PORT`, `GROUP` or `GROUP:*`.
    fn from_str(s: &str) -> Result<Self, BadText> {
        let bad = || BadText {
            what: "endpoint",
            text: s.into(),
            expected: "PORT, GROUP or GROUP:PORT (e.g. 233.54.12.111:26400)",
        };
        let (g, p) = match s.rsplit_once(':') {
            Some((g, p)) => (Some(g), Some(p)),
            None if s.contains('.') => (Some(s), None),
            None => (None, Some(s)),
        };
        let group = match g {
            Some(g) => {
                let ip: std::net::Ipv4Addr = g.parse().map_err(|_| bad())?;
                Some(ip.octets())
            }
            None => None,
        };
        let port = match p {
            Some("*") | None => None,
            Some(p) => Some(p.parse().map_err(|_| bad())?),
        };
        Ok(Endpoint { group, port })
    }
}

impl std::fmt::Display for Endpoint {
    /// As [`Endpoint::from_str`](std::str::FromStr) reads it: `GROUP:PORT`, `GROUP` or `PORT`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.group, self.port) {
            (Some(g), Some(p)) => write!(f, "{}:{p}", std::net::Ipv4Addr::from(g)),
            (Some(g), None) => write!(f, "{}", std::net::Ipv4Addr::from(g)),
            (None, Some(p)) => write!(f, "{p}"),
            (None, None) => f.write_str("*"),
        }
    }
}

impl Endpoint {
    /// The destination of a frame the sequencer classified as `info`: its IPv4 destination
    /// address and UDP destination port.
    pub fn of_frame(frame: &[u8], info: &PacketInfo) -> Endpoint {
        let ip = usize::from(info.ip_offset);
        let udp_dst = usize::from(info.payload_offset) - udp::HEADER_LEN + 2;
        let group = frame.get(ip + 16..ip + 20).and_then(|b| <[u8; 4]>::try_from(b).ok());
        let port = frame.get(udp_dst..udp_dst + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        Endpoint { group, port }
    }
}

/// Sequencer configuration: where the sequence number and count sit, and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequencerConfig {
    pub protocol: Protocol,
    pub seq: FieldSpec,
    pub count: CountSpec,
    /// Accepted destinations; empty accepts every UDP datagram.
    #[serde(default)]
    pub accept: Vec<Endpoint>,
}

impl SequencerConfig {
    /// The preset of a protocol (for `Custom`: a 4-byte big-endian sequence number at 0 and
    /// a count of 1, to be changed by the caller).
    pub fn preset(protocol: Protocol) -> SequencerConfig {
        let (seq, count) = match protocol {
            Protocol::Moldudp64 => (
                FieldSpec::new(moldudp64::SEQUENCE_OFFSET, 8, Endian::Big),
                CountSpec::Field(FieldSpec::new(moldudp64::COUNT_OFFSET, 2, Endian::Big)),
            ),
            Protocol::Xdp => (
                FieldSpec::new(xdp::SEQUENCE_OFFSET, 4, Endian::Little),
                CountSpec::Field(FieldSpec::new(xdp::COUNT_OFFSET, 1, Endian::Little)),
            ),
            Protocol::Opra => (
                FieldSpec::new(opra::SEQUENCE_OFFSET, 4, Endian::Big),
                CountSpec::Field(FieldSpec::new(opra::COUNT_OFFSET, 1, Endian::Big)),
            ),
            Protocol::Custom => (FieldSpec::new(0, 4, Endian::Big), CountSpec::Fixed(1)),
        };
        SequencerConfig { protocol, seq, count, accept: Vec::new() }
    }

    /// Check the configuration makes sense; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let check = |name: &'static str, f: &FieldSpec| {
            if f.bytes == 0 || f.bytes > 8 {
                Err(InvalidConfig::new(name, format!("{name} width must be 1..=8 bytes, got {}", f.bytes)))
            } else {
                Ok(())
            }
        };
        check("sequence number", &self.seq)?;
        if let CountSpec::Field(f) = &self.count {
            check("message count", f)?;
        }
        Ok(())
    }

    /// Smallest UDP payload that holds every configured field.
    pub fn min_payload(&self) -> usize {
        let c = match self.count {
            CountSpec::Field(f) => f.end(),
            CountSpec::Fixed(_) => 0,
        };
        let proto = match self.protocol {
            Protocol::Moldudp64 => moldudp64::HEADER_LEN,
            Protocol::Xdp => xdp::HEADER_LEN,
            Protocol::Opra | Protocol::Custom => 0,
        };
        self.seq.end().max(c).max(proto)
    }
}

/// Why a frame went to the *other* output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OtherReason {
    /// Not IPv4 (ARP, IPv6, ...).
    NotIpv4,
    /// IPv4 but not UDP.
    NotUdp,
    /// An IPv4 fragment: not reassembled.
    Fragment,
    /// UDP to a destination that is not configured.
    Filtered,
    /// UDP payload too short for the configured fields.
    Runt,
    /// A header that breaks its format (lengths that do not fit, wrong version).
    Malformed,
    /// A well-formed packet of another MoldUDP64 session that the feed never confirmed (see
    /// [`crate::arb`]): held back, then found to be stray traffic, not a new session.
    Stray,
}

impl OtherReason {
    pub const ALL: [OtherReason; 7] = [
        OtherReason::NotIpv4,
        OtherReason::NotUdp,
        OtherReason::Fragment,
        OtherReason::Filtered,
        OtherReason::Runt,
        OtherReason::Malformed,
        OtherReason::Stray,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            OtherReason::NotIpv4 => "not_ipv4",
            OtherReason::NotUdp => "not_udp",
            OtherReason::Fragment => "fragment",
            OtherReason::Filtered => "filtered",
            OtherReason::Runt => "runt",
            OtherReason::Malformed => "malformed",
            OtherReason::Stray => "stray",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A frame that went to *other*: the reason, and for malformed frames the wire error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Other {
    pub reason: OtherReason,
    pub error: Option<tickplant_wire::Error>,
}

impl std::fmt::Display for Other {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            Some(e) => write!(f, "{}: {e}", self.reason.as_str()),
            None => f.write_str(self.reason.as_str()),
        }
    }
}

/// What kind of market-data packet this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketKind {
    /// Carries `count >= 1` messages.
    Data,
    /// Carries no messages (count 0): keeps the line alive.
    Heartbeat,
    /// MoldUDP64 end of session (count 0xFFFF).
    EndOfSession,
}

/// What the sequencer found in a market-data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    pub seq: u64,
    pub count: u32,
    pub kind: PacketKind,
    /// Offset of the IPv4 header in the frame.
    pub ip_offset: u16,
    /// Offset of the UDP payload in the frame.
    pub payload_offset: u16,
    /// Length of the UDP payload.
    pub payload_len: u16,
    /// MoldUDP64 session (10 bytes); all zero for other protocols. Kept as bytes, not a
    /// `u128`, so that `PacketInfo` stays 32 bytes (8-byte aligned): it is copied per packet.
    pub session: [u8; 10],
    /// The packet announces a sequence number reset (XDP).
    pub reset: bool,
}

impl PacketInfo {
    /// One past the last sequence number the packet covers.
    #[inline]
    pub fn end(&self) -> u64 {
        self.seq + u64::from(self.count)
    }
}

/// Where a frame's UDP datagram is, and what the arbitrator filters on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UdpHeaders {
    ip_offset: usize,
    payload_offset: usize,
    payload_len: usize,
    dst: [u8; 4],
    port: u16,
}

/// The usual frame, read with no more than the checks it needs: Ethernet with no VLAN tag,
/// IPv4 with no options and not a fragment, UDP. `None` for anything else, which
/// [`udp_headers`] then reads or refuses with its reason. Where this answers, it answers
/// what `udp_headers` would (a property test holds the two together): the general path
/// took about 110 instructions a frame through its views and their errors.
#[inline(always)]
pub(crate) fn udp_quick(link: LinkType, frame: &[u8]) -> Option<UdpHeaders> {
    if link != LinkType::Ethernet {
        return None;
    }
    let h: &[u8; 42] = frame.get(..42)?.try_into().ok()?;
    let be16 = |i: usize| usize::from(u16::from_be_bytes([h[i], h[i + 1]]));
    // IPv4, version 4 with a 20-byte header, UDP, neither more fragments nor an offset.
    if be16(12) != usize::from(ethernet::ethertype::IPV4) || h[14] != 0x45 || h[23] != ipv4::protocol::UDP {
        return None;
    }
    if be16(20) & 0x3fff != 0 {
        return None;
    }
    let total = be16(16);
    let udp_len = be16(38);
    // The IP datagram within the frame, the UDP datagram within the IP one.
    if total < 28 || 14 + total > frame.len() || udp_len < 8 || udp_len > total - 20 {
        return None;
    }
    Some(UdpHeaders {
        ip_offset: 14,
        payload_offset: 42,
        payload_len: udp_len - 8,
        dst: [h[30], h[31], h[32], h[33]],
        port: be16(36) as u16,
    })
}

/// Any frame's UDP datagram, through the wire views, or why it is not one.
pub(crate) fn udp_headers(link: LinkType, frame: &[u8]) -> Result<UdpHeaders, Other> {
    let malformed = |e: tickplant_wire::Error| Other { reason: OtherReason::Malformed, error: Some(e) };
    let ip_offset = match link {
        LinkType::Ethernet => {
            let f = ethernet::Frame::new_checked(frame).map_err(malformed)?;
            if f.ethertype() != ethernet::ethertype::IPV4 {
                return Err(Other { reason: OtherReason::NotIpv4, error: None });
            }
            f.header_len()
        }
        LinkType::RawIp => 0,
        // The cooked headers: (length, where the protocol is).
        LinkType::LinuxSll | LinkType::LinuxSll2 => {
            let (len, proto, what) =
                if link == LinkType::LinuxSll { (16, 14, "linux sll header") } else { (20, 0, "linux sll2 header") };
            if frame.len() < len {
                return Err(malformed(tickplant_wire::Error::Truncated {
                    what,
                    offset: 0,
                    need: len,
                    have: frame.len(),
                }));
            }
            if u16::from_be_bytes([frame[proto], frame[proto + 1]]) != ethernet::ethertype::IPV4 {
                return Err(Other { reason: OtherReason::NotIpv4, error: None });
            }
            len
        }
    };
    let ip = ipv4::Packet::new_checked(&frame[ip_offset..]).map_err(|e| malformed(e.at(ip_offset)))?;
    if ip.protocol() != ipv4::protocol::UDP {
        return Err(Other { reason: OtherReason::NotUdp, error: None });
    }
    if ip.is_fragment() {
        return Err(Other { reason: OtherReason::Fragment, error: None });
    }
    let udp_offset = ip_offset + ip.header_len();
    let u = udp::Packet::new_checked(ip.payload()).map_err(|e| malformed(e.at(udp_offset)))?;
    Ok(UdpHeaders {
        ip_offset,
        payload_offset: udp_offset + udp::HEADER_LEN,
        payload_len: u.payload().len(),
        dst: ip.dst_addr(),
        port: u.dst_port(),
    })
}

/// Where a frame's UDP payload lies in it, or why the frame is not a UDP datagram (not
/// IPv4, not UDP, a fragment, malformed): what a replay sends of a captured frame.
pub fn udp_payload_range(link: LinkType, frame: &[u8]) -> Result<std::ops::Range<usize>, Other> {
    let h = match udp_quick(link, frame) {
        Some(h) => h,
        None => udp_headers(link, frame)?,
    };
    Ok(h.payload_offset..h.payload_offset + h.payload_len)
}

/// Where a frame's UDP payload lies in it and where the datagram was going (its IPv4
/// destination and UDP destination port), or why the frame is not a UDP datagram.
pub fn udp_payload_and_destination(
    link: LinkType,
    frame: &[u8],
) -> Result<(std::ops::Range<usize>, [u8; 4], u16), Other> {
    let h = match udp_quick(link, frame) {
        Some(h) => h,
        None => udp_headers(link, frame)?,
    };
    Ok((h.payload_offset..h.payload_offset + h.payload_len, h.dst, h.port))
}

/// Reads sequence numbers from frames. Cheap to clone; holds no state.
#[derive(Debug, Clone)]
pub struct Sequencer {
    config: SequencerConfig,
    min_payload: usize,
}

impl Sequencer {
    pub fn new(config: SequencerConfig) -> Result<Sequencer, InvalidConfig> {
        config.validate()?;
        let min_payload = config.min_payload();
        Ok(Sequencer { config, min_payload })
    }

    pub fn config(&self) -> &SequencerConfig {
        &self.config
    }

    /// Can [`Sequencer::trim`] cut packets of this protocol at message boundaries?
    pub fn can_trim(&self) -> bool {
        matches!(self.config.protocol, Protocol::Moldudp64 | Protocol::Xdp)
    }

    /// Classify a frame: market data with its sequence information, or other with a reason.
    /// Inlined into the arbitrator's per-frame step: a call returned the packet's
    /// information through memory (about 30 instructions a frame).
    #[inline(always)]
    pub fn classify(&self, link: LinkType, frame: &[u8]) -> Result<PacketInfo, Other> {
        let malformed = |e: tickplant_wire::Error| Other { reason: OtherReason::Malformed, error: Some(e) };
        let h = match udp_quick(link, frame) {
            Some(h) => h,
            None => udp_headers(link, frame)?,
        };
        if !self.config.accept.is_empty() {
            let (dst, port) = (h.dst, h.port);
            let ok = self
                .config
                .accept
                .iter()
                .any(|ep| ep.group.is_none_or(|g| g == dst) && ep.port.is_none_or(|p| p == port));
            if !ok {
                return Err(Other { reason: OtherReason::Filtered, error: None });
            }
        }
        let (ip_offset, payload_offset) = (h.ip_offset, h.payload_offset);
        let payload = &frame[payload_offset..payload_offset + h.payload_len];
        if payload.len() < self.min_payload || payload.len() > usize::from(u16::MAX) {
            return Err(Other { reason: OtherReason::Runt, error: None });
        }
        let mut info = PacketInfo {
            seq: 0,
            count: 0,
            kind: PacketKind::Data,
            ip_offset: ip_offset as u16,
            payload_offset: payload_offset as u16,
            payload_len: payload.len() as u16,
            session: [0; 10],
            reset: false,
        };
        match self.config.protocol {
            Protocol::Opra => {
                // The header layout moved in version 6: read the version to pick the offsets.
                let b = opra::Block::new_checked(payload).map_err(|e| malformed(e.at(payload_offset)))?;
                info.seq = u64::from(b.block_sequence_number());
                info.count = u32::from(b.messages_in_block());
            }
            _ => {
                info.seq = self.config.seq.read(payload);
                info.count = match self.config.count {
                    CountSpec::Field(f) => f.read(payload) as u32,
                    CountSpec::Fixed(n) => n,
                };
            }
        }
        match self.config.protocol {
            Protocol::Moldudp64 => {
                // Blocks that do not tile the payload: not a packet of the feed, whatever
                // its first bytes say (a stray datagram taken for one reset the sequence
                // space and reached the HR output unreadable).
                moldudp64::check_blocks(payload).map_err(|e| malformed(e.at(payload_offset)))?;
                info.session.copy_from_slice(&payload[..10]);
                if info.count == u32::from(moldudp64::END_OF_SESSION) {
                    info.kind = PacketKind::EndOfSession;
                    info.count = 0;
                }
            }
            Protocol::Xdp => {
                // PktSize and NumberMsgs must describe the datagram exactly.
                xdp::check_messages(payload).map_err(|e| malformed(e.at(payload_offset)))?;
                let p = xdp::Packet::new_unchecked(payload);
                info.reset = p.delivery_flag() == xdp::delivery_flag::SEQUENCE_NUMBER_RESET
                    || (info.count > 0 && p.is_sequence_reset());
            }
            Protocol::Opra | Protocol::Custom => {}
        }
        if info.count == 0 && info.kind == PacketKind::Data {
            info.kind = PacketKind::Heartbeat;
        }
        Ok(info)
    }

    /// Write into `out` the frame cut down to its messages from index `skip` on, with the
    /// sequence number, message count, and IP/UDP lengths and checksums fixed. Returns false
    /// (and leaves `out` unspecified) when the protocol's message boundaries are unknown or
    /// the frame's message blocks do not parse.
    pub fn trim(&self, frame: &[u8], info: &PacketInfo, skip: u32, out: &mut Vec<u8>) -> bool {
        if skip == 0 || skip >= info.count || !self.can_trim() {
            return false;
        }
        // The new first sequence number must fit the field (found by fuzzing: a number near
        // the field's top overflowed).
        let bits = 8 * u32::from(self.config.seq.bytes);
        let fits = |v: u64| bits >= 64 || v >> bits == 0;
        match info.seq.checked_add(u64::from(skip)) {
            Some(v) if fits(v) => {}
            _ => return false,
        }
        let po = usize::from(info.payload_offset);
        let payload = &frame[po..po + usize::from(info.payload_len)];
        let cut = match self.config.protocol {
            Protocol::Moldudp64 => moldudp64::block_offset(payload, skip as u16),
            Protocol::Xdp => xdp::message_offset(payload, skip as u8),
            _ => return false,
        };
        let Ok(cut) = cut else { return false };
        let header = match self.config.protocol {
            Protocol::Moldudp64 => moldudp64::HEADER_LEN,
            _ => xdp::HEADER_LEN,
        };
        let removed = cut - header;
        out.clear();
        out.extend_from_slice(&frame[..po + header]);
        out.extend_from_slice(&payload[cut..]);
        // Whatever follows the UDP datagram stays as it was: bytes the IP datagram holds
        // past it (its total length counts them) and Ethernet padding.
        out.extend_from_slice(&frame[po + payload.len()..]);
        let new_payload_len = payload.len() - removed;
        {
            let p = &mut out[po..];
            self.config.seq.write(p, info.seq + u64::from(skip));
            if let CountSpec::Field(f) = self.config.count {
                f.write(p, u64::from(info.count - skip));
            }
            if self.config.protocol == Protocol::Xdp {
                xdp::Packet::new_unchecked(&mut p[..]).set_pkt_size(new_payload_len as u16);
            }
        }
        let io = usize::from(info.ip_offset);
        let mut ip = ipv4::Packet::new_unchecked(&mut out[io..]);
        let hl = ip.header_len();
        let total = ip.total_len() as usize - removed;
        ip.set_total_len(total as u16);
        ip.fill_checksum();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let mut u = udp::Packet::new_unchecked(&mut out[io + hl..]);
        let had_checksum = u.checksum() != 0;
        u.set_len((udp::HEADER_LEN + new_payload_len) as u16);
        if had_checksum {
            u.fill_checksum(src, dst);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Build an Ethernet/IPv4/UDP frame around `payload`.
    pub(crate) fn frame(payload: &[u8], port: u16) -> Vec<u8> {
        let eth = ethernet::Repr::new([1, 0, 0x5e, 0, 0, 1], [2, 0, 0, 0, 0, 1], None, ethernet::ethertype::IPV4);
        let ip = ipv4::Repr {
            src_addr: [10, 0, 0, 1],
            dst_addr: [233, 54, 12, 1],
            protocol: ipv4::protocol::UDP,
            payload_len: 8 + payload.len(),
            ttl: 64,
            ident: 0,
            dscp_ecn: 0,
            dont_frag: true,
        };
        let u = udp::Repr { src_port: 5000, dst_port: port, payload_len: payload.len() };
        let mut f = vec![0u8; 14 + 20 + 8 + payload.len()];
        eth.emit(&mut f);
        ip.emit(&mut f[14..]);
        u.emit(&mut f[34..]);
        f[42..].copy_from_slice(payload);
        udp::Packet::new_unchecked(&mut f[34..]).fill_checksum(ip.src_addr, ip.dst_addr);
        f
    }

    fn mold(seq: u64, msgs: &[&[u8]]) -> Vec<u8> {
        let mut p = Vec::new();
        moldudp64::Repr { session: *b"SESSION001", sequence_number: seq, message_count: msgs.len() as u16 }.emit({
            p.resize(20, 0);
            &mut p[..]
        });
        for m in msgs {
            moldudp64::push_message(&mut p, m);
        }
        p
    }

    #[test]
    fn classify_moldudp64() {
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
        let f = frame(&mold(42, &[b"A", b"BB"]), 26400);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        assert_eq!((i.seq, i.count, i.kind), (42, 2, PacketKind::Data));
        assert_eq!(i.payload_offset, 42);
        let hb = frame(&mold(44, &[]), 26400);
        assert_eq!(s.classify(LinkType::Ethernet, &hb).unwrap().kind, PacketKind::Heartbeat);
    }

    #[test]
    fn classify_other() {
        let mut cfg = SequencerConfig::preset(Protocol::Moldudp64);
        cfg.accept = vec!["233.54.12.1:26400".parse().unwrap()];
        let s = Sequencer::new(cfg).unwrap();
        let f = frame(&mold(1, &[b"A"]), 26401);
        assert_eq!(s.classify(LinkType::Ethernet, &f).unwrap_err().reason, OtherReason::Filtered);
        let runt = frame(&[0; 10], 26400);
        assert_eq!(s.classify(LinkType::Ethernet, &runt).unwrap_err().reason, OtherReason::Runt);
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(s.classify(LinkType::Ethernet, &arp).unwrap_err().reason, OtherReason::NotIpv4);
        let mut tcp = f.clone();
        tcp[23] = 6;
        assert_eq!(s.classify(LinkType::Ethernet, &tcp).unwrap_err().reason, OtherReason::NotUdp);
        let e = s.classify(LinkType::Ethernet, &f[..30]).unwrap_err();
        assert_eq!(e.reason, OtherReason::Malformed);
        assert_eq!(e.error.unwrap().offset(), 14, "offset is relative to the frame");
        let mut frag = frame(&mold(1, &[b"A"]), 26400);
        frag[20] = 0x20;
        assert_eq!(s.classify(LinkType::Ethernet, &frag).unwrap_err().reason, OtherReason::Fragment);
    }

    /// The quick header path answers only where the general one agrees, and does answer
    /// for the usual frame.
    #[test]
    fn udp_quick_agrees_with_the_views() {
        let f = frame(&mold(7, &[b"AB", b"C"]), 26400);
        let q = udp_quick(LinkType::Ethernet, &f).expect("the usual frame takes the quick path");
        assert_eq!(Some(q), udp_headers(LinkType::Ethernet, &f).ok());
        assert_eq!((q.ip_offset, q.payload_offset, q.dst, q.port), (14, 42, [233, 54, 12, 1], 26400));
        // Frames the general path reads and the quick one leaves to it: a VLAN tag, IP
        // options, another link type.
        let mut vlan = f[..12].to_vec();
        vlan.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        vlan.extend_from_slice(&f[12..]);
        let mut opts = f[..14].to_vec();
        opts.push(0x46);
        opts.extend_from_slice(&f[15..34]);
        opts.extend_from_slice(&[1, 1, 1, 0]);
        opts.extend_from_slice(&f[34..]);
        let total = u16::from_be_bytes([opts[16], opts[17]]) + 4;
        opts[16..18].copy_from_slice(&total.to_be_bytes());
        for (link, g) in
            [(LinkType::Ethernet, &vlan), (LinkType::Ethernet, &opts), (LinkType::RawIp, &f[14..].to_vec())]
        {
            assert!(udp_quick(link, g).is_none());
            assert_eq!(udp_headers(link, g).expect("a UDP datagram").payload_len, q.payload_len);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// Valid frames with bytes of their headers overwritten, cut or lengthened: where the
        /// quick path answers, the views give the same answer.
        #[test]
        fn udp_quick_never_disagrees(
            len in 0usize..80,
            hits in proptest::collection::vec((0usize..50, proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..140,
            extra in 0usize..6,
            link in 0u8..4,
        ) {
            let mut f = frame(&vec![0x5a; len], 26400);
            for (i, b) in hits {
                if i < f.len() {
                    f[i] = b;
                }
            }
            f.truncate(cut.max(1));
            f.extend(std::iter::repeat_n(0xa5, extra));
            let link = [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2][usize::from(link)];
            if let Some(q) = udp_quick(link, &f) {
                proptest::prop_assert_eq!(Some(q), udp_headers(link, &f).ok());
            }
        }
    }

    #[test]
    fn custom_fields_little_endian() {
        let cfg = SequencerConfig {
            protocol: Protocol::Custom,
            seq: FieldSpec::new(2, 3, Endian::Little),
            count: CountSpec::Field(FieldSpec::new(0, 1, Endian::Big)),
            accept: vec![],
        };
        let s = Sequencer::new(cfg).unwrap();
        let f = frame(&[4, 0, 0x01, 0x02, 0x03, 9], 1);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        assert_eq!((i.seq, i.count), (0x030201, 4));
        assert!(Sequencer::new(SequencerConfig {
            seq: FieldSpec::new(0, 9, Endian::Big),
            ..SequencerConfig::preset(Protocol::Custom)
        })
        .is_err());
    }

    #[test]
    fn trim_moldudp64() {
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
        let f = frame(&mold(10, &[b"AAA", b"BB", b"C"]), 26400);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        let mut out = Vec::new();
        assert!(s.trim(&f, &i, 2, &mut out));
        let j = s.classify(LinkType::Ethernet, &out).unwrap();
        assert_eq!((j.seq, j.count), (12, 1));
        assert_eq!(out, frame(&mold(12, &[b"C"]), 26400), "identical to a frame built with only the last message");
        assert!(!s.trim(&f, &i, 3, &mut out), "cannot trim everything");
    }

    /// Found by fuzzing (the sequencer target): bytes after the UDP datagram, inside the IP
    /// datagram or as Ethernet padding, were dropped by a trim that still counted them in
    /// the IP total length, and the trimmed frame no longer classified.
    #[test]
    fn trim_keeps_what_follows_the_udp_datagram() {
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
        let mut f = frame(&mold(10, &[b"AAA", b"BB", b"C"]), 26400);
        // Four bytes past the UDP datagram inside the IP datagram, then two of padding.
        f.extend_from_slice(b"xyzw");
        let mut ip = ipv4::Packet::new_unchecked(&mut f[14..]);
        let total = ip.total_len() + 4;
        ip.set_total_len(total);
        ip.fill_checksum();
        f.extend_from_slice(&[0, 0]);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        let mut out = Vec::new();
        assert!(s.trim(&f, &i, 2, &mut out));
        let j = s.classify(LinkType::Ethernet, &out).unwrap();
        assert_eq!((j.seq, j.count), (12, 1));
        assert!(out.ends_with(b"xyzw\0\0"), "{out:02x?}");
        assert_eq!(out.len(), f.len() - (mold(10, &[b"AAA", b"BB", b"C"]).len() - mold(12, &[b"C"]).len()));
    }

    /// A first sequence number that would pass the field's top is not trimmed.
    #[test]
    fn trim_refuses_a_sequence_number_past_the_field() {
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
        let f = frame(&mold(u64::MAX - 1, &[b"AAA", b"BB", b"C"]), 26400);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        let mut out = Vec::new();
        assert!(s.trim(&f, &i, 1, &mut out), "MAX - 1 + 1 fits");
        assert!(!s.trim(&f, &i, 2, &mut out), "MAX - 1 + 2 does not");
    }

    #[test]
    fn trim_xdp() {
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Xdp)).unwrap();
        let build = |seq: u32, bodies: &[&[u8]]| {
            let mut p = vec![0u8; 16];
            for b in bodies {
                xdp::push_message(&mut p, 100, b);
            }
            xdp::Repr {
                pkt_size: p.len() as u16,
                delivery_flag: 11,
                number_msgs: bodies.len() as u8,
                seq_num: seq,
                send_time: 5,
                send_time_ns: 6,
            }
            .emit(&mut p[..16]);
            frame(&p, 1)
        };
        let f = build(100, &[b"xx", b"yyy", b"z"]);
        let i = s.classify(LinkType::Ethernet, &f).unwrap();
        let mut out = Vec::new();
        assert!(s.trim(&f, &i, 1, &mut out));
        assert_eq!(out, build(101, &[b"yyy", b"z"]));
    }
}

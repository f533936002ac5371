//! IPv4 packets (RFC 791), options included, fragments flagged but not reassembled.
//!
//! `Packet::new_checked` promises: version is 4, the header length (IHL) is at least 20
//! bytes and fits the buffer, and the total length covers the header and fits the buffer
//! (Ethernet padding after the total length is allowed and ignored by `payload`).

use crate::error::check;
use crate::{fold_checksum, ones_complement_sum, Error, Result};

/// IP protocol numbers tickplant cares about.
pub mod protocol {
    pub const ICMP: u8 = 1;
    pub const IGMP: u8 = 2;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
    pub const MIN_HEADER_LEN: usize = 20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::MIN_HEADER_LEN;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check("ipv4 header", buf, 0, field::MIN_HEADER_LEN)?;
        if self.version() != 4 {
            return Err(Error::Malformed {
                what: "ipv4 version",
                offset: field::VER_IHL,
                value: u64::from(self.version()),
            });
        }
        let hl = self.header_len();
        if hl < field::MIN_HEADER_LEN {
            return Err(Error::Malformed { what: "ipv4 IHL", offset: 0, value: hl as u64 / 4 });
        }
        check("ipv4 options", buf, field::MIN_HEADER_LEN, hl - field::MIN_HEADER_LEN)?;
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Malformed {
                what: "ipv4 total length",
                offset: field::LENGTH.start,
                value: total as u64,
            });
        }
        check("ipv4 payload", buf, hl, total - hl)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }
    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x4000 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & 0x1fff) << 3
    }
    /// True for any fragment of a fragmented datagram (first, middle or last).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
    pub fn src_addr(&self) -> [u8; 4] {
        let b = &self.buffer.as_ref()[field::SRC];
        [b[0], b[1], b[2], b[3]]
    }
    pub fn dst_addr(&self) -> [u8; 4] {
        let b = &self.buffer.as_ref()[field::DST];
        [b[0], b[1], b[2], b[3]]
    }
    /// The options bytes (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::MIN_HEADER_LEN..self.header_len()]
    }
    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        let hdr = &self.buffer.as_ref()[..self.header_len()];
        fold_checksum(ones_complement_sum(0, hdr)) == 0
    }
    /// The payload: from the end of the header to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_total_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    /// Recompute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        let hl = self.header_len();
        let buf = self.buffer.as_mut();
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let c = fold_checksum(ones_complement_sum(0, &buf[..hl]));
        buf[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[hl..tl]
    }
}

/// The owned meaning of an IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_addr: [u8; 4],
    pub dst_addr: [u8; 4],
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    pub ident: u16,
    pub dscp_ecn: u8,
    pub dont_frag: bool,
}

impl Repr {
    /// Parse a header. Fragments and headers with options are rejected: a `Repr` describes
    /// only what `emit` can write back; use the `Packet` view to read those.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.is_fragment() {
            return Err(Error::Unsupported {
                what: "ipv4 fragment",
                offset: field::FLG_OFF.start,
                value: u64::from(p.frag_offset()),
            });
        }
        if p.header_len() != field::MIN_HEADER_LEN {
            return Err(Error::Unsupported { what: "ipv4 options in Repr", offset: 0, value: p.header_len() as u64 });
        }
        Ok(Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.payload().len(),
            ttl: p.ttl(),
            ident: p.ident(),
            dscp_ecn: p.dscp_ecn(),
            dont_frag: p.dont_frag(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        field::MIN_HEADER_LEN
    }

    /// Write the header (with its checksum) into the front of `buf`.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::VER_IHL] = 0x45;
        buf[field::DSCP_ECN] = self.dscp_ecn;
        let total = (field::MIN_HEADER_LEN + self.payload_len) as u16;
        buf[field::LENGTH].copy_from_slice(&total.to_be_bytes());
        buf[field::IDENT].copy_from_slice(&self.ident.to_be_bytes());
        let flags: u16 = if self.dont_frag { 0x4000 } else { 0 };
        buf[field::FLG_OFF].copy_from_slice(&flags.to_be_bytes());
        buf[field::TTL] = self.ttl;
        buf[field::PROTOCOL] = self.protocol;
        buf[field::SRC].copy_from_slice(&self.src_addr);
        buf[field::DST].copy_from_slice(&self.dst_addr);
        let mut p = Packet::new_unchecked(&mut buf[..field::MIN_HEADER_LEN]);
        p.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A UDP datagram header from 10.0.0.1 to 233.54.12.1, 4 payload bytes.
    static PACKET: [u8; 24] = [
        0x45, 0x00, 0x00, 0x18, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 233, 54, 12, 1, 1, 2, 3, 4,
    ];

    fn packet_with_checksum() -> [u8; 24] {
        let mut b = PACKET;
        Packet::new_unchecked(&mut b[..]).fill_checksum();
        b
    }

    #[test]
    fn test_parse() {
        let b = packet_with_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.protocol(), protocol::UDP);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert!(!p.is_fragment());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.dst_addr, [233, 54, 12, 1]);
        assert_eq!(r.payload_len, 4);
    }

    #[test]
    fn test_emit() {
        let b = packet_with_checksum();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 20];
        r.emit(&mut out);
        assert_eq!(&out[..], &b[..20]);
    }

    #[test]
    fn test_padding_and_options() {
        // Ethernet padding beyond total length is ignored.
        let mut padded = packet_with_checksum().to_vec();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(Packet::new_checked(&padded[..]).unwrap().payload(), &[1, 2, 3, 4]);
        // IHL 6: 4 option bytes.
        let mut o = vec![0x46, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2];
        o.extend_from_slice(&[1, 1, 1, 0, 9, 9, 9, 9]);
        let p = Packet::new_checked(&o[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9, 9, 9, 9]);
        assert!(Repr::parse(&p).is_err());
    }

    #[test]
    fn test_fragments_flagged() {
        let mut b = packet_with_checksum();
        b[6] = 0x20; // MF
        assert!(Packet::new_checked(&b[..]).unwrap().is_fragment());
        b[6] = 0x00;
        b[7] = 0x10; // offset 16*8
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_fragment());
        assert_eq!(p.frag_offset(), 128);
    }

    #[test]
    fn test_malformed() {
        let mut b = packet_with_checksum();
        b[0] = 0x65;
        assert!(matches!(Packet::new_checked(&b[..]), Err(Error::Malformed { .. })));
        let mut b = packet_with_checksum();
        b[0] = 0x44;
        assert!(Packet::new_checked(&b[..]).is_err());
        let mut b = packet_with_checksum();
        b[3] = 0x40; // total length past the buffer
        assert!(matches!(Packet::new_checked(&b[..]), Err(Error::Truncated { .. })));
        assert!(Packet::new_checked(&b[..19]).is_err());
    }
}

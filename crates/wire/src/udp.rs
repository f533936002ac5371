//! UDP datagrams (RFC 768).
//!
//! `Packet::new_checked` promises: the 8-byte header is present, and the length field is at
//! least 8 and fits the buffer. `payload` is the bytes the length field covers.

use crate::error::check;
use crate::{fold_checksum, ones_complement_sum, Error, Result};

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const HEADER_LEN: usize = 8;
}

pub const HEADER_LEN: usize = field::HEADER_LEN;

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
        check("udp header", buf, 0, field::HEADER_LEN)?;
        let len = usize::from(self.len());
        if len < field::HEADER_LEN {
            return Err(Error::Malformed { what: "udp length", offset: field::LENGTH.start, value: len as u64 });
        }
        check("udp payload", buf, field::HEADER_LEN, len - field::HEADER_LEN)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }
    /// The length field: header plus payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::HEADER_LEN..usize::from(self.len())]
    }
    /// True when the checksum is absent (zero) or correct for the given IPv4 addresses.
    pub fn verify_checksum(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let dgram = &self.buffer.as_ref()[..usize::from(self.len())];
        fold_checksum(ones_complement_sum(pseudo_header(src, dst, self.len()), dgram)) == 0
    }
}

fn pseudo_header(src: [u8; 4], dst: [u8; 4], len: u16) -> u32 {
    let mut acc = ones_complement_sum(0, &src);
    acc = ones_complement_sum(acc, &dst);
    acc + u32::from(crate::ipv4::protocol::UDP) + u32::from(len)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    /// Compute and store the checksum over the datagram `len()` covers.
    pub fn fill_checksum(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let len = self.len();
        let buf = self.buffer.as_mut();
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
        let mut c = fold_checksum(ones_complement_sum(pseudo_header(src, dst, len), &buf[..usize::from(len)]));
        if c == 0 {
            c = 0xffff; // zero means "no checksum" in UDP over IPv4
        }
        buf[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
    }
    pub fn clear_checksum(&mut self) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&[0, 0]);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[field::HEADER_LEN..len]
    }
}

/// The owned meaning of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { src_port: p.src_port(), dst_port: p.dst_port(), payload_len: p.payload().len() })
    }

    pub const fn buffer_len(&self) -> usize {
        field::HEADER_LEN
    }

    /// Write the header into the front of `buf`. The checksum is left zero (absent); call
    /// `Packet::fill_checksum` after the payload is in place to set it.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        buf[field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        let len = (field::HEADER_LEN + self.payload_len) as u16;
        buf[field::LENGTH].copy_from_slice(&len.to_be_bytes());
        buf[field::CHECKSUM].copy_from_slice(&[0, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DGRAM: [u8; 12] = [0x30, 0x39, 0x66, 0xf0, 0x00, 0x0c, 0x00, 0x00, 1, 2, 3, 4];

    #[test]
    fn test_parse() {
        let p = Packet::new_checked(&DGRAM[..]).unwrap();
        assert_eq!(p.src_port(), 12345);
        assert_eq!(p.dst_port(), 26352);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
        assert!(p.verify_checksum([1, 1, 1, 1], [2, 2, 2, 2]));
    }

    #[test]
    fn test_emit() {
        let r = Repr::parse(&Packet::new_checked(&DGRAM[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 8];
        r.emit(&mut out);
        assert_eq!(&out[..], &DGRAM[..8]);
    }

    #[test]
    fn test_checksum() {
        let mut b = DGRAM;
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.fill_checksum([10, 0, 0, 1], [233, 54, 12, 1]);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum([10, 0, 0, 1], [233, 54, 12, 1]));
        assert!(!p.verify_checksum([10, 0, 0, 2], [233, 54, 12, 1]));
    }

    #[test]
    fn test_malformed() {
        let mut b = DGRAM;
        b[5] = 7;
        assert!(matches!(Packet::new_checked(&b[..]), Err(Error::Malformed { .. })));
        b[5] = 13;
        assert!(matches!(Packet::new_checked(&b[..]), Err(Error::Truncated { .. })));
        assert!(Packet::new_checked(&DGRAM[..7]).is_err());
    }
}

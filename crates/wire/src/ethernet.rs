//! Ethernet II frames with an optional IEEE 802.1Q VLAN tag.
//!
//! `Frame::new_checked` promises: the buffer holds the 14-byte header, and the 4-byte tag
//! when the outer EtherType is 0x8100. It does not promise anything about the payload.
//! Only one tag is understood; a second (stacked) tag is reported as the inner EtherType.

use crate::error::check;
use crate::Result;

/// EtherType values tickplant cares about.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const TCI: Range<usize> = 14..16;
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
    pub const HEADER_LEN: usize = 14;
    pub const TAGGED_HEADER_LEN: usize = 18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of an 802.1Q-tagged header.
pub const TAGGED_HEADER_LEN: usize = field::TAGGED_HEADER_LEN;

/// A read-only or read-write view of an Ethernet II frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking it. Accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer, checking it holds the (tagged) header.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check the buffer is long enough for the header and tag.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check("ethernet header", buf, 0, field::HEADER_LEN)?;
        if self.outer_ethertype() == ethertype::VLAN {
            check("802.1Q tag", buf, field::HEADER_LEN, 4)?;
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        a
    }

    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        a
    }

    fn outer_ethertype(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The 802.1Q tag control information (PCP, DEI, VLAN id), if the frame is tagged.
    pub fn vlan_tci(&self) -> Option<u16> {
        if self.outer_ethertype() == ethertype::VLAN {
            let b = &self.buffer.as_ref()[field::TCI];
            Some(u16::from_be_bytes([b[0], b[1]]))
        } else {
            None
        }
    }

    /// The VLAN id (low 12 bits of the TCI), if tagged.
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|t| t & 0x0fff)
    }

    /// The EtherType of the payload (after the tag, if any).
    pub fn ethertype(&self) -> u16 {
        if self.outer_ethertype() == ethertype::VLAN {
            let b = &self.buffer.as_ref()[field::INNER_ETHERTYPE];
            u16::from_be_bytes([b[0], b[1]])
        } else {
            self.outer_ethertype()
        }
    }

    /// Length of the header including the tag.
    pub fn header_len(&self) -> usize {
        if self.outer_ethertype() == ethertype::VLAN {
            field::TAGGED_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// The payload after the header (and tag).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a);
    }
    pub fn set_src_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// The owned meaning of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub dst_addr: [u8; 6],
    pub src_addr: [u8; 6],
    /// 802.1Q tag control information, when tagged.
    pub vlan_tci: Option<u16>,
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            vlan_tci: frame.vlan_tci(),
            ethertype: frame.ethertype(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        if self.vlan_tci.is_some() {
            field::TAGGED_HEADER_LEN
        } else {
            field::HEADER_LEN
        }
    }

    /// Write the header into the front of `buf`, which must hold `buffer_len()` bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::DST].copy_from_slice(&self.dst_addr);
        buf[field::SRC].copy_from_slice(&self.src_addr);
        match self.vlan_tci {
            Some(tci) => {
                buf[field::ETHERTYPE].copy_from_slice(&ethertype::VLAN.to_be_bytes());
                buf[field::TCI].copy_from_slice(&tci.to_be_bytes());
                buf[field::INNER_ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes());
            }
            None => buf[field::ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static UNTAGGED: [u8; 16] = [
        0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, // dst (multicast)
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // src
        0x08, 0x00, // IPv4
        0xaa, 0xbb, // payload
    ];
    static TAGGED: [u8; 20] = [
        0x01, 0x00, 0x5e, 0x01, 0x02, 0x03, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x81, 0x00, 0x20,
        0x64, // PCP 1, VLAN 100
        0x08, 0x00, 0xaa, 0xbb,
    ];

    #[test]
    fn test_parse() {
        let f = Frame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(f.ethertype(), ethertype::IPV4);
        assert_eq!(f.vlan_id(), None);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        let t = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(t.ethertype(), ethertype::IPV4);
        assert_eq!(t.vlan_id(), Some(100));
        assert_eq!(t.vlan_tci(), Some(0x2064));
        assert_eq!(t.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn test_emit() {
        for bytes in [&UNTAGGED[..], &TAGGED[..]] {
            let repr = Repr::parse(&Frame::new_checked(bytes).unwrap()).unwrap();
            let mut buf = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut buf);
            assert_eq!(&buf[..], &bytes[..repr.buffer_len()]);
        }
    }

    #[test]
    fn test_truncated() {
        assert!(Frame::new_checked(&UNTAGGED[..13]).is_err());
        let e = Frame::new_checked(&TAGGED[..16]).unwrap_err();
        assert_eq!(e.offset(), 14);
    }

    #[test]
    fn test_deconstruct() {
        let mut buf = UNTAGGED;
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_src_addr([9; 6]);
        f.payload_mut()[0] = 1;
        assert_eq!(f.src_addr(), [9; 6]);
        assert_eq!(f.into_inner()[14], 1);
    }
}

//! Ethernet II frames with up to two VLAN tags: IEEE 802.1Q (TPID 0x8100), and stacked
//! (QinQ) as IEEE 802.1ad writes them (an 0x88a8 service tag, then an 0x8100 one) or as
//! older switches and tap aggregators do (0x9100, or 0x8100 twice).
//!
//! `Frame::new_checked` promises: the buffer holds the 14-byte header and each tag it
//! announces (two at most; a third TPID is reported as the EtherType). It does not promise
//! anything about the payload.

use crate::error::check;
use crate::Result;

/// EtherType values tickplant cares about.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service tag (the outer tag of QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// The outer tag of QinQ before 802.1ad.
    pub const QINQ_OLD: u16 = 0x9100;
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const HEADER_LEN: usize = 14;
    pub const TAG_LEN: usize = 4;
    pub const TAGGED_HEADER_LEN: usize = 18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Length of an 802.1Q-tagged header.
pub const TAGGED_HEADER_LEN: usize = field::TAGGED_HEADER_LEN;
/// Tags read before the EtherType: two (QinQ).
pub const MAX_TAGS: usize = 2;

/// Whether an EtherType announces a VLAN tag.
pub const fn is_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD)
}

/// One VLAN tag: its protocol identifier and its control information (PCP, DEI, VLAN id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub tpid: u16,
    pub tci: u16,
}

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

    /// Wrap a buffer, checking it holds the header and its tags.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check the buffer is long enough for the header and each tag it announces.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check("ethernet header", buf, 0, field::HEADER_LEN)?;
        for i in 0..MAX_TAGS {
            if !is_tpid(self.be16(field::ETHERTYPE.start + i * field::TAG_LEN)) {
                break;
            }
            check(if i == 0 { "vlan tag" } else { "inner vlan tag" }, buf, field::HEADER_LEN + i * field::TAG_LEN, 4)?;
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn be16(&self, at: usize) -> u16 {
        let b = &self.buffer.as_ref()[at..at + 2];
        u16::from_be_bytes([b[0], b[1]])
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

    /// The tags, outermost first (two at most).
    pub fn tags(&self) -> [Option<Tag>; MAX_TAGS] {
        let mut t = [None; MAX_TAGS];
        for (i, slot) in t.iter_mut().enumerate() {
            let at = field::ETHERTYPE.start + i * field::TAG_LEN;
            let tpid = self.be16(at);
            if !is_tpid(tpid) {
                break;
            }
            *slot = Some(Tag { tpid, tci: self.be16(at + 2) });
        }
        t
    }

    /// Tags before the EtherType (a compare a tag: the per-frame path of tagged frames).
    fn tag_count(&self) -> usize {
        let mut n = 0;
        while n < MAX_TAGS && is_tpid(self.be16(field::ETHERTYPE.start + n * field::TAG_LEN)) {
            n += 1;
        }
        n
    }

    /// The outer tag's control information (PCP, DEI, VLAN id), if the frame is tagged.
    pub fn vlan_tci(&self) -> Option<u16> {
        self.tags()[0].map(|t| t.tci)
    }

    /// The outer VLAN id (low 12 bits of the TCI), if tagged.
    pub fn vlan_id(&self) -> Option<u16> {
        self.vlan_tci().map(|t| t & 0x0fff)
    }

    /// The EtherType of the payload (after the tags, if any).
    pub fn ethertype(&self) -> u16 {
        self.be16(field::ETHERTYPE.start + self.tag_count() * field::TAG_LEN)
    }

    /// Length of the header including the tags.
    pub fn header_len(&self) -> usize {
        field::HEADER_LEN + self.tag_count() * field::TAG_LEN
    }

    /// The payload after the header (and tags).
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
    /// The VLAN tags, outermost first: none, one, or two (QinQ). A second without a first
    /// is not written.
    pub tags: [Option<Tag>; MAX_TAGS],
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            dst_addr: frame.dst_addr(),
            src_addr: frame.src_addr(),
            tags: frame.tags(),
            ethertype: frame.ethertype(),
        })
    }

    /// An untagged header, or one 802.1Q tag of `vlan_tci`.
    pub const fn new(dst_addr: [u8; 6], src_addr: [u8; 6], vlan_tci: Option<u16>, ethertype: u16) -> Repr {
        let tag = match vlan_tci {
            Some(tci) => Some(Tag { tpid: ethertype::VLAN, tci }),
            None => None,
        };
        Repr { dst_addr, src_addr, tags: [tag, None], ethertype }
    }

    fn tag_count(&self) -> usize {
        match self.tags {
            [None, _] => 0,
            [Some(_), None] => 1,
            [Some(_), Some(_)] => 2,
        }
    }

    pub fn buffer_len(&self) -> usize {
        field::HEADER_LEN + self.tag_count() * field::TAG_LEN
    }

    /// Write the header into the front of `buf`, which must hold `buffer_len()` bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::DST].copy_from_slice(&self.dst_addr);
        buf[field::SRC].copy_from_slice(&self.src_addr);
        let mut at = field::ETHERTYPE.start;
        for t in self.tags.iter().take(self.tag_count()).flatten() {
            buf[at..at + 2].copy_from_slice(&t.tpid.to_be_bytes());
            buf[at + 2..at + 4].copy_from_slice(&t.tci.to_be_bytes());
            at += field::TAG_LEN;
        }
        buf[at..at + 2].copy_from_slice(&self.ethertype.to_be_bytes());
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

    /// QinQ as 802.1ad writes it (a service tag, then a customer tag), the older 0x9100
    /// form, and 0x8100 twice.
    fn stacked(outer: u16) -> Vec<u8> {
        let mut f = UNTAGGED[..12].to_vec();
        f.extend_from_slice(&outer.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x0a, 0x81, 0x00, 0x20, 0x64, 0x08, 0x00, 0xaa, 0xbb]);
        f
    }

    #[test]
    fn stacked_tags_are_read() {
        for outer in [ethertype::QINQ, ethertype::QINQ_OLD, ethertype::VLAN] {
            let b = stacked(outer);
            let f = Frame::new_checked(&b[..]).unwrap();
            assert_eq!(f.ethertype(), ethertype::IPV4);
            assert_eq!(f.header_len(), 22);
            assert_eq!(f.vlan_id(), Some(10), "the outer tag's");
            assert_eq!(
                f.tags(),
                [Some(Tag { tpid: outer, tci: 10 }), Some(Tag { tpid: ethertype::VLAN, tci: 0x2064 })]
            );
            assert_eq!(f.payload(), &[0xaa, 0xbb]);
            let e = Frame::new_checked(&b[..20]).unwrap_err();
            assert_eq!(e.offset(), 18, "the inner tag cut");
        }
        // A third tag is not read: its TPID is the EtherType.
        let mut three = stacked(ethertype::QINQ);
        three.splice(20..20, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(Frame::new_checked(&three[..]).unwrap().ethertype(), ethertype::VLAN);
    }

    #[test]
    fn test_emit() {
        let (qinq, old) = (stacked(ethertype::QINQ), stacked(ethertype::QINQ_OLD));
        for bytes in [&UNTAGGED[..], &TAGGED[..], &qinq[..], &old[..]] {
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

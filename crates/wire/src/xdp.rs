//! NYSE XDP / Pillar packets.
//!
//! Packet header, 16 bytes, little-endian: PktSize u16 (whole packet, header included),
//! DeliveryFlag u8, NumberMsgs u8, SeqNum u32 (of the first message), SendTime u32 (seconds),
//! SendTimeNS u32. Then `NumberMsgs` messages, each starting with MsgSize u16 (the whole
//! message, these 4 bytes included) and MsgType u16.
//!
//! `Packet::new_checked` promises the header, and that PktSize is at least 16 and fits the
//! buffer. [`Messages`] checks each message against PktSize as it goes.

use crate::error::check;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const PKT_SIZE: Range<usize> = 0..2;
    pub const DELIVERY_FLAG: usize = 2;
    pub const NUMBER_MSGS: usize = 3;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const SEND_TIME: Range<usize> = 8..12;
    pub const SEND_TIME_NS: Range<usize> = 12..16;
    pub const HEADER_LEN: usize = 16;
    pub const MSG_HEADER_LEN: usize = 4;
}

pub const HEADER_LEN: usize = field::HEADER_LEN;
pub const SEQUENCE_OFFSET: usize = field::SEQ_NUM.start;
pub const COUNT_OFFSET: usize = field::NUMBER_MSGS;

/// DeliveryFlag values of the XDP common specification.
pub mod delivery_flag {
    pub const HEARTBEAT: u8 = 1;
    pub const FAILOVER: u8 = 10;
    pub const ORIGINAL: u8 = 11;
    pub const SEQUENCE_NUMBER_RESET: u8 = 12;
    pub const ONE_RETRANSMISSION_PACKET: u8 = 13;
    pub const RETRANSMISSION_SEQUENCE: u8 = 15;
    pub const ONE_REFRESH_PACKET: u8 = 17;
    pub const REFRESH_SEQUENCE_START: u8 = 18;
    pub const REFRESH_SEQUENCE: u8 = 19;
    pub const REFRESH_SEQUENCE_END: u8 = 20;
    pub const MESSAGE_UNAVAILABLE: u8 = 21;
}

/// Message types of the common specification used by the sequencer.
pub mod msg_type {
    pub const SEQUENCE_NUMBER_RESET: u16 = 1;
    pub const HEARTBEAT: u16 = 2;
}

/// Size of a Sequence Number Reset message (type 1).
pub const SEQUENCE_NUMBER_RESET_LEN: usize = 14;

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
        check("xdp packet header", buf, 0, field::HEADER_LEN)?;
        let size = usize::from(self.pkt_size());
        if size < field::HEADER_LEN {
            return Err(Error::Malformed { what: "xdp PktSize", offset: 0, value: size as u64 });
        }
        check("xdp packet", buf, 0, size)
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn u32_at(&self, r: core::ops::Range<usize>) -> u32 {
        let b = &self.buffer.as_ref()[r];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn pkt_size(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PKT_SIZE];
        u16::from_le_bytes([b[0], b[1]])
    }
    pub fn delivery_flag(&self) -> u8 {
        self.buffer.as_ref()[field::DELIVERY_FLAG]
    }
    pub fn number_msgs(&self) -> u8 {
        self.buffer.as_ref()[field::NUMBER_MSGS]
    }
    pub fn seq_num(&self) -> u32 {
        self.u32_at(field::SEQ_NUM)
    }
    pub fn send_time(&self) -> u32 {
        self.u32_at(field::SEND_TIME)
    }
    pub fn send_time_ns(&self) -> u32 {
        self.u32_at(field::SEND_TIME_NS)
    }
    /// True if the packet carries a Sequence Number Reset: by its delivery flag, or by a
    /// type-1 message as its first message.
    pub fn is_sequence_reset(&self) -> bool {
        if self.delivery_flag() == delivery_flag::SEQUENCE_NUMBER_RESET {
            return true;
        }
        matches!(self.messages().next(), Some(Ok((_, m))) if m.msg_type == msg_type::SEQUENCE_NUMBER_RESET)
    }
    pub fn messages(&self) -> Messages<'_> {
        let end = usize::from(self.pkt_size());
        Messages { buf: &self.buffer.as_ref()[..end], pos: field::HEADER_LEN, left: self.number_msgs() }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_pkt_size(&mut self, v: u16) {
        self.buffer.as_mut()[field::PKT_SIZE].copy_from_slice(&v.to_le_bytes());
    }
    pub fn set_number_msgs(&mut self, v: u8) {
        self.buffer.as_mut()[field::NUMBER_MSGS] = v;
    }
    pub fn set_seq_num(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ_NUM].copy_from_slice(&v.to_le_bytes());
    }
}

/// One message of a packet: its type and its bytes (header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub msg_type: u16,
    pub bytes: &'a [u8],
}

/// Iterator over the messages of a packet, yielding `(offset, message)`.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    buf: &'a [u8],
    pos: usize,
    left: u8,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<(usize, Message<'a>)>;
    /// Inlined into the decoders' loops: as a call it was about 40 instructions a message
    /// of the NYSE decoder (callgrind, `tickplant bench feeds`).
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let at = self.pos;
        if let Err(e) = check("xdp message header", self.buf, at, field::MSG_HEADER_LEN) {
            self.left = 0;
            return Some(Err(e));
        }
        let size = usize::from(u16::from_le_bytes([self.buf[at], self.buf[at + 1]]));
        let msg_type = u16::from_le_bytes([self.buf[at + 2], self.buf[at + 3]]);
        if size < field::MSG_HEADER_LEN {
            self.left = 0;
            return Some(Err(Error::Malformed { what: "xdp MsgSize", offset: at, value: size as u64 }));
        }
        if let Err(e) = check("xdp message", self.buf, at, size) {
            self.left = 0;
            return Some(Err(e));
        }
        self.pos = at + size;
        self.left -= 1;
        Some(Ok((at, Message { msg_type, bytes: &self.buf[at..at + size] })))
    }
}

/// Byte offset of message `n` (0-based) in the packet, or of the end of the messages when
/// `n == NumberMsgs`.
pub fn message_offset(packet: &[u8], n: u8) -> Result<usize> {
    let p = Packet::new_checked(packet)?;
    if n > p.number_msgs() {
        return Err(Error::Malformed { what: "xdp message index", offset: field::NUMBER_MSGS, value: u64::from(n) });
    }
    let mut it = p.messages();
    let mut off = field::HEADER_LEN;
    for _ in 0..n {
        let (at, m) = it.next().expect("n <= NumberMsgs")?;
        off = at + m.bytes.len();
    }
    Ok(off)
}

/// Check that a whole UDP payload is one well-formed XDP packet: `PktSize` is the payload's
/// length, and exactly `NumberMsgs` messages fill it. Anything else is an error with its
/// offset: a datagram that only begins like an XDP header is not taken for one.
pub fn check_messages(packet: &[u8]) -> Result<()> {
    let p = Packet::new_checked(packet)?;
    let size = usize::from(p.pkt_size());
    if size != packet.len() {
        return Err(Error::Malformed {
            what: "xdp PktSize (not the datagram's length)",
            offset: 0,
            value: size as u64,
        });
    }
    let mut at = field::HEADER_LEN;
    for m in p.messages() {
        let (off, msg) = m?;
        at = off + msg.bytes.len();
    }
    if at != size {
        return Err(Error::Malformed {
            what: "xdp NumberMsgs (bytes after the last message)",
            offset: field::NUMBER_MSGS,
            value: u64::from(p.number_msgs()),
        });
    }
    Ok(())
}

/// The owned meaning of an XDP packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub pkt_size: u16,
    pub delivery_flag: u8,
    pub number_msgs: u8,
    pub seq_num: u32,
    pub send_time: u32,
    pub send_time_ns: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            pkt_size: p.pkt_size(),
            delivery_flag: p.delivery_flag(),
            number_msgs: p.number_msgs(),
            seq_num: p.seq_num(),
            send_time: p.send_time(),
            send_time_ns: p.send_time_ns(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        field::HEADER_LEN
    }
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::PKT_SIZE].copy_from_slice(&self.pkt_size.to_le_bytes());
        buf[field::DELIVERY_FLAG] = self.delivery_flag;
        buf[field::NUMBER_MSGS] = self.number_msgs;
        buf[field::SEQ_NUM].copy_from_slice(&self.seq_num.to_le_bytes());
        buf[field::SEND_TIME].copy_from_slice(&self.send_time.to_le_bytes());
        buf[field::SEND_TIME_NS].copy_from_slice(&self.send_time_ns.to_le_bytes());
    }
}

/// Append a message (`[u16 LE size][u16 LE type][body]`) to `out`.
pub fn push_message(out: &mut Vec<u8>, msg_type: u16, body: &[u8]) {
    out.extend_from_slice(&((body.len() + 4) as u16).to_le_bytes());
    out.extend_from_slice(&msg_type.to_le_bytes());
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut v = vec![0u8; 16];
        push_message(&mut v, 100, &[1; 35]);
        push_message(&mut v, 102, &[2; 21]);
        let r = Repr {
            pkt_size: v.len() as u16,
            delivery_flag: delivery_flag::ORIGINAL,
            number_msgs: 2,
            seq_num: 500,
            send_time: 1_700_000_000,
            send_time_ns: 123,
        };
        r.emit(&mut v[..16]);
        v
    }

    #[test]
    fn test_parse() {
        let b = sample();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.seq_num(), 500);
        assert_eq!(p.number_msgs(), 2);
        let types: Vec<u16> = p.messages().map(|m| m.unwrap().1.msg_type).collect();
        assert_eq!(types, vec![100, 102]);
        assert!(!p.is_sequence_reset());
        assert_eq!(message_offset(&b, 1).unwrap(), 16 + 39);
        assert_eq!(message_offset(&b, 2).unwrap(), b.len());
    }

    #[test]
    fn test_emit() {
        let b = sample();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 16];
        r.emit(&mut out);
        assert_eq!(&out[..], &b[..16]);
    }

    #[test]
    fn test_check_messages() {
        let b = sample();
        assert_eq!(check_messages(&b), Ok(()));
        // PktSize short of the datagram; NumberMsgs too small and too large.
        let mut padded = b.clone();
        padded.push(0);
        assert_eq!(check_messages(&padded).unwrap_err().offset(), 0);
        let mut fewer = b.clone();
        fewer[3] = 1;
        assert_eq!(check_messages(&fewer).unwrap_err().offset(), 3);
        let mut more = b.clone();
        more[3] = 3;
        assert!(check_messages(&more).is_err());
        assert!(check_messages(&b[..b.len() - 1]).is_err());
    }

    #[test]
    fn test_reset() {
        let mut v = vec![0u8; 16];
        push_message(&mut v, msg_type::SEQUENCE_NUMBER_RESET, &[0; 10]);
        assert_eq!(v.len() - 16, SEQUENCE_NUMBER_RESET_LEN);
        Repr {
            pkt_size: v.len() as u16,
            delivery_flag: delivery_flag::ORIGINAL,
            number_msgs: 1,
            seq_num: 1,
            send_time: 0,
            send_time_ns: 0,
        }
        .emit(&mut v[..16]);
        assert!(Packet::new_checked(&v[..]).unwrap().is_sequence_reset());
    }

    #[test]
    fn test_malformed() {
        let mut b = sample();
        b[16] = 2; // MsgSize 2 < 4
        b[17] = 0;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(p.messages().next(), Some(Err(Error::Malformed { offset: 16, .. }))));
        let mut b = sample();
        b[0] = 0xff;
        assert!(Packet::new_checked(&b[..]).is_err());
        b[0] = 3;
        b[1] = 0;
        assert!(Packet::new_checked(&b[..]).is_err());
    }
}

//! NASDAQ MoldUDP64 downstream packets.
//!
//! Layout: session (10 ASCII bytes), sequence number (u64 BE, of the first message),
//! message count (u16 BE; 0 is a heartbeat, 0xFFFF marks the end of the session), then
//! `message count` message blocks, each `[u16 BE length][message]`.
//!
//! `Packet::new_checked` promises the 20-byte header. Message blocks are checked one at a
//! time by [`Messages`], which yields an error (with its byte offset) for a block that runs
//! past the buffer, and stops after `message_count` blocks.

use crate::error::check;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const SESSION: Range<usize> = 0..10;
    pub const SEQUENCE: Range<usize> = 10..18;
    pub const COUNT: Range<usize> = 18..20;
    pub const HEADER_LEN: usize = 20;
}

pub const HEADER_LEN: usize = field::HEADER_LEN;
/// Byte offset of the sequence number in the header.
pub const SEQUENCE_OFFSET: usize = field::SEQUENCE.start;
/// Byte offset of the message count in the header.
pub const COUNT_OFFSET: usize = field::COUNT.start;
/// Message count value of an end-of-session packet.
pub const END_OF_SESSION: u16 = 0xffff;

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
        check("moldudp64 header", self.buffer.as_ref(), 0, field::HEADER_LEN)
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn session(&self) -> [u8; 10] {
        let mut s = [0u8; 10];
        s.copy_from_slice(&self.buffer.as_ref()[field::SESSION]);
        s
    }
    pub fn sequence_number(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::SEQUENCE];
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    pub fn message_count(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::COUNT];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn is_heartbeat(&self) -> bool {
        self.message_count() == 0
    }
    pub fn is_end_of_session(&self) -> bool {
        self.message_count() == END_OF_SESSION
    }
    /// The message blocks after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::HEADER_LEN..]
    }
    /// Iterate over the messages the header announces (none for heartbeats and
    /// end-of-session packets).
    pub fn messages(&self) -> Messages<'_> {
        let n = if self.is_end_of_session() { 0 } else { self.message_count() };
        Messages { buf: self.buffer.as_ref(), pos: field::HEADER_LEN, left: n }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_sequence_number(&mut self, seq: u64) {
        self.buffer.as_mut()[field::SEQUENCE].copy_from_slice(&seq.to_be_bytes());
    }
    pub fn set_message_count(&mut self, n: u16) {
        self.buffer.as_mut()[field::COUNT].copy_from_slice(&n.to_be_bytes());
    }
}

/// Iterator over the message blocks of a packet: yields `(offset, message)` where `offset`
/// is the byte offset of the block's length prefix within the packet.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    buf: &'a [u8],
    pos: usize,
    left: u16,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<(usize, &'a [u8])>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        // A block that fits, with no error built on the way: the decoder's per-message path.
        let at = self.pos;
        if let Some(&[hi, lo]) = self.buf.get(at..at + 2) {
            let len = usize::from(u16::from_be_bytes([hi, lo]));
            if let Some(m) = self.buf.get(at + 2..at + 2 + len) {
                self.pos = at + 2 + len;
                self.left -= 1;
                return Some(Ok((at, m)));
            }
        }
        Some(Err(self.fail(at)))
    }
}

impl Messages<'_> {
    /// The block at `at` does not fit: what is wrong with it, and no more blocks.
    #[cold]
    #[inline(never)]
    fn fail(&mut self, at: usize) -> Error {
        self.left = 0;
        if let Err(e) = check("moldudp64 message length", self.buf, at, 2) {
            return e;
        }
        let len = usize::from(u16::from_be_bytes([self.buf[at], self.buf[at + 1]]));
        let have = self.buf.len().saturating_sub(at + 2);
        Error::Truncated { what: "moldudp64 message", offset: at + 2, need: len, have }
    }
}

/// Byte offset (within the packet) of message block `n` (0-based), or of the end of the
/// blocks when `n == message_count`. Used to trim a packet to its later messages.
pub fn block_offset(packet: &[u8], n: u16) -> Result<usize> {
    let p = Packet::new_checked(packet)?;
    if p.is_end_of_session() || n > p.message_count() {
        return Err(Error::Malformed {
            what: "moldudp64 message index",
            offset: field::COUNT.start,
            value: u64::from(n),
        });
    }
    let mut msgs = p.messages();
    let mut off = field::HEADER_LEN;
    for _ in 0..n {
        let (at, m) = msgs.next().expect("n <= message_count")?;
        off = at + 2 + m.len();
    }
    Ok(off)
}

/// Check that a whole UDP payload is one well-formed MoldUDP64 packet: the header, then
/// exactly `message count` blocks that end where the payload ends (a heartbeat or an
/// end-of-session packet is the header alone). Bytes past the last block, or a block that
/// runs past the payload, are errors with their offset: a datagram that only begins like a
/// MoldUDP64 header (another feed's traffic on the same capture) is not taken for one.
#[inline]
pub fn check_blocks(packet: &[u8]) -> Result<()> {
    if blocks_tile(packet) {
        return Ok(());
    }
    blocks_error(packet)
}

/// Whether the header's blocks tile the packet exactly: the walk alone, with no error built
/// (every frame of a feed takes it; `tickplant bench arb`, end to end).
#[inline(always)]
fn blocks_tile(packet: &[u8]) -> bool {
    let Some(&[hi, lo]) = packet.get(field::COUNT) else { return false };
    let count = u16::from_be_bytes([hi, lo]);
    if count == END_OF_SESSION {
        return packet.len() == field::HEADER_LEN;
    }
    let (mut at, n) = (field::HEADER_LEN, packet.len());
    for _ in 0..count {
        if at + 2 > n {
            return false;
        }
        at += 2 + usize::from(u16::from_be_bytes([packet[at], packet[at + 1]]));
    }
    at == n
}

/// What is wrong with a packet whose blocks do not tile it.
#[cold]
#[inline(never)]
fn blocks_error(packet: &[u8]) -> Result<()> {
    let p = Packet::new_checked(packet)?;
    let mut at = field::HEADER_LEN;
    for m in p.messages() {
        let (off, msg) = m?;
        at = off + 2 + msg.len();
    }
    if at != packet.len() {
        return Err(Error::Malformed {
            what: "moldudp64 packet length (bytes after the last message block)",
            offset: at,
            value: (packet.len() - at) as u64,
        });
    }
    Ok(())
}

/// The owned meaning of a MoldUDP64 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub session: [u8; 10],
    pub sequence_number: u64,
    pub message_count: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr { session: p.session(), sequence_number: p.sequence_number(), message_count: p.message_count() })
    }
    pub const fn buffer_len(&self) -> usize {
        field::HEADER_LEN
    }
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::SESSION].copy_from_slice(&self.session);
        buf[field::SEQUENCE].copy_from_slice(&self.sequence_number.to_be_bytes());
        buf[field::COUNT].copy_from_slice(&self.message_count.to_be_bytes());
    }
}

/// Append a message block (`[u16 BE length][message]`) to `out`.
pub fn push_message(out: &mut Vec<u8>, msg: &[u8]) {
    out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    out.extend_from_slice(msg);
}

/// A re-request, as a client sends it to the exchange's retransmission server to have
/// messages sent again, is a [`Repr`] alone: the session, the first sequence number wanted,
/// and how many messages (the server may send fewer; ask again for the rest).
impl Repr {
    /// A request from a datagram: exactly a header, with a count that asks for messages
    /// (neither 0, a heartbeat, nor 0xFFFF, an end of session).
    pub fn parse_request(buf: &[u8]) -> Result<Repr> {
        let r = Repr::parse(&Packet::new_checked(buf)?)?;
        if buf.len() != field::HEADER_LEN {
            return Err(Error::Malformed {
                what: "moldudp64 request length (a request is the 20-byte header alone)",
                offset: field::HEADER_LEN,
                value: buf.len() as u64,
            });
        }
        if r.message_count == 0 || r.message_count == END_OF_SESSION {
            return Err(Error::Malformed {
                what: "moldudp64 request message count",
                offset: field::COUNT.start,
                value: u64::from(r.message_count),
            });
        }
        Ok(r)
    }
    /// The header as its 20 bytes (a request, or the start of a packet).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        self.emit(&mut b);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(b"SESSION001");
        v.extend_from_slice(&1000u64.to_be_bytes());
        v.extend_from_slice(&2u16.to_be_bytes());
        push_message(&mut v, b"ABC");
        push_message(&mut v, b"DEFGH");
        v
    }

    #[test]
    fn test_parse() {
        let b = sample();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(&p.session(), b"SESSION001");
        assert_eq!(p.sequence_number(), 1000);
        assert_eq!(p.message_count(), 2);
        let msgs: Vec<_> = p.messages().map(|m| m.unwrap().1).collect();
        assert_eq!(msgs, vec![&b"ABC"[..], &b"DEFGH"[..]]);
        assert_eq!(block_offset(&b, 0).unwrap(), 20);
        assert_eq!(block_offset(&b, 1).unwrap(), 25);
        assert_eq!(block_offset(&b, 2).unwrap(), b.len());
        assert!(block_offset(&b, 3).is_err());
    }

    #[test]
    fn test_emit() {
        let b = sample();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 20];
        r.emit(&mut out);
        assert_eq!(&out[..], &b[..20]);
    }

    #[test]
    fn test_request_parse_emit() {
        let r = Repr { session: *b"SESSION001", sequence_number: 1000, message_count: 7 };
        let mut out = [0xa5u8; 20];
        r.emit(&mut out);
        assert_eq!(out, r.to_bytes());
        assert_eq!(&out[..10], b"SESSION001");
        assert_eq!(&out[10..18], &1000u64.to_be_bytes());
        assert_eq!(&out[18..], &7u16.to_be_bytes());
        assert_eq!(Repr::parse_request(&out).unwrap(), r);
        // A data packet, a heartbeat and a short datagram are not requests.
        assert!(Repr::parse_request(&sample()).is_err());
        let mut hb = out;
        hb[18..].copy_from_slice(&0u16.to_be_bytes());
        assert!(Repr::parse_request(&hb).is_err());
        assert!(Repr::parse_request(&out[..19]).is_err());
    }

    #[test]
    fn test_truncated_message() {
        let b = sample();
        let p = Packet::new_checked(&b[..b.len() - 1]).unwrap();
        let r: Vec<_> = p.messages().collect();
        assert!(r[0].is_ok());
        assert_eq!(r[1].unwrap_err().offset(), 27);
        assert!(Packet::new_checked(&b[..19]).is_err());
        // The errors say what was cut and by how much; nothing comes after one.
        assert_eq!(r[1].unwrap_err(), Error::Truncated { what: "moldudp64 message", offset: 27, need: 5, have: 4 });
        assert_eq!(r.len(), 2);
        let p = Packet::new_checked(&b[..26]).unwrap();
        let r: Vec<_> = p.messages().collect();
        assert_eq!(
            r[1].unwrap_err(),
            Error::Truncated { what: "moldudp64 message length", offset: 25, need: 2, have: 1 }
        );
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn test_check_blocks() {
        let b = sample();
        assert_eq!(check_blocks(&b), Ok(()));
        // A block cut short, a byte too many, a count larger than the blocks held.
        assert_eq!(check_blocks(&b[..b.len() - 1]).unwrap_err().offset(), 27);
        let mut extra = b.clone();
        extra.push(0);
        assert_eq!(
            check_blocks(&extra),
            Err(Error::Malformed {
                what: "moldudp64 packet length (bytes after the last message block)",
                offset: b.len(),
                value: 1
            })
        );
        let mut more = b.clone();
        more[18..20].copy_from_slice(&3u16.to_be_bytes());
        assert!(check_blocks(&more).is_err());
        let mut fewer = b.clone();
        fewer[18..20].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(check_blocks(&fewer).unwrap_err().offset(), 25);
        // Control packets are the header alone.
        let mut hb = b[..20].to_vec();
        hb[18..20].copy_from_slice(&0u16.to_be_bytes());
        assert_eq!(check_blocks(&hb), Ok(()));
        hb[18..20].copy_from_slice(&END_OF_SESSION.to_be_bytes());
        assert_eq!(check_blocks(&hb), Ok(()));
        hb.push(7);
        assert!(check_blocks(&hb).is_err());
        assert!(check_blocks(&b[..19]).is_err());
    }

    #[test]
    fn test_control_packets() {
        let mut b = sample();
        b.truncate(20);
        b[18..20].copy_from_slice(&0u16.to_be_bytes());
        assert!(Packet::new_checked(&b[..]).unwrap().is_heartbeat());
        b[18..20].copy_from_slice(&END_OF_SESSION.to_be_bytes());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_end_of_session());
        assert_eq!(p.messages().count(), 0);
    }

    #[test]
    fn test_deconstruct() {
        let mut b = sample();
        let mut p = Packet::new_checked(&mut b[..]).unwrap();
        p.set_sequence_number(7);
        p.set_message_count(1);
        assert_eq!(p.sequence_number(), 7);
        assert_eq!(p.messages().count(), 1);
    }
}

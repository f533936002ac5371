//! OPRA binary block headers.
//!
//! Version 6 (OPRA Pillar binary, as seen on real captures), big-endian:
//! Version u8 (0), Block Size u16 (1..3, the whole block), Data Feed Indicator u8 (3),
//! Retransmission Indicator u8 (4), Session Indicator u8 (5), Block Sequence Number u32
//! (6..10, of the block's first message), Messages in Block u8 (10), Block Timestamp
//! (11..19: seconds u32, nanoseconds u32), Block Checksum u16 (19..21); 21 bytes.
//! Earlier versions have no Session Indicator, so everything after the Retransmission
//! Indicator sits one byte earlier (sequence number at 5, message count at 9; 20 bytes).
//!
//! `Block::new_checked` promises the header of its version, and that Block Size covers the
//! header and fits the buffer. Message boundaries inside a block depend on each message's
//! category and are not known here, so blocks cannot be trimmed message by message.

use crate::error::check;
use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const BLOCK_SIZE: Range<usize> = 1..3;
    pub const DATA_FEED: usize = 3;
    pub const RETRANSMISSION: usize = 4;
    pub const V6_SESSION: usize = 5;
    pub const V6_SEQ: Range<usize> = 6..10;
    pub const V6_COUNT: usize = 10;
    pub const V6_TIMESTAMP: Range<usize> = 11..19;
    pub const V6_HEADER_LEN: usize = 21;
    pub const OLD_SEQ: Range<usize> = 5..9;
    pub const OLD_COUNT: usize = 9;
    pub const OLD_TIMESTAMP: Range<usize> = 10..18;
    pub const OLD_HEADER_LEN: usize = 20;
}

/// Sequence number offset in a version-6 block.
pub const SEQUENCE_OFFSET: usize = field::V6_SEQ.start;
/// Message count offset in a version-6 block.
pub const COUNT_OFFSET: usize = field::V6_COUNT;
/// Sequence number offset in blocks before version 6.
pub const OLD_SEQUENCE_OFFSET: usize = field::OLD_SEQ.start;
/// Message count offset in blocks before version 6.
pub const OLD_COUNT_OFFSET: usize = field::OLD_COUNT;

/// Header length of a block of the given version.
pub const fn header_len(version: u8) -> usize {
    if version >= 6 {
        field::V6_HEADER_LEN
    } else {
        field::OLD_HEADER_LEN
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Block<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Block<T> {
    pub const fn new_unchecked(buffer: T) -> Block<T> {
        Block { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Block<T>> {
        let b = Block::new_unchecked(buffer);
        b.check_len()?;
        Ok(b)
    }
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        check("opra block version", buf, 0, 1)?;
        let hl = header_len(self.version());
        check("opra block header", buf, 0, hl)?;
        let size = usize::from(self.block_size());
        if size < hl {
            return Err(Error::Malformed {
                what: "opra Block Size",
                offset: field::BLOCK_SIZE.start,
                value: size as u64,
            });
        }
        check("opra block", buf, 0, size)
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn block_size(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::BLOCK_SIZE];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn data_feed_indicator(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_FEED]
    }
    pub fn retransmission_indicator(&self) -> u8 {
        self.buffer.as_ref()[field::RETRANSMISSION]
    }
    /// Session indicator (version 6 only).
    pub fn session_indicator(&self) -> Option<u8> {
        (self.version() >= 6).then(|| self.buffer.as_ref()[field::V6_SESSION])
    }
    fn is_v6(&self) -> bool {
        self.version() >= 6
    }
    pub fn block_sequence_number(&self) -> u32 {
        let r = if self.is_v6() { field::V6_SEQ } else { field::OLD_SEQ };
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    pub fn messages_in_block(&self) -> u8 {
        let i = if self.is_v6() { field::V6_COUNT } else { field::OLD_COUNT };
        self.buffer.as_ref()[i]
    }
    /// Block timestamp as (seconds, nanoseconds).
    pub fn block_timestamp(&self) -> (u32, u32) {
        let r = if self.is_v6() { field::V6_TIMESTAMP } else { field::OLD_TIMESTAMP };
        let b = &self.buffer.as_ref()[r];
        (u32::from_be_bytes([b[0], b[1], b[2], b[3]]), u32::from_be_bytes([b[4], b[5], b[6], b[7]]))
    }
    /// The message bytes after the header, up to Block Size.
    pub fn payload(&self) -> &[u8] {
        let hl = header_len(self.version());
        &self.buffer.as_ref()[hl..usize::from(self.block_size())]
    }
}

/// The owned meaning of a version-6 block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub version: u8,
    pub block_size: u16,
    pub data_feed_indicator: u8,
    pub retransmission_indicator: u8,
    /// Present from version 6 on.
    pub session_indicator: Option<u8>,
    pub block_sequence_number: u32,
    pub messages_in_block: u8,
    pub timestamp: (u32, u32),
    pub checksum: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(b: &Block<T>) -> Result<Repr> {
        b.check_len()?;
        let hl = header_len(b.version());
        let c = &b.buffer.as_ref()[hl - 2..hl];
        Ok(Repr {
            version: b.version(),
            block_size: b.block_size(),
            data_feed_indicator: b.data_feed_indicator(),
            retransmission_indicator: b.retransmission_indicator(),
            session_indicator: b.session_indicator(),
            block_sequence_number: b.block_sequence_number(),
            messages_in_block: b.messages_in_block(),
            timestamp: b.block_timestamp(),
            checksum: u16::from_be_bytes([c[0], c[1]]),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        header_len(self.version)
    }
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::VERSION] = self.version;
        buf[field::BLOCK_SIZE].copy_from_slice(&self.block_size.to_be_bytes());
        buf[field::DATA_FEED] = self.data_feed_indicator;
        buf[field::RETRANSMISSION] = self.retransmission_indicator;
        let (seq, count, ts) = if self.version >= 6 {
            buf[field::V6_SESSION] = self.session_indicator.unwrap_or(0);
            (field::V6_SEQ, field::V6_COUNT, field::V6_TIMESTAMP)
        } else {
            (field::OLD_SEQ, field::OLD_COUNT, field::OLD_TIMESTAMP)
        };
        buf[seq].copy_from_slice(&self.block_sequence_number.to_be_bytes());
        buf[count] = self.messages_in_block;
        buf[ts.start..ts.start + 4].copy_from_slice(&self.timestamp.0.to_be_bytes());
        buf[ts.start + 4..ts.end].copy_from_slice(&self.timestamp.1.to_be_bytes());
        let hl = header_len(self.version);
        buf[hl - 2..hl].copy_from_slice(&self.checksum.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(version: u8) -> Repr {
        Repr {
            version,
            block_size: header_len(version) as u16 + 3,
            data_feed_indicator: b'O',
            retransmission_indicator: b' ',
            session_indicator: (version >= 6).then_some(b'1'),
            block_sequence_number: 0x0102_0304,
            messages_in_block: 2,
            timestamp: (1_700_000_000, 999),
            checksum: 0xbeef,
        }
    }

    #[test]
    fn test_parse() {
        let r = repr(6);
        let mut buf = vec![0u8; r.block_size as usize];
        r.emit(&mut buf);
        assert_eq!(&buf[6..10], &[1, 2, 3, 4]);
        assert_eq!(buf[10], 2);
        let b = Block::new_checked(&buf[..]).unwrap();
        assert_eq!(b.block_sequence_number(), 0x0102_0304);
        assert_eq!(b.payload().len(), 3);
        assert_eq!(Repr::parse(&b).unwrap(), r);
    }

    #[test]
    fn test_emit() {
        for v in [4u8, 6] {
            let r = repr(v);
            let mut buf = vec![0xa5u8; r.block_size as usize];
            r.emit(&mut buf);
            let back = Repr::parse(&Block::new_checked(&buf[..]).unwrap()).unwrap();
            assert_eq!(back, r);
            let mut again = vec![0xa5u8; r.block_size as usize];
            back.emit(&mut again);
            assert_eq!(buf, again);
        }
        let mut buf = vec![0u8; 23];
        repr(5).emit(&mut buf);
        assert_eq!(&buf[5..9], &[1, 2, 3, 4], "pre-6 sequence number at offset 5");
    }

    #[test]
    fn test_malformed() {
        let r = repr(6);
        let mut buf = vec![0u8; r.block_size as usize];
        r.emit(&mut buf);
        assert!(Block::new_checked(&buf[..20]).is_err());
        buf[2] = 5;
        assert!(matches!(Block::new_checked(&buf[..]), Err(Error::Malformed { .. })));
        assert!(Block::new_checked(&[][..]).is_err());
    }
}

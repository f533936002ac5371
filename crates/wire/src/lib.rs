//! Zero-copy views and owned representations of the wire formats tickplant reads.
//!
//! Every format follows one shape (after smoltcp's `wire` module):
//!
//! * `Packet<T: AsRef<[u8]>>` is a view over a buffer. `Packet::new_checked` validates the
//!   lengths once; after it succeeds no accessor can panic, whatever the bytes hold.
//! * `Repr` is the owned, validated meaning of a header, with `parse`, `emit` and `buffer_len`.
//! * Field offsets are named constants in a private `mod field`.
//!
//! Parsers are total: hostile input gives an [`Error`] that says what was wrong and at which
//! byte offset; it never panics, loops, or allocates.
#![forbid(unsafe_code)]

pub mod build;
mod error;
pub mod ethernet;
pub mod fix;
pub mod ipv4;
pub mod itch50;
pub mod moldudp64;
pub mod opra;
pub mod opra_binary;
pub mod soupbintcp;
pub mod udp;
pub mod xdp;
pub mod xdp_integrated;

pub use error::{Error, Result};

/// Read a big- or little-endian unsigned integer of 1..=8 bytes. `bytes.len()` must be 1..=8.
#[inline]
pub fn read_uint(bytes: &[u8], big_endian: bool) -> u64 {
    debug_assert!(!bytes.is_empty() && bytes.len() <= 8);
    // The widths sequence numbers and counts come in, read whole: a sequencer reads two
    // fields a frame, and the byte loop below took about 30 instructions each.
    match (bytes.len(), big_endian) {
        (8, true) => return u64::from_be_bytes(bytes.try_into().unwrap_or_default()),
        (8, false) => return u64::from_le_bytes(bytes.try_into().unwrap_or_default()),
        (4, true) => return u64::from(u32::from_be_bytes(bytes.try_into().unwrap_or_default())),
        (4, false) => return u64::from(u32::from_le_bytes(bytes.try_into().unwrap_or_default())),
        (2, true) => return u64::from(u16::from_be_bytes(bytes.try_into().unwrap_or_default())),
        (2, false) => return u64::from(u16::from_le_bytes(bytes.try_into().unwrap_or_default())),
        _ => {}
    }
    let mut v = 0u64;
    if big_endian {
        for &b in bytes {
            v = (v << 8) | u64::from(b);
        }
    } else {
        for &b in bytes.iter().rev() {
            v = (v << 8) | u64::from(b);
        }
    }
    v
}

/// Civil date (proleptic Gregorian: year, month, day) of a count of days since 1970-01-01
/// (H. Hinnant's `civil_from_days`): FIX's UTC timestamps, the day ITCH times count from,
/// the dates in catalog file names.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Write `value` into `out` as an unsigned integer of `out.len()` (1..=8) bytes.
#[inline]
pub fn write_uint(out: &mut [u8], value: u64, big_endian: bool) {
    let n = out.len();
    for i in 0..n {
        let byte = (value >> (8 * i)) as u8;
        if big_endian {
            out[n - 1 - i] = byte;
        } else {
            out[i] = byte;
        }
    }
}

/// The Internet checksum (RFC 1071) over `data`, folded to 16 bits, not yet complemented.
pub fn ones_complement_sum(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    acc
}

/// Fold a 32-bit one's-complement accumulator into the final complemented checksum.
pub fn fold_checksum(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_uint_roundtrip() {
        for width in 1..=8usize {
            let max = if width == 8 { u64::MAX } else { (1u64 << (8 * width)) - 1 };
            for &v in &[0u64, 1, 0x1234_5678_9abc_def0 & max, max] {
                for be in [true, false] {
                    let mut buf = [0xa5u8; 8];
                    write_uint(&mut buf[..width], v, be);
                    assert_eq!(read_uint(&buf[..width], be), v, "width {width} be {be}");
                }
            }
        }
        assert_eq!(read_uint(&[1, 2], true), 0x0102);
        assert_eq!(read_uint(&[1, 2], false), 0x0201);
    }

    #[test]
    fn test_uint_read_matches_the_byte_loop() {
        // The whole-width reads against the plain loop, on bytes that differ everywhere.
        let bytes: [u8; 8] = [0x81, 0x02, 0xf3, 0x04, 0x75, 0xa6, 0x07, 0xc8];
        for width in 1..=8usize {
            let b = &bytes[..width];
            let be = b.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            let le = b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            assert_eq!((read_uint(b, true), read_uint(b, false)), (be, le), "width {width}");
        }
    }

    #[test]
    fn test_checksum_rfc1071_example() {
        // RFC 1071 section 3 example: 0001 f203 f4f5 f6f7 sums to 0xddf2 (before complement).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold_checksum(ones_complement_sum(0, &data)), !0xddf2);
    }
}

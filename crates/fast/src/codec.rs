//! FAST transfer encoding primitives: stop-bit integers, presence maps, strings, byte vectors.
//!
//! An integer is a run of 7-bit groups, most significant first; the last byte has its high
//! bit (the stop bit) set. A signed integer's sign is bit 6 of its first byte. A nullable
//! integer reserves 0 for NULL, so non-negative values are sent one higher. An ASCII string
//! ends at the byte with the stop bit; `0x80` alone is the empty string (NULL when nullable),
//! `0x00 0x80` the empty string when nullable.
//!
//! The readers take the buffer and a cursor and never read past the buffer: a value that runs
//! off the end is [`ErrorKind::Truncated`]. Up to 9 bytes (63 bits) accumulate in a 64-bit
//! register with no per-byte overflow check; only a 10-byte value takes the 128-bit path.
//! [`naive`] has the obvious byte-at-a-time versions the fast paths are tested against.

use crate::error::{Error, ErrorKind};

#[inline]
fn truncated(what: &'static str, at: usize) -> Error {
    Error::new(ErrorKind::Truncated(what), at)
}

/// Read the 7-bit groups of one integer. Returns the accumulated bits and the byte count.
/// Values of 10 bytes go through `slow_u128`.
#[inline(always)]
fn read_groups(buf: &[u8], pos: &mut usize) -> Result<(u64, usize), Error> {
    let start = *pos;
    let mut i = start;
    let mut v = 0u64;
    while i < buf.len() && i - start < 9 {
        let b = buf[i];
        i += 1;
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 != 0 {
            *pos = i;
            return Ok((v, i - start));
        }
    }
    if i >= buf.len() {
        return Err(truncated("an integer", start));
    }
    Err(Error::new(ErrorKind::IntegerTooLong, start))
}

/// The 10-byte case: a full 64-bit value (or 2^64 for a nullable u64::MAX).
#[cold]
fn slow_u128(buf: &[u8], pos: &mut usize) -> Result<u128, Error> {
    let start = *pos;
    let mut v = 0u128;
    for n in 0..10 {
        let b = *buf.get(start + n).ok_or_else(|| truncated("an integer", start))?;
        v = (v << 7) | u128::from(b & 0x7f);
        if b & 0x80 != 0 {
            *pos = start + n + 1;
            return Ok(v);
        }
    }
    Err(Error::new(ErrorKind::IntegerTooLong, start))
}

#[cold]
fn slow_i128(buf: &[u8], pos: &mut usize) -> Result<i128, Error> {
    let start = *pos;
    let first = *buf.get(start).ok_or_else(|| truncated("an integer", start))?;
    let mut v: i128 = if first & 0x40 != 0 { -1 } else { 0 };
    for n in 0..10 {
        let b = *buf.get(start + n).ok_or_else(|| truncated("an integer", start))?;
        v = (v << 7) | i128::from(b & 0x7f);
        if b & 0x80 != 0 {
            *pos = start + n + 1;
            return Ok(v);
        }
    }
    Err(Error::new(ErrorKind::IntegerTooLong, start))
}

/// Read a non-nullable unsigned integer (uInt32 and uInt64 both decode through this).
#[inline(always)]
pub fn read_u64(buf: &[u8], pos: &mut usize) -> Result<u64, Error> {
    let start = *pos;
    match read_groups(buf, pos) {
        Ok((v, _)) => Ok(v),
        Err(e) if e.kind == ErrorKind::IntegerTooLong => {
            *pos = start;
            let v = slow_u128(buf, pos)?;
            u64::try_from(v).map_err(|_| Error::new(ErrorKind::IntegerOverflow("uInt64"), start))
        }
        Err(e) => Err(e),
    }
}

/// Read a nullable unsigned integer: `None` for NULL, else the value (sent one higher).
#[inline(always)]
pub fn read_u64_nullable(buf: &[u8], pos: &mut usize) -> Result<Option<u64>, Error> {
    let start = *pos;
    match read_groups(buf, pos) {
        Ok((v, _)) => Ok(v.checked_sub(1)),
        Err(e) if e.kind == ErrorKind::IntegerTooLong => {
            *pos = start;
            let v = slow_u128(buf, pos)?;
            if v == 0 {
                return Ok(None);
            }
            u64::try_from(v - 1).map(Some).map_err(|_| Error::new(ErrorKind::IntegerOverflow("uInt64"), start))
        }
        Err(e) => Err(e),
    }
}

/// Read a non-nullable signed integer.
#[inline(always)]
pub fn read_i64(buf: &[u8], pos: &mut usize) -> Result<i64, Error> {
    let start = *pos;
    match read_groups(buf, pos) {
        Ok((v, n)) => {
            // Sign-extend from bit 7n-1 (bit 6 of the first byte).
            let shift = 64 - 7 * n as u32;
            Ok(((v << shift) as i64) >> shift)
        }
        Err(e) if e.kind == ErrorKind::IntegerTooLong => {
            *pos = start;
            let v = slow_i128(buf, pos)?;
            i64::try_from(v).map_err(|_| Error::new(ErrorKind::IntegerOverflow("int64"), start))
        }
        Err(e) => Err(e),
    }
}

/// Read a nullable signed integer: `None` for NULL; non-negative values are sent one higher.
#[inline(always)]
pub fn read_i64_nullable(buf: &[u8], pos: &mut usize) -> Result<Option<i64>, Error> {
    let start = *pos;
    match read_groups(buf, pos) {
        Ok((v, n)) => {
            let shift = 64 - 7 * n as u32;
            let v = ((v << shift) as i64) >> shift;
            Ok(match v {
                0 => None,
                v if v > 0 => Some(v - 1),
                v => Some(v),
            })
        }
        Err(e) if e.kind == ErrorKind::IntegerTooLong => {
            *pos = start;
            let v = slow_i128(buf, pos)?;
            let v = match v {
                0 => return Ok(None),
                v if v > 0 => v - 1,
                v => v,
            };
            i64::try_from(v).map(Some).map_err(|_| Error::new(ErrorKind::IntegerOverflow("int64"), start))
        }
        Err(e) => Err(e),
    }
}

/// A presence map, left-aligned: the next bit is the top bit. Bits past the end read as 0,
/// as the specification says.
pub type Pmap = u128;

/// Read a presence map of up to 18 bytes (126 bits).
#[inline(always)]
pub fn read_pmap(buf: &[u8], pos: &mut usize) -> Result<Pmap, Error> {
    let start = *pos;
    // The common cases: one byte, two bytes (up to 14 bits).
    if let Some(&b) = buf.get(start) {
        if b & 0x80 != 0 {
            *pos = start + 1;
            return Ok(u128::from(b & 0x7f) << 121);
        }
        if let Some(&c) = buf.get(start + 1) {
            if c & 0x80 != 0 {
                *pos = start + 2;
                return Ok((u128::from(b) << 121) | (u128::from(c & 0x7f) << 114));
            }
        }
    }
    let mut v = 0u128;
    let mut n = 0u32;
    loop {
        let b = *buf.get(start + n as usize).ok_or_else(|| truncated("a presence map", start))?;
        n += 1;
        if n > 18 {
            return Err(Error::new(ErrorKind::PresenceMapTooLong, start));
        }
        v = (v << 7) | u128::from(b & 0x7f);
        if b & 0x80 != 0 {
            *pos = start + n as usize;
            return Ok(v << (128 - 7 * n));
        }
    }
}

/// Find the end of an ASCII string's stop-bit run. Returns the index one past its last byte.
#[inline(always)]
pub fn ascii_end(buf: &[u8], pos: usize) -> Result<usize, Error> {
    let rest = buf.get(pos..).unwrap_or(&[]);
    match rest.iter().position(|&b| b & 0x80 != 0) {
        Some(i) => Ok(pos + i + 1),
        None => Err(truncated("an ASCII string", pos)),
    }
}

/// Where an ASCII string's characters lie, after its stop-bit and NULL rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsciiRead {
    Null,
    /// The characters are `buf[start..end]` with the stop bit cleared on the last one; `zero`
    /// means the value is the single character `\0` (the overlong form `0x00 0x80`).
    Chars {
        start: usize,
        end: usize,
    },
    Empty,
}

/// Read an ASCII string (nullable or not) and classify it.
#[inline(always)]
pub fn read_ascii(buf: &[u8], pos: &mut usize, nullable: bool) -> Result<AsciiRead, Error> {
    let start = *pos;
    let end = ascii_end(buf, start)?;
    *pos = end;
    let first = buf[start];
    if end == start + 1 && first == 0x80 {
        return Ok(if nullable { AsciiRead::Null } else { AsciiRead::Empty });
    }
    if first == 0 {
        // 0x00 0x80: empty when nullable, "\0" when not; 0x00 0x00 0x80: "\0" when nullable.
        if nullable {
            if end == start + 2 && buf[start + 1] == 0x80 {
                return Ok(AsciiRead::Empty);
            }
            // After the nullable escape, the rest reads as a mandatory string does: 0x00
            // 0x80 there is the one-NUL string, not two NULs.
            if end == start + 3 && buf[start + 1] == 0 && buf[start + 2] == 0x80 {
                return Ok(AsciiRead::Chars { start: start + 1, end: start + 2 });
            }
            return Ok(AsciiRead::Chars { start: start + 1, end });
        }
        if end == start + 2 && buf[start + 1] == 0x80 {
            return Ok(AsciiRead::Chars { start, end: start + 1 });
        }
    }
    Ok(AsciiRead::Chars { start, end })
}

/// Read a byte vector's length (nullable or not) and its bytes. `None` is NULL.
#[inline(always)]
pub fn read_bytes<'a>(buf: &'a [u8], pos: &mut usize, nullable: bool) -> Result<Option<&'a [u8]>, Error> {
    let start = *pos;
    let len = if nullable {
        match read_u64_nullable(buf, pos)? {
            None => return Ok(None),
            Some(n) => n,
        }
    } else {
        read_u64(buf, pos)?
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > buf.len() - *pos {
        return Err(truncated("a byte vector", start));
    }
    let bytes = &buf[*pos..*pos + len];
    *pos += len;
    Ok(Some(bytes))
}

// ---------------------------------------------------------------------------------------
// Writers
// ---------------------------------------------------------------------------------------

/// Write an unsigned integer in the fewest bytes.
#[inline]
pub fn write_u128(out: &mut Vec<u8>, v: u128) {
    let mut groups = [0u8; 19];
    let mut n = 0;
    let mut x = v;
    loop {
        groups[n] = (x & 0x7f) as u8;
        n += 1;
        x >>= 7;
        if x == 0 {
            break;
        }
    }
    for i in (1..n).rev() {
        out.push(groups[i]);
    }
    out.push(groups[0] | 0x80);
}

/// Write a non-nullable unsigned integer.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    if v < 0x80 {
        out.push(v as u8 | 0x80);
    } else {
        write_u128(out, u128::from(v));
    }
}

/// Write a nullable unsigned integer (`None` is NULL).
#[inline]
pub fn write_u64_nullable(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0x80),
        Some(v) => write_u128(out, u128::from(v) + 1),
    }
}

/// Write a signed integer in the fewest bytes whose sign bit agrees.
#[inline]
pub fn write_i128(out: &mut Vec<u8>, v: i128) {
    let mut groups = [0u8; 19];
    let mut n = 0;
    let mut x = v;
    loop {
        groups[n] = (x & 0x7f) as u8;
        n += 1;
        let sign_ok = (x < 0) == (groups[n - 1] & 0x40 != 0);
        x >>= 7;
        if (x == 0 || x == -1) && sign_ok {
            break;
        }
    }
    for i in (1..n).rev() {
        out.push(groups[i]);
    }
    out.push(groups[0] | 0x80);
}

/// Write a non-nullable signed integer.
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    write_i128(out, i128::from(v));
}

/// Write a nullable signed integer (`None` is NULL; non-negative values one higher).
#[inline]
pub fn write_i64_nullable(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => out.push(0x80),
        Some(v) if v >= 0 => write_i128(out, i128::from(v) + 1),
        Some(v) => write_i128(out, i128::from(v)),
    }
}

/// Write an ASCII string (`None` is NULL; only for nullable fields).
pub fn write_ascii(out: &mut Vec<u8>, s: Option<&[u8]>, nullable: bool) {
    match s {
        None => out.push(0x80),
        Some([]) => {
            if nullable {
                out.extend_from_slice(&[0x00, 0x80]);
            } else {
                out.push(0x80);
            }
        }
        Some(s) => {
            if s == [0] {
                if nullable {
                    out.extend_from_slice(&[0x00, 0x00, 0x80]);
                } else {
                    out.extend_from_slice(&[0x00, 0x80]);
                }
                return;
            }
            if nullable && s[0] == 0 {
                out.push(0);
            }
            out.extend_from_slice(s);
            let last = out.len() - 1;
            out[last] |= 0x80;
        }
    }
}

/// Write a byte vector with its length (`None` is NULL; only for nullable fields).
pub fn write_bytes(out: &mut Vec<u8>, b: Option<&[u8]>, nullable: bool) {
    match b {
        None => out.push(0x80),
        Some(b) => {
            if nullable {
                write_u64_nullable(out, Some(b.len() as u64));
            } else {
                write_u64(out, b.len() as u64);
            }
            out.extend_from_slice(b);
        }
    }
}

/// Write a presence map of `nbits` bits (left-aligned in `bits`) in the fewest bytes: trailing
/// zero bits are not sent, but at least one byte is.
pub fn write_pmap(out: &mut Vec<u8>, bits: Pmap, nbits: u32) {
    let mut bytes = nbits.div_ceil(7).max(1) as usize;
    let byte_of = |i: usize| ((bits >> (121 - 7 * i as u32)) & 0x7f) as u8;
    while bytes > 1 && byte_of(bytes - 1) == 0 {
        bytes -= 1;
    }
    for i in 0..bytes {
        let b = byte_of(i);
        out.push(if i + 1 == bytes { b | 0x80 } else { b });
    }
}

/// Byte-at-a-time reference decoders, the oracle for the fast paths' property tests.
pub mod naive {
    /// Decode an unsigned stop-bit integer of any length into a u128 (None: truncated or
    /// longer than 19 bytes).
    pub fn read_unsigned(buf: &[u8]) -> Option<(u128, usize)> {
        let mut v: u128 = 0;
        for (i, &b) in buf.iter().enumerate().take(19) {
            v = v.checked_mul(128)? + u128::from(b & 0x7f);
            if b & 0x80 != 0 {
                return Some((v, i + 1));
            }
        }
        None
    }

    /// Decode a signed stop-bit integer (sign from bit 6 of the first byte).
    pub fn read_signed(buf: &[u8]) -> Option<(i128, usize)> {
        let (u, n) = read_unsigned(buf)?;
        let bits = 7 * n as u32;
        if bits >= 128 {
            return None;
        }
        let v = if buf[0] & 0x40 != 0 { u as i128 - (1i128 << bits) } else { u as i128 };
        Some((v, n))
    }

    /// Decode a presence map into a list of bits.
    pub fn read_pmap(buf: &[u8]) -> Option<(Vec<bool>, usize)> {
        let mut bits = Vec::new();
        for (i, &b) in buf.iter().enumerate() {
            for k in (0..7).rev() {
                bits.push(b & (1 << k) != 0);
            }
            if b & 0x80 != 0 {
                return Some((bits, i + 1));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_parse_spec_examples() {
        // Examples from the FAST 1.1 specification, appendix 3.
        let mut p = 0;
        assert_eq!(read_u64_nullable(&[0x80], &mut p).unwrap(), None);
        p = 0;
        assert_eq!(read_u64_nullable(&[0x81], &mut p).unwrap(), Some(0));
        p = 0;
        assert_eq!(read_u64(&[0x39, 0x45, 0xa3], &mut p).unwrap(), 942755);
        p = 0;
        assert_eq!(read_i64(&[0x7f, 0x3f, 0xff], &mut p).unwrap(), -8193);
        p = 0;
        assert_eq!(read_i64(&[0x00, 0x40, 0x81], &mut p).unwrap(), 8193);
        p = 0;
        assert_eq!(read_i64_nullable(&[0x39, 0x45, 0xa4], &mut p).unwrap(), Some(942755));
        p = 0;
        assert_eq!(read_i64_nullable(&[0x46, 0x3a, 0xdd], &mut p).unwrap(), Some(-942755));
        p = 0;
        assert_eq!(read_i64(&[0x7f, 0x7e, 0xfd], &mut p).unwrap(), -131);
        p = 0;
        assert_eq!(read_i64(&[0xff], &mut p).unwrap(), -1);
        p = 0;
        assert_eq!(read_u64(&[0x7f, 0x7f], &mut p).unwrap_err().kind, ErrorKind::Truncated("an integer"));
    }

    #[test]
    fn test_emit_spec_examples() {
        let mut out = Vec::new();
        write_i64(&mut out, -8193);
        assert_eq!(out, [0x7f, 0x3f, 0xff]);
        out.clear();
        write_i64(&mut out, 8193);
        assert_eq!(out, [0x00, 0x40, 0x81]);
        out.clear();
        write_i64_nullable(&mut out, Some(942755));
        assert_eq!(out, [0x39, 0x45, 0xa4]);
        out.clear();
        write_u64(&mut out, 942755);
        assert_eq!(out, [0x39, 0x45, 0xa3]);
        out.clear();
        write_ascii(&mut out, Some(b"ABC"), false);
        assert_eq!(out, [0x41, 0x42, 0xc3]);
        out.clear();
        write_pmap(&mut out, 0b1010000u128 << 121, 7);
        assert_eq!(out, [0xd0]);
    }

    #[test]
    fn test_extremes() {
        for v in [0u64, 1, 127, 128, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, v);
            let mut p = 0;
            assert_eq!(read_u64(&out, &mut p).unwrap(), v);
            assert_eq!(p, out.len());
            out.clear();
            write_u64_nullable(&mut out, Some(v));
            p = 0;
            assert_eq!(read_u64_nullable(&out, &mut p).unwrap(), Some(v));
        }
        for v in [0i64, -1, 63, 64, -64, -65, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            write_i64(&mut out, v);
            let mut p = 0;
            assert_eq!(read_i64(&out, &mut p).unwrap(), v, "{out:x?}");
            out.clear();
            write_i64_nullable(&mut out, Some(v));
            p = 0;
            assert_eq!(read_i64_nullable(&out, &mut p).unwrap(), Some(v));
        }
    }

    #[test]
    fn test_strings() {
        let mut p = 0;
        assert_eq!(read_ascii(&[0x80], &mut p, true).unwrap(), AsciiRead::Null);
        p = 0;
        assert_eq!(read_ascii(&[0x80], &mut p, false).unwrap(), AsciiRead::Empty);
        p = 0;
        assert_eq!(read_ascii(&[0x00, 0x80], &mut p, true).unwrap(), AsciiRead::Empty);
        p = 0;
        assert_eq!(read_ascii(&[0x00, 0x80], &mut p, false).unwrap(), AsciiRead::Chars { start: 0, end: 1 });
        p = 0;
        assert_eq!(read_ascii(&[0x41, 0xc2], &mut p, true).unwrap(), AsciiRead::Chars { start: 0, end: 2 });
        p = 0;
        assert!(read_ascii(&[0x41, 0x42], &mut p, true).is_err());
        p = 0;
        assert!(read_bytes(&[0x85, 1, 2], &mut p, false).is_err());
    }

    /// What `write_ascii` writes, `read_ascii` reads back, nullable or not: the one-NUL
    /// string included (0x00 0x00 0x80 when nullable, which once read as two NULs).
    #[test]
    fn test_ascii_round_trip() {
        let values: [Option<&[u8]>; 7] =
            [None, Some(b""), Some(b"\0"), Some(b"A"), Some(b"\0A"), Some(b"AB"), Some(b"\0AB")];
        for nullable in [true, false] {
            for v in values {
                if v.is_none() && !nullable {
                    continue;
                }
                let mut out = Vec::new();
                write_ascii(&mut out, v, nullable);
                let mut p = 0;
                let got = match read_ascii(&out, &mut p, nullable).unwrap() {
                    AsciiRead::Null => None,
                    AsciiRead::Empty => Some(Vec::new()),
                    AsciiRead::Chars { start, end } => {
                        let mut c = out[start..end].to_vec();
                        if let Some(last) = c.last_mut() {
                            *last &= 0x7f;
                        }
                        Some(c)
                    }
                };
                assert_eq!(p, out.len(), "{v:?} nullable {nullable}: {out:02x?}");
                assert_eq!(got.as_deref(), v, "{v:?} nullable {nullable}: {out:02x?}");
            }
        }
    }
}

//! FIX tag=value (FIX 4.2 and 4.4): a zero-copy reader, a writer, and pre-built order
//! templates patched in place.
//!
//! # The message
//! `8=BeginString|9=BodyLength|35=MsgType|...|10=CheckSum|` with `|` the SOH byte (0x01).
//! BodyLength counts the bytes from the one after the `9=` field's SOH up to and including
//! the SOH before `10=`; CheckSum is the sum of every byte before `10=`, modulo 256, as three
//! digits.
//!
//! # Reading
//! [`Message::new_checked`] validates the framing once (BeginString first, BodyLength
//! second, MsgType third, the trailer where BodyLength says, the CheckSum). After that
//! [`Message::fields`] walks the body without allocating, and [`FieldIndex`] keeps the
//! fields of one message in a reused vector, for lookups by tag and repeating groups.
//! [`frame_len`] finds where a message ends in a TCP byte stream. Data fields whose length
//! is given by the field before them (RawData 96 after RawDataLength 95, and the other
//! length/data pairs of the specification) may hold SOH bytes and are read by length.
//!
//! Errors say what was wrong and at which byte, relative to the start of the buffer
//! handed in. No input makes the reader panic, loop, or allocate (except the reused
//! vector of a [`FieldIndex`], which grows to the largest message seen).
//!
//! # Writing
//! [`Writer`] builds a message field by field and fills in BodyLength and CheckSum.
//! [`OrderTemplate`] is a NewOrderSingle serialized once, whose variable fields (MsgSeqNum,
//! SendingTime, ClOrdID, Side, OrderQty, Price, and Symbol when its length is unchanged) are
//! fixed-width slots patched in place, with the CheckSum updated from the bytes that
//! changed: the order is ready before the decision to send it is made. Fixed width uses
//! leading zeros, which the FIX 4.2 and 4.4 specifications allow in int, Qty, Price and
//! SeqNum values.

use crate::{Error, Result};

pub const SOH: u8 = 0x01;

/// Tags this module reads itself.
pub mod tag {
    pub const BEGIN_STRING: u32 = 8;
    pub const BODY_LENGTH: u32 = 9;
    pub const CHECK_SUM: u32 = 10;
    pub const CL_ORD_ID: u32 = 11;
    pub const MSG_SEQ_NUM: u32 = 34;
    pub const MSG_TYPE: u32 = 35;
    pub const ORDER_QTY: u32 = 38;
    pub const ORD_TYPE: u32 = 40;
    pub const PRICE: u32 = 44;
    pub const SENDER_COMP_ID: u32 = 49;
    pub const SENDING_TIME: u32 = 52;
    pub const SIDE: u32 = 54;
    pub const SYMBOL: u32 = 55;
    pub const TARGET_COMP_ID: u32 = 56;
    pub const TRANSACT_TIME: u32 = 60;
    pub const NO_MD_ENTRIES: u32 = 268;
    pub const MD_ENTRY_TYPE: u32 = 269;
    pub const MD_ENTRY_PX: u32 = 270;
    pub const MD_UPDATE_ACTION: u32 = 279;
}

/// Length field -> the data field it gives the length of (FIX 4.4 data types).
const DATA_FIELDS: [(u32, u32); 16] = [
    (90, 91),
    (93, 89),
    (95, 96),
    (212, 213),
    (348, 349),
    (350, 351),
    (352, 353),
    (354, 355),
    (356, 357),
    (358, 359),
    (360, 361),
    (362, 363),
    (364, 365),
    (445, 446),
    (618, 619),
    (621, 622),
];

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The index of the first SOH in `b` from `from`, eight bytes at a time (a word with a zero
/// byte after XOR with SOH in every lane; the lowest flagged lane is exact). Written here
/// rather than calling `memchr` because FIX values are short: a call per field costs more
/// than the scan.
#[inline]
pub fn find_soh(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        if let Some(k) = first_soh_in(w) {
            return Some(i + k);
        }
        i += 8;
    }
    b.get(i..)?.iter().position(|&c| c == SOH).map(|k| i + k)
}

/// The SOH bytes of `b` from `base` on, as bits: bit `k` is set when `b[base + k]` is SOH
/// (`k < 64`; bytes past the end of `b` are not SOH). Sixteen bytes a compare (`wide`'s
/// safe SSE2 / NEON types: one compare and one mask move each), so that a scanner learns
/// where up to 64 fields end at once instead of one field after another. A block that
/// would pass the end of `b` is read as the last 64 bytes of `b`, shifted: no byte loop
/// unless `b` itself is shorter than 64 bytes.
#[inline]
pub fn soh_bits(b: &[u8], base: usize) -> u64 {
    let n = b.len();
    if let Some(block) = b.get(base..base.wrapping_add(64)) {
        return soh_bits_64(block.try_into().expect("64 bytes"));
    }
    if base >= n {
        return 0;
    }
    if n >= 64 {
        // `n - 64 < base < n`: the block ending at `n`, moved down to start at `base`.
        return soh_bits_64(b[n - 64..].try_into().expect("64 bytes")) >> (base - (n - 64));
    }
    soh_bits_short(&b[base..])
}

#[inline(always)]
fn soh_bits_64(block: &[u8; 64]) -> u64 {
    let mut bits = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        bits |= soh_mask(load16(lane)) << (16 * k);
    }
    bits
}

/// The first sixteen bytes of `b` as one vector.
#[inline(always)]
fn load16(b: &[u8]) -> wide::u8x16 {
    wide::u8x16::from(<[u8; 16]>::try_from(&b[..16]).expect("sixteen bytes"))
}

/// The SOH lanes of `v` as the low sixteen bits (one compare, one mask move).
#[inline(always)]
fn soh_mask(v: wide::u8x16) -> u64 {
    u64::from(v.simd_eq(wide::u8x16::splat(SOH)).to_bitmask() as u16)
}

#[cold]
fn soh_bits_short(b: &[u8]) -> u64 {
    b.iter().enumerate().fold(0, |bits, (k, &c)| bits | (u64::from(c == SOH) << k))
}

/// Words of SOH bits [`soh_bits_and_sum`] fills: messages of up to 512 bytes before their
/// CheckSum field.
pub const SCAN_WORDS: usize = 8;

/// The SOH bytes of `b` as bits, 64 to a word (bit `j` of `bits[k]` is set when
/// `b[64 * k + j]` is SOH; bits past `b`'s end are clear), and the sum of `b`'s bytes
/// modulo 256, its CheckSum: one pass, each sixteen bytes loaded once for both (one
/// compare, one mask move and one add each). `None` when `b` is longer than
/// `64 * SCAN_WORDS` bytes. [`soh_bits`] and [`checksum`] are its oracles.
#[inline]
pub fn soh_bits_and_sum(b: &[u8], bits: &mut [u64; SCAN_WORDS]) -> Option<u8> {
    let n = b.len();
    if n > 64 * SCAN_WORDS {
        return None;
    }
    *bits = [0; SCAN_WORDS];
    if n < 16 {
        bits[0] = soh_bits_short(b);
        return Some(checksum(b));
    }
    let mut acc = wide::u8x16::splat(0);
    let mut quads = b.chunks_exact(64);
    for (w, c) in (&mut quads).enumerate() {
        let (v0, v1, v2, v3) = (load16(c), load16(&c[16..]), load16(&c[32..]), load16(&c[48..]));
        bits[w] = soh_mask(v0) | soh_mask(v1) << 16 | soh_mask(v2) << 32 | soh_mask(v3) << 48;
        acc += v0 + v1 + v2 + v3;
    }
    // Under 64 bytes left: whole blocks of 16, then the last 16 bytes of `b`, of which only
    // the ones not yet counted are kept (their lanes and their bits).
    let mut at = n - quads.remainder().len();
    while at + 16 <= n {
        let v = load16(&b[at..]);
        bits[at / 64] |= soh_mask(v) << (at % 64);
        acc += v;
        at += 16;
    }
    let left = n - at;
    if left > 0 {
        let v = load16(&b[n - 16..]);
        let keep: [u8; 16] = KEEP_LAST[left..left + 16].try_into().expect("sixteen bytes");
        bits[at / 64] |= soh_mask(v) >> (16 - left) << (at % 64);
        acc += v & wide::u8x16::from(keep);
    }
    Some(acc.to_array().iter().map(|&x| u32::from(x)).sum::<u32>() as u8)
}

/// `KEEP_LAST[k..k + 16]` keeps the last `k` lanes of sixteen (0 to 16).
const KEEP_LAST: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut i = 16;
    while i < 32 {
        t[i] = 0xff;
        i += 1;
    }
    t
};

/// The CheckSum field of the message in `buf`, which starts at `body_end` (its three
/// digits and its SOH already checked), against the sum of the bytes before it: one
/// four-byte compare with the digits and SOH the writer writes for that sum.
#[inline]
fn compare_sum(buf: &[u8], sum: u8, body_end: usize) -> Result<()> {
    if buf[body_end + 3..body_end + 7] == CHECKSUM_FIELD[usize::from(sum)] {
        return Ok(());
    }
    Err(Error::Malformed { what: "CheckSum (10): computed", offset: body_end + 3, value: u64::from(sum) })
}

/// Where the first SOH is among the eight bytes of `w` (read little-endian: byte 0 first),
/// if there is one: the word form of [`find_soh`], for a scanner that already holds a
/// field's first eight bytes.
#[inline]
pub fn first_soh_in(w: u64) -> Option<usize> {
    let x = w ^ ONES;
    let t = x.wrapping_sub(ONES) & !x & HIGHS;
    (t != 0).then(|| (t.trailing_zeros() / 8) as usize)
}

/// One field: its tag, its value (without the SOH) and where the field starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    pub tag: u32,
    pub value: &'a [u8],
    /// Offset of the field's first tag digit in the buffer.
    pub offset: usize,
}

impl Field<'_> {
    /// The data field this one announces, when it is a length field (RawDataLength (95)
    /// and the like) with a length: the data field's tag and its length in bytes. Its
    /// value may hold SOH bytes: it is read by that length.
    pub fn announces(&self) -> Option<(u32, usize)> {
        data_field_after(self.tag, self.value)
    }
    /// The value as an unsigned integer (leading zeros allowed).
    pub fn as_uint(&self) -> Result<u64> {
        parse_uint(self.value).ok_or(Error::Malformed { what: "integer value", offset: self.offset, value: 0 })
    }
    /// The value as an exact decimal in units of 1e-9.
    pub fn as_decimal(&self) -> Result<i64> {
        parse_decimal(self.value).ok_or(Error::Malformed { what: "decimal value", offset: self.offset, value: 0 })
    }
}

/// Digits (leading zeros allowed) to an integer; `None` when empty, not all digits, or
/// too large for u64.
#[inline]
pub fn parse_uint(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 20 {
        return None;
    }
    let mut n = 0u64;
    for &c in v {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(n)
}

/// A FIX float (`-`, digits, an optional `.` and up to 9 decimals) to an exact count of
/// 1e-9 units. `123.000`, `123` and `0123.0` are the same value. `None` when malformed,
/// when it has more than 9 decimals that are not zero, or when it does not fit in i64.
#[inline]
pub fn parse_decimal(v: &[u8]) -> Option<i64> {
    let (neg, digits) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    // One pass for the usual value (up to 18 characters after the sign, so that every
    // digit fits one u64): the digits into one integer, the point's place remembered.
    if digits.len() > 18 {
        return parse_decimal_long(neg, digits);
    }
    let mut n = 0u64;
    let mut dot = usize::MAX;
    for (i, &c) in digits.iter().enumerate() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            if c != b'.' || dot != usize::MAX {
                return None;
            }
            dot = i;
            continue;
        }
        n = n * 10 + u64::from(d);
    }
    let decimals = match dot {
        usize::MAX if digits.is_empty() => return None,
        usize::MAX => 0,
        _ if digits.len() == 1 => return None,
        at => digits.len() - at - 1,
    };
    let x = if decimals <= 9 {
        n.checked_mul(POW10_U64[9 - decimals])?
    } else {
        // Decimals past the ninth must be zeros.
        let p = POW10_U64[decimals - 9];
        if !n.is_multiple_of(p) {
            return None;
        }
        n / p
    };
    let x = i64::try_from(x).ok()?;
    Some(if neg { -x } else { x })
}

/// [`parse_decimal`] of `buf[start..end]` for a caller that can read eight bytes from
/// `start` (a field inside a message: the trailer follows the body). A value of up to eight
/// characters with no sign is read as one word: the point found and taken out, the digits
/// checked and combined without a loop over them. Anything else, or fewer than eight bytes
/// from `start`, takes [`parse_decimal`], which is also this path's property-test oracle.
#[inline(always)]
pub fn parse_decimal_in(buf: &[u8], start: usize, end: usize) -> Option<i64> {
    if let Some(v) = value_word(buf, start, end).and_then(|(w, len)| decimal_word(w, len)) {
        return Some(v);
    }
    parse_decimal(buf.get(start..end)?)
}

/// [`parse_decimal_in`] for a reader that acts only on whole prices (no fractional part):
/// `Some(Some(v))` for a whole one, `Some(None)` for a decimal with a fractional part (its
/// value is not worked out), `None` for anything [`parse_decimal`] refuses. A value of up
/// to eight characters with no sign is judged in its word, the rest the long way.
#[inline(always)]
pub fn whole_decimal_in(buf: &[u8], start: usize, end: usize) -> Option<Option<i64>> {
    if let Some(v) = value_word(buf, start, end).and_then(|(w, len)| decimal_word_if_whole(w, len)) {
        return Some(v);
    }
    let v = parse_decimal(buf.get(start..end)?)?;
    Some((v % 1_000_000_000 == 0).then_some(v))
}

/// The eight bytes from `start` as one word and the value's length, when the value
/// (`buf[start..end]`) is 1 to 8 bytes long and eight bytes can be read from `start`.
#[inline(always)]
fn value_word(buf: &[u8], start: usize, end: usize) -> Option<(u64, usize)> {
    let len = end.wrapping_sub(start);
    let w = buf.get(start..start.wrapping_add(8))?;
    (1..=8).contains(&len).then(|| (u64::from_le_bytes(w.try_into().expect("eight bytes")), len))
}

/// The value of the first `len` (1 to 8) bytes of `w` (little-endian: byte 0 first) when
/// they are digits with at most one point among them (not the point alone); `None` for
/// anything else (a sign included), which the caller reads the long way.
#[inline(always)]
fn decimal_word(w: u64, len: usize) -> Option<i64> {
    let (digits, q) = decimal_digits(w, len)?;
    Some(digits_value(digits, q))
}

/// [`decimal_word`] for [`whole_decimal_in`]: `Some(None)` for a value with a nonzero digit
/// after its point, whose value is then not worked out.
#[inline(always)]
fn decimal_word_if_whole(w: u64, len: usize) -> Option<Option<i64>> {
    let (digits, q) = decimal_digits(w, len)?;
    // The decimals are the bytes after the point's (`q + 1..8`): whole when all are '0'.
    let decimals = u64::MAX << 8 << (8 * q);
    if digits & decimals != ZEROS & decimals {
        return Some(None);
    }
    Some(Some(digits_value(digits, q)))
}

const ZEROS: u64 = 0x3030_3030_3030_3030;

/// The checked digits of the first `len` (1 to 8) bytes of `w` (little-endian: byte 0
/// first), right-aligned with '0's before them and the point taken out, and `q`: where
/// the point was (byte 7, after the last digit, when there is none). `None` unless they
/// are digits with at most one point among them (not the point alone).
#[inline(always)]
fn decimal_digits(w: u64, len: usize) -> Option<(u64, usize)> {
    const DOTS: u64 = 0x2e2e_2e2e_2e2e_2e2e;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Right-aligned: the value's last character in byte 7 and '0's before its first, so
    // that the eight bytes are the digits of one number (the point aside). `len` is 1 to
    // 8: the shifts are 0 to 56.
    let sh = 64 - 8 * len as u32;
    let t = (w << sh) | (ZEROS & ((1u64 << sh) - 1));
    // Exact: a high bit in each byte of `t` that is a point (a '0' is not).
    let x = t ^ DOTS;
    let dots = !(((x & LOW7) + LOW7) | x) & HIGHS;
    // `q`: the point's byte, 7 (after the last digit) when there is none. The value is
    // the digits times 10^(9 - decimals) = 10^(q + 2).
    let (digits, q) = if dots == 0 {
        (t, 7)
    } else {
        if dots & (dots - 1) != 0 || len == 1 {
            return None;
        }
        // The bytes up to the point (0..=q) take the ones before them; byte 0 a '0'.
        let upto = ((dots >> 7) << 8).wrapping_sub(1);
        ((t & !upto) | ((t << 8) & upto) | 0x30, (dots.trailing_zeros() / 8) as usize)
    };
    // Every byte a digit: 0x30..=0x39.
    if (digits & 0xf0f0_f0f0_f0f0_f0f0) != ZEROS || ((digits + 0x0606_0606_0606_0606) & 0xf0f0_f0f0_f0f0_f0f0) != ZEROS
    {
        return None;
    }
    Some((digits, q))
}

/// The value in 1e-9 units of [`decimal_digits`]'s eight digits with the point at `q`.
#[inline(always)]
fn digits_value(digits: u64, q: usize) -> i64 {
    // At most 8 digits and 7 decimals: the value times 10^(9 - decimals) fits in i64.
    (eight_digits(digits) * POW10_U64[(q & 7) + 2]) as i64
}

const POW10_U64: [u64; 19] = {
    let mut t = [1u64; 19];
    let mut i = 1;
    while i < 19 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// [`parse_decimal`] for values of any length (leading zeros, many trailing zeros).
#[cold]
fn parse_decimal_long(neg: bool, digits: &[u8]) -> Option<i64> {
    let (int, frac) = match digits.iter().position(|&c| c == b'.') {
        Some(p) => (&digits[..p], &digits[p + 1..]),
        None => (digits, &b""[..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &c in int {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(i64::from(d))?;
    }
    const POW10: [i64; 10] = [1_000_000_000, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];
    let mut f: i64 = 0;
    for (k, &c) in frac.iter().enumerate() {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        if k < 9 {
            f = f * 10 + i64::from(d);
        } else if d != 0 {
            return None;
        }
    }
    let f = f * POW10[frac.len().min(9)];
    let x = n.checked_mul(1_000_000_000)?.checked_add(f)?;
    Some(if neg { -x } else { x })
}

/// Read one `tag=value<SOH>` field starting at `i`, bounded by `end`. `data` is the data
/// field the field before announced, (its tag, its length): a field with that tag is read
/// by length. Returns the field and where the next one starts.
#[inline]
fn read_field(b: &[u8], i: usize, end: usize, data: Option<(u32, usize)>) -> Result<(Field<'_>, usize)> {
    let mut tag = 0u32;
    let mut j = i;
    loop {
        let Some(&c) = b.get(j).filter(|_| j < end) else {
            return Err(Error::Truncated { what: "field tag", offset: i, need: j - i + 1, have: j - i });
        };
        if c == b'=' {
            break;
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 || j - i >= 9 {
            return Err(Error::Malformed { what: "field tag", offset: j, value: u64::from(c) });
        }
        tag = tag * 10 + u32::from(d);
        j += 1;
    }
    // A TagNum is positive and has no leading zeros (so `0270=` is not MDEntryPx, and no
    // field has two spellings).
    if j == i || b[i] == b'0' {
        return Err(Error::Malformed {
            what: "field tag (positive, no leading zeros)",
            offset: i,
            value: u64::from(tag),
        });
    }
    let v = j + 1;
    let soh = match data.filter(|d| d.0 == tag) {
        Some((_, n)) => {
            let s = v.checked_add(n).filter(|&s| s < end).ok_or(Error::Truncated {
                what: "data field",
                offset: v,
                need: n.saturating_add(1),
                have: end.saturating_sub(v),
            })?;
            if b[s] != SOH {
                return Err(Error::Malformed { what: "data field length", offset: s, value: n as u64 });
            }
            s
        }
        None => {
            let s = find_soh(&b[..end], v).ok_or(Error::Truncated {
                what: "field value",
                offset: v,
                need: end.saturating_sub(v) + 1,
                have: end.saturating_sub(v),
            })?;
            if s == v {
                return Err(Error::Malformed { what: "empty value", offset: v, value: u64::from(tag) });
            }
            s
        }
    };
    Ok((Field { tag, value: &b[v..soh], offset: i }, soh + 1))
}

#[inline]
fn data_field_after(tag: u32, value: &[u8]) -> Option<(u32, usize)> {
    // Most fields are not length fields: one range test rejects them before the table.
    if !matches!(tag, 90 | 93 | 95 | 212 | 348..=364 | 445 | 618 | 621) {
        return None;
    }
    DATA_FIELDS.iter().find(|p| p.0 == tag).and_then(|p| parse_uint(value).map(|n| (p.1, n as usize)))
}

/// Where the first message in `buf` ends: `Ok(Some(len))` for a whole message (framing and
/// checksum not yet validated: see [`Message::new_checked`]), `Ok(None)` when more bytes
/// are needed, an error when `buf` does not start like a FIX message.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>> {
    Ok(frame(buf)?.map(|f| f.2))
}

/// The SOH ending BeginString, the SOH ending BodyLength, and the whole length.
#[inline]
fn frame(buf: &[u8]) -> Result<Option<(usize, usize, usize)>> {
    match frame_fix4(buf) {
        Some(f) => Ok(f),
        None => frame_general(buf),
    }
}

/// [`frame`] for any header: the reader that says what is wrong, and the fast path's
/// oracle.
fn frame_general(buf: &[u8]) -> Result<Option<(usize, usize, usize)>> {
    let bad = |what, offset| Err(Error::Malformed { what, offset, value: 0 });
    // `want` must come at `at` (true while the buffer ends before it is whole). Byte by
    // byte: two bytes do not deserve a call to memcmp.
    let expect = |at: usize, want: &[u8; 2]| -> bool {
        buf.get(at).is_none_or(|&b| b == want[0]) && buf.get(at + 1).is_none_or(|&b| b == want[1])
    };
    if !expect(0, b"8=") {
        return bad("BeginString (8) first", 0);
    }
    let Some(s1) = find_soh(buf, 2) else { return Ok(None) };
    if s1 == 2 {
        return bad("BeginString (8) value", 2);
    }
    if !expect(s1 + 1, b"9=") {
        return bad("BodyLength (9) second", s1 + 1);
    }
    let digits = s1 + 3;
    let Some(s2) = find_soh(buf, digits) else {
        // BodyLength is at most 8 digits here: a longer run is not a FIX stream.
        return if buf.len() > digits + 8 { bad("BodyLength (9) value", digits) } else { Ok(None) };
    };
    let body_len = match parse_uint(&buf[digits.min(s2)..s2]) {
        Some(n) if n < 1 << 24 => n as usize,
        _ => return bad("BodyLength (9) value", digits),
    };
    let total = s2 + 1 + body_len + 7;
    Ok((buf.len() >= total).then_some((s1, s2, total)))
}

/// [`frame`]'s fast path for the usual header, `8=FIX.4.x<SOH>9=` (one word and three
/// bytes), with BodyLength's digits read up to their SOH in the same pass. `None` for
/// anything else, which the general path reads (and says what is wrong with).
///
/// BodyLength's digits are read one by one: its value is on the path of everything after
/// it, and a loop of a few digits gives it sooner than the word-at-once conversion
/// (three dependent multiplies), which was fewer instructions but a slower datagram.
#[inline]
fn frame_fix4(buf: &[u8]) -> Option<Option<(usize, usize, usize)>> {
    let head = buf.get(..12)?;
    if u64::from_le_bytes(head[..8].try_into().expect("eight bytes")) != u64::from_le_bytes(*b"8=FIX.4.")
        || !head[8].is_ascii_digit()
        || head[9..12] != [SOH, b'9', b'=']
    {
        return None;
    }
    let mut body_len = 0usize;
    for (k, &c) in buf.iter().enumerate().skip(12).take(8) {
        if c == SOH {
            if k == 12 || body_len >= 1 << 24 {
                return None;
            }
            let total = k + 1 + body_len + 7;
            return Some((buf.len() >= total).then_some((9, k, total)));
        }
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        body_len = body_len * 10 + usize::from(d);
    }
    None
}

/// The value of eight ASCII digits in `t` (byte 0 the most significant): pairs, then
/// fours, then the eight.
#[inline(always)]
fn eight_digits(t: u64) -> u64 {
    let d = t - ZEROS;
    let d = (d * 10 + (d >> 8)) & 0x00ff_00ff_00ff_00ff;
    let d = (d * 100 + (d >> 16)) & 0x0000_ffff_0000_ffff;
    (d * 10_000 + (d >> 32)) & 0xffff_ffff
}

/// Is `w` (eight bytes: the body's last byte and the trailer) `<SOH>10=ddd<SOH>` with three
/// digits? What [`Message::new_checked`] checks of the trailer, in one word.
#[inline(always)]
fn trailer_word_ok(w: &[u8]) -> bool {
    let Ok(w) = <[u8; 8]>::try_from(w) else { return false };
    let w = u64::from_le_bytes(w);
    const SHAPE: u64 = 0xff00_0000_ffff_ffff;
    let digits = (w >> 32) & 0x00ff_ffff;
    w & SHAPE == u64::from_le_bytes([SOH, b'1', b'0', b'=', 0, 0, 0, SOH])
        && digits & 0x00f0_f0f0 == 0x0030_3030
        && (digits + 0x0006_0606) & 0x00f0_f0f0 == 0x0030_3030
}

/// A validated FIX message: a view over its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    buf: &'a [u8],
    begin_string: &'a [u8],
    msg_type: &'a [u8],
    /// Where the body starts (the MsgType field) and ends (the `10=` field).
    body: (usize, usize),
}

impl<'a> Message<'a> {
    /// Validate the message at the start of `buf` (which may hold more after it): the
    /// header order, BodyLength, the trailer and the CheckSum.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self> {
        Self::validate::<true>(buf)
    }

    /// Every check of [`Message::new_checked`] but the CheckSum's value (its three digits
    /// are checked): for a reader that sums the bytes in a pass of its own
    /// ([`soh_bits_and_sum`]) and then hands the sum to [`Message::check_sum`] before it
    /// acts on anything in the message.
    pub fn new_unsummed(buf: &'a [u8]) -> Result<Self> {
        Self::validate::<false>(buf)
    }

    /// The CheckSum field against `sum`, the sum of the bytes before it modulo 256: the
    /// error [`Message::new_checked`] gives when they differ.
    #[inline]
    pub fn check_sum(&self, sum: u8) -> Result<()> {
        compare_sum(self.buf, sum, self.body.1)
    }

    #[inline(always)]
    fn validate<const SUM: bool>(buf: &'a [u8]) -> Result<Self> {
        let (s1, s2, len) = frame(buf)?.ok_or_else(|| {
            let have = buf.len();
            Error::Truncated { what: "message", offset: 0, need: have + 1, have }
        })?;
        let body_start = s2 + 1;
        let body_end = len - 7;
        // The usual trailer in one word: the body's last SOH, `10=`, three digits and the
        // SOH. Anything else is checked byte by byte below, which says what is wrong.
        if body_end < body_start || !trailer_word_ok(&buf[body_end - 1..len]) {
            Self::check_trailer(buf, body_start, body_end, len)?;
        }
        if SUM {
            compare_sum(buf, checksum(&buf[..body_end]), body_end)?;
        }
        // MsgType: `35=` then its value; anything else goes through the general reader,
        // which says what is wrong.
        let msg_type = match buf.get(body_start..body_start + 3) {
            // A one-byte MsgType (most of them) is known by where its SOH is.
            Some(b"35=") if body_start + 4 < body_end && buf[body_start + 3] != SOH && buf[body_start + 4] == SOH => {
                &buf[body_start + 3..body_start + 4]
            }
            Some(b"35=") => match find_soh(&buf[..body_end], body_start + 3) {
                Some(soh) if soh > body_start + 3 => &buf[body_start + 3..soh],
                _ => read_field(buf, body_start, body_end, None)?.0.value,
            },
            _ => {
                let (first, _) = read_field(buf, body_start, body_end, None)?;
                if first.tag != tag::MSG_TYPE {
                    return Err(Error::Malformed {
                        what: "MsgType (35) third",
                        offset: body_start,
                        value: u64::from(first.tag),
                    });
                }
                first.value
            }
        };
        Ok(Message { buf: &buf[..len], begin_string: &buf[2..s1], msg_type, body: (body_start, body_end) })
    }

    /// The trailer's checks one by one, with the error of the first that fails.
    #[cold]
    fn check_trailer(buf: &[u8], body_start: usize, body_end: usize, len: usize) -> Result<()> {
        if body_end < body_start || buf[body_end - 1] != SOH {
            return Err(Error::Malformed {
                what: "BodyLength (9): no SOH before CheckSum",
                offset: body_end,
                value: 0,
            });
        }
        let trailer = &buf[body_end..len];
        if trailer[0] != b'1' || trailer[1] != b'0' || trailer[2] != b'=' || trailer[6] != SOH {
            return Err(Error::Malformed { what: "CheckSum (10) where BodyLength ends", offset: body_end, value: 0 });
        }
        // Three digits, always.
        let (d0, d1, d2) =
            (trailer[3].wrapping_sub(b'0'), trailer[4].wrapping_sub(b'0'), trailer[5].wrapping_sub(b'0'));
        if d0 > 9 || d1 > 9 || d2 > 9 {
            return Err(Error::Malformed { what: "CheckSum (10) value", offset: body_end + 3, value: 0 });
        }
        Ok(())
    }

    /// The message's bytes, trailer included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// `FIX.4.2`, `FIX.4.4`...
    pub fn begin_string(&self) -> &'a [u8] {
        self.begin_string
    }
    pub fn msg_type(&self) -> &'a [u8] {
        self.msg_type
    }
    /// Where the body starts (the MsgType field's first byte) and ends (the `10=` of the
    /// trailer), as offsets into [`Message::as_bytes`].
    pub fn body(&self) -> (usize, usize) {
        self.body
    }
    /// Where the field after MsgType starts (the body's end when there is none).
    pub fn after_msg_type(&self) -> usize {
        // MsgType's value lies inside `buf` and its SOH follows it (checked by `new_checked`).
        let value_at = self.msg_type.as_ptr() as usize - self.buf.as_ptr() as usize;
        (value_at + self.msg_type.len() + 1).min(self.body.1)
    }
    /// The body's fields, MsgType first, CheckSum not included.
    pub fn fields(&self) -> Fields<'a> {
        Fields { buf: self.buf, at: self.body.0, end: self.body.1, data: None }
    }
}

/// The fields of a message body, in order.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
    end: usize,
    data: Option<(u32, usize)>,
}

impl<'a> Fields<'a> {
    /// The fields of `buf` from `at` (a field's first byte) up to `end` (exclusive): for a
    /// caller that scanned part of a validated message itself.
    pub fn starting_at(buf: &'a [u8], at: usize, end: usize) -> Self {
        Fields { buf, at, end: end.min(buf.len()), data: None }
    }
    /// Where the next field starts.
    pub fn position(&self) -> usize {
        self.at
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.end {
            return None;
        }
        match read_field(self.buf, self.at, self.end, self.data.take()) {
            Ok((f, next)) => {
                self.at = next;
                self.data = data_field_after(f.tag, f.value);
                Some(Ok(f))
            }
            Err(e) => {
                self.at = self.end;
                Some(Err(e))
            }
        }
    }
}

/// The sum of `bytes` modulo 256 (the CheckSum).
#[inline]
pub fn checksum(bytes: &[u8]) -> u8 {
    // Only the sum modulo 256 matters, so sixteen wrapping byte lanes hold it exactly: the
    // compiler makes the lane loop one vector add per sixteen bytes. The last 1 to 15
    // bytes are one or two words, the last one the top of the message's last word read
    // once and shifted (no byte loop); their bytes are added in pairs into 16-bit lanes
    // (a lane takes at most 3 * 510 here), and the 16-bit lanes are added by one multiply
    // once cut back to bytes (four of them sum to under 1,024: nothing carries between
    // lanes).
    const PAIRS: u64 = 0x00ff_00ff_00ff_00ff;
    #[inline(always)]
    fn pairs(w: u64) -> u64 {
        (w & PAIRS) + ((w >> 8) & PAIRS)
    }
    #[inline(always)]
    fn word(b: &[u8]) -> u64 {
        u64::from_le_bytes(b[..8].try_into().expect("eight bytes"))
    }
    let n = bytes.len();
    if n < 8 {
        return bytes.iter().fold(0u8, |s, &b| s.wrapping_add(b));
    }
    let mut lanes = [0u8; 16];
    let mut blocks = bytes.chunks_exact(16);
    for c in &mut blocks {
        let c: &[u8; 16] = c.try_into().expect("sixteen bytes");
        for i in 0..16 {
            lanes[i] = lanes[i].wrapping_add(c[i]);
        }
    }
    let lanes_sum: u32 = lanes.iter().map(|&l| u32::from(l)).sum();
    let mut acc = 0u64;
    let mut rest = blocks.remainder();
    if rest.len() >= 8 {
        acc += pairs(word(rest));
        rest = &rest[8..];
    }
    if !rest.is_empty() {
        acc += pairs(word(&bytes[n - 8..]) >> ((8 - rest.len()) * 8));
    }
    let sum = ((acc & PAIRS).wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32 + lanes_sum;
    (sum % 256) as u8
}

/// The fields of one message, parsed once into a reused vector: lookups by tag and
/// repeating groups.
#[derive(Debug, Default)]
pub struct FieldIndex<'a> {
    fields: Vec<Field<'a>>,
}

impl<'a> FieldIndex<'a> {
    pub fn new() -> Self {
        FieldIndex { fields: Vec::with_capacity(64) }
    }
    /// Parse `m`'s fields (the previous message's are forgotten).
    pub fn parse(&mut self, m: &Message<'a>) -> Result<()> {
        self.fields.clear();
        for f in m.fields() {
            self.fields.push(f?);
        }
        Ok(())
    }
    pub fn fields(&self) -> &[Field<'a>] {
        &self.fields
    }
    /// The index emptied, for messages in another buffer, keeping its allocation (the
    /// in-place collect of an empty vector reuses it): a receive loop indexes every
    /// datagram without allocating.
    pub fn recycle<'b>(mut self) -> FieldIndex<'b> {
        self.fields.clear();
        FieldIndex { fields: self.fields.into_iter().map(|_| unreachable!("emptied")).collect() }
    }
    /// The first field with `tag`.
    pub fn get(&self, tag: u32) -> Option<&Field<'a>> {
        self.fields.iter().find(|f| f.tag == tag)
    }
    /// The entries of the repeating group counted by `count_tag`: each entry starts at a
    /// field with `delimiter` (the group's first field) and runs to the next one; the last
    /// entry ends at the first field whose tag is not in `members` (all the rest of the
    /// message when `members` is empty). The number of entries must equal the count.
    pub fn group(&self, count_tag: u32, delimiter: u32, members: &[u32]) -> Result<Group<'_, 'a>> {
        let Some(at) = self.fields.iter().position(|f| f.tag == count_tag) else {
            return Ok(Group { fields: &[], delimiter });
        };
        let count_field = self.fields[at];
        let count = count_field.as_uint()?;
        let rest = &self.fields[at + 1..];
        if count == 0 {
            return Ok(Group { fields: &[], delimiter });
        }
        match rest.first() {
            Some(f) if f.tag == delimiter => {}
            other => {
                let (offset, value) = other.map_or((count_field.offset, 0), |f| (f.offset, u64::from(f.tag)));
                return Err(Error::Malformed { what: "group entry: delimiter first", offset, value });
            }
        }
        let (mut seen, mut end) = (0u64, rest.len());
        for (k, f) in rest.iter().enumerate() {
            if f.tag == delimiter {
                if seen == count {
                    end = k;
                    break;
                }
                seen += 1;
            } else if !members.is_empty() && !members.contains(&f.tag) {
                end = k;
                break;
            }
        }
        if seen != count {
            return Err(Error::Malformed {
                what: "group count: entries found",
                offset: count_field.offset,
                value: seen,
            });
        }
        Ok(Group { fields: &rest[..end], delimiter })
    }
}

/// The entries of a repeating group, each a slice of fields.
#[derive(Debug, Clone)]
pub struct Group<'i, 'a> {
    fields: &'i [Field<'a>],
    delimiter: u32,
}

impl<'i, 'a> Iterator for Group<'i, 'a> {
    type Item = &'i [Field<'a>];
    fn next(&mut self) -> Option<Self::Item> {
        if self.fields.is_empty() {
            return None;
        }
        let n = self.fields[1..].iter().position(|f| f.tag == self.delimiter).map_or(self.fields.len(), |p| p + 1);
        let (entry, rest) = self.fields.split_at(n);
        self.fields = rest;
        Some(entry)
    }
}

/// Builds a message field by field; [`Writer::finish`] adds BodyLength and CheckSum.
#[derive(Debug, Clone)]
pub struct Writer {
    begin_string: Vec<u8>,
    body: Vec<u8>,
    out: Vec<u8>,
}

impl Writer {
    /// A message of `msg_type` (its MsgType field comes first).
    pub fn new(begin_string: &str, msg_type: &str) -> Self {
        let mut w = Writer { begin_string: begin_string.as_bytes().to_vec(), body: Vec::new(), out: Vec::new() };
        w.field(tag::MSG_TYPE, msg_type.as_bytes());
        w
    }
    /// Start again with another message type (the buffers are kept).
    pub fn reset(&mut self, msg_type: &str) {
        self.body.clear();
        self.field(tag::MSG_TYPE, msg_type.as_bytes());
    }
    pub fn field(&mut self, tag: u32, value: &[u8]) -> &mut Self {
        push_uint(&mut self.body, u64::from(tag));
        self.body.push(b'=');
        self.body.extend_from_slice(value);
        self.body.push(SOH);
        self
    }
    pub fn field_uint(&mut self, tag: u32, value: u64) -> &mut Self {
        let mut b = [0u8; 20];
        let n = fmt_uint(value, &mut b);
        self.field(tag, &b[20 - n..])
    }
    /// A decimal in 1e-9 units, written with no more decimals than it needs.
    pub fn field_decimal(&mut self, tag: u32, value: i64) -> &mut Self {
        let s = format_decimal(value);
        self.field(tag, s.as_bytes())
    }
    /// The whole message.
    pub fn finish(&mut self) -> &[u8] {
        self.out.clear();
        self.out.extend_from_slice(b"8=");
        self.out.extend_from_slice(&self.begin_string);
        self.out.extend_from_slice(&[SOH, b'9', b'=']);
        push_uint(&mut self.out, self.body.len() as u64);
        self.out.push(SOH);
        self.out.extend_from_slice(&self.body);
        let sum = checksum(&self.out);
        self.out.extend_from_slice(b"10=");
        self.out.extend_from_slice(&[b'0' + sum / 100, b'0' + sum / 10 % 10, b'0' + sum % 10, SOH]);
        &self.out
    }
}

fn fmt_uint(mut v: u64, b: &mut [u8; 20]) -> usize {
    let mut n = 0;
    loop {
        b[19 - n] = b'0' + (v % 10) as u8;
        v /= 10;
        n += 1;
        if v == 0 {
            return n;
        }
    }
}

fn push_uint(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 20];
    let n = fmt_uint(v, &mut b);
    out.extend_from_slice(&b[20 - n..]);
}

/// A 1e-9 decimal as FIX writes it: no trailing zeros after the point, no point for a whole
/// number.
pub fn format_decimal(v: i64) -> String {
    let (sign, a) = if v < 0 { ("-", v.unsigned_abs()) } else { ("", v as u64) };
    let (int, frac) = (a / 1_000_000_000, a % 1_000_000_000);
    if frac == 0 {
        format!("{sign}{int}")
    } else {
        let f = format!("{frac:09}");
        format!("{sign}{int}.{}", f.trim_end_matches('0'))
    }
}

/// Write `v` as exactly `out.len()` digits with leading zeros; false when it does not fit.
#[inline]
fn put_digits(out: &mut [u8], mut v: u64) -> bool {
    // Two digits per division.
    let mut i = out.len();
    while i >= 2 {
        out[i - 2..i].copy_from_slice(&TWO_DIGITS[(v % 100) as usize]);
        v /= 100;
        i -= 2;
    }
    if i == 1 {
        out[0] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    v == 0
}

/// Civil date (proleptic Gregorian) of a count of days since 1970-01-01 (H. Hinnant's
/// algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
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

/// The sum of `bytes` (the CheckSum before its modulo): for sums kept up to date by
/// differences.
fn byte_sum(bytes: &[u8]) -> u32 {
    bytes.iter().map(|&b| u32::from(b)).sum()
}

/// The UTCTimestamp of one millisecond, formatted once and shared by every template that
/// stamps an order in it, with the byte sum of its 21 bytes (a template moves its CheckSum
/// by a difference). The date part is formatted once a day.
#[derive(Debug, Clone, Copy)]
pub struct UtcStamp {
    ms: u64,
    day: u64,
    bytes: [u8; 21],
    sum: u32,
}

impl Default for UtcStamp {
    /// The UNIX epoch (what a new template holds).
    fn default() -> Self {
        let bytes = *b"19700101-00:00:00.000";
        UtcStamp { ms: 0, day: 0, bytes, sum: byte_sum(&bytes) }
    }
}

impl UtcStamp {
    /// Hold the millisecond of `unix_ns` (within the same millisecond nothing changes).
    #[inline]
    pub fn set(&mut self, unix_ns: u64) {
        let ms = unix_ns / 1_000_000;
        if ms != self.ms {
            self.update(unix_ns, ms);
        }
    }
    #[cold]
    #[inline(never)]
    fn update(&mut self, unix_ns: u64, ms: u64) {
        let day = ms / 86_400_000;
        if day != self.day {
            utc_timestamp(unix_ns, &mut self.bytes);
            self.day = day;
        } else {
            time_of_day(unix_ns, &mut self.bytes);
        }
        self.ms = ms;
        self.sum = byte_sum(&self.bytes);
    }
}

/// A UTCTimestamp with milliseconds (`YYYYMMDD-HH:MM:SS.sss`, 21 bytes) from UNIX ns.
pub fn utc_timestamp(unix_ns: u64, out: &mut [u8; 21]) {
    let days = unix_ns / 1_000_000 / 1000 / 86_400;
    let (y, mo, d) = civil(days as i64);
    put_digits(&mut out[0..4], y as u64);
    put_digits(&mut out[4..6], u64::from(mo));
    put_digits(&mut out[6..8], u64::from(d));
    time_of_day(unix_ns, out);
}

/// `-HH:MM:SS.sss` into `out[8..21]` (the date part is left alone).
#[inline]
fn time_of_day(unix_ns: u64, out: &mut [u8; 21]) {
    let ms = unix_ns / 1_000_000;
    let (secs, milli) = (ms / 1000, (ms % 1000) as u32);
    let sod = (secs % 86_400) as u32;
    out[8] = b'-';
    out[9..11].copy_from_slice(&TWO_DIGITS[sod as usize / 3600]);
    out[11] = b':';
    out[12..14].copy_from_slice(&TWO_DIGITS[sod as usize / 60 % 60]);
    out[14] = b':';
    out[15..17].copy_from_slice(&TWO_DIGITS[sod as usize % 60]);
    out[17] = b'.';
    out[18] = b'0' + (milli / 100) as u8;
    out[19..21].copy_from_slice(&TWO_DIGITS[milli as usize % 100]);
}

/// CheckSum values as the field writes them: three digits and the SOH that ends the field.
const CHECKSUM_FIELD: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [b'0' + (i / 100) as u8, b'0' + (i / 10 % 10) as u8, b'0' + (i % 10) as u8, SOH];
        i += 1;
    }
    t
};

const TWO_DIGITS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// A number kept as ASCII digits too, so that the next number is a carry on the last
/// digit rather than a formatting: MsgSeqNum and ClOrdID grow by one per order, shared by
/// every symbol's template.
///
/// The counter also keeps the byte sum of its digits, so that a template moves its
/// CheckSum by a difference instead of summing the bytes it writes.
#[derive(Debug, Clone, Copy)]
pub struct DigitCounter {
    value: u64,
    digits: [u8; 20],
    /// The sum of the bytes of `digits`.
    sum: u32,
}

impl Default for DigitCounter {
    fn default() -> Self {
        DigitCounter { value: 0, digits: [b'0'; 20], sum: 20 * u32::from(b'0') }
    }
}

impl DigitCounter {
    /// Hold `v`.
    #[inline]
    pub fn set(&mut self, v: u64) {
        if v == self.value {
            return;
        }
        if self.value.checked_add(1) == Some(v) {
            // A carry: each 9 that rolls over takes 9 from the sum, the digit that stops
            // it adds 1.
            for d in self.digits.iter_mut().rev() {
                if *d == b'9' {
                    *d = b'0';
                    self.sum -= 9;
                } else {
                    *d += 1;
                    self.sum += 1;
                    break;
                }
            }
        } else {
            put_digits(&mut self.digits, v);
            self.sum = byte_sum(&self.digits);
        }
        self.value = v;
    }
    pub fn value(&self) -> u64 {
        self.value
    }
    /// The last `n` digits (leading zeros included).
    #[inline]
    pub fn tail(&self, n: usize) -> &[u8] {
        &self.digits[20 - n.min(20)..]
    }
    /// The byte sum of [`DigitCounter::tail`]`(n)`, when the value has at most `n` digits
    /// (the digits before the tail are then all `0`).
    #[inline]
    fn tail_sum(&self, n: usize) -> u32 {
        self.sum - (20 - n.min(20)) as u32 * u32::from(b'0')
    }
}

/// Copy `src` into `dst` (the same length). Lengths 8 to 16, the counters' usual widths,
/// take two fixed eight-byte moves that may overlap, where a copy of a length known only
/// at run time would call memcpy.
#[inline]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = dst.len();
    if (8..=16).contains(&n) && src.len() == n {
        let (head, tail): ([u8; 8], [u8; 8]) =
            (src[..8].try_into().expect("eight bytes"), src[n - 8..].try_into().expect("eight bytes"));
        dst[..8].copy_from_slice(&head);
        dst[n - 8..].copy_from_slice(&tail);
    } else {
        dst.copy_from_slice(src);
    }
}

/// What a template refuses to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateError {
    /// The value needs more digits than the field's fixed width.
    TooWide(&'static str),
    /// A price with more decimals than the template writes, or negative.
    Price(i64),
    /// A symbol of another length than the template's.
    SymbolLength { want: usize, got: usize },
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::TooWide(what) => write!(f, "{what} does not fit the template's fixed width"),
            TemplateError::Price(p) => {
                write!(f, "price {} is negative or has more decimals than the template writes", format_decimal(*p))
            }
            TemplateError::SymbolLength { want, got } => {
                write!(f, "symbol of {got} bytes for a template built for {want}: build a template per symbol")
            }
        }
    }
}

impl std::error::Error for TemplateError {}

/// How a NewOrderSingle template is laid out.
#[derive(Debug, Clone)]
pub struct OrderSpec {
    pub begin_string: String,
    pub sender: String,
    pub target: String,
    pub symbol: String,
    /// `1` buy, `2` sell.
    pub side: u8,
    /// `1` market, `2` limit (a Price field is written for limit orders only).
    pub ord_type: u8,
    /// Extra constant fields, written after OrdType (Account, TimeInForce, ...).
    pub extra: Vec<(u32, String)>,
    pub seq_digits: usize,
    pub cl_ord_id_digits: usize,
    pub qty_digits: usize,
    /// Price: whole digits and decimals.
    pub price_digits: (usize, usize),
}

impl OrderSpec {
    pub fn new(begin_string: &str, sender: &str, target: &str, symbol: &str) -> Self {
        OrderSpec {
            begin_string: begin_string.into(),
            sender: sender.into(),
            target: target.into(),
            symbol: symbol.into(),
            side: b'1',
            ord_type: b'1',
            extra: Vec::new(),
            seq_digits: 9,
            cl_ord_id_digits: 12,
            qty_digits: 9,
            price_digits: (7, 4),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    at: usize,
    len: usize,
    /// The number the slot holds (numeric slots; the template starts with zeros).
    last: u64,
    /// The byte sum of the slot's digits (numeric slots).
    digit_sum: u32,
    /// The largest number the slot holds (numeric slots).
    max: u64,
}

/// A NewOrderSingle serialized once, patched in place. [`OrderTemplate::bytes`] gives the
/// message with its CheckSum up to date; only the bytes that changed were summed again.
#[derive(Debug, Clone)]
pub struct OrderTemplate {
    buf: Vec<u8>,
    /// Sum of the bytes before `10=`, modulo 2^32.
    sum: u32,
    check_at: usize,
    seq: Slot,
    time: Slot,
    cl_ord_id: Slot,
    symbol: Slot,
    side: Slot,
    qty: Slot,
    price: Option<Slot>,
    price_decimals: usize,
    transact_time: Slot,
    /// The millisecond of the timestamp written, and the byte sum of its 21 bytes.
    stamp_ms: u64,
    stamp_sum: u32,
    /// The stamp [`OrderTemplate::set_time`] keeps (the date formatted once a day).
    own_stamp: UtcStamp,
}

impl OrderTemplate {
    pub fn new(spec: &OrderSpec) -> Self {
        let mut body: Vec<u8> = Vec::new();
        let mut slots: Vec<(u32, usize, usize)> = Vec::new();
        let mut field = |body: &mut Vec<u8>, tag: u32, value: &[u8], slot: bool| {
            push_uint(body, u64::from(tag));
            body.push(b'=');
            if slot {
                slots.push((tag, body.len(), value.len()));
            }
            body.extend_from_slice(value);
            body.push(SOH);
        };
        let zeros = |n: usize| vec![b'0'; n];
        field(&mut body, tag::MSG_TYPE, b"D", false);
        field(&mut body, tag::SENDER_COMP_ID, spec.sender.as_bytes(), false);
        field(&mut body, tag::TARGET_COMP_ID, spec.target.as_bytes(), false);
        field(&mut body, tag::MSG_SEQ_NUM, &zeros(spec.seq_digits), true);
        // Both stamps start as the epoch, which `UtcStamp::default` holds.
        let epoch = UtcStamp::default();
        field(&mut body, tag::SENDING_TIME, &epoch.bytes, true);
        field(&mut body, tag::CL_ORD_ID, &zeros(spec.cl_ord_id_digits), true);
        field(&mut body, tag::SYMBOL, spec.symbol.as_bytes(), true);
        field(&mut body, tag::SIDE, &[spec.side], true);
        field(&mut body, tag::TRANSACT_TIME, &epoch.bytes, true);
        field(&mut body, tag::ORDER_QTY, &zeros(spec.qty_digits), true);
        field(&mut body, tag::ORD_TYPE, &[spec.ord_type], false);
        if spec.ord_type != b'1' {
            let (w, d) = spec.price_digits;
            let mut p = zeros(w);
            if d > 0 {
                p.push(b'.');
                p.extend(zeros(d));
            }
            field(&mut body, tag::PRICE, &p, true);
        }
        for (t, v) in &spec.extra {
            field(&mut body, *t, v.as_bytes(), false);
        }
        let mut buf = Vec::new();
        buf.extend_from_slice(b"8=");
        buf.extend_from_slice(spec.begin_string.as_bytes());
        buf.extend_from_slice(&[SOH, b'9', b'=']);
        push_uint(&mut buf, body.len() as u64);
        buf.push(SOH);
        let base = buf.len();
        buf.extend_from_slice(&body);
        let check_at = buf.len() + 3;
        buf.extend_from_slice(b"10=000\x01");
        let slot = |tag: u32| {
            slots
                .iter()
                .find(|s| s.0 == tag)
                .map(|s| Slot {
                    at: base + s.1,
                    len: s.2,
                    last: 0,
                    digit_sum: s.2 as u32 * u32::from(b'0'),
                    max: if s.2 < 20 { 10u64.pow(s.2 as u32) - 1 } else { u64::MAX },
                })
                .expect("the template has it")
        };
        let mut t = OrderTemplate {
            sum: byte_sum(&buf[..check_at - 3]),
            check_at,
            seq: slot(tag::MSG_SEQ_NUM),
            time: slot(tag::SENDING_TIME),
            cl_ord_id: slot(tag::CL_ORD_ID),
            symbol: slot(tag::SYMBOL),
            side: slot(tag::SIDE),
            qty: slot(tag::ORDER_QTY),
            price: (spec.ord_type != b'1').then(|| slot(tag::PRICE)),
            price_decimals: spec.price_digits.1,
            transact_time: slot(tag::TRANSACT_TIME),
            stamp_ms: epoch.ms,
            stamp_sum: epoch.sum,
            own_stamp: epoch,
            buf,
        };
        t.write_checksum();
        t
    }

    /// Replace the bytes of `slot` (same length), keeping the sum.
    #[inline]
    fn patch(&mut self, slot: Slot, new: &[u8]) {
        let old = &mut self.buf[slot.at..slot.at + slot.len];
        for (o, &n) in old.iter_mut().zip(new) {
            self.sum = self.sum.wrapping_add(u32::from(n)).wrapping_sub(u32::from(*o));
            *o = n;
        }
    }
    /// Write the number `v` into a numeric slot (the same number costs nothing). Callers
    /// that send many orders keep a [`DigitCounter`] and use the `_from` setters, where the
    /// next number is a carry rather than a formatting.
    #[inline]
    fn set_number(
        buf: &mut [u8],
        sum: &mut u32,
        slot: &mut Slot,
        v: u64,
        what: &'static str,
    ) -> core::result::Result<(), TemplateError> {
        if v == slot.last {
            return Ok(());
        }
        let mut c = DigitCounter::default();
        c.set(v);
        Self::set_from(buf, sum, slot, &c, what)
    }
    /// Do MsgSeqNum `seq` and ClOrdID `cl_ord_id` fit their fields? Exactly what
    /// [`OrderTemplate::set_seq_num_from`] and [`OrderTemplate::set_cl_ord_id_from`]
    /// refuse, for a caller that must know before it commits to the order.
    #[inline]
    pub fn fits(&self, seq: u64, cl_ord_id: u64) -> bool {
        seq <= self.seq.max && cl_ord_id <= self.cl_ord_id.max
    }
    /// MsgSeqNum from a counter (the fast way when one counter feeds many templates).
    #[inline]
    pub fn set_seq_num_from(&mut self, c: &DigitCounter) -> core::result::Result<(), TemplateError> {
        Self::set_from(&mut self.buf, &mut self.sum, &mut self.seq, c, "MsgSeqNum")
    }
    /// ClOrdID from a counter.
    #[inline]
    pub fn set_cl_ord_id_from(&mut self, c: &DigitCounter) -> core::result::Result<(), TemplateError> {
        Self::set_from(&mut self.buf, &mut self.sum, &mut self.cl_ord_id, c, "ClOrdID")
    }
    #[inline]
    fn set_from(
        buf: &mut [u8],
        sum: &mut u32,
        slot: &mut Slot,
        c: &DigitCounter,
        what: &'static str,
    ) -> core::result::Result<(), TemplateError> {
        let v = c.value();
        if v == slot.last {
            return Ok(());
        }
        if v > slot.max {
            return Err(TemplateError::TooWide(what));
        }
        // The CheckSum moves by the difference of the two digit sums: no byte loop.
        let new_sum = c.tail_sum(slot.len);
        *sum = sum.wrapping_add(new_sum).wrapping_sub(slot.digit_sum);
        slot.digit_sum = new_sum;
        copy_short(&mut buf[slot.at..slot.at + slot.len], c.tail(slot.len));
        slot.last = v;
        Ok(())
    }
    pub fn set_seq_num(&mut self, n: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.seq, n, "MsgSeqNum")
    }
    pub fn set_cl_ord_id(&mut self, n: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.cl_ord_id, n, "ClOrdID")
    }
    pub fn set_qty(&mut self, q: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.qty, q, "OrderQty")
    }
    /// `b'1'` buy, `b'2'` sell.
    pub fn set_side(&mut self, side: u8) {
        self.patch(self.side, &[side]);
    }
    /// SendingTime and TransactTime, from UNIX ns (millisecond resolution). A caller that
    /// stamps many orders keeps one [`UtcStamp`] and uses [`OrderTemplate::set_time_from`].
    pub fn set_time(&mut self, unix_ns: u64) {
        let mut stamp = self.own_stamp;
        stamp.set(unix_ns);
        self.own_stamp = stamp;
        self.set_time_from(&stamp);
    }
    /// SendingTime and TransactTime from a shared stamp: two fixed 21-byte copies and the
    /// CheckSum moved by the difference of the sums (nothing when the millisecond is the
    /// one the template holds).
    #[inline]
    pub fn set_time_from(&mut self, stamp: &UtcStamp) {
        if stamp.ms == self.stamp_ms {
            return;
        }
        self.stamp_ms = stamp.ms;
        // Both fields hold the same bytes: the difference counts twice.
        self.sum = self.sum.wrapping_add(stamp.sum.wrapping_sub(self.stamp_sum).wrapping_mul(2));
        self.stamp_sum = stamp.sum;
        self.buf[self.time.at..][..21].copy_from_slice(&stamp.bytes);
        self.buf[self.transact_time.at..][..21].copy_from_slice(&stamp.bytes);
    }
    /// The price in 1e-9 units (limit orders).
    pub fn set_price(&mut self, p: i64) -> core::result::Result<(), TemplateError> {
        let Some(mut slot) = self.price else { return Ok(()) };
        if p as u64 == slot.last {
            return Ok(());
        }
        let d = self.price_decimals;
        let unit = 10u64.pow(9 - d as u32);
        if p < 0 || !(p as u64).is_multiple_of(unit) {
            return Err(TemplateError::Price(p));
        }
        let v = p as u64 / unit;
        let whole_len = slot.len - if d > 0 { d + 1 } else { 0 };
        let mut b = [0u8; 32];
        if slot.len > 32 || !put_digits(&mut b[..whole_len], v / 10u64.pow(d as u32)) {
            return Err(TemplateError::TooWide("Price"));
        }
        if d > 0 {
            b[whole_len] = b'.';
            put_digits(&mut b[whole_len + 1..slot.len], v % 10u64.pow(d as u32));
        }
        self.patch(slot, &b[..slot.len]);
        slot.last = p as u64;
        self.price = Some(slot);
        Ok(())
    }
    /// A symbol of the same length as the template's (build a template per symbol).
    pub fn set_symbol(&mut self, symbol: &[u8]) -> core::result::Result<(), TemplateError> {
        if symbol.len() != self.symbol.len {
            return Err(TemplateError::SymbolLength { want: self.symbol.len, got: symbol.len() });
        }
        self.patch(self.symbol, symbol);
        Ok(())
    }
    fn write_checksum(&mut self) {
        // The three digits and the SOH after them as one four-byte store from a table:
        // no division by 10 per order.
        self.buf[self.check_at..self.check_at + 4].copy_from_slice(&CHECKSUM_FIELD[(self.sum % 256) as usize]);
    }
    /// The message, ready to send.
    #[inline]
    pub fn bytes(&mut self) -> &[u8] {
        self.write_checksum();
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter's digits and digit sum follow it through carries, jumps and the wrap
    /// from u64::MAX to 0 (which is a jump, not an increment).
    #[test]
    fn digit_counter_digits_and_sum() {
        let mut c = DigitCounter::default();
        for v in [1, 2, 9, 10, 99, 100, 101, 5, 999_999, 1_000_000, u64::MAX, 0, 1] {
            c.set(v);
            assert_eq!(c.tail(20), format!("{v:020}").as_bytes(), "{v}");
            assert_eq!(c.tail_sum(20), format!("{v:020}").bytes().map(u32::from).sum::<u32>(), "{v}");
        }
    }

    /// The framing fast path agrees with the general reader wherever it answers: whole
    /// messages, messages cut short, one byte changed, other BeginStrings, long bodies.
    #[test]
    fn frame_fast_path_agrees_with_the_general_reader() {
        use proptest::prelude::*;
        let msg = (
            prop_oneof![Just("FIX.4.4"), Just("FIX.4.2"), Just("FIXT.1.1"), Just("FIX.4.x")],
            proptest::collection::vec(("[A-Za-z0-9]{1,30}", 11u32..80), 0..40),
        );
        proptest::proptest!(|(m in msg, cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>(), how in 0u8..3)| {
            let mut w = Writer::new(m.0, "X");
            for (v, t) in &m.1 {
                w.field(*t, v.as_bytes());
            }
            let mut b = w.finish().to_vec();
            match how {
                0 => {}
                1 => b.truncate(cut.index(b.len() + 1)),
                _ => {
                    let at = flip.0.index(b.len().min(24));
                    b[at] = flip.1;
                }
            }
            if let Some(fast) = frame_fix4(&b) {
                prop_assert_eq!(Ok(fast), frame_general(&b), "{:?}", String::from_utf8_lossy(&b));
            }
        });
    }

    /// The one-word trailer check says yes exactly when each of the byte checks does, on
    /// words made of the bytes that matter and their neighbours.
    #[test]
    fn trailer_word_agrees_with_the_byte_checks() {
        use proptest::prelude::*;
        let byte = prop::sample::select(vec![SOH, b'1', b'0', b'=', b'9', b'/', b':', 0x02, 0xb1, 0xff]);
        proptest::proptest!(|(w in proptest::array::uniform8(byte))| {
            let bytes_ok = w[0] == SOH
                && &w[1..4] == b"10="
                && w[7] == SOH
                && w[4..7].iter().all(|b| b.is_ascii_digit());
            prop_assert_eq!(trailer_word_ok(&w), bytes_ok, "{:?}", w);
        });
    }

    /// BodyLength of every width: the fast path answers for 1 to 7 digits, as the general
    /// reader does, and leaves longer ones and non-digits to it.
    #[test]
    fn frame_fast_path_every_body_length_width() {
        for digits in
            ["0", "7", "42", "209", "1234", "99999", "123456", "9999999", "12345678", "123456789", "12a", "-12"]
        {
            let mut b = fix(&format!("8=FIX.4.4|9={digits}|35=0|"));
            b.resize(b.len() + 40, b'x');
            match frame_fix4(&b) {
                Some(fast) => {
                    assert!(digits.len() <= 7 && digits.bytes().all(|c| c.is_ascii_digit()), "{digits}");
                    assert_eq!(Ok(fast), frame_general(&b), "{digits}");
                }
                None => assert!(digits.len() > 7 || !digits.bytes().all(|c| c.is_ascii_digit()), "{digits}"),
            }
        }
    }

    /// `|` for SOH, for readable test messages.
    fn fix(s: &str) -> Vec<u8> {
        s.bytes().map(|b| if b == b'|' { SOH } else { b }).collect()
    }
    fn with_trailer(head_body: &str) -> Vec<u8> {
        // head_body: "8=FIX.4.4|9=?|35=...|" with ? replaced by the body length.
        let (head, body) = head_body.split_once("9=?|").unwrap();
        let mut m = fix(&format!("{head}9={}|{body}", body.len()));
        let sum = checksum(&m);
        m.extend_from_slice(&fix(&format!("10={sum:03}|")));
        m
    }

    const MD: &str = "8=FIX.4.4|9=?|35=X|49=MD|56=TP|34=7|52=20261121-14:30:00.123|268=2|279=0|269=0|55=AAPL|270=190.000|271=100|279=0|269=2|55=MSFT|270=410.25|271=5|";

    #[test]
    fn test_parse() {
        let b = with_trailer(MD);
        assert_eq!(frame_len(&b).unwrap(), Some(b.len()));
        let m = Message::new_checked(&b).unwrap();
        assert_eq!(m.begin_string(), b"FIX.4.4");
        assert_eq!(m.msg_type(), b"X");
        assert_eq!(m.len(), b.len());
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        assert_eq!(ix.get(tag::MSG_SEQ_NUM).unwrap().as_uint().unwrap(), 7);
        let entries: Vec<_> = ix.group(tag::NO_MD_ENTRIES, tag::MD_UPDATE_ACTION, &[]).unwrap().collect();
        assert_eq!(entries.len(), 2);
        let px: Vec<i64> = entries
            .iter()
            .map(|e| e.iter().find(|f| f.tag == tag::MD_ENTRY_PX).unwrap().as_decimal().unwrap())
            .collect();
        assert_eq!(px, vec![190_000_000_000, 410_250_000_000]);
        assert_eq!(entries[1][2].value, b"MSFT");
        assert_eq!(&b[entries[1][2].offset..entries[1][2].offset + 3], b"55=");
    }

    #[test]
    fn test_emit() {
        let mut w = Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, 7).field(52, b"20261121-14:30:00.123");
        w.field_uint(268, 2).field(279, b"0").field(269, b"0").field(55, b"AAPL").field(270, b"190.000");
        w.field_uint(271, 100).field(279, b"0").field(269, b"2").field(55, b"MSFT");
        w.field_decimal(270, 410_250_000_000).field_uint(271, 5);
        assert_eq!(w.finish(), &with_trailer(MD)[..]);
    }

    #[test]
    fn errors_say_what_and_where() {
        let good = with_trailer(MD);
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 2] = b'0' + (bad[n - 2] - b'0' + 1) % 10;
        let e = Message::new_checked(&bad).unwrap_err();
        assert!(matches!(e, Error::Malformed { what: "CheckSum (10) value" | "CheckSum (10): computed", .. }), "{e}");
        assert_eq!(e.offset(), n - 4);
        // A byte inside the body changed: the checksum catches it.
        let mut bad = good.clone();
        bad[30] ^= 0x20;
        assert!(Message::new_checked(&bad).is_err());
        // Truncated: more bytes needed, from the stream framer's point of view.
        assert_eq!(frame_len(&good[..good.len() - 1]).unwrap(), None);
        assert!(matches!(Message::new_checked(&good[..20]).unwrap_err(), Error::Truncated { .. }));
        assert!(matches!(frame_len(b"9=12|").unwrap_err(), Error::Malformed { what: "BeginString (8) first", .. }));
        let e = Message::new_checked(&fix("8=FIX.4.4|35=A|10=000|")).unwrap_err();
        assert_eq!(e, Error::Malformed { what: "BodyLength (9) second", offset: 10, value: 0 });
        // A tag with a leading zero (TagNum has none), and tag 0: said, with where.
        for (body, at) in [("8=FIX.4.4|9=?|35=X|0270=1.5|", 20), ("8=FIX.4.4|9=?|35=X|55=A|0=1|", 25)] {
            let b = with_trailer(body);
            let m = Message::new_checked(&b).unwrap();
            let e = FieldIndex::new().parse(&m).unwrap_err();
            assert!(matches!(e, Error::Malformed { what: "field tag (positive, no leading zeros)", .. }), "{e}");
            assert_eq!(e.offset(), at, "{body}");
        }
        // A wrong group count.
        let b = with_trailer("8=FIX.4.4|9=?|35=X|268=3|279=0|270=1|279=0|270=2|");
        let m = Message::new_checked(&b).unwrap();
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        let e = ix.group(268, 279, &[]).unwrap_err();
        assert_eq!(e, Error::Malformed { what: "group count: entries found", offset: 20, value: 2 });
        // An empty value and a bad tag.
        let b = with_trailer("8=FIX.4.4|9=?|35=X|55=|");
        let m = Message::new_checked(&b).unwrap();
        assert!(matches!(m.fields().nth(1).unwrap().unwrap_err(), Error::Malformed { what: "empty value", .. }));
        let b = with_trailer("8=FIX.4.4|9=?|35=X|5x5=A|");
        let m = Message::new_checked(&b).unwrap();
        assert!(matches!(
            m.fields().nth(1).unwrap().unwrap_err(),
            Error::Malformed { what: "field tag", offset: 21, .. }
        ));
    }

    #[test]
    fn data_fields_may_hold_soh() {
        let b = with_trailer("8=FIX.4.4|9=?|35=A|95=5|96=a|b|c|98=0|");
        let m = Message::new_checked(&b).unwrap();
        let f: Vec<_> = m.fields().map(|f| f.unwrap()).collect();
        assert_eq!(f.len(), 4);
        assert_eq!(f[2].value, &fix("a|b|c")[..]);
        assert_eq!(f[3].tag, 98);
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(parse_decimal(b"123.000"), Some(123_000_000_000));
        assert_eq!(parse_decimal(b"123"), parse_decimal(b"0123.0"));
        assert_eq!(parse_decimal(b"-0.000000001"), Some(-1));
        assert_eq!(parse_decimal(b".5"), Some(500_000_000));
        assert_eq!(parse_decimal(b"1.0000000001"), None);
        assert_eq!(parse_decimal(b"1.0000000000"), Some(1_000_000_000));
        for bad in [&b""[..], b"-", b".", b"1.2.3", b"1e5", b"99999999999"] {
            assert_eq!(parse_decimal(bad), None, "{:?}", std::str::from_utf8(bad));
        }
        assert_eq!(format_decimal(190_000_000_000), "190");
        assert_eq!(format_decimal(-410_250_000_000), "-410.25");
    }

    #[test]
    fn timestamps_are_civil_utc() {
        let mut t = [0u8; 21];
        utc_timestamp(0, &mut t);
        assert_eq!(&t, b"19700101-00:00:00.000");
        // 2026-11-21 14:30:00.123 UTC.
        utc_timestamp(1_795_271_400_123_456_789, &mut t);
        assert_eq!(&t, b"20261121-14:30:00.123");
        utc_timestamp(951_782_400_000_000_000, &mut t); // a leap day
        assert_eq!(&t, b"20000229-00:00:00.000");
    }

    #[test]
    fn template_patches_equal_a_fresh_message() {
        let mut spec = OrderSpec::new("FIX.4.4", "TP", "EXCH", "AAPL");
        spec.ord_type = b'2';
        spec.extra.push((59, "0".into()));
        let mut t = OrderTemplate::new(&spec);
        t.set_seq_num(42).unwrap();
        t.set_cl_ord_id(7).unwrap();
        t.set_side(b'2');
        t.set_qty(100).unwrap();
        t.set_price(190_125_000_000).unwrap();
        t.set_time(1_795_271_400_123_456_789);
        let got = t.bytes().to_vec();
        let mut w = Writer::new("FIX.4.4", "D");
        w.field(49, b"TP").field(56, b"EXCH").field(34, b"000000042").field(52, b"20261121-14:30:00.123");
        w.field(11, b"000000000007").field(55, b"AAPL").field(54, b"2").field(60, b"20261121-14:30:00.123");
        w.field(38, b"000000100").field(40, b"2").field(44, b"0000190.1250").field(59, b"0");
        assert_eq!(got, w.finish());
        assert!(Message::new_checked(&got).is_ok());
        assert_eq!(t.set_price(1), Err(TemplateError::Price(1)));
        assert_eq!(t.set_qty(10_000_000_000), Err(TemplateError::TooWide("OrderQty")));
        assert_eq!(t.set_symbol(b"MSFT"), Ok(()));
        assert_eq!(t.set_symbol(b"GOOGL"), Err(TemplateError::SymbolLength { want: 4, got: 5 }));
        assert!(Message::new_checked(t.bytes()).is_ok());
    }

    #[test]
    fn counters_carry_and_feed_templates() {
        let mut c = DigitCounter::default();
        for v in [1u64, 2, 9, 10, 99, 100, 101, 12_345, 12_346, 999_999_999, 1_000_000_000] {
            c.set(v);
            assert_eq!(c.tail(12), format!("{v:012}").as_bytes());
        }
        let mut t = OrderTemplate::new(&OrderSpec::new("FIX.4.4", "A", "B", "X"));
        c.set(41);
        t.set_seq_num_from(&c).unwrap();
        c.set(42);
        t.set_cl_ord_id_from(&c).unwrap();
        let m = t.bytes().to_vec();
        let mut u = OrderTemplate::new(&OrderSpec::new("FIX.4.4", "A", "B", "X"));
        u.set_seq_num(41).unwrap();
        u.set_cl_ord_id(42).unwrap();
        assert_eq!(m, u.bytes());
        c.set(10_000_000_000);
        assert_eq!(t.set_seq_num_from(&c), Err(TemplateError::TooWide("MsgSeqNum")));
    }

    #[test]
    fn soh_scan_agrees_with_a_plain_search() {
        let mut b = vec![b'a'; 40];
        for at in 0..40 {
            for from in 0..=at {
                b[at] = SOH;
                assert_eq!(find_soh(&b, from), Some(at));
                b[at] = b'a';
            }
        }
        assert_eq!(find_soh(&b, 0), None);
        assert_eq!(find_soh(&b, 100), None);
        // Bytes that differ from SOH in one bit, around a real one.
        let b = [0x00, 0x03, 0x81, 0x41, 0x11, 0x02, 0x01, 0x01, 0x00];
        assert_eq!(find_soh(&b, 0), Some(6));
        assert_eq!(checksum(&b), (b.iter().map(|&x| u32::from(x)).sum::<u32>() % 256) as u8);
    }

    /// The oracle of [`soh_bits`]: byte by byte.
    fn soh_bits_naive(b: &[u8], base: usize) -> u64 {
        (0..64).filter(|&k| b.get(base + k) == Some(&SOH)).fold(0, |bits, k| bits | 1 << k)
    }

    #[test]
    fn soh_bits_agree_with_a_byte_loop() {
        // Every length across the short, shifted-tail and whole-block cases, every base
        // (past the end too), one SOH at every place, and bytes one bit away from SOH.
        for n in 0..200 {
            let mut b: Vec<u8> = (0..n).map(|k| [b'a', 0x00, 0x03, 0x81, 0x41, 0x11][k % 6]).collect();
            for at in (0..n).step_by(7).chain(n.checked_sub(1)) {
                b[at] = SOH;
                for base in 0..n + 2 {
                    assert_eq!(soh_bits(&b, base), soh_bits_naive(&b, base), "n {n} SOH at {at} base {base}");
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn soh_bits_agree_with_a_byte_loop_on_random_bytes(
            b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(SOH), proptest::arbitrary::any::<u8>()], 0..300),
            base in 0usize..320,
        ) {
            proptest::prop_assert_eq!(soh_bits(&b, base), soh_bits_naive(&b, base));
        }

        #[test]
        fn soh_bits_and_sum_agree_with_byte_loops_on_random_bytes(
            b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(SOH), proptest::arbitrary::any::<u8>()], 0..530),
        ) {
            let mut bits = [u64::MAX; SCAN_WORDS];
            let got = soh_bits_and_sum(&b, &mut bits);
            if b.len() > 64 * SCAN_WORDS {
                proptest::prop_assert_eq!(got, None);
            } else {
                proptest::prop_assert_eq!(got, Some(b.iter().fold(0u8, |s, &c| s.wrapping_add(c))));
                for (w, &word) in bits.iter().enumerate() {
                    proptest::prop_assert_eq!(word, soh_bits_naive(&b, 64 * w), "word {}", w);
                }
            }
        }
    }

    /// [`soh_bits_and_sum`] at every length it takes (and one past), with an SOH at every
    /// seventh place and the last, bytes one bit away from SOH, and the sum's every lane.
    #[test]
    fn soh_bits_and_sum_agree_with_byte_loops() {
        for n in 0..=64 * SCAN_WORDS + 1 {
            let mut b: Vec<u8> = (0..n).map(|k| [b'a', 0x00, 0x03, 0x81, 0xff, 0x11, 0x7f][k % 7]).collect();
            for at in (0..n).step_by(7).chain(n.checked_sub(1)) {
                b[at] = SOH;
            }
            let mut bits = [u64::MAX; SCAN_WORDS];
            let got = soh_bits_and_sum(&b, &mut bits);
            if n > 64 * SCAN_WORDS {
                assert_eq!(got, None);
                continue;
            }
            assert_eq!(got, Some(b.iter().fold(0u8, |s, &c| s.wrapping_add(c))), "sum, n {n}");
            assert_eq!(got, Some(checksum(&b)), "checksum, n {n}");
            for (w, &word) in bits.iter().enumerate() {
                assert_eq!(word, soh_bits_naive(&b, 64 * w), "n {n} word {w}");
            }
        }
    }
}

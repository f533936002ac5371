//! FIX numbers read from their digits: unsigned integers and exact decimals (units of 1e-9),
//! a word at a time where the value fits in eight bytes.

use super::*;

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
pub(super) fn value_word(buf: &[u8], start: usize, end: usize) -> Option<(u64, usize)> {
    let len = end.wrapping_sub(start);
    let w = buf.get(start..start.wrapping_add(8))?;
    (1..=8).contains(&len).then(|| (u64::from_le_bytes(w.try_into().expect("eight bytes")), len))
}

/// The value of the first `len` (1 to 8) bytes of `w` (little-endian: byte 0 first) when
/// they are digits with at most one point among them (not the point alone); `None` for
/// anything else (a sign included), which the caller reads the long way.
#[inline(always)]
pub(super) fn decimal_word(w: u64, len: usize) -> Option<i64> {
    let (digits, q) = decimal_digits(w, len)?;
    Some(digits_value(digits, q))
}

/// [`decimal_word`] for [`whole_decimal_in`]: `Some(None)` for a value with a nonzero digit
/// after its point, whose value is then not worked out.
#[inline(always)]
pub(super) fn decimal_word_if_whole(w: u64, len: usize) -> Option<Option<i64>> {
    let (digits, q) = decimal_digits(w, len)?;
    // The decimals are the bytes after the point's (`q + 1..8`): whole when all are '0'.
    let decimals = u64::MAX << 8 << (8 * q);
    if digits & decimals != ZEROS & decimals {
        return Some(None);
    }
    Some(Some(digits_value(digits, q)))
}

pub(super) const ZEROS: u64 = 0x3030_3030_3030_3030;

/// The checked digits of the first `len` (1 to 8) bytes of `w` (little-endian: byte 0
/// first), right-aligned with '0's before them and the point taken out, and `q`: where
/// the point was (byte 7, after the last digit, when there is none). `None` unless they
/// are digits with at most one point among them (not the point alone).
#[inline(always)]
pub(super) fn decimal_digits(w: u64, len: usize) -> Option<(u64, usize)> {
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
pub(super) fn digits_value(digits: u64, q: usize) -> i64 {
    // At most 8 digits and 7 decimals: the value times 10^(9 - decimals) fits in i64.
    (eight_digits(digits) * POW10_U64[(q & 7) + 2]) as i64
}

pub(super) const POW10_U64: [u64; 19] = {
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
pub(super) fn parse_decimal_long(neg: bool, digits: &[u8]) -> Option<i64> {
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

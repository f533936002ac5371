//! Finding SOH bytes: a word at a time, 64 bytes at a time with the byte sum for the checksum.

use super::*;
use crate::{Error, Result};

pub(super) const ONES: u64 = 0x0101_0101_0101_0101;
pub(super) const HIGHS: u64 = 0x8080_8080_8080_8080;

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
pub(super) fn soh_bits_64(block: &[u8; 64]) -> u64 {
    let mut bits = 0u64;
    for (k, lane) in block.chunks_exact(16).enumerate() {
        bits |= soh_mask(load16(lane)) << (16 * k);
    }
    bits
}

/// The first sixteen bytes of `b` as one vector.
#[inline(always)]
pub(super) fn load16(b: &[u8]) -> wide::u8x16 {
    wide::u8x16::from(<[u8; 16]>::try_from(&b[..16]).expect("sixteen bytes"))
}

/// The SOH lanes of `v` as the low sixteen bits (one compare, one mask move).
#[inline(always)]
pub(super) fn soh_mask(v: wide::u8x16) -> u64 {
    u64::from(v.simd_eq(wide::u8x16::splat(SOH)).to_bitmask() as u16)
}

#[cold]
pub(super) fn soh_bits_short(b: &[u8]) -> u64 {
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
pub(super) const KEEP_LAST: [u8; 32] = {
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
pub(super) fn compare_sum(buf: &[u8], sum: u8, body_end: usize) -> Result<()> {
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

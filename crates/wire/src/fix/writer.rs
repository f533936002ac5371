//! Writing messages: the [`Writer`], timestamps, and the digit counters templates patch from.

use super::*;

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

pub(super) fn fmt_uint(mut v: u64, b: &mut [u8; 20]) -> usize {
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

pub(super) fn push_uint(out: &mut Vec<u8>, v: u64) {
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
pub(super) fn put_digits(out: &mut [u8], mut v: u64) -> bool {
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

/// The sum of `bytes` (the CheckSum before its modulo): for sums kept up to date by
/// differences.
pub(super) fn byte_sum(bytes: &[u8]) -> u32 {
    bytes.iter().map(|&b| u32::from(b)).sum()
}

/// The UTCTimestamp of one millisecond, formatted once and shared by every template that
/// stamps an order in it, with the byte sum of its 21 bytes (a template moves its CheckSum
/// by a difference). The date part is formatted once a day.
#[derive(Debug, Clone, Copy)]
pub struct UtcStamp {
    pub(super) ms: u64,
    pub(super) day: u64,
    pub(super) bytes: [u8; 21],
    pub(super) sum: u32,
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
    pub(super) fn update(&mut self, unix_ns: u64, ms: u64) {
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
    let (y, mo, d) = crate::civil_from_days(days as i64);
    put_digits(&mut out[0..4], y as u64);
    put_digits(&mut out[4..6], u64::from(mo));
    put_digits(&mut out[6..8], u64::from(d));
    time_of_day(unix_ns, out);
}

/// `-HH:MM:SS.sss` into `out[8..21]` (the date part is left alone).
#[inline]
pub(super) fn time_of_day(unix_ns: u64, out: &mut [u8; 21]) {
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
pub(super) const CHECKSUM_FIELD: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [b'0' + (i / 100) as u8, b'0' + (i / 10 % 10) as u8, b'0' + (i % 10) as u8, SOH];
        i += 1;
    }
    t
};

pub(super) const TWO_DIGITS: [[u8; 2]; 100] = {
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
    pub(super) value: u64,
    pub(super) digits: [u8; 20],
    /// The sum of the bytes of `digits`.
    pub(super) sum: u32,
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
    pub(super) fn tail_sum(&self, n: usize) -> u32 {
        self.sum - (20 - n.min(20)) as u32 * u32::from(b'0')
    }
}

/// Copy `src` into `dst` (the same length). Lengths 8 to 16, the counters' usual widths,
/// take two fixed eight-byte moves that may overlap, where a copy of a length known only
/// at run time would call memcpy.
#[inline]
pub(super) fn copy_short(dst: &mut [u8], src: &[u8]) {
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

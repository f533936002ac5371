//! Reading messages: framing in a TCP stream, the checked [`Message`], its fields and the
//! [`FieldIndex`] for lookups by tag and repeating groups.

use super::*;
use crate::{Error, Result};

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

/// Read one `tag=value<SOH>` field starting at `i`, bounded by `end`. `data` is the data
/// field the field before announced, (its tag, its length): a field with that tag is read
/// by length. Returns the field and where the next one starts.
#[inline]
pub(super) fn read_field(b: &[u8], i: usize, end: usize, data: Option<(u32, usize)>) -> Result<(Field<'_>, usize)> {
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
pub(super) fn data_field_after(tag: u32, value: &[u8]) -> Option<(u32, usize)> {
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
pub(super) fn frame(buf: &[u8]) -> Result<Option<(usize, usize, usize)>> {
    match frame_fix4(buf) {
        Some(f) => Ok(f),
        None => frame_general(buf),
    }
}

/// [`frame`] for any header: the reader that says what is wrong, and the fast path's
/// oracle.
pub(super) fn frame_general(buf: &[u8]) -> Result<Option<(usize, usize, usize)>> {
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
pub(super) fn frame_fix4(buf: &[u8]) -> Option<Option<(usize, usize, usize)>> {
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
pub(super) fn eight_digits(t: u64) -> u64 {
    let d = t - ZEROS;
    let d = (d * 10 + (d >> 8)) & 0x00ff_00ff_00ff_00ff;
    let d = (d * 100 + (d >> 16)) & 0x0000_ffff_0000_ffff;
    (d * 10_000 + (d >> 32)) & 0xffff_ffff
}

/// Is `w` (eight bytes: the body's last byte and the trailer) `<SOH>10=ddd<SOH>` with three
/// digits? What [`Message::new_checked`] checks of the trailer, in one word.
#[inline(always)]
pub(super) fn trailer_word_ok(w: &[u8]) -> bool {
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

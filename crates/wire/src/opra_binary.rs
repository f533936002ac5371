//! OPRA binary messages (the OPRA Participant Interface, version 6): the messages of a
//! block ([`crate::opra`] reads the block header), each message category's fields as a
//! table, and typed views of the quotes and last sales a feed handler maps to events.
//!
//! Every message starts with the same 12 bytes, big-endian: Participant ID (1), Message
//! Category (1), Message Type (1), Message Indicator (1; the BBO Indicator of a quote),
//! Transaction ID (u32), Participant Reference Number (u32). What follows depends on the
//! category:
//!
//! | category | message | body after the 12 bytes |
//! |---|---|---|
//! | `a` | equity and index last sale | 31 bytes |
//! | `d` | open interest | 18 |
//! | `f` | equity and index end of day summary | 60 |
//! | `k` | long equity and index quote | 31, then the appendages |
//! | `q` | short equity and index quote | 17, then the appendages |
//! | `C` | administrative | Message Data Length (u16), then that much text |
//! | `H` | control | nothing |
//! | `Y` | underlying value | type `' '` (last sale) 15, type `I` (bid and offer) 19 |
//!
//! A quote's BBO Indicator says what follows it: `M`, `N`, `P` a best bid appendage,
//! `C`, `G`, `K` a best offer appendage, `O` both (bid first); 10 bytes each (participant,
//! denominator code, price i32, size u32). A block whose end is odd carries one pad byte.
//!
//! Prices are integers with a denominator code: `A`..`H` mean 1 to 8 decimal places, `I`
//! none. The short quote has none on the wire: its strike has 1 decimal place and its
//! premiums 2 (as if coded `A` and `B`).
//!
//! The layouts follow the public specification as the Open Markets Initiative's dissector
//! for version 6.2 lays it out; the four real captures in `../shared/data/opra/v6.2`
//! (administrative, control, long and short quote) check them. One point no capture
//! settles: that dissector reads the underlying value's Offer Index Value as 8 bytes where
//! its Bid Index Value is 4; this module does the same.
//!
//! Views are total: [`message_len`] and [`Messages`] say where a message would pass its
//! block's end, and nothing here panics on any bytes.

use crate::{read_uint, Error, Result};

/// The common header of every message.
pub const HEADER_LEN: usize = 12;
/// One best bid or best offer appendage.
pub const APPENDAGE_LEN: usize = 10;

mod field {
    use core::ops::Range;
    pub const PARTICIPANT: usize = 0;
    pub const CATEGORY: usize = 1;
    pub const TYPE: usize = 2;
    pub const INDICATOR: usize = 3;
    pub const TRANSACTION_ID: Range<usize> = 4..8;
    pub const PARTICIPANT_REF: Range<usize> = 8..12;
    /// Short quote (`q`).
    pub mod q {
        use core::ops::Range;
        pub const SYMBOL: Range<usize> = 12..16;
        pub const MONTH: usize = 16;
        pub const DAY: usize = 17;
        pub const YEAR: usize = 18;
        pub const STRIKE: Range<usize> = 19..21;
        pub const BID_PRICE: Range<usize> = 21..23;
        pub const BID_SIZE: Range<usize> = 23..25;
        pub const OFFER_PRICE: Range<usize> = 25..27;
        pub const OFFER_SIZE: Range<usize> = 27..29;
        pub const LEN: usize = 29;
    }
    /// Long quote (`k`), and the series part the other option messages share.
    pub mod k {
        use core::ops::Range;
        pub const SYMBOL: Range<usize> = 12..17;
        pub const MONTH: usize = 18;
        pub const DAY: usize = 19;
        pub const YEAR: usize = 20;
        pub const STRIKE_DEN: usize = 21;
        pub const STRIKE: Range<usize> = 22..26;
        pub const PREMIUM_DEN: usize = 26;
        pub const BID_PRICE: Range<usize> = 27..31;
        pub const BID_SIZE: Range<usize> = 31..35;
        pub const OFFER_PRICE: Range<usize> = 35..39;
        pub const OFFER_SIZE: Range<usize> = 39..43;
        pub const LEN: usize = 43;
    }
    /// Last sale (`a`), after the series part.
    pub mod a {
        use core::ops::Range;
        pub const VOLUME: Range<usize> = 26..30;
        pub const PREMIUM_DEN: usize = 30;
        pub const PREMIUM: Range<usize> = 31..35;
        pub const TRADE_ID: Range<usize> = 35..39;
        pub const LEN: usize = 43;
    }
    /// Administrative (`C`).
    pub const ADMIN_LEN: Range<usize> = 12..14;
}

/// How a field is written (all integers big-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One ASCII character.
    Char,
    U8,
    U16,
    U32,
    /// ASCII of this many bytes, space padded.
    Text(u8),
    Reserved(u8),
    /// A price: `width` bytes (2 unsigned, 4 or 8 signed), scaled by [`Den`].
    Price(u8, Den),
}

/// Where a price's decimal places come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Den {
    /// The denominator code in the field of this name, earlier in the message.
    Code(&'static str),
    /// Fixed decimal places (the short quote's).
    Places(u8),
}

impl Kind {
    pub const fn width(self) -> usize {
        match self {
            Kind::Char | Kind::U8 => 1,
            Kind::U16 => 2,
            Kind::U32 => 4,
            Kind::Text(n) | Kind::Reserved(n) | Kind::Price(n, _) => n as usize,
        }
    }
}

/// One field of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

const fn f(name: &'static str, kind: Kind) -> Field {
    Field { name, kind }
}

use Kind::{Char, Reserved, Text, U16, U32, U8};

const fn price(width: u8, den: &'static str) -> Kind {
    Kind::Price(width, Den::Code(den))
}

/// The 12 bytes every message starts with; a quote's indicator is its BBO indicator.
pub const HEADER: [Field; 6] = [
    f("participant_id", Char),
    f("message_category", Char),
    f("message_type", Char),
    f("message_indicator", Char),
    f("transaction_id", U32),
    f("participant_reference_number", U32),
];

/// The fixed fields of a message category after [`HEADER`] (the administrative text and a
/// quote's appendages are not in the table: they depend on the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub category: u8,
    /// For the underlying value, whose two types differ: the type (0 for any).
    pub msg_type: u8,
    pub name: &'static str,
    pub fields: &'static [Field],
}

impl Layout {
    /// Bytes of the table's fields.
    pub fn body_len(&self) -> usize {
        self.fields.iter().map(|f| f.kind.width()).sum()
    }
}

const SERIES: [Field; 6] = [
    f("security_symbol", Text(5)),
    f("reserved_1", Reserved(1)),
    f("expiration_month", Char),
    f("expiration_day", U8),
    f("expiration_year", U8),
    f("strike_price_denominator_code", Char),
];

macro_rules! with_series {
    ($($rest:expr),* $(,)?) => {
        &[SERIES[0], SERIES[1], SERIES[2], SERIES[3], SERIES[4], SERIES[5],
          f("strike_price", price(4, "strike_price_denominator_code")), $($rest),*]
    };
}

/// Every message category of version 6 (the underlying value twice, once a type).
pub const LAYOUTS: &[Layout] = &[
    Layout {
        category: b'a',
        msg_type: 0,
        name: "equity_and_index_last_sale",
        fields: with_series![
            f("volume", U32),
            f("premium_price_denominator_code", Char),
            f("premium_price", price(4, "premium_price_denominator_code")),
            f("trade_identifier", U32),
            f("reserved_4", Reserved(4)),
        ],
    },
    Layout { category: b'd', msg_type: 0, name: "open_interest", fields: with_series![f("open_interest_volume", U32)] },
    Layout {
        category: b'f',
        msg_type: 0,
        name: "equity_and_index_end_of_day_summary",
        fields: with_series![
            f("volume", U32),
            f("open_interest_volume", U32),
            f("premium_price_denominator_code", Char),
            f("open_price", price(4, "premium_price_denominator_code")),
            f("high_price", price(4, "premium_price_denominator_code")),
            f("low_price", price(4, "premium_price_denominator_code")),
            f("last_price", price(4, "premium_price_denominator_code")),
            f("net_change", price(4, "premium_price_denominator_code")),
            f("underlying_price_denominator_code", Char),
            f("underlying_price", price(8, "underlying_price_denominator_code")),
            f("bid_price", price(4, "premium_price_denominator_code")),
            f("offer_price", price(4, "premium_price_denominator_code")),
        ],
    },
    Layout {
        category: b'k',
        msg_type: 0,
        name: "long_equity_and_index_quote",
        fields: with_series![
            f("premium_price_denominator_code", Char),
            f("bid_price", price(4, "premium_price_denominator_code")),
            f("bid_size", U32),
            f("offer_price", price(4, "premium_price_denominator_code")),
            f("offer_size", U32),
        ],
    },
    Layout {
        category: b'q',
        msg_type: 0,
        name: "short_equity_and_index_quote",
        fields: &[
            f("security_symbol", Text(4)),
            f("expiration_month", Char),
            f("expiration_day", U8),
            f("expiration_year", U8),
            f("strike_price", Kind::Price(2, Den::Places(1))),
            f("bid_price", Kind::Price(2, Den::Places(2))),
            f("bid_size", U16),
            f("offer_price", Kind::Price(2, Den::Places(2))),
            f("offer_size", U16),
        ],
    },
    Layout { category: b'C', msg_type: 0, name: "administrative", fields: &[f("message_data_length", U16)] },
    Layout { category: b'H', msg_type: 0, name: "control", fields: &[] },
    Layout {
        category: b'Y',
        msg_type: b' ',
        name: "underlying_value_last_sale",
        fields: &[
            f("security_symbol", Text(5)),
            f("reserved_1", Reserved(1)),
            f("index_value_denominator_code", Char),
            f("index_value", price(4, "index_value_denominator_code")),
            f("reserved_4", Reserved(4)),
        ],
    },
    Layout {
        category: b'Y',
        msg_type: b'I',
        name: "underlying_value_bid_and_offer",
        fields: &[
            f("security_symbol", Text(5)),
            f("reserved_1", Reserved(1)),
            f("index_value_denominator_code", Char),
            f("bid_index_value", price(4, "index_value_denominator_code")),
            f("offer_index_value", price(8, "index_value_denominator_code")),
        ],
    },
];

/// The fields of a best bid appendage, then those of a best offer appendage.
pub const APPENDAGES: [[Field; 4]; 2] = [
    [
        f("best_bid_participant_id", Char),
        f("best_bid_denominator_code", Char),
        f("best_bid_price", price(4, "best_bid_denominator_code")),
        f("best_bid_size", U32),
    ],
    [
        f("best_offer_participant_id", Char),
        f("best_offer_denominator_code", Char),
        f("best_offer_price", price(4, "best_offer_denominator_code")),
        f("best_offer_size", U32),
    ],
];

/// The layout of a message of `category` and `msg_type`.
pub fn layout(category: u8, msg_type: u8) -> Option<&'static Layout> {
    LAYOUTS.iter().find(|l| l.category == category && (l.msg_type == 0 || l.msg_type == msg_type))
}

/// Which appendages a quote's BBO indicator announces: (best bid, best offer).
pub const fn appendages(bbo_indicator: u8) -> (bool, bool) {
    match bbo_indicator {
        b'M' | b'N' | b'P' => (true, false),
        b'C' | b'G' | b'K' => (false, true),
        b'O' => (true, true),
        _ => (false, false),
    }
}

/// What a quote's BBO indicator says of one side of the series' best bid and offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BestSide {
    /// The best on this side did not change.
    NoChange,
    /// This quote's own price and size are now the best.
    ThisQuote,
    /// The best is in the appendage that follows.
    Appendage,
    /// There is no best on this side now.
    None,
}

/// The BBO indicator's meaning for (best bid, best offer); `None` for a letter outside
/// `A`..`P` (a space: no best bid and offer information).
pub const fn bbo_sides(bbo_indicator: u8) -> Option<(BestSide, BestSide)> {
    if bbo_indicator < b'A' || bbo_indicator > b'P' {
        return None;
    }
    // The specification's matrix: rows of four letters by best bid (no change, this
    // quote, none, appendage), columns by best offer (no change, this quote, appendage, none).
    let i = bbo_indicator - b'A';
    let bid = match i / 4 {
        0 => BestSide::NoChange,
        1 => BestSide::ThisQuote,
        2 => BestSide::None,
        _ => BestSide::Appendage,
    };
    let offer = match i % 4 {
        0 => BestSide::NoChange,
        1 => BestSide::ThisQuote,
        2 => BestSide::Appendage,
        _ => BestSide::None,
    };
    Some((bid, offer))
}

/// The fixed part of a message (header and table), by category and type: the table's
/// `body_len` plus the header, written out because the table walk cost about 20 ns a
/// message in `tickplant bench feeds` (a test holds them equal).
#[inline]
const fn fixed_len(cat: u8, ty: u8) -> Option<usize> {
    Some(match (cat, ty) {
        (b'k', _) => field::k::LEN,
        (b'q', _) => field::q::LEN,
        (b'a', _) => HEADER_LEN + 31,
        (b'd', _) => HEADER_LEN + 18,
        (b'f', _) => HEADER_LEN + 60,
        (b'C', _) => HEADER_LEN + 2,
        (b'H', _) => HEADER_LEN,
        (b'Y', b' ') => HEADER_LEN + 15,
        (b'Y', b'I') => HEADER_LEN + 19,
        _ => return None,
    })
}

#[cold]
fn unknown_category(cat: u8, ty: u8) -> Error {
    if cat == b'Y' {
        Error::Malformed { what: "opra underlying value message type", offset: field::TYPE, value: u64::from(ty) }
    } else {
        Error::Malformed { what: "opra message category", offset: field::CATEGORY, value: u64::from(cat) }
    }
}

#[cold]
fn too_short(cat: u8, ty: u8, have: usize, need: usize) -> Error {
    Error::Truncated { what: layout(cat, ty).map_or("opra message", |l| l.name), offset: 0, need, have }
}

/// [`fixed_len`] by category, for the categories whose length does not depend on the type
/// and whose messages hold no length field (0 for the others: `Y`, `C`, unknown).
const FIXED_BY_CATEGORY: [u8; 256] = {
    let mut t = [0u8; 256];
    let cats = [b'k', b'q', b'a', b'd', b'f', b'H'];
    let mut i = 0;
    while i < cats.len() {
        t[cats[i] as usize] = match fixed_len(cats[i], b' ') {
            Some(n) => n as u8,
            None => 0,
        };
        i += 1;
    }
    t
};

/// The appendages' bytes by BBO indicator, masked to the quote categories: (by indicator,
/// by category).
const APPENDAGE_BYTES: ([u8; 256], [u8; 256]) = {
    let (mut by_ind, mut mask) = ([0u8; 256], [0u8; 256]);
    let mut i = 0;
    while i < 256 {
        let (b, o) = appendages(i as u8);
        by_ind[i] = (APPENDAGE_LEN * (b as usize + o as usize)) as u8;
        i += 1;
    }
    mask[b'k' as usize] = 0xff;
    mask[b'q' as usize] = 0xff;
    (by_ind, mask)
};

/// A message's length from its first bytes: an error when its category is unknown or
/// `bytes` ends before the length can be told or before the message does.
///
/// The common categories' lengths come from two tables, without a branch on the category
/// or the indicator: in a block the categories follow each other as good as at random, and
/// the walk with a `match` on them took 35 of 53 ns a message in `tickplant bench feeds`.
#[inline]
pub fn message_len(bytes: &[u8]) -> Result<usize> {
    if let Some(h) = bytes.get(..HEADER_LEN) {
        let (cat, ind) = (usize::from(h[field::CATEGORY]), usize::from(h[field::INDICATOR]));
        let fixed = usize::from(FIXED_BY_CATEGORY[cat]);
        let len = fixed + usize::from(APPENDAGE_BYTES.0[ind] & APPENDAGE_BYTES.1[cat]);
        if fixed != 0 && bytes.len() >= len {
            return Ok(len);
        }
    }
    message_len_slow(bytes)
}

#[cold]
#[inline(never)]
fn message_len_slow(bytes: &[u8]) -> Result<usize> {
    crate::error::check("opra message header", bytes, 0, HEADER_LEN)?;
    let (cat, ty) = (bytes[field::CATEGORY], bytes[field::TYPE]);
    let mut len = fixed_len(cat, ty).ok_or_else(|| unknown_category(cat, ty))?;
    match cat {
        b'k' | b'q' => {
            let (b, o) = appendages(bytes[field::INDICATOR]);
            len += APPENDAGE_LEN * (usize::from(b) + usize::from(o));
        }
        b'C' => {
            if bytes.len() < len {
                return Err(too_short(cat, ty, bytes.len(), len));
            }
            len += read_uint(&bytes[field::ADMIN_LEN], true) as usize;
        }
        _ => {}
    }
    if bytes.len() < len {
        return Err(too_short(cat, ty, bytes.len(), len));
    }
    Ok(len)
}

/// One message of a block: the whole message, header included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// The message at the start of `bytes`, cut to its length.
    #[inline]
    pub fn new_checked(bytes: &'a [u8]) -> Result<Message<'a>> {
        let n = message_len(bytes)?;
        Ok(Message { bytes: &bytes[..n] })
    }
    pub fn participant(&self) -> u8 {
        self.bytes[field::PARTICIPANT]
    }
    pub fn category(&self) -> u8 {
        self.bytes[field::CATEGORY]
    }
    pub fn msg_type(&self) -> u8 {
        self.bytes[field::TYPE]
    }
    /// The message indicator (a quote's BBO indicator).
    pub fn indicator(&self) -> u8 {
        self.bytes[field::INDICATOR]
    }
    pub fn transaction_id(&self) -> u32 {
        read_uint(&self.bytes[field::TRANSACTION_ID], true) as u32
    }
    pub fn participant_reference_number(&self) -> u32 {
        read_uint(&self.bytes[field::PARTICIPANT_REF], true) as u32
    }
    pub fn layout(&self) -> &'static Layout {
        // new_checked found it.
        layout(self.category(), self.msg_type()).unwrap_or(&LAYOUTS[0])
    }
}

/// The messages of a block's payload (after its header), as many as the header announced.
/// After the first error it yields nothing more: the messages after a broken one cannot be
/// found.
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    payload: &'a [u8],
    at: usize,
    left: u8,
}

/// The messages of `payload` (a block's bytes after its header), `count` of them.
pub fn messages(payload: &[u8], count: u8) -> Messages<'_> {
    Messages { payload, at: 0, left: count }
}

impl<'a> Iterator for Messages<'a> {
    /// The message's offset in the payload, and the message.
    type Item = Result<(usize, Message<'a>)>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let rest = &self.payload[self.at..];
        match Message::new_checked(rest) {
            Ok(m) => {
                let at = self.at;
                self.at += m.bytes.len();
                Some(Ok((at, m)))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e.at(self.at)))
            }
        }
    }
}

/// A field's value as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Uint(u64),
    /// A character or text, trailing spaces kept.
    Text(&'a [u8]),
    Bytes(&'a [u8]),
    /// A price: the integer on the wire and its decimal places (`None`: the denominator
    /// code is not one of `A`..`I`).
    Price(i64, Option<u8>),
}

/// Decimal places of a denominator code: `A`..`H` 1 to 8, `I` none.
pub const fn decimals(code: u8) -> Option<u8> {
    match code {
        b'A'..=b'H' => Some(code - b'A' + 1),
        b'I' => Some(0),
        _ => None,
    }
}

/// 10^(9 - places): the multiplier to 1e-9 units.
const TO_NANOS: [i64; 10] = [1_000_000_000, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];

/// A price of `raw` with `places` decimals in units of 1e-9 (exact; `None` on overflow or
/// more than 9 places).
#[inline]
pub fn to_nanos(raw: i64, places: u8) -> Option<i64> {
    raw.checked_mul(*TO_NANOS.get(usize::from(places))?)
}

/// A price written exactly as a decimal (`61` with 2 places is `0.61`).
pub fn decimal_string(raw: i64, places: u8) -> String {
    let sign = if raw < 0 { "-" } else { "" };
    let a = raw.unsigned_abs();
    if places == 0 {
        return format!("{sign}{a}");
    }
    let p = 10u64.pow(u32::from(places));
    format!("{sign}{}.{:0w$}", a / p, a % p, w = usize::from(places))
}

impl std::fmt::Display for Value<'_> {
    /// Integers in decimal, text as it is, reserved bytes in hex, prices as the decimal.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Uint(v) => write!(f, "{v}"),
            Value::Text(t) => f.write_str(&String::from_utf8_lossy(t)),
            Value::Bytes(b) => {
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
            Value::Price(raw, Some(p)) => f.write_str(&decimal_string(raw, p)),
            Value::Price(raw, None) => write!(f, "{raw}"),
        }
    }
}

fn read_fields<'a>(
    bytes: &'a [u8],
    mut at: usize,
    table: &'static [Field],
    out: &mut Vec<(&'static str, Value<'a>)>,
) -> usize {
    for fd in table {
        let b = &bytes[at..at + fd.kind.width()];
        let v = match fd.kind {
            Kind::Char | Kind::Text(_) => Value::Text(b),
            Kind::U8 | Kind::U16 | Kind::U32 => Value::Uint(read_uint(b, true)),
            Kind::Reserved(_) => Value::Bytes(b),
            Kind::Price(w, den) => {
                let raw = match w {
                    2 => read_uint(b, true) as i64,
                    4 => i64::from(read_uint(b, true) as u32 as i32),
                    _ => read_uint(b, true) as i64,
                };
                let places = match den {
                    Den::Places(p) => Some(p),
                    Den::Code(name) => out.iter().rev().find(|(n, _)| *n == name).and_then(|(_, v)| match v {
                        Value::Text(t) => t.first().and_then(|&c| decimals(c)),
                        _ => None,
                    }),
                };
                Value::Price(raw, places)
            }
        };
        out.push((fd.name, v));
        at += fd.kind.width();
    }
    at
}

/// Every field of a message in order, header first; a quote's appendages and an
/// administrative message's text (`message_data`) included.
pub fn fields<'a>(m: &Message<'a>) -> Vec<(&'static str, Value<'a>)> {
    let l = m.layout();
    let mut out = Vec::with_capacity(HEADER.len() + l.fields.len() + 8);
    let mut at = read_fields(m.bytes, 0, &HEADER, &mut out);
    if matches!(m.category(), b'k' | b'q') {
        out[3].0 = "bbo_indicator";
    }
    at = read_fields(m.bytes, at, l.fields, &mut out);
    match m.category() {
        b'C' => out.push(("message_data", Value::Text(&m.bytes[at..]))),
        b'k' | b'q' => {
            let (b, o) = appendages(m.indicator());
            if b {
                at = read_fields(m.bytes, at, &APPENDAGES[0], &mut out);
            }
            if o {
                read_fields(m.bytes, at, &APPENDAGES[1], &mut out);
            }
        }
        _ => {}
    }
    out
}

/// An option series as the messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Series {
    /// Root symbol, space padded to 8 (the short quote's 4 letters and the long forms' 5
    /// give the same root).
    pub root: [u8; 8],
    /// `A`..`L` calls January..December, `M`..`X` puts.
    pub month: u8,
    pub day: u8,
    pub year: u8,
    /// Strike in 1e-9 units.
    pub strike: i64,
}

impl std::hash::Hash for Series {
    /// Two words (the root, and the strike mixed with the expiration): the derived hash
    /// wrote six pieces and cost about 10 ns a quote in `tickplant bench feeds`. Equal
    /// series hash equal; the map's equality test tells the rest apart.
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from_le_bytes(self.root));
        let exp = u64::from(self.month) << 16 | u64::from(self.day) << 8 | u64::from(self.year);
        state.write_u64(self.strike as u64 ^ exp.rotate_right(24));
    }
}

impl Series {
    /// `C` or `P`, when the month code is one.
    pub fn call_put(&self) -> Option<char> {
        match self.month {
            b'A'..=b'L' => Some('C'),
            b'M'..=b'X' => Some('P'),
            _ => None,
        }
    }

    /// The series as one symbol: the OCC's 21 characters (the root padded to 6, `YYMMDD`,
    /// `C` or `P`, the strike in thousandths in 8 digits: `SPY   261218C00450000`) where
    /// the root and strike fit them; else the root, `YYMMDD`, `C` or `P` and the strike
    /// as a decimal, a space apart (`?` and month 00 for a month code that is neither).
    pub fn symbol(&self) -> String {
        let root = String::from_utf8_lossy(&self.root).trim_end().to_string();
        let month = match self.month {
            b'A'..=b'L' => self.month - b'A' + 1,
            b'M'..=b'X' => self.month - b'M' + 1,
            _ => 0,
        };
        let cp = self.call_put().unwrap_or('?');
        let (yy, dd) = (self.year % 100, self.day);
        if month != 0
            && root.len() <= 6
            && self.strike >= 0
            && self.strike % 1_000_000 == 0
            && self.strike < 100_000_000_000_000
        {
            format!("{root:<6}{yy:02}{month:02}{dd:02}{cp}{:08}", self.strike / 1_000_000)
        } else {
            let strike = decimal_string(self.strike, 9);
            let strike = strike.trim_end_matches('0').trim_end_matches('.');
            format!("{root} {yy:02}{month:02}{dd:02} {cp} {strike}")
        }
    }
}

/// One side's price (1e-9) and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Level {
    pub price: i64,
    pub size: u32,
}

/// A short or long quote, prices in 1e-9 units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quote {
    pub series: Series,
    pub bid: Level,
    pub offer: Level,
    /// The best bid and best offer appendages, when sent: (participant, level).
    pub best_bid: Option<(u8, Level)>,
    pub best_offer: Option<(u8, Level)>,
}

/// A quote without its series ([`Quote::sides`]): what a decoder that knows the series
/// by other means reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sides {
    pub bid: Level,
    pub offer: Level,
    pub best_bid: Option<(u8, Level)>,
    pub best_offer: Option<(u8, Level)>,
}

#[cold]
fn bad_den(offset: usize, code: u8) -> Error {
    Error::Malformed { what: "opra price denominator code", offset, value: u64::from(code) }
}

#[inline]
fn priced(raw: i64, code: u8, offset: usize) -> Result<i64> {
    decimals(code).and_then(|p| to_nanos(raw, p)).ok_or_else(|| bad_den(offset, code))
}

/// The first `N` bytes as an array, so that reads at constant offsets need no further
/// bounds checks (`tickplant bench feeds`: the checked reads cost about 60 instructions a
/// quote).
#[inline(always)]
fn fixed<'a, const N: usize>(b: &'a [u8], what: &'static str) -> Result<&'a [u8; N]> {
    match b.get(..N) {
        Some(x) => Ok(x.try_into().unwrap_or(&[0; N])),
        None => Err(Error::Truncated { what, offset: 0, need: N, have: b.len() }),
    }
}

#[inline(always)]
fn u16_at<const N: usize>(a: &[u8; N], i: usize) -> u16 {
    u16::from_be_bytes([a[i], a[i + 1]])
}

#[inline(always)]
fn u32_at<const N: usize>(a: &[u8; N], i: usize) -> u32 {
    u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]])
}

/// A symbol of `n` bytes at `at`, in 8 space-padded bytes (the feed pads with spaces, so
/// the short quote's 4 letters and the long forms' 5 give the same root).
#[inline(always)]
fn root_at<const N: usize>(a: &[u8; N], at: usize, n: usize) -> [u8; 8] {
    let mut r = [b' '; 8];
    r[..n].copy_from_slice(&a[at..at + n]);
    r
}

/// A quote's appendage: participant, denominator code, price, size.
#[inline(always)]
fn appendage(a: &[u8; APPENDAGE_LEN], at: usize) -> Result<(u8, Level)> {
    let raw = i64::from(u32_at(a, 2) as i32);
    Ok((a[0], Level { price: priced(raw, a[1], at + 1)?, size: u32_at(a, 6) }))
}

impl Series {
    /// The series of a short quote (`q`), or of a long message (`k`, `a`, `d`, `f`); an
    /// error for another category, a message too short, or a strike whose denominator code
    /// is not `A`..`I`.
    #[inline]
    pub fn parse(m: &Message<'_>) -> Result<Series> {
        match m.category() {
            b'q' => {
                use field::q;
                let a = fixed::<{ q::STRIKE.end }>(m.bytes, "opra short quote")?;
                Ok(Series {
                    root: root_at(a, q::SYMBOL.start, 4),
                    month: a[q::MONTH],
                    day: a[q::DAY],
                    year: a[q::YEAR],
                    strike: i64::from(u16_at(a, q::STRIKE.start)) * 100_000_000,
                })
            }
            b'k' | b'a' | b'd' | b'f' => series_of(fixed::<{ field::k::STRIKE.end }>(m.bytes, "opra series")?),
            c => Err(Error::Malformed { what: "opra message category with a series", offset: 1, value: u64::from(c) }),
        }
    }
}

/// A message's series as its bytes are sent, in two words, for a decoder's cache of
/// series ids (a lookup that builds no [`Series`]): a short quote's 9 bytes (root, month,
/// day, year, strike), a long message's 14 (`k`, `a`, `d`, `f`: root, a reserved byte,
/// month, day, year, strike denominator code, strike). Equal keys are the same series (a
/// series has a key in each form). The forms never give equal keys: a long form's second
/// word carries its strike denominator code in byte 3, checked here to be `A`..`I`, and
/// a short form's is 0 there. `None`: too short, or a strike denominator code that is
/// not one.
#[inline(always)]
pub fn series_key(m: &Message<'_>) -> Option<[u64; 2]> {
    let b = m.bytes;
    let word = |at: usize| b.get(at..at + 8).map(|x| u64::from_le_bytes(x.try_into().unwrap_or_default()));
    if m.category() == b'q' {
        use field::q;
        Some([word(q::SYMBOL.start)?, u64::from(*b.get(q::STRIKE.end - 1)?)])
    } else {
        use field::k;
        // The code is byte 3 of the second word.
        const _: () = assert!(k::STRIKE_DEN - k::MONTH == 3);
        let w = word(k::MONTH)?;
        decimals(*b.get(k::STRIKE_DEN)?)?;
        Some([word(k::SYMBOL.start)?, w])
    }
}

impl Quote {
    /// The quote of a `q` or `k` message; an error for another category, a message too
    /// short for its appendages, or a price whose denominator code is not `A`..`I`.
    #[inline]
    pub fn parse(m: &Message<'_>) -> Result<Quote> {
        let series = Series::parse(m)?;
        let s = Quote::sides(m)?;
        Ok(Quote { series, bid: s.bid, offer: s.offer, best_bid: s.best_bid, best_offer: s.best_offer })
    }

    /// [`Quote::parse`] less the series (whose strike is not checked).
    #[inline]
    pub fn sides(m: &Message<'_>) -> Result<Sides> {
        let b = m.bytes;
        let (bid, offer, at) = match m.category() {
            b'q' => {
                use field::q;
                let a = fixed::<{ q::LEN }>(b, "opra short quote")?;
                let lvl = |p: usize, z: usize| Level {
                    price: i64::from(u16_at(a, p)) * 10_000_000,
                    size: u32::from(u16_at(a, z)),
                };
                (lvl(q::BID_PRICE.start, q::BID_SIZE.start), lvl(q::OFFER_PRICE.start, q::OFFER_SIZE.start), q::LEN)
            }
            b'k' => {
                use field::k;
                let a = fixed::<{ k::LEN }>(b, "opra long quote")?;
                let den = a[k::PREMIUM_DEN];
                let lvl = |p: usize, z: usize| -> Result<Level> {
                    Ok(Level { price: priced(i64::from(u32_at(a, p) as i32), den, p)?, size: u32_at(a, z) })
                };
                (lvl(k::BID_PRICE.start, k::BID_SIZE.start)?, lvl(k::OFFER_PRICE.start, k::OFFER_SIZE.start)?, k::LEN)
            }
            c => return Err(Error::Malformed { what: "opra quote category", offset: 1, value: u64::from(c) }),
        };
        let mut q = Sides { bid, offer, best_bid: None, best_offer: None };
        let (has_bid, has_offer) = appendages(m.indicator());
        if has_bid | has_offer {
            let rest = &b[at.min(b.len())..];
            if has_bid {
                q.best_bid = Some(appendage(fixed(rest, "opra best bid appendage")?, at)?);
            }
            if has_offer {
                let o = if has_bid { APPENDAGE_LEN } else { 0 };
                let r = rest.get(o..).unwrap_or_default();
                q.best_offer = Some(appendage(fixed(r, "opra best offer appendage")?, at + o)?);
            }
        }
        Ok(q)
    }
}

/// The series of a long message (`a`, `d`, `f`, `k`): the 26 bytes from the header to the
/// strike.
#[inline(always)]
fn series_of<const N: usize>(a: &[u8; N]) -> Result<Series> {
    use field::k;
    let den = a[k::STRIKE_DEN];
    Ok(Series {
        root: root_at(a, k::SYMBOL.start, 5),
        month: a[k::MONTH],
        day: a[k::DAY],
        year: a[k::YEAR],
        strike: priced(i64::from(u32_at(a, k::STRIKE.start)), den, k::STRIKE_DEN)?,
    })
}

/// An equity or index last sale (`a`), prices in 1e-9 units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LastSale {
    pub series: Series,
    pub volume: u32,
    pub premium: i64,
    pub trade_identifier: u32,
}

/// A last sale without its series ([`LastSale::sale`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sale {
    pub volume: u32,
    pub premium: i64,
    pub trade_identifier: u32,
}

impl LastSale {
    pub fn parse(m: &Message<'_>) -> Result<LastSale> {
        let series = Series::parse(m)?;
        let s = LastSale::sale(m)?;
        Ok(LastSale { series, volume: s.volume, premium: s.premium, trade_identifier: s.trade_identifier })
    }

    /// [`LastSale::parse`] less the series (whose strike is not checked).
    #[inline]
    pub fn sale(m: &Message<'_>) -> Result<Sale> {
        if m.category() != b'a' {
            return Err(Error::Malformed {
                what: "opra last sale category",
                offset: 1,
                value: u64::from(m.category()),
            });
        }
        use field::a;
        let b = fixed::<{ a::LEN }>(m.bytes, "opra last sale")?;
        Ok(Sale {
            volume: u32_at(b, a::VOLUME.start),
            premium: priced(i64::from(u32_at(b, a::PREMIUM.start) as i32), b[a::PREMIUM_DEN], a::PREMIUM_DEN)?,
            trade_identifier: u32_at(b, a::TRADE_ID.start),
        })
    }
}

/// Writing messages (the simulator's and the tests'): fields in table order.
pub mod build {
    use super::*;

    /// A field's value to write: integers, or bytes (text, characters, reserved).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Put<'a> {
        Int(i64),
        Bytes(&'a [u8]),
    }

    /// Append `values` in the widths of `table` (text space padded or cut, integers
    /// big-endian, two's complement for negative prices).
    pub fn put(out: &mut Vec<u8>, table: &[Field], values: &[Put<'_>]) {
        for (fd, v) in table.iter().zip(values) {
            let w = fd.kind.width();
            match *v {
                Put::Int(x) => {
                    let be = x.to_be_bytes();
                    out.extend_from_slice(&be[8 - w..]);
                }
                Put::Bytes(b) => {
                    let n = b.len().min(w);
                    out.extend_from_slice(&b[..n]);
                    let pad = if matches!(fd.kind, Kind::Reserved(_)) { 0 } else { b' ' };
                    out.extend(std::iter::repeat_n(pad, w - n));
                }
            }
        }
    }

    /// The 12-byte header.
    pub fn header(out: &mut Vec<u8>, participant: u8, category: u8, msg_type: u8, indicator: u8, txid: u32) {
        out.extend_from_slice(&[participant, category, msg_type, indicator]);
        out.extend_from_slice(&txid.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
    }

    /// A block: the version-6 header, then the messages, then a pad byte when the end is
    /// odd (block size counts it, as real blocks do).
    pub fn block(seq: u32, ts: (u32, u32), participant_feed: u8, messages: &[&[u8]]) -> Vec<u8> {
        let body: usize = messages.iter().map(|m| m.len()).sum();
        let size = crate::opra::header_len(6) + body;
        let padded = size + size % 2;
        let r = crate::opra::Repr {
            version: 6,
            block_size: padded as u16,
            data_feed_indicator: participant_feed,
            retransmission_indicator: b' ',
            session_indicator: Some(0),
            block_sequence_number: seq,
            messages_in_block: messages.len() as u8,
            timestamp: ts,
            checksum: 0,
        };
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out);
        for m in messages {
            out.extend_from_slice(m);
        }
        out.resize(padded, 0);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::build::{put, Put};
    use super::*;

    #[test]
    fn a_series_symbol_is_the_occs_where_it_fits() {
        let s = |root: &[u8], month, strike| {
            let mut r = [b' '; 8];
            r[..root.len()].copy_from_slice(root);
            Series { root: r, month, day: 18, year: 26, strike }
        };
        assert_eq!(s(b"SPY", b'L', 450_000_000_000).symbol(), "SPY   261218C00450000");
        assert_eq!(s(b"AAPL7", b'M', 2_500_000_000).symbol(), "AAPL7 260118P00002500");
        // A strike finer than a thousandth, a root longer than six, a month code neither.
        assert_eq!(s(b"SPY", b'A', 1_234_500).symbol(), "SPY 260118 C 0.0012345");
        assert_eq!(s(b"ABCDEFG", b'X', 7_000_000_000).symbol(), "ABCDEFG 261218 P 7");
        assert_eq!(s(b"SPY", b'Z', 1_000_000_000).symbol(), "SPY 260018 ? 1");
    }

    fn long_quote(indicator: u8, den: u8, bid: i32, offer: i32) -> Vec<u8> {
        let mut m = Vec::new();
        build::header(&mut m, b'D', b'k', b' ', indicator, 7);
        let l = layout(b'k', b' ').unwrap();
        let v = [
            Put::Bytes(b"AMZN"),
            Put::Bytes(&[0]),
            Put::Bytes(b"A"),
            Put::Int(19),
            Put::Int(24),
            Put::Bytes(b"B"),
            Put::Int(16525),
            Put::Bytes(&[den]),
            Put::Int(i64::from(bid)),
            Put::Int(239),
            Put::Int(i64::from(offer)),
            Put::Int(495),
        ];
        put(&mut m, l.fields, &v);
        let (b, o) = appendages(indicator);
        for (i, has) in [b, o].into_iter().enumerate() {
            if has {
                put(
                    &mut m,
                    &APPENDAGES[i],
                    &[Put::Bytes(b"P"), Put::Bytes(b"B"), Put::Int(61 + i as i64), Put::Int(243)],
                );
            }
        }
        m
    }

    #[test]
    fn layouts_are_sized_as_the_specification() {
        for (cat, ty, len) in
            [(b'a', b'A', 31), (b'd', b' ', 18), (b'f', b' ', 60), (b'k', b' ', 31), (b'q', b' ', 17), (b'Y', b' ', 15)]
        {
            assert_eq!(layout(cat, ty).unwrap().body_len(), len, "category {}", cat as char);
        }
        assert_eq!(layout(b'Y', b'I').unwrap().body_len(), 19);
        for l in LAYOUTS {
            let ty = if l.msg_type == 0 { b' ' } else { l.msg_type };
            assert_eq!(fixed_len(l.category, ty), Some(HEADER_LEN + l.body_len()), "{}", l.name);
        }
        for c in 0..=255u8 {
            assert_eq!(fixed_len(c, b' ').is_some(), layout(c, b' ').is_some(), "category {c}");
        }
        assert!(layout(b'Y', b'Z').is_none() && layout(b'z', b' ').is_none());
    }

    #[test]
    fn test_parse() {
        let m = long_quote(b'M', b'B', 61, 63);
        assert_eq!(message_len(&m).unwrap(), 53, "the real capture's long quote is 53 bytes");
        let msg = Message::new_checked(&m).unwrap();
        let q = Quote::parse(&msg).unwrap();
        assert_eq!(&q.series.root, b"AMZN    ");
        assert_eq!((q.series.month, q.series.day, q.series.year, q.series.strike), (b'A', 19, 24, 165_250_000_000));
        assert_eq!(
            q.series.symbol(),
            format!("{:<6}240119C00165250", String::from_utf8_lossy(&q.series.root).trim_end())
        );
        assert_eq!(q.bid, Level { price: 610_000_000, size: 239 });
        assert_eq!(q.offer, Level { price: 630_000_000, size: 495 });
        assert_eq!(q.best_bid, Some((b'P', Level { price: 610_000_000, size: 243 })));
        assert_eq!(q.best_offer, None);
        let f = fields(&msg);
        assert_eq!(f[3], ("bbo_indicator", Value::Text(b"M")));
        let bid = f.iter().find(|(n, _)| *n == "bid_price").unwrap().1;
        assert_eq!(bid, Value::Price(61, Some(2)));
        assert_eq!(bid.to_string(), "0.61");
        assert_eq!(f.last().unwrap().0, "best_bid_size");
    }

    #[test]
    fn test_emit() {
        // Both appendages, a negative price: the table's writer and reader agree.
        let m = long_quote(b'O', b'D', -12345, 99);
        let msg = Message::new_checked(&m).unwrap();
        assert_eq!(msg.bytes.len(), HEADER_LEN + 31 + 20);
        let q = Quote::parse(&msg).unwrap();
        assert_eq!(q.bid.price, -1_234_500_000);
        assert_eq!(q.best_offer.unwrap().1.price, 620_000_000);
        let names: Vec<_> = fields(&msg).iter().map(|(n, _)| *n).collect();
        assert!(names.ends_with(&[
            "best_offer_participant_id",
            "best_offer_denominator_code",
            "best_offer_price",
            "best_offer_size"
        ]));
    }

    #[test]
    fn the_bbo_matrix() {
        assert_eq!(bbo_sides(b'A'), Some((BestSide::NoChange, BestSide::NoChange)));
        assert_eq!(bbo_sides(b'F'), Some((BestSide::ThisQuote, BestSide::ThisQuote)));
        assert_eq!(bbo_sides(b'L'), Some((BestSide::None, BestSide::None)));
        assert_eq!(bbo_sides(b'O'), Some((BestSide::Appendage, BestSide::Appendage)));
        assert_eq!(bbo_sides(b' '), None);
        // The appendage letters are exactly those the matrix sends to an appendage.
        for c in 0u8..=255 {
            let (b, o) = appendages(c);
            let (sb, so) =
                bbo_sides(c).map_or((false, false), |(b, o)| (b == BestSide::Appendage, o == BestSide::Appendage));
            assert_eq!((b, o), (sb, so), "indicator {c}");
        }
    }

    #[test]
    fn prices_and_decimals() {
        assert_eq!(decimal_string(16525, 2), "165.25");
        assert_eq!(decimal_string(-5, 3), "-0.005");
        assert_eq!(decimal_string(7, 0), "7");
        assert_eq!(to_nanos(1, 8), Some(10));
        assert_eq!(to_nanos(i64::MAX, 1), None);
        assert_eq!(decimals(b'J'), None);
        let mut m = long_quote(b' ', b'Z', 1, 1);
        assert!(Quote::parse(&Message::new_checked(&m).unwrap()).is_err(), "denominator Z");
        m[1] = b'H';
        assert_eq!(Message::new_checked(&m).unwrap().bytes.len(), HEADER_LEN, "control: header only");
    }

    #[test]
    fn blocks_and_truncation() {
        let a = long_quote(b'O', b'B', 1, 2);
        let mut c = Vec::new();
        build::header(&mut c, b'O', b'H', b'N', b' ', 0);
        let blk = build::block(9, (1, 2), b'O', &[&a, &c]);
        assert_eq!(blk.len() % 2, 0);
        let b = crate::opra::Block::new_checked(&blk[..]).unwrap();
        let got: Vec<_> = messages(b.payload(), b.messages_in_block()).map(|m| m.unwrap().1.category()).collect();
        assert_eq!(got, vec![b'k', b'H']);
        // Announce one more: an error at the payload's pad byte, then nothing.
        let mut it = messages(b.payload(), 3);
        it.next();
        it.next();
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
        for cut in 0..a.len() {
            assert!(message_len(&a[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest::proptest! {
        /// Quotes written from random values through the tables read back the same two ways:
        /// the typed view (fixed offsets) and the table walk (`fields`), which must agree
        /// with each other and with what was written.
        #[test]
        fn quotes_round_trip(
            short in proptest::bool::ANY,
            ind in proptest::sample::select(b" ABCDEFGHIJKLMNOP".to_vec()),
            den in b'A'..=b'I',
            bid in 0u16..=u16::MAX, offer in 0u16..=u16::MAX,
            bsize in 0u16..=u16::MAX, osize in 0u16..=u16::MAX,
            strike in 0u16..=u16::MAX, day in 1u8..=31, year in 0u8..=99,
            app in proptest::array::uniform2((i32::MIN / 2..i32::MAX / 2, 0u32..=u32::MAX)),
        ) {
            let mut m = Vec::new();
            build::header(&mut m, b'X', if short { b'q' } else { b'k' }, b' ', ind, 1);
            let den_s = [den];
            let (b, o, bs, os, st) = (i64::from(bid), i64::from(offer), i64::from(bsize), i64::from(osize), i64::from(strike));
            if short {
                put(&mut m, layout(b'q', b' ').unwrap().fields, &[
                    Put::Bytes(b"QQQ"), Put::Bytes(b"C"), Put::Int(day.into()), Put::Int(year.into()),
                    Put::Int(st), Put::Int(b), Put::Int(bs), Put::Int(o), Put::Int(os),
                ]);
            } else {
                put(&mut m, layout(b'k', b' ').unwrap().fields, &[
                    Put::Bytes(b"QQQ"), Put::Bytes(&[0]), Put::Bytes(b"C"), Put::Int(day.into()), Put::Int(year.into()),
                    Put::Bytes(&den_s), Put::Int(st), Put::Bytes(&den_s), Put::Int(b), Put::Int(bs), Put::Int(o), Put::Int(os),
                ]);
            }
            let (hb, ho) = appendages(ind);
            for (i, has) in [hb, ho].into_iter().enumerate() {
                if has {
                    put(&mut m, &APPENDAGES[i], &[Put::Bytes(b"Z"), Put::Bytes(&den_s), Put::Int(app[i].0.into()), Put::Int(app[i].1.into())]);
                }
            }
            let msg = Message::new_checked(&m).unwrap();
            proptest::prop_assert_eq!(msg.bytes.len(), m.len());
            let q = Quote::parse(&msg).unwrap();
            let places = if short { 2 } else { decimals(den).unwrap() };
            proptest::prop_assert_eq!(q.bid, Level { price: to_nanos(b, places).unwrap(), size: u32::from(bsize) });
            proptest::prop_assert_eq!(q.offer, Level { price: to_nanos(o, places).unwrap(), size: u32::from(osize) });
            let sp = if short { 1 } else { decimals(den).unwrap() };
            proptest::prop_assert_eq!(q.series.strike, to_nanos(st, sp).unwrap());
            proptest::prop_assert_eq!((q.series.day, q.series.year, &q.series.root), (day, year, b"QQQ     "));
            let f = fields(&msg);
            let get = |n: &str| f.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
            proptest::prop_assert_eq!(get("bid_price"), Some(Value::Price(b, Some(places))));
            proptest::prop_assert_eq!(get("offer_size"), Some(Value::Uint(u64::from(osize))));
            if let Some((p, l)) = q.best_offer {
                proptest::prop_assert_eq!(p, b'Z');
                proptest::prop_assert_eq!(get("best_offer_price"), Some(Value::Price(l.price / 10i64.pow(9 - u32::from(decimals(den).unwrap())), Some(decimals(den).unwrap()))));
                proptest::prop_assert_eq!(l.size, app[1].1);
            } else {
                proptest::prop_assert!(get("best_offer_price").is_none());
            }
            proptest::prop_assert_eq!(q.best_bid.is_some(), get("best_bid_size").is_some());
        }
    }

    proptest::proptest! {
        /// Every category and type: random values written field by field (big-endian
        /// integers, space-padded text, raw reserved bytes, prices with a random
        /// denominator code) read back through the tables as written, the message's length
        /// as the writer's.
        #[test]
        fn every_category_round_trips(seed in proptest::num::u64::ANY) {
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for l in LAYOUTS {
                let ty = if l.msg_type == 0 { b' ' } else { l.msg_type };
                let ind = if matches!(l.category, b'k' | b'q') { b"ACMO"[(next() % 4) as usize] } else { b' ' };
                let mut m = Vec::new();
                build::header(&mut m, b'X', l.category, ty, ind, next() as u32);
                let mut want: Vec<(&str, Vec<u8>)> = Vec::new();
                let mut dens: Vec<(&str, u8)> = Vec::new();
                let mut text = String::new();
                for fd in l.fields {
                    let w = fd.kind.width();
                    let bytes: Vec<u8> = match fd.kind {
                        Kind::Char if fd.name.ends_with("denominator_code") => {
                            let c = b"ABCDEFGHI"[(next() % 9) as usize];
                            dens.push((fd.name, c));
                            vec![c]
                        }
                        Kind::Char | Kind::Text(_) => (0..w).map(|_| b'A' + (next() % 26) as u8).collect(),
                        Kind::Reserved(_) => (0..w).map(|_| next() as u8).collect(),
                        Kind::U8 | Kind::U16 | Kind::U32 | Kind::Price(..) => next().to_be_bytes()[8 - w..].to_vec(),
                    };
                    if fd.name == "message_data_length" {
                        // The administrative text: its length, then that many characters.
                        let n = (next() % 40) as usize;
                        text = (0..n).map(|_| (b'a' + (next() % 26) as u8) as char).collect();
                        m.extend_from_slice(&(n as u16).to_be_bytes());
                        want.push((fd.name, (n as u16).to_be_bytes().to_vec()));
                        continue;
                    }
                    m.extend_from_slice(&bytes);
                    want.push((fd.name, bytes));
                }
                m.extend_from_slice(text.as_bytes());
                let (b, o) = appendages(ind);
                let napp = usize::from(b) + usize::from(o);
                for _ in 0..napp {
                    let c = b"ABCDEFGHI"[(next() % 9) as usize];
                    m.extend_from_slice(&[b'P', c]);
                    m.extend_from_slice(&next().to_be_bytes()[..8]);
                }
                let msg = Message::new_checked(&m).unwrap();
                proptest::prop_assert_eq!(msg.bytes.len(), m.len());
                let f = fields(&msg);
                proptest::prop_assert_eq!(f.len(), HEADER.len() + l.fields.len() + 4 * napp + usize::from(l.category == b'C'));
                for (name, bytes) in &want {
                    let v = f.iter().find(|(n, _)| n == name).unwrap().1;
                    match v {
                        Value::Uint(u) => proptest::prop_assert_eq!(u, read_uint(bytes, true)),
                        Value::Text(t) | Value::Bytes(t) => proptest::prop_assert_eq!(t, &bytes[..]),
                        Value::Price(raw, places) => {
                            let w = bytes.len();
                            let expect = match w {
                                2 => read_uint(bytes, true) as i64,
                                4 => i64::from(read_uint(bytes, true) as u32 as i32),
                                _ => read_uint(bytes, true) as i64,
                            };
                            proptest::prop_assert_eq!(raw, expect, "{}", name);
                            if let Some(p) = places {
                                proptest::prop_assert!(p <= 8);
                            }
                        }
                    }
                }
                if l.category == b'C' {
                    proptest::prop_assert_eq!(f.last().unwrap().1, Value::Text(text.as_bytes()));
                }
                // Every coded price is scaled by its own code.
                for (name, v) in &f {
                    if let (Value::Price(_, Some(p)), Some(Den::Code(code))) = (v, l.fields.iter().chain(&HEADER).find(|x| x.name == *name).and_then(|x| match x.kind { Kind::Price(_, d) => Some(d), _ => None })) {
                        let c = dens.iter().find(|(n, _)| *n == code).map(|x| x.1);
                        proptest::prop_assert_eq!(Some(*p), c.and_then(decimals), "{}", name);
                    }
                }
            }
        }
    }

    /// Any bytes: a length or an error, and a parsed message's fields and views never panic.
    #[test]
    fn arbitrary_messages_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = [0u8; 120];
        let cats = b"adfkqCHY";
        for round in 0..50_000u32 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if round % 2 == 0 {
                buf[1] = cats[(x >> 30) as usize % cats.len()];
                buf[2] = if x & 1 == 0 { b' ' } else { b'I' };
                buf[3] = b'A' + (x >> 40) as u8 % 17;
                buf[12] = 0;
            }
            let len = (x as usize >> 8) % buf.len();
            if let Ok(m) = Message::new_checked(&buf[..len]) {
                let _ = fields(&m);
                let _ = Quote::parse(&m);
                let _ = LastSale::parse(&m);
            }
        }
    }
}

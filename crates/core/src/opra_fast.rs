//! OPRA FAST messages as normalized events.
//!
//! An OPRA FAST v2 message, once decoded by `tickplant-fast`, is a flat record of named
//! fields (`MESSAGE_CATEGORY`, `SECURITY_SYMBOL`, `BID_PRICE`...). [`OpraFast`] maps it onto
//! [`Event`]s by its category:
//!
//! | category | meaning | events |
//! |---|---|---|
//! | `k`, `q` | long or short equity/index quote | two `quote` events: the bid side, then the offer side |
//! | `a` | equity/index last sale | one `trade` (price `PREMIUM_PRICE`, size `VOLUME`) |
//! | `H`, `C` | control and administrative | one `status` event (instrument 0) |
//! | others (`d` open interest, `f` end-of-day summary, `Y` underlying values...) | | none, counted as `other` |
//!
//! An option series is the root symbol with its expiration code, year and strike; the
//! first message of a series gives it an `instrument_id` (from 1, in order of appearance),
//! kept in a table sized at start (full: the message is rejected, counted). Prices are
//! uInt32 with a denominator code: `A`..`H` mean 1 to 8 decimal places and `I` none; a
//! quote or trade whose code is anything else is rejected with that reason, never given a
//! made-up price. `aux` carries the `PARTICIPANT_ID` (the exchange, an ASCII letter);
//! `ts_event` is the receive time (OPRA's `TIME` field is kept in `order_id`, raw, because
//! its meaning differs between feed versions).
//!
//! Fields are found by name once, at construction; mapping a message is one pass over its
//! entries with a table lookup per field, no allocation once the series table has room.

use std::collections::BTreeMap;

use serde::Serialize;
use tickplant_fast::{Message, Program, Value};

use crate::event::{Bbo, Event, EventAction, Side, PRICE_SCALE};
use crate::series::SeriesTable;

/// What a field of the template is to the mapper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Role {
    None = 0,
    Category,
    Participant,
    Sequence,
    Time,
    Symbol,
    Expiration,
    Year,
    StrikeCode,
    StrikeDenominator,
    Strike,
    PremiumDenominator,
    BidPrice,
    BidSize,
    OfferPrice,
    OfferSize,
    Premium,
    Volume,
}

const ROLES: [(&str, Role); 17] = [
    ("MESSAGE_CATEGORY", Role::Category),
    ("PARTICIPANT_ID", Role::Participant),
    ("MESSAGE_SEQUENCE_NUMBER", Role::Sequence),
    ("TIME", Role::Time),
    ("SECURITY_SYMBOL", Role::Symbol),
    ("EXPIRATION_DATE", Role::Expiration),
    ("YEAR", Role::Year),
    ("STRIKE_PRICE_CODE", Role::StrikeCode),
    ("STRIKE_PRICE_DENOMINATOR_CODE", Role::StrikeDenominator),
    ("EXPLICIT_STRIKE_PRICE", Role::Strike),
    ("PREMIUM_PRICE_DENOMINATOR_CODE", Role::PremiumDenominator),
    ("BID_PRICE", Role::BidPrice),
    ("BID_SIZE", Role::BidSize),
    ("OFFER_PRICE", Role::OfferPrice),
    ("OFFER_SIZE", Role::OfferSize),
    ("PREMIUM_PRICE", Role::Premium),
    ("VOLUME", Role::Volume),
];
const NROLES: usize = 18;

/// Why a quote or trade was not mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reject {
    /// The message has no `MESSAGE_CATEGORY`.
    NoCategory = 0,
    /// A quote or trade without the series (symbol) it concerns.
    NoSeries,
    /// A quote without bid or offer prices, a trade without its price or volume.
    MissingPrice,
    /// The price denominator code is not `A`..`I`, or the price overflows.
    BadDenominator,
    /// The series table is full.
    TableFull,
}

impl Reject {
    const ALL: [Reject; 5] =
        [Reject::NoCategory, Reject::NoSeries, Reject::MissingPrice, Reject::BadDenominator, Reject::TableFull];
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::NoCategory => "no MESSAGE_CATEGORY",
            Reject::NoSeries => "no SECURITY_SYMBOL",
            Reject::MissingPrice => "price or size missing",
            Reject::BadDenominator => "price denominator code not A..I",
            Reject::TableFull => "series table full",
        }
    }
}

/// What became of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// This many events were produced (quote 2, trade 1, status 1).
    Events(u8),
    /// A category with no event (open interest, summaries, underlying values...).
    Other,
    Rejected(Reject),
}

/// An option series as the feed names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Series {
    /// Root symbol, space padded.
    pub root: [u8; 8],
    /// Expiration month code: `A`..`L` calls January..December, `M`..`X` puts.
    pub expiration: u32,
    pub year: u32,
    pub strike_code: u32,
    pub strike_denominator: u32,
    pub strike: u32,
}

impl Series {
    /// `C` or `P` from the expiration code, when it is one.
    pub fn call_put(&self) -> Option<char> {
        match self.expiration {
            0x41..=0x4c => Some('C'),
            0x4d..=0x58 => Some('P'),
            _ => None,
        }
    }
    /// The explicit strike in 1e-9 units, when its denominator code is valid.
    pub fn strike_price(&self) -> Option<i64> {
        scale(self.strike_denominator).and_then(|m| i64::from(self.strike).checked_mul(m))
    }
    /// The series as one symbol: the root, `YYMM` (the feed sends no day), `C` or `P` (`?`
    /// for another code) and the strike as a decimal, a space apart: `SPY 2612 C 450`.
    pub fn symbol(&self) -> String {
        let root = String::from_utf8_lossy(&self.root).trim_end().to_string();
        let month = match self.expiration {
            0x41..=0x4c => self.expiration - 0x40,
            0x4d..=0x58 => self.expiration - 0x4c,
            _ => 0,
        };
        let strike = match self.strike_price() {
            Some(p) => {
                let s = tickplant_wire::opra_binary::decimal_string(p, 9);
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            None => format!("{}/{}", self.strike, self.strike_denominator),
        };
        format!("{root} {:02}{month:02} {} {strike}", self.year % 100, self.call_put().unwrap_or('?'))
    }
}

/// Counts of what the mapper did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct OpraFastStats {
    pub messages: u64,
    pub quotes: u64,
    pub trades: u64,
    pub status: u64,
    pub other: u64,
    pub rejected: u64,
    /// Messages by category letter.
    pub by_category: BTreeMap<String, u64>,
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Series seen.
    pub series: u64,
    /// Straight-line segments the decoder ran with (set by the pipeline).
    pub specialised_segments: u64,
}

/// Multiplier from a price with denominator code `code` to 1e-9 units.
fn scale(code: u32) -> Option<i64> {
    match code {
        0x41..=0x48 => Some(10i64.pow(9 - (code - 0x40))),
        0x49 => Some(PRICE_SCALE),
        _ => None,
    }
}

fn price(v: u64, code: u32) -> Option<i64> {
    scale(code).and_then(|m| i64::try_from(v).ok()?.checked_mul(m))
}

/// Maps decoded OPRA FAST messages to events; keeps the series table and each series'
/// latest quote.
#[derive(Debug, Clone)]
pub struct OpraFast {
    /// Role of each field of the program, by field index.
    roles: Vec<Role>,
    series: SeriesTable<Series>,
    bbo: Vec<Bbo>,
    by_category: [u64; 256],
    rejected: [u64; 5],
    quotes: u64,
    trades: u64,
    status: u64,
    other: u64,
}

impl OpraFast {
    /// A mapper for messages of `program`, with room for `max_series` series. Fails when
    /// the templates have no `MESSAGE_CATEGORY` field (not OPRA FAST templates).
    pub fn new(program: &Program, max_series: usize) -> Result<OpraFast, crate::error::InvalidConfig> {
        let mut roles = vec![Role::None; program.fields.len()];
        for (i, f) in program.fields.iter().enumerate() {
            if let Some(&(_, r)) = ROLES.iter().find(|(n, _)| *n == f.name) {
                roles[i] = r;
            }
        }
        if !roles.contains(&Role::Category) {
            return Err(crate::error::InvalidConfig::new(
                "templates",
                "the templates have no MESSAGE_CATEGORY field: not OPRA FAST templates",
            ));
        }
        Ok(OpraFast {
            roles,
            series: SeriesTable::new(max_series),
            bbo: vec![Bbo::default(); max_series + 1],
            by_category: [0; 256],
            rejected: [0; 5],
            quotes: 0,
            trades: 0,
            status: 0,
            other: 0,
        })
    }

    /// Map one decoded message received at `ts_recv`, handing each event to `out`.
    pub fn map(&mut self, program: &Program, msg: &Message, ts_recv: u64, mut out: impl FnMut(Event)) -> Mapped {
        let mut v = [0u64; NROLES];
        let mut have = 0u32;
        let mut root = [b' '; 8];
        for e in &msg.entries {
            let r = self.roles.get(e.field as usize).copied().unwrap_or(Role::None);
            if r == Role::None {
                continue;
            }
            match e.value {
                Value::UInt(x) => v[r as usize] = x,
                Value::Int(x) => v[r as usize] = x as u64,
                Value::Bytes { .. } | Value::Static { .. } if r == Role::Symbol => {
                    let b = msg.bytes_of(program, &e.value).unwrap_or_default();
                    let n = b.len().min(8);
                    root[..n].copy_from_slice(&b[..n]);
                }
                _ => continue,
            }
            have |= 1 << r as u32;
        }
        let has = |r: Role| have & (1 << r as u32) != 0;
        if !has(Role::Category) {
            return self.reject(Reject::NoCategory);
        }
        let cat = v[Role::Category as usize] as u8;
        self.by_category[usize::from(cat)] += 1;
        let base = Event {
            ts_recv,
            ts_event: ts_recv,
            sequence: v[Role::Sequence as usize],
            order_id: v[Role::Time as usize],
            aux: v[Role::Participant as usize],
            msg_type: cat,
            ..Event::default()
        };
        let quote = matches!(cat, b'k' | b'q');
        if !quote && cat != b'a' {
            if matches!(cat, b'H' | b'C') {
                self.status += 1;
                out(Event { action: EventAction::Status, ..base });
                return Mapped::Events(1);
            }
            self.other += 1;
            return Mapped::Other;
        }
        if !has(Role::Symbol) {
            return self.reject(Reject::NoSeries);
        }
        let den = v[Role::PremiumDenominator as usize] as u32;
        let prices = if quote {
            [Role::BidPrice, Role::BidSize, Role::OfferPrice, Role::OfferSize].into_iter().all(has)
                && has(Role::PremiumDenominator)
        } else {
            has(Role::Premium) && has(Role::Volume) && has(Role::PremiumDenominator)
        };
        if !prices {
            return self.reject(Reject::MissingPrice);
        }
        let key = Series {
            root,
            expiration: v[Role::Expiration as usize] as u32,
            year: v[Role::Year as usize] as u32,
            strike_code: v[Role::StrikeCode as usize] as u32,
            strike_denominator: v[Role::StrikeDenominator as usize] as u32,
            strike: v[Role::Strike as usize] as u32,
        };
        let size = |x: u64| u32::try_from(x).unwrap_or(u32::MAX);
        if quote {
            let (Some(bid), Some(ask)) =
                (price(v[Role::BidPrice as usize], den), price(v[Role::OfferPrice as usize], den))
            else {
                return self.reject(Reject::BadDenominator);
            };
            let Some(id) = self.instrument(key) else { return self.reject(Reject::TableFull) };
            let (bs, asz) = (v[Role::BidSize as usize], v[Role::OfferSize as usize]);
            self.bbo[id as usize] = Bbo { bid_price: bid, ask_price: ask, bid_size: bs, ask_size: asz };
            self.quotes += 1;
            let e = Event { instrument_id: id, action: EventAction::Quote, ..base };
            out(Event { side: Side::Bid, price: bid, size: size(bs), ..e });
            out(Event { side: Side::Ask, price: ask, size: size(asz), ..e });
            Mapped::Events(2)
        } else {
            let Some(p) = price(v[Role::Premium as usize], den) else {
                return self.reject(Reject::BadDenominator);
            };
            let Some(id) = self.instrument(key) else { return self.reject(Reject::TableFull) };
            self.trades += 1;
            out(Event {
                instrument_id: id,
                action: EventAction::Trade,
                price: p,
                size: size(v[Role::Volume as usize]),
                ..base
            });
            Mapped::Events(1)
        }
    }

    #[cold]
    fn reject(&mut self, r: Reject) -> Mapped {
        self.rejected[r as usize] += 1;
        Mapped::Rejected(r)
    }

    fn instrument(&mut self, key: Series) -> Option<u32> {
        self.series.id(key)
    }

    /// Series named so far (instrument ids run 1..=this).
    pub fn series_count(&self) -> u32 {
        self.series.len()
    }

    /// The series of an instrument id.
    pub fn series(&self, id: u32) -> Option<&Series> {
        self.series.get(id)
    }

    /// The latest quote of an instrument (zeros before its first quote).
    pub fn bbo(&self, id: u32) -> Bbo {
        self.bbo.get(id as usize).copied().unwrap_or_default()
    }

    /// The root symbol of an instrument (zeros for an unknown id).
    pub fn root(&self, id: u32) -> [u8; 8] {
        self.series(id).map_or([0; 8], |s| s.root)
    }

    pub fn stats(&self) -> OpraFastStats {
        let rejected: u64 = self.rejected.iter().sum();
        OpraFastStats {
            messages: self.quotes + self.trades + self.status + self.other + rejected,
            quotes: self.quotes,
            trades: self.trades,
            status: self.status,
            other: self.other,
            rejected,
            by_category: (0..256)
                .filter(|&c| self.by_category[c] > 0)
                .map(|c| {
                    let name =
                        if (0x21..0x7f).contains(&c) { (c as u8 as char).to_string() } else { format!("0x{c:02x}") };
                    (name, self.by_category[c])
                })
                .collect(),
            rejected_by_reason: Reject::ALL
                .iter()
                .filter(|r| self.rejected[**r as usize] > 0)
                .map(|r| (r.as_str().to_string(), self.rejected[*r as usize]))
                .collect(),
            series: u64::from(self.series.len()),
            specialised_segments: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_fast::Entry;

    #[test]
    fn a_series_symbol_names_root_month_side_and_strike() {
        let root = *b"SPY     ";
        let s = Series {
            root,
            expiration: u32::from(b'L'),
            year: 26,
            strike_code: 0,
            strike_denominator: 0x41,
            strike: 4505,
        };
        assert_eq!(s.symbol(), "SPY 2612 C 450.5");
        let p = Series { expiration: u32::from(b'M'), strike_denominator: 0x5a, ..s };
        assert_eq!(p.symbol(), "SPY 2601 P 4505/90");
    }

    const XML: &str = r#"<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
      <template name="OPRA" id="1">
        <uInt32 name="MESSAGE_CATEGORY"><copy/></uInt32>
        <uInt32 name="PARTICIPANT_ID"><copy/></uInt32>
        <uInt32 name="MESSAGE_SEQUENCE_NUMBER"><increment/></uInt32>
        <string name="SECURITY_SYMBOL" presence="optional"><copy/></string>
        <uInt32 name="EXPIRATION_DATE" presence="optional"><copy/></uInt32>
        <uInt32 name="PREMIUM_PRICE_DENOMINATOR_CODE" presence="optional"><copy/></uInt32>
        <uInt32 name="BID_PRICE" presence="optional"><copy/></uInt32>
        <uInt32 name="BID_SIZE" presence="optional"><copy/></uInt32>
        <uInt32 name="OFFER_PRICE" presence="optional"><copy/></uInt32>
        <uInt32 name="OFFER_SIZE" presence="optional"><copy/></uInt32>
        <uInt32 name="PREMIUM_PRICE" presence="optional"><copy/></uInt32>
        <uInt32 name="VOLUME" presence="optional"><copy/></uInt32>
      </template></templates>"#;

    fn msg(p: &Program, fields: &[(&str, u64)], symbol: Option<&str>) -> Message {
        let mut m = Message::new();
        for f in &p.fields {
            if f.name == "SECURITY_SYMBOL" {
                if let Some(s) = symbol {
                    let start = m.bytes.len() as u32;
                    m.bytes.extend_from_slice(s.as_bytes());
                    let field = p.field_index("SECURITY_SYMBOL").unwrap();
                    m.entries.push(Entry { field, value: Value::Bytes { start, len: s.len() as u32 } });
                }
            } else if let Some(&(_, v)) = fields.iter().find(|(n, _)| *n == f.name) {
                m.entries.push(Entry { field: p.field_index(&f.name).unwrap(), value: Value::UInt(v) });
            }
        }
        m
    }

    fn run(o: &mut OpraFast, p: &Program, m: &Message) -> (Mapped, Vec<Event>) {
        let mut ev = Vec::new();
        let r = o.map(p, m, 7, |e| ev.push(e));
        (r, ev)
    }

    #[test]
    fn quote_gives_two_sides_with_scaled_prices() {
        let p = Program::from_xml(XML).unwrap();
        let mut o = OpraFast::new(&p, 4).unwrap();
        let fields = [
            ("MESSAGE_CATEGORY", u64::from(b'k')),
            ("PARTICIPANT_ID", u64::from(b'X')),
            ("MESSAGE_SEQUENCE_NUMBER", 41),
            ("EXPIRATION_DATE", u64::from(b'A')),
            ("PREMIUM_PRICE_DENOMINATOR_CODE", u64::from(b'B')),
            ("BID_PRICE", 125),
            ("BID_SIZE", 10),
            ("OFFER_PRICE", 130),
            ("OFFER_SIZE", 20),
        ];
        let (r, ev) = run(&mut o, &p, &msg(&p, &fields, Some("IBM  ")));
        assert_eq!(r, Mapped::Events(2));
        assert_eq!(ev[0].side, Side::Bid);
        assert_eq!(ev[0].price, 1_250_000_000);
        assert_eq!(ev[1].price, 1_300_000_000);
        assert_eq!((ev[0].size, ev[1].size), (10, 20));
        assert_eq!((ev[0].sequence, ev[0].aux, ev[0].msg_type), (41, u64::from(b'X'), b'k'));
        assert_eq!(ev[0].instrument_id, 1);
        assert_eq!(o.bbo(1), Bbo { bid_price: 1_250_000_000, ask_price: 1_300_000_000, bid_size: 10, ask_size: 20 });
        assert_eq!(o.series(1).unwrap().call_put(), Some('C'));
        assert_eq!(&o.root(1), b"IBM     ");
        // The same series again keeps its id; a put is another series.
        let (_, ev) = run(&mut o, &p, &msg(&p, &fields, Some("IBM  ")));
        assert_eq!(ev[0].instrument_id, 1);
        let mut put = fields;
        put[3].1 = u64::from(b'M');
        let (_, ev) = run(&mut o, &p, &msg(&p, &put, Some("IBM  ")));
        assert_eq!(ev[0].instrument_id, 2);
        assert_eq!(o.stats().quotes, 3);
        assert_eq!(o.stats().series, 2);
    }

    #[test]
    fn trade_status_other_and_every_reject() {
        let p = Program::from_xml(XML).unwrap();
        let mut o = OpraFast::new(&p, 1).unwrap();
        let trade = [
            ("MESSAGE_CATEGORY", u64::from(b'a')),
            ("PREMIUM_PRICE_DENOMINATOR_CODE", u64::from(b'I')),
            ("PREMIUM_PRICE", 3),
            ("VOLUME", 5),
        ];
        let (r, ev) = run(&mut o, &p, &msg(&p, &trade, Some("SPX")));
        assert_eq!(r, Mapped::Events(1));
        assert_eq!((ev[0].action, ev[0].price, ev[0].size), (EventAction::Trade, 3 * PRICE_SCALE, 5));
        let (r, ev) = run(&mut o, &p, &msg(&p, &[("MESSAGE_CATEGORY", u64::from(b'H'))], None));
        assert_eq!((r, ev[0].action, ev[0].instrument_id), (Mapped::Events(1), EventAction::Status, 0));
        let (r, _) = run(&mut o, &p, &msg(&p, &[("MESSAGE_CATEGORY", u64::from(b'd'))], Some("SPX")));
        assert_eq!(r, Mapped::Other);
        let (r, _) = run(&mut o, &p, &msg(&p, &[("PARTICIPANT_ID", 1)], None));
        assert_eq!(r, Mapped::Rejected(Reject::NoCategory));
        let (r, _) = run(&mut o, &p, &msg(&p, &trade, None));
        assert_eq!(r, Mapped::Rejected(Reject::NoSeries));
        let (r, _) = run(&mut o, &p, &msg(&p, &trade[..3], Some("SPX")));
        assert_eq!(r, Mapped::Rejected(Reject::MissingPrice));
        let mut bad = trade;
        bad[1].1 = u64::from(b'Z');
        let (r, ev) = run(&mut o, &p, &msg(&p, &bad, Some("SPX")));
        assert_eq!((r, ev.len()), (Mapped::Rejected(Reject::BadDenominator), 0));
        let (r, _) = run(&mut o, &p, &msg(&p, &trade, Some("NDX")));
        assert_eq!(r, Mapped::Rejected(Reject::TableFull));
        let s = o.stats();
        assert_eq!((s.messages, s.trades, s.status, s.other, s.rejected), (8, 1, 1, 1, 5));
        assert_eq!(s.by_category["a"], 5);
        assert_eq!(s.rejected_by_reason.len(), 5);
    }

    #[test]
    fn templates_without_a_category_are_refused() {
        let p = Program::from_xml(r#"<templates><template name="T" id="1"><uInt32 name="X"/></template></templates>"#)
            .unwrap();
        assert!(OpraFast::new(&p, 1).unwrap_err().to_string().contains("MESSAGE_CATEGORY"));
    }

    #[test]
    fn denominators_scale_exactly() {
        assert_eq!(price(12345, u32::from(b'A')), Some(1_234_500_000_000));
        assert_eq!(price(12345, u32::from(b'H')), Some(123_450));
        assert_eq!(price(7, u32::from(b'I')), Some(7_000_000_000));
        assert_eq!(price(u64::MAX, u32::from(b'I')), None);
        assert_eq!(price(1, u32::from(b'@')), None);
    }
}

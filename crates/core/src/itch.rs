//! ITCH 5.0 onto the normalized [`Event`], and the symbol directory.
//!
//! `instrument_id` is the message's stock locate code. Executes, cancels, deletes and
//! replaces carry no side or price in ITCH: [`crate::book::Books::apply`] fills them in from
//! the order it knows. Prices go from Price(4) to 1e-9 units exactly (times 100,000).
//! `ts_event` is the message's nanoseconds since midnight plus the session's midnight
//! (US Eastern) as UNIX nanoseconds: a day given ([`midnight_eastern_ns`]) or told from
//! the capture ([`SessionDay`]).

use std::collections::HashMap;

use tickplant_wire::civil_from_days;
use tickplant_wire::itch50::{self, Message};

use crate::book::Books;
use crate::error::BadText;
use crate::event::{flags, Event, EventAction, Side};

/// Price(4) to 1e-9 units.
pub const PRICE4_TO_NANO: i64 = 100_000;

#[inline(always)]
fn side(b: u8) -> Side {
    match b {
        b'B' => Side::Bid,
        b'S' => Side::Ask,
        _ => Side::None,
    }
}

// One fill per message type that maps onto more than the header, shared by `normalize`
// (from a parsed `Message`) and `decode_with` (straight from the bytes).
#[inline(always)]
fn add(e: &mut Event, a: &itch50::AddOrder) {
    e.action = EventAction::Add;
    e.order_id = a.order_reference_number;
    e.side = side(a.buy_sell_indicator);
    e.size = a.shares;
    e.price = i64::from(a.price) * PRICE4_TO_NANO;
}
#[inline(always)]
fn add_mpid(e: &mut Event, f: &itch50::AddOrderMpid) {
    add(e, &f.add_order());
}
#[inline(always)]
fn execution(e: &mut Event, order: u64, shares: u32, match_number: u64) {
    e.action = EventAction::Execute;
    e.order_id = order;
    e.size = shares;
    e.aux = match_number;
}
#[inline(always)]
fn executed(e: &mut Event, x: &itch50::OrderExecuted) {
    execution(e, x.order_reference_number, x.executed_shares, x.match_number);
}
#[inline(always)]
fn executed_with_price(e: &mut Event, x: &itch50::OrderExecutedWithPrice) {
    execution(e, x.order_reference_number, x.executed_shares, x.match_number);
    e.price = i64::from(x.execution_price) * PRICE4_TO_NANO;
    if x.printable == b'N' {
        e.flags |= flags::NON_PRINTABLE;
    }
}
#[inline(always)]
fn cancel(e: &mut Event, x: &itch50::OrderCancel) {
    e.action = EventAction::Cancel;
    e.order_id = x.order_reference_number;
    e.size = x.cancelled_shares;
}
#[inline(always)]
fn delete(e: &mut Event, x: &itch50::OrderDelete) {
    e.action = EventAction::Delete;
    e.order_id = x.order_reference_number;
}
#[inline(always)]
fn replace(e: &mut Event, x: &itch50::OrderReplace) {
    e.action = EventAction::Modify;
    e.order_id = x.new_order_reference_number;
    e.aux = x.original_order_reference_number;
    e.size = x.shares;
    e.price = i64::from(x.price) * PRICE4_TO_NANO;
}
#[inline(always)]
fn trade(e: &mut Event, t: &itch50::Trade) {
    e.action = EventAction::Trade;
    e.order_id = t.order_reference_number;
    e.side = side(t.buy_sell_indicator);
    e.size = t.shares;
    e.price = i64::from(t.price) * PRICE4_TO_NANO;
    e.aux = t.match_number;
}
#[inline(always)]
fn cross_trade(e: &mut Event, t: &itch50::CrossTrade) {
    e.action = EventAction::Trade;
    e.size = u32::try_from(t.shares).unwrap_or(u32::MAX);
    e.price = i64::from(t.cross_price) * PRICE4_TO_NANO;
    e.aux = t.match_number;
}
#[inline(always)]
fn broken_trade(e: &mut Event, b: &itch50::BrokenTrade) {
    e.aux = b.match_number;
}
#[inline(always)]
fn imbalance<T>(e: &mut Event, _: &T) {
    e.action = EventAction::Imbalance;
}

/// Map one ITCH message to an event. `midnight_ns` is the session's midnight in UNIX ns.
#[inline]
pub fn normalize(m: &Message, ts_recv: u64, sequence: u64, midnight_ns: u64) -> Event {
    let (locate, _, ts) = m.header();
    let mut e = Event {
        ts_recv,
        ts_event: midnight_ns + ts,
        sequence,
        instrument_id: u32::from(locate),
        msg_type: m.message_type(),
        ..Default::default()
    };
    match m {
        Message::AddOrder(x) => add(&mut e, x),
        Message::AddOrderMpid(x) => add_mpid(&mut e, x),
        Message::OrderExecuted(x) => executed(&mut e, x),
        Message::OrderExecutedWithPrice(x) => executed_with_price(&mut e, x),
        Message::OrderCancel(x) => cancel(&mut e, x),
        Message::OrderDelete(x) => delete(&mut e, x),
        Message::OrderReplace(x) => replace(&mut e, x),
        Message::Trade(x) => trade(&mut e, x),
        Message::CrossTrade(x) => cross_trade(&mut e, x),
        Message::BrokenTrade(x) => broken_trade(&mut e, x),
        Message::Noii(x) => imbalance(&mut e, x),
        Message::DirectListingCapitalRaise(x) => imbalance(&mut e, x),
        _ => {}
    }
    e
}

/// The fast path of `normalize(&parse_exact(b)?, ..)`: decode one message straight from its
/// bytes (which must be exactly the type's length, as a MoldUDP64 block or a framed file
/// record gives them) and hand the event to `then` before returning it, all in one
/// dispatch on the type byte. Passing [`Books::apply`](crate::book::Books::apply) as `then`
/// lets the compiler fold the book's own dispatch on the action into that one (each arm
/// knows its action), so a message costs one hard-to-predict branch instead of three.
/// `None` for an unknown type or a length that disagrees with the type.
#[inline(always)]
pub fn decode_with(
    b: &[u8],
    ts_recv: u64,
    sequence: u64,
    midnight_ns: u64,
    then: impl FnOnce(&mut Event),
) -> Option<Event> {
    let mut e = Event::default();
    decode_into(b, ts_recv, sequence, midnight_ns, &mut e, then).then_some(e)
}

/// [`decode_with`] writing the event into `out` (every field of it) rather than returning
/// it; false (and `out` unspecified) where `decode_with` gives `None`. A caller that keeps
/// its events in a buffer decodes straight into their places: the pipeline's events,
/// returned and then copied in, had each copy's 16-byte loads wait on the smaller stores
/// that had just written the event (a fifth of the decode stage's samples).
#[inline(always)]
pub fn decode_into(
    b: &[u8],
    ts_recv: u64,
    sequence: u64,
    midnight_ns: u64,
    out: &mut Event,
    then: impl FnOnce(&mut Event),
) -> bool {
    let Some(&t) = b.first() else { return false };
    // Each arm checks the length against its own type's (one compare with a constant) and
    // reads the message from the bytes as an array of that length, with no other check:
    // looking the length up by type and then parsing the header and the message, each
    // checking it again, cost a dozen instructions a message more.
    macro_rules! head {
        ($locate:expr, $timestamp:expr) => {
            *out = Event {
                ts_recv,
                ts_event: midnight_ns + $timestamp,
                sequence,
                instrument_id: u32::from($locate),
                msg_type: t,
                ..Default::default()
            }
        };
    }
    macro_rules! arm {
        ($ty:ident, $fill:ident) => {{
            let Ok(w) = <&[u8; itch50::$ty::LEN]>::try_from(b) else { return false };
            let x = itch50::$ty::read(w);
            head!(x.stock_locate, x.timestamp);
            $fill(out, &x);
            then(out);
        }};
    }
    match t {
        itch50::AddOrder::TYPE => arm!(AddOrder, add),
        itch50::AddOrderMpid::TYPE => arm!(AddOrderMpid, add_mpid),
        itch50::OrderExecuted::TYPE => arm!(OrderExecuted, executed),
        itch50::OrderExecutedWithPrice::TYPE => arm!(OrderExecutedWithPrice, executed_with_price),
        itch50::OrderCancel::TYPE => arm!(OrderCancel, cancel),
        itch50::OrderDelete::TYPE => arm!(OrderDelete, delete),
        itch50::OrderReplace::TYPE => arm!(OrderReplace, replace),
        itch50::Trade::TYPE => arm!(Trade, trade),
        itch50::CrossTrade::TYPE => arm!(CrossTrade, cross_trade),
        itch50::BrokenTrade::TYPE => arm!(BrokenTrade, broken_trade),
        itch50::Noii::TYPE => arm!(Noii, imbalance),
        itch50::DirectListingCapitalRaise::TYPE => arm!(DirectListingCapitalRaise, imbalance),
        _ => {
            if itch50::message_len(t) != Some(b.len()) {
                return false;
            }
            // Every message starts with the same header; the shortest type is 12 bytes long.
            let Ok(h) = itch50::SystemEvent::parse(b) else { return false };
            head!(h.stock_locate, h.timestamp);
            then(out);
        }
    }
    true
}

/// [`decode_with`] doing nothing more.
#[inline]
pub fn decode(b: &[u8], ts_recv: u64, sequence: u64, midnight_ns: u64) -> Option<Event> {
    decode_with(b, ts_recv, sequence, midnight_ns, |_| {})
}

/// The order id a message probably names, read without looking at its type (offset 11 holds
/// the order reference of A, F, E, C, X, D and the original one of U), for
/// [`Books::prefetch_order`](crate::book::Books::prefetch_order) ahead of
/// [`decode_with`]: a branch-free guess whose misses only cost a wasted prefetch.
#[inline(always)]
pub fn order_hint(b: &[u8]) -> u64 {
    match b.get(11..19) {
        Some(x) => u64::from_be_bytes(x.try_into().unwrap_or_default()),
        None => 0,
    }
}

/// How many messages ahead [`apply_all`] asks for the order a message names: far enough
/// for the order table's cache line to arrive before the message is applied, near enough
/// that it is still in the cache then (the parse + book benchmark, `cargo bench -p
/// tickplant --bench itch`, ran fastest at 8 of 4, 8 and 16).
pub const PREFETCH_AHEAD: usize = 8;

/// A message [`apply_all`] could not decode: its index in the walk (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecodable {
    pub index: u64,
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "message {} is not an ITCH 5.0 message of its type's length", self.index + 1)
    }
}

impl std::error::Error for Undecodable {}

/// Decode every message of `messages` (each exactly its type's length, as a BinaryFILE or a
/// MoldUDP64 block gives it) and apply it to `books` in one dispatch on its type, the order
/// each message names asked for [`PREFETCH_AHEAD`] messages before: the loop the parse +
/// book benchmark times, for every shell that builds books from a file. `dir`, where
/// given, learns the symbols (Stock Directory messages, and the adds and trades of
/// instruments it has not named yet). `each(index, event, changed)` sees every event
/// (`changed`: a book moved) and stops the walk by returning false. Returns the messages
/// applied.
pub fn apply_all<'a>(
    messages: impl Iterator<Item = &'a [u8]>,
    books: &mut Books,
    mut dir: Option<&mut SymbolDirectory>,
    mut each: impl FnMut(u64, &Event, bool) -> bool,
) -> Result<u64, Undecodable> {
    let mut messages = messages;
    // The next `PREFETCH_AHEAD` messages, their orders asked for; `pending` of them are real.
    let mut ahead: [&[u8]; PREFETCH_AHEAD] = [&[]; PREFETCH_AHEAD];
    let mut pending = 0;
    for slot in ahead.iter_mut() {
        let Some(m) = messages.next() else { break };
        books.prefetch_order(order_hint(m));
        *slot = m;
        pending += 1;
    }
    let (mut k, mut n) = (0, 0u64);
    // Each message is decoded straight into its place, as the pipeline does it.
    let mut event = Event::default();
    while pending > 0 {
        let m = ahead[k];
        match messages.next() {
            Some(next) => {
                books.prefetch_order(order_hint(next));
                ahead[k] = next;
            }
            None => pending -= 1,
        }
        k = (k + 1) % PREFETCH_AHEAD;
        let mut changed = false;
        if !decode_into(m, 0, n, 0, &mut event, |e| changed = books.apply(e)) {
            return Err(Undecodable { index: n });
        }
        if let Some(d) = dir.as_deref_mut() {
            d.learn_new(m);
        }
        n += 1;
        if !each(n - 1, &event, changed) {
            break;
        }
    }
    Ok(n)
}

/// Stock locate <-> symbol, from Stock Directory (R) messages (and the stock field of adds
/// and trades for a locate the directory has not named).
///
/// Ids below 65,536 (every ITCH stock locate) are kept in a dense table, so that checking
/// an add's stock against what is known costs one load and one compare per message.
#[derive(Debug, Default, Clone)]
pub struct SymbolDirectory {
    dense: Vec<Option<[u8; 8]>>,
    sparse: HashMap<u32, [u8; 8]>,
    by_symbol: HashMap<[u8; 8], u32>,
}

const DENSE_IDS: u32 = 1 << 16;

/// Instruments a feed named and the pipeline has not yet taken
/// ([`crate::feed::FeedDecoder::take_named`]), with their symbols from the directory.
#[derive(Debug, Clone, Default)]
pub struct NamedQueue {
    ids: Vec<u32>,
    taken: usize,
}

impl NamedQueue {
    #[inline]
    pub fn push(&mut self, id: u32) {
        self.ids.push(id);
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// The next instrument named (its symbol space padded), skipping ids the directory has
    /// no symbol for; `None` when all were taken (the queue then starts afresh).
    #[cold]
    pub fn take(&mut self, dir: &SymbolDirectory) -> Option<(u32, [u8; 8])> {
        while let Some(&id) = self.ids.get(self.taken) {
            self.taken += 1;
            if let Some(sym) = dir.symbol(id) {
                return Some((id, itch50::stock(sym)));
            }
        }
        self.ids.clear();
        self.taken = 0;
        None
    }
}

impl SymbolDirectory {
    pub fn new() -> Self {
        Self::default()
    }
    /// Learn from a message; returns true when it named a new instrument.
    pub fn learn(&mut self, m: &Message) -> bool {
        let (locate, stock) = match m {
            Message::StockDirectory(r) => (r.stock_locate, r.stock),
            Message::AddOrder(a) => (a.stock_locate, a.stock),
            Message::AddOrderMpid(a) => (a.stock_locate, a.stock),
            Message::Trade(t) => (t.stock_locate, t.stock),
            _ => return false,
        };
        self.insert(u32::from(locate), stock)
    }
    /// [`SymbolDirectory::learn_bytes`] of the messages that can name an instrument
    /// (directory messages, adds and trades), with no parse of an add or trade whose stock
    /// is already its instrument's name (one load and compare): the per-message step of the
    /// feed handler and of [`apply_all`]. Returns true when it named a new instrument.
    #[inline(always)]
    pub fn learn_new(&mut self, m: &[u8]) -> bool {
        match m.first() {
            Some(b'R') => self.learn_bytes(m),
            Some(b'A' | b'F' | b'P') => {
                let known = match (m.get(itch50::LOCATE), m.get(itch50::ADD_STOCK)) {
                    (Some(l), Some(stock)) => {
                        self.get(u32::from(u16::from_be_bytes([l[0], l[1]]))).is_some_and(|s| s[..] == *stock)
                    }
                    _ => false,
                };
                !known && self.learn_bytes(m)
            }
            _ => false,
        }
    }

    /// [`SymbolDirectory::learn`] from a message's bytes (exactly its type's length), without
    /// parsing the other types.
    #[inline]
    pub fn learn_bytes(&mut self, b: &[u8]) -> bool {
        let (locate, stock) = match b.first() {
            Some(&itch50::StockDirectory::TYPE) => match itch50::StockDirectory::parse(b) {
                Ok(r) => (r.stock_locate, r.stock),
                Err(_) => return false,
            },
            Some(&itch50::AddOrder::TYPE) => match itch50::AddOrder::parse(b) {
                Ok(a) => (a.stock_locate, a.stock),
                Err(_) => return false,
            },
            Some(&itch50::AddOrderMpid::TYPE) => match itch50::AddOrderMpid::parse(b) {
                Ok(a) => (a.stock_locate, a.stock),
                Err(_) => return false,
            },
            Some(&itch50::Trade::TYPE) => match itch50::Trade::parse(b) {
                Ok(t) => (t.stock_locate, t.stock),
                Err(_) => return false,
            },
            _ => return false,
        };
        self.insert(u32::from(locate), stock)
    }
    #[inline]
    /// The instrument's stock field as sent (8 bytes, space padded).
    pub fn get(&self, id: u32) -> Option<&[u8; 8]> {
        if id < DENSE_IDS {
            self.dense.get(id as usize).and_then(Option::as_ref)
        } else {
            self.sparse.get(&id)
        }
    }
    /// Name instrument `id`; returns true when it was new.
    #[inline]
    pub fn insert(&mut self, id: u32, stock: [u8; 8]) -> bool {
        if self.get(id) == Some(&stock) {
            return false;
        }
        self.rename(id, stock);
        true
    }
    #[cold]
    fn rename(&mut self, id: u32, stock: [u8; 8]) {
        let old = if id < DENSE_IDS {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, None);
            }
            self.dense[i].replace(stock)
        } else {
            self.sparse.insert(id, stock)
        };
        if let Some(old) = old {
            self.by_symbol.remove(&old);
        }
        self.by_symbol.insert(stock, id);
    }
    /// The symbol of an instrument, padding trimmed.
    pub fn symbol(&self, id: u32) -> Option<&str> {
        self.get(id).and_then(|s| std::str::from_utf8(itch50::trim_stock(s)).ok())
    }
    pub fn id(&self, symbol: &str) -> Option<u32> {
        self.by_symbol.get(&itch50::stock(symbol)).copied()
    }
    pub fn len(&self) -> usize {
        self.dense.iter().flatten().count() + self.sparse.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Every (id, symbol), by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        let mut v: Vec<u32> = (0..self.dense.len() as u32)
            .filter(|&i| self.dense[i as usize].is_some())
            .chain(self.sparse.keys().copied())
            .collect();
        v.sort_unstable();
        v.into_iter().filter_map(|id| self.symbol(id).map(|s| (id, s)))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// Midnight in New York on the day `days` since 1970-01-01, as UNIX nanoseconds (US
/// daylight saving time, second Sunday of March to first Sunday of November, applied).
fn midnight_of_day(days: i64) -> u64 {
    let (y, _, _) = civil_from_days(days);
    // Weekday with 0 = Sunday (1970-01-01 was a Thursday).
    let weekday = |days: i64| (days + 4).rem_euclid(7);
    let nth_sunday = |month: u32, n: i64| {
        let first = days_from_civil(y, month, 1);
        first + (7 - weekday(first)) % 7 + 7 * (n - 1)
    };
    let dst = days >= nth_sunday(3, 2) && days < nth_sunday(11, 1);
    let offset_h = if dst { 4 } else { 5 };
    ((days * 86_400 + offset_h * 3_600) as u64) * 1_000_000_000
}

/// The latest midnight in New York at or before `ns` (UNIX nanoseconds; 0 before the
/// first, 1970-01-01 05:00 UTC).
pub fn eastern_midnight_at_or_before(ns: u64) -> u64 {
    let day = (ns / DAY_NS) as i64;
    let m = midnight_of_day(day);
    if m <= ns {
        m
    } else if day > 0 {
        midnight_of_day(day - 1)
    } else {
        0
    }
}

/// The New York date ("YYYY-MM-DD") at `ns` (UNIX nanoseconds).
pub fn eastern_date(ns: u64) -> String {
    let m = eastern_midnight_at_or_before(ns);
    let (y, mo, d) = civil_from_days((m / DAY_NS) as i64);
    format!("{y:04}-{mo:02}-{d:02}")
}

/// Where ITCH times count from: `date` in a run config, `--date`, Python's `date=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionDay {
    /// The midnight (UNIX ns) of a trading day given by name ([`midnight_eastern_ns`]).
    Midnight(u64),
    /// The day the capture was received on (`"auto"`): the latest New York midnight at or
    /// before the first packet's receive time less its first message's ITCH time, with an
    /// hour's leeway for the capture's clock. Input without receive times (a BinaryFILE)
    /// has no day to tell: its times count from 1970-01-01.
    FromCapture,
}

impl From<u64> for SessionDay {
    fn from(midnight_ns: u64) -> SessionDay {
        SessionDay::Midnight(midnight_ns)
    }
}

impl SessionDay {
    /// `"auto"` or a date ("YYYY-MM-DD").
    pub fn parse(text: &str) -> Result<SessionDay, BadText> {
        if text == "auto" {
            return Ok(SessionDay::FromCapture);
        }
        midnight_eastern_ns(text).map(SessionDay::Midnight).map_err(|e| BadText { expected: "YYYY-MM-DD or auto", ..e })
    }
}

/// The leeway [`SessionDay::FromCapture`] gives a capture's clock: one running up to this
/// much behind the exchange's still puts the day right.
pub const CLOCK_LEEWAY_NS: u64 = 3_600 * 1_000_000_000;

/// The midnight a packet received at `arrival_ns` implies when its first message was sent
/// `itch_ts` ns after its day's midnight ([`SessionDay::FromCapture`]), and how long after
/// its message's time the packet came (its lag: about the feed's latency on a live
/// capture; negative when the capture's clock is behind); `None` when `arrival_ns` is no
/// clock time (under a day: a BinaryFILE's frames carry the ITCH time itself).
pub fn implied_midnight(arrival_ns: u64, itch_ts: u64) -> Option<(u64, i64)> {
    if arrival_ns < DAY_NS {
        return None;
    }
    let sent_midnight = arrival_ns.saturating_sub(itch_ts);
    let m = eastern_midnight_at_or_before(sent_midnight + CLOCK_LEEWAY_NS);
    Some((m, sent_midnight as i64 - m as i64))
}

/// Midnight in New York on `date` ("YYYY-MM-DD") as UNIX nanoseconds: ITCH timestamps
/// count from it. US daylight saving time (second Sunday of March to first Sunday of
/// November, since 2007) is applied.
pub fn midnight_eastern_ns(date: &str) -> Result<u64, BadText> {
    let bad = || BadText { what: "session date", text: date.into(), expected: "YYYY-MM-DD" };
    let mut it = date.split('-');
    let (y, m, d) = (it.next().ok_or_else(bad)?, it.next().ok_or_else(bad)?, it.next().ok_or_else(bad)?);
    if it.next().is_some() {
        return Err(bad());
    }
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let days = days_from_civil(y, m, d);
    // A day the month does not have ("2026-02-30") would be another day.
    if civil_from_days(days) != (y, m, d) {
        return Err(bad());
    }
    Ok(midnight_of_day(days))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::itch50::*;

    #[test]
    fn the_day_is_told_from_the_capture() {
        let nov20 = midnight_eastern_ns("2026-11-20").unwrap();
        let jul01 = midnight_eastern_ns("2024-07-01").unwrap();
        let h = 3_600_000_000_000u64;
        // A packet 40 us after its first message's time, at 09:30 and at 23:59 New York time.
        for (m, t) in [(nov20, 9 * h + h / 2), (nov20, 24 * h - 60_000_000_000), (jul01, 9 * h + h / 2)] {
            assert_eq!(implied_midnight(m + t + 40_000, t), Some((m, 40_000)));
            assert_eq!(eastern_date(m + t), if m == nov20 { "2026-11-20" } else { "2024-07-01" });
        }
        // A capture clock 10 minutes behind the exchange's still finds the day.
        assert_eq!(implied_midnight(nov20 + 4 * h - 600_000_000_000, 4 * h), Some((nov20, -600_000_000_000)));
        // A replay at 20:00 of messages sent at 09:30: the day it was received, 10.5 h late.
        assert_eq!(implied_midnight(nov20 + 20 * h, 9 * h + h / 2), Some((nov20, (10 * h + h / 2) as i64)));
        // A BinaryFILE's frames carry the ITCH time, no clock: no day to tell.
        assert_eq!(implied_midnight(9 * h, 9 * h), None);
        // The nights of the clock changes: 2026-03-08 and 2026-11-01 are the Sundays.
        for d in ["2026-03-07", "2026-03-08", "2026-03-09", "2026-10-31", "2026-11-01", "2026-11-02"] {
            let m = midnight_eastern_ns(d).unwrap();
            assert_eq!(eastern_midnight_at_or_before(m), m, "{d}");
            // 2026-03-08 has 23 hours, 2026-11-01 25.
            assert_eq!(eastern_midnight_at_or_before(m + 22 * h), m, "{d}");
            assert_eq!(eastern_date(m + 1), d);
            assert!(eastern_midnight_at_or_before(m - 1) < m);
        }
        for days in [0, 1, 59, 60, 365, 10_957, 20_000, 20_777, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(SessionDay::parse("auto").unwrap(), SessionDay::FromCapture);
        assert_eq!(SessionDay::parse("2026-11-20").unwrap(), SessionDay::Midnight(nov20));
        let e = SessionDay::parse("20261120").unwrap_err().to_string();
        assert!(e.contains("YYYY-MM-DD or auto"), "{e}");
        assert!(midnight_eastern_ns("2026-02-30").is_err());
    }

    #[test]
    fn midnight_follows_daylight_saving() {
        // 2019-12-30 00:00 EST = 05:00 UTC; 2024-07-01 00:00 EDT = 04:00 UTC.
        assert_eq!(midnight_eastern_ns("2019-12-30").unwrap(), 1_577_682_000 * 1_000_000_000);
        assert_eq!(midnight_eastern_ns("2024-07-01").unwrap(), 1_719_806_400 * 1_000_000_000);
        assert!(midnight_eastern_ns("2024-13-01").unwrap_err().to_string().contains("YYYY-MM-DD"));
    }

    #[test]
    fn adds_and_replaces_map() {
        let a = Message::AddOrder(AddOrder {
            stock_locate: 3,
            timestamp: 10,
            order_reference_number: 77,
            buy_sell_indicator: b'S',
            shares: 200,
            stock: stock("ABC"),
            price: 123_4500,
            ..Default::default()
        });
        let e = normalize(&a, 1, 2, 1_000);
        assert_eq!(
            (e.action, e.side, e.price, e.size, e.order_id),
            (EventAction::Add, Side::Ask, 123_450_000_000, 200, 77)
        );
        assert_eq!((e.ts_event, e.instrument_id, e.msg_type), (1_010, 3, b'A'));
        let u = Message::OrderReplace(OrderReplace {
            original_order_reference_number: 77,
            new_order_reference_number: 78,
            shares: 5,
            price: 1,
            ..Default::default()
        });
        let e = normalize(&u, 0, 0, 0);
        assert_eq!((e.action, e.order_id, e.aux, e.price), (EventAction::Modify, 78, 77, 100_000));
        let mut d = SymbolDirectory::new();
        assert!(d.learn(&a));
        assert!(!d.learn(&a));
        assert_eq!(d.symbol(3), Some("ABC"));
        assert_eq!(d.id("ABC"), Some(3));
    }
}

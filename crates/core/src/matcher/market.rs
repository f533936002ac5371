//! Matcher events from normalized market events: the state of each symbol on each venue
//! (best bid and offer, last trade, volume), kept up to date event by event, turned into
//! the attribute values strategies name.
//!
//! Attributes of an event (absent when unknown: a predicate on them is then false):
//!
//! | attribute | type | value |
//! |---|---|---|
//! | `symbol`, `venue` | string | the event's symbol and venue |
//! | `action`, `side` | string | `add`, `execute`, `trade`...; `bid`, `ask` or `none` |
//! | `price`, `size` | number | the event's own price and size (when it has them) |
//! | `bid`, `ask`, `bid_size`, `ask_size` | number | the best bid and offer on the event's venue, after the event |
//! | `spread`, `mid` | number | `ask - bid` and `(bid + ask) / 2`, when both sides are quoted |
//! | `last`, `last_size`, `volume` | number | the last printable trade (execute or trade) on the venue, and the shares traded so far |
//! | `V_bid`, `V_ask`, `V_bid_size`, `V_ask_size`, `V_spread`, `V_last`, `V_volume` | number | the same of venue `V` (its name in lower case), for every venue of the symbol |
//!
//! So `tsx_ask < nyse_bid` compares Toronto's offer with New York's bid for the event's
//! symbol, whichever venue the event came from. Numbers are exact: prices in 1e-9 units as
//! in [`crate::event`], sizes as whole numbers. Promises: no allocation per event once a
//! symbol has been seen; the event is built from the state after the update, so a strategy
//! sees the book the event left behind.

use crate::error::InvalidConfig;
use std::collections::HashMap;

use super::lang::{AttrId, MatchEvent, Schema, Type, Value, SCALE};
use super::UNKNOWN_SYM;
use crate::event::{flags, Bbo, Event, EventAction};

/// What a venue knows of one symbol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quote {
    pub bbo: Bbo,
    /// Price of the last printable trade (0 with `trades` 0).
    pub last: i64,
    pub last_size: u64,
    pub volume: u64,
    pub trades: u64,
    /// Has the venue said anything of the symbol yet?
    pub seen: bool,
}

/// A symbol's state on every venue.
#[derive(Debug, Clone)]
struct SymbolState {
    name: Value,
    quotes: Vec<Quote>,
}

/// The attribute ids (in the matcher's schema) of one venue's fields.
#[derive(Debug, Clone, Copy, Default)]
struct VenueAttrs {
    name: Option<Value>,
    bid: Option<AttrId>,
    ask: Option<AttrId>,
    bid_size: Option<AttrId>,
    ask_size: Option<AttrId>,
    spread: Option<AttrId>,
    last: Option<AttrId>,
    volume: Option<AttrId>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Attrs {
    symbol: Option<AttrId>,
    venue: Option<AttrId>,
    action: Option<AttrId>,
    side: Option<AttrId>,
    price: Option<AttrId>,
    size: Option<AttrId>,
    bid: Option<AttrId>,
    ask: Option<AttrId>,
    bid_size: Option<AttrId>,
    ask_size: Option<AttrId>,
    spread: Option<AttrId>,
    mid: Option<AttrId>,
    last: Option<AttrId>,
    last_size: Option<AttrId>,
    volume: Option<AttrId>,
}

/// A symbol's place in [`MarketEvents`] (look it up once, keep it per instrument).
pub type SymbolKey = u32;

/// Builds a [`MatchEvent`] from each market event, keeping per-symbol, per-venue state.
#[derive(Debug, Clone)]
pub struct MarketEvents {
    venues: Vec<String>,
    attrs: Attrs,
    venue_attrs: Vec<VenueAttrs>,
    actions: [Option<Value>; 16],
    sides: [Option<Value>; 3],
    symbols: HashMap<String, SymbolKey>,
    states: Vec<SymbolState>,
    event: MatchEvent,
    attr_count: usize,
}

impl MarketEvents {
    /// State for the given venues (names as strategies write them, e.g. `["tsx", "nyse"]`),
    /// resolved against the schema the strategies were parsed with. An attribute that the
    /// strategies use with the wrong type (`bid = "x"`) is an error naming it.
    pub fn new(schema: &Schema, venues: &[&str]) -> Result<Self, InvalidConfig> {
        let mut m = MarketEvents {
            venues: venues.iter().map(|v| v.to_ascii_lowercase()).collect(),
            attrs: Attrs::default(),
            venue_attrs: Vec::new(),
            actions: [None; 16],
            sides: [None; 3],
            symbols: HashMap::new(),
            states: Vec::new(),
            event: MatchEvent::default(),
            attr_count: 0,
        };
        for (i, v) in m.venues.iter().enumerate() {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                let reason = format!("venue {:?}: a venue name is letters, digits and _", venues[i]);
                return Err(InvalidConfig::new("venue", reason));
            }
            if m.venues[..i].contains(v) {
                return Err(InvalidConfig::new("venue", format!("venue {v:?} is named twice")));
            }
        }
        m.refresh(schema)?;
        Ok(m)
    }

    /// The venues, in the order of their indexes.
    pub fn venues(&self) -> &[String] {
        &self.venues
    }

    /// Resolve attribute ids again (after strategies naming new attributes were parsed).
    pub fn refresh(&mut self, schema: &Schema) -> Result<(), InvalidConfig> {
        let want = |name: &str, t: Type| -> Result<Option<AttrId>, InvalidConfig> {
            let Some(a) = schema.attr_id(name) else { return Ok(None) };
            match schema.attr_type(a) {
                Some(have) if have != t => Err(InvalidConfig::new(
                    "strategies",
                    format!(
                        "the strategies use {name} as a {}, but market events give it as a {}",
                        type_name(have),
                        type_name(t)
                    ),
                )),
                _ => Ok(Some(a)),
            }
        };
        self.attrs = Attrs {
            symbol: want("symbol", Type::Str)?,
            venue: want("venue", Type::Str)?,
            action: want("action", Type::Str)?,
            side: want("side", Type::Str)?,
            price: want("price", Type::Num)?,
            size: want("size", Type::Num)?,
            bid: want("bid", Type::Num)?,
            ask: want("ask", Type::Num)?,
            bid_size: want("bid_size", Type::Num)?,
            ask_size: want("ask_size", Type::Num)?,
            spread: want("spread", Type::Num)?,
            mid: want("mid", Type::Num)?,
            last: want("last", Type::Num)?,
            last_size: want("last_size", Type::Num)?,
            volume: want("volume", Type::Num)?,
        };
        let sym = |s: &str| Some(Value::Sym(schema.sym_id(s).unwrap_or(UNKNOWN_SYM)));
        self.venue_attrs.clear();
        for v in &self.venues {
            let f = |field: &str| want(&format!("{v}_{field}"), Type::Num);
            self.venue_attrs.push(VenueAttrs {
                name: sym(v),
                bid: f("bid")?,
                ask: f("ask")?,
                bid_size: f("bid_size")?,
                ask_size: f("ask_size")?,
                spread: f("spread")?,
                last: f("last")?,
                volume: f("volume")?,
            });
        }
        for a in EventAction::ALL {
            self.actions[a.index()] = sym(a.as_str());
        }
        self.sides = [sym("none"), sym("bid"), sym("ask")];
        // Symbols are strings of the schema: their ids may have appeared since.
        let names: Vec<(String, SymbolKey)> = self.symbols.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (name, k) in names {
            self.states[k as usize].name = Value::Sym(schema.sym_id(&name).unwrap_or(UNKNOWN_SYM));
        }
        self.attr_count = schema.attrs();
        self.event = MatchEvent::new(self.attr_count);
        Ok(())
    }

    /// The key of `symbol` (learned on first use, with `schema` giving its string id).
    pub fn symbol(&mut self, schema: &Schema, symbol: &str) -> SymbolKey {
        if let Some(&k) = self.symbols.get(symbol) {
            return k;
        }
        let k = self.states.len() as SymbolKey;
        self.states.push(SymbolState {
            name: Value::Sym(schema.sym_id(symbol).unwrap_or(UNKNOWN_SYM)),
            quotes: vec![Quote::default(); self.venues.len()],
        });
        self.symbols.insert(symbol.to_string(), k);
        k
    }

    /// What `venue` knows of the symbol.
    pub fn quote(&self, symbol: SymbolKey, venue: usize) -> Option<&Quote> {
        self.states.get(symbol as usize)?.quotes.get(venue)
    }

    /// Take event `e` of `symbol` on venue index `venue`, with the venue's best bid and offer
    /// after it, and give the matcher event it makes.
    pub fn update(&mut self, symbol: SymbolKey, venue: usize, e: &Event, bbo: Bbo) -> &MatchEvent {
        let st = &mut self.states[symbol as usize];
        let q = &mut st.quotes[venue];
        q.seen = true;
        q.bbo = bbo;
        if matches!(e.action, EventAction::Execute | EventAction::Trade) && e.flags & flags::NON_PRINTABLE == 0 {
            q.last = e.price;
            q.last_size = u64::from(e.size);
            q.volume += u64::from(e.size);
            q.trades += 1;
        }
        let ev = &mut self.event;
        ev.values.iter_mut().for_each(|v| *v = None);
        let a = &self.attrs;
        let num = |n: i64| Some(Value::Num(i128::from(n)));
        let count = |n: u64| Some(Value::Num(i128::from(n) * SCALE));
        let mut put = |attr: Option<AttrId>, v: Option<Value>| {
            if let (Some(attr), Some(v)) = (attr, v) {
                ev.values[attr as usize] = Some(v);
            }
        };
        put(a.symbol, Some(st.name));
        put(a.venue, self.venue_attrs[venue].name);
        put(a.action, self.actions[e.action.index()]);
        put(a.side, self.sides[e.side as usize]);
        let priced = !matches!(e.action, EventAction::Status | EventAction::Clear | EventAction::Imbalance);
        if priced {
            put(a.price, num(e.price));
            put(a.size, count(u64::from(e.size)));
        }
        let q = &st.quotes[venue];
        let (bid, ask) = sides(&q.bbo);
        put(a.bid, bid.and_then(|_| num(q.bbo.bid_price)));
        put(a.ask, ask.and_then(|_| num(q.bbo.ask_price)));
        put(a.bid_size, bid.and_then(|_| count(q.bbo.bid_size)));
        put(a.ask_size, ask.and_then(|_| count(q.bbo.ask_size)));
        if let (Some(b), Some(k)) = (bid, ask) {
            put(a.spread, Some(Value::Num(k - b)));
            // Exact: a half unit of 1e-9 rounds toward minus infinity.
            put(a.mid, Some(Value::Num((b + k).div_euclid(2))));
        }
        if q.trades > 0 {
            put(a.last, num(q.last));
            put(a.last_size, count(q.last_size));
        }
        put(a.volume, count(q.volume));
        for (va, q) in self.venue_attrs.iter().zip(&st.quotes) {
            if !q.seen {
                continue;
            }
            let (bid, ask) = sides(&q.bbo);
            put(va.bid, bid.map(Value::Num));
            put(va.ask, ask.map(Value::Num));
            put(va.bid_size, bid.and_then(|_| count(q.bbo.bid_size)));
            put(va.ask_size, ask.and_then(|_| count(q.bbo.ask_size)));
            if let (Some(b), Some(k)) = (bid, ask) {
                put(va.spread, Some(Value::Num(k - b)));
            }
            if q.trades > 0 {
                put(va.last, num(q.last));
            }
            put(va.volume, count(q.volume));
        }
        &self.event
    }
}

/// The quoted sides of a BBO (a side with no size is empty).
fn sides(b: &Bbo) -> (Option<i128>, Option<i128>) {
    ((b.bid_size > 0).then_some(i128::from(b.bid_price)), (b.ask_size > 0).then_some(i128::from(b.ask_price)))
}

fn type_name(t: Type) -> &'static str {
    match t {
        Type::Str => "string",
        Type::Num => "number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Side;
    use crate::matcher::Matcher;

    fn ev(action: EventAction, side: Side, price: f64, size: u32) -> Event {
        Event { action, side, price: (price * 1e9).round() as i64, size, ..Default::default() }
    }
    fn bbo(bid: f64, bid_size: u64, ask: f64, ask_size: u64) -> Bbo {
        Bbo { bid_price: (bid * 1e9).round() as i64, ask_price: (ask * 1e9).round() as i64, bid_size, ask_size }
    }

    #[test]
    fn cross_venue_state_feeds_the_matcher() {
        let mut m = Matcher::new();
        for s in [
            "7: symbol = \"ABX\" and tsx_ask < nyse_bid and tsx_ask <= 40.04",
            "8: symbol in (\"AAPL\", \"MSFT\") and spread < 0.01 and last > 190",
            "9: action = \"trade\" and size >= 500 and venue = \"nyse\"",
            "10: mid > 40.015 and bid_size >= 300",
        ] {
            m.insert_text(s).unwrap();
        }
        let mut mk = MarketEvents::new(m.schema(), &["tsx", "NYSE"]).unwrap();
        let abx = mk.symbol(m.schema(), "ABX");
        let msft = mk.symbol(m.schema(), "MSFT");
        let mut out = Vec::new();
        // Toronto offers ABX at 40.03; New York has not quoted yet: no nyse_bid, no match.
        let e = mk.update(abx, 0, &ev(EventAction::Add, Side::Ask, 40.03, 100), bbo(40.00, 100, 40.03, 100)).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, Vec::<u64>::new());
        // New York bids 40.04 > Toronto's 40.03 offer: strategy 7 (and 10 on nyse's mid).
        let e = mk.update(abx, 1, &ev(EventAction::Add, Side::Bid, 40.04, 300), bbo(40.04, 300, 40.06, 200)).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![7, 10]);
        let x = m.explain(10, &e).unwrap();
        assert_eq!(x.first_failed, None);
        // A trade in New York of 500: 9 (7 still holds: the state has not changed).
        let e = mk.update(abx, 1, &ev(EventAction::Trade, Side::None, 40.05, 500), bbo(40.04, 300, 40.06, 200)).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![7, 9, 10]);
        assert_eq!(mk.quote(abx, 1).unwrap().volume, 500);
        // MSFT: spread 0.005 but no trade yet, then a trade above 190.
        let e = mk.update(msft, 0, &ev(EventAction::Add, Side::Bid, 190.0, 1), bbo(190.0, 1, 190.005, 1)).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, Vec::<u64>::new());
        let e = mk.update(msft, 0, &ev(EventAction::Execute, Side::Ask, 190.01, 1), bbo(190.0, 1, 190.005, 1)).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![8]);
        // The index agrees with brute force on these events.
        let mut bf = Vec::new();
        m.match_brute_force(&e, &mut bf);
        assert_eq!(out, bf);
    }

    #[test]
    fn wrong_types_and_bad_venues_are_refused() {
        let mut m = Matcher::new();
        m.insert_text("1: bid = \"x\"").unwrap();
        let err = MarketEvents::new(m.schema(), &["tsx"]).unwrap_err();
        assert_eq!(err.to_string(), "the strategies use bid as a string, but market events give it as a number");
        let mut m = Matcher::new();
        m.insert_text("1: tsx_last = \"x\"").unwrap();
        assert!(MarketEvents::new(m.schema(), &["tsx"]).unwrap_err().to_string().contains("tsx_last"));
        assert!(MarketEvents::new(m.schema(), &["a-b"]).unwrap_err().to_string().contains("letters, digits"));
        assert!(MarketEvents::new(m.schema(), &["x", "X"]).unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn non_printable_executions_do_not_set_last() {
        let mut m = Matcher::new();
        m.insert_text("1: last > 0").unwrap();
        let mut mk = MarketEvents::new(m.schema(), &["nasdaq"]).unwrap();
        let s = mk.symbol(m.schema(), "A");
        let mut x = ev(EventAction::Execute, Side::Bid, 10.0, 5);
        x.flags |= flags::NON_PRINTABLE;
        let e = mk.update(s, 0, &x, Bbo::default()).clone();
        let mut out = Vec::new();
        m.match_event(&e, &mut out);
        assert!(out.is_empty());
        x.flags = 0;
        let e = mk.update(s, 0, &x, Bbo::default()).clone();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![1]);
    }
}

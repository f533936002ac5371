//! Events as NautilusTrader's own data: order book deltas and trade ticks in the Parquet
//! schema its `ParquetDataCatalog` reads (NautilusTrader 1.221's, high-precision build: the
//! Linux wheels' default), so that `catalog.order_book_deltas()` and `catalog.trade_ticks()`
//! load what `tickplant export nautilus` wrote, and an L3 `OrderBook` fed the deltas ends
//! at tickplant's books. [`crate::export`] writes the files; this module maps the events
//! and writes one file.
//!
//! | event | deltas (action) | trade tick |
//! |---|---|---|
//! | add | `ADD` | |
//! | cancel | `UPDATE` to the shares left, `DELETE` when none are | |
//! | delete | `DELETE` | |
//! | execute | as cancel, of the shares executed | price, shares, the aggressor opposite the resting side; none for one not to be printed |
//! | modify (a replace, or NYSE's modify of the same id) | `DELETE` of the old order, `ADD` of the new (it loses its place, as in tickplant's books) | |
//! | trade (not on the book) | | price, shares, aggressor opposite the side given |
//! | clear | `CLEAR` | |
//! | status, imbalance, quote, gap, trusted | none (counted as left out) | |
//!
//! An event the books did not apply (flag `UNKNOWN_ORDER` or `REJECTED`) is left out too,
//! so that a book built from the deltas is tickplant's. Each event's last delta has
//! `F_LAST` (each event is a whole change of the book); an event of a stale book has DBN's
//! `MAYBE_BAD_BOOK` bit (4), as NautilusTrader passes Databento's flags on. `ts_init` is
//! the time the event could be handed on: the latest receive time so far (a packet held
//! for a gap is released when a later one arrives), or `ts_event` where the input has no
//! receive times; it never goes back, as the catalog requires. `trade_id` is the match
//! number, or the sequence number where there is none. Prices are NautilusTrader's raw
//! 128-bit values (1e-16 units: tickplant's 1e-9 times 10^7, exact), with each file's
//! `price_precision` the fewest decimals that write all its prices exactly; sizes whole
//! shares (`size_precision` 0).

use std::collections::HashMap;
use std::path::Path;

use parquet::data_type::{ByteArray, FixedLenByteArray};
use parquet::file::metadata::KeyValue;

use crate::columns::{write_columns, Values};
use tickplant_core::event::{flags, Event, EventAction, Side};

/// `BookAction`.
pub const ADD: u8 = 1;
pub const UPDATE: u8 = 2;
pub const DELETE: u8 = 3;
pub const CLEAR: u8 = 4;
/// `RecordFlag::F_LAST`.
pub const F_LAST: u8 = 1 << 7;
/// DBN's `MAYBE_BAD_BOOK`.
pub const MAYBE_BAD_BOOK: u8 = 1 << 2;

/// NautilusTrader's fixed-point scale in its high-precision build (`FIXED_SCALAR`, 1e16)
/// over tickplant's (1e9).
const PRICE_TO_RAW: i128 = 10_000_000;
const SIZE_TO_RAW: u128 = 10_000_000_000_000_000;

/// One `OrderBookDelta` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delta {
    pub action: u8,
    /// `OrderSide`: 0 none, 1 buy, 2 sell.
    pub side: u8,
    /// 1e-9 units.
    pub price: i64,
    pub size: u32,
    pub order_id: u64,
    pub flags: u8,
    pub sequence: u64,
    pub ts_event: u64,
    pub ts_init: u64,
}

/// One `TradeTick` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trade {
    pub price: i64,
    pub size: u32,
    /// `AggressorSide`: 0 none, 1 buyer, 2 seller.
    pub aggressor_side: u8,
    pub trade_id: String,
    pub ts_event: u64,
    pub ts_init: u64,
}

/// The rows of one instrument.
#[derive(Debug, Clone, Default)]
pub struct Rows {
    pub deltas: Vec<Delta>,
    pub trades: Vec<Trade>,
}

/// A resting order as the deltas left it.
#[derive(Debug, Clone, Copy)]
struct Order {
    instrument: u32,
    side: u8,
    price: i64,
    shares: u32,
}

/// The mapping of events to rows, with what it needs to remember: each live order (a
/// cancel's `UPDATE` gives the shares left), and the latest receive time.
#[derive(Debug, Default)]
pub struct ToNautilus {
    orders: HashMap<u64, Order>,
    ts_init: u64,
}

fn order_side(s: Side) -> u8 {
    match s {
        Side::Bid => 1,
        Side::Ask => 2,
        Side::None => 0,
    }
}

impl ToNautilus {
    /// Take `e`'s receive time; the `ts_init` of its rows.
    pub fn advance(&mut self, e: &Event) -> u64 {
        let t = if e.ts_recv != 0 { e.ts_recv } else { e.ts_event };
        self.ts_init = self.ts_init.max(t);
        self.ts_init
    }

    /// The rows of one event, appended to `out`; how many (0: left out).
    pub fn map(&mut self, e: &Event, out: &mut Rows) -> usize {
        self.advance(e);
        if e.flags & (flags::UNKNOWN_ORDER | flags::REJECTED) != 0 {
            return 0;
        }
        let (d0, t0) = (out.deltas.len(), out.trades.len());
        let flags = if e.flags & flags::BOOK_STALE != 0 { MAYBE_BAD_BOOK } else { 0 };
        let delta = |action, o: &Order, order_id, size| Delta {
            action,
            side: o.side,
            price: o.price,
            size,
            order_id,
            flags,
            sequence: e.sequence,
            ts_event: e.ts_event,
            ts_init: self.ts_init,
        };
        match e.action {
            EventAction::Add => {
                let o = Order { instrument: e.instrument_id, side: order_side(e.side), price: e.price, shares: e.size };
                out.deltas.push(delta(ADD, &o, e.order_id, e.size));
                self.orders.insert(e.order_id, o);
            }
            EventAction::Cancel | EventAction::Delete | EventAction::Execute => {
                let Some(o) = self.orders.get_mut(&e.order_id) else { return 0 };
                let resting = *o;
                // Not to be printed (ITCH's printable N): on the book, not on the tape.
                if e.action == EventAction::Execute && e.flags & flags::NON_PRINTABLE == 0 {
                    out.trades.push(Trade {
                        price: if e.price != 0 { e.price } else { resting.price },
                        size: e.size,
                        aggressor_side: aggressor(resting.side),
                        trade_id: trade_id(e),
                        ts_event: e.ts_event,
                        ts_init: self.ts_init,
                    });
                }
                let left = if e.action == EventAction::Delete { 0 } else { o.shares.saturating_sub(e.size) };
                o.shares = left;
                if left == 0 {
                    self.orders.remove(&e.order_id);
                    out.deltas.push(delta(DELETE, &resting, e.order_id, 0));
                } else {
                    out.deltas.push(delta(UPDATE, &resting, e.order_id, left));
                }
            }
            EventAction::Modify => {
                let Some(old) = self.orders.remove(&e.aux) else { return 0 };
                out.deltas.push(delta(DELETE, &old, e.aux, 0));
                let o = Order { price: e.price, shares: e.size, ..old };
                out.deltas.push(delta(ADD, &o, e.order_id, e.size));
                self.orders.insert(e.order_id, o);
            }
            EventAction::Trade => out.trades.push(Trade {
                price: e.price,
                size: e.size,
                aggressor_side: aggressor(order_side(e.side)),
                trade_id: trade_id(e),
                ts_event: e.ts_event,
                ts_init: self.ts_init,
            }),
            EventAction::Clear => {
                let none = Order { instrument: e.instrument_id, side: 0, price: 0, shares: 0 };
                out.deltas.push(delta(CLEAR, &none, 0, 0));
                self.orders.retain(|_, o| o.instrument != e.instrument_id);
            }
            EventAction::Status
            | EventAction::Imbalance
            | EventAction::Quote
            | EventAction::Gap
            | EventAction::Trusted => {}
        }
        if out.deltas.len() > d0 {
            out.deltas.last_mut().expect("pushed").flags |= F_LAST;
        }
        out.deltas.len() - d0 + out.trades.len() - t0
    }
}

/// The aggressor of a trade against a resting order of `side`: a resting bid was sold to.
fn aggressor(resting: u8) -> u8 {
    match resting {
        1 => 2,
        2 => 1,
        _ => 0,
    }
}

fn trade_id(e: &Event) -> String {
    if e.aux != 0 {
        e.aux.to_string()
    } else {
        e.sequence.to_string()
    }
}

/// The fewest decimals (0 to 9) that write every price exactly.
pub fn precision(prices: impl IntoIterator<Item = i64>) -> u8 {
    let mut p = 0u8;
    for x in prices {
        while p < 9 && x % 10i64.pow(u32::from(9 - p)) != 0 {
            p += 1;
        }
    }
    p
}

fn raw_price(p: i64) -> FixedLenByteArray {
    FixedLenByteArray::from((i128::from(p) * PRICE_TO_RAW).to_le_bytes().to_vec())
}

fn raw_size(s: u32) -> FixedLenByteArray {
    FixedLenByteArray::from((u128::from(s) * SIZE_TO_RAW).to_le_bytes().to_vec())
}

/// The Parquet schema of `OrderBookDelta` (its Arrow fields: `UInt8`, `FixedSizeBinary(16)`,
/// `UInt64`, in this order).
pub const DELTA_SCHEMA: &str = "message order_book_delta {
    REQUIRED INT32 action (INTEGER(8,false));
    REQUIRED INT32 side (INTEGER(8,false));
    REQUIRED FIXED_LEN_BYTE_ARRAY (16) price;
    REQUIRED FIXED_LEN_BYTE_ARRAY (16) size;
    REQUIRED INT64 order_id (INTEGER(64,false));
    REQUIRED INT32 flags (INTEGER(8,false));
    REQUIRED INT64 sequence (INTEGER(64,false));
    REQUIRED INT64 ts_event (INTEGER(64,false));
    REQUIRED INT64 ts_init (INTEGER(64,false));
}";

/// The Parquet schema of `TradeTick`.
pub const TRADE_SCHEMA: &str = "message trade_tick {
    REQUIRED FIXED_LEN_BYTE_ARRAY (16) price;
    REQUIRED FIXED_LEN_BYTE_ARRAY (16) size;
    REQUIRED INT32 aggressor_side (INTEGER(8,false));
    REQUIRED BYTE_ARRAY trade_id (STRING);
    REQUIRED INT64 ts_event (INTEGER(64,false));
    REQUIRED INT64 ts_init (INTEGER(64,false));
}";

/// Write one file of `instrument`: `columns` in the schema's order, with the metadata the
/// catalog reads back (`instrument_id`, `price_precision`, `size_precision`).
fn write(
    path: &Path,
    schema: &str,
    instrument: &str,
    precision: u8,
    columns: Vec<Values>,
) -> parquet::errors::Result<()> {
    let meta = vec![
        KeyValue::new("instrument_id".into(), instrument.to_string()),
        KeyValue::new("price_precision".into(), precision.to_string()),
        KeyValue::new("size_precision".into(), "0".to_string()),
    ];
    write_columns(path, schema, meta, columns)
}

/// Write `deltas` of `instrument` (`SYMBOL.VENUE`) as one `OrderBookDelta` file.
pub fn write_deltas(path: &Path, instrument: &str, deltas: &[Delta]) -> parquet::errors::Result<()> {
    let u8s = |f: fn(&Delta) -> u8| Values::I32(deltas.iter().map(|d| i32::from(f(d))).collect());
    let u64s = |f: fn(&Delta) -> u64| Values::I64(deltas.iter().map(|d| f(d) as i64).collect());
    let columns = vec![
        u8s(|d| d.action),
        u8s(|d| d.side),
        Values::Fixed(deltas.iter().map(|d| raw_price(d.price)).collect()),
        Values::Fixed(deltas.iter().map(|d| raw_size(d.size)).collect()),
        u64s(|d| d.order_id),
        u8s(|d| d.flags),
        u64s(|d| d.sequence),
        u64s(|d| d.ts_event),
        u64s(|d| d.ts_init),
    ];
    write(path, DELTA_SCHEMA, instrument, precision(deltas.iter().map(|d| d.price)), columns)
}

/// Write `trades` of `instrument` as one `TradeTick` file.
pub fn write_trades(path: &Path, instrument: &str, trades: &[Trade]) -> parquet::errors::Result<()> {
    let columns = vec![
        Values::Fixed(trades.iter().map(|t| raw_price(t.price)).collect()),
        Values::Fixed(trades.iter().map(|t| raw_size(t.size)).collect()),
        Values::I32(trades.iter().map(|t| i32::from(t.aggressor_side)).collect()),
        Values::Bytes(trades.iter().map(|t| ByteArray::from(t.trade_id.as_str())).collect()),
        Values::I64(trades.iter().map(|t| t.ts_event as i64).collect()),
        Values::I64(trades.iter().map(|t| t.ts_init as i64).collect()),
    ];
    write(path, TRADE_SCHEMA, instrument, precision(trades.iter().map(|t| t.price)), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(action: EventAction, id: u64, side: Side, price: i64, size: u32) -> Event {
        Event {
            action,
            order_id: id,
            side,
            price,
            size,
            instrument_id: 7,
            ts_recv: 10,
            ts_event: 5,
            ..Event::default()
        }
    }

    #[test]
    fn events_become_the_deltas_an_l3_book_needs() {
        let mut m = ToNautilus::default();
        let mut r = Rows::default();
        assert_eq!(m.map(&ev(EventAction::Add, 1, Side::Bid, 10_010_000_000, 300), &mut r), 1);
        assert_eq!(m.map(&ev(EventAction::Cancel, 1, Side::Bid, 10_010_000_000, 100), &mut r), 1);
        assert_eq!(m.map(&Event { aux: 99, ..ev(EventAction::Execute, 1, Side::Bid, 0, 50) }, &mut r), 2);
        let modify = Event { aux: 1, ..ev(EventAction::Modify, 2, Side::None, 10_000_000_000, 40) };
        assert_eq!(m.map(&modify, &mut r), 2);
        assert_eq!(m.map(&ev(EventAction::Execute, 2, Side::Bid, 10_000_000_000, 40), &mut r), 2);
        assert_eq!(m.map(&ev(EventAction::Cancel, 2, Side::Bid, 0, 1), &mut r), 0, "an order no longer there");
        // Not to be printed: the book changes, the tape does not.
        assert_eq!(m.map(&ev(EventAction::Add, 4, Side::Ask, 10_020_000_000, 10), &mut r), 1);
        let quiet = Event { flags: flags::NON_PRINTABLE, ..ev(EventAction::Execute, 4, Side::Ask, 10_020_000_000, 10) };
        assert_eq!(m.map(&quiet, &mut r), 1);
        let unknown = Event { flags: flags::UNKNOWN_ORDER, ..ev(EventAction::Delete, 3, Side::Ask, 0, 0) };
        assert_eq!(m.map(&unknown, &mut r), 0);
        assert_eq!(m.map(&ev(EventAction::Status, 0, Side::None, 0, 0), &mut r), 0);
        let got: Vec<(u8, u8, i64, u32, u64, u8)> =
            r.deltas.iter().map(|d| (d.action, d.side, d.price, d.size, d.order_id, d.flags)).collect();
        assert_eq!(
            got,
            [
                (ADD, 1, 10_010_000_000, 300, 1, F_LAST),
                (UPDATE, 1, 10_010_000_000, 200, 1, F_LAST),
                (UPDATE, 1, 10_010_000_000, 150, 1, F_LAST),
                (DELETE, 1, 10_010_000_000, 0, 1, 0),
                (ADD, 1, 10_000_000_000, 40, 2, F_LAST),
                (DELETE, 1, 10_000_000_000, 0, 2, F_LAST),
                (ADD, 2, 10_020_000_000, 10, 4, F_LAST),
                (DELETE, 2, 10_020_000_000, 0, 4, F_LAST),
            ]
        );
        // The first execute had no price of its own: the resting order's; a resting bid
        // was sold to.
        let t: Vec<(i64, u32, u8, &str)> =
            r.trades.iter().map(|t| (t.price, t.size, t.aggressor_side, t.trade_id.as_str())).collect();
        assert_eq!(t, [(10_010_000_000, 50, 2, "99"), (10_000_000_000, 40, 2, "0")]);
    }

    #[test]
    fn ts_init_never_goes_back() {
        let mut m = ToNautilus::default();
        let mut r = Rows::default();
        for (recv, event) in [(100, 1), (90, 2), (0, 300), (120, 4)] {
            m.map(
                &Event { ts_recv: recv, ts_event: event, ..ev(EventAction::Add, recv + event, Side::Ask, 1, 1) },
                &mut r,
            );
        }
        let t: Vec<u64> = r.deltas.iter().map(|d| d.ts_init).collect();
        assert_eq!(t, [100, 100, 300, 300]);
    }

    #[test]
    fn precision_is_the_fewest_exact_decimals() {
        assert_eq!(precision([]), 0);
        assert_eq!(precision([5_000_000_000, -2_000_000_000]), 0);
        assert_eq!(precision([10_010_000_000, 1_500_000_000]), 2);
        assert_eq!(precision([10_000_100_000]), 4);
        assert_eq!(precision([1]), 9);
    }
}

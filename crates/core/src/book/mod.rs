//! Full-depth order books: every resting order by id, aggregated into price levels per
//! instrument, with best bid and offer and depth N.
//!
//! Promises:
//! * Adds, executes, partial cancels, deletes and replaces follow ITCH 5.0: an execute or
//!   cancel takes shares off the order (it leaves the book at zero); a delete removes what
//!   is left; a replace removes the old order and adds the new id on the same side and
//!   instrument at the new price and size. Trades and other events do not touch the book.
//! * An event that names an unknown order, reuses a live id, or takes more shares than the
//!   order has is counted in [`BookStats`] and flagged on the event; it never panics and
//!   never leaves a level that disagrees with its orders.
//! * Memory is bounded: the order table has a fixed capacity chosen at start-up
//!   (`max_orders`), allocated once; an add beyond it is rejected and counted. Instruments
//!   are bounded by `max_instruments`.
//! * A gap marks every book stale ([`Books::mark_all_stale`]): ITCH carries no snapshots, so
//!   an order added or changed in lost messages can stay invisible all day. A stale book
//!   stays stale until the caller recovers it ([`Books::clear_stale`], e.g. after a snapshot
//!   or a new day); every event of a stale book carries [`flags::BOOK_STALE`].
//!
//! It does not keep the time priority of orders within a level (levels are aggregates).
//!
//! # Modules
//! This file holds [`Books`] (the events applied, the stale marks, the checks); `side` one
//! side's ladder and overflow and the [`Book`] of both; `orders` the table of live orders.

mod orders;
mod side;

pub(crate) use orders::prefetch;
use orders::*;
pub use side::*;

use serde::{Deserialize, Serialize};

use crate::error::{InvalidConfig, Unbalanced};
use crate::event::{flags, Event, EventAction, Side};

/// Sizes fixed at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BookConfig {
    /// Live orders the table holds at most (all instruments together; at most
    /// [`MAX_ORDERS`]).
    pub max_orders: usize,
    /// Highest instrument id + 1 (ITCH stock locates are below 65,536; at most
    /// [`MAX_INSTRUMENTS`]).
    pub max_instruments: usize,
    /// The price grid (1e-9 units) of the books' price ladders: one cent by default, the
    /// US equity tick above $1. Prices off the grid are still kept exactly, in a slower
    /// overflow list; a finer grid covers a narrower window around the first price.
    pub tick: i64,
}

impl BookConfig {
    /// One cent in 1e-9 units.
    pub const CENT: i64 = 10_000_000;

    /// Check the sizes; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.max_orders == 0 {
            return Err(InvalidConfig::new("book.max-orders", "book.max-orders must be at least 1"));
        }
        if self.max_orders > MAX_ORDERS {
            return Err(InvalidConfig::new(
                "book.max-orders",
                format!("book.max-orders must be at most {MAX_ORDERS}, not {}", self.max_orders),
            ));
        }
        if self.max_instruments == 0 || self.max_instruments > MAX_INSTRUMENTS {
            return Err(InvalidConfig::new(
                "book.max-instruments",
                format!("book.max-instruments must be between 1 and {MAX_INSTRUMENTS}, not {}", self.max_instruments),
            ));
        }
        if self.tick <= 0 || self.tick > 1_000_000_000_000 {
            return Err(InvalidConfig::new(
                "book.tick",
                format!("book.tick must be between 1 and 10^12 (1e-9 units), not {}", self.tick),
            ));
        }
        Ok(())
    }
}

impl Default for BookConfig {
    fn default() -> Self {
        BookConfig { max_orders: 1 << 20, max_instruments: 1 << 16, tick: BookConfig::CENT }
    }
}

/// One price level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    /// Price in 1e-9 units.
    pub price: i64,
    pub shares: u64,
    pub orders: u32,
}

/// Counters of what the books did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BookStats {
    /// Events that changed a book.
    pub applied: u64,
    /// Events that do not touch a book (trades, status...).
    pub ignored: u64,
    /// Executes, cancels, deletes and replaces of an order the book does not know.
    pub unknown_order: u64,
    /// Adds (or replaces) whose new id is already live.
    pub duplicate_order: u64,
    /// Adds rejected because the order table is full.
    pub table_full: u64,
    /// Adds rejected because the instrument id is not below `max_instruments`.
    pub bad_instrument: u64,
    /// Executes or cancels of more shares than the order had (the order is removed).
    pub overfill: u64,
    /// Gaps that marked the books stale.
    pub gaps: u64,
}

impl BookStats {
    /// Events seen: each ends in exactly one of these outcomes.
    pub fn total(&self) -> u64 {
        self.applied + self.ignored + self.unknown_order + self.duplicate_order + self.table_full + self.bad_instrument
    }
}

/// The most live orders a table may hold: a ladder slot counts a level's orders in 31 bits
/// (its top bit marks a level of more than `u32::MAX` shares). A table this large would take 64 GB.
pub const MAX_ORDERS: usize = 1 << 30;

/// The most instruments the books hold: an order's table entry keeps its instrument in 18
/// bits (see `Order`).
pub const MAX_INSTRUMENTS: usize = 1 << 18;

/// The books of all instruments and the table of live orders.
#[derive(Debug)]
pub struct Books {
    cfg: BookConfig,
    table: OrderTable,
    /// Order id 0 (which the table uses to mark free slots), and its price when its level
    /// is in the overflow list.
    zero: Option<Order>,
    zero_price: i64,
    books: Vec<Book>,
    stats: BookStats,
    all_stale: bool,
}

enum Found {
    Slot(usize),
    Zero,
}

impl Books {
    pub fn new(cfg: BookConfig) -> Self {
        Self::with_table_advice(cfg, |_, _| {})
    }
    /// [`Books::new`], with `advise` shown the order table's memory (its address and length
    /// in bytes) before anything is written there: the runtime asks the OS to back it with
    /// huge pages. A day's live orders are spread over a table of `2 * max_orders` slots
    /// (80 MB for a million), where 4 KB pages cost a page walk on most lookups.
    pub fn with_table_advice(cfg: BookConfig, advise: impl FnOnce(*const u8, usize)) -> Self {
        // An order keeps its instrument in 18 bits: past them, adds are refused (counted).
        let cfg = BookConfig { max_instruments: cfg.max_instruments.min(MAX_INSTRUMENTS), ..cfg };
        Books {
            cfg,
            table: OrderTable::new(cfg.max_orders, advise),
            zero: None,
            zero_price: 0,
            books: Vec::new(),
            stats: BookStats::default(),
            all_stale: false,
        }
    }
    pub fn config(&self) -> &BookConfig {
        &self.cfg
    }
    pub fn stats(&self) -> &BookStats {
        &self.stats
    }
    /// Live orders, all instruments.
    pub fn live_orders(&self) -> usize {
        self.table.len + usize::from(self.zero.is_some())
    }
    pub fn book(&self, instrument: u32) -> Option<&Book> {
        self.books.get(instrument as usize)
    }
    /// An instrument's best bid and offer (zeros on an empty side or an unknown book).
    pub fn bbo(&self, instrument: u32) -> crate::event::Bbo {
        self.book(instrument).map_or(crate::event::Bbo::default(), |b| {
            let (bid, ask) = (b.best_bid(), b.best_ask());
            crate::event::Bbo {
                bid_price: bid.map_or(0, |l| l.price),
                ask_price: ask.map_or(0, |l| l.price),
                bid_size: bid.map_or(0, |l| l.shares),
                ask_size: ask.map_or(0, |l| l.shares),
            }
        })
    }
    /// Every instrument whose book holds orders, by id.
    pub fn instruments(&self) -> impl Iterator<Item = (u32, &Book)> {
        self.books.iter().enumerate().filter(|(_, b)| !b.is_empty()).map(|(i, b)| (i as u32, b))
    }
    /// A gap: every book, and every book created after it, is stale until recovered.
    pub fn mark_all_stale(&mut self) {
        self.stats.gaps += 1;
        self.all_stale = true;
        for b in &mut self.books {
            b.stale = true;
        }
    }
    /// The caller recovered the books (from a snapshot or a fresh day): trust them again.
    pub fn clear_stale(&mut self) {
        self.all_stale = false;
        for b in &mut self.books {
            b.stale = false;
        }
    }
    /// Remove every order of one instrument and trust its book again (a feed's symbol
    /// clear, before a refresh rebuilds it); returns the orders removed. After a gap the
    /// other books stay stale (instruments first seen later are not marked). It scans the whole
    /// order table (`max-orders` slots): for the rare clear, never the per-message path.
    pub fn clear_instrument(&mut self, instrument: u32) -> usize {
        let mut ids: Vec<u64> =
            self.table.slots.iter().filter(|o| o.id != 0 && o.instrument() == instrument).map(|o| o.id).collect();
        if self.zero.as_ref().is_some_and(|o| o.instrument() == instrument) {
            ids.push(0);
        }
        for &id in &ids {
            if let Some(f) = self.find(id) {
                let o = self.resting_at(&f);
                self.remove(f, &o);
            }
        }
        // A gap had marked every book stale: the others stay so, each on its own mark.
        if self.all_stale {
            self.all_stale = false;
            for b in &mut self.books {
                b.stale = true;
            }
        }
        if let Some(b) = self.books.get_mut(instrument as usize) {
            b.stale = false;
        }
        ids.len()
    }
    /// Forget every order and level, and trust the books again: a snapshot is about to
    /// rebuild them. The counters go on. It writes the whole order table (`max-orders`
    /// slots): for the rare recovery, never the per-message path.
    pub fn reset(&mut self) {
        self.table.slots.fill(Order::default());
        self.table.len = 0;
        self.zero = None;
        self.zero_price = 0;
        self.books.clear();
        self.all_stale = false;
    }
    pub fn any_stale(&self) -> bool {
        self.all_stale || self.books.iter().any(|b| b.stale)
    }

    #[inline]
    fn find(&self, id: u64) -> Option<Found> {
        if id == 0 {
            return self.zero.is_some().then_some(Found::Zero);
        }
        self.table.find(id).map(Found::Slot)
    }
    #[inline]
    fn get(&mut self, f: &Found) -> &mut Order {
        match *f {
            Found::Slot(i) => &mut self.table.slots[i],
            Found::Zero => self.zero.as_mut().expect("found"),
        }
    }
    #[inline]
    fn forget(&mut self, f: Found) {
        match f {
            Found::Slot(i) => self.table.remove_at(i),
            Found::Zero => self.zero = None,
        }
    }

    #[inline]
    fn book_mut(&mut self, instrument: u32) -> Option<&mut Book> {
        let i = instrument as usize;
        if i >= self.books.len() {
            if i >= self.cfg.max_instruments {
                return None;
            }
            let stale = self.all_stale;
            let tick = self.cfg.tick;
            self.books.resize_with(i + 1, || Book::new(tick, stale));
        }
        Some(&mut self.books[i])
    }

    /// The order found at `f`, as the table keeps it.
    #[inline(always)]
    fn order_at(&self, f: &Found) -> Order {
        match *f {
            Found::Slot(i) => self.table.slots[i],
            Found::Zero => self.zero.expect("found"),
        }
    }

    /// The order found at `f`, unpacked (its book must exist: it does for every live order).
    #[inline(always)]
    fn resting_at(&self, f: &Found) -> Resting {
        let o = self.order_at(f);
        let (instrument, side, slot) = (o.instrument(), o.side(), o.slot());
        let price = if slot == OVERFLOW {
            // Read only here: the array is written for these orders alone.
            match *f {
                Found::Slot(i) => self.table.prices[i],
                Found::Zero => self.zero_price,
            }
        } else {
            let b = &self.books[instrument as usize];
            let s = if side == Side::Bid { &b.bids } else { &b.asks };
            s.price_at(slot, b.tick)
        };
        Resting { id: o.id, price, shares: o.shares, instrument, slot, side }
    }

    /// Add a new order; returns false (counted) when it cannot be.
    #[inline]
    fn add(&mut self, o: Resting) -> bool {
        // One probe finds a live duplicate or the free slot the order goes to.
        let slot = if o.id == 0 {
            if self.zero.is_some() {
                self.stats.duplicate_order += 1;
                return false;
            }
            None
        } else {
            match self.table.probe(o.id) {
                Ok(_) => {
                    self.stats.duplicate_order += 1;
                    return false;
                }
                Err(free) => Some(free),
            }
        };
        if (o.instrument as usize) >= self.cfg.max_instruments {
            self.stats.bad_instrument += 1;
            return false;
        }
        if self.live_orders() >= self.cfg.max_orders {
            self.stats.table_full += 1;
            return false;
        }
        let b = self.book_mut(o.instrument).expect("checked above");
        let o = Resting { slot: b.add_shares(o.side, o.price, o.shares), ..o };
        let packed = Order::pack(&o);
        match slot {
            None => {
                self.zero = Some(packed);
                self.zero_price = o.price;
            }
            Some(i) => {
                // The table holds twice `max_orders` slots, so a free one always exists.
                self.table.slots[i] = packed;
                if o.slot == OVERFLOW {
                    self.table.prices[i] = o.price;
                }
                self.table.len += 1;
            }
        }
        true
    }

    /// Start loading the table slot of order `id` (a hint only: it changes nothing).
    #[inline(always)]
    pub fn prefetch_order(&self, id: u64) {
        self.table.prefetch(id);
    }

    /// Start loading the order an event names, so that a later [`Books::apply`] of it does
    /// not wait for memory. A hint only: it changes nothing. [`Books::apply_all`] uses it.
    #[inline]
    pub fn prefetch(&self, e: &Event) {
        match e.action {
            EventAction::Modify => self.table.prefetch(e.aux),
            EventAction::Add | EventAction::Execute | EventAction::Cancel | EventAction::Delete => {
                self.table.prefetch(e.order_id)
            }
            _ => {}
        }
    }

    /// Apply a batch of events in order (the same result as `apply` on each), first asking
    /// for all the orders they name so that the cache misses overlap.
    #[inline]
    pub fn apply_all(&mut self, events: &mut [Event]) {
        for e in events.iter() {
            self.prefetch(e);
        }
        for e in events.iter_mut() {
            self.apply(e);
        }
    }

    /// Apply an event to the books. Fills in what the feed left out (side and price of
    /// executes, cancels, deletes and replaces; the size a delete removed) and sets the
    /// event's flags. Returns true when a book changed.
    #[inline(always)]
    pub fn apply(&mut self, e: &mut Event) -> bool {
        let changed = match e.action {
            EventAction::Add => {
                let o = Resting {
                    id: e.order_id,
                    price: e.price,
                    shares: e.size,
                    instrument: e.instrument_id,
                    slot: OVERFLOW,
                    side: e.side,
                };
                if o.side == Side::None {
                    self.stats.ignored += 1;
                    false
                } else if self.add(o) {
                    true
                } else {
                    e.flags |= flags::REJECTED;
                    false
                }
            }
            EventAction::Execute | EventAction::Cancel => self.reduce(e),
            EventAction::Delete => self.delete(e),
            EventAction::Modify => self.replace(e),
            _ => {
                self.stats.ignored += 1;
                false
            }
        };
        if changed {
            self.stats.applied += 1;
        }
        if self.all_stale || self.books.get(e.instrument_id as usize).is_some_and(|b| b.stale) {
            e.flags |= flags::BOOK_STALE;
        }
        changed
    }

    #[inline]
    fn unknown(&mut self, e: &mut Event) {
        self.stats.unknown_order += 1;
        e.flags |= flags::UNKNOWN_ORDER;
    }

    /// The live order `id` an event names, with the event's side and instrument filled in
    /// from it; `None` (counted and flagged) when the book does not know it.
    #[inline(always)]
    fn resting(&mut self, id: u64, e: &mut Event) -> Option<(Found, Resting)> {
        let Some(f) = self.find(id) else {
            self.unknown(e);
            return None;
        };
        let o = self.resting_at(&f);
        e.side = o.side;
        e.instrument_id = o.instrument;
        Some((f, o))
    }

    /// Take a resting order out of its level and the table.
    #[inline]
    fn remove(&mut self, f: Found, o: &Resting) {
        self.books[o.instrument as usize].take_shares(o, o.shares, true);
        self.forget(f);
    }

    fn reduce(&mut self, e: &mut Event) -> bool {
        let Some((f, o)) = self.resting(e.order_id, e) else { return false };
        if e.price == 0 {
            // An execution without its own price (ITCH E) happened at the order's.
            e.price = o.price;
        }
        if e.size >= o.shares {
            if e.size > o.shares {
                self.stats.overfill += 1;
            }
            self.remove(f, &o);
        } else {
            self.books[o.instrument as usize].take_shares(&o, e.size, false);
            self.get(&f).shares = o.shares - e.size;
        }
        true
    }

    fn delete(&mut self, e: &mut Event) -> bool {
        let Some((f, o)) = self.resting(e.order_id, e) else { return false };
        e.price = o.price;
        e.size = o.shares;
        self.remove(f, &o);
        true
    }

    fn replace(&mut self, e: &mut Event) -> bool {
        let Some((f, o)) = self.resting(e.aux, e) else { return false };
        if e.order_id != e.aux && self.find(e.order_id).is_some() {
            self.stats.duplicate_order += 1;
            e.flags |= flags::REJECTED;
            return false;
        }
        self.remove(f, &o);
        let n = Resting {
            id: e.order_id,
            price: e.price,
            shares: e.size,
            instrument: o.instrument,
            slot: OVERFLOW,
            side: o.side,
        };
        // The old order's slot was just freed, so the table has room.
        let added = self.add(n);
        debug_assert!(added);
        true
    }

    /// Check every level against the orders (tests and debugging; O(orders)).
    pub fn check_consistency(&self) -> Result<(), Unbalanced> {
        self.consistency().map_err(|sum| Unbalanced { sum })
    }

    fn consistency(&self) -> Result<(), String> {
        use std::collections::HashMap;
        let mut want: HashMap<(u32, u8, i64), (u64, u32)> = HashMap::new();
        let found = self.table.slots.iter().enumerate().filter(|(_, o)| o.id != 0).map(|(i, _)| Found::Slot(i));
        let mut n = 0;
        for f in found.chain(self.zero.map(|_| Found::Zero)) {
            n += 1;
            let b = self.books.get(self.order_at(&f).instrument() as usize).ok_or("an order's book is missing")?;
            let o = self.resting_at(&f);
            if o.slot != OVERFLOW {
                let side = if o.side == Side::Bid { &b.bids } else { &b.asks };
                if side.slots[o.slot as usize][1] & !WIDE == 0 {
                    return Err(format!("order {} at {} remembers empty slot {}", o.id, o.price, o.slot));
                }
            }
            let w = want.entry((o.instrument, o.side as u8, o.price)).or_default();
            w.0 += u64::from(o.shares);
            w.1 += 1;
        }
        if n != self.live_orders() {
            return Err(format!("table holds {n} orders, counts {}", self.live_orders()));
        }
        let mut levels = 0;
        for (i, b) in self.books.iter().enumerate() {
            for side in [Side::Bid, Side::Ask] {
                let lv: Vec<Level> = b.depth(side, usize::MAX).collect();
                if lv.len() != b.levels(side) {
                    return Err(format!(
                        "instrument {i} {side:?}: {} levels listed, {} counted",
                        lv.len(),
                        b.levels(side)
                    ));
                }
                for w in lv.windows(2) {
                    let ok = if side == Side::Bid { w[0].price > w[1].price } else { w[0].price < w[1].price };
                    if !ok {
                        return Err(format!("instrument {i} {side:?} levels out of order"));
                    }
                }
                for l in &lv {
                    levels += 1;
                    let got = want.get(&(i as u32, side as u8, l.price)).copied().unwrap_or_default();
                    if got != (l.shares, l.orders) {
                        return Err(format!(
                            "instrument {i} {side:?} {}: level says {} shares / {} orders, orders say {got:?}",
                            l.price, l.shares, l.orders
                        ));
                    }
                }
            }
        }
        if levels != want.len() {
            return Err(format!("{} levels, orders imply {}", levels, want.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

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

/// [`grid_quotient`]'s multiplier for `tick`: `floor(2^64 / tick) + 1` (`2^64 / tick` for a
/// power of two), or 0 where it would not be exact (a tick of 1, or of 2^26 or more).
fn tick_recip(tick: i64) -> u64 {
    if (2..1 << 26).contains(&tick) {
        u64::MAX / tick as u64 + 1
    } else {
        0
    }
}

/// `d / tick` for `0 <= d < LADDER_TICKS * tick`, by a multiply where the tick has a
/// multiplier ([`tick_recip`]): a 64-bit division took a few percent of the book's time,
/// one on every add. Exact: `d * recip / 2^64` is `d / tick` plus less than
/// `d / 2^64 < 2^12 * tick / 2^64`, which is under `1 / tick` (and so cannot carry
/// `d / tick` past the next integer) for every tick under 2^26 (0.067 dollars); a test
/// checks it against the division.
#[inline(always)]
fn grid_quotient(d: i64, tick: i64, recip: u64) -> i64 {
    if recip != 0 {
        ((d as u128 * u128::from(recip)) >> 64) as i64
    } else {
        d / tick
    }
}

/// The most live orders a table may hold: a ladder slot counts a level's orders in 31 bits
/// (its top bit marks a level of more than `u32::MAX` shares). A table this large would take 64 GB.
pub const MAX_ORDERS: usize = 1 << 30;

/// The most instruments the books hold: an order's table entry keeps its instrument in 18
/// bits (see `Order`).
pub const MAX_INSTRUMENTS: usize = 1 << 18;

/// A ladder slot's order count's top bit: the level's shares passed `u32::MAX` and live in
/// the side's `wide` list rather than in the slot.
const WIDE: u32 = 1 << 31;

/// Ticks a side's ladder spans (a multiple of 64, at most 64 * 64 so that one summary word
/// covers the occupancy bitmap).
const LADDER_TICKS: usize = 4096;
const WORDS: usize = LADDER_TICKS / 64;
/// `Resting::slot` of an order whose level is in the overflow list rather than the ladder.
const OVERFLOW: u32 = u32::MAX;

/// One side of a book.
///
/// Most levels live in a price ladder: a window of `LADDER_TICKS` slots on the configured
/// tick grid, indexed by distance from the best possible price, with an occupancy bitmap
/// (and a summary word over it) so that the next best level after the best empties is two
/// bit scans away. An order remembers its slot, so executes, cancels and deletes reach their
/// level with no search, and an add finds its level with one division. Written by hand
/// because no crate offers a bounded, allocation-free ladder with O(1) best-level upkeep.
///
/// Prices off the grid or outside the window go to a small sorted overflow list (best last),
/// so that any price is correct, and a rare one is merely slower. The window is centred on
/// the first price a side sees and re-centred only when the whole side is empty, so a price
/// never has a level in both places.
#[derive(Debug, Clone, Default)]
struct SideBook {
    /// `[shares, orders]` per slot, eight bytes so that a cache line holds eight levels
    /// (a level's first touch is most often a cache miss; 16-byte slots ran slower on the
    /// parse + book benchmark, `cargo bench -p tickplant --bench itch`); allocated (zeroed,
    /// so the OS maps pages as they are
    /// touched) on the side's first add. A level whose shares pass 32 bits has [`WIDE`] set
    /// in its order count and its shares in `wide`.
    slots: Vec<[u32; 2]>,
    /// `(slot, shares)` of the levels with [`WIDE`] set: a level of over four billion
    /// shares, rare enough for a list.
    wide: Vec<(u32, u64)>,
    bits: Vec<u64>,
    /// Bit `w` set when `bits[w] != 0`.
    summary: u64,
    /// Price of slot 0 (the worst price of the window).
    anchor: i64,
    /// +1 for bids (slot rises with price), -1 for asks (slot rises as price falls).
    dir: i64,
    /// Highest occupied slot, -1 when the ladder is empty.
    best: i32,
    /// Occupied slots.
    levels: u32,
    /// Levels outside the ladder, sorted so that the best is last.
    over: Vec<Level>,
}

impl SideBook {
    fn new(bid: bool) -> Self {
        SideBook { dir: if bid { 1 } else { -1 }, best: -1, ..Default::default() }
    }
    #[inline(always)]
    fn key(&self, price: i64) -> i64 {
        price * self.dir
    }
    #[inline(always)]
    fn price_at(&self, pos: u32, tick: i64) -> i64 {
        self.anchor.wrapping_add(self.dir * i64::from(pos) * tick)
    }
    /// The ladder slot of `price`, or `OVERFLOW`.
    #[inline(always)]
    fn pos(&self, price: i64, tick: i64, recip: u64) -> u32 {
        let d = (price.wrapping_sub(self.anchor)).wrapping_mul(self.dir);
        if self.slots.is_empty() || d < 0 || d >= LADDER_TICKS as i64 * tick {
            return OVERFLOW;
        }
        let q = grid_quotient(d, tick, recip);
        if q * tick == d {
            q as u32
        } else {
            OVERFLOW
        }
    }
    /// Put the window's middle at `price` (rounded down to the grid); the side is empty.
    #[cold]
    fn centre(&mut self, price: i64, tick: i64) {
        debug_assert!(self.levels == 0 && self.over.is_empty() && self.wide.is_empty());
        if self.slots.is_empty() {
            self.slots = vec![[0; 2]; LADDER_TICKS];
            self.bits = vec![0; WORDS];
        }
        let half = (LADDER_TICKS / 2) as i64 * tick;
        let grid = price.div_euclid(tick) * tick;
        self.anchor = grid.saturating_sub(self.dir.saturating_mul(half));
    }
    /// Highest occupied slot below `pos`, or -1.
    #[inline]
    fn below(&self, pos: u32) -> i32 {
        let w = (pos / 64) as usize;
        let m = self.bits[w] & ((1u64 << (pos % 64)) - 1);
        if m != 0 {
            return (w * 64 + 63 - m.leading_zeros() as usize) as i32;
        }
        let s = self.summary & ((1u64 << w) - 1);
        if s == 0 {
            return -1;
        }
        let w = 63 - s.leading_zeros() as usize;
        (w * 64 + 63 - self.bits[w].leading_zeros() as usize) as i32
    }
    /// Add an order's shares at `price`; returns the slot the order must remember.
    #[inline]
    fn add(&mut self, price: i64, shares: u32, tick: i64, recip: u64) -> u32 {
        let mut pos = self.pos(price, tick, recip);
        if pos == OVERFLOW && self.levels == 0 && self.over.is_empty() {
            self.centre(price, tick);
            pos = self.pos(price, tick, recip);
        }
        if pos == OVERFLOW {
            self.over_add(price, u64::from(shares));
            return OVERFLOW;
        }
        let s = &mut self.slots[pos as usize];
        if s[1] == 0 {
            let w = (pos / 64) as usize;
            self.bits[w] |= 1 << (pos % 64);
            self.summary |= 1 << w;
            self.levels += 1;
            self.best = self.best.max(pos as i32);
        }
        s[1] += 1;
        let (v, carry) = s[0].overflowing_add(shares);
        if carry || s[1] & WIDE != 0 {
            Self::wide_add(&mut self.wide, s, pos, shares);
        } else {
            s[0] = v;
        }
        pos
    }
    /// Add shares to a level past 32 bits (moving it to `wide` the first time).
    #[cold]
    #[inline(never)]
    fn wide_add(wide: &mut Vec<(u32, u64)>, s: &mut [u32; 2], pos: u32, shares: u32) {
        if s[1] & WIDE == 0 {
            let had = u64::from(s[0]);
            s[0] = 0;
            s[1] |= WIDE;
            wide.push((pos, had + u64::from(shares)));
        } else if let Some(w) = wide.iter_mut().find(|w| w.0 == pos) {
            w.1 += u64::from(shares);
        } else {
            debug_assert!(false, "a wide level is missing from the list");
        }
    }
    /// Take shares off a level in `wide` (not below zero).
    #[cold]
    #[inline(never)]
    fn wide_take(wide: &mut [(u32, u64)], pos: u32, shares: u32) {
        if let Some(w) = wide.iter_mut().find(|w| w.0 == pos) {
            w.1 -= u64::from(shares).min(w.1);
        } else {
            debug_assert!(false, "a wide level is missing from the list");
        }
    }
    /// A ladder level's shares.
    #[inline(always)]
    fn shares_at(&self, pos: u32) -> u64 {
        let s = self.slots[pos as usize];
        if s[1] & WIDE == 0 {
            u64::from(s[0])
        } else {
            self.wide.iter().find(|w| w.0 == pos).map_or(0, |w| w.1)
        }
    }
    /// Take `shares` off the level of an order at `slot`/`price`; `remove_order` when the
    /// order leaves it.
    #[inline]
    fn take(&mut self, slot: u32, price: i64, shares: u32, remove_order: bool) {
        if slot == OVERFLOW {
            self.over_take(price, u64::from(shares), remove_order);
            return;
        }
        let s = &mut self.slots[slot as usize];
        if s[1] & WIDE == 0 {
            s[0] -= shares.min(s[0]);
        } else {
            Self::wide_take(&mut self.wide, slot, shares);
        }
        if remove_order {
            s[1] -= 1;
            if s[1] & !WIDE == 0 {
                if s[1] != 0 {
                    self.wide.retain(|w| w.0 != slot);
                }
                *s = [0; 2];
                let w = (slot / 64) as usize;
                self.bits[w] &= !(1 << (slot % 64));
                if self.bits[w] == 0 {
                    self.summary &= !(1 << w);
                }
                self.levels -= 1;
                if slot as i32 == self.best {
                    self.best = self.below(slot);
                }
            }
        }
    }

    /// Position of `price` in the overflow list: scan the few levels nearest the top first,
    /// then binary search.
    #[inline]
    fn over_find(&self, price: i64) -> Result<usize, usize> {
        let k = self.key(price);
        let levels = &self.over;
        let n = levels.len();
        let mut i = n;
        let stop = n.saturating_sub(4);
        while i > stop {
            let lk = self.key(levels[i - 1].price);
            if lk == k {
                return Ok(i - 1);
            }
            if lk < k {
                return Err(i);
            }
            i -= 1;
        }
        levels[..i].binary_search_by(|l| self.key(l.price).cmp(&k))
    }
    #[cold]
    fn over_add(&mut self, price: i64, shares: u64) {
        match self.over_find(price) {
            Ok(i) => {
                self.over[i].shares += shares;
                self.over[i].orders += 1;
            }
            Err(i) => self.over.insert(i, Level { price, shares, orders: 1 }),
        }
    }
    #[cold]
    fn over_take(&mut self, price: i64, shares: u64, remove_order: bool) {
        if let Ok(i) = self.over_find(price) {
            let l = &mut self.over[i];
            l.shares -= shares.min(l.shares);
            if remove_order {
                l.orders -= 1;
                if l.orders == 0 {
                    self.over.remove(i);
                }
            }
        } else {
            debug_assert!(false, "an order's level is missing");
        }
    }

    fn ladder_level(&self, pos: i32, tick: i64) -> Option<Level> {
        (pos >= 0).then(|| {
            let orders = self.slots[pos as usize][1] & !WIDE;
            Level { price: self.price_at(pos as u32, tick), shares: self.shares_at(pos as u32), orders }
        })
    }
    /// Whether the ladder's next level `l` comes before the overflow list's `o` (`None` when
    /// both are spent): the merge `depth` makes, and `best` its first step.
    fn ladder_first(&self, l: Option<Level>, o: Option<Level>) -> Option<bool> {
        match (l, o) {
            (Some(l), Some(o)) => Some(self.key(l.price) > self.key(o.price)),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }
    /// The first level `depth` gives, without working out the one after it (the pipeline
    /// asks for both sides' best for every record it delivers).
    fn best(&self, tick: i64) -> Option<Level> {
        let (l, o) = (self.ladder_level(self.best, tick), self.over.last().copied());
        if self.ladder_first(l, o)? {
            l
        } else {
            o
        }
    }
    fn depth(&self, tick: i64) -> Depth<'_> {
        Depth { side: self, tick, pos: self.best, over: self.over.len() }
    }
    fn len(&self) -> usize {
        self.levels as usize + self.over.len()
    }
}

/// The levels of one side, best first: the ladder and the overflow list merged.
#[derive(Debug, Clone)]
pub struct Depth<'a> {
    side: &'a SideBook,
    tick: i64,
    /// Next ladder slot (-1: none left).
    pos: i32,
    /// Overflow levels not yet given (the next is `over - 1`).
    over: usize,
}

impl Iterator for Depth<'_> {
    type Item = Level;
    fn next(&mut self) -> Option<Level> {
        let s = self.side;
        let l = s.ladder_level(self.pos, self.tick);
        let o = self.over.checked_sub(1).map(|i| s.over[i]);
        if s.ladder_first(l, o)? {
            self.pos = if self.pos > 0 { s.below(self.pos as u32) } else { -1 };
            l
        } else {
            self.over -= 1;
            o
        }
    }
}

/// The book of one instrument.
#[derive(Debug, Clone)]
pub struct Book {
    bids: SideBook,
    asks: SideBook,
    /// The price grid of the ladders (from [`BookConfig::tick`]), and its multiplier
    /// ([`tick_recip`]).
    tick: i64,
    recip: u64,
    stale: bool,
    orders: u32,
}

impl Book {
    fn new(tick: i64, stale: bool) -> Self {
        Book { bids: SideBook::new(true), asks: SideBook::new(false), tick, recip: tick_recip(tick), stale, orders: 0 }
    }
    pub fn best_bid(&self) -> Option<Level> {
        self.bids.best(self.tick)
    }
    pub fn best_ask(&self) -> Option<Level> {
        self.asks.best(self.tick)
    }
    /// Up to `n` levels of a side, best first.
    pub fn depth(&self, side: Side, n: usize) -> std::iter::Take<Depth<'_>> {
        let d = if side == Side::Ask { self.asks.depth(self.tick) } else { self.bids.depth(self.tick) };
        d.take(if side == Side::None { 0 } else { n })
    }
    pub fn levels(&self, side: Side) -> usize {
        match side {
            Side::Bid => self.bids.len(),
            Side::Ask => self.asks.len(),
            Side::None => 0,
        }
    }
    pub fn is_stale(&self) -> bool {
        self.stale
    }
    /// Live orders in the book.
    pub fn orders(&self) -> u32 {
        self.orders
    }
    pub fn is_empty(&self) -> bool {
        self.orders == 0
    }

    #[inline(always)]
    fn side_mut(&mut self, side: Side) -> &mut SideBook {
        if side == Side::Bid {
            &mut self.bids
        } else {
            &mut self.asks
        }
    }
    /// Returns the slot the order must remember.
    #[inline]
    fn add_shares(&mut self, side: Side, price: i64, shares: u32) -> u32 {
        self.orders += 1;
        let (tick, recip) = (self.tick, self.recip);
        self.side_mut(side).add(price, shares, tick, recip)
    }
    /// Take `shares` off the order's level; `remove_order` when the order leaves it.
    #[inline]
    fn take_shares(&mut self, o: &Resting, shares: u32, remove_order: bool) {
        if remove_order {
            self.orders -= 1;
        }
        self.side_mut(o.side).take(o.slot, o.price, shares, remove_order);
    }
}

/// Ask the CPU to start loading the cache line of `x`.
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    let p: *const T = x;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, reads nothing into the program, and the
    // address is that of a live reference anyway. SSE is part of the x86_64 baseline, so the
    // instruction exists on every x86_64 CPU.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A live order as the book works with it. The table keeps it packed ([`Order`]).
#[derive(Debug, Clone, Copy, Default)]
struct Resting {
    id: u64,
    price: i64,
    shares: u32,
    instrument: u32,
    /// The ladder slot of the order's level, or `OVERFLOW`.
    slot: u32,
    side: Side,
}

/// A live order in the table: 16 bytes, four to a cache line. Most lookups of a day are
/// cache misses on this table: entries of 32 bytes (the order's price and a slot of its
/// own) and of 64 ran slower on the parse + book benchmark (`cargo bench -p tickplant
/// --bench itch`; docs/perf-log/feed-handler.md). The price of an order whose level is in
/// the ladder is the ladder slot's own ([`SideBook::price_at`]: the window never moves
/// under a live order), so only an order in the overflow list keeps its price, beside the
/// table ([`OrderTable::prices`]).
#[derive(Debug, Clone, Copy, Default)]
struct Order {
    /// 0 marks a free slot; id 0 itself lives in `Books::zero`.
    id: u64,
    shares: u32,
    /// The ladder slot (bits 0..12), [`META_OVER`] for a level in the overflow list,
    /// [`META_ASK`] for the ask side, and the instrument from [`META_INSTRUMENT`] up.
    meta: u32,
}

const META_SLOT: u32 = (LADDER_TICKS - 1) as u32;
const META_OVER: u32 = 1 << 12;
const META_ASK: u32 = 1 << 13;
const META_INSTRUMENT: u32 = 14;
const _: () = assert!(LADDER_TICKS == 1 << 12 && MAX_INSTRUMENTS == 1 << (32 - META_INSTRUMENT));

impl Order {
    /// `r` packed (its price is the caller's to keep when it is in the overflow list).
    #[inline(always)]
    fn pack(r: &Resting) -> Order {
        debug_assert!((r.instrument as usize) < MAX_INSTRUMENTS && r.side != Side::None);
        let slot = if r.slot == OVERFLOW { META_OVER } else { r.slot & META_SLOT };
        let ask = if r.side == Side::Ask { META_ASK } else { 0 };
        Order { id: r.id, shares: r.shares, meta: r.instrument << META_INSTRUMENT | ask | slot }
    }
    #[inline(always)]
    fn over(&self) -> bool {
        self.meta & META_OVER != 0
    }
    #[inline(always)]
    fn instrument(&self) -> u32 {
        self.meta >> META_INSTRUMENT
    }
    #[inline(always)]
    fn side(&self) -> Side {
        if self.meta & META_ASK != 0 {
            Side::Ask
        } else {
            Side::Bid
        }
    }
    #[inline(always)]
    fn slot(&self) -> u32 {
        if self.over() {
            OVERFLOW
        } else {
            self.meta & META_SLOT
        }
    }
}

/// Open addressing with linear probing and backward-shift deletion (no tombstones), sized
/// once. Written here rather than a `HashMap` because the book is the hot path: a fixed
/// power-of-two table with a multiplicative hash of the (sequential) ITCH order ids keeps a
/// lookup to one or two cache lines and never rehashes or allocates.
#[derive(Debug)]
struct OrderTable {
    slots: Vec<Order>,
    /// The price of the order in `slots[i]` when its level is in the overflow list (else
    /// unused): written only for those, so its pages stay unmapped on an ordinary day.
    prices: Vec<i64>,
    mask: usize,
    shift: u32,
    len: usize,
}

impl OrderTable {
    fn new(max: usize, advise: impl FnOnce(*const u8, usize)) -> Self {
        let cap = (max.max(1) * 2).next_power_of_two();
        // Reserved, shown to `advise`, then written: the runtime asks the OS for huge pages
        // before the first write commits any page.
        let mut slots: Vec<Order> = Vec::with_capacity(cap);
        advise(slots.as_ptr().cast(), cap * std::mem::size_of::<Order>());
        slots.resize(cap, Order::default());
        OrderTable { slots, prices: vec![0; cap], mask: cap - 1, shift: 64 - cap.trailing_zeros(), len: 0 }
    }
    /// ITCH order ids rise through the day and most activity is on young orders: the id
    /// itself (mod the table size) keeps recently added orders in neighbouring, cache-warm
    /// slots, where a scrambling hash would make every lookup a cache miss.
    #[inline(always)]
    fn home(&self, id: u64) -> usize {
        (id ^ (id >> self.shift)) as usize & self.mask
    }
    /// One probe run: `Ok(slot)` holding `id`, or `Err(free slot)` where it would go.
    #[inline]
    fn probe(&self, id: u64) -> Result<usize, usize> {
        let mut i = self.home(id);
        loop {
            let s = self.slots[i].id;
            if s == id {
                return Ok(i);
            }
            if s == 0 {
                return Err(i);
            }
            i = (i + 1) & self.mask;
        }
    }
    #[inline]
    fn find(&self, id: u64) -> Option<usize> {
        let mut i = self.home(id);
        loop {
            let s = self.slots[i].id;
            if s == id {
                return Some(i);
            }
            if s == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
    /// Ask the CPU to start loading the slot `id` hashes to.
    #[inline(always)]
    fn prefetch(&self, id: u64) {
        prefetch(&self.slots[self.home(id)]);
    }
    /// Insert an id that is not live (tests; `Books::add` probes and writes itself).
    #[cfg(test)]
    fn insert(&mut self, o: Order) -> bool {
        match self.probe(o.id) {
            Ok(_) => false,
            Err(i) => {
                self.slots[i] = o;
                self.len += 1;
                true
            }
        }
    }
    #[inline]
    fn remove_at(&mut self, mut i: usize) {
        self.len -= 1;
        // Backward shift: pull later entries of the probe run into the hole.
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let id = self.slots[j].id;
            if id == 0 {
                break;
            }
            let h = self.home(id);
            // Move j into i unless its home lies cyclically in (i, j].
            let in_range = if i <= j { i < h && h <= j } else { i < h || h <= j };
            if !in_range {
                self.slots[i] = self.slots[j];
                if self.slots[i].over() {
                    self.prices[i] = self.prices[j];
                }
                i = j;
            }
        }
        self.slots[i] = Order::default();
    }
}

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
mod tests {
    use super::*;

    /// The multiply gives the division's quotient wherever the ladder asks for one: every
    /// tick from 1 to 5,000, ticks near the powers of two and near 2^26, round ones, and one
    /// far past 2^26 (which takes the division, the multiply not being exact there), at
    /// the window's edges, on the grid, and one either side of it.
    #[test]
    fn grid_quotient_is_the_division() {
        let mut ticks: Vec<i64> = (1..=5_000).collect();
        for k in 1..27 {
            ticks.extend([(1i64 << k) - 1, 1 << k, (1 << k) + 1]);
        }
        ticks.extend([
            10_000,
            100_000,
            1_000_000,
            BookConfig::CENT,
            5 * BookConfig::CENT,
            67_108_863,
            999_999_937,
            1 << 30,
        ]);
        for tick in ticks {
            let recip = tick_recip(tick);
            let top = LADDER_TICKS as i64 * tick;
            let mut ds = vec![0, 1, top - 1, top / 2, top / 3];
            for q in [0, 1, 2, 63, 64, 1000, 2047, 2048, 4094, 4095] {
                ds.extend([q * tick - 1, q * tick, q * tick + 1, q * tick + tick / 2]);
            }
            for d in ds.into_iter().filter(|&d| (0..top).contains(&d)) {
                assert_eq!(grid_quotient(d, tick, recip), d / tick, "tick {tick}, d {d}");
            }
        }
    }

    fn ev(action: EventAction, id: u64, side: Side, price: i64, size: u32) -> Event {
        Event { action, order_id: id, side, price, size, instrument_id: 1, ..Default::default() }
    }

    #[test]
    fn adds_executes_cancels_deletes_replaces() {
        let mut b = Books::new(BookConfig { max_orders: 8, max_instruments: 4, tick: 2 });
        assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Bid, 100, 10)));
        assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Bid, 101, 5)));
        assert!(b.apply(&mut ev(EventAction::Add, 3, Side::Ask, 103, 7)));
        assert!(b.apply(&mut ev(EventAction::Add, 4, Side::Ask, 103, 1)));
        let bk = b.book(1).unwrap();
        assert_eq!(bk.best_bid(), Some(Level { price: 101, shares: 5, orders: 1 }));
        assert_eq!(bk.best_ask(), Some(Level { price: 103, shares: 8, orders: 2 }));
        let mut x = ev(EventAction::Execute, 2, Side::None, 0, 2);
        assert!(b.apply(&mut x));
        assert_eq!((x.side, x.price), (Side::Bid, 101));
        let mut c = ev(EventAction::Cancel, 2, Side::None, 0, 3);
        assert!(b.apply(&mut c));
        assert_eq!(b.book(1).unwrap().best_bid().unwrap().price, 100);
        let mut d = ev(EventAction::Delete, 3, Side::None, 0, 0);
        assert!(b.apply(&mut d));
        assert_eq!((d.size, d.price, d.side), (7, 103, Side::Ask));
        let mut u = Event { aux: 1, ..ev(EventAction::Modify, 9, Side::None, 99, 4) };
        assert!(b.apply(&mut u));
        assert_eq!(u.side, Side::Bid);
        let bk = b.book(1).unwrap();
        assert_eq!(bk.depth(Side::Bid, 5).collect::<Vec<_>>(), vec![Level { price: 99, shares: 4, orders: 1 }]);
        assert_eq!(bk.orders(), 2);
        b.check_consistency().unwrap();
        // Trades do not touch the book.
        assert!(!b.apply(&mut ev(EventAction::Trade, 0, Side::Bid, 99, 100)));
        assert_eq!(b.stats().applied, 8);
    }

    /// A ladder slot counts shares in 32 bits: a level past `u32::MAX` is kept aside, exact,
    /// through adds, partial cancels, executes and the delete that empties it; the slot is
    /// then an ordinary one again.
    #[test]
    fn a_level_past_four_billion_shares_stays_exact() {
        let mut b = Books::new(BookConfig { max_orders: 8, max_instruments: 4, tick: 2 });
        let big = 3_000_000_000u32;
        assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Ask, 100, big)));
        assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Ask, 100, big)));
        assert!(b.apply(&mut ev(EventAction::Add, 3, Side::Ask, 102, 5)));
        let level = |b: &Books| b.book(1).unwrap().best_ask().unwrap();
        assert_eq!(level(&b), Level { price: 100, shares: 6_000_000_000, orders: 2 });
        assert!(b.apply(&mut ev(EventAction::Add, 4, Side::Ask, 100, big)));
        assert_eq!(level(&b).shares, 9_000_000_000);
        assert!(b.apply(&mut ev(EventAction::Cancel, 1, Side::None, 0, 1_000_000_000)));
        assert!(b.apply(&mut ev(EventAction::Execute, 2, Side::None, 0, 7)));
        assert_eq!(level(&b), Level { price: 100, shares: 7_999_999_993, orders: 3 });
        b.check_consistency().unwrap();
        for id in [1, 2, 4] {
            assert!(b.apply(&mut ev(EventAction::Delete, id, Side::None, 0, 0)));
        }
        assert_eq!(level(&b), Level { price: 102, shares: 5, orders: 1 });
        assert!(b.apply(&mut ev(EventAction::Add, 5, Side::Ask, 100, 10)));
        assert_eq!(level(&b), Level { price: 100, shares: 10, orders: 1 });
        b.check_consistency().unwrap();
    }

    #[test]
    fn config_limits_say_which_field() {
        let ok = BookConfig::default();
        assert!(ok.validate().is_ok());
        assert!(BookConfig { max_instruments: MAX_INSTRUMENTS, ..ok }.validate().is_ok());
        let e = BookConfig { max_instruments: MAX_INSTRUMENTS + 1, ..ok }.validate().unwrap_err().to_string();
        assert!(e.contains("book.max-instruments") && e.contains("262144"), "{e}");
        // A config past the limit built without `validate`: adds past it are refused and
        // counted, never packed into another instrument's bits.
        let mut b = Books::new(BookConfig { max_instruments: MAX_INSTRUMENTS + 10, ..ok });
        let mut e = Event { instrument_id: MAX_INSTRUMENTS as u32 + 1, ..ev(EventAction::Add, 1, Side::Bid, 100, 1) };
        assert!(!b.apply(&mut e));
        assert_eq!(b.stats().bad_instrument, 1);
        let mut e = Event { instrument_id: MAX_INSTRUMENTS as u32 - 1, ..ev(EventAction::Add, 2, Side::Ask, 100, 1) };
        assert!(b.apply(&mut e));
        let mut d = ev(EventAction::Delete, 2, Side::None, 0, 0);
        assert!(b.apply(&mut d));
        assert_eq!((d.instrument_id, d.side, d.price, d.size), (MAX_INSTRUMENTS as u32 - 1, Side::Ask, 100, 1));
        b.check_consistency().unwrap();
    }

    #[test]
    fn bad_events_are_counted_not_applied() {
        let mut b = Books::new(BookConfig { max_orders: 3, max_instruments: 4, tick: 2 });
        let mut x = ev(EventAction::Delete, 42, Side::None, 0, 0);
        assert!(!b.apply(&mut x));
        assert_ne!(x.flags & flags::UNKNOWN_ORDER, 0);
        assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Bid, 1, 1)));
        let mut dup = ev(EventAction::Add, 1, Side::Bid, 1, 1);
        assert!(!b.apply(&mut dup));
        assert_ne!(dup.flags & flags::REJECTED, 0);
        assert!(b.apply(&mut ev(EventAction::Add, 0, Side::Ask, 5, 1)));
        assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Bid, 1, 1)));
        assert!(!b.apply(&mut ev(EventAction::Add, 3, Side::Bid, 1, 1)), "a table of 3 is full");
        assert!(!b.apply(&mut Event { instrument_id: 9, ..ev(EventAction::Add, 5, Side::Bid, 1, 1) }));
        assert!(b.apply(&mut ev(EventAction::Execute, 1, Side::None, 0, 5)), "overfill removes the order");
        let s = *b.stats();
        assert_eq!((s.unknown_order, s.duplicate_order, s.table_full, s.bad_instrument, s.overfill), (1, 1, 1, 1, 1));
        assert_eq!(s.total(), 8);
        b.check_consistency().unwrap();
        b.mark_all_stale();
        let mut a = ev(EventAction::Add, 7, Side::Bid, 1, 1);
        b.apply(&mut a);
        assert_ne!(a.flags & flags::BOOK_STALE, 0);
        assert!(b.book(1).unwrap().is_stale());
        b.clear_stale();
        assert!(!b.any_stale());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// The table against a set: random adds and deletes in a table of 64 slots (32 orders), ids
        /// near each other (long runs, as a day's sequential ids make) and far apart
        /// (collisions and runs that wrap past the last slot).
        #[test]
        fn table_agrees_with_a_set(ops in proptest::collection::vec((proptest::prelude::any::<bool>(), 1u64..200, proptest::prelude::any::<bool>()), 1..400)) {
            let mut t = OrderTable::new(32, |_, _| {});
            // id -> the price kept beside the table, for the ids whose level is in the
            // overflow list (every third): it must follow its order through the shifts.
            let mut want = std::collections::HashMap::new();
            for (add, id, far) in ops {
                let id = if far { id * 64 + 60 } else { id };
                let over = id % 3 == 0;
                if add && want.len() < 32 {
                    let o = Order { id, meta: if over { META_OVER } else { 0 }, ..Default::default() };
                    let fresh = !want.contains_key(&id);
                    proptest::prop_assert_eq!(t.insert(o), fresh);
                    if fresh {
                        let i = t.find(id).expect("inserted");
                        t.prices[i] = id as i64 * 7;
                        want.insert(id, id as i64 * 7);
                    }
                } else if let Some(i) = t.find(id) {
                    t.remove_at(i);
                    proptest::prop_assert!(want.remove(&id).is_some());
                } else {
                    proptest::prop_assert!(!want.contains_key(&id));
                }
                proptest::prop_assert_eq!(t.len, want.len());
            }
            for id in 1..200u64 {
                for id in [id, id * 64 + 60] {
                    proptest::prop_assert_eq!(t.find(id).map(|i| t.slots[i].id), want.contains_key(&id).then_some(id));
                    if let (Some(i), true) = (t.find(id), id % 3 == 0) {
                        proptest::prop_assert_eq!(t.prices[i], want[&id], "the price of {} followed it", id);
                    }
                }
            }
        }
    }

    #[test]
    fn table_deletes_keep_probe_runs() {
        let mut t = OrderTable::new(64, |_, _| {});
        let ids: Vec<u64> = (1..=64).map(|i| i * 1024).collect();
        for &id in &ids {
            assert!(t.insert(Order { id, ..Default::default() }));
        }
        for &id in ids.iter().step_by(2) {
            let i = t.find(id).unwrap();
            t.remove_at(i);
        }
        for (k, &id) in ids.iter().enumerate() {
            assert_eq!(t.find(id).is_some(), k % 2 == 1, "id {id}");
        }
    }
}

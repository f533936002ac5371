//! One side of one instrument's book: a ladder of price slots around the touch (one bit
//! per level in use, found by a word scan), an overflow list for the prices off the ladder,
//! and the [`Book`] of both sides.

use super::*;

use crate::event::Side;

/// [`grid_quotient`]'s multiplier for `tick`: `floor(2^64 / tick) + 1` (`2^64 / tick` for a
/// power of two), or 0 where it would not be exact (a tick of 1, or of 2^26 or more).
pub(super) fn tick_recip(tick: i64) -> u64 {
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
pub(super) fn grid_quotient(d: i64, tick: i64, recip: u64) -> i64 {
    if recip != 0 {
        ((d as u128 * u128::from(recip)) >> 64) as i64
    } else {
        d / tick
    }
}

/// A ladder slot's order count's top bit: the level's shares passed `u32::MAX` and live in
/// the side's `wide` list rather than in the slot.
pub(super) const WIDE: u32 = 1 << 31;

/// Ticks a side's ladder spans (a multiple of 64, at most 64 * 64 so that one summary word
/// covers the occupancy bitmap).
pub(super) const LADDER_TICKS: usize = 4096;
pub(super) const WORDS: usize = LADDER_TICKS / 64;
/// `Resting::slot` of an order whose level is in the overflow list rather than the ladder.
pub(super) const OVERFLOW: u32 = u32::MAX;

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
pub(super) struct SideBook {
    /// `[shares, orders]` per slot, eight bytes so that a cache line holds eight levels
    /// (a level's first touch is most often a cache miss; 16-byte slots ran slower on the
    /// parse + book benchmark, `cargo bench -p tickplant --bench itch`); allocated (zeroed,
    /// so the OS maps pages as they are
    /// touched) on the side's first add. A level whose shares pass 32 bits has [`WIDE`] set
    /// in its order count and its shares in `wide`.
    pub(super) slots: Vec<[u32; 2]>,
    /// `(slot, shares)` of the levels with [`WIDE`] set: a level of over four billion
    /// shares, rare enough for a list.
    pub(super) wide: Vec<(u32, u64)>,
    pub(super) bits: Vec<u64>,
    /// Bit `w` set when `bits[w] != 0`.
    pub(super) summary: u64,
    /// Price of slot 0 (the worst price of the window).
    pub(super) anchor: i64,
    /// +1 for bids (slot rises with price), -1 for asks (slot rises as price falls).
    pub(super) dir: i64,
    /// Highest occupied slot, -1 when the ladder is empty.
    pub(super) best: i32,
    /// Occupied slots.
    pub(super) levels: u32,
    /// Levels outside the ladder, sorted so that the best is last.
    pub(super) over: Vec<Level>,
}

impl SideBook {
    pub(super) fn new(bid: bool) -> Self {
        SideBook { dir: if bid { 1 } else { -1 }, best: -1, ..Default::default() }
    }
    #[inline(always)]
    pub(super) fn key(&self, price: i64) -> i64 {
        price * self.dir
    }
    #[inline(always)]
    pub(super) fn price_at(&self, pos: u32, tick: i64) -> i64 {
        self.anchor.wrapping_add(self.dir * i64::from(pos) * tick)
    }
    /// The ladder slot of `price`, or `OVERFLOW`.
    #[inline(always)]
    pub(super) fn pos(&self, price: i64, tick: i64, recip: u64) -> u32 {
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
    pub(super) fn centre(&mut self, price: i64, tick: i64) {
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
    pub(super) fn below(&self, pos: u32) -> i32 {
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
    pub(super) fn add(&mut self, price: i64, shares: u32, tick: i64, recip: u64) -> u32 {
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
    pub(super) fn wide_add(wide: &mut Vec<(u32, u64)>, s: &mut [u32; 2], pos: u32, shares: u32) {
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
    pub(super) fn wide_take(wide: &mut [(u32, u64)], pos: u32, shares: u32) {
        if let Some(w) = wide.iter_mut().find(|w| w.0 == pos) {
            w.1 -= u64::from(shares).min(w.1);
        } else {
            debug_assert!(false, "a wide level is missing from the list");
        }
    }
    /// A ladder level's shares.
    #[inline(always)]
    pub(super) fn shares_at(&self, pos: u32) -> u64 {
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
    pub(super) fn take(&mut self, slot: u32, price: i64, shares: u32, remove_order: bool) {
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
    pub(super) fn over_find(&self, price: i64) -> Result<usize, usize> {
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
    pub(super) fn over_add(&mut self, price: i64, shares: u64) {
        match self.over_find(price) {
            Ok(i) => {
                self.over[i].shares += shares;
                self.over[i].orders += 1;
            }
            Err(i) => self.over.insert(i, Level { price, shares, orders: 1 }),
        }
    }
    #[cold]
    pub(super) fn over_take(&mut self, price: i64, shares: u64, remove_order: bool) {
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

    pub(super) fn ladder_level(&self, pos: i32, tick: i64) -> Option<Level> {
        (pos >= 0).then(|| {
            let orders = self.slots[pos as usize][1] & !WIDE;
            Level { price: self.price_at(pos as u32, tick), shares: self.shares_at(pos as u32), orders }
        })
    }
    /// Whether the ladder's next level `l` comes before the overflow list's `o` (`None` when
    /// both are spent): the merge `depth` makes, and `best` its first step.
    pub(super) fn ladder_first(&self, l: Option<Level>, o: Option<Level>) -> Option<bool> {
        match (l, o) {
            (Some(l), Some(o)) => Some(self.key(l.price) > self.key(o.price)),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }
    /// The first level `depth` gives, without working out the one after it (the pipeline
    /// asks for both sides' best for every record it delivers).
    pub(super) fn best(&self, tick: i64) -> Option<Level> {
        let (l, o) = (self.ladder_level(self.best, tick), self.over.last().copied());
        if self.ladder_first(l, o)? {
            l
        } else {
            o
        }
    }
    pub(super) fn depth(&self, tick: i64) -> Depth<'_> {
        Depth { side: self, tick, pos: self.best, over: self.over.len() }
    }
    pub(super) fn len(&self) -> usize {
        self.levels as usize + self.over.len()
    }
}

/// The levels of one side, best first: the ladder and the overflow list merged.
#[derive(Debug, Clone)]
pub struct Depth<'a> {
    pub(super) side: &'a SideBook,
    pub(super) tick: i64,
    /// Next ladder slot (-1: none left).
    pub(super) pos: i32,
    /// Overflow levels not yet given (the next is `over - 1`).
    pub(super) over: usize,
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
    pub(super) bids: SideBook,
    pub(super) asks: SideBook,
    /// The price grid of the ladders (from [`BookConfig::tick`]), and its multiplier
    /// ([`tick_recip`]).
    pub(super) tick: i64,
    pub(super) recip: u64,
    pub(super) stale: bool,
    pub(super) orders: u32,
}

impl Book {
    pub(super) fn new(tick: i64, stale: bool) -> Self {
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
    pub(super) fn side_mut(&mut self, side: Side) -> &mut SideBook {
        if side == Side::Bid {
            &mut self.bids
        } else {
            &mut self.asks
        }
    }
    /// Returns the slot the order must remember.
    #[inline]
    pub(super) fn add_shares(&mut self, side: Side, price: i64, shares: u32) -> u32 {
        self.orders += 1;
        let (tick, recip) = (self.tick, self.recip);
        self.side_mut(side).add(price, shares, tick, recip)
    }
    /// Take `shares` off the order's level; `remove_order` when the order leaves it.
    #[inline]
    pub(super) fn take_shares(&mut self, o: &Resting, shares: u32, remove_order: bool) {
        if remove_order {
            self.orders -= 1;
        }
        self.side_mut(o.side).take(o.slot, o.price, shares, remove_order);
    }
}

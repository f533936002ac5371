//! The table of live orders: open addressing by order id, each order packed in 16 bytes
//! (its instrument, side and ladder slot in one word).

use super::*;

use crate::event::Side;

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
pub(super) struct Resting {
    pub(super) id: u64,
    pub(super) price: i64,
    pub(super) shares: u32,
    pub(super) instrument: u32,
    /// The ladder slot of the order's level, or `OVERFLOW`.
    pub(super) slot: u32,
    pub(super) side: Side,
}

/// A live order in the table: 16 bytes, four to a cache line. Most lookups of a day are
/// cache misses on this table: entries of 32 bytes (the order's price and a slot of its
/// own) and of 64 ran slower on the parse + book benchmark (`cargo bench -p tickplant
/// --bench itch`; docs/perf-log/feed-handler.md). The price of an order whose level is in
/// the ladder is the ladder slot's own ([`SideBook::price_at`]: the window never moves
/// under a live order), so only an order in the overflow list keeps its price, beside the
/// table ([`OrderTable::prices`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Order {
    /// 0 marks a free slot; id 0 itself lives in `Books::zero`.
    pub(super) id: u64,
    pub(super) shares: u32,
    /// The ladder slot (bits 0..12), [`META_OVER`] for a level in the overflow list,
    /// [`META_ASK`] for the ask side, and the instrument from [`META_INSTRUMENT`] up.
    pub(super) meta: u32,
}

pub(super) const META_SLOT: u32 = (LADDER_TICKS - 1) as u32;
pub(super) const META_OVER: u32 = 1 << 12;
pub(super) const META_ASK: u32 = 1 << 13;
pub(super) const META_INSTRUMENT: u32 = 14;
const _: () = assert!(LADDER_TICKS == 1 << 12 && MAX_INSTRUMENTS == 1 << (32 - META_INSTRUMENT));

impl Order {
    /// `r` packed (its price is the caller's to keep when it is in the overflow list).
    #[inline(always)]
    pub(super) fn pack(r: &Resting) -> Order {
        debug_assert!((r.instrument as usize) < MAX_INSTRUMENTS && r.side != Side::None);
        let slot = if r.slot == OVERFLOW { META_OVER } else { r.slot & META_SLOT };
        let ask = if r.side == Side::Ask { META_ASK } else { 0 };
        Order { id: r.id, shares: r.shares, meta: r.instrument << META_INSTRUMENT | ask | slot }
    }
    #[inline(always)]
    pub(super) fn over(&self) -> bool {
        self.meta & META_OVER != 0
    }
    #[inline(always)]
    pub(super) fn instrument(&self) -> u32 {
        self.meta >> META_INSTRUMENT
    }
    #[inline(always)]
    pub(super) fn side(&self) -> Side {
        if self.meta & META_ASK != 0 {
            Side::Ask
        } else {
            Side::Bid
        }
    }
    #[inline(always)]
    pub(super) fn slot(&self) -> u32 {
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
pub(super) struct OrderTable {
    pub(super) slots: Vec<Order>,
    /// The price of the order in `slots[i]` when its level is in the overflow list (else
    /// unused): written only for those, so its pages stay unmapped on an ordinary day.
    pub(super) prices: Vec<i64>,
    pub(super) mask: usize,
    pub(super) shift: u32,
    pub(super) len: usize,
}

impl OrderTable {
    pub(super) fn new(max: usize, advise: impl FnOnce(*const u8, usize)) -> Self {
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
    pub(super) fn home(&self, id: u64) -> usize {
        (id ^ (id >> self.shift)) as usize & self.mask
    }
    /// One probe run: `Ok(slot)` holding `id`, or `Err(free slot)` where it would go.
    #[inline]
    pub(super) fn probe(&self, id: u64) -> Result<usize, usize> {
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
    pub(super) fn find(&self, id: u64) -> Option<usize> {
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
    pub(super) fn prefetch(&self, id: u64) {
        prefetch(&self.slots[self.home(id)]);
    }
    /// Insert an id that is not live (tests; `Books::add` probes and writes itself).
    #[cfg(test)]
    pub(super) fn insert(&mut self, o: Order) -> bool {
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
    pub(super) fn remove_at(&mut self, mut i: usize) {
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

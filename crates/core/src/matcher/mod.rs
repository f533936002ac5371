//! Strategy matching: which of many strategies (conjunctions of predicates) does a market
//! event satisfy?
//!
//! Promises:
//! * Exact: [`Matcher::match_event`] gives exactly the strategies that brute force
//!   ([`Strategy::matches`] on each) gives, in ascending id order.
//! * Dynamic: [`Matcher::insert`] and [`Matcher::remove`] change the index in place, between
//!   any two events; nothing is ever rebuilt whole (an attribute's buckets are re-cut, for
//!   that attribute of that cluster only, when its members have grown fourfold). New members
//!   wait in a short per-cluster list, checked exactly, and are filed 32 at a time.
//! * [`Matcher::explain`] says which predicates of a strategy held on an event and which
//!   failed first; [`Matcher::memory_bytes`] what the index holds.
//!
//! The design (see `docs/matching.md` for the measurements behind it):
//! 1. **Clusters by access predicate.** A strategy with an equality (`attr = v`, or `attr in
//!    (...)`, one copy per value) is filed under that (attribute, value), choosing the
//!    attribute with the most distinct values among the clusters (the most selective);
//!    an event visits only the clusters its own values name, plus one cluster of
//!    strategies without an equality.
//! 2. **Bucketed bitsets inside a cluster.** Every other `attr op value` becomes an interval
//!    on its attribute (numbers are exact integers, so `< c` is `<= c - 1e-9`). Per
//!    attribute, the value axis is cut into 16 to 256 buckets (by members) at quantiles of
//!    the members' interval ends; per bucket a bitset marks the members that fail for any
//!    value in it, and two sorted lists hold the interval ends inside it (`lo` ends, `hi`
//!    ends), with a guide to them. An event ORs one bitset per attribute (eight at a time)
//!    and marks the members of a suffix of one list and a prefix of the other.
//! 3. **Residuals.** `!=`, `attr op attr` and non-access `in` predicates are checked, as
//!    written, only on the members that survive step 2.
//!
//! One file (about 1,800 lines, 290 of them tests; the rule language is `lang`): the index
//! is built and matched against in one place because both work on its private layout (the
//! bitsets, the short lists, the residual table) and change together.

pub mod lang;
pub mod market;

use crate::fxhash::FxMap;

pub use lang::{
    format_num, parse_json_num, parse_num, AttrId, MatchEvent, Op, ParseError, Pred, Rhs, Schema, Strategy, SymId,
    Type, Value, SCALE,
};
pub use market::{MarketEvents, Quote, SymbolKey};

/// Buckets per attribute at most, and at least once bucketed. Between the two, one bucket
/// for every 2 members at the cut: the members grow fourfold before the next cut, so a
/// bucket ends with about 8, 16 interval ends. A big cluster of dense ranges (workload a:
/// 100,000 members in one cluster) is fastest with the most buckets its memory allows
/// (256: fewer ends to mark an event). The small clusters of trading strategies (workload
/// b at 100,000: about 50 members an attribute) are faster and smaller with 16 than with
/// 64, as every bucket costs its bitset word and its lists' headers; its clusters at
/// 1,000,000 (cut at 128 members, 500 later) with 64 rather than 16: 5.6-6.3 us an event
/// against 7.2-9.7 (`tickplant bench match`, docs/perf-log/matching.md).
const BUCKETS: usize = 256;
const MIN_BUCKETS: usize = 16;
const MEMBERS_PER_BUCKET: usize = 2;
/// An attribute is bucketed once it has this many members, and re-cut when they have grown
/// fourfold (`RECUT_GROWTH`): a re-cut refiles every member, so it must be rare, and boundary
/// lists four times longer than right after a cut still cost an event little.
const BUCKET_FROM: u32 = 32;
const RECUT_GROWTH: u32 = 4;
/// An `in` list longer than this is not used as an access predicate (one copy per value).
const MAX_IN_COPIES: usize = 16;
/// New members wait in a short list, checked exactly, until this many are filed into the
/// buckets at once: filing one member touches every bucket's bitset (up to 64 cache lines
/// per attribute), filing a batch touches each bitset once for all of them.
const PENDING: usize = 32;
const _: () = assert!(PENDING <= 64, "pending members are tracked in one u64");

type ClusterId = u32;

/// The value of an event's string that no strategy names: equal to no literal.
pub const UNKNOWN_SYM: SymId = SymId::MAX;

#[inline]
fn key(v: Value) -> i128 {
    match v {
        Value::Num(n) => n,
        Value::Sym(s) => i128::from(s),
    }
}

/// Edges an attribute of a small cluster has at most (16 buckets, and room for a cut of
/// 32): they are prefetched before an event searches them (see [`Cluster::matches`]). At
/// 64 (the big trading clusters' buckets as well) workload b at 1,000,000 gained nothing.
const SMALL_EDGES: usize = 32;

/// Rows ORed in one pass over the accumulator (see [`or_rows`]).
const ROWS_AT_ONCE: usize = 8;

/// OR every row into `acc` (each row at least as long), a cache line at a time.
#[inline]
fn or_rows(acc: &mut [u64], rows: &[&[u64]]) {
    let words = acc.len();
    let whole = words - words % 8;
    for w in (0..whole).step_by(8) {
        let mut t: [u64; 8] = acc[w..w + 8].try_into().expect("eight words");
        for r in rows {
            let r: &[u64; 8] = r[w..w + 8].try_into().expect("eight words");
            for i in 0..8 {
                t[i] |= r[i];
            }
        }
        acc[w..w + 8].copy_from_slice(&t);
    }
    for (i, x) in acc.iter_mut().enumerate().skip(whole) {
        for r in rows {
            *x |= r[i];
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Bits(Vec<u64>);

impl Bits {
    #[inline]
    fn set(&mut self, i: u32) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }
    #[inline]
    fn clear(&mut self, i: u32) {
        self.0[(i / 64) as usize] &= !(1 << (i % 64));
    }
    #[inline]
    fn get(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] >> (i % 64) & 1 == 1
    }
    fn grow(&mut self, words: usize) {
        self.0.resize(words, 0);
    }
}

/// One bitset per bucket, all in one allocation: row `k` is `data[k * stride..][..stride]`.
/// The stride grows an eighth at a time: adding members re-lays the rows out now and then
/// (amortised, a few hundred ns an insert), and the rows, most of a dense index's memory,
/// carry at most an eighth unused (doubling left up to half: `tickplant bench match
/// --workload a`, bytes a strategy).
#[derive(Debug, Clone, Default)]
struct BitRows {
    data: Vec<u64>,
    stride: usize,
}

impl BitRows {
    fn new(rows: usize, words: usize) -> Self {
        let stride = words.max(1);
        BitRows { data: vec![0; rows * stride], stride }
    }
    fn rows(&self) -> usize {
        self.data.len() / self.stride
    }
    #[inline]
    fn row(&self, k: usize) -> &[u64] {
        &self.data[k * self.stride..(k + 1) * self.stride]
    }
    /// Set bit `i` in rows `rows` (a strided walk: no index arithmetic per row). The naive
    /// form of [`AttrIndex::place`]'s row masks, kept as its test oracle.
    #[cfg(test)]
    fn set_rows(&mut self, rows: std::ops::Range<usize>, i: u32) {
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        let start = rows.start * self.stride + w;
        if rows.is_empty() || start >= self.data.len() {
            return;
        }
        let mut j = start;
        for _ in rows {
            self.data[j] |= bit;
            j += self.stride;
        }
    }
    /// OR into word `w` of each row the running XOR of `toggles` down the rows (a member
    /// toggled at rows `a` and `b` gets its bit in rows `a..b`), and zero `toggles`.
    #[inline]
    fn or_toggled(&mut self, w: usize, toggles: &mut [u64]) {
        let rows = self.rows();
        debug_assert!(w < self.stride && toggles.len() == rows + 1);
        let mut run = 0u64;
        for (r, t) in toggles[..rows].iter_mut().enumerate() {
            run ^= std::mem::take(t);
            if run != 0 {
                self.data[r * self.stride + w] |= run;
            }
        }
        toggles[rows] = 0;
    }
    /// Clear bits `slots` in every row (row by row: each row is walked once).
    fn clear_rows(&mut self, slots: &[u32]) {
        for row in self.data.chunks_exact_mut(self.stride) {
            for &i in slots {
                row[(i / 64) as usize] &= !(1u64 << (i % 64));
            }
        }
    }
    /// Room for `words` words per row.
    fn grow(&mut self, words: usize) {
        if words <= self.stride {
            return;
        }
        let stride = words.max(self.stride + self.stride / 8);
        let mut data = vec![0; self.rows() * stride];
        for (k, row) in self.data.chunks_exact(self.stride).enumerate() {
            data[k * stride..][..self.stride].copy_from_slice(row);
        }
        *self = BitRows { data, stride };
    }
}

/// A closed interval of keys on an attribute: (attribute, lo, hi).
type Iv = (AttrId, i128, i128);

/// A strategy's copy in a cluster. Its intervals are not kept here: a re-cut (the only
/// reader after the insert) derives them from the strategy's predicates, found through
/// `entry`. Kept, they were a tenth of a dense index's memory (`tickplant bench match
/// --workload a`, bytes a strategy).
#[derive(Debug, Clone)]
struct Member {
    id: u64,
    /// The strategy's place in the matcher's slab.
    entry: u32,
    residual: Box<[Pred]>,
}

/// Sub-ranges of a bucket's keys in a long list's guide ([`Guide::off`]): at most this many.
const SUBRANGES: usize = 16;
/// Unsorted ends a long list holds at most before they are merged in (see [`Ends`]).
const TAIL: usize = 32;
/// A list shorter than this has no guide and files each end in place: the move is short,
/// a binary search over it reads a line or two, and an event compares no tail (the small
/// clusters of trading strategies, workload b). Filing in place lists of about 200 ends
/// (100,000 dense strategies, workload a) cost an insert twice the cache misses
/// (`tickplant bench match`: insert into the full index 24-28 us in place, 12-14 us with
/// tails, events as fast).
const IN_PLACE: usize = 64;

/// How a bucket's keys map to sub-ranges: the bucket's first key and the shift that takes
/// a key's distance from it to its sub-range ([`SUBRANGES`] of them, a power of two wide,
/// cover the bucket's keys that fit an `i64`: the open end buckets' are cut there).
#[derive(Debug, Clone, Copy)]
struct Cut {
    base: i64,
    shift: u32,
}

impl Cut {
    fn of((bl, bh): (i128, i128)) -> Cut {
        let clamp = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let (l, h) = (clamp(bl), clamp(bh));
        let span = h.wrapping_sub(l) as u64;
        Cut { base: l, shift: (u64::BITS - span.leading_zeros()).saturating_sub(SUBRANGES.trailing_zeros()) }
    }
    /// The sub-range of key `k` of the bucket.
    #[inline]
    fn sub(self, k: i64) -> usize {
        (k.wrapping_sub(self.base) as u64 >> self.shift) as usize
    }
}

/// One sorted list of a bucket's interval ends (keys) and their members' slots. A long
/// list ([`IN_PLACE`] ends or more) has a guide: the bucket's keys are cut into
/// [`SUBRANGES`] equal sub-ranges, and `guide[s]` says where sub-range `s` starts in the
/// list, so a search reads the guide (asked for early by the match) and a few keys of one
/// sub-range. A binary search over a long list waited on a cache miss at each of its
/// steps: 40% of a match on workload a (`tickplant bench match --workload a`, perf).
///
/// A long list's new ends are appended after its `sorted` part, an unsorted tail that
/// events compare one by one, and are merged in [`TAIL`] at a time: filing each in place
/// moved half the list, and an insert into a million dense strategies took 64 us instead
/// of 16 (`tickplant bench match --workload p --strategies 1000000`). The tail shares the
/// list's arrays, so an insert touches the lines it appends to and nothing else (a tail of
/// its own, beside the guide, was two more cache misses an end). The guide is boxed: most
/// lists are short, and a bucket's own size is paid by every bucket of every small cluster.
#[derive(Debug, Clone, Default)]
struct Ends {
    keys: Vec<i64>,
    slots: Vec<u32>,
    /// `keys[..sorted]` is sorted; the rest is the tail.
    sorted: u32,
    guide: Option<Box<[u32; SUBRANGES + 1]>>,
}

impl Ends {
    /// The sorted part's slots.
    #[inline]
    fn sorted_slots(&self) -> &[u32] {
        &self.slots[..self.sorted as usize]
    }
    /// How many sorted keys are `<= v` (`strict`: `< v`); `v` is a key of the bucket.
    #[inline]
    fn count_below(&self, cut: Cut, v: i64, strict: bool) -> usize {
        let (a, seg) = match &self.guide {
            Some(g) => {
                let sub = cut.sub(v);
                let a = g[sub] as usize;
                (a, &self.keys[a..g[sub + 1] as usize])
            }
            None => (0, &self.keys[..self.sorted as usize]),
        };
        a + if strict { seg.partition_point(|&k| k < v) } else { seg.partition_point(|&k| k <= v) }
    }
    /// Mark in `acc` the members of the tail whose end is above `v` (`above`) or below it.
    #[inline]
    fn knock_out_tail(&self, v: i64, above: bool, acc: &mut [u64]) {
        let at = self.sorted as usize;
        for (&k, &slot) in self.keys[at..].iter().zip(&self.slots[at..]) {
            let failed = if above { k > v } else { k < v };
            acc[(slot / 64) as usize] |= u64::from(failed) << (slot % 64);
        }
    }
    /// File one end: in place in a short list, else into the tail (a full tail is merged
    /// in). `bulk`: the bucket is being filled whole; append, and [`Ends::sort`] after.
    fn insert(&mut self, cut: Cut, key: i64, slot: u32, bulk: bool) {
        if bulk || self.guide.is_some() {
            self.keys.push(key);
            self.slots.push(slot);
            if !bulk && self.keys.len() - self.sorted as usize >= TAIL {
                self.merge_tail(cut);
            }
            return;
        }
        let at = self.count_below(cut, key, false);
        self.keys.insert(at, key);
        self.slots.insert(at, slot);
        self.sorted += 1;
        if self.keys.len() >= IN_PLACE {
            self.guide = Some(Box::default());
            self.rebuild_guide(cut);
        }
    }
    /// Merge the tail into the sorted part: the tail sorted aside, then merged from the
    /// back.
    fn merge_tail(&mut self, cut: Cut) {
        let n = self.sorted as usize;
        let mut tail: Vec<(i64, u32)> = self.keys[n..].iter().copied().zip(self.slots[n..].iter().copied()).collect();
        tail.sort_unstable();
        let (mut i, mut j, mut w) = (n, tail.len(), self.keys.len());
        while j > 0 {
            w -= 1;
            if i > 0 && self.keys[i - 1] > tail[j - 1].0 {
                i -= 1;
                self.keys[w] = self.keys[i];
                self.slots[w] = self.slots[i];
            } else {
                j -= 1;
                (self.keys[w], self.slots[w]) = tail[j];
            }
        }
        self.sorted = self.keys.len() as u32;
        self.rebuild_guide(cut);
    }
    /// Sort by key (after a bulk fill) and give a long list its guide.
    fn sort(&mut self, cut: Cut) {
        if !self.keys.is_sorted() {
            let mut pairs: Vec<(i64, u32)> = self.keys.iter().copied().zip(self.slots.iter().copied()).collect();
            pairs.sort_unstable();
            for (i, (k, s)) in pairs.into_iter().enumerate() {
                self.keys[i] = k;
                self.slots[i] = s;
            }
        }
        self.sorted = self.keys.len() as u32;
        if self.guide.is_none() && self.keys.len() >= IN_PLACE {
            self.guide = Some(Box::default());
        }
        self.rebuild_guide(cut);
    }
    fn rebuild_guide(&mut self, cut: Cut) {
        let Some(g) = &mut self.guide else { return };
        let n = self.sorted as usize;
        let mut i = 0;
        for (s, o) in g.iter_mut().enumerate() {
            while i < n && cut.sub(self.keys[i]) < s {
                i += 1;
            }
            *o = i as u32;
        }
        g[SUBRANGES] = n as u32;
    }
    fn retain(&mut self, keep: &impl Fn(u32) -> bool, cut: Cut) {
        let (mut j, mut sorted) = (0, 0);
        for i in 0..self.slots.len() {
            if keep(self.slots[i]) {
                self.keys[j] = self.keys[i];
                self.slots[j] = self.slots[i];
                j += 1;
                if i < self.sorted as usize {
                    sorted = j;
                }
            }
        }
        self.keys.truncate(j);
        self.slots.truncate(j);
        self.sorted = sorted as u32;
        self.rebuild_guide(cut);
    }
    fn memory(&self) -> usize {
        self.keys.capacity() * 8
            + self.slots.capacity() * 4
            + self.guide.as_ref().map_or(0, |_| std::mem::size_of::<[u32; SUBRANGES + 1]>())
    }
}

/// A bucket's boundary members: those with an interval end inside the bucket, which
/// pass for some of its keys and fail for others. Inside a bucket whose keys all fit an
/// `i64` (every bucket but the open ends, for values within about ±9.2e9) the ends are
/// kept apart and sorted ([`Ends`]): `lo` ends (the member fails for keys below `lo`) and
/// `hi` ends (it fails above `hi`). The members an event's key fails are then a suffix of
/// the one and a prefix of the other, marked without a compare each; the members it
/// passes are not read at all. An unsorted list of whole intervals, each one compared, was
/// half of a match on workload a (`tickplant bench match --workload a --strategies
/// 100000`, perf; docs/perf-log/matching.md). Keys and slots are kept in separate arrays:
/// the search reads only keys, the marking only slots. A member with an end inside the
/// bucket beyond an `i64` (only the open end buckets have such keys) is kept as its whole
/// `i128` interval, compared. The open end buckets once kept every member that way (48
/// bytes each, every one compared: the top line of a match on workload b in perf); with
/// lists, workload b at 100,000 takes 434 bytes a strategy instead of 448, at the same
/// speed within the noise (`tickplant bench match --workload b`).
#[derive(Debug, Clone, Default)]
struct Boundary {
    lo: Ends,
    hi: Ends,
    wide: Vec<(u32, i128, i128)>,
}

impl Boundary {
    /// File a member whose interval has an end in this bucket, keys `range` (`bulk`: the
    /// bucket is being filled whole, and [`Boundary::sort`] comes after).
    fn push(&mut self, range: (i128, i128), slot: u32, lo: i128, hi: i128, bulk: bool) {
        // An end at or beyond the bucket's own decides nothing for its keys.
        let (lo_in, hi_in) = (lo > range.0, hi < range.1);
        let (l, h) = (i64::try_from(lo), i64::try_from(hi));
        if (lo_in && l.is_err()) || (hi_in && h.is_err()) {
            self.wide.push((slot, lo, hi));
            return;
        }
        let cut = Cut::of(range);
        if let (true, Ok(l)) = (lo_in, l) {
            self.lo.insert(cut, l, slot, bulk);
        }
        if let (true, Ok(h)) = (hi_in, h) {
            self.hi.insert(cut, h, slot, bulk);
        }
    }
    /// Sort both lists by key and guide them (after a bulk fill).
    fn sort(&mut self, range: (i128, i128)) {
        let cut = Cut::of(range);
        self.lo.sort(cut);
        self.hi.sort(cut);
    }
    fn retain(&mut self, range: (i128, i128), keep: impl Fn(u32) -> bool) {
        let cut = Cut::of(range);
        self.lo.retain(&keep, cut);
        self.hi.retain(&keep, cut);
        self.wide.retain(|x| keep(x.0));
    }
    fn memory(&self) -> usize {
        std::mem::size_of::<Boundary>()
            + self.lo.memory()
            + self.hi.memory()
            + self.wide.capacity() * std::mem::size_of::<(u32, i128, i128)>()
    }
    /// Mark in `acc` the members whose interval misses key `v`, a key of this bucket
    /// (`cut`: the bucket's, [`Cut::of`] its range).
    #[inline]
    fn knock_out(&self, cut: Cut, v: i128, acc: &mut [u64]) {
        match i64::try_from(v) {
            Ok(v) => {
                let from = self.lo.count_below(cut, v, false);
                for &slot in &self.lo.sorted_slots()[from..] {
                    acc[(slot / 64) as usize] |= 1 << (slot % 64);
                }
                let to = self.hi.count_below(cut, v, true);
                for &slot in &self.hi.slots[..to] {
                    acc[(slot / 64) as usize] |= 1 << (slot % 64);
                }
                self.lo.knock_out_tail(v, true, acc);
                self.hi.knock_out_tail(v, false, acc);
            }
            // A key beyond an i64 (an open end bucket's): below every list end, it fails
            // every `lo` end and no `hi` end; above them all, the other way round.
            Err(_) => {
                for &slot in if v < 0 { &self.lo.slots } else { &self.hi.slots } {
                    acc[(slot / 64) as usize] |= 1 << (slot % 64);
                }
            }
        }
        for &(slot, lo, hi) in &self.wide {
            let failed = u64::from(v < lo) | u64::from(v > hi);
            acc[(slot / 64) as usize] |= failed << (slot % 64);
        }
    }
}

#[derive(Debug, Clone)]
struct AttrIndex {
    attr: AttrId,
    /// Bucket k holds keys in [edges[k-1], edges[k] - 1] (open ends at the extremes).
    edges: Vec<i128>,
    fail: BitRows,
    /// The interval ends inside each bucket.
    boundary: Vec<Boundary>,
    /// Members with an interval on this attribute (they fail when the event lacks it).
    constrained: Bits,
    members: u32,
    cut_at: u32,
}

impl AttrIndex {
    fn new(attr: AttrId, words: usize) -> Self {
        AttrIndex {
            attr,
            edges: Vec::new(),
            fail: BitRows::new(1, words),
            boundary: vec![Boundary::default()],
            constrained: Bits(vec![0; words]),
            members: 0,
            cut_at: 0,
        }
    }
    #[inline]
    fn bucket(&self, v: i128) -> usize {
        self.edges.partition_point(|&e| e <= v)
    }
    fn range(&self, k: usize) -> (i128, i128) {
        let lo = if k == 0 { i128::MIN } else { self.edges[k - 1] };
        let hi = if k == self.edges.len() { i128::MAX } else { self.edges[k] - 1 };
        (lo, hi)
    }
    /// File members `(slot, lo, hi)` in the buckets: a member fails in every bucket wholly
    /// below `lo` or above `hi`, and is a boundary of the (at most two) buckets holding its
    /// ends unless it covers them whole.
    ///
    /// The fail bits are set a 64-slot word at a time: each member toggles its bit at rows
    /// 0, `kl`, `kh + 1` and `n`, and one pass down the rows ORs each row's mask into the
    /// word. Members come in slot order (a flush files consecutive slots), so this is one
    /// write per row for the whole batch where setting bit by bit took one per member and
    /// row: up to 63 cache lines per member.
    ///
    /// `bulk`: the buckets are new and filled whole (a re-cut): their ends are appended and
    /// each bucket sorted once at the end.
    fn place(&mut self, list: &[(u32, i128, i128)], bulk: bool) {
        let n = self.fail.rows();
        let mut toggles = [0u64; BUCKETS + 1];
        let toggles = &mut toggles[..=n];
        let mut word = None;
        for &(slot, lo, hi) in list {
            let w = (slot / 64) as usize;
            if word != Some(w) {
                if let Some(prev) = word {
                    self.fail.or_toggled(prev, toggles);
                }
                word = Some(w);
            }
            let bit = 1u64 << (slot % 64);
            toggles[0] ^= bit;
            toggles[n] ^= bit;
            if lo > hi {
                continue;
            }
            let (kl, kh) = (self.bucket(lo), self.bucket(hi));
            toggles[kl] ^= bit;
            toggles[kh + 1] ^= bit;
            for k in [kl, kh].into_iter().take(if kl == kh { 1 } else { 2 }) {
                let (bl, bh) = self.range(k);
                if !(lo <= bl && hi >= bh) {
                    self.boundary[k].push((bl, bh), slot, lo, hi, bulk);
                }
            }
        }
        if let Some(w) = word {
            self.fail.or_toggled(w, toggles);
        }
        if bulk {
            // A re-cut: every bucket was filled whole; sort each once. (Walking every
            // bucket after each flush of 32 members read 100 KB an attribute.)
            for k in 0..self.boundary.len() {
                let range = self.range(k);
                self.boundary[k].sort(range);
            }
        }
    }
    fn memory(&self) -> usize {
        self.edges.capacity() * 16
            + self.fail.data.capacity() * 8
            + self.boundary.iter().map(Boundary::memory).sum::<usize>()
            + self.constrained.0.capacity() * 8
    }
}

#[derive(Debug, Clone, Default)]
struct Cluster {
    /// The (attribute, value) the cluster is filed under; `None` for cluster 0.
    key: Option<(AttrId, i128)>,
    members: Vec<Option<Member>>,
    free: Vec<u32>,
    /// Removed members whose bits and boundary entries are still in the buckets: their
    /// `never` bit hides them, and a sweep clears them (all at once, when there are enough)
    /// before their slots are used again. Clearing one member's bit from every bucket
    /// would touch a cache line per bucket.
    dead: Vec<u32>,
    dead_mask: Bits,
    /// Slots the bitsets skip: free ones, members whose intervals are empty, and pending ones.
    never: Bits,
    /// Members not yet filed in the buckets (their `never` bit is set): checked exactly.
    pending: Vec<u32>,
    /// The pending members' intervals, (index in `pending`, attribute, lo, hi): an event
    /// checks them here, next to each other, and looks at a member only when all held.
    pending_iv: Vec<(u32, AttrId, i128, i128)>,
    attrs: Vec<AttrIndex>,
    /// `attrs[i].attr`, kept apart so that finding an attribute reads one cache line.
    attr_ids: Vec<AttrId>,
    live: usize,
}

impl Cluster {
    /// Prefetch the lines an insert writes.
    #[inline]
    fn warm(&self) {
        use crate::book::prefetch;
        if let Some(x) = self.free.last() {
            prefetch(x);
        }
        if let Some(x) = self.members.last() {
            prefetch(x);
        }
        if let Some(x) = self.never.0.last() {
            prefetch(x);
        }
        if let Some(x) = self.pending.last() {
            prefetch(x);
        }
        if let Some(x) = self.pending_iv.last() {
            prefetch(x);
        }
    }
    fn words(&self) -> usize {
        self.members.len().div_ceil(64)
    }
    /// File `m`, whose intervals are `intervals` (one per attribute); `slab` holds every
    /// member's strategy, `m`'s included (a flush may re-cut).
    fn insert(&mut self, m: Member, intervals: &[Iv], slab: &[Option<Entry>]) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                let s = self.members.len() as u32;
                self.members.push(None);
                let w = self.words();
                if w != self.never.0.len() {
                    self.never.grow(w);
                    self.dead_mask.grow(w);
                    for a in &mut self.attrs {
                        a.fail.grow(w);
                        a.constrained.grow(w);
                    }
                }
                s
            }
        };
        // Pending until the next flush, or for ever when an interval is empty. A pending
        // member touches no attribute index yet: the flush does that for the whole batch,
        // while their cache lines are warm.
        self.never.set(slot);
        if intervals.iter().any(|&(_, lo, hi)| lo > hi) {
            for &(attr, _, _) in intervals {
                self.count_in(attr, slot);
            }
        } else {
            let p = self.pending.len() as u32;
            self.pending_iv.extend(intervals.iter().map(|&(attr, lo, hi)| (p, attr, lo, hi)));
            self.pending.push(slot);
        }
        self.members[slot as usize] = Some(m);
        self.live += 1;
        if self.pending.len() >= PENDING {
            self.flush(slab);
        }
        slot
    }
    /// Member `slot` has an interval on `attr`: count it in the attribute's index.
    fn count_in(&mut self, attr: AttrId, slot: u32) {
        let i = match self.attr_ids.iter().position(|&a| a == attr) {
            Some(i) => i,
            None => {
                self.attrs.push(AttrIndex::new(attr, self.words()));
                self.attr_ids.push(attr);
                self.attrs.len() - 1
            }
        };
        let a = &mut self.attrs[i];
        a.constrained.set(slot);
        a.members += 1;
    }
    /// File the pending members in the buckets (re-cutting an attribute whose members have
    /// grown fourfold since its last cut, which files them all).
    fn flush(&mut self, slab: &[Option<Entry>]) {
        for k in 0..self.pending_iv.len() {
            let (p, attr, _, _) = self.pending_iv[k];
            self.count_in(attr, self.pending[p as usize]);
        }
        let mut list = Vec::with_capacity(self.pending.len());
        for i in 0..self.attrs.len() {
            let a = &self.attrs[i];
            if a.members >= BUCKET_FROM && a.members >= RECUT_GROWTH * a.cut_at {
                self.recut(i, slab);
                continue;
            }
            list.clear();
            list.extend(
                self.pending_iv
                    .iter()
                    .filter(|x| x.1 == a.attr)
                    .map(|&(p, _, lo, hi)| (self.pending[p as usize], lo, hi)),
            );
            // Slot order: `place` writes each 64-slot word's rows once.
            list.sort_unstable_by_key(|x| x.0);
            self.attrs[i].place(&list, false);
        }
        for &slot in &self.pending {
            self.never.clear(slot);
        }
        self.pending.clear();
        self.pending_iv.clear();
    }
    fn remove(&mut self, slot: u32) {
        if self.members[slot as usize].take().is_none() {
            return;
        }
        if let Some(p) = self.pending.iter().position(|&x| x == slot) {
            // Never counted in an attribute index. The last pending member takes its place.
            let (p, last) = (p as u32, (self.pending.len() - 1) as u32);
            self.pending.swap_remove(p as usize);
            self.pending_iv.retain(|x| x.0 != p);
            self.pending_iv.iter_mut().filter(|x| x.0 == last).for_each(|x| x.0 = p);
        } else {
            // The attributes it has an interval on are those that count it.
            for a in &mut self.attrs {
                if a.constrained.get(slot) {
                    a.constrained.clear(slot);
                    a.members -= 1;
                }
            }
            if self.attrs.iter().any(|a| a.members == 0) {
                self.attrs.retain(|a| a.members > 0);
                self.attr_ids.clear();
                self.attr_ids.extend(self.attrs.iter().map(|a| a.attr));
            }
        }
        self.never.set(slot);
        self.dead.push(slot);
        self.dead_mask.set(slot);
        self.live -= 1;
        if self.dead.len() >= (self.members.len() / 8).max(32) {
            self.sweep();
        }
    }
    /// Clear the removed members from every bucket and free their slots.
    fn sweep(&mut self) {
        let dead = &self.dead_mask;
        for a in &mut self.attrs {
            for k in 0..a.boundary.len() {
                let range = a.range(k);
                a.boundary[k].retain(range, |slot| dead.0[(slot / 64) as usize] >> (slot % 64) & 1 == 0);
            }
            a.fail.clear_rows(&self.dead);
        }
        for &slot in &self.dead {
            self.dead_mask.clear(slot);
        }
        self.free.append(&mut self.dead);
    }
    /// Cut attribute `i`'s value axis at quantiles of its members' interval ends and refile
    /// its members (this attribute of this cluster only).
    fn recut(&mut self, i: usize, slab: &[Option<Entry>]) {
        let attr = self.attrs[i].attr;
        let mut ends: Vec<i128> = Vec::new();
        let mut list: Vec<(u32, i128, i128)> = Vec::new();
        for (slot, m) in self.members.iter().enumerate() {
            let Some(m) = m else { continue };
            let e = slab[m.entry as usize].as_ref().expect("a member's strategy is in the slab");
            if let Some((lo, hi)) = e.interval_on(attr) {
                list.push((slot as u32, lo, hi));
                // Bucket starts that separate members: just past a `hi`, at a `lo`.
                if lo != i128::MIN {
                    ends.push(lo);
                }
                if hi != i128::MAX {
                    ends.push(hi + 1);
                }
            }
        }
        ends.sort_unstable();
        let nb = (list.len() / MEMBERS_PER_BUCKET).clamp(MIN_BUCKETS, BUCKETS);
        let mut edges: Vec<i128> = (1..nb).filter_map(|q| ends.get(q * ends.len() / nb).copied()).collect();
        edges.dedup();
        let words = self.words();
        let a = &mut self.attrs[i];
        a.edges = edges;
        a.fail = BitRows::new(a.edges.len() + 1, words);
        a.boundary = vec![Boundary::default(); a.edges.len() + 1];
        a.place(&list, true);
        a.cut_at = a.members;
    }
    /// Append the ids of the members that `e` satisfies.
    fn matches(&self, e: &MatchEvent, acc: &mut Vec<u64>, keys: &mut Vec<(usize, i128, Cut)>, out: &mut Vec<u64>) {
        if self.live == 0 {
            return;
        }
        acc.clear();
        acc.extend_from_slice(&self.never.0);
        // Every attribute's bucket is found first, asking for its row and boundary lists as
        // it is found; then, a pass for each as each needs the last, the lists' guides and
        // the keys of the event's sub-range; then the ORs and the marks. One pass waited on
        // each attribute's row in turn; a cluster of trading strategies is small, and its
        // rows are rarely in cache when an event names its symbol (`tickplant bench match
        // --workload b`). A small cluster's bucket edges (a few lines an attribute) are
        // asked for all at once before the searches: searched cold, one attribute after
        // another, each step waited on a line (a quarter of workload b's `match_event`).
        // (At most 16 attributes, 128 lines: a cluster of more is searched as it comes.)
        if self.attrs.len() <= 16 {
            for a in &self.attrs {
                if a.edges.len() <= SMALL_EDGES {
                    for line in a.edges.chunks(4) {
                        crate::book::prefetch(&line[0]);
                    }
                }
            }
        }
        keys.clear();
        for a in &self.attrs {
            let k = match e.get(a.attr) {
                None => (usize::MAX, 0, Cut { base: 0, shift: 0 }),
                Some(v) => {
                    let v = key(v);
                    let k = a.bucket(v);
                    crate::book::prefetch(&a.fail.row(k)[0]);
                    crate::book::prefetch(&a.boundary[k]);
                    (k, v, Cut::of(a.range(k)))
                }
            };
            keys.push(k);
        }
        for (a, &(k, _, _)) in self.attrs.iter().zip(keys.iter()) {
            if let Some(b) = a.boundary.get(k) {
                for g in [&b.lo.guide, &b.hi.guide].into_iter().flatten() {
                    crate::book::prefetch(&**g);
                }
            }
        }
        // The sub-range of each boundary list the event's key falls in, and the first slots
        // it will mark, are asked for now, and are in cache when the rows have been ORed.
        for (a, &(k, v, cut)) in self.attrs.iter().zip(keys.iter()) {
            if let (true, Ok(v)) = (k != usize::MAX, i64::try_from(v)) {
                let b = &a.boundary[k];
                let sub = cut.sub(v).min(SUBRANGES - 1);
                // Where the event's sub-range starts in each list (a short list: its
                // middle, where its search starts).
                let at = |e: &Ends, s: usize| e.guide.as_ref().map_or(e.sorted as usize / 2, |g| g[s] as usize);
                let (lo_at, hi_at) = (at(&b.lo, sub), at(&b.hi, sub));
                for (e, i) in [(&b.lo, lo_at), (&b.hi, hi_at)] {
                    if let Some(x) = e.keys.get(i) {
                        crate::book::prefetch(x);
                    }
                    let t = e.sorted as usize;
                    if let (Some(k), Some(s)) = (e.keys.get(t), e.slots.get(t)) {
                        crate::book::prefetch(k);
                        crate::book::prefetch(s);
                    }
                }
                for x in [b.lo.sorted_slots().get(lo_at), b.hi.slots.first()].into_iter().flatten() {
                    crate::book::prefetch(x);
                }
            }
        }
        // The rows are ORed eight attributes at a time, a cache line of each per step: one
        // pass over `acc` for eight rows, and eight streams read at once
        // (`tickplant bench match --workload a`: see docs/perf-log/matching.md).
        let words = acc.len();
        let mut group: [&[u64]; ROWS_AT_ONCE] = [&[]; ROWS_AT_ONCE];
        let mut n = 0;
        for (a, &(k, _, _)) in self.attrs.iter().zip(keys.iter()) {
            group[n] = if k == usize::MAX { &a.constrained.0[..words] } else { &a.fail.row(k)[..words] };
            n += 1;
            if n == ROWS_AT_ONCE {
                or_rows(acc, &group);
                n = 0;
            }
        }
        if n > 0 {
            or_rows(acc, &group[..n]);
        }

        for (a, &(k, v, cut)) in self.attrs.iter().zip(keys.iter()) {
            if k != usize::MAX {
                a.boundary[k].knock_out(cut, v, acc);
            }
        }
        let n = self.members.len();
        let survivors = |w: usize, word: u64| {
            let mut live = !word;
            if (w + 1) * 64 > n {
                live &= (1u64 << (n - w * 64)) - 1;
            }
            live
        };
        // The survivors' records are far apart and rarely in cache: ask for them all
        // first, then read them (one pass waited on each in turn; workload a, perf).
        for (w, &word) in acc.iter().enumerate() {
            let mut live = survivors(w, word);
            while live != 0 {
                crate::book::prefetch(&self.members[w * 64 + live.trailing_zeros() as usize]);
                live &= live - 1;
            }
        }
        for (w, &word) in acc.iter().enumerate() {
            let mut live = survivors(w, word);
            while live != 0 {
                let slot = w * 64 + live.trailing_zeros() as usize;
                live &= live - 1;
                if let Some(m) = &self.members[slot] {
                    if m.residual.iter().all(|p| p.holds(e)) {
                        out.push(m.id);
                    }
                }
            }
        }
        // Pending members (at most PENDING <= 64): knock out those an interval fails.
        let mut failed = 0u64;
        for &(p, a, lo, hi) in &self.pending_iv {
            let inside = e.get(a).is_some_and(|v| (lo..=hi).contains(&key(v)));
            failed |= u64::from(!inside) << p;
        }
        for (p, &slot) in self.pending.iter().enumerate() {
            if failed >> p & 1 == 0 {
                if let Some(m) = &self.members[slot as usize] {
                    if m.residual.iter().all(|r| r.holds(e)) {
                        out.push(m.id);
                    }
                }
            }
        }
    }
    fn memory(&self) -> usize {
        let members: usize =
            self.members.iter().flatten().map(|m| m.residual.iter().map(pred_bytes).sum::<usize>()).sum();
        self.members.capacity() * std::mem::size_of::<Option<Member>>()
            + members
            + (self.free.capacity() + self.dead.capacity() + self.pending.capacity() + self.attr_ids.capacity()) * 4
            + self.dead_mask.0.capacity() * 8
            + self.pending_iv.capacity() * std::mem::size_of::<(u32, AttrId, i128, i128)>()
            + self.never.0.capacity() * 8
            + self.attrs.iter().map(AttrIndex::memory).sum::<usize>()
    }
}

fn pred_bytes(p: &Pred) -> usize {
    std::mem::size_of::<Pred>()
        + match &p.rhs {
            Rhs::In(v) => v.capacity() * std::mem::size_of::<Value>(),
            _ => 0,
        }
}

/// Where a strategy was filed: (cluster, slot) per copy. Most strategies have one copy,
/// kept inline (no allocation per insert).
#[derive(Debug, Clone)]
enum Placed {
    One([(ClusterId, u32); 1]),
    Many(Vec<(ClusterId, u32)>),
}

impl Placed {
    fn as_slice(&self) -> &[(ClusterId, u32)] {
        match self {
            Placed::One(x) => x,
            Placed::Many(v) => v,
        }
    }
}

/// A predicate `attr op value` whose value fits an `i64`, in 16 bytes (a [`Pred`] takes
/// 48: an `i128` value, and room for the other forms of [`Rhs`]).
#[derive(Debug, Clone, Copy)]
struct Packed {
    value: i64,
    attr: AttrId,
    op: Op,
    sym: bool,
}

impl Packed {
    fn of(p: &Pred) -> Option<Packed> {
        let (value, sym) = match p.rhs {
            Rhs::Value(Value::Num(n)) => (i64::try_from(n).ok()?, false),
            Rhs::Value(Value::Sym(s)) => (i64::from(s), true),
            _ => return None,
        };
        Some(Packed { value, attr: p.attr, op: p.op, sym })
    }
    fn value(self) -> Value {
        if self.sym {
            Value::Sym(self.value as SymId)
        } else {
            Value::Num(i128::from(self.value))
        }
    }
    fn pred(self) -> Pred {
        Pred { attr: self.attr, op: self.op, rhs: Rhs::Value(self.value()) }
    }
}

/// A strategy's predicates as the index keeps them: packed when every one is `attr op
/// value` with the value in an `i64` (nearly always), else as written. As written they were
/// the biggest item of a dense index (20 predicates of 48 bytes, 960 of 2,441 bytes a
/// strategy: `tickplant bench match --workload a`).
#[derive(Debug, Clone)]
enum Preds {
    Packed(Box<[Packed]>),
    Written(Box<[Pred]>),
}

impl Preds {
    fn new(preds: Vec<Pred>) -> Preds {
        match preds.iter().map(Packed::of).collect::<Option<Vec<_>>>() {
            Some(p) => Preds::Packed(p.into_boxed_slice()),
            None => Preds::Written(preds.into_boxed_slice()),
        }
    }
    /// Each predicate's attribute, operator and value (`None`: not `attr op value`), in order.
    fn values(&self) -> impl Iterator<Item = (AttrId, Op, Option<Value>)> + '_ {
        let (p, w): (&[Packed], &[Pred]) = match self {
            Preds::Packed(p) => (p, &[]),
            Preds::Written(w) => (&[], w),
        };
        p.iter().map(|x| (x.attr, x.op, Some(x.value()))).chain(w.iter().map(|x| {
            let v = match x.rhs {
                Rhs::Value(v) => Some(v),
                _ => None,
            };
            (x.attr, x.op, v)
        }))
    }
    fn to_vec(&self) -> Vec<Pred> {
        match self {
            Preds::Packed(p) => p.iter().map(|x| x.pred()).collect(),
            Preds::Written(w) => w.to_vec(),
        }
    }
    /// Brute force: every predicate holds.
    fn hold(&self, e: &MatchEvent) -> bool {
        match self {
            Preds::Packed(p) => p.iter().all(|x| x.pred().holds(e)),
            Preds::Written(w) => w.iter().all(|x| x.holds(e)),
        }
    }
    fn memory(&self) -> usize {
        match self {
            Preds::Packed(p) => std::mem::size_of_val::<[Packed]>(p),
            Preds::Written(w) => w.iter().map(pred_bytes).sum(),
        }
    }
}

/// The interval of keys `attr op v` holds for, or `None` for `!=` (a residual).
fn interval(op: Op, v: Value) -> Option<(i128, i128)> {
    let k = key(v);
    match op {
        Op::Eq => Some((k, k)),
        Op::Ne => None,
        Op::Lt => Some((i128::MIN, k - 1)),
        Op::Le => Some((i128::MIN, k)),
        Op::Gt => Some((k + 1, i128::MAX)),
        Op::Ge => Some((k, i128::MAX)),
    }
}

#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    preds: Preds,
    /// The access predicate's place in `preds` (the one the clusters are keyed by), or
    /// `u32::MAX` for none.
    access: u32,
    placed: Placed,
}

impl Entry {
    fn strategy(&self) -> Strategy {
        Strategy { id: self.id, preds: self.preds.to_vec() }
    }
    /// Each predicate's interval but the access one's (`!=` and the others have none).
    fn pred_intervals(&self) -> impl Iterator<Item = Iv> + '_ {
        self.preds.values().enumerate().filter_map(move |(i, (attr, op, v))| {
            let (lo, hi) = v.and_then(|v| interval(op, v))?;
            (i as u32 != self.access).then_some((attr, lo, hi))
        })
    }
    /// The intervals of the predicates but the access one, an intersection per attribute
    /// in order of first appearance, into `out`.
    fn intervals(&self, out: &mut Vec<Iv>) {
        for (attr, lo, hi) in self.pred_intervals() {
            match out.iter_mut().find(|x| x.0 == attr) {
                Some(x) => {
                    x.1 = x.1.max(lo);
                    x.2 = x.2.min(hi);
                }
                None => out.push((attr, lo, hi)),
            }
        }
    }
    /// The interval on `attr` of [`Entry::intervals`], if it has one.
    fn interval_on(&self, attr: AttrId) -> Option<(i128, i128)> {
        self.pred_intervals()
            .filter(|x| x.0 == attr)
            .map(|(_, lo, hi)| (lo, hi))
            .reduce(|(l, h), (lo, hi)| (l.max(lo), h.min(hi)))
    }
}

/// What [`Matcher::explain`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explain {
    /// Each predicate as written, and whether it held.
    pub preds: Vec<(String, bool)>,
    /// The index of the first predicate that failed (`None`: the strategy matches).
    pub first_failed: Option<usize>,
}

/// The strategy index.
#[derive(Debug)]
pub struct Matcher {
    schema: Schema,
    /// Strategy id -> its place in `slab`. The map holds 16-byte buckets, not the entries:
    /// at a million strategies a map of whole entries (72 bytes a bucket) spent most of an
    /// insert's time zeroing the fresh pages of each doubled table, while a big `Vec`
    /// grows by remapping its pages, with nothing copied or zeroed again.
    entries: FxMap<u64, u32>,
    slab: Vec<Option<Entry>>,
    free_entries: Vec<u32>,
    /// An insert's intervals are gathered here, then copied once into an exact allocation.
    scratch: Vec<(AttrId, i128, i128)>,
    /// Cluster 0 holds the strategies without an equality predicate.
    clusters: Vec<Cluster>,
    free_clusters: Vec<ClusterId>,
    keyed: FxMap<(AttrId, i128), ClusterId>,
    /// Attributes that key clusters, with how many clusters each keys.
    access: Vec<(AttrId, usize)>,
    acc: Vec<u64>,
    /// Per attribute of a cluster, the event's bucket and key (scratch of `match_event`).
    keys: Vec<(usize, i128, Cut)>,
    hits: Vec<ClusterId>,
}

/// Why [`Matcher::insert_text`] refused a strategy: its text, or its place in the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertTextError {
    Parse(ParseError),
    Insert(InsertError),
}

impl std::fmt::Display for InsertTextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InsertTextError::Parse(e) => e.fmt(f),
            InsertTextError::Insert(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InsertTextError {}

/// Why an insert was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertError {
    DuplicateId(u64),
}

impl std::fmt::Display for InsertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InsertError::DuplicateId(id) => write!(f, "strategy id {id} is already in the index"),
        }
    }
}

impl std::error::Error for InsertError {}

impl Default for Matcher {
    fn default() -> Self {
        Matcher::new()
    }
}

impl Matcher {
    pub fn new() -> Self {
        Matcher {
            schema: Schema::default(),
            entries: FxMap::default(),
            slab: Vec::new(),
            free_entries: Vec::new(),
            scratch: Vec::new(),
            // Cluster 0 exists from the start: a keyed cluster must never get its index.
            clusters: vec![Cluster::default()],
            free_clusters: Vec::new(),
            keyed: FxMap::default(),
            access: Vec::new(),
            acc: Vec::new(),
            keys: Vec::new(),
            hits: Vec::new(),
        }
    }
    /// A matcher over strategies parsed with `schema`.
    pub fn with_schema(schema: Schema) -> Self {
        Matcher { schema, ..Self::new() }
    }
    pub fn schema(&self) -> &Schema {
        &self.schema
    }
    pub fn schema_mut(&mut self) -> &mut Schema {
        &mut self.schema
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Strategy `id`, as inserted.
    pub fn strategy(&self, id: u64) -> Option<Strategy> {
        self.entry(id).map(Entry::strategy)
    }
    /// Is strategy `id` in the index?
    pub fn contains(&self, id: u64) -> bool {
        self.entries.contains_key(&id)
    }
    fn entry(&self, id: u64) -> Option<&Entry> {
        self.entries.get(&id).and_then(|&i| self.slab[i as usize].as_ref())
    }
    fn live_entries(&self) -> impl Iterator<Item = &Entry> {
        self.slab.iter().flatten()
    }

    /// Parse `text` (one strategy) with the matcher's schema and insert it.
    pub fn insert_text(&mut self, text: &str) -> Result<u64, InsertTextError> {
        let s = self.schema.parse_strategy(text, 1).map_err(InsertTextError::Parse)?;
        let id = s.id;
        self.insert(s).map_err(InsertTextError::Insert)?;
        Ok(id)
    }

    /// Add a strategy (parsed with this matcher's schema).
    pub fn insert(&mut self, s: Strategy) -> Result<(), InsertError> {
        if self.entries.contains_key(&s.id) {
            return Err(InsertError::DuplicateId(s.id));
        }
        // The access predicate: an equality on the attribute keying the most clusters.
        let access = s
            .preds
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let copies = match &p.rhs {
                    Rhs::Value(_) if p.op == Op::Eq => 1,
                    Rhs::In(v) if !v.is_empty() && v.len() <= MAX_IN_COPIES => v.len(),
                    _ => return None,
                };
                let distinct = self.access.iter().find(|a| a.0 == p.attr).map_or(0, |a| a.1);
                Some((i, copies, distinct))
            })
            .max_by_key(|&(i, copies, distinct)| (copies == 1, distinct, usize::MAX - i));
        // Start loading the cluster's insert-path lines now: in a big index they are cold,
        // and loaded one after another they would cost a memory latency each.
        let first = match access {
            None => Some(0),
            Some((i, 1, _)) => match &s.preds[i].rhs {
                Rhs::Value(v) => self.keyed.get(&(s.preds[i].attr, key(*v))).copied(),
                _ => None,
            },
            Some(_) => None,
        };
        if let Some(c) = first {
            self.clusters[c as usize].warm();
        }
        // `!=`, `attr op attr` and non-access `in`: checked as written on the survivors.
        let at_access = access.map(|a| a.0);
        let residual: Box<[Pred]> = s
            .preds
            .iter()
            .enumerate()
            .filter(|&(i, p)| {
                Some(i) != at_access
                    && match p.rhs {
                        Rhs::Value(v) => interval(p.op, v).is_none(),
                        _ => true,
                    }
            })
            .map(|(_, p)| p.clone())
            .collect();
        // The clusters it goes in: one for each value of the access predicate.
        let (many, one): (Vec<ClusterId>, ClusterId) = match at_access {
            None => (Vec::new(), 0),
            Some(i) => {
                let p = &s.preds[i];
                let values = match &p.rhs {
                    Rhs::Value(v) => std::slice::from_ref(v),
                    Rhs::In(v) => &v[..],
                    Rhs::Attr(_) => unreachable!("attr-vs-attr is never an access predicate"),
                };
                let (last, rest) = values.split_last().expect("access values are never empty");
                let many = rest.iter().map(|v| self.cluster_for(p.attr, key(*v))).collect();
                (many, self.cluster_for(p.attr, key(*last)))
            }
        };
        let id = s.id;
        // In the slab first: a cluster's re-cut reads its members' strategies there.
        let entry = Some(Entry {
            id,
            preds: Preds::new(s.preds),
            access: at_access.map_or(u32::MAX, |i| i as u32),
            placed: Placed::One([(one, 0)]),
        });
        let at = match self.free_entries.pop() {
            Some(at) => {
                self.slab[at as usize] = entry;
                at
            }
            None => {
                self.slab.push(entry);
                (self.slab.len() - 1) as u32
            }
        };
        let mut intervals = std::mem::take(&mut self.scratch);
        intervals.clear();
        if let Some(e) = &self.slab[at as usize] {
            e.intervals(&mut intervals);
        }
        let member = Member { id, entry: at, residual };
        let mut copies = Vec::with_capacity(many.len() + usize::from(!many.is_empty()));
        for &c in &many {
            copies.push((c, self.clusters[c as usize].insert(member.clone(), &intervals, &self.slab)));
        }
        let slot = self.clusters[one as usize].insert(member, &intervals, &self.slab);
        self.scratch = intervals;
        let placed = if copies.is_empty() {
            Placed::One([(one, slot)])
        } else {
            copies.push((one, slot));
            Placed::Many(copies)
        };
        if let Some(e) = &mut self.slab[at as usize] {
            e.placed = placed;
        }
        self.entries.insert(id, at);
        Ok(())
    }

    fn cluster_for(&mut self, attr: AttrId, k: i128) -> ClusterId {
        if let Some(&c) = self.keyed.get(&(attr, k)) {
            return c;
        }
        let c = match self.free_clusters.pop() {
            Some(c) => c,
            None => {
                self.clusters.push(Cluster::default());
                (self.clusters.len() - 1) as ClusterId
            }
        };
        self.keyed.insert((attr, k), c);
        self.clusters[c as usize].key = Some((attr, k));
        match self.access.iter_mut().find(|a| a.0 == attr) {
            Some(a) => a.1 += 1,
            None => self.access.push((attr, 1)),
        }
        c
    }

    /// Remove a strategy; returns it, or `None` when no strategy has that id.
    pub fn remove(&mut self, id: u64) -> Option<Strategy> {
        let at = self.entries.remove(&id)?;
        let e = self.slab[at as usize].take().expect("a mapped id has its entry");
        self.free_entries.push(at);
        for &(c, slot) in e.placed.as_slice() {
            let cl = &mut self.clusters[c as usize];
            cl.remove(slot);
            if c != 0 && cl.live == 0 {
                // Forget the empty cluster so that events stop visiting it.
                if let Some(k) = cl.key {
                    self.keyed.remove(&k);
                    if let Some(a) = self.access.iter_mut().find(|a| a.0 == k.0) {
                        a.1 -= 1;
                    }
                    self.access.retain(|a| a.1 > 0);
                }
                self.clusters[c as usize] = Cluster::default();
                self.free_clusters.push(c);
            }
        }
        Some(e.strategy())
    }

    /// The ids of the strategies `e` satisfies, ascending, into `out` (cleared first).
    pub fn match_event(&mut self, e: &MatchEvent, out: &mut Vec<u64>) {
        out.clear();
        self.hits.clear();
        self.hits.push(0);
        for &(attr, _) in &self.access {
            if let Some(v) = e.get(attr) {
                if let Some(&c) = self.keyed.get(&(attr, key(v))) {
                    self.hits.push(c);
                }
            }
        }
        for &c in &self.hits {
            self.clusters[c as usize].matches(e, &mut self.acc, &mut self.keys, out);
        }
        out.sort_unstable();
    }

    /// Brute force: every strategy evaluated one by one (the oracle), ascending ids.
    pub fn match_brute_force(&self, e: &MatchEvent, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.live_entries().filter(|x| x.preds.hold(e)).map(|x| x.id));
        out.sort_unstable();
    }

    /// Which predicates of strategy `id` held on `e`, and the first that failed.
    pub fn explain(&self, id: u64, e: &MatchEvent) -> Option<Explain> {
        let s = self.entry(id)?.preds.to_vec();
        let preds: Vec<(String, bool)> = s.iter().map(|p| (self.schema.show_pred(p), p.holds(e))).collect();
        let first_failed = preds.iter().position(|p| !p.1);
        Some(Explain { preds, first_failed })
    }

    /// Bytes the index holds (its structures, the strategies as written, and the maps).
    pub fn memory_bytes(&self) -> usize {
        let clusters: usize = self.clusters.iter().map(Cluster::memory).sum::<usize>()
            + self.clusters.capacity() * std::mem::size_of::<Cluster>();
        let entries: usize = self.entries.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
            + self.slab.capacity() * std::mem::size_of::<Option<Entry>>()
            + self.free_entries.capacity() * 4
            + self
                .live_entries()
                .map(|e| {
                    e.preds.memory()
                        + match &e.placed {
                            Placed::One(_) => 0,
                            Placed::Many(v) => v.capacity() * 8,
                        }
                })
                .sum::<usize>();
        let keyed = self.keyed.capacity() * (std::mem::size_of::<((AttrId, i128), ClusterId)>() + 1);
        clusters + entries + keyed + self.acc.capacity() * 8
    }

    /// An event from (attribute name, value as text) pairs: numbers as JSON numbers
    /// ([`parse_json_num`]; a string's number as a plain decimal),
    /// strings as they are. Attributes no strategy names are ignored; a value of the wrong
    /// type for its attribute is an error.
    pub fn event_from_pairs<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, EventValue<'a>)>,
        e: &mut MatchEvent,
    ) -> Result<(), EventError> {
        e.values.clear();
        e.values.resize(self.schema.attrs(), None);
        for (name, v) in pairs {
            let Some(a) = self.schema.attr_id(name) else { continue };
            let want = self.schema.attr_type(a);
            let value = match v {
                EventValue::Num(text) => {
                    if want == Some(Type::Str) {
                        let reason = format!("{name} is a string attribute, the event gives the number {text}");
                        return Err(EventError { attr: name.to_string(), reason });
                    }
                    let num = parse_json_num(text)
                        .map_err(|err| EventError { attr: name.to_string(), reason: format!("{name}: {err}") })?;
                    Value::Num(num)
                }
                EventValue::Str(s) => match want {
                    Some(Type::Num) => Value::Num(parse_num(s).map_err(|err| EventError {
                        attr: name.to_string(),
                        // A decimal that is out of range says so; other text is not a number.
                        reason: if err.why == "is not a number" {
                            format!("{name} is a number attribute, the event gives {s:?}")
                        } else {
                            format!("{name}: {err}")
                        },
                    })?),
                    // A string no strategy names equals none of them.
                    _ => Value::Sym(self.schema.sym_id(s).unwrap_or(UNKNOWN_SYM)),
                },
            };
            e.set(a, value);
        }
        Ok(())
    }
}

/// An event value [`Matcher::event_from_pairs`] cannot take: the attribute and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    pub attr: String,
    pub reason: String,
}

impl std::fmt::Display for EventError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for EventError {}

/// A value of an event as given (JSON number text or JSON string).
#[derive(Debug, Clone, Copy)]
pub enum EventValue<'a> {
    Num(&'a str),
    Str(&'a str),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(m: &Matcher, pairs: &[(&str, &str)]) -> MatchEvent {
        let mut e = MatchEvent::default();
        m.event_from_pairs(
            pairs.iter().map(|&(k, v)| {
                (
                    k,
                    if v.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
                        EventValue::Num(v)
                    } else {
                        EventValue::Str(v)
                    },
                )
            }),
            &mut e,
        )
        .unwrap();
        e
    }

    #[test]
    fn matches_explains_and_removes() {
        let mut m = Matcher::new();
        for s in [
            "7: symbol = \"ABX\" and tsx_ask < nyse_bid and tsx_ask <= 40.04",
            "8: symbol in (\"AAPL\", \"MSFT\") and spread < 0.01 and last > 190",
            "9: last > 100 and last != 150",
            "10: spread <= 0.02 and spread > 0.03",
        ] {
            m.insert_text(s).unwrap();
        }
        let e = event(&m, &[("symbol", "ABX"), ("tsx_ask", "40.01"), ("nyse_bid", "40.02"), ("last", "150")]);
        let mut out = Vec::new();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![7]);
        let e2 = event(&m, &[("symbol", "MSFT"), ("spread", "0.009"), ("last", "190.5")]);
        m.match_event(&e2, &mut out);
        assert_eq!(out, vec![8, 9]);
        let x = m.explain(8, &e).unwrap();
        assert_eq!(x.first_failed, Some(0));
        assert_eq!(x.preds[0].0, "symbol in (\"AAPL\", \"MSFT\")");
        assert_eq!(m.explain(7, &e).unwrap().first_failed, None);
        assert!(m.remove(8).is_some());
        assert!(m.remove(8).is_none());
        m.match_event(&e2, &mut out);
        assert_eq!(out, vec![9]);
        assert_eq!(m.insert_text("9: x = 1").unwrap_err().to_string(), "strategy id 9 is already in the index");
        assert!(m.memory_bytes() > 0);
    }

    /// `place`'s row masks equal setting each member's bit row by row (the naive form), on
    /// random intervals, in any slot order, over several words, with empty intervals.
    #[test]
    fn place_sets_the_rows_the_naive_form_sets() {
        use proptest::prelude::*;
        let member = (0u32..300, -5i128..70, 0i128..40);
        proptest::proptest!(|(edges in proptest::collection::btree_set(0i128..64, 0..BUCKETS), list in proptest::collection::vec(member, 0..120))| {
            let edges: Vec<i128> = edges.into_iter().collect();
            let mut a = AttrIndex::new(0, 5);
            a.edges = edges.clone();
            a.fail = BitRows::new(edges.len() + 1, 5);
            a.boundary = vec![Boundary::default(); edges.len() + 1];
            // Distinct slots, as a cluster files them; `hi < lo` for some (empty).
            let mut seen = std::collections::HashSet::new();
            let list: Vec<(u32, i128, i128)> =
                list.into_iter().filter(|m| seen.insert(m.0)).map(|(s, lo, w)| (s, lo, lo + w - 8)).collect();
            let mut naive = a.clone();
            a.place(&list, false);
            let n = naive.fail.rows();
            for &(slot, lo, hi) in &list {
                if lo > hi {
                    naive.fail.set_rows(0..n, slot);
                    continue;
                }
                let (kl, kh) = (naive.bucket(lo), naive.bucket(hi));
                naive.fail.set_rows(0..kl, slot);
                naive.fail.set_rows(kh + 1..n, slot);
            }
            prop_assert_eq!(&a.fail.data, &naive.fail.data);
        });
    }

    /// A bucket's row and its boundary lists' marks together fail exactly the members whose
    /// interval misses the key, for every key: lists filled whole (a re-cut) or member by
    /// member in two batches (flushes), with removals (a sweep) after.
    #[test]
    fn rows_and_boundaries_fail_exactly_the_members_that_miss() {
        use proptest::prelude::*;
        // Ends and keys beyond an i64 too (the open end buckets hold them): unbounded ends
        // (`x < c` has no `lo`), and ends and keys past it.
        let member = (0u32..300, -40i128..200, 0i128..90, 0u8..12);
        let far = [i128::MIN, i128::from(i64::MIN) - 1, i128::from(i64::MIN), -(1 << 70)];
        let keys: Vec<i128> = (-45i128..300).chain(far).chain(far.map(|x| -x.max(-i128::MAX))).collect();
        proptest::proptest!(|(edges in proptest::collection::btree_set(-30i128..190, 0..40), list in proptest::collection::vec(member, 0..150), bulk: bool, dead in proptest::collection::vec(any::<bool>(), 300))| {
            let edges: Vec<i128> = edges.into_iter().collect();
            let mut a = AttrIndex::new(0, 5);
            a.edges = edges.clone();
            a.fail = BitRows::new(edges.len() + 1, 5);
            a.boundary = vec![Boundary::default(); edges.len() + 1];
            let mut seen = std::collections::HashSet::new();
            let mut list: Vec<(u32, i128, i128)> =
                list.into_iter().filter(|m| seen.insert(m.0)).map(|(s, lo, w, f)| {
                    let (l, h) = (lo, lo + w - 5);
                    match f {
                        0 => (s, far[usize::from(f % 4)], h),
                        1..=3 => (s, far[usize::from(f)], h),
                        4..=7 => (s, l, -far[usize::from(f - 4)].max(-i128::MAX)),
                        _ => (s, l, h),
                    }
                }).collect();
            list.sort_unstable_by_key(|x| x.0);
            if bulk {
                a.place(&list, true);
            } else {
                let (x, y) = list.split_at(list.len() / 2);
                a.place(x, false);
                a.place(y, false);
            }
            let check = |a: &AttrIndex, live: &dyn Fn(u32) -> bool| -> Result<(), TestCaseError> {
                for &v in &keys {
                    let k = a.bucket(v);
                    let mut acc = a.fail.row(k)[..5].to_vec();
                    a.boundary[k].knock_out(Cut::of(a.range(k)), v, &mut acc);
                    for &(slot, lo, hi) in &list {
                        if !live(slot) || lo > hi {
                            continue;
                        }
                        let failed = acc[(slot / 64) as usize] >> (slot % 64) & 1 == 1;
                        prop_assert_eq!(failed, v < lo || v > hi, "slot {} [{}, {}] at key {}", slot, lo, hi, v);
                    }
                }
                Ok(())
            };
            check(&a, &|_| true)?;
            for k in 0..a.boundary.len() {
                let range = a.range(k);
                a.boundary[k].retain(range, |slot| !dead[slot as usize]);
            }
            // The rows still fail the removed members (a sweep clears them); the lists
            // must still be right for the rest.
            check(&a, &|slot| !dead[slot as usize])?;
        });
    }

    /// A long boundary list (past [`IN_PLACE`] ends, so new ends wait in the tail and are
    /// merged [`TAIL`] at a time), filed one member at a time in random order, with equal
    /// keys, then thinned: its marks are exact at every key, tail or no tail.
    #[test]
    fn long_boundary_lists_with_tails_mark_exactly() {
        // A small xorshift: values in `lo..hi`.
        struct Rng(u64);
        impl Rng {
            fn gen_range(&mut self, r: std::ops::Range<i128>) -> i128 {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                r.start + (self.0 % (r.end - r.start) as u64) as i128
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let n = 3_000u32;
        let words = (n as usize).div_ceil(64);
        let mut a = AttrIndex::new(0, words);
        a.edges = vec![0, 1_000];
        a.fail = BitRows::new(3, words);
        a.boundary = vec![Boundary::default(); 3];
        let mut list = Vec::new();
        let check = |a: &AttrIndex, list: &[(u32, i128, i128)], rng: &mut Rng| {
            for _ in 0..50 {
                let v = rng.gen_range(-5i128..1_005);
                let k = a.bucket(v);
                let mut acc = a.fail.row(k)[..words].to_vec();
                a.boundary[k].knock_out(Cut::of(a.range(k)), v, &mut acc);
                for &(slot, lo, hi) in list {
                    let failed = acc[(slot / 64) as usize] >> (slot % 64) & 1 == 1;
                    assert_eq!(failed, v < lo || v > hi, "slot {slot} [{lo}, {hi}] at key {v}");
                }
            }
        };
        for slot in 0..n {
            let lo = rng.gen_range(-3i128..400);
            let hi = lo + rng.gen_range(0i128..900);
            a.place(&[(slot, lo, hi)], false);
            list.push((slot, lo, hi));
            if slot.is_multiple_of(97) {
                check(&a, &list, &mut rng);
            }
        }
        let b = &a.boundary[1];
        assert!(b.lo.guide.is_some() && (b.lo.sorted as usize) < b.lo.keys.len(), "the tail is in use");
        check(&a, &list, &mut rng);
        let dead = |slot: u32| slot.is_multiple_of(3);
        for k in 0..a.boundary.len() {
            let range = a.range(k);
            a.boundary[k].retain(range, |slot| !dead(slot));
        }
        list.retain(|x| !dead(x.0));
        check(&a, &list, &mut rng);
    }

    /// A removed strategy's slot is reused by the next insert: every lookup by id still
    /// finds the right strategy, and a removed id is gone everywhere.
    #[test]
    fn ids_find_their_strategies_through_slot_reuse() {
        let mut m = Matcher::new();
        for i in 1..=5 {
            m.insert_text(&format!("{i}: last > {i}0")).unwrap();
        }
        assert_eq!(m.remove(2).unwrap().id, 2);
        assert_eq!(m.remove(4).unwrap().id, 4);
        m.insert_text("40: last > 400").unwrap();
        m.insert_text("20: last > 200").unwrap();
        assert_eq!(m.len(), 5);
        for (id, bound) in [(1, "10"), (3, "30"), (5, "50"), (20, "200"), (40, "400")] {
            assert_eq!(m.schema().show_pred(&m.strategy(id).unwrap().preds[0]), format!("last > {bound}"));
        }
        assert!(m.strategy(2).is_none() && m.strategy(4).is_none());
        let e = event(&m, &[("last", "300")]);
        assert!(m.explain(4, &e).is_none());
        assert_eq!(m.explain(40, &e).unwrap().first_failed, Some(0));
        let (mut got, mut want) = (Vec::new(), Vec::new());
        m.match_event(&e, &mut got);
        m.match_brute_force(&e, &mut want);
        assert_eq!((got, want), (vec![1, 3, 5, 20], vec![1, 3, 5, 20]));
        assert!(m.insert_text("40: last > 1").is_err());
        m.insert_text("2: last > 1").unwrap();
        assert_eq!(m.len(), 6);
    }

    /// A re-cut finds its members' intervals from their strategies: the access predicate
    /// left out (another bound on the same attribute kept), `in` copies in several
    /// clusters, values too wide for the packed form, removals between re-cuts. Brute force
    /// and `strategy` agree throughout.
    #[test]
    fn recuts_derive_intervals_from_the_strategies() {
        let mut m = Matcher::new();
        let text = |i: u64| match i % 4 {
            0 => format!("{i}: x = {} and x >= {} and y < {}", i % 3, i % 5, i % 97),
            1 => format!("{i}: x in (0, 2) and y > {} and y <= {}", i % 89, i % 89 + 40),
            2 => format!("{i}: y >= {} and z != 3 and y < 100000000000000000000", i % 101),
            _ => format!("{i}: x = 1 and y = {} and x < 7", i % 50),
        };
        let check = |m: &mut Matcher| {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for (x, y) in [(0, 0), (0, 30), (1, 20), (2, 45), (2, 110), (1, 3), (0, 96)] {
                let e = event(m, &[("x", &x.to_string()), ("y", &y.to_string()), ("z", "4")]);
                m.match_event(&e, &mut got);
                m.match_brute_force(&e, &mut want);
                assert_eq!(got, want, "x = {x}, y = {y}");
            }
        };
        // 600 strategies: each cluster passes its first cut (32 members) and a re-cut.
        for i in 1..=600 {
            m.insert_text(&text(i)).unwrap();
            if i % 150 == 0 {
                check(&mut m);
            }
        }
        for i in (1..=600).filter(|i| i % 7 == 0) {
            assert_eq!(m.remove(i).map(|s| s.id), Some(i));
        }
        for i in 601..=900 {
            m.insert_text(&text(i)).unwrap();
        }
        check(&mut m);
        assert!(!m.contains(7) && m.contains(8));
        let back = m.strategy(6).unwrap();
        let shown: Vec<String> = back.preds.iter().map(|p| m.schema().show_pred(p)).collect();
        assert_eq!(shown, ["y >= 6", "z != 3", "y < 100000000000000000000"]);
    }

    #[test]
    fn a_default_matcher_has_its_unkeyed_cluster() {
        // A keyed cluster once took index 0 in a `Matcher::default()`, and events visited
        // it twice: every match came out doubled.
        let mut m = Matcher::default();
        m.insert_text("1: x = 0").unwrap();
        let e = event(&m, &[("x", "0")]);
        let mut out = Vec::new();
        m.match_event(&e, &mut out);
        assert_eq!(out, vec![1]);
    }

    #[test]
    fn event_types_are_checked() {
        let mut m = Matcher::new();
        m.insert_text("1: symbol = \"A\" and px > 1").unwrap();
        let mut e = MatchEvent::default();
        let err = m.event_from_pairs([("symbol", EventValue::Num("5"))], &mut e).unwrap_err().to_string();
        assert!(err.contains("string attribute"), "{err}");
        let err = m.event_from_pairs([("px", EventValue::Str("abc"))], &mut e).unwrap_err().to_string();
        assert!(err.contains("number attribute"), "{err}");
        m.event_from_pairs([("px", EventValue::Str("2.5")), ("other", EventValue::Num("1"))], &mut e).unwrap();
    }
}

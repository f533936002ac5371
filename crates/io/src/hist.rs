//! A latency histogram for the pipeline's per-record and per-packet timings, whose `record`
//! is a handful of instructions with no branch: hdrhistogram's `record` took about 50, 7.5%
//! of all the instructions of a `tickplant run` under callgrind, where every record costs
//! one in its consumer and every packet three in the producer.
//!
//! Its buckets are exactly those of an hdrhistogram of two significant digits from 1: every
//! value below 256 has its own, and each power of two above splits into 128. So
//! [`Ticks::to_hdr`] gives the very quantiles that recording into an hdrhistogram would
//! have, and the report is made from that.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::clock::TscClock;

/// Latency of one stage, ns.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// The quantiles of a histogram recorded in ns (the kernel's or the wall clock, not the
/// time-stamp counter).
pub(crate) fn latency_ns(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    Latency {
        count: h.len(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// The quantiles of `h` (time-stamp ticks) in nanoseconds.
pub(crate) fn latency(h: &Histogram<u64>, clock: &TscClock) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    Latency {
        count: h.len(),
        p50: clock.to_ns(h.value_at_quantile(0.5)),
        p90: clock.to_ns(h.value_at_quantile(0.9)),
        p99: clock.to_ns(h.value_at_quantile(0.99)),
        p999: clock.to_ns(h.value_at_quantile(0.999)),
        max: clock.to_ns(h.max()),
    }
}

/// An hdrhistogram for time-stamp ticks, two significant digits, up to [`MAX`].
pub(crate) fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX, 2).expect("valid bounds")
}

/// The largest value kept apart; larger ones count as it (`2^40` time-stamp ticks is
/// minutes).
pub const MAX: u64 = 1 << 40;
/// Buckets: 256 below 256, 128 for each power of two from `2^8` to `2^39`, and `MAX`.
const BUCKETS: usize = 256 + 32 * 128 + 1;

/// Counts of values (time-stamp ticks) by bucket.
#[derive(Debug, Clone)]
pub struct Ticks {
    counts: Box<[u64]>,
}

impl Default for Ticks {
    fn default() -> Self {
        Ticks { counts: vec![0; BUCKETS].into_boxed_slice() }
    }
}

/// The bucket of `v` (at most `MAX`): with `e` its highest bit (7 at least), the top eight
/// bits `v >> (e - 7)` (128..=255 from 256 up, `v` itself below) after `e - 7` rows of 128.
#[inline(always)]
fn index(v: u64) -> usize {
    let e = (63 - (v | 1).leading_zeros()).max(7);
    ((e - 7) as usize) * 128 + (v >> (e - 7)) as usize
}

/// The lowest value of bucket `i`.
fn low(i: usize) -> u64 {
    if i < 256 {
        return i as u64;
    }
    let e = i / 128 + 6;
    ((i % 128 + 128) as u64) << (e - 7)
}

impl Ticks {
    pub fn new() -> Self {
        Self::default()
    }
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        let i = index(v.min(MAX));
        // `i < BUCKETS` for every value up to `MAX`: the check is never taken.
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
    }
    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.counts.iter().sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The same counts in an hdrhistogram of two significant digits from 1 to `MAX` (a value
    /// 0 counts as 1).
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX, 2).expect("valid bounds");
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                h.record_n(low(i).max(1), n).expect("in bounds");
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_contiguous_and_start_at_their_low_value() {
        assert_eq!(index(MAX), BUCKETS - 1);
        let mut last = 0;
        for i in 1..BUCKETS {
            assert!(low(i) > low(i - 1), "bucket {i}");
            assert_eq!(index(low(i)), i, "bucket {i}");
            assert_eq!(index(low(i) - 1), i - 1, "the value before bucket {i}");
            last = i;
        }
        assert_eq!(last, BUCKETS - 1);
    }

    proptest! {
        /// Recorded here and converted, or recorded straight into an hdrhistogram of two
        /// significant digits: the same count, quantiles and maximum.
        #[test]
        fn quantiles_equal_an_hdrhistogram(values in proptest::collection::vec(
            prop_oneof![1u64..300, 1u64..100_000, 1u64..=MAX, Just(MAX)], 1..500)) {
            let mut t = Ticks::new();
            let mut h = Histogram::<u64>::new_with_bounds(1, MAX, 2).expect("valid bounds");
            for &v in &values {
                t.record(v);
                h.record(v).expect("in bounds");
            }
            let c = t.to_hdr();
            prop_assert_eq!(c.len(), h.len());
            prop_assert_eq!(t.len(), h.len());
            prop_assert_eq!(c.max(), h.max());
            for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(c.value_at_quantile(q), h.value_at_quantile(q), "quantile {}", q);
            }
        }
    }
}

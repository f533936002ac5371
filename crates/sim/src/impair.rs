//! The A/B impairer: the software form of a test splitter.
//!
//! One stream is copied onto two (A and B). Each copy independently loses, duplicates,
//! reorders and delays packets, deterministically for a seed, and the ground truth of what
//! happened to every packet is kept.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_core::error::InvalidConfig;

/// Impairment settings. Probabilities are per packet and per copy.
#[derive(Debug, Clone, PartialEq)]
pub struct ImpairConfig {
    pub seed: u64,
    pub loss_a: f64,
    pub loss_b: f64,
    /// A reordered packet is delayed past the next 1..=3 packets of its copy.
    pub reorder: f64,
    pub dup: f64,
    /// Each copy of each packet is delayed by a uniform draw from this range (ns); a copy
    /// never overtakes the previous packet of its line (except when reordered).
    pub skew_ns: (u64, u64),
}

impl Default for ImpairConfig {
    fn default() -> Self {
        ImpairConfig { seed: 1, loss_a: 0.0, loss_b: 0.0, reorder: 0.0, dup: 0.0, skew_ns: (0, 0) }
    }
}

impl ImpairConfig {
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        for (name, p) in
            [("loss-a", self.loss_a), ("loss-b", self.loss_b), ("reorder", self.reorder), ("dup", self.dup)]
        {
            if !(0.0..=1.0).contains(&p) {
                return Err(InvalidConfig::new(name, format!("--{name} must be a probability in 0..=1, got {p}")));
            }
        }
        if self.skew_ns.0 > self.skew_ns.1 {
            let reason = format!("skew range {}..{} is empty", self.skew_ns.0, self.skew_ns.1);
            return Err(InvalidConfig::new("skew-us", reason));
        }
        Ok(())
    }
}

/// What happened to one input packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruthRow {
    pub index: usize,
    /// Copies of it on A and on B (0 = lost there).
    pub a_copies: u8,
    pub b_copies: u8,
    pub a_reordered: bool,
    pub b_reordered: bool,
}

/// The two impaired copies, as (timestamp, packet index) in time order, and the truth.
#[derive(Debug, Clone, Default)]
pub struct Impaired {
    pub a: Vec<(u64, usize)>,
    pub b: Vec<(u64, usize)>,
    pub truth: Vec<TruthRow>,
}

/// Impair a stream given by its timestamps (one per packet, in order).
pub fn impair(timestamps: &[u64], cfg: &ImpairConfig) -> Impaired {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let n = timestamps.len();
    let mut truth: Vec<TruthRow> = (0..n)
        .map(|index| TruthRow { index, a_copies: 0, b_copies: 0, a_reordered: false, b_reordered: false })
        .collect();
    let mut copies = [Vec::with_capacity(n + n / 50), Vec::with_capacity(n + n / 50)];
    for (side, out) in copies.iter_mut().enumerate() {
        let loss = if side == 0 { cfg.loss_a } else { cfg.loss_b };
        let mut line_free = 0u64;
        for i in 0..n {
            let lost = rng.gen_bool(loss);
            let dup = rng.gen_bool(cfg.dup);
            let reorder = rng.gen_bool(cfg.reorder);
            let delay = if cfg.skew_ns.1 > cfg.skew_ns.0 {
                rng.gen_range(cfg.skew_ns.0..=cfg.skew_ns.1)
            } else {
                cfg.skew_ns.0
            };
            let k = rng.gen_range(1..=3usize);
            if lost {
                continue;
            }
            // A line is first-in first-out: the skew delays a packet but never lets it
            // overtake the one before; only an explicit reorder does.
            let mut t = (timestamps[i] + delay).max(line_free);
            line_free = t;
            if reorder && i + k < n {
                // Land just after packet i+k's original time plus the largest skew.
                t = t.max(timestamps[i + k] + cfg.skew_ns.1 + 1);
            }
            let row = &mut truth[i];
            let c = 1 + u8::from(dup);
            if side == 0 {
                row.a_copies = c;
                row.a_reordered = reorder && i + k < n;
            } else {
                row.b_copies = c;
                row.b_reordered = reorder && i + k < n;
            }
            out.push((t, i));
            if dup {
                out.push((t + 1, i));
            }
        }
        // Stable sort by time: equal times keep the original order.
        out.sort_by_key(|&(t, _)| t);
    }
    let [a, b] = copies;
    Impaired { a, b, truth }
}

/// The impairer packet by packet, for a live relay: each packet offered gives the copies
/// to send, each at a time and on a line, with the same per-copy draws as [`impair`]
/// (loss, duplicate, reorder past the next 1..=3 packets of the line, delay from the skew
/// range, a line first-in first-out but for reorders) and the same truth. Sans-IO: the
/// caller sends each copy when its time comes.
#[derive(Debug, Clone)]
pub struct Streaming {
    cfg: ImpairConfig,
    rng: Xoshiro256PlusPlus,
    /// Per line: when it is free again, and the reordered copies it holds (packet index,
    /// packets of the line still to pass it).
    line_free: [u64; 2],
    held: [Vec<(usize, usize)>; 2],
    truth: Vec<TruthRow>,
}

/// One copy to send: when (the offer's clock), on which line (0: A, 1: B), of which
/// packet (its index in offer order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SendCopy {
    pub at: u64,
    pub line: u8,
    pub index: usize,
}

impl Streaming {
    pub fn new(cfg: ImpairConfig) -> Streaming {
        let rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
        Streaming { cfg, rng, line_free: [0; 2], held: [Vec::new(), Vec::new()], truth: Vec::new() }
    }

    /// Offer the next packet, received at `t`: its copies go into `out`. Returns its index.
    pub fn offer(&mut self, t: u64, out: &mut Vec<SendCopy>) -> usize {
        let i = self.truth.len();
        self.truth.push(TruthRow { index: i, a_copies: 0, b_copies: 0, a_reordered: false, b_reordered: false });
        for side in 0..2 {
            let loss = if side == 0 { self.cfg.loss_a } else { self.cfg.loss_b };
            let lost = self.rng.gen_bool(loss);
            let dup = self.rng.gen_bool(self.cfg.dup);
            let reorder = self.rng.gen_bool(self.cfg.reorder);
            let (lo, hi) = self.cfg.skew_ns;
            let delay = if hi > lo { self.rng.gen_range(lo..=hi) } else { lo };
            let k = self.rng.gen_range(1..=3usize);
            if lost {
                continue;
            }
            let at = (t + delay).max(self.line_free[side]);
            self.line_free[side] = at;
            let c = 1 + u8::from(dup);
            let row = &mut self.truth[i];
            if side == 0 {
                row.a_copies = c;
                row.a_reordered = reorder;
            } else {
                row.b_copies = c;
                row.b_reordered = reorder;
            }
            let line = side as u8;
            // This packet passes the ones the line holds: those it was the last to wait
            // for go right after it.
            let mut released = Vec::new();
            for h in &mut self.held[side] {
                h.1 -= 1;
                if h.1 == 0 {
                    released.push(h.0);
                }
            }
            self.held[side].retain(|h| h.1 > 0);
            if reorder {
                self.held[side].push((i, k));
                if dup {
                    out.push(SendCopy { at, line, index: i });
                }
            } else {
                out.push(SendCopy { at, line, index: i });
                if dup {
                    out.push(SendCopy { at: at + 1, line, index: i });
                }
            }
            for r in released {
                out.push(SendCopy { at: at + 2, line, index: r });
            }
        }
        i
    }

    /// The copies still held for reordering, at the end of the stream: sent at `t`.
    pub fn finish(&mut self, t: u64, out: &mut Vec<SendCopy>) {
        for side in 0..2 {
            for (index, _) in self.held[side].drain(..) {
                out.push(SendCopy { at: t.max(self.line_free[side]), line: side as u8, index });
            }
        }
    }

    /// What happened to every packet offered so far.
    pub fn truth(&self) -> &[TruthRow] {
        &self.truth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_follow_the_truth() {
        let ts: Vec<u64> = (0..10_000).map(|i| i * 1000).collect();
        let cfg = ImpairConfig { seed: 3, loss_a: 0.1, loss_b: 0.2, reorder: 0.05, dup: 0.02, skew_ns: (0, 3000) };
        let im = impair(&ts, &cfg);
        let count = |v: &[(u64, usize)], i: usize| v.iter().filter(|x| x.1 == i).count() as u8;
        let mut a_counts = vec![0u8; ts.len()];
        for &(_, i) in &im.a {
            a_counts[i] += 1;
        }
        for r in &im.truth {
            assert_eq!(a_counts[r.index], r.a_copies);
        }
        assert_eq!(count(&im.b, 17), im.truth[17].b_copies);
        let lost_a = im.truth.iter().filter(|r| r.a_copies == 0).count() as f64 / ts.len() as f64;
        assert!((0.08..0.12).contains(&lost_a), "{lost_a}");
        assert!(im.a.windows(2).all(|w| w[0].0 <= w[1].0), "time ordered");
        let reordered = im.a.windows(2).filter(|w| w[0].1 > w[1].1).count();
        assert!(reordered > 100, "{reordered}");
        assert_eq!(impair(&ts, &cfg).a, im.a, "deterministic");
    }

    #[test]
    fn rejects_bad_probabilities() {
        assert!(ImpairConfig { loss_a: 1.5, ..Default::default() }.validate().is_err());
        assert!(ImpairConfig { skew_ns: (5, 1), ..Default::default() }.validate().is_err());
    }

    /// Packet by packet, every copy the truth counts is sent, on its line, each line in
    /// time order but for its reordered packets, which come after 1 to 3 later packets.
    #[test]
    fn streaming_copies_follow_the_truth() {
        let cfg = ImpairConfig { seed: 5, loss_a: 0.1, loss_b: 0.2, reorder: 0.05, dup: 0.03, skew_ns: (0, 3000) };
        let mut s = Streaming::new(cfg);
        let mut out = Vec::new();
        for i in 0..20_000u64 {
            s.offer(i * 1000, &mut out);
        }
        s.finish(20_000 * 1000, &mut out);
        let mut counts = [vec![0u8; 20_000], vec![0u8; 20_000]];
        for c in &out {
            counts[c.line as usize][c.index] += 1;
        }
        for r in s.truth() {
            assert_eq!(counts[0][r.index], r.a_copies, "packet {}", r.index);
            assert_eq!(counts[1][r.index], r.b_copies, "packet {}", r.index);
        }
        let lost_b = s.truth().iter().filter(|r| r.b_copies == 0).count() as f64 / 20_000.0;
        assert!((0.18..0.22).contains(&lost_b), "{lost_b}");
        // On each line, sent in time order, a packet comes after those before it unless it
        // or one it passes was reordered.
        for line in 0..2u8 {
            let mut l: Vec<SendCopy> = out.iter().copied().filter(|c| c.line == line).collect();
            l.sort();
            let out_of_order = l.windows(2).filter(|w| w[1].index < w[0].index).count();
            let reordered = s.truth().iter().filter(|r| if line == 0 { r.a_reordered } else { r.b_reordered }).count();
            assert!(out_of_order > 0 && out_of_order <= 3 * reordered, "{out_of_order} vs {reordered}");
        }
    }
}

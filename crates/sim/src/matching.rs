//! Strategy-matching workloads, as strategy text and events, deterministic by seed.
//!
//! * `a`: 20 attributes `a0..a19`; each strategy constrains 10 of them to an interval half
//!   the width of the domain 1..=1,000,000 (`aK >= lo and aK <= hi`); events carry all 20,
//!   uniform (the workload of the REIN/HEM literature).
//! * `b` (trading): `symbol = "Sn"` over `symbols` symbols, one `< <= > >=` on one of 8
//!   price attributes `p0..p7` (0..999), and a 10%-wide range on another; events carry a
//!   symbol and all 8 prices (two decimal places).
//! * `c` (cross-venue): like `b`, with the 8 prices the bid and ask of 4 venues and an
//!   attr-vs-attr predicate (`tsx_ask < nyse_bid`) in place of the comparison with a value.
//! * `p` (the published shape, REIN's and HEM's experiments): 20 attributes `a0..a19` over
//!   the value domain 1..=1,000,000; each strategy constrains 10 of them to an interval of
//!   uniform width (1 to 1,000,000, placed uniformly inside the domain); events carry all
//!   20, uniform. About one strategy in a thousand matches an event.
//!
//! The oracle is brute force (`tickplant_core::matcher::Matcher::match_brute_force`).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_core::matcher::{EventValue, MatchEvent, Matcher};

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    A,
    B,
    C,
    /// The published shape (see the module doc).
    P,
}

impl std::str::FromStr for Workload {
    type Err = tickplant_core::error::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "a" => Ok(Workload::A),
            "b" => Ok(Workload::B),
            "c" => Ok(Workload::C),
            "p" => Ok(Workload::P),
            _ => Err(tickplant_core::error::UnknownName { what: "workload", name: s.into(), expected: "a, b, c or p" }),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct MatchGenConfig {
    pub workload: Workload,
    pub strategies: usize,
    pub events: usize,
    pub seed: u64,
    /// Symbols of workloads b and c (500 in the definition).
    pub symbols: usize,
}

impl MatchGenConfig {
    pub fn new(workload: Workload, strategies: usize, events: usize, seed: u64) -> Self {
        MatchGenConfig { workload, strategies, events, seed, symbols: 500 }
    }
}

/// A value of a generated event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GenValue {
    /// A plain decimal.
    Num(String),
    Str(String),
}

/// Strategies (one line each, ids from 1) and events (attribute, value) pairs.
#[derive(Debug, Clone)]
pub struct MatchWorkload {
    pub strategies: Vec<String>,
    pub events: Vec<Vec<(String, GenValue)>>,
}

/// A generated event as the matcher's event (through [`Matcher::event_from_pairs`], the
/// same path `tickplant match` takes).
pub fn match_event(
    m: &Matcher,
    pairs: &[(String, GenValue)],
) -> Result<MatchEvent, tickplant_core::matcher::EventError> {
    let mut e = MatchEvent::default();
    m.event_from_pairs(
        pairs.iter().map(|(k, v)| {
            let v = match v {
                GenValue::Num(n) => EventValue::Num(n),
                GenValue::Str(s) => EventValue::Str(s),
            };
            (k.as_str(), v)
        }),
        &mut e,
    )?;
    Ok(e)
}

impl MatchWorkload {
    /// The events as JSON lines, the input of `tickplant match`.
    pub fn events_jsonl(&self) -> String {
        let mut s = String::new();
        for e in &self.events {
            s.push('{');
            for (i, (k, v)) in e.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                match v {
                    GenValue::Num(n) => s.push_str(&format!("\"{k}\": {n}")),
                    GenValue::Str(t) => s.push_str(&format!("\"{k}\": \"{t}\"")),
                }
            }
            s.push_str("}\n");
        }
        s
    }
}

const VENUES: [&str; 4] = ["nyse", "tsx", "arca", "bats"];

fn price_attr(w: Workload, i: usize) -> String {
    match w {
        Workload::C => format!("{}_{}", VENUES[i / 2], if i.is_multiple_of(2) { "bid" } else { "ask" }),
        _ => format!("p{i}"),
    }
}

/// Generate a workload.
pub fn generate_matching(cfg: &MatchGenConfig) -> MatchWorkload {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let w = cfg.workload;
    let symbols = cfg.symbols.max(1);
    let mut strategies = Vec::with_capacity(cfg.strategies);
    for id in 1..=cfg.strategies {
        let s = match w {
            Workload::A | Workload::P => {
                let mut attrs: Vec<usize> = (0..20).collect();
                let mut preds = Vec::with_capacity(10);
                for k in 0..10 {
                    let j = rng.gen_range(k..20);
                    attrs.swap(k, j);
                    // a: half the domain wide; p: a uniform width.
                    let width = if w == Workload::A { 500_000 } else { rng.gen_range(1..=1_000_000u32) };
                    let lo = rng.gen_range(1..=1_000_001 - width);
                    preds.push(format!("a{a} >= {lo} and a{a} <= {}", lo + width - 1, a = attrs[k]));
                }
                preds.join(" and ")
            }
            Workload::B | Workload::C => {
                let sym = rng.gen_range(0..symbols);
                let x = rng.gen_range(0..8);
                let mut y = rng.gen_range(0..7);
                if y >= x {
                    y += 1;
                }
                let first = if w == Workload::B {
                    let op = ["<", "<=", ">", ">="][rng.gen_range(0..4)];
                    format!("{} {op} {}", price_attr(w, x), rng.gen_range(0..1000))
                } else {
                    // An ask on one venue below a bid on another.
                    let (v1, mut v2) = (rng.gen_range(0..4), rng.gen_range(0..3));
                    if v2 >= v1 {
                        v2 += 1;
                    }
                    format!("{}_ask < {}_bid", VENUES[v1], VENUES[v2])
                };
                let lo = rng.gen_range(0..900);
                let r = price_attr(w, y);
                format!("symbol = \"S{sym}\" and {first} and {r} >= {lo} and {r} <= {}", lo + 99)
            }
        };
        strategies.push(format!("{id}: {s}"));
    }
    let mut events = Vec::with_capacity(cfg.events);
    for _ in 0..cfg.events {
        let e = match w {
            Workload::A | Workload::P => {
                (0..20).map(|a| (format!("a{a}"), GenValue::Num(rng.gen_range(1..=1_000_000u32).to_string()))).collect()
            }
            Workload::B | Workload::C => {
                let mut e = vec![("symbol".to_string(), GenValue::Str(format!("S{}", rng.gen_range(0..symbols))))];
                for i in 0..8 {
                    let cents = rng.gen_range(0..100_000u32);
                    e.push((price_attr(w, i), GenValue::Num(format!("{}.{:02}", cents / 100, cents % 100))));
                }
                e
            }
        };
        events.push(e);
    }
    MatchWorkload { strategies, events }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_have_their_shape() {
        let a = generate_matching(&MatchGenConfig::new(Workload::A, 3, 2, 1));
        assert_eq!(a.strategies.len(), 3);
        assert_eq!(a.strategies[0].matches(" and ").count(), 19);
        assert_eq!(a.events[0].len(), 20);
        let b = generate_matching(&MatchGenConfig::new(Workload::B, 2, 1, 1));
        assert!(b.strategies[0].starts_with("1: symbol = \"S"), "{}", b.strategies[0]);
        assert_eq!(b.events[0].len(), 9);
        let c = generate_matching(&MatchGenConfig::new(Workload::C, 2, 1, 1));
        assert!(c.strategies[1].contains("_ask < "), "{}", c.strategies[1]);
        assert!(c.events_jsonl().contains("\"nyse_bid\": "));
        let p = generate_matching(&MatchGenConfig::new(Workload::P, 200, 1, 1));
        assert!(p.strategies.iter().all(|s| s.matches(" and ").count() == 19));
        // Widths vary (a's are all 500,000).
        let widths: std::collections::BTreeSet<u64> = p
            .strategies
            .iter()
            .map(|s| {
                let n: Vec<u64> = s.split(' ').filter_map(|w| w.parse().ok()).collect();
                n[1] - n[0] + 1
            })
            .collect();
        assert!(widths.len() > 100, "{widths:?}");
        let again = generate_matching(&MatchGenConfig::new(Workload::C, 2, 1, 1));
        assert_eq!(again.strategies, c.strategies, "deterministic by seed");
    }
}

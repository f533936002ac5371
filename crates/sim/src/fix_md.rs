//! FIX 4.4 market data for the tick-to-trade harness: MarketDataIncrementalRefresh (35=X)
//! messages for random symbols, each symbol's price rising $0.001 per update.
//!
//! Every entry of NoMDEntries (268) carries MDUpdateAction (279), MDEntryType (269: bid,
//! offer or trade), Symbol (55), MDEntryPx (270, three decimals, e.g. `123.000`) and
//! MDEntrySize (271). The generator keeps the ground truth the harness is checked against:
//! how many entries carried a whole-dollar price (`.000`), per symbol.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::fix::Writer;

/// Price step: $0.001 in 1e-9 units.
pub const STEP: i64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct FixMdConfig {
    pub seed: u64,
    pub symbols: u32,
    /// Entries per message, at most (at least 1).
    pub max_entries: u32,
    pub sender: String,
    pub target: String,
}

impl FixMdConfig {
    pub fn new(seed: u64, symbols: u32) -> Self {
        FixMdConfig {
            seed,
            symbols: symbols.max(1),
            max_entries: 3,
            sender: "MDSIM".into(),
            target: "TICKPLANT".into(),
        }
    }
}

/// The names the harness uses: `S0001`, `S0002`, ...
pub fn fix_symbol(i: u32) -> String {
    format!("S{:04}", i + 1)
}

/// The generator and its running truth.
#[derive(Debug)]
pub struct FixMd {
    cfg: FixMdConfig,
    rng: Xoshiro256PlusPlus,
    prices: Vec<i64>,
    names: Vec<String>,
    seq: u64,
    writer: Writer,
    /// Entries sent, and entries with a whole-dollar price, per symbol.
    pub entries: u64,
    pub whole_dollar: Vec<u64>,
}

impl FixMd {
    pub fn new(cfg: FixMdConfig) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
        // Start anywhere in a dollar, so that the first `.000` comes at a different update
        // for each symbol.
        let prices = (0..cfg.symbols).map(|_| rng.gen_range(20_000..200_000) * STEP).collect();
        let names = (0..cfg.symbols).map(fix_symbol).collect();
        FixMd {
            writer: Writer::new("FIX.4.4", "X"),
            whole_dollar: vec![0; cfg.symbols as usize],
            cfg,
            rng,
            prices,
            names,
            seq: 0,
            entries: 0,
        }
    }
    pub fn symbols(&self) -> &[String] {
        &self.names
    }
    /// Messages made so far.
    pub fn messages(&self) -> u64 {
        self.seq
    }
    /// The next message, stamped with `sending_time` (UNIX ns).
    pub fn next_message(&mut self, sending_time: u64) -> &[u8] {
        self.seq += 1;
        let n = self.rng.gen_range(1..=self.cfg.max_entries.max(1));
        let mut ts = [0u8; 21];
        tickplant_wire::fix::utc_timestamp(sending_time, &mut ts);
        let w = &mut self.writer;
        w.reset("X");
        w.field(49, self.cfg.sender.as_bytes()).field(56, self.cfg.target.as_bytes());
        w.field_uint(34, self.seq).field(52, &ts).field_uint(268, u64::from(n));
        for _ in 0..n {
            let s = self.rng.gen_range(0..self.cfg.symbols) as usize;
            self.prices[s] += STEP;
            let p = self.prices[s];
            if p % 1_000_000_000 == 0 {
                self.whole_dollar[s] += 1;
            }
            self.entries += 1;
            let t = [b"0", b"1", b"2"][self.rng.gen_range(0..3)];
            let px = format!("{}.{:03}", p / 1_000_000_000, p % 1_000_000_000 / STEP);
            w.field(279, b"0").field(269, t).field(55, self.names[s].as_bytes());
            w.field(270, px.as_bytes()).field_uint(271, self.rng.gen_range(1..50) * 100);
        }
        w.finish()
    }
    /// Entries with a whole-dollar price so far, all symbols.
    pub fn whole_dollar_total(&self) -> u64 {
        self.whole_dollar.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::fix::{parse_decimal, FieldIndex, Message};

    #[test]
    fn prices_rise_a_tenth_of_a_cent_and_the_truth_counts_whole_dollars() {
        let mut g = FixMd::new(FixMdConfig { max_entries: 3, ..FixMdConfig::new(7, 3) });
        let mut last: std::collections::HashMap<Vec<u8>, i64> = Default::default();
        let mut whole = 0;
        for i in 0..20_000u64 {
            let m = g.next_message(1_795_271_400_000_000_000 + i * 1000).to_vec();
            let msg = Message::new_checked(&m).unwrap();
            let mut ix = FieldIndex::new();
            ix.parse(&msg).unwrap();
            assert_eq!(ix.get(34).unwrap().as_uint().unwrap(), i + 1);
            for e in ix.group(268, 279, &[]).unwrap() {
                let sym = e.iter().find(|f| f.tag == 55).unwrap().value.to_vec();
                let px = parse_decimal(e.iter().find(|f| f.tag == 270).unwrap().value).unwrap();
                if let Some(p) = last.insert(sym, px) {
                    assert_eq!(px - p, STEP);
                }
                whole += u64::from(px % 1_000_000_000 == 0);
            }
        }
        assert_eq!(whole, g.whole_dollar_total());
        assert!(whole > 20, "{whole}");
    }
}

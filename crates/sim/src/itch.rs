//! A realistic ITCH 5.0 day slice, with the final books it implies as ground truth.
//!
//! The day opens with system events, a stock directory (one R per symbol, stock locates
//! 1..=N) and trading actions, then runs a message mix shaped like a NASDAQ day: adds (some
//! with MPID), deletes, partial cancels, executions (with and without price), replaces,
//! non-displayed trades, crosses, imbalance indicators and the odd status message, and
//! closes with the end-of-day system events. Executions, cancels, deletes and replaces only
//! ever name live orders; prices sit on the one-cent tick grid around a per-symbol mid that
//! drifts; live orders hover around `target_live`.
//!
//! The truth ([`ItchDay::final_books`]) comes from the generator's own order list, not from
//! `tickplant_core::book`, so a test comparing the two checks the book against an
//! independent computation.

use std::collections::{BTreeMap, HashMap};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::build::{write_udp_frame, Flow};
use tickplant_wire::itch50::*;
use tickplant_wire::moldudp64;

/// Generator settings.
#[derive(Debug, Clone)]
pub struct ItchGenConfig {
    pub seed: u64,
    pub symbols: u32,
    /// Messages in all, the opening and closing system messages included.
    pub messages: u64,
    /// Live orders the mix steers towards (0: messages / 87, about 230,000 for a
    /// 20-million-message day).
    pub target_live: u64,
}

impl Default for ItchGenConfig {
    fn default() -> Self {
        ItchGenConfig { seed: 1, symbols: 200, messages: 100_000, target_live: 0 }
    }
}

/// One price level of the truth: (price in Price(4) units, shares, orders).
pub type TruthLevel = (u32, u64, u32);

/// The final book of one symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthBook {
    pub symbol: String,
    pub locate: u16,
    /// Best first.
    pub bids: Vec<TruthLevel>,
    /// Best first.
    pub asks: Vec<TruthLevel>,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    sym: u16,
    pos: u32,
    buy: bool,
    price: u32,
    shares: u32,
}

/// The generated day.
#[derive(Debug)]
pub struct ItchDay {
    pub messages: Vec<Message>,
    pub symbols: Vec<String>,
    live: HashMap<u64, Live>,
}

fn symbol_name(i: u32) -> String {
    // Four letters from the index, e.g. "AAAA", "AAAB"...; distinct for up to 456,976.
    let mut s = [b'A'; 4];
    let mut n = i;
    for c in s.iter_mut().rev() {
        *c = b'A' + (n % 26) as u8;
        n /= 26;
    }
    String::from_utf8(s.to_vec()).expect("ascii")
}

struct Gen {
    rng: Xoshiro256PlusPlus,
    ts: u64,
    next_ref: u64,
    next_match: u64,
    tracking: u16,
    mids: Vec<u32>,
    by_sym: Vec<Vec<u64>>,
    live: HashMap<u64, Live>,
    out: Vec<Message>,
}

const TICK: u32 = 100; // one cent in Price(4)

impl Gen {
    fn tick(&mut self) -> (u16, u64) {
        self.ts += self.rng.gen_range(50..2_000);
        self.tracking = self.tracking.wrapping_add(1);
        (self.tracking, self.ts)
    }
    fn system(&mut self, code: u8) {
        let (tracking_number, timestamp) = self.tick();
        self.out.push(Message::SystemEvent(SystemEvent {
            stock_locate: 0,
            tracking_number,
            timestamp,
            event_code: code,
        }));
    }
    fn locate(sym: usize) -> u16 {
        sym as u16 + 1
    }
    fn forget(&mut self, id: u64) -> Live {
        let o = self.live.remove(&id).expect("live");
        let v = &mut self.by_sym[usize::from(o.sym)];
        let last = v.len() - 1;
        v.swap_remove(o.pos as usize);
        if (o.pos as usize) < last {
            let moved = v[o.pos as usize];
            self.live.get_mut(&moved).expect("live").pos = o.pos;
        }
        o
    }
    fn remember(&mut self, id: u64, sym: u16, buy: bool, price: u32, shares: u32) {
        let v = &mut self.by_sym[usize::from(sym)];
        v.push(id);
        let pos = (v.len() - 1) as u32;
        self.live.insert(id, Live { sym, pos, buy, price, shares });
    }
    fn price_for(&mut self, sym: usize, buy: bool) -> u32 {
        // Mostly near the top; now and then deep.
        let k: u32 = if self.rng.gen_bool(0.8) { self.rng.gen_range(0..6) } else { self.rng.gen_range(6..60) };
        let mid = self.mids[sym];
        if buy {
            mid.saturating_sub(TICK * (1 + k)).max(TICK)
        } else {
            mid + TICK * (1 + k)
        }
    }
    fn random_live(&mut self) -> Option<u64> {
        for _ in 0..8 {
            let s = self.rng.gen_range(0..self.by_sym.len());
            let v = &self.by_sym[s];
            if !v.is_empty() {
                // Favour recent orders: most activity is on young orders.
                let n = v.len();
                let back =
                    if self.rng.gen_bool(0.7) { self.rng.gen_range(0..n.min(16)) } else { self.rng.gen_range(0..n) };
                return Some(v[n - 1 - back]);
            }
        }
        None
    }
    fn add(&mut self) {
        let sym = self.rng.gen_range(0..self.mids.len());
        if self.rng.gen_bool(0.02) {
            // The mid drifts by a tick.
            let m = &mut self.mids[sym];
            *m = if self.rng.gen_bool(0.5) { *m + TICK } else { m.saturating_sub(TICK).max(20 * TICK) };
        }
        let buy = self.rng.gen_bool(0.5);
        let price = self.price_for(sym, buy);
        let shares =
            if self.rng.gen_bool(0.7) { 100 * self.rng.gen_range(1..10) } else { self.rng.gen_range(1..2_000) };
        let id = self.next_ref;
        self.next_ref += self.rng.gen_range(1..4);
        let (tracking_number, timestamp) = self.tick();
        let locate = Self::locate(sym);
        let stock = stock(&symbol_name(sym as u32));
        let side = if buy { b'B' } else { b'S' };
        let a = AddOrder {
            stock_locate: locate,
            tracking_number,
            timestamp,
            order_reference_number: id,
            buy_sell_indicator: side,
            shares,
            stock,
            price,
        };
        self.out.push(if self.rng.gen_bool(0.04) {
            Message::AddOrderMpid(a.with_attribution(*b"GSCO"))
        } else {
            Message::AddOrder(a)
        });
        self.remember(id, sym as u16, buy, price, shares);
    }
    fn step(&mut self, target_live: u64) {
        let live = self.live.len() as u64;
        let p_add = if live < target_live { 0.46 } else { 0.36 };
        let r: f64 = self.rng.gen();
        if live == 0 || r < p_add {
            return self.add();
        }
        let r = (r - p_add) / (1.0 - p_add);
        if r < 0.06 {
            return self.trade();
        }
        if r < 0.065 {
            return self.status();
        }
        let Some(id) = self.random_live() else { return self.add() };
        let o = self.live[&id];
        let locate = o.sym + 1;
        let (tracking_number, timestamp) = self.tick();
        if r < 0.66 {
            self.forget(id);
            self.out.push(Message::OrderDelete(OrderDelete {
                stock_locate: locate,
                tracking_number,
                timestamp,
                order_reference_number: id,
            }));
        } else if r < 0.73 && o.shares > 1 {
            let c = self.rng.gen_range(1..o.shares);
            self.live.get_mut(&id).expect("live").shares -= c;
            self.out.push(Message::OrderCancel(OrderCancel {
                stock_locate: locate,
                tracking_number,
                timestamp,
                order_reference_number: id,
                cancelled_shares: c,
            }));
        } else if r < 0.84 {
            let x = if self.rng.gen_bool(0.6) { o.shares } else { self.rng.gen_range(1..=o.shares) };
            let match_number = self.next_match;
            self.next_match += 1;
            if x == o.shares {
                self.forget(id);
            } else {
                self.live.get_mut(&id).expect("live").shares -= x;
            }
            if self.rng.gen_bool(0.1) {
                self.out.push(Message::OrderExecutedWithPrice(OrderExecutedWithPrice {
                    stock_locate: locate,
                    tracking_number,
                    timestamp,
                    order_reference_number: id,
                    executed_shares: x,
                    match_number,
                    printable: if self.rng.gen_bool(0.9) { b'Y' } else { b'N' },
                    execution_price: o.price + if o.buy { TICK } else { 0 },
                }));
            } else {
                self.out.push(Message::OrderExecuted(OrderExecuted {
                    stock_locate: locate,
                    tracking_number,
                    timestamp,
                    order_reference_number: id,
                    executed_shares: x,
                    match_number,
                }));
            }
        } else {
            self.forget(id);
            let new_id = self.next_ref;
            self.next_ref += 1;
            let price = self.price_for(usize::from(o.sym), o.buy);
            let shares = 100 * self.rng.gen_range(1..10);
            self.out.push(Message::OrderReplace(OrderReplace {
                stock_locate: locate,
                tracking_number,
                timestamp,
                original_order_reference_number: id,
                new_order_reference_number: new_id,
                shares,
                price,
            }));
            self.remember(new_id, o.sym, o.buy, price, shares);
        }
    }
    fn trade(&mut self) {
        let sym = self.rng.gen_range(0..self.mids.len());
        let (tracking_number, timestamp) = self.tick();
        let match_number = self.next_match;
        self.next_match += 1;
        let stock = stock(&symbol_name(sym as u32));
        let locate = Self::locate(sym);
        if self.rng.gen_bool(0.02) {
            self.out.push(Message::CrossTrade(CrossTrade {
                stock_locate: locate,
                tracking_number,
                timestamp,
                shares: self.rng.gen_range(100..100_000),
                stock,
                cross_price: self.mids[sym],
                match_number,
                cross_type: b'I',
            }));
        } else {
            self.out.push(Message::Trade(Trade {
                stock_locate: locate,
                tracking_number,
                timestamp,
                order_reference_number: 0,
                buy_sell_indicator: if self.rng.gen_bool(0.5) { b'B' } else { b'S' },
                shares: 100 * self.rng.gen_range(1..5),
                stock,
                price: self.mids[sym],
                match_number,
            }));
        }
    }
    fn status(&mut self) {
        let sym = self.rng.gen_range(0..self.mids.len());
        let (tracking_number, timestamp) = self.tick();
        let stock = stock(&symbol_name(sym as u32));
        let stock_locate = Self::locate(sym);
        let mid = self.mids[sym];
        self.out.push(match self.rng.gen_range(0..4) {
            0 => Message::Noii(Noii {
                stock_locate,
                tracking_number,
                timestamp,
                paired_shares: 10_000,
                imbalance_shares: 500,
                imbalance_direction: b'B',
                stock,
                far_price: mid,
                near_price: mid,
                current_reference_price: mid,
                cross_type: b'C',
                price_variation_indicator: b'L',
            }),
            1 => Message::RegShoRestriction(RegShoRestriction {
                stock_locate,
                tracking_number,
                timestamp,
                stock,
                reg_sho_action: b'0',
            }),
            2 => Message::RetailPriceImprovement(RetailPriceImprovement {
                stock_locate,
                tracking_number,
                timestamp,
                stock,
                interest_flag: b'B',
            }),
            _ => Message::MarketParticipantPosition(MarketParticipantPosition {
                stock_locate,
                tracking_number,
                timestamp,
                mpid: *b"GSCO",
                stock,
                primary_market_maker: b'Y',
                market_maker_mode: b'N',
                market_participant_state: b'A',
            }),
        });
    }
}

/// Generate a day slice.
pub fn generate_itch(cfg: &ItchGenConfig) -> ItchDay {
    let n = cfg.symbols.clamp(1, 65_535) as usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mids = (0..n).map(|_| rng.gen_range(10..500u32) * 10_000 + rng.gen_range(0..100) * TICK).collect();
    let mut g = Gen {
        rng,
        ts: 34_200_000_000_000 - 600_000_000_000, // 09:20
        next_ref: 1,
        next_match: 1,
        tracking: 0,
        mids,
        by_sym: vec![Vec::new(); n],
        live: HashMap::new(),
        out: Vec::with_capacity(cfg.messages as usize),
    };
    let target = if cfg.target_live > 0 { cfg.target_live } else { (cfg.messages / 87).max(100) };
    g.system(b'O');
    g.system(b'S');
    for s in 0..n {
        let (tracking_number, timestamp) = g.tick();
        g.out.push(Message::StockDirectory(StockDirectory {
            stock_locate: Gen::locate(s),
            tracking_number,
            timestamp,
            stock: stock(&symbol_name(s as u32)),
            market_category: b'Q',
            financial_status_indicator: b'N',
            round_lot_size: 100,
            round_lots_only: b'N',
            issue_classification: b'C',
            issue_sub_type: *b"Z ",
            authenticity: b'P',
            short_sale_threshold_indicator: b'N',
            ipo_flag: b' ',
            luld_reference_price_tier: b'1',
            etp_flag: b'N',
            etp_leverage_factor: 0,
            inverse_indicator: b'N',
        }));
        let (tracking_number, timestamp) = g.tick();
        g.out.push(Message::StockTradingAction(StockTradingAction {
            stock_locate: Gen::locate(s),
            tracking_number,
            timestamp,
            stock: stock(&symbol_name(s as u32)),
            trading_state: b'T',
            reserved: b' ',
            reason: *b"    ",
        }));
    }
    g.ts = g.ts.max(34_200_000_000_000);
    g.system(b'Q');
    let body_end = cfg.messages.saturating_sub(3);
    while (g.out.len() as u64) < body_end {
        g.step(target);
    }
    for code in [b'M', b'E', b'C'] {
        g.system(code);
    }
    ItchDay { messages: g.out, symbols: (0..n as u32).map(symbol_name).collect(), live: g.live }
}

impl ItchDay {
    /// Live orders at the end of the day.
    pub fn live_orders(&self) -> usize {
        self.live.len()
    }

    /// The final book of every symbol with live orders, by stock locate.
    pub fn final_books(&self) -> Vec<TruthBook> {
        // Per symbol, bid and ask sides: price -> (shares, orders).
        type Side = BTreeMap<u32, (u64, u32)>;
        let mut by: BTreeMap<u16, [Side; 2]> = BTreeMap::new();
        for o in self.live.values() {
            let side = &mut by.entry(o.sym).or_default()[usize::from(!o.buy)];
            let l = side.entry(o.price).or_default();
            l.0 += u64::from(o.shares);
            l.1 += 1;
        }
        by.into_iter()
            .map(|(sym, [bids, asks])| TruthBook {
                symbol: self.symbols[usize::from(sym)].clone(),
                locate: sym + 1,
                bids: bids.into_iter().rev().map(|(p, (s, n))| (p, s, n)).collect(),
                asks: asks.into_iter().map(|(p, (s, n))| (p, s, n)).collect(),
            })
            .collect()
    }

    /// The day as a BinaryFILE.
    pub fn to_binary_file(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.messages.len() * 36);
        for m in &self.messages {
            push_binary_file(&mut out, m);
        }
        out
    }
}

/// Packetize messages into MoldUDP64 frames (Ethernet/IPv4/UDP), 1..=`max_per_packet`
/// messages each, sequence numbers from 1; calls `emit(capture_ns, frame)`. Packets are
/// spaced by their messages' timestamps plus `midnight_ns`.
pub fn packetize(
    messages: &[Message],
    seed: u64,
    max_per_packet: u16,
    midnight_ns: u64,
    flow: &Flow,
    mut emit: impl FnMut(u64, &[u8]),
) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed);
    let (mut payload, mut frame, mut buf) = (Vec::with_capacity(1500), Vec::with_capacity(1600), [0u8; 64]);
    let mut seq = 1u64;
    let mut i = 0;
    let mut ident = 0u16;
    let mut last_ts = 0;
    while i < messages.len() {
        let n = rng.gen_range(1..=max_per_packet.max(1)).min((messages.len() - i).min(usize::from(u16::MAX)) as u16);
        payload.clear();
        payload.resize(moldudp64::HEADER_LEN, 0);
        moldudp64::Repr { session: *b"TICKPLANT1", sequence_number: seq, message_count: n }.emit(&mut payload);
        for m in &messages[i..i + usize::from(n)] {
            let len = m.buffer_len();
            m.emit(&mut buf[..len]);
            moldudp64::push_message(&mut payload, &buf[..len]);
        }
        let ts = (midnight_ns + messages[i + usize::from(n) - 1].header().2).max(last_ts + 1);
        last_ts = ts;
        write_udp_frame(flow, ident, &payload, &mut frame);
        emit(ts, &frame);
        ident = ident.wrapping_add(1);
        seq += u64::from(n);
        i += usize::from(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_is_valid_and_deterministic() {
        let cfg = ItchGenConfig { seed: 3, symbols: 20, messages: 20_000, target_live: 0 };
        let d = generate_itch(&cfg);
        assert_eq!(d.messages.len(), 20_000);
        let mut counts = BTreeMap::new();
        let mut live: HashMap<u64, u32> = HashMap::new();
        let mut last_ts = 0;
        for m in &d.messages {
            *counts.entry(m.message_type()).or_insert(0) += 1;
            let ts = m.header().2;
            assert!(ts >= last_ts);
            last_ts = ts;
            match m {
                Message::AddOrder(a) => assert!(live.insert(a.order_reference_number, a.shares).is_none()),
                Message::AddOrderMpid(a) => assert!(live.insert(a.order_reference_number, a.shares).is_none()),
                Message::OrderDelete(x) => assert!(live.remove(&x.order_reference_number).is_some()),
                Message::OrderCancel(x) => {
                    let s = live.get_mut(&x.order_reference_number).unwrap();
                    assert!(x.cancelled_shares < *s);
                    *s -= x.cancelled_shares;
                }
                Message::OrderExecuted(x) => {
                    let s = live.get_mut(&x.order_reference_number).unwrap();
                    assert!(x.executed_shares <= *s);
                    *s -= x.executed_shares;
                    if *s == 0 {
                        live.remove(&x.order_reference_number);
                    }
                }
                Message::OrderExecutedWithPrice(x) => {
                    let s = live.get_mut(&x.order_reference_number).unwrap();
                    *s -= x.executed_shares;
                    if *s == 0 {
                        live.remove(&x.order_reference_number);
                    }
                }
                Message::OrderReplace(x) => {
                    assert!(live.remove(&x.original_order_reference_number).is_some());
                    live.insert(x.new_order_reference_number, x.shares);
                }
                _ => {}
            }
        }
        assert_eq!(live.len(), d.live_orders());
        for t in [b'S', b'R', b'H', b'A', b'F', b'E', b'C', b'X', b'D', b'U', b'P', b'Q', b'I'] {
            assert!(counts.contains_key(&t), "no {} in {counts:?}", t as char);
        }
        let books = d.final_books();
        let orders: u32 = books.iter().flat_map(|b| b.bids.iter().chain(&b.asks)).map(|l| l.2).sum();
        assert_eq!(orders as usize, d.live_orders());
        assert!(books.iter().all(|b| b.bids.windows(2).all(|w| w[0].0 > w[1].0)));
        assert!(books.iter().all(|b| b.asks.windows(2).all(|w| w[0].0 < w[1].0)));
        assert_eq!(generate_itch(&cfg).messages, d.messages);
    }
}

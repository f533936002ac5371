//! `tickplant bench feeds`: what decoding a feed costs a message, with a naive peer
//! measured in the same run on the same blocks.
//!
//! NYSE XDP: a simulated day (`tickplant sim nyse`) held in memory as packets, back to back
//! in one buffer ([`Held`]); one core runs the pipeline's decoder with its books
//! (`NyseXdpFeed::decode`: events, full-depth books per symbol index), best of the rounds,
//! in ns a message. The peer reads every field through the table walk
//! (`xdp_integrated::fields`) and keeps the books in `BTreeMap`s (orders by id, levels by
//! price). Both must end with the simulator's final books.
//!
//! OPRA binary: a simulated feed (`tickplant sim opra`) held in memory as block payloads,
//! back to back likewise; one core runs the pipeline's decoder over them
//! (`OpraBinaryFeed::decode`: messages walked, quotes and last sales to events, each
//! series' best bid and offer kept), best of the rounds, in ns a message. The peer is the
//! plain way to the same result: every field of every message through the generic table
//! walk (`opra_binary::fields`, a vector a message), series looked up in a `BTreeMap` by
//! their text. Both must end with the same
//! best bid and offer for every series, or the run fails.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use anyhow::{ensure, Result};
use tickplant_core::event::Bbo;
use tickplant_core::feed::{EventBatch, FeedDecoder, Packet};
use tickplant_core::opra_binary::OpraBinaryFeed;
use tickplant_core::packed::Packed;
use tickplant_wire::opra_binary::{self as ob, BestSide, Value};
use tickplant_wire::xdp_integrated::Dialect;
use tickplant_wire::{ethernet, ipv4, opra, udp};

#[derive(Debug, clap::Args)]
pub struct BenchFeedsArgs {
    /// Messages in each simulated feed (the ITCH day the NYSE capture is translated from,
    /// 500 symbols; the OPRA feed).
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Option series in the OPRA feed.
    #[arg(long, default_value_t = 4_000)]
    pub series: u32,
    /// Timed passes of each (the best is reported).
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
}

/// Packets held back to back in one buffer ([`Packed`]), as a capture file read into
/// memory or a receive ring holds them. Held one allocation each, they were scattered over
/// the heap and every packet's first byte waited on memory: 37% of the OPRA decoder's time
/// in `perf`, a cost of the benchmark's layout, not of decoding.
type Held = Packed;

/// The pipeline's target: ns a message, OPRA binary decode with per-series BBO.
pub const OPRA_TARGET_NS: f64 = 20.0;
/// The pipeline's target: ns a message, NYSE decode with books.
pub const NYSE_TARGET_NS: f64 = 30.0;

fn ours(blocks: &Held, max_series: usize) -> (OpraBinaryFeed, u64) {
    let mut feed = OpraBinaryFeed::new(max_series);
    let mut out = EventBatch::default();
    let mut n = 0u64;
    for b in blocks.iter() {
        out.clear();
        let d = feed.decode(&Packet { payload: b, seq: 0, count: 0, arrival_ns: 0, prefetched: false }, &mut out);
        n += d.messages;
        black_box(out.events());
    }
    (feed, n)
}

type Key = (String, String, u64, u64, String);

/// The plain decoder: fields by table walk, series keyed by their text.
fn naive(blocks: &Held) -> BTreeMap<Key, Bbo> {
    let mut best: BTreeMap<Key, Bbo> = BTreeMap::new();
    for b in blocks.iter() {
        let Ok(block) = opra::Block::new_checked(b) else { continue };
        for (_, m) in ob::messages(block.payload(), block.messages_in_block()).flatten() {
            if !matches!(m.category(), b'k' | b'q') {
                black_box(ob::fields(&m));
                continue;
            }
            let f = ob::fields(&m);
            let get = |n: &str| f.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
            let text = |n: &str| match get(n) {
                Some(Value::Text(t)) => String::from_utf8_lossy(t).trim_end().to_string(),
                _ => String::new(),
            };
            let int = |n: &str| match get(n) {
                Some(Value::Uint(x)) => x,
                _ => 0,
            };
            let nanos = |n: &str| match get(n) {
                Some(Value::Price(raw, Some(p))) => ob::to_nanos(raw, p).unwrap_or(0),
                _ => 0,
            };
            let strike = match get("strike_price") {
                Some(Value::Price(raw, Some(p))) => ob::decimal_string(raw * 10i64.pow(u32::from(8 - p.min(8))), 8),
                _ => String::new(),
            };
            let key = (
                text("security_symbol"),
                text("expiration_month"),
                int("expiration_day"),
                int("expiration_year"),
                strike,
            );
            let e = best.entry(key).or_default();
            let Some((bid, offer)) = ob::bbo_sides(m.indicator()) else { continue };
            let side = |s: BestSide, own: (&str, &str), app: (&str, &str), p: &mut i64, z: &mut u64| {
                let (np, nz) = match s {
                    BestSide::NoChange => return,
                    BestSide::ThisQuote => (nanos(own.0), int(own.1)),
                    BestSide::Appendage => (nanos(app.0), int(app.1)),
                    BestSide::None => (0, 0),
                };
                *p = np;
                *z = nz;
            };
            side(
                bid,
                ("bid_price", "bid_size"),
                ("best_bid_price", "best_bid_size"),
                &mut e.bid_price,
                &mut e.bid_size,
            );
            side(
                offer,
                ("offer_price", "offer_size"),
                ("best_offer_price", "best_offer_size"),
                &mut e.ask_price,
                &mut e.ask_size,
            );
        }
    }
    best
}

/// The plain NYSE decoder: fields by table walk, orders and levels in `BTreeMap`s. Returns
/// each symbol index's levels, (price, shares, orders) best first.
type NaiveBooks = BTreeMap<u64, (Vec<(u64, u64, u32)>, Vec<(u64, u64, u32)>)>;
fn naive_nyse(packets: &Held) -> NaiveBooks {
    use tickplant_wire::xdp_integrated::{self as xi, Value as V};
    // id -> (symbol index, bid?, price, shares); (symbol index, bid?, price) -> (shares, orders)
    let (mut orders, mut levels) = (Orders::new(), Levels::new());
    type Orders = BTreeMap<u64, (u64, bool, u64, u64)>;
    type Levels = BTreeMap<(u64, bool, u64), (u64, u32)>;
    fn level(levels: &mut Levels, k: (u64, bool, u64), shares: i64, n: i32) {
        let e = levels.entry(k).or_insert((0, 0));
        e.0 = (e.0 as i64 + shares) as u64;
        e.1 = (e.1 as i32 + n) as u32;
        if e.1 == 0 {
            levels.remove(&k);
        }
    }
    fn remove(orders: &mut Orders, levels: &mut Levels, id: u64, take: Option<u64>) {
        let Some(o) = orders.get_mut(&id) else { return };
        let t = take.unwrap_or(o.3).min(o.3);
        o.3 -= t;
        let (sym, bid, price, left) = *o;
        level(levels, (sym, bid, price), -(t as i64), if left == 0 { -1 } else { 0 });
        if left == 0 {
            orders.remove(&id);
        }
    }
    for p in packets.iter() {
        let Ok(pk) = tickplant_wire::xdp::Packet::new_checked(p) else { continue };
        for (_, m) in pk.messages().flatten() {
            let Ok((_, f)) = xi::fields(&m) else { continue };
            let get = |n: &str| {
                f.iter().find(|(k, _)| *k == n).map_or(0, |(_, v)| match v {
                    V::Uint(x) => *x,
                    V::Text(t) => u64::from(t.first().copied().unwrap_or(0)),
                    V::Bytes(_) => 0,
                })
            };
            match m.msg_type {
                100 | 106 => {
                    let (id, sym, bid, price, shares) = (
                        get("order_id"),
                        get("symbol_index"),
                        get("side") == u64::from(b'B'),
                        get("price"),
                        get("volume"),
                    );
                    orders.insert(id, (sym, bid, price, shares));
                    level(&mut levels, (sym, bid, price), shares as i64, 1);
                }
                101 | 104 => {
                    let (old, new) = if m.msg_type == 101 {
                        (get("order_id"), get("order_id"))
                    } else {
                        (get("order_id"), get("new_order_id"))
                    };
                    let Some(&(sym, bid, _, _)) = orders.get(&old) else { continue };
                    remove(&mut orders, &mut levels, old, None);
                    let (price, shares) = (get("price"), get("volume"));
                    orders.insert(new, (sym, bid, price, shares));
                    level(&mut levels, (sym, bid, price), shares as i64, 1);
                }
                102 => remove(&mut orders, &mut levels, get("order_id"), None),
                103 => remove(&mut orders, &mut levels, get("order_id"), Some(get("volume"))),
                _ => {}
            }
        }
    }
    let mut books: NaiveBooks = BTreeMap::new();
    for ((sym, bid, price), (shares, n)) in levels {
        let b = books.entry(sym).or_default();
        if bid {
            b.0.insert(0, (price, shares, n));
        } else {
            b.1.push((price, shares, n));
        }
    }
    books
}

fn nyse(a: &BenchFeedsArgs, out: &mut impl FnMut(String)) -> Result<()> {
    use tickplant_core::book::{BookConfig, Books};
    use tickplant_core::event::Side;
    use tickplant_core::nyse::NyseXdpFeed;
    let day = tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig {
        seed: 7,
        symbols: 500,
        messages: a.messages,
        target_live: 0,
    });
    let off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
    let mut packets = Held::default();
    let x = tickplant_sim::translate_itch_day(Dialect::Xdp21, &day.messages, 7, 8, 0, &Default::default(), |_, f| {
        packets.push(&f[off..])
    });
    out(format!(
        "nyse-xdp: {} messages in {} packets (the ITCH day of {} messages, 500 symbols); {} rounds of each, the best kept",
        x.messages,
        packets.len(),
        day.messages.len(),
        a.rounds
    ));
    let cfg = BookConfig { max_orders: 1 << 20, max_instruments: 1024, ..Default::default() };
    let (mut best_ours, mut best_naive) = (f64::INFINITY, f64::INFINITY);
    let mut last = None;
    let mut peer = BTreeMap::new();
    for _ in 0..a.rounds {
        // Built as the pipeline builds it (huge pages asked for the order table), at the
        // pipeline's default size.
        let mut feed = NyseXdpFeed::new(Books::with_table_advice(cfg, tickplant_io::huge_pages));
        let mut batch = EventBatch::default();
        let t = Instant::now();
        let mut n = 0u64;
        for p in packets.iter() {
            batch.clear();
            n += feed
                .decode(&Packet { payload: p, seq: 0, count: 0, arrival_ns: 0, prefetched: false }, &mut batch)
                .decoded;
            black_box(batch.events());
        }
        best_ours = best_ours.min(t.elapsed().as_nanos() as f64 / n as f64);
        ensure!(n == x.messages, "decoded {n} of {}", x.messages);
        last = Some(feed);
        let t = Instant::now();
        peer = naive_nyse(&packets);
        best_naive = best_naive.min(t.elapsed().as_nanos() as f64 / x.messages as f64);
    }
    let feed = last.expect("a round ran");
    let mut books = 0;
    for t in day.final_books() {
        let b = feed.books().book(u32::from(t.locate));
        let side = |s| {
            b.map(|b| {
                b.depth(s, usize::MAX).map(|l| ((l.price / 100_000) as u32, l.shares, l.orders)).collect::<Vec<_>>()
            })
            .unwrap_or_default()
        };
        ensure!(side(Side::Bid) == t.bids && side(Side::Ask) == t.asks, "{}: ours differs from the truth", t.symbol);
        let (pb, pa) = peer.get(&u64::from(t.locate)).cloned().unwrap_or_default();
        let as4 = |v: Vec<(u64, u64, u32)>| v.into_iter().map(|(p, s, n)| (p as u32, s, n)).collect::<Vec<_>>();
        ensure!(as4(pb) == t.bids && as4(pa) == t.asks, "{}: the naive peer differs from the truth", t.symbol);
        books += 1;
    }
    out(format!(
        "  ours (NyseXdpFeed: decode, events, full-depth books): {best_ours:.1} ns/message ({:.1} M messages/s); target <= {NYSE_TARGET_NS} ns: {}",
        1e3 / best_ours,
        crate::bench::judge(best_ours <= NYSE_TARGET_NS, "met", "NOT met")
    ));
    out(format!(
        "  naive peer (table walk, BTreeMap books): {best_naive:.1} ns/message; peer/ours = {:.1}x",
        best_naive / best_ours
    ));
    out(format!("  final books of all {books} symbols equal the simulator's truth level by level (both)"));
    Ok(())
}

pub fn bench(a: &BenchFeedsArgs, mut out: impl FnMut(String)) -> Result<()> {
    // Checked before either feed runs (the NYSE half with no round panicked).
    ensure!(a.rounds > 0 && a.messages > 0 && a.series > 0, "--rounds, --messages and --series must be at least 1");
    nyse(a, &mut out)?;
    let cfg =
        tickplant_sim::OpraGenConfig { messages: a.messages, series: a.series, max_per_block: 8, ..Default::default() };
    let off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
    let mut blocks = Held::default();
    let truth = tickplant_sim::generate_opra_binary(&cfg, |_, f| blocks.push(&f[off..]));
    let bytes = blocks.bytes().len();
    out(format!(
        "opra-binary: {} messages in {} blocks ({} bytes), {} series seen; {} rounds of each, the best kept",
        truth.messages,
        blocks.len(),
        bytes,
        truth.bbo.len(),
        a.rounds
    ));
    let max_series = a.series as usize;
    let (mut best_ours, mut best_naive) = (f64::INFINITY, f64::INFINITY);
    let mut last = None;
    let mut peer = BTreeMap::new();
    for _ in 0..a.rounds {
        let t = Instant::now();
        let (feed, n) = ours(&blocks, max_series);
        best_ours = best_ours.min(t.elapsed().as_nanos() as f64 / n as f64);
        ensure!(n == truth.messages, "decoded {n} messages of {}", truth.messages);
        last = Some(feed);
        let t = Instant::now();
        peer = naive(&blocks);
        best_naive = best_naive.min(t.elapsed().as_nanos() as f64 / truth.messages as f64);
    }
    // The two ended with the same best bid and offer for every series, the truth's.
    let feed = last.expect("a round ran");
    for t in &truth.bbo {
        let (bbo, trusted) = feed.bbo(t.instrument);
        ensure!(trusted, "series {} not trusted", t.instrument);
        let want = (t.bid, u64::from(t.bid_size), t.ask, u64::from(t.ask_size));
        ensure!(
            (bbo.bid_price, bbo.bid_size, bbo.ask_price, bbo.ask_size) == want,
            "series {}: ours differs from the truth",
            t.instrument
        );
    }
    let peer_agrees = truth.bbo.iter().all(|t| {
        peer.values().any(|b| {
            (b.bid_price, b.bid_size, b.ask_price, b.ask_size)
                == (t.bid, u64::from(t.bid_size), t.ask, u64::from(t.ask_size))
        })
    });
    ensure!(peer_agrees, "the naive peer's best bids and offers differ from the truth");
    out(format!(
        "  ours (OpraBinaryFeed: decode, events, per-series BBO): {best_ours:.1} ns/message ({:.1} M messages/s); target <= {OPRA_TARGET_NS} ns: {}",
        1e3 / best_ours,
        crate::bench::judge(best_ours <= OPRA_TARGET_NS, "met", "NOT met")
    ));
    out(format!(
        "  naive peer (table walk, BTreeMap of series): {best_naive:.1} ns/message; peer/ours = {:.1}x",
        best_naive / best_ours
    ));
    out(format!("  final best bid and offer of all {} series equal the simulator's truth (both)", truth.bbo.len()));
    Ok(())
}

//! FIX parse of a market data message (35=X, MarketDataIncrementalRefresh, 4 entries):
//! tickplant vs the `fefix` crate, in the same run, with the ratio (target >= 5x).
//!
//! Both sides do the same work: validate the framing and the CheckSum, index every field,
//! walk the NoMDEntries group and read each entry's Symbol and MDEntryPx as an exact
//! decimal (with the same decimal parser, so the ratio is the readers'). Also: patching and
//! finishing a pre-built NewOrderSingle template.
//!
//! `cargo bench -p tickplant-wire --bench fix` (TICKPLANT_BENCH_ITERS=N for another count).

use std::hint::black_box;
use std::time::Instant;

use fefix::prelude::*;
use fefix::tagvalue::{Config, Decoder};
use tickplant_wire::fix::{
    parse_decimal, tag, DigitCounter, FieldIndex, Message, OrderSpec, OrderTemplate, UtcStamp, Writer,
};

fn md_message() -> Vec<u8> {
    let mut w = Writer::new("FIX.4.4", "X");
    w.field(49, b"MDSIM").field(56, b"TICKPLANT").field_uint(34, 1_234_567).field(52, b"20261121-14:30:00.123");
    w.field_uint(tag::NO_MD_ENTRIES, 4);
    for (i, (sym, px)) in
        [("AAPL", "190.001"), ("MSFT", "410.250"), ("GOOGL", "172.000"), ("AMZN", "201.999")].iter().enumerate()
    {
        w.field(tag::MD_UPDATE_ACTION, b"0");
        w.field(tag::MD_ENTRY_TYPE, [b"0", b"1", b"2", b"0"][i]);
        w.field(tag::SYMBOL, sym.as_bytes()).field(tag::MD_ENTRY_PX, px.as_bytes()).field(271, b"100");
    }
    w.finish().to_vec()
}

fn best_of(rounds: usize, iters: u64, mut f: impl FnMut() -> i64) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let mut acc = 0i64;
        for _ in 0..iters {
            acc = acc.wrapping_add(f());
        }
        black_box(acc);
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / iters as f64);
    }
    best
}

/// A target's verdict: `yes` or `no`; a debug build (`./tp test`'s smokes run the test build)
/// is not judged, as its figures say nothing of the release build's.
fn judge(met: bool, yes: &'static str, no: &'static str) -> &'static str {
    if cfg!(debug_assertions) {
        "not judged (debug build)"
    } else if met {
        yes
    } else {
        no
    }
}

fn main() {
    let iters: u64 = std::env::var("TICKPLANT_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let rounds = 5;
    let msg = md_message();
    let mut ix = FieldIndex::new();
    let ours = best_of(rounds, iters, || {
        let m = Message::new_checked(black_box(&msg)).expect("valid");
        // The index's vector is reused: no allocation per message.
        ix.parse(&m).expect("valid");
        let mut sum = 0i64;
        for e in ix.group(tag::NO_MD_ENTRIES, tag::MD_UPDATE_ACTION, &[]).expect("valid") {
            for f in e {
                if f.tag == tag::MD_ENTRY_PX {
                    sum += parse_decimal(f.value).expect("price");
                } else if f.tag == tag::SYMBOL {
                    sum += f.value.len() as i64;
                }
            }
        }
        sum
    });
    let mut decoder = Decoder::<Config>::new(Dictionary::fix44());
    decoder.config_mut().set_verify_checksum(true);
    // Field lookup by tag (what the fefix benchmarks enable too).
    decoder.config_mut().set_decode_assoc(true);
    let peer = best_of(rounds, iters, || {
        let m = decoder.decode(black_box(&msg[..])).expect("valid");
        // fefix 0.7 keeps its repeating-group state from one decode to the next (a group
        // that ends the body is never closed), so its group accessor fails from the second
        // message on; read the entries from its ordered field list instead, which its
        // decode has built all the same.
        let mut sum = 0i64;
        for (t, v) in m.fields() {
            match u32::from(t.get()) {
                tag::MD_ENTRY_PX => sum += parse_decimal(v).expect("price"),
                tag::SYMBOL => sum += v.len() as i64,
                _ => {}
            }
        }
        sum
    });
    let ratio = peer / ours;
    println!("FIX 4.4 MarketDataIncrementalRefresh, {} bytes, 4 entries, best of {rounds} x {iters}:", msg.len());
    println!(
        "  parse + group + prices: {ours:>7.1} ns/message | fefix 0.7 {peer:>7.1} ns | ours/fefix speed = {ratio:.1}x, target >= 5x: {}",
        judge(ratio >= 5.0, "meets", "MISSES")
    );
    let mut spec = OrderSpec::new("FIX.4.4", "TICKPLANT", "EXCH", "AAPL");
    spec.ord_type = b'2';
    let mut t = OrderTemplate::new(&spec);
    let mut n = 0u64;
    // The way the engine drives it: MsgSeqNum and ClOrdID from counters (a carry each), the
    // times from one stamp per millisecond shared by every template.
    let (mut seq, mut id) = (DigitCounter::default(), DigitCounter::default());
    let mut stamp = UtcStamp::default();
    let tmpl = best_of(rounds, iters, || {
        n += 1;
        seq.set(n);
        id.set(n);
        t.set_seq_num_from(&seq).expect("fits");
        t.set_cl_ord_id_from(&id).expect("fits");
        t.set_qty(100).expect("fits");
        t.set_price(190_001_000_000 + (n as i64 % 7) * 100_000).expect("fits");
        stamp.set(1_795_271_400_123_456_789 + n * 1_000);
        t.set_time_from(&stamp);
        let b = t.bytes();
        i64::from(b[b.len() - 2])
    });
    println!("  order template: seq, id, qty, price, times patched and CheckSum updated: {tmpl:>6.1} ns/order");
}

//! The decode thread changes where the work runs, never what comes out: on an impaired A/B
//! capture (gaps included, which make books stale mid-stream) the pipeline with decoding,
//! books and delivery on a thread of their own gives exactly what the single-thread
//! pipeline gives: the same records in the same order (events, flags, BBOs, symbols), the
//! same report counts and the same final books.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tickplant_core::event::{Bbo, Event, Side};
use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy};

mod common;

type Seen = Arc<Mutex<Vec<(Event, Bbo, [u8; 8])>>>;

fn collector() -> (Handler, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (Handler::new(move |r: &Record| s.lock().expect("not poisoned").push((r.event, r.bbo, r.symbol))), seen)
}

/// The capture at `feed` impaired onto `a` and `b`: 5% loss on each (so that some packets
/// are lost on both: gaps), reordering, duplicates and skew.
fn impair(feed: &Path, a: &Path, b: &Path) {
    common::impair(feed, a, b, 11);
}

struct Run {
    report: serde_json::Value,
    all: Vec<(Event, Bbo, [u8; 8])>,
    trades: Vec<(Event, Bbo, [u8; 8])>,
    books: Vec<String>,
}

fn run(dir: &Path, decode_thread: bool) -> Run {
    let (all, all_seen) = collector();
    let (trades, trades_seen) = collector();
    let mut trades = common::consumer("trades", ConsumerAction::Handler(trades), SlowPolicy::Backpressure, 64);
    trades.actions = vec![tickplant_core::event::EventAction::Execute, tickplant_core::event::EventAction::Trade];
    let mut spec = common::itch_spec(
        dir.join("a.pcap"),
        vec![common::consumer("all", ConsumerAction::Handler(all), SlowPolicy::Backpressure, 1 << 10), trades],
    );
    spec.inputs.push(dir.join("b.pcap"));
    spec.arb.policy = tickplant_core::arb::Policy::Time { timeout_ns: 50_000 };
    spec.decode_thread = decode_thread;
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    let mut report = serde_json::to_value(&out.report).expect("the report serialises");
    // Each thread's CPU time is there, the decode thread's only where it runs.
    assert!(out.report.producer_cpu_s > 0.0);
    assert_eq!(out.report.decode_cpu_s > 0.0, decode_thread);
    assert!(out.report.consumers.iter().all(|c| c.cpu_s > 0.0));
    assert!(pipeline::summary(&out.report).contains("  cpu (s): producer "));
    // What depends on timing, not on the data.
    let o = report.as_object_mut().expect("an object");
    for k in ["wall_s", "messages_per_s", "latency_ns", "producer_cpu_s", "decode_cpu_s"] {
        o.remove(k);
    }
    for c in o["consumers"].as_array_mut().expect("consumers") {
        let c = c.as_object_mut().expect("an object");
        c.remove("ring_latency_ns");
        c.remove("waits");
        c.remove("cpu_s");
    }
    let books = out
        .books
        .instruments()
        .map(|(id, b)| {
            let bids: Vec<_> = b.depth(Side::Bid, usize::MAX).collect();
            let asks: Vec<_> = b.depth(Side::Ask, usize::MAX).collect();
            format!("{id} stale={} orders={} bids={bids:?} asks={asks:?}", b.is_stale(), b.orders())
        })
        .collect();
    let all = all_seen.lock().expect("not poisoned").clone();
    let trades = trades_seen.lock().expect("not poisoned").clone();
    Run { report, all, trades, books }
}

#[test]
fn the_decode_thread_gives_what_one_thread_gives() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let feed = dir.path().join("feed.pcap");
    common::itch_capture(&feed, 5, 40_000, |_| {});
    impair(&feed, &dir.path().join("a.pcap"), &dir.path().join("b.pcap"));
    let one = run(dir.path(), false);
    let two = run(dir.path(), true);
    // The capture is impaired enough to test what it should.
    let gaps = one.report["gaps"].as_array().expect("gaps").len();
    assert!(gaps >= 3, "only {gaps} gaps");
    let stale = one.all.iter().filter(|r| r.0.flags & tickplant_core::event::flags::BOOK_STALE != 0).count();
    assert!(stale > 0 && stale < one.all.len(), "books go stale mid-stream ({stale} of {})", one.all.len());
    assert!(!one.trades.is_empty() && one.trades.len() < one.all.len());
    assert_eq!(one.report, two.report);
    assert_eq!(one.books, two.books);
    assert_eq!(one.all.len(), two.all.len());
    for (i, (x, y)) in one.all.iter().zip(&two.all).enumerate() {
        assert_eq!(x, y, "record {i}");
    }
    assert_eq!(one.trades, two.trades);
}

#[test]
fn a_consumer_that_fails_ends_the_run_with_its_error() {
    // A CSV consumer whose file cannot be created ends at once; with back-pressure and a
    // small ring the decode thread must not wait for it forever.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let feed = dir.path().join("feed.pcap");
    common::itch_capture(&feed, 6, 20_000, |_| {});
    for decode_thread in [true, false] {
        let bad = dir.path().join("no such folder").join("out.csv");
        let mut spec = common::itch_spec(
            feed.clone(),
            vec![common::consumer("csv", ConsumerAction::Csv(bad), SlowPolicy::Backpressure, 64)],
        );
        spec.decode_thread = decode_thread;
        // A deadlock guard, not a time limit: the run takes milliseconds; one that waits
        // for the dead consumer never returns.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(pipeline::run(&spec).map(|_| ()).map_err(|e| e.to_string())));
        let got = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the run ends (it hung)");
        let err = got.expect_err("the consumer fails");
        assert!(err.contains("consumer csv"), "{err}");
    }
}

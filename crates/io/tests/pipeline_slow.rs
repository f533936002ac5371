//! A slow consumer beside a fast one: with `drop` it loses records (counted, never
//! silently) and the others still receive everything, in order; with `backpressure` it
//! receives everything and the producer waits. The records a consumer receives are the ones
//! it was delivered, in the order the feed sent them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy};

mod common;

/// A consumer that keeps the sequence numbers it receives; `pause` after each record.
fn recorder(pause: Duration) -> (Handler, Arc<Mutex<Vec<u64>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let h = Handler::new(move |r: &Record| {
        s.lock().expect("not poisoned").push(r.event.sequence);
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    });
    (h, seen)
}

fn run(slow_policy: SlowPolicy) -> (pipeline::Outcome, Vec<u64>, Vec<u64>) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (fast, fast_seen) = recorder(Duration::ZERO);
    let (slow, slow_seen) = recorder(Duration::from_micros(20));
    let feed = dir.path().join("feed.pcap");
    common::itch_capture(&feed, 3, 20_000, |_| {});
    let spec = common::itch_spec(
        feed,
        vec![
            common::consumer("fast", ConsumerAction::Handler(fast), SlowPolicy::Backpressure, 1 << 16),
            common::consumer("slow", ConsumerAction::Handler(slow), slow_policy, 64),
        ],
    );
    let out = pipeline::run(&spec).expect("the pipeline runs");
    let fast = fast_seen.lock().expect("not poisoned").clone();
    let slow = slow_seen.lock().expect("not poisoned").clone();
    (out, fast, slow)
}

#[test]
fn a_slow_consumer_that_drops_loses_counted_records_and_no_one_else_does() {
    let (out, fast, slow) = run(SlowPolicy::Drop);
    out.report.check().expect("the accounting balances");
    let (f, s) = (&out.report.consumers[0], &out.report.consumers[1]);
    let all = out.report.decoded;
    assert_eq!((f.matched, f.delivered, f.dropped, f.received), (all, all, 0, all), "{f:?}");
    assert_eq!(fast.len() as u64, all);
    assert!(fast.windows(2).all(|w| w[0] < w[1]), "the fast consumer receives the feed in order");
    // 20,000 records at 20 us each would take 0.4 s: the 64-record ring overflows.
    assert_eq!(s.matched, all);
    assert!(s.dropped > 0, "the slow consumer lost nothing: {s:?}");
    assert_eq!(s.delivered + s.dropped, s.matched);
    assert_eq!(s.received, s.delivered);
    assert_eq!(slow.len() as u64, s.received);
    assert!(slow.windows(2).all(|w| w[0] < w[1]), "what the slow consumer receives is in order");
    assert_eq!(s.waits, 0, "a dropping consumer never holds the producer up");
}

#[test]
fn a_slow_consumer_with_backpressure_receives_everything() {
    let (out, fast, slow) = run(SlowPolicy::Backpressure);
    out.report.check().expect("the accounting balances");
    let all = out.report.decoded;
    for (c, seen) in out.report.consumers.iter().zip([&fast, &slow]) {
        assert_eq!((c.matched, c.delivered, c.dropped, c.received), (all, all, 0, all), "{c:?}");
        assert_eq!(seen.len() as u64, all);
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{} receives the feed in order", c.name);
    }
    assert_eq!(fast, slow, "both receive the same records");
    assert!(out.report.consumers[1].waits > 0, "the producer waited for the slow consumer");
}

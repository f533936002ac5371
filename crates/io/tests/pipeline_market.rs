//! A record's BBO and symbol are looked up only where a consumer that reads them takes the
//! event (`count`, `csv` and `jsonl` do not read them): a consumer that does gets the same
//! records whatever consumers run beside it.

use std::sync::{Arc, Mutex};

use tickplant_core::event::{Bbo, Event};
use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy};

mod common;

type Seen = Arc<Mutex<Vec<(Event, Bbo, [u8; 8])>>>;

fn records(dir: &std::path::Path, with_counters: bool) -> Vec<(Event, Bbo, [u8; 8])> {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let handler = Handler::new(move |r: &Record| s.lock().expect("not poisoned").push((r.event, r.bbo, r.symbol)));
    let mut consumers = vec![common::consumer("mine", ConsumerAction::Handler(handler), SlowPolicy::Backpressure, 256)];
    if with_counters {
        // After the handler, so that "the last consumer decides" would be caught.
        consumers.push(common::consumer("count", ConsumerAction::Count, SlowPolicy::Backpressure, 256));
        consumers.push(common::consumer(
            "jsonl",
            ConsumerAction::Jsonl(dir.join("all.jsonl")),
            SlowPolicy::Backpressure,
            256,
        ));
    }
    let out = pipeline::run(&common::itch_spec(dir.join("day.pcap"), consumers)).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    let v = seen.lock().expect("not poisoned").clone();
    v
}

#[test]
fn a_consumer_that_reads_the_bbo_gets_it_beside_ones_that_do_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::itch_capture(&dir.path().join("day.pcap"), 9, 5_000, |_| {});
    let alone = records(dir.path(), false);
    let beside = records(dir.path(), true);
    assert_eq!(alone.len(), beside.len());
    assert!(alone.iter().filter(|r| r.1.bid_size > 0 && r.1.ask_size > 0).count() > alone.len() / 2);
    assert!(alone.iter().filter(|r| r.2 != [0; 8]).count() > alone.len() * 9 / 10, "records have their symbols");
    for (i, (a, b)) in alone.iter().zip(&beside).enumerate() {
        assert_eq!(a.1, b.1, "record {i}: BBO");
        assert_eq!(a.2, b.2, "record {i}: symbol");
        assert_eq!(a.0.sequence, b.0.sequence, "record {i}: event");
    }
}

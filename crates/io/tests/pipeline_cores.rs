//! Pinning: a pinned producer does not confine the threads it starts (they inherit their
//! creator's cores), and a core that does not exist is a configuration error.

use std::sync::{Arc, Mutex};

use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy};

mod common;

/// With the producer pinned to the first core and the decode thread to the second, an
/// unpinned consumer may still run on every core the process may. (Before, the producer
/// was pinned before the other threads started: all of them ran on its one core, and the
/// decode thread's own pin found no second core to move to.)
#[test]
fn a_pinned_producer_leaves_the_other_threads_their_cores() {
    let Some(ids) = core_affinity::get_core_ids() else { return };
    if ids.len() < 2 {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    common::itch_capture(&dir.path().join("day.pcap"), 3, 2_000, |_| {});
    let seen: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let handler = Handler::new(move |_: &Record| {
        let mut v = s.lock().expect("not poisoned");
        if v.is_empty() {
            v.push(core_affinity::get_core_ids().map_or(0, |c| c.len()));
        }
    });
    let consumers = vec![common::consumer("mine", ConsumerAction::Handler(handler), SlowPolicy::Backpressure, 256)];
    let mut spec = common::itch_spec(dir.path().join("day.pcap"), consumers);
    spec.producer_core = Some(ids[0].id);
    spec.decode_core = Some(ids[1].id);
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    assert_eq!(*seen.lock().expect("not poisoned"), vec![ids.len()], "the consumer may run on every core");
}

#[test]
fn a_core_that_is_not_there_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::itch_capture(&dir.path().join("day.pcap"), 3, 200, |_| {});
    for which in 0..3 {
        let mut consumers = vec![common::consumer("c", ConsumerAction::Count, SlowPolicy::Drop, 64)];
        let mut spec = common::itch_spec(dir.path().join("day.pcap"), vec![]);
        match which {
            0 => spec.producer_core = Some(100_000),
            1 => spec.decode_core = Some(100_000),
            _ => consumers[0].core = Some(100_000),
        }
        spec.consumers = consumers;
        let e = match pipeline::run(&spec) {
            Ok(_) => panic!("core 100000 was accepted ({which})"),
            Err(e) => e.to_string(),
        };
        let want = ["run.producer-core = 100000", "run.decode-core = 100000", "consumer c: core = 100000"][which];
        assert!(e.contains(want) && e.contains("not a core"), "{e}");
    }
}

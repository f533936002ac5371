//! The stages' latency is timed on one frame or packet in `latency_sample`: the first and
//! then every Nth, in both arrangements; 1 times every one. Sampling changes what is timed,
//! never what is delivered or counted. The rings are timed on the records of the timed
//! packets: those carry their publication time, the others `NOT_TIMED`.

use std::sync::{Arc, Mutex};

use tickplant_core::event::flags::LAST_IN_PACKET;
use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, Report, SlowPolicy, NOT_TIMED};

mod common;

const ARB: &str = "1 arbitrate (per frame)";
const DECODE: &str = "2 decode + book (per packet)";
const DELIVER: &str = "3 deliver (per packet)";

/// Per packet a handler saw (records up to one flagged last in its packet): how many of
/// its records carry a publication time, and how many records it has.
type Stamps = Arc<Mutex<Vec<(usize, usize)>>>;

fn run(dir: &std::path::Path, decode_thread: bool, sample: u32) -> (Report, Vec<(usize, usize)>) {
    let stamps: Stamps = Arc::new(Mutex::new(vec![(0, 0)]));
    let s = stamps.clone();
    let handler = Handler::new(move |r: &Record| {
        let mut s = s.lock().expect("not poisoned");
        let last = s.last_mut().expect("one packet open");
        last.0 += usize::from(r.published_tsc != NOT_TIMED);
        last.1 += 1;
        if r.event.flags & LAST_IN_PACKET != 0 {
            s.push((0, 0));
        }
    });
    let mut spec = common::itch_spec(
        dir.join("day.pcap"),
        vec![
            common::consumer("all", ConsumerAction::Count, SlowPolicy::Backpressure, 1 << 10),
            common::consumer("stamps", ConsumerAction::Handler(handler), SlowPolicy::Backpressure, 1 << 10),
        ],
    );
    // The same capture as line A and line B: two frames a packet, so that the frames the
    // producer times are not the packets the decode stage picks.
    spec.inputs.push(dir.join("day.pcap"));
    spec.decode_thread = decode_thread;
    spec.latency_sample = sample;
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    assert_eq!(out.report.latency_sample, sample);
    let mut stamps = stamps.lock().expect("not poisoned").clone();
    assert_eq!(stamps.pop(), Some((0, 0)), "the last record closes its packet");
    (out.report, stamps)
}

fn count(r: &Report, stage: &str) -> u64 {
    r.latency_ns[stage].count
}

#[test]
fn stages_are_timed_on_one_frame_and_packet_in_n() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::itch_capture(&dir.path().join("day.pcap"), 5, 20_000, |_| {});
    for decode_thread in [true, false] {
        let (every, stamps) = run(dir.path(), decode_thread, 1);
        let (frames, packets) = (every.frames, every.packets_in);
        assert!(packets > 1_000, "{packets} packets");
        assert_eq!(frames, 2 * packets);
        assert_eq!(count(&every, ARB), frames);
        assert_eq!(count(&every, DECODE), packets);
        assert_eq!(count(&every, DELIVER), packets);
        // Every record is timed in its ring.
        assert_eq!(stamps.len() as u64, packets);
        assert!(stamps.iter().all(|&(stamped, n)| stamped == n));
        for c in &every.consumers {
            assert_eq!(c.ring_latency_ns.count, c.received, "consumer {}", c.name);
        }

        let (sampled, stamps) = run(dir.path(), decode_thread, 16);
        assert_eq!((sampled.frames, sampled.packets_in), (frames, packets));
        assert_eq!(sampled.consumers[0].received, every.consumers[0].received);
        assert_eq!(count(&sampled, ARB), frames.div_ceil(16));
        let decode = count(&sampled, DECODE);
        if decode_thread {
            // The decode thread picks its own packets: the first and every 16th after it.
            assert_eq!(decode, packets.div_ceil(16));
        } else {
            // On one thread the packets a timed frame releases are timed too (their time is
            // left out of the arbitrate stage's), besides the decode stage's own picks.
            assert!((packets.div_ceil(16) + 1..packets).contains(&decode), "{decode} of {packets} packets timed");
        }
        assert_eq!(count(&sampled, DELIVER), decode);
        // The rings are timed on the records of the timed packets, each one whole.
        assert_eq!(stamps.len() as u64, packets);
        assert!(stamps.iter().all(|&(stamped, n)| stamped == 0 || stamped == n));
        let timed: Vec<_> = stamps.iter().filter(|s| s.0 > 0).collect();
        assert_eq!(timed.len() as u64, decode);
        let records: usize = timed.iter().map(|s| s.1).sum();
        for c in &sampled.consumers {
            assert_eq!(c.ring_latency_ns.count, records as u64, "consumer {}", c.name);
            assert!(c.ring_latency_ns.count < c.received / 4);
        }
    }
}

#[test]
fn a_consumer_with_no_timed_record_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    common::itch_capture(&dir.path().join("day.pcap"), 5, 20_000, |_| {});
    let mut trades = common::consumer("trades", ConsumerAction::Count, SlowPolicy::Backpressure, 1 << 10);
    trades.actions = vec![tickplant_core::event::EventAction::Trade];
    let mut spec = common::itch_spec(
        dir.path().join("day.pcap"),
        vec![common::consumer("all", ConsumerAction::Count, SlowPolicy::Backpressure, 1 << 10), trades],
    );
    // Only the first packet is timed: the day's opening messages, none of them a trade.
    spec.latency_sample = u32::MAX;
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    let [all, trades] = &out.report.consumers[..] else { panic!("two consumers") };
    assert!(all.ring_latency_ns.count > 0 && all.ring_latency_ns.count < all.received);
    assert!(trades.received > 0);
    assert_eq!(trades.ring_latency_ns.count, 0);
    let summary = pipeline::summary(&out.report);
    let line =
        |name: &str| summary.lines().find(|l| l.contains(&format!("consumer {name} "))).expect("a line").to_string();
    assert!(line("trades").ends_with("ring not timed"), "{}", line("trades"));
    assert!(line("all").contains("ring p50 "), "{}", line("all"));
}

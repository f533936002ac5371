//! Messages the ITCH decoder cannot read are counted as undecodable and never reach a book
//! or a consumer; the messages around them in the same packet still do.

use std::sync::{Arc, Mutex};

use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy};

mod common;

/// MoldUDP64's first message block: Ethernet, IPv4 and UDP headers (42 bytes), the
/// MoldUDP64 header (20), the block's length (2).
const FIRST_MESSAGE: usize = 42 + 20 + 2;

#[test]
fn undecodable_messages_are_counted_and_never_delivered() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let feed = dir.path().join("feed.pcap");
    let (mut packets, mut spoiled) = (0u64, Vec::new());
    let day = common::itch_capture(&feed, 9, 20_000, |f| {
        packets += 1;
        // Every tenth packet's first message gets a type no ITCH message has.
        if packets % 10 == 0 && f.len() > FIRST_MESSAGE {
            let seq = u64::from_be_bytes(f[42 + 10..42 + 18].try_into().expect("eight bytes"));
            spoiled.push(seq);
            f[FIRST_MESSAGE] = b'!';
        }
    });
    assert!(spoiled.len() > 100);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let all =
        Handler::new(move |r: &Record| s.lock().expect("not poisoned").push((r.event.sequence, r.event.msg_type)));
    let spec = common::itch_spec(
        feed,
        vec![common::consumer("all", ConsumerAction::Handler(all), SlowPolicy::Backpressure, 4096)],
    );
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    let r = &out.report;
    assert_eq!(r.undecodable, spoiled.len() as u64);
    assert_eq!(r.decoded + r.undecodable, day.messages.len() as u64);
    let seen = seen.lock().expect("not poisoned");
    assert_eq!(seen.len() as u64, r.decoded);
    assert!(seen.iter().all(|&(_, t)| t != b'!'), "an undecodable message reached a consumer");
    let spoiled: std::collections::HashSet<u64> = spoiled.into_iter().collect();
    assert!(seen.iter().all(|(seq, _)| !spoiled.contains(seq)), "a spoiled message's sequence was delivered");
    // The rest of each spoiled packet still arrives: every other sequence number is there.
    let delivered: std::collections::HashSet<u64> = seen.iter().map(|&(seq, _)| seq).collect();
    for seq in 1..=day.messages.len() as u64 {
        assert!(delivered.contains(&seq) != spoiled.contains(&seq), "sequence {seq}");
    }
}

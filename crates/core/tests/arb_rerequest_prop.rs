//! Property test of the arbitrator with re-request: a third input answers its requests.
//!
//! A stream of packets is copied onto two lines that each lose and delay packets; a
//! simulated retransmission server answers every request after a delay, packing the
//! messages its own way, but never sends the sequence numbers of a refused set. With a
//! window longer than the retries take, the oracle is exact: the HR output is every message
//! up to the last one a line carried, in order and once, except those both lines lost that
//! the server refused; those, and only those, are the gaps, each `rerequest-timeout`.
//! Every message released carries its own sequence number (the bodies encode it), and the
//! accounting balances after every step.

mod common;
use common::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use tickplant_core::*;
use tickplant_wire::build::Flow;

/// Per packet: its message count, and (lost, delay) on A and on B.
type Scenario = Vec<(u16, (bool, u64), (bool, u64))>;

fn scenario() -> impl Strategy<Value = Scenario> {
    let line = (prop::bool::weighted(0.2), 0u64..=40_000);
    prop::collection::vec((1u16..4, line.clone(), line), 1..120)
}

const SPACING: u64 = 5_000;

fn answer_flow() -> Flow {
    Flow { dst_ip: [10, 0, 0, 9], dst_port: 9000, ..Flow::default() }
}

/// One run: returns the arbitrator, what it produced, the packets' first sequence numbers
/// and the messages the lines carried.
fn run(s: &Scenario, refused: &BTreeSet<u64>, latency: u64, pack: u16) -> (Arbitrator, Rec, Vec<u64>, BTreeSet<u64>) {
    let mut seqs = Vec::new();
    let mut next = 1u64;
    for (n, _, _) in s {
        seqs.push(next);
        next += u64::from(*n);
    }
    let rr = RerequestConfig {
        delay_ns: 0,
        line_wait_ns: 45_000,
        max_msgs: 5,
        max_outstanding: 4,
        retry_ns: 30_000,
        max_retries: 2,
    };
    let mut a = arb_with(ArbConfig {
        policy: Policy::Time { timeout_ns: 1_000_000 },
        start_seq: Some(1),
        idle_ns: 0,
        rerequest: Some(rr),
        ..Default::default()
    });
    assert_eq!(a.rerequest_input(), Some(2));
    // Events in time order: (time, order, input, first seq, count).
    let mut events: BTreeMap<(u64, u64), (usize, u64, u16)> = BTreeMap::new();
    let mut order = 0u64;
    let mut carried = BTreeSet::new();
    for (i, (n, la, lb)) in s.iter().enumerate() {
        for (input, (lost, delay)) in [(0usize, la), (1, lb)] {
            if !lost {
                events.insert((i as u64 * SPACING + delay, order), (input, seqs[i], *n));
                order += 1;
                carried.extend(seqs[i]..seqs[i] + u64::from(*n));
            }
        }
    }
    let mut r = Rec::default();
    let mut now = 0;
    loop {
        // The next event, unless a deadline of the arbitrator's comes first.
        let next_ev = events.keys().next().copied();
        if let Some(d) = a.poll_timeout() {
            if next_ev.is_none_or(|(t, _)| d < t) {
                now = d;
                a.advance_to(d, &mut r);
                serve(&mut a, now, latency, pack, refused, &mut events, &mut order);
                a.check_accounting().unwrap();
                continue;
            }
        }
        let Some(key) = next_ev else { break };
        let (input, seq, n) = events.remove(&key).unwrap();
        now = key.0;
        let frame = if input == 2 { mold_to(&answer_flow(), SESSION, seq, n) } else { mold(SESSION, seq, n) };
        a.process(now, input, &frame, &mut r);
        serve(&mut a, now, latency, pack, refused, &mut events, &mut order);
        a.check_accounting().unwrap();
    }
    a.finish(now + 1, &mut r);
    a.check_accounting().unwrap();
    (a, r, seqs, carried)
}

/// The server: each request answered `latency` later, in packets of at most `pack`
/// messages, the refused ones left out.
fn serve(
    a: &mut Arbitrator,
    now: u64,
    latency: u64,
    pack: u16,
    refused: &BTreeSet<u64>,
    events: &mut BTreeMap<(u64, u64), (usize, u64, u16)>,
    order: &mut u64,
) {
    while let Some(q) = a.poll_request() {
        assert_eq!(&q.session, SESSION);
        assert!(q.count >= 1 && q.count <= 5, "at most max_msgs a request: {q:?}");
        let mut run_start = None;
        for s in q.seq..=q.seq + u64::from(q.count) {
            let send = s < q.seq + u64::from(q.count) && !refused.contains(&s);
            match (send, run_start) {
                (true, None) => run_start = Some(s),
                (true, Some(st)) if s - st == u64::from(pack) => {
                    events.insert((now + latency, *order), (2, st, pack));
                    *order += 1;
                    run_start = Some(s);
                }
                (false, Some(st)) => {
                    events.insert((now + latency, *order), (2, st, (s - st) as u16));
                    *order += 1;
                    run_start = None;
                }
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn hr_is_everything_but_what_the_server_refused(
        s in scenario(),
        refuse in prop::collection::btree_set(1u64..400, 0..20),
        latency in 1u64..20_000,
        pack in 1u16..4,
    ) {
        let (a, r, _seqs, carried) = run(&s, &refuse, latency, pack);
        let Some(&last) = carried.iter().next_back() else { return Ok(()) };
        // HR, message by message; each body is its own sequence number.
        let mut got = Vec::new();
        for o in &r.hr {
            let p = &o.frame[42..];
            let m = tickplant_wire::moldudp64::Packet::new_checked(p).unwrap();
            for (k, msg) in m.messages().enumerate() {
                let body = msg.unwrap().1;
                prop_assert_eq!(body, &(o.seq + k as u64).to_be_bytes()[..]);
                got.push(o.seq + k as u64);
            }
        }
        prop_assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, once");
        let both_lost: BTreeSet<u64> = (1..=last).filter(|q| !carried.contains(q)).collect();
        let withheld: BTreeSet<u64> = both_lost.intersection(&refuse).copied().collect();
        let want: Vec<u64> = (1..=last).filter(|q| !withheld.contains(q)).collect();
        prop_assert_eq!(&got, &want);
        let mut gaps = BTreeSet::new();
        for g in r.gaps.iter().filter(|g| g.output == OutputId::Hr) {
            prop_assert_eq!(g.reason, GapReason::RerequestTimeout, "{:?}", g);
            gaps.extend(g.first_seq..=g.last_seq);
        }
        prop_assert_eq!(gaps, withheld);
        let st = a.stats();
        let rr = st.rerequest.unwrap();
        prop_assert!(rr.messages_recovered >= (both_lost.len() - gaps_len(&r)) as u64);
        prop_assert_eq!(st.hr.pending, 0);
        prop_assert_eq!(rr.outstanding, 0);
    }
}

fn gaps_len(r: &Rec) -> usize {
    r.gaps.iter().filter(|g| g.output == OutputId::Hr).map(|g| g.messages as usize).sum()
}

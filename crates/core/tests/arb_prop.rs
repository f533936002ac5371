//! Property test of the arbitrator against an oracle.
//!
//! A stream of packets is copied onto two inputs; each copy independently loses, duplicates
//! and delays packets (delays reorder them). With a time window longer than the largest
//! delay, the HR output must equal the sorted union of what arrived, and its gaps must be
//! exactly the runs of packets both inputs lost. The LL output must be strictly increasing,
//! a subset of the union, with every frame byte-identical to an input frame. Under any
//! policy, the accounting balances.

mod common;
use common::*;
use proptest::prelude::*;
use std::collections::BTreeSet;
use tickplant_core::*;

#[derive(Debug, Clone)]
struct Copy {
    lost: bool,
    dup: bool,
    delay: u64,
}

fn copy_strategy(max_delay: u64) -> impl Strategy<Value = Copy> {
    (prop::bool::weighted(0.15), prop::bool::weighted(0.05), 0..=max_delay).prop_map(|(lost, dup, delay)| Copy {
        lost,
        dup,
        delay,
    })
}

/// (count, copy on A, copy on B) per packet.
fn scenario() -> impl Strategy<Value = Vec<(u16, Copy, Copy)>> {
    prop::collection::vec((1u16..4, copy_strategy(40_000), copy_strategy(40_000)), 1..150)
}

const SPACING: u64 = 5_000;

/// Arrival events (time, input, packet index), in time order.
fn arrivals(s: &[(u16, Copy, Copy)]) -> Vec<(u64, usize, usize)> {
    let mut ev = Vec::new();
    for (i, (_, a, b)) in s.iter().enumerate() {
        for (input, c) in [(0usize, a), (1, b)] {
            if c.lost {
                continue;
            }
            let t = i as u64 * SPACING + c.delay;
            ev.push((t, input, i));
            if c.dup {
                ev.push((t + 1, input, i));
            }
        }
    }
    ev.sort();
    ev
}

fn run(s: &[(u16, Copy, Copy)], policy: Policy, capacity: usize) -> (Arbitrator, Rec, Vec<Vec<u8>>, Vec<u64>) {
    let mut seqs = Vec::new();
    let mut next = 1u64;
    let frames: Vec<Vec<u8>> = s
        .iter()
        .map(|(n, _, _)| {
            seqs.push(next);
            let f = mold(SESSION, next, *n);
            next += u64::from(*n);
            f
        })
        .collect();
    let mut a = arb_with(ArbConfig {
        policy,
        start_seq: Some(1),
        capacity_packets: capacity,
        idle_ns: 0,
        ..Default::default()
    });
    let mut r = Rec::default();
    let ev = arrivals(s);
    for &(t, input, i) in &ev {
        a.process(t, input, &frames[i], &mut r);
        a.check_accounting().unwrap();
    }
    let end = ev.last().map_or(0, |e| e.0) + 1;
    a.finish(end, &mut r);
    (a, r, frames, seqs)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn hr_equals_sorted_union_and_gaps_are_what_both_lost(s in scenario()) {
        // Window (50 us) longer than the largest delay (40 us).
        let (a, r, frames, seqs) = run(&s, Policy::Time { timeout_ns: 50_000 }, 4096);
        let received: BTreeSet<usize> = arrivals(&s).iter().map(|e| e.2).collect();
        let union: Vec<u64> = received.iter().map(|&i| seqs[i]).collect();
        prop_assert_eq!(r.hr_seqs(), union);
        for o in &r.hr {
            let i = seqs.binary_search(&o.seq).unwrap();
            prop_assert_eq!(&o.frame, &frames[i]);
        }
        // Gaps: maximal runs of packets lost on both, before the last packet received.
        let mut want = Vec::new();
        if let Some(&last) = received.last() {
            let mut i = 0;
            while i < last {
                if received.contains(&i) { i += 1; continue; }
                let first = seqs[i];
                while i < last && !received.contains(&i) { i += 1; }
                want.push((first, seqs[i] - 1));
            }
        }
        let got: Vec<(u64, u64)> = r.gaps.iter().filter(|g| g.output == OutputId::Hr).map(|g| (g.first_seq, g.last_seq)).collect();
        prop_assert_eq!(got, want);
        prop_assert!(r.gaps.iter().filter(|g| g.output == OutputId::Hr).all(|g| matches!(g.reason, GapReason::Timeout | GapReason::Flush)));
        a.check_accounting().unwrap();
        prop_assert_eq!(a.stats().hr.pending, 0);
    }

    #[test]
    fn ll_is_increasing_subset_of_inputs(s in scenario()) {
        let (a, r, frames, seqs) = run(&s, Policy::Time { timeout_ns: 50_000 }, 4096);
        let received: BTreeSet<u64> = arrivals(&s).iter().map(|e| seqs[e.2]).collect();
        for w in r.ll.windows(2) {
            prop_assert!(w[0].seq < w[1].seq);
        }
        for o in &r.ll {
            prop_assert!(received.contains(&o.seq));
            let i = seqs.binary_search(&o.seq).unwrap();
            prop_assert_eq!(&o.frame, &frames[i]);
        }
        // LL gaps and deliveries tile the sequence space without overlap.
        let st = a.stats();
        prop_assert_eq!(st.ll.messages + st.ll.messages_lost, st.ll.sequence_span);
    }

    #[test]
    fn every_policy_balances_and_stays_in_order(s in scenario(), which in 0usize..4, t in 0u64..60_000, m in 0u64..12, cap in 1usize..16) {
        let policy = match which {
            0 => Policy::LowLatency,
            1 => Policy::Time { timeout_ns: t },
            2 => Policy::Count { max_msgs: m },
            _ => Policy::TimeCount { timeout_ns: t, max_msgs: m },
        };
        let (a, r, _, _) = run(&s, policy, cap);
        for w in r.hr.windows(2) {
            prop_assert!(w[0].seq + u64::from(w[0].count) <= w[1].seq, "HR strictly increasing, no repeats");
            prop_assert!(w[0].at <= w[1].at, "release times never go back");
        }
        for o in &r.hr {
            prop_assert!(o.at >= o.arrival);
            if let Policy::Time { timeout_ns } = policy {
                prop_assert!(o.at - o.arrival <= timeout_ns, "waited {} > {}", o.at - o.arrival, timeout_ns);
            }
        }
        prop_assert!(a.stats().hr.max_pending <= cap as u64 + 1);
        a.check_accounting().unwrap();
        let st = a.stats();
        prop_assert_eq!(st.hr.pending, 0);
        prop_assert_eq!(st.hr.messages + st.hr.messages_lost, st.hr.sequence_span);
    }
}

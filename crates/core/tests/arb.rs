//! Focused tests of the arbitrator: each policy, run-time changes, overflow, trimming,
//! resets and the end-of-session flush.

mod common;
use common::*;
use tickplant_core::arb::check_stats;
use tickplant_core::*;

const US: u64 = 1_000;

fn feed(a: &mut Arbitrator, r: &mut Rec, steps: &[(u64, usize, Vec<u8>)]) {
    for (t, input, f) in steps {
        a.process(*t, *input, f, r);
    }
    a.check_accounting().unwrap();
}

#[test]
fn in_order_passes_straight_through_both_outputs() {
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    let steps: Vec<_> =
        (1..=5).flat_map(|s| [(s * 10, 0, mold(SESSION, s, 1)), (s * 10 + 1, 1, mold(SESSION, s, 1))]).collect();
    feed(&mut a, &mut r, &steps);
    assert_eq!(r.ll_seqs(), vec![1, 2, 3, 4, 5]);
    assert_eq!(r.hr_seqs(), vec![1, 2, 3, 4, 5]);
    assert!(r.hr.iter().all(|o| o.at == o.arrival), "no buffering delay when in order");
    let st = a.stats();
    assert_eq!((st.inputs[0].wins, st.inputs[1].duplicates), (5, 5));
    assert!(r.gaps.is_empty());
}

#[test]
fn time_policy_waits_then_gives_up() {
    let mut a = arb(Policy::Time { timeout_ns: 50 * US });
    let mut r = Rec::default();
    // 2 is lost on A; B brings it 30 us later: HR waits and recovers it, LL skips it.
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (10 * US, 0, mold(SESSION, 3, 1)),
            (20 * US, 0, mold(SESSION, 4, 1)),
            (40 * US, 1, mold(SESSION, 2, 1)),
        ],
    );
    assert_eq!(r.ll_seqs(), vec![1, 3, 4]);
    assert_eq!(r.gaps_of(OutputId::Ll), vec![(2, 2, GapReason::Skipped)]);
    assert_eq!(r.hr_seqs(), vec![1, 2, 3, 4]);
    assert_eq!(r.hr[2].arrival, 10 * US);
    assert_eq!(r.hr[2].at, 40 * US, "3 released when 2 arrived");
    assert!(r.gaps_of(OutputId::Hr).is_empty());
    assert_eq!(a.stats().inputs[1].wins, 1, "B's copy of 2 was the first");

    // 6 never comes: 7 waits 50 us, then the gap is given up at exactly its deadline.
    feed(&mut a, &mut r, &[(100 * US, 0, mold(SESSION, 5, 1)), (110 * US, 0, mold(SESSION, 7, 1))]);
    assert_eq!(a.poll_timeout(), Some(160 * US));
    feed(&mut a, &mut r, &[(500 * US, 0, mold(SESSION, 8, 1))]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(6, 6, GapReason::Timeout)]);
    let g = r.gaps.iter().find(|g| g.output == OutputId::Hr).unwrap();
    assert_eq!(g.at_ns, 160 * US);
    assert_eq!(r.hr_seqs(), vec![1, 2, 3, 4, 5, 7, 8]);
    assert_eq!(r.hr[5].at, 160 * US);
    // The missing packet arriving afterwards is late, on both outputs.
    feed(&mut a, &mut r, &[(600 * US, 1, mold(SESSION, 6, 1))]);
    let st = a.stats();
    assert_eq!(st.inputs[1].late, 1);
    // LL also skipped 2 earlier, so B's copy of 2 was late there too.
    assert_eq!((st.hr.late, st.ll.late), (1, 2));
    check_stats(&st).unwrap();
}

#[test]
fn count_policy_gives_up_when_too_many_messages_wait() {
    let mut a = arb(Policy::Count { max_msgs: 4 });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 3, 2)), (2, 0, mold(SESSION, 5, 2))]);
    assert_eq!(r.hr_seqs(), vec![1], "4 messages may wait");
    feed(&mut a, &mut r, &[(3, 0, mold(SESSION, 7, 1))]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Count)]);
    assert_eq!(r.hr_seqs(), vec![1, 3, 5, 7]);
}

#[test]
fn count_policy_never_strands_packets_when_the_feed_goes_quiet() {
    let mut a = arb_with(ArbConfig {
        policy: Policy::Count { max_msgs: 100 },
        idle_ns: 1_000 * US,
        start_seq: Some(1),
        ..Default::default()
    });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (5, 0, mold(SESSION, 3, 1))]);
    assert_eq!(r.hr_seqs(), vec![1]);
    assert_eq!(a.poll_timeout(), Some(5 + 1_000 * US), "the caller learns the idle deadline");
    a.advance_to(2_000 * US, &mut r);
    assert_eq!(r.hr_seqs(), vec![1, 3]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Idle)]);
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn time_count_takes_whichever_comes_first() {
    let mut a = arb(Policy::TimeCount { timeout_ns: 10 * US, max_msgs: 2 });
    let mut r = Rec::default();
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(SESSION, 3, 1)),
            (2, 0, mold(SESSION, 4, 1)),
            (3, 0, mold(SESSION, 5, 1)),
        ],
    );
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Count)]);
    feed(&mut a, &mut r, &[(4, 0, mold(SESSION, 7, 1)), (100 * US, 0, mold(SESSION, 8, 1))]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Count), (6, 6, GapReason::Timeout)]);
    assert_eq!(r.hr_seqs(), vec![1, 3, 4, 5, 7, 8]);
}

#[test]
fn low_latency_policy_makes_hr_equal_ll() {
    let mut a = arb(Policy::LowLatency);
    let mut r = Rec::default();
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(SESSION, 3, 1)),
            (2, 1, mold(SESSION, 2, 1)),
            (3, 1, mold(SESSION, 4, 1)),
        ],
    );
    assert_eq!(r.hr_seqs(), r.ll_seqs());
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Skipped)]);
    assert_eq!(a.stats().hr.max_pending, 0, "nothing was copied");
}

#[test]
fn run_time_policy_changes_keep_every_buffered_packet_once() {
    let mut a = arb(Policy::Time { timeout_ns: 1_000 * US });
    let mut r = Rec::default();
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(SESSION, 3, 1)),
            (2, 0, mold(SESSION, 4, 3)),
            (3, 0, mold(SESSION, 9, 1)),
        ],
    );
    assert_eq!(a.stats().hr.pending, 3);
    // Tighten to a count window: 4 messages waiting > 2, so the oldest waits are given up.
    a.change_policy(10, Policy::Count { max_msgs: 2 }, &mut r);
    assert_eq!(r.hr_seqs(), vec![1, 3, 4]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Count)]);
    assert_eq!(a.stats().hr.pending, 1);
    // Back to time: 9 still waits, now under a 5 us window counted from its arrival.
    a.change_policy(20, Policy::Time { timeout_ns: 5 * US }, &mut r);
    assert_eq!(a.poll_timeout(), Some(3 + 5 * US));
    feed(&mut a, &mut r, &[(30, 1, mold(SESSION, 7, 2))]);
    assert_eq!(r.hr_seqs(), vec![1, 3, 4, 7, 9]);
    // Then low-latency: nothing may wait.
    feed(&mut a, &mut r, &[(40, 0, mold(SESSION, 12, 1))]);
    a.change_policy(50, Policy::LowLatency, &mut r);
    assert_eq!(r.hr_seqs(), vec![1, 3, 4, 7, 9, 12]);
    let mut seen = r.hr_seqs();
    seen.dedup();
    assert_eq!(seen.len(), r.hr.len(), "nothing duplicated");
    let changes = r.events.iter().filter(|e| matches!(e, ArbEvent::PolicyChanged { .. })).count();
    assert_eq!(changes, 3);
    a.check_accounting().unwrap();
}

#[test]
fn overflow_gives_up_the_oldest_wait() {
    let mut a = arb_with(ArbConfig {
        capacity_packets: 2,
        start_seq: Some(1),
        policy: Policy::Time { timeout_ns: u64::MAX / 4 },
        ..Default::default()
    });
    let mut r = Rec::default();
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(SESSION, 3, 1)),
            (2, 0, mold(SESSION, 5, 1)),
            (3, 0, mold(SESSION, 7, 1)),
        ],
    );
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Overflow)]);
    assert_eq!(r.hr_seqs(), vec![1, 3]);
    assert_eq!(a.stats().hr.pending, 2);
    // Byte capacity too: room for one frame only.
    let one = mold(SESSION, 1, 1).len();
    let mut a = arb_with(ArbConfig { capacity_bytes: one + 10, start_seq: Some(1), ..Default::default() });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 3, 1)), (2, 0, mold(SESSION, 5, 1))]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Overflow)]);
    assert_eq!(r.hr_seqs(), vec![1, 3]);
}

#[test]
fn overlapping_packets_are_trimmed_never_repeated() {
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    // A sends 1..=3 then 4..=6; B's packetization differs: 2..=5.
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 3)), (1, 1, mold(SESSION, 2, 4)), (2, 0, mold(SESSION, 4, 3))]);
    assert_eq!(r.ll.iter().map(|o| (o.seq, o.count)).collect::<Vec<_>>(), vec![(1, 3), (4, 2), (6, 1)]);
    assert_eq!(r.hr.iter().map(|o| (o.seq, o.count)).collect::<Vec<_>>(), vec![(1, 3), (4, 2), (6, 1)]);
    assert_eq!(r.ll[1].frame, mold(SESSION, 4, 2), "the trimmed frame is exactly the packet of the new messages");
    // Trimming of a buffered packet on release.
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 4, 3)), (2, 1, mold(SESSION, 2, 4))]);
    assert_eq!(r.hr.iter().map(|o| (o.seq, o.count)).collect::<Vec<_>>(), vec![(1, 1), (2, 4), (6, 1)]);
    assert_eq!(r.hr[2].frame, mold(SESSION, 6, 1));
    let st = a.stats();
    assert_eq!(st.hr.trimmed, 1);
    assert_eq!(st.hr.messages, 6);
}

#[test]
fn untrimmable_overlaps_are_counted_not_hidden() {
    let mut cfg = SequencerConfig::preset(Protocol::Custom);
    cfg.count = CountSpec::Field(FieldSpec::new(4, 1, Endian::Big));
    let mut a =
        Arbitrator::new(ArbConfig { start_seq: Some(1), ..Default::default() }, Sequencer::new(cfg.clone()).unwrap())
            .unwrap();
    let f = |seq: u32, n: u8| {
        let mut p = seq.to_be_bytes().to_vec();
        p.push(n);
        tickplant_wire::build::udp_frame(&Default::default(), 0, &p)
    };
    let mut r = Rec::with(Sequencer::new(cfg).unwrap());
    a.process(0, 0, &f(1, 3), &mut r);
    a.process(1, 1, &f(2, 3), &mut r);
    let st = a.stats();
    assert_eq!((st.ll.packets, st.ll.redelivered), (2, 2));
    a.check_accounting().unwrap();
}

#[test]
fn moldudp64_session_change_starts_a_new_space() {
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    let s2 = b"SESSION002";
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(SESSION, 3, 1)), // waits for 2
            (2, 0, eos(SESSION, 4)),     // the session ends: the next one is taken on at once
            (2, 0, mold(s2, 1, 1)),      // new session: 2 is given up, 3 released, new space
            (3, 1, mold(SESSION, 3, 1)), // B's copy of the old session: late, not a reset
            (4, 1, mold(s2, 1, 1)),
            (5, 0, mold(s2, 2, 1)),
        ],
    );
    assert_eq!(r.hr_seqs(), vec![1, 3, 1, 2]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Reset)]);
    let resets: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match e {
            ArbEvent::SequenceReset { kind, new_seq, .. } => Some((*kind, *new_seq)),
            _ => None,
        })
        .collect();
    assert_eq!(resets, vec![(ResetKind::Session, 1)]);
    let st = a.stats();
    assert_eq!(st.inputs[1].late, 1);
    assert_eq!(st.inputs[1].duplicates, 1);
}

fn session_resets(r: &Rec) -> Vec<(ResetKind, u64)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            ArbEvent::SequenceReset { kind, new_seq, .. } => Some((*kind, *new_seq)),
            _ => None,
        })
        .collect()
}

/// A well-formed packet of another session in mid-feed: held, then found stray when the
/// current session goes on; it resets nothing and reaches no output.
#[test]
fn a_stray_session_packet_resets_nothing() {
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    let stray = b"JUNKJUNK01";
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, mold(stray, 900, 3)), // held
            (2, 1, mold(SESSION, 1, 1)), // B's copy: a duplicate, nothing new, still held
            (3, 0, mold(SESSION, 2, 2)), // the session goes on: the held packet was stray
            (4, 1, mold(SESSION, 2, 2)),
            (5, 0, mold(stray, 901, 1)), // another, held again
        ],
    );
    assert_eq!(r.other_reasons, vec![OtherReason::Stray]);
    a.finish(10, &mut r);
    assert_eq!(r.hr_seqs(), vec![1, 2]);
    assert_eq!(r.ll_seqs(), vec![1, 2]);
    assert!(session_resets(&r).is_empty());
    assert!(r.gaps.is_empty());
    assert_eq!(r.other_reasons, vec![OtherReason::Stray, OtherReason::Stray], "the one held at the end too");
    let st = a.stats();
    assert_eq!(st.other_by_reason["stray"], 2);
    assert_eq!(st.inputs[0].other, 2);
    a.check_accounting().unwrap();
}

/// A new session without an end of session: its first packet waits for the copy on the
/// other line (or its next packet), then goes first; nothing is lost.
#[test]
fn a_new_session_is_taken_on_when_confirmed() {
    let s2 = b"SESSION002";
    for confirm in [(5, 1, mold(s2, 1, 1)), (5, 0, mold(s2, 2, 1))] {
        let mut a = arb(Policy::Time { timeout_ns: 100 * US });
        let mut r = Rec::default();
        feed(
            &mut a,
            &mut r,
            &[
                (0, 0, mold(SESSION, 1, 1)),
                (1, 1, mold(SESSION, 1, 1)),
                (2, 0, mold(SESSION, 2, 1)),
                (3, 0, mold(s2, 1, 1)),      // held
                (4, 1, mold(SESSION, 2, 1)), // B's copy of the old session's last: a duplicate
                confirm.clone(),
            ],
        );
        let want: Vec<u64> = if confirm.1 == 1 { vec![1, 2, 1] } else { vec![1, 2, 1, 2] };
        assert_eq!(r.hr_seqs(), want);
        assert_eq!(r.ll_seqs(), want);
        assert_eq!(session_resets(&r), vec![(ResetKind::Session, 1)]);
        assert_eq!(r.other, 0);
        let st = a.stats();
        assert_eq!(st.inputs[1].duplicates, if confirm.1 == 1 { 3 } else { 2 });
        assert!(r.gaps.is_empty());
    }
}

/// An end of the current session takes the held session on at once.
#[test]
fn end_of_session_confirms_the_held_session() {
    let s2 = b"SESSION002";
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 2)), (1, 0, mold(s2, 1, 1))]);
    assert_eq!(r.hr_seqs(), vec![1]);
    feed(&mut a, &mut r, &[(2, 1, eos(SESSION, 3))]);
    assert_eq!(r.hr_seqs(), vec![1, 1]);
    assert_eq!(session_resets(&r), vec![(ResetKind::Session, 1)]);
    feed(&mut a, &mut r, &[(3, 0, mold(s2, 2, 1))]);
    assert_eq!(r.hr_seqs(), vec![1, 1, 2]);
}

/// Datagrams that begin like MoldUDP64 but are not well-formed packets go to *other*,
/// named, and change nothing.
#[test]
fn malformed_moldudp64_goes_to_other() {
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    let junk = |count: u16, extra: &[u8]| {
        let mut p = tickplant_wire::build::moldudp64_payload(b"JUNKJUNK01", 7, &[b"abc"]);
        p[18..20].copy_from_slice(&count.to_be_bytes());
        p.extend_from_slice(extra);
        tickplant_wire::build::udp_frame(&Default::default(), 0, &p)
    };
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 1, 1)),
            (1, 0, junk(40, b"")),  // more blocks announced than held
            (2, 0, junk(1, b"zz")), // bytes after the last block
            (3, 0, junk(0, b"")),   // a "heartbeat" with a block after it
            (4, 0, mold(SESSION, 2, 1)),
        ],
    );
    assert_eq!(r.hr_seqs(), vec![1, 2]);
    assert_eq!(r.other_reasons, vec![OtherReason::Malformed; 3]);
    assert!(session_resets(&r).is_empty());
}

/// Without an accept list, each input's feed is its first destination; a well-formed
/// packet elsewhere goes to *other* and the conflict is kept for the caller. With one,
/// the sequencer filters and there is no conflict.
#[test]
fn two_destinations_on_one_input_are_a_conflict() {
    let elsewhere = tickplant_wire::build::Flow { dst_ip: [239, 1, 1, 1], dst_port: 5000, ..Default::default() };
    let steps = [
        (0, 0, mold(SESSION, 1, 1)),
        (1, 1, mold(SESSION, 1, 1)),
        (2, 1, mold_to(&elsewhere, b"OTHERFEED1", 1, 1)),
        (3, 0, mold(SESSION, 2, 1)),
    ];
    let mut a = arb(Policy::Time { timeout_ns: 100 * US });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &steps);
    assert_eq!(r.hr_seqs(), vec![1, 2]);
    let c = a.destination_conflict().expect("a conflict");
    assert_eq!(c.input, 1);
    assert_eq!(c.first.to_string(), "233.54.12.111:26400");
    assert_eq!(c.second.to_string(), "239.1.1.1:5000");
    assert_eq!(r.other_reasons, vec![OtherReason::Filtered]);

    let mut cfg = SequencerConfig::preset(Protocol::Moldudp64);
    cfg.accept = vec!["233.54.12.111:26400".parse().unwrap()];
    let mut a =
        Arbitrator::new(ArbConfig { start_seq: Some(1), ..Default::default() }, Sequencer::new(cfg).unwrap()).unwrap();
    let mut r = Rec::default();
    feed(&mut a, &mut r, &steps);
    assert_eq!(r.hr_seqs(), vec![1, 2]);
    assert_eq!(a.destination_conflict(), None);
    assert_eq!(r.other_reasons, vec![OtherReason::Filtered]);
}

#[test]
fn xdp_reset_message_and_its_copy() {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Xdp)).unwrap();
    let mut a = Arbitrator::new(ArbConfig::default(), seq.clone()).unwrap();
    let pkt = |s: u32, flag: u8, t: u32| {
        let mut p = vec![0u8; 16];
        let ty = if flag == 12 { 1 } else { 100 };
        tickplant_wire::xdp::push_message(&mut p, ty, &[0; 10]);
        tickplant_wire::xdp::Repr {
            pkt_size: p.len() as u16,
            delivery_flag: flag,
            number_msgs: 1,
            seq_num: s,
            send_time: t,
            send_time_ns: 0,
        }
        .emit(&mut p[..16]);
        tickplant_wire::build::udp_frame(&Default::default(), 0, &p)
    };
    let mut r = Rec::with(seq);
    for (t, i, f) in [
        (0, 0, pkt(500, 11, 1)),
        (1, 0, pkt(501, 11, 1)),
        (2, 0, pkt(1, 12, 2)),
        (3, 1, pkt(500, 11, 1)),
        (4, 1, pkt(1, 12, 2)),
        (5, 0, pkt(2, 11, 3)),
        (6, 1, pkt(1, 12, 9)),
    ] {
        a.process(t, i, &f, &mut r);
    }
    let resets =
        r.events.iter().filter(|e| matches!(e, ArbEvent::SequenceReset { kind: ResetKind::ResetMessage, .. })).count();
    assert_eq!(resets, 2, "the copy on B is a duplicate; a later, different reset is a new one");
    assert_eq!(r.hr.iter().map(|o| o.seq).collect::<Vec<_>>(), vec![500, 501, 1, 2, 1]);
    a.check_accounting().unwrap();
}

#[test]
fn large_backward_jump_is_a_reset_and_old_copies_are_late() {
    let mut a = arb_with(ArbConfig { reset_jump: 1000, start_seq: Some(5000), ..Default::default() });
    let mut r = Rec::default();
    feed(
        &mut a,
        &mut r,
        &[
            (0, 0, mold(SESSION, 5000, 1)),
            (1, 0, mold(SESSION, 5001, 1)),
            (2, 0, mold(SESSION, 1, 1)),
            (3, 1, mold(SESSION, 5001, 1)),
            (4, 0, mold(SESSION, 2, 1)),
        ],
    );
    assert_eq!(r.hr_seqs(), vec![5000, 5001, 1, 2]);
    assert_eq!(a.stats().sequence_resets, 1);
    assert_eq!(a.stats().inputs[1].late, 1);
    // A small backward step is just an old packet.
    feed(&mut a, &mut r, &[(5, 1, mold(SESSION, 1, 1))]);
    assert_eq!(a.stats().sequence_resets, 1);
}

#[test]
fn end_of_session_flush_releases_everything() {
    let mut a = arb(Policy::Count { max_msgs: 1000 });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 3, 1)), (2, 0, mold(SESSION, 6, 2))]);
    assert_eq!(r.hr_seqs(), vec![1]);
    a.finish(10, &mut r);
    assert_eq!(r.hr_seqs(), vec![1, 3, 6]);
    assert_eq!(r.gaps_of(OutputId::Hr), vec![(2, 2, GapReason::Flush), (4, 5, GapReason::Flush)]);
    assert_eq!(a.stats().hr.pending, 0);
    a.check_accounting().unwrap();
    let st = a.stats();
    assert_eq!(st.hr.messages + st.hr.messages_lost, 7);
}

#[test]
fn control_and_other_traffic_is_counted() {
    let mut a = arb(Policy::Time { timeout_ns: 10 });
    let mut r = Rec::default();
    let mut arp = mold(SESSION, 1, 1);
    arp[12] = 0x08;
    arp[13] = 0x06;
    let mut eos = mold(SESSION, 2, 0);
    eos[14 + 20 + 8 + 18] = 0xff;
    eos[14 + 20 + 8 + 19] = 0xff;
    feed(
        &mut a,
        &mut r,
        &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 2, 0)), (2, 1, arp), (3, 0, eos), (4, 1, vec![1, 2, 3])],
    );
    let st = a.stats();
    assert_eq!(st.inputs[0].control, 2);
    assert_eq!(st.inputs[1].other, 2);
    assert_eq!(st.other_by_reason["not_ipv4"], 1);
    assert_eq!(st.other_by_reason["malformed"], 1);
    assert_eq!(r.other, 2);
    assert!(r.events.iter().any(|e| matches!(e, ArbEvent::EndOfSession { seq: 2, .. })));
}

#[test]
fn outputs_can_be_switched_off() {
    let mut a = arb_with(ArbConfig { low_latency: false, start_seq: Some(1), ..Default::default() });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 3, 1)), (2, 1, mold(SESSION, 2, 1))]);
    assert!(r.ll.is_empty());
    assert_eq!(r.hr_seqs(), vec![1, 2, 3]);
    let mut a = arb_with(ArbConfig { high_reliability: false, start_seq: Some(1), ..Default::default() });
    let mut r = Rec::default();
    feed(&mut a, &mut r, &[(0, 0, mold(SESSION, 1, 1)), (1, 0, mold(SESSION, 3, 1)), (2, 1, mold(SESSION, 2, 1))]);
    assert!(r.hr.is_empty());
    assert_eq!(r.ll_seqs(), vec![1, 3]);
    assert_eq!(a.stats().inputs[1].late, 1, "with HR off, late is judged by LL");
    assert!(Arbitrator::new(
        ArbConfig { low_latency: false, high_reliability: false, ..Default::default() },
        Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap()
    )
    .is_err());
}

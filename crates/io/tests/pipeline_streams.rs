//! Both arbitrated streams reach consumers, each with a gap record for every gap of its
//! stream, in its place: checked against the impairer's truth (which packets each line
//! carried, at what time), not against the arbitrator itself.
//!
//! - HR: every message of the packets either line carried, in sequence order; a gap record
//!   for each run of packets both lines lost (before the last packet that arrived).
//! - LL: the packets in arrival order (the two captures merged by time, A first on a tie)
//!   that bring messages past the last one forwarded; a gap record for each jump.
//! - The books follow one stream; the other stream's events carry `NO_BOOK` and no
//!   book-derived fields.

use std::path::Path;
use std::sync::{Arc, Mutex};

use tickplant_core::event::{flags, EventAction, Side};
use tickplant_core::{GapReason, LinkType, Protocol, Sequencer, SequencerConfig};
use tickplant_io::pipeline::{self, ConsumerAction, Handler, Record, SlowPolicy, Stream};

mod common;

type Seen = Arc<Mutex<Vec<Record>>>;

fn collector() -> (Handler, Seen) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (Handler::new(move |r: &Record| s.lock().expect("not poisoned").push(*r)), seen)
}

/// What a consumer should receive: market records as sequence numbers, gap records as
/// (first, last, messages), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Message(u64),
    Gap(u64, u64, u64),
}

fn items(records: &[Record]) -> Vec<Item> {
    records
        .iter()
        .map(|r| match r.event.action {
            EventAction::Gap => Item::Gap(r.event.sequence, r.event.order_id, u64::from(r.event.size)),
            _ => Item::Message(r.event.sequence),
        })
        .collect()
}

/// The oracles from the truth: (HR items, LL items).
fn oracles(frames: &[(u64, Vec<u8>)], im: &tickplant_sim::Impaired) -> (Vec<Item>, Vec<Item>) {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).expect("preset");
    let range: Vec<(u64, u64)> = frames
        .iter()
        .map(|(_, f)| {
            let i = seq.classify(LinkType::Ethernet, f).expect("a feed packet");
            (i.seq, i.end())
        })
        .collect();
    let messages = |s: u64, e: u64| (s..e).map(Item::Message);
    // HR: the union, with the runs both lost before the last one carried.
    let carried: Vec<bool> = im.truth.iter().map(|t| t.a_copies + t.b_copies > 0).collect();
    let last = carried.iter().rposition(|&c| c).expect("something arrived");
    let mut hr = Vec::new();
    let mut lost: Option<(u64, u64)> = None;
    for (i, &(s, e)) in range.iter().enumerate().take(last + 1) {
        if carried[i] {
            if let Some((f, l)) = lost.take() {
                hr.push(Item::Gap(f, l - 1, l - f));
            }
            hr.extend(messages(s, e));
        } else {
            let f = lost.map_or(s, |(f, _)| f);
            lost = Some((f, e));
        }
    }
    // LL: arrivals merged by time, A first on a tie; what moves past the last forwarded.
    let (mut a, mut b) = (im.a.iter().peekable(), im.b.iter().peekable());
    let mut ll = Vec::new();
    let mut next = 1;
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.0 <= y.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let &(_, i) = if take_a { a.next() } else { b.next() }.expect("peeked");
        let (s, e) = range[i];
        if e <= next {
            continue;
        }
        if s > next {
            ll.push(Item::Gap(next, s - 1, s - next));
        }
        ll.extend(messages(s.max(next), e));
        next = e;
    }
    (hr, ll)
}

struct Run {
    hr: Vec<Record>,
    ll: Vec<Record>,
    ll_trades: Vec<Record>,
    report: pipeline::Report,
}

fn run(dir: &Path, books: Stream, decode_thread: bool) -> Run {
    let (hr, hr_seen) = collector();
    let (ll, ll_seen) = collector();
    let (trades, trades_seen) = collector();
    let mut ll = common::consumer("ll", ConsumerAction::Handler(ll), SlowPolicy::Backpressure, 1 << 10);
    ll.stream = Stream::Ll;
    let mut trades = common::consumer("ll-trades", ConsumerAction::Handler(trades), SlowPolicy::Drop, 1 << 16);
    trades.stream = Stream::Ll;
    trades.actions = vec![EventAction::Execute, EventAction::Trade];
    let mut spec = common::itch_spec(
        dir.join("a.pcap"),
        vec![common::consumer("hr", ConsumerAction::Handler(hr), SlowPolicy::Backpressure, 1 << 10), ll, trades],
    );
    spec.inputs.push(dir.join("b.pcap"));
    spec.arb.policy = tickplant_core::arb::Policy::Time { timeout_ns: 5_000_000 };
    spec.arb.start_seq = Some(1);
    spec.book_stream = books;
    spec.decode_thread = decode_thread;
    let out = pipeline::run(&spec).expect("the pipeline runs");
    out.report.check().expect("the accounting balances");
    let take = |s: &Seen| s.lock().expect("not poisoned").clone();
    Run { hr: take(&hr_seen), ll: take(&ll_seen), ll_trades: take(&trades_seen), report: out.report }
}

#[test]
fn both_streams_reach_consumers_with_their_gaps() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let feed = dir.path().join("feed.pcap");
    common::itch_capture(&feed, 8, 40_000, |_| {});
    let (frames, im) = common::impair(&feed, &dir.path().join("a.pcap"), &dir.path().join("b.pcap"), 12);
    let (want_hr, want_ll) = oracles(&frames, &im);
    let hr_gaps = want_hr.iter().filter(|i| matches!(i, Item::Gap(..))).count();
    let ll_gaps = want_ll.iter().filter(|i| matches!(i, Item::Gap(..))).count();
    assert!(hr_gaps >= 3 && ll_gaps > hr_gaps, "the impairment tests what it should ({hr_gaps}, {ll_gaps})");

    for decode_thread in [true, false] {
        let r = run(dir.path(), Stream::Hr, decode_thread);
        assert_eq!(items(&r.hr), want_hr, "HR, decode thread {decode_thread}");
        assert_eq!(items(&r.ll), want_ll, "LL, decode thread {decode_thread}");
        // The report's gaps and counts agree with what the consumers got.
        let ll_report = r.report.ll.as_ref().expect("the LL stream was decoded");
        assert_eq!(ll_report.gaps.len(), ll_gaps);
        assert!(ll_report.gaps.iter().all(|g| g.reason == GapReason::Skipped));
        assert_eq!(r.report.gaps.len(), hr_gaps);
        let c = |n: &str| r.report.consumers.iter().find(|c| c.name == n).expect("consumer").clone();
        assert_eq!((c("hr").gaps, c("ll").gaps, c("ll-trades").gaps), (hr_gaps as u64, ll_gaps as u64, ll_gaps as u64));
        assert_eq!(c("ll").stream, Stream::Ll);
        // A subscription filters market records, never gap records.
        let trades = items(&r.ll_trades);
        let want: Vec<Item> =
            r.ll.iter()
                .filter(|x| matches!(x.event.action, EventAction::Execute | EventAction::Trade | EventAction::Gap))
                .map(|x| items(std::slice::from_ref(x))[0].clone())
                .collect();
        assert_eq!(trades, want);
        // The books follow HR: LL events say so, and an LL execution has no price or side.
        assert!(r.hr.iter().all(|x| x.event.flags & flags::NO_BOOK == 0));
        let ll_market: Vec<&Record> = r.ll.iter().filter(|x| x.event.action != EventAction::Gap).collect();
        assert!(ll_market.iter().all(|x| x.event.flags & flags::NO_BOOK != 0));
        let executions = ll_market.iter().filter(|x| x.event.action == EventAction::Execute).count();
        assert!(executions > 100);
        assert!(ll_market
            .iter()
            .filter(|x| x.event.action == EventAction::Execute && x.event.msg_type == b'E')
            .all(|x| x.event.price == 0 && x.event.side == Side::None));
        assert!(r.hr.iter().filter(|x| x.event.action == EventAction::Execute && x.event.msg_type == b'E').any(|x| x
            .event
            .price
            != 0
            && x.event.side != Side::None));
        assert!(pipeline::summary(&r.report).contains("LL stream:"));
    }

    // The books follow LL: now the HR events carry NO_BOOK, the LL ones do not.
    let r = run(dir.path(), Stream::Ll, true);
    assert_eq!(items(&r.hr), want_hr);
    assert_eq!(items(&r.ll), want_ll);
    assert_eq!(r.report.books_follow, Stream::Ll);
    assert!(r.hr.iter().filter(|x| x.event.action != EventAction::Gap).all(|x| x.event.flags & flags::NO_BOOK != 0));
    assert!(r.ll.iter().all(|x| x.event.flags & flags::NO_BOOK == 0));
    assert!(r.report.book.applied > 0);
}

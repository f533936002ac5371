//! The end-of-run report, its accounting check and the summary people read.

use super::*;
use tickplant_core::error::Unbalanced;

pub(super) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The run over time, for the pictures of a day (`tickplant report`): per second of
/// receive time from the first HR packet, the HR stream's messages, the packets each input
/// won (the arbitrator released its copy), and the gaps given up and the messages they
/// lost (by when they were given up). At most a day of seconds: later times count in the
/// last one.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    pub interval_ns: u64,
    /// Receive time of the first second's start (ns since the UNIX epoch).
    pub start_ns: u64,
    pub messages: Vec<u64>,
    pub wins_a: Vec<u64>,
    pub wins_b: Vec<u64>,
    pub gaps: Vec<u64>,
    pub messages_lost: Vec<u64>,
}

const TIMELINE_SLOTS: usize = 86_400;

impl Timeline {
    /// The slot of a time; the vectors grow a second at a time as the run goes on (a push
    /// per new second, none per packet).
    #[inline]
    fn slot(&mut self, at: u64) -> usize {
        if self.interval_ns == 0 {
            self.interval_ns = 1_000_000_000;
            self.start_ns = at - at % self.interval_ns;
        }
        let i = (at.saturating_sub(self.start_ns) / self.interval_ns).min(TIMELINE_SLOTS as u64 - 1) as usize;
        if i >= self.messages.len() {
            let n = i + 1;
            self.messages.resize(n, 0);
            self.wins_a.resize(n, 0);
            self.wins_b.resize(n, 0);
            self.gaps.resize(n, 0);
            self.messages_lost.resize(n, 0);
        }
        i
    }
    /// A packet the HR stream released.
    #[inline]
    pub(super) fn packet(&mut self, arrival_ns: u64, input: u8, count: u32) {
        let i = self.slot(arrival_ns);
        self.messages[i] += u64::from(count);
        match input {
            0 => self.wins_a[i] += 1,
            _ => self.wins_b[i] += 1,
        }
    }
    /// A gap of the HR stream.
    pub(super) fn gap(&mut self, at_ns: u64, messages: u64) {
        let i = self.slot(at_ns);
        self.gaps[i] += 1;
        self.messages_lost[i] += messages;
    }
}

/// What one consumer did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsumerReport {
    pub name: String,
    /// The stream it reads (written when it is `ll`).
    #[serde(skip_serializing_if = "Stream::is_hr")]
    pub stream: Stream,
    /// Gap records of its stream pushed into its ring (they wait for room, whatever the
    /// policy: a gap is never dropped).
    #[serde(skip_serializing_if = "is_zero")]
    pub gaps: u64,
    /// Gap records it popped.
    #[serde(skip_serializing_if = "is_zero")]
    pub gaps_received: u64,
    /// Records that matched the subscription.
    pub matched: u64,
    /// Pushed into the ring.
    pub delivered: u64,
    /// Not pushed: the ring was full and the policy is `drop`.
    pub dropped: u64,
    /// Times the producer waited for room (`backpressure`).
    pub waits: u64,
    /// Popped by the consumer thread.
    pub received: u64,
    pub by_action: BTreeMap<String, u64>,
    /// Instruments with a BBO (action `bbo`).
    pub bbo_instruments: u64,
    pub ring_latency_ns: Latency,
    /// Live runs: from the kernel's receive stamp of the packet to the consumer popping the
    /// record, on the timed records (the wall clock; ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receive_to_consumer_ns: Option<Latency>,
    /// CPU time the consumer's thread used, seconds.
    pub cpu_s: f64,
    /// What a matching consumer found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matching: Option<MatchReport>,
    /// What a trading consumer sent and heard back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trading: Option<crate::fixnet::TriggerTradeReport>,
}

/// What a matching consumer did: every record it received was matched.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MatchReport {
    pub strategies: u64,
    /// Events matched (= records received).
    pub events: u64,
    /// Events that matched at least one strategy.
    pub events_with_matches: u64,
    /// (event, strategy) pairs.
    pub matches: u64,
    /// Building the event from the market state and matching it, per event.
    pub latency_ns: Latency,
}

/// What the feed handler of one stream did (the HR stream's are the report's own fields).
/// A snapshot loaded into the books: its messages, decoded or not, and the sequence
/// number the feed went on from.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SnapshotLoad {
    pub seq: u64,
    pub messages: u64,
    pub decoded: u64,
    pub undecodable: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamReport {
    pub packets_in: u64,
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub gaps: Vec<GapReport>,
}

/// The end-of-run report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// A late join: the snapshots asked for, and what was buffered meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_join: Option<crate::recovery::LateJoinReport>,
    /// The snapshot's messages loaded into the books (not counted in the stream's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotLoad>,
    /// Recovery of stale books from snapshots, when a snapshot server is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync: Option<super::resync::ResyncStats>,
    /// Changes made through the control socket, in order, with their times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub control: Vec<crate::control::ControlRecord>,
    pub inputs: Vec<String>,
    /// Live inputs: what each received, and what the kernel dropped on its socket.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<crate::live::LiveInputStats>,
    /// Captures that cut frames short (a snapshot length below the frames' length), by
    /// input: those frames count as other, and what they carried as gaps.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cut_short: BTreeMap<String, crate::pcap::CutShort>,
    /// `[source] timestamps = "metawatch"`: frames without a tap's trailer, by input (they
    /// kept the capture's time).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub trailer_missing: BTreeMap<String, u64>,
    /// Streams sent on to groups (`hr-out = "udp://..."`): datagrams, bytes, send errors.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sent: BTreeMap<String, crate::outputs::SentStats>,
    /// `itch50` or `opra-fast`.
    pub feed: String,
    pub frames: u64,
    pub arbitration: Option<ArbStats>,
    /// HR packets that reached the decoder.
    pub packets_in: u64,
    pub gaps: Vec<GapReport>,
    /// Messages in HR packets.
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub by_type: BTreeMap<String, u64>,
    pub book: BookStats,
    pub instruments: u64,
    pub stale_books: u64,
    pub live_orders: u64,
    /// The stream the books follow (written when it is `ll`).
    #[serde(skip_serializing_if = "Stream::is_hr")]
    pub books_follow: Stream,
    /// The low-latency stream, when some consumer reads it or the books follow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ll: Option<StreamReport>,
    /// What the OPRA FAST stage made of the messages it decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opra_fast: Option<OpraFastStats>,
    /// What the OPRA binary stage made of the messages it decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opra_binary: Option<OpraBinaryStats>,
    /// What the NYSE XDP stage counted beyond the books' outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nyse: Option<NyseStats>,
    /// ITCH: the trading day its times count from (`[source] date`, given or told from
    /// the capture; absent while none is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// ITCH: new MoldUDP64 sessions (trading days) taken on after the first; each emptied
    /// the books (written when not 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub new_sessions: u64,
    pub consumers: Vec<ConsumerReport>,
    pub wall_s: f64,
    pub messages_per_s: f64,
    /// CPU time of the producer thread (captures and arbitrator, and every stage up to the
    /// rings without a decode thread) over the run, seconds.
    pub producer_cpu_s: f64,
    /// CPU time of the decode thread (decode, books, delivery), seconds; 0 without one.
    pub decode_cpu_s: f64,
    /// The stages were timed on one frame or packet in this many (`latency_ns`' counts).
    pub latency_sample: u32,
    pub latency_ns: BTreeMap<String, Latency>,
    /// The HR stream over time (a second a slot).
    pub timeline: Timeline,
}

impl Report {
    /// The accounting: every message ends in exactly one counted outcome.
    pub fn check(&self) -> Result<(), Unbalanced> {
        self.balance().map_err(|sum| Unbalanced { sum })
    }

    fn balance(&self) -> Result<(), String> {
        if let Some(o) = &self.opra_fast {
            if self.decoded != o.messages {
                return Err(format!("decoded {} != OPRA FAST outcomes {}", self.decoded, o.messages));
            }
        } else if let Some(o) = &self.opra_binary {
            if self.decoded != o.messages {
                return Err(format!("decoded {} != OPRA binary outcomes {}", self.decoded, o.messages));
            }
        } else {
            let (stream, decoded) = match (&self.ll, self.books_follow) {
                (Some(ll), Stream::Ll) => ("LL", ll.decoded),
                _ => ("HR", self.decoded),
            };
            // A snapshot's messages went to the books too.
            let loaded = self.snapshot.map_or(0, |s| s.decoded);
            if decoded + loaded != self.book.total() {
                return Err(format!(
                    "{stream} decoded {decoded} + snapshot {loaded} != book outcomes {}",
                    self.book.total()
                ));
            }
        }
        // OPRA FAST blocks are counted message by message as they are read: the header's
        // count (if there is one) only drives arbitration.
        let messages = self.opra_fast.is_none();
        let arb = |o: fn(&ArbStats) -> &tickplant_core::OutputStats| self.arbitration.as_ref().map(o);
        let hr = (self.packets_in, self.messages_in, self.decoded, self.undecodable);
        check_stream("HR", arb(|a| &a.hr), hr, messages)?;
        if let Some(ll) = &self.ll {
            let counts = (ll.packets_in, ll.messages_in, ll.decoded, ll.undecodable);
            check_stream("LL", arb(|a| &a.ll), counts, messages)?;
        }
        for c in &self.consumers {
            if c.gaps != c.gaps_received {
                return Err(format!(
                    "consumer {}: {} gap records pushed, {} received",
                    c.name, c.gaps, c.gaps_received
                ));
            }
            if c.matched != c.delivered + c.dropped || c.received != c.delivered {
                return Err(format!(
                    "consumer {}: matched {} delivered {} dropped {} received {}",
                    c.name, c.matched, c.delivered, c.dropped, c.received
                ));
            }
            if let Some(t) = &c.trading {
                if t.entries != c.received {
                    return Err(format!(
                        "consumer {}: received {} records, handed {} to the triggers",
                        c.name, c.received, t.entries
                    ));
                }
            }
            if let Some(m) = &c.matching {
                if m.events != c.received {
                    return Err(format!(
                        "consumer {}: received {} records, matched {} events",
                        c.name, c.received, m.events
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One stream's balance: messages = decoded + undecodable, and the arbitrator's packets
/// (and messages, where `messages`) = the decoder's. `counts`: packets, messages, decoded,
/// undecodable.
pub(super) fn check_stream(
    name: &str,
    arb: Option<&tickplant_core::OutputStats>,
    counts: (u64, u64, u64, u64),
    messages: bool,
) -> Result<(), String> {
    let (packets_in, messages_in, decoded, undecodable) = counts;
    if messages_in != decoded + undecodable {
        return Err(format!("{name} messages {messages_in} != decoded {decoded} + undecodable {undecodable}"));
    }
    let Some(a) = arb else { return Ok(()) };
    if a.packets != packets_in {
        return Err(format!("the arbitrator gave {} {name} packets, the decoder saw {packets_in}", a.packets));
    }
    if messages && a.messages != messages_in {
        return Err(format!("the arbitrator gave {} {name} messages, the decoder saw {messages_in}", a.messages));
    }
    Ok(())
}

/// The report as people read it.
pub fn summary(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "tickplant run: {} frames from {}", r.frames, r.inputs.join(" + "));
    for (input, c) in &r.cut_short {
        if let Some(w) = c.warning(input) {
            let _ = writeln!(s, "  warning: {w}");
        }
    }
    for (input, n) in &r.trailer_missing {
        let _ =
            writeln!(s, "  warning: {input}: {n} frames had no MetaWatch trailer time: their time is the capture's");
    }
    if r.new_sessions > 0 {
        let _ = writeln!(
            s,
            "  {} new MoldUDP64 session(s) after the first: a new trading day each, the books emptied{}",
            r.new_sessions,
            r.date.as_ref().map_or(String::new(), |d| format!(" (the last day: {d})"))
        );
    }
    if r.feed == "itch50" && r.date.is_none() && r.decoded > 0 {
        let _ = writeln!(s, "  warning: {}", crate::events::no_day_warning(&r.inputs.join(" + ")));
    }
    for l in &r.live {
        let _ = writeln!(
            s,
            "  live {}: {} datagrams, {} dropped in the kernel, {} truncated",
            l.input, l.datagrams, l.kernel_drops, l.truncated
        );
        if let Some(w) = l.warning() {
            let _ = writeln!(s, "  warning: {w}");
        }
    }
    if let (Some(j), Some(l)) = (&r.late_join, &r.snapshot) {
        let _ = writeln!(
            s,
            "  late join: snapshot of {} messages ({} decoded) from sequence {} after {} attempt(s); live feed first seen at {}, {} frames buffered in {:.3} s",
            l.messages,
            l.decoded,
            l.seq,
            j.attempts,
            j.live_first.map_or("-".to_string(), |f| f.to_string()),
            j.buffered_frames,
            j.wait_s
        );
        for f in &j.failures {
            let _ = writeln!(s, "    retried after: {f}");
        }
    }
    if let Some(a) = &r.arbitration {
        for (i, st) in a.inputs.iter().enumerate() {
            let _ = writeln!(
                s,
                "  input {}: {} packets, {} wins, {} duplicates, {} late, {} out of order, {} other",
                ["A", "B"].get(i).filter(|_| a.rerequest.is_none() || i + 1 < a.inputs.len()).unwrap_or(&"rerequest"),
                st.packets,
                st.wins,
                st.duplicates,
                st.late,
                st.out_of_order,
                st.other
            );
            if st.packets > 0 && st.other == st.packets {
                // Nothing of the feed on an input that carried frames: most likely another
                // feed's capture or group, or an `accept` that names none of its lines.
                let why: Vec<String> =
                    a.other_by_reason.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {n}")).collect();
                let _ = writeln!(
                    s,
                    "  WARNING: none of input {}'s {} frames was a packet of {} ({}): is the decoder the \
                     feed's, and does `accept` name its lines?",
                    ["A", "B"].get(i).unwrap_or(&"rerequest"),
                    st.packets,
                    r.feed,
                    why.join(", ")
                );
            }
        }
        let _ = writeln!(
            s,
            "  arbitrated (HR): {} packets, {} messages, {} gaps ({} messages lost)",
            a.hr.packets, a.hr.messages, a.hr.gaps, a.hr.messages_lost
        );
        if let Some(q) = &a.rerequest {
            let _ = writeln!(
                s,
                "  re-request: {} holes asked for, {} requests ({} retries, {} unanswered), {} messages asked, {} recovered",
                q.holes, q.requests, q.retries, q.unanswered, q.messages_requested, q.messages_recovered
            );
        }
    }
    for g in r.gaps.iter().take(5) {
        let _ =
            writeln!(s, "    gap {}..={} ({} messages, {})", g.first_seq, g.last_seq, g.messages, g.reason.as_str());
    }
    if r.gaps.len() > 5 {
        let _ = writeln!(s, "    ... {} more gaps", r.gaps.len() - 5);
    }
    let _ = writeln!(
        s,
        "  decoded: {} messages ({} undecodable) of {} in HR packets",
        r.decoded, r.undecodable, r.messages_in
    );
    if let Some(ll) = &r.ll {
        let _ = writeln!(
            s,
            "  LL stream: {} packets, {} messages decoded ({} undecodable) of {}, {} gaps{}",
            ll.packets_in,
            ll.decoded,
            ll.undecodable,
            ll.messages_in,
            ll.gaps.len(),
            if r.books_follow == Stream::Ll { "; the books follow it" } else { "" }
        );
    }
    if let Some(o) = &r.opra_fast {
        let _ = writeln!(
            s,
            "  opra-fast: {} quotes, {} trades, {} status, {} other, {} rejected {:?}; {} series; by category {:?}; {} specialised segments",
            o.quotes, o.trades, o.status, o.other, o.rejected, o.rejected_by_reason, o.series, o.by_category, o.specialised_segments
        );
    }
    if let Some(o) = &r.opra_binary {
        let _ = writeln!(
            s,
            "  opra-binary: {} quotes, {} trades, {} status, {} other, {} rejected {:?}; {} series; by category {:?}; {} bad blocks",
            o.quotes, o.trades, o.status, o.other, o.rejected, o.rejected_by_reason, o.series, o.by_category, o.bad_blocks
        );
    }
    if let Some(n) = &r.nyse {
        let _ = writeln!(
            s,
            "  nyse-xdp: {} unmapped (undecodable), {} symbol clears, {} resets with live orders; packets by delivery flag {:?}",
            n.unmapped, n.symbol_clears, n.resets_with_live_orders, n.by_delivery_flag
        );
    }
    if r.opra_fast.is_none() && r.opra_binary.is_none() {
        let b = &r.book;
        let _ = writeln!(
            s,
            "  books: {} applied, {} not book events, {} unknown order, {} duplicate, {} table full; {} instruments, {} live orders, {} stale books",
            b.applied, b.ignored, b.unknown_order, b.duplicate_order, b.table_full, r.instruments, r.live_orders, r.stale_books
        );
    }
    for c in &r.consumers {
        // A consumer none of whose records came in a timed packet has no ring latency.
        let l = &c.ring_latency_ns;
        let ring =
            if l.count == 0 { "ring not timed".to_string() } else { format!("ring p50 {} ns p99 {} ns", l.p50, l.p99) };
        let _ = writeln!(
            s,
            "  consumer {:<10} matched {:>9}  delivered {:>9}  dropped {:>6}  received {:>9}  {ring}{}{}",
            c.name,
            c.matched,
            c.delivered,
            c.dropped,
            c.received,
            if c.stream == Stream::Ll { "  (LL stream)" } else { "" },
            if c.gaps > 0 { format!("  {} gap records", c.gaps) } else { String::new() }
        );
        if let Some(m) = &c.matching {
            let _ = writeln!(
                s,
                "    strategies: {} strategies, {} events matched, {} with matches, {} matches",
                m.strategies, m.events, m.events_with_matches, m.matches
            );
        }
        if let Some(t) = &c.trading {
            let _ = writeln!(
                s,
                "    trading: {} records to the triggers; {} BUYs and {} SELLs sent, {} acks, {} BUY fills, {} SELL fills; risk rejects {:?}",
                t.entries, t.buys_sent, t.sells_sent, t.acks, t.buy_fills, t.sell_fills, t.risk_rejects
            );
        }
    }
    let _ = writeln!(
        s,
        "  accounting: {}",
        match r.check() {
            Ok(()) if r.opra_fast.is_some() || r.opra_binary.is_some() => "balanced (HR block messages = decoded + undecodable; decoded = quotes + trades + status + other + rejected; per consumer matched = delivered + dropped = received + dropped)".to_string(),
            Ok(()) => "balanced (HR messages = decoded + undecodable = book outcomes; per consumer matched = delivered + dropped = received + dropped)".to_string(),
            Err(e) => format!("NOT BALANCED: {e}"),
        }
    );
    // A live run at a feed's own pace is thousands a second, where "0.00 M" would say
    // nothing.
    let rate = if r.messages_per_s >= 100_000.0 {
        format!("{:.2} M", r.messages_per_s / 1e6)
    } else {
        format!("{:.0}", r.messages_per_s)
    };
    let _ = writeln!(s, "  throughput: {rate} messages/s ({:.3} s wall)", r.wall_s);
    // Each thread's CPU time beside the wall: a thread near the wall is the one that limits
    // the run.
    let mut cpu = format!("producer {:.3}", r.producer_cpu_s);
    if r.decode_cpu_s > 0.0 {
        let _ = write!(cpu, ", decode {:.3}", r.decode_cpu_s);
    }
    for c in &r.consumers {
        let _ = write!(cpu, ", consumer {} {:.3}", c.name, c.cpu_s);
    }
    let _ = writeln!(s, "  cpu (s): {cpu}");
    let _ = writeln!(s, "  latency (ns)                    count        p50      p90      p99    p99.9        max");
    if r.latency_sample > 1 {
        let _ = writeln!(
            s,
            "    (stages 1-4 timed on 1 frame or packet in {}, `[run] latency-sample`; rings on the records of the timed packets)",
            r.latency_sample
        );
    }
    let row = |s: &mut String, name: &str, l: &Latency| {
        let _ = writeln!(
            s,
            "    {:<28} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}",
            name, l.count, l.p50, l.p90, l.p99, l.p999, l.max
        );
    };
    for (name, l) in &r.latency_ns {
        row(&mut s, name, l);
    }
    for c in &r.consumers {
        row(&mut s, &format!("4 ring -> {}", c.name), &c.ring_latency_ns);
        if let Some(l) = &c.receive_to_consumer_ns {
            row(&mut s, &format!("  receive -> {}", c.name), l);
        }
    }
    for c in &r.consumers {
        if let Some(m) = &c.matching {
            row(&mut s, &format!("5 match -> {}", c.name), &m.latency_ns);
        }
    }
    s
}

//! A/B line arbitration: merge redundant feeds into one stream, twice over.
//!
//! The [`Arbitrator`] takes frames from two or more inputs (A, B, ...) that carry the same
//! sequenced packets, and produces two outputs at the same time:
//!
//! * **low latency** (LL): a packet is forwarded the moment it arrives if its sequence number
//!   is at or past the next expected one. It never waits: a hole is skipped at once and
//!   reported (reason `skipped`), and copies that arrive later are counted, not forwarded.
//! * **high reliability** (HR): packets that arrive early are buffered and released in order
//!   once the missing packets arrive, or the wait is given up under the window [`Policy`]:
//!   a time (`timeout`), a count of waiting messages (`count`), both, or none at all
//!   (`LowLatency`, reason `skipped`). An idle cap (`idle`) releases whatever waits when no
//!   data has arrived for a while, so count mode never strands packets in a quiet period.
//!
//! What it promises:
//!
//! * Each output is strictly increasing in sequence number and never repeats a message: a
//!   packet that overlaps what was already delivered is trimmed to its new messages where the
//!   protocol's message boundaries are known ([`Sequencer::trim`]). Where they are not (OPRA,
//!   custom layouts) the packet is forwarded whole and the repeated messages are counted in
//!   `redelivered`: never silently.
//! * Every gap is reported once per output with its first and last sequence number.
//! * Every packet ends in exactly one counted outcome per input and per output, and the
//!   accounting balances ([`Arbitrator::check_accounting`]).
//! * Bounded memory: the HR buffer holds at most `capacity_packets` packets and
//!   `capacity_bytes` bytes, preallocated; when full, the oldest wait is given up (`overflow`).
//! * Sans-IO: time is the `now` the caller passes in. The caller asks [`Arbitrator::poll_timeout`]
//!   for the next deadline and calls [`Arbitrator::handle_timeout`] at it.
//!
//! The calling sequence, per frame:
//!
//! ```text
//! while arb.poll_timeout() <= Some(now) { arb.handle_timeout(deadline); drain }
//! let info = match arb.sequencer().classify(link, frame) { Err(other) -> other output, Ok(i) -> i };
//! let d = arb.handle_packet(now, input, &info, frame);
//! if let Decision::Data { ll: Action::Forward { skip }, .. } -> emit arb.frame_for(frame, &info, skip) to LL
//! if let Decision::Data { hr: Action::Forward { skip }, .. } -> emit it to HR  (before draining!)
//! drain: while let Some(r) = arb.poll_hr() { emit r.frame to HR }; poll_gap(); poll_event()
//! ```
//!
//! It does not promise anything about packets from two different sequence spaces beyond
//! the reset handling described on [`ResetKind`].
//!
//! Stray traffic ([`Arbitrator::process`], the driven API):
//!
//! * A datagram that is not a well-formed packet of the protocol goes to *other* (the
//!   sequencer's checks: MoldUDP64 blocks that tile the payload exactly, an XDP `PktSize`
//!   and `NumberMsgs` that describe the datagram, an OPRA block that fits it).
//! * One packet never starts a new MoldUDP64 session. A data packet of a session that is
//!   neither the current one nor the one before it is *held* (one packet, copied) until the
//!   feed confirms the session: a further packet of that session on any input (the copy on
//!   the other line counts), or an end-of-session packet of the current session. Then the
//!   held packet goes first, the new session starts with it, and nothing is lost. A packet
//!   of the current session that brings new messages says the held one was stray: it goes
//!   to *other* with reason `stray`, as it does when another unconfirmed session replaces
//!   it or the input ends ([`Arbitrator::finish`]). The very first packet of a run starts
//!   the first session as before; an `accept` list (or the destination check below) keeps
//!   other traffic from being that packet.
//! * With no `accept` list, each input's feed is the destination (group and port) of its
//!   first well-formed packet. A well-formed packet to another destination goes to *other*
//!   (`filtered`) and the conflict is kept ([`Arbitrator::destination_conflict`]): a capture
//!   that holds two feeds is a configuration error the caller reports, naming both.
//!
//! [`Arbitrator::handle_frame`] and [`Arbitrator::handle_packet`] take every packet as it
//! comes (no holding): the caller that uses them decides.
//!
//! # Modules
//! This file holds the [`Arbitrator`] and its per-packet logic; `types` what it is told and
//! tells (config, policy, decisions, reports, statistics), `state` its buffers and
//! per-output state, `sink` the driven interface ([`Arbitrator::process`], [`ArbSink`]).

mod recovery;
mod sink;
mod state;
mod types;

use recovery::Recovery;

pub use sink::ArbSink;
use state::*;
pub use types::*;

use std::collections::VecDeque;

use crate::error::{InvalidConfig, Unbalanced};
use crate::seq::{Endpoint, LinkType, Other, OtherReason, PacketInfo, PacketKind, Protocol, Sequencer};

/// One input's counters and the highest sequence number it has carried (its next packet
/// below that is out of order), together: a packet updates them all.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
struct Line {
    high: u64,
    packets: u64,
    messages: u64,
    /// Wins, duplicates and late packets, by [`outcome`]: one indexed add a packet, not a
    /// branch on the outcome (`tickplant bench arb`).
    outcomes: [u64; 3],
    out_of_order: u64,
    control: u64,
    other: u64,
}

impl Line {
    fn stats(&self) -> InputStats {
        InputStats {
            packets: self.packets,
            messages: self.messages,
            wins: self.outcomes[0],
            duplicates: self.outcomes[1],
            late: self.outcomes[2],
            out_of_order: self.out_of_order,
            control: self.control,
            other: self.other,
        }
    }
}

/// Where an input counts a data packet with this outcome on the reference output: 0 a win,
/// 1 a duplicate, 2 late.
#[inline(always)]
fn outcome(a: Action) -> usize {
    match a {
        Action::Forward { .. } | Action::Buffered | Action::Off => 0,
        Action::Duplicate => 1,
        Action::Late => 2,
    }
}

/// The A/B line arbitrator. See the module documentation.
#[derive(Debug)]
pub struct Arbitrator {
    config: ArbConfig,
    seq: Sequencer,
    can_trim: bool,
    links: Vec<LinkType>,
    started: bool,
    /// Not started, or a previous space's late copies still told apart by range: every
    /// packet takes the new-space test (one flag for the hot path's check).
    unsettled: bool,
    /// `config.reset_jump`, or `u64::MAX` when it is 0 (off), so that the hot path's test
    /// needs no test of its own for "off".
    jump: u64,
    /// Highest `end` seen in the current space (from any input).
    high: u64,
    session: [u8; 10],
    prev_session: Option<[u8; 10]>,
    /// The previous space's range, for late copies after a backward jump.
    prev_space: Option<(u64, u64)>,
    /// Fingerprint of the XDP reset packet that started the current space.
    reset_sig: Option<u64>,
    /// An end-of-session packet of the current session was seen: the next session is
    /// taken on at its first packet.
    session_ended: bool,
    /// A packet of an unconfirmed session, and the room for the next one.
    held: Option<Held>,
    held_spare: Vec<u8>,
    /// Each input's destination (no `accept` list), and the first conflict found.
    /// Each input's destination as one number (address and port, the compare a frame) and
    /// as an endpoint (for a conflict's message).
    dests: Vec<Option<(u64, Endpoint)>>,
    /// No `accept` list, or a line's own destination given: the destination check runs
    /// (kept here for the per-frame test).
    check_dests: bool,
    /// No `accept` list: an input's destination is learnt from its first packet.
    learn_dests: bool,
    /// Inputs whose destination was given (`ArbConfig::input_accept`): another one is
    /// filtered, not a conflict.
    pinned: Vec<bool>,
    conflict: Option<DestinationConflict>,
    ll: OutputState,
    hr: OutputState,
    buf: HrBuffer,
    last_data: u64,
    deadline: u64,
    now: u64,
    /// Each input's counters and highest sequence number seen.
    lines: Vec<Line>,
    other_by_reason: [u64; OtherReason::ALL.len()],
    resets: u64,
    gaps: VecDeque<GapReport>,
    events: VecDeque<ArbEvent>,
    scratch: Vec<u8>,
    /// Re-request (see `recovery`): its state, whether holes or requests are open, its
    /// next deadline, and the answers' input (`usize::MAX` when off).
    rr: Option<Box<Recovery>>,
    rr_active: bool,
    rr_deadline: u64,
    rr_input: usize,
}

impl Arbitrator {
    pub fn new(config: ArbConfig, seq: Sequencer) -> Result<Arbitrator, InvalidConfig> {
        config.validate()?;
        if config.rerequest.is_some() && seq.config().protocol != Protocol::Moldudp64 {
            return Err(InvalidConfig::new(
                "rerequest",
                format!("re-request is MoldUDP64's (NASDAQ); this feed's protocol is {:?}", seq.config().protocol),
            ));
        }
        let lines = config.inputs;
        let rr = config.rerequest.map(|c| Box::new(Recovery::new(c, lines)));
        let n = lines + usize::from(rr.is_some());
        let learn_dests = seq.config().accept.is_empty();
        // A line's given destination is its first packet's, as if learnt: the per-frame
        // test is the same compare.
        let mut dests = vec![None; n];
        let mut pinned = vec![false; n];
        for (i, e) in config.input_accept.iter().enumerate() {
            if let Some(Endpoint { group: Some(g), port: Some(p) }) = *e {
                dests[i] = Some((
                    u64::from(u32::from_be_bytes(g)) << 16 | u64::from(p),
                    Endpoint { group: Some(g), port: Some(p) },
                ));
                pinned[i] = true;
            }
        }
        let check_dests = learn_dests || pinned.contains(&true);
        Ok(Arbitrator {
            can_trim: seq.can_trim(),
            seq,
            links: vec![LinkType::Ethernet; n],
            started: false,
            unsettled: true,
            jump: if config.reset_jump > 0 { config.reset_jump } else { u64::MAX },
            high: 0,
            session: [0; 10],
            prev_session: None,
            prev_space: None,
            reset_sig: None,
            session_ended: false,
            held: None,
            held_spare: Vec::new(),
            dests,
            check_dests,
            learn_dests,
            pinned,
            conflict: None,
            ll: OutputState::new(OutputId::Ll, config.low_latency, config.gap_memory),
            hr: OutputState::new(OutputId::Hr, config.high_reliability, config.gap_memory),
            buf: HrBuffer::new(if config.high_reliability { config.capacity_packets } else { 0 }),
            last_data: 0,
            deadline: u64::MAX,
            now: 0,
            lines: vec![Line::default(); n],
            other_by_reason: [0; OtherReason::ALL.len()],
            resets: 0,
            gaps: VecDeque::with_capacity(256),
            events: VecDeque::with_capacity(16),
            scratch: Vec::with_capacity(SLOT_BYTES),
            rr_input: if rr.is_some() { lines } else { usize::MAX },
            rr,
            rr_active: false,
            rr_deadline: u64::MAX,
            config,
        })
    }

    pub fn config(&self) -> &ArbConfig {
        &self.config
    }
    pub fn sequencer(&self) -> &Sequencer {
        &self.seq
    }
    pub fn policy(&self) -> Policy {
        self.config.policy
    }

    /// Set the link layer of an input's frames (default Ethernet).
    pub fn set_link(&mut self, input: usize, link: LinkType) {
        self.links[input] = link;
    }

    /// Handle one captured frame from `input` at time `now`.
    #[inline]
    pub fn handle_frame(&mut self, now: u64, input: usize, frame: &[u8]) -> Verdict {
        match self.seq.classify(self.links[input], frame) {
            Ok(info) if !self.destination_ok(input, frame, &info) => {
                let other = Other { reason: OtherReason::Filtered, error: None };
                self.count_other(input, &other);
                Verdict::Other(other)
            }
            Ok(info) => match self.handle_packet(now, input, &info, frame) {
                Decision::Control => Verdict::Control(info),
                Decision::Data { ll, hr } => Verdict::Data { info, ll, hr },
            },
            Err(other) => {
                self.count_other(input, &other);
                Verdict::Other(other)
            }
        }
    }

    /// Whether a well-formed packet goes to its input's feed: with an `accept` list always
    /// (the sequencer filtered it); without one, when it goes where the input's first packet
    /// went. A packet to another destination records the conflict.
    #[inline(always)]
    fn destination_ok(&mut self, input: usize, frame: &[u8], info: &PacketInfo) -> bool {
        if !self.check_dests {
            return true;
        }
        // The destination address and port as one number: a compare a frame.
        let ip = usize::from(info.ip_offset);
        let port_at = usize::from(info.payload_offset) - 6;
        let key = match (frame.get(ip + 16..ip + 20), frame.get(port_at..port_at + 2)) {
            (Some(a), Some(p)) => {
                u64::from(u32::from_be_bytes([a[0], a[1], a[2], a[3]])) << 16
                    | u64::from(u16::from_be_bytes([p[0], p[1]]))
            }
            _ => u64::MAX,
        };
        match self.dests[input] {
            Some((first, _)) if first == key => true,
            None => {
                if self.learn_dests {
                    self.dests[input] = Some((key, Endpoint::of_frame(frame, info)));
                }
                true
            }
            Some((_, first)) => self.conflict_at(input, first, frame, info),
        }
    }

    /// Record a packet to another destination than its input's first (see
    /// [`Arbitrator::destination_conflict`]).
    #[cold]
    #[inline(never)]
    fn conflict_at(&mut self, input: usize, first: Endpoint, frame: &[u8], info: &PacketInfo) -> bool {
        // A line whose destination was given: the other line's packet (filtered).
        if self.pinned[input] {
            return false;
        }
        if self.conflict.is_none() {
            let second = Endpoint::of_frame(frame, info);
            self.conflict = Some(DestinationConflict { input: input as u8, first, second });
        }
        false
    }

    /// The first input found carrying well-formed packets to two destinations with no
    /// `accept` list: the caller should stop and ask which is the feed.
    pub fn destination_conflict(&self) -> Option<DestinationConflict> {
        self.conflict
    }

    fn count_other(&mut self, input: usize, other: &Other) {
        self.lines[input].packets += 1;
        self.lines[input].other += 1;
        self.other_by_reason[other.reason.index()] += 1;
    }

    /// Handle a market-data packet the caller already classified with this arbitrator's
    /// sequencer (`frame` must be the frame `info` came from).
    // Inlined into the caller's loop: as a call, this function's fixed cost (saving
    // registers, a large frame) was a fifth of the low-latency decision (measured with
    // `tickplant bench arb`).
    #[inline(always)]
    pub fn handle_packet(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8]) -> Decision {
        self.now = now;
        if now >= self.deadline {
            self.expire(now);
        }
        if info.kind != PacketKind::Data {
            return self.control_packet(now, input, info);
        }
        let (s, e) = (info.seq, info.end());
        // Only a packet that passes this test can start or belong to another sequence space;
        // the test is cheap, the handling is not on the common path.
        // `|`, not `||`: one branch for the four tests (a backward jump with the jump test
        // off can only be a false alarm here; `check_space` decides exactly).
        if self.unsettled
            | (info.session != self.session)
            | info.reset
            | (info.seq.saturating_add(self.jump) <= self.high)
        {
            if let Some(v) = self.new_space_or_stale(now, input, info, frame) {
                self.count_data(input, s, e, info.count, Action::Late);
                return v;
            }
        }
        self.last_data = now;
        self.high = self.high.max(e);

        let ll = if self.ll.stats.enabled { self.ll_handle(s, e, now) } else { Action::Off };
        let hr = if self.hr.stats.enabled { self.hr_handle(now, input, info, frame) } else { Action::Off };
        self.count_data(input, s, e, info.count, if self.hr.stats.enabled { hr } else { ll });
        if self.rr_active {
            self.rr_check(now);
        }
        Decision::Data { ll, hr }
    }

    /// Count a data packet `[s, e)` of `input` and its outcome on the reference output
    /// (HR when on, else LL), in one place: the input's counters and its highest sequence
    /// number share a cache line, found with one bounds check (`tickplant bench arb`).
    #[inline(always)]
    fn count_data(&mut self, input: usize, s: u64, e: u64, count: u32, reference: Action) {
        let l = &mut self.lines[input];
        l.packets += 1;
        l.messages += u64::from(count);
        l.out_of_order += u64::from(s < l.high);
        l.high = l.high.max(e);
        l.outcomes[outcome(reference)] += 1;
    }

    #[cold]
    fn control_packet(&mut self, now: u64, input: usize, info: &PacketInfo) -> Decision {
        let l = &mut self.lines[input];
        l.packets += 1;
        l.control += 1;
        if info.kind == PacketKind::EndOfSession {
            self.events.push_back(ArbEvent::EndOfSession { at_ns: now, input: input as u8, seq: info.seq });
            if info.session == self.session {
                self.session_ended = true;
            }
        }
        Decision::Control
    }

    /// The first packet, or one that may start or belong to another sequence space: returns
    /// the verdict for a stale packet of the space just left, `None` to go on as usual.
    #[cold]
    #[inline(never)]
    fn new_space_or_stale(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8]) -> Option<Decision> {
        if !self.started {
            self.start(info, frame);
            return None;
        }
        let stale = self.check_space(now, input, info, frame)?;
        let ll = if self.ll.stats.enabled { stale } else { Action::Off };
        let hr = if self.hr.stats.enabled { stale } else { Action::Off };
        Some(Decision::Data { ll, hr })
    }

    fn start(&mut self, info: &PacketInfo, frame: &[u8]) {
        self.started = true;
        self.unsettled = self.prev_space.is_some();
        let first = self.config.start_seq.unwrap_or(info.seq);
        self.ll.new_space(first);
        self.hr.new_space(first);
        self.session = info.session;
        self.session_ended = false;
        self.reset_sig = info.reset.then(|| fingerprint(frame, info));
    }

    /// Detect a new sequence space; returns `Some(action)` for a stale packet of the old one.
    fn check_space(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8]) -> Option<Action> {
        let proto = self.seq.config().protocol;
        let kind = if proto == Protocol::Moldudp64 && info.session != self.session {
            if Some(info.session) == self.prev_session {
                return Some(Action::Late);
            }
            Some(ResetKind::Session)
        } else if info.reset && self.reset_sig != Some(fingerprint(frame, info)) {
            Some(ResetKind::ResetMessage)
        } else if self.config.reset_jump > 0 && info.seq.saturating_add(self.config.reset_jump) <= self.high {
            Some(ResetKind::BackwardJump)
        } else {
            if let Some((lo, hi)) = self.prev_space {
                if self.high >= lo {
                    // The new space has caught up: the ranges no longer tell them apart.
                    self.prev_space = None;
                    self.unsettled = false;
                } else if info.seq >= lo && info.seq < hi {
                    return Some(Action::Late);
                }
            }
            None
        };
        let kind = kind?;
        let old_next = self.high;
        // Give up whatever waits in the old space, then start the new one at this packet.
        if self.hr.stats.enabled {
            self.give_up_all(GapReason::Reset, now);
        }
        self.rr_reset();
        // A new session tells its packets apart by the session id; other resets by range.
        self.prev_space =
            (kind != ResetKind::Session).then_some((self.ll.space_start.min(self.hr.space_start), self.high));
        self.unsettled = self.prev_space.is_some();
        self.ll.new_space(info.seq);
        self.hr.new_space(info.seq);
        self.high = info.seq;
        if kind == ResetKind::Session {
            self.prev_session = Some(self.session);
            self.session = info.session;
            self.session_ended = false;
        }
        self.reset_sig = info.reset.then(|| fingerprint(frame, info));
        self.resets += 1;
        self.events.push_back(ArbEvent::SequenceReset {
            at_ns: now,
            input: input as u8,
            kind,
            old_next,
            new_seq: info.seq,
        });
        None
    }

    #[inline(always)]
    fn ll_handle(&mut self, s: u64, e: u64, now: u64) -> Action {
        let o = &mut self.ll;
        o.stats.data_in += 1;
        if e <= o.next {
            return o.old(s, e);
        }
        if s > o.next {
            o.gap(s, GapReason::Skipped, now, &mut self.gaps);
        }
        Action::Forward { skip: o.deliver(s, e, self.can_trim) }
    }

    /// The high-reliability decision. The two common cases, a copy already delivered and
    /// the next packet in order with nothing queued, are decided in line (each frame of a
    /// replay takes one of them, nearly always); the rest in [`Arbitrator::hr_handle_rest`].
    #[inline(always)]
    fn hr_handle(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8]) -> Action {
        let (s, e) = (info.seq, info.end());
        self.hr.stats.data_in += 1;
        if e <= self.hr.next {
            return self.hr.old(s, e);
        }
        if s <= self.hr.next && self.buf.ready.is_empty() {
            // In order (or overlapping what was delivered).
            let skip = self.hr.deliver(s, e, self.can_trim);
            self.rr_delivered(input, e - s - u64::from(skip));
            if !self.buf.waiting.is_empty() {
                self.advance();
            }
            return Action::Forward { skip };
        }
        self.hr_handle_rest(now, input, info, frame)
    }

    #[inline(never)]
    fn hr_handle_rest(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8]) -> Action {
        let (s, e) = (info.seq, info.end());
        if s <= self.hr.next {
            // In order, but released packets are waiting to be drained: queue behind them to
            // keep order.
            let entry = self.new_entry(input, info, frame, now);
            self.buf.ready.push_back(entry);
            self.make_ready_last();
            self.advance();
            return Action::Buffered;
        }
        // Early: a hole before it.
        if self.is_buffered(s, e) {
            self.hr.stats.duplicates += 1;
            return Action::Duplicate;
        }
        let c = u64::from(info.count);
        let can_wait = match self.config.policy.max_msgs() {
            Some(m) => self.buf.waiting_msgs + c <= m,
            None => true,
        } && self.config.policy.timeout() != Some(0);
        if !can_wait && self.buf.waiting.is_empty() && self.buf.ready.is_empty() {
            // Nothing may wait: give the hole up and forward without copying.
            let reason = if self.config.policy == Policy::LowLatency { GapReason::Skipped } else { GapReason::Count };
            self.hr.gap(s, reason, now, &mut self.gaps);
            let skip = self.hr.deliver(s, e, self.can_trim);
            self.rr_delivered(input, e - s - u64::from(skip));
            return Action::Forward { skip };
        }
        self.make_room(frame.len(), now);
        if e <= self.hr.next {
            // Making room released packets that cover this one.
            self.hr.stats.duplicates += 1;
            return Action::Duplicate;
        }
        if !self.buf.waiting.is_empty() || self.hr.next < s {
            let entry = self.new_entry(input, info, frame, now);
            self.insert_waiting(entry);
            self.enforce_count(now);
        } else {
            // make_room released everything before it; it is now in order.
            let entry = self.new_entry(input, info, frame, now);
            self.buf.ready.push_back(entry);
            self.make_ready_last();
            self.advance();
        }
        self.update_stats_and_deadline();
        if now >= self.deadline {
            self.expire(now);
        }
        Action::Buffered
    }

    fn new_entry(&mut self, input: usize, info: &PacketInfo, frame: &[u8], now: u64) -> Entry {
        let slot = self.buf.store(frame);
        Entry {
            seq: info.seq,
            count: info.count,
            skip: 0,
            slot,
            len: frame.len() as u32,
            input: input as u8,
            arrival: now,
            info: *info,
        }
    }

    /// Count the entry just pushed to `ready` as delivered (it is in order).
    fn make_ready_last(&mut self) {
        let n = self.buf.ready.len() - 1;
        let e = self.buf.ready[n];
        let skip = self.hr.deliver(e.seq, e.end(), self.can_trim);
        self.buf.ready[n].skip = skip;
        self.update_stats_and_deadline();
    }

    /// Is `[s, e)` already covered by a waiting packet?
    fn is_buffered(&self, s: u64, e: u64) -> bool {
        let w = &self.buf.waiting;
        let i = w.partition_point(|x| x.seq <= s);
        // The last waiting packet starting at or before s covers it if it reaches e.
        i > 0 && w[i - 1].end() >= e
    }

    fn insert_waiting(&mut self, entry: Entry) {
        let w = &mut self.buf.waiting;
        let i = if w.back().is_none_or(|b| b.seq < entry.seq) {
            w.push_back(entry);
            w.len() - 1
        } else {
            let i = w.partition_point(|x| x.seq <= entry.seq);
            w.insert(i, entry);
            i
        };
        if self.rr.is_some() {
            // The messages missing right before it, if any, are a hole to ask for.
            let before = if i == 0 { self.hr.next } else { w[i - 1].end() };
            if before < entry.seq {
                self.rr_note_hole(before, entry.seq, entry.arrival);
            }
        }
        self.buf.waiting_msgs += u64::from(entry.count);
        self.buf.min_arrival = self.buf.min_arrival.min(entry.arrival);
    }

    /// Move waiting packets that are now in order to `ready`.
    fn advance(&mut self) {
        let mut recompute = false;
        while let Some(head) = self.buf.waiting.front().copied() {
            if head.seq > self.hr.next {
                break;
            }
            self.buf.waiting.pop_front();
            self.buf.waiting_msgs -= u64::from(head.count);
            recompute |= head.arrival == self.buf.min_arrival;
            if head.end() <= self.hr.next {
                // Covered by what was delivered meanwhile: a duplicate after all.
                self.hr.stats.duplicates += 1;
                self.free_slot(head);
                continue;
            }
            let skip = self.hr.deliver(head.seq, head.end(), self.can_trim);
            self.buf.ready.push_back(Entry { skip, ..head });
        }
        if recompute {
            self.buf.recompute_min_arrival();
        }
        self.update_stats_and_deadline();
    }

    fn free_slot(&mut self, e: Entry) {
        self.buf.bytes -= e.len as usize;
        self.buf.free.push(e.slot);
    }

    /// Give up the hole before the first waiting packet and release what follows it.
    fn give_up_head(&mut self, reason: GapReason, now: u64) -> bool {
        let Some(head) = self.buf.waiting.front() else { return false };
        let s = head.seq;
        if s > self.hr.next {
            let reason = match reason {
                GapReason::Timeout | GapReason::Count | GapReason::Idle if self.rr_asked_in(self.hr.next, s) => {
                    GapReason::RerequestTimeout
                }
                r => r,
            };
            self.hr.gap(s, reason, now, &mut self.gaps);
        }
        self.advance();
        true
    }

    fn give_up_all(&mut self, reason: GapReason, now: u64) {
        while self.give_up_head(reason, now) {}
    }

    fn make_room(&mut self, len: usize, now: u64) {
        let cap_p = self.config.capacity_packets;
        let cap_b = self.config.capacity_bytes;
        while self.buf.waiting.len() + 1 > cap_p || self.buf.bytes + len > cap_b {
            if !self.give_up_head(GapReason::Overflow, now) {
                break;
            }
        }
    }

    fn enforce_count(&mut self, now: u64) {
        if let Some(m) = self.config.policy.max_msgs() {
            let reason = if self.config.policy == Policy::LowLatency { GapReason::Skipped } else { GapReason::Count };
            while self.buf.waiting_msgs > m {
                if !self.give_up_head(reason, now) {
                    break;
                }
            }
        }
    }

    fn update_stats_and_deadline(&mut self) {
        let pending = (self.buf.waiting.len() + self.buf.ready.len()) as u64;
        self.hr.stats.pending = pending;
        self.hr.stats.max_pending = self.hr.stats.max_pending.max(pending);
        let window = if self.buf.waiting.is_empty() {
            u64::MAX
        } else {
            let t = match self.config.policy.timeout() {
                Some(t) => self.buf.min_arrival.saturating_add(t),
                None => u64::MAX,
            };
            let idle =
                if self.config.idle_ns > 0 { self.last_data.saturating_add(self.config.idle_ns) } else { u64::MAX };
            t.min(idle)
        };
        self.deadline = window.min(self.rr_deadline);
    }

    /// Give up every wait whose deadline is at or before `now`.
    fn expire(&mut self, now: u64) {
        if let Some(t) = self.config.policy.timeout() {
            while !self.buf.waiting.is_empty() && self.buf.min_arrival.saturating_add(t) <= now {
                self.give_up_head(GapReason::Timeout, now);
            }
        }
        if self.config.idle_ns > 0
            && !self.buf.waiting.is_empty()
            && self.last_data.saturating_add(self.config.idle_ns) <= now
        {
            self.give_up_all(GapReason::Idle, now);
        }
        if self.rr_deadline <= now || self.rr_active {
            self.rr_check(now);
        }
        self.update_stats_and_deadline();
    }

    /// The next time [`Arbitrator::handle_timeout`] must be called, if any wait is running.
    pub fn poll_timeout(&self) -> Option<u64> {
        (self.deadline != u64::MAX).then_some(self.deadline)
    }

    /// Advance time to `now` without a packet: gives up waits whose deadline has passed.
    pub fn handle_timeout(&mut self, now: u64) {
        self.now = now;
        self.expire(now);
    }

    /// Change the HR window at run time. Nothing buffered is lost or duplicated: waits the
    /// new policy does not allow are given up at once, in order.
    pub fn set_policy(&mut self, now: u64, policy: Policy) {
        self.now = now;
        self.config.policy = policy;
        self.events.push_back(ArbEvent::PolicyChanged { at_ns: now, policy });
        if policy == Policy::LowLatency {
            self.give_up_all(GapReason::Skipped, now);
        }
        self.enforce_count(now);
        self.update_stats_and_deadline();
        if now >= self.deadline {
            self.expire(now);
        }
    }

    /// End of input: give up every wait (reason `flush`) so buffered packets come out.
    pub fn flush(&mut self, now: u64) {
        self.now = now;
        self.give_up_all(GapReason::Flush, now);
        // What was asked for is moot: nothing waits for it now.
        self.rr_reset();
        self.update_stats_and_deadline();
    }

    /// The next packet released from the HR buffer, in sequence order.
    pub fn poll_hr(&mut self) -> Option<Released<'_>> {
        let e = self.buf.ready.pop_front()?;
        self.rr_delivered(usize::from(e.input), u64::from(e.count - e.skip));
        self.buf.bytes -= e.len as usize;
        self.buf.free.push(e.slot);
        self.hr.stats.pending = (self.buf.waiting.len() + self.buf.ready.len()) as u64;
        let stored = &self.buf.slots[e.slot as usize][..e.len as usize];
        let mut trimmed = false;
        let frame = if e.skip > 0 && self.seq.trim(stored, &e.info, e.skip, &mut self.scratch) {
            trimmed = true;
            &self.scratch[..]
        } else {
            stored
        };
        let skip = if trimmed { e.skip } else { 0 };
        Some(Released {
            frame,
            seq: e.seq + u64::from(skip),
            count: e.count - skip,
            input: e.input,
            arrival_ns: e.arrival,
            release_ns: self.now,
            trimmed,
            payload_offset: e.info.payload_offset,
        })
    }

    /// The next gap report, oldest first.
    pub fn poll_gap(&mut self) -> Option<GapReport> {
        self.gaps.pop_front()
    }

    /// The next event (resets, end of session, policy changes).
    pub fn poll_event(&mut self) -> Option<ArbEvent> {
        self.events.pop_front()
    }

    /// The bytes to forward for a packet handled with `Action::Forward { skip }`: the frame
    /// itself, or (when `skip > 0` and the protocol allows) the frame trimmed to its new
    /// messages.
    pub fn frame_for<'a>(&'a mut self, frame: &'a [u8], info: &PacketInfo, skip: u32) -> &'a [u8] {
        if skip > 0 && self.seq.trim(frame, info, skip, &mut self.scratch) {
            &self.scratch
        } else {
            frame
        }
    }

    /// Next expected sequence number of an output.
    pub fn next_expected(&self, out: OutputId) -> u64 {
        match out {
            OutputId::Ll => self.ll.next,
            OutputId::Hr => self.hr.next,
        }
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> ArbStats {
        let mut ll = self.ll.stats;
        ll.sequence_span = self.ll.span();
        let mut hr = self.hr.stats;
        hr.sequence_span = self.hr.span();
        ArbStats {
            inputs: self.lines.iter().map(Line::stats).collect(),
            ll,
            hr,
            other_by_reason: OtherReason::ALL
                .iter()
                .map(|r| (r.as_str().to_string(), self.other_by_reason[r.index()]))
                .collect(),
            sequence_resets: self.resets,
            rerequest: self.rr.as_deref().map(|r| r.stats),
        }
    }

    /// Check that every packet and message is accounted for; the error says which sum fails.
    pub fn check_accounting(&self) -> Result<(), Unbalanced> {
        check_stats(&self.stats())
    }
}

/// Check the balance equations of a stats snapshot.
pub fn check_stats(s: &ArbStats) -> Result<(), Unbalanced> {
    stats_balance(s).map_err(|sum| Unbalanced { sum })
}

fn stats_balance(s: &ArbStats) -> Result<(), String> {
    for (i, st) in s.inputs.iter().enumerate() {
        let sum = st.other + st.control + st.wins + st.duplicates + st.late;
        if st.packets != sum {
            return Err(format!(
                "input {i}: packets {} != other {} + control {} + wins {} + duplicates {} + late {}",
                st.packets, st.other, st.control, st.wins, st.duplicates, st.late
            ));
        }
    }
    for (name, o) in [("ll", &s.ll), ("hr", &s.hr)] {
        if !o.enabled {
            continue;
        }
        let out = o.packets + o.duplicates + o.late + o.pending;
        if o.data_in != out {
            return Err(format!(
                "{name}: data_in {} != packets {} + duplicates {} + late {} + pending {}",
                o.data_in, o.packets, o.duplicates, o.late, o.pending
            ));
        }
        if o.messages - o.redelivered + o.messages_lost != o.sequence_span {
            return Err(format!(
                "{name}: messages {} - redelivered {} + lost {} != sequence span {}",
                o.messages, o.redelivered, o.messages_lost, o.sequence_span
            ));
        }
    }
    let total_other: u64 = s.inputs.iter().map(|i| i.other).sum();
    let by_reason: u64 = s.other_by_reason.values().sum();
    if total_other != by_reason {
        return Err(format!("other {total_other} != sum by reason {by_reason}"));
    }
    Ok(())
}

/// FNV-1a of a packet's UDP payload: tells copies of one reset packet from a new reset.
fn fingerprint(frame: &[u8], info: &PacketInfo) -> u64 {
    let po = usize::from(info.payload_offset);
    let payload = &frame[po..po + usize::from(info.payload_len)];
    payload.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

//! The FIX session layer (FIX 4.2 and 4.4), sans-IO: Logon, Heartbeat, TestRequest,
//! ResendRequest, SequenceReset (gap fill and reset), Logout, MsgSeqNum checks and
//! PossDupFlag, for an initiator or an acceptor.
//!
//! The caller owns the socket and the clock. It hands in what happened
//! ([`Session::handle_connected`], [`Session::handle_bytes`], [`Session::handle_timeout`]),
//! sends application messages with [`Session::send`], and takes out what to do:
//! [`Session::poll_transmit`] (bytes to write), [`Session::poll_event`] (logged on,
//! application messages in order, gaps, logged out) and [`Session::poll_timeout`] (the next
//! time to call `handle_timeout`). `now` is UNIX nanoseconds; it also stamps SendingTime.
//!
//! Sequence numbers and sent messages go through a [`SessionStore`]: with a durable store
//! (the file store of `tickplant-io`), a restart neither reuses nor loses a sequence number,
//! and a ResendRequest for messages sent before the restart is answered.
//!
//! Promises:
//! * Application messages reach the caller exactly once and in MsgSeqNum order. Messages
//!   after a gap wait (bounded by [`SessionConfig::max_queued`]) until a resend fills it.
//! * A message with a MsgSeqNum lower than expected is dropped when it carries
//!   PossDupFlag=Y and ends the session (Logout with the reason) when it does not, as the
//!   specification says.
//! * Resent application messages keep their MsgSeqNum and carry PossDupFlag=Y and
//!   OrigSendingTime; administrative messages in a resent range become one
//!   SequenceReset-GapFill per run.
//!
//! One file (about 900 lines, 250 of them tests): one state machine.

use std::collections::{BTreeMap, VecDeque};

use tickplant_wire::fix::{self, FieldIndex, Message, Writer};

/// Who opens the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Initiator,
    Acceptor,
}

#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// `FIX.4.2` or `FIX.4.4`.
    pub begin_string: String,
    pub sender: String,
    pub target: String,
    pub role: Role,
    /// HeartBtInt, seconds.
    pub heartbeat_s: u32,
    /// Ask for sequence numbers to start again at 1 at Logon (ResetSeqNumFlag 141=Y).
    pub reset_on_logon: bool,
    /// Messages held after a gap at most; more ends the session.
    pub max_queued: usize,
    /// More fields of our Logon, after HeartBtInt: what a venue asks for to let a session
    /// in (Username 553, Password 554, ...).
    pub logon_fields: Vec<(u32, String)>,
}

impl SessionConfig {
    pub fn new(role: Role, sender: &str, target: &str) -> Self {
        SessionConfig {
            begin_string: "FIX.4.4".into(),
            sender: sender.into(),
            target: target.into(),
            role,
            heartbeat_s: 30,
            reset_on_logon: false,
            max_queued: 100_000,
            logon_fields: Vec::new(),
        }
    }
}

/// Where a session keeps its sequence numbers and the messages it sent.
pub trait SessionStore {
    /// The MsgSeqNum of the next message we send.
    fn next_sender_seq(&self) -> u64;
    /// The MsgSeqNum we expect next from the counterparty.
    fn next_target_seq(&self) -> u64;
    fn set_next_sender_seq(&mut self, n: u64);
    fn set_next_target_seq(&mut self, n: u64);
    /// Keep a sent message (application messages, for resends).
    fn save(&mut self, seq: u64, message: &[u8]);
    /// A message sent earlier, by its MsgSeqNum.
    fn get(&self, seq: u64) -> Option<Vec<u8>>;
    /// Forget everything: both sequence numbers back to 1.
    fn reset(&mut self);
    /// The owner has acted on every message received so far: a store that keeps the next
    /// target number only once told so (a durable one, for an owner that must not lose a
    /// message it had not acted on when it stopped) makes it durable now.
    fn commit_target(&mut self) {}
    /// A failure to keep the record (a durable store's I/O error), once: the session's
    /// owner must stop rather than go on without it.
    fn failure(&mut self) -> Option<String> {
        None
    }
}

/// A store in memory (tests, and sessions that need not survive a restart).
#[derive(Debug, Clone)]
pub struct MemoryStore {
    sender: u64,
    target: u64,
    sent: BTreeMap<u64, Vec<u8>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore { sender: 1, target: 1, sent: BTreeMap::new() }
    }
}

impl SessionStore for MemoryStore {
    fn next_sender_seq(&self) -> u64 {
        self.sender
    }
    fn next_target_seq(&self) -> u64 {
        self.target
    }
    fn set_next_sender_seq(&mut self, n: u64) {
        self.sender = n;
    }
    fn set_next_target_seq(&mut self, n: u64) {
        self.target = n;
    }
    fn save(&mut self, seq: u64, message: &[u8]) {
        self.sent.insert(seq, message.to_vec());
    }
    fn get(&self, seq: u64) -> Option<Vec<u8>> {
        self.sent.get(&seq).cloned()
    }
    fn reset(&mut self) {
        *self = MemoryStore::default();
    }
}

/// What the session tells its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    LoggedOn,
    /// An application message, in MsgSeqNum order: its MsgType and the whole message.
    App {
        seq: u64,
        msg_type: Vec<u8>,
        message: Vec<u8>,
    },
    /// Messages `from..=to` are missing; a ResendRequest was sent.
    Gap {
        from: u64,
        to: u64,
    },
    /// The counterparty asked for `from..=to` (`to` 0: everything after `from`).
    ResendRequested {
        from: u64,
        to: u64,
    },
    /// A message was refused at the session level (it is not delivered).
    Rejected {
        seq: u64,
        reason: String,
    },
    /// The counterparty refused a message of ours at the session level (a Reject, 35=3):
    /// its MsgSeqNum (RefSeqNum, 45; 0 when not given) and the counterparty's reason (its
    /// Text, with the tag and reason code it named).
    RejectedByCounterparty {
        ref_seq: u64,
        reason: String,
    },
    /// The session is over; close the connection. `reason` says who ended it and why
    /// ("the counterparty logged out: TEXT" with the Text of its Logout, "we logged out:
    /// ..." when a fault of the counterparty's ended it here).
    LoggedOut {
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Disconnected,
    LogonSent,
    AwaitingLogon,
    Active,
    LogoutSent,
    Closed,
}

/// Administrative message types: never resent, gap-filled instead.
fn is_admin(msg_type: &[u8]) -> bool {
    matches!(msg_type, b"0" | b"1" | b"2" | b"3" | b"4" | b"5" | b"A")
}

/// One FIX session.
#[derive(Debug)]
pub struct Session<S: SessionStore> {
    cfg: SessionConfig,
    store: S,
    state: State,
    inbuf: Vec<u8>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<SessionEvent>,
    /// Messages after a gap, by MsgSeqNum.
    queued: BTreeMap<u64, Vec<u8>>,
    /// The end of the range a ResendRequest of ours asked for (while it is being filled).
    resending_to: Option<u64>,
    last_sent: u64,
    last_received: u64,
    test_request: Option<u64>,
    logout_at: Option<u64>,
    writer: Writer,
}

impl<S: SessionStore> Session<S> {
    pub fn new(cfg: SessionConfig, store: S) -> Self {
        let writer = Writer::new(&cfg.begin_string, "0");
        Session {
            cfg,
            store,
            state: State::Disconnected,
            inbuf: Vec::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            queued: BTreeMap::new(),
            resending_to: None,
            last_sent: 0,
            last_received: 0,
            test_request: None,
            logout_at: None,
            writer,
        }
    }
    pub fn store(&self) -> &S {
        &self.store
    }
    /// The store, to keep for the session's next connection.
    pub fn into_store(self) -> S {
        self.store
    }
    /// The owner has acted on every message received so far (see
    /// [`SessionStore::commit_target`]).
    pub fn commit_received(&mut self) {
        self.store.commit_target();
    }
    /// The store's failure, if it had one (see [`SessionStore::failure`]).
    pub fn store_failure(&mut self) -> Option<String> {
        self.store.failure()
    }
    pub fn is_active(&self) -> bool {
        self.state == State::Active
    }
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// The connection is up: an initiator sends its Logon.
    pub fn handle_connected(&mut self, now: u64) {
        self.last_received = now;
        self.inbuf.clear();
        match self.cfg.role {
            Role::Initiator => {
                if self.cfg.reset_on_logon {
                    self.store.reset();
                }
                self.send_logon(now);
                self.state = State::LogonSent;
            }
            Role::Acceptor => self.state = State::AwaitingLogon,
        }
    }

    /// Bytes read from the connection (any split).
    pub fn handle_bytes(&mut self, now: u64, bytes: &[u8]) {
        self.inbuf.extend_from_slice(bytes);
        let mut used = 0;
        while self.state != State::Closed {
            match fix::frame_len(&self.inbuf[used..]) {
                Ok(Some(n)) => {
                    let msg = self.inbuf[used..used + n].to_vec();
                    used += n;
                    self.last_received = now;
                    self.on_message(now, &msg);
                }
                Ok(None) => break,
                Err(e) => {
                    self.fatal(now, &format!("not a FIX stream: {e}"));
                    break;
                }
            }
        }
        self.inbuf.drain(..used.min(self.inbuf.len()));
    }

    /// Send an application message: `fields` after the standard header, in order.
    /// Returns its MsgSeqNum.
    pub fn send(&mut self, now: u64, msg_type: &str, fields: &[(u32, &[u8])]) -> u64 {
        self.compose(now, msg_type, fields, true)
    }

    /// Write a message with the next MsgSeqNum and queue it; application messages are kept
    /// for resends (`keep`), administrative ones are gap-filled instead.
    fn compose(&mut self, now: u64, msg_type: &str, fields: &[(u32, &[u8])], keep: bool) -> u64 {
        let seq = self.store.next_sender_seq();
        self.writer.reset(msg_type);
        self.header(now, seq);
        for (t, v) in fields {
            self.writer.field(*t, v);
        }
        let bytes = self.writer.finish().to_vec();
        if keep {
            self.store.save(seq, &bytes);
        }
        self.store.set_next_sender_seq(seq + 1);
        self.transmit(now, bytes);
        seq
    }

    /// The MsgSeqNum the next message we send will carry.
    pub fn next_sender_seq(&self) -> u64 {
        self.store.next_sender_seq()
    }

    /// An application message the caller serialized and sent itself (a pre-built order
    /// template): kept for resends, and the sequence moves on.
    pub fn record_sent(&mut self, now: u64, seq: u64, bytes: &[u8]) {
        self.store.save(seq, bytes);
        self.store.set_next_sender_seq(seq + 1);
        self.last_sent = now;
    }

    /// Start a Logout (the session closes when the counterparty answers, or after a
    /// heartbeat interval).
    pub fn logout(&mut self, now: u64, text: &str) {
        if matches!(self.state, State::Active | State::LogonSent) {
            self.admin(now, "5", &[(58, text.as_bytes())]);
            self.state = State::LogoutSent;
            self.logout_at = Some(now + self.interval());
        }
    }

    /// Time passed: heartbeats, test requests, a Logout that was not answered.
    pub fn handle_timeout(&mut self, now: u64) {
        if let Some(t) = self.logout_at {
            if now >= t && self.state == State::LogoutSent {
                self.close("we logged out (no Logout came in answer)".into());
                return;
            }
        }
        if self.state != State::Active {
            return;
        }
        let hb = self.interval();
        if now >= self.last_sent + hb {
            self.admin(now, "0", &[]);
        }
        let silent = now.saturating_sub(self.last_received);
        match self.test_request {
            None if silent >= hb + hb / 5 => {
                let id = now.to_string();
                self.admin(now, "1", &[(112, id.as_bytes())]);
                self.test_request = Some(now);
            }
            Some(sent) if now >= sent + hb => {
                self.close(format!(
                    "we ended the session: the counterparty was silent for {} s and did not answer a TestRequest",
                    silent / 1_000_000_000
                ));
            }
            _ => {}
        }
    }

    /// When to call [`Session::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Active => {
                let hb = self.interval();
                let mut t = (self.last_sent + hb).min(self.last_received + hb + hb / 5);
                if let Some(sent) = self.test_request {
                    t = t.min(sent + hb);
                }
                Some(t)
            }
            State::LogoutSent => self.logout_at,
            _ => None,
        }
    }
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    fn interval(&self) -> u64 {
        u64::from(self.cfg.heartbeat_s.max(1)) * 1_000_000_000
    }

    fn header(&mut self, now: u64, seq: u64) {
        let mut ts = [0u8; 21];
        fix::utc_timestamp(now, &mut ts);
        self.writer.field(49, self.cfg.sender.as_bytes()).field(56, self.cfg.target.as_bytes());
        self.writer.field_uint(34, seq).field(52, &ts);
    }

    /// An administrative message (not kept for resends: a resend gap-fills it).
    fn admin(&mut self, now: u64, msg_type: &str, fields: &[(u32, &[u8])]) {
        self.compose(now, msg_type, fields, false);
    }

    fn transmit(&mut self, now: u64, bytes: Vec<u8>) {
        self.last_sent = now;
        self.out.push_back(bytes);
    }

    fn send_logon(&mut self, now: u64) {
        let hb = self.cfg.heartbeat_s.to_string();
        let mut fields: Vec<(u32, &[u8])> = vec![(98, b"0"), (108, hb.as_bytes())];
        if self.cfg.reset_on_logon {
            fields.push((141, b"Y"));
        }
        let extra = std::mem::take(&mut self.cfg.logon_fields);
        fields.extend(extra.iter().map(|(t, v)| (*t, v.as_bytes())));
        self.admin(now, "A", &fields);
        self.cfg.logon_fields = extra;
    }

    fn close(&mut self, reason: String) {
        self.state = State::Closed;
        self.events.push_back(SessionEvent::LoggedOut { reason });
    }

    /// A Logout with the reason, then the end.
    fn fatal(&mut self, now: u64, reason: &str) {
        if self.state != State::Closed && self.state != State::Disconnected {
            self.admin(now, "5", &[(58, reason.as_bytes())]);
        }
        self.close(format!("we logged out: {reason}"));
    }

    fn on_message(&mut self, now: u64, bytes: &[u8]) {
        let m = match Message::new_checked(bytes) {
            Ok(m) => m,
            Err(e) => {
                // A garbled message is ignored, as the specification says; the sequence
                // gap it leaves is caught by the next one.
                self.events.push_back(SessionEvent::Rejected { seq: 0, reason: format!("garbled message: {e}") });
                return;
            }
        };
        let mut ix = FieldIndex::new();
        if let Err(e) = ix.parse(&m) {
            self.events.push_back(SessionEvent::Rejected { seq: 0, reason: format!("garbled message: {e}") });
            return;
        }
        if m.begin_string() != self.cfg.begin_string.as_bytes() {
            return self.fatal(now, "BeginString does not match the session's");
        }
        let sender = ix.get(49).map(|f| f.value);
        let target = ix.get(56).map(|f| f.value);
        if sender != Some(self.cfg.target.as_bytes()) || target != Some(self.cfg.sender.as_bytes()) {
            return self.fatal(now, "CompID problem: SenderCompID/TargetCompID do not name this session");
        }
        let Some(seq) = ix.get(34).and_then(|f| f.as_uint().ok()) else {
            return self.fatal(now, "MsgSeqNum (34) missing or not a number");
        };
        let msg_type = m.msg_type();
        let poss_dup = ix.get(43).is_some_and(|f| f.value == b"Y");

        // Logon first.
        if matches!(self.state, State::AwaitingLogon | State::LogonSent) {
            if msg_type == b"5" {
                // A refused Logon: the counterparty says why in Text (a sequence number it
                // did not expect, an unknown CompID) and disconnects; nothing to answer.
                let text = ix.get(58).map_or(String::new(), |f| String::from_utf8_lossy(f.value).into_owned());
                return self.close(if text.is_empty() {
                    "the counterparty logged out before logging on (it gave no reason)".into()
                } else {
                    format!("the counterparty logged out before logging on: {text}")
                });
            }
            if msg_type != b"A" {
                return self.fatal(now, "the first message must be a Logon");
            }
            if ix.get(141).is_some_and(|f| f.value == b"Y") && seq == 1 {
                if self.cfg.role == Role::Acceptor {
                    self.store.reset();
                }
                self.store.set_next_target_seq(1);
            }
            if self.cfg.role == Role::Acceptor {
                if let Some(hb) = ix.get(108).and_then(|f| f.as_uint().ok()) {
                    self.cfg.heartbeat_s = hb.clamp(1, 3600) as u32;
                }
                if ix.get(141).is_some_and(|f| f.value == b"Y") {
                    self.cfg.reset_on_logon = true;
                }
                self.send_logon(now);
            }
            self.state = State::Active;
            self.events.push_back(SessionEvent::LoggedOn);
        }

        // SequenceReset in reset mode ignores MsgSeqNum.
        if msg_type == b"4" && ix.get(123).is_none_or(|f| f.value != b"Y") {
            if let Some(n) = ix.get(36).and_then(|f| f.as_uint().ok()) {
                self.store.set_next_target_seq(n);
            }
            return self.drain_queue(now);
        }

        let expected = self.store.next_target_seq();
        if seq < expected {
            if poss_dup {
                return;
            }
            return self.fatal(now, &format!("MsgSeqNum too low, expecting {expected} but received {seq}"));
        }
        if seq > expected {
            if msg_type == b"5" {
                // A Logout ends the session whatever its number.
                return self.on_logout(now, &ix);
            }
            if self.queued.len() >= self.cfg.max_queued {
                return self.fatal(now, "too many messages after a gap");
            }
            if msg_type == b"2" {
                // Answer a ResendRequest at once, even beyond a gap.
                self.on_resend_request(now, &ix);
            }
            self.queued.insert(seq, bytes.to_vec());
            if self.resending_to.is_none() {
                let to = seq - 1;
                self.admin(now, "2", &[(7, expected.to_string().as_bytes()), (16, to.to_string().as_bytes())]);
                self.resending_to = Some(to);
                self.events.push_back(SessionEvent::Gap { from: expected, to });
            }
            return;
        }
        self.process(now, seq, msg_type, &ix, bytes);
        self.drain_queue(now);
    }

    /// Messages waiting after a gap that is now filled.
    fn drain_queue(&mut self, now: u64) {
        loop {
            let next = self.store.next_target_seq();
            if self.resending_to.is_some_and(|to| next > to) {
                self.resending_to = None;
            }
            // Drop what is now behind us.
            while let Some((&s, _)) = self.queued.first_key_value() {
                if s < next {
                    self.queued.pop_first();
                } else {
                    break;
                }
            }
            let Some(bytes) = self.queued.remove(&next) else { return };
            let Ok(m) = Message::new_checked(&bytes) else { continue };
            let mut ix = FieldIndex::new();
            if ix.parse(&m).is_err() {
                continue;
            }
            let mt = m.msg_type().to_vec();
            if mt == b"2" {
                // Answered when it arrived.
                self.store.set_next_target_seq(next + 1);
                continue;
            }
            self.process(now, next, &mt, &ix, &bytes);
            if self.state == State::Closed {
                return;
            }
        }
    }

    /// The message the sequence expects: act on it and move on.
    fn process(&mut self, now: u64, seq: u64, msg_type: &[u8], ix: &FieldIndex<'_>, bytes: &[u8]) {
        match msg_type {
            b"4" => {
                // GapFill: the counterparty skips to NewSeqNo.
                match ix.get(36).and_then(|f| f.as_uint().ok()) {
                    Some(n) if n > seq => self.store.set_next_target_seq(n),
                    _ => {
                        self.store.set_next_target_seq(seq + 1);
                        self.events.push_back(SessionEvent::Rejected {
                            seq,
                            reason: "GapFill with NewSeqNo not ahead".into(),
                        });
                    }
                }
                return;
            }
            b"5" => {
                self.store.set_next_target_seq(seq + 1);
                return self.on_logout(now, ix);
            }
            _ => {}
        }
        self.store.set_next_target_seq(seq + 1);
        match msg_type {
            b"A" => {}
            // Any Heartbeat shows the counterparty alive (the answer to a TestRequest too).
            b"0" => self.test_request = None,
            b"1" => {
                let id = ix.get(112).map(|f| f.value.to_vec()).unwrap_or_default();
                self.admin(now, "0", &[(112, &id)]);
            }
            b"2" => self.on_resend_request(now, ix),
            b"3" => self.events.push_back(SessionEvent::RejectedByCounterparty {
                ref_seq: ix.get(45).and_then(|f| f.as_uint().ok()).unwrap_or(0),
                reason: reject_reason(ix),
            }),
            _ => self.events.push_back(SessionEvent::App { seq, msg_type: msg_type.to_vec(), message: bytes.to_vec() }),
        }
    }

    fn on_logout(&mut self, now: u64, ix: &FieldIndex<'_>) {
        if self.state == State::LogoutSent {
            return self.close("we logged out (the counterparty answered)".into());
        }
        self.admin(now, "5", &[]);
        let text = ix.get(58).map_or(String::new(), |f| String::from_utf8_lossy(f.value).into_owned());
        self.close(if text.is_empty() {
            "the counterparty logged out".into()
        } else {
            format!("the counterparty logged out: {text}")
        });
    }

    /// Resend `from..=to` (0: up to the last sent): application messages again with
    /// PossDupFlag, runs of administrative (or forgotten) ones as one GapFill each.
    fn on_resend_request(&mut self, now: u64, ix: &FieldIndex<'_>) {
        let from = ix.get(7).and_then(|f| f.as_uint().ok()).unwrap_or(1).max(1);
        let last = self.store.next_sender_seq() - 1;
        let to = match ix.get(16).and_then(|f| f.as_uint().ok()) {
            Some(0) | None => last,
            Some(n) => n.min(last),
        };
        self.events.push_back(SessionEvent::ResendRequested { from, to });
        let mut gap_from: Option<u64> = None;
        for seq in from..=to {
            let stored = self.store.get(seq).and_then(|b| resend_copy(&b, now, &self.cfg));
            match stored {
                Some(bytes) => {
                    if let Some(g) = gap_from.take() {
                        self.gap_fill(now, g, seq);
                    }
                    self.transmit(now, bytes);
                }
                None => {
                    gap_from.get_or_insert(seq);
                }
            }
        }
        if let Some(g) = gap_from {
            self.gap_fill(now, g, to + 1);
        }
    }

    /// A SequenceReset-GapFill sent as message `at`, skipping to `new_seq`.
    fn gap_fill(&mut self, now: u64, at: u64, new_seq: u64) {
        let mut ts = [0u8; 21];
        fix::utc_timestamp(now, &mut ts);
        self.writer.reset("4");
        self.writer.field(49, self.cfg.sender.as_bytes()).field(56, self.cfg.target.as_bytes());
        self.writer.field_uint(34, at).field(43, b"Y").field(52, &ts).field(122, &ts);
        self.writer.field(123, b"Y").field_uint(36, new_seq);
        let bytes = self.writer.finish().to_vec();
        self.transmit(now, bytes);
    }
}

/// The reason a Reject (35=3) or a BusinessMessageReject (35=j) gives: its Text (58), and
/// the tag (RefTagID, 371) and reason code (SessionRejectReason 373, BusinessRejectReason
/// 380) it names, as "Required tag missing, field=21 (tag 21, reason 1)".
pub fn reject_reason(ix: &FieldIndex<'_>) -> String {
    let text = |t: u32| ix.get(t).map(|f| String::from_utf8_lossy(f.value).into_owned());
    let mut parts = Vec::new();
    if let Some(t) = text(371) {
        parts.push(format!("tag {t}"));
    }
    if let Some(r) = text(373).or_else(|| text(380)) {
        parts.push(format!("reason {r}"));
    }
    match (text(58), parts.is_empty()) {
        (Some(t), true) => t,
        (Some(t), false) => format!("{t} ({})", parts.join(", ")),
        (None, false) => parts.join(", "),
        (None, true) => "no reason given".into(),
    }
}

/// A stored application message as a resend: same MsgSeqNum, PossDupFlag=Y,
/// OrigSendingTime = its SendingTime, SendingTime = now. `None` for administrative messages
/// (gap-filled instead) and for anything that does not parse.
fn resend_copy(stored: &[u8], now: u64, cfg: &SessionConfig) -> Option<Vec<u8>> {
    let m = Message::new_checked(stored).ok()?;
    if is_admin(m.msg_type()) {
        return None;
    }
    let mut ix = FieldIndex::new();
    ix.parse(&m).ok()?;
    let seq = ix.get(34)?.as_uint().ok()?;
    let orig = ix.get(52)?.value;
    let mut ts = [0u8; 21];
    fix::utc_timestamp(now, &mut ts);
    let mut w = Writer::new(&cfg.begin_string, std::str::from_utf8(m.msg_type()).ok()?);
    w.field(49, cfg.sender.as_bytes()).field(56, cfg.target.as_bytes()).field_uint(34, seq);
    w.field(43, b"Y").field(52, &ts).field(122, orig);
    for f in &ix.fields()[1..] {
        if !matches!(f.tag, 49 | 56 | 34 | 43 | 52 | 122 | 97) {
            w.field(f.tag, f.value);
        }
    }
    Some(w.finish().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_795_271_400 * S;

    type Pair = (Session<MemoryStore>, Session<MemoryStore>);

    fn pair() -> Pair {
        let mut a = SessionConfig::new(Role::Initiator, "TP", "EX");
        a.heartbeat_s = 10;
        let b = SessionConfig::new(Role::Acceptor, "EX", "TP");
        (Session::new(a, MemoryStore::default()), Session::new(b, MemoryStore::default()))
    }

    /// Carry every message from one side to the other until both are quiet.
    fn pump(now: u64, a: &mut Session<MemoryStore>, b: &mut Session<MemoryStore>) {
        loop {
            let mut moved = false;
            while let Some(m) = a.poll_transmit() {
                b.handle_bytes(now, &m);
                moved = true;
            }
            while let Some(m) = b.poll_transmit() {
                a.handle_bytes(now, &m);
                moved = true;
            }
            if !moved {
                return;
            }
        }
    }

    fn events(s: &mut Session<MemoryStore>) -> Vec<SessionEvent> {
        std::iter::from_fn(|| s.poll_event()).collect()
    }

    fn field(m: &[u8], tag: u32) -> Option<Vec<u8>> {
        let m = Message::new_checked(m).ok()?;
        let mut ix = FieldIndex::new();
        ix.parse(&m).ok()?;
        ix.get(tag).map(|f| f.value.to_vec())
    }

    fn logged_on() -> Pair {
        let (mut a, mut b) = pair();
        a.handle_connected(T0);
        b.handle_connected(T0);
        pump(T0, &mut a, &mut b);
        assert_eq!(events(&mut a), vec![SessionEvent::LoggedOn]);
        assert_eq!(events(&mut b), vec![SessionEvent::LoggedOn]);
        (a, b)
    }

    #[test]
    fn logon_app_messages_and_logout() {
        let (mut a, mut b) = logged_on();
        assert!(a.is_active() && b.is_active());
        // The acceptor took the initiator's heartbeat interval.
        assert_eq!(b.cfg.heartbeat_s, 10);
        let seq = a.send(T0, "D", &[(11, b"1"), (55, b"AAPL")]);
        assert_eq!(seq, 2);
        pump(T0, &mut a, &mut b);
        match &events(&mut b)[..] {
            [SessionEvent::App { seq: 2, msg_type, message }] => {
                assert_eq!(msg_type, b"D");
                assert_eq!(field(message, 55).unwrap(), b"AAPL");
            }
            other => panic!("{other:?}"),
        }
        a.logout(T0, "done");
        pump(T0, &mut a, &mut b);
        assert!(a.is_closed() && b.is_closed());
        assert!(matches!(&events(&mut b)[..], [SessionEvent::LoggedOut { .. }]));
    }

    /// Who ended a session and why, in its reason: a Logon refused with a Text (what a
    /// QuickFIX acceptor sends for a sequence number it did not expect), a Logout with one,
    /// and a fault of the counterparty's that ends it here.
    #[test]
    fn logouts_say_who_and_why() {
        let reason = |s: &mut Session<MemoryStore>| match &events(s)[..] {
            [.., SessionEvent::LoggedOut { reason }] => reason.clone(),
            other => panic!("{other:?}"),
        };
        // Refused at logon: the Text, and no Logout sent back.
        let (mut a, mut b) = pair();
        a.handle_connected(T0);
        let _logon = a.poll_transmit().unwrap();
        b.handle_connected(T0);
        b.admin(T0, "5", &[(58, b"MsgSeqNum too low, expecting 17 but received 1")]);
        pump(T0, &mut a, &mut b);
        assert!(a.is_closed());
        assert_eq!(
            reason(&mut a),
            "the counterparty logged out before logging on: MsgSeqNum too low, expecting 17 but received 1"
        );
        assert!(a.poll_transmit().is_none());

        // A Logout with a Text once logged on: answered, and the Text told.
        let (mut a, mut b) = logged_on();
        b.logout(T0, "end of day");
        pump(T0, &mut a, &mut b);
        assert_eq!(reason(&mut a), "the counterparty logged out: end of day");
        assert_eq!(reason(&mut b), "we logged out (the counterparty answered)");

        // A sequence number below the expected one, without PossDupFlag: we end it.
        let (mut a, mut b) = logged_on();
        b.store.set_next_sender_seq(1);
        b.send(T0, "8", &[(11, b"1")]);
        pump(T0, &mut a, &mut b);
        assert_eq!(reason(&mut a), "we logged out: MsgSeqNum too low, expecting 2 but received 1");
        assert_eq!(reason(&mut b), "the counterparty logged out: MsgSeqNum too low, expecting 2 but received 1");
    }

    /// A Reject of one of our messages names it and gives the counterparty's reason.
    #[test]
    fn a_reject_names_our_message_and_the_reason() {
        let (mut a, mut b) = logged_on();
        let seq = a.send(T0, "D", &[(11, b"1")]);
        pump(T0, &mut a, &mut b);
        let _ = events(&mut b);
        let fields: [(u32, &[u8]); 5] =
            [(45, b"2"), (371, b"21"), (372, b"D"), (373, b"1"), (58, b"Required tag missing, field=21")];
        b.send(T0, "3", &fields);
        pump(T0, &mut a, &mut b);
        assert_eq!(
            events(&mut a),
            vec![SessionEvent::RejectedByCounterparty {
                ref_seq: seq,
                reason: "Required tag missing, field=21 (tag 21, reason 1)".into()
            }]
        );
        assert!(a.is_active(), "a Reject does not end the session");
    }

    #[test]
    fn heartbeats_and_test_requests() {
        let (mut a, mut b) = logged_on();
        // Nothing sent for a heartbeat interval: a Heartbeat.
        let t = a.poll_timeout().unwrap();
        assert_eq!(t, T0 + 10 * S);
        a.handle_timeout(t);
        let hb = a.poll_transmit().unwrap();
        assert_eq!(field(&hb, 35).unwrap(), b"0");
        // b hears nothing for 12 s: a TestRequest, answered by a Heartbeat with its id.
        b.handle_timeout(T0 + 12 * S);
        let sent: Vec<Vec<u8>> = std::iter::from_fn(|| b.poll_transmit()).collect();
        let tr = sent.iter().find(|m| field(m, 35).unwrap() == b"1").expect("a TestRequest");
        let id = field(tr, 112).unwrap();
        for m in &sent {
            a.handle_bytes(T0 + 12 * S, m);
        }
        let answer = std::iter::from_fn(|| a.poll_transmit()).find(|m| field(m, 112).is_some()).expect("an answer");
        assert_eq!(field(&answer, 35).unwrap(), b"0");
        assert_eq!(field(&answer, 112).unwrap(), id);
        b.handle_bytes(T0 + 12 * S, &answer);
        assert_eq!(b.poll_timeout(), Some(T0 + 22 * S), "the TestRequest is answered");
        // Unanswered, a TestRequest ends the session.
        let (mut a, _b) = logged_on();
        a.handle_timeout(T0 + 12 * S);
        assert!(std::iter::from_fn(|| a.poll_transmit()).any(|m| field(&m, 35).unwrap() == b"1"));
        a.handle_timeout(T0 + 22 * S);
        assert!(a.is_closed());
    }

    #[test]
    fn a_gap_is_resent_in_order_and_admin_messages_are_gap_filled() {
        let (mut a, mut b) = logged_on();
        let sent: Vec<Vec<u8>> = (0..5)
            .map(|i| {
                a.send(T0, "D", &[(11, format!("{i}").as_bytes())]);
                a.poll_transmit().unwrap()
            })
            .collect();
        // A heartbeat in the middle of the lost range (admin: gap-filled on resend).
        a.handle_timeout(T0 + 10 * S);
        let hb = a.poll_transmit().unwrap();
        a.send(T0 + 10 * S, "D", &[(11, b"5")]);
        let last = a.poll_transmit().unwrap();
        // b gets 0, loses 1..=4 and the heartbeat, then gets 5.
        b.handle_bytes(T0, &sent[0]);
        let _ = hb;
        b.handle_bytes(T0 + 10 * S, &last);
        let ev = events(&mut b);
        assert!(ev.contains(&SessionEvent::Gap { from: 3, to: 7 }), "{ev:?}");
        pump(T0 + 10 * S, &mut a, &mut b);
        let ids: Vec<Vec<u8>> = events(&mut b)
            .into_iter()
            .filter_map(|e| match e {
                SessionEvent::App { message, .. } => Some(field(&message, 11).unwrap()),
                _ => None,
            })
            .collect();
        let want: Vec<Vec<u8>> = ["0", "1", "2", "3", "4", "5"].iter().map(|s| s.as_bytes().to_vec()).collect();
        // 0 came before the gap; 1..=4 and 5 after, in order, exactly once.
        assert_eq!(ids, want[1..].to_vec());
        assert_eq!(b.store().next_target_seq(), a.store().next_sender_seq());
        assert!(events(&mut a).contains(&SessionEvent::ResendRequested { from: 3, to: 7 }));
    }

    #[test]
    fn resends_carry_poss_dup_and_duplicates_are_dropped() {
        let (mut a, mut b) = logged_on();
        a.send(T0, "D", &[(11, b"x")]);
        let first = a.poll_transmit().unwrap();
        b.handle_bytes(T0, &first);
        assert_eq!(events(&mut b).len(), 1);
        // The same message again, as a resend: dropped.
        let again = resend_copy(&first, T0 + S, &a.cfg).unwrap();
        assert_eq!(field(&again, 43).unwrap(), b"Y");
        assert_eq!(field(&again, 122).unwrap(), field(&first, 52).unwrap());
        assert_eq!(field(&again, 34).unwrap(), field(&first, 34).unwrap());
        b.handle_bytes(T0 + S, &again);
        assert!(events(&mut b).is_empty());
        assert!(b.is_active());
        // Without PossDupFlag a low MsgSeqNum ends the session.
        b.handle_bytes(T0 + S, &first);
        assert!(b.is_closed());
        let logout = b.poll_transmit().unwrap();
        assert!(String::from_utf8_lossy(&field(&logout, 58).unwrap()).contains("MsgSeqNum too low"));
    }

    #[test]
    fn a_restart_from_the_store_keeps_the_numbers() {
        let (mut a, mut b) = logged_on();
        a.send(T0, "D", &[(11, b"1")]);
        pump(T0, &mut a, &mut b);
        // a restarts with its store; b keeps running.
        let store = a.store().clone();
        let mut a2 = Session::new(a.cfg.clone(), store);
        a2.handle_connected(T0 + S);
        let logon = a2.poll_transmit().unwrap();
        assert_eq!(field(&logon, 34).unwrap(), b"3", "the next number, not 1 again");
        b.state = State::AwaitingLogon;
        b.handle_bytes(T0 + S, &logon);
        pump(T0 + S, &mut a2, &mut b);
        assert!(a2.is_active());
        a2.send(T0 + S, "D", &[(11, b"2")]);
        pump(T0 + S, &mut a2, &mut b);
        let apps: Vec<_> = events(&mut b).into_iter().filter(|e| matches!(e, SessionEvent::App { .. })).collect();
        assert_eq!(apps.len(), 2);
    }

    #[test]
    fn sequence_reset_and_comp_ids() {
        let (mut a, mut b) = logged_on();
        // Reset mode: the next expected number jumps, whatever MsgSeqNum says.
        let mut w = Writer::new("FIX.4.4", "4");
        w.field(49, b"TP").field(56, b"EX").field_uint(34, 99).field(52, b"20261121-14:30:00.000").field_uint(36, 50);
        b.handle_bytes(T0, w.finish());
        assert_eq!(b.store().next_target_seq(), 50);
        // The wrong CompIDs end the session.
        let mut w = Writer::new("FIX.4.4", "D");
        w.field(49, b"XX").field(56, b"EX").field_uint(34, 50).field(52, b"20261121-14:30:00.000");
        b.handle_bytes(T0, w.finish());
        assert!(b.is_closed());
        let _ = a.poll_transmit();
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        /// Messages lost on the way (first sends only: a resend arrives) still reach the
        /// other side exactly once and in order, once a later message shows the gap.
        #[test]
        fn lost_messages_are_recovered_exactly_once_in_order(
            lost in proptest::collection::vec(proptest::prelude::any::<bool>(), 1..60),
            heartbeat_at in proptest::collection::vec(0usize..60, 0..5),
        ) {
            let (mut a, mut b) = logged_on();
            let mut now = T0;
            for (i, &lose) in lost.iter().enumerate() {
                now += 1_000;
                if heartbeat_at.contains(&i) {
                    // Ten quiet seconds: both sides send a Heartbeat (b's arrives; a's may be
                    // lost with the message after it).
                    now += 10 * S;
                    b.handle_timeout(now);
                    pump(now, &mut a, &mut b);
                    a.handle_timeout(now);
                }
                a.send(now, "D", &[(11, i.to_string().as_bytes())]);
                let msgs: Vec<Vec<u8>> = std::iter::from_fn(|| a.poll_transmit()).collect();
                if !lose {
                    for m in &msgs {
                        b.handle_bytes(now, m);
                    }
                }
                pump(now, &mut a, &mut b);
            }
            // A last message that arrives reveals a lost tail.
            a.send(now, "D", &[(11, b"end")]);
            pump(now, &mut a, &mut b);
            let got: Vec<String> = events(&mut b)
                .into_iter()
                .filter_map(|e| match e {
                    SessionEvent::App { message, .. } => Some(String::from_utf8(field(&message, 11).unwrap()).unwrap()),
                    _ => None,
                })
                .collect();
            let mut want: Vec<String> = (0..lost.len()).map(|i| i.to_string()).collect();
            want.push("end".into());
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert!(a.is_active() && b.is_active());
            proptest::prop_assert_eq!(b.store().next_target_seq(), a.store().next_sender_seq());
        }
    }
}

//! A SoupBinTCP client session and the GLIMPSE snapshot it carries, sans-IO.
//!
//! [`SoupClient`] logs in (user, password, session), then reads the server's packets from
//! whatever bytes the caller's socket gave ([`SoupClient::handle_input`]), and writes what
//! it must send (the login, its heartbeats, the logout) into [`SoupClient::take_output`].
//! Time comes in as `now`: it sends a heartbeat after `heartbeat_ns` without sending, and
//! fails when the server has said nothing for `silence_ns`.
//!
//! [`Glimpse`] reads a GLIMPSE snapshot from the sequenced messages: ITCH 5.0 messages (the
//! stock directory, then every open order), closed by an End of Snapshot message (type
//! `M`, the ITCH sequence number from which the live feed continues, as 20 ASCII digits).
//!
//! What it promises: every failure is an error that says what went wrong (a rejected
//! login and its reason, a connection that ended before the snapshot did, a silent server,
//! a packet that breaks the format, with its offset in the stream); nothing is returned as a
//! snapshot unless its End of Snapshot arrived.

use std::collections::VecDeque;

use tickplant_wire::soupbintcp::{self, Repr};

use crate::packed::Packed;

/// Why a session failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SoupError {
    /// The server refused the login: `A` not authorized, `S` session not available.
    LoginRejected { reason: u8 },
    /// The connection ended (`what` was going on).
    Closed { what: &'static str },
    /// Nothing came from the server for this long.
    Silent { ns: u64 },
    /// A packet that breaks SoupBinTCP, at this byte of the stream.
    Malformed { offset: u64, error: tickplant_wire::Error },
    /// The server sent data before it accepted the login.
    NotLoggedIn { offset: u64 },
}

impl std::fmt::Display for SoupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SoupError::LoginRejected { reason } => {
                let why = match reason {
                    b'A' => "not authorized (user or password)",
                    b'S' => "session not available",
                    _ => "unknown reason",
                };
                write!(f, "login rejected: {} ({why})", char::from(*reason))
            }
            SoupError::Closed { what } => write!(f, "the server closed the connection {what}"),
            SoupError::Silent { ns } => write!(f, "the server sent nothing for {:.1} s", *ns as f64 / 1e9),
            SoupError::Malformed { offset, error } => write!(f, "byte {offset} of the stream: {error}"),
            SoupError::NotLoggedIn { offset } => {
                write!(f, "byte {offset} of the stream: data before the login was accepted")
            }
        }
    }
}

impl std::error::Error for SoupError {}

/// Login settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoupLogin {
    pub username: String,
    pub password: String,
    /// Blank: the server's current session.
    pub session: String,
    /// The first sequenced message wanted (1: from the start).
    pub sequence: u64,
    pub heartbeat_ns: u64,
    pub silence_ns: u64,
}

impl Default for SoupLogin {
    fn default() -> Self {
        SoupLogin {
            username: String::new(),
            password: String::new(),
            session: String::new(),
            sequence: 1,
            heartbeat_ns: 1_000_000_000,
            silence_ns: 15_000_000_000,
        }
    }
}

/// What the server said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SoupEvent<'a> {
    LoginAccepted {
        session: [u8; 10],
        sequence: u64,
    },
    /// A sequenced message (numbered from the accepted sequence number).
    Message {
        sequence: u64,
        data: &'a [u8],
    },
    EndOfSession,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    LoggingIn,
    LoggedIn,
    Ended,
}

/// A SoupBinTCP client session (see the module doc).
#[derive(Debug)]
pub struct SoupClient {
    login: SoupLogin,
    state: State,
    inbuf: Vec<u8>,
    /// Bytes of the stream consumed before `inbuf`'s start (for error offsets).
    consumed: u64,
    out: Vec<u8>,
    last_sent: u64,
    last_heard: u64,
    next_seq: u64,
    /// Debug packets, kept for the caller's log.
    pub debug: VecDeque<String>,
}

impl SoupClient {
    /// A session that sends its login at once (`now`).
    pub fn new(login: SoupLogin, now: u64) -> SoupClient {
        let mut out = Vec::new();
        Repr::LoginRequest {
            username: soupbintcp::alpha(&login.username),
            password: soupbintcp::alpha(&login.password),
            session: soupbintcp::alpha_right(&login.session),
            sequence: login.sequence,
        }
        .write_to(&mut out);
        SoupClient {
            state: State::LoggingIn,
            inbuf: Vec::with_capacity(1 << 16),
            consumed: 0,
            out,
            last_sent: now,
            last_heard: now,
            next_seq: login.sequence,
            debug: VecDeque::new(),
            login,
        }
    }

    /// Bytes to write to the socket (then cleared).
    pub fn take_output(&mut self, into: &mut Vec<u8>) {
        into.append(&mut self.out);
    }

    /// Whether the server has ended the session.
    pub fn ended(&self) -> bool {
        self.state == State::Ended
    }

    /// Ask the server to end the session (a logout request).
    pub fn logout(&mut self, now: u64) {
        Repr::LogoutRequest.write_to(&mut self.out);
        self.last_sent = now;
    }

    /// Bytes read from the socket at `now`: each whole packet to `on`.
    pub fn handle_input(&mut self, now: u64, data: &[u8], on: &mut dyn FnMut(SoupEvent<'_>)) -> Result<(), SoupError> {
        self.last_heard = now;
        self.inbuf.extend_from_slice(data);
        let mut at = 0;
        while let Some(n) = soupbintcp::packet_len(&self.inbuf[at..]) {
            let offset = self.consumed + at as u64;
            let p = &self.inbuf[at..at + n];
            at += n;
            let r = Repr::parse(p).map_err(|error| SoupError::Malformed { offset, error })?;
            match (self.state, r) {
                (_, Repr::Debug(t)) => self.debug.push_back(String::from_utf8_lossy(t).into_owned()),
                (_, Repr::ServerHeartbeat) => {}
                (State::LoggingIn, Repr::LoginAccepted { session, sequence }) => {
                    self.state = State::LoggedIn;
                    self.next_seq = sequence;
                    on(SoupEvent::LoginAccepted { session, sequence });
                }
                (State::LoggingIn, Repr::LoginRejected { reason }) => return Err(SoupError::LoginRejected { reason }),
                (State::LoggedIn, Repr::SequencedData(m)) => {
                    on(SoupEvent::Message { sequence: self.next_seq, data: m });
                    self.next_seq += 1;
                }
                (State::LoggedIn, Repr::EndOfSession) => {
                    self.state = State::Ended;
                    on(SoupEvent::EndOfSession);
                }
                (State::Ended, _) => {}
                (_, other) => {
                    let _ = other;
                    return Err(SoupError::NotLoggedIn { offset });
                }
            }
        }
        self.inbuf.drain(..at);
        self.consumed += at as u64;
        Ok(())
    }

    /// The socket reached its end at `now`.
    pub fn handle_close(&mut self) -> Result<(), SoupError> {
        match self.state {
            State::Ended => Ok(()),
            State::LoggingIn => Err(SoupError::Closed { what: "before it answered the login" }),
            State::LoggedIn => Err(SoupError::Closed { what: "in the middle of the session" }),
        }
    }

    /// Time passes: a heartbeat when due; an error when the server has been silent too long.
    pub fn handle_timeout(&mut self, now: u64) -> Result<(), SoupError> {
        let silent = now.saturating_sub(self.last_heard);
        if silent >= self.login.silence_ns && self.state != State::Ended {
            return Err(SoupError::Silent { ns: silent });
        }
        if self.state == State::LoggedIn && now.saturating_sub(self.last_sent) >= self.login.heartbeat_ns {
            Repr::ClientHeartbeat.write_to(&mut self.out);
            self.last_sent = now;
        }
        Ok(())
    }

    /// When [`SoupClient::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> u64 {
        let hb = if self.state == State::LoggedIn { self.last_sent + self.login.heartbeat_ns } else { u64::MAX };
        hb.min(self.last_heard + self.login.silence_ns)
    }
}

/// GLIMPSE's End of Snapshot message type.
pub const END_OF_SNAPSHOT: u8 = b'M';
/// Its length: the type and 20 ASCII digits.
pub const END_OF_SNAPSHOT_LEN: usize = 21;

/// An End of Snapshot message for `seq`.
pub fn end_of_snapshot(seq: u64) -> [u8; END_OF_SNAPSHOT_LEN] {
    let mut m = [b' '; END_OF_SNAPSHOT_LEN];
    m[0] = END_OF_SNAPSHOT;
    let s = seq.to_string();
    m[END_OF_SNAPSHOT_LEN - s.len()..].copy_from_slice(s.as_bytes());
    m
}

/// A whole snapshot: the ITCH messages, in order, and the sequence number the live feed
/// continues from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The messages, in order.
    pub messages: Packed,
    pub next_seq: u64,
}

/// Why a GLIMPSE snapshot could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlimpseError {
    Session(SoupError),
    /// An End of Snapshot message that is not type and 20 digits.
    BadEndOfSnapshot {
        sequence: u64,
    },
    /// The session ended before the End of Snapshot.
    EndedEarly {
        messages: u64,
    },
}

impl std::fmt::Display for GlimpseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GlimpseError::Session(e) => write!(f, "GLIMPSE: {e}"),
            GlimpseError::BadEndOfSnapshot { sequence } => {
                write!(f, "GLIMPSE: message {sequence}: an End of Snapshot (M) without 20 ASCII digits")
            }
            GlimpseError::EndedEarly { messages } => {
                write!(f, "GLIMPSE: the session ended after {messages} messages, before the End of Snapshot")
            }
        }
    }
}

impl std::error::Error for GlimpseError {}

impl From<SoupError> for GlimpseError {
    fn from(e: SoupError) -> Self {
        GlimpseError::Session(e)
    }
}

/// A GLIMPSE snapshot being read (see the module doc).
#[derive(Debug, Default)]
pub struct Glimpse {
    snap: Snapshot,
    done: bool,
    error: Option<GlimpseError>,
}

impl Glimpse {
    pub fn new() -> Glimpse {
        Glimpse::default()
    }

    /// What the session gave.
    pub fn on_event(&mut self, e: SoupEvent<'_>) {
        if self.done || self.error.is_some() {
            return;
        }
        match e {
            SoupEvent::LoginAccepted { .. } => {}
            SoupEvent::Message { sequence, data } => {
                if data.first() == Some(&END_OF_SNAPSHOT) {
                    match end_of_snapshot_seq(data) {
                        Some(s) => {
                            self.snap.next_seq = s;
                            self.done = true;
                        }
                        None => self.error = Some(GlimpseError::BadEndOfSnapshot { sequence }),
                    }
                    return;
                }
                self.snap.messages.push(data);
            }
            SoupEvent::EndOfSession => {
                self.error = Some(GlimpseError::EndedEarly { messages: self.snap.messages.len() as u64 });
            }
        }
    }

    /// The snapshot, once its End of Snapshot arrived; the error, if one came first.
    pub fn result(&mut self) -> Option<Result<Snapshot, GlimpseError>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        self.done.then(|| Ok(std::mem::take(&mut self.snap)))
    }

    /// Messages so far.
    pub fn messages(&self) -> usize {
        self.snap.messages.len()
    }
}

fn end_of_snapshot_seq(m: &[u8]) -> Option<u64> {
    if m.len() != END_OF_SNAPSHOT_LEN {
        return None;
    }
    let t = m[1..].iter().position(|&c| c != b' ').map(|i| &m[1 + i..])?;
    if t.is_empty() || t.len() > 19 || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(t.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_bytes(packets: &[Repr<'_>]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in packets {
            p.write_to(&mut v);
        }
        v
    }

    #[test]
    fn a_snapshot_read_in_pieces() {
        let login = SoupLogin { username: "u".into(), password: "p".into(), ..Default::default() };
        let mut c = SoupClient::new(login, 0);
        let mut out = Vec::new();
        c.take_output(&mut out);
        assert_eq!(
            Repr::parse(&out).unwrap(),
            Repr::LoginRequest {
                username: soupbintcp::alpha("u"),
                password: soupbintcp::alpha("p"),
                session: *b"          ",
                sequence: 1,
            }
        );
        let eos = end_of_snapshot(4242);
        let bytes = server_bytes(&[
            Repr::LoginAccepted { session: *b"0000000007", sequence: 1 },
            Repr::SequencedData(b"Rdirectory"),
            Repr::ServerHeartbeat,
            Repr::SequencedData(b"Aorder"),
            Repr::SequencedData(&eos),
        ]);
        let mut g = Glimpse::new();
        // One byte at a time: packets cut anywhere come out whole.
        for (i, b) in bytes.iter().enumerate() {
            c.handle_input(i as u64, std::slice::from_ref(b), &mut |e| g.on_event(e)).unwrap();
        }
        let s = g.result().unwrap().unwrap();
        assert_eq!(s.next_seq, 4242);
        assert_eq!(s.messages.iter().collect::<Vec<_>>(), [&b"Rdirectory"[..], b"Aorder"]);
        // Heartbeats once logged in; silence fails.
        c.handle_timeout(bytes.len() as u64 + 1_000_000_000).unwrap();
        c.take_output(&mut out);
        assert!(out.ends_with(b"\x00\x01R"));
        let last = bytes.len() as u64 - 1;
        assert_eq!(c.handle_timeout(20_000_000_000), Err(SoupError::Silent { ns: 20_000_000_000 - last }));
    }

    #[test]
    fn failures_say_what_went_wrong() {
        let mut c = SoupClient::new(SoupLogin::default(), 0);
        let rej = server_bytes(&[Repr::LoginRejected { reason: b'A' }]);
        let e = c.handle_input(0, &rej, &mut |_| {}).unwrap_err();
        assert_eq!(e, SoupError::LoginRejected { reason: b'A' });
        assert!(e.to_string().contains("not authorized"));
        let mut c = SoupClient::new(SoupLogin::default(), 0);
        let half = server_bytes(&[
            Repr::LoginAccepted { session: *b"0000000007", sequence: 1 },
            Repr::SequencedData(b"Aorder"),
        ]);
        let mut g = Glimpse::new();
        c.handle_input(0, &half, &mut |e| g.on_event(e)).unwrap();
        assert!(g.result().is_none(), "no snapshot before its end");
        assert!(c.handle_close().unwrap_err().to_string().contains("middle of the session"));
        let mut c = SoupClient::new(SoupLogin::default(), 0);
        let early = server_bytes(&[Repr::SequencedData(b"x")]);
        assert_eq!(c.handle_input(0, &early, &mut |_| {}), Err(SoupError::NotLoggedIn { offset: 0 }));
        let mut g = Glimpse::new();
        g.on_event(SoupEvent::Message { sequence: 3, data: b"M12" });
        assert_eq!(g.result(), Some(Err(GlimpseError::BadEndOfSnapshot { sequence: 3 })));
    }
}

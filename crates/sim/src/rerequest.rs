//! A MoldUDP64 re-request server (the exchange's retransmission server), sans-IO: it holds
//! every message of a feed, by sequence number, and answers a request (a MoldUDP64 header:
//! session, first sequence number, count) with ordinary MoldUDP64 packets carrying those
//! messages. `tickplant sim rerequest-server` puts it on a UDP socket.
//!
//! Faults, each deterministic for its seed, for tests of the client:
//! * `drop_share`: a share of requests is not answered at all;
//! * `refuse_share`: a share of the sequence numbers is never sent (the server "does not
//!   have" them; which ones is a hash of the sequence number and the seed, so every
//!   request for one is refused alike);
//! * `max_answer`: at most this many messages are sent for one request (the client must ask
//!   again for the rest).

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::moldudp64::{self, Repr};

/// Fault settings (none by default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerFaults {
    pub seed: u64,
    pub drop_share: f64,
    pub refuse_share: f64,
    /// 0: no limit but the request's count.
    pub max_answer: u16,
}

impl Default for ServerFaults {
    fn default() -> Self {
        ServerFaults { seed: 1, drop_share: 0.0, refuse_share: 0.0, max_answer: 0 }
    }
}

/// What the server did, for its report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerStats {
    /// Datagrams received.
    pub datagrams: u64,
    /// Well-formed requests for this server's session.
    pub requests: u64,
    /// Requests not answered (`drop_share`).
    pub dropped: u64,
    /// Datagrams that are not a request (with the first such error).
    pub malformed: u64,
    /// Requests for another session.
    pub wrong_session: u64,
    /// Messages asked for, sent, and withheld (`refuse_share`, `max_answer`, or past the
    /// end of the feed).
    pub messages_asked: u64,
    pub messages_sent: u64,
    pub messages_withheld: u64,
    pub packets_sent: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// The server: every message of one session, in order from `first_seq`.
#[derive(Debug)]
pub struct RerequestServer {
    session: Option<[u8; 10]>,
    msgs: crate::glimpse::FeedMessages,
    faults: ServerFaults,
    rng: Xoshiro256PlusPlus,
    /// Largest UDP payload of an answer.
    max_payload: usize,
    stats: ServerStats,
    /// Sequence numbers asked for and refused (`refuse_share`), for the test's oracle.
    refused: BTreeSet<u64>,
}

/// A packet's messages past what the server holds extend it; earlier or repeated ones do
/// not (a capture of A and B, or a feed with repeats, loads once).
impl RerequestServer {
    pub fn new(faults: ServerFaults) -> RerequestServer {
        RerequestServer {
            session: None,
            msgs: crate::glimpse::FeedMessages::default(),
            rng: Xoshiro256PlusPlus::seed_from_u64(faults.seed),
            faults,
            max_payload: 1400,
            stats: ServerStats::default(),
            refused: BTreeSet::new(),
        }
    }

    /// Take a MoldUDP64 data packet of the feed (its UDP payload). Packets of a session
    /// other than the first one's, and messages not next in order, are left out; the
    /// return value says how many messages were taken.
    pub fn load_packet(&mut self, payload: &[u8]) -> Result<usize, tickplant_wire::Error> {
        let p = moldudp64::Packet::new_checked(payload)?;
        if p.is_heartbeat() || p.is_end_of_session() {
            return Ok(0);
        }
        match self.session {
            None => self.session = Some(p.session()),
            Some(s) if s != p.session() => return Ok(0),
            Some(_) => {}
        }
        self.msgs.load_packet(payload)
    }

    /// The session it serves (that of the first packet loaded).
    pub fn session(&self) -> Option<[u8; 10]> {
        self.session
    }
    /// The first message it holds.
    pub fn first_seq(&self) -> u64 {
        self.msgs.first_seq()
    }
    /// One past the last message it holds.
    pub fn next_seq(&self) -> u64 {
        self.msgs.next_seq()
    }

    /// Whether the server withholds `seq` always (`refuse_share`).
    pub fn refuses(&self, seq: u64) -> bool {
        if self.faults.refuse_share <= 0.0 {
            return false;
        }
        // splitmix64 of the sequence number and the seed: the same answer every time.
        let mut z = seq ^ self.faults.seed.rotate_left(32);
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) < self.faults.refuse_share
    }

    /// Answer one datagram: the packets to send back (UDP payloads), in order.
    pub fn answer(&mut self, datagram: &[u8]) -> Vec<Vec<u8>> {
        self.stats.datagrams += 1;
        let req = match Repr::parse_request(datagram) {
            Ok(r) => r,
            Err(e) => {
                self.stats.malformed += 1;
                self.stats.first_error.get_or_insert_with(|| e.to_string());
                return Vec::new();
            }
        };
        if Some(req.session) != self.session {
            self.stats.wrong_session += 1;
            return Vec::new();
        }
        self.stats.requests += 1;
        let asked = u64::from(req.message_count);
        self.stats.messages_asked += asked;
        if self.faults.drop_share > 0.0 && self.rng.gen_bool(self.faults.drop_share.min(1.0)) {
            self.stats.dropped += 1;
            self.stats.messages_withheld += asked;
            return Vec::new();
        }
        let limit = if self.faults.max_answer > 0 { asked.min(u64::from(self.faults.max_answer)) } else { asked };
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut cur: Option<Vec<u8>> = None;
        let mut sent = 0u64;
        for seq in req.sequence_number..req.sequence_number + asked {
            let held = self.msgs.get(seq).is_some();
            if !held || sent == limit || self.refuses(seq) {
                if held && sent < limit {
                    self.refused.insert(seq);
                }
                // A packet carries consecutive messages: a withheld one ends it.
                out.extend(cur.take());
                continue;
            }
            let msg = self.msgs.get(seq).expect("held");
            if cur.as_ref().is_some_and(|p| p.len() + 2 + msg.len() > self.max_payload) {
                out.extend(cur.take());
            }
            let p = cur.get_or_insert_with(|| {
                let mut p = Vec::with_capacity(self.max_payload);
                let hdr = Repr { session: req.session, sequence_number: seq, message_count: 0 };
                p.extend_from_slice(&hdr.to_bytes());
                p
            });
            p.extend_from_slice(&(msg.len() as u16).to_be_bytes());
            p.extend_from_slice(msg);
            let n = u16::from_be_bytes([p[18], p[19]]) + 1;
            p[18..20].copy_from_slice(&n.to_be_bytes());
            sent += 1;
        }
        out.extend(cur.take());
        self.stats.messages_sent += sent;
        self.stats.messages_withheld += asked - sent;
        self.stats.packets_sent += out.len() as u64;
        out
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }
    /// The sequence numbers asked for that `refuse_share` withheld.
    pub fn refused(&self) -> &BTreeSet<u64> {
        &self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u64, msgs: &[&[u8]]) -> Vec<u8> {
        let mut p = Repr { session: *b"SESSION001", sequence_number: seq, message_count: msgs.len() as u16 }
            .to_bytes()
            .to_vec();
        for m in msgs {
            p.extend_from_slice(&(m.len() as u16).to_be_bytes());
            p.extend_from_slice(m);
        }
        p
    }

    fn request(seq: u64, n: u16) -> [u8; 20] {
        Repr { session: *b"SESSION001", sequence_number: seq, message_count: n }.to_bytes()
    }

    fn server(faults: ServerFaults) -> RerequestServer {
        let mut s = RerequestServer::new(faults);
        assert_eq!(s.load_packet(&packet(10, &[b"a", b"bb"])).unwrap(), 2);
        assert_eq!(s.load_packet(&packet(11, &[b"bb", b"ccc"])).unwrap(), 1, "a repeat is taken once");
        assert_eq!(s.load_packet(&packet(13, &[b"dddd", b"e"])).unwrap(), 2);
        s
    }

    #[test]
    fn answers_are_the_messages_asked_for() {
        let mut s = server(ServerFaults::default());
        assert_eq!(s.next_seq(), 15);
        assert_eq!(s.answer(&request(11, 3)), vec![packet(11, &[b"bb", b"ccc", b"dddd"])]);
        // Past the end: what it has.
        assert_eq!(s.answer(&request(14, 5)), vec![packet(14, &[b"e"])]);
        assert_eq!(s.stats().messages_withheld, 4);
        // Another session, a data packet: nothing.
        let mut other = request(11, 1);
        other[0] = b'X';
        assert!(s.answer(&other).is_empty());
        assert!(s.answer(&packet(10, &[b"a"])).is_empty());
        assert_eq!((s.stats().wrong_session, s.stats().malformed), (1, 1));
    }

    #[test]
    fn faults_withhold_what_they_say() {
        let mut s = server(ServerFaults { max_answer: 2, ..Default::default() });
        assert_eq!(s.answer(&request(10, 5)), vec![packet(10, &[b"a", b"bb"])]);
        let mut s = server(ServerFaults { drop_share: 1.0, ..Default::default() });
        assert!(s.answer(&request(10, 5)).is_empty());
        assert_eq!(s.stats().dropped, 1);
        let f = ServerFaults { refuse_share: 0.5, seed: 7, ..Default::default() };
        let mut s = server(f);
        let got = s.answer(&request(10, 5));
        let mut sent = BTreeSet::new();
        for p in &got {
            let h = moldudp64::Packet::new_checked(&p[..]).unwrap();
            sent.extend(h.sequence_number()..h.sequence_number() + u64::from(h.message_count()));
        }
        let refused: BTreeSet<u64> = (10..15).filter(|&q| s.refuses(q)).collect();
        assert_eq!(s.refused(), &refused);
        assert_eq!(sent, (10..15).filter(|q| !refused.contains(q)).collect());
        // The same every time.
        assert_eq!(s.answer(&request(10, 5)), got);
    }
}

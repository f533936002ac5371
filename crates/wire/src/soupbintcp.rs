//! NASDAQ SoupBinTCP 3.0 packets: the framing of GLIMPSE (and of ITCH or OUCH over TCP).
//!
//! A packet is `[u16 BE length][type][payload]`, the length counting the type byte and the
//! payload. Over TCP packets run back to back and a read may end anywhere:
//! [`packet_len`] says whether a buffer starts with a whole packet.
//!
//! | type | from | payload |
//! |---|---|---|
//! | `+` debug | either | text |
//! | `A` login accepted | server | session (10, alpha, space padded on the left), sequence number (20, ASCII digits, space padded on the left) |
//! | `J` login rejected | server | reason (1): `A` not authorized, `S` session not available |
//! | `S` sequenced data | server | one message of the higher protocol |
//! | `H` server heartbeat | server | none |
//! | `Z` end of session | server | none |
//! | `L` login request | client | username (6), password (10) (alpha, space padded on the right), requested session (10, blank: the current one), requested sequence number (20, ASCII digits, space padded on the left) |
//! | `U` unsequenced data | client | one message |
//! | `R` client heartbeat | client | none |
//! | `O` logout request | client | none |
//!
//! `Repr::parse` takes one whole packet (as [`packet_len`] delimits it) and checks that
//! the payload has its type's length; it never panics on any input.

use crate::{Error, Result};

mod field {
    use core::ops::Range;
    pub const LENGTH: Range<usize> = 0..2;
    pub const TYPE: usize = 2;
    pub const PAYLOAD: usize = 3;
    // Login request.
    pub const USERNAME: Range<usize> = 3..9;
    pub const PASSWORD: Range<usize> = 9..19;
    pub const REQ_SESSION: Range<usize> = 19..29;
    pub const REQ_SEQUENCE: Range<usize> = 29..49;
    // Login accepted.
    pub const SESSION: Range<usize> = 3..13;
    pub const SEQUENCE: Range<usize> = 13..33;
}

/// Bytes before a packet's payload: the length and the type.
pub const HEADER_LEN: usize = field::PAYLOAD;
/// The length of a login request packet.
pub const LOGIN_REQUEST_LEN: usize = field::REQ_SEQUENCE.end;
/// The length of a login accepted packet.
pub const LOGIN_ACCEPTED_LEN: usize = field::SEQUENCE.end;

/// A packet, read or to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repr<'a> {
    Debug(&'a [u8]),
    LoginAccepted { session: [u8; 10], sequence: u64 },
    LoginRejected { reason: u8 },
    SequencedData(&'a [u8]),
    ServerHeartbeat,
    EndOfSession,
    LoginRequest { username: [u8; 6], password: [u8; 10], session: [u8; 10], sequence: u64 },
    UnsequencedData(&'a [u8]),
    ClientHeartbeat,
    LogoutRequest,
}

/// Whether `buf` starts with a whole packet: `Some(n)`, its length with the length field;
/// `None`, more bytes are needed.
pub fn packet_len(buf: &[u8]) -> Option<usize> {
    let &[hi, lo] = buf.get(field::LENGTH)? else { return None };
    let n = 2 + usize::from(u16::from_be_bytes([hi, lo]));
    (buf.len() >= n).then_some(n)
}

/// A right-aligned, space-padded field of ASCII digits.
fn digits(b: &[u8], at: usize) -> Result<u64> {
    let t = b.iter().position(|&c| c != b' ').map_or(&b[b.len()..], |i| &b[i..]);
    if t.is_empty() || t.len() > 19 || !t.iter().all(u8::is_ascii_digit) {
        return Err(Error::Malformed { what: "soupbintcp sequence number (ASCII digits)", offset: at, value: 0 });
    }
    Ok(t.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')))
}

fn put_digits(out: &mut [u8], v: u64) {
    out.fill(b' ');
    let s = v.to_string();
    let n = out.len();
    out[n - s.len()..].copy_from_slice(s.as_bytes());
}

impl<'a> Repr<'a> {
    /// One whole packet (length field included).
    pub fn parse(p: &'a [u8]) -> Result<Repr<'a>> {
        crate::error::check("soupbintcp packet header", p, 0, HEADER_LEN)?;
        let n = 2 + usize::from(u16::from_be_bytes([p[0], p[1]]));
        if n != p.len() || n < HEADER_LEN {
            return Err(Error::Malformed { what: "soupbintcp packet length", offset: 0, value: n as u64 });
        }
        let t = p[field::TYPE];
        let payload = &p[field::PAYLOAD..];
        let exact = |len: usize, what: &'static str| {
            if p.len() == len {
                Ok(())
            } else {
                Err(Error::Malformed { what, offset: 0, value: p.len() as u64 })
            }
        };
        Ok(match t {
            b'+' => Repr::Debug(payload),
            b'A' => {
                exact(LOGIN_ACCEPTED_LEN, "soupbintcp login accepted length")?;
                let mut session = [0u8; 10];
                session.copy_from_slice(&p[field::SESSION]);
                Repr::LoginAccepted { session, sequence: digits(&p[field::SEQUENCE], field::SEQUENCE.start)? }
            }
            b'J' => {
                exact(HEADER_LEN + 1, "soupbintcp login rejected length")?;
                Repr::LoginRejected { reason: payload[0] }
            }
            b'S' => Repr::SequencedData(payload),
            b'H' => {
                exact(HEADER_LEN, "soupbintcp server heartbeat length")?;
                Repr::ServerHeartbeat
            }
            b'Z' => {
                exact(HEADER_LEN, "soupbintcp end of session length")?;
                Repr::EndOfSession
            }
            b'L' => {
                exact(LOGIN_REQUEST_LEN, "soupbintcp login request length")?;
                let (mut username, mut password, mut session) = ([0u8; 6], [0u8; 10], [0u8; 10]);
                username.copy_from_slice(&p[field::USERNAME]);
                password.copy_from_slice(&p[field::PASSWORD]);
                session.copy_from_slice(&p[field::REQ_SESSION]);
                let sequence = digits(&p[field::REQ_SEQUENCE], field::REQ_SEQUENCE.start)?;
                Repr::LoginRequest { username, password, session, sequence }
            }
            b'U' => Repr::UnsequencedData(payload),
            b'R' => {
                exact(HEADER_LEN, "soupbintcp client heartbeat length")?;
                Repr::ClientHeartbeat
            }
            b'O' => {
                exact(HEADER_LEN, "soupbintcp logout request length")?;
                Repr::LogoutRequest
            }
            other => {
                return Err(Error::Malformed {
                    what: "soupbintcp packet type",
                    offset: field::TYPE,
                    value: u64::from(other),
                })
            }
        })
    }

    fn type_and_payload_len(&self) -> (u8, usize) {
        match self {
            Repr::Debug(t) => (b'+', t.len()),
            Repr::LoginAccepted { .. } => (b'A', LOGIN_ACCEPTED_LEN - HEADER_LEN),
            Repr::LoginRejected { .. } => (b'J', 1),
            Repr::SequencedData(m) => (b'S', m.len()),
            Repr::ServerHeartbeat => (b'H', 0),
            Repr::EndOfSession => (b'Z', 0),
            Repr::LoginRequest { .. } => (b'L', LOGIN_REQUEST_LEN - HEADER_LEN),
            Repr::UnsequencedData(m) => (b'U', m.len()),
            Repr::ClientHeartbeat => (b'R', 0),
            Repr::LogoutRequest => (b'O', 0),
        }
    }

    /// The packet's whole length, length field included.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.type_and_payload_len().1
    }

    /// Write the packet into `buf[..buffer_len()]`. A payload longer than a packet can
    /// carry (65,534 bytes) is the caller's error: it panics.
    pub fn emit(&self, buf: &mut [u8]) {
        let (t, len) = self.type_and_payload_len();
        let n = u16::try_from(len + 1).expect("a SoupBinTCP payload of at most 65,534 bytes");
        buf[field::LENGTH].copy_from_slice(&n.to_be_bytes());
        buf[field::TYPE] = t;
        match self {
            Repr::Debug(d) | Repr::SequencedData(d) | Repr::UnsequencedData(d) => {
                buf[HEADER_LEN..HEADER_LEN + d.len()].copy_from_slice(d)
            }
            Repr::LoginAccepted { session, sequence } => {
                buf[field::SESSION].copy_from_slice(session);
                put_digits(&mut buf[field::SEQUENCE], *sequence);
            }
            Repr::LoginRejected { reason } => buf[HEADER_LEN] = *reason,
            Repr::LoginRequest { username, password, session, sequence } => {
                buf[field::USERNAME].copy_from_slice(username);
                buf[field::PASSWORD].copy_from_slice(password);
                buf[field::REQ_SESSION].copy_from_slice(session);
                put_digits(&mut buf[field::REQ_SEQUENCE], *sequence);
            }
            Repr::ServerHeartbeat | Repr::EndOfSession | Repr::ClientHeartbeat | Repr::LogoutRequest => {}
        }
    }

    /// Append the packet to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.resize(at + self.buffer_len(), 0);
        self.emit(&mut out[at..]);
    }
}

/// A text field padded with spaces on the right to `N` bytes (user names, passwords);
/// longer text is cut.
pub fn alpha<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [b' '; N];
    let b = text.as_bytes();
    let n = b.len().min(N);
    out[..n].copy_from_slice(&b[..n]);
    out
}

/// A text field padded with spaces on the left to `N` bytes (sessions).
pub fn alpha_right<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [b' '; N];
    let b = text.as_bytes();
    let n = b.len().min(N);
    out[N - n..].copy_from_slice(&b[..n]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login() -> Repr<'static> {
        Repr::LoginRequest {
            username: alpha("user1"),
            password: alpha("secret"),
            session: alpha_right(""),
            sequence: 1,
        }
    }

    #[test]
    fn test_emit() {
        let r = login();
        let mut buf = [0xa5u8; LOGIN_REQUEST_LEN];
        r.emit(&mut buf);
        assert_eq!(&buf[..3], &[0, 47, b'L']);
        assert_eq!(&buf[3..9], b"user1 ");
        assert_eq!(&buf[9..19], b"secret    ");
        assert_eq!(&buf[19..29], b"          ");
        assert_eq!(&buf[29..49], b"                   1");
        let mut v = Vec::new();
        Repr::SequencedData(b"xyz").write_to(&mut v);
        assert_eq!(v, b"\x00\x04Sxyz");
    }

    #[test]
    fn test_parse() {
        let mut v = Vec::new();
        for r in [
            login(),
            Repr::LoginAccepted { session: *b"0000000001", sequence: 123_456 },
            Repr::LoginRejected { reason: b'A' },
            Repr::SequencedData(b"message"),
            Repr::ServerHeartbeat,
            Repr::EndOfSession,
            Repr::UnsequencedData(b""),
            Repr::ClientHeartbeat,
            Repr::LogoutRequest,
            Repr::Debug(b"hello"),
        ] {
            let at = v.len();
            r.write_to(&mut v);
            let n = packet_len(&v[at..]).unwrap();
            assert_eq!(n, r.buffer_len());
            assert_eq!(Repr::parse(&v[at..at + n]).unwrap(), r);
        }
    }

    #[test]
    fn test_partial_and_malformed() {
        let mut v = Vec::new();
        Repr::SequencedData(b"abcdef").write_to(&mut v);
        for cut in 0..v.len() {
            assert_eq!(packet_len(&v[..cut]), None, "{cut} bytes are not a packet");
        }
        // A heartbeat with a payload, an unknown type, a bad sequence number.
        assert!(Repr::parse(b"\x00\x02Hx").is_err());
        assert!(Repr::parse(b"\x00\x01Q").is_err());
        let mut a = Vec::new();
        Repr::LoginAccepted { session: *b"0000000001", sequence: 7 }.write_to(&mut a);
        a[20] = b'x';
        assert!(Repr::parse(&a).is_err());
        assert!(Repr::parse(b"\x00").is_err());
        assert!(Repr::parse(b"\x00\x05Sab").is_err(), "length past the buffer");
    }
}

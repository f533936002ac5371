//! Builders of whole frames, for simulators and tests.

use crate::{ethernet, ipv4, moldudp64, udp};

/// Addresses of a UDP flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub src_mac: [u8; 6],
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            src_ip: [10, 0, 0, 1],
            dst_ip: [233, 54, 12, 111],
            src_port: 50000,
            dst_port: 26400,
        }
    }
}

impl Flow {
    /// The multicast MAC address of the destination group (01:00:5e + low 23 bits).
    pub fn dst_mac(&self) -> [u8; 6] {
        let d = self.dst_ip;
        [0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]]
    }
}

/// An Ethernet II / IPv4 / UDP frame (UDP checksum filled) carrying `payload`.
pub fn udp_frame(flow: &Flow, ident: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + payload.len()];
    write_udp_frame(flow, ident, payload, &mut f);
    f
}

/// Like [`udp_frame`], into `out` (resized to fit).
pub fn write_udp_frame(flow: &Flow, ident: u16, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.resize(UDP_HEADERS_LEN + payload.len(), 0);
    write_udp_headers(flow, ident, payload.len(), out);
    out[UDP_HEADERS_LEN..].copy_from_slice(payload);
    let (eh, ih) = (ethernet::HEADER_LEN, ipv4::HEADER_LEN);
    udp::Packet::new_unchecked(&mut out[eh + ih..]).fill_checksum(flow.src_ip, flow.dst_ip);
}

/// The bytes of the Ethernet II, IPv4 and UDP headers before a payload.
pub const UDP_HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// The Ethernet II, IPv4 and UDP headers of a frame carrying `payload_len` bytes, into the
/// first [`UDP_HEADERS_LEN`] bytes of `out`, with no UDP checksum (zero: none, which IPv4
/// allows). A live source puts them before each datagram it receives, so that what
/// follows reads a received datagram as it reads a captured frame.
pub fn write_udp_headers(flow: &Flow, ident: u16, payload_len: usize, out: &mut [u8]) {
    let (eh, ih, uh) = (ethernet::HEADER_LEN, ipv4::HEADER_LEN, udp::HEADER_LEN);
    ethernet::Repr::new(flow.dst_mac(), flow.src_mac, None, ethernet::ethertype::IPV4).emit(out);
    ipv4::Repr {
        src_addr: flow.src_ip,
        dst_addr: flow.dst_ip,
        protocol: ipv4::protocol::UDP,
        payload_len: uh + payload_len,
        ttl: 64,
        ident,
        dscp_ecn: 0,
        dont_frag: true,
    }
    .emit(&mut out[eh..]);
    udp::Repr { src_port: flow.src_port, dst_port: flow.dst_port, payload_len }.emit(&mut out[eh + ih..]);
}

/// A MoldUDP64 payload: header and message blocks.
pub fn moldudp64_payload(session: &[u8; 10], seq: u64, messages: &[&[u8]]) -> Vec<u8> {
    let mut p = vec![0u8; moldudp64::HEADER_LEN];
    moldudp64::Repr { session: *session, sequence_number: seq, message_count: messages.len() as u16 }.emit(&mut p);
    for m in messages {
        moldudp64::push_message(&mut p, m);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_udp_frame_parses() {
        let flow = Flow::default();
        let payload = moldudp64_payload(b"SESSION001", 7, &[b"AB", b"C"]);
        let f = udp_frame(&flow, 1, &payload);
        let eth = ethernet::Frame::new_checked(&f[..]).unwrap();
        assert_eq!(eth.dst_addr(), [1, 0, 0x5e, 54, 12, 111]);
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        assert!(ip.verify_checksum());
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert!(u.verify_checksum(flow.src_ip, flow.dst_ip));
        let m = moldudp64::Packet::new_checked(u.payload()).unwrap();
        assert_eq!((m.sequence_number(), m.message_count()), (7, 2));
    }
}

//! A MoldUDP64 feed of valid ITCH 5.0 messages.
//!
//! The message mix is deliberately small (system event, add order, order executed, order
//! delete, with executions and deletes naming live orders); realistic ITCH days come with
//! the ITCH simulator.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::build::{write_udp_frame, Flow};
use tickplant_wire::moldudp64;

/// Generator settings.
#[derive(Debug, Clone)]
pub struct MoldGenConfig {
    pub seed: u64,
    pub packets: u64,
    /// Messages per packet are drawn from 1..=this.
    pub max_msgs_per_packet: u16,
    pub session: [u8; 10],
    pub first_seq: u64,
    /// Capture time of the first packet (ns since the epoch).
    pub start_ns: u64,
    /// Mean spacing between packets (ns); actual spacing is drawn from 0.5x..1.5x.
    pub spacing_ns: u64,
    pub flow: Flow,
}

impl Default for MoldGenConfig {
    fn default() -> Self {
        MoldGenConfig {
            seed: 1,
            packets: 10_000,
            max_msgs_per_packet: 4,
            session: *b"0000000001",
            first_seq: 1,
            start_ns: 1_700_000_000_000_000_000,
            spacing_ns: 2_000,
            flow: Flow::default(),
        }
    }
}

const STOCKS: [&[u8; 8]; 4] = [b"AAPL    ", b"MSFT    ", b"NVDA    ", b"SPY     "];

struct ItchState {
    rng: Xoshiro256PlusPlus,
    live: Vec<(u64, u16)>,
    next_ref: u64,
    next_match: u64,
    ts: u64,
}

impl ItchState {
    fn header(&self, out: &mut Vec<u8>, t: u8, locate: u16) {
        out.push(t);
        out.extend_from_slice(&locate.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.ts.to_be_bytes()[2..]);
    }

    /// One ITCH message into `out` (cleared first).
    fn message(&mut self, out: &mut Vec<u8>) {
        out.clear();
        self.ts += self.rng.gen_range(1..1000);
        let roll: u32 = self.rng.gen_range(0..100);
        if self.live.is_empty() || roll < 50 {
            let locate = self.rng.gen_range(1..=STOCKS.len() as u16);
            let r = self.next_ref;
            self.next_ref += 1;
            self.header(out, b'A', locate);
            out.extend_from_slice(&r.to_be_bytes());
            out.push(if self.rng.gen::<bool>() { b'B' } else { b'S' });
            out.extend_from_slice(&(self.rng.gen_range(1..50u32) * 100).to_be_bytes());
            out.extend_from_slice(STOCKS[usize::from(locate) - 1]);
            out.extend_from_slice(&(self.rng.gen_range(1_000..5_000u32) * 100).to_be_bytes());
            self.live.push((r, locate));
            debug_assert_eq!(out.len(), 36);
        } else {
            let i = self.rng.gen_range(0..self.live.len());
            let (r, locate) = self.live.swap_remove(i);
            if roll < 70 {
                self.header(out, b'E', locate);
                out.extend_from_slice(&r.to_be_bytes());
                out.extend_from_slice(&100u32.to_be_bytes());
                out.extend_from_slice(&self.next_match.to_be_bytes());
                self.next_match += 1;
                debug_assert_eq!(out.len(), 31);
            } else {
                self.header(out, b'D', locate);
                out.extend_from_slice(&r.to_be_bytes());
                debug_assert_eq!(out.len(), 19);
            }
        }
    }
}

/// Generate the feed, calling `emit(timestamp_ns, frame)` for each packet in order.
pub fn generate_moldudp64(cfg: &MoldGenConfig, mut emit: impl FnMut(u64, &[u8])) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut itch = ItchState {
        rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15),
        live: Vec::new(),
        next_ref: 1,
        next_match: 1,
        ts: 34_200_000_000_000,
    };
    let max = cfg.max_msgs_per_packet.max(1);
    let (mut payload, mut msg, mut frame) =
        (Vec::with_capacity(1500), Vec::with_capacity(64), Vec::with_capacity(1600));
    let mut seq = cfg.first_seq;
    let mut ts = cfg.start_ns;
    for p in 0..cfg.packets {
        let n = rng.gen_range(1..=max);
        payload.clear();
        payload.resize(moldudp64::HEADER_LEN, 0);
        moldudp64::Repr { session: cfg.session, sequence_number: seq, message_count: n }.emit(&mut payload);
        for k in 0..n {
            if p == 0 && k == 0 {
                // Start of messages.
                msg.clear();
                itch.header(&mut msg, b'S', 0);
                msg.push(b'O');
            } else {
                itch.message(&mut msg);
            }
            moldudp64::push_message(&mut payload, &msg);
        }
        write_udp_frame(&cfg.flow, p as u16, &payload, &mut frame);
        emit(ts, &frame);
        seq += u64::from(n);
        let half = cfg.spacing_ns / 2;
        ts += half + rng.gen_range(0..=cfg.spacing_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_core::{LinkType, Protocol, Sequencer, SequencerConfig};

    #[test]
    fn packets_are_contiguous_valid_moldudp64() {
        let cfg = MoldGenConfig { packets: 200, max_msgs_per_packet: 5, ..Default::default() };
        let s = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
        let mut next = 1;
        let mut last_ts = 0;
        let mut kinds = std::collections::BTreeMap::new();
        generate_moldudp64(&cfg, |ts, f| {
            assert!(ts > last_ts);
            last_ts = ts;
            let i = s.classify(LinkType::Ethernet, f).unwrap();
            assert_eq!(i.seq, next);
            next = i.end();
            let p = moldudp64::Packet::new_checked(&f[42..]).unwrap();
            for m in p.messages() {
                let (_, m) = m.unwrap();
                let want = match m[0] {
                    b'S' => 12,
                    b'A' => 36,
                    b'E' => 31,
                    b'D' => 19,
                    t => panic!("type {t}"),
                };
                assert_eq!(m.len(), want);
                *kinds.entry(m[0]).or_insert(0) += 1;
            }
        });
        assert!(kinds.len() == 4, "{kinds:?}");
    }

    #[test]
    fn deterministic_for_a_seed() {
        let collect = |seed| {
            let mut v = Vec::new();
            generate_moldudp64(&MoldGenConfig { seed, packets: 50, ..Default::default() }, |t, f| {
                v.push((t, f.to_vec()))
            });
            v
        };
        assert_eq!(collect(7), collect(7));
        assert_ne!(collect(7), collect(8));
    }
}

//! Helpers shared by the arbitrator tests.
#![allow(dead_code)]

use tickplant_core::arb::{ArbSink, Released};
use tickplant_core::seq::Other;
use tickplant_core::*;
use tickplant_wire::build::{moldudp64_payload, udp_frame, Flow};

pub const SESSION: &[u8; 10] = b"SESSION001";

/// A MoldUDP64 frame of `count` messages from `seq`; message bodies encode their own
/// sequence number so a trimmed packet can be checked message by message.
pub fn mold(session: &[u8; 10], seq: u64, count: u16) -> Vec<u8> {
    mold_to(&Flow::default(), session, seq, count)
}

/// A MoldUDP64 end-of-session frame (message count 0xFFFF) at `seq`.
pub fn eos(session: &[u8; 10], seq: u64) -> Vec<u8> {
    let mut p = moldudp64_payload(session, seq, &[]);
    p[18..20].copy_from_slice(&tickplant_wire::moldudp64::END_OF_SESSION.to_be_bytes());
    udp_frame(&Flow::default(), 0, &p)
}

/// [`mold`] to another destination.
pub fn mold_to(flow: &Flow, session: &[u8; 10], seq: u64, count: u16) -> Vec<u8> {
    let bodies: Vec<Vec<u8>> = (0..u64::from(count)).map(|i| (seq + i).to_be_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
    udp_frame(flow, 0, &moldudp64_payload(session, seq, &refs))
}

pub fn arb(policy: Policy) -> Arbitrator {
    arb_with(ArbConfig { policy, start_seq: Some(1), ..Default::default() })
}

pub fn arb_with(cfg: ArbConfig) -> Arbitrator {
    Arbitrator::new(cfg, Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap()).unwrap()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub seq: u64,
    pub count: u32,
    pub at: u64,
    pub arrival: u64,
    pub frame: Vec<u8>,
}

#[derive(Debug, Default)]
pub struct Rec {
    /// Why each frame went to *other*, in order.
    pub other_reasons: Vec<OtherReason>,
    pub ll: Vec<Out>,
    pub hr: Vec<Out>,
    pub gaps: Vec<GapReport>,
    pub events: Vec<ArbEvent>,
    pub other: usize,
    /// The sequencer that reads back output frames (MoldUDP64 when `None`).
    pub seq: Option<Sequencer>,
}

impl Rec {
    pub fn with(seq: Sequencer) -> Rec {
        Rec { seq: Some(seq), ..Default::default() }
    }
    fn seq_of(&self, frame: &[u8]) -> (u64, u32) {
        let mold;
        let s = match &self.seq {
            Some(s) => s,
            None => {
                mold = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
                &mold
            }
        };
        let i = s.classify(LinkType::Ethernet, frame).unwrap();
        (i.seq, i.count)
    }
}

impl ArbSink for Rec {
    fn ll(&mut self, r: &Released<'_>) {
        assert_eq!(self.seq_of(r.frame), (r.seq, r.count), "forwarded seq/count match the frame");
        assert_eq!(r.release_ns, r.arrival_ns, "LL never waits");
        self.ll.push(Out {
            seq: r.seq,
            count: r.count,
            at: r.release_ns,
            arrival: r.arrival_ns,
            frame: r.frame.to_vec(),
        });
    }
    fn hr(&mut self, r: &Released<'_>) {
        assert_eq!(self.seq_of(r.frame), (r.seq, r.count), "released seq/count match the frame");
        self.hr.push(Out {
            seq: r.seq,
            count: r.count,
            at: r.release_ns,
            arrival: r.arrival_ns,
            frame: r.frame.to_vec(),
        });
    }
    fn other(&mut self, _: u64, _: usize, _: &[u8], o: &Other) {
        self.other += 1;
        self.other_reasons.push(o.reason);
    }
    fn gap(&mut self, g: &GapReport) {
        self.gaps.push(*g);
    }
    fn event(&mut self, e: &ArbEvent) {
        self.events.push(*e);
    }
}

impl Rec {
    pub fn hr_seqs(&self) -> Vec<u64> {
        self.hr.iter().map(|o| o.seq).collect()
    }
    pub fn ll_seqs(&self) -> Vec<u64> {
        self.ll.iter().map(|o| o.seq).collect()
    }
    pub fn gaps_of(&self, out: OutputId) -> Vec<(u64, u64, GapReason)> {
        self.gaps.iter().filter(|g| g.output == out).map(|g| (g.first_seq, g.last_seq, g.reason)).collect()
    }
}

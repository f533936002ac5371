//! An OPRA FAST v2 feed: option quotes and last sales FAST-encoded in blocks, one block per
//! UDP datagram, with the events they must decode to as ground truth.
//!
//! Each datagram's payload is a 5-byte transport header, `[u32 big-endian sequence number of
//! the block's first message][u8 messages in the block]`, then the OPRA FAST block,
//! `[SOH 0x01]([u8 length][FAST message])*[ETX 0x03]`. The header is what an arbitrator
//! needs (OPRA FAST's own sequence numbers are FAST-encoded inside the messages); read it
//! with a custom sequencer: sequence at offset 0 (4 bytes, big-endian), count at 4 (1 byte),
//! and skip 5 bytes to the block. Every block is encoded from a fresh dictionary, so any
//! block decodes on its own (the pipeline's `reset = "block"`).
//!
//! The templates are `examples/opra-fast.xml` ([`TEMPLATES`]). The first message is a
//! control message (`H`, `START OF DAY`); then about 70% long quotes (`k`), 25% last sales
//! (`a`) and 5% open interest (`d`), over series of `--series` option series (roots `AAA`,
//! `AAB`... each with calls and puts at several strikes), prices in cents (denominator
//! code `B`).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_fast::{Encoder, Entry, Message, Program, TemplateIdPolicy, Value};
use tickplant_wire::build::{write_udp_frame, Flow};

/// The OPRA FAST templates the generator writes with.
pub const TEMPLATES: &str = include_str!("../../../examples/opra-fast.xml");

/// The template XML of the file at `path`, or [`TEMPLATES`] where none is named: what every
/// shell that decodes OPRA FAST takes.
pub fn templates_xml(path: Option<&std::path::Path>) -> std::io::Result<String> {
    match path {
        Some(p) => std::fs::read_to_string(p),
        None => Ok(TEMPLATES.to_string()),
    }
}

/// Bytes before the OPRA FAST block in each datagram.
pub const HEADER_LEN: usize = 5;

/// Settings of both OPRA generators (FAST here, binary in [`crate::opra_binary`]).
#[derive(Debug, Clone)]
pub struct OpraGenConfig {
    pub seed: u64,
    /// Option series quoted and traded.
    pub series: u32,
    /// Messages in all (the opening control message included).
    pub messages: u64,
    /// Messages per block are drawn from 1..=this.
    pub max_per_block: u8,
    pub first_seq: u32,
    /// Capture time of the first datagram (ns since the epoch).
    pub start_ns: u64,
    /// Mean spacing between datagrams (ns).
    pub spacing_ns: u64,
    pub flow: Flow,
}

impl Default for OpraGenConfig {
    fn default() -> Self {
        OpraGenConfig {
            seed: 1,
            series: 100,
            messages: 10_000,
            max_per_block: 8,
            first_seq: 1,
            start_ns: 1_700_000_000_000_000_000,
            spacing_ns: 2_000,
            flow: Flow { dst_port: 45_001, ..Flow::default() },
        }
    }
}

/// One event the feed must decode to, in the pipeline's terms: `action` is `quote`,
/// `trade` or `status`; `side` `bid`, `ask` or `none`; `price` in 1e-9 units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthEvent {
    pub sequence: u64,
    pub category: u8,
    /// Root symbol, trimmed ("" for a status event).
    pub root: String,
    pub action: &'static str,
    pub side: &'static str,
    pub price: i64,
    pub size: u32,
}

/// What a generation produced.
#[derive(Debug, Clone, Default)]
pub struct OpraFastTruth {
    pub events: Vec<TruthEvent>,
    pub blocks: u64,
    pub messages: u64,
    /// Messages by category: quotes, trades, control, open interest.
    pub quotes: u64,
    pub trades: u64,
    pub control: u64,
    pub open_interest: u64,
}

struct SeriesState {
    root: [u8; 3],
    expiration: u8,
    year: u8,
    strike_code: u8,
    strike: u32,
    /// Mid price in cents.
    mid: i64,
}

fn root(i: u32) -> [u8; 3] {
    [b'A' + (i / 676 % 26) as u8, b'A' + (i / 26 % 26) as u8, b'A' + (i % 26) as u8]
}

/// Builds one message's entries in template order.
struct Builder<'p> {
    p: &'p Program,
    msg: Message,
}

impl Builder<'_> {
    fn start(&mut self) {
        self.msg.clear();
        self.msg.template = 0;
    }
    fn uint(&mut self, name: &str, v: u64) {
        let field = self.p.field_index(name).expect("field of the OPRA templates");
        self.msg.entries.push(Entry { field, value: Value::UInt(v) });
    }
    fn ascii(&mut self, name: &str, s: &[u8]) {
        let field = self.p.field_index(name).expect("field of the OPRA templates");
        let start = self.msg.bytes.len() as u32;
        self.msg.bytes.extend_from_slice(s);
        self.msg.entries.push(Entry { field, value: Value::Bytes { start, len: s.len() as u32 } });
    }
    /// Entries must follow the template's order: sort by field index (fields are numbered
    /// in template order).
    fn finish(&mut self) {
        self.msg.entries.sort_by_key(|e| e.field);
    }
}

/// Generate the feed, calling `emit(timestamp_ns, frame)` for each datagram (an Ethernet
/// frame) in order; returns the ground truth.
pub fn generate_opra_fast(cfg: &OpraGenConfig, mut emit: impl FnMut(u64, &[u8])) -> OpraFastTruth {
    let program = Program::from_xml(TEMPLATES).expect("the OPRA FAST templates compile");
    let mut enc = Encoder::new(&program);
    enc.set_template_id_policy(TemplateIdPolicy::WhenChanged);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let nseries = cfg.series.max(1);
    let mut series: Vec<SeriesState> = (0..nseries)
        .map(|i| SeriesState {
            root: root(i / 8),
            expiration: if i % 2 == 0 { b'A' + (i / 2 % 12) as u8 } else { b'M' + (i / 2 % 12) as u8 },
            year: b'0' + (6 + i / 96 % 4) as u8,
            strike_code: b'A' + (i / 2 % 4) as u8,
            strike: 100 + 5 * (i / 2 % 4),
            mid: rng.gen_range(20..=5_000),
        })
        .collect();
    let mut b = Builder { p: &program, msg: Message::new() };
    let mut truth = OpraFastTruth::default();
    let (mut payload, mut body, mut frame) = (Vec::with_capacity(1500), Vec::new(), Vec::with_capacity(1600));
    let mut seq = cfg.first_seq;
    let mut ts = cfg.start_ns;
    let mut left = cfg.messages;
    let mut datagram = 0u16;
    let cents = 10_000_000i64; // one cent in 1e-9 units
    while left > 0 {
        let n = u64::from(rng.gen_range(1..=cfg.max_per_block.max(1))).min(left) as u8;
        enc.reset();
        payload.clear();
        payload.extend_from_slice(&seq.to_be_bytes());
        payload.push(n);
        payload.push(0x01);
        for _ in 0..n {
            b.start();
            // Milliseconds since midnight UTC.
            let time = (ts / 1_000_000) % 86_400_000;
            let participant = u64::from(b"ABCIMNPQTWXZ"[rng.gen_range(0..12)]);
            let category = match rng.gen_range(0..100) {
                _ if truth.messages == 0 => b'H',
                0..=69 => b'k',
                70..=94 => b'a',
                _ => b'd',
            };
            b.uint("MESSAGE_CATEGORY", u64::from(category));
            b.uint("MESSAGE_TYPE", if category == b'H' { u64::from(b'C') } else { u64::from(b' ') });
            b.uint("PARTICIPANT_ID", participant);
            b.uint("MESSAGE_SEQUENCE_NUMBER", u64::from(seq));
            b.uint("TIME", time);
            let sequence = u64::from(seq);
            if category == b'H' {
                b.ascii("TEXT", b"START OF DAY");
                truth.control += 1;
                truth.events.push(TruthEvent {
                    sequence,
                    category,
                    root: String::new(),
                    action: "status",
                    side: "none",
                    price: 0,
                    size: 0,
                });
            } else {
                let s = &mut series[rng.gen_range(0..nseries as usize)];
                b.ascii("SECURITY_SYMBOL", &s.root);
                b.uint("EXPIRATION_DATE", u64::from(s.expiration));
                b.uint("YEAR", u64::from(s.year));
                b.uint("STRIKE_PRICE_CODE", u64::from(s.strike_code));
                b.uint("STRIKE_PRICE_DENOMINATOR_CODE", u64::from(b'I'));
                b.uint("EXPLICIT_STRIKE_PRICE", u64::from(s.strike));
                b.uint("PREMIUM_PRICE_DENOMINATOR_CODE", u64::from(b'B'));
                s.mid = (s.mid + rng.gen_range(-3..=3)).max(10);
                let name = String::from_utf8_lossy(&s.root).into_owned();
                match category {
                    b'k' => {
                        let (bid, ask) = (s.mid - rng.gen_range(1..=5), s.mid + rng.gen_range(1..=5));
                        let (bs, asz) = (rng.gen_range(1..=500u32), rng.gen_range(1..=500u32));
                        b.uint("BID_PRICE", bid as u64);
                        b.uint("BID_SIZE", u64::from(bs));
                        b.uint("OFFER_PRICE", ask as u64);
                        b.uint("OFFER_SIZE", u64::from(asz));
                        truth.quotes += 1;
                        for (side, price, size) in [("bid", bid, bs), ("ask", ask, asz)] {
                            truth.events.push(TruthEvent {
                                sequence,
                                category,
                                root: name.clone(),
                                action: "quote",
                                side,
                                price: price * cents,
                                size,
                            });
                        }
                    }
                    b'a' => {
                        let (price, volume) = (s.mid + rng.gen_range(-2..=2), rng.gen_range(1..=100u32));
                        b.uint("PREMIUM_PRICE", price as u64);
                        b.uint("VOLUME", u64::from(volume));
                        truth.trades += 1;
                        truth.events.push(TruthEvent {
                            sequence,
                            category,
                            root: name,
                            action: "trade",
                            side: "none",
                            price: price * cents,
                            size: volume,
                        });
                    }
                    _ => {
                        b.uint("OPEN_INT_VOLUME", rng.gen_range(0..100_000));
                        truth.open_interest += 1;
                    }
                }
            }
            b.finish();
            body.clear();
            enc.encode(&b.msg, &mut body).expect("generated messages fit the templates");
            payload.push(u8::try_from(body.len()).expect("an OPRA FAST message is under 256 bytes"));
            payload.extend_from_slice(&body);
            seq = seq.wrapping_add(1);
            truth.messages += 1;
        }
        payload.push(0x03);
        write_udp_frame(&cfg.flow, datagram, &payload, &mut frame);
        emit(ts, &frame);
        datagram = datagram.wrapping_add(1);
        truth.blocks += 1;
        left -= u64::from(n);
        ts += cfg.spacing_ns / 2 + rng.gen_range(0..=cfg.spacing_ns);
    }
    truth
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_fast::{opra_block, Decoder};
    use tickplant_wire::{ethernet, ipv4, udp};

    #[test]
    fn blocks_decode_on_their_own_to_the_truth_counts() {
        let cfg = OpraGenConfig { messages: 2_000, series: 40, ..Default::default() };
        let program = Program::from_xml(TEMPLATES).unwrap();
        let mut dec = Decoder::new(&program);
        let mut msg = Message::new();
        let cat = program.field_index("MESSAGE_CATEGORY").unwrap();
        let seqf = program.field_index("MESSAGE_SEQUENCE_NUMBER").unwrap();
        let (mut n, mut expect_seq, mut quotes) = (0u64, 1u64, 0u64);
        let off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
        let truth = generate_opra_fast(&cfg, |_, f| {
            let p = &f[off..];
            let (first, count) = (u32::from_be_bytes([p[0], p[1], p[2], p[3]]), p[4]);
            assert_eq!(u64::from(first), expect_seq);
            dec.reset();
            let mut k = 0;
            for m in opra_block(&p[HEADER_LEN..]) {
                let (_, body) = m.unwrap();
                assert_eq!(dec.decode(body, &mut msg).unwrap(), body.len());
                let get = |f: u32| msg.entries.iter().find(|e| e.field == f).map(|e| e.value);
                assert_eq!(get(seqf), Some(Value::UInt(expect_seq)));
                if get(cat) == Some(Value::UInt(u64::from(b'k'))) {
                    quotes += 1;
                }
                expect_seq += 1;
                k += 1;
            }
            assert_eq!(k, count);
            n += u64::from(count);
        });
        assert_eq!((n, truth.messages), (2_000, 2_000));
        assert_eq!(quotes, truth.quotes);
        assert_eq!(truth.quotes + truth.trades + truth.control + truth.open_interest, 2_000);
        assert_eq!(truth.events.len() as u64, 2 * truth.quotes + truth.trades + truth.control);
        assert!(truth.quotes > 1_200 && truth.trades > 400, "{truth:?}");
    }

    #[test]
    fn deterministic_for_a_seed() {
        let run = |seed| {
            let mut out = Vec::new();
            generate_opra_fast(&OpraGenConfig { seed, messages: 300, ..Default::default() }, |t, f| {
                out.push((t, f.to_vec()))
            });
            out
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}

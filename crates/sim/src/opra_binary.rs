//! An OPRA binary feed (Participant Interface v6): blocks of option quotes from several
//! exchanges, last sales and the rest of the message categories, one block per UDP
//! datagram, with the events they must decode to and each series' best bid and offer as
//! ground truth.
//!
//! The block header is version 6 (sequence number of the block's first message, message
//! count, block timestamp), so the pipeline's `opra` sequencer reads it as is. The first
//! message is a control message (`H`, start of day); then about 70% quotes (short `q` for
//! about one in five, where the series' root, strike and prices fit it; long `k` for the
//! rest), 15% last sales
//! (`a`), 5% open interest (`d`), 4% underlying values (`Y`), 3% end of day summaries
//! (`f`), 2% line integrity control messages and 1% administrative text (`C`).
//!
//! Each series is quoted by up to eight exchanges; the generator keeps every exchange's
//! quote, computes the series' best bid and offer after each one (highest bid, lowest
//! offer; ties to the larger size, then the earlier exchange), and writes the BBO indicator
//! and appendages the specification prescribes: a side unchanged, now this quote, now
//! another exchange's (an appendage), or empty. Prices are in cents (denominator `B`) for
//! most series and in hundredths of a cent (`D`) for every seventh.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::build::write_udp_frame;
use tickplant_wire::opra_binary::build::{block, header, put, Put};
use tickplant_wire::opra_binary::{layout, APPENDAGES};

use crate::opra_fast::{OpraGenConfig, TruthEvent};

/// A series' best bid and offer at the end (prices in 1e-9 units; 0 on an empty side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthBbo {
    /// Its instrument id: series are numbered from 1 in order of first appearance.
    pub instrument: u32,
    pub root: String,
    pub month: u8,
    pub day: u8,
    pub year: u8,
    /// Strike in 1e-9 units.
    pub strike: i64,
    pub bid: i64,
    pub bid_size: u32,
    pub ask: i64,
    pub ask_size: u32,
}

/// What a generation produced.
#[derive(Debug, Clone, Default)]
pub struct OpraBinaryTruth {
    pub events: Vec<TruthEvent>,
    /// Every series that appeared, in instrument order.
    pub bbo: Vec<TruthBbo>,
    pub blocks: u64,
    pub messages: u64,
    /// Messages by category letter.
    pub by_category: std::collections::BTreeMap<char, u64>,
}

const EXCHANGES: &[u8; 8] = b"ABCIMNPX";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Side {
    /// Price in the series' ticks (cents or hundredths of a cent); 0 with size 0: none.
    price: i64,
    size: u32,
    /// Index into EXCHANGES.
    who: usize,
}

struct SeriesState {
    root: Vec<u8>,
    month: u8,
    day: u8,
    year: u8,
    /// Strike in cents.
    strike_cents: i64,
    /// Premium denominator code and ticks per cent.
    den: u8,
    per_cent: i64,
    /// Mid in ticks.
    mid: i64,
    quotes: [Option<(Side, Side)>; 8],
    best: (Side, Side),
    instrument: u32,
}

impl SeriesState {
    /// The best bid and offer across the exchanges' quotes.
    fn compute_best(&self) -> (Side, Side) {
        let mut bid = Side::default();
        let mut ask = Side::default();
        for (who, q) in self.quotes.iter().enumerate() {
            let Some((b, a)) = q else { continue };
            if b.size > 0 && (bid.size == 0 || b.price > bid.price || (b.price == bid.price && b.size > bid.size)) {
                bid = Side { who, ..*b };
            }
            if a.size > 0 && (ask.size == 0 || a.price < ask.price || (a.price == ask.price && a.size > ask.size)) {
                ask = Side { who, ..*a };
            }
        }
        (bid, ask)
    }
}

fn root(i: u32) -> Vec<u8> {
    // Three to five letters: the five-letter roots only fit the long forms.
    let len = 3 + (i % 3) as usize;
    (0..len).map(|k| b'A' + ((i / 26u32.pow(k as u32 % 3)) % 26) as u8).collect()
}

/// What the BBO indicator says of one side, given the best before and after this quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SideSays {
    NoChange,
    ThisQuote,
    Appendage,
    None,
}

fn says(before: Side, after: Side, own: Side, who: usize) -> SideSays {
    if after == before {
        SideSays::NoChange
    } else if after.size == 0 {
        SideSays::None
    } else if after.who == who && after.price == own.price && after.size == own.size {
        SideSays::ThisQuote
    } else {
        SideSays::Appendage
    }
}

/// The indicator letter of the specification's matrix.
fn indicator(bid: SideSays, offer: SideSays) -> u8 {
    let row = match bid {
        SideSays::NoChange => 0,
        SideSays::ThisQuote => 1,
        SideSays::None => 2,
        SideSays::Appendage => 3,
    };
    let col = match offer {
        SideSays::NoChange => 0,
        SideSays::ThisQuote => 1,
        SideSays::Appendage => 2,
        SideSays::None => 3,
    };
    b'A' + row * 4 + col
}

/// Generate the feed, calling `emit(timestamp_ns, frame)` for each datagram (an Ethernet
/// frame) in order; returns the ground truth.
pub fn generate_opra_binary(cfg: &OpraGenConfig, mut emit: impl FnMut(u64, &[u8])) -> OpraBinaryTruth {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let nseries = cfg.series.max(1);
    let mut series: Vec<SeriesState> = (0..nseries)
        .map(|i| {
            let (den, per_cent) = if i % 7 == 6 { (b'D', 100) } else { (b'B', 1) };
            SeriesState {
                root: root(i / 8),
                month: if i % 2 == 0 { b'A' + (i / 2 % 12) as u8 } else { b'M' + (i / 2 % 12) as u8 },
                day: 1 + (i / 24 % 28) as u8,
                year: 24 + (i / 96 % 3) as u8,
                strike_cents: 5_000 + 250 * i64::from(i / 2 % 4) + 2_500 * i64::from(i % 5),
                den,
                per_cent,
                mid: rng.gen_range(20..=5_000) * per_cent,
                quotes: [None; 8],
                best: (Side::default(), Side::default()),
                instrument: 0,
            }
        })
        .collect();
    let mut truth = OpraBinaryTruth::default();
    let mut frame = Vec::with_capacity(1600);
    let mut msgs: Vec<Vec<u8>> = Vec::new();
    let mut seq = cfg.first_seq;
    let mut ts = cfg.start_ns;
    let mut left = cfg.messages;
    let mut datagram = 0u16;
    let mut next_instrument = 1u32;
    let mut txid = 1u32;
    let nanos_per_tick = |s: &SeriesState| 10_000_000 / s.per_cent;
    while left > 0 {
        let n = u64::from(rng.gen_range(1..=cfg.max_per_block.max(1))).min(left) as u8;
        msgs.clear();
        for k in 0..n {
            let sequence = u64::from(seq) + u64::from(k);
            let participant = EXCHANGES[rng.gen_range(0..EXCHANGES.len())];
            let roll = if truth.messages == 0 && k == 0 { 255 } else { rng.gen_range(0..100u8) };
            let mut m = Vec::with_capacity(80);
            txid = txid.wrapping_add(1);
            let cat = match roll {
                255 | 97..=98 => {
                    let ty = if roll == 255 { b'C' } else { b'N' };
                    header(&mut m, b'O', b'H', ty, b' ', 0);
                    truth.events.push(status(sequence, b'H'));
                    b'H'
                }
                99 => {
                    let text = b"TEXT TICKPLANT SIMULATED ADMINISTRATIVE MESSAGE";
                    header(&mut m, b'O', b'C', b' ', b' ', 0);
                    put(&mut m, layout(b'C', b' ').unwrap().fields, &[Put::Int(text.len() as i64)]);
                    m.extend_from_slice(text);
                    truth.events.push(status(sequence, b'C'));
                    b'C'
                }
                _ => {
                    let i = rng.gen_range(0..nseries as usize);
                    let s = &mut series[i];
                    if s.instrument == 0 && roll < 85 {
                        // Numbered at its first message the decoder maps (quotes, trades).
                        s.instrument = next_instrument;
                        next_instrument += 1;
                    }
                    let name = String::from_utf8_lossy(&s.root).into_owned();
                    // The series' value drifts a tick now and then, so that the exchanges' standing quotes
                    // stay close to one another (a crossed market is rare, as on the real feed).
                    if rng.gen_range(0..8) == 0 {
                        s.mid = (s.mid + rng.gen_range(-1..=1) * s.per_cent).max(10 * s.per_cent);
                    }
                    match roll {
                        0..=69 => {
                            let who = EXCHANGES.iter().position(|&e| e == participant).unwrap_or(0);
                            let bid = Side {
                                price: s.mid - rng.gen_range(1..=5) * s.per_cent,
                                size: if rng.gen_range(0..20) == 0 { 0 } else { rng.gen_range(1..=500) },
                                who,
                            };
                            let ask = Side {
                                price: s.mid + rng.gen_range(1..=5) * s.per_cent,
                                size: if rng.gen_range(0..20) == 0 { 0 } else { rng.gen_range(1..=500) },
                                who,
                            };
                            let bid = if bid.size == 0 { Side { price: 0, ..bid } } else { bid };
                            let ask = if ask.size == 0 { Side { price: 0, ..ask } } else { ask };
                            let before = s.best;
                            s.quotes[who] = Some((bid, ask));
                            let after = s.compute_best();
                            s.best = after;
                            let (sb, so) = (says(before.0, after.0, bid, who), says(before.1, after.1, ask, who));
                            let ind = indicator(sb, so);
                            let short = roll >= 55
                                && s.root.len() <= 4
                                && s.per_cent == 1
                                && s.strike_cents % 10 == 0
                                && s.strike_cents / 10 < 65_536
                                && bid.price < 65_536
                                && ask.price < 65_536
                                && bid.size < 65_536
                                && ask.size < 65_536;
                            let apps: Vec<(u8, Side)> = [(sb, after.0), (so, after.1)]
                                .into_iter()
                                .filter(|(x, _)| *x == SideSays::Appendage)
                                .map(|(_, side)| (EXCHANGES[side.who], side))
                                .collect();
                            if short {
                                header(&mut m, participant, b'q', b' ', ind, txid);
                                put(
                                    &mut m,
                                    layout(b'q', b' ').unwrap().fields,
                                    &[
                                        Put::Bytes(&s.root),
                                        Put::Bytes(&[s.month]),
                                        Put::Int(s.day.into()),
                                        Put::Int(s.year.into()),
                                        Put::Int(s.strike_cents / 10),
                                        Put::Int(bid.price),
                                        Put::Int(bid.size.into()),
                                        Put::Int(ask.price),
                                        Put::Int(ask.size.into()),
                                    ],
                                );
                            } else {
                                header(&mut m, participant, b'k', b' ', ind, txid);
                                put_long(
                                    &mut m,
                                    b'k',
                                    s,
                                    &[
                                        Put::Bytes(&[s.den]),
                                        Put::Int(bid.price),
                                        Put::Int(bid.size.into()),
                                        Put::Int(ask.price),
                                        Put::Int(ask.size.into()),
                                    ],
                                );
                            }
                            for (j, (who, side)) in apps.iter().enumerate() {
                                // The bid's appendage first; a lone offer appendage is the offer's.
                                let which = if apps.len() == 2 { j } else { usize::from(sb != SideSays::Appendage) };
                                let den = if short { b'B' } else { s.den };
                                put(
                                    &mut m,
                                    &APPENDAGES[which],
                                    &[
                                        Put::Bytes(&[*who]),
                                        Put::Bytes(&[den]),
                                        Put::Int(side.price),
                                        Put::Int(side.size.into()),
                                    ],
                                );
                            }
                            let tick = nanos_per_tick(s);
                            for (side, x) in [("bid", bid), ("ask", ask)] {
                                truth.events.push(TruthEvent {
                                    sequence,
                                    category: if short { b'q' } else { b'k' },
                                    root: name.clone(),
                                    action: "quote",
                                    side,
                                    price: x.price * tick,
                                    size: x.size,
                                });
                            }
                            if short {
                                b'q'
                            } else {
                                b'k'
                            }
                        }
                        70..=84 => {
                            let (price, volume) =
                                (s.mid + rng.gen_range(-2..=2) * s.per_cent, rng.gen_range(1..=100u32));
                            header(&mut m, participant, b'a', b' ', b' ', txid);
                            put_long(
                                &mut m,
                                b'a',
                                s,
                                &[
                                    Put::Int(volume.into()),
                                    Put::Bytes(&[s.den]),
                                    Put::Int(price),
                                    Put::Int(txid.into()),
                                    Put::Bytes(&[0; 4]),
                                ],
                            );
                            truth.events.push(TruthEvent {
                                sequence,
                                category: b'a',
                                root: name,
                                action: "trade",
                                side: "none",
                                price: price * nanos_per_tick(s),
                                size: volume,
                            });
                            b'a'
                        }
                        85..=89 => {
                            header(&mut m, participant, b'd', b' ', b' ', txid);
                            put_long(&mut m, b'd', s, &[Put::Int(rng.gen_range(0..100_000))]);
                            b'd'
                        }
                        90..=93 => {
                            let bid_offer = rng.gen_range(0..2) == 0;
                            let ty = if bid_offer { b'I' } else { b' ' };
                            header(&mut m, b'O', b'Y', ty, b' ', txid);
                            let l = layout(b'Y', ty).unwrap();
                            let v = s.mid * 100;
                            let last = if bid_offer { Put::Int(v + 50) } else { Put::Bytes(&[0; 4]) };
                            put(
                                &mut m,
                                l.fields,
                                &[Put::Bytes(&s.root), Put::Bytes(&[0]), Put::Bytes(b"D"), Put::Int(v), last],
                            );
                            b'Y'
                        }
                        _ => {
                            header(&mut m, participant, b'f', b' ', b' ', txid);
                            let p = Put::Int(s.mid);
                            let rest = [
                                Put::Int(rng.gen_range(0..10_000)),
                                Put::Int(rng.gen_range(0..100_000)),
                                Put::Bytes(&[s.den]),
                                p,
                                Put::Int(s.mid + 5),
                                Put::Int(s.mid - 5),
                                p,
                                Put::Int(-3),
                                Put::Bytes(b"D"),
                                Put::Int(1_234_567),
                                p,
                                p,
                            ];
                            put_long(&mut m, b'f', s, &rest);
                            b'f'
                        }
                    }
                }
            };
            *truth.by_category.entry(cat as char).or_default() += 1;
            msgs.push(m);
        }
        let refs: Vec<&[u8]> = msgs.iter().map(Vec::as_slice).collect();
        let secs = (ts / 1_000_000_000) as u32;
        let payload = block(seq, (secs, (ts % 1_000_000_000) as u32), b'O', &refs);
        write_udp_frame(&cfg.flow, datagram, &payload, &mut frame);
        emit(ts, &frame);
        datagram = datagram.wrapping_add(1);
        truth.blocks += 1;
        truth.messages += u64::from(n);
        seq = seq.wrapping_add(u32::from(n));
        left -= u64::from(n);
        ts += cfg.spacing_ns / 2 + rng.gen_range(0..=cfg.spacing_ns);
    }
    let mut seen: Vec<&SeriesState> = series.iter().filter(|s| s.instrument != 0).collect();
    seen.sort_by_key(|s| s.instrument);
    truth.bbo = seen
        .into_iter()
        .map(|s| {
            let tick = nanos_per_tick(s);
            TruthBbo {
                instrument: s.instrument,
                root: String::from_utf8_lossy(&s.root).into_owned(),
                month: s.month,
                day: s.day,
                year: s.year,
                strike: s.strike_cents * 10_000_000,
                bid: s.best.0.price * tick,
                bid_size: s.best.0.size,
                ask: s.best.1.price * tick,
                ask_size: s.best.1.size,
            }
        })
        .collect();
    truth
}

fn status(sequence: u64, category: u8) -> TruthEvent {
    TruthEvent { sequence, category, root: String::new(), action: "status", side: "none", price: 0, size: 0 }
}

/// A long message's fields (`a`, `d`, `f`, `k`): the series part (symbol to strike), then
/// `rest`.
fn put_long(m: &mut Vec<u8>, category: u8, s: &SeriesState, rest: &[Put<'_>]) {
    let fields = layout(category, b' ').expect("a long message category").fields;
    let series = [
        Put::Bytes(&s.root),
        Put::Bytes(&[0]),
        Put::Bytes(std::slice::from_ref(&s.month)),
        Put::Int(s.day.into()),
        Put::Int(s.year.into()),
        Put::Bytes(b"B"),
        Put::Int(s.strike_cents),
    ];
    put(m, &fields[..series.len()], &series);
    put(m, &fields[series.len()..], rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::opra_binary::{messages, Quote};
    use tickplant_wire::{ethernet, ipv4, opra, udp};

    #[test]
    fn blocks_parse_and_the_quotes_carry_the_best() {
        let cfg = OpraGenConfig { messages: 5_000, series: 40, ..Default::default() };
        let off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
        let (mut n, mut expect) = (0u64, 1u64);
        let mut cats = std::collections::BTreeMap::new();
        let truth = generate_opra_binary(&cfg, |_, f| {
            let b = opra::Block::new_checked(&f[off..]).unwrap();
            assert_eq!(u64::from(b.block_sequence_number()), expect);
            for m in messages(b.payload(), b.messages_in_block()) {
                let (_, m) = m.unwrap();
                *cats.entry(m.category() as char).or_insert(0u64) += 1;
                if matches!(m.category(), b'k' | b'q') {
                    Quote::parse(&m).unwrap();
                }
                n += 1;
            }
            expect += u64::from(b.messages_in_block());
        });
        assert_eq!((n, truth.messages), (5_000, 5_000));
        assert_eq!(cats, truth.by_category);
        for c in ['k', 'q', 'a', 'd', 'f', 'Y', 'H', 'C'] {
            assert!(truth.by_category.get(&c).is_some_and(|&x| x > 0), "category {c}: {:?}", truth.by_category);
        }
        assert!(truth.bbo.iter().any(|b| b.bid > 0 && b.ask > b.bid));
        assert!(truth.bbo.windows(2).all(|w| w[0].instrument + 1 == w[1].instrument));
    }

    #[test]
    fn deterministic_for_a_seed() {
        let run = |seed| {
            let mut out = Vec::new();
            generate_opra_binary(&OpraGenConfig { seed, messages: 300, ..Default::default() }, |t, f| {
                out.push((t, f.to_vec()))
            });
            out
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}

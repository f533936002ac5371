//! OPRA binary (Participant Interface v6) blocks as normalized events, with each option
//! series' best bid and offer across the exchanges.
//!
//! | category | message | events |
//! |---|---|---|
//! | `k`, `q` | long or short equity/index quote | two `quote` events: the participant's bid, then its offer (`aux` the participant) |
//! | `a` | equity/index last sale | one `trade` (price the premium, size the volume, `aux` the trade identifier) |
//! | `H`, `C` | control and administrative | one `status` event (instrument 0, `aux` the message type) |
//! | `d`, `f`, `Y` | open interest, end of day summary, underlying value | none, counted as `other` |
//!
//! A series (root, expiration, put or call, strike) gets an `instrument_id` from 1 in order
//! of appearance, in a table sized at start. Its best bid and offer follow the quotes' BBO
//! indicators as the specification defines them: a side is unchanged, becomes the quote's
//! own side, becomes the appendage that follows, or is emptied. After a gap a series'
//! best bid and offer are not trusted (events carry [`flags::BOOK_STALE`]) until both sides
//! have been set again by a quote.
//!
//! `sequence` is the block's sequence number plus the message's place in the block;
//! `ts_event` the block timestamp (ns since the epoch); `msg_type` the category letter.
//! Every message is counted once: decoded (mapped, `other`, or rejected with a reason) or
//! undecodable (a message the block's bytes cannot hold, and those after it).

use std::collections::BTreeMap;

use serde::Serialize;
use tickplant_wire::opra;
use tickplant_wire::opra_binary::{self as wire, BestSide, Level, Series};

use crate::arb::GapReport;
use crate::event::{flags, Bbo, Event, EventAction, Side};
use crate::feed::{Decoded, EventBatch, FeedDecoder, Packet};
use crate::series::SeriesTable;

/// Why a message was decoded but not mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reject {
    /// A price whose denominator code is not `A`..`I`, or that overflows.
    BadDenominator = 0,
    /// The series table is full.
    TableFull,
}

impl Reject {
    const ALL: [Reject; 2] = [Reject::BadDenominator, Reject::TableFull];
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::BadDenominator => "price denominator code not A..I",
            Reject::TableFull => "series table full",
        }
    }
}

/// Counts of what the decoder did: `messages == quotes + trades + status + other +
/// rejected` (the decoded messages).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct OpraBinaryStats {
    pub messages: u64,
    pub quotes: u64,
    pub trades: u64,
    pub status: u64,
    pub other: u64,
    pub rejected: u64,
    pub by_category: BTreeMap<String, u64>,
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Series seen.
    pub series: u64,
    /// Blocks whose header could not be read, or of another version than 6.
    pub bad_blocks: u64,
}

/// A series' best bid and offer (sizes as sent, in 32 bits), and the gap epoch each side
/// was last set in: 32 bytes, two a cache line (a [`Bbo`] with its `u64` sizes made it 40,
/// and a quote's read of it more often a miss: `tickplant bench feeds`).
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(32))]
struct Best {
    bid_price: i64,
    ask_price: i64,
    bid_size: u32,
    ask_size: u32,
    bid_epoch: u32,
    offer_epoch: u32,
}

/// A direct-mapped cache in front of the series table, keyed by a message's series bytes
/// as sent (two words; see [`wire::series_key`]): a hit costs a multiply and a compare, where
/// building the [`Series`] (the root padded, the strike scaled) and probing the table cost
/// about 80 instructions a quote (callgrind, `tickplant bench feeds`). A miss goes to the
/// table and takes the slot.
#[derive(Debug, Clone)]
struct SeriesCache {
    /// (key, id); id 0: empty.
    slots: Box<[([u64; 2], u32)]>,
    shift: u32,
}

impl SeriesCache {
    fn new(max_series: usize) -> SeriesCache {
        // Eight slots a series (a series has up to two keys, its short and long forms; at
        // two slots a series they thrashed: `tickplant bench feeds`), within 1,024 and
        // 65,536 slots (1.5 MB): a feed with more series misses more often, and stays exact.
        let n = (max_series * 8).next_power_of_two().clamp(1 << 10, 1 << 16);
        SeriesCache { slots: vec![([0; 2], 0); n].into_boxed_slice(), shift: 64 - n.trailing_zeros() }
    }
    #[inline(always)]
    fn slot(&self, k: [u64; 2]) -> usize {
        ((k[0] ^ k[1].rotate_left(23)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }
}

/// The OPRA binary feed decoder.
#[derive(Debug, Clone)]
pub struct OpraBinaryFeed {
    series: SeriesTable<Series>,
    cache: SeriesCache,
    /// By instrument id (0 unused).
    best: Vec<Best>,
    /// Gaps so far: a side set before the latest gap is not trusted.
    epoch: u32,
    by_category: [u64; 256],
    rejected: [u64; 2],
    quotes: u64,
    trades: u64,
    status: u64,
    other: u64,
    bad_blocks: u64,
    /// Series reported by [`FeedDecoder::take_named`] so far.
    named: u32,
}

fn set_side(side: BestSide, own: Level, appendage: Option<(u8, Level)>, price: &mut i64, size: &mut u32) -> bool {
    let l = match side {
        BestSide::NoChange => return false,
        BestSide::ThisQuote => own,
        BestSide::Appendage => appendage.map_or(Level::default(), |(_, l)| l),
        BestSide::None => Level::default(),
    };
    *price = l.price;
    *size = l.size;
    true
}

impl OpraBinaryFeed {
    /// A decoder with room for `max_series` series.
    pub fn new(max_series: usize) -> OpraBinaryFeed {
        OpraBinaryFeed {
            series: SeriesTable::new(max_series),
            cache: SeriesCache::new(max_series),
            best: vec![Best::default(); max_series + 1],
            epoch: 0,
            by_category: [0; 256],
            rejected: [0; 2],
            quotes: 0,
            trades: 0,
            status: 0,
            other: 0,
            bad_blocks: 0,
            named: 0,
        }
    }

    /// The instrument id of a message's series (`k`, `q`, `a`), a new one for a new series.
    #[inline(always)]
    fn instrument(&mut self, m: &wire::Message<'_>) -> Result<u32, Reject> {
        let Some(k) = wire::series_key(m) else { return Err(Reject::BadDenominator) };
        let i = self.cache.slot(k);
        let (key, id) = self.cache.slots[i];
        if key == k && id != 0 {
            return Ok(id);
        }
        self.instrument_miss(m, k, i)
    }

    #[inline(never)]
    fn instrument_miss(&mut self, m: &wire::Message<'_>, k: [u64; 2], i: usize) -> Result<u32, Reject> {
        let s = Series::parse(m).map_err(|_| Reject::BadDenominator)?;
        let id = self.series.id(s).ok_or(Reject::TableFull)?;
        self.cache.slots[i] = (k, id);
        Ok(id)
    }

    #[cold]
    fn reject(&mut self, r: Reject) {
        self.rejected[r as usize] += 1;
    }

    /// The series of an instrument id.
    pub fn series(&self, id: u32) -> Option<&Series> {
        self.series.get(id)
    }

    /// Series named so far (instrument ids run 1..=this).
    pub fn series_count(&self) -> u32 {
        self.series.len()
    }

    /// A series' best bid and offer now, and whether it is trusted (set since the last gap).
    pub fn bbo(&self, id: u32) -> (Bbo, bool) {
        self.best.get(id as usize).map_or((Bbo::default(), false), |b| {
            let bbo = Bbo {
                bid_price: b.bid_price,
                ask_price: b.ask_price,
                bid_size: u64::from(b.bid_size),
                ask_size: u64::from(b.ask_size),
            };
            (bbo, id != 0 && b.bid_epoch == self.epoch && b.offer_epoch == self.epoch)
        })
    }

    pub fn stats(&self) -> OpraBinaryStats {
        let rejected: u64 = self.rejected.iter().sum();
        OpraBinaryStats {
            messages: self.quotes + self.trades + self.status + self.other + rejected,
            quotes: self.quotes,
            trades: self.trades,
            status: self.status,
            other: self.other,
            rejected,
            by_category: (0..256)
                .filter(|&c| self.by_category[c] > 0)
                .map(|c| ((c as u8 as char).to_string(), self.by_category[c]))
                .collect(),
            rejected_by_reason: Reject::ALL
                .iter()
                .filter(|r| self.rejected[**r as usize] > 0)
                .map(|r| (r.as_str().to_string(), self.rejected[*r as usize]))
                .collect(),
            series: u64::from(self.series.len()),
            bad_blocks: self.bad_blocks,
        }
    }

    /// Map one message; `base` carries the times, sequence and category.
    #[inline]
    fn map(&mut self, m: &wire::Message<'_>, base: Event, out: &mut EventBatch) {
        match m.category() {
            b'k' | b'q' => {
                let Ok(q) = wire::Quote::sides(m) else { return self.reject(Reject::BadDenominator) };
                let id = match self.instrument(m) {
                    Ok(id) => id,
                    Err(r) => return self.reject(r),
                };
                let epoch = self.epoch;
                let b = &mut self.best[id as usize];
                if let Some((bid, offer)) = wire::bbo_sides(m.indicator()) {
                    if set_side(bid, q.bid, q.best_bid, &mut b.bid_price, &mut b.bid_size) {
                        b.bid_epoch = epoch;
                    }
                    if set_side(offer, q.offer, q.best_offer, &mut b.ask_price, &mut b.ask_size) {
                        b.offer_epoch = epoch;
                    }
                }
                let stale = if b.bid_epoch == epoch && b.offer_epoch == epoch { 0 } else { flags::BOOK_STALE };
                self.quotes += 1;
                let e = Event {
                    instrument_id: id,
                    action: EventAction::Quote,
                    aux: u64::from(m.participant()),
                    flags: stale,
                    ..base
                };
                // One check for room for both (`tickplant bench feeds`: 25.2-25.3 -> 24.6 ns).
                out.push_pair(
                    Event { side: Side::Bid, price: q.bid.price, size: q.bid.size, ..e },
                    Event { side: Side::Ask, price: q.offer.price, size: q.offer.size, ..e },
                );
            }
            b'a' => {
                let Ok(t) = wire::LastSale::sale(m) else { return self.reject(Reject::BadDenominator) };
                let id = match self.instrument(m) {
                    Ok(id) => id,
                    Err(r) => return self.reject(r),
                };
                self.trades += 1;
                out.push(Event {
                    instrument_id: id,
                    action: EventAction::Trade,
                    price: t.premium,
                    size: t.volume,
                    aux: u64::from(t.trade_identifier),
                    ..base
                });
            }
            b'H' | b'C' => {
                self.status += 1;
                out.push(Event { action: EventAction::Status, aux: u64::from(m.msg_type()), ..base });
            }
            _ => self.other += 1,
        }
    }
}

impl FeedDecoder for OpraBinaryFeed {
    fn feed(&self) -> &'static str {
        "opra-binary"
    }

    /// Decode one block. A block whose header cannot be read (or of another version) counts
    /// every message the arbitrator announced as undecodable; a message the block cannot
    /// hold counts undecodable with every message after it.
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
        let mut d = Decoded::default();
        let block = match opra::Block::new_checked(p.payload) {
            Ok(b) if b.version() == 6 => b,
            _ => {
                self.bad_blocks += 1;
                d.messages = u64::from(p.count);
                d.undecodable = d.messages;
                return d;
            }
        };
        let count = block.messages_in_block();
        d.messages = u64::from(count);
        let (s, ns) = block.block_timestamp();
        let base =
            Event { ts_recv: p.arrival_ns, ts_event: u64::from(s) * 1_000_000_000 + u64::from(ns), ..Event::default() };
        let first = u64::from(block.block_sequence_number());
        for (i, m) in wire::messages(block.payload(), count).enumerate() {
            let Ok((_, m)) = m else {
                d.undecodable = d.messages - d.decoded;
                break;
            };
            d.decoded += 1;
            self.by_category[usize::from(m.category())] += 1;
            self.map(&m, Event { sequence: first + i as u64, msg_type: m.category(), ..base }, out);
        }
        d
    }

    /// Every series' best bid and offer is now in doubt until quotes set both sides again.
    fn gap(&mut self, _g: &GapReport) {
        self.epoch = self.epoch.wrapping_add(1);
    }

    fn take_named(&mut self) -> Option<(u32, [u8; 8])> {
        if self.named >= self.series_count() {
            return None;
        }
        self.named += 1;
        Some((self.named, self.series(self.named).map_or([0; 8], |s| s.root)))
    }

    #[inline]
    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]) {
        (self.bbo(instrument).0, self.series(instrument).map_or([0; 8], |s| s.root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::opra_binary::build::{self, put, Put};
    use tickplant_wire::opra_binary::{layout, APPENDAGES};

    /// A short quote of root `sym` with bid/offer in cents, and its appendages.
    fn short(sym: &[u8], indicator: u8, bid: u16, offer: u16, apps: &[(u8, i32, u32)]) -> Vec<u8> {
        let mut m = Vec::new();
        build::header(&mut m, b'T', b'q', b' ', indicator, 1);
        let v = [
            Put::Bytes(sym),
            Put::Bytes(b"L"),
            Put::Int(29),
            Put::Int(23),
            Put::Int(1330),
            Put::Int(i64::from(bid)),
            Put::Int(10),
            Put::Int(i64::from(offer)),
            Put::Int(20),
        ];
        put(&mut m, layout(b'q', b' ').unwrap().fields, &v);
        for (i, &(p, price, size)) in apps.iter().enumerate() {
            let side = if apps.len() == 1 && !wire::appendages(indicator).0 { 1 } else { i };
            put(
                &mut m,
                &APPENDAGES[side],
                &[Put::Bytes(&[p]), Put::Bytes(b"B"), Put::Int(price.into()), Put::Int(size.into())],
            );
        }
        m
    }

    fn run(f: &mut OpraBinaryFeed, msgs: &[&[u8]], seq: u32) -> (Decoded, Vec<Event>) {
        let blk = build::block(seq, (1_700_000_000, 5), b'O', msgs);
        let mut out = EventBatch::default();
        let d = f.decode(
            &Packet { payload: &blk, seq: u64::from(seq), count: msgs.len() as u32, arrival_ns: 9, prefetched: false },
            &mut out,
        );
        (d, out.events().to_vec())
    }

    #[test]
    fn quotes_follow_the_bbo_indicator() {
        let mut f = OpraBinaryFeed::new(8);
        // F: this quote is the best on both sides.
        let (d, ev) = run(&mut f, &[&short(b"AMZN", b'F', 1410, 1465, &[])], 100);
        assert_eq!(d, Decoded { messages: 1, decoded: 1, undecodable: 0 });
        assert_eq!(ev.len(), 2);
        assert_eq!((ev[0].side, ev[0].price, ev[0].size, ev[0].sequence), (Side::Bid, 14_100_000_000, 10, 100));
        assert_eq!((ev[1].side, ev[1].price, ev[1].aux), (Side::Ask, 14_650_000_000, u64::from(b'T')));
        assert_eq!(ev[0].ts_event, 1_700_000_000_000_000_005);
        let id = ev[0].instrument_id;
        let bbo = f.bbo(id).0;
        assert_eq!(
            (bbo.bid_price, bbo.ask_price, bbo.bid_size, bbo.ask_size),
            (14_100_000_000, 14_650_000_000, 10, 20)
        );
        // M: best bid from the appendage, best offer unchanged; a second message in the block.
        let m = short(b"AMZN", b'M', 1400, 1470, &[(b'N', 1412, 50)]);
        let (_, ev) = run(&mut f, &[&m, &short(b"AAPL", b'L', 1, 2, &[])], 200);
        assert_eq!(ev.len(), 4);
        assert_eq!((ev[2].sequence, ev[2].instrument_id), (201, 2));
        let bbo = f.bbo(id).0;
        assert_eq!((bbo.bid_price, bbo.bid_size, bbo.ask_price), (14_120_000_000, 50, 14_650_000_000));
        // L: no best on either side.
        assert_eq!(f.bbo(2).0, Bbo::default());
        assert!(f.bbo(2).1);
        // A gap: not trusted until both sides are set again.
        f.gap(&GapReport {
            output: crate::OutputId::Hr,
            first_seq: 1,
            last_seq: 1,
            messages: 1,
            reason: crate::GapReason::Timeout,
            at_ns: 0,
        });
        let (_, ev) = run(&mut f, &[&short(b"AMZN", b'B', 1400, 1466, &[])], 300);
        assert_eq!(ev[0].flags & flags::BOOK_STALE, flags::BOOK_STALE, "the bid side is from before the gap");
        assert!(!f.bbo(id).1);
        let (_, ev) = run(&mut f, &[&short(b"AMZN", b'E', 1401, 1466, &[])], 301);
        assert_eq!(ev[0].flags & flags::BOOK_STALE, 0);
        assert!(f.bbo(id).1);
        assert_eq!(f.take_named(), Some((1, *b"AMZN    ")));
        let s = f.stats();
        assert_eq!((s.quotes, s.messages, s.series), (5, 5, 2));
    }

    /// A long quote of `sym` (5 letters, space padded), month `L`, day 29, year 23, strike
    /// `strike` with denominator code `den`, premiums with code `B`.
    fn long(sym: &[u8], den: u8, strike: i64, bid: i64) -> Vec<u8> {
        let mut m = Vec::new();
        build::header(&mut m, b'T', b'k', b' ', b'F', 1);
        let v = [
            Put::Bytes(sym),
            Put::Bytes(&[0]),
            Put::Bytes(b"L"),
            Put::Int(29),
            Put::Int(23),
            Put::Bytes(&[den]),
            Put::Int(strike),
            Put::Bytes(b"B"),
            Put::Int(bid),
            Put::Int(5),
            Put::Int(bid + 50),
            Put::Int(6),
        ];
        put(&mut m, layout(b'k', b' ').unwrap().fields, &v);
        m
    }

    /// The series cache keys messages by their bytes: the short and long forms of one
    /// series (and two ways of writing its strike) get its one id, hit or miss; a strike
    /// denominator code that is not one is rejected however the bytes look.
    #[test]
    fn every_form_of_a_series_gets_its_id() {
        let mut f = OpraBinaryFeed::new(8);
        let (_, ev) = run(&mut f, &[&short(b"AMZN", b'F', 1410, 1465, &[])], 1);
        let id = ev[0].instrument_id;
        for round in 0..2 {
            let (d, ev) = run(&mut f, &[&long(b"AMZN", b'A', 1330, 1411), &long(b"AMZN", b'B', 13300, 1412)], 2);
            assert_eq!(d.decoded, 2);
            assert_eq!(ev.iter().map(|e| e.instrument_id).collect::<Vec<_>>(), [id; 4], "round {round}");
            let (_, ev) = run(&mut f, &[&short(b"AMZN", b'F', 1400, 1465, &[])], 3);
            assert_eq!(ev[0].instrument_id, id);
        }
        assert_eq!(f.bbo(id).0.bid_price, 14_000_000_000);
        let (_, ev) = run(&mut f, &[&long(b"AMZN", b'A', 1331, 1411)], 4);
        assert_eq!(ev[0].instrument_id, id + 1, "another strike, another series");
        for den in [0, b' ', b'J'] {
            let (d, ev) = run(&mut f, &[&long(b"AMZN", den, 1330, 1411)], 5);
            assert_eq!((d.decoded, ev.len()), (1, 0), "strike denominator code {den}");
        }
        let s = f.stats();
        assert_eq!((s.series, s.rejected, s.quotes), (2, 3, 8));
    }

    /// More series than the cache has slots to spare: keys that share a slot take it from
    /// each other, and every message still gets its own series' id, in both forms, and
    /// its own best bid and offer.
    #[test]
    fn series_that_share_a_cache_slot_keep_their_ids() {
        const N: i64 = 3_000;
        let mut f = OpraBinaryFeed::new(N as usize);
        let roots: Vec<[u8; 4]> =
            (0..N).map(|i| [b'A' + (i % 26) as u8, b'A' + (i / 26 % 26) as u8, b'A' + (i / 676) as u8, b'Q']).collect();
        let mut ids = Vec::new();
        for (i, r) in roots.iter().enumerate() {
            let (_, ev) = run(&mut f, &[&long(r, b'A', 1330, 100 + i as i64)], 1);
            ids.push(ev[0].instrument_id);
        }
        assert_eq!(ids, (1..=N as u32).collect::<Vec<_>>());
        // Short forms in another order, then the long forms again in reverse.
        for pass in 0..2 {
            for k in 0..N as usize {
                let i = if pass == 0 { (k * 7) % N as usize } else { N as usize - 1 - k };
                let (_, ev) = if pass == 0 {
                    run(&mut f, &[&short(&roots[i], b' ', 1, 2, &[])], 2)
                } else {
                    run(&mut f, &[&long(&roots[i], b'A', 1330, 100 + i as i64)], 3)
                };
                assert_eq!(ev[0].instrument_id, ids[i], "pass {pass}, series {i}");
            }
        }
        assert_eq!(f.stats().series, N as u64);
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(f.bbo(id).0.bid_price, (100 + i as i64) * 10_000_000, "series {i}: premium code B");
        }
    }

    #[test]
    fn every_message_is_counted() {
        let mut f = OpraBinaryFeed::new(1);
        let mut ctl = Vec::new();
        build::header(&mut ctl, b'O', b'H', b'C', b' ', 0);
        let mut oi = Vec::new();
        build::header(&mut oi, b'C', b'd', b' ', b' ', 0);
        oi.extend_from_slice(&[b' '; 18]);
        // Table full for the second series.
        let (d, ev) = run(&mut f, &[&ctl, &oi, &short(b"A", b' ', 1, 1, &[]), &short(b"B", b' ', 1, 1, &[])], 1);
        assert_eq!(d, Decoded { messages: 4, decoded: 4, undecodable: 0 });
        assert_eq!(ev.len(), 3, "status, and the first quote's two sides");
        let s = f.stats();
        assert_eq!((s.status, s.other, s.quotes, s.rejected), (1, 1, 1, 1));
        assert_eq!(s.messages, 4);
        // A block cut short: the message it cannot hold, and the rest, are undecodable.
        let blk = build::block(5, (0, 0), b'O', &[&ctl, &short(b"A", b' ', 1, 1, &[])]);
        let cut = &blk[..blk.len() - 6];
        let mut cut = cut.to_vec();
        let n = cut.len() as u16;
        cut[1..3].copy_from_slice(&n.to_be_bytes());
        let mut out = EventBatch::default();
        let d = f.decode(&Packet { payload: &cut, seq: 5, count: 2, arrival_ns: 0, prefetched: false }, &mut out);
        assert_eq!(d, Decoded { messages: 2, decoded: 1, undecodable: 1 });
        // Not a block: what the arbitrator announced.
        let d = f.decode(&Packet { payload: b"xx", seq: 7, count: 3, arrival_ns: 0, prefetched: false }, &mut out);
        assert_eq!(d, Decoded { messages: 3, decoded: 0, undecodable: 3 });
        assert_eq!(f.stats().bad_blocks, 1);
    }
}

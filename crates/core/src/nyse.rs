//! NYSE Integrated Feed packets (the XDP v2.1 and Pillar v2.5 layouts) as normalized
//! events, with full-depth books per symbol index.
//!
//! | type | message | event |
//! |---|---|---|
//! | 100, 106 | add order, add order refresh | `add` (side `B` bid, `S` ask) |
//! | 101 | modify order (same id, new price and volume) | `modify` (`order_id` = `aux` = the id) |
//! | 102 | delete order | `delete` |
//! | 103 | order execution | `execute` (`aux` the trade id; not printable: [`flags::NON_PRINTABLE`]) |
//! | 104 | replace order | `modify` (`aux` the old id, `order_id` the new) |
//! | 110, 111 | non-displayed trade, cross trade | `trade` |
//! | 105 | imbalance | `imbalance` (reference price, total imbalance quantity, its side) |
//! | 32 | symbol clear | `clear`: the symbol's book is emptied (a refresh rebuilds it) |
//! | 1, 3, 34, every other type | sequence number reset, symbol index mapping, security status... | `status` |
//!
//! `instrument_id` is the symbol index. The symbol index mapping (type 3) gives the symbol
//! and the price scale: a price is the integer on the wire over 10^scale, into the 1e-9
//! schema exactly. An add, modify or replace of a symbol whose mapping has not been seen
//! cannot be priced: it is counted undecodable (`unmapped`), never given a made-up price.
//! `ts_event` is the latest source time reference (type 2; the packet's send time before
//! the first) in seconds, plus the message's SourceTimeNS; for a message with no source
//! time of its own (types 1, 2, 3 and the like) the packet's send time; `sequence` the packet's
//! sequence number plus the message's place in it.
//!
//! Delivery flags: original, retransmitted and refresh packets are decoded alike (the
//! arbitrator has already dropped duplicates). A sequence number reset (type 1) while
//! orders are live marks every book stale, as a gap does: the publisher follows it with a
//! refresh, whose symbol clear (type 32) empties a book and trusts it again before the
//! refreshed orders arrive.
//!
//! Every decoded message gives one event and one book outcome, so `decoded == book
//! outcomes` holds as for ITCH.

use std::collections::BTreeMap;

use serde::Serialize;
use tickplant_wire::xdp;
use tickplant_wire::xdp_integrated::{at, Dialect};

use crate::arb::GapReport;
use crate::book::Books;
use crate::event::{flags, Bbo, Event, EventAction, Side};
use crate::feed::{Decoded, EventBatch, FeedDecoder, Packet};
use crate::itch::SymbolDirectory;

/// What the decoder counted beyond the books' outcomes.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct NyseStats {
    /// Messages by type number.
    pub by_type: BTreeMap<String, u64>,
    /// Adds, modifies and replaces of symbols without a mapping (undecodable).
    pub unmapped: u64,
    /// Packets by delivery flag.
    pub by_delivery_flag: BTreeMap<String, u64>,
    /// Sequence number resets that marked the books stale.
    pub resets_with_live_orders: u64,
    /// Symbol clears.
    pub symbol_clears: u64,
}

/// A mapped symbol: its name and the multiplier from its wire prices to 1e-9 units.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    mult: i64,
}

/// The NYSE XDP Integrated Feed decoder, with books.
#[derive(Debug)]
pub struct NyseXdpFeed {
    /// `nyse-xdp` or `nyse-pillar`: the fields read sit at the same offsets in both.
    name: &'static str,
    books: Books,
    pub dir: SymbolDirectory,
    /// By symbol index (dense: NYSE indexes are small integers).
    symbols: Vec<Option<Symbol>>,
    /// Seconds of the latest source time reference (0: none yet).
    source_time: u32,
    /// Boxed: the feed is one variant of the pipeline's `AnyFeed`, which is as large as its
    /// largest.
    by_type: Box<[u64; 256]>,
    /// Delivery flags run to 21; anything above counts under 31.
    by_flag: [u64; 32],
    unmapped: u64,
    resets: u64,
    clears: u64,
    named: crate::itch::NamedQueue,
}

#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

#[inline(always)]
fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |x| u64::from_le_bytes(x.try_into().unwrap_or_default()))
}

/// 10^(9 - scale), for scales 0..=9.
const MULT: [i64; 10] = [1_000_000_000, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1];

impl NyseXdpFeed {
    /// The XDP v2.1 layout's decoder.
    pub fn new(books: Books) -> NyseXdpFeed {
        Self::with_dialect(books, Dialect::Xdp21)
    }
    /// The decoder of either layout (Pillar v2.5 keeps every field read here where v2.1
    /// has it: `xdp_integrated`'s tests hold them equal).
    pub fn with_dialect(books: Books, d: Dialect) -> NyseXdpFeed {
        NyseXdpFeed {
            name: match d {
                Dialect::Xdp21 => "nyse-xdp",
                Dialect::Pillar25 => "nyse-pillar",
            },
            books,
            dir: SymbolDirectory::new(),
            symbols: Vec::new(),
            source_time: 0,
            by_type: Box::new([0; 256]),
            by_flag: [0; 32],
            unmapped: 0,
            resets: 0,
            clears: 0,
            named: crate::itch::NamedQueue::default(),
        }
    }
    pub fn books(&self) -> &Books {
        &self.books
    }
    pub fn into_books(self) -> (Books, SymbolDirectory) {
        (self.books, self.dir)
    }
    pub fn stats(&self) -> NyseStats {
        let named = |a: &[u64]| (0..a.len()).filter(|&i| a[i] > 0).map(|i| (i.to_string(), a[i])).collect();
        NyseStats {
            by_type: named(&self.by_type[..]),
            unmapped: self.unmapped,
            by_delivery_flag: named(&self.by_flag),
            resets_with_live_orders: self.resets,
            symbol_clears: self.clears,
        }
    }
    /// Messages by type, as the report lists them.
    pub fn by_type(&self) -> BTreeMap<String, u64> {
        self.stats().by_type
    }

    fn mult(&self, index: u32) -> Option<i64> {
        self.symbols.get(index as usize).copied().flatten().map(|s| s.mult)
    }

    /// The symbol index mapping: name and price scale.
    fn map_symbol(&mut self, b: &[u8]) {
        let index = le32(b, at::mapping::SYMBOL_INDEX);
        let name = &b[at::mapping::SYMBOL..at::mapping::SYMBOL + at::mapping::SYMBOL_LEN];
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        let mut sym = [b' '; 8];
        let n = name.len().min(8);
        sym[..n].copy_from_slice(&name[..n]);
        let scale = b[at::mapping::PRICE_SCALE_CODE];
        let i = index as usize;
        // An index beyond the books' instruments cannot hold orders anyway (the books count
        // those adds as bad instruments): the table stays bounded.
        if i < self.books.config().max_instruments {
            if self.symbols.len() <= i {
                self.symbols.resize(i + 1, None);
            }
            self.symbols[i] = MULT.get(usize::from(scale)).map(|&mult| Symbol { mult });
        }
        if self.dir.insert(index, sym) {
            self.named.push(index);
        }
    }

    /// The event of one message (its book outcome applied by the caller); `None` when it
    /// cannot be priced.
    #[inline]
    fn event(&mut self, t: u16, b: &[u8], base: Event) -> Option<Event> {
        let price = |raw: u32, m: i64| i64::from(raw) * m;
        let mut e = base;
        e.ts_event = u64::from(self.source_time) * 1_000_000_000 + u64::from(le32(b, at::SOURCE_TIME_NS));
        e.instrument_id = le32(b, at::SYMBOL_INDEX);
        match t {
            100 | 106 => {
                let r = if t == 106 {
                    (at::refresh::ORDER_ID, at::refresh::PRICE, at::refresh::VOLUME, at::refresh::SIDE)
                } else {
                    (at::add::ORDER_ID, at::add::PRICE, at::add::VOLUME, at::add::SIDE)
                };
                if t == 106 {
                    e.instrument_id = le32(b, at::refresh::SYMBOL_INDEX);
                    e.ts_event =
                        u64::from(le32(b, 4)) * 1_000_000_000 + u64::from(le32(b, at::refresh::SOURCE_TIME_NS));
                }
                let m = self.mult(e.instrument_id)?;
                e.action = EventAction::Add;
                e.order_id = le64(b, r.0);
                e.price = price(le32(b, r.1), m);
                e.size = le32(b, r.2);
                e.side = match b[r.3] {
                    b'B' => Side::Bid,
                    b'S' => Side::Ask,
                    _ => Side::None,
                };
            }
            101 => {
                let m = self.mult(e.instrument_id)?;
                e.action = EventAction::Modify;
                e.order_id = le64(b, at::modify::ORDER_ID);
                e.aux = e.order_id;
                e.price = price(le32(b, at::modify::PRICE), m);
                e.size = le32(b, at::modify::VOLUME);
            }
            102 => {
                e.action = EventAction::Delete;
                e.order_id = le64(b, at::delete::ORDER_ID);
            }
            103 => {
                e.action = EventAction::Execute;
                e.order_id = le64(b, at::execution::ORDER_ID);
                e.aux = u64::from(le32(b, at::execution::TRADE_ID));
                // Unmapped: the book fills in the order's own price.
                e.price = self.mult(e.instrument_id).map_or(0, |m| price(le32(b, at::execution::PRICE), m));
                e.size = le32(b, at::execution::VOLUME);
                if b[at::execution::PRINTABLE] == 0 {
                    e.flags |= flags::NON_PRINTABLE;
                }
            }
            104 => {
                let m = self.mult(e.instrument_id)?;
                e.action = EventAction::Modify;
                e.aux = le64(b, at::replace::ORDER_ID);
                e.order_id = le64(b, at::replace::NEW_ORDER_ID);
                e.price = price(le32(b, at::replace::PRICE), m);
                e.size = le32(b, at::replace::VOLUME);
            }
            110 | 111 => {
                e.action = EventAction::Trade;
                e.aux = u64::from(le32(b, at::trade::ID));
                e.price = self.mult(e.instrument_id).map_or(0, |m| price(le32(b, at::trade::PRICE), m));
                e.size = le32(b, at::trade::VOLUME);
            }
            _ => {
                // SourceTime, SourceTimeNS, SymbolIndex (or none: instrument 0).
                let timed = matches!(t, 32 | 34 | 105 | 223);
                e.instrument_id = if timed { le32(b, at::timed::SYMBOL_INDEX) } else { 0 };
                e.ts_event = if timed {
                    u64::from(le32(b, at::timed::SOURCE_TIME)) * 1_000_000_000
                        + u64::from(le32(b, at::timed::SOURCE_TIME_NS))
                } else {
                    base.ts_event
                };
                e.action = EventAction::Status;
                match t {
                    3 => {
                        self.map_symbol(b);
                        e.instrument_id = le32(b, at::mapping::SYMBOL_INDEX);
                    }
                    2 => self.source_time = le32(b, at::time_reference::SOURCE_TIME),
                    1 if self.books.live_orders() > 0 => {
                        self.books.mark_all_stale();
                        self.resets += 1;
                    }
                    32 => {
                        self.books.clear_instrument(e.instrument_id);
                        self.clears += 1;
                        e.action = EventAction::Clear;
                    }
                    105 => {
                        e.action = EventAction::Imbalance;
                        e.price =
                            self.mult(e.instrument_id).map_or(0, |m| price(le32(b, at::imbalance::REFERENCE_PRICE), m));
                        e.size = le32(b, at::imbalance::TOTAL_IMBALANCE_QTY);
                        e.side = match b[at::imbalance::IMBALANCE_SIDE] {
                            b'B' => Side::Bid,
                            b'S' => Side::Ask,
                            _ => Side::None,
                        };
                    }
                    _ => {}
                }
            }
        }
        Some(e)
    }
}

/// The length a message of type `t` must have for the fields read from it.
const fn min_len(t: u16) -> usize {
    match t {
        100 => at::add::LEN,
        101 => at::modify::LEN,
        102 => at::delete::LEN,
        103 => at::execution::LEN,
        104 => at::replace::LEN,
        106 => at::refresh::LEN,
        110 | 111 => at::trade::LEN,
        105 => at::imbalance::LEN,
        3 => at::mapping::LEN,
        2 => at::time_reference::LEN,
        32 | 34 | 223 => at::timed::LEN,
        _ => 4,
    }
}

impl FeedDecoder for NyseXdpFeed {
    fn feed(&self) -> &'static str {
        self.name
    }

    /// Decode the packet's messages and apply each to the books. A packet that is not XDP
    /// counts every message the arbitrator announced as undecodable; a message shorter than
    /// its type, and those after one that breaks the packet, likewise.
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
        let Ok(pk) = xdp::Packet::new_checked(p.payload) else {
            return Decoded { messages: u64::from(p.count), decoded: 0, undecodable: u64::from(p.count) };
        };
        let announced = u64::from(pk.number_msgs());
        let mut d = Decoded { messages: announced, ..Decoded::default() };
        self.by_flag[usize::from(pk.delivery_flag().min(31))] += 1;
        if self.source_time == 0 {
            self.source_time = pk.send_time();
        }
        // Messages without a source time of their own (sequence number reset, source time
        // reference, symbol index mapping, ...) happened when the packet was sent.
        let sent = u64::from(pk.send_time()) * 1_000_000_000 + u64::from(pk.send_time_ns());
        let base = Event { ts_recv: p.arrival_ns, ts_event: sent, ..Event::default() };
        let mut seen = 0u64;
        for (k, m) in pk.messages().enumerate() {
            seen += 1;
            let Ok((_, m)) = m else {
                break;
            };
            self.by_type[usize::from(m.msg_type.min(255))] += 1;
            if m.bytes.len() < min_len(m.msg_type) {
                d.undecodable += 1;
                continue;
            }
            let base =
                Event { sequence: u64::from(pk.seq_num()) + k as u64, msg_type: m.msg_type.min(255) as u8, ..base };
            let Some(mut e) = self.event(m.msg_type, m.bytes, base) else {
                self.unmapped += 1;
                d.undecodable += 1;
                continue;
            };
            self.books.apply(&mut e);
            out.push(e);
            d.decoded += 1;
        }
        // Messages the header announced that the packet did not hold (or after a broken one).
        d.undecodable += announced.saturating_sub(seen) + u64::from(seen > d.decoded + d.undecodable);
        d
    }

    /// Every book is stale from here on.
    fn gap(&mut self, _g: &GapReport) {
        self.books.mark_all_stale();
    }

    fn take_named(&mut self) -> Option<(u32, [u8; 8])> {
        self.named.take(&self.dir)
    }

    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]) {
        (self.books.bbo(instrument), self.dir.get(instrument).copied().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::BookConfig;
    use tickplant_wire::xdp_integrated::layout;

    fn msg(t: u16, fill: impl FnOnce(&mut [u8])) -> (u16, Vec<u8>) {
        let mut m = vec![0u8; 4 + layout(t).unwrap().body_len()];
        fill(&mut m);
        (t, m[4..].to_vec())
    }

    fn packet(seq: u32, msgs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut p = vec![0u8; xdp::HEADER_LEN];
        for (t, b) in msgs {
            xdp::push_message(&mut p, *t, b);
        }
        xdp::Repr {
            pkt_size: p.len() as u16,
            delivery_flag: 11,
            number_msgs: msgs.len() as u8,
            seq_num: seq,
            send_time: 100,
            send_time_ns: 0,
        }
        .emit(&mut p[..xdp::HEADER_LEN]);
        p
    }

    fn mapping(index: u32, sym: &[u8], scale: u8) -> (u16, Vec<u8>) {
        msg(3, |b| {
            b[at::mapping::SYMBOL_INDEX..at::mapping::SYMBOL_INDEX + 4].copy_from_slice(&index.to_le_bytes());
            b[at::mapping::SYMBOL..at::mapping::SYMBOL + sym.len()].copy_from_slice(sym);
            b[at::mapping::PRICE_SCALE_CODE] = scale;
        })
    }

    fn add(index: u32, id: u64, price: u32, volume: u32, side: u8) -> (u16, Vec<u8>) {
        msg(100, |b| {
            b[at::SYMBOL_INDEX..at::SYMBOL_INDEX + 4].copy_from_slice(&index.to_le_bytes());
            b[at::add::ORDER_ID..at::add::ORDER_ID + 8].copy_from_slice(&id.to_le_bytes());
            b[at::add::PRICE..at::add::PRICE + 4].copy_from_slice(&price.to_le_bytes());
            b[at::add::VOLUME..at::add::VOLUME + 4].copy_from_slice(&volume.to_le_bytes());
            b[at::add::SIDE] = side;
        })
    }

    fn run(f: &mut NyseXdpFeed, seq: u32, msgs: &[(u16, Vec<u8>)]) -> (Decoded, Vec<Event>) {
        let p = packet(seq, msgs);
        let mut out = EventBatch::default();
        let d = f
            .decode(&Packet { payload: &p, seq: u64::from(seq), count: 0, arrival_ns: 1, prefetched: false }, &mut out);
        (d, out.events().to_vec())
    }

    #[test]
    fn books_follow_the_messages_and_prices_their_scale() {
        let mut f =
            NyseXdpFeed::new(Books::new(BookConfig { max_orders: 64, max_instruments: 16, ..Default::default() }));
        // An add before its mapping cannot be priced: undecodable, counted.
        let (d, ev) = run(&mut f, 1, &[add(5, 1, 1_234_500, 100, b'B')]);
        assert_eq!((d.messages, d.decoded, d.undecodable, ev.len()), (1, 0, 1, 0));
        assert_eq!(f.stats().unmapped, 1);
        // Scale 4: 123.45 is 1_234_500 on the wire.
        let (d, ev) =
            run(&mut f, 2, &[mapping(5, b"IBM", 4), add(5, 1, 1_234_500, 100, b'B'), add(5, 2, 1_235_000, 50, b'S')]);
        assert_eq!((d.decoded, d.undecodable), (3, 0));
        assert_eq!(
            (ev[1].action, ev[1].price, ev[1].side, ev[1].sequence),
            (EventAction::Add, 123_450_000_000, Side::Bid, 3)
        );
        assert_eq!(f.take_named(), Some((5, *b"IBM     ")));
        let (bbo, sym) = f.market(5);
        assert_eq!(
            (bbo.bid_price, bbo.ask_price, bbo.bid_size, &sym),
            (123_450_000_000, 123_500_000_000, 100, b"IBM     ")
        );
        // Modify (same id), an execution not to print, a replace.
        let modify = msg(101, |b| {
            b[at::SYMBOL_INDEX] = 5;
            b[at::modify::ORDER_ID] = 1;
            b[at::modify::PRICE..at::modify::PRICE + 4].copy_from_slice(&1_234_000u32.to_le_bytes());
            b[at::modify::VOLUME] = 80;
        });
        let exec = msg(103, |b| {
            b[at::SYMBOL_INDEX] = 5;
            b[at::execution::ORDER_ID] = 2;
            b[at::execution::VOLUME] = 20;
        });
        let replace = msg(104, |b| {
            b[at::SYMBOL_INDEX] = 5;
            b[at::replace::ORDER_ID] = 1;
            b[at::replace::NEW_ORDER_ID] = 9;
            b[at::replace::PRICE..at::replace::PRICE + 4].copy_from_slice(&1_233_000u32.to_le_bytes());
            b[at::replace::VOLUME] = 70;
        });
        let (_, ev) = run(&mut f, 5, &[modify, exec, replace]);
        assert_eq!(ev[1].flags & flags::NON_PRINTABLE, flags::NON_PRINTABLE);
        assert_eq!(ev[1].price, 123_500_000_000, "priced 0 on the wire: the book gives the order's");
        let (bbo, _) = f.market(5);
        assert_eq!((bbo.bid_price, bbo.bid_size, bbo.ask_size), (123_300_000_000, 70, 30));
        // A sequence number reset with live orders: stale; a symbol clear empties and trusts.
        let (_, ev) = run(&mut f, 8, &[msg(1, |_| {}), add(5, 3, 1_000_000, 1, b'B')]);
        assert_ne!(ev[1].flags & flags::BOOK_STALE, 0);
        let clear = msg(32, |b| b[at::timed::SYMBOL_INDEX] = 5);
        let (_, ev) = run(&mut f, 10, &[clear, add(5, 4, 1_000_000, 1, b'B')]);
        assert_eq!(ev[0].action, EventAction::Clear);
        assert_eq!(ev[1].flags & flags::BOOK_STALE, 0);
        assert_eq!(f.books().book(5).map(|b| b.best_bid().map(|l| l.shares)), Some(Some(1)));
        assert_eq!(f.books().live_orders(), 1);
        let s = f.books().stats();
        assert_eq!(s.total(), 10, "one outcome a decoded message");
    }
}

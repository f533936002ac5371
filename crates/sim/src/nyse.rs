//! A NYSE Integrated Feed day (XDP v2.1 layout): the realistic ITCH day of [`crate::itch`]
//! written as the NYSE feed would carry it, so that the same final books are the ground
//! truth ([`crate::ItchDay::final_books`], prices at scale 4).
//!
//! The translation, message by message: the stock directory becomes symbol index mappings
//! (type 3: index = the stock locate, price scale 4); adds (`A`, `F`) add orders (100);
//! executions (`E` at the order's price, `C` at its own) order executions (103); partial
//! cancels (`X`) modify orders (101: same id and price, the shares left); deletes (`D`)
//! delete orders (102); replaces (`U`) replace orders (104); non-displayed trades (`P`)
//! and crosses (`Q`) their XDP kinds (110, 111); trading actions (`H`) security status
//! messages (34); imbalance indicators (`I`) imbalance messages (105). A source time
//! reference (type 2) opens every second; the other ITCH types have no XDP message and are
//! left out. Packets carry up to `max_per_packet` messages, delivery flag 11 (original),
//! sequence numbers from 1.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tickplant_wire::build::{write_udp_frame, Flow};
use tickplant_wire::itch50::Message;
use tickplant_wire::xdp;
use tickplant_wire::xdp_integrated::{at, layout_of, Dialect};

/// What a translation wrote.
#[derive(Debug, Clone, Default)]
pub struct NyseDay {
    pub messages: u64,
    pub packets: u64,
    /// XDP messages by type.
    pub by_type: std::collections::BTreeMap<u16, u64>,
    /// The symbol index each message concerns, by sequence number - 1 (0: none).
    pub instruments: Vec<u32>,
}

/// One message of type `t`, its fields written by `fill` into a zeroed body of the
/// dialect's size (the fields written sit at the same offsets in both).
fn message(d: Dialect, t: u16, fill: impl FnOnce(&mut [u8])) -> (u16, Vec<u8>) {
    let len = 4 + layout_of(d, t).map_or(0, |l| l.body_len());
    let mut m = vec![0u8; len];
    fill(&mut m);
    (t, m[4..].to_vec())
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The order and trade messages' common head: SourceTimeNS, SymbolIndex.
fn head(b: &mut [u8], ns: u32, index: u32) {
    put32(b, at::SOURCE_TIME_NS, ns);
    put32(b, at::SYMBOL_INDEX, index);
}

/// Translate an ITCH day into NYSE packets of a dialect (XDP v2.1 or Pillar v2.5), calling
/// `emit(timestamp_ns, frame)` for each.
pub fn translate_itch_day(
    d: Dialect,
    messages: &[Message],
    seed: u64,
    max_per_packet: u8,
    midnight_ns: u64,
    flow: &Flow,
    mut emit: impl FnMut(u64, &[u8]),
) -> NyseDay {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x0057_5345);
    // Live orders: id -> (price, shares left).
    let mut live: HashMap<u64, (u32, u32)> = HashMap::new();
    let mut out: Vec<(u64, u16, Vec<u8>, u32)> = Vec::with_capacity(messages.len());
    let mut second = u64::MAX;
    for m in messages {
        let (locate, _, ts) = m.header();
        let t_ns = midnight_ns + ts;
        let (secs, ns) = (t_ns / 1_000_000_000, (t_ns % 1_000_000_000) as u32);
        if secs != second {
            second = secs;
            out.push((t_ns, 2, message(d, 2, |b| put32(b, at::time_reference::SOURCE_TIME, secs as u32)).1, 0));
        }
        let index = u32::from(locate);
        let msg = match m {
            Message::StockDirectory(r) => Some(message(d, 3, |b| {
                put32(b, at::mapping::SYMBOL_INDEX, index);
                let sym = tickplant_wire::itch50::trim_stock(&r.stock);
                b[at::mapping::SYMBOL..at::mapping::SYMBOL + sym.len()].copy_from_slice(sym);
                b[at::mapping::PRICE_SCALE_CODE] = 4;
            })),
            Message::AddOrder(_) | Message::AddOrderMpid(_) => {
                let a = match m {
                    Message::AddOrderMpid(f) => f.add_order(),
                    Message::AddOrder(a) => *a,
                    _ => unreachable!("matched above"),
                };
                live.insert(a.order_reference_number, (a.price, a.shares));
                Some(message(d, 100, |b| {
                    head(b, ns, index);
                    put64(b, at::add::ORDER_ID, a.order_reference_number);
                    put32(b, at::add::PRICE, a.price);
                    put32(b, at::add::VOLUME, a.shares);
                    b[at::add::SIDE] = if a.buy_sell_indicator == b'B' { b'B' } else { b'S' };
                }))
            }
            Message::OrderExecuted(x) => live.get_mut(&x.order_reference_number).map(|o| {
                o.1 = o.1.saturating_sub(x.executed_shares);
                let price = o.0;
                message(d, 103, |b| {
                    head(b, ns, index);
                    put64(b, at::execution::ORDER_ID, x.order_reference_number);
                    put32(b, at::execution::TRADE_ID, x.match_number as u32);
                    put32(b, at::execution::PRICE, price);
                    put32(b, at::execution::VOLUME, x.executed_shares);
                    b[at::execution::PRINTABLE] = 1;
                })
            }),
            Message::OrderExecutedWithPrice(x) => live.get_mut(&x.order_reference_number).map(|o| {
                o.1 = o.1.saturating_sub(x.executed_shares);
                message(d, 103, |b| {
                    head(b, ns, index);
                    put64(b, at::execution::ORDER_ID, x.order_reference_number);
                    put32(b, at::execution::TRADE_ID, x.match_number as u32);
                    put32(b, at::execution::PRICE, x.execution_price);
                    put32(b, at::execution::VOLUME, x.executed_shares);
                    b[at::execution::PRINTABLE] = u8::from(x.printable == b'Y');
                })
            }),
            Message::OrderCancel(x) => live.get_mut(&x.order_reference_number).map(|o| {
                o.1 = o.1.saturating_sub(x.cancelled_shares);
                let (price, left) = *o;
                message(d, 101, |b| {
                    head(b, ns, index);
                    put64(b, at::modify::ORDER_ID, x.order_reference_number);
                    put32(b, at::modify::PRICE, price);
                    put32(b, at::modify::VOLUME, left);
                })
            }),
            Message::OrderDelete(x) => {
                live.remove(&x.order_reference_number);
                Some(message(d, 102, |b| {
                    head(b, ns, index);
                    put64(b, at::delete::ORDER_ID, x.order_reference_number);
                }))
            }
            Message::OrderReplace(x) => {
                live.remove(&x.original_order_reference_number);
                live.insert(x.new_order_reference_number, (x.price, x.shares));
                Some(message(d, 104, |b| {
                    head(b, ns, index);
                    put64(b, at::replace::ORDER_ID, x.original_order_reference_number);
                    put64(b, at::replace::NEW_ORDER_ID, x.new_order_reference_number);
                    put32(b, at::replace::PRICE, x.price);
                    put32(b, at::replace::VOLUME, x.shares);
                }))
            }
            Message::Trade(x) => Some(message(d, 110, |b| {
                head(b, ns, index);
                put32(b, at::trade::ID, x.match_number as u32);
                put32(b, at::trade::PRICE, x.price);
                put32(b, at::trade::VOLUME, x.shares);
            })),
            Message::CrossTrade(x) => Some(message(d, 111, |b| {
                head(b, ns, index);
                put32(b, at::trade::ID, x.match_number as u32);
                put32(b, at::trade::PRICE, x.cross_price);
                put32(b, at::trade::VOLUME, x.shares.min(u64::from(u32::MAX)) as u32);
                b[at::trade::LEN - 1] = x.cross_type;
            })),
            Message::StockTradingAction(h) => Some(message(d, 34, |b| {
                put32(b, at::timed::SOURCE_TIME, secs as u32);
                put32(b, at::timed::SOURCE_TIME_NS, ns);
                put32(b, at::timed::SYMBOL_INDEX, index);
                // SecurityStatus: `T` trading, `H` halted (the ITCH trading state's letters).
                b[at::timed::LEN + 4] = h.trading_state;
            })),
            Message::Noii(i) => Some(message(d, 105, |b| {
                put32(b, at::timed::SOURCE_TIME, secs as u32);
                put32(b, at::timed::SOURCE_TIME_NS, ns);
                put32(b, at::timed::SYMBOL_INDEX, index);
                put32(b, at::imbalance::REFERENCE_PRICE, i.current_reference_price);
                put32(b, at::imbalance::TOTAL_IMBALANCE_QTY, i.imbalance_shares.min(u64::from(u32::MAX)) as u32);
                b[at::imbalance::IMBALANCE_SIDE] = i.imbalance_direction;
            })),
            _ => None,
        };
        if let Some((t, body)) = msg {
            out.push((t_ns, t, body, index));
        }
    }
    let mut day = NyseDay::default();
    let (mut payload, mut frame) = (Vec::with_capacity(1500), Vec::with_capacity(1600));
    let (mut seq, mut i, mut ident, mut last_ts) = (1u32, 0usize, 0u16, 0u64);
    while i < out.len() {
        let n = usize::from(rng.gen_range(1..=max_per_packet.max(1))).min(out.len() - i);
        payload.clear();
        payload.resize(xdp::HEADER_LEN, 0);
        for (_, t, body, index) in &out[i..i + n] {
            xdp::push_message(&mut payload, *t, body);
            *day.by_type.entry(*t).or_default() += 1;
            day.instruments.push(*index);
        }
        let ts = out[i + n - 1].0.max(last_ts + 1);
        last_ts = ts;
        xdp::Repr {
            pkt_size: payload.len() as u16,
            delivery_flag: xdp::delivery_flag::ORIGINAL,
            number_msgs: n as u8,
            seq_num: seq,
            send_time: (ts / 1_000_000_000) as u32,
            send_time_ns: (ts % 1_000_000_000) as u32,
        }
        .emit(&mut payload[..xdp::HEADER_LEN]);
        write_udp_frame(flow, ident, &payload, &mut frame);
        emit(ts, &frame);
        ident = ident.wrapping_add(1);
        seq = seq.wrapping_add(n as u32);
        i += n;
        day.packets += 1;
        day.messages += n as u64;
    }
    day
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::{ethernet, ipv4, udp, xdp_integrated};

    #[test]
    fn every_message_has_its_layout_and_the_sequence_runs_on() {
        let day =
            crate::generate_itch(&crate::ItchGenConfig { seed: 2, symbols: 10, messages: 20_000, target_live: 0 });
        let off = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
        let (mut expect, mut n) = (1u32, 0u64);
        let got = translate_itch_day(Dialect::Xdp21, &day.messages, 2, 8, 0, &Flow::default(), |_, f| {
            let p = xdp::Packet::new_checked(&f[off..]).unwrap();
            assert_eq!(p.seq_num(), expect);
            for m in p.messages() {
                let (_, m) = m.unwrap();
                let (l, fields) = xdp_integrated::fields(&m).unwrap();
                assert_eq!(m.bytes.len(), 4 + l.body_len());
                assert_eq!(fields.len(), l.fields.len());
                n += 1;
            }
            expect += u32::from(p.number_msgs());
        });
        assert_eq!(n, got.messages);
        for t in [2, 3, 100, 101, 102, 103, 104, 110] {
            assert!(got.by_type.get(&t).is_some_and(|&c| c > 0), "type {t}: {:?}", got.by_type);
        }
    }
}

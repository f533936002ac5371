//! Property test: the full-depth books equal a naive reference book (a map of orders whose
//! levels are recomputed from scratch) on random sequences of adds, executes, cancels,
//! deletes and replaces, including unknown ids, duplicate ids and overfills; the
//! accounting balances.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use tickplant_core::book::{BookConfig, Books};
use tickplant_core::event::{flags, Event, EventAction, Side};

#[derive(Debug, Clone)]
enum Op {
    Add { id: u64, bid: bool, px: i64, sz: u32, inst: u32 },
    Exec { id: u64, sz: u32 },
    Cancel { id: u64, sz: u32 },
    Delete { id: u64 },
    Replace { old: u64, new: u64, px: i64, sz: u32 },
    Trade,
}

/// A price on the books' 100-unit grid near the first, off the grid, or outside the ladder's
/// window (both of which live in the overflow list).
fn px() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => (1i64..12).prop_map(|p| p * 100),
        1 => (1i64..12).prop_map(|p| p * 100 + 50),
        1 => (1i64..4).prop_map(|p| 10_000_000 + p * 100),
    ]
}

/// An order's size: mostly small, now and then big enough that two or three at one price
/// pass `u32::MAX` shares (a ladder slot counts 32 bits, and moves such a level aside).
fn sz() -> impl Strategy<Value = u32> {
    prop_oneof![
        8 => 1u32..500,
        1 => 1_500_000_000u32..=u32::MAX,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    // Few ids and prices, so that ops often hit live orders, shared levels, and collisions.
    // A third of the ids are multiples of 64, which all hash to the order table's first
    // slot (64 slots here): long probe runs that wrap, and deletes that shift orders back
    // (an order in the overflow list takes its price along).
    let id = (0u64..40).prop_map(|i| if i % 3 == 0 { i << 6 } else { i });
    prop_oneof![
        4 => (id.clone(), any::<bool>(), px(), sz(), 0u32..3)
            .prop_map(|(id, bid, px, sz, inst)| Op::Add { id, bid, px, sz, inst }),
        2 => (id.clone(), sz()).prop_map(|(id, sz)| Op::Exec { id, sz }),
        1 => (id.clone(), sz()).prop_map(|(id, sz)| Op::Cancel { id, sz }),
        2 => id.clone().prop_map(|id| Op::Delete { id }),
        2 => (id.clone(), id, px(), sz()).prop_map(|(old, new, px, sz)| Op::Replace { old, new, px, sz }),
        1 => Just(Op::Trade),
    ]
}

#[derive(Clone, Copy)]
struct O {
    bid: bool,
    px: i64,
    sz: u32,
    inst: u32,
}

/// (instrument, is_bid) -> price -> (shares, orders)
type Levels = BTreeMap<(u32, bool), BTreeMap<i64, (u64, u32)>>;

fn levels(orders: &HashMap<u64, O>) -> Levels {
    let mut l: Levels = BTreeMap::new();
    for o in orders.values() {
        let e = l.entry((o.inst, o.bid)).or_default().entry(o.px).or_default();
        e.0 += u64::from(o.sz);
        e.1 += 1;
    }
    l
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn books_match_a_naive_reference(ops in proptest::collection::vec(op(), 1..300), batch in 1usize..8) {
        let mut books = Books::new(BookConfig { max_orders: 25, max_instruments: 3, tick: 100 });
        let mut model: HashMap<u64, O> = HashMap::new();
        let mut events = Vec::new();
        for op in &ops {
            let e = match *op {
                Op::Add { id, bid, px, sz, inst } => Event {
                    action: EventAction::Add, order_id: id, side: if bid { Side::Bid } else { Side::Ask },
                    price: px, size: sz, instrument_id: inst, ..Default::default()
                },
                Op::Exec { id, sz } => Event { action: EventAction::Execute, order_id: id, size: sz, ..Default::default() },
                Op::Cancel { id, sz } => Event { action: EventAction::Cancel, order_id: id, size: sz, ..Default::default() },
                Op::Delete { id } => Event { action: EventAction::Delete, order_id: id, ..Default::default() },
                Op::Replace { old, new, px, sz } => Event { action: EventAction::Modify, order_id: new, aux: old, price: px, size: sz, ..Default::default() },
                Op::Trade => Event { action: EventAction::Trade, size: 100, price: 5, ..Default::default() },
            };
            events.push(e);
        }
        // Apply in batches (the prefetching path) and check each event's outcome against the model.
        for chunk in events.chunks(batch) {
            let mut c = chunk.to_vec();
            books.apply_all(&mut c);
            for e in &c {
                match e.action {
                    EventAction::Add => {
                        let fits = !model.contains_key(&e.order_id) && model.len() < 25;
                        prop_assert_eq!(e.flags & flags::REJECTED == 0, fits);
                        if fits {
                            model.insert(e.order_id, O { bid: e.side == Side::Bid, px: e.price, sz: e.size, inst: e.instrument_id });
                        }
                    }
                    EventAction::Execute | EventAction::Cancel => match model.get_mut(&e.order_id) {
                        None => prop_assert!(e.flags & flags::UNKNOWN_ORDER != 0),
                        Some(o) => {
                            prop_assert_eq!(e.price, o.px);
                            if e.size >= o.sz { model.remove(&e.order_id); } else { o.sz -= e.size; }
                        }
                    },
                    EventAction::Delete => match model.remove(&e.order_id) {
                        None => prop_assert!(e.flags & flags::UNKNOWN_ORDER != 0),
                        Some(o) => prop_assert_eq!((e.price, e.size), (o.px, o.sz)),
                    },
                    EventAction::Modify => match model.get(&e.aux).copied() {
                        None => prop_assert!(e.flags & flags::UNKNOWN_ORDER != 0),
                        Some(o) => {
                            if e.order_id != e.aux && model.contains_key(&e.order_id) {
                                prop_assert!(e.flags & flags::REJECTED != 0);
                            } else {
                                model.remove(&e.aux);
                                model.insert(e.order_id, O { px: e.price, sz: e.size, ..o });
                            }
                        }
                    },
                    _ => {}
                }
            }
        }
        books.check_consistency().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(books.live_orders(), model.len());
        prop_assert_eq!(books.stats().total(), events.len() as u64);
        let want = levels(&model);
        for inst in 0..3u32 {
            for bid in [true, false] {
                let side = if bid { Side::Bid } else { Side::Ask };
                let got: Vec<(i64, u64, u32)> = books.book(inst).map(|b| b.depth(side, usize::MAX).map(|l| (l.price, l.shares, l.orders)).collect()).unwrap_or_default();
                let w = want.get(&(inst, bid));
                let mut exp: Vec<(i64, u64, u32)> = w.map(|m| m.iter().map(|(&p, &(s, n))| (p, s, n)).collect()).unwrap_or_default();
                if bid { exp.reverse(); }
                let best = books.book(inst).and_then(|b| if bid { b.best_bid() } else { b.best_ask() });
                prop_assert_eq!(best.map(|l| (l.price, l.shares, l.orders)), exp.first().copied(), "best of instrument {} {:?}", inst, side);
                prop_assert_eq!(got, exp, "instrument {} {:?}", inst, side);
            }
        }
    }
}

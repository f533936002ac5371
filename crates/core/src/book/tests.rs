use super::*;

/// The multiply gives the division's quotient wherever the ladder asks for one: every
/// tick from 1 to 5,000, ticks near the powers of two and near 2^26, round ones, and one
/// far past 2^26 (which takes the division, the multiply not being exact there), at
/// the window's edges, on the grid, and one either side of it.
#[test]
fn grid_quotient_is_the_division() {
    let mut ticks: Vec<i64> = (1..=5_000).collect();
    for k in 1..27 {
        ticks.extend([(1i64 << k) - 1, 1 << k, (1 << k) + 1]);
    }
    ticks.extend([
        10_000,
        100_000,
        1_000_000,
        BookConfig::CENT,
        5 * BookConfig::CENT,
        67_108_863,
        999_999_937,
        1 << 30,
    ]);
    for tick in ticks {
        let recip = tick_recip(tick);
        let top = LADDER_TICKS as i64 * tick;
        let mut ds = vec![0, 1, top - 1, top / 2, top / 3];
        for q in [0, 1, 2, 63, 64, 1000, 2047, 2048, 4094, 4095] {
            ds.extend([q * tick - 1, q * tick, q * tick + 1, q * tick + tick / 2]);
        }
        for d in ds.into_iter().filter(|&d| (0..top).contains(&d)) {
            assert_eq!(grid_quotient(d, tick, recip), d / tick, "tick {tick}, d {d}");
        }
    }
}

fn ev(action: EventAction, id: u64, side: Side, price: i64, size: u32) -> Event {
    Event { action, order_id: id, side, price, size, instrument_id: 1, ..Default::default() }
}

#[test]
fn adds_executes_cancels_deletes_replaces() {
    let mut b = Books::new(BookConfig { max_orders: 8, max_instruments: 4, tick: 2 });
    assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Bid, 100, 10)));
    assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Bid, 101, 5)));
    assert!(b.apply(&mut ev(EventAction::Add, 3, Side::Ask, 103, 7)));
    assert!(b.apply(&mut ev(EventAction::Add, 4, Side::Ask, 103, 1)));
    let bk = b.book(1).unwrap();
    assert_eq!(bk.best_bid(), Some(Level { price: 101, shares: 5, orders: 1 }));
    assert_eq!(bk.best_ask(), Some(Level { price: 103, shares: 8, orders: 2 }));
    let mut x = ev(EventAction::Execute, 2, Side::None, 0, 2);
    assert!(b.apply(&mut x));
    assert_eq!((x.side, x.price), (Side::Bid, 101));
    let mut c = ev(EventAction::Cancel, 2, Side::None, 0, 3);
    assert!(b.apply(&mut c));
    assert_eq!(b.book(1).unwrap().best_bid().unwrap().price, 100);
    let mut d = ev(EventAction::Delete, 3, Side::None, 0, 0);
    assert!(b.apply(&mut d));
    assert_eq!((d.size, d.price, d.side), (7, 103, Side::Ask));
    let mut u = Event { aux: 1, ..ev(EventAction::Modify, 9, Side::None, 99, 4) };
    assert!(b.apply(&mut u));
    assert_eq!(u.side, Side::Bid);
    let bk = b.book(1).unwrap();
    assert_eq!(bk.depth(Side::Bid, 5).collect::<Vec<_>>(), vec![Level { price: 99, shares: 4, orders: 1 }]);
    assert_eq!(bk.orders(), 2);
    b.check_consistency().unwrap();
    // Trades do not touch the book.
    assert!(!b.apply(&mut ev(EventAction::Trade, 0, Side::Bid, 99, 100)));
    assert_eq!(b.stats().applied, 8);
}

/// A ladder slot counts shares in 32 bits: a level past `u32::MAX` is kept aside, exact,
/// through adds, partial cancels, executes and the delete that empties it; the slot is
/// then an ordinary one again.
#[test]
fn a_level_past_four_billion_shares_stays_exact() {
    let mut b = Books::new(BookConfig { max_orders: 8, max_instruments: 4, tick: 2 });
    let big = 3_000_000_000u32;
    assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Ask, 100, big)));
    assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Ask, 100, big)));
    assert!(b.apply(&mut ev(EventAction::Add, 3, Side::Ask, 102, 5)));
    let level = |b: &Books| b.book(1).unwrap().best_ask().unwrap();
    assert_eq!(level(&b), Level { price: 100, shares: 6_000_000_000, orders: 2 });
    assert!(b.apply(&mut ev(EventAction::Add, 4, Side::Ask, 100, big)));
    assert_eq!(level(&b).shares, 9_000_000_000);
    assert!(b.apply(&mut ev(EventAction::Cancel, 1, Side::None, 0, 1_000_000_000)));
    assert!(b.apply(&mut ev(EventAction::Execute, 2, Side::None, 0, 7)));
    assert_eq!(level(&b), Level { price: 100, shares: 7_999_999_993, orders: 3 });
    b.check_consistency().unwrap();
    for id in [1, 2, 4] {
        assert!(b.apply(&mut ev(EventAction::Delete, id, Side::None, 0, 0)));
    }
    assert_eq!(level(&b), Level { price: 102, shares: 5, orders: 1 });
    assert!(b.apply(&mut ev(EventAction::Add, 5, Side::Ask, 100, 10)));
    assert_eq!(level(&b), Level { price: 100, shares: 10, orders: 1 });
    b.check_consistency().unwrap();
}

#[test]
fn config_limits_say_which_field() {
    let ok = BookConfig::default();
    assert!(ok.validate().is_ok());
    assert!(BookConfig { max_instruments: MAX_INSTRUMENTS, ..ok }.validate().is_ok());
    let e = BookConfig { max_instruments: MAX_INSTRUMENTS + 1, ..ok }.validate().unwrap_err().to_string();
    assert!(e.contains("book.max-instruments") && e.contains("262144"), "{e}");
    // A config past the limit built without `validate`: adds past it are refused and
    // counted, never packed into another instrument's bits.
    let mut b = Books::new(BookConfig { max_instruments: MAX_INSTRUMENTS + 10, ..ok });
    let mut e = Event { instrument_id: MAX_INSTRUMENTS as u32 + 1, ..ev(EventAction::Add, 1, Side::Bid, 100, 1) };
    assert!(!b.apply(&mut e));
    assert_eq!(b.stats().bad_instrument, 1);
    let mut e = Event { instrument_id: MAX_INSTRUMENTS as u32 - 1, ..ev(EventAction::Add, 2, Side::Ask, 100, 1) };
    assert!(b.apply(&mut e));
    let mut d = ev(EventAction::Delete, 2, Side::None, 0, 0);
    assert!(b.apply(&mut d));
    assert_eq!((d.instrument_id, d.side, d.price, d.size), (MAX_INSTRUMENTS as u32 - 1, Side::Ask, 100, 1));
    b.check_consistency().unwrap();
}

#[test]
fn bad_events_are_counted_not_applied() {
    let mut b = Books::new(BookConfig { max_orders: 3, max_instruments: 4, tick: 2 });
    let mut x = ev(EventAction::Delete, 42, Side::None, 0, 0);
    assert!(!b.apply(&mut x));
    assert_ne!(x.flags & flags::UNKNOWN_ORDER, 0);
    assert!(b.apply(&mut ev(EventAction::Add, 1, Side::Bid, 1, 1)));
    let mut dup = ev(EventAction::Add, 1, Side::Bid, 1, 1);
    assert!(!b.apply(&mut dup));
    assert_ne!(dup.flags & flags::REJECTED, 0);
    assert!(b.apply(&mut ev(EventAction::Add, 0, Side::Ask, 5, 1)));
    assert!(b.apply(&mut ev(EventAction::Add, 2, Side::Bid, 1, 1)));
    assert!(!b.apply(&mut ev(EventAction::Add, 3, Side::Bid, 1, 1)), "a table of 3 is full");
    assert!(!b.apply(&mut Event { instrument_id: 9, ..ev(EventAction::Add, 5, Side::Bid, 1, 1) }));
    assert!(b.apply(&mut ev(EventAction::Execute, 1, Side::None, 0, 5)), "overfill removes the order");
    let s = *b.stats();
    assert_eq!((s.unknown_order, s.duplicate_order, s.table_full, s.bad_instrument, s.overfill), (1, 1, 1, 1, 1));
    assert_eq!(s.total(), 8);
    b.check_consistency().unwrap();
    b.mark_all_stale();
    let mut a = ev(EventAction::Add, 7, Side::Bid, 1, 1);
    b.apply(&mut a);
    assert_ne!(a.flags & flags::BOOK_STALE, 0);
    assert!(b.book(1).unwrap().is_stale());
    b.clear_stale();
    assert!(!b.any_stale());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// The table against a set: random adds and deletes in a table of 64 slots (32 orders), ids
    /// near each other (long runs, as a day's sequential ids make) and far apart
    /// (collisions and runs that wrap past the last slot).
    #[test]
    fn table_agrees_with_a_set(ops in proptest::collection::vec((proptest::prelude::any::<bool>(), 1u64..200, proptest::prelude::any::<bool>()), 1..400)) {
        let mut t = OrderTable::new(32, |_, _| {});
        // id -> the price kept beside the table, for the ids whose level is in the
        // overflow list (every third): it must follow its order through the shifts.
        let mut want = std::collections::HashMap::new();
        for (add, id, far) in ops {
            let id = if far { id * 64 + 60 } else { id };
            let over = id % 3 == 0;
            if add && want.len() < 32 {
                let o = Order { id, meta: if over { META_OVER } else { 0 }, ..Default::default() };
                let fresh = !want.contains_key(&id);
                proptest::prop_assert_eq!(t.insert(o), fresh);
                if fresh {
                    let i = t.find(id).expect("inserted");
                    t.prices[i] = id as i64 * 7;
                    want.insert(id, id as i64 * 7);
                }
            } else if let Some(i) = t.find(id) {
                t.remove_at(i);
                proptest::prop_assert!(want.remove(&id).is_some());
            } else {
                proptest::prop_assert!(!want.contains_key(&id));
            }
            proptest::prop_assert_eq!(t.len, want.len());
        }
        for id in 1..200u64 {
            for id in [id, id * 64 + 60] {
                proptest::prop_assert_eq!(t.find(id).map(|i| t.slots[i].id), want.contains_key(&id).then_some(id));
                if let (Some(i), true) = (t.find(id), id % 3 == 0) {
                    proptest::prop_assert_eq!(t.prices[i], want[&id], "the price of {} followed it", id);
                }
            }
        }
    }
}

#[test]
fn table_deletes_keep_probe_runs() {
    let mut t = OrderTable::new(64, |_, _| {});
    let ids: Vec<u64> = (1..=64).map(|i| i * 1024).collect();
    for &id in &ids {
        assert!(t.insert(Order { id, ..Default::default() }));
    }
    for &id in ids.iter().step_by(2) {
        let i = t.find(id).unwrap();
        t.remove_at(i);
    }
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(t.find(id).is_some(), k % 2 == 1, "id {id}");
    }
}

#[test]
fn reset_forgets_every_order_and_trusts_the_books() {
    let mut b = Books::new(BookConfig { max_orders: 16, ..Default::default() });
    for id in 0..5u64 {
        let mut e = Event {
            action: EventAction::Add,
            order_id: id,
            instrument_id: 1 + (id as u32 % 2),
            side: Side::Bid,
            price: 100 + id as i64,
            size: 10,
            ..Default::default()
        };
        assert!(b.apply(&mut e));
    }
    b.mark_all_stale();
    b.reset();
    assert_eq!(b.live_orders(), 0);
    assert!(!b.any_stale());
    assert_eq!(b.instruments().count(), 0);
    // The same ids are new orders again.
    let mut e = Event {
        action: EventAction::Add,
        order_id: 3,
        instrument_id: 1,
        side: Side::Ask,
        price: 7,
        size: 1,
        ..Default::default()
    };
    assert!(b.apply(&mut e));
    assert_eq!(b.live_orders(), 1);
    b.check_consistency().unwrap();
}

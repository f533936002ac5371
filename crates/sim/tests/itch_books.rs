//! Simulated days: the books built by `tickplant_core::book` from the ITCH stream equal the
//! simulator's independent truth, for every symbol.

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::event::Side;
use tickplant_core::itch::{normalize, PRICE4_TO_NANO};
use tickplant_sim::{generate_itch, ItchGenConfig};
use tickplant_wire::itch50::{Framing, Message, Stream};

#[test]
fn books_equal_the_simulators_truth() {
    for seed in [1, 2] {
        let day = generate_itch(&ItchGenConfig { seed, symbols: 50, messages: 200_000, target_live: 0 });
        let file = day.to_binary_file();
        let mut books = Books::new(BookConfig { max_orders: 100_000, max_instruments: 1 << 16, ..Default::default() });
        let mut n = 0u64;
        for r in Stream::new(&file, Framing::LengthPrefixed) {
            let (_, bytes) = r.unwrap();
            let m = Message::parse(bytes).unwrap();
            let mut e = normalize(&m, 0, n, 0);
            books.apply(&mut e);
            assert_eq!(e.flags & !tickplant_core::event::flags::NON_PRINTABLE, 0, "message {n}: {m:?}");
            n += 1;
        }
        assert_eq!(n, 200_000);
        books.check_consistency().unwrap();
        let s = books.stats();
        assert_eq!(s.total(), n);
        assert_eq!((s.unknown_order, s.duplicate_order, s.table_full, s.overfill), (0, 0, 0, 0));
        let truth = day.final_books();
        assert!(truth.len() > 40);
        assert_eq!(books.live_orders(), day.live_orders());
        for t in &truth {
            let b = books.book(u32::from(t.locate)).unwrap();
            let got = |side| {
                b.depth(side, usize::MAX)
                    .map(|l| ((l.price / PRICE4_TO_NANO) as u32, l.shares, l.orders))
                    .collect::<Vec<_>>()
            };
            assert_eq!(got(Side::Bid), t.bids, "{} bids", t.symbol);
            assert_eq!(got(Side::Ask), t.asks, "{} asks", t.symbol);
        }
    }
}

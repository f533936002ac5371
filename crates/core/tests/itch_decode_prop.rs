//! Property test: the fast decoder (`itch::decode`, one dispatch straight from the bytes)
//! equals the reference mapping `normalize(parse_exact(..))` on every message type with
//! arbitrary field bytes, rejects what `parse_exact` rejects, and `decode_with` hands the
//! books the same events `apply` would get; `decode_into` writes every field of a slot
//! that holds another message's event; `SymbolDirectory::learn_bytes` agrees with `learn`.

use proptest::prelude::*;
use tickplant_core::book::{BookConfig, Books};
use tickplant_core::event::Event;
use tickplant_core::itch::{decode, decode_into, decode_with, normalize, SymbolDirectory};
use tickplant_wire::itch50::{message_len, parse_exact, MESSAGE_TYPES};

fn message() -> impl Strategy<Value = Vec<u8>> {
    (proptest::sample::select(MESSAGE_TYPES), proptest::collection::vec(any::<u8>(), 64)).prop_map(|(t, mut b)| {
        b.truncate(message_len(t).expect("a defined type"));
        b[0] = t;
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decode_equals_normalize_of_parse(b in message(), ts in any::<u64>(), seq in any::<u64>(), mid in 0u64..1 << 62) {
        let ts = ts >> 1;
        let want = normalize(&parse_exact(&b).expect("a whole message"), ts, seq, mid);
        prop_assert_eq!(decode(&b, ts, seq, mid), Some(want));
        let mut d1 = SymbolDirectory::new();
        let mut d2 = SymbolDirectory::new();
        prop_assert_eq!(d1.learn_bytes(&b), d2.learn(&parse_exact(&b).unwrap()));
        prop_assert_eq!(d1.iter().collect::<Vec<_>>(), d2.iter().collect::<Vec<_>>());
    }

    #[test]
    fn decode_into_a_used_slot_equals_decode(b in message(), stale in message(), seq in any::<u64>(), junk in any::<[u8; 8]>()) {
        // The slot holds another message's event, with every field set.
        let mut slot = decode(&stale, u64::MAX >> 1, !seq, 1).expect("valid");
        slot.flags = 0xff;
        slot.aux = u64::from_le_bytes(junk);
        slot.price = i64::from_le_bytes(junk);
        slot.side = tickplant_core::event::Side::Bid;
        let want = decode(&b, 5, seq, 7);
        prop_assert_eq!(decode_into(&b, 5, seq, 7, &mut slot, |_| {}), want.is_some());
        if let Some(want) = want {
            prop_assert_eq!(slot, want);
        }
        let mut fresh = Event::default();
        let cut = decode_into(&b[..b.len() - 1], 0, 0, 0, &mut fresh, |_| {});
        prop_assert!(!cut, "a cut message is refused");
    }

    #[test]
    fn bad_lengths_and_types_are_refused(b in message(), cut in 0usize..64, extra in 1usize..4, t in any::<u8>()) {
        let short = &b[..cut.min(b.len() - 1)];
        prop_assert_eq!(decode(short, 0, 0, 0), None);
        let mut long = b.clone();
        long.extend(std::iter::repeat_n(0, extra));
        prop_assert_eq!(decode(&long, 0, 0, 0), None);
        let mut other = b.clone();
        other[0] = t;
        prop_assert_eq!(decode(&other, 0, 0, 0).is_some(), parse_exact(&other).is_ok());
    }

    #[test]
    fn decode_with_applies_what_apply_would(msgs in proptest::collection::vec(message(), 1..200)) {
        let cfg = BookConfig { max_orders: 64, max_instruments: 8, ..Default::default() };
        let (mut fused, mut plain) = (Books::new(cfg), Books::new(cfg));
        for (i, b) in msgs.iter().enumerate() {
            // Few ids and instruments, so that later messages name earlier orders.
            let mut b = b.clone();
            if b.len() >= 19 {
                b[1] = 0;
                b[2] %= 8;
                b[11..18].fill(0);
                b[18] %= 16;
            }
            let got = decode_with(&b, 0, i as u64, 0, |e| {
                fused.apply(e);
            });
            let mut want = normalize(&parse_exact(&b).unwrap(), 0, i as u64, 0);
            plain.apply(&mut want);
            prop_assert_eq!(got, Some(want));
        }
        prop_assert_eq!(fused.stats(), plain.stats());
        fused.check_consistency().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

//! Property tests of the ITCH 5.0 codec: every message of every type survives emit then
//! parse, and parse then emit gives back the same bytes; framing agrees with a naive reader.

use proptest::prelude::*;
use tickplant_wire::itch50::{self, Framing, Message, Stream};

/// Any message: a known type byte followed by arbitrary field bytes.
fn message_bytes() -> impl Strategy<Value = Vec<u8>> {
    (0..itch50::MESSAGE_TYPES.len(), proptest::collection::vec(any::<u8>(), 50)).prop_map(|(i, body)| {
        let t = itch50::MESSAGE_TYPES[i];
        let n = itch50::message_len(t).unwrap();
        let mut b = body[..n].to_vec();
        b[0] = t;
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_emit_round_trip(bytes in message_bytes()) {
        let m = Message::parse(&bytes).unwrap();
        let mut out = vec![0xa5; m.buffer_len()];
        m.emit(&mut out);
        prop_assert_eq!(&out, &bytes);
        prop_assert_eq!(Message::parse(&out).unwrap(), m);
    }

    #[test]
    fn streams_frame_like_a_naive_reader(msgs in proptest::collection::vec(message_bytes(), 0..40), cut in 0usize..2000) {
        let mut file = Vec::new();
        for m in &msgs {
            file.extend_from_slice(&(m.len() as u16).to_be_bytes());
            file.extend_from_slice(m);
        }
        let got: Vec<&[u8]> = Stream::new(&file, Framing::LengthPrefixed).map(|r| r.unwrap().1).collect();
        prop_assert_eq!(got.len(), msgs.len());
        for (g, m) in got.iter().zip(&msgs) {
            prop_assert_eq!(*g, &m[..]);
        }
        // Cut anywhere: whole messages before the cut, then one error (or nothing at a boundary).
        let cut = cut.min(file.len());
        let items: Vec<_> = Stream::new(&file[..cut], Framing::InferLength).collect();
        let ok = items.iter().take_while(|r| r.is_ok()).count();
        let mut at = 0;
        let mut whole = 0;
        for m in &msgs {
            if at + 2 + m.len() <= cut { at += 2 + m.len(); whole += 1; } else { break; }
        }
        prop_assert_eq!(ok, whole);
        prop_assert_eq!(items.len() - ok, usize::from(at < cut));
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Message::parse(&bytes);
        for f in [Framing::LengthPrefixed, Framing::InferLength, Framing::Raw] {
            for r in Stream::new(&bytes, f) { let _ = r; }
        }
    }
}

//! Property tests of the ITCH 5.0 codec: every message of every type survives emit then
//! parse, and parse then emit gives back the same bytes; framing agrees with a naive reader;
//! the batch parser gives what the stream and the one-at-a-time parse give.

use proptest::prelude::*;
use tickplant_wire::itch50::{self, Batch, Framing, Message, Stream};

/// Every message of `buf` as `Batch` reads it: (offset, message) in order, then the error
/// that stops it, if any.
fn by_batch(buf: &[u8], framing: Framing) -> (Vec<(usize, Message)>, Option<tickplant_wire::Error>) {
    let (mut out, mut b, mut pos) = (Vec::new(), Batch::new(), 0);
    loop {
        match b.parse(buf, pos, framing) {
            Ok(next) => {
                assert!(b.messages().len() <= itch50::BATCH);
                if b.messages().is_empty() {
                    assert_eq!(next, buf.len(), "an empty batch only at the end");
                    return (out, None);
                }
                out.extend(b.messages().iter().enumerate().map(|(i, m)| (b.offset(i), *m)));
                pos = next;
            }
            Err(e) => return (out, Some(e)),
        }
    }
}

/// The same through `Stream` and `Message::parse` (the oracle).
fn by_stream(buf: &[u8], framing: Framing) -> (Vec<(usize, Message)>, Option<tickplant_wire::Error>) {
    let mut out = Vec::new();
    for r in Stream::new(buf, framing) {
        match r.and_then(|(at, b)| Message::parse(b).map(|m| (at, m))) {
            Ok(x) => out.push(x),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

fn binary_file(msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut file = Vec::new();
    for m in msgs {
        file.extend_from_slice(&(m.len() as u16).to_be_bytes());
        file.extend_from_slice(m);
    }
    file
}

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

    /// Batches of every framing, on whole files and on files damaged anywhere (a byte
    /// changed, the end cut): the stream's messages, offsets and error, in the same order.
    #[test]
    fn batches_parse_as_the_stream(
        msgs in proptest::collection::vec(message_bytes(), 0..400),
        damage in proptest::option::of((any::<prop::sample::Index>(), any::<u8>())),
        cut in any::<prop::sample::Index>(),
        raw in any::<bool>(),
    ) {
        let mut file = if raw { msgs.concat() } else { binary_file(&msgs) };
        if let Some((at, v)) = damage {
            if !file.is_empty() {
                let at = at.index(file.len());
                file[at] = v;
            }
        }
        let framings: &[Framing] = if raw { &[Framing::Raw] } else { &[Framing::LengthPrefixed, Framing::InferLength] };
        for &f in framings {
            prop_assert_eq!(by_batch(&file, f), by_stream(&file, f));
            let cut = cut.index(file.len() + 1);
            prop_assert_eq!(by_batch(&file[..cut], f), by_stream(&file[..cut], f));
        }
    }

    #[test]
    fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Message::parse(&bytes);
        for f in [Framing::LengthPrefixed, Framing::InferLength, Framing::Raw] {
            for r in Stream::new(&bytes, f) { let _ = r; }
            let _ = by_batch(&bytes, f);
        }
    }
}

/// Batches of one type only, past a batch's size (each type's run is as long as the batch),
/// and a batch that starts mid-buffer.
#[test]
fn batches_of_one_type() {
    for &t in itch50::MESSAGE_TYPES {
        let n = itch50::message_len(t).unwrap();
        let msgs: Vec<Vec<u8>> = (0..3 * itch50::BATCH + 5)
            .map(|k| {
                let mut m: Vec<u8> = (0..n).map(|j| (k * 7 + j) as u8).collect();
                m[0] = t;
                m
            })
            .collect();
        let file = binary_file(&msgs);
        let (got, err) = by_batch(&file, Framing::LengthPrefixed);
        assert_eq!(err, None);
        assert_eq!(got, by_stream(&file, Framing::LengthPrefixed).0, "type {}", t as char);
        assert_eq!(got.len(), msgs.len());
        let mut b = Batch::new();
        let next = b.parse(&file, 2 + n, Framing::LengthPrefixed).unwrap();
        assert_eq!(next, (2 + n) * (itch50::BATCH + 1));
        assert_eq!(b.offset(0), 2 + n + 2);
        assert_eq!(b.messages()[0], Message::parse(&msgs[1]).unwrap());
    }
}

/// A file far longer than a batch's window (64 KB), so that batches read through the window
/// and the last ones, near the end, through the checked reads: every type at random, the
/// stream's messages and offsets; then damaged near its end and in its middle.
#[test]
fn batches_of_a_long_file() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let msgs: Vec<Vec<u8>> = (0..20_000)
        .map(|_| {
            let t = itch50::MESSAGE_TYPES[next() as usize % itch50::MESSAGE_TYPES.len()];
            let n = itch50::message_len(t).unwrap();
            let mut m: Vec<u8> = (0..n).map(|_| next() as u8).collect();
            m[0] = t;
            m
        })
        .collect();
    let mut file = binary_file(&msgs);
    assert!(file.len() > 8 * 65_600);
    for f in [Framing::LengthPrefixed, Framing::InferLength] {
        let (got, err) = by_batch(&file, f);
        assert_eq!(err, None);
        assert_eq!(got.len(), msgs.len());
        assert_eq!((got, err), by_stream(&file, f));
    }
    let raw = msgs.concat();
    assert_eq!(by_batch(&raw, Framing::Raw), by_stream(&raw, Framing::Raw));
    for at in [file.len() - 30, file.len() / 2 + 1] {
        file[at] ^= 0x41;
        for f in [Framing::LengthPrefixed, Framing::InferLength] {
            assert_eq!(by_batch(&file, f), by_stream(&file, f), "damaged at {at}");
        }
    }
}

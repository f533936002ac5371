//! Property tests: the fast stop-bit and presence-map readers against naive oracles, and
//! random templates with random values through encoder, decoder and specialised segments.

use proptest::prelude::*;
use tickplant_fast::codec::{self, naive};
use tickplant_fast::{Decoder, Encoder, Message};

mod random;
use random::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any bytes: the fast integer readers agree with the naive decoder, cases crossing 8, 9
    /// and 10 bytes included.
    #[test]
    fn integers_agree_with_naive(bytes in prop::collection::vec(any::<u8>(), 0..14), stop_at in 0usize..13) {
        let mut b = bytes.clone();
        // Bias towards well-formed values: clear stop bits before stop_at, set it there.
        if stop_at < b.len() {
            for x in &mut b[..stop_at] { *x &= 0x7f; }
            b[stop_at] |= 0x80;
        }
        let mut p = 0;
        let fast_u = codec::read_u64(&b, &mut p).ok().map(|v| (v, p));
        let slow_u = naive::read_unsigned(&b).and_then(|(v, n)| u64::try_from(v).ok().map(|v| (v, n)));
        prop_assert_eq!(fast_u, slow_u.filter(|(_, n)| *n <= 10));
        let mut p = 0;
        let fast_i = codec::read_i64(&b, &mut p).ok().map(|v| (v, p));
        let slow_i = naive::read_signed(&b).and_then(|(v, n)| i64::try_from(v).ok().map(|v| (v, n)));
        prop_assert_eq!(fast_i, slow_i.filter(|(_, n)| *n <= 10));
        let mut p = 0;
        let fast_nu = codec::read_u64_nullable(&b, &mut p).ok().map(|v| (v, p));
        let slow_nu = naive::read_unsigned(&b).filter(|(_, n)| *n <= 10).and_then(|(v, n)| {
            if v == 0 { Some((None, n)) } else { u64::try_from(v - 1).ok().map(|v| (Some(v), n)) }
        });
        prop_assert_eq!(fast_nu, slow_nu);
        let mut p = 0;
        let fast_ni = codec::read_i64_nullable(&b, &mut p).ok().map(|v| (v, p));
        let slow_ni = naive::read_signed(&b).filter(|(_, n)| *n <= 10).and_then(|(v, n)| {
            let v = match v { 0 => return Some((None, n)), v if v > 0 => v - 1, v => v };
            i64::try_from(v).ok().map(|v| (Some(v), n))
        });
        prop_assert_eq!(fast_ni, slow_ni);
    }

    /// Presence maps: the packed form agrees with the naive bit list.
    #[test]
    fn presence_maps_agree_with_naive(bytes in prop::collection::vec(any::<u8>(), 0..22), stop_at in 0usize..21) {
        let mut b = bytes.clone();
        if stop_at < b.len() {
            for x in &mut b[..stop_at] { *x &= 0x7f; }
            b[stop_at] |= 0x80;
        }
        let mut p = 0;
        let fast = codec::read_pmap(&b, &mut p).ok().map(|v| (v, p));
        let slow = naive::read_pmap(&b).filter(|(_, n)| *n <= 18).map(|(bits, n)| {
            let mut v = 0u128;
            for (i, &bit) in bits.iter().enumerate() {
                if bit { v |= 1u128 << (127 - i); }
            }
            (v, n)
        });
        prop_assert_eq!(fast, slow);
    }

    /// Writers then readers give the value back, in the fewest bytes.
    #[test]
    fn opra_blocks_give_back_their_messages(
        msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        // A well-formed block yields exactly its messages, with their offsets.
        let mut block = vec![0x01];
        for m in &msgs {
            block.push(m.len() as u8);
            block.extend_from_slice(m);
        }
        block.push(0x03);
        let got: Vec<_> = tickplant_fast::opra_block(&block).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got.len(), msgs.len());
        let mut at = 1;
        for ((off, body), m) in got.iter().zip(&msgs) {
            prop_assert_eq!(*off, at + 1);
            prop_assert_eq!(body, &m.as_slice());
            at += 1 + m.len();
        }
        // Any bytes: no panic, at most one error and it ends the walk, every message inside.
        let mut errors = 0;
        for r in tickplant_fast::opra_block(&junk) {
            prop_assert_eq!(errors, 0);
            match r {
                Ok((off, body)) => prop_assert!(off + body.len() < junk.len()),
                Err((off, _)) => {
                    prop_assert!(off < junk.len().max(1));
                    errors += 1;
                }
            }
        }
    }

    #[test]
    fn integers_round_trip(u in any::<u64>(), i in any::<i64>()) {
        let mut out = Vec::new();
        codec::write_u64(&mut out, u);
        let mut p = 0;
        prop_assert_eq!(codec::read_u64(&out, &mut p).unwrap(), u);
        prop_assert_eq!(p, out.len());
        prop_assert!(out.len() == 1 || out[0] != 0, "overlong {:x?}", out);
        out.clear();
        codec::write_i64(&mut out, i);
        p = 0;
        prop_assert_eq!(codec::read_i64(&out, &mut p).unwrap(), i);
        out.clear();
        codec::write_i64_nullable(&mut out, Some(i));
        p = 0;
        prop_assert_eq!(codec::read_i64_nullable(&out, &mut p).unwrap(), Some(i));
        out.clear();
        codec::write_u64_nullable(&mut out, Some(u));
        p = 0;
        prop_assert_eq!(codec::read_u64_nullable(&out, &mut p).unwrap(), Some(u));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random templates, random values: encode, then decode gives the values back; the
    /// encoding decodes the same with specialised segments; decode then encode as received
    /// gives back the bytes.
    #[test]
    fn random_templates_round_trip(nodes in prop::collection::vec(node_strategy(), 1..8), seed in 1u64..u64::MAX) {
        let (xml, p, stream, frames, sent) = random_stream(&nodes, seed)?;
        // Decode with one decoder.
        let mut dec = Decoder::new(&p);
        let mut got = Message::new();
        let mut received = Vec::new();
        for (k, &(a, b)) in frames.iter().enumerate() {
            let used = dec.decode(&stream[a..b], &mut got).map_err(|e| TestCaseError::fail(format!("decode {k}: {e}\n{xml}")))?;
            prop_assert_eq!(used, b - a);
            prop_assert_eq!(render(&p, &got), sent[k].clone(), "message {}\n{}", k, xml);
            received.push(got.clone());
        }
        // As received: identical bytes.
        let mut enc2 = Encoder::new(&p);
        let mut again = Vec::new();
        for m in &received {
            enc2.encode_as_received(m, &mut again).unwrap();
        }
        prop_assert_eq!(&again, &stream);
        // Specialised segments from a profile of this stream decode the same.
        let sp = specialised(&p, &stream, &frames);
        let mut dec = Decoder::new(&sp);
        for (k, &(a, b)) in frames.iter().enumerate() {
            dec.decode(&stream[a..b], &mut got).map_err(|e| TestCaseError::fail(format!("specialised decode {k}: {e}\n{xml}\n{}", sp.listing())))?;
            prop_assert_eq!(render(&sp, &got), sent[k].clone(), "specialised message {}\n{}\n{}", k, xml, sp.listing());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Specialised segments run by their kernels give what the engine gives on the same
    /// segments, byte for byte, on damaged streams too: the same messages, the same errors
    /// at the same offsets, the same dictionary state after each (every kernel operation that
    /// cannot finish hands over to the engine before it has changed anything).
    #[test]
    fn kernels_decode_as_the_engine(
        nodes in prop::collection::vec(node_strategy(), 1..8),
        seed in 1u64..u64::MAX,
        damage in damage_strategy(),
    ) {
        let (xml, p, stream, frames, _) = random_stream(&nodes, seed)?;
        let kernels = specialised(&p, &stream, &frames);
        let mut engine = kernels.clone();
        for s in &mut engine.specials {
            s.kernel = 0;
        }
        let bad = damaged(&stream, &damage);
        let (mut dk, mut de) = (Decoder::new(&kernels), Decoder::new(&engine));
        let (mut mk, mut me) = (Message::new(), Message::new());
        for (k, &(a, b)) in frames.iter().enumerate() {
            let (a, b) = (a.min(bad.len()), b.min(bad.len()));
            let ok = outcome(&kernels, &mut dk, &bad[a..b], &mut mk);
            let oe = outcome(&engine, &mut de, &bad[a..b], &mut me);
            prop_assert_eq!(ok, oe, "message {}, bytes {:02x?}\n{}\n{}", k, &bad[a..b], xml, kernels.listing());
        }
    }
}

/// Native code that has nothing for any kernel: every kernel runs the decoder's own way.
#[derive(Debug)]
struct RunsNothing;

impl tickplant_fast::NativeKernels for RunsNothing {
    fn made_for(&self, _: &tickplant_fast::Program) -> bool {
        true
    }

    fn run(
        &self,
        _: usize,
        _: &[u8],
        _: &mut usize,
        _: &mut Vec<tickplant_fast::Entry>,
        _: &mut [tickplant_fast::native::IntSlot],
        _: &mut [tickplant_fast::native::StrSlot],
        _: &mut Vec<u8>,
        _: &mut bool,
    ) -> Option<usize> {
        None
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A decoder whose native code runs nothing decodes as one without native code.
    #[test]
    fn native_code_that_runs_nothing_changes_nothing(
        nodes in prop::collection::vec(node_strategy(), 1..8),
        seed in 1u64..u64::MAX,
        damage in damage_strategy(),
    ) {
        let (xml, p, stream, frames, _) = random_stream(&nodes, seed)?;
        let sp = specialised(&p, &stream, &frames);
        let bad = damaged(&stream, &damage);
        let (mut dn, mut dk) = (Decoder::new(&sp), Decoder::new(&sp));
        dn.set_native(Some(&RunsNothing)).map_err(TestCaseError::fail)?;
        let (mut mn, mut mk) = (Message::new(), Message::new());
        for (k, &(a, b)) in frames.iter().enumerate() {
            let (a, b) = (a.min(bad.len()), b.min(bad.len()));
            let on = outcome(&sp, &mut dn, &bad[a..b], &mut mn);
            let ok = outcome(&sp, &mut dk, &bad[a..b], &mut mk);
            prop_assert_eq!(on, ok, "message {}\n{}", k, xml);
        }
    }
}

//! Native kernels against the decoder's own: random templates, random values, streams
//! damaged at random (bytes overwritten, the stream cut short). Both decoders give the same
//! messages (entries, string bytes, presence maps), the same errors at the same offsets, and
//! so the same dictionary state after each message, since the next one depends on it.

use proptest::prelude::*;
use tickplant_fast::{Decoder, Message, Program};
use tickplant_fast_jit::JitKernels;

#[path = "../../fast/tests/random/mod.rs"]
mod random;
use random::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn native_kernels_decode_as_the_decoder(
        nodes in prop::collection::vec(node_strategy(), 1..8),
        seed in 1u64..u64::MAX,
        damage in damage_strategy(),
    ) {
        let (xml, p, stream, frames, _) = random_stream(&nodes, seed)?;
        same_both_ways(&xml, &p, &stream, &frames, &damage)?;
    }

    /// Sequences of up to 40 elements (more than one call of an element loop runs), in
    /// templates built around them, twelve messages a stream.
    #[test]
    fn native_element_loops_decode_as_the_decoder(
        nodes in seq_nodes_strategy(),
        seed in 1u64..u64::MAX,
        damage in damage_strategy(),
    ) {
        let (xml, p, stream, frames, _) = random_stream_of(&nodes, seed, 12, 41)?;
        same_both_ways(&xml, &p, &stream, &frames, &damage)?;
    }
}

proptest! {
    // Fewer cases: each compiles its kernels in a debug build; 400 still stop at every
    // place (before the sequence, at it, in an element, at an element) dozens of times.
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A header of fields, then a sequence: the header's kernel runs on into the sequence
    /// in one call (`run_into_seq`), stopping anywhere on the way, damaged streams too.
    #[test]
    fn native_kernels_run_into_their_sequences_as_the_decoder(
        nodes in header_seq_nodes_strategy(),
        seed in 1u64..u64::MAX,
        damage in damage_strategy(),
    ) {
        let (xml, p, stream, frames, _) = random_stream_of(&nodes, seed, 12, 41)?;
        same_both_ways(&xml, &p, &stream, &frames, &damage)?;
    }
}

/// `stream` (its messages at `frames`), damaged by `damage`, decoded with `p` specialised
/// for it, its kernels as native code and as the decoder's own: the same messages, errors
/// and (so) dictionary state.
fn same_both_ways(
    xml: &str,
    p: &Program,
    stream: &[u8],
    frames: &[(usize, usize)],
    damage: &(Vec<(prop::sample::Index, u8)>, prop::sample::Index),
) -> Result<(), TestCaseError> {
    let sp = specialised(p, stream, frames);
    let jit = JitKernels::compile(&sp).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bad = damaged(stream, damage);
    let (mut dn, mut dk) = (Decoder::new(&sp), Decoder::new(&sp));
    dn.set_native(Some(&jit)).map_err(TestCaseError::fail)?;
    let (mut mn, mut mk) = (Message::new(), Message::new());
    for (k, &(a, b)) in frames.iter().enumerate() {
        let (a, b) = (a.min(bad.len()), b.min(bad.len()));
        let on = outcome(&sp, &mut dn, &bad[a..b], &mut mn);
        let ok = outcome(&sp, &mut dk, &bad[a..b], &mut mk);
        prop_assert_eq!(&on, &ok, "message {}, bytes {:02x?}\n{}\n{}", k, &bad[a..b], xml, sp.listing());
        if on.is_ok() {
            prop_assert_eq!(&mn.entries, &mk.entries, "message {}", k);
            prop_assert_eq!(&mn.bytes, &mk.bytes, "message {}", k);
            prop_assert_eq!(&mn.pmaps, &mk.pmaps, "message {}", k);
        }
    }
    Ok(())
}

/// The code is made for one program: a decoder of another refuses it.
#[test]
fn native_code_is_refused_by_another_program() {
    let xml = |op: &str| {
        format!(
            r#"<templates><template name="T" id="1"><uInt32 name="A" id="1"><{op}/></uInt32></template></templates>"#
        )
    };
    let mut p = tickplant_fast::Program::from_xml(&xml("copy")).unwrap();
    let mut q = tickplant_fast::Program::from_xml(&xml("increment")).unwrap();
    // Two messages: template 1, A = 5; then A copied.
    let stream = [0xe0, 0x81, 0x86, 0x80];
    let frames = [(0, 3), (3, 4)];
    p = specialised(&p, &stream, &frames);
    q = specialised(&q, &stream, &frames);
    let jit = JitKernels::compile(&p).unwrap();
    assert!(jit.native_ops().0 > 0);
    let mut d = Decoder::new(&q);
    assert!(d.set_native(Some(&jit)).is_err());
    let mut d = Decoder::new(&p);
    assert!(d.set_native(Some(&jit)).is_ok());
}

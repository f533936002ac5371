//! Native kernels on the real samples in ../shared/data/fast (skipped, with a message, when
//! absent): every message decodes to the same entries and bytes as the decoder's own
//! kernels give, and the same dictionary state carries on.

use std::path::PathBuf;
use tickplant_fast::{for_each, Decoder, Framing, Message, Program};

fn data(rel: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fast").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} absent (an outside checkout has no ../shared)", p.display());
        None
    }
}

/// Decode `file` with `p`'s kernels, natively or not: every message (template, entries,
/// bytes) and the count.
fn decode(
    p: &Program,
    native: Option<&tickplant_fast_jit::JitKernels>,
    bytes: &[u8],
    framing: Framing,
) -> Vec<Message> {
    let mut dec = Decoder::new(p);
    if let Some(n) = native {
        dec.set_native(Some(n)).unwrap();
    }
    let mut msg = Message::new();
    let mut out = Vec::new();
    for_each(&mut dec, framing, bytes, &mut msg, |m, _| {
        out.push(m.clone());
        true
    })
    .unwrap();
    out
}

fn same_both_ways(templates: &str, file: &str, framing: Framing, expect: usize) {
    let (Some(t), Some(d)) = (data(templates), data(file)) else { return };
    let mut p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let bytes = std::fs::read(d).unwrap();
    let built = p.specialise_for(&bytes, framing).unwrap();
    assert!(built > 0, "{file}: no kernels to compile");
    let jit = tickplant_fast_jit::JitKernels::compile(&p).unwrap();
    let (native, all) = jit.native_ops();
    eprintln!("{file}: {built} kernels, {native} of {all} operations native");
    assert!(native > 0);
    let plain = decode(&p, None, &bytes, framing);
    let fast = decode(&p, Some(&jit), &bytes, framing);
    assert_eq!(plain.len(), expect);
    assert_eq!(fast.len(), expect);
    for (i, (a, b)) in plain.iter().zip(&fast).enumerate() {
        assert_eq!(
            (a.template, &a.entries, &a.bytes, &a.pmaps),
            (b.template, &b.entries, &b.bytes, &b.pmaps),
            "{file}: message {i}"
        );
    }
}

#[test]
fn mfast_complex30000_same_natively() {
    same_both_ways("mfast/example.xml", "mfast/complex30000.dat", Framing::U32Le, 30_001);
}

#[test]
fn openfast_opra_same_natively() {
    same_both_ways("openfast/OPRA/OPRATemplate.xml", "openfast/OPRA/messages.fast", Framing::Opra, 63);
}

#[test]
fn openfast_cme_and_fpl_same_natively() {
    same_both_ways("openfast/CME/templates.xml", "openfast/CME/messages.fast", Framing::Raw, 1);
    same_both_ways("openfast/FPL/FASTTestTemplate.xml", "openfast/FPL/messages.fast", Framing::Raw, 3);
}

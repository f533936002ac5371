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

/// `msg` emptied, the room for 512 entries behind its end holding a poison entry.
fn poison(msg: &mut Message) {
    msg.entries.clear();
    let bad = tickplant_fast::Entry { field: 0xdead, value: tickplant_fast::Value::UInt(0xa5a5) };
    msg.entries.resize(512, bad);
    msg.entries.clear();
}

/// Every message of the mFAST corpus's first 600 cut short at every length, decoded from
/// the dictionary state the whole messages before it left: natively and not, the same
/// error at the same offset, or the same entries. The code's checks of the bytes left (one
/// per kernel, instead of one per read) decline where the decoder must say what is wrong.
#[test]
fn mfast_complex30000_cut_short_same_natively() {
    let (Some(t), Some(d)) = (data("mfast/example.xml"), data("mfast/complex30000.dat")) else { return };
    let mut p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let bytes = std::fs::read(d).unwrap();
    p.specialise_for(&bytes, Framing::U32Le).unwrap();
    let jit = tickplant_fast_jit::JitKernels::compile(&p).unwrap();
    let (mut dn, mut dk) = (Decoder::new(&p), Decoder::new(&p));
    dn.set_native(Some(&jit)).unwrap();
    let (mut mn, mut mk) = (Message::new(), Message::new());
    let mut at = 0;
    let mut cuts = 0;
    for i in 0..600 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let whole = &bytes[at + 4..at + 4 + len];
        for cut in 0..len {
            let (mut cn, mut ck) = (dn.clone(), dk.clone());
            // The entries' spare room filled with an entry no decode writes, so one the
            // code counted as written but did not write shows (as the 0xa5 of emit tests).
            poison(&mut mn);
            let rn = cn.decode(&whole[..cut], &mut mn);
            let rk = ck.decode(&whole[..cut], &mut mk);
            assert_eq!(rn, rk, "message {i} cut to {cut} bytes");
            // Failed or not, the entries so far are the same: the code hands over at the
            // operation it cannot finish, and the decoder fails there as it would have.
            assert_eq!((&mn.entries, &mn.pmaps), (&mk.entries, &mk.pmaps), "message {i} cut to {cut}");
            cuts += 1;
        }
        assert_eq!(dn.decode(whole, &mut mn).unwrap(), len);
        assert_eq!(dk.decode(whole, &mut mk).unwrap(), len);
        assert_eq!((&mn.entries, &mn.bytes, &mn.pmaps), (&mk.entries, &mk.bytes, &mk.pmaps), "message {i}");
        at += 4 + len;
    }
    assert!(cuts > 30_000);
}

//! The real third-party samples in ../shared/data/fast (skipped, with a message, when absent).

use std::path::PathBuf;
use tickplant_fast::{for_each, json, Decoder, Framing, Message, Program};

fn data(rel: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fast").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} absent (an outside checkout has no ../shared)", p.display());
        None
    }
}

#[test]
fn mfast_complex30000_decodes_every_message() {
    let (Some(t), Some(d)) = (data("mfast/example.xml"), data("mfast/complex30000.dat")) else { return };
    let p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let bytes = std::fs::read(d).unwrap();
    let mut dec = Decoder::new(&p);
    let mut msg = Message::new();
    let mut by_id = std::collections::BTreeMap::new();
    let mut first = String::new();
    let n = for_each(&mut dec, Framing::U32Le, &bytes, &mut msg, |m, pos| {
        *by_id.entry(p.templates[m.template as usize].id.unwrap()).or_insert(0u32) += 1;
        if pos.index == 0 {
            json::write_json(&p, m, &mut first);
        }
        true
    })
    .unwrap();
    eprintln!("{first}");
    assert_eq!(n, 30_001);
    assert_eq!(by_id.into_iter().collect::<Vec<_>>(), [(1, 29_700), (2, 300), (99, 1)]);
}

//! The program text (`Program::to_text` / `Program::from_text`): the round trip is exact,
//! a loaded program decodes as the compiled one, skipped fields leave the message and keep
//! the stream and the dictionaries right, and a bad edit is an error with its line.

use std::path::PathBuf;

use proptest::prelude::*;
use tickplant_fast::program::Code;
use tickplant_fast::{for_each, json, Decoder, Framing, Message, Program};

mod random;
use random::*;

const XML: &str = r#"<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
  <template name="T" id="1">
    <string name="Type" id="35"><constant value="X"/></string>
    <uInt32 name="Seq" id="34"/>
    <uInt32 name="Count"><copy value="1"/></uInt32>
    <string name="Sym"><copy/></string>
    <decimal name="Px"><exponent><constant value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
    <int64 name="Qty" presence="optional"><delta/></int64>
    <sequence name="Legs"><length name="NoLegs"/>
      <uInt32 name="LegId"/><string name="LegSym"><default value="Z"/></string>
    </sequence>
    <group name="G" presence="optional"><uInt64 name="Big"><increment/></uInt64></group>
  </template>
</templates>"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random templates and values: the text round trip is exact and the loaded program
    /// decodes every message as the compiled one; with random fields skipped, each message
    /// is the same less those fields' entries, the messages after it too (the stream and
    /// the dictionaries stayed right).
    #[test]
    fn the_text_round_trips_and_skips_drop_only_their_fields(
        nodes in prop::collection::vec(node_strategy(), 1..8),
        seed in 1u64..u64::MAX,
        pick in any::<u64>(),
    ) {
        let (xml, p, stream, frames, sent) = random_stream(&nodes, seed)?;
        let text = p.to_text().unwrap();
        let q = Program::from_text(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(q.to_text().unwrap(), text.clone());
        // Skip a random choice of the fields the engine runs one by one (not a split
        // decimal's parts, not a sequence's length, which their owner reads).
        let mut edited = q.clone();
        let mut skipped = std::collections::HashSet::new();
        for i in 0..edited.insns.len() {
            let owned = i > 0 && matches!(edited.insns[i - 1].code, Code::DecSplit | Code::Seq)
                || i > 1 && edited.insns[i - 2].code == Code::DecSplit;
            let scalar = !matches!(edited.insns[i].code, Code::Seq | Code::Group | Code::DynRef);
            if scalar && !owned && (pick >> (i % 64)) & 1 == 1 {
                edited.insns[i].skip = true;
                skipped.insert(edited.insns[i].field);
            }
        }
        let edited = Program::from_text(&edited.to_text().unwrap()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (prog, drop) in [(&q, std::collections::HashSet::new()), (&edited, skipped)] {
            let mut dec = Decoder::new(prog);
            let mut got = Message::new();
            for (k, &(a, b)) in frames.iter().enumerate() {
                let used = dec.decode(&stream[a..b], &mut got).map_err(|e| TestCaseError::fail(format!("decode {k}: {e}\n{xml}")))?;
                prop_assert_eq!(used, b - a);
                // Structural entries name where their body ends in the entry list, which the
                // dropped entries shift: compare them by kind.
                let shape = |r: &String| match r.split_once('=') {
                    Some((f, v)) if v.starts_with("seq") => format!("{f}={}", v.split('/').next().unwrap_or(v)),
                    Some((f, v)) if v.contains("end:") => format!("{f}={}", v.split(' ').next().unwrap_or(v)),
                    _ => r.clone(),
                };
                let want: Vec<String> = sent[k]
                    .iter()
                    .filter(|r| !drop.contains(&r.split('=').next().unwrap().parse::<u32>().unwrap()))
                    .map(shape)
                    .collect();
                let got: Vec<String> = render(prog, &got).iter().map(shape).collect();
                prop_assert_eq!(got, want, "message {}\n{}", k, xml);
            }
        }
    }
}

#[test]
fn bad_edits_say_which_line() {
    let p = Program::from_xml(XML).unwrap();
    let text = p.to_text().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    let edit = |k: usize, f: &dyn Fn(&str) -> String| {
        let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        v[k] = f(&v[k]);
        v.join("\n")
    };
    // A field index out of range, on the instruction's own line.
    let k = at("insn 0001");
    let e = Program::from_text(&edit(k, &|l| l.replacen("field=", "field=9", 1))).unwrap_err();
    assert_eq!(e.line, k + 1, "{e}");
    assert!(e.to_string().contains("no such field"), "{e}");
    // Skipping a sequence is refused.
    let k = at(" seq ");
    let e = Program::from_text(&edit(k, &|l| l.replacen(" keep ", " skip ", 1))).unwrap_err();
    assert_eq!(e.line, k + 1);
    assert!(e.reason.contains("scalar"), "{e}");
    // Neither keep nor skip; an unknown item; a count that does not match.
    let e = Program::from_text(&edit(at("insn 0002"), &|l| l.replacen(" keep", "", 1))).unwrap_err();
    assert!(e.reason.contains("keep or skip"), "{e}");
    let e = Program::from_text(&format!("{text}bogus 1\n")).unwrap_err();
    assert!(e.reason.contains("not an item"), "{e}");
    let e = Program::from_text(&edit(at("program templates="), &|l| l.replacen("fields=", "fields=1", 1))).unwrap_err();
    assert!(e.reason.contains("counts"), "{e}");
}

/// The real corpus: complex30000 with a program loaded from its text decodes as the
/// compiled program.
#[test]
fn complex30000_from_text_decodes_alike() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fast/mfast");
    let (Ok(xml), Ok(data)) =
        (std::fs::read_to_string(dir.join("example.xml")), std::fs::read(dir.join("complex30000.dat")))
    else {
        eprintln!("skipped: {} absent", dir.display());
        return;
    };
    let p = Program::from_xml(&xml).unwrap();
    let q = Program::from_text(&p.to_text().unwrap()).unwrap();
    let run = |p: &Program| {
        let mut dec = Decoder::new(p);
        let mut msg = Message::new();
        let mut h = 0u64;
        let n = for_each(&mut dec, Framing::U32Le, &data, &mut msg, |m, _| {
            let mut s = String::new();
            json::write_json(p, m, &mut s);
            h = h.wrapping_mul(31).wrapping_add(s.bytes().map(u64::from).sum::<u64>());
            true
        })
        .unwrap();
        (n, h)
    };
    assert_eq!(run(&q), run(&p));
}

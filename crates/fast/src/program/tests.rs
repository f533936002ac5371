use super::*;

const XML: &str = r#"<templates>
  <template name="Hdr"><uInt32 name="Seq" id="34"><increment/></uInt32></template>
  <template name="T" id="7" dictionary="template">
    <templateRef name="Hdr"/>
    <string name="Sym" id="55"><copy/></string>
    <decimal name="Px"><exponent><default value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
    <sequence name="Legs" presence="optional"><length name="NoLegs"/><int32 name="Q"><copy value="1"/></int32></sequence>
    <group name="G" presence="optional"><uInt64 name="V"/></group>
  </template>
</templates>"#;

#[test]
fn compiles_to_flat_program_with_resolved_slots() {
    let p = Program::from_xml(XML).unwrap();
    let t = &p.templates[p.template_index(7).unwrap() as usize];
    assert_eq!(t.name, "T");
    let codes: Vec<Code> = p.insns[t.start as usize..t.end as usize].iter().map(|i| i.code).collect();
    assert_eq!(
        codes,
        [
            Code::IntIncr,
            Code::StrCopy,
            Code::DecSplit,
            Code::IntDefault,
            Code::IntDelta,
            Code::Seq,
            Code::IntNone,
            Code::IntCopy,
            Code::Group,
            Code::IntNone
        ]
    );
    // Seq (inc, copy, default exponent) + optional group = 4 bits besides the template id.
    assert_eq!(t.bits, 4);
    let seq = p.insns[t.start as usize + 5];
    assert_eq!(seq.a, t.start + 8);
    assert!(seq.has(flag::PMAP) && seq.has(flag::OPT));
    let group = p.insns[t.start as usize + 8];
    assert!(!group.has(flag::PMAP));
    let listing = p.listing();
    assert!(listing.contains("ascii.copy"), "{listing}");
    assert!(listing.contains("[template:T/Sym/string]"), "{listing}");
    assert!(listing.contains("u32.incr"), "{listing}");
    assert_eq!(p.template_index(8), None);
    assert_eq!(p.template_index(100_000), None);
}

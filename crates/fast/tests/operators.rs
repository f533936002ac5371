//! Every operator and nullability rule with its own case: hand-written bytes, expected
//! values, and the specification's error codes.

use tickplant_fast::{Decoder, Message, Program, Value};

/// Decode each message in turn with one decoder; render `name=value` pairs or the error.
fn run(fields: &str, messages: &[&[u8]]) -> Vec<String> {
    let xml = format!("<templates><template name=\"T\" id=\"1\">{fields}</template></templates>");
    decode_all(&Program::from_xml(&xml).unwrap(), messages)
}

/// [`run`] with a program already built.
fn decode_all(p: &Program, messages: &[&[u8]]) -> Vec<String> {
    let mut d = Decoder::new(p);
    let mut m = Message::new();
    messages
        .iter()
        .map(|b| match d.decode(b, &mut m) {
            Ok(n) => {
                assert_eq!(n, b.len(), "{b:x?} not consumed");
                m.entries
                    .iter()
                    .map(|e| {
                        let name = &p.fields[e.field as usize].name;
                        match e.value {
                            Value::Bytes { .. } | Value::Static { .. } => {
                                format!("{name}={}", String::from_utf8_lossy(m.bytes_of(p, &e.value).unwrap()))
                            }
                            Value::UInt(v) => format!("{name}={v}"),
                            Value::Int(v) => format!("{name}={v}"),
                            Value::Decimal(d) => format!("{name}={d}"),
                            v => format!("{name}={v:?}"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            }
            Err(e) => format!("error {}", e.kind.code()),
        })
        .collect()
}

// Presence maps: 0xC0 = template id + first field bit; 0xA0 = no template id, first bit set;
// 0x80 = no template id, no bits.

#[test]
fn no_operator_mandatory_and_nullable() {
    assert_eq!(run(r#"<uInt32 name="a"/>"#, &[&[0xc0, 0x81, 0x85]]), ["a=5"]);
    // Optional without operator: nullable, 0x80 is absent, values one higher.
    assert_eq!(run(r#"<uInt32 name="a" presence="optional"/>"#, &[&[0xc0, 0x81, 0x80], &[0x80, 0x86]]), ["", "a=5"]);
    assert_eq!(run(r#"<int32 name="a" presence="optional"/>"#, &[&[0xc0, 0x81, 0xff], &[0x80, 0x81]]), ["a=-1", "a=0"]);
    assert_eq!(
        run(r#"<string name="s" presence="optional"/>"#, &[&[0xc0, 0x81, 0x80], &[0x80, 0x00, 0x80]]),
        ["", "s="]
    );
    assert_eq!(
        run(r#"<byteVector name="b" presence="optional"/>"#, &[&[0xc0, 0x81, 0x80], &[0x80, 0x82, 0x41]]),
        ["", "b=A"]
    );
    assert_eq!(
        run(r#"<decimal name="d" presence="optional"/>"#, &[&[0xc0, 0x81, 0x80], &[0x80, 0xfe, 0x39, 0x45, 0xa3]]),
        ["", "d=9427.55"]
    );
}

#[test]
fn constant_mandatory_takes_no_bit_optional_takes_one() {
    assert_eq!(
        run(r#"<uInt32 name="c"><constant value="9"/></uInt32><uInt32 name="a"/>"#, &[&[0xc0, 0x81, 0x82]]),
        ["c=9,a=2"]
    );
    assert_eq!(
        run(r#"<uInt32 name="c" presence="optional"><constant value="9"/></uInt32>"#, &[&[0xe0, 0x81], &[0x80]]),
        ["c=9", ""]
    );
}

#[test]
fn default_uses_the_initial_value_when_absent() {
    let f = r#"<uInt32 name="a"><default value="4"/></uInt32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81], &[0xa0, 0x87], &[0x80]]), ["a=4", "a=7", "a=4"]);
    // Optional without a value: absent; present and NULL: absent too.
    let f = r#"<uInt32 name="a" presence="optional"><default/></uInt32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81], &[0xa0, 0x80], &[0xa0, 0x83]]), ["", "", "a=2"]);
}

#[test]
fn copy_three_previous_value_states() {
    // Mandatory, no initial value: undefined and absent is D5.
    assert_eq!(run(r#"<uInt32 name="a"><copy/></uInt32>"#, &[&[0xc0, 0x81]]), ["error D5"]);
    // Initial value when undefined; then the previous value; then a new value.
    let f = r#"<uInt32 name="a"><copy value="3"/></uInt32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81], &[0x80], &[0xa0, 0x88], &[0x80]]), ["a=3", "a=3", "a=8", "a=8"]);
    // Optional: NULL empties the entry; an empty entry gives absent.
    let f = r#"<uInt32 name="a" presence="optional"><copy/></uInt32>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x83], &[0x80], &[0xa0, 0x80], &[0x80]]), ["a=2", "a=2", "", ""]);
    // Mandatory with an empty entry is D6: reached through a shared key with an optional field.
    let f = r#"<uInt32 name="o" presence="optional"><copy key="k"/></uInt32><uInt32 name="m"><copy key="k"/></uInt32>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x80]]), ["error D6"]);
    // Strings copy too.
    let f = r#"<string name="s"><copy/></string>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x41, 0xc2], &[0x80]]), ["s=AB", "s=AB"]);
}

#[test]
fn increment_adds_one_when_absent() {
    let f = r#"<uInt32 name="a"><increment value="10"/></uInt32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81], &[0x80], &[0xa0, 0x94], &[0x80]]), ["a=10", "a=11", "a=20", "a=21"]);
    // A uInt32 that would pass 2^32-1 is R4.
    let f = r#"<uInt32 name="a"><increment/></uInt32>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x0f, 0x7f, 0x7f, 0x7f, 0xff], &[0x80]]), ["a=4294967295", "error R4"]);
}

#[test]
fn delta_integers_decimals_and_strings() {
    let f = r#"<int32 name="a"><delta/></int32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81, 0x85], &[0x80, 0xfd]]), ["a=5", "a=2"]);
    // Optional delta: NULL is absent and leaves the base alone.
    let f = r#"<int32 name="a" presence="optional"><delta/></int32>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81, 0x86], &[0x80, 0x80], &[0x80, 0x82]]), ["a=5", "", "a=6"]);
    // Decimal delta: exponent and mantissa deltas against (0, 0).
    let f = r#"<decimal name="d"><delta/></decimal>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81, 0xfe, 0x82], &[0x80, 0x80, 0x81]]), ["d=0.02", "d=0.03"]);
    // String delta: subtract from the end and append; negative subtracts from the front
    // (excess one: -1 removes nothing) and prepends.
    let f = r#"<string name="s"><delta value="ABC"/></string>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81, 0x81, 0xc4], &[0x80, 0xfe, 0xda]]), ["s=ABD", "s=ZBD"]);
    // Subtracting more than the base has is D7.
    assert_eq!(run(f, &[&[0xc0, 0x81, 0x85, 0xc4]]), ["error D7"]);
}

#[test]
fn tail_replaces_the_end() {
    let f = r#"<string name="s"><tail value="ABCD"/></string>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81], &[0xa0, 0x58, 0xd9], &[0x80]]), ["s=ABCD", "s=ABXY", "s=ABXY"]);
}

#[test]
fn decimal_with_separate_operators() {
    let f = r#"<decimal name="px"><exponent><default value="-2"/></exponent><mantissa><delta/></mantissa></decimal>"#;
    assert_eq!(run(f, &[&[0xc0, 0x81, 0x09, 0xc4], &[0x80, 0x85]]), ["px=12.20", "px=12.25"]);
    // Optional: a NULL exponent leaves the mantissa out of the stream.
    let f = r#"<decimal name="px" presence="optional"><exponent><default/></exponent><mantissa><delta/></mantissa></decimal><uInt32 name="n"/>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x80, 0x87]]), ["n=7"]);
    // An exponent outside -63..63 is R1.
    assert_eq!(run(r#"<decimal name="d"/>"#, &[&[0xc0, 0x81, 0x00, 0xc0, 0x81]]), ["error R1"]);
}

#[test]
fn sequences_groups_and_template_references() {
    let f = r#"<sequence name="q"><length name="n"/><uInt32 name="a"><copy/></uInt32></sequence>"#;
    // Two elements, each with its own presence map.
    assert_eq!(
        run(f, &[&[0xc0, 0x81, 0x82, 0xc0, 0x83, 0x80]]),
        ["q=Sequence { len: 2, end: 5 },q=Element { end: 3 },a=3,q=Element { end: 5 },a=3"]
    );
    let f = r#"<group name="g" presence="optional"><uInt32 name="a"/></group><uInt32 name="b"/>"#;
    assert_eq!(run(f, &[&[0xe0, 0x81, 0x85, 0x86], &[0x80, 0x86]]), ["g=Group { end: 2 },a=5,b=6", "b=6"]);
    // Dynamic template reference: a presence map and a template id in the stream.
    let xml = r#"<templates><template name="Inner" id="2"><uInt32 name="x"/></template>
        <template name="Outer" id="1"><uInt32 name="a"/><templateRef/></template></templates>"#;
    let p = Program::from_xml(xml).unwrap();
    let mut d = Decoder::new(&p);
    let mut m = Message::new();
    assert_eq!(d.decode(&[0xc0, 0x81, 0x85, 0xc0, 0x82, 0x89], &mut m), Ok(6));
    assert_eq!(m.entries.len(), 3);
    assert_eq!(m.entries[1].value, Value::Template { template: 0, end: 3 });
    assert_eq!(m.entries[2].value, Value::UInt(9));
}

#[test]
fn errors_say_where_and_in_which_field() {
    let xml = r#"<templates><template name="T" id="1"><uInt32 name="a"/><uInt32 name="b"/></template></templates>"#;
    let p = Program::from_xml(xml).unwrap();
    let mut d = Decoder::new(&p);
    let mut m = Message::new();
    let e = d.decode(&[0xc0, 0x81, 0x85, 0x01], &mut m).unwrap_err();
    assert_eq!(e.offset, 3);
    assert_eq!(p.fields[e.field as usize].name, "b");
    assert!(e.to_string().contains("at byte 3"), "{e}");
    let e = d.decode(&[0xc0, 0x87], &mut m).unwrap_err();
    assert_eq!(e.kind.code(), "D9");
    // uInt32 above 2^32-1 is D2.
    let e = d.decode(&[0xc0, 0x81, 0x10, 0x00, 0x00, 0x00, 0x80, 0x81], &mut m).unwrap_err();
    assert_eq!(e.kind.code(), "D2");
}

/// Specialised segments fold runs of constants into the instruction before them (after a
/// sequence's elements when that is a sequence) and give a constant-exponent, delta-mantissa
/// decimal an arm of its own; neither may change what a message decodes to.
#[test]
fn specialised_constants_and_prices_decode_as_the_generic_program() {
    let xml = r#"<templates><template name="T" id="1">
      <string name="Hdr"><constant value="H"/></string>
      <uInt32 name="a"/>
      <string name="K"><constant value="K"/></string>
      <decimal name="px"><exponent><constant value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
      <sequence name="S"><length name="n"/>
        <uInt32 name="c"><copy/></uInt32>
        <string name="E"><constant value="E"/></string>
      </sequence>
      <string name="Z"><constant value="Z"/></string>
    </template></templates>"#;
    // Two messages: a=5, px 0.01 then 0.04 (deltas 1 and 3), two elements each (c sent
    // in the first, copied in the second).
    let msgs: [&[u8]; 2] =
        [&[0xc0, 0x81, 0x85, 0x81, 0x82, 0xc0, 0x83, 0x80], &[0x80, 0x85, 0x83, 0x82, 0xc0, 0x84, 0x80]];
    let generic = Program::from_xml(xml).unwrap();
    let want = decode_all(&generic, &msgs);
    assert_eq!(
        want[0],
        "Hdr=H,a=5,K=K,px=0.01,S=Sequence { len: 2, end: 11 },S=Element { end: 8 },c=3,E=E,\
         S=Element { end: 11 },c=3,E=E,Z=Z"
    );
    assert!(want[1].contains("px=0.04") && want[1].contains("c=4"), "{}", want[1]);
    let mut special = generic.clone();
    let profile = {
        let mut d = Decoder::new(&special);
        d.start_profile();
        let mut m = Message::new();
        for b in msgs {
            d.decode(b, &mut m).unwrap();
        }
        d.take_profile()
    };
    assert!(special.specialise(&profile, 8, 64, 0.0) >= 2);
    let listing = special.listing();
    for names in ["then consts   K", "then consts   E", "then consts   Z"] {
        assert!(listing.contains(names), "{names} not carried:\n{listing}");
    }
    assert!(special.insns.iter().any(|i| i.op == tickplant_fast::program::op::DEC_SPLIT_CONST_DELTA), "{listing}");
    assert_eq!(decode_all(&special, &msgs), want, "{listing}");
}

/// Decode a stream of messages, encode them again as received, decode that: the same
/// values. Returns the rendered messages.
fn round_trip(xml: &str, stream: &[u8]) -> Vec<String> {
    use tickplant_fast::Encoder;
    let p = Program::from_xml(xml).unwrap();
    let mut d = Decoder::new(&p);
    let mut enc = Encoder::new(&p);
    let mut m = Message::new();
    let (mut at, mut again, mut first) = (0, Vec::new(), Vec::new());
    while at < stream.len() {
        at += d.decode(&stream[at..], &mut m).unwrap();
        first.push(format!("{:?} {:?}", m.entries, m.bytes));
        enc.encode_as_received(&m, &mut again).unwrap();
    }
    let mut d = Decoder::new(&p);
    let (mut at, mut second) = (0, Vec::new());
    while at < again.len() {
        at += d.decode(&again[at..], &mut m).unwrap();
        second.push(format!("{:?} {:?}", m.entries, m.bytes));
    }
    assert_eq!(second, first, "re-encoded as {again:02x?}");
    first
}

/// Strings of NULs, found by fuzzing: a nullable 0x00 0x00 0x80 is the one-NUL string
/// (it read as two), and two NULs have no encoding of their own (their bytes are the one
/// NUL's), so a tail or a delta that would send exactly two NULs sends one byte more.
#[test]
fn strings_of_nuls_round_trip() {
    let inner = r#"<templates><template name="Inner" id="3"><int64 name="x"><delta/></int64>
        <string name="y" presence="optional"><tail value="ABCD"/></string></template></templates>"#;
    // "ABCD" then the tail "C\0": "ABC\0" (sent again as the nullable one-NUL tail).
    let got = round_trip(inner, &[0xca, 0x83, 0xca, 0xa9, 0x80, 0x43, 0x80]);
    assert!(got[1].ends_with("[65, 66, 67, 0]"), "{got:?}");
    // "\x06\0\x01\0" then the tail "\0\0\0": "\x06\0\0\0" (its shortest tail, two NULs,
    // cannot be sent).
    let got =
        round_trip(inner, &[0xca, 0x83, 0xa1, 0xa1, 0xa1, 0x06, 0x00, 0x01, 0x80, 0xa1, 0xa1, 0x00, 0x00, 0x00, 0x80]);
    assert!(got[2].ends_with("[6, 0, 0, 0]"), "{got:?}");
    // Delta: "A", then "A\0\0" (one removed, "A\0\0" appended: the two NULs alone cannot
    // be sent after the kept "A").
    let delta = r#"<templates><template name="T" id="1"><string name="d"><delta/></string></template></templates>"#;
    let got = round_trip(delta, &[0xc0, 0x81, 0x80, 0xc1, 0x80, 0x81, 0x41, 0x00, 0x80]);
    assert!(got[1].ends_with("[65, 0, 0]"), "{got:?}");
}

/// Template files as exchanges ship them: a namespace prefix used without a declaration is
/// accepted with a warning naming its line, and the session control protocol's reset
/// (`scp:reset` on a template, or the SCP namespace's own Reset template) resets every
/// dictionary when decoded, in the middle of a buffer too.
#[test]
fn exchange_templates_and_the_scp_reset() {
    let xml = "<templates xmlns=\"http://www.fixprotocol.org/ns/fast/td/1.1\">\n\
               <template name=\"Reset\" id=\"120\" scp:reset=\"yes\"/>\n\
               <template name=\"T\" id=\"1\"><uInt32 name=\"a\"><copy/></uInt32></template>\n\
               </templates>";
    let p = Program::from_xml(xml).unwrap();
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("line 2") && p.warnings[0].contains("\"scp\""), "{:?}", p.warnings);
    // T a=5; T (a copied); Reset; T (its id again, a absent): after the reset the
    // dictionary is empty, so there is nothing to copy (a mandatory copy: error D5).
    let (t_a5, t_copy, reset, t_again) = ([0xe0, 0x81, 0x85], [0x80], [0xc0, 0xf8], [0xc0, 0x81]);
    assert_eq!(decode_all(&p, &[&t_a5, &t_copy]), ["a=5", "a=5"]);
    assert_eq!(decode_all(&p, &[&t_a5, &reset, &t_again])[2], "error D5");
    // The same bytes back to back in one buffer: the reset takes effect mid-buffer.
    let buf: Vec<u8> = [&t_a5[..], &reset, &t_again].concat();
    let mut d = Decoder::new(&p);
    let mut m = Message::new();
    let mut at = 0;
    for _ in 0..2 {
        at += d.decode(&buf[at..], &mut m).unwrap();
    }
    assert_eq!(d.decode(&buf[at..], &mut m).unwrap_err().kind.code(), "D5");
    // The SCP namespace's own Reset template needs no attribute.
    let scp = "<templates xmlns=\"http://www.fixprotocol.org/ns/fast/td/1.1\" xmlns:scp=\"http://www.fixprotocol.org/ns/fast/scp/1.1\">\
               <scp:template name=\"Reset\" id=\"120\"/>\
               <template name=\"T\" id=\"1\"><uInt32 name=\"a\"><copy/></uInt32></template></templates>";
    let p = Program::from_xml(scp).unwrap();
    assert!(p.warnings.is_empty());
    assert_eq!(decode_all(&p, &[&t_a5, &reset, &t_again])[2], "error D5");
    // Without the reset the copy holds.
    let plain = xml.replace(" scp:reset=\"yes\"", "");
    let p = Program::from_xml(&plain).unwrap();
    assert!(p.warnings.is_empty());
    assert_eq!(decode_all(&p, &[&t_a5, &reset, &t_again])[2], "a=5");
}

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

fn decode_all(templates: &str, file: &str, framing: Framing) -> Option<(Program, Vec<String>)> {
    let (t, d) = (data(templates)?, data(file)?);
    let p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let bytes = std::fs::read(d).unwrap();
    let mut out = Vec::new();
    {
        let mut dec = Decoder::new(&p);
        let mut msg = Message::new();
        for_each(&mut dec, framing, &bytes, &mut msg, |m, _| {
            let mut s = String::new();
            json::write_json(&p, m, &mut s);
            out.push(s);
            true
        })
        .unwrap();
    }
    Some((p, out))
}

/// A decimal's value as normalized text (no trailing zeros): how the CQG vectors print them.
fn normalized(d: tickplant_fast::Decimal) -> String {
    let (mut m, mut e) = (d.mantissa, d.exponent);
    if m == 0 {
        return "0".into();
    }
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    tickplant_fast::Decimal::new(m, e).to_string()
}

/// rs-fastlib's text form: `Name=<f=v|seq=<f=v><f=v>|...>`.
fn text(p: &Program, m: &Message, from: usize, to: usize, out: &mut String) {
    use tickplant_fast::Value;
    let mut i = from;
    let mut first = true;
    while i < to {
        let e = m.entries[i];
        if !first {
            out.push('|');
        }
        first = false;
        out.push_str(&p.fields[e.field as usize].name);
        out.push('=');
        match e.value {
            Value::UInt(v) => out.push_str(&v.to_string()),
            Value::Int(v) => out.push_str(&v.to_string()),
            Value::Decimal(d) => out.push_str(&normalized(d)),
            Value::Bytes { .. } | Value::Static { .. } => {
                out.push_str(&String::from_utf8_lossy(m.bytes_of(p, &e.value).unwrap()))
            }
            Value::Sequence { end, .. } => {
                let mut j = i + 1;
                while j < end as usize {
                    let Value::Element { end: ee } = m.entries[j].value else { unreachable!() };
                    out.push('<');
                    text(p, m, j + 1, ee as usize, out);
                    out.push('>');
                    j = ee as usize;
                }
            }
            Value::Group { end } | Value::Element { end } | Value::Template { end, .. } => {
                out.push('<');
                text(p, m, i + 1, end as usize, out);
                out.push('>');
            }
        }
        i = m.skip(i);
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn cqg_vectors_decode_in_order_with_one_decoder() {
    let (Some(t), Some(v)) = (data("cqg/templates.xml"), data("cqg/cqg_vectors.json")) else { return };
    let p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let vectors: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(v).unwrap()).unwrap();
    let mut checked = 0;
    for test in vectors["vectors"].as_array().unwrap() {
        let mut dec = Decoder::new(&p);
        let mut enc = tickplant_fast::Encoder::new(&p);
        let mut msg = Message::new();
        let json_mode = test["mode"].as_str().unwrap().ends_with("json");
        for m in test["messages"].as_array().unwrap() {
            let bytes = hex(m["hex"].as_str().unwrap());
            let used = dec.decode(&bytes, &mut msg).unwrap_or_else(|e| panic!("{}: {e}", test["test"]));
            assert_eq!(used, bytes.len(), "{}", test["test"]);
            let mut again = Vec::new();
            enc.encode_as_received(&msg, &mut again).unwrap();
            assert_eq!(again, bytes, "{}: re-encoded as received", test["test"]);
            let name = &p.templates[msg.template as usize].name;
            if json_mode {
                let mut s = String::new();
                json::write_json(&p, &msg, &mut s);
                let ours: serde_json::Value = serde_json::from_str(&s).unwrap();
                let expected: serde_json::Value = serde_json::from_str(m["expected"].as_str().unwrap()).unwrap();
                assert_eq!(ours["template"].as_str(), Some(name.as_str()));
                assert_eq!(json_numbers(&ours["fields"]), json_numbers(&expected[name.as_str()]), "{}", test["test"]);
            } else {
                let mut s = format!("{name}=<");
                text(&p, &msg, 0, msg.entries.len(), &mut s);
                s.push('>');
                assert_eq!(s, m["expected"].as_str().unwrap(), "{}", test["test"]);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 11);
}

/// Decimals are strings in our JSON and numbers in rs-fastlib's: compare both as numbers.
fn json_numbers(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        J::Object(o) => J::Object(o.iter().map(|(k, v)| (k.clone(), json_numbers(v))).collect()),
        J::Array(a) => J::Array(a.iter().map(json_numbers).collect()),
        J::Number(n) => J::String(normalize_text(&n.to_string())),
        J::String(s) if s.parse::<f64>().is_ok() && s.contains('.') => J::String(normalize_text(s)),
        J::String(s) if s.parse::<i64>().is_ok() => J::String(normalize_text(s)),
        other => other.clone(),
    }
}

fn normalize_text(s: &str) -> String {
    match tickplant_fast::Decimal::parse(s) {
        Ok(d) => normalized(d),
        Err(_) => s.to_string(),
    }
}

#[test]
fn opra_capture_has_63_messages_in_7_blocks_starting_with_start_of_day() {
    let Some((p, out)) = decode_all("openfast/OPRA/OPRATemplate.xml", "openfast/OPRA/messages.fast", Framing::Opra)
    else {
        return;
    };
    assert_eq!(out.len(), 63);
    let first: serde_json::Value = serde_json::from_str(&out[0]).unwrap();
    assert_eq!(first["fields"]["TEXT"], "START OF DAY");
    assert_eq!(first["template"], "OPRA");
    assert_eq!(p.templates.len(), 1);
}

#[test]
fn cme_message_net_change_is_minus_5025() {
    let Some((_, out)) = decode_all("openfast/CME/templates.xml", "openfast/CME/messages.fast", Framing::Raw) else {
        return;
    };
    assert_eq!(out.len(), 1);
    let m: serde_json::Value = serde_json::from_str(&out[0]).unwrap();
    assert_eq!(m["template_id"], 33);
    assert_eq!(m["fields"]["MDEntries"][0]["NetChgPrevDay"], "-5025.0");
}

#[test]
fn fpl_example_decodes_to_data_xml() {
    let Some((_, out)) = decode_all("openfast/FPL/FASTTestTemplate.xml", "openfast/FPL/messages.fast", Framing::Raw)
    else {
        return;
    };
    let xml = std::fs::read_to_string(data("openfast/FPL/data.xml").unwrap()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let expected: Vec<_> = doc.root_element().children().filter(|n| n.is_element()).collect();
    assert_eq!(out.len(), expected.len());
    for (k, (ours, exp)) in out.iter().zip(expected).enumerate() {
        let ours: serde_json::Value = serde_json::from_str(ours).unwrap();
        let f = &ours["fields"];
        for child in exp.children().filter(|n| n.is_element()) {
            let name = child.tag_name().name();
            let text = child.text().unwrap_or("").trim();
            match name {
                // data.xml calls ApplVerID BeginString.
                "BeginString" => assert_eq!(f["ApplVerID"], text),
                // The specification's example text is one off from its own bytes for the first
                // two SendingTimes (the bytes carry deltas 20061101132712124, +64, +16, ending
                // at ...204 as the text does); we check the third and the deltas.
                "SendingTime" => {
                    let v = f["SendingTime"].as_i64().unwrap();
                    let t: i64 = text.parse().unwrap();
                    assert_eq!(v - t, if k < 2 { 1 } else { 0 });
                }
                "MDEntries" => {
                    let entries: Vec<_> = child.children().filter(|n| n.is_element()).collect();
                    let ours = f["MDEntries"].as_array().unwrap();
                    assert_eq!(ours.len(), entries.len());
                    for (o, e) in ours.iter().zip(entries) {
                        let mut n = 0;
                        for fe in e.children().filter(|n| n.is_element()) {
                            let (fname, ftext) = (fe.tag_name().name(), fe.text().unwrap().trim());
                            let got = match &o[fname] {
                                serde_json::Value::String(s) => normalize_text(s),
                                v => normalize_text(&v.to_string()),
                            };
                            assert_eq!(got, normalize_text(ftext), "message {k} {fname}");
                            n += 1;
                        }
                        assert_eq!(o.as_object().unwrap().len(), n, "message {k}: extra fields {o}");
                    }
                }
                _ => {
                    let got = match &f[name] {
                        serde_json::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    };
                    assert_eq!(got, text, "message {k} {name}");
                }
            }
        }
    }
}

#[test]
fn mfast_complex30000_reencodes_to_identical_bytes() {
    let (Some(t), Some(d)) = (data("mfast/example.xml"), data("mfast/complex30000.dat")) else { return };
    let p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
    let bytes = std::fs::read(d).unwrap();
    let mut dec = Decoder::new(&p);
    let mut enc = tickplant_fast::Encoder::new(&p);
    let mut msg = Message::new();
    let mut out = Vec::new();
    let n = for_each(&mut dec, Framing::U32Le, &bytes, &mut msg, |m, pos| {
        out.clear();
        enc.encode(m, &mut out).unwrap();
        assert_eq!(out, &bytes[pos.offset..pos.offset + pos.len], "message {}", pos.index);
        true
    })
    .unwrap();
    assert_eq!(n, 30_001);
}

#[test]
fn other_samples_reencode_as_received_to_identical_bytes() {
    for (t, f, fr) in [
        ("openfast/OPRA/OPRATemplate.xml", "openfast/OPRA/messages.fast", Framing::Opra),
        ("openfast/CME/templates.xml", "openfast/CME/messages.fast", Framing::Raw),
        ("openfast/FPL/FASTTestTemplate.xml", "openfast/FPL/messages.fast", Framing::Raw),
    ] {
        let (Some(t), Some(d)) = (data(t), data(f)) else { return };
        let p = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
        let bytes = std::fs::read(d).unwrap();
        let mut dec = Decoder::new(&p);
        let mut enc = tickplant_fast::Encoder::new(&p);
        let mut msg = Message::new();
        let mut out = Vec::new();
        let mut same = 0;
        let n = for_each(&mut dec, fr, &bytes, &mut msg, |m, pos| {
            out.clear();
            enc.encode_as_received(m, &mut out).unwrap();
            if out == bytes[pos.offset..pos.offset + pos.len] {
                same += 1;
            } else {
                eprintln!(
                    "{f} message {}:\n  ours {:02x?}\n  file {:02x?}",
                    pos.index,
                    out,
                    &bytes[pos.offset..pos.offset + pos.len]
                );
            }
            true
        })
        .unwrap();
        eprintln!("{f}: {same}/{n} identical");
        assert_eq!(same, n, "{f}");
    }
}

/// Specialised segments decode exactly what the generic program decodes.
#[test]
fn specialised_segments_decode_as_the_generic_program() {
    for (t, f, fr) in [
        ("mfast/example.xml", "mfast/complex30000.dat", Framing::U32Le),
        ("openfast/OPRA/OPRATemplate.xml", "openfast/OPRA/messages.fast", Framing::Opra),
        ("openfast/FPL/FASTTestTemplate.xml", "openfast/FPL/messages.fast", Framing::Raw),
    ] {
        let (Some(t), Some(d)) = (data(t), data(f)) else { return };
        let generic = Program::from_xml(&std::fs::read_to_string(t).unwrap()).unwrap();
        let bytes = std::fs::read(d).unwrap();
        let mut special = generic.clone();
        let built = special.specialise_for(&bytes, fr).unwrap();
        assert!(built > 0, "{f}");
        let mut expected = Vec::new();
        let mut dec = Decoder::new(&generic);
        let mut msg = Message::new();
        for_each(&mut dec, fr, &bytes, &mut msg, |m, _| {
            expected.push((m.template, m.entries.clone(), m.bytes.clone()));
            true
        })
        .unwrap();
        let mut dec = Decoder::new(&special);
        let mut k = 0;
        let mut frames = Vec::new();
        let r = for_each(&mut dec, fr, &bytes, &mut msg, |m, pos| {
            frames.push(pos);
            // Values compare by meaning: a static string in one is bytes in the other.
            let (t, e, b) = &expected[k];
            assert_eq!(m.template, *t, "{f} message {k}");
            assert_eq!(m.entries.len(), e.len(), "{f} message {k}");
            for (x, y) in m.entries.iter().zip(e) {
                assert_eq!(x.field, y.field, "{f} message {k}");
                let xb = m.bytes_of(&special, &x.value);
                let yb = match y.value {
                    tickplant_fast::Value::Bytes { start, len } => Some(&b[start as usize..(start + len) as usize]),
                    tickplant_fast::Value::Static { index } => Some(generic.strings[index as usize].as_slice()),
                    _ => None,
                };
                match (xb, yb) {
                    (Some(x), Some(y)) => assert_eq!(x, y, "{f} message {k}"),
                    _ => assert_eq!(x.value, y.value, "{f} message {k}"),
                }
            }
            k += 1;
            true
        });
        r.unwrap_or_else(|e| panic!("{f}: {e}\n{}", special.listing()));
        assert_eq!(k, expected.len());
    }
}

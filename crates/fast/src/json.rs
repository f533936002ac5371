//! Decoded messages as JSON lines: `{"template_id": N, "template": "Name", "fields": {...}}`.
//!
//! Integers are JSON numbers, decimals strings in plain notation with the digits the exponent
//! gives and at least one after the point (`-50250e-1` and `-5025e0` are both `"-5025.0"`,
//! `94325e-3` is `"94.325"`), strings are
//! strings, byte vectors hex, sequences arrays of objects, groups objects; absent optional
//! fields are left out. A template without an id prints `"template_id": null`. A dynamic
//! template reference is an object of the same shape under the key `"templateRef"`.

use crate::decoder::{Message, Value};
use crate::program::{FieldKind, Program};
use crate::template::FieldType;
use std::fmt::Write;

fn escape(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn fields(p: &Program, m: &Message, mut i: usize, end: usize, out: &mut String) {
    out.push('{');
    let mut first = true;
    while i < end {
        let e = &m.entries[i];
        if !first {
            out.push_str(", ");
        }
        first = false;
        let f = &p.fields[e.field as usize];
        escape(out, &f.name);
        out.push_str(": ");
        i = value(p, m, i, out);
    }
    out.push('}');
}

/// Write the value of entry `i`; returns the index after it.
fn value(p: &Program, m: &Message, i: usize, out: &mut String) -> usize {
    let e = &m.entries[i];
    match e.value {
        Value::UInt(v) => {
            let _ = write!(out, "{v}");
        }
        Value::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Value::Decimal(d) => {
            out.push('"');
            d.write_plain(out);
            // An exponent >= 0 has no fraction digits; ".0" keeps the text a decimal (-5025.0).
            if d.exponent >= 0 {
                out.push_str(".0");
            }
            out.push('"');
        }
        Value::Bytes { .. } | Value::Static { .. } => {
            let b = m.bytes_of(p, &e.value).unwrap_or_default();
            match p.fields[e.field as usize].kind {
                FieldKind::Scalar(FieldType::Bytes) => {
                    out.push('"');
                    for x in b {
                        let _ = write!(out, "{x:02x}");
                    }
                    out.push('"');
                }
                _ => escape(out, &String::from_utf8_lossy(b)),
            }
        }
        Value::Sequence { end, .. } => {
            out.push('[');
            let mut j = i + 1;
            let mut first = true;
            while j < end as usize {
                if let Value::Element { end: ee } = m.entries[j].value {
                    if !first {
                        out.push_str(", ");
                    }
                    first = false;
                    fields(p, m, j + 1, ee as usize, out);
                    j = ee as usize;
                } else {
                    j += 1;
                }
            }
            out.push(']');
            return end as usize;
        }
        Value::Element { end } | Value::Group { end } => {
            fields(p, m, i + 1, end as usize, out);
            return end as usize;
        }
        Value::Template { template, end } => {
            header(p, template, out);
            fields(p, m, i + 1, end as usize, out);
            out.push('}');
            return end as usize;
        }
    }
    i + 1
}

fn header(p: &Program, template: u32, out: &mut String) {
    let t = &p.templates[template as usize];
    out.push_str("{\"template_id\": ");
    match t.id {
        Some(id) => {
            let _ = write!(out, "{id}");
        }
        None => out.push_str("null"),
    }
    out.push_str(", \"template\": ");
    escape(out, &t.name);
    out.push_str(", \"fields\": ");
}

/// Append one message as a JSON object (no newline).
pub fn write_json(p: &Program, m: &Message, out: &mut String) {
    header(p, m.template, out);
    fields(p, m, 0, m.entries.len(), out);
    out.push('}');
}

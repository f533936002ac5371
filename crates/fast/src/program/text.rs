//! The program as a text a user can edit and load back (`tickplant fast compile --emit`,
//! `tickplant fast decode --program`): every table of a generic program, one item a line,
//! with the listing's description of each instruction as a comment. The round trip is
//! exact: [`Program::to_text`] of [`Program::from_text`] gives the text back, line for line.
//!
//! ```text
//! program templates=1 insns=2 fields=2 strings=0 islots=2 sslots=0 default=0
//! field 0 "A" id="1" kind=UInt32
//! islot 1 "global/A/uInt32"
//! template 0 "T" id=1 insns=0..2 bits=2
//! insn 0000 IntCopy flags=16 field=0 slot=1 a=0 init=0 keep ; u32.copy A(1) slot=i1 ...
//! ```
//!
//! Each instruction ends in `keep` (its value goes into the message) or `skip` (decoded,
//! so that the stream and the dictionaries stay right, but not written): the research's
//! forward and discard. A skipped integer or ASCII string without an operator is not even
//! decoded: its bytes are stepped over to their stop bit. Only scalar fields can be skipped.
//! Loading checks every index and range the engine relies on, so an edited text gives an
//! error with its line, never a program that panics.

use std::fmt::Write as _;

use super::*;
use crate::types::FieldType;

/// Why a program text does not load: the line (from 1) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "program text line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for TextError {}

const CODES: [Code; 21] = [
    Code::IntNone,
    Code::IntConst,
    Code::IntDefault,
    Code::IntCopy,
    Code::IntIncr,
    Code::IntDelta,
    Code::DecNone,
    Code::DecConst,
    Code::DecDefault,
    Code::DecCopy,
    Code::DecDelta,
    Code::DecSplit,
    Code::StrNone,
    Code::StrConst,
    Code::StrDefault,
    Code::StrCopy,
    Code::StrDelta,
    Code::StrTail,
    Code::Seq,
    Code::Group,
    Code::DynRef,
];

const TYPES: [FieldType; 8] = [
    FieldType::UInt32,
    FieldType::Int32,
    FieldType::UInt64,
    FieldType::Int64,
    FieldType::Decimal,
    FieldType::Ascii,
    FieldType::Unicode,
    FieldType::Bytes,
];

fn kind_name(k: FieldKind) -> String {
    match k {
        FieldKind::Scalar(t) => format!("{t:?}"),
        other => format!("{other:?}"),
    }
}

fn parse_kind(s: &str) -> Option<FieldKind> {
    match s {
        "Sequence" => Some(FieldKind::Sequence),
        "Group" => Some(FieldKind::Group),
        "TemplateRef" => Some(FieldKind::TemplateRef),
        _ => TYPES.iter().find(|t| format!("{t:?}") == s).map(|&t| FieldKind::Scalar(t)),
    }
}

/// A value written as a quoted string (Rust's escapes) when it is text, else `hex:...`.
fn quote_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => format!("{s:?}"),
        Err(_) => format!("hex:{}", b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
    }
}

fn opt_quoted(v: Option<&str>) -> String {
    v.map_or("-".into(), |s| format!("{s:?}"))
}

/// A line's words: bare words, `key=value`, quoted strings (with `\"`, `\\`, `\n`, `\t`,
/// `\r`, `\0`, `\u{...}` escapes); a `;` outside quotes starts a comment.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars().peekable();
    let mut in_word = false;
    while let Some(c) = chars.next() {
        match c {
            ';' => break,
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '"' => {
                in_word = true;
                cur.push('"');
                loop {
                    match chars.next() {
                        None => return Err("a quoted string is not closed".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => cur.push('\n'),
                            Some('t') => cur.push('\t'),
                            Some('r') => cur.push('\r'),
                            Some('0') => cur.push('\0'),
                            Some(c @ ('"' | '\\' | '\'')) => cur.push(c),
                            Some('u') => {
                                let hex: String = chars.by_ref().skip(1).take_while(|&c| c != '}').collect();
                                let ch = u32::from_str_radix(&hex, 16)
                                    .ok()
                                    .and_then(char::from_u32)
                                    .ok_or_else(|| format!("bad escape \\u{{{hex}}}"))?;
                                cur.push(ch);
                            }
                            other => return Err(format!("bad escape \\{}", other.unwrap_or(' '))),
                        },
                        Some(c) => cur.push(c),
                    }
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// `"text"` (the opening quote kept by [`words`]) or `-`.
fn unquote(w: &str) -> Result<Option<String>, String> {
    if w == "-" {
        return Ok(None);
    }
    w.strip_prefix('"').map(|s| Some(s.to_string())).ok_or_else(|| format!("{w:?}: expected a quoted string or -"))
}

fn value_bytes(w: &str) -> Result<Vec<u8>, String> {
    if let Some(h) = w.strip_prefix("hex:") {
        if h.len() % 2 != 0 {
            return Err(format!("{w}: odd number of hex digits"));
        }
        return (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).map_err(|_| format!("{w}: not hex")))
            .collect();
    }
    unquote(w)?.map(String::into_bytes).ok_or_else(|| "a value: expected a quoted string or hex:".into())
}

/// The `key=value` words of a line, in any order after the fixed ones.
struct Keys<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Keys<'a> {
    fn of(words: &'a [String]) -> Keys<'a> {
        Keys(words.iter().filter_map(|w| w.split_once('=')).collect())
    }
    fn get(&self, k: &str) -> Result<&'a str, String> {
        self.0.iter().find(|(n, _)| *n == k).map(|(_, v)| *v).ok_or_else(|| format!("missing {k}="))
    }
    fn num<T: std::str::FromStr>(&self, k: &str) -> Result<T, String> {
        let v = self.get(k)?;
        v.parse().map_err(|_| format!("{k}={v}: not a number of the right size"))
    }
}

fn range(v: &str) -> Result<(u32, u32), String> {
    let (a, b) = v.split_once("..").ok_or_else(|| format!("{v}: expected START..END"))?;
    Ok((a.parse().map_err(|_| format!("{a}: not a number"))?, b.parse().map_err(|_| format!("{b}: not a number"))?))
}

impl Program {
    /// The program as text (see the module doc); an error for a specialised program, whose
    /// segments and kernels are built from a profile at load time, not written.
    pub fn to_text(&self) -> Result<String, String> {
        if !self.specials.is_empty() || !self.consts.is_empty() {
            return Err("a specialised program: write the program text before specialising it".into());
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "; tickplant FAST program text: edit keep/skip (and values) and load it with `fast decode --program`"
        );
        let _ = writeln!(
            out,
            "program templates={} insns={} fields={} strings={} islots={} sslots={} default={}",
            self.templates.len(),
            self.insns.len(),
            self.fields.len(),
            self.strings.len(),
            self.int_slots.len(),
            self.str_slots.len(),
            self.default_template.map_or("-".into(), |t| t.to_string())
        );
        for (i, f) in self.fields.iter().enumerate() {
            let _ = writeln!(
                out,
                "field {i} {:?} id={} kind={}{}",
                f.name,
                opt_quoted(f.id.as_deref()),
                kind_name(f.kind),
                if f.constant { " const" } else { "" }
            );
        }
        for (i, s) in self.strings.iter().enumerate() {
            let _ = writeln!(out, "string {i} {}", quote_bytes(s));
        }
        for (i, s) in self.int_slots.iter().enumerate() {
            let _ = writeln!(out, "islot {i} {s:?}");
        }
        for (i, s) in self.str_slots.iter().enumerate() {
            let _ = writeln!(out, "sslot {i} {s:?}");
        }
        for (i, t) in self.templates.iter().enumerate() {
            let _ = writeln!(
                out,
                "template {i} {:?} id={} insns={}..{} bits={}{}",
                t.name,
                t.id.map_or("-".into(), |x| x.to_string()),
                t.start,
                t.end,
                t.bits,
                if t.reset { " reset" } else { "" }
            );
        }
        for (i, ins) in self.insns.iter().enumerate() {
            let _ = writeln!(
                out,
                "insn {i:04} {:?} flags={} field={} slot={} a={} init={} {} ; {}",
                ins.code,
                ins.flags,
                ins.field,
                ins.slot,
                ins.a,
                ins.init,
                if ins.skip { "skip" } else { "keep" },
                self.describe(ins)
            );
        }
        Ok(out)
    }

    /// Load a program text (see the module doc), checking what the engine relies on.
    pub fn from_text(text: &str) -> Result<Program, TextError> {
        let mut p = Program::default();
        let mut header: Option<[usize; 6]> = None;
        let mut default = None;
        for (n, raw) in text.lines().enumerate() {
            let err = |reason: String| TextError { line: n + 1, reason };
            let w = words(raw).map_err(err)?;
            let Some(head) = w.first() else { continue };
            let keys = Keys::of(&w);
            let index = |what: &str, have: usize| -> Result<(), TextError> {
                let i: usize = w.get(1).and_then(|x| x.parse().ok()).ok_or_else(|| err(format!("{what}: no index")))?;
                if i != have {
                    return Err(err(format!("{what} {i}: expected {what} {have} (items in order from 0)")));
                }
                Ok(())
            };
            match head.as_str() {
                "program" => {
                    let counts = ["templates", "insns", "fields", "strings", "islots", "sslots"]
                        .map(|k| keys.num::<usize>(k).map_err(err));
                    let mut c = [0usize; 6];
                    for (slot, v) in c.iter_mut().zip(counts) {
                        *slot = v?;
                    }
                    header = Some(c);
                    default = match keys.get("default").map_err(err)? {
                        "-" => None,
                        v => Some(v.parse::<u32>().map_err(|_| err(format!("default={v}: not a number")))?),
                    };
                }
                "field" => {
                    index("field", p.fields.len())?;
                    let name = w.get(2).map(|s| unquote(s)).transpose().map_err(err)?.flatten();
                    let name = name.ok_or_else(|| err("field: no name".into()))?;
                    let id = unquote(keys.get("id").map_err(err)?).map_err(err)?;
                    let kind = keys.get("kind").map_err(err)?;
                    let kind = parse_kind(kind).ok_or_else(|| err(format!("kind={kind}: not a field kind")))?;
                    p.fields.push(FieldInfo { name, id, kind, constant: w.iter().any(|x| x == "const") });
                }
                "string" => {
                    index("string", p.strings.len())?;
                    let v = w.get(2).ok_or_else(|| err("string: no value".into()))?;
                    p.strings.push(value_bytes(v).map_err(err)?);
                }
                "islot" | "sslot" => {
                    let list = if head == "islot" { &mut p.int_slots } else { &mut p.str_slots };
                    let have = list.len();
                    index(head, have)?;
                    let v = w.get(2).map(|s| unquote(s)).transpose().map_err(err)?.flatten();
                    list.push(v.ok_or_else(|| err(format!("{head}: no name")))?);
                }
                "template" => {
                    index("template", p.templates.len())?;
                    let name = w.get(2).map(|s| unquote(s)).transpose().map_err(err)?.flatten();
                    let name = name.ok_or_else(|| err("template: no name".into()))?;
                    let id = match keys.get("id").map_err(err)? {
                        "-" => None,
                        v => Some(v.parse::<u32>().map_err(|_| err(format!("id={v}: not a number")))?),
                    };
                    let (start, end) = range(keys.get("insns").map_err(err)?).map_err(err)?;
                    let bits = keys.num("bits").map_err(err)?;
                    let reset = w.iter().any(|x| x == "reset");
                    p.templates.push(TemplateInfo { name, id, start, end, reset, bits, special: 0 });
                }
                "insn" => {
                    index("insn", p.insns.len())?;
                    let code = w.get(2).ok_or_else(|| err("insn: no code".into()))?;
                    let code = *CODES
                        .iter()
                        .find(|c| format!("{c:?}") == *code)
                        .ok_or_else(|| err(format!("{code}: not an instruction of a generic program")))?;
                    let skip = match (w.iter().any(|x| x == "skip"), w.iter().any(|x| x == "keep")) {
                        (true, false) => true,
                        (false, true) => false,
                        _ => return Err(err("an instruction ends in keep or skip (one of them)".into())),
                    };
                    p.insns.push(Insn {
                        code,
                        flags: keys.num("flags").map_err(err)?,
                        field: keys.num("field").map_err(err)?,
                        slot: keys.num("slot").map_err(err)?,
                        a: keys.num("a").map_err(err)?,
                        init: keys.num("init").map_err(err)?,
                        skip,
                        ..Insn::BLANK
                    });
                }
                other => return Err(err(format!("{other:?}: not an item of a program text"))),
            }
        }
        let Some(h) = header else {
            return Err(TextError { line: 1, reason: "no `program` line".into() });
        };
        let have =
            [p.templates.len(), p.insns.len(), p.fields.len(), p.strings.len(), p.int_slots.len(), p.str_slots.len()];
        if h != have {
            return Err(TextError {
                line: 1,
                reason: format!(
                    "the program line counts (templates, insns, fields, strings, islots, sslots) {h:?}, the text holds {have:?}"
                ),
            });
        }
        p.default_template = default;
        p.check().map_err(|(line, reason)| TextError { line, reason })?;
        p.index_templates();
        p.seal();
        Ok(p)
    }

    /// Whether instruction `i` is read by the one before it (a split decimal's exponent and
    /// mantissa, a sequence's length): the engine never runs it on its own.
    pub fn owned(&self, i: usize) -> bool {
        i > 0 && matches!(self.insns[i - 1].code, Code::DecSplit | Code::Seq)
            || i > 1 && self.insns[i - 2].code == Code::DecSplit
    }

    /// Mark every field called one of `names` `skip` (`fast compile --emit --skip`); returns
    /// the instructions marked. An error names what cannot be skipped (a sequence, group or
    /// template reference, a part a split decimal or sequence reads) or is not a field.
    pub fn skip_fields(&mut self, names: &[&str]) -> Result<usize, String> {
        let mut n = 0;
        for name in names {
            let mut found = false;
            for i in 0..self.insns.len() {
                if self.fields[self.insns[i].field as usize].name != *name || self.owned(i) {
                    continue;
                }
                found = true;
                if matches!(self.insns[i].code, Code::Seq | Code::Group | Code::DynRef) {
                    return Err(format!("{name}: a sequence, group or template reference cannot be skipped"));
                }
                self.insns[i].skip = true;
                n += 1;
            }
            if !found {
                return Err(format!(
                    "{name}: no field of that name (a sequence's length cannot be skipped on its own)"
                ));
            }
        }
        self.seal();
        Ok(n)
    }

    /// What the engine relies on, checked: every index in its table, every template's
    /// instructions in range and nested properly, a split decimal's two parts and a
    /// sequence's length after them. Errors carry the text's line of the item.
    fn check(&self) -> Result<(), (usize, String)> {
        // Lines: the header and comment, then each table in order.
        let first_insn_line = 3
            + self.fields.len()
            + self.strings.len()
            + self.int_slots.len()
            + self.str_slots.len()
            + self.templates.len();
        let n = self.insns.len() as u32;
        if let Some(d) = self.default_template {
            if d as usize >= self.templates.len() {
                return Err((2, format!("default={d}: no such template")));
            }
        }
        let mut ids = std::collections::HashSet::new();
        for (k, t) in self.templates.iter().enumerate() {
            let line = first_insn_line - self.templates.len() + k;
            if t.start > t.end || t.end > n {
                return Err((line, format!("template {:?}: insns={}..{} outside 0..{n}", t.name, t.start, t.end)));
            }
            if t.id.is_some_and(|id| !ids.insert(id)) {
                return Err((line, format!("template {:?}: id used twice", t.name)));
            }
        }
        for (i, ins) in self.insns.iter().enumerate() {
            let line = first_insn_line + i;
            let bad = |what: String| Err((line, what));
            if ins.field as usize >= self.fields.len() {
                return bad(format!("field={}: no such field", ins.field));
            }
            let int_slot =
                matches!(ins.code, Code::IntCopy | Code::IntIncr | Code::IntDelta | Code::DecCopy | Code::DecDelta);
            let str_slot = matches!(ins.code, Code::StrCopy | Code::StrDelta | Code::StrTail);
            if int_slot && ins.slot as usize >= self.int_slots.len() {
                return bad(format!("slot={}: no such integer slot", ins.slot));
            }
            if str_slot && ins.slot as usize >= self.str_slots.len() {
                return bad(format!("slot={}: no such string slot", ins.slot));
            }
            let is_str = matches!(
                ins.code,
                Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail
            );
            if is_str && ins.has(flag::HAS_INIT) && ins.a as usize >= self.strings.len() {
                return bad(format!("a={}: no such string value", ins.a));
            }
            let owner = self.templates.iter().find(|t| (t.start..t.end).contains(&(i as u32)));
            let end = owner.map_or(n, |t| t.end);
            match ins.code {
                Code::Seq | Code::Group => {
                    if ins.a <= i as u32 || ins.a > end {
                        return bad(format!("a={}: a body's end must lie after it, within its template", ins.a));
                    }
                    if ins.skip {
                        return bad("skip applies to scalar fields, not to a sequence or group".into());
                    }
                    if ins.code == Code::Seq {
                        let len = self.insns.get(i + 1).map(|l| l.code);
                        if !matches!(
                            len,
                            Some(
                                Code::IntNone
                                    | Code::IntConst
                                    | Code::IntDefault
                                    | Code::IntCopy
                                    | Code::IntIncr
                                    | Code::IntDelta
                            )
                        ) || ins.a <= i as u32 + 1
                        {
                            return bad("a sequence's next instruction is its length (an integer)".into());
                        }
                    }
                }
                Code::DecSplit => {
                    let parts =
                        self.insns.get(i + 1..i + 3).map(|p| p.iter().all(|x| INT_CODES[..6].contains(&x.code)));
                    if parts != Some(true) || i as u32 + 3 > end {
                        return bad("a split decimal's next two instructions are its exponent and mantissa".into());
                    }
                }
                Code::DynRef if ins.skip => {
                    return bad("skip applies to scalar fields, not to a template reference".into())
                }
                _ => {}
            }
        }
        // Bodies nest: a body ends no later than the body around it.
        for t in &self.templates {
            let mut ends: Vec<u32> = Vec::new();
            for i in t.start..t.end {
                while ends.last() == Some(&i) {
                    ends.pop();
                }
                let ins = &self.insns[i as usize];
                if matches!(ins.code, Code::Seq | Code::Group) {
                    if ends.last().is_some_and(|&e| ins.a > e) {
                        return Err((
                            first_insn_line + i as usize,
                            format!("a={}: ends after the body around it", ins.a),
                        ));
                    }
                    ends.push(ins.a);
                }
            }
        }
        Ok(())
    }
}

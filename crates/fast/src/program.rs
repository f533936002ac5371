//! Templates compiled to a flat program: one instruction per field operation.
//!
//! A [`Program`] is the decoding engine's "microcode". Each [`Insn`] is 32 bytes: an opcode
//! that fixes the type and operator, flags for presence and nullability, the output field,
//! a dictionary slot resolved at compile time (no key lookup while decoding), and the initial
//! value. Sequences and groups carry the index one past their body, so the engine walks
//! nested ranges without a tree. Static template references are inlined; a dynamic one is a
//! single `DynRef` instruction. Template ids jump through a dense table (ids below 4096) or
//! a map.
//!
//! [`Program::listing`] prints the program as assembler-like text for people to read, diff
//! and review when an exchange changes its templates.

use std::collections::HashMap;
use std::fmt::Write;

use crate::error::TemplateError;
use crate::template::{Field, FieldOp, FieldType, Instruction, OpKind, Operator, Presence, Template, TemplateSet};
use crate::value::{parse_initial, Decimal, Initial};

/// Opcodes: type family and operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    IntNone,
    IntConst,
    IntDefault,
    IntCopy,
    IntIncr,
    IntDelta,
    DecNone,
    DecConst,
    DecDefault,
    DecCopy,
    DecDelta,
    /// A decimal with separate operators: the next two instructions are its exponent (int32)
    /// and mantissa (int64).
    DecSplit,
    StrNone,
    StrConst,
    StrDefault,
    StrCopy,
    StrDelta,
    StrTail,
    /// A sequence: the next instruction is its length, the body runs to `a`.
    Seq,
    /// A group: the body runs to `a`.
    Group,
    /// A dynamic template reference: a presence map and a template id follow in the stream.
    DynRef,
}

impl Code {
    pub fn mnemonic(self) -> &'static str {
        match self {
            Code::IntNone | Code::DecNone | Code::StrNone => "none",
            Code::IntConst | Code::DecConst | Code::StrConst => "const",
            Code::IntDefault | Code::DecDefault | Code::StrDefault => "default",
            Code::IntCopy | Code::DecCopy | Code::StrCopy => "copy",
            Code::IntIncr => "incr",
            Code::IntDelta | Code::DecDelta | Code::StrDelta => "delta",
            Code::StrTail => "tail",
            Code::DecSplit => "split",
            Code::Seq => "seq",
            Code::Group => "group",
            Code::DynRef => "dynref",
        }
    }

    /// Whether the operator takes a presence map bit (given the field's presence).
    pub fn uses_bit(self, optional: bool) -> bool {
        match self {
            Code::IntConst | Code::DecConst | Code::StrConst => optional,
            Code::IntDefault | Code::IntCopy | Code::IntIncr => true,
            Code::DecDefault | Code::DecCopy => true,
            Code::StrDefault | Code::StrCopy | Code::StrTail => true,
            Code::Group => optional,
            _ => false,
        }
    }
}

/// Instruction flags.
pub mod flag {
    /// The field's presence is optional.
    pub const OPT: u8 = 1;
    /// The field's encoding is nullable (optional and not constant).
    pub const NULLABLE: u8 = 2;
    /// The operator has an initial value.
    pub const HAS_INIT: u8 = 4;
    /// Signed integer.
    pub const SIGNED: u8 = 8;
    /// 32-bit integer (range-checked).
    pub const W32: u8 = 16;
    /// A sequence element or group is a segment with its own presence map.
    pub const PMAP: u8 = 32;
    /// String as unicode (UTF-8 in a byte vector).
    pub const UNICODE: u8 = 64;
    /// Byte vector.
    pub const BYTES: u8 = 128;
}

/// One instruction of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: Code,
    pub flags: u8,
    /// Output field: index into [`Program::fields`].
    pub field: u32,
    /// Dictionary slot (integer slots and string slots are numbered separately).
    pub slot: u32,
    /// Sequence/group: index one past the body. Decimal: the initial exponent. String: the
    /// initial value's index in [`Program::strings`].
    pub a: u32,
    /// Integer initial value, or a decimal's initial mantissa.
    pub init: i64,
}

impl Insn {
    #[inline(always)]
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// What kind of value a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    Scalar(FieldType),
    Sequence,
    Group,
    /// A dynamic template reference.
    TemplateRef,
}

/// A field of the program's output record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInfo {
    pub name: String,
    /// The `id` attribute (a FIX tag, usually numeric).
    pub id: Option<String>,
    pub kind: FieldKind,
    /// A constant: its value never travels on the wire.
    pub constant: bool,
}

/// A compiled template: where its instructions are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateInfo {
    pub name: String,
    pub id: Option<u32>,
    pub start: u32,
    pub end: u32,
    pub reset: bool,
    /// Whether its top-level segment needs presence map bits besides the template id's.
    pub bits: u32,
}

/// Templates compiled to instructions.
#[derive(Debug, Clone, Default)]
pub struct Program {
    pub insns: Vec<Insn>,
    pub fields: Vec<FieldInfo>,
    pub templates: Vec<TemplateInfo>,
    /// String and byte-vector initial values.
    pub strings: Vec<Vec<u8>>,
    /// Names of the integer dictionary slots (`scope/key/type`), for listings.
    pub int_slots: Vec<String>,
    /// Names of the string dictionary slots.
    pub str_slots: Vec<String>,
    /// Template index used when a message's presence map has no template id and none came
    /// before (a set with exactly one template, or [`Program::set_default_template`]).
    pub default_template: Option<u32>,
    dense: Vec<u32>,
    sparse: HashMap<u32, u32>,
}

const DENSE_IDS: u32 = 4096;

#[derive(Clone, Copy)]
struct Scope<'a> {
    template: &'a str,
    dictionary: &'a str,
    type_ref: &'a str,
}

struct Compiler<'a> {
    set: &'a TemplateSet,
    prog: Program,
    int_slots: HashMap<String, u32>,
    str_slots: HashMap<String, u32>,
}

impl Compiler<'_> {
    fn slot_key(scope: Scope, op: &Operator, default_key: &str, class: &str) -> String {
        let dict = op.dictionary.as_deref().unwrap_or(scope.dictionary);
        let key = op.key.as_deref().unwrap_or(default_key);
        let scope_name = match dict {
            "global" => "global".to_string(),
            "template" => format!("template:{}", scope.template),
            "type" => format!("type:{}", scope.type_ref),
            other => format!("dict:{other}"),
        };
        format!("{scope_name}/{key}/{class}")
    }

    fn int_slot(&mut self, key: String) -> u32 {
        if let Some(&s) = self.int_slots.get(&key) {
            return s;
        }
        let s = self.prog.int_slots.len() as u32;
        self.prog.int_slots.push(key.clone());
        self.int_slots.insert(key, s);
        s
    }

    fn str_slot(&mut self, key: String) -> u32 {
        if let Some(&s) = self.str_slots.get(&key) {
            return s;
        }
        let s = self.prog.str_slots.len() as u32;
        self.prog.str_slots.push(key.clone());
        self.str_slots.insert(key, s);
        s
    }

    fn add_field(&mut self, name: &str, id: Option<&str>, kind: FieldKind) -> u32 {
        self.prog.fields.push(FieldInfo { name: name.to_string(), id: id.map(str::to_string), kind, constant: false });
        (self.prog.fields.len() - 1) as u32
    }

    /// An integer instruction (also a decimal's exponent or mantissa, or a length).
    fn int_insn(
        &mut self,
        scope: Scope,
        ty: FieldType,
        op: &Operator,
        optional: bool,
        key: &str,
        field: u32,
    ) -> Result<Insn, TemplateError> {
        let code = match op.kind {
            OpKind::None => Code::IntNone,
            OpKind::Constant => Code::IntConst,
            OpKind::Default => Code::IntDefault,
            OpKind::Copy => Code::IntCopy,
            OpKind::Increment => Code::IntIncr,
            OpKind::Delta => Code::IntDelta,
            OpKind::Tail => {
                return Err(TemplateError::new(scope.template, key, "[S2] tail does not apply to integers"))
            }
        };
        let mut flags = 0;
        if optional {
            flags |= flag::OPT;
            if op.kind != OpKind::Constant {
                flags |= flag::NULLABLE;
            }
        }
        if matches!(ty, FieldType::Int32 | FieldType::Int64) {
            flags |= flag::SIGNED;
        }
        if matches!(ty, FieldType::Int32 | FieldType::UInt32) {
            flags |= flag::W32;
        }
        let mut init = 0;
        if let Some(v) = &op.value {
            match parse_initial(ty, v) {
                Ok(Initial::Int(i)) => {
                    init = i;
                    flags |= flag::HAS_INIT;
                }
                _ => return Err(TemplateError::new(scope.template, key, format!("[S3] initial value {v:?}"))),
            }
        }
        let slot = match op.kind {
            OpKind::Copy | OpKind::Increment | OpKind::Delta => {
                let k = Self::slot_key(scope, op, key, ty.name());
                self.int_slot(k)
            }
            _ => 0,
        };
        Ok(Insn { code, flags, field, slot, a: 0, init })
    }

    fn field(&mut self, scope: Scope, f: &Field) -> Result<u32, TemplateError> {
        let optional = f.presence == Presence::Optional;
        let field = self.add_field(&f.name, f.id.as_deref(), FieldKind::Scalar(f.ty));
        self.prog.fields[field as usize].constant = match &f.op {
            FieldOp::Single(op) => op.kind == OpKind::Constant,
            FieldOp::Split { exponent, mantissa } => {
                exponent.kind == OpKind::Constant && mantissa.kind == OpKind::Constant
            }
        };
        let err = |reason: &str| TemplateError::new(scope.template, &f.name, reason.to_string());
        match (f.ty, &f.op) {
            (ty, FieldOp::Single(op)) if ty.is_integer() => {
                let insn = self.int_insn(scope, ty, op, optional, &f.name, field)?;
                self.prog.insns.push(insn);
                Ok(u32::from(insn.code.uses_bit(optional)))
            }
            (FieldType::Decimal, FieldOp::Single(op)) => {
                let code = match op.kind {
                    OpKind::None => Code::DecNone,
                    OpKind::Constant => Code::DecConst,
                    OpKind::Default => Code::DecDefault,
                    OpKind::Copy => Code::DecCopy,
                    OpKind::Delta => Code::DecDelta,
                    OpKind::Increment | OpKind::Tail => {
                        return Err(err(&format!("[S2] {} does not apply to a decimal", op.kind.name())))
                    }
                };
                let mut flags = 0;
                if optional {
                    flags |= flag::OPT;
                    if op.kind != OpKind::Constant {
                        flags |= flag::NULLABLE;
                    }
                }
                let (mut init, mut a) = (0, 0);
                if let Some(v) = &op.value {
                    let d = Decimal::parse(v).map_err(|e| err(&format!("[S3] initial value {v:?}: {e}")))?;
                    init = d.mantissa;
                    a = d.exponent as u32;
                    flags |= flag::HAS_INIT;
                }
                let slot = match op.kind {
                    OpKind::Copy | OpKind::Delta => {
                        let k = Self::slot_key(scope, op, &f.name, "decimal");
                        self.int_slot(k)
                    }
                    _ => 0,
                };
                let insn = Insn { code, flags, field, slot, a, init };
                self.prog.insns.push(insn);
                Ok(u32::from(code.uses_bit(optional)))
            }
            (FieldType::Decimal, FieldOp::Split { exponent, mantissa }) => {
                let flags = if optional { flag::OPT } else { 0 };
                self.prog.insns.push(Insn { code: Code::DecSplit, flags, field, slot: 0, a: 0, init: 0 });
                let ek = format!("{}:exponent", f.name);
                let mk = format!("{}:mantissa", f.name);
                let e = self.int_insn(scope, FieldType::Int32, exponent, optional, &ek, field)?;
                let m = self.int_insn(scope, FieldType::Int64, mantissa, false, &mk, field)?;
                self.prog.insns.push(e);
                self.prog.insns.push(m);
                Ok(u32::from(e.code.uses_bit(optional)) + u32::from(m.code.uses_bit(false)))
            }
            (ty, FieldOp::Single(op)) => {
                let code = match op.kind {
                    OpKind::None => Code::StrNone,
                    OpKind::Constant => Code::StrConst,
                    OpKind::Default => Code::StrDefault,
                    OpKind::Copy => Code::StrCopy,
                    OpKind::Delta => Code::StrDelta,
                    OpKind::Tail => Code::StrTail,
                    OpKind::Increment => return Err(err("[S2] increment does not apply to a string")),
                };
                let mut flags = match ty {
                    FieldType::Unicode => flag::UNICODE,
                    FieldType::Bytes => flag::BYTES,
                    _ => 0,
                };
                if optional {
                    flags |= flag::OPT;
                    if op.kind != OpKind::Constant {
                        flags |= flag::NULLABLE;
                    }
                }
                let mut a = 0;
                if let Some(v) = &op.value {
                    match parse_initial(ty, v) {
                        Ok(Initial::Bytes(b)) => {
                            a = self.prog.strings.len() as u32;
                            self.prog.strings.push(b);
                            flags |= flag::HAS_INIT;
                        }
                        _ => return Err(err(&format!("[S3] initial value {v:?}"))),
                    }
                }
                let slot = match op.kind {
                    OpKind::Copy | OpKind::Delta | OpKind::Tail => {
                        let class = if ty == FieldType::Ascii { "string" } else { "bytes" };
                        let k = Self::slot_key(scope, op, &f.name, class);
                        self.str_slot(k)
                    }
                    _ => 0,
                };
                self.prog.insns.push(Insn { code, flags, field, slot, a, init: 0 });
                Ok(u32::from(code.uses_bit(optional)))
            }
            (_, FieldOp::Split { .. }) => Err(err("exponent/mantissa operators on a field that is not a decimal")),
        }
    }

    /// Compile a body; returns the presence map bits it uses in its segment.
    fn body(&mut self, scope: Scope, body: &[Instruction], depth: u32) -> Result<u32, TemplateError> {
        if depth > 64 {
            return Err(TemplateError::new(scope.template, "", "nesting deeper than 64"));
        }
        let mut bits = 0;
        for ins in body {
            match ins {
                Instruction::Field(f) => bits += self.field(scope, f)?,
                Instruction::Sequence(s) => {
                    let inner = Scope {
                        template: scope.template,
                        dictionary: s.dictionary.as_deref().unwrap_or(scope.dictionary),
                        type_ref: s.type_ref.as_deref().unwrap_or(scope.type_ref),
                    };
                    let field = self.add_field(&s.name, None, FieldKind::Sequence);
                    let at = self.prog.insns.len();
                    let optional = s.presence == Presence::Optional;
                    self.prog.insns.push(Insn {
                        code: Code::Seq,
                        flags: if optional { flag::OPT } else { 0 },
                        field,
                        slot: 0,
                        a: 0,
                        init: 0,
                    });
                    let lfield =
                        self.add_field(&s.length.name, s.length.id.as_deref(), FieldKind::Scalar(FieldType::UInt32));
                    let FieldOp::Single(lop) = &s.length.op else {
                        return Err(TemplateError::new(scope.template, &s.name, "length with decimal operators"));
                    };
                    let len = self.int_insn(inner, FieldType::UInt32, lop, optional, &s.length.name, lfield)?;
                    self.prog.insns.push(len);
                    bits += u32::from(len.code.uses_bit(optional));
                    let inner_bits = self.body(inner, &s.body, depth + 1)?;
                    let end = self.prog.insns.len() as u32;
                    self.prog.insns[at].a = end;
                    if inner_bits > 0 {
                        self.prog.insns[at].flags |= flag::PMAP;
                    }
                }
                Instruction::Group(g) => {
                    let inner = Scope {
                        template: scope.template,
                        dictionary: g.dictionary.as_deref().unwrap_or(scope.dictionary),
                        type_ref: g.type_ref.as_deref().unwrap_or(scope.type_ref),
                    };
                    let field = self.add_field(&g.name, None, FieldKind::Group);
                    let at = self.prog.insns.len();
                    let optional = g.presence == Presence::Optional;
                    self.prog.insns.push(Insn {
                        code: Code::Group,
                        flags: if optional { flag::OPT } else { 0 },
                        field,
                        slot: 0,
                        a: 0,
                        init: 0,
                    });
                    bits += u32::from(optional);
                    let inner_bits = self.body(inner, &g.body, depth + 1)?;
                    self.prog.insns[at].a = self.prog.insns.len() as u32;
                    if inner_bits > 0 {
                        self.prog.insns[at].flags |= flag::PMAP;
                    }
                }
                Instruction::TemplateRef(Some(name)) => {
                    let t: &Template = self
                        .set
                        .by_name(name)
                        .ok_or_else(|| TemplateError::new(scope.template, name, "templateRef to unknown template"))?;
                    let inner = Scope {
                        template: &t.name,
                        dictionary: t.dictionary.as_deref().unwrap_or(scope.dictionary),
                        type_ref: t.type_ref.as_deref().unwrap_or(scope.type_ref),
                    };
                    bits += self.body(inner, &t.body, depth + 1)?;
                }
                Instruction::TemplateRef(None) => {
                    let field = self.add_field("templateRef", None, FieldKind::TemplateRef);
                    self.prog.insns.push(Insn { code: Code::DynRef, flags: 0, field, slot: 0, a: 0, init: 0 });
                }
            }
        }
        Ok(bits)
    }
}

impl Program {
    /// Compile a template set.
    pub fn compile(set: &TemplateSet) -> Result<Program, TemplateError> {
        let mut c = Compiler { set, prog: Program::default(), int_slots: HashMap::new(), str_slots: HashMap::new() };
        // Slot 0 of the integer dictionary is the template id (copy, global).
        c.int_slot("global/templateId/uInt32".to_string());
        for t in &set.templates {
            let scope = Scope {
                template: &t.name,
                dictionary: t.dictionary.as_deref().unwrap_or("global"),
                type_ref: t.type_ref.as_deref().unwrap_or(""),
            };
            let start = c.prog.insns.len() as u32;
            let bits = c.body(scope, &t.body, 0)?;
            let end = c.prog.insns.len() as u32;
            c.prog.templates.push(TemplateInfo { name: t.name.clone(), id: t.id, start, end, reset: t.reset, bits });
        }
        let mut prog = c.prog;
        for (i, t) in prog.templates.iter().enumerate() {
            if let Some(id) = t.id {
                if id < DENSE_IDS {
                    if prog.dense.len() <= id as usize {
                        prog.dense.resize(id as usize + 1, 0);
                    }
                    prog.dense[id as usize] = i as u32 + 1;
                } else {
                    prog.sparse.insert(id, i as u32);
                }
            }
        }
        if prog.templates.len() == 1 {
            prog.default_template = Some(0);
        }
        Ok(prog)
    }

    /// Parse and compile template XML.
    pub fn from_xml(xml: &str) -> Result<Program, TemplateError> {
        Program::compile(&TemplateSet::parse(xml)?)
    }

    /// The template index for a template id.
    #[inline]
    pub fn template_index(&self, id: u32) -> Option<u32> {
        if let Some(&i) = self.dense.get(id as usize) {
            return i.checked_sub(1);
        }
        self.sparse.get(&id).copied()
    }

    /// The template index of a template name.
    pub fn template_by_name(&self, name: &str) -> Option<u32> {
        self.templates.iter().position(|t| t.name == name).map(|i| i as u32)
    }

    /// Use this template for messages whose presence map carries no template id when no id
    /// came before (streams of one id-less template, such as legacy OPRA FAST).
    pub fn set_default_template(&mut self, index: u32) {
        self.default_template = Some(index);
    }

    /// Print the program, one instruction per line.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "; tickplant FAST program: {} templates, {} instructions, {} fields, {} integer and {} string dictionary slots",
            self.templates.len(),
            self.insns.len(),
            self.fields.len(),
            self.int_slots.len(),
            self.str_slots.len()
        );
        for t in &self.templates {
            let id = t.id.map_or("-".to_string(), |i| i.to_string());
            let _ = writeln!(
                out,
                "\ntemplate {} id={} insns={}..{} pmap_bits={}{}",
                t.name,
                id,
                t.start,
                t.end,
                t.bits + 1,
                if t.reset { " reset" } else { "" }
            );
            let mut ends: Vec<u32> = Vec::new();
            for i in t.start..t.end {
                while ends.last() == Some(&i) {
                    ends.pop();
                    let _ = writeln!(out, "{:04}  {}end", i, "  ".repeat(ends.len() + 1));
                }
                let ins = &self.insns[i as usize];
                let _ = writeln!(out, "{:04}  {}{}", i, "  ".repeat(ends.len() + 1), self.describe(ins));
                if matches!(ins.code, Code::Seq | Code::Group) {
                    ends.push(ins.a);
                }
            }
            while let Some(e) = ends.pop() {
                let _ = writeln!(out, "{:04}  {}end", e, "  ".repeat(ends.len() + 1));
            }
        }
        out
    }

    fn type_name(&self, ins: &Insn) -> &'static str {
        match ins.code {
            Code::IntNone | Code::IntConst | Code::IntDefault | Code::IntCopy | Code::IntIncr | Code::IntDelta => {
                match (ins.has(flag::SIGNED), ins.has(flag::W32)) {
                    (false, true) => "u32",
                    (true, true) => "i32",
                    (false, false) => "u64",
                    (true, false) => "i64",
                }
            }
            Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta | Code::DecSplit => {
                "dec"
            }
            Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                if ins.has(flag::BYTES) {
                    "bytes"
                } else if ins.has(flag::UNICODE) {
                    "utf8"
                } else {
                    "ascii"
                }
            }
            Code::Seq | Code::Group | Code::DynRef => "",
        }
    }

    /// One instruction as text.
    pub fn describe(&self, ins: &Insn) -> String {
        let f = &self.fields[ins.field as usize];
        let mut s = String::new();
        let ty = self.type_name(ins);
        let op = if ty.is_empty() { ins.code.mnemonic().to_string() } else { format!("{ty}.{}", ins.code.mnemonic()) };
        let _ = write!(s, "{op:<14}");
        let _ = write!(s, "{}", f.name);
        if let Some(id) = &f.id {
            let _ = write!(s, "({id})");
        }
        if ins.has(flag::OPT) {
            s.push_str(" opt");
        }
        if ins.has(flag::NULLABLE) {
            s.push_str(" null");
        }
        match ins.code {
            Code::Seq | Code::Group => {
                let _ = write!(s, " end={:04}", ins.a);
                if ins.has(flag::PMAP) {
                    s.push_str(" pmap");
                }
            }
            Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta => {
                if ins.has(flag::HAS_INIT) {
                    let _ = write!(s, " init={}", Decimal::new(ins.init, ins.a as i32));
                }
            }
            Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                if ins.has(flag::HAS_INIT) {
                    let v = &self.strings[ins.a as usize];
                    let _ = write!(s, " init={:?}", String::from_utf8_lossy(v));
                }
            }
            _ => {
                if ins.has(flag::HAS_INIT) {
                    let _ = write!(s, " init={}", ins.init);
                }
            }
        }
        match ins.code {
            Code::IntCopy | Code::IntIncr | Code::IntDelta | Code::DecCopy | Code::DecDelta => {
                let _ = write!(s, " slot=i{} [{}]", ins.slot, self.int_slots[ins.slot as usize]);
            }
            Code::StrCopy | Code::StrDelta | Code::StrTail => {
                let _ = write!(s, " slot=s{} [{}]", ins.slot, self.str_slots[ins.slot as usize]);
            }
            _ => {}
        }
        if ins.code.uses_bit(ins.has(flag::OPT)) {
            s.push_str(" bit");
        }
        s
    }
}

#[cfg(test)]
mod tests {
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
}

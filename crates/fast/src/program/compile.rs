//! Templates to instructions: scopes and dictionary keys resolved to slots, each field's
//! type and operator to one opcode, static references inlined.

use super::*;
use std::collections::HashMap;

use crate::error::TemplateError;
use crate::template::{Field, FieldOp, FieldType, Instruction, OpKind, Operator, Presence, Template, TemplateSet};
use crate::value::{parse_initial, Decimal, Initial};

#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    template: &'a str,
    dictionary: &'a str,
    type_ref: &'a str,
}

pub(super) struct Compiler<'a> {
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
        Ok(Insn { code, flags, field, slot, init, ..Insn::BLANK })
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
                let insn = Insn { code, flags, field, slot, a, init, ..Insn::BLANK };
                self.prog.insns.push(insn);
                Ok(u32::from(code.uses_bit(optional)))
            }
            (FieldType::Decimal, FieldOp::Split { exponent, mantissa }) => {
                let flags = if optional { flag::OPT } else { 0 };
                self.prog.insns.push(Insn { code: Code::DecSplit, flags, field, ..Insn::BLANK });
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
                self.prog.insns.push(Insn { code, flags, field, slot, a, ..Insn::BLANK });
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
                    let flags = if optional { flag::OPT } else { 0 };
                    self.prog.insns.push(Insn { code: Code::Seq, flags, field, ..Insn::BLANK });
                    let lfield =
                        self.add_field(&s.length.name, s.length.id.as_deref(), FieldKind::Scalar(FieldType::UInt32));
                    let FieldOp::Single(lop) = &s.length.op else {
                        return Err(TemplateError::new(scope.template, &s.name, "length with decimal operators"));
                    };
                    let len = self.int_insn(inner, FieldType::UInt32, lop, optional, &s.length.name, lfield)?;
                    self.prog.insns.push(len);
                    bits += u32::from(len.code.uses_bit(optional));
                    self.prog.insns[at].slot = at as u32 + 2;
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
                    let flags = if optional { flag::OPT } else { 0 };
                    self.prog.insns.push(Insn { code: Code::Group, flags, field, ..Insn::BLANK });
                    bits += u32::from(optional);
                    self.prog.insns[at].slot = at as u32 + 1;
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
                    self.prog.insns.push(Insn { code: Code::DynRef, field, ..Insn::BLANK });
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
        c.prog.warnings = set.warnings.clone();
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
            c.prog.templates.push(TemplateInfo {
                name: t.name.clone(),
                id: t.id,
                start,
                end,
                reset: t.reset,
                bits,
                special: 0,
            });
        }
        let mut prog = c.prog;
        prog.index_templates();
        if prog.templates.len() == 1 {
            prog.default_template = Some(0);
        }
        prog.seal();
        Ok(prog)
    }

    /// Parse and compile template XML.
    pub fn from_xml(xml: &str) -> Result<Program, TemplateError> {
        Program::compile(&TemplateSet::parse(xml)?)
    }
}

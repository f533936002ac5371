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

use crate::codec::Pmap;
use crate::error::TemplateError;
use crate::layout::{Entry, Value};
use crate::template::{Field, FieldOp, FieldType, Instruction, OpKind, Operator, Presence, Template, TemplateSet};
use crate::value::{parse_initial, Decimal, Initial};

/// An integer read by `ins` as its type says: signed or not.
#[inline(always)]
pub(crate) fn int_value(ins: &Insn, v: i64) -> Value {
    if ins.has(flag::SIGNED) {
        Value::Int(v)
    } else {
        Value::UInt(v as u64)
    }
}

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
    // Resolved forms, only in specialised segments (the presence map bit is known):
    /// Copy or increment with the value in the stream: read it and store it.
    IntStore,
    /// Copy with no value in the stream: the previous value.
    IntLoad,
    /// Increment with no value in the stream: the previous value plus one.
    IntLoadIncr,
    DecStore,
    DecLoad,
    StrStore,
    StrLoad,
    /// `init` prebuilt entries from [`Program::consts`] at `a`: constants and absent defaults.
    Consts,
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
            Code::IntStore | Code::DecStore | Code::StrStore => "store",
            Code::IntLoad | Code::DecLoad | Code::StrLoad => "load",
            Code::IntLoadIncr => "load+1",
            Code::Consts => "consts",
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
    /// On a sequence or group in a specialised segment: the next instruction follows it
    /// (and its length), not its body's end.
    pub const INLINE: u8 = 16;
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
    /// initial value's index in [`Program::strings`]. Consts: first entry.
    pub a: u32,
    /// Integer initial value, or a decimal's initial mantissa. Sequence/group: its
    /// specialised segments (see [`Program::specials`]), 0 when none. Consts: the count.
    pub init: i64,
    /// The engine's dispatch key: for integer operators the operator and the integer type
    /// together (`8 * operator + signed + 2 * nullable + 4 * 32-bit`), so each arm of the
    /// engine's one match has its type fixed; 72 + code for the rest. Set by the compiler.
    pub op: u8,
    /// In specialised segments: prebuilt entries pushed after this instruction's own (and,
    /// for a sequence or group, after its body's), so a run of constants costs no dispatch
    /// of its own. `first << 8 | count` into [`Program::consts`]; 0 when none.
    pub then: u32,
}

/// Integer operators in dispatch-key order.
pub const INT_CODES: [Code; 9] = [
    Code::IntNone,
    Code::IntConst,
    Code::IntDefault,
    Code::IntCopy,
    Code::IntIncr,
    Code::IntDelta,
    Code::IntStore,
    Code::IntLoad,
    Code::IntLoadIncr,
];

/// Dispatch keys of the instructions that are not integer operators (72 + code).
pub mod op {
    use super::Code;
    pub const DEC_NONE: u8 = 72 + Code::DecNone as u8;
    pub const DEC_CONST: u8 = 72 + Code::DecConst as u8;
    pub const DEC_DEFAULT: u8 = 72 + Code::DecDefault as u8;
    pub const DEC_COPY: u8 = 72 + Code::DecCopy as u8;
    pub const DEC_DELTA: u8 = 72 + Code::DecDelta as u8;
    pub const DEC_SPLIT: u8 = 72 + Code::DecSplit as u8;
    pub const STR_NONE: u8 = 72 + Code::StrNone as u8;
    pub const STR_CONST: u8 = 72 + Code::StrConst as u8;
    pub const STR_DEFAULT: u8 = 72 + Code::StrDefault as u8;
    pub const STR_COPY: u8 = 72 + Code::StrCopy as u8;
    pub const STR_DELTA: u8 = 72 + Code::StrDelta as u8;
    pub const STR_TAIL: u8 = 72 + Code::StrTail as u8;
    pub const SEQ: u8 = 72 + Code::Seq as u8;
    pub const GROUP: u8 = 72 + Code::Group as u8;
    pub const DYN_REF: u8 = 72 + Code::DynRef as u8;
    pub const DEC_STORE: u8 = 72 + Code::DecStore as u8;
    pub const DEC_LOAD: u8 = 72 + Code::DecLoad as u8;
    pub const STR_STORE: u8 = 72 + Code::StrStore as u8;
    pub const STR_LOAD: u8 = 72 + Code::StrLoad as u8;
    pub const CONSTS: u8 = 72 + Code::Consts as u8;
    /// A split decimal whose exponent is a constant in range and whose mantissa is a
    /// mandatory int64 delta: the usual price field, in one arm of its own.
    pub const DEC_SPLIT_CONST_DELTA: u8 = CONSTS + 1;
    /// The key of a mandatory, signed, 64-bit delta (8 * operator + signed).
    pub const I64_DELTA: u8 = 5 * 8 + 1;
}

/// The dispatch key of an instruction (see [`Insn::op`]).
pub fn op_of(ins: &Insn) -> u8 {
    match INT_CODES.iter().position(|&c| c == ins.code) {
        Some(k) => {
            let t = u8::from(ins.has(flag::SIGNED))
                | u8::from(ins.has(flag::NULLABLE)) << 1
                | u8::from(ins.has(flag::W32)) << 2;
            k as u8 * 8 + t
        }
        None => 72 + ins.code as u8,
    }
}

impl Insn {
    /// Every operand zero: the base the compiler fills in (`Insn { code, ..Insn::BLANK }`).
    pub const BLANK: Insn = Insn { code: Code::IntNone, flags: 0, field: 0, slot: 0, a: 0, init: 0, op: 0, then: 0 };

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
    /// Presence map bits its top-level segment uses besides the template id's.
    pub bits: u32,
    /// Its specialised top-level segments: `(count << 32) | (first + 1)` in
    /// [`Program::specials`], 0 when none.
    pub special: u64,
}

/// A straight-line segment for one (segment, presence map) pair: the segment's instructions
/// with every presence bit resolved, absent fields without a value dropped, and constants
/// and absent defaults gathered into prebuilt entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Special {
    /// Index of the segment body's first generic instruction.
    pub segment: u32,
    pub pmap: Pmap,
    /// Its instructions: `insns[start..end]`.
    pub start: u32,
    pub end: u32,
    /// Times the profile saw the pair.
    pub hits: u64,
    /// Generic instructions the segment runs / resolved instructions it runs instead.
    pub generic_len: u32,
    /// Its kernel, `index + 1` in [`Program::kernels`]; 0 when it has none.
    pub kernel: u32,
}

/// Kinds of [`KOp`] that are not integers (integers are `8 * family + type`, below 40).
pub mod kop {
    /// A decimal with a constant exponent and a mandatory int64 delta mantissa.
    pub const DEC_CONST_DELTA: u8 = 40;
    /// An ASCII string read (nullable when the op's flags say so).
    pub const ASCII: u8 = 41;
    /// A decimal whose int32 exponent is read (nullable when `arg` is 1: NULL, the decimal
    /// is absent) and whose mantissa is a mandatory int64 delta.
    pub const DEC_READ_DELTA: u8 = 44;
    /// A sequence, the kernel's last operation (its `k` is the frame's length: the entries
    /// are the sequence's own): its elements are read by the decoder's sequence loop (their
    /// own kernels), the rest of the segment by the engine.
    pub const SEQ: u8 = 45;
    /// An ASCII string read and stored in its copy slot.
    pub const ASCII_STORE: u8 = 42;
    /// An ASCII string copied from its slot.
    pub const ASCII_LOAD: u8 = 43;
    /// Integer families: read; read and store (copy or increment with a value); the
    /// previous value (copy); the previous value plus one (increment); a delta.
    pub const INT_READ: u8 = 0;
    pub const INT_STORE: u8 = 1;
    pub const INT_LOAD: u8 = 2;
    pub const INT_LOAD_INCR: u8 = 3;
    pub const INT_DELTA: u8 = 4;
}

/// One operation of a [`Kernel`]: a field that has a value to find (in the stream or the
/// dictionary), written into entry `k` of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KOp {
    /// Integers: `8 * family + type` (families in [`kop`], the type as in [`Insn::op`]:
    /// signed + 2 * nullable + 4 * 32-bit); other fields: one of [`kop`]'s kinds.
    pub kind: u8,
    /// A string or a decimal exponent that may be NULL (1) or not (0); a constant decimal
    /// exponent.
    pub arg: i8,
    /// Its entry in the frame.
    pub k: u16,
    /// Dictionary slot (a decimal's: its mantissa's).
    pub slot: u32,
    /// The initial value of the slot's operator, if it has one (a decimal's: its
    /// mantissa's).
    pub has_init: bool,
    pub init: i64,
    /// The instruction it stands for: where the engine takes over when the kernel cannot
    /// go on (an error to report, a value longer than the fast reads take, a dictionary
    /// entry not yet assigned).
    pub insn: u32,
}

/// A specialised segment's fast form. Its entries are known before a byte is read (each
/// field of the segment gives exactly one, a nullable one that turns out NULL aside), so
/// they are copied in all at once from a prebuilt frame: the constants already in place,
/// every other field's value written into its own entry by one [`KOp`]. An operation that
/// cannot finish the fast way (anything the engine would report as an error, among
/// others) hands the rest of the segment to the engine from its own instruction, before
/// it has changed anything, so the result is the engine's, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// Its operations: `kops[ops.0..ops.1]`.
    pub ops: (u32, u32),
    /// Its frame: `frames[frame.0..frame.1]`.
    pub frame: (u32, u32),
    /// One past the segment's last instruction (where the engine stops when it takes over).
    pub end: u32,
}

/// How often each (segment, presence map) pair occurred while decoding a sample.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub counts: HashMap<(u32, Pmap), u64>,
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
    /// Prebuilt entries of `Consts` instructions.
    pub consts: Vec<Entry>,
    /// Specialised segments, grouped by segment.
    pub specials: Vec<Special>,
    /// Kernels of specialised segments (see [`Kernel`]), their operations and frames.
    pub kernels: Vec<Kernel>,
    pub kops: Vec<KOp>,
    pub frames: Vec<Entry>,
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
        prog.seal();
        Ok(prog)
    }

    /// Parse and compile template XML.
    pub fn from_xml(xml: &str) -> Result<Program, TemplateError> {
        Program::compile(&TemplateSet::parse(xml)?)
    }

    /// Set every instruction's dispatch key.
    fn seal(&mut self) {
        for ins in &mut self.insns {
            ins.op = op_of(ins);
        }
        for i in 0..self.insns.len().saturating_sub(2) {
            let (e, m) = (&self.insns[i + 1], &self.insns[i + 2]);
            if self.insns[i].code == Code::DecSplit
                && e.code == Code::IntConst
                && !e.has(flag::OPT)
                && (-63..=63).contains(&e.init)
                && m.op == op::I64_DELTA
            {
                self.insns[i].op = op::DEC_SPLIT_CONST_DELTA;
            }
        }
    }

    /// The template index for a template id.
    #[inline]
    pub fn template_index(&self, id: u32) -> Option<u32> {
        if let Some(&i) = self.dense.get(id as usize) {
            return i.checked_sub(1);
        }
        self.sparse.get(&id).copied()
    }

    /// The index of the first field called `name` (in template order).
    pub fn field_index(&self, name: &str) -> Option<u32> {
        self.fields.iter().position(|f| f.name == name).map(|i| i as u32)
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
            "; tickplant FAST program: templates {}, instructions {}, fields {}, dictionary slots {} integer and {} string",
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
        for sp in &self.specials {
            let owner = self
                .templates
                .iter()
                .find(|t| t.start == sp.segment)
                .map(|t| format!("template {}", t.name))
                .or_else(|| {
                    self.insns
                        .iter()
                        .find(|i| matches!(i.code, Code::Seq | Code::Group) && i.slot == sp.segment)
                        .map(|i| format!("{} {}", i.code.mnemonic(), self.fields[i.field as usize].name))
                })
                .unwrap_or_default();
            let bits: String = (0..(128 - sp.pmap.trailing_zeros()).clamp(1, 126))
                .map(|k| if (sp.pmap >> (127 - k)) & 1 == 1 { '1' } else { '0' })
                .collect();
            let _ = writeln!(
                out,
                "\nspecial {owner} pmap={bits} hits={} insns={}..{} ({} generic instructions -> {})",
                sp.hits,
                sp.start,
                sp.end,
                sp.generic_len,
                sp.end - sp.start
            );
            if let Some(k) = sp.kernel.checked_sub(1).and_then(|k| self.kernels.get(k as usize)) {
                let _ = writeln!(
                    out,
                    "        kernel: {} operations into a frame of {} entries",
                    k.ops.1 - k.ops.0,
                    k.frame.1 - k.frame.0
                );
            }
            for i in sp.start..sp.end {
                let ins = &self.insns[i as usize];
                if ins.code == Code::Consts {
                    let names = self.const_names(ins.a as usize, ins.init as usize);
                    let _ = writeln!(out, "{i:04}    consts        {names}");
                } else {
                    let _ = writeln!(out, "{i:04}    {}", self.describe(ins));
                }
                if ins.then != 0 {
                    let names = self.const_names((ins.then >> 8) as usize, (ins.then & 0xff) as usize);
                    let _ = writeln!(out, "        then consts   {names}");
                }
            }
        }
        out
    }

    /// The kernel of the specialised instructions `start..end` (sealed): its operations and
    /// its frame, the entries the engine would push with no field NULL. `None` when one of
    /// them is not of a kind the kernel runs (groups, template references, sequences other
    /// than one after at least one operation, which ends the kernel,
    /// unicode strings, byte vectors, string deltas and tails, decimals other than a
    /// constant exponent with an int64 delta mantissa).
    fn kernel_of(&self, start: usize, end: usize) -> Option<(Vec<KOp>, Vec<Entry>)> {
        let mut ops = Vec::new();
        let mut frame: Vec<Entry> = Vec::new();
        let mut i = start;
        while i < end {
            let ins = &self.insns[i];
            let k = u16::try_from(frame.len()).ok()?;
            let mut op = KOp {
                kind: 0,
                arg: 0,
                k,
                slot: ins.slot,
                has_init: ins.has(flag::HAS_INIT),
                init: ins.init,
                insn: i as u32,
            };
            let ascii = ins.flags & (flag::UNICODE | flag::BYTES) == 0;
            let step = match ins.op {
                o if o < 72 => {
                    let family = match ins.code {
                        Code::IntNone => kop::INT_READ,
                        Code::IntStore => kop::INT_STORE,
                        Code::IntLoad => kop::INT_LOAD,
                        Code::IntLoadIncr => kop::INT_LOAD_INCR,
                        Code::IntDelta => kop::INT_DELTA,
                        _ => return None,
                    };
                    op.kind = family * 8 + (o & 7);
                    frame.push(Entry { field: ins.field, value: int_value(ins, 0) });
                    ops.push(op);
                    1
                }
                op::DEC_SPLIT_CONST_DELTA => {
                    op.kind = kop::DEC_CONST_DELTA;
                    op.arg = i8::try_from(self.insns[i + 1].init).ok()?;
                    let m = &self.insns[i + 2];
                    (op.slot, op.has_init, op.init) = (m.slot, m.has(flag::HAS_INIT), m.init);
                    let d = Decimal { exponent: i32::from(op.arg), mantissa: 0 };
                    frame.push(Entry { field: ins.field, value: Value::Decimal(d) });
                    ops.push(op);
                    3
                }
                op::DEC_SPLIT
                    if self.insns[i + 1].code == Code::IntNone
                        && self.insns[i + 1].flags & (flag::SIGNED | flag::W32) == flag::SIGNED | flag::W32
                        && self.insns[i + 2].op == op::I64_DELTA =>
                {
                    op.kind = kop::DEC_READ_DELTA;
                    op.arg = i8::from(self.insns[i + 1].has(flag::NULLABLE));
                    let m = &self.insns[i + 2];
                    (op.slot, op.has_init, op.init) = (m.slot, m.has(flag::HAS_INIT), m.init);
                    let d = Decimal { exponent: 0, mantissa: 0 };
                    frame.push(Entry { field: ins.field, value: Value::Decimal(d) });
                    ops.push(op);
                    3
                }
                op::STR_NONE | op::STR_STORE | op::STR_LOAD if ascii => {
                    op.kind = match ins.code {
                        Code::StrNone => kop::ASCII,
                        Code::StrStore => kop::ASCII_STORE,
                        _ => kop::ASCII_LOAD,
                    };
                    op.arg = i8::from(ins.has(flag::NULLABLE));
                    frame.push(Entry { field: ins.field, value: Value::Bytes { start: 0, len: 0 } });
                    ops.push(op);
                    1
                }
                op::CONSTS => {
                    frame.extend_from_slice(&self.consts[ins.a as usize..][..ins.init as usize]);
                    1
                }
                op::SEQ if ins.has(flag::INLINE) && !ops.is_empty() => {
                    // The header before a sequence: the kernel ends here.
                    op.kind = kop::SEQ;
                    ops.push(op);
                    break;
                }
                _ => return None,
            };
            if ins.then != 0 {
                frame.extend_from_slice(&self.consts[(ins.then >> 8) as usize..][..(ins.then & 0xff) as usize]);
            }
            i += step;
        }
        u16::try_from(frame.len()).ok()?;
        Some((ops, frame))
    }

    /// The field names of `n` prebuilt entries at `first` in [`Program::consts`].
    fn const_names(&self, first: usize, n: usize) -> String {
        let names: Vec<&str> =
            self.consts[first..first + n].iter().map(|e| self.fields[e.field as usize].name.as_str()).collect();
        names.join(" ")
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
            Code::IntStore | Code::IntLoad | Code::IntLoadIncr => match (ins.has(flag::SIGNED), ins.has(flag::W32)) {
                (false, true) => "u32",
                (true, true) => "i32",
                (false, false) => "u64",
                (true, false) => "i64",
            },
            Code::DecStore | Code::DecLoad => "dec",
            Code::StrStore | Code::StrLoad => {
                if ins.has(flag::BYTES) {
                    "bytes"
                } else if ins.has(flag::UNICODE) {
                    "utf8"
                } else {
                    "ascii"
                }
            }
            Code::Seq | Code::Group | Code::DynRef | Code::Consts => "",
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
            Code::IntCopy
            | Code::IntIncr
            | Code::IntDelta
            | Code::DecCopy
            | Code::DecDelta
            | Code::IntStore
            | Code::IntLoad
            | Code::IntLoadIncr
            | Code::DecStore
            | Code::DecLoad => {
                let _ = write!(s, " slot=i{} [{}]", ins.slot, self.int_slots[ins.slot as usize]);
            }
            Code::StrCopy | Code::StrDelta | Code::StrTail | Code::StrStore | Code::StrLoad => {
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

/// What a resolved integer operation gives: an instruction to run, a known value, or nothing.
enum Resolved {
    Run(Insn),
    Value(i64),
    Absent,
}

/// Builds one specialised segment.
struct Resolver<'a> {
    p: &'a Program,
    pmap: Pmap,
    out: Vec<Insn>,
    consts: Vec<Entry>,
    pending: Vec<Entry>,
    /// Index in `out` of the last instruction the engine dispatches.
    head: Option<usize>,
}

impl Resolver<'_> {
    fn bit(&mut self) -> bool {
        let b = (self.pmap >> 127) != 0;
        self.pmap <<= 1;
        b
    }

    fn constant(&mut self, e: Entry) {
        self.pending.push(e);
    }

    /// Emit an instruction the engine dispatches (its operands, a split decimal's exponent
    /// and mantissa or a sequence's length, are pushed after it by the caller).
    fn emit(&mut self, ins: Insn) {
        self.flush();
        self.head = Some(self.out.len());
        self.out.push(ins);
    }

    /// The pending constants: carried by the last dispatched instruction when there is one
    /// and the run fits its `then`, else an instruction of their own.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let a = self.consts.len() as u32;
        let n = self.pending.len();
        self.consts.append(&mut self.pending);
        if let Some(h) = self.head {
            if self.out[h].then == 0 && n < 256 && a < 1 << 24 {
                self.out[h].then = a << 8 | n as u32;
                return;
            }
        }
        self.head = Some(self.out.len());
        self.out.push(Insn { code: Code::Consts, a, init: n as i64, ..Insn::BLANK });
    }

    /// An integer operation with its presence bit resolved.
    fn int(&mut self, ins: &Insn) -> Resolved {
        let mut r = *ins;
        match ins.code {
            Code::IntNone | Code::IntDelta => Resolved::Run(r),
            Code::IntConst => {
                if !ins.has(flag::OPT) || self.bit() {
                    Resolved::Value(ins.init)
                } else {
                    Resolved::Absent
                }
            }
            Code::IntDefault => {
                if self.bit() {
                    r.code = Code::IntNone;
                    Resolved::Run(r)
                } else if ins.has(flag::HAS_INIT) {
                    Resolved::Value(ins.init)
                } else {
                    Resolved::Absent
                }
            }
            Code::IntCopy | Code::IntIncr => {
                r.code = match (self.bit(), ins.code) {
                    (true, _) => Code::IntStore,
                    (false, Code::IntCopy) => Code::IntLoad,
                    _ => Code::IntLoadIncr,
                };
                Resolved::Run(r)
            }
            _ => Resolved::Run(r),
        }
    }

    /// A resolved integer as an instruction (a known value becomes a constant).
    fn int_insn(ins: &Insn, r: Resolved) -> Option<Insn> {
        match r {
            Resolved::Run(i) => Some(i),
            Resolved::Value(v) => Some(Insn { code: Code::IntConst, flags: ins.flags & !flag::OPT, init: v, ..*ins }),
            Resolved::Absent => None,
        }
    }

    /// Resolve `insns[start..end]`; false when the segment cannot be specialised (a tail
    /// operator, a dynamic template reference, or a decimal whose mantissa bit depends on
    /// whether its exponent turns out NULL).
    fn body(&mut self, start: usize, end: usize) -> bool {
        let insns = &self.p.insns;
        let mut i = start;
        while i < end {
            let ins = insns[i];
            match ins.code {
                Code::IntNone | Code::IntConst | Code::IntDefault | Code::IntCopy | Code::IntIncr | Code::IntDelta => {
                    match self.int(&ins) {
                        Resolved::Run(r) => self.emit(r),
                        Resolved::Value(v) => self.constant(Entry { field: ins.field, value: int_value(&ins, v) }),
                        Resolved::Absent => {}
                    }
                    i += 1;
                }
                Code::DecNone | Code::DecDelta => {
                    self.emit(ins);
                    i += 1;
                }
                Code::DecConst | Code::DecDefault | Code::DecCopy => {
                    let init = Decimal { exponent: ins.a as i32, mantissa: ins.init };
                    let present = ins.code.uses_bit(ins.has(flag::OPT)) && self.bit();
                    match ins.code {
                        Code::DecConst if present || !ins.has(flag::OPT) => {
                            self.constant(Entry { field: ins.field, value: Value::Decimal(init) })
                        }
                        Code::DecDefault if present => self.emit(Insn { code: Code::DecNone, ..ins }),
                        Code::DecDefault if ins.has(flag::HAS_INIT) => {
                            self.constant(Entry { field: ins.field, value: Value::Decimal(init) })
                        }
                        Code::DecCopy => {
                            self.emit(Insn { code: if present { Code::DecStore } else { Code::DecLoad }, ..ins })
                        }
                        _ => {}
                    }
                    i += 1;
                }
                Code::DecSplit => {
                    let (e, m) = (insns[i + 1], insns[i + 2]);
                    let re = self.int(&e);
                    let maybe_null = match &re {
                        Resolved::Run(r) => {
                            r.has(flag::NULLABLE)
                                || (r.has(flag::OPT) && matches!(r.code, Code::IntLoad | Code::IntLoadIncr))
                        }
                        _ => false,
                    };
                    if matches!(re, Resolved::Absent) {
                        i += 3;
                        continue;
                    }
                    if maybe_null && m.code.uses_bit(false) {
                        return false;
                    }
                    let rm = self.int(&m);
                    let (Some(ei), Some(mi)) = (Self::int_insn(&e, re), Self::int_insn(&m, rm)) else {
                        return false;
                    };
                    self.emit(ins);
                    self.out.push(ei);
                    self.out.push(mi);
                    i += 3;
                }
                Code::StrNone | Code::StrDelta => {
                    self.emit(ins);
                    i += 1;
                }
                Code::StrConst => {
                    if !ins.has(flag::OPT) || self.bit() {
                        self.constant(Entry { field: ins.field, value: Value::Static { index: ins.a } });
                    }
                    i += 1;
                }
                Code::StrDefault => {
                    if self.bit() {
                        self.emit(Insn { code: Code::StrNone, ..ins });
                    } else if ins.has(flag::HAS_INIT) {
                        self.constant(Entry { field: ins.field, value: Value::Static { index: ins.a } });
                    }
                    i += 1;
                }
                Code::StrCopy => {
                    let code = if self.bit() { Code::StrStore } else { Code::StrLoad };
                    self.emit(Insn { code, ..ins });
                    i += 1;
                }
                Code::Seq => {
                    let len = insns[i + 1];
                    match self.int(&len) {
                        Resolved::Absent => {}
                        r => {
                            let Some(li) = Self::int_insn(&len, r) else { return false };
                            self.emit(Insn { flags: ins.flags | flag::INLINE, ..ins });
                            self.out.push(li);
                        }
                    }
                    i = ins.a as usize;
                }
                Code::Group => {
                    if !ins.has(flag::OPT) || self.bit() {
                        self.emit(Insn { flags: (ins.flags & !flag::OPT) | flag::INLINE, ..ins });
                    }
                    i = ins.a as usize;
                }
                _ => return false,
            }
        }
        self.flush();
        true
    }
}

impl Program {
    /// Build straight-line segments for the hottest (segment, presence map) pairs of a
    /// profile: at most `per_segment` per segment and `max_total` in all, each seen in at
    /// least `min_share` of its segment's occurrences. Replaces earlier specialisations.
    /// Returns how many were built.
    pub fn specialise(&mut self, profile: &Profile, per_segment: usize, max_total: usize, min_share: f64) -> usize {
        // Undo an earlier specialisation.
        if let Some(first) = self.specials.iter().map(|s| s.start).min() {
            self.insns.truncate(first as usize);
        }
        self.specials.clear();
        self.consts.clear();
        self.kernels.clear();
        self.kops.clear();
        self.frames.clear();
        for t in &mut self.templates {
            t.special = 0;
        }
        for ins in &mut self.insns {
            if matches!(ins.code, Code::Seq | Code::Group) {
                ins.init = 0;
            }
        }
        // Segments: template bodies and sequence/group bodies with their own presence maps.
        let mut segments: HashMap<u32, (u32, Option<usize>, Option<usize>)> = HashMap::new();
        for (ti, t) in self.templates.iter().enumerate() {
            segments.insert(t.start, (t.end, Some(ti), None));
        }
        for (i, ins) in self.insns.iter().enumerate() {
            if matches!(ins.code, Code::Seq | Code::Group) && ins.has(flag::PMAP) {
                segments.insert(ins.slot, (ins.a, None, Some(i)));
            }
        }
        let mut by_segment: HashMap<u32, Vec<(Pmap, u64)>> = HashMap::new();
        let mut totals: HashMap<u32, u64> = HashMap::new();
        for (&(seg, pmap), &n) in &profile.counts {
            if segments.contains_key(&seg) {
                by_segment.entry(seg).or_default().push((pmap, n));
                *totals.entry(seg).or_default() += n;
            }
        }
        let mut candidates: Vec<(u64, u32, Pmap)> = Vec::new();
        for (seg, mut v) in by_segment {
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let total = totals[&seg] as f64;
            for (pmap, n) in v.into_iter().take(per_segment) {
                if n as f64 >= min_share * total {
                    candidates.push((n, seg, pmap));
                }
            }
        }
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        candidates.truncate(max_total);
        candidates.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
        let mut specials = Vec::new();
        let mut consts = Vec::new();
        let mut extra = Vec::new();
        let base = self.insns.len();
        for (n, seg, pmap) in candidates {
            let (end, _, _) = segments[&seg];
            let mut r = Resolver {
                p: self,
                pmap,
                out: Vec::new(),
                consts: std::mem::take(&mut consts),
                pending: Vec::new(),
                head: None,
            };
            let ok = r.body(seg as usize, end as usize);
            let (out, c) = (r.out, r.consts);
            consts = c;
            if !ok {
                continue;
            }
            let start = (base + extra.len()) as u32;
            extra.extend_from_slice(&out);
            specials.push(Special {
                segment: seg,
                pmap,
                start,
                end: start + out.len() as u32,
                hits: n,
                generic_len: end - seg,
                kernel: 0,
            });
        }
        self.insns.extend_from_slice(&extra);
        self.consts = consts;
        // Point each segment at its run of specials.
        let mut k = 0;
        while k < specials.len() {
            let seg = specials[k].segment;
            let n = specials[k..].iter().take_while(|s| s.segment == seg).count();
            let packed = ((n as u64) << 32) | (k as u64 + 1);
            let (_, template, insn) = segments[&seg];
            if let Some(t) = template {
                self.templates[t].special = packed;
            }
            if let Some(i) = insn {
                self.insns[i].init = packed as i64;
            }
            // The copies of the opener inside specialised segments point there too.
            for ins in &mut self.insns[base..] {
                if matches!(ins.code, Code::Seq | Code::Group) && ins.slot == seg {
                    ins.init = packed as i64;
                }
            }
            k += n;
        }
        self.specials = specials;
        self.seal();
        for n in 0..self.specials.len() {
            let sp = &self.specials[n];
            if let Some((ops, frame)) = self.kernel_of(sp.start as usize, sp.end as usize) {
                let k = Kernel {
                    ops: (self.kops.len() as u32, (self.kops.len() + ops.len()) as u32),
                    frame: (self.frames.len() as u32, (self.frames.len() + frame.len()) as u32),
                    end: sp.end,
                };
                self.kops.extend_from_slice(&ops);
                self.frames.extend_from_slice(&frame);
                self.kernels.push(k);
                self.specials[n].kernel = self.kernels.len() as u32;
            }
        }
        self.specials.len()
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

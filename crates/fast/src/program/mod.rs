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
//!
//! # Modules
//! This file holds the instruction set and the program's tables; `compile` turns templates
//! into instructions, `listing` prints them, `specialise` builds the straight-line segments
//! and their kernels from a profile.

use std::collections::HashMap;

use crate::codec::Pmap;
use crate::layout::{Entry, Value};
use crate::template::FieldType;

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
    /// The field is decoded (the stream and the dictionaries stay right) but not written
    /// to the message: `skip` in the program text (see `text`).
    pub skip: bool,
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
    /// A skipped integer or ASCII string without an operator: its bytes are stepped over to
    /// the stop bit, not decoded. (Other skipped fields keep their own key and are decoded,
    /// their entry not written.)
    pub const SKIP_UNIT: u8 = DEC_SPLIT_CONST_DELTA + 1;
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
    pub const BLANK: Insn =
        Insn { code: Code::IntNone, flags: 0, field: 0, slot: 0, a: 0, init: 0, op: 0, then: 0, skip: false };

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
    /// What the template files had that was accepted with a warning, each naming its
    /// line (the callers show them).
    pub warnings: Vec<String>,
    dense: Vec<u32>,
    sparse: HashMap<u32, u32>,
}

const DENSE_IDS: u32 = 4096;

mod compile;
mod listing;
mod specialise;
mod text;

pub use text::TextError;

#[cfg(test)]
mod tests;

impl Program {
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
        // Skipped fields without an operator last: stepped over, whatever their own key.
        for ins in &mut self.insns {
            let unit = ins.code == Code::IntNone
                || ins.code == Code::StrNone && ins.flags & (flag::UNICODE | flag::BYTES) == 0;
            if ins.skip && unit {
                ins.op = op::SKIP_UNIT;
            }
        }
    }

    /// The template id tables: a dense one for ids below 4096, a map for the rest.
    fn index_templates(&mut self) {
        for (i, t) in self.templates.iter().enumerate() {
            if let Some(id) = t.id {
                if id < DENSE_IDS {
                    if self.dense.len() <= id as usize {
                        self.dense.resize(id as usize + 1, 0);
                    }
                    self.dense[id as usize] = i as u32 + 1;
                } else {
                    self.sparse.insert(id, i as u32);
                }
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
}

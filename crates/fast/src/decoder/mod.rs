//! The decoding engine: runs a [`Program`] over a buffer, one message at a time.
//!
//! Output goes to a [`Message`]: a flat list of tagged, typed [`Entry`] values in template
//! order (absent optional fields are left out), with string bytes in one arena. A message is
//! cleared, not freed, between decodes, so the steady state allocates nothing. Sequences,
//! their elements, groups and dynamic template references are entries that say where their
//! nested entries end.
//!
//! Dictionary state lives in two arrays indexed by the slots the compiler resolved: integer
//! (and decimal) slots, and string slots with their own reusable buffers. Every operator
//! follows the specification's three previous-value states (undefined, empty, assigned) and
//! its errors (D5, D6, D7, R1, R4).
//!
//! # Modules
//! This file holds the message, the dictionary and the walk over a template's instructions
//! (segments, sequences, groups, dynamic references); `ints` the integer and decimal
//! operators, `strings` the string and byte-vector operators, `kernels` the specialised
//! segments and the native code's hand-over. They are all methods of the one [`Decoder`].

use crate::codec::{self, Pmap};
use crate::error::{Error, ErrorKind};
pub use crate::layout::{Entry, IntSlot, StrSlot, Value, ASSIGNED, EMPTY, HOLE, UNDEFINED};
use crate::native::{NativeKernels, SeqRun, SeqStop};
use crate::program::{flag, op, Code, FieldKind, Insn, Program};
use crate::value::Decimal;

/// A decoded message: reused across decodes.
#[derive(Debug, Clone, Default)]
pub struct Message {
    /// Template index in [`Program::templates`].
    pub template: u32,
    pub entries: Vec<Entry>,
    pub bytes: Vec<u8>,
    /// Every presence map as received (bits left-aligned, byte count), in stream order, for
    /// [`crate::Encoder::encode_as_received`].
    pub pmaps: Vec<(Pmap, u8)>,
}

impl Message {
    pub fn new() -> Message {
        Message {
            template: 0,
            entries: Vec::with_capacity(256),
            bytes: Vec::with_capacity(1024),
            pmaps: Vec::with_capacity(16),
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
        self.pmaps.clear();
    }

    /// The bytes of a `Value::Bytes`.
    pub fn slice(&self, start: u32, len: u32) -> &[u8] {
        &self.bytes[start as usize..(start + len) as usize]
    }

    /// The bytes of a string or byte-vector value (`None` for other values).
    pub fn bytes_of<'a>(&'a self, program: &'a Program, v: &Value) -> Option<&'a [u8]> {
        match *v {
            Value::Bytes { start, len } => Some(self.slice(start, len)),
            Value::Static { index } => program.strings.get(index as usize).map(Vec::as_slice),
            _ => None,
        }
    }

    /// Index one past the entry at `i` and everything nested in it.
    pub fn skip(&self, i: usize) -> usize {
        match self.entries[i].value {
            Value::Sequence { end, .. }
            | Value::Element { end }
            | Value::Group { end }
            | Value::Template { end, .. } => end as usize,
            _ => i + 1,
        }
    }

    /// The top-level entry of the field named `name`.
    pub fn get(&self, program: &Program, name: &str) -> Option<&Entry> {
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            if program.fields[e.field as usize].name == name {
                return Some(e);
            }
            i = self.skip(i);
        }
        None
    }

    /// The top-level entry of the field whose `id` attribute is `id`.
    pub fn get_by_id(&self, program: &Program, id: &str) -> Option<&Entry> {
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            if program.fields[e.field as usize].id.as_deref() == Some(id) {
                return Some(e);
            }
            i = self.skip(i);
        }
        None
    }

    /// Number of decoded values that are not constants (sequence lengths included): the
    /// "values on the wire" of a decode-speed figure.
    pub fn value_count(&self, program: &Program) -> usize {
        self.fields().filter(|e| !program.fields[e.field as usize].constant).count()
    }

    /// Number of decoded fields, constants and sequence lengths included.
    pub fn field_count(&self) -> usize {
        self.fields().count()
    }

    /// The entries that are fields' values: not an element, a group or a template's frame.
    fn fields(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| !matches!(e.value, Value::Element { .. } | Value::Group { .. } | Value::Template { .. }))
    }
}

/// A program's dictionary, every entry undefined (the decoder's and the encoder's).
pub(crate) fn new_dictionary(program: &Program) -> (Vec<IntSlot>, Vec<StrSlot>) {
    (vec![IntSlot::default(); program.int_slots.len()], vec![StrSlot::default(); program.str_slots.len()])
}

/// Every entry of a dictionary back to undefined (the decoder's and the encoder's).
pub(crate) fn reset_dictionary(ints: &mut [IntSlot], strs: &mut [StrSlot]) {
    for s in ints {
        s.state = UNDEFINED;
    }
    for s in strs {
        s.state = UNDEFINED;
    }
}

/// Largest nesting of sequences, groups and dynamic references the decoder follows.
pub const MAX_DEPTH: u32 = 32;

#[inline(always)]
fn take(p: &mut Pmap) -> bool {
    let b = (*p >> 127) != 0;
    *p <<= 1;
    b
}

mod ints;
mod kernels;
mod strings;

use ints::*;
pub(crate) use ints::{delta_base, fits, widen};
use kernels::*;
use strings::*;

/// How deltas and exponents are read, whatever the field's type: a signed 64-bit integer.
const SIGNED_64: Insn = Insn { flags: flag::SIGNED, op: 1, ..Insn::BLANK };

/// A failed decode: the details are in [`Decoder::err`]. Zero-sized, so every internal
/// result fits in registers.
#[derive(Debug, Clone, Copy)]
struct Fail;
type R<T> = Result<T, Fail>;

/// Decodes messages with one dictionary state.
#[derive(Debug, Clone)]
pub struct Decoder<'p> {
    program: &'p Program,
    ints: Vec<IntSlot>,
    strs: Vec<StrSlot>,
    depth: u32,
    err: Error,
    profile: Option<Box<crate::program::Profile>>,
    native: Option<&'p dyn NativeKernels>,
}

impl<'p> Decoder<'p> {
    pub fn new(program: &'p Program) -> Decoder<'p> {
        let (ints, strs) = new_dictionary(program);
        Decoder {
            program,
            ints,
            strs,
            depth: 0,
            err: Error::new(ErrorKind::Truncated("nothing"), 0),
            profile: None,
            native: None,
        }
    }

    pub fn program(&self) -> &'p Program {
        self.program
    }

    /// Run the program's kernels through native code made for it (see [`crate::native`]);
    /// `None` goes back to the decoder's own loop. Fails, changing nothing, when the code
    /// was not made for this program's kernels (a program specialised again since).
    pub fn set_native(&mut self, native: Option<&'p dyn NativeKernels>) -> Result<(), &'static str> {
        if let Some(n) = native {
            if !n.made_for(self.program) || self.ints.len() != self.program.int_slots.len() {
                return Err("native kernel code made for another program");
            }
        }
        self.native = native;
        Ok(())
    }

    /// Count (segment, presence map) pairs while decoding, for
    /// [`Program::specialise`](crate::Program::specialise).
    pub fn start_profile(&mut self) {
        self.profile = Some(Box::default());
    }

    /// The counts gathered since [`Decoder::start_profile`].
    pub fn take_profile(&mut self) -> crate::program::Profile {
        self.profile.take().map(|b| *b).unwrap_or_default()
    }

    /// Reset every dictionary entry to undefined (the template id's too).
    pub fn reset(&mut self) {
        reset_dictionary(&mut self.ints, &mut self.strs);
    }

    #[cold]
    #[inline(never)]
    fn fail(&mut self, kind: ErrorKind, at: usize) -> Fail {
        self.err = Error::new(kind, at);
        Fail
    }

    /// Decode one message from the start of `buf`; returns the bytes it took.
    pub fn decode(&mut self, buf: &[u8], msg: &mut Message) -> Result<usize, Error> {
        msg.clear();
        let mut pos = 0;
        // Two copies of the message path: the decoder's own, laid out as if native code did
        // not exist, and one that runs kernels natively.
        let r = if self.native.is_some() {
            self.message::<true>(buf, &mut pos, msg)
        } else {
            self.message::<false>(buf, &mut pos, msg)
        };
        match r {
            Ok(()) => Ok(pos),
            Err(Fail) => Err(self.err),
        }
    }

    fn message<const NATIVE: bool>(&mut self, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<()> {
        let mut pmap = self.pmap(buf, pos, msg)?;
        let t = self.template_id(buf, pos, &mut pmap)?;
        let program = self.program;
        let info = &program.templates[t as usize];
        if info.reset {
            self.reset();
            self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
        }
        msg.template = t;
        self.depth = 0;
        self.segment::<NATIVE>(info.start as usize, info.end as usize, info.special, buf, pos, pmap, msg)
    }

    #[inline(always)]
    fn pmap(&mut self, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<Pmap> {
        let at = *pos;
        match codec::read_pmap(buf, pos) {
            Ok(p) => {
                msg.pmaps.push((p, (*pos - at) as u8));
                Ok(p)
            }
            Err(e) => Err(self.fail(e.kind, e.offset)),
        }
    }

    /// The template id: copy operator on the global slot 0, holding the template index.
    fn template_id(&mut self, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> R<u32> {
        if take(pmap) {
            let at = *pos;
            let id = match groups(buf, pos) {
                Some((v, _)) => v,
                None => match codec::read_u64(buf, pos) {
                    Ok(v) => v,
                    Err(e) => return Err(self.fail(e.kind, e.offset)),
                },
            };
            let Ok(id) = u32::try_from(id) else {
                return Err(self.fail(ErrorKind::IntegerOverflow("uInt32"), at));
            };
            let Some(t) = self.program.template_index(id) else {
                return Err(self.fail(ErrorKind::UnknownTemplate(id), at));
            };
            self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
            return Ok(t);
        }
        if self.ints[0].state == ASSIGNED {
            return Ok(self.ints[0].v as u32);
        }
        match self.program.default_template {
            Some(t) => Ok(t),
            None => Err(self.fail(ErrorKind::NoInitialValue, *pos)),
        }
    }

    /// Run a segment's body: a specialised straight-line version when one matches the
    /// presence map, else the generic instructions.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn segment<const NATIVE: bool>(
        &mut self,
        start: usize,
        end: usize,
        special: u64,
        buf: &[u8],
        pos: &mut usize,
        pmap: Pmap,
        msg: &mut Message,
    ) -> R<()> {
        if let Some(profile) = &mut self.profile {
            *profile.counts.entry((start as u32, pmap)).or_insert(0) += 1;
        }
        if special != 0 {
            let lo = (special as u32 - 1) as usize;
            let n = (special >> 32) as usize;
            let program = self.program;
            for sp in &program.specials[lo..lo + n] {
                if sp.pmap == pmap {
                    let index = (sp.kernel as usize).wrapping_sub(1);
                    *pos = match program.kernels.get(index) {
                        Some(k) => match self.native {
                            Some(native) if NATIVE => self.kernel_native(native, index, k, buf, *pos, msg)?,
                            _ => self.kernel(k, buf, *pos, msg)?,
                        },
                        None => self.run(sp.start as usize, sp.end as usize, buf, *pos, 0, msg)?,
                    };
                    return Ok(());
                }
            }
        }
        *pos = self.run(start, end, buf, *pos, pmap, msg)?;
        Ok(())
    }

    /// [`Decoder::str_op`], its entry and bytes dropped when the field is skipped.
    #[inline(always)]
    fn str_skippable(&mut self, ins: &Insn, bit: bool, buf: &[u8], pos: usize, msg: &mut Message) -> R<usize> {
        let (entries, bytes) = (msg.entries.len(), msg.bytes.len());
        let next = self.str_op(ins, bit, buf, pos, msg)?;
        if ins.skip {
            msg.entries.truncate(entries);
            msg.bytes.truncate(bytes);
        }
        Ok(next)
    }

    /// Run instructions `start..end` from byte `p` with presence map `pm`; returns the byte
    /// after them. The cursor and the presence map stay in registers: every function this
    /// loop does not inline takes them by value.
    fn run(&mut self, start: usize, end: usize, buf: &[u8], p: usize, pm: Pmap, msg: &mut Message) -> R<usize> {
        let program = self.program;
        let insns = &program.insns[..end];
        let mut p = p;
        let mut pm = pm;
        let mut i = start;
        while let Some(ins) = insns.get(i) {
            match self.exec(i, ins, buf, &mut p, &mut pm, msg) {
                Ok(next) => {
                    if ins.then != 0 {
                        Self::then_consts(program, ins.then, msg);
                    }
                    i = next;
                }
                Err(Fail) => {
                    if self.err.field == u32::MAX {
                        self.err.field = ins.field;
                    }
                    return Err(Fail);
                }
            }
        }
        Ok(p)
    }
}

impl<'p> Decoder<'p> {
    /// The prebuilt entries an instruction carries (see [`Insn::then`]).
    #[inline(always)]
    fn then_consts(program: &Program, then: u32, msg: &mut Message) {
        let lo = (then >> 8) as usize;
        push_consts(msg, &program.consts[lo..lo + (then & 0xff) as usize]);
    }

    #[inline(always)]
    fn exec(
        &mut self,
        i: usize,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> R<usize> {
        // Integer instructions: one arm per operator and type (see `Insn::op`).
        match ins.op {
            0 => self.int_typed::<0, false, false, false>(i, ins, buf, pos, pmap, msg),
            1 => self.int_typed::<0, true, false, false>(i, ins, buf, pos, pmap, msg),
            2 => self.int_typed::<0, false, true, false>(i, ins, buf, pos, pmap, msg),
            3 => self.int_typed::<0, true, true, false>(i, ins, buf, pos, pmap, msg),
            4 => self.int_typed::<0, false, false, true>(i, ins, buf, pos, pmap, msg),
            5 => self.int_typed::<0, true, false, true>(i, ins, buf, pos, pmap, msg),
            6 => self.int_typed::<0, false, true, true>(i, ins, buf, pos, pmap, msg),
            7 => self.int_typed::<0, true, true, true>(i, ins, buf, pos, pmap, msg),
            8 => self.int_typed::<1, false, false, false>(i, ins, buf, pos, pmap, msg),
            9 => self.int_typed::<1, true, false, false>(i, ins, buf, pos, pmap, msg),
            10 => self.int_typed::<1, false, true, false>(i, ins, buf, pos, pmap, msg),
            11 => self.int_typed::<1, true, true, false>(i, ins, buf, pos, pmap, msg),
            12 => self.int_typed::<1, false, false, true>(i, ins, buf, pos, pmap, msg),
            13 => self.int_typed::<1, true, false, true>(i, ins, buf, pos, pmap, msg),
            14 => self.int_typed::<1, false, true, true>(i, ins, buf, pos, pmap, msg),
            15 => self.int_typed::<1, true, true, true>(i, ins, buf, pos, pmap, msg),
            16 => self.int_typed::<2, false, false, false>(i, ins, buf, pos, pmap, msg),
            17 => self.int_typed::<2, true, false, false>(i, ins, buf, pos, pmap, msg),
            18 => self.int_typed::<2, false, true, false>(i, ins, buf, pos, pmap, msg),
            19 => self.int_typed::<2, true, true, false>(i, ins, buf, pos, pmap, msg),
            20 => self.int_typed::<2, false, false, true>(i, ins, buf, pos, pmap, msg),
            21 => self.int_typed::<2, true, false, true>(i, ins, buf, pos, pmap, msg),
            22 => self.int_typed::<2, false, true, true>(i, ins, buf, pos, pmap, msg),
            23 => self.int_typed::<2, true, true, true>(i, ins, buf, pos, pmap, msg),
            24 => self.int_typed::<3, false, false, false>(i, ins, buf, pos, pmap, msg),
            25 => self.int_typed::<3, true, false, false>(i, ins, buf, pos, pmap, msg),
            26 => self.int_typed::<3, false, true, false>(i, ins, buf, pos, pmap, msg),
            27 => self.int_typed::<3, true, true, false>(i, ins, buf, pos, pmap, msg),
            28 => self.int_typed::<3, false, false, true>(i, ins, buf, pos, pmap, msg),
            29 => self.int_typed::<3, true, false, true>(i, ins, buf, pos, pmap, msg),
            30 => self.int_typed::<3, false, true, true>(i, ins, buf, pos, pmap, msg),
            31 => self.int_typed::<3, true, true, true>(i, ins, buf, pos, pmap, msg),
            32 => self.int_typed::<4, false, false, false>(i, ins, buf, pos, pmap, msg),
            33 => self.int_typed::<4, true, false, false>(i, ins, buf, pos, pmap, msg),
            34 => self.int_typed::<4, false, true, false>(i, ins, buf, pos, pmap, msg),
            35 => self.int_typed::<4, true, true, false>(i, ins, buf, pos, pmap, msg),
            36 => self.int_typed::<4, false, false, true>(i, ins, buf, pos, pmap, msg),
            37 => self.int_typed::<4, true, false, true>(i, ins, buf, pos, pmap, msg),
            38 => self.int_typed::<4, false, true, true>(i, ins, buf, pos, pmap, msg),
            39 => self.int_typed::<4, true, true, true>(i, ins, buf, pos, pmap, msg),
            40 => self.int_typed::<5, false, false, false>(i, ins, buf, pos, pmap, msg),
            41 => self.int_typed::<5, true, false, false>(i, ins, buf, pos, pmap, msg),
            42 => self.int_typed::<5, false, true, false>(i, ins, buf, pos, pmap, msg),
            43 => self.int_typed::<5, true, true, false>(i, ins, buf, pos, pmap, msg),
            44 => self.int_typed::<5, false, false, true>(i, ins, buf, pos, pmap, msg),
            45 => self.int_typed::<5, true, false, true>(i, ins, buf, pos, pmap, msg),
            46 => self.int_typed::<5, false, true, true>(i, ins, buf, pos, pmap, msg),
            47 => self.int_typed::<5, true, true, true>(i, ins, buf, pos, pmap, msg),
            48 => self.int_typed::<6, false, false, false>(i, ins, buf, pos, pmap, msg),
            49 => self.int_typed::<6, true, false, false>(i, ins, buf, pos, pmap, msg),
            50 => self.int_typed::<6, false, true, false>(i, ins, buf, pos, pmap, msg),
            51 => self.int_typed::<6, true, true, false>(i, ins, buf, pos, pmap, msg),
            52 => self.int_typed::<6, false, false, true>(i, ins, buf, pos, pmap, msg),
            53 => self.int_typed::<6, true, false, true>(i, ins, buf, pos, pmap, msg),
            54 => self.int_typed::<6, false, true, true>(i, ins, buf, pos, pmap, msg),
            55 => self.int_typed::<6, true, true, true>(i, ins, buf, pos, pmap, msg),
            56 => self.int_typed::<7, false, false, false>(i, ins, buf, pos, pmap, msg),
            57 => self.int_typed::<7, true, false, false>(i, ins, buf, pos, pmap, msg),
            58 => self.int_typed::<7, false, true, false>(i, ins, buf, pos, pmap, msg),
            59 => self.int_typed::<7, true, true, false>(i, ins, buf, pos, pmap, msg),
            60 => self.int_typed::<7, false, false, true>(i, ins, buf, pos, pmap, msg),
            61 => self.int_typed::<7, true, false, true>(i, ins, buf, pos, pmap, msg),
            62 => self.int_typed::<7, false, true, true>(i, ins, buf, pos, pmap, msg),
            63 => self.int_typed::<7, true, true, true>(i, ins, buf, pos, pmap, msg),
            64 => self.int_typed::<8, false, false, false>(i, ins, buf, pos, pmap, msg),
            65 => self.int_typed::<8, true, false, false>(i, ins, buf, pos, pmap, msg),
            66 => self.int_typed::<8, false, true, false>(i, ins, buf, pos, pmap, msg),
            67 => self.int_typed::<8, true, true, false>(i, ins, buf, pos, pmap, msg),
            68 => self.int_typed::<8, false, false, true>(i, ins, buf, pos, pmap, msg),
            69 => self.int_typed::<8, true, false, true>(i, ins, buf, pos, pmap, msg),
            70 => self.int_typed::<8, false, true, true>(i, ins, buf, pos, pmap, msg),
            71 => self.int_typed::<8, true, true, true>(i, ins, buf, pos, pmap, msg),
            op::SKIP_UNIT => {
                // A skipped field without an operator: step over its bytes to the stop bit
                // (not decoded, so an overlong value is not noticed: only its extent).
                let rest = buf.get(*pos..).unwrap_or_default();
                match rest.iter().position(|&b| b & 0x80 != 0) {
                    Some(k) => {
                        *pos += k + 1;
                        Ok(i + 1)
                    }
                    None => Err(self.fail(ErrorKind::Truncated("a skipped field"), *pos)),
                }
            }
            op::CONSTS => {
                let program = self.program;
                let lo = ins.a as usize;
                push_consts(msg, &program.consts[lo..lo + ins.init as usize]);
                Ok(i + 1)
            }
            op::DEC_NONE
            | op::DEC_CONST
            | op::DEC_DEFAULT
            | op::DEC_COPY
            | op::DEC_DELTA
            | op::DEC_STORE
            | op::DEC_LOAD => {
                let bit = ins.code.uses_bit(ins.has(flag::OPT)) && take(pmap);
                let (v, q) = self.dec_op(ins, bit, buf, *pos)?;
                *pos = q;
                if let Some(d) = v.filter(|_| !ins.skip) {
                    msg.entries.push(Entry { field: ins.field, value: Value::Decimal(d) });
                }
                Ok(i + 1)
            }
            op::DEC_SPLIT_CONST_DELTA => {
                let program = self.program;
                let Some([e_ins, m_ins]) = program.insns.get(i + 1..i + 3) else {
                    // The compiler always puts a split decimal's two parts after it.
                    return Err(self.fail(ErrorKind::LimitExceeded("split decimal without its parts"), *pos));
                };
                let Some(m) = self.delta_t::<true, false, false>(m_ins, buf, pos)? else {
                    return Err(self.fail(ErrorKind::NoInitialValue, *pos));
                };
                if ins.skip {
                    return Ok(i + 3);
                }
                msg.entries.push(Entry {
                    field: ins.field,
                    value: Value::Decimal(Decimal { exponent: e_ins.init as i32, mantissa: m }),
                });
                Ok(i + 3)
            }
            op::DEC_SPLIT => {
                let program = self.program;
                let e_ins = &program.insns[i + 1];
                let m_ins = &program.insns[i + 2];
                // The usual exchange shape in line: a constant (or resolved default)
                // exponent, a delta mantissa.
                let e = match e_ins.code {
                    Code::IntConst if !e_ins.has(flag::OPT) => Some(e_ins.init),
                    _ => self.int_op(e_ins, buf, pos, pmap)?,
                };
                if let Some(e) = e {
                    if !(-63..=63).contains(&e) {
                        return Err(self.fail(ErrorKind::ExponentRange, *pos));
                    }
                    let m = if m_ins.op == op::I64_DELTA {
                        self.delta_t::<true, false, false>(m_ins, buf, pos)?
                    } else if m_ins.code == Code::IntDelta {
                        self.delta(m_ins, buf, pos)?
                    } else {
                        self.int_op(m_ins, buf, pos, pmap)?
                    };
                    let Some(m) = m else {
                        return Err(self.fail(ErrorKind::NoInitialValue, *pos));
                    };
                    if ins.skip {
                        return Ok(i + 3);
                    }
                    msg.entries.push(Entry {
                        field: ins.field,
                        value: Value::Decimal(Decimal { exponent: e as i32, mantissa: m }),
                    });
                }
                Ok(i + 3)
            }
            // The common string cases in line: a short ASCII value read or stored, a copied
            // value loaded. Everything else goes through `str_op`.
            op::STR_NONE | op::STR_STORE if ins.flags & (flag::UNICODE | flag::BYTES) == 0 => {
                // NULL, the usual value of an optional string an exchange leaves out.
                if ins.has(flag::NULLABLE) && buf.get(*pos) == Some(&0x80) {
                    *pos += 1;
                    if ins.code == Code::StrStore {
                        self.strs[ins.slot as usize].state = EMPTY;
                    }
                    return Ok(i + 1);
                }
                if let Some((start, len)) = ascii_fast(buf, pos, &mut msg.bytes) {
                    if ins.code == Code::StrStore {
                        let s = &mut self.strs[ins.slot as usize];
                        s.buf.clear();
                        for &x in &msg.bytes[start as usize..][..len as usize] {
                            s.buf.push(x);
                        }
                        s.state = ASSIGNED;
                    }
                    if ins.skip {
                        msg.bytes.truncate(start as usize);
                    } else {
                        msg.entries.push(Entry { field: ins.field, value: Value::Bytes { start, len } });
                    }
                } else {
                    *pos = self.str_skippable(ins, false, buf, *pos, msg)?;
                }
                Ok(i + 1)
            }
            op::STR_LOAD if self.strs[ins.slot as usize].state == ASSIGNED && !ins.skip => {
                let v = &self.strs[ins.slot as usize].buf;
                let start = msg.bytes.len() as u32;
                append(&mut msg.bytes, v);
                msg.entries.push(Entry { field: ins.field, value: Value::Bytes { start, len: v.len() as u32 } });
                Ok(i + 1)
            }
            op::STR_NONE
            | op::STR_CONST
            | op::STR_DEFAULT
            | op::STR_COPY
            | op::STR_DELTA
            | op::STR_TAIL
            | op::STR_STORE
            | op::STR_LOAD => {
                let bit = ins.code.uses_bit(ins.has(flag::OPT)) && take(pmap);
                *pos = self.str_skippable(ins, bit, buf, *pos, msg)?;
                Ok(i + 1)
            }
            op::SEQ => {
                let program = self.program;
                let at = *pos;
                let next = if ins.has(flag::INLINE) { i + 2 } else { ins.a as usize };
                if let Some(len) = self.int_op(&program.insns[i + 1], buf, pos, pmap)? {
                    *pos = self.sequence::<false>(ins, len as u64, at, buf, *pos, msg)?;
                }
                Ok(next)
            }
            op::GROUP => {
                let next = if ins.has(flag::INLINE) { i + 1 } else { ins.a as usize };
                if !ins.has(flag::OPT) || take(pmap) {
                    *pos = self.group(ins, buf, *pos, msg)?;
                }
                Ok(next)
            }
            op::DYN_REF => {
                *pos = self.dynref(ins, buf, *pos, msg)?;
                Ok(i + 1)
            }
            // An instruction whose key the compiler did not set: the generic integer path.
            _ => self.int_arm(ins.code, i, ins, buf, pos, pmap, msg),
        }
    }

    /// The elements of a sequence of `len` (its length already read, at byte `at`); their
    /// kernels run by native code when `NATIVE` (and the decoder has some).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn sequence<const NATIVE: bool>(
        &mut self,
        ins: &Insn,
        len: u64,
        at: usize,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let pos = p;
        let remaining = (buf.len() - pos) as u64;
        if len > remaining.max(65_536) {
            return Err(self.fail(ErrorKind::LimitExceeded("sequence length beyond the bytes left"), at));
        }
        self.enter(pos)?;
        let si = msg.entries.len();
        msg.entries.push(Entry { field: ins.field, value: Value::Sequence { len: len as u32, end: 0 } });
        self.elements::<NATIVE>(ins, len, si, None, buf, pos, msg)
    }

    /// The elements of a sequence of `len` (entered, its entry at `si`) from the first
    /// not yet run: `first` how far native code already went, when it did; the sequence's
    /// end set, the nesting left.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn elements<const NATIVE: bool>(
        &mut self,
        ins: &Insn,
        len: u64,
        si: usize,
        first: Option<SeqRun>,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let mut pos = p;
        let (body, end) = (ins.slot as usize, ins.a as usize);
        let special = ins.init as u64;
        let mut k = 0;
        // Native code for the element loop, when it has some: it runs elements until one
        // it leaves (the decoder runs that one, below) or the sequence's end.
        let mut native = match self.native {
            Some(n) if NATIVE && special != 0 && ins.has(flag::PMAP) && self.profile.is_none() => Some(n),
            _ => None,
        };
        let mut pending = first;
        while k < len {
            if pending.is_none() {
                if let Some(n) = native {
                    let Message { entries, bytes, pmaps, .. } = msg;
                    let lo = (special as u32 - 1) as usize;
                    let count = (len - k).min(usize::MAX as u64) as usize;
                    let (ints, strs) = (&mut self.ints[..], &mut self.strs[..]);
                    pending = n.run_seq(lo, ins.field, count, buf, &mut pos, entries, pmaps, ints, strs, bytes);
                    if pending.is_none() {
                        native = None;
                        continue;
                    }
                }
            }
            if let Some(run) = pending.take() {
                k += run.elements as u64;
                match run.stop {
                    SeqStop::Done if run.elements > 0 => continue,
                    SeqStop::Done => {
                        native = None;
                        continue;
                    }
                    SeqStop::Element => {}
                    SeqStop::Kernel { entry, kernel, from, holes } => {
                        let program = self.program;
                        pos = self.kernel_rest(&program.kernels[kernel], entry + 1, from, holes, buf, pos, msg)?;
                        let end = msg.entries.len() as u32;
                        msg.entries[entry].value = Value::Element { end };
                        k += 1;
                        continue;
                    }
                }
                if k >= len {
                    break;
                }
            }
            k += 1;
            let ei = msg.entries.len();
            msg.entries.push(Entry { field: ins.field, value: Value::Element { end: 0 } });
            if ins.has(flag::PMAP) {
                let inner = self.pmap(buf, &mut pos, msg)?;
                self.segment::<NATIVE>(body, end, special, buf, &mut pos, inner, msg)?;
            } else {
                // No bits in the body: no presence map of its own, none used from ours.
                pos = self.run(body, end, buf, pos, 0, msg)?;
            }
            let end = msg.entries.len() as u32;
            msg.entries[ei].value = Value::Element { end };
        }
        let end = msg.entries.len() as u32;
        msg.entries[si].value = Value::Sequence { len: len as u32, end };
        self.depth -= 1;
        Ok(pos)
    }

    /// A group that is present.
    #[inline(never)]
    fn group(&mut self, ins: &Insn, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
        let mut pos = p;
        self.enter(pos)?;
        let gi = msg.entries.len();
        msg.entries.push(Entry { field: ins.field, value: Value::Group { end: 0 } });
        let (body, end) = (ins.slot as usize, ins.a as usize);
        if ins.has(flag::PMAP) {
            let inner = self.pmap(buf, &mut pos, msg)?;
            self.segment::<false>(body, end, ins.init as u64, buf, &mut pos, inner, msg)?;
        } else {
            pos = self.run(body, end, buf, pos, 0, msg)?;
        }
        let end = msg.entries.len() as u32;
        msg.entries[gi].value = Value::Group { end };
        self.depth -= 1;
        Ok(pos)
    }

    #[inline(never)]
    fn dynref(&mut self, ins: &Insn, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
        let mut pos = p;
        self.enter(pos)?;
        let mut inner = self.pmap(buf, &mut pos, msg)?;
        let t = self.template_id(buf, &mut pos, &mut inner)?;
        let program = self.program;
        let info = &program.templates[t as usize];
        let ti = msg.entries.len();
        msg.entries.push(Entry { field: ins.field, value: Value::Template { template: t, end: 0 } });
        self.segment::<false>(info.start as usize, info.end as usize, info.special, buf, &mut pos, inner, msg)?;
        let end = msg.entries.len() as u32;
        msg.entries[ti].value = Value::Template { template: t, end };
        self.depth -= 1;
        Ok(pos)
    }

    fn enter(&mut self, at: usize) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.fail(ErrorKind::LimitExceeded("nesting deeper than 32"), at));
        }
        Ok(())
    }
}

/// Name of a field's kind, for messages.
pub fn kind_name(k: FieldKind) -> &'static str {
    match k {
        FieldKind::Scalar(t) => t.name(),
        FieldKind::Sequence => "sequence",
        FieldKind::Group => "group",
        FieldKind::TemplateRef => "templateRef",
    }
}

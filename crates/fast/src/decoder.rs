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

use crate::codec::{self, AsciiRead, Pmap};
use crate::error::{Error, ErrorKind};
use crate::program::{flag, Code, FieldKind, Insn, Program};
use crate::value::Decimal;

/// A decoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// uInt32 and uInt64 (and a sequence length).
    UInt(u64),
    /// int32 and int64.
    Int(i64),
    Decimal(Decimal),
    /// ASCII string, unicode string or byte vector: `len` bytes at `start` in
    /// [`Message::bytes`].
    Bytes {
        start: u32,
        len: u32,
    },
    /// A sequence of `len` elements; its entries run to index `end` (exclusive).
    Sequence {
        len: u32,
        end: u32,
    },
    /// One element of a sequence; its fields run to `end`.
    Element {
        end: u32,
    },
    /// A group; its fields run to `end`.
    Group {
        end: u32,
    },
    /// A dynamic template reference to template index `template`; its fields run to `end`.
    Template {
        template: u32,
        end: u32,
    },
}

/// One field of a decoded message: the field (index into [`Program::fields`]) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub field: u32,
    pub value: Value,
}

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
        self.entries
            .iter()
            .filter(|e| {
                !matches!(e.value, Value::Element { .. } | Value::Group { .. } | Value::Template { .. })
                    && !program.fields[e.field as usize].constant
            })
            .count()
    }
}

pub(crate) const UNDEFINED: u8 = 0;
pub(crate) const EMPTY: u8 = 1;
pub(crate) const ASSIGNED: u8 = 2;

/// An integer or decimal dictionary entry.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IntSlot {
    pub(crate) v: i64,
    pub(crate) exp: i32,
    pub(crate) state: u8,
}

/// A string dictionary entry.
#[derive(Debug, Clone, Default)]
pub(crate) struct StrSlot {
    pub(crate) state: u8,
    pub(crate) buf: Vec<u8>,
}

/// Largest nesting of sequences, groups and dynamic references the decoder follows.
pub const MAX_DEPTH: u32 = 32;

#[inline(always)]
fn take(p: &mut Pmap) -> bool {
    let b = (*p >> 127) != 0;
    *p <<= 1;
    b
}

/// Range check of an integer of the instruction's type, given as i128.
#[inline(always)]
pub(crate) fn fits(ins: &Insn, v: i128) -> bool {
    match (ins.has(flag::SIGNED), ins.has(flag::W32)) {
        (false, true) => (0..=i128::from(u32::MAX)).contains(&v),
        (true, true) => (i128::from(i32::MIN)..=i128::from(i32::MAX)).contains(&v),
        (false, false) => (0..=i128::from(u64::MAX)).contains(&v),
        (true, false) => (i128::from(i64::MIN)..=i128::from(i64::MAX)).contains(&v),
    }
}

/// The stored bits of an integer as i128, by the instruction's signedness.
#[inline(always)]
pub(crate) fn widen(ins: &Insn, v: i64) -> i128 {
    if ins.has(flag::SIGNED) {
        i128::from(v)
    } else {
        i128::from(v as u64)
    }
}

#[inline(always)]
fn int_value(ins: &Insn, v: i64) -> Value {
    if ins.has(flag::SIGNED) {
        Value::Int(v)
    } else {
        Value::UInt(v as u64)
    }
}

/// Read a field's integer in its encoding (nullable or not, signed or not), range-checked.
#[inline(always)]
fn read_int(ins: &Insn, buf: &[u8], pos: &mut usize) -> Result<Option<i64>, Error> {
    let at = *pos;
    let v = match (ins.has(flag::SIGNED), ins.has(flag::NULLABLE)) {
        (false, false) => Some(codec::read_u64(buf, pos)? as i64),
        (false, true) => codec::read_u64_nullable(buf, pos)?.map(|v| v as i64),
        (true, false) => Some(codec::read_i64(buf, pos)?),
        (true, true) => codec::read_i64_nullable(buf, pos)?,
    };
    if ins.has(flag::W32) {
        if let Some(v) = v {
            if !fits(ins, widen(ins, v)) {
                let ty = if ins.has(flag::SIGNED) { "int32" } else { "uInt32" };
                return Err(Error::new(ErrorKind::IntegerOverflow(ty), at));
            }
        }
    }
    Ok(v)
}

#[inline(always)]
fn read_pmap(buf: &[u8], pos: &mut usize, msg: &mut Message) -> Result<Pmap, Error> {
    let at = *pos;
    let p = codec::read_pmap(buf, pos)?;
    msg.pmaps.push((p, (*pos - at) as u8));
    Ok(p)
}

/// Decodes messages with one dictionary state.
#[derive(Debug, Clone)]
pub struct Decoder<'p> {
    program: &'p Program,
    ints: Vec<IntSlot>,
    strs: Vec<StrSlot>,
    depth: u32,
}

impl<'p> Decoder<'p> {
    pub fn new(program: &'p Program) -> Decoder<'p> {
        Decoder {
            program,
            ints: vec![IntSlot::default(); program.int_slots.len()],
            strs: vec![StrSlot::default(); program.str_slots.len()],
            depth: 0,
        }
    }

    pub fn program(&self) -> &'p Program {
        self.program
    }

    /// Reset every dictionary entry to undefined (the template id's too).
    pub fn reset(&mut self) {
        for s in &mut self.ints {
            s.state = UNDEFINED;
        }
        for s in &mut self.strs {
            s.state = UNDEFINED;
        }
    }

    /// Decode one message from the start of `buf`; returns the bytes it took.
    pub fn decode(&mut self, buf: &[u8], msg: &mut Message) -> Result<usize, Error> {
        msg.clear();
        let mut pos = 0;
        let mut pmap = read_pmap(buf, &mut pos, msg)?;
        let t = self.template_id(buf, &mut pos, &mut pmap)?;
        let info = &self.program.templates[t as usize];
        if info.reset {
            self.reset();
            self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
        }
        msg.template = t;
        self.depth = 0;
        self.run(info.start as usize, info.end as usize, buf, &mut pos, &mut pmap, msg)?;
        Ok(pos)
    }

    /// The template id: copy operator on the global slot 0, holding the template index.
    fn template_id(&mut self, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> Result<u32, Error> {
        if take(pmap) {
            let at = *pos;
            let id = codec::read_u64(buf, pos)?;
            let id = u32::try_from(id).map_err(|_| Error::new(ErrorKind::IntegerOverflow("uInt32"), at))?;
            let t = self.program.template_index(id).ok_or_else(|| Error::new(ErrorKind::UnknownTemplate(id), at))?;
            self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
            return Ok(t);
        }
        if self.ints[0].state == ASSIGNED {
            return Ok(self.ints[0].v as u32);
        }
        match self.program.default_template {
            Some(t) => Ok(t),
            None => Err(Error::new(ErrorKind::NoInitialValue, *pos)),
        }
    }

    fn run(
        &mut self,
        start: usize,
        end: usize,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> Result<(), Error> {
        let program = self.program;
        let mut i = start;
        while i < end {
            let ins = program.insns[i];
            i = match self.exec(i, ins, buf, pos, pmap, msg) {
                Ok(next) => next,
                Err(mut e) => {
                    if e.field == u32::MAX {
                        e.field = ins.field;
                    }
                    return Err(e);
                }
            };
        }
        Ok(())
    }

    /// The integer operators; `None` is absent.
    #[inline(always)]
    fn int_op(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> Result<Option<i64>, Error> {
        match ins.code {
            Code::IntNone => read_int(ins, buf, pos),
            Code::IntConst => Ok(if !ins.has(flag::OPT) || take(pmap) { Some(ins.init) } else { None }),
            Code::IntDefault => {
                if take(pmap) {
                    read_int(ins, buf, pos)
                } else if ins.has(flag::HAS_INIT) {
                    Ok(Some(ins.init))
                } else {
                    Ok(None)
                }
            }
            Code::IntCopy | Code::IntIncr => {
                let slot = ins.slot as usize;
                if take(pmap) {
                    let v = read_int(ins, buf, pos)?;
                    self.ints[slot] = match v {
                        Some(v) => IntSlot { v, exp: 0, state: ASSIGNED },
                        None => IntSlot { v: 0, exp: 0, state: EMPTY },
                    };
                    return Ok(v);
                }
                let s = self.ints[slot];
                match s.state {
                    ASSIGNED => {
                        if ins.code == Code::IntCopy {
                            return Ok(Some(s.v));
                        }
                        let next = widen(ins, s.v) + 1;
                        if !fits(ins, next) {
                            return Err(Error::new(ErrorKind::DeltaOverflow, *pos));
                        }
                        self.ints[slot].v = next as i64;
                        Ok(Some(next as i64))
                    }
                    UNDEFINED => {
                        if ins.has(flag::HAS_INIT) {
                            self.ints[slot] = IntSlot { v: ins.init, exp: 0, state: ASSIGNED };
                            Ok(Some(ins.init))
                        } else if ins.has(flag::OPT) {
                            self.ints[slot].state = EMPTY;
                            Ok(None)
                        } else {
                            Err(Error::new(ErrorKind::NoInitialValue, *pos))
                        }
                    }
                    _ => {
                        if ins.has(flag::OPT) {
                            Ok(None)
                        } else {
                            Err(Error::new(ErrorKind::EmptyPrevious, *pos))
                        }
                    }
                }
            }
            Code::IntDelta => {
                let at = *pos;
                let d = if ins.has(flag::NULLABLE) {
                    match codec::read_i64_nullable(buf, pos)? {
                        None => return Ok(None),
                        Some(d) => d,
                    }
                } else {
                    codec::read_i64(buf, pos)?
                };
                let slot = ins.slot as usize;
                let s = self.ints[slot];
                let base = match s.state {
                    ASSIGNED => widen(ins, s.v),
                    UNDEFINED => {
                        if ins.has(flag::HAS_INIT) {
                            widen(ins, ins.init)
                        } else {
                            0
                        }
                    }
                    _ => return Err(Error::new(ErrorKind::EmptyPrevious, at)),
                };
                let v = base + i128::from(d);
                if !fits(ins, v) {
                    return Err(Error::new(ErrorKind::DeltaOverflow, at));
                }
                self.ints[slot] = IntSlot { v: v as i64, exp: 0, state: ASSIGNED };
                Ok(Some(v as i64))
            }
            _ => Ok(None),
        }
    }

    /// Read a decimal's exponent and mantissa as a pair (nullable exponent when optional).
    #[inline(always)]
    fn read_decimal(ins: &Insn, buf: &[u8], pos: &mut usize) -> Result<Option<Decimal>, Error> {
        let at = *pos;
        let e = if ins.has(flag::NULLABLE) {
            match codec::read_i64_nullable(buf, pos)? {
                None => return Ok(None),
                Some(e) => e,
            }
        } else {
            codec::read_i64(buf, pos)?
        };
        if !(-63..=63).contains(&e) {
            return Err(Error::new(ErrorKind::ExponentRange, at));
        }
        let m = codec::read_i64(buf, pos)?;
        Ok(Some(Decimal { exponent: e as i32, mantissa: m }))
    }

    fn dec_op(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> Result<Option<Decimal>, Error> {
        let init = Decimal { exponent: ins.a as i32, mantissa: ins.init };
        match ins.code {
            Code::DecNone => Self::read_decimal(ins, buf, pos),
            Code::DecConst => Ok(if !ins.has(flag::OPT) || take(pmap) { Some(init) } else { None }),
            Code::DecDefault => {
                if take(pmap) {
                    Self::read_decimal(ins, buf, pos)
                } else if ins.has(flag::HAS_INIT) {
                    Ok(Some(init))
                } else {
                    Ok(None)
                }
            }
            Code::DecCopy => {
                let slot = ins.slot as usize;
                if take(pmap) {
                    let v = Self::read_decimal(ins, buf, pos)?;
                    self.ints[slot] = match v {
                        Some(d) => IntSlot { v: d.mantissa, exp: d.exponent, state: ASSIGNED },
                        None => IntSlot { v: 0, exp: 0, state: EMPTY },
                    };
                    return Ok(v);
                }
                let s = self.ints[slot];
                match s.state {
                    ASSIGNED => Ok(Some(Decimal { exponent: s.exp, mantissa: s.v })),
                    UNDEFINED => {
                        if ins.has(flag::HAS_INIT) {
                            self.ints[slot] = IntSlot { v: init.mantissa, exp: init.exponent, state: ASSIGNED };
                            Ok(Some(init))
                        } else if ins.has(flag::OPT) {
                            self.ints[slot].state = EMPTY;
                            Ok(None)
                        } else {
                            Err(Error::new(ErrorKind::NoInitialValue, *pos))
                        }
                    }
                    _ => {
                        if ins.has(flag::OPT) {
                            Ok(None)
                        } else {
                            Err(Error::new(ErrorKind::EmptyPrevious, *pos))
                        }
                    }
                }
            }
            Code::DecDelta => {
                let at = *pos;
                let ed = if ins.has(flag::NULLABLE) {
                    match codec::read_i64_nullable(buf, pos)? {
                        None => return Ok(None),
                        Some(e) => e,
                    }
                } else {
                    codec::read_i64(buf, pos)?
                };
                let md = codec::read_i64(buf, pos)?;
                let slot = ins.slot as usize;
                let s = self.ints[slot];
                let base = match s.state {
                    ASSIGNED => Decimal { exponent: s.exp, mantissa: s.v },
                    UNDEFINED => {
                        if ins.has(flag::HAS_INIT) {
                            init
                        } else {
                            Decimal::default()
                        }
                    }
                    _ => return Err(Error::new(ErrorKind::EmptyPrevious, at)),
                };
                let e = i64::from(base.exponent) + ed;
                if !(-63..=63).contains(&e) {
                    return Err(Error::new(ErrorKind::ExponentRange, at));
                }
                let m = base.mantissa.checked_add(md).ok_or_else(|| Error::new(ErrorKind::DeltaOverflow, at))?;
                self.ints[slot] = IntSlot { v: m, exp: e as i32, state: ASSIGNED };
                Ok(Some(Decimal { exponent: e as i32, mantissa: m }))
            }
            _ => Ok(None),
        }
    }

    /// Read a string or byte vector value into the message arena. `Ok(None)` is NULL.
    #[inline(always)]
    fn read_vector(
        ins: &Insn,
        nullable: bool,
        buf: &[u8],
        pos: &mut usize,
        msg: &mut Message,
    ) -> Result<Option<(u32, u32)>, Error> {
        let start = msg.bytes.len() as u32;
        if ins.flags & (flag::UNICODE | flag::BYTES) == 0 {
            match codec::read_ascii(buf, pos, nullable)? {
                AsciiRead::Null => return Ok(None),
                AsciiRead::Empty => {}
                AsciiRead::Chars { start: s, end: e } => {
                    msg.bytes.extend_from_slice(&buf[s..e]);
                    if let Some(last) = msg.bytes.last_mut() {
                        *last &= 0x7f;
                    }
                }
            }
        } else {
            let at = *pos;
            match codec::read_bytes(buf, pos, nullable)? {
                None => return Ok(None),
                Some(b) => {
                    if ins.has(flag::UNICODE) && std::str::from_utf8(b).is_err() {
                        return Err(Error::new(ErrorKind::InvalidUtf8, at));
                    }
                    msg.bytes.extend_from_slice(b);
                }
            }
        }
        Ok(Some((start, msg.bytes.len() as u32 - start)))
    }

    fn push_bytes(msg: &mut Message, field: u32, b: &[u8]) {
        let start = msg.bytes.len() as u32;
        msg.bytes.extend_from_slice(b);
        msg.entries.push(Entry { field, value: Value::Bytes { start, len: b.len() as u32 } });
    }

    fn str_op(
        &mut self,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> Result<(), Error> {
        let program = self.program;
        let field = ins.field;
        let init: &[u8] = if ins.has(flag::HAS_INIT) { &program.strings[ins.a as usize] } else { &[] };
        let slot = ins.slot as usize;
        match ins.code {
            Code::StrNone => {
                if let Some((start, len)) = Self::read_vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                    msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                }
            }
            Code::StrConst => {
                let present = !ins.has(flag::OPT) || take(pmap);
                if present {
                    Self::push_bytes(msg, field, init);
                }
            }
            Code::StrDefault => {
                if take(pmap) {
                    if let Some((start, len)) = Self::read_vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                        msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                    }
                } else if ins.has(flag::HAS_INIT) {
                    Self::push_bytes(msg, field, init);
                }
            }
            Code::StrCopy | Code::StrTail => {
                if take(pmap) {
                    let at = *pos;
                    match Self::read_vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                        None => {
                            if ins.code == Code::StrCopy {
                                self.strs[slot].state = EMPTY;
                            }
                        }
                        Some((start, len)) => {
                            let s = &mut self.strs[slot];
                            if ins.code == Code::StrCopy {
                                s.buf.clear();
                                s.buf.extend_from_slice(msg.slice(start, len));
                                s.state = ASSIGNED;
                                msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                            } else {
                                // Tail: the value replaces the base's last len bytes.
                                if s.state != ASSIGNED {
                                    s.buf.clear();
                                    s.buf.extend_from_slice(init);
                                }
                                let keep = s.buf.len().saturating_sub(len as usize);
                                s.buf.truncate(keep);
                                let tail_start = start as usize;
                                s.buf.extend_from_slice(&msg.bytes[tail_start..tail_start + len as usize]);
                                s.state = ASSIGNED;
                                msg.bytes.truncate(tail_start);
                                let _ = at;
                                Self::push_bytes(msg, field, &self.strs[slot].buf);
                            }
                        }
                    }
                    return Ok(());
                }
                match self.strs[slot].state {
                    ASSIGNED => Self::push_bytes(msg, field, &self.strs[slot].buf),
                    UNDEFINED => {
                        if ins.has(flag::HAS_INIT) {
                            let s = &mut self.strs[slot];
                            s.buf.clear();
                            s.buf.extend_from_slice(init);
                            s.state = ASSIGNED;
                            Self::push_bytes(msg, field, init);
                        } else if ins.has(flag::OPT) {
                            self.strs[slot].state = EMPTY;
                        } else {
                            return Err(Error::new(ErrorKind::NoInitialValue, *pos));
                        }
                    }
                    _ => {
                        if !ins.has(flag::OPT) {
                            return Err(Error::new(ErrorKind::EmptyPrevious, *pos));
                        }
                    }
                }
            }
            Code::StrDelta => {
                let at = *pos;
                let sub = if ins.has(flag::NULLABLE) {
                    match codec::read_i64_nullable(buf, pos)? {
                        None => return Ok(()),
                        Some(s) => s,
                    }
                } else {
                    codec::read_i64(buf, pos)?
                };
                if i32::try_from(sub).is_err() {
                    return Err(Error::new(ErrorKind::IntegerOverflow("int32"), at));
                }
                let Some((start, len)) = Self::read_vector(ins, false, buf, pos, msg)? else {
                    return Ok(());
                };
                let s = &mut self.strs[slot];
                match s.state {
                    ASSIGNED => {}
                    UNDEFINED => {
                        s.buf.clear();
                        s.buf.extend_from_slice(init);
                    }
                    _ => return Err(Error::new(ErrorKind::EmptyPrevious, at)),
                }
                let diff_start = start as usize;
                let diff_end = diff_start + len as usize;
                if sub >= 0 {
                    let n = sub as usize;
                    if n > s.buf.len() {
                        return Err(Error::new(ErrorKind::SubtractionTooLong, at));
                    }
                    let keep = s.buf.len() - n;
                    s.buf.truncate(keep);
                    s.buf.extend_from_slice(&msg.bytes[diff_start..diff_end]);
                } else {
                    let n = (-(sub + 1)) as usize;
                    if n > s.buf.len() {
                        return Err(Error::new(ErrorKind::SubtractionTooLong, at));
                    }
                    let diff = msg.bytes[diff_start..diff_end].to_vec();
                    s.buf.splice(0..n, diff);
                }
                s.state = ASSIGNED;
                if ins.has(flag::UNICODE) && std::str::from_utf8(&s.buf).is_err() {
                    return Err(Error::new(ErrorKind::InvalidUtf8, at));
                }
                msg.bytes.truncate(diff_start);
                Self::push_bytes(msg, field, &self.strs[slot].buf);
            }
            _ => {}
        }
        Ok(())
    }

    #[inline(always)]
    fn exec(
        &mut self,
        i: usize,
        ins: Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> Result<usize, Error> {
        match ins.code {
            Code::IntNone | Code::IntConst | Code::IntDefault | Code::IntCopy | Code::IntIncr | Code::IntDelta => {
                if let Some(v) = self.int_op(&ins, buf, pos, pmap)? {
                    msg.entries.push(Entry { field: ins.field, value: int_value(&ins, v) });
                }
                Ok(i + 1)
            }
            Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta => {
                if let Some(d) = self.dec_op(&ins, buf, pos, pmap)? {
                    msg.entries.push(Entry { field: ins.field, value: Value::Decimal(d) });
                }
                Ok(i + 1)
            }
            Code::DecSplit => {
                let program = self.program;
                let e_ins = program.insns[i + 1];
                let m_ins = program.insns[i + 2];
                if let Some(e) = self.int_op(&e_ins, buf, pos, pmap)? {
                    if !(-63..=63).contains(&e) {
                        return Err(Error::new(ErrorKind::ExponentRange, *pos));
                    }
                    let m = self
                        .int_op(&m_ins, buf, pos, pmap)?
                        .ok_or_else(|| Error::new(ErrorKind::NoInitialValue, *pos))?;
                    msg.entries.push(Entry {
                        field: ins.field,
                        value: Value::Decimal(Decimal { exponent: e as i32, mantissa: m }),
                    });
                }
                Ok(i + 3)
            }
            Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                self.str_op(&ins, buf, pos, pmap, msg)?;
                Ok(i + 1)
            }
            Code::Seq => {
                let program = self.program;
                let len_ins = program.insns[i + 1];
                let at = *pos;
                let Some(len) = self.int_op(&len_ins, buf, pos, pmap)? else {
                    return Ok(ins.a as usize);
                };
                let len = len as u64;
                let remaining = (buf.len() - *pos) as u64;
                if len > remaining.max(65_536) {
                    return Err(Error::new(ErrorKind::LimitExceeded("sequence length beyond the bytes left"), at));
                }
                self.enter(*pos)?;
                let si = msg.entries.len();
                msg.entries.push(Entry { field: ins.field, value: Value::Sequence { len: len as u32, end: 0 } });
                for _ in 0..len {
                    let ei = msg.entries.len();
                    msg.entries.push(Entry { field: ins.field, value: Value::Element { end: 0 } });
                    if ins.has(flag::PMAP) {
                        let mut inner = read_pmap(buf, pos, msg)?;
                        self.run(i + 2, ins.a as usize, buf, pos, &mut inner, msg)?;
                    } else {
                        self.run(i + 2, ins.a as usize, buf, pos, pmap, msg)?;
                    }
                    let end = msg.entries.len() as u32;
                    msg.entries[ei].value = Value::Element { end };
                }
                let end = msg.entries.len() as u32;
                msg.entries[si].value = Value::Sequence { len: len as u32, end };
                self.depth -= 1;
                Ok(ins.a as usize)
            }
            Code::Group => {
                if ins.has(flag::OPT) && !take(pmap) {
                    return Ok(ins.a as usize);
                }
                self.enter(*pos)?;
                let gi = msg.entries.len();
                msg.entries.push(Entry { field: ins.field, value: Value::Group { end: 0 } });
                if ins.has(flag::PMAP) {
                    let mut inner = read_pmap(buf, pos, msg)?;
                    self.run(i + 1, ins.a as usize, buf, pos, &mut inner, msg)?;
                } else {
                    self.run(i + 1, ins.a as usize, buf, pos, pmap, msg)?;
                }
                let end = msg.entries.len() as u32;
                msg.entries[gi].value = Value::Group { end };
                self.depth -= 1;
                Ok(ins.a as usize)
            }
            Code::DynRef => {
                self.enter(*pos)?;
                let mut inner = read_pmap(buf, pos, msg)?;
                let t = self.template_id(buf, pos, &mut inner)?;
                let info = &self.program.templates[t as usize];
                let ti = msg.entries.len();
                msg.entries.push(Entry { field: ins.field, value: Value::Template { template: t, end: 0 } });
                self.run(info.start as usize, info.end as usize, buf, pos, &mut inner, msg)?;
                let end = msg.entries.len() as u32;
                msg.entries[ti].value = Value::Template { template: t, end };
                self.depth -= 1;
                Ok(i + 1)
            }
        }
    }

    fn enter(&mut self, at: usize) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::new(ErrorKind::LimitExceeded("nesting deeper than 32"), at));
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

//! The encoder: a [`Message`] record back to FAST bytes, as the exchange would write them.
//!
//! It walks the same [`Program`] as the decoder with its own dictionary state and makes the
//! choices an exchange's encoder makes: a copy, increment, default or tail field is left out
//! of the stream (its presence map bit cleared) whenever the decoder would reconstruct the
//! same value; integers, presence maps and strings take the fewest bytes. Decode then encode
//! of a stream written this way gives back the identical bytes.

use crate::codec::{self, Pmap};
use crate::decoder::{
    delta_base, fits, reset_dictionary, widen, Entry, IntSlot, Message, StrSlot, Value, ASSIGNED, EMPTY, UNDEFINED,
};
use crate::error::{Error, ErrorKind};
use crate::program::{flag, Code, Insn, Program};
use crate::value::Decimal;

#[derive(Debug, Clone, Copy, Default)]
struct Bits {
    v: Pmap,
    n: u32,
    /// Replaying a received presence map: its bits and byte count.
    script: Option<(Pmap, u8)>,
}

impl Bits {
    /// Whether to send a value the decoder could also infer (`can_omit`) or must be sent.
    #[inline]
    fn choose(&self, can_omit: bool, at: usize, field: u32) -> Result<bool, Error> {
        match self.script {
            None => Ok(!can_omit),
            Some((p, _)) => {
                let bit = self.n < 128 && (p >> (127 - self.n)) & 1 == 1;
                if !bit && !can_omit {
                    return Err(mismatch("received presence map leaves out a value that changed", at, field));
                }
                Ok(bit)
            }
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        codec::write_pmap(out, self.v, self.n);
        // Replay: as many bytes as were received (trailing zero bytes included).
        if let Some((_, nbytes)) = self.script {
            let written = out.len() - start;
            if written < nbytes as usize {
                let last = out.len() - 1;
                out[last] &= 0x7f;
                out.resize(start + nbytes as usize, 0);
                let last = out.len() - 1;
                out[last] |= 0x80;
            }
        }
    }

    #[inline]
    fn push(&mut self, bit: bool, at: usize) -> Result<(), Error> {
        if self.n >= 126 {
            return Err(Error::new(ErrorKind::PresenceMapTooLong, at));
        }
        if bit {
            self.v |= 1u128 << (127 - self.n);
        }
        self.n += 1;
        Ok(())
    }
}

fn mismatch(what: &'static str, at: usize, field: u32) -> Error {
    Error { kind: ErrorKind::RecordMismatch(what), offset: at, field }
}

/// When the encoder sends a message's template id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateIdPolicy {
    /// In every message (mFAST, OpenFAST, most exchanges).
    Always,
    /// Only when it differs from the previous message's (the copy operator's rule).
    WhenChanged,
}

/// Encodes messages with one dictionary state.
#[derive(Debug, Clone)]
pub struct Encoder<'p> {
    program: &'p Program,
    ints: Vec<IntSlot>,
    strs: Vec<StrSlot>,
    pool: Vec<Vec<u8>>,
    tmp: Vec<u8>,
    policy: TemplateIdPolicy,
    /// Replaying received presence maps: the next one to use.
    replay: Option<usize>,
}

fn write_int(ins: &Insn, out: &mut Vec<u8>, v: Option<i64>) -> Result<(), Error> {
    match (v, ins.has(flag::NULLABLE)) {
        (None, true) => {
            out.push(0x80);
            Ok(())
        }
        (None, false) => Err(mismatch("mandatory integer missing", out.len(), ins.field)),
        (Some(v), nullable) => {
            if !fits(ins, widen(ins, v)) {
                return Err(mismatch("integer out of its type's range", out.len(), ins.field));
            }
            match (ins.has(flag::SIGNED), nullable) {
                (false, false) => codec::write_u64(out, v as u64),
                (false, true) => codec::write_u64_nullable(out, Some(v as u64)),
                (true, false) => codec::write_i64(out, v),
                (true, true) => codec::write_i64_nullable(out, Some(v)),
            }
            Ok(())
        }
    }
}

fn write_decimal(ins: &Insn, out: &mut Vec<u8>, d: Option<Decimal>) -> Result<(), Error> {
    match d {
        None if ins.has(flag::NULLABLE) => out.push(0x80),
        None => return Err(mismatch("mandatory decimal missing", out.len(), ins.field)),
        Some(d) => {
            if ins.has(flag::NULLABLE) {
                codec::write_i64_nullable(out, Some(i64::from(d.exponent)));
            } else {
                codec::write_i64(out, i64::from(d.exponent));
            }
            codec::write_i64(out, d.mantissa);
        }
    }
    Ok(())
}

/// True for the one ASCII value FAST cannot send: two NULs. Its bytes would be those of
/// the one-NUL string (0x00 0x80, or 0x00 0x00 0x80 when nullable), which the
/// specification reserves for "\0".
fn unsendable_ascii(ins: &Insn, s: &[u8]) -> bool {
    ins.flags & (flag::UNICODE | flag::BYTES) == 0 && s == [0, 0]
}

fn write_vector(ins: &Insn, out: &mut Vec<u8>, v: Option<&[u8]>, nullable: bool) -> Result<(), Error> {
    if v.is_none() && !nullable {
        return Err(mismatch("mandatory string missing", out.len(), ins.field));
    }
    if ins.flags & (flag::UNICODE | flag::BYTES) == 0 {
        if let Some(s) = v {
            if s.iter().any(|&b| b >= 0x80) {
                return Err(mismatch("ASCII string with a byte >= 0x80", out.len(), ins.field));
            }
            if unsendable_ascii(ins, s) {
                return Err(mismatch("ASCII string of two NULs (FAST has no encoding for it)", out.len(), ins.field));
            }
        }
        codec::write_ascii(out, v, nullable);
    } else {
        codec::write_bytes(out, v, nullable);
    }
    Ok(())
}

impl<'p> Encoder<'p> {
    pub fn new(program: &'p Program) -> Encoder<'p> {
        let (ints, strs) = crate::decoder::new_dictionary(program);
        Encoder {
            program,
            ints,
            strs,
            pool: Vec::new(),
            tmp: Vec::new(),
            policy: TemplateIdPolicy::Always,
            replay: None,
        }
    }

    pub fn set_template_id_policy(&mut self, policy: TemplateIdPolicy) {
        self.policy = policy;
    }

    /// Append the encoding of `msg` with the presence maps it was received with (recorded
    /// by the decoder): a field the sender chose to send although the receiver could infer
    /// it is sent again, so decode then encode gives back the received bytes exactly.
    pub fn encode_as_received(&mut self, msg: &Message, out: &mut Vec<u8>) -> Result<(), Error> {
        self.replay = Some(0);
        let r = self.encode(msg, out);
        self.replay = None;
        r
    }

    fn new_bits(&mut self, msg: &Message, at: usize) -> Result<Bits, Error> {
        let mut b = Bits::default();
        if let Some(k) = self.replay {
            let p = *msg
                .pmaps
                .get(k)
                .ok_or_else(|| mismatch("fewer recorded presence maps than segments", at, u32::MAX))?;
            b.script = Some(p);
            self.replay = Some(k + 1);
        }
        Ok(b)
    }

    /// Reset every dictionary entry to undefined.
    pub fn reset(&mut self) {
        reset_dictionary(&mut self.ints, &mut self.strs);
    }

    /// Append the encoding of `msg` to `out`.
    pub fn encode(&mut self, msg: &Message, out: &mut Vec<u8>) -> Result<(), Error> {
        let t = msg.template;
        let info = self
            .program
            .templates
            .get(t as usize)
            .ok_or_else(|| mismatch("template index out of range", out.len(), u32::MAX))?;
        let mut body = self.pool.pop().unwrap_or_default();
        body.clear();
        let mut bits = self.new_bits(msg, out.len())?;
        self.template_id(t, &mut bits, &mut body)?;
        if info.reset {
            self.reset();
            self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
        }
        let mut k = 0;
        let r = self.run(info.start as usize, info.end as usize, msg, &mut k, &mut bits, &mut body, 0);
        if r.is_ok() && k != msg.entries.len() {
            return Err(mismatch("entries left over after the template's last field", out.len(), u32::MAX));
        }
        bits.write(out);
        out.extend_from_slice(&body);
        self.pool.push(body);
        r
    }

    fn template_id(&mut self, t: u32, bits: &mut Bits, out: &mut Vec<u8>) -> Result<(), Error> {
        let s = self.ints[0];
        let implied = if s.state == ASSIGNED { Some(s.v as u32) } else { self.program.default_template };
        let can_omit = implied == Some(t)
            && (self.replay.is_some()
                || self.policy == TemplateIdPolicy::WhenChanged
                || self.program.templates[t as usize].id.is_none());
        if !bits.choose(can_omit, out.len(), u32::MAX)? {
            bits.push(false, out.len())?;
        } else {
            let id = self.program.templates[t as usize].id.ok_or_else(|| {
                mismatch("a template without an id cannot be named in the stream", out.len(), u32::MAX)
            })?;
            bits.push(true, out.len())?;
            codec::write_u64(out, u64::from(id));
        }
        self.ints[0] = IntSlot { v: i64::from(t), exp: 0, state: ASSIGNED };
        Ok(())
    }

    fn entry(msg: &Message, k: usize, field: u32) -> Option<&Entry> {
        msg.entries.get(k).filter(|e| e.field == field)
    }

    /// The integer operators. `v` is the value to send (`None`: absent).
    fn int_op(&mut self, ins: &Insn, v: Option<i64>, bits: &mut Bits, out: &mut Vec<u8>) -> Result<(), Error> {
        let at = out.len();
        match ins.code {
            Code::IntNone => write_int(ins, out, v),
            Code::IntConst => {
                if let Some(v) = v {
                    if v != ins.init {
                        return Err(mismatch("constant field with another value", at, ins.field));
                    }
                } else if !ins.has(flag::OPT) {
                    return Err(mismatch("mandatory constant missing", at, ins.field));
                }
                if ins.has(flag::OPT) {
                    bits.push(v.is_some(), at)?;
                }
                Ok(())
            }
            Code::IntDefault => {
                let implied = if ins.has(flag::HAS_INIT) { Some(ins.init) } else { None };
                if !bits.choose(v == implied, at, ins.field)? {
                    bits.push(false, at)
                } else {
                    bits.push(true, at)?;
                    write_int(ins, out, v)
                }
            }
            Code::IntCopy | Code::IntIncr => {
                let slot = ins.slot as usize;
                let s = self.ints[slot];
                // What the decoder makes of a cleared bit, and the state it leaves.
                let implied: Option<Option<i64>> = match s.state {
                    ASSIGNED if ins.code == Code::IntCopy => Some(Some(s.v)),
                    ASSIGNED => {
                        let n = widen(ins, s.v) + 1;
                        if fits(ins, n) {
                            Some(Some(n as i64))
                        } else {
                            None
                        }
                    }
                    UNDEFINED if ins.has(flag::HAS_INIT) => Some(Some(ins.init)),
                    UNDEFINED | EMPTY if ins.has(flag::OPT) => Some(None),
                    _ => None,
                };
                if !bits.choose(implied == Some(v), at, ins.field)? {
                    bits.push(false, at)?;
                } else {
                    bits.push(true, at)?;
                    write_int(ins, out, v)?;
                }
                self.ints[slot] = match v {
                    Some(v) => IntSlot { v, exp: 0, state: ASSIGNED },
                    None => IntSlot { v: 0, exp: 0, state: EMPTY },
                };
                Ok(())
            }
            Code::IntDelta => {
                let Some(v) = v else {
                    return write_int(ins, out, None);
                };
                let slot = ins.slot as usize;
                let Some(base) = delta_base(ins, self.ints[slot]) else {
                    return Err(Error { kind: ErrorKind::EmptyPrevious, offset: at, field: ins.field });
                };
                let d = i64::try_from(widen(ins, v) - base)
                    .map_err(|_| mismatch("delta does not fit 64 bits", at, ins.field))?;
                if ins.has(flag::NULLABLE) {
                    codec::write_i64_nullable(out, Some(d));
                } else {
                    codec::write_i64(out, d);
                }
                self.ints[slot] = IntSlot { v, exp: 0, state: ASSIGNED };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn dec_op(&mut self, ins: &Insn, v: Option<Decimal>, bits: &mut Bits, out: &mut Vec<u8>) -> Result<(), Error> {
        let at = out.len();
        let init =
            if ins.has(flag::HAS_INIT) { Some(Decimal { exponent: ins.a as i32, mantissa: ins.init }) } else { None };
        match ins.code {
            Code::DecNone => write_decimal(ins, out, v),
            Code::DecConst => {
                if v.is_some() && v != init {
                    return Err(mismatch("constant decimal with another value", at, ins.field));
                }
                if ins.has(flag::OPT) {
                    bits.push(v.is_some(), at)?;
                } else if v.is_none() {
                    return Err(mismatch("mandatory constant missing", at, ins.field));
                }
                Ok(())
            }
            Code::DecDefault => {
                if !bits.choose(v == init, at, ins.field)? {
                    bits.push(false, at)
                } else {
                    bits.push(true, at)?;
                    write_decimal(ins, out, v)
                }
            }
            Code::DecCopy => {
                let slot = ins.slot as usize;
                let s = self.ints[slot];
                let implied: Option<Option<Decimal>> = match s.state {
                    ASSIGNED => Some(Some(Decimal { exponent: s.exp, mantissa: s.v })),
                    UNDEFINED if init.is_some() => Some(init),
                    UNDEFINED | EMPTY if ins.has(flag::OPT) => Some(None),
                    _ => None,
                };
                if !bits.choose(implied == Some(v), at, ins.field)? {
                    bits.push(false, at)?;
                } else {
                    bits.push(true, at)?;
                    write_decimal(ins, out, v)?;
                }
                self.ints[slot] = match v {
                    Some(d) => IntSlot { v: d.mantissa, exp: d.exponent, state: ASSIGNED },
                    None => IntSlot { v: 0, exp: 0, state: EMPTY },
                };
                Ok(())
            }
            Code::DecDelta => {
                let Some(d) = v else {
                    return write_decimal(ins, out, None);
                };
                let slot = ins.slot as usize;
                let s = self.ints[slot];
                let base = match s.state {
                    ASSIGNED => Decimal { exponent: s.exp, mantissa: s.v },
                    UNDEFINED => init.unwrap_or_default(),
                    _ => return Err(Error { kind: ErrorKind::EmptyPrevious, offset: at, field: ins.field }),
                };
                let ed = i64::from(d.exponent) - i64::from(base.exponent);
                let md = d
                    .mantissa
                    .checked_sub(base.mantissa)
                    .ok_or_else(|| mismatch("mantissa delta does not fit 64 bits", at, ins.field))?;
                if ins.has(flag::NULLABLE) {
                    codec::write_i64_nullable(out, Some(ed));
                } else {
                    codec::write_i64(out, ed);
                }
                codec::write_i64(out, md);
                self.ints[slot] = IntSlot { v: d.mantissa, exp: d.exponent, state: ASSIGNED };
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn str_op(&mut self, ins: &Insn, v: Option<&[u8]>, bits: &mut Bits, out: &mut Vec<u8>) -> Result<(), Error> {
        let at = out.len();
        let program = self.program;
        let init: Option<&[u8]> = if ins.has(flag::HAS_INIT) { Some(&program.strings[ins.a as usize]) } else { None };
        let slot = ins.slot as usize;
        match ins.code {
            Code::StrNone => write_vector(ins, out, v, ins.has(flag::NULLABLE)),
            Code::StrConst => {
                if v.is_some() && v != init {
                    return Err(mismatch("constant string with another value", at, ins.field));
                }
                if ins.has(flag::OPT) {
                    bits.push(v.is_some(), at)?;
                } else if v.is_none() {
                    return Err(mismatch("mandatory constant missing", at, ins.field));
                }
                Ok(())
            }
            Code::StrDefault => {
                if !bits.choose(v == init, at, ins.field)? {
                    bits.push(false, at)
                } else {
                    bits.push(true, at)?;
                    write_vector(ins, out, v, ins.has(flag::NULLABLE))
                }
            }
            Code::StrCopy | Code::StrTail => {
                let s = &self.strs[slot];
                let implied: Option<Option<&[u8]>> = match s.state {
                    ASSIGNED => Some(Some(&s.buf)),
                    UNDEFINED if init.is_some() => Some(init),
                    UNDEFINED | EMPTY if ins.has(flag::OPT) => Some(None),
                    _ => None,
                };
                if !bits.choose(implied == Some(v), at, ins.field)? {
                    bits.push(false, at)?;
                    let s = &mut self.strs[slot];
                    match v {
                        Some(v) => {
                            if s.state != ASSIGNED {
                                s.buf.clear();
                                s.buf.extend_from_slice(v);
                            }
                            s.state = ASSIGNED;
                        }
                        None => s.state = EMPTY,
                    }
                    return Ok(());
                }
                bits.push(true, at)?;
                if ins.code == Code::StrCopy {
                    write_vector(ins, out, v, ins.has(flag::NULLABLE))?;
                    let s = &mut self.strs[slot];
                    match v {
                        Some(v) => {
                            s.buf.clear();
                            s.buf.extend_from_slice(v);
                            s.state = ASSIGNED;
                        }
                        None => s.state = EMPTY,
                    }
                    return Ok(());
                }
                // Tail: the value is the base with its last bytes replaced.
                let Some(v) = v else {
                    return write_vector(ins, out, None, ins.has(flag::NULLABLE));
                };
                let s = &mut self.strs[slot];
                let base: &[u8] = if s.state == ASSIGNED { &s.buf } else { init.unwrap_or(&[]) };
                let tail: &[u8] = if v.len() == base.len() {
                    let mut p = v.iter().zip(base).take_while(|(a, b)| a == b).count();
                    // A tail of two NULs cannot be sent: one byte more of the value can.
                    if p > 0 && unsendable_ascii(ins, &v[p..]) {
                        p -= 1;
                    }
                    &v[p..]
                } else if v.len() > base.len() {
                    v
                } else {
                    return Err(mismatch("a value shorter than its base cannot be sent as a tail", at, ins.field));
                };
                self.tmp.clear();
                self.tmp.extend_from_slice(tail);
                s.buf.clear();
                s.buf.extend_from_slice(v);
                s.state = ASSIGNED;
                let tmp = std::mem::take(&mut self.tmp);
                let r = write_vector(ins, out, Some(&tmp), ins.has(flag::NULLABLE));
                self.tmp = tmp;
                r
            }
            Code::StrDelta => {
                let Some(v) = v else {
                    if !ins.has(flag::NULLABLE) {
                        return Err(mismatch("mandatory string missing", at, ins.field));
                    }
                    out.push(0x80);
                    return Ok(());
                };
                let s = &mut self.strs[slot];
                let base: &[u8] = match s.state {
                    ASSIGNED => &s.buf,
                    UNDEFINED => init.unwrap_or(&[]),
                    _ => return Err(Error { kind: ErrorKind::EmptyPrevious, offset: at, field: ins.field }),
                };
                let mut prefix = v.iter().zip(base).take_while(|(a, b)| a == b).count();
                let mut suffix = v.iter().rev().zip(base.iter().rev()).take_while(|(a, b)| a == b).count();
                // A difference of two NULs cannot be sent: one byte more of the value can.
                if prefix > 0 && unsendable_ascii(ins, &v[prefix..]) {
                    prefix -= 1;
                }
                if suffix > 0 && unsendable_ascii(ins, &v[..v.len() - suffix]) {
                    suffix -= 1;
                }
                let (sub, diff): (i64, &[u8]) = if suffix > prefix {
                    (-((base.len() - suffix) as i64) - 1, &v[..v.len() - suffix])
                } else {
                    ((base.len() - prefix) as i64, &v[prefix..])
                };
                if ins.has(flag::NULLABLE) {
                    codec::write_i64_nullable(out, Some(sub));
                } else {
                    codec::write_i64(out, sub);
                }
                self.tmp.clear();
                self.tmp.extend_from_slice(diff);
                s.buf.clear();
                s.buf.extend_from_slice(v);
                s.state = ASSIGNED;
                let tmp = std::mem::take(&mut self.tmp);
                let r = write_vector(ins, out, Some(&tmp), false);
                self.tmp = tmp;
                r
            }
            _ => Ok(()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        start: usize,
        end: usize,
        msg: &Message,
        k: &mut usize,
        bits: &mut Bits,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), Error> {
        if depth > crate::decoder::MAX_DEPTH {
            return Err(Error::new(ErrorKind::LimitExceeded("nesting deeper than 32"), out.len()));
        }
        let program = self.program;
        let mut i = start;
        while i < end {
            let ins = program.insns[i];
            let e = Self::entry(msg, *k, ins.field).copied();
            match ins.code {
                Code::IntNone | Code::IntConst | Code::IntDefault | Code::IntCopy | Code::IntIncr | Code::IntDelta => {
                    let v = match e.map(|e| e.value) {
                        None => None,
                        Some(Value::UInt(v)) if !ins.has(flag::SIGNED) => Some(v as i64),
                        Some(Value::Int(v)) if ins.has(flag::SIGNED) => Some(v),
                        Some(_) => return Err(mismatch("value of another type", out.len(), ins.field)),
                    };
                    *k += usize::from(e.is_some());
                    self.int_op(&ins, v, bits, out)?;
                    i += 1;
                }
                Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta | Code::DecSplit => {
                    let v = match e.map(|e| e.value) {
                        None => None,
                        Some(Value::Decimal(d)) => Some(d),
                        Some(_) => return Err(mismatch("value of another type", out.len(), ins.field)),
                    };
                    *k += usize::from(e.is_some());
                    if ins.code == Code::DecSplit {
                        let (ei, mi) = (program.insns[i + 1], program.insns[i + 2]);
                        self.int_op(&ei, v.map(|d| i64::from(d.exponent)), bits, out)?;
                        if let Some(d) = v {
                            self.int_op(&mi, Some(d.mantissa), bits, out)?;
                        }
                        i += 3;
                    } else {
                        self.dec_op(&ins, v, bits, out)?;
                        i += 1;
                    }
                }
                Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                    let v = match e.map(|e| e.value) {
                        None => None,
                        Some(v @ (Value::Bytes { .. } | Value::Static { .. })) => msg.bytes_of(program, &v),
                        Some(_) => return Err(mismatch("value of another type", out.len(), ins.field)),
                    };
                    *k += usize::from(e.is_some());
                    self.str_op(&ins, v, bits, out)?;
                    i += 1;
                }
                Code::Seq => {
                    let len_ins = program.insns[i + 1];
                    let len = match e.map(|e| e.value) {
                        None => None,
                        Some(Value::Sequence { len, .. }) => Some(len),
                        Some(_) => return Err(mismatch("expected a sequence", out.len(), ins.field)),
                    };
                    self.int_op(&len_ins, len.map(i64::from), bits, out)?;
                    if let Some(len) = len {
                        *k += 1;
                        for _ in 0..len {
                            match msg.entries.get(*k) {
                                Some(Entry { value: Value::Element { .. }, field }) if *field == ins.field => *k += 1,
                                _ => return Err(mismatch("sequence element missing", out.len(), ins.field)),
                            }
                            self.segment(i + 2, ins.a as usize, ins.has(flag::PMAP), msg, k, bits, out, depth + 1)?;
                        }
                    }
                    i = ins.a as usize;
                }
                Code::Group => {
                    let present = matches!(e.map(|e| e.value), Some(Value::Group { .. }));
                    if ins.has(flag::OPT) {
                        bits.push(present, out.len())?;
                    } else if !present {
                        return Err(mismatch("mandatory group missing", out.len(), ins.field));
                    }
                    if present {
                        *k += 1;
                        self.segment(i + 1, ins.a as usize, ins.has(flag::PMAP), msg, k, bits, out, depth + 1)?;
                    }
                    i = ins.a as usize;
                }
                Code::IntStore
                | Code::IntLoad
                | Code::IntLoadIncr
                | Code::DecStore
                | Code::DecLoad
                | Code::StrStore
                | Code::StrLoad
                | Code::Consts => {
                    // Resolved forms live only in specialised segments, which the encoder
                    // never walks: it encodes from the templates' generic instructions.
                    return Err(mismatch("specialised instruction in a template body", out.len(), ins.field));
                }
                Code::DynRef => {
                    let Some(Value::Template { template, .. }) = e.map(|e| e.value) else {
                        return Err(mismatch("expected a dynamic template reference", out.len(), ins.field));
                    };
                    *k += 1;
                    let info = program
                        .templates
                        .get(template as usize)
                        .ok_or_else(|| mismatch("template index out of range", out.len(), ins.field))?;
                    let mut body = self.pool.pop().unwrap_or_default();
                    body.clear();
                    let mut inner = self.new_bits(msg, out.len())?;
                    let r = self.template_id(template, &mut inner, &mut body).and_then(|_| {
                        self.run(info.start as usize, info.end as usize, msg, k, &mut inner, &mut body, depth + 1)
                    });
                    inner.write(out);
                    out.extend_from_slice(&body);
                    self.pool.push(body);
                    r?;
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// A sequence element or group body: its own presence map when it needs one.
    #[allow(clippy::too_many_arguments)]
    fn segment(
        &mut self,
        start: usize,
        end: usize,
        pmap: bool,
        msg: &Message,
        k: &mut usize,
        bits: &mut Bits,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), Error> {
        if !pmap {
            return self.run(start, end, msg, k, bits, out, depth);
        }
        let mut body = self.pool.pop().unwrap_or_default();
        body.clear();
        let mut inner = self.new_bits(msg, out.len())?;
        let r = self.run(start, end, msg, k, &mut inner, &mut body, depth);
        inner.write(out);
        out.extend_from_slice(&body);
        self.pool.push(body);
        r
    }
}

//! Integer and decimal fields: the stop-bit reads, their operators (copy, increment, delta,
//! default, constant, tail) on the integer dictionary, and the range checks of each type.

use super::*;
use crate::codec::{self, Pmap};
use crate::error::ErrorKind;
use crate::layout::{Entry, IntSlot, Value, ASSIGNED, EMPTY, UNDEFINED};
use crate::program::{flag, int_value, Code, Insn, INT_CODES};
use crate::value::Decimal;

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

/// The base an integer delta applies to, by the previous value's state: the value, the
/// initial value (or 0) when undefined; `None` when empty, an error (D6).
#[inline(always)]
pub(crate) fn delta_base(ins: &Insn, s: IntSlot) -> Option<i128> {
    match s.state {
        ASSIGNED => Some(widen(ins, s.v)),
        UNDEFINED if ins.has(flag::HAS_INIT) => Some(widen(ins, ins.init)),
        UNDEFINED => Some(0),
        _ => None,
    }
}

/// The 7-bit groups of an integer of up to 9 bytes, and its byte count; `None` sends the
/// caller to the exact (slow) reader, which handles 10-byte values and says what is wrong.
#[inline(always)]
pub(super) fn groups(buf: &[u8], p: &mut usize) -> Option<(u64, u32)> {
    let start = *p;
    let b = *buf.get(start)?;
    if b & 0x80 != 0 {
        *p = start + 1;
        return Some((u64::from(b & 0x7f), 1));
    }
    let mut v = u64::from(b);
    let mut i = start + 1;
    loop {
        let b = *buf.get(i)?;
        i += 1;
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 != 0 {
            *p = i;
            return Some((v, (i - start) as u32));
        }
        if i - start == 9 {
            return None;
        }
    }
}

/// The value of `n` 7-bit groups `v` as a field of its encoding: sign-extended when
/// `signed`, NULL (`None`) and the bias taken off when `nullable`.
#[inline(always)]
pub(super) fn shape(v: u64, n: u32, signed: bool, nullable: bool) -> Option<i64> {
    if signed {
        let shift = 64 - 7 * n;
        let v = ((v << shift) as i64) >> shift;
        match v {
            0 if nullable => None,
            v if nullable && v > 0 => Some(v - 1),
            v => Some(v),
        }
    } else if nullable {
        v.checked_sub(1).map(|v| v as i64)
    } else {
        Some(v as i64)
    }
}

/// `v + d` in an integer type (`S` signed, `W` 32-bit), `None` when it leaves the type: the
/// arithmetic of increments and deltas, the engine's and the kernels'.
#[inline(always)]
pub(super) fn add_in_type<const S: bool, const W: bool>(v: i64, d: i64) -> Option<i64> {
    if W {
        v.checked_add(d).filter(|&v| if S { i32::try_from(v).is_ok() } else { u32::try_from(v).is_ok() })
    } else if S {
        v.checked_add(d)
    } else {
        (v as u64).checked_add_signed(d).map(|v| v as i64)
    }
}

impl<'p> Decoder<'p> {
    /// The exact reader for what the fast path declined: 10-byte values and errors.
    #[cold]
    #[inline(never)]
    pub(super) fn int_slow(&mut self, ins: &Insn, nullable: bool, buf: &[u8], pos: usize) -> R<(Option<i64>, usize)> {
        let mut pos = pos;
        let r = match (ins.has(flag::SIGNED), nullable) {
            (false, false) => codec::read_u64(buf, &mut pos).map(|v| Some(v as i64)),
            (false, true) => codec::read_u64_nullable(buf, &mut pos).map(|v| v.map(|v| v as i64)),
            (true, false) => codec::read_i64(buf, &mut pos).map(Some),
            (true, true) => codec::read_i64_nullable(buf, &mut pos),
        };
        match r {
            Ok(v) => Ok((v, pos)),
            Err(e) => Err(self.fail(e.kind, e.offset)),
        }
    }

    /// Read a field's integer in its encoding (nullable or not, signed or not), range-checked.
    #[inline(always)]
    pub(super) fn int(&mut self, ins: &Insn, nullable: bool, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
        let at = *pos;
        // Its own copy of `shape`'s body, with the flags read here: calling `shape` measured
        // slower on the generic program (`tickplant fast bench`; docs/perf-log/fast.md).
        let v = match groups(buf, pos) {
            Some((v, n)) => {
                if ins.has(flag::SIGNED) {
                    let shift = 64 - 7 * n;
                    let v = ((v << shift) as i64) >> shift;
                    if nullable {
                        match v {
                            0 => None,
                            v if v > 0 => Some(v - 1),
                            v => Some(v),
                        }
                    } else {
                        Some(v)
                    }
                } else if nullable {
                    v.checked_sub(1).map(|v| v as i64)
                } else {
                    Some(v as i64)
                }
            }
            None => {
                let (v, q) = self.int_slow(ins, nullable, buf, *pos)?;
                *pos = q;
                v
            }
        };
        if ins.has(flag::W32) {
            if let Some(v) = v {
                if !fits(ins, widen(ins, v)) {
                    let ty = if ins.has(flag::SIGNED) { "int32" } else { "uInt32" };
                    return Err(self.fail(ErrorKind::IntegerOverflow(ty), at));
                }
            }
        }
        Ok(v)
    }

    /// A signed integer as a delta or exponent is sent (nullable or not), no range check.
    #[inline(always)]
    pub(super) fn signed(&mut self, nullable: bool, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
        self.int(&SIGNED_64, nullable, buf, pos)
    }

    /// Store a value read for copy or increment; `None` leaves the entry empty.
    #[inline(always)]
    pub(super) fn store(&mut self, slot: u32, v: Option<i64>) {
        self.ints[slot as usize] = match v {
            Some(v) => IntSlot { v, exp: 0, state: ASSIGNED },
            None => IntSlot { v: 0, exp: 0, state: EMPTY },
        };
    }

    /// Copy or increment with no value in the stream: the previous value's three states.
    #[inline(always)]
    pub(super) fn load(&mut self, ins: &Insn, incr: bool, at: usize) -> R<Option<i64>> {
        let slot = ins.slot as usize;
        let s = self.ints[slot];
        if s.state == ASSIGNED {
            if !incr {
                return Ok(Some(s.v));
            }
            let next = widen(ins, s.v) + 1;
            if !fits(ins, next) {
                return Err(self.fail(ErrorKind::DeltaOverflow, at));
            }
            self.ints[slot].v = next as i64;
            return Ok(Some(next as i64));
        }
        self.load_unassigned(ins, s.state, at)
    }

    #[inline(never)]
    pub(super) fn load_unassigned(&mut self, ins: &Insn, state: u8, at: usize) -> R<Option<i64>> {
        let slot = ins.slot as usize;
        if state == UNDEFINED {
            if ins.has(flag::HAS_INIT) {
                self.ints[slot] = IntSlot { v: ins.init, exp: 0, state: ASSIGNED };
                return Ok(Some(ins.init));
            }
            if ins.has(flag::OPT) {
                self.ints[slot].state = EMPTY;
                return Ok(None);
            }
            return Err(self.fail(ErrorKind::NoInitialValue, at));
        }
        if ins.has(flag::OPT) {
            Ok(None)
        } else {
            Err(self.fail(ErrorKind::EmptyPrevious, at))
        }
    }

    #[inline(always)]
    pub(super) fn delta(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
        let at = *pos;
        let Some(d) = self.signed(ins.has(flag::NULLABLE), buf, pos)? else {
            return Ok(None);
        };
        let slot = ins.slot as usize;
        let Some(base) = delta_base(ins, self.ints[slot]) else {
            return Err(self.fail(ErrorKind::EmptyPrevious, at));
        };
        let v = base + i128::from(d);
        if !fits(ins, v) {
            return Err(self.fail(ErrorKind::DeltaOverflow, at));
        }
        self.ints[slot] = IntSlot { v: v as i64, exp: 0, state: ASSIGNED };
        Ok(Some(v as i64))
    }

    /// [`Decoder::delta`] with the type fixed at compile time: the delta is read as a
    /// signed integer (nullable when `N`), added to the previous value, and range-checked for
    /// the field's type (`S` signed, `W` 32-bit).
    #[inline(always)]
    pub(super) fn delta_t<const S: bool, const N: bool, const W: bool>(
        &mut self,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
    ) -> R<Option<i64>> {
        let at = *pos;
        let Some(d) = self.int_t::<true, N, false>(&SIGNED_64, buf, pos)? else {
            return Ok(None);
        };
        let slot = ins.slot as usize;
        let s = self.ints[slot];
        if s.state != ASSIGNED {
            // Undefined or empty previous value: the general rules.
            *pos = at;
            return self.delta(ins, buf, pos);
        }
        let Some(v) = add_in_type::<S, W>(s.v, d) else {
            return Err(self.fail(ErrorKind::DeltaOverflow, at));
        };
        self.ints[slot].v = v;
        Ok(Some(v))
    }

    /// [`Decoder::int`] with the type fixed at compile time. (`int` keeps its own body: a
    /// run-time dispatch to this one measured 10% slower on the mFAST corpus.)
    #[inline(always)]
    pub(super) fn int_t<const S: bool, const N: bool, const W: bool>(
        &mut self,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
    ) -> R<Option<i64>> {
        let at = *pos;
        let v = match groups(buf, pos) {
            Some((v, n)) => shape(v, n, S, N),
            None => {
                let (v, q) = self.int_slow(ins, N, buf, *pos)?;
                *pos = q;
                v
            }
        };
        if W {
            if let Some(v) = v {
                let ok = if S { i32::try_from(v).is_ok() } else { u32::try_from(v as u64).is_ok() };
                if !ok {
                    return Err(self.fail(ErrorKind::IntegerOverflow(if S { "int32" } else { "uInt32" }), at));
                }
            }
        }
        Ok(v)
    }

    /// One integer instruction with its operator (`C`, an index of [`INT_CODES`]) and type
    /// fixed: the arms of the engine's match.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn int_typed<const C: u8, const S: bool, const N: bool, const W: bool>(
        &mut self,
        i: usize,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> R<usize> {
        let code = INT_CODES[C as usize];
        let v = match code {
            Code::IntNone => self.int_t::<S, N, W>(ins, buf, pos)?,
            Code::IntConst => {
                if !ins.has(flag::OPT) || take(pmap) {
                    Some(ins.init)
                } else {
                    None
                }
            }
            Code::IntDefault => {
                if take(pmap) {
                    self.int_t::<S, N, W>(ins, buf, pos)?
                } else if ins.has(flag::HAS_INIT) {
                    Some(ins.init)
                } else {
                    None
                }
            }
            Code::IntCopy | Code::IntIncr | Code::IntStore | Code::IntLoad | Code::IntLoadIncr => {
                let present = match code {
                    Code::IntStore => true,
                    Code::IntLoad | Code::IntLoadIncr => false,
                    _ => take(pmap),
                };
                if present {
                    let v = self.int_t::<S, N, W>(ins, buf, pos)?;
                    self.store(ins.slot, v);
                    v
                } else {
                    let slot = ins.slot as usize;
                    let s = self.ints[slot];
                    let incr = matches!(code, Code::IntIncr | Code::IntLoadIncr);
                    if s.state != ASSIGNED {
                        self.load(ins, incr, *pos)?
                    } else if !incr {
                        Some(s.v)
                    } else {
                        // Increment, with the type's range fixed at compile time.
                        let Some(next) = add_in_type::<S, W>(s.v, 1) else {
                            return Err(self.fail(ErrorKind::DeltaOverflow, *pos));
                        };
                        self.ints[slot].v = next;
                        Some(next)
                    }
                }
            }
            _ => self.delta_t::<S, N, W>(ins, buf, pos)?,
        };
        if let Some(v) = v.filter(|_| !ins.skip) {
            msg.entries.push(Entry { field: ins.field, value: if S { Value::Int(v) } else { Value::UInt(v as u64) } });
        }
        Ok(i + 1)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn int_arm(
        &mut self,
        code: Code,
        i: usize,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> R<usize> {
        if let Some(v) = self.int_code(code, ins, buf, pos, pmap)?.filter(|_| !ins.skip) {
            msg.entries.push(Entry { field: ins.field, value: int_value(ins, v) });
        }
        Ok(i + 1)
    }

    /// The integer operators (generic and resolved); `None` is absent.
    #[inline(always)]
    pub(super) fn int_op(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> R<Option<i64>> {
        self.int_code(ins.code, ins, buf, pos, pmap)
    }

    /// The integer operators with the operator given apart, so a caller that knows it gets
    /// the match folded away.
    #[inline(always)]
    pub(super) fn int_code(
        &mut self,
        code: Code,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
    ) -> R<Option<i64>> {
        match code {
            Code::IntNone => self.int(ins, ins.has(flag::NULLABLE), buf, pos),
            Code::IntConst => Ok(if !ins.has(flag::OPT) || take(pmap) { Some(ins.init) } else { None }),
            Code::IntDefault => {
                if take(pmap) {
                    self.int(ins, ins.has(flag::NULLABLE), buf, pos)
                } else if ins.has(flag::HAS_INIT) {
                    Ok(Some(ins.init))
                } else {
                    Ok(None)
                }
            }
            Code::IntCopy | Code::IntIncr => {
                if take(pmap) {
                    let v = self.int(ins, ins.has(flag::NULLABLE), buf, pos)?;
                    self.store(ins.slot, v);
                    Ok(v)
                } else {
                    self.load(ins, code == Code::IntIncr, *pos)
                }
            }
            Code::IntStore => {
                let v = self.int(ins, ins.has(flag::NULLABLE), buf, pos)?;
                self.store(ins.slot, v);
                Ok(v)
            }
            Code::IntLoad => self.load(ins, false, *pos),
            Code::IntLoadIncr => self.load(ins, true, *pos),
            Code::IntDelta => self.delta(ins, buf, pos),
            _ => Ok(None),
        }
    }

    /// Read a decimal's exponent and mantissa as a pair (nullable exponent when optional).
    #[inline(always)]
    pub(super) fn decimal(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize) -> R<Option<Decimal>> {
        let at = *pos;
        let Some(e) = self.signed(ins.has(flag::NULLABLE), buf, pos)? else {
            return Ok(None);
        };
        if !(-63..=63).contains(&e) {
            return Err(self.fail(ErrorKind::ExponentRange, at));
        }
        let m = self.signed(false, buf, pos)?.unwrap_or(0);
        Ok(Some(Decimal { exponent: e as i32, mantissa: m }))
    }

    #[inline(never)]
    pub(super) fn dec_op(&mut self, ins: &Insn, bit: bool, buf: &[u8], p: usize) -> R<(Option<Decimal>, usize)> {
        let mut p = p;
        let v = self.dec_inner(ins, bit, buf, &mut p)?;
        Ok((v, p))
    }

    #[inline(always)]
    pub(super) fn dec_inner(&mut self, ins: &Insn, bit: bool, buf: &[u8], pos: &mut usize) -> R<Option<Decimal>> {
        let init = Decimal { exponent: ins.a as i32, mantissa: ins.init };
        let slot = ins.slot as usize;
        let present = match ins.code {
            Code::DecNone => return self.decimal(ins, buf, pos),
            Code::DecConst => return Ok(if !ins.has(flag::OPT) || bit { Some(init) } else { None }),
            Code::DecDefault => {
                return if bit {
                    self.decimal(ins, buf, pos)
                } else if ins.has(flag::HAS_INIT) {
                    Ok(Some(init))
                } else {
                    Ok(None)
                };
            }
            Code::DecCopy => bit,
            Code::DecStore => true,
            Code::DecLoad => false,
            Code::DecDelta => {
                let at = *pos;
                let Some(ed) = self.signed(ins.has(flag::NULLABLE), buf, pos)? else {
                    return Ok(None);
                };
                let md = self.signed(false, buf, pos)?.unwrap_or(0);
                let s = self.ints[slot];
                let base = match s.state {
                    ASSIGNED => Decimal { exponent: s.exp, mantissa: s.v },
                    UNDEFINED if ins.has(flag::HAS_INIT) => init,
                    UNDEFINED => Decimal::default(),
                    _ => return Err(self.fail(ErrorKind::EmptyPrevious, at)),
                };
                let e = i64::from(base.exponent) + ed;
                if !(-63..=63).contains(&e) {
                    return Err(self.fail(ErrorKind::ExponentRange, at));
                }
                let Some(m) = base.mantissa.checked_add(md) else {
                    return Err(self.fail(ErrorKind::DeltaOverflow, at));
                };
                self.ints[slot] = IntSlot { v: m, exp: e as i32, state: ASSIGNED };
                return Ok(Some(Decimal { exponent: e as i32, mantissa: m }));
            }
            _ => return Ok(None),
        };
        if present {
            let v = self.decimal(ins, buf, pos)?;
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
                    Err(self.fail(ErrorKind::NoInitialValue, *pos))
                }
            }
            _ => {
                if ins.has(flag::OPT) {
                    Ok(None)
                } else {
                    Err(self.fail(ErrorKind::EmptyPrevious, *pos))
                }
            }
        }
    }
}

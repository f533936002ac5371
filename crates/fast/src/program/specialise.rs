//! Straight-line segments for the hottest (segment, presence map) pairs of a profile, and
//! each one's kernel: the operations and the frame of prebuilt entries the engine and the
//! native code run.

use super::*;
use std::collections::HashMap;

use crate::codec::Pmap;
use crate::layout::{Entry, Value};
use crate::value::Decimal;

/// What a resolved integer operation gives: an instruction to run, a known value, or nothing.
pub(super) enum Resolved {
    Run(Insn),
    Value(i64),
    Absent,
}

/// Builds one specialised segment.
pub(super) struct Resolver<'a> {
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
        // Straight-line segments and kernels write every field: a program with skipped
        // fields runs generic.
        if self.insns.iter().any(|i| i.skip) {
            return 0;
        }
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

    /// The kernel of the specialised instructions `start..end` (sealed): its operations and
    /// its frame, the entries the engine would push with no field NULL. `None` when one of
    /// them is not of a kind the kernel runs (groups, template references, sequences other
    /// than one after at least one operation, which ends the kernel,
    /// unicode strings, byte vectors, string deltas and tails, decimals other than a
    /// constant exponent with an int64 delta mantissa).
    pub(super) fn kernel_of(&self, start: usize, end: usize) -> Option<(Vec<KOp>, Vec<Entry>)> {
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
}

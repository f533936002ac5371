//! Specialised segments run as kernels: a frame of prebuilt entries copied, then a
//! straight run of operations with their kinds fixed (or the native code's run, and the
//! decoder's finishing of what it declined), and a sequence's element loop.

use super::*;
use crate::layout::{Entry, IntSlot, StrSlot, Value, ASSIGNED, EMPTY, HOLE, UNDEFINED};
use crate::native::{KernelRun, NativeKernels, SeqRun, SeqStop};
use crate::program::{kop, KOp, Kernel};
use crate::value::Decimal;

/// Push a run of prebuilt entries. Runs are short (one to four entries): a push loop beats
/// a memcpy call, and the usual single entry goes without the loop.
#[inline(always)]
pub(super) fn push_consts(msg: &mut Message, run: &[Entry]) {
    if let [e] = run {
        msg.entries.push(*e);
    } else {
        for e in run {
            msg.entries.push(*e);
        }
    }
}

/// Take out the entries marked [`HOLE`] from `base` on, keeping the order of the rest.
#[cold]
pub(super) fn take_holes(entries: &mut Vec<Entry>, base: usize) {
    let mut w = base;
    for r in base..entries.len() {
        if entries[r].field != HOLE {
            entries[w] = entries[r];
            w += 1;
        }
    }
    entries.truncate(w);
}

/// An integer of the type `S` (signed), `N` (nullable), `W` (32-bit) read the fast way, as
/// `Decoder::int_t` reads it: `Some(None)` is NULL; `None` leaves it to the engine (a value
/// of ten bytes, past the end, or out of the type's range).
#[inline(always)]
pub(super) fn k_read<const S: bool, const N: bool, const W: bool>(buf: &[u8], p: &mut usize) -> Option<Option<i64>> {
    let (v, n) = groups(buf, p)?;
    let v = shape(v, n, S, N);
    // Four groups or fewer (28 bits) fit 32 bits, signed or not: only a longer value is
    // checked (most are one byte).
    if W && n > 4 {
        if let Some(v) = v {
            let ok = if S { i32::try_from(v).is_ok() } else { u32::try_from(v as u64).is_ok() };
            if !ok {
                return None;
            }
        }
    }
    Some(v)
}

/// One integer operation of a kernel (family `F`, see [`kop`]; type `S`, `N`, `W`; for a
/// decimal, its mantissa): the value (`Some(None)` for NULL), or `None`, with the cursor and
/// the dictionary untouched, where the engine must take over. The dictionary rules are
/// `Decoder::int_typed`'s, an undefined previous value's included.
#[inline(always)]
pub(super) fn k_int<const F: u8, const S: bool, const N: bool, const W: bool>(
    ints: &mut [IntSlot],
    op: &KOp,
    buf: &[u8],
    p: &mut usize,
) -> Option<Option<i64>> {
    match F {
        kop::INT_READ => {
            let mut q = *p;
            let v = k_read::<S, N, W>(buf, &mut q)?;
            *p = q;
            Some(v)
        }
        kop::INT_STORE => {
            let mut q = *p;
            let v = k_read::<S, N, W>(buf, &mut q)?;
            *ints.get_mut(op.slot as usize)? = match v {
                Some(v) => IntSlot { v, exp: 0, state: ASSIGNED },
                None => IntSlot { v: 0, exp: 0, state: EMPTY },
            };
            *p = q;
            Some(v)
        }
        kop::INT_LOAD | kop::INT_LOAD_INCR => {
            let s = ints.get_mut(op.slot as usize)?;
            if s.state != ASSIGNED {
                // Undefined: the initial value, which the entry then holds; no initial
                // value, or an empty entry: the engine's rules.
                if s.state == UNDEFINED && op.has_init {
                    *s = IntSlot { v: op.init, exp: 0, state: ASSIGNED };
                    return Some(Some(op.init));
                }
                return None;
            }
            if F == kop::INT_LOAD {
                return Some(Some(s.v));
            }
            let next = add_in_type::<S, W>(s.v, 1)?;
            s.v = next;
            Some(Some(next))
        }
        _ => {
            let mut q = *p;
            let Some(d) = k_read::<true, N, false>(buf, &mut q)? else {
                // A NULL delta: absent, the dictionary as it was.
                *p = q;
                return Some(None);
            };
            let s = ints.get_mut(op.slot as usize)?;
            let prev = match s.state {
                ASSIGNED => s.v,
                UNDEFINED if op.has_init => op.init,
                UNDEFINED => 0,
                _ => return None,
            };
            let v = add_in_type::<S, W>(prev, d)?;
            // As the engine leaves it: an assigned entry keeps its exponent.
            *s = if s.state == ASSIGNED { IntSlot { v, ..*s } } else { IntSlot { v, exp: 0, state: ASSIGNED } };
            *p = q;
            Some(Some(v))
        }
    }
}

/// One kernel operation's value, arm by kind (the decoder's kernel loop and
/// [`kernel_op`] both expand it, so that the loop keeps the shape it was tuned in): the value
/// written into entry `$e`, the cursor `$p` moved on, `$holes` set where a NULL marked the
/// entry a hole; `false` where the engine takes over.
macro_rules! kernel_arms {
    ($op:ident, $e:ident, $ints:ident, $strs:ident, $bytes:ident, $buf:ident, $p:ident, $holes:ident) => {
        match $op.kind {
            0 => kernel_int!(0, false, false, false, $ints, $op, $buf, $p, $e, $holes),
            1 => kernel_int!(0, true, false, false, $ints, $op, $buf, $p, $e, $holes),
            2 => kernel_int!(0, false, true, false, $ints, $op, $buf, $p, $e, $holes),
            3 => kernel_int!(0, true, true, false, $ints, $op, $buf, $p, $e, $holes),
            4 => kernel_int!(0, false, false, true, $ints, $op, $buf, $p, $e, $holes),
            5 => kernel_int!(0, true, false, true, $ints, $op, $buf, $p, $e, $holes),
            6 => kernel_int!(0, false, true, true, $ints, $op, $buf, $p, $e, $holes),
            7 => kernel_int!(0, true, true, true, $ints, $op, $buf, $p, $e, $holes),
            8 => kernel_int!(1, false, false, false, $ints, $op, $buf, $p, $e, $holes),
            9 => kernel_int!(1, true, false, false, $ints, $op, $buf, $p, $e, $holes),
            10 => kernel_int!(1, false, true, false, $ints, $op, $buf, $p, $e, $holes),
            11 => kernel_int!(1, true, true, false, $ints, $op, $buf, $p, $e, $holes),
            12 => kernel_int!(1, false, false, true, $ints, $op, $buf, $p, $e, $holes),
            13 => kernel_int!(1, true, false, true, $ints, $op, $buf, $p, $e, $holes),
            14 => kernel_int!(1, false, true, true, $ints, $op, $buf, $p, $e, $holes),
            15 => kernel_int!(1, true, true, true, $ints, $op, $buf, $p, $e, $holes),
            16 => kernel_int!(2, false, false, false, $ints, $op, $buf, $p, $e, $holes),
            17 => kernel_int!(2, true, false, false, $ints, $op, $buf, $p, $e, $holes),
            18 => kernel_int!(2, false, true, false, $ints, $op, $buf, $p, $e, $holes),
            19 => kernel_int!(2, true, true, false, $ints, $op, $buf, $p, $e, $holes),
            20 => kernel_int!(2, false, false, true, $ints, $op, $buf, $p, $e, $holes),
            21 => kernel_int!(2, true, false, true, $ints, $op, $buf, $p, $e, $holes),
            22 => kernel_int!(2, false, true, true, $ints, $op, $buf, $p, $e, $holes),
            23 => kernel_int!(2, true, true, true, $ints, $op, $buf, $p, $e, $holes),
            24 => kernel_int!(3, false, false, false, $ints, $op, $buf, $p, $e, $holes),
            25 => kernel_int!(3, true, false, false, $ints, $op, $buf, $p, $e, $holes),
            26 => kernel_int!(3, false, true, false, $ints, $op, $buf, $p, $e, $holes),
            27 => kernel_int!(3, true, true, false, $ints, $op, $buf, $p, $e, $holes),
            28 => kernel_int!(3, false, false, true, $ints, $op, $buf, $p, $e, $holes),
            29 => kernel_int!(3, true, false, true, $ints, $op, $buf, $p, $e, $holes),
            30 => kernel_int!(3, false, true, true, $ints, $op, $buf, $p, $e, $holes),
            31 => kernel_int!(3, true, true, true, $ints, $op, $buf, $p, $e, $holes),
            32 => kernel_int!(4, false, false, false, $ints, $op, $buf, $p, $e, $holes),
            33 => kernel_int!(4, true, false, false, $ints, $op, $buf, $p, $e, $holes),
            34 => kernel_int!(4, false, true, false, $ints, $op, $buf, $p, $e, $holes),
            35 => kernel_int!(4, true, true, false, $ints, $op, $buf, $p, $e, $holes),
            36 => kernel_int!(4, false, false, true, $ints, $op, $buf, $p, $e, $holes),
            37 => kernel_int!(4, true, false, true, $ints, $op, $buf, $p, $e, $holes),
            38 => kernel_int!(4, false, true, true, $ints, $op, $buf, $p, $e, $holes),
            39 => kernel_int!(4, true, true, true, $ints, $op, $buf, $p, $e, $holes),
            kop::DEC_CONST_DELTA => match k_int::<{ kop::INT_DELTA }, true, false, false>($ints, $op, $buf, &mut $p) {
                Some(Some(m)) => {
                    $e.value = Value::Decimal(Decimal { exponent: i32::from($op.arg), mantissa: m });
                    true
                }
                _ => false,
            },
            kop::DEC_READ_DELTA => {
                let mut q = $p;
                let exponent = if $op.arg != 0 {
                    k_read::<true, true, true>($buf, &mut q)
                } else {
                    k_read::<true, false, true>($buf, &mut q)
                };
                match exponent {
                    Some(Some(x)) if (-63..=63).contains(&x) => {
                        match k_int::<{ kop::INT_DELTA }, true, false, false>($ints, $op, $buf, &mut q) {
                            Some(Some(m)) => {
                                $e.value = Value::Decimal(Decimal { exponent: x as i32, mantissa: m });
                                $p = q;
                                true
                            }
                            _ => false,
                        }
                    }
                    Some(None) => {
                        // A NULL exponent: the decimal is absent, no mantissa follows.
                        $e.field = HOLE;
                        $holes = true;
                        $p = q;
                        true
                    }
                    _ => false,
                }
            }
            kop::ASCII if $buf.get($p).is_some_and(|&b| b > 0x80) => {
                // One character, the usual code or flag: its byte with the stop
                // bit off (0x80 is NULL or empty, the cases below).
                let start = $bytes.len() as u32;
                $bytes.push($buf[$p] & 0x7f);
                $e.value = Value::Bytes { start, len: 1 };
                $p += 1;
                true
            }
            kop::ASCII_STORE if $buf.get($p).is_some_and(|&b| b > 0x80) => match $strs.get_mut($op.slot as usize) {
                Some(s) => {
                    let c = $buf[$p] & 0x7f;
                    s.buf.clear();
                    s.buf.push(c);
                    s.state = ASSIGNED;
                    let start = $bytes.len() as u32;
                    $bytes.push(c);
                    $e.value = Value::Bytes { start, len: 1 };
                    $p += 1;
                    true
                }
                None => false,
            },
            kop::ASCII | kop::ASCII_STORE => {
                let store = $op.kind == kop::ASCII_STORE;
                // A copy's slot (one is always there: the engine reports it if not).
                let slot = if store { $strs.get_mut($op.slot as usize) } else { None };
                if store && slot.is_none() {
                    false
                } else if $op.arg != 0 && $buf.get($p) == Some(&0x80) {
                    // NULL: no entry; a copy's slot is empty.
                    if let Some(s) = slot {
                        s.state = EMPTY;
                    }
                    $p += 1;
                    $e.field = HOLE;
                    $holes = true;
                    true
                } else {
                    let mut q = $p;
                    match ascii_fast($buf, &mut q, $bytes) {
                        Some((start, len)) => {
                            if let Some(s) = slot {
                                s.buf.clear();
                                s.buf.extend_from_slice(&$bytes[start as usize..][..len as usize]);
                                s.state = ASSIGNED;
                            }
                            $e.value = Value::Bytes { start, len };
                            $p = q;
                            true
                        }
                        None => false,
                    }
                }
            }
            kop::ASCII_LOAD => match $strs.get($op.slot as usize) {
                Some(s) if s.state == ASSIGNED && s.buf.len() == 1 => {
                    let start = $bytes.len() as u32;
                    $bytes.push(s.buf[0]);
                    $e.value = Value::Bytes { start, len: 1 };
                    true
                }
                Some(s) if s.state == ASSIGNED => {
                    let start = $bytes.len() as u32;
                    append($bytes, &s.buf);
                    $e.value = Value::Bytes { start, len: s.buf.len() as u32 };
                    true
                }
                _ => false,
            },
            _ => false,
        }
    };
}

/// One integer arm of [`kernel_arms`]: family `$f`, type `$s` (signed), `$n` (nullable),
/// `$w` (32-bit).
macro_rules! kernel_int {
    ($f:expr, $s:expr, $n:expr, $w:expr, $ints:ident, $op:ident, $buf:ident, $p:ident, $e:ident, $holes:ident) => {
        match k_int::<{ $f }, $s, $n, $w>($ints, $op, $buf, &mut $p) {
            Some(Some(v)) => {
                $e.value = if $s { Value::Int(v) } else { Value::UInt(v as u64) };
                true
            }
            Some(None) => {
                $e.field = HOLE;
                $holes = true;
                true
            }
            None => false,
        }
    };
}

/// A kernel's end, the decoder's and the native one's: the entries marked NULL taken out;
/// where an operation stopped it, the engine takes over at that operation's instruction
/// (the entries before its own are final, the rest of the frame is the engine's to push).
/// A macro, not a method: as an `#[inline(always)]` method it cost the kernel loop 220
/// instructions a message in register spills.
macro_rules! kernel_end {
    ($self:ident, $native:expr, $kn:ident, $ops:ident, $base:ident, $stop:ident, $holes:ident, $buf:ident, $p:ident, $msg:ident) => {{
        if let Some(n) = $stop {
            let op = &$ops[n];
            $msg.entries.truncate($base + op.k as usize);
            if $holes {
                take_holes(&mut $msg.entries, $base);
            }
            let i = op.insn as usize;
            if op.kind == kop::SEQ {
                return $self.kernel_seq::<{ $native }>(i, $kn.end as usize, $buf, $p, $msg);
            }
            return $self.run(i, $kn.end as usize, $buf, $p, 0, $msg);
        }
        if $holes {
            take_holes(&mut $msg.entries, $base);
        }
        Ok($p)
    }};
}

/// One operation of a kernel, as the decoder runs it: its value written into its entry of
/// `frame` (a NULL marks the entry [`HOLE`] and sets `holes_out`), the cursor moved on.
/// `false` hands over to the engine at this operation, with nothing changed: one it cannot
/// finish, or the sequence that ends the kernel (no entry of its own in the frame: its `k`
/// is the frame's length).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn kernel_op(
    op: &KOp,
    frame: &mut [Entry],
    ints: &mut [IntSlot],
    strs: &mut [StrSlot],
    bytes: &mut Vec<u8>,
    buf: &[u8],
    pos: &mut usize,
    holes_out: &mut bool,
) -> bool {
    let Some(e) = frame.get_mut(op.k as usize) else {
        return false;
    };
    let mut p = *pos;
    let mut holes = false;
    // One arm per kind: the value goes straight into its entry; a NULL marks the
    // entry a hole; `false` hands over to the engine.
    let ok = kernel_arms!(op, e, ints, strs, bytes, buf, p, holes);
    *pos = p;
    if holes {
        *holes_out = true;
    }
    ok
}

impl<'p> Decoder<'p> {
    /// A specialised segment through its kernel (see [`Kernel`]): the frame copied in, each
    /// operation's value written into its entry, the entries of fields that turned out NULL
    /// taken out after. An operation that cannot finish here hands the segment to the
    /// engine from its instruction, with nothing of its own done yet.
    #[inline(always)]
    pub(super) fn kernel(&mut self, kn: &Kernel, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
        let program = self.program;
        let ops = &program.kops[kn.ops.0 as usize..kn.ops.1 as usize];
        let base = msg.entries.len();
        msg.entries.extend_from_slice(&program.frames[kn.frame.0 as usize..kn.frame.1 as usize]);
        let mut p = p;
        let mut holes = false;
        let mut stop = None;
        {
            let Message { entries, bytes, .. } = msg;
            let frame = &mut entries[base..];
            let ints = &mut self.ints[..];
            let strs = &mut self.strs[..];
            for (n, op) in ops.iter().enumerate() {
                // A sequence that ends the kernel has no entry of its own in the frame (its
                // `k` is the frame's length): it stops the loop here, for the code below.
                let Some(e) = frame.get_mut(op.k as usize) else {
                    stop = Some(n);
                    break;
                };
                // One arm per kind: the value goes straight into its entry; a NULL marks the
                // entry a hole; `false` hands over to the engine.
                let ok = kernel_arms!(op, e, ints, strs, bytes, buf, p, holes);
                if !ok {
                    stop = Some(n);
                    break;
                }
            }
        }
        kernel_end!(self, false, kn, ops, base, stop, holes, buf, p, msg)
    }

    /// A kernel run by native code (see [`crate::native`]): the code writes the frame's
    /// entries and runs what it can; what it leaves, the decoder's kernel loop runs.
    #[inline(always)]
    pub(super) fn kernel_native(
        &mut self,
        native: &dyn NativeKernels,
        index: usize,
        kn: &Kernel,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let program = self.program;
        let ops = &program.kops[kn.ops.0 as usize..kn.ops.1 as usize];
        let base = msg.entries.len();
        let mut p = p;
        let mut holes = false;
        let (ints, strs) = (&mut self.ints, &mut self.strs);
        let done = {
            let Message { entries, bytes, pmaps, .. } = msg;
            // Into the sequence that ends the kernel in the same call, where the decoder
            // would enter it with native code too (see `sequence`).
            let into = if self.profile.is_none() && self.depth < MAX_DEPTH {
                native.run_into_seq(index, buf, &mut p, entries, pmaps, ints, strs, bytes, &mut holes)
            } else {
                None
            };
            match into {
                Some(KernelRun::Stopped(n)) => Some(n),
                Some(KernelRun::Sequence { len, run }) => {
                    return self.kernel_into_seq(kn, base, len, run, buf, p, msg);
                }
                None => native.run(index, buf, &mut p, entries, ints, strs, bytes, &mut holes),
            }
        };
        let Some(from) = done else {
            // No code for this kernel, nothing done: the decoder's own.
            return self.kernel(kn, buf, p, msg);
        };
        if from >= ops.len() {
            if holes {
                take_holes(&mut msg.entries, base);
            }
            return Ok(p);
        }
        let op = &ops[from];
        if op.kind == kop::SEQ && msg.entries.len() == base + op.k as usize {
            // Stopped at the sequence that ends the kernel, the whole frame written: the
            // sequence, as the decoder's kernel goes on to it.
            if holes {
                take_holes(&mut msg.entries, base);
            }
            return self.kernel_seq::<true>(op.insn as usize, kn.end as usize, buf, p, msg);
        }
        self.kernel_rest(kn, base, from, holes, buf, p, msg)
    }

    /// A kernel that native code ran into the sequence that ends it (its frame at `base`,
    /// the sequence's entry after it, `len` its length): the rest of the sequence's
    /// elements from where `run` left them, then what follows the sequence, as
    /// `kernel_seq` goes on.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn kernel_into_seq(
        &mut self,
        kn: &Kernel,
        base: usize,
        len: u32,
        run: SeqRun,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let program = self.program;
        let op = &program.kops[kn.ops.1 as usize - 1];
        let i = op.insn as usize;
        let si = base + op.k as usize;
        if run.stop == SeqStop::Done && run.elements as u64 == u64::from(len) {
            // The whole sequence (the common case): its end, and what follows it. Entered
            // and left, the nesting as it was.
            let end = msg.entries.len() as u32;
            msg.entries[si].value = Value::Sequence { len, end };
            return self.seq_tail(i, kn.end as usize, Ok(p), buf, msg);
        }
        self.rest_of_seq(i, kn.end as usize, len, si, run, buf, p, msg)
    }

    /// The rest of a sequence native code entered and ran `run` of (instruction `i` of a
    /// segment that runs to `end`, its entry at `si`), then what follows it.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn rest_of_seq(
        &mut self,
        i: usize,
        end: usize,
        len: u32,
        si: usize,
        run: SeqRun,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let ins = &self.program.insns[i];
        // Entered: `run_into_seq` is called only below the nesting limit.
        self.depth += 1;
        let r = self.elements::<true>(ins, u64::from(len), si, Some(run), buf, p, msg);
        self.seq_tail(i, end, r, buf, msg)
    }

    /// The rest of a kernel whose frame starts at entry `base`, native code having run its
    /// operations before `from` (and written their entries), `holes` its flag.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn kernel_rest(
        &mut self,
        kn: &Kernel,
        base: usize,
        from: usize,
        holes: bool,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let program = self.program;
        let ops = &program.kops[kn.ops.0 as usize..kn.ops.1 as usize];
        let (mut p, mut holes) = (p, holes);
        // The rest of the frame as the decoder's kernel has it, after the entries the code
        // wrote (those before that operation's own), and the decoder's loop from that
        // operation.
        let frame_src = &program.frames[kn.frame.0 as usize..kn.frame.1 as usize];
        let written = (msg.entries.len() - base).min(frame_src.len());
        msg.entries.truncate(base + written);
        msg.entries.extend_from_slice(&frame_src[written..]);
        let mut stop = None;
        {
            let Message { entries, bytes, .. } = msg;
            let frame = &mut entries[base..];
            let ints = &mut self.ints[..];
            let strs = &mut self.strs[..];
            for (n, op) in ops.iter().enumerate().skip(from) {
                if !kernel_op(op, frame, ints, strs, bytes, buf, &mut p, &mut holes) {
                    stop = Some(n);
                    break;
                }
            }
        }
        kernel_end!(self, true, kn, ops, base, stop, holes, buf, p, msg)
    }

    /// The sequence that ends a kernel (instruction `i` of a specialised segment that runs
    /// to `end`): its length and elements read as the engine's sequence arm reads them,
    /// without the engine's loop around it; the engine runs what follows it.
    #[inline(never)]
    pub(super) fn kernel_seq<const NATIVE: bool>(
        &mut self,
        i: usize,
        end: usize,
        buf: &[u8],
        p: usize,
        msg: &mut Message,
    ) -> R<usize> {
        let program = self.program;
        let ins = &program.insns[i];
        let (at, mut p, mut pm) = (p, p, 0);
        let r = match self.int_op(&program.insns[i + 1], buf, &mut p, &mut pm) {
            Ok(Some(len)) => self.sequence::<NATIVE>(ins, len as u64, at, buf, p, msg),
            Ok(None) => Ok(p),
            Err(f) => Err(f),
        };
        self.seq_tail(i, end, r, buf, msg)
    }

    /// After the sequence that ends a kernel (instruction `i` of a segment that runs to
    /// `end`), `r` its outcome: its field named in an error, the entries after it, the
    /// segment's rest.
    #[inline(always)]
    pub(super) fn seq_tail(&mut self, i: usize, end: usize, r: R<usize>, buf: &[u8], msg: &mut Message) -> R<usize> {
        let program = self.program;
        let ins = &program.insns[i];
        let Ok(p) = r else {
            if self.err.field == u32::MAX {
                self.err.field = ins.field;
            }
            return Err(Fail);
        };
        if ins.then != 0 {
            Self::then_consts(program, ins.then, msg);
        }
        if i + 2 < end {
            return self.run(i + 2, end, buf, p, 0, msg);
        }
        Ok(p)
    }
}

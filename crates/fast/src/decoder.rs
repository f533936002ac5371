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
pub use crate::layout::{Entry, IntSlot, StrSlot, Value, ASSIGNED, EMPTY, HOLE, UNDEFINED};
use crate::native::{KernelRun, NativeKernels, SeqRun, SeqStop};
use crate::program::{flag, int_value, kop, op, Code, FieldKind, Insn, KOp, Kernel, Program, INT_CODES};
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
fn groups(buf: &[u8], p: &mut usize) -> Option<(u64, u32)> {
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
fn shape(v: u64, n: u32, signed: bool, nullable: bool) -> Option<i64> {
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

/// Append `src` to `v`. Field values are mostly a few bytes, where a push loop is shorter
/// than the call the generic slice append makes; long ones take the slice append.
#[inline(always)]
fn append(v: &mut Vec<u8>, src: &[u8]) {
    if src.len() <= 16 {
        for &x in src {
            v.push(x);
        }
    } else {
        v.extend_from_slice(src);
    }
}

/// Push a run of prebuilt entries. Runs are short (one to four entries): a push loop beats
/// a memcpy call, and the usual single entry goes without the loop.
#[inline(always)]
fn push_consts(msg: &mut Message, run: &[Entry]) {
    if let [e] = run {
        msg.entries.push(*e);
    } else {
        for e in run {
            msg.entries.push(*e);
        }
    }
}

/// A short ASCII string (up to 8 bytes) that is not NULL, empty or led by a zero byte: one
/// word load, the stop bit found by a trailing-zero count. `None`
/// leaves every other case to `str_op`.
#[inline(always)]
fn ascii_fast(buf: &[u8], pos: &mut usize, bytes: &mut Vec<u8>) -> Option<(u32, u32)> {
    let at = *pos;
    let w = match buf.get(at..at + 8) {
        Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        // The message's last bytes (a field near its end): the bytes there are, zeros after
        // them (no stop bit), so a string that runs past the end is still not found here.
        None => buf.get(at..)?.iter().rev().fold(0u64, |w, &x| (w << 8) | u64::from(x)),
    };
    if w & 0x7f == 0 {
        // NULL (0x80), or a leading zero byte: the exact reader's cases.
        return None;
    }
    let stops = w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    let last = stops.trailing_zeros() as usize; // the stop bit of the last byte
    let n = last / 8 + 1;
    let start = bytes.len();
    // All eight bytes in one store, then cut to the string's length: one capacity check
    // and no byte loop. The stop bit comes off the last byte.
    bytes.extend_from_slice(&(w & !(1u64 << last)).to_le_bytes());
    bytes.truncate(start + n);
    *pos = at + n;
    Some((start as u32, n as u32))
}

/// `v + d` in an integer type (`S` signed, `W` 32-bit), `None` when it leaves the type: the
/// arithmetic of increments and deltas, the engine's and the kernels'.
#[inline(always)]
fn add_in_type<const S: bool, const W: bool>(v: i64, d: i64) -> Option<i64> {
    if W {
        v.checked_add(d).filter(|&v| if S { i32::try_from(v).is_ok() } else { u32::try_from(v).is_ok() })
    } else if S {
        v.checked_add(d)
    } else {
        (v as u64).checked_add_signed(d).map(|v| v as i64)
    }
}

/// Take out the entries marked [`HOLE`] from `base` on, keeping the order of the rest.
#[cold]
fn take_holes(entries: &mut Vec<Entry>, base: usize) {
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
fn k_read<const S: bool, const N: bool, const W: bool>(buf: &[u8], p: &mut usize) -> Option<Option<i64>> {
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
fn k_int<const F: u8, const S: bool, const N: bool, const W: bool>(
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
fn kernel_op(
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

    /// The exact reader for what the fast path declined: 10-byte values and errors.
    #[cold]
    #[inline(never)]
    fn int_slow(&mut self, ins: &Insn, nullable: bool, buf: &[u8], pos: usize) -> R<(Option<i64>, usize)> {
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
    fn int(&mut self, ins: &Insn, nullable: bool, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
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
    fn signed(&mut self, nullable: bool, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
        self.int(&SIGNED_64, nullable, buf, pos)
    }

    /// Store a value read for copy or increment; `None` leaves the entry empty.
    #[inline(always)]
    fn store(&mut self, slot: u32, v: Option<i64>) {
        self.ints[slot as usize] = match v {
            Some(v) => IntSlot { v, exp: 0, state: ASSIGNED },
            None => IntSlot { v: 0, exp: 0, state: EMPTY },
        };
    }

    /// Copy or increment with no value in the stream: the previous value's three states.
    #[inline(always)]
    fn load(&mut self, ins: &Insn, incr: bool, at: usize) -> R<Option<i64>> {
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
    fn load_unassigned(&mut self, ins: &Insn, state: u8, at: usize) -> R<Option<i64>> {
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
    fn delta(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize) -> R<Option<i64>> {
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
    fn delta_t<const S: bool, const N: bool, const W: bool>(
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
    fn int_t<const S: bool, const N: bool, const W: bool>(
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
    fn int_typed<const C: u8, const S: bool, const N: bool, const W: bool>(
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
        if let Some(v) = v {
            msg.entries.push(Entry { field: ins.field, value: if S { Value::Int(v) } else { Value::UInt(v as u64) } });
        }
        Ok(i + 1)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn int_arm(
        &mut self,
        code: Code,
        i: usize,
        ins: &Insn,
        buf: &[u8],
        pos: &mut usize,
        pmap: &mut Pmap,
        msg: &mut Message,
    ) -> R<usize> {
        if let Some(v) = self.int_code(code, ins, buf, pos, pmap)? {
            msg.entries.push(Entry { field: ins.field, value: int_value(ins, v) });
        }
        Ok(i + 1)
    }

    /// The integer operators (generic and resolved); `None` is absent.
    #[inline(always)]
    fn int_op(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> R<Option<i64>> {
        self.int_code(ins.code, ins, buf, pos, pmap)
    }

    /// The integer operators with the operator given apart, so a caller that knows it gets
    /// the match folded away.
    #[inline(always)]
    fn int_code(&mut self, code: Code, ins: &Insn, buf: &[u8], pos: &mut usize, pmap: &mut Pmap) -> R<Option<i64>> {
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
    fn decimal(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize) -> R<Option<Decimal>> {
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
    fn dec_op(&mut self, ins: &Insn, bit: bool, buf: &[u8], p: usize) -> R<(Option<Decimal>, usize)> {
        let mut p = p;
        let v = self.dec_inner(ins, bit, buf, &mut p)?;
        Ok((v, p))
    }

    #[inline(always)]
    fn dec_inner(&mut self, ins: &Insn, bit: bool, buf: &[u8], pos: &mut usize) -> R<Option<Decimal>> {
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

    /// Read a string or byte vector value into the message arena. `Ok(None)` is NULL.
    #[inline(always)]
    fn vector(
        &mut self,
        ins: &Insn,
        nullable: bool,
        buf: &[u8],
        pos: &mut usize,
        msg: &mut Message,
    ) -> R<Option<(u32, u32)>> {
        let start = msg.bytes.len() as u32;
        if ins.flags & (flag::UNICODE | flag::BYTES) == 0 {
            // The common case (short, not NULL, no leading zero byte), then every rule.
            if let Some(r) = ascii_fast(buf, pos, &mut msg.bytes) {
                return Ok(Some(r));
            }
            match codec::read_ascii(buf, pos, nullable) {
                Ok(AsciiRead::Null) => return Ok(None),
                Ok(AsciiRead::Empty) => {}
                Ok(AsciiRead::Chars { start: s, end: e }) => {
                    append(&mut msg.bytes, &buf[s..e]);
                    if let Some(last) = msg.bytes.last_mut() {
                        *last &= 0x7f;
                    }
                }
                Err(e) => return Err(self.fail(e.kind, e.offset)),
            }
        } else {
            let at = *pos;
            match codec::read_bytes(buf, pos, nullable) {
                Ok(None) => return Ok(None),
                Ok(Some(b)) => {
                    if ins.has(flag::UNICODE) && std::str::from_utf8(b).is_err() {
                        return Err(self.fail(ErrorKind::InvalidUtf8, at));
                    }
                    append(&mut msg.bytes, b);
                }
                Err(e) => return Err(self.fail(e.kind, e.offset)),
            }
        }
        Ok(Some((start, msg.bytes.len() as u32 - start)))
    }

    fn push_bytes(msg: &mut Message, field: u32, b: &[u8]) {
        let start = msg.bytes.len() as u32;
        append(&mut msg.bytes, b);
        msg.entries.push(Entry { field, value: Value::Bytes { start, len: b.len() as u32 } });
    }

    #[inline(never)]
    fn str_op(&mut self, ins: &Insn, bit: bool, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
        let mut p = p;
        self.str_inner(ins, bit, buf, &mut p, msg)?;
        Ok(p)
    }

    #[inline(always)]
    fn str_inner(&mut self, ins: &Insn, bit: bool, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<()> {
        let field = ins.field;
        let slot = ins.slot as usize;
        let (present, tail) = match ins.code {
            Code::StrNone => {
                if let Some((start, len)) = self.vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                    msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                }
                return Ok(());
            }
            Code::StrConst => {
                let present = !ins.has(flag::OPT) || bit;
                if present {
                    msg.entries.push(Entry { field, value: Value::Static { index: ins.a } });
                }
                return Ok(());
            }
            Code::StrDefault => {
                if bit {
                    if let Some((start, len)) = self.vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                        msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                    }
                } else if ins.has(flag::HAS_INIT) {
                    msg.entries.push(Entry { field, value: Value::Static { index: ins.a } });
                }
                return Ok(());
            }
            Code::StrDelta => return self.str_delta(ins, buf, pos, msg),
            Code::StrCopy => (bit, false),
            Code::StrTail => (bit, true),
            Code::StrStore => (true, false),
            Code::StrLoad => (false, false),
            _ => return Ok(()),
        };
        let program = self.program;
        let init: &[u8] = if ins.has(flag::HAS_INIT) { &program.strings[ins.a as usize] } else { &[] };
        if present {
            match self.vector(ins, ins.has(flag::NULLABLE), buf, pos, msg)? {
                None => {
                    if !tail {
                        self.strs[slot].state = EMPTY;
                    }
                }
                Some((start, len)) => {
                    let s = &mut self.strs[slot];
                    if !tail {
                        s.buf.clear();
                        append(&mut s.buf, msg.slice(start, len));
                        s.state = ASSIGNED;
                        msg.entries.push(Entry { field, value: Value::Bytes { start, len } });
                    } else {
                        // Tail: the value replaces the base's last len bytes.
                        if s.state != ASSIGNED {
                            s.buf.clear();
                            append(&mut s.buf, init);
                        }
                        let keep = s.buf.len().saturating_sub(len as usize);
                        s.buf.truncate(keep);
                        let tail_start = start as usize;
                        append(&mut s.buf, &msg.bytes[tail_start..tail_start + len as usize]);
                        s.state = ASSIGNED;
                        msg.bytes.truncate(tail_start);
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
                    append(&mut s.buf, init);
                    s.state = ASSIGNED;
                    msg.entries.push(Entry { field, value: Value::Static { index: ins.a } });
                } else if ins.has(flag::OPT) {
                    self.strs[slot].state = EMPTY;
                } else {
                    return Err(self.fail(ErrorKind::NoInitialValue, *pos));
                }
            }
            _ => {
                if !ins.has(flag::OPT) {
                    return Err(self.fail(ErrorKind::EmptyPrevious, *pos));
                }
            }
        }
        Ok(())
    }

    fn str_delta(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<()> {
        let at = *pos;
        let Some(sub) = self.signed(ins.has(flag::NULLABLE), buf, pos)? else {
            return Ok(());
        };
        if i32::try_from(sub).is_err() {
            return Err(self.fail(ErrorKind::IntegerOverflow("int32"), at));
        }
        let Some((start, len)) = self.vector(ins, false, buf, pos, msg)? else {
            return Ok(());
        };
        let program = self.program;
        let init: &[u8] = if ins.has(flag::HAS_INIT) { &program.strings[ins.a as usize] } else { &[] };
        let slot = ins.slot as usize;
        match self.strs[slot].state {
            ASSIGNED => {}
            UNDEFINED => {
                let s = &mut self.strs[slot];
                s.buf.clear();
                append(&mut s.buf, init);
            }
            _ => return Err(self.fail(ErrorKind::EmptyPrevious, at)),
        }
        let diff_start = start as usize;
        let diff_end = diff_start + len as usize;
        let blen = self.strs[slot].buf.len();
        let n = if sub >= 0 { sub as usize } else { (-(sub + 1)) as usize };
        if n > blen {
            return Err(self.fail(ErrorKind::SubtractionTooLong, at));
        }
        let s = &mut self.strs[slot];
        if sub >= 0 {
            s.buf.truncate(blen - n);
            append(&mut s.buf, &msg.bytes[diff_start..diff_end]);
        } else {
            let diff = msg.bytes[diff_start..diff_end].to_vec();
            s.buf.splice(0..n, diff);
        }
        s.state = ASSIGNED;
        if ins.has(flag::UNICODE) && std::str::from_utf8(&self.strs[slot].buf).is_err() {
            return Err(self.fail(ErrorKind::InvalidUtf8, at));
        }
        msg.bytes.truncate(diff_start);
        Self::push_bytes(msg, ins.field, &self.strs[slot].buf);
        Ok(())
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

    /// A specialised segment through its kernel (see [`Kernel`]): the frame copied in, each
    /// operation's value written into its entry, the entries of fields that turned out NULL
    /// taken out after. An operation that cannot finish here hands the segment to the
    /// engine from its instruction, with nothing of its own done yet.
    #[inline(always)]
    fn kernel(&mut self, kn: &Kernel, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
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
    fn kernel_native(
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
    fn kernel_into_seq(
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
    fn rest_of_seq(
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
    fn kernel_rest(
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
    fn kernel_seq<const NATIVE: bool>(
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
    fn seq_tail(&mut self, i: usize, end: usize, r: R<usize>, buf: &[u8], msg: &mut Message) -> R<usize> {
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
                if let Some(d) = v {
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
                    msg.entries.push(Entry { field: ins.field, value: Value::Bytes { start, len } });
                } else {
                    *pos = self.str_op(ins, false, buf, *pos, msg)?;
                }
                Ok(i + 1)
            }
            op::STR_LOAD if self.strs[ins.slot as usize].state == ASSIGNED => {
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
                *pos = self.str_op(ins, bit, buf, *pos, msg)?;
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

//! What the generated code and the Rust side share: the contexts passed by pointer (their
//! fields at fixed offsets), the function types, and the string slots' packed mirror.

use std::mem::offset_of;

use tickplant_fast::native::{self as nat, IntSlot, StrSlot};
use tickplant_fast::program::{kop, KOp};
use tickplant_fast::Entry;

/// Most string dictionary entries one kernel's code reads or writes (its operations on
/// others are left to the decoder).
pub(crate) const MAX_STR_SLOTS: usize = 4;
/// The most string bytes one run of kernel `ops` pushes: its string operations each push
/// one character at most. The room is made before each call, so the code needs no check.
pub(crate) fn chars(ops: &[KOp]) -> usize {
    ops.iter().filter(|o| matches!(o.kind, kop::ASCII | kop::ASCII_STORE | kop::ASCII_LOAD)).count()
}

/// What the generated code reads and writes, passed by pointer (`repr(C)`: the code loads
/// its fields at fixed offsets).
#[repr(C)]
pub(crate) struct Ctx {
    pub(crate) buf: *const u8,
    pub(crate) pos: usize,
    pub(crate) out: *mut Entry,
    pub(crate) len: usize,
    pub(crate) ints: *mut IntSlot,
    pub(crate) bytes_len: usize,
    pub(crate) bytes: *mut u8,
    pub(crate) holes: u64,
    /// A string dictionary entry as the code sees it, little-endian bytes: its state,
    /// 1 when its value is one character, that character, 1 when the code changed it.
    pub(crate) strs: [u32; MAX_STR_SLOTS],
}

impl Ctx {
    /// A call's context: the message, the cursor, where the entries go, the dictionary,
    /// the string bytes (their length now the message's), the string slots' mirror.
    #[inline(always)]
    pub(crate) fn new(
        buf: &[u8],
        pos: usize,
        out: *mut Entry,
        ints: &mut [IntSlot],
        bytes: &mut Vec<u8>,
        strs: [u32; MAX_STR_SLOTS],
    ) -> Ctx {
        Ctx {
            buf: buf.as_ptr(),
            pos,
            out,
            len: buf.len(),
            ints: ints.as_mut_ptr(),
            bytes_len: bytes.len(),
            bytes: bytes.as_mut_ptr(),
            holes: 0,
            strs,
        }
    }
}

pub(crate) const C_BUF: i32 = offset_of!(Ctx, buf) as i32;
pub(crate) const C_LEN: i32 = offset_of!(Ctx, len) as i32;
pub(crate) const C_POS: i32 = offset_of!(Ctx, pos) as i32;
pub(crate) const C_OUT: i32 = offset_of!(Ctx, out) as i32;
pub(crate) const C_INTS: i32 = offset_of!(Ctx, ints) as i32;
pub(crate) const C_BYTES: i32 = offset_of!(Ctx, bytes) as i32;
pub(crate) const C_BYTES_LEN: i32 = offset_of!(Ctx, bytes_len) as i32;
pub(crate) const C_HOLES: i32 = offset_of!(Ctx, holes) as i32;
pub(crate) const C_STRS: i32 = offset_of!(Ctx, strs) as i32;
pub(crate) const STR_MIRROR_SIZE: i32 = 4;

/// Most elements one call of a sequence's element loop runs (room for their entries is
/// made before each call).
pub(crate) const SEQ_CHUNK: usize = 16;

/// The context of a sequence's element loop: a kernel's context (the same offsets), then
/// the loop's own.
#[repr(C)]
pub(crate) struct SeqCtx {
    pub(crate) k: Ctx,
    /// In: how many elements to run; the index of the entry at `k.out`.
    pub(crate) count: u64,
    pub(crate) first: u64,
    /// Out: elements done; the kernel (in the loop's own list) and operation it stopped at.
    pub(crate) done: u64,
    pub(crate) kernel: u64,
    pub(crate) ops: u64,
    /// Out, of a kernel run on into its sequence: the sequence's length.
    pub(crate) len: u64,
    /// Out: each element's presence map (left-aligned) and its byte count.
    pub(crate) pm: [u64; SEQ_CHUNK],
    pub(crate) pmn: [u8; SEQ_CHUNK],
}

impl SeqCtx {
    /// An element loop's context: up to `count` elements, the first entry's index `first`.
    #[inline(always)]
    pub(crate) fn new(k: Ctx, count: usize, first: usize) -> SeqCtx {
        let (count, first) = (count as u64, first as u64);
        SeqCtx { k, count, first, done: 0, kernel: 0, ops: 0, len: 0, pm: [0; SEQ_CHUNK], pmn: [0; SEQ_CHUNK] }
    }
}

pub(crate) const S_COUNT: i32 = offset_of!(SeqCtx, count) as i32;
pub(crate) const S_FIRST: i32 = offset_of!(SeqCtx, first) as i32;
pub(crate) const S_DONE: i32 = offset_of!(SeqCtx, done) as i32;
pub(crate) const S_KERNEL: i32 = offset_of!(SeqCtx, kernel) as i32;
pub(crate) const S_OPS: i32 = offset_of!(SeqCtx, ops) as i32;
pub(crate) const S_LEN: i32 = offset_of!(SeqCtx, len) as i32;
pub(crate) const S_PM: i32 = offset_of!(SeqCtx, pm) as i32;
pub(crate) const S_PMN: i32 = offset_of!(SeqCtx, pmn) as i32;

/// A sequence's element loop: `ctx -> status` (see [`Gen::seq`](crate::codegen::Gen::seq)).
pub(crate) type SeqFn = unsafe extern "C" fn(*mut SeqCtx) -> u64;

/// A kernel's code: `ctx -> how many operations it ran`.
pub(crate) type KernelFn = unsafe extern "C" fn(*mut Ctx) -> u64;

/// The string dictionary entries a kernel's code sees: the first [`MAX_STR_SLOTS`]
/// distinct slots of its string copy operations, in order.
pub(crate) fn string_slots(ops: &[KOp]) -> Vec<u32> {
    let mut v = Vec::new();
    for o in ops {
        if (o.kind == kop::ASCII_LOAD || o.kind == kop::ASCII_STORE) && !v.contains(&o.slot) && v.len() < MAX_STR_SLOTS
        {
            v.push(o.slot);
        }
    }
    v
}

/// The string slots `slots` as the code sees them, one packed word each: the state, one
/// character or not (0x100), the character (bits 16..24); the code sets the fourth byte
/// when it changes the slot.
#[inline(always)]
pub(crate) fn str_mirror(strs: &[StrSlot], slots: &[u32]) -> [u32; MAX_STR_SLOTS] {
    let mut mirror = [0u32; MAX_STR_SLOTS];
    for (m, &slot) in mirror.iter_mut().zip(slots) {
        let s = &strs[slot as usize];
        let one = match s.buf.as_slice() {
            [c] => 0x100 | u32::from(*c) << 16,
            _ => 0,
        };
        *m = u32::from(s.state) | one;
    }
    mirror
}

/// The string slots the code changed (see [`str_mirror`]) written back.
#[inline(always)]
pub(crate) fn str_commit(mirror: &[u32; MAX_STR_SLOTS], slots: &[u32], strs: &mut [StrSlot]) {
    for (&m, &slot) in mirror.iter().zip(slots) {
        if m >> 24 != 0 {
            let s = &mut strs[slot as usize];
            s.state = m as u8;
            if s.state == nat::ASSIGNED {
                s.buf.clear();
                s.buf.push((m >> 16) as u8);
            }
        }
    }
}

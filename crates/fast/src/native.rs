//! Native code for kernels: the contract between the decoder and a code generator outside
//! this crate (`tickplant-fast-jit`), which turns a program's kernels into machine code.
//!
//! A [`Kernel`](crate::program::Kernel) is a specialised segment's straight run of
//! operations. The decoder runs it by copying its frame in, then a loop over its operations
//! with a `match` on each one's kind. Native code runs the same kernel with no loop and no
//! dispatch, each operation's kind, slot and entry fixed when the code was made, and writes
//! the frame's entries itself, in order: its constants as they are, each operation's entry
//! with its value. It runs only what it does exactly as the decoder's kernel does it, and
//! stops at the first operation it does not (one of a kind it leaves to the decoder, or one
//! it cannot finish: a value longer than its reads take, a dictionary entry not yet
//! assigned, the end of the buffer) before it has changed anything of it, with exactly the
//! entries before that operation's written. The decoder copies the rest of the frame in and
//! runs the rest itself, so the result is the decoder's, byte for byte.
//!
//! The code writes entries and dictionary entries in place, so the layouts it relies on are
//! fixed here (`repr(C)`):
//!
//! * [`Entry`]: `field` (u32) at [`ENTRY_FIELD`], the [`Value`] at [`ENTRY_VALUE`], 32 bytes;
//! * [`Value`]: `repr(C, u32)`, its variant's number (in declaration order: `UInt` 0, `Int`
//!   1, `Decimal` 2, `Bytes` 3, ...) as a u32 at 0 and its payload at 8: an integer as an
//!   i64 at 8; a [`Decimal`](crate::Decimal)'s exponent (i32) at 8 and mantissa (i64) at
//!   16; the two u32 fields of `Bytes`, `Static`, `Sequence`, `Element`, `Group` and
//!   `Template` at 8 and 12, in declaration order;
//! * [`IntSlot`]: the value (i64) at 0, a decimal's exponent (i32) at 8, the state (u8:
//!   [`UNDEFINED`], [`EMPTY`], [`ASSIGNED`]) at 12, 16 bytes;
//! * [`StrSlot`]: read and written by the code's owner around a call, not by the code.

use crate::codec::Pmap;
use crate::layout::{Entry, Value};
use crate::program::Program;

pub use crate::layout::{IntSlot, StrSlot, ASSIGNED, EMPTY, HOLE, UNDEFINED};

/// Byte offset of [`Entry::field`].
pub const ENTRY_FIELD: usize = std::mem::offset_of!(Entry, field);
/// Byte offset of [`Entry::value`].
pub const ENTRY_VALUE: usize = std::mem::offset_of!(Entry, value);
/// Size of an [`Entry`].
pub const ENTRY_SIZE: usize = std::mem::size_of::<Entry>();
/// Offsets in an [`IntSlot`].
pub const SLOT_V: usize = std::mem::offset_of!(IntSlot, v);
pub const SLOT_EXP: usize = std::mem::offset_of!(IntSlot, exp);
pub const SLOT_STATE: usize = std::mem::offset_of!(IntSlot, state);
pub const SLOT_SIZE: usize = std::mem::size_of::<IntSlot>();
/// A [`Value`]'s variant number and payload offsets (see the module doc).
pub const VALUE_TAG: usize = 0;
pub const VALUE_PAYLOAD: usize = 8;
pub const TAG_UINT: u32 = 0;
pub const TAG_INT: u32 = 1;
pub const TAG_DECIMAL: u32 = 2;
pub const TAG_BYTES: u32 = 3;
pub const TAG_STATIC: u32 = 4;
pub const TAG_SEQUENCE: u32 = 5;
pub const TAG_ELEMENT: u32 = 6;
pub const TAG_GROUP: u32 = 7;
pub const TAG_TEMPLATE: u32 = 8;

const _: () = assert!(ENTRY_SIZE == 32 && SLOT_SIZE == 16 && std::mem::size_of::<Value>() == 24);

/// Machine code for a program's kernels (see the module doc).
pub trait NativeKernels: std::fmt::Debug + Send + Sync {
    /// Whether this code was made for `program`'s kernels: the same operations and frames,
    /// and the same count of integer dictionary entries.
    fn made_for(&self, program: &Program) -> bool;

    /// Run kernel `index` (into [`Program::kernels`](crate::Program::kernels)) at `*pos`
    /// of `buf`: append its frame's entries to `entries`, each written as the decoder's
    /// kernel writes it, and return how many of its operations it ran: all of them (the
    /// whole frame appended), or fewer (nothing of the first one left done, the frame
    /// appended up to that operation's own entry). `None` when it did nothing at all (no
    /// code for this kernel): the decoder runs the kernel itself. The cursor, the
    /// dictionaries, the string bytes and `holes` (set when an entry was marked [`HOLE`]) as
    /// the operations leave them.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        index: usize,
        buf: &[u8],
        pos: &mut usize,
        entries: &mut Vec<Entry>,
        ints: &mut [IntSlot],
        strs: &mut [StrSlot],
        bytes: &mut Vec<u8>,
        holes: &mut bool,
    ) -> Option<usize>;

    /// Run elements of a sequence whose body has specialised segments (those of
    /// [`Program::specials`](crate::Program::specials) from `specials`, the sequence's
    /// `field`), at most `count` of them, as the decoder's element loop runs them: for each,
    /// its [`Value::Element`] entry, its presence map read and pushed onto `pmaps`, the
    /// kernel of the specialised segment that matches it, the element's end set. `None`
    /// when it has no code for this sequence (nothing done). Otherwise how far it went (see
    /// [`SeqRun`]): the cursor, the dictionaries, the entries and string bytes as those
    /// elements leave them.
    #[allow(clippy::too_many_arguments)]
    fn run_seq(
        &self,
        specials: usize,
        field: u32,
        count: usize,
        buf: &[u8],
        pos: &mut usize,
        entries: &mut Vec<Entry>,
        pmaps: &mut Vec<(Pmap, u8)>,
        ints: &mut [IntSlot],
        strs: &mut [StrSlot],
        bytes: &mut Vec<u8>,
    ) -> Option<SeqRun> {
        let _ = (specials, field, count, buf, pos, entries, pmaps, ints, strs, bytes);
        None
    }

    /// Run kernel `index`, one that ends with a sequence, as [`NativeKernels::run`] does,
    /// and on into that sequence the way the decoder goes on into it: its length read, its
    /// [`Value::Sequence`] entry after the frame (its end left 0 for the decoder to set),
    /// then its first elements as [`NativeKernels::run_seq`] runs them. One call instead
    /// of one for the kernel and one for the elements. The decoder calls it only where it
    /// would enter the sequence with native code itself: no profile being taken, the
    /// nesting below its limit.
    ///
    /// `None`: no such code for this kernel, nothing done. [`KernelRun::Stopped`]: it
    /// stopped before the sequence was entered, as `run` stops (at the sequence itself
    /// when its length is not one it reads, when the length is more than the bytes left,
    /// or when a field of the kernel was NULL). [`KernelRun::Sequence`]: the sequence
    /// entered, `len` its length, `run` how far its elements went.
    #[allow(clippy::too_many_arguments)]
    fn run_into_seq(
        &self,
        index: usize,
        buf: &[u8],
        pos: &mut usize,
        entries: &mut Vec<Entry>,
        pmaps: &mut Vec<(Pmap, u8)>,
        ints: &mut [IntSlot],
        strs: &mut [StrSlot],
        bytes: &mut Vec<u8>,
        holes: &mut bool,
    ) -> Option<KernelRun> {
        let _ = (index, buf, pos, entries, pmaps, ints, strs, bytes, holes);
        None
    }
}

/// What [`NativeKernels::run_into_seq`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelRun {
    /// Stopped before the sequence, this many of the kernel's operations done (as the
    /// return of [`NativeKernels::run`]).
    Stopped(usize),
    /// Into the sequence: its length, and how far its elements went.
    Sequence { len: u32, run: SeqRun },
}

/// How far [`NativeKernels::run_seq`] went: `elements` whole elements done, then `stop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqRun {
    pub elements: usize,
    pub stop: SeqStop,
}

/// Where [`NativeKernels::run_seq`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqStop {
    /// After `count` elements, or at the sequence's end.
    Done,
    /// Before the next element, nothing of it done: its presence map is one the code does
    /// not read or has no kernel for. The decoder runs that element.
    Element,
    /// Inside the next element: its entry is at `entry` (its end not yet set), its presence
    /// map pushed, and of its specialised segment's kernel (`kernel`, an index into
    /// [`Program::kernels`](crate::Program::kernels)) the operations before `from` done,
    /// as [`NativeKernels::run`] leaves a kernel it stops in (`holes` its flag). The decoder
    /// runs the rest of the kernel and ends the element.
    Kernel { entry: usize, kernel: usize, from: usize, holes: bool },
}

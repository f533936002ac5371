//! The layouts of a decoded message's entries and of the dictionary, shared by the decoder,
//! the program (its constants are entries) and the native kernel code (which writes them
//! through raw pointers: hence `repr(C)`). A leaf module: it imports none of those three.

use crate::value::Decimal;

/// A decoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, u32)]
pub enum Value {
    /// uInt32 and uInt64 (and a sequence length).
    UInt(u64),
    /// int32 and int64.
    Int(i64),
    Decimal(Decimal),
    /// ASCII string, unicode string or byte vector: `len` bytes at `start` in
    /// [`Message::bytes`](crate::Message::bytes).
    Bytes {
        start: u32,
        len: u32,
    },
    /// A string or byte vector that is a template's constant or default: entry `index` of
    /// [`Program::strings`](crate::Program::strings) (no copy made).
    Static {
        index: u32,
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

/// One field of a decoded message: the field (index into [`Program::fields`](crate::Program::fields)) and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Entry {
    pub field: u32,
    pub value: Value,
}

/// A dictionary entry's state: undefined (no value yet, or reset).
pub const UNDEFINED: u8 = 0;
/// A dictionary entry's state: empty (an optional field's NULL).
pub const EMPTY: u8 = 1;
/// A dictionary entry's state: assigned a value.
pub const ASSIGNED: u8 = 2;

/// An integer or decimal dictionary entry (`repr(C)`: native kernel code reads and writes
/// it, see [`crate::native`]).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct IntSlot {
    pub v: i64,
    /// A decimal's exponent.
    pub exp: i32,
    /// [`UNDEFINED`], [`EMPTY`] or [`ASSIGNED`].
    pub state: u8,
}

/// A string dictionary entry.
#[derive(Debug, Clone, Default)]
pub struct StrSlot {
    /// [`UNDEFINED`], [`EMPTY`] or [`ASSIGNED`].
    pub state: u8,
    pub buf: Vec<u8>,
}

/// A kernel's entry of a field that turned out NULL (its `field`), until the decoder takes
/// it out.
pub const HOLE: u32 = u32::MAX;

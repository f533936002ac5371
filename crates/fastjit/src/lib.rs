//! A FAST program's kernels compiled to machine code at run time (Cranelift), for
//! [`tickplant_fast::Decoder::set_native`].
//!
//! The decoder runs a kernel (a specialised segment's straight run of operations, see
//! [`tickplant_fast::program::Kernel`]) by copying its frame of prebuilt entries into the
//! message, then a loop over its operations with a `match` on each one's kind: about a
//! third of its instructions go on that loop, its dispatch and the copy. Here each kernel
//! becomes one function with no loop and no dispatch, each operation's kind, type,
//! dictionary slot and entry fixed in the code, which writes the frame's entries itself as
//! immediate stores, the way the FPGA engines of the research ran straight-line microcode
//! for their hottest (template, presence map) pairs. A sequence whose body has specialised
//! segments gets its element loop as one function too: each element's entry, its presence
//! map, the kernel of the segment specialised for it in line, its holes taken out, its end
//! (see [`tickplant_fast::native::NativeKernels::run_seq`]). A kernel that ends with such a
//! sequence is made a second time, going on into it: the sequence's length and entry, then
//! its first elements, one call for a message's header and entries (see
//! [`tickplant_fast::native::NativeKernels::run_into_seq`]).
//!
//! What the code does, it does exactly as the decoder's kernel does it; at the first
//! operation it does not, it stops (see [`tickplant_fast::native`]): the sequence that ends
//! a kernel, a string of more than one character, a string copy slot past the first four,
//! or an operation it cannot finish (a value of more than nine bytes, one out of its type's
//! range, the end of the buffer, a dictionary entry the decoder must rule on), before it has
//! changed anything of it. The decoder runs the rest of the kernel, so a message decodes to
//! the same entries, bytes, presence maps and dictionary state with or without it: the
//! tests decode real and random streams, damaged ones too, both ways and compare.
//!
//! ```
//! use tickplant_fast::{Decimal, Decoder, Framing, Message, Program, Value};
//! use tickplant_fast_jit::JitKernels;
//!
//! let xml = r#"<templates><template name="Quote" id="7" dictionary="template">
//!     <string name="MessageType" id="35"><constant value="S"/></string>
//!     <uInt32 name="MsgSeqNum" id="34"><increment/></uInt32>
//!     <string name="Symbol" id="55"><copy/></string>
//!     <decimal name="BidPx" id="132"><exponent><default value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
//!     <uInt32 name="BidSize" id="134" presence="optional"><copy/></uInt32>
//!     <sequence name="Venues" presence="optional"><length name="NoVenues" id="9001"/>
//!       <string name="Venue" id="30"><default value="XNAS"/></string></sequence>
//! </template></templates>"#;
//! // Two messages: the second sends only the price's change (+5).
//! let stream = [
//!     0xf4, 0x87, 0x81, 0x41, 0xc2, 0x00, 0x60, 0xb9, 0xe5, 0x83, 0x80, 0xc0, 0x42, 0x41, 0x54, 0xd3,
//!     0xc0, 0x87, 0x85, 0x80,
//! ];
//! let mut program = Program::from_xml(xml).unwrap();
//! program.specialise_for(&stream, Framing::Raw).unwrap();
//! let native = JitKernels::compile(&program).unwrap();
//! assert!(native.native_ops().0 > 0);
//! let mut decoder = Decoder::new(&program);
//! decoder.set_native(Some(&native)).unwrap();
//! let mut msg = Message::new();
//! let n = decoder.decode(&stream, &mut msg).unwrap();
//! assert_eq!(msg.get(&program, "BidPx").unwrap().value, Value::Decimal(Decimal::new(12345, -2)));
//! decoder.decode(&stream[n..], &mut msg).unwrap();
//! assert_eq!(msg.get(&program, "MsgSeqNum").unwrap().value, Value::UInt(2));
//! assert_eq!(msg.get(&program, "BidPx").unwrap().value, Value::Decimal(Decimal::new(12350, -2)));
//! ```
//!
//! # Modules
//! `abi` is what the code and the Rust side share (the contexts passed by pointer, their
//! offsets, the function types); `codegen` builds each kernel's function; `runtime` owns the
//! code, compiles a program and calls the code for the decoder.
//!
//! # Unsafe code
//! This crate holds unsafe code, all of it in `runtime` (denied at the top, allowed where it
//! stands: `Send`/`Sync`, `compile`, `Drop` and the `NativeKernels` calls): generated code
//! writes through raw pointers.
//! Each write's bound is checked when the code is made (an entry's index against its
//! kernel's frame, room for which [`JitKernels`] reserves before each call; a dictionary
//! slot against the dictionary, whose size it checks before each call; a string byte
//! against the room it reserves, one byte per string operation the call can run). Each
//! read of the message is checked by the code itself: once per kernel, that the bytes
//! left are at least as many as its reads (each takes one byte at least), then again
//! after any read that took more than one byte; the bytes after a read's first each
//! against the message's length.
#![deny(unsafe_code)]

mod abi;
mod codegen;
mod runtime;

use abi::*;
use codegen::*;
pub use runtime::JitKernels;
use runtime::KernelCode;

/// Why the kernels could not be made into machine code (an unsupported machine, a
/// code-generator error): the decoder then runs them itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    pub reason: String,
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for CompileError {}

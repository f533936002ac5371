//! FAST 1.1 (FIX Adapted for STreaming): XML templates compiled to a flat decoding program,
//! a decoder and an encoder.
//!
//! * [`template`]: the template XML model and its static checks.
//! * [`program`]: templates compiled to instructions, with a readable listing.
//! * [`codec`]: stop-bit integers, presence maps, strings.
//! * [`layout`]: the decoded entries and the dictionary as the decoder, the program and
//!   the native kernels share them.
//!
//! Modules import one way: `types` <- `value` <- `template` <- `layout` <- `program` <-
//! `native` <- `decoder` <- `encoder`, `framing`, `json`.
#![forbid(unsafe_code)]

/// The user guide (`docs/fast.md`); its Rust example runs as a doctest. Its `text file=NAME`
/// blocks are files its CLI test writes out; rustdoc does not know the attribute.
#[doc = include_str!("../../../docs/fast.md")]
#[allow(rustdoc::invalid_codeblock_attributes)]
pub mod guide {}

pub mod codec;
mod error;
pub mod layout;
pub mod program;
pub mod template;
mod types;
pub mod value;

pub use error::{Error, ErrorKind, TemplateError};
pub use program::{Code, FieldInfo, FieldKind, Insn, Program, TemplateInfo};
pub use template::{FieldType, TemplateSet};
pub use value::Decimal;
pub mod decoder;
pub use decoder::{Decoder, Entry, Message, Value};
pub mod framing;
pub mod json;
pub mod native;
pub use framing::{for_each, opra_block, Framing, OpraBlock, Position, StreamError};
pub use native::NativeKernels;
pub mod encoder;
pub use encoder::{Encoder, TemplateIdPolicy};

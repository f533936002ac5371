//! How FAST messages sit in a file or a datagram.
//!
//! * `u32le`: `[u32 little-endian length][message]` repeated (the mFAST corpus).
//! * `opra`: legacy OPRA FAST v2 blocks, `[u32 big-endian block length][SOH 0x01]`, then
//!   `[u8 length][message]` repeated, then `[ETX 0x03]`; the block length counts SOH to ETX.
//!   Dictionary state carries from block to block (the OpenFAST OPRA capture needs it: its
//!   last block's first message copies fields from the block before).
//! * `raw`: messages back to back with nothing between them; the decoder finds each end.
//!
//! A framing error says what was wrong and the byte offset in the input. A message whose
//! decode takes fewer or more bytes than its frame gives is an error, never skipped silently.

use crate::decoder::{Decoder, Message};
use crate::error::Error;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    U32Le,
    Opra,
    Raw,
}

impl std::str::FromStr for Framing {
    type Err = UnknownFraming;
    fn from_str(s: &str) -> Result<Framing, UnknownFraming> {
        match s {
            "u32le" => Ok(Framing::U32Le),
            "opra" => Ok(Framing::Opra),
            "raw" => Ok(Framing::Raw),
            other => Err(UnknownFraming(other.to_string())),
        }
    }
}

/// A framing name that is not one of `u32le`, `opra`, `raw`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFraming(pub String);

impl std::fmt::Display for UnknownFraming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown framing {:?} (u32le, opra or raw)", self.0)
    }
}

impl std::error::Error for UnknownFraming {}

/// A stream error: where in the input, which message, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError {
    /// Byte offset in the whole input.
    pub offset: usize,
    /// Index of the message (counting from 0) being read.
    pub message: u64,
    pub reason: String,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message {} at byte {}: {}", self.message, self.offset, self.reason)
    }
}

impl std::error::Error for StreamError {}

/// Where a message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset of the message's first byte in the input.
    pub offset: usize,
    /// Message length in bytes.
    pub len: usize,
    /// Index of the message.
    pub index: u64,
    /// Index of the block (OPRA), else 0.
    pub block: u64,
}

fn decode_err(e: Error, base: usize, index: u64, p: &crate::Program) -> StreamError {
    let field = p.fields.get(e.field as usize).map(|f| format!(" (field {:?})", f.name)).unwrap_or_default();
    StreamError { offset: base + e.offset, message: index, reason: format!("{}{}", e.kind, field) }
}

/// The messages of one OPRA FAST v2 block, `[SOH 0x01]([u8 length][message])*[ETX 0x03]`:
/// each as (offset of its first byte in the block, its bytes). A block that breaks the
/// format gives one error (offset in the block, reason) and then ends.
pub fn opra_block(block: &[u8]) -> OpraBlock<'_> {
    OpraBlock { b: block, i: 0 }
}

/// The iterator of [`opra_block`].
#[derive(Debug, Clone)]
pub struct OpraBlock<'a> {
    b: &'a [u8],
    /// Next length byte; 0 before the SOH is checked; past the end when done.
    i: usize,
}

impl<'a> Iterator for OpraBlock<'a> {
    type Item = Result<(usize, &'a [u8]), (usize, String)>;
    fn next(&mut self) -> Option<Self::Item> {
        let b = self.b;
        if self.i == 0 {
            if b.len() < 2 || b[0] != 0x01 || b[b.len() - 1] != 0x03 {
                self.i = usize::MAX;
                return Some(Err((0, "block does not start with SOH (0x01) and end with ETX (0x03)".into())));
            }
            self.i = 1;
        }
        let etx = b.len().checked_sub(1)?;
        if self.i >= etx {
            return None;
        }
        let (at, len) = (self.i, usize::from(b[self.i]));
        let start = at + 1;
        if start + len > etx {
            self.i = usize::MAX;
            return Some(Err((at, format!("message length {len} runs past the block's ETX"))));
        }
        self.i = start + len;
        Some(Ok((start, &b[start..start + len])))
    }
}

/// Decode every message of `data`, calling `f` for each; `f` returns false to stop.
/// Returns the number of messages decoded.
pub fn for_each(
    dec: &mut Decoder,
    framing: Framing,
    data: &[u8],
    msg: &mut Message,
    mut f: impl FnMut(&Message, Position) -> bool,
) -> Result<u64, StreamError> {
    let p = dec.program();
    let mut n = 0u64;
    let mut at = 0usize;
    match framing {
        Framing::U32Le => {
            while at < data.len() {
                let Some(h) = data.get(at..at + 4) else {
                    return Err(StreamError {
                        offset: at,
                        message: n,
                        reason: format!("{} bytes left, too few for a length prefix", data.len() - at),
                    });
                };
                let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
                let start = at + 4;
                let Some(body) = data.get(start..start.saturating_add(len)) else {
                    return Err(StreamError {
                        offset: at,
                        message: n,
                        reason: format!("length prefix {len} runs past the end of the input"),
                    });
                };
                let used = dec.decode(body, msg).map_err(|e| decode_err(e, start, n, p))?;
                if used != len {
                    return Err(StreamError {
                        offset: start + used,
                        message: n,
                        reason: format!("message decoded in {used} bytes, its frame has {len}"),
                    });
                }
                let go = f(msg, Position { offset: start, len, index: n, block: 0 });
                n += 1;
                at = start + len;
                if !go {
                    break;
                }
            }
        }
        Framing::Opra => {
            let mut block = 0u64;
            'blocks: while at < data.len() {
                let Some(h) = data.get(at..at + 4) else {
                    return Err(StreamError {
                        offset: at,
                        message: n,
                        reason: "too few bytes for a block length".into(),
                    });
                };
                let blen = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize;
                let bstart = at + 4;
                let Some(b) = data.get(bstart..bstart.saturating_add(blen)) else {
                    return Err(StreamError {
                        offset: at,
                        message: n,
                        reason: format!("block length {blen} runs past the end of the input"),
                    });
                };
                for m in opra_block(b) {
                    let (start, body) =
                        m.map_err(|(off, reason)| StreamError { offset: bstart + off, message: n, reason })?;
                    let len = body.len();
                    let used = dec.decode(body, msg).map_err(|e| decode_err(e, bstart + start, n, p))?;
                    if used != len {
                        return Err(StreamError {
                            offset: bstart + start + used,
                            message: n,
                            reason: format!("message decoded in {used} bytes, its length byte says {len}"),
                        });
                    }
                    let go = f(msg, Position { offset: bstart + start, len, index: n, block });
                    n += 1;
                    if !go {
                        break 'blocks;
                    }
                }
                block += 1;
                at = bstart + blen;
            }
        }
        Framing::Raw => {
            while at < data.len() {
                let used = dec.decode(&data[at..], msg).map_err(|e| decode_err(e, at, n, p))?;
                let go = f(msg, Position { offset: at, len: used, index: n, block: 0 });
                n += 1;
                at += used;
                if !go {
                    break;
                }
            }
        }
    }
    Ok(n)
}

// Here rather than in `program`: it runs the decoder, and `program` stays below it.
impl crate::Program {
    /// Profile a sample with a fresh decoder and specialise for it: the 8 hottest presence
    /// maps of each segment seen in at least 2% of its occurrences, at most 64 in all.
    pub fn specialise_for(&mut self, sample: &[u8], framing: Framing) -> Result<usize, StreamError> {
        let profile = {
            let mut dec = crate::Decoder::new(self);
            dec.start_profile();
            let mut msg = crate::Message::new();
            for_each(&mut dec, framing, sample, &mut msg, |_, _| true)?;
            dec.take_profile()
        };
        Ok(self.specialise(&profile, 8, 64, 0.02))
    }
}

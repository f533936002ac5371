//! String and byte-vector fields: ASCII reads (a word at a time where it can), their
//! operators on the string dictionary, and the bytes appended to the message's arena.

use super::*;
use crate::codec::{self, AsciiRead};
use crate::error::ErrorKind;
use crate::layout::{Entry, Value, ASSIGNED, EMPTY, UNDEFINED};
use crate::program::{flag, Code, Insn};

/// Append `src` to `v`. Field values are mostly a few bytes, where a push loop is shorter
/// than the call the generic slice append makes; long ones take the slice append.
#[inline(always)]
pub(super) fn append(v: &mut Vec<u8>, src: &[u8]) {
    if src.len() <= 16 {
        for &x in src {
            v.push(x);
        }
    } else {
        v.extend_from_slice(src);
    }
}

/// A short ASCII string (up to 8 bytes) that is not NULL, empty or led by a zero byte: one
/// word load, the stop bit found by a trailing-zero count. `None`
/// leaves every other case to `str_op`.
#[inline(always)]
pub(super) fn ascii_fast(buf: &[u8], pos: &mut usize, bytes: &mut Vec<u8>) -> Option<(u32, u32)> {
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

impl<'p> Decoder<'p> {
    /// Read a string or byte vector value into the message arena. `Ok(None)` is NULL.
    #[inline(always)]
    pub(super) fn vector(
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

    pub(super) fn push_bytes(msg: &mut Message, field: u32, b: &[u8]) {
        let start = msg.bytes.len() as u32;
        append(&mut msg.bytes, b);
        msg.entries.push(Entry { field, value: Value::Bytes { start, len: b.len() as u32 } });
    }

    #[inline(never)]
    pub(super) fn str_op(&mut self, ins: &Insn, bit: bool, buf: &[u8], p: usize, msg: &mut Message) -> R<usize> {
        let mut p = p;
        self.str_inner(ins, bit, buf, &mut p, msg)?;
        Ok(p)
    }

    #[inline(always)]
    pub(super) fn str_inner(&mut self, ins: &Insn, bit: bool, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<()> {
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

    pub(super) fn str_delta(&mut self, ins: &Insn, buf: &[u8], pos: &mut usize, msg: &mut Message) -> R<()> {
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
}

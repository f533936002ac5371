//! The program as assembler-like text, one instruction per line, for people to read, diff
//! and review.

use super::*;
use std::fmt::Write;

use crate::value::Decimal;

impl Program {
    /// Print the program, one instruction per line.
    pub fn listing(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "; tickplant FAST program: templates {}, instructions {}, fields {}, dictionary slots {} integer and {} string",
            self.templates.len(),
            self.insns.len(),
            self.fields.len(),
            self.int_slots.len(),
            self.str_slots.len()
        );
        for t in &self.templates {
            let id = t.id.map_or("-".to_string(), |i| i.to_string());
            let _ = writeln!(
                out,
                "\ntemplate {} id={} insns={}..{} pmap_bits={}{}",
                t.name,
                id,
                t.start,
                t.end,
                t.bits + 1,
                if t.reset { " reset" } else { "" }
            );
            let mut ends: Vec<u32> = Vec::new();
            for i in t.start..t.end {
                while ends.last() == Some(&i) {
                    ends.pop();
                    let _ = writeln!(out, "{:04}  {}end", i, "  ".repeat(ends.len() + 1));
                }
                let ins = &self.insns[i as usize];
                let _ = writeln!(out, "{:04}  {}{}", i, "  ".repeat(ends.len() + 1), self.describe(ins));
                if matches!(ins.code, Code::Seq | Code::Group) {
                    ends.push(ins.a);
                }
            }
            while let Some(e) = ends.pop() {
                let _ = writeln!(out, "{:04}  {}end", e, "  ".repeat(ends.len() + 1));
            }
        }
        for sp in &self.specials {
            let owner = self
                .templates
                .iter()
                .find(|t| t.start == sp.segment)
                .map(|t| format!("template {}", t.name))
                .or_else(|| {
                    self.insns
                        .iter()
                        .find(|i| matches!(i.code, Code::Seq | Code::Group) && i.slot == sp.segment)
                        .map(|i| format!("{} {}", i.code.mnemonic(), self.fields[i.field as usize].name))
                })
                .unwrap_or_default();
            let bits: String = (0..(128 - sp.pmap.trailing_zeros()).clamp(1, 126))
                .map(|k| if (sp.pmap >> (127 - k)) & 1 == 1 { '1' } else { '0' })
                .collect();
            let _ = writeln!(
                out,
                "\nspecial {owner} pmap={bits} hits={} insns={}..{} ({} generic instructions -> {})",
                sp.hits,
                sp.start,
                sp.end,
                sp.generic_len,
                sp.end - sp.start
            );
            if let Some(k) = sp.kernel.checked_sub(1).and_then(|k| self.kernels.get(k as usize)) {
                let _ = writeln!(
                    out,
                    "        kernel: {} operations into a frame of {} entries",
                    k.ops.1 - k.ops.0,
                    k.frame.1 - k.frame.0
                );
            }
            for i in sp.start..sp.end {
                let ins = &self.insns[i as usize];
                if ins.code == Code::Consts {
                    let names = self.const_names(ins.a as usize, ins.init as usize);
                    let _ = writeln!(out, "{i:04}    consts        {names}");
                } else {
                    let _ = writeln!(out, "{i:04}    {}", self.describe(ins));
                }
                if ins.then != 0 {
                    let names = self.const_names((ins.then >> 8) as usize, (ins.then & 0xff) as usize);
                    let _ = writeln!(out, "        then consts   {names}");
                }
            }
        }
        out
    }

    /// The field names of `n` prebuilt entries at `first` in [`Program::consts`].
    pub(super) fn const_names(&self, first: usize, n: usize) -> String {
        let names: Vec<&str> =
            self.consts[first..first + n].iter().map(|e| self.fields[e.field as usize].name.as_str()).collect();
        names.join(" ")
    }

    pub(super) fn type_name(&self, ins: &Insn) -> &'static str {
        match ins.code {
            Code::IntNone | Code::IntConst | Code::IntDefault | Code::IntCopy | Code::IntIncr | Code::IntDelta => {
                match (ins.has(flag::SIGNED), ins.has(flag::W32)) {
                    (false, true) => "u32",
                    (true, true) => "i32",
                    (false, false) => "u64",
                    (true, false) => "i64",
                }
            }
            Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta | Code::DecSplit => {
                "dec"
            }
            Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                if ins.has(flag::BYTES) {
                    "bytes"
                } else if ins.has(flag::UNICODE) {
                    "utf8"
                } else {
                    "ascii"
                }
            }
            Code::IntStore | Code::IntLoad | Code::IntLoadIncr => match (ins.has(flag::SIGNED), ins.has(flag::W32)) {
                (false, true) => "u32",
                (true, true) => "i32",
                (false, false) => "u64",
                (true, false) => "i64",
            },
            Code::DecStore | Code::DecLoad => "dec",
            Code::StrStore | Code::StrLoad => {
                if ins.has(flag::BYTES) {
                    "bytes"
                } else if ins.has(flag::UNICODE) {
                    "utf8"
                } else {
                    "ascii"
                }
            }
            Code::Seq | Code::Group | Code::DynRef | Code::Consts => "",
        }
    }

    /// One instruction as text.
    pub fn describe(&self, ins: &Insn) -> String {
        let f = &self.fields[ins.field as usize];
        let mut s = String::new();
        let ty = self.type_name(ins);
        let op = if ty.is_empty() { ins.code.mnemonic().to_string() } else { format!("{ty}.{}", ins.code.mnemonic()) };
        let _ = write!(s, "{op:<14}");
        let _ = write!(s, "{}", f.name);
        if let Some(id) = &f.id {
            let _ = write!(s, "({id})");
        }
        if ins.has(flag::OPT) {
            s.push_str(" opt");
        }
        if ins.has(flag::NULLABLE) {
            s.push_str(" null");
        }
        match ins.code {
            Code::Seq | Code::Group => {
                let _ = write!(s, " end={:04}", ins.a);
                if ins.has(flag::PMAP) {
                    s.push_str(" pmap");
                }
            }
            Code::DecNone | Code::DecConst | Code::DecDefault | Code::DecCopy | Code::DecDelta => {
                if ins.has(flag::HAS_INIT) {
                    let _ = write!(s, " init={}", Decimal::new(ins.init, ins.a as i32));
                }
            }
            Code::StrNone | Code::StrConst | Code::StrDefault | Code::StrCopy | Code::StrDelta | Code::StrTail => {
                if ins.has(flag::HAS_INIT) {
                    let v = &self.strings[ins.a as usize];
                    let _ = write!(s, " init={:?}", String::from_utf8_lossy(v));
                }
            }
            _ => {
                if ins.has(flag::HAS_INIT) {
                    let _ = write!(s, " init={}", ins.init);
                }
            }
        }
        match ins.code {
            Code::IntCopy
            | Code::IntIncr
            | Code::IntDelta
            | Code::DecCopy
            | Code::DecDelta
            | Code::IntStore
            | Code::IntLoad
            | Code::IntLoadIncr
            | Code::DecStore
            | Code::DecLoad => {
                let _ = write!(s, " slot=i{} [{}]", ins.slot, self.int_slots[ins.slot as usize]);
            }
            Code::StrCopy | Code::StrDelta | Code::StrTail | Code::StrStore | Code::StrLoad => {
                let _ = write!(s, " slot=s{} [{}]", ins.slot, self.str_slots[ins.slot as usize]);
            }
            _ => {}
        }
        if ins.code.uses_bit(ins.has(flag::OPT)) {
            s.push_str(" bit");
        }
        s
    }
}

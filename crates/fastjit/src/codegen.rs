//! The code generator: a kernel's operations, an element loop, a kernel run on into its
//! sequence, each built as one Cranelift function with no loop and no dispatch.
//!
//! One file (about 1,100 lines): it is one type, [`Gen`], whose methods build pieces of the
//! same function and call one another (an operation's read, its delta, its store, its
//! hole), all on the builder and the cursor variables it holds; split, each part would reach
//! into the same private state.

use crate::*;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Block, BlockArg, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};

use tickplant_fast::codec::Pmap;
use tickplant_fast::native::{self as nat};
use tickplant_fast::program::{kop, KOp};
use tickplant_fast::{Entry, Value as Val};

/// A function `(i64) -> i64` (a context's address to a status or count), its body built
/// by `body`, declared and defined in `module` as `name`.
pub(crate) fn define(
    module: &mut JITModule,
    ctx: &mut cranelift_codegen::Context,
    fbc: &mut FunctionBuilderContext,
    name: &str,
    body: impl FnOnce(&mut FunctionBuilder),
) -> Result<cranelift_module::FuncId, String> {
    ctx.func.signature.params.push(AbiParam::new(types::I64));
    ctx.func.signature.returns.push(AbiParam::new(types::I64));
    let frontend = module.target_config();
    let mut b = FunctionBuilder::new(&mut ctx.func, fbc);
    body(&mut b);
    b.seal_all_blocks();
    b.finalize(frontend);
    let id = module.declare_function(name, Linkage::Local, &ctx.func.signature).map_err(|e| e.to_string())?;
    module.define_function(id, ctx).map_err(|e| format!("{name}: {e:?}"))?;
    module.clear_context(ctx);
    Ok(id)
}

/// The code generator for one kernel.
pub(crate) struct Gen<'b, 'f> {
    b: &'b mut FunctionBuilder<'f>,
    ctx: Value,
    str_slots: Vec<u32>,
    buf: Value,
    len: Value,
    /// Where the frame's entries go (the message's entries' spare room): `frame_off`
    /// bytes from `frame`.
    frame: Value,
    frame_off: i32,
    ints: Value,
    pos: Variable,
    bytes_len: Variable,
    /// Inside a kernel's operations (see [`Gen::ops`]): the next read's first byte is
    /// known to be in the buffer, and this many reads follow it; `None` elsewhere.
    guard: Option<i64>,
}

/// Loads and stores of the context, the frame and the dictionary: aligned, never trapping.
fn trusted() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Loads of the message's bytes: in bounds (checked before), not aligned.
fn bytes_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

fn args(vs: &[Value]) -> Vec<BlockArg> {
    vs.iter().map(|&v| BlockArg::Value(v)).collect()
}

/// An integer's reading: where it goes on with a value and where with NULL.
struct Read {
    /// Parameters: the value (i64) and the cursor after it.
    value: Block,
    /// Parameter: the cursor after it (only for a nullable field).
    null: Option<Block>,
}

impl<'b, 'f> Gen<'b, 'f> {
    /// The function's entry block: its context parameter, the context's fields loaded and
    /// the cursor and string bytes' length as variables. The holes flag stays in the
    /// context (`Ctx::holes`, 0 when the call starts), stored only when a field is NULL:
    /// as a variable it cost a move or two at every optional field where paths join.
    fn prologue(b: &'b mut FunctionBuilder<'f>, strs: &[u32]) -> Gen<'b, 'f> {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ctx = b.block_params(entry)[0];
        let i64t = types::I64;
        let ld = |b: &mut FunctionBuilder<'f>, off: i32| b.ins().load(i64t, trusted(), ctx, off);
        let buf = ld(b, C_BUF);
        let len = ld(b, C_LEN);
        let pos0 = ld(b, C_POS);
        let out = ld(b, C_OUT);
        let ints = ld(b, C_INTS);
        let bytes_len0 = ld(b, C_BYTES_LEN);
        let pos = b.declare_var(i64t);
        let bytes_len = b.declare_var(i64t);
        b.def_var(pos, pos0);
        b.def_var(bytes_len, bytes_len0);
        Gen { b, ctx, str_slots: strs.to_vec(), buf, len, frame: out, frame_off: 0, ints, pos, bytes_len, guard: None }
    }

    /// Store the cursor and the string bytes' length back in the context.
    fn epilogue(&mut self) {
        let p = self.b.use_var(self.pos);
        let bl = self.b.use_var(self.bytes_len);
        self.b.ins().store(trusted(), p, self.ctx, C_POS);
        self.b.ins().store(trusted(), bl, self.ctx, C_BYTES_LEN);
    }

    /// Store `v` at `off` bytes into the frame.
    fn fstore(&mut self, v: Value, off: i32) {
        self.b.ins().store(trusted(), v, self.frame, self.frame_off + off);
    }

    /// Store the low 32 bits of `v` at `off` bytes into the frame.
    fn fstore32(&mut self, v: Value, off: i32) {
        self.b.ins().istore32(trusted(), v, self.frame, self.frame_off + off);
    }

    /// The holes flag (see [`Gen::prologue`]).
    fn holes(&mut self) -> Value {
        self.b.ins().load(types::I64, trusted(), self.ctx, C_HOLES)
    }

    fn set_holes(&mut self, v: i64) {
        let v = self.b.ins().iconst(types::I64, v);
        self.b.ins().store(trusted(), v, self.ctx, C_HOLES);
    }

    /// Emit kernel `ops` writing its frame at `self.frame` (a dictionary of `int_slots`
    /// entries): at an operation it leaves (nothing of it done), `decline(self, index)` in a
    /// block of its own; after the last, the current block goes on. Returns how many of the
    /// operations run natively.
    fn ops(
        &mut self,
        ops: &[KOp],
        frame: &[Entry],
        int_slots: usize,
        decline_to: &mut dyn FnMut(&mut Gen<'b, 'f>, usize),
    ) -> usize {
        let mut native = 0;
        let mut written = 0;
        // Every read takes at least one byte. So when the bytes left are at least as many
        // as the operations' reads (up to the first without native code), each read's first
        // byte is in the buffer with no check of its own as long as every read takes one
        // byte; one that takes more checks again that the bytes left still cover the reads
        // after it (see `read_int`), and declines when not. On a well-formed stream the
        // checks hold but near a damaged or cut message's end, where the decoder takes over.
        let mut left: i64 = ops.iter().map_while(|o| self.reads(o, int_slots)).sum();
        for (i, op) in ops.iter().enumerate() {
            let k = op.k as usize;
            // The frame's constants before this operation's entry, as immediate stores.
            while written < k.min(frame.len()) {
                self.put_const(written, &frame[written]);
                written += 1;
            }
            if i == 0 && left > 0 {
                // Declined here, the first operation's: the entries before its own written.
                let p = self.b.use_var(self.pos);
                let have = self.b.ins().isub(self.len, p);
                let enough = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, have, left);
                let go = self.b.create_block();
                let short = self.b.create_block();
                self.b.set_cold_block(short);
                self.b.ins().brif(enough, go, &[], short, &[]);
                self.b.switch_to_block(short);
                decline_to(self, 0);
                self.b.switch_to_block(go);
            }
            let reads = self.reads(op, int_slots).unwrap_or(0);
            left -= reads;
            self.guard = (reads > 0).then_some(left);
            written = k + 1;
            let next = self.b.create_block();
            let decline = self.b.create_block();
            self.b.set_cold_block(decline);
            match frame.get(k) {
                Some(e) => {
                    if self.op(op, e.field, int_slots, next, decline) {
                        native += 1;
                    }
                }
                // The sequence that ends a kernel: the decoder's.
                None => {
                    self.b.ins().jump(decline, &[]);
                }
            }
            self.guard = None;
            self.b.switch_to_block(decline);
            decline_to(self, i);
            self.b.switch_to_block(next);
        }
        while written < frame.len() {
            self.put_const(written, &frame[written]);
            written += 1;
        }
        native
    }

    /// Emit kernel `ops` (frame of `frame_len` entries, a dictionary of `int_slots`
    /// entries) as a function `ctx -> operations done`; returns how many of them run
    /// natively.
    pub(crate) fn kernel(
        b: &'b mut FunctionBuilder<'f>,
        ops: &[KOp],
        frame: &[Entry],
        int_slots: usize,
        strs: &[u32],
    ) -> usize {
        let i64t = types::I64;
        let mut g = Gen::prologue(b, strs);
        let exit = g.b.create_block();
        g.b.append_block_param(exit, i64t);
        let native = g.ops(ops, frame, int_slots, &mut |g, i| {
            let at = g.b.ins().iconst(types::I64, i as i64);
            g.b.ins().jump(exit, &args(&[at]));
        });
        let n = g.b.ins().iconst(i64t, ops.len() as i64);
        g.b.ins().jump(exit, &args(&[n]));
        g.b.switch_to_block(exit);
        let at = g.b.block_params(exit)[0];
        g.epilogue();
        g.b.ins().return_(&[at]);
        native
    }

    /// Emit the element loop of a sequence (its entries' `field`) whose body's specialised
    /// segments are `specials`, each with its kernel's operations and frame when it has
    /// native code, as a function `ctx -> status` over a [`SeqCtx`]: up to `count`
    /// elements, each its `Element` entry, its presence map (up to nine bytes, recorded in
    /// the context), the kernel of the first specialised segment whose presence map it is,
    /// its frame's holes taken out, its end set. Status 0: `count` elements done; 1:
    /// stopped before an element (a presence map it does not read or has no kernel for),
    /// nothing of it done; 2: stopped in an element's kernel at the operation in
    /// `SeqCtx::ops` of the kernel in `SeqCtx::kernel`, as [`Gen::kernel`] stops.
    pub(crate) fn seq(
        b: &'b mut FunctionBuilder<'f>,
        field: u32,
        specials: &[(Pmap, Option<KernelCode>)],
        int_slots: usize,
        strs: &[u32],
    ) {
        let mut g = Gen::prologue(b, strs);
        g.elements(field, specials, int_slots);
    }

    /// Emit kernel `ops`, whose last operation is the sequence that ends it, on into that
    /// sequence (see [`NativeKernels::run_into_seq`](tickplant_fast::native::NativeKernels::run_into_seq)) as a function `ctx -> status` over
    /// a [`SeqCtx`]: the kernel's operations as [`Gen::kernel`] emits them, then the
    /// sequence's length (a mandatory uInt32 with no operator) and its entry after the
    /// frame, then up to [`SEQ_CHUNK`] elements as [`Gen::seq`] emits them (`specials`
    /// its body's specialised segments, `field` its entries'). Statuses 0 to 2 as
    /// [`Gen::seq`]'s, the length in `SeqCtx::len`; 3: stopped before the sequence was
    /// entered, at the operation in `SeqCtx::ops`, as [`Gen::kernel`] stops (at the
    /// sequence itself when the length is not one it reads or is more than the bytes
    /// left, or when a field of the kernel was NULL: the decoder takes the holes out of
    /// the frame before the sequence's entry goes after it). Returns how many of the
    /// kernel's operations run natively.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn into_seq(
        b: &'b mut FunctionBuilder<'f>,
        ops: &[KOp],
        frame: &[Entry],
        field: u32,
        specials: &[(Pmap, Option<KernelCode>)],
        int_slots: usize,
        strs: &[u32],
    ) -> usize {
        let i64t = types::I64;
        let mut g = Gen::prologue(b, strs);
        let ctx = g.ctx;
        let stop = g.b.create_block();
        g.b.set_cold_block(stop);
        g.b.append_block_param(stop, i64t);
        let (last, before) = ops.split_last().expect("a kernel that ends with a sequence");
        let at_seq = before.len() as i64;
        let native = g.ops(before, frame, int_slots, &mut |g, n| {
            let n = g.b.ins().iconst(i64t, n as i64);
            g.b.ins().jump(stop, &args(&[n]));
        });
        // The sequence: declined (the decoder's, from the start) unless the frame has no
        // holes, its length reads and is no more than the bytes left.
        let decline = g.b.create_block();
        g.b.set_cold_block(decline);
        let h = g.holes();
        let go = g.b.create_block();
        g.b.ins().brif(h, decline, &[], go, &[]);
        g.b.switch_to_block(go);
        let p = g.b.use_var(g.pos);
        let r = g.read_int(p, false, false, true, decline);
        g.b.switch_to_block(r.value);
        let len = g.b.block_params(r.value)[0];
        let np = g.b.block_params(r.value)[1];
        let left = g.b.ins().isub(g.len, np);
        let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, len, left);
        let enter = g.b.create_block();
        g.b.ins().brif(fits, enter, &[], decline, &[]);
        g.b.switch_to_block(enter);
        // The sequence's entry (its end for the decoder to set) right after the frame.
        let k = last.k as usize;
        let entry = (k * nat::ENTRY_SIZE) as i32;
        let f = g.b.ins().iconst(types::I32, i64::from(field));
        g.fstore(f, entry + nat::ENTRY_FIELD as i32);
        let t = g.b.ins().iconst(types::I32, i64::from(nat::TAG_SEQUENCE));
        g.fstore(t, entry + (nat::ENTRY_VALUE + nat::VALUE_TAG) as i32);
        // `len` fits 32 bits (read as a uInt32): the payload's end word is 0.
        g.fstore(len, entry + (nat::ENTRY_VALUE + nat::VALUE_PAYLOAD) as i32);
        g.b.ins().store(trusted(), len, ctx, S_LEN);
        g.b.def_var(g.pos, np);
        let chunk = g.b.ins().iconst(i64t, SEQ_CHUNK as i64);
        let count = g.b.ins().umin(len, chunk);
        g.b.ins().store(trusted(), count, ctx, S_COUNT);
        let out0 = g.b.ins().iadd_imm_s(g.frame, ((k + 1) * nat::ENTRY_SIZE) as i64);
        g.b.ins().store(trusted(), out0, ctx, C_OUT);
        g.elements(field, specials, int_slots);

        g.b.switch_to_block(decline);
        let at = g.b.ins().iconst(i64t, at_seq);
        g.b.ins().jump(stop, &args(&[at]));

        g.b.switch_to_block(stop);
        let n = g.b.block_params(stop)[0];
        g.b.ins().store(trusted(), n, ctx, S_OPS);
        g.epilogue();
        let status3 = g.b.ins().iconst(i64t, 3);
        g.b.ins().return_(&[status3]);
        native
    }

    /// The element loop of [`Gen::seq`] from the current block: `SeqCtx::count` elements
    /// at most, their entries from `Ctx::out` (the entry there has index
    /// `SeqCtx::first`), `SeqCtx::done` of them done so far (0); returns from the function
    /// with its status, `Ctx::out` where the next element's entry would go. What changes
    /// only from one element to the next (how many are done, the count, where they
    /// started) stays in the context and is loaded where it is used, so the registers go
    /// to the elements' fields.
    fn elements(&mut self, field: u32, specials: &[(Pmap, Option<KernelCode>)], int_slots: usize) {
        let i64t = types::I64;
        let g = self;
        let ctx = g.ctx;
        let out0 = g.b.ins().load(i64t, trusted(), ctx, C_OUT);
        // The element's entry: the frame's base, the kernel's entries after it.
        let out = g.b.declare_var(i64t);
        g.b.def_var(out, out0);
        let head = g.b.create_block();
        let body = g.b.create_block();
        let exit = g.b.create_block();
        g.b.append_block_param(exit, i64t);
        let boundary = g.b.create_block();
        g.b.set_cold_block(boundary);
        let partial = g.b.create_block();
        g.b.set_cold_block(partial);
        g.b.append_block_param(partial, i64t);
        g.b.append_block_param(partial, i64t);
        let elem_done = g.b.create_block();
        g.b.append_block_param(elem_done, i64t);
        g.b.ins().jump(head, &[]);

        g.b.switch_to_block(head);
        let iv = g.b.ins().load(i64t, trusted(), ctx, S_DONE);
        let count = g.b.ins().load(i64t, trusted(), ctx, S_COUNT);
        let all = g.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, iv, count);
        let status0 = g.b.ins().iconst(i64t, 0);
        g.b.ins().brif(all, exit, &args(&[status0]), body, &[]);

        // The presence map: up to nine bytes, left-aligned in 64 bits.
        g.b.switch_to_block(body);
        let p = g.b.use_var(g.pos);
        let (a, n) = g.stop_bit_groups(p, 3, boundary, None);
        let sevens = g.b.ins().imul_imm_s(n, 7);
        let sixty_four = g.b.ins().iconst(i64t, 64);
        let sh = g.b.ins().isub(sixty_four, sevens);
        let hi = g.b.ins().ishl(a, sh);
        let np = g.b.ins().iadd(p, n);
        // Recorded for the decoder to push (at most `count` <= SEQ_CHUNK of them).
        let iv = g.b.ins().load(i64t, trusted(), ctx, S_DONE);
        let i8x = g.b.ins().ishl_imm_s(iv, 3);
        let at = g.b.ins().iadd(ctx, i8x);
        g.b.ins().store(trusted(), hi, at, S_PM);
        let at = g.b.ins().iadd(ctx, iv);
        g.b.ins().istore8(trusted(), n, at, S_PMN);
        // The first specialised segment of this presence map, as the decoder picks it.
        let mut kblocks = Vec::new();
        for (pm, code) in specials {
            if (*pm as u64) != 0 {
                // More than 64 bits: never a presence map of nine bytes or fewer.
                continue;
            }
            let want = (*pm >> 64) as u64 as i64;
            let is = g.b.ins().icmp_imm_s(IntCC::Equal, hi, want);
            let on = g.b.create_block();
            let target = match code {
                Some(_) => {
                    let kb = g.b.create_block();
                    kblocks.push(kb);
                    kb
                }
                None => boundary,
            };
            g.b.ins().brif(is, target, &[], on, &[]);
            g.b.switch_to_block(on);
        }
        g.b.ins().jump(boundary, &[]);

        let codes = specials.iter().filter(|s| (s.0 as u64) == 0).filter_map(|s| s.1);
        for (kj, ((ops, frame), kb)) in codes.zip(kblocks).enumerate() {
            g.b.switch_to_block(kb);
            let el = g.b.use_var(out);
            // The element's entry (its end set when it is done) and its frame after it.
            let f = g.b.ins().iconst(types::I32, i64::from(field));
            g.b.ins().store(trusted(), f, el, nat::ENTRY_FIELD as i32);
            let t = g.b.ins().iconst(types::I32, i64::from(nat::TAG_ELEMENT));
            g.b.ins().store(trusted(), t, el, (nat::ENTRY_VALUE + nat::VALUE_TAG) as i32);
            // A whole entry from the start (its end 0 until the element is done): the
            // decoder gets it as it is when the code stops inside the element.
            let end0 = g.b.ins().iconst(types::I32, 0);
            g.b.ins().store(trusted(), end0, el, (nat::ENTRY_VALUE + nat::VALUE_PAYLOAD) as i32);
            g.b.def_var(g.pos, np);
            // The holes flag is 0 here: at the start (the decoder's, or the kernel's before
            // its sequence, which declines when it is not), and set back after each
            // element's holes are taken out.
            // The frame right after the element's entry: one base register for both.
            g.frame = el;
            g.frame_off = nat::ENTRY_SIZE as i32;
            let kjv = kj as i64;
            g.ops(ops, frame, int_slots, &mut |g, n| {
                let k = g.b.ins().iconst(i64t, kjv);
                let n = g.b.ins().iconst(i64t, n as i64);
                g.b.ins().jump(partial, &args(&[k, n]));
            });
            // Its holes taken out: the frame's entries that are not, moved down in order.
            let end = g.b.ins().iadd_imm_s(el, ((frame.len() + 1) * nat::ENTRY_SIZE) as i64);
            let h = g.holes();
            let compact = g.b.create_block();
            g.b.set_cold_block(compact);
            g.b.ins().brif(h, compact, &[], elem_done, &args(&[end]));
            g.b.switch_to_block(compact);
            let start = g.b.ins().iadd_imm_s(el, nat::ENTRY_SIZE as i64);
            let w_end = g.compact(start, end);
            g.set_holes(0);
            g.b.ins().jump(elem_done, &args(&[w_end]));
        }

        // An element done: its end (the index of the entry after it), on to the next.
        g.b.switch_to_block(elem_done);
        let end = g.b.block_params(elem_done)[0];
        let el = g.b.use_var(out);
        let out0 = g.b.ins().load(i64t, trusted(), ctx, C_OUT);
        let first = g.b.ins().load(i64t, trusted(), ctx, S_FIRST);
        let off = g.b.ins().isub(end, out0);
        let idx = g.b.ins().ushr_imm_u(off, 5);
        let idx = g.b.ins().iadd(idx, first);
        let idx32 = g.b.ins().ireduce(types::I32, idx);
        g.b.ins().store(trusted(), idx32, el, (nat::ENTRY_VALUE + nat::VALUE_PAYLOAD) as i32);
        g.b.def_var(out, end);
        let iv = g.b.ins().load(i64t, trusted(), ctx, S_DONE);
        let next = g.b.ins().iadd_imm_s(iv, 1);
        g.b.ins().store(trusted(), next, ctx, S_DONE);
        g.b.ins().jump(head, &[]);

        g.b.switch_to_block(boundary);
        let status1 = g.b.ins().iconst(i64t, 1);
        g.b.ins().jump(exit, &args(&[status1]));

        g.b.switch_to_block(partial);
        let k = g.b.block_params(partial)[0];
        let n = g.b.block_params(partial)[1];
        g.b.ins().store(trusted(), k, ctx, S_KERNEL);
        g.b.ins().store(trusted(), n, ctx, S_OPS);
        let status2 = g.b.ins().iconst(i64t, 2);
        g.b.ins().jump(exit, &args(&[status2]));

        g.b.switch_to_block(exit);
        let status = g.b.block_params(exit)[0];
        g.epilogue();
        let o = g.b.use_var(out);
        g.b.ins().store(trusted(), o, ctx, C_OUT);
        g.b.ins().return_(&[status]);
    }

    /// The entries from `start` to `end` that are not holes, moved down in order to
    /// `start`; returns the end of those kept.
    fn compact(&mut self, start: Value, end: Value) -> Value {
        let i64t = types::I64;
        let head = self.b.create_block();
        self.b.append_block_param(head, i64t); // read
        self.b.append_block_param(head, i64t); // write
        let look = self.b.create_block();
        let copy = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, i64t);
        self.b.ins().jump(head, &args(&[start, start]));
        self.b.switch_to_block(head);
        let r = self.b.block_params(head)[0];
        let w = self.b.block_params(head)[1];
        let at_end = self.b.ins().icmp(IntCC::Equal, r, end);
        self.b.ins().brif(at_end, done, &args(&[w]), look, &[]);
        self.b.switch_to_block(look);
        let f = self.b.ins().load(types::I32, trusted(), r, nat::ENTRY_FIELD as i32);
        let hole = self.b.ins().icmp_imm_s(IntCC::Equal, f, i64::from(nat::HOLE as i32));
        let r2 = self.b.ins().iadd_imm_s(r, nat::ENTRY_SIZE as i64);
        self.b.ins().brif(hole, head, &args(&[r2, w]), copy, &[]);
        self.b.switch_to_block(copy);
        for word in 0..(nat::ENTRY_SIZE / 8) as i32 {
            let v = self.b.ins().load(i64t, trusted(), r, word * 8);
            self.b.ins().store(trusted(), v, w, word * 8);
        }
        let w2 = self.b.ins().iadd_imm_s(w, nat::ENTRY_SIZE as i64);
        self.b.ins().jump(head, &args(&[r2, w2]));
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }

    /// Write entry `j` as the constant `e` of the frame.
    fn put_const(&mut self, j: usize, e: &Entry) {
        let at = (j * nat::ENTRY_SIZE) as i32;
        let (tag, w0, w1): (u32, i64, i64) = match e.value {
            Val::UInt(v) => (nat::TAG_UINT, v as i64, 0),
            Val::Int(v) => (nat::TAG_INT, v, 0),
            Val::Decimal(d) => (nat::TAG_DECIMAL, i64::from(d.exponent as u32), d.mantissa),
            Val::Bytes { start, len } => (nat::TAG_BYTES, i64::from(start) | i64::from(len) << 32, 0),
            Val::Static { index } => (nat::TAG_STATIC, i64::from(index), 0),
            Val::Sequence { len, end } => (nat::TAG_SEQUENCE, i64::from(len) | i64::from(end) << 32, 0),
            Val::Element { end } => (nat::TAG_ELEMENT, i64::from(end), 0),
            Val::Group { end } => (nat::TAG_GROUP, i64::from(end), 0),
            Val::Template { template, end } => (nat::TAG_TEMPLATE, i64::from(template) | i64::from(end) << 32, 0),
        };
        let v = at + nat::ENTRY_VALUE as i32;
        let f = self.b.ins().iconst(types::I32, i64::from(e.field));
        self.fstore(f, at + nat::ENTRY_FIELD as i32);
        let t = self.b.ins().iconst(types::I32, i64::from(tag));
        self.fstore(t, v + nat::VALUE_TAG as i32);
        let a = self.b.ins().iconst(types::I64, w0);
        self.fstore(a, v + nat::VALUE_PAYLOAD as i32);
        if tag == nat::TAG_DECIMAL {
            // Only a decimal's payload has a second word (its mantissa).
            let b = self.b.ins().iconst(types::I64, w1);
            self.fstore(b, v + nat::VALUE_PAYLOAD as i32 + 8);
        }
    }

    /// How many stop-bit entities operation `op` reads, each of at least one byte (a
    /// decimal's exponent and mantissa: two, one when the exponent is NULL); `None` when
    /// it has no native code (it always declines).
    fn reads(&self, op: &KOp, int_slots: usize) -> Option<i64> {
        let slot_ok = (op.slot as usize) < int_slots;
        match op.kind {
            0..=7 => Some(1),
            8..=15 | 32..=39 | kop::DEC_CONST_DELTA if slot_ok => Some(1),
            16..=31 if slot_ok => Some(0),
            kop::DEC_READ_DELTA if slot_ok => Some(2),
            kop::ASCII => Some(1),
            kop::ASCII_STORE if self.str_slots.contains(&op.slot) => Some(1),
            kop::ASCII_LOAD if self.str_slots.contains(&op.slot) => Some(0),
            _ => None,
        }
    }

    /// Emit one operation in the current block: on to `next` when done, to `decline`
    /// (nothing changed) when the decoder must run it. Returns whether it has native code.
    fn op(&mut self, op: &KOp, field: u32, int_slots: usize, next: Block, decline: Block) -> bool {
        let k = op.k as usize;
        if self.reads(op, int_slots).is_none() {
            self.b.ins().jump(decline, &[]);
            return false;
        }
        let entry = (k * nat::ENTRY_SIZE) as i32;
        // The entry's field first: counted as written only once the operation is done.
        let f = self.b.ins().iconst(types::I32, i64::from(field));
        self.fstore(f, entry + nat::ENTRY_FIELD as i32);
        match op.kind {
            0..=39 => {
                let family = op.kind / 8;
                let signed = op.kind & 1 != 0;
                let nullable = op.kind & 2 != 0;
                let w32 = op.kind & 4 != 0;
                let tag = if signed { nat::TAG_INT } else { nat::TAG_UINT };
                match family {
                    kop::INT_READ | kop::INT_STORE => {
                        let p = self.b.use_var(self.pos);
                        let r = self.read_int(p, signed, nullable, w32, decline);
                        self.b.switch_to_block(r.value);
                        let v = self.b.block_params(r.value)[0];
                        let np = self.b.block_params(r.value)[1];
                        if family == kop::INT_STORE {
                            self.slot_store(op.slot, v, None, nat::ASSIGNED);
                        }
                        self.put_int(entry, tag, v);
                        self.b.def_var(self.pos, np);
                        self.b.ins().jump(next, &[]);
                        if let Some(nb) = r.null {
                            self.b.switch_to_block(nb);
                            if family == kop::INT_STORE {
                                let zero = self.b.ins().iconst(types::I64, 0);
                                self.slot_store(op.slot, zero, None, nat::EMPTY);
                            }
                            self.null_done(nb, entry, next);
                        }
                    }
                    kop::INT_LOAD | kop::INT_LOAD_INCR => {
                        let base = (op.slot as usize * nat::SLOT_SIZE) as i32;
                        let st = self.b.ins().uload8(types::I64, trusted(), self.ints, base + nat::SLOT_STATE as i32);
                        let assigned = self.b.ins().icmp_imm_s(IntCC::Equal, st, i64::from(nat::ASSIGNED));
                        let yes = self.b.create_block();
                        let no = self.b.create_block();
                        self.b.ins().brif(assigned, yes, &[], no, &[]);
                        // Not assigned: undefined with an initial value takes it; the rest is
                        // the decoder's.
                        self.b.switch_to_block(no);
                        if op.has_init {
                            let undefined = self.b.ins().icmp_imm_s(IntCC::Equal, st, i64::from(nat::UNDEFINED));
                            let init_b = self.b.create_block();
                            self.b.ins().brif(undefined, init_b, &[], decline, &[]);
                            self.b.switch_to_block(init_b);
                            let init = self.b.ins().iconst(types::I64, op.init);
                            self.slot_store(op.slot, init, None, nat::ASSIGNED);
                            self.put_int(entry, tag, init);
                            self.b.ins().jump(next, &[]);
                        } else {
                            self.b.ins().jump(decline, &[]);
                        }
                        self.b.switch_to_block(yes);
                        let v = self.b.ins().load(types::I64, trusted(), self.ints, base + nat::SLOT_V as i32);
                        let v = if family == kop::INT_LOAD_INCR {
                            let one = self.b.ins().iconst(types::I64, 1);
                            let nv = self.add_in_type(signed, w32, v, one, decline);
                            self.b.ins().store(trusted(), nv, self.ints, base + nat::SLOT_V as i32);
                            nv
                        } else {
                            v
                        };
                        self.put_int(entry, tag, v);
                        self.b.ins().jump(next, &[]);
                    }
                    _ => {
                        let p = self.b.use_var(self.pos);
                        let r = self.read_int(p, true, nullable, false, decline);
                        if let Some(nb) = r.null {
                            // A NULL delta: absent, the dictionary as it was.
                            self.b.switch_to_block(nb);
                            self.null_done(nb, entry, next);
                        }
                        self.b.switch_to_block(r.value);
                        let d = self.b.block_params(r.value)[0];
                        let np = self.b.block_params(r.value)[1];
                        let v = self.delta(op, signed, w32, d, decline);
                        self.put_int(entry, tag, v);
                        self.b.def_var(self.pos, np);
                        self.b.ins().jump(next, &[]);
                    }
                }
            }
            kop::DEC_CONST_DELTA => {
                let p = self.b.use_var(self.pos);
                let r = self.read_int(p, true, false, false, decline);
                self.b.switch_to_block(r.value);
                let d = self.b.block_params(r.value)[0];
                let np = self.b.block_params(r.value)[1];
                let m = self.delta(op, true, false, d, decline);
                let x = self.b.ins().iconst(types::I32, i64::from(op.arg));
                self.put_decimal(entry, x, m);
                self.b.def_var(self.pos, np);
                self.b.ins().jump(next, &[]);
            }
            kop::DEC_READ_DELTA => {
                let p = self.b.use_var(self.pos);
                // Two reads: the mantissa's after the exponent's.
                let guard = self.guard;
                self.guard = guard.map(|a| a + 1);
                let r = self.read_int(p, true, op.arg != 0, true, decline);
                self.guard = guard;
                if let Some(nb) = r.null {
                    // A NULL exponent: the decimal is absent, no mantissa follows.
                    self.b.switch_to_block(nb);
                    self.null_done(nb, entry, next);
                }
                self.b.switch_to_block(r.value);
                let x = self.b.block_params(r.value)[0];
                let np = self.b.block_params(r.value)[1];
                // -63..=63: x + 63 <= 126, unsigned.
                let biased = self.b.ins().iadd_imm_s(x, 63);
                let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThanOrEqual, biased, 126);
                let mant = self.b.create_block();
                self.b.ins().brif(in_range, mant, &[], decline, &[]);
                self.b.switch_to_block(mant);
                let r2 = self.read_int(np, true, false, false, decline);
                self.b.switch_to_block(r2.value);
                let d = self.b.block_params(r2.value)[0];
                let np2 = self.b.block_params(r2.value)[1];
                let m = self.delta(op, true, false, d, decline);
                let x32 = self.b.ins().ireduce(types::I32, x);
                self.put_decimal(entry, x32, m);
                self.b.def_var(self.pos, np2);
                self.b.ins().jump(next, &[]);
            }
            kop::ASCII_LOAD => {
                // The slot's value when it is one character; any other is the decoder's.
                let m = self.mirror(op.slot);
                // Its state and one-character flag, as one little-endian 16-bit word.
                let w = self.b.ins().uload16(types::I64, trusted(), self.ctx, m);
                let ok = self.b.ins().icmp_imm_s(IntCC::Equal, w, i64::from(nat::ASSIGNED) | 0x100);
                let load = self.b.create_block();
                self.b.ins().brif(ok, load, &[], decline, &[]);
                self.b.switch_to_block(load);
                let ch = self.b.ins().uload8(types::I64, trusted(), self.ctx, m + 2);
                self.push_char(entry, ch);
                self.b.ins().jump(next, &[]);
            }
            _ => {
                // kop::ASCII and kop::ASCII_STORE: one character (its byte above 0x80), or
                // NULL (0x80) when the field is nullable; any other string is the decoder's.
                let store = op.kind == kop::ASCII_STORE;
                let p = self.b.use_var(self.pos);
                if self.guard.is_none() {
                    let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, p, self.len);
                    let have = self.b.create_block();
                    self.b.ins().brif(inb, have, &[], decline, &[]);
                    self.b.switch_to_block(have);
                }
                let addr = self.b.ins().iadd(self.buf, p);
                let c = self.b.ins().uload8(types::I64, bytes_flags(), addr, 0);
                let one = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, c, 0x80);
                let one_b = self.b.create_block();
                let other = self.b.create_block();
                self.b.ins().brif(one, one_b, &[], other, &[]);
                self.b.switch_to_block(other);
                if op.arg != 0 {
                    let null = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0x80);
                    let null_b = self.b.create_block();
                    self.b.ins().brif(null, null_b, &[], decline, &[]);
                    self.b.switch_to_block(null_b);
                    if store {
                        // NULL: a copy's slot is empty.
                        let m = self.mirror(op.slot);
                        self.set_mirror(m, nat::EMPTY, None);
                    }
                    self.put_hole(entry);
                    let np = self.b.ins().iadd_imm_s(p, 1);
                    self.b.def_var(self.pos, np);
                    self.b.ins().jump(next, &[]);
                } else {
                    self.b.ins().jump(decline, &[]);
                }
                self.b.switch_to_block(one_b);
                let ch = self.b.ins().band_imm_s(c, 0x7f);
                self.push_char(entry, ch);
                if store {
                    let m = self.mirror(op.slot);
                    self.set_mirror(m, nat::ASSIGNED, Some(ch));
                }
                let np = self.b.ins().iadd_imm_s(p, 1);
                self.b.def_var(self.pos, np);
                self.b.ins().jump(next, &[]);
            }
        }
        true
    }

    /// The 7-bit groups of a stop-bit entity at `p`, up to nine bytes: the code goes on in a
    /// block whose parameters are the groups accumulated (i64, the first the highest) and
    /// their count. Past the end of the buffer, or no stop bit in nine bytes, goes to
    /// `decline`. Entities of more than `straight` bytes are read out of the straight line.
    /// `first`: the entity's first byte, already read (and not its last).
    fn stop_bit_groups(&mut self, p: Value, straight: i64, decline: Block, first: Option<Value>) -> (Value, Value) {
        let i64t = types::I64;
        let got = self.b.create_block();
        self.b.append_block_param(got, i64t); // the 7-bit groups
        self.b.append_block_param(got, i64t); // their count
        let mut acc: Option<Value> = first.map(|b| self.b.ins().band_imm_s(b, 0x7f));
        for j in i64::from(first.is_some())..9 {
            let idx = self.b.ins().iadd_imm_s(p, j);
            let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, idx, self.len);
            let load = self.b.create_block();
            self.b.ins().brif(inb, load, &[], decline, &[]);
            self.b.switch_to_block(load);
            let addr = self.b.ins().iadd(self.buf, idx);
            let byte = self.b.ins().uload8(i64t, bytes_flags(), addr, 0);
            let low = self.b.ins().band_imm_s(byte, 0x7f);
            let a = match acc {
                None => low,
                Some(a) => {
                    let sh = self.b.ins().ishl_imm_s(a, 7);
                    self.b.ins().bor(sh, low)
                }
            };
            let stop = self.b.ins().band_imm_s(byte, 0x80);
            let n = self.b.ins().iconst(i64t, j + 1);
            if j == 8 {
                self.b.ins().brif(stop, got, &args(&[a, n]), decline, &[]);
            } else {
                let more = self.b.create_block();
                if j + 1 >= straight {
                    self.b.set_cold_block(more);
                }
                self.b.ins().brif(stop, got, &args(&[a, n]), more, &[]);
                self.b.switch_to_block(more);
            }
            acc = Some(a);
        }
        self.b.switch_to_block(got);
        (self.b.block_params(got)[0], self.b.block_params(got)[1])
    }

    /// A stop-bit integer at `p` (up to nine bytes), shaped as the decoder's fast read
    /// shapes it: sign-extended when `signed`, NULL and the bias taken off when `nullable`,
    /// a 32-bit type's range checked for values of more than four bytes. Anything else
    /// (past the end, ten bytes, out of range) goes to `decline`. A value of one byte, the
    /// most common by far, is shaped on a path of its own, its length a constant there.
    fn read_int(&mut self, p: Value, signed: bool, nullable: bool, w32: bool, decline: Block) -> Read {
        let i64t = types::I64;
        // Within a kernel's guard (see `Gen::ops`): the first byte is in the buffer; `after`
        // reads follow this one.
        let guard = self.guard;
        let value = self.b.create_block();
        self.b.append_block_param(value, i64t);
        self.b.append_block_param(value, i64t);
        let null = if nullable {
            let nb = self.b.create_block();
            self.b.append_block_param(nb, i64t);
            Some(nb)
        } else {
            None
        };
        if guard.is_none() {
            let inb = self.b.ins().icmp(IntCC::UnsignedLessThan, p, self.len);
            let load = self.b.create_block();
            self.b.ins().brif(inb, load, &[], decline, &[]);
            self.b.switch_to_block(load);
        }
        let addr = self.b.ins().iadd(self.buf, p);
        let byte = self.b.ins().uload8(i64t, bytes_flags(), addr, 0);
        let stop = self.b.ins().band_imm_s(byte, 0x80);
        let one = self.b.create_block();
        let multi = self.b.create_block();
        self.b.ins().brif(stop, one, &[], multi, &[]);
        self.b.switch_to_block(one);
        let a = self.b.ins().band_imm_s(byte, 0x7f);
        let np = self.b.ins().iadd_imm_s(p, 1);
        let sh = self.b.ins().iconst(i64t, 64 - 7);
        self.shape(a, sh, np, signed, null, value);
        self.b.switch_to_block(multi);
        // Values of five bytes or more are rare: out of the straight line.
        let (a, n) = self.stop_bit_groups(p, 4, decline, Some(byte));
        let np = self.b.ins().iadd(p, n);
        if let Some(after) = guard.filter(|&a| a > 0) {
            // More than one byte: the bytes left must still cover the reads after it.
            let have = self.b.ins().isub(self.len, np);
            let enough = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, have, after);
            let go = self.b.create_block();
            self.b.ins().brif(enough, go, &[], decline, &[]);
            self.b.switch_to_block(go);
        }
        let sevens = self.b.ins().imul_imm_s(n, 7);
        let sixty_four = self.b.ins().iconst(types::I64, 64);
        let sh = self.b.ins().isub(sixty_four, sevens);
        if w32 {
            // Four groups or fewer (28 bits) fit 32 bits, signed or not.
            let long = self.b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, n, 4);
            let check = self.b.create_block();
            self.b.set_cold_block(check);
            let short = self.b.create_block();
            self.b.ins().brif(long, check, &[], short, &[]);
            self.b.switch_to_block(check);
            let checked = self.b.create_block();
            self.b.append_block_param(checked, i64t);
            self.b.append_block_param(checked, i64t);
            self.shape(a, sh, np, signed, null, checked);
            self.b.switch_to_block(checked);
            let v = self.b.block_params(checked)[0];
            let ok = self.fits32(signed, v);
            self.b.ins().brif(ok, value, &args(&[v, np]), decline, &[]);
            self.b.switch_to_block(short);
        }
        self.shape(a, sh, np, signed, null, value);
        Read { value, null }
    }

    /// The 7-bit groups `a` of an integer (`sh` = 64 less their bits; the cursor `np`
    /// after them) shaped as a field's value: to `value` with it and `np`, or to `null`
    /// with `np`.
    fn shape(&mut self, a: Value, sh: Value, np: Value, signed: bool, null: Option<Block>, value: Block) {
        let v = if signed {
            let up = self.b.ins().ishl(a, sh);
            let v = self.b.ins().sshr(up, sh);
            if let Some(nb) = null {
                let nn = self.b.create_block();
                self.b.ins().brif(v, nn, &[], nb, &args(&[np]));
                self.b.switch_to_block(nn);
                let pos = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, v, 0);
                let less = self.b.ins().iadd_imm_s(v, -1);
                self.b.ins().select(pos, less, v)
            } else {
                v
            }
        } else if let Some(nb) = null {
            let nn = self.b.create_block();
            self.b.ins().brif(a, nn, &[], nb, &args(&[np]));
            self.b.switch_to_block(nn);
            self.b.ins().iadd_imm_s(a, -1)
        } else {
            a
        };
        self.b.ins().jump(value, &args(&[v, np]));
    }

    /// Whether `v` is in the range of int32 (`signed`) or uInt32.
    fn fits32(&mut self, signed: bool, v: Value) -> Value {
        if signed {
            let low = self.b.ins().ireduce(types::I32, v);
            let back = self.b.ins().sextend(types::I64, low);
            self.b.ins().icmp(IntCC::Equal, back, v)
        } else {
            self.b.ins().icmp_imm_s(IntCC::UnsignedLessThanOrEqual, v, i64::from(u32::MAX))
        }
    }

    /// `v + d` in the field's type (the decoder's `add_in_type`): a sum out of it goes to
    /// `decline`; the current block goes on with it. One branch per check: as booleans
    /// combined, each cost a flag set and a test.
    fn add_in_type(&mut self, signed: bool, w32: bool, v: Value, d: Value, decline: Block) -> Value {
        if w32 || signed {
            let (r, of) = self.b.ins().sadd_overflow(v, d);
            let no_of = self.b.create_block();
            self.b.ins().brif(of, decline, &[], no_of, &[]);
            self.b.switch_to_block(no_of);
            if w32 {
                let fits = self.fits32(signed, r);
                let ok = self.b.create_block();
                self.b.ins().brif(fits, ok, &[], decline, &[]);
                self.b.switch_to_block(ok);
            }
            r
        } else {
            // uInt64: v as u64 plus a signed d, neither past u64::MAX nor below 0.
            let r = self.b.ins().iadd(v, d);
            let up = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, r, v);
            let down = self.b.ins().icmp(IntCC::UnsignedLessThan, r, v);
            let non_neg = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, d, 0);
            let in_range = self.b.ins().select(non_neg, up, down);
            let ok = self.b.create_block();
            self.b.ins().brif(in_range, ok, &[], decline, &[]);
            self.b.switch_to_block(ok);
            r
        }
    }

    /// A delta `d` applied to the slot of `op` as the decoder's kernel applies it: the
    /// previous value (an undefined entry's initial value, or 0), the sum in the field's
    /// type, the slot assigned (an assigned one keeps its exponent). An empty slot or a sum
    /// out of range goes to `decline`. Leaves the current block at the point after.
    fn delta(&mut self, op: &KOp, signed: bool, w32: bool, d: Value, decline: Block) -> Value {
        let base = (op.slot as usize * nat::SLOT_SIZE) as i32;
        let ints = self.ints;
        let st = self.b.ins().uload8(types::I64, trusted(), ints, base + nat::SLOT_STATE as i32);
        // Two paths, so that the common one (assigned) writes the value alone: its
        // exponent and state stay as they are.
        let assigned = self.b.ins().icmp_imm_s(IntCC::Equal, st, i64::from(nat::ASSIGNED));
        let yes = self.b.create_block();
        let no = self.b.create_block();
        let done = self.b.create_block();
        self.b.append_block_param(done, types::I64);
        self.b.ins().brif(assigned, yes, &[], no, &[]);
        self.b.switch_to_block(yes);
        let old = self.b.ins().load(types::I64, trusted(), ints, base + nat::SLOT_V as i32);
        let v = self.add_in_type(signed, w32, old, d, decline);
        self.b.ins().store(trusted(), v, ints, base + nat::SLOT_V as i32);
        self.b.ins().jump(done, &args(&[v]));
        // Undefined: the initial value (or 0), the entry assigned; empty: the decoder's.
        self.b.switch_to_block(no);
        let empty = self.b.ins().icmp_imm_s(IntCC::Equal, st, i64::from(nat::EMPTY));
        let undefined = self.b.create_block();
        self.b.ins().brif(empty, decline, &[], undefined, &[]);
        self.b.switch_to_block(undefined);
        let init = self.b.ins().iconst(types::I64, if op.has_init { op.init } else { 0 });
        let v = self.add_in_type(signed, w32, init, d, decline);
        self.slot_store(op.slot, v, None, nat::ASSIGNED);
        self.b.ins().jump(done, &args(&[v]));
        self.b.switch_to_block(done);
        self.b.block_params(done)[0]
    }

    /// Write a whole integer slot: value, exponent (0 when `None`), state.
    fn slot_store(&mut self, slot: u32, v: Value, exp: Option<Value>, state: u8) {
        let base = (slot as usize * nat::SLOT_SIZE) as i32;
        let exp = match exp {
            Some(e) => e,
            None => self.b.ins().iconst(types::I32, 0),
        };
        let st = self.b.ins().iconst(types::I8, i64::from(state));
        self.b.ins().store(trusted(), v, self.ints, base + nat::SLOT_V as i32);
        self.b.ins().store(trusted(), exp, self.ints, base + nat::SLOT_EXP as i32);
        self.b.ins().store(trusted(), st, self.ints, base + nat::SLOT_STATE as i32);
    }

    fn put_int(&mut self, entry: i32, tag: u32, v: Value) {
        let off = entry + nat::ENTRY_VALUE as i32;
        let t = self.b.ins().iconst(types::I32, i64::from(tag));
        self.fstore(t, off + nat::VALUE_TAG as i32);
        self.fstore(v, off + nat::VALUE_PAYLOAD as i32);
    }

    fn put_decimal(&mut self, entry: i32, exponent: Value, mantissa: Value) {
        let off = entry + nat::ENTRY_VALUE as i32;
        let t = self.b.ins().iconst(types::I32, i64::from(nat::TAG_DECIMAL));
        self.fstore(t, off + nat::VALUE_TAG as i32);
        self.fstore(exponent, off + nat::VALUE_PAYLOAD as i32);
        self.fstore(mantissa, off + nat::VALUE_PAYLOAD as i32 + 8);
    }

    /// Offset in the context of the packed word of string slot `slot` (one of
    /// `self.str_slots`, checked when the operation was chosen).
    fn mirror(&self, slot: u32) -> i32 {
        let i = self.str_slots.iter().position(|&s| s == slot).unwrap_or(0);
        C_STRS + i as i32 * STR_MIRROR_SIZE
    }

    /// The mirrored slot at `m` set to `state` (and, when assigned, the one character `ch`),
    /// marked changed for the decoder to write back.
    fn set_mirror(&mut self, m: i32, state: u8, ch: Option<Value>) {
        let st = self.b.ins().iconst(types::I8, i64::from(state));
        self.b.ins().store(trusted(), st, self.ctx, m);
        if let Some(ch) = ch {
            let one = self.b.ins().iconst(types::I8, 1);
            self.b.ins().store(trusted(), one, self.ctx, m + 1);
            self.b.ins().istore8(trusted(), ch, self.ctx, m + 2);
        }
        let dirty = self.b.ins().iconst(types::I8, 1);
        self.b.ins().store(trusted(), dirty, self.ctx, m + 3);
    }

    /// Push the character `ch` onto the message's string bytes and write entry `entry` as
    /// those bytes.
    fn push_char(&mut self, entry: i32, ch: Value) {
        let bl = self.b.use_var(self.bytes_len);
        // No check of the room: the caller made room for every string operation of the
        // call (see [`chars`]). The pointer is loaded here: kept in a register through the
        // whole function, it cost spills in the code around.
        let bytes = self.b.ins().load(types::I64, trusted(), self.ctx, C_BYTES);
        let at = self.b.ins().iadd(bytes, bl);
        self.b.ins().istore8(trusted(), ch, at, 0);
        let nbl = self.b.ins().iadd_imm_s(bl, 1);
        self.b.def_var(self.bytes_len, nbl);
        let v = nat::ENTRY_VALUE as i32;
        let tag = self.b.ins().iconst(types::I32, i64::from(nat::TAG_BYTES));
        self.fstore(tag, entry + v + nat::VALUE_TAG as i32);
        self.fstore32(bl, entry + v + nat::VALUE_PAYLOAD as i32);
        let len1 = self.b.ins().iconst(types::I32, 1);
        self.fstore(len1, entry + v + nat::VALUE_PAYLOAD as i32 + 4);
    }

    /// The end of an operation whose field turned out NULL (in block `nb`, whose parameter
    /// is the cursor after it): its entry a hole, the cursor moved on, on to `next`.
    fn null_done(&mut self, nb: Block, entry: i32, next: Block) {
        let np = self.b.block_params(nb)[0];
        self.put_hole(entry);
        self.b.def_var(self.pos, np);
        self.b.ins().jump(next, &[]);
    }

    fn put_hole(&mut self, entry: i32) {
        // A whole entry (the decoder takes it out): UInt(0) marked HOLE.
        let zero = self.b.ins().iconst(types::I64, 0);
        self.put_int(entry, nat::TAG_UINT, zero);
        let h = self.b.ins().iconst(types::I32, i64::from(nat::HOLE));
        self.fstore(h, entry + nat::ENTRY_FIELD as i32);
        self.set_holes(1);
    }
}

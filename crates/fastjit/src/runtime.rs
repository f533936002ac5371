//! The kernels made into machine code and called: [`JitKernels`] owns the code's memory,
//! compiles a program's kernels, and runs them for the decoder. All the crate's unsafe code
//! is here, each site allowed where it stands with its SAFETY reason.

use crate::*;
use cranelift_codegen::ir::types;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Module};

use tickplant_fast::codec::Pmap;
use tickplant_fast::native::{self as nat, IntSlot, KernelRun, NativeKernels, SeqRun, SeqStop, StrSlot};
use tickplant_fast::program::{flag, kop, Code, KOp, Kernel, Special};
use tickplant_fast::{Entry, Program};

pub(crate) struct Compiled {
    f: KernelFn,
    frame_len: usize,
    /// Room for the string bytes of one call (see [`chars`]).
    chars: usize,
    /// Per operation: its entry's index (how many entries are written when it is left).
    ks: Vec<usize>,
    strs: Vec<u32>,
}

/// A kernel's operations and frame.
pub(crate) type KernelCode<'a> = (&'a [KOp], &'a [Entry]);

/// An element loop declared in the module, before its code is final.
pub(crate) struct SeqMade {
    id: cranelift_module::FuncId,
    field: u32,
    chars: usize,
    max_frame: usize,
    strs: Vec<u32>,
    kernels: Vec<SeqKernel>,
}

/// A kernel of a sequence's element loop, as the decoder knows it.
pub(crate) struct SeqKernel {
    /// Its index in [`Program::kernels`].
    index: usize,
    frame_len: usize,
    ks: Vec<usize>,
}

pub(crate) struct CompiledSeq {
    f: SeqFn,
    field: u32,
    /// Room for the string bytes of one call: SEQ_CHUNK elements, each the most of its
    /// kernels (see [`chars`]).
    chars: usize,
    /// The largest frame of its kernels.
    max_frame: usize,
    strs: Vec<u32>,
    kernels: Vec<SeqKernel>,
}

/// A kernel run on into the sequence that ends it.
pub(crate) struct CompiledInto {
    f: SeqFn,
    /// Room for the string bytes of one call: the kernel's and its sequence's.
    chars: usize,
    /// The sequence's element loop, in [`JitKernels::seqs`].
    seq: usize,
    frame_len: usize,
    ks: Vec<usize>,
    strs: Vec<u32>,
}

/// A program's kernels as machine code.
pub struct JitKernels {
    /// Owns the code's memory: the functions in `fns` and `seqs` live as long as it does.
    module: Option<JITModule>,
    fns: Vec<Option<Compiled>>,
    /// Element loops by the index of their sequence's first specialised segment.
    seqs: Vec<Option<CompiledSeq>>,
    /// By kernel: the kernels that end with a sequence, run on into it.
    into: Vec<Option<CompiledInto>>,
    kernels: Vec<Kernel>,
    kops: Vec<KOp>,
    specials: Vec<Special>,
    int_slots: usize,
    str_slots: usize,
    native_ops: usize,
}

// SAFETY: after `finalize_definitions` the module is never touched again until it is
// dropped (it only keeps the code's memory mapped), and the code keeps no state of its own:
// every call works on the context it is given. Sharing it between threads is then as safe
// as sharing any other function pointer.
#[allow(unsafe_code)]
unsafe impl Send for JitKernels {}
// SAFETY: see `Send`: nothing is mutated through a shared reference.
#[allow(unsafe_code)]
unsafe impl Sync for JitKernels {}

impl std::fmt::Debug for JitKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JitKernels").field("kernels", &self.fns.len()).field("native_ops", &self.native_ops).finish()
    }
}

#[allow(unsafe_code)] // frees the generated code's memory
impl Drop for JitKernels {
    fn drop(&mut self) {
        self.fns.clear();
        self.seqs.clear();
        self.into.clear();
        if let Some(m) = self.module.take() {
            // SAFETY: the functions were reachable only through `self.fns`, now empty, and
            // `&mut self` means no call is running: no code of the module can run after this.
            unsafe { m.free_memory() };
        }
    }
}

impl JitKernels {
    /// Compile every kernel of `program` (none until it is specialised, see
    /// [`Program::specialise`]) for the machine this runs on, for
    /// [`Decoder::set_native`](tickplant_fast::Decoder::set_native).
    pub fn compile(program: &Program) -> Result<JitKernels, CompileError> {
        Self::compile_all(program).map_err(|reason| CompileError { reason })
    }

    #[allow(unsafe_code)] // the finalized code's addresses as function pointers
    fn compile_all(program: &Program) -> Result<JitKernels, String> {
        let mut flags = settings::builder();
        let set = |fl: &mut settings::Builder, k: &str, v: &str| fl.set(k, v).map_err(|e| format!("{k}={v}: {e}"));
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        set(&mut flags, "is_pic", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("this machine is not supported by the code generator: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| e.to_string())?;
        let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
        if module.target_config().pointer_type() != types::I64 {
            return Err("native kernels need a 64-bit target".into());
        }
        let mut ctx = module.make_context();
        let mut fbc = FunctionBuilderContext::new();
        let mut ids = Vec::new();
        let mut native_ops = 0;
        let int_slots = program.int_slots.len();
        for (ki, kn) in program.kernels.iter().enumerate() {
            let ops =
                program.kops.get(kn.ops.0 as usize..kn.ops.1 as usize).ok_or("a kernel's operations out of range")?;
            let frame =
                program.frames.get(kn.frame.0 as usize..kn.frame.1 as usize).ok_or("a kernel's frame out of range")?;
            // The code writes the frame in order, so each operation's entry must come after
            // the one before's (the sequence that may end a kernel sits at the frame's end).
            let ordered = ops.windows(2).all(|w| w[0].k < w[1].k) && ops.iter().all(|o| o.k as usize <= frame.len());
            if !ordered {
                ids.push(None);
                continue;
            }
            let strs = string_slots(ops);
            let id = define(&mut module, &mut ctx, &mut fbc, &format!("fast_kernel_{ki}"), |b| {
                native_ops += Gen::kernel(b, ops, frame, int_slots, &strs);
            })?;
            ids.push(Some((id, frame.len(), ops.iter().map(|o| o.k as usize).collect::<Vec<_>>(), strs, chars(ops))));
        }
        // The element loops of sequences whose body has specialised segments.
        let mut seq_ids: Vec<Option<SeqMade>> = (0..program.specials.len()).map(|_| None).collect();
        // Each element loop's segments (as `Gen::seq` takes them) and all their operations.
        type SeqCode<'a> = (Vec<(Pmap, Option<KernelCode<'a>>)>, Vec<KOp>);
        let mut seq_codes: Vec<Option<SeqCode>> = (0..program.specials.len()).map(|_| None).collect();
        for ins in &program.insns {
            if ins.code != Code::Seq || !ins.has(flag::PMAP) || ins.init == 0 {
                continue;
            }
            let lo = (ins.init as u32).wrapping_sub(1) as usize;
            let n = (ins.init as u64 >> 32) as usize;
            let Some(sps) = program.specials.get(lo..lo.saturating_add(n)) else { continue };
            if seq_ids[lo].is_some() {
                continue;
            }
            let mut code = Vec::new();
            let mut sks = Vec::new();
            let mut all_ops = Vec::new();
            let mut max_chars = 0;
            for sp in sps {
                let ki = (sp.kernel as usize).wrapping_sub(1);
                let c: Option<KernelCode> = ids.get(ki).and_then(|c| c.as_ref()).map(|_| {
                    let kn = &program.kernels[ki];
                    let ops = &program.kops[kn.ops.0 as usize..kn.ops.1 as usize];
                    let frame = &program.frames[kn.frame.0 as usize..kn.frame.1 as usize];
                    (ops, frame)
                });
                if let (Some((ops, frame)), true) = (c, (sp.pmap as u64) == 0) {
                    all_ops.extend_from_slice(ops);
                    max_chars = max_chars.max(chars(ops));
                    sks.push(SeqKernel {
                        index: ki,
                        frame_len: frame.len(),
                        ks: ops.iter().map(|o| o.k as usize).collect(),
                    });
                }
                code.push((sp.pmap, c));
            }
            if sks.is_empty() {
                continue;
            }
            let strs = string_slots(&all_ops);
            let max_frame = sks.iter().map(|k| k.frame_len).max().unwrap_or(0);
            let id = define(&mut module, &mut ctx, &mut fbc, &format!("fast_seq_{lo}"), |b| {
                Gen::seq(b, ins.field, &code, int_slots, &strs);
            })?;
            let chars = SEQ_CHUNK * max_chars;
            seq_ids[lo] = Some(SeqMade { id, field: ins.field, chars, max_frame, strs, kernels: sks });
            seq_codes[lo] = Some((code, all_ops));
        }
        // Kernels that end with a sequence whose element loop has code, run on into it.
        let mut into_ids = Vec::new();
        for (ki, kn) in program.kernels.iter().enumerate() {
            let Some(Some((_, frame_len, ks, _, kchars))) = ids.get(ki) else {
                into_ids.push(None);
                continue;
            };
            let ops = &program.kops[kn.ops.0 as usize..kn.ops.1 as usize];
            let frame = &program.frames[kn.frame.0 as usize..kn.frame.1 as usize];
            let seq = ops.last().filter(|o| o.kind == kop::SEQ && o.k as usize == *frame_len).and_then(|o| {
                let ins = program.insns.get(o.insn as usize)?;
                let length = program.insns.get(o.insn as usize + 1)?;
                // A mandatory uInt32 length with no operator: the one the code reads.
                let plain = length.code == Code::IntNone
                    && length.flags & (flag::NULLABLE | flag::SIGNED | flag::W32) == flag::W32;
                let lo = (ins.init as u32).wrapping_sub(1) as usize;
                let ok = ins.code == Code::Seq && ins.has(flag::PMAP) && ins.init != 0 && plain;
                ok.then_some(())?;
                Some((lo, ins.field, seq_codes.get(lo)?.as_ref()?))
            });
            let Some((lo, field, (code, seq_ops))) = seq else {
                into_ids.push(None);
                continue;
            };
            let mut all_ops = ops.to_vec();
            all_ops.extend_from_slice(seq_ops);
            let strs = string_slots(&all_ops);
            let id = define(&mut module, &mut ctx, &mut fbc, &format!("fast_kernel_{ki}_into_seq"), |b| {
                Gen::into_seq(b, ops, frame, field, code, int_slots, &strs);
            })?;
            let chars = kchars + seq_ids[lo].as_ref().map_or(0, |m| m.chars);
            into_ids.push(Some((id, chars, lo, *frame_len, ks.clone(), strs)));
        }
        module.finalize_definitions().map_err(|e| e.to_string())?;
        let into = into_ids
            .into_iter()
            .map(|c| {
                c.map(|(id, chars, seq, frame_len, ks, strs)| {
                    let code = module.get_finalized_function(id);
                    // SAFETY: as for the element loops below: declared (i64) -> i64 in the
                    // system call convention, `SeqFn`'s; lives as long as `module`.
                    let f = unsafe { std::mem::transmute::<*const u8, SeqFn>(code) };
                    CompiledInto { f, chars, seq, frame_len, ks, strs }
                })
            })
            .collect();
        let seqs = seq_ids
            .into_iter()
            .map(|c| {
                c.map(|SeqMade { id, field, chars, max_frame, strs, kernels }| {
                    let code = module.get_finalized_function(id);
                    // SAFETY: as for the kernels below: declared (i64) -> i64 in the system
                    // call convention, `SeqFn`'s; lives as long as `module`.
                    let f = unsafe { std::mem::transmute::<*const u8, SeqFn>(code) };
                    CompiledSeq { f, field, chars, max_frame, strs, kernels }
                })
            })
            .collect();
        let fns = ids
            .into_iter()
            .map(|c| {
                c.map(|(id, frame_len, ks, strs, chars)| {
                    let code = module.get_finalized_function(id);
                    // SAFETY: `code` is the finalized function declared with the signature
                    // (i64) -> i64 in the host's default (system) call convention, which is
                    // `KernelFn`'s. It lives as long as `module`, which `JitKernels` owns.
                    let f = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
                    Compiled { f, frame_len, chars, ks, strs }
                })
            })
            .collect();
        Ok(JitKernels {
            module: Some(module),
            fns,
            seqs,
            into,
            kernels: program.kernels.clone(),
            kops: program.kops.clone(),
            specials: program.specials.clone(),
            int_slots,
            str_slots: program.str_slots.len(),
            native_ops,
        })
    }

    /// How many of the kernels' operations run as native code, of how many.
    pub fn native_ops(&self) -> (usize, usize) {
        (self.native_ops, self.kops.len())
    }
}

#[allow(unsafe_code)] // calls into the generated code and the entries it wrote
impl NativeKernels for JitKernels {
    fn made_for(&self, program: &Program) -> bool {
        program.kernels == self.kernels
            && program.kops == self.kops
            && program.specials == self.specials
            && program.int_slots.len() == self.int_slots
            && program.str_slots.len() == self.str_slots
    }

    #[inline]
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
    ) -> Option<usize> {
        let Some(Some(k)) = self.fns.get(index) else { return None };
        if ints.len() != self.int_slots || strs.len() != self.str_slots {
            return None;
        }
        entries.reserve(k.frame_len);
        bytes.reserve(k.chars);
        let mirror = str_mirror(strs, &k.strs);
        let (e_len, b_len) = (entries.len(), bytes.len());
        let out = entries.spare_capacity_mut().as_mut_ptr().cast::<Entry>();
        let mut ctx = Ctx::new(buf, *pos, out, ints, bytes, mirror);
        // SAFETY: the code was made for this kernel: it writes the frame's entries only
        // below `frame_len` from `out` (room reserved above), integer slots only below
        // `int_slots` (checked above; slot indices checked when it was made), at most
        // `chars` string bytes (one per string operation, room reserved above), and reads
        // the message only below `len` (each read's first byte covered by the kernel's
        // check of the bytes left, every other byte by its own check).
        // Every pointer comes from a live exclusive borrow (`buf` shared) that outlasts the
        // call.
        let n = unsafe { (k.f)(&mut ctx) } as usize;
        let written = k.ks.get(n).map_or(k.frame_len, |&kk| kk.min(k.frame_len));
        // SAFETY: the code wrote every entry from `e_len` to `e_len + written` whole (the
        // entries before the first operation it left, all of them when it left none), and
        // every string byte from `b_len` to `ctx.bytes_len`, all within the room reserved.
        unsafe {
            entries.set_len(e_len + written);
            bytes.set_len(room_len(ctx.bytes_len, b_len, k.chars));
        }
        *pos = ctx.pos;
        if ctx.holes != 0 {
            *holes = true;
        }
        str_commit(&ctx.strs, &k.strs, strs);
        Some(n)
    }

    #[inline]
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
        let Some(Some(s)) = self.seqs.get(specials) else { return None };
        if s.field != field || ints.len() != self.int_slots || strs.len() != self.str_slots || count == 0 {
            return None;
        }
        let count = count.min(SEQ_CHUNK);
        entries.reserve(count * (s.max_frame + 1));
        bytes.reserve(s.chars);
        let mirror = str_mirror(strs, &s.strs);
        let (e_len, b_len) = (entries.len(), bytes.len());
        let out = entries.spare_capacity_mut().as_mut_ptr().cast::<Entry>();
        let mut ctx = SeqCtx::new(Ctx::new(buf, *pos, out, ints, bytes, mirror), count, e_len);
        // SAFETY: the code was made for this sequence's kernels: it writes at most `count`
        // elements, each its entry and its kernel's frame (at most `max_frame + 1` entries,
        // room reserved above) from `out`, taking holes out only within that frame; integer
        // slots only below `int_slots` (checked above), at most `chars` string bytes (one
        // per string operation of at most `count` <= SEQ_CHUNK kernels, room reserved
        // above), presence maps only below `count` in the context; reads the message only
        // below `len`. Every pointer comes from a live borrow that outlasts
        // the call.
        let status = unsafe { (s.f)(&mut ctx) };
        let (written, run, pushed) = seq_outcome(s, status, &ctx, out, e_len, count);
        // SAFETY: the code wrote every entry from `e_len` to `e_len + written` whole (the
        // elements done, and of the one it stopped in its entry and the frame up to the
        // operation it stopped at), all within the room reserved (`seq_outcome` asserts
        // it), and every string byte from `b_len` to `ctx.k.bytes_len`.
        unsafe {
            entries.set_len(e_len + written);
            bytes.set_len(room_len(ctx.k.bytes_len, b_len, s.chars));
        }
        *pos = ctx.k.pos;
        str_commit(&ctx.k.strs, &s.strs, strs);
        push_pmaps(&ctx, pushed, pmaps);
        Some(run)
    }

    #[inline]
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
        let Some(Some(k)) = self.into.get(index) else { return None };
        let Some(Some(s)) = self.seqs.get(k.seq) else { return None };
        if ints.len() != self.int_slots || strs.len() != self.str_slots {
            return None;
        }
        // The frame, the sequence's entry, and at most SEQ_CHUNK elements.
        let room = k.frame_len + 1 + SEQ_CHUNK * (s.max_frame + 1);
        entries.reserve(room);
        let bytes_room = k.chars;
        bytes.reserve(bytes_room);
        let mirror = str_mirror(strs, &k.strs);
        let (e_len, b_len) = (entries.len(), bytes.len());
        let out = entries.spare_capacity_mut().as_mut_ptr().cast::<Entry>();
        // The count is the code's to set, from the sequence's length.
        let first = e_len + k.frame_len + 1;
        let mut ctx = SeqCtx::new(Ctx::new(buf, *pos, out, ints, bytes, mirror), 0, first);
        // SAFETY: the code was made for this kernel and this sequence's kernels: it writes
        // the kernel's frame and the sequence's entry (`frame_len + 1` entries from `out`),
        // then at most SEQ_CHUNK elements after them, each its entry and its kernel's frame
        // (at most `max_frame + 1` entries): all within the room reserved above. Integer
        // slots only below `int_slots` (checked above), at most `chars` string bytes (the
        // kernel's and SEQ_CHUNK elements' string operations, room reserved above),
        // presence maps only below SEQ_CHUNK in the context; it reads the message only
        // below `len`. Every pointer comes from a live borrow
        // that outlasts the call.
        let status = unsafe { (k.f)(&mut ctx) };
        let (written, result, pushed) = if status == 3 {
            let n = ctx.ops as usize;
            let written = k.ks.get(n).map_or(k.frame_len, |&kk| kk.min(k.frame_len));
            if ctx.k.holes != 0 {
                *holes = true;
            }
            (written, KernelRun::Stopped(n), 0)
        } else {
            let len = ctx.len as u32;
            let count = (len as usize).min(SEQ_CHUNK);
            // SAFETY: `out + frame_len + 1` is within the room reserved above.
            let elems = unsafe { out.add(k.frame_len + 1) };
            let (w, run, pushed) = seq_outcome(s, status, &ctx, elems, e_len + k.frame_len + 1, count);
            (k.frame_len + 1 + w, KernelRun::Sequence { len, run }, pushed)
        };
        assert!(written <= room, "a kernel run into its sequence wrote past its room");
        // SAFETY: the code wrote every entry from `e_len` to `e_len + written` whole (the
        // kernel's up to where it stopped; or its whole frame, the sequence's entry and the
        // elements as `seq_outcome` counts them), all within the room reserved (asserted
        // above), and every string byte from `b_len` to `ctx.k.bytes_len`.
        unsafe {
            entries.set_len(e_len + written);
            bytes.set_len(room_len(ctx.k.bytes_len, b_len, bytes_room));
        }
        *pos = ctx.k.pos;
        str_commit(&ctx.k.strs, &k.strs, strs);
        push_pmaps(&ctx, pushed, pmaps);
        Some(result)
    }
}

/// What an element loop's call did (`status` its return, `out` where its first element's
/// entry went, the entry of index `e_len`; at most `count` elements): how many entries it
/// wrote from `out`, how far it went, and how many presence maps it recorded.
#[inline(always)]
pub(crate) fn seq_outcome(
    s: &CompiledSeq,
    status: u64,
    ctx: &SeqCtx,
    out: *mut Entry,
    e_len: usize,
    count: usize,
) -> (usize, SeqRun, usize) {
    let at = (ctx.k.out as usize - out as usize) / nat::ENTRY_SIZE;
    let done = (ctx.done as usize).min(count);
    let (written, stop, pushed) = match status {
        2 => {
            let kj = &s.kernels[ctx.kernel as usize];
            let from = ctx.ops as usize;
            let frame = kj.ks.get(from).map_or(kj.frame_len, |&k| k.min(kj.frame_len));
            let stop = SeqStop::Kernel { entry: e_len + at, kernel: kj.index, from, holes: ctx.k.holes != 0 };
            (at + 1 + frame, stop, done + 1)
        }
        1 => (at, SeqStop::Element, done),
        _ => (at, SeqStop::Done, done),
    };
    assert!(written <= count * (s.max_frame + 1) && pushed <= count, "a sequence loop wrote past its room");
    (written, SeqRun { elements: done, stop }, pushed)
}

/// The string bytes' length the code left (`len`), within the room it had: from `b_len`,
/// `room` bytes (`usize::clamp`, which the compiler left as a call).
#[inline(always)]
pub(crate) fn room_len(len: usize, b_len: usize, room: usize) -> usize {
    len.max(b_len).min(b_len + room)
}

/// The presence maps of the first `n` elements of a call, pushed for the decoder.
#[inline(always)]
pub(crate) fn push_pmaps(ctx: &SeqCtx, n: usize, pmaps: &mut Vec<(Pmap, u8)>) {
    for j in 0..n {
        pmaps.push((Pmap::from(ctx.pm[j]) << 64, ctx.pmn[j]));
    }
}

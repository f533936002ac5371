//! `tickplant fast decode|compile|bench`: FAST templates, program listings, decoding to JSON
//! lines, and the decode-speed benchmark.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tickplant_fast_jit::JitKernels;

use anyhow::{bail, Context, Result};
use tickplant_core::LinkType;
use tickplant_fast::{for_each, json, Decoder, Framing, Message, Position, Program};

/// How messages sit in the input: a FAST framing of a file, or UDP datagrams in a pcap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    File(Framing),
    /// A pcap or pcapng capture: each UDP payload holds messages back to back.
    Udp,
}

impl std::str::FromStr for Input {
    type Err = String;
    fn from_str(s: &str) -> Result<Input, String> {
        if s == "udp" {
            return Ok(Input::Udp);
        }
        s.parse::<Framing>().map(Input::File).map_err(|_| format!("unknown framing {s:?} (u32le, opra, raw or udp)"))
    }
}

/// Options of the `udp` framing.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct UdpArgs {
    /// udp framing: bytes of packet header to skip at the start of each UDP payload (a
    /// venue's sequence-number header, for example).
    #[arg(long, default_value_t = 0)]
    pub header_bytes: usize,
    /// udp framing: reset the dictionary at the start of every datagram (venues that
    /// reset per packet).
    #[arg(long)]
    pub reset_per_packet: bool,
}

/// The UDP payload of a captured frame (IPv4, no fragments), if it is one.
fn udp_payload(link: LinkType, frame: &[u8]) -> Option<&[u8]> {
    tickplant_core::seq::udp_payload_range(link, frame).ok().map(|r| &frame[r])
}

/// Decode every message of every UDP datagram of a capture. Non-UDP frames are counted and
/// skipped (reported at the end); a datagram that does not decode stops with its frame
/// number and the offset in its payload.
/// Frames a capture reader skipped: not UDP/IPv4, or cut short by the capture (whose
/// messages are then missing: said as a warning).
#[derive(Debug, Default, Clone, Copy)]
pub struct Skipped {
    pub other: u64,
    pub cut: tickplant_io::pcap::CutShort,
}

impl Skipped {
    /// A frame whose UDP payload could not be had.
    pub fn count(&mut self, f: &tickplant_io::Frame<'_>) {
        if f.is_cut_short() {
            self.cut.note(f.data.len());
        } else {
            self.other += 1;
        }
    }
    /// Say what was skipped, on stderr.
    pub fn say(&self, name: &str) {
        if self.other > 0 {
            eprintln!("{name}: {} frames were not UDP/IPv4 and were skipped", self.other);
        }
        if let Some(w) = self.cut.warning(name) {
            eprintln!("warning: {w}");
        }
    }
}

pub fn for_each_udp(
    dec: &mut Decoder,
    path: &Path,
    opts: UdpArgs,
    msg: &mut Message,
    mut f: impl FnMut(&Message, Position) -> bool,
) -> Result<(u64, Skipped)> {
    let mut r = tickplant_io::pcap::FrameReader::open(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let link = r.link_type();
    let (mut n, mut skipped, mut frame_no) = (0u64, Skipped::default(), 0u64);
    while let Some(fr) = r.next_frame().map_err(|e| anyhow::anyhow!("{e}"))? {
        frame_no += 1;
        let Some(payload) = udp_payload(link, fr.data) else {
            skipped.count(&fr);
            continue;
        };
        let Some(body) = payload.get(opts.header_bytes..) else {
            bail!(
                "{}: frame {frame_no}: UDP payload of {} bytes is shorter than --header-bytes {}",
                path.display(),
                payload.len(),
                opts.header_bytes
            );
        };
        if opts.reset_per_packet {
            dec.reset();
        }
        let mut at = 0;
        while at < body.len() {
            let used = dec.decode(&body[at..], msg).map_err(|e| {
                let field = dec
                    .program()
                    .fields
                    .get(e.field as usize)
                    .map(|f| format!(" (field {:?})", f.name))
                    .unwrap_or_default();
                anyhow::anyhow!(
                    "{}: frame {frame_no}, message {n}: {} at byte {} of the UDP payload{field}",
                    path.display(),
                    e.kind,
                    opts.header_bytes + at + e.offset
                )
            })?;
            let go = f(msg, Position { offset: opts.header_bytes + at, len: used, index: n, block: frame_no - 1 });
            n += 1;
            at += used;
            if !go {
                return Ok((n, skipped));
            }
        }
    }
    Ok((n, skipped))
}

#[derive(Debug, clap::Subcommand)]
pub enum FastCmd {
    /// Decode a FAST stream to JSON lines: {"template_id": N, "template": "Name", "fields": {...}}.
    Decode(DecodeArgs),
    /// Compile templates and print the program (one instruction per line) with --listing.
    Compile(CompileArgs),
    /// Decode speed: ns per message, messages/s, values/s, fields/s, MB/s (decode only, one core).
    Bench(BenchArgs),
}

#[derive(Debug, clap::Args)]
pub struct DecodeArgs {
    /// Template XML (FAST 1.1 <templates>).
    #[arg(long, required_unless_present = "program", conflicts_with = "program")]
    pub templates: Option<PathBuf>,
    /// A program text (`fast compile --emit`), as written or edited: fields marked `skip`
    /// are decoded but not printed.
    #[arg(long)]
    pub program: Option<PathBuf>,
    /// How messages sit in FILE: u32le ([u32 LE length][message]), opra (OPRA FAST v2
    /// blocks), raw (back to back), or udp (FILE is a pcap/pcapng capture; each UDP payload
    /// holds messages back to back).
    #[arg(long, default_value = "u32le")]
    pub framing: Input,
    #[command(flatten)]
    pub udp: UdpArgs,
    /// The FAST stream.
    pub file: PathBuf,
    /// Stop after N messages.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Output format (jsonl is the only one).
    #[arg(long, default_value = "jsonl")]
    pub format: String,
    /// Template (by name) for messages without a template id when none came before.
    #[arg(long)]
    pub default_template: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CompileArgs {
    /// Template XML.
    pub templates: PathBuf,
    /// A sample stream: its hottest (template, presence map) pairs get specialised
    /// straight-line segments.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Framing of the profile sample.
    #[arg(long, default_value = "u32le")]
    pub framing: Framing,
    /// Print the program.
    #[arg(long)]
    pub listing: bool,
    /// Write the program as a text to edit (each field `keep` or `skip`) and load back with
    /// `fast decode --program` (not with --profile: a specialised program is built at load).
    #[arg(long, value_name = "program.fprog", conflicts_with = "profile")]
    pub emit: Option<PathBuf>,
    /// With --emit: mark these fields (by name, comma-separated) `skip`.
    #[arg(long, value_delimiter = ',', requires = "emit")]
    pub skip: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Template XML.
    #[arg(long)]
    pub templates: PathBuf,
    /// Framing of FILE.
    #[arg(long, default_value = "u32le")]
    pub framing: Framing,
    /// The FAST stream to decode.
    pub file: PathBuf,
    /// Timed passes over the file of each form of the decoder (the best is reported).
    #[arg(long, default_value_t = 20)]
    pub rounds: u32,
    /// The passes are taken in groups of five, the three forms of the decoder side by side,
    /// the groups this many milliseconds apart (each after an untimed pass of each form):
    /// a busy stretch of a shared machine then spoils a group, not the run.
    #[arg(long, default_value_t = 2000)]
    pub pause_ms: u64,
}

fn load_program(path: &Path) -> Result<Program> {
    let xml = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let p = Program::from_xml(&xml).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    for w in &p.warnings {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(p)
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
}

/// A program text, loaded and checked.
pub fn load_program_text(path: &Path) -> Result<Program> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    Program::from_text(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub fn decode(a: &DecodeArgs) -> Result<()> {
    if a.format != "jsonl" {
        bail!("--format {:?}: only jsonl is supported", a.format);
    }
    let mut p = match (&a.templates, &a.program) {
        (Some(t), _) => load_program(t)?,
        (None, Some(p)) => load_program_text(p)?,
        (None, None) => bail!("--templates or --program: where the program comes from"),
    };
    if let Some(name) = &a.default_template {
        let t = p.template_by_name(name).with_context(|| format!("--default-template {name:?}: no such template"))?;
        p.set_default_template(t);
    }
    let mut dec = Decoder::new(&p);
    let mut msg = Message::new();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut line = String::new();
    let mut io_err = None;
    let limit = a.limit.unwrap_or(u64::MAX);
    let mut emit = |m: &Message, pos: Position| {
        if pos.index >= limit {
            return false;
        }
        line.clear();
        json::write_json(&p, m, &mut line);
        line.push('\n');
        if let Err(e) = out.write_all(line.as_bytes()) {
            io_err = Some(e);
            return false;
        }
        pos.index + 1 < limit
    };
    let r = match a.framing {
        Input::File(framing) => {
            let data = read(&a.file)?;
            for_each(&mut dec, framing, &data, &mut msg, &mut emit)
                .map(|_| ())
                .map_err(|e| anyhow::anyhow!("{}: {e}", a.file.display()))
        }
        Input::Udp => for_each_udp(&mut dec, &a.file, a.udp, &mut msg, &mut emit)
            .map(|(_, skipped)| skipped.say(&a.file.display().to_string())),
    };
    if let Some(e) = io_err {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
        return Ok(());
    }
    out.flush().ok();
    r
}

pub fn compile(a: &CompileArgs) -> Result<()> {
    let mut p = load_program(&a.templates)?;
    if let Some(sample) = &a.profile {
        let data = read(sample)?;
        let built = p.specialise_for(&data, a.framing).map_err(|e| anyhow::anyhow!("{}: {e}", sample.display()))?;
        eprintln!("profile of {}: {built} specialised segments", sample.display());
    }
    if let Some(path) = &a.emit {
        let names: Vec<&str> = a.skip.iter().map(String::as_str).collect();
        p.skip_fields(&names).map_err(|e| anyhow::anyhow!("--skip {e}"))?;
        let text = p.to_text().map_err(|e| anyhow::anyhow!("{e}"))?;
        std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))?;
        eprintln!(
            "{}: {} templates, {} instructions written to {} (edit keep/skip; load with fast decode --program)",
            a.templates.display(),
            p.templates.len(),
            p.insns.len(),
            path.display()
        );
    }
    if a.listing {
        print!("{}", p.listing());
    } else if a.emit.is_none() {
        eprintln!(
            "{}: {} templates compiled to {} instructions (--listing prints them)",
            a.templates.display(),
            p.templates.len(),
            p.insns.len()
        );
    }
    Ok(())
}

/// A framed file's messages, found once so the benchmark times decoding only.
struct Frames {
    /// Each message's offset and length.
    at: Vec<(usize, usize)>,
    /// Values decoded in all, constants excluded.
    values: u64,
    /// Fields decoded in all, constants included.
    fields: u64,
}

fn frames(p: &Program, framing: Framing, data: &[u8]) -> Result<Frames> {
    let mut dec = Decoder::new(p);
    let mut msg = Message::new();
    let mut v = Vec::new();
    let (mut values, mut fields) = (0u64, 0u64);
    for_each(&mut dec, framing, data, &mut msg, |m, pos| {
        v.push((pos.offset, pos.len));
        values += m.value_count(p) as u64;
        fields += m.field_count() as u64;
        true
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Frames { at: v, values, fields })
}

/// One pass decoding every frame, the dictionary reset first: its time in seconds.
fn pass(dec: &mut Decoder, msg: &mut Message, data: &[u8], frames: &[(usize, usize)]) -> Result<f64> {
    dec.reset();
    let t = Instant::now();
    for &(off, len) in frames {
        let used = dec.decode(&data[off..off + len], msg).map_err(|e| anyhow::anyhow!("{e}"))?;
        std::hint::black_box(used);
    }
    Ok(t.elapsed().as_secs_f64())
}

/// Timed passes a group takes of each form of the decoder (see [`BenchArgs::pause_ms`]).
const GROUP_PASSES: u32 = 5;

pub fn bench(a: &BenchArgs, mut out: impl FnMut(String)) -> Result<()> {
    let mut p = load_program(&a.templates)?;
    let data = read(&a.file)?;
    let Frames { at: frames, values, fields } = frames(&p, a.framing, &data)?;
    if frames.is_empty() {
        bail!("{}: no messages", a.file.display());
    }
    let n = frames.len() as u64;
    let bytes: usize = frames.iter().map(|f| f.1).sum();
    out(format!(
        "fast decode {}: {n} messages, {bytes} bytes ({:.1} per message), {:.1} values per message (constants excluded), {:.1} fields (constants included)",
        a.file.display(),
        bytes as f64 / n as f64,
        values as f64 / n as f64,
        fields as f64 / n as f64
    ));
    let generic_program = p.clone();
    let built = p.specialise_for(&data, a.framing).map_err(|e| anyhow::anyhow!("{e}"))?;
    let jit = JitKernels::compile(&p).map_err(|e| anyhow::anyhow!("compiling the kernels to native code: {e}"))?;
    let (native_ops, all_ops) = jit.native_ops();
    // The three forms side by side: the generic program, the specialised one with the
    // decoder's own kernels, and with its kernels as native code (the figure judged).
    let mut decoders = [Decoder::new(&generic_program), Decoder::new(&p), Decoder::new(&p)];
    decoders[2].set_native(Some(&jit)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut msg = Message::new();
    let rounds = a.rounds.max(1);
    let groups = rounds.div_ceil(GROUP_PASSES);
    // Each group's best pass of each form.
    let mut group_best = Vec::with_capacity(groups as usize);
    for g in 0..groups {
        if g > 0 {
            std::thread::sleep(std::time::Duration::from_millis(a.pause_ms));
            // A pass of each untimed after the pause: the core slows down while idle.
            for d in &mut decoders {
                pass(d, &mut msg, &data, &frames)?;
            }
        }
        let mut bests = [f64::MAX; 3];
        for _ in 0..GROUP_PASSES.min(rounds - g * GROUP_PASSES) {
            for (b, d) in bests.iter_mut().zip(&mut decoders) {
                *b = b.min(pass(d, &mut msg, &data, &frames)?);
            }
        }
        group_best.push(bests);
    }
    let best_of = |k: usize| group_best.iter().map(|b| b[k]).fold(f64::MAX, f64::min);
    let (generic, interpreted, best) = (best_of(0), best_of(1), best_of(2));
    out(format!(
        "  generic program: {:.1} ns/message; with {built} specialised segments from a profile of the file: {:.1} ns/message ({:.2}x); their kernels as native code ({native_ops} of {all_ops} operations): {:.1} ns/message ({:.2}x)",
        generic * 1e9 / n as f64,
        interpreted * 1e9 / n as f64,
        generic / interpreted,
        best * 1e9 / n as f64,
        generic / best
    ));
    if groups > 1 {
        let each: Vec<String> = group_best.iter().map(|b| format!("{:.1}", b[2] * 1e9 / n as f64)).collect();
        out(format!(
            "  native, best of each group of {GROUP_PASSES} passes ({} ms apart): {} ns/message",
            a.pause_ms,
            each.join(" ")
        ));
    }
    let ns = best * 1e9 / n as f64;
    let vps = values as f64 / best;
    let per_value = best * 1e9 / values as f64;
    out(format!(
        "  {:.1} ns/message  {:.2} M messages/s  {:.0} M values/s  {:.0} M fields/s  {:.0} MB/s  (best of {} passes)",
        ns,
        n as f64 / best / 1e6,
        vps / 1e6,
        fields as f64 / best / 1e6,
        bytes as f64 / best / 1e6,
        rounds
    ));
    // Field actions: the generic program with every other value field skipped (decoded so
    // that the stream and dictionaries stay right, not written; a field without an
    // operator stepped over), beside the same program keeping all, same passes.
    let mut skipping = generic_program.clone();
    let mut skipped = 0usize;
    for i in 0..skipping.insns.len() {
        let ins = skipping.insns[i];
        let value =
            !matches!(ins.code, tickplant_fast::Code::Seq | tickplant_fast::Code::Group | tickplant_fast::Code::DynRef)
                && !skipping.fields[ins.field as usize].constant;
        if value && !skipping.owned(i) && i % 2 == 0 {
            skipping.insns[i].skip = true;
            skipped += 1;
        }
    }
    // Through the text, as a user's edit would come.
    let skipping = Program::from_text(&skipping.to_text().map_err(|e| anyhow::anyhow!("{e}"))?)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let insns = &generic_program.insns;
    let mut pair = [Decoder::new(&generic_program), Decoder::new(&skipping)];
    let mut pair_best = [f64::MAX; 2];
    for _ in 0..rounds {
        for (b, d) in pair_best.iter_mut().zip(&mut pair) {
            *b = b.min(pass(d, &mut msg, &data, &frames)?);
        }
    }
    out(format!(
        "  field actions (generic program): all kept {:.1} ns/message; every other value field skipped ({skipped} of {} instructions) {:.1} ns/message ({:.0}% less time)",
        pair_best[0] * 1e9 / n as f64,
        insns.len(),
        pair_best[1] * 1e9 / n as f64,
        (1.0 - pair_best[1] / pair_best[0]) * 100.0
    ));
    let per21 = best * 1e9 / bytes as f64 * 21.0;
    out(format!("  {per21:.1} ns per 21-byte message equivalent (time per byte x 21)"));
    out(format!(
        "  reference figures (quoted from the issue, measured on this machine, not run here): mFAST generated code 358 ns/message ({:.2}x), mFAST runtime templates 638 ns ({:.2}x); FPGA engine 40 ns per 21-byte message ({:.2}x), a Xeon of its day 261 ns ({:.2}x)",
        358.0 / ns,
        638.0 / ns,
        40.0 / per21,
        261.0 / per21
    ));
    out(format!(
        "  targets: <= 180 ns/message {}, >= 300 M values/s {} ({:.2} ns/value)",
        crate::bench::judge(ns <= 180.0, "met", "NOT met"),
        crate::bench::judge(vps >= 300e6, "met", "NOT met"),
        per_value
    ));
    Ok(())
}

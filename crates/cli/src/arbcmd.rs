//! `tickplant arb`: arbitrate A/B pcap captures into LL and HR output captures.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tickplant_core::arb::{check_stats, ArbSink, Released};
use tickplant_core::*;
use tickplant_io::hist::Ticks;
use tickplant_io::runner::{self, Feed, RunOptions};
use tickplant_io::{Format, FrameReader, FrameWriter, MergedReader};

/// Every flag of `tickplant arb` is also a key of its TOML config file (`--config`), with the
/// same name; a flag given on the command line wins over the file.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ArbArgs {
    /// TOML file with any of these options (see examples/arb.toml).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Capture of feed A (pcap or pcapng).
    #[arg(long, value_name = "A.pcap")]
    pub a: Option<PathBuf>,
    /// Capture of feed B (pcap or pcapng).
    #[arg(long, value_name = "B.pcap")]
    pub b: Option<PathBuf>,
    /// Packet header layout: a preset, or custom with --seq-offset etc. [default: moldudp64]
    #[arg(long, value_name = "moldudp64|xdp|opra|custom")]
    pub protocol: Option<Protocol>,
    /// Byte offset of the sequence number in the UDP payload (overrides the preset).
    #[arg(long, value_name = "N")]
    pub seq_offset: Option<usize>,
    /// Width of the sequence number in bytes, 1..=8.
    #[arg(long, value_name = "N")]
    pub seq_bytes: Option<u8>,
    /// Byte order of the sequence number and count.
    #[arg(long, value_name = "big|little")]
    pub seq_endian: Option<EndianArg>,
    /// Byte offset of the message count in the UDP payload.
    #[arg(long, value_name = "N")]
    pub count_offset: Option<usize>,
    /// Width of the message count in bytes; 0 means every packet carries one message.
    #[arg(long, value_name = "N")]
    pub count_bytes: Option<u8>,
    /// Accept only UDP to these destinations (PORT, GROUP or GROUP:PORT; repeatable).
    /// Everything else goes to the other output.
    #[arg(long, value_name = "GROUP:PORT")]
    pub accept: Vec<String>,
    /// High-reliability window. [default: time]
    #[arg(long, value_name = "low-latency|time|count|time-count")]
    pub mode: Option<ModeArg>,
    /// Time window of time and time-count modes, microseconds. [default: 1000]
    #[arg(long, value_name = "N")]
    pub timeout_us: Option<u64>,
    /// Message window of count and time-count modes. [default: 1000]
    #[arg(long, value_name = "N")]
    pub max_msgs: Option<u64>,
    /// Switch the policy at a replay time (seconds after the first frame), e.g.
    /// 2.5:count,max-msgs=100. Repeatable.
    #[arg(long, value_name = "SECONDS:MODE[,timeout-us=N][,max-msgs=N]")]
    pub change_at: Vec<String>,
    /// HR buffer capacity in packets. [default: 4096]
    #[arg(long, value_name = "N")]
    pub capacity_packets: Option<usize>,
    /// HR buffer capacity in bytes. [default: 16777216]
    #[arg(long, value_name = "N")]
    pub capacity_bytes: Option<usize>,
    /// Release every wait after this long without data, milliseconds; 0 = never. [default: 1000]
    #[arg(long, value_name = "MS")]
    pub idle_ms: Option<u64>,
    /// First expected sequence number (default: the first packet's).
    #[arg(long, value_name = "N")]
    pub start_seq: Option<u64>,
    /// A sequence number this far below the highest seen starts a new sequence space;
    /// 0 = never. [default: 1073741824]
    #[arg(long, value_name = "N")]
    pub reset_jump: Option<u64>,
    /// Switch the low-latency output off.
    #[arg(long)]
    #[serde(default)]
    pub no_ll: bool,
    /// Switch the high-reliability output off.
    #[arg(long)]
    #[serde(default)]
    pub no_hr: bool,
    /// Write the low-latency output here (.pcapng for pcapng).
    #[arg(long, value_name = "ll.pcap")]
    pub ll_out: Option<PathBuf>,
    /// Write the high-reliability output here.
    #[arg(long, value_name = "hr.pcap")]
    pub hr_out: Option<PathBuf>,
    /// Write frames that are not market data here.
    #[arg(long, value_name = "other.pcap")]
    pub other_out: Option<PathBuf>,
    /// Write gap reports as CSV: output,first_seq,last_seq,messages,reason.
    #[arg(long, value_name = "gaps.csv")]
    pub gaps: Option<PathBuf>,
    /// Write statistics as JSON ('-' for stdout).
    #[arg(long, value_name = "stats.json|-")]
    pub stats: Option<PathBuf>,
    /// No human summary on stderr.
    #[arg(long, short)]
    #[serde(default)]
    pub quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeArg {
    LowLatency,
    Time,
    Count,
    TimeCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndianArg {
    Big,
    Little,
}

macro_rules! merge_opts {
    ($cli:ident, $file:ident; $($f:ident),*) => { $( if $cli.$f.is_none() { $cli.$f = $file.$f.take(); } )* };
}

impl ArbArgs {
    /// Fill what the command line left out from `--config`.
    pub fn with_config_file(mut self) -> Result<ArbArgs> {
        let Some(path) = self.config.clone() else { return Ok(self) };
        let text = std::fs::read_to_string(&path).with_context(|| format!("{}: cannot read config", path.display()))?;
        let mut f: ArbArgs = toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        // Paths in the file are relative to the file.
        for p in [&mut f.a, &mut f.b, &mut f.ll_out, &mut f.hr_out, &mut f.other_out, &mut f.gaps] {
            if let Some(x) = p.as_mut() {
                if x.is_relative() {
                    *x = base.join(&*x);
                }
            }
        }
        if let Some(x) = f.stats.as_mut() {
            if x.is_relative() && x.as_os_str() != "-" {
                *x = base.join(&*x);
            }
        }
        let s = &mut self;
        merge_opts!(s, f; a, b, protocol, seq_offset, seq_bytes, seq_endian, count_offset, count_bytes, mode, timeout_us, max_msgs,
            capacity_packets, capacity_bytes, idle_ms, start_seq, reset_jump, ll_out, hr_out, other_out, gaps, stats);
        if s.accept.is_empty() {
            s.accept = f.accept;
        }
        if s.change_at.is_empty() {
            s.change_at = f.change_at;
        }
        s.no_ll |= f.no_ll;
        s.no_hr |= f.no_hr;
        s.quiet |= f.quiet;
        Ok(self)
    }

    pub fn sequencer_config(&self) -> Result<SequencerConfig> {
        let protocol = self.protocol.unwrap_or(Protocol::Moldudp64);
        let mut c = SequencerConfig::preset(protocol);
        let endian = self.seq_endian.map(|e| if e == EndianArg::Big { Endian::Big } else { Endian::Little });
        let custom = self.seq_offset.is_some()
            || self.seq_bytes.is_some()
            || self.count_offset.is_some()
            || self.count_bytes.is_some();
        if custom && protocol == Protocol::Opra {
            bail!("--protocol opra reads its offsets from the block version; use --protocol custom for other layouts");
        }
        if let Some(o) = self.seq_offset {
            c.seq.offset = o;
        }
        if let Some(b) = self.seq_bytes {
            c.seq.bytes = b;
        }
        if let Some(e) = endian {
            c.seq.endian = e;
        }
        match (self.count_bytes, self.count_offset) {
            (Some(0), _) => c.count = CountSpec::Fixed(1),
            (bytes, offset) if bytes.is_some() || offset.is_some() => {
                let mut f = match c.count {
                    CountSpec::Field(f) => f,
                    CountSpec::Fixed(_) => FieldSpec::new(0, 2, c.seq.endian),
                };
                if let Some(b) = bytes {
                    f.bytes = b;
                }
                if let Some(o) = offset {
                    f.offset = o;
                }
                if let Some(e) = endian {
                    f.endian = e;
                }
                c.count = CountSpec::Field(f);
            }
            _ => {}
        }
        for a in &self.accept {
            c.accept.push(a.parse().map_err(|e: String| anyhow!("--accept: {e}"))?);
        }
        c.validate().map_err(|e| anyhow!("bad sequencer layout: {e}"))?;
        Ok(c)
    }

    pub fn policy(&self) -> Result<Policy> {
        make_policy(self.mode.unwrap_or(ModeArg::Time), self.timeout_us.unwrap_or(1000), self.max_msgs.unwrap_or(1000))
    }

    pub fn arb_config(&self) -> Result<ArbConfig> {
        let d = ArbConfig::default();
        let c = ArbConfig {
            inputs: 2,
            low_latency: !self.no_ll,
            high_reliability: !self.no_hr,
            policy: self.policy()?,
            capacity_packets: self.capacity_packets.unwrap_or(d.capacity_packets),
            capacity_bytes: self.capacity_bytes.unwrap_or(d.capacity_bytes),
            idle_ns: self.idle_ms.map_or(d.idle_ns, |m| m.saturating_mul(1_000_000)),
            reset_jump: self.reset_jump.unwrap_or(d.reset_jump),
            start_seq: self.start_seq,
            gap_memory: d.gap_memory,
        };
        c.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(c)
    }

    /// The `--change-at` schedule as (ns after the first frame, policy), in time order.
    pub fn changes(&self) -> Result<Vec<(u64, Policy)>> {
        let mut cur =
            (self.mode.unwrap_or(ModeArg::Time), self.timeout_us.unwrap_or(1000), self.max_msgs.unwrap_or(1000));
        let mut out = Vec::new();
        // Parse each spec once: (seconds, spec, the part after ':'), then apply in time order.
        let mut specs: Vec<(f64, &String, &str)> = Vec::new();
        for s in &self.change_at {
            let bad =
                |why: &str| anyhow!("--change-at {s:?}: {why} (expected SECONDS:MODE[,timeout-us=N][,max-msgs=N])");
            let (t, rest) = s.split_once(':').ok_or_else(|| bad("missing ':'"))?;
            let t: f64 = t.parse().map_err(|_| bad("SECONDS is not a number"))?;
            if !(t >= 0.0 && t.is_finite()) {
                return Err(bad("SECONDS must be >= 0"));
            }
            specs.push((t, s, rest));
        }
        specs.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (t, s, rest) in specs {
            let bad = |why: String| anyhow!("--change-at {s:?}: {why}");
            let mut parts = rest.split(',');
            let mode = parts.next().unwrap_or("");
            cur.0 = <ModeArg as clap::ValueEnum>::from_str(mode, false)
                .map_err(|_| bad(format!("unknown mode {mode:?} (low-latency, time, count, time-count)")))?;
            for kv in parts {
                let (k, v) = kv.split_once('=').ok_or_else(|| bad(format!("{kv:?} is not KEY=VALUE")))?;
                let v: u64 = v.parse().map_err(|_| bad(format!("{k} value {v:?} is not a whole number")))?;
                match k {
                    "timeout-us" => cur.1 = v,
                    "max-msgs" => cur.2 = v,
                    _ => return Err(bad(format!("unknown key {k:?} (timeout-us, max-msgs)"))),
                }
            }
            out.push(((t * 1e9).round() as u64, make_policy(cur.0, cur.1, cur.2)?));
        }
        Ok(out)
    }
}

fn make_policy(mode: ModeArg, timeout_us: u64, max_msgs: u64) -> Result<Policy> {
    let timeout_ns = timeout_us.checked_mul(1000).ok_or_else(|| anyhow!("--timeout-us {timeout_us} is too large"))?;
    Ok(match mode {
        ModeArg::LowLatency => Policy::LowLatency,
        ModeArg::Time => Policy::Time { timeout_ns },
        ModeArg::Count => Policy::Count { max_msgs },
        ModeArg::TimeCount => Policy::TimeCount { timeout_ns, max_msgs },
    })
}

/// What a run produced, for the summary, the stats file and tests.
#[derive(Debug, Serialize)]
pub struct ArbReport {
    pub inputs: BTreeMap<String, InputStats>,
    pub outputs: BTreeMap<String, OutputStats>,
    pub other_by_reason: BTreeMap<String, u64>,
    pub sequence_resets: u64,
    pub gaps_by_reason: BTreeMap<String, u64>,
    /// HR buffering delay (release - arrival) over released packets, ns.
    pub hr_delay_ns: DelayStats,
    pub policy_changes: u64,
    pub frames: u64,
    pub wall_seconds: f64,
    pub frames_per_second: f64,
}

#[derive(Debug, Default, Serialize)]
pub struct DelayStats {
    pub packets: u64,
    pub delayed: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

struct Sink {
    ll: Option<FrameWriter>,
    hr: Option<FrameWriter>,
    other: Option<FrameWriter>,
    gaps: Option<BufWriter<File>>,
    gaps_path: PathBuf,
    error: Option<anyhow::Error>,
    delay: Histogram<u64>,
    delayed: u64,
    gaps_by_reason: BTreeMap<String, u64>,
    policy_changes: u64,
    names: [String; 2],
    frame_no: [u64; 2],
    warned: u32,
    quiet: bool,
}

impl Sink {
    fn keep(&mut self, r: Result<()>) {
        if let Err(e) = r {
            if self.error.is_none() {
                self.error = Some(e);
            }
        }
    }
}

const MAX_WARNINGS: u32 = 10;

impl Feed for Sink {
    fn stopped(&self) -> bool {
        self.error.is_some()
    }
    #[inline(always)]
    fn frame(&mut self, input: usize) {
        self.frame_no[input] += 1;
    }
}

impl ArbSink for Sink {
    #[inline]
    fn ll(&mut self, now: u64, frame: &[u8]) {
        if let Some(w) = self.ll.as_mut() {
            let r = w.write(now, frame).map_err(Into::into);
            self.keep(r);
        }
    }
    #[inline]
    fn hr(&mut self, r: &Released<'_>) {
        let d = r.release_ns - r.arrival_ns;
        if d > 0 {
            self.delayed += 1;
        }
        self.delay.saturating_record(d);
        if let Some(w) = self.hr.as_mut() {
            let res = w.write(r.release_ns, r.frame).map_err(Into::into);
            self.keep(res);
        }
    }
    fn other(&mut self, now: u64, input: usize, frame: &[u8], other: &tickplant_core::Other) {
        if other.reason == OtherReason::Malformed && !self.quiet {
            if self.warned < MAX_WARNINGS {
                eprintln!(
                    "warning: {}: frame {}: {} (routed to other)",
                    self.names[input], self.frame_no[input], other
                );
            } else if self.warned == MAX_WARNINGS {
                eprintln!("warning: more malformed frames; counted in the statistics");
            }
            self.warned += 1;
        }
        if let Some(w) = self.other.as_mut() {
            let r = w.write(now, frame).map_err(Into::into);
            self.keep(r);
        }
    }
    fn gap(&mut self, g: &GapReport) {
        *self.gaps_by_reason.entry(format!("{}:{}", g.output.as_str(), g.reason.as_str())).or_default() += 1;
        if let Some(w) = self.gaps.as_mut() {
            let r = writeln!(
                w,
                "{},{},{},{},{}",
                g.output.as_str(),
                g.first_seq,
                g.last_seq,
                g.messages,
                g.reason.as_str()
            )
            .with_context(|| format!("{}: write error", self.gaps_path.display()));
            self.keep(r);
        }
    }
    fn event(&mut self, e: &ArbEvent) {
        match e {
            ArbEvent::PolicyChanged { .. } => self.policy_changes += 1,
            ArbEvent::SequenceReset { kind, old_next, new_seq, input, .. } if !self.quiet => {
                eprintln!(
                    "note: sequence reset ({kind:?}) on {}: {old_next} -> {new_seq}",
                    self.names[usize::from(*input)]
                );
            }
            _ => {}
        }
    }
}

/// Run the arbitrator over the A and B captures.
pub fn run(args: &ArbArgs) -> Result<ArbReport> {
    let a_path = args.a.clone().ok_or_else(|| anyhow!("--a A.pcap is required"))?;
    let b_path = args.b.clone().ok_or_else(|| anyhow!("--b B.pcap is required"))?;
    let seq = Sequencer::new(args.sequencer_config()?).map_err(|e| anyhow!(e))?;
    let cfg = args.arb_config()?;
    let changes = args.changes()?;
    if args.no_ll && args.ll_out.is_some() {
        bail!("--ll-out given but --no-ll switches that output off");
    }
    if args.no_hr && args.hr_out.is_some() {
        bail!("--hr-out given but --no-hr switches that output off");
    }
    let ra = FrameReader::open(&a_path)?;
    let rb = FrameReader::open(&b_path)?;
    let link = ra.link_type();
    if rb.link_type() != link {
        bail!(
            "{} has link type {:?} but {} has {:?}: outputs need one link type",
            a_path.display(),
            link,
            b_path.display(),
            rb.link_type()
        );
    }
    let mut arb = Arbitrator::new(cfg, seq).map_err(|e| anyhow!(e))?;
    arb.set_link(0, ra.link_type());
    arb.set_link(1, rb.link_type());
    let open = |p: &Option<PathBuf>| -> Result<Option<FrameWriter>> {
        Ok(match p {
            Some(p) => Some(FrameWriter::create(p, link, Format::for_path(p))?),
            None => None,
        })
    };
    let gaps = match &args.gaps {
        Some(p) => {
            let mut w = BufWriter::new(File::create(p).with_context(|| format!("{}: cannot create", p.display()))?);
            writeln!(w, "output,first_seq,last_seq,messages,reason")?;
            Some(w)
        }
        None => None,
    };
    let mut sink = Sink {
        ll: open(&args.ll_out)?,
        hr: open(&args.hr_out)?,
        other: open(&args.other_out)?,
        gaps,
        gaps_path: args.gaps.clone().unwrap_or_default(),
        error: None,
        delay: Histogram::new_with_max(3_600_000_000_000, 3).expect("valid bounds"),
        delayed: 0,
        gaps_by_reason: BTreeMap::new(),
        policy_changes: 0,
        names: [a_path.display().to_string(), b_path.display().to_string()],
        frame_no: [0; 2],
        warned: 0,
        quiet: args.quiet,
    };
    let started = std::time::Instant::now();
    let mut merged = MergedReader::new(vec![ra, rb]);
    // The runner every arbitrating command shares (tickplant_io::runner); nothing timed.
    let opts = RunOptions { sample: u32::MAX, progress: false, changes: &changes };
    let done = runner::run(&mut merged, &mut arb, &mut sink, &mut Ticks::new(), opts).map_err(|e| anyhow!("{e}"))?;
    if let Some(e) = sink.error.take() {
        return Err(e);
    }
    let frames = done.frames;
    if done.changes_applied < changes.len() && !args.quiet {
        eprintln!(
            "warning: {} --change-at time(s) after the end of the input were not applied",
            changes.len() - done.changes_applied
        );
    }
    for w in [sink.ll.take(), sink.hr.take(), sink.other.take()].into_iter().flatten() {
        w.finish()?;
    }
    if let Some(mut g) = sink.gaps.take() {
        g.flush().with_context(|| format!("{}: write error", sink.gaps_path.display()))?;
    }
    let wall = started.elapsed().as_secs_f64();
    let st = arb.stats();
    check_stats(&st).map_err(|e| anyhow!("internal error, accounting does not balance: {e}"))?;
    let h = &sink.delay;
    let report = ArbReport {
        inputs: [("a".to_string(), st.inputs[0]), ("b".to_string(), st.inputs[1])].into_iter().collect(),
        outputs: [("ll".to_string(), st.ll), ("hr".to_string(), st.hr)].into_iter().collect(),
        other_by_reason: st.other_by_reason.clone(),
        sequence_resets: st.sequence_resets,
        gaps_by_reason: sink.gaps_by_reason,
        hr_delay_ns: DelayStats {
            packets: h.len(),
            delayed: sink.delayed,
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        },
        policy_changes: sink.policy_changes,
        frames,
        wall_seconds: wall,
        frames_per_second: frames as f64 / wall.max(1e-9),
    };
    if let Some(p) = &args.stats {
        let json = serde_json::to_string_pretty(&report)?;
        if p.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(p, json + "\n").with_context(|| format!("{}: cannot write", p.display()))?;
        }
    }
    if !args.quiet {
        eprint!("{}", summary(&report, &arb.policy()));
    }
    Ok(report)
}

/// The human summary.
pub fn summary(r: &ArbReport, policy: &Policy) -> String {
    let mut s = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        s,
        "tickplant arb: {} frames in {:.3} s ({:.2} M frames/s), final policy {}",
        r.frames,
        r.wall_seconds,
        r.frames_per_second / 1e6,
        policy.mode_name()
    );
    let _ = writeln!(
        s,
        "  {:<6} {:>10} {:>12} {:>10} {:>10} {:>8} {:>10} {:>8}",
        "input", "packets", "messages", "wins", "dups", "late", "reordered", "other"
    );
    for (name, i) in &r.inputs {
        let _ = writeln!(
            s,
            "  {:<6} {:>10} {:>12} {:>10} {:>10} {:>8} {:>10} {:>8}",
            name, i.packets, i.messages, i.wins, i.duplicates, i.late, i.out_of_order, i.other
        );
    }
    let _ = writeln!(
        s,
        "  {:<6} {:>10} {:>12} {:>10} {:>14} {:>8}",
        "output", "packets", "messages", "gaps", "messages lost", "trimmed"
    );
    for (name, o) in &r.outputs {
        if o.enabled {
            let _ = writeln!(
                s,
                "  {:<6} {:>10} {:>12} {:>10} {:>14} {:>8}",
                name, o.packets, o.messages, o.gaps, o.messages_lost, o.trimmed
            );
        }
    }
    let d = &r.hr_delay_ns;
    if r.outputs["hr"].enabled {
        let _ = writeln!(
            s,
            "  hr buffering delay: {} of {} packets waited; p50 {} ns, p99 {} ns, p99.9 {} ns, max {} ns",
            d.delayed, d.packets, d.p50, d.p99, d.p999, d.max
        );
    }
    if r.sequence_resets > 0 {
        let _ = writeln!(s, "  sequence resets: {}", r.sequence_resets);
    }
    let other: u64 = r.other_by_reason.values().sum();
    if other > 0 {
        let parts: Vec<String> =
            r.other_by_reason.iter().filter(|(_, n)| **n > 0).map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(s, "  other traffic: {}", parts.join(", "));
    }
    let _ = writeln!(s, "  accounting: balanced");
    s
}

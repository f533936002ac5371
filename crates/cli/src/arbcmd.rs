//! `tickplant arb`: arbitrate A/B captures or live groups into LL and HR outputs (captures,
//! or groups the packets are sent on to).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use serde::Serialize;
use tickplant_core::arb::{check_stats, ArbSink, Released};
use tickplant_core::*;
use tickplant_io::config::ArbArgs;
use tickplant_io::hist::Ticks;
use tickplant_io::live::{self, Input, LiveInputStats, LiveOptions};
use tickplant_io::outputs::{Outputs, SentStats};
use tickplant_io::runner::{self, Feed, RunOptions};
use tickplant_io::{AnySource, Source};

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
    /// Count and time-count windows: how fast the window fills at the run's message rate,
    /// beside the waits the HR output made (the research's saturation model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Saturation>,
    /// Live inputs: what each received and what the kernel dropped on its socket.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveInputStats>,
    /// Captures that cut frames short (their snapshot length), by input: those frames
    /// count as other, what they carried as gaps.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cut_short: BTreeMap<String, tickplant_io::pcap::CutShort>,
    /// Outputs sent on to groups: datagrams sent and send errors, by output.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sent: BTreeMap<String, SentStats>,
    /// Re-requests to the exchange's retransmission server, when on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerequest: Option<tickplant_core::RerequestStats>,
}

/// The saturation indicator of a count or time-count window. At a high enough message rate
/// a window of `max-msgs` messages fills before the other line's copy of a lost packet can
/// arrive: the HR output gives each such wait up by count, the copy then comes late, and HR
/// is acting as the low-latency output.
#[derive(Debug, Default, Serialize)]
pub struct Saturation {
    pub window_msgs: u64,
    /// HR messages a second over the span of their arrivals.
    pub message_rate_per_s: f64,
    /// `window_msgs / rate`: how long the window lasts at that rate.
    pub window_fill_ns: u64,
    /// The HR output's buffering delay (release - arrival) of the packets that waited.
    pub hr_delay_p99_ns: u64,
    pub hr_delay_max_ns: u64,
    /// HR waits given up because the window filled.
    pub count_gaps: u64,
    /// HR packets that arrived after their wait was given up.
    pub hr_late: u64,
    /// Waits given up by count whose packet then came: the window fills faster than a
    /// packet can be waited for.
    pub saturated: bool,
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
    outs: Outputs,
    gaps: Option<BufWriter<File>>,
    gaps_path: PathBuf,
    error: Option<anyhow::Error>,
    delay: Histogram<u64>,
    delayed: u64,
    gaps_by_reason: BTreeMap<String, u64>,
    policy_changes: u64,
    names: Vec<String>,
    frame_no: [u64; 3],
    warned: u32,
    quiet: bool,
    /// Arrival times of the first and last HR packets released.
    arrivals: Option<(u64, u64)>,
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
        self.error.is_some() || self.outs.error.is_some()
    }
    #[inline(always)]
    fn frame(&mut self, input: usize) {
        self.frame_no[input] += 1;
    }
}

impl ArbSink for Sink {
    #[inline]
    fn ll(&mut self, f: &Released<'_>) {
        self.outs.ll(f);
    }
    #[inline]
    fn hr(&mut self, r: &Released<'_>) {
        let d = r.release_ns - r.arrival_ns;
        let (first, last) = self.arrivals.get_or_insert((r.arrival_ns, r.arrival_ns));
        *first = (*first).min(r.arrival_ns);
        *last = (*last).max(r.arrival_ns);
        if d > 0 {
            self.delayed += 1;
        }
        self.delay.saturating_record(d);
        self.outs.hr(r);
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
        self.outs.other(now, frame);
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

/// Run the arbitrator over the A and B inputs (captures, or live groups).
pub fn run(args: &ArbArgs) -> Result<ArbReport> {
    let a_path = args.a.clone().ok_or_else(|| anyhow!("--a A.pcap (or udp://GROUP:PORT) is required"))?;
    if let Some(p) = &args.stats {
        crate::check_writable(p, "--stats")?;
    }
    // One input is a line of its own: sequenced, gaps reported, written or sent on (a
    // receiver of a republished stream).
    let mut paths = vec![a_path];
    paths.extend(args.b.clone());
    let seq = Sequencer::new(args.sequencer_config()?).map_err(|e| anyhow!(e))?;
    let mut cfg = args.arb_config()?;
    cfg.inputs = paths.len();
    let changes = args.changes()?;
    if args.no_ll && args.ll_out.is_some() {
        bail!("--ll-out given but --no-ll switches that output off");
    }
    if args.no_hr && args.hr_out.is_some() {
        bail!("--hr-out given but --no-hr switches that output off");
    }
    let is_live = paths.iter().any(|p| Input::is_live(p));
    let mut opts = LiveOptions::default();
    if is_live {
        // A live run ends at SIGINT or SIGTERM, or after --duration: drained, the
        // arbitrator flushed (the gaps still waiting reported), outputs closed, exit 0.
        opts.stop = live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
        opts.duration = args.duration.map(|d| crate::seconds(d, "--duration")).transpose()?;
    } else if args.duration.is_some() {
        bail!("--duration is for live inputs (udp://...); a capture's run ends at its end");
    }
    opts.rerequest = args.recovery().rerequest()?.map(|(server, _)| server);
    let mut source = AnySource::open(&paths, &opts).map_err(|e| anyhow!("{e}"))?;
    source.check_protocol(seq.config().protocol).map_err(|e| anyhow!("{e}"))?;
    let link = source.link_type(0);
    if paths.len() == 2 && source.link_type(1) != link {
        bail!(
            "{} has link type {:?} but {} has {:?}: outputs need one link type",
            paths[0].display(),
            link,
            paths[1].display(),
            source.link_type(1)
        );
    }
    let mut arb = Arbitrator::new(cfg, seq).map_err(|e| anyhow!(e))?;
    for i in 0..source.inputs() {
        arb.set_link(i, source.link_type(i));
    }
    let rotate = args.rotate()?;
    let outs = Outputs::open(args.ll_out.as_deref(), args.hr_out.as_deref(), args.other_out.as_deref(), link, rotate)?;
    let gaps = match &args.gaps {
        Some(p) => {
            let mut w = BufWriter::new(File::create(p).with_context(|| format!("{}: cannot create", p.display()))?);
            writeln!(w, "output,first_seq,last_seq,messages,reason")?;
            Some(w)
        }
        None => None,
    };
    let mut sink = Sink {
        outs,
        gaps,
        gaps_path: args.gaps.clone().unwrap_or_default(),
        error: None,
        delay: Histogram::new_with_max(3_600_000_000_000, 3).expect("valid bounds"),
        delayed: 0,
        gaps_by_reason: BTreeMap::new(),
        policy_changes: 0,
        names: (0..source.inputs()).map(|i| source.input_name(i)).collect(),
        frame_no: [0; 3],
        warned: 0,
        quiet: args.quiet,
        arrivals: None,
    };
    let started = std::time::Instant::now();
    // The runner every arbitrating command shares (tickplant_io::runner); nothing timed.
    let opts = RunOptions { sample: u32::MAX, progress: false, changes: &changes, publish: None, control: None };
    let done = runner::run(&mut source, &mut arb, &mut sink, &mut Ticks::new(), opts).map_err(|e| anyhow!("{e}"))?;
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
    let mut sent = BTreeMap::new();
    for (name, st) in std::mem::take(&mut sink.outs).finish()? {
        if st.errors > 0 && !args.quiet {
            eprintln!(
                "warning: {name} output to {}: {} send errors (last: {})",
                st.to,
                st.errors,
                st.last_error.as_deref().unwrap_or("")
            );
        }
        sent.insert(name.to_string(), st);
    }
    if let Some(mut g) = sink.gaps.take() {
        g.flush().with_context(|| format!("{}: write error", sink.gaps_path.display()))?;
    }
    let wall = started.elapsed().as_secs_f64();
    let st = arb.stats();
    check_stats(&st).map_err(|e| anyhow!("internal error, accounting does not balance: {e}"))?;
    let saturation = saturation(&arb.policy(), &st, &sink);
    let h = &sink.delay;
    let report = ArbReport {
        inputs: ["a", "b"][..paths.len()]
            .iter()
            .chain(st.rerequest.is_some().then_some(&"rerequest"))
            .map(|n| n.to_string())
            .zip(st.inputs.iter().copied())
            .collect(),
        rerequest: st.rerequest,
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
        saturation,
        live: source.live_stats(),
        cut_short: (0..source.inputs())
            .map(|i| (source.input_name(i), source.cut_short(i)))
            .filter(|(_, c)| c.frames > 0)
            .collect(),
        sent,
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

/// The saturation indicator, for a count or time-count window.
fn saturation(policy: &Policy, st: &ArbStats, sink: &Sink) -> Option<Saturation> {
    let (Policy::Count { max_msgs } | Policy::TimeCount { max_msgs, .. }) = *policy else { return None };
    let span_ns = sink.arrivals.map_or(0, |(a, b)| b - a);
    let rate = if span_ns > 0 { st.hr.messages as f64 * 1e9 / span_ns as f64 } else { 0.0 };
    let count_gaps = sink.gaps_by_reason.get("hr:count").copied().unwrap_or(0);
    Some(Saturation {
        window_msgs: max_msgs,
        message_rate_per_s: rate,
        window_fill_ns: if rate > 0.0 { (max_msgs as f64 / rate * 1e9) as u64 } else { u64::MAX },
        hr_delay_p99_ns: sink.delay.value_at_quantile(0.99),
        hr_delay_max_ns: sink.delay.max(),
        count_gaps,
        hr_late: st.hr.late,
        saturated: count_gaps > 0 && st.hr.late > 0,
    })
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
    for (input, c) in &r.cut_short {
        if let Some(w) = c.warning(input) {
            let _ = writeln!(s, "  warning: {w}");
        }
    }
    for w in r.live.iter().filter_map(LiveInputStats::warning) {
        let _ = writeln!(s, "  warning: {w}");
    }
    let _ = writeln!(
        s,
        "  {:<9} {:>7} {:>12} {:>10} {:>10} {:>8} {:>10} {:>8}",
        "input", "packets", "messages", "wins", "dups", "late", "reordered", "other"
    );
    for (name, i) in &r.inputs {
        let _ = writeln!(
            s,
            "  {:<9} {:>7} {:>12} {:>10} {:>10} {:>8} {:>10} {:>8}",
            name, i.packets, i.messages, i.wins, i.duplicates, i.late, i.out_of_order, i.other
        );
    }
    let _ = writeln!(
        s,
        "  {:<9} {:>7} {:>12} {:>10} {:>14} {:>8}",
        "output", "packets", "messages", "gaps", "messages lost", "trimmed"
    );
    for (name, o) in &r.outputs {
        if o.enabled {
            let _ = writeln!(
                s,
                "  {:<9} {:>7} {:>12} {:>10} {:>14} {:>8}",
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
    if let Some(x) = &r.saturation {
        let _ = writeln!(
            s,
            "  window: {} messages fill in {:.1} us at {:.0} messages/s; HR waits p99 {} ns, max {} ns; {} waits given up by count, {} packets late after",
            x.window_msgs,
            x.window_fill_ns as f64 / 1e3,
            x.message_rate_per_s,
            x.hr_delay_p99_ns,
            x.hr_delay_max_ns,
            x.count_gaps,
            x.hr_late
        );
        if x.saturated {
            let _ = writeln!(
                s,
                "  SATURATED: the window fills faster than a lost packet's copy arrives; HR is acting as the low-latency output (raise max-msgs, or use time or time-count)"
            );
        }
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
    if let Some(q) = &r.rerequest {
        let _ = writeln!(
            s,
            "  re-request: {} holes asked for, {} requests ({} retries, {} unanswered), {} messages asked, {} recovered",
            q.holes, q.requests, q.retries, q.unanswered, q.messages_requested, q.messages_recovered
        );
    }
    let _ = writeln!(s, "  accounting: balanced");
    s
}

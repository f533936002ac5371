//! `tickplant replay`: captures sent as live traffic, paced (see `tickplant_io::replay`).

use anyhow::{bail, Context, Result};
use clap::Args;
use tickplant_io::replay::{self, Pace, ReplayOptions, ReplayReport, ReplayTarget};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("pace").args(["speed", "pps", "max"])))]
pub struct ReplayArgs {
    /// Captures (pcap, pcapng, or an ITCH BinaryFILE sent as MoldUDP64) and where to send
    /// them: FILE=GROUP:PORT[@IFACE_ADDR] (the interface's address sends to a multicast
    /// group). Several are merged in capture-time order. FILE#GROUP:PORT=... sends only the
    /// datagrams the capture holds to that recorded destination: one line of a capture of
    /// several (a tap's capture of A and B, a feed's channels); the same file may be named
    /// once for each.
    #[arg(required = true, value_name = "FILE[#GROUP:PORT]=GROUP:PORT[@IFACE_ADDR]")]
    pub targets: Vec<ReplayTarget>,
    /// The recorded spacing divided by X (2: twice as fast). [default: 1]
    #[arg(long, value_name = "X")]
    pub speed: Option<f64>,
    /// A fixed rate, packets a second, whatever the recorded spacing.
    #[arg(long, value_name = "N")]
    pub pps: Option<f64>,
    /// As fast as the sockets take them, each capture from a thread of its own (no order
    /// kept between captures).
    #[arg(long)]
    pub max: bool,
    /// Play the captures N times.
    #[arg(long = "loop", value_name = "N", default_value_t = 1)]
    pub loops: u32,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Write the report as JSON here ('-' for stdout).
    #[arg(long, value_name = "FILE|-")]
    pub report: Option<std::path::PathBuf>,
    /// No progress lines or summary on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(a: &ReplayArgs) -> Result<ReplayReport> {
    if let Some(p) = &a.report {
        crate::check_writable(p, "--report")?;
    }
    let pace = match (a.speed, a.pps, a.max) {
        (_, _, true) => Pace::Max,
        (_, Some(r), _) => Pace::Pps(r),
        (Some(x), _, _) => Pace::Speed(x),
        _ => Pace::Speed(1.0),
    };
    if a.loops == 0 {
        bail!("--loop 0: play the captures at least once");
    }
    let duration = a.duration.map(|d| crate::seconds(d, "--duration")).transpose()?;
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let opts = ReplayOptions { pace, loops: a.loops, duration, stop };
    let quiet = a.quiet;
    let r = replay::replay(&a.targets, &opts, |n| {
        if !quiet {
            eprintln!("replay: {n} frames sent");
        }
    })?;
    if let Some(p) = &a.report {
        let json = serde_json::to_string_pretty(&r)?;
        if p.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(p, json + "\n").with_context(|| format!("{}: cannot write", p.display()))?;
        }
    }
    if !quiet {
        eprintln!(
            "tickplant replay: {} frames ({} bytes) in {:.3} s, {:.0} packets/s{}",
            r.frames_sent,
            r.bytes_sent,
            r.seconds,
            r.packets_per_s,
            if r.stopped { ", stopped early" } else { "" }
        );
        for (t, n) in a.targets.iter().zip(&r.sent) {
            let only = t.only.map_or(String::new(), |o| format!("#{o}"));
            eprintln!("  {}{only} -> {}: {n} datagrams", t.path.display(), t.to);
        }
        if pace != Pace::Max {
            eprintln!(
                "  late against the deadlines: p50 {} ns, p99 {} ns, max {} ns",
                r.late_p50_ns, r.late_p99_ns, r.late_max_ns
            );
        }
        eprintln!(
            "  skipped (not UDP): {}, (to other destinations than #GROUP:PORT): {}, send errors: {}",
            r.skipped_not_udp, r.skipped_other_destination, r.send_errors
        );
        if let Some(e) = &r.last_send_error {
            eprintln!("  last send error: {e}");
        }
    }
    for w in r.warnings(&a.targets) {
        eprintln!("warning: {w}");
    }
    if r.skipped_cut_short > 0 {
        eprintln!(
            "warning: {} frames were cut short by the capture (its snapshot length) inside their datagram: not sent. Capture with a larger snapshot length (tcpdump -s 0)",
            r.skipped_cut_short
        );
    }
    Ok(r)
}

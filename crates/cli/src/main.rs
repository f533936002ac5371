//! The `tickplant` command line: thin subcommands over the library crates.

mod arbcmd;
mod bench;
mod itchcmd;
mod simcmd;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "tickplant", version, about = "Market-data feed handler: A/B line arbitration, simulators and benchmarks.", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Merge redundant A/B captures into a low-latency and a high-reliability output.
    Arb(Box<arbcmd::ArbArgs>),
    /// Simulators: feed generators and the A/B impairer.
    #[command(subcommand)]
    Sim(simcmd::SimCmd),
    /// NASDAQ TotalView-ITCH 5.0: decode, count, build books.
    #[command(subcommand)]
    Itch(itchcmd::ItchCmd),
    /// Generate a feed, impair it onto A and B, arbitrate, and check against ground truth.
    Demo(DemoArgs),
    /// Performance benchmarks with their targets and peers.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Debug, clap::Args)]
struct DemoArgs {
    /// Working folder for the generated captures (default: a fresh temporary folder).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Packets in the generated feed.
    #[arg(long, default_value_t = 200_000)]
    packets: u64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Arbitrator decision cost (ns/packet, vs a naive peer) and end-to-end pcap throughput.
    Arb {
        /// Packets per feed for the decision-cost runs.
        #[arg(long, default_value_t = 1_000_000)]
        packets: u64,
        /// Packets per feed for the end-to-end run.
        #[arg(long, default_value_t = 1_000_000)]
        e2e_packets: u64,
        /// Rounds per scenario (the best is reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Arb(a) => {
            let a = a.with_config_file()?;
            arbcmd::run(&a)?;
        }
        Cmd::Sim(simcmd::SimCmd::Moldudp64(a)) => {
            let n = simcmd::moldudp64(&a)?;
            eprintln!("wrote {n} MoldUDP64 packets to {}", a.out.display());
        }
        Cmd::Sim(simcmd::SimCmd::Impair(a)) => {
            let (na, nb) = simcmd::impair_cmd(&a)?;
            eprintln!("wrote {na} frames to {} and {nb} to {}", a.out_a.display(), a.out_b.display());
        }
        Cmd::Sim(simcmd::SimCmd::Itch(a)) => {
            let (n, live) = simcmd::itch_cmd(&a)?;
            eprintln!(
                "wrote {n} ITCH 5.0 messages ({} symbols, {live} orders live at the end) to {}",
                a.symbols,
                a.out.display()
            );
        }
        Cmd::Itch(itchcmd::ItchCmd::Decode(a)) => {
            itchcmd::decode(&a)?;
        }
        Cmd::Itch(itchcmd::ItchCmd::Stats(a)) => itchcmd::stats(&a)?,
        Cmd::Itch(itchcmd::ItchCmd::Book(a)) => itchcmd::book(&a)?,
        Cmd::Demo(d) => demo(&d)?,
        Cmd::Bench(BenchCmd::Arb { packets, e2e_packets, rounds }) => {
            bench::decision_cost(packets, rounds.max(1), |l| println!("{l}"));
            let dir = tempdir("bench")?;
            let r = bench::end_to_end(&dir, e2e_packets, |l| println!("{l}"));
            let _ = std::fs::remove_dir_all(&dir);
            r?;
        }
    }
    Ok(())
}

fn tempdir(what: &str) -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("tickplant-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("{}: cannot create", d.display()))?;
    Ok(d)
}

fn demo(d: &DemoArgs) -> Result<()> {
    let (dir, temp) = match &d.dir {
        Some(p) => {
            std::fs::create_dir_all(p).with_context(|| format!("{}: cannot create", p.display()))?;
            (p.clone(), false)
        }
        None => (tempdir("demo")?, true),
    };
    let feed = dir.join("feed.pcap");
    eprintln!("demo: 1/3 generating {} MoldUDP64 packets of ITCH 5.0 into {}", d.packets, feed.display());
    simcmd::moldudp64(&simcmd::MoldArgs {
        seed: d.seed,
        packets: d.packets,
        max_msgs_per_packet: 4,
        spacing_ns: 2_000,
        out: feed.clone(),
    })?;
    eprintln!("demo: 2/3 impairing onto A and B: 2% loss each, 1% reorder, 0.5% duplicates, 0..30 us skew");
    let imp = simcmd::ImpairArgs {
        input: feed,
        seed: d.seed,
        loss_a: 0.02,
        loss_b: 0.02,
        reorder: 0.01,
        dup: 0.005,
        skew_us: "0..30".into(),
        out_a: dir.join("a.pcap"),
        out_b: dir.join("b.pcap"),
        truth: Some(dir.join("truth.csv")),
        protocol: tickplant_core::Protocol::Moldudp64,
    };
    simcmd::impair_cmd(&imp)?;
    eprintln!("demo: 3/3 arbitrating (high reliability: time window 100 us)");
    let args = arbcmd::ArbArgs {
        a: Some(imp.out_a.clone()),
        b: Some(imp.out_b.clone()),
        timeout_us: Some(100),
        // MoldUDP64 sessions start at 1: a first packet lost on one line and late on the
        // other is then recovered, not taken as the start.
        start_seq: Some(1),
        ll_out: Some(dir.join("ll.pcap")),
        hr_out: Some(dir.join("hr.pcap")),
        gaps: Some(dir.join("gaps.csv")),
        stats: Some(dir.join("stats.json")),
        ..Default::default()
    };
    let report = arbcmd::run(&args)?;
    // Check against the ground truth: HR lost exactly what both feeds lost (before the
    // last packet that arrived anywhere; a tail lost on both is undetectable).
    let truth = std::fs::read_to_string(dir.join("truth.csv"))?;
    let rows: Vec<(u64, u64, bool)> = truth
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[1].parse().unwrap_or(0), c[2].parse().unwrap_or(0), c[3] == "0" && c[4] == "0")
        })
        .collect();
    let last_seen = rows.iter().rposition(|r| !r.2).unwrap_or(0);
    let lost: u64 = rows[..last_seen].iter().filter(|r| r.2).map(|r| r.1).sum();
    let total: u64 = rows[..=last_seen].iter().map(|r| r.1).sum();
    let hr = &report.outputs["hr"];
    if hr.messages_lost != lost || hr.messages != total - lost {
        bail!(
            "demo: HR output does not match the ground truth: lost {} (truth {lost}), delivered {} (truth {})",
            hr.messages_lost,
            hr.messages,
            total - lost
        );
    }
    let ll = &report.outputs["ll"];
    println!(
        "demo: verified against ground truth: HR delivered {} of {} messages and lost exactly the {} both feeds lost; LL delivered {} with no wait",
        hr.messages, total, lost, ll.messages
    );
    println!("demo: files in {}", dir.display());
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
        println!("demo: (temporary folder removed; pass --dir to keep the captures)");
    }
    Ok(())
}

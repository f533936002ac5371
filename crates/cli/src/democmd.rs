//! `tickplant demo`: a simulated ITCH day through the whole pipeline, checked against the
//! simulator's ground truth.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tickplant_core::event::Side;
use tickplant_core::itch::PRICE4_TO_NANO;

use crate::simcmd;
use tickplant_io::config::RunConfig;

/// The pipeline the demo runs (also `examples/demo.toml`).
pub const DEMO_TOML: &str = include_str!("../../../examples/demo.toml");
/// The strategies its matching consumer uses (also `examples/strategies.txt`).
pub const DEMO_STRATEGIES: &str = include_str!("../../../examples/strategies.txt");

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Working folder for the generated captures and outputs (default: a fresh temporary
    /// folder, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Messages in the generated day.
    #[arg(long, default_value_t = 2_000_000)]
    pub messages: u64,
    /// Symbols in the generated day.
    #[arg(long, default_value_t = 200)]
    pub symbols: u32,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
}

pub fn demo(d: &DemoArgs) -> Result<()> {
    let t0 = Instant::now();
    let (dir, temp) = match &d.dir {
        Some(p) => {
            std::fs::create_dir_all(p).with_context(|| format!("{}: cannot create", p.display()))?;
            (p.clone(), false)
        }
        None => (crate::tempdir("demo")?, true),
    };
    let mut cfg = RunConfig::parse(DEMO_TOML).context("examples/demo.toml")?;
    cfg.relative_to(&dir);
    std::fs::write(dir.join("strategies.txt"), DEMO_STRATEGIES)
        .with_context(|| format!("{}: cannot write strategies.txt", dir.display()))?;
    let midnight = tickplant_core::itch::midnight_eastern_ns(&cfg.source.date).map_err(anyhow::Error::msg)?;
    eprintln!("demo: 1/4 generating an ITCH 5.0 day: {} messages over {} symbols", d.messages, d.symbols);
    let day = tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig {
        seed: d.seed,
        symbols: d.symbols,
        messages: d.messages,
        target_live: 0,
    });
    let feed = dir.join("feed.pcap");
    let packets = simcmd::write_itch_capture(&feed, &day.messages, d.seed, 8, midnight)?;
    eprintln!("demo: 2/4 {packets} MoldUDP64 packets; impairing onto A and B: 1% loss each, 1% reorder, 0.5% duplicates, 0..30 us skew");
    let imp = simcmd::ImpairArgs {
        input: feed,
        impair: crate::simcmd::ImpairFlags {
            seed: d.seed,
            loss_a: 0.01,
            loss_b: 0.01,
            reorder: 0.01,
            dup: 0.005,
            skew_us: "0..30".into(),
        },
        out_a: cfg.source.a.clone().expect("demo.toml names a"),
        out_b: cfg.source.b.clone().expect("demo.toml names b"),
        truth: Some(dir.join("truth.csv")),
        protocol: tickplant_core::Protocol::Moldudp64,
    };
    simcmd::impair_cmd(&imp)?;
    eprintln!("demo: 3/4 running the pipeline (examples/demo.toml): arbitrate, decode, books, 4 consumers");
    let out = crate::runcmd::run(&cfg, d.quiet, None)?;
    let r = &out.report;

    eprintln!("demo: 4/4 checking against the simulator's ground truth");
    // Messages both feeds lost, from the impairer's truth (a lost tail is undetectable).
    let truth = std::fs::read_to_string(dir.join("truth.csv"))?;
    let rows: Vec<(u64, u64, bool)> = truth
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[1].parse().unwrap_or(0), c[2].parse().unwrap_or(0), c[3] == "0" && c[4] == "0")
        })
        .collect();
    let last_seen = rows.iter().rposition(|x| !x.2).unwrap_or(0);
    let lost: u64 = rows[..last_seen].iter().filter(|x| x.2).map(|x| x.1).sum();
    let gap_msgs: u64 = r.gaps.iter().map(|g| g.messages).sum();
    if gap_msgs != lost {
        bail!("demo: the pipeline reported {gap_msgs} messages lost in gaps; both feeds lost {lost}");
    }
    // Instruments a lost message belonged to; every other book must equal the truth.
    let mut touched: HashSet<u16> = HashSet::new();
    for g in &r.gaps {
        for s in g.first_seq..=g.last_seq {
            if let Some(m) = day.messages.get((s - 1) as usize) {
                touched.insert(m.header().0);
            }
        }
    }
    let (mut compared, mut skipped) = (0, 0);
    for t in day.final_books() {
        if touched.contains(&t.locate) {
            skipped += 1;
            continue;
        }
        let b = out.books.book(u32::from(t.locate));
        let side = |s| {
            b.map(|b| {
                b.depth(s, usize::MAX)
                    .map(|l| ((l.price / PRICE4_TO_NANO) as u32, l.shares, l.orders))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
        };
        if side(Side::Bid) != t.bids || side(Side::Ask) != t.asks {
            bail!("demo: the book of {} differs from the simulator's truth", t.symbol);
        }
        compared += 1;
    }
    println!(
        "demo: verified: {} messages decoded, {} lost in {} gaps = exactly what both feeds lost; {compared} books equal the truth level by level ({skipped} touched by a gap, marked stale); accounting balanced",
        r.decoded,
        gap_msgs,
        r.gaps.len()
    );
    println!("demo: {:.1} s in all; pipeline {:.2} M messages/s", t0.elapsed().as_secs_f64(), r.messages_per_s / 1e6);
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
        println!("demo: (temporary folder removed; pass --dir to keep the captures, report.json, books.jsonl, bbo.jsonl, trades.csv, matches.jsonl)");
    } else {
        println!("demo: files in {}", dir.display());
    }
    Ok(())
}

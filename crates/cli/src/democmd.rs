//! `tickplant demo`: a simulated day through the whole pipeline, checked against the
//! simulator's ground truth: ITCH 5.0 (the default, with order books), or OPRA binary
//! (with each option series' best bid and offer across the exchanges).

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
/// The pipeline of `--feed nyse-xdp` (also `examples/nyse-xdp.toml`).
pub const NYSE_XDP_TOML: &str = include_str!("../../../examples/nyse-xdp.toml");
/// The pipeline of `--feed opra-binary` (also `examples/opra-binary.toml`).
pub const OPRA_BINARY_TOML: &str = include_str!("../../../examples/opra-binary.toml");

/// The feeds the demo can simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoFeed {
    /// NASDAQ TotalView-ITCH 5.0: order books checked level by level.
    Itch50,
    /// NYSE Integrated Feed, XDP v2.1: order books checked level by level.
    NyseXdp,
    /// NYSE Integrated Feed, Pillar v2.5: order books checked level by level.
    NysePillar,
    /// OPRA binary v6: quotes, trades and every series' best bid and offer checked.
    OpraBinary,
}

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
    /// Random seed of the day and of its impairment: the same seed, the same run.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// The feed to simulate (for opra-binary, --symbols counts option series).
    #[arg(long, value_enum, default_value = "itch50")]
    pub feed: DemoFeed,
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
    let done = |dir: &std::path::Path| {
        if temp {
            let _ = std::fs::remove_dir_all(dir);
            println!("demo: (temporary folder removed; pass --dir to keep the captures and the outputs)");
        } else {
            println!("demo: files in {}", dir.display());
        }
    };
    if d.feed == DemoFeed::OpraBinary {
        opra_binary(d, &dir)?;
        println!("demo: {:.1} s in all", t0.elapsed().as_secs_f64());
        done(&dir);
        return Ok(());
    }
    let nyse = matches!(d.feed, DemoFeed::NyseXdp | DemoFeed::NysePillar);
    let (toml, name) = if nyse { (NYSE_XDP_TOML, "examples/nyse-xdp.toml") } else { (DEMO_TOML, "examples/demo.toml") };
    let mut cfg = RunConfig::parse(toml).context(name)?;
    cfg.relative_to(&dir);
    let dialect = if d.feed == DemoFeed::NysePillar {
        cfg.source.decoder = tickplant_io::config::DecoderName::NysePillar;
        tickplant_wire::xdp_integrated::Dialect::Pillar25
    } else {
        tickplant_wire::xdp_integrated::Dialect::Xdp21
    };
    std::fs::write(dir.join("strategies.txt"), DEMO_STRATEGIES)
        .with_context(|| format!("{}: cannot write strategies.txt", dir.display()))?;
    // The day the generated capture falls on: the config's, or (`auto`, which the run then
    // tells from the capture) the simulators' own.
    let day = if cfg.source.date == "auto" { crate::simcmd::SIM_DATE } else { &cfg.source.date };
    let midnight = tickplant_core::itch::midnight_eastern_ns(day).map_err(anyhow::Error::msg)?;
    eprintln!(
        "demo: 1/4 generating an ITCH 5.0 day{}: {} messages over {} symbols",
        if nyse { " (to be sent as NYSE XDP)" } else { "" },
        d.messages,
        d.symbols
    );
    let day = tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig {
        seed: d.seed,
        symbols: d.symbols,
        messages: d.messages,
        target_live: 0,
    });
    let feed = dir.join("feed.pcap");
    // The symbol each message of the feed concerns, by sequence number - 1.
    let (packets, kind, protocol, of_seq): (u64, &str, _, Vec<u16>) = if nyse {
        let mut x = None;
        let flow = tickplant_wire::build::Flow::default();
        simcmd::write_capture(&feed, |emit| {
            x = Some(tickplant_sim::translate_itch_day(dialect, &day.messages, d.seed, 8, midnight, &flow, emit))
        })?;
        let x = x.unwrap_or_default();
        let of_seq = x.instruments.iter().map(|&i| i as u16).collect();
        let kind = if d.feed == DemoFeed::NysePillar { "NYSE Pillar" } else { "NYSE XDP" };
        (x.packets, kind, tickplant_core::Protocol::Xdp, of_seq)
    } else {
        let n = simcmd::write_itch_capture(&feed, &day.messages, d.seed, 8, midnight)?;
        (n, "MoldUDP64", tickplant_core::Protocol::Moldudp64, day.messages.iter().map(|m| m.header().0).collect())
    };
    eprintln!("demo: 2/4 {packets} {kind} packets; impairing onto A and B: 1% loss each, 1% reorder, 0.5% duplicates, 0..30 us skew");
    let (a, b) = (cfg.source.a.clone().expect("the config names a"), cfg.source.b.clone().expect("and b"));
    impair_onto_ab(d, feed, a, b, dir.join("truth.csv"), protocol)?;
    eprintln!("demo: 3/4 running the pipeline ({name}): arbitrate, decode, books, {} consumers", cfg.consumers.len());
    let out = crate::runcmd::run(&cfg, d.quiet, None)?;
    let r = &out.report;

    eprintln!("demo: 4/4 checking against the simulator's ground truth");
    let lost = lost_by_both(&dir.join("truth.csv"))?;
    let gap_msgs: u64 = r.gaps.iter().map(|g| g.messages).sum();
    if gap_msgs != lost {
        bail!("demo: the pipeline reported {gap_msgs} messages lost in gaps; both feeds lost {lost}");
    }
    // Instruments a lost message belonged to; every other book must equal the truth.
    let mut touched: HashSet<u16> = HashSet::new();
    for g in &r.gaps {
        for s in g.first_seq..=g.last_seq {
            if let Some(&locate) = of_seq.get((s - 1) as usize) {
                touched.insert(locate);
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
    done(&dir);
    Ok(())
}

/// Messages both feeds lost, from the impairer's truth file (a lost tail is undetectable).
fn lost_by_both(truth_csv: &std::path::Path) -> Result<u64> {
    let truth = std::fs::read_to_string(truth_csv)?;
    let rows: Vec<(u64, bool)> = truth
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[2].parse().unwrap_or(0), c[3] == "0" && c[4] == "0")
        })
        .collect();
    let last_seen = rows.iter().rposition(|x| !x.1).unwrap_or(0);
    Ok(rows[..last_seen].iter().filter(|x| x.1).map(|x| x.0).sum())
}

fn impair_onto_ab(
    d: &DemoArgs,
    feed: PathBuf,
    a: PathBuf,
    b: PathBuf,
    truth: PathBuf,
    protocol: tickplant_core::Protocol,
) -> Result<()> {
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
        out_a: a,
        out_b: b,
        truth: Some(truth),
        protocol,
    };
    simcmd::impair_cmd(&imp).map(|_| ())
}

/// The OPRA binary demo: a simulated feed of `d.symbols` series, impaired onto A and B,
/// through `examples/opra-binary.toml`; the gaps must be exactly what both lines lost, the
/// delivered events the simulator's (less the gaps), and every trusted best bid and offer
/// the simulator's.
fn opra_binary(d: &DemoArgs, dir: &std::path::Path) -> Result<()> {
    let mut cfg = RunConfig::parse(OPRA_BINARY_TOML).context("examples/opra-binary.toml")?;
    cfg.relative_to(dir);
    eprintln!("demo: 1/4 generating an OPRA binary feed: {} messages over {} option series", d.messages, d.symbols);
    let gen =
        tickplant_sim::OpraGenConfig { seed: d.seed, series: d.symbols, messages: d.messages, ..Default::default() };
    let feed = dir.join("opra.pcap");
    let mut truth = None;
    let blocks = simcmd::write_capture(&feed, |emit| truth = Some(tickplant_sim::generate_opra_binary(&gen, emit)))?;
    let truth = truth.unwrap_or_default();
    eprintln!("demo: 2/4 {blocks} OPRA blocks; impairing onto A and B: 1% loss each, 1% reorder, 0.5% duplicates, 0..30 us skew");
    let (a, b) = (cfg.source.a.clone().expect("the config names a"), cfg.source.b.clone().expect("and b"));
    impair_onto_ab(d, feed, a, b, dir.join("truth.csv"), tickplant_core::Protocol::Opra)?;
    eprintln!("demo: 3/4 running the pipeline (examples/opra-binary.toml): arbitrate, decode, best bid and offer, 3 consumers");
    let out = crate::runcmd::run(&cfg, d.quiet, None)?;
    let r = &out.report;
    eprintln!("demo: 4/4 checking against the simulator's ground truth");
    let lost = lost_by_both(&dir.join("truth.csv"))?;
    let gap_msgs: u64 = r.gaps.iter().map(|g| g.messages).sum();
    if gap_msgs != lost {
        bail!("demo: the pipeline reported {gap_msgs} messages lost in gaps; both feeds lost {lost}");
    }
    // The two roots' events, less the gaps, field for field.
    let in_gap = |s: u64| r.gaps.iter().any(|g| (g.first_seq..=g.last_seq).contains(&s));
    let roots = ["AAA", "BAAB"];
    let want: Vec<_> =
        truth.events.iter().filter(|e| roots.contains(&e.root.as_str()) && !in_gap(e.sequence)).collect();
    let events = std::fs::read_to_string(dir.join("opra-events.jsonl"))?;
    let mut got = 0usize;
    for line in events.lines() {
        let v: serde_json::Value = serde_json::from_str(line)?;
        if v["action"] == "gap" {
            continue;
        }
        let w = want.get(got).context("demo: more events than the simulator's")?;
        let (price, got_price) = (tickplant_core::event::price_to_string(w.price), v["price"].to_string());
        if v["sequence"] != w.sequence
            || v["action"] != w.action
            || v["side"] != w.side
            || v["size"] != w.size
            || got_price != price
        {
            bail!("demo: event {line} differs from the simulator's {w:?}");
        }
        got += 1;
    }
    if got != want.len() {
        bail!("demo: {got} events of {} delivered, the simulator wrote {}", roots.join(" and "), want.len());
    }
    // Every series whose best bid and offer is trusted: the simulator's exactly.
    let (mut compared, mut untrusted) = (0, 0);
    for t in &truth.bbo {
        let key = |s: &tickplant_wire::opra_binary::Series| {
            tickplant_wire::itch50::trim_stock(&s.root) == t.root.as_bytes()
                && (s.month, s.day, s.year, s.strike) == (t.month, t.day, t.year, t.strike)
        };
        let Some((_, bbo, trusted)) = out.opra_series.iter().find(|(s, _, _)| key(s)) else {
            bail!("demo: series {} {} of the simulator never reached the books", t.root, t.instrument);
        };
        if !trusted {
            untrusted += 1;
            continue;
        }
        let want = (t.bid, u64::from(t.bid_size), t.ask, u64::from(t.ask_size));
        if (bbo.bid_price, bbo.bid_size, bbo.ask_price, bbo.ask_size) != want {
            bail!("demo: the best bid and offer of {} ({}) differ from the simulator's", t.root, t.instrument);
        }
        compared += 1;
    }
    println!(
        "demo: verified: {} messages decoded, {} lost in {} gaps = exactly what both feeds lost; {got} events of {} equal the simulator's; {compared} series' best bid and offer equal the truth ({untrusted} not trusted since a gap); accounting balanced",
        r.decoded,
        gap_msgs,
        r.gaps.len(),
        roots.join(" and ")
    );
    println!("demo: pipeline {:.2} M messages/s", r.messages_per_s / 1e6);
    Ok(())
}

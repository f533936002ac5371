//! `tickplant match` (strategies against JSON-lines events) and `tickplant bench match`.

use std::collections::HashMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;
use tickplant_core::matcher::{EventValue, MatchEvent, Matcher, Schema};
use tickplant_sim::{generate_matching, match_event, MatchGenConfig, Workload};

#[derive(Debug, clap::Args)]
pub struct MatchArgs {
    /// Strategies, one per line: `ID: attr op value and attr op attr and attr in (v, ...)`;
    /// `#` starts a comment.
    #[arg(long)]
    pub strategies: PathBuf,
    /// Events, one JSON object per line: attribute -> value (numbers as JSON numbers or
    /// strings, in plain decimal notation; strings as strings). "-" reads stdin.
    #[arg(long)]
    pub events: PathBuf,
}

/// Load a strategies file into a matcher.
pub fn load(path: &PathBuf) -> Result<Matcher> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let mut schema = Schema::new();
    let strategies = schema.parse_strategies(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut m = Matcher::with_schema(schema);
    for s in strategies {
        m.insert(s)?;
    }
    Ok(m)
}

/// One JSON object of attribute -> value into `e`.
pub fn parse_event(m: &Matcher, line: &str, e: &mut MatchEvent) -> Result<(), String> {
    let obj: HashMap<&str, &RawValue> =
        serde_json::from_str(line).map_err(|err| format!("not a JSON object of attribute to value: {err}"))?;
    let mut strings: Vec<(&str, String)> = Vec::new();
    let mut nums: Vec<(&str, &str)> = Vec::new();
    for (k, v) in obj {
        let raw = v.get();
        // null (what pandas writes for a missing value) leaves the attribute out.
        if raw == "null" {
            continue;
        }
        if raw.starts_with('"') {
            let s: String = serde_json::from_str(raw).map_err(|err| format!("{k}: {err}"))?;
            strings.push((k, s));
        } else if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
            nums.push((k, raw));
        } else {
            return Err(format!("{k}: expected a number or a string, found {raw}"));
        }
    }
    m.event_from_pairs(
        nums.iter()
            .map(|&(k, n)| (k, EventValue::Num(n)))
            .chain(strings.iter().map(|(k, s)| (*k, EventValue::Str(s.as_str())))),
        e,
    )
    .map_err(|e| e.to_string())
}

pub fn run(a: &MatchArgs) -> Result<()> {
    let mut m = load(&a.strategies)?;
    let input: Box<dyn BufRead> = if a.events.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(&a.events).with_context(|| format!("{}: cannot open", a.events.display()))?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    let (mut e, mut ids) = (MatchEvent::default(), Vec::new());
    let mut i = 0u64;
    for (n, line) in input.lines().enumerate() {
        let line = line.with_context(|| format!("{}: read error", a.events.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        if let Err(err) = parse_event(&m, &line, &mut e) {
            bail!("{} line {}: {err}", a.events.display(), n + 1);
        }
        m.match_event(&e, &mut ids);
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        writeln!(out, "{{\"event\": {i}, \"matches\": [{}]}}", list.join(", "))?;
        i += 1;
    }
    out.flush()?;
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct BenchMatchArgs {
    /// a (20 attributes, 10 half-domain intervals), b (symbol + comparison + range), c
    /// (cross-venue) or p (the published shape of REIN and HEM: 20 attributes, 10 intervals
    /// of uniform width over 1..=1,000,000).
    #[arg(long)]
    pub workload: Workload,
    /// Strategies in the index.
    #[arg(long, default_value_t = 100_000)]
    pub strategies: usize,
    /// Events matched (timed) against the index.
    #[arg(long, default_value_t = 1_000)]
    pub events: usize,
    /// Random seed of the strategies and events: the same seed, the same workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events the brute-force baseline runs on (it is slow on big indexes); its results are
    /// compared with the index's.
    #[arg(long, default_value_t = 100)]
    pub brute_force_events: usize,
    /// The research's sweep: each of these strategy counts in turn (comma-separated), one
    /// row each, in place of --strategies; `--sweep` alone: 250,1000,10000,100000,1000000.
    /// Brute force runs on fewer events as the index grows (at least 5).
    #[arg(long, value_delimiter = ',', num_args = 0.., value_name = "N,N,...")]
    pub sweep: Option<Vec<usize>>,
}

/// One measurement of the index on a workload.
#[derive(Debug)]
struct MatchRow {
    strategies: usize,
    events: usize,
    matches_per_event: f64,
    us: f64,
    us_bf: f64,
    bf_events: usize,
    insert_ns: f64,
    insert_full_ns: f64,
    remove_ns: f64,
    extra: usize,
    bytes: f64,
}

/// Build the index of `strategies` strategies of the workload, change it, match the events
/// and brute force on the first `bf_events` of them (results compared).
fn measure(a: &BenchMatchArgs, strategies: usize, bf_events: usize) -> Result<MatchRow> {
    // A tenth more strategies (at most 10,000) are inserted into the built index and removed
    // again, for the cost of a change to a full index.
    let extra = (strategies / 10).min(10_000);
    let w = generate_matching(&MatchGenConfig::new(a.workload, strategies + extra, a.events.max(1), a.seed));
    let mut schema = Schema::new();
    let text = w.strategies.join("\n");
    let mut parsed = schema.parse_strategies(&text).map_err(|e| anyhow::anyhow!("generated strategies: {e}"))?;
    drop(text);
    let later = parsed.split_off(strategies);
    let mut m = Matcher::with_schema(schema);
    let t = Instant::now();
    for s in parsed {
        m.insert(s)?;
    }
    let insert_ns = t.elapsed().as_secs_f64() * 1e9 / strategies.max(1) as f64;
    let later_ids: Vec<u64> = later.iter().map(|s| s.id).collect();
    let t = Instant::now();
    for s in later {
        m.insert(s)?;
    }
    let insert_full_ns = t.elapsed().as_secs_f64() * 1e9 / extra.max(1) as f64;
    let t = Instant::now();
    for id in &later_ids {
        m.remove(*id).context("a strategy just inserted")?;
    }
    let remove_ns = t.elapsed().as_secs_f64() * 1e9 / extra.max(1) as f64;
    let events: Vec<MatchEvent> =
        w.events.iter().map(|p| match_event(&m, p).expect("generated events are valid")).collect();
    let mut ids = Vec::new();
    let mut total = 0usize;
    let t = Instant::now();
    for e in &events {
        m.match_event(e, &mut ids);
        total += ids.len();
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / events.len() as f64;
    let nb = bf_events.clamp(1, events.len());
    let mut want = Vec::new();
    let t = Instant::now();
    for e in &events[..nb] {
        m.match_brute_force(e, &mut want);
        std::hint::black_box(&want);
    }
    let us_bf = t.elapsed().as_secs_f64() * 1e6 / nb as f64;
    for (i, e) in events[..nb].iter().enumerate() {
        m.match_event(e, &mut ids);
        m.match_brute_force(e, &mut want);
        if ids != want {
            bail!("event {i}: the index found {} matches, brute force {}", ids.len(), want.len());
        }
    }
    Ok(MatchRow {
        strategies,
        events: events.len(),
        matches_per_event: total as f64 / events.len() as f64,
        us,
        us_bf,
        bf_events: nb,
        insert_ns,
        insert_full_ns,
        remove_ns,
        extra,
        bytes: m.memory_bytes() as f64 / strategies.max(1) as f64,
    })
}

pub fn bench(a: &BenchMatchArgs, mut say: impl FnMut(String)) -> Result<()> {
    if a.events == 0 || a.brute_force_events == 0 || a.strategies == 0 {
        bail!("--strategies, --events and --brute-force-events must be at least 1");
    }
    if let Some(counts) = &a.sweep {
        let counts = if counts.is_empty() { vec![250, 1_000, 10_000, 100_000, 1_000_000] } else { counts.clone() };
        if counts.contains(&0) {
            bail!("--sweep: a strategy count must be above 0");
        }
        say(format!(
            "match workload {:?} sweep, {} events each, seed {} (brute force on fewer events as the index grows, results compared):",
            a.workload, a.events, a.seed
        ));
        say(format!(
            "  {:>10} {:>10} {:>12} {:>14} {:>9} {:>12} {:>10} {:>10} {:>10}",
            "strategies",
            "matches/ev",
            "index us/ev",
            "brute us/ev",
            "speed-up",
            "bytes/strat",
            "build ns",
            "insert ns",
            "remove ns"
        ));
        for n in counts {
            // Brute force reads every strategy: about 20 million strategy-events a row.
            let bf = a.brute_force_events.min((20_000_000 / n).max(5));
            let r = measure(a, n, bf)?;
            say(format!(
                "  {:>10} {:>10.1} {:>12.2} {:>14.2} {:>8.1}x {:>12.0} {:>10.0} {:>10.0} {:>10.0}",
                r.strategies,
                r.matches_per_event,
                r.us,
                r.us_bf,
                r.us_bf / r.us,
                r.bytes,
                r.insert_ns,
                r.insert_full_ns,
                r.remove_ns
            ));
        }
        return Ok(());
    }
    let r = measure(a, a.strategies, a.brute_force_events)?;
    let (us, us_bf, nb, extra) = (r.us, r.us_bf, r.bf_events, r.extra);
    let (insert_ns, insert_full_ns, remove_ns, bytes) = (r.insert_ns, r.insert_full_ns, r.remove_ns, r.bytes);
    say(format!(
        "match workload {:?}: {} strategies, {} events ({:.1} matches/event), seed {}",
        a.workload, a.strategies, r.events, r.matches_per_event, a.seed
    ));
    say(format!(
        "  index:       {us:>10.2} us/event ({:>10.0} events/s) | insert {insert_ns:.0} ns/strategy | {bytes:.0} bytes/strategy",
        1e6 / us
    ));
    say(format!(
        "  changes:     build {insert_ns:.0} ns/strategy (all {} from empty); into the full index: insert {insert_full_ns:.0} ns, remove {remove_ns:.0} ns/strategy ({extra} strategies)",
        a.strategies
    ));
    say(format!(
        "  brute force: {us_bf:>10.2} us/event ({:>10.0} events/s, {nb} events; results equal) | index speed-up {:.1}x",
        1e6 / us_bf,
        us_bf / us
    ));
    Ok(())
}

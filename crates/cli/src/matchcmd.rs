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
    /// a (20 attributes, 10 intervals), b (symbol + comparison + range) or c (cross-venue).
    #[arg(long)]
    pub workload: Workload,
    #[arg(long, default_value_t = 100_000)]
    pub strategies: usize,
    #[arg(long, default_value_t = 1_000)]
    pub events: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events the brute-force baseline runs on (it is slow on big indexes); its results are
    /// compared with the index's.
    #[arg(long, default_value_t = 100)]
    pub brute_force_events: usize,
}

pub fn bench(a: &BenchMatchArgs, mut say: impl FnMut(String)) -> Result<()> {
    // A tenth more strategies (at most 10,000) are inserted into the built index and removed
    // again, for the cost of a change to a full index.
    let extra = (a.strategies / 10).min(10_000);
    let w = generate_matching(&MatchGenConfig::new(a.workload, a.strategies + extra, a.events.max(1), a.seed));
    let mut schema = Schema::new();
    let text = w.strategies.join("\n");
    let mut strategies = schema.parse_strategies(&text).map_err(|e| anyhow::anyhow!("generated strategies: {e}"))?;
    let later = strategies.split_off(a.strategies);
    let mut m = Matcher::with_schema(schema);
    let t = Instant::now();
    for s in strategies {
        m.insert(s)?;
    }
    let insert_ns = t.elapsed().as_secs_f64() * 1e9 / a.strategies.max(1) as f64;
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
    let nb = a.brute_force_events.clamp(1, events.len());
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
    let bytes = m.memory_bytes() as f64 / a.strategies.max(1) as f64;
    say(format!(
        "match workload {:?}: {} strategies, {} events ({:.1} matches/event), seed {}",
        a.workload,
        a.strategies,
        events.len(),
        total as f64 / events.len() as f64,
        a.seed
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

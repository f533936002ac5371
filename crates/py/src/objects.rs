//! The library's other stages for Python: the A/B arbitrator over two captures, the
//! strategy matcher, the FAST decoder, and a whole pipeline run from its TOML config.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tickplant_core::matcher::{EventValue, MatchEvent, Matcher as CoreMatcher};
use tickplant_core::{ArbSink, Arbitrator as CoreArbitrator, GapReport, Released, Sequencer};
use tickplant_io::config::{ArbArgs, RunConfig};
use tickplant_io::hist::Ticks;
use tickplant_io::live::LiveOptions;
use tickplant_io::pipeline;
use tickplant_io::runner::{self, Feed, RunOptions};
use tickplant_io::source::{AnySource, Source as _};

use crate::{bad_arg, err, program_for};

/// What the arbitrator released, as packed little-endian records (the Python side's
/// `PACKET_DTYPE`): seq u64, arrival u64, release u64, count u32, input u32.
#[derive(Default)]
struct Collect {
    hr: Vec<u8>,
    ll: Vec<u8>,
    gaps: Vec<GapReport>,
}

fn packet(out: &mut Vec<u8>, r: &Released<'_>) {
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.arrival_ns.to_le_bytes());
    out.extend_from_slice(&r.release_ns.to_le_bytes());
    out.extend_from_slice(&r.count.to_le_bytes());
    out.extend_from_slice(&u32::from(r.input).to_le_bytes());
}

impl ArbSink for Collect {
    fn ll(&mut self, r: &Released<'_>) {
        packet(&mut self.ll, r);
    }
    fn hr(&mut self, r: &Released<'_>) {
        packet(&mut self.hr, r);
    }
    fn gap(&mut self, g: &GapReport) {
        self.gaps.push(*g);
    }
}

impl Feed for Collect {}

/// A/B arbitration of two captures (or one), with `tickplant arb`'s options.
#[pyclass]
#[derive(Debug)]
pub struct Arbitrator {
    args: ArbArgs,
}

#[pymethods]
impl Arbitrator {
    /// `options`: `tickplant arb`'s flags as keywords (`protocol`, `mode`, `timeout_us`,
    /// `max_msgs`, `capacity_packets`, ...), checked as the command checks them.
    #[new]
    #[pyo3(signature = (a, b=None, **options))]
    fn new(a: PathBuf, b: Option<PathBuf>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut table = toml::Table::new();
        if let Some(o) = options {
            for (k, v) in o.iter() {
                let key: String = k.extract()?;
                let key = key.replace('_', "-");
                let value = if let Ok(b) = v.extract::<bool>() {
                    toml::Value::Boolean(b)
                } else if let Ok(i) = v.extract::<i64>() {
                    toml::Value::Integer(i)
                } else if let Ok(s) = v.extract::<String>() {
                    toml::Value::String(s)
                } else if let Ok(l) = v.extract::<Vec<String>>() {
                    toml::Value::Array(l.into_iter().map(toml::Value::String).collect())
                } else {
                    return Err(bad_arg(format!("option {key}: a bool, an integer, a string or a list of strings")));
                };
                table.insert(key, value);
            }
        }
        let mut args: ArbArgs = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| bad_arg(format!("options: {}", e.message())))?;
        args.a = Some(a);
        args.b = b;
        // Checked now, so that a bad option is an error where it is given.
        args.sequencer_config().map_err(bad_arg)?;
        args.arb_config().map_err(bad_arg)?;
        args.changes().map_err(bad_arg)?;
        Ok(Arbitrator { args })
    }

    /// Run both captures through the arbitrator: (hr packets, ll packets, gaps, stats), the
    /// packets as bytes of `PACKET_DTYPE` records, the gaps as (output, first_seq,
    /// last_seq, messages, reason, at_ns) tuples, the stats as JSON text.
    #[allow(clippy::type_complexity)]
    fn run<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<(String, u64, u64, u64, String, u64)>, String)> {
        let a = &self.args;
        let mut paths = vec![a.a.clone().ok_or_else(|| err("no capture A"))?];
        paths.extend(a.b.clone());
        if paths.iter().any(|p| tickplant_io::live::Input::is_live(p)) {
            return Err(err("the Python arbitrator reads captures; live groups are for `tickplant arb`"));
        }
        let seq = Sequencer::new(a.sequencer_config().map_err(err)?).map_err(err)?;
        let mut cfg = a.arb_config().map_err(err)?;
        cfg.inputs = paths.len();
        let changes = a.changes().map_err(err)?;
        let mut source = AnySource::open(&paths, &LiveOptions::default()).map_err(err)?;
        source.check_protocol(seq.config().protocol).map_err(err)?;
        let mut arb = CoreArbitrator::new(cfg, seq).map_err(err)?;
        for i in 0..paths.len() {
            arb.set_link(i, source.link_type(i));
        }
        let mut sink = Collect::default();
        let opts = RunOptions { sample: u32::MAX, progress: false, changes: &changes, publish: None, control: None };
        runner::run(&mut source, &mut arb, &mut sink, &mut Ticks::new(), opts).map_err(err)?;
        let gaps = sink
            .gaps
            .iter()
            .map(|g| {
                (
                    g.output.as_str().to_string(),
                    g.first_seq,
                    g.last_seq,
                    g.messages,
                    g.reason.as_str().to_string(),
                    g.at_ns,
                )
            })
            .collect();
        let stats = serde_json::to_string(&arb.stats()).map_err(err)?;
        Ok((PyBytes::new(py, &sink.hr), PyBytes::new(py, &sink.ll), gaps, stats))
    }
}

/// The strategy matcher (docs/matching.md's language), exact and dynamic.
#[pyclass(unsendable)]
#[derive(Debug)]
pub struct Matcher {
    m: CoreMatcher,
    event: MatchEvent,
    ids: Vec<u64>,
}

fn pairs(event: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Result<String, String>)>> {
    // Numbers as their decimal text (exact for ints and for floats as Python prints them).
    let mut out = Vec::new();
    for (k, v) in event.iter() {
        let name: String = k.extract()?;
        // None, and NaN (pandas' missing value), leave the attribute out: a predicate on it
        // is false, as on an attribute the event does not have.
        if v.is_none() || v.extract::<f64>().is_ok_and(f64::is_nan) {
            continue;
        }
        if let Ok(s) = v.extract::<String>() {
            out.push((name, Err(s)));
        } else {
            out.push((name, Ok(v.str()?.to_string())));
        }
    }
    Ok(out)
}

impl Matcher {
    fn load(&mut self, event: &Bound<'_, PyDict>) -> PyResult<()> {
        let p = pairs(event)?;
        self.m
            .event_from_pairs(
                p.iter().map(|(k, v)| {
                    (
                        k.as_str(),
                        match v {
                            Ok(n) => EventValue::Num(n.as_str()),
                            Err(s) => EventValue::Str(s.as_str()),
                        },
                    )
                }),
                &mut self.event,
            )
            .map_err(err)
    }
}

#[pymethods]
impl Matcher {
    #[new]
    fn new() -> Self {
        Matcher { m: CoreMatcher::new(), event: MatchEvent::default(), ids: Vec::new() }
    }
    /// Add a strategy (`ID: pred and pred ...`); returns its id.
    fn add(&mut self, text: &str) -> PyResult<u64> {
        self.m.insert_text(text).map_err(err)
    }
    /// Remove a strategy; whether it was there.
    fn remove(&mut self, id: u64) -> bool {
        self.m.remove(id).is_some()
    }
    /// The ids of the strategies an event (attribute -> number or string) satisfies, in
    /// ascending order.
    #[pyo3(name = "match")]
    fn match_one(&mut self, event: &Bound<'_, PyDict>) -> PyResult<Vec<u64>> {
        self.load(event)?;
        self.ids.clear();
        self.m.match_event(&self.event, &mut self.ids);
        Ok(self.ids.clone())
    }
    /// The same by checking every strategy (the oracle the index is held to).
    fn brute_force(&mut self, event: &Bound<'_, PyDict>) -> PyResult<Vec<u64>> {
        self.load(event)?;
        self.ids.clear();
        self.m.match_brute_force(&self.event, &mut self.ids);
        Ok(self.ids.clone())
    }
    fn __len__(&self) -> usize {
        self.m.len()
    }
    /// Bytes the index holds.
    fn memory_bytes(&self) -> usize {
        self.m.memory_bytes()
    }
}

/// A FAST 1.1 decoder over templates; the dictionary carries from message to message
/// until `reset`.
#[pyclass(unsendable)]
#[derive(Debug)]
pub struct FastDecoder {
    program: &'static tickplant_fast::Program,
    decoder: tickplant_fast::Decoder<'static>,
}

#[pymethods]
impl FastDecoder {
    /// `templates`: the template XML, as text or a path to it.
    #[new]
    fn new(templates: &str) -> PyResult<Self> {
        let xml = if templates.trim_start().starts_with('<') {
            templates.to_string()
        } else {
            std::fs::read_to_string(templates).map_err(|e| err(format!("{templates}: {e}")))?
        };
        let program = program_for(&xml)?;
        Ok(FastDecoder { program, decoder: tickplant_fast::Decoder::new(program) })
    }
    /// Every message of `data` framed as `framing` (`u32le`, `opra`, `raw`), as JSON text
    /// (one object a message, a line each).
    #[pyo3(signature = (data, framing="raw"))]
    fn decode(&mut self, data: &[u8], framing: &str) -> PyResult<String> {
        let framing: tickplant_fast::Framing = framing.parse().map_err(err)?;
        let mut msg = tickplant_fast::Message::new();
        let mut out = String::new();
        let p = self.program;
        tickplant_fast::for_each(&mut self.decoder, framing, data, &mut msg, |m, _| {
            tickplant_fast::json::write_json(p, m, &mut out);
            out.push('\n');
            true
        })
        .map_err(err)?;
        Ok(out)
    }
    /// Start the dictionary afresh.
    fn reset(&mut self) {
        self.decoder.reset();
    }
}

/// Run the pipeline a TOML config describes (a path, or the TOML text): the report as JSON
/// text (`{"feeds": {...}}` for a config of several feeds). Captures only.
#[pyfunction]
pub fn run(config: &str) -> PyResult<String> {
    let cfg = if config.contains('\n') || config.contains('[') {
        RunConfig::parse(config).map_err(err)?
    } else {
        RunConfig::load(std::path::Path::new(config)).map_err(err)?
    };
    let feeds = cfg.feed_configs().map_err(err)?;
    let mut specs = Vec::new();
    for (_, c) in &feeds {
        let spec = c.spec(false).map_err(err)?;
        if spec.inputs.iter().any(|p| tickplant_io::live::Input::is_live(p)) {
            return Err(err("tickplant.run reads captures; live groups are for `tickplant run`"));
        }
        specs.push(spec);
    }
    let mut done = Vec::new();
    for ((name, _), out) in feeds.into_iter().zip(pipeline::run_feeds(&specs)) {
        let out = out.map_err(err)?;
        out.report.check().map_err(|e| err(format!("accounting does not balance: {e}")))?;
        done.push((name, out));
    }
    serde_json::to_string(&pipeline::RunReport::of(!cfg.feeds.is_empty(), &done)).map_err(err)
}

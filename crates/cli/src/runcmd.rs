//! `tickplant run CONFIG.toml`: the feed-handler pipeline described by one TOML file.
//! The file's sections and keys are documented in docs/feed-handler.md; examples/ holds
//! copies to start from.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use tickplant_core::book::BookConfig;
use tickplant_core::event::EventAction;
use tickplant_core::matcher::{MarketEvents, Schema};
use tickplant_io::pipeline::{
    self, ConsumerAction, ConsumerSpec, FeedDecoder, MatchSpec, OpraFastSpec, Outcome, PipelineSpec, SlowPolicy, Stream,
};

use crate::arbcmd::ArbArgs;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunConfig {
    /// The file it was read from (errors name it).
    #[serde(skip)]
    pub path: Option<PathBuf>,
    pub source: Source,
    /// Any option of `tickplant arb` (protocol, mode, timeout-us, max-msgs, start-seq,
    /// capacity-packets...), except the files.
    #[serde(default)]
    pub arbitration: ArbArgs,
    #[serde(default)]
    pub book: BookSection,
    #[serde(default)]
    pub run: RunSection,
    #[serde(default, rename = "consumer")]
    pub consumers: Vec<ConsumerSection>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Source {
    /// Feed A, or the only capture.
    pub a: Option<PathBuf>,
    /// Feed B (optional).
    pub b: Option<PathBuf>,
    /// Decoder: "itch50" (MoldUDP64 ITCH 5.0, with books) or "opra-fast" (OPRA FAST v2
    /// blocks, mapped to quote, trade and status events).
    #[serde(default = "default_decoder")]
    pub decoder: String,
    /// opra-fast: the FAST template XML.
    pub templates: Option<PathBuf>,
    /// opra-fast: bytes from the sequencer's payload start to the block's SOH.
    #[serde(default)]
    pub skip: usize,
    /// opra-fast: reset the FAST dictionary at every "block" (default) or "never" (it
    /// carries from block to block and is reset at a gap).
    #[serde(default = "default_reset")]
    pub reset: String,
    /// opra-fast: room in the series table.
    #[serde(default = "default_max_series")]
    pub max_series: usize,
    /// opra-fast: blocks of capture A profiled before the run to specialise the decoder
    /// (0: none).
    #[serde(default = "default_profile_blocks")]
    pub profile_blocks: usize,
    /// Trading day, US Eastern (ITCH timestamps count from its midnight).
    #[serde(default = "default_date")]
    pub date: String,
}

fn default_decoder() -> String {
    "itch50".into()
}
fn default_reset() -> String {
    "block".into()
}
fn default_max_series() -> usize {
    1 << 20
}
fn default_profile_blocks() -> usize {
    10_000
}
fn default_date() -> String {
    "1970-01-01".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct BookSection {
    pub max_orders: usize,
    pub max_instruments: usize,
    /// The price grid of the books' ladders, in 1e-9 units (10000000 = one cent).
    pub tick: i64,
    /// Write the final books here (one JSON line per instrument), `depth` levels a side.
    pub final_books: Option<PathBuf>,
    pub depth: usize,
    /// The arbitrated stream the books follow: "hr" (default) or "ll".
    pub stream: Stream,
}

impl Default for BookSection {
    fn default() -> Self {
        let d = BookConfig::default();
        BookSection {
            max_orders: d.max_orders,
            max_instruments: d.max_instruments,
            tick: d.tick,
            final_books: None,
            depth: 10,
            stream: Stream::Hr,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct RunSection {
    /// Pin the producer (the captures and the arbitrator; with `decode-thread = false`
    /// every stage up to the rings) to this CPU.
    pub producer_core: Option<usize>,
    /// Decode, books and delivery on a thread of their own (default), or on the producer's.
    pub decode_thread: bool,
    /// Pin the decode thread to this CPU.
    pub decode_core: Option<usize>,
    /// Time the stages on one frame or packet in this many (1: every one).
    pub latency_sample: u32,
    /// Write the report as JSON here ("-" for stdout).
    pub report: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConsumerSection {
    pub name: String,
    /// count | csv | jsonl | bbo | match | trade
    #[serde(default = "default_action")]
    pub action: String,
    /// Output file for csv and jsonl (required), and bbo and match (optional).
    pub path: Option<PathBuf>,
    /// match: the strategies file (the language of `tickplant match`).
    pub strategies: Option<PathBuf>,
    /// match: the feed's venue name, for attributes such as `nasdaq_bid`.
    #[serde(default = "default_venue")]
    pub venue: String,
    /// trade: the triggers file (`ID: conditions => buy|sell QTY`).
    pub triggers: Option<PathBuf>,
    /// trade: the exchange's FIX acceptor, `host:port`.
    pub exchange: Option<String>,
    /// trade: SenderCompID (default TICKPLANT).
    pub sender: Option<String>,
    /// trade: TargetCompID (default EXCH).
    pub target: Option<String>,
    /// trade: pre-trade risk limits (`max-order-qty`, `max-notional`, `max-open-orders`,
    /// `max-orders-per-second`, `max-position`, `collar-bps`; 0 or absent: no limit).
    #[serde(default)]
    pub risk: tickplant_core::risk::RiskLimits,
    #[serde(default)]
    pub symbols: Vec<String>,
    /// add, cancel, delete, modify, execute, trade, clear, status, imbalance.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Feed message types (ITCH letters).
    #[serde(default)]
    pub types: Vec<String>,
    /// drop | backpressure
    #[serde(default)]
    pub policy: SlowPolicy,
    #[serde(default = "default_ring")]
    pub ring: usize,
    pub core: Option<usize>,
    /// The arbitrated stream it reads: "hr" (default) or "ll".
    #[serde(default)]
    pub stream: Stream,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            producer_core: None,
            decode_thread: true,
            decode_core: None,
            latency_sample: tickplant_io::pipeline::DEFAULT_LATENCY_SAMPLE,
            report: None,
        }
    }
}

fn default_action() -> String {
    "count".into()
}
fn default_venue() -> String {
    "nasdaq".into()
}
fn default_ring() -> usize {
    1 << 16
}

impl RunConfig {
    pub fn load(path: &Path) -> Result<RunConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read config", path.display()))?;
        let mut c = RunConfig::parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        c.relative_to(path.parent().unwrap_or(Path::new(".")));
        c.path = Some(path.to_path_buf());
        Ok(c)
    }
    pub fn parse(text: &str) -> Result<RunConfig> {
        Ok(toml::from_str(text)?)
    }
    /// Make every relative path relative to `base` (the config file's folder).
    pub fn relative_to(&mut self, base: &Path) {
        let fix = |p: &mut Option<PathBuf>| {
            if let Some(x) = p.as_mut() {
                if x.is_relative() && x.as_os_str() != "-" {
                    *x = base.join(&*x);
                }
            }
        };
        fix(&mut self.source.a);
        fix(&mut self.source.b);
        fix(&mut self.source.templates);
        fix(&mut self.book.final_books);
        fix(&mut self.run.report);
        fix(&mut self.arbitration.gaps);
        for c in &mut self.consumers {
            fix(&mut c.path);
            fix(&mut c.strategies);
        }
    }

    /// The pipeline this config describes; an error names the config file.
    pub fn spec(&self, progress: bool) -> Result<PipelineSpec> {
        self.spec_here(progress).map_err(|e| match &self.path {
            Some(p) => anyhow!("{}: {e:#}", p.display()),
            None => e,
        })
    }

    fn spec_here(&self, progress: bool) -> Result<PipelineSpec> {
        let decoder = self.decoder()?;
        let opra = matches!(decoder, FeedDecoder::OpraFast(_));
        let a = self.source.a.clone().ok_or_else(|| anyhow!("[source] needs `a` (the capture, or feed A)"))?;
        let mut inputs = vec![a];
        inputs.extend(self.source.b.clone());
        let arb = &self.arbitration;
        if arb.a.is_some() || arb.b.is_some() {
            bail!("[arbitration] a and b: captures go in [source] a and b");
        }
        // The keys of `tickplant arb` that have no meaning in a run: refused by name.
        for (set, key, why) in [
            (arb.hr_out.is_some(), "hr-out", "the run decodes the HR stream; it writes no capture of it"),
            (arb.ll_out.is_some(), "ll-out", "the run writes no capture of the LL stream"),
            (
                arb.other_out.is_some(),
                "other-out",
                "the run writes no capture of other traffic (see the report's counts)",
            ),
            (arb.stats.is_some(), "stats", "the run's report holds the arbitrator's statistics: use [run] report"),
            (arb.no_hr, "no-hr", "the run decodes the HR stream"),
            (arb.no_ll, "no-ll", "the run has no LL stream to switch off"),
            (arb.quiet, "quiet", "use `tickplant run --quiet`"),
        ] {
            if set {
                bail!("[arbitration] {key}: not a key of a run config ({why})");
            }
        }
        let midnight_ns =
            tickplant_core::itch::midnight_eastern_ns(&self.source.date).map_err(|e| anyhow!("[source] date: {e}"))?;
        let mut consumers = Vec::new();
        let mut names = std::collections::HashSet::new();
        for c in &self.consumers {
            if !names.insert(c.name.clone()) {
                bail!("[[consumer]] name {:?} is used twice", c.name);
            }
            let action = match (c.action.as_str(), &c.path) {
                ("count", _) => ConsumerAction::Count,
                ("csv", Some(p)) => ConsumerAction::Csv(p.clone()),
                ("jsonl", Some(p)) => ConsumerAction::Jsonl(p.clone()),
                ("bbo", p) => ConsumerAction::Bbo(p.clone()),
                ("match", p) => ConsumerAction::Match(Box::new(match_spec(c, p.clone())?)),
                ("trade", _) => ConsumerAction::Trade(Box::new(trade_spec(c)?)),
                ("csv" | "jsonl", None) => bail!("consumer {:?}: action {:?} needs a path", c.name, c.action),
                (other, _) => {
                    bail!("consumer {:?}: action {other:?} is not one of count, csv, jsonl, bbo, match, trade", c.name)
                }
            };
            if c.action != "match" && c.strategies.is_some() {
                bail!("consumer {:?}: `strategies` is for action \"match\"", c.name);
            }
            if c.action != "trade" && (c.triggers.is_some() || c.exchange.is_some()) {
                bail!("consumer {:?}: `triggers` and `exchange` are for action \"trade\"", c.name);
            }
            let actions = c
                .actions
                .iter()
                .map(|a| a.parse::<EventAction>().map_err(|e| anyhow!("consumer {:?}: {e}", c.name)))
                .collect::<Result<Vec<_>>>()?;
            let mut types = Vec::new();
            for t in &c.types {
                match t.as_bytes() {
                    [b] if opra && b.is_ascii_graphic() => types.push(*b),
                    [b] if !opra && tickplant_wire::itch50::message_len(*b).is_some() => types.push(*b),
                    _ if opra => bail!("consumer {:?}: {t:?} is not an OPRA message category (one letter)", c.name),
                    _ => bail!("consumer {:?}: {t:?} is not an ITCH 5.0 message type", c.name),
                }
            }
            if c.ring < 2 {
                bail!("consumer {:?}: ring must hold at least 2 records", c.name);
            }
            consumers.push(ConsumerSpec {
                name: c.name.clone(),
                symbols: c.symbols.clone(),
                actions,
                types,
                action,
                policy: c.policy,
                ring: c.ring,
                core: c.core,
                stream: c.stream,
            });
        }
        let book = BookConfig {
            max_orders: self.book.max_orders,
            max_instruments: self.book.max_instruments,
            tick: self.book.tick,
        };
        book.validate().map_err(anyhow::Error::msg)?;
        if self.run.latency_sample == 0 {
            bail!("run.latency-sample must be at least 1 (1 times every frame and packet)");
        }
        Ok(PipelineSpec {
            decoder,
            inputs,
            sequencer: arb.sequencer_config()?,
            arb: arb.arb_config()?,
            policy_changes: arb.changes()?,
            book_stream: self.book.stream,
            midnight_ns,
            book,
            consumers,
            producer_core: self.run.producer_core,
            decode_thread: self.run.decode_thread,
            decode_core: self.run.decode_core,
            latency_sample: self.run.latency_sample,
            progress,
        })
    }
}

impl RunConfig {
    /// The decoder stage of `[source]`.
    fn decoder(&self) -> Result<FeedDecoder> {
        let s = &self.source;
        match s.decoder.as_str() {
            "itch50" => {
                if s.templates.is_some() {
                    bail!("[source] templates is for decoder \"opra-fast\"");
                }
                Ok(FeedDecoder::Itch50)
            }
            "opra-fast" => {
                let Some(t) = &s.templates else {
                    bail!("[source] decoder \"opra-fast\" needs `templates` (the FAST template XML)")
                };
                let xml = std::fs::read_to_string(t)
                    .with_context(|| format!("[source] templates {}: cannot read", t.display()))?;
                let program = tickplant_fast::Program::from_xml(&xml)
                    .map_err(|e| anyhow!("[source] templates {}: {e}", t.display()))?;
                tickplant_core::opra_fast::OpraFast::new(&program, 1)
                    .map_err(|e| anyhow!("[source] templates {}: {e}", t.display()))?;
                let reset_per_block = match s.reset.as_str() {
                    "block" => true,
                    "never" => false,
                    r => bail!("[source] reset {r:?}: expected \"block\" or \"never\""),
                };
                if s.max_series == 0 {
                    bail!("[source] max-series must be at least 1");
                }
                Ok(FeedDecoder::OpraFast(OpraFastSpec {
                    program: std::sync::Arc::new(program),
                    skip: s.skip,
                    reset_per_block,
                    max_series: s.max_series,
                    profile_blocks: s.profile_blocks,
                }))
            }
            d => bail!("[source] decoder {d:?}: expected \"itch50\" or \"opra-fast\""),
        }
    }
}

/// A trading consumer: its triggers file, exchange and session ids.
fn trade_spec(c: &ConsumerSection) -> Result<tickplant_io::fixnet::TriggerTraderConfig> {
    let Some(triggers) = &c.triggers else {
        bail!("consumer {:?}: action \"trade\" needs `triggers` (a triggers file)", c.name)
    };
    let Some(exchange) = &c.exchange else {
        bail!("consumer {:?}: action \"trade\" needs `exchange` (host:port of a FIX acceptor)", c.name)
    };
    let exchange = std::net::ToSocketAddrs::to_socket_addrs(exchange.as_str())
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| anyhow!("consumer {:?}: exchange {exchange:?} is not host:port", c.name))?;
    // Refuse a bad file now, with its line, rather than when the run starts.
    let text =
        std::fs::read_to_string(triggers).with_context(|| format!("consumer {:?}: {}", c.name, triggers.display()))?;
    tickplant_core::trigger::parse_triggers(&text)
        .map_err(|e| anyhow!("consumer {:?}: {}: {e}", c.name, triggers.display()))?;
    Ok(tickplant_io::fixnet::TriggerTraderConfig {
        exchange,
        sender: c.sender.clone().unwrap_or_else(|| "TICKPLANT".into()),
        target: c.target.clone().unwrap_or_else(|| "EXCH".into()),
        begin_string: "FIX.4.4".into(),
        heartbeat_s: 30,
        triggers: triggers.clone(),
        limits: c.risk,
    })
}

/// A matching consumer: its strategies parsed and checked against the market attributes.
fn match_spec(c: &ConsumerSection, path: Option<PathBuf>) -> Result<MatchSpec> {
    let Some(file) = &c.strategies else {
        bail!("consumer {:?}: action \"match\" needs `strategies` (a strategies file)", c.name)
    };
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("consumer {:?}: {}: cannot read the strategies", c.name, file.display()))?;
    let mut schema = Schema::new();
    let strategies = schema.parse_strategies(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    MarketEvents::new(&schema, &[c.venue.as_str()]).map_err(|e| anyhow!("consumer {:?}: {e}", c.name))?;
    Ok(MatchSpec { schema, strategies, venue: c.venue.clone(), path, handler: None })
}

/// Run a loaded config; prints the report to stderr (and JSON where asked).
pub fn run(cfg: &RunConfig, quiet: bool) -> Result<Outcome> {
    let spec = cfg.spec(!quiet)?;
    let out = pipeline::run(&spec)?;
    eprint!("{}", pipeline::summary(&out.report));
    if let Some(p) = &cfg.run.report {
        let json = serde_json::to_string_pretty(&out.report)?;
        if p.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(p, json + "\n").with_context(|| format!("{}: cannot write", p.display()))?;
        }
    }
    if let Some(p) = &cfg.arbitration.gaps {
        // As `tickplant arb --gaps` writes them (the run has the HR output only).
        let mut s = String::from("output,first_seq,last_seq,messages,reason\n");
        for g in &out.report.gaps {
            s +=
                &format!("{},{},{},{},{}\n", g.output.as_str(), g.first_seq, g.last_seq, g.messages, g.reason.as_str());
        }
        std::fs::write(p, s).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    if let Some(p) = &cfg.book.final_books {
        let mut s = String::new();
        for (id, b) in out.books.instruments() {
            let sym = out.symbols.symbol(id).map(str::to_owned).unwrap_or_else(|| format!("#{id}"));
            crate::itchcmd::book_json(&sym, b, cfg.book.depth, &mut s);
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    out.report.check().map_err(|e| anyhow!("accounting does not balance: {e}"))?;
    Ok(out)
}

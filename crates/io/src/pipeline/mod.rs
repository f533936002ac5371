//! The feed-handler pipeline: captures in, arbitrated, decoded, books built, filtered and
//! delivered to consumer threads through lock-free rings.
//!
//! ```text
//! A.pcap ─┐                      HR packets      events             records
//!         ├─ merge ─ arbitrator ─────────── ITCH ──────── books ─┬─ filter ─ ring ─ consumer thread
//! B.pcap ─┘  (time order)  LL ─▶ (decoded     gaps ─▶ books stale  └─ filter ─ ring ─ consumer thread
//!                                 when read)  gap records ─▶ every consumer of the stream
//! ```
//!
//! The loop over the frames is the runner's ([`crate::runner`]); decoding and the books are
//! the feed handler's ([`tickplant_core::feed`]). Here: the spec, the threads and the run
//! ([`run`], this file), delivery to the rings (`deliver`), the handoff to the decode thread
//! (`handoff`), the consumers' threads (`consumer`), the report (`report`) and the threads'
//! pins and waits (`threads`).
//!
//! The producer (the calling thread) reads the captures and runs the arbitrator; the
//! packets it releases go, in batches of [`DECODE_BATCH`] and in release order with the gaps
//! between them, through a ring to the decode thread, which decodes, builds the books and
//! delivers ([`PipelineSpec::decode_thread`]; without it the producer runs every stage up
//! to the rings itself, which gives exactly the same output, only later). Each consumer has
//! its own single-producer single-consumer ring (`rtrb`) and thread. The producer filters
//! for a consumer before it publishes, so a consumer receives exactly its subscription.
//! A full ring either drops the record (counted per consumer) or makes the producer wait
//! (back-pressure), per consumer: one slow consumer never blocks another that drops.
//!
//! Every message is accounted for: each stream's messages = decoded + undecodable; the
//! books' stream's decoded = the book's outcomes (applied, ignored, unknown order,
//! rejected); per consumer, matched = delivered + dropped, what the consumer received =
//! delivered, and gap records pushed = received. [`Report::check`] asserts it.
//!
//! A matching consumer ([`ConsumerAction::Match`]) keeps each symbol's market state from
//! the records it receives, builds a strategy-matching event from every record and
//! delivers (record, strategy ids) to its output: every record it receives is matched.
//!
//! Stage latencies are measured per packet with the time-stamp counter: `arbitrate` (a
//! frame through the arbitrator), `decode` (a released packet to events), `book` (the
//! packet's events applied), `deliver` (filtered and pushed to the rings), and per record
//! `ring` (from publication to the consumer's pop).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tickplant_core::book::{BookConfig, BookStats, Books};
use tickplant_core::event::{Event, EventAction};
use tickplant_core::feed::{
    gap_event, itch_order_hints, AnyFeed, FeedDecoder as _, FeedHandler, ItchFeed, OpraFastFeed, OpraFastOptions,
    Packet as FeedPacket,
};
use tickplant_core::itch::SymbolDirectory;
use tickplant_core::matcher::{MarketEvents, Matcher, Schema, Strategy, SymbolKey};
use tickplant_core::nyse::{NyseStats, NyseXdpFeed};
use tickplant_core::opra_binary::{OpraBinaryFeed, OpraBinaryStats};
use tickplant_core::opra_fast::OpraFastStats;
use tickplant_core::route::Filter;
use tickplant_core::{
    ArbConfig, ArbSink, ArbStats, Arbitrator, GapReason, GapReport, LinkType, OutputId, Released, Sequencer,
    SequencerConfig,
};
use tickplant_fast::{opra_block, Decoder as FastDecoder, Message as FastMessage, Program as FastProgram};
use tickplant_wire::itch50;
use tickplant_wire::opra_binary::Series as OpraSeries;

use crate::clock::{rdtsc, TscClock};
pub use crate::hist::Latency;
use crate::hist::{latency, Ticks};
use crate::live::{LiveError, LiveOptions};
use crate::outputs::{run_with, Outputs};
use crate::pcap::{FrameReader, PcapError};
use crate::recovery::Prefixed;
use crate::runner::{Feed, RunError, RunOptions, Sampler};
use crate::source::{AnySource, Source, SourceError};

pub use tickplant_core::event::Bbo;

mod consumer;
mod deliver;
mod handoff;
mod report;
mod resync;
mod subscribe;
mod threads;

pub use consumer::{Record, NOT_TIMED};
pub use handoff::DECODE_BATCH;
pub use report::{summary, ConsumerReport, MatchReport, Report, StreamReport, Timeline};

use consumer::*;
use deliver::*;
use handoff::*;
use threads::*;

/// A full ring: drop the record (counted) or wait for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlowPolicy {
    #[default]
    Drop,
    Backpressure,
}

/// One of the arbitrator's two outputs: the high-reliability stream (packets in order,
/// holes waited for) or the low-latency one (packets as they first arrive, holes skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stream {
    #[default]
    Hr,
    Ll,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Hr => "hr",
            Stream::Ll => "ll",
        }
    }
    /// 0 for HR, 1 for LL: an index into per-stream arrays.
    pub(super) fn index(self) -> usize {
        self as usize
    }
    /// For serde's `skip_serializing_if`: the default stream is not written out.
    pub fn is_hr(&self) -> bool {
        *self == Stream::Hr
    }
    fn of(o: OutputId) -> Stream {
        match o {
            OutputId::Hr => Stream::Hr,
            OutputId::Ll => Stream::Ll,
        }
    }
}

/// Your own code, called on the consumer's thread for every record it receives.
#[derive(Clone)]
pub struct Handler(Arc<std::sync::Mutex<HandlerFn>>);

type HandlerFn = Box<dyn FnMut(&Record) + Send>;

impl Handler {
    pub fn new(f: impl FnMut(&Record) + Send + 'static) -> Self {
        Handler(Arc::new(std::sync::Mutex::new(Box::new(f))))
    }
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler(..)")
    }
}

/// Your own code, called on a matching consumer's thread for every record that matched at
/// least one strategy, with the ids of the strategies (ascending).
#[derive(Clone)]
pub struct MatchHandler(Arc<std::sync::Mutex<MatchHandlerFn>>);

type MatchHandlerFn = Box<dyn FnMut(&Record, &[u64]) + Send>;

impl MatchHandler {
    pub fn new(f: impl FnMut(&Record, &[u64]) + Send + 'static) -> Self {
        MatchHandler(Arc::new(std::sync::Mutex::new(Box::new(f))))
    }
}

impl std::fmt::Debug for MatchHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MatchHandler(..)")
    }
}

/// A consumer that matches strategies against the market: each record it receives updates
/// its symbol's state (see [`tickplant_core::matcher::market`]) and the resulting event is
/// matched against every strategy.
#[derive(Debug, Clone)]
pub struct MatchSpec {
    /// The schema the strategies were parsed with.
    pub schema: Schema,
    pub strategies: Vec<Strategy>,
    /// The feed's venue name (strategies name its fields `VENUE_bid` and so on).
    pub venue: String,
    /// Write one JSON line per record with matches.
    pub path: Option<PathBuf>,
    pub handler: Option<MatchHandler>,
}
/// What a consumer thread does with its records.
#[derive(Debug, Clone)]
pub enum ConsumerAction {
    /// Count records by action.
    Count,
    /// Write one CSV line per record.
    Csv(PathBuf),
    /// Write one JSON line per record.
    Jsonl(PathBuf),
    /// Keep the latest BBO per instrument; written as JSON lines at the end when a path is
    /// given.
    Bbo(Option<PathBuf>),
    /// Call a handler (the Rust consumer API).
    Handler(Handler),
    /// Match strategies (boxed: the strategies are large next to the other actions).
    Match(Box<MatchSpec>),
    /// Run each record through triggers and send the orders they fire to an exchange over
    /// a FIX session (see `docs/tick-to-trade.md`).
    Trade(Box<crate::fixnet::TriggerTraderConfig>),
}

/// One consumer: its subscription, action, ring and policy.
#[derive(Debug, Clone)]
pub struct ConsumerSpec {
    pub name: String,
    /// Symbols subscribed to (empty: all).
    pub symbols: Vec<String>,
    /// Actions subscribed to (empty: all).
    pub actions: Vec<EventAction>,
    /// Feed message types (ITCH letters) subscribed to (empty: all).
    pub types: Vec<u8>,
    pub action: ConsumerAction,
    pub policy: SlowPolicy,
    /// Ring capacity in records.
    pub ring: usize,
    /// Pin the consumer thread to this CPU.
    pub core: Option<usize>,
    /// The arbitrated stream it reads.
    pub stream: Stream,
}

/// What decodes the packets the arbitrator releases.
#[derive(Debug, Clone, Default)]
pub enum FeedDecoder {
    /// NASDAQ TotalView-ITCH 5.0 in MoldUDP64, with order books.
    #[default]
    Itch50,
    /// OPRA FAST v2 blocks, mapped to quote, trade and status events (no order books: each
    /// series' latest quote is its BBO).
    OpraFast(OpraFastSpec),
    /// OPRA binary (Participant Interface v6) blocks, mapped to quote, trade and status
    /// events, with each series' best bid and offer from the quotes' BBO indicators.
    OpraBinary {
        /// Room in the series table.
        max_series: usize,
    },
    /// NYSE Integrated Feed (XDP v2.1 or Pillar v2.5 layout), with order books per symbol
    /// index.
    Nyse(tickplant_wire::xdp_integrated::Dialect),
}

/// The OPRA FAST decoder stage.
#[derive(Debug, Clone)]
pub struct OpraFastSpec {
    /// The compiled templates.
    pub program: Arc<FastProgram>,
    /// Bytes between where the sequencer's payload starts and the block's SOH (a transport
    /// header that carries the sequence number, for instance).
    pub skip: usize,
    /// Reset the FAST dictionary at every block (self-contained blocks, the safe choice
    /// with arbitration), or let it carry from block to block (reset only at a gap).
    pub reset_per_block: bool,
    /// Room in the series table.
    pub max_series: usize,
    /// Before the run, decode this many blocks of the first capture with a profiling
    /// decoder and build straight-line segments for their hottest presence maps (the FAST
    /// program's specialisation, docs/fast.md); 0: the generic program.
    pub profile_blocks: usize,
}

/// Where the run writes or sends the arbitrated streams (capture paths or `udp://`
/// groups; `other` a capture only), and how capture files rotate.
#[derive(Debug, Clone, Default)]
pub struct OutputPaths {
    pub ll: Option<PathBuf>,
    pub hr: Option<PathBuf>,
    pub other: Option<PathBuf>,
    pub rotate: Option<crate::outputs::Rotate>,
}

/// The whole pipeline.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub decoder: FeedDecoder,
    /// One capture, or A and B; or live groups (`udp://GROUP:PORT?...`, see
    /// [`crate::live`]), all of the inputs.
    pub inputs: Vec<PathBuf>,
    /// How live inputs run: their stop flag, duration and polling.
    pub live: LiveOptions,
    /// The arbitrated streams written or sent on besides the decoding (`[arbitration]`
    /// ll-out, hr-out, other-out, rotate).
    pub outputs: OutputPaths,
    pub sequencer: SequencerConfig,
    pub arb: ArbConfig,
    /// The stream the books follow (ITCH); the other stream's events carry no book-derived
    /// fields and are flagged [`flags::NO_BOOK`](tickplant_core::event::flags::NO_BOOK).
    pub book_stream: Stream,
    /// Policy changes at replay times: (ns after the first frame, the new policy), in time
    /// order (`change-at` of `tickplant arb`).
    pub policy_changes: Vec<(u64, tickplant_core::Policy)>,
    /// ITCH: where its timestamps count from (`[source] date`).
    pub day: tickplant_core::itch::SessionDay,
    /// Captures: where frame times come from (`[source] timestamps`).
    pub timestamps: crate::pcap::TimeSource,
    pub book: BookConfig,
    pub consumers: Vec<ConsumerSpec>,
    /// Pin the producer thread to this CPU.
    pub producer_core: Option<usize>,
    /// Decode, books and delivery on a thread of their own, the captures and the
    /// arbitrator staying on the producer thread (see [`DECODE_BATCH`]); false: every stage
    /// on the producer thread.
    pub decode_thread: bool,
    /// Pin the decode thread to this CPU.
    pub decode_core: Option<usize>,
    /// Time the stages (arbitrate, decode + book, deliver, and the rings on the timed
    /// packets' records) on one frame or packet in this many ([`DEFAULT_LATENCY_SAMPLE`] by
    /// default); 1 times every one. A time-stamp counter read costs about 10 ns on this
    /// kind of CPU, and timing every one took eight a released A/B packet (four on the
    /// decode thread, two a frame on the producer).
    pub latency_sample: u32,
    /// Progress lines on stderr about once a second.
    pub progress: bool,
    /// Join late: the books from a GLIMPSE snapshot, then the live feed from its
    /// sequence number on (`[recovery] snapshot`).
    pub snapshot: Option<crate::recovery::SnapshotConfig>,
    /// Publish the run's counters for a metrics endpoint (`[run] metrics`), under this
    /// feed name.
    pub metrics: Option<(Arc<crate::metrics::Hub>, String)>,
    /// Take commands from the control socket (`[run] control`), under this feed name.
    pub control: Option<(Arc<crate::control::Control>, String)>,
}

/// The producer's publisher for the metrics endpoint.
struct ProducerMetrics {
    hub: Arc<crate::metrics::Hub>,
    feed: String,
    inputs: Vec<String>,
    clock: TscClock,
}

impl crate::runner::Publish for ProducerMetrics {
    fn producer(&self, arb: &Arbitrator, live: Vec<crate::live::LiveInputStats>, frames: u64, arbitrate: &Ticks) {
        let mut c = self.clock;
        c.finish();
        let snap = crate::metrics::ProducerSnap {
            inputs: self.inputs.clone(),
            arb: arb.stats(),
            live,
            frames,
            arbitrate: Some(crate::metrics::Quantiles::of(arbitrate, c.ns_per_tick())),
            policy: Some(arb.policy()),
        };
        self.hub.publish_producer(&self.feed, snap);
    }
}

/// The stages are timed on one packet (and one frame) in this many unless configured.
pub const DEFAULT_LATENCY_SAMPLE: u32 = 16;

/// [`latency`] of the pipeline's own histograms.
fn latency_of(t: &Ticks, clock: &TscClock) -> Latency {
    latency(&t.to_hdr(), clock)
}

/// What a stream's feed leaves at the end: its books (where it kept them), its symbol
/// directory, messages by type, instruments, and the OPRA decoders' counts.
struct Finished {
    books: Option<Books>,
    symbols: SymbolDirectory,
    by_type: BTreeMap<String, u64>,
    instruments: u64,
    opra_fast: Option<OpraFastStats>,
    opra_binary: Option<OpraBinaryStats>,
    opra_series: Vec<(OpraSeries, Bbo, bool)>,
    nyse: Option<NyseStats>,
    /// ITCH: the trading day its times counted from, and the new MoldUDP64 sessions (days)
    /// taken on after the first, each of which emptied the books.
    date: Option<String>,
    new_sessions: u64,
}

fn finish_feed(d: AnyFeed<'_>, specialised: usize) -> Finished {
    let none = |by_type, instruments| Finished {
        books: None,
        symbols: SymbolDirectory::new(),
        by_type,
        instruments,
        opra_fast: None,
        opra_binary: None,
        opra_series: Vec::new(),
        nyse: None,
        date: None,
        new_sessions: 0,
    };
    let date = |m: Option<u64>| m.map(tickplant_core::itch::eastern_date);
    match d {
        AnyFeed::OpraFast(o) => {
            let st = OpraFastStats { specialised_segments: specialised as u64, ..o.stats() };
            Finished { opra_fast: Some(st.clone()), ..none(st.by_category, st.series) }
        }
        AnyFeed::OpraBinary(o) => {
            let st = o.stats();
            let series =
                (1..=o.series_count()).filter_map(|id| o.series(id).map(|s| (*s, o.bbo(id).0, o.bbo(id).1))).collect();
            Finished { opra_binary: Some(st.clone()), opra_series: series, ..none(st.by_category, st.series) }
        }
        AnyFeed::NyseXdp(f) => {
            let (st, n) = (f.stats(), f.dir.len() as u64);
            let (books, symbols) = f.into_books();
            Finished { books: Some(books), symbols, nyse: Some(st.clone()), ..none(st.by_type, n) }
        }
        AnyFeed::Itch50(f) => {
            let (by_type, n, day, new_sessions) =
                (f.by_type(), f.dir.len() as u64, date(f.session_midnight()), f.new_sessions());
            let (books, symbols) = f.into_books();
            Finished { books, symbols, date: day, new_sessions, ..none(by_type, n) }
        }
        AnyFeed::Itch50Events(f) => {
            let (by_type, n, day, new_sessions) =
                (f.by_type(), f.dir.len() as u64, date(f.session_midnight()), f.new_sessions());
            Finished { symbols: f.dir, date: day, new_sessions, ..none(by_type, n) }
        }
    }
}

/// The symbol directory of an ITCH feed.
fn directory<'a>(d: &'a AnyFeed<'_>) -> Option<&'a SymbolDirectory> {
    match d {
        AnyFeed::Itch50(f) => Some(&f.dir),
        AnyFeed::Itch50Events(f) => Some(&f.dir),
        AnyFeed::NyseXdp(f) => Some(&f.dir),
        AnyFeed::OpraFast(_) | AnyFeed::OpraBinary(_) => None,
    }
}

/// A run that stopped early, as the captures' error: a destination conflict names the
/// capture and the frame.
fn run_error(e: RunError<SourceError>) -> PipelineError {
    match e {
        RunError::Source(e) => source_error(e),
        RunError::Destinations { input, frame, conflict } => PipelineError::Capture(PcapError {
            path: input.into(),
            frame: Some(frame),
            offset: None,
            reason: conflict.to_string(),
        }),
    }
}

fn source_error(e: SourceError) -> PipelineError {
    match e {
        SourceError::Capture(e) => PipelineError::Capture(e),
        SourceError::Live(e) => PipelineError::Live(e),
        SourceError::Input(s) => PipelineError::Spec(s),
    }
}

/// Why a run could not start or did not finish.
#[derive(Debug)]
pub enum PipelineError {
    /// A capture could not be read (its path, and the frame and byte where they apply), or
    /// it holds two feeds.
    Capture(PcapError),
    /// A live input could not be opened or read.
    Live(LiveError),
    /// The spec cannot run as it is: what is wrong with it.
    Spec(String),
    /// A thread of the run could not start, panicked, or ended with an error (a consumer's
    /// file or exchange).
    Thread { thread: String, reason: String },
    /// A late join's snapshot could not be had.
    Recovery(crate::recovery::RecoveryError),
}

impl std::fmt::Display for PipelineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PipelineError::Capture(e) => e.fmt(f),
            PipelineError::Live(e) => e.fmt(f),
            PipelineError::Spec(reason) => f.write_str(reason),
            PipelineError::Thread { thread, reason } => write!(f, "{thread}: {reason}"),
            PipelineError::Recovery(e) => e.fmt(f),
        }
    }
}

// Transparent where it wraps: displayed as the wrapped error, so that error's source is
// its source (the wrapped error itself would print its message twice in a chain).
impl std::error::Error for PipelineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PipelineError::Capture(e) => e.source(),
            PipelineError::Live(e) => e.source(),
            PipelineError::Recovery(e) => e.source(),
            _ => None,
        }
    }
}

impl From<PcapError> for PipelineError {
    fn from(e: PcapError) -> Self {
        PipelineError::Capture(e)
    }
}

/// The pipeline's final state, for callers that look further than the report.
#[derive(Debug)]
pub struct Outcome {
    pub report: Report,
    pub books: Books,
    pub symbols: SymbolDirectory,
    /// opra-binary: each series (instrument id = place + 1), its best bid and offer at the
    /// end, and whether that is trusted (set by quotes since the last gap).
    pub opra_series: Vec<(OpraSeries, Bbo, bool)>,
}

/// Run several feeds' pipelines at once (a config's `[[feed]]` tables), each on threads of
/// its own (its producer, its decode thread, its consumers); the outcomes in the specs'
/// order. One spec runs on the calling thread.
pub fn run_feeds(specs: &[PipelineSpec]) -> Vec<Result<Outcome, PipelineError>> {
    if specs.len() == 1 {
        return vec![run(&specs[0])];
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs.iter().map(|spec| scope.spawn(move || run(spec))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| panic!("a feed's run panicked"))).collect()
    })
}

/// The report a run writes (`[run] report`): one feed's, or `{"feeds": {name: report}}` for a
/// config of `[[feed]]` tables.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RunReport<'a> {
    One(&'a Report),
    Feeds { feeds: BTreeMap<&'a str, &'a Report> },
}

impl<'a> RunReport<'a> {
    /// `several`: the config has `[[feed]]` tables; `done`: (feed name, outcome).
    pub fn of(several: bool, done: &'a [(String, Outcome)]) -> RunReport<'a> {
        match done {
            [(_, o)] if !several => RunReport::One(&o.report),
            _ => RunReport::Feeds { feeds: done.iter().map(|(n, o)| (n.as_str(), &o.report)).collect() },
        }
    }
}

/// Profile the first `o.profile_blocks` OPRA FAST blocks of `path` and specialise `program`
/// for them; returns the segments built. Frames that are not market data and blocks that
/// do not decode are passed over (the run itself counts them).
fn specialise_opra(
    program: &mut FastProgram,
    path: &std::path::Path,
    cfg: &tickplant_core::SequencerConfig,
    o: &OpraFastSpec,
) -> Result<usize, PipelineError> {
    let seq = Sequencer::new(cfg.clone()).map_err(|e| PipelineError::Spec(e.to_string()))?;
    let mut r = FrameReader::open(path)?;
    let link = r.link_type();
    let profile = {
        let mut dec = FastDecoder::new(program);
        dec.start_profile();
        let mut msg = FastMessage::new();
        let mut blocks = 0;
        while blocks < o.profile_blocks {
            let Some(f) = r.next_frame()? else { break };
            let Ok(info) = seq.classify(link, f.data) else { continue };
            blocks += 1;
            if o.reset_per_block {
                dec.reset();
            }
            let block = f.data.get(usize::from(info.payload_offset) + o.skip..).unwrap_or_default();
            for m in opra_block(block) {
                let Ok((_, body)) = m else { break };
                if dec.decode(body, &mut msg).is_err() {
                    dec.reset();
                    break;
                }
            }
        }
        dec.take_profile()
    };
    Ok(program.specialise(&profile, 8, 64, 0.02))
}

/// Run the pipeline to the end of its inputs.
pub fn run(spec: &PipelineSpec) -> Result<Outcome, PipelineError> {
    let cfg_err = PipelineError::Spec;
    if spec.inputs.is_empty() || spec.inputs.len() > 2 {
        return Err(cfg_err(format!("the pipeline takes one or two captures, not {}", spec.inputs.len())));
    }
    check_cores(spec).map_err(cfg_err)?;
    let mut source = AnySource::open(&spec.inputs, &spec.live).map_err(source_error)?;
    source.set_time_source(spec.timestamps);
    let mut source = Prefixed::new(source);
    source.inner.check_protocol(spec.sequencer.protocol).map_err(|e| cfg_err(e.to_string()))?;
    if let Some(f) = source.inner.binary_file() {
        if !matches!(spec.decoder, FeedDecoder::Itch50) {
            return Err(cfg_err(format!("{}: an ITCH 5.0 BinaryFILE holds ITCH: decoder = \"itch50\"", f.display())));
        }
    }
    let links: Vec<LinkType> = (0..source.inputs()).map(|i| source.link_type(i)).collect();
    let seq = Sequencer::new(spec.sequencer.clone()).map_err(|e| cfg_err(e.to_string()))?;
    // A late join: the live feed buffered while the snapshot comes, then arbitrated from
    // the snapshot's sequence number (what came before it is in the snapshot).
    let mut late = None;
    if let Some(cfg) = &spec.snapshot {
        if !matches!(spec.decoder, FeedDecoder::Itch50) {
            return Err(cfg_err("[recovery] snapshot: GLIMPSE snapshots are ITCH 5.0's (decoder = \"itch50\")".into()));
        }
        let (snap, buffered, report) =
            crate::recovery::late_join(&mut source.inner, &seq, cfg).map_err(PipelineError::Recovery)?;
        source.set_prefix(buffered);
        late = Some((snap, report));
    }
    // The LL stream is decoded when a consumer reads it or the books follow it.
    let ll_on = spec.book_stream == Stream::Ll || spec.consumers.iter().any(|c| c.stream == Stream::Ll);
    if spec.book_stream == Stream::Ll && !matches!(spec.decoder, FeedDecoder::Itch50 | FeedDecoder::Nyse(_)) {
        return Err(cfg_err("book.stream = \"ll\": the OPRA decoders keep no books to follow a stream".into()));
    }
    let mut arb_cfg = spec.arb.clone();
    // The lines; the re-request answers, when on, are one more input after them.
    arb_cfg.inputs = spec.inputs.len();
    arb_cfg.low_latency = ll_on || spec.outputs.ll.is_some();
    arb_cfg.high_reliability = true;
    if let Some((snap, _)) = &late {
        arb_cfg.start_seq = Some(snap.next_seq);
    }
    let mut arb = Arbitrator::new(arb_cfg, seq).map_err(|e| cfg_err(e.to_string()))?;
    let o = &spec.outputs;
    let mut stream_outs = Outputs::open(o.ll.as_deref(), o.hr.as_deref(), o.other.as_deref(), links[0], o.rotate)
        .map_err(|e| cfg_err(e.to_string()))?;
    for (i, l) in links.iter().enumerate() {
        arb.set_link(i, *l);
    }
    // Consumers: rings and threads.
    let dir_shared = Arc::new(std::sync::Mutex::new(SymbolDirectory::new()));
    let mut outs = Vec::new();
    let mut handles = Vec::new();
    for c in &spec.consumers {
        // Consumers that read the BBO and symbol get whole records; the others lean ones.
        let (tx, rx) = if reads_market(&c.action) {
            let (tx, rx) = rtrb::RingBuffer::<Record>::new(c.ring.max(2));
            (RingTx::Full(tx), RingRx::Full(rx))
        } else {
            let (tx, rx) = rtrb::RingBuffer::<Lean>::new(c.ring.max(2));
            (RingTx::Lean(tx), RingRx::Lean(rx))
        };
        // No instrument of a symbol list until the directory names one of the symbols.
        let sub = subscribe::Subscription::new(&c.symbols, &c.actions, &c.types);
        let bell = Arc::new(Bell::default());
        let consumer_bell = bell.clone();
        outs.push(Out {
            bell,
            name: c.name.clone(),
            filter: sub.filter(&Default::default()),
            sub,
            ring: tx,
            picks: Vec::with_capacity(256),
            market: reads_market(&c.action),
            policy: c.policy,
            stream: c.stream,
            matched: 0,
            delivered: 0,
            dropped: 0,
            waits: 0,
            gaps: 0,
        });
        let (action, core, dir) = (c.action.clone(), c.core, dir_shared.clone());
        let waiter = Waiter { alone: alone_on(spec, core), bell: consumer_bell };
        let live = source.inner.is_live();
        // `match` and `trade` consumers take the control socket's commands.
        let ctl = match (&spec.control, &c.action) {
            (Some((control, feed)), ConsumerAction::Match(_) | ConsumerAction::Trade(_)) => {
                Some(control.register_consumer(feed, &c.name))
            }
            _ => None,
        };
        let metrics = spec.metrics.as_ref().map(|(hub, feed)| RingMetrics {
            hub: hub.clone(),
            feed: feed.clone(),
            consumer: c.name.clone(),
            clock: TscClock::start(),
            next: Instant::now(),
        });
        handles.push(
            std::thread::Builder::new()
                .name(format!("consumer-{}", c.name))
                .spawn(move || {
                    if let Some(core) = core {
                        pin(core);
                    }
                    match rx {
                        RingRx::Full(rx) => consumer_thread(rx, action, dir, waiter, live, ctl, metrics),
                        RingRx::Lean(rx) => consumer_thread(rx, action, dir, waiter, live, ctl, metrics),
                    }
                })
                .map_err(|e| PipelineError::Thread {
                    thread: format!("consumer {}", c.name),
                    reason: format!("cannot start: {e}"),
                })?,
        );
    }
    // The OPRA FAST program, specialised for the capture's hottest presence maps.
    let mut specialised = 0;
    let opra_program = match &spec.decoder {
        FeedDecoder::Itch50 | FeedDecoder::OpraBinary { .. } | FeedDecoder::Nyse(_) => None,
        FeedDecoder::OpraFast(o) => {
            let mut p = (*o.program).clone();
            if o.profile_blocks > 0 && !source.inner.is_live() {
                specialised = specialise_opra(&mut p, &spec.inputs[0], &spec.sequencer, o)?;
            }
            Some(p)
        }
    };
    // Its kernels as machine code (tickplant-fast-jit): the same results as the decoder's
    // own kernels; where the code generator cannot run here, the decoder's own.
    let opra_native = match &opra_program {
        Some(p) if specialised > 0 => match tickplant_fast_jit::JitKernels::compile(p) {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "opra-fast: kernels not compiled to native code; the decoder runs them");
                None
            }
        },
        _ => None,
    };
    // A stream's feed: with the books where they follow it (ITCH).
    let feed_for = |stream: Stream| -> Result<AnyFeed<'_>, PipelineError> {
        Ok(match (&spec.decoder, &opra_program) {
            (FeedDecoder::OpraFast(o), Some(program)) => {
                let native = opra_native.as_ref().map(|n| n as &dyn tickplant_fast::NativeKernels);
                let options =
                    OpraFastOptions { skip: o.skip, reset_per_block: o.reset_per_block, max_series: o.max_series };
                AnyFeed::OpraFast(OpraFastFeed::new(program, native, options).map_err(|e| cfg_err(e.to_string()))?)
            }
            (FeedDecoder::OpraBinary { max_series }, _) => AnyFeed::OpraBinary(OpraBinaryFeed::new(*max_series)),
            // Each NYSE stream keeps its own books (the LL stream's are dropped at the end
            // unless the books follow it).
            (FeedDecoder::Nyse(d), _) => {
                AnyFeed::NyseXdp(NyseXdpFeed::with_dialect(Books::with_table_advice(spec.book, crate::huge_pages), *d))
            }
            _ if stream == spec.book_stream => {
                AnyFeed::Itch50(ItchFeed::new(Books::with_table_advice(spec.book, crate::huge_pages), spec.day))
            }
            _ => AnyFeed::Itch50Events(ItchFeed::without_books(spec.day)),
        })
    };
    let feed = feed_for(Stream::Hr)?;
    let ll_feed = if ll_on { Some(FeedHandler::new(feed_for(Stream::Ll)?)) } else { None };
    let any_market = outs.iter().any(|o| o.market);
    let mut down = Downstream {
        feed: FeedHandler::new(feed),
        ll: ll_feed,
        books_on_ll: spec.book_stream == Stream::Ll,
        outs,
        market: Vec::with_capacity(64),
        any_market,
        h_decode_book: Ticks::new(),
        h_deliver: Ticks::new(),
        spent: 0,
        sampler: Sampler::new(spec.latency_sample),
        time_all: false,
        cpu_ns: 0,
        timeline: Timeline::default(),
        snapshot: None,
        metrics: None,
        control: spec.control.as_ref().map(|(c, f)| c.register_decode(f)),
        next_publish: Instant::now(),
        gap_counts: [(0, 0); GapReason::ALL.len()],
        named: Default::default(),
        next_seq: [0; 2],
        control_log: spec.control.clone(),
        resync: spec
            .snapshot
            .clone()
            .filter(|_| spec.book_stream == Stream::Hr)
            .map(|c| Box::new(resync::Resync::new(c.clone(), c.interval))),
    };
    if let Some((snap, _)) = &late {
        down.load_snapshot(snap, true);
    }
    let mut h_arb = Ticks::new();
    let mut clock = TscClock::start();
    let producer_metrics = spec.metrics.as_ref().map(|(hub, feed)| ProducerMetrics {
        hub: hub.clone(),
        feed: feed.clone(),
        inputs: ["a", "b"][..spec.inputs.len()]
            .iter()
            .chain(spec.arb.rerequest.is_some().then_some(&"rerequest"))
            .map(|s| s.to_string())
            .collect(),
        clock,
    });
    down.metrics = spec.metrics.as_ref().map(|(hub, feed)| (hub.clone(), feed.clone(), clock));
    let started = Instant::now();
    let producer_cpu0 = crate::clock::thread_cpu_ns();
    let mut producer_cpu = 0;
    let control = spec.control.as_ref().map(|(c, f)| crate::control::ControlFeed {
        rx: c.register(f),
        control: c.clone(),
        feed: f.clone(),
    });
    let opts = RunOptions {
        sample: spec.latency_sample,
        progress: spec.progress,
        changes: &spec.policy_changes,
        publish: producer_metrics.as_ref().map(|p| p as &dyn crate::runner::Publish),
        control: control.as_ref(),
    };
    // Called once the decode thread (if any) is started: see `pin`.
    let pin_producer = || {
        if let Some(c) = spec.producer_core {
            pin(c);
        }
    };
    let hints = down.book_feed().wants_order_hints().then_some(spec.book_stream);
    let frames = if spec.decode_thread {
        let (tx, mut rx) = rtrb::RingBuffer::<Handoff>::new(HANDOFF_BATCHES);
        let (mut back_tx, back) = rtrb::RingBuffer::<Handoff>::new(HANDOFF_BATCHES);
        let decode_core = spec.decode_core;
        let decode_alone = alone_on(spec, decode_core);
        let bell = Arc::new(Bell::default());
        let decode_waiter = Waiter { alone: decode_alone, bell: bell.clone() };
        let (read, d) = std::thread::scope(|scope| {
            let decoder = std::thread::Builder::new()
                .name("decode".into())
                .spawn_scoped(scope, move || {
                    if let Some(core) = decode_core {
                        pin(core);
                    }
                    decode_loop(&mut down, &mut rx, &mut back_tx, &decode_waiter);
                    down
                })
                .map_err(|e| PipelineError::Thread { thread: "decode".into(), reason: format!("cannot start: {e}") })?;
            let spare = (0..HANDOFF_BATCHES - 1)
                .map(|_| Handoff {
                    bytes: Vec::with_capacity(1 << 16),
                    items: Vec::with_capacity(DECODE_BATCH),
                    hints: Vec::with_capacity(DECODE_BATCH * 16),
                })
                .collect();
            let mut sink = HandoffSink {
                cur: Handoff::default(),
                tx,
                back,
                spare,
                alone: alone_on(spec, spec.producer_core),
                hints,
                ll: ll_on,
                waited: 0,
                bell: bell.clone(),
            };
            pin_producer();
            let read = run_with(&mut source, &mut arb, &mut sink, &mut stream_outs, ll_on, &mut h_arb, opts);
            // Dropping the sink closes the ring: the decode thread drains it and ends.
            drop(sink);
            bell.ring();
            producer_cpu = crate::clock::thread_cpu_ns().saturating_sub(producer_cpu0);
            let down = decoder
                .join()
                .map_err(|_| PipelineError::Thread { thread: "decode".into(), reason: "panicked".into() })?;
            Ok::<_, PipelineError>((read, down))
        })?;
        down = d;
        read.map_err(run_error)?.frames
    } else {
        pin_producer();
        let mut sink = Sink { down: &mut down };
        let read = run_with(&mut source, &mut arb, &mut sink, &mut stream_outs, ll_on, &mut h_arb, opts);
        producer_cpu = crate::clock::thread_cpu_ns().saturating_sub(producer_cpu0);
        read.map_err(run_error)?.frames
    };
    let sent = std::mem::take(&mut stream_outs).finish()?;
    if let (Ok(mut d), Some(dir)) = (dir_shared.lock(), directory(down.feed.decoder())) {
        *d = dir.clone();
    }
    // The last published values are the final ones.
    if let Some(p) = &producer_metrics {
        crate::runner::Publish::producer(p, &arb, source.live_stats(), frames, &h_arb);
    }
    down.publish_metrics();
    // Close the rings: consumers drain and finish.
    let outs = std::mem::take(&mut down.outs);
    let mut consumers = Vec::new();
    let mut results = Vec::new();
    for (o, h) in outs.into_iter().zip(handles) {
        let Out { name, matched, delivered, dropped, waits, ring, stream, gaps, bell, .. } = o;
        drop(ring);
        bell.ring();
        let r = h
            .join()
            .map_err(|_| PipelineError::Thread { thread: format!("consumer {name}"), reason: "panicked".into() })?
            .map_err(|e| PipelineError::Thread { thread: format!("consumer {name}"), reason: e.to_string() })?;
        consumers.push(ConsumerReport { name, stream, gaps, matched, delivered, dropped, waits, ..Default::default() });
        results.push(r);
    }
    let wall = started.elapsed().as_secs_f64();
    clock.finish();
    for (c, r) in consumers.iter_mut().zip(&results) {
        c.received = r.received;
        c.gaps_received = r.gaps;
        c.bbo_instruments = r.bbo_instruments;
        c.ring_latency_ns = latency_of(&r.ring, &clock);
        c.receive_to_consumer_ns = r.wire.as_ref().map(crate::hist::latency_ns);
        c.cpu_s = r.cpu_ns as f64 / 1e9;
        c.matching = r.matching.as_ref().map(|(m, h)| MatchReport { latency_ns: latency_of(h, &clock), ..m.clone() });
        c.trading = r.trading.clone();
        for a in EventAction::ALL {
            let n = r.by_action[a.index()];
            if n > 0 {
                c.by_action.insert(a.as_str().to_string(), n);
            }
        }
    }
    let mut latency_ns = BTreeMap::new();
    latency_ns.insert("1 arbitrate (per frame)".to_string(), latency_of(&h_arb, &clock));
    let Downstream { feed, ll, h_decode_book, h_deliver, cpu_ns, timeline, snapshot, resync, .. } = down;
    let stage2 = if matches!(feed.decoder(), AnyFeed::OpraFast(_) | AnyFeed::OpraBinary(_)) {
        "2 decode + map (per packet)"
    } else {
        "2 decode + book (per packet)"
    };
    latency_ns.insert(stage2.to_string(), latency_of(&h_decode_book, &clock));
    latency_ns.insert("3 deliver (per packet)".to_string(), latency_of(&h_deliver, &clock));
    let stats = arb.stats();
    let (decoder, fed, gaps) = feed.into_parts();
    let feed_name = decoder.feed();
    let Finished {
        books: hr_books,
        symbols,
        by_type,
        instruments,
        opra_fast,
        opra_binary,
        opra_series,
        nyse,
        date,
        new_sessions,
    } = finish_feed(decoder, specialised);
    let (ll, ll_books) = match ll.map(FeedHandler::into_parts) {
        Some((d, st, gaps)) => {
            let books = finish_feed(d, specialised).books;
            let r = StreamReport {
                packets_in: st.packets_in,
                messages_in: st.messages_in,
                decoded: st.decoded,
                undecodable: st.undecodable,
                gaps,
            };
            (Some(r), books)
        }
        None => (None, None),
    };
    // No order books in an OPRA feed: the outcome's are empty.
    let books = hr_books.or(ll_books).unwrap_or_else(|| Books::new(spec.book));
    let report = Report {
        inputs: spec.inputs.iter().map(|p| p.display().to_string()).collect(),
        live: source.live_stats(),
        cut_short: (0..source.inputs())
            .map(|i| (source.input_name(i), source.cut_short(i)))
            .filter(|(_, c)| c.frames > 0)
            .collect(),
        trailer_missing: (0..source.inputs())
            .map(|i| (source.input_name(i), source.trailer_missing(i)))
            .filter(|(_, n)| *n > 0)
            .collect(),
        sent: sent.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        feed: feed_name.to_string(),
        frames,
        arbitration: Some(stats),
        books_follow: spec.book_stream,
        ll,
        packets_in: fed.packets_in,
        opra_fast,
        opra_binary,
        nyse,
        date,
        new_sessions,
        gaps,
        messages_in: fed.messages_in,
        decoded: fed.decoded,
        undecodable: fed.undecodable,
        by_type,
        book: *books.stats(),
        instruments,
        stale_books: books.instruments().filter(|(_, b)| b.is_stale()).count() as u64,
        live_orders: books.live_orders() as u64,
        consumers,
        wall_s: wall,
        messages_per_s: fed.decoded as f64 / wall.max(1e-9),
        producer_cpu_s: producer_cpu as f64 / 1e9,
        decode_cpu_s: cpu_ns as f64 / 1e9,
        latency_sample: spec.latency_sample.max(1),
        latency_ns,
        timeline,
        late_join: late.map(|(_, r)| r),
        resync: resync.map(|r| r.stats),
        control: spec.control.as_ref().map(|(c, f)| c.records(f)).unwrap_or_default(),
        snapshot,
    };
    Ok(Outcome { report, books, symbols, opra_series })
}

//! The feed-handler pipeline: captures in, arbitrated, decoded, books built, filtered and
//! delivered to consumer threads through lock-free rings.
//!
//! ```text
//! A.pcap ─┐                      HR packets      events             records
//!         ├─ merge ─ arbitrator ─────────── ITCH ──────── books ─┬─ filter ─ ring ─ consumer thread
//! B.pcap ─┘  (time order)         gaps ─▶ books stale             └─ filter ─ ring ─ consumer thread
//! ```
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
//! Every message is accounted for: HR messages = decoded + undecodable; decoded = the book's
//! outcomes (applied, ignored, unknown order, rejected); per consumer, matched = delivered +
//! dropped, and what the consumer received = delivered. [`Report::check`] asserts it.
//!
//! A matching consumer ([`ConsumerAction::Match`]) keeps each symbol's market state from
//! the records it receives, builds a strategy-matching event from every record and
//! delivers (record, strategy ids) to its output: every record it receives is matched.
//!
//! Stage latencies are measured per packet with the time-stamp counter: `arbitrate` (a
//! frame through the arbitrator), `decode` (a released packet to events), `book` (the
//! packet's events applied), `deliver` (filtered and pushed to the rings), and per record
//! `ring` (from publication to the consumer's pop).

use std::collections::{BTreeMap, HashSet};
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
use tickplant_core::opra_fast::OpraFastStats;
use tickplant_core::route::Filter;
use tickplant_core::{
    ArbConfig, ArbSink, ArbStats, Arbitrator, GapReason, GapReport, LinkType, OutputId, Released, Sequencer,
    SequencerConfig,
};
use tickplant_fast::{opra_block, Decoder as FastDecoder, Message as FastMessage, Program as FastProgram};
use tickplant_wire::itch50;

use crate::clock::{rdtsc, TscClock};
pub use crate::hist::Latency;
use crate::hist::{latency, Ticks};
use crate::pcap::{FrameReader, MergedReader, PcapError};
use crate::runner::{self, Feed, RunError, RunOptions, Sampler};

pub use tickplant_core::event::Bbo;

/// What travels through a consumer's ring: the event, its instrument's BBO once the event's
/// packet is applied, its symbol, and the time-stamp counter at publication.
#[derive(Debug, Clone, Copy, Default)]
pub struct Record {
    pub event: Event,
    pub bbo: Bbo,
    /// The instrument's symbol as the feed sends it (ITCH: 8 bytes, space padded; zeros
    /// when the directory has not named it).
    pub symbol: [u8; 8],
    /// The time-stamp counter when the record was published, on the records of the packets
    /// the run times (one in `[run] latency-sample`); [`NOT_TIMED`] on the others.
    pub published_tsc: u64,
}

/// [`Record::published_tsc`] of a record whose packet was not timed.
pub const NOT_TIMED: u64 = 0;

impl Record {
    /// The symbol without its padding ("" when there is none).
    pub fn symbol(&self) -> &str {
        // Zeros (no symbol yet) read as "".
        let n = self.symbol.iter().position(|&c| c == 0).unwrap_or(8);
        std::str::from_utf8(itch50::trim_stock(&self.symbol[..n])).unwrap_or("")
    }
}

/// What a consumer's ring carries for each record: the whole [`Record`] for a consumer that
/// reads the BBO and symbol, only the event and its stamp ([`Lean`]) for the others.
trait Slot: Copy + Send + 'static {
    fn new(event: &Event, market: Option<&(Bbo, [u8; 8])>, published_tsc: u64) -> Self;
    /// The event and its publication stamp.
    fn stamped(&self) -> (&Event, u64);
    /// The record as consumers see it (a lean slot's BBO and symbol read as zeros, as the
    /// pipeline would have written them).
    fn record(&self) -> std::borrow::Cow<'_, Record>;
}

impl Slot for Record {
    #[inline(always)]
    fn new(event: &Event, market: Option<&(Bbo, [u8; 8])>, published_tsc: u64) -> Self {
        let (bbo, symbol) = market.copied().unwrap_or_default();
        Record { event: *event, bbo, symbol, published_tsc }
    }
    #[inline(always)]
    fn stamped(&self) -> (&Event, u64) {
        (&self.event, self.published_tsc)
    }
    fn record(&self) -> std::borrow::Cow<'_, Record> {
        std::borrow::Cow::Borrowed(self)
    }
}

/// A record without its BBO and symbol: 72 bytes in the ring instead of 112, for the
/// consumers that do not read them (`count`, `csv`, `jsonl`). The decode thread, the limit
/// of a run, writes a third less into the rings, and the consumer reads a third less: the
/// decode thread's CPU time went from 0.239-0.245 s to 0.228-0.238 on the bench's run (10
/// runs each, alternated).
#[derive(Debug, Clone, Copy)]
struct Lean {
    event: Event,
    published_tsc: u64,
}

impl Slot for Lean {
    #[inline(always)]
    fn new(event: &Event, _market: Option<&(Bbo, [u8; 8])>, published_tsc: u64) -> Self {
        Lean { event: *event, published_tsc }
    }
    #[inline(always)]
    fn stamped(&self) -> (&Event, u64) {
        (&self.event, self.published_tsc)
    }
    fn record(&self) -> std::borrow::Cow<'_, Record> {
        std::borrow::Cow::Owned(Record { event: self.event, published_tsc: self.published_tsc, ..Default::default() })
    }
}

/// The producer's end of a consumer's ring.
enum RingTx {
    Full(rtrb::Producer<Record>),
    Lean(rtrb::Producer<Lean>),
}

/// The consumer's end of its ring.
enum RingRx {
    Full(rtrb::Consumer<Record>),
    Lean(rtrb::Consumer<Lean>),
}

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

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// The whole pipeline.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    pub decoder: FeedDecoder,
    /// One capture, or A and B.
    pub inputs: Vec<PathBuf>,
    pub sequencer: SequencerConfig,
    pub arb: ArbConfig,
    /// The stream the books follow (ITCH); the other stream's events carry no book-derived
    /// fields and are flagged [`flags::NO_BOOK`](tickplant_core::event::flags::NO_BOOK).
    pub book_stream: Stream,
    /// Policy changes at replay times: (ns after the first frame, the new policy), in time
    /// order (`change-at` of `tickplant arb`).
    pub policy_changes: Vec<(u64, tickplant_core::Policy)>,
    /// The session's midnight in UNIX ns (ITCH timestamps count from it).
    pub midnight_ns: u64,
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
}

/// The stages are timed on one packet (and one frame) in this many unless configured.
pub const DEFAULT_LATENCY_SAMPLE: u32 = 16;

/// What one consumer did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsumerReport {
    pub name: String,
    /// The stream it reads (written when it is `ll`).
    #[serde(skip_serializing_if = "Stream::is_hr")]
    pub stream: Stream,
    /// Gap records of its stream pushed into its ring (they wait for room, whatever the
    /// policy: a gap is never dropped).
    #[serde(skip_serializing_if = "is_zero")]
    pub gaps: u64,
    /// Gap records it popped.
    #[serde(skip_serializing_if = "is_zero")]
    pub gaps_received: u64,
    /// Records that matched the subscription.
    pub matched: u64,
    /// Pushed into the ring.
    pub delivered: u64,
    /// Not pushed: the ring was full and the policy is `drop`.
    pub dropped: u64,
    /// Times the producer waited for room (`backpressure`).
    pub waits: u64,
    /// Popped by the consumer thread.
    pub received: u64,
    pub by_action: BTreeMap<String, u64>,
    /// Instruments with a BBO (action `bbo`).
    pub bbo_instruments: u64,
    pub ring_latency_ns: Latency,
    /// CPU time the consumer's thread used, seconds.
    pub cpu_s: f64,
    /// What a matching consumer found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matching: Option<MatchReport>,
    /// What a trading consumer sent and heard back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trading: Option<crate::fixnet::TriggerTradeReport>,
}

/// What a matching consumer did: every record it received was matched.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MatchReport {
    pub strategies: u64,
    /// Events matched (= records received).
    pub events: u64,
    /// Events that matched at least one strategy.
    pub events_with_matches: u64,
    /// (event, strategy) pairs.
    pub matches: u64,
    /// Building the event from the market state and matching it, per event.
    pub latency_ns: Latency,
}

/// What the feed handler of one stream did (the HR stream's are the report's own fields).
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamReport {
    pub packets_in: u64,
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub gaps: Vec<GapReport>,
}

/// The end-of-run report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub inputs: Vec<String>,
    /// `itch50` or `opra-fast`.
    pub feed: String,
    pub frames: u64,
    pub arbitration: Option<ArbStats>,
    /// HR packets that reached the decoder.
    pub packets_in: u64,
    pub gaps: Vec<GapReport>,
    /// Messages in HR packets.
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub by_type: BTreeMap<String, u64>,
    pub book: BookStats,
    pub instruments: u64,
    pub stale_books: u64,
    pub live_orders: u64,
    /// The stream the books follow (written when it is `ll`).
    #[serde(skip_serializing_if = "Stream::is_hr")]
    pub books_follow: Stream,
    /// The low-latency stream, when some consumer reads it or the books follow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ll: Option<StreamReport>,
    /// What the OPRA FAST stage made of the messages it decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opra_fast: Option<OpraFastStats>,
    pub consumers: Vec<ConsumerReport>,
    pub wall_s: f64,
    pub messages_per_s: f64,
    /// CPU time of the producer thread (captures and arbitrator, and every stage up to the
    /// rings without a decode thread) over the run, seconds.
    pub producer_cpu_s: f64,
    /// CPU time of the decode thread (decode, books, delivery), seconds; 0 without one.
    pub decode_cpu_s: f64,
    /// The stages were timed on one frame or packet in this many (`latency_ns`' counts).
    pub latency_sample: u32,
    pub latency_ns: BTreeMap<String, Latency>,
}

impl Report {
    /// The accounting: every message ends in exactly one counted outcome.
    pub fn check(&self) -> Result<(), String> {
        if let Some(o) = &self.opra_fast {
            if self.decoded != o.messages {
                return Err(format!("decoded {} != OPRA FAST outcomes {}", self.decoded, o.messages));
            }
        } else {
            let (stream, decoded) = match (&self.ll, self.books_follow) {
                (Some(ll), Stream::Ll) => ("LL", ll.decoded),
                _ => ("HR", self.decoded),
            };
            if decoded != self.book.total() {
                return Err(format!("{stream} decoded {decoded} != book outcomes {}", self.book.total()));
            }
        }
        // OPRA FAST blocks are counted message by message as they are read: the header's
        // count (if there is one) only drives arbitration.
        let messages = self.opra_fast.is_none();
        let arb = |o: fn(&ArbStats) -> &tickplant_core::OutputStats| self.arbitration.as_ref().map(o);
        let hr = (self.packets_in, self.messages_in, self.decoded, self.undecodable);
        check_stream("HR", arb(|a| &a.hr), hr, messages)?;
        if let Some(ll) = &self.ll {
            let counts = (ll.packets_in, ll.messages_in, ll.decoded, ll.undecodable);
            check_stream("LL", arb(|a| &a.ll), counts, messages)?;
        }
        for c in &self.consumers {
            if c.gaps != c.gaps_received {
                return Err(format!(
                    "consumer {}: {} gap records pushed, {} received",
                    c.name, c.gaps, c.gaps_received
                ));
            }
            if c.matched != c.delivered + c.dropped || c.received != c.delivered {
                return Err(format!(
                    "consumer {}: matched {} delivered {} dropped {} received {}",
                    c.name, c.matched, c.delivered, c.dropped, c.received
                ));
            }
            if let Some(t) = &c.trading {
                if t.entries != c.received {
                    return Err(format!(
                        "consumer {}: received {} records, handed {} to the triggers",
                        c.name, c.received, t.entries
                    ));
                }
            }
            if let Some(m) = &c.matching {
                if m.events != c.received {
                    return Err(format!(
                        "consumer {}: received {} records, matched {} events",
                        c.name, c.received, m.events
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One stream's balance: messages = decoded + undecodable, and the arbitrator's packets
/// (and messages, where `messages`) = the decoder's. `counts`: packets, messages, decoded,
/// undecodable.
fn check_stream(
    name: &str,
    arb: Option<&tickplant_core::OutputStats>,
    counts: (u64, u64, u64, u64),
    messages: bool,
) -> Result<(), String> {
    let (packets_in, messages_in, decoded, undecodable) = counts;
    if messages_in != decoded + undecodable {
        return Err(format!("{name} messages {messages_in} != decoded {decoded} + undecodable {undecodable}"));
    }
    let Some(a) = arb else { return Ok(()) };
    if a.packets != packets_in {
        return Err(format!("the arbitrator gave {} {name} packets, the decoder saw {packets_in}", a.packets));
    }
    if messages && a.messages != messages_in {
        return Err(format!("the arbitrator gave {} {name} messages, the decoder saw {messages_in}", a.messages));
    }
    Ok(())
}

/// [`latency`] of the pipeline's own histograms.
fn latency_of(t: &Ticks, clock: &TscClock) -> Latency {
    latency(&t.to_hdr(), clock)
}

struct Out {
    name: String,
    symbols: HashSet<[u8; 8]>,
    filter: Filter,
    ring: RingTx,
    /// The packet's events this consumer takes (indices), written into the ring together
    /// once the packet is done: one update of the ring's write index a packet instead of one
    /// a record, so the cache line the consumer polls moves between the cores once a
    /// packet, not once a record (with the consumer taking all it finds at once, and the
    /// BBO read without the depth iterator, the bench's config on a 5-million-message day
    /// went from 3.3-4.6 to 4.7-5.7 M messages/s, runs alternated).
    picks: Vec<u32>,
    /// The consumer reads its records' BBO and symbol (`bbo`, `match`, `trade` and your own
    /// handler do; `count`, `csv` and `jsonl` do not, and get them zeroed): an event no such
    /// consumer takes has no BBO looked up.
    market: bool,
    policy: SlowPolicy,
    /// The stream it reads.
    stream: Stream,
    matched: u64,
    delivered: u64,
    dropped: u64,
    waits: u64,
    /// Gap records pushed.
    gaps: u64,
}

impl Out {
    /// Write the records of the picked events into the ring, stamped `now`, the moment they
    /// are published: each record built in its slot of the ring, with no copy in between. A
    /// full ring drops what does not fit (counted) or waits for room, as the policy says.
    /// `market`: each event's BBO and symbol, where some consumer reads them (zeros where
    /// none does). `ALL`: the consumer takes every event of the batch (its subscription is
    /// everything), and `picks` is not used.
    fn publish<const ALL: bool>(&mut self, now: u64, events: &[Event], market: Option<&[(Bbo, [u8; 8])]>) {
        let Out { ring, picks, policy, delivered, dropped, waits, .. } = self;
        let total = if ALL { events.len() } else { picks.len() };
        let done = match ring {
            RingTx::Full(r) => publish_into::<Record, ALL>(r, picks, total, *policy, waits, now, events, market),
            RingTx::Lean(r) => publish_into::<Lean, ALL>(r, picks, total, *policy, waits, now, events, market),
        };
        *dropped += (total - done) as u64;
        *delivered += done as u64;
        picks.clear();
    }
}

impl Out {
    /// A gap record into the ring: it waits for room whatever the policy (a consumer that
    /// drops records still learns of every gap), unless the consumer is gone.
    #[cold]
    fn publish_gap(&mut self, e: &Event) {
        let Out { ring, gaps, waits, .. } = self;
        let (one, p) = (std::slice::from_ref(e), SlowPolicy::Backpressure);
        let pushed = match ring {
            RingTx::Full(r) => publish_into::<Record, true>(r, &[], 1, p, waits, NOT_TIMED, one, None),
            RingTx::Lean(r) => publish_into::<Lean, true>(r, &[], 1, p, waits, NOT_TIMED, one, None),
        };
        *gaps += pushed as u64;
    }
}

/// [`Out::publish`] into a ring of either kind; returns how many records went in.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn publish_into<T: Slot, const ALL: bool>(
    ring: &mut rtrb::Producer<T>,
    picks: &[u32],
    total: usize,
    policy: SlowPolicy,
    waits: &mut u64,
    now: u64,
    events: &[Event],
    market: Option<&[(Bbo, [u8; 8])]>,
) -> usize {
    let index = |k: usize| if ALL { k } else { picks[k] as usize };
    let mut done = 0;
    let mut now = now;
    while done < total {
        let n = ring.slots().min(total - done);
        if n > 0 {
            let Ok(chunk) = ring.write_chunk_uninit(n) else { break };
            let stamp = now;
            done += match market {
                Some(m) => chunk.fill_from_iter((done..done + n).map(|k| {
                    let i = index(k);
                    T::new(&events[i], Some(&m[i]), stamp)
                })),
                None => chunk.fill_from_iter((done..done + n).map(|k| T::new(&events[index(k)], None, stamp))),
            };
            continue;
        }
        match policy {
            SlowPolicy::Drop => break,
            // The consumer thread has ended (an error it reports when joined): the rest
            // cannot be delivered, and waiting for room would never end.
            SlowPolicy::Backpressure if ring.is_abandoned() => break,
            SlowPolicy::Backpressure => {
                *waits += 1;
                std::thread::yield_now();
                if now != NOT_TIMED {
                    now = rdtsc();
                }
            }
        }
    }
    done
}

/// The HR side of the pipeline, fed by the arbitrator: the feed handler (decode and books,
/// `tickplant_core::feed`), then filtering and delivery to the consumers' rings.
struct Downstream<'p> {
    /// The HR stream's feed handler.
    feed: FeedHandler<AnyFeed<'p>>,
    /// The LL stream's, when some consumer reads it or the books follow it.
    ll: Option<FeedHandler<AnyFeed<'p>>>,
    /// The books follow the LL stream.
    books_on_ll: bool,
    outs: Vec<Out>,
    /// Per event of the batch, its instrument's BBO and symbol (for the events some
    /// consumer takes).
    market: Vec<(Bbo, [u8; 8])>,
    /// Some consumer reads the BBO and symbol: without one, `market` is not filled at all
    /// (it took about 25 instructions a message on the decode thread, the run's limit).
    any_market: bool,
    /// Decode and book are one stage: each message is decoded and applied in one dispatch.
    h_decode_book: Ticks,
    h_deliver: Ticks,
    /// Ticks spent downstream of the arbitrator (so the arbitrate stage can leave them out):
    /// counted for timed packets only, so the producer has every packet timed while it
    /// times a frame ([`Feed::timing`]).
    spent: u64,
    /// Which packets the stages are timed on.
    sampler: Sampler,
    /// Time every packet (the producer is timing the frame that releases them).
    time_all: bool,
    /// CPU time of the decode thread, when there is one.
    cpu_ns: u64,
}

impl<'p> Downstream<'p> {
    /// The feed handler of a stream, where the run decodes it.
    #[inline(always)]
    fn handler(&mut self, stream: Stream) -> Option<&mut FeedHandler<AnyFeed<'p>>> {
        match stream {
            Stream::Hr => Some(&mut self.feed),
            Stream::Ll => self.ll.as_mut(),
        }
    }

    /// The feed that keeps the books (for the orders to ask for ahead).
    #[inline(always)]
    fn book_feed(&self) -> &AnyFeed<'p> {
        match (&self.ll, self.books_on_ll) {
            (Some(ll), true) => ll.decoder(),
            _ => self.feed.decoder(),
        }
    }

    /// A gap in a stream the run decodes: the feed's state from before it no longer holds
    /// (every book stale, the FAST dictionary reset), and every consumer of the stream gets
    /// a gap record, in order with its other records.
    fn gap(&mut self, g: &GapReport) {
        let stream = Stream::of(g.output);
        let Some(h) = self.handler(stream) else { return };
        h.handle_gap(g);
        let e = gap_event(g);
        for o in self.outs.iter_mut().filter(|o| o.stream == stream) {
            o.publish_gap(&e);
        }
    }

    /// Instruments the feed named in the last packet join the subscriptions that name their
    /// symbol.
    #[inline]
    fn join_named(&mut self, stream: Stream) {
        while let Some((id, key)) = self.handler(stream).and_then(|h| h.decoder_mut().take_named()) {
            self.join_subscriptions(id, key);
        }
    }

    /// Add instrument `id`, whose symbol is `key` (space padded), to the subscriptions that
    /// name that symbol.
    #[cold]
    fn join_subscriptions(&mut self, id: u32, key: [u8; 8]) {
        for o in &mut self.outs {
            if o.symbols.contains(&key) {
                o.filter = std::mem::take(&mut o.filter).instruments([id]);
            }
        }
    }

    /// Decode, book and deliver one packet the arbitrator released: its sequencer already
    /// found where the payload starts and which messages the packet holds.
    /// `prefetched`: the caller has already asked for the orders the packet's messages name
    /// (some messages ahead); otherwise the packet asks for all of them before it applies
    /// the first.
    fn packet(&mut self, stream: Stream, r: &Released<'_>, prefetched: bool) {
        let t0 = self.clock_in();
        let payload = r.frame.get(usize::from(r.payload_offset)..).unwrap_or_default();
        let p = FeedPacket { payload, seq: r.seq, count: r.count, arrival_ns: r.arrival_ns, prefetched };
        match stream {
            Stream::Hr => self.feed.handle_packet(&p),
            Stream::Ll => match self.ll.as_mut() {
                Some(h) => h.handle_packet(&p),
                None => return,
            },
        }
        self.join_named(stream);
        self.timed_deliver(stream, t0);
    }

    /// The time a packet's stages start at, where this packet is one to time.
    #[inline(always)]
    fn clock_in(&mut self) -> Option<u64> {
        (self.sampler.pick() || self.time_all).then(rdtsc)
    }

    /// Deliver the batch; a timed packet (`t0` from [`Downstream::clock_in`]) records the
    /// decode stage and the delivery.
    #[inline(always)]
    fn timed_deliver(&mut self, stream: Stream, t0: Option<u64>) {
        let Some(t0) = t0 else { return self.deliver(stream, false) };
        let t2 = rdtsc();
        self.deliver(stream, true);
        let t3 = rdtsc();
        self.spent += t3 - t0;
        self.h_decode_book.record(t2 - t0);
        self.h_deliver.record(t3 - t2);
    }

    /// Filter the batch's events and push them to the consumers' rings; `stamp`: a timed
    /// packet, whose records carry their publication time for the ring's latency (the
    /// others carry [`NOT_TIMED`]: a time-stamp counter read on every packet was a third of
    /// the delivery's samples, on the decode thread, the run's limit).
    fn deliver(&mut self, stream: Stream, stamp: bool) {
        let Downstream { outs, feed, ll, market, any_market, .. } = self;
        let (h, other) = match (stream, ll.as_ref()) {
            (Stream::Hr, ll) => (&*feed, ll),
            (Stream::Ll, Some(ll)) => (ll, Some(&*feed)),
            (Stream::Ll, None) => return,
        };
        let events = h.events();
        if !*any_market {
            // One time stamp for the packet's records in every ring (a retry takes its own).
            let now = if stamp { rdtsc() } else { NOT_TIMED };
            for o in outs.iter_mut() {
                if o.stream != stream {
                    continue;
                }
                if o.filter.takes_all() {
                    o.matched += events.len() as u64;
                    o.publish::<true>(now, events, None);
                } else {
                    for (i, e) in events.iter().enumerate() {
                        if o.filter.matches(e) {
                            o.matched += 1;
                            o.picks.push(i as u32);
                        }
                    }
                    o.publish::<false>(now, events, None);
                }
            }
            return;
        }
        // The market state from the stream's own feed where it keeps one (the books, OPRA's
        // quotes), else from the books the other stream feeds.
        let mk = match other {
            Some(o) if !h.decoder().keeps_market() => o,
            _ => h,
        };
        market.clear();
        for (i, e) in events.iter().enumerate() {
            let mut wanted = false;
            for o in outs.iter_mut() {
                if o.stream == stream && o.filter.matches(e) {
                    o.matched += 1;
                    o.picks.push(i as u32);
                    wanted |= o.market;
                }
            }
            // The BBO and symbol are looked up only for an event a consumer takes and reads
            // them in.
            let m = if wanted { mk.decoder().market(e.instrument_id) } else { Default::default() };
            market.push(m);
        }
        // One time stamp for the packet's records in every ring (a retry takes its own).
        let now = if stamp { rdtsc() } else { NOT_TIMED };
        for o in outs.iter_mut().filter(|o| o.stream == stream) {
            o.publish::<false>(now, events, Some(market));
        }
    }
}

struct Sink<'a, 'p> {
    down: &'a mut Downstream<'p>,
    /// Reads LL frames again, when the run decodes that stream.
    ll: Option<(Sequencer, LinkType)>,
}

/// An LL frame as the feed handler reads it: the arbitrator's sequencer finds its payload,
/// sequence number and count again (the LL output gives the frame alone). A frame it
/// cannot read (none: the arbitrator forwarded it) is left out, and the report's accounting
/// says so.
fn released_ll<'a>(ll: &Option<(Sequencer, LinkType)>, now: u64, frame: &'a [u8]) -> Option<Released<'a>> {
    let (seq, link) = ll.as_ref()?;
    let info = seq.classify(*link, frame).ok()?;
    Some(Released {
        frame,
        seq: info.seq,
        count: info.count,
        input: 0,
        arrival_ns: now,
        release_ns: now,
        trimmed: false,
        payload_offset: info.payload_offset,
    })
}

impl ArbSink for Sink<'_, '_> {
    fn ll(&mut self, now: u64, frame: &[u8]) {
        if let Some(r) = released_ll(&self.ll, now, frame) {
            self.down.packet(Stream::Ll, &r, false);
        }
    }
    fn hr(&mut self, r: &Released<'_>) {
        // Released one at a time: nothing ahead of it to ask for.
        self.down.packet(Stream::Hr, r, false);
    }
    fn gap(&mut self, g: &GapReport) {
        self.down.gap(g);
    }
}

impl Feed for Sink<'_, '_> {
    fn elsewhere(&self) -> u64 {
        self.down.spent
    }
    fn timing(&mut self, on: bool) {
        self.down.time_all = on;
    }
    fn done(&self, _arb: &Arbitrator) -> (u64, &'static str) {
        (self.down.feed.stats().decoded, "decoded")
    }
}

impl Feed for HandoffSink {
    fn elsewhere(&self) -> u64 {
        self.waited
    }
    fn done(&self, arb: &Arbitrator) -> (u64, &'static str) {
        (arb.stats().hr.messages, "arbitrated")
    }
    fn flush(&mut self) {
        self.send();
    }
}

/// Packets released by the arbitrator (their UDP payloads) and gaps, in release order: what
/// the producer hands the decode thread, a batch at a time.
#[derive(Default)]
struct Handoff {
    bytes: Vec<u8>,
    items: Vec<Item>,
    /// The order id each ITCH message of the batch probably names ([`tickplant_core::itch::order_hint`]),
    /// in order, found by the producer as it copies the payload: the decode thread asks for
    /// them some messages ahead with no second walk through the packets (that walk took
    /// about 65 instructions a message on the decode thread, the run's limit).
    hints: Vec<u64>,
}

enum Item {
    /// A packet: its payload is `bytes[start..end]`, its messages' order hints the next
    /// `hints` of the batch's.
    Packet {
        stream: Stream,
        start: usize,
        end: usize,
        hints: u32,
        seq: u64,
        count: u32,
        input: u8,
        arrival_ns: u64,
        release_ns: u64,
        trimmed: bool,
    },
    Gap(GapReport),
}

/// How many messages ahead of the one being applied the decode thread asks for the orders
/// they name. On the parse + book benchmark's day 8 to 10 ran fastest (4: 35-36 ns a
/// message, 8: 32-33, 16: 37-42; a burst per 16-message batch: 39-44).
const PREFETCH_AHEAD: usize = 8;

/// Packets (or gaps) per handoff batch: the two threads touch the ring's indices once a
/// batch, not once a packet. A batch goes when it is full and at the end of the captures,
/// which are read as fast as they go; a live source would also send it when idle.
pub const DECODE_BATCH: usize = 64;
/// Handoff batches in flight (allocated once and passed back and forth).
const HANDOFF_BATCHES: usize = 16;

/// The producer's side of the handoff: fills a batch, sends it full, takes an empty one
/// back from the decode thread (waiting when all are in flight).
struct HandoffSink {
    cur: Handoff,
    tx: rtrb::Producer<Handoff>,
    back: rtrb::Consumer<Handoff>,
    spare: Vec<Handoff>,
    /// The producer has a core of its own, no other thread pinned there (waits spin first).
    alone: bool,
    /// Find the order hints of the packets of the stream the ITCH books follow.
    hints: Option<Stream>,
    /// Reads LL frames again, when the run decodes that stream.
    ll: Option<(Sequencer, LinkType)>,
    /// Ticks spent waiting for an empty batch (so that the arbitrate stage can leave them
    /// out: they are the decode thread's time, not the arbitrator's).
    waited: u64,
}

impl HandoffSink {
    /// Add a packet or gap to the batch, and send the batch when it is full.
    fn push(&mut self, item: Item) {
        self.cur.items.push(item);
        if self.cur.items.len() >= DECODE_BATCH {
            self.send();
        }
    }
    fn send(&mut self) {
        if self.cur.items.is_empty() {
            return;
        }
        let mut idle = 0u32;
        let mut since = 0;
        let next = loop {
            if let Some(b) = self.spare.pop() {
                break b;
            }
            if let Ok(b) = self.back.pop() {
                break b;
            }
            if self.back.is_abandoned() {
                // The decode thread is gone (it panicked): keep filling a fresh batch
                // that nobody reads, the join reports the panic.
                break Handoff::default();
            }
            if idle == 0 {
                since = rdtsc();
            }
            idle += 1;
            pause(idle, self.alone);
        };
        if idle > 0 {
            self.waited += rdtsc() - since;
        }
        let full = std::mem::replace(&mut self.cur, next);
        // The ring holds every batch there is, so it is never full.
        let _ = self.tx.push(full);
    }
}

impl HandoffSink {
    /// A packet of `stream` into the batch: its payload copied, its order hints found.
    #[inline]
    fn packet(&mut self, stream: Stream, r: &Released<'_>) {
        let payload = r.frame.get(usize::from(r.payload_offset)..).unwrap_or_default();
        let start = self.cur.bytes.len();
        self.cur.bytes.extend_from_slice(payload);
        let hints =
            if self.hints == Some(stream) { itch_order_hints(payload, |id| self.cur.hints.push(id)) } else { 0 };
        self.push(Item::Packet {
            stream,
            start,
            end: self.cur.bytes.len(),
            hints,
            seq: r.seq,
            count: r.count,
            input: r.input,
            arrival_ns: r.arrival_ns,
            release_ns: r.release_ns,
            trimmed: r.trimmed,
        });
    }
}

impl ArbSink for HandoffSink {
    fn ll(&mut self, now: u64, frame: &[u8]) {
        if let Some(r) = released_ll(&self.ll, now, frame) {
            self.packet(Stream::Ll, &r);
        }
    }
    fn hr(&mut self, r: &Released<'_>) {
        self.packet(Stream::Hr, r);
    }
    fn gap(&mut self, g: &GapReport) {
        if g.output == OutputId::Hr || self.ll.is_some() {
            self.push(Item::Gap(*g));
        }
    }
}

/// The run's threads' pins, each named by its setting: the producer, the decode thread
/// (where there is one: with `decode-thread = false` its pin names no thread), each consumer.
fn pins(spec: &PipelineSpec) -> impl Iterator<Item = (String, Option<usize>)> + '_ {
    let decode = if spec.decode_thread { spec.decode_core } else { None };
    [("run.producer-core".to_string(), spec.producer_core), ("run.decode-core".to_string(), decode)]
        .into_iter()
        .chain(spec.consumers.iter().map(|c| (format!("consumer {}: core", c.name), c.core)))
}

/// Every core the configuration pins a thread to must be one this process may run on: a
/// pin that cannot be made is an error, not a thread left to run anywhere.
fn check_cores(spec: &PipelineSpec) -> Result<(), String> {
    let Some(ids) = core_affinity::get_core_ids() else { return Ok(()) };
    let have: Vec<usize> = ids.iter().map(|c| c.id).collect();
    for (what, core) in pins(spec) {
        if let Some(core) = core {
            if !have.contains(&core) {
                return Err(format!("{what} = {core}: not a core this process may run on (it may run on {have:?})"));
            }
        }
    }
    Ok(())
}

/// Whether a thread pinned to `core` has it to itself among the run's threads (none other
/// is pinned there): such a thread may spin while it waits. Threads that share a core, or
/// are not pinned, give it away instead (see [`pause`]).
fn alone_on(spec: &PipelineSpec, core: Option<usize>) -> bool {
    alone_among(pins(spec).map(|(_, c)| c), core)
}

/// Whether exactly one of the threads' pins (`None`: not pinned) is `core`.
fn alone_among(pins: impl Iterator<Item = Option<usize>>, core: Option<usize>) -> bool {
    core.is_some() && pins.filter(|&c| c == core).count() == 1
}

/// Pin the calling thread to CPU `core` (if there is one by that id). A thread inherits its
/// creator's cores: the producer (the calling thread) is pinned only after the decode and
/// consumer threads are started, or every one of them would be confined to its core.
fn pin(core: usize) {
    if let Some(id) = core_affinity::get_core_ids().and_then(|v| v.into_iter().find(|c| c.id == core)) {
        core_affinity::set_for_current(id);
    }
}

/// Wait for work (`idle`: polls that found nothing so far). A thread pinned to a core of
/// its own (`alone`, see [`alone_on`]) polls hard, then politely, then sleeps a little: its
/// spinning costs no one. A thread that shares a core, pinned there with another or not
/// pinned at all, gives it away at once and sleeps soon: on this 2-core machine the
/// consumers' spinning took half of their threads' samples, time the producer and the
/// decode thread were waiting for. (Before 2026-11-25 any pinned thread spun, even one
/// pinned beside others: consumers pinned to the producer's core took 0.146 s of CPU
/// instead of about 0.03.)
fn pause(idle: u32, alone: bool) {
    let (spin, polite, sleep_us) = if alone { (256, 512, 50) } else { (0, 16, 100) };
    if idle < spin {
        std::hint::spin_loop();
    } else if idle < polite {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(sleep_us));
    }
}

/// Whether a consumer reads its records' BBO and symbol (`count`, `csv` and `jsonl` do not).
fn reads_market(a: &ConsumerAction) -> bool {
    !matches!(a, ConsumerAction::Count | ConsumerAction::Csv(_) | ConsumerAction::Jsonl(_))
}

/// The decode thread: every batch the producer sends, in order, through `down`; each batch
/// goes back emptied. Ends when the producer is gone and the ring is drained.
fn decode_loop(
    down: &mut Downstream<'_>,
    rx: &mut rtrb::Consumer<Handoff>,
    back: &mut rtrb::Producer<Handoff>,
    alone: bool,
) {
    let cpu0 = crate::clock::thread_cpu_ns();
    let mut idle = 0u32;
    loop {
        let Ok(mut b) = rx.pop() else {
            if rx.is_abandoned() && rx.is_empty() {
                down.cpu_ns = crate::clock::thread_cpu_ns().saturating_sub(cpu0);
                return;
            }
            idle += 1;
            pause(idle, alone);
            continue;
        };
        idle = 0;
        // The orders a packet's messages name are asked for while the messages before them
        // are applied, `PREFETCH_AHEAD` messages early (a packet's own at the latest before
        // it starts), from the hints the producer found: a burst at the packet's own start
        // left its first messages waiting for memory.
        let (mut asked, mut applied) = (0usize, 0usize);
        for item in &b.items {
            match *item {
                Item::Packet { stream, start, end, hints, seq, count, input, arrival_ns, release_ns, trimmed } => {
                    let n = hints as usize;
                    let upto = (applied + n.max(PREFETCH_AHEAD)).min(b.hints.len());
                    for &id in b.hints.get(asked..upto).unwrap_or_default() {
                        down.book_feed().prefetch(id);
                    }
                    asked = asked.max(upto);
                    applied += n;
                    down.packet(
                        stream,
                        &Released {
                            frame: &b.bytes[start..end],
                            seq,
                            count,
                            input,
                            arrival_ns,
                            release_ns,
                            trimmed,
                            payload_offset: 0,
                        },
                        true,
                    );
                }
                Item::Gap(g) => down.gap(&g),
            }
        }
        b.bytes.clear();
        b.items.clear();
        b.hints.clear();
        // The producer's side of this ring has room for every batch there is.
        let _ = back.push(b);
    }
}

/// One event as a CSV line (the header's columns) or a JSON line.
fn write_event(w: &mut impl Write, e: &Event, json: bool) -> std::io::Result<()> {
    let (action, side, price, t) = (e.action.as_str(), e.side.as_str(), e.price_str(), e.msg_type as char);
    if json {
        writeln!(
            w,
            "{{\"ts_recv\":{},\"ts_event\":{},\"sequence\":{},\"instrument_id\":{},\"action\":\"{action}\",\"side\":\"{side}\",\"price\":{price},\"size\":{},\"order_id\":{},\"aux\":{},\"flags\":{},\"msg_type\":\"{t}\"}}",
            e.ts_recv, e.ts_event, e.sequence, e.instrument_id, e.size, e.order_id, e.aux, e.flags
        )
    } else {
        writeln!(
            w,
            "{},{},{},{},{action},{side},{price},{},{},{},{},{t}",
            e.ts_recv, e.ts_event, e.sequence, e.instrument_id, e.size, e.order_id, e.aux, e.flags
        )
    }
}

/// A gap record as a CSV line (the event columns: `sequence` the first missing number,
/// `size` the messages, `order_id` the last, `aux` the reason's code, `msg_type` its name)
/// or a JSON line.
fn write_gap(w: &mut impl Write, e: &Event, json: bool) -> std::io::Result<()> {
    let reason = GapReason::from_code(e.aux).map_or("unknown", GapReason::as_str);
    if json {
        writeln!(
            w,
            "{{\"ts_recv\":{},\"action\":\"gap\",\"first_seq\":{},\"last_seq\":{},\"messages\":{},\"reason\":\"{reason}\"}}",
            e.ts_recv, e.sequence, e.order_id, e.size
        )
    } else {
        writeln!(
            w,
            "{},{},{},0,gap,none,0,{},{},{},0,{reason}",
            e.ts_recv, e.ts_event, e.sequence, e.size, e.order_id, e.aux
        )
    }
}

struct ConsumerResult {
    received: u64,
    /// Gap records popped.
    gaps: u64,
    by_action: [u64; 16],
    bbo_instruments: u64,
    ring: Ticks,
    cpu_ns: u64,
    matching: Option<(MatchReport, Ticks)>,
    trading: Option<crate::fixnet::TriggerTradeReport>,
}

/// A matching consumer's state.
struct MatchState {
    matcher: Matcher,
    market: MarketEvents,
    /// Per instrument id, its symbol's key in `market`.
    keys: Vec<Option<SymbolKey>>,
    ids: Vec<u64>,
    out: Option<BufWriter<File>>,
    handler: Option<MatchHandler>,
    report: MatchReport,
    hist: Ticks,
}

impl MatchState {
    fn new(spec: &MatchSpec) -> std::io::Result<Self> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let mut matcher = Matcher::with_schema(spec.schema.clone());
        for s in &spec.strategies {
            matcher.insert(s.clone()).map_err(|e| invalid(e.to_string()))?;
        }
        let market = MarketEvents::new(matcher.schema(), &[spec.venue.as_str()]).map_err(invalid)?;
        let out = match &spec.path {
            Some(p) => Some(BufWriter::with_capacity(1 << 20, File::create(p)?)),
            None => None,
        };
        Ok(MatchState {
            report: MatchReport { strategies: matcher.len() as u64, ..Default::default() },
            matcher,
            market,
            keys: Vec::new(),
            ids: Vec::new(),
            out,
            handler: spec.handler.clone(),
            hist: Ticks::new(),
        })
    }

    fn record(&mut self, i: u64, r: &Record) -> std::io::Result<()> {
        let t0 = rdtsc();
        let id = r.event.instrument_id as usize;
        if self.keys.len() <= id {
            self.keys.resize(id + 1, None);
        }
        let key = match self.keys[id] {
            Some(k) => k,
            None => {
                let k = self.market.symbol(self.matcher.schema(), r.symbol());
                // An instrument the directory has not named yet is looked up again later.
                if r.symbol != [0; 8] {
                    self.keys[id] = Some(k);
                }
                k
            }
        };
        let e = self.market.update(key, 0, &r.event, r.bbo);
        self.matcher.match_event(e, &mut self.ids);
        self.hist.record(rdtsc() - t0);
        self.report.events += 1;
        if self.ids.is_empty() {
            return Ok(());
        }
        self.report.events_with_matches += 1;
        self.report.matches += self.ids.len() as u64;
        if let Some(h) = &self.handler {
            (h.0.lock().unwrap_or_else(|p| p.into_inner()))(r, &self.ids);
        }
        if let Some(w) = self.out.as_mut() {
            let e = &r.event;
            write!(
                w,
                "{{\"event\":{i},\"sequence\":{},\"ts_event\":{},\"symbol\":\"{}\",\"action\":\"{}\",\"matches\":[",
                e.sequence,
                e.ts_event,
                r.symbol(),
                e.action.as_str()
            )?;
            for (k, id) in self.ids.iter().enumerate() {
                write!(w, "{}{id}", if k == 0 { "" } else { "," })?;
            }
            writeln!(w, "]}}")?;
        }
        Ok(())
    }
}

fn consumer_thread<T: Slot>(
    mut rx: rtrb::Consumer<T>,
    action: ConsumerAction,
    symbols: Arc<std::sync::Mutex<SymbolDirectory>>,
    alone: bool,
) -> std::io::Result<ConsumerResult> {
    let cpu0 = crate::clock::thread_cpu_ns();
    let mut res = ConsumerResult {
        received: 0,
        gaps: 0,
        by_action: [0; 16],
        bbo_instruments: 0,
        ring: Ticks::new(),
        cpu_ns: 0,
        matching: None,
        trading: None,
    };
    let mut trader = match &action {
        ConsumerAction::Trade(cfg) => Some(crate::fixnet::TriggerTrader::connect(cfg)?),
        _ => None,
    };
    let mut matching = match &action {
        ConsumerAction::Match(m) => Some(MatchState::new(m)?),
        _ => None,
    };
    let mut w: Option<BufWriter<File>> = match &action {
        ConsumerAction::Csv(p) | ConsumerAction::Jsonl(p) => Some(BufWriter::with_capacity(1 << 20, File::create(p)?)),
        _ => None,
    };
    if let (ConsumerAction::Csv(_), Some(w)) = (&action, w.as_mut()) {
        writeln!(w, "ts_recv,ts_event,sequence,instrument_id,action,side,price,size,order_id,aux,flags,msg_type")?;
    }
    let mut bbo: Vec<Option<(Bbo, [u8; 8])>> = Vec::new();
    let handler = match &action {
        ConsumerAction::Handler(h) => Some(h.0.clone()),
        _ => None,
    };
    // Held for the whole run: the handler belongs to this thread alone.
    let mut handler = handler.as_ref().map(|h| h.lock().unwrap_or_else(|p| p.into_inner()));
    let mut idle = 0u32;
    loop {
        // Everything the ring holds is taken at once and given back together: one update of
        // the ring's read index a batch instead of one a record.
        let n = rx.slots();
        if n > 0 {
            idle = 0;
            let chunk = rx.read_chunk(n).expect("the ring holds n records");
            let (first, second) = chunk.as_slices();
            // The whole chunk is popped at once: one time stamp for all its records (a read
            // per record cost the consumer more than counting them).
            let now = rdtsc();
            for slot in first.iter().chain(second) {
                // Counters of two cores can disagree by a few ticks: a negative delay counts as
                // none (the report's lowest value, 1 tick).
                let (e, published_tsc) = slot.stamped();
                if e.action == EventAction::Gap {
                    // A gap of the stream: written where the consumer writes records, handed
                    // to your handler; no market event for the others.
                    res.gaps += 1;
                    match &action {
                        ConsumerAction::Csv(_) => write_gap(w.as_mut().expect("opened"), e, false)?,
                        ConsumerAction::Jsonl(_) => write_gap(w.as_mut().expect("opened"), e, true)?,
                        ConsumerAction::Handler(_) => {
                            if let Some(h) = handler.as_mut() {
                                (h)(&slot.record());
                            }
                        }
                        _ => {}
                    }
                    continue;
                }
                if published_tsc != NOT_TIMED {
                    res.ring.record(now.saturating_sub(published_tsc));
                }
                res.received += 1;
                res.by_action[e.action.index()] += 1;
                match &action {
                    ConsumerAction::Count => {}
                    ConsumerAction::Handler(_) => {
                        if let Some(h) = handler.as_mut() {
                            (h)(&slot.record());
                        }
                    }
                    ConsumerAction::Csv(_) => write_event(w.as_mut().expect("opened"), e, false)?,
                    ConsumerAction::Jsonl(_) => write_event(w.as_mut().expect("opened"), e, true)?,
                    // Instrument 0 is no instrument (system and status events).
                    ConsumerAction::Bbo(_) if e.instrument_id == 0 => {}
                    ConsumerAction::Bbo(_) => {
                        let i = e.instrument_id as usize;
                        if bbo.len() <= i {
                            bbo.resize(i + 1, None);
                        }
                        let r = slot.record();
                        bbo[i] = Some((r.bbo, r.symbol));
                    }
                    ConsumerAction::Match(_) => {
                        if let Some(m) = matching.as_mut() {
                            m.record(res.received - 1, &slot.record())?;
                        }
                    }
                    ConsumerAction::Trade(_) => {
                        if let Some(t) = trader.as_mut() {
                            let r = slot.record();
                            let entry = tickplant_core::trigger::Entry::of_event(&r.event, r.symbol().as_bytes());
                            t.on_entry(&entry)?;
                            // The exchange's answers are read between records now and then,
                            // and whenever the ring is empty.
                            if res.received.is_multiple_of(256) {
                                t.poll()?;
                            }
                        }
                    }
                }
            }
            chunk.commit_all();
            continue;
        }
        if rx.is_abandoned() && rx.is_empty() {
            break;
        }
        // A consumer pinned to its own core reaches the sleeps only when the feed is quiet.
        idle += 1;
        if let Some(t) = trader.as_mut() {
            t.poll()?;
        }
        pause(idle, alone);
    }
    if let Some(mut w) = w {
        w.flush()?;
    }
    if let Some(t) = trader {
        res.trading = Some(t.finish(Duration::from_secs(5))?);
    }
    if let Some(mut m) = matching {
        if let Some(w) = m.out.as_mut() {
            w.flush()?;
        }
        res.matching = Some((m.report, m.hist));
    }
    res.bbo_instruments = bbo.iter().filter(|b| b.is_some()).count() as u64;
    if let ConsumerAction::Bbo(Some(p)) = &action {
        let dir = symbols.lock().map(|d| d.clone()).unwrap_or_default();
        let mut w = BufWriter::new(File::create(p)?);
        for (i, b) in bbo.iter().enumerate() {
            if let Some((b, sym)) = b {
                // The directory names ITCH instruments that were named after their record
                // went out; other feeds' records carry their symbol.
                let sym: String = match dir.symbol(i as u32) {
                    Some(s) => s,
                    None => std::str::from_utf8(itch50::trim_stock(sym)).unwrap_or(""),
                }
                .chars()
                // A feed's bytes never break the JSON line.
                .map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' { c } else { '?' })
                .collect();
                writeln!(
                    w,
                    "{{\"instrument_id\":{i},\"symbol\":\"{sym}\",\"bid_price\":{},\"bid_size\":{},\"ask_price\":{},\"ask_size\":{}}}",
                    tickplant_core::event::price_to_string(b.bid_price),
                    b.bid_size,
                    tickplant_core::event::price_to_string(b.ask_price),
                    b.ask_size
                )?;
            }
        }
        w.flush()?;
    }
    res.cpu_ns = crate::clock::thread_cpu_ns().saturating_sub(cpu0);
    Ok(res)
}

/// What a stream's feed leaves at the end: its books (where it kept them), its symbol
/// directory, messages by type, instruments, and the OPRA FAST counts.
type Finished = (Option<Books>, SymbolDirectory, BTreeMap<String, u64>, u64, Option<OpraFastStats>);

fn finish_feed(d: AnyFeed<'_>, specialised: usize) -> Finished {
    match d {
        AnyFeed::OpraFast(o) => {
            let st = OpraFastStats { specialised_segments: specialised as u64, ..o.stats() };
            (None, SymbolDirectory::new(), st.by_category.clone(), st.series, Some(st))
        }
        AnyFeed::Itch50(f) => {
            let (by_type, n) = (f.by_type(), f.dir.len() as u64);
            let (books, dir) = f.into_books();
            (books, dir, by_type, n, None)
        }
        AnyFeed::Itch50Events(f) => {
            let (by_type, n) = (f.by_type(), f.dir.len() as u64);
            (None, f.dir, by_type, n, None)
        }
    }
}

/// The symbol directory of an ITCH feed.
fn directory<'a>(d: &'a AnyFeed<'_>) -> Option<&'a SymbolDirectory> {
    match d {
        AnyFeed::Itch50(f) => Some(&f.dir),
        AnyFeed::Itch50Events(f) => Some(&f.dir),
        AnyFeed::OpraFast(_) => None,
    }
}

/// A run that stopped early, as the captures' error: a destination conflict names the
/// capture and the frame.
fn capture_error(e: RunError<PcapError>) -> PcapError {
    match e {
        RunError::Source(e) => e,
        RunError::Destinations { input, frame, conflict } => {
            PcapError { path: input.into(), frame: Some(frame), offset: None, reason: conflict.to_string() }
        }
    }
}

/// The pipeline's final state, for callers that look further than the report.
#[derive(Debug)]
pub struct Outcome {
    pub report: Report,
    pub books: Books,
    pub symbols: SymbolDirectory,
}

/// Profile the first `o.profile_blocks` OPRA FAST blocks of `path` and specialise `program`
/// for them; returns the segments built. Frames that are not market data and blocks that
/// do not decode are passed over (the run itself counts them).
fn specialise_opra(
    program: &mut FastProgram,
    path: &std::path::Path,
    cfg: &tickplant_core::SequencerConfig,
    o: &OpraFastSpec,
) -> Result<usize, PcapError> {
    let cfg_err = |reason: String| PcapError { path: PathBuf::from("<config>"), frame: None, offset: None, reason };
    let seq = Sequencer::new(cfg.clone()).map_err(cfg_err)?;
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
pub fn run(spec: &PipelineSpec) -> Result<Outcome, PcapError> {
    let cfg_err = |reason: String| PcapError { path: PathBuf::from("<config>"), frame: None, offset: None, reason };
    if spec.inputs.is_empty() || spec.inputs.len() > 2 {
        return Err(cfg_err(format!("the pipeline takes one or two captures, not {}", spec.inputs.len())));
    }
    check_cores(spec).map_err(cfg_err)?;
    let readers = spec.inputs.iter().map(FrameReader::open).collect::<Result<Vec<_>, _>>()?;
    let links: Vec<LinkType> = readers.iter().map(|r| r.link_type()).collect();
    let seq = Sequencer::new(spec.sequencer.clone()).map_err(cfg_err)?;
    // The LL stream is decoded when a consumer reads it or the books follow it.
    let ll_on = spec.book_stream == Stream::Ll || spec.consumers.iter().any(|c| c.stream == Stream::Ll);
    if spec.book_stream == Stream::Ll && matches!(spec.decoder, FeedDecoder::OpraFast(_)) {
        return Err(cfg_err("book.stream = \"ll\": opra-fast keeps no books to follow a stream".into()));
    }
    if ll_on && links.iter().any(|l| *l != links[0]) {
        return Err(cfg_err(format!(
            "the LL stream is read from frames of one link type, and the captures have {links:?}: \
             convert one, or read the HR stream only"
        )));
    }
    let ll_seq = ll_on.then(|| (seq.clone(), links[0]));
    let mut arb_cfg = spec.arb.clone();
    arb_cfg.inputs = readers.len();
    arb_cfg.low_latency = ll_on;
    arb_cfg.high_reliability = true;
    let mut arb = Arbitrator::new(arb_cfg, seq).map_err(cfg_err)?;
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
        let mut filter = Filter::all().actions(c.actions.iter().copied()).types(c.types.iter().copied());
        if !c.symbols.is_empty() {
            // No instrument until the directory names one of the symbols.
            filter = filter.instruments(std::iter::empty());
        }
        outs.push(Out {
            name: c.name.clone(),
            symbols: c.symbols.iter().map(|s| itch50::stock(s)).collect(),
            filter,
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
        let alone = alone_on(spec, core);
        handles.push(
            std::thread::Builder::new()
                .name(format!("consumer-{}", c.name))
                .spawn(move || {
                    if let Some(core) = core {
                        pin(core);
                    }
                    match rx {
                        RingRx::Full(rx) => consumer_thread(rx, action, dir, alone),
                        RingRx::Lean(rx) => consumer_thread(rx, action, dir, alone),
                    }
                })
                .map_err(|e| cfg_err(format!("cannot start a consumer thread: {e}")))?,
        );
    }
    // The OPRA FAST program, specialised for the capture's hottest presence maps.
    let mut specialised = 0;
    let opra_program = match &spec.decoder {
        FeedDecoder::Itch50 => None,
        FeedDecoder::OpraFast(o) => {
            let mut p = (*o.program).clone();
            if o.profile_blocks > 0 {
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
                eprintln!("opra-fast: kernels not compiled to native code ({e}); the decoder runs them");
                None
            }
        },
        _ => None,
    };
    // A stream's feed: with the books where they follow it (ITCH).
    let feed_for = |stream: Stream| -> Result<AnyFeed<'_>, PcapError> {
        Ok(match (&spec.decoder, &opra_program) {
            (FeedDecoder::OpraFast(o), Some(program)) => {
                let native = opra_native.as_ref().map(|n| n as &dyn tickplant_fast::NativeKernels);
                let options =
                    OpraFastOptions { skip: o.skip, reset_per_block: o.reset_per_block, max_series: o.max_series };
                AnyFeed::OpraFast(OpraFastFeed::new(program, native, options).map_err(|e| cfg_err(e.to_string()))?)
            }
            _ if stream == spec.book_stream => {
                AnyFeed::Itch50(ItchFeed::new(Books::with_table_advice(spec.book, crate::huge_pages), spec.midnight_ns))
            }
            _ => AnyFeed::Itch50Events(ItchFeed::without_books(spec.midnight_ns)),
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
    };
    let mut h_arb = Ticks::new();
    let mut clock = TscClock::start();
    let started = Instant::now();
    let producer_cpu0 = crate::clock::thread_cpu_ns();
    let mut producer_cpu = 0;
    let mut merged = MergedReader::new(readers);
    let opts = RunOptions { sample: spec.latency_sample, progress: spec.progress, changes: &spec.policy_changes };
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
        let (read, d) = std::thread::scope(|scope| {
            let decoder = std::thread::Builder::new()
                .name("decode".into())
                .spawn_scoped(scope, move || {
                    if let Some(core) = decode_core {
                        pin(core);
                    }
                    decode_loop(&mut down, &mut rx, &mut back_tx, decode_alone);
                    down
                })
                .map_err(|e| cfg_err(format!("cannot start the decode thread: {e}")))?;
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
                ll: ll_seq.clone(),
                waited: 0,
            };
            pin_producer();
            let read = runner::run(&mut merged, &mut arb, &mut sink, &mut h_arb, opts);
            // Dropping the sink closes the ring: the decode thread drains it and ends.
            drop(sink);
            producer_cpu = crate::clock::thread_cpu_ns().saturating_sub(producer_cpu0);
            let down = decoder.join().map_err(|_| cfg_err("the decode thread panicked".into()))?;
            Ok::<_, PcapError>((read, down))
        })?;
        down = d;
        read.map_err(capture_error)?.frames
    } else {
        pin_producer();
        let read =
            runner::run(&mut merged, &mut arb, &mut Sink { down: &mut down, ll: ll_seq.clone() }, &mut h_arb, opts);
        producer_cpu = crate::clock::thread_cpu_ns().saturating_sub(producer_cpu0);
        read.map_err(capture_error)?.frames
    };
    if let (Ok(mut d), Some(dir)) = (dir_shared.lock(), directory(down.feed.decoder())) {
        *d = dir.clone();
    }
    // Close the rings: consumers drain and finish.
    let outs = std::mem::take(&mut down.outs);
    let mut consumers = Vec::new();
    let mut results = Vec::new();
    for (o, h) in outs.into_iter().zip(handles) {
        let Out { name, matched, delivered, dropped, waits, ring, stream, gaps, .. } = o;
        drop(ring);
        let r = h
            .join()
            .map_err(|_| cfg_err(format!("consumer {name} panicked")))?
            .map_err(|e| cfg_err(format!("consumer {name}: {e}")))?;
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
    let Downstream { feed, ll, h_decode_book, h_deliver, cpu_ns, .. } = down;
    let stage2 = if matches!(feed.decoder(), AnyFeed::OpraFast(_)) {
        "2 decode + map (per packet)"
    } else {
        "2 decode + book (per packet)"
    };
    latency_ns.insert(stage2.to_string(), latency_of(&h_decode_book, &clock));
    latency_ns.insert("3 deliver (per packet)".to_string(), latency_of(&h_deliver, &clock));
    let stats = arb.stats();
    let (decoder, fed, gaps) = feed.into_parts();
    let feed_name = decoder.feed();
    let (hr_books, symbols, by_type, instruments, opra_fast) = finish_feed(decoder, specialised);
    let (ll, ll_books) = match ll.map(FeedHandler::into_parts) {
        Some((d, st, gaps)) => {
            let books = finish_feed(d, specialised).0;
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
        feed: feed_name.to_string(),
        frames,
        arbitration: Some(stats),
        books_follow: spec.book_stream,
        ll,
        packets_in: fed.packets_in,
        opra_fast,
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
    };
    Ok(Outcome { report, books, symbols })
}

/// The report as people read it.
pub fn summary(r: &Report) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "tickplant run: {} frames from {}", r.frames, r.inputs.join(" + "));
    if let Some(a) = &r.arbitration {
        for (i, st) in a.inputs.iter().enumerate() {
            let _ = writeln!(
                s,
                "  input {}: {} packets, {} wins, {} duplicates, {} late, {} out of order, {} other",
                ["A", "B"].get(i).unwrap_or(&"?"),
                st.packets,
                st.wins,
                st.duplicates,
                st.late,
                st.out_of_order,
                st.other
            );
        }
        let _ = writeln!(
            s,
            "  arbitrated (HR): {} packets, {} messages, {} gaps ({} messages lost)",
            a.hr.packets, a.hr.messages, a.hr.gaps, a.hr.messages_lost
        );
    }
    for g in r.gaps.iter().take(5) {
        let _ =
            writeln!(s, "    gap {}..={} ({} messages, {})", g.first_seq, g.last_seq, g.messages, g.reason.as_str());
    }
    if r.gaps.len() > 5 {
        let _ = writeln!(s, "    ... {} more gaps", r.gaps.len() - 5);
    }
    let _ = writeln!(
        s,
        "  decoded: {} messages ({} undecodable) of {} in HR packets",
        r.decoded, r.undecodable, r.messages_in
    );
    if let Some(ll) = &r.ll {
        let _ = writeln!(
            s,
            "  LL stream: {} packets, {} messages decoded ({} undecodable) of {}, {} gaps{}",
            ll.packets_in,
            ll.decoded,
            ll.undecodable,
            ll.messages_in,
            ll.gaps.len(),
            if r.books_follow == Stream::Ll { "; the books follow it" } else { "" }
        );
    }
    if let Some(o) = &r.opra_fast {
        let _ = writeln!(
            s,
            "  opra-fast: {} quotes, {} trades, {} status, {} other, {} rejected {:?}; {} series; by category {:?}; {} specialised segments",
            o.quotes, o.trades, o.status, o.other, o.rejected, o.rejected_by_reason, o.series, o.by_category, o.specialised_segments
        );
    }
    if r.opra_fast.is_none() {
        let b = &r.book;
        let _ = writeln!(
            s,
            "  books: {} applied, {} not book events, {} unknown order, {} duplicate, {} table full; {} instruments, {} live orders, {} stale books",
            b.applied, b.ignored, b.unknown_order, b.duplicate_order, b.table_full, r.instruments, r.live_orders, r.stale_books
        );
    }
    for c in &r.consumers {
        // A consumer none of whose records came in a timed packet has no ring latency.
        let l = &c.ring_latency_ns;
        let ring =
            if l.count == 0 { "ring not timed".to_string() } else { format!("ring p50 {} ns p99 {} ns", l.p50, l.p99) };
        let _ = writeln!(
            s,
            "  consumer {:<10} matched {:>9}  delivered {:>9}  dropped {:>6}  received {:>9}  {ring}{}{}",
            c.name,
            c.matched,
            c.delivered,
            c.dropped,
            c.received,
            if c.stream == Stream::Ll { "  (LL stream)" } else { "" },
            if c.gaps > 0 { format!("  {} gap records", c.gaps) } else { String::new() }
        );
        if let Some(m) = &c.matching {
            let _ = writeln!(
                s,
                "    strategies: {} strategies, {} events matched, {} with matches, {} matches",
                m.strategies, m.events, m.events_with_matches, m.matches
            );
        }
        if let Some(t) = &c.trading {
            let _ = writeln!(
                s,
                "    trading: {} records to the triggers; {} BUYs and {} SELLs sent, {} acks, {} BUY fills, {} SELL fills; risk rejects {:?}",
                t.entries, t.buys_sent, t.sells_sent, t.acks, t.buy_fills, t.sell_fills, t.risk_rejects
            );
        }
    }
    let _ = writeln!(
        s,
        "  accounting: {}",
        match r.check() {
            Ok(()) if r.opra_fast.is_some() => "balanced (HR block messages = decoded + undecodable; decoded = quotes + trades + status + other + rejected; per consumer matched = delivered + dropped = received + dropped)".to_string(),
            Ok(()) => "balanced (HR messages = decoded + undecodable = book outcomes; per consumer matched = delivered + dropped = received + dropped)".to_string(),
            Err(e) => format!("NOT BALANCED: {e}"),
        }
    );
    let _ = writeln!(s, "  throughput: {:.2} M messages/s ({:.3} s wall)", r.messages_per_s / 1e6, r.wall_s);
    // Each thread's CPU time beside the wall: a thread near the wall is the one that limits
    // the run.
    let mut cpu = format!("producer {:.3}", r.producer_cpu_s);
    if r.decode_cpu_s > 0.0 {
        let _ = write!(cpu, ", decode {:.3}", r.decode_cpu_s);
    }
    for c in &r.consumers {
        let _ = write!(cpu, ", consumer {} {:.3}", c.name, c.cpu_s);
    }
    let _ = writeln!(s, "  cpu (s): {cpu}");
    let _ = writeln!(s, "  latency (ns)                    count        p50      p90      p99    p99.9        max");
    if r.latency_sample > 1 {
        let _ = writeln!(
            s,
            "    (stages 1-4 timed on 1 frame or packet in {}, `[run] latency-sample`; rings on the records of the timed packets)",
            r.latency_sample
        );
    }
    let row = |s: &mut String, name: &str, l: &Latency| {
        let _ = writeln!(
            s,
            "    {:<28} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}",
            name, l.count, l.p50, l.p90, l.p99, l.p999, l.max
        );
    };
    for (name, l) in &r.latency_ns {
        row(&mut s, name, l);
    }
    for c in &r.consumers {
        row(&mut s, &format!("4 ring -> {}", c.name), &c.ring_latency_ns);
    }
    for c in &r.consumers {
        if let Some(m) = &c.matching {
            row(&mut s, &format!("5 match -> {}", c.name), &m.latency_ns);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_thread_alone_on_its_core_spins() {
        let pins = [Some(0), Some(1), Some(0), None];
        // The second thread has core 1 to itself; the first and third share core 0.
        assert!(alone_among(pins.into_iter(), Some(1)));
        assert!(!alone_among(pins.into_iter(), Some(0)));
        // An unpinned thread shares every core.
        assert!(!alone_among(pins.into_iter(), None));
        assert!(alone_among([Some(3)].into_iter(), Some(3)));
    }
}

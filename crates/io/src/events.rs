//! Normalized events straight from a file, for research: one capture (or an ITCH
//! BinaryFILE) of one feed in, [`Event`]s out in chunks, with the symbols the feed named.
//! The shells over it are `tickplant export` (DBN, Parquet, JSON lines) and the Python
//! package's `tickplant.read`.
//!
//! The events are the pipeline's own: a capture's frames go through the arbitrator (one
//! input, holes skipped at once, so that a gap is reported where it is seen) and the feed
//! handler of the feed, with its books or per-series state, exactly as `tickplant run`
//! builds them for a capture given as `a` alone. A gap becomes a gap record
//! ([`gap_event`]) in the stream, where it was found. An ITCH BinaryFILE (plain or gzip)
//! has no packets: its messages go through the same ITCH decoder one by one
//! ([`ItchFeed::decode_message`]), numbered from 1, with `ts_recv` 0.
//!
//! A filter (symbols, actions, the feed's message types) is applied before an event is
//! handed out; filtered events are counted ([`ReadStats::filtered`]). Gap records are
//! always handed out: a consumer of a filtered stream still has to know what it missed.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::error::UnknownName;
use tickplant_core::event::{Event, EventAction};
use tickplant_core::feed::{
    gap_event, AnyFeed, EventBatch, FeedDecoder as _, FeedHandler, ItchFeed, OpraFastFeed, OpraFastOptions,
    Packet as FeedPacket,
};
use tickplant_core::itch::SessionDay;
use tickplant_core::nyse::NyseXdpFeed;
use tickplant_core::opra_binary::OpraBinaryFeed;
use tickplant_core::route::Filter;
use tickplant_core::{
    ArbConfig, ArbSink, Arbitrator, CountSpec, Endian, Endpoint, FieldSpec, GapReport, InputStats, Policy, Protocol,
    Released, Sequencer, SequencerConfig,
};
use tickplant_wire::itch50::{self, frame_at, Framing};
use tickplant_wire::xdp_integrated::Dialect;

use crate::itch::{open_whole, ItchInput, WholeFile};
use crate::pcap::{FrameReader, PcapError, TimeSource};

/// The feeds a file can be read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Feed {
    /// NASDAQ TotalView-ITCH 5.0: a BinaryFILE (plain or gzip) or MoldUDP64 in a capture.
    Itch50,
    /// NYSE Integrated Feed, XDP v2.1 layout.
    NyseXdp,
    /// NYSE Integrated Feed, Pillar v2.5 layout.
    NysePillar,
    /// OPRA binary, Participant Interface v6.
    OpraBinary,
    /// OPRA FAST v2 blocks (templates needed: [`ReadOptions::opra_fast`]).
    OpraFast,
}

impl Feed {
    pub const ALL: [Feed; 5] = [Feed::Itch50, Feed::NyseXdp, Feed::NysePillar, Feed::OpraBinary, Feed::OpraFast];
    pub fn as_str(self) -> &'static str {
        match self {
            Feed::Itch50 => "itch50",
            Feed::NyseXdp => "nyse-xdp",
            Feed::NysePillar => "nyse-pillar",
            Feed::OpraBinary => "opra-binary",
            Feed::OpraFast => "opra-fast",
        }
    }
    /// The sequencer of the feed's packets as its simulator and the exchanges frame them.
    pub fn sequencer(self) -> SequencerConfig {
        match self {
            Feed::Itch50 => SequencerConfig::preset(Protocol::Moldudp64),
            Feed::NyseXdp | Feed::NysePillar => SequencerConfig::preset(Protocol::Xdp),
            Feed::OpraBinary => SequencerConfig::preset(Protocol::Opra),
            // `tickplant sim opra-fast`'s sequence header: a u32 BE number and a u8 count.
            Feed::OpraFast => {
                let mut c = SequencerConfig::preset(Protocol::Custom);
                c.seq = FieldSpec::new(0, 4, Endian::Big);
                c.count = CountSpec::Field(FieldSpec::new(4, 1, Endian::Big));
                c
            }
        }
    }
}

impl std::fmt::Display for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Feed {
    type Err = tickplant_core::error::UnknownName;
    fn from_str(s: &str) -> Result<Feed, Self::Err> {
        Feed::ALL.into_iter().find(|f| f.as_str() == s).ok_or_else(|| tickplant_core::error::UnknownName {
            what: "feed",
            name: s.into(),
            expected: "one of itch50, nyse-xdp, nyse-pillar, opra-binary, opra-fast",
        })
    }
}

/// What to read and how.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub feed: Feed,
    /// ITCH: where its timestamps count from (the capture's day unless given).
    pub day: SessionDay,
    /// ITCH BinaryFILE: take each message's length from its type, not the file's prefix.
    pub infer_length: bool,
    pub book: BookConfig,
    /// OPRA: room in the series table.
    pub max_series: usize,
    /// Where the packets' sequence numbers are (the feed's own by default).
    pub sequencer: Option<SequencerConfig>,
    /// Only these symbols (as the feed names them; OPRA: the root); empty: every one.
    pub symbols: Vec<String>,
    /// Only these actions; empty: every one.
    pub actions: Vec<EventAction>,
    /// Only these message types (the event's `msg_type`); empty: every one.
    pub types: Vec<u8>,
    /// OPRA FAST: bytes before each block's SOH (the sequence header; 5 for `tickplant sim
    /// opra-fast`). Its templates are given to [`EventReader::open`].
    pub opra_fast_skip: usize,
    /// Captures: the destinations to read. Empty: the one the first packet goes to (a
    /// packet of the protocol to another is an error that names both); one: that line
    /// alone; two: the A and B lines of one feed, arbitrated (a message either carried is
    /// read).
    pub lines: Vec<Endpoint>,
    /// Captures read after the first, in order, as one stream: the files of a rotated
    /// capture (`hr-000.pcap`, `hr-001.pcap`, ... as `--rotate` writes them), whose books
    /// and sequence numbers go on from one file to the next.
    pub then: Vec<PathBuf>,
    /// Captures: where `ts_recv` comes from: the capture's record times, or a tap's
    /// hardware time stamp in each frame's trailer.
    pub timestamps: TimeSource,
}

/// How long (capture time) a read waits for a packet that came out of order, or that one
/// line lost and the other brings: A/B skews are microseconds to a few milliseconds, and a
/// file has time to spare. (A capture of both lines sent to one group, or a packet the
/// capture holds out of order, is read whole, not as a gap and a late copy.)
pub const READ_WINDOW_NS: u64 = 100_000_000;

impl ReadOptions {
    pub fn new(feed: Feed) -> ReadOptions {
        ReadOptions {
            feed,
            day: SessionDay::FromCapture,
            infer_length: false,
            book: BookConfig::default(),
            max_series: 1 << 20,
            sequencer: None,
            symbols: Vec::new(),
            actions: Vec::new(),
            types: Vec::new(),
            opra_fast_skip: 5,
            lines: Vec::new(),
            then: Vec::new(),
            timestamps: TimeSource::Capture,
        }
    }

    /// The lines to read ([`ReadOptions::lines`]) as the shells name them (`GROUP:PORT`,
    /// `GROUP` or `PORT`).
    pub fn set_lines(&mut self, lines: &[String]) -> Result<(), BadOption> {
        self.lines = lines
            .iter()
            .map(|l| l.parse::<Endpoint>().map_err(|e| BadOption { option: "lines", reason: e.to_string() }))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// The options the shells (`tickplant export`, the Python package) take by name: the
    /// feed, the ITCH trading day (US Eastern, or `auto`: the capture's) and the actions wanted.
    pub fn named(feed: &str, date: &str, actions: &[String]) -> Result<ReadOptions, BadOption> {
        let bad = |option, reason: String| BadOption { option, reason };
        let feed: Feed = feed.parse().map_err(|e: UnknownName| bad("feed", e.to_string()))?;
        let mut o = ReadOptions::new(feed);
        o.day = SessionDay::parse(date).map_err(|e| bad("date", e.to_string()))?;
        o.actions = actions
            .iter()
            .map(|a| a.parse::<EventAction>().map_err(|e| bad("actions", e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(o)
    }
}

/// An option given by name that is not what it should be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadOption {
    /// The option's name (`feed`, `date`, `actions`).
    pub option: &'static str,
    pub reason: String,
}

impl std::fmt::Display for BadOption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.option, self.reason)
    }
}

impl std::error::Error for BadOption {}

/// Why a read failed.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be read, or is not what the feed's reader expects (path, frame,
    /// byte offset and what was wrong).
    Input(PcapError),
    /// The options do not fit the file or feed.
    Options { path: PathBuf, reason: String },
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Input(e) => write!(f, "{e}"),
            ReadError::Options { path, reason } => write!(f, "{}: {reason}", path.display()),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<PcapError> for ReadError {
    fn from(e: PcapError) -> ReadError {
        ReadError::Input(e)
    }
}

/// What a read went through. Every message is counted once:
/// `messages == decoded + undecodable`; every decoded event and gap record is
/// `events + filtered` (`events` handed out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadStats {
    /// Captures: frames read, and those that were not the feed's packets (skipped).
    pub frames: u64,
    pub other_frames: u64,
    pub packets: u64,
    pub messages: u64,
    pub decoded: u64,
    pub undecodable: u64,
    /// Packets seen again (a capture holding the same packet twice) or out of order.
    pub duplicates: u64,
    pub late: u64,
    /// Holes in the sequence, and the messages in them.
    pub gaps: u64,
    pub messages_lost: u64,
    pub events: u64,
    pub filtered: u64,
    /// Captures: frames the capture cut short (its snapshot length): counted in
    /// `other_frames` where their packet could not be read, what they carried in `gaps`.
    pub cut_short_frames: u64,
}

/// Reads one file into events, a chunk at a time.
#[derive(Debug)]
pub struct EventReader<'p> {
    path: PathBuf,
    read_as: Feed,
    src: Src,
    down: Down<'p>,
    done: bool,
    /// A trading day given for a feed that carries its own dates (not ITCH).
    day_unused: bool,
    /// What the warnings call the input: the path, or the first of several and how many
    /// more ([`ReadOptions::then`]).
    name: String,
}

#[derive(Debug)]
enum Src {
    /// An ITCH BinaryFILE: `n` messages framed so far, `decoded` of them decoded.
    Whole { data: WholeFile, pos: usize, framing: Framing, n: u64, decoded: u64 },
    Capture {
        reader: Box<FrameReader>,
        arb: Box<Arbitrator>,
        now: u64,
        frames: u64,
        bytes: u64,
        size: u64,
        /// The captures still to read after this one ([`ReadOptions::then`]), and what
        /// those already read cut short.
        rest: std::collections::VecDeque<PathBuf>,
        cut_before: crate::pcap::CutShort,
        /// The lines asked for ([`ReadOptions::lines`]), for the error of a read that found
        /// none of them.
        lines: Vec<Endpoint>,
        /// Frames of the files already read without a trailer time ([`ReadOptions::timestamps`]).
        trailer_before: u64,
    },
}

/// What the arbitrator releases into: the feed handler, and what is kept of its events.
#[derive(Debug)]
struct Down<'p> {
    feed: FeedHandler<AnyFeed<'p>>,
    kept: Kept,
}

/// The events the filter keeps, waiting to be taken (`pending[taken..]`), and the symbols
/// the feed has named.
#[derive(Debug)]
struct Kept {
    pending: Vec<Event>,
    taken: usize,
    /// Instruments (by symbol).
    filter: Filter,
    /// Kinds of event: one filter, or either of two (actions, types).
    kinds: Option<(Filter, Option<Filter>)>,
    filtering: bool,
    wanted: HashSet<[u8; 8]>,
    /// The symbols asked for, as given, and those of them the feed has named.
    asked: Vec<String>,
    named_wanted: HashSet<[u8; 8]>,
    names: BTreeMap<u32, String>,
    events: u64,
    filtered: u64,
}

impl<'p> EventReader<'p> {
    /// Open `path` as `opts.feed`. OPRA FAST decodes with `fast`, the compiled templates,
    /// which the reader borrows for `'p`.
    pub fn open(
        path: &Path,
        opts: &ReadOptions,
        fast: Option<&'p tickplant_fast::Program>,
    ) -> Result<EventReader<'p>, ReadError> {
        let bad = |reason: String| ReadError::Options { path: path.to_path_buf(), reason };
        opts.book.validate().map_err(|e| bad(e.to_string()))?;
        let kind = ItchInput::for_path(path);
        if kind != ItchInput::Capture && opts.feed != Feed::Itch50 {
            return Err(bad(format!(
                "feed {} is read from captures (.pcap, .pcapng); only itch50 also reads BinaryFILEs",
                opts.feed
            )));
        }
        let feed = match opts.feed {
            Feed::Itch50 => AnyFeed::Itch50(ItchFeed::new(Books::new(opts.book), opts.day)),
            Feed::NyseXdp => AnyFeed::NyseXdp(NyseXdpFeed::with_dialect(Books::new(opts.book), Dialect::Xdp21)),
            Feed::NysePillar => AnyFeed::NyseXdp(NyseXdpFeed::with_dialect(Books::new(opts.book), Dialect::Pillar25)),
            Feed::OpraBinary => AnyFeed::OpraBinary(OpraBinaryFeed::new(opts.max_series)),
            Feed::OpraFast => {
                let Some(program) = fast else {
                    return Err(bad("feed opra-fast needs its FAST templates".into()));
                };
                let options =
                    OpraFastOptions { skip: opts.opra_fast_skip, reset_per_block: true, max_series: opts.max_series };
                AnyFeed::OpraFast(OpraFastFeed::new(program, None, options).map_err(|e| bad(e.to_string()))?)
            }
        };
        // Actions and message types together name the kinds of event wanted: an event of
        // either is taken (`types=["add", "E"]`: every add, and every ITCH E).
        let (mut actions, mut types) = (Filter::all(), Filter::all());
        if !opts.actions.is_empty() {
            actions = actions.actions(opts.actions.iter().copied());
        }
        if !opts.types.is_empty() {
            types = types.types(opts.types.iter().copied());
        }
        let kinds = match (opts.actions.is_empty(), opts.types.is_empty()) {
            (true, true) => None,
            (false, true) => Some((actions, None)),
            (true, false) => Some((types, None)),
            (false, false) => Some((actions, Some(types))),
        };
        let mut filter = Filter::all();
        let wanted: HashSet<[u8; 8]> = opts.symbols.iter().map(|s| itch50::stock(s)).collect();
        if !wanted.is_empty() {
            // No instrument until the feed names one of the symbols.
            filter = filter.instruments([]);
        }
        let kept = Kept {
            pending: Vec::new(),
            taken: 0,
            filtering: !filter.takes_all() || kinds.is_some(),
            filter,
            kinds,
            wanted,
            asked: opts.symbols.clone(),
            named_wanted: HashSet::new(),
            names: BTreeMap::new(),
            events: 0,
            filtered: 0,
        };
        let down = Down { feed: FeedHandler::new(feed), kept };
        let src = if kind == ItchInput::Capture {
            let mut reader = FrameReader::open(path)?;
            reader.set_time_source(opts.timestamps);
            if reader.is_binary_file() && opts.feed != Feed::Itch50 {
                return Err(bad(format!("{}: an ITCH 5.0 BinaryFILE, not {:?} data", path.display(), opts.feed)));
            }
            let seq = Sequencer::new(opts.sequencer.clone().unwrap_or_else(|| opts.feed.sequencer()))
                .map_err(|e| bad(e.to_string()))?;
            if opts.lines.len() > 2 {
                return Err(bad(format!(
                    "{} lines given: one (a line of the capture) or two (the A and B lines of one feed)",
                    opts.lines.len()
                )));
            }
            let two = opts.lines.len() == 2;
            let cfg = ArbConfig {
                inputs: if two { 2 } else { 1 },
                low_latency: false,
                high_reliability: true,
                policy: Policy::Time { timeout_ns: READ_WINDOW_NS },
                input_accept: opts.lines.iter().map(|&e| Some(e)).collect(),
                ..ArbConfig::default()
            };
            let mut arb = Arbitrator::new(cfg, seq).map_err(|e| bad(e.to_string()))?;
            for i in 0..arb.config().inputs {
                arb.set_link(i, reader.link_type());
            }
            // The files after the first are captures, there now: a mistake is told before
            // the read, not after the first file.
            for p in &opts.then {
                let capture = crate::pcap::is_capture(p)?;
                if !capture {
                    return Err(bad(format!(
                        "{}: not a capture (pcap or pcapng) to read after the first",
                        p.display()
                    )));
                }
            }
            let size = std::iter::once(path)
                .chain(opts.then.iter().map(PathBuf::as_path))
                .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
                .sum();
            Src::Capture {
                reader: Box::new(reader),
                arb: Box::new(arb),
                now: 0,
                frames: 0,
                bytes: 0,
                size,
                rest: opts.then.iter().cloned().collect(),
                cut_before: Default::default(),
                lines: opts.lines.clone(),
                trailer_before: 0,
            }
        } else {
            if !opts.then.is_empty() {
                return Err(bad("files to read after the first are captures; a BinaryFILE is read alone".into()));
            }
            if !opts.lines.is_empty() {
                return Err(bad("lines name a capture's destinations; a BinaryFILE has none".into()));
            }
            let data = open_whole(path)?.ok_or_else(|| bad("not a BinaryFILE".into()))?;
            let asked = if opts.infer_length { Framing::InferLength } else { Framing::LengthPrefixed };
            let framing = crate::binaryfile::framing_for(&data, asked);
            Src::Whole { data, pos: 0, framing, n: 0, decoded: 0 }
        };
        let day_unused = opts.feed != Feed::Itch50 && matches!(opts.day, SessionDay::Midnight(_));
        let name = match opts.then.len() {
            0 => path.display().to_string(),
            n => format!("{} and {n} captures after it", path.display()),
        };
        Ok(EventReader { path: path.to_path_buf(), read_as: opts.feed, src, down, done: false, day_unused, name })
    }

    /// Append at most `max` more events to `out`; 0 at the end of the file.
    pub fn read(&mut self, max: usize, out: &mut Vec<Event>) -> Result<usize, ReadError> {
        let mut n = 0;
        while n < max {
            let kept = &mut self.down.kept;
            if kept.taken == kept.pending.len() {
                kept.pending.clear();
                kept.taken = 0;
                if self.done {
                    break;
                }
                self.fill()?;
                continue;
            }
            let k = (kept.pending.len() - kept.taken).min(max - n);
            out.extend_from_slice(&kept.pending[kept.taken..kept.taken + k]);
            kept.taken += k;
            n += k;
        }
        Ok(n)
    }

    /// Every event left, appended to `out`.
    pub fn read_all(&mut self, out: &mut Vec<Event>) -> Result<usize, ReadError> {
        self.read(usize::MAX, out)
    }

    /// Hand every event left to `f`, a chunk at a time (the reader's own chunks: no copy).
    /// `f` stops the read by returning false.
    pub fn for_each_chunk(&mut self, mut f: impl FnMut(&[Event]) -> bool) -> Result<(), ReadError> {
        loop {
            let k = &mut self.down.kept;
            if k.taken < k.pending.len() {
                let go = f(&k.pending[k.taken..]);
                k.pending.clear();
                k.taken = 0;
                if !go {
                    return Ok(());
                }
            }
            if self.done {
                return Ok(());
            }
            self.fill()?;
        }
    }

    /// What the read should warn of that is not an error: frames the capture cut short;
    /// ITCH times counted from 1970-01-01 (no day given, none to tell), or put on the day
    /// packets were received hours after their messages' times (a replay).
    pub fn warnings(&self) -> Vec<String> {
        let path = self.name.clone();
        let mut w = Vec::new();
        if let Src::Capture { reader, cut_before, trailer_before, frames, .. } = &self.src {
            let mut cut = reader.cut_short();
            cut.frames += cut_before.frames;
            cut.kept_max = cut.kept_max.max(cut_before.kept_max);
            w.extend(cut.warning(&path));
            // Packets of the protocol whose messages all failed: most likely another feed's
            // (a short capture of adds whose symbols it never maps fails so too: a warning).
            let st = self.stats();
            if self.done && st.messages > 0 && st.decoded == 0 {
                w.push(format!(
                    "{path}: {} of its frames read as packets of {}, but none of their {} messages decoded: a \
                     capture of another feed? (feed=, --feed: itch50, nyse-xdp, nyse-pillar, opra-binary, opra-fast)",
                    st.frames - st.other_frames,
                    self.read_as,
                    st.messages
                ));
            }
            let missing = trailer_before + reader.trailer_missing();
            if missing > 0 {
                w.push(format!(
                    "{path}: {missing} of its {frames} frames had no MetaWatch trailer time (timestamps=\"metawatch\"): \
                     their ts_recv is the capture's own"
                ));
            }
        }
        if self.day_unused {
            w.push(format!(
                "{path}: the trading day given is for ITCH (its times count from the day's midnight); \
                 {}'s event times do not use it",
                self.read_as
            ));
        }
        if let AnyFeed::Itch50(f) = self.feed() {
            match (f.session_midnight(), f.day_lag_ns()) {
                (None, _) if self.stats().decoded > 0 => w.push(no_day_warning(&path)),
                // An hour after their times, or a second before: not a live capture's clock.
                (Some(m), Some(lag)) if !(-1_000_000_000..=3_600_000_000_000).contains(&lag) => w.push(format!(
                    "{path}: packets were received {} {} their messages' times (a replay, or a capture \
                     clock that is off): ts_event is put on {}; if the messages are of another day, give \
                     it (--date, date=, [source] date)",
                    span(lag.unsigned_abs()),
                    if lag < 0 { "before" } else { "after" },
                    tickplant_core::itch::eastern_date(m)
                )),
                _ => {}
            }
        }
        w
    }
    /// ITCH: the trading day its times count from ("YYYY-MM-DD", US Eastern), given or
    /// told from the capture; `None` for another feed, or while no day is known.
    pub fn session_date(&self) -> Option<String> {
        match self.feed() {
            AnyFeed::Itch50(f) => f.session_midnight().map(tickplant_core::itch::eastern_date),
            _ => None,
        }
    }
    /// The symbols the feed has named so far, by instrument id (OPRA: each series' root).
    pub fn symbols(&self) -> &BTreeMap<u32, String> {
        &self.down.kept.names
    }
    /// The symbols asked for (`ReadOptions::symbols`) that the feed has not named so far:
    /// after a whole read, most likely typos, which no event can match.
    pub fn unnamed(&self) -> Vec<String> {
        let k = &self.down.kept;
        k.asked.iter().filter(|s| !k.named_wanted.contains(&itch50::stock(s))).cloned().collect()
    }
    pub fn stats(&self) -> ReadStats {
        let k = &self.down.kept;
        let gaps = self.down.feed.gaps();
        let mut st = ReadStats {
            events: k.events,
            filtered: k.filtered,
            gaps: gaps.len() as u64,
            messages_lost: gaps.iter().map(|g| g.messages).sum(),
            ..ReadStats::default()
        };
        match &self.src {
            Src::Capture { reader, arb, frames, cut_before, .. } => {
                st.cut_short_frames = reader.cut_short().frames + cut_before.frames;
                let f = self.down.feed.stats();
                let inputs = arb.stats().inputs;
                let sum = |f: fn(&InputStats) -> u64| inputs.iter().map(f).sum::<u64>();
                // With two lines every frame went to both inputs: one of a line's is other
                // on the other line's input, and a frame of neither is other on both.
                let other =
                    if arb.config().inputs == 2 { sum(|i| i.other).saturating_sub(*frames) } else { sum(|i| i.other) };
                (st.frames, st.other_frames, st.duplicates, st.late) =
                    (*frames, other, sum(|i| i.duplicates), sum(|i| i.late));
                (st.packets, st.messages, st.decoded, st.undecodable) =
                    (f.packets_in, f.messages_in, f.decoded, f.undecodable);
            }
            Src::Whole { n, decoded, .. } => {
                (st.messages, st.decoded, st.undecodable) = (*n, *decoded, *n - *decoded);
            }
        }
        st
    }
    /// Each instrument named so far as one symbol: an option series' own (root, expiration,
    /// put or call, strike: [`AnyFeed::series_symbol`]), every other feed's symbol.
    pub fn instrument_symbols(&self) -> BTreeMap<u32, String> {
        let feed = self.feed();
        self.symbols().iter().map(|(&id, s)| (id, feed.series_symbol(id).unwrap_or_else(|| s.clone()))).collect()
    }
    /// The feed handler: its books, series state and counters as the read left them.
    pub fn feed(&self) -> &AnyFeed<'p> {
        self.down.feed.decoder()
    }
    pub fn gaps(&self) -> &[GapReport] {
        self.down.feed.gaps()
    }
    /// The feed the file is read as.
    pub fn read_as(&self) -> Feed {
        self.read_as
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The lines asked for (none: the capture's first destination of the feed).
    fn lines(&self) -> Vec<Endpoint> {
        match &self.src {
            Src::Capture { lines, .. } => lines.clone(),
            Src::Whole { .. } => Vec::new(),
        }
    }
    /// Bytes read so far and the file's size, for progress (captures: frames' bytes).
    pub fn progress(&self) -> (u64, u64) {
        match &self.src {
            Src::Whole { data, pos, .. } => (*pos as u64, data.len() as u64),
            Src::Capture { bytes, size, .. } => ((*bytes).min(*size), *size),
        }
    }

    /// Decode the next stretch of the file into `pending`.
    fn fill(&mut self) -> Result<(), ReadError> {
        match &mut self.src {
            Src::Whole { data, pos, framing, n, decoded } => {
                let mut batch = EventBatch::default();
                let end = data.len();
                let mut k = 0;
                while k < FILL_MESSAGES && *pos < end {
                    match frame_at(&data[*pos..], *framing) {
                        Ok(Some((hdr, total))) => {
                            *n += 1;
                            let m = &data[*pos + hdr..*pos + total];
                            *pos += total;
                            k += 1;
                            let AnyFeed::Itch50(f) = self.down.feed.decoder_mut() else {
                                unreachable!("a BinaryFILE is read as ITCH only (checked at open)")
                            };
                            *decoded += u64::from(f.decode_message(m, 0, *n, &mut batch));
                        }
                        Ok(None) => {
                            return Err(PcapError {
                                path: self.path.clone(),
                                frame: None,
                                offset: Some(*pos as u64),
                                reason: format!(
                                    "the file ends inside message {} ({} bytes left over)",
                                    *n + 1,
                                    end - *pos
                                ),
                            }
                            .into())
                        }
                        Err(e) => {
                            let hint = if *framing == Framing::LengthPrefixed {
                                " (if the file's length prefixes are not to be trusted, read it inferring each length from the type: --infer-length, infer_length=True)"
                            } else {
                                ""
                            };
                            return Err(PcapError {
                                path: self.path.clone(),
                                frame: None,
                                offset: Some((*pos + e.offset()) as u64),
                                reason: format!("message {}: {e}{hint}", *n + 1),
                            }
                            .into());
                        }
                    }
                }
                self.down.named();
                for e in batch.events() {
                    self.down.kept.take(e);
                }
                if *pos >= end {
                    self.done = true;
                }
            }
            Src::Capture { reader, arb, now, frames, bytes, rest, cut_before, trailer_before, .. } => {
                let start = self.down.kept.pending.len();
                // Frames until some events are waiting (or the file ends).
                while self.down.kept.pending.len() == start {
                    let Some(frame) = reader.next_frame()? else {
                        if let Some(next) = rest.pop_front() {
                            // The next file of the stream: the arbitrator, the feed and
                            // its books go on; errors name this file from now on.
                            let mut r = FrameReader::open(&next)?;
                            r.set_time_source(reader.time_source());
                            *trailer_before += reader.trailer_missing();
                            let cut = reader.cut_short();
                            cut_before.frames += cut.frames;
                            cut_before.kept_max = cut_before.kept_max.max(cut.kept_max);
                            for i in 0..arb.config().inputs {
                                arb.set_link(i, r.link_type());
                            }
                            let before = std::mem::replace(&mut self.path, next);
                            **reader = r;
                            // The next file must go on from this one: its first frame is
                            // checked against where this one ended.
                            let Some(first) = reader.next_frame()? else { continue };
                            if first.ts_ns.saturating_add(1_000_000_000) < *now {
                                return Err(PcapError {
                                    path: self.path.clone(),
                                    frame: Some(1),
                                    offset: None,
                                    reason: format!(
                                        "starts {} before {} ends: captures read one after another go in \
                                         time order (a rotated capture's files in the order of their names)",
                                        span(*now - first.ts_ns),
                                        before.display()
                                    ),
                                }
                                .into());
                            }
                            frame_in(first, now, frames, bytes, arb, &mut self.down);
                            if let Some(c) = arb.destination_conflict() {
                                return Err(conflict(&self.path, reader.frames_read(), c));
                            }
                            continue;
                        }
                        arb.flush(*now);
                        arb.drain(&mut self.down);
                        self.done = true;
                        break;
                    };
                    frame_in(frame, now, frames, bytes, arb, &mut self.down);
                    if let Some(c) = arb.destination_conflict() {
                        return Err(conflict(&self.path, reader.frames_read(), c));
                    }
                }
            }
        }
        // Not one frame of the feed in the whole read: the wrong feed named, or a line the
        // capture does not hold. Said, rather than an empty result.
        if self.done {
            let st = self.stats();
            if st.frames > 0 && st.other_frames == st.frames {
                return Err(nothing_of_the_feed(&self.path, self.read_as, &self.lines(), st.frames));
            }
        }
        Ok(())
    }
}

/// One frame of a capture into the arbitrator (both inputs, with two lines), counted.
fn frame_in(
    frame: crate::pcap::Frame<'_>,
    now: &mut u64,
    frames: &mut u64,
    bytes: &mut u64,
    arb: &mut Arbitrator,
    down: &mut Down<'_>,
) {
    *frames += 1;
    // A classic pcap record: 16 bytes of header, then the frame.
    *bytes += 16 + frame.data.len() as u64;
    *now = (*now).max(frame.ts_ns);
    arb.process(*now, 0, frame.data, down);
    if arb.config().inputs == 2 {
        // Two lines given (`ReadOptions::lines`): each line's input takes its own
        // destination's packets and filters the other's.
        arb.process(*now, 1, frame.data, down);
    }
}

/// The error of a read none of whose frames was a packet of the feed (to the lines asked
/// for): what the capture's frames were instead, and what to do.
#[cold]
fn nothing_of_the_feed(path: &Path, feed: Feed, lines: &[Endpoint], frames: u64) -> ReadError {
    let protocol = match feed {
        Feed::Itch50 => "MoldUDP64",
        Feed::NyseXdp | Feed::NysePillar => "XDP",
        Feed::OpraBinary => "OPRA binary blocks",
        Feed::OpraFast => "OPRA FAST blocks",
    };
    // The capture's UDP destinations, most frequent first (a look at its first frames).
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    if let Ok(mut r) = FrameReader::open(path) {
        let link = r.link_type();
        while let Ok(Some(f)) = r.next_frame() {
            if let Ok((_, ip, port)) = tickplant_core::seq::udp_payload_and_destination(link, f.data) {
                *seen.entry(format!("{}:{port}", std::net::Ipv4Addr::from(ip))).or_default() += 1;
            }
            if r.frames_read() >= 1_000_000 {
                break;
            }
        }
    }
    let mut dests: Vec<(String, u64)> = seen.into_iter().collect();
    dests.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let udp: u64 = dests.iter().map(|d| d.1).sum();
    let listed = dests.iter().take(4).map(|(d, n)| format!("{d} ({n})")).collect::<Vec<_>>().join(", ");
    let more = if dests.len() > 4 { format!(" and {} more", dests.len() - 4) } else { String::new() };
    let reason = if udp == 0 {
        format!("none of its {frames} frames is a UDP datagram (IPv4, unfragmented): no packet of {feed} to read")
    } else if !lines.is_empty() {
        let asked = lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ");
        format!(
            "none of its {frames} frames holds a packet of {feed} to {asked} (the lines asked for): its UDP \
             datagrams go to {listed}{more}"
        )
    } else {
        format!(
            "none of its {frames} frames holds a packet of {feed}: its UDP datagrams (to {listed}{more}) do not \
             read as {protocol}. A capture of another feed? (feed=, --feed: itch50, nyse-xdp, nyse-pillar, \
             opra-binary, opra-fast)"
        )
    };
    PcapError { path: path.to_path_buf(), frame: None, offset: None, reason }.into()
}

/// The error of a capture holding packets to a second destination, which names both and
/// the ways to read them.
fn conflict(path: &Path, frame: u64, c: tickplant_core::arb::DestinationConflict) -> ReadError {
    PcapError {
        path: path.to_path_buf(),
        frame: Some(frame),
        offset: None,
        reason: format!(
            "well-formed packets of the protocol to two destinations, {a} (the first) and \
             {b}: name the line to read (lines=[\"{a}\"] in Python, --lines {a}), or give \
             both, the A and B lines of one feed, to read them arbitrated \
             (lines=[\"{a}\", \"{b}\"], --lines {a},{b})",
            a = c.first,
            b = c.second
        ),
    }
    .into()
}

/// An ITCH read or run with no day given and none to tell (no receive times: a BinaryFILE).
pub fn no_day_warning(input: &str) -> String {
    format!(
        "{input}: no receive times to tell the trading day from, and no day given: ts_event counts \
         from 1970-01-01 (give the day: --date, date=, [source] date)"
    )
}

/// A span of time in the unit a person would say it in.
fn span(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    match s {
        s if s < 120.0 => format!("{s:.1} seconds"),
        s if s < 7_200.0 => format!("{:.1} minutes", s / 60.0),
        s => format!("{:.1} hours", s / 3_600.0),
    }
}

/// Messages of a BinaryFILE decoded per fill.
const FILL_MESSAGES: usize = 4096;

impl Down<'_> {
    /// Learn the instruments named since the last call.
    fn named(&mut self) {
        while let Some((id, key)) = self.feed.decoder_mut().take_named() {
            let k = &mut self.kept;
            k.names.insert(id, String::from_utf8_lossy(itch50::trim_stock(&key)).into_owned());
            if k.wanted.contains(&key) {
                k.named_wanted.insert(key);
                k.filter = std::mem::take(&mut k.filter).instruments([id]);
            }
        }
    }
}

impl Kept {
    #[inline]
    fn take(&mut self, e: &Event) {
        let kind = match &self.kinds {
            None => true,
            Some((a, None)) => a.matches(e),
            Some((a, Some(t))) => a.matches(e) || t.matches(e),
        };
        if !self.filtering || (kind && self.filter.matches(e)) {
            self.pending.push(*e);
            self.events += 1;
        } else {
            self.filtered += 1;
        }
    }
}

impl ArbSink for Down<'_> {
    fn ll(&mut self, _forwarded: &Released<'_>) {}
    fn hr(&mut self, r: &Released<'_>) {
        let payload = r.frame.get(usize::from(r.payload_offset)..).unwrap_or_default();
        let p = FeedPacket { payload, seq: r.seq, count: r.count, arrival_ns: r.arrival_ns, prefetched: false };
        self.feed.handle_packet(&p);
        self.named();
        // The batch is the feed handler's: kept events are copied out before the next packet.
        for e in self.feed.events() {
            self.kept.take(e);
        }
    }
    fn gap(&mut self, g: &GapReport) {
        self.feed.handle_gap(g);
        self.kept.pending.push(gap_event(g));
        self.kept.events += 1;
    }
}

//! The feed handler, sans IO: what the arbitrator releases in (packets and gap reports, with
//! their times), normalized events out, with the books or per-series state the feed keeps.
//!
//! A [`FeedDecoder`] turns one packet's payload into [`Event`]s and keeps what the feed's
//! state is (ITCH: order books and the symbol directory, [`ItchFeed`]; OPRA FAST: the
//! series table and each series' latest quote, [`OpraFastFeed`]). It is where a new feed
//! plugs in. [`FeedHandler`] drives one: it counts every message into exactly one outcome
//! (`messages_in == decoded + undecodable`), flags the last event of each packet, and keeps
//! the gaps it was told of.
//!
//! No threads, clocks, files or sockets here: the same value runs under a capture replay, a
//! live socket or Python, and the same input gives the same events. It allocates only when
//! a packet holds more events than any before it (the batch's slots are kept).

use std::collections::BTreeMap;

use tickplant_fast::{opra_block, Decoder as FastDecoder, Message as FastMessage, NativeKernels, Program};
use tickplant_wire::moldudp64;

use crate::arb::GapReport;
use crate::book::Books;
use crate::event::{flags, Bbo, Event};
use crate::itch::{self, SessionDay, SymbolDirectory};
use crate::opra_fast::{OpraFast, OpraFastStats};

/// A packet as the arbitrator released it, as a feed handler reads it.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The UDP payload (the protocol's header and its messages).
    pub payload: &'a [u8],
    /// Sequence number of its first message, and its message count, as released.
    pub seq: u64,
    pub count: u32,
    /// When it arrived (the events' `ts_recv`).
    pub arrival_ns: u64,
    /// The caller has already asked for the memory its messages will touch
    /// ([`FeedDecoder::prefetch`], from [`itch_order_hints`]); otherwise the decoder asks
    /// for all of it before the first message.
    pub prefetched: bool,
}

/// What a decoder made of one packet: every message counted once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Messages the packet held (or announced).
    pub messages: u64,
    /// Decoded into events.
    pub decoded: u64,
    /// Could not be decoded (damaged, unknown, or announced and missing).
    pub undecodable: u64,
}

/// Turns packets of one feed into normalized events.
pub trait FeedDecoder {
    /// The feed's name as configs and reports say it (`itch50`, `opra-fast`).
    fn feed(&self) -> &'static str;
    /// Decode one packet, appending its events to `out`.
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded;
    /// The stream lost messages: state from before the gap no longer holds.
    fn gap(&mut self, g: &GapReport);
    /// An instrument named since the last call, with its symbol as the feed sends it (space
    /// padded): symbol subscriptions may now take it. `None` when there is no more.
    fn take_named(&mut self) -> Option<(u32, [u8; 8])>;
    /// An instrument's best bid and offer now, and its symbol (zeros when not named).
    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]);
    /// Ask for the memory a message whose [`itch::order_hint`] is `hint` will touch.
    #[inline(always)]
    fn prefetch(&self, _hint: u64) {}
    /// Whether [`itch_order_hints`] means something for this feed's packets.
    fn wants_order_hints(&self) -> bool {
        false
    }
    /// Whether [`FeedDecoder::market`] answers from this feed's own state (false: an ITCH
    /// stream without books, whose market is the other stream's books).
    fn keeps_market(&self) -> bool {
        true
    }
}

/// A packet's events, decoded in place: the slots stay allocated and written from one
/// packet to the next, so that a message is decoded straight into its slot (see
/// [`itch::decode_into`]) with no copy and no clearing.
#[derive(Debug, Default)]
pub struct EventBatch {
    slots: Vec<Event>,
    len: usize,
}

impl EventBatch {
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// The next slot, to be written whole and then kept by [`EventBatch::commit`] (or left
    /// for the next event).
    #[inline(always)]
    pub fn slot(&mut self) -> &mut Event {
        if self.len == self.slots.len() {
            self.grow(1);
        }
        &mut self.slots[self.len]
    }
    #[inline(always)]
    pub fn commit(&mut self) {
        self.len += 1;
    }
    #[inline]
    pub fn push(&mut self, e: Event) {
        *self.slot() = e;
        self.commit();
    }
    /// Push two events with one check for room (a quote's two sides).
    #[inline(always)]
    pub fn push_pair(&mut self, a: Event, b: Event) {
        if self.len + 2 > self.slots.len() {
            self.grow(2);
        }
        if let Some([x, y]) = self.slots.get_mut(self.len..self.len + 2) {
            *x = a;
            *y = b;
        }
        self.len += 2;
    }
    #[cold]
    fn grow(&mut self, n: usize) {
        self.slots.resize(self.len + n, Event::default());
    }
    #[inline]
    pub fn events(&self) -> &[Event] {
        &self.slots[..self.len]
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline]
    pub fn last_mut(&mut self) -> Option<&mut Event> {
        self.slots[..self.len].last_mut()
    }
}

/// The feed handler's counters. `messages_in == decoded + undecodable`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedStats {
    pub packets_in: u64,
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
}

/// One stream's feed handler: packets and gaps in, events out.
#[derive(Debug)]
pub struct FeedHandler<D> {
    decoder: D,
    batch: EventBatch,
    stats: FeedStats,
    gaps: Vec<GapReport>,
}

impl<D: FeedDecoder> FeedHandler<D> {
    pub fn new(decoder: D) -> Self {
        FeedHandler { decoder, batch: EventBatch::default(), stats: FeedStats::default(), gaps: Vec::new() }
    }

    /// Decode one released packet; its events (the last flagged
    /// [`flags::LAST_IN_PACKET`]) are [`FeedHandler::events`] until the next packet.
    #[inline]
    pub fn handle_packet(&mut self, p: &Packet<'_>) {
        self.stats.packets_in += 1;
        self.batch.clear();
        let d = self.decoder.decode(p, &mut self.batch);
        self.stats.messages_in += d.messages;
        self.stats.decoded += d.decoded;
        self.stats.undecodable += d.undecodable;
        if let Some(last) = self.batch.last_mut() {
            last.flags |= flags::LAST_IN_PACKET;
        }
    }

    /// Decode a packet that is not the stream's (a snapshot's messages): its events are
    /// [`FeedHandler::events`] as for a packet, but it is not counted in the stream's stats;
    /// what it decoded is returned for the caller to count.
    pub fn load_packet(&mut self, p: &Packet<'_>) -> Decoded {
        self.batch.clear();
        let d = self.decoder.decode(p, &mut self.batch);
        if let Some(last) = self.batch.last_mut() {
            last.flags |= flags::LAST_IN_PACKET;
        }
        d
    }

    /// A gap in the stream this handler reads.
    pub fn handle_gap(&mut self, g: &GapReport) {
        self.decoder.gap(g);
        self.gaps.push(*g);
    }

    /// The last packet's events.
    #[inline]
    pub fn events(&self) -> &[Event] {
        self.batch.events()
    }
    #[inline]
    pub fn stats(&self) -> FeedStats {
        self.stats
    }
    /// Every gap so far, in order.
    pub fn gaps(&self) -> &[GapReport] {
        &self.gaps
    }
    #[inline]
    pub fn decoder(&self) -> &D {
        &self.decoder
    }
    #[inline]
    pub fn decoder_mut(&mut self) -> &mut D {
        &mut self.decoder
    }
    pub fn into_parts(self) -> (D, FeedStats, Vec<GapReport>) {
        (self.decoder, self.stats, self.gaps)
    }
}

/// Each order a MoldUDP64 payload's message blocks probably name ([`itch::order_hint`]; as
/// many blocks as its header counts and it holds), to `f`; returns how many. A caller that
/// hands packets to another thread finds them as it copies the payload, so that the
/// decoding thread can ask for them some messages ahead. A walk of the blocks with no more
/// checks than it needs to stay in the payload (the decoder checks every message when it
/// reads it): through the wire crate's message iterator it cost the producer about 12
/// instructions a message more (`tickplant bench` run, callgrind).
#[inline]
pub fn itch_order_hints(payload: &[u8], mut f: impl FnMut(u64)) -> u32 {
    let Some(&[hi, lo]) = payload.get(moldudp64::HEADER_LEN - 2..moldudp64::HEADER_LEN) else { return 0 };
    let count = u32::from(u16::from_be_bytes([hi, lo]));
    let mut at = moldudp64::HEADER_LEN;
    let mut n = 0;
    while n < count {
        let Some(&[hi, lo]) = payload.get(at..at + 2) else { break };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        let Some(b) = payload.get(at + 2..at + 2 + len) else { break };
        f(itch::order_hint(b));
        n += 1;
        at += 2 + len;
    }
    n
}

/// The gap record a consumer receives for a gap of the stream it reads: an event of action
/// [`EventAction::Gap`](crate::event::EventAction::Gap) (see there for its fields).
pub fn gap_event(g: &GapReport) -> Event {
    Event {
        ts_recv: g.at_ns,
        ts_event: g.at_ns,
        sequence: g.first_seq,
        order_id: g.last_seq,
        size: u32::try_from(g.messages).unwrap_or(u32::MAX),
        aux: u64::from(g.reason.code()),
        action: crate::event::EventAction::Gap,
        ..Event::default()
    }
}

/// NASDAQ TotalView-ITCH 5.0 over MoldUDP64, with full-depth order books (`BOOKS`), or
/// without them ([`ItchEvents`], [`ItchFeed::without_books`]) for the stream the books do
/// not follow: those events are flagged [`flags::NO_BOOK`] and carry no book-derived fields.
#[derive(Debug)]
pub struct ItchFeed<const BOOKS: bool = true> {
    /// The books (an empty table of one order when `!BOOKS`).
    books: Books,
    pub dir: SymbolDirectory,
    /// Where ITCH times count from; `infer_day` while it is to be told from the first
    /// packet with a receive time (see [`SessionDay::FromCapture`]).
    midnight_ns: u64,
    infer_day: bool,
    /// How long after its first message's time the packet that told the day came (days
    /// told from the capture).
    day_lag_ns: Option<i64>,
    /// The day is told from the capture (`SessionDay::FromCapture`): told again at each
    /// new session.
    auto_day: bool,
    /// The MoldUDP64 session of the packets so far (zeros before the first). A session is
    /// a trading day: at a new one, every order of the last is gone (ITCH sends no deletes
    /// for them, and its order numbers start again), and the day is told again.
    session: [u8; 10],
    /// New sessions taken on after the first.
    new_sessions: u64,
    by_type: [u64; 256],
    /// Instruments named and not yet taken ([`FeedDecoder::take_named`]).
    named: itch::NamedQueue,
}

/// ITCH 5.0 events without books.
pub type ItchEvents = ItchFeed<false>;

impl ItchFeed<true> {
    /// `day`: where ITCH timestamps count from (a midnight in UNIX ns, or the capture's day).
    pub fn new(books: Books, day: impl Into<SessionDay>) -> Self {
        ItchFeed::with(books, day.into())
    }
}

impl ItchFeed<false> {
    /// Events alone, no books: for the stream the books do not follow.
    pub fn without_books(day: impl Into<SessionDay>) -> Self {
        let none = crate::book::BookConfig { max_orders: 1, max_instruments: 1, ..Default::default() };
        ItchFeed::with(Books::new(none), day.into())
    }
}

impl<const BOOKS: bool> ItchFeed<BOOKS> {
    fn with(books: Books, day: SessionDay) -> Self {
        let (midnight_ns, infer_day) = match day {
            SessionDay::Midnight(m) => (m, false),
            SessionDay::FromCapture => (0, true),
        };
        ItchFeed {
            books,
            dir: SymbolDirectory::new(),
            midnight_ns,
            infer_day,
            day_lag_ns: None,
            auto_day: infer_day,
            session: [0; 10],
            new_sessions: 0,
            by_type: [0; 256],
            named: itch::NamedQueue::default(),
        }
    }
    /// The books (`None` without them).
    pub fn books(&self) -> Option<&Books> {
        BOOKS.then_some(&self.books)
    }
    /// The books (`None` without them) and the symbol directory, taken apart.
    pub fn into_books(self) -> (Option<Books>, SymbolDirectory) {
        (BOOKS.then_some(self.books), self.dir)
    }
    /// Forget every order (a snapshot is about to rebuild the books): see [`Books::reset`].
    pub fn reset_books(&mut self) {
        if BOOKS {
            self.books.reset();
        }
    }
    /// The midnight ITCH times count from (UNIX ns): given, or told from the capture;
    /// `None` while it is still to be told (no packet with a receive time yet: times
    /// count from 1970-01-01).
    pub fn session_midnight(&self) -> Option<u64> {
        (!self.infer_day).then_some(self.midnight_ns)
    }
    /// For a day told from the capture, how long after its first message's time the packet
    /// that told it came (a live capture's: the feed's latency; hours, or negative beyond
    /// the clocks' disagreement: a replay, or another day's messages).
    pub fn day_lag_ns(&self) -> Option<i64> {
        self.day_lag_ns
    }
    /// Tell the session's day from a packet's receive time and its first message's ITCH
    /// time ([`SessionDay::FromCapture`]); nothing when the packet has neither.
    #[cold]
    #[inline(never)]
    fn tell_day(&mut self, pk: &moldudp64::Packet<&[u8]>, arrival_ns: u64) {
        let Some(Ok((_, b))) = pk.messages().next() else { return };
        let Some(ts) = b.get(5..11) else { return };
        let ts = ts.iter().fold(0u64, |t, &x| t << 8 | u64::from(x));
        if let Some((m, lag)) = itch::implied_midnight(arrival_ns, ts) {
            self.midnight_ns = m;
            // The first day's lag is the one a warning reads.
            self.day_lag_ns = self.day_lag_ns.or(Some(lag));
            self.infer_day = false;
        }
    }
    /// A packet of another MoldUDP64 session than the last (the arbitrator has confirmed
    /// it): a new trading day, whose orders start afresh. A session of zeros is not one (a
    /// snapshot's messages, framed as packets by the pipeline) and changes nothing.
    #[cold]
    #[inline(never)]
    fn new_session(&mut self, s: [u8; 10]) {
        if s == [0; 10] {
            return;
        }
        if self.session != [0; 10] {
            self.new_sessions += 1;
            if BOOKS {
                self.books.reset();
            }
            self.infer_day = self.auto_day;
        }
        self.session = s;
    }
    /// New MoldUDP64 sessions taken on after the first (each a new day: the books were
    /// emptied).
    pub fn new_sessions(&self) -> u64 {
        self.new_sessions
    }
    /// Decoded messages by type letter.
    pub fn by_type(&self) -> BTreeMap<String, u64> {
        (0..256).filter(|&t| self.by_type[t] > 0).map(|t| (((t as u8) as char).to_string(), self.by_type[t])).collect()
    }
}

impl<const BOOKS: bool> ItchFeed<BOOKS> {
    /// Decode one message (exactly its type's length, as a MoldUDP64 block or a BinaryFILE
    /// record gives it) into the next event of `out`, apply it to the books and learn its
    /// symbol: what [`FeedDecoder::decode`] does for each message of a packet, for readers
    /// of files that hold messages without packets. False: not decodable (nothing added).
    #[inline(always)]
    pub fn decode_message(&mut self, b: &[u8], arrival_ns: u64, seq: u64, out: &mut EventBatch) -> bool {
        let books = &mut self.books;
        let e = out.slot();
        // With the books, one dispatch with the book's own folded into it (see
        // `itch::decode_into`); `BOOKS` is a constant, so each kind of feed has its own
        // loop with no test of it.
        if !itch::decode_into(b, arrival_ns, seq, self.midnight_ns, e, |e| {
            if BOOKS {
                books.apply(e);
            } else {
                e.flags |= flags::NO_BOOK;
            }
        }) {
            return false;
        }
        let t = e.msg_type;
        out.commit();
        if matches!(t, b'R' | b'A' | b'F' | b'P') && self.dir.learn_new(b) {
            self.named.push(u32::from(u16::from_be_bytes([b[1], b[2]])));
        }
        self.by_type[usize::from(t)] += 1;
        true
    }
}

impl<const BOOKS: bool> FeedDecoder for ItchFeed<BOOKS> {
    fn feed(&self) -> &'static str {
        "itch50"
    }

    /// Decode the packet's messages and apply each to the books in one dispatch on its
    /// type. Blocks the packet announced but did not hold count as undecodable.
    #[inline]
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
        let announced = u64::from(p.count);
        let mut d = Decoded { messages: announced, ..Decoded::default() };
        let Ok(pk) = moldudp64::Packet::new_checked(p.payload) else {
            d.undecodable = announced;
            return d;
        };
        if pk.session() != self.session {
            self.new_session(pk.session());
        }
        if self.infer_day {
            self.tell_day(&pk, p.arrival_ns);
        }
        // Ask for every order (table slot) the packet's messages name, so that the cache
        // misses overlap, then decode and apply each message.
        if BOOKS && !p.prefetched {
            itch_order_hints(p.payload, |id| self.books.prefetch_order(id));
        }
        let first = out.len();
        let mut seen = 0u64;
        for (k, m) in pk.messages().enumerate() {
            seen += 1;
            let Ok((_, b)) = m else {
                d.undecodable += 1;
                continue;
            };
            if !self.decode_message(b, p.arrival_ns, p.seq + k as u64, out) {
                d.undecodable += 1;
            }
        }
        d.undecodable += announced.saturating_sub(seen);
        d.decoded = (out.len() - first) as u64;
        d
    }

    /// Every book is stale from here on.
    fn gap(&mut self, _g: &GapReport) {
        if BOOKS {
            self.books.mark_all_stale();
        }
    }

    #[inline]
    fn take_named(&mut self) -> Option<(u32, [u8; 8])> {
        if self.named.is_empty() {
            return None;
        }
        self.named.take(&self.dir)
    }

    #[inline]
    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]) {
        let bbo = if BOOKS { self.books.bbo(instrument) } else { Bbo::default() };
        (bbo, self.dir.get(instrument).copied().unwrap_or_default())
    }

    #[inline(always)]
    fn prefetch(&self, hint: u64) {
        if BOOKS {
            self.books.prefetch_order(hint);
        }
    }

    fn wants_order_hints(&self) -> bool {
        BOOKS
    }
    fn keeps_market(&self) -> bool {
        BOOKS
    }
}

/// Why an OPRA FAST feed could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedError {
    /// The templates are not OPRA FAST templates (the mapper's reason).
    NotOpraTemplates(crate::error::InvalidConfig),
    /// The native kernels were made for another program.
    NativeKernels(&'static str),
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeedError::NotOpraTemplates(why) => why.fmt(f),
            FeedError::NativeKernels(why) => write!(f, "native kernels: {why}"),
        }
    }
}

impl std::error::Error for FeedError {}

/// How an [`OpraFastFeed`] reads its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpraFastOptions {
    /// Bytes between the payload's start and the block's SOH (a transport header that
    /// carries the sequence number, for instance).
    pub skip: usize,
    /// A fresh FAST dictionary at every block (self-contained blocks, the safe choice with
    /// arbitration), or one that carries from block to block (reset only at a gap).
    pub reset_per_block: bool,
    /// Room in the series table.
    pub max_series: usize,
}

/// OPRA FAST v2 blocks, mapped to quote, trade and status events; each series' latest
/// quote is its BBO (no order books).
#[derive(Debug)]
pub struct OpraFastFeed<'p> {
    program: &'p Program,
    decoder: FastDecoder<'p>,
    msg: FastMessage,
    mapper: OpraFast,
    options: OpraFastOptions,
    /// Series reported by [`FeedDecoder::take_named`] so far.
    named: u32,
}

impl<'p> OpraFastFeed<'p> {
    /// A feed over `program`'s templates, its kernels run by `native` where given (the
    /// decoder's own otherwise).
    pub fn new(
        program: &'p Program,
        native: Option<&'p dyn NativeKernels>,
        options: OpraFastOptions,
    ) -> Result<Self, FeedError> {
        let mut decoder = FastDecoder::new(program);
        decoder.set_native(native).map_err(FeedError::NativeKernels)?;
        let mapper = OpraFast::new(program, options.max_series).map_err(FeedError::NotOpraTemplates)?;
        Ok(OpraFastFeed { program, decoder, msg: FastMessage::new(), mapper, options, named: 0 })
    }
    /// The mapper's counts.
    #[inline]
    pub fn stats(&self) -> OpraFastStats {
        self.mapper.stats()
    }
    pub fn mapper(&self) -> &OpraFast {
        &self.mapper
    }
}

impl FeedDecoder for OpraFastFeed<'_> {
    fn feed(&self) -> &'static str {
        "opra-fast"
    }

    /// Decode and map one block. Every message it holds is counted: decoded, or
    /// undecodable (a message that fails, and every message after it in its block, whose
    /// dictionary state is then unknown; a block that breaks the framing counts one
    /// undecodable message for its unreadable rest).
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
        if self.options.reset_per_block {
            self.decoder.reset();
        }
        let mut d = Decoded::default();
        let block = p.payload.get(self.options.skip..).unwrap_or_default();
        let mut broken = false;
        for m in opra_block(block) {
            d.messages += 1;
            let body = match m {
                Ok((_, b)) if !broken => b,
                _ => {
                    d.undecodable += 1;
                    broken = true;
                    continue;
                }
            };
            match self.decoder.decode(body, &mut self.msg) {
                Ok(n) if n == body.len() => {}
                _ => {
                    d.undecodable += 1;
                    broken = true;
                    self.decoder.reset();
                    continue;
                }
            }
            d.decoded += 1;
            self.mapper.map(self.program, &self.msg, p.arrival_ns, |e| out.push(e));
        }
        d
    }

    /// Copy and increment state from before the gap no longer holds.
    fn gap(&mut self, _g: &GapReport) {
        self.decoder.reset();
    }

    fn take_named(&mut self) -> Option<(u32, [u8; 8])> {
        if self.named >= self.mapper.series_count() {
            return None;
        }
        self.named += 1;
        Some((self.named, self.mapper.root(self.named)))
    }

    #[inline]
    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]) {
        (self.mapper.bbo(instrument), self.mapper.root(instrument))
    }
}

/// Either feed the pipeline decodes today, dispatched by a match (one predictable branch a
/// packet) rather than through a vtable.
#[derive(Debug)]
pub enum AnyFeed<'p> {
    Itch50(ItchFeed),
    /// ITCH 5.0 for the stream the books do not follow.
    Itch50Events(ItchEvents),
    OpraFast(OpraFastFeed<'p>),
    OpraBinary(crate::opra_binary::OpraBinaryFeed),
    NyseXdp(crate::nyse::NyseXdpFeed),
}

impl AnyFeed<'_> {
    /// An option series' own symbol (OPRA feeds; `None` for other feeds, whose instruments
    /// are named by their symbol alone).
    pub fn series_symbol(&self, instrument: u32) -> Option<String> {
        match self {
            AnyFeed::OpraBinary(f) => f.series(instrument).map(|s| s.symbol()),
            AnyFeed::OpraFast(f) => f.mapper().series(instrument).map(|s| s.symbol()),
            _ => None,
        }
    }
}

macro_rules! any_feed {
    ($self:expr, $d:ident => $e:expr) => {
        match $self {
            AnyFeed::Itch50($d) => $e,
            AnyFeed::Itch50Events($d) => $e,
            AnyFeed::OpraFast($d) => $e,
            AnyFeed::OpraBinary($d) => $e,
            AnyFeed::NyseXdp($d) => $e,
        }
    };
}

#[inline(never)]
fn decode_out_of_line<D: FeedDecoder>(d: &mut D, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
    d.decode(p, out)
}

impl FeedDecoder for AnyFeed<'_> {
    fn feed(&self) -> &'static str {
        any_feed!(self, d => d.feed())
    }
    /// ITCH with books in line (the hot loop the benchmarks time); the others out of line,
    /// so that their code does not crowd it (`tickplant run` on the itch bench's
    /// captures, callgrind).
    #[inline(always)]
    fn decode(&mut self, p: &Packet<'_>, out: &mut EventBatch) -> Decoded {
        match self {
            AnyFeed::Itch50(d) => d.decode(p, out),
            AnyFeed::Itch50Events(d) => decode_out_of_line(d, p, out),
            AnyFeed::OpraFast(d) => decode_out_of_line(d, p, out),
            AnyFeed::OpraBinary(d) => decode_out_of_line(d, p, out),
            AnyFeed::NyseXdp(d) => decode_out_of_line(d, p, out),
        }
    }
    fn gap(&mut self, g: &GapReport) {
        any_feed!(self, d => d.gap(g))
    }
    #[inline]
    fn take_named(&mut self) -> Option<(u32, [u8; 8])> {
        any_feed!(self, d => d.take_named())
    }
    #[inline(always)]
    fn market(&self, instrument: u32) -> (Bbo, [u8; 8]) {
        any_feed!(self, d => d.market(instrument))
    }
    #[inline(always)]
    fn prefetch(&self, hint: u64) {
        any_feed!(self, d => d.prefetch(hint))
    }
    fn wants_order_hints(&self) -> bool {
        any_feed!(self, d => d.wants_order_hints())
    }
    fn keeps_market(&self) -> bool {
        any_feed!(self, d => d.keeps_market())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::BookConfig;
    use crate::event::EventAction;
    use tickplant_wire::itch50;

    /// The walk of a payload's blocks against the wire crate's message iterator and
    /// `itch::order_hint` on each message it yields, for whole payloads, payloads cut
    /// anywhere (a block past the end ends the walk), short messages and empty blocks.
    #[test]
    fn order_hints_match_the_message_iterator() {
        let mut payload = vec![0u8; moldudp64::HEADER_LEN];
        let mut k = 0u8;
        let lens = [36usize, 0, 5, 19, 20, 40, 11, 1, 35];
        for len in lens {
            let msg: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37).wrapping_add(k)).collect();
            moldudp64::push_message(&mut payload, &msg);
            k = k.wrapping_add(1);
        }
        // Blocks past the header's count are not messages: the count says 7 of the 9.
        payload[18..20].copy_from_slice(&7u16.to_be_bytes());
        for cut in moldudp64::HEADER_LEN..=payload.len() {
            let p = &payload[..cut];
            let mut got = Vec::new();
            let n = itch_order_hints(p, |id| got.push(id));
            let want: Vec<u64> = moldudp64::Packet::new_checked(p)
                .expect("a whole header")
                .messages()
                .map_while(|m| m.ok())
                .map(|(_, b)| itch::order_hint(b))
                .collect();
            assert_eq!(got, want, "payload cut at {cut}");
            assert_eq!(n as usize, got.len());
            if cut == payload.len() {
                assert_eq!(got.len(), 7);
            }
        }
        // A header alone, or less: no hints.
        let mut none = Vec::new();
        assert_eq!(itch_order_hints(&payload[..10], |id| none.push(id)), 0);
        assert!(none.is_empty());
    }

    fn add(locate: u16, order: u64, price: u32, stock: &[u8; 8]) -> Vec<u8> {
        let mut m = vec![0u8; itch50::AddOrder::LEN];
        m[0] = b'A';
        m[1..3].copy_from_slice(&locate.to_be_bytes());
        m[11..19].copy_from_slice(&order.to_be_bytes());
        m[19] = b'B';
        m[20..24].copy_from_slice(&100u32.to_be_bytes());
        m[24..32].copy_from_slice(stock);
        m[32..36].copy_from_slice(&price.to_be_bytes());
        m
    }

    /// The trading day told from the capture: from the first packet with a receive time,
    /// and again when a new MoldUDP64 session (the next day) starts.
    #[test]
    fn the_day_is_told_again_at_a_new_session() {
        let books = Books::new(BookConfig { max_orders: 1024, max_instruments: 16, ..BookConfig::default() });
        let mut h = FeedHandler::new(ItchFeed::new(books, SessionDay::FromCapture));
        let days = [itch::midnight_eastern_ns("2026-11-20").unwrap(), itch::midnight_eastern_ns("2026-11-23").unwrap()];
        let at = 10 * 3_600_000_000_000u64; // 10:00
        let mut a = add(3, 7, 1_000_000, b"AAPL    ");
        a[5..11].copy_from_slice(&at.to_be_bytes()[2..]);
        let mut seen = Vec::new();
        for (k, (session, day)) in
            [(b"SESSION001", days[0]), (b"SESSION001", days[0]), (b"SESSION002", days[1])].iter().enumerate()
        {
            let payload = tickplant_wire::build::moldudp64_payload(session, k as u64 + 1, &[&a]);
            let arrival = day + at + 1_000 * (k as u64 + 1);
            h.handle_packet(&Packet {
                payload: &payload,
                seq: k as u64 + 1,
                count: 1,
                arrival_ns: arrival,
                prefetched: false,
            });
            seen.push(h.events()[0].ts_event);
            assert_eq!(h.decoder().session_midnight(), Some(*day));
        }
        assert_eq!(seen, [days[0] + at, days[0] + at, days[1] + at]);
        assert_eq!(h.decoder().day_lag_ns(), Some(1_000));
        // The new session (day) started with empty books: its order 7 is the only one, not
        // a duplicate of the last day's (which ITCH never deleted).
        assert_eq!(h.decoder().new_sessions(), 1);
        let (bbo, _) = h.decoder().market(3);
        assert_eq!((bbo.bid_price, bbo.bid_size), (100_000_000_000, 100));
        // (The one duplicate: the first day's second packet, the same add again.)
        assert_eq!(h.decoder().books().map(|b| b.stats().duplicate_order), Some(1));
        // A snapshot's messages (a session of zeros, as the pipeline frames them) are not a
        // new session: the books they built stay.
        let b = add(3, 9, 1_010_000, b"AAPL    ");
        let snap = tickplant_wire::build::moldudp64_payload(&[0; 10], 0, &[&b]);
        h.handle_packet(&Packet { payload: &snap, seq: 0, count: 1, arrival_ns: days[1] + at, prefetched: false });
        let payload = tickplant_wire::build::moldudp64_payload(b"SESSION002", 2, &[&add(3, 10, 990_000, b"AAPL    ")]);
        h.handle_packet(&Packet { payload: &payload, seq: 2, count: 1, arrival_ns: days[1] + at, prefetched: false });
        assert_eq!(h.decoder().new_sessions(), 1);
        assert_eq!(h.decoder().market(3).0.bid_price, 101_000_000_000);
        // A BinaryFILE's frames (times since midnight, no clock): no day to tell.
        let books = Books::new(BookConfig { max_orders: 16, max_instruments: 16, ..BookConfig::default() });
        let mut f = FeedHandler::new(ItchFeed::new(books, SessionDay::FromCapture));
        let payload = tickplant_wire::build::moldudp64_payload(b"BINARYFILE", 1, &[&a]);
        f.handle_packet(&Packet { payload: &payload, seq: 1, count: 1, arrival_ns: at, prefetched: false });
        assert_eq!((f.decoder().session_midnight(), f.events()[0].ts_event), (None, at));
    }

    /// Every message counted once; books built; the last event flagged; a symbol named once;
    /// a gap makes the books stale.
    #[test]
    fn itch_packets_to_events_and_books() {
        let books = Books::new(BookConfig { max_orders: 1024, max_instruments: 16, ..BookConfig::default() });
        let mut h = FeedHandler::new(ItchFeed::new(books, 0));
        let (a, b) = (add(3, 7, 1_000_000, b"AAPL    "), add(3, 8, 1_010_000, b"AAPL    "));
        let mut payload = tickplant_wire::build::moldudp64_payload(b"SESSION001", 1, &[&a, &b, b"Zjunk"]);
        // Announce one block more than it holds.
        payload[18..20].copy_from_slice(&4u16.to_be_bytes());
        h.handle_packet(&Packet { payload: &payload, seq: 1, count: 4, arrival_ns: 5, prefetched: false });
        let ev = h.events();
        assert_eq!(ev.len(), 2);
        assert!(ev.iter().all(|e| e.action == EventAction::Add && e.instrument_id == 3 && e.ts_recv == 5));
        assert_eq!((ev[0].sequence, ev[1].sequence), (1, 2));
        assert_eq!(ev[1].flags & flags::LAST_IN_PACKET, flags::LAST_IN_PACKET);
        assert_eq!(ev[0].flags & flags::LAST_IN_PACKET, 0);
        let s = h.stats();
        assert_eq!((s.packets_in, s.messages_in, s.decoded, s.undecodable), (1, 4, 2, 2));
        assert_eq!(h.decoder_mut().take_named(), Some((3, *b"AAPL    ")));
        assert_eq!(h.decoder_mut().take_named(), None);
        let (bbo, sym) = h.decoder().market(3);
        assert_eq!((bbo.bid_price, bbo.bid_size, &sym), (101_000_000_000, 100, b"AAPL    "));
        assert_eq!(h.decoder().by_type()["A"], 2);
        let g = GapReport {
            output: crate::OutputId::Hr,
            first_seq: 5,
            last_seq: 6,
            messages: 2,
            reason: crate::GapReason::Timeout,
            at_ns: 9,
        };
        h.handle_gap(&g);
        assert_eq!(h.gaps(), &[g]);
        assert!(h.decoder().books().and_then(|b| b.book(3)).is_some_and(|b| b.is_stale()));
        // A payload that is not even a header: all it announced is undecodable.
        h.handle_packet(&Packet { payload: b"short", seq: 7, count: 3, arrival_ns: 6, prefetched: true });
        assert!(h.events().is_empty());
        let s = h.stats();
        assert_eq!(s.messages_in, s.decoded + s.undecodable);
    }
}

//! The consumers' side: what a ring carries ([`Record`], or a lean slot for consumers that
//! read no market state), and each consumer's thread (counting, CSV and JSON lines, BBOs,
//! strategy matching, trading, your own handler; gap records where each writes).

use super::*;

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
pub(super) trait Slot: Copy + Send + 'static {
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
/// of a run, writes a third less into the rings, and the consumer reads a third less (the
/// decode thread's CPU time on the itch bench's run; docs/perf-log/feed-handler.md).
#[derive(Debug, Clone, Copy)]
pub(super) struct Lean {
    pub(super) event: Event,
    pub(super) published_tsc: u64,
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
pub(super) enum RingTx {
    Full(rtrb::Producer<Record>),
    Lean(rtrb::Producer<Lean>),
}

/// The consumer's end of its ring.
pub(super) enum RingRx {
    Full(rtrb::Consumer<Record>),
    Lean(rtrb::Consumer<Lean>),
}

/// Whether a consumer reads its records' BBO and symbol (`count`, `csv` and `jsonl` do not).
pub(super) fn reads_market(a: &ConsumerAction) -> bool {
    !matches!(a, ConsumerAction::Count | ConsumerAction::Csv(_) | ConsumerAction::Jsonl(_))
}

/// One event as a CSV line (the header's columns) or a JSON line.
pub(super) fn write_event(w: &mut impl Write, e: &Event, json: bool) -> std::io::Result<()> {
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
pub(super) fn write_gap(w: &mut impl Write, e: &Event, json: bool) -> std::io::Result<()> {
    if e.action == EventAction::Trusted {
        // The books trusted again from `sequence` (see `EventAction::Trusted`).
        return if json {
            writeln!(w, "{{\"ts_recv\":{},\"action\":\"trusted\",\"from_seq\":{}}}", e.ts_recv, e.sequence)
        } else {
            writeln!(w, "{},{},{},{},trusted,none,0,0,0,0,0,", e.ts_recv, e.ts_event, e.sequence, e.instrument_id)
        };
    }
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

pub(super) struct ConsumerResult {
    pub(super) received: u64,
    /// Gap records popped.
    pub(super) gaps: u64,
    pub(super) by_action: [u64; 16],
    pub(super) bbo_instruments: u64,
    pub(super) ring: Ticks,
    /// Live runs: ns from the kernel's receive stamp to the consumer, of the timed records.
    pub(super) wire: Option<hdrhistogram::Histogram<u64>>,
    pub(super) cpu_ns: u64,
    pub(super) matching: Option<(MatchReport, Ticks)>,
    pub(super) trading: Option<crate::fixnet::TriggerTradeReport>,
}

/// A matching consumer's state.
pub(super) struct MatchState {
    pub(super) matcher: Matcher,
    pub(super) market: MarketEvents,
    /// Per instrument id, its symbol's key in `market`.
    pub(super) keys: Vec<Option<SymbolKey>>,
    pub(super) ids: Vec<u64>,
    pub(super) out: Option<BufWriter<File>>,
    pub(super) handler: Option<MatchHandler>,
    pub(super) report: MatchReport,
    pub(super) hist: Ticks,
}

impl MatchState {
    pub(super) fn new(spec: &MatchSpec) -> std::io::Result<Self> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let mut matcher = Matcher::with_schema(spec.schema.clone());
        for s in &spec.strategies {
            matcher.insert(s.clone()).map_err(|e| invalid(e.to_string()))?;
        }
        let market = MarketEvents::new(matcher.schema(), &[spec.venue.as_str()]).map_err(|e| invalid(e.to_string()))?;
        let out = match &spec.path {
            Some(p) => Some(BufWriter::with_capacity(1 << 20, create(p)?)),
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

    /// Add a strategy (its text, `ID: predicates`) or remove some (by id) while matching
    /// goes on: what changed, or why nothing did.
    pub(super) fn change(&mut self, add: Option<&str>, remove: &[u64]) -> Result<serde_json::Value, String> {
        if let Some(text) = add {
            // Parsed with a copy of the schema, checked against what market events give, so
            // that a refused strategy leaves everything as it was.
            let mut schema = self.matcher.schema().clone();
            let s = schema.parse_strategy(text, 1).map_err(|e| format!("column {}: {}", e.column, e.reason))?;
            if self.matcher.contains(s.id) {
                return Err(format!("strategy {} is in force: remove it first", s.id));
            }
            let venues: Vec<&str> = self.market.venues().iter().map(String::as_str).collect();
            MarketEvents::new(&schema, &venues).map_err(|e| e.to_string())?;
            let id = s.id;
            *self.matcher.schema_mut() = schema;
            self.matcher.insert(s).map_err(|e| e.to_string())?;
            self.market.refresh(self.matcher.schema()).map_err(|e| e.to_string())?;
            return Ok(serde_json::json!({ "added": [id], "strategies": self.matcher.len() }));
        }
        if let Some(id) = remove.iter().find(|id| !self.matcher.contains(**id)) {
            return Err(format!("no strategy {id} is in force"));
        }
        for id in remove {
            self.matcher.remove(*id);
        }
        Ok(serde_json::json!({ "removed": remove, "strategies": self.matcher.len() }))
    }

    pub(super) fn record(&mut self, i: u64, r: &Record) -> std::io::Result<()> {
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

pub(super) fn consumer_thread<T: Slot>(
    mut rx: rtrb::Consumer<T>,
    action: ConsumerAction,
    symbols: Arc<std::sync::Mutex<SymbolDirectory>>,
    waiter: Waiter,
    live: bool,
    ctl: Option<crate::control::ConsumerControl>,
    mut metrics: Option<RingMetrics>,
) -> std::io::Result<ConsumerResult> {
    let cpu0 = crate::clock::thread_cpu_ns();
    let mut res = ConsumerResult {
        received: 0,
        gaps: 0,
        by_action: [0; 16],
        bbo_instruments: 0,
        ring: Ticks::new(),
        wire: live.then(|| hdrhistogram::Histogram::new_with_max(60_000_000_000, 3).expect("valid bounds")),
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
        ConsumerAction::Csv(p) | ConsumerAction::Jsonl(p) => Some(BufWriter::with_capacity(1 << 20, create(p)?)),
        _ => None,
    };
    if let (ConsumerAction::Csv(_), Some(w)) = (&action, w.as_mut()) {
        writeln!(w, "ts_recv,ts_event,sequence,instrument_id,action,side,price,size,order_id,aux,flags,msg_type")?;
    }
    // Made before the run, so that a path that cannot be written fails it at once.
    let bbo_file = match &action {
        ConsumerAction::Bbo(Some(p)) => Some(create(p)?),
        _ => None,
    };
    let mut bbo: Vec<Option<(Bbo, [u8; 8])>> = Vec::new();
    let handler = match &action {
        ConsumerAction::Handler(h) => Some(h.0.clone()),
        _ => None,
    };
    // Held for the whole run: the handler belongs to this thread alone.
    let mut handler = handler.as_ref().map(|h| h.lock().unwrap_or_else(|p| p.into_inner()));
    let mut idle = 0u32;
    let mut chunks = 0u32;
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
            // Live: the wall clock too, against the events' kernel receive stamps.
            let wall = if live { crate::live::realtime_ns() } else { 0 };
            for slot in first.iter().chain(second) {
                // Counters of two cores can disagree by a few ticks: a negative delay counts as
                // none (the report's lowest value, 1 tick).
                let (e, published_tsc) = slot.stamped();
                if matches!(e.action, EventAction::Gap | EventAction::Trusted) {
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
                    if let Some(h) = res.wire.as_mut() {
                        h.saturating_record(wall.saturating_sub(e.ts_recv).max(1));
                    }
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
            // Commands between chunks: a change holds from the next record on.
            if let Some(c) = &ctl {
                commands(c, res.received, matching.as_mut(), trader.as_mut());
            }
            // The ring's latency for the metrics: a clock read every 64 chunks, not a record.
            chunks = chunks.wrapping_add(1);
            if chunks.is_multiple_of(64) {
                if let Some(m) = metrics.as_mut() {
                    m.maybe_publish(&res.ring);
                }
            }
            continue;
        }
        if let Some(c) = &ctl {
            commands(c, res.received, matching.as_mut(), trader.as_mut());
        }
        // Not on the first idle turns: at full rate a consumer finds its ring empty between
        // most chunks.
        if idle % 16 == 15 {
            if let Some(m) = metrics.as_mut() {
                m.maybe_publish(&res.ring);
            }
        }
        if rx.is_abandoned() && rx.is_empty() {
            break;
        }
        // A consumer pinned to its own core reaches the sleeps only when the feed is quiet.
        idle += 1;
        if let Some(t) = trader.as_mut() {
            t.poll()?;
        }
        waiter.wait(idle, || !rx.is_empty());
    }
    if let Some(m) = metrics.as_mut() {
        m.publish(&res.ring);
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
    if let Some(f) = bbo_file {
        let dir = symbols.lock().map(|d| d.clone()).unwrap_or_default();
        let mut w = BufWriter::new(f);
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

/// Apply the control socket's commands waiting for a consumer; `from_event`: the records it
/// has received, the index of the first one the change holds for.
#[cold]
fn commands(
    c: &crate::control::ConsumerControl,
    from_event: u64,
    matching: Option<&mut MatchState>,
    trader: Option<&mut crate::fixnet::TriggerTrader>,
) {
    use crate::control::ConsumerCommand;
    let Ok(cmd) = c.rx.try_recv() else { return };
    // `changes`: the command changes something (listing the triggers does not).
    let (r, command, reply, changes) = match cmd {
        ConsumerCommand::Strategies { add, remove, command, reply } => {
            let r = match matching {
                Some(m) => m.change(add.as_deref(), &remove),
                None => Err("this consumer matches no strategies (action \"match\" does)".to_string()),
            };
            (r, command, reply, true)
        }
        ConsumerCommand::Triggers { op, command, reply } => {
            let r = match trader {
                Some(t) => t.change_triggers(&op),
                None => Err("this consumer fires no triggers (action \"trade\" does)".to_string()),
            };
            (r, command, reply, op != crate::control::TriggerOp::List)
        }
    };
    let r = r.map(|mut v| {
        v["from_event"] = from_event.into();
        v
    });
    if let (Ok(v), true) = (&r, changes) {
        let at_ns = crate::live::realtime_ns();
        c.control.record(&c.feed, crate::control::ControlRecord { at_ns, command, result: v.to_string() });
    }
    let _ = reply.send(r);
}

/// A consumer's ring latency for the metrics endpoint: its thread publishes what it
/// measured about ten times a second, and at the end.
pub(super) struct RingMetrics {
    pub(super) hub: Arc<crate::metrics::Hub>,
    pub(super) feed: String,
    pub(super) consumer: String,
    pub(super) clock: TscClock,
    pub(super) next: Instant,
}

impl RingMetrics {
    fn maybe_publish(&mut self, ring: &Ticks) {
        if Instant::now() >= self.next {
            self.publish(ring);
        }
    }
    #[cold]
    fn publish(&mut self, ring: &Ticks) {
        self.next = Instant::now() + crate::metrics::PUBLISH_EVERY;
        let mut c = self.clock;
        c.finish();
        self.hub.publish_ring(&self.feed, &self.consumer, crate::metrics::Quantiles::of(ring, c.ns_per_tick()));
    }
}

/// A consumer's output file, made; an error names it.
fn create(p: &std::path::Path) -> std::io::Result<File> {
    File::create(p).map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", p.display())))
}

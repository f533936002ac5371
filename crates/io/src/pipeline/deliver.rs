//! Delivery: the stream's feed handler (decode and books, `tickplant_core::feed`), then
//! each consumer's filter and its ring; and the sink the arbitrator releases into on the
//! producer thread when every stage runs there.

use super::*;

pub(super) struct Out {
    pub(super) name: String,
    /// What it subscribes to (the control socket changes it); `filter` is built from it.
    pub(super) sub: super::subscribe::Subscription,
    pub(super) filter: Filter,
    pub(super) ring: RingTx,
    /// The packet's events this consumer takes (indices), written into the ring together
    /// once the packet is done: one update of the ring's write index a packet instead of one
    /// a record, so the cache line the consumer polls moves between the cores once a
    /// packet, not once a record (`cargo bench -p tickplant --bench itch`, the run's figure;
    /// docs/perf-log/feed-handler.md has the numbers).
    pub(super) picks: Vec<u32>,
    /// The consumer reads its records' BBO and symbol (`bbo`, `match`, `trade` and your own
    /// handler do; `count`, `csv` and `jsonl` do not, and get them zeroed): an event no such
    /// consumer takes has no BBO looked up.
    pub(super) market: bool,
    pub(super) policy: SlowPolicy,
    /// The stream it reads.
    pub(super) stream: Stream,
    pub(super) matched: u64,
    pub(super) delivered: u64,
    pub(super) dropped: u64,
    pub(super) waits: u64,
    /// Gap records pushed.
    pub(super) gaps: u64,
    /// The consumer thread's (see [`Downstream::ring_consumers`]).
    pub(super) bell: Arc<Bell>,
}

impl RingTx {
    /// Room in the ring in all, and free now.
    pub(super) fn capacity(&self) -> usize {
        match self {
            RingTx::Full(r) => r.buffer().capacity(),
            RingTx::Lean(r) => r.buffer().capacity(),
        }
    }
    pub(super) fn slots(&self) -> usize {
        match self {
            RingTx::Full(r) => r.slots(),
            RingTx::Lean(r) => r.slots(),
        }
    }
}

impl Out {
    /// Write the records of the picked events into the ring, stamped `now`, the moment they
    /// are published: each record built in its slot of the ring, with no copy in between. A
    /// full ring drops what does not fit (counted) or waits for room, as the policy says.
    /// `market`: each event's BBO and symbol, where some consumer reads them (zeros where
    /// none does). `ALL`: the consumer takes every event of the batch (its subscription is
    /// everything), and `picks` is not used.
    pub(super) fn publish<const ALL: bool>(&mut self, now: u64, events: &[Event], market: Option<&[(Bbo, [u8; 8])]>) {
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
    pub(super) fn publish_gap(&mut self, e: &Event) {
        // A push of its own, not `publish_into`: one more instantiation of that made the
        // compiler stop inlining the ring's chunk fill into the hot `publish` (callgrind,
        // `tickplant run` on the itch bench's captures).
        loop {
            let pushed = match &mut self.ring {
                RingTx::Full(r) => r.push(Record::new(e, None, NOT_TIMED)).is_ok(),
                RingTx::Lean(r) => r.push(Lean::new(e, None, NOT_TIMED)).is_ok(),
            };
            if pushed {
                self.gaps += 1;
                return;
            }
            let gone = match &self.ring {
                RingTx::Full(r) => r.is_abandoned(),
                RingTx::Lean(r) => r.is_abandoned(),
            };
            if gone {
                return;
            }
            self.waits += 1;
            std::thread::yield_now();
        }
    }
}

/// [`Out::publish`] into a ring of either kind; returns how many records went in.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn publish_into<T: Slot, const ALL: bool>(
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
pub(super) struct Downstream<'p> {
    /// The HR stream's feed handler.
    pub(super) feed: FeedHandler<AnyFeed<'p>>,
    /// The LL stream's, when some consumer reads it or the books follow it.
    pub(super) ll: Option<FeedHandler<AnyFeed<'p>>>,
    /// The books follow the LL stream.
    pub(super) books_on_ll: bool,
    pub(super) outs: Vec<Out>,
    /// Per event of the batch, its instrument's BBO and symbol (for the events some
    /// consumer takes).
    pub(super) market: Vec<(Bbo, [u8; 8])>,
    /// Some consumer reads the BBO and symbol: without one, `market` is not filled at all
    /// (it took about 25 instructions a message on the decode thread, the run's limit).
    pub(super) any_market: bool,
    /// Decode and book are one stage: each message is decoded and applied in one dispatch.
    pub(super) h_decode_book: Ticks,
    pub(super) h_deliver: Ticks,
    /// Ticks spent downstream of the arbitrator (so the arbitrate stage can leave them out):
    /// counted for timed packets only, so the producer has every packet timed while it
    /// times a frame ([`Feed::timing`]).
    pub(super) spent: u64,
    /// Which packets the stages are timed on.
    pub(super) sampler: Sampler,
    /// Time every packet (the producer is timing the frame that releases them).
    pub(super) time_all: bool,
    /// CPU time of the decode thread, when there is one.
    pub(super) cpu_ns: u64,
    /// The HR stream over time.
    pub(super) timeline: Timeline,
    /// The snapshots loaded (a late join's, a recovery's) and the messages applied again
    /// after one, counted apart from the stream's messages.
    pub(super) snapshot: Option<super::report::SnapshotLoad>,
    /// Recovery of the stale books from snapshots (`[recovery] snapshot`, ITCH, books on HR).
    pub(super) resync: Option<Box<super::resync::Resync>>,
    /// Publish for the metrics endpoint (the hub, the feed's name, the clock for latencies).
    pub(super) metrics: Option<(Arc<crate::metrics::Hub>, String, crate::clock::TscClock)>,
    pub(super) next_publish: std::time::Instant,
    /// HR gaps and messages lost, by reason (its code).
    pub(super) gap_counts: [(u64, u64); tickplant_core::GapReason::ALL.len()],
    /// Commands from the control socket for this side (`snapshot`, `subscribe`).
    pub(super) control: Option<std::sync::mpsc::Receiver<crate::control::DecodeCommand>>,
    /// Every instrument named so far, by symbol (space padded): a subscription's symbols
    /// become its instruments through it.
    pub(super) named: HashMap<[u8; 8], Vec<u32>>,
    /// Per stream (HR, LL), the sequence number after the last packet decoded: where a
    /// subscription changed now starts to hold.
    pub(super) next_seq: [u64; 2],
    /// Where the changes made on this side are recorded (the run's control, the feed).
    pub(super) control_log: Option<(Arc<crate::control::Control>, String)>,
}

impl<'p> Downstream<'p> {
    /// The feed handler of a stream, where the run decodes it.
    #[inline(always)]
    pub(super) fn handler(&mut self, stream: Stream) -> Option<&mut FeedHandler<AnyFeed<'p>>> {
        match stream {
            Stream::Hr => Some(&mut self.feed),
            Stream::Ll => self.ll.as_mut(),
        }
    }

    /// The feed that keeps the books (for the orders to ask for ahead).
    #[inline(always)]
    pub(super) fn book_feed(&self) -> &AnyFeed<'p> {
        match (&self.ll, self.books_on_ll) {
            (Some(ll), true) => ll.decoder(),
            _ => self.feed.decoder(),
        }
    }

    /// A gap in a stream the run decodes: the feed's state from before it no longer holds
    /// (every book stale, the FAST dictionary reset), and every consumer of the stream gets
    /// a gap record, in order with its other records.
    pub(super) fn gap(&mut self, g: &GapReport) {
        let stream = Stream::of(g.output);
        if stream == Stream::Hr {
            self.timeline.gap(g.at_ns, g.messages);
        }
        let Some(h) = self.handler(stream) else { return };
        h.handle_gap(g);
        if stream == Stream::Hr {
            tracing::debug!(
                first = g.first_seq,
                last = g.last_seq,
                messages = g.messages,
                reason = g.reason.as_str(),
                "gap"
            );
            let c = &mut self.gap_counts[usize::from(g.reason.code())];
            c.0 += 1;
            c.1 += g.messages;
            if let Some(r) = self.resync.as_deref_mut() {
                r.on_gap(g.first_seq, g.last_seq);
            }
        }
        let e = gap_event(g);
        for o in self.outs.iter_mut().filter(|o| o.stream == stream) {
            o.publish_gap(&e);
        }
    }

    /// Instruments the feed named in the last packet join the subscriptions that name their
    /// symbol.
    #[inline]
    pub(super) fn join_named(&mut self, stream: Stream) {
        while let Some((id, key)) = self.handler(stream).and_then(|h| h.decoder_mut().take_named()) {
            self.join_subscriptions(id, key);
        }
    }

    /// Add instrument `id`, whose symbol is `key` (space padded), to the subscriptions that
    /// name that symbol.
    #[cold]
    pub(super) fn join_subscriptions(&mut self, id: u32, key: [u8; 8]) {
        let ids = self.named.entry(key).or_default();
        if ids.contains(&id) {
            return;
        }
        ids.push(id);
        for o in &mut self.outs {
            if o.sub.symbols.as_ref().is_some_and(|s| s.contains(&key)) {
                o.filter = o.sub.filter(&self.named);
            }
        }
    }

    /// Load a snapshot's messages into the HR stream's feed (its books), delivered to the
    /// stream's consumers as the feed's own events are (with sequence number 0: they are
    /// the state, not the feed's messages). Counted apart: the stream's counts stay the
    /// arbitrator's.
    pub(super) fn load_snapshot(&mut self, snap: &tickplant_core::glimpse::Snapshot, deliver: bool) {
        let mut load = self.snapshot.unwrap_or_default();
        load.seq = snap.next_seq;
        let now = crate::live::realtime_ns();
        let mut payload = Vec::with_capacity(1 << 16);
        let mut msgs = snap.messages.iter().peekable();
        while msgs.peek().is_some() {
            // MoldUDP64 packets of the snapshot's messages, as the decoder reads packets.
            payload.clear();
            payload.extend_from_slice(&[0u8; 20]);
            let mut n = 0u16;
            while let Some(m) = msgs.next_if(|_| n < 1024) {
                payload.extend_from_slice(&(m.len() as u16).to_be_bytes());
                payload.extend_from_slice(m);
                n += 1;
            }
            payload[18..20].copy_from_slice(&n.to_be_bytes());
            let p = FeedPacket { payload: &payload, seq: 0, count: u32::from(n), arrival_ns: now, prefetched: false };
            let d = self.feed.load_packet(&p);
            load.messages += d.messages;
            load.decoded += d.decoded;
            load.undecodable += d.undecodable;
            self.join_named(Stream::Hr);
            if deliver {
                self.deliver(Stream::Hr, false);
            }
        }
        self.snapshot = Some(load);
    }

    /// While the books are stale and a snapshot is on its way: keep the packet, and
    /// rebuild the books once the snapshot can be used (see `resync`).
    #[cold]
    fn resync_packet(&mut self, p: &FeedPacket<'_>) {
        let Some(r) = self.resync.as_deref_mut() else { return };
        r.on_packet(p.seq, p.count, p.arrival_ns, p.payload);
        self.resync_poll();
    }

    /// Answer the control socket's commands waiting for this side.
    pub(super) fn poll_commands(&mut self) {
        while let Some(cmd) = self.control.as_ref().and_then(|rx| rx.try_recv().ok()) {
            match cmd {
                crate::control::DecodeCommand::Snapshot { depth, reply } => {
                    let books = match self.book_feed() {
                        tickplant_core::feed::AnyFeed::Itch50(f) => f.books(),
                        tickplant_core::feed::AnyFeed::NyseXdp(f) => Some(f.books()),
                        _ => None,
                    };
                    let r = match books {
                        Some(b) => Ok(b
                            .instruments()
                            .map(|(id, book)| {
                                let (_, sym) = self.book_feed().market(id);
                                let sym =
                                    String::from_utf8_lossy(tickplant_wire::itch50::trim_stock(&sym)).into_owned();
                                let sym = if sym.is_empty() { format!("#{id}") } else { sym };
                                let mut s = String::new();
                                crate::json::book_json(&sym, book, depth, &mut s);
                                s
                            })
                            .collect()),
                        None => Err("this feed keeps no books (OPRA: use the BBO in its records)".to_string()),
                    };
                    let _ = reply.send(r);
                }
                crate::control::DecodeCommand::Subscribe { consumer, change, command, reply } => {
                    let _ = reply.send(self.subscribe(&consumer, &change, command));
                }
            }
        }
    }

    /// Change a consumer's subscription from the next packet on.
    #[cold]
    fn subscribe(
        &mut self,
        consumer: &str,
        change: &crate::control::SubscriptionChange,
        command: String,
    ) -> Result<serde_json::Value, String> {
        use tickplant_core::feed::AnyFeed;
        let opra = matches!(self.feed.decoder(), AnyFeed::OpraFast(_) | AnyFeed::OpraBinary(_));
        let Some(i) = self.outs.iter().position(|o| o.name == consumer) else {
            let names: Vec<&str> = self.outs.iter().map(|o| o.name.as_str()).collect();
            return Err(format!("no consumer {consumer:?} on this feed (its consumers: {})", names.join(", ")));
        };
        let o = &mut self.outs[i];
        let before = o.sub.to_json();
        o.sub = o.sub.changed(change, opra)?;
        o.filter = o.sub.filter(&self.named);
        let now = o.sub.to_json();
        let from_seq = self.next_seq[o.stream.index()];
        let result = format!("subscription {before} -> {now}, from sequence {from_seq}");
        if let Some(c) = &self.control_log {
            c.0.record(&c.1, crate::control::ControlRecord { at_ns: crate::live::realtime_ns(), command, result });
        }
        Ok(serde_json::json!({ "consumer": consumer, "before": before, "subscription": now, "from_seq": from_seq }))
    }

    /// Publish for the metrics endpoint if it is time (a clock read).
    pub(super) fn maybe_publish(&mut self) {
        if self.metrics.is_some() && std::time::Instant::now() >= self.next_publish {
            self.next_publish = std::time::Instant::now() + crate::metrics::PUBLISH_EVERY;
            self.publish_metrics();
        }
    }

    /// Wake the consumers that parked on an empty ring: when the decode thread runs out of
    /// batches (or, with every stage on the producer thread, when the source is idle), not
    /// once a packet (a fence each).
    pub(super) fn ring_consumers(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        for o in &self.outs {
            o.bell.ring_fenced();
        }
    }

    /// Copy the decode side's counters to the metrics hub.
    pub(super) fn publish_metrics(&self) {
        let Some((hub, feed, clock)) = &self.metrics else { return };
        let mut c = *clock;
        c.finish();
        let st = self.feed.stats();
        let mut snap = crate::metrics::DecodeSnap {
            packets_in: st.packets_in,
            messages_in: st.messages_in,
            decoded: st.decoded,
            undecodable: st.undecodable,
            gaps: tickplant_core::GapReason::ALL
                .iter()
                .zip(&self.gap_counts)
                .filter(|(_, c)| c.0 > 0)
                .map(|(r, c)| (*r, c.0, c.1))
                .collect(),
            consumers: self
                .outs
                .iter()
                .map(|o| crate::metrics::ConsumerSnap {
                    name: o.name.clone(),
                    matched: o.matched,
                    delivered: o.delivered,
                    dropped: o.dropped,
                    waits: o.waits,
                    records: o.gaps,
                    ring_fill: (o.ring.capacity() - o.ring.slots()) as u64,
                    ring_capacity: o.ring.capacity() as u64,
                })
                .collect(),
            stages: vec![
                ("decode_book", crate::metrics::Quantiles::of(&self.h_decode_book, c.ns_per_tick())),
                ("deliver", crate::metrics::Quantiles::of(&self.h_deliver, c.ns_per_tick())),
            ],
            ..Default::default()
        };
        if let Some(r) = &self.resync {
            snap.resync_applied = r.stats.applied;
            snap.resync_snapshots = r.stats.snapshots;
        }
        let books = match self.book_feed() {
            tickplant_core::feed::AnyFeed::Itch50(f) => f.books(),
            tickplant_core::feed::AnyFeed::NyseXdp(f) => Some(f.books()),
            _ => None,
        };
        if let Some(b) = books {
            snap.book = *b.stats();
            snap.books = b.instruments().count() as u64;
            snap.stale_books = b.instruments().filter(|(_, x)| x.is_stale()).count() as u64;
            snap.live_orders = b.live_orders() as u64;
        }
        hub.publish_decode(feed, snap);
    }

    /// Nothing to decode (a quiet stream, or its end): a snapshot on its way is looked at.
    pub(super) fn resync_idle(&mut self) {
        if self.resync.as_ref().is_some_and(|x| x.active()) {
            self.resync_poll();
        }
    }

    /// Rebuild the books if the snapshot on its way can be used now.
    fn resync_poll(&mut self) {
        let Some(r) = self.resync.as_deref_mut() else { return };
        let Some((snap, again)) = r.poll() else { return };
        if let tickplant_core::feed::AnyFeed::Itch50(f) = self.feed.decoder_mut() {
            f.reset_books();
        }
        self.load_snapshot(&snap, false);
        let from = snap.next_seq;
        let mut replayed = 0;
        for (seq, count, arrival_ns, payload) in again {
            let (payload, seq, count) = if seq < from {
                match super::resync::trim_payload(&payload, seq, from) {
                    Some(t) => t,
                    None => continue,
                }
            } else {
                (payload, seq, count)
            };
            let p = FeedPacket { payload: &payload, seq, count, arrival_ns, prefetched: false };
            let d = self.feed.load_packet(&p);
            replayed += d.decoded;
            if let Some(l) = self.snapshot.as_mut() {
                l.messages += d.messages;
                l.decoded += d.decoded;
                l.undecodable += d.undecodable;
            }
            self.join_named(Stream::Hr);
        }
        if let Some(r) = self.resync.as_deref_mut() {
            r.stats.replayed += replayed;
        }
        let now = crate::live::realtime_ns();
        let e = Event {
            ts_recv: now,
            ts_event: now,
            sequence: from,
            instrument_id: u32::MAX,
            action: tickplant_core::event::EventAction::Trusted,
            ..Event::default()
        };
        for o in self.outs.iter_mut().filter(|o| o.stream == Stream::Hr) {
            o.publish_gap(&e);
        }
    }

    /// Decode, book and deliver one packet the arbitrator released: its sequencer already
    /// found where the payload starts and which messages the packet holds.
    /// `prefetched`: the caller has already asked for the orders the packet's messages name
    /// (some messages ahead); otherwise the packet asks for all of them before it applies
    /// the first.
    pub(super) fn packet(&mut self, stream: Stream, r: &Released<'_>, prefetched: bool) {
        let t0 = self.clock_in();
        let payload = r.frame.get(usize::from(r.payload_offset)..).unwrap_or_default();
        let p = FeedPacket { payload, seq: r.seq, count: r.count, arrival_ns: r.arrival_ns, prefetched };
        self.next_seq[stream.index()] = r.seq + u64::from(r.count);
        match stream {
            Stream::Hr => {
                self.timeline.packet(r.arrival_ns, r.input, r.count);
                self.feed.handle_packet(&p);
                if self.resync.as_ref().is_some_and(|x| x.active()) {
                    self.join_named(stream);
                    self.timed_deliver(stream, t0);
                    return self.resync_packet(&p);
                }
            }
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
    pub(super) fn clock_in(&mut self) -> Option<u64> {
        (self.sampler.pick() || self.time_all).then(rdtsc)
    }

    /// Deliver the batch; a timed packet (`t0` from [`Downstream::clock_in`]) records the
    /// decode stage and the delivery.
    #[inline(always)]
    pub(super) fn timed_deliver(&mut self, stream: Stream, t0: Option<u64>) {
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
    pub(super) fn deliver(&mut self, stream: Stream, stamp: bool) {
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

pub(super) struct Sink<'a, 'p> {
    pub(super) down: &'a mut Downstream<'p>,
}

impl ArbSink for Sink<'_, '_> {
    fn ll(&mut self, r: &Released<'_>) {
        self.down.packet(Stream::Ll, r, false);
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
    fn idle(&mut self) {
        self.down.ring_consumers();
        self.down.resync_idle();
    }
    fn publish(&mut self) {
        self.down.ring_consumers();
        self.down.maybe_publish();
        self.down.poll_commands();
    }
}

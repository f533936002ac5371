//! The producer's handoff to the decode thread: released packets (payloads copied, their
//! order hints found) and gaps in batches through a ring, and the decode thread's loop.

use super::*;

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
    fn idle(&mut self) {
        self.send();
    }
}

/// Packets released by the arbitrator (their UDP payloads) and gaps, in release order: what
/// the producer hands the decode thread, a batch at a time.
#[derive(Default)]
pub(super) struct Handoff {
    pub(super) bytes: Vec<u8>,
    pub(super) items: Vec<Item>,
    /// The order id each ITCH message of the batch probably names ([`tickplant_core::itch::order_hint`]),
    /// in order, found by the producer as it copies the payload: the decode thread asks for
    /// them some messages ahead with no second walk through the packets (that walk took
    /// about 65 instructions a message on the decode thread, the run's limit).
    pub(super) hints: Vec<u64>,
}

pub(super) enum Item {
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
/// they name: on the parse + book benchmark's day 8 to 10 ran fastest, ahead of 4, 16 and a
/// burst per batch (`cargo bench -p tickplant --bench itch`; docs/perf-log/feed-handler.md).
pub(super) const PREFETCH_AHEAD: usize = 8;

/// Packets (or gaps) per handoff batch: the two threads touch the ring's indices once a
/// batch, not once a packet. A batch goes when it is full and at the end of the captures,
/// which are read as fast as they go; a live source would also send it when idle.
pub const DECODE_BATCH: usize = 64;
/// Handoff batches in flight (allocated once and passed back and forth).
pub(super) const HANDOFF_BATCHES: usize = 16;

/// The producer's side of the handoff: fills a batch, sends it full, takes an empty one
/// back from the decode thread (waiting when all are in flight).
pub(super) struct HandoffSink {
    pub(super) cur: Handoff,
    pub(super) tx: rtrb::Producer<Handoff>,
    pub(super) back: rtrb::Consumer<Handoff>,
    pub(super) spare: Vec<Handoff>,
    /// The producer has a core of its own, no other thread pinned there (waits spin first).
    pub(super) alone: bool,
    /// Find the order hints of the packets of the stream the ITCH books follow.
    pub(super) hints: Option<Stream>,
    /// The run decodes the LL stream (its gaps go to the decode thread too).
    pub(super) ll: bool,
    /// Ticks spent waiting for an empty batch (so that the arbitrate stage can leave them
    /// out: they are the decode thread's time, not the arbitrator's).
    pub(super) waited: u64,
    /// The decode thread's, rung for each batch sent.
    pub(super) bell: Arc<Bell>,
}

impl HandoffSink {
    /// Add a packet or gap to the batch, and send the batch when it is full.
    pub(super) fn push(&mut self, item: Item) {
        self.cur.items.push(item);
        if self.cur.items.len() >= DECODE_BATCH {
            self.send();
        }
    }
    pub(super) fn send(&mut self) {
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
        self.bell.ring();
    }
}

impl HandoffSink {
    /// A packet of `stream` into the batch: its payload copied, its order hints found.
    #[inline]
    pub(super) fn packet(&mut self, stream: Stream, r: &Released<'_>) {
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
    fn ll(&mut self, r: &Released<'_>) {
        self.packet(Stream::Ll, r);
    }
    fn hr(&mut self, r: &Released<'_>) {
        self.packet(Stream::Hr, r);
    }
    fn gap(&mut self, g: &GapReport) {
        if g.output == OutputId::Hr || self.ll {
            self.push(Item::Gap(*g));
        }
    }
}

/// The decode thread: every batch the producer sends, in order, through `down`; each batch
/// goes back emptied. Ends when the producer is gone and the ring is drained.
pub(super) fn decode_loop(
    down: &mut Downstream<'_>,
    rx: &mut rtrb::Consumer<Handoff>,
    back: &mut rtrb::Producer<Handoff>,
    waiter: &Waiter,
) {
    let cpu0 = crate::clock::thread_cpu_ns();
    let mut idle = 0u32;
    let mut batches = 0u32;
    loop {
        let Ok(mut b) = rx.pop() else {
            if rx.is_abandoned() && rx.is_empty() {
                down.ring_consumers();
                down.cpu_ns = crate::clock::thread_cpu_ns().saturating_sub(cpu0);
                return;
            }
            // About to wait: the consumers have all there is. Woken on every batch instead,
            // a consumer that parked would be woken once a batch at full rate, where a
            // sleep let the ring fill.
            if idle == 0 {
                down.ring_consumers();
            }
            idle += 1;
            down.resync_idle();
            down.maybe_publish();
            down.poll_commands();
            waiter.wait(idle, || !rx.is_empty());
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
        // Metrics and commands every 32 batches (and when idle): a clock read a batch was
        // 6% of the decode thread's time with the endpoint on, batches of a packet or two
        // at full rate (`tickplant run` on a 3M-message day, metrics on against off).
        batches = batches.wrapping_add(1);
        if batches.is_multiple_of(32) {
            down.maybe_publish();
            down.poll_commands();
        }
        b.bytes.clear();
        b.items.clear();
        b.hints.clear();
        // The producer's side of this ring has room for every batch there is.
        let _ = back.push(b);
    }
}

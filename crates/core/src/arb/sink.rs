//! The driven interface: [`Arbitrator::process`] and friends hand everything the
//! arbitrator produces to an [`ArbSink`] as it is produced, holding a new session's first
//! packet until the feed confirms it.

use super::*;

use crate::seq::{Other, OtherReason, PacketInfo, PacketKind};

/// Where a driven arbitrator sends what it produces (see [`Arbitrator::process`]).
pub trait ArbSink {
    /// A packet for the low-latency output, forwarded the moment it arrived (its
    /// `release_ns` is its `arrival_ns`).
    fn ll(&mut self, forwarded: &Released<'_>);
    /// A frame for the high-reliability output.
    fn hr(&mut self, released: &Released<'_>);
    /// A frame that is not market data.
    fn other(&mut self, _now: u64, _input: usize, _frame: &[u8], _other: &Other) {}
    fn gap(&mut self, _gap: &GapReport) {}
    fn event(&mut self, _event: &ArbEvent) {}
}

impl Arbitrator {
    /// Run every deadline up to `now`, sending what is released to `sink`. Cheap when no
    /// deadline is due (one compare in line), so a caller can call it before every packet.
    #[inline(always)]
    pub fn advance_to<S: ArbSink>(&mut self, now: u64, sink: &mut S) {
        if self.deadline <= now {
            self.advance_due(now, sink);
        }
    }

    #[inline(never)]
    fn advance_due<S: ArbSink>(&mut self, now: u64, sink: &mut S) {
        while let Some(d) = self.poll_timeout() {
            if d > now {
                break;
            }
            self.handle_timeout(d);
            self.drain(sink);
        }
    }

    /// The whole calling sequence for one frame: deadlines up to `now`, the frame, and
    /// everything it releases, in order.
    #[inline]
    pub fn process<S: ArbSink>(&mut self, now: u64, input: usize, frame: &[u8], sink: &mut S) {
        self.advance_to(now, sink);
        let info = match self.seq.classify(self.links[input], frame) {
            Ok(info) if self.destination_ok(input, frame, &info) => info,
            Ok(_) => {
                let o = Other { reason: OtherReason::Filtered, error: None };
                self.count_other(input, &o);
                sink.other(now, input, frame, &o);
                self.drain(sink);
                return;
            }
            Err(o) => {
                self.count_other(input, &o);
                sink.other(now, input, frame, &o);
                self.drain(sink);
                return;
            }
        };
        // A packet of another session, or one while a packet is held: see the module doc.
        if self.held.is_some() || (self.started && info.session != self.session) {
            return self.process_session_change(now, input, info, frame, sink);
        }
        self.emit(now, input, &info, frame, sink);
        self.drain(sink);
    }

    /// [`Arbitrator::process`] for a packet of another MoldUDP64 session than the current
    /// one, or any packet while one is held: hold it, take the session on, or find the held
    /// packet stray (the rule in the module doc).
    #[cold]
    #[inline(never)]
    pub(super) fn process_session_change<S: ArbSink>(
        &mut self,
        now: u64,
        input: usize,
        info: PacketInfo,
        frame: &[u8],
        sink: &mut S,
    ) {
        let new_session = info.session != self.session && Some(info.session) != self.prev_session;
        if new_session && info.kind == PacketKind::Data {
            let confirms = self.session_ended || self.held.as_ref().is_some_and(|h| h.info.session == info.session);
            if !confirms {
                // A candidate of yet another session replaces the one held.
                self.release_stray(sink);
                let mut copy = std::mem::take(&mut self.held_spare);
                copy.clear();
                copy.extend_from_slice(frame);
                self.held = Some(Held { frame: copy, input, info, at_ns: now });
                self.drain(sink);
                return;
            }
            // Confirmed: the held packet goes first and starts the session.
            if let Some(h) = self.held.take() {
                self.emit_held(h, now, sink);
            }
        } else if info.session == self.session && info.kind == PacketKind::Data && info.end() > self.high {
            // The current session goes on with new messages: what is held was stray.
            self.release_stray(sink);
        }
        self.emit(now, input, &info, frame, sink);
        // An end of the current session confirms the session held.
        if self.session_ended {
            if let Some(h) = self.held.take() {
                self.emit_held(h, now, sink);
            }
        }
        self.drain(sink);
    }

    /// Handle the held packet now, as it arrived on its input.
    pub(super) fn emit_held<S: ArbSink>(&mut self, h: Held, now: u64, sink: &mut S) {
        self.emit(now, h.input, &h.info, &h.frame, sink);
        self.held_spare = h.frame;
    }

    /// The held packet, if any, to *other* as stray traffic.
    pub(super) fn release_stray<S: ArbSink>(&mut self, sink: &mut S) {
        if let Some(h) = self.held.take() {
            let o = Other { reason: OtherReason::Stray, error: None };
            self.count_other(h.input, &o);
            sink.other(h.at_ns, h.input, &h.frame, &o);
            self.held_spare = h.frame;
        }
    }

    /// A packet forwarded at once, trimmed to its new messages where `skip` says so and the
    /// protocol allows (see [`Action::Forward`]), with the sequence number and count as sent.
    #[inline(always)]
    pub(super) fn forwarded<'a>(
        &'a mut self,
        now: u64,
        input: usize,
        info: &PacketInfo,
        frame: &'a [u8],
        skip: u32,
    ) -> Released<'a> {
        let trimmed = skip > 0 && self.seq.trim(frame, info, skip, &mut self.scratch);
        let (frame, seq, count) = if trimmed {
            (&self.scratch[..], info.seq + u64::from(skip), info.count - skip)
        } else {
            (frame, info.seq, info.count)
        };
        Released {
            frame,
            seq,
            count,
            input: input as u8,
            arrival_ns: now,
            release_ns: now,
            trimmed,
            payload_offset: info.payload_offset,
        }
    }

    /// One classified packet through both outputs into `sink`.
    #[inline(always)]
    pub(super) fn emit<S: ArbSink>(&mut self, now: u64, input: usize, info: &PacketInfo, frame: &[u8], sink: &mut S) {
        match self.handle_packet(now, input, info, frame) {
            Decision::Data { ll, hr } => {
                if let Action::Forward { skip } = ll {
                    self.gaps_before(OutputId::Ll, info.seq + u64::from(skip), sink);
                    sink.ll(&self.forwarded(now, input, info, frame, skip));
                }
                if let Action::Forward { skip } = hr {
                    self.gaps_before(OutputId::Hr, info.seq + u64::from(skip), sink);
                    sink.hr(&self.forwarded(now, input, info, frame, skip));
                }
            }
            Decision::Control => {}
        }
    }

    /// Change the policy at `now` (after running the deadlines before it).
    pub fn change_policy<S: ArbSink>(&mut self, now: u64, policy: Policy, sink: &mut S) {
        self.advance_to(now, sink);
        self.set_policy(now, policy);
        self.drain(sink);
    }

    /// End of input at `now`: run deadlines, then flush every wait. A packet still held
    /// for an unconfirmed session goes to *other* as stray.
    pub fn finish<S: ArbSink>(&mut self, now: u64, sink: &mut S) {
        self.advance_to(now, sink);
        self.release_stray(sink);
        self.flush(now);
        self.drain(sink);
    }

    /// Send the gaps of `output` that begin at or before `seq` to `sink`: each gap reaches
    /// the sink in its place, before the packets after it (a consumer of the stream reads
    /// it between the right records, and the books go stale before the packets after it).
    #[inline(always)]
    pub(super) fn gaps_before<S: ArbSink>(&mut self, output: OutputId, seq: u64, sink: &mut S) {
        if !self.gaps.is_empty() {
            self.gaps_before_slow(output, seq, sink);
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn gaps_before_slow<S: ArbSink>(&mut self, output: OutputId, seq: u64, sink: &mut S) {
        let mut i = 0;
        while i < self.gaps.len() {
            let g = self.gaps[i];
            if g.output == output && g.first_seq <= seq {
                self.gaps.remove(i);
                sink.gap(&g);
            } else {
                i += 1;
            }
        }
    }

    /// Send released packets, gaps and events to `sink`.
    #[inline]
    pub fn drain<S: ArbSink>(&mut self, sink: &mut S) {
        // Nearly always nothing to send: check that without a call.
        if self.buf.ready.is_empty() && self.gaps.is_empty() && self.events.is_empty() {
            return;
        }
        self.drain_all(sink);
    }

    #[inline(never)]
    pub(super) fn drain_all<S: ArbSink>(&mut self, sink: &mut S) {
        while let Some(seq) = self.buf.ready.front().map(|e| e.seq) {
            self.gaps_before(OutputId::Hr, seq, sink);
            if let Some(r) = self.poll_hr() {
                sink.hr(&r);
            }
        }
        while let Some(g) = self.gaps.pop_front() {
            sink.gap(&g);
        }
        while let Some(e) = self.events.pop_front() {
            sink.event(&e);
        }
    }
}

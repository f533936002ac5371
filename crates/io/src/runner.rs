//! The runner: every frame of a [`Source`] through the arbitrator into what follows it
//! (the feed-handler pipeline, or the output captures of `tickplant arb`), with policy
//! changes at their replay times, the arbitrate stage timed on a sample of frames, progress
//! lines, and the end of the input flushed. It is the one loop of every command that
//! arbitrates: they differ only in their source and in what the arbitrator releases into.

use std::time::{Duration, Instant};

use tickplant_core::{ArbSink, Arbitrator, DestinationConflict, Policy};

use crate::clock::rdtsc;
use crate::hist::Ticks;
use crate::source::Source;

/// What the arbitrator releases into, driven by the runner.
pub trait Feed: ArbSink {
    /// Ticks spent so far on what is not the arbitrator's (the later stages, or waits for
    /// another thread), left out of the arbitrate stage's time.
    fn elsewhere(&self) -> u64 {
        0
    }
    /// Messages done so far and what was done to them, for the progress lines.
    fn done(&self, arb: &Arbitrator) -> (u64, &'static str) {
        (arb.stats().hr.messages, "arbitrated")
    }
    /// Pass on anything held back, at the end of the input.
    fn flush(&mut self) {}
    /// The runner is timing the frames it passes on now (`on`) or has stopped: later stages
    /// on this thread must then time every packet, so that their time is known and left out
    /// of the arbitrate stage's.
    fn timing(&mut self, _on: bool) {}
    /// Stop at the next frame (the feed failed: its caller takes the error from it).
    fn stopped(&self) -> bool {
        false
    }
    /// A frame of `input` is about to go through the arbitrator (for a feed that names
    /// frames in its messages).
    #[inline(always)]
    fn frame(&mut self, _input: usize) {}
    /// A live source has nothing yet: pass on what is held back for a batch (nothing else
    /// would push it out on a quiet line).
    fn idle(&mut self) {}
    /// Time to publish metrics ([`RunOptions::publish`]): a feed that runs later stages on
    /// this thread publishes theirs.
    fn publish(&mut self) {}
}

/// Where the runner publishes the producer's counters (about every
/// [`crate::metrics::PUBLISH_EVERY`], and at the end).
pub trait Publish {
    fn producer(&self, arb: &Arbitrator, live: Vec<crate::live::LiveInputStats>, frames: u64, arbitrate: &Ticks);
}

/// How the runner goes.
#[derive(Clone, Copy)]
pub struct RunOptions<'a> {
    /// Time the arbitrate stage on one frame in this many (`u32::MAX`: practically never).
    pub sample: u32,
    /// A progress line on stderr about once a second.
    pub progress: bool,
    /// Policy changes: (ns after the first frame, the new policy), in time order.
    pub changes: &'a [(u64, Policy)],
    /// Publish the counters for a metrics endpoint (off the per-frame path: a clock read
    /// every 1,024 frames).
    pub publish: Option<&'a dyn Publish>,
    /// Commands from the control socket, looked at every 1,024 frames and when idle.
    pub control: Option<&'a crate::control::ControlFeed>,
}

impl std::fmt::Debug for RunOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("sample", &self.sample)
            .field("progress", &self.progress)
            .field("changes", &self.changes)
            .field("publish", &self.publish.is_some())
            .field("control", &self.control.is_some())
            .finish()
    }
}

/// What a run through the input did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Replayed {
    pub frames: u64,
    /// The time the arbitrator reached (the latest frame's; a capture's clock that goes
    /// backwards does not move it back).
    pub last_ns: u64,
    /// Policy changes applied (those after the end of the input are not).
    pub changes_applied: usize,
}

/// Why a run stopped early.
#[derive(Debug)]
pub enum RunError<E> {
    /// The source failed.
    Source(E),
    /// An input holds well-formed packets to two destinations and no `accept` list says
    /// which is the feed.
    Destinations { input: String, frame: u64, conflict: DestinationConflict },
}

impl<E: std::fmt::Display> std::fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Source(e) => e.fmt(f),
            RunError::Destinations { input, frame, conflict } => write!(f, "{input}: frame {frame}: {conflict}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Displayed as the source's error: its source is that error's source.
        match self {
            RunError::Source(e) => e.source(),
            RunError::Destinations { .. } => None,
        }
    }
}

/// Picks one event in `every` (the first, then each `every`th) with a countdown: no
/// division per packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampler {
    every: u32,
    left: u32,
}

impl Sampler {
    pub(crate) fn new(every: u32) -> Self {
        Sampler { every: every.max(1), left: 1 }
    }
    /// Whether this event is one to time.
    #[inline(always)]
    pub(crate) fn pick(&mut self) -> bool {
        self.left -= 1;
        if self.left == 0 {
            self.left = self.every;
            true
        } else {
            false
        }
    }
}

/// Every frame of `source` through the arbitrator into `feed`, the arbitrate stage timed
/// into `h_arb` on a sample of frames; at the end of the input the arbitrator is flushed
/// (every wait given up, reported) and so is `feed`. Time never goes backwards for the
/// arbitrator, even if a capture's clock does.
pub fn run<S: Source, F: Feed>(
    source: &mut S,
    arb: &mut Arbitrator,
    feed: &mut F,
    h_arb: &mut Ticks,
    opts: RunOptions<'_>,
) -> Result<Replayed, RunError<S::Error>> {
    let mut sampler = Sampler::new(opts.sample);
    let changes = opts.changes;
    let started = Instant::now();
    let mut frames = 0u64;
    let mut last_ts = 0;
    // The next policy change, at a replay time once the first frame has set the base: one
    // compare a frame.
    let mut next_change = 0;
    let mut change_at = if changes.is_empty() { u64::MAX } else { 0 };
    let mut base = None;
    let mut next_progress = started + Duration::from_secs(1);
    let mut next_publish = started;
    let mut publish = |source: &S, arb: &Arbitrator, feed: &mut F, frames: u64, h_arb: &Ticks, force: bool| {
        if let Some(p) = opts.publish {
            if force || Instant::now() >= next_publish {
                next_publish = Instant::now() + crate::metrics::PUBLISH_EVERY;
                p.producer(arb, source.live_stats(), frames, h_arb);
                feed.publish();
            }
        }
    };
    loop {
        let Some((input, f)) = source.next_frame().map_err(RunError::Source)? else {
            // A live source with nothing yet: its clock moves the arbitrator's (waits end on
            // time on a quiet line), then frames again. A capture's end: the loop's.
            // What is held back for a batch goes on before the wait: on a quiet line it
            // would wait for the next packet otherwise.
            let Some(now) = source.idle() else { break };
            last_ts = last_ts.max(now);
            arb.advance_to(last_ts, feed);
            send_requests(source, arb);
            feed.idle();
            publish(source, arb, feed, frames, h_arb, false);
            if let Some(c) = opts.control {
                c.apply(arb, last_ts, feed);
                feed.publish();
            }
            if feed.stopped() {
                return Ok(Replayed { frames, last_ns: last_ts, changes_applied: next_change });
            }
            source.wait();
            continue;
        };
        frames += 1;
        feed.frame(input);
        last_ts = last_ts.max(f.ts_ns);
        if change_at <= last_ts {
            let b = *base.get_or_insert(last_ts);
            while let Some(&(at, policy)) = changes.get(next_change) {
                if b + at > last_ts {
                    break;
                }
                arb.change_policy(b + at, policy, feed);
                next_change += 1;
            }
            change_at = changes.get(next_change).map_or(u64::MAX, |&(at, _)| b + at);
        }
        if sampler.pick() {
            feed.timing(true);
            let (t0, elsewhere0) = (rdtsc(), feed.elsewhere());
            arb.process(last_ts, input, f.data, feed);
            // The arbitrate stage alone: what it released was timed by the later stages.
            h_arb.record((rdtsc() - t0).saturating_sub(feed.elsewhere() - elsewhere0));
            feed.timing(false);
        } else {
            arb.process(last_ts, input, f.data, feed);
        }
        if arb.has_request() {
            send_requests(source, arb);
        }
        if let Some(c) = arb.destination_conflict() {
            let input = usize::from(c.input);
            let (name, frame) = (source.input_name(input), source.frames_read(input));
            return Err(RunError::Destinations { input: name, frame, conflict: c });
        }
        if feed.stopped() {
            return Ok(Replayed { frames, last_ns: last_ts, changes_applied: next_change });
        }
        if frames.is_multiple_of(1024) {
            if opts.publish.is_some() {
                publish(source, arb, feed, frames, h_arb, false);
            }
            if let Some(c) = opts.control {
                c.apply(arb, last_ts, feed);
                feed.publish();
            }
        }
        if opts.progress && frames.is_multiple_of(65_536) && Instant::now() >= next_progress {
            next_progress = Instant::now() + Duration::from_secs(1);
            let (messages, what) = feed.done(arb);
            eprintln!(
                "run: {frames} frames, {messages} messages {what}, {:.1} M msg/s",
                messages as f64 / started.elapsed().as_secs_f64() / 1e6
            );
        }
    }
    arb.finish(last_ts, feed);
    feed.flush();
    publish(source, arb, feed, frames, h_arb, true);
    Ok(Replayed { frames, last_ns: last_ts, changes_applied: next_change })
}

/// Send the arbitrator's re-requests to the retransmission server.
#[cold]
fn send_requests<S: Source>(source: &mut S, arb: &mut Arbitrator) {
    while let Some(r) = arb.poll_request() {
        source.send_request(&r.to_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_picks_the_first_then_every_nth() {
        let mut s = Sampler::new(3);
        let picks: Vec<bool> = (0..7).map(|_| s.pick()).collect();
        assert_eq!(picks, [true, false, false, true, false, false, true]);
        let mut one = Sampler::new(0);
        assert!((0..4).all(|_| one.pick()), "0 counts as 1: every event");
    }
}

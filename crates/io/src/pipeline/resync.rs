//! Recovery of stale books: after a gap the HR stream could not fill (re-request gave up,
//! or is off), a GLIMPSE snapshot is taken in the background, at most one at a time and no
//! more often than `[recovery] snapshot-interval-s`, and the books are rebuilt from it.
//!
//! From the gap on, the HR packets that follow are applied as usual (to the stale books)
//! and kept. When the snapshot has arrived and the stream has reached its sequence
//! number `S`: the books are emptied, loaded from the snapshot, and the kept packets' messages
//! from `S` on are applied again; the books are then trusted, and every consumer of the
//! stream receives a `trusted` record (sequence `S`) in order with its other records. A
//! snapshot behind what was kept (it ends before the stream's first message after the
//! gap), or one with a gap after its sequence number, cannot rebuild the books: another is taken later. Each
//! outcome is counted in the report.
//!
//! Only the books' stream (HR) of an ITCH feed is recovered this way.

use std::collections::VecDeque;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tickplant_core::glimpse::Snapshot;

use crate::recovery::{fetch_snapshot, RecoveryError, SnapshotConfig};

/// What the recoveries did, for the report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ResyncStats {
    /// Snapshots asked for, and those that rebuilt the books.
    pub snapshots: u64,
    pub applied: u64,
    /// Snapshots that could not be used: failed to arrive, behind what was kept, or with a
    /// gap after their sequence number.
    pub failed: u64,
    pub behind: u64,
    pub gap_after: u64,
    /// The sequence numbers the books were trusted from, in order.
    pub trusted_from: Vec<u64>,
    /// Messages applied again from the kept packets.
    pub replayed: u64,
    /// Why the unused ones were not used (the first few).
    pub errors: Vec<String>,
}

/// A kept HR packet.
struct Kept {
    seq: u64,
    count: u32,
    arrival_ns: u64,
    payload: Vec<u8>,
}

pub(super) struct Resync {
    cfg: SnapshotConfig,
    interval: Duration,
    last_start: Option<Instant>,
    pending: Option<JoinHandle<Result<Snapshot, RecoveryError>>>,
    /// A snapshot that arrived ahead of the stream: applied once the stream reaches it.
    ready: Option<Snapshot>,
    /// The books are stale (a gap), and not yet rebuilt.
    pub(super) stale: bool,
    /// HR packets since the books went stale, from `kept_from` on.
    kept: VecDeque<Kept>,
    kept_bytes: usize,
    kept_from: u64,
    /// The stream's position now (one past the last message handled).
    pub(super) next: u64,
    /// Gaps since the books went stale: (first, last).
    gaps: Vec<(u64, u64)>,
    pub(super) stats: ResyncStats,
}

impl Resync {
    pub(super) fn new(cfg: SnapshotConfig, interval: Duration) -> Resync {
        Resync {
            cfg,
            interval,
            last_start: None,
            pending: None,
            ready: None,
            stale: false,
            kept: VecDeque::new(),
            kept_bytes: 0,
            kept_from: 0,
            next: 0,
            gaps: Vec::new(),
            stats: ResyncStats::default(),
        }
    }

    /// Whether anything is going on (a packet must be kept, or a snapshot looked at).
    #[inline(always)]
    pub(super) fn active(&self) -> bool {
        self.stale
    }

    /// The stream lost messages: the books are stale.
    pub(super) fn on_gap(&mut self, first: u64, last: u64) {
        self.next = self.next.max(last + 1);
        if !self.stale {
            self.stale = true;
            self.restart_keeping();
        }
        self.gaps.push((first, last));
    }

    /// Keep the stream from where it is now.
    fn restart_keeping(&mut self) {
        self.kept.clear();
        self.kept_bytes = 0;
        self.kept_from = self.next;
        self.gaps.clear();
    }

    /// An HR packet was handled (while stale): keep it.
    pub(super) fn on_packet(&mut self, seq: u64, count: u32, arrival_ns: u64, payload: &[u8]) {
        self.next = self.next.max(seq + u64::from(count));
        if self.kept_bytes + payload.len() > self.cfg.max_buffered {
            // Too much to keep: start again from here (a snapshot must then reach past it).
            self.note("the stream outgrew the buffer kept for a snapshot (buffer-bytes): kept afresh".into());
            self.restart_keeping();
            return;
        }
        self.kept_bytes += payload.len();
        self.kept.push_back(Kept { seq, count, arrival_ns, payload: payload.to_vec() });
    }

    fn note(&mut self, why: String) {
        if self.stats.errors.len() < 10 {
            self.stats.errors.push(why);
        }
    }

    /// The snapshot on its way cannot be used; what was kept stays for the next one.
    fn drop_attempt(&mut self, why: String) {
        tracing::warn!(reason = %why, "stale books: snapshot not used");
        self.stats.failed += 1;
        self.note(why);
        self.ready = None;
    }

    /// Start a snapshot if none is on its way and the interval allows.
    fn maybe_start(&mut self) {
        if self.pending.is_some() || self.ready.is_some() {
            return;
        }
        if self.last_start.is_some_and(|t| t.elapsed() < self.interval) {
            return;
        }
        self.last_start = Some(Instant::now());
        self.stats.snapshots += 1;
        tracing::info!(kept_from = self.kept_from, "stale books: taking a snapshot");
        let cfg = self.cfg.clone();
        self.pending = std::thread::Builder::new().name("resync".into()).spawn(move || fetch_snapshot(&cfg)).ok();
    }

    /// Look at the snapshot on its way: `Some` when the books can be rebuilt now, with the
    /// snapshot and the kept packets' messages from its sequence number on, as
    /// `(seq, count, arrival, payload)` to apply again.
    #[allow(clippy::type_complexity)]
    pub(super) fn poll(&mut self) -> Option<(Snapshot, Vec<(u64, u32, u64, Vec<u8>)>)> {
        if !self.stale {
            return None;
        }
        if self.pending.as_ref().is_some_and(|h| h.is_finished()) {
            let h = self.pending.take().expect("checked");
            match h.join() {
                Ok(Ok(s)) => self.ready = Some(s),
                Ok(Err(e)) => self.drop_attempt(e.to_string()),
                Err(_) => self.drop_attempt("the snapshot thread panicked".into()),
            }
        }
        let Some(s) = &self.ready else {
            self.maybe_start();
            return None;
        };
        let seq = s.next_seq;
        if seq < self.kept_from {
            self.stats.behind += 1;
            let from = self.kept_from;
            self.drop_attempt(format!("snapshot at {seq} is behind the stream kept from {from}"));
            return None;
        }
        if let Some(&(f, l)) = self.gaps.iter().find(|&&(_, l)| l >= seq) {
            self.stats.gap_after += 1;
            self.drop_attempt(format!("a gap ({f}..={l}) after the snapshot's sequence number {seq}"));
            return None;
        }
        if self.next < seq {
            // The snapshot is ahead of the stream: wait for the stream to reach it.
            return None;
        }
        let snap = self.ready.take().expect("checked");
        let again: Vec<_> = self
            .kept
            .drain(..)
            .filter(|k| k.seq + u64::from(k.count) > seq)
            .map(|k| (k.seq, k.count, k.arrival_ns, k.payload))
            .collect();
        self.kept_bytes = 0;
        self.gaps.clear();
        self.stale = false;
        self.stats.applied += 1;
        self.stats.trusted_from.push(seq);
        tracing::info!(from_seq = seq, replayed = again.len(), "stale books rebuilt from a snapshot: trusted again");
        Some((snap, again))
    }
}

/// The messages of a MoldUDP64 payload from sequence number `from` on, as a payload of
/// their own (the header's sequence number and count set to match): `None` when none is
/// left.
pub(super) fn trim_payload(payload: &[u8], seq: u64, from: u64) -> Option<(Vec<u8>, u64, u32)> {
    let p = tickplant_wire::moldudp64::Packet::new_checked(payload).ok()?;
    let skip = from.saturating_sub(seq);
    let mut out = payload[..20].to_vec();
    let mut n = 0u16;
    for (k, m) in p.messages().enumerate() {
        let Ok((_, m)) = m else { break };
        if (k as u64) < skip {
            continue;
        }
        out.extend_from_slice(&(m.len() as u16).to_be_bytes());
        out.extend_from_slice(m);
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let first = seq + skip;
    out[10..18].copy_from_slice(&first.to_be_bytes());
    out[18..20].copy_from_slice(&n.to_be_bytes());
    Some((out, first, u32::from(n)))
}

#[cfg(test)]
mod tests {
    use super::trim_payload;

    #[test]
    fn trimming_keeps_the_later_messages() {
        let mut p = vec![b'S'; 10];
        p.extend_from_slice(&100u64.to_be_bytes());
        p.extend_from_slice(&3u16.to_be_bytes());
        for m in [&b"a"[..], b"bb", b"ccc"] {
            p.extend_from_slice(&(m.len() as u16).to_be_bytes());
            p.extend_from_slice(m);
        }
        let (t, first, n) = trim_payload(&p, 100, 101).unwrap();
        assert_eq!((first, n), (101, 2));
        assert_eq!(&t[20..], b"\x00\x02bb\x00\x03ccc");
        assert_eq!(trim_payload(&p, 100, 100).unwrap().0, p);
        assert!(trim_payload(&p, 100, 103).is_none());
    }
}

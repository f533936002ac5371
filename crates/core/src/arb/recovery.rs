//! Re-request: holes that every line lost, asked for again from the exchange's
//! retransmission server (NASDAQ's MoldUDP64 re-request), its answers taken as one more
//! input.
//!
//! A hole is the messages missing before a packet that waits in the HR buffer. It is noted
//! when that packet arrives ([`Arbitrator::rr_note_hole`]) and asked for under the rules of
//! [`RerequestConfig`]; requests that the answers do not fill are sent again for what is
//! still missing, then given up. The HR window goes on as without re-request: when it ends
//! first, the gap is reported with reason `rerequest-timeout` if it had been asked for.
//!
//! Holes and requests are few (a hole needs a loss on every line) and their lists short
//! (`max_outstanding`); they are looked at only while some are open, after each packet and
//! at their deadlines. Nothing here runs on a packet when none is open.

use super::*;

/// A hole seen, not yet (wholly) asked for: `[first, end)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hole {
    pub(super) first: u64,
    pub(super) end: u64,
    pub(super) seen_at: u64,
    /// It was ready but found no free request slot (counted once).
    pub(super) throttled: bool,
}

/// A range asked for: `[first, end)`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asked {
    pub(super) first: u64,
    pub(super) end: u64,
    pub(super) retry_at: u64,
    /// Requests sent in a row that brought nothing (a request that brought part of the
    /// range starts the count again: a server may answer in parts).
    pub(super) retries: u32,
    /// Where the last request for it started, and how many were sent for it.
    pub(super) sent_from: u64,
    pub(super) sends: u32,
    /// Its last retry went unanswered: no more requests; kept to name the gap's reason.
    pub(super) failed: bool,
}

#[derive(Debug)]
pub(super) struct Recovery {
    pub(super) cfg: RerequestConfig,
    /// The answers' input (the lines are the inputs before it).
    pub(super) input: usize,
    pub(super) holes: Vec<Hole>,
    pub(super) asked: Vec<Asked>,
    pub(super) out: VecDeque<Rerequest>,
    pub(super) stats: RerequestStats,
    /// Pieces of a new hole (reused).
    scratch: Vec<(u64, u64)>,
}

impl Recovery {
    pub(super) fn new(cfg: RerequestConfig, input: usize) -> Recovery {
        Recovery {
            holes: Vec::with_capacity(64),
            asked: Vec::with_capacity(cfg.max_outstanding * 2),
            out: VecDeque::with_capacity(cfg.max_outstanding * 2),
            stats: RerequestStats::default(),
            scratch: Vec::with_capacity(16),
            cfg,
            input,
        }
    }

    /// Ask for `[first, end)` (at most `max_msgs` messages).
    fn send(&mut self, session: [u8; 10], first: u64, end: u64, now: u64, retry: u32) {
        let count = (end - first) as u16;
        self.out.push_back(Rerequest { session, seq: first, count, at_ns: now, retry });
        self.stats.requests += 1;
        self.stats.messages_requested += u64::from(count);
        if retry > 0 {
            self.stats.retries += 1;
        }
    }

    fn open_requests(&self) -> usize {
        self.asked.iter().filter(|q| !q.failed).count()
    }
}

/// `pieces` less `[a, b)`.
fn cut(pieces: &mut Vec<(u64, u64)>, a: u64, b: u64) {
    let mut i = 0;
    while i < pieces.len() {
        let (x, y) = pieces[i];
        if b <= x || y <= a {
            i += 1;
            continue;
        }
        pieces.swap_remove(i);
        if x < a {
            pieces.push((x, a));
        }
        if b < y {
            pieces.push((b, y));
        }
    }
}

impl Arbitrator {
    /// A packet went to wait with messages missing before it, `[a, b)`: note what of that
    /// is not already a hole or asked for.
    pub(super) fn rr_note_hole(&mut self, a: u64, b: u64, now: u64) {
        let Some(rr) = self.rr.as_deref_mut() else { return };
        let mut pieces = std::mem::take(&mut rr.scratch);
        pieces.clear();
        pieces.push((a, b));
        for h in &rr.holes {
            cut(&mut pieces, h.first, h.end);
        }
        for q in &rr.asked {
            cut(&mut pieces, q.first, q.end);
        }
        pieces.sort_unstable();
        for &(first, end) in &pieces {
            rr.holes.push(Hole { first, end, seen_at: now, throttled: false });
        }
        rr.scratch = pieces;
        self.rr_active = true;
    }

    /// The first run of messages in `[a, b)` that the HR output has neither delivered nor
    /// holds waiting.
    pub(super) fn rr_missing(&self, a: u64, b: u64) -> Option<(u64, u64)> {
        let w = &self.buf.waiting;
        let mut x = a.max(self.hr.next);
        while x < b {
            let i = w.partition_point(|e| e.seq <= x);
            // Waiting packets do not overlap but where answers were packed otherwise than
            // the lines' packets: a few before `i` are enough to find one that covers `x`
            // (a miss only asks for something again).
            let covered = w.range(i.saturating_sub(4)..i).map(|e| e.end()).max().unwrap_or(0);
            if covered > x {
                x = covered;
                continue;
            }
            let y = w.get(i).map_or(b, |e| e.seq.min(b));
            return Some((x, y));
        }
        None
    }

    /// Whether every line has gone past `end` (the answers' input does not count).
    fn rr_lines_past(&self, end: u64, lines: usize) -> bool {
        self.lines[..lines].iter().all(|l| l.high >= end)
    }

    /// Look at the open holes and requests at `now`: drop what was filled or passed, send
    /// what is due, and set the next deadline.
    pub(super) fn rr_check(&mut self, now: u64) {
        let Some(mut rr) = self.rr.take() else { return };
        let next = self.hr.next;
        let (cfg, lines) = (rr.cfg, rr.input);
        // Requests: filled or passed ones go; due ones are sent again or given up.
        let mut i = 0;
        while i < rr.asked.len() {
            let q = rr.asked[i];
            if q.end <= next {
                rr.asked.swap_remove(i);
                continue;
            }
            if q.failed {
                i += 1;
                continue;
            }
            match self.rr_missing(q.first, q.end) {
                None => {
                    rr.asked.swap_remove(i);
                    continue;
                }
                Some((x, _)) if q.retry_at <= now => {
                    let retries = if x > q.sent_from { 0 } else { q.retries + 1 };
                    if retries <= cfg.max_retries {
                        let wait = cfg.retry_ns.saturating_mul(1 << retries.min(20));
                        let sends = q.sends + 1;
                        rr.asked[i] =
                            Asked { first: x, retry_at: now.saturating_add(wait), retries, sent_from: x, sends, ..q };
                        rr.send(self.session, x, q.end, now, q.sends);
                    } else {
                        rr.asked[i].failed = true;
                        rr.stats.unanswered += 1;
                    }
                }
                Some((x, _)) => rr.asked[i].first = x,
            }
            i += 1;
        }
        // Holes: filled ones go; ready ones are asked for while slots are free.
        let mut open = rr.open_requests();
        let mut k = 0;
        while k < rr.holes.len() {
            let h = rr.holes[k];
            let Some((x, _)) = self.rr_missing(h.first, h.end) else {
                rr.holes.remove(k);
                continue;
            };
            let mut h = Hole { first: x, ..h };
            let age = now.saturating_sub(h.seen_at);
            let ready = age >= cfg.delay_ns && (age >= cfg.line_wait_ns || self.rr_lines_past(h.end, lines));
            if ready {
                while h.first < h.end && open < cfg.max_outstanding {
                    let end = h.end.min(h.first + u64::from(cfg.max_msgs));
                    rr.asked.push(Asked {
                        first: h.first,
                        end,
                        retry_at: now.saturating_add(cfg.retry_ns),
                        retries: 0,
                        sent_from: h.first,
                        sends: 1,
                        failed: false,
                    });
                    rr.stats.holes += u64::from(h.first == x);
                    rr.send(self.session, h.first, end, now, 0);
                    open += 1;
                    h.first = end;
                }
                if h.first < h.end && !h.throttled {
                    h.throttled = true;
                    rr.stats.throttled += 1;
                }
            }
            if h.first >= h.end {
                rr.holes.remove(k);
            } else {
                rr.holes[k] = h;
                k += 1;
            }
        }
        // The next deadline: a hole's delay or line wait, a request's retry.
        let mut deadline = u64::MAX;
        for h in &rr.holes {
            let d = if now.saturating_sub(h.seen_at) < cfg.delay_ns {
                h.seen_at.saturating_add(cfg.delay_ns)
            } else {
                h.seen_at.saturating_add(cfg.line_wait_ns.max(cfg.delay_ns))
            };
            if d > now {
                deadline = deadline.min(d);
            }
        }
        for q in rr.asked.iter().filter(|q| !q.failed) {
            deadline = deadline.min(q.retry_at);
        }
        rr.stats.outstanding = rr.open_requests() as u64;
        self.rr_active = !rr.holes.is_empty() || !rr.asked.is_empty();
        self.rr_deadline = deadline;
        // The window's deadline stays as it is; an earlier one of ours goes first (a later
        // one only costs a call that finds nothing due).
        self.deadline = self.deadline.min(deadline);
        self.rr = Some(rr);
    }

    /// Whether part of `[a, b)` was asked for (the reason of a gap given up there).
    pub(super) fn rr_asked_in(&self, a: u64, b: u64) -> bool {
        self.rr.as_deref().is_some_and(|rr| rr.asked.iter().any(|q| q.first < b && a < q.end))
    }

    /// A new sequence space: what was open belongs to the old one.
    pub(super) fn rr_reset(&mut self) {
        if let Some(rr) = self.rr.as_deref_mut() {
            rr.holes.clear();
            rr.asked.clear();
            rr.stats.outstanding = 0;
        }
        self.rr_active = false;
        self.rr_deadline = u64::MAX;
    }

    /// Count HR messages delivered from the answers.
    #[inline(always)]
    pub(super) fn rr_delivered(&mut self, input: usize, messages: u64) {
        if input == self.rr_input {
            if let Some(rr) = self.rr.as_deref_mut() {
                rr.stats.messages_recovered += messages;
            }
        }
    }

    /// The next request to send to the retransmission server, oldest first.
    pub fn poll_request(&mut self) -> Option<Rerequest> {
        self.rr.as_deref_mut()?.out.pop_front()
    }

    /// Whether a request waits to be sent ([`Arbitrator::poll_request`]).
    #[inline(always)]
    pub fn has_request(&self) -> bool {
        self.rr.as_deref().is_some_and(|rr| !rr.out.is_empty())
    }

    /// The answers' input, when re-request is on.
    pub fn rerequest_input(&self) -> Option<usize> {
        self.rr.as_deref().map(|rr| rr.input)
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cut_leaves_what_is_outside() {
        let mut p = vec![(10, 20)];
        cut(&mut p, 12, 15);
        p.sort_unstable();
        assert_eq!(p, [(10, 12), (15, 20)]);
        cut(&mut p, 0, 11);
        cut(&mut p, 19, 30);
        p.sort_unstable();
        assert_eq!(p, [(11, 12), (15, 19)]);
        cut(&mut p, 0, 100);
        assert!(p.is_empty());
    }
}

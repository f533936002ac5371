//! The arbitrator's own state: each output's expected sequence number and memory of
//! given-up ranges, the HR buffer of waiting packets, the packet held for a session.

use super::*;
use std::collections::VecDeque;

use crate::seq::PacketInfo;

/// A MoldUDP64 data packet of an unconfirmed session, held back (see the module doc).
#[derive(Debug)]
pub(super) struct Held {
    pub(super) frame: Vec<u8>,
    pub(super) input: usize,
    pub(super) info: PacketInfo,
    pub(super) at_ns: u64,
}

/// Given-up ranges, oldest first, ascending in sequence number within a space.
#[derive(Debug)]
pub(super) struct GapMemory {
    pub(super) ranges: VecDeque<(u64, u64)>, // [first, end)
    pub(super) cap: usize,
    /// The end of the newest range (0 when none): a copy at or past it touches none, the
    /// common case, decided without the deque (`tickplant bench arb`).
    last_end: u64,
}

impl GapMemory {
    pub(super) fn new(cap: usize) -> Self {
        GapMemory { ranges: VecDeque::with_capacity(cap), cap, last_end: 0 }
    }
    pub(super) fn push(&mut self, first: u64, end: u64) {
        if self.ranges.len() == self.cap {
            self.ranges.pop_front();
        }
        self.ranges.push_back((first, end));
        self.last_end = end;
    }
    /// Does `[s, e)` touch a given-up range?
    #[inline]
    pub(super) fn touches(&self, s: u64, e: u64) -> bool {
        if s >= self.last_end {
            return false;
        }
        // First range ending after s (there is one: the newest ends past s); it touches if
        // it starts before e.
        let i = self.ranges.partition_point(|&(_, end)| end <= s);
        self.ranges.get(i).is_some_and(|&(first, _)| first < e)
    }
    pub(super) fn clear(&mut self) {
        self.ranges.clear();
        self.last_end = 0;
    }
}

/// State and counters of one output that are common to LL and HR.
#[derive(Debug)]
pub(super) struct OutputState {
    pub(super) id: OutputId,
    /// Next expected sequence number: everything below it was delivered or given up.
    pub(super) next: u64,
    /// Where the current sequence space started for this output.
    pub(super) space_start: u64,
    pub(super) stats: OutputStats,
    pub(super) memory: GapMemory,
}

impl OutputState {
    pub(super) fn new(id: OutputId, enabled: bool, gap_memory: usize) -> Self {
        OutputState {
            id,
            next: 0,
            space_start: 0,
            stats: OutputStats { enabled, ..Default::default() },
            memory: GapMemory::new(gap_memory),
        }
    }

    /// Classify a packet that is entirely below `next`.
    #[inline]
    pub(super) fn old(&mut self, s: u64, e: u64) -> Action {
        if self.memory.touches(s, e) {
            self.stats.late += 1;
            Action::Late
        } else {
            self.stats.duplicates += 1;
            Action::Duplicate
        }
    }

    pub(super) fn gap(&mut self, to: u64, reason: GapReason, now: u64, gaps: &mut VecDeque<GapReport>) {
        debug_assert!(to > self.next);
        let messages = to - self.next;
        gaps.push_back(GapReport {
            output: self.id,
            first_seq: self.next,
            last_seq: to - 1,
            messages,
            reason,
            at_ns: now,
        });
        self.memory.push(self.next, to);
        self.stats.gaps += 1;
        self.stats.messages_lost += messages;
        self.next = to;
    }

    /// Count a forwarded packet `[s, e)` that starts at or before `next`; returns the skip.
    #[inline]
    pub(super) fn deliver(&mut self, s: u64, e: u64, can_trim: bool) -> u32 {
        let skip = self.next.saturating_sub(s) as u32;
        self.stats.packets += 1;
        if skip > 0 && !can_trim {
            self.stats.messages += e - s;
            self.stats.redelivered += u64::from(skip);
        } else {
            self.stats.messages += e - s - u64::from(skip);
            if skip > 0 {
                self.stats.trimmed += 1;
            }
        }
        self.next = e;
        skip
    }

    pub(super) fn new_space(&mut self, seq: u64) {
        self.stats.sequence_span += self.next - self.space_start;
        self.next = seq;
        self.space_start = seq;
        self.memory.clear();
    }

    pub(super) fn span(&self) -> u64 {
        self.stats.sequence_span + (self.next - self.space_start)
    }
}

/// A packet in the HR buffer (or ready to be released from it).
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) seq: u64,
    pub(super) count: u32,
    /// Messages already delivered when it became ready (trim on release).
    pub(super) skip: u32,
    pub(super) slot: u32,
    pub(super) len: u32,
    pub(super) input: u8,
    pub(super) arrival: u64,
    pub(super) info: PacketInfo,
}

impl Entry {
    #[inline]
    pub(super) fn end(&self) -> u64 {
        self.seq + u64::from(self.count)
    }
}

/// The high-reliability buffer: early packets sorted by sequence number, plus those ready
/// to leave, in preallocated frame slots.
#[derive(Debug)]
pub(super) struct HrBuffer {
    pub(super) waiting: VecDeque<Entry>,
    pub(super) ready: VecDeque<Entry>,
    pub(super) slots: Vec<Vec<u8>>,
    pub(super) free: Vec<u32>,
    pub(super) bytes: usize,
    pub(super) waiting_msgs: u64,
    /// Earliest arrival among waiting packets (u64::MAX when none).
    pub(super) min_arrival: u64,
}

/// Initial capacity of each frame slot: a full Ethernet frame. A larger frame grows its
/// slot once; the slot keeps that size for reuse.
pub(super) const SLOT_BYTES: usize = 1536;

impl HrBuffer {
    pub(super) fn new(capacity_packets: usize) -> Self {
        let n = capacity_packets + 1;
        HrBuffer {
            waiting: VecDeque::with_capacity(n),
            ready: VecDeque::with_capacity(n),
            slots: (0..n).map(|_| Vec::with_capacity(SLOT_BYTES)).collect(),
            free: (0..n as u32).rev().collect(),
            bytes: 0,
            waiting_msgs: 0,
            min_arrival: u64::MAX,
        }
    }

    pub(super) fn store(&mut self, frame: &[u8]) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                // Only when the caller leaves released packets undrained: grow, never drop.
                self.slots.push(Vec::with_capacity(SLOT_BYTES));
                (self.slots.len() - 1) as u32
            }
        };
        let buf = &mut self.slots[slot as usize];
        buf.clear();
        buf.extend_from_slice(frame);
        self.bytes += frame.len();
        slot
    }

    pub(super) fn recompute_min_arrival(&mut self) {
        self.min_arrival = self.waiting.iter().map(|e| e.arrival).min().unwrap_or(u64::MAX);
    }
}

//! A straightforward A/B arbitrator, written the way one first would: a `BTreeMap` of
//! buffered packets, each copied into its own `Vec`, and a scan for the oldest on every
//! timer check. It is the peer the benchmarks measure [`crate::Arbitrator`] against, and a
//! second opinion in tests. Time policy only; no trimming, resets or accounting.

use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct NaiveArbitrator {
    started: bool,
    ll_next: u64,
    hr_next: u64,
    timeout_ns: u64,
    buffered: BTreeMap<u64, (u32, u64, Vec<u8>)>,
    pub ll_out: u64,
    pub hr_out: u64,
    pub gaps: u64,
}

impl NaiveArbitrator {
    pub fn new(timeout_ns: u64) -> Self {
        NaiveArbitrator { timeout_ns, ..Default::default() }
    }

    /// Handle a packet `[seq, seq+count)`; returns (forwarded on LL, released on HR).
    pub fn handle(&mut self, now: u64, seq: u64, count: u32, frame: &[u8], hr: bool) -> (bool, usize) {
        if !self.started {
            self.started = true;
            self.ll_next = seq;
            self.hr_next = seq;
        }
        let end = seq + u64::from(count);
        let ll = seq >= self.ll_next;
        if ll {
            self.ll_next = end;
            self.ll_out += 1;
        }
        if !hr {
            return (ll, 0);
        }
        let mut released = 0;
        // Expire: give up while the oldest buffered packet has waited too long.
        while let Some(oldest) = self.buffered.values().map(|v| v.1).min() {
            if oldest + self.timeout_ns > now {
                break;
            }
            let (&first, _) = self.buffered.iter().next().unwrap();
            self.gaps += 1;
            self.hr_next = first;
            released += self.release();
        }
        if seq == self.hr_next {
            self.hr_next = end;
            self.hr_out += 1;
            released += 1 + self.release();
        } else if seq > self.hr_next && !self.buffered.contains_key(&seq) {
            self.buffered.insert(seq, (count, now, frame.to_vec()));
        }
        (ll, released)
    }

    fn release(&mut self) -> usize {
        let mut n = 0;
        while let Some(entry) = self.buffered.first_entry() {
            if *entry.key() != self.hr_next {
                break;
            }
            let (count, _, _frame) = entry.remove();
            self.hr_next += u64::from(count);
            self.hr_out += 1;
            n += 1;
        }
        n
    }
}

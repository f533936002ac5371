//! The CPU's time-stamp counter, for stage latencies: reading it costs a few nanoseconds
//! and no system call. Ticks are turned into nanoseconds with a rate measured against the
//! OS clock over the run ([`TscClock`]).

use std::time::Instant;

/// Read the time-stamp counter (on other architectures: nanoseconds of a process clock).
#[inline(always)]
#[allow(unsafe_code)] // the RDTSC instruction
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions; it is part of every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Converts ticks to nanoseconds with a rate measured between [`TscClock::start`] and
/// [`TscClock::finish`] (the longer the run, the better the rate).
#[derive(Debug, Clone, Copy)]
pub struct TscClock {
    t0: Instant,
    c0: u64,
    ns_per_tick: f64,
}

impl TscClock {
    pub fn start() -> Self {
        TscClock { t0: Instant::now(), c0: rdtsc(), ns_per_tick: 1.0 }
    }
    /// Fix the rate from the time since `start` (at least 10 ms are waited for).
    pub fn finish(&mut self) {
        while self.t0.elapsed().as_millis() < 10 {
            std::hint::spin_loop();
        }
        let ns = self.t0.elapsed().as_nanos() as f64;
        let ticks = rdtsc().wrapping_sub(self.c0).max(1) as f64;
        self.ns_per_tick = ns / ticks;
    }
    pub fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }
    pub fn to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick).round() as u64
    }
}

/// CPU time the calling thread has used so far, in nanoseconds (Linux and other Unixes:
/// `CLOCK_THREAD_CPUTIME_ID`; 0 elsewhere). The pipeline reports each thread's share of
/// the run from it, which says which thread limits the run.
pub fn thread_cpu_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `t` is a valid, writable timespec for the duration of the call, and
        // CLOCK_THREAD_CPUTIME_ID is a clock every supported Unix has.
        #[allow(unsafe_code)]
        let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        if r != 0 {
            return 0;
        }
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The time a cache line takes to go from one core to another and back: two threads,
/// pinned to the first two cores, hand a counter to each other `rounds` times. `None`
/// with fewer than two cores.
///
/// A figure of the machine, not of tickplant: a run of the pipeline moves every packet
/// and record between cores. On the shared development machine this round trip changes
/// from one stretch of minutes to another, and `tickplant run` with it
/// (docs/perf-log/feed-handler.md); a throughput measured in the same minutes is read
/// beside it.
pub fn cross_core_round_trip_ns(rounds: u64) -> Option<f64> {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[repr(align(128))]
    struct Line(AtomicU64);
    // Spins, and yields now and then: where the two threads end up on one core (pinning
    // refused), the other one must get to run.
    fn wait_for(x: &AtomicU64, v: u64) {
        let mut n = 0u32;
        while x.load(Ordering::Acquire) != v {
            n += 1;
            if n.is_multiple_of(4096) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
    let cores = core_affinity::get_core_ids().filter(|c| c.len() >= 2)?;
    let (a, b) = (cores[0], cores[1]);
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let rounds = rounds.max(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            core_affinity::set_for_current(b);
            for i in 1..=rounds {
                wait_for(&ping.0, i);
                pong.0.store(i, Ordering::Release);
            }
        });
        let timed = s.spawn(|| {
            core_affinity::set_for_current(a);
            let t = Instant::now();
            for i in 1..=rounds {
                ping.0.store(i, Ordering::Release);
                wait_for(&pong.0, i);
            }
            t.elapsed().as_nanos() as f64 / rounds as f64
        });
        timed.join().ok()
    })
}

#[cfg(test)]
mod round_trip_tests {
    /// Two cores hand the counter back and forth: a time that is positive and finite (it
    /// does not hang when the threads share one core either; each spins only until the
    /// other runs).
    #[test]
    fn round_trip_is_measured() {
        if let Some(ns) = super::cross_core_round_trip_ns(2_000) {
            assert!(ns.is_finite() && ns > 0.0, "{ns}");
        }
    }
}

//! The CPU's time-stamp counter, for stage latencies: reading it costs a few nanoseconds
//! and no system call. Ticks are turned into nanoseconds with a rate measured against the
//! OS clock over the run ([`TscClock`]).

use std::time::Instant;

/// Read the time-stamp counter (on other architectures: nanoseconds of a process clock).
#[inline(always)]
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

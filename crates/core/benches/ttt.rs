//! Internal tick-to-trade: from the bytes of a market-data datagram in memory to the bytes
//! of the order ready to send (validate, walk the fields, decide, risk checks, patch the
//! pre-built order), per datagram, p50 and p99 against the targets (p50 <= 100 ns, p99 <=
//! 300 ns; FPGA reference 170 ns, x86 reference 4,663 ns).
//!
//! Two end marks per datagram: "order ready", read when the engine hands the finished
//! order to its output (the moment the target names: the bytes are ready to send), and
//! "datagram done", read when `on_market_data` returns (the fields after the deciding
//! entry walked too, the counts kept). The verdict is on the first; the second is printed
//! beside it.
//!
//! `cargo bench -p tickplant-core --bench ttt` (TICKPLANT_BENCH_ITERS=N for another count).

use std::hint::black_box;
use std::time::Instant;

#[path = "support/ttt.rs"]
mod support;

#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static T0: OnceLock<Instant> = OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Order ready and datagram done, from the same datagrams.
struct Figures {
    ready: Quantiles,
    done: Quantiles,
    len: usize,
}

/// p50, p99, p99.9 and the mean of the lower 99% (the top 1% are interrupts and the like:
/// finer than the counter's step, for comparing builds), in ns.
struct Quantiles {
    p50: f64,
    p99: f64,
    p999: f64,
    mean: f64,
}

fn quantiles(mut lat: Vec<u64>, ns_per_tick: f64) -> Quantiles {
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 * ns_per_tick;
    let body = &lat[..lat.len() * 99 / 100];
    let mean = body.iter().sum::<u64>() as f64 / body.len().max(1) as f64 * ns_per_tick;
    Quantiles { p50: q(0.5), p99: q(0.99), p999: q(0.999), mean }
}

fn run(entries: usize, iters: usize) -> Figures {
    let (mut f, msgs) = support::setup(entries);
    let mut seq = 1u64;
    let mut ready = Vec::with_capacity(iters);
    let mut done = Vec::with_capacity(iters);
    let t0 = Instant::now();
    let c0 = ticks();
    let mut now = 1_795_271_400_000_000_000u64;
    for i in 0..iters {
        now += support::DATAGRAM_GAP_NS;
        let m = &msgs[i % msgs.len()];
        let mut at = 0;
        let a = ticks();
        let n = f.on_market_data(now, black_box(m), &mut seq, &mut |_: u64, b: &[u8]| {
            black_box(b);
            at = ticks();
        });
        let b = ticks();
        assert_eq!(n.expect("valid"), 1, "one order per datagram (no risk check refuses)");
        ready.push(at - a);
        done.push(b - a);
    }
    let ns_per_tick = t0.elapsed().as_nanos() as f64 / (ticks() - c0) as f64;
    Figures { ready: quantiles(ready, ns_per_tick), done: quantiles(done, ns_per_tick), len: msgs[0].len() }
}

/// The cost of the two time-stamp reads around each datagram (included in the figures).
fn timer_overhead(iters: usize) -> f64 {
    let mut lat = Vec::with_capacity(iters);
    let (t0, c0) = (Instant::now(), ticks());
    for _ in 0..iters {
        let a = ticks();
        let b = ticks();
        lat.push(b - a);
    }
    let ns_per_tick = t0.elapsed().as_nanos() as f64 / (ticks() - c0) as f64;
    lat.sort_unstable();
    lat[lat.len() / 2] as f64 * ns_per_tick
}

fn main() {
    let iters: usize = std::env::var("TICKPLANT_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    println!("tick-to-trade in memory (datagram bytes -> order bytes ready), {iters} datagrams each, one order per datagram, every risk check on:");
    for entries in [1, 3] {
        let Figures { ready: r, done: d, len } = run(entries, iters);
        println!(
            "  {entries} entries ({len} bytes), order ready: p50 {:>6.1} ns  p99 {:>6.0} ns  p99.9 {:>6.0} ns  mean(99%) {:>6.1} ns | targets p50 <= 100 ns: {}, p99 <= 300 ns: {} | FPGA reference 170 ns, x86 reference 4,663 ns",
            r.p50,
            r.p99,
            r.p999,
            r.mean,
            if r.p50 <= 100.0 { "meets" } else { "MISSES" },
            if r.p99 <= 300.0 { "meets" } else { "MISSES" }
        );
        println!(
            "  {entries} entries ({len} bytes), datagram done: p50 {:>6.1} ns  p99 {:>6.0} ns  p99.9 {:>6.0} ns  mean(99%) {:>6.1} ns",
            d.p50, d.p99, d.p999, d.mean
        );
    }
    println!(
        "  (the figures include the two time-stamp reads around each datagram: {:.0} ns at p50; the time-stamp counter here ticks in steps of about 10 ns)",
        timer_overhead(iters.min(1_000_000))
    );
}

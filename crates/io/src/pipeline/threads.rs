//! The run's threads: their pins, checked against the cores the process may use, and how a
//! thread waits for work.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// The run's threads' pins, each named by its setting: the producer, the decode thread
/// (where there is one: with `decode-thread = false` its pin names no thread), each consumer.
pub(super) fn pins(spec: &PipelineSpec) -> impl Iterator<Item = (String, Option<usize>)> + '_ {
    let decode = if spec.decode_thread { spec.decode_core } else { None };
    [("run.producer-core".to_string(), spec.producer_core), ("run.decode-core".to_string(), decode)]
        .into_iter()
        .chain(spec.consumers.iter().map(|c| (format!("consumer {}: core", c.name), c.core)))
}

/// Every core the configuration pins a thread to must be one this process may run on: a
/// pin that cannot be made is an error, not a thread left to run anywhere.
pub(super) fn check_cores(spec: &PipelineSpec) -> Result<(), String> {
    let Some(ids) = core_affinity::get_core_ids() else { return Ok(()) };
    let have: Vec<usize> = ids.iter().map(|c| c.id).collect();
    for (what, core) in pins(spec) {
        if let Some(core) = core {
            if !have.contains(&core) {
                return Err(format!("{what} = {core}: not a core this process may run on (it may run on {have:?})"));
            }
        }
    }
    Ok(())
}

/// Whether a thread pinned to `core` has it to itself among the run's threads (none other
/// is pinned there): such a thread may spin while it waits. Threads that share a core, or
/// are not pinned, give it away instead (see [`pause`]).
pub(super) fn alone_on(spec: &PipelineSpec, core: Option<usize>) -> bool {
    alone_among(pins(spec).map(|(_, c)| c), core)
}

/// Whether exactly one of the threads' pins (`None`: not pinned) is `core`.
pub(super) fn alone_among(pins: impl Iterator<Item = Option<usize>>, core: Option<usize>) -> bool {
    core.is_some() && pins.filter(|&c| c == core).count() == 1
}

/// Pin the calling thread to CPU `core` (if there is one by that id). A thread inherits its
/// creator's cores: the producer (the calling thread) is pinned only after the decode and
/// consumer threads are started, or every one of them would be confined to its core.
pub(super) fn pin(core: usize) {
    if let Some(id) = core_affinity::get_core_ids().and_then(|v| v.into_iter().find(|c| c.id == core)) {
        core_affinity::set_for_current(id);
    }
}

/// Polls that spin, polls before the sleeps begin, and a sleep's µs (see [`pause`]).
fn phases(alone: bool) -> (u32, u32, u64) {
    if alone {
        (256, 512, 50)
    } else {
        (0, 16, 100)
    }
}

/// Wait for work (`idle`: polls that found nothing so far). A thread pinned to a core of
/// its own (`alone`, see [`alone_on`]) polls hard, then politely, then sleeps a little: its
/// spinning costs no one. A thread that shares a core, pinned there with another or not
/// pinned at all, gives it away at once and sleeps soon: on this 2-core machine the
/// consumers' spinning took half of their threads' samples, time the producer and the
/// decode thread were waiting for. (Before 2026-11-25 any pinned thread spun, even one
/// pinned beside others: consumers pinned to the producer's core took 0.146 s of CPU
/// instead of about 0.03.)
pub(super) fn pause(idle: u32, alone: bool) {
    let (spin, polite, sleep_us) = phases(alone);
    if idle < spin {
        std::hint::spin_loop();
    } else if idle < polite {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(sleep_us));
    }
}

/// A thread that waits for a ring parks on its bell; the thread that fills the ring rings
/// it (once a batch). A sleep of a fixed length made each hop of a quiet feed cost the rest
/// of the sleep and the kernel's timer slack: `tickplant bench live --rates 5000` had its
/// receive-to-consumer p50 at 195-237 us, 62-70 us with the bells (docs/perf-log/live.md).
#[derive(Debug, Default)]
pub(super) struct Bell {
    parked: AtomicBool,
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl Bell {
    /// Wake the thread if it is parked. Call it after the ring's push (the fence orders the
    /// push before the look at `parked`, as [`Bell::park`] orders its mark before its look
    /// at the ring: one of the two sees the other).
    #[inline]
    pub(super) fn ring(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.ring_fenced();
    }
    /// [`Bell::ring`] after a fence of the caller's own (one for several bells).
    #[inline]
    pub(super) fn ring_fenced(&self) {
        if self.parked.load(Ordering::Relaxed) {
            self.wake();
        }
    }
    #[cold]
    fn wake(&self) {
        self.parked.store(false, Ordering::Relaxed);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }
    /// Park the calling thread (always the same one) until rung, or for `max`, unless
    /// `ready` finds work once it is marked parked.
    fn park(&self, ready: impl FnOnce() -> bool, max: Duration) {
        self.thread.get_or_init(std::thread::current);
        self.parked.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        if !ready() {
            std::thread::park_timeout(max);
        }
        self.parked.store(false, Ordering::Relaxed);
    }
}

/// How a thread waits for work on its ring: as [`pause`] does, parking on the ring's bell
/// where [`pause`] sleeps, and for as long at most (then it looks again, for its idle
/// duties: commands, metrics, a trader's session).
pub(super) struct Waiter {
    /// The thread has its core to itself (see [`alone_on`]).
    pub(super) alone: bool,
    pub(super) bell: Arc<Bell>,
}

impl Waiter {
    /// `idle`: polls that found nothing so far; `ready`: the ring has work.
    pub(super) fn wait(&self, idle: u32, ready: impl FnOnce() -> bool) {
        if idle < phases(self.alone).1 {
            pause(idle, self.alone);
        } else {
            self.bell.park(ready, Duration::from_micros(phases(self.alone).2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_thread_alone_on_its_core_spins() {
        let pins = [Some(0), Some(1), Some(0), None];
        // The second thread has core 1 to itself; the first and third share core 0.
        assert!(alone_among(pins.into_iter(), Some(1)));
        assert!(!alone_among(pins.into_iter(), Some(0)));
        // An unpinned thread shares every core.
        assert!(!alone_among(pins.into_iter(), None));
        assert!(alone_among([Some(3)].into_iter(), Some(3)));
    }

    /// A consumer that parks whenever its ring is empty, for up to 10 s, gets every item of
    /// a producer that rings after each push, and never sleeps out a park: a wake-up lost
    /// between its look at the ring and the producer's look at its mark would.
    #[test]
    fn a_rung_bell_wakes_its_thread_and_no_wake_up_is_lost() {
        const N: u64 = 20_000;
        let max = Duration::from_secs(10);
        let bell = Arc::new(Bell::default());
        let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(4);
        let b = bell.clone();
        let consumer = std::thread::spawn(move || {
            let (mut sum, mut got, mut slept_out) = (0u64, 0u64, 0u32);
            while got < N {
                match rx.pop() {
                    Ok(x) => {
                        sum += x;
                        got += 1;
                    }
                    Err(_) => {
                        let t = Instant::now();
                        b.park(|| !rx.is_empty(), max);
                        slept_out += u32::from(t.elapsed() >= max);
                    }
                }
            }
            (sum, slept_out)
        });
        for x in 1..=N {
            while tx.push(x).is_err() {
                std::thread::yield_now();
            }
            bell.ring();
            if x % 64 == 0 {
                // Let the consumer empty the ring and park now and then.
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let (sum, slept_out) = consumer.join().unwrap();
        assert_eq!(sum, N * (N + 1) / 2);
        assert_eq!(slept_out, 0, "a park ran out its time: a wake-up was lost");
    }
}

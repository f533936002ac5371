//! The run's threads: their pins, checked against the cores the process may use, and how a
//! thread waits for work.

use super::*;

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

/// Wait for work (`idle`: polls that found nothing so far). A thread pinned to a core of
/// its own (`alone`, see [`alone_on`]) polls hard, then politely, then sleeps a little: its
/// spinning costs no one. A thread that shares a core, pinned there with another or not
/// pinned at all, gives it away at once and sleeps soon: on this 2-core machine the
/// consumers' spinning took half of their threads' samples, time the producer and the
/// decode thread were waiting for. (Before 2026-11-25 any pinned thread spun, even one
/// pinned beside others: consumers pinned to the producer's core took 0.146 s of CPU
/// instead of about 0.03.)
pub(super) fn pause(idle: u32, alone: bool) {
    let (spin, polite, sleep_us) = if alone { (256, 512, 50) } else { (0, 16, 100) };
    if idle < spin {
        std::hint::spin_loop();
    } else if idle < polite {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(sleep_us));
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
}

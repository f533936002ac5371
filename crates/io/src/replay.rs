//! Paced replay: captures sent as live traffic (`tickplant replay`).
//!
//! Each capture goes to its own destination; several are merged in capture-time order, so
//! that A and B keep their recorded skew. Each frame's UDP payload is sent at a deadline
//! fixed from the first frame (the recorded spacing divided by the speed, or a fixed rate,
//! or none), never from the previous send: a late send does not push the rest later, so
//! a long replay does not drift. The thread sleeps while the next deadline is more than
//! [`SPIN_NS`] away and spins the rest, since a sleep wakes some microseconds late (tens
//! with the kernel's default timer slack, which the replay sets to its least). As fast as
//! it goes (`--max`), each capture is sent from a thread of its own.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tickplant_core::packed::Packed;
use tickplant_core::seq::udp_payload_and_destination;

use crate::live::{UdpSender, UdpUrl, UrlError};
use crate::pcap::{FrameReader, MergedReader, PcapError};

/// Below this much time to the next deadline the sender spins rather than sleeps. With the
/// timer slack at its least, 50 us spins half as much as 200 did at 10,000 packets a
/// second for the same lateness (p99 18.6 against 13.9-20.3 us); 20 us spun a quarter,
/// but sends were late by 4.7 us at p50 (`tickplant replay --pps 10000`, CPU time from
/// `time`; docs/perf-log/live.md).
pub const SPIN_NS: u64 = 50_000;

/// One capture and where its datagrams go: `FILE[#GROUP:PORT]=GROUP:PORT[@IFACE_ADDR]`.
/// With `#GROUP:PORT`, only the datagrams the capture holds to that destination are sent
/// (one line of a capture that holds several, as a tap records a feed's A and B).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayTarget {
    pub path: PathBuf,
    /// The recorded destination to send, when not every one.
    pub only: Option<std::net::SocketAddrV4>,
    pub to: UdpUrl,
}

impl std::str::FromStr for ReplayTarget {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<ReplayTarget, UrlError> {
        let err = |reason: &str| UrlError { url: s.to_string(), reason: reason.to_string() };
        let (path, dest) = s.rsplit_once('=').ok_or_else(|| err("not FILE[#GROUP:PORT]=GROUP:PORT[@IFACE_ADDR]"))?;
        // `#GROUP:PORT` after the file names the recorded destination to send (a '#' not
        // followed by something with a ':' is the path's own).
        let (path, only) = match path.rsplit_once('#') {
            Some((p, sel)) => match sel.parse::<std::net::SocketAddrV4>() {
                Ok(a) => (p, Some(a)),
                Err(_) if sel.contains(':') => {
                    return Err(err(&format!("#{sel}: not a recorded destination GROUP:PORT")))
                }
                Err(_) => (path, None),
            },
            None => (path, None),
        };
        if path.is_empty() {
            return Err(err("no FILE before '='"));
        }
        let (addr, iface) = match dest.split_once('@') {
            Some((a, i)) => (a, Some(i)),
            None => (dest, None),
        };
        let mut url = format!("udp://{addr}");
        if let Some(i) = iface {
            url += &format!("?iface={i}");
        }
        let to: UdpUrl = url.parse().map_err(|e: UrlError| UrlError { url: s.to_string(), reason: e.reason })?;
        Ok(ReplayTarget { path: PathBuf::from(path), only, to })
    }
}

/// How fast the frames go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// The recorded spacing divided by this (1: as recorded).
    Speed(f64),
    /// A fixed rate, packets a second, whatever the recorded spacing.
    Pps(f64),
    /// As fast as the sockets take them; with several targets, a thread each.
    Max,
}

/// How a replay runs.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub pace: Pace,
    /// Play the captures this many times (each pass after the first starts where the last
    /// ended, on the same clock).
    pub loops: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Raised to stop early (SIGINT, SIGTERM).
    pub stop: Arc<AtomicBool>,
}

/// What a replay did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReplayReport {
    /// Datagrams sent, by target (in the order given).
    pub sent: Vec<u64>,
    pub frames_sent: u64,
    pub bytes_sent: u64,
    /// Frames that are not UDP datagrams (ARP, TCP, fragments, ...): skipped.
    pub skipped_not_udp: u64,
    /// Datagrams to other destinations than a target's `#GROUP:PORT`: not sent.
    pub skipped_other_destination: u64,
    /// The recorded destinations of each target's datagrams, with how many went (by
    /// target, in the order given): a capture holding several, sent to one destination
    /// without a `#GROUP:PORT`, mixes them (see [`ReplayReport::warnings`]).
    pub recorded_destinations: Vec<Vec<(String, u64)>>,
    /// Frames the capture cut short (its snapshot length) inside their datagram: skipped,
    /// their datagrams not sent.
    pub skipped_cut_short: u64,
    /// Sends the OS refused (a full buffer, no route): counted, the replay goes on.
    pub send_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_send_error: Option<String>,
    pub seconds: f64,
    pub packets_per_s: f64,
    /// How late each send was against its deadline, ns (0 for --max).
    pub late_p50_ns: u64,
    pub late_p99_ns: u64,
    pub late_max_ns: u64,
    /// Whether it was stopped (signal or duration) before the end of the captures.
    pub stopped: bool,
}

impl ReplayReport {
    /// What the replay should warn of: a capture whose datagrams went to several
    /// destinations (a tap's capture of a feed's A and B lines, or of several channels), all
    /// sent to one.
    pub fn warnings(&self, targets: &[ReplayTarget]) -> Vec<String> {
        targets
            .iter()
            .zip(&self.recorded_destinations)
            .filter(|(t, d)| t.only.is_none() && d.len() > 1)
            .map(|(t, d)| {
                let each: Vec<String> = d.iter().map(|(to, n)| format!("{to}: {n}")).collect();
                format!(
                    "{} holds datagrams to {} destinations ({}), all sent to {}: where they are a feed's \
                     lines or channels, replay each to its own with {}#{}=GROUP:PORT",
                    t.path.display(),
                    d.len(),
                    each.join(", "),
                    t.to,
                    t.path.display(),
                    d[0].0
                )
            })
            .collect()
    }
}

/// Why a replay could not run.
#[derive(Debug)]
pub enum ReplayError {
    Capture(PcapError),
    Send(crate::live::LiveError),
    Options(String),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Capture(e) => e.fmt(f),
            ReplayError::Send(e) => e.fmt(f),
            ReplayError::Options(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ReplayError {}

impl From<PcapError> for ReplayError {
    fn from(e: PcapError) -> Self {
        ReplayError::Capture(e)
    }
}

/// Send every frame of the targets' captures to their destinations, paced; `progress` is
/// called about once a second with the frames sent so far.
pub fn replay(
    targets: &[ReplayTarget],
    opts: &ReplayOptions,
    mut progress: impl FnMut(u64),
) -> Result<ReplayReport, ReplayError> {
    if targets.is_empty() {
        return Err(ReplayError::Options("nothing to replay: give FILE=GROUP:PORT".into()));
    }
    match opts.pace {
        Pace::Speed(x) if !(x > 0.0 && x.is_finite()) => {
            return Err(ReplayError::Options(format!("--speed {x}: a factor above 0 (1 replays as recorded)")))
        }
        Pace::Pps(x) if !(x > 0.0 && x.is_finite()) => {
            return Err(ReplayError::Options(format!("--pps {x}: a rate above 0 packets a second")))
        }
        _ => {}
    }
    let mut senders =
        targets.iter().map(|t| UdpSender::open(&t.to)).collect::<Result<Vec<_>, _>>().map_err(ReplayError::Send)?;
    // Every capture opens before anything is sent (a thread's target would otherwise go
    // out while another's file is missing); the first pass reads these.
    let readers = targets.iter().map(|t| FrameReader::open(&t.path)).collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let sent_so_far = AtomicU64::new(0);
    let halt = AtomicBool::new(false);
    let run = Run { opts, started, sent_so_far: &sent_so_far, halt: &halt };
    let outcome = if opts.pace == Pace::Max && targets.len() > 1 {
        // As fast as it goes, each target has a thread of its own: the time is the kernel's
        // (97% of a one-thread replay's samples), and a target's datagrams need no order
        // against another's. Two threads send 1.8-2.2 times what one does on two cores
        // (`tickplant replay --max`, docs/perf-log/live.md).
        std::thread::scope(|scope| {
            let threads: Vec<_> = targets
                .iter()
                .zip(senders.iter_mut())
                .zip(readers)
                .map(|((t, sender), reader)| {
                    let run = &run;
                    scope.spawn(move || {
                        let outcome =
                            run.send(std::slice::from_ref(t), std::slice::from_mut(sender), vec![reader], &mut |_| {});
                        if outcome.is_err() {
                            run.halt.store(true, Ordering::Relaxed);
                        }
                        outcome
                    })
                })
                .collect();
            let mut next_progress = started + Duration::from_secs(1);
            while !threads.iter().all(|t| t.is_finished()) {
                std::thread::sleep(Duration::from_millis(20));
                if Instant::now() >= next_progress {
                    next_progress = Instant::now() + Duration::from_secs(1);
                    progress(sent_so_far.load(Ordering::Relaxed));
                }
            }
            let mut all = Outcome::new(0);
            for t in threads {
                let one = t.join().expect("a replay thread panicked")?;
                all.dests.extend(one.dests);
                all.skipped_other += one.skipped_other;
                all.skipped_not_udp += one.skipped_not_udp;
                all.skipped_cut_short += one.skipped_cut_short;
                all.stopped |= one.stopped;
                all.late.add(&one.late).expect("the same bounds");
            }
            Ok::<Outcome, ReplayError>(all)
        })?
    } else {
        run.send(targets, &mut senders, readers, &mut progress)?
    };
    let seconds = started.elapsed().as_secs_f64();
    let mut report = ReplayReport {
        sent: senders.iter().map(|s| s.sent).collect(),
        skipped_not_udp: outcome.skipped_not_udp,
        skipped_other_destination: outcome.skipped_other,
        recorded_destinations: outcome
            .dests
            .iter()
            .map(|d| d.iter().map(|(ip, port, n)| (format!("{}:{port}", std::net::Ipv4Addr::from(*ip)), *n)).collect())
            .collect(),
        skipped_cut_short: outcome.skipped_cut_short,
        stopped: outcome.stopped,
        ..Default::default()
    };
    report.frames_sent = report.sent.iter().sum();
    report.bytes_sent = senders.iter().map(|s| s.bytes).sum();
    report.send_errors = senders.iter().map(|s| s.errors).sum();
    report.last_send_error = senders.iter().rev().find_map(|s| s.last_error.clone());
    report.seconds = seconds;
    report.packets_per_s = report.frames_sent as f64 / seconds.max(1e-9);
    let late = &outcome.late;
    if !late.is_empty() {
        report.late_p50_ns = late.value_at_quantile(0.5);
        report.late_p99_ns = late.value_at_quantile(0.99);
        report.late_max_ns = late.max();
    }
    Ok(report)
}

/// What one sending thread shares with the others.
struct Run<'a> {
    opts: &'a ReplayOptions,
    /// The deadlines' zero.
    started: Instant,
    /// Frames sent by every thread, counted in steps of 1,024 (for the progress lines).
    sent_so_far: &'a AtomicU64,
    /// Raised when a thread fails: the others stop.
    halt: &'a AtomicBool,
}

/// What one sending thread saw.
struct Outcome {
    /// By target: each recorded destination (address, port) and the datagrams sent of it.
    dests: Vec<Vec<([u8; 4], u16, u64)>>,
    /// Datagrams to a destination other than the target's `#GROUP:PORT`.
    skipped_other: u64,
    skipped_not_udp: u64,
    skipped_cut_short: u64,
    stopped: bool,
    late: Histogram<u64>,
}

impl Outcome {
    fn new(targets: usize) -> Outcome {
        let late = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        Outcome {
            dests: vec![Vec::new(); targets],
            skipped_other: 0,
            skipped_not_udp: 0,
            skipped_cut_short: 0,
            stopped: false,
            late,
        }
    }
}

impl Run<'_> {
    /// Send `targets`' captures, merged in capture-time order, each to its sender; the
    /// first pass reads `first` (the captures opened), later ones open them again.
    fn send(
        &self,
        targets: &[ReplayTarget],
        senders: &mut [UdpSender],
        first: Vec<FrameReader>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<Outcome, ReplayError> {
        let opts = self.opts;
        let started = self.started;
        let mut out = Outcome::new(targets.len());
        let only: Vec<Option<([u8; 4], u16)>> =
            targets.iter().map(|t| t.only.map(|a| (a.ip().octets(), a.port()))).collect();
        let _slack = TimerSlack::least();
        let end_at = opts.duration.map(|d| started + d);
        let mut next_progress = started + Duration::from_secs(1);
        // The deadline clock: ns after `started`. A pass's frames are placed at `pass_base`
        // plus their recorded offset (scaled); the next pass starts after the last one's end.
        let mut pass_base = 0u64;
        let mut n = 0u64;
        // Datagrams whose time has come, by target, sent together (`sendmmsg`) when a batch
        // fills, before a wait for a later deadline, and at the end.
        // Paced, each goes at once while the sender keeps up: a batch sent late makes the
        // ones after it late too (`tickplant replay --pps 100000`: p99 lateness 32-44 us
        // batched, 8 us not). A sender [`BEHIND_NS`] behind batches until it has caught up:
        // one at a time, it would not (`tickplant bench live` offered a million messages a
        // second).
        let mut pending: Vec<Packed> = targets.iter().map(|_| Packed::new()).collect();
        let mut queued = 0usize;
        let mut first = Some(first);
        'passes: for _ in 0..opts.loops.max(1) {
            let readers = match first.take() {
                Some(r) => r,
                None => targets.iter().map(|t| FrameReader::open(&t.path)).collect::<Result<Vec<_>, _>>()?,
            };
            let links: Vec<_> = readers.iter().map(|r| r.link_type()).collect();
            let mut merged = MergedReader::new(readers);
            let mut first_ts = None;
            let mut pass_end = pass_base;
            while let Some((input, f)) = merged.next_frame()? {
                let Ok((range, ip, port)) = udp_payload_and_destination(links[input], f.data) else {
                    if f.is_cut_short() {
                        out.skipped_cut_short += 1;
                    } else {
                        out.skipped_not_udp += 1;
                    }
                    continue;
                };
                if only[input].is_some_and(|o| o != (ip, port)) {
                    out.skipped_other += 1;
                    continue;
                }
                // A handful of destinations at most: a line's search beats a map.
                let dests = &mut out.dests[input];
                match dests.iter_mut().find(|d| d.0 == ip && d.1 == port) {
                    Some(d) => d.2 += 1,
                    None => dests.push((ip, port, 1)),
                }
                let deadline = match opts.pace {
                    Pace::Max => None,
                    Pace::Speed(x) => {
                        let t0 = *first_ts.get_or_insert(f.ts_ns);
                        Some(pass_base + (f.ts_ns.saturating_sub(t0) as f64 / x) as u64)
                    }
                    Pace::Pps(r) => Some((n as f64 * 1e9 / r) as u64),
                };
                let batch = match deadline {
                    None => true,
                    Some(d) => {
                        pass_end = pass_end.max(d);
                        let mut now = started.elapsed().as_nanos() as u64;
                        if now < d {
                            flush(&mut pending, senders, &mut queued);
                            wait_until(started, d);
                            now = started.elapsed().as_nanos() as u64;
                        }
                        out.late.saturating_record(now.saturating_sub(d).max(1));
                        now - d >= BEHIND_NS
                    }
                };
                if batch {
                    pending[input].push(&f.data[range]);
                    queued += 1;
                    if queued >= FLUSH_AT {
                        flush(&mut pending, senders, &mut queued);
                    }
                } else {
                    // In time: anything queued goes first, in order.
                    flush(&mut pending, senders, &mut queued);
                    senders[input].send(&f.data[range]);
                }
                n += 1;
                if n.is_multiple_of(1024) {
                    let so_far = self.sent_so_far.fetch_add(1024, Ordering::Relaxed) + 1024;
                    if opts.stop.load(Ordering::Relaxed)
                        || self.halt.load(Ordering::Relaxed)
                        || end_at.is_some_and(|e| Instant::now() >= e)
                    {
                        out.stopped = true;
                        break 'passes;
                    }
                    if Instant::now() >= next_progress {
                        next_progress = Instant::now() + Duration::from_secs(1);
                        progress(so_far);
                    }
                }
            }
            // The next pass after this one's span, one recorded gap's worth later.
            pass_base = pass_end + 1;
        }
        flush(&mut pending, senders, &mut queued);
        Ok(out)
    }
}

/// A paced sender this far behind its deadline sends in batches (see [`replay`]).
const BEHIND_NS: u64 = 50_000;

/// Queued datagrams (`--max`, or a paced sender behind) are sent this many at a time
/// (`sendmmsg`): within a batch a target's datagrams go before the next target's, so one
/// thread's targets interleave by batches, not one by one. 128 rather than 32: fewer
/// calls (`tickplant replay --max`, docs/perf-log/live.md).
const FLUSH_AT: usize = 128;

/// Send what is queued for each target (the datagrams of `pending[k]` to `senders[k]`).
fn flush(pending: &mut [Packed], senders: &mut [UdpSender], queued: &mut usize) {
    // A paced sender in time calls this before each datagram: nothing queued, nothing to do.
    if *queued == 0 {
        return;
    }
    for (p, s) in pending.iter_mut().zip(senders.iter_mut()) {
        if !p.is_empty() {
            s.send_many(p);
            p.clear();
        }
    }
    *queued = 0;
}

/// The calling thread's timer slack at its least (1 ns) while held, then as it was: a sleep
/// wakes when asked, not up to 50 µs later (the kernel's default slack), so the sender
/// sleeps closer to each deadline and spins less ([`SPIN_NS`]).
struct TimerSlack(Option<libc::c_ulong>);

impl TimerSlack {
    #[allow(unsafe_code)] // prctl
    fn least() -> TimerSlack {
        // SAFETY: PR_GET_TIMERSLACK and PR_SET_TIMERSLACK read and set a number of the
        // calling thread; no memory is passed.
        let was = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        if was < 0 {
            return TimerSlack(None);
        }
        // SAFETY: as above.
        if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
            return TimerSlack(None);
        }
        TimerSlack(Some(was as libc::c_ulong))
    }
}

impl Drop for TimerSlack {
    #[allow(unsafe_code)] // prctl
    fn drop(&mut self) {
        if let Some(was) = self.0 {
            // SAFETY: as in `least`.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, was) };
        }
    }
}

/// Sleep, then spin, until `deadline` ns after `started`.
fn wait_until(started: Instant, deadline: u64) {
    loop {
        let now = started.elapsed().as_nanos() as u64;
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_NS {
            std::thread::sleep(Duration::from_nanos(left - SPIN_NS));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay's thread has its timer slack at 1 ns while the guard is held, and as it
    /// was after.
    #[test]
    #[allow(unsafe_code)] // prctl
    fn the_timer_slack_is_least_while_held_then_as_it_was() {
        // SAFETY: PR_GET_TIMERSLACK reads a number of the calling thread.
        let get = || unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        let was = get();
        {
            let _slack = TimerSlack::least();
            assert_eq!(get(), 1);
        }
        assert_eq!(get(), was);
        assert_ne!(was, 1, "the default slack is not the least");
    }

    /// Paced at a rate no sender reaches, the replay falls behind and sends in batches:
    /// each destination still gets each of its datagrams once, in order.
    #[test]
    fn a_sender_behind_its_deadlines_sends_everything_in_order() {
        let report = each_datagram_once_in_order(Pace::Pps(50_000_000.0));
        assert!(report.late_p99_ns >= BEHIND_NS, "it fell behind: {report:?}");
    }

    /// With `--max` each target is sent from a thread of its own: each destination gets
    /// each of its datagrams once, in order, and the report counts them all.
    #[test]
    fn at_most_speed_each_target_has_its_thread_and_loses_nothing() {
        let report = each_datagram_once_in_order(Pace::Max);
        assert_eq!(report.late_p99_ns, 0, "--max has no deadlines: {report:?}");
        assert!(!report.stopped);
    }

    /// Two captures of numbered datagrams replayed to two receivers at `pace`: both get
    /// their own capture's datagrams, each once, in order.
    fn each_datagram_once_in_order(pace: Pace) -> ReplayReport {
        use crate::pcap::{Format, FrameWriter};
        use std::net::UdpSocket;
        // The receivers hold everything until the replay ends: as many datagrams as their
        // buffers take (16 MB where the process may go past the system's cap, 2,000 then),
        // and more than a batch in any case.
        let rx: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let mut room = usize::MAX;
        for s in &rx {
            let s = socket2::SockRef::from(s);
            crate::live::set_rcvbuf(&s, 16 << 20).unwrap();
            room = room.min(s.recv_buffer_size().unwrap());
        }
        let n = (room / 2_048).min(2_000) as u64;
        assert!(n > FLUSH_AT as u64, "receive buffers of {room} bytes hold too few datagrams");
        let dir = tempfile::tempdir().unwrap();
        let mut targets = Vec::new();
        for (k, name) in ["a.pcap", "b.pcap"].into_iter().enumerate() {
            let path = dir.path().join(name);
            let mut w = FrameWriter::create(&path, tickplant_core::LinkType::Ethernet, Format::PcapNs).unwrap();
            for i in 0..n {
                let payload = [i.to_be_bytes(), (k as u64).to_be_bytes()].concat();
                let frame = tickplant_wire::build::udp_frame(&Default::default(), i as u16, &payload);
                w.write(1_000 * i + k as u64, &frame).unwrap();
            }
            w.finish().unwrap();
            let to = format!("udp://{}", rx[k].local_addr().unwrap()).parse().unwrap();
            targets.push(ReplayTarget { path, only: None, to });
        }
        let opts = ReplayOptions { pace, loops: 1, duration: None, stop: Arc::new(AtomicBool::new(false)) };
        let report = replay(&targets, &opts, |_| {}).unwrap();
        assert_eq!(report.sent, vec![n, n]);
        assert_eq!(report.frames_sent, 2 * n);
        for (k, s) in rx.iter().enumerate() {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 64];
            for i in 0..n {
                let len = s.recv(&mut buf).unwrap();
                assert_eq!(&buf[..len], [i.to_be_bytes(), (k as u64).to_be_bytes()].concat(), "target {k}");
            }
            s.set_nonblocking(true).unwrap();
            assert!(s.recv(&mut buf).is_err(), "target {k}: nothing more");
        }
        report
    }

    /// A capture that does not open stops the replay before anything is sent, whatever
    /// the pace: with `--max`, the other target's thread has not sent its capture.
    #[test]
    fn a_missing_capture_sends_nothing() {
        use crate::pcap::{Format, FrameWriter};
        use std::net::UdpSocket;
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.pcap");
        let mut w = FrameWriter::create(&path, tickplant_core::LinkType::Ethernet, Format::PcapNs).unwrap();
        for i in 0..10u64 {
            w.write(i, &tickplant_wire::build::udp_frame(&Default::default(), 1, &i.to_be_bytes())).unwrap();
        }
        w.finish().unwrap();
        let to: UdpUrl = format!("udp://{}", rx.local_addr().unwrap()).parse().unwrap();
        let targets = [
            ReplayTarget { path, only: None, to },
            ReplayTarget { path: dir.path().join("missing.pcap"), only: None, to },
        ];
        for pace in [Pace::Max, Pace::Pps(1e6)] {
            let opts = ReplayOptions { pace, loops: 1, duration: None, stop: Arc::new(AtomicBool::new(false)) };
            let e = replay(&targets, &opts, |_| {}).unwrap_err();
            assert!(e.to_string().contains("missing.pcap"), "{e}");
            rx.set_nonblocking(true).unwrap();
            assert!(rx.recv(&mut [0u8; 64]).is_err(), "{pace:?}: nothing was sent");
        }
    }

    /// A capture of two lines (as a tap records A and B): each named line goes to its own
    /// destination, every datagram of it and nothing of the other's; the whole capture to
    /// one destination is sent, and warned of.
    #[test]
    fn a_capture_of_two_lines_replays_line_by_line() {
        use crate::pcap::{Format, FrameWriter};
        use std::net::UdpSocket;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("both.pcap");
        let mut w = FrameWriter::create(&path, tickplant_core::LinkType::Ethernet, Format::PcapNs).unwrap();
        for i in 0..50u64 {
            for (line, last) in [(b'A', 111u8), (b'B', 112)] {
                let flow =
                    tickplant_wire::build::Flow { dst_ip: [233, 54, 12, last], dst_port: 26400, ..Default::default() };
                let payload = [&[line][..], &i.to_be_bytes()].concat();
                w.write(1_000 * i + u64::from(line), &tickplant_wire::build::udp_frame(&flow, i as u16, &payload))
                    .unwrap();
            }
        }
        w.finish().unwrap();
        let rx: Vec<UdpSocket> = (0..2).map(|_| UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let spec = |sel: &str, k: usize| -> ReplayTarget {
            format!("{}{sel}={}", path.display(), rx[k].local_addr().unwrap()).parse().unwrap()
        };
        let targets = [spec("#233.54.12.111:26400", 0), spec("#233.54.12.112:26400", 1)];
        assert_eq!(targets[0].only, Some("233.54.12.111:26400".parse().unwrap()));
        let opts =
            ReplayOptions { pace: Pace::Pps(1e6), loops: 1, duration: None, stop: Arc::new(AtomicBool::new(false)) };
        let report = replay(&targets, &opts, |_| {}).unwrap();
        assert_eq!(report.sent, vec![50, 50]);
        assert_eq!(report.skipped_other_destination, 100, "each target passes over the other line's");
        assert!(report.warnings(&targets).is_empty());
        let mut buf = [0u8; 64];
        for (k, line) in [b'A', b'B'].into_iter().enumerate() {
            rx[k].set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            for i in 0..50u64 {
                let n = rx[k].recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], [&[line][..], &i.to_be_bytes()].concat(), "line {k}");
            }
        }
        // All of it to one destination: sent, and warned of with the way to split it.
        let one = [spec("", 0)];
        let report = replay(&one, &opts, |_| {}).unwrap();
        assert_eq!(report.sent, vec![100]);
        let warned = report.warnings(&one);
        assert_eq!(warned.len(), 1);
        assert!(
            warned[0].contains("2 destinations (233.54.12.111:26400: 50, 233.54.12.112:26400: 50)")
                && warned[0].contains("both.pcap#233.54.12.111:26400=GROUP:PORT"),
            "{warned:?}"
        );
        let e = format!("{}#239.1.1:x=127.0.0.1:9", path.display()).parse::<ReplayTarget>().unwrap_err();
        assert!(e.reason.contains("not a recorded destination"), "{e}");
        let t: ReplayTarget = "take#2.pcap=127.0.0.1:9".parse().unwrap();
        assert_eq!((t.path, t.only), (PathBuf::from("take#2.pcap"), None), "a '#' of the path's own");
    }

    #[test]
    fn targets_parse_and_say_what_is_wrong() {
        let t: ReplayTarget = "a.pcap=239.1.1.1:5000@10.0.0.2".parse().unwrap();
        assert_eq!(t.path, PathBuf::from("a.pcap"));
        assert_eq!(t.to.port, 5000);
        assert_eq!(t.to.iface, Some("10.0.0.2".parse().unwrap()));
        let t: ReplayTarget = "dir/x=y.pcap=127.0.0.1:9".parse().unwrap();
        assert_eq!(t.path, PathBuf::from("dir/x=y.pcap"), "the last '=' splits");
        for bad in ["a.pcap", "=239.1.1.1:5000", "a.pcap=239.1.1.1", "a.pcap=239.1.1.1:5000@eth0"] {
            let e = bad.parse::<ReplayTarget>().unwrap_err();
            assert_eq!(e.url, bad, "{e}");
        }
    }
}

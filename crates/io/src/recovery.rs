//! Recovery over the network: a GLIMPSE snapshot fetched over SoupBinTCP
//! ([`fetch_snapshot`]), and a late join ([`late_join`]): the live feed buffered while the
//! snapshot comes, then handed on from the snapshot's sequence number by [`Prefixed`].
//!
//! The sessions themselves are `tickplant_core::glimpse`'s (sans-IO); here are the socket,
//! the clock and the retries.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use tickplant_core::glimpse::{Glimpse, GlimpseError, Snapshot, SoupClient, SoupError, SoupLogin};
use tickplant_core::{LinkType, PacketKind, Sequencer};

use crate::pcap::Frame;
use crate::source::Source;

/// Where and how to take a snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotConfig {
    /// The GLIMPSE server, `HOST:PORT`.
    pub server: String,
    pub login: SoupLogin,
    /// Attempts after the first, for a connection that failed or ended mid-snapshot, and
    /// for a snapshot behind the live feed.
    pub retries: u32,
    /// One attempt's limit.
    pub timeout: Duration,
    /// The live feed buffered while the snapshot comes, at most this many bytes.
    pub max_buffered: usize,
    /// How long to wait for the feed's first packet before the first snapshot.
    pub first_packet_wait: Duration,
    /// Snapshots to recover stale books are taken no more often than this.
    pub interval: Duration,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            server: String::new(),
            login: SoupLogin::default(),
            retries: 3,
            timeout: Duration::from_secs(30),
            max_buffered: 1 << 30,
            first_packet_wait: Duration::from_secs(1),
            interval: Duration::from_secs(1),
        }
    }
}

/// Why a snapshot or a late join failed.
#[derive(Debug)]
pub enum RecoveryError {
    /// The server's address, or the connection to it.
    Connect { server: String, error: std::io::Error },
    /// The socket failed mid-session.
    Io { server: String, error: std::io::Error },
    /// The session or the snapshot broke (a rejected login, a connection ended early...).
    Glimpse { server: String, error: GlimpseError },
    /// An attempt took longer than its limit.
    Timeout { server: String, after: Duration },
    /// Every snapshot was behind the live feed: the feed had gone past the snapshot's
    /// sequence number before the handler joined it.
    Behind { server: String, snapshot_seq: u64, live_first: u64, attempts: u32 },
    /// The live feed outgrew the buffer while the snapshot came.
    Buffered { bytes: usize },
    /// The live source failed while buffering.
    Source(String),
}

impl std::fmt::Display for RecoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecoveryError::Connect { server, error } => write!(f, "snapshot server {server}: cannot connect: {error}"),
            RecoveryError::Io { server, error } => write!(f, "snapshot server {server}: {error}"),
            RecoveryError::Glimpse { server, error } => write!(f, "snapshot server {server}: {error}"),
            RecoveryError::Timeout { server, after } => {
                write!(f, "snapshot server {server}: no whole snapshot after {:.1} s", after.as_secs_f64())
            }
            RecoveryError::Behind { server, snapshot_seq, live_first, attempts } => write!(
                f,
                "snapshot server {server}: {attempts} snapshots ended at sequence {snapshot_seq} or before, but the \
                 live feed was first seen at {live_first}: the messages between are in neither (a server that lags \
                 the feed; retry later, or add [recovery] rerequest to fill the difference)"
            ),
            RecoveryError::Buffered { bytes } => write!(
                f,
                "the live feed filled the late-join buffer ({bytes} bytes) before the snapshot arrived \
                 (raise [recovery] buffer-bytes, or check the snapshot server)"
            ),
            RecoveryError::Source(e) => write!(f, "live feed, while the snapshot came: {e}"),
        }
    }
}

impl std::error::Error for RecoveryError {}

impl RecoveryError {
    /// Whether another attempt may do better (a rejected login will not).
    fn retryable(&self) -> bool {
        match self {
            RecoveryError::Glimpse { error: GlimpseError::Session(SoupError::LoginRejected { .. }), .. } => false,
            RecoveryError::Connect { .. }
            | RecoveryError::Io { .. }
            | RecoveryError::Glimpse { .. }
            | RecoveryError::Timeout { .. }
            | RecoveryError::Behind { .. } => true,
            RecoveryError::Buffered { .. } | RecoveryError::Source(_) => false,
        }
    }
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// One snapshot from the server: connect, log in, read to the End of Snapshot, log out.
pub fn fetch_snapshot(cfg: &SnapshotConfig) -> Result<Snapshot, RecoveryError> {
    let server = cfg.server.clone();
    let connect = |error| RecoveryError::Connect { server: server.clone(), error };
    let addr: SocketAddr = cfg
        .server
        .to_socket_addrs()
        .map_err(connect)?
        .next()
        .ok_or_else(|| connect(std::io::Error::other("no address for that host")))?;
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(connect)?;
    let io = |error| RecoveryError::Io { server: server.clone(), error };
    sock.set_nodelay(true).map_err(io)?;
    sock.set_read_timeout(Some(Duration::from_millis(20))).map_err(io)?;
    let t0 = Instant::now();
    let glimpse = |error: GlimpseError| RecoveryError::Glimpse { server: server.clone(), error };
    let mut client = SoupClient::new(cfg.login.clone(), 0);
    let mut g = Glimpse::new();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        client.take_output(&mut out);
        if !out.is_empty() {
            sock.write_all(&out).map_err(io)?;
            out.clear();
        }
        if let Some(r) = g.result() {
            let snap = r.map_err(glimpse)?;
            client.logout(now_ns(t0));
            client.take_output(&mut out);
            // The snapshot is whole: a logout the server does not take changes nothing.
            let _ = sock.write_all(&out);
            return Ok(snap);
        }
        if t0.elapsed() > cfg.timeout {
            return Err(RecoveryError::Timeout { server, after: cfg.timeout });
        }
        match sock.read(&mut buf) {
            Ok(0) => {
                client.handle_close().map_err(|e| glimpse(e.into()))?;
                if g.result().is_none() {
                    return Err(glimpse(GlimpseError::EndedEarly { messages: g.messages() as u64 }));
                }
            }
            Ok(n) => {
                client.handle_input(now_ns(t0), &buf[..n], &mut |e| g.on_event(e)).map_err(|e| glimpse(e.into()))?
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                client.handle_timeout(now_ns(t0)).map_err(|e| glimpse(e.into()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}

/// A frame kept while the snapshot came.
#[derive(Debug, Clone)]
pub struct Buffered {
    pub input: usize,
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// What a late join did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LateJoinReport {
    /// Snapshots asked for (retries included), and why the ones before the last failed.
    pub attempts: u32,
    pub failures: Vec<String>,
    /// The snapshot taken: its messages, the sequence number the feed continues from.
    pub snapshot_messages: u64,
    pub snapshot_seq: u64,
    /// The first live message seen (the buffered feed's lowest sequence number).
    pub live_first: Option<u64>,
    /// Live frames and bytes buffered while the snapshot came.
    pub buffered_frames: u64,
    pub buffered_bytes: u64,
    pub wait_s: f64,
}

/// Buffer the live feed while snapshots are taken until one is not behind it: returns the
/// snapshot and the frames received meanwhile (to go through the arbitrator first, see
/// [`Prefixed`]). A snapshot is behind when the feed's first message seen comes after the
/// snapshot's sequence number; it is taken again (up to `retries` times), as is one whose
/// connection failed. A rejected login is not retried.
pub fn late_join<S: Source>(
    source: &mut S,
    seq: &Sequencer,
    cfg: &SnapshotConfig,
) -> Result<(Snapshot, VecDeque<Buffered>, LateJoinReport), RecoveryError> {
    let t0 = Instant::now();
    let mut b = Buffering {
        links: (0..source.inputs()).map(|i| source.link_type(i)).collect(),
        buffered: VecDeque::new(),
        bytes: 0,
        live_first: None,
        ended: false,
    };
    let mut report = LateJoinReport::default();
    // Wait (a little) for the feed's first packet before the first snapshot: a snapshot
    // can only be found behind the feed once the feed has been seen.
    let first_wait = Instant::now() + cfg.first_packet_wait;
    while b.live_first.is_none() && !b.ended && Instant::now() < first_wait {
        b.pull(source, seq, cfg.max_buffered)?;
    }
    loop {
        report.attempts += 1;
        let attempt = report.attempts;
        let c = cfg.clone();
        let fetch = std::thread::Builder::new()
            .name("glimpse".into())
            .spawn(move || {
                if attempt > 1 {
                    // Back off a little more each time.
                    std::thread::sleep(Duration::from_millis(50 << (attempt - 2).min(5)));
                }
                fetch_snapshot(&c)
            })
            .map_err(|e| RecoveryError::Source(format!("cannot start the snapshot thread: {e}")))?;
        while !fetch.is_finished() {
            b.pull(source, seq, cfg.max_buffered)?;
        }
        let result = fetch.join().map_err(|_| RecoveryError::Source("the snapshot thread panicked".into()))?;
        let err = match result {
            Ok(snap) => match b.live_first {
                Some(first) if first > snap.next_seq => RecoveryError::Behind {
                    server: cfg.server.clone(),
                    snapshot_seq: snap.next_seq,
                    live_first: first,
                    attempts: report.attempts,
                },
                _ => {
                    report.snapshot_messages = snap.messages.len() as u64;
                    report.snapshot_seq = snap.next_seq;
                    report.live_first = b.live_first;
                    report.buffered_frames = b.buffered.len() as u64;
                    report.buffered_bytes = b.bytes as u64;
                    report.wait_s = t0.elapsed().as_secs_f64();
                    tracing::info!(
                        seq = snap.next_seq,
                        messages = snap.messages.len(),
                        attempts = report.attempts,
                        buffered_frames = report.buffered_frames,
                        "late join: snapshot loaded"
                    );
                    return Ok((snap, b.buffered, report));
                }
            },
            Err(e) => e,
        };
        if !err.retryable() || report.attempts > cfg.retries {
            tracing::error!(attempts = report.attempts, error = %err, "late join: no snapshot");
            return Err(err);
        }
        tracing::warn!(attempt = report.attempts, error = %err, "late join: snapshot not usable, taking another");
        report.failures.push(err.to_string());
    }
}

/// The live feed kept during a late join.
struct Buffering {
    links: Vec<LinkType>,
    buffered: VecDeque<Buffered>,
    bytes: usize,
    live_first: Option<u64>,
    ended: bool,
}

impl Buffering {
    /// Take the source's next frame, or wait a little for one.
    fn pull<S: Source>(&mut self, source: &mut S, seq: &Sequencer, max: usize) -> Result<(), RecoveryError> {
        if self.ended {
            std::thread::sleep(Duration::from_millis(1));
            return Ok(());
        }
        match source.next_frame().map_err(|e| RecoveryError::Source(e.to_string()))? {
            Some((input, f)) => {
                note_first(seq, self.links[input], &f, &mut self.live_first);
                self.bytes += f.data.len();
                if self.bytes > max {
                    return Err(RecoveryError::Buffered { bytes: max });
                }
                self.buffered.push_back(Buffered { input, ts_ns: f.ts_ns, data: f.data.to_vec() });
            }
            None => {
                if source.idle().is_none() {
                    self.ended = true;
                } else {
                    source.wait();
                }
            }
        }
        Ok(())
    }
}

/// Keep the lowest sequence number of the feed's data packets.
fn note_first(seq: &Sequencer, link: LinkType, f: &Frame<'_>, first: &mut Option<u64>) {
    if let Ok(info) = seq.classify(link, f.data) {
        if info.kind == PacketKind::Data && info.count > 0 {
            *first = Some(first.map_or(info.seq, |x| x.min(info.seq)));
        }
    }
}

/// A source whose first frames are those kept during a late join, then the source's own.
#[derive(Debug)]
pub struct Prefixed<S> {
    pub inner: S,
    prefix: VecDeque<Buffered>,
    cur: Vec<u8>,
}

impl<S: Source> Prefixed<S> {
    pub fn new(inner: S) -> Self {
        Prefixed { inner, prefix: VecDeque::new(), cur: Vec::new() }
    }
    /// Frames to hand out before the source's own.
    pub fn set_prefix(&mut self, prefix: VecDeque<Buffered>) {
        self.prefix = prefix;
    }
}

impl<S: Source> Source for Prefixed<S> {
    type Error = S::Error;
    #[inline]
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, S::Error> {
        if self.prefix.is_empty() {
            return self.inner.next_frame();
        }
        let b = self.prefix.pop_front().expect("not empty");
        self.cur = b.data;
        let n = self.cur.len() as u32;
        Ok(Some((b.input, Frame { ts_ns: b.ts_ns, data: &self.cur, orig_len: n })))
    }
    fn inputs(&self) -> usize {
        self.inner.inputs()
    }
    fn link_type(&self, input: usize) -> LinkType {
        self.inner.link_type(input)
    }
    fn input_name(&self, input: usize) -> String {
        self.inner.input_name(input)
    }
    fn frames_read(&self, input: usize) -> u64 {
        self.inner.frames_read(input)
    }
    fn idle(&mut self) -> Option<u64> {
        self.inner.idle()
    }
    fn wait(&mut self) {
        self.inner.wait()
    }
    fn live_stats(&self) -> Vec<crate::live::LiveInputStats> {
        self.inner.live_stats()
    }
    fn cut_short(&self, input: usize) -> crate::pcap::CutShort {
        self.inner.cut_short(input)
    }
    fn trailer_missing(&self, input: usize) -> u64 {
        self.inner.trailer_missing(input)
    }
    fn send_request(&mut self, request: &[u8]) {
        self.inner.send_request(request)
    }
}

//! `tickplant sim rerequest-server`: the exchange's MoldUDP64 retransmission server, for
//! tests and demos, answering from a capture of the whole feed, with faults.

use std::collections::VecDeque;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use tickplant_core::{LinkType, Protocol, Sequencer, SequencerConfig};
use tickplant_io::FrameReader;
use tickplant_sim::{RerequestServer, ServerFaults};

#[derive(Debug, Args, Clone)]
pub struct RerequestServerArgs {
    /// A capture of the whole feed (MoldUDP64): the messages the server can send again.
    #[arg(long, value_name = "FEED.pcap")]
    pub feed: PathBuf,
    /// Where requests come in: ADDR:PORT (UDP; answers go back to each request's sender).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,
    /// Seed of the faults below.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fault: leave this share of requests unanswered (0..=1).
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub drop_share: f64,
    /// Fault: never send this share of the sequence numbers (the same ones every time,
    /// chosen by the seed), as a server that does not have them.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    pub refuse_share: f64,
    /// Fault: send at most this many messages for one request (the client asks again for
    /// the rest); 0: all that were asked for.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub max_answer: u16,
    /// Fault: answer this late, microseconds.
    #[arg(long, default_value_t = 0, value_name = "US")]
    pub delay_us: u64,
    /// End after this many seconds (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Write what it did as JSON at the end: requests, messages sent and withheld, and the
    /// sequence numbers `--refuse-share` withheld from a request.
    #[arg(long, value_name = "server.json")]
    pub report: Option<PathBuf>,
}

fn share(v: f64, flag: &str) -> Result<f64> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        bail!("{flag} {v}: a share from 0 to 1")
    }
}

/// Load the capture, then answer requests until the duration or a signal. Returns the
/// messages held and the requests answered.
pub fn rerequest_server(a: &RerequestServerArgs) -> Result<(u64, u64)> {
    let faults = ServerFaults {
        seed: a.seed,
        drop_share: share(a.drop_share, "--drop-share")?,
        refuse_share: share(a.refuse_share, "--refuse-share")?,
        max_answer: a.max_answer,
    };
    let mut server = RerequestServer::new(faults);
    load_feed(&a.feed, |p| server.load_packet(p).map(|_| ()).map_err(|e| anyhow!("{e}")))?;
    let Some(session) = server.session() else {
        bail!("{}: no MoldUDP64 data packet: nothing to serve", a.feed.display());
    };
    let first = server.first_seq();
    let sock = UdpSocket::bind(&a.listen).with_context(|| format!("--listen {}: cannot bind", a.listen))?;
    sock.set_read_timeout(Some(Duration::from_millis(5)))?;
    eprintln!(
        "sim rerequest-server: session {} messages {}..{} on {}",
        String::from_utf8_lossy(&session),
        first,
        server.next_seq(),
        sock.local_addr()?
    );
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let end = a.duration.map(|d| crate::seconds(d, "--duration")).transpose()?.map(|d| Instant::now() + d);
    let delay = Duration::from_micros(a.delay_us);
    // Answers not yet due (`--delay-us`), in the order they were made.
    let mut due: VecDeque<(Instant, std::net::SocketAddr, Vec<Vec<u8>>)> = VecDeque::new();
    let mut buf = vec![0u8; 65_536];
    let mut send_errors = 0u64;
    loop {
        let now = Instant::now();
        while due.front().is_some_and(|d| d.0 <= now) {
            let (_, to, packets) = due.pop_front().expect("checked");
            for p in packets {
                if sock.send_to(&p, to).is_err() {
                    send_errors += 1;
                }
            }
        }
        if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
            break;
        }
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                let packets = server.answer(&buf[..n]);
                if !packets.is_empty() {
                    due.push_back((Instant::now() + delay, from, packets));
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("recv"),
        }
    }
    let st = server.stats().clone();
    if let Some(p) = &a.report {
        let v = serde_json::json!({
            "stats": st,
            "send_errors": send_errors,
            "refused": server.refused().iter().collect::<Vec<_>>(),
        });
        std::fs::write(p, serde_json::to_string_pretty(&v)? + "\n")
            .with_context(|| format!("{}: cannot write", p.display()))?;
    }
    if let Some(e) = &st.first_error {
        eprintln!("warning: {} datagrams were not requests (the first: {e})", st.malformed);
    }
    Ok((server.next_seq() - first, st.requests))
}

#[derive(Debug, Args, Clone)]
pub struct GlimpseServerArgs {
    /// A capture of the whole feed (MoldUDP64 ITCH 5.0): the book state comes from its
    /// messages.
    #[arg(long, value_name = "FEED.pcap")]
    pub feed: PathBuf,
    /// Where clients connect: ADDR:PORT (TCP, SoupBinTCP).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,
    /// Read the live feed here (udp://GROUP:PORT) and serve the state at the sequence
    /// number it has reached; without it, the state at --at-seq or at the capture's end.
    #[arg(long, value_name = "udp://GROUP:PORT")]
    pub follow: Option<String>,
    /// Serve the state before this sequence number (without --follow).
    #[arg(long, value_name = "SEQ")]
    pub at_seq: Option<u64>,
    /// The login clients must give (none: any login is taken).
    #[arg(long)]
    pub username: Option<String>,
    /// The password clients must give (none: any password is taken).
    #[arg(long)]
    pub password: Option<String>,
    /// Fault: reject every login (reason A, not authorized).
    #[arg(long)]
    pub reject_login: bool,
    /// Fault: close the connection after this many snapshot messages.
    #[arg(long, value_name = "N")]
    pub drop_after: Option<u64>,
    /// Fault: serve a snapshot this many messages behind the live feed.
    #[arg(long, value_name = "N")]
    pub behind: Option<u64>,
    /// The faults above (but --reject-login) apply to this many connections, the first
    /// ones; the later ones are served well. 0: every connection.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub fault_connections: u64,
    /// End after this many seconds (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Write what it did as JSON at the end.
    #[arg(long, value_name = "server.json")]
    pub report: Option<PathBuf>,
}

/// What the GLIMPSE server did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct GlimpseServerStats {
    pub connections: u64,
    pub rejected: u64,
    pub snapshots: u64,
    pub dropped: u64,
    /// The sequence number each snapshot served continues from, in order.
    pub snapshot_seqs: Vec<u64>,
    pub errors: Vec<String>,
}

/// Load a MoldUDP64 capture's messages.
fn load_feed(path: &std::path::Path, mut take: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).map_err(|e| anyhow!(e))?;
    let mut r = FrameReader::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let link: LinkType = r.link_type();
    let mut frame_no = 0u64;
    while let Some(f) = r.next_frame().with_context(|| format!("{}", path.display()))? {
        frame_no += 1;
        let Ok(info) = seq.classify(link, f.data) else { continue };
        let po = usize::from(info.payload_offset);
        take(&f.data[po..po + usize::from(info.payload_len)])
            .with_context(|| format!("{}: frame {frame_no}", path.display()))?;
    }
    Ok(())
}

/// `sim glimpse`: serve snapshots until the duration or a signal.
pub fn glimpse_server(a: &GlimpseServerArgs) -> Result<GlimpseServerStats> {
    use std::net::TcpListener;
    use std::sync::atomic::AtomicU64;
    use std::sync::{Arc, Mutex};
    let mut feed = tickplant_sim::glimpse::FeedMessages::default();
    load_feed(&a.feed, |p| feed.load_packet(p).map(|_| ()).map_err(|e| anyhow!("{e}")))?;
    if feed.next_seq() == feed.first_seq() {
        bail!("{}: no MoldUDP64 data packet: nothing to serve", a.feed.display());
    }
    let feed = Arc::new(feed);
    let high = Arc::new(AtomicU64::new(a.at_seq.unwrap_or(feed.next_seq())));
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let end = a.duration.map(|d| crate::seconds(d, "--duration")).transpose()?.map(|d| Instant::now() + d);
    if let Some(f) = &a.follow {
        if a.at_seq.is_some() {
            bail!("--follow and --at-seq: one or the other");
        }
        let url: tickplant_io::live::UdpUrl = f
            .strip_prefix("udp://")
            .unwrap_or(f)
            .parse()
            .or_else(|_| f.parse())
            .map_err(|e| anyhow!("--follow: {e}"))?;
        let sock: UdpSocket = tickplant_io::live::open_receiver(&url).with_context(|| format!("--follow {f}"))?.into();
        sock.set_nonblocking(false)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        high.store(feed.first_seq(), Ordering::Relaxed);
        let (high, stop) = (high.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
                if let Ok(n) = sock.recv(&mut buf) {
                    if let Ok(p) = tickplant_wire::moldudp64::Packet::new_checked(&buf[..n]) {
                        if !p.is_end_of_session() {
                            let e = p.sequence_number() + u64::from(p.message_count());
                            high.fetch_max(e, Ordering::Relaxed);
                        }
                    }
                }
            }
        });
    }
    let listener = TcpListener::bind(&a.listen).with_context(|| format!("--listen {}: cannot bind", a.listen))?;
    listener.set_nonblocking(true)?;
    eprintln!("sim glimpse: messages {}..{} on {}", feed.first_seq(), feed.next_seq(), listener.local_addr()?);
    let stats = Arc::new(Mutex::new(GlimpseServerStats::default()));
    let mut workers = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
        match listener.accept() {
            Ok((sock, _)) => {
                n += 1;
                let faulty = a.fault_connections == 0 || n <= a.fault_connections;
                let (feed, high, stats, a) = (feed.clone(), high.clone(), stats.clone(), a.clone());
                workers.push(std::thread::spawn(move || {
                    if let Err(e) = serve_glimpse(sock, &feed, &high, &a, faulty, &stats) {
                        if let Ok(mut s) = stats.lock() {
                            s.errors.push(format!("{e:#}"));
                        }
                    }
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e).context("accept"),
        }
    }
    for w in workers {
        let _ = w.join();
    }
    let st = stats.lock().map_err(|_| anyhow!("a connection's thread panicked"))?.clone();
    if let Some(p) = &a.report {
        std::fs::write(p, serde_json::to_string_pretty(&st)? + "\n")
            .with_context(|| format!("{}: cannot write", p.display()))?;
    }
    Ok(st)
}

/// One client: its login, then the snapshot, then the end of the session.
fn serve_glimpse(
    mut sock: std::net::TcpStream,
    feed: &tickplant_sim::glimpse::FeedMessages,
    high: &std::sync::atomic::AtomicU64,
    a: &GlimpseServerArgs,
    faulty: bool,
    stats: &std::sync::Mutex<GlimpseServerStats>,
) -> Result<()> {
    use std::io::{Read, Write};
    use tickplant_wire::soupbintcp::{self, Repr};
    let count = |f: &dyn Fn(&mut GlimpseServerStats)| {
        if let Ok(mut s) = stats.lock() {
            f(&mut s)
        }
    };
    count(&|s| s.connections += 1);
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    sock.set_nodelay(true)?;
    let mut inbuf = Vec::new();
    let mut buf = [0u8; 4096];
    let login = loop {
        if let Some(n) = soupbintcp::packet_len(&inbuf) {
            let p = inbuf[..n].to_vec();
            inbuf.drain(..n);
            match Repr::parse(&p).map_err(|e| anyhow!("login: {e}"))? {
                Repr::LoginRequest { username, password, .. } => break (username, password),
                Repr::ClientHeartbeat | Repr::Debug(_) => continue,
                other => bail!("expected a login request, got {other:?}"),
            }
        }
        let n = sock.read(&mut buf).context("reading the login")?;
        if n == 0 {
            bail!("the client closed the connection before it logged in");
        }
        inbuf.extend_from_slice(&buf[..n]);
    };
    let wrong = |want: &Option<String>, got: &[u8]| {
        want.as_deref().is_some_and(|w| soupbintcp::alpha::<10>(w)[..got.len()] != *got)
    };
    let mut out = Vec::new();
    if a.reject_login || wrong(&a.username, &login.0) || wrong(&a.password, &login.1) {
        Repr::LoginRejected { reason: b'A' }.write_to(&mut out);
        sock.write_all(&out)?;
        count(&|s| s.rejected += 1);
        return Ok(());
    }
    Repr::LoginAccepted { session: soupbintcp::alpha_right("GLIMPSE"), sequence: 1 }.write_to(&mut out);
    let mut at = high.load(Ordering::Relaxed);
    if faulty {
        if let Some(b) = a.behind {
            at = at.saturating_sub(b);
        }
    }
    let (msgs, seq) = feed.snapshot_at(at);
    for (i, m) in msgs.iter().enumerate() {
        if faulty && a.drop_after.is_some_and(|d| i as u64 >= d) {
            sock.write_all(&out)?;
            let _ = sock.shutdown(std::net::Shutdown::Both);
            count(&|s| s.dropped += 1);
            return Ok(());
        }
        Repr::SequencedData(m).write_to(&mut out);
        if out.len() > 1 << 16 {
            sock.write_all(&out)?;
            out.clear();
        }
    }
    Repr::SequencedData(&tickplant_core::glimpse::end_of_snapshot(seq)).write_to(&mut out);
    Repr::EndOfSession.write_to(&mut out);
    sock.write_all(&out)?;
    count(&|s| {
        s.snapshots += 1;
        s.snapshot_seqs.push(seq);
    });
    // Wait for the client's logout or close (briefly), then close.
    sock.set_read_timeout(Some(Duration::from_millis(500)))?;
    let _ = sock.read(&mut buf);
    Ok(())
}

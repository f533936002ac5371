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
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).map_err(|e| anyhow!(e))?;
    let mut r = FrameReader::open(&a.feed).with_context(|| format!("{}: cannot open", a.feed.display()))?;
    let link: LinkType = r.link_type();
    let mut frame_no = 0u64;
    while let Some(f) = r.next_frame().with_context(|| format!("{}", a.feed.display()))? {
        frame_no += 1;
        let Ok(info) = seq.classify(link, f.data) else { continue };
        let po = usize::from(info.payload_offset);
        let payload = &f.data[po..po + usize::from(info.payload_len)];
        server.load_packet(payload).map_err(|e| anyhow!("{}: frame {frame_no}: {e}", a.feed.display()))?;
    }
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

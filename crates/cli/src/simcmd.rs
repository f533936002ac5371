//! `tickplant sim`: feed generators and the A/B impairer.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use tickplant_core::{Protocol, Sequencer, SequencerConfig};
use tickplant_io::{Format, FrameReader, FrameWriter};
use tickplant_sim::{generate_moldudp64, impair, ImpairConfig, MoldGenConfig};

#[derive(Debug, Subcommand)]
pub enum SimCmd {
    /// Generate a MoldUDP64 feed of valid ITCH 5.0 messages (Ethernet/IPv4/UDP frames).
    Moldudp64(MoldArgs),
    /// Copy one capture onto two (A and B), each independently impaired.
    Impair(ImpairArgs),
    /// Copy one live stream onto two groups (A and B), each copy independently losing,
    /// duplicating, reordering and delaying packets, seeded; the truth written at the end.
    Relay(RelayArgs),
    /// Generate an OPRA FAST v2 feed (option quotes and last sales, one block per UDP
    /// datagram behind a 5-byte sequence header), with the events it must decode to.
    OpraFast(OpraFastArgs),
    /// Generate an OPRA binary feed (Participant Interface v6: quotes of several exchanges
    /// with their best bid and offer, last sales and every other message category, one
    /// block per UDP datagram), with the events it must decode to and each series' final
    /// best bid and offer.
    Opra(OpraArgs),
    /// Generate a NYSE Integrated Feed day (XDP v2.1 or Pillar v2.5 layout): the realistic
    /// ITCH day of `sim itch` as NYSE would carry it, with the final books it implies.
    Nyse(NyseArgs),
    /// Generate a realistic ITCH 5.0 day slice (BinaryFILE or MoldUDP64 capture), with the
    /// final books it implies as ground truth.
    Itch(ItchArgs),
    /// Send FIX 4.4 market data (35=X, one message per datagram, or `--batch` of them) to a
    /// multicast group: random symbols, each one's price up $0.001 per update.
    FixMd(crate::tradecmd::FixMdArgs),
    /// The exchange's MoldUDP64 re-request (retransmission) server: answers requests for
    /// messages again from a capture of the whole feed, with faults for tests.
    RerequestServer(crate::recoverycmd::RerequestServerArgs),
    /// A NASDAQ GLIMPSE server (SoupBinTCP): a snapshot of the book state of a feed's
    /// capture at the sequence number its live replay has reached, with faults for tests.
    Glimpse(crate::recoverycmd::GlimpseServerArgs),
    /// A FIX 4.2/4.4 exchange: an ExecutionReport (New) for each NewOrderSingle at once,
    /// a fill after a delay.
    Exchange(crate::tradecmd::ExchangeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct ItchArgs {
    /// Random seed: the same seed and flags write the same day, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of symbols (stock locates 1..=N, names AAAA, AAAB, ...).
    #[arg(long, default_value_t = 200)]
    pub symbols: u32,
    /// Number of messages, opening and closing system messages included.
    #[arg(long, default_value_t = 1_000_000)]
    pub messages: u64,
    /// Output: .itch (BinaryFILE), .gz (gzip BinaryFILE), or .pcap/.pcapng (MoldUDP64
    /// packets of up to --max-msgs-per-packet messages, captured at the messages' times).
    #[arg(long, value_name = "day.itch|day.pcap")]
    pub out: PathBuf,
    /// Write the final books, one JSON line per symbol: symbol, bids, asks
    /// ([price, shares, orders], best first).
    #[arg(long, value_name = "final.jsonl")]
    pub truth: Option<PathBuf>,
    /// Messages per MoldUDP64 packet are drawn from 1..=K (captures only).
    #[arg(long, default_value_t = 8, value_name = "K")]
    pub max_msgs_per_packet: u16,
    /// Trading day (US Eastern) the capture timestamps fall on.
    #[arg(long, default_value = SIM_DATE, value_name = "YYYY-MM-DD")]
    pub date: String,
}

/// The trading day simulated captures fall on unless told another (`--date`).
pub const SIM_DATE: &str = "2026-11-20";

/// Packetize ITCH messages into MoldUDP64 frames and write them as a capture; returns the
/// number of packets.
pub fn write_itch_capture(
    path: &std::path::Path,
    messages: &[tickplant_wire::itch50::Message],
    seed: u64,
    max_per_packet: u16,
    midnight_ns: u64,
) -> Result<u64> {
    write_capture(path, |emit| {
        tickplant_sim::itch::packetize(messages, seed, max_per_packet, midnight_ns, &Default::default(), emit)
    })
}

/// Write the Ethernet frames a generator emits as a capture (format by extension); returns
/// how many were written. The first write error stops the writing and is returned.
pub fn write_capture(path: &std::path::Path, generate: impl FnOnce(&mut dyn FnMut(u64, &[u8]))) -> Result<u64> {
    let mut w = FrameWriter::create(path, tickplant_core::LinkType::Ethernet, Format::for_path(path))?;
    let mut err = None;
    generate(&mut |ts, f| {
        if err.is_none() {
            err = w.write(ts, f).err();
        }
    });
    if let Some(e) = err {
        return Err(e.into());
    }
    let n = w.frames_written();
    w.finish()?;
    Ok(n)
}

/// The final books of a generated day, one JSON line per symbol: symbol, bids, asks
/// (`[price, shares, orders]`, best first).
fn write_truth_books(p: &Path, day: &tickplant_sim::ItchDay) -> Result<()> {
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?);
    for b in day.final_books() {
        let side = |v: &[tickplant_sim::itch::TruthLevel]| {
            v.iter()
                .map(|&(p, s, n)| {
                    let mut ps = String::new();
                    crate::itchcmd::write_decimal(&mut ps, u64::from(p), 4);
                    format!("[{ps},{s},{n}]")
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        writeln!(w, "{{\"symbol\":\"{}\",\"bids\":[{}],\"asks\":[{}]}}", b.symbol, side(&b.bids), side(&b.asks))?;
    }
    w.flush()?;
    Ok(())
}

#[derive(Debug, Args)]
pub struct NyseArgs {
    /// Random seed of the ITCH day translated: the same seed and flags write the same capture.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of symbols (symbol indexes 1..=N, names AAAA, AAAB, ...).
    #[arg(long, default_value_t = 200)]
    pub symbols: u32,
    /// Messages of the ITCH day it is translated from (the XDP feed has about as many).
    #[arg(long, default_value_t = 1_000_000)]
    pub messages: u64,
    /// Output capture (.pcap or .pcapng): XDP packets of up to --max-msgs-per-packet
    /// messages.
    #[arg(long, value_name = "feed.pcap")]
    pub out: PathBuf,
    /// Write the final books, one JSON line per symbol: symbol, bids, asks
    /// ([price, shares, orders], best first).
    #[arg(long, value_name = "final.jsonl")]
    pub truth: Option<PathBuf>,
    /// Messages per packet are drawn from 1..=K.
    #[arg(long, default_value_t = 8, value_name = "K")]
    pub max_msgs_per_packet: u8,
    /// Trading day (US Eastern) of the timestamps.
    #[arg(long, default_value = SIM_DATE, value_name = "YYYY-MM-DD")]
    pub date: String,
    /// The feed's layout: xdp (XDP Integrated Feed v2.1) or pillar (Pillar Integrated Feed
    /// v2.5).
    #[arg(long, default_value = "xdp", value_parser = ["xdp", "pillar"])]
    pub layout: String,
}

/// Write a NYSE Integrated Feed capture; returns (messages, packets).
pub fn nyse_cmd(a: &NyseArgs) -> Result<(u64, u64)> {
    let (day, midnight) = itch_day(a.seed, a.symbols, a.messages, u16::from(a.max_msgs_per_packet), &a.date)?;
    let mut got = None;
    write_capture(&a.out, |emit| {
        let dialect = if a.layout == "pillar" {
            tickplant_wire::xdp_integrated::Dialect::Pillar25
        } else {
            tickplant_wire::xdp_integrated::Dialect::Xdp21
        };
        got = Some(tickplant_sim::translate_itch_day(
            dialect,
            &day.messages,
            a.seed,
            a.max_msgs_per_packet,
            midnight,
            &tickplant_wire::build::Flow::default(),
            emit,
        ))
    })?;
    if let Some(p) = &a.truth {
        write_truth_books(p, &day)?;
    }
    let got = got.unwrap_or_default();
    Ok((got.messages, got.packets))
}

/// The flags' ITCH day (checked) and the midnight of its date: what `sim itch` writes and
/// `sim nyse` translates.
fn itch_day(
    seed: u64,
    symbols: u32,
    messages: u64,
    max_per_packet: u16,
    date: &str,
) -> Result<(tickplant_sim::ItchDay, u64)> {
    if symbols == 0 || symbols > 65_535 {
        bail!("--symbols must be 1..=65535 (stock locates and symbol indexes are 16-bit here)");
    }
    if messages < 2 * u64::from(symbols) + 10 {
        bail!("--messages must be at least 2 x symbols + 10 (the directory and system messages alone take that)");
    }
    if max_per_packet == 0 || max_per_packet > 28 {
        bail!("--max-msgs-per-packet must be 1..=28 (a packet must fit a 1500-byte MTU)");
    }
    let midnight = tickplant_core::itch::midnight_eastern_ns(date).map_err(|e| anyhow!("--date: {e}"))?;
    let day = tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig { seed, symbols, messages, target_live: 0 });
    Ok((day, midnight))
}

/// Write a generated day; returns (messages, live orders at the end).
pub fn itch_cmd(a: &ItchArgs) -> Result<(u64, usize)> {
    let (day, midnight) = itch_day(a.seed, a.symbols, a.messages, a.max_msgs_per_packet, &a.date)?;
    match tickplant_io::itch::ItchInput::for_path(&a.out) {
        tickplant_io::itch::ItchInput::Capture => {
            write_itch_capture(&a.out, &day.messages, a.seed, a.max_msgs_per_packet, midnight)?;
        }
        kind => {
            let bytes = day.to_binary_file();
            let f = std::fs::File::create(&a.out).with_context(|| format!("{}: cannot create", a.out.display()))?;
            if kind == tickplant_io::itch::ItchInput::Gzip {
                let mut z = flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::fast());
                z.write_all(&bytes)?;
                z.finish()?.flush()?;
            } else {
                let mut w = std::io::BufWriter::new(f);
                w.write_all(&bytes)?;
                w.flush()?;
            }
        }
    }
    if let Some(p) = &a.truth {
        write_truth_books(p, &day)?;
    }
    Ok((day.messages.len() as u64, day.live_orders()))
}

#[derive(Debug, Args)]
pub struct MoldArgs {
    /// Random seed: the same seed and flags write the same capture.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of packets.
    #[arg(long, default_value_t = 10_000)]
    pub packets: u64,
    /// Messages per packet are drawn from 1..=K.
    #[arg(long, default_value_t = 4, value_name = "K")]
    pub max_msgs_per_packet: u16,
    /// Mean time between packets, ns.
    #[arg(long, default_value_t = 2_000)]
    pub spacing_ns: u64,
    /// Output capture (.pcap, or .pcapng).
    #[arg(long, value_name = "feed.pcap")]
    pub out: PathBuf,
}

/// How each copy is impaired (`sim impair`, `sim relay`).
#[derive(Debug, Args, Clone)]
pub struct ImpairFlags {
    /// Random seed of the impairment: the same seed loses, duplicates, reorders and delays the
    /// same packets.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Probability that A loses a packet.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss_a: f64,
    /// Probability that B loses a packet.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss_b: f64,
    /// Probability that a copy is delayed past the next 1..=3 packets.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub reorder: f64,
    /// Probability that a copy is sent twice.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub dup: f64,
    /// Per-copy delay range in microseconds, e.g. 0..50.
    #[arg(long, default_value = "0..0", value_name = "LO..HI")]
    pub skew_us: String,
}

impl ImpairFlags {
    pub fn config(&self) -> Result<ImpairConfig> {
        let cfg = ImpairConfig {
            seed: self.seed,
            loss_a: self.loss_a,
            loss_b: self.loss_b,
            reorder: self.reorder,
            dup: self.dup,
            skew_ns: parse_range_us(&self.skew_us)?,
        };
        cfg.validate().map_err(|e| anyhow!(e))?;
        Ok(cfg)
    }
}

#[derive(Debug, Args)]
pub struct ImpairArgs {
    /// Input capture.
    #[arg(long = "in", value_name = "feed.pcap")]
    pub input: PathBuf,
    #[command(flatten)]
    pub impair: ImpairFlags,
    /// Output capture of copy A.
    #[arg(long, value_name = "A.pcap")]
    pub out_a: PathBuf,
    /// Output capture of copy B.
    #[arg(long, value_name = "B.pcap")]
    pub out_b: PathBuf,
    /// Write the ground truth as CSV: index,seq,count,a_copies,b_copies,a_reordered,b_reordered.
    #[arg(long, value_name = "truth.csv")]
    pub truth: Option<PathBuf>,
    /// Protocol used to fill the truth's seq and count columns.
    #[arg(long, default_value = "moldudp64")]
    pub protocol: Protocol,
}

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// The live stream to copy: udp://GROUP:PORT[?iface=ADDR].
    #[arg(long = "in", value_name = "udp://GROUP:PORT")]
    pub input: tickplant_io::live::UdpUrl,
    #[command(flatten)]
    pub impair: ImpairFlags,
    /// Where copy A goes: udp://GROUP:PORT[?iface=ADDR&ttl=N].
    #[arg(long, value_name = "udp://GROUP:PORT")]
    pub out_a: tickplant_io::live::UdpUrl,
    /// Where copy B goes.
    #[arg(long, value_name = "udp://GROUP:PORT")]
    pub out_b: tickplant_io::live::UdpUrl,
    /// Write the ground truth as CSV at the end (as `sim impair --truth`).
    #[arg(long, value_name = "truth.csv")]
    pub truth: Option<PathBuf>,
    /// Protocol used to fill the truth's seq and count columns.
    #[arg(long, default_value = "moldudp64")]
    pub protocol: Protocol,
    /// Stop after this many seconds (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
}

/// What both OPRA simulators take.
#[derive(Debug, Args, Clone)]
pub struct OpraGenFlags {
    /// Random seed: the same seed and flags write the same feed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Option series (eight a root).
    #[arg(long, default_value_t = 400)]
    pub series: u32,
    /// Messages in all, the opening control message included.
    #[arg(long, default_value_t = 100_000)]
    pub messages: u64,
    /// Messages per block are drawn from 1..=K.
    #[arg(long, default_value_t = 8, value_name = "K")]
    pub max_msgs_per_block: u8,
    /// Output capture (.pcap or .pcapng).
    #[arg(long, value_name = "feed.pcap")]
    pub out: PathBuf,
    /// Write the events the feed must decode to, one JSON line each: sequence, category,
    /// symbol (the root), action, side, price, size.
    #[arg(long, value_name = "events.jsonl")]
    pub truth: Option<PathBuf>,
}

impl OpraGenFlags {
    /// The generator's settings, checked.
    fn config(&self) -> Result<tickplant_sim::OpraGenConfig> {
        self.check()?;
        Ok(tickplant_sim::OpraGenConfig {
            seed: self.seed,
            series: self.series,
            messages: self.messages,
            max_per_block: self.max_msgs_per_block,
            ..Default::default()
        })
    }

    fn check(&self) -> Result<()> {
        if self.series == 0 || self.messages == 0 {
            bail!("--series and --messages must be at least 1");
        }
        if self.max_msgs_per_block == 0 || self.max_msgs_per_block > 16 {
            bail!("--max-msgs-per-block must be 1..=16 (a block must fit a 1500-byte MTU)");
        }
        Ok(())
    }
}

#[derive(Debug, Args, Clone)]
pub struct OpraFastArgs {
    #[command(flatten)]
    pub gen: OpraGenFlags,
}

/// Write an OPRA FAST capture; returns (messages, datagrams).
pub fn opra_fast_cmd(a: &OpraFastArgs) -> Result<(u64, u64)> {
    let a = &a.gen;
    let cfg = a.config()?;
    let mut truth = None;
    let n = write_capture(&a.out, |emit| truth = Some(tickplant_sim::generate_opra_fast(&cfg, emit)))?;
    let truth = truth.unwrap_or_default();
    if let Some(p) = &a.truth {
        write_truth_events(p, &truth.events)?;
    }
    Ok((truth.messages, n))
}

/// The events a feed must decode to, one JSON line each.
fn write_truth_events(p: &Path, events: &[tickplant_sim::TruthEvent]) -> Result<()> {
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?);
    for e in events {
        writeln!(
            w,
            "{{\"sequence\":{},\"category\":\"{}\",\"symbol\":\"{}\",\"action\":\"{}\",\"side\":\"{}\",\"price\":{},\"size\":{}}}",
            e.sequence,
            e.category as char,
            e.root,
            e.action,
            e.side,
            tickplant_core::event::price_to_string(e.price),
            e.size
        )?;
    }
    w.flush()?;
    Ok(())
}

#[derive(Debug, Args, Clone)]
pub struct OpraArgs {
    #[command(flatten)]
    pub gen: OpraGenFlags,
    /// Write each series' best bid and offer at the end, one JSON line each in instrument
    /// order (as the pipeline numbers them): instrument_id, symbol, expiration, put_call,
    /// strike, bid_price, bid_size, ask_price, ask_size.
    #[arg(long, value_name = "bbo.jsonl")]
    pub bbo: Option<PathBuf>,
}

/// Write an OPRA binary capture; returns (messages, datagrams).
pub fn opra_cmd(a: &OpraArgs) -> Result<(u64, u64)> {
    let (bbo, a) = (&a.bbo, &a.gen);
    let cfg = a.config()?;
    let mut truth = None;
    let n = write_capture(&a.out, |emit| truth = Some(tickplant_sim::generate_opra_binary(&cfg, emit)))?;
    let truth = truth.unwrap_or_default();
    if let Some(p) = &a.truth {
        write_truth_events(p, &truth.events)?;
    }
    if let Some(p) = bbo {
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?,
        );
        let price = tickplant_core::event::price_to_string;
        for b in &truth.bbo {
            let put_call = if b.month <= b'L' { 'C' } else { 'P' };
            let month = if put_call == 'C' { b.month - b'A' + 1 } else { b.month - b'M' + 1 };
            writeln!(
                w,
                "{{\"instrument_id\":{},\"symbol\":\"{}\",\"expiration\":\"20{:02}-{:02}-{:02}\",\"put_call\":\"{put_call}\",\"strike\":{},\"bid_price\":{},\"bid_size\":{},\"ask_price\":{},\"ask_size\":{}}}",
                b.instrument,
                b.root,
                b.year,
                month,
                b.day,
                price(b.strike),
                price(b.bid),
                b.bid_size,
                price(b.ask),
                b.ask_size
            )?;
        }
        w.flush()?;
    }
    Ok((truth.messages, n))
}

pub fn parse_range_us(s: &str) -> Result<(u64, u64)> {
    let bad = || anyhow!("--skew-us {s:?}: expected LO..HI in microseconds, e.g. 0..50");
    let (lo, hi) = s.split_once("..").ok_or_else(bad)?;
    let lo: f64 = lo.trim().parse().map_err(|_| bad())?;
    let hi: f64 = hi.trim().parse().map_err(|_| bad())?;
    if !(lo >= 0.0 && hi >= lo) {
        return Err(bad());
    }
    Ok(((lo * 1000.0).round() as u64, (hi * 1000.0).round() as u64))
}

pub fn moldudp64(a: &MoldArgs) -> Result<u64> {
    if a.max_msgs_per_packet == 0 || a.max_msgs_per_packet > 40 {
        bail!("--max-msgs-per-packet must be 1..=40 (a packet must fit an Ethernet frame)");
    }
    let cfg = MoldGenConfig {
        seed: a.seed,
        packets: a.packets,
        max_msgs_per_packet: a.max_msgs_per_packet,
        spacing_ns: a.spacing_ns,
        ..Default::default()
    };
    write_capture(&a.out, |emit| generate_moldudp64(&cfg, emit))
}

pub fn impair_cmd(a: &ImpairArgs) -> Result<(usize, usize)> {
    let cfg = a.impair.config()?;
    let mut r = FrameReader::open(&a.input)?;
    let link = r.link_type();
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    while let Some(f) = r.next_frame()? {
        frames.push((f.ts_ns, f.data.to_vec()));
    }
    let ts: Vec<u64> = frames.iter().map(|f| f.0).collect();
    let im = impair(&ts, &cfg);
    for (path, copy) in [(&a.out_a, &im.a), (&a.out_b, &im.b)] {
        let mut w = FrameWriter::create(path, link, Format::for_path(path))?;
        for &(t, i) in copy {
            w.write(t, &frames[i].1)?;
        }
        w.finish()?;
    }
    if let Some(p) = &a.truth {
        let seq = Sequencer::new(SequencerConfig::preset(a.protocol)).map_err(|e| anyhow!(e))?;
        write_truth(p, &im.truth, |i| seq_count(&seq, link, &frames[i].1))?;
    }
    Ok((im.a.len(), im.b.len()))
}

/// The truth as CSV: index,seq,count,a_copies,b_copies,a_reordered,b_reordered; `frame`
/// gives each packet's frame, read with `protocol` for its seq and count.
fn write_truth(
    p: &std::path::Path,
    truth: &[tickplant_sim::TruthRow],
    seq_count: impl Fn(usize) -> Option<(u64, u32)>,
) -> Result<()> {
    let mut w =
        std::io::BufWriter::new(std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?);
    writeln!(w, "index,seq,count,a_copies,b_copies,a_reordered,b_reordered")?;
    for t in truth {
        let (s, c) = match seq_count(t.index) {
            Some((s, c)) => (s.to_string(), c.to_string()),
            None => (String::new(), String::new()),
        };
        let (ar, br) = (u8::from(t.a_reordered), u8::from(t.b_reordered));
        writeln!(w, "{},{s},{c},{},{},{ar},{br}", t.index, t.a_copies, t.b_copies)?;
    }
    w.flush()?;
    Ok(())
}

/// A frame's sequence number and message count, as `protocol` reads them.
fn seq_count(seq: &Sequencer, link: tickplant_core::LinkType, frame: &[u8]) -> Option<(u64, u32)> {
    seq.classify(link, frame).ok().map(|i| (i.seq, i.count))
}

/// `sim relay`: one live stream copied onto two groups, each copy impaired as `sim impair`
/// does it, until SIGINT, SIGTERM or the duration; the truth written at the end. Returns
/// the packets relayed and the copies sent on A and B.
pub fn relay_cmd(a: &RelayArgs) -> Result<(usize, [u64; 2])> {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};
    use tickplant_io::live::{self, LiveOptions, LiveSource, UdpSender};
    use tickplant_io::Source;
    let mut imp = tickplant_sim::Streaming::new(a.impair.config()?);
    let stop = live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let duration = a.duration.map(|d| crate::seconds(d, "--duration")).transpose()?;
    // Busy polling: a copy's delay is microseconds; the loop sleeps briefly only when
    // nothing is due soon.
    let mut src = LiveSource::open(&[a.input], LiveOptions { stop, duration, busy_poll: true, rerequest: None })
        .map_err(|e| anyhow!("{e}"))?;
    let mut out = [
        UdpSender::open(&a.out_a).map_err(|e| anyhow!("{e}"))?,
        UdpSender::open(&a.out_b).map_err(|e| anyhow!("{e}"))?,
    ];
    // Per packet, its seq and count for the truth; its payload only until its last copy
    // is sent (a relay runs all day: nothing else is kept).
    let seq = Sequencer::new(SequencerConfig::preset(a.protocol)).map_err(|e| anyhow!(e))?;
    let mut seqs: Vec<Option<(u64, u32)>> = Vec::new();
    let mut held: HashMap<usize, (Vec<u8>, u8)> = HashMap::new();
    let mut due: BinaryHeap<Reverse<tickplant_sim::impair::SendCopy>> = BinaryHeap::new();
    let mut copies = Vec::new();
    let send_due = |due: &mut BinaryHeap<Reverse<tickplant_sim::impair::SendCopy>>,
                    held: &mut HashMap<usize, (Vec<u8>, u8)>,
                    out: &mut [UdpSender; 2],
                    now: u64| {
        while let Some(Reverse(c)) = due.peek().copied() {
            if c.at > now {
                break;
            }
            due.pop();
            if let Some((payload, left)) = held.get_mut(&c.index) {
                out[usize::from(c.line)].send(payload);
                *left -= 1;
                if *left == 0 {
                    held.remove(&c.index);
                }
            }
        }
    };
    loop {
        send_due(&mut due, &mut held, &mut out, live::realtime_ns());
        match src.next_frame().map_err(|e| anyhow!("{e}"))? {
            Some((_, f)) => {
                let i = imp.offer(f.ts_ns, &mut copies);
                seqs.push(seq_count(&seq, tickplant_core::LinkType::Ethernet, f.data));
                let t = imp.truth()[i];
                if t.a_copies + t.b_copies > 0 {
                    held.insert(
                        i,
                        (f.data[tickplant_wire::build::UDP_HEADERS_LEN..].to_vec(), t.a_copies + t.b_copies),
                    );
                }
                due.extend(copies.drain(..).map(Reverse));
            }
            None => {
                if src.idle().is_none() {
                    break;
                }
                let now = live::realtime_ns();
                if due.peek().is_none_or(|Reverse(c)| c.at > now + 100_000) {
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            }
        }
    }
    imp.finish(live::realtime_ns(), &mut copies);
    due.extend(copies.drain(..).map(Reverse));
    send_due(&mut due, &mut held, &mut out, u64::MAX);
    if let Some(p) = &a.truth {
        write_truth(p, imp.truth(), |i| seqs[i])?;
    }
    for (name, o) in [("A", &out[0]), ("B", &out[1])] {
        if o.errors > 0 {
            eprintln!(
                "warning: copy {name} to {}: {} send errors (last: {})",
                o.url(),
                o.errors,
                o.last_error.as_deref().unwrap_or("")
            );
        }
    }
    Ok((seqs.len(), [out[0].sent, out[1].sent]))
}

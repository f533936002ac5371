//! The tick-to-trade harness: `tickplant sim fix-md`, `tickplant sim exchange` and
//! `tickplant trade`. See docs/tick-to-trade.md.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use tickplant_core::risk::RiskLimits;
use tickplant_io::fixnet::{self, ExchangeConfig, TradeConfig};
use tickplant_sim::{FixMd, FixMdConfig};

/// A duration such as `10s`, `500ms`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) =
        s.trim().split_at(s.trim().find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.trim().len()));
    let n: f64 = num.parse().map_err(|_| format!("{s:?}: expected a number and a unit (10s, 500ms, 2m)"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, ms, us, m)")),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn group(s: &str) -> Result<SocketAddrV4, String> {
    let a: SocketAddrV4 = s.parse().map_err(|e| format!("{s:?}: expected GROUP:PORT ({e})"))?;
    if !a.ip().is_multicast() {
        return Err(format!("{s:?}: {} is not a multicast group (224.0.0.0/4)", a.ip()));
    }
    Ok(a)
}

#[derive(Debug, Args, Clone)]
pub struct FixMdArgs {
    /// Multicast group and port to send to.
    #[arg(long, value_parser = group, default_value = "239.255.0.1:31001")]
    pub group: SocketAddrV4,
    /// Interface address to send from.
    #[arg(long, default_value = "127.0.0.1")]
    pub iface: Ipv4Addr,
    /// Number of symbols, each starting at a random price between $20 and $200.
    #[arg(long, default_value_t = 100)]
    pub symbols: u32,
    /// Messages per second.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Send for this long (`10s`, `500ms`, `2m`), or until SIGINT or SIGTERM.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// Random seed: the same seed sends the same messages.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Entries per message, at most.
    #[arg(long, default_value_t = 3)]
    pub max_entries: u32,
    /// Messages per datagram, as a venue that batches sends them (1 to 20).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub batch: u32,
    /// Write the ground truth (messages, entries, whole-dollar prices) as JSON here.
    #[arg(long)]
    pub truth: Option<PathBuf>,
}

pub fn fix_md(a: &FixMdArgs) -> Result<()> {
    if a.rate == 0 {
        bail!("--rate must be at least 1 message per second");
    }
    let mut g = FixMd::new(FixMdConfig { max_entries: a.max_entries, ..FixMdConfig::new(a.seed, a.symbols) });
    // SIGINT or SIGTERM ends the run as the duration does: the truth is still written.
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let r = fixnet::send_market_data(a.group, a.iface, a.rate, a.batch, a.duration, &stop, |now| {
        g.next_message(now).to_vec()
    })
    .with_context(|| format!("sending to {} on {}", a.group, a.iface))?;
    let truth = serde_json::json!({
        "messages": r.messages,
        "datagrams": r.datagrams,
        "entries": g.entries,
        "whole_dollar_prices": g.whole_dollar_total(),
        "seconds": r.seconds,
    });
    eprintln!(
        "sim fix-md: {} messages in {} datagrams ({} entries, {} whole-dollar prices) to {} in {:.1} s",
        r.messages,
        r.datagrams,
        g.entries,
        g.whole_dollar_total(),
        a.group,
        r.seconds
    );
    if let Some(p) = &a.truth {
        std::fs::write(p, serde_json::to_string_pretty(&truth)? + "\n").with_context(|| format!("{}", p.display()))?;
    }
    Ok(())
}

#[derive(Debug, Args, Clone)]
pub struct ExchangeArgs {
    /// Address to accept FIX sessions on.
    #[arg(long, default_value = "127.0.0.1:9878")]
    pub listen: SocketAddr,
    /// The exchange's SenderCompID.
    #[arg(long, default_value = "EXCH")]
    pub comp_id: String,
    /// Fill each order this many microseconds after its acknowledgement.
    #[arg(long, default_value_t = 1_000)]
    pub fill_delay_us: u64,
    /// Price for fills of market orders that carry no Price (44).
    #[arg(long, default_value = "100")]
    pub fill_price: String,
    /// Stop after this long (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

pub fn exchange(a: &ExchangeArgs) -> Result<()> {
    // Ends at SIGINT or SIGTERM, or after the duration, with its summary either way.
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    if let Some(d) = a.duration {
        let s = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(d);
            s.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    let cfg = ExchangeConfig {
        listen: a.listen,
        comp_id: a.comp_id.clone(),
        fill_delay: Duration::from_micros(a.fill_delay_us),
        fill_price: a.fill_price.clone(),
    };
    eprintln!("sim exchange: accepting FIX 4.2/4.4 sessions on {} as {}", a.listen, a.comp_id);
    let r = fixnet::run_exchange(&cfg, stop).with_context(|| format!("exchange on {}", a.listen))?;
    eprintln!(
        "sim exchange: {} sessions, {} orders, {} acks, {} fills, {} rejects (a required field missing), {} duplicate ClOrdIDs refused",
        r.sessions, r.orders, r.acks, r.fills, r.rejects, r.duplicates
    );
    Ok(())
}

#[derive(Debug, Args, Clone)]
pub struct TradeArgs {
    /// Market data: multicast group and port.
    #[arg(long, value_parser = group, default_value = "239.255.0.1:31001")]
    pub md: SocketAddrV4,
    /// Interface address to join the group on.
    #[arg(long, default_value = "127.0.0.1")]
    pub iface: Ipv4Addr,
    /// The exchange's FIX order entry address.
    #[arg(long, default_value = "127.0.0.1:9878")]
    pub exchange: SocketAddr,
    /// Our FIX SenderCompID (tag 49) on the order session.
    #[arg(long, default_value = "TICKPLANT")]
    pub sender: String,
    /// The exchange's CompID, our TargetCompID (tag 56); `sim exchange --comp-id`.
    #[arg(long, default_value = "EXCH")]
    pub target: String,
    /// FIX.4.4 or FIX.4.2.
    #[arg(long, default_value = "FIX.4.4")]
    pub begin_string: String,
    /// The strategy: `fttc` (BUY on every whole-dollar price, SELL on each BUY's fill), or
    /// `triggers` (the rules of --triggers decide; fills are counted).
    #[arg(long, default_value = "fttc")]
    pub strategy: String,
    /// Trigger rules, one per line: `ID: conditions => buy|sell QTY` (see
    /// docs/tick-to-trade.md). The file is read again whenever it changes.
    #[arg(long)]
    pub triggers: Option<PathBuf>,
    /// Shares per order.
    #[arg(long, default_value_t = 100)]
    pub qty: u64,
    /// Trade for this long (`10s`, `500ms`, `2m`), or until SIGINT or SIGTERM; then log out
    /// and write the report.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub duration: Duration,
    /// FIX heartbeat interval in seconds (HeartBtInt, tag 108) asked for at logon.
    #[arg(long, default_value_t = 30)]
    pub heartbeat_s: u32,
    /// Write the report as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Keep the FIX session's sequence numbers and sent orders in this folder, so that a
    /// restart goes on from them (default: in memory).
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// Ask the exchange at logon to start both sides' sequence numbers at 1
    /// (ResetSeqNumFlag 141=Y), where the venue allows it; with --store, the store starts
    /// afresh too.
    #[arg(long)]
    pub reset_seq: bool,
    /// The Logon's Username (553), where the venue asks for one.
    #[arg(long)]
    pub username: Option<String>,
    /// A file whose first line is the Logon's Password (554) (a file, not the command
    /// line, where `ps` would show it).
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// A constant field of every order, TAG=VALUE (repeat for more): `--order-field 1=ACCT42`
    /// (Account), `--order-field 59=0` (TimeInForce Day), `--order-field 100=XNAS`
    /// (ExDestination). The fields the engine writes itself are refused.
    #[arg(long = "order-field", value_name = "TAG=VALUE")]
    pub order_fields: Vec<String>,
    /// Kill switch: while this file exists every order is refused (counted as
    /// kill_switch); create it to stop trading, remove it to resume.
    #[arg(long)]
    pub kill_file: Option<PathBuf>,
    /// Risk: largest order quantity (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_order_qty: u64,
    /// Risk: largest quantity x price, whole currency units (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_notional: u64,
    /// Risk: most open orders (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_open_orders: u64,
    /// Risk: most orders per second per symbol (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_orders_per_second: u64,
    /// Risk: largest absolute position per symbol, open orders included (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_position: u64,
    /// Risk: largest distance from the last trade, basis points (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub collar_bps: u64,
}

pub fn trade(a: &TradeArgs) -> Result<fixnet::TradeReport> {
    match (a.strategy.as_str(), &a.triggers) {
        ("fttc", None) | ("triggers", Some(_)) => {}
        ("triggers", None) => bail!("--strategy triggers needs --triggers FILE"),
        ("fttc", Some(_)) => bail!("--triggers is for --strategy triggers"),
        (other, _) => bail!("--strategy {other:?}: \"fttc\" or \"triggers\""),
    }
    if a.qty == 0 || a.qty > 999_999_999 {
        bail!("--qty {}: from 1 to 999,999,999 shares (OrderQty is nine digits in the order template)", a.qty);
    }
    if !matches!(a.begin_string.as_str(), "FIX.4.4" | "FIX.4.2") {
        bail!("--begin-string {:?}: FIX.4.4 or FIX.4.2", a.begin_string);
    }
    let cfg = TradeConfig {
        md_group: a.md,
        iface: a.iface,
        exchange: a.exchange,
        sender: a.sender.clone(),
        target: a.target.clone(),
        begin_string: a.begin_string.clone(),
        qty: a.qty,
        duration: a.duration,
        heartbeat_s: a.heartbeat_s,
        store: a.store.clone(),
        reset_seq: a.reset_seq,
        credentials: fixnet::Credentials {
            username: a.username.clone(),
            password: a.password_file.as_deref().map(fixnet::Credentials::read_password).transpose()?,
        },
        order_fields: a
            .order_fields
            .iter()
            .map(|f| tickplant_core::ttt::parse_order_field(f).map_err(|e| anyhow!("--order-field {e}")))
            .collect::<Result<_>>()?,
        kill_file: a.kill_file.clone(),
        triggers: a.triggers.clone(),
        limits: RiskLimits {
            max_order_qty: a.max_order_qty,
            max_notional: a.max_notional,
            max_open_orders: a.max_open_orders,
            max_orders_per_second: a.max_orders_per_second,
            max_position: a.max_position,
            collar_bps: a.collar_bps,
        },
    };
    // SIGINT or SIGTERM ends the run as the duration does: the report is still written.
    let stop = tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?;
    let r = fixnet::run_trade(&cfg, &stop).with_context(|| format!("trading against {}", a.exchange))?;
    eprintln!(
        "trade: {} market data messages in {} datagrams ({} entries, {} undecodable, {} gaps); {} whole-dollar prices; {} BUYs sent, {} acks, {} BUY fills, {} SELLs sent, {} SELL fills ({} partial fills before them); risk rejects {:?}",
        r.md_messages,
        r.md_datagrams,
        r.md_entries,
        r.md_undecodable,
        r.md_gaps,
        r.whole_dollar_prices,
        r.buys_sent,
        r.acks,
        r.buy_fills,
        r.sells_sent,
        r.sell_fills,
        r.partial_fills,
        r.risk_rejects
    );
    eprintln!("  latency (ns)          count        p50      p90      p99    p99.9        max");
    for (name, l) in &r.latency_ns {
        eprintln!("    {:<16} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10}", name, l.count, l.p50, l.p90, l.p99, l.p999, l.max);
    }
    for e in &r.trigger_errors {
        eprintln!("trade: trigger file refused (the triggers in force stayed): {e}");
    }
    if r.sells_sent_before > 0 {
        eprintln!(
            "trade: {} BUY fills resent after the restart had their SELL sent before it (the store shows it): not sent again",
            r.sells_sent_before
        );
    }
    if r.rejected > 0 || r.cancelled > 0 || !r.rejections.is_empty() {
        eprintln!(
            "trade: WARNING: the exchange rejected {} orders and cancelled {}; what it refused, by its reason:",
            r.rejected, r.cancelled
        );
        for (why, n) in &r.rejections {
            eprintln!("    {n:>9}  {why}");
        }
    }
    if let Some(p) = &a.report {
        std::fs::write(p, serde_json::to_string_pretty(&r)? + "\n").with_context(|| format!("{}", p.display()))?;
    }
    if let Some(e) = &r.ended {
        bail!("trading against {}: {e}", a.exchange);
    }
    Ok(r)
}

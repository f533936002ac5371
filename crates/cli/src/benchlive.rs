//! `tickplant bench live`: the research's rate experiment on our own stack. A simulated
//! ITCH day (the demo's generator) is sent as A and B (`tickplant replay`, both copies at
//! the same offered rate) into a handler (`tickplant run` on the two groups, in a
//! process of its own, one counting consumer) at increasing rates; each rate's row gives
//! what was offered, what the consumer got, what the kernel dropped on the sockets, what
//! the arbitrator reported lost (gaps), and the receive-to-consumer latency from the
//! kernel's receive stamp. `--find-max` bisects for the highest rate with no loss.
//! On loopback, or (`--netns`, root) between two network namespaces joined by a veth pair
//! a line, the sender in one and the handler in the other.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

#[derive(Debug, Args)]
pub struct BenchLiveArgs {
    /// Messages in the simulated day.
    #[arg(long, default_value_t = 200_000)]
    pub messages: u64,
    /// Offered rates to run, messages a second (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [100_000u64, 250_000, 500_000, 1_000_000])]
    pub rates: Vec<u64>,
    /// After the rates, bisect for the highest rate with no loss (--steps steps).
    #[arg(long)]
    pub find_max: bool,
    /// Bisection steps of --find-max, each one more run at a rate between the highest
    /// loss-free rate and the lowest lossy one.
    #[arg(long, default_value_t = 6)]
    pub steps: u32,
    /// Write the table as CSV here.
    #[arg(long, value_name = "FILE.csv")]
    pub csv: Option<PathBuf>,
    /// Draw latency and loss against offered rate as SVG here.
    #[arg(long, value_name = "FILE.svg")]
    pub svg: Option<PathBuf>,
    /// Working folder (default: a fresh temporary one, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Run the sender and the handler in two network namespaces joined by a veth pair a
    /// line (multicast A and B), made and removed by the bench (root only), instead of on
    /// loopback.
    #[arg(long)]
    pub netns: bool,
}

/// One offered rate's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub offered_msgs_per_s: u64,
    pub offered_packets_per_s: u64,
    /// What the sender achieved (both copies' datagrams a second / 2).
    pub sent_packets_per_s: f64,
    pub messages: u64,
    pub delivered: u64,
    pub lost_in_kernel_datagrams: u64,
    pub lost_on_wire_messages: u64,
    pub latency_p50_ns: u64,
    pub latency_p99_ns: u64,
    pub latency_p999_ns: u64,
    /// The sender reached less than 95% of the offered rate (it shares the machine's
    /// cores with the handler): the row does not show that rate.
    pub sender_limited: bool,
    pub loss_free: bool,
}

const CONFIG: &str = r#"
[source]
a = "INPUT_A"
b = "INPUT_B"
decoder = "itch50"
date = "2026-11-20"

[arbitration]
protocol = "moldudp64"
timeout-us = 50000
start-seq = 1

[run]
report = "live-report.json"
latency-sample = 4

[[consumer]]
name = "all"
action = "count"
"#;

fn free_port() -> Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Where the sender and the handler meet.
enum Net {
    Loopback,
    /// Namespaces `src` and `hdl`, A over 10.78.1.0/24, B over 10.78.2.0/24.
    Namespaces(tickplant_io::netns::Lab),
}

impl Net {
    fn namespaces() -> Result<Net> {
        if !tickplant_io::netns::Lab::allowed() {
            bail!("--netns makes network namespaces: run it as root (or without --netns, on loopback)");
        }
        let mut lab = tickplant_io::netns::Lab::new(&format!("tpb{}", std::process::id() % 100_000));
        lab.add("src")?;
        lab.add("hdl")?;
        lab.link("src", "hdl", "a", "10.78.1.1", "10.78.1.2")?;
        lab.link("src", "hdl", "b", "10.78.2.1", "10.78.2.2")?;
        Ok(Net::Namespaces(lab))
    }
    /// The handler's two inputs and the sender's two destinations.
    fn ends(&self) -> Result<([String; 2], [String; 2])> {
        Ok(match self {
            Net::Loopback => {
                let (pa, pb) = (free_port()?, free_port()?);
                (
                    [format!("udp://127.0.0.1:{pa}?rcvbuf=33554432"), format!("udp://127.0.0.1:{pb}?rcvbuf=33554432")],
                    [format!("127.0.0.1:{pa}"), format!("127.0.0.1:{pb}")],
                )
            }
            Net::Namespaces(_) => (
                [
                    "udp://239.78.1.1:5001?iface=10.78.1.2&rcvbuf=33554432".into(),
                    "udp://239.78.2.1:5002?iface=10.78.2.2&rcvbuf=33554432".into(),
                ],
                ["239.78.1.1:5001@10.78.1.1".into(), "239.78.2.1:5002@10.78.2.1".into()],
            ),
        })
    }
    fn command(&self, ns: &str) -> Result<Command> {
        let exe = std::env::current_exe()?;
        Ok(match self {
            Net::Loopback => Command::new(exe),
            Net::Namespaces(lab) => lab.command(ns, exe),
        })
    }
}

/// Run one offered rate.
fn one_rate(net: &Net, dir: &Path, feed: &Path, messages: u64, packets: u64, rate: u64) -> Result<Row> {
    let pps = (rate as f64 * packets as f64 / messages as f64).max(1.0);
    let ([in_a, in_b], [to_a, to_b]) = net.ends()?;
    let cfg = CONFIG.replace("INPUT_A", &in_a).replace("INPUT_B", &in_b);
    std::fs::write(dir.join("live.toml"), cfg)?;
    let _ = std::fs::remove_file(dir.join("live-report.json"));
    let send_s = packets as f64 / pps;
    let duration = send_s + 2.0;
    let handler = net
        .command("hdl")?
        .args(["run", "live.toml", "--quiet", "--duration", &format!("{duration:.3}")])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the handler")?;
    std::thread::sleep(Duration::from_millis(500));
    // Two copies of each packet: the pair's rate is twice the line's. The sender is
    // `tickplant replay`, in the sender's namespace where there is one.
    let f = feed.display().to_string();
    let o = net
        .command("src")?
        .args(["replay", "-q", "--pps", &(2.0 * pps).to_string(), "--report", "replay.json"])
        .arg(format!("{f}={to_a}"))
        .arg(format!("{f}={to_b}"))
        .current_dir(dir)
        .output()?;
    if !o.status.success() {
        bail!("the sender failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let sent: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("replay.json"))?)?;
    let sent_pps = sent["packets_per_s"].as_f64().unwrap_or(0.0);
    let out = handler.wait_with_output()?;
    if !out.status.success() {
        bail!("the handler failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("live-report.json"))?)?;
    let delivered = r["consumers"][0]["received"].as_u64().unwrap_or(0);
    let kernel: u64 = r["live"].as_array().map_or(0, |a| a.iter().filter_map(|x| x["kernel_drops"].as_u64()).sum());
    let wire: u64 = r["gaps"].as_array().map_or(0, |a| a.iter().filter_map(|g| g["messages"].as_u64()).sum());
    let lat = &r["consumers"][0]["receive_to_consumer_ns"];
    let decoded = r["decoded"].as_u64().unwrap_or(0);
    Ok(Row {
        offered_msgs_per_s: rate,
        offered_packets_per_s: pps as u64,
        sent_packets_per_s: sent_pps / 2.0,
        messages,
        delivered,
        lost_in_kernel_datagrams: kernel,
        lost_on_wire_messages: wire,
        latency_p50_ns: lat["p50"].as_u64().unwrap_or(0),
        latency_p99_ns: lat["p99"].as_u64().unwrap_or(0),
        latency_p999_ns: lat["p999"].as_u64().unwrap_or(0),
        sender_limited: sent_pps / 2.0 < 0.95 * pps,
        loss_free: kernel == 0 && wire == 0 && decoded == messages,
    })
}

impl Row {
    /// The row's values, in the CSV's column order.
    fn cells(&self) -> [String; 12] {
        [
            self.offered_msgs_per_s.to_string(),
            self.offered_packets_per_s.to_string(),
            format!("{:.0}", self.sent_packets_per_s),
            self.messages.to_string(),
            self.delivered.to_string(),
            self.lost_in_kernel_datagrams.to_string(),
            self.lost_on_wire_messages.to_string(),
            self.latency_p50_ns.to_string(),
            self.latency_p99_ns.to_string(),
            self.latency_p999_ns.to_string(),
            self.sender_limited.to_string(),
            self.loss_free.to_string(),
        ]
    }
}

const CSV_HEADER: &str = "offered_msgs_per_s,offered_packets_per_s,sent_packets_per_s,messages,delivered,lost_in_kernel_datagrams,lost_on_wire_messages,latency_p50_ns,latency_p99_ns,latency_p999_ns,sender_limited,loss_free";

fn print_row(r: &Row, out: &mut impl FnMut(&str)) {
    let c = r.cells();
    let widths = [10, 10, 10, 10, 10, 9, 9, 10, 10, 10];
    let mut line = String::from(" ");
    for (v, w) in c.iter().zip(widths) {
        line += &format!(" {v:>w$}");
    }
    let verdict = match (r.loss_free, r.sender_limited) {
        (true, false) => "loss-free",
        (true, true) => "loss-free, SENDER-LIMITED",
        (false, false) => "LOSS",
        (false, true) => "LOSS, SENDER-LIMITED",
    };
    out(&format!("{line}  {verdict}"));
}

pub fn bench_live(a: &BenchLiveArgs, mut out: impl FnMut(&str)) -> Result<Vec<Row>> {
    let (dir, temp) = match &a.dir {
        Some(p) => {
            std::fs::create_dir_all(p)?;
            (p.clone(), false)
        }
        None => (crate::tempdir("bench-live")?, true),
    };
    let midnight = tickplant_core::itch::midnight_eastern_ns(crate::simcmd::SIM_DATE).map_err(anyhow::Error::msg)?;
    let day = tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig {
        seed: 7,
        symbols: 200,
        messages: a.messages,
        target_live: 0,
    });
    // The sender and the handler run in `dir`: paths absolute.
    let dir = dir.canonicalize()?;
    let net = if a.netns { Net::namespaces()? } else { Net::Loopback };
    let feed = dir.join("feed.pcap");
    let packets = crate::simcmd::write_itch_capture(&feed, &day.messages, 7, 8, midnight)? as u64;
    let messages = day.messages.len() as u64;
    out(&format!(
        "bench live: {messages} ITCH messages in {packets} packets, sent as A and B {} into `tickplant run` (one counting consumer)",
        if a.netns { "over two veth pairs between network namespaces" } else { "on loopback" }
    ));
    out("  offered/s  packets/s    sent/s   messages  delivered  kern.lost wire.lost  p50 ns     p99 ns     p99.9 ns");
    let mut rows = Vec::new();
    for &rate in &a.rates {
        let r = one_rate(&net, &dir, &feed, messages, packets, rate)?;
        print_row(&r, &mut out);
        rows.push(r);
    }
    if a.find_max {
        // A rate counts as held only loss-free and actually offered; a sender that fell
        // short bounds the search from above as a loss does.
        let held = |r: &Row| r.loss_free && !r.sender_limited;
        let mut lo = rows.iter().filter(|r| held(r)).map(|r| r.offered_msgs_per_s).max().unwrap_or(0);
        let mut hi = rows.iter().filter(|r| !held(r)).map(|r| r.offered_msgs_per_s).filter(|&h| h > lo).min();
        // No loss yet: double until there is some.
        while hi.is_none() {
            let rate = (lo * 2).max(100_000);
            let r = one_rate(&net, &dir, &feed, messages, packets, rate)?;
            print_row(&r, &mut out);
            if held(&r) {
                lo = rate;
            } else {
                hi = Some(rate);
            }
            rows.push(r);
            if rate > 100_000_000 {
                break;
            }
        }
        if let Some(mut h) = hi {
            for _ in 0..a.steps {
                let mid = (lo + h) / 2;
                if mid <= lo || mid >= h {
                    break;
                }
                let r = one_rate(&net, &dir, &feed, messages, packets, mid)?;
                print_row(&r, &mut out);
                if held(&r) {
                    lo = mid;
                } else {
                    h = mid;
                }
                rows.push(r);
            }
        }
        let pps = lo as f64 * packets as f64 / messages as f64;
        out(&format!(
            "highest loss-free rate offered in full: {lo} messages/s ({pps:.0} packets/s a line); target >= 1,000,000 messages/s: {}",
            crate::bench::judge(lo >= 1_000_000, "meets", "MISSES")
        ));
        if lo > 0 {
            let half = one_rate(&net, &dir, &feed, messages, packets, lo / 2)?;
            out(&format!(
                "at half that rate ({} messages/s): receive-to-consumer p50 {} ns, p99 {} ns, p99.9 {} ns; target p99 < 50 us: {}",
                lo / 2,
                half.latency_p50_ns,
                half.latency_p99_ns,
                half.latency_p999_ns,
                crate::bench::judge(half.latency_p99_ns < 50_000, "meets", "MISSES")
            ));
            rows.push(half);
        }
    }
    rows.sort_by_key(|r| r.offered_msgs_per_s);
    if let Some(p) = &a.csv {
        let mut s = format!("{CSV_HEADER}\n");
        for r in &rows {
            s += &r.cells().join(",");
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    if let Some(p) = &a.svg {
        std::fs::write(p, svg(&rows)).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(rows)
}

/// Latency (p50, p99, µs, log scale) and loss (% of messages) against the offered rate.
pub fn svg(rows: &[Row]) -> String {
    let (w, h, l, r, t, b) = (720.0, 420.0, 70.0, 70.0, 30.0, 50.0);
    let max_rate = rows.iter().map(|r| r.offered_msgs_per_s).max().unwrap_or(1) as f64;
    let x = |rate: u64| l + (rate as f64 / max_rate) * (w - l - r);
    let lat_max = rows.iter().map(|r| r.latency_p99_ns).max().unwrap_or(1000).max(1000) as f64 / 1e3;
    let (lo, hi) = (0.0f64, lat_max.log10().ceil().max(1.0));
    let y_lat = |ns: u64| {
        let us = (ns as f64 / 1e3).max(1.0);
        h - b - (us.log10() - lo) / (hi - lo) * (h - t - b)
    };
    let loss = |r: &Row| {
        let lost = r.messages.saturating_sub(r.delivered) as f64;
        100.0 * lost / r.messages.max(1) as f64
    };
    let loss_max = rows.iter().map(loss).fold(1.0f64, f64::max);
    let y_loss = |p: f64| h - b - p / loss_max * (h - t - b);
    let line = |pts: Vec<(f64, f64)>, color: &str| {
        let d: Vec<String> = pts.iter().map(|(a, c)| format!("{a:.1},{c:.1}")).collect();
        format!(r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#, d.join(" "))
    };
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/>
<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>
<line x1="{}" y1="{t}" x2="{}" y2="{}" stroke="black"/>
<text x="{}" y="{}" text-anchor="middle">offered rate, messages/s (max {max_rate:.0})</text>
<text x="15" y="{}" transform="rotate(-90 15 {})" text-anchor="middle">receive-to-consumer latency, µs (log)</text>
<text x="{}" y="{}" transform="rotate(90 {} {})" text-anchor="middle">messages lost, %</text>
"#,
        h - b,
        w - r,
        h - b,
        h - b,
        w - r,
        w - r,
        h - b,
        (l + w - r) / 2.0,
        h - 12.0,
        (t + h - b) / 2.0,
        (t + h - b) / 2.0,
        w - 20.0,
        (t + h - b) / 2.0,
        w - 20.0,
        (t + h - b) / 2.0,
    );
    for k in 0..=(hi as i32) {
        let yy = h - b - (k as f64 - lo) / (hi - lo) * (h - t - b);
        s += &format!(r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#, l - 5.0, yy + 4.0, 10f64.powi(k));
        s += "\n";
    }
    s += &format!(r#"<text x="{}" y="{:.1}">{loss_max:.2}</text>"#, w - r + 5.0, t + 4.0);
    s += "\n";
    s += &line(rows.iter().map(|r| (x(r.offered_msgs_per_s), y_lat(r.latency_p50_ns))).collect(), "steelblue");
    s += &line(rows.iter().map(|r| (x(r.offered_msgs_per_s), y_lat(r.latency_p99_ns))).collect(), "navy");
    s += &line(rows.iter().map(|r| (x(r.offered_msgs_per_s), y_loss(loss(r)))).collect(), "firebrick");
    s += &format!(
        r#"
<text x="{}" y="{}" fill="steelblue">p50</text><text x="{}" y="{}" fill="navy">p99</text><text x="{}" y="{}" fill="firebrick">loss %</text>
</svg>
"#,
        l + 10.0,
        t + 12.0,
        l + 50.0,
        t + 12.0,
        l + 90.0,
        t + 12.0
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_has_its_three_lines_and_axes() {
        let row = |rate: u64, p99: u64, delivered: u64| Row {
            offered_msgs_per_s: rate,
            offered_packets_per_s: rate / 4,
            sent_packets_per_s: (rate / 4) as f64,
            messages: 1000,
            delivered,
            lost_in_kernel_datagrams: 0,
            lost_on_wire_messages: 1000 - delivered,
            latency_p50_ns: p99 / 4,
            latency_p99_ns: p99,
            latency_p999_ns: p99 * 2,
            sender_limited: false,
            loss_free: delivered == 1000,
        };
        let s = svg(&[row(100_000, 20_000, 1000), row(200_000, 40_000, 990)]);
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert!(s.contains("offered rate") && s.contains("latency") && s.contains("lost"));
        assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
    }
}

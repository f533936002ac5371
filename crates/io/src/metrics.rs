//! A Prometheus text endpoint for a running handler (`[run] metrics = "ADDR:PORT"`).
//!
//! The threads publish what they count into the [`Hub`] about ten times a second (the
//! producer: the arbitrator's and the live inputs' counters; the decode side: the feed's,
//! the books', the gaps' by reason, the consumers' rings, the stage latencies), and once
//! more at the end of the run: a copy of their own values under a lock taken only then,
//! never on the per-message path. A scrape renders the last copies (Prometheus text
//! exposition format 0.0.4): `tickplant_` names, base units (seconds), `_total` on
//! counters, the labels `feed`, `input`, `output`, `reason`, `stage`, `consumer`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tickplant_core::book::BookStats;
use tickplant_core::{ArbStats, GapReason, Policy};

use crate::live::LiveInputStats;

/// How often the threads publish.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Quantiles of a latency, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Quantiles {
    pub count: u64,
    /// (quantile, ns) for 0.5, 0.9, 0.99, 0.999.
    pub values: Vec<(f64, u64)>,
}

impl Quantiles {
    /// From time-stamp ticks, at `ns_per_tick`.
    pub fn of(t: &crate::hist::Ticks, ns_per_tick: f64) -> Quantiles {
        let h = t.to_hdr();
        let values = [0.5, 0.9, 0.99, 0.999]
            .iter()
            .map(|&q| (q, (h.value_at_quantile(q) as f64 * ns_per_tick).round() as u64))
            .collect();
        Quantiles { count: h.len(), values }
    }
}

/// The producer's part: the arbitrator and the live inputs.
#[derive(Debug, Clone, Default)]
pub struct ProducerSnap {
    /// The inputs' names in the arbitrator's order (`a`, `b`, `rerequest`).
    pub inputs: Vec<String>,
    pub arb: ArbStats,
    pub live: Vec<LiveInputStats>,
    pub frames: u64,
    pub arbitrate: Option<Quantiles>,
    /// The arbitrator's HR window now.
    pub policy: Option<Policy>,
}

/// A consumer's ring, as the decode side sees it.
#[derive(Debug, Clone, Default)]
pub struct ConsumerSnap {
    pub name: String,
    pub matched: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub waits: u64,
    pub records: u64,
    /// Records in the ring now (pushed, not yet taken), and its room in all.
    pub ring_fill: u64,
    pub ring_capacity: u64,
}

/// The decode side's part: the stream's feed, the books, the gaps, the consumers.
#[derive(Debug, Clone, Default)]
pub struct DecodeSnap {
    pub packets_in: u64,
    pub messages_in: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub book: BookStats,
    pub books: u64,
    pub stale_books: u64,
    pub live_orders: u64,
    /// Per gap reason (by code): gaps and messages lost (HR).
    pub gaps: Vec<(GapReason, u64, u64)>,
    pub consumers: Vec<ConsumerSnap>,
    pub stages: Vec<(&'static str, Quantiles)>,
    /// Snapshots that rebuilt stale books, and those asked for.
    pub resync_applied: u64,
    pub resync_snapshots: u64,
}

#[derive(Debug, Clone, Default)]
struct FeedMetrics {
    producer: Option<ProducerSnap>,
    decode: Option<DecodeSnap>,
    /// HR messages a second over the last second or so, and where that second started
    /// (when, and the HR messages then).
    hr_rate: f64,
    rate_base: Option<(Instant, u64)>,
    /// Per consumer, its ring's latency (publication to the consumer taking the record).
    rings: BTreeMap<String, Quantiles>,
}

/// The span the HR message rate is measured over (the saturation indicator's rate).
const RATE_SPAN: Duration = Duration::from_secs(1);

/// Where the threads publish and scrapes read (see the module doc).
#[derive(Debug, Default)]
pub struct Hub {
    feeds: Mutex<BTreeMap<String, FeedMetrics>>,
    started: Option<Instant>,
    /// Control commands taken, by name (`error`: refused).
    commands: Mutex<BTreeMap<String, u64>>,
}

impl Hub {
    pub fn new() -> Hub {
        Hub { feeds: Mutex::new(BTreeMap::new()), started: Some(Instant::now()), commands: Mutex::default() }
    }
    /// A control command taken (`error`: refused).
    pub fn count_command(&self, what: &str) {
        if let Ok(mut c) = self.commands.lock() {
            *c.entry(what.to_string()).or_default() += 1;
        }
    }
    pub fn publish_producer(&self, feed: &str, snap: ProducerSnap) {
        if let Ok(mut f) = self.feeds.lock() {
            let m = f.entry(feed.to_string()).or_default();
            let (now, hr) = (Instant::now(), snap.arb.hr.messages);
            match m.rate_base {
                Some((t, n)) if now - t >= RATE_SPAN => {
                    m.hr_rate = hr.saturating_sub(n) as f64 / (now - t).as_secs_f64();
                    m.rate_base = Some((now, hr));
                }
                Some(_) => {}
                None => m.rate_base = Some((now, hr)),
            }
            m.producer = Some(snap);
        }
    }
    /// A consumer's ring latency (its own thread publishes it).
    pub fn publish_ring(&self, feed: &str, consumer: &str, q: Quantiles) {
        if let Ok(mut f) = self.feeds.lock() {
            f.entry(feed.to_string()).or_default().rings.insert(consumer.to_string(), q);
        }
    }
    pub fn publish_decode(&self, feed: &str, snap: DecodeSnap) {
        if let Ok(mut f) = self.feeds.lock() {
            f.entry(feed.to_string()).or_default().decode = Some(snap);
        }
    }

    /// The exposition text of the last published values.
    pub fn render(&self) -> String {
        let feeds = match self.feeds.lock() {
            Ok(f) => f.clone(),
            Err(_) => BTreeMap::new(),
        };
        let mut out = Exposition::default();
        let up = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        out.family("tickplant_uptime_seconds", "gauge", "Seconds since the handler started.");
        out.sample("tickplant_uptime_seconds", &[], up);
        render_producer(&mut out, &feeds);
        render_saturation(&mut out, &feeds);
        render_decode(&mut out, &feeds);
        let commands = self.commands.lock().map(|c| c.clone()).unwrap_or_default();
        out.counters(
            "tickplant_control_commands_total",
            "Commands the control socket took, by name (error: refused).",
            commands.iter().map(|(k, v)| (vec![("command", k.as_str())], *v)).collect::<Rows<'_>>(),
        );
        // The stages, on a sample of frames (arbitrate) and packets (the decode side's).
        let mut q: Vec<(&str, &str, &Quantiles)> = Vec::new();
        for (f, m) in &feeds {
            if let Some(a) = m.producer.as_ref().and_then(|p| p.arbitrate.as_ref()) {
                q.push((f.as_str(), "arbitrate", a));
            }
            if let Some(d) = &m.decode {
                q.extend(d.stages.iter().map(|(s, x)| (f.as_str(), *s, x)));
            }
        }
        render_latency(
            &mut out,
            "tickplant_stage_latency_seconds",
            "Stage latency on a sample of frames or packets.",
            &q,
        );
        // The rings, labelled by consumer: publication to the consumer taking the record.
        let rings: Vec<(&str, &str, &Quantiles)> =
            feeds.iter().flat_map(|(f, m)| m.rings.iter().map(move |(c, q)| (f.as_str(), c.as_str(), q))).collect();
        render_latency_by(
            &mut out,
            "tickplant_ring_latency_seconds",
            "Ring latency, publication to the consumer taking the record, on the timed records.",
            "consumer",
            &rings,
        );
        out.text
    }
}

/// Prometheus text, one family at a time.
#[derive(Default)]
struct Exposition {
    text: String,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape(val));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {v}");
    }
    /// A counter family with one sample per (labels, value).
    fn counters<'a>(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (Vec<(&'a str, &'a str)>, u64)>) {
        self.family(name, "counter", help);
        for (l, v) in rows {
            self.sample(name, &l, v as f64);
        }
    }
    fn gauges<'a>(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (Vec<(&'a str, &'a str)>, u64)>) {
        self.family(name, "gauge", help);
        for (l, v) in rows {
            self.sample(name, &l, v as f64);
        }
    }
    fn gauges_f64(&mut self, name: &str, help: &str, rows: FRows<'_>) {
        self.family(name, "gauge", help);
        for (l, v) in rows {
            self.sample(name, &l, v);
        }
    }
}

type Rows<'a> = Vec<(Vec<(&'a str, &'a str)>, u64)>;
/// Rows of values that are not whole numbers (seconds).
type FRows<'a> = Vec<(Vec<(&'a str, &'a str)>, f64)>;

/// The arbitrator's window and the saturation indicator (the research's model, as `tickplant
/// arb` reports it): at the HR message rate now, a count window of `max-msgs` lasts
/// `max-msgs / rate`; when waits given up by count were followed by their packets arriving
/// late, the window fills faster than a packet can be waited for and the high-reliability
/// stream is acting as the low-latency one.
fn render_saturation(out: &mut Exposition, feeds: &BTreeMap<String, FeedMetrics>) {
    let mut rate: Rows<'_> = Vec::new();
    let (mut msgs, mut saturated): (Rows<'_>, Rows<'_>) = Default::default();
    let (mut timeout, mut fill): (FRows<'_>, FRows<'_>) = Default::default();
    for (feed, m) in feeds {
        let Some(p) = &m.producer else { continue };
        let l = || vec![("feed", feed.as_str())];
        rate.push((l(), m.hr_rate.round() as u64));
        let (t, n) = match p.policy {
            Some(Policy::Time { timeout_ns }) => (Some(timeout_ns), None),
            Some(Policy::Count { max_msgs }) => (None, Some(max_msgs)),
            Some(Policy::TimeCount { timeout_ns, max_msgs }) => (Some(timeout_ns), Some(max_msgs)),
            _ => (None, None),
        };
        if let Some(t) = t {
            timeout.push((l(), t as f64 / 1e9));
        }
        if let Some(n) = n {
            msgs.push((l(), n));
            if m.hr_rate > 0.0 {
                fill.push((l(), n as f64 / m.hr_rate));
            }
            let by_count = m.decode.as_ref().map_or(0, |d| {
                d.gaps.iter().filter(|(r, _, _)| *r == GapReason::Count).map(|(_, g, _)| *g).sum::<u64>()
            });
            saturated.push((l(), u64::from(by_count > 0 && p.arb.hr.late > 0)));
        }
    }
    out.gauges("tickplant_hr_message_rate", "HR messages a second over the last second.", rate);
    out.gauges("tickplant_window_messages", "The HR window's max-msgs (count and time-count windows).", msgs);
    out.gauges_f64(
        "tickplant_window_timeout_seconds",
        "The HR window's timeout (time and time-count windows).",
        timeout,
    );
    out.gauges_f64(
        "tickplant_window_fill_seconds",
        "How long the count window lasts at the HR message rate now (max-msgs / rate).",
        fill,
    );
    out.gauges(
        "tickplant_window_saturated",
        "1 when waits given up by count were followed by their packets arriving late: HR acts as LL.",
        saturated,
    );
}

fn render_producer(out: &mut Exposition, feeds: &BTreeMap<String, FeedMetrics>) {
    let prods: Vec<(&str, &ProducerSnap)> =
        feeds.iter().filter_map(|(f, m)| m.producer.as_ref().map(|p| (f.as_str(), p))).collect();
    type Field = fn(&tickplant_core::InputStats) -> u64;
    let input_fields: [(&str, &str, Field); 7] = [
        ("tickplant_input_packets_total", "Frames received on an input.", |s| s.packets),
        ("tickplant_input_messages_total", "Messages in an input's data packets.", |s| s.messages),
        ("tickplant_input_wins_total", "Data packets that brought a message first.", |s| s.wins),
        ("tickplant_input_duplicates_total", "Data packets whose messages had all arrived before.", |s| s.duplicates),
        ("tickplant_input_late_total", "Data packets whose messages had been given up.", |s| s.late),
        ("tickplant_input_out_of_order_total", "Data packets below an earlier one of the input.", |s| s.out_of_order),
        ("tickplant_input_other_total", "Frames that are not market data.", |s| s.other),
    ];
    for (name, help, f) in input_fields {
        let rows: Rows<'_> = prods
            .iter()
            .flat_map(|(feed, p)| {
                p.arb
                    .inputs
                    .iter()
                    .zip(&p.inputs)
                    .map(move |(s, n)| (vec![("feed", *feed), ("input", n.as_str())], f(s)))
            })
            .collect();
        out.counters(name, help, rows);
    }
    type OutField = fn(&tickplant_core::OutputStats) -> u64;
    let out_fields: [(&str, &str, OutField); 6] = [
        ("tickplant_output_packets_total", "Packets an arbitrated stream forwarded.", |o| o.packets),
        ("tickplant_output_messages_total", "Messages an arbitrated stream forwarded.", |o| o.messages),
        ("tickplant_output_gaps_total", "Gaps an arbitrated stream reported.", |o| o.gaps),
        ("tickplant_output_messages_lost_total", "Messages in those gaps.", |o| o.messages_lost),
        ("tickplant_output_duplicates_total", "Packets not forwarded: every message already delivered.", |o| {
            o.duplicates
        }),
        ("tickplant_output_late_total", "Packets not forwarded: their messages given up before.", |o| o.late),
    ];
    for (name, help, f) in out_fields {
        let mut rows: Rows<'_> = Vec::new();
        for (feed, p) in &prods {
            for (o, s) in [("hr", &p.arb.hr), ("ll", &p.arb.ll)] {
                if s.enabled {
                    rows.push((vec![("feed", *feed), ("output", o)], f(s)));
                }
            }
        }
        out.counters(name, help, rows);
    }
    let pending: Rows<'_> =
        prods.iter().map(|(feed, p)| (vec![("feed", *feed), ("output", "hr")], p.arb.hr.pending)).collect();
    out.gauges("tickplant_output_pending_packets", "Packets waiting in the HR buffer now.", pending);
    let rr: Vec<(&str, &tickplant_core::RerequestStats)> =
        prods.iter().filter_map(|(f, p)| p.arb.rerequest.as_ref().map(|r| (*f, r))).collect();
    if !rr.is_empty() {
        type RrField = fn(&tickplant_core::RerequestStats) -> u64;
        let fields: [(&str, &str, RrField); 5] = [
            ("tickplant_rerequest_requests_total", "Re-requests sent, retries included.", |r| r.requests),
            ("tickplant_rerequest_retries_total", "Re-requests sent again.", |r| r.retries),
            ("tickplant_rerequest_messages_requested_total", "Messages asked for again.", |r| r.messages_requested),
            ("tickplant_rerequest_messages_recovered_total", "HR messages delivered from the answers.", |r| {
                r.messages_recovered
            }),
            ("tickplant_rerequest_unanswered_total", "Re-requests given up after their last retry.", |r| r.unanswered),
        ];
        for (name, help, f) in fields {
            out.counters(name, help, rr.iter().map(|(feed, r)| (vec![("feed", *feed)], f(r))).collect::<Rows<'_>>());
        }
    }
    let live: Vec<(&str, &LiveInputStats)> =
        prods.iter().flat_map(|(f, p)| p.live.iter().map(move |l| (*f, l))).collect();
    if !live.is_empty() {
        type LiveField = fn(&LiveInputStats) -> u64;
        // (name, help, a gauge rather than a counter, the field)
        let fields: [(&str, &str, bool, LiveField); 5] = [
            ("tickplant_live_datagrams_total", "Datagrams a live input received.", false, |l| l.datagrams),
            ("tickplant_live_bytes_total", "Bytes a live input received.", false, |l| l.bytes),
            ("tickplant_live_kernel_drops_total", "Datagrams the kernel dropped on the socket.", false, |l| {
                l.kernel_drops
            }),
            ("tickplant_live_rcvbuf_bytes", "The socket's receive buffer the kernel gave.", true, |l| l.rcvbuf),
            ("tickplant_live_rcvbuf_asked_bytes", "The socket's receive buffer asked for.", true, |l| l.rcvbuf_asked),
        ];
        for (name, help, gauge, f) in fields {
            let rows: Rows<'_> =
                live.iter().map(|(feed, l)| (vec![("feed", *feed), ("input", l.input.as_str())], f(l))).collect();
            if gauge {
                out.gauges(name, help, rows);
            } else {
                out.counters(name, help, rows);
            }
        }
    }
    let frames: Rows<'_> = prods.iter().map(|(f, p)| (vec![("feed", *f)], p.frames)).collect();
    out.counters("tickplant_frames_total", "Frames through the arbitrator.", frames);
}

fn render_latency(out: &mut Exposition, name: &str, help: &str, rows: &[(&str, &str, &Quantiles)]) {
    render_latency_by(out, name, help, "stage", rows);
}

/// A summary per feed and `label` (the stage, or the consumer).
fn render_latency_by(out: &mut Exposition, name: &str, help: &str, label: &str, rows: &[(&str, &str, &Quantiles)]) {
    if rows.is_empty() {
        return;
    }
    out.family(name, "summary", help);
    for (feed, what, q) in rows {
        for (quantile, ns) in &q.values {
            let qs = quantile.to_string();
            out.sample(name, &[("feed", feed), (label, what), ("quantile", &qs)], *ns as f64 / 1e9);
        }
        out.sample(&format!("{name}_count"), &[("feed", feed), (label, what)], q.count as f64);
    }
}

fn render_decode(out: &mut Exposition, feeds: &BTreeMap<String, FeedMetrics>) {
    let decs: Vec<(&str, &DecodeSnap)> =
        feeds.iter().filter_map(|(f, m)| m.decode.as_ref().map(|d| (f.as_str(), d))).collect();
    type Field = fn(&DecodeSnap) -> u64;
    let counters: [(&str, &str, Field); 5] = [
        ("tickplant_decode_packets_total", "HR packets decoded.", |d| d.packets_in),
        ("tickplant_decode_messages_total", "Messages in the HR packets.", |d| d.messages_in),
        ("tickplant_decoded_messages_total", "Messages decoded into events.", |d| d.decoded),
        ("tickplant_undecodable_messages_total", "Messages that could not be decoded.", |d| d.undecodable),
        ("tickplant_book_applied_total", "Events that changed a book.", |d| d.book.applied),
    ];
    for (name, help, f) in counters {
        out.counters(name, help, decs.iter().map(|(feed, d)| (vec![("feed", *feed)], f(d))).collect::<Rows<'_>>());
    }
    let gauges: [(&str, &str, Field); 3] = [
        ("tickplant_books", "Instruments whose book holds orders.", |d| d.books),
        ("tickplant_books_stale", "Books stale now (a gap touched them, not yet rebuilt).", |d| d.stale_books),
        ("tickplant_book_live_orders", "Orders resting in the books now.", |d| d.live_orders),
    ];
    for (name, help, f) in gauges {
        out.gauges(name, help, decs.iter().map(|(feed, d)| (vec![("feed", *feed)], f(d))).collect::<Rows<'_>>());
    }
    let mut gaps: Rows<'_> = Vec::new();
    let mut lost: Rows<'_> = Vec::new();
    for (feed, d) in &decs {
        for (r, n, m) in &d.gaps {
            gaps.push((vec![("feed", *feed), ("reason", r.as_str())], *n));
            lost.push((vec![("feed", *feed), ("reason", r.as_str())], *m));
        }
    }
    out.counters("tickplant_gaps_total", "HR gaps, by why they were given up.", gaps);
    out.counters("tickplant_gap_messages_total", "Messages in the HR gaps, by reason.", lost);
    let resync: Rows<'_> = decs.iter().map(|(f, d)| (vec![("feed", *f)], d.resync_applied)).collect();
    out.counters("tickplant_resync_applied_total", "Snapshots that rebuilt stale books.", resync);
    type CField = fn(&ConsumerSnap) -> u64;
    let cfields: [(&str, &str, CField); 5] = [
        ("tickplant_consumer_matched_total", "Records a consumer's filter took.", |c| c.matched),
        ("tickplant_consumer_delivered_total", "Records pushed into a consumer's ring.", |c| c.delivered),
        ("tickplant_consumer_dropped_total", "Records dropped for a full ring.", |c| c.dropped),
        ("tickplant_consumer_ring_waits_total", "Waits for room in a consumer's ring.", |c| c.waits),
        ("tickplant_consumer_stream_records_total", "Gap and trusted records pushed.", |c| c.records),
    ];
    let gfields: [(&str, &str, CField); 2] = [
        ("tickplant_consumer_ring_fill", "Records in a consumer's ring, not yet taken.", |c| c.ring_fill),
        ("tickplant_consumer_ring_capacity", "Records a consumer's ring holds.", |c| c.ring_capacity),
    ];
    let rows = |f: CField| -> Rows<'_> {
        decs.iter()
            .flat_map(|(feed, d)| {
                d.consumers.iter().map(move |c| (vec![("feed", *feed), ("consumer", c.name.as_str())], f(c)))
            })
            .collect()
    };
    for (name, help, f) in cfields {
        out.counters(name, help, rows(f));
    }
    for (name, help, f) in gfields {
        out.gauges(name, help, rows(f));
    }
}

/// Serve `hub` on `addr` (`GET /metrics`, or any path: the same text) on a thread of its
/// own for the rest of the process. Returns the address bound (a port of 0 takes a free
/// one).
pub fn serve(addr: &str, hub: Arc<Hub>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut req = [0u8; 2048];
            let n = s.read(&mut req).unwrap_or(0);
            let head = String::from_utf8_lossy(&req[..n]);
            let resp = if head.starts_with("GET ") {
                let body = hub.render();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = s.write_all(resp.as_bytes());
        }
    })?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_names_every_sample_of_its_family() {
        let hub = Hub::new();
        let arb = ArbStats { inputs: vec![Default::default(); 2], ..Default::default() };
        hub.publish_producer(
            "it\"ch",
            ProducerSnap { inputs: vec!["a".into(), "b".into()], arb, frames: 7, ..Default::default() },
        );
        hub.publish_decode(
            "it\"ch",
            DecodeSnap { decoded: 5, gaps: vec![(GapReason::Timeout, 1, 3)], ..Default::default() },
        );
        let t = hub.render();
        assert!(t.contains("tickplant_frames_total{feed=\"it\\\"ch\"} 7\n"), "{t}");
        assert!(t.contains("tickplant_input_packets_total{feed=\"it\\\"ch\",input=\"b\"} 0\n"), "{t}");
        assert!(t.contains("tickplant_gap_messages_total{feed=\"it\\\"ch\",reason=\"timeout\"} 3\n"), "{t}");
        // Every sample line's name has its TYPE line before it.
        let mut typed = std::collections::HashSet::new();
        for l in t.lines() {
            if let Some(r) = l.strip_prefix("# TYPE ") {
                typed.insert(r.split(' ').next().unwrap().to_string());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                let family = name.strip_suffix("_count").filter(|f| typed.contains(*f)).unwrap_or(name);
                assert!(typed.contains(family), "{l}");
            }
        }
    }

    #[test]
    fn the_saturation_indicator_follows_the_window_and_the_rate() {
        let hub = Hub::new();
        let mut arb = ArbStats { inputs: vec![Default::default(); 2], ..Default::default() };
        arb.hr.messages = 1_000;
        let snap = |arb: ArbStats| ProducerSnap {
            inputs: vec!["a".into(), "b".into()],
            arb,
            policy: Some(Policy::TimeCount { timeout_ns: 2_000_000, max_msgs: 500 }),
            ..Default::default()
        };
        hub.publish_producer("f", snap(arb.clone()));
        // A second of 100,000 messages later (the rate's base moved back a second).
        if let Ok(mut f) = hub.feeds.lock() {
            let m = f.get_mut("f").unwrap();
            m.rate_base = m.rate_base.map(|(t, n)| (t - RATE_SPAN, n));
        }
        arb.hr.messages = 101_000;
        arb.hr.late = 3;
        hub.publish_producer("f", snap(arb));
        let t = hub.render();
        let line = |name: &str| t.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {t}"));
        let v = |name: &str| line(name).rsplit(' ').next().unwrap().parse::<f64>().unwrap();
        assert!((v("tickplant_hr_message_rate") - 100_000.0).abs() < 2_000.0, "{t}");
        assert_eq!(v("tickplant_window_messages"), 500.0);
        assert_eq!(v("tickplant_window_timeout_seconds"), 0.002);
        assert!((v("tickplant_window_fill_seconds") - 0.005).abs() < 0.0002, "{t}");
        // Late packets, but no wait given up by count: not saturated; then one.
        assert_eq!(v("tickplant_window_saturated"), 0.0);
        hub.publish_decode("f", DecodeSnap { gaps: vec![(GapReason::Count, 2, 9)], ..Default::default() });
        let t = hub.render();
        assert!(t.contains("tickplant_window_saturated{feed=\"f\"} 1\n"), "{t}");
    }
}

//! `tickplant top SOCKET`: a terminal view of a running handler, from its control socket's
//! `status` (the metrics the threads publish, Prometheus text): per feed and input the
//! message rate, A/B wins, gaps and losses over the last interval, stage latencies,
//! consumer ring fill and drops, book state. `q`, Esc or Ctrl-C quits and leaves the
//! terminal as it was; `--once` prints one plain-text view instead (for scripts).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::Constraint;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

#[derive(Debug, Args)]
pub struct TopArgs {
    /// The handler's control socket ([run] control).
    pub socket: PathBuf,
    /// How often the view is refreshed; rates are over this interval.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval_ms: u64,
    /// Print one view as plain text (rates over one interval) and exit.
    #[arg(long)]
    pub once: bool,
}

/// One sample of the handler's metrics: (name, labels) -> value; summaries' quantiles
/// under their `quantile` label.
#[derive(Debug, Clone, Default)]
struct Sample {
    at: Option<Instant>,
    values: BTreeMap<(String, Vec<(String, String)>), f64>,
}

impl Sample {
    fn take(socket: &Path) -> Result<Sample> {
        let answer = tickplant_io::control::send(socket, "status").map_err(|e| anyhow!("{}: {e}", socket.display()))?;
        let v: serde_json::Value = serde_json::from_str(&answer).context("the status answer is not JSON")?;
        let text = v["metrics"].as_str().ok_or_else(|| anyhow!("the handler publishes no metrics: {answer}"))?;
        Sample::parse(text, Instant::now())
    }

    /// The samples of a metrics text, taken at `at`.
    fn parse(text: &str, at: Instant) -> Result<Sample> {
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .context("the status metrics do not parse")?;
        let mut values = BTreeMap::new();
        for s in scrape.samples {
            let mut labels: Vec<(String, String)> = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            labels.sort();
            match s.value {
                prometheus_parse::Value::Counter(x)
                | prometheus_parse::Value::Gauge(x)
                | prometheus_parse::Value::Untyped(x) => {
                    values.insert((s.metric, labels), x);
                }
                prometheus_parse::Value::Summary(qs) => {
                    for q in qs {
                        let mut l = labels.clone();
                        l.push(("quantile".to_string(), q.quantile.to_string()));
                        l.sort();
                        values.insert((s.metric.clone(), l), q.count);
                    }
                }
                _ => {}
            }
        }
        Ok(Sample { at: Some(at), values })
    }

    /// The value of `name` with exactly `labels`.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut l: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        l.sort();
        self.values.get(&(name.to_string(), l)).copied()
    }

    /// The values a label takes on `name` among the samples that have `feed`.
    fn label_values(&self, name: &str, feed: &str, label: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .values
            .keys()
            .filter(|(n, l)| n == name && l.iter().any(|(k, v)| k == "feed" && v == feed))
            .filter_map(|(_, l)| l.iter().find(|(k, _)| k == label).map(|(_, v)| v.clone()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn feeds(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .values
            .keys()
            .filter_map(|(_, l)| l.iter().find(|(k, _)| k == "feed").map(|(_, v)| v.clone()))
            .collect();
        f.sort();
        f.dedup();
        f
    }
}

/// What the view shows, from two samples (rates over the time between them).
#[derive(Debug, Default, PartialEq)]
struct View {
    uptime_s: f64,
    feeds: Vec<FeedView>,
}

/// An input: packets and messages a second, wins in the interval and in all, duplicates
/// and late packets in all.
#[derive(Debug, Default, PartialEq)]
struct InputView {
    name: String,
    packets_per_s: f64,
    messages_per_s: f64,
    wins_now: u64,
    wins: u64,
    duplicates: u64,
    late: u64,
}

#[derive(Debug, Default, PartialEq)]
struct FeedView {
    name: String,
    /// HR messages a second, and in all.
    hr_rate: f64,
    hr_messages: u64,
    /// HR gaps and messages lost: in the interval, and in all.
    gaps: (u64, u64),
    lost: (u64, u64),
    pending: u64,
    books: u64,
    stale_books: u64,
    inputs: Vec<InputView>,
    kernel_drops: u64,
    /// Per stage: name, p50 and p99 in ns.
    stages: Vec<(String, f64, f64)>,
    /// Per consumer: name, records/s, ring fill, ring capacity, dropped, ring latency p99 (ns).
    consumers: Vec<(String, f64, u64, u64, u64, f64)>,
}

fn view(prev: &Sample, now: &Sample) -> View {
    let dt = match (prev.at, now.at) {
        (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
        _ => 0.0,
    };
    let rate = |name: &str, labels: &[(&str, &str)]| {
        let (a, b) = (prev.get(name, labels).unwrap_or(0.0), now.get(name, labels).unwrap_or(0.0));
        if dt > 0.0 {
            (b - a).max(0.0) / dt
        } else {
            0.0
        }
    };
    let delta = |name: &str, labels: &[(&str, &str)]| {
        (now.get(name, labels).unwrap_or(0.0) - prev.get(name, labels).unwrap_or(0.0)).max(0.0) as u64
    };
    let total = |name: &str, labels: &[(&str, &str)]| now.get(name, labels).unwrap_or(0.0) as u64;
    let mut feeds = Vec::new();
    for f in now.feeds() {
        let fl = [("feed", f.as_str())];
        let hr = [("feed", f.as_str()), ("output", "hr")];
        let inputs = now
            .label_values("tickplant_input_packets_total", &f, "input")
            .into_iter()
            .map(|i| {
                let l = [("feed", f.as_str()), ("input", i.as_str())];
                InputView {
                    name: i.clone(),
                    packets_per_s: rate("tickplant_input_packets_total", &l),
                    messages_per_s: rate("tickplant_input_messages_total", &l),
                    wins_now: delta("tickplant_input_wins_total", &l),
                    wins: total("tickplant_input_wins_total", &l),
                    duplicates: total("tickplant_input_duplicates_total", &l),
                    late: total("tickplant_input_late_total", &l),
                }
            })
            .collect();
        let kernel_drops = now
            .label_values("tickplant_live_kernel_drops_total", &f, "input")
            .iter()
            .map(|i| total("tickplant_live_kernel_drops_total", &[("feed", f.as_str()), ("input", i.as_str())]))
            .sum();
        let stages = now
            .label_values("tickplant_stage_latency_seconds", &f, "stage")
            .into_iter()
            .map(|s| {
                let q = |q: &str| {
                    now.get(
                        "tickplant_stage_latency_seconds",
                        &[("feed", f.as_str()), ("stage", s.as_str()), ("quantile", q)],
                    )
                    .unwrap_or(0.0)
                        * 1e9
                };
                let (p50, p99) = (q("0.5"), q("0.99"));
                (s, p50, p99)
            })
            .collect();
        let consumers = now
            .label_values("tickplant_consumer_delivered_total", &f, "consumer")
            .into_iter()
            .map(|c| {
                let l = [("feed", f.as_str()), ("consumer", c.as_str())];
                (
                    c.clone(),
                    rate("tickplant_consumer_delivered_total", &l),
                    total("tickplant_consumer_ring_fill", &l),
                    total("tickplant_consumer_ring_capacity", &l),
                    total("tickplant_consumer_dropped_total", &l),
                    now.get(
                        "tickplant_ring_latency_seconds",
                        &[("feed", f.as_str()), ("consumer", c.as_str()), ("quantile", "0.99")],
                    )
                    .unwrap_or(0.0)
                        * 1e9,
                )
            })
            .collect();
        let gap_reasons = now.label_values("tickplant_gaps_total", &f, "reason");
        let by_reason = |name: &str, d: bool| -> u64 {
            gap_reasons
                .iter()
                .map(|r| {
                    let l = [("feed", f.as_str()), ("reason", r.as_str())];
                    if d {
                        delta(name, &l)
                    } else {
                        total(name, &l)
                    }
                })
                .sum()
        };
        feeds.push(FeedView {
            hr_rate: rate("tickplant_output_messages_total", &hr),
            hr_messages: total("tickplant_output_messages_total", &hr),
            gaps: (by_reason("tickplant_gaps_total", true), by_reason("tickplant_gaps_total", false)),
            lost: (by_reason("tickplant_gap_messages_total", true), by_reason("tickplant_gap_messages_total", false)),
            pending: total("tickplant_output_pending_packets", &hr),
            books: total("tickplant_books", &fl),
            stale_books: total("tickplant_books_stale", &fl),
            inputs,
            kernel_drops,
            stages,
            consumers,
            name: f,
        });
    }
    View { uptime_s: now.get("tickplant_uptime_seconds", &[]).unwrap_or(0.0), feeds }
}

/// The view as lines of text (`--once`, and the text the terminal view is made of).
fn text(v: &View, socket: &Path) -> Vec<String> {
    let mut out =
        vec![format!("tickplant top {}: up {:.0} s, {} feed(s)", socket.display(), v.uptime_s, v.feeds.len())];
    for f in &v.feeds {
        out.push(String::new());
        out.push(format!(
            "feed {}: {:.0} msgs/s HR ({} in all), gaps {} now / {} in all ({} / {} messages lost), {} waiting, books {} ({} stale)",
            f.name, f.hr_rate, f.hr_messages, f.gaps.0, f.gaps.1, f.lost.0, f.lost.1, f.pending, f.books, f.stale_books
        ));
        out.push(format!(
            "  {:<10} {:>10} {:>10} {:>8} {:>12} {:>10} {:>8}   kernel drops {}",
            "input", "pkts/s", "msgs/s", "wins now", "wins", "dups", "late", f.kernel_drops
        ));
        for i in &f.inputs {
            out.push(format!(
                "  {:<10} {:>10.0} {:>10.0} {:>8} {:>12} {:>10} {:>8}",
                i.name, i.packets_per_s, i.messages_per_s, i.wins_now, i.wins, i.duplicates, i.late
            ));
        }
        let stages: Vec<String> =
            f.stages.iter().map(|(s, p50, p99)| format!("{s} p50 {p50:.0} ns p99 {p99:.0} ns")).collect();
        out.push(format!(
            "  stages: {}",
            if stages.is_empty() { "none timed yet".to_string() } else { stages.join(", ") }
        ));
        out.push(format!(
            "  {:<12} {:>10} {:>16} {:>10} {:>14}",
            "consumer", "recs/s", "ring fill", "dropped", "ring p99 ns"
        ));
        for (name, r, fill, cap, dropped, p99) in &f.consumers {
            out.push(format!("  {name:<12} {r:>10.0} {:>16} {dropped:>10} {p99:>14.0}", format!("{fill}/{cap}")));
        }
    }
    out
}

pub fn top(a: &TopArgs) -> Result<()> {
    if a.interval_ms == 0 {
        anyhow::bail!("--interval-ms must be above 0");
    }
    let interval = Duration::from_millis(a.interval_ms);
    let mut prev = Sample::take(&a.socket)?;
    if a.once {
        std::thread::sleep(interval);
        let now = Sample::take(&a.socket)?;
        for l in text(&view(&prev, &now), &a.socket) {
            println!("{l}");
        }
        return Ok(());
    }
    let mut terminal = ratatui::try_init().context("cannot take the terminal")?;
    let r = run_view(&mut terminal, a, interval, &mut prev);
    // The terminal as it was, whatever happened above.
    ratatui::restore();
    r
}

fn run_view(terminal: &mut ratatui::DefaultTerminal, a: &TopArgs, interval: Duration, prev: &mut Sample) -> Result<()> {
    let mut now = prev.clone();
    let mut error: Option<String>;
    let mut next = Instant::now();
    loop {
        if Instant::now() >= next {
            next = Instant::now() + interval;
            match Sample::take(&a.socket) {
                Ok(s) => {
                    *prev = std::mem::replace(&mut now, s);
                    error = None;
                }
                Err(e) => error = Some(format!("{e:#}")),
            }
            let v = view(prev, &now);
            terminal.draw(|f| draw(f, &v, &a.socket, error.as_deref()))?;
        }
        if event::poll(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100)))? {
            if let Event::Key(k) = event::read()? {
                let quit = matches!(k.code, KeyCode::Char('q') | KeyCode::Esc)
                    || (k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL));
                if k.kind == KeyEventKind::Press && quit {
                    return Ok(());
                }
            }
        }
    }
}

fn draw(f: &mut ratatui::Frame<'_>, v: &View, socket: &Path, error: Option<&str>) {
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let header = match error {
        Some(e) => format!("tickplant top {}: not answering: {e}", socket.display()),
        None => {
            format!("tickplant top {}: up {:.0} s, {} feed(s)   (q quits)", socket.display(), v.uptime_s, v.feeds.len())
        }
    };
    let block = Block::bordered().title(Line::from(header).style(bold));
    if v.feeds.is_empty() {
        f.render_widget(Paragraph::new("no feed has published yet").block(block), f.area());
        return;
    }
    // The lines of the text view (its first, the header, is the border's title), each
    // feed's first in bold.
    let rows: Vec<Row<'_>> = text(v, socket)
        .into_iter()
        .skip(2)
        .map(|l| {
            let bold_line = l.starts_with("feed ");
            let row = Row::new(vec![Cell::from(l)]);
            if bold_line {
                row.style(bold)
            } else {
                row
            }
        })
        .collect();
    f.render_widget(Table::new(rows, [Constraint::Percentage(100)]).block(block), f.area());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, text: &str) -> Sample {
        Sample::parse(text, at).unwrap()
    }

    #[test]
    fn rates_are_over_the_interval_and_totals_are_the_last_sample() {
        let t0 = Instant::now();
        let head = "# TYPE tickplant_output_messages_total counter\n# TYPE tickplant_input_packets_total counter\n# TYPE tickplant_input_wins_total counter\n# TYPE tickplant_gaps_total counter\n";
        let a = sample(t0, &format!("{head}tickplant_output_messages_total{{feed=\"f\",output=\"hr\"}} 1000\ntickplant_input_packets_total{{feed=\"f\",input=\"a\"}} 100\ntickplant_input_wins_total{{feed=\"f\",input=\"a\"}} 60\ntickplant_gaps_total{{feed=\"f\",reason=\"timeout\"}} 1\n"));
        let b = sample(t0 + Duration::from_secs(2), &format!("{head}tickplant_output_messages_total{{feed=\"f\",output=\"hr\"}} 5000\ntickplant_input_packets_total{{feed=\"f\",input=\"a\"}} 300\ntickplant_input_wins_total{{feed=\"f\",input=\"a\"}} 110\ntickplant_gaps_total{{feed=\"f\",reason=\"timeout\"}} 4\n"));
        let v = view(&a, &b);
        let f = &v.feeds[0];
        assert_eq!((f.name.as_str(), f.hr_rate, f.hr_messages, f.gaps), ("f", 2000.0, 5000, (3, 4)));
        let a = &f.inputs[0];
        assert_eq!((a.name.as_str(), a.packets_per_s, a.wins_now, a.wins), ("a", 100.0, 50, 110));
        let t = text(&v, Path::new("x.sock")).join("\n");
        assert!(t.contains("feed f: 2000 msgs/s HR (5000 in all), gaps 3 now / 4 in all"), "{t}");
    }
}

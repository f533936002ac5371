//! `tickplant report REPORT.json --out report.html`: pictures of a run from the report
//! `tickplant run` writes (`[run] report`): the message rate over the day, A/B wins and
//! gaps over the day (the report's `timeline`), stage and ring latency quantiles, and each
//! consumer's deliveries and drops. One self-contained HTML file with inline SVG: no
//! script, no fonts, nothing fetched; it opens in any browser and mails as it is.
//! (`tickplant bench live --svg` draws latency and loss against offered rate.)

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The report (`[run] report` of a pipeline config; `{"feeds": ...}` for several).
    pub report: PathBuf,
    /// The HTML file to write.
    #[arg(long)]
    pub out: PathBuf,
}

const W: f64 = 760.0;
const H: f64 = 220.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 30.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn nums(v: &Value) -> Vec<f64> {
    v.as_array().map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0)).collect()).unwrap_or_default()
}

/// A round axis maximum at or above `m`.
fn nice(m: f64) -> f64 {
    if m <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(m.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|k| k * p).find(|&x| x >= m).unwrap_or(10.0 * p)
}

/// Stacked columns over time: `series` (name, colour, values per slot), one slot a second.
fn over_time(title: &str, unit: &str, series: &[(&str, &str, Vec<f64>)]) -> String {
    let n = series.iter().map(|s| s.2.len()).max().unwrap_or(0);
    let mut svg = String::new();
    let _ = write!(svg, r#"<h3>{}</h3><svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">"#, esc(title));
    if n == 0 {
        svg.push_str(r#"<text x="80" y="100">no data</text></svg>"#);
        return svg;
    }
    let totals: Vec<f64> = (0..n).map(|i| series.iter().map(|s| s.2.get(i).copied().unwrap_or(0.0)).sum()).collect();
    let top = nice(totals.iter().cloned().fold(0.0, f64::max));
    let (pw, ph) = (W - LEFT - 10.0, H - BOTTOM - 10.0);
    let bw = pw / n as f64;
    for i in 0..n {
        let mut y = 10.0 + ph;
        for (_, colour, v) in series {
            let h = v.get(i).copied().unwrap_or(0.0) / top * ph;
            if h > 0.0 {
                y -= h;
                let _ = write!(
                    svg,
                    r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{colour}"/>"#,
                    LEFT + i as f64 * bw,
                    y,
                    bw.max(0.5),
                    h
                );
            }
        }
    }
    axes(&mut svg, top, unit, &format!("seconds from the first packet (0 .. {n})"));
    legend(&mut svg, series.iter().map(|s| (s.0, s.1)));
    svg.push_str("</svg>");
    svg
}

fn axes(svg: &mut String, top: f64, unit: &str, xlabel: &str) {
    let ph = H - BOTTOM - 10.0;
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="10" x2="{LEFT}" y2="{y}" stroke="#333"/><line x1="{LEFT}" y1="{y}" x2="{x}" y2="{y}" stroke="#333"/>"##,
        y = 10.0 + ph,
        x = W - 10.0
    );
    for k in 0..=4 {
        let v = top * k as f64 / 4.0;
        let y = 10.0 + ph - ph * k as f64 / 4.0;
        let _ = write!(
            svg,
            r#"<text x="{:.0}" y="{:.0}" font-size="10" text-anchor="end">{}</text>"#,
            LEFT - 4.0,
            y + 3.0,
            short(v)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="12" y="{:.0}" font-size="10" transform="rotate(-90 12 {:.0})">{}</text>"#,
        10.0 + ph / 2.0,
        10.0 + ph / 2.0,
        esc(unit)
    );
    let _ = write!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" font-size="10" text-anchor="middle">{}</text>"#,
        LEFT + (W - LEFT) / 2.0,
        H - 6.0,
        esc(xlabel)
    );
}

fn legend<'a>(svg: &mut String, items: impl Iterator<Item = (&'a str, &'a str)>) {
    for (k, (name, colour)) in items.enumerate() {
        let x = LEFT + 10.0 + k as f64 * 150.0;
        let _ = write!(
            svg,
            r#"<rect x="{x}" y="12" width="10" height="10" fill="{colour}"/><text x="{}" y="21" font-size="11">{}</text>"#,
            x + 14.0,
            esc(name)
        );
    }
}

fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.3}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Horizontal bars on a log axis: each row's quantiles (p50, p90, p99, p99.9, max).
fn latencies(title: &str, rows: &[(String, &Value)]) -> String {
    let qs = [("p50", "#1f77b4"), ("p90", "#2ca02c"), ("p99", "#ff7f0e"), ("p999", "#d62728"), ("max", "#7f7f7f")];
    let h = 30.0 + rows.len() as f64 * 26.0 + BOTTOM;
    let mut svg = String::new();
    let _ = write!(svg, r#"<h3>{}</h3><svg width="{W}" height="{h}" viewBox="0 0 {W} {h}" role="img">"#, esc(title));
    let left = 230.0;
    let top =
        rows.iter().flat_map(|(_, v)| qs.iter().map(move |(q, _)| v[*q].as_f64().unwrap_or(0.0))).fold(1.0, f64::max);
    let decades = nice(top).log10().ceil().max(1.0);
    let x = |ns: f64| left + (ns.max(1.0).log10() / decades) * (W - left - 10.0);
    for (r, (name, v)) in rows.iter().enumerate() {
        let y = 30.0 + r as f64 * 26.0;
        let _ = write!(
            svg,
            r#"<text x="{:.0}" y="{:.0}" font-size="11" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + 12.0,
            esc(name)
        );
        for (k, (q, colour)) in qs.iter().enumerate().rev() {
            let ns = v[*q].as_f64().unwrap_or(0.0);
            let _ = write!(
                svg,
                r#"<rect x="{left}" y="{:.1}" width="{:.1}" height="16" fill="{colour}" opacity="{:.2}"><title>{q} {ns:.0} ns</title></rect>"#,
                y,
                x(ns) - left,
                0.5 + 0.1 * k as f64
            );
        }
    }
    for d in 0..=decades as u32 {
        let xx = x(10f64.powi(d as i32));
        let _ = write!(
            svg,
            r##"<line x1="{xx:.1}" y1="26" x2="{xx:.1}" y2="{:.0}" stroke="#ccc"/><text x="{xx:.1}" y="{:.0}" font-size="10" text-anchor="middle">{}</text>"##,
            h - BOTTOM,
            h - BOTTOM + 12.0,
            short(10f64.powi(d as i32))
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.0}" y="{:.0}" font-size="10" text-anchor="middle">ns (log scale); bars: max, p99.9, p99, p90, p50</text>"#,
        left + (W - left) / 2.0,
        h - 4.0
    );
    legend(&mut svg, qs.iter().map(|(q, c)| (*q, *c)));
    svg.push_str("</svg>");
    svg
}

/// One feed's section.
fn section(name: &str, r: &Value) -> String {
    let mut html = String::new();
    if !name.is_empty() {
        let _ = write!(html, "<h2>feed {}</h2>", esc(name));
    }
    let _ = write!(
        html,
        "<p>{} frames; {} messages decoded of {} ({} undecodable); {} gaps; {:.3} s, {} messages/s.</p>",
        r["frames"],
        r["decoded"],
        r["messages_in"],
        r["undecodable"],
        r["gaps"].as_array().map_or(0, |g| g.len()),
        r["wall_s"].as_f64().unwrap_or(0.0),
        short(r["messages_per_s"].as_f64().unwrap_or(0.0))
    );
    let t = &r["timeline"];
    html += &over_time(
        "Message rate over the day (HR stream)",
        "messages / s",
        &[("messages", "#1f77b4", nums(&t["messages"]))],
    );
    html += &over_time(
        "A/B wins over the day: packets released from each line",
        "packets / s",
        &[("won by A", "#1f77b4", nums(&t["wins_a"])), ("won by B", "#ff7f0e", nums(&t["wins_b"]))],
    );
    html += &over_time(
        "Gaps over the day: messages lost on both lines (when given up)",
        "messages / s",
        &[("messages lost", "#d62728", nums(&t["messages_lost"]))],
    );
    let mut rows: Vec<(String, &Value)> = Vec::new();
    if let Some(m) = r["latency_ns"].as_object() {
        rows.extend(m.iter().filter(|(_, v)| v["count"].as_u64().unwrap_or(0) > 0).map(|(k, v)| (k.clone(), v)));
    }
    if let Some(cs) = r["consumers"].as_array() {
        for c in cs {
            let name = c["name"].as_str().unwrap_or("?");
            if c["ring_latency_ns"]["count"].as_u64().unwrap_or(0) > 0 {
                rows.push((format!("4 ring to {name}"), &c["ring_latency_ns"]));
            }
        }
    }
    html += &latencies("Stage and ring latency", &rows);
    if let Some(cs) = r["consumers"].as_array() {
        let names: Vec<String> = cs.iter().map(|c| c["name"].as_str().unwrap_or("?").to_string()).collect();
        let delivered: Vec<f64> = cs.iter().map(|c| c["delivered"].as_f64().unwrap_or(0.0)).collect();
        let dropped: Vec<f64> = cs.iter().map(|c| c["dropped"].as_f64().unwrap_or(0.0)).collect();
        html += "<h3>Consumers: records delivered and dropped (a full ring)</h3><table><tr><th>consumer</th><th>delivered</th><th>dropped</th><th></th></tr>";
        let top = delivered.iter().zip(&dropped).map(|(a, b)| a + b).fold(1.0, f64::max);
        for ((n, d), x) in names.iter().zip(&delivered).zip(&dropped) {
            let _ = write!(
                html,
                r##"<tr><td>{}</td><td>{d}</td><td>{x}</td><td><svg width="300" height="14"><rect width="{:.1}" height="14" fill="#2ca02c"/><rect x="{:.1}" width="{:.1}" height="14" fill="#d62728"/></svg></td></tr>"##,
                esc(n),
                d / top * 300.0,
                d / top * 300.0,
                x / top * 300.0
            );
        }
        html += "</table>";
    }
    html
}

/// The page of a report.
pub fn render(report: &Value, title: &str) -> Result<String> {
    let mut body = String::new();
    if let Some(feeds) = report.get("feeds").and_then(|f| f.as_object()) {
        for (name, r) in feeds {
            body += &section(name, r);
        }
    } else if report.get("timeline").is_some() {
        body += &section("", report);
    } else {
        bail!(
            "not a report of `tickplant run` (no timeline, no feeds): written by an older tickplant, or another file"
        );
    }
    Ok(format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font-family:sans-serif;max-width:800px;margin:20px auto}}td,th{{padding:2px 8px;text-align:right}}</style></head><body><h1>{t}</h1>{body}</body></html>\n",
        t = esc(title)
    ))
}

pub fn run(a: &ReportArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.report).with_context(|| format!("{}: cannot read", a.report.display()))?;
    let report: Value = serde_json::from_str(&text).with_context(|| format!("{}: not JSON", a.report.display()))?;
    let html = render(&report, &format!("tickplant run: {}", a.report.display()))
        .with_context(|| a.report.display().to_string())?;
    std::fs::write(&a.out, html).with_context(|| format!("{}: cannot write", a.out.display()))?;
    eprintln!("wrote {}", a.out.display());
    Ok(())
}

//! `tickplant run CONFIG.toml`: the feed-handler pipeline described by one TOML file.
//! The file's sections and keys are documented in docs/feed-handler.md; examples/ holds
//! copies to start from.

use anyhow::{anyhow, Context, Result};
use tickplant_io::config::RunConfig;
use tickplant_io::pipeline::{self, Outcome};

/// Run a loaded config; prints the report to stderr (and JSON where asked). With
/// `[[feed]]` tables every feed runs at once, each on threads of its own (its producer,
/// its decode thread, its consumers), and the outcomes come back in the feeds' order.
pub fn run_all(cfg: &RunConfig, quiet: bool, duration: Option<f64>) -> Result<Vec<(String, Outcome)>> {
    let feeds = cfg.feed_configs()?;
    // What the run writes at its end, checked before it starts.
    if let Some(p) = &cfg.run.report {
        crate::check_writable(p, "[run] report")?;
    }
    for (name, c) in &feeds {
        let checks = [(&c.arbitration.gaps, "[arbitration] gaps"), (&c.book.final_books, "[book] final-books")];
        for (p, what) in checks {
            if let Some(p) = p {
                crate::check_writable(p, what).with_context(|| feed_label(name))?;
            }
        }
    }
    let mut specs = Vec::new();
    let mut stop = None;
    // One metrics endpoint for the process; each feed's samples carry its name.
    let hub = match &cfg.run.metrics {
        Some(addr) => {
            let hub = std::sync::Arc::new(tickplant_io::metrics::Hub::new());
            let bound = tickplant_io::metrics::serve(addr, hub.clone())
                .with_context(|| format!("[run] metrics = {addr:?}: cannot listen"))?;
            tracing::info!(url = %format!("http://{bound}/metrics"), "metrics endpoint");
            Some(hub)
        }
        // The control socket's `status` (and `tickplant top`) read the same metrics.
        None if cfg.run.control.is_some() => Some(std::sync::Arc::new(tickplant_io::metrics::Hub::new())),
        None => None,
    };
    let mut _socket_file = None;
    let control = match &cfg.run.control {
        Some(path) => {
            let c = std::sync::Arc::new(tickplant_io::control::Control::new(hub.clone()));
            tickplant_io::control::serve(path, c.clone())
                .with_context(|| format!("[run] control = {:?}: cannot listen", path.display()))?;
            tracing::info!(socket = %path.display(), "control socket");
            _socket_file = Some(RemovedAtEnd(path.clone()));
            Some(c)
        }
        None => None,
    };
    for (name, c) in &feeds {
        let mut spec = c.spec(!quiet).with_context(|| feed_label(name))?;
        let label = if name.is_empty() { c.source.decoder.as_str().to_string() } else { name.clone() };
        if let Some(h) = &hub {
            spec.metrics = Some((h.clone(), label.clone()));
        }
        if let Some(ctl) = &control {
            spec.control = Some((ctl.clone(), label));
        }
        if spec.inputs.iter().any(|p| tickplant_io::live::Input::is_live(p)) {
            // A live run ends at SIGINT or SIGTERM (or after its duration): drained, the
            // arbitrator flushed, the report written, exit 0. One flag stops every feed.
            if stop.is_none() {
                stop = Some(tickplant_io::live::stop_on_signals().context("cannot handle SIGINT and SIGTERM")?);
            }
            spec.live.stop = stop.clone().expect("set above");
            if let Some(d) = duration {
                spec.live.duration = Some(crate::seconds(d, "--duration")?);
            }
        } else if duration.is_some() {
            anyhow::bail!("--duration is for live inputs (udp://...); a capture's run ends at its end");
        }
        specs.push(spec);
    }
    let outcomes = pipeline::run_feeds(&specs);
    let mut done = Vec::new();
    for ((name, c), out) in feeds.into_iter().zip(outcomes) {
        let out = out.with_context(|| feed_label(&name))?;
        if !name.is_empty() {
            eprintln!("feed {name}:");
        }
        finish(&c, &out).with_context(|| feed_label(&name))?;
        done.push((name, out));
    }
    if let Some(p) = &cfg.run.report {
        let json = serde_json::to_string_pretty(&pipeline::RunReport::of(!cfg.feeds.is_empty(), &done))?;
        if p.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(p, json + "\n").with_context(|| format!("{}: cannot write", p.display()))?;
        }
    }
    Ok(done)
}

/// The control socket's file, removed when the run ends (however it ends): a `ctl` or
/// `top` started after it is told there is no socket, not that nobody answers.
struct RemovedAtEnd(std::path::PathBuf);

impl Drop for RemovedAtEnd {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn feed_label(name: &str) -> String {
    if name.is_empty() {
        "the run".to_string()
    } else {
        format!("feed {name}")
    }
}

/// Run a one-feed config (the demo's).
pub fn run(cfg: &RunConfig, quiet: bool, duration: Option<f64>) -> Result<Outcome> {
    let mut all = run_all(cfg, quiet, duration)?;
    anyhow::ensure!(all.len() == 1, "{} feeds: use run_all", all.len());
    Ok(all.remove(0).1)
}

/// A feed's summary, gaps and final books, and its accounting checked.
fn finish(cfg: &RunConfig, out: &Outcome) -> Result<()> {
    eprint!("{}", pipeline::summary(&out.report));
    if let Some(p) = &cfg.arbitration.gaps {
        // As `tickplant arb --gaps` writes them (the run has the HR output only).
        let mut s = String::from("output,first_seq,last_seq,messages,reason\n");
        for g in &out.report.gaps {
            s +=
                &format!("{},{},{},{},{}\n", g.output.as_str(), g.first_seq, g.last_seq, g.messages, g.reason.as_str());
        }
        std::fs::write(p, s).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    if let Some(p) = &cfg.book.final_books {
        let mut s = String::new();
        for (id, b) in out.books.instruments() {
            let sym = out.symbols.symbol(id).map(str::to_owned).unwrap_or_else(|| format!("#{id}"));
            crate::itchcmd::book_json(&sym, b, cfg.book.depth, &mut s);
            s.push('\n');
        }
        std::fs::write(p, s).with_context(|| format!("{}: cannot write", p.display()))?;
    }
    out.report.check().map_err(|e| anyhow!("accounting does not balance: {e}"))?;
    Ok(())
}

//! The `tickplant` command line: thin subcommands over the library crates.
#![forbid(unsafe_code)]

mod arbcmd;
mod bench;
mod benchfeeds;
mod benchlive;
mod benchrecv;
mod decodecmd;
mod democmd;
mod exportcmd;
mod fastcmd;
mod itchcmd;
mod matchcmd;
mod recoverycmd;
mod replaycmd;
mod reportcmd;
mod runcmd;
mod simcmd;
mod topcmd;
mod tradecmd;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "tickplant", version, about = "Market-data feed handler: A/B line arbitration, simulators and benchmarks.", long_about = None)]
struct Cli {
    /// How log events are written to stderr: human lines, or one JSON object a line.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// The least important log events written: error, warn, info, debug, trace (or
    /// directives such as `info,tickplant_io::recovery=debug`; TICKPLANT_LOG overrides).
    #[arg(long, global = true, default_value = "info", value_name = "LEVEL")]
    log_level: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

/// Log events (`tracing`) to stderr: the handler's operational events (endpoints started,
/// control changes, snapshots taken or failed, gaps at debug level), never one a message.
fn init_logs(format: LogFormat, level: &str) -> Result<()> {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("TICKPLANT_LOG") {
        Ok(v) => EnvFilter::try_new(&v).with_context(|| format!("TICKPLANT_LOG={v:?}"))?,
        Err(_) => EnvFilter::try_new(level).with_context(|| format!("--log-level {level:?}"))?,
    };
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Human => b.compact().init(),
        LogFormat::Json => b.json().flatten_event(true).init(),
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Merge redundant A/B feeds (captures or live groups) into a low-latency and a
    /// high-reliability output (captures, or groups they are sent on to).
    Arb(Box<tickplant_io::config::ArbArgs>),
    /// One JSON line (or CSV rows) per message of a capture, every field under the
    /// specification's name (feeds: nyse-xdp, nyse-pillar, opra-binary, itch50, opra-fast).
    Decode(decodecmd::DecodeArgs),
    /// Normalized events of a capture (or ITCH BinaryFILE) to DBN (MBO, MBP-1), Parquet,
    /// NautilusTrader's catalog or JSON lines, for research tools (docs/python.md).
    Export(exportcmd::ExportArgs),
    /// Pictures of a run from its report (`[run] report`): message rate, A/B wins and gaps
    /// over the day, stage and ring latencies, consumer drops, as one HTML file.
    Report(reportcmd::ReportArgs),
    /// Send captures as live UDP traffic, paced against absolute deadlines (recorded
    /// spacing, a fixed rate, or as fast as it goes); report the rate and the lateness.
    Replay(replaycmd::ReplayArgs),
    /// Simulators: feed generators and the A/B impairer.
    #[command(subcommand)]
    Sim(simcmd::SimCmd),
    /// NASDAQ TotalView-ITCH 5.0: decode, count, build books.
    #[command(subcommand)]
    Itch(itchcmd::ItchCmd),
    /// Run the feed-handler pipeline a TOML file describes (see examples/ and
    /// docs/feed-handler.md): captures or live groups in, arbitrated, decoded, books,
    /// consumers, report.
    Run {
        /// The pipeline's TOML file.
        config: PathBuf,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
        /// Live inputs: end after this many seconds (otherwise at SIGINT or SIGTERM;
        /// overrides [run] duration-s).
        #[arg(long, value_name = "SECONDS")]
        duration: Option<f64>,
    },
    /// Send a command to a running handler's control socket ([run] control) and print its
    /// answer (a JSON line): `status`, `policy FEED MODE [timeout-us=N] [max-msgs=N]`,
    /// `snapshot FEED [depth=N]`, `subscribe|unsubscribe FEED CONSUMER [symbols=..]
    /// [actions=..] [types=..]`, `strategies FEED CONSUMER add ID: PREDICATES | remove ID..`,
    /// `triggers FEED CONSUMER [add ID: CONDITIONS => buy|sell QTY | remove ID..]`.
    /// See docs/operations.md.
    Ctl {
        /// The handler's control socket.
        socket: PathBuf,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
        command: Vec<String>,
    },
    /// A terminal view of a running handler through its control socket ([run] control):
    /// per feed and input the message rate, A/B wins, gaps and losses, stage latencies,
    /// consumer rings and drops, books. q quits. See docs/operations.md.
    Top(topcmd::TopArgs),
    /// Match strategies (conjunctions of predicates) against events, one JSON line out per
    /// event: {"event": i, "matches": [ids ascending]}. See docs/matching.md.
    Match(matchcmd::MatchArgs),
    /// Generate an ITCH day, impair it onto A and B, run the whole pipeline on it, and
    /// check the result against the simulator's ground truth.
    Demo(democmd::DemoArgs),
    /// Tick-to-trade: read FIX market data from multicast and send orders over a FIX
    /// session (strategy fttc: BUY on each whole-dollar price, SELL on each BUY's fill).
    Trade(Box<tradecmd::TradeArgs>),
    /// FAST 1.1: decode streams to JSON lines, compile templates to a program listing,
    /// benchmark decoding. See docs/fast.md.
    #[command(subcommand)]
    Fast(fastcmd::FastCmd),
    /// Performance benchmarks with their targets and peers.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Arbitrator decision cost (ns/packet, vs a naive peer) and end-to-end pcap throughput.
    Arb {
        /// Packets per feed for the decision-cost runs.
        #[arg(long, default_value_t = 1_000_000)]
        packets: u64,
        /// Packets per feed for the end-to-end run.
        #[arg(long, default_value_t = 1_000_000)]
        e2e_packets: u64,
        /// Rounds per scenario (the best is reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Strategy matching: us/event, events/s, insert ns and bytes per strategy of the index,
    /// next to brute force on the same events.
    Match(matchcmd::BenchMatchArgs),
    /// A simulated day sent as A and B into the handler at increasing rates: delivered,
    /// lost in the kernel and on the wire, receive-to-consumer latency; --find-max bisects
    /// for the highest loss-free rate (docs/live.md).
    Live(benchlive::BenchLiveArgs),
    /// What decoding a feed costs a message (NYSE XDP: decode, events and full-depth books;
    /// OPRA binary: decode, events and per-series best bid and offer), each beside a naive
    /// peer on the same packets (docs/feeds.md).
    Feeds(benchfeeds::BenchFeedsArgs),
    /// What receiving a datagram costs on one core: the live source's recvmmsg batches
    /// beside plain recv, in the same run (docs/live.md).
    Recv {
        /// Datagrams a round.
        #[arg(long, default_value_t = 100_000)]
        datagrams: u64,
        /// Bytes a datagram.
        #[arg(long, default_value_t = 100)]
        size: usize,
        /// Rounds of each (the best is reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Commands whose output is read from their standard output: one piped into a reader
    // that stops early (`| head`) ends quietly, as Unix tools do. (Not the others: a
    // broken pipe there is a socket's, and an error.)
    let to_stdout = matches!(cli.cmd, Cmd::Decode(_) | Cmd::Export(_) | Cmd::Itch(_) | Cmd::Match(_));
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e)
            if to_stdout
                && e.chain().any(|c| {
                    c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    init_logs(cli.log_format, &cli.log_level)?;
    match cli.cmd {
        Cmd::Arb(a) => {
            let a = a.with_config_file()?;
            arbcmd::run(&a)?;
        }
        Cmd::Sim(simcmd::SimCmd::Moldudp64(a)) => {
            let n = simcmd::moldudp64(&a)?;
            eprintln!("wrote {n} MoldUDP64 packets to {}", a.out.display());
        }
        Cmd::Sim(simcmd::SimCmd::Impair(a)) => {
            let (na, nb) = simcmd::impair_cmd(&a)?;
            eprintln!("wrote {na} frames to {} and {nb} to {}", a.out_a.display(), a.out_b.display());
        }
        Cmd::Sim(simcmd::SimCmd::Relay(a)) => {
            let (n, [sa, sb]) = simcmd::relay_cmd(&a)?;
            eprintln!("relayed {n} packets: {sa} copies sent to {}, {sb} to {}", a.out_a, a.out_b);
        }
        Cmd::Sim(simcmd::SimCmd::OpraFast(a)) => {
            let (n, d) = simcmd::opra_fast_cmd(&a)?;
            eprintln!("wrote {n} OPRA FAST messages in {d} datagrams to {}", a.gen.out.display());
        }
        Cmd::Sim(simcmd::SimCmd::Nyse(a)) => {
            let (n, p) = simcmd::nyse_cmd(&a)?;
            eprintln!("wrote {n} NYSE Integrated Feed messages ({}) in {p} packets to {}", a.layout, a.out.display());
        }
        Cmd::Sim(simcmd::SimCmd::Opra(a)) => {
            let (n, d) = simcmd::opra_cmd(&a)?;
            eprintln!("wrote {n} OPRA binary messages in {d} blocks to {}", a.gen.out.display());
        }
        Cmd::Sim(simcmd::SimCmd::Itch(a)) => {
            let (n, live) = simcmd::itch_cmd(&a)?;
            eprintln!(
                "wrote {n} ITCH 5.0 messages ({} symbols, {live} orders live at the end) to {}",
                a.symbols,
                a.out.display()
            );
        }
        Cmd::Itch(itchcmd::ItchCmd::Decode(a)) => {
            itchcmd::decode(&a)?;
        }
        Cmd::Itch(itchcmd::ItchCmd::Stats(a)) => itchcmd::stats(&a)?,
        Cmd::Itch(itchcmd::ItchCmd::Book(a)) => itchcmd::book(&a)?,
        Cmd::Run { config, quiet, duration } => {
            let cfg = tickplant_io::config::RunConfig::load(&config)?;
            runcmd::run_all(&cfg, quiet, duration)?;
        }
        Cmd::Demo(d) => democmd::demo(&d)?,
        Cmd::Top(a) => topcmd::top(&a)?,
        Cmd::Ctl { socket, command } => {
            let answer = tickplant_io::control::send(&socket, &command.join(" "))
                .map_err(|e| anyhow::anyhow!("{}: {e}", socket.display()))?;
            // A snapshot's books one JSON line each; any other answer as it came.
            match serde_json::from_str::<serde_json::Value>(&answer).ok().and_then(|v| v.get("books").cloned()) {
                Some(serde_json::Value::Array(books)) => {
                    for b in books {
                        say(&b.to_string());
                    }
                }
                _ => say(&answer),
            }
            if answer.contains("\"ok\":false") {
                std::process::exit(1);
            }
        }
        Cmd::Decode(a) => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            decodecmd::decode(&a, &mut out)?;
            std::io::Write::flush(&mut out)?;
        }
        Cmd::Export(a) => exportcmd::run(&a)?,
        Cmd::Report(a) => reportcmd::run(&a)?,
        Cmd::Replay(a) => {
            replaycmd::run(&a)?;
        }
        Cmd::Sim(simcmd::SimCmd::RerequestServer(a)) => {
            let (n, r) = recoverycmd::rerequest_server(&a)?;
            eprintln!("served {n} messages: {r} requests answered");
        }
        Cmd::Sim(simcmd::SimCmd::Glimpse(a)) => {
            let st = recoverycmd::glimpse_server(&a)?;
            eprintln!(
                "served {} snapshots to {} connections ({} rejected, {} dropped)",
                st.snapshots, st.connections, st.rejected, st.dropped
            );
        }
        Cmd::Sim(simcmd::SimCmd::FixMd(a)) => tradecmd::fix_md(&a)?,
        Cmd::Sim(simcmd::SimCmd::Exchange(a)) => tradecmd::exchange(&a)?,
        Cmd::Trade(a) => {
            tradecmd::trade(&a)?;
        }
        Cmd::Match(a) => matchcmd::run(&a)?,
        Cmd::Fast(fastcmd::FastCmd::Decode(a)) => fastcmd::decode(&a)?,
        Cmd::Fast(fastcmd::FastCmd::Compile(a)) => fastcmd::compile(&a)?,
        Cmd::Fast(fastcmd::FastCmd::Bench(a)) => fastcmd::bench(&a, |l| say(&l))?,
        Cmd::Bench(BenchCmd::Match(a)) => matchcmd::bench(&a, |l| say(&l))?,
        Cmd::Bench(BenchCmd::Feeds(a)) => benchfeeds::bench(&a, |l| say(&l))?,
        Cmd::Bench(BenchCmd::Live(a)) => {
            benchlive::bench_live(&a, say)?;
        }
        Cmd::Bench(BenchCmd::Recv { datagrams, size, rounds }) => {
            benchrecv::recv_cost(datagrams, size, rounds, say)?;
        }
        Cmd::Bench(BenchCmd::Arb { packets, e2e_packets, rounds }) => {
            bench::decision_cost(packets, rounds.max(1), say);
            let dir = tempdir("bench")?;
            let r = bench::end_to_end(&dir, e2e_packets, say);
            let _ = std::fs::remove_dir_all(&dir);
            r?;
        }
    }
    Ok(())
}

/// A line to standard output. A reader that went away (`| head`) ends the program quietly,
/// as Unix tools do (`println!` panics there).
fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        panic!("writing to standard output: {e}");
    }
}

pub(crate) fn tempdir(what: &str) -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("tickplant-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("{}: cannot create", d.display()))?;
    Ok(d)
}

/// Fail now, not after the run, when a file the run writes at its end cannot be written
/// (`what` names the option). A file the check makes is removed again.
pub fn check_writable(p: &std::path::Path, what: &str) -> Result<()> {
    if p.as_os_str() == "-" {
        return Ok(());
    }
    let existed = p.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(p)
        .with_context(|| format!("{what} {}: cannot write", p.display()))?;
    if !existed {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// A positive, finite number of seconds from the command line.
pub fn seconds(s: f64, flag: &str) -> Result<std::time::Duration> {
    if s > 0.0 && s.is_finite() {
        Ok(std::time::Duration::from_secs_f64(s))
    } else {
        anyhow::bail!("{flag} {s}: a number of seconds above 0")
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every subcommand says what it does and every option and argument what it is: `--help`
    /// is the first documentation a user reads. Lists every gap, with its command path.
    #[test]
    fn every_command_and_option_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") || a.is_hide_set() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path}: argument {id}"));
                }
            }
            for s in cmd.get_subcommands() {
                let p = format!("{path} {}", s.get_name());
                if s.get_about().is_none() && s.get_long_about().is_none() {
                    missing.push(format!("{p}: no description"));
                }
                walk(s, &p, missing);
            }
        }
        let cmd = super::Cli::command();
        cmd.clone().debug_assert();
        let mut missing = Vec::new();
        walk(&cmd, "tickplant", &mut missing);
        assert!(missing.is_empty(), "without help text:\n{}", missing.join("\n"));
    }

    /// Words of a shell command line: quotes kept together, a comment, pipe, redirection or
    /// `&&` ends it.
    fn shell_words(line: &str) -> Vec<String> {
        let (mut words, mut w, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => w.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    any = true;
                }
                (None, '#' | '|' | '>' | '<' | ';' | '&') if w.is_empty() => break,
                (None, c) if c.is_whitespace() => {
                    if any || !w.is_empty() {
                        words.push(std::mem::take(&mut w));
                    }
                    any = false;
                }
                (None, c) => w.push(c),
            }
        }
        if any || !w.is_empty() {
            words.push(w);
        }
        words
    }

    /// Every `tickplant` command the user documentation shows (the command lines of its
    /// code blocks) is one this binary accepts: a renamed or removed flag fails here, not in
    /// a user's terminal.
    #[test]
    fn every_documented_command_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.push(root.join("README.md"));
        let (mut checked, mut bad) = (0, Vec::new());
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            let mut in_code = false;
            let mut pending = String::new();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("```") {
                    in_code = !in_code;
                    continue;
                }
                if !in_code {
                    continue;
                }
                let l = line.trim().trim_start_matches("$ ");
                let l = if pending.is_empty() { l.to_string() } else { format!("{pending} {l}") };
                if let Some(head) = l.strip_suffix('\\') {
                    pending = head.to_string();
                    continue;
                }
                pending.clear();
                let words = shell_words(&l);
                // Program output ("tickplant arb: ...") is not a command, and a synopsis
                // (`[--seed S]`, `a|b|c`, `CAPTURE`, `udp://GROUP:PORT`, `N,N,...`) is not one to run.
                const PLACEHOLDERS: [&str; 9] =
                    ["CAPTURE", "SOCKET", "FILE", "EVENTS", "INPUT", "PATH", "GROUP", "PORT", "SECONDS"];
                let placeholder = |w: &String| {
                    w.contains(['[', ']', '|'])
                        || w.contains("...")
                        || w.len() == 1 && w.chars().all(|c| c.is_ascii_uppercase())
                        || w.split(|c: char| !c.is_ascii_alphanumeric()).any(|p| PLACEHOLDERS.contains(&p))
                };
                if words.first().map(String::as_str) != Some("tickplant")
                    || words.iter().take(3).any(|w| w.ends_with(':'))
                    || words.iter().any(placeholder)
                {
                    continue;
                }
                checked += 1;
                if let Err(e) = <super::Cli as clap::Parser>::try_parse_from(&words) {
                    let first = e.to_string().lines().next().unwrap_or_default().to_string();
                    bad.push(format!("{}:{}: {l}\n    {first}", f.display(), n + 1));
                }
            }
        }
        eprintln!("{checked} documented commands parsed");
        assert!(checked > 40, "found only {checked} documented commands");
        assert!(bad.is_empty(), "documented commands the binary refuses:\n{}", bad.join("\n"));
    }
}

//! `tickplant export dbn|parquet|nautilus|jsonl --feed F INPUT... --out PATH`: the normalized events of
//! a capture (or an ITCH BinaryFILE) as DBN (MBO or MBP-1), Parquet files of the events,
//! NautilusTrader's catalog (its deltas and trade ticks), or JSON lines
//! (`tickplant_io::export`).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use tickplant_io::events::{EventReader, Feed, ReadOptions};
use tickplant_io::export::{export, ExportFormat};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Databento's DBN (version 3), the schema `--schema` names.
    Dbn,
    /// Parquet (zstd) of tickplant's events, one file per instrument and day under
    /// OUT/data/order_book_delta/ (`tickplant.read_parquet` reads them back exactly).
    Parquet,
    /// NautilusTrader's catalog: its order book deltas and trade ticks (Parquet, its schema),
    /// one file per instrument and day under OUT/data/order_book_delta/ and
    /// OUT/data/trade_tick/, for `ParquetDataCatalog(OUT)`.
    Nautilus,
    /// One JSON object a line, every field of the event.
    Jsonl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DbnSchema {
    /// Market by order: the book's changes order by order.
    Mbo,
    /// The best bid and offer after each event that changes a book or trades.
    #[value(name = "mbp-1")]
    Mbp1,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// What to write.
    #[arg(value_enum)]
    pub format: Format,
    /// The feed the input holds: itch50, nyse-xdp, nyse-pillar, opra-binary, opra-fast.
    #[arg(long)]
    pub feed: String,
    /// A capture (pcap, pcapng), or for itch50 also a BinaryFILE (plain or .gz). Several
    /// captures are read one after another as one stream: the files of a rotated capture
    /// (hr-000.pcap hr-001.pcap ...), whose books and sequence numbers go on from file to
    /// file.
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// The file to write (dbn, jsonl; `-`: standard output, for a pipe into another tool),
    /// or the catalog directory (parquet, nautilus).
    #[arg(long)]
    pub out: PathBuf,
    /// DBN schema.
    #[arg(long, value_enum, default_value = "mbo")]
    pub schema: DbnSchema,
    /// itch50: the trading day (US Eastern, YYYY-MM-DD) from whose midnight ITCH times
    /// count; auto: the day the capture was received on (a BinaryFILE has no receive
    /// times: give the day, or its times count from 1970-01-01).
    #[arg(long, default_value = "auto", value_name = "YYYY-MM-DD|auto")]
    pub date: String,
    /// itch50 BinaryFILE: take each message's length from its type, not the file's prefix.
    #[arg(long)]
    pub infer_length: bool,
    /// Only these symbols (comma-separated; OPRA: roots).
    #[arg(long, value_delimiter = ',')]
    pub symbols: Vec<String>,
    /// Only these actions (comma-separated: add, cancel, delete, modify, execute, trade,
    /// clear, status, imbalance, quote).
    #[arg(long, value_delimiter = ',')]
    pub actions: Vec<String>,
    /// opra-fast: the FAST templates (the built-in OPRA v2 templates otherwise).
    #[arg(long)]
    pub templates: Option<PathBuf>,
    /// opra-fast: bytes before each block's SOH in the UDP payload (`tickplant sim
    /// opra-fast` writes a 5-byte sequence header).
    #[arg(long, default_value_t = 5)]
    pub header_bytes: usize,
    /// Captures: the destination to read (GROUP:PORT), or the two of one feed's A and B
    /// lines, read arbitrated; by default the one the first packet goes to (a capture
    /// holding another is an error that names both).
    #[arg(long, value_delimiter = ',', value_name = "GROUP:PORT[,GROUP:PORT]")]
    pub lines: Vec<String>,
    /// Where ts_recv comes from: the capture's record times, or an Arista 7130 / Metamako
    /// MetaWatch tap's trailer on each frame (frames without one keep the capture's time,
    /// with a warning).
    #[arg(long, default_value = "capture", value_name = "capture|metawatch")]
    pub timestamps: String,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(a: &ExportArgs) -> Result<()> {
    let mut opts = ReadOptions::named(&a.feed, &a.date, &a.actions).map_err(|e| anyhow!("--{e}"))?;
    opts.infer_length = a.infer_length;
    opts.set_lines(&a.lines).map_err(|e| anyhow!("--{e}"))?;
    opts.symbols = a.symbols.clone();
    opts.opra_fast_skip = a.header_bytes;
    opts.timestamps = a.timestamps.parse().map_err(|e| anyhow!("--{e}"))?;
    let program = match (opts.feed, &a.templates) {
        (Feed::OpraFast, t) => Some(crate::decodecmd::opra_fast_program(t.as_deref())?),
        (_, Some(_)) => bail!("--templates is for --feed opra-fast"),
        (_, None) => None,
    };
    opts.then = a.inputs[1..].to_vec();
    let input = &a.inputs[0];
    let mut reader = EventReader::open(input, &opts, program.as_ref())?;
    let format = match (a.format, a.schema) {
        (Format::Dbn, DbnSchema::Mbo) => ExportFormat::DbnMbo,
        (Format::Dbn, DbnSchema::Mbp1) => ExportFormat::DbnMbp1,
        (Format::Parquet, _) => ExportFormat::Parquet,
        (Format::Nautilus, _) => ExportFormat::Nautilus,
        (Format::Jsonl, _) => ExportFormat::Jsonl,
    };
    let quiet = a.quiet;
    let started = std::time::Instant::now();
    let report = match export(&mut reader, format, &a.out, |done, total| {
        if !quiet && total > 0 {
            eprintln!(
                "export: {:.0}% of {} ({:.1} s)",
                100.0 * done as f64 / total as f64,
                if a.inputs.len() == 1 { input.display().to_string() } else { format!("{} captures", a.inputs.len()) },
                started.elapsed().as_secs_f64()
            );
        }
    }) {
        // Piped into a reader that stopped early (`| head`): what it wanted, it had.
        Err(tickplant_io::export::ExportError::Closed) => return Ok(()),
        r => r?,
    };
    let left: u64 = report.left_out.values().sum();
    eprintln!(
        "export: {} events ({} gaps) -> {} records {}; {} events the format has no record for{}",
        report.events,
        report.read.gaps,
        report.records,
        if a.out.as_os_str() == "-" {
            "to standard output".to_string()
        } else {
            format!("in {} file(s) under {}", report.files.len(), a.out.display())
        },
        left,
        if left > 0 { format!(" ({:?})", report.left_out) } else { String::new() }
    );
    // A symbol the feed never named is most likely a typo: say so, rather than leave an
    // empty export to explain itself.
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    for s in &report.unnamed {
        eprintln!("warning: --symbols {s}: the feed never named it (no events of it)");
    }
    if report.sequence_wrapped > 0 {
        eprintln!(
            "export: {} sequence numbers did not fit DBN's 32 bits (written modulo 2^32)",
            report.sequence_wrapped
        );
    }
    Ok(())
}

//! `tickplant itch`: decode, count and build books from ITCH 5.0 files and captures.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
pub use tickplant_io::json::{book_json, write_decimal};
use tickplant_io::json::{json_str, price_json};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use tickplant_core::book::{BookConfig, Books};
use tickplant_core::itch::{normalize, SymbolDirectory};
use tickplant_io::itch::read_itch;
use tickplant_wire::itch50::{self, FieldVisitor, Framing, Message};

#[derive(Debug, Subcommand)]
pub enum ItchCmd {
    /// Decode messages to one line each (JSON lines or CSV).
    Decode(DecodeArgs),
    /// Count messages by type; prints JSON.
    Stats(InputArgs),
    /// Build full-depth books and print them.
    Book(BookArgs),
}

#[derive(Debug, Args, Clone)]
pub struct InputArgs {
    /// ITCH 5.0 input: BinaryFILE (.itch or anything else), gzip-compressed BinaryFILE
    /// (.gz), or MoldUDP64 packets in a capture (.pcap, .pcapng).
    pub file: PathBuf,
    /// Take each message's length from its type instead of the file's length prefix (for
    /// files whose prefixes are wrong; a file whose prefixes are zero is told by its first
    /// message and read so without it).
    #[arg(long)]
    pub infer_length: bool,
    /// The file is messages back to back with no length prefixes.
    #[arg(long, conflicts_with = "infer_length")]
    pub raw: bool,
}

impl InputArgs {
    fn framing(&self) -> Framing {
        if self.raw {
            Framing::Raw
        } else if self.infer_length {
            Framing::InferLength
        } else {
            Framing::LengthPrefixed
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Jsonl,
    Csv,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Only messages of these symbols (comma-separated), by the stock directory.
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub symbols: Vec<String>,
    /// Only these message types (ITCH letters, comma-separated, e.g. A,E,X).
    #[arg(long, value_delimiter = ',', value_name = "A,E,...")]
    pub types: Vec<String>,
    /// One JSON object a line, or CSV rows under a header.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// Stop after writing N messages.
    #[arg(long, value_name = "N")]
    pub limit: Option<u64>,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "out", value_name = "OUT")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BookArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Only these symbols (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub symbols: Vec<String>,
    /// Levels per side.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub depth: usize,
    /// Print the books at the end of the input, one JSON line per instrument. Without it,
    /// one JSON line with the best bid and offer after every message that changes a book.
    #[arg(long)]
    pub r#final: bool,
    /// Capacity of the order table (live orders).
    #[arg(long, default_value_t = 1 << 22)]
    pub max_orders: usize,
}

fn out_writer(path: Option<&Path>) -> Result<Box<dyn Write>> {
    Ok(match path {
        Some(p) => Box::new(std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(p).with_context(|| format!("{}: cannot create", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock())),
    })
}

fn parse_types(types: &[String]) -> Result<Option<[bool; 256]>> {
    if types.is_empty() {
        return Ok(None);
    }
    let mut set = [false; 256];
    for t in types {
        let t = t.trim();
        let b = t.as_bytes();
        if b.len() != 1 || itch50::message_len(b[0]).is_none() {
            bail!(
                "--types: {t:?} is not an ITCH 5.0 message type (one of {})",
                itch50::MESSAGE_TYPES.iter().map(|&c| (c as char).to_string()).collect::<Vec<_>>().join(" ")
            );
        }
        set[usize::from(b[0])] = true;
    }
    Ok(Some(set))
}

/// Write a fixed-point integer with `decimals` places as a decimal number, trailing zeros
/// trimmed (exact; no floating point).
fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(itch50::trim_stock(v)).into_owned()
}

struct JsonFields<'a>(&'a mut String);
impl FieldVisitor for JsonFields<'_> {
    fn int(&mut self, name: &'static str, value: u64) {
        let _ = write!(self.0, ",\"{name}\":{value}");
    }
    fn price(&mut self, name: &'static str, value: u64, decimals: u8) {
        let _ = write!(self.0, ",\"{name}\":");
        write_decimal(self.0, value, decimals);
    }
    fn text(&mut self, name: &'static str, value: &[u8]) {
        let _ = write!(self.0, ",\"{name}\":");
        json_str(self.0, &text(value));
    }
}

/// One message as a JSON object (no newline).
pub fn message_json(m: &Message, out: &mut String) {
    let (locate, tracking, ts) = m.header();
    let _ = write!(
        out,
        "{{\"type\":\"{}\",\"stock_locate\":{locate},\"tracking_number\":{tracking},\"timestamp\":{ts}",
        m.message_type() as char
    );
    m.visit(&mut JsonFields(out));
    out.push('}');
}

/// Names of every field of every type, in specification order (the CSV header).
fn csv_columns() -> Vec<&'static str> {
    struct Names(Vec<&'static str>);
    impl FieldVisitor for Names {
        fn int(&mut self, n: &'static str, _: u64) {
            self.push(n)
        }
        fn price(&mut self, n: &'static str, _: u64, _: u8) {
            self.push(n)
        }
        fn text(&mut self, n: &'static str, _: &[u8]) {
            self.push(n)
        }
    }
    impl Names {
        fn push(&mut self, n: &'static str) {
            if !self.0.contains(&n) {
                self.0.push(n);
            }
        }
    }
    let mut names = Names(vec!["type", "stock_locate", "tracking_number", "timestamp"]);
    for &t in itch50::MESSAGE_TYPES {
        let mut b = vec![0u8; itch50::message_len(t).expect("known")];
        b[0] = t;
        Message::parse(&b).expect("zeroed message parses").visit(&mut names);
    }
    names.0
}

struct CsvRow<'a> {
    cols: &'a [&'static str],
    vals: Vec<String>,
}
impl CsvRow<'_> {
    fn set(&mut self, name: &str, v: String) {
        if let Some(i) = self.cols.iter().position(|c| *c == name) {
            self.vals[i] = v;
        }
    }
}
impl FieldVisitor for CsvRow<'_> {
    fn int(&mut self, n: &'static str, v: u64) {
        self.set(n, v.to_string());
    }
    fn price(&mut self, n: &'static str, v: u64, d: u8) {
        let mut s = String::new();
        write_decimal(&mut s, v, d);
        self.set(n, s);
    }
    fn text(&mut self, n: &'static str, v: &[u8]) {
        let t = text(v);
        let t = if t.contains([',', '"']) { format!("\"{}\"", t.replace('"', "\"\"")) } else { t };
        self.set(n, t);
    }
}

fn symbol_filter(symbols: &[String]) -> HashSet<[u8; 8]> {
    symbols.iter().map(|s| itch50::stock(s.trim())).collect()
}

pub fn decode(a: &DecodeArgs) -> Result<u64> {
    let types = parse_types(&a.types)?;
    let symbols = symbol_filter(&a.symbols);
    let mut dir = SymbolDirectory::new();
    let mut w = out_writer(a.out.as_deref())?;
    let cols = csv_columns();
    if a.format == Format::Csv {
        writeln!(w, "{}", cols.join(","))?;
    }
    let limit = a.limit.unwrap_or(u64::MAX);
    let (mut written, mut line) = (0u64, String::with_capacity(512));
    let mut failure: Option<anyhow::Error> = None;
    let framing = a.input.framing();
    let res = read_itch(&a.input.file, framing, |msg| {
        if written >= limit {
            return false;
        }
        let m = match Message::parse(msg.bytes) {
            Ok(m) => m,
            Err(e) => {
                failure = Some(anyhow!("{}: byte {}: {e}", a.input.file.display(), msg.offset));
                return false;
            }
        };
        if !symbols.is_empty() {
            dir.learn(&m);
        }
        if types.is_some_and(|t| !t[usize::from(m.message_type())]) {
            return true;
        }
        if !symbols.is_empty() {
            let id = u32::from(m.header().0);
            let keep = dir.symbol(id).is_some_and(|s| symbols.contains(&itch50::stock(s)));
            if !keep {
                return true;
            }
        }
        line.clear();
        match a.format {
            Format::Jsonl => message_json(&m, &mut line),
            Format::Csv => {
                let (l, t, ts) = m.header();
                let mut row = CsvRow { cols: &cols, vals: vec![String::new(); cols.len()] };
                row.set("type", (m.message_type() as char).to_string());
                row.set("stock_locate", l.to_string());
                row.set("tracking_number", t.to_string());
                row.set("timestamp", ts.to_string());
                m.visit(&mut row);
                line.push_str(&row.vals.join(","));
            }
        }
        line.push('\n');
        if let Err(e) = w.write_all(line.as_bytes()) {
            failure = Some(e.into());
            return false;
        }
        written += 1;
        true
    });
    let st = res?;
    if let Some(e) = failure {
        return Err(e);
    }
    w.flush()?;
    warn_cut_short(&a.input.file, &st);
    // A symbol the whole file never named is most likely a typo: say so, rather than leave
    // an empty output to explain itself.
    if written < limit {
        for s in &a.symbols {
            if dir.id(s.trim()).is_none() {
                eprintln!("warning: --symbols {}: not in the file's stock directory (no messages of it)", s.trim());
            }
        }
    }
    Ok(written)
}

pub fn stats(a: &InputArgs) -> Result<()> {
    let mut by = [0u64; 256];
    let st = read_itch(&a.file, a.framing(), |m| {
        by[usize::from(m.bytes[0])] += 1;
        true
    })?;
    let by_type: BTreeMap<String, u64> =
        (0..256).filter(|&t| by[t] > 0).map(|t| (((t as u8) as char).to_string(), by[t])).collect();
    let mut v = serde_json::json!({
        "file": a.file.display().to_string(),
        "messages": st.messages,
        "bytes": st.bytes,
        "by_type": by_type,
    });
    if st.frames > 0 {
        v["frames"] = st.frames.into();
        v["other_frames"] = st.other_frames.into();
        v["cut_short_frames"] = st.cut_short.frames.into();
    }
    println!("{}", serde_json::to_string_pretty(&v)?);
    warn_cut_short(&a.file, &st);
    Ok(())
}

/// A capture that cut frames short misses what they carried: said on stderr.
fn warn_cut_short(file: &std::path::Path, st: &tickplant_io::itch::ItchReadStats) {
    if let Some(w) = st.cut_short.warning(&file.display().to_string()) {
        eprintln!("warning: {w}");
    }
}

/// `itch book --final` on a file: every message through the loop the parse + book
/// benchmark times (`tickplant_core::itch::apply_all`), on the whole file mapped.
fn final_books(a: &BookArgs, file: &[u8], symbols: &HashSet<[u8; 8]>) -> Result<()> {
    let path = a.input.file.display();
    let mut dir = SymbolDirectory::new();
    let cfg = BookConfig { max_orders: a.max_orders, ..Default::default() };
    cfg.validate().map_err(|e| anyhow!("--max-orders: {e}"))?;
    let mut books = Books::with_table_advice(cfg, tickplant_io::huge_pages);
    let framing = a.input.framing();
    let framing = tickplant_io::binaryfile::framing_for(file, framing);
    let mut bad = None;
    let messages = itch50::Stream::new(file, framing).map_while(|r| match r {
        Ok((_, m)) => Some(m),
        Err(e) => {
            bad = Some(e);
            None
        }
    });
    let applied = tickplant_core::itch::apply_all(messages, &mut books, Some(&mut dir), |_, _, _| true);
    if let Some(e) = bad {
        let hint = if framing == Framing::LengthPrefixed {
            " (if the file's length prefixes are not to be trusted, use --infer-length)"
        } else {
            ""
        };
        bail!("{path}: {e}{hint}");
    }
    if let Err(u) = applied {
        // Where it is: the walk again, as far as that message.
        let at = itch50::Stream::new(file, framing).nth(u.index as usize).and_then(|r| r.ok()).map_or(0, |(o, _)| o);
        bail!("{path}: byte {at}: {u}");
    }
    finish_books(a, &books, &dir, symbols, &mut *out_writer(None)?)
}

/// The end of `itch book`: the final books where asked (one JSON line per instrument), and
/// what the books could not apply, on stderr.
fn finish_books(
    a: &BookArgs,
    books: &Books,
    dir: &SymbolDirectory,
    symbols: &HashSet<[u8; 8]>,
    w: &mut dyn Write,
) -> Result<()> {
    if a.r#final {
        let mut line = String::new();
        for (id, b) in books.instruments() {
            let sym = dir.symbol(id).map(str::to_owned).unwrap_or_else(|| format!("#{id}"));
            if !symbols.is_empty() && !symbols.contains(&itch50::stock(&sym)) {
                continue;
            }
            line.clear();
            book_json(&sym, b, a.depth, &mut line);
            line.push('\n');
            w.write_all(line.as_bytes())?;
        }
    }
    w.flush()?;
    let s = books.stats();
    if s.unknown_order + s.duplicate_order + s.table_full + s.overfill > 0 {
        eprintln!(
            "itch book: {} unknown-order references, {} duplicate adds, {} rejected (table full), {} overfills",
            s.unknown_order, s.duplicate_order, s.table_full, s.overfill
        );
    }
    Ok(())
}

pub fn book(a: &BookArgs) -> Result<()> {
    let symbols = symbol_filter(&a.symbols);
    if a.r#final {
        if let Some(file) = tickplant_io::itch::open_whole(&a.input.file)? {
            return final_books(a, &file, &symbols);
        }
    }
    let mut dir = SymbolDirectory::new();
    let mut books = Books::new(BookConfig { max_orders: a.max_orders, ..Default::default() });
    let mut w = out_writer(None)?;
    let mut failure: Option<anyhow::Error> = None;
    let mut line = String::new();
    let mut once = Once::default();
    let st = read_itch(&a.input.file, a.input.framing(), |msg| {
        if !once.first_time(msg) {
            return true;
        }
        let m = match Message::parse(msg.bytes) {
            Ok(m) => m,
            Err(e) => {
                failure = Some(anyhow!("{}: byte {}: {e}", a.input.file.display(), msg.offset));
                return false;
            }
        };
        dir.learn(&m);
        let mut e = normalize(&m, msg.ts_recv, msg.seq, 0);
        let changed = books.apply(&mut e);
        if changed && !a.r#final {
            let sym = dir.symbol(e.instrument_id).unwrap_or("");
            if symbols.is_empty() || symbols.contains(&itch50::stock(sym)) {
                let b = books.book(e.instrument_id).expect("changed");
                line.clear();
                let _ = write!(line, "{{\"seq\":{},\"symbol\":", msg.seq);
                json_str(&mut line, sym);
                for (name, l) in [("bid", b.best_bid()), ("ask", b.best_ask())] {
                    let _ = write!(line, ",\"{name}\":");
                    match l {
                        Some(l) => {
                            line.push('[');
                            price_json(&mut line, l.price);
                            let _ = write!(line, ",{},{}]", l.shares, l.orders);
                        }
                        None => line.push_str("null"),
                    }
                }
                line.push_str("}\n");
                if let Err(e) = w.write_all(line.as_bytes()) {
                    failure = Some(e.into());
                    return false;
                }
            }
        }
        true
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    warn_cut_short(&a.input.file, &st);
    once.warn(&a.input.file);
    finish_books(a, &books, &dir, &symbols, &mut w)
}

/// Each sequence number of a capture applied once, in the order read: a capture of both
/// lines, or with duplicates, carries messages more than once, and books that applied every
/// copy are not the feed's (`itch book` made crossed books of such a capture).
#[derive(Debug, Default)]
struct Once {
    session: [u8; 10],
    next: Option<u64>,
    /// Copies of messages already applied, skipped.
    repeated: u64,
    /// Sequence numbers passed over when a later one came first: lost, or out of order.
    skipped: u64,
}

impl Once {
    /// Whether to apply `m`: true for the first copy of its sequence number (files: always).
    fn first_time(&mut self, m: &tickplant_io::itch::ItchMessage<'_>) -> bool {
        if m.frame == 0 {
            return true;
        }
        if m.session != self.session {
            // A new session numbers its messages from the start again.
            (self.session, self.next) = (m.session, None);
        }
        let next = self.next.unwrap_or(m.seq);
        if m.seq < next {
            self.repeated += 1;
            return false;
        }
        self.skipped += m.seq - next;
        self.next = Some(m.seq + 1);
        true
    }
    fn warn(&self, file: &std::path::Path) {
        if self.repeated > 0 {
            eprintln!(
                "itch book: {}: {} messages came again (duplicates, or the other line's copies in a capture of both): each sequence number applied once",
                file.display(),
                self.repeated
            );
        }
        if self.skipped > 0 {
            eprintln!(
                "warning: {}: {} sequence numbers were passed over by a later one (lost, or out of order in the capture): the books miss them; `tickplant run` and `tickplant.read` report gaps and wait for late packets",
                file.display(),
                self.skipped
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_exact() {
        let mut s = String::new();
        write_decimal(&mut s, 1_902_500, 4);
        assert_eq!(s, "190.25");
        s.clear();
        write_decimal(&mut s, 100, 4);
        assert_eq!(s, "0.01");
        s.clear();
        write_decimal(&mut s, 5_000_000_000, 8);
        assert_eq!(s, "50");
    }

    #[test]
    fn csv_header_has_every_field_once() {
        let c = csv_columns();
        assert_eq!(c[..4], ["type", "stock_locate", "tracking_number", "timestamp"]);
        assert!(
            c.contains(&"order_reference_number") && c.contains(&"level3") && c.contains(&"upper_price_range_collar")
        );
        let set: HashSet<_> = c.iter().collect();
        assert_eq!(set.len(), c.len());
    }
}

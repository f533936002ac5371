//! Events to the files researchers' tools read: Databento's DBN (MBO, and MBP-1 from the
//! books) with the `dbn` crate, Parquet (the `parquet` crate of arrow-rs, zstd) of the events
//! laid out as NautilusTrader's catalog lays out its data, NautilusTrader's own catalog (its
//! deltas and trade ticks: [`crate::nautilus`]), and JSON lines. The shells are `tickplant
//! export` and the Python package's `tickplant.export`. Files name each instrument by its
//! own symbol: an OPRA series by its OCC symbol, not its root.
//!
//! ## DBN: how an event becomes MBO records
//!
//! DBN's MBO schema says what happened to the book in the actions `A` (add), `C` (cancel
//! `size` shares of the order), `M`, `R` (clear), `T` (trade) and `F` (fill), where a book
//! builder (Databento's, NautilusTrader's, hftbacktest's) changes the book on `A`, `C`,
//! `M` and `R` only. So that such a builder ends with the books tickplant built:
//!
//! | event | records |
//! |---|---|
//! | add | `A` |
//! | cancel (part of an order) | `C`, `size` the shares cancelled |
//! | delete | `C`, `size` the shares the order still had, flag `PUBLISHER_SPECIFIC` (0x02) |
//! | execute | `F` (price, shares executed, the resting order's side), then `C` of those shares |
//! | modify (a replace: new id) | `C` of the old order (its price and shares), then `A` of the new |
//! | trade (not on the book) | `T`, side the resting order's |
//! | clear | `R` |
//! | status, imbalance, quote, gap | none (MBO has no such record; counted as left out) |
//!
//! `ts_event`, `ts_recv` and `instrument_id` are the event's; `sequence` its sequence number
//! (DBN's is 32 bits: a larger one is counted in [`ExportReport::sequence_wrapped`] and
//! written modulo 2^32); `flags`: `LAST` on the last record of a packet, `MAYBE_BAD_BOOK`
//! where tickplant's book was stale; `publisher_id` the dataset's publisher ([`publisher_of`]:
//! 2 XNAS.ITCH.XNAS, 9 XNYS.PILLAR.XNYS, 30 OPRA.PILLAR.OPRA). The metadata maps every instrument's
//! symbol (`stype_in` raw symbol; an OPRA series' OCC symbol) to its instrument id for the
//! file's dates.
//!
//! [`read_dbn`] gives the events of an MBO file back: exactly the fields MBO carries
//! (`ts_recv`, `ts_event`, `sequence` modulo 2^32, `order_id`, `price`, `size`,
//! `instrument_id`, `action`, `side`, the flags `LAST_IN_PACKET` and `BOOK_STALE`; a
//! replace's old order in `aux`), not the feed's message type, match numbers or venue.
//!
//! MBP-1 gives one record per event that changes a book or trades, with the book's best
//! bid and offer (price, shares, orders) after it, from books the exporter builds from the
//! events themselves.
//!
//! ## Parquet
//!
//! One file per instrument and UTC day:
//! `OUT/data/order_book_delta/<SYMBOL>.<VENUE>/<first ts>_<last ts>.parquet` (timestamps
//! as `2024-01-02T13-30-00-000000000Z`, the catalog's names), each event's every field in
//! its own column (`ts_recv` and `ts_event` as nanosecond UTC timestamps), zstd.
//! [`read_parquet`] gives the events back, exactly.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use dbn::{MboMsg, Mbp1Msg, RecordHeader};
use tickplant_core::book::{BookConfig, Books};
use tickplant_core::event::{flags, Event, EventAction, Side};

use crate::columns::{write_columns, Values};
use crate::events::{EventReader, Feed, ReadError, ReadStats};
use crate::nautilus::{self, Rows, ToNautilus};

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// DBN, MBO schema.
    DbnMbo,
    /// DBN, MBP-1 schema (the best bid and offer after each book event).
    DbnMbp1,
    /// Parquet files of tickplant's events in a catalog directory.
    Parquet,
    /// NautilusTrader's catalog: order book deltas and trade ticks ([`crate::nautilus`]).
    Nautilus,
    /// One JSON object a line, every field of the event.
    Jsonl,
}

/// Why an export failed.
#[derive(Debug)]
pub enum ExportError {
    Read(ReadError),
    Write {
        path: PathBuf,
        reason: String,
    },
    /// Standard output's reader went away before the end (`| head`).
    Closed,
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Read(e) => write!(f, "{e}"),
            ExportError::Write { path, reason } => write!(f, "{}: {reason}", path.display()),
            ExportError::Closed => write!(f, "standard output: its reader went away (broken pipe)"),
        }
    }
}

impl std::error::Error for ExportError {}

impl From<ReadError> for ExportError {
    fn from(e: ReadError) -> ExportError {
        ExportError::Read(e)
    }
}

fn werr(path: &Path, e: impl std::fmt::Display) -> ExportError {
    ExportError::Write { path: path.to_path_buf(), reason: e.to_string() }
}

/// Where a single-file format (DBN, JSON lines) goes: the file `out`, or standard output
/// for `-` (a pipe into another tool).
fn create_out(out: &Path, closed: &Rc<Cell<bool>>) -> Result<BufWriter<Box<dyn Write>>, ExportError> {
    if out.as_os_str() == "-" {
        return Ok(BufWriter::new(Box::new(Stdout(std::io::stdout().lock(), closed.clone()))));
    }
    Ok(BufWriter::new(Box::new(File::create(out).map_err(|e| create_err(out, e))?)))
}

/// Standard output that remembers its reader going away (`| head`), whatever error the
/// writer above it (DBN's encoder) wraps the failure in.
struct Stdout(std::io::StdoutLock<'static>, Rc<Cell<bool>>);

impl Stdout {
    fn note<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        if r.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
            self.1.set(true);
        }
        r
    }
}

impl Write for Stdout {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let r = self.0.write(b);
        self.note(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.0.flush();
        self.note(r)
    }
}

/// A file or folder that cannot be made, said as every command says it.
fn create_err(path: &Path, e: std::io::Error) -> ExportError {
    werr(path, format!("cannot create: {e}"))
}

/// What an export did. `events == written_events + left_out`, per action in the maps.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExportReport {
    pub read: ReadStats,
    /// Events taken from the reader.
    pub events: u64,
    /// Events that became records (one or more each), and the records written.
    pub written_events: u64,
    pub records: u64,
    /// Events the format has no record for, by action.
    pub left_out: BTreeMap<String, u64>,
    /// DBN: events whose sequence number did not fit in 32 bits.
    pub sequence_wrapped: u64,
    /// The files written.
    pub files: Vec<PathBuf>,
    /// Instruments and their symbols, as the feed named them (OPRA: the series' roots).
    pub symbols: BTreeMap<u32, String>,
    /// Instruments and their own symbols, as the files name them (OPRA: each series' OCC
    /// symbol; the symbol for other feeds).
    pub instruments: BTreeMap<u32, String>,
    /// Symbols asked for that the feed never named (no event can be of them).
    pub unnamed: Vec<String>,
    /// What the read warns of (frames the capture cut short: what they carried is missing;
    /// ITCH times with no trading day to count from).
    pub warnings: Vec<String>,
    /// ITCH: the trading day its times count from (given, or told from the capture).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// Dataset name in DBN metadata (at most 16 characters), and the venue of the catalog's
/// instrument ids, by feed.
pub fn dataset_of(feed: Feed) -> (&'static str, &'static str) {
    match feed {
        Feed::Itch50 => ("XNAS.ITCH", "XNAS"),
        Feed::NyseXdp | Feed::NysePillar => ("XNYS.PILLAR", "XNYS"),
        Feed::OpraBinary | Feed::OpraFast => ("OPRA.PILLAR", "OPRA"),
    }
}

/// The DBN records' `publisher_id`, by feed: Databento's publisher of the dataset and venue
/// of [`dataset_of`] (XNAS.ITCH.XNAS, XNYS.PILLAR.XNYS, OPRA.PILLAR.OPRA). Readers tell the
/// venue by it: NautilusTrader's loader names each instrument `SYMBOL.VENUE` from it, and
/// cannot without it.
pub fn publisher_of(feed: Feed) -> u16 {
    match feed {
        Feed::Itch50 => dbn::Publisher::XnasItchXnas as u16,
        Feed::NyseXdp | Feed::NysePillar => dbn::Publisher::XnysPillarXnys as u16,
        Feed::OpraBinary | Feed::OpraFast => dbn::Publisher::OpraPillarOpra as u16,
    }
}

/// Write every event `reader` gives to `out` in `format`. `progress(done, total)` is
/// called about every million events with the reader's bytes.
pub fn export(
    reader: &mut EventReader<'_>,
    format: ExportFormat,
    out: &Path,
    progress: impl FnMut(u64, u64),
) -> Result<ExportReport, ExportError> {
    let closed = Rc::new(Cell::new(false));
    export_to(reader, format, out, progress, &closed).map_err(|e| if closed.get() { ExportError::Closed } else { e })
}

fn export_to(
    reader: &mut EventReader<'_>,
    format: ExportFormat,
    out: &Path,
    mut progress: impl FnMut(u64, u64),
    closed: &Rc<Cell<bool>>,
) -> Result<ExportReport, ExportError> {
    let mut report = ExportReport::default();
    let mut events = Vec::new();
    let mut since = 0u64;
    if out.as_os_str() == "-" && matches!(format, ExportFormat::Parquet | ExportFormat::Nautilus) {
        return Err(werr(out, "a catalog is a directory of files: `-` (standard output) takes dbn and jsonl"));
    }
    let mut jsonl = match format {
        ExportFormat::Jsonl => Some(create_out(out, closed)?),
        _ => None,
    };
    // DBN's metadata (symbols, start and end) comes before the records, and the symbols
    // are known only once read: the records wait in memory (56 or 80 bytes an event).
    let mut mbo = Vec::new();
    let mut mbp = Vec::new();
    let mut to_dbn = ToDbn { publisher: publisher_of(reader.read_as()), ..ToDbn::default() };
    let mut parquet: BTreeMap<(u32, i64), Vec<Event>> = BTreeMap::new();
    let mut to_nautilus = ToNautilus::default();
    let mut nautilus: BTreeMap<(u32, i64), Rows> = BTreeMap::new();
    let (mut first_ts, mut last_ts) = (u64::MAX, 0u64);
    loop {
        events.clear();
        if reader.read(1 << 16, &mut events)? == 0 {
            break;
        }
        report.events += events.len() as u64;
        since += events.len() as u64;
        if since >= 1 << 20 {
            since = 0;
            let (d, t) = reader.progress();
            progress(d, t);
        }
        for e in &events {
            if e.action != EventAction::Gap {
                first_ts = first_ts.min(e.ts_event);
                last_ts = last_ts.max(e.ts_event);
            }
            let n = match format {
                ExportFormat::DbnMbo => to_dbn.mbo(e, &mut mbo),
                ExportFormat::DbnMbp1 => to_dbn.mbp1(e, &mut mbp),
                ExportFormat::Parquet => {
                    parquet.entry((e.instrument_id, day_of(e.ts_event))).or_default().push(*e);
                    1
                }
                ExportFormat::Nautilus => {
                    // Files by the day of `ts_init`, whose range names them.
                    let day = day_of(to_nautilus.advance(e));
                    to_nautilus.map(e, nautilus.entry((e.instrument_id, day)).or_default())
                }
                ExportFormat::Jsonl => {
                    let w = jsonl.as_mut().expect("opened for jsonl");
                    write_json(w, e).map_err(|x| werr(out, x))?;
                    1
                }
            };
            if n == 0 {
                *report.left_out.entry(e.action.as_str().to_string()).or_default() += 1;
            } else {
                report.written_events += 1;
                report.records += n as u64;
            }
        }
    }
    report.sequence_wrapped = to_dbn.wrapped;
    report.read = reader.stats();
    report.symbols = reader.symbols().clone();
    // Each instrument by its own symbol: an OPRA root names many series, and DBN's
    // symbology and the catalog's directories need one name an instrument (Databento names
    // OPRA series by their OCC symbols too).
    let instruments = reader.instrument_symbols();
    report.instruments = instruments.clone();
    report.unnamed = reader.unnamed();
    report.warnings = reader.warnings();
    report.date = reader.session_date();
    if first_ts == u64::MAX {
        first_ts = 0;
    }
    let (dataset, venue) = dataset_of(reader.read_as());
    match format {
        ExportFormat::DbnMbo | ExportFormat::DbnMbp1 => {
            let schema = if format == ExportFormat::DbnMbo { dbn::Schema::Mbo } else { dbn::Schema::Mbp1 };
            let meta = metadata(dataset, schema, first_ts, last_ts, &instruments);
            let f = create_out(out, closed)?;
            // `.zst`: zstd-compressed, as Databento ships DBN and as NautilusTrader's loader
            // wants it; otherwise plain.
            if out.extension().is_some_and(|x| x == "zst") {
                let mut z = zstd::stream::Encoder::new(f, 0).map_err(|e| werr(out, e))?;
                write_dbn(&mut z, &meta, &mbo, &mbp, format).map_err(|e| werr(out, e))?;
                z.finish().and_then(|mut w| w.flush()).map_err(|e| werr(out, e))?;
            } else {
                let mut f = f;
                write_dbn(&mut f, &meta, &mbo, &mbp, format).map_err(|e| werr(out, e))?;
                f.flush().map_err(|e| werr(out, e))?;
            }
            report.files.push(out.to_path_buf());
        }
        ExportFormat::Parquet => {
            let base = out.join("data").join("order_book_delta");
            for ((id, _day), evs) in &parquet {
                let dir = base.join(instrument_name(&instruments, *id, venue).1);
                std::fs::create_dir_all(&dir).map_err(|e| create_err(&dir, e))?;
                let (lo, hi) = (evs.first().map_or(0, |e| e.ts_event), evs.last().map_or(0, |e| e.ts_event));
                let path = dir.join(format!("{}_{}.parquet", file_timestamp(lo), file_timestamp(hi)));
                write_parquet(&path, evs)?;
                report.files.push(path);
            }
        }
        ExportFormat::Nautilus => {
            for ((id, _day), rows) in &nautilus {
                let (name, dir_name) = instrument_name(&instruments, *id, venue);
                let ts = |r: &[u64]| (r.first().copied().unwrap_or(0), r.last().copied().unwrap_or(0));
                if !rows.deltas.is_empty() {
                    let times: Vec<u64> = rows.deltas.iter().map(|d| d.ts_init).collect();
                    let path = nautilus_file(&out.join("data/order_book_delta").join(&dir_name), ts(&times))?;
                    nautilus::write_deltas(&path, &name, &rows.deltas).map_err(|e| werr(&path, e))?;
                    report.files.push(path);
                }
                if !rows.trades.is_empty() {
                    let times: Vec<u64> = rows.trades.iter().map(|t| t.ts_init).collect();
                    let path = nautilus_file(&out.join("data/trade_tick").join(&dir_name), ts(&times))?;
                    nautilus::write_trades(&path, &name, &rows.trades).map_err(|e| werr(&path, e))?;
                    report.files.push(path);
                }
            }
        }
        ExportFormat::Jsonl => {
            jsonl.take().expect("opened for jsonl").flush().map_err(|e| werr(out, e))?;
            report.files.push(out.to_path_buf());
        }
    }
    let (d, t) = reader.progress();
    progress(d, t);
    Ok(report)
}

/// The events of a DBN MBO file [`export`] wrote, as the table in this module's doc maps
/// them (its inverse): `F` then `C` of the same order and sequence number is an execute;
/// `C` then `A` of the same sequence number a modify (a replace); a `C` flagged
/// `PUBLISHER_SPECIFIC` a delete. Fields MBO does not carry are 0.
pub fn read_dbn(path: &Path) -> Result<Vec<Event>, ExportError> {
    use dbn::decode::DecodeRecord;
    // Plain or zstd-compressed, whichever the file is.
    let mut dec =
        dbn::decode::DynDecoder::from_file(path, dbn::VersionUpgradePolicy::AsIs).map_err(|e| werr(path, e))?;
    let mut recs = Vec::new();
    while let Some(r) = dec.decode_record::<MboMsg>().map_err(|e| werr(path, e))? {
        recs.push(r.clone());
    }
    let event = |r: &MboMsg, action: EventAction| Event {
        ts_recv: r.ts_recv,
        ts_event: r.hd.ts_event,
        sequence: u64::from(r.sequence),
        order_id: r.order_id,
        price: if r.price == dbn::UNDEF_PRICE { 0 } else { r.price },
        size: r.size,
        instrument_id: r.hd.instrument_id,
        action,
        side: match r.side as u8 {
            b'B' => Side::Bid,
            b'A' => Side::Ask,
            _ => Side::None,
        },
        flags: (if r.flags.raw() & dbn::flags::LAST != 0 { flags::LAST_IN_PACKET } else { 0 })
            | (if r.flags.raw() & dbn::flags::MAYBE_BAD_BOOK != 0 { flags::BOOK_STALE } else { 0 }),
        ..Event::default()
    };
    let mut out = Vec::with_capacity(recs.len());
    let mut i = 0;
    while i < recs.len() {
        let r = &recs[i];
        let next = recs.get(i + 1).filter(|n| n.sequence == r.sequence && n.hd.ts_event == r.hd.ts_event);
        let (e, used) = match (r.action as u8, next.map(|n| n.action as u8)) {
            (b'F', Some(b'C')) if next.is_some_and(|n| n.order_id == r.order_id) => {
                let mut e = event(r, EventAction::Execute);
                e.flags = event(next.expect("matched"), EventAction::Execute).flags;
                (e, 2)
            }
            (b'C', Some(b'A')) => {
                let mut e = event(next.expect("matched"), EventAction::Modify);
                e.aux = r.order_id;
                (e, 2)
            }
            (b'F', _) => (event(r, EventAction::Execute), 1),
            (b'C', _) if r.flags.raw() & dbn::flags::PUBLISHER_SPECIFIC != 0 => (event(r, EventAction::Delete), 1),
            (b'C', _) => (event(r, EventAction::Cancel), 1),
            (b'A', _) => (event(r, EventAction::Add), 1),
            (b'T', _) => (event(r, EventAction::Trade), 1),
            (b'R', _) => (event(r, EventAction::Clear), 1),
            (a, _) => return Err(werr(path, format!("record {i}: action {:?} is not one export writes", a as char))),
        };
        out.push(e);
        i += used;
    }
    Ok(out)
}

fn write_dbn(
    w: &mut impl Write,
    meta: &dbn::Metadata,
    mbo: &[MboMsg],
    mbp: &[Mbp1Msg],
    format: ExportFormat,
) -> dbn::Result<()> {
    use dbn::encode::EncodeRecord;
    let mut enc = dbn::encode::dbn::Encoder::new(w, meta)?;
    if format == ExportFormat::DbnMbo {
        enc.encode_records(mbo)?;
    } else {
        enc.encode_records(mbp)?;
    }
    enc.flush()
}

/// An instrument's id as the catalog's metadata names it (`SYMBOL.VENUE`, the symbol as
/// the feed names it; its number for one the feed never named, and for instrument 0, the
/// system's events), and its directory (the symbol as a path component, `.VENUE`).
fn instrument_name(symbols: &BTreeMap<u32, String>, id: u32, venue: &str) -> (String, String) {
    match symbols.get(&id) {
        Some(s) if !s.is_empty() && id != 0 => (format!("{s}.{venue}"), format!("{}.{venue}", safe_name(s))),
        _ => (format!("{id}.{venue}"), format!("{id}.{venue}")),
    }
}

/// The path of a NautilusTrader file in `dir` (made) for rows from `first` to `last`
/// (`ts_init`), named as the catalog names its files.
fn nautilus_file(dir: &Path, (first, last): (u64, u64)) -> Result<PathBuf, ExportError> {
    std::fs::create_dir_all(dir).map_err(|e| create_err(dir, e))?;
    Ok(dir.join(format!("{}_{}.parquet", file_timestamp(first), file_timestamp(last))))
}

/// Symbols as path components: what is not a letter, digit, `-` or `_` becomes `_`.
fn safe_name(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

const DAY_NS: u64 = 86_400_000_000_000;

/// Days since 1970-01-01 (UTC) of a UNIX ns time.
fn day_of(ts: u64) -> i64 {
    (ts / DAY_NS) as i64
}

/// A UNIX ns time as the catalog writes it in file names: `2024-01-02T13-30-00-000000000Z`.
pub fn file_timestamp(ts: u64) -> String {
    let (y, m, d) = tickplant_wire::civil_from_days(day_of(ts));
    let s = ts % DAY_NS;
    let (h, mi, se, ns) = (s / 3_600_000_000_000, s / 60_000_000_000 % 60, s / 1_000_000_000 % 60, s % 1_000_000_000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}-{mi:02}-{se:02}-{ns:09}Z")
}

fn metadata(
    dataset: &str,
    schema: dbn::Schema,
    first: u64,
    last: u64,
    symbols: &BTreeMap<u32, String>,
) -> dbn::Metadata {
    let date = |ts: u64| {
        let (y, m, d) = tickplant_wire::civil_from_days(day_of(ts));
        let month = time::Month::try_from(m as u8).unwrap_or(time::Month::January);
        time::Date::from_calendar_date(y as i32, month, d as u8).unwrap_or(time::Date::MIN)
    };
    let (d0, d1) = (date(first), date(last).next_day().unwrap_or(time::Date::MAX));
    let mut seen = std::collections::HashSet::new();
    let mappings = symbols
        .iter()
        .filter(|(_, s)| !s.is_empty() && seen.insert(s.as_str()))
        .map(|(id, s)| dbn::SymbolMapping {
            raw_symbol: s.clone(),
            intervals: vec![dbn::MappingInterval { start_date: d0, end_date: d1, symbol: id.to_string() }],
        })
        .collect::<Vec<_>>();
    dbn::Metadata::builder()
        .dataset(dataset)
        .schema(Some(schema))
        .start(first)
        .end(std::num::NonZeroU64::new(last + 1))
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .symbols(mappings.iter().map(|m| m.raw_symbol.clone()).collect())
        .mappings(mappings)
        .build()
}

/// The mapping of events to DBN records, with what it needs to remember: each live order's
/// price and shares (a replace's `C` names the old order's), and books for MBP-1.
#[derive(Debug, Default)]
pub struct ToDbn {
    orders: HashMap<u64, (i64, u32)>,
    books: Option<Books>,
    wrapped: u64,
    /// Every record's `publisher_id` ([`publisher_of`]).
    publisher: u16,
}

fn side_char(s: Side) -> std::ffi::c_char {
    (match s {
        Side::Bid => b'B',
        Side::Ask => b'A',
        Side::None => b'N',
    }) as std::ffi::c_char
}

impl ToDbn {
    fn seq(&mut self, e: &Event) -> u32 {
        if e.sequence > u64::from(u32::MAX) {
            self.wrapped += 1;
        }
        e.sequence as u32
    }

    fn flags_of(e: &Event, last: bool) -> u8 {
        let mut f = 0;
        if last && e.flags & flags::LAST_IN_PACKET != 0 {
            f |= dbn::flags::LAST;
        }
        if e.flags & flags::BOOK_STALE != 0 {
            f |= dbn::flags::MAYBE_BAD_BOOK;
        }
        f
    }

    fn record(&mut self, e: &Event, action: u8, order_id: u64, price: i64, size: u32, last: bool) -> MboMsg {
        MboMsg {
            hd: RecordHeader::new::<MboMsg>(dbn::rtype::MBO, self.publisher, e.instrument_id, e.ts_event),
            order_id,
            price,
            size,
            flags: Self::flags_of(e, last).into(),
            channel_id: 0,
            action: action as std::ffi::c_char,
            side: side_char(e.side),
            ts_recv: e.ts_recv,
            ts_in_delta: 0,
            sequence: self.seq(e),
        }
    }

    /// The MBO records of one event, appended to `out`; how many (0: none).
    pub fn mbo(&mut self, e: &Event, out: &mut Vec<MboMsg>) -> usize {
        // Events the books refused or could not place change no book: left as they are.
        let applied = e.flags & (flags::UNKNOWN_ORDER | flags::REJECTED) == 0;
        let before = out.len();
        match e.action {
            EventAction::Add => {
                if applied {
                    self.orders.insert(e.order_id, (e.price, e.size));
                }
                let r = self.record(e, b'A', e.order_id, e.price, e.size, true);
                out.push(r);
            }
            EventAction::Cancel | EventAction::Delete => {
                let price = self.orders.get(&e.order_id).map_or(e.price, |o| o.0);
                self.reduce(e.order_id, e.size, e.action == EventAction::Delete);
                let mut r = self.record(e, b'C', e.order_id, price, e.size, true);
                if e.action == EventAction::Delete {
                    // The order's end, not a part of it: what tells a delete from a
                    // cancel of all that was left when the records are read back.
                    r.flags = (r.flags.raw() | dbn::flags::PUBLISHER_SPECIFIC).into();
                }
                out.push(r);
            }
            EventAction::Execute => {
                let f = self.record(e, b'F', e.order_id, e.price, e.size, false);
                out.push(f);
                if applied {
                    let price = self.orders.get(&e.order_id).map_or(e.price, |o| o.0);
                    self.reduce(e.order_id, e.size, false);
                    let c = self.record(e, b'C', e.order_id, price, e.size, true);
                    out.push(c);
                } else if let Some(l) = out.last_mut() {
                    l.flags = Self::flags_of(e, true).into();
                }
            }
            EventAction::Modify => {
                if let Some((price, size)) = self.orders.remove(&e.aux) {
                    let c = self.record(e, b'C', e.aux, price, size, false);
                    out.push(c);
                }
                if applied {
                    self.orders.insert(e.order_id, (e.price, e.size));
                }
                let a = self.record(e, b'A', e.order_id, e.price, e.size, true);
                out.push(a);
            }
            EventAction::Trade => {
                let r = self.record(e, b'T', e.order_id, e.price, e.size, true);
                out.push(r);
            }
            EventAction::Clear => {
                let r = self.record(e, b'R', 0, dbn::UNDEF_PRICE, 0, true);
                out.push(r);
            }
            EventAction::Status
            | EventAction::Imbalance
            | EventAction::Quote
            | EventAction::Gap
            | EventAction::Trusted => {}
        }
        out.len() - before
    }

    fn reduce(&mut self, id: u64, shares: u32, all: bool) {
        if let Some(o) = self.orders.get_mut(&id) {
            if all || shares >= o.1 {
                self.orders.remove(&id);
            } else {
                o.1 -= shares;
            }
        }
    }

    /// The MBP-1 record of one event (with the best bid and offer after it), appended to
    /// `out`; 1, or 0 for an event that neither changes a book nor trades.
    pub fn mbp1(&mut self, e: &Event, out: &mut Vec<Mbp1Msg>) -> usize {
        let action = match e.action {
            EventAction::Add => b'A',
            EventAction::Cancel | EventAction::Delete => b'C',
            EventAction::Modify => b'M',
            EventAction::Execute | EventAction::Trade => b'T',
            EventAction::Clear => b'R',
            _ => return 0,
        };
        let books = self.books.get_or_insert_with(|| Books::new(BookConfig::default()));
        let mut copy = *e;
        if e.action == EventAction::Clear {
            books.clear_instrument(e.instrument_id);
        } else {
            books.apply(&mut copy);
        }
        let level = |side| books.book(e.instrument_id).and_then(|b| b.depth(side, 1).next());
        let (bid, ask) = (level(Side::Bid), level(Side::Ask));
        let px = |l: Option<tickplant_core::book::Level>| l.map_or(dbn::UNDEF_PRICE, |l| l.price);
        let sz = |l: Option<tickplant_core::book::Level>| l.map_or(0, |l| l.shares as u32);
        let ct = |l: Option<tickplant_core::book::Level>| l.map_or(0, |l| l.orders);
        let r = Mbp1Msg {
            hd: RecordHeader::new::<Mbp1Msg>(dbn::rtype::MBP_1, self.publisher, e.instrument_id, e.ts_event),
            price: if e.action == EventAction::Clear { dbn::UNDEF_PRICE } else { e.price },
            size: e.size,
            action: action as std::ffi::c_char,
            side: side_char(e.side),
            flags: Self::flags_of(e, true).into(),
            depth: 0,
            ts_recv: e.ts_recv,
            ts_in_delta: 0,
            sequence: self.seq(e),
            levels: [dbn::BidAskPair {
                bid_px: px(bid),
                ask_px: px(ask),
                bid_sz: sz(bid),
                ask_sz: sz(ask),
                bid_ct: ct(bid),
                ask_ct: ct(ask),
            }],
        };
        out.push(r);
        1
    }
}

fn write_json(w: &mut impl Write, e: &Event) -> std::io::Result<()> {
    writeln!(
        w,
        "{{\"ts_recv\":{},\"ts_event\":{},\"sequence\":{},\"order_id\":{},\"price\":{},\"aux\":{},\"size\":{},\"instrument_id\":{},\"action\":\"{}\",\"side\":\"{}\",\"flags\":{},\"msg_type\":{},\"venue\":{}}}",
        e.ts_recv,
        e.ts_event,
        e.sequence,
        e.order_id,
        e.price,
        e.aux,
        e.size,
        e.instrument_id,
        e.action.as_str(),
        e.side.as_str(),
        e.flags,
        e.msg_type,
        e.venue
    )
}

/// The Parquet schema of events: every field of [`Event`], in its order, with the
/// logical types that make pyarrow, polars and pandas read them as the numpy dtype has
/// them (unsigned integers, nanosecond UTC timestamps).
pub const PARQUET_SCHEMA: &str = "message event {
    REQUIRED INT64 ts_recv (TIMESTAMP(NANOS,true));
    REQUIRED INT64 ts_event (TIMESTAMP(NANOS,true));
    REQUIRED INT64 sequence (INTEGER(64,false));
    REQUIRED INT64 order_id (INTEGER(64,false));
    REQUIRED INT64 price;
    REQUIRED INT64 aux (INTEGER(64,false));
    REQUIRED INT32 size (INTEGER(32,false));
    REQUIRED INT32 instrument_id (INTEGER(32,false));
    REQUIRED INT32 action (INTEGER(8,false));
    REQUIRED INT32 side (INTEGER(8,false));
    REQUIRED INT32 flags (INTEGER(8,false));
    REQUIRED INT32 msg_type (INTEGER(8,false));
    REQUIRED INT32 venue (INTEGER(32,false));
}";

/// The columns of [`PARQUET_SCHEMA`] as the file stores them (64- or 32-bit integers).
enum Column {
    I64(fn(&Event) -> i64),
    I32(fn(&Event) -> i32),
}

const COLUMNS: [Column; 13] = [
    Column::I64(|e| e.ts_recv as i64),
    Column::I64(|e| e.ts_event as i64),
    Column::I64(|e| e.sequence as i64),
    Column::I64(|e| e.order_id as i64),
    Column::I64(|e| e.price),
    Column::I64(|e| e.aux as i64),
    Column::I32(|e| e.size as i32),
    Column::I32(|e| e.instrument_id as i32),
    Column::I32(|e| i32::from(e.action as u8)),
    Column::I32(|e| i32::from(e.side as u8)),
    Column::I32(|e| i32::from(e.flags)),
    Column::I32(|e| i32::from(e.msg_type)),
    Column::I32(|e| e.venue as i32),
];

// Parquet's own column writer and reader, not its arrow layer: the files are one flat
// table of integers, and arrow's crates doubled the build time of the research formats.
fn write_parquet(path: &Path, evs: &[Event]) -> Result<(), ExportError> {
    let columns = COLUMNS
        .iter()
        .map(|c| match c {
            Column::I64(f) => Values::I64(evs.iter().map(f).collect()),
            Column::I32(f) => Values::I32(evs.iter().map(f).collect()),
        })
        .collect();
    write_columns(path, PARQUET_SCHEMA, Vec::new(), columns).map_err(|e| werr(path, e))
}

/// Every event of a Parquet file [`export`] wrote (or of every such file under a
/// directory, in path order), exactly as they were written.
pub fn read_parquet(path: &Path) -> Result<Vec<Event>, ExportError> {
    use parquet::column::reader::ColumnReader;
    use parquet::data_type::{Int32Type, Int64Type};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let mut files = Vec::new();
    collect_parquet(path, &mut files).map_err(|e| werr(path, e))?;
    files.sort();
    let want = parquet::schema::parser::parse_message_type(PARQUET_SCHEMA).map_err(|e| werr(path, e))?;
    let mut out = Vec::new();
    for p in files {
        let f = File::open(&p).map_err(|e| werr(&p, e))?;
        let r = SerializedFileReader::new(f).map_err(|e| werr(&p, e))?;
        let got = r.metadata().file_metadata().schema();
        if got.get_fields().len() != want.get_fields().len()
            || got.get_fields().iter().zip(want.get_fields()).any(|(a, b)| a.name() != b.name())
        {
            // NautilusTrader's own files (`export nautilus`) are its reader's to read.
            let nautilus = r.metadata().file_metadata().key_value_metadata().is_some_and(|kv| {
                kv.iter().any(|k| k.key == "instrument_id") && kv.iter().any(|k| k.key == "price_precision")
            });
            return Err(werr(
                &p,
                if nautilus {
                    "a NautilusTrader file (export nautilus): read it with NautilusTrader's ParquetDataCatalog; read_parquet reads what export parquet writes"
                } else {
                    "not a file of tickplant's event schema (export's PARQUET_SCHEMA)"
                },
            ));
        }
        for g in 0..r.num_row_groups() {
            let rg = r.get_row_group(g).map_err(|e| werr(&p, e))?;
            let rows = rg.metadata().num_rows() as usize;
            let mut cols64: Vec<Vec<i64>> = Vec::new();
            let mut cols32: Vec<Vec<i32>> = Vec::new();
            for (c, kind) in COLUMNS.iter().enumerate() {
                let reader = rg.get_column_reader(c).map_err(|e| werr(&p, e))?;
                match (kind, reader) {
                    (Column::I64(_), r @ ColumnReader::Int64ColumnReader(_)) => {
                        cols64.push(column::<Int64Type>(r, rows).map_err(|e| werr(&p, e))?);
                    }
                    (Column::I32(_), r @ ColumnReader::Int32ColumnReader(_)) => {
                        cols32.push(column::<Int32Type>(r, rows).map_err(|e| werr(&p, e))?);
                    }
                    _ => return Err(werr(&p, format!("column {c} has another physical type"))),
                }
            }
            if cols64.iter().any(|c| c.len() != rows) || cols32.iter().any(|c| c.len() != rows) {
                return Err(werr(&p, format!("row group {g}: a column is shorter than its {rows} rows")));
            }
            for i in 0..rows {
                let a = cols32[2][i] as u8;
                let action = EventAction::ALL
                    .into_iter()
                    .find(|x| *x as u8 == a)
                    .ok_or_else(|| werr(&p, format!("row {i}: action code {a}")))?;
                let side = match cols32[3][i] {
                    1 => Side::Bid,
                    2 => Side::Ask,
                    _ => Side::None,
                };
                out.push(Event {
                    ts_recv: cols64[0][i] as u64,
                    ts_event: cols64[1][i] as u64,
                    sequence: cols64[2][i] as u64,
                    order_id: cols64[3][i] as u64,
                    price: cols64[4][i],
                    aux: cols64[5][i] as u64,
                    size: cols32[0][i] as u32,
                    instrument_id: cols32[1][i] as u32,
                    action,
                    side,
                    flags: cols32[4][i] as u8,
                    msg_type: cols32[5][i] as u8,
                    venue: cols32[6][i] as u32,
                });
            }
        }
    }
    Ok(out)
}

/// A row group's column, `rows` values at most.
fn column<T: parquet::data_type::DataType>(
    r: parquet::column::reader::ColumnReader,
    rows: usize,
) -> parquet::errors::Result<Vec<T::T>> {
    let mut v = Vec::with_capacity(rows);
    let mut typed = parquet::column::reader::get_typed_column_reader::<T>(r);
    while v.len() < rows {
        let (n, _, _) = typed.read_records(rows - v.len(), None, None, &mut v)?;
        if n == 0 {
            break;
        }
    }
    Ok(v)
}

fn collect_parquet(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        for e in std::fs::read_dir(path)? {
            collect_parquet(&e?.path(), out)?;
        }
    } else if path.extension().is_some_and(|x| x == "parquet") {
        out.push(path.to_path_buf());
    }
    Ok(())
}

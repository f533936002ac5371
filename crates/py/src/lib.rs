//! `tickplant._native`: the library's readers, exporters and books for Python. The
//! package's Python half (`python/tickplant`) gives them numpy dtypes and pandas / polars
//! frames; everything that decodes, builds books or writes files is the Rust library's, the
//! same code the command line runs.
//!
//! Events cross into Python without a copy: an [`EventBuffer`] holds the library's
//! `Vec<Event>`, which numpy views through the array interface as a structured array of
//! the package's `EVENT_DTYPE` (the same 64 bytes, field for field).
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use tickplant_core::book::{BookConfig, Books as CoreBooks};
use tickplant_core::event::{Event, EventAction, Side};
use tickplant_core::feed::FeedDecoder as _;
use tickplant_io::events::{EventReader, Feed, ReadOptions};
use tickplant_io::export::{export as export_events, ExportFormat};

mod objects;

create_exception!(
    _native,
    TickplantError,
    PyException,
    "An error of the tickplant library (its message says what and where)."
);

fn err(e: impl std::fmt::Display) -> PyErr {
    TickplantError::new_err(e.to_string())
}

/// A bad argument (a word or value a parameter does not take): `ValueError`, as
/// docs/python.md says; what goes wrong with a file or its contents is a `TickplantError`.
fn bad_arg(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

const EVENT_BYTES: usize = std::mem::size_of::<Event>();

/// Events as the bytes numpy reads them with the package's `EVENT_DTYPE`: the fields in
/// [`Event`]'s own order and offsets, little-endian, enums as their `u8` codes.
fn to_bytes(events: &[Event], out: &mut [u8]) {
    for (e, b) in events.iter().zip(out.chunks_exact_mut(EVENT_BYTES)) {
        b[0..8].copy_from_slice(&e.ts_recv.to_le_bytes());
        b[8..16].copy_from_slice(&e.ts_event.to_le_bytes());
        b[16..24].copy_from_slice(&e.sequence.to_le_bytes());
        b[24..32].copy_from_slice(&e.order_id.to_le_bytes());
        b[32..40].copy_from_slice(&e.price.to_le_bytes());
        b[40..48].copy_from_slice(&e.aux.to_le_bytes());
        b[48..52].copy_from_slice(&e.size.to_le_bytes());
        b[52..56].copy_from_slice(&e.instrument_id.to_le_bytes());
        b[56] = e.action as u8;
        b[57] = e.side as u8;
        b[58] = e.flags;
        b[59] = e.msg_type;
        b[60..64].copy_from_slice(&e.venue.to_le_bytes());
    }
}

fn from_bytes(b: &[u8]) -> PyResult<Event> {
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let action = EventAction::ALL
        .into_iter()
        .find(|a| *a as u8 == b[56])
        .ok_or_else(|| err(format!("action code {} is not an event action", b[56])))?;
    let side = match b[57] {
        1 => Side::Bid,
        2 => Side::Ask,
        0 => Side::None,
        x => return Err(err(format!("side code {x} is not a side"))),
    };
    Ok(Event {
        ts_recv: u64_at(0),
        ts_event: u64_at(8),
        sequence: u64_at(16),
        order_id: u64_at(24),
        price: u64_at(32) as i64,
        aux: u64_at(40),
        size: u32_at(48),
        instrument_id: u32_at(52),
        action,
        side,
        flags: b[58],
        msg_type: b[59],
        venue: u32_at(60),
    })
}

/// The layout numpy must use: (name, byte offset, size) of every field, from the Rust type.
#[pyfunction]
fn event_layout() -> Vec<(&'static str, usize, usize)> {
    use std::mem::{offset_of, size_of_val};
    let e = Event::default();
    vec![
        ("ts_recv", offset_of!(Event, ts_recv), size_of_val(&e.ts_recv)),
        ("ts_event", offset_of!(Event, ts_event), size_of_val(&e.ts_event)),
        ("sequence", offset_of!(Event, sequence), size_of_val(&e.sequence)),
        ("order_id", offset_of!(Event, order_id), size_of_val(&e.order_id)),
        ("price", offset_of!(Event, price), size_of_val(&e.price)),
        ("aux", offset_of!(Event, aux), size_of_val(&e.aux)),
        ("size", offset_of!(Event, size), size_of_val(&e.size)),
        ("instrument_id", offset_of!(Event, instrument_id), size_of_val(&e.instrument_id)),
        ("action", offset_of!(Event, action), size_of_val(&e.action)),
        ("side", offset_of!(Event, side), size_of_val(&e.side)),
        ("flags", offset_of!(Event, flags), size_of_val(&e.flags)),
        ("msg_type", offset_of!(Event, msg_type), size_of_val(&e.msg_type)),
        ("venue", offset_of!(Event, venue), size_of_val(&e.venue)),
    ]
}

/// OPRA FAST programs, compiled once per template text and kept for the process: a
/// reader borrows its program for as long as it lives, and a Python object cannot hold a
/// borrow (a handful of template files in a session; each program a few kilobytes).
fn program_for(xml: &str) -> PyResult<&'static tickplant_fast::Program> {
    static PROGRAMS: OnceLock<Mutex<HashMap<String, &'static tickplant_fast::Program>>> = OnceLock::new();
    let mut m = PROGRAMS.get_or_init(Default::default).lock().map_err(err)?;
    if let Some(p) = m.get(xml) {
        return Ok(p);
    }
    let p = tickplant_fast::Program::from_xml(xml).map_err(|e| err(format!("templates: {e}")))?;
    let p: &'static tickplant_fast::Program = Box::leak(Box::new(p));
    m.insert(xml.to_string(), p);
    Ok(p)
}

#[allow(clippy::too_many_arguments)]
fn options(
    feed: &str,
    date: &str,
    infer_length: bool,
    symbols: Option<Vec<String>>,
    actions: Option<Vec<String>>,
    types: Option<Vec<u8>>,
    templates: Option<PathBuf>,
    header_bytes: usize,
    max_orders: Option<usize>,
) -> PyResult<(ReadOptions, Option<&'static tickplant_fast::Program>)> {
    let mut o = ReadOptions::named(feed, date, &actions.unwrap_or_default()).map_err(bad_arg)?;
    o.infer_length = infer_length;
    o.symbols = symbols.unwrap_or_default();
    o.types = types.unwrap_or_default();
    o.opra_fast_skip = header_bytes;
    if let Some(n) = max_orders {
        o.book.max_orders = n;
    }
    let program = match (o.feed, &templates) {
        (Feed::OpraFast, t) => {
            let xml = tickplant_sim::opra_fast::templates_xml(t.as_deref()).map_err(|e| {
                err(format!("templates {}: {e}", t.as_ref().map(|p| p.display().to_string()).unwrap_or_default()))
            })?;
            Some(program_for(&xml)?)
        }
        (_, Some(_)) => return Err(err("templates are for feed opra-fast")),
        (_, None) => None,
    };
    Ok((o, program))
}

/// Events in the library's own memory, which numpy views without a copy through the
/// array interface (`numpy.asarray(buffer)`, kept alive by the array): the `Event` layout
/// is the package's `EVENT_DTYPE` byte for byte on a little-endian machine (the layout is
/// checked by `event_layout` and the tests). Exposed read-only: the bytes numpy sees are
/// never written from Python, so they stay valid events.
#[pyclass(frozen)]
struct EventBuffer {
    events: Vec<Event>,
}

#[pymethods]
impl EventBuffer {
    fn __len__(&self) -> usize {
        self.events.len()
    }
    /// The numpy array interface (version 3): read-only void records of 64 bytes.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", (self.events.len(),))?;
        d.set_item("typestr", format!("|V{EVENT_BYTES}"))?;
        // An empty vector's pointer is dangling but aligned and never read (no elements).
        d.set_item("data", (self.events.as_ptr() as usize, true))?;
        Ok(d)
    }
    /// The events as bytes (a copy), in the same layout.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        PyBytes::new_with(py, self.events.len() * EVENT_BYTES, |out| {
            to_bytes(&self.events, out);
            Ok(())
        })
    }
}

const _: () = assert!(cfg!(target_endian = "little"), "EVENT_DTYPE is little-endian: the buffer is viewed as is");

/// Reads one capture or ITCH file into events, a chunk at a time.
#[pyclass(unsendable)]
struct Reader {
    inner: EventReader<'static>,
}

#[pymethods]
impl Reader {
    /// Up to `max` more events; None at the end. The Python side reads in chunks, so that
    /// a keyboard interrupt stops a read between two of them.
    fn read(&mut self, max: usize) -> PyResult<Option<EventBuffer>> {
        let mut events = Vec::new();
        self.inner.read(max, &mut events).map_err(err)?;
        Ok((!events.is_empty()).then_some(EventBuffer { events }))
    }
    /// Every event left, appended chunk by chunk as the library decodes; a keyboard
    /// interrupt (any signal whose handler raises) is looked for every 65,536 events.
    fn read_all(&mut self, py: Python<'_>) -> PyResult<EventBuffer> {
        // Room for the most events the file can hold (an ITCH message takes at least 13
        // bytes of a BinaryFILE, more of a capture; gzip may hold more, and the buffer then
        // grows): reserved, not touched, so that growing it never copies what was written.
        let (_, size) = self.inner.progress();
        let mut events: Vec<Event> = Vec::with_capacity(size as usize / 13 + 1024);
        // Backed by huge pages where the kernel has them: the buffer is written once, front
        // to back, and its page faults were a fifth of a 2M-message read.
        tickplant_io::huge_pages(events.as_ptr().cast(), events.capacity() * EVENT_BYTES);
        let (mut since, mut interrupted) = (0usize, None);
        self.inner
            .for_each_chunk(|chunk| {
                events.extend_from_slice(chunk);
                since += chunk.len();
                // About every 60,000 events (a few ms): a call that only reads a flag.
                if since >= 1 << 16 {
                    since = 0;
                    if let Err(e) = py.check_signals() {
                        interrupted = Some(e);
                        return false;
                    }
                }
                true
            })
            .map_err(err)?;
        if let Some(e) = interrupted {
            return Err(e);
        }
        Ok(EventBuffer { events })
    }
    /// Instrument id -> symbol, as the feed named them so far.
    fn symbols(&self) -> std::collections::BTreeMap<u32, String> {
        self.inner.symbols().clone()
    }
    /// Instrument id -> the instrument's own symbol (an OPRA series' OCC symbol; the
    /// symbol for other feeds).
    fn instruments(&self) -> std::collections::BTreeMap<u32, String> {
        self.inner.instrument_symbols()
    }
    /// The symbols asked for that the feed has not named so far.
    fn unnamed(&self) -> Vec<String> {
        self.inner.unnamed()
    }
    /// What the read should warn of (frames the capture cut short; ITCH times with no
    /// trading day to count from).
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings()
    }

    /// The read's counters (every message counted once).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        let v = serde_json::to_value(s).map_err(err)?;
        if let serde_json::Value::Object(m) = v {
            for (k, v) in m {
                d.set_item(k, v.as_u64().unwrap_or(0))?;
            }
        }
        Ok(d)
    }
    /// (bytes read, bytes in all) of the file.
    fn progress(&self) -> (u64, u64) {
        self.inner.progress()
    }
    /// The feed's best bid and offer of an instrument now: (bid price, bid size, ask price,
    /// ask size), prices in 1e-9 units, 0 on an empty side.
    fn bbo(&self, instrument_id: u32) -> (i64, u64, i64, u64) {
        let (b, _) = self.inner.feed().market(instrument_id);
        (b.bid_price, b.bid_size, b.ask_price, b.ask_size)
    }
}

#[pyfunction]
#[pyo3(signature = (path, feed="itch50", date="auto", infer_length=false, symbols=None, actions=None, types=None, templates=None, header_bytes=5, max_orders=None, lines=None, then=None, timestamps="capture"))]
#[allow(clippy::too_many_arguments)]
fn open_reader(
    path: PathBuf,
    feed: &str,
    date: &str,
    infer_length: bool,
    symbols: Option<Vec<String>>,
    actions: Option<Vec<String>>,
    types: Option<Vec<u8>>,
    templates: Option<PathBuf>,
    header_bytes: usize,
    max_orders: Option<usize>,
    lines: Option<Vec<String>>,
    then: Option<Vec<PathBuf>>,
    timestamps: &str,
) -> PyResult<Reader> {
    let (mut o, program) =
        options(feed, date, infer_length, symbols, actions, types, templates, header_bytes, max_orders)?;
    o.set_lines(&lines.unwrap_or_default()).map_err(bad_arg)?;
    o.then = then.unwrap_or_default();
    o.timestamps = timestamps.parse().map_err(bad_arg)?;
    let inner = EventReader::open(&path, &o, program).map_err(err)?;
    Ok(Reader { inner })
}

/// Write a file's events as DBN (`schema` mbo or mbp-1), Parquet, NautilusTrader's catalog or
/// JSON lines; the
/// export's report as JSON text.
#[pyfunction]
#[pyo3(signature = (path, format, out, feed="itch50", schema="mbo", date="auto", infer_length=false, symbols=None, actions=None, templates=None, header_bytes=5, lines=None, then=None, timestamps="capture"))]
#[allow(clippy::too_many_arguments)]
fn export(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    out: PathBuf,
    feed: &str,
    schema: &str,
    date: &str,
    infer_length: bool,
    symbols: Option<Vec<String>>,
    actions: Option<Vec<String>>,
    templates: Option<PathBuf>,
    header_bytes: usize,
    lines: Option<Vec<String>>,
    then: Option<Vec<PathBuf>>,
    timestamps: &str,
) -> PyResult<String> {
    let format = match (format, schema) {
        ("dbn", "mbo") => ExportFormat::DbnMbo,
        ("dbn", "mbp-1") => ExportFormat::DbnMbp1,
        ("dbn", s) => return Err(bad_arg(format!("schema {s:?}: DBN schemas are \"mbo\" and \"mbp-1\""))),
        ("parquet", _) => ExportFormat::Parquet,
        ("nautilus", _) => ExportFormat::Nautilus,
        ("jsonl", _) => ExportFormat::Jsonl,
        (f, _) => return Err(bad_arg(format!("format {f:?}: one of \"dbn\", \"parquet\", \"nautilus\", \"jsonl\""))),
    };
    let (mut o, program) = options(feed, date, infer_length, symbols, actions, None, templates, header_bytes, None)?;
    o.set_lines(&lines.unwrap_or_default()).map_err(bad_arg)?;
    o.then = then.unwrap_or_default();
    o.timestamps = timestamps.parse().map_err(bad_arg)?;
    let mut reader = EventReader::open(&path, &o, program).map_err(err)?;
    let mut interrupted = None;
    let report = export_events(&mut reader, format, &out, |_, _| {
        if interrupted.is_none() {
            if let Err(e) = py.check_signals() {
                interrupted = Some(e);
            }
        }
    })
    .map_err(err)?;
    if let Some(e) = interrupted {
        return Err(e);
    }
    serde_json::to_string(&report).map_err(err)
}

/// Events of a Parquet file or catalog directory `export` wrote.
#[pyfunction]
fn read_parquet(path: PathBuf) -> PyResult<EventBuffer> {
    let events = tickplant_io::export::read_parquet(&path).map_err(err)?;
    Ok(EventBuffer { events })
}

/// Events of a DBN MBO file `export` wrote, in the fields MBO carries.
#[pyfunction]
fn read_dbn(path: PathBuf) -> PyResult<EventBuffer> {
    let events = tickplant_io::export::read_dbn(&path).map_err(err)?;
    Ok(EventBuffer { events })
}

/// Full-depth books built from events, the library's own.
#[pyclass(unsendable)]
struct Books {
    books: CoreBooks,
}

#[pymethods]
impl Books {
    #[new]
    #[pyo3(signature = (max_orders=None, max_instruments=None))]
    fn new(max_orders: Option<usize>, max_instruments: Option<usize>) -> PyResult<Self> {
        let mut cfg = BookConfig::default();
        if let Some(n) = max_orders {
            cfg.max_orders = n;
        }
        if let Some(n) = max_instruments {
            cfg.max_instruments = n;
        }
        cfg.validate().map_err(err)?;
        Ok(Books { books: CoreBooks::new(cfg) })
    }
    /// Apply events (bytes, 64 a event) in order. With `bbo`, the best bid and offer of
    /// each event's instrument after it, as bytes of 6 little-endian 64-bit values an event:
    /// ts_event, instrument_id, bid price, bid size, ask price, ask size.
    #[pyo3(signature = (events, bbo=false))]
    fn apply<'py>(&mut self, py: Python<'py>, events: &[u8], bbo: bool) -> PyResult<Option<Bound<'py, PyBytes>>> {
        if !events.len().is_multiple_of(EVENT_BYTES) {
            return Err(err(format!("{} bytes is not a whole number of 64-byte events", events.len())));
        }
        let n = events.len() / EVENT_BYTES;
        let mut rows = if bbo { Vec::with_capacity(n * 48) } else { Vec::new() };
        for chunk in events.chunks_exact(EVENT_BYTES) {
            let mut e = from_bytes(chunk)?;
            if e.action == EventAction::Clear {
                self.books.clear_instrument(e.instrument_id);
            } else {
                self.books.apply(&mut e);
            }
            if bbo {
                let b = self.books.bbo(e.instrument_id);
                for v in [
                    e.ts_event,
                    u64::from(e.instrument_id),
                    b.bid_price as u64,
                    b.bid_size,
                    b.ask_price as u64,
                    b.ask_size,
                ] {
                    rows.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        Ok(bbo.then(|| PyBytes::new(py, &rows)))
    }
    /// (bid price, bid size, ask price, ask size) of an instrument; 0 on an empty side.
    fn bbo(&self, instrument_id: u32) -> (i64, u64, i64, u64) {
        let b = self.books.bbo(instrument_id);
        (b.bid_price, b.bid_size, b.ask_price, b.ask_size)
    }
    /// The `levels` best levels of a side ("bid" or "ask"): [(price, shares, orders)].
    #[pyo3(signature = (instrument_id, side, levels=10))]
    fn depth(&self, instrument_id: u32, side: &str, levels: usize) -> PyResult<Vec<(i64, u64, u32)>> {
        let side = match side {
            "bid" => Side::Bid,
            "ask" => Side::Ask,
            s => return Err(err(format!("side {s:?}: \"bid\" or \"ask\""))),
        };
        Ok(self
            .books
            .book(instrument_id)
            .map(|b| b.depth(side, levels).map(|l| (l.price, l.shares, l.orders)).collect())
            .unwrap_or_default())
    }
    /// Instruments with a book.
    fn instruments(&self) -> Vec<u32> {
        self.books.instruments().map(|(id, _)| id).collect()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TickplantError", m.py().get_type::<TickplantError>())?;
    m.add("EVENT_BYTES", EVENT_BYTES)?;
    m.add_function(wrap_pyfunction!(event_layout, m)?)?;
    m.add_function(wrap_pyfunction!(open_reader, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(read_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(read_dbn, m)?)?;
    m.add_class::<Reader>()?;
    m.add_class::<EventBuffer>()?;
    m.add_class::<Books>()?;
    m.add_class::<objects::Arbitrator>()?;
    m.add_class::<objects::Matcher>()?;
    m.add_class::<objects::FastDecoder>()?;
    m.add_function(wrap_pyfunction!(objects::run, m)?)?;
    Ok(())
}

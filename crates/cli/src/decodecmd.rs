//! `tickplant decode --feed F CAPTURE`: one JSON line (or CSV rows) per message, every
//! field under the specification's name (snake_case), values as sent; prices as the
//! integer on the wire with a `<name>_decimal` rendering beside it where the decimal places
//! are known. Feeds: `nyse-xdp` and `nyse-pillar` (NYSE Integrated Feed, XDP v2.1 and
//! Pillar v2.5 layouts; `tickplant_wire::xdp_integrated`), `opra-binary` (OPRA Participant Interface v6;
//! `tickplant_wire::opra_binary`), `itch50` (MoldUDP64 captures of ITCH 5.0, or a BinaryFILE, plain or gzip), `opra-fast`
//! (OPRA FAST v2 blocks, through the FAST decoder and the OPRA templates).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value as Json};
use tickplant_core::seq::udp_payload_range;
use tickplant_io::FrameReader;
use tickplant_wire::itch50::{self, FieldVisitor};
use tickplant_wire::xdp_integrated::Dialect;
use tickplant_wire::{moldudp64, opra, opra_binary, xdp, xdp_integrated};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Feed {
    /// NYSE Integrated Feed, XDP v2.1 layout (message types are numbers).
    NyseXdp,
    /// NYSE Integrated Feed, Pillar v2.5 layout (message types are numbers).
    NysePillar,
    /// OPRA binary, Participant Interface v6 (types are message category letters).
    OpraBinary,
    /// NASDAQ TotalView-ITCH 5.0 in MoldUDP64 packets (types are letters).
    Itch50,
    /// OPRA FAST v2 blocks (types are message category letters).
    OpraFast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object a line: frame, packet header, sequence, type, message, fields.
    Jsonl,
    /// One row a field (frame,sequence,type,message,field,value), with a header row: every
    /// message's fields, whatever its type, in one table a spreadsheet or pandas reads.
    Csv,
}

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The feed's layout.
    #[arg(long, value_enum)]
    pub feed: Feed,
    /// The capture (pcap or pcapng; one protocol packet a UDP datagram); for itch50 also an
    /// ITCH 5.0 BinaryFILE, plain or gzip, as NASDAQ publishes its days.
    pub capture: PathBuf,
    /// Stop after this many messages.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Only these message types, comma-separated: numbers for nyse-xdp and nyse-pillar
    /// (100,103), letters for itch50 (A,E) and the message category for OPRA (k,q).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<String>,
    /// itch50 BinaryFILE: take each message's length from its type, not its length prefix
    /// (for files whose prefixes are wrong; files whose prefixes are all zero, like the
    /// RITCH sample, are told by their first bytes).
    #[arg(long)]
    pub infer_length: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "jsonl")]
    pub format: Format,
    /// OPRA FAST templates (opra-fast only; the built-in OPRA v2 templates otherwise).
    #[arg(long)]
    pub templates: Option<PathBuf>,
    /// Bytes before each OPRA FAST block in the UDP payload (opra-fast only; `tickplant sim
    /// opra-fast` puts a 5-byte sequence header there).
    #[arg(long, default_value_t = 0)]
    pub header_bytes: usize,
}

/// One decoded message, whatever the feed.
struct Line<'a> {
    frame: u64,
    packet: &'a Json,
    sequence: Option<u64>,
    ty: String,
    message: Option<&'a str>,
    fields: Vec<(String, Json)>,
    /// Why the message did not decode (its bytes are in `fields` as `bytes`).
    error: Option<String>,
}

struct Out<'w, W: Write> {
    w: &'w mut W,
    format: Format,
    types: Vec<String>,
    limit: u64,
    written: u64,
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl<W: Write> Out<'_, W> {
    fn wants(&self, ty: &str) -> bool {
        self.types.is_empty() || self.types.iter().any(|t| t == ty)
    }
    /// Write one message; false when the limit is reached.
    fn put(&mut self, l: Line<'_>) -> Result<bool> {
        if self.written >= self.limit {
            return Ok(false);
        }
        if !self.wants(&l.ty) {
            return Ok(true);
        }
        match self.format {
            Format::Jsonl => {
                let mut fields = Map::new();
                for (k, v) in l.fields {
                    fields.insert(k, v);
                }
                // Frames count from 1: 0 is a message read from a file, not a capture.
                let frame = if l.frame == 0 { Json::Null } else { Json::from(l.frame) };
                let mut o = json!({
                    "frame": frame, "packet": l.packet, "sequence": l.sequence,
                    "message": l.message, "type": l.ty, "fields": fields,
                });
                if let Some(e) = l.error {
                    o["error"] = Json::from(e);
                }
                writeln!(self.w, "{o}")?;
            }
            Format::Csv => {
                if self.written == 0 {
                    writeln!(self.w, "frame,sequence,type,message,field,value")?;
                }
                let seq = l.sequence.map(|s| s.to_string()).unwrap_or_default();
                let frame = if l.frame == 0 { String::new() } else { l.frame.to_string() };
                let head = format!("{frame},{seq},{},{}", csv_cell(&l.ty), l.message.unwrap_or_default());
                for (k, v) in &l.fields {
                    writeln!(self.w, "{head},{k},{}", csv_cell(&text(v)))?;
                }
                if let Some(e) = l.error {
                    writeln!(self.w, "{head},error,{}", csv_cell(&e))?;
                }
            }
        }
        self.written += 1;
        Ok(self.written < self.limit)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every `--types` entry is a message type of the feed: a typo is an error that lists them,
/// not a decode that writes nothing.
fn check_types(feed: Feed, types: &[String]) -> Result<()> {
    if types.is_empty() {
        return Ok(());
    }
    let letters = |set: &[u8]| set.iter().map(|&c| (c as char).to_string()).collect::<Vec<_>>();
    let valid: Vec<String> = match feed {
        Feed::Itch50 => letters(itch50::MESSAGE_TYPES),
        Feed::NyseXdp | Feed::NysePillar => {
            // Pillar's layouts are XDP's with some changed or added.
            let pillar: &[xdp_integrated::Layout] =
                if feed == Feed::NysePillar { xdp_integrated::PILLAR_CHANGES } else { &[] };
            let mut n: Vec<u16> = xdp_integrated::LAYOUTS.iter().chain(pillar).map(|l| l.msg_type).collect();
            n.sort_unstable();
            n.dedup();
            n.iter().map(u16::to_string).collect()
        }
        // Categories are what the templates say (a file of the user's may have others):
        // one letter each.
        Feed::OpraFast => {
            return match types.iter().find(|t| !(t.len() == 1 && t.as_bytes()[0].is_ascii_alphabetic())) {
                Some(t) => Err(anyhow!("--types: {t:?} is not an OPRA message category (one letter: k, q, a, ...)")),
                None => Ok(()),
            };
        }
        Feed::OpraBinary => {
            let mut c: Vec<u8> = opra_binary::LAYOUTS.iter().map(|l| l.category).collect();
            c.sort_unstable();
            c.dedup();
            letters(&c)
        }
    };
    for t in types {
        if !valid.contains(t) {
            let name = feed.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            return Err(anyhow!("--types: {t:?} is not a message type of {name} (one of {})", valid.join(" ")));
        }
    }
    Ok(())
}

/// Decode, writing to `out`; returns the messages written.
pub fn decode(a: &DecodeArgs, out: &mut impl Write) -> Result<u64> {
    check_types(a.feed, &a.types)?;
    if a.feed == Feed::Itch50 && !tickplant_io::pcap::is_capture(&a.capture)? {
        return itch_file(a, out);
    }
    let mut r = FrameReader::open(&a.capture)?;
    if r.is_binary_file() {
        bail!("{}: an ITCH 5.0 BinaryFILE: decode it with --feed itch50", a.capture.display());
    }
    let link = r.link_type();
    let name = a.capture.display().to_string();
    let mut o =
        Out { w: out, format: a.format, types: a.types.clone(), limit: a.limit.unwrap_or(u64::MAX), written: 0 };
    let mut fast = match a.feed {
        Feed::OpraFast => Some(FastState::new(a.templates.as_deref())?),
        _ => None,
    };
    let mut frame = 0u64;
    let mut skipped = crate::fastcmd::Skipped::default();
    // NYSE: each symbol index's price scale, from the symbol index mappings seen so far.
    let mut scales = std::collections::HashMap::new();
    while let Some(f) = r.next_frame()? {
        frame += 1;
        let Ok(range) = udp_payload_range(link, f.data) else {
            skipped.count(&f);
            continue;
        };
        let payload = &f.data[range];
        let at = || format!("{name}: frame {frame}");
        let go = match a.feed {
            Feed::NyseXdp => nyse(Dialect::Xdp21, payload, frame, &mut scales, &mut o).with_context(at)?,
            Feed::NysePillar => nyse(Dialect::Pillar25, payload, frame, &mut scales, &mut o).with_context(at)?,
            Feed::OpraBinary => opra_bin(payload, frame, &mut o).with_context(at)?,
            Feed::Itch50 => itch(payload, frame, &mut o).with_context(at)?,
            Feed::OpraFast => {
                let block = payload.get(a.header_bytes..).ok_or_else(|| {
                    anyhow!("UDP payload of {} bytes is shorter than --header-bytes {}", payload.len(), a.header_bytes)
                });
                let s = fast.as_mut().ok_or_else(|| anyhow!("no FAST program"));
                block.and_then(|b| s?.block(b, frame, &mut o)).with_context(at)?
            }
        };
        if !go {
            break;
        }
    }
    skipped.say(&name);
    Ok(o.written)
}

/// An NYSE field that holds a price (at the symbol's price scale).
fn nyse_price(name: &str) -> bool {
    name == "price"
        || name.ends_with("_price")
        || name.starts_with("price_") && name != "price_scale_code" && name != "price_resolution"
        || name.ends_with("_collar")
        || name == "open"
        || name == "close"
}

fn nyse<W: Write>(
    d: Dialect,
    payload: &[u8],
    frame: u64,
    scales: &mut std::collections::HashMap<u64, u8>,
    o: &mut Out<'_, W>,
) -> Result<bool> {
    let p = xdp::Packet::new_checked(payload)?;
    let packet = json!({
        "packet_size": p.pkt_size(),
        "delivery_flag": p.delivery_flag(),
        "message_count": p.number_msgs(),
        "sequence_number": p.seq_num(),
        "timestamp": p.send_time(),
        "nanoseconds": p.send_time_ns(),
    });
    for (i, m) in p.messages().enumerate() {
        let (at, m) = m?;
        let seq = Some(u64::from(p.seq_num()) + i as u64);
        let ty = m.msg_type.to_string();
        let line = match xdp_integrated::fields_of(d, &m) {
            Ok((l, fields)) => {
                let uint = |name: &str| {
                    fields.iter().find(|(k, _)| *k == name).and_then(|(_, v)| match v {
                        xdp_integrated::Value::Uint(x) => Some(*x),
                        _ => None,
                    })
                };
                let index = uint("symbol_index");
                if m.msg_type == 3 {
                    if let (Some(i), Some(sc)) = (index, uint("price_scale_code")) {
                        scales.insert(i, sc as u8);
                    }
                }
                // Prices beside their decimal once the symbol's mapping gave the scale.
                let scale = index.and_then(|i| scales.get(&i).copied()).filter(|&s| s <= 9);
                let mut out = Vec::with_capacity(fields.len() + 2);
                for (k, v) in fields {
                    match v {
                        xdp_integrated::Value::Uint(x) => {
                            out.push((k.to_string(), Json::from(x)));
                            if let (true, Some(sc)) = (nyse_price(k) && m.msg_type != 3, scale) {
                                out.push((
                                    format!("{k}_decimal"),
                                    Json::from(opra_binary::decimal_string(x as i64, sc)),
                                ));
                            }
                        }
                        other => out.push((k.to_string(), Json::from(other.to_string()))),
                    }
                }
                let fields = out;
                Line { frame, packet: &packet, sequence: seq, ty, message: Some(l.name), fields, error: None }
            }
            // Nothing dropped without a word: the message's bytes and why.
            Err(e) => Line {
                frame,
                packet: &packet,
                sequence: seq,
                ty,
                message: None,
                fields: vec![("bytes".into(), Json::from(hex(m.bytes)))],
                error: Some(format!("at byte {at} of the packet: {e}")),
            },
        };
        if !o.put(line)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn opra_bin<W: Write>(payload: &[u8], frame: u64, o: &mut Out<'_, W>) -> Result<bool> {
    let b = opra::Block::new_checked(payload)?;
    let h = opra::Repr::parse(&b)?;
    if h.version != 6 {
        return Err(anyhow!("OPRA block version {} (this decoder reads version 6)", h.version));
    }
    let packet = json!({
        "version": h.version,
        "block_size": h.block_size,
        "data_feed_indicator": (h.data_feed_indicator as char).to_string(),
        "retransmission_indicator": (h.retransmission_indicator as char).to_string(),
        "session_indicator": h.session_indicator,
        "block_sequence_number": h.block_sequence_number,
        "messages_in_block": h.messages_in_block,
        "block_timestamp": u64::from(h.timestamp.0) * 1_000_000_000 + u64::from(h.timestamp.1),
        "block_checksum": h.checksum,
    });
    let hl = opra::header_len(6);
    for (i, m) in opra_binary::messages(b.payload(), h.messages_in_block).enumerate() {
        let seq = Some(u64::from(h.block_sequence_number) + i as u64);
        let line = match m {
            Ok((_, m)) => {
                let mut fields = Vec::new();
                for (k, v) in opra_binary::fields(&m) {
                    match v {
                        opra_binary::Value::Uint(x) => fields.push((k.to_string(), Json::from(x))),
                        opra_binary::Value::Price(raw, places) => {
                            fields.push((k.to_string(), Json::from(raw)));
                            if let Some(p) = places {
                                fields.push((format!("{k}_decimal"), Json::from(opra_binary::decimal_string(raw, p))));
                            }
                        }
                        other => fields.push((k.to_string(), Json::from(other.to_string()))),
                    }
                }
                let ty = (m.category() as char).to_string();
                Line { frame, packet: &packet, sequence: seq, ty, message: Some(m.layout().name), fields, error: None }
            }
            Err(e) => {
                let rest = b.payload().get(e.offset().min(b.payload().len())..).unwrap_or_default();
                Line {
                    frame,
                    packet: &packet,
                    sequence: seq,
                    ty: rest.get(1).map(|&c| (c as char).to_string()).unwrap_or_default(),
                    message: None,
                    fields: vec![("bytes".into(), Json::from(hex(rest)))],
                    error: Some(format!("{}", e.at(hl))),
                }
            }
        };
        if !o.put(line)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// ITCH fields as (name, JSON) pairs, prices with their decimal beside them.
struct ItchFields(Vec<(String, Json)>);
impl FieldVisitor for ItchFields {
    fn int(&mut self, name: &'static str, value: u64) {
        self.0.push((name.into(), Json::from(value)));
    }
    fn price(&mut self, name: &'static str, value: u64, decimals: u8) {
        self.0.push((name.into(), Json::from(value)));
        let s = opra_binary::decimal_string(value as i64, decimals);
        self.0.push((format!("{name}_decimal"), Json::from(s)));
    }
    fn text(&mut self, name: &'static str, value: &[u8]) {
        self.0.push((name.into(), Json::from(String::from_utf8_lossy(value).into_owned())));
    }
}

fn itch<W: Write>(payload: &[u8], frame: u64, o: &mut Out<'_, W>) -> Result<bool> {
    let p = moldudp64::Packet::new_checked(payload)?;
    let packet = json!({
        "session": String::from_utf8_lossy(&p.session()),
        "sequence_number": p.sequence_number(),
        "message_count": p.message_count(),
    });
    for (i, m) in p.messages().enumerate() {
        let seq = p.sequence_number() + i as u64;
        let (at, body) = m?;
        if !o.put(itch_line(frame, &packet, seq, body, || format!("message at byte {at} of the packet")))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One ITCH message's line (`where_` says where it is, for a message that does not parse).
fn itch_line<'a>(
    frame: u64,
    packet: &'a Json,
    sequence: u64,
    body: &[u8],
    where_: impl FnOnce() -> String,
) -> Line<'a> {
    let ty = body.first().map(|&c| (c as char).to_string()).unwrap_or_default();
    match itch50::parse_exact(body) {
        Ok(msg) => {
            let (locate, tracking, ts) = msg.header();
            let mut v = ItchFields(vec![
                ("stock_locate".into(), Json::from(locate)),
                ("tracking_number".into(), Json::from(tracking)),
                ("timestamp".into(), Json::from(ts)),
            ]);
            msg.visit(&mut v);
            Line { frame, packet, sequence: Some(sequence), ty, message: Some(msg.name()), fields: v.0, error: None }
        }
        Err(e) => Line {
            frame,
            packet,
            sequence: Some(sequence),
            ty,
            message: None,
            fields: vec![("bytes".into(), Json::from(hex(body)))],
            error: Some(format!("{}: {e}", where_())),
        },
    }
}

/// An ITCH 5.0 BinaryFILE (plain or gzip, as NASDAQ publishes its days): each message's
/// line has no frame or packet (`null`), and `sequence` is its place in the file from 1.
fn itch_file(a: &DecodeArgs, out: &mut impl Write) -> Result<u64> {
    let mut o =
        Out { w: out, format: a.format, types: a.types.clone(), limit: a.limit.unwrap_or(u64::MAX), written: 0 };
    let (r, framing) = tickplant_io::binaryfile::open_stream(&a.capture, a.infer_length)?;
    let mut failure = None;
    let mut each = |m: &tickplant_io::itch::ItchMessage<'_>| {
        let line = itch_line(0, &Json::Null, m.seq, m.bytes, || format!("message {} at byte {}", m.seq, m.offset));
        o.put(line).unwrap_or_else(|e| {
            failure = Some(e);
            false
        })
    };
    tickplant_io::itch::read_stream(&a.capture, r, framing, &mut each)?;
    match failure {
        Some(e) => Err(e),
        None => Ok(o.written),
    }
}

/// The FAST side: the program and a decoder whose dictionaries start fresh each block
/// (OPRA FAST v2 blocks are self-contained).
/// The OPRA FAST templates of a file, or the built-in ones, compiled (warnings on stderr).
pub fn opra_fast_program(templates: Option<&std::path::Path>) -> Result<tickplant_fast::Program> {
    let xml = tickplant_sim::opra_fast::templates_xml(templates)
        .with_context(|| format!("{}: cannot read", templates.map(|p| p.display().to_string()).unwrap_or_default()))?;
    let program = tickplant_fast::Program::from_xml(&xml).map_err(|e| anyhow!("templates: {e}"))?;
    for w in &program.warnings {
        eprintln!("warning: templates: {w}");
    }
    Ok(program)
}

struct FastState {
    program: tickplant_fast::Program,
    msg: tickplant_fast::Message,
}

impl FastState {
    fn new(templates: Option<&std::path::Path>) -> Result<FastState> {
        Ok(FastState { program: opra_fast_program(templates)?, msg: tickplant_fast::Message::new() })
    }

    fn block<W: Write>(&mut self, payload: &[u8], frame: u64, o: &mut Out<'_, W>) -> Result<bool> {
        let mut dec = tickplant_fast::Decoder::new(&self.program);
        let packet = json!({ "block_length": payload.len() });
        let mut s = String::new();
        for (i, m) in tickplant_fast::opra_block(payload).enumerate() {
            let (at, body) = m.map_err(|(at, e)| anyhow!("block framing at byte {at}: {e}"))?;
            dec.decode(body, &mut self.msg)
                .map_err(|e| anyhow!("message {i} at byte {at} of the block: {} at byte {}", e.kind, e.offset))?;
            s.clear();
            tickplant_fast::json::write_json(&self.program, &self.msg, &mut s);
            let v: Json = serde_json::from_str(&s)?;
            let raw: Vec<(String, Json)> = v["fields"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect())
                .unwrap_or_default();
            let get = |k: &str| raw.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            // Prices beside their decimal, from the denominator code the message carries.
            let places = |code: &str| get(code).and_then(|c| c.as_u64()).and_then(|c| opra_binary::decimals(c as u8));
            let mut fields = Vec::with_capacity(raw.len() + 4);
            for (k, v) in &raw {
                fields.push((k.clone(), v.clone()));
                let code = match k.as_str() {
                    "bid_price" | "offer_price" | "premium_price" => "premium_price_denominator_code",
                    "explicit_strike_price" => "strike_price_denominator_code",
                    _ => continue,
                };
                if let (Some(x), Some(p)) = (v.as_i64(), places(code)) {
                    fields.push((format!("{k}_decimal"), Json::from(opra_binary::decimal_string(x, p))));
                }
            }
            let ty = match get("message_category") {
                Some(Json::Number(n)) => n.as_u64().map(|c| (c as u8 as char).to_string()).unwrap_or_default(),
                Some(Json::String(s)) => s,
                _ => String::new(),
            };
            let sequence = get("message_sequence_number").and_then(|v| v.as_u64());
            let tname = v["template"].as_str().map(str::to_string);
            let line = Line { frame, packet: &packet, sequence, ty, message: tname.as_deref(), fields, error: None };
            if !o.put(line)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

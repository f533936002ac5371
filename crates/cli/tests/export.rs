//! `tickplant export` and the library under it (`tickplant_io::events`, `::export`): a
//! simulated ITCH day's events go to Parquet and back exactly, to JSON lines field for
//! field, and to DBN MBO records that Databento's own decoder (the `dbn` crate) reads and
//! from which a book builder of DBN's actions ends at the simulator's books.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use dbn::decode::{DbnMetadata, DecodeRecord};
use serde_json::Value;
use tickplant_core::event::Event;
use tickplant_io::events::{EventReader, Feed, ReadOptions};

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");
const DATE: &str = "2026-11-20";

fn tp(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stderr).unwrap()
}

/// `tickplant export FORMAT` of an ITCH capture of the day; its stderr.
fn export(format: &str, input: &Path, out: &Path) -> String {
    tp(&["export", format, "--feed", "itch50", "--date", DATE, input.to_str().unwrap(), "--out", out.to_str().unwrap()])
}

fn day(dir: &Path) {
    let pcap = dir.join("day.pcap");
    let truth = dir.join("truth.jsonl");
    tp(&["sim", "itch", "--messages", "40000", "--symbols", "30", "--date", DATE, "--out"]
        .into_iter()
        .chain([pcap.to_str().unwrap(), "--truth", truth.to_str().unwrap()])
        .collect::<Vec<_>>());
}

fn events(path: &Path) -> (Vec<Event>, BTreeMap<u32, String>) {
    let mut o = ReadOptions::new(Feed::Itch50);
    o.day = tickplant_core::itch::midnight_eastern_ns(DATE).unwrap().into();
    let mut r = EventReader::open(path, &o, None).unwrap();
    let mut ev = Vec::new();
    r.read_all(&mut ev).unwrap();
    let s = r.stats();
    assert_eq!(s.messages, s.decoded + s.undecodable);
    assert_eq!(s.events + s.filtered, s.decoded + s.gaps);
    (ev, r.symbols().clone())
}

#[test]
fn parquet_and_jsonl_give_the_events_back() {
    let dir = tempfile::tempdir().unwrap();
    day(dir.path());
    let pcap = dir.path().join("day.pcap");
    let (ev, symbols) = events(&pcap);
    assert_eq!(ev.len(), 40_000);
    let cat = dir.path().join("catalog");
    let err = export("parquet", &pcap, &cat);
    assert!(err.contains("40000 events"), "{err}");
    let aaaa = cat.join("data/order_book_delta/AAAA.XNAS");
    assert_eq!(std::fs::read_dir(&aaaa).unwrap().count(), 1, "one file for the one day");
    let mut back = tickplant_io::export::read_parquet(&cat).unwrap();
    back.sort_by_key(|e| e.sequence);
    assert_eq!(back, ev);
    // One instrument's file holds exactly its events, in order.
    let id = *symbols.iter().find(|(_, s)| s.as_str() == "AAAA").unwrap().0;
    let mine: Vec<Event> = ev.iter().filter(|e| e.instrument_id == id).copied().collect();
    assert_eq!(tickplant_io::export::read_parquet(&aaaa).unwrap(), mine);

    let jsonl = dir.path().join("day.jsonl");
    export("jsonl", &pcap, &jsonl);
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), ev.len());
    for (l, e) in lines.iter().zip(&ev) {
        assert_eq!(l["sequence"], e.sequence);
        assert_eq!(l["ts_event"], e.ts_event);
        assert_eq!(l["order_id"], e.order_id);
        assert_eq!(l["price"], e.price);
        assert_eq!(l["size"], e.size);
        assert_eq!(l["action"], e.action.as_str());
        assert_eq!(l["side"], e.side.as_str());
        assert_eq!(l["flags"], e.flags);
    }
}

/// `--out -` writes DBN and JSON lines to standard output, byte for byte the file's; a
/// reader that stops early (`| head`) ends an export or a decode quietly, with success; a
/// catalog (a directory) to `-` is refused with the reason.
#[test]
fn standard_output_takes_single_file_formats_and_may_close_early() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    day(dir.path());
    let pcap = dir.path().join("day.pcap");
    let p = pcap.to_str().unwrap();
    for (format, file) in [("jsonl", "day.jsonl"), ("dbn", "day.dbn")] {
        export(format, &pcap, &dir.path().join(file));
        let o =
            Command::new(BIN).args(["export", format, "--feed", "itch50", "--date", DATE, p, "--out", "-"]).output();
        let o = o.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(o.stdout == std::fs::read(dir.path().join(file)).unwrap(), "{format} to stdout differs from the file");
        assert!(String::from_utf8_lossy(&o.stderr).contains("40000 events"), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let early = |args: &[&str]| {
        let mut c = Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut head = [0u8; 100];
        c.stdout.take().unwrap().read_exact(&mut head).unwrap();
        // The pipe's reader is gone (dropped above); the writer finds out at its next write.
        let o = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success() && !err.contains("error"), "{args:?}: {err}");
    };
    early(&["export", "jsonl", "--feed", "itch50", "--date", DATE, p, "--out", "-", "--quiet"]);
    early(&["export", "dbn", "--feed", "itch50", "--date", DATE, p, "--out", "-", "--quiet"]);
    early(&["decode", "--feed", "itch50", p]);
    early(&["itch", "decode", p]);
    let o = Command::new(BIN).args(["export", "parquet", "--feed", "itch50", p, "--out", "-"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`-` (standard output) takes dbn and jsonl"), "{err}");
}

/// A tap's hardware time stamps: each frame of a capture given an Arista 7130 (MetaWatch)
/// trailer, read with `timestamps = metawatch`, gives every event its packet's trailer time
/// as `ts_recv`; frames without one keep the capture's time and are warned of. (Wireshark's
/// `metamako` dissector reads the same trailers: checked where tshark is installed.)
#[test]
fn metawatch_trailers_give_ts_recv() {
    use tickplant_io::pcap::TimeSource;
    use tickplant_io::{Format, FrameReader, FrameWriter};
    let dir = tempfile::tempdir().unwrap();
    day(dir.path());
    let (pcap, tapped) = (dir.path().join("day.pcap"), dir.path().join("tapped.pcap"));
    let mut r = FrameReader::open(&pcap).unwrap();
    let mut w = FrameWriter::create(&tapped, r.link_type(), Format::PcapNs).unwrap();
    let mut by_capture = HashMap::new();
    let mut n = 0u64;
    while let Some(f) = r.next_frame().unwrap() {
        n += 1;
        let mut data = f.data.to_vec();
        // The tap's clock 3.5 us ahead of the host's, and a little different each frame; the
        // first five frames came without a trailer.
        if n > 5 {
            let t = f.ts_ns - 3_500 + n % 97;
            data.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
            data.extend_from_slice(&((t / 1_000_000_000) as u32).to_be_bytes());
            data.extend_from_slice(&((t % 1_000_000_000) as u32).to_be_bytes());
            data.extend_from_slice(&[0x01, 0x00, 0x07, 0x03]);
            by_capture.insert(f.ts_ns, t);
        }
        w.write(f.ts_ns, &data).unwrap();
    }
    w.finish().unwrap();
    assert!(n > 1_000, "{n} frames");
    let read = |path: &Path, ts: TimeSource| {
        let mut o = ReadOptions::new(Feed::Itch50);
        o.day = tickplant_core::itch::midnight_eastern_ns(DATE).unwrap().into();
        o.timestamps = ts;
        let mut r = EventReader::open(path, &o, None).unwrap();
        let mut ev = Vec::new();
        r.read_all(&mut ev).unwrap();
        (ev, r.warnings())
    };
    let (plain, _) = read(&pcap, TimeSource::Capture);
    let (tap, warnings) = read(&tapped, TimeSource::MetaWatch);
    assert_eq!(plain.len(), tap.len());
    let mut taken = 0;
    for (p, t) in plain.iter().zip(&tap) {
        assert_eq!((p.sequence, p.ts_event), (t.sequence, t.ts_event));
        match by_capture.get(&p.ts_recv) {
            Some(&trailer) => {
                assert_eq!(t.ts_recv, trailer, "event {}", p.sequence);
                taken += 1;
            }
            None => assert_eq!(t.ts_recv, p.ts_recv, "no trailer: the capture's time"),
        }
    }
    assert!(taken > 39_900, "{taken} events with the tap's time");
    let want = format!("5 of its {n} frames had no MetaWatch trailer time");
    assert!(warnings.iter().any(|w| w.contains(&want)), "{warnings:?}");
    // The command line's flag; a bad value says what the good ones are.
    let out = dir.path().join("t.jsonl");
    let err = tp(&["export", "jsonl", "--feed", "itch50", "--date", DATE, "--timestamps", "metawatch"]
        .into_iter()
        .chain([tapped.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .collect::<Vec<_>>());
    assert!(err.contains(&want), "{err}");
    let first: Value = serde_json::from_str(std::fs::read_to_string(&out).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["ts_recv"], tap[0].ts_recv);
    let mut c = Command::new(BIN);
    c.args(["export", "jsonl", "--feed", "itch50", "--timestamps", "ptp"]).arg(&tapped);
    let o = c.args(["--out", out.to_str().unwrap()]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"metawatch\""), "{}", String::from_utf8_lossy(&o.stderr));
    // The pipeline takes them too (`[source] timestamps`): a consumer's events carry them.
    let cfg = dir.path().join("run.toml");
    let toml = format!(
        "[source]\na = {tapped:?}\ndate = \"{DATE}\"\ntimestamps = \"metawatch\"\n\
         [[consumer]]\nname = \"all\"\naction = \"jsonl\"\npath = \"run.jsonl\"\n"
    );
    std::fs::write(&cfg, &toml).unwrap();
    let o = Command::new(BIN).args(["run", cfg.to_str().unwrap()]).current_dir(dir.path()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("5 frames had no MetaWatch trailer time"), "{err}");
    let by_seq: HashMap<u64, u64> = tap.iter().map(|e| (e.sequence, e.ts_recv)).collect();
    let run = std::fs::read_to_string(dir.path().join("run.jsonl")).unwrap();
    let mut seen = 0;
    for l in run.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        if let (Some(seq), Some(ts)) = (v["sequence"].as_u64(), v["ts_recv"].as_u64()) {
            assert_eq!(Some(&ts), by_seq.get(&seq), "run event {seq}");
            seen += 1;
        }
    }
    assert!(seen > 39_000, "{seen} events of the run");
    std::fs::write(&cfg, toml.replace("metawatch", "ptp")).unwrap();
    let o = Command::new(BIN).args(["run", cfg.to_str().unwrap()]).current_dir(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("[source] timestamps \"ptp\""), "{o:?}");
    // Wireshark's dissector reads the trailers as written, where it is installed: the sixth
    // frame's (the first with one) time of day to the nanosecond.
    let ts = Command::new("tshark")
        .env("TZ", "UTC")
        .args(["-r", tapped.to_str().unwrap(), "-c", "6", "--enable-heuristic", "metamako_eth", "-T", "fields"])
        .args(["-e", "metamako.time", "-e", "metamako.srcdevice", "-e", "metamako.srcport"])
        .output();
    match ts {
        Ok(o) if o.status.success() => {
            let out = String::from_utf8_lossy(&o.stdout).to_string();
            let sixth = out.lines().nth(5).unwrap_or_default();
            let mut r = FrameReader::open(&tapped).unwrap();
            let f = (0..6).map(|_| r.next_frame().unwrap().unwrap().ts_ns).last().unwrap();
            let t = by_capture[&f];
            let (day_s, ns) = ((t / 1_000_000_000) % 86_400, t % 1_000_000_000);
            let want = format!("{:02}:{:02}:{:02}.{ns:09} UTC\t7\t3", day_s / 3600, day_s / 60 % 60, day_s % 60);
            assert!(sixth.ends_with(&want), "tshark: {sixth:?}, written {want:?}");
        }
        _ => eprintln!("tshark is not installed here: the trailers were not read by Wireshark"),
    }
}

#[test]
fn dbn_mbo_rebuilds_the_simulators_books() {
    let dir = tempfile::tempdir().unwrap();
    day(dir.path());
    let pcap = dir.path().join("day.pcap");
    let out = dir.path().join("day.dbn");
    export("dbn", &pcap, &out);
    let mut dec = dbn::decode::DbnDecoder::from_file(&out).unwrap();
    let meta = dec.metadata().clone();
    assert_eq!(meta.dataset, "XNAS.ITCH");
    assert_eq!(meta.schema, Some(dbn::Schema::Mbo));
    let id_of: HashMap<String, u32> =
        meta.mappings.iter().map(|m| (m.raw_symbol.clone(), m.intervals[0].symbol.parse().unwrap())).collect();
    // (instrument, side, price) -> shares, from DBN's book actions alone.
    let mut orders: HashMap<u64, (u32, u8, i64, u32)> = HashMap::new();
    let mut records = 0;
    while let Some(r) = dec.decode_record::<dbn::MboMsg>().unwrap() {
        records += 1;
        match r.action as u8 {
            b'A' => {
                orders.insert(r.order_id, (r.hd.instrument_id, r.side as u8, r.price, r.size));
            }
            b'C' => {
                let o = orders.get_mut(&r.order_id).expect("a cancel names a live order");
                o.3 = o.3.checked_sub(r.size).expect("never more than the order has");
                if o.3 == 0 {
                    orders.remove(&r.order_id);
                }
            }
            _ => {}
        }
    }
    assert!(records > 40_000);
    // Back to events: every event MBO has records for, in the fields MBO carries.
    let (ev, _) = events(&pcap);
    let keep = |e: &Event| {
        use tickplant_core::event::{flags, EventAction as A};
        if matches!(e.action, A::Status | A::Imbalance | A::Quote | A::Gap) {
            return None;
        }
        let clear = e.action == A::Clear;
        Some(Event {
            sequence: e.sequence & 0xFFFF_FFFF,
            order_id: if clear { 0 } else { e.order_id },
            price: if clear { 0 } else { e.price },
            size: if clear { 0 } else { e.size },
            aux: if e.action == A::Modify { e.aux } else { 0 },
            flags: e.flags & (flags::LAST_IN_PACKET | flags::BOOK_STALE),
            msg_type: 0,
            venue: 0,
            ..*e
        })
    };
    let want: Vec<Event> = ev.iter().filter_map(keep).collect();
    let back = tickplant_io::export::read_dbn(&out).unwrap();
    assert_eq!(back.len(), want.len());
    // The same, zstd-compressed (`.zst`, as Databento ships DBN and NautilusTrader reads it).
    let zst = dir.path().join("day.dbn.zst");
    export("dbn", &pcap, &zst);
    assert!(std::fs::metadata(&zst).unwrap().len() < std::fs::metadata(&out).unwrap().len() / 2);
    assert_eq!(tickplant_io::export::read_dbn(&zst).unwrap(), back);
    for (i, (b, w)) in back.iter().zip(&want).enumerate() {
        assert_eq!(b, w, "event {i}");
    }
    let mut levels: BTreeMap<(u32, u8), BTreeMap<i64, u64>> = BTreeMap::new();
    for (iid, side, px, sz) in orders.values() {
        *levels.entry((*iid, *side)).or_default().entry(*px).or_default() += u64::from(*sz);
    }
    let truth = std::fs::read_to_string(dir.path().join("truth.jsonl")).unwrap();
    for line in truth.lines() {
        let t: Value = serde_json::from_str(line).unwrap();
        let iid = id_of[t["symbol"].as_str().unwrap()];
        for (side, key) in [(b'B', "bids"), (b'A', "asks")] {
            let want: BTreeMap<i64, u64> = t[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| ((l[0].as_f64().unwrap() * 1e9).round() as i64, l[1].as_u64().unwrap()))
                .collect();
            assert_eq!(levels.remove(&(iid, side)).unwrap_or_default(), want, "{} {}", t["symbol"], side as char);
        }
    }
    assert!(levels.values().all(|l| l.is_empty()), "no book the truth does not have");
}

/// Without `--date`, ITCH times count from the day the capture was received on: the same
/// events as with the day given, and the report names it; a BinaryFILE has no receive
/// times, and the export says its times count from 1970-01-01.
#[test]
fn the_trading_day_is_told_from_the_capture() {
    let dir = tempfile::tempdir().unwrap();
    day(dir.path());
    let pcap = dir.path().join("day.pcap");
    let (given, told) = (dir.path().join("given.jsonl"), dir.path().join("told.jsonl"));
    export("jsonl", &pcap, &given);
    let err = tp(&["export", "jsonl", "--feed", "itch50", pcap.to_str().unwrap(), "--out", told.to_str().unwrap()]);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(std::fs::read(&told).unwrap(), std::fs::read(&given).unwrap());
    let mut o = ReadOptions::new(Feed::Itch50);
    o.day = tickplant_core::itch::SessionDay::FromCapture;
    let mut r = EventReader::open(&pcap, &o, None).unwrap();
    let mut ev = Vec::new();
    r.read_all(&mut ev).unwrap();
    assert_eq!(r.session_date().as_deref(), Some(DATE));
    assert!(r.warnings().is_empty(), "{:?}", r.warnings());
    assert_eq!(ev, events(&pcap).0);

    let file = dir.path().join("day.itch");
    tp(&["sim", "itch", "--messages", "5000", "--symbols", "5", "--out", file.to_str().unwrap()]);
    let out = dir.path().join("file.jsonl");
    let err = tp(&["export", "jsonl", "--feed", "itch50", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(err.contains("warning") && err.contains("ts_event counts from 1970-01-01"), "{err}");
    let err = tp(&[
        "export",
        "jsonl",
        "--feed",
        "itch50",
        "--date",
        DATE,
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!err.contains("warning"), "{err}");
    // A day given for a feed with times of its own is said to go unused.
    let opra = dir.path().join("opra.pcap");
    let opra = opra.to_str().unwrap();
    tp(&["sim", "opra", "--messages", "2000", "--out", opra]);
    let err = tp(&["export", "jsonl", "--feed", "opra-binary", "--date", DATE, opra, "--out", out.to_str().unwrap()]);
    assert!(err.contains("opra-binary's event times do not use it"), "{err}");
}

#[test]
fn bad_inputs_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x.itch");
    std::fs::write(&f, [0u8, 5]).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(BIN).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8(o.stderr).unwrap()
    };
    let out = dir.path().join("o.dbn");
    let (f, out) = (f.to_str().unwrap(), out.to_str().unwrap());
    assert!(run(&["export", "dbn", "--feed", "nyse-xdp", f, "--out", out]).contains("read from captures"));
    assert!(run(&["export", "dbn", "--feed", "cme", f, "--out", out]).contains("one of itch50"));
    assert!(run(&["export", "dbn", "--feed", "itch50", f, "--out", out]).contains("ends inside message 1"));
    let e = run(&["export", "dbn", "--feed", "itch50", "--lines", "nowhere", f, "--out", out]);
    assert!(e.contains("--lines") && e.contains("GROUP:PORT"), "{e}");
    let e = run(&["export", "dbn", "--feed", "itch50", "--date", "2026-02-30", f, "--out", out]);
    assert!(e.contains("--date") && e.contains("YYYY-MM-DD or auto"), "{e}");
    // A capture of another feed, or a line it does not hold: an error that says what the
    // capture holds, never an empty export.
    let nyse = dir.path().join("nyse.pcap");
    tp(&["sim", "nyse", "--messages", "2000", "--symbols", "5", "--out", nyse.to_str().unwrap()]);
    let e = run(&["export", "jsonl", "--feed", "itch50", nyse.to_str().unwrap(), "--out", out]);
    assert!(e.contains("none of its") && e.contains("do not read as MoldUDP64") && e.contains(":26400 ("), "{e}");
    let e = run(&[
        "export",
        "jsonl",
        "--feed",
        "nyse-xdp",
        "--lines",
        "239.1.1.1:5000",
        nyse.to_str().unwrap(),
        "--out",
        out,
    ]);
    assert!(e.contains("to 239.1.1.1:5000 (the lines asked for): its UDP datagrams go to"), "{e}");
    // Packets of the protocol, none of whose messages decode: a warning (a short capture of
    // adds whose symbols it never maps is one too).
    let e = tp(&["export", "jsonl", "--feed", "opra-fast", nyse.to_str().unwrap(), "--out", out]);
    assert!(e.contains("warning:") && e.contains("none of their") && e.contains("messages decoded"), "{e}");
    // The pipeline on it with the default decoder (itch50) warns in its summary.
    let cfg = dir.path().join("run.toml");
    std::fs::write(&cfg, format!("[source]\na = {:?}\n[[consumer]]\nname = \"all\"\naction = \"count\"\n", nyse))
        .unwrap();
    let e = tp(&["run", cfg.to_str().unwrap()]);
    assert!(e.contains("WARNING: none of input A's") && e.contains("packet of itch50 (malformed"), "{e}");
    let ritch = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/itch/ritch/ex20101224.TEST_ITCH_50");
    if ritch.exists() {
        // Zero length prefixes are told by the first message; a later wrong one is an error
        // that names the way out.
        let mut bytes = std::fs::read(&ritch).unwrap();
        let len = u16::try_from(tickplant_wire::itch50::message_len(bytes[2]).unwrap()).unwrap();
        bytes[..2].copy_from_slice(&len.to_be_bytes());
        let bad = dir.path().join("bad.itch");
        std::fs::write(&bad, &bytes).unwrap();
        let e = run(&["export", "jsonl", "--feed", "itch50", bad.to_str().unwrap(), "--out", out]);
        assert!(e.contains("infer_length") || e.contains("infer-length"), "{e}");
    }
}

/// The files of a rotated capture (`arb --rotate`), given together, read as the one
/// capture they were cut from: the same events, field for field, with the books going on
/// from file to file; a file after the first that is not a capture is refused before the
/// read.
#[test]
fn a_rotated_capture_reads_as_the_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    day(d);
    let (day_pcap, hr) = (d.join("day.pcap"), d.join("hr.pcap"));
    tp(&["arb", "--a", day_pcap.to_str().unwrap(), "--hr-out", hr.to_str().unwrap(), "--rotate", "300KB"]);
    let mut parts: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .filter(|p| p.contains("hr-") && p.ends_with(".pcap"))
        .collect();
    parts.sort();
    assert!(parts.len() >= 3, "{parts:?}");
    let (whole, rotated) = (d.join("whole.jsonl"), d.join("rotated.jsonl"));
    export("jsonl", &day_pcap, &whole);
    let mut args: Vec<&str> = vec!["export", "jsonl", "--feed", "itch50", "--date", DATE];
    args.extend(parts.iter().map(String::as_str));
    args.extend(["--out", rotated.to_str().unwrap()]);
    tp(&args);
    let (w, r) = (std::fs::read_to_string(&whole).unwrap(), std::fs::read_to_string(&rotated).unwrap());
    assert_eq!(w.lines().count(), 40_000);
    assert!(w == r, "the rotated files' events differ from the whole capture's");
    // Any one file alone starts in the middle of the day: fewer events, and some of them of
    // orders it never saw added.
    let o = Command::new(BIN)
        .args(["export", "jsonl", "--feed", "itch50", "--date", DATE, &parts[1], "--out"])
        .arg(d.join("one.jsonl"))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(std::fs::read_to_string(d.join("one.jsonl")).unwrap().lines().count() < 40_000);
    let truth = d.join("truth.jsonl");
    let o = Command::new(BIN)
        .args(["export", "jsonl", "--feed", "itch50", &parts[0], truth.to_str().unwrap(), "--out"])
        .arg(d.join("x.jsonl"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("not a capture (pcap or pcapng) to read after the first"), "{e}");
    // Out of order (a later file first): refused where the second begins, with the way.
    let o = Command::new(BIN)
        .args(["export", "jsonl", "--feed", "itch50", &parts[2], &parts[0], "--out"])
        .arg(d.join("x.jsonl"))
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("hr-000.pcap") && e.contains("go in time order"), "{e}");
}

/// The key-value metadata of a Parquet file.
fn parquet_meta(path: &Path) -> BTreeMap<String, String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let kv = r.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    kv.into_iter().map(|k| (k.key, k.value.unwrap_or_default())).collect()
}

#[test]
fn nautilus_names_each_option_series_an_instrument() {
    let d = tempfile::tempdir().unwrap();
    let pcap = d.path().join("o.pcap");
    let out = d.path().join("cat");
    tp(&["sim", "opra", "--messages", "6000", "--series", "24", "--out", pcap.to_str().unwrap()]);
    let err =
        tp(&["export", "nautilus", "--feed", "opra-binary", pcap.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(err.contains("\"quote\""), "quotes are left out and counted: {err}");
    // DBN's symbology and the event catalog name each series too.
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let dbn_out = d.path().join("o.mbp1.dbn");
    tp(&["export", "dbn", "--schema", "mbp-1", "--feed", "opra-binary", &p(&pcap), "--out", &p(&dbn_out)]);
    let meta = dbn::decode::DbnDecoder::from_file(&dbn_out).unwrap().metadata().clone();
    let raw: std::collections::BTreeSet<String> = meta.mappings.iter().map(|m| m.raw_symbol.clone()).collect();
    let ids: std::collections::BTreeSet<String> = meta.mappings.iter().map(|m| m.intervals[0].symbol.clone()).collect();
    assert!(raw.len() >= 24 && ids.len() == raw.len(), "a mapping a series: {} symbols, {} ids", raw.len(), ids.len());
    assert!(raw.iter().all(|s| s.len() == 21), "{raw:?}");
    let events = d.path().join("events");
    tp(&["export", "parquet", "--feed", "opra-binary", &p(&pcap), "--out", &p(&events)]);
    let dirs = std::fs::read_dir(events.join("data/order_book_delta")).unwrap().count();
    assert_eq!(dirs, raw.len() + 1, "a directory a series, and instrument 0's");
    // Trade ticks only, a directory a series, each file's instrument its directory's.
    assert!(!out.join("data/order_book_delta").exists());
    let dirs: Vec<_> = std::fs::read_dir(out.join("data/trade_tick")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(dirs.len() > 8, "{} series traded", dirs.len());
    let mut ids = std::collections::HashSet::new();
    for dir in &dirs {
        let files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{}", dir.display());
        let m = parquet_meta(&files[0]);
        let id = &m["instrument_id"];
        // The OCC symbol: root padded to six, YYMMDD, C or P, the strike in thousandths.
        let (sym, venue) = id.rsplit_once('.').unwrap();
        assert_eq!(venue, "OPRA");
        assert_eq!(sym.len(), 21, "{id:?}");
        assert!(sym[12..13] == *"C" || sym[12..13] == *"P", "{id:?}");
        assert!(sym[6..12].bytes().chain(sym[13..].bytes()).all(|b| b.is_ascii_digit()), "{id:?}");
        assert_eq!(dir.file_name().unwrap().to_str().unwrap(), format!("{}.OPRA", sym.replace(' ', "_")));
        assert!(ids.insert(id.clone()), "{id} twice");
        assert_eq!(m["size_precision"], "0");
    }
}

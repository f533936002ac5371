//! End-to-end tests of `tickplant itch`, `sim itch`, `run` and `demo` on real files.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::words;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn tp(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).current_dir(dir).output().expect("runs")
}

fn ok(dir: &Path, args: &[&str]) -> (String, String) {
    let o = tp(dir, args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "tickplant {args:?} failed:\n{err}");
    (String::from_utf8_lossy(&o.stdout).to_string(), err)
}

/// `bytes` gzip-compressed, as NASDAQ ships its days.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The real sample, or None (with a note) outside a checkout that has ../shared.
fn ritch() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/itch/ritch/ex20101224.TEST_ITCH_50");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIP: {} is absent (an outside checkout has no ../shared)", p.display());
        None
    }
}

#[test]
fn real_sample_counts_match_its_readme() {
    let Some(s) = ritch() else { return };
    let d = tempfile::tempdir().unwrap();
    let s = s.to_str().unwrap();
    let (out, _) = ok(d.path(), &["itch", "stats", s, "--infer-length"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["messages"], 12_012);
    let want = [
        ("P", 5000),
        ("A", 4997),
        ("D", 1745),
        ("E", 198),
        ("X", 45),
        ("U", 12),
        ("S", 6),
        ("R", 3),
        ("H", 3),
        ("F", 3),
    ];
    for (t, n) in want {
        assert_eq!(v["by_type"][t], n, "type {t}");
    }
    assert_eq!(v["by_type"].as_object().unwrap().len(), want.len());
    // Without --infer-length the zero prefixes are told by the first message: the same.
    assert_eq!(ok(d.path(), &["itch", "stats", s]).0, out);
    // A file whose first prefix is true and whose later ones are not: a clear error naming
    // the file, the byte and the way out.
    let mut bytes = std::fs::read(s).unwrap();
    let len = u16::try_from(tickplant_wire::itch50::message_len(bytes[2]).unwrap()).unwrap();
    bytes[..2].copy_from_slice(&len.to_be_bytes());
    let second = 2 + usize::from(len);
    let bad = d.path().join("bad.itch");
    std::fs::write(&bad, &bytes).unwrap();
    for cmd in ["stats", "decode", "book"] {
        let o = tp(d.path(), &["itch", cmd, bad.to_str().unwrap()]);
        assert!(!o.status.success(), "{cmd}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("bad.itch") && err.contains(&format!("byte {second}")) && err.contains("--infer-length"),
            "{cmd}: {err}"
        );
    }
    // Decode: one JSON line per message, the specification's field names.
    let (out, _) = ok(d.path(), &["itch", "decode", s, "--infer-length", "--types", "A", "--limit", "2"]);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["type"], "A");
        for k in [
            "stock_locate",
            "tracking_number",
            "timestamp",
            "order_reference_number",
            "buy_sell_indicator",
            "shares",
            "stock",
            "price",
        ] {
            assert!(l.get(k).is_some(), "{k} missing in {l}");
        }
        assert!(l["price"].is_number());
    }
    let (out, _) = ok(d.path(), &["itch", "decode", s, "--infer-length", "--format", "csv", "-o", "all.csv"]);
    assert!(out.is_empty());
    assert_eq!(std::fs::read_to_string(d.path().join("all.csv")).unwrap().lines().count(), 12_013);
    ok(d.path(), &["itch", "decode", s, "--format", "csv", "-o", "told.csv"]);
    assert_eq!(std::fs::read(d.path().join("told.csv")).unwrap(), std::fs::read(d.path().join("all.csv")).unwrap());
    // The final books (the whole file mapped) alike, with and without the flag.
    let fin = ok(d.path(), &["itch", "book", s, "--final"]).0;
    assert_eq!(fin, ok(d.path(), &["itch", "book", s, "--final", "--infer-length"]).0);
    assert!(!fin.is_empty());
    // `decode` and `run` tell its zero prefixes by its first bytes: every message.
    assert_eq!(ok(d.path(), &["decode", "--feed", "itch50", s]).0.lines().count(), 12_012);
    std::fs::write(d.path().join("r.toml"), format!("[run]\nreport = \"r.json\"\n[source]\na = {s:?}\n")).unwrap();
    let (_, err) = ok(d.path(), &["run", "r.toml", "--quiet"]);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("r.json")).unwrap()).unwrap();
    assert_eq!((r["decoded"].as_u64(), r["undecodable"].as_u64()), (Some(12_012), Some(0)));
    // A BinaryFILE has no receive times to tell its day from: the run says so.
    assert!(r.get("date").is_none(), "{r}");
    assert!(err.contains("ts_event counts from 1970-01-01"), "{err}");
}

#[test]
fn simulated_day_books_equal_the_truth_from_file_and_capture() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for out in ["day.itch", "day.itch.gz", "day.pcap"] {
        ok(
            p,
            &[
                "sim",
                "itch",
                "--seed",
                "5",
                "--symbols",
                "30",
                "--messages",
                "60000",
                "--out",
                out,
                "--truth",
                "final.jsonl",
            ],
        );
        let (stats, _) = ok(p, &["itch", "stats", out]);
        let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(v["messages"], 60_000, "{out}");
        let (books, _) = ok(p, &["itch", "book", out, "--final", "--depth", "1000000"]);
        let truth = std::fs::read_to_string(p.join("final.jsonl")).unwrap();
        let parse =
            |s: &str| s.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>();
        assert_eq!(parse(&books), parse(&truth), "{out}");
    }
    // A capture that carries every packet twice (both lines, or duplicates): each sequence
    // number applied once, the same books, and said; a capture missing a packet: said.
    let raw = std::fs::read(p.join("day.pcap")).unwrap();
    let (mut twice, mut less, mut pos, mut n) = (raw[..24].to_vec(), raw[..24].to_vec(), 24, 0);
    while pos < raw.len() {
        let incl = u32::from_le_bytes(raw[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let rec = &raw[pos..pos + 16 + incl];
        twice.extend_from_slice(rec);
        twice.extend_from_slice(rec);
        n += 1;
        if n != 100 {
            less.extend_from_slice(rec);
        }
        pos += 16 + incl;
    }
    std::fs::write(p.join("twice.pcap"), twice).unwrap();
    std::fs::write(p.join("less.pcap"), less).unwrap();
    let (books, err) = ok(p, &["itch", "book", "twice.pcap", "--final", "--depth", "1000000"]);
    assert_eq!(books, ok(p, &["itch", "book", "day.pcap", "--final", "--depth", "1000000"]).0);
    assert!(err.contains("60000 messages came again"), "{err}");
    let (_, err) = ok(p, &["itch", "book", "less.pcap", "--final"]);
    assert!(err.contains("warning") && err.contains("sequence numbers were passed over"), "{err}");
    // Symbol and depth filters.
    let (books, _) = ok(p, &["itch", "book", "day.itch", "--final", "--depth", "2", "--symbols", "AAAB"]);
    let v: Vec<serde_json::Value> = books.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["symbol"], "AAAB");
    assert!(v[0]["bids"].as_array().unwrap().len() <= 2);
}

#[test]
fn run_delivers_exactly_each_subscription() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "itch", "--seed", "9", "--symbols", "20", "--messages", "50000", "--out", "feed.pcap"]);
    ok(
        p,
        &words("sim impair --in feed.pcap --seed 9 --loss-a 0.02 --loss-b 0.02 --reorder 0.01 --skew-us 0..10 --out-a a.pcap --out-b b.pcap"),
    );
    std::fs::write(
        p.join("run.toml"),
        r#"
[source]
a = "a.pcap"
b = "b.pcap"
date = "2026-11-20"
[arbitration]
protocol = "moldudp64"
timeout-us = 50
start-seq = 1
[run]
report = "report.json"
[[consumer]]
name = "aaab-adds"
action = "jsonl"
path = "adds.jsonl"
symbols = ["AAAB"]
actions = ["add"]
policy = "backpressure"
[[consumer]]
name = "trades"
action = "csv"
path = "trades.csv"
types = ["P", "Q"]
policy = "backpressure"
[[consumer]]
name = "count"
"#,
    )
    .unwrap();
    let (_, err) = ok(p, &["run", "run.toml", "--quiet"]);
    assert!(err.contains("accounting: balanced"), "{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("report.json")).unwrap()).unwrap();
    // Reference: decode the arbitrated stream independently from the original feed, minus the gaps.
    let (all, _) = ok(p, &["itch", "decode", "feed.pcap"]);
    let all: Vec<serde_json::Value> = all.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let gaps: Vec<(u64, u64)> = r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["first_seq"].as_u64().unwrap(), g["last_seq"].as_u64().unwrap()))
        .collect();
    let kept = |i: usize| !gaps.iter().any(|&(a, b)| (a..=b).contains(&(i as u64 + 1)));
    let locate_aaab = all.iter().find(|m| m["type"] == "R" && m["stock"] == "AAAB").unwrap()["stock_locate"].clone();
    let want_adds = all
        .iter()
        .enumerate()
        .filter(|(i, m)| kept(*i) && (m["type"] == "A" || m["type"] == "F") && m["stock_locate"] == locate_aaab)
        .count();
    let want_trades =
        all.iter().enumerate().filter(|(i, m)| kept(*i) && (m["type"] == "P" || m["type"] == "Q")).count();
    // Every consumer also gets a gap record for each HR gap, in place among its records.
    let want_gaps: Vec<(u64, u64, u64, String)> = r["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let n = |k: &str| g[k].as_u64().unwrap();
            (n("first_seq"), n("last_seq"), n("messages"), g["reason"].as_str().unwrap().to_string())
        })
        .collect();
    assert!(!want_gaps.is_empty());
    let adds = std::fs::read_to_string(p.join("adds.jsonl")).unwrap();
    let (gap_lines, adds): (Vec<&str>, Vec<&str>) = adds.lines().partition(|l| l.contains("\"action\":\"gap\""));
    assert_eq!(adds.len(), want_adds);
    for l in adds {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["action"], "add");
        assert_eq!(v["instrument_id"], locate_aaab);
    }
    let got_gaps: Vec<(u64, u64, u64, String)> = gap_lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let n = |k: &str| v[k].as_u64().unwrap();
            (n("first_seq"), n("last_seq"), n("messages"), v["reason"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(got_gaps, want_gaps);
    let trades = std::fs::read_to_string(p.join("trades.csv")).unwrap();
    let (gap_rows, trades): (Vec<&str>, Vec<&str>) = trades.lines().partition(|l| l.split(',').nth(4) == Some("gap"));
    assert_eq!(trades.len(), want_trades + 1);
    assert_eq!(gap_rows.len(), want_gaps.len());
    for (row, g) in gap_rows.iter().zip(&want_gaps) {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!((f[2], f[7], f[8], f[11]), (&*g.0.to_string(), &*g.2.to_string(), &*g.1.to_string(), &*g.3));
    }
    let c = &r["consumers"];
    assert_eq!(c[2]["received"], r["decoded"]);
    assert_eq!(r["decoded"].as_u64().unwrap() as usize, all.iter().enumerate().filter(|(i, _)| kept(*i)).count());
}

#[test]
fn demo_runs_small_and_checks_itself() {
    let d = tempfile::tempdir().unwrap();
    let (out, _) = ok(d.path(), &["demo", "--messages", "150000", "--symbols", "40", "--quiet", "--dir", "w"]);
    assert!(out.contains("demo: verified"), "{out}");
    assert!(d.path().join("w/books.jsonl").exists() && d.path().join("w/bbo.jsonl").exists());
    // The matching consumer found matches and wrote them.
    assert!(std::fs::metadata(d.path().join("w/matches.jsonl")).unwrap().len() > 0);
}

#[test]
fn bad_config_says_what_and_where() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("bad.toml"),
        "[source]\na = \"x.pcap\"\n[[consumer]]\nname = \"c\"\naction = \"print\"\n",
    )
    .unwrap();
    let o = tp(d.path(), &["run", "bad.toml"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("\"print\"") && err.contains("count, csv, jsonl, bbo"), "{err}");
    assert!(err.contains("\"print\"") && err.contains("bbo, match"), "{err}");
    // A matching consumer: its strategies file is required, parsed and type-checked at load.
    let matching = |extra: &str| {
        std::fs::write(
            d.path().join("m.toml"),
            format!("[source]\na = \"x.pcap\"\n[[consumer]]\nname = \"s\"\naction = \"match\"\n{extra}"),
        )
        .unwrap();
        String::from_utf8_lossy(&tp(d.path(), &["run", "m.toml"]).stderr).to_string()
    };
    let err = matching("");
    assert!(err.contains("consumer \"s\": action \"match\" needs `strategies`"), "{err}");
    std::fs::write(d.path().join("s.txt"), "1: spread < 0.01\n2: bid = \"x\"\n").unwrap();
    let err = matching("strategies = \"s.txt\"\n");
    assert!(err.contains("the strategies use bid as a string, but market events give it as a number"), "{err}");
    std::fs::write(d.path().join("s.txt"), "1: spread < 0.01\n2: bid <\n").unwrap();
    let err = matching("strategies = \"s.txt\"\n");
    assert!(err.contains("s.txt: line 2, column"), "{err}");
    let err = matching("strategies = \"none.txt\"\n");
    assert!(err.contains("none.txt: cannot read the strategies"), "{err}");
    // A trading consumer: its triggers file and its exchange are required and checked.
    let trading = |extra: &str| {
        std::fs::write(
            d.path().join("t.toml"),
            format!("[source]\na = \"x.pcap\"\n[[consumer]]\nname = \"t\"\naction = \"trade\"\n{extra}"),
        )
        .unwrap();
        String::from_utf8_lossy(&tp(d.path(), &["run", "t.toml"]).stderr).to_string()
    };
    let err = trading("exchange = \"127.0.0.1:9\"\n");
    assert!(err.contains("consumer \"t\": action \"trade\" needs `triggers`"), "{err}");
    std::fs::write(d.path().join("tr.txt"), "1: action = \"add\" => hold 5\n").unwrap();
    let err = trading("triggers = \"tr.txt\"\n");
    assert!(err.contains("needs `exchange`"), "{err}");
    let err = trading("triggers = \"tr.txt\"\nexchange = \"nowhere\"\n");
    assert!(err.contains("\"nowhere\" is not host:port"), "{err}");
    let err = trading("triggers = \"tr.txt\"\nexchange = \"127.0.0.1:9\"\n");
    assert!(err.contains("tr.txt: line 1") && err.contains("buy QTY"), "{err}");
    // The OPRA FAST decoder: its templates are required, read, compiled and checked.
    let opra = |extra: &str| {
        std::fs::write(d.path().join("o.toml"), format!("[source]\na = \"x.pcap\"\ndecoder = \"opra-fast\"\n{extra}"))
            .unwrap();
        String::from_utf8_lossy(&tp(d.path(), &["run", "o.toml"]).stderr).to_string()
    };
    let err = opra("");
    assert!(err.contains("decoder \"opra-fast\" needs `templates`"), "{err}");
    let err = opra("templates = \"none.xml\"\n");
    assert!(err.contains("none.xml: cannot read"), "{err}");
    std::fs::write(
        d.path().join("t.xml"),
        "<templates><template name=\"T\" id=\"1\"><uInt32 name=\"X\"/></template></templates>",
    )
    .unwrap();
    let err = opra("templates = \"t.xml\"\n");
    assert!(err.contains("t.xml") && err.contains("no MESSAGE_CATEGORY"), "{err}");
    std::fs::write(
        d.path().join("bad.xml"),
        "<templates><template name=\"T\"><uInt33 name=\"X\"/></template></templates>",
    )
    .unwrap();
    let err = opra("templates = \"bad.xml\"\n");
    assert!(err.contains("bad.xml") && err.contains("uInt33"), "{err}");
    std::fs::write(
        d.path().join("o.xml"),
        "<templates><template name=\"O\"><uInt32 name=\"MESSAGE_CATEGORY\"/></template></templates>",
    )
    .unwrap();
    let err = opra("templates = \"o.xml\"\nreset = \"sometimes\"\n");
    assert!(err.contains("reset \"sometimes\": expected \"block\" or \"never\""), "{err}");
    let err = opra("templates = \"o.xml\"\n[[consumer]]\nname = \"c\"\ntypes = [\"kk\"]\n");
    assert!(err.contains("\"kk\" is not an OPRA message category"), "{err}");
    std::fs::write(d.path().join("i.toml"), "[source]\na = \"x.pcap\"\ndecoder = \"itch51\"\n").unwrap();
    let err = String::from_utf8_lossy(&tp(d.path(), &["run", "i.toml"]).stderr).to_string();
    assert!(
        err.contains(
            "decoder \"itch51\": expected \"itch50\", \"nyse-xdp\", \"nyse-pillar\", \"opra-fast\" or \"opra-binary\""
        ),
        "{err}"
    );
    std::fs::write(d.path().join("typo.toml"), "[source]\na = \"x.pcap\"\nbogus = 1\n").unwrap();
    let err = String::from_utf8_lossy(&tp(d.path(), &["run", "typo.toml"]).stderr).to_string();
    assert!(err.contains("typo.toml") && err.contains("bogus"), "{err}");
}

#[test]
fn feed_handler_doc_examples_run() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/feed-handler.md")).unwrap();
    let tools = doc.split("## ITCH tools").nth(1).expect("the ITCH tools section");
    let block = tools.split("```sh\n").nth(1).expect("the ITCH tools example").split("```").next().unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut n = 0;
    for line in block.lines().filter(|l| l.starts_with("tickplant ")) {
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        ok(d.path(), &args);
        n += 1;
    }
    assert_eq!(n, 6);
    assert!(d.path().join("aaab.csv").exists() && d.path().join("final.jsonl").exists());
    // The example config the demo runs parses and names every consumer action.
    let ex = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo.toml")).unwrap();
    assert!(ex.contains("[[consumer]]") && ex.contains("action = \"bbo\""));
}

#[test]
fn opra_fast_doc_example_runs_and_matches_the_truth() {
    let commands = common::doc_commands("docs/feed-handler.md", "## OPRA FAST");
    let d = tempfile::tempdir().unwrap();
    for f in ["opra-fast.toml", "opra-fast.xml"] {
        std::fs::copy(common::root().join("examples").join(f), d.path().join(f)).unwrap();
    }
    for args in &commands {
        ok(d.path(), &args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    assert_eq!(commands.len(), 3);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("opra-report.json")).unwrap()).unwrap();
    assert_eq!(report["feed"], "opra-fast");
    assert_eq!(report["undecodable"], 0);
    let lost: std::collections::HashSet<u64> = report["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["first_seq"].as_u64().unwrap()..=g["last_seq"].as_u64().unwrap())
        .collect();
    // The two-roots consumer's file is the truth's quotes and trades of AAA and AAB, less
    // the gaps, field for field.
    let truth = std::fs::read_to_string(d.path().join("opra-truth.jsonl")).unwrap();
    let want: Vec<serde_json::Value> = truth
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| (v["symbol"] == "AAA" || v["symbol"] == "AAB") && !lost.contains(&v["sequence"].as_u64().unwrap()))
        .collect();
    let got = std::fs::read_to_string(d.path().join("opra-events.jsonl")).unwrap();
    let got: Vec<serde_json::Value> = got.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // A gap record for each of the report's gaps, in place; then the events.
    let (gaps, got): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
        got.into_iter().partition(|v| v["action"] == "gap");
    let firsts = |v: &[serde_json::Value]| v.iter().map(|g| g["first_seq"].as_u64().unwrap()).collect::<Vec<_>>();
    assert_eq!(firsts(&gaps), firsts(report["gaps"].as_array().unwrap()));
    assert!(want.len() > 500, "{}", want.len());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        for (gk, wk) in [("sequence", "sequence"), ("action", "action"), ("side", "side"), ("size", "size")] {
            assert_eq!(g[gk], w[wk], "{g} vs {w}");
        }
        assert_eq!(g["price"].to_string(), w["price"].to_string(), "{g} vs {w}");
        assert_eq!(g["msg_type"], w["category"]);
    }
    // Every series with a quote has its latest quote in the BBO file.
    let bbo = std::fs::read_to_string(d.path().join("opra-bbo.jsonl")).unwrap();
    assert!(bbo.lines().count() > 300);
    assert!(bbo.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
}

/// `[arbitration]` of a run config means what the same keys mean to `tickplant arb`:
/// `change-at` switches the policy at the same replay time, `gaps` writes the same HR
/// gaps, `hr-out`, `ll-out` and `other-out` the same captures (`rotate` splits them); the
/// keys that have no meaning in a run are refused by name, with the file.
#[test]
fn run_config_arbitration_keys_mean_what_arb_means() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "itch", "--seed", "4", "--symbols", "10", "--messages", "30000", "--out", "feed.pcap"]);
    ok(
        p,
        &words("sim impair --in feed.pcap --seed 4 --loss-a 0.02 --loss-b 0.02 --reorder 0.02 --skew-us 0..10 --out-a a.pcap --out-b b.pcap"),
    );
    let config = |extra: &str| {
        format!(
            "[source]\na = \"a.pcap\"\nb = \"b.pcap\"\n[arbitration]\nprotocol = \"moldudp64\"\nmode = \"time\"\n\
             timeout-us = 1000\nstart-seq = 1\n{extra}\n[[consumer]]\nname = \"count\"\n"
        )
    };
    // Without a change: the time window recovers every reordered packet. A consumer of the
    // LL stream gets a gap record for each LL gap `arb` reports, in order.
    let ll_consumer = "\n[[consumer]]\nname = \"ll\"\naction = \"jsonl\"\npath = \"ll.jsonl\"\nstream = \"ll\"\n";
    std::fs::write(p.join("plain.toml"), config("gaps = \"plain_gaps.csv\"") + ll_consumer).unwrap();
    ok(p, &["run", "plain.toml", "--quiet"]);
    let plain = std::fs::read_to_string(p.join("plain_gaps.csv")).unwrap();
    assert!(plain.starts_with("output,first_seq,last_seq,messages,reason\n"));
    assert!(!plain.contains(",skipped"), "{plain}");
    ok(p, &words("arb --a a.pcap --b b.pcap --start-seq 1 --timeout-us 1000 --gaps arb_plain.csv"));
    let arb_ll: Vec<String> = std::fs::read_to_string(p.join("arb_plain.csv"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("ll,"))
        .map(|l| l.split(',').skip(1).take(3).collect::<Vec<_>>().join(","))
        .collect();
    let run_ll: Vec<String> = std::fs::read_to_string(p.join("ll.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["action"] == "gap")
        .map(|v| format!("{},{},{}", v["first_seq"], v["last_seq"], v["messages"]))
        .collect();
    assert!(!arb_ll.is_empty());
    assert_eq!(run_ll, arb_ll);
    // Switched to low latency after a microsecond: holes are skipped, as `arb` skips them.
    std::fs::write(p.join("change.toml"), config("gaps = \"run_gaps.csv\"\nchange-at = [\"0.000001:low-latency\"]"))
        .unwrap();
    ok(p, &["run", "change.toml", "--quiet"]);
    ok(
        p,
        &words("arb --a a.pcap --b b.pcap --start-seq 1 --timeout-us 1000 --change-at 0.000001:low-latency --gaps arb_gaps.csv --quiet"),
    );
    let run_gaps = std::fs::read_to_string(p.join("run_gaps.csv")).unwrap();
    let arb_hr: String = std::fs::read_to_string(p.join("arb_gaps.csv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("ll,"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(run_gaps.contains(",skipped"), "{run_gaps}");
    assert_eq!(run_gaps, arb_hr);

    // The streams written by a run are arb's, byte for byte; rotated, the same frames in
    // files of at most the size.
    std::fs::write(
        p.join("outs.toml"),
        config("hr-out = \"run_hr.pcap\"\nll-out = \"run_ll.pcap\"\nother-out = \"run_other.pcap\""),
    )
    .unwrap();
    ok(p, &["run", "outs.toml", "--quiet"]);
    ok(p, &words("arb --a a.pcap --b b.pcap --start-seq 1 --timeout-us 1000 --hr-out arb_hr.pcap --ll-out arb_ll.pcap --other-out arb_other.pcap -q"));
    for s in ["hr", "ll", "other"] {
        let (run, arb) = (p.join(format!("run_{s}.pcap")), p.join(format!("arb_{s}.pcap")));
        assert_eq!(std::fs::read(run).unwrap(), std::fs::read(arb).unwrap(), "{s}");
    }
    std::fs::write(p.join("rot.toml"), config("hr-out = \"rot.pcap\"\nrotate = \"64KB\"")).unwrap();
    ok(p, &["run", "rot.toml", "--quiet"]);
    let mut frames = Vec::new();
    for k in 0.. {
        let f = p.join(format!("rot-{k:03}.pcap"));
        if !f.exists() {
            assert!(k > 2, "{k} files");
            break;
        }
        assert!(std::fs::metadata(&f).unwrap().len() <= 24 + 65536, "{}", f.display());
        let mut r = tickplant_io::FrameReader::open(&f).unwrap();
        while let Some(fr) = r.next_frame().unwrap() {
            frames.push((fr.ts_ns, fr.data.to_vec()));
        }
    }
    let mut whole = Vec::new();
    let mut r = tickplant_io::FrameReader::open(p.join("arb_hr.pcap")).unwrap();
    while let Some(fr) = r.next_frame().unwrap() {
        whole.push((fr.ts_ns, fr.data.to_vec()));
    }
    assert_eq!(frames, whole, "the rotated files hold the HR stream");

    for (key, value) in [
        ("stats", "\"stats.json\""),
        ("no-hr", "true"),
        ("no-ll", "true"),
        ("quiet", "true"),
        ("duration", "5"),
        ("a", "\"a.pcap\""),
    ] {
        std::fs::write(p.join("bad.toml"), config(&format!("{key} = {value}"))).unwrap();
        let o = tp(p, &["run", "bad.toml", "--quiet"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{key} was taken");
        assert!(err.contains("bad.toml") && err.contains(&format!("[arbitration] {key}")), "{key}: {err}");
    }
    std::fs::write(p.join("bad.toml"), config("bogus = 1")).unwrap();
    let o = tp(p, &["run", "bad.toml", "--quiet"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("bad.toml") && err.contains("bogus"), "{err}");
}

/// `itch book --final` walks a file whole (the benchmark's loop): a damaged file still
/// fails with the file and the byte offset, whichever way the damage shows.
#[test]
fn final_books_of_a_damaged_file_say_where() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "itch", "--seed", "3", "--symbols", "5", "--messages", "2000", "--out", "day.itch"]);
    let day = std::fs::read(p.join("day.itch")).unwrap();
    // A length prefix running past the end of the file.
    let mut cut = day.clone();
    let n = cut.len();
    cut.truncate(n - 3);
    std::fs::write(p.join("cut.itch"), &cut).unwrap();
    let o = tp(p, &["itch", "book", "cut.itch", "--final"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("cut.itch") && err.contains("byte"), "{err}");
    // A message whose length disagrees with its type: the second message made a 'Z'.
    let first = usize::from(u16::from_be_bytes([day[0], day[1]]));
    let mut bad = day.clone();
    bad[2 + first + 2] = b'Z';
    std::fs::write(p.join("bad.itch"), &bad).unwrap();
    let o = tp(p, &["itch", "book", "bad.itch", "--final"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("bad.itch") && err.contains(&format!("byte {}", 2 + first + 2)), "{err}");
}

/// `decode --feed itch50` reads NASDAQ's own form of a day too: a BinaryFILE, plain or
/// gzip, whatever its name. Its messages are the capture's, field for field, with no frame
/// or packet; a file cut inside a message is an error that says where.
#[test]
fn decode_reads_a_binary_file_plain_or_gzip_as_the_capture() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let day = ["sim", "itch", "--seed", "4", "--symbols", "5", "--messages", "3000", "--out"];
    ok(p, &[&day[..], &["day.itch"]].concat());
    ok(p, &[&day[..], &["day.pcap"]].concat());
    ok(p, &[&day[..], &["day.pcapng"]].concat());
    let bytes = std::fs::read(p.join("day.itch")).unwrap();
    // NASDAQ's names: no .itch, and .gz.
    std::fs::write(p.join("01302019.NASDAQ_ITCH50.gz"), gzip(&bytes)).unwrap();
    std::fs::write(p.join("01302019.NASDAQ_ITCH50"), &bytes).unwrap();
    let messages = |file: &str| -> Vec<serde_json::Value> {
        let (out, _) = ok(p, &["decode", "--feed", "itch50", file]);
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let capture = messages("day.pcap");
    assert_eq!(capture.len(), 3000);
    for file in ["day.itch", "01302019.NASDAQ_ITCH50", "01302019.NASDAQ_ITCH50.gz"] {
        let got = messages(file);
        assert_eq!(got.len(), capture.len(), "{file}");
        for (i, (g, c)) in got.iter().zip(&capture).enumerate() {
            assert_eq!((&g["type"], &g["message"], &g["fields"]), (&c["type"], &c["message"], &c["fields"]), "{file}");
            assert_eq!(
                (&g["frame"], &g["packet"], g["sequence"].as_u64()),
                (&serde_json::Value::Null, &serde_json::Value::Null, Some(i as u64 + 1))
            );
        }
    }
    let (csv, _) =
        ok(p, &["decode", "--feed", "itch50", "--types", "A", "--limit", "1", "--format", "csv", "day.itch"]);
    assert!(csv.starts_with("frame,sequence,type,message,field,value\n,"), "{csv}");
    // A compressed capture (gzip, zstd) is read as the capture it holds, not taken for a
    // BinaryFILE, by every reader; one named as a BinaryFILE is refused with the way out.
    let raw = std::fs::read(p.join("day.pcap")).unwrap();
    std::fs::write(p.join("day.pcap.gz"), gzip(&raw)).unwrap();
    std::fs::write(p.join("day.pcap.zst"), zstd::encode_all(&raw[..], 3).unwrap()).unwrap();
    let ng = std::fs::read(p.join("day.pcapng")).unwrap();
    std::fs::write(p.join("day.pcapng.gz"), gzip(&ng)).unwrap();
    std::fs::write(p.join("day.pcapng.zst"), zstd::encode_all(&ng[..], 3).unwrap()).unwrap();
    let plain = ok(p, &["decode", "--feed", "itch50", "day.pcap"]).0;
    let itch = ok(p, &["itch", "decode", "day.pcap"]).0;
    for file in ["day.pcap.gz", "day.pcap.zst", "day.pcapng.gz", "day.pcapng.zst"] {
        assert_eq!(ok(p, &["decode", "--feed", "itch50", file]).0, plain, "{file}");
        assert_eq!(ok(p, &["itch", "decode", file]).0, itch, "{file}");
        std::fs::write(p.join("c.toml"), format!("[source]\na = \"{file}\"\n[run]\nreport = \"r.json\"\n")).unwrap();
        ok(p, &["run", "c.toml", "--quiet"]);
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("r.json")).unwrap()).unwrap();
        assert_eq!(r["decoded"], 3000, "{file}");
    }
    std::fs::copy(p.join("day.pcap.gz"), p.join("day.gz")).unwrap();
    let o = tp(p, &["itch", "decode", "day.gz"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("day.gz") && err.contains(".pcap.gz"), "{err}");
    std::fs::write(p.join("cut.itch"), &bytes[..bytes.len() - 3]).unwrap();
    let o = tp(p, &["decode", "--feed", "itch50", "cut.itch"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("cut.itch") && err.contains("ends inside message 3000"), "{err}");
}

/// `run` takes NASDAQ's own form of a day as its one line: a BinaryFILE, plain or gzip,
/// read as MoldUDP64 packets. Its final books equal the day's truth; every message is
/// decoded; a second line, another decoder or a file cut short is an error that says so.
#[test]
fn run_reads_a_binary_file_as_one_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 8 --symbols 20 --messages 20000 --out day.itch --truth truth.jsonl"));
    let bytes = std::fs::read(p.join("day.itch")).unwrap();
    std::fs::write(p.join("01302019.NASDAQ_ITCH50.gz"), gzip(&bytes)).unwrap();
    let parse = |s: &str| s.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>();
    let truth = parse(&std::fs::read_to_string(p.join("truth.jsonl")).unwrap());
    for file in ["day.itch", "01302019.NASDAQ_ITCH50.gz"] {
        let cfg = format!(
            "[run]\nreport = \"report.json\"\n[source]\na = \"{file}\"\n\
             [book]\nfinal-books = \"books.jsonl\"\ndepth = 1000000\n[[consumer]]\nname = \"all\"\n"
        );
        std::fs::write(p.join("f.toml"), cfg).unwrap();
        ok(p, &["run", "f.toml", "--quiet"]);
        let books = parse(&std::fs::read_to_string(p.join("books.jsonl")).unwrap());
        assert_eq!(books, truth, "{file}");
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("report.json")).unwrap()).unwrap();
        assert_eq!((r["decoded"].as_u64(), r["undecodable"].as_u64()), (Some(20_000), Some(0)), "{file}");
        assert_eq!(
            (r["gaps"].as_array().map(Vec::len), r["consumers"][0]["received"].as_u64()),
            (Some(0), Some(20_000)),
            "{file}"
        );
    }
    // hr-out writes the day as a MoldUDP64 capture: the same messages as the file.
    std::fs::write(p.join("conv.toml"), "[source]\na = \"day.itch\"\n[arbitration]\nhr-out = \"day-hr.pcap\"\n")
        .unwrap();
    ok(p, &["run", "conv.toml", "--quiet"]);
    assert_eq!(ok(p, &["itch", "decode", "day-hr.pcap"]).0, ok(p, &["itch", "decode", "day.itch"]).0);
    let fails = |cfg: &str, says: &str| {
        std::fs::write(p.join("bad.toml"), cfg).unwrap();
        let o = tp(p, &["run", "bad.toml", "--quiet"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{cfg}: {err}");
    };
    fails("[source]\na = \"day.itch\"\nb = \"day.itch\"\n", "is one line");
    fails("[source]\na = \"day.itch\"\ndecoder = \"nyse-xdp\"\n", "decoder = \"itch50\"");
    fails("[source]\na = \"day.itch\"\n[arbitration]\nprotocol = \"xdp\"\n", "(protocol moldudp64), not xdp");
    std::fs::write(p.join("cut.itch"), &bytes[..bytes.len() - 3]).unwrap();
    fails("[source]\na = \"cut.itch\"\n", "ends inside message 20000");
}

/// `replay` sends a BinaryFILE as MoldUDP64 datagrams, as NASDAQ would have: every message
/// of the file once, in order, the packets numbered without a hole.
#[test]
fn replay_sends_a_binary_file_as_moldudp64() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 5 --symbols 5 --messages 3000 --out day.itch"));
    let file = std::fs::read(p.join("day.itch")).unwrap();
    let mut want = Vec::new();
    let mut at = 0;
    while at < file.len() {
        let n = usize::from(u16::from_be_bytes([file[at], file[at + 1]]));
        want.push(file[at + 2..at + 2 + n].to_vec());
        at += 2 + n;
    }
    // About 70 datagrams of up to 1,400 bytes: the socket's buffer holds them all.
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = format!("day.itch=127.0.0.1:{}", sock.local_addr().unwrap().port());
    ok(p, &["replay", "-q", "--pps", "20000", &target]);
    sock.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
    let (mut got, mut buf) = (Vec::new(), [0u8; 2048]);
    while let Ok(n) = sock.recv(&mut buf) {
        let d = &buf[..n];
        assert_eq!(&d[..10], b"BINARYFILE");
        let seq = u64::from_be_bytes(d[10..18].try_into().unwrap());
        assert_eq!(seq, got.len() as u64 + 1, "no hole, no repeat");
        let (count, mut at) = (u16::from_be_bytes([d[18], d[19]]), 20);
        for _ in 0..count {
            let len = usize::from(u16::from_be_bytes([d[at], d[at + 1]]));
            got.push(d[at + 2..at + 2 + len].to_vec());
            at += 2 + len;
        }
        assert_eq!(at, n);
    }
    assert_eq!(got.len(), 3000);
    assert!(got == want, "the file's messages, in order");
}

/// Captures with the Linux cooked headers, as `tcpdump -i any` writes them (SLL, and SLL2
/// since libpcap 1.10), and Ethernet frames with two VLAN tags (QinQ, as a tap aggregator
/// writes them): the same messages as the Ethernet capture, and `run` on them ends with
/// the day's books.
#[test]
fn cooked_captures_read_as_ethernet_ones() {
    use tickplant_core::LinkType;
    use tickplant_io::{Format, FrameReader, FrameWriter};
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 9 --symbols 10 --messages 5000 --out day.pcap --truth truth.jsonl"));
    for (link, file) in
        [(LinkType::LinuxSll, "sll.pcap"), (LinkType::LinuxSll2, "sll2.pcapng"), (LinkType::Ethernet, "qinq.pcap")]
    {
        let mut r = FrameReader::open(p.join("day.pcap")).unwrap();
        let format = if file.ends_with("ng") { Format::PcapNg } else { Format::PcapNs };
        let mut w = FrameWriter::create(p.join(file), link, format).unwrap();
        while let Some(f) = r.next_frame().unwrap() {
            // The Ethernet header (14 bytes, IPv4) made a cooked one.
            let mut cooked = match link {
                LinkType::LinuxSll => [&[0, 0, 0, 1, 0, 6][..], &f.data[6..12], &[0, 0, 0x08, 0x00]].concat(),
                LinkType::LinuxSll2 => {
                    [&[0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6][..], &f.data[6..12], &[0, 0]].concat()
                }
                // An 802.1ad service tag (VLAN 10), then an 802.1Q one (VLAN 100).
                _ => [&f.data[..12], &[0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00]].concat(),
            };
            cooked.extend_from_slice(&f.data[14..]);
            w.write(f.ts_ns, &cooked).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(ok(p, &["itch", "decode", file]).0, ok(p, &["itch", "decode", "day.pcap"]).0, "{file}");
        assert_eq!(ok(p, &["decode", "--feed", "itch50", file]).0.lines().count(), 5000, "{file}: decode takes it too");
        let cfg = format!("[source]\na = \"{file}\"\n[book]\nfinal-books = \"books.jsonl\"\ndepth = 1000000\n");
        std::fs::write(p.join("c.toml"), cfg).unwrap();
        ok(p, &["run", "c.toml", "--quiet"]);
        assert_eq!(
            std::fs::read_to_string(p.join("books.jsonl")).unwrap(),
            std::fs::read_to_string(p.join("truth.jsonl")).unwrap(),
            "{file}"
        );
    }
}

/// A capture whose snapshot length cut frames short (`tcpdump -s 120`): every reader says
/// so, by count, rather than calling them "not UDP" or "other" and nothing more, and what
/// those frames carried is missing (gaps), never made up.
#[test]
fn frames_a_capture_cut_short_are_said_to_be() {
    use tickplant_core::LinkType;
    use tickplant_io::{Format, FrameReader, FrameWriter};
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 5 --symbols 5 --messages 3000 --out day.pcap"));
    let mut cut = 0u64;
    for (file, format) in [("snap.pcap", Format::PcapNs), ("snap.pcapng", Format::PcapNg)] {
        let mut r = FrameReader::open(p.join("day.pcap")).unwrap();
        let mut w = FrameWriter::create(p.join(file), LinkType::Ethernet, format).unwrap();
        cut = 0;
        let mut n = 0u64;
        while let Some(f) = r.next_frame().unwrap() {
            n += 1;
            // Every fourth frame kept to 80 bytes, as a snapshot length would.
            let keep = if n.is_multiple_of(4) && f.data.len() > 80 { 80 } else { f.data.len() };
            cut += u64::from(keep < f.data.len());
            w.write_with_orig(f.ts_ns, &f.data[..keep], f.data.len() as u32).unwrap();
        }
        w.finish().unwrap();
    }
    assert!(cut > 100);
    let says = format!("{cut} frames were cut short by the capture (at most 80 bytes kept");
    for file in ["snap.pcap", "snap.pcapng"] {
        let (out, err) = ok(p, &["itch", "stats", file]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["cut_short_frames"], cut, "{file}");
        assert!(err.contains(&says), "{file}: {err}");
        let (_, err) = ok(p, &["decode", "--feed", "itch50", file]);
        assert!(err.contains(&says) && !err.contains("not UDP"), "{file}: {err}");
        let (_, err) = ok(p, &["export", "jsonl", "--feed", "itch50", file, "--out", "x.jsonl", "--quiet"]);
        assert!(err.contains(&says), "{file}: {err}");
        let (stats, err) = ok(p, &["arb", "--a", file, "--stats", "-", "--quiet"]);
        let v: serde_json::Value = serde_json::from_str(&stats).unwrap();
        assert_eq!(v["cut_short"][file]["frames"], cut, "{file}: {err}");
        std::fs::write(p.join("c.toml"), format!("[source]\na = \"{file}\"\n[run]\nreport = \"r.json\"\n")).unwrap();
        let (_, err) = ok(p, &["run", "c.toml"]);
        assert!(err.contains(&says), "{file}: {err}");
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("r.json")).unwrap()).unwrap();
        assert_eq!(r["cut_short"][file]["kept_max"], 80, "{file}");
        // What the cut frames carried is missing: reported as gaps, not decoded.
        assert!(r["gaps"].as_array().is_some_and(|g| !g.is_empty()), "{file}");
        let (rep, err) = ok(p, &["replay", "--max", "-q", &format!("{file}=127.0.0.1:9"), "--report", "-"]);
        let v: serde_json::Value = serde_json::from_str(&rep).unwrap();
        assert_eq!((v["skipped_cut_short"].as_u64(), v["skipped_not_udp"].as_u64()), (Some(cut), Some(0)), "{file}");
        assert!(err.contains("cut short by the capture"), "{file}: {err}");
    }
    // A whole capture says nothing of the kind.
    let (_, err) = ok(p, &["itch", "stats", "day.pcap"]);
    assert!(!err.contains("cut short"), "{err}");
}

/// Two feeds in one run (`[[feed]]`): each arbitrates its own A/B pair, keeps its own
/// books and serves its own consumers; each feed's final books equal its own day's truth
/// (B clean, A lossy: HR recovers everything), and the report holds both.
#[test]
fn two_feeds_in_one_run_each_equal_their_truth() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for (k, seed) in [(1, 21), (2, 22)] {
        ok(
            p,
            &words(&format!(
                "sim itch --seed {seed} --symbols 20 --messages 20000 --out f{k}.pcap --truth truth{k}.jsonl"
            )),
        );
        ok(p, &words(&format!("sim impair --in f{k}.pcap --seed {seed} --loss-a 0.05 --reorder 0.02 --skew-us 0..10 --out-a a{k}.pcap --out-b b{k}.pcap")));
    }
    let feed = |k: u32| {
        format!(
            "[[feed]]\nname = \"ch{k}\"\n[feed.source]\na = \"a{k}.pcap\"\nb = \"b{k}.pcap\"\n\
             [feed.arbitration]\nprotocol = \"moldudp64\"\nstart-seq = 1\ntimeout-us = 1000\n\
             [feed.book]\nfinal-books = \"books{k}.jsonl\"\ndepth = 1000000\n"
        )
    };
    let consumer = |k: u32| format!("[[consumer]]\nname = \"count{k}\"\nfeed = \"ch{k}\"\n");
    let cfg = format!("[run]\nreport = \"report.json\"\n{}{}{}{}", feed(1), feed(2), consumer(1), consumer(2));
    std::fs::write(p.join("two.toml"), &cfg).unwrap();
    ok(p, &["run", "two.toml", "--quiet"]);
    let parse = |s: &str| s.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect::<Vec<_>>();
    for k in [1, 2] {
        let books = std::fs::read_to_string(p.join(format!("books{k}.jsonl"))).unwrap();
        let truth = std::fs::read_to_string(p.join(format!("truth{k}.jsonl"))).unwrap();
        assert_eq!(parse(&books), parse(&truth), "feed ch{k}");
    }
    assert_ne!(
        std::fs::read(p.join("books1.jsonl")).unwrap(),
        std::fs::read(p.join("books2.jsonl")).unwrap(),
        "two different days"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("report.json")).unwrap()).unwrap();
    for k in [1, 2] {
        let f = &r["feeds"][format!("ch{k}")];
        assert_eq!(f["decoded"], 20_000, "ch{k}");
        assert_eq!(f["consumers"][0]["name"], format!("count{k}"));
        assert_eq!(f["consumers"][0]["received"], f["consumers"][0]["delivered"]);
    }
    // A consumer must name its feed, and a feed that exists.
    for (c, says) in [
        ("[[consumer]]\nname = \"x\"\n", "names its feed"),
        ("[[consumer]]\nname = \"x\"\nfeed = \"ch9\"\n", "no feed 'ch9'"),
    ] {
        std::fs::write(p.join("bad.toml"), format!("{}{}{c}", feed(1), feed(2))).unwrap();
        let o = std::process::Command::new(BIN).args(["run", "bad.toml", "--quiet"]).current_dir(p).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("bad.toml") && err.contains(says), "{err}");
    }
}

/// A capture that runs from one trading day's MoldUDP64 session into the next: the run
/// empties the books at the new session (ITCH deletes none of the last day's orders, and
/// its order numbers start again), so the books at the end are the second day's alone, and
/// the day its times count from is told again.
#[test]
fn a_capture_into_the_next_session_starts_the_books_afresh() {
    use tickplant_io::{Format, FrameReader, FrameWriter};
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 5 --symbols 8 --messages 6000 --date 2026-11-20 --out day.pcap --truth truth.jsonl"));
    let mut w = FrameWriter::create(p.join("two.pcap"), tickplant_core::LinkType::Ethernet, Format::PcapNs).unwrap();
    for (day, session) in [(0u64, b"SESSION001"), (3, b"SESSION002")] {
        let mut r = FrameReader::open(p.join("day.pcap")).unwrap();
        while let Some(f) = r.next_frame().unwrap() {
            let mut frame = f.data.to_vec();
            // Ethernet 14, IPv4 20, UDP 8: the MoldUDP64 session, then no UDP checksum.
            frame[42..52].copy_from_slice(session);
            frame[40..42].copy_from_slice(&[0, 0]);
            w.write(f.ts_ns + day * 86_400_000_000_000, &frame).unwrap();
        }
    }
    w.finish().unwrap();
    let cfg = "[source]\na = \"two.pcap\"\n[book]\nfinal-books = \"books.jsonl\"\ndepth = 1000000\n[run]\nreport = \"r.json\"\n";
    std::fs::write(p.join("c.toml"), cfg).unwrap();
    let (_, err) = ok(p, &["run", "c.toml", "--quiet"]);
    assert!(err.contains("1 new MoldUDP64 session(s) after the first") && err.contains("2026-11-23"), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("r.json")).unwrap()).unwrap();
    assert_eq!((r["new_sessions"].as_u64(), r["date"].as_str()), (Some(1), Some("2026-11-23")), "{r}");
    assert_eq!(r["book"]["duplicate_order"].as_u64(), Some(0), "{}", r["book"]);
    assert_eq!(
        std::fs::read_to_string(p.join("books.jsonl")).unwrap(),
        std::fs::read_to_string(p.join("truth.jsonl")).unwrap()
    );
}

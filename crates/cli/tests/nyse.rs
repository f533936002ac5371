//! NYSE Integrated Feed (XDP v2.1) against real captures: `tickplant decode --feed
//! nyse-xdp` of each file in ../shared/data/nyse/xdp-integrated-v2.1 gives the packet
//! header and every field the independent decoder shows (its expected.jsonl).

use std::path::Path;
use std::process::Command;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

/// How the independent decoder shows a reserved field of `n` bytes: the first `n`
/// characters of the bytes' text in hex with spaces ("00 00 00 00"), each as the hex of
/// its ASCII code ("30:30:20:30"). Our reserved bytes, put through it, must give its text:
/// the same bytes were read.
fn oracle_reserved(hex_colon: &str) -> String {
    let spaced = hex_colon.replace(':', " ");
    let n = hex_colon.split(':').count();
    spaced.bytes().take(n).map(|c| format!("{c:02x}")).collect::<Vec<_>>().join(":")
}

#[test]
fn real_xdp_captures_decode_as_the_independent_decoder_shows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/nyse/xdp-integrated-v2.1");
    let Ok(expected) = std::fs::read_to_string(dir.join("expected.jsonl")) else {
        eprintln!("SKIPPED: {} is absent (the shared real data)", dir.display());
        return;
    };
    let mut files = 0;
    for line in expected.lines() {
        let want: serde_json::Value = serde_json::from_str(line).unwrap();
        let file = want["file"].as_str().unwrap();
        let o = Command::new(BIN).args(["decode", "--feed", "nyse-xdp"]).arg(dir.join(file)).output().unwrap();
        assert!(o.status.success(), "{file}: {}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8(o.stdout).unwrap();
        let got: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(got.len(), 1, "{file}: one message");
        let got = &got[0];
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        for (k, v) in want["packet"].as_object().unwrap() {
            assert_eq!(text(&got["packet"][k]), v.as_str().unwrap(), "{file}: packet {k}");
        }
        assert_eq!(got["message"], want["message"], "{file}");
        assert_eq!(text(&got["type"]), want["type"].as_str().unwrap(), "{file}");
        let fields = want["fields"].as_object().unwrap();
        assert_eq!(got["fields"].as_object().unwrap().len(), fields.len(), "{file}: every field, no more");
        for (k, v) in fields {
            let ours = text(&got["fields"][k]);
            let ours = if k.starts_with("reserved") { oracle_reserved(&ours) } else { ours };
            assert_eq!(ours, v.as_str().unwrap(), "{file}: {k}");
        }
        files += 1;
    }
    assert_eq!(files, 8, "every capture of the folder");
}

fn tickplant(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(BIN).current_dir(dir).args(args).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn jsonl(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The NYSE section of docs/feed-handler.md runs as written; the same config on the whole
/// feed gives every symbol's book, level by level to the depth it writes, as the simulator's
/// truth; `decode` reads every message of the feed.
#[test]
fn nyse_doc_example_runs_and_the_books_equal_the_truth() {
    let commands = common::doc_commands("docs/feed-handler.md", "## NYSE Integrated Feed (XDP)");
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::copy(common::root().join("examples/nyse-xdp.toml"), p.join("nyse-xdp.toml")).unwrap();
    for args in &commands {
        tickplant(p, &args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    assert_eq!(commands.len(), 3);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("nyse-report.json")).unwrap()).unwrap();
    assert_eq!(report["feed"], "nyse-xdp");
    assert_eq!(report["undecodable"], 0);
    assert_eq!(report["nyse"]["unmapped"], 0);
    assert!(!report["gaps"].as_array().unwrap().is_empty(), "2% loss on each line leaves gaps");
    // The whole feed: every book equals the truth's, as deep as the config writes.
    let cfg = std::fs::read_to_string(p.join("nyse-xdp.toml")).unwrap();
    let cfg = cfg.replace("a = \"nyse-a.pcap\"\nb = \"nyse-b.pcap\"", "a = \"nyse.pcap\"");
    std::fs::write(p.join("whole.toml"), cfg).unwrap();
    tickplant(p, &["run", "whole.toml", "--quiet"]);
    let truth = jsonl(&p.join("nyse-truth.jsonl"));
    let books = jsonl(&p.join("nyse-books.jsonl"));
    assert!(truth.len() >= 40, "{}", truth.len());
    let mut compared = 0;
    for t in &truth {
        let Some(b) = books.iter().find(|b| b["symbol"] == t["symbol"]) else {
            // A symbol whose book ended empty is not written.
            assert!(t["bids"].as_array().unwrap().is_empty() && t["asks"].as_array().unwrap().is_empty(), "{t}");
            continue;
        };
        for side in ["bids", "asks"] {
            let got = b[side].as_array().unwrap();
            let want = &t[side].as_array().unwrap()[..got.len()];
            assert_eq!(got, want, "{} {side}", t["symbol"]);
            assert_eq!(got.len(), t[side].as_array().unwrap().len().min(5));
        }
        compared += 1;
    }
    assert!(compared >= 40, "{compared}");
    // decode reads the whole feed, one line a message.
    let o = Command::new(BIN)
        .current_dir(p)
        .args(["decode", "--feed", "nyse-xdp", "--types", "100"])
        .arg("nyse.pcap")
        .output()
        .unwrap();
    assert!(o.status.success());
    let adds = String::from_utf8(o.stdout).unwrap().lines().count() as u64;
    let whole: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.join("nyse-report.json")).unwrap()).unwrap();
    let by_type = &whole["by_type"];
    assert_eq!(Some(adds), by_type["100"].as_u64(), "{by_type}");
}

/// `tickplant demo --feed nyse-xdp` checks itself (gaps, books) and says so.
#[test]
fn nyse_demo_runs_small_and_checks_itself() {
    let d = tempfile::tempdir().unwrap();
    let out = tickplant(
        d.path(),
        &["demo", "--feed", "nyse-xdp", "--messages", "120000", "--symbols", "40", "--quiet", "--dir", "w"],
    );
    let verified = out.lines().find(|l| l.starts_with("demo: verified")).expect("the verdict");
    let books: u64 = verified.split(" books equal").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(books > 20, "{verified}");
    assert!(d.path().join("w/nyse-books.jsonl").exists());
}

/// The Pillar v2.5 layout: `sim nyse --layout pillar` through `decoder = "nyse-pillar"` gives
/// the truth's books; `decode --feed nyse-pillar` reads every message with its v2.5 fields
/// (prices with their decimal once the symbol's mapping was seen); the demo checks itself.
#[test]
fn pillar_feed_books_equal_the_truth() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    tickplant(
        p,
        &common::words("sim nyse --layout pillar --symbols 30 --messages 60000 --out pillar.pcap --truth truth.jsonl"),
    );
    std::fs::write(
        p.join("pillar.toml"),
        "[source]\na = \"pillar.pcap\"\ndecoder = \"nyse-pillar\"\n[arbitration]\nprotocol = \"xdp\"\n\
         [book]\nmax-orders = 100000\ndepth = 1000\nfinal-books = \"books.jsonl\"\n[run]\nreport = \"r.json\"\n",
    )
    .unwrap();
    tickplant(p, &["run", "pillar.toml", "--quiet"]);
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("r.json")).unwrap()).unwrap();
    assert_eq!(r["feed"], "nyse-pillar");
    assert_eq!(r["undecodable"], 0);
    let books = jsonl(&p.join("books.jsonl"));
    let mut compared = 0;
    for t in jsonl(&p.join("truth.jsonl")) {
        if let Some(b) = books.iter().find(|b| b["symbol"] == t["symbol"]) {
            assert_eq!((&b["bids"], &b["asks"]), (&t["bids"], &t["asks"]), "{}", t["symbol"]);
            compared += 1;
        }
    }
    assert!(compared >= 25, "{compared}");
    let out = tickplant(p, &["decode", "--feed", "nyse-pillar", "--types", "103", "pillar.pcap"]);
    let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(first["fields"].get("trade_cond_1").is_some() && first["fields"].get("price_decimal").is_some(), "{first}");
    assert!(!out.contains("\"error\""));
    let demo = tickplant(p, &common::words("demo --feed nyse-pillar --messages 80000 --symbols 30 --quiet"));
    assert!(demo.contains("demo: verified"), "{demo}");
}

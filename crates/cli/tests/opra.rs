//! OPRA binary (Participant Interface v6) against real captures: `tickplant decode --feed
//! opra-binary` of each file in ../shared/data/opra/v6.2 gives the block header the
//! folder's README states, and message bodies that hold together: each message ends where
//! its block says (block size), and the quotes' fields are those of a real AMZN option.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod common;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn decode(file: &Path, extra: &[&str]) -> Vec<Value> {
    let o = Command::new(BIN).args(["decode", "--feed", "opra-binary"]).args(extra).arg(file).output().unwrap();
    assert!(o.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn real_opra_captures_decode_field_for_field() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/opra/v6.2");
    if !dir.exists() {
        eprintln!("SKIPPED: {} is absent (the shared real data)", dir.display());
        return;
    }
    // The README's block headers: (file, block size, sequence number, participant, category).
    let cases = [
        ("AdministrativeMessage.pcap", 118, 405_982_822u64, "C", "C"),
        ("ControlMessage.pcap", 34, 402_622_060, "O", "H"),
        ("LongEquityAndIndexQuoteMessage.pcap", 74, 402_565_753, "D", "k"),
        ("ShortEquityAndIndexQuoteMessage.pcap", 60, 402_564_194, "T", "q"),
    ];
    for (file, size, seq, participant, category) in cases {
        let got = decode(&dir.join(file), &[]);
        assert_eq!(got.len(), 1, "{file}: one message");
        let m = &got[0];
        let p = &m["packet"];
        assert_eq!(p["version"], 6, "{file}");
        assert_eq!(p["block_size"], size, "{file}");
        assert_eq!(p["block_sequence_number"], seq, "{file}");
        assert_eq!(p["messages_in_block"], 1, "{file}");
        assert_eq!(p["data_feed_indicator"], "O", "{file}");
        assert_eq!(p["session_indicator"], 0, "{file}");
        assert_eq!(m["sequence"], seq, "{file}");
        assert_eq!(m["type"], category, "{file}");
        let f = &m["fields"];
        assert_eq!(f["participant_id"], participant, "{file}");
        assert_eq!(f["message_category"], category, "{file}");
        assert!(m.get("error").is_none(), "{file}: {m}");
    }
    let admin = &decode(&dir.join("AdministrativeMessage.pcap"), &[])[0]["fields"];
    assert_eq!(admin["message_data_length"], 83);
    assert_eq!(
        admin["message_data"],
        "TEXT CFLEX QQQ LST 3.21C PM EUR 03/28/2024 1 @ 385.55 2QQQ ADJ 1.0000 390.20 389.81"
    );
    let control = &decode(&dir.join("ControlMessage.pcap"), &[])[0]["fields"];
    assert_eq!(control["message_type"], "N", "line integrity");
    // The long quote: AMZN January 19, 2024 165.25 call, 0.61 (239) by 0.63 (495), and the
    // best bid appendage (indicator M) of participant P: 0.61 for 243.
    let long = &decode(&dir.join("LongEquityAndIndexQuoteMessage.pcap"), &[])[0]["fields"];
    for (k, v) in [
        ("security_symbol", Value::from("AMZN ")),
        ("expiration_month", "A".into()),
        ("expiration_day", 19.into()),
        ("expiration_year", 24.into()),
        ("strike_price", 16525.into()),
        ("strike_price_decimal", "165.25".into()),
        ("bbo_indicator", "M".into()),
        ("bid_price", 61.into()),
        ("bid_size", 239.into()),
        ("offer_price_decimal", "0.63".into()),
        ("offer_size", 495.into()),
        ("best_bid_participant_id", "P".into()),
        ("best_bid_price_decimal", "0.61".into()),
        ("best_bid_size", 243.into()),
        ("transaction_id", 220_610_983.into()),
    ] {
        assert_eq!(long[k], v, "long quote {k}");
    }
    // The short quote: AMZN December 29, 2023 133.0 call, 14.10 (43) by 14.65 (2); the best
    // bid appendage of participant N: 14.10 for 50.
    let short = &decode(&dir.join("ShortEquityAndIndexQuoteMessage.pcap"), &[])[0]["fields"];
    for (k, v) in [
        ("security_symbol", Value::from("AMZN")),
        ("expiration_month", "L".into()),
        ("expiration_day", 29.into()),
        ("expiration_year", 23.into()),
        ("strike_price_decimal", "133.0".into()),
        ("bid_price_decimal", "14.10".into()),
        ("bid_size", 43.into()),
        ("offer_price_decimal", "14.65".into()),
        ("offer_size", 2.into()),
        ("best_bid_participant_id", "N".into()),
        ("best_bid_price", 1410.into()),
        ("best_bid_size", 50.into()),
        ("participant_reference_number", 799_387_289.into()),
    ] {
        assert_eq!(short[k], v, "short quote {k}");
    }
    // --types keeps only the named categories.
    assert!(decode(&dir.join("ShortEquityAndIndexQuoteMessage.pcap"), &["--types", "k"]).is_empty());
    // CSV: a header, then one row a field.
    let o = Command::new(BIN)
        .args(["decode", "--feed", "opra-binary", "--format", "csv"])
        .arg(dir.join("ControlMessage.pcap"))
        .output()
        .unwrap();
    let csv = String::from_utf8(o.stdout).unwrap();
    let mut rows = csv.lines();
    assert_eq!(rows.next(), Some("frame,sequence,type,message,field,value"));
    assert_eq!(rows.next(), Some("1,402622060,H,control,participant_id,O"));
    assert_eq!(csv.lines().count(), 1 + 6, "the header's six fields");
}

/// `decode --feed opra-fast` of a simulated capture gives every quote and trade of the
/// simulator's truth: same sequence number, category and price.
#[test]
fn opra_fast_decode_matches_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let (cap, truth) = (dir.path().join("f.pcap"), dir.path().join("t.jsonl"));
    let o = Command::new(BIN)
        .args(["sim", "opra-fast", "--messages", "300", "--out"])
        .arg(&cap)
        .arg("--truth")
        .arg(&truth)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o =
        Command::new(BIN).args(["decode", "--feed", "opra-fast", "--header-bytes", "5"]).arg(&cap).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<Value> =
        String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got.len(), 300, "every message");
    let mut checked = 0;
    for t in std::fs::read_to_string(&truth).unwrap().lines() {
        let t: Value = serde_json::from_str(t).unwrap();
        let seq = t["sequence"].as_u64().unwrap();
        let m = got.iter().find(|m| m["sequence"] == seq).unwrap_or_else(|| panic!("sequence {seq}"));
        assert_eq!(m["type"], t["category"], "sequence {seq}");
        let key = match (t["action"].as_str().unwrap(), t["side"].as_str().unwrap()) {
            ("quote", "bid") => "bid_price_decimal",
            ("quote", "ask") => "offer_price_decimal",
            ("trade", _) => "premium_price_decimal",
            _ => continue,
        };
        let price: f64 = m["fields"][key].as_str().unwrap().parse().unwrap();
        assert!((price - t["price"].as_f64().unwrap()).abs() < 1e-9, "sequence {seq} {key}");
        checked += 1;
    }
    assert!(checked > 300, "quotes count twice: {checked}");
}

/// `decode --feed itch50` of a MoldUDP64 capture gives the fields `itch decode` gives, and
/// the sequence numbers of the packets.
#[test]
fn itch50_decode_matches_itch_decode() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("m.pcap");
    let o = Command::new(BIN).args(["sim", "moldudp64", "--packets", "200", "--out"]).arg(&cap).output().unwrap();
    assert!(o.status.success());
    let run = |args: &[&str]| -> Vec<Value> {
        let o = Command::new(BIN).args(args).arg(&cap).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let ours = run(&["decode", "--feed", "itch50"]);
    let theirs = run(&["itch", "decode"]);
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a["type"], b["type"], "message {i}");
        assert_eq!(a["sequence"], i as u64 + 1, "message {i}: one sequence number a message, from 1");
        for (k, v) in b.as_object().unwrap() {
            if k == "type" {
                continue;
            }
            let mine = a["fields"].get(format!("{k}_decimal")).or_else(|| a["fields"].get(k));
            let (mine, v) = (mine.unwrap_or_else(|| panic!("message {i}: {k}")), v);
            let as_text = |x: &Value| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string());
            let (x, y) = (as_text(mine), as_text(v));
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(x), Ok(y)) => assert_eq!(x, y, "message {i}: {k}"),
                _ => assert_eq!(x.trim_end(), y.trim_end(), "message {i}: {k}"),
            }
        }
    }
}

fn tickplant(dir: &Path, args: &[&str]) {
    let o = Command::new(BIN).current_dir(dir).args(args).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The OPRA binary section of docs/feed-handler.md runs as written: the impaired A/B feed
/// decodes to the simulator's events less the reported gaps, field for field; and the same
/// config on the whole feed leaves every series' best bid and offer exactly the truth's.
#[test]
fn opra_binary_doc_example_runs_and_matches_the_truth() {
    let commands = common::doc_commands("docs/feed-handler.md", "## OPRA binary");
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::copy(common::root().join("examples/opra-binary.toml"), p.join("opra-binary.toml")).unwrap();
    for args in &commands {
        tickplant(p, &args.iter().map(String::as_str).collect::<Vec<_>>());
    }
    assert_eq!(commands.len(), 3);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(p.join("opra-report.json")).unwrap()).unwrap();
    assert_eq!(report["feed"], "opra-binary");
    assert_eq!(report["undecodable"], 0);
    assert_eq!(report["decoded"], report["opra_binary"]["messages"]);
    let lost: std::collections::HashSet<u64> = report["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["first_seq"].as_u64().unwrap()..=g["last_seq"].as_u64().unwrap())
        .collect();
    let want: Vec<Value> = lines(&p.join("opra-truth.jsonl"))
        .into_iter()
        .filter(|v| (v["symbol"] == "AAA" || v["symbol"] == "BAAB") && !lost.contains(&v["sequence"].as_u64().unwrap()))
        .collect();
    let got: Vec<Value> = lines(&p.join("opra-events.jsonl")).into_iter().filter(|v| v["action"] != "gap").collect();
    assert!(want.len() > 500, "{}", want.len());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        for k in ["sequence", "action", "side", "size"] {
            assert_eq!(g[k], w[k], "{g} vs {w}");
        }
        assert_eq!(g["price"].to_string(), w["price"].to_string(), "{g} vs {w}");
        assert_eq!(g["msg_type"], w["category"]);
    }
    // The whole feed, no gaps: every series' final best bid and offer is the truth's.
    let cfg = std::fs::read_to_string(p.join("opra-binary.toml")).unwrap();
    let cfg = cfg.replace("a = \"opra-a.pcap\"\nb = \"opra-b.pcap\"", "a = \"opra.pcap\"");
    std::fs::write(p.join("whole.toml"), cfg).unwrap();
    tickplant(p, &["run", "whole.toml", "--quiet"]);
    let truth = lines(&p.join("opra-truth-bbo.jsonl"));
    let got = lines(&p.join("opra-bbo.jsonl"));
    assert!(truth.len() >= 390, "{}", truth.len());
    assert_eq!(got.len(), truth.len());
    for (g, t) in got.iter().zip(&truth) {
        for k in ["instrument_id", "symbol", "bid_price", "bid_size", "ask_price", "ask_size"] {
            assert_eq!(g[k], t[k], "{g} vs {t}");
        }
    }
}

/// `tickplant demo --feed opra-binary` checks itself against the simulator (gaps, events,
/// best bids and offers) and says so.
#[test]
fn opra_binary_demo_runs_small_and_checks_itself() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .current_dir(d.path())
        .args(["demo", "--feed", "opra-binary", "--messages", "100000", "--symbols", "60", "--quiet", "--dir", "w"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let verified = out.lines().find(|l| l.starts_with("demo: verified")).expect("the verdict");
    let series: u64 = verified.split(" series' best bid").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(series > 30, "{verified}");
    assert!(d.path().join("w/opra-bbo.jsonl").exists() && d.path().join("w/opra-report.json").exists());
}

/// docs/feeds.md's decode examples run as written (from the project's root, on the shared
/// real data) and print a line for every message.
#[test]
fn feeds_doc_examples_run() {
    let root = common::root();
    if !root.join("../shared/data/opra").exists() {
        eprintln!("SKIPPED: ../shared/data is absent (the shared real data)");
        return;
    }
    let commands = common::doc_commands("docs/feeds.md", "");
    for args in &commands {
        let o = Command::new(BIN).current_dir(&root).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(o.stdout.len() > 100, "{args:?}");
    }
    assert_eq!(commands.len(), 3);
}

/// `decode --feed opra-binary` of a simulated feed gives the simulator's messages: every
/// quote's and trade's price and size at its sequence number, every message once.
#[test]
fn opra_binary_decode_of_a_simulated_feed_equals_the_simulator() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    tickplant(p, &["sim", "opra", "--series", "50", "--messages", "3000", "--out", "o.pcap", "--truth", "t.jsonl"]);
    let got = decode(&p.join("o.pcap"), &[]);
    assert_eq!(got.len(), 3000, "every message");
    assert!(got.iter().all(|m| m.get("error").is_none()));
    let by_seq: std::collections::HashMap<u64, &Value> =
        got.iter().map(|m| (m["sequence"].as_u64().unwrap(), m)).collect();
    let mut checked = 0;
    for t in lines(&p.join("t.jsonl")) {
        let m = by_seq[&t["sequence"].as_u64().unwrap()];
        assert_eq!(m["type"], t["category"]);
        let f = &m["fields"];
        let (price, size) = match (t["action"].as_str().unwrap(), t["side"].as_str().unwrap()) {
            ("quote", "bid") => ("bid_price_decimal", "bid_size"),
            ("quote", "ask") => ("offer_price_decimal", "offer_size"),
            ("trade", _) => ("premium_price_decimal", "volume"),
            _ => continue,
        };
        let want: f64 = t["price"].as_f64().unwrap();
        assert!((f[price].as_str().unwrap().parse::<f64>().unwrap() - want).abs() < 1e-9, "{m} vs {t}");
        assert_eq!(f[size], t["size"], "{m} vs {t}");
        assert_eq!(f["security_symbol"].as_str().unwrap().trim_end(), t["symbol"].as_str().unwrap());
        checked += 1;
    }
    assert!(checked > 3000, "{checked}");
}

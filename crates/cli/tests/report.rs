//! `tickplant report`: the pictures of a run come from its report's timeline, whose sums
//! are the report's own totals (every HR message, packet and lost message in one second).

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn tp(args: &[&str]) -> std::process::Output {
    let o = Command::new(BIN).args(args).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn sum(v: &Value) -> u64 {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).sum()
}

#[test]
fn the_timeline_adds_up_and_draws() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    tp(&["sim", "itch", "--messages", "30000", "--symbols", "20", "--out", &p("feed.pcap")]);
    tp(&[
        "sim",
        "impair",
        "--in",
        &p("feed.pcap"),
        "--loss-a",
        "0.2",
        "--loss-b",
        "0.2",
        "--out-a",
        &p("a.pcap"),
        "--out-b",
        &p("b.pcap"),
    ]);
    let cfg = format!(
        "[source]\na = {:?}\nb = {:?}\ndecoder = \"itch50\"\n[arbitration]\nmode = \"time\"\ntimeout-us = 1000\n[run]\nreport = {:?}\n[[consumer]]\nname = \"all\"\naction = \"count\"\npolicy = \"backpressure\"\n",
        p("a.pcap"),
        p("b.pcap"),
        p("report.json")
    );
    std::fs::write(p("run.toml"), cfg).unwrap();
    tp(&["run", "--quiet", &p("run.toml")]);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(p("report.json")).unwrap()).unwrap();
    let t = &r["timeline"];
    assert_eq!(t["interval_ns"], 1_000_000_000u64);
    assert_eq!(sum(&t["messages"]), r["messages_in"].as_u64().unwrap());
    assert_eq!(sum(&t["wins_a"]) + sum(&t["wins_b"]), r["packets_in"].as_u64().unwrap());
    assert!(sum(&t["wins_a"]) > 0 && sum(&t["wins_b"]) > 0, "both lines win packets");
    let gaps = r["gaps"].as_array().unwrap();
    assert!(!gaps.is_empty());
    assert_eq!(sum(&t["gaps"]), gaps.len() as u64);
    assert_eq!(sum(&t["messages_lost"]), gaps.iter().map(|g| g["messages"].as_u64().unwrap()).sum::<u64>());
    let n = t["messages"].as_array().unwrap().len();
    for k in ["wins_a", "wins_b", "gaps", "messages_lost"] {
        assert_eq!(t[k].as_array().unwrap().len(), n, "{k}");
    }

    tp(&["report", &p("report.json"), "--out", &p("report.html")]);
    let html = std::fs::read_to_string(p("report.html")).unwrap();
    for want in [
        "Message rate over the day",
        "A/B wins over the day",
        "Gaps over the day",
        "Stage and ring latency",
        "Consumers",
    ] {
        assert!(html.contains(want), "{want}");
    }
    assert!(html.matches("<svg").count() >= 5);
    let busy = t["messages"].as_array().unwrap().iter().filter(|x| x.as_u64() != Some(0)).count();
    assert!(busy > 0 && html.matches("<rect").count() > busy, "a column a second with messages at least");

    std::fs::write(p("bad.json"), "{\"frames\": 1}").unwrap();
    let o = Command::new(BIN).args(["report", &p("bad.json"), "--out", &p("bad.html")]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a report of `tickplant run`"));
}

//! NYSE Integrated Feed (XDP v2.1) against real captures: `tickplant decode --feed
//! nyse-xdp` of each file in ../shared/data/nyse/xdp-integrated-v2.1 gives the packet
//! header and every field the independent decoder shows (its expected.jsonl).

use std::path::Path;
use std::process::Command;

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

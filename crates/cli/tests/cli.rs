//! End-to-end tests of the `tickplant` binary on real files.

use std::path::Path;
use std::process::Command;

mod common;
use common::words;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn tp(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).current_dir(dir).output().expect("runs")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let o = tp(dir, args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "tickplant {args:?} failed:\n{err}");
    err
}

fn read_frames(p: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = tickplant_io::FrameReader::open(p).unwrap();
    let mut v = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        v.push((f.ts_ns, f.data.to_vec()));
    }
    v
}

fn seq_of(f: &[u8]) -> (u64, u64) {
    let s = u64::from_be_bytes(f[52..60].try_into().unwrap());
    (s, u64::from(u16::from_be_bytes([f[60], f[61]])))
}

#[test]
fn arb_end_to_end_matches_ground_truth() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "moldudp64", "--seed", "3", "--packets", "5000", "--out", "feed.pcap"]);
    ok(
        p,
        &words("sim impair --in feed.pcap --seed 3 --loss-a 0.05 --loss-b 0.05 --reorder 0.02 --dup 0.02 --skew-us 0..20 --out-a a.pcap --out-b b.pcap --truth truth.csv"),
    );
    let summary = ok(
        p,
        &words("arb --a a.pcap --b b.pcap --start-seq 1 --timeout-us 100 --ll-out ll.pcap --hr-out hr.pcap --gaps gaps.csv --stats stats.json"),
    );
    assert!(summary.contains("accounting: balanced"), "{summary}");

    let feed = read_frames(&p.join("feed.pcap"));
    let truth = std::fs::read_to_string(p.join("truth.csv")).unwrap();
    let rows: Vec<Vec<String>> = truth.lines().skip(1).map(|l| l.split(',').map(String::from).collect()).collect();
    let got: Vec<usize> = rows.iter().filter(|r| r[3] != "0" || r[4] != "0").map(|r| r[0].parse().unwrap()).collect();
    // HR: exactly the union, byte for byte, in order, stamped with non-decreasing times.
    let hr = read_frames(&p.join("hr.pcap"));
    assert_eq!(hr.len(), got.len());
    for (o, &i) in hr.iter().zip(&got) {
        assert_eq!(o.1, feed[i].1);
    }
    assert!(hr.windows(2).all(|w| w[0].0 <= w[1].0));
    // LL: strictly increasing, each frame an input frame.
    let ll = read_frames(&p.join("ll.pcap"));
    assert!(ll.windows(2).all(|w| seq_of(&w[0].1).0 < seq_of(&w[1].1).0));
    // Gaps: HR gaps are the runs both lost (before the last packet received).
    let gaps = std::fs::read_to_string(p.join("gaps.csv")).unwrap();
    assert!(gaps.starts_with("output,first_seq,last_seq,messages,reason\n"));
    let hr_lost: u64 = gaps
        .lines()
        .skip(1)
        .filter(|l| l.starts_with("hr,"))
        .map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    let last = *got.last().unwrap();
    let both_lost: u64 =
        rows[..last].iter().filter(|r| r[3] == "0" && r[4] == "0").map(|r| r[2].parse::<u64>().unwrap()).sum();
    assert_eq!(hr_lost, both_lost);
    let st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("stats.json")).unwrap()).unwrap();
    assert_eq!(st["outputs"]["hr"]["messages_lost"].as_u64().unwrap(), both_lost);
    for k in ["packets", "messages", "wins", "duplicates", "late", "out_of_order", "other"] {
        assert!(st["inputs"]["a"][k].is_u64(), "stats.json inputs.a.{k}");
    }
    for k in ["packets", "messages", "gaps", "messages_lost"] {
        assert!(st["outputs"]["ll"][k].is_u64(), "stats.json outputs.ll.{k}");
    }
    // Deterministic: the same run gives the same bytes.
    ok(p, &words("arb --a a.pcap --b b.pcap --start-seq 1 --timeout-us 100 --hr-out hr-again.pcap -q"));
    assert_eq!(std::fs::read(p.join("hr.pcap")).unwrap(), std::fs::read(p.join("hr-again.pcap")).unwrap());
}

/// One capture holding both lines (a host subscribed to the A and B groups, captured on
/// one interface): given as both inputs, each with its line's destination, it arbitrates as
/// the two captures do, byte for byte, and each line counts the other's packets as other
/// (filtered). Without the destinations it is refused with the flags to use.
#[test]
fn one_capture_holding_both_lines_is_read_as_a_and_b() {
    use tickplant_io::{Format, FrameWriter};
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 4 --symbols 5 --messages 8000 --out day.pcap"));
    ok(p, &words("sim impair --in day.pcap --seed 4 --loss-a 0.03 --loss-b 0.03 --reorder 0.02 --skew-us 0..20 --out-a a.pcap --out-b b.pcap"));
    // B to its own group and port, as the exchange sends it; both lines in one file.
    let a = read_frames(&p.join("a.pcap"));
    let b: Vec<(u64, Vec<u8>)> = read_frames(&p.join("b.pcap"))
        .into_iter()
        .map(|(t, mut f)| {
            f[33] = 112;
            f[36..38].copy_from_slice(&26401u16.to_be_bytes());
            (t, f)
        })
        .collect();
    let mut both: Vec<&(u64, Vec<u8>)> = a.iter().chain(&b).collect();
    both.sort_by_key(|f| f.0);
    for (name, frames) in [("b2.pcap", b.iter().collect::<Vec<_>>()), ("both.pcap", both)] {
        let mut w = FrameWriter::create(p.join(name), tickplant_core::LinkType::Ethernet, Format::PcapNs).unwrap();
        for (t, f) in frames {
            w.write(*t, f).unwrap();
        }
        w.finish().unwrap();
    }
    ok(p, &words("arb --a a.pcap --b b2.pcap --hr-out hr-two.pcap --stats two.json -q"));
    let e = String::from_utf8_lossy(&tp(p, &words("arb --a both.pcap --b both.pcap -q")).stderr).to_string();
    assert!(e.contains("--a-accept") && e.contains("--b-accept"), "{e}");
    ok(p, &words("arb --a both.pcap --b both.pcap --a-accept 233.54.12.111:26400 --b-accept 233.54.12.112:26401 --hr-out hr-one.pcap --stats one.json -q"));
    assert_eq!(std::fs::read(p.join("hr-one.pcap")).unwrap(), std::fs::read(p.join("hr-two.pcap")).unwrap());
    let st = |f: &str| -> serde_json::Value { serde_json::from_slice(&std::fs::read(p.join(f)).unwrap()).unwrap() };
    let (one, two) = (st("one.json"), st("two.json"));
    for (line, other) in [("a", b.len()), ("b", a.len())] {
        for k in ["wins", "duplicates", "late", "messages", "out_of_order"] {
            assert_eq!(one["inputs"][line][k], two["inputs"][line][k], "{line}.{k}");
        }
        assert_eq!(one["inputs"][line]["other"], other as u64, "{line}: the other line's packets");
    }
    assert_eq!(one["outputs"]["hr"], two["outputs"]["hr"]);
    // The same in a run config: the books end as the two captures' do.
    let config = |a: &str, b: &str, accept: &str, books: &str| {
        format!(
            "[source]\na = \"{a}\"\nb = \"{b}\"\n[arbitration]\n{accept}timeout-us = 10000\n\
             [book]\nfinal-books = \"{books}\"\ndepth = 1000000\n"
        )
    };
    let accept = "a-accept = \"233.54.12.111:26400\"\nb-accept = \"233.54.12.112:26401\"\n";
    std::fs::write(p.join("one.toml"), config("both.pcap", "both.pcap", accept, "books-one.jsonl")).unwrap();
    std::fs::write(p.join("two.toml"), config("a.pcap", "b2.pcap", "", "books-two.jsonl")).unwrap();
    ok(p, &["run", "one.toml", "--quiet"]);
    ok(p, &["run", "two.toml", "--quiet"]);
    let books = std::fs::read_to_string(p.join("books-one.jsonl")).unwrap();
    assert_eq!(books, std::fs::read_to_string(p.join("books-two.jsonl")).unwrap());
    assert_eq!(books.lines().count(), 5);
    // A line's destination is a group and a port.
    let e = String::from_utf8_lossy(&tp(p, &words("arb --a both.pcap --b both.pcap --a-accept 26400 -q")).stderr)
        .to_string();
    assert!(e.contains("--a-accept 26400: a line's destination is GROUP:PORT"), "{e}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let o = tp(p, &["arb", "--a", "missing.pcap", "--b", "missing.pcap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.pcap: cannot open"));
    std::fs::write(p.join("junk.pcap"), b"this is not a capture at all").unwrap();
    let e = String::from_utf8_lossy(&tp(p, &["arb", "--a", "junk.pcap", "--b", "junk.pcap"]).stderr).to_string();
    assert!(e.contains("junk.pcap") && e.contains("not a pcap, pcapng or ITCH BinaryFILE"), "{e}");
    ok(p, &["sim", "moldudp64", "--packets", "10", "--out", "f.pcap"]);
    let e = String::from_utf8_lossy(&tp(p, &["arb", "--a", "f.pcap", "--b", "f.pcap", "--change-at", "x:time"]).stderr)
        .to_string();
    assert!(e.contains("--change-at \"x:time\""), "{e}");
    let e = String::from_utf8_lossy(
        &tp(p, &["arb", "--a", "f.pcap", "--b", "f.pcap", "--protocol", "custom", "--seq-bytes", "9"]).stderr,
    )
    .to_string();
    assert!(e.contains("width must be 1..=8"), "{e}");
    // A truncated capture names the frame and byte.
    let bytes = std::fs::read(p.join("f.pcap")).unwrap();
    std::fs::write(p.join("t.pcap"), &bytes[..bytes.len() - 5]).unwrap();
    let e = String::from_utf8_lossy(&tp(p, &["arb", "--a", "t.pcap", "--b", "f.pcap"]).stderr).to_string();
    assert!(e.contains("t.pcap: frame 10 (byte") && e.contains("truncated frame data"), "{e}");
}

/// An error says each thing once: a wrapper that displays as the error it wraps must not
/// also give it as its source, or `error: a: b` prints the same words twice.
#[test]
fn errors_say_each_thing_once() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("missing-capture.toml"), "[source]\na = \"gone-a.pcap\"\nb = \"gone-b.pcap\"\n").unwrap();
    std::fs::write(p.join("junk.pcap"), b"this is not a capture at all").unwrap();
    std::fs::write(p.join("junk-capture.toml"), "[source]\na = \"junk.pcap\"\nb = \"junk.pcap\"\n").unwrap();
    ok(p, &["sim", "itch", "--symbols", "3", "--messages", "1000", "--out", "day.itch"]);
    // Files a run writes at its end, in a folder that is not there: refused before the run.
    for (name, table) in [
        ("final-books", "[book]\nfinal-books = \"gone/books.jsonl\"\n"),
        ("report", "[run]\nreport = \"gone/report.json\"\n"),
        ("gaps", "[arbitration]\ngaps = \"gone/gaps.csv\"\n"),
        ("bbo", "[[consumer]]\nname = \"top\"\naction = \"bbo\"\npath = \"gone/bbo.jsonl\"\n"),
    ] {
        std::fs::write(p.join(format!("{name}.toml")), format!("[source]\na = \"day.itch\"\n{table}")).unwrap();
    }
    for (args, says) in [
        (&["run", "final-books.toml"][..], "[book] final-books gone/books.jsonl: cannot write"),
        (&["run", "report.toml"][..], "[run] report gone/report.json: cannot write"),
        (&["run", "gaps.toml"][..], "[arbitration] gaps gone/gaps.csv: cannot write"),
        (&["run", "bbo.toml"][..], "consumer top: cannot create gone/bbo.jsonl"),
        (&["arb", "--a", "day.itch", "--stats", "gone/s.json"][..], "--stats gone/s.json: cannot write"),
        (
            &["replay", "--max", "day.itch=127.0.0.1:9", "--report", "gone/r.json"][..],
            "--report gone/r.json: cannot write",
        ),
    ] {
        let o = tp(p, args);
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "tickplant {args:?}: {e}");
        assert!(e.contains(says) && !e.contains("frames"), "tickplant {args:?} ran first, or: {e}");
    }
    for (args, says) in [
        (&["run", "missing-capture.toml"][..], "gone-a.pcap: cannot open"),
        (&["run", "junk-capture.toml"][..], "not a pcap, pcapng or ITCH BinaryFILE"),
        (&["run", "no-such-config.toml"][..], "no-such-config.toml: cannot read config"),
        (&["arb", "--a", "gone-a.pcap", "--b", "gone-b.pcap"][..], "gone-a.pcap: cannot open"),
        (&["ctl", "no-handler.sock", "status"][..], "no-handler.sock: cannot connect"),
        (
            &["export", "dbn", "--feed", "itch50", "day.itch", "--out", "gone/day.dbn"][..],
            "gone/day.dbn: cannot create",
        ),
        (&["sim", "itch", "--messages", "1000", "--out", "gone/day.itch"][..], "gone/day.itch: cannot create"),
        (&["replay", "--pps", "0", "day.itch=127.0.0.1:9"][..], "--pps 0: a rate above 0 packets a second"),
        // A count of 0 is an error, not a panic or a figure of nothing.
        (&["bench", "feeds", "--rounds", "0"][..], "--rounds, --messages and --series must be at least 1"),
        (&["bench", "recv", "--datagrams", "0"][..], "--datagrams and --rounds must be at least 1"),
        (&["bench", "match", "--workload", "a", "--events", "0"][..], "--events and --brute-force-events must be"),
    ] {
        let o = tp(p, args);
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "tickplant {args:?}: {e}");
        assert!(e.contains(says), "tickplant {args:?}: {e}");
        let line = e.lines().find(|l| l.starts_with("error: ")).unwrap_or_default();
        let parts: Vec<&str> = line.split(": ").collect();
        for (i, a) in parts.iter().enumerate() {
            assert!(!parts[i + 1..].contains(a), "tickplant {args:?} repeats {a:?}: {line}");
        }
    }
}

/// A filter that can match nothing because of a typo says so: a message type the feed does
/// not have is an error that lists the types; a symbol the file never names is a warning.
#[test]
fn typos_in_filters_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "nyse", "--symbols", "3", "--messages", "2000", "--out", "n.pcap"]);
    ok(p, &["sim", "opra", "--series", "8", "--messages", "300", "--out", "o.pcap"]);
    ok(p, &["sim", "itch", "--symbols", "3", "--messages", "1000", "--out", "day.itch"]);
    for (args, says) in [
        (
            &["decode", "--feed", "nyse-xdp", "n.pcap", "--types", "100,999"][..],
            "\"999\" is not a message type of nyse-xdp (one of 1 2 3",
        ),
        (
            &["decode", "--feed", "opra-binary", "o.pcap", "--types", "x"][..],
            "\"x\" is not a message type of opra-binary",
        ),
        (&["decode", "--feed", "itch50", "o.pcap", "--types", "AE"][..], "\"AE\" is not a message type of itch50"),
    ] {
        let o = tp(p, args);
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "tickplant {args:?}: {e}");
        assert!(e.contains(says), "tickplant {args:?}: {e}");
    }
    let lines = |args: &[&str]| String::from_utf8(tp(p, args).stdout).unwrap().lines().count();
    assert!(lines(&["decode", "--feed", "nyse-xdp", "n.pcap", "--types", "100"]) > 100);
    assert!(lines(&["decode", "--feed", "opra-binary", "o.pcap", "--types", "k,q"]) > 50);
    let e = ok(p, &["itch", "decode", "day.itch", "--symbols", "AAAB,ZZZZ"]);
    assert!(e.contains("--symbols ZZZZ: not in the file's stock directory") && !e.contains("AAAB"), "{e}");
    assert!(lines(&["itch", "decode", "day.itch", "--symbols", "AAAB"]) > 10);
    let e = ok(p, &["export", "jsonl", "--feed", "itch50", "day.itch", "--out", "x.jsonl", "--symbols", "AAAB,ZZZZ"]);
    assert!(e.contains("--symbols ZZZZ: the feed never named it") && !e.contains("--symbols AAAB"), "{e}");
    assert!(std::fs::read_to_string(p.join("x.jsonl")).unwrap().lines().count() > 10);
    // --limit 0 writes nothing.
    assert_eq!(lines(&["decode", "--feed", "opra-binary", "o.pcap", "--limit", "0"]), 0);
    assert_eq!(lines(&["decode", "--feed", "opra-binary", "o.pcap", "--limit", "3"]), 3);
}

#[test]
fn malformed_frames_go_to_other_and_are_named() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "moldudp64", "--packets", "20", "--out", "f.pcap"]);
    let mut frames = read_frames(&p.join("f.pcap"));
    frames[5].1.truncate(30); // breaks the IPv4 header
    frames[6].1[12] = 0x86; // IPv6 ethertype
    frames[6].1[13] = 0xdd;
    let mut w = tickplant_io::FrameWriter::create(
        p.join("bad.pcap"),
        tickplant_core::LinkType::Ethernet,
        tickplant_io::Format::PcapNs,
    )
    .unwrap();
    for (t, f) in &frames {
        w.write(*t, f).unwrap();
    }
    w.finish().unwrap();
    let err = ok(p, &["arb", "--a", "bad.pcap", "--b", "f.pcap", "--other-out", "other.pcap", "--stats", "-", "-q"]);
    assert!(err.is_empty(), "--quiet: {err}");
    let err = ok(p, &["arb", "--a", "bad.pcap", "--b", "f.pcap", "--other-out", "other.pcap"]);
    assert!(err.contains("bad.pcap: frame 6: malformed"), "{err}");
    assert_eq!(read_frames(&p.join("other.pcap")).len(), 2);
    let o = tp(p, &["arb", "--a", "bad.pcap", "--b", "f.pcap", "--stats", "-", "-q"]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["inputs"]["a"]["other"], 2);
    assert_eq!(st["other_by_reason"]["not_ipv4"], 1);
    assert_eq!(st["outputs"]["hr"]["gaps"], 0, "B filled both");
}

#[test]
fn docs_example_commands_run() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/arbitration.md")).unwrap();
    let block = doc.split("```sh\n").nth(1).expect("the worked example").split("```").next().unwrap();
    let d = tempfile::tempdir().unwrap();
    let work = d.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // The example refers to ../examples/arb.toml, as from a folder beside examples/.
    std::fs::create_dir(d.path().join("examples")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/arb.toml"),
        d.path().join("examples/arb.toml"),
    )
    .unwrap();
    let mut n = 0;
    for line in block.lines().filter(|l| l.starts_with("tickplant ")) {
        let args: Vec<&str> = line.split_whitespace().skip(1).collect();
        ok(&work, &args);
        n += 1;
    }
    assert_eq!(n, 5);
    for f in ["ll.pcap", "hr.pcap", "gaps.csv", "stats.json", "hr2.pcap", "gaps2.csv", "hr3.pcap"] {
        assert!(work.join(f).exists(), "{f}");
    }
    let g2 = std::fs::read_to_string(work.join("gaps2.csv")).unwrap();
    assert!(!g2.lines().any(|l| l.starts_with("ll,")), "--no-ll");
}

#[test]
fn help_explains_every_command() {
    let d = tempfile::tempdir().unwrap();
    let h = String::from_utf8(tp(d.path(), &["arb", "--help"]).stdout).unwrap();
    for flag in [
        "--a",
        "--b",
        "--protocol",
        "--seq-offset",
        "--seq-bytes",
        "--seq-endian",
        "--count-offset",
        "--count-bytes",
        "--mode",
        "--timeout-us",
        "--max-msgs",
        "--change-at",
        "--ll-out",
        "--hr-out",
        "--other-out",
        "--gaps",
        "--stats",
        "--config",
    ] {
        assert!(h.contains(flag), "arb --help lacks {flag}");
    }
    let h = String::from_utf8(tp(d.path(), &["sim", "impair", "--help"]).stdout).unwrap();
    for flag in
        ["--in", "--seed", "--loss-a", "--loss-b", "--reorder", "--dup", "--skew-us", "--out-a", "--out-b", "--truth"]
    {
        assert!(h.contains(flag), "sim impair --help lacks {flag}");
    }
}

/// `a.pcap` with `junk` frames put between its frames (one after every `every`th), at the
/// time of the frame before them.
fn with_junk(src: &Path, dst: &Path, every: usize, junk: impl Fn(usize) -> Vec<u8>) -> usize {
    let frames = read_frames(src);
    let mut w =
        tickplant_io::FrameWriter::create(dst, tickplant_core::LinkType::Ethernet, tickplant_io::Format::for_path(dst))
            .unwrap();
    let mut n = 0;
    for (i, (ts, f)) in frames.iter().enumerate() {
        w.write(*ts, f).unwrap();
        if i % every == every / 2 {
            w.write(*ts, &junk(n)).unwrap();
            n += 1;
        }
    }
    w.finish().unwrap();
    n
}

/// The stray-traffic cases: a capture that holds, besides the feed, datagrams to another
/// group and port that begin like MoldUDP64 (a block count larger than the bytes held, a
/// session of their own). Malformed ones go to `other`, named; well-formed ones to another
/// destination make a run without `--accept` an error that names both destinations, and
/// with `--accept` they are filtered. Either way HR equals the clean run's, byte for byte.
#[test]
fn arb_holds_its_ground_against_stray_traffic() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &["sim", "moldudp64", "--seed", "5", "--packets", "3000", "--out", "feed.pcap"]);
    ok(p, &words("sim impair --in feed.pcap --seed 5 --loss-a 0.03 --loss-b 0.03 --out-a a.pcap --out-b b.pcap"));
    let arb = |a: &str, extra: &[&str]| {
        let mut args = vec!["arb", "--a", a, "--b", "b.pcap", "--start-seq", "1", "--hr-out", "hr.pcap"];
        args.extend_from_slice(&["--stats", "stats.json"]);
        args.extend_from_slice(extra);
        tp(p, &args)
    };
    let o = arb("a.pcap", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let clean = read_frames(&p.join("hr.pcap"));
    assert!(clean.len() > 2900);
    let feed_dst = {
        let f = &read_frames(&p.join("feed.pcap"))[0].1;
        format!("{}.{}.{}.{}:{}", f[30], f[31], f[32], f[33], u16::from_be_bytes([f[36], f[37]]))
    };
    let elsewhere = tickplant_wire::build::Flow { dst_ip: [239, 9, 9, 9], dst_port: 7000, ..Default::default() };

    // Junk whose header announces more blocks than it holds (and a low sequence number).
    let n = with_junk(&p.join("a.pcap"), &p.join("a_junk.pcap"), 97, |k| {
        let mut pl = tickplant_wire::build::moldudp64_payload(b"NOTMOLD001", 3 + k as u64, &[b"xyz"]);
        pl[18..20].copy_from_slice(&500u16.to_be_bytes());
        tickplant_wire::build::udp_frame(&elsewhere, 0, &pl)
    });
    let o = arb("a_junk.pcap", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_frames(&p.join("hr.pcap")), clean, "malformed junk changes nothing");
    let st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("stats.json")).unwrap()).unwrap();
    assert_eq!(st["other_by_reason"]["malformed"].as_u64(), Some(n as u64));
    assert_eq!(st["sequence_resets"].as_u64(), Some(0));

    // Well-formed packets of another session to another destination.
    let n = with_junk(&p.join("a.pcap"), &p.join("a_mixed.pcap"), 89, |k| {
        let pl = tickplant_wire::build::moldudp64_payload(b"OTHERFEED1", 1 + k as u64, &[b"abc", b"defg"]);
        tickplant_wire::build::udp_frame(&elsewhere, 0, &pl)
    });
    let o = arb("a_mixed.pcap", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("a_mixed.pcap"), "{err}");
    assert!(err.contains(&feed_dst) && err.contains("239.9.9.9:7000"), "{err}");
    assert!(err.contains(&format!("--accept {feed_dst}")), "{err}");
    let o = arb("a_mixed.pcap", &["--accept", &feed_dst]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_frames(&p.join("hr.pcap")), clean, "filtered junk changes nothing");
    let st: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("stats.json")).unwrap()).unwrap();
    assert_eq!(st["other_by_reason"]["filtered"].as_u64(), Some(n as u64));
    assert_eq!(st["sequence_resets"].as_u64(), Some(0));
}

/// The saturation indicator of a count window: a window of 5 messages fills in microseconds
/// at the capture's rate, before the other line's copy of a lost packet arrives (given up by
/// count, then late: saturated); one of 2,000 messages waits for it (not saturated). A time
/// window has no indicator.
#[test]
fn arb_says_when_a_count_window_is_saturated() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim moldudp64 --seed 3 --packets 5000 --out feed.pcap"));
    ok(p, &words("sim impair --in feed.pcap --seed 3 --loss-a 0.05 --loss-b 0.05 --skew-us 0..20 --out-a a.pcap --out-b b.pcap"));
    let sat = |extra: &str| -> serde_json::Value {
        ok(p, &words(&format!("arb --a a.pcap --b b.pcap --start-seq 1 --stats st.json -q {extra}")));
        let st: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("st.json")).unwrap()).unwrap();
        st["saturation"].clone()
    };
    let small = sat("--mode count --max-msgs 5");
    assert_eq!(small["saturated"], true, "{small}");
    assert!(small["count_gaps"].as_u64().unwrap() > 0 && small["hr_late"].as_u64().unwrap() > 0);
    let rate = small["message_rate_per_s"].as_f64().unwrap();
    let fill = small["window_fill_ns"].as_u64().unwrap() as f64;
    assert!((fill - 5.0 / rate * 1e9).abs() < 2.0, "fill {fill} at {rate}/s");
    let large = sat("--mode count --max-msgs 2000");
    assert_eq!(large["saturated"], false, "{large}");
    assert_eq!(large["hr_late"], 0);
    assert!(sat("--mode time --timeout-us 1000").is_null());
}

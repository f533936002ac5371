//! `tickplant fast`: the examples of docs/fast.md as written, decoding the real samples,
//! and errors that say what and where.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared() -> Option<PathBuf> {
    let p = root().join("../shared/data/fast");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} absent (an outside checkout has no ../shared)", p.display());
        None
    }
}

/// Every `tickplant` command of docs/fast.md runs, and prints the output block after it.
/// Commands on ../shared data run from the repository root (skipped when it is absent).
#[test]
fn fast_doc_examples_run_as_shown() {
    let doc = std::fs::read_to_string(root().join("docs/fast.md")).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut last: Option<(String, String)> = None;
    let (mut files, mut checked) = (0, 0);
    for b in doc.split("```").skip(1).step_by(2) {
        let (info, body) = b.split_once('\n').unwrap();
        if let Some(name) = info.strip_prefix("text file=") {
            std::fs::write(d.path().join(name), body).unwrap();
            files += 1;
        } else if info == "sh" {
            for cmd in body.lines().filter(|l| l.starts_with("tickplant ")) {
                let needs_shared = cmd.contains("../shared");
                if needs_shared && shared().is_none() {
                    last = None;
                    continue;
                }
                let dir = if needs_shared { root() } else { d.path().to_path_buf() };
                let mut args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
                if cmd.starts_with("tickplant fast bench") {
                    // Its figures are not compared (they are timings); two passes without
                    // the pauses between groups run it in a second instead of 25 in this
                    // debug build, the full run's wiring all the same.
                    args.extend(["--rounds", "2", "--pause-ms", "0"]);
                }
                let o = Command::new(BIN).args(&args).current_dir(dir).output().unwrap();
                assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
                last = Some((cmd.to_string(), String::from_utf8_lossy(&o.stdout).into_owned()));
            }
        } else if info == "text output" {
            if let Some((cmd, out)) = last.take() {
                assert_eq!(out, body, "{cmd}");
                checked += 1;
            }
        }
    }
    assert_eq!(files, 1);
    assert!(checked >= 1);
}

#[test]
fn decode_writes_one_json_line_per_message() {
    let Some(s) = shared() else { return };
    let o = Command::new(BIN)
        .args(["fast", "decode", "--templates"])
        .arg(s.join("mfast/example.xml"))
        .arg(s.join("mfast/complex30000.dat"))
        .args(["--limit", "3", "--format", "jsonl"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[1]["template_id"], 1);
    assert_eq!(lines[1]["template"], "MarketData");
    assert_eq!(lines[1]["fields"]["MDEntries"][0]["MDEntryPx"], "26.0");
    // The OPRA capture: id-less template, 63 messages.
    let o = Command::new(BIN)
        .args(["fast", "decode", "--framing", "opra", "--templates"])
        .arg(s.join("openfast/OPRA/OPRATemplate.xml"))
        .arg(s.join("openfast/OPRA/messages.fast"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 63);
    assert!(out.lines().next().unwrap().contains("\"TEXT\": \"START OF DAY\""));
}

#[test]
fn errors_say_what_and_where() {
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.xml");
    std::fs::write(
        &bad,
        r#"<templates><template name="T" id="1"><string name="S"><increment/></string></template></templates>"#,
    )
    .unwrap();
    let data = d.path().join("d.fast");
    std::fs::write(&data, [0xc0u8, 0x81]).unwrap();
    let o = Command::new(BIN).args(["fast", "decode", "--templates"]).arg(&bad).arg(&data).output().unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("template \"T\", field \"S\": [S2]"), "{e}");
    // A truncated stream: the message, the byte and the field.
    let good = d.path().join("good.xml");
    std::fs::write(
        &good,
        r#"<templates><template name="T" id="1"><uInt32 name="A"/><uInt32 name="B"/></template></templates>"#,
    )
    .unwrap();
    std::fs::write(&data, [0xc0u8, 0x81, 0x85, 0x01]).unwrap();
    let o = Command::new(BIN)
        .args(["fast", "decode", "--framing", "raw", "--templates"])
        .arg(&good)
        .arg(&data)
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("message 0 at byte 3") && e.contains("field \"B\""), "{e}");
    // The first message still came out.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let o = Command::new(BIN)
        .args(["fast", "decode", "--framing", "zip", "--templates"])
        .arg(&good)
        .arg(&data)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("u32le, opra, raw or udp"));
    let o = Command::new(BIN).args(["fast", "decode", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--framing") && help.contains("--limit"), "{help}");
}

#[test]
fn bench_prints_its_figures_and_ratios() {
    let Some(s) = shared() else { return };
    let o = Command::new(BIN)
        .args(["fast", "bench", "--rounds", "6", "--pause-ms", "10", "--templates"])
        .arg(s.join("mfast/example.xml"))
        .arg(s.join("mfast/complex30000.dat"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "ns/message",
        "M messages/s",
        "values/s",
        "fields/s",
        "MB/s",
        "21-byte",
        "mFAST",
        "57.9 values per message",
        "(best of 6 passes)",
        // Six passes: a group of five, then one more after the pause.
        "best of each group of 5 passes (10 ms apart): ",
    ] {
        assert!(out.contains(want), "{want} missing from:\n{out}");
    }
    let groups = out.lines().find_map(|l| l.split_once("10 ms apart): ")).unwrap().1;
    let each: Vec<f64> = groups.trim_end_matches(" ns/message").split(' ').map(|t| t.parse().unwrap()).collect();
    assert_eq!(each.len(), 2, "{out}");
    assert!(each.iter().all(|&t| t > 0.0), "{out}");
}

/// `--framing udp`: FAST messages in UDP datagrams of a pcap, with a packet header to skip
/// and a dictionary reset per packet; a frame that is not UDP is skipped and reported.
#[test]
fn decode_reads_udp_datagrams_from_a_pcap() {
    use tickplant_fast::{Encoder, Entry, Message, Program, Value};
    let d = tempfile::tempdir().unwrap();
    let xml = r#"<templates><template name="Px" id="9"><uInt32 name="Seq"><increment/></uInt32><uInt32 name="Px"><copy/></uInt32></template></templates>"#;
    std::fs::write(d.path().join("t.xml"), xml).unwrap();
    let p = Program::from_xml(xml).unwrap();
    let msg = |seq: u64, px: u64| {
        let mut m = Message::new();
        m.entries.push(Entry { field: 0, value: Value::UInt(seq) });
        m.entries.push(Entry { field: 1, value: Value::UInt(px) });
        m
    };
    let pcap = d.path().join("md.pcap");
    let mut w = tickplant_io::pcap::FrameWriter::create(
        &pcap,
        tickplant_core::LinkType::Ethernet,
        tickplant_io::pcap::Format::PcapNs,
    )
    .unwrap();
    let mut enc = Encoder::new(&p);
    let flow = tickplant_wire::build::Flow::default();
    let mut seq = 0;
    for dgram in 0..2u16 {
        // Each datagram: a 4-byte header (a packet number), then three messages; the
        // encoder starts each datagram from a reset dictionary, as the feed would.
        enc.reset();
        let mut payload = u32::from(dgram).to_be_bytes().to_vec();
        for k in 0..3 {
            seq += 1;
            enc.encode(&msg(seq, 100 + k), &mut payload).unwrap();
        }
        w.write(u64::from(dgram) * 1000, &tickplant_wire::build::udp_frame(&flow, dgram, &payload)).unwrap();
    }
    // An ARP frame: not UDP.
    let mut arp = vec![0u8; 60];
    arp[12] = 0x08;
    arp[13] = 0x06;
    w.write(5000, &arp).unwrap();
    w.finish().unwrap();
    let o = Command::new(BIN)
        .current_dir(d.path())
        .args([
            "fast",
            "decode",
            "--templates",
            "t.xml",
            "--framing",
            "udp",
            "--header-bytes",
            "4",
            "--reset-per-packet",
            "md.pcap",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let seqs: Vec<u64> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["fields"]["Seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 frames were not UDP/IPv4"));
    // Without the reset the second datagram's first message leans on a dictionary it does
    // not share with the encoder: still decodes here (the values were sent), but without
    // --header-bytes the header is read as a message and the error says where.
    let o = Command::new(BIN)
        .current_dir(d.path())
        .args(["fast", "decode", "--templates", "t.xml", "--framing", "udp", "md.pcap"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("frame 1, message 0") && e.contains("of the UDP payload"), "{e}");
}

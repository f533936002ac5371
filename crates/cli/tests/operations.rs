//! Operations of a running handler: its Prometheus endpoint, scraped while a live run goes
//! on (loopback, ports the kernel chose; every process bounded in time and killed on
//! failure).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::{finish, words};

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn ok(dir: &Path, args: &[&str]) {
    let o = Command::new(BIN).args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `GET /metrics`: the body.
fn scrape(port: u16) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200") && head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// A scrape's counters and gauges: (name, sorted labels) -> (is a counter, value).
type Samples = HashMap<(String, Vec<(String, String)>), (bool, f64)>;

/// The samples of a scrape, parsed by an independent parser (`prometheus-parse`).
fn parse(text: &str) -> Samples {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text exposition format");
    let mut out = HashMap::new();
    for s in scrape.samples {
        let mut labels: Vec<(String, String)> = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        labels.sort();
        let (counter, v) = match s.value {
            prometheus_parse::Value::Counter(v) => (true, v),
            prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => (false, v),
            _ => continue,
        };
        out.insert((s.metric, labels), (counter, v));
    }
    out
}

fn value(m: &Samples, name: &str, labels: &[(&str, &str)]) -> u64 {
    let mut l: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    l.sort();
    m.get(&(name.to_string(), l)).unwrap_or_else(|| panic!("no {name} {labels:?}")).1 as u64
}

/// A live run scraped several times: each scrape parses, counters only grow, and the last
/// scrape (after the feed has ended, before the run does) equals the final report.
#[test]
fn a_live_run_scraped_parses_grows_and_ends_at_the_report() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 71 --symbols 20 --messages 12000 --out day.pcap"));
    ok(p, &words("sim impair --in day.pcap --seed 71 --loss-a 0.02 --loss-b 0.02 --out-a a.pcap --out-b b.pcap"));
    let (pa, pb, pm) = (udp_port(), udp_port(), tcp_port());
    std::fs::write(
        p.join("run.toml"),
        format!(
            "[source]\na = \"udp://127.0.0.1:{pa}\"\nb = \"udp://127.0.0.1:{pb}\"\ndate = \"2026-11-20\"\n\
             [arbitration]\ntimeout-us = 50000\n[book]\nmax-orders = 100000\n\
             [[consumer]]\nname = \"all\"\naction = \"count\"\n\
             [run]\nreport = \"report.json\"\nduration-s = 4\nmetrics = \"127.0.0.1:{pm}\"\n"
        ),
    )
    .unwrap();
    let mut handler: Child =
        Command::new(BIN).args(["run", "run.toml", "--quiet"]).current_dir(p).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut replay = Command::new(BIN)
        .args(words(&format!("replay -q --pps 4000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb}")))
        .current_dir(p)
        .spawn()
        .unwrap();
    let mut scrapes = Vec::new();
    for _ in 0..6 {
        scrapes.push(parse(&scrape(pm)));
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(replay.wait().unwrap().success());
    // The feed has ended; the run goes on to its duration: its last values are published.
    std::thread::sleep(Duration::from_millis(600));
    let text = scrape(pm);
    let last = parse(&text);
    scrapes.push(last.clone());
    finish(&mut handler, Duration::from_secs(30));
    for w in scrapes.windows(2) {
        for (k, (counter, v)) in &w[1] {
            if *counter {
                if let Some((_, before)) = w[0].get(k) {
                    assert!(v >= before, "{k:?} went from {before} to {v}");
                }
            }
        }
    }
    let grew = value(&scrapes[5], "tickplant_frames_total", &[("feed", "itch50")])
        > value(&scrapes[0], "tickplant_frames_total", &[("feed", "itch50")]);
    assert!(grew, "the scrapes saw the run going on");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("report.json")).unwrap()).unwrap();
    let f = [("feed", "itch50")];
    for (i, name) in ["a", "b"].iter().enumerate() {
        let l = [("feed", "itch50"), ("input", name)];
        assert_eq!(value(&last, "tickplant_input_packets_total", &l), r["arbitration"]["inputs"][i]["packets"]);
        assert_eq!(value(&last, "tickplant_input_wins_total", &l), r["arbitration"]["inputs"][i]["wins"]);
        let live = [("feed", "itch50"), ("input", r["live"][i]["input"].as_str().unwrap())];
        assert_eq!(value(&last, "tickplant_live_rcvbuf_bytes", &live), r["live"][i]["rcvbuf"]);
        assert_eq!(value(&last, "tickplant_live_rcvbuf_asked_bytes", &live), r["live"][i]["rcvbuf_asked"]);
        assert!(r["live"][i]["rcvbuf"].as_u64().unwrap() > 0);
    }
    let hr = [("feed", "itch50"), ("output", "hr")];
    assert_eq!(value(&last, "tickplant_output_messages_total", &hr), r["arbitration"]["hr"]["messages"]);
    assert_eq!(value(&last, "tickplant_output_gaps_total", &hr), r["arbitration"]["hr"]["gaps"]);
    assert_eq!(value(&last, "tickplant_decoded_messages_total", &f), r["decoded"]);
    assert_eq!(value(&last, "tickplant_frames_total", &f), r["frames"]);
    assert_eq!(value(&last, "tickplant_book_live_orders", &f), r["live_orders"]);
    assert_eq!(value(&last, "tickplant_books_stale", &f), r["stale_books"]);
    let c = [("feed", "itch50"), ("consumer", "all")];
    assert_eq!(value(&last, "tickplant_consumer_delivered_total", &c), r["consumers"][0]["delivered"]);
    // The ring's latency, published by the consumer's own thread: its count is the report's.
    let ring_count = text
        .lines()
        .find(|l| l.starts_with("tickplant_ring_latency_seconds_count{") && l.contains("consumer=\"all\""))
        .unwrap_or_else(|| panic!("no ring latency: {text}"));
    assert_eq!(
        ring_count.rsplit(' ').next().unwrap().parse::<u64>().unwrap(),
        r["consumers"][0]["ring_latency_ns"]["count"]
    );
    let gaps: u64 = r["gaps"].as_array().unwrap().len() as u64;
    let timeout = [("feed", "itch50"), ("reason", "timeout")];
    if gaps > 0 {
        assert_eq!(value(&last, "tickplant_gaps_total", &timeout), gaps);
    }
}

/// `tickplant ctl SOCKET ARGS...`: its exit status and answer line.
fn ctl(dir: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(BIN).arg("ctl").args(args).current_dir(dir).output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `tickplant ctl policy` mid-run: the window changes at that point (the gaps before it
/// were given up by time, those after it skipped at once), nothing is lost or delivered
/// twice, and the report lists the change; `status` answers, a bad command is refused and
/// changes nothing; another user cannot use the socket.
#[test]
fn a_policy_changed_mid_run_takes_effect_there_and_loses_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 72 --symbols 20 --messages 16000 --out day.pcap"));
    ok(p, &words("sim impair --in day.pcap --seed 72 --loss-a 0.1 --loss-b 0.1 --out-a a.pcap --out-b b.pcap"));
    let (pa, pb) = (udp_port(), udp_port());
    std::fs::write(
        p.join("run.toml"),
        format!(
            "[source]\na = \"udp://127.0.0.1:{pa}\"\nb = \"udp://127.0.0.1:{pb}\"\ndate = \"2026-11-20\"\n\
             [arbitration]\nstart-seq = 1\ntimeout-us = 30000\nhr-out = \"hr.pcap\"\ngaps = \"gaps.csv\"\n\
             [book]\nmax-orders = 100000\n\
             [run]\nreport = \"report.json\"\nduration-s = 4\ncontrol = \"ctl.sock\"\n"
        ),
    )
    .unwrap();
    let mut handler: Child = Command::new(BIN)
        .args(["run", "run.toml", "--quiet", "--log-format", "json"])
        .current_dir(p)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its log (stderr) read as it comes, so that the pipe never fills.
    let mut err = handler.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    std::thread::sleep(Duration::from_millis(500));
    let mut replay = Command::new(BIN)
        .args(words(&format!("replay -q --pps 4000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb}")))
        .current_dir(p)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let (good, status) = ctl(p, &["ctl.sock", "status"]);
    assert!(good && status.contains("\"ok\":true") && status.contains("itch50"), "{status}");
    let (good, bad) = ctl(p, &["ctl.sock", "policy", "itch50", "sideways"]);
    assert!(!good && bad.contains("unknown mode"), "{bad}");
    let (good, changed) = ctl(p, &["ctl.sock", "policy", "itch50", "low-latency"]);
    assert!(good && changed.contains("LowLatency"), "{changed}");
    // The books now, one JSON line each.
    let (good, books) = ctl(p, &["ctl.sock", "snapshot", "itch50", "depth=3"]);
    assert!(good, "{books}");
    let books: Vec<serde_json::Value> = books.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!books.is_empty() && books.iter().all(|b| b["symbol"].is_string() && b["bids"].is_array()), "{books:?}");
    assert!(books.iter().all(|b| b["bids"].as_array().unwrap().len() <= 3));
    other_user_is_refused(p);
    assert!(replay.wait().unwrap().success());
    finish(&mut handler, Duration::from_secs(30));
    // The change is a log event, a JSON line (`--log-format json`) with its fields.
    let log = log.join().unwrap();
    let events: Vec<serde_json::Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let change = events.iter().find(|e| e["message"] == "control change").unwrap_or_else(|| panic!("{log}"));
    assert_eq!((&change["level"], &change["feed"]), (&serde_json::json!("INFO"), &serde_json::json!("itch50")));
    assert!(change["result"].as_str().unwrap().contains("LowLatency"));
    assert!(events.iter().any(|e| e["message"] == "control socket"), "{log}");
    assert!(!p.join("ctl.sock").exists(), "the socket's file is gone with the run");

    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("report.json")).unwrap()).unwrap();
    let changes = r["control"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(changes[0]["result"].as_str().unwrap().contains("LowLatency"));
    let at = changes[0]["at_ns"].as_u64().unwrap();
    // Each message once, in order, or in a gap: nothing lost or delivered twice.
    let got = common::messages(&p.join("hr.pcap"));
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, once");
    let mut gaps = std::collections::BTreeSet::new();
    let (mut before, mut after) = (0, 0);
    for l in std::fs::read_to_string(p.join("gaps.csv")).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        gaps.extend(f[1].parse::<u64>().unwrap()..=f[2].parse::<u64>().unwrap());
        match f[4] {
            "timeout" => before += 1,
            "skipped" => after += 1,
            other => panic!("gap reason {other}"),
        }
    }
    let delivered: std::collections::BTreeSet<u64> = got.iter().copied().collect();
    let last = *delivered.iter().next_back().unwrap();
    assert!((1..=last).all(|s| delivered.contains(&s) ^ gaps.contains(&s)), "each message delivered or a gap");
    assert!(before > 0 && after > 0, "gaps by time before the change ({before}), skipped after ({after})");
    let g = r["gaps"].as_array().unwrap();
    // Given up by time up to the change; skipped from it on, those still waiting at the
    // change itself given up there (at `at`: the new policy lets nothing wait).
    let wrong: Vec<_> = g
        .iter()
        .filter(|g| {
            let t = g["at_ns"].as_u64().unwrap();
            if g["reason"] == "timeout" {
                t > at
            } else {
                t < at
            }
        })
        .collect();
    assert!(wrong.is_empty(), "reasons change at {at}: {wrong:?}");
}

/// Where the test runs as root: a client of another user cannot connect to the socket
/// (owner-only), whatever the directory allows.
fn other_user_is_refused(dir: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    // The directory is this process's: its owner is the user the test runs as.
    if std::fs::metadata(dir).unwrap().uid() != 0 {
        eprintln!("SKIPPED: switching users needs root (CI runs as root and runs this check)");
        return;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mode = std::fs::metadata(dir.join("ctl.sock")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is the owner's alone");
    // A copy of the binary the other user may run (the build's own directory may be closed
    // to it), beside the socket.
    let bin = dir.join("tickplant-copy");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o =
        Command::new(&bin).args(["ctl", "ctl.sock", "status"]).current_dir(dir).uid(65534).gid(65534).output().unwrap();
    assert!(!o.status.success(), "another user was answered: {}", String::from_utf8_lossy(&o.stdout));
    assert!(String::from_utf8_lossy(&o.stderr).contains("ermission denied"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A live handler on loopback (`run.toml`: two UDP sources, A and B, of the same day, then
/// `rest` of the config) and `day.pcap` replayed into both lines at 2,500 packets a second
/// from half a second in: (the handler, the replay).
fn live_day(p: &Path, rest: &str) -> (Child, Child) {
    let (pa, pb) = (udp_port(), udp_port());
    std::fs::write(
        p.join("run.toml"),
        format!("[source]\na = \"udp://127.0.0.1:{pa}\"\nb = \"udp://127.0.0.1:{pb}\"\ndate = \"2026-11-20\"\n{rest}"),
    )
    .unwrap();
    let handler =
        Command::new(BIN).args(["run", "run.toml", "--quiet"]).current_dir(p).stderr(Stdio::piped()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let replay = Command::new(BIN)
        .args(words(&format!("replay -q --pps 2500 day.pcap=127.0.0.1:{pa} day.pcap=127.0.0.1:{pb}")))
        .current_dir(p)
        .spawn()
        .unwrap();
    (handler, replay)
}

/// The events of a `jsonl` consumer's file, gap and trusted records left out.
fn jsonl_events(path: &Path) -> Vec<(String, serde_json::Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| (l.to_string(), serde_json::from_str::<serde_json::Value>(l).unwrap()))
        .filter(|(_, v)| v["sequence"].is_u64())
        .collect()
}

/// `subscribe` and `unsubscribe` mid-run: a consumer's output is, from the sequence number
/// each answer names, the events of an unfiltered consumer of the same run that the
/// subscription then in force takes (the symbols read from the capture's own directory
/// messages); the report lists the changes; a bad change is refused and changes nothing.
#[test]
fn subscriptions_changed_mid_run_give_the_oracles_events() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 73 --symbols 8 --messages 30000 --out day.pcap"));
    let symbols = common::itch_symbols(&p.join("day.pcap"));
    let mut names: Vec<&String> = symbols.values().collect();
    names.sort();
    let (s1, s2) = (names[0].clone(), names[1].clone());
    let (mut handler, mut replay) = live_day(
        p,
        &format!(
            "[arbitration]\nstart-seq = 1\ntimeout-us = 30000\n[book]\nmax-orders = 100000\n\
             [run]\nreport = \"report.json\"\nduration-s = 6\ncontrol = \"ctl.sock\"\n\
             [[consumer]]\nname = \"all\"\naction = \"jsonl\"\npath = \"all.jsonl\"\npolicy = \"backpressure\"\n\
             [[consumer]]\nname = \"sub\"\naction = \"jsonl\"\npath = \"sub.jsonl\"\npolicy = \"backpressure\"\n\
             symbols = [\"{s1}\"]\n"
        ),
    );
    // Three changes, 0.7 s apart, while the day goes by; each answer names where it holds.
    let changes = [
        format!("subscribe itch50 sub symbols={s2}"),
        "unsubscribe itch50 sub actions=add".to_string(),
        format!("unsubscribe itch50 sub symbols={s1}"),
    ];
    let mut from = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(700));
        if i == 1 {
            let (good, bad) = ctl(p, &["ctl.sock", "subscribe", "itch50", "sub", "types=Z"]);
            assert!(!good && bad.contains("not an ITCH 5.0 message type"), "{bad}");
            let (good, bad) = ctl(p, &["ctl.sock", "subscribe", "itch50", "nobody", "types=A"]);
            assert!(!good && bad.contains("no consumer \\\"nobody\\\"") && bad.contains("all, sub"), "{bad}");
        }
        let mut args = vec!["ctl.sock"];
        args.extend(words(c));
        let (good, answer) = ctl(p, &args);
        assert!(good, "{c}: {answer}");
        let a: serde_json::Value = serde_json::from_str(&answer).unwrap();
        from.push(a["from_seq"].as_u64().unwrap_or_else(|| panic!("{answer}")));
    }
    assert!(replay.wait().unwrap().success());
    finish(&mut handler, Duration::from_secs(30));
    assert!(from.windows(2).all(|w| w[0] < w[1]), "the changes came one after another: {from:?}");

    // The oracle: the unfiltered consumer's events, each taken where the subscription in
    // force at its sequence number takes it.
    let all = jsonl_events(&p.join("all.jsonl"));
    let got = jsonl_events(&p.join("sub.jsonl"));
    let takes = |e: &serde_json::Value| {
        let seq = e["sequence"].as_u64().unwrap();
        let in_force = from.iter().filter(|&&f| f <= seq).count();
        let sym = symbols.get(&(e["instrument_id"].as_u64().unwrap() as u32));
        let sym_ok = match in_force {
            0 => sym == Some(&s1),
            1 | 2 => sym == Some(&s1) || sym == Some(&s2),
            _ => sym == Some(&s2),
        };
        sym_ok && (in_force < 2 || e["action"] != "add")
    };
    let want: Vec<&String> = all.iter().filter(|(_, e)| takes(e)).map(|(l, _)| l).collect();
    let got: Vec<&String> = got.iter().map(|(l, _)| l).collect();
    assert!(all.len() > 10_000, "the day went through: {} events", all.len());
    let first_diff = want.iter().zip(&got).position(|(a, b)| a != b);
    assert!(
        want.len() == got.len() && first_diff.is_none(),
        "{} events against the oracle's {}; first difference at {first_diff:?}: {:?} / {:?}",
        got.len(),
        want.len(),
        first_diff.map(|i| got[i]),
        first_diff.map(|i| want[i])
    );
    // Every stretch had events of its own to check.
    for w in [0].iter().chain(&from).collect::<Vec<_>>().windows(2) {
        let n = got
            .iter()
            .filter(|l| {
                let s = serde_json::from_str::<serde_json::Value>(l).unwrap()["sequence"].as_u64().unwrap();
                s >= *w[0] && s < *w[1]
            })
            .count();
        assert!(n > 0, "no event between sequence {} and {}", w[0], w[1]);
    }
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("report.json")).unwrap()).unwrap();
    let listed: Vec<&str> = r["control"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(listed, changes.iter().map(String::as_str).collect::<Vec<_>>());
}

/// A `match` consumer's lines (`matches.jsonl`): (event, sequence, symbol, action, ids sorted).
fn match_lines(path: &Path) -> Vec<(u64, u64, String, String, Vec<u64>)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut ids: Vec<u64> = v["matches"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            ids.sort_unstable();
            let s = |k: &str| v[k].as_str().unwrap().to_string();
            (v["event"].as_u64().unwrap(), v["sequence"].as_u64().unwrap(), s("symbol"), s("action"), ids)
        })
        .collect()
}

/// `strategies add|remove` mid-run: the match consumer's matches are, from the record each
/// answer names, those of a run from the same capture with the strategies then in force
/// from the start (the oracle: the pipeline with a fixed set); bad strategies are refused
/// and change nothing; the report lists the changes.
#[test]
fn strategies_changed_mid_run_match_as_the_set_then_in_force() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 74 --symbols 8 --messages 30000 --out day.pcap"));
    let symbols = common::itch_symbols(&p.join("day.pcap"));
    let mut names: Vec<&String> = symbols.values().collect();
    names.sort();
    let s3 = names[2].clone();
    let sets = [
        "1: action = \"execute\"\n2: action = \"add\" and size >= 300\n".to_string(),
        format!(
            "1: action = \"execute\"\n2: action = \"add\" and size >= 300\n3: symbol = \"{s3}\" and action = \"add\"\n"
        ),
        format!("2: action = \"add\" and size >= 300\n3: symbol = \"{s3}\" and action = \"add\"\n"),
    ];
    let consumer = |strategies: &str, out: &str| {
        format!(
            "[[consumer]]\nname = \"m\"\naction = \"match\"\nstrategies = \"{strategies}\"\npath = \"{out}\"\npolicy = \"backpressure\"\n"
        )
    };
    let common =
        "date = \"2026-11-20\"\n[arbitration]\nstart-seq = 1\ntimeout-us = 30000\n[book]\nmax-orders = 100000\n";
    // The oracle: the same day from the capture, each set in force from the start.
    for (k, set) in sets.iter().enumerate() {
        std::fs::write(p.join(format!("s{k}.txt")), set).unwrap();
        std::fs::write(
            p.join(format!("oracle{k}.toml")),
            format!(
                "[source]\na = \"day.pcap\"\nb = \"day.pcap\"\n{common}{}",
                consumer(&format!("s{k}.txt"), &format!("m{k}.jsonl"))
            ),
        )
        .unwrap();
        ok(p, &["run", &format!("oracle{k}.toml"), "--quiet"]);
    }
    let (mut handler, mut replay) = live_day(
        p,
        &format!(
            "{}[run]\nreport = \"report.json\"\nduration-s = 6\ncontrol = \"ctl.sock\"\n{}",
            common.trim_start_matches("date = \"2026-11-20\"\n"),
            consumer("s0.txt", "live.jsonl")
        ),
    );
    let changes = [
        format!("strategies itch50 m add 3: symbol = \"{s3}\" and action = \"add\""),
        "strategies itch50 m remove 1".to_string(),
    ];
    let mut from = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(800));
        if i == 1 {
            for (bad, says) in [
                ("strategies itch50 m add 2: action = \"add\"", "strategy 2 is in force"),
                ("strategies itch50 m add 9: price = \"cheap\"", "price as a string"),
                ("strategies itch50 m add 9: size >", "column"),
                ("strategies itch50 m remove 1 77", "no strategy 77"),
                ("strategies itch50 nobody remove 1", "those that do: m"),
            ] {
                let mut args = vec!["ctl.sock"];
                args.extend(bad.split(' '));
                let (good, answer) = ctl(p, &args);
                assert!(!good && answer.contains(says), "{bad}: {answer}");
            }
        }
        let mut args = vec!["ctl.sock"];
        args.extend(c.split(' '));
        let (good, answer) = ctl(p, &args);
        assert!(good, "{c}: {answer}");
        let a: serde_json::Value = serde_json::from_str(&answer).unwrap();
        from.push(a["from_event"].as_u64().unwrap_or_else(|| panic!("{answer}")));
    }
    assert!(replay.wait().unwrap().success());
    finish(&mut handler, Duration::from_secs(30));
    assert!(from.windows(2).all(|w| w[0] < w[1]) && from[0] > 0, "the changes came mid-run: {from:?}");

    let oracles: Vec<_> = (0..3).map(|k| match_lines(&p.join(format!("m{k}.jsonl")))).collect();
    let bounds = [0, from[0], from[1], u64::MAX];
    let want: Vec<_> = (0..3)
        .flat_map(|k| oracles[k].iter().filter(move |l| l.0 >= bounds[k] && l.0 < bounds[k + 1]).cloned())
        .collect();
    let got = match_lines(&p.join("live.jsonl"));
    let first_diff = want.iter().zip(&got).position(|(a, b)| a != b);
    assert!(
        want.len() == got.len() && first_diff.is_none(),
        "{} lines against the oracle's {}; first difference at {first_diff:?}: {:?} / {:?}",
        got.len(),
        want.len(),
        first_diff.map(|i| &got[i]),
        first_diff.map(|i| &want[i])
    );
    // Each set had matches of its own to check: 3 appears after the first change, 1 not after
    // the second.
    assert!(got.iter().any(|l| l.0 < from[0] && l.4.contains(&1)));
    assert!(got.iter().any(|l| l.0 >= from[0] && l.4.contains(&3)));
    assert!(got.iter().any(|l| l.0 >= from[1]) && got.iter().all(|l| l.0 < from[1] || !l.4.contains(&1)));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p.join("report.json")).unwrap()).unwrap();
    let listed: Vec<&str> = r["control"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(listed, changes.iter().map(String::as_str).collect::<Vec<_>>());
}

/// `tickplant top` in a pseudo-terminal while a live run goes on: its screen (read through
/// a terminal emulator) shows the feed's rate, inputs, stages and consumers; `q` quits it
/// and it leaves the alternate screen (the terminal as it was). `--once` prints the same
/// view as text.
#[test]
fn top_in_a_pty_shows_the_run_and_quits_cleanly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 75 --symbols 8 --messages 30000 --out day.pcap"));
    let (mut handler, mut replay) = live_day(
        p,
        "[arbitration]\nstart-seq = 1\ntimeout-us = 30000\n\
         [run]\nduration-s = 6\ncontrol = \"ctl.sock\"\n\
         [[consumer]]\nname = \"counter\"\naction = \"count\"\n",
    );
    std::thread::sleep(Duration::from_millis(500));
    // The plain-text view.
    let o =
        Command::new(BIN).args(["top", "ctl.sock", "--once", "--interval-ms", "300"]).current_dir(p).output().unwrap();
    let once = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(once.contains("feed itch50: ") && once.contains("msgs/s HR") && once.contains("counter"), "{once}");

    // A pseudo-terminal of 40 rows and 160 columns.
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize { ws_row: 40, ws_col: 160, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes the two descriptors it opens; the name and termios are null
    // (not wanted), the window size points at a live value.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = Command::new(BIN);
    cmd.args(["top", "ctl.sock", "--interval-ms", "300"])
        .current_dir(p)
        .env("TERM", "xterm-256color")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: between fork and exec only async-signal-safe calls: a session of its own, with
    // the pty (its stdin) as the controlling terminal, as a terminal would start it.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut top = cmd.spawn().unwrap();
    drop(slave);
    let mut reader = std::fs::File::from(master.try_clone().unwrap());
    let bytes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = bytes.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends when the pty closes (EIO once top has exited).
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    let screen = {
        let mut parser = vt100::Parser::new(40, 160, 0);
        parser.process(&bytes.lock().unwrap());
        parser.screen().contents()
    };
    let feed_line = screen.lines().find(|l| l.contains("feed itch50: ")).unwrap_or_else(|| panic!("{screen}"));
    let rate: f64 =
        feed_line.split("feed itch50: ").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert!(rate > 0.0, "the feed runs: {feed_line}");
    assert_eq!(screen.matches("decode_book p50").count(), 1, "each stage once:\n{screen}");
    for want in ["tickplant top ctl.sock", "pkts/s", "msgs/s", "counter", "stages: arbitrate p50", "(q quits)"] {
        assert!(screen.contains(want), "{want:?} not on the screen:\n{screen}");
    }
    for input in ["a", "b"] {
        let row = screen.lines().find(|l| l.trim_start_matches('│').trim_start().starts_with(&format!("{input} ")));
        let cols: Vec<f64> = row
            .unwrap_or_else(|| panic!("input {input}:\n{screen}"))
            .trim_start_matches('│')
            .split_whitespace()
            .skip(1)
            .take(2)
            .map(|c| c.parse().unwrap())
            .collect();
        // Packets and messages a second (a packet holds one message or more).
        assert!(cols[0] > 0.0 && cols[1] >= cols[0], "input {input} receives:\n{screen}");
    }
    let mut writer = std::fs::File::from(master);
    writer.write_all(b"q").unwrap();
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = top.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = top.kill();
            panic!("top did not quit on q");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(100));
    let all = bytes.lock().unwrap().clone();
    let s = String::from_utf8_lossy(&all);
    // It entered the alternate screen and left it, last.
    let (enter, leave) =
        (s.find("\x1b[?1049h").expect("entered"), s.rfind("\x1b[?1049l").expect("left the alternate screen"));
    assert!(enter < leave && !s[leave..].contains("\x1b[?1049h"));
    assert!(replay.wait().unwrap().success());
    finish(&mut handler, Duration::from_secs(30));
}

//! Recovery, live on loopback: an A/B pair impaired so that both lines lose messages,
//! replayed into the handler with the re-request server up (`sim rerequest-server`). Every
//! process has a duration and is killed if it outlives it; the ports are the kernel's
//! choice.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;
use common::{finish, messages, words};

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn ok(dir: &Path, args: &[&str]) {
    let o = Command::new(BIN).args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Processes killed on drop, so that a failing test leaves none behind.
struct Procs(Vec<Child>);

impl Procs {
    fn spawn(&mut self, dir: &Path, args: &str) -> usize {
        let c = Command::new(BIN).args(words(args)).current_dir(dir).stderr(Stdio::piped()).spawn().unwrap();
        self.0.push(c);
        self.0.len() - 1
    }
    fn wait(&mut self, k: usize) {
        finish(&mut self.0[k], Duration::from_secs(40));
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The HR gaps of a gaps CSV (`tickplant arb --gaps`), message by message, with reasons.
fn hr_gaps(path: &Path) -> (BTreeSet<u64>, BTreeSet<String>) {
    let (mut seqs, mut reasons) = (BTreeSet::new(), BTreeSet::new());
    for l in std::fs::read_to_string(path).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f[0] == "hr" {
            seqs.extend(f[1].parse::<u64>().unwrap()..=f[2].parse::<u64>().unwrap());
            reasons.insert(f[4].to_string());
        }
    }
    (seqs, reasons)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A realistic ITCH day, both lines losing 5%: `tickplant run` with `[recovery] rerequest`
/// delivers the whole feed on HR, reports no gap, and its books equal the simulator's.
#[test]
fn rerequest_fills_what_both_lines_lost_and_the_books_are_exact() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 21 --symbols 30 --messages 20000 --out day.pcap --truth truth.jsonl"));
    ok(p, &words("sim impair --in day.pcap --seed 21 --loss-a 0.05 --loss-b 0.05 --reorder 0.01 --out-a a.pcap --out-b b.pcap"));
    let (a, b) = (messages(&p.join("a.pcap")), messages(&p.join("b.pcap")));
    let union: BTreeSet<u64> = a.iter().chain(&b).copied().collect();
    let whole = messages(&p.join("day.pcap"));
    let last = *whole.last().unwrap();
    assert!(union.contains(&last), "the seed keeps the last packet on a line (a lost tail has no hole to see)");
    let both_lost = (1..=last).filter(|s| !union.contains(s)).count();
    assert!(both_lost > 20, "the seed loses messages on both lines: {both_lost}");
    let (ps, pa, pb) = (port(), port(), port());
    std::fs::write(
        p.join("run.toml"),
        format!(
            "[source]\na = \"udp://127.0.0.1:{pa}\"\nb = \"udp://127.0.0.1:{pb}\"\ndate = \"2026-11-20\"\n\
             [arbitration]\nstart-seq = 1\ntimeout-us = 300000\nhr-out = \"hr.pcap\"\n\
             [recovery]\nrerequest = \"udp://127.0.0.1:{ps}\"\n\
             [book]\nmax-orders = 100000\ndepth = 1000\nfinal-books = \"books.jsonl\"\n\
             [run]\nreport = \"report.json\"\nduration-s = 4\n"
        ),
    )
    .unwrap();
    let mut procs = Procs(Vec::new());
    let server = procs.spawn(p, &format!("sim rerequest-server --feed day.pcap --listen 127.0.0.1:{ps} --duration 5"));
    let handler = procs.spawn(p, "run run.toml --quiet");
    std::thread::sleep(Duration::from_millis(700));
    ok(p, &words(&format!("replay -q --pps 8000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb}")));
    procs.wait(handler);
    procs.wait(server);

    let got = messages(&p.join("hr.pcap"));
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, once");
    assert_eq!(got.len() as u64, last, "HR is the whole feed");
    assert_eq!(got.last(), Some(&last));
    let r = json(&p.join("report.json"));
    let arb = &r["arbitration"];
    assert_eq!(arb["hr"]["gaps"], 0, "no gap reported");
    let rr = &arb["rerequest"];
    // At least what both lost; a line's copy delayed past the line wait may lose the race
    // to the answer, which then counts too.
    let recovered = rr["messages_recovered"].as_u64().unwrap();
    assert!(recovered >= both_lost as u64 && recovered <= rr["messages_requested"].as_u64().unwrap(), "{rr}");
    assert_eq!(rr["unanswered"], 0);
    let books: Vec<serde_json::Value> = std::fs::read_to_string(p.join("books.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut compared = 0;
    for l in std::fs::read_to_string(p.join("truth.jsonl")).unwrap().lines() {
        let t: serde_json::Value = serde_json::from_str(l).unwrap();
        let b = books.iter().find(|b| b["symbol"] == t["symbol"]).unwrap_or_else(|| panic!("no book {}", t["symbol"]));
        assert_eq!((&b["bids"], &b["asks"]), (&t["bids"], &t["asks"]), "{}", t["symbol"]);
        compared += 1;
    }
    assert!(compared >= 20, "{compared} books compared");
}

/// What a run of `tickplant arb` with re-request left: the messages both lines lost
/// (before the last message either carried), what it delivered on HR, its HR gaps and their
/// reasons, its stats and the server's report.
struct Outcome {
    _dir: tempfile::TempDir,
    both_lost: BTreeSet<u64>,
    got: Vec<u64>,
    gaps: BTreeSet<u64>,
    reasons: BTreeSet<String>,
    stats: serde_json::Value,
    server: serde_json::Value,
}

/// Runs `tickplant arb` with re-request against a server with `faults`.
fn arb_against(faults: &str, seed: u64) -> Outcome {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words(&format!("sim moldudp64 --seed {seed} --packets 3000 --out feed.pcap")));
    ok(
        p,
        &words(&format!(
            "sim impair --in feed.pcap --seed {seed} --loss-a 0.06 --loss-b 0.06 --out-a a.pcap --out-b b.pcap"
        )),
    );
    let (a, b) = (messages(&p.join("a.pcap")), messages(&p.join("b.pcap")));
    let union: BTreeSet<u64> = a.iter().chain(&b).copied().collect();
    let last = *union.iter().next_back().unwrap();
    let both_lost: BTreeSet<u64> = (1..=last).filter(|s| !union.contains(s)).collect();
    let (ps, pa, pb) = (port(), port(), port());
    let mut procs = Procs(Vec::new());
    let server = procs.spawn(
        p,
        &format!(
            "sim rerequest-server --feed feed.pcap --listen 127.0.0.1:{ps} --duration 4.5 --report server.json {faults}"
        ),
    );
    let handler = procs.spawn(
        p,
        &format!(
            "arb --a udp://127.0.0.1:{pa} --b udp://127.0.0.1:{pb} --rerequest udp://127.0.0.1:{ps} --start-seq 1 \
             --timeout-us 300000 --hr-out hr.pcap --gaps gaps.csv --stats stats.json --duration 4 -q"
        ),
    );
    std::thread::sleep(Duration::from_millis(700));
    ok(p, &words(&format!("replay -q --pps 5000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb}")));
    procs.wait(handler);
    procs.wait(server);
    let got = messages(&p.join("hr.pcap"));
    let (gaps, reasons) = hr_gaps(&p.join("gaps.csv"));
    let (stats, server) = (json(&p.join("stats.json")), json(&p.join("server.json")));
    Outcome { _dir: d, both_lost, got, gaps, reasons, stats, server }
}

/// A server that never has some sequence numbers and answers at most three messages a
/// request: the handler asks again for the rest, and the gaps left are exactly the
/// messages both lines lost that the server withheld, each given up as
/// `rerequest-timeout`.
#[test]
fn what_the_server_does_not_answer_is_exactly_the_gaps() {
    let o = arb_against("--refuse-share 0.3 --max-answer 3 --seed 5", 31);
    let refused: BTreeSet<u64> = o.server["refused"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let withheld: BTreeSet<u64> = o.both_lost.intersection(&refused).copied().collect();
    assert!(!withheld.is_empty() && withheld.len() < o.both_lost.len(), "the seed refuses some: {withheld:?}");
    assert_eq!(o.gaps, withheld, "the HR gaps are what was not answered");
    assert_eq!(o.reasons, BTreeSet::from(["rerequest-timeout".to_string()]));
    assert!(o.got.windows(2).all(|w| w[0] < w[1]), "in order, once");
    let delivered: BTreeSet<u64> = o.got.iter().copied().collect();
    let last = *delivered.iter().next_back().unwrap();
    assert!((1..=last).all(|s| delivered.contains(&s) ^ o.gaps.contains(&s)), "each message delivered or a gap");
    let rr = &o.stats["rerequest"];
    assert!(rr["retries"].as_u64().unwrap() > 0, "asked again for the rest: {rr}");
    // What the answers brought: every message both lines lost that the server had; more
    // only where a line fell more than the line wait behind (a loaded machine) and its
    // hole was asked for too (see `a_silent_server_costs_only_its_counters`).
    let (recovered, lost) = (rr["messages_recovered"].as_u64().unwrap(), (o.both_lost.len() - withheld.len()) as u64);
    let runs = o.both_lost.iter().filter(|&&s| !o.both_lost.contains(&(s - 1))).count() as u64;
    if rr["holes"].as_u64().unwrap() == runs {
        assert_eq!(recovered, lost, "{rr}");
    } else {
        assert!(recovered >= lost, "{rr}");
    }
}

/// A server that answers nothing: every message both lines lost is a gap, given up as
/// `rerequest-timeout`; the requests were bounded by their retries.
#[test]
fn a_silent_server_costs_only_its_counters() {
    let o = arb_against("--drop-share 1", 32);
    assert_eq!(o.gaps, o.both_lost);
    assert_eq!(o.reasons, BTreeSet::from(["rerequest-timeout".to_string()]));
    assert!(o.got.windows(2).all(|w| w[0] < w[1]));
    let rr = &o.stats["rerequest"];
    let n = |k: &str| rr[k].as_u64().unwrap();
    assert!(n("holes") > 0);
    assert_eq!(n("messages_recovered"), 0);
    // Each run of messages both lines lost is one range, given up after the first request
    // and three retries.
    let runs = o.both_lost.iter().filter(|&&s| !o.both_lost.contains(&(s - 1))).count() as u64;
    assert_eq!(n("unanswered"), runs, "{rr}");
    // A line that falls more than the line wait (1 ms) behind the other, as on a loaded
    // machine, has its hole asked for too, until its packet comes: more holes than runs,
    // each a request or more that is neither answered nor given up.
    if n("holes") == runs {
        assert_eq!(n("requests"), runs * 4, "{rr}");
    } else {
        assert!(n("holes") > runs && n("requests") > runs * 4, "{rr}");
    }
    assert_eq!(n("requests"), o.server["stats"]["requests"].as_u64().unwrap(), "{rr}");
}

/// docs/recovery.md: the run config parses into a live run with re-request on; the
/// server example's commands run as written (a line ending in `&` in the background) and
/// the HR stream it leaves is the whole feed, with no HR gap.
#[test]
fn recovery_doc_examples_run() {
    let doc = std::fs::read_to_string(common::root().join("docs/recovery.md")).unwrap();
    let toml = doc.split("```toml\n").nth(1).unwrap().split("```").next().unwrap();
    let cfg = tickplant_io::config::RunConfig::parse(toml).unwrap();
    let spec = cfg.spec(false).unwrap();
    assert!(spec.arb.rerequest.is_some() && spec.live.rerequest.is_some());
    let snapshot = doc.split("```toml\n").nth(2).unwrap().split("```").next().unwrap();
    let cfg = tickplant_io::config::RunConfig::parse(snapshot).unwrap();
    let s = cfg.recovery.snapshot().unwrap().unwrap();
    assert_eq!((s.server.as_str(), s.login.username.as_str(), s.retries), ("10.0.5.2:9100", "user1", 3));
    let section = doc.split("## A re-request server for tests and demos").nth(1).unwrap();
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let mut procs = Procs(Vec::new());
    let mut background = Vec::new();
    for line in block.lines().filter_map(|l| l.strip_prefix("tickplant ")) {
        match line.strip_suffix(" &") {
            Some(l) => {
                background.push(procs.spawn(p, l));
                std::thread::sleep(Duration::from_millis(350));
            }
            None => ok(p, &words(line)),
        }
    }
    assert_eq!(background.len(), 2);
    for k in background {
        procs.wait(k);
    }
    let got = messages(&p.join("hr.pcap"));
    let n = messages(&p.join("feed.pcap")).len() as u64;
    let first_wrong = got.iter().zip(1..).find(|(g, want)| **g != *want);
    assert!(
        first_wrong.is_none() && got.len() as u64 == n,
        "HR {} of {n} messages, first wrong {first_wrong:?}",
        got.len()
    );
    assert!(hr_gaps(&p.join("gaps.csv")).0.is_empty());
}

/// A run config joining late: the lines and the re-request and GLIMPSE servers given.
fn late_config(pa: u16, pb: u16, ps: u16, pg: u16, extra: &str) -> String {
    format!(
        "[source]\na = \"udp://127.0.0.1:{pa}\"\nb = \"udp://127.0.0.1:{pb}\"\ndate = \"2026-11-20\"\n\
         [arbitration]\ntimeout-us = 300000\n\
         [recovery]\nrerequest = \"udp://127.0.0.1:{ps}\"\nsnapshot = \"tcp://127.0.0.1:{pg}\"\n\
         username = \"user1\"\npassword = \"pw\"\n{extra}\
         [book]\nmax-orders = 100000\ndepth = 1000\nfinal-books = \"books.jsonl\"\n\
         [run]\nreport = \"report.json\"\nduration-s = 3\n"
    )
}

/// The books of `books.jsonl` against the truth: the symbols that differ.
fn books_differ(p: &Path) -> Vec<String> {
    let books: Vec<serde_json::Value> = std::fs::read_to_string(p.join("books.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut differ = Vec::new();
    for l in std::fs::read_to_string(p.join("truth.jsonl")).unwrap().lines() {
        let t: serde_json::Value = serde_json::from_str(l).unwrap();
        match books.iter().find(|b| b["symbol"] == t["symbol"]) {
            Some(b) if (&b["bids"], &b["asks"]) == (&t["bids"], &t["asks"]) => {}
            _ => differ.push(t["symbol"].to_string()),
        }
    }
    differ
}

/// A handler started `after` into the replay of an ITCH day (both lines losing 2%), with
/// the GLIMPSE server following the replay: returns the directory, the handler's report
/// and the server's.
fn join_late(
    after: Duration,
    glimpse_faults: &str,
    seed: u64,
) -> (tempfile::TempDir, serde_json::Value, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words(&format!("sim itch --seed {seed} --symbols 20 --messages 12000 --out day.pcap --truth truth.jsonl")));
    ok(
        p,
        &words(&format!(
            "sim impair --in day.pcap --seed {seed} --loss-a 0.02 --loss-b 0.02 --out-a a.pcap --out-b b.pcap"
        )),
    );
    let (pa, pb, ps, pf) = (port(), port(), port(), port());
    let pg = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(p.join("run.toml"), late_config(pa, pb, ps, pg, "")).unwrap();
    let mut procs = Procs(Vec::new());
    let rr = procs.spawn(p, &format!("sim rerequest-server --feed day.pcap --listen 127.0.0.1:{ps} --duration 6"));
    let gl = procs.spawn(
        p,
        &format!(
            "sim glimpse --feed day.pcap --listen 127.0.0.1:{pg} --follow udp://127.0.0.1:{pf} --username user1 \
             --password pw --duration 6 --report glimpse.json {glimpse_faults}"
        ),
    );
    std::thread::sleep(Duration::from_millis(400));
    let mut replay = Command::new(BIN)
        .args(words(&format!(
            "replay -q --pps 6000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb} day.pcap=127.0.0.1:{pf}"
        )))
        .current_dir(p)
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let handler = procs.spawn(p, "run run.toml --quiet");
    assert!(replay.wait().unwrap().success());
    procs.wait(handler);
    procs.wait(gl);
    procs.wait(rr);
    let report = json(&p.join("report.json"));
    let server = json(&p.join("glimpse.json"));
    (d, report, server)
}

/// Late joins at several points of a simulated day: each run's books, from the snapshot
/// and then the live feed from its sequence number, equal the simulator's at the end.
#[test]
fn a_late_join_at_several_points_ends_with_exact_books() {
    let mut inside = 0;
    for (k, after_ms) in [150u64, 450, 800].into_iter().enumerate() {
        let (d, r, _) = join_late(Duration::from_millis(after_ms), "", 40 + k as u64);
        let j = &r["late_join"];
        assert_eq!(j["attempts"], 1, "{j}");
        let seq = j["snapshot_seq"].as_u64().unwrap();
        let snap = &r["snapshot"];
        assert_eq!(snap["messages"], snap["decoded"], "{snap}");
        inside += usize::from(seq > 1 && snap["messages"].as_u64().unwrap() > 0);
        assert_eq!(r["arbitration"]["hr"]["gaps"], 0, "re-request fills what both lines lost");
        let differ = books_differ(d.path());
        assert!(differ.is_empty(), "join at {after_ms} ms (snapshot at {seq}): books differ for {differ:?}");
    }
    assert!(inside >= 2, "the joins fell inside the day: {inside}");
}

/// The server drops the first connection mid-snapshot, or serves a first snapshot behind
/// the live feed: the handler takes another, says why in its report, and its books are
/// exact (nothing applied twice).
#[test]
fn a_snapshot_dropped_or_behind_is_taken_again() {
    for (faults, why) in [("--drop-after 20", "closed the connection"), ("--behind 2000", "first seen at")] {
        let (d, r, server) = join_late(Duration::from_millis(400), faults, 50);
        let j = &r["late_join"];
        assert_eq!(j["attempts"], 2, "{faults}: {j}");
        assert!(j["failures"][0].as_str().unwrap().contains(why), "{faults}: {j}");
        assert_eq!(server["connections"], 2);
        let differ = books_differ(d.path());
        assert!(differ.is_empty(), "{faults}: books differ for {differ:?}");
    }
}

/// A rejected login is an error that says so, and the run stops (no books from nothing).
#[test]
fn a_rejected_login_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 3 --symbols 5 --messages 2000 --out day.pcap"));
    let (pa, pb, ps) = (port(), port(), port());
    let pg = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(p.join("run.toml"), late_config(pa, pb, ps, pg, "snapshot-retries = 0\n")).unwrap();
    let mut procs = Procs(Vec::new());
    let gl =
        procs.spawn(p, &format!("sim glimpse --feed day.pcap --listen 127.0.0.1:{pg} --reject-login --duration 3"));
    std::thread::sleep(Duration::from_millis(300));
    let o = Command::new(BIN).args(["run", "run.toml", "--quiet"]).current_dir(p).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("login rejected") && err.contains("not authorized"), "{err}");
    procs.wait(gl);
}

/// Gaps re-request cannot fill (the server refuses a share of the sequence numbers): the
/// books go stale at each, a snapshot rebuilds them, and a consumer sees each gap record
/// and then a `trusted` record, in order; no record between a gap and the `trusted` after
/// it claims a trusted book, none after it a stale one; the books equal the truth at the end.
#[test]
fn a_gap_re_request_cannot_fill_is_recovered_by_a_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim itch --seed 61 --symbols 20 --messages 12000 --out day.pcap --truth truth.jsonl"));
    ok(p, &words("sim impair --in day.pcap --seed 61 --loss-a 0.03 --loss-b 0.03 --out-a a.pcap --out-b b.pcap"));
    let (pa, pb, ps, pf) = (port(), port(), port(), port());
    let pg = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cfg = late_config(pa, pb, ps, pg, "snapshot-interval-s = 0.05\n")
        .replace("timeout-us = 300000", "timeout-us = 60000")
        .replace("[run]", "[[consumer]]\nname = \"all\"\naction = \"jsonl\"\npath = \"records.jsonl\"\n[run]");
    std::fs::write(p.join("run.toml"), cfg).unwrap();
    let mut procs = Procs(Vec::new());
    let rr = procs.spawn(
        p,
        &format!("sim rerequest-server --feed day.pcap --listen 127.0.0.1:{ps} --refuse-share 0.3 --duration 6"),
    );
    let gl = procs.spawn(
        p,
        &format!(
            "sim glimpse --feed day.pcap --listen 127.0.0.1:{pg} --follow udp://127.0.0.1:{pf} --username user1 \
             --password pw --duration 6"
        ),
    );
    let handler = procs.spawn(p, "run run.toml --quiet");
    std::thread::sleep(Duration::from_millis(500));
    ok(p, &words(&format!("replay -q --pps 5000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb} day.pcap=127.0.0.1:{pf}")));
    procs.wait(handler);
    procs.wait(gl);
    procs.wait(rr);
    let r = json(&p.join("report.json"));
    let gaps = r["arbitration"]["hr"]["gaps"].as_u64().unwrap();
    assert!(gaps > 0, "the server refuses some: {}", r["arbitration"]["rerequest"]);
    let rs = &r["resync"];
    assert!(rs["applied"].as_u64().unwrap() >= 1, "{rs}");
    assert_eq!(r["stale_books"], 0, "{rs}");
    let differ = books_differ(p);
    assert!(differ.is_empty(), "books differ for {differ:?}; {rs}");
    // The records: after each gap the books are stale until a trusted record; a trusted
    // record follows the last gap.
    let (mut stale, mut gap_records, mut trusted) = (false, 0, 0);
    for l in std::fs::read_to_string(p.join("records.jsonl")).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        match v["action"].as_str().unwrap() {
            "gap" => {
                stale = true;
                gap_records += 1;
            }
            "trusted" => {
                assert!(stale, "a trusted record only after a gap");
                stale = false;
                trusted += 1;
            }
            _ => {
                let flagged = v["flags"].as_u64().unwrap() & 0x40 != 0;
                if v["instrument_id"].as_u64().unwrap() != 0 && !stale {
                    assert!(!flagged, "a trusted book's event is not flagged stale: {v}");
                }
            }
        }
    }
    assert_eq!(gap_records as u64, gaps);
    assert!(trusted >= 1 && !stale, "{trusted} trusted records; stale at the end: {stale}");
}

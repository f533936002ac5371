//! Live runs on the wire: `tickplant replay` sending captures, `tickplant arb` reading
//! groups and sending its HR stream on, a receiver capturing it. The end-to-end test runs
//! in network namespaces it creates (veth pairs; root only, as CI runs) and removes, even
//! when it fails; every process it starts has a duration and is killed if it outlives it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tickplant_io::FrameReader;

mod common;
use common::{finish, messages, words};

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

fn ok(dir: &Path, args: &[&str]) {
    let o = Command::new(BIN).args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "tickplant {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Network namespaces (`tickplant_io::netns::Lab`) and the processes started in them:
/// all killed or removed on drop (the processes first).
struct Lab {
    children: Vec<Child>,
    net: tickplant_io::netns::Lab,
}

impl Lab {
    fn spawn(&mut self, ns: &str, dir: &Path, args: &[&str]) -> usize {
        let c = self
            .net
            .command(ns, BIN)
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.children.push(c);
        self.children.len() - 1
    }
    /// Wait for child `k` (at most `limit`), and its success.
    fn wait(&mut self, k: usize, limit: Duration) {
        finish(&mut self.children[k], limit);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// An impaired A/B pair replayed into the handler over two interfaces, its HR stream sent
/// on to a group on a third, captured by a receiver in a third namespace: what the receiver
/// got is the sorted union of what was sent on A and B, each message once; the handler's
/// HR gaps are exactly the messages both lines lost; both runs' accounting balances (each
/// checks its own before it exits 0).
#[test]
fn ab_over_veth_republished_hr_is_the_union() {
    if !tickplant_io::netns::Lab::allowed() {
        eprintln!("SKIPPED: network namespaces need root (CI runs as root and runs this test)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim moldudp64 --seed 11 --packets 4000 --out feed.pcap"));
    ok(p, &words("sim impair --in feed.pcap --seed 11 --loss-a 0.04 --loss-b 0.04 --reorder 0.02 --dup 0.02 --skew-us 0..20 --out-a a.pcap --out-b b.pcap"));
    let prefix = format!("tp{}", std::process::id() % 100_000);
    let mut lab = Lab { children: Vec::new(), net: tickplant_io::netns::Lab::new(&prefix) };
    for n in ["src", "hdl", "rcv"] {
        lab.net.add(n).expect("ip netns add (as root: the kernel must allow network namespaces)");
    }
    lab.net.link("src", "hdl", "a", "10.77.1.1", "10.77.1.2").unwrap();
    lab.net.link("src", "hdl", "b", "10.77.2.1", "10.77.2.2").unwrap();
    lab.net.link("hdl", "rcv", "r", "10.77.3.1", "10.77.3.2").unwrap();
    let rcv = lab.spawn(
        "rcv",
        p,
        &words("arb --a udp://239.77.3.1:6000?iface=10.77.3.2 --start-seq 1 --hr-out received.pcap --duration 6 -q"),
    );
    let hdl = lab.spawn(
        "hdl",
        p,
        &words(
            "arb --a udp://239.77.1.1:5001?iface=10.77.1.2 --b udp://239.77.2.1:5002?iface=10.77.2.2 \
             --hr-out udp://239.77.3.1:6000?iface=10.77.3.1 --start-seq 1 --timeout-us 300000 \
             --gaps gaps.csv --stats handler.json --duration 5 -q",
        ),
    );
    // The sockets are joined well before the first datagram. The HR window (300 ms) is
    // wider than any stall of the sender on a loaded machine: a stall between a packet on A
    // and its copy on B is skew on the wire, and the handler would rightly give up on it.
    std::thread::sleep(Duration::from_millis(1500));
    let o = lab
        .net
        .command("src", BIN)
        .args(words("replay -q a.pcap=239.77.1.1:5001@10.77.1.1 b.pcap=239.77.2.1:5002@10.77.2.1 --report replay.json"))
        .current_dir(p)
        .output()
        .unwrap();
    assert!(o.status.success(), "replay: {}", String::from_utf8_lossy(&o.stderr));
    lab.wait(hdl, Duration::from_secs(30));
    lab.wait(rcv, Duration::from_secs(30));

    let (a, b) = (messages(&p.join("a.pcap")), messages(&p.join("b.pcap")));
    let union: BTreeSet<u64> = a.iter().chain(&b).copied().collect();
    let received = messages(&p.join("received.pcap"));
    assert!(received.windows(2).all(|w| w[0] < w[1]), "the HR stream is in order, each message once");
    let got: BTreeSet<u64> = received.iter().copied().collect();
    let missing: Vec<_> = union.difference(&got).take(10).collect();
    let extra: Vec<_> = got.difference(&union).take(10).collect();
    assert!(missing.is_empty() && extra.is_empty(), "HR is the union of A and B: missing {missing:?}, extra {extra:?}");
    let last = *union.iter().next_back().unwrap();
    let both_lost: BTreeSet<u64> = (1..=last).filter(|s| !union.contains(s)).collect();
    let mut reported = BTreeSet::new();
    for l in std::fs::read_to_string(p.join("gaps.csv")).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f[0] == "hr" {
            reported.extend(f[1].parse::<u64>().unwrap()..=f[2].parse::<u64>().unwrap());
        }
    }
    assert_eq!(reported, both_lost, "the HR gaps are what both lines lost");
    let st: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("handler.json")).unwrap()).unwrap();
    let sent = st["sent"]["hr"]["datagrams"].as_u64().unwrap();
    assert_eq!(sent, st["outputs"]["hr"]["packets"].as_u64().unwrap(), "every HR packet sent on");
    assert_eq!(st["sent"]["hr"]["errors"], 0);
    for i in 0..2 {
        assert_eq!(st["live"][i]["kernel_drops"], 0, "no loss in the kernel at this rate");
    }
    let rp: serde_json::Value = serde_json::from_slice(&std::fs::read(p.join("replay.json")).unwrap()).unwrap();
    assert_eq!(
        st["live"][0]["datagrams"].as_u64().unwrap() + st["live"][1]["datagrams"].as_u64().unwrap(),
        rp["frames_sent"].as_u64().unwrap(),
        "the handler received every datagram sent"
    );
}

/// Paced replay at a fixed rate: the receive stamps of what arrives (the HR output of a
/// one-line receiver on loopback, stamped by the kernel) are spaced as the deadlines are.
/// Loose bounds: the spacing's median within a fifth of the period, the whole span within
/// a fifth or a quarter (the test checks the pacing, not the machine's speed; CI runs other
/// tests beside it on two cores).
#[test]
fn replay_at_a_fixed_rate_is_spaced_as_the_deadlines() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim moldudp64 --seed 12 --packets 400 --out feed.pcap"));
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let mut rx = Command::new(BIN)
        .args(words(&format!("arb --a udp://127.0.0.1:{port} --start-seq 1 --hr-out got.pcap --duration 4 -q")))
        .current_dir(p)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    ok(p, &words(&format!("replay -q --pps 1000 feed.pcap=127.0.0.1:{port}")));
    finish(&mut rx, Duration::from_secs(30));
    let mut r = FrameReader::open(p.join("got.pcap")).unwrap();
    let mut ts = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        ts.push(f.ts_ns);
    }
    assert_eq!(ts.len(), 400, "every datagram arrived");
    let mut gaps: Vec<u64> = ts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2] as f64;
    assert!((800_000.0..1_200_000.0).contains(&median), "median spacing {median} ns against 1 ms");
    let span = (ts[ts.len() - 1] - ts[0]) as f64;
    assert!((399e6 * 0.8..399e6 * 1.25).contains(&span), "span {span} ns against 399 ms");
}

/// The handler killed mid-stream and started again: the second run begins where it joins
/// the line (no start sequence given) and delivers everything after that, in order and
/// once, or reports it as a gap; nothing it delivers comes twice.
#[test]
fn a_handler_restarted_mid_stream_delivers_or_reports_everything_after() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim moldudp64 --seed 13 --packets 3000 --out feed.pcap"));
    ok(p, &words("sim impair --in feed.pcap --seed 13 --loss-a 0.05 --loss-b 0.05 --out-a a.pcap --out-b b.pcap"));
    let port = |_: u8| {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let (pa, pb) = (port(0), port(1));
    let handler = |out: &str, extra: &str| {
        Command::new(BIN)
            .args(words(&format!(
                "arb --a udp://127.0.0.1:{pa} --b udp://127.0.0.1:{pb} --timeout-us 300000 --hr-out {out}.pcap \
                 --gaps {out}.csv {extra} -q"
            )))
            .current_dir(p)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut first = handler("first", "--duration 30");
    std::thread::sleep(Duration::from_millis(500));
    // About 5,700 frames of A and B at 4,000 a second: 1.4 s; the kill comes 0.5 s in.
    let mut sender = Command::new(BIN)
        .args(words(&format!("replay -q --pps 4000 a.pcap=127.0.0.1:{pa} b.pcap=127.0.0.1:{pb}")))
        .current_dir(p)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let _ = first.kill();
    let _ = first.wait();
    let mut second = handler("second", "--duration 2.5");
    assert!(sender.wait().unwrap().success());
    // The second run ends on its duration, exit 0.
    finish(&mut second, Duration::from_secs(30));

    let got = messages(&p.join("second.pcap"));
    assert!(!got.is_empty(), "the second run received the rest of the day");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, nothing twice");
    let (a, b) = (messages(&p.join("a.pcap")), messages(&p.join("b.pcap")));
    let union: BTreeSet<u64> = a.iter().chain(&b).copied().collect();
    let (from, to) = (got[0], *union.iter().next_back().unwrap());
    let mut reported = BTreeSet::new();
    for l in std::fs::read_to_string(p.join("second.csv")).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f[0] == "hr" {
            reported.extend(f[1].parse::<u64>().unwrap()..=f[2].parse::<u64>().unwrap());
        }
    }
    let delivered: BTreeSet<u64> = got.iter().copied().collect();
    for s in from..=to {
        assert!(delivered.contains(&s) ^ reported.contains(&s), "message {s}: delivered or reported, once");
    }
}

/// `sim relay` copies a live stream onto two lines, impaired: the handler fed by it
/// delivers exactly the messages either line carried (by the relay's truth) and reports
/// exactly those both lost.
#[test]
fn the_relay_impairs_live_as_its_truth_says() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    ok(p, &words("sim moldudp64 --seed 14 --packets 3000 --out feed.pcap"));
    let port = || std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (pin, pa, pb) = (port(), port(), port());
    let spawn =
        |args: String| Command::new(BIN).args(words(&args)).current_dir(p).stderr(Stdio::piped()).spawn().unwrap();
    let relay = spawn(format!(
        "sim relay --in udp://127.0.0.1:{pin} --out-a udp://127.0.0.1:{pa} --out-b udp://127.0.0.1:{pb} \
         --seed 14 --loss-a 0.05 --loss-b 0.05 --reorder 0.02 --dup 0.02 --skew-us 0..20 --truth truth.csv --duration 4"
    ));
    let handler = spawn(format!(
        "arb --a udp://127.0.0.1:{pa} --b udp://127.0.0.1:{pb} --start-seq 1 --timeout-us 300000 \
         --hr-out hr.pcap --gaps gaps.csv --duration 5 -q"
    ));
    std::thread::sleep(Duration::from_millis(700));
    ok(p, &words(&format!("replay -q feed.pcap=127.0.0.1:{pin}")));
    for mut c in [relay, handler] {
        finish(&mut c, Duration::from_secs(30));
    }
    let (mut carried, mut both_lost) = (BTreeSet::new(), BTreeSet::new());
    let truth = std::fs::read_to_string(p.join("truth.csv")).unwrap();
    for l in truth.lines().skip(1) {
        let f: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        let msgs = f[1]..f[1] + f[2];
        if f[3] == 0 && f[4] == 0 {
            both_lost.extend(msgs);
        } else {
            carried.extend(msgs);
        }
    }
    assert_eq!(truth.lines().count(), 3001, "the truth has every packet");
    assert!(!both_lost.is_empty(), "the seed loses some packets on both lines");
    let got = messages(&p.join("hr.pcap"));
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, once");
    assert_eq!(got.into_iter().collect::<BTreeSet<u64>>(), carried);
    let mut reported = BTreeSet::new();
    for l in std::fs::read_to_string(p.join("gaps.csv")).unwrap().lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f[0] == "hr" {
            reported.extend(f[1].parse::<u64>().unwrap()..=f[2].parse::<u64>().unwrap());
        }
    }
    let last = *carried.iter().next_back().unwrap();
    assert_eq!(reported, both_lost.into_iter().filter(|&s| s < last).collect::<BTreeSet<u64>>());
}

/// A receive buffer the kernel caps below what was asked (`net.core.rmem_max`, for a
/// process without CAP_NET_ADMIN: `setpriv` drops it) is warned of, at the start and in the
/// summary, with the figures and the way out; with the capability, no warning.
#[test]
fn a_receive_buffer_capped_by_the_kernel_is_warned_of() {
    let Ok(max) = std::fs::read_to_string("/proc/sys/net/core/rmem_max") else {
        eprintln!("skipped: no /proc/sys/net/core/rmem_max");
        return;
    };
    let asked = (max.trim().parse::<u64>().unwrap() * 2 + (1 << 20)).min(i32::MAX as u64 / 2);
    let url = format!("udp://239.1.2.3:45681?rcvbuf={asked}");
    let d = tempfile::tempdir().unwrap();
    let ll = d.path().join("ll.pcap");
    let run = |capped: bool| {
        let mut c = if capped {
            let mut c = Command::new("setpriv");
            c.args(["--bounding-set=-net_admin", BIN]);
            c
        } else {
            Command::new(BIN)
        };
        let o = c.args(["arb", "--a", &url, "--duration", "0.2", "--ll-out", ll.to_str().unwrap()]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{err}");
        err
    };
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: needs root (CAP_NET_ADMIN to drop) and setpriv");
        return;
    }
    let w = format!("not the {asked} asked: net.core.rmem_max caps it");
    let free = run(false);
    if free.contains(&w) {
        // No CAP_NET_ADMIN here even as root (a container without it): capped already.
        assert_eq!(free.matches(&w).count(), 2, "at the start and in the summary: {free}");
        return;
    }
    assert!(!free.contains("receive buffer is"), "{free}");
    let err = run(true);
    assert_eq!(err.matches(&w).count(), 2, "at the start and in the summary: {err}");
}

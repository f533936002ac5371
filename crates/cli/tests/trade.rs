//! End to end on loopback with the real binary: `sim exchange`, `trade --strategy fttc` and
//! `sim fix-md`. Every whole-dollar price produces exactly one BUY, every BUY fill exactly
//! one SELL; nothing lost or doubled. A risk limit stops the orders it should.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

/// One harness at a time: the engines busy-poll, and several at once on a 2-core machine
/// would starve each other's market data.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(BIN).args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn finish(c: Child, what: &str) -> String {
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{what} failed: {err}");
    err
}

/// `sim fix-md` of ten symbols at 5,000 messages a second to `group`, its truth in `truth`.
fn fix_md(dir: &Path, group: &str, duration: &str, truth: &str) -> Child {
    let args = ["sim", "fix-md", "--group", group, "--symbols", "10", "--rate", "5000", "--duration", duration];
    spawn(dir, &[&args[..], &["--truth", truth]].concat())
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Run the three parts; returns the trade report and the market data truth.
fn harness(dir: &Path, group: &str, trade_extra: &[&str]) -> (serde_json::Value, serde_json::Value) {
    harness_with(dir, group, trade_extra, |_| {})
}

/// Send `sig` (`-INT`, `-TERM`) to `c`.
fn signal(c: &Child, sig: &str) {
    let s = Command::new("kill").args([sig, &c.id().to_string()]).status().unwrap();
    assert!(s.success(), "kill {sig}");
}

/// Start the three in order (the exchange, then the engine logged on, then the market data)
/// with the durations given (exchange, trade, market data); returns them in that order.
fn start(dir: &Path, group: &str, trade_extra: &[&str], durations: [&str; 3]) -> (Child, Child, Child) {
    let listen = format!("127.0.0.1:{}", free_port());
    let ex =
        spawn(dir, &["sim", "exchange", "--listen", &listen, "--fill-delay-us", "300", "--duration", durations[0]]);
    std::thread::sleep(Duration::from_millis(400));
    let mut args = vec![
        "trade",
        "--md",
        group,
        "--iface",
        "127.0.0.1",
        "--exchange",
        &listen,
        "--sender",
        "TP",
        "--target",
        "EXCH",
        "--duration",
        durations[1],
        "--report",
        "report.json",
    ];
    args.extend_from_slice(trade_extra);
    let tr = spawn(dir, &args);
    std::thread::sleep(Duration::from_millis(800));
    let md = fix_md(dir, group, durations[2], "truth.json");
    (ex, tr, md)
}

/// The same, with `during` run on its own thread from the moment the market data starts.
fn harness_with(
    dir: &Path,
    group: &str,
    trade_extra: &[&str],
    during: impl FnOnce(std::time::Instant) + Send + 'static,
) -> (serde_json::Value, serde_json::Value) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (ex, tr, md) = start(dir, group, trade_extra, ["6s", "4s", "2s"]);
    let started = std::time::Instant::now();
    let side = std::thread::spawn(move || during(started));
    finish(md, "sim fix-md");
    side.join().unwrap();
    finish(tr, "trade");
    // The exchange's work is done once the engine has logged out: SIGTERM ends it there
    // (its duration is the bound), and it still reports.
    signal(&ex, "-TERM");
    let summary = finish(ex, "sim exchange");
    assert!(
        summary.contains(" sessions, ") && summary.contains(" fills"),
        "the exchange's summary after SIGTERM: {summary}"
    );
    (json(&dir.join("report.json")), json(&dir.join("truth.json")))
}

#[test]
fn every_whole_dollar_price_buys_once_and_every_fill_sells_once() {
    let d = tempfile::tempdir().unwrap();
    let (r, truth) = harness(d.path(), "239.255.7.1:31701", &["--store", "fixstore"]);
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    assert_eq!(n("md_messages"), truth["messages"].as_u64().unwrap(), "no datagram lost on loopback");
    assert_eq!(n("md_gaps"), 0);
    assert_eq!(n("md_entries"), truth["entries"].as_u64().unwrap());
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 5, "the run should see whole-dollar prices: {whole}");
    assert_eq!(n("whole_dollar_prices"), whole);
    assert_eq!(n("buys_sent"), whole, "one BUY per whole-dollar price");
    assert_eq!(n("buy_fills"), whole);
    assert_eq!(n("sells_sent"), whole, "one SELL per BUY fill");
    assert_eq!(n("sell_fills"), whole);
    assert_eq!(n("acks"), 2 * whole);
    assert_eq!(r["latency_ns"]["tick-to-trade"]["count"].as_u64().unwrap(), whole);
    // Wire-to-wire from the kernel's timestamps: one per BUY (the datagram's receive time to
    // the order's transmit time), unless the kernel refused to stamp (then it says why).
    if r["wire_error"].is_null() {
        let w = &r["latency_ns"]["wire-to-wire"];
        let (count, missing) = (w["count"].as_u64().unwrap(), n("wire_missing"));
        assert_eq!(count + missing, whole, "{r}");
        assert!(count >= whole / 2, "most orders get a wire-to-wire time: {r}");
        assert!(w["p50"].as_u64().unwrap() > 0 && w["p50"].as_u64().unwrap() < 10_000_000, "{w}");
    } else {
        eprintln!("wire-to-wire not measured here: {}", r["wire_error"]);
    }
    // The durable store holds the session's numbers: Logon, every order, Logout at least.
    let seqnums = std::fs::read_to_string(d.path().join("fixstore/seqnums")).unwrap();
    let next: u64 = seqnums.split_whitespace().next().unwrap().parse().unwrap();
    assert!(next > 2 * whole + 2, "{seqnums}");
}

/// A run that stopped after fills came and before it had kept their receipt (the store's
/// target number behind): the next run asks for them again, and each resent BUY fill whose
/// SELL the store shows sent sends no second one; the exchange, which refuses a ClOrdID
/// used before, refuses none.
#[test]
fn resent_fills_do_not_sell_twice() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let ex = spawn(d.path(), &["sim", "exchange", "--listen", &listen, "--fill-delay-us", "300", "--duration", "20s"]);
    std::thread::sleep(Duration::from_millis(400));
    let group = "239.255.7.7:31707";
    let trade = |report: &str, secs: &str| {
        let args = ["trade", "--md", group, "--exchange", &listen, "--store", "fixstore", "--duration", secs];
        spawn(d.path(), &[&args[..], &["--report", report]].concat())
    };
    let tr = trade("r1.json", "3s");
    std::thread::sleep(Duration::from_millis(800));
    let md = fix_md(d.path(), group, "1s", "t.json");
    finish(md, "sim fix-md");
    finish(tr, "trade");
    let r1 = json(&d.path().join("r1.json"));
    let whole = r1["sells_sent"].as_u64().unwrap();
    assert!(whole > 3 && r1["buy_fills"] == whole, "{r1}");
    // As a stop before the receipts were kept leaves it: nothing received kept.
    let seqnums = d.path().join("fixstore/seqnums");
    let sender = std::fs::read_to_string(&seqnums).unwrap().split_whitespace().next().unwrap().to_string();
    std::fs::write(&seqnums, format!("{sender} {:020}\n", 1)).unwrap();
    finish(trade("r2.json", "2s"), "trade");
    let r2 = json(&d.path().join("r2.json"));
    let n = |k: &str| r2[k].as_u64().unwrap_or_else(|| panic!("{k} in {r2}"));
    assert_eq!((n("buy_fills"), n("sells_sent_before"), n("sells_sent")), (whole, whole, 0), "{r2}");
    assert_eq!(n("rejected"), 0, "{r2}");
    signal(&ex, "-TERM");
    let summary = finish(ex, "sim exchange");
    assert!(summary.contains(" 0 duplicate ClOrdIDs refused"), "{summary}");
}

#[test]
fn a_risk_limit_stops_every_order_it_should() {
    let d = tempfile::tempdir().unwrap();
    let (r, truth) = harness(d.path(), "239.255.7.2:31702", &["--qty", "100", "--max-order-qty", "50"]);
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 5);
    assert_eq!(r["buys_sent"].as_u64().unwrap(), 0);
    assert_eq!(r["risk_rejects"]["max_order_qty"].as_u64().unwrap(), whole, "{r}");
}

#[test]
fn the_kill_file_stops_every_order() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("STOP"), "").unwrap();
    let (r, truth) = harness(d.path(), "239.255.7.3:31703", &["--kill-file", "STOP"]);
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 5);
    assert_eq!(r["buys_sent"].as_u64().unwrap(), 0);
    assert_eq!(r["risk_rejects"]["kill_switch"].as_u64().unwrap(), whole, "{r}");
}

#[test]
fn triggers_decide_and_change_while_running() {
    let d = tempfile::tempdir().unwrap();
    let rules = d.path().join("rules.txt");
    // At first a rule that never fires; about 0.7 s into the market data, the harness's
    // rule as a trigger.
    std::fs::write(&rules, "1: price < 0 => buy 1\n").unwrap();
    let later = rules.clone();
    let (r, truth) = harness_with(
        d.path(),
        "239.255.7.4:31704",
        &["--strategy", "triggers", "--triggers", "rules.txt"],
        move |t0| {
            std::thread::sleep(Duration::from_millis(700).saturating_sub(t0.elapsed()));
            std::fs::write(later, "# the harness, as a trigger\n1: price_frac = 0 => buy 100\n").unwrap();
        },
    );
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 5);
    assert_eq!(r["trigger_loads"].as_u64().unwrap(), 2, "{r}");
    let buys = r["buys_sent"].as_u64().unwrap();
    assert!(buys > 0 && buys < whole, "only the prices after the change trade: {buys} of {whole}");
    assert_eq!(r["buy_fills"].as_u64().unwrap(), buys);
    assert_eq!(r["sells_sent"].as_u64().unwrap(), 0, "triggers send no SELL of their own");
}

/// The exchange gone mid-run (killed, no Logout): `trade` stops at once, writes its report
/// with the reason, and exits with an error, rather than ending early as if all were well.
#[test]
fn an_exchange_gone_mid_run_is_an_error_with_a_report() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut ex = spawn(d.path(), &["sim", "exchange", "--listen", &listen, "--duration", "30s"]);
    std::thread::sleep(Duration::from_millis(400));
    let t0 = std::time::Instant::now();
    let tr = spawn(
        d.path(),
        &["trade", "--md", "239.255.7.5:31705", "--exchange", &listen, "--duration", "30s", "--report", "report.json"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    ex.kill().unwrap();
    ex.wait().unwrap();
    let o = tr.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("the exchange closed the connection without a Logout"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "it stopped when the exchange went, not at its end");
    let r = json(&d.path().join("report.json"));
    assert!(r["ended"].as_str().unwrap().contains("without a Logout"), "{r}");
}

/// A datagram holding several FIX messages (a venue that batches) has every one read and
/// traded, in order; bytes after a message that are not one count as one undecodable
/// message; `sim fix-md --batch` sends such datagrams.
#[test]
fn every_message_of_a_batched_datagram_is_read() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let ex = spawn(d.path(), &["sim", "exchange", "--listen", &listen, "--duration", "10s"]);
    std::thread::sleep(Duration::from_millis(400));
    let group = "239.255.7.6:31706";
    let tr =
        spawn(d.path(), &["trade", "--md", group, "--exchange", &listen, "--duration", "3s", "--report", "r.json"]);
    std::thread::sleep(Duration::from_millis(800));
    let md = |seq: u64, px: &str| {
        let mut w = tickplant_wire::fix::Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, seq).field(52, b"20261129-14:30:00.000");
        w.field(268, b"1").field(279, b"0").field(269, b"0").field(55, b"S0001").field(270, px.as_bytes());
        w.finish().to_vec()
    };
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&tx).set_multicast_if_v4(&std::net::Ipv4Addr::LOCALHOST).unwrap();
    tx.send_to(&md(1, "10.250"), group).unwrap();
    // The whole-dollar price is the third message of its datagram.
    tx.send_to(&[md(2, "10.500"), md(3, "10.750"), md(4, "11.000")].concat(), group).unwrap();
    tx.send_to(&[md(5, "11.250"), b"8=FIX.4.4\x01garbage".to_vec()].concat(), group).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The simulator's batches: a stream of its own (its sequence numbers start again at 1).
    let sent = Command::new(BIN)
        .args(["sim", "fix-md", "--group", group, "--symbols", "5", "--rate", "3000", "--batch", "3"])
        .args(["--duration", "500ms", "--truth", "truth.json"])
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let o = tr.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let r = json(&d.path().join("r.json"));
    let truth = json(&d.path().join("truth.json"));
    let (msgs, dgrams) = (truth["messages"].as_u64().unwrap(), truth["datagrams"].as_u64().unwrap());
    assert_eq!(msgs, 3 * dgrams, "{truth}");
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    assert_eq!((n("md_datagrams"), n("md_messages")), (3 + dgrams, 6 + msgs), "{r}");
    assert_eq!((n("md_undecodable"), n("md_gaps")), (1, 0), "{r}");
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert_eq!((n("whole_dollar_prices"), n("buys_sent")), (1 + whole, 1 + whole), "{r}");
    assert!(err.contains(&format!("{} market data messages in {} datagrams", 6 + msgs, 3 + dgrams)), "{err}");
    signal(&ex, "-TERM");
    let _ = finish(ex, "sim exchange");
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    let o = Command::new(BIN).args(["trade", "--md", "10.0.0.1:5000"]).output().unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not a multicast group"));
    let o = Command::new(BIN).args(["trade", "--strategy", "momentum"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("\"fttc\" or \"triggers\""));
    let o = Command::new(BIN).args(["trade", "--strategy", "triggers"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --triggers FILE"));
    for q in ["0", "1000000000"] {
        let o = Command::new(BIN).args(["trade", "--qty", q]).output().unwrap();
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("--qty {q}: from 1 to 999,999,999")));
    }
    for (args, says) in [
        (&["--order-field", "11=X"][..], "tag 11 is written by the engine itself"),
        (&["--order-field", "Account"], "expected TAG=VALUE"),
        (&["--order-field", "x=1"], "\"x\" is not a FIX tag number"),
        (&["--password-file", "/nonexistent/pw"], "the password file /nonexistent/pw"),
    ] {
        let o = Command::new(BIN).arg("trade").args(args).output().unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = Command::new(BIN).args(["sim", "fix-md", "--duration", "3 parsecs"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown unit"));
}

/// docs/tick-to-trade.md's three commands, as written there, in the order it gives.
#[test]
fn the_docs_harness_runs_as_written() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/tick-to-trade.md")).unwrap();
    let block = doc.split("```sh\n").nth(1).expect("the harness block").split("```").next().unwrap();
    let cmds: Vec<Vec<String>> = block
        .lines()
        .filter(|l| l.starts_with("tickplant "))
        .map(|l| l.trim_end_matches('&').split_whitespace().skip(1).map(str::to_owned).collect())
        .collect();
    assert_eq!(cmds.len(), 3);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let args = |i: usize| cmds[i].iter().map(String::as_str).collect::<Vec<_>>();
    let ex = spawn(d.path(), &args(0));
    std::thread::sleep(Duration::from_millis(400));
    let tr = spawn(d.path(), &args(1));
    std::thread::sleep(Duration::from_millis(800));
    finish(spawn(d.path(), &args(2)), "sim fix-md");
    finish(tr, "trade");
    finish(ex, "sim exchange");
    let (r, truth) = (json(&d.path().join("report.json")), json(&d.path().join("truth.json")));
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 0);
    assert_eq!(r["buys_sent"].as_u64().unwrap(), whole);
    assert_eq!(r["sells_sent"].as_u64().unwrap(), r["buy_fills"].as_u64().unwrap());
}

/// Triggers on the normalized events of the ITCH pipeline: a `trade` consumer of
/// A simulated ITCH day (`sim itch` with `sim_args`), `triggers.txt` (BUY on executions
/// against offers, SELL on large trades) and `sim exchange` for `duration` on a free port:
/// (the exchange, its address).
fn trigger_day(p: &Path, sim_args: &[&str], duration: &str) -> (Child, String) {
    let o = Command::new(BIN).args(["sim", "itch"]).args(sim_args).current_dir(p).output().unwrap();
    assert!(o.status.success());
    std::fs::write(
        p.join("triggers.txt"),
        "# executions against offers, and large trades\n1: action = \"execute\" and side = \"ask\" => buy 100\n2: action = \"trade\" and size >= 500 => sell 100\n",
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let ex = spawn(p, &["sim", "exchange", "--listen", &listen, "--fill-delay-us", "100", "--duration", duration]);
    std::thread::sleep(Duration::from_millis(400));
    (ex, listen)
}

/// `tickplant run` sends one order per event its triggers fire, to a FIX exchange, and the
/// exchange acknowledges every one.
#[test]
fn pipeline_triggers_on_normalized_events_send_orders() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (ex, listen) =
        trigger_day(p, &["--seed", "3", "--symbols", "10", "--messages", "20000", "--out", "feed.pcap"], "15s");
    std::fs::write(
        p.join("run.toml"),
        format!(
            r#"
[source]
a = "feed.pcap"
[arbitration]
protocol = "moldudp64"
[run]
report = "report.json"
[[consumer]]
name = "all"
action = "jsonl"
path = "all.jsonl"
policy = "backpressure"
[[consumer]]
name = "trader"
action = "trade"
triggers = "triggers.txt"
exchange = "{listen}"
sender = "TP"
target = "EXCH"
risk = {{ max-order-qty = 1000, max-orders-per-second = 100000 }}
policy = "backpressure"
"#
        ),
    )
    .unwrap();
    let o = Command::new(BIN).args(["run", "run.toml", "--quiet"]).current_dir(p).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("accounting: balanced") && err.contains("trading:"), "{err}");
    let r = json(&p.join("report.json"));
    let t = r["consumers"].as_array().unwrap().iter().find(|c| c["name"] == "trader").unwrap();
    let trading = &t["trading"];
    // What the triggers should fire, counted from every record independently.
    let (mut buys, mut sells) = (0u64, 0u64);
    for l in std::fs::read_to_string(p.join("all.jsonl")).unwrap().lines() {
        let e: serde_json::Value = serde_json::from_str(l).unwrap();
        if e["action"] == "execute" && e["side"] == "ask" {
            buys += 1;
        }
        if e["action"] == "trade" && e["size"].as_u64().unwrap() >= 500 {
            sells += 1;
        }
    }
    assert!(buys > 100 && sells > 0, "the day should fire both triggers: {buys} {sells}");
    assert_eq!(trading["entries"], t["received"]);
    assert_eq!(trading["buys_sent"].as_u64().unwrap(), buys, "{trading}");
    assert_eq!(trading["sells_sent"].as_u64().unwrap(), sells, "{trading}");
    assert_eq!(trading["acks"].as_u64().unwrap(), buys + sells, "every order acknowledged: {trading}");
    let mut ex = ex;
    let _ = ex.kill();
    let _ = ex.wait();
}

/// `tickplant ctl triggers` mid-run on a live pipeline: the trade consumer's triggers are
/// listed, one removed and one added; the orders sent are those the triggers in force at
/// each record fire, counted from an unfiltered consumer of the same run; bad triggers are
/// refused and change nothing.
#[test]
fn ctl_triggers_change_a_running_trade_consumer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (ex, listen) =
        trigger_day(p, &["--seed", "5", "--symbols", "8", "--messages", "30000", "--out", "day.pcap"], "12s");
    let udp_port = || std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (pa, pb) = (udp_port(), udp_port());
    std::fs::write(
        p.join("run.toml"),
        format!(
            r#"
[source]
a = "udp://127.0.0.1:{pa}"
b = "udp://127.0.0.1:{pb}"
date = "2026-11-20"
[arbitration]
start-seq = 1
timeout-us = 30000
[run]
report = "report.json"
duration-s = 6
control = "ctl.sock"
[[consumer]]
name = "all"
action = "jsonl"
path = "all.jsonl"
policy = "backpressure"
[[consumer]]
name = "trader"
action = "trade"
triggers = "triggers.txt"
exchange = "{listen}"
sender = "TP"
target = "EXCH"
policy = "backpressure"
"#
        ),
    )
    .unwrap();
    let handler = spawn(p, &["run", "run.toml", "--quiet"]);
    std::thread::sleep(Duration::from_millis(500));
    let replay = spawn(
        p,
        &["replay", "-q", "--pps", "2500", &format!("day.pcap=127.0.0.1:{pa}"), &format!("day.pcap=127.0.0.1:{pb}")],
    );
    let ctl = |args: &[&str]| {
        let o = Command::new(BIN).arg("ctl").arg("ctl.sock").args(args).current_dir(p).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        (o.status.success(), format!("{}{}", out.trim(), err.trim()))
    };
    std::thread::sleep(Duration::from_millis(800));
    let (good, listed) = ctl(&["triggers", "itch50", "trader"]);
    assert!(good, "{listed}");
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed["triggers"],
        serde_json::json!([
            "1: action = \"execute\" and side = \"ask\" => buy 100",
            "2: action = \"trade\" and size >= 500 => sell 100"
        ])
    );
    for (bad, says) in [
        (vec!["triggers", "itch50", "trader", "remove", "7"], "no trigger 7"),
        (vec!["triggers", "itch50", "trader", "add", "2: size > 1 => buy 1"], "trigger 2 is in force"),
        (vec!["triggers", "itch50", "trader", "add", "5: size > 1 => hold 1"], "buy QTY"),
        (vec!["triggers", "itch50", "trader", "add", "5: size = \"big\" => buy 1"], "size is a number"),
        (vec!["triggers", "itch50", "all"], "those that do: trader"),
    ] {
        let (good, answer) = ctl(&bad);
        assert!(!good && answer.contains(says), "{bad:?}: {answer}");
    }
    let (good, removed) = ctl(&["triggers", "itch50", "trader", "remove", "1"]);
    assert!(good, "{removed}");
    let removed: serde_json::Value = serde_json::from_str(&removed).unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let (good, added) =
        ctl(&["triggers", "itch50", "trader", "add", "4: action = \"execute\" and side = \"bid\" => sell 100"]);
    assert!(good, "{added}");
    let added: serde_json::Value = serde_json::from_str(&added).unwrap();
    let (f1, f2) = (removed["from_event"].as_u64().unwrap(), added["from_event"].as_u64().unwrap());
    assert!(0 < f1 && f1 < f2, "mid-run: {f1} {f2}");
    finish(replay, "replay");
    finish(handler, "run");
    let mut ex = ex;
    let _ = ex.kill();
    let _ = ex.wait();
    // The orders the triggers then in force fire, record by record.
    let (mut buys, mut sells) = (0u64, 0u64);
    let records = std::fs::read_to_string(p.join("all.jsonl")).unwrap();
    let records = records
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["sequence"].is_u64());
    for (i, e) in records.enumerate() {
        let i = i as u64;
        if i < f1 && e["action"] == "execute" && e["side"] == "ask" {
            buys += 1;
        }
        if e["action"] == "trade" && e["size"].as_u64().unwrap() >= 500 {
            sells += 1;
        }
        if i >= f2 && e["action"] == "execute" && e["side"] == "bid" {
            sells += 1;
        }
    }
    let r = json(&p.join("report.json"));
    let t = r["consumers"].as_array().unwrap().iter().find(|c| c["name"] == "trader").unwrap();
    let trading = &t["trading"];
    assert!(buys > 10 && sells > 10, "both stretches fire: {buys} {sells}");
    assert_eq!(
        (trading["buys_sent"].as_u64().unwrap(), trading["sells_sent"].as_u64().unwrap()),
        (buys, sells),
        "{trading}"
    );
    let listed: Vec<&str> = r["control"].as_array().unwrap().iter().map(|c| c["command"].as_str().unwrap()).collect();
    assert_eq!(
        listed,
        [
            "triggers itch50 trader remove 1",
            "triggers itch50 trader add 4: action = \"execute\" and side = \"bid\" => sell 100"
        ]
    );
}

/// SIGINT or SIGTERM ends each of the three as its duration would: `sim fix-md` writes its
/// truth, `trade` logs out and writes its report, `sim exchange` prints its summary, and
/// all exit 0 (each started with a minute to run).
#[test]
fn signals_end_the_harness_with_its_reports() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (ex, tr, md) = start(dir, "239.255.7.9:31709", &[], ["60s", "60s", "60s"]);
    std::thread::sleep(Duration::from_millis(1000));
    signal(&md, "-INT");
    finish(md, "sim fix-md");
    // The engine's last fills come back within the fill delay.
    std::thread::sleep(Duration::from_millis(300));
    signal(&tr, "-TERM");
    finish(tr, "trade");
    signal(&ex, "-TERM");
    let summary = finish(ex, "sim exchange");
    assert!(summary.contains("1 sessions, "), "{summary}");
    let (r, truth) = (json(&dir.join("report.json")), json(&dir.join("truth.json")));
    let sent = truth["messages"].as_u64().unwrap();
    assert!(sent > 1000 && sent < 30 * 5000, "stopped early by SIGINT: {sent} messages");
    assert_eq!(r["md_messages"].as_u64().unwrap(), sent, "{r}");
    let whole = truth["whole_dollar_prices"].as_u64().unwrap();
    assert_eq!(r["buys_sent"].as_u64().unwrap(), whole, "{r}");
    assert!(r["seconds"].as_f64().unwrap() < 30.0, "{r}");
}

//! FIX sessions against QuickFIX/J, the engine many desks and venues run, as the
//! independent peer: `trade` against a QuickFIX/J exchange that validates every message
//! against its data dictionary, and a QuickFIX/J client on `sim exchange`.
//!
//! QuickFIX/J and the two programs of `interop/quickfixj/` are fetched and compiled by
//! `./tp test`, which names them in `TICKPLANT_QUICKFIXJ` (a folder holding `lib/` and
//! `classes/`). Without it (a plain `cargo test`), these tests say so and pass.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tickplant");

/// One at a time: the engine busy-polls, and the JVMs are slow to start on 2 cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn quickfixj() -> Option<String> {
    match std::env::var("TICKPLANT_QUICKFIXJ") {
        Ok(d) if Path::new(&d).join("classes/Exch.class").exists() => Some(format!("{d}/lib/*:{d}/classes")),
        Ok(d) => panic!("TICKPLANT_QUICKFIXJ={d} holds no classes/Exch.class: run ./tp test"),
        Err(_) => {
            eprintln!("skipped: TICKPLANT_QUICKFIXJ is not set (./tp test fetches QuickFIX/J and sets it)");
            None
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child killed when dropped, so that a failing test leaves nothing running.
struct Kid(Option<Child>);

impl Drop for Kid {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Kid {
    fn spawn(cmd: &mut Command) -> Kid {
        Kid(Some(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()))
    }
    /// Wait for the end (killed after `limit`); (exit code, stderr).
    fn wait(mut self, limit: Duration) -> (Option<i32>, String) {
        let mut c = self.0.take().unwrap();
        let t0 = Instant::now();
        while c.try_wait().unwrap().is_none() {
            if t0.elapsed() > limit {
                let _ = c.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let o = c.wait_with_output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    }
    fn kill9(mut self) {
        let mut c = self.0.take().unwrap();
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

fn java(cp: &str, args: &[&str]) -> Kid {
    Kid::spawn(Command::new("java").arg("-cp").arg(cp).args(args))
}

fn tickplant(dir: &Path, args: &[&str]) -> Kid {
    Kid::spawn(Command::new(BIN).args(args).current_dir(dir))
}

/// The QuickFIX/J exchange (`Exch`, JVM properties `props` first), BeginString and fill
/// delay in ms as `begin_delay`, `more` after its log, for 40 s on a free port, its store
/// and log in `dir`, listening: it, the address to trade against, and its log.
fn quickfixj_exchange(
    cp: &str,
    dir: &Path,
    props: &[&str],
    begin_delay: &[&str; 2],
    more: &[&str],
) -> (Kid, String, PathBuf) {
    let port = free_port().to_string();
    let (log, store) = (dir.join("exch.log"), dir.join("qfj-store"));
    let (s, l) = (store.to_str().unwrap(), log.to_str().unwrap());
    let args = [props, &["Exch", begin_delay[0], &port, begin_delay[1], "40", s, l], more].concat();
    let ex = java(cp, &args);
    wait_for(&log, "LISTENING", Duration::from_secs(30));
    (ex, format!("127.0.0.1:{port}"), log)
}

/// `trade` of the market data on `group`, against `exchange` as TICKPLANT to EXCH.
fn trade(dir: &Path, group: &str, exchange: &str, extra: &[&str]) -> Kid {
    let mut args = vec!["trade", "--md", group, "--exchange", exchange, "--sender", "TICKPLANT", "--target", "EXCH"];
    args.extend_from_slice(extra);
    tickplant(dir, &args)
}

/// Two seconds of `sim fix-md` on `group` (10 symbols, 4,000 messages a second), its truth
/// in truth.json; the whole-dollar prices it sent.
fn market_data(dir: &Path, group: &str) -> u64 {
    let args = ["sim", "fix-md", "--group", group, "--symbols", "10", "--rate", "4000", "--duration", "2s"];
    let md = tickplant(dir, &[&args[..], &["--truth", "truth.json"]].concat());
    let (code, err) = md.wait(Duration::from_secs(20));
    assert_eq!(code, Some(0), "sim fix-md: {err}");
    let whole = json(&dir.join("truth.json"))["whole_dollar_prices"].as_u64().unwrap();
    assert!(whole > 5, "the market data should hold whole-dollar prices: {whole}");
    whole
}

/// Wait until `log` has a line starting with `what`.
fn wait_for(log: &Path, what: &str, limit: Duration) {
    let t0 = Instant::now();
    while !std::fs::read_to_string(log).unwrap_or_default().lines().any(|l| l.starts_with(what)) {
        assert!(t0.elapsed() < limit, "no {what} in {} within {limit:?}", log.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lines(log: &Path, what: &str) -> Vec<String> {
    std::fs::read_to_string(log).unwrap().lines().filter(|l| l.starts_with(what)).map(str::to_string).collect()
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The fttc engine against a QuickFIX/J exchange whose fills come three seconds after each
/// order, in two parts: the engine is killed (-9) when the market data ends, with every fill still to
/// come, and started again from its store. The restarted engine gets each fill (resent by
/// QuickFIX/J at logon, or live) and sends its SELL; no ClOrdID is used twice; QuickFIX/J
/// rejects no message. Then an engine without a store is refused at logon (its MsgSeqNum
/// is behind the exchange's) and says what to do, and one with `--reset-seq` is let in.
/// The exchange asks for a Username and Password at logon (refusing a wrong password with
/// its reason), and every order carries the Account and TimeInForce given.
#[test]
fn quickfixj_exchange_takes_our_orders_across_a_restart() {
    let Some(cp) = quickfixj() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let props = ["-Duser=trader7", "-Dpassword=s3cret pass", "-Dpartial=true"];
    let (ex, exchange, log) = quickfixj_exchange(&cp, dir, &props, &["FIX.4.4", "3000"], &[]);
    std::fs::write(dir.join("password"), "s3cret pass\n").unwrap();
    std::fs::write(dir.join("wrong"), "guess\n").unwrap();
    let group = "239.255.7.21:31721";
    let trade = |extra: &[&str], duration: &str, report: &str| {
        let mut args = vec!["--heartbeat-s", "1", "--duration", duration, "--report", report];
        args.extend_from_slice(&["--username", "trader7", "--order-field", "1=ACCT42", "--order-field", "59=0"]);
        if !extra.contains(&"--password-file") {
            args.extend_from_slice(&["--password-file", "password"]);
        }
        args.extend_from_slice(extra);
        trade(dir, group, &exchange, &args)
    };
    let first = trade(&["--store", "tp-store"], "60s", "first.json");
    wait_for(&log, "LOGON", Duration::from_secs(15));
    let whole = market_data(dir, group);
    first.kill9();
    let buys = lines(&log, "ORDER ");
    assert_eq!(buys.len() as u64, whole, "one BUY a whole-dollar price before the kill: {buys:?}");

    // Started again from its store, while the fills come due.
    let (code, err) = trade(&["--store", "tp-store"], "5s", "second.json").wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "the restarted engine: {err}");
    let r = json(&dir.join("second.json"));
    assert_eq!(r["buy_fills"].as_u64(), Some(whole), "every BUY's fill reached the restarted engine: {r}");
    // Each fill in two parts: the BUYs' first parts, and those of the SELLs whose came in
    // the run.
    let parts = r["partial_fills"].as_u64().unwrap();
    assert!(parts >= whole && parts <= 2 * whole, "each fill in two parts: {r}");
    assert_eq!(r["sells_sent"].as_u64(), Some(whole), "{r}");
    let orders = lines(&log, "ORDER ");
    let mut ids: Vec<&str> = orders.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(orders.iter().filter(|l| l.split(' ').nth(2) == Some("2")).count() as u64, whole, "{orders:?}");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), orders.len(), "a ClOrdID used twice: {orders:?}");
    assert!(orders.iter().all(|l| l.ends_with(" ACCT42 0")), "Account and TimeInForce on every order: {orders:?}");

    // No store: our MsgSeqNum 1 is behind what the exchange expects, and the error says so.
    let (code, err) = trade(&[], "2s", "third.json").wait(Duration::from_secs(30));
    assert_ne!(code, Some(0));
    assert!(
        err.contains("the counterparty logged out before logging on: MsgSeqNum too low")
            && err.contains("--reset-seq")
            && err.contains("--store"),
        "{err}"
    );
    // A wrong password: refused, with the exchange's reason.
    let (code, err) =
        trade(&["--reset-seq", "--password-file", "wrong"], "2s", "wrong.json").wait(Duration::from_secs(30));
    assert_ne!(code, Some(0));
    assert!(err.contains("the counterparty logged out before logging on: bad credentials"), "{err}");
    // Asked to start both sides' numbers again, the exchange lets us in.
    let (code, err) = trade(&["--reset-seq"], "2s", "fourth.json").wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "with --reset-seq: {err}");

    let rejects = lines(&log, "REJECT");
    assert!(rejects.is_empty(), "QuickFIX/J rejected messages of ours: {rejects:?}");
    drop(ex);
}

/// FIX 4.2 against a QuickFIX/J exchange that rejects every order (OrdStatus Rejected,
/// OrdRejReason 1, "unknown symbol"): QuickFIX/J finds every order valid (a FIX 4.2
/// NewOrderSingle needs HandlInst), the report counts each rejection under the exchange's
/// reason, and a rejected order frees its room under `--max-open-orders` (with a limit of
/// 2, every whole-dollar price still sends its BUY).
#[test]
fn quickfixj_rejections_are_reported_and_free_the_limits() {
    let Some(cp) = quickfixj() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (ex, exchange, log) = quickfixj_exchange(&cp, dir, &[], &["FIX.4.2", "0"], &["reject"]);
    let group = "239.255.7.22:31722";
    let args = ["--begin-string", "FIX.4.2", "--max-open-orders", "2", "--duration", "4s", "--report", "report.json"];
    let trade = trade(dir, group, &exchange, &args);
    wait_for(&log, "LOGON", Duration::from_secs(15));
    let whole = market_data(dir, group);
    let (code, err) = trade.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "trade: {err}");
    assert!(err.contains("the exchange rejected"), "the summary warns: {err}");
    let r = json(&dir.join("report.json"));
    assert_eq!(r["buys_sent"].as_u64(), Some(whole), "every BUY sent, rejections freeing the limit: {r}");
    assert_eq!(r["rejected"].as_u64(), Some(whole), "{r}");
    assert_eq!(r["rejections"]["unknown symbol (OrdRejReason 1)"].as_u64(), Some(whole), "{r}");
    assert_eq!((r["acks"].as_u64(), r["buy_fills"].as_u64(), r["sells_sent"].as_u64()), (Some(0), Some(0), Some(0)));
    assert_eq!(lines(&log, "ORDER ").len() as u64, whole);
    let rejects = lines(&log, "REJECT");
    assert!(rejects.is_empty(), "QuickFIX/J rejected messages of ours: {rejects:?}");
    drop(ex);
}

/// `sim fix-md`'s market data is valid FIX 4.4 to QuickFIX/J's data dictionary, every
/// datagram it reads (what a desk's own FIX market-data reader would see).
#[test]
fn quickfixj_finds_the_simulated_market_data_valid() {
    let Some(cp) = quickfixj() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("md.log");
    let check = java(&cp, &["MdCheck", "239.255.7.23", "31723", "lo", log.to_str().unwrap()]);
    wait_for(&log, "LISTENING", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    market_data(d.path(), "239.255.7.23:31723");
    let sent = json(&d.path().join("truth.json"))["messages"].as_u64().unwrap();
    let (code, err) = check.wait(Duration::from_secs(30));
    assert_eq!(code, Some(0), "{err}");
    // The checker's JVM can fall behind the sender and its socket drop datagrams (the
    // kernel's, not ours): every datagram it read is checked, and it must read most.
    let out = std::fs::read_to_string(&log).unwrap();
    let done: Vec<u64> =
        out.lines().last().unwrap().strip_prefix("DONE ").unwrap().split(' ').map(|n| n.parse().unwrap()).collect();
    assert_eq!(done[1], 0, "invalid market data: {out}");
    assert!(done[0] <= sent && done[0] >= sent / 2, "{} of {sent} datagrams checked", done[0]);
}

/// A QuickFIX/J client trades on `sim exchange`, FIX 4.4 and 4.2: every order gets its
/// acknowledgement and its fill, QuickFIX/J finds every ExecutionReport valid, and the
/// session's heartbeats and logout go through; connected again with its sequence numbers
/// kept, it goes on from them (with ClOrdIDs of its own: the exchange refuses one used
/// before, and QuickFIX/J finds that refusal valid too).
#[test]
fn a_quickfixj_client_trades_on_the_simulated_exchange() {
    let Some(cp) = quickfixj() else { return };
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let d = tempfile::tempdir().unwrap();
    for begin in ["FIX.4.4", "FIX.4.2"] {
        let port = free_port().to_string();
        let ex = tickplant(
            d.path(),
            &[
                "sim",
                "exchange",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--fill-delay-us",
                "300",
                "--duration",
                "60s",
            ],
        );
        // Twice, with QuickFIX/J's file store: the second connection goes on from the
        // first's sequence numbers, as the exchange keeps them for the session.
        let store = d.path().join(format!("store-{begin}"));
        for (run, prefix, per) in [("first", "F", "2"), ("second", "S", "2"), ("again", "S", "1")] {
            let log: PathBuf = d.path().join(format!("client-{begin}-{run}.log"));
            let args = ["Client", begin, &port, "30", log.to_str().unwrap(), store.to_str().unwrap(), prefix, per];
            let (code, _) = java(&cp, &args).wait(Duration::from_secs(60));
            assert_eq!(code, Some(0), "{begin} {run}: {:?}", std::fs::read_to_string(&log));
            let execs = lines(&log, "EXEC ");
            let want = if run == "again" { "DONE 30" } else { "DONE 60" };
            assert_eq!(lines(&log, "DONE"), vec![want.to_string()], "{begin} {run}: {execs:?}");
            for i in 0..30 {
                let of: Vec<&String> =
                    execs.iter().filter(|l| l.split(' ').nth(1) == Some(&format!("{prefix}{i}"))).collect();
                if run == "again" {
                    // The second run's ClOrdIDs once more: each refused, ExecType and
                    // OrdStatus Rejected (8).
                    assert_eq!(of.len(), 1, "{begin} {run}: order {prefix}{i}: {of:?}");
                    assert!(of[0].ends_with(" 8 8 0"), "{begin} {run}: refused as a duplicate: {of:?}");
                    continue;
                }
                assert_eq!(of.len(), 2, "{begin} {run}: order {prefix}{i}: {of:?}");
                assert!(of[0].ends_with(" 0 0 0"), "{begin} {run}: the acknowledgement first: {of:?}");
                assert!(of[1].ends_with(&format!(" 2 {}", 100 + i)), "{begin} {run}: then the whole fill: {of:?}");
            }
            let rejects = lines(&log, "REJECT");
            assert!(rejects.is_empty(), "{begin} {run}: QuickFIX/J rejected messages of ours: {rejects:?}");
            assert_eq!(lines(&log, "LOGOUT").len(), 1, "{begin} {run}");
        }
        drop(ex);
    }
}

//! Run-time control of a running handler: a Unix socket (`[run] control = "PATH"`, owner-
//! only permissions) that takes one command a line and answers one JSON line
//! (`tickplant ctl PATH COMMAND`).
//!
//! Commands:
//! * `status`: every feed's counters as last published (frames, HR messages and gaps,
//!   stale books, the arbitrator's policy);
//! * `policy FEED MODE [timeout-us=N] [max-msgs=N]`: the arbitrator's window, applied by
//!   the producer thread between two frames (nothing buffered is lost or delivered twice:
//!   waits the new window does not allow are given up in order, as `--change-at` does);
//! * `snapshot FEED [depth=N]`: the books now, as JSON;
//! * `subscribe FEED CONSUMER [symbols=..] [actions=..] [types=..]` and `unsubscribe ...`:
//!   a consumer's filter, changed by the decode side between two packets (the answer says
//!   from which sequence number the new filter holds).
//!
//! A change is acknowledged with what it changed and when, written to stderr, counted for
//! the metrics endpoint, and listed in the final report. A bad command gets an error that
//! says what was wrong and changes nothing. The producer looks at its commands at the
//! cadence it publishes metrics (every 1,024 frames at most, or when the line is quiet):
//! never per message.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tickplant_core::Policy;

/// A window asked for: the mode, and the values given (the others stay as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyRequest {
    pub mode: crate::config::ModeArg,
    pub timeout_us: Option<u64>,
    pub max_msgs: Option<u64>,
}

impl PolicyRequest {
    /// The policy, with what was not given taken from `current` (else the defaults).
    pub fn resolve(&self, current: Policy) -> Policy {
        use crate::config::ModeArg;
        let (t0, m0) = match current {
            Policy::Time { timeout_ns } => (timeout_ns, 1000),
            Policy::Count { max_msgs } => (1_000_000, max_msgs),
            Policy::TimeCount { timeout_ns, max_msgs } => (timeout_ns, max_msgs),
            Policy::LowLatency => (1_000_000, 1000),
        };
        let timeout_ns = self.timeout_us.map_or(t0, |t| t.saturating_mul(1000));
        let max_msgs = self.max_msgs.unwrap_or(m0);
        match self.mode {
            ModeArg::LowLatency => Policy::LowLatency,
            ModeArg::Time => Policy::Time { timeout_ns },
            ModeArg::Count => Policy::Count { max_msgs },
            ModeArg::TimeCount => Policy::TimeCount { timeout_ns, max_msgs },
        }
    }
}

/// What a feed's producer is asked to do.
#[derive(Debug)]
pub enum Command {
    Policy { req: PolicyRequest, reply: Sender<Result<String, String>> },
}

/// A change to a consumer's subscription: what `subscribe` adds to it or `unsubscribe`
/// takes from it. Each list is `None` where the command did not name it; `*` in a list is
/// every one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriptionChange {
    /// `subscribe` (true) or `unsubscribe`.
    pub add: bool,
    pub symbols: Option<Vec<String>>,
    pub actions: Option<Vec<String>>,
    pub types: Option<Vec<String>>,
}

impl SubscriptionChange {
    /// `CONSUMER KEY=V[,V...] ...` after `subscribe FEED` or `unsubscribe FEED`.
    fn parse(add: bool, args: &[&str]) -> Result<(String, SubscriptionChange), String> {
        let verb = if add { "subscribe" } else { "unsubscribe" };
        let usage = format!("{verb} FEED CONSUMER [symbols=A,B|*] [actions=add,trade|*] [types=A,E|*]");
        let [consumer, kvs @ ..] = args else { return Err(format!("expected {usage}")) };
        if kvs.is_empty() {
            return Err(format!("name what to {verb}: {usage}"));
        }
        let mut c = SubscriptionChange { add, ..Default::default() };
        for kv in kvs {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("{kv:?} is not KEY=VALUE: {usage}"))?;
            let list: Vec<String> = v.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect();
            if list.is_empty() {
                return Err(format!("{k} names nothing (a list, or * for every one)"));
            }
            let slot = match k {
                "symbols" => &mut c.symbols,
                "actions" => &mut c.actions,
                "types" => &mut c.types,
                _ => return Err(format!("unknown key {k:?} (symbols, actions, types)")),
            };
            if slot.replace(list).is_some() {
                return Err(format!("{k} is named twice"));
            }
        }
        Ok((consumer.to_string(), c))
    }
}

/// What a feed's decode side is asked to do.
#[derive(Debug)]
pub enum DecodeCommand {
    /// The books now, `depth` levels a side, each a JSON object.
    Snapshot { depth: usize, reply: Sender<Result<Vec<String>, String>> },
    /// Change a consumer's subscription between two packets; the answer: what it is now and
    /// the first sequence number it applies to.
    Subscribe {
        consumer: String,
        change: SubscriptionChange,
        command: String,
        reply: Sender<Result<serde_json::Value, String>>,
    },
}

/// What a consumer's thread is asked to do (`match` and `trade` consumers take commands).
#[derive(Debug)]
pub enum ConsumerCommand {
    /// `strategies ... add ID: predicates` or `strategies ... remove ID [ID ...]`.
    Strategies {
        add: Option<String>,
        remove: Vec<u64>,
        command: String,
        reply: Sender<Result<serde_json::Value, String>>,
    },
    /// `triggers ...`: list, add or remove the trade consumer's triggers.
    Triggers { op: TriggerOp, command: String, reply: Sender<Result<serde_json::Value, String>> },
}

/// What `triggers FEED CONSUMER ...` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerOp {
    /// The triggers in force.
    List,
    /// One trigger more: `ID: conditions => buy|sell QTY`.
    Add(String),
    /// Triggers taken away, by id.
    Remove(Vec<u64>),
}

/// A consumer's end of the control socket: its commands, and where the changes it makes
/// are recorded.
#[derive(Debug)]
pub struct ConsumerControl {
    pub rx: Receiver<ConsumerCommand>,
    pub control: Arc<Control>,
    pub feed: String,
    pub consumer: String,
}

/// A change made, for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ControlRecord {
    /// The feed's clock when it was applied (ns).
    pub at_ns: u64,
    pub command: String,
    pub result: String,
}

/// The control side of a run: each feed's command queue, and what was changed.
#[derive(Debug, Default)]
pub struct Control {
    feeds: Mutex<BTreeMap<String, Sender<Command>>>,
    decode: Mutex<BTreeMap<String, Sender<DecodeCommand>>>,
    /// Per feed, its consumers that take commands.
    consumers: Mutex<BTreeMap<String, BTreeMap<String, Sender<ConsumerCommand>>>>,
    log: Mutex<Vec<(String, ControlRecord)>>,
    counts: Mutex<BTreeMap<String, u64>>,
    metrics: Option<Arc<crate::metrics::Hub>>,
}

impl Control {
    pub fn new(metrics: Option<Arc<crate::metrics::Hub>>) -> Control {
        Control { metrics, ..Default::default() }
    }
    /// A feed's queue: the producer keeps the receiver.
    pub fn register(&self, feed: &str) -> Receiver<Command> {
        let (tx, rx) = channel();
        if let Ok(mut f) = self.feeds.lock() {
            f.insert(feed.to_string(), tx);
        }
        rx
    }
    /// A feed's decode-side queue: the decode side keeps the receiver.
    pub fn register_decode(&self, feed: &str) -> Receiver<DecodeCommand> {
        let (tx, rx) = channel();
        if let Ok(mut f) = self.decode.lock() {
            f.insert(feed.to_string(), tx);
        }
        rx
    }
    /// A consumer's queue (`match` and `trade` consumers): its thread keeps the receiver.
    pub fn register_consumer(self: &Arc<Self>, feed: &str, consumer: &str) -> ConsumerControl {
        let (tx, rx) = channel();
        if let Ok(mut f) = self.consumers.lock() {
            f.entry(feed.to_string()).or_default().insert(consumer.to_string(), tx);
        }
        ConsumerControl { rx, control: self.clone(), feed: feed.to_string(), consumer: consumer.to_string() }
    }
    /// A change applied by a feed's producer.
    pub fn record(&self, feed: &str, r: ControlRecord) {
        tracing::info!(feed, command = %r.command, result = %r.result, at_ns = r.at_ns, "control change");
        if let Ok(mut l) = self.log.lock() {
            l.push((feed.to_string(), r));
        }
    }
    /// The changes applied to a feed, in order.
    pub fn records(&self, feed: &str) -> Vec<ControlRecord> {
        self.log
            .lock()
            .map(|l| l.iter().filter(|(f, _)| f == feed).map(|(_, r)| r.clone()).collect())
            .unwrap_or_default()
    }
    /// Commands taken, by name (and `error` for refused ones).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn count(&self, what: &str) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry(what.to_string()).or_default() += 1;
        }
        if let Some(h) = &self.metrics {
            h.count_command(what);
        }
    }

    /// Answer one command line.
    pub fn handle(&self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        // The command as it is recorded: its words, one space apart.
        let line = &words.join(" ");
        let r = match words.first().copied() {
            Some("status") if words.len() == 1 => Ok(self.status()),
            Some("policy") => self.policy(&words[1..]),
            Some("snapshot") => self.snapshot(&words[1..]),
            Some(verb @ ("subscribe" | "unsubscribe")) => self.subscribe(verb == "subscribe", &words[1..], line),
            Some("strategies") => self.strategies(&words[1..], line),
            Some("triggers") => self.triggers(&words[1..], line),
            Some(other) => Err(format!(
                "unknown command {other:?} (status, policy FEED MODE [timeout-us=N] [max-msgs=N], snapshot FEED [depth=N], subscribe|unsubscribe FEED CONSUMER [symbols=..] [actions=..] [types=..], strategies FEED CONSUMER add|remove .., triggers FEED CONSUMER [add|remove ..])"
            )),
            None => Err("an empty command (status, policy FEED MODE ...)".to_string()),
        };
        match r {
            Ok(v) => {
                self.count(words[0]);
                v
            }
            Err(e) => {
                self.count("error");
                refusal(&e)
            }
        }
    }

    fn status(&self) -> String {
        let feeds: Vec<String> = self.feeds.lock().map(|f| f.keys().cloned().collect()).unwrap_or_default();
        let text = self.metrics.as_ref().map(|h| h.render());
        serde_json::json!({ "ok": true, "feeds": feeds, "metrics": text }).to_string()
    }

    fn snapshot(&self, args: &[&str]) -> Result<String, String> {
        let usage = "snapshot FEED [depth=N]";
        let (feed, depth) = match args {
            [feed] => (*feed, 10),
            [feed, d] => {
                let n = d.strip_prefix("depth=").ok_or_else(|| format!("{d:?}: expected depth=N ({usage})"))?;
                (*feed, n.parse::<usize>().map_err(|_| format!("depth {n:?} is not a whole number"))?)
            }
            _ => return Err(format!("expected {usage}")),
        };
        let tx = queue(&self.decode, feed)?;
        let books = ask(&tx, &format!("feed {feed:?}"), |reply| DecodeCommand::Snapshot { depth, reply })?;
        // The books are JSON objects already: joined into the answer as they are.
        let mut out = String::from("{\"ok\":true,\"feed\":");
        crate::json::json_str(&mut out, feed);
        out.push_str(",\"books\":[");
        out.push_str(&books.join(","));
        out.push_str("]}");
        Ok(out)
    }

    fn subscribe(&self, add: bool, args: &[&str], line: &str) -> Result<String, String> {
        let [feed, rest @ ..] = args else {
            return Err("expected subscribe|unsubscribe FEED CONSUMER [symbols=..] [actions=..] [types=..]".to_string());
        };
        let (consumer, change) = SubscriptionChange::parse(add, rest)?;
        let tx = queue(&self.decode, feed)?;
        let command = line.to_string();
        let mut r =
            ask(&tx, &format!("feed {feed:?}"), |reply| DecodeCommand::Subscribe { consumer, change, command, reply })?;
        r["ok"] = true.into();
        r["feed"] = (*feed).into();
        Ok(r.to_string())
    }

    /// `strategies FEED CONSUMER add ID: predicates` | `remove ID [ID ...]`.
    fn strategies(&self, args: &[&str], line: &str) -> Result<String, String> {
        let usage = "strategies FEED CONSUMER add ID: PREDICATES | strategies FEED CONSUMER remove ID [ID ...]";
        let [feed, consumer, verb, rest @ ..] = args else { return Err(format!("expected {usage}")) };
        let (add, remove) = match *verb {
            "add" if !rest.is_empty() => (Some(rest.join(" ")), Vec::new()),
            "remove" if !rest.is_empty() => (None, ids(rest)?),
            "add" | "remove" => return Err(format!("{verb} what? {usage}")),
            other => return Err(format!("unknown strategies command {other:?}: {usage}")),
        };
        let command = line.to_string();
        self.to_consumer(feed, consumer, |reply| ConsumerCommand::Strategies { add, remove, command, reply })
    }

    /// `triggers FEED CONSUMER` (the triggers in force) | `add ID: CONDITIONS => buy|sell QTY`
    /// | `remove ID [ID ...]`.
    fn triggers(&self, args: &[&str], line: &str) -> Result<String, String> {
        let usage = "triggers FEED CONSUMER [add ID: CONDITIONS => buy|sell QTY | remove ID [ID ...]]";
        let (feed, consumer, op) = match args {
            [feed, consumer] => (feed, consumer, TriggerOp::List),
            [feed, consumer, "add", rest @ ..] if !rest.is_empty() => (feed, consumer, TriggerOp::Add(rest.join(" "))),
            [feed, consumer, "remove", rest @ ..] if !rest.is_empty() => {
                (feed, consumer, TriggerOp::Remove(ids(rest)?))
            }
            _ => return Err(format!("expected {usage}")),
        };
        let command = line.to_string();
        self.to_consumer(feed, consumer, |reply| ConsumerCommand::Triggers { op, command, reply })
    }

    /// Send a consumer its command and wait for the answer.
    fn to_consumer(
        &self,
        feed: &str,
        consumer: &str,
        cmd: impl FnOnce(Sender<Result<serde_json::Value, String>>) -> ConsumerCommand,
    ) -> Result<String, String> {
        let tx = {
            let all = self.consumers.lock().map_err(|_| "the control state is broken".to_string())?;
            let of_feed = all.get(feed);
            let known: Vec<&str> = of_feed.map(|c| c.keys().map(String::as_str).collect()).unwrap_or_default();
            of_feed.and_then(|c| c.get(consumer)).cloned().ok_or_else(|| {
                format!(
                    "no consumer {consumer:?} of feed {feed:?} takes commands (those that do: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                )
            })?
        };
        let mut r = ask(&tx, &format!("consumer {consumer:?}"), cmd)?;
        r["ok"] = true.into();
        r["feed"] = feed.into();
        r["consumer"] = consumer.into();
        Ok(r.to_string())
    }

    fn policy(&self, args: &[&str]) -> Result<String, String> {
        let usage = "policy FEED MODE [timeout-us=N] [max-msgs=N], MODE one of low-latency, time, count, time-count";
        let (feed, mode, rest) = match args {
            [feed, mode, rest @ ..] => (*feed, *mode, rest),
            _ => return Err(format!("expected {usage}")),
        };
        let mode = <crate::config::ModeArg as clap::ValueEnum>::from_str(mode, false)
            .map_err(|_| format!("unknown mode {mode:?}: {usage}"))?;
        let mut req = PolicyRequest { mode, timeout_us: None, max_msgs: None };
        for kv in rest {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("{kv:?} is not KEY=VALUE: {usage}"))?;
            let v: u64 = v.parse().map_err(|_| format!("{k} value {v:?} is not a whole number"))?;
            match k {
                "timeout-us" => req.timeout_us = Some(v),
                "max-msgs" => req.max_msgs = Some(v),
                _ => return Err(format!("unknown key {k:?} (timeout-us, max-msgs)")),
            }
        }
        let tx = queue(&self.feeds, feed)?;
        let r = ask(&tx, &format!("feed {feed:?}"), |reply| Command::Policy { req, reply })?;
        Ok(serde_json::json!({ "ok": true, "feed": feed, "changed": r }).to_string())
    }
}

/// Send a thread its command (`cmd` given the reply's end) and wait up to 5 s for the
/// answer; `who` names it in the errors.
fn ask<C, T>(tx: &Sender<C>, who: &str, cmd: impl FnOnce(Sender<Result<T, String>>) -> C) -> Result<T, String> {
    let (rtx, rrx) = channel();
    tx.send(cmd(rtx)).map_err(|_| format!("{who} has ended"))?;
    rrx.recv_timeout(Duration::from_secs(5)).map_err(|_| format!("{who} did not answer within 5 s"))?
}

/// Whole-number ids.
fn ids(words: &[&str]) -> Result<Vec<u64>, String> {
    words.iter().map(|w| w.parse::<u64>().map_err(|_| format!("{w:?} is not a whole-number id"))).collect()
}

/// A feed's command queue, or an error that names the feeds there are.
fn queue<T>(map: &Mutex<BTreeMap<String, Sender<T>>>, feed: &str) -> Result<Sender<T>, String> {
    let f = map.lock().map_err(|_| "the control state is broken".to_string())?;
    let known: Vec<&str> = f.keys().map(String::as_str).collect();
    f.get(feed).cloned().ok_or_else(|| format!("no feed {feed:?} (the feeds: {})", known.join(", ")))
}

/// The longest command line the socket takes (a subscription naming every symbol of a US
/// equities day is about 60 KB).
pub const MAX_LINE: usize = 1 << 20;

/// A refusal as the socket answers it.
fn refusal(why: &str) -> String {
    serde_json::json!({ "ok": false, "error": why }).to_string()
}

/// Listen on `path` (a Unix socket the owner alone may use) and answer commands on a
/// thread of its own for the rest of the process. A file already there is replaced only if
/// it is a socket nobody listens on.
pub fn serve(path: &Path, control: Arc<Control>) -> std::io::Result<PathBuf> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{}: another handler listens there", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for conn in listener.incoming() {
            let Ok(s) = conn else { continue };
            let c = control.clone();
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                let mut w = match s.try_clone() {
                    Ok(w) => w,
                    Err(_) => return,
                };
                let mut r = BufReader::new(s);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    // A line is bounded: a client that never ends one is refused, not
                    // buffered without end.
                    match (&mut r).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    let ended = buf.last() == Some(&b'\n');
                    let answer = if !ended && buf.len() > MAX_LINE {
                        c.count("error");
                        refusal(&format!("a command longer than {MAX_LINE} bytes; the connection is closed"))
                    } else {
                        match std::str::from_utf8(&buf) {
                            Ok(line) => c.handle(line.trim_end_matches(['\n', '\r'])),
                            Err(e) => {
                                c.count("error");
                                refusal(&format!("a command that is not UTF-8 (byte {})", e.valid_up_to()))
                            }
                        }
                    };
                    if writeln!(w, "{answer}").is_err() || (!ended && buf.len() > MAX_LINE) {
                        break;
                    }
                }
            });
        }
    })?;
    Ok(path.to_path_buf())
}

/// `tickplant ctl`: send one command, return the answer line.
pub fn send(path: &Path, command: &str) -> std::io::Result<String> {
    let say = |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{what}: {e}"));
    let mut s = UnixStream::connect(path)
        .map_err(|e| say("cannot connect (is a handler running with this socket as its [run] control?)", e))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| say("cannot set a read timeout", e))?;
    writeln!(s, "{command}").map_err(|e| say("cannot send the command", e))?;
    s.shutdown(std::net::Shutdown::Write).map_err(|e| say("cannot send the command", e))?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).map_err(|e| say("cannot read the answer (waited 10 s at most)", e))?;
    Ok(line.trim_end().to_string())
}

/// A feed producer's end of the control socket ([`crate::runner::RunOptions::control`]).
#[derive(Debug)]
pub struct ControlFeed {
    pub rx: Receiver<Command>,
    pub control: Arc<Control>,
    pub feed: String,
}

impl ControlFeed {
    /// Apply the commands waiting, at `now` on the feed's clock.
    pub fn apply<S: tickplant_core::ArbSink>(&self, arb: &mut tickplant_core::Arbitrator, now: u64, sink: &mut S) {
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Policy { req, reply } => {
                    let before = arb.policy();
                    let p = req.resolve(before);
                    arb.change_policy(now, p, sink);
                    let result = format!("policy {before:?} -> {p:?}");
                    let command = format!(
                        "policy {} {}{}{}",
                        self.feed,
                        clap::ValueEnum::to_possible_value(&req.mode)
                            .map_or(String::new(), |v| v.get_name().to_string()),
                        req.timeout_us.map_or(String::new(), |t| format!(" timeout-us={t}")),
                        req.max_msgs.map_or(String::new(), |m| format!(" max-msgs={m}"))
                    );
                    self.control.record(&self.feed, ControlRecord { at_ns: now, command, result: result.clone() });
                    let _ = reply.send(Ok(result));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_commands_say_what_is_wrong_and_change_nothing() {
        let c = Control::new(None);
        let _rx = c.register("itch50");
        for (cmd, says) in [
            ("", "empty"),
            ("frobnicate", "unknown command"),
            ("policy itch50", "expected policy FEED MODE"),
            ("policy nyse time", "no feed \\\"nyse\\\""),
            ("policy itch50 sideways", "unknown mode"),
            ("policy itch50 time timeout-us=ten", "not a whole number"),
            ("policy itch50 time speed=1", "unknown key"),
        ] {
            let r = c.handle(cmd);
            assert!(r.contains("\"ok\":false") && r.contains(says), "{cmd:?}: {r}");
        }
        assert_eq!(c.counts().get("error"), Some(&7));
        let _dx = c.register_decode("itch50");
        for (cmd, says) in [
            ("subscribe", "expected subscribe"),
            ("subscribe itch50 books", "name what to subscribe"),
            ("unsubscribe itch50 books symbols", "not KEY=VALUE"),
            ("subscribe itch50 books symbols=", "names nothing"),
            ("subscribe itch50 books sides=bid", "unknown key"),
            ("subscribe itch50 books types=A types=E", "named twice"),
            ("subscribe nyse books types=A", "no feed"),
            ("strategies itch50 m", "expected strategies"),
            ("strategies itch50 m add", "add what"),
            ("strategies itch50 m remove seven", "not a whole-number id"),
            ("strategies itch50 m rename 1", "unknown strategies command"),
            ("strategies itch50 m remove 7", "no consumer \\\"m\\\" of feed"),
            ("triggers itch50 t remove", "expected triggers"),
        ] {
            let r = c.handle(cmd);
            assert!(r.contains("\"ok\":false") && r.contains(says), "{cmd:?}: {r}");
        }
        assert!(c.records("itch50").is_empty());
    }

    #[test]
    fn the_socket_refuses_lines_too_long_or_not_utf8() {
        let d = tempfile::tempdir().unwrap();
        let c = Arc::new(Control::new(None));
        let _rx = c.register("itch50");
        let path = serve(&d.path().join("c.sock"), c.clone()).unwrap();
        let mut s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut answer = |s: &mut UnixStream, bytes: &[u8]| {
            s.write_all(bytes).unwrap();
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            line
        };
        // Not UTF-8: refused, and the connection goes on.
        let a = answer(&mut s, b"status \xff\n");
        assert!(a.contains("\"ok\":false") && a.contains("not UTF-8 (byte 7)"), "{a}");
        let a = answer(&mut s, b"status\r\n");
        assert!(a.contains("\"ok\":true"), "{a}");
        // A line of exactly the limit is taken (and refused for what it says).
        let mut long = vec![b'x'; MAX_LINE - 1];
        long.push(b'\n');
        assert!(answer(&mut s, &long).contains("unknown command"));
        // One byte more than the limit without an end: refused, and the connection closed.
        let a = answer(&mut s, &vec![b'y'; MAX_LINE + 1]);
        assert!(a.contains(&format!("longer than {MAX_LINE} bytes")), "{a}");
        let mut rest = String::new();
        assert_eq!(r.read_line(&mut rest).unwrap(), 0, "{rest}");
        assert_eq!(c.counts().get("error"), Some(&3));
    }

    #[test]
    fn a_policy_request_keeps_what_it_does_not_name() {
        use crate::config::ModeArg;
        let cur = Policy::TimeCount { timeout_ns: 5_000, max_msgs: 7 };
        let r = PolicyRequest { mode: ModeArg::Count, timeout_us: None, max_msgs: None };
        assert_eq!(r.resolve(cur), Policy::Count { max_msgs: 7 });
        let r = PolicyRequest { mode: ModeArg::Time, timeout_us: Some(300), max_msgs: None };
        assert_eq!(r.resolve(cur), Policy::Time { timeout_ns: 300_000 });
    }
}

//! The tick-to-trade harness on real sockets: a FIX market-data sender (UDP multicast), a
//! FIX 4.4 exchange (TCP acceptor), and the trading engine between them.
//!
//! * [`send_market_data`] sends FIX messages to a multicast group, one or a batch a
//!   datagram, paced to a rate.
//! * [`run_exchange`] accepts FIX sessions: an ExecutionReport (New) for each
//!   NewOrderSingle at once, and a fill after a delay.
//! * [`run_trade`] is the engine. It reads market data, checks every entry's price, and
//!   for each whole-dollar price (`.000`) it sends a market BUY of `qty`; each BUY fill
//!   sends a SELL of the same quantity (the `fttc` strategy of the reference harness).
//!   Orders are pre-built templates ([`tickplant_wire::fix::OrderTemplate`]), checked by
//!   [`tickplant_core::risk::Risk`] first. The time-stamp counter marks each stage:
//!   datagram received, parsed, decided, order ready, send returned.
//! * [`TriggerTrader`] (`trigger`) is the pipeline's `trade` consumer: rules on normalized
//!   events fire pre-built orders over the same FIX session code.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use tickplant_core::fix_session::{MemoryStore, Role, Session, SessionConfig, SessionEvent, SessionStore};
use tickplant_core::risk::RiskLimits;
use tickplant_core::trigger::{parse_triggers, Triggers};
use tickplant_core::ttt::{Fttc, FttcConfig, FttcOutput};
use tickplant_wire::fix::{self, FieldIndex, Message};

use crate::clock::{rdtsc, TscClock};

mod trigger;
use crate::hist::{hist, latency, latency_ns, Latency};
pub use trigger::{TriggerTradeReport, TriggerTrader, TriggerTraderConfig};

/// UNIX ns now (SendingTime; the session's clock).
pub fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A UDP socket that sends to multicast through `iface` (loopback included).
pub fn multicast_sender(iface: Ipv4Addr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_multicast_if_v4(&iface)?;
    s.set_multicast_loop_v4(true)?;
    s.set_multicast_ttl_v4(1)?;
    s.bind(&SocketAddr::from((iface, 0)).into())?;
    Ok(s.into())
}

/// A UDP socket joined to `group` on `iface`, receiving on the group's port.
pub fn multicast_receiver(group: SocketAddrV4, iface: Ipv4Addr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_recv_buffer_size(8 << 20)?;
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, group.port())).into())?;
    s.join_multicast_v4(group.ip(), &iface)?;
    Ok(s.into())
}

/// What the market-data sender did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MdReport {
    pub messages: u64,
    pub datagrams: u64,
    pub bytes: u64,
    pub seconds: f64,
}

/// Send `next(now)`'s messages to `group` at `rate` messages per second for `duration` (or
/// until `stop`), `batch` messages a datagram (as venues that batch send them: each
/// datagram goes when its first message is due).
pub fn send_market_data(
    group: SocketAddrV4,
    iface: Ipv4Addr,
    rate: u64,
    batch: u32,
    duration: Duration,
    stop: &AtomicBool,
    mut next: impl FnMut(u64) -> Vec<u8>,
) -> std::io::Result<MdReport> {
    let sock = multicast_sender(iface)?;
    let start = Instant::now();
    let mut r = MdReport::default();
    let gap = Duration::from_nanos(1_000_000_000 / rate.max(1));
    let mut datagram = Vec::with_capacity(2048);
    while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        let due = start + gap * r.messages as u32;
        while Instant::now() < due {
            let left = due - Instant::now();
            if left > Duration::from_micros(200) {
                std::thread::sleep(left - Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
        datagram.clear();
        let now = unix_ns();
        for _ in 0..batch.max(1) {
            datagram.extend_from_slice(&next(now));
        }
        sock.send_to(&datagram, group)?;
        r.messages += u64::from(batch.max(1));
        r.datagrams += 1;
        r.bytes += datagram.len() as u64;
    }
    r.seconds = start.elapsed().as_secs_f64();
    Ok(r)
}

/// Write all of `b` to a socket that may be non-blocking.
fn write_all(s: &mut TcpStream, mut b: &[u8]) -> std::io::Result<()> {
    while !b.is_empty() {
        match s.write(b) {
            Ok(0) => return Err(std::io::Error::new(ErrorKind::WriteZero, "connection closed")),
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => std::hint::spin_loop(),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn flush<S: SessionStore>(s: &mut Session<S>, tcp: &mut TcpStream) -> std::io::Result<()> {
    let mut sent = 0;
    flush_counted(s, tcp, &mut sent)
}

/// [`flush`], counting the bytes written (transmit timestamps are keyed by byte offset).
fn flush_counted<S: SessionStore>(s: &mut Session<S>, tcp: &mut TcpStream, sent: &mut u64) -> std::io::Result<()> {
    while let Some(m) = s.poll_transmit() {
        write_all(tcp, &m)?;
        *sent += m.len() as u64;
    }
    Ok(())
}

fn value(ix: &FieldIndex<'_>, tag: u32) -> Vec<u8> {
    ix.get(tag).map(|f| f.value.to_vec()).unwrap_or_default()
}

/// The simulated exchange's settings.
#[derive(Debug, Clone)]
pub struct ExchangeConfig {
    pub listen: SocketAddr,
    pub comp_id: String,
    pub fill_delay: Duration,
    /// Market orders fill at the order's Price (44) when it has one, else at this.
    pub fill_price: String,
}

/// What the exchange did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExchangeReport {
    pub sessions: u64,
    pub orders: u64,
    pub acks: u64,
    pub fills: u64,
    /// Orders refused with a session-level Reject: a required field missing.
    pub rejects: u64,
    /// Orders refused for a ClOrdID the counterparty had used before (an ExecutionReport
    /// Rejected, OrdRejReason 6), as a venue refuses one within its day.
    pub duplicates: u64,
}

/// Accept FIX sessions until `stop`; each connection runs on its own thread.
pub fn run_exchange(cfg: &ExchangeConfig, stop: Arc<AtomicBool>) -> std::io::Result<ExchangeReport> {
    let listener = TcpListener::bind(cfg.listen)?;
    listener.set_nonblocking(true)?;
    let mut threads = Vec::new();
    let mut report = ExchangeReport::default();
    let kept: Kept = Arc::default();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((tcp, _)) => {
                report.sessions += 1;
                let (cfg, stop, kept) = (cfg.clone(), stop.clone(), kept.clone());
                threads.push(std::thread::spawn(move || exchange_session(tcp, &cfg, &stop, &kept)));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(e),
        }
    }
    for t in threads {
        if let Ok(Ok(r)) = t.join() {
            report.orders += r.orders;
            report.acks += r.acks;
            report.fills += r.fills;
            report.rejects += r.rejects;
            report.duplicates += r.duplicates;
        }
    }
    Ok(report)
}

/// What the exchange keeps of a counterparty's session between its connections, as a venue
/// does for the day: the sequence numbers and sent messages (a reconnecting engine goes on
/// from them, and can ask for what it missed), the orders still to fill (their fills go
/// out once it is back) and the order ids.
#[derive(Default)]
struct Counterparty {
    store: MemoryStore,
    resting: Vec<Resting>,
    next_id: u64,
    /// Every ClOrdID it has used.
    cl_ord_ids: std::collections::HashSet<Vec<u8>>,
}

/// Each counterparty's session (by BeginString and CompID) while it is not connected.
type Kept = Arc<std::sync::Mutex<std::collections::HashMap<(String, String), Counterparty>>>;

struct Resting {
    due: Instant,
    order_id: u64,
    cl_ord_id: Vec<u8>,
    symbol: Vec<u8>,
    side: Vec<u8>,
    qty: Vec<u8>,
    price: Vec<u8>,
}

fn exchange_session(
    mut tcp: TcpStream,
    cfg: &ExchangeConfig,
    stop: &AtomicBool,
    kept: &Kept,
) -> std::io::Result<ExchangeReport> {
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(Duration::from_micros(200)))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::new();
    // The counterparty's CompID and FIX version come from its Logon.
    let (begin, target) = loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(ExchangeReport::default());
        }
        match tcp.read(&mut buf) {
            Ok(0) => return Ok(ExchangeReport::default()),
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e),
        }
        if let Ok(Some(n)) = fix::frame_len(&pending) {
            let m = Message::new_checked(&pending[..n])
                .map_err(|e| std::io::Error::new(ErrorKind::InvalidData, format!("first message: {e}")))?;
            let mut ix = FieldIndex::new();
            ix.parse(&m).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e.to_string()))?;
            break (
                String::from_utf8_lossy(m.begin_string()).into_owned(),
                String::from_utf8_lossy(&value(&ix, 49)).into_owned(),
            );
        }
    };
    let mut scfg = SessionConfig::new(Role::Acceptor, &cfg.comp_id, &target);
    scfg.begin_string = begin.clone();
    let key = (begin.clone(), target);
    let mut c = kept.lock().unwrap_or_else(|p| p.into_inner()).remove(&key).unwrap_or_default();
    let mut s = Session::new(scfg, std::mem::take(&mut c.store));
    s.handle_connected(unix_ns());
    s.handle_bytes(unix_ns(), &pending);
    let r = serve(&mut tcp, &mut s, &mut c, cfg, stop, begin == "FIX.4.2");
    c.store = s.into_store();
    kept.lock().unwrap_or_else(|p| p.into_inner()).insert(key, c);
    r
}

/// One connection of a counterparty's session, logged on or about to be.
fn serve(
    tcp: &mut TcpStream,
    s: &mut Session<MemoryStore>,
    c: &mut Counterparty,
    cfg: &ExchangeConfig,
    stop: &AtomicBool,
    fix42: bool,
) -> std::io::Result<ExchangeReport> {
    let mut buf = vec![0u8; 1 << 16];
    let mut r = ExchangeReport::default();
    let (resting, next_id, cl_ord_ids) = (&mut c.resting, &mut c.next_id, &mut c.cl_ord_ids);
    *next_id = (*next_id).max(1);
    loop {
        flush(s, tcp)?;
        while let Some(ev) = s.poll_event() {
            match ev {
                SessionEvent::App { seq, msg_type, message } if msg_type == b"D" => {
                    r.orders += 1;
                    let Ok(m) = Message::new_checked(&message) else { continue };
                    let mut ix = FieldIndex::new();
                    if ix.parse(&m).is_err() {
                        continue;
                    }
                    if let Some(tag) = missing_order_field(&ix, fix42) {
                        // As a venue's engine answers (QuickFIX's words and codes): a
                        // session-level Reject, RefTagID and SessionRejectReason 1.
                        let text = format!("Required tag missing, field={tag}");
                        let (seq, tag) = (seq.to_string(), tag.to_string());
                        let fields: [(u32, &[u8]); 5] = [
                            (45, seq.as_bytes()),
                            (371, tag.as_bytes()),
                            (372, b"D"),
                            (373, b"1"),
                            (58, text.as_bytes()),
                        ];
                        s.send(unix_ns(), "3", &fields);
                        r.rejects += 1;
                        continue;
                    }
                    let px = if ix.get(44).is_some() { value(&ix, 44) } else { cfg.fill_price.as_bytes().to_vec() };
                    if !cl_ord_ids.insert(value(&ix, 11)) {
                        // A ClOrdID seen before: refused, as a venue refuses one within its
                        // day (QuickFIX's words: OrdRejReason 6, Duplicate Order).
                        let order = [11, 55, 54, 38].map(|tag| value(&ix, tag));
                        rejected_report(s, &order, fix42, b"6", b"duplicate ClOrdID");
                        r.duplicates += 1;
                        continue;
                    }
                    let o = Resting {
                        due: Instant::now() + cfg.fill_delay,
                        order_id: *next_id,
                        cl_ord_id: value(&ix, 11),
                        symbol: value(&ix, 55),
                        side: value(&ix, 54),
                        qty: value(&ix, 38),
                        price: px,
                    };
                    *next_id += 1;
                    exec_report(s, &o, false, fix42);
                    r.acks += 1;
                    resting.push(o);
                }
                SessionEvent::LoggedOut { .. } => {
                    flush(s, tcp)?;
                    return Ok(r);
                }
                _ => {}
            }
        }
        let now = Instant::now();
        let mut k = 0;
        // Fills wait for the session to be logged on (those due while the counterparty was
        // away go out once it is back).
        while s.is_active() && k < resting.len() {
            if resting[k].due <= now {
                let o = resting.swap_remove(k);
                exec_report(s, &o, true, fix42);
                r.fills += 1;
            } else {
                k += 1;
            }
        }
        flush(s, tcp)?;
        if let Some(t) = s.poll_timeout() {
            if unix_ns() >= t {
                s.handle_timeout(unix_ns());
            }
        }
        if stop.load(Ordering::Relaxed) || s.is_closed() {
            return Ok(r);
        }
        match tcp.read(&mut buf) {
            Ok(0) => return Ok(r),
            Ok(n) => s.handle_bytes(unix_ns(), &buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The first field a NewOrderSingle must carry and does not: ClOrdID, HandlInst (FIX 4.2),
/// Symbol, Side, TransactTime, OrderQty, OrdType, and Price for a limit order.
fn missing_order_field(ix: &FieldIndex<'_>, fix42: bool) -> Option<u32> {
    let limit = ix.get(40).is_some_and(|f| f.value == b"2");
    [11, 21, 55, 54, 60, 38, 40, 44].into_iter().find(|&t| match t {
        21 => fix42 && ix.get(21).is_none(),
        44 => limit && ix.get(44).is_none(),
        t => ix.get(t).is_none(),
    })
}

fn exec_report<S: SessionStore>(s: &mut Session<S>, o: &Resting, filled: bool, fix42: bool) {
    let order_id = o.order_id.to_string();
    let exec_id = format!("{}{}", o.order_id, if filled { "F" } else { "N" });
    let (exec_type, status): (&[u8], &[u8]) = match (filled, fix42) {
        (false, _) => (b"0", b"0"),
        (true, true) => (b"2", b"2"),
        (true, false) => (b"F", b"2"),
    };
    let (last_qty, leaves, cum, last_px): (&[u8], &[u8], &[u8], &[u8]) =
        if filled { (&o.qty, b"0", &o.qty, &o.price) } else { (b"0", &o.qty, b"0", b"0") };
    let mut fields: Vec<(u32, &[u8])> = vec![(37, order_id.as_bytes()), (11, &o.cl_ord_id), (17, exec_id.as_bytes())];
    if fix42 {
        fields.push((20, b"0"));
    }
    fields.extend_from_slice(&[
        (150, exec_type),
        (39, status),
        (55, &o.symbol),
        (54, &o.side),
        (38, &o.qty),
        (32, last_qty),
        (31, last_px),
        (151, leaves),
        (14, cum),
        (6, last_px),
    ]);
    s.send(unix_ns(), "8", &fields);
}

/// An ExecutionReport refusing an order (its ClOrdID, Symbol, Side and OrderQty): OrdStatus
/// and ExecType Rejected, its OrdRejReason and Text.
fn rejected_report<S: SessionStore>(s: &mut Session<S>, order: &[Vec<u8>; 4], fix42: bool, reason: &[u8], text: &[u8]) {
    let [cl_ord_id, symbol, side, qty] = order;
    let exec_id = format!("R{}", unix_ns());
    let mut fields: Vec<(u32, &[u8])> = vec![(37, b"NONE"), (11, cl_ord_id), (17, exec_id.as_bytes())];
    if fix42 {
        fields.push((20, b"0"));
    }
    fields.extend_from_slice(&[
        (150, b"8"),
        (39, b"8"),
        (103, reason),
        (55, symbol),
        (54, side),
        (38, qty),
        (32, b"0"),
        (31, b"0"),
        (151, b"0"),
        (14, b"0"),
        (6, b"0"),
        (58, text),
    ]);
    s.send(unix_ns(), "8", &fields);
}

/// A FIX Logon's credentials: Username (553) and Password (554), each where given.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
}

// Not the password, ever: configs and reports are printed with `{:?}`.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "(hidden)"))
            .finish()
    }
}

impl Credentials {
    /// The Logon's fields for them.
    pub fn logon_fields(&self) -> Vec<(u32, String)> {
        let mut f = Vec::new();
        if let Some(u) = &self.username {
            f.push((553, u.clone()));
        }
        if let Some(p) = &self.password {
            f.push((554, p.clone()));
        }
        f
    }
    /// The password from the first line of `file` (a secret mounted as a file: not on a
    /// command line, where `ps` shows it).
    pub fn read_password(file: &std::path::Path) -> std::io::Result<String> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| std::io::Error::new(e.kind(), format!("the password file {}: {e}", file.display())))?;
        let line = text.lines().next().unwrap_or("").trim_end_matches('\r').to_string();
        if line.is_empty() || line.contains('\x01') {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                format!("the password file {}: its first line is empty or holds an SOH", file.display()),
            ));
        }
        Ok(line)
    }
}

/// The trading engine's settings.
#[derive(Debug, Clone)]
pub struct TradeConfig {
    pub md_group: SocketAddrV4,
    pub iface: Ipv4Addr,
    pub exchange: SocketAddr,
    pub sender: String,
    pub target: String,
    pub begin_string: String,
    pub qty: u64,
    pub duration: Duration,
    pub limits: RiskLimits,
    pub heartbeat_s: u32,
    /// A folder for the FIX session's durable store (sequence numbers, sent orders).
    pub store: Option<std::path::PathBuf>,
    /// Ask the exchange at logon to start both sides' sequence numbers at 1
    /// (ResetSeqNumFlag, 141=Y); the store, if any, starts afresh too.
    pub reset_seq: bool,
    /// The credentials our Logon carries, where the venue asks for them: Username (553)
    /// and Password (554).
    pub credentials: Credentials,
    /// Constant fields of every order (Account, TimeInForce, ...).
    pub order_fields: Vec<(u32, String)>,
    /// The kill switch: while this file exists, every order is refused (checked about
    /// every 100 ms).
    pub kill_file: Option<std::path::PathBuf>,
    /// Triggers decide instead of the whole-dollar rule; the file is read again whenever
    /// it changes (checked about every 100 ms), so triggers come and go while running.
    pub triggers: Option<std::path::PathBuf>,
}

/// Counts and stage latencies of a run of the engine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TradeReport {
    /// Market-data datagrams received, and the FIX messages they held (every one is read;
    /// bytes after a message that do not frame as one count as one undecodable message).
    pub md_datagrams: u64,
    pub md_messages: u64,
    pub md_entries: u64,
    pub md_undecodable: u64,
    /// Messages that arrived before the session was logged on (not traded).
    pub md_before_logon: u64,
    /// Trigger files taken (the first load included), and the ones refused (the triggers
    /// in force then stay as they were), with the reason.
    pub trigger_loads: u64,
    pub trigger_errors: Vec<String>,
    /// Market-data sequence gaps seen (MsgSeqNum of the messages).
    pub md_gaps: u64,
    pub whole_dollar_prices: u64,
    pub buys_sent: u64,
    pub acks: u64,
    pub buy_fills: u64,
    pub sells_sent: u64,
    /// BUY fills the exchange resent after a restart (their receipt not yet kept when the
    /// earlier run stopped) whose SELL the store shows sent: not sent again.
    pub sells_sent_before: u64,
    pub sell_fills: u64,
    pub risk_rejects: std::collections::BTreeMap<String, u64>,
    /// Orders the exchange refused (ExecutionReports with OrdStatus Rejected, and orders a
    /// session-level Reject or a BusinessMessageReject named), and orders it cancelled or
    /// let expire.
    pub rejected: u64,
    pub cancelled: u64,
    /// ExecutionReports of partial fills (each moved the position by its LastQty).
    pub partial_fills: u64,
    /// Every refusal of the exchange's, orders or not, by its reason (its Text, with the
    /// tag and reason code it named).
    pub rejections: std::collections::BTreeMap<String, u64>,
    pub seconds: f64,
    /// ns per stage: "1 parse" (datagram received -> validated), "2 decide" (validated ->
    /// an entry decided), "3 order ready" (risk checked, template patched), "4 send" (the
    /// write returned), "tick-to-trade" (datagram received -> send returned), all from the
    /// time-stamp counter; and "wire-to-wire" from the kernel's own software timestamps
    /// (SO_TIMESTAMPING): the datagram's receive time to the order's transmit time.
    pub latency_ns: std::collections::BTreeMap<String, Latency>,
    /// Orders whose wire-to-wire time could not be taken (no receive time on the datagram,
    /// or no transmit time came back).
    pub wire_missing: u64,
    /// Why wire-to-wire times are not measured at all, when they are not.
    pub wire_error: Option<String>,
    /// Why the run ended before its time, when it did: the exchange ended the session or
    /// closed the connection. `trade` writes the report, then exits with this error.
    pub ended: Option<String>,
}

/// Where the engine's orders go: the exchange's socket, with the stage marks.
struct Out<'a, S: SessionStore> {
    tcp: &'a mut TcpStream,
    session: &'a mut Session<S>,
    hs: &'a mut [Histogram<u64>; 5],
    now: u64,
    t0: u64,
    parsed: u64,
    decided: u64,
    error: Option<std::io::Error>,
    /// Bytes written on the order socket so far, and the kernel receive time of the
    /// datagram being handled: each order sent queues (key of its last byte, receive time).
    sent: &'a mut u64,
    rx_ns: Option<u64>,
    wire: Option<&'a mut std::collections::VecDeque<(u32, u64)>>,
}

impl<S: SessionStore> FttcOutput for Out<'_, S> {
    fn parsed(&mut self) {
        self.parsed = rdtsc();
        let _ = self.hs[0].record((self.parsed - self.t0).max(1));
    }
    fn decided(&mut self) {
        self.decided = rdtsc();
        let _ = self.hs[1].record((self.decided - self.parsed).max(1));
    }
    fn send(&mut self, seq: u64, order: &[u8]) {
        let ready = rdtsc();
        if let Err(e) = write_all(self.tcp, order) {
            self.error.get_or_insert(e);
            return;
        }
        let sent = rdtsc();
        *self.sent += order.len() as u64;
        if let Some(w) = self.wire.as_deref_mut() {
            // 0: the datagram came without a receive time (counted as missing).
            w.push_back(((*self.sent - 1) as u32, self.rx_ns.unwrap_or(0)));
        }
        if self.decided != 0 {
            let _ = self.hs[2].record((ready - self.decided).max(1));
            let _ = self.hs[3].record((sent - ready).max(1));
            let _ = self.hs[4].record((sent - self.t0).max(1));
        }
        self.session.record_sent(self.now, seq, order);
    }
}

/// A BusinessMessageReject (35=j) from the exchange: the message it names handed back to the
/// engine, and the refusal counted by its reason.
fn refusal<S: SessionStore>(
    msg_type: &[u8],
    message: &[u8],
    s: &Session<S>,
    fttc: &mut Fttc,
    into: &mut std::collections::BTreeMap<String, u64>,
) {
    if msg_type != b"j" {
        return;
    }
    let Ok(m) = Message::new_checked(message) else { return };
    let mut ix = FieldIndex::new();
    if ix.parse(&m).is_err() {
        return;
    }
    let ref_seq = ix.get(45).and_then(|f| f.as_uint().ok()).unwrap_or(0);
    refused(ref_seq, tickplant_core::fix_session::reject_reason(&ix), s, fttc, into);
}

/// An ExecutionReport the engine counted as a rejection (OrdStatus 8), counted by the
/// exchange's reason: its Text, with the OrdRejReason. Read only for a rejection, so that
/// an acknowledgement or a fill is parsed once (by the engine).
fn rejection_reason(message: &[u8], into: &mut std::collections::BTreeMap<String, u64>) {
    let Ok(m) = Message::new_checked(message) else { return };
    let mut ix = FieldIndex::new();
    if ix.parse(&m).is_err() {
        return;
    }
    let text = ix.get(58).map_or_else(|| "no reason given".into(), |f| String::from_utf8_lossy(f.value).into_owned());
    let why = match ix.get(103) {
        Some(code) => format!("{text} (OrdRejReason {})", String::from_utf8_lossy(code.value)),
        None => text,
    };
    *into.entry(why).or_default() += 1;
}

/// A message of ours the exchange refused by its MsgSeqNum: counted by the reason, and
/// handed to the engine (an order no longer counts against the limits).
fn refused<S: SessionStore>(
    ref_seq: u64,
    reason: String,
    s: &Session<S>,
    fttc: &mut Fttc,
    into: &mut std::collections::BTreeMap<String, u64>,
) {
    if let Some(sent) = s.store().get(ref_seq) {
        fttc.on_refused(&sent);
    }
    *into.entry(reason).or_default() += 1;
}

/// The error of a session that ended before we asked it to, with what to do when the
/// two sides' sequence numbers disagree (the usual reason a venue refuses a Logon).
pub(crate) fn session_ended(reason: &str) -> std::io::Error {
    let hint = if reason.contains("MsgSeqNum too low") || reason.contains("MsgSeqNum too high") {
        "; the two sides' sequence numbers disagree: `tickplant trade --store DIR` keeps ours \
         from one run to the next, and `--reset-seq` asks the exchange to start both at 1 \
         (ResetSeqNumFlag), where the venue allows it"
    } else {
        ""
    };
    std::io::Error::other(format!("the FIX session ended: {reason}{hint}"))
}

/// The ClOrdIDs of the orders in a session's store (an earlier run's, kept with
/// `--store`).
pub(crate) fn stored_cl_ord_ids<S: SessionStore>(store: &S) -> Vec<u64> {
    (1..store.next_sender_seq())
        .filter_map(|seq| store.get(seq))
        .filter_map(|m| {
            let msg = tickplant_wire::fix::Message::new_checked(&m).ok()?;
            if msg.msg_type() != b"D" {
                return None;
            }
            msg.fields().flatten().find(|f| f.tag == 11).and_then(|f| f.as_uint().ok())
        })
        .collect()
}

/// The ClOrdID of a run's first order. A venue refuses a ClOrdID it has seen that day, so
/// a run must not count from 1 again: it starts above every ClOrdID of `stored` (the
/// session's store: [`stored_cl_ord_ids`]), and at least at the seconds since midnight UTC
/// times 1,000,000, above what any earlier run of the day used unless it averaged a
/// million orders a second. Twelve digits hold it (the template's ClOrdID).
pub(crate) fn first_cl_ord_id(stored: &[u64], now_ns: u64) -> u64 {
    let by_time = (now_ns / 1_000_000_000 % 86_400) * 1_000_000;
    // Not the latest order's: a SELL takes its BUY's number plus one, after later BUYs.
    by_time.max(stored.iter().max().map_or(0, |m| m + 1))
}

/// Run the engine until `duration` passes or `stop` is set; then log out. The FIX session
/// keeps its sequence numbers and sent orders in `cfg.store` when given (a restart then
/// goes on from them), in memory otherwise.
pub fn run_trade(cfg: &TradeConfig, stop: &AtomicBool) -> std::io::Result<TradeReport> {
    match &cfg.store {
        // A received message's number is kept once the engine has acted on it (a fill's
        // SELL sent): a run stopped in between asks for the fill again at its next logon.
        Some(dir) => run_trade_with(cfg, stop, crate::fix_store::FileStore::open(dir, false)?.holding_target()),
        None => run_trade_with(cfg, stop, MemoryStore::default()),
    }
}

fn run_trade_with<S: SessionStore>(cfg: &TradeConfig, stop: &AtomicBool, store: S) -> std::io::Result<TradeReport> {
    let md = multicast_receiver(cfg.md_group, cfg.iface)?;
    md.set_nonblocking(true)?;
    let mut tcp = TcpStream::connect(cfg.exchange)?;
    tcp.set_nodelay(true)?;
    tcp.set_nonblocking(true)?;
    // Kernel timestamps for wire-to-wire: receive on the market data, transmit on the
    // orders. A kernel that refuses leaves the other figures as they are.
    let mut r = TradeReport::default();
    let stamping = crate::tstamp::enable_rx(&md).and_then(|_| crate::tstamp::enable_tx(&tcp));
    if let Err(e) = &stamping {
        r.wire_error = Some(format!("SO_TIMESTAMPING: {e}"));
    }
    let mut wire: std::collections::VecDeque<(u32, u64)> = std::collections::VecDeque::with_capacity(1024);
    let mut h_wire = hist();
    let mut sent: u64 = 0;
    let mut scfg = SessionConfig::new(Role::Initiator, &cfg.sender, &cfg.target);
    scfg.begin_string = cfg.begin_string.clone();
    scfg.heartbeat_s = cfg.heartbeat_s;
    scfg.reset_on_logon = cfg.reset_seq;
    scfg.logon_fields = cfg.credentials.logon_fields();
    // Before the Logon, which empties the store when asked to reset.
    let stored = stored_cl_ord_ids(&store);
    let first_id = first_cl_ord_id(&stored, unix_ns());
    let mut s = Session::new(scfg, store);
    s.handle_connected(unix_ns());
    flush_counted(&mut s, &mut tcp, &mut sent)?;
    let mut fttc = Fttc::new(FttcConfig {
        begin_string: cfg.begin_string.clone(),
        sender: cfg.sender.clone(),
        target: cfg.target.clone(),
        qty: cfg.qty,
        limits: cfg.limits,
        order_fields: cfg.order_fields.clone(),
    });
    fttc.set_next_cl_ord_id(first_id);
    // A BUY fill the venue resends after a restart (its receipt not yet kept when the run
    // stopped) whose SELL went out before: not sent again.
    fttc.set_sent_before(stored);
    let mut clock = TscClock::start();
    let start = Instant::now();
    let mut hs = [hist(), hist(), hist(), hist(), hist()];
    let mut dgram = vec![0u8; 65_536];
    let mut rbuf = vec![0u8; 65_536];
    let mut last_md_seq = 0u64;
    let (mut logged_on, mut logging_out) = (false, false);
    let deadline = start + cfg.duration;
    let mut next_file_check = start;
    let mut triggers_seen: Option<SystemTime> = None;
    if let Some(p) = &cfg.triggers {
        // The first load must succeed: trading on no rules would be a silent mistake.
        let text =
            std::fs::read_to_string(p).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
        let mut t = Triggers::new();
        let set = parse_triggers(&text).map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))?;
        t.apply(&set).map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))?;
        fttc.set_triggers(Some(t));
        triggers_seen = std::fs::metadata(p).and_then(|m| m.modified()).ok();
        r.trigger_loads += 1;
    }
    'run: loop {
        if Instant::now() >= next_file_check {
            next_file_check = Instant::now() + Duration::from_millis(100);
            if let Some(k) = &cfg.kill_file {
                fttc.risk_mut().set_kill_switch(k.exists());
            }
            if let Some(p) = &cfg.triggers {
                let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
                if modified.is_some() && modified != triggers_seen {
                    triggers_seen = modified;
                    let applied = std::fs::read_to_string(p)
                        .map_err(|e| e.to_string())
                        .and_then(|text| parse_triggers(&text).map_err(|e| e.to_string()))
                        .and_then(|set| {
                            fttc.triggers_mut().expect("trigger mode").apply(&set).map_err(|e| e.to_string())
                        });
                    match applied {
                        Ok(_) => r.trigger_loads += 1,
                        Err(e) => r.trigger_errors.push(format!("{}: {e}", p.display())),
                    }
                }
            }
        }
        // Market data first: it is the latency that counts.
        match crate::tstamp::recv(&md, &mut dgram) {
            Ok((n, rx_ns)) => {
                let t0 = rdtsc();
                r.md_datagrams += 1;
                let bytes = &dgram[..n];
                let mut out = Out {
                    tcp: &mut tcp,
                    session: &mut s,
                    hs: &mut hs,
                    now: unix_ns(),
                    t0,
                    parsed: 0,
                    decided: 0,
                    error: None,
                    sent: &mut sent,
                    rx_ns,
                    wire: if stamping.is_ok() { Some(&mut wire) } else { None },
                };
                // Every message of the datagram, in order (a venue that batches sends
                // several). The first is handed over with the datagram's bytes as they
                // are (the engine finds its end), so that no framing pass comes before it;
                // each later one is framed first. Their stages count from the datagram's
                // receipt, the messages before them included.
                let mut at = 0;
                loop {
                    let msg = &bytes[at..];
                    r.md_messages += 1;
                    let mut seq = out.session.next_sender_seq();
                    if logged_on {
                        if fttc.on_market_data(out.now, msg, &mut seq, &mut out).is_err() {
                            r.md_undecodable += 1;
                        }
                    } else {
                        // Orders wait for the session: the prices are counted, not traded.
                        r.md_before_logon += 1;
                        if Message::new_checked(msg).is_err() {
                            r.md_undecodable += 1;
                        }
                    }
                    if let Some(e) = out.error.take() {
                        return Err(e);
                    }
                    // After the orders are out: gap counting, and the next message.
                    if let Some(seq) = md_seq(msg) {
                        if last_md_seq != 0 && seq > last_md_seq + 1 {
                            r.md_gaps += 1;
                        }
                        last_md_seq = seq;
                    }
                    match fix::frame_len(msg) {
                        Ok(Some(len)) if len < msg.len() => at += len,
                        // The datagram's end, or bytes that are not a message (counted
                        // undecodable above): nothing more can be framed.
                        _ => break,
                    }
                    out.now = unix_ns();
                    (out.parsed, out.decided) = (0, 0);
                }
                continue;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        // The exchange.
        match tcp.read(&mut rbuf) {
            Ok(0) => {
                if !logging_out {
                    r.ended = Some(format!(
                        "the exchange closed the connection without a Logout, {:.1} s into the run",
                        start.elapsed().as_secs_f64()
                    ));
                }
                break;
            }
            Ok(n) => s.handle_bytes(unix_ns(), &rbuf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => {
                r.ended = Some(format!(
                    "reading from the exchange, {:.1} s into the run: {e}",
                    start.elapsed().as_secs_f64()
                ));
                break;
            }
        }
        // Transmit times of the orders sent, matched to their datagrams' receive times by
        // the byte offset of each order's last byte. Session messages have keys of their own
        // and match nothing.
        if !wire.is_empty() {
            let missing = &mut r.wire_missing;
            let _ = crate::tstamp::drain_tx(&tcp, |k, t| {
                while let Some(&(key, rx)) = wire.front() {
                    if key == k {
                        wire.pop_front();
                        if rx == 0 || t < rx {
                            *missing += 1;
                        } else {
                            let _ = h_wire.record((t - rx).max(1));
                        }
                        break;
                    }
                    if (key.wrapping_sub(k) as i32) > 0 {
                        break;
                    }
                    // An order whose own time never came: the kernel reports each write's
                    // last byte, so an order split across writes can lose its key.
                    wire.pop_front();
                    *missing += 1;
                }
            });
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                SessionEvent::LoggedOn => logged_on = true,
                SessionEvent::App { msg_type, message, .. } if msg_type == b"8" => {
                    let mut out = Out {
                        tcp: &mut tcp,
                        session: &mut s,
                        hs: &mut hs,
                        now: unix_ns(),
                        t0: 0,
                        parsed: 0,
                        decided: 0,
                        error: None,
                        sent: &mut sent,
                        rx_ns: None,
                        wire: None,
                    };
                    let mut seq = out.session.next_sender_seq();
                    let rejected = fttc.stats().rejected;
                    let _ = fttc.on_execution(out.now, &message, &mut seq, &mut out);
                    if let Some(e) = out.error {
                        return Err(e);
                    }
                    if fttc.stats().rejected > rejected {
                        rejection_reason(&message, &mut r.rejections);
                    }
                }
                SessionEvent::App { msg_type, message, .. } => {
                    refusal(&msg_type, &message, &s, &mut fttc, &mut r.rejections);
                }
                SessionEvent::RejectedByCounterparty { ref_seq, reason } => {
                    refused(ref_seq, reason, &s, &mut fttc, &mut r.rejections);
                }
                SessionEvent::LoggedOut { reason } if !logging_out => {
                    r.ended = Some(session_ended(&reason).to_string());
                    // Say goodbye if the session has a Logout to send.
                    let _ = flush_counted(&mut s, &mut tcp, &mut sent);
                    break 'run;
                }
                _ => {}
            }
        }
        flush_counted(&mut s, &mut tcp, &mut sent)?;
        // Every event received so far is acted on and its orders written.
        s.commit_received();
        if let Some(e) = s.store_failure() {
            return Err(std::io::Error::other(format!("the session store failed, trading stopped: {e}")));
        }
        if let Some(t) = s.poll_timeout() {
            if unix_ns() >= t {
                s.handle_timeout(unix_ns());
            }
        }
        if s.is_closed() {
            break;
        }
        if !logging_out && (Instant::now() >= deadline || stop.load(Ordering::Relaxed)) {
            s.logout(unix_ns(), "done");
            flush_counted(&mut s, &mut tcp, &mut sent)?;
            logging_out = true;
        }
        if logging_out && Instant::now() >= deadline + Duration::from_secs(5) {
            break;
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    clock.finish();
    let st = fttc.stats();
    r.md_entries = st.entries;
    r.whole_dollar_prices = st.whole_dollar;
    r.buys_sent = st.buys;
    r.acks = st.acks;
    r.buy_fills = st.buy_fills;
    r.sells_sent = st.sells;
    r.sells_sent_before = st.sells_sent_before;
    r.sell_fills = st.sell_fills;
    for (name, h) in ["1 parse", "2 decide", "3 order ready", "4 send", "tick-to-trade"].iter().zip(&hs) {
        r.latency_ns.insert(name.to_string(), latency(h, &clock));
    }
    r.wire_missing += wire.len() as u64;
    if stamping.is_ok() {
        r.latency_ns.insert("wire-to-wire".to_string(), latency_ns(&h_wire));
    }
    r.risk_rejects = refusals(&fttc);
    r.rejected = st.rejected;
    r.cancelled = st.cancelled;
    r.partial_fills = st.partial_fills;
    Ok(r)
}

/// Orders decided and not sent, by reason (those with none left out): the risk checks'
/// refusals, a number too wide for the template, an entry with no Symbol.
fn refusals(fttc: &Fttc) -> std::collections::BTreeMap<String, u64> {
    let st = fttc.stats();
    let risk = fttc.rejects().map(|(why, n)| (why.as_str(), n));
    risk.chain([("template", st.template_errors), ("no_symbol", st.no_symbol)])
        .filter(|&(_, n)| n > 0)
        .map(|(why, n)| (why.to_string(), n))
        .collect()
}

/// The MsgSeqNum of a market-data datagram (for gap counting): its first MsgSeqNum (34)
/// field, read field by field (a data field may hold the bytes `<SOH>34=`); `None` for a
/// datagram that is not a valid message. Off the latency path: it runs after the orders.
fn md_seq(b: &[u8]) -> Option<u64> {
    let m = Message::new_checked(b).ok()?;
    m.fields().map_while(Result::ok).find(|f| f.tag == 34)?.as_uint().ok()
}

#[cfg(test)]
mod md_seq_tests {
    use super::md_seq;
    use tickplant_wire::fix::Writer;

    /// The sequence number is the field's, not bytes that look like it inside a data field,
    /// and a damaged datagram has none.
    #[test]
    fn md_seq_reads_the_field_not_look_alike_bytes() {
        let mut w = Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field(95, b"8").field(96, b"\x0134=999\x01").field(34, b"5");
        let m = w.finish().to_vec();
        assert_eq!(md_seq(&m), Some(5));
        let mut bad = m.clone();
        let n = bad.len();
        bad[n - 5] ^= 1;
        assert_eq!(md_seq(&bad), None);
    }
}

#[cfg(test)]
mod exchange_tests {
    use super::{missing_order_field, Credentials};

    /// An order whose ClOrdID the counterparty used before is refused (ExecutionReport
    /// Rejected, OrdRejReason 6), as a venue refuses one within its day; the first is
    /// acknowledged.
    #[test]
    fn the_exchange_refuses_a_cl_ord_id_used_before() {
        use super::*;
        let listen: SocketAddr = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let stop = Arc::new(AtomicBool::new(false));
        let cfg = ExchangeConfig {
            listen,
            comp_id: "EX".into(),
            fill_delay: Duration::from_secs(60),
            fill_price: "100".into(),
        };
        let ex = std::thread::spawn({
            let stop = stop.clone();
            move || run_exchange(&cfg, stop)
        });
        let mut tcp = (0..100)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(20));
                TcpStream::connect(listen).ok()
            })
            .expect("the exchange listens");
        tcp.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut s = Session::new(SessionConfig::new(Role::Initiator, "TP", "EX"), MemoryStore::default());
        s.handle_connected(unix_ns());
        let order: [(u32, &[u8]); 6] =
            [(11, b"42"), (55, b"AAPL"), (54, b"1"), (60, b"20261129-14:30:00.000"), (38, b"100"), (40, b"1")];
        let (mut reports, mut sent, mut buf) = (Vec::new(), false, [0u8; 4096]);
        let t0 = Instant::now();
        while reports.len() < 2 && t0.elapsed() < Duration::from_secs(10) {
            flush(&mut s, &mut tcp).unwrap();
            if let Ok(n) = tcp.read(&mut buf) {
                s.handle_bytes(unix_ns(), &buf[..n]);
            }
            while let Some(ev) = s.poll_event() {
                match ev {
                    SessionEvent::LoggedOn if !sent => {
                        s.send(unix_ns(), "D", &order);
                        s.send(unix_ns(), "D", &order);
                        sent = true;
                    }
                    SessionEvent::App { msg_type, message, .. } if msg_type == b"8" => reports.push(message),
                    _ => {}
                }
            }
        }
        let field = |m: &[u8], tag: u32| {
            let m = Message::new_checked(m).unwrap();
            m.fields().flatten().find(|f| f.tag == tag).map(|f| f.value.to_vec())
        };
        assert_eq!(reports.len(), 2);
        assert_eq!(field(&reports[0], 39).as_deref(), Some(&b"0"[..]), "the first is acknowledged");
        assert_eq!(field(&reports[1], 39).as_deref(), Some(&b"8"[..]), "the second is rejected");
        assert_eq!(field(&reports[1], 103).as_deref(), Some(&b"6"[..]));
        assert_eq!(field(&reports[1], 11).as_deref(), Some(&b"42"[..]));
        stop.store(true, Ordering::Relaxed);
        drop(tcp);
        let r = ex.join().unwrap().unwrap();
        assert_eq!((r.orders, r.acks, r.duplicates), (2, 1, 1));
    }

    /// The password comes from a file's first line, is never printed, and goes into the
    /// Logon as 554 after the Username.
    #[test]
    fn credentials_come_from_a_file_and_are_never_printed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("pw"), "s3cret pass\r\nsecond line\n").unwrap();
        std::fs::write(d.path().join("empty"), "\n").unwrap();
        let c = Credentials {
            username: Some("trader7".into()),
            password: Some(Credentials::read_password(&d.path().join("pw")).unwrap()),
        };
        assert_eq!(c.logon_fields(), vec![(553, "trader7".into()), (554, "s3cret pass".into())]);
        assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
        let e = Credentials::read_password(&d.path().join("empty")).unwrap_err().to_string();
        assert!(e.contains("its first line is empty"), "{e}");
    }
    use tickplant_wire::fix::{FieldIndex, Message, OrderSpec, OrderTemplate, Writer};

    fn missing(fields: &[(u32, &[u8])], fix42: bool) -> Option<u32> {
        let mut w = Writer::new(if fix42 { "FIX.4.2" } else { "FIX.4.4" }, "D");
        for (t, v) in fields {
            w.field(*t, v);
        }
        let bytes = w.finish().to_vec();
        let m = Message::new_checked(&bytes).unwrap();
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        missing_order_field(&ix, fix42)
    }

    /// `sim exchange` refuses what a venue's engine refuses: a FIX 4.2 order without
    /// HandlInst, a limit order without a Price, an order without a Side; our own templates
    /// pass.
    #[test]
    fn orders_missing_a_required_field_are_found() {
        let base: Vec<(u32, &[u8])> =
            vec![(11, b"1"), (55, b"AAPL"), (54, b"1"), (60, b"20261121-14:30:00.000"), (38, b"100"), (40, b"1")];
        assert_eq!(missing(&base, false), None);
        assert_eq!(missing(&base, true), Some(21));
        let mut limit = base.clone();
        limit[5] = (40, b"2");
        assert_eq!(missing(&limit, false), Some(44));
        let no_side: Vec<(u32, &[u8])> = base.iter().copied().filter(|f| f.0 != 54).collect();
        assert_eq!(missing(&no_side, false), Some(54));
        for begin in ["FIX.4.4", "FIX.4.2"] {
            let mut t = OrderTemplate::new(&OrderSpec::new(begin, "TP", "EX", "AAPL"));
            let m = Message::new_checked(t.bytes()).unwrap();
            let mut ix = FieldIndex::new();
            ix.parse(&m).unwrap();
            assert_eq!(missing_order_field(&ix, begin == "FIX.4.2"), None, "{begin}");
        }
    }
}

//! The tick-to-trade harness on real sockets: a FIX market-data sender (UDP multicast), a
//! FIX 4.4 exchange (TCP acceptor), and the trading engine between them.
//!
//! * [`send_market_data`] sends one FIX message per datagram to a multicast group, paced to
//!   a rate.
//! * [`run_exchange`] accepts FIX sessions: an ExecutionReport (New) for each
//!   NewOrderSingle at once, and a fill after a delay.
//! * [`run_trade`] is the engine. It reads market data, checks every entry's price, and
//!   for each whole-dollar price (`.000`) it sends a market BUY of `qty`; each BUY fill
//!   sends a SELL of the same quantity (the `fttc` strategy of the reference harness).
//!   Orders are pre-built templates ([`tickplant_wire::fix::OrderTemplate`]), checked by
//!   [`tickplant_core::risk::Risk`] first. The time-stamp counter marks each stage:
//!   datagram received, parsed, decided, order ready, send returned.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};
use tickplant_core::fix_session::{MemoryStore, Role, Session, SessionConfig, SessionEvent, SessionStore};
use tickplant_core::risk::{OrderIntent, Risk, RiskLimits};
use tickplant_wire::fix::{self, FieldIndex, Message, OrderSpec, OrderTemplate};

use crate::clock::{rdtsc, TscClock};
use crate::pipeline::{hist, latency, Latency};

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
    pub bytes: u64,
    pub seconds: f64,
}

/// Send `next(now)`'s messages to `group` at `rate` per second for `duration` (or until
/// `stop`), one per datagram.
pub fn send_market_data(
    group: SocketAddrV4,
    iface: Ipv4Addr,
    rate: u64,
    duration: Duration,
    stop: &AtomicBool,
    mut next: impl FnMut(u64) -> Vec<u8>,
) -> std::io::Result<MdReport> {
    let sock = multicast_sender(iface)?;
    let start = Instant::now();
    let mut r = MdReport::default();
    let gap = Duration::from_nanos(1_000_000_000 / rate.max(1));
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
        let m = next(unix_ns());
        sock.send_to(&m, group)?;
        r.messages += 1;
        r.bytes += m.len() as u64;
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
    while let Some(m) = s.poll_transmit() {
        write_all(tcp, &m)?;
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
}

/// Accept FIX sessions until `stop`; each connection runs on its own thread.
pub fn run_exchange(cfg: &ExchangeConfig, stop: Arc<AtomicBool>) -> std::io::Result<ExchangeReport> {
    let listener = TcpListener::bind(cfg.listen)?;
    listener.set_nonblocking(true)?;
    let mut threads = Vec::new();
    let mut report = ExchangeReport::default();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((tcp, _)) => {
                report.sessions += 1;
                let (cfg, stop) = (cfg.clone(), stop.clone());
                threads.push(std::thread::spawn(move || exchange_session(tcp, &cfg, &stop)));
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
        }
    }
    Ok(report)
}

struct Resting {
    due: Instant,
    order_id: u64,
    cl_ord_id: Vec<u8>,
    symbol: Vec<u8>,
    side: Vec<u8>,
    qty: Vec<u8>,
    price: Vec<u8>,
}

fn exchange_session(mut tcp: TcpStream, cfg: &ExchangeConfig, stop: &AtomicBool) -> std::io::Result<ExchangeReport> {
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
    let mut s = Session::new(scfg, MemoryStore::default());
    s.handle_connected(unix_ns());
    s.handle_bytes(unix_ns(), &pending);
    let mut r = ExchangeReport::default();
    let mut resting: Vec<Resting> = Vec::new();
    let mut next_id = 1u64;
    let fix42 = begin == "FIX.4.2";
    loop {
        flush(&mut s, &mut tcp)?;
        while let Some(ev) = s.poll_event() {
            match ev {
                SessionEvent::App { msg_type, message, .. } if msg_type == b"D" => {
                    r.orders += 1;
                    let Ok(m) = Message::new_checked(&message) else { continue };
                    let mut ix = FieldIndex::new();
                    if ix.parse(&m).is_err() {
                        continue;
                    }
                    let px = if ix.get(44).is_some() { value(&ix, 44) } else { cfg.fill_price.as_bytes().to_vec() };
                    let o = Resting {
                        due: Instant::now() + cfg.fill_delay,
                        order_id: next_id,
                        cl_ord_id: value(&ix, 11),
                        symbol: value(&ix, 55),
                        side: value(&ix, 54),
                        qty: value(&ix, 38),
                        price: px,
                    };
                    next_id += 1;
                    exec_report(&mut s, &o, false, fix42);
                    r.acks += 1;
                    resting.push(o);
                }
                SessionEvent::LoggedOut { .. } => {
                    flush(&mut s, &mut tcp)?;
                    return Ok(r);
                }
                _ => {}
            }
        }
        let now = Instant::now();
        let mut k = 0;
        while k < resting.len() {
            if resting[k].due <= now {
                let o = resting.swap_remove(k);
                exec_report(&mut s, &o, true, fix42);
                r.fills += 1;
            } else {
                k += 1;
            }
        }
        flush(&mut s, &mut tcp)?;
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
}

/// Counts and stage latencies of a run of the engine.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TradeReport {
    pub md_messages: u64,
    pub md_entries: u64,
    pub md_undecodable: u64,
    /// Market-data sequence gaps seen (MsgSeqNum of the datagrams).
    pub md_gaps: u64,
    pub whole_dollar_prices: u64,
    pub buys_sent: u64,
    pub acks: u64,
    pub buy_fills: u64,
    pub sells_sent: u64,
    pub sell_fills: u64,
    pub risk_rejects: std::collections::BTreeMap<String, u64>,
    pub seconds: f64,
    /// ns per stage: "1 parse" (datagram received -> parsed), "2 decide" (parsed -> the
    /// entry's decision), "3 order ready" (template patched), "4 send" (send returned),
    /// "tick-to-trade" (datagram received -> send returned).
    pub latency_ns: std::collections::BTreeMap<String, Latency>,
}

struct Symbol {
    id: u32,
    template: OrderTemplate,
}

/// Run the engine until `duration` passes or `stop` is set; then log out.
pub fn run_trade(cfg: &TradeConfig, stop: &AtomicBool) -> std::io::Result<TradeReport> {
    let md = multicast_receiver(cfg.md_group, cfg.iface)?;
    md.set_nonblocking(true)?;
    let mut tcp = TcpStream::connect(cfg.exchange)?;
    tcp.set_nodelay(true)?;
    tcp.set_nonblocking(true)?;
    let mut scfg = SessionConfig::new(Role::Initiator, &cfg.sender, &cfg.target);
    scfg.begin_string = cfg.begin_string.clone();
    scfg.heartbeat_s = cfg.heartbeat_s;
    let mut s = Session::new(scfg, MemoryStore::default());
    s.handle_connected(unix_ns());
    flush(&mut s, &mut tcp)?;
    let mut clock = TscClock::start();
    let start = Instant::now();
    let mut r = TradeReport::default();
    let mut risk = Risk::new(cfg.limits);
    let mut symbols: HashMap<Vec<u8>, Symbol> = HashMap::new();
    let mut hs = [hist(), hist(), hist(), hist(), hist()];
    let mut dgram = vec![0u8; 65_536];
    let mut rbuf = vec![0u8; 65_536];
    let mut spare: Option<FieldIndex<'static>> = Some(FieldIndex::new());
    let mut cl_ord_id = 0u64;
    let mut last_md_seq = 0u64;
    let (mut logged_on, mut logging_out) = (false, false);
    let deadline = start + cfg.duration;
    // Market orders are checked by risk at the last price seen for the symbol.
    let mut last_px: HashMap<u32, i64> = HashMap::new();
    loop {
        // Market data first: it is the latency that counts.
        match md.recv(&mut dgram) {
            Ok(n) => {
                let t0 = rdtsc();
                r.md_messages += 1;
                let bytes = &dgram[..n];
                let mut ix = spare.take().unwrap_or_default().recycle();
                let parsed = Message::new_checked(bytes).ok().filter(|m| ix.parse(m).is_ok());
                let t1 = rdtsc();
                let Some(_m) = parsed else {
                    r.md_undecodable += 1;
                    spare = Some(ix.recycle());
                    continue;
                };
                let _ = hs[0].record((t1 - t0).max(1));
                if let Some(seq) = ix.get(34).and_then(|f| f.as_uint().ok()) {
                    if last_md_seq != 0 && seq > last_md_seq + 1 {
                        r.md_gaps += 1;
                    }
                    last_md_seq = seq;
                }
                // The group's first field is its delimiter, whatever the counterparty uses.
                let delim =
                    ix.fields().iter().position(|f| f.tag == 268).and_then(|p| ix.fields().get(p + 1)).map(|f| f.tag);
                let entries: Vec<(Vec<u8>, i64)> = match delim.map(|d| ix.group(268, d, &[])) {
                    Some(Ok(g)) => g
                        .filter_map(|e| {
                            let sym = e.iter().find(|f| f.tag == 55)?.value.to_vec();
                            let px = fix::parse_decimal(e.iter().find(|f| f.tag == 270)?.value)?;
                            Some((sym, px))
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                for (sym, px) in entries {
                    r.md_entries += 1;
                    let whole = px % 1_000_000_000 == 0;
                    let t2 = rdtsc();
                    let _ = hs[1].record((t2 - t1).max(1));
                    let id = symbols.len() as u32;
                    let entry = symbols.entry(sym.clone()).or_insert_with(|| {
                        let spec =
                            OrderSpec::new(&cfg.begin_string, &cfg.sender, &cfg.target, &String::from_utf8_lossy(&sym));
                        Symbol { id, template: OrderTemplate::new(&spec) }
                    });
                    last_px.insert(entry.id, px);
                    if !whole {
                        continue;
                    }
                    r.whole_dollar_prices += 1;
                    if !logged_on {
                        continue;
                    }
                    let intent = OrderIntent { symbol: entry.id, buy: true, qty: cfg.qty, price: px };
                    // A refusal is counted by the risk state, with its reason.
                    if risk.check(unix_ns(), &intent).is_err() {
                        continue;
                    }
                    cl_ord_id += 1;
                    let seq = s.next_sender_seq();
                    let t = &mut entry.template;
                    let now = unix_ns();
                    let ok = t.set_seq_num(seq).and(t.set_cl_ord_id(cl_ord_id)).and(t.set_qty(cfg.qty));
                    if ok.is_err() {
                        *r.risk_rejects.entry("template".into()).or_default() += 1;
                        continue;
                    }
                    t.set_side(b'1');
                    t.set_time(now);
                    let t3 = rdtsc();
                    let bytes = t.bytes();
                    write_all(&mut tcp, bytes)?;
                    let t4 = rdtsc();
                    s.record_sent(now, seq, bytes);
                    r.buys_sent += 1;
                    let _ = hs[2].record((t3 - t2).max(1));
                    let _ = hs[3].record((t4 - t3).max(1));
                    let _ = hs[4].record((t4 - t0).max(1));
                }
                spare = Some(ix.recycle());
                continue;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        // The exchange.
        match tcp.read(&mut rbuf) {
            Ok(0) => break,
            Ok(n) => s.handle_bytes(unix_ns(), &rbuf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        while let Some(ev) = s.poll_event() {
            match ev {
                SessionEvent::LoggedOn => logged_on = true,
                SessionEvent::App { msg_type, message, .. } if msg_type == b"8" => {
                    let Ok(m) = Message::new_checked(&message) else { continue };
                    let mut ex = FieldIndex::new();
                    if ex.parse(&m).is_err() {
                        continue;
                    }
                    let status = value(&ex, 39);
                    let side = value(&ex, 54);
                    let sym = value(&ex, 55);
                    let qty = ex.get(32).and_then(|f| f.as_uint().ok()).unwrap_or(0);
                    let Some(symbol) = symbols.get_mut(&sym) else { continue };
                    match status.as_slice() {
                        b"0" => r.acks += 1,
                        b"2" if side == b"1" => {
                            r.buy_fills += 1;
                            risk.on_fill(symbol.id, true, qty, true);
                            // The harness: a SELL of the same quantity on the BUY's fill.
                            let price = last_px.get(&symbol.id).copied().unwrap_or(0);
                            let intent = OrderIntent { symbol: symbol.id, buy: false, qty: cfg.qty, price };
                            if risk.check(unix_ns(), &intent).is_err() {
                                continue;
                            }
                            cl_ord_id += 1;
                            let seq = s.next_sender_seq();
                            let t = &mut symbol.template;
                            let now = unix_ns();
                            if t.set_seq_num(seq).and(t.set_cl_ord_id(cl_ord_id)).and(t.set_qty(cfg.qty)).is_err() {
                                continue;
                            }
                            t.set_side(b'2');
                            t.set_time(now);
                            let bytes = t.bytes();
                            write_all(&mut tcp, bytes)?;
                            s.record_sent(now, seq, bytes);
                            r.sells_sent += 1;
                        }
                        b"2" => {
                            r.sell_fills += 1;
                            risk.on_fill(symbol.id, false, qty, true);
                        }
                        _ => {}
                    }
                }
                SessionEvent::LoggedOut { reason } if !logging_out => {
                    return Err(std::io::Error::other(format!("the exchange ended the session: {reason}")));
                }
                _ => {}
            }
        }
        flush(&mut s, &mut tcp)?;
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
            flush(&mut s, &mut tcp)?;
            logging_out = true;
        }
        if logging_out && Instant::now() >= deadline + Duration::from_secs(5) {
            break;
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    clock.finish();
    for (name, h) in ["1 parse", "2 decide", "3 order ready", "4 send", "tick-to-trade"].iter().zip(&hs) {
        r.latency_ns.insert(name.to_string(), latency(h, &clock));
    }
    for (why, n) in risk.rejects() {
        if n > 0 {
            r.risk_rejects.insert(why.as_str().to_string(), n);
        }
    }
    Ok(r)
}

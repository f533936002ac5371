//! Live UDP: groups (multicast or unicast) read as a [`Source`], and groups to send a
//! stream on.
//!
//! An input is named by a URL, `udp://GROUP:PORT[?iface=ADDR&source=ADDR&rcvbuf=BYTES]`,
//! where a capture path would stand ([`Input`]). [`LiveSource`] receives each input's
//! datagrams in batches (`recvmmsg` on non-blocking sockets), stamps each with the kernel's
//! receive time (`SO_TIMESTAMPNS`), counts the kernel's drops on the socket (`SO_RXQ_OVFL`), and hands
//! each datagram on behind Ethernet, IPv4 and UDP headers built from its source and
//! destination: what follows (the arbitrator, the pcap writers) reads it as it reads a
//! captured frame. It ends when its stop flag is raised (SIGINT or SIGTERM, see
//! [`stop_on_signals`]) or its duration has passed; between datagrams it tells the runner
//! the time ([`Source::idle`]), so that the arbitrator's waits end on time on a quiet
//! line.
//!
//! [`UdpSender`] sends datagrams to a group (`hr-out = "udp://..."`), counting send errors.
//!
//! Written against libc for `recvmmsg` and its control messages (std has neither); socket2
//! sets the sockets up.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tickplant_core::packed::Packed;
use tickplant_core::LinkType;
use tickplant_wire::build::{write_udp_headers, Flow, UDP_HEADERS_LEN};

use crate::pcap::Frame;
use crate::source::Source;

/// The largest datagram a live input takes whole (a jumbo frame's payload); a longer one is
/// cut to this length, counted as truncated, and goes on as it is (the arbitrator then
/// finds it malformed).
pub const MAX_DATAGRAM: usize = 9216;
/// Datagrams one `recvmmsg` call may take from one socket.
const BATCH: usize = 32;
/// A datagram's control buffer, in u64 words (aligned for cmsghdr): room for its receive
/// time and the drop counter.
const CONTROL_WORDS: usize = 16;
/// Default socket receive buffer (the kernel may cap it at `net.core.rmem_max`; root
/// goes past the cap with `SO_RCVBUFFORCE`).
pub const DEFAULT_RCVBUF: usize = 8 << 20;

/// A live group: `udp://GROUP:PORT[?iface=ADDR&source=ADDR&rcvbuf=BYTES&ttl=N&loop=0|1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpUrl {
    /// The group (multicast) or the address (unicast) the datagrams go to.
    pub group: Ipv4Addr,
    pub port: u16,
    /// The local interface's address that joins the group (receive) or sends (send);
    /// `None`: the kernel's choice.
    pub iface: Option<Ipv4Addr>,
    /// Receive only what this sender sends to the group: a source-specific join (IGMPv3,
    /// `IP_ADD_SOURCE_MEMBERSHIP`), what a group in 232.0.0.0/8 needs where the network
    /// runs source-specific multicast, and a filter in the kernel against other senders
    /// on the group. Receiving only.
    pub source: Option<Ipv4Addr>,
    /// Socket receive buffer, bytes ([`DEFAULT_RCVBUF`] when not given).
    pub rcvbuf: Option<usize>,
    /// Multicast TTL of what is sent (1 when not given).
    pub ttl: Option<u32>,
    /// Whether what is sent to a group loops back to this host's own members (on when not
    /// given).
    pub multicast_loop: Option<bool>,
}

/// Why a URL was refused: the text, and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError {
    pub url: String,
    pub reason: String,
}

impl std::fmt::Display for UrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} (expected udp://GROUP:PORT[?iface=ADDR&source=ADDR&rcvbuf=BYTES&ttl=N&loop=0|1])",
            self.url, self.reason
        )
    }
}

impl std::error::Error for UrlError {}

impl std::str::FromStr for UdpUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<UdpUrl, UrlError> {
        let err = |reason: String| UrlError { url: s.to_string(), reason };
        let rest = s.strip_prefix("udp://").ok_or_else(|| err("not a udp:// URL".into()))?;
        let (addr, query) = rest.split_once('?').unwrap_or((rest, ""));
        let addr: SocketAddrV4 =
            addr.parse().map_err(|_| err(format!("'{addr}' is not an IPv4 address and port (GROUP:PORT)")))?;
        if addr.port() == 0 {
            return Err(err("port 0".into()));
        }
        let mut url = UdpUrl {
            group: *addr.ip(),
            port: addr.port(),
            iface: None,
            source: None,
            rcvbuf: None,
            ttl: None,
            multicast_loop: None,
        };
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| err(format!("'{kv}' is not KEY=VALUE")))?;
            let bad = |what: &str| err(format!("{k}={v}: not {what}"));
            match k {
                "iface" => url.iface = Some(v.parse().map_err(|_| bad("an IPv4 address"))?),
                "source" => {
                    if !url.group.is_multicast() {
                        return Err(err(format!(
                            "source={v}: a source is for a multicast group, and {} is not one",
                            url.group
                        )));
                    }
                    url.source = Some(v.parse().map_err(|_| bad("an IPv4 address (the sender's)"))?);
                }
                "rcvbuf" => url.rcvbuf = Some(v.parse().ok().filter(|&n| n > 0).ok_or_else(|| bad("a size in bytes"))?),
                "ttl" => url.ttl = Some(v.parse().ok().filter(|&n| n <= 255).ok_or_else(|| bad("a TTL of 0 to 255"))?),
                "loop" => {
                    url.multicast_loop = Some(match v {
                        "0" | "false" => false,
                        "1" | "true" => true,
                        _ => return Err(bad("0 or 1")),
                    })
                }
                _ => return Err(err(format!("unknown key '{k}' (iface, source, rcvbuf, ttl, loop)"))),
            }
        }
        Ok(url)
    }
}

impl std::fmt::Display for UdpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "udp://{}:{}", self.group, self.port)?;
        let mut sep = '?';
        let mut put = |f: &mut std::fmt::Formatter<'_>, kv: String| {
            let r = write!(f, "{sep}{kv}");
            sep = '&';
            r
        };
        if let Some(i) = self.iface {
            put(f, format!("iface={i}"))?;
        }
        if let Some(a) = self.source {
            put(f, format!("source={a}"))?;
        }
        if let Some(b) = self.rcvbuf {
            put(f, format!("rcvbuf={b}"))?;
        }
        if let Some(t) = self.ttl {
            put(f, format!("ttl={t}"))?;
        }
        if let Some(l) = self.multicast_loop {
            put(f, format!("loop={}", u8::from(l)))?;
        }
        Ok(())
    }
}

/// Where an input's frames come from, or where an output's go: a capture file or a live
/// group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Capture(PathBuf),
    Udp(UdpUrl),
}

impl Input {
    /// A path as given on a command line or in a config: `udp://...` is a live group,
    /// anything else a file.
    pub fn parse(p: &Path) -> Result<Input, UrlError> {
        match p.to_str() {
            Some(s) if s.starts_with("udp://") => Ok(Input::Udp(s.parse()?)),
            _ => Ok(Input::Capture(p.to_path_buf())),
        }
    }
    /// Whether a path names a live group.
    pub fn is_live(p: &Path) -> bool {
        p.to_str().is_some_and(|s| s.starts_with("udp://"))
    }
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Input::Capture(p) => write!(f, "{}", p.display()),
            Input::Udp(u) => u.fmt(f),
        }
    }
}

/// A live input's error: which group, and what the OS said.
#[derive(Debug)]
pub struct LiveError {
    pub input: String,
    pub what: &'static str,
    pub error: io::Error,
}

impl std::fmt::Display for LiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.input, self.what, self.error)
    }
}

// No source: the message already ends with the system's error (as a source too, an
// `error: a: b` chain would print it twice).
impl std::error::Error for LiveError {}

/// A flag raised by SIGINT or SIGTERM (the second of either ends the process as the
/// signal's default would: a run that does not stop can still be stopped).
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}

/// A bound, joined, non-blocking receive socket for `url`.
pub fn open_receiver(url: &UdpUrl) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    set_rcvbuf(&s, url.rcvbuf.unwrap_or(DEFAULT_RCVBUF))?;
    let because = |what: String, e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
    s.bind(&SockAddr::from(SocketAddrV4::new(url.group, url.port)))
        .map_err(|e| because(format!("bind {}:{}", url.group, url.port), e))?;
    if url.group.is_multicast() {
        let iface = url.iface.unwrap_or(Ipv4Addr::UNSPECIFIED);
        let joined = match url.source {
            Some(src) => s.join_ssm_v4(&src, &url.group, &iface),
            None => s.join_multicast_v4(&url.group, &iface),
        };
        let from = url.source.map_or(String::new(), |a| format!(" from source {a}"));
        joined.map_err(|e| match (e.raw_os_error(), url.iface) {
            (Some(libc::ENODEV | libc::EADDRNOTAVAIL), Some(a)) => because(
                format!("join {}{from} on the interface with address {a} (no interface has it: iface= names the interface by one of its IPv4 addresses, `ip -4 addr` lists them)", url.group),
                e,
            ),
            _ => because(format!("join {}{from} on {}", url.group, if url.iface.is_some() { iface.to_string() } else { "the default interface".into() }), e),
        })?;
    }
    set_int(&s, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    set_int(&s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The socket re-requests go out on and answers come in on: any port of this host's,
/// time stamps on, non-blocking; with the address its frames are given as destination.
fn open_answers(server: SocketAddrV4) -> io::Result<(UdpUrl, Socket)> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    set_rcvbuf(&s, DEFAULT_RCVBUF)?;
    s.bind(&SockAddr::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))?;
    set_int(&s, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    set_int(&s, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    s.set_nonblocking(true)?;
    let port = s.local_addr()?.as_socket_ipv4().map_or(0, |a| a.port());
    let local = if server.ip().is_loopback() { Ipv4Addr::LOCALHOST } else { Ipv4Addr::UNSPECIFIED };
    let url = UdpUrl { group: local, port, iface: None, source: None, rcvbuf: None, ttl: None, multicast_loop: None };
    Ok((url, s))
}

/// A socket's receive buffer: past `net.core.rmem_max` where the process may
/// (`SO_RCVBUFFORCE`, CAP_NET_ADMIN), else as far as the cap allows.
pub fn set_rcvbuf(s: &Socket, bytes: usize) -> io::Result<()> {
    if set_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, i32::try_from(bytes).unwrap_or(i32::MAX)).is_err() {
        s.set_recv_buffer_size(bytes)?;
    }
    Ok(())
}

#[allow(unsafe_code)] // setsockopt
fn set_int(s: &Socket, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&v as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What a live input received, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveInputStats {
    pub input: String,
    pub datagrams: u64,
    pub bytes: u64,
    /// Datagrams the kernel dropped on the socket (its receive buffer full): loss in the
    /// kernel, before the arbitrator could see it.
    pub kernel_drops: u64,
    /// Datagrams longer than [`MAX_DATAGRAM`], cut short.
    pub truncated: u64,
    /// Datagrams without a kernel time stamp (stamped on receipt instead).
    pub unstamped: u64,
    /// The socket's receive buffer, bytes: asked (`rcvbuf=`, or the default), and what the
    /// kernel gave (less when `net.core.rmem_max` caps a process without CAP_NET_ADMIN).
    pub rcvbuf_asked: u64,
    pub rcvbuf: u64,
    /// The re-request input: requests sent to the retransmission server, and those the
    /// socket refused.
    #[serde(skip_serializing_if = "is_zero")]
    pub requests_sent: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub request_errors: u64,
}

impl LiveInputStats {
    /// What the run should warn of: a receive buffer the kernel gave less of than asked.
    pub fn warning(&self) -> Option<String> {
        (self.rcvbuf < self.rcvbuf_asked).then(|| {
            format!(
                "{}: the socket's receive buffer is {} bytes, not the {} asked: net.core.rmem_max caps it \
                 for a process without CAP_NET_ADMIN (raise it: sysctl -w net.core.rmem_max={}, or grant \
                 the capability); bursts beyond it are dropped in the kernel",
                self.input, self.rcvbuf, self.rcvbuf_asked, self.rcvbuf_asked
            )
        })
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

struct LiveInput {
    url: UdpUrl,
    socket: Socket,
    stats: LiveInputStats,
    /// The kernel's drop counter as last reported (it counts from the socket's start).
    drops_seen: u32,
    /// This input's batch: the slots, how many hold datagrams, the next to hand out.
    slots: Vec<Slot>,
    /// Each slot's sender address and control messages, as `recvmmsg` fills them.
    names: Vec<libc::sockaddr_in>,
    control: Vec<[u64; CONTROL_WORDS]>,
    len: usize,
    pos: usize,
    /// When this input's socket was last found empty (the time taken before the call): a
    /// datagram it has not handed out yet was received after this.
    empty_at: u64,
}

impl LiveInput {
    fn head_ts(&self) -> Option<u64> {
        (self.pos < self.len).then(|| self.slots[self.pos].ts_ns)
    }
}

/// One slot of a batch: room for the headers and the datagram, its source address and
/// its control messages.
struct Slot {
    buf: Box<[u8]>,
    len: usize,
    ts_ns: u64,
}

/// Live groups as a [`Source`]: see the module doc.
pub struct LiveSource {
    inputs: Vec<LiveInput>,
    stop: Arc<AtomicBool>,
    deadline: Option<Instant>,
    busy_poll: bool,
    ended: bool,
    ident: u16,
    /// Frames handed out: the stop flag and the duration are checked every 1,024 (and
    /// whenever the sockets are empty), so that a busy line stops too.
    handed: u64,
    /// The retransmission server, when the last input is its answers' socket.
    rerequest: Option<SocketAddrV4>,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource").field("inputs", &self.stats()).finish()
    }
}

/// How a live source runs.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Raised to end the run (see [`stop_on_signals`]).
    pub stop: Arc<AtomicBool>,
    /// End after this long.
    pub duration: Option<Duration>,
    /// Spin on the sockets rather than sleep in `poll` when they are empty: for a thread
    /// with a core to itself.
    pub busy_poll: bool,
    /// The exchange's retransmission server: re-requests go to it from a socket of their
    /// own, whose answers are one more input after the groups ([`LiveSource::send_request`]).
    pub rerequest: Option<SocketAddrV4>,
}

impl Default for LiveOptions {
    /// Never stopped by a flag (raise `stop` yourself, or use [`stop_on_signals`]), no
    /// duration, no busy polling.
    fn default() -> Self {
        LiveOptions { stop: Arc::new(AtomicBool::new(false)), duration: None, busy_poll: false, rerequest: None }
    }
}

impl LiveSource {
    /// Open a socket for each group (joined, bound, time stamps on).
    pub fn open(urls: &[UdpUrl], opts: LiveOptions) -> Result<LiveSource, LiveError> {
        let mut sockets = urls
            .iter()
            .map(|u| {
                let socket =
                    open_receiver(u).map_err(|error| LiveError { input: u.to_string(), what: "cannot open", error })?;
                Ok((*u, socket, u.to_string()))
            })
            .collect::<Result<Vec<_>, LiveError>>()?;
        if let Some(server) = opts.rerequest {
            let name = format!("rerequest udp://{server}");
            let (url, socket) =
                open_answers(server).map_err(|error| LiveError { input: name.clone(), what: "cannot open", error })?;
            sockets.push((url, socket, name));
        }
        let inputs = sockets
            .into_iter()
            .map(|(u, socket, name)| {
                let asked = u.rcvbuf.unwrap_or(DEFAULT_RCVBUF) as u64;
                // The kernel reports twice what it grants (its bookkeeping's share).
                let granted = socket.recv_buffer_size().map_or(0, |b| b as u64 / 2);
                let stats = LiveInputStats { input: name, rcvbuf_asked: asked, rcvbuf: granted, ..Default::default() };
                if let Some(w) = stats.warning() {
                    tracing::warn!("{w}");
                }
                Ok(LiveInput {
                    url: u,
                    socket,
                    stats,
                    drops_seen: 0,
                    slots: (0..BATCH)
                        .map(|_| Slot {
                            buf: vec![0u8; UDP_HEADERS_LEN + MAX_DATAGRAM].into_boxed_slice(),
                            len: 0,
                            ts_ns: 0,
                        })
                        .collect(),
                    names: vec![
                        libc::sockaddr_in {
                            sin_family: 0,
                            sin_port: 0,
                            sin_addr: libc::in_addr { s_addr: 0 },
                            sin_zero: [0; 8],
                        };
                        BATCH
                    ],
                    control: vec![[0u64; CONTROL_WORDS]; BATCH],
                    len: 0,
                    pos: 0,
                    empty_at: 0,
                })
            })
            .collect::<Result<Vec<_>, LiveError>>()?;
        Ok(LiveSource {
            inputs,
            stop: opts.stop,
            deadline: opts.duration.map(|d| Instant::now() + d),
            busy_poll: opts.busy_poll,
            ended: false,
            ident: 0,
            handed: 0,
            rerequest: opts.rerequest,
        })
    }

    /// Send a re-request to the retransmission server from the answers' socket (counted;
    /// a refused send is counted, not fatal: the request is retried on its schedule).
    pub fn send_request(&mut self, request: &[u8]) {
        let Some(server) = self.rerequest else { return };
        let Some(inp) = self.inputs.last_mut() else { return };
        match inp.socket.send_to(request, &SockAddr::from(server)) {
            Ok(_) => inp.stats.requests_sent += 1,
            Err(_) => inp.stats.request_errors += 1,
        }
    }

    /// Each input's counts so far.
    pub fn stats(&self) -> Vec<LiveInputStats> {
        self.inputs.iter().map(|i| i.stats.clone()).collect()
    }

    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The input whose next datagram was received first, refilling the empty inputs that
    /// may hold an earlier one: an input found empty after the candidate's receive time
    /// cannot (what it receives later is stamped later). The arbitrator then sees A and B
    /// in receive order, as it would from a capture, however the batches fall.
    fn earliest(&mut self) -> Result<Option<usize>, LiveError> {
        let mut best: Option<(u64, usize)> = None;
        for (i, inp) in self.inputs.iter().enumerate() {
            if let Some(t) = inp.head_ts() {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, i));
                }
            }
        }
        for i in 0..self.inputs.len() {
            let inp = &self.inputs[i];
            if inp.pos < inp.len || best.is_some_and(|(b, _)| inp.empty_at >= b) {
                continue;
            }
            let before = realtime_ns();
            if self.recv_batch(i)? == 0 {
                self.inputs[i].empty_at = before;
            } else if let Some(t) = self.inputs[i].head_ts() {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, i));
                }
            }
        }
        Ok(best.map(|(_, i)| i))
    }

    /// Wait up to a millisecond for any socket to have a datagram.
    #[allow(unsafe_code)] // poll
    fn poll_wait(&self) -> Result<(), LiveError> {
        let mut fds: Vec<libc::pollfd> = self
            .inputs
            .iter()
            .map(|i| libc::pollfd { fd: i.socket.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: `fds` is a live array of `fds.len()` pollfd structures for the call.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 1) };
        if r < 0 {
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(LiveError { input: self.inputs[0].stats.input.clone(), what: "poll", error });
            }
        }
        Ok(())
    }

    /// Up to [`BATCH`] datagrams of input `i` into the slots, each behind its headers.
    #[allow(unsafe_code)] // recvmmsg and the walk of its control messages
    fn recv_batch(&mut self, i: usize) -> Result<usize, LiveError> {
        let input = &mut self.inputs[i];
        // The headers on the stack, the names and control buffers the input's own: no
        // allocation a call (`tickplant bench recv`).
        // SAFETY: iovec and mmsghdr are plain data; all-zero is valid, filled in below.
        let mut iovs: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (k, ((m, iov), slot)) in msgs.iter_mut().zip(iovs.iter_mut()).zip(input.slots.iter_mut()).enumerate() {
            iov.iov_base = slot.buf[UDP_HEADERS_LEN..].as_mut_ptr().cast();
            iov.iov_len = MAX_DATAGRAM;
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = (&mut input.names[k] as *mut libc::sockaddr_in).cast();
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            m.msg_hdr.msg_control = input.control[k].as_mut_ptr().cast();
            m.msg_hdr.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>() as _;
        }
        // SAFETY: every header points at its own iovec (over a slot of MAX_DATAGRAM bytes
        // after the headers' room), name and control buffer, all alive and of the sizes
        // given for the whole call; BATCH headers are passed.
        let r = unsafe {
            libc::recvmmsg(
                input.socket.as_raw_fd(),
                msgs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let error = io::Error::last_os_error();
            return match error.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(LiveError { input: input.stats.input.clone(), what: "recvmmsg", error }),
            };
        }
        let got = r as usize;
        let mut now_ns = None;
        for (k, m) in msgs.iter().enumerate().take(got) {
            let len = (m.msg_len as usize).min(MAX_DATAGRAM);
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                input.stats.truncated += 1;
            }
            let mut ts_ns = None;
            // SAFETY: the CMSG_* walk stays inside this message's control buffer as the
            // kernel filled it (`msg_controllen` was updated by recvmmsg); each header is
            // read before its data, and the data read is of the size its type gives.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                while !c.is_null() {
                    let h = &*c;
                    if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_TIMESTAMPNS {
                        let ts = (libc::CMSG_DATA(c) as *const libc::timespec).read_unaligned();
                        if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                            ts_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                        }
                    } else if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SO_RXQ_OVFL {
                        let drops = (libc::CMSG_DATA(c) as *const u32).read_unaligned();
                        input.stats.kernel_drops += u64::from(drops.wrapping_sub(input.drops_seen));
                        input.drops_seen = drops;
                    }
                    c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
                }
            }
            let ts_ns = ts_ns.unwrap_or_else(|| {
                input.stats.unstamped += 1;
                *now_ns.get_or_insert_with(realtime_ns)
            });
            let name = &input.names[k];
            let flow = Flow {
                src_mac: [0x02, 0, 0, 0, 0, 0x01],
                src_ip: name.sin_addr.s_addr.to_ne_bytes(),
                dst_ip: input.url.group.octets(),
                src_port: u16::from_be(name.sin_port),
                dst_port: input.url.port,
            };
            let slot = &mut input.slots[k];
            write_udp_headers(&flow, self.ident, len, &mut slot.buf[..UDP_HEADERS_LEN]);
            self.ident = self.ident.wrapping_add(1);
            slot.len = UDP_HEADERS_LEN + len;
            slot.ts_ns = ts_ns;
            input.stats.datagrams += 1;
            input.stats.bytes += len as u64;
        }
        input.len = got;
        input.pos = 0;
        Ok(got)
    }
}

/// The system's real-time clock in UNIX ns (the clock of the kernel's receive stamps).
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl Source for LiveSource {
    type Error = LiveError;

    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, LiveError> {
        if self.ended {
            return Ok(None);
        }
        self.handed += 1;
        if self.handed.is_multiple_of(1024) && self.should_stop() {
            self.ended = true;
            return Ok(None);
        }
        let Some(i) = self.earliest()? else {
            if self.should_stop() {
                self.ended = true;
            }
            // Nothing yet: the runner asks `idle` for the time, passes on what it holds,
            // lets the source `wait`, and comes back.
            return Ok(None);
        };
        let inp = &mut self.inputs[i];
        let s = &inp.slots[inp.pos];
        inp.pos += 1;
        Ok(Some((i, Frame { ts_ns: s.ts_ns, data: &s.buf[..s.len], orig_len: s.len as u32 })))
    }

    fn idle(&mut self) -> Option<u64> {
        (!self.ended).then(realtime_ns)
    }

    fn wait(&mut self) {
        // A poll error (a socket closed under it) shows again at the next recvmmsg, with
        // its input named: nothing is lost by not reporting it here.
        if !self.busy_poll {
            let _ = self.poll_wait();
        }
    }

    fn inputs(&self) -> usize {
        self.inputs.len()
    }

    fn link_type(&self, _input: usize) -> LinkType {
        LinkType::Ethernet
    }

    fn input_name(&self, input: usize) -> String {
        self.inputs[input].stats.input.clone()
    }

    fn frames_read(&self, input: usize) -> u64 {
        self.inputs[input].stats.datagrams
    }

    fn send_request(&mut self, request: &[u8]) {
        LiveSource::send_request(self, request);
    }
    fn live_stats(&self) -> Vec<LiveInputStats> {
        self.stats()
    }
}

/// Datagrams a `sendmmsg` call of [`UdpSender::send_many`] takes at most.
const SEND_BATCH: usize = 128;

/// A connected socket reports an earlier datagram's ICMP port unreachable (nothing listens
/// at a unicast destination, yet) on a later call, which then sends nothing. Unconnected,
/// as a sender's socket was before, it ignored them: the call is made again.
fn refused(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECONNREFUSED)
}

/// Sends datagrams to one group or address, counting what it sent and what failed (a
/// send error is counted, never silent, and never stops the run).
#[derive(Debug)]
pub struct UdpSender {
    url: UdpUrl,
    socket: Socket,
    pub sent: u64,
    pub bytes: u64,
    pub errors: u64,
    pub last_error: Option<String>,
}

impl UdpSender {
    /// A socket that sends to `url` (from `iface` where given, TTL 1 and loopback on by
    /// default for a group).
    pub fn open(url: &UdpUrl) -> Result<UdpSender, LiveError> {
        let e = |what, error| LiveError { input: url.to_string(), what, error };
        if url.source.is_some() {
            return Err(e(
                "source=",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a source names the sender to receive from; it is not for sending",
                ),
            ));
        }
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(|x| e("cannot open", x))?;
        if url.group.is_multicast() {
            if let Some(i) = url.iface {
                socket.set_multicast_if_v4(&i).map_err(|x| e("iface", x))?;
            }
            socket.set_multicast_ttl_v4(url.ttl.unwrap_or(1)).map_err(|x| e("ttl", x))?;
            socket.set_multicast_loop_v4(url.multicast_loop.unwrap_or(true)).map_err(|x| e("loop", x))?;
        } else if let Some(i) = url.iface {
            socket.bind(&SockAddr::from(SocketAddrV4::new(i, 0))).map_err(|x| e("bind to iface", x))?;
        }
        let _ = socket.set_send_buffer_size(4 << 20);
        let dest = SockAddr::from(SocketAddr::V4(SocketAddrV4::new(url.group, url.port)));
        // Connected, the socket keeps its route: no lookup per datagram (`tickplant replay
        // --max`: 405,000-420,000 -> 440,000-475,000 packets/s, docs/perf-log/live.md).
        socket.connect(&dest).map_err(|x| e("connect", x))?;
        Ok(UdpSender { url: *url, socket, sent: 0, bytes: 0, errors: 0, last_error: None })
    }

    /// Send each of `datagrams`, in order, in as few calls as `sendmmsg` takes (one for up
    /// to [`SEND_BATCH`]): a replay at full speed spends most of a datagram's time in the
    /// call (`tickplant replay --max`, docs/live.md).
    #[allow(unsafe_code)] // sendmmsg
    pub fn send_many(&mut self, datagrams: &Packed) {
        let mut all: Vec<libc::iovec> = datagrams
            .iter()
            .map(|d| libc::iovec { iov_base: d.as_ptr() as *mut libc::c_void, iov_len: d.len() })
            .collect();
        for iovs in all.chunks_mut(SEND_BATCH) {
            // SAFETY: mmsghdr is plain data; all-zero is a valid empty header, filled below.
            let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; iovs.len()];
            for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
            }
            let mut at = 0;
            let mut retried = false;
            while at < msgs.len() {
                // SAFETY: each header points at its iovec over `datagrams` (read only by the
                // kernel; the socket is connected: no address), both alive for the call;
                // the count passed is the headers left.
                let r = unsafe {
                    libc::sendmmsg(
                        self.socket.as_raw_fd(),
                        msgs[at..].as_mut_ptr(),
                        (msgs.len() - at) as libc::c_uint,
                        0,
                    )
                };
                if r < 0 {
                    let error = io::Error::last_os_error();
                    if refused(&error) && !retried {
                        retried = true;
                        continue;
                    }
                    // The first datagram left failed: counted, the rest tried after it.
                    retried = false;
                    self.errors += 1;
                    self.last_error = Some(error.to_string());
                    at += 1;
                } else {
                    retried = false;
                    for m in &msgs[at..at + r as usize] {
                        self.sent += 1;
                        self.bytes += u64::from(m.msg_len);
                    }
                    at += r as usize;
                }
            }
        }
    }

    /// Send one datagram.
    #[inline]
    pub fn send(&mut self, payload: &[u8]) {
        let sent = match self.socket.send(payload) {
            Err(e) if refused(&e) => self.socket.send(payload),
            r => r,
        };
        match sent {
            Ok(_) => {
                self.sent += 1;
                self.bytes += payload.len() as u64;
            }
            Err(e) => {
                self.errors += 1;
                self.last_error = Some(e.to_string());
            }
        }
    }

    pub fn url(&self) -> &UdpUrl {
        &self.url
    }
}

/// The UDP payload of a frame whose payload starts at `payload_offset` (as the arbitrator
/// found it): the UDP header's length decides where it ends, not the frame's (an Ethernet
/// frame may be padded).
pub fn udp_payload(frame: &[u8], payload_offset: u16) -> &[u8] {
    let po = usize::from(payload_offset);
    let len = frame.get(po - 4..po - 2).map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])).saturating_sub(8));
    &frame[po..(po + len).min(frame.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_that_cannot_be_joined_says_why() {
        // 192.0.2.1 (TEST-NET-1) is no interface's address.
        let u: UdpUrl = "udp://239.1.2.3:45678?iface=192.0.2.1".parse().unwrap();
        let e = open_receiver(&u).unwrap_err().to_string();
        assert!(e.contains("join 239.1.2.3") && e.contains("no interface has it"), "{e}");
        let u: UdpUrl = "udp://192.0.2.1:45678".parse().unwrap();
        let e = open_receiver(&u).unwrap_err().to_string();
        assert!(e.contains("bind 192.0.2.1:45678"), "{e}");
    }

    #[test]
    fn urls_parse_print_and_say_what_is_wrong() {
        let u: UdpUrl = "udp://239.1.1.1:5000?iface=10.0.0.2&rcvbuf=1048576".parse().unwrap();
        assert_eq!(u.group, Ipv4Addr::new(239, 1, 1, 1));
        assert_eq!(u.port, 5000);
        assert_eq!(u.iface, Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(u.rcvbuf, Some(1 << 20));
        assert_eq!(u.to_string().parse::<UdpUrl>().unwrap(), u);
        for (bad, says) in [
            ("239.1.1.1:5000", "not a udp:// URL"),
            ("udp://239.1.1.1", "not an IPv4 address and port"),
            ("udp://239.1.1.1:0", "port 0"),
            ("udp://239.1.1.1:5000?iface=eth0", "iface=eth0: not an IPv4 address"),
            ("udp://239.1.1.1:5000?speed=2", "unknown key 'speed'"),
            ("udp://239.1.1.1:5000?loop=2", "loop=2: not 0 or 1"),
            ("udp://232.1.1.1:5000?source=host", "source=host: not an IPv4 address (the sender's)"),
            ("udp://127.0.0.1:5000?source=10.0.0.1", "a source is for a multicast group, and 127.0.0.1 is not one"),
        ] {
            let e = bad.parse::<UdpUrl>().unwrap_err().to_string();
            assert!(e.starts_with(bad) && e.contains(says), "{bad}: {e}");
        }
        assert_eq!(Input::parse(Path::new("a.pcap")).unwrap(), Input::Capture("a.pcap".into()));
        assert!(matches!(Input::parse(Path::new("udp://127.0.0.1:9")).unwrap(), Input::Udp(_)));
    }

    /// A loopback port nothing is bound to now, and its URL.
    fn free_loopback_port() -> (u16, UdpUrl) {
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        (port, format!("udp://127.0.0.1:{port}").parse().unwrap())
    }

    /// Datagrams sent to a unicast loopback port come out as frames the sequencer reads:
    /// Ethernet, IPv4 and UDP headers with the sender's address and the port, the payload
    /// as sent, a receive time, in order; the source ends when its flag is raised.
    #[test]
    fn loopback_datagrams_come_out_as_frames() {
        let (port, url) = free_loopback_port();
        let stop = Arc::new(AtomicBool::new(false));
        let mut src = LiveSource::open(
            &[url],
            LiveOptions { stop: stop.clone(), duration: None, busy_poll: false, rerequest: None },
        )
        .unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let from = tx.local_addr().unwrap().port();
        let session = *b"LIVE000001";
        for k in 1..=100u64 {
            let m = k.to_be_bytes();
            tx.send_to(&tickplant_wire::build::moldudp64_payload(&session, k, &[&m]), ("127.0.0.1", port)).unwrap();
        }
        let seq = tickplant_core::Sequencer::new(tickplant_core::SequencerConfig::preset(
            tickplant_core::Protocol::Moldudp64,
        ))
        .expect("a valid sequencer");
        let mut got = Vec::new();
        let t0 = Instant::now();
        while got.len() < 100 && t0.elapsed() < Duration::from_secs(10) {
            match src.next_frame().unwrap() {
                Some((input, f)) => {
                    assert_eq!(input, 0);
                    assert!(f.ts_ns > 0);
                    let info = seq.classify(LinkType::Ethernet, f.data).expect("a frame the sequencer reads");
                    assert_eq!(u16::from_be_bytes([f.data[36], f.data[37]]), port, "the destination port");
                    assert_eq!(u16::from_be_bytes([f.data[34], f.data[35]]), from, "the source port");
                    let payload = udp_payload(f.data, info.payload_offset);
                    assert_eq!(payload.len(), usize::from(info.payload_len));
                    assert_eq!(&payload[payload.len() - 8..], &info.seq.to_be_bytes());
                    got.push(info.seq);
                }
                None => {
                    assert!(src.idle().is_some());
                    src.wait();
                }
            }
        }
        assert_eq!(got, (1..=100).collect::<Vec<u64>>());
        assert_eq!(src.stats()[0].datagrams, 100);
        stop.store(true, Ordering::Relaxed);
        assert!(src.next_frame().unwrap().is_none());
        assert!(src.idle().is_none(), "ended once the flag is raised");
    }

    /// `source=`: a source-specific join receives what that sender sends to the group and
    /// nothing another sender sends to it (the kernel filters); the URL prints with it; a
    /// sender refuses it.
    #[test]
    fn a_source_specific_join_hears_only_its_source() {
        let port = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url: UdpUrl = format!("udp://232.9.9.9:{port}?iface=127.0.0.1&source=127.0.0.1").parse().unwrap();
        assert_eq!(url.source, Some(Ipv4Addr::LOCALHOST));
        assert_eq!(url.to_string().parse::<UdpUrl>().unwrap(), url);
        let stop = Arc::new(AtomicBool::new(false));
        let mut src = LiveSource::open(
            &[url],
            LiveOptions { stop: stop.clone(), duration: None, busy_poll: false, rerequest: None },
        )
        .unwrap();
        let session = *b"SSM0000001";
        for (k, from) in [(1u64, "127.0.0.2"), (1, "127.0.0.1"), (2, "127.0.0.2"), (2, "127.0.0.1")] {
            let tx = std::net::UdpSocket::bind((from, 0)).unwrap();
            tx.set_multicast_loop_v4(true).unwrap();
            socket2::SockRef::from(&tx).set_multicast_if_v4(&Ipv4Addr::LOCALHOST).unwrap();
            let mut m = [0u8; 12];
            m[..4].copy_from_slice(&from.parse::<Ipv4Addr>().unwrap().octets());
            tx.send_to(&tickplant_wire::build::moldudp64_payload(&session, k, &[&m]), ("232.9.9.9", port)).unwrap();
        }
        let mut senders = Vec::new();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            match src.next_frame().unwrap() {
                // The IPv4 header's source address.
                Some((_, f)) => senders.push(Ipv4Addr::new(f.data[26], f.data[27], f.data[28], f.data[29])),
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        assert_eq!(senders, vec![Ipv4Addr::LOCALHOST; 2], "only the source's two datagrams");
        stop.store(true, Ordering::Relaxed);
        let e = UdpSender::open(&url).map(|_| ()).expect_err("a sender refuses source=").to_string();
        assert!(e.contains("not for sending"), "{e}");
    }

    /// A sender whose unicast destination has no listener yet sends every datagram, counts
    /// no error, and its datagrams arrive once a listener is there: its connected socket's
    /// reports of the earlier datagrams' ICMP port unreachable are passed over.
    #[test]
    fn a_destination_without_a_listener_costs_no_datagram() {
        let (port, url) = free_loopback_port();
        let mut tx = UdpSender::open(&url).unwrap();
        let buf = [7u8; 64];
        let mut ten = Packed::new();
        (0..10).for_each(|_| ten.push(&buf));
        for _ in 0..20 {
            tx.send(&buf);
            tx.send_many(&ten);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!((tx.sent, tx.errors), (220, 0), "{:?}", tx.last_error);
        let rx = std::net::UdpSocket::bind(("127.0.0.1", port)).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        tx.send_many(&ten);
        tx.send(&buf);
        let mut got = [0u8; 128];
        for _ in 0..11 {
            assert_eq!(rx.recv(&mut got).unwrap(), 64);
        }
        assert_eq!((tx.sent, tx.errors), (231, 0), "{:?}", tx.last_error);
    }
}

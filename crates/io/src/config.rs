//! The TOML schema of tickplant's configs, in the library so that every shell reads the same
//! keys the same way: a run config (`tickplant run CONFIG.toml`: `[source]`,
//! `[arbitration]`, `[book]`, `[run]`, `[[consumer]]`) and the options of `tickplant arb`,
//! which are also its config file's keys and a run config's `[arbitration]` table. Every
//! key is honoured or refused by name: unknown keys are errors (with the line), and the
//! keys of `tickplant arb` that mean nothing in a run are refused with the reason.
//! docs/feed-handler.md and docs/arbitration.md list every key.
//!
//! One file (about 810 lines): the whole schema, so that a key's meaning, its check and its
//! error stay beside the others of its table, in the order the docs list them.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use tickplant_core::book::BookConfig;
use tickplant_core::event::EventAction;
use tickplant_core::matcher::{MarketEvents, Schema};
use tickplant_core::{ArbConfig, CountSpec, Endian, FieldSpec, Policy, Protocol, SequencerConfig};

use crate::pipeline::{
    ConsumerAction, ConsumerSpec, FeedDecoder, MatchSpec, OpraFastSpec, PipelineSpec, SlowPolicy, Stream,
};

/// Why a config could not be read or used. Each message names the file (where there is
/// one), the table and the key.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Read { path: PathBuf, source: std::io::Error },
    /// The text is not TOML of this schema (an unknown key, a wrong type, a word a key does
    /// not take): the parser's message, with the line, the column and the key.
    Toml { file: Option<PathBuf>, message: String },
    /// A value the run cannot take, or a file the config names that cannot be used.
    Invalid { file: Option<PathBuf>, message: String },
}

impl ConfigError {
    /// The same error, naming the config file it came from.
    pub fn in_file(self, path: &Path) -> ConfigError {
        match self {
            ConfigError::Toml { file: None, message } => ConfigError::Toml { file: Some(path.into()), message },
            ConfigError::Invalid { file: None, message } => ConfigError::Invalid { file: Some(path.into()), message },
            e => e,
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // An empty path (`tickplant.run("")`) would read ": cannot read config".
            ConfigError::Read { path, .. } if path.as_os_str().is_empty() => {
                f.write_str("cannot read config: the path is empty")
            }
            ConfigError::Read { path, source } => write!(f, "{}: cannot read config: {source}", path.display()),
            ConfigError::Toml { file, message } | ConfigError::Invalid { file, message } => match file {
                Some(p) => write!(f, "{}: {message}", p.display()),
                None => f.write_str(message),
            },
        }
    }
}

// No source: a read error's message already ends with the system's error (as a source
// too, an `error: a: b` chain would print it twice).
impl std::error::Error for ConfigError {}

/// Words of a key, read from their strings with a message that names the key and every
/// word it takes (the TOML parser adds the line and column).
macro_rules! words {
    ($(#[$doc:meta])* $name:ident, $key:literal, $expected:literal, { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
        #[serde(try_from = "String")]
        pub enum $name {
            #[default]
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word),+
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = tickplant_core::error::UnknownName;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                match s.as_str() {
                    $($word => Ok($name::$variant),)+
                    _ => Err(tickplant_core::error::UnknownName { what: $key, name: s, expected: $expected }),
                }
            }
        }
    };
}

words!(
    /// `[source] decoder`: what decodes the packets.
    DecoderName, "decoder", "\"itch50\", \"nyse-xdp\", \"nyse-pillar\", \"opra-fast\" or \"opra-binary\"", {
    /// NASDAQ TotalView-ITCH 5.0 in MoldUDP64, with books (the default).
    Itch50 = "itch50",
    /// OPRA FAST v2 blocks.
    OpraFast = "opra-fast",
    /// OPRA binary (Participant Interface v6) blocks.
    OpraBinary = "opra-binary",
    /// NYSE Integrated Feed, XDP v2.1 layout, with books.
    NyseXdp = "nyse-xdp",
    /// NYSE Integrated Feed, Pillar v2.5 layout, with books.
    NysePillar = "nyse-pillar",
});

words!(
    /// `[source] reset` (opra-fast): when the FAST dictionary starts afresh.
    ResetPolicy, "reset", "\"block\" or \"never\"", {
    /// At every block (the default).
    Block = "block",
    /// Never (it carries from block to block; a gap resets it).
    Never = "never",
});

words!(
    /// `[[consumer]] action`: what a consumer does with its records.
    ConsumerKind, "action", "one of count, csv, jsonl, bbo, match, trade", {
    Count = "count",
    Csv = "csv",
    Jsonl = "jsonl",
    Bbo = "bbo",
    Match = "match",
    Trade = "trade",
});

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { file: None, message: message.into() }
}

/// Every flag of `tickplant arb` is also a key of its TOML config file (`--config`), with the
/// same name; a flag given on the command line wins over the file.
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ArbArgs {
    /// TOML file with any of these options (see examples/arb.toml).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Feed A: a capture (pcap or pcapng), or a live group
    /// (udp://GROUP:PORT[?iface=ADDR&source=ADDR&rcvbuf=BYTES], docs/live.md), or alone an
    /// ITCH 5.0 BinaryFILE (plain or gzip), read as MoldUDP64 packets (--hr-out then writes
    /// it as a capture).
    #[arg(long, value_name = "A.pcap|udp://GROUP:PORT")]
    pub a: Option<PathBuf>,
    /// Feed B: a capture, or a live group.
    #[arg(long, value_name = "B.pcap|udp://GROUP:PORT")]
    pub b: Option<PathBuf>,
    /// Packet header layout: a preset, or custom with --seq-offset etc. [default: moldudp64]
    #[arg(long, value_name = "moldudp64|xdp|opra|custom")]
    pub protocol: Option<Protocol>,
    /// Byte offset of the sequence number in the UDP payload (overrides the preset).
    #[arg(long, value_name = "N")]
    pub seq_offset: Option<usize>,
    /// Width of the sequence number in bytes, 1..=8.
    #[arg(long, value_name = "N")]
    pub seq_bytes: Option<u8>,
    /// Byte order of the sequence number and count.
    #[arg(long, value_name = "big|little")]
    pub seq_endian: Option<EndianArg>,
    /// Byte offset of the message count in the UDP payload.
    #[arg(long, value_name = "N")]
    pub count_offset: Option<usize>,
    /// Width of the message count in bytes; 0 means every packet carries one message.
    #[arg(long, value_name = "N")]
    pub count_bytes: Option<u8>,
    /// Accept only UDP to these destinations (PORT, GROUP or GROUP:PORT; repeatable).
    /// Everything else goes to the other output.
    #[arg(long, value_name = "GROUP:PORT")]
    pub accept: Vec<String>,
    /// Line A's destination (GROUP:PORT): packets of the protocol to another one on input A
    /// go to the other output. With --b-accept, one capture holding both lines is read as
    /// A and B (give it as --a and --b).
    #[arg(long, value_name = "GROUP:PORT")]
    pub a_accept: Option<String>,
    /// Line B's destination (GROUP:PORT), as --a-accept for A.
    #[arg(long, value_name = "GROUP:PORT")]
    pub b_accept: Option<String>,
    /// High-reliability window. [default: time]
    #[arg(long, value_name = "low-latency|time|count|time-count")]
    pub mode: Option<ModeArg>,
    /// Time window of time and time-count modes, microseconds. [default: 1000]
    #[arg(long, value_name = "N")]
    pub timeout_us: Option<u64>,
    /// Message window of count and time-count modes. [default: 1000]
    #[arg(long, value_name = "N")]
    pub max_msgs: Option<u64>,
    /// Switch the policy at a replay time (seconds after the first frame), e.g.
    /// 2.5:count,max-msgs=100. Repeatable.
    #[arg(long, value_name = "SECONDS:MODE[,timeout-us=N][,max-msgs=N]")]
    pub change_at: Vec<String>,
    /// HR buffer capacity in packets. [default: 4096]
    #[arg(long, value_name = "N")]
    pub capacity_packets: Option<usize>,
    /// HR buffer capacity in bytes. [default: 16777216]
    #[arg(long, value_name = "N")]
    pub capacity_bytes: Option<usize>,
    /// Release every wait after this long without data, milliseconds; 0 = never. [default: 1000]
    #[arg(long, value_name = "MS")]
    pub idle_ms: Option<u64>,
    /// First expected sequence number (default: the first packet's).
    #[arg(long, value_name = "N")]
    pub start_seq: Option<u64>,
    /// A sequence number this far below the highest seen starts a new sequence space;
    /// 0 = never. [default: 1073741824]
    #[arg(long, value_name = "N")]
    pub reset_jump: Option<u64>,
    /// Switch the low-latency output off.
    #[arg(long)]
    #[serde(default)]
    pub no_ll: bool,
    /// Switch the high-reliability output off.
    #[arg(long)]
    #[serde(default)]
    pub no_hr: bool,
    /// Write the low-latency output here (.pcapng for pcapng), or send its packets on to a
    /// group (udp://GROUP:PORT[?iface=ADDR&ttl=N&loop=0|1]), their bytes unchanged.
    #[arg(long, value_name = "ll.pcap|udp://GROUP:PORT")]
    pub ll_out: Option<PathBuf>,
    /// Write the high-reliability output here, or send it on to a group (as --ll-out).
    #[arg(long, value_name = "hr.pcap|udp://GROUP:PORT")]
    pub hr_out: Option<PathBuf>,
    /// Write frames that are not market data here.
    #[arg(long, value_name = "other.pcap")]
    pub other_out: Option<PathBuf>,
    /// Start a capture output's next file after this size or time (100MB, 1GB, 60s, 5m):
    /// hr.pcap becomes hr-000.pcap, hr-001.pcap, ...
    #[arg(long, value_name = "SIZE|TIME")]
    pub rotate: Option<String>,
    /// Write gap reports as CSV: output,first_seq,last_seq,messages,reason.
    #[arg(long, value_name = "gaps.csv")]
    pub gaps: Option<PathBuf>,
    /// Write statistics as JSON ('-' for stdout).
    #[arg(long, value_name = "stats.json|-")]
    pub stats: Option<PathBuf>,
    /// No human summary on stderr.
    #[arg(long, short)]
    #[serde(default)]
    pub quiet: bool,
    /// Live inputs: end after this many seconds (otherwise at SIGINT or SIGTERM).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Ask the exchange's retransmission server for the messages every line lost
    /// (MoldUDP64 re-request; live inputs): its answers fill the HR stream's holes.
    /// In a run config: [recovery] rerequest.
    #[arg(long, value_name = "udp://HOST:PORT")]
    pub rerequest: Option<String>,
    /// Re-request: wait this long after a hole is seen before asking, microseconds. [default: 0]
    #[arg(long, value_name = "US")]
    pub rerequest_delay_us: Option<u64>,
    /// Re-request: ask for a hole one line has not gone past yet after this long,
    /// microseconds (a line that is down or far behind). [default: 1000]
    #[arg(long, value_name = "US")]
    pub rerequest_line_wait_us: Option<u64>,
    /// Re-request: messages a request asks for at most (the server's limit). [default: 1000]
    #[arg(long, value_name = "N")]
    pub rerequest_max_msgs: Option<u16>,
    /// Re-request: requests unanswered at once at most. [default: 16]
    #[arg(long, value_name = "N")]
    pub rerequest_outstanding: Option<usize>,
    /// Re-request: ask again for what a request did not bring after this long,
    /// microseconds, doubling each time. [default: 2000]
    #[arg(long, value_name = "US")]
    pub rerequest_retry_us: Option<u64>,
    /// Re-request: requests in a row that bring nothing before one is given up (one that
    /// brings part of its range starts the count again). [default: 3]
    #[arg(long, value_name = "N")]
    pub rerequest_retries: Option<u32>,
}

/// A run config's `[recovery]` table: the exchange's servers that fill gaps.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RecoverySection {
    /// The retransmission server: "udp://HOST:PORT" (MoldUDP64 re-request).
    pub rerequest: Option<String>,
    pub delay_us: Option<u64>,
    pub line_wait_us: Option<u64>,
    pub max_msgs: Option<u16>,
    pub outstanding: Option<usize>,
    pub retry_us: Option<u64>,
    pub retries: Option<u32>,
    /// The GLIMPSE server: "tcp://HOST:PORT". The run joins late: the books from its
    /// snapshot, then the live feed from the snapshot's sequence number.
    pub snapshot: Option<String>,
    /// The SoupBinTCP login of the snapshot server.
    pub username: Option<String>,
    pub password: Option<String>,
    pub session: Option<String>,
    /// Further snapshots after one that failed or was behind the feed. [3]
    pub snapshot_retries: Option<u32>,
    /// One snapshot's time limit, seconds. [30]
    pub snapshot_timeout_s: Option<f64>,
    /// The live feed kept while the snapshot comes, at most this many bytes. [1 GiB]
    pub buffer_bytes: Option<usize>,
    /// Snapshots that recover stale books, at most one this often, seconds. [1]
    pub snapshot_interval_s: Option<f64>,
}

impl RecoverySection {
    /// The server's address and the arbitrator's settings, when re-request is on.
    pub fn rerequest(&self) -> Result<Option<(std::net::SocketAddrV4, tickplant_core::RerequestConfig)>, ConfigError> {
        let Some(server) = &self.rerequest else {
            let set = self.delay_us.is_some()
                || self.line_wait_us.is_some()
                || self.max_msgs.is_some()
                || self.outstanding.is_some()
                || self.retry_us.is_some()
                || self.retries.is_some();
            if set {
                return Err(invalid("re-request settings given without the server (rerequest = \"udp://HOST:PORT\")"));
            }
            return Ok(None);
        };
        let addr = server_addr(server).map_err(|why| invalid(format!("rerequest {server:?}: {why}")))?;
        let d = tickplant_core::RerequestConfig::default();
        let us = |v: Option<u64>, key: &str, dflt: u64| -> Result<u64, ConfigError> {
            v.map_or(Ok(dflt), |v| v.checked_mul(1000).ok_or_else(|| invalid(format!("{key} {v} is too large"))))
        };
        let c = tickplant_core::RerequestConfig {
            delay_ns: us(self.delay_us, "rerequest delay-us", d.delay_ns)?,
            line_wait_ns: us(self.line_wait_us, "rerequest line-wait-us", d.line_wait_ns)?,
            max_msgs: self.max_msgs.unwrap_or(d.max_msgs),
            max_outstanding: self.outstanding.unwrap_or(d.max_outstanding),
            retry_ns: us(self.retry_us, "rerequest retry-us", d.retry_ns)?,
            max_retries: self.retries.unwrap_or(d.max_retries),
        };
        Ok(Some((addr, c)))
    }
}

impl RecoverySection {
    /// The late join's settings, when a snapshot server is given.
    pub fn snapshot(&self) -> Result<Option<crate::recovery::SnapshotConfig>, ConfigError> {
        let Some(server) = &self.snapshot else {
            let set = [
                (self.username.is_some(), "username"),
                (self.password.is_some(), "password"),
                (self.session.is_some(), "session"),
                (self.snapshot_retries.is_some(), "snapshot-retries"),
                (self.snapshot_timeout_s.is_some(), "snapshot-timeout-s"),
                (self.buffer_bytes.is_some(), "buffer-bytes"),
                (self.snapshot_interval_s.is_some(), "snapshot-interval-s"),
            ];
            if let Some((_, key)) = set.iter().find(|(s, _)| *s) {
                return Err(invalid(format!(
                    "[recovery] {key}: a setting of the snapshot server, and no snapshot = \"tcp://HOST:PORT\" is given"
                )));
            }
            return Ok(None);
        };
        let Some(addr) = server.strip_prefix("tcp://") else {
            return Err(invalid(format!(
                "[recovery] snapshot = {server:?}: expected tcp://HOST:PORT (a GLIMPSE server)"
            )));
        };
        server_addr(addr).map_err(|why| invalid(format!("[recovery] snapshot = {server:?}: {why}")))?;
        let d = crate::recovery::SnapshotConfig::default();
        let timeout = match self.snapshot_timeout_s {
            Some(t) if !(t > 0.0 && t.is_finite()) => {
                return Err(invalid(format!("[recovery] snapshot-timeout-s = {t}: a number of seconds above 0")))
            }
            Some(t) => std::time::Duration::from_secs_f64(t),
            None => d.timeout,
        };
        Ok(Some(crate::recovery::SnapshotConfig {
            server: addr.to_string(),
            login: tickplant_core::glimpse::SoupLogin {
                username: self.username.clone().unwrap_or_default(),
                password: self.password.clone().unwrap_or_default(),
                session: self.session.clone().unwrap_or_default(),
                ..Default::default()
            },
            retries: self.snapshot_retries.unwrap_or(d.retries),
            timeout,
            max_buffered: self.buffer_bytes.unwrap_or(d.max_buffered),
            interval: match self.snapshot_interval_s {
                Some(t) if !(t >= 0.0 && t.is_finite()) => {
                    return Err(invalid(format!(
                        "[recovery] snapshot-interval-s = {t}: a number of seconds, 0 or more"
                    )))
                }
                Some(t) => std::time::Duration::from_secs_f64(t),
                None => d.interval,
            },
            ..d
        }))
    }
}

/// A server's address: `udp://HOST:PORT` or `HOST:PORT`, IPv4 (a name is looked up).
pub fn server_addr(text: &str) -> Result<std::net::SocketAddrV4, String> {
    use std::net::ToSocketAddrs;
    let rest = text.strip_prefix("udp://").unwrap_or(text);
    if rest.contains("://") {
        return Err("expected udp://HOST:PORT".into());
    }
    let addrs = rest.to_socket_addrs().map_err(|e| format!("not HOST:PORT ({e})"))?;
    for a in addrs {
        if let std::net::SocketAddr::V4(v4) = a {
            return Ok(v4);
        }
    }
    Err("no IPv4 address for that host".into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeArg {
    LowLatency,
    Time,
    Count,
    TimeCount,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndianArg {
    Big,
    Little,
}

macro_rules! merge_opts {
    ($cli:ident, $file:ident; $($f:ident),*) => { $( if $cli.$f.is_none() { $cli.$f = $file.$f.take(); } )* };
}

impl ArbArgs {
    /// Fill what the command line left out from `--config`.
    pub fn with_config_file(mut self) -> Result<ArbArgs, ConfigError> {
        let Some(path) = self.config.clone() else { return Ok(self) };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
        let mut f: ArbArgs = toml::from_str(&text).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        // Paths in the file are relative to the file.
        for p in [&mut f.a, &mut f.b, &mut f.ll_out, &mut f.hr_out, &mut f.other_out, &mut f.gaps] {
            if let Some(x) = p.as_mut() {
                if x.is_relative() && !crate::live::Input::is_live(x) {
                    *x = base.join(&*x);
                }
            }
        }
        if let Some(x) = f.stats.as_mut() {
            if x.is_relative() && x.as_os_str() != "-" {
                *x = base.join(&*x);
            }
        }
        let s = &mut self;
        merge_opts!(s, f; a, b, protocol, seq_offset, seq_bytes, seq_endian, count_offset, count_bytes, mode, timeout_us, max_msgs,
            capacity_packets, capacity_bytes, idle_ms, start_seq, reset_jump, ll_out, hr_out, other_out, gaps, stats, duration, rotate,
            rerequest, rerequest_delay_us, rerequest_line_wait_us, rerequest_max_msgs, rerequest_outstanding, rerequest_retry_us,
            rerequest_retries, a_accept, b_accept);
        if s.accept.is_empty() {
            s.accept = f.accept;
        }
        if s.change_at.is_empty() {
            s.change_at = f.change_at;
        }
        s.no_ll |= f.no_ll;
        s.no_hr |= f.no_hr;
        s.quiet |= f.quiet;
        Ok(self)
    }

    pub fn sequencer_config(&self) -> Result<SequencerConfig, ConfigError> {
        let protocol = self.protocol.unwrap_or(Protocol::Moldudp64);
        let mut c = SequencerConfig::preset(protocol);
        let endian = self.seq_endian.map(|e| if e == EndianArg::Big { Endian::Big } else { Endian::Little });
        let custom = self.seq_offset.is_some()
            || self.seq_bytes.is_some()
            || self.count_offset.is_some()
            || self.count_bytes.is_some();
        if custom && protocol == Protocol::Opra {
            return Err(invalid(
                "--protocol opra reads its offsets from the block version; use --protocol custom for other layouts",
            ));
        }
        if let Some(o) = self.seq_offset {
            c.seq.offset = o;
        }
        if let Some(b) = self.seq_bytes {
            c.seq.bytes = b;
        }
        if let Some(e) = endian {
            c.seq.endian = e;
        }
        match (self.count_bytes, self.count_offset) {
            (Some(0), _) => c.count = CountSpec::Fixed(1),
            (bytes, offset) if bytes.is_some() || offset.is_some() => {
                let mut f = match c.count {
                    CountSpec::Field(f) => f,
                    CountSpec::Fixed(_) => FieldSpec::new(0, 2, c.seq.endian),
                };
                if let Some(b) = bytes {
                    f.bytes = b;
                }
                if let Some(o) = offset {
                    f.offset = o;
                }
                if let Some(e) = endian {
                    f.endian = e;
                }
                c.count = CountSpec::Field(f);
            }
            _ => {}
        }
        for a in &self.accept {
            c.accept.push(a.parse().map_err(|e: tickplant_core::error::BadText| invalid(format!("--accept: {e}")))?);
        }
        c.validate().map_err(|e| invalid(format!("bad sequencer layout: {e}")))?;
        Ok(c)
    }

    pub fn policy(&self) -> Result<Policy, ConfigError> {
        make_policy(self.mode.unwrap_or(ModeArg::Time), self.timeout_us.unwrap_or(1000), self.max_msgs.unwrap_or(1000))
    }

    /// `rotate`, read.
    pub fn rotate(&self) -> Result<Option<crate::outputs::Rotate>, ConfigError> {
        self.rotate.as_deref().map(|r| r.parse().map_err(|e: String| invalid(format!("rotate: {e}")))).transpose()
    }

    /// The re-request flags as a run config's `[recovery]` table.
    pub fn recovery(&self) -> RecoverySection {
        RecoverySection {
            rerequest: self.rerequest.clone(),
            delay_us: self.rerequest_delay_us,
            line_wait_us: self.rerequest_line_wait_us,
            max_msgs: self.rerequest_max_msgs,
            outstanding: self.rerequest_outstanding,
            retry_us: self.rerequest_retry_us,
            retries: self.rerequest_retries,
            ..Default::default()
        }
    }

    /// `--a-accept`, `--b-accept`: each line's own destination, read.
    pub fn input_accept(&self) -> Result<Vec<Option<tickplant_core::Endpoint>>, ConfigError> {
        if self.a_accept.is_none() && self.b_accept.is_none() {
            return Ok(Vec::new());
        }
        [("a-accept", &self.a_accept), ("b-accept", &self.b_accept)]
            .into_iter()
            .map(|(key, v)| {
                let Some(v) = v else { return Ok(None) };
                let e: tickplant_core::Endpoint =
                    v.parse().map_err(|e: tickplant_core::error::BadText| invalid(format!("--{key}: {e}")))?;
                if e.group.is_none() || e.port.is_none() {
                    return Err(invalid(format!(
                        "--{key} {v}: a line's destination is GROUP:PORT (e.g. 233.54.12.111:26400)"
                    )));
                }
                Ok(Some(e))
            })
            .collect()
    }

    pub fn arb_config(&self) -> Result<ArbConfig, ConfigError> {
        let d = ArbConfig::default();
        let c = ArbConfig {
            inputs: 2,
            low_latency: !self.no_ll,
            high_reliability: !self.no_hr,
            policy: self.policy()?,
            capacity_packets: self.capacity_packets.unwrap_or(d.capacity_packets),
            capacity_bytes: self.capacity_bytes.unwrap_or(d.capacity_bytes),
            idle_ns: self.idle_ms.map_or(d.idle_ns, |m| m.saturating_mul(1_000_000)),
            reset_jump: self.reset_jump.unwrap_or(d.reset_jump),
            start_seq: self.start_seq,
            gap_memory: d.gap_memory,
            rerequest: self.recovery().rerequest()?.map(|(_, c)| c),
            input_accept: self.input_accept()?,
        };
        c.validate().map_err(|e| invalid(format!("{e}")))?;
        Ok(c)
    }

    /// The `--change-at` schedule as (ns after the first frame, policy), in time order.
    pub fn changes(&self) -> Result<Vec<(u64, Policy)>, ConfigError> {
        let mut cur =
            (self.mode.unwrap_or(ModeArg::Time), self.timeout_us.unwrap_or(1000), self.max_msgs.unwrap_or(1000));
        let mut out = Vec::new();
        // Parse each spec once: (seconds, spec, the part after ':'), then apply in time order.
        let mut specs: Vec<(f64, &String, &str)> = Vec::new();
        for s in &self.change_at {
            let bad = |why: &str| {
                invalid(format!("--change-at {s:?}: {why} (expected SECONDS:MODE[,timeout-us=N][,max-msgs=N])"))
            };
            let (t, rest) = s.split_once(':').ok_or_else(|| bad("missing ':'"))?;
            let t: f64 = t.parse().map_err(|_| bad("SECONDS is not a number"))?;
            if !(t >= 0.0 && t.is_finite()) {
                return Err(bad("SECONDS must be >= 0"));
            }
            specs.push((t, s, rest));
        }
        specs.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (t, s, rest) in specs {
            let bad = |why: String| invalid(format!("--change-at {s:?}: {why}"));
            let mut parts = rest.split(',');
            let mode = parts.next().unwrap_or("");
            cur.0 = <ModeArg as clap::ValueEnum>::from_str(mode, false)
                .map_err(|_| bad(format!("unknown mode {mode:?} (low-latency, time, count, time-count)")))?;
            for kv in parts {
                let (k, v) = kv.split_once('=').ok_or_else(|| bad(format!("{kv:?} is not KEY=VALUE")))?;
                let v: u64 = v.parse().map_err(|_| bad(format!("{k} value {v:?} is not a whole number")))?;
                match k {
                    "timeout-us" => cur.1 = v,
                    "max-msgs" => cur.2 = v,
                    _ => return Err(bad(format!("unknown key {k:?} (timeout-us, max-msgs)"))),
                }
            }
            out.push(((t * 1e9).round() as u64, make_policy(cur.0, cur.1, cur.2)?));
        }
        Ok(out)
    }
}

fn make_policy(mode: ModeArg, timeout_us: u64, max_msgs: u64) -> Result<Policy, ConfigError> {
    let timeout_ns =
        timeout_us.checked_mul(1000).ok_or_else(|| invalid(format!("--timeout-us {timeout_us} is too large")))?;
    Ok(match mode {
        ModeArg::LowLatency => Policy::LowLatency,
        ModeArg::Time => Policy::Time { timeout_ns },
        ModeArg::Count => Policy::Count { max_msgs },
        ModeArg::TimeCount => Policy::TimeCount { timeout_ns, max_msgs },
    })
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RunConfig {
    /// The file it was read from (errors name it).
    #[serde(skip)]
    pub path: Option<PathBuf>,
    /// The one feed's inputs and decoder (or, with `[[feed]]` tables, none).
    #[serde(default)]
    pub source: Source,
    /// Any option of `tickplant arb` (protocol, mode, timeout-us, max-msgs, start-seq,
    /// capacity-packets...), except the files.
    #[serde(default)]
    pub arbitration: ArbArgs,
    #[serde(default)]
    pub book: BookSection,
    /// The exchange's servers that fill gaps (re-request).
    #[serde(default)]
    pub recovery: RecoverySection,
    #[serde(default)]
    pub run: RunSection,
    #[serde(default, rename = "consumer")]
    pub consumers: Vec<ConsumerSection>,
    /// Several feeds in one process (a venue's channels): each its own `source`,
    /// `arbitration` and `book`, run on threads of its own; consumers name their feed.
    #[serde(default, rename = "feed")]
    pub feeds: Vec<FeedSection>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Source {
    /// Feed A, or the only capture.
    pub a: Option<PathBuf>,
    /// Feed B (optional).
    pub b: Option<PathBuf>,
    /// Decoder: "itch50" (MoldUDP64 ITCH 5.0, with books), "nyse-xdp" (NYSE Integrated
    /// Feed, XDP v2.1, with books), "opra-fast" (OPRA FAST v2
    /// blocks) or "opra-binary" (OPRA Participant Interface v6 blocks); the OPRA decoders map
    /// to quote, trade and status events and keep each series' best bid and offer.
    #[serde(default)]
    pub decoder: DecoderName,
    /// opra-fast: the FAST template XML.
    pub templates: Option<PathBuf>,
    /// opra-fast: bytes from the sequencer's payload start to the block's SOH.
    #[serde(default)]
    pub skip: usize,
    /// opra-fast: reset the FAST dictionary at every "block" (default) or "never" (it
    /// carries from block to block and is reset at a gap).
    #[serde(default)]
    pub reset: ResetPolicy,
    /// opra-fast and opra-binary: room in the series table.
    #[serde(default = "default_max_series")]
    pub max_series: usize,
    /// opra-fast: blocks of capture A profiled before the run to specialise the decoder
    /// (0: none).
    #[serde(default = "default_profile_blocks")]
    pub profile_blocks: usize,
    /// Trading day, US Eastern (ITCH timestamps count from its midnight), or `auto`: the
    /// day the capture was received on (see `SessionDay::FromCapture`).
    #[serde(default = "default_date")]
    pub date: String,
    /// Captures: where frame times come from: "capture" (the capture's record times) or
    /// "metawatch" (an Arista 7130 / Metamako MetaWatch tap's trailer on each frame).
    #[serde(default = "default_timestamps")]
    pub timestamps: String,
}

fn default_timestamps() -> String {
    "capture".into()
}

fn default_max_series() -> usize {
    1 << 20
}
fn default_profile_blocks() -> usize {
    10_000
}
fn default_date() -> String {
    "auto".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct BookSection {
    pub max_orders: usize,
    pub max_instruments: usize,
    /// The price grid of the books' ladders, in 1e-9 units (10000000 = one cent).
    pub tick: i64,
    /// Write the final books here (one JSON line per instrument), `depth` levels a side.
    pub final_books: Option<PathBuf>,
    pub depth: usize,
    /// The arbitrated stream the books follow: "hr" (default) or "ll".
    pub stream: Stream,
}

impl Default for BookSection {
    fn default() -> Self {
        let d = BookConfig::default();
        BookSection {
            max_orders: d.max_orders,
            max_instruments: d.max_instruments,
            tick: d.tick,
            final_books: None,
            depth: 10,
            stream: Stream::Hr,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct RunSection {
    /// Pin the producer (the captures and the arbitrator; with `decode-thread = false`
    /// every stage up to the rings) to this CPU.
    pub producer_core: Option<usize>,
    /// Decode, books and delivery on a thread of their own (default), or on the producer's.
    pub decode_thread: bool,
    /// Pin the decode thread to this CPU.
    pub decode_core: Option<usize>,
    /// Time the stages on one frame or packet in this many (1: every one).
    pub latency_sample: u32,
    /// Write the report as JSON here ("-" for stdout).
    pub report: Option<PathBuf>,
    /// Live inputs: end the run after this many seconds (otherwise at SIGINT or SIGTERM).
    pub duration_s: Option<f64>,
    /// Live inputs: spin on the sockets rather than sleep when they are empty (for a
    /// producer with a core to itself, `producer-core`).
    pub busy_poll: bool,
    /// Serve Prometheus metrics on this address ("127.0.0.1:9400"); off when not given.
    pub metrics: Option<String>,
    /// Take commands on this Unix socket (`tickplant ctl`); off when not given.
    pub control: Option<PathBuf>,
}

/// One feed of a multi-feed run (`[[feed]]`, with `[feed.source]`, `[feed.arbitration]`
/// and `[feed.book]` as the one feed's tables).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FeedSection {
    pub name: String,
    pub source: Source,
    #[serde(default)]
    pub arbitration: ArbArgs,
    #[serde(default)]
    pub book: BookSection,
    /// This feed's `[recovery]`.
    #[serde(default)]
    pub recovery: RecoverySection,
    /// Pin this feed's producer and decode threads (`[run]`'s keys apply to every feed).
    pub producer_core: Option<usize>,
    pub decode_core: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConsumerSection {
    pub name: String,
    /// With `[[feed]]` tables: the feed it reads (required there).
    pub feed: Option<String>,
    /// count | csv | jsonl | bbo | match | trade
    #[serde(default)]
    pub action: ConsumerKind,
    /// Output file for csv and jsonl (required), and bbo and match (optional).
    pub path: Option<PathBuf>,
    /// match: the strategies file (the language of `tickplant match`).
    pub strategies: Option<PathBuf>,
    /// match: the feed's venue name, for attributes such as `nasdaq_bid`.
    #[serde(default = "default_venue")]
    pub venue: String,
    /// trade: the triggers file (`ID: conditions => buy|sell QTY`).
    pub triggers: Option<PathBuf>,
    /// trade: the exchange's FIX acceptor, `host:port`.
    pub exchange: Option<String>,
    /// trade: SenderCompID (default TICKPLANT).
    pub sender: Option<String>,
    /// trade: TargetCompID (default EXCH).
    pub target: Option<String>,
    /// trade: Username (553) of the Logon, where the venue asks for one.
    pub username: Option<String>,
    /// trade: a file whose first line is the Logon's Password (554).
    pub password_file: Option<PathBuf>,
    /// trade: constant fields of every order, `"TAG=VALUE"` (`"1=ACCT42"`, `"59=0"`).
    #[serde(default)]
    pub order_fields: Vec<String>,
    /// trade: pre-trade risk limits (`max-order-qty`, `max-notional`, `max-open-orders`,
    /// `max-orders-per-second`, `max-position`, `collar-bps`; 0 or absent: no limit).
    #[serde(default)]
    pub risk: tickplant_core::risk::RiskLimits,
    #[serde(default)]
    pub symbols: Vec<String>,
    /// add, cancel, delete, modify, execute, trade, clear, status, imbalance.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Feed message types (ITCH letters).
    #[serde(default)]
    pub types: Vec<String>,
    /// drop | backpressure
    #[serde(default)]
    pub policy: SlowPolicy,
    #[serde(default = "default_ring")]
    pub ring: usize,
    pub core: Option<usize>,
    /// The arbitrated stream it reads: "hr" (default) or "ll".
    #[serde(default)]
    pub stream: Stream,
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            producer_core: None,
            decode_thread: true,
            decode_core: None,
            latency_sample: crate::pipeline::DEFAULT_LATENCY_SAMPLE,
            report: None,
            duration_s: None,
            busy_poll: false,
            metrics: None,
            control: None,
        }
    }
}

fn default_venue() -> String {
    "nasdaq".into()
}
fn default_ring() -> usize {
    1 << 16
}

impl RunConfig {
    pub fn load(path: &Path) -> Result<RunConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        let mut c = RunConfig::parse(&text).map_err(|e| e.in_file(path))?;
        c.relative_to(path.parent().unwrap_or(Path::new(".")));
        c.path = Some(path.to_path_buf());
        Ok(c)
    }
    pub fn parse(text: &str) -> Result<RunConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Toml { file: None, message: e.to_string() })
    }
    /// Make every relative path relative to `base` (the config file's folder).
    pub fn relative_to(&mut self, base: &Path) {
        let fix = |p: &mut Option<PathBuf>| {
            if let Some(x) = p.as_mut() {
                if x.is_relative() && x.as_os_str() != "-" && !crate::live::Input::is_live(x) {
                    *x = base.join(&*x);
                }
            }
        };
        let feed = |source: &mut Source, book: &mut BookSection, arb: &mut ArbArgs| {
            for p in [
                &mut source.a,
                &mut source.b,
                &mut source.templates,
                &mut book.final_books,
                &mut arb.gaps,
                &mut arb.hr_out,
                &mut arb.ll_out,
                &mut arb.other_out,
            ] {
                fix(p);
            }
        };
        feed(&mut self.source, &mut self.book, &mut self.arbitration);
        for f in &mut self.feeds {
            feed(&mut f.source, &mut f.book, &mut f.arbitration);
        }
        fix(&mut self.run.report);
        fix(&mut self.run.control);
        for c in &mut self.consumers {
            fix(&mut c.path);
            fix(&mut c.strategies);
            fix(&mut c.triggers);
            fix(&mut c.password_file);
        }
    }

    /// Each feed's config as a one-feed config of its own (its source, arbitration and
    /// book; the consumers that name it; `[run]` with its cores): one, named "", without
    /// `[[feed]]` tables. An error names the file, the feed or the consumer.
    pub fn feed_configs(&self) -> Result<Vec<(String, RunConfig)>, ConfigError> {
        let in_file = |e: ConfigError| match &self.path {
            Some(p) => e.in_file(p),
            None => e,
        };
        if self.feeds.is_empty() {
            if let Some(c) = self.consumers.iter().find(|c| c.feed.is_some()) {
                return Err(in_file(invalid(format!(
                    "consumer {}: `feed` names one of the [[feed]] tables, and this config has none",
                    c.name
                ))));
            }
            return Ok(vec![(String::new(), self.clone())]);
        }
        if self.source.a.is_some() || self.source.b.is_some() {
            return Err(in_file(invalid("[source] with [[feed]] tables: each feed has its own [feed.source]")));
        }
        let mut names = std::collections::BTreeSet::new();
        for f in &self.feeds {
            if f.name.is_empty() || !names.insert(f.name.as_str()) {
                return Err(in_file(invalid(format!("[[feed]] name '{}': empty or given twice", f.name))));
            }
        }
        for c in &self.consumers {
            match &c.feed {
                None => {
                    return Err(in_file(invalid(format!(
                        "consumer {}: with [[feed]] tables each consumer names its feed (feed = \"{}\")",
                        c.name, self.feeds[0].name
                    ))))
                }
                Some(f) if !names.contains(f.as_str()) => {
                    let known: Vec<&str> = names.iter().copied().collect();
                    return Err(in_file(invalid(format!(
                        "consumer {}: no feed '{f}' (the feeds: {})",
                        c.name,
                        known.join(", ")
                    ))));
                }
                Some(_) => {}
            }
        }
        Ok(self
            .feeds
            .iter()
            .map(|f| {
                let mut c = self.clone();
                c.feeds = Vec::new();
                c.source = f.source.clone();
                c.arbitration = f.arbitration.clone();
                c.book = f.book.clone();
                c.recovery = f.recovery.clone();
                c.run.producer_core = f.producer_core.or(self.run.producer_core);
                c.run.decode_core = f.decode_core.or(self.run.decode_core);
                c.run.report = None;
                c.consumers =
                    self.consumers.iter().filter(|x| x.feed.as_deref() == Some(f.name.as_str())).cloned().collect();
                (f.name.clone(), c)
            })
            .collect())
    }

    /// The pipeline this config describes; an error names the config file.
    pub fn spec(&self, progress: bool) -> Result<PipelineSpec, ConfigError> {
        self.spec_here(progress).map_err(|e| match &self.path {
            Some(p) => e.in_file(p),
            None => e,
        })
    }

    fn spec_here(&self, progress: bool) -> Result<PipelineSpec, ConfigError> {
        let decoder = self.decoder()?;
        let opra = matches!(decoder, FeedDecoder::OpraFast(_) | FeedDecoder::OpraBinary { .. });
        let a = self.source.a.clone().ok_or_else(|| invalid("[source] needs `a` (the capture, or feed A)"))?;
        let mut inputs = vec![a];
        inputs.extend(self.source.b.clone());
        for (key, p) in ["a", "b"].iter().zip(&inputs) {
            crate::live::Input::parse(p).map_err(|e| invalid(format!("[source] {key}: {e}")))?;
        }
        let live_inputs = inputs.iter().filter(|p| crate::live::Input::is_live(p)).count();
        if live_inputs != 0 && live_inputs != inputs.len() {
            return Err(invalid("[source] a and b: both captures or both live groups (udp://...), not one of each"));
        }
        let duration = match self.run.duration_s {
            Some(d) if !(d > 0.0 && d.is_finite()) => {
                return Err(invalid(format!("run.duration-s = {d}: a number of seconds above 0")))
            }
            Some(d) => Some(std::time::Duration::from_secs_f64(d)),
            None => None,
        };
        let arb = &self.arbitration;
        if arb.a.is_some() || arb.b.is_some() {
            return Err(invalid("[arbitration] a and b: captures go in [source] a and b"));
        }
        // The keys of `tickplant arb` that have no meaning in a run: refused by name.
        for (set, key, why) in [
            (arb.stats.is_some(), "stats", "the run's report holds the arbitrator's statistics: use [run] report"),
            (arb.no_hr, "no-hr", "the run decodes the HR stream"),
            (arb.no_ll, "no-ll", "the run has no LL stream to switch off"),
            (arb.quiet, "quiet", "use `tickplant run --quiet`"),
            (arb.duration.is_some(), "duration", "use [run] duration-s or `tickplant run --duration`"),
            (arb.recovery().rerequest.is_some(), "rerequest", "use [recovery] rerequest"),
        ] {
            if set {
                return Err(invalid(format!("[arbitration] {key}: not a key of a run config ({why})")));
            }
        }
        let rerequest = self.recovery.rerequest()?;
        if rerequest.is_some() && live_inputs == 0 {
            return Err(invalid(
                "[recovery] rerequest: re-request asks the exchange for what live lines lost; [source] a and b are captures",
            ));
        }
        let snapshot = self.recovery.snapshot()?;
        if snapshot.is_some() && live_inputs == 0 {
            return Err(invalid(
                "[recovery] snapshot: a late join takes the live feed after a snapshot; [source] a and b are captures",
            ));
        }
        let day = tickplant_core::itch::SessionDay::parse(&self.source.date)
            .map_err(|e| invalid(format!("[source] date: {e}")))?;
        let timestamps = self.source.timestamps.parse().map_err(|e| invalid(format!("[source] {e}")))?;
        let mut consumers = Vec::new();
        let mut names = std::collections::HashSet::new();
        for c in &self.consumers {
            if !names.insert(c.name.clone()) {
                return Err(invalid(format!("[[consumer]] name {:?} is used twice", c.name)));
            }
            let action = match (c.action, &c.path) {
                (ConsumerKind::Count, _) => ConsumerAction::Count,
                (ConsumerKind::Csv, Some(p)) => ConsumerAction::Csv(p.clone()),
                (ConsumerKind::Jsonl, Some(p)) => ConsumerAction::Jsonl(p.clone()),
                (ConsumerKind::Bbo, p) => ConsumerAction::Bbo(p.clone()),
                (ConsumerKind::Match, p) => ConsumerAction::Match(Box::new(match_spec(c, p.clone())?)),
                (ConsumerKind::Trade, _) => ConsumerAction::Trade(Box::new(trade_spec(c)?)),
                (ConsumerKind::Csv | ConsumerKind::Jsonl, None) => {
                    let (name, action) = (&c.name, c.action.as_str());
                    return Err(invalid(format!("consumer {name:?}: action {action:?} needs a path")));
                }
            };
            if c.action != ConsumerKind::Match && c.strategies.is_some() {
                return Err(invalid(format!("consumer {:?}: `strategies` is for action \"match\"", c.name)));
            }
            if c.action != ConsumerKind::Trade && (c.triggers.is_some() || c.exchange.is_some()) {
                return Err(invalid(format!(
                    "consumer {:?}: `triggers` and `exchange` are for action \"trade\"",
                    c.name
                )));
            }
            let actions = c
                .actions
                .iter()
                .map(|a| a.parse::<EventAction>().map_err(|e| invalid(format!("consumer {:?}: {e}", c.name))))
                .collect::<Result<Vec<_>, ConfigError>>()?;
            let types = c
                .types
                .iter()
                .map(|t| parse_msg_type(t, opra).map_err(|e| invalid(format!("consumer {:?}: {e}", c.name))))
                .collect::<Result<Vec<_>, ConfigError>>()?;
            if c.ring < 2 {
                return Err(invalid(format!("consumer {:?}: ring must hold at least 2 records", c.name)));
            }
            consumers.push(ConsumerSpec {
                name: c.name.clone(),
                symbols: c.symbols.clone(),
                actions,
                types,
                action,
                policy: c.policy,
                ring: c.ring,
                core: c.core,
                stream: c.stream,
            });
        }
        let book = BookConfig {
            max_orders: self.book.max_orders,
            max_instruments: self.book.max_instruments,
            tick: self.book.tick,
        };
        book.validate().map_err(|e| invalid(e.to_string()))?;
        if self.run.latency_sample == 0 {
            return Err(invalid("run.latency-sample must be at least 1 (1 times every frame and packet)"));
        }
        Ok(PipelineSpec {
            decoder,
            inputs,
            sequencer: arb.sequencer_config()?,
            arb: ArbConfig { rerequest: rerequest.map(|(_, c)| c), ..arb.arb_config()? },
            policy_changes: arb.changes()?,
            book_stream: self.book.stream,
            day,
            timestamps,
            book,
            consumers,
            producer_core: self.run.producer_core,
            decode_thread: self.run.decode_thread,
            decode_core: self.run.decode_core,
            latency_sample: self.run.latency_sample,
            progress,
            snapshot,
            metrics: None,
            control: None,
            live: crate::live::LiveOptions {
                duration,
                busy_poll: self.run.busy_poll,
                rerequest: rerequest.map(|(a, _)| a),
                ..Default::default()
            },
            outputs: crate::pipeline::OutputPaths {
                ll: arb.ll_out.clone(),
                hr: arb.hr_out.clone(),
                other: arb.other_out.clone(),
                rotate: arb.rotate()?,
            },
        })
    }
}

impl RunConfig {
    /// The decoder stage of `[source]`.
    fn decoder(&self) -> Result<FeedDecoder, ConfigError> {
        let s = &self.source;
        match s.decoder {
            DecoderName::Itch50 => {
                if s.templates.is_some() {
                    return Err(invalid("[source] templates is for decoder \"opra-fast\""));
                }
                Ok(FeedDecoder::Itch50)
            }
            DecoderName::NyseXdp | DecoderName::NysePillar => {
                if s.templates.is_some() || s.skip != 0 {
                    return Err(invalid("[source] templates and skip are for decoder \"opra-fast\""));
                }
                Ok(FeedDecoder::Nyse(if s.decoder == DecoderName::NyseXdp {
                    tickplant_wire::xdp_integrated::Dialect::Xdp21
                } else {
                    tickplant_wire::xdp_integrated::Dialect::Pillar25
                }))
            }
            DecoderName::OpraBinary => {
                if s.templates.is_some() || s.skip != 0 {
                    return Err(invalid("[source] templates and skip are for decoder \"opra-fast\""));
                }
                if s.max_series == 0 {
                    return Err(invalid("[source] max-series must be at least 1"));
                }
                Ok(FeedDecoder::OpraBinary { max_series: s.max_series })
            }
            DecoderName::OpraFast => {
                let Some(t) = &s.templates else {
                    return Err(invalid("[source] decoder \"opra-fast\" needs `templates` (the FAST template XML)"));
                };
                let xml = std::fs::read_to_string(t)
                    .map_err(|e| invalid(format!("[source] templates {}: cannot read: {e}", t.display())))?;
                let program = tickplant_fast::Program::from_xml(&xml)
                    .map_err(|e| invalid(format!("[source] templates {}: {e}", t.display())))?;
                for w in &program.warnings {
                    eprintln!("warning: [source] templates {}: {w}", t.display());
                }
                tickplant_core::opra_fast::OpraFast::new(&program, 1)
                    .map_err(|e| invalid(format!("[source] templates {}: {e}", t.display())))?;
                let reset_per_block = s.reset == ResetPolicy::Block;
                if s.max_series == 0 {
                    return Err(invalid("[source] max-series must be at least 1"));
                }
                Ok(FeedDecoder::OpraFast(OpraFastSpec {
                    program: std::sync::Arc::new(program),
                    skip: s.skip,
                    reset_per_block,
                    max_series: s.max_series,
                    profile_blocks: s.profile_blocks,
                }))
            }
        }
    }
}

/// A trading consumer: its triggers file, exchange and session ids.
fn trade_spec(c: &ConsumerSection) -> Result<crate::fixnet::TriggerTraderConfig, ConfigError> {
    let Some(triggers) = &c.triggers else {
        return Err(invalid(format!("consumer {:?}: action \"trade\" needs `triggers` (a triggers file)", c.name)));
    };
    let Some(exchange) = &c.exchange else {
        return Err(invalid(format!(
            "consumer {:?}: action \"trade\" needs `exchange` (host:port of a FIX acceptor)",
            c.name
        )));
    };
    let exchange = std::net::ToSocketAddrs::to_socket_addrs(exchange.as_str())
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| invalid(format!("consumer {:?}: exchange {exchange:?} is not host:port", c.name)))?;
    // Refuse a bad file now, with its line, rather than when the run starts.
    let text = std::fs::read_to_string(triggers)
        .map_err(|e| invalid(format!("consumer {:?}: {}: {e}", c.name, triggers.display())))?;
    tickplant_core::trigger::parse_triggers(&text)
        .map_err(|e| invalid(format!("consumer {:?}: {}: {e}", c.name, triggers.display())))?;
    Ok(crate::fixnet::TriggerTraderConfig {
        exchange,
        sender: c.sender.clone().unwrap_or_else(|| "TICKPLANT".into()),
        target: c.target.clone().unwrap_or_else(|| "EXCH".into()),
        begin_string: "FIX.4.4".into(),
        heartbeat_s: 30,
        triggers: triggers.clone(),
        limits: c.risk,
        credentials: crate::fixnet::Credentials {
            username: c.username.clone(),
            password: match &c.password_file {
                Some(f) => Some(
                    crate::fixnet::Credentials::read_password(f)
                        .map_err(|e| invalid(format!("consumer {:?}: {e}", c.name)))?,
                ),
                None => None,
            },
        },
        order_fields: c
            .order_fields
            .iter()
            .map(|f| tickplant_core::ttt::parse_order_field(f))
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(format!("consumer {:?}: order-fields: {e}", c.name)))?,
    })
}

/// A matching consumer: its strategies parsed and checked against the market attributes.
fn match_spec(c: &ConsumerSection, path: Option<PathBuf>) -> Result<MatchSpec, ConfigError> {
    let Some(file) = &c.strategies else {
        return Err(invalid(format!("consumer {:?}: action \"match\" needs `strategies` (a strategies file)", c.name)));
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| invalid(format!("consumer {:?}: {}: cannot read the strategies: {e}", c.name, file.display())))?;
    let mut schema = Schema::new();
    let strategies = schema.parse_strategies(&text).map_err(|e| invalid(format!("{}: {e}", file.display())))?;
    MarketEvents::new(&schema, &[c.venue.as_str()]).map_err(|e| invalid(format!("consumer {:?}: {e}", c.name)))?;
    Ok(MatchSpec { schema, strategies, venue: c.venue.clone(), path, handler: None })
}

/// A consumer's message type: one letter, an ITCH 5.0 message type, or an OPRA message
/// category where the feed is OPRA (`opra`).
pub fn parse_msg_type(t: &str, opra: bool) -> Result<u8, String> {
    match t.as_bytes() {
        [b] if opra && b.is_ascii_graphic() => Ok(*b),
        [b] if !opra && tickplant_wire::itch50::message_len(*b).is_some() => Ok(*b),
        _ if opra => Err(format!("{t:?} is not an OPRA message category (one letter)")),
        _ => Err(format!("{t:?} is not an ITCH 5.0 message type")),
    }
}

#[cfg(test)]
mod read_errors {
    use super::*;

    #[test]
    fn a_config_that_cannot_be_read_says_which_and_why() {
        let e = RunConfig::load(Path::new("")).unwrap_err().to_string();
        assert_eq!(e, "cannot read config: the path is empty");
        let e = RunConfig::load(Path::new("no-such-dir/run.toml")).unwrap_err().to_string();
        assert!(e.starts_with("no-such-dir/run.toml: cannot read config: "), "{e}");
    }
}

//! What the arbitrator is told and what it tells: its configuration and policy, the
//! outputs, its decisions, gap reports and events, and its statistics.

use serde::{Deserialize, Serialize};

use crate::error::InvalidConfig;
use crate::seq::{Endpoint, Other, PacketInfo};

/// Well-formed packets of the protocol to two destinations on one input, with no `accept`
/// list to say which is the feed (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DestinationConflict {
    pub input: u8,
    /// The destination of the input's first packet.
    pub first: Endpoint,
    /// The other destination.
    pub second: Endpoint,
}

impl std::fmt::Display for DestinationConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "well-formed packets of the protocol to two destinations, {} (the first) and {}; \
             a capture that holds more than one feed needs the feed named: --accept {} \
             (in a config: accept = [\"{}\"]), or --accept {} for the other; \
             a capture that holds the A and B lines of one feed is given as both inputs, \
             each with its line's destination (--a-accept {} --b-accept {}, or the other way \
             round; in a config: a-accept, b-accept)",
            self.first, self.second, self.first, self.first, self.second, self.first, self.second
        )
    }
}

/// Which output a report or counter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputId {
    Ll,
    Hr,
}

impl OutputId {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputId::Ll => "ll",
            OutputId::Hr => "hr",
        }
    }
}

/// The high-reliability window: how long, or for how many messages, early packets wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "kebab-case")]
pub enum Policy {
    /// Never wait: the HR output behaves like the LL output (holes are skipped at once).
    LowLatency,
    /// A packet waits at most `timeout_ns`.
    Time { timeout_ns: u64 },
    /// At most `max_msgs` messages wait.
    Count { max_msgs: u64 },
    /// Whichever of the two limits comes first.
    TimeCount { timeout_ns: u64, max_msgs: u64 },
}

impl Policy {
    pub(super) fn timeout(&self) -> Option<u64> {
        match *self {
            Policy::Time { timeout_ns } | Policy::TimeCount { timeout_ns, .. } => Some(timeout_ns),
            _ => None,
        }
    }
    pub(super) fn max_msgs(&self) -> Option<u64> {
        match *self {
            Policy::Count { max_msgs } | Policy::TimeCount { max_msgs, .. } => Some(max_msgs),
            Policy::LowLatency => Some(0),
            Policy::Time { .. } => None,
        }
    }
    /// Name as used on the command line.
    pub fn mode_name(&self) -> &'static str {
        match self {
            Policy::LowLatency => "low-latency",
            Policy::Time { .. } => "time",
            Policy::Count { .. } => "count",
            Policy::TimeCount { .. } => "time-count",
        }
    }
}

/// Why a gap was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GapReason {
    /// The HR window's time ran out.
    Timeout,
    /// More messages waited than the HR window allows.
    Count,
    /// The HR buffer was full.
    Overflow,
    /// Skipped at once: the LL output, or the HR output under `Policy::LowLatency`.
    Skipped,
    /// No data arrived for the idle cap while packets waited.
    Idle,
    /// A sequence reset ended the sequence space while packets waited.
    Reset,
    /// The caller flushed the arbitrator (end of input).
    Flush,
    /// The window ended while the hole had been asked for again from the exchange's
    /// retransmission server, and the answer had not filled it.
    #[serde(rename = "rerequest-timeout")]
    RerequestTimeout,
}

impl GapReason {
    pub const ALL: [GapReason; 8] = [
        GapReason::Timeout,
        GapReason::Count,
        GapReason::Overflow,
        GapReason::Skipped,
        GapReason::Idle,
        GapReason::Reset,
        GapReason::Flush,
        GapReason::RerequestTimeout,
    ];
    /// A small number for the reason (its place in [`GapReason::ALL`]), as gap records
    /// carry it.
    pub fn code(self) -> u8 {
        self as u8
    }
    pub fn from_code(code: u64) -> Option<GapReason> {
        GapReason::ALL.get(usize::try_from(code).ok()?).copied()
    }
    pub fn as_str(self) -> &'static str {
        match self {
            GapReason::Timeout => "timeout",
            GapReason::Count => "count",
            GapReason::Overflow => "overflow",
            GapReason::Skipped => "skipped",
            GapReason::Idle => "idle",
            GapReason::Reset => "reset",
            GapReason::Flush => "flush",
            GapReason::RerequestTimeout => "rerequest-timeout",
        }
    }
}

/// A range of sequence numbers an output gave up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapReport {
    pub output: OutputId,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
    pub reason: GapReason,
    /// When it was given up.
    pub at_ns: u64,
}

/// What started a new sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResetKind {
    /// A MoldUDP64 packet of a new session. Packets of the session just left are late.
    Session,
    /// An XDP Sequence Number Reset. Copies of the same reset packet are duplicates.
    ResetMessage,
    /// A sequence number at least `reset_jump` below the highest seen.
    ///
    /// After a reset message or a backward jump, a packet whose sequence number falls in the
    /// range of the space just left is a late copy of that space (not an early packet of the
    /// new one) until the new space's sequence numbers reach that range.
    BackwardJump,
}

/// Things that happen besides packets and gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArbEvent {
    SequenceReset { at_ns: u64, input: u8, kind: ResetKind, old_next: u64, new_seq: u64 },
    EndOfSession { at_ns: u64, input: u8, seq: u64 },
    PolicyChanged { at_ns: u64, policy: Policy },
}

/// What an output does with the packet just handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The output is switched off.
    Off,
    /// Forward the frame now; `skip` > 0 means its first `skip` messages were already
    /// delivered: use [`Arbitrator::frame_for`](super::Arbitrator::frame_for) to get the trimmed bytes.
    Forward { skip: u32 },
    /// Copied into the HR buffer; it comes out of [`Arbitrator::poll_hr`](super::Arbitrator::poll_hr).
    Buffered,
    /// Every message was already delivered on this output.
    Duplicate,
    /// Its messages were given up before it arrived.
    Late,
}

/// What the arbitrator does with one market-data packet ([`Arbitrator::handle_packet`](super::Arbitrator::handle_packet)).
///
/// Kept to 16 bytes so that it comes back in registers: a larger return value goes through
/// memory, and reading it back stalled store forwarding for a third of the per-packet cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A heartbeat or end-of-session packet: counted, not forwarded.
    Control,
    /// A data packet and what each output does with it.
    Data { ll: Action, hr: Action },
}

/// The verdict on one frame ([`Arbitrator::handle_frame`](super::Arbitrator::handle_frame)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not market data: route to the *other* output.
    Other(Other),
    /// A heartbeat or end-of-session packet: counted, not forwarded.
    Control(PacketInfo),
    /// A data packet and what each output does with it.
    Data { info: PacketInfo, ll: Action, hr: Action },
}

/// A packet released from the HR buffer.
#[derive(Debug, Clone, Copy)]
pub struct Released<'a> {
    pub frame: &'a [u8],
    /// Sequence number and count as released (after trimming).
    pub seq: u64,
    pub count: u32,
    pub input: u8,
    pub arrival_ns: u64,
    pub release_ns: u64,
    pub trimmed: bool,
    /// Offset of the UDP payload in `frame` (trimming keeps the headers' length), so that
    /// a decoder need not parse the headers again.
    pub payload_offset: u16,
}

/// Arbitrator configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArbConfig {
    /// Number of inputs (2 for A/B), at most 255.
    pub inputs: usize,
    pub low_latency: bool,
    pub high_reliability: bool,
    pub policy: Policy,
    /// HR buffer capacity in packets.
    pub capacity_packets: usize,
    /// HR buffer capacity in bytes (frame bytes).
    pub capacity_bytes: usize,
    /// Give up every wait when no data packet has arrived for this long (0: never).
    pub idle_ns: u64,
    /// A sequence number this far below the highest seen starts a new space (0: never).
    pub reset_jump: u64,
    /// The first expected sequence number; `None` takes the first packet's.
    pub start_seq: Option<u64>,
    /// How many given-up ranges each output remembers to tell late packets from duplicates.
    pub gap_memory: usize,
    /// Ask the exchange's retransmission server for holes that every line lost (MoldUDP64
    /// only). Its answers are one more input, after the lines: input number `inputs`.
    pub rerequest: Option<RerequestConfig>,
    /// Each line's own destination (group and port), by input; empty or `None`: learnt
    /// from its first packet. A packet of the protocol to another destination on that
    /// input is filtered (other), not a conflict: how A and B are told apart when one
    /// capture holds both.
    pub input_accept: Vec<Option<Endpoint>>,
}

/// When and how holes are asked for again (see [`ArbConfig::rerequest`]).
///
/// A hole (messages missing before a packet that waits in the HR buffer) is asked for once
/// every line has gone past it, or once `line_wait_ns` has passed since it was first seen
/// (a line that is down or far behind), but not before `delay_ns` has passed. Requests ask
/// for at most `max_msgs` messages each; at most `max_outstanding` are unanswered at once.
/// A request not wholly answered within `retry_ns` is sent again for what is still missing,
/// the wait doubling each time; after `max_retries` requests in a row that brought nothing
/// it is given up and the HR window decides (the gap's reason is then
/// `rerequest-timeout`). A request that brought part of its range is not a failure: a
/// server may answer in parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RerequestConfig {
    pub delay_ns: u64,
    pub line_wait_ns: u64,
    pub max_msgs: u16,
    pub max_outstanding: usize,
    pub retry_ns: u64,
    pub max_retries: u32,
}

impl Default for RerequestConfig {
    fn default() -> Self {
        RerequestConfig {
            delay_ns: 0,
            line_wait_ns: 1_000_000,
            max_msgs: 1000,
            max_outstanding: 16,
            retry_ns: 2_000_000,
            max_retries: 3,
        }
    }
}

/// A request for messages again, for the caller to send to the retransmission server
/// ([`Arbitrator::poll_request`](super::Arbitrator::poll_request)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rerequest {
    pub session: [u8; 10],
    pub seq: u64,
    pub count: u16,
    /// The time it was asked for.
    pub at_ns: u64,
    /// Requests sent for this range before (0: the first).
    pub retry: u32,
}

impl Rerequest {
    /// The request as it goes on the wire (a MoldUDP64 header alone).
    pub fn to_bytes(&self) -> [u8; tickplant_wire::moldudp64::HEADER_LEN] {
        tickplant_wire::moldudp64::Repr { session: self.session, sequence_number: self.seq, message_count: self.count }
            .to_bytes()
    }
}

/// Counters of the re-requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RerequestStats {
    /// Holes found missing on every line (or after the line wait) and asked for.
    pub holes: u64,
    /// Requests made, retries included.
    pub requests: u64,
    /// Of those, retries (for what an earlier request did not bring).
    pub retries: u64,
    /// Messages asked for, retries included.
    pub messages_requested: u64,
    /// Messages the HR output delivered from the answers.
    pub messages_recovered: u64,
    /// Requests given up after their last retry.
    pub unanswered: u64,
    /// Holes that waited for a request slot (`max_outstanding` were unanswered).
    pub throttled: u64,
    /// Requests unanswered now.
    pub outstanding: u64,
}

impl Default for ArbConfig {
    fn default() -> Self {
        ArbConfig {
            inputs: 2,
            low_latency: true,
            high_reliability: true,
            policy: Policy::Time { timeout_ns: 1_000_000 },
            capacity_packets: 4096,
            capacity_bytes: 16 << 20,
            idle_ns: 1_000_000_000,
            reset_jump: 1 << 30,
            start_seq: None,
            gap_memory: 4096,
            rerequest: None,
            input_accept: Vec::new(),
        }
    }
}

impl ArbConfig {
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.inputs == 0 || self.inputs > 255 {
            return Err(InvalidConfig::new("inputs", format!("inputs must be 1..=255, got {}", self.inputs)));
        }
        if self.capacity_packets == 0 {
            return Err(InvalidConfig::new("capacity_packets", "capacity_packets must be at least 1"));
        }
        if !self.low_latency && !self.high_reliability {
            return Err(InvalidConfig::new(
                "low_latency",
                "at least one output (low_latency, high_reliability) must be on",
            ));
        }
        if self.gap_memory == 0 {
            return Err(InvalidConfig::new("gap_memory", "gap_memory must be at least 1"));
        }
        if self.input_accept.len() > self.inputs {
            return Err(InvalidConfig::new(
                "input_accept",
                format!("{} lines' destinations for {} inputs", self.input_accept.len(), self.inputs),
            ));
        }
        if let Some(e) = self.input_accept.iter().flatten().find(|e| e.group.is_none() || e.port.is_none()) {
            return Err(InvalidConfig::new(
                "input_accept",
                format!("a line's destination is a group and a port (GROUP:PORT), not {e}"),
            ));
        }
        if let Some(r) = &self.rerequest {
            if !self.high_reliability {
                return Err(InvalidConfig::new(
                    "rerequest",
                    "re-request fills the HR output: high_reliability must be on",
                ));
            }
            if self.inputs >= 255 {
                return Err(InvalidConfig::new("rerequest", "re-request takes one more input: at most 254 lines"));
            }
            if r.max_msgs == 0 || r.max_msgs == u16::MAX {
                return Err(InvalidConfig::new("rerequest.max_msgs", "max_msgs must be 1..=65534"));
            }
            if r.max_outstanding == 0 {
                return Err(InvalidConfig::new("rerequest.max_outstanding", "max_outstanding must be at least 1"));
            }
            if r.retry_ns == 0 {
                return Err(InvalidConfig::new("rerequest.retry_ns", "retry_ns must be more than 0"));
            }
        }
        Ok(())
    }
}

/// Counters of one input. `packets == other + control + wins + duplicates + late`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputStats {
    /// Frames received on this input, of every kind.
    pub packets: u64,
    /// Messages in its data packets.
    pub messages: u64,
    /// Data packets that brought at least one message first (the first copy).
    pub wins: u64,
    /// Data packets whose messages had all arrived before.
    pub duplicates: u64,
    /// Data packets whose messages had been given up before they arrived.
    pub late: u64,
    /// Data packets with a lower sequence number than an earlier packet of this input.
    pub out_of_order: u64,
    /// Heartbeats and end-of-session packets.
    pub control: u64,
    /// Frames that are not market data (see the per-reason counts).
    pub other: u64,
}

/// Counters of one output.
///
/// `data_in == packets + duplicates + late + pending`, and
/// `messages - redelivered + messages_lost == sequence_span`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputStats {
    pub enabled: bool,
    /// Data packets offered to this output.
    pub data_in: u64,
    /// Packets forwarded.
    pub packets: u64,
    /// Messages forwarded.
    pub messages: u64,
    /// Gaps reported.
    pub gaps: u64,
    /// Messages in those gaps.
    pub messages_lost: u64,
    /// Packets forwarded trimmed to their new messages.
    pub trimmed: u64,
    /// Messages forwarded a second time because the packet could not be trimmed.
    pub redelivered: u64,
    /// Packets not forwarded: all messages already delivered.
    pub duplicates: u64,
    /// Packets not forwarded: their messages had been given up.
    pub late: u64,
    /// Packets waiting in the buffer now (HR).
    pub pending: u64,
    /// Most packets that waited at once (HR).
    pub max_pending: u64,
    /// Sequence numbers covered so far: delivered or given up, summed over sequence spaces.
    pub sequence_span: u64,
}

/// All counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArbStats {
    pub inputs: Vec<InputStats>,
    pub ll: OutputStats,
    pub hr: OutputStats,
    /// Other traffic by reason, all inputs together.
    pub other_by_reason: std::collections::BTreeMap<String, u64>,
    pub sequence_resets: u64,
    /// Re-requests, when they are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerequest: Option<RerequestStats>,
}

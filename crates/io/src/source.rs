//! Where frames come from. A [`Source`] gives each frame with its input and its receive
//! time; the runner ([`crate::runner`]) drives the arbitrator and the later stages from it,
//! the same way whatever the source is. Captures replayed in time order
//! ([`MergedReader`]) are one source, live groups ([`crate::live::LiveSource`]) another;
//! [`AnySource`] is either, for the commands that take both.

use tickplant_core::LinkType;

use crate::pcap::{Frame, MergedReader, PcapError};

/// Frames of one or more inputs (A, B, ...), each with its receive time.
pub trait Source {
    /// Why a frame could not be had (a capture that breaks its format, a socket error).
    type Error: std::error::Error + Send + Sync + 'static;
    /// The next frame of any input, with the input's index; `Ok(None)` when every input
    /// has ended.
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, Self::Error>;
    /// How many inputs there are.
    fn inputs(&self) -> usize;
    /// The link layer of an input's frames.
    fn link_type(&self, input: usize) -> LinkType;
    /// An input's name for messages (the capture's path, the group's address).
    fn input_name(&self, input: usize) -> String;
    /// Frames read so far from an input (the last one handed out included).
    fn frames_read(&self, input: usize) -> u64;
    /// After [`Source::next_frame`] gave `Ok(None)`: `None` when every input has ended
    /// (a capture's end, a live run's stop); `Some(now)`, the time on the frames' clock,
    /// when a live source has nothing yet but goes on: the runner moves the arbitrator's
    /// clock to it (its waits end on time on a quiet line) and asks for frames again.
    fn idle(&mut self) -> Option<u64> {
        None
    }
    /// After [`Source::idle`] gave a time and the runner passed on what it held: wait a
    /// little for frames (a live source's `poll`; nothing for one that spins).
    fn wait(&mut self) {}
    /// A live source's counts per input (datagrams, kernel drops); empty for captures.
    fn live_stats(&self) -> Vec<crate::live::LiveInputStats> {
        Vec::new()
    }
    /// Frames of an input its capture cut short (none for a live source, which counts
    /// datagrams cut at its buffer in [`Source::live_stats`]).
    fn cut_short(&self, _input: usize) -> crate::pcap::CutShort {
        crate::pcap::CutShort::default()
    }
    /// Frames of an input without a trailer time where its frame times were to come from
    /// one ([`crate::pcap::TimeSource`]): they kept the capture's.
    fn trailer_missing(&self, _input: usize) -> u64 {
        0
    }
    /// Send a re-request to the exchange's retransmission server (a live source opened
    /// with one; nothing otherwise).
    fn send_request(&mut self, _request: &[u8]) {}
}

impl Source for MergedReader {
    type Error = PcapError;
    #[inline]
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, PcapError> {
        MergedReader::next_frame(self)
    }
    fn inputs(&self) -> usize {
        self.readers().len()
    }
    fn link_type(&self, input: usize) -> LinkType {
        self.readers()[input].link_type()
    }
    fn input_name(&self, input: usize) -> String {
        self.readers()[input].path().display().to_string()
    }
    fn frames_read(&self, input: usize) -> u64 {
        self.readers()[input].frames_read()
    }
    fn cut_short(&self, input: usize) -> crate::pcap::CutShort {
        self.readers()[input].cut_short()
    }
    fn trailer_missing(&self, input: usize) -> u64 {
        self.readers()[input].trailer_missing()
    }
}

/// A capture replay (an ITCH BinaryFILE is one, of one line) or live groups: what
/// `tickplant run` and `tickplant arb` read.
#[derive(Debug)]
pub enum AnySource {
    Captures(MergedReader),
    Live(crate::live::LiveSource),
}

/// Why [`AnySource`] could not give a frame.
#[derive(Debug)]
pub enum SourceError {
    Capture(PcapError),
    Live(crate::live::LiveError),
    /// An input that is neither a capture path nor a good `udp://` URL, or a mix of both.
    Input(String),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::Capture(e) => e.fmt(f),
            SourceError::Live(e) => e.fmt(f),
            SourceError::Input(s) => f.write_str(s),
        }
    }
}

// Transparent: it displays as the error it wraps, so its source is that error's source (the
// wrapped error as a source would print its message twice in `error: a: b` chains).
impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SourceError::Capture(e) => e.source(),
            SourceError::Live(e) => e.source(),
            SourceError::Input(_) => None,
        }
    }
}

impl Source for AnySource {
    type Error = SourceError;
    #[inline]
    fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, SourceError> {
        match self {
            AnySource::Captures(m) => m.next_frame().map_err(SourceError::Capture),
            AnySource::Live(l) => l.next_frame().map_err(SourceError::Live),
        }
    }
    fn idle(&mut self) -> Option<u64> {
        match self {
            AnySource::Captures(_) => None,
            AnySource::Live(l) => l.idle(),
        }
    }
    fn wait(&mut self) {
        if let AnySource::Live(l) = self {
            l.wait();
        }
    }
    fn inputs(&self) -> usize {
        match self {
            AnySource::Captures(m) => Source::inputs(m),
            AnySource::Live(l) => l.inputs(),
        }
    }
    fn link_type(&self, input: usize) -> LinkType {
        match self {
            AnySource::Captures(m) => Source::link_type(m, input),
            AnySource::Live(l) => l.link_type(input),
        }
    }
    fn input_name(&self, input: usize) -> String {
        match self {
            AnySource::Captures(m) => Source::input_name(m, input),
            AnySource::Live(l) => l.input_name(input),
        }
    }
    fn frames_read(&self, input: usize) -> u64 {
        match self {
            AnySource::Captures(m) => Source::frames_read(m, input),
            AnySource::Live(l) => l.frames_read(input),
        }
    }
    fn live_stats(&self) -> Vec<crate::live::LiveInputStats> {
        match self {
            AnySource::Captures(_) => Vec::new(),
            AnySource::Live(l) => l.stats(),
        }
    }
    fn cut_short(&self, input: usize) -> crate::pcap::CutShort {
        match self {
            AnySource::Captures(m) => Source::cut_short(m, input),
            AnySource::Live(_) => crate::pcap::CutShort::default(),
        }
    }
    fn trailer_missing(&self, input: usize) -> u64 {
        match self {
            AnySource::Captures(m) => Source::trailer_missing(m, input),
            AnySource::Live(_) => 0,
        }
    }
    fn send_request(&mut self, request: &[u8]) {
        if let AnySource::Live(l) = self {
            l.send_request(request);
        }
    }
}

impl AnySource {
    /// The inputs as given (`udp://...` a live group, anything else a capture): all
    /// captures, or all live; a mix is refused (a capture's times are not the wall clock's).
    pub fn open(inputs: &[std::path::PathBuf], live: &crate::live::LiveOptions) -> Result<AnySource, SourceError> {
        use crate::live::{Input, LiveSource};
        let parsed = inputs
            .iter()
            .map(|p| Input::parse(p))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SourceError::Input(e.to_string()))?;
        let urls: Vec<_> = parsed.iter().filter_map(|i| if let Input::Udp(u) = i { Some(*u) } else { None }).collect();
        if urls.is_empty() && live.rerequest.is_some() {
            return Err(SourceError::Input(
                "re-request asks the exchange for what the live lines lost: it needs live inputs (udp://...), \
                 not captures"
                    .into(),
            ));
        }
        if urls.is_empty() {
            let readers = inputs
                .iter()
                .map(crate::FrameReader::open)
                .collect::<Result<Vec<_>, _>>()
                .map_err(SourceError::Capture)?;
            // NASDAQ's own form of a day is one line.
            if let Some(r) = readers.iter().find(|r| r.is_binary_file()).filter(|_| readers.len() > 1) {
                return Err(SourceError::Input(format!(
                    "{}: an ITCH BinaryFILE is one line, the day as NASDAQ recorded it: give it alone (as `a`)",
                    r.path().display()
                )));
            }
            return Ok(AnySource::Captures(MergedReader::new(readers)));
        }
        if urls.len() != inputs.len() {
            let names: Vec<String> = parsed.iter().map(|i| i.to_string()).collect();
            return Err(SourceError::Input(format!(
                "{}: captures and live groups cannot be mixed in one run",
                names.join(" + ")
            )));
        }
        LiveSource::open(&urls, live.clone()).map(AnySource::Live).map_err(SourceError::Live)
    }
    /// The ITCH BinaryFILE read, if the input is one.
    pub fn binary_file(&self) -> Option<&std::path::Path> {
        match self {
            AnySource::Captures(m) => m.readers().iter().find(|r| r.is_binary_file()).map(|r| r.path()),
            AnySource::Live(_) => None,
        }
    }
    /// An ITCH BinaryFILE is read as MoldUDP64 packets: refused with another protocol.
    pub fn check_protocol(&self, protocol: tickplant_core::Protocol) -> Result<(), SourceError> {
        match self.binary_file() {
            Some(p) if protocol != tickplant_core::Protocol::Moldudp64 => Err(SourceError::Input(format!(
                "{}: an ITCH 5.0 BinaryFILE is read as MoldUDP64 packets (protocol moldudp64), not {}",
                p.display(),
                format!("{protocol:?}").to_lowercase()
            ))),
            _ => Ok(()),
        }
    }
    /// Captures: take frame times from `source` (a tap's trailer); live inputs keep the
    /// kernel's receive times.
    pub fn set_time_source(&mut self, source: crate::pcap::TimeSource) {
        if let AnySource::Captures(m) = self {
            m.set_time_source(source);
        }
    }
    /// Whether the inputs are live groups.
    pub fn is_live(&self) -> bool {
        matches!(self, AnySource::Live(_))
    }
}

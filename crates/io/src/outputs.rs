//! Where the arbitrator's streams go besides the decoder: captures (rotated by size or
//! time where asked) or groups they are sent on to, their bytes unchanged. `tickplant arb`
//! writes its outputs through these, and so does a run with `hr-out`, `ll-out` or
//! `other-out` in `[arbitration]`; [`Tee`] puts them behind any feed.

use std::path::{Path, PathBuf};

use tickplant_core::{ArbEvent, ArbSink, Arbitrator, GapReport, LinkType, Other, Released};

use crate::live::{udp_payload, Input, LiveError, UdpSender};
use crate::pcap::{Format, FrameWriter, PcapError};
use crate::runner::Feed;

/// When a capture output starts its next file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotate {
    /// After this many bytes (frames and their record headers).
    Bytes(u64),
    /// After this long of capture time (ns) since the file's first frame.
    Every(u64),
}

impl std::str::FromStr for Rotate {
    type Err = String;
    /// `100MB`, `1GB`, `500KB`, `1048576` (bytes); `60s`, `5m`, `1h` (time).
    fn from_str(s: &str) -> Result<Rotate, String> {
        let bad = || format!("'{s}': a size (500KB, 100MB, 1GB, or bytes) or a time (60s, 5m, 1h)");
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (n, unit) = t.split_at(split);
        let n: u64 = n.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        let r = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => Rotate::Bytes(n),
            "kb" => Rotate::Bytes(n << 10),
            "mb" => Rotate::Bytes(n << 20),
            "gb" => Rotate::Bytes(n << 30),
            "s" => Rotate::Every(n * 1_000_000_000),
            "m" | "min" => Rotate::Every(n * 60_000_000_000),
            "h" => Rotate::Every(n * 3_600_000_000_000),
            _ => return Err(bad()),
        };
        Ok(r)
    }
}

/// A capture written in files of at most a size or a span: `hr.pcap` becomes
/// `hr-000.pcap`, `hr-001.pcap`, ... (without rotation, the one file as named).
#[derive(Debug)]
pub struct RotatingWriter {
    path: PathBuf,
    link: LinkType,
    rotate: Option<Rotate>,
    cur: Option<FrameWriter>,
    index: u32,
    bytes: u64,
    first_ts: u64,
    frames: u64,
}

impl RotatingWriter {
    pub fn create(path: &Path, link: LinkType, rotate: Option<Rotate>) -> Result<RotatingWriter, PcapError> {
        let mut w = RotatingWriter {
            path: path.to_path_buf(),
            link,
            rotate,
            cur: None,
            index: 0,
            bytes: 0,
            first_ts: 0,
            frames: 0,
        };
        w.open_next()?;
        Ok(w)
    }

    /// The name of file `i`: the path with `-NNN` before its extension.
    pub fn file_name(path: &Path, i: u32) -> PathBuf {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let name = match path.extension() {
            Some(e) => format!("{stem}-{i:03}.{}", e.to_string_lossy()),
            None => format!("{stem}-{i:03}"),
        };
        path.with_file_name(name)
    }

    fn open_next(&mut self) -> Result<(), PcapError> {
        if let Some(w) = self.cur.take() {
            w.finish()?;
        }
        let p = if self.rotate.is_some() { Self::file_name(&self.path, self.index) } else { self.path.clone() };
        self.cur = Some(FrameWriter::create(&p, self.link, Format::for_path(&self.path))?);
        self.index += 1;
        self.bytes = 0;
        self.frames = 0;
        Ok(())
    }

    #[inline]
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> Result<(), PcapError> {
        if self.frames == 0 {
            self.first_ts = ts_ns;
        } else if let Some(r) = self.rotate {
            let full = match r {
                Rotate::Bytes(n) => self.bytes + 16 + frame.len() as u64 > n,
                Rotate::Every(ns) => ts_ns.saturating_sub(self.first_ts) >= ns,
            };
            if full {
                self.open_next()?;
                self.first_ts = ts_ns;
            }
        }
        self.bytes += 16 + frame.len() as u64;
        self.frames += 1;
        self.cur.as_mut().expect("a file is open").write(ts_ns, frame)
    }

    /// Files written so far (the one open included).
    pub fn files(&self) -> u32 {
        self.index
    }

    pub fn finish(mut self) -> Result<(), PcapError> {
        match self.cur.take() {
            Some(w) => w.finish(),
            None => Ok(()),
        }
    }
}

/// One stream's destination.
#[derive(Debug)]
pub enum StreamOut {
    File(RotatingWriter),
    Udp(UdpSender),
}

/// Why an output could not be opened or written.
#[derive(Debug)]
pub enum OutputError {
    Capture(PcapError),
    Live(LiveError),
    /// The output cannot take this stream (other traffic to a group).
    Refused(String),
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputError::Capture(e) => e.fmt(f),
            OutputError::Live(e) => e.fmt(f),
            OutputError::Refused(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for OutputError {}

impl From<PcapError> for OutputError {
    fn from(e: PcapError) -> Self {
        OutputError::Capture(e)
    }
}

impl StreamOut {
    /// A capture path, or a `udp://` group.
    pub fn open(p: &Path, link: LinkType, rotate: Option<Rotate>) -> Result<StreamOut, OutputError> {
        match Input::parse(p).map_err(|e| OutputError::Refused(e.to_string()))? {
            Input::Udp(u) => Ok(StreamOut::Udp(UdpSender::open(&u).map_err(OutputError::Live)?)),
            Input::Capture(p) => Ok(StreamOut::File(RotatingWriter::create(&p, link, rotate)?)),
        }
    }

    /// A released packet: written whole, or its UDP payload sent.
    #[inline]
    pub fn put(&mut self, ts_ns: u64, frame: &[u8], payload_offset: u16) -> Result<(), PcapError> {
        match self {
            StreamOut::File(w) => w.write(ts_ns, frame),
            StreamOut::Udp(u) => {
                u.send(udp_payload(frame, payload_offset));
                Ok(())
            }
        }
    }
}

/// The outputs of a run: LL, HR and other traffic, each where it was asked for. The first
/// write error is kept (the run then stops and reports it).
#[derive(Debug, Default)]
pub struct Outputs {
    pub ll: Option<StreamOut>,
    pub hr: Option<StreamOut>,
    pub other: Option<RotatingWriter>,
    pub error: Option<PcapError>,
}

/// What the outputs sent on to groups did, by stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SentStats {
    pub to: String,
    pub datagrams: u64,
    pub bytes: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl Outputs {
    /// Open the outputs named (`other` a capture path only).
    pub fn open(
        ll: Option<&Path>,
        hr: Option<&Path>,
        other: Option<&Path>,
        link: LinkType,
        rotate: Option<Rotate>,
    ) -> Result<Outputs, OutputError> {
        if other.is_some_and(Input::is_live) {
            return Err(OutputError::Refused(
                "other-out takes a capture path: other traffic is not sent on to a group".into(),
            ));
        }
        Ok(Outputs {
            ll: ll.map(|p| StreamOut::open(p, link, rotate)).transpose()?,
            hr: hr.map(|p| StreamOut::open(p, link, rotate)).transpose()?,
            other: other.map(|p| RotatingWriter::create(p, link, rotate)).transpose()?,
            error: None,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.ll.is_none() && self.hr.is_none() && self.other.is_none()
    }

    fn keep(&mut self, r: Result<(), PcapError>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }

    #[inline]
    pub fn ll(&mut self, f: &Released<'_>) {
        if let Some(o) = self.ll.as_mut() {
            let r = o.put(f.release_ns, f.frame, f.payload_offset);
            self.keep(r);
        }
    }

    #[inline]
    pub fn hr(&mut self, f: &Released<'_>) {
        if let Some(o) = self.hr.as_mut() {
            let r = o.put(f.release_ns, f.frame, f.payload_offset);
            self.keep(r);
        }
    }

    pub fn other(&mut self, now: u64, frame: &[u8]) {
        if let Some(w) = self.other.as_mut() {
            let r = w.write(now, frame);
            self.keep(r);
        }
    }

    /// Close the captures; the streams sent on, by name, with what they did.
    pub fn finish(self) -> Result<Vec<(&'static str, SentStats)>, PcapError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let mut sent = Vec::new();
        for (name, o) in [("ll", self.ll), ("hr", self.hr)] {
            match o {
                Some(StreamOut::File(w)) => w.finish()?,
                Some(StreamOut::Udp(u)) => sent.push((
                    name,
                    SentStats {
                        to: u.url().to_string(),
                        datagrams: u.sent,
                        bytes: u.bytes,
                        errors: u.errors,
                        last_error: u.last_error.clone(),
                    },
                )),
                None => {}
            }
        }
        if let Some(w) = self.other {
            w.finish()?;
        }
        Ok(sent)
    }
}

/// A feed with the outputs beside it: each packet released goes to both.
#[derive(Debug)]
pub struct Tee<'a, F> {
    pub inner: &'a mut F,
    pub outs: &'a mut Outputs,
    /// Whether the feed takes the LL stream (and its gaps): the arbitrator may run it for
    /// the output alone.
    pub pass_ll: bool,
}

impl<F: ArbSink> ArbSink for Tee<'_, F> {
    #[inline]
    fn ll(&mut self, f: &Released<'_>) {
        self.outs.ll(f);
        if self.pass_ll {
            self.inner.ll(f);
        }
    }
    #[inline]
    fn hr(&mut self, r: &Released<'_>) {
        self.outs.hr(r);
        self.inner.hr(r);
    }
    fn other(&mut self, now: u64, input: usize, frame: &[u8], other: &Other) {
        self.outs.other(now, frame);
        self.inner.other(now, input, frame, other);
    }
    fn gap(&mut self, g: &GapReport) {
        if self.pass_ll || g.output != tickplant_core::OutputId::Ll {
            self.inner.gap(g);
        }
    }
    fn event(&mut self, e: &ArbEvent) {
        self.inner.event(e);
    }
}

impl<F: Feed> Feed for Tee<'_, F> {
    fn elsewhere(&self) -> u64 {
        self.inner.elsewhere()
    }
    fn done(&self, arb: &Arbitrator) -> (u64, &'static str) {
        self.inner.done(arb)
    }
    fn flush(&mut self) {
        self.inner.flush();
    }
    fn timing(&mut self, on: bool) {
        self.inner.timing(on);
    }
    fn stopped(&self) -> bool {
        self.outs.error.is_some() || self.inner.stopped()
    }
    #[inline(always)]
    fn frame(&mut self, input: usize) {
        self.inner.frame(input);
    }
    fn idle(&mut self) {
        self.inner.idle();
    }
}

/// [`runner::run`](crate::runner::run) into `feed`, with `outs` beside it when there are
/// any (no [`Tee`] on the path of a run that writes nothing).
pub fn run_with<S: crate::source::Source, F: Feed>(
    source: &mut S,
    arb: &mut Arbitrator,
    feed: &mut F,
    outs: &mut Outputs,
    pass_ll: bool,
    h_arb: &mut crate::hist::Ticks,
    opts: crate::runner::RunOptions<'_>,
) -> Result<crate::runner::Replayed, crate::runner::RunError<S::Error>> {
    if outs.is_empty() {
        crate::runner::run(source, arb, feed, h_arb, opts)
    } else {
        crate::runner::run(source, arb, &mut Tee { inner: feed, outs, pass_ll }, h_arb, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_sizes_and_times_parse() {
        assert_eq!("100MB".parse::<Rotate>().unwrap(), Rotate::Bytes(100 << 20));
        assert_eq!("4096".parse::<Rotate>().unwrap(), Rotate::Bytes(4096));
        assert_eq!("60s".parse::<Rotate>().unwrap(), Rotate::Every(60_000_000_000));
        assert_eq!("5m".parse::<Rotate>().unwrap(), Rotate::Every(300_000_000_000));
        for bad in ["", "0", "10 parsecs", "MB", "1.5GB"] {
            assert!(bad.parse::<Rotate>().is_err(), "{bad}");
        }
    }

    /// Rotated by size, every frame lands in exactly one file, in order, and no file
    /// passes the size but by its first frame; rotated by time, each file spans less
    /// than the period.
    #[test]
    fn rotated_files_hold_every_frame_once() {
        let d = tempfile::tempdir().unwrap();
        let frame = |i: u32| {
            let mut f = vec![0u8; 60 + (i % 7) as usize];
            f[..4].copy_from_slice(&i.to_be_bytes());
            f
        };
        for (rotate, name) in [(Rotate::Bytes(1000), "size.pcap"), (Rotate::Every(5_000), "time.pcap")] {
            let p = d.path().join(name);
            let mut w = RotatingWriter::create(&p, LinkType::Ethernet, Some(rotate)).unwrap();
            for i in 0..200u32 {
                w.write(u64::from(i) * 1000, &frame(i)).unwrap();
            }
            let files = w.files();
            w.finish().unwrap();
            assert!(files > 3, "{name}: {files} files");
            let mut next = 0u32;
            for k in 0..files {
                let f = RotatingWriter::file_name(&p, k);
                let size = std::fs::metadata(&f).unwrap().len();
                let mut r = crate::FrameReader::open(&f).unwrap();
                let mut first_ts = None;
                while let Some(fr) = r.next_frame().unwrap() {
                    assert_eq!(u32::from_be_bytes(fr.data[..4].try_into().unwrap()), next);
                    let t0 = *first_ts.get_or_insert(fr.ts_ns);
                    if let Rotate::Every(ns) = rotate {
                        assert!(fr.ts_ns - t0 < ns);
                    }
                    next += 1;
                }
                if rotate == Rotate::Bytes(1000) {
                    assert!(size <= 24 + 1000 + 16 + 67, "{} is {size} bytes", f.display());
                }
            }
            assert_eq!(next, 200, "{name}: every frame once");
        }
    }
}

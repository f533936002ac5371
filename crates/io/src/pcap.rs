//! pcap and pcapng files: frames in as `(timestamp_ns, bytes)`, frames out the same way.
//! An ITCH 5.0 BinaryFILE is read too, as the MoldUDP64 frames [`crate::binaryfile`] makes
//! of it, so that whatever reads a capture of one line reads NASDAQ's historical days.
//!
//! Classic pcap is read and written by hand here: it is the replay hot path (one 16-byte
//! record header per frame) and a hand-written loop over the file's mapping (or, for what
//! cannot be mapped, a large read buffer) is measurably cheaper than a general block
//! parser. A mapped capture must not shrink while it is read (see [`FrameReader::open`]).
//! pcapng goes through the `pcap-file`
//! crate, with one correction: pcap-file 2.0 hands back raw timestamp units as if they were
//! nanoseconds, so the interface's `if_tsresol` (default: microseconds) is applied here.
//!
//! Errors name the file, the frame number (1-based) and the byte offset.
//!
//! One file (about 870 lines, 180 of them tests): the readers and writers of both formats
//! share the frame type and the timestamp units.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::DataLink;
use tickplant_core::LinkType;

pub use crate::trailer::TimeSource;

pub use crate::frame::{capture_magic, Frame, PcapError};

/// Largest captured frame accepted (pcap's customary snaplen).
pub const MAX_FRAME: usize = 262_144;
const BUF_BYTES: usize = 1 << 20;

/// File format of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic pcap with nanosecond timestamps (magic 0xa1b23c4d).
    PcapNs,
    /// Classic pcap with microsecond timestamps (magic 0xa1b2c3d4).
    PcapUs,
    PcapNg,
}

impl Format {
    /// `.pcapng` files are written as pcapng; anything else as nanosecond pcap.
    pub fn for_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("pcapng") => Format::PcapNg,
            _ => Format::PcapNs,
        }
    }
}

enum Inner {
    /// Records parsed in place from the file's mapping, or from a large buffer read
    /// straight from the file (see [`Chunk`]).
    Classic {
        big_endian: bool,
        nanos: bool,
        offset: u64,
        chunk: Chunk,
    },
    /// An ITCH 5.0 BinaryFILE, its messages made MoldUDP64 packets ([`crate::binaryfile`]).
    Itch(Box<crate::binaryfile::BinaryFileReader>),
    Ng {
        r: Box<PcapNgReader<BufReader<Box<dyn Read + Send>>>>,
        ifaces: Vec<(LinkType, u64, u64)>,
    },
}

/// Whether the file at `path` starts as a pcap (either byte order, µs or ns) or a pcapng
/// does; an error names a file that cannot be opened or read.
pub fn is_capture(path: &Path) -> Result<bool, PcapError> {
    let err = |reason: String| PcapError { path: path.to_path_buf(), frame: None, offset: None, reason };
    let mut f = File::open(path).map_err(|e| err(format!("cannot open: {e}")))?;
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < 4 {
        match f.read(&mut magic[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(err(format!("cannot read: {e}"))),
        }
    }
    Ok(n == 4 && (capture_magic(&magic) || is_compressed_capture(path, &magic)?))
}

/// A capture compressed with gzip or zstd, by its first bytes `magic`: the decompressed
/// stream, when what it holds starts as a capture does (a gzip ITCH BinaryFILE is not one:
/// `None`, and the caller reads it as such).
fn decompressed_capture(path: &Path, magic: &[u8; 4]) -> Result<Option<Box<dyn Read + Send>>, PcapError> {
    use std::io::BufRead;
    let err = |reason: String| PcapError { path: path.to_path_buf(), frame: None, offset: Some(0), reason };
    let open = || File::open(path).map_err(|e| err(format!("cannot open: {e}")));
    let d: Box<dyn Read + Send> = match magic {
        [0x1f, 0x8b, ..] => Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(BUF_BYTES, open()?))),
        [0x28, 0xb5, 0x2f, 0xfd] => Box::new(
            zstd::stream::read::Decoder::new(open()?).map_err(|e| err(format!("cannot decompress (zstd): {e}")))?,
        ),
        _ => return Ok(None),
    };
    let mut b = BufReader::with_capacity(BUF_BYTES, d);
    let head = b.fill_buf().map_err(|e| err(format!("cannot decompress: {e}")))?;
    Ok(capture_magic(head).then(|| Box::new(b) as Box<dyn Read + Send>))
}

/// Whether `path` is a capture (pcap or pcapng, plain or compressed), by its first bytes.
fn is_compressed_capture(path: &Path, magic: &[u8; 4]) -> Result<bool, PcapError> {
    Ok(decompressed_capture(path, magic)?.is_some())
}

/// Reads frames from a pcap or pcapng file, one at a time, into an internal buffer.
pub struct FrameReader {
    path: PathBuf,
    inner: Inner,
    link: LinkType,
    frames: u64,
    ts_ns: u64,
    orig_len: u32,
    buf: Vec<u8>,
    done: bool,
    /// Frames the capture kept less of than was on the wire, and the most it kept of one.
    cut: CutShort,
    /// Where frame times come from, and the frames that had no time there (they keep the
    /// capture's).
    time_source: TimeSource,
    trailer_missing: u64,
}

/// Frames a capture cut short (its snapshot length below the frame's length): what they
/// carried past the cut is missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CutShort {
    pub frames: u64,
    /// The most bytes kept of such a frame (about the capture's snapshot length).
    pub kept_max: u32,
}

impl CutShort {
    /// Count a frame cut short, of which `kept` bytes were kept.
    #[cold]
    #[inline(never)]
    pub fn note(&mut self, kept: usize) {
        self.frames += 1;
        self.kept_max = self.kept_max.max(kept as u32);
    }
    /// What it means, said once after a run or a read (empty when nothing was cut).
    pub fn warning(&self, name: &str) -> Option<String> {
        (self.frames > 0).then(|| {
            format!(
                "{name}: {} frames were cut short by the capture (at most {} bytes kept of each; the capture's snapshot length): what they carried past the cut is missing. Capture with a larger snapshot length (tcpdump -s 0)",
                self.frames, self.kept_max
            )
        })
    }
}

impl fmt::Debug for FrameReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameReader").field("path", &self.path).field("frames", &self.frames).finish()
    }
}

fn link_of(v: u32) -> Option<LinkType> {
    LinkType::from_pcap(v)
}

/// A pcapng interface: its link type, and its time unit as (multiplier, divisor) to reach
/// nanoseconds.
fn ng_interface(idb: &InterfaceDescriptionBlock<'_>) -> Result<(LinkType, u64, u64), String> {
    let link = link_of(u32::from(idb.linktype)).ok_or_else(|| format!("unsupported link type {:?}", idb.linktype))?;
    let mut res = 6u8;
    for o in &idb.options {
        if let InterfaceDescriptionOption::IfTsResol(v) = o {
            res = *v;
        }
    }
    let (mul, div) = if res & 0x80 == 0 {
        let p = u32::from(res);
        if p <= 9 {
            (10u64.pow(9 - p), 1)
        } else {
            (1, 10u64.pow((p - 9).min(19)))
        }
    } else {
        (1_000_000_000, 1u64 << (res & 0x7f).min(63))
    };
    Ok((link, mul, div))
}

impl FrameReader {
    /// Open a capture, detecting classic pcap (either byte order, µs or ns) or pcapng.
    /// A classic capture in a regular file is mapped into memory and read in place; it must
    /// not be truncated while it is read (the read of a page past its new end would end
    /// the process with `SIGBUS`, as with any program that maps files).
    ///
    /// A capture compressed with gzip or zstd (`day.pcap.gz`, `day.pcapng.zst`, told by its
    /// first bytes) is read through the decompressor, a chunk at a time: never held whole.
    pub fn open(path: impl AsRef<Path>) -> Result<FrameReader, PcapError> {
        let path = path.as_ref().to_path_buf();
        let err = |frame, offset, reason: String| PcapError { path: path.clone(), frame, offset, reason };
        let mut file = File::open(&path).map_err(|e| err(None, None, format!("cannot open: {e}")))?;
        let mut magic = [0u8; 4];
        file.read_exact(&mut magic).map_err(|_| err(None, Some(0), "too short for a pcap header".into()))?;
        // A compressed capture: its bytes from the decompressor, with no mapping.
        let mut stream: Option<Box<dyn Read + Send>> = None;
        if let Some(mut d) = decompressed_capture(&path, &magic)? {
            d.read_exact(&mut magic).map_err(|_| err(None, Some(0), "too short for a pcap header".into()))?;
            stream = Some(d);
        }
        let (inner, link) = match magic {
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                // pcap-file wants the whole stream: reopen (or, compressed, give the magic back).
                let whole: Box<dyn Read + Send> = match stream {
                    Some(d) => Box::new(io::Cursor::new(magic).chain(d)),
                    None => Box::new(File::open(&path).map_err(|e| err(None, None, format!("cannot open: {e}")))?),
                };
                let mut ng = PcapNgReader::new(BufReader::with_capacity(BUF_BYTES, whole))
                    .map_err(|e| err(None, Some(0), format!("bad pcapng section header: {e}")))?;
                // The link type is the first interface's: read up to its description, so
                // that `link_type` says it before the first frame is read (blocks before it
                // carry no packets; a packet before any interface is an error).
                let mut ifaces = Vec::new();
                let mut link = LinkType::Ethernet;
                while let Some(block) = ng.next_block() {
                    match block.map_err(|e| err(Some(1), None, format!("bad pcapng block: {e}")))? {
                        Block::InterfaceDescription(idb) => {
                            let iface = ng_interface(&idb).map_err(|m| err(Some(1), None, m))?;
                            link = iface.0;
                            ifaces.push(iface);
                            break;
                        }
                        Block::EnhancedPacket(_) | Block::SimplePacket(_) => {
                            return Err(err(Some(1), None, "a packet before any interface description".into()));
                        }
                        _ => {}
                    }
                }
                (Inner::Ng { r: Box::new(ng), ifaces }, link)
            }
            _ => {
                let m_le = u32::from_le_bytes(magic);
                let m_be = u32::from_be_bytes(magic);
                let (big_endian, nanos) = match (m_le, m_be) {
                    (0xa1b2_c3d4, _) => (false, false),
                    (0xa1b2_3c4d, _) => (false, true),
                    (_, 0xa1b2_c3d4) => (true, false),
                    (_, 0xa1b2_3c4d) => (true, true),
                    _ if stream.is_none() && crate::binaryfile::is_binary_head(&magic) => {
                        let f = crate::binaryfile::BinaryFileReader::open(&path)?;
                        let inner = Inner::Itch(Box::new(f));
                        return Ok(FrameReader {
                            path: path.clone(),
                            inner,
                            link: LinkType::Ethernet,
                            frames: 0,
                            ts_ns: 0,
                            orig_len: 0,
                            buf: Vec::new(),
                            done: false,
                            cut: CutShort::default(),
                            time_source: TimeSource::Capture,
                            trailer_missing: 0,
                        });
                    }
                    _ => {
                        let reason = format!("not a pcap, pcapng or ITCH BinaryFILE (first bytes {magic:02x?})");
                        return Err(err(None, Some(0), reason));
                    }
                };
                let mut rest = [0u8; 20];
                let head: &mut dyn Read = match stream.as_mut() {
                    Some(d) => d,
                    None => &mut file,
                };
                head.read_exact(&mut rest).map_err(|_| err(None, Some(4), "truncated pcap file header".into()))?;
                let lt = if big_endian {
                    u32::from_be_bytes([rest[16], rest[17], rest[18], rest[19]])
                } else {
                    u32::from_le_bytes([rest[16], rest[17], rest[18], rest[19]])
                } & 0x0fff_ffff;
                let link = link_of(lt).ok_or_else(|| {
                    err(
                        None,
                        Some(20),
                        format!(
                            "unsupported link type {lt} (supported: 1 ethernet, 101/228 raw IPv4, 113 and 276 linux cooked)"
                        ),
                    )
                })?;
                let chunk = match stream {
                    Some(d) => Chunk::stream(d),
                    None => Chunk::new(file, 24),
                };
                (Inner::Classic { big_endian, nanos, offset: 24, chunk }, link)
            }
        };
        Ok(FrameReader {
            path,
            inner,
            link,
            frames: 0,
            ts_ns: 0,
            orig_len: 0,
            buf: Vec::with_capacity(2048),
            done: false,
            cut: CutShort::default(),
            time_source: TimeSource::Capture,
            trailer_missing: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Whether the file is an ITCH BinaryFILE read as MoldUDP64 packets, not a capture.
    pub fn is_binary_file(&self) -> bool {
        matches!(self.inner, Inner::Itch(_))
    }
    /// Link type of the frames (for pcapng: of the first interface).
    pub fn link_type(&self) -> LinkType {
        self.link
    }
    /// Frames read so far.
    pub fn frames_read(&self) -> u64 {
        self.frames
    }
    /// Frames read so far that the capture cut short.
    pub fn cut_short(&self) -> CutShort {
        self.cut
    }
    /// Take frame times from `source` (a tap's trailer) from the next frame on. An ITCH
    /// BinaryFILE has no frames of its own to carry one: it keeps its times.
    pub fn set_time_source(&mut self, source: TimeSource) {
        if !self.is_binary_file() {
            self.time_source = source;
        }
    }
    /// Where frame times come from ([`FrameReader::set_time_source`]).
    pub fn time_source(&self) -> TimeSource {
        self.time_source
    }
    /// Frames read so far without a time where [`FrameReader::set_time_source`] said to
    /// look (no valid trailer): they kept the capture's own.
    pub fn trailer_missing(&self) -> u64 {
        self.trailer_missing
    }

    fn err(&self, offset: Option<u64>, reason: impl Into<String>) -> PcapError {
        PcapError { path: self.path.clone(), frame: Some(self.frames + 1), offset, reason: reason.into() }
    }

    /// Read the next frame; `Ok(None)` at the end of the file.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, PcapError> {
        if self.advance()? {
            Ok(Some(self.current()))
        } else {
            Ok(None)
        }
    }

    /// The frame last read by [`FrameReader::advance`].
    pub fn current(&self) -> Frame<'_> {
        let data = match &self.inner {
            Inner::Classic { chunk, .. } => chunk.current(),
            Inner::Ng { .. } => &self.buf[..],
            Inner::Itch(f) => f.frame(),
        };
        Frame { ts_ns: self.ts_ns, data, orig_len: self.orig_len }
    }

    /// Read the next frame into the internal buffer; false at the end of the file.
    #[inline]
    pub fn advance(&mut self) -> Result<bool, PcapError> {
        let more = if self.advance_quick().is_some() { true } else { self.advance_slow()? };
        if more && self.time_source != TimeSource::Capture {
            self.trailer_time();
        }
        Ok(more)
    }

    /// The frame's time from its trailer, where it has a valid one.
    fn trailer_time(&mut self) {
        let (link, ts) = (self.link, self.ts_ns);
        match crate::trailer::metawatch_ns(link, self.current().data, ts) {
            Some(t) => self.ts_ns = t,
            None => self.trailer_missing += 1,
        }
    }

    /// The next classic record where it is wholly there and valid: the replay's per-frame
    /// path, with no error to build and no refill (about 100 instructions a frame through
    /// the general path, which builds `Result`s with the file's path in them). `None` sends
    /// the caller to the general path: a refill, the end of the file, an error, pcapng.
    #[inline(always)]
    fn advance_quick(&mut self) -> Option<()> {
        let Inner::Classic { big_endian, nanos, chunk, .. } = &mut self.inner else { return None };
        chunk.consume();
        let avail = chunk.src.bytes().get(chunk.start..chunk.end)?;
        let w = header_words(avail.get(..16)?, *big_endian);
        let incl = w[2] as usize;
        if incl > MAX_FRAME || w[1] >= frac_limit(*nanos) || avail.len() < 16 + incl {
            return None;
        }
        self.take_record(w);
        self.frames += 1;
        Some(())
    }

    /// Hand out the classic record whose header words are `w` (checked, and wholly
    /// buffered): its frame, time stamp and original length, and move the offset past it.
    #[inline(always)]
    fn take_record(&mut self, w: [u32; 4]) {
        let Inner::Classic { nanos, offset, chunk, .. } = &mut self.inner else { return };
        let incl = w[2] as usize;
        chunk.take(16 + incl, 16);
        *offset += 16 + incl as u64;
        let unit = if *nanos { 1 } else { 1000 };
        self.ts_ns = u64::from(w[0]) * 1_000_000_000 + u64::from(w[1]) * unit;
        self.orig_len = w[3];
        if w[3] > w[2] {
            self.cut.note(incl);
        }
    }

    #[cold]
    #[inline(never)]
    fn advance_slow(&mut self) -> Result<bool, PcapError> {
        if self.done {
            return Ok(false);
        }
        let more = match &mut self.inner {
            Inner::Classic { .. } => self.advance_classic()?,
            Inner::Ng { .. } => self.advance_ng()?,
            Inner::Itch(f) => {
                let more = f.advance()?;
                (self.ts_ns, self.orig_len) = (f.ts_ns(), f.frame().len() as u32);
                more
            }
        };
        if more {
            self.frames += 1;
        } else {
            self.done = true;
        }
        Ok(more)
    }

    fn advance_classic(&mut self) -> Result<bool, PcapError> {
        let Inner::Classic { big_endian, nanos, offset, chunk } = &mut self.inner else { unreachable!() };
        let (be, ns, at) = (*big_endian, *nanos, *offset);
        // Drop the frame handed out last time, then make sure a record header is buffered.
        chunk.consume();
        let have = chunk.fill(16).map_err(|e| format!("read error: {e}"));
        let have = match have {
            Ok(h) => h,
            Err(e) => return Err(self.err(Some(at), e)),
        };
        if have == 0 {
            return Ok(false);
        }
        if have < 16 {
            return Err(self.err(Some(at), format!("truncated record header ({have} of 16 bytes)")));
        }
        let Inner::Classic { chunk, .. } = &mut self.inner else { unreachable!() };
        let w = header_words(chunk.peek(16), be);
        let (frac, incl) = (w[1], w[2] as usize);
        if incl > MAX_FRAME {
            return Err(self.err(Some(at), format!("captured length {incl} exceeds {MAX_FRAME}: corrupt file")));
        }
        if frac >= frac_limit(ns) {
            return Err(self.err(Some(at), format!("timestamp fraction {frac} out of range")));
        }
        let have = chunk.fill(16 + incl).map_err(|e| format!("read error: {e}"));
        let have = match have {
            Ok(h) => h,
            Err(e) => return Err(self.err(Some(at + 16), e)),
        };
        if have < 16 + incl {
            let n = have - 16;
            return Err(self.err(Some(at + 16), format!("truncated frame data ({n} of {incl} bytes)")));
        }
        self.take_record(w);
        Ok(true)
    }

    fn advance_ng(&mut self) -> Result<bool, PcapError> {
        loop {
            let Inner::Ng { r, ifaces } = &mut self.inner else { unreachable!() };
            let block = match r.next_block() {
                None => return Ok(false),
                Some(Ok(b)) => b,
                Some(Err(e)) => {
                    let msg = format!("bad pcapng block: {e}");
                    return Err(self.err(None, msg));
                }
            };
            match block {
                Block::SectionHeader(_) => ifaces.clear(),
                Block::InterfaceDescription(idb) => {
                    let iface = ng_interface(&idb).map_err(|msg| self.err(None, msg))?;
                    let Inner::Ng { ifaces, .. } = &mut self.inner else { unreachable!() };
                    if ifaces.is_empty() {
                        self.link = iface.0;
                    }
                    ifaces.push(iface);
                }
                Block::EnhancedPacket(epb) => {
                    let Some(&(link, mul, div)) = ifaces.get(epb.interface_id as usize) else {
                        let msg = format!("packet names interface {} which was not described", epb.interface_id);
                        return Err(self.err(None, msg));
                    };
                    if link != self.link {
                        let msg = format!("interface {} has link type {link:?}, the first has {:?}: mixed link types are not supported", epb.interface_id, self.link);
                        return Err(self.err(None, msg));
                    }
                    if epb.data.len() > MAX_FRAME {
                        let msg = format!("captured length {} exceeds {MAX_FRAME}", epb.data.len());
                        return Err(self.err(None, msg));
                    }
                    let raw = epb.timestamp.as_nanos() as u64; // raw units, see module doc
                    self.ts_ns = ((u128::from(raw) * u128::from(mul)) / u128::from(div)) as u64;
                    self.orig_len = epb.original_len;
                    if epb.original_len as usize > epb.data.len() {
                        self.cut.note(epb.data.len());
                    }
                    self.buf.clear();
                    self.buf.extend_from_slice(&epb.data);
                    return Ok(true);
                }
                Block::SimplePacket(spb) => {
                    // No timestamp: keep the previous one so time never goes backwards.
                    self.orig_len = spb.original_len;
                    if spb.original_len as usize > spb.data.len() {
                        self.cut.note(spb.data.len());
                    }
                    self.buf.clear();
                    self.buf.extend_from_slice(&spb.data);
                    return Ok(true);
                }
                _ => {}
            }
        }
    }
}

/// A classic capture's bytes, from which records are parsed in place: no copy per frame.
///
/// A regular file is mapped whole (`mmap`): the replay reads the page cache itself, with no
/// `read` call and no copy into a buffer of ours. Reading into a 1 MB buffer instead cost
/// the producer thread a copy of every byte in the kernel and a call per record to see
/// whether the buffer held it (together about 13% of the samples of a `tickplant run` on
/// the demo's A/B day). What cannot be mapped (a pipe, a device) is read in chunks.
///
/// A mapped file must not shrink while it is read: another process truncating a capture
/// under a replay would end it with `SIGBUS`, as it would any program that maps files.
struct Chunk {
    src: Source,
    /// Start of unconsumed bytes, end of valid bytes.
    start: usize,
    end: usize,
    /// The record handed out: `start..start+len`, its data from `start+skip`.
    cur: (usize, usize),
}

enum Source {
    Mapped(memmap2::Mmap),
    Read { r: Box<dyn Read + Send>, buf: Vec<u8> },
}

impl Source {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Source::Mapped(m) => m,
            Source::Read { buf, .. } => buf,
        }
    }
}

impl Chunk {
    /// The bytes of `r` from `at` on (`at` bytes were read already).
    fn new(r: File, at: usize) -> Chunk {
        let regular = r.metadata().map(|m| m.is_file()).unwrap_or(false);
        if regular {
            // SAFETY: the mapping is read-only and private to this reader; the one hazard is
            // the file shrinking while mapped (SIGBUS on a read past its new end), which the
            // type's doc states as the caller's contract, as every mapping reader does.
            #[allow(unsafe_code)]
            if let Ok(m) = unsafe { memmap2::Mmap::map(&r) } {
                // The replay reads front to back, once: read ahead, and drop behind.
                let _ = m.advise(memmap2::Advice::Sequential);
                let end = m.len();
                return Chunk { src: Source::Mapped(m), start: at.min(end), end, cur: (0, 0) };
            }
        }
        Chunk::stream(Box::new(r))
    }

    /// The bytes of a stream (a pipe, a decompressor), read a buffer at a time.
    fn stream(r: Box<dyn Read + Send>) -> Chunk {
        Chunk { src: Source::Read { r, buf: vec![0; BUF_BYTES] }, start: 0, end: 0, cur: (0, 0) }
    }

    /// Release the record handed out last.
    #[inline]
    fn consume(&mut self) {
        self.start += self.cur.0;
        self.cur = (0, 0);
    }

    /// Make at least `need` bytes available from `start` if the file has them; returns how
    /// many are available (less only at the end of the file).
    #[inline]
    fn fill(&mut self, need: usize) -> io::Result<usize> {
        if self.end - self.start >= need {
            return Ok(self.end - self.start);
        }
        self.refill(need)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, need: usize) -> io::Result<usize> {
        let Source::Read { r, buf } = &mut self.src else {
            // A mapping holds the whole file: what is left is all there is.
            return Ok(self.end - self.start);
        };
        if self.start + need > buf.len() {
            buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if need > buf.len() {
                buf.resize(need, 0);
            }
        }
        while self.end - self.start < need {
            let n = read_full(r, &mut buf[self.end..])?;
            if n == 0 {
                break;
            }
            self.end += n;
        }
        Ok(self.end - self.start)
    }

    #[inline]
    fn peek(&self, n: usize) -> &[u8] {
        &self.src.bytes()[self.start..self.start + n]
    }

    /// Hand out the record of `len` bytes at `start`, its data after `skip` header bytes.
    #[inline]
    fn take(&mut self, len: usize, skip: usize) {
        self.cur = (len, skip);
    }

    #[inline]
    fn current(&self) -> &[u8] {
        &self.src.bytes()[self.start + self.cur.1..self.start + self.cur.0]
    }
}

/// A classic record header's four words (seconds, fraction, captured and original
/// length), the byte order decided once for all four.
#[inline(always)]
fn header_words(h: &[u8], big_endian: bool) -> [u32; 4] {
    let mut w = [0u32; 4];
    for (k, b) in h.chunks_exact(4).take(4).enumerate() {
        w[k] = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    }
    if big_endian {
        w = w.map(u32::swap_bytes);
    }
    w
}

/// One past the largest valid time-stamp fraction (nanosecond or microsecond files).
#[inline(always)]
fn frac_limit(nanos: bool) -> u32 {
    if nanos {
        1_000_000_000
    } else {
        1_000_000
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

enum WInner {
    Classic(BufWriter<File>, bool),
    Ng(Box<PcapNgWriter<BufWriter<File>>>),
}

/// Writes frames to a pcap (ns or µs) or pcapng file.
pub struct FrameWriter {
    path: PathBuf,
    inner: WInner,
    frames: u64,
}

impl fmt::Debug for FrameWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameWriter").field("path", &self.path).field("frames", &self.frames).finish()
    }
}

impl FrameWriter {
    pub fn create(path: impl AsRef<Path>, link: LinkType, format: Format) -> Result<FrameWriter, PcapError> {
        let path = path.as_ref().to_path_buf();
        let err = |reason: String| PcapError { path: path.clone(), frame: None, offset: None, reason };
        let file = File::create(&path).map_err(|e| err(format!("cannot create: {e}")))?;
        let mut w = BufWriter::with_capacity(BUF_BYTES, file);
        let inner = match format {
            Format::PcapNs | Format::PcapUs => {
                let nanos = format == Format::PcapNs;
                let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
                let mut h = Vec::with_capacity(24);
                h.extend_from_slice(&magic.to_le_bytes());
                h.extend_from_slice(&2u16.to_le_bytes());
                h.extend_from_slice(&4u16.to_le_bytes());
                h.extend_from_slice(&0i32.to_le_bytes());
                h.extend_from_slice(&0u32.to_le_bytes());
                h.extend_from_slice(&(MAX_FRAME as u32).to_le_bytes());
                h.extend_from_slice(&link.to_pcap().to_le_bytes());
                w.write_all(&h).map_err(|e| err(format!("write error: {e}")))?;
                WInner::Classic(w, nanos)
            }
            Format::PcapNg => {
                let mut ng = PcapNgWriter::new(w).map_err(|e| err(format!("write error: {e}")))?;
                let idb = InterfaceDescriptionBlock {
                    linktype: DataLink::from(link.to_pcap()),
                    snaplen: MAX_FRAME as u32,
                    options: vec![InterfaceDescriptionOption::IfTsResol(9)],
                };
                ng.write_pcapng_block(idb).map_err(|e| err(format!("write error: {e}")))?;
                WInner::Ng(Box::new(ng))
            }
        };
        Ok(FrameWriter { path, inner, frames: 0 })
    }

    pub fn frames_written(&self) -> u64 {
        self.frames
    }

    /// Append a frame captured (or released) at `ts_ns`.
    #[inline]
    pub fn write(&mut self, ts_ns: u64, data: &[u8]) -> Result<(), PcapError> {
        self.write_with_orig(ts_ns, data, data.len() as u32)
    }

    pub fn write_with_orig(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Result<(), PcapError> {
        let r = match &mut self.inner {
            WInner::Classic(w, nanos) => {
                let frac = if *nanos { ts_ns % 1_000_000_000 } else { (ts_ns % 1_000_000_000) / 1000 };
                let mut h = [0u8; 16];
                h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
                h[4..8].copy_from_slice(&(frac as u32).to_le_bytes());
                h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
                h[12..16].copy_from_slice(&orig_len.to_le_bytes());
                w.write_all(&h).and_then(|_| w.write_all(data)).map_err(|e| e.to_string())
            }
            WInner::Ng(w) => {
                let epb = EnhancedPacketBlock {
                    interface_id: 0,
                    // Raw units at if_tsresol = 9 (see the module doc).
                    timestamp: std::time::Duration::from_nanos(ts_ns),
                    original_len: orig_len,
                    data: std::borrow::Cow::Borrowed(data),
                    options: vec![],
                };
                w.write_pcapng_block(epb).map(|_| ()).map_err(|e| e.to_string())
            }
        };
        self.frames += 1;
        r.map_err(|e| PcapError {
            path: self.path.clone(),
            frame: Some(self.frames),
            offset: None,
            reason: format!("write error: {e}"),
        })
    }

    /// Flush everything to disk.
    pub fn finish(self) -> Result<(), PcapError> {
        let path = self.path.clone();
        let r = match self.inner {
            WInner::Classic(mut w, _) => w.flush(),
            WInner::Ng(w) => w.into_inner().flush(),
        };
        r.map_err(|e| PcapError { path, frame: None, offset: None, reason: format!("write error: {e}") })
    }
}

/// Several captures merged in timestamp order (ties go to the lower input index), as a
/// replay of inputs A, B, ... would have received them.
#[derive(Debug)]
pub struct MergedReader {
    readers: Vec<FrameReader>,
    ready: Vec<bool>,
    started: bool,
    /// The input whose current frame was handed out last: advanced on the next call.
    pending: Option<usize>,
}

impl MergedReader {
    pub fn new(readers: Vec<FrameReader>) -> MergedReader {
        let n = readers.len();
        MergedReader { readers, ready: vec![false; n], started: false, pending: None }
    }

    pub fn readers(&self) -> &[FrameReader] {
        &self.readers
    }

    /// Every input's frame times from `source` ([`FrameReader::set_time_source`]); the
    /// inputs are merged by those times.
    pub fn set_time_source(&mut self, source: TimeSource) {
        for r in &mut self.readers {
            r.set_time_source(source);
        }
    }

    /// The next frame of all inputs and its input index; `Ok(None)` when all are done.
    pub fn next_frame(&mut self) -> Result<Option<(usize, Frame<'_>)>, PcapError> {
        if !self.started {
            self.started = true;
            for i in 0..self.readers.len() {
                self.ready[i] = self.readers[i].advance()?;
            }
        }
        if let Some(i) = self.pending.take() {
            self.ready[i] = self.readers[i].advance()?;
        }
        let mut best: Option<(u64, usize)> = None;
        for (i, r) in self.readers.iter().enumerate() {
            if self.ready[i] {
                let ts = r.ts_ns;
                if best.is_none_or(|(b, _)| ts < b) {
                    best = Some((ts, i));
                }
            }
        }
        let Some((_, i)) = best else { return Ok(None) };
        self.pending = Some(i);
        Ok(Some((i, self.readers[i].current())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<(u64, Vec<u8>)> {
        (0..50u64).map(|i| (1_700_000_000_000_000_000 + i * 1_234_567, vec![i as u8; 60 + i as usize])).collect()
    }

    #[test]
    fn roundtrip_every_format() {
        let dir = tempfile::tempdir().unwrap();
        for (name, fmt) in [("a.pcap", Format::PcapNs), ("b.pcap", Format::PcapUs), ("c.pcapng", Format::PcapNg)] {
            let p = dir.path().join(name);
            let mut w = FrameWriter::create(&p, LinkType::Ethernet, fmt).unwrap();
            for (ts, d) in frames() {
                w.write(ts, &d).unwrap();
            }
            w.finish().unwrap();
            let mut r = FrameReader::open(&p).unwrap();
            assert_eq!(r.link_type(), LinkType::Ethernet);
            let mut n = 0;
            while let Some(f) = r.next_frame().unwrap() {
                let (ts, d) = &frames()[n];
                let want = if fmt == Format::PcapUs { ts / 1000 * 1000 } else { *ts };
                assert_eq!(f.ts_ns, want, "{name} frame {n}");
                assert_eq!(f.data, &d[..]);
                n += 1;
            }
            assert_eq!(n, 50);
        }
    }

    #[test]
    fn a_pipe_is_read_in_chunks() {
        // A regular file is mapped; what cannot be mapped (here a named pipe) is read.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.pcap");
        let mut w = FrameWriter::create(&file, LinkType::Ethernet, Format::PcapNs).unwrap();
        // More than one read buffer's worth, so that the chunk refills and moves its rest.
        let big: Vec<(u64, Vec<u8>)> = (0..3000u64).map(|i| (i, vec![i as u8; 500 + (i % 700) as usize])).collect();
        for (ts, d) in &big {
            w.write(*ts, d).unwrap();
        }
        w.finish().unwrap();
        let fifo = dir.path().join("p.pcap");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("no mkfifo here: skipped");
            return;
        }
        let bytes = std::fs::read(&file).unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(&fifo, bytes).unwrap())
        };
        for path in [&file, &fifo] {
            let mut r = FrameReader::open(path).unwrap();
            let mapped = matches!(&r.inner, Inner::Classic { chunk: Chunk { src: Source::Mapped(_), .. }, .. });
            assert_eq!(mapped, path == &file, "{}", path.display());
            let mut n = 0;
            while let Some(f) = r.next_frame().unwrap() {
                assert_eq!((f.ts_ns, f.data), (big[n].0, &big[n].1[..]), "{} frame {n}", path.display());
                n += 1;
            }
            assert_eq!(n, big.len());
        }
        writer.join().unwrap();
    }

    #[test]
    fn big_endian_captures_read_the_same() {
        // The same capture with every header field swapped to big-endian byte order.
        let dir = tempfile::tempdir().unwrap();
        for (fmt, name) in [(Format::PcapNs, "ns"), (Format::PcapUs, "us")] {
            let le = dir.path().join(format!("le-{name}.pcap"));
            let mut w = FrameWriter::create(&le, LinkType::Ethernet, fmt).unwrap();
            for (ts, d) in frames() {
                w.write(ts, &d).unwrap();
            }
            w.finish().unwrap();
            let mut b = std::fs::read(&le).unwrap();
            let swap4 = |b: &mut [u8], at: usize| b[at..at + 4].reverse();
            swap4(&mut b, 0);
            b[4..6].reverse();
            b[6..8].reverse();
            for at in [8, 12, 16, 20] {
                swap4(&mut b, at);
            }
            let mut at = 24;
            while at < b.len() {
                let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
                for k in 0..4 {
                    swap4(&mut b, at + 4 * k);
                }
                at += 16 + incl;
            }
            let be = dir.path().join(format!("be-{name}.pcap"));
            std::fs::write(&be, &b).unwrap();
            let (mut x, mut y) = (FrameReader::open(&le).unwrap(), FrameReader::open(&be).unwrap());
            let mut n = 0;
            while let Some(f) = x.next_frame().unwrap() {
                let (ts, data, orig) = (f.ts_ns, f.data.to_vec(), f.orig_len);
                let g = y.next_frame().unwrap().expect("as many frames");
                assert_eq!((g.ts_ns, g.data, g.orig_len), (ts, &data[..], orig), "{name} frame {n}");
                n += 1;
            }
            assert!(y.next_frame().unwrap().is_none());
            assert_eq!(n, 50);
        }
    }

    #[test]
    fn pcapng_default_resolution_is_microseconds() {
        // An interface without if_tsresol: raw units are microseconds.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("us.pcapng");
        let mut ng = PcapNgWriter::new(File::create(&p).unwrap()).unwrap();
        ng.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 65535,
            options: vec![],
        })
        .unwrap();
        let data = [0u8; 20];
        ng.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: std::time::Duration::from_nanos(1_500_000), // raw 1,500,000 units = 1.5 s
            original_len: 20,
            data: std::borrow::Cow::Borrowed(&data[..]),
            options: vec![],
        })
        .unwrap();
        drop(ng);
        let mut r = FrameReader::open(&p).unwrap();
        assert_eq!(r.next_frame().unwrap().unwrap().ts_ns, 1_500_000_000);
    }

    #[test]
    fn errors_name_file_frame_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.pcap");
        let mut w = FrameWriter::create(&p, LinkType::Ethernet, Format::PcapNs).unwrap();
        w.write(1, &[1; 100]).unwrap();
        w.write(2, &[2; 100]).unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 10]).unwrap();
        let mut r = FrameReader::open(&p).unwrap();
        assert!(r.next_frame().unwrap().is_some());
        let e = r.next_frame().unwrap_err().to_string();
        assert!(e.contains("t.pcap: frame 2 (byte 156): truncated frame data (90 of 100 bytes)"), "{e}");
        std::fs::write(&p, b"hello world, not a capture").unwrap();
        let e = FrameReader::open(&p).unwrap_err().to_string();
        assert!(e.contains("not a pcap, pcapng or ITCH BinaryFILE"), "{e}");
        let e = FrameReader::open(dir.path().join("missing.pcap")).unwrap_err().to_string();
        assert!(e.contains("missing.pcap: cannot open"), "{e}");
    }

    #[test]
    fn merge_orders_by_time_then_input() {
        let dir = tempfile::tempdir().unwrap();
        let mk = |name: &str, ts: &[u64]| {
            let p = dir.path().join(name);
            let mut w = FrameWriter::create(&p, LinkType::Ethernet, Format::PcapNs).unwrap();
            for &t in ts {
                w.write(t, &[t as u8]).unwrap();
            }
            w.finish().unwrap();
            FrameReader::open(&p).unwrap()
        };
        let mut m = MergedReader::new(vec![mk("a", &[1, 3, 5, 5]), mk("b", &[2, 3, 4, 9])]);
        let mut got = Vec::new();
        while let Some((i, f)) = m.next_frame().unwrap() {
            got.push((f.ts_ns, i));
        }
        assert_eq!(got, vec![(1, 0), (2, 1), (3, 0), (3, 1), (4, 1), (5, 0), (5, 0), (9, 1)]);
    }
}

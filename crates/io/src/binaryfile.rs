//! An ITCH 5.0 BinaryFILE (plain or gzip, as NASDAQ publishes its days) read as frames:
//! its messages packed, in order, into MoldUDP64 packets of up to [`FILE_PACKET_BYTES`],
//! numbered from 1 in session [`FILE_SESSION`], each in an Ethernet/IPv4/UDP frame stamped
//! with the ITCH timestamp of its first message (nanoseconds since midnight). The capture
//! reader ([`crate::pcap::FrameReader`]) hands these frames out for such a file, so `run`,
//! `arb`, `replay` and Python take NASDAQ's historical files where they take a capture of
//! one line. The file is read in chunks (a day's gzip is never held whole); a file that
//! breaks the format or ends inside a message is an error that gives the byte and the
//! message.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use tickplant_wire::itch50::{self, frame_at, Framing};
use tickplant_wire::moldudp64;

use crate::frame::{capture_magic, PcapError};

const CHUNK: usize = 4 << 20;

fn err(path: &Path, offset: Option<u64>, reason: impl Into<String>) -> PcapError {
    PcapError { path: path.to_path_buf(), frame: None, offset, reason: reason.into() }
}

/// Whether a file's first bytes start an ITCH BinaryFILE: gzip, or a first message whose
/// length prefix is its type's length or zero ([`file_framing`]). A capture never starts so.
pub fn is_binary_head(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b]) || file_framing(head).is_some()
}

/// How a BinaryFILE frames its messages, by its first bytes: a length prefix that is the
/// first message's length, or zeros before a message type (files whose prefixes are zero,
/// like the RITCH sample: lengths from the types, [`Framing::InferLength`]); `None` when
/// neither starts the file.
pub fn file_framing(head: &[u8]) -> Option<Framing> {
    let (&[a, b], Some(&t)) = (head.first_chunk::<2>()?, head.get(2)) else { return None };
    let len = itch50::message_len(t)?;
    match usize::from(u16::from_be_bytes([a, b])) {
        0 => Some(Framing::InferLength),
        n if n == len => Some(Framing::LengthPrefixed),
        _ => None,
    }
}

/// The framing to read a BinaryFILE with: `asked`, except that a file whose first message
/// has a zero length prefix (the RITCH sample's way) is read by the types' lengths when
/// true prefixes were asked for; every reader of a BinaryFILE takes such a file alike.
pub fn framing_for(head: &[u8], asked: Framing) -> Framing {
    match (asked, file_framing(head)) {
        (Framing::LengthPrefixed, Some(Framing::InferLength)) => Framing::InferLength,
        _ => asked,
    }
}

/// A BinaryFILE's bytes, decompressed when gzip (told by its first two bytes), and how its
/// messages are framed: lengths from the types with `infer`, else as its first message says
/// ([`file_framing`]: zero prefixes throughout, the RITCH sample's way, or true ones; a bad
/// prefix later is the reader's error at its byte). A gzip-compressed capture is refused.
pub fn open_stream(path: &Path, infer: bool) -> Result<(impl Read + Send, Framing), PcapError> {
    use std::io::BufRead;
    let file = File::open(path).map_err(|e| err(path, None, format!("cannot open: {e}")))?;
    let mut b = BufReader::with_capacity(1 << 16, file);
    let read_err = |e: std::io::Error| err(path, Some(0), format!("cannot read: {e}"));
    let gz = b.fill_buf().map_err(read_err)?.starts_with(&[0x1f, 0x8b]);
    let r: Box<dyn Read + Send> = if gz { Box::new(flate2::read::MultiGzDecoder::new(b)) } else { Box::new(b) };
    let mut r = BufReader::with_capacity(1 << 16, r);
    let head = r.fill_buf().map_err(read_err)?;
    if gz && capture_magic(head) {
        return Err(err(path, Some(0), GZIP_CAPTURE));
    }
    let framing = framing_for(head, if infer { Framing::InferLength } else { Framing::LengthPrefixed });
    Ok((r, framing))
}

/// A BinaryFILE being read as frames (see the module documentation).
pub struct BinaryFileReader {
    path: PathBuf,
    /// The frame made last, and its time.
    ts: u64,
    r: Box<dyn Read + Send>,
    buf: Vec<u8>,
    /// Unread bytes: `buf[start..end]`; `base` is the file offset of `buf[0]`.
    start: usize,
    end: usize,
    base: u64,
    eof: bool,
    framing: Framing,
    messages: u64,
    frame: Vec<u8>,
    frames: u64,
}

impl std::fmt::Debug for BinaryFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryFileReader").field("path", &self.path).field("frames", &self.frames).finish()
    }
}

/// What a gzip-compressed capture read as a BinaryFILE is told (the capture readers read
/// it as a capture: `FrameReader::open`).
pub const GZIP_CAPTURE: &str =
    "a gzip-compressed capture, not an ITCH BinaryFILE: read it as a capture (name it .pcap.gz or .pcapng.gz)";

/// The MoldUDP64 session of the packets a [`BinaryFileReader`] makes.
pub const FILE_SESSION: [u8; 10] = *b"BINARYFILE";
/// The most MoldUDP64 payload bytes a packet of a [`BinaryFileReader`] holds (a publisher's
/// packets fit an Ethernet MTU); a packet holds at least one message.
pub const FILE_PACKET_BYTES: usize = 1_400;

impl BinaryFileReader {
    /// Open `path` ([`open_stream`]).
    pub fn open(path: &Path) -> Result<BinaryFileReader, PcapError> {
        let (r, framing) = open_stream(path, false)?;
        Ok(BinaryFileReader {
            path: path.to_path_buf(),
            ts: 0,
            r: Box::new(r),
            buf: vec![0; CHUNK],
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            framing,
            messages: 0,
            frame: Vec::with_capacity(tickplant_wire::build::UDP_HEADERS_LEN + FILE_PACKET_BYTES + 64),
            frames: 0,
        })
    }

    /// Keep the unread bytes and read more after them (at the end of the file, `eof`).
    fn refill(&mut self) -> Result<(), PcapError> {
        self.buf.copy_within(self.start..self.end, 0);
        self.base += self.start as u64;
        self.end -= self.start;
        self.start = 0;
        while self.end < self.buf.len() {
            let at = self.base + self.end as u64;
            let n =
                self.r.read(&mut self.buf[self.end..]).map_err(|e| err(&self.path, Some(at), format!("read: {e}")))?;
            if n == 0 {
                self.eof = true;
                break;
            }
            self.end += n;
        }
        Ok(())
    }

    /// Make the next packet's frame; false at the end of the file.
    pub fn advance(&mut self) -> Result<bool, PcapError> {
        use tickplant_wire::build::{write_udp_headers, Flow, UDP_HEADERS_LEN};
        let head = UDP_HEADERS_LEN + moldudp64::HEADER_LEN;
        self.frame.clear();
        self.frame.resize(head, 0);
        let (first, mut count) = (self.messages + 1, 0u16);
        loop {
            match frame_at(&self.buf[self.start..self.end], self.framing) {
                Ok(Some((hdr, total))) => {
                    let m = &self.buf[self.start + hdr..self.start + total];
                    if count > 0 && self.frame.len() - UDP_HEADERS_LEN + 2 + total - hdr > FILE_PACKET_BYTES {
                        break;
                    }
                    if count == 0 {
                        // Every message holds its timestamp at bytes 5..11 (6 bytes, big-endian).
                        self.ts = m[5..11].iter().fold(0u64, |t, &b| t << 8 | u64::from(b));
                    }
                    moldudp64::push_message(&mut self.frame, m);
                    self.start += total;
                    self.messages += 1;
                    count += 1;
                }
                Ok(None) if !self.eof => self.refill()?,
                Ok(None) => {
                    if self.start < self.end {
                        let (n, left) = (self.messages + 1, self.end - self.start);
                        let reason = format!("the file ends inside message {n} ({left} bytes left over)");
                        return Err(err(&self.path, Some(self.base + self.start as u64), reason));
                    }
                    break;
                }
                Err(e) => {
                    let at = self.base + (self.start + e.offset()) as u64;
                    return Err(err(&self.path, Some(at), format!("message {}: {e}", self.messages + 1)));
                }
            }
        }
        if count == 0 {
            return Ok(false);
        }
        let payload = self.frame.len() - UDP_HEADERS_LEN;
        moldudp64::Repr { session: FILE_SESSION, sequence_number: first, message_count: count }
            .emit(&mut self.frame[UDP_HEADERS_LEN..head]);
        self.frames += 1;
        write_udp_headers(&Flow::default(), self.frames as u16, payload, &mut self.frame);
        Ok(true)
    }

    /// The frame made last by [`BinaryFileReader::advance`].
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Its time: the ITCH timestamp of its first message (ns since midnight).
    pub fn ts_ns(&self) -> u64 {
        self.ts
    }
}

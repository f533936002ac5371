//! Reading ITCH 5.0 from files: BinaryFILE (`.itch`, or gzip-compressed `.gz`), raw
//! message streams, and MoldUDP64 packets in pcap/pcapng captures.
//!
//! Files are read in large chunks and messages handed to a callback as slices of the chunk
//! (no copy per message). Errors name the file, the byte offset (and the frame, for
//! captures) and what was wrong; a length prefix that disagrees with the type's fixed
//! length is an error unless the framing is [`Framing::InferLength`]; a file whose first
//! length prefix is zero is read so ([`crate::binaryfile::framing_for`]).

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use tickplant_core::{PacketKind, Protocol, Sequencer, SequencerConfig};
use tickplant_wire::itch50::{self, frame_at, Framing};
use tickplant_wire::moldudp64;

use crate::pcap::{FrameReader, PcapError};

const CHUNK: usize = 4 << 20;

/// One message as read.
#[derive(Debug, Clone, Copy)]
pub struct ItchMessage<'a> {
    /// The message, type byte first.
    pub bytes: &'a [u8],
    /// Byte offset of the message in the file (for captures: in its frame).
    pub offset: u64,
    /// 1-based frame number for captures; 0 for files.
    pub frame: u64,
    /// Capture time (captures) or 0.
    pub ts_recv: u64,
    /// MoldUDP64 sequence number (captures), or the message's index in the file from 1.
    pub seq: u64,
    /// MoldUDP64 session (captures; zeros for files).
    pub session: [u8; 10],
    /// The last message of its packet (always true for files).
    pub last_in_packet: bool,
}

/// What a read went through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ItchReadStats {
    pub messages: u64,
    pub bytes: u64,
    /// Captures: frames read, and those that were not MoldUDP64 data (counted, skipped).
    pub frames: u64,
    pub other_frames: u64,
    /// Captures: frames the capture cut short (counted in `other_frames` where their
    /// packet could not be read; what they carried is missing).
    pub cut_short: crate::pcap::CutShort,
}

/// The kind of input a path names, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItchInput {
    BinaryFile,
    Gzip,
    Capture,
}

impl ItchInput {
    pub fn for_path(path: &Path) -> ItchInput {
        let name = path.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let capture = |n: &str| n.ends_with(".pcap") || n.ends_with(".pcapng") || n.ends_with(".cap");
        let plain = name.strip_suffix(".gz").or_else(|| name.strip_suffix(".zst")).unwrap_or(&name);
        if capture(plain) {
            // A capture, plain or compressed (`FrameReader` reads both).
            ItchInput::Capture
        } else if name.ends_with(".gz") {
            ItchInput::Gzip
        } else {
            ItchInput::BinaryFile
        }
    }
}

/// A whole ITCH file in memory: mapped (a plain BinaryFILE), or read and decompressed
/// (gzip), for the loops that walk every message of a day at once
/// ([`tickplant_core::itch::apply_all`]).
#[derive(Debug)]
pub enum WholeFile {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for WholeFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            WholeFile::Mapped(m) => m,
            WholeFile::Read(v) => v,
        }
    }
}

/// The file at `path` whole; `None` for a capture (its messages are in packets).
pub fn open_whole(path: &Path) -> Result<Option<WholeFile>, PcapError> {
    let kind = ItchInput::for_path(path);
    if kind == ItchInput::Capture {
        return Ok(None);
    }
    let file = File::open(path).map_err(|e| err(path, None, None, format!("cannot open: {e}")))?;
    if kind == ItchInput::Gzip {
        let mut v = Vec::new();
        flate2::read::MultiGzDecoder::new(BufReader::new(file))
            .read_to_end(&mut v)
            .map_err(|e| err(path, None, Some(v.len() as u64), format!("cannot decompress: {e}")))?;
        return Ok(Some(WholeFile::Read(v)));
    }
    if file.metadata().map(|m| m.is_file()).unwrap_or(false) {
        // SAFETY: the mapping is read-only and private; the one hazard is the file shrinking
        // while mapped (SIGBUS on a read past its new end), the contract of every mapping
        // reader, as for the captures' (`pcap`).
        #[allow(unsafe_code)]
        if let Ok(m) = unsafe { memmap2::Mmap::map(&file) } {
            let _ = m.advise(memmap2::Advice::Sequential);
            return Ok(Some(WholeFile::Mapped(m)));
        }
    }
    let mut v = Vec::new();
    let mut file = file;
    file.read_to_end(&mut v).map_err(|e| err(path, None, Some(v.len() as u64), format!("cannot read: {e}")))?;
    Ok(Some(WholeFile::Read(v)))
}

fn err(path: &Path, frame: Option<u64>, offset: Option<u64>, reason: impl Into<String>) -> PcapError {
    PcapError { path: path.to_path_buf(), frame, offset, reason: reason.into() }
}

/// Read every message of `path`, calling `f` for each. `f` may stop the read early by
/// returning `false`.
pub fn read_itch(
    path: &Path,
    framing: Framing,
    mut f: impl FnMut(&ItchMessage<'_>) -> bool,
) -> Result<ItchReadStats, PcapError> {
    match ItchInput::for_path(path) {
        ItchInput::Capture => read_capture(path, &mut f),
        kind => {
            let file = File::open(path).map_err(|e| err(path, None, None, format!("cannot open: {e}")))?;
            let reader: Box<dyn Read> = if kind == ItchInput::Gzip {
                Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file)))
            } else {
                Box::new(file)
            };
            read_stream(path, reader, framing, &mut f)
        }
    }
}

/// Read a BinaryFILE or raw stream from any reader (`path` only names it in errors).
pub fn read_stream(
    path: &Path,
    mut r: impl Read,
    framing: Framing,
    f: &mut dyn FnMut(&ItchMessage<'_>) -> bool,
) -> Result<ItchReadStats, PcapError> {
    let mut buf = vec![0u8; CHUNK];
    let (mut start, mut end, mut base) = (0usize, 0usize, 0u64);
    let mut eof = false;
    let mut st = ItchReadStats::default();
    let mut framing = framing;
    let mut hint = "";
    loop {
        if base == 0 && start == 0 && end > 0 {
            // A capture (compressed, or named as a BinaryFILE) is not read as one.
            if crate::frame::capture_magic(&buf[..end]) {
                return Err(err(path, None, Some(0), CAPTURE_AS_FILE.to_string()));
            }
            framing = crate::binaryfile::framing_for(&buf[..end], framing);
            if framing == Framing::LengthPrefixed {
                hint = " (if the file's length prefixes are not to be trusted, use --infer-length)";
            }
        }
        while start < end {
            match frame_at(&buf[start..end], framing) {
                Ok(Some((hdr, total))) => {
                    st.messages += 1;
                    st.bytes += total as u64;
                    let m = ItchMessage {
                        bytes: &buf[start + hdr..start + total],
                        offset: base + (start + hdr) as u64,
                        frame: 0,
                        ts_recv: 0,
                        seq: st.messages,
                        session: [0; 10],
                        last_in_packet: true,
                    };
                    start += total;
                    if !f(&m) {
                        return Ok(st);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(err(
                        path,
                        None,
                        Some(base + (start + e.offset()) as u64),
                        format!("message {}: {e}{hint}", st.messages + 1),
                    ))
                }
            }
        }
        if eof {
            if start < end {
                return Err(err(
                    path,
                    None,
                    Some(base + start as u64),
                    format!("the file ends inside message {} ({} bytes left over)", st.messages + 1, end - start),
                ));
            }
            return Ok(st);
        }
        buf.copy_within(start..end, 0);
        base += start as u64;
        end -= start;
        start = 0;
        while end < buf.len() {
            let n =
                r.read(&mut buf[end..]).map_err(|e| err(path, None, Some(base + end as u64), format!("read: {e}")))?;
            if n == 0 {
                eof = true;
                break;
            }
            end += n;
        }
    }
}

/// What a capture read as a BinaryFILE (by its name) is told.
const CAPTURE_AS_FILE: &str =
    "a pcap or pcapng capture, read as a BinaryFILE by its name: name it .pcap or .pcapng (.pcap.gz or .pcap.zst compressed)";

fn read_capture(path: &Path, f: &mut dyn FnMut(&ItchMessage<'_>) -> bool) -> Result<ItchReadStats, PcapError> {
    let mut rd = FrameReader::open(path)?;
    let link = rd.link_type();
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).expect("preset");
    let mut st = ItchReadStats::default();
    while let Some(fr) = rd.next_frame()? {
        st.frames += 1;
        let frame_no = st.frames;
        let info = match seq.classify(link, fr.data) {
            Ok(i) if i.kind == PacketKind::Data => i,
            _ => {
                st.other_frames += 1;
                continue;
            }
        };
        let at = usize::from(info.payload_offset);
        let payload = &fr.data[at..at + usize::from(info.payload_len)];
        let p = moldudp64::Packet::new_checked(payload)
            .map_err(|e| err(path, Some(frame_no), Some(e.at(at).offset() as u64), e.to_string()))?;
        let n = u64::from(p.message_count());
        for (k, m) in p.messages().enumerate() {
            let (off, bytes) =
                m.map_err(|e| err(path, Some(frame_no), Some((at + e.offset()) as u64), e.to_string()))?;
            let off = at + off;
            if let Err(e) = itch50::parse_exact(bytes) {
                return Err(err(
                    path,
                    Some(frame_no),
                    Some((off + e.offset()) as u64),
                    format!("message {}: {e}", k + 1),
                ));
            }
            st.messages += 1;
            st.bytes += bytes.len() as u64;
            let m = ItchMessage {
                bytes,
                offset: off as u64,
                frame: frame_no,
                ts_recv: fr.ts_ns,
                seq: info.seq + k as u64,
                session: info.session,
                last_in_packet: k as u64 + 1 == n,
            };
            if !f(&m) {
                st.cut_short = rd.cut_short();
                return Ok(st);
            }
        }
    }
    st.cut_short = rd.cut_short();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::itch50::{push_binary_file, Message, OrderDelete};

    fn file(n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            push_binary_file(
                &mut v,
                &Message::OrderDelete(OrderDelete { order_reference_number: i, ..Default::default() }),
            );
        }
        v
    }

    #[test]
    fn chunks_do_not_cut_messages() {
        // More than one chunk, with messages straddling chunk boundaries.
        let data = file(2 * CHUNK as u64 / 21 + 5);
        let mut ids = Vec::new();
        let st = read_stream(Path::new("x.itch"), &data[..], Framing::LengthPrefixed, &mut |m| {
            let Message::OrderDelete(d) = Message::parse(m.bytes).unwrap() else { panic!() };
            assert_eq!(m.offset, d.order_reference_number * 21 + 2);
            ids.push(d.order_reference_number);
            true
        })
        .unwrap();
        assert_eq!(st.messages, ids.len() as u64);
        assert!(ids.iter().enumerate().all(|(i, &id)| i as u64 == id));
    }

    #[test]
    fn errors_name_the_byte() {
        let mut data = file(3);
        data[21] = 0; // second prefix low byte: length 0
        data[22] = 0;
        let e = read_stream(Path::new("x.itch"), &data[..], Framing::LengthPrefixed, &mut |_| true).unwrap_err();
        assert_eq!(e.offset, Some(21));
        assert!(e.to_string().contains("--infer-length"), "{e}");
        assert_eq!(read_stream(Path::new("x"), &data[..], Framing::InferLength, &mut |_| true).unwrap().messages, 3);
        let cut = &file(3)[..60];
        let e = read_stream(Path::new("x.itch"), cut, Framing::LengthPrefixed, &mut |_| true).unwrap_err();
        assert!(e.to_string().contains("ends inside message 3"), "{e}");
    }
}

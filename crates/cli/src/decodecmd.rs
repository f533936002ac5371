//! `tickplant decode --feed F CAPTURE`: one JSON line per message, every field under the
//! specification's name (snake_case), values as sent. Feeds so far: `nyse-xdp` (NYSE
//! Integrated Feed, XDP v2.1 layout; `tickplant_wire::xdp_integrated`). ITCH 5.0 has
//! `tickplant itch decode`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Map, Value as Json};
use tickplant_core::seq::udp_payload_range;
use tickplant_io::FrameReader;
use tickplant_wire::xdp;
use tickplant_wire::xdp_integrated::{self, Value};

#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// The feed's layout: nyse-xdp (NYSE Integrated Feed, XDP v2.1).
    #[arg(long, value_name = "nyse-xdp")]
    pub feed: String,
    /// The capture (pcap or pcapng; UDP datagrams, one XDP packet each).
    pub capture: PathBuf,
    /// Stop after this many messages.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Only these message types (numbers, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub types: Vec<u16>,
}

/// Decode, writing the lines to `out`; returns the messages written.
pub fn decode(a: &DecodeArgs, out: &mut impl Write) -> Result<u64> {
    if a.feed != "nyse-xdp" {
        bail!("--feed {}: this command decodes nyse-xdp so far (ITCH 5.0: `tickplant itch decode`)", a.feed);
    }
    let mut r = FrameReader::open(&a.capture)?;
    let link = r.link_type();
    let mut written = 0u64;
    let mut frame = 0u64;
    let name = a.capture.display().to_string();
    while let Some(f) = r.next_frame()? {
        frame += 1;
        let Ok(range) = udp_payload_range(link, f.data) else { continue };
        let payload = &f.data[range];
        let p = xdp::Packet::new_checked(payload).with_context(|| format!("{name}: frame {frame}"))?;
        let packet = json!({
            "packet_size": p.pkt_size(),
            "delivery_flag": p.delivery_flag(),
            "message_count": p.number_msgs(),
            "sequence_number": p.seq_num(),
            "timestamp": p.send_time(),
            "nanoseconds": p.send_time_ns(),
        });
        for m in p.messages() {
            let (at, m) = m.with_context(|| format!("{name}: frame {frame}"))?;
            if !a.types.is_empty() && !a.types.contains(&m.msg_type) {
                continue;
            }
            let line = match xdp_integrated::fields(&m) {
                Ok((l, fields)) => {
                    let mut obj = Map::new();
                    for (k, v) in fields {
                        let j = match v {
                            Value::Uint(x) => Json::from(x),
                            other => Json::from(other.to_string()),
                        };
                        obj.insert(k.to_string(), j);
                    }
                    json!({"frame": frame, "packet": packet, "message": l.name, "type": m.msg_type, "fields": obj})
                }
                // Nothing dropped without a word: the message's bytes and why.
                Err(e) => json!({
                    "frame": frame, "packet": packet, "message": Json::Null, "type": m.msg_type,
                    "error": format!("at byte {at} of the packet: {e}"),
                    "bytes": m.bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                }),
            };
            writeln!(out, "{line}")?;
            written += 1;
            if a.limit.is_some_and(|l| written >= l) {
                return Ok(written);
            }
        }
    }
    Ok(written)
}

//! The parse + normalize + full-depth book loop of the ITCH benchmark, shared with
//! `examples/itch_book_icount.rs` (instruction counts under callgrind).

use std::hint::black_box;

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::itch;
use tickplant_wire::itch50::{Framing, Stream};

/// Messages per batch (a packet in the pipeline).
const BATCH: usize = 16;

/// Parse, normalize and apply every message of a BinaryFILE day with `live` orders left at
/// its end, as the pipeline does it: per batch of messages, first ask for every order they
/// name, then decode and apply each message in one dispatch on its type. Returns the
/// messages applied.
pub fn parse_and_book(file: &[u8], live: usize) -> u64 {
    let mut books =
        Books::new(BookConfig { max_orders: (live * 2).max(1 << 16), max_instruments: 1 << 16, ..Default::default() });
    let mut n = 0u64;
    let mut msgs: Vec<&[u8]> = Vec::with_capacity(BATCH);
    // Each message is decoded straight into its place, as the pipeline does it.
    let mut events = vec![tickplant_core::event::Event::default(); BATCH];
    let mut stream = Stream::new(file, Framing::LengthPrefixed);
    loop {
        msgs.clear();
        msgs.extend(stream.by_ref().take(BATCH).map(|r| r.expect("valid").1));
        if msgs.is_empty() {
            break;
        }
        for m in &msgs {
            books.prefetch_order(itch::order_hint(m));
        }
        for (m, e) in msgs.iter().zip(&mut events) {
            let ok = itch::decode_into(m, 0, n, 0, e, |e| {
                books.apply(e);
            });
            assert!(ok, "valid");
            n += 1;
        }
        black_box(&events[..msgs.len()]);
    }
    assert_eq!(books.live_orders(), live);
    n
}

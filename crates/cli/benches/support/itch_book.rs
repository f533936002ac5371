//! The parse + normalize + full-depth book loop of the ITCH benchmark, shared with
//! `examples/itch_book_icount.rs` (instruction counts under callgrind).

use std::hint::black_box;

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::itch;
use tickplant_wire::itch50::{Framing, Stream};

/// Parse, normalize and apply every message of a BinaryFILE day with `live` orders left at
/// its end, as every shell does it (`tickplant_core::itch::apply_all`: the order each
/// message names asked for some messages ahead, decoded and applied in one dispatch on its
/// type), the order table asked to be backed by huge pages. Returns the messages applied.
pub fn parse_and_book(file: &[u8], live: usize) -> u64 {
    let cfg = BookConfig { max_orders: (live * 2).max(1 << 16), max_instruments: 1 << 16, ..Default::default() };
    let mut books = Books::with_table_advice(cfg, tickplant_io::huge_pages);
    let stream = Stream::new(file, Framing::LengthPrefixed).map(|r| r.expect("valid").1);
    let n = itch::apply_all(stream, &mut books, None, |_, e, _| {
        black_box(e);
        true
    })
    .expect("valid");
    assert_eq!(books.live_orders(), live);
    n
}

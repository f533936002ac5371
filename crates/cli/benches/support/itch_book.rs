//! The parse + normalize + full-depth book loop of the ITCH benchmark, shared with
//! `examples/itch_book_icount.rs` (instruction counts under callgrind).

use std::hint::black_box;

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::itch;
use tickplant_wire::itch50::{Framing, Stream};

/// How many messages ahead the order a message names is asked for: far enough for the
/// table's cache line to arrive before the message is applied, near enough that it is
/// still in the cache then. Eight beat the 16-message batches asked for all at once that
/// came before (see docs/feed-handler.md).
const AHEAD: usize = 8;

/// Parse, normalize and apply every message of a BinaryFILE day with `live` orders left at
/// its end, as the pipeline does it: the order table asked to be backed by huge pages, and
/// the order each message names asked for `AHEAD` messages before the message is decoded
/// and applied in one dispatch on its type. Returns the messages applied.
pub fn parse_and_book(file: &[u8], live: usize) -> u64 {
    let cfg = BookConfig { max_orders: (live * 2).max(1 << 16), max_instruments: 1 << 16, ..Default::default() };
    let mut books = Books::with_table_advice(cfg, tickplant_io::huge_pages);
    let mut n = 0u64;
    // Each message is decoded straight into its place, as the pipeline does it.
    let mut event = tickplant_core::event::Event::default();
    let mut stream = Stream::new(file, Framing::LengthPrefixed).map(|r| r.expect("valid").1);
    // The next `AHEAD` messages, their orders asked for; `pending` of them are real.
    let mut ahead: [&[u8]; AHEAD] = [&[]; AHEAD];
    let mut pending = 0;
    for slot in ahead.iter_mut() {
        let Some(m) = stream.next() else { break };
        books.prefetch_order(itch::order_hint(m));
        *slot = m;
        pending += 1;
    }
    let mut k = 0;
    while pending > 0 {
        let m = ahead[k];
        match stream.next() {
            Some(next) => {
                books.prefetch_order(itch::order_hint(next));
                ahead[k] = next;
            }
            None => pending -= 1,
        }
        k = (k + 1) % AHEAD;
        let ok = itch::decode_into(m, 0, n, 0, &mut event, |e| {
            books.apply(e);
        });
        assert!(ok, "valid");
        black_box(&event);
        n += 1;
    }
    assert_eq!(books.live_orders(), live);
    n
}

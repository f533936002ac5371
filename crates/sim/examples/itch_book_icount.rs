//! Instruction counts of parse + normalize + full-depth book (the second ITCH target of
//! `crates/cli/benches/itch.rs`, the same loop), for weighing a change where wall time is
//! too noisy to tell:
//!
//! ```sh
//! cargo build --release -p tickplant-sim --example itch_book_icount
//! valgrind --tool=callgrind target/release/examples/itch_book_icount 200000 1
//! valgrind --tool=callgrind target/release/examples/itch_book_icount 200000 3
//! ```
//! The difference of the two totals over 2 x 200,000 is the instructions per message
//! (arguments: messages in the day, passes over it).

use std::hint::black_box;

use tickplant_core::book::{BookConfig, Books};
use tickplant_core::itch;
use tickplant_sim::{generate_itch, ItchGenConfig};
use tickplant_wire::itch50::{Framing, Stream};

const BATCH: usize = 16;

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let passes: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(1);
    let day = generate_itch(&ItchGenConfig { seed: 7, symbols: 200, messages, target_live: 0 });
    let file = day.to_binary_file();
    let live = day.live_orders();
    drop(day);
    let mut total = 0u64;
    for _ in 0..passes {
        let mut books = Books::new(BookConfig {
            max_orders: (live * 2).max(1 << 16),
            max_instruments: 1 << 16,
            ..Default::default()
        });
        let mut n = 0u64;
        let mut msgs: Vec<&[u8]> = Vec::with_capacity(BATCH);
        let mut events = Vec::with_capacity(BATCH);
        let mut stream = Stream::new(&file, Framing::LengthPrefixed);
        loop {
            msgs.clear();
            msgs.extend(stream.by_ref().take(BATCH).map(|r| r.expect("valid").1));
            if msgs.is_empty() {
                break;
            }
            for m in &msgs {
                books.prefetch_order(itch::order_hint(m));
            }
            events.clear();
            for m in &msgs {
                let e = itch::decode_with(m, 0, n, 0, |e| {
                    books.apply(e);
                });
                events.push(e.expect("valid"));
                n += 1;
            }
            black_box(&events);
        }
        assert_eq!(books.live_orders(), live);
        total += n;
    }
    println!("{total} messages through parse + book");
}

//! Instruction counts and wall time of the batch parse (the first ITCH target of
//! `benches/itch.rs`, the same loop), for weighing a change to `itch50::Batch`:
//!
//! ```sh
//! cargo build --release -p tickplant --example itch_parse_icount
//! target/release/examples/itch_parse_icount 2000000 5         # best of 5 passes, ns/message
//! valgrind --tool=callgrind target/release/examples/itch_parse_icount 200000 1
//! valgrind --tool=callgrind target/release/examples/itch_parse_icount 200000 3
//! ```
//! The difference of the two totals over 2 x 200,000 is the instructions per message
//! (arguments: messages in the day, passes over it).

use std::hint::black_box;
use std::time::Instant;

use tickplant_sim::{generate_itch, ItchGenConfig};
use tickplant_wire::itch50::{Batch, Framing};

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let passes: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(5);
    let day = generate_itch(&ItchGenConfig { seed: 7, symbols: 200, messages, target_live: 0 });
    let file = day.to_binary_file();
    drop(day);
    let mut batch = Batch::new();
    let mut best = f64::MAX;
    for _ in 0..passes {
        let t = Instant::now();
        let (mut pos, mut n) = (0, 0u64);
        while pos < file.len() {
            pos = batch.parse(&file, pos, Framing::LengthPrefixed).expect("the day parses");
            black_box(batch.messages());
            n += batch.messages().len() as u64;
        }
        assert_eq!(n, messages);
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / n as f64);
    }
    println!("{messages} messages, best of {passes} passes: {best:.2} ns/message");
}

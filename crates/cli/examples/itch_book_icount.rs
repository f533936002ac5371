//! Instruction counts of parse + normalize + full-depth book (the second ITCH target of
//! `benches/itch.rs`, the same loop), for weighing a change where wall time is too noisy
//! to tell:
//!
//! ```sh
//! cargo build --release -p tickplant --example itch_book_icount
//! valgrind --tool=callgrind target/release/examples/itch_book_icount 200000 1
//! valgrind --tool=callgrind target/release/examples/itch_book_icount 200000 3
//! ```
//! The difference of the two totals over 2 x 200,000 is the instructions per message
//! (arguments: messages in the day, passes over it); `--toggle-collect='*measured*'`
//! counts the loop alone. Run without valgrind, it prints the best pass's time per message
//! (`itch_book_icount 20000000 3` for the benchmark's day).

use tickplant_sim::{generate_itch, ItchGenConfig};

#[path = "../benches/support/itch_book.rs"]
mod itch_book;

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args.next().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let passes: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(1);
    let day = generate_itch(&ItchGenConfig { seed: 7, symbols: 200, messages, target_live: 0 });
    let file = day.to_binary_file();
    let live = day.live_orders();
    drop(day);
    let mut best = f64::MAX;
    let mut total = 0;
    for _ in 0..passes {
        let t = std::time::Instant::now();
        let n = measured(&file, live);
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / n as f64);
        total += n;
    }
    println!("{total} messages through parse + book, best pass {best:.2} ns/message");
}

/// The measured loop, out of line so that `--toggle-collect='*measured*'` counts it alone
/// (without the day's generation).
#[inline(never)]
fn measured(file: &[u8], live: usize) -> u64 {
    itch_book::parse_and_book(file, live)
}

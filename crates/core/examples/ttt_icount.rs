//! Instruction counts of the in-memory tick-to-trade path, for weighing a change where
//! wall time is too noisy to tell:
//!
//! ```sh
//! cargo build --release -p tickplant-core --example ttt_icount
//! valgrind --tool=callgrind target/release/examples/ttt_icount 1 10000
//! valgrind --tool=callgrind target/release/examples/ttt_icount 1 20000
//! ```
//! The difference of the two totals over 10,000 is the instructions per datagram
//! (arguments: entries per datagram, datagrams).

use std::hint::black_box;

#[path = "../benches/support/ttt.rs"]
mod support;

fn main() {
    let mut args = std::env::args().skip(1);
    let entries: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(1);
    let iters: usize = args.next().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let (mut f, msgs) = support::setup(entries);
    let mut seq = 1u64;
    let mut now = 1_795_271_400_000_000_000u64;
    let mut orders = 0;
    for i in 0..iters {
        now += support::DATAGRAM_GAP_NS;
        let m = &msgs[i % msgs.len()];
        orders += f
            .on_market_data(now, black_box(m), &mut seq, &mut |_: u64, b: &[u8]| {
                black_box(b);
            })
            .expect("valid");
        assert_eq!(orders, i + 1, "one order per datagram (no risk check refuses)");
    }
    println!("{iters} datagrams of {entries} entries: {orders} orders");
}

//! The tick-to-trade benchmark's set-up, shared with `examples/ttt_icount.rs` (instruction
//! counts under callgrind): the engine and 1,024 market-data datagrams.

use tickplant_core::risk::RiskLimits;
use tickplant_core::ttt::{Fttc, FttcConfig};
use tickplant_wire::fix::Writer;

/// A 35=X message with `entries` entries; the last one's price is a whole dollar.
fn md(seq: u64, symbols: &[String], entries: usize) -> Vec<u8> {
    let mut w = Writer::new("FIX.4.4", "X");
    w.field(49, b"MDSIM").field(56, b"TICKPLANT").field_uint(34, seq).field(52, b"20261121-14:30:00.123");
    w.field_uint(268, entries as u64);
    for k in 0..entries {
        let s = &symbols[(seq as usize * 7 + k * 13) % symbols.len()];
        let px = if k + 1 == entries {
            format!("{}.000", 100 + seq % 50)
        } else {
            format!("{}.{:03}", 100 + seq % 50, 1 + seq % 999)
        };
        w.field(279, b"0").field(269, [b"0", b"1", b"2"][k % 3]).field(55, s.as_bytes());
        w.field(270, px.as_bytes()).field(271, b"100");
    }
    w.finish().to_vec()
}

/// Every risk check on, with limits the run stays inside (each order is checked against
/// all of them, and none refuses): at [`DATAGRAM_GAP_NS`] a symbol sees about 100 orders
/// a second, and no order is ever filled, so open orders and positions only grow.
pub const LIMITS: RiskLimits = RiskLimits {
    max_order_qty: 1_000,
    max_notional: 1_000_000,
    max_open_orders: 1_000_000_000_000,
    max_orders_per_second: 1_000,
    max_position: 1_000_000_000_000,
    collar_bps: 500,
};

/// Time between datagrams: 10,000 a second.
pub const DATAGRAM_GAP_NS: u64 = 100_000;

/// The engine with its 100 symbols' templates built, and 1,024 datagrams of `entries`
/// entries each (each datagram's last price is a whole dollar: one order per datagram).
pub fn setup(entries: usize) -> (Fttc, Vec<Vec<u8>>) {
    let symbols: Vec<String> = (1..=100).map(|i| format!("S{i:04}")).collect();
    let msgs: Vec<Vec<u8>> = (1..=1024).map(|s| md(s, &symbols, entries)).collect();
    let mut f = Fttc::new(FttcConfig {
        begin_string: "FIX.4.4".into(),
        sender: "TICKPLANT".into(),
        target: "EXCH".into(),
        qty: 100,
        limits: LIMITS,
        order_fields: Vec::new(),
    });
    for s in &symbols {
        f.prepare(s.as_bytes());
    }
    (f, msgs)
}

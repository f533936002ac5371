//! JSON text of the handler's values without a serializer on the way: prices as decimals
//! (`12.345`, 1e-9 units), strings escaped, a book's levels. `tickplant itch`, the final
//! books of `tickplant run` and the control socket's `snapshot` write the same shapes.

use std::fmt::Write as _;

use tickplant_core::event::{Side, PRICE_SCALE};

/// `v` with `decimals` implied decimal places, trailing zeros dropped (`1902500`, 4:
/// `190.25`).
pub fn write_decimal(out: &mut String, v: u64, decimals: u8) {
    let scale = 10u64.pow(u32::from(decimals));
    let (i, f) = (v / scale, v % scale);
    let _ = write!(out, "{i}");
    if f != 0 {
        let s = format!("{f:0w$}", w = usize::from(decimals));
        out.push('.');
        out.push_str(s.trim_end_matches('0'));
    }
}

/// A JSON string.
pub fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A price in 1e-9 units as a JSON number.
pub fn price_json(out: &mut String, p: i64) {
    if p < 0 {
        out.push('-');
    }
    write_decimal(out, p.unsigned_abs(), 9);
    debug_assert_eq!(PRICE_SCALE, 1_000_000_000);
}

/// One book as `{"symbol":..,"bids":[[price,shares,orders],..],"asks":[..]}`.
pub fn book_json(symbol: &str, b: &tickplant_core::book::Book, depth: usize, out: &mut String) {
    out.push_str("{\"symbol\":");
    json_str(out, symbol);
    for (name, side) in [("bids", Side::Bid), ("asks", Side::Ask)] {
        let _ = write!(out, ",\"{name}\":[");
        for (i, l) in b.depth(side, depth).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            price_json(out, l.price);
            let _ = write!(out, ",{},{}]", l.shares, l.orders);
        }
        out.push(']');
    }
    if b.is_stale() {
        out.push_str(",\"stale\":true");
    }
    out.push('}');
}

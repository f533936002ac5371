//! NYSE Integrated Feed messages in the XDP v2.1 layout: each message type's fields as a
//! table (name, width, kind), read from a message of an XDP packet ([`crate::xdp`]).
//!
//! All integers are little-endian and unsigned. Text fields are ASCII, NUL-padded (a value
//! ends at its first NUL); reserved fields are kept as bytes. Field names are the
//! specification's, in snake_case (the Open Markets Initiative's dissector's labels, which
//! the real captures in `../shared/data/nyse` are checked against).
//!
//! Every message type of the v2.1 layout has its table: the 25 of the specification, from
//! the sequence number reset (1) to the stock summary (223), the request/response messages
//! of the retransmission service (10 to 15) included. Eight of them are checked field for
//! field against real captures (`crates/cli/tests/nyse.rs`); the other seventeen follow the
//! specification's tables (as the Open Markets Initiative's dissector lays them out), with
//! no capture to check them against yet.

use crate::xdp::Message;
use crate::{Error, Result};

/// How a field is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    U8,
    U16,
    U32,
    U64,
    /// ASCII of this many bytes, NUL-padded.
    Text(u8),
    /// Reserved bytes.
    Reserved(u8),
}

impl Kind {
    pub const fn width(self) -> usize {
        match self {
            Kind::U8 => 1,
            Kind::U16 => 2,
            Kind::U32 => 4,
            Kind::U64 => 8,
            Kind::Text(n) | Kind::Reserved(n) => n as usize,
        }
    }
}

/// One field of a message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
}

/// A message type's layout: its number, its name and its fields after the 4-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub msg_type: u16,
    pub name: &'static str,
    pub fields: &'static [Field],
}

impl Layout {
    /// Bytes of the fields (the message less its 4-byte header).
    pub fn body_len(&self) -> usize {
        self.fields.iter().map(|f| f.kind.width()).sum()
    }
}

const fn f(name: &'static str, kind: Kind) -> Field {
    Field { name, kind }
}

use Kind::{Reserved, Text, U16, U32, U64, U8};

/// Every message type of the v2.1 layout, by number.
pub const LAYOUTS: &[Layout] = &[
    Layout {
        msg_type: 1,
        name: "sequence_number_reset_message",
        fields: &[f("source_time", U32), f("source_time_ns", U32), f("product_id", U8), f("channel_id", U8)],
    },
    Layout {
        msg_type: 2,
        name: "source_time_reference_message",
        fields: &[f("id", U32), f("symbol_seq_num", U32), f("source_time", U32)],
    },
    Layout {
        msg_type: 3,
        name: "symbol_index_mapping_message",
        fields: &[
            f("symbol_index", U32),
            f("symbol", Text(11)),
            f("reserved_1", Reserved(1)),
            f("market_id", U16),
            f("system_id", U8),
            f("exchange_code", Text(1)),
            f("price_scale_code", U8),
            f("security_type", Text(1)),
            f("lot_size", U16),
            f("prev_close_price", U32),
            f("prev_close_volume", U32),
            f("price_resolution", U8),
            f("round_lot", Text(1)),
            f("mpv", U16),
            f("unit_of_trade", U16),
            f("reserved_2", Reserved(2)),
        ],
    },
    Layout {
        msg_type: 34,
        name: "security_status_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("security_status", Text(1)),
            f("halt_condition", Text(1)),
            f("reserved_4", Reserved(4)),
            f("price_1", U32),
            f("price_2", U32),
            f("ssr_triggering_exchange_id", Text(1)),
            f("ssr_triggering_volume", U32),
            f("time", U32),
            f("ssr_state", Text(1)),
            f("market_state", Text(1)),
            f("session_state", Text(1)),
        ],
    },
    Layout {
        msg_type: 100,
        name: "add_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("side", Text(1)),
            f("firm_id", Text(5)),
            f("num_parity_splits", U8),
        ],
    },
    Layout {
        msg_type: 103,
        name: "order_execution_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("trade_id", U32),
            f("price", U32),
            f("volume", U32),
            f("printable_flag", U8),
            f("num_parity_splits", U8),
            f("db_exec_id", U32),
        ],
    },
    Layout {
        msg_type: 104,
        name: "replace_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("new_order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("prev_price_parity_splits", U8),
            f("new_price_parity_splits", U8),
        ],
    },
    Layout {
        msg_type: 105,
        name: "imbalance_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("reference_price", U32),
            f("paired_qty", U32),
            f("total_imbalance_qty", U32),
            f("market_imbalance_qty", U32),
            f("auction_time", U16),
            f("auction_type", Text(1)),
            f("imbalance_side", Text(1)),
            f("continuous_book_clearing_price", U32),
            f("closing_only_clearing_price", U32),
            f("ssr_filing_price", U32),
            f("indicative_match_price", U32),
            f("upper_collar", U32),
            f("lower_collar", U32),
            f("auction_status", U8),
            f("freeze_status", U8),
            f("num_extensions", U8),
        ],
    },
    Layout {
        msg_type: 10,
        name: "retransmission_request_message",
        fields: &[
            f("begin_seq_num", U32),
            f("end_seq_num", U32),
            f("source_id", Text(10)),
            f("product_id", U8),
            f("channel_id", U8),
        ],
    },
    Layout {
        msg_type: 11,
        name: "request_response_message",
        fields: &[
            f("request_seq_num", U32),
            f("begin_seq_num", U32),
            f("end_seq_num", U32),
            f("source_id", Text(10)),
            f("product_id", U8),
            f("channel_id", U8),
            f("status", Text(1)),
        ],
    },
    Layout { msg_type: 12, name: "heartbeat_response_message", fields: &[f("source_id", Text(10))] },
    Layout {
        msg_type: 13,
        name: "symbol_index_mapping_request_message",
        fields: &[
            f("symbol_index", U32),
            f("source_id", Text(10)),
            f("product_id", U8),
            f("channel_id", U8),
            f("retransmit_method", U8),
        ],
    },
    Layout {
        msg_type: 15,
        name: "refresh_request_message",
        fields: &[f("symbol_index", U32), f("source_id", Text(10)), f("product_id", U8), f("channel_id", U8)],
    },
    Layout {
        msg_type: 31,
        name: "message_unavailable_message",
        fields: &[f("begin_seq_num", U32), f("end_seq_num", U32), f("product_id", U8), f("channel_id", U8)],
    },
    Layout {
        msg_type: 32,
        name: "symbol_clear_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("next_source_seq_num", U32),
        ],
    },
    Layout {
        msg_type: 35,
        name: "refresh_header_message",
        fields: &[
            f("current_refresh_pkt", U16),
            f("total_refresh_pkts", U16),
            f("last_seq_num", U32),
            f("last_symbol_seq_num", U32),
        ],
    },
    Layout {
        msg_type: 101,
        name: "modify_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("position_change", U8),
            f("prev_price_parity_splits", U8),
            f("new_price_parity_splits", U8),
        ],
    },
    Layout {
        msg_type: 102,
        name: "delete_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("num_parity_splits", U8),
        ],
    },
    Layout {
        msg_type: 106,
        name: "add_order_refresh_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("side", Text(1)),
            f("firm_id", Text(5)),
            f("num_parity_splits", U8),
        ],
    },
    Layout {
        msg_type: 110,
        name: "non_displayed_trade_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("trade_id", U32),
            f("price", U32),
            f("volume", U32),
            f("printable_flag", U8),
            f("db_exec_id", U32),
        ],
    },
    Layout {
        msg_type: 111,
        name: "cross_trade_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("cross_id", U32),
            f("price", U32),
            f("volume", U32),
            f("cross_type", Text(1)),
        ],
    },
    Layout {
        msg_type: 112,
        name: "trade_cancel_message",
        fields: &[f("source_time_ns", U32), f("symbol_index", U32), f("symbol_seq_num", U32), f("trade_id", U32)],
    },
    Layout {
        msg_type: 113,
        name: "cross_correction_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("cross_id", U32),
            f("volume", U32),
        ],
    },
    Layout {
        msg_type: 114,
        name: "retail_price_improvement_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("rpi_indicator", Text(1)),
        ],
    },
    Layout {
        msg_type: 223,
        name: "stock_summary_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("high_price", U32),
            f("low_price", U32),
            f("open", U32),
            f("close", U32),
            f("total_volume", U32),
        ],
    },
];

/// The layout of a message type, if this module knows it.
pub fn layout(msg_type: u16) -> Option<&'static Layout> {
    LAYOUTS.iter().find(|l| l.msg_type == msg_type)
}

/// The Pillar Integrated Feed v2.5 layouts that differ from v2.1's; every other type is as
/// in [`LAYOUTS`]. The parity splits and the exchange's execution id gave way to reserved
/// bytes, the modify's side and the trade conditions; the imbalance gained the auction
/// interest clearing price (where the closing-only clearing price was), the unpaired
/// quantity and side, and the significant imbalance flag. The order of every field a feed
/// handler reads (ids, prices, volumes, sides) is unchanged, so one decoder serves both.
/// The non-displayed trade carries four trade conditions; the Open Markets Initiative's
/// dissector for v2.5.a lists the second twice (five bytes), which no capture settles yet.
pub const PILLAR_CHANGES: &[Layout] = &[
    Layout {
        msg_type: 100,
        name: "add_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("side", Text(1)),
            f("firm_id", Text(5)),
            f("reserved_11", Reserved(1)),
        ],
    },
    Layout {
        msg_type: 101,
        name: "modify_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("position_change", U8),
            f("side", Text(1)),
            f("reserved_11", Reserved(1)),
        ],
    },
    Layout {
        msg_type: 102,
        name: "delete_order_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("reserved_11", Reserved(1)),
        ],
    },
    Layout {
        msg_type: 103,
        name: "order_execution_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("trade_id", U32),
            f("price", U32),
            f("volume", U32),
            f("printable_flag", U8),
            f("reserved_11", Reserved(1)),
            f("trade_cond_1", Text(1)),
            f("trade_cond_2", Text(1)),
            f("trade_cond_3", Text(1)),
            f("trade_cond_4", Text(1)),
        ],
    },
    Layout {
        msg_type: 105,
        name: "imbalance_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("reference_price", U32),
            f("paired_qty", U32),
            f("total_imbalance_qty", U32),
            f("market_imbalance_qty", U32),
            f("auction_time", U16),
            f("auction_type", Text(1)),
            f("imbalance_side", Text(1)),
            f("continuous_book_clearing_price", U32),
            f("auction_interest_clearing_price", U32),
            f("ssr_filing_price", U32),
            f("indicative_match_price", U32),
            f("upper_collar", U32),
            f("lower_collar", U32),
            f("auction_status", U8),
            f("freeze_status", U8),
            f("num_extensions", U8),
            f("unpaired_qty", U8),
            f("unpaired_side", Text(1)),
            f("significant_imbalance", Text(1)),
        ],
    },
    Layout {
        msg_type: 106,
        name: "add_order_refresh_message",
        fields: &[
            f("source_time", U32),
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("order_id", U64),
            f("price", U32),
            f("volume", U32),
            f("side", Text(1)),
            f("firm_id", Text(5)),
            f("reserved_11", Reserved(1)),
        ],
    },
    Layout {
        msg_type: 110,
        name: "non_displayed_trade_message",
        fields: &[
            f("source_time_ns", U32),
            f("symbol_index", U32),
            f("symbol_seq_num", U32),
            f("trade_id", U32),
            f("price", U32),
            f("volume", U32),
            f("printable_flag", U8),
            f("trade_cond_1", Text(1)),
            f("trade_cond_2", Text(1)),
            f("trade_cond_3", Text(1)),
            f("trade_cond_4", Text(1)),
        ],
    },
];

/// Which layout of the NYSE Integrated Feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// XDP Integrated Feed v2.1 (legacy).
    Xdp21,
    /// Pillar Integrated Feed v2.5.
    Pillar25,
}

/// The layout of a message type in a dialect.
pub fn layout_of(d: Dialect, msg_type: u16) -> Option<&'static Layout> {
    match d {
        Dialect::Pillar25 => PILLAR_CHANGES.iter().find(|l| l.msg_type == msg_type).or_else(|| layout(msg_type)),
        Dialect::Xdp21 => layout(msg_type),
    }
}

/// Byte offsets in a message (its 4-byte header included) of the fields a feed handler
/// reads, by message type; little-endian. A test holds them equal to the tables.
pub mod at {
    /// Every order and trade message: SourceTimeNS, SymbolIndex, SymbolSeqNum.
    pub const SOURCE_TIME_NS: usize = 4;
    pub const SYMBOL_INDEX: usize = 8;
    /// Add Order (100): OrderID u64, Price u32, Volume u32, Side (`B`/`S`).
    pub mod add {
        pub const ORDER_ID: usize = 16;
        pub const PRICE: usize = 24;
        pub const VOLUME: usize = 28;
        pub const SIDE: usize = 32;
        pub const LEN: usize = 39;
    }
    /// Modify Order (101): OrderID, Price, Volume.
    pub mod modify {
        pub const ORDER_ID: usize = 16;
        pub const PRICE: usize = 24;
        pub const VOLUME: usize = 28;
        pub const LEN: usize = 35;
    }
    /// Delete Order (102): OrderID.
    pub mod delete {
        pub const ORDER_ID: usize = 16;
        pub const LEN: usize = 25;
    }
    /// Order Execution (103): OrderID, TradeID u32, Price, Volume, PrintableFlag.
    pub mod execution {
        pub const ORDER_ID: usize = 16;
        pub const TRADE_ID: usize = 24;
        pub const PRICE: usize = 28;
        pub const VOLUME: usize = 32;
        pub const PRINTABLE: usize = 36;
        pub const LEN: usize = 42;
    }
    /// Replace Order (104): OrderID, NewOrderID, Price, Volume.
    pub mod replace {
        pub const ORDER_ID: usize = 16;
        pub const NEW_ORDER_ID: usize = 24;
        pub const PRICE: usize = 32;
        pub const VOLUME: usize = 36;
        pub const LEN: usize = 42;
    }
    /// Add Order Refresh (106): SourceTime first, so everything sits 4 bytes later.
    pub mod refresh {
        pub const SOURCE_TIME_NS: usize = 8;
        pub const SYMBOL_INDEX: usize = 12;
        pub const ORDER_ID: usize = 20;
        pub const PRICE: usize = 28;
        pub const VOLUME: usize = 32;
        pub const SIDE: usize = 36;
        pub const LEN: usize = 43;
    }
    /// Non-displayed Trade (110) and Cross Trade (111): TradeID or CrossID, Price, Volume.
    pub mod trade {
        pub const ID: usize = 16;
        pub const PRICE: usize = 20;
        pub const VOLUME: usize = 24;
        pub const LEN: usize = 29;
    }
    /// Messages with SourceTime, SourceTimeNS and then SymbolIndex: symbol clear (32),
    /// security status (34), imbalance (105), stock summary (223).
    pub mod timed {
        pub const SOURCE_TIME: usize = 4;
        pub const SOURCE_TIME_NS: usize = 8;
        pub const SYMBOL_INDEX: usize = 12;
        pub const LEN: usize = 16;
    }
    /// Imbalance (105): ReferencePrice, TotalImbalanceQty, ImbalanceSide.
    pub mod imbalance {
        pub const REFERENCE_PRICE: usize = 20;
        pub const TOTAL_IMBALANCE_QTY: usize = 28;
        pub const IMBALANCE_SIDE: usize = 39;
        pub const LEN: usize = 67;
    }
    /// Symbol Index Mapping (3): SymbolIndex, Symbol (11, NUL padded), PriceScaleCode.
    pub mod mapping {
        pub const SYMBOL_INDEX: usize = 4;
        pub const SYMBOL: usize = 8;
        pub const SYMBOL_LEN: usize = 11;
        pub const PRICE_SCALE_CODE: usize = 24;
        pub const LEN: usize = 44;
    }
    /// Source Time Reference (2): SourceTime (seconds) at 12.
    pub mod time_reference {
        pub const SOURCE_TIME: usize = 12;
        pub const LEN: usize = 16;
    }
}

/// A field's value as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Uint(u64),
    /// The text up to its first NUL.
    Text(&'a [u8]),
    Bytes(&'a [u8]),
}

impl std::fmt::Display for Value<'_> {
    /// Integers in decimal, text as it is (non-ASCII bytes replaced), reserved bytes in hex
    /// separated by colons (`30:30:20:30`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Uint(v) => write!(f, "{v}"),
            Value::Text(t) => f.write_str(&String::from_utf8_lossy(t)),
            Value::Bytes(b) => {
                for (i, x) in b.iter().enumerate() {
                    if i > 0 {
                        f.write_str(":")?;
                    }
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// A message's layout and its fields in order; an error for a type this module has no
/// layout for, or a message shorter than its layout (with the offset in the message).
pub fn fields<'a>(m: &Message<'a>) -> Result<(&'static Layout, Vec<(&'static str, Value<'a>)>)> {
    fields_of(Dialect::Xdp21, m)
}

/// [`fields`] in a dialect's layouts.
pub fn fields_of<'a>(d: Dialect, m: &Message<'a>) -> Result<(&'static Layout, Vec<(&'static str, Value<'a>)>)> {
    let l = layout_of(d, m.msg_type).ok_or(Error::Malformed {
        what: "xdp integrated message type (no layout)",
        offset: 2,
        value: u64::from(m.msg_type),
    })?;
    let need = 4 + l.body_len();
    crate::error::check("xdp integrated message", m.bytes, 0, need)?;
    let mut at = 4;
    let mut out = Vec::with_capacity(l.fields.len());
    for fd in l.fields {
        let b = &m.bytes[at..at + fd.kind.width()];
        let v = match fd.kind {
            Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 => Value::Uint(crate::read_uint(b, false)),
            Kind::Text(_) => Value::Text(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())]),
            Kind::Reserved(_) => Value::Bytes(b),
        };
        out.push((fd.name, v));
        at += fd.kind.width();
    }
    Ok((l, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_unique_and_sized() {
        assert_eq!(LAYOUTS.len(), 25, "every type of the specification");
        for (i, l) in LAYOUTS.iter().enumerate() {
            assert!(LAYOUTS[..i].iter().all(|o| o.msg_type != l.msg_type), "type {} twice", l.msg_type);
            assert!(l.body_len() > 0);
        }
        // Sizes of the specification (message size less the 4-byte header).
        // The message sizes of the real captures (crates/cli/tests/nyse.rs), less the header.
        for (t, len) in [(1, 10), (2, 12), (3, 40), (34, 42), (100, 35), (103, 38), (104, 38), (105, 63)] {
            assert_eq!(layout(t).unwrap().body_len(), len, "type {t}");
        }
    }

    /// The offsets of `at` are where the tables put those fields.
    #[test]
    fn offsets_agree_with_the_tables() {
        let off = |t: u16, name: &str| {
            let l = layout(t).unwrap();
            let mut o = 4;
            for f in l.fields {
                if f.name == name {
                    return o;
                }
                o += f.kind.width();
            }
            panic!("type {t} has no {name}");
        };
        let len = |t: u16| 4 + layout(t).unwrap().body_len();
        for t in [100, 101, 102, 103, 104, 110, 111] {
            assert_eq!(off(t, "source_time_ns"), at::SOURCE_TIME_NS, "{t}");
            assert_eq!(off(t, "symbol_index"), at::SYMBOL_INDEX, "{t}");
        }
        assert_eq!(
            (off(100, "order_id"), off(100, "price"), off(100, "volume"), off(100, "side"), len(100)),
            (at::add::ORDER_ID, at::add::PRICE, at::add::VOLUME, at::add::SIDE, at::add::LEN)
        );
        assert_eq!(
            (off(101, "order_id"), off(101, "price"), off(101, "volume"), len(101)),
            (at::modify::ORDER_ID, at::modify::PRICE, at::modify::VOLUME, at::modify::LEN)
        );
        assert_eq!((off(102, "order_id"), len(102)), (at::delete::ORDER_ID, at::delete::LEN));
        assert_eq!(
            (
                off(103, "order_id"),
                off(103, "trade_id"),
                off(103, "price"),
                off(103, "volume"),
                off(103, "printable_flag"),
                len(103)
            ),
            (
                at::execution::ORDER_ID,
                at::execution::TRADE_ID,
                at::execution::PRICE,
                at::execution::VOLUME,
                at::execution::PRINTABLE,
                at::execution::LEN
            )
        );
        assert_eq!(
            (off(104, "order_id"), off(104, "new_order_id"), off(104, "price"), off(104, "volume"), len(104)),
            (
                at::replace::ORDER_ID,
                at::replace::NEW_ORDER_ID,
                at::replace::PRICE,
                at::replace::VOLUME,
                at::replace::LEN
            )
        );
        assert_eq!(
            (
                off(106, "source_time_ns"),
                off(106, "symbol_index"),
                off(106, "order_id"),
                off(106, "price"),
                off(106, "volume"),
                off(106, "side"),
                len(106)
            ),
            (
                at::refresh::SOURCE_TIME_NS,
                at::refresh::SYMBOL_INDEX,
                at::refresh::ORDER_ID,
                at::refresh::PRICE,
                at::refresh::VOLUME,
                at::refresh::SIDE,
                at::refresh::LEN
            )
        );
        for (t, id) in [(110, "trade_id"), (111, "cross_id")] {
            assert_eq!(
                (off(t, id), off(t, "price"), off(t, "volume")),
                (at::trade::ID, at::trade::PRICE, at::trade::VOLUME)
            );
            assert!(len(t) >= at::trade::LEN);
        }
        for t in [32, 34, 105, 223] {
            assert_eq!(
                (off(t, "source_time"), off(t, "source_time_ns"), off(t, "symbol_index")),
                (at::timed::SOURCE_TIME, at::timed::SOURCE_TIME_NS, at::timed::SYMBOL_INDEX),
                "{t}"
            );
            assert!(len(t) >= at::timed::LEN);
        }
        assert_eq!(
            (off(105, "reference_price"), off(105, "total_imbalance_qty"), off(105, "imbalance_side"), len(105)),
            (
                at::imbalance::REFERENCE_PRICE,
                at::imbalance::TOTAL_IMBALANCE_QTY,
                at::imbalance::IMBALANCE_SIDE,
                at::imbalance::LEN
            )
        );
        assert_eq!(
            (off(3, "symbol_index"), off(3, "symbol"), off(3, "price_scale_code"), len(3)),
            (at::mapping::SYMBOL_INDEX, at::mapping::SYMBOL, at::mapping::PRICE_SCALE_CODE, at::mapping::LEN)
        );
        assert_eq!((off(2, "source_time"), len(2)), (at::time_reference::SOURCE_TIME, at::time_reference::LEN));
    }

    /// Pillar v2.5 keeps every field a feed handler reads where v2.1 has it, so the offsets
    /// of `at` serve both; its message sizes are the specification's.
    #[test]
    fn pillar_keeps_the_offsets_a_handler_reads() {
        let off = |d: Dialect, t: u16, name: &str| {
            let l = layout_of(d, t).unwrap();
            let mut o = 4;
            for f in l.fields {
                if f.name == name {
                    return Some(o);
                }
                o += f.kind.width();
            }
            None
        };
        for (t, names) in [
            (100u16, &["symbol_index", "order_id", "price", "volume", "side"][..]),
            (101, &["order_id", "price", "volume"]),
            (102, &["order_id"]),
            (103, &["order_id", "trade_id", "price", "volume", "printable_flag"]),
            (105, &["symbol_index", "reference_price", "total_imbalance_qty", "imbalance_side"]),
            (106, &["symbol_index", "order_id", "price", "volume", "side"]),
            (110, &["trade_id", "price", "volume"]),
        ] {
            for n in names {
                assert_eq!(off(Dialect::Pillar25, t, n), off(Dialect::Xdp21, t, n), "{t} {n}");
            }
        }
        for (t, len) in [(100, 35), (101, 31), (102, 21), (103, 38), (105, 66), (106, 39), (110, 29)] {
            assert_eq!(layout_of(Dialect::Pillar25, t).unwrap().body_len(), len, "type {t}");
        }
        assert_eq!(layout_of(Dialect::Pillar25, 3), layout(3));
        assert!(PILLAR_CHANGES.iter().all(|l| layout(l.msg_type).is_some()));
    }

    #[test]
    fn a_short_message_or_an_unknown_type_is_an_error() {
        let mut m = vec![0u8; 4 + 35];
        m[..2].copy_from_slice(&39u16.to_le_bytes());
        m[2..4].copy_from_slice(&100u16.to_le_bytes());
        assert!(fields(&Message { msg_type: 100, bytes: &m }).is_ok());
        assert!(fields(&Message { msg_type: 100, bytes: &m[..30] }).is_err());
        assert!(fields(&Message { msg_type: 9999, bytes: &m }).is_err());
    }

    proptest::proptest! {
        /// Every message type of both layouts: random field values written one by one
        /// (little-endian integers, NUL-padded text, raw reserved bytes) read back through
        /// the tables as written.
        #[test]
        fn every_type_round_trips(seed in proptest::num::u64::ANY, pillar in proptest::bool::ANY) {
            let d = if pillar { Dialect::Pillar25 } else { Dialect::Xdp21 };
            let mut x = seed | 1;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for base in LAYOUTS {
                let l = layout_of(d, base.msg_type).unwrap();
                let mut m = vec![0u8; 4];
                let mut want = Vec::new();
                for fd in l.fields {
                    let w = fd.kind.width();
                    match fd.kind {
                        Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 => {
                            let v = next() & (u64::MAX >> (64 - 8 * w));
                            m.extend_from_slice(&v.to_le_bytes()[..w]);
                            want.push(Value::Uint(v));
                        }
                        Kind::Text(_) => {
                            let n = (next() % (w as u64 + 1)) as usize;
                            let start = m.len();
                            m.extend((0..n).map(|_| b'A' + (next() % 26) as u8));
                            m.resize(start + w, 0);
                            want.push(Value::Text(&[]));
                        }
                        Kind::Reserved(_) => {
                            m.extend((0..w).map(|_| next() as u8));
                            want.push(Value::Bytes(&[]));
                        }
                    }
                }
                let len = m.len() as u16;
                m[..2].copy_from_slice(&len.to_le_bytes());
                m[2..4].copy_from_slice(&l.msg_type.to_le_bytes());
                let (got_l, got) = fields_of(d, &Message { msg_type: l.msg_type, bytes: &m }).unwrap();
                proptest::prop_assert_eq!(got_l.name, l.name);
                let mut at = 4;
                for ((fd, (name, v)), w) in l.fields.iter().zip(&got).zip(&want) {
                    proptest::prop_assert_eq!(*name, fd.name);
                    let bytes = &m[at..at + fd.kind.width()];
                    match (v, w) {
                        (Value::Uint(a), Value::Uint(b)) => proptest::prop_assert_eq!(a, b),
                        (Value::Text(t), Value::Text(_)) => {
                            let n = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
                            proptest::prop_assert_eq!(*t, &bytes[..n]);
                        }
                        (Value::Bytes(b), Value::Bytes(_)) => proptest::prop_assert_eq!(*b, bytes),
                        other => proptest::prop_assert!(false, "{:?}", other),
                    }
                    at += fd.kind.width();
                }
            }
        }
    }

    /// Any bytes, any type, any length: an error or fields, never a panic.
    #[test]
    fn arbitrary_messages_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = [0u8; 80];
        for round in 0..20_000u32 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let len = (x as usize >> 8) % buf.len();
            let t =
                if round % 2 == 0 { LAYOUTS[round as usize / 2 % LAYOUTS.len()].msg_type } else { (x >> 20) as u16 };
            if let Ok((l, f)) = fields(&Message { msg_type: t, bytes: &buf[..len] }) {
                assert_eq!(f.len(), l.fields.len());
                assert!(len >= 4 + l.body_len());
            }
        }
    }
}

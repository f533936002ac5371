//! The normalized market event: one fixed-size record for every decoded message of every
//! feed, in the conventions market-data users know (an MBO record: `ts_recv`, `ts_event`,
//! `action`, `side`, `price` in 1e-9 units, `size`, `order_id`, `flags`).
//!
//! It promises a stable 64-byte `Copy` layout (one cache line, no pointers) so that it can
//! travel through rings and files as is. Feed-specific mappings live beside it
//! ([`crate::itch`] for ITCH 5.0).

use serde::{Deserialize, Serialize};

/// Prices in the normalized schema are integers in units of 1e-9.
pub const PRICE_SCALE: i64 = 1_000_000_000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum EventAction {
    /// A new resting order.
    Add = 1,
    /// Part of a resting order cancelled (`size` is the cancelled quantity).
    Cancel = 2,
    /// A resting order removed whole.
    Delete = 3,
    /// A resting order replaced (`order_id` is the new id, `aux` the old one).
    Modify = 4,
    /// A resting order executed (`size` executed, `price` the execution price).
    Execute = 5,
    /// A trade that does not touch the book (hidden or cross).
    Trade = 6,
    /// The book of the instrument was cleared.
    Clear = 7,
    /// Trading status, system events, directory and other reference data.
    #[default]
    Status = 8,
    /// An auction imbalance or price-discovery message.
    Imbalance = 9,
    /// One side of a quote that is not an order (OPRA): `price` and `size` of that side.
    Quote = 10,
    /// Messages the stream lost (a gap record, not a market event): `sequence` is the first
    /// missing sequence number, `order_id` the last, `size` the message count (at most
    /// `u32::MAX`), `aux` the reason ([`crate::arb::GapReason::code`]), `ts_recv` and
    /// `ts_event` when it was given up. See [`crate::feed::gap_event`].
    Gap = 11,
    /// The books are trusted again (a record, not a market event): rebuilt from a snapshot
    /// after a gap had made them stale, exact from `sequence` on; `instrument_id`
    /// `u32::MAX`: every book of the stream. (A gap record is where they went stale.)
    Trusted = 12,
}

impl EventAction {
    pub const ALL: [EventAction; 12] = [
        EventAction::Add,
        EventAction::Cancel,
        EventAction::Delete,
        EventAction::Modify,
        EventAction::Execute,
        EventAction::Trade,
        EventAction::Clear,
        EventAction::Status,
        EventAction::Imbalance,
        EventAction::Quote,
        EventAction::Gap,
        EventAction::Trusted,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            EventAction::Add => "add",
            EventAction::Cancel => "cancel",
            EventAction::Delete => "delete",
            EventAction::Modify => "modify",
            EventAction::Execute => "execute",
            EventAction::Trade => "trade",
            EventAction::Clear => "clear",
            EventAction::Status => "status",
            EventAction::Imbalance => "imbalance",
            EventAction::Quote => "quote",
            EventAction::Gap => "gap",
            EventAction::Trusted => "trusted",
        }
    }
    pub fn index(self) -> usize {
        self as usize - 1
    }
}

impl std::str::FromStr for EventAction {
    type Err = crate::error::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventAction::ALL.into_iter().find(|a| a.as_str() == s).ok_or_else(|| crate::error::UnknownName {
            what: "action",
            name: s.into(),
            expected:
                "one of add, cancel, delete, modify, execute, trade, clear, status, imbalance, quote, gap, trusted",
        })
    }
}

/// Side of the book an event concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Side {
    Bid = 1,
    Ask = 2,
    #[default]
    None = 0,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Bid => "bid",
            Side::Ask => "ask",
            Side::None => "none",
        }
    }
}

/// Bits of [`Event::flags`].
pub mod flags {
    /// The last event decoded from its packet.
    pub const LAST_IN_PACKET: u8 = 0x80;
    /// The instrument's book is stale (a gap touched it).
    pub const BOOK_STALE: u8 = 0x40;
    /// The event named an order the book does not know: it was not applied.
    pub const UNKNOWN_ORDER: u8 = 0x20;
    /// The book could not apply the event for another reason (table full, duplicate id).
    pub const REJECTED: u8 = 0x10;
    /// An execution that is not to be printed (ITCH `printable = N`).
    pub const NON_PRINTABLE: u8 = 0x08;
    /// The event's stream does not feed the books (the books follow the other arbitrated
    /// stream): fields only a book knows (an execute's price and side) are absent.
    pub const NO_BOOK: u8 = 0x04;
}

/// One normalized market event (64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[repr(C)]
pub struct Event {
    /// When the packet carrying it was received (ns since the UNIX epoch).
    pub ts_recv: u64,
    /// When the exchange says it happened (ns since the UNIX epoch).
    pub ts_event: u64,
    /// Feed sequence number of the message.
    pub sequence: u64,
    pub order_id: u64,
    /// Price in 1e-9 units.
    pub price: i64,
    /// The other order of a replace, the match number of an execution or trade.
    pub aux: u64,
    pub size: u32,
    pub instrument_id: u32,
    pub action: EventAction,
    pub side: Side,
    /// [`flags`] bits.
    pub flags: u8,
    /// The feed's own message type (the ITCH letter).
    pub msg_type: u8,
    /// The venue (feed) the event came from, as configured; 0 when there is one.
    pub venue: u32,
}

const _: () = assert!(std::mem::size_of::<Event>() == 64);

/// Best bid and offer of an instrument (price 0 and size 0 on an empty side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bbo {
    pub bid_price: i64,
    pub ask_price: i64,
    pub bid_size: u64,
    pub ask_size: u64,
}

impl Event {
    /// The price as a decimal string with up to 9 places, trailing zeros trimmed.
    pub fn price_str(&self) -> String {
        price_to_string(self.price)
    }
}

/// Format a 1e-9 fixed-point price exactly (no floating point).
pub fn price_to_string(p: i64) -> String {
    let sign = if p < 0 { "-" } else { "" };
    let a = p.unsigned_abs();
    let (int, frac) = (a / PRICE_SCALE as u64, a % PRICE_SCALE as u64);
    if frac == 0 {
        return format!("{sign}{int}");
    }
    let f = format!("{frac:09}");
    format!("{sign}{int}.{}", f.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_format_exactly() {
        assert_eq!(price_to_string(190_250_000_000), "190.25");
        assert_eq!(price_to_string(1), "0.000000001");
        assert_eq!(price_to_string(-5_000_000_000), "-5");
        assert_eq!(price_to_string(0), "0");
    }

    #[test]
    fn actions_round_trip() {
        for a in EventAction::ALL {
            assert_eq!(a.as_str().parse::<EventAction>().unwrap(), a);
        }
        assert!("bogus".parse::<EventAction>().unwrap_err().to_string().contains("bogus"));
    }
}

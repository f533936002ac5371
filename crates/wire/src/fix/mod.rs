//! FIX tag=value (FIX 4.2 and 4.4): a zero-copy reader, a writer, and pre-built order
//! templates patched in place.
//!
//! # The message
//! `8=BeginString|9=BodyLength|35=MsgType|...|10=CheckSum|` with `|` the SOH byte (0x01).
//! BodyLength counts the bytes from the one after the `9=` field's SOH up to and including
//! the SOH before `10=`; CheckSum is the sum of every byte before `10=`, modulo 256, as three
//! digits.
//!
//! # Reading
//! [`Message::new_checked`] validates the framing once (BeginString first, BodyLength
//! second, MsgType third, the trailer where BodyLength says, the CheckSum). After that
//! [`Message::fields`] walks the body without allocating, and [`FieldIndex`] keeps the
//! fields of one message in a reused vector, for lookups by tag and repeating groups.
//! [`frame_len`] finds where a message ends in a TCP byte stream. Data fields whose length
//! is given by the field before them (RawData 96 after RawDataLength 95, and the other
//! length/data pairs of the specification) may hold SOH bytes and are read by length.
//!
//! Errors say what was wrong and at which byte, relative to the start of the buffer
//! handed in. No input makes the reader panic, loop, or allocate (except the reused
//! vector of a [`FieldIndex`], which grows to the largest message seen).
//!
//! # Writing
//! [`Writer`] builds a message field by field and fills in BodyLength and CheckSum.
//! [`OrderTemplate`] is a NewOrderSingle serialized once, whose variable fields (MsgSeqNum,
//! SendingTime, ClOrdID, Side, OrderQty, Price, and Symbol when its length is unchanged) are
//! fixed-width slots patched in place, with the CheckSum updated from the bytes that
//! changed: the order is ready before the decision to send it is made. Fixed width uses
//! leading zeros, which the FIX 4.2 and 4.4 specifications allow in int, Qty, Price and
//! SeqNum values.
//!
//! # Modules
//! `scan` finds SOH bytes a word (or 64 bytes) at a time; `numbers` reads integers and
//! decimals; `reader` frames and reads messages; `writer` builds them and keeps the digit
//! counters and timestamps templates patch from; `template` is the pre-built order. Their
//! items are all re-exported here: `fix::Message`, `fix::parse_decimal` and so on.

pub const SOH: u8 = 0x01;

/// Tags this module reads itself.
pub mod tag {
    pub const BEGIN_STRING: u32 = 8;
    pub const BODY_LENGTH: u32 = 9;
    pub const CHECK_SUM: u32 = 10;
    pub const CL_ORD_ID: u32 = 11;
    pub const MSG_SEQ_NUM: u32 = 34;
    pub const MSG_TYPE: u32 = 35;
    pub const ORDER_QTY: u32 = 38;
    pub const ORD_TYPE: u32 = 40;
    pub const PRICE: u32 = 44;
    pub const SENDER_COMP_ID: u32 = 49;
    pub const SENDING_TIME: u32 = 52;
    pub const SIDE: u32 = 54;
    pub const SYMBOL: u32 = 55;
    pub const TARGET_COMP_ID: u32 = 56;
    pub const TRANSACT_TIME: u32 = 60;
    pub const NO_MD_ENTRIES: u32 = 268;
    pub const MD_ENTRY_TYPE: u32 = 269;
    pub const MD_ENTRY_PX: u32 = 270;
    pub const MD_UPDATE_ACTION: u32 = 279;
}

/// Length field -> the data field it gives the length of (FIX 4.4 data types). The reader
/// reads a data field by this length; the tick-to-trade walk (`tickplant_core::ttt`) flags
/// the same tags.
pub const DATA_FIELDS: [(u32, u32); 16] = [
    (90, 91),
    (93, 89),
    (95, 96),
    (212, 213),
    (348, 349),
    (350, 351),
    (352, 353),
    (354, 355),
    (356, 357),
    (358, 359),
    (360, 361),
    (362, 363),
    (364, 365),
    (445, 446),
    (618, 619),
    (621, 622),
];

mod numbers;
mod reader;
mod scan;
mod template;
mod writer;

pub use numbers::*;
pub use reader::*;
pub use scan::*;
pub use template::*;
pub use writer::*;

#[cfg(test)]
mod tests;

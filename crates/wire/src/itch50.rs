//! NASDAQ TotalView-ITCH 5.0 messages.
//!
//! Every message of the 5.0 specification, one struct per type with the specification's
//! field names in snake_case, and [`Message`] over all of them. Every message starts with
//! the same 11 bytes: message type (1 byte, a letter), stock locate (u16), tracking number
//! (u16) and timestamp (6 bytes, nanoseconds since midnight). All integers are big-endian.
//! Prices are kept as the integers on the wire: Price(4) is a `u32` in 1e-4 dollars,
//! Price(8) (the MWCB levels only) a `u64` in 1e-8 dollars; text fields are the raw
//! space-padded ASCII bytes.
//!
//! [`Message::parse`] checks the message type and that the buffer holds the type's fixed
//! length, then reads the fields; it cannot panic on any input. [`message_len`] gives the
//! fixed length of a type, for framings whose length prefix is missing or wrong. Each struct
//! also reads and writes itself at a fixed layout (`parse`/`emit`, `LEN`), and
//! [`Message::visit`] walks the fields by name for the text outputs (CSV, JSON).
//!
//! One file (about 1,000 lines, 140 of them tests): one struct per message type of the
//! specification, in its order, made by one macro; a type is read in one place.

use crate::{Error, Result};

/// Length of the header every message starts with (type, locate, tracking, timestamp).
pub const HEADER_LEN: usize = 11;
/// Where every message keeps its stock locate.
pub const LOCATE: core::ops::Range<usize> = 1..3;
/// Where Add Order (A), Add Order with MPID (F) and Trade (P) keep their stock: the same
/// bytes in all three (a test below holds them to the types' own fields).
pub const ADD_STOCK: core::ops::Range<usize> = 24..32;

/// How a field is shown by [`FieldVisitor`].
pub trait FieldVisitor {
    /// An unsigned integer (counts, shares, ids, timestamps).
    fn int(&mut self, name: &'static str, value: u64);
    /// A price of `decimals` implied decimal places (4 or 8).
    fn price(&mut self, name: &'static str, value: u64, decimals: u8);
    /// Alphanumeric text, as on the wire (padding included; trim to show it).
    fn text(&mut self, name: &'static str, value: &[u8]);
}

#[inline(always)]
fn be_u16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}
#[inline(always)]
fn be_u32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline(always)]
fn be_u64(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5], b[o + 6], b[o + 7]])
}
#[inline(always)]
fn arr<const N: usize>(b: &[u8], o: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[o..o + N]);
    a
}

// One macro per concern keyed by the field's kind: its Rust type, how it is read and
// written, and how it is shown.
macro_rules! kind_ty {
    (char) => {
        u8
    };
    (u16) => {
        u16
    };
    (u32) => {
        u32
    };
    (u64) => {
        u64
    };
    (price4) => {
        u32
    };
    (price8) => {
        u64
    };
    (stock) => {
        [u8; 8]
    };
    (alpha2) => {
        [u8; 2]
    };
    (alpha4) => {
        [u8; 4]
    };
}
macro_rules! kind_read {
    (char, $b:expr, $o:expr) => {
        $b[$o]
    };
    (u16, $b:expr, $o:expr) => {
        be_u16($b, $o)
    };
    (u32, $b:expr, $o:expr) => {
        be_u32($b, $o)
    };
    (u64, $b:expr, $o:expr) => {
        be_u64($b, $o)
    };
    (price4, $b:expr, $o:expr) => {
        be_u32($b, $o)
    };
    (price8, $b:expr, $o:expr) => {
        be_u64($b, $o)
    };
    (stock, $b:expr, $o:expr) => {
        arr::<8>($b, $o)
    };
    (alpha2, $b:expr, $o:expr) => {
        arr::<2>($b, $o)
    };
    (alpha4, $b:expr, $o:expr) => {
        arr::<4>($b, $o)
    };
}
macro_rules! kind_write {
    (char, $b:expr, $o:expr, $v:expr) => {
        $b[$o] = $v
    };
    (u16, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 2].copy_from_slice(&$v.to_be_bytes())
    };
    (u32, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 4].copy_from_slice(&$v.to_be_bytes())
    };
    (u64, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 8].copy_from_slice(&$v.to_be_bytes())
    };
    (price4, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 4].copy_from_slice(&$v.to_be_bytes())
    };
    (price8, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 8].copy_from_slice(&$v.to_be_bytes())
    };
    (stock, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 8].copy_from_slice(&$v)
    };
    (alpha2, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 2].copy_from_slice(&$v)
    };
    (alpha4, $b:expr, $o:expr, $v:expr) => {
        $b[$o..$o + 4].copy_from_slice(&$v)
    };
}
macro_rules! kind_visit {
    (char, $vis:expr, $n:expr, $v:expr) => {
        $vis.text($n, core::slice::from_ref(&$v))
    };
    (u16, $vis:expr, $n:expr, $v:expr) => {
        $vis.int($n, u64::from($v))
    };
    (u32, $vis:expr, $n:expr, $v:expr) => {
        $vis.int($n, u64::from($v))
    };
    (u64, $vis:expr, $n:expr, $v:expr) => {
        $vis.int($n, $v)
    };
    (price4, $vis:expr, $n:expr, $v:expr) => {
        $vis.price($n, u64::from($v), 4)
    };
    (price8, $vis:expr, $n:expr, $v:expr) => {
        $vis.price($n, $v, 8)
    };
    (stock, $vis:expr, $n:expr, $v:expr) => {
        $vis.text($n, &$v)
    };
    (alpha2, $vis:expr, $n:expr, $v:expr) => {
        $vis.text($n, &$v)
    };
    (alpha4, $vis:expr, $n:expr, $v:expr) => {
        $vis.text($n, &$v)
    };
}

macro_rules! itch_messages {
    ($(
        $(#[$doc:meta])*
        $name:ident = $ty:literal, $len:literal {
            $( $field:ident : $kind:ident @ $off:literal ),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
            pub struct $name {
                pub stock_locate: u16,
                pub tracking_number: u16,
                /// Nanoseconds since midnight.
                pub timestamp: u64,
                $( pub $field: kind_ty!($kind), )*
            }

            impl $name {
                /// The message type letter.
                pub const TYPE: u8 = $ty;
                /// Length of the message, type byte included.
                pub const LEN: usize = $len;

                /// Read the message from `b`, which must hold at least `LEN` bytes (the type
                /// byte is not checked).
                #[inline(always)]
                pub fn parse(b: &[u8]) -> Result<Self> {
                    if b.len() < $len {
                        return Err(Error::Truncated { what: stringify!($name), offset: 0, need: $len, have: b.len() });
                    }
                    // As an array: every field read at a fixed place, none bounds-checked.
                    let mut whole = [0u8; $len];
                    whole.copy_from_slice(&b[..$len]);
                    Ok(Self::read(&whole))
                }

                /// Read the message from its `LEN` bytes (the type byte is not checked).
                #[inline(always)]
                pub fn read(b: &[u8; $len]) -> Self {
                    // Tracking number and timestamp, bytes 3 to 10, as one word.
                    let tracking_and_time = be_u64(b, 3);
                    $name {
                        stock_locate: be_u16(b, 1),
                        tracking_number: (tracking_and_time >> 48) as u16,
                        timestamp: tracking_and_time & 0xffff_ffff_ffff,
                        $( $field: kind_read!($kind, b, $off), )*
                    }
                }

                /// Write the message (type byte included) into `b[..LEN]`.
                pub fn emit(&self, b: &mut [u8]) {
                    let b = &mut b[..$len];
                    b[0] = $ty;
                    b[1..3].copy_from_slice(&self.stock_locate.to_be_bytes());
                    b[3..5].copy_from_slice(&self.tracking_number.to_be_bytes());
                    b[5..11].copy_from_slice(&self.timestamp.to_be_bytes()[2..]);
                    $( kind_write!($kind, b, $off, self.$field); )*
                }

                /// Walk the fields after the header, in wire order.
                pub fn visit<V: FieldVisitor>(&self, v: &mut V) {
                    $( kind_visit!($kind, v, stringify!($field), self.$field); )*
                    let _ = v;
                }
            }
        )*

        /// Any ITCH 5.0 message.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Message {
            $( $name($name), )*
        }

        impl Message {
            /// Parse one message from the start of `b`; bytes past the type's length are
            /// ignored. An unknown type is `Unsupported` at offset 0; a short buffer is
            /// `Truncated`.
            #[inline]
            pub fn parse(b: &[u8]) -> Result<Message> {
                let Some(&t) = b.first() else {
                    return Err(Error::Truncated { what: "itch message type", offset: 0, need: 1, have: 0 });
                };
                // One indirect call through a table indexed by the type byte: a `match` on the
                // sparse letters compiles to a tree of compares that mispredicts several times
                // per message on a real mix.
                type Parse = fn(&[u8]) -> Result<Message>;
                const PARSERS: &[Parse] = &[
                    |b| Err(Error::Unsupported { what: "itch message type", offset: 0, value: u64::from(b[0]) }),
                    $( |b| $name::parse(b).map(Message::$name), )*
                ];
                // The type's class plus one: an unknown type's `u8::MAX` wraps to the error.
                PARSERS[usize::from(CLASS[usize::from(t)].wrapping_add(1))](b)
            }

            /// The message type letter.
            pub fn message_type(&self) -> u8 {
                match self { $( Message::$name(_) => $ty, )* }
            }

            /// Bytes [`Message::emit`] writes.
            pub fn buffer_len(&self) -> usize {
                match self { $( Message::$name(_) => $len, )* }
            }

            /// Write the message into `b[..buffer_len()]`.
            pub fn emit(&self, b: &mut [u8]) {
                match self { $( Message::$name(m) => m.emit(b), )* }
            }

            /// Walk the fields after the header, in wire order.
            pub fn visit<V: FieldVisitor>(&self, v: &mut V) {
                match self { $( Message::$name(m) => m.visit(v), )* }
            }

            /// The specification's name of the message type.
            pub fn name(&self) -> &'static str {
                match self { $( Message::$name(_) => stringify!($name), )* }
            }

            /// (stock_locate, tracking_number, timestamp) of any message.
            #[inline]
            pub fn header(&self) -> (u16, u16, u64) {
                match self { $( Message::$name(m) => (m.stock_locate, m.tracking_number, m.timestamp), )* }
            }
        }

        /// The fixed length (type byte included) of message type `t`, or `None` for a type
        /// ITCH 5.0 does not define.
        #[inline(always)]
        pub const fn message_len(t: u8) -> Option<usize> {
            // A table lookup rather than a match: no branch on the (unpredictable) type.
            match LEN_OF[t as usize] {
                0 => None,
                n => Some(n as usize),
            }
        }

        /// Every message type letter, in specification order.
        pub const MESSAGE_TYPES: &[u8] = &[$( $ty, )*];

        /// The fixed length of each type letter, 0 for a letter ITCH 5.0 does not define.
        const LEN_OF: [u8; 256] = {
            let mut t = [0u8; 256];
            $( t[$ty as usize] = $len; )*
            t
        };

        /// [`LEN_OF`] with 2^16 for a letter ITCH 5.0 does not define: no length prefix
        /// equals it.
        const LEN_OR_NONE: [u32; 256] = {
            let mut t = [1u32 << 16; 256];
            let mut i = 0;
            while i < 256 {
                if LEN_OF[i] != 0 {
                    t[i] = LEN_OF[i] as u32;
                }
                i += 1;
            }
            t
        };

        impl Batch {
            /// The second pass of [`Batch::parse`]: the messages of each type in a run of
            /// their own, each written into its place in stream order.
            #[inline]
            fn parse_runs(&mut self, buf: &[u8]) {
                // Where the buffer goes on for a whole window past the batch's start (all
                // but its last 64 KB), the window as an array: a message's bytes, at an
                // offset under 2^16, are then inside it, and no read is checked.
                match buf.get(..WINDOW).and_then(|w| <&[u8; WINDOW]>::try_from(w).ok()) {
                    Some(w) => self.parse_runs_in(Some(w), w),
                    None => self.parse_runs_in(None, buf),
                }
            }

            /// [`Batch::parse_runs`] through the window `w` when there is one, else `buf`.
            #[inline(always)]
            fn parse_runs_in(&mut self, w: Option<&[u8; WINDOW]>, buf: &[u8]) {
                let mut class = 0u8;
                $(
                    for &x in &self.runs[usize::from(class)][..usize::from(self.counts[usize::from(class)])] {
                        // Its index in the batch and where it starts, in one word.
                        let (i, at) = ((x >> 16) as usize % BATCH, (x & 0xffff) as usize);
                        // Framed by the first pass: the bytes are there, the type is this one.
                        let b = match w {
                            Some(w) => <&[u8; $len]>::try_from(&w[at..at + $len]).ok(),
                            None => buf.get(at..at + $len).and_then(|b| <&[u8; $len]>::try_from(b).ok()),
                        };
                        if let Some(b) = b {
                            self.messages[i] = Message::$name($name::read(b));
                        }
                    }
                    class += 1;
                )*
                debug_assert_eq!(usize::from(class), MESSAGE_TYPES.len());
            }
        }
    };
}

itch_messages! {
    /// System Event (S).
    SystemEvent = b'S', 12 { event_code: char @ 11 }
    /// Stock Directory (R).
    StockDirectory = b'R', 39 {
        stock: stock @ 11,
        market_category: char @ 19,
        financial_status_indicator: char @ 20,
        round_lot_size: u32 @ 21,
        round_lots_only: char @ 25,
        issue_classification: char @ 26,
        issue_sub_type: alpha2 @ 27,
        authenticity: char @ 29,
        short_sale_threshold_indicator: char @ 30,
        ipo_flag: char @ 31,
        luld_reference_price_tier: char @ 32,
        etp_flag: char @ 33,
        etp_leverage_factor: u32 @ 34,
        inverse_indicator: char @ 38,
    }
    /// Stock Trading Action (H).
    StockTradingAction = b'H', 25 {
        stock: stock @ 11,
        trading_state: char @ 19,
        reserved: char @ 20,
        reason: alpha4 @ 21,
    }
    /// Reg SHO Short Sale Price Test Restricted Indicator (Y).
    RegShoRestriction = b'Y', 20 { stock: stock @ 11, reg_sho_action: char @ 19 }
    /// Market Participant Position (L).
    MarketParticipantPosition = b'L', 26 {
        mpid: alpha4 @ 11,
        stock: stock @ 15,
        primary_market_maker: char @ 23,
        market_maker_mode: char @ 24,
        market_participant_state: char @ 25,
    }
    /// MWCB Decline Level (V): Price(8).
    MwcbDeclineLevel = b'V', 35 { level1: price8 @ 11, level2: price8 @ 19, level3: price8 @ 27 }
    /// MWCB Status (W).
    MwcbStatus = b'W', 12 { breached_level: char @ 11 }
    /// IPO Quoting Period Update (K).
    IpoQuotingPeriodUpdate = b'K', 28 {
        stock: stock @ 11,
        ipo_quotation_release_time: u32 @ 19,
        ipo_quotation_release_qualifier: char @ 23,
        ipo_price: price4 @ 24,
    }
    /// LULD Auction Collar (J).
    LuldAuctionCollar = b'J', 35 {
        stock: stock @ 11,
        auction_collar_reference_price: price4 @ 19,
        upper_auction_collar_price: price4 @ 23,
        lower_auction_collar_price: price4 @ 27,
        auction_collar_extension: u32 @ 31,
    }
    /// Operational Halt (h).
    OperationalHalt = b'h', 21 { stock: stock @ 11, market_code: char @ 19, operational_halt_action: char @ 20 }
    /// Add Order, no MPID attribution (A).
    AddOrder = b'A', 36 {
        order_reference_number: u64 @ 11,
        buy_sell_indicator: char @ 19,
        shares: u32 @ 20,
        stock: stock @ 24,
        price: price4 @ 32,
    }
    /// Add Order with MPID attribution (F).
    AddOrderMpid = b'F', 40 {
        order_reference_number: u64 @ 11,
        buy_sell_indicator: char @ 19,
        shares: u32 @ 20,
        stock: stock @ 24,
        price: price4 @ 32,
        attribution: alpha4 @ 36,
    }
    /// Order Executed (E).
    OrderExecuted = b'E', 31 { order_reference_number: u64 @ 11, executed_shares: u32 @ 19, match_number: u64 @ 23 }
    /// Order Executed With Price (C).
    OrderExecutedWithPrice = b'C', 36 {
        order_reference_number: u64 @ 11,
        executed_shares: u32 @ 19,
        match_number: u64 @ 23,
        printable: char @ 31,
        execution_price: price4 @ 32,
    }
    /// Order Cancel (X): a partial cancel.
    OrderCancel = b'X', 23 { order_reference_number: u64 @ 11, cancelled_shares: u32 @ 19 }
    /// Order Delete (D).
    OrderDelete = b'D', 19 { order_reference_number: u64 @ 11 }
    /// Order Replace (U).
    OrderReplace = b'U', 35 {
        original_order_reference_number: u64 @ 11,
        new_order_reference_number: u64 @ 19,
        shares: u32 @ 27,
        price: price4 @ 31,
    }
    /// Trade, non-cross (P).
    Trade = b'P', 44 {
        order_reference_number: u64 @ 11,
        buy_sell_indicator: char @ 19,
        shares: u32 @ 20,
        stock: stock @ 24,
        price: price4 @ 32,
        match_number: u64 @ 36,
    }
    /// Cross Trade (Q): shares are 8 bytes.
    CrossTrade = b'Q', 40 {
        shares: u64 @ 11,
        stock: stock @ 19,
        cross_price: price4 @ 27,
        match_number: u64 @ 31,
        cross_type: char @ 39,
    }
    /// Broken Trade / Order Execution (B).
    BrokenTrade = b'B', 19 { match_number: u64 @ 11 }
    /// Net Order Imbalance Indicator (I).
    Noii = b'I', 50 {
        paired_shares: u64 @ 11,
        imbalance_shares: u64 @ 19,
        imbalance_direction: char @ 27,
        stock: stock @ 28,
        far_price: price4 @ 36,
        near_price: price4 @ 40,
        current_reference_price: price4 @ 44,
        cross_type: char @ 48,
        price_variation_indicator: char @ 49,
    }
    /// Retail Price Improvement Indicator (N).
    RetailPriceImprovement = b'N', 20 { stock: stock @ 11, interest_flag: char @ 19 }
    /// Direct Listing with Capital Raise Price Discovery (O).
    DirectListingCapitalRaise = b'O', 48 {
        stock: stock @ 11,
        open_eligibility_status: char @ 19,
        minimum_allowable_price: price4 @ 20,
        maximum_allowable_price: price4 @ 24,
        near_execution_price: price4 @ 28,
        near_execution_time: u64 @ 32,
        lower_price_range_collar: price4 @ 40,
        upper_price_range_collar: price4 @ 44,
    }
}

impl AddOrder {
    /// The same order with an MPID attribution (an F message).
    pub fn with_attribution(self, attribution: [u8; 4]) -> AddOrderMpid {
        let AddOrder {
            stock_locate,
            tracking_number,
            timestamp,
            order_reference_number,
            buy_sell_indicator,
            shares,
            stock,
            price,
        } = self;
        AddOrderMpid {
            stock_locate,
            tracking_number,
            timestamp,
            order_reference_number,
            buy_sell_indicator,
            shares,
            stock,
            price,
            attribution,
        }
    }
}

impl AddOrderMpid {
    /// The order without its attribution (what an A message carries).
    #[inline]
    pub fn add_order(&self) -> AddOrder {
        let AddOrderMpid {
            stock_locate,
            tracking_number,
            timestamp,
            order_reference_number,
            buy_sell_indicator,
            shares,
            stock,
            price,
            ..
        } = *self;
        AddOrder {
            stock_locate,
            tracking_number,
            timestamp,
            order_reference_number,
            buy_sell_indicator,
            shares,
            stock,
            price,
        }
    }
}

/// Parse a message whose length is given by its framing (a MoldUDP64 block): the block
/// must be exactly the type's fixed length.
#[inline]
pub fn parse_exact(b: &[u8]) -> Result<Message> {
    let m = Message::parse(b)?;
    if m.buffer_len() != b.len() {
        return Err(Error::Malformed {
            what: "itch message length (the block disagrees with the message type's fixed length)",
            offset: 0,
            value: b.len() as u64,
        });
    }
    Ok(m)
}

/// The stock field trimmed of its right padding.
pub fn trim_stock(s: &[u8]) -> &[u8] {
    let n = s.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1);
    &s[..n]
}

/// A symbol as the 8-byte space-padded stock field (longer names are cut at 8).
pub fn stock(symbol: &str) -> [u8; 8] {
    let mut s = [b' '; 8];
    let b = symbol.as_bytes();
    let n = b.len().min(8);
    s[..n].copy_from_slice(&b[..n]);
    s
}

/// How a stream of ITCH messages is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// BinaryFILE: `[u16 BE length][message]`, the length checked against the type.
    LengthPrefixed,
    /// BinaryFILE whose length prefixes are not trusted: lengths come from the types.
    InferLength,
    /// Messages back to back with no prefix; lengths come from the types.
    Raw,
}

/// Records [`Batch::parse`] reads at most per call.
pub const BATCH: usize = 128;

/// The bytes from a batch's start that hold any message at an offset under 2^16.
const WINDOW: usize = (1 << 16) + 64;

// A batch's indices and per-type counts are bytes, and its offsets (from where it starts)
// two bytes: every record it spans is at most the longest message and its prefix.
const _: () = {
    let mut longest = 0;
    let mut i = 0;
    while i < 256 {
        if LEN_OF[i] > longest {
            longest = LEN_OF[i];
        }
        i += 1;
    }
    assert!(BATCH <= u8::MAX as usize && BATCH * (2 + longest as usize) <= u16::MAX as usize);
};

/// The class of each type letter (its index in [`MESSAGE_TYPES`]), `u8::MAX` for a letter
/// ITCH 5.0 does not define.
const CLASS: [u8; 256] = {
    let mut t = [u8::MAX; 256];
    let mut i = 0;
    while i < MESSAGE_TYPES.len() {
        t[MESSAGE_TYPES[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Messages of an in-memory stream parsed up to [`BATCH`] at a time, into [`Message`]s in
/// stream order: what [`Stream`] and [`Message::parse`] give one at a time, faster.
///
/// One at a time, each message's parse is an indirect call on its type, and on a real
/// mix the types come in no order the core can predict: the mispredicted call costs more
/// than the parse. A batch is framed first (where each message starts and its type), then
/// parsed type by type, every run of one type a loop of its own, each message written into
/// its place in the batch. The framing pass's only dependency from one record to the next
/// is where the next starts.
#[derive(Debug, Clone)]
pub struct Batch {
    messages: Box<[Message; BATCH]>,
    /// Where the batch's bytes start in the buffer.
    base: usize,
    /// Where each message's bytes start (its type byte), from `base` (a batch spans fewer
    /// than 2^16 bytes: checked at compile time).
    offsets: [u16; BATCH],
    /// Per type (its class), its messages in order: each one's index in the batch (the
    /// high half) and where it starts (the low half, as `offsets`), one load for both.
    runs: Box<[[u32; BATCH]; 32]>,
    counts: [u8; 32],
    len: usize,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    pub fn new() -> Self {
        Batch {
            messages: Box::new([Message::SystemEvent(SystemEvent::default()); BATCH]),
            base: 0,
            offsets: [0; BATCH],
            runs: Box::new([[0; BATCH]; 32]),
            counts: [0; 32],
            len: 0,
        }
    }

    /// Parse the records of `buf` from byte `pos` on, up to [`BATCH`] of them, and return
    /// where the next record starts ([`Batch::messages`] then holds them). It stops before
    /// a record that is not valid or is cut short by the end of `buf`, and reports that
    /// record's error (the one [`Stream`] gives, at its offset) only when it is the first:
    /// the call after the good records before it. `Ok(pos)` with no messages at the end of
    /// `buf`.
    pub fn parse(&mut self, buf: &[u8], pos: usize, framing: Framing) -> Result<usize> {
        self.len = 0;
        self.base = pos;
        let mut counts = [0u8; 32];
        let hdr = if framing == Framing::Raw { 0 } else { 2 };
        let prefixed = framing == Framing::LengthPrefixed;
        let rest = buf.get(pos..).unwrap_or_default();
        let mut n = 0;
        // Where the next record starts is the pass's only dependency from one record to the
        // next. A BinaryFILE's comes from this one's prefix, one load from where this
        // record starts (the type's length is two: the type, then its length): its low
        // byte, as every message is shorter than 256 bytes (its high byte must be zero),
        // so no byte swap is on the way either, and the record is read through a slice
        // that moves on with it (its start a pointer, one add from the next load). The
        // checks gather into one branch.
        let mut cur = rest;
        while n < BATCH {
            let (t, step) = if prefixed {
                let Some(&[p0, p1, t]) = cur.get(..3) else { break };
                let step = 2 + usize::from(p1);
                // An unknown type's length is no prefix's.
                let len = LEN_OR_NONE[usize::from(t)] as usize;
                if (p0 != 0) | (step != 2 + len) | (step > cur.len()) {
                    break;
                }
                (t, step)
            } else {
                let Some(&t) = cur.get(hdr) else { break };
                let len = usize::from(LEN_OF[usize::from(t)]);
                if (len == 0) | (hdr + len > cur.len()) {
                    break;
                }
                (t, hdr + len)
            };
            let class = usize::from(CLASS[usize::from(t)] & 31);
            // Where the record starts, from what is left (no count of its own to keep).
            let at = rest.len() - cur.len() + hdr;
            self.offsets[n] = at as u16;
            let k = counts[class];
            self.runs[class][usize::from(k) % BATCH] = (n as u32) << 16 | at as u32;
            counts[class] = k.wrapping_add(1);
            cur = &cur[step..];
            n += 1;
        }
        let at = rest.len() - cur.len();
        self.counts = counts;
        if n == 0 && at < rest.len() {
            // The first record is the bad one: the stream's error for it.
            return match frame_at(&rest[at..], framing) {
                Err(e) => Err(e.at(pos + at)),
                _ => Err(Error::Truncated {
                    what: "itch message",
                    offset: pos + at,
                    need: needed(&rest[at..], framing),
                    have: rest.len() - at,
                }),
            };
        }
        self.len = n;
        self.parse_runs(rest);
        Ok(pos + at)
    }

    /// The messages of the last [`Batch::parse`], in stream order.
    pub fn messages(&self) -> &[Message] {
        &self.messages[..self.len]
    }

    /// Where message `i` of [`Batch::messages`] starts in the buffer (its type byte).
    pub fn offset(&self, i: usize) -> usize {
        self.base + usize::from(self.offsets[i])
    }
}

/// Iterate over the messages of an in-memory stream, yielding `(byte offset, message bytes)`.
///
/// A length prefix that disagrees with the type's fixed length, an unknown type, or a
/// message cut short by the end of the buffer is an error at the message's byte offset,
/// after which the iterator stops.
#[derive(Debug, Clone)]
pub struct Stream<'a> {
    buf: &'a [u8],
    pos: usize,
    framing: Framing,
    failed: bool,
}

impl<'a> Stream<'a> {
    pub fn new(buf: &'a [u8], framing: Framing) -> Self {
        Stream { buf, pos: 0, framing, failed: false }
    }
    /// Byte offset of the next message (or prefix).
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    fn next_inner(&mut self) -> Result<(usize, &'a [u8])> {
        let at = self.pos;
        match frame_at(&self.buf[at..], self.framing) {
            Ok(Some((hdr, total))) => {
                self.pos = at + total;
                Ok((at + hdr, &self.buf[at + hdr..at + total]))
            }
            Ok(None) => {
                let have = self.buf.len() - at;
                Err(Error::Truncated {
                    what: "itch message",
                    offset: at,
                    need: needed(&self.buf[at..], self.framing),
                    have,
                })
            }
            Err(e) => Err(e.at(at)),
        }
    }
}

/// Bytes the record at the start of `rest` needs (for a truncation report).
fn needed(rest: &[u8], framing: Framing) -> usize {
    let hdr = if framing == Framing::Raw { 0 } else { 2 };
    rest.get(hdr).and_then(|&t| message_len(t)).map_or(hdr + 1, |n| hdr + n)
}

/// Frame the record at the start of `rest`: `Ok(Some((header_len, record_len)))` when it is
/// whole (the message is `rest[header_len..record_len]`), `Ok(None)` when `rest` ends
/// before it does (read more), or an error (offsets relative to `rest`) for an unknown
/// type or a length prefix that disagrees with the type.
#[inline]
pub fn frame_at(rest: &[u8], framing: Framing) -> Result<Option<(usize, usize)>> {
    let hdr = if framing == Framing::Raw { 0 } else { 2 };
    let Some(&t) = rest.get(hdr) else { return Ok(None) };
    let Some(len) = message_len(t) else {
        return Err(Error::Unsupported { what: "itch message type", offset: hdr, value: u64::from(t) });
    };
    if framing == Framing::LengthPrefixed {
        let prefix = u16::from_be_bytes([rest[0], rest[1]]);
        if usize::from(prefix) != len {
            return Err(Error::Malformed {
                what: "itch length prefix (disagrees with the message type's fixed length)",
                offset: 0,
                value: u64::from(prefix),
            });
        }
    }
    Ok((rest.len() >= hdr + len).then_some((hdr, hdr + len)))
}

impl<'a> Iterator for Stream<'a> {
    type Item = Result<(usize, &'a [u8])>;
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let r = self.next_inner();
        self.failed = r.is_err();
        Some(r)
    }
}

/// Append `m` to `out` as a BinaryFILE record (`[u16 BE length][message]`).
pub fn push_binary_file(out: &mut Vec<u8>, m: &Message) {
    let n = m.buffer_len();
    out.extend_from_slice(&(n as u16).to_be_bytes());
    let at = out.len();
    out.resize(at + n, 0);
    m.emit(&mut out[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_stock_is_where_the_types_keep_it() {
        let stock = *b"ABCD    ";
        for (t, len) in [(b'A', AddOrder::LEN), (b'F', AddOrderMpid::LEN), (b'P', Trade::LEN)] {
            let mut m = vec![0u8; len];
            m[0] = t;
            m[LOCATE].copy_from_slice(&7u16.to_be_bytes());
            m[ADD_STOCK].copy_from_slice(&stock);
            let (locate, got) = match Message::parse(&m).unwrap() {
                Message::AddOrder(a) => (a.stock_locate, a.stock),
                Message::AddOrderMpid(a) => (a.stock_locate, a.stock),
                Message::Trade(p) => (p.stock_locate, p.stock),
                other => panic!("{other:?}"),
            };
            assert_eq!((locate, got), (7, stock), "{}", t as char);
        }
    }

    fn add() -> AddOrder {
        AddOrder {
            stock_locate: 7,
            tracking_number: 2,
            timestamp: 34_200_000_000_123,
            order_reference_number: 0x0102_0304_0506_0708,
            buy_sell_indicator: b'B',
            shares: 100,
            stock: stock("AAPL"),
            price: 1_902_500,
        }
    }

    #[test]
    fn test_parse() {
        let mut b = [0xa5u8; 36];
        add().emit(&mut b);
        assert_eq!(&b[..3], &[b'A', 0, 7]);
        assert_eq!(&b[5..11], &[0x1f, 0x1a, 0xce, 0xd9, 0xf0, 0x7b]); // 34_200_000_000_123
        assert_eq!(Message::parse(&b).unwrap(), Message::AddOrder(add()));
    }

    #[test]
    fn test_emit() {
        // Every byte of every type is written: nothing of the 0xa5 fill survives in a message
        // whose fields are all zero except the type byte.
        for &t in MESSAGE_TYPES {
            let len = message_len(t).unwrap();
            let mut zero = vec![0u8; len];
            zero[0] = t;
            let m = Message::parse(&zero).unwrap();
            let mut b = vec![0xa5u8; len];
            m.emit(&mut b);
            assert_eq!(b, zero, "type {}", t as char);
            assert_eq!(m.buffer_len(), len);
            assert_eq!(m.message_type(), t);
        }
    }

    #[test]
    fn test_deconstruct() {
        let mut b = [0u8; 44];
        Trade {
            stock_locate: 1,
            tracking_number: 0,
            timestamp: 5,
            order_reference_number: 0,
            buy_sell_indicator: b'S',
            shares: 300,
            stock: stock("MSFT"),
            price: 4_200_100,
            match_number: 99,
        }
        .emit(&mut b);
        let Message::Trade(t) = Message::parse(&b).unwrap() else { panic!() };
        assert_eq!((t.shares, t.price, t.match_number), (300, 4_200_100, 99));
        assert_eq!(trim_stock(&t.stock), b"MSFT");
    }

    #[test]
    fn lengths_match_the_specification() {
        let want = [
            (b'S', 12),
            (b'R', 39),
            (b'H', 25),
            (b'Y', 20),
            (b'L', 26),
            (b'V', 35),
            (b'W', 12),
            (b'K', 28),
            (b'J', 35),
            (b'h', 21),
            (b'A', 36),
            (b'F', 40),
            (b'E', 31),
            (b'C', 36),
            (b'X', 23),
            (b'D', 19),
            (b'U', 35),
            (b'P', 44),
            (b'Q', 40),
            (b'B', 19),
            (b'I', 50),
            (b'N', 20),
            (b'O', 48),
        ];
        assert_eq!(MESSAGE_TYPES.len(), want.len());
        for (t, n) in want {
            assert_eq!(message_len(t), Some(n), "{}", t as char);
        }
    }

    #[test]
    fn errors_say_where() {
        assert!(matches!(Message::parse(&[]), Err(Error::Truncated { .. })));
        assert!(matches!(Message::parse(b"Z123"), Err(Error::Unsupported { value: 0x5a, .. })));
        assert!(matches!(Message::parse(b"D123"), Err(Error::Truncated { need: 19, have: 4, .. })));
        let mut d = [0u8; 20];
        d[0] = b'D';
        assert!(parse_exact(&d[..19]).is_ok());
        assert!(matches!(parse_exact(&d), Err(Error::Malformed { value: 20, .. })));
        let mut file = Vec::new();
        push_binary_file(&mut file, &Message::AddOrder(add()));
        push_binary_file(&mut file, &Message::AddOrder(add()));
        file[38..40].copy_from_slice(&0u16.to_be_bytes());
        let mut s = Stream::new(&file, Framing::LengthPrefixed);
        assert_eq!(s.next().unwrap().unwrap().0, 2);
        let e = s.next().unwrap().unwrap_err();
        assert_eq!(e.offset(), 38);
        assert!(s.next().is_none());
        let all: Vec<_> = Stream::new(&file, Framing::InferLength).collect::<Result<_>>().unwrap();
        assert_eq!(all.len(), 2);
        file[38..40].copy_from_slice(&36u16.to_be_bytes());
        let cut = &file[..file.len() - 1];
        let e = Stream::new(cut, Framing::LengthPrefixed).nth(1).unwrap().unwrap_err();
        assert_eq!(e.offset(), 38, "the record that is cut short starts at 38");
    }
}

//! Pre-built orders: [`OrderTemplate`], a NewOrderSingle serialized once and patched in place.

use super::*;

/// What a template refuses to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateError {
    /// The value needs more digits than the field's fixed width.
    TooWide(&'static str),
    /// A price with more decimals than the template writes, or negative.
    Price(i64),
    /// A symbol of another length than the template's.
    SymbolLength { want: usize, got: usize },
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::TooWide(what) => write!(f, "{what} does not fit the template's fixed width"),
            TemplateError::Price(p) => {
                write!(f, "price {} is negative or has more decimals than the template writes", format_decimal(*p))
            }
            TemplateError::SymbolLength { want, got } => {
                write!(f, "symbol of {got} bytes for a template built for {want}: build a template per symbol")
            }
        }
    }
}

impl std::error::Error for TemplateError {}

/// How a NewOrderSingle template is laid out.
#[derive(Debug, Clone)]
pub struct OrderSpec {
    pub begin_string: String,
    pub sender: String,
    pub target: String,
    pub symbol: String,
    /// `1` buy, `2` sell.
    pub side: u8,
    /// `1` market, `2` limit (a Price field is written for limit orders only).
    pub ord_type: u8,
    /// Extra constant fields, written after OrdType (Account, TimeInForce, ...).
    pub extra: Vec<(u32, String)>,
    pub seq_digits: usize,
    pub cl_ord_id_digits: usize,
    pub qty_digits: usize,
    /// Price: whole digits and decimals.
    pub price_digits: (usize, usize),
}

impl OrderSpec {
    pub fn new(begin_string: &str, sender: &str, target: &str, symbol: &str) -> Self {
        OrderSpec {
            begin_string: begin_string.into(),
            sender: sender.into(),
            target: target.into(),
            symbol: symbol.into(),
            side: b'1',
            ord_type: b'1',
            // HandlInst (21) is required in a FIX 4.2 NewOrderSingle (optional in 4.4):
            // 1, automated execution, no broker intervention.
            extra: if begin_string == "FIX.4.2" { vec![(21, "1".into())] } else { Vec::new() },
            seq_digits: 9,
            cl_ord_id_digits: 12,
            qty_digits: 9,
            price_digits: (7, 4),
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    at: usize,
    len: usize,
    /// The number the slot holds (numeric slots; the template starts with zeros).
    last: u64,
    /// The byte sum of the slot's digits (numeric slots).
    digit_sum: u32,
    /// The largest number the slot holds (numeric slots).
    max: u64,
}

/// A NewOrderSingle serialized once, patched in place. [`OrderTemplate::bytes`] gives the
/// message with its CheckSum up to date; only the bytes that changed were summed again.
#[derive(Debug, Clone)]
pub struct OrderTemplate {
    buf: Vec<u8>,
    /// Sum of the bytes before `10=`, modulo 2^32.
    sum: u32,
    check_at: usize,
    seq: Slot,
    time: Slot,
    cl_ord_id: Slot,
    symbol: Slot,
    side: Slot,
    qty: Slot,
    price: Option<Slot>,
    price_decimals: usize,
    transact_time: Slot,
    /// The millisecond of the timestamp written, and the byte sum of its 21 bytes.
    stamp_ms: u64,
    stamp_sum: u32,
    /// The stamp [`OrderTemplate::set_time`] keeps (the date formatted once a day).
    own_stamp: UtcStamp,
}

impl OrderTemplate {
    pub fn new(spec: &OrderSpec) -> Self {
        let mut body: Vec<u8> = Vec::new();
        let mut slots: Vec<(u32, usize, usize)> = Vec::new();
        let mut field = |body: &mut Vec<u8>, tag: u32, value: &[u8], slot: bool| {
            push_uint(body, u64::from(tag));
            body.push(b'=');
            if slot {
                slots.push((tag, body.len(), value.len()));
            }
            body.extend_from_slice(value);
            body.push(SOH);
        };
        let zeros = |n: usize| vec![b'0'; n];
        field(&mut body, tag::MSG_TYPE, b"D", false);
        field(&mut body, tag::SENDER_COMP_ID, spec.sender.as_bytes(), false);
        field(&mut body, tag::TARGET_COMP_ID, spec.target.as_bytes(), false);
        field(&mut body, tag::MSG_SEQ_NUM, &zeros(spec.seq_digits), true);
        // Both stamps start as the epoch, which `UtcStamp::default` holds.
        let epoch = UtcStamp::default();
        field(&mut body, tag::SENDING_TIME, &epoch.bytes, true);
        field(&mut body, tag::CL_ORD_ID, &zeros(spec.cl_ord_id_digits), true);
        field(&mut body, tag::SYMBOL, spec.symbol.as_bytes(), true);
        field(&mut body, tag::SIDE, &[spec.side], true);
        field(&mut body, tag::TRANSACT_TIME, &epoch.bytes, true);
        field(&mut body, tag::ORDER_QTY, &zeros(spec.qty_digits), true);
        field(&mut body, tag::ORD_TYPE, &[spec.ord_type], false);
        if spec.ord_type != b'1' {
            let (w, d) = spec.price_digits;
            let mut p = zeros(w);
            if d > 0 {
                p.push(b'.');
                p.extend(zeros(d));
            }
            field(&mut body, tag::PRICE, &p, true);
        }
        for (t, v) in &spec.extra {
            field(&mut body, *t, v.as_bytes(), false);
        }
        let mut buf = Vec::new();
        buf.extend_from_slice(b"8=");
        buf.extend_from_slice(spec.begin_string.as_bytes());
        buf.extend_from_slice(&[SOH, b'9', b'=']);
        push_uint(&mut buf, body.len() as u64);
        buf.push(SOH);
        let base = buf.len();
        buf.extend_from_slice(&body);
        let check_at = buf.len() + 3;
        buf.extend_from_slice(b"10=000\x01");
        let slot = |tag: u32| {
            slots
                .iter()
                .find(|s| s.0 == tag)
                .map(|s| Slot {
                    at: base + s.1,
                    len: s.2,
                    last: 0,
                    digit_sum: s.2 as u32 * u32::from(b'0'),
                    max: if s.2 < 20 { 10u64.pow(s.2 as u32) - 1 } else { u64::MAX },
                })
                .expect("the template has it")
        };
        let mut t = OrderTemplate {
            sum: byte_sum(&buf[..check_at - 3]),
            check_at,
            seq: slot(tag::MSG_SEQ_NUM),
            time: slot(tag::SENDING_TIME),
            cl_ord_id: slot(tag::CL_ORD_ID),
            symbol: slot(tag::SYMBOL),
            side: slot(tag::SIDE),
            qty: slot(tag::ORDER_QTY),
            price: (spec.ord_type != b'1').then(|| slot(tag::PRICE)),
            price_decimals: spec.price_digits.1,
            transact_time: slot(tag::TRANSACT_TIME),
            stamp_ms: epoch.ms,
            stamp_sum: epoch.sum,
            own_stamp: epoch,
            buf,
        };
        t.write_checksum();
        t
    }

    /// Replace the bytes of `slot` (same length), keeping the sum.
    #[inline]
    fn patch(&mut self, slot: Slot, new: &[u8]) {
        let old = &mut self.buf[slot.at..slot.at + slot.len];
        for (o, &n) in old.iter_mut().zip(new) {
            self.sum = self.sum.wrapping_add(u32::from(n)).wrapping_sub(u32::from(*o));
            *o = n;
        }
    }
    /// Write the number `v` into a numeric slot (the same number costs nothing). Callers
    /// that send many orders keep a [`DigitCounter`] and use the `_from` setters, where the
    /// next number is a carry rather than a formatting.
    #[inline]
    fn set_number(
        buf: &mut [u8],
        sum: &mut u32,
        slot: &mut Slot,
        v: u64,
        what: &'static str,
    ) -> core::result::Result<(), TemplateError> {
        if v == slot.last {
            return Ok(());
        }
        let mut c = DigitCounter::default();
        c.set(v);
        Self::set_from(buf, sum, slot, &c, what)
    }
    /// Do MsgSeqNum `seq` and ClOrdID `cl_ord_id` fit their fields? Exactly what
    /// [`OrderTemplate::set_seq_num_from`] and [`OrderTemplate::set_cl_ord_id_from`]
    /// refuse, for a caller that must know before it commits to the order.
    #[inline]
    pub fn fits(&self, seq: u64, cl_ord_id: u64) -> bool {
        seq <= self.seq.max && cl_ord_id <= self.cl_ord_id.max
    }
    /// MsgSeqNum from a counter (the fast way when one counter feeds many templates).
    #[inline]
    pub fn set_seq_num_from(&mut self, c: &DigitCounter) -> core::result::Result<(), TemplateError> {
        Self::set_from(&mut self.buf, &mut self.sum, &mut self.seq, c, "MsgSeqNum")
    }
    /// ClOrdID from a counter.
    #[inline]
    pub fn set_cl_ord_id_from(&mut self, c: &DigitCounter) -> core::result::Result<(), TemplateError> {
        Self::set_from(&mut self.buf, &mut self.sum, &mut self.cl_ord_id, c, "ClOrdID")
    }
    #[inline]
    fn set_from(
        buf: &mut [u8],
        sum: &mut u32,
        slot: &mut Slot,
        c: &DigitCounter,
        what: &'static str,
    ) -> core::result::Result<(), TemplateError> {
        let v = c.value();
        if v == slot.last {
            return Ok(());
        }
        if v > slot.max {
            return Err(TemplateError::TooWide(what));
        }
        // The CheckSum moves by the difference of the two digit sums: no byte loop.
        let new_sum = c.tail_sum(slot.len);
        *sum = sum.wrapping_add(new_sum).wrapping_sub(slot.digit_sum);
        slot.digit_sum = new_sum;
        copy_short(&mut buf[slot.at..slot.at + slot.len], c.tail(slot.len));
        slot.last = v;
        Ok(())
    }
    pub fn set_seq_num(&mut self, n: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.seq, n, "MsgSeqNum")
    }
    pub fn set_cl_ord_id(&mut self, n: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.cl_ord_id, n, "ClOrdID")
    }
    pub fn set_qty(&mut self, q: u64) -> core::result::Result<(), TemplateError> {
        Self::set_number(&mut self.buf, &mut self.sum, &mut self.qty, q, "OrderQty")
    }
    /// `b'1'` buy, `b'2'` sell.
    pub fn set_side(&mut self, side: u8) {
        self.patch(self.side, &[side]);
    }
    /// SendingTime and TransactTime, from UNIX ns (millisecond resolution). A caller that
    /// stamps many orders keeps one [`UtcStamp`] and uses [`OrderTemplate::set_time_from`].
    pub fn set_time(&mut self, unix_ns: u64) {
        let mut stamp = self.own_stamp;
        stamp.set(unix_ns);
        self.own_stamp = stamp;
        self.set_time_from(&stamp);
    }
    /// SendingTime and TransactTime from a shared stamp: two fixed 21-byte copies and the
    /// CheckSum moved by the difference of the sums (nothing when the millisecond is the
    /// one the template holds).
    #[inline]
    pub fn set_time_from(&mut self, stamp: &UtcStamp) {
        if stamp.ms == self.stamp_ms {
            return;
        }
        self.stamp_ms = stamp.ms;
        // Both fields hold the same bytes: the difference counts twice.
        self.sum = self.sum.wrapping_add(stamp.sum.wrapping_sub(self.stamp_sum).wrapping_mul(2));
        self.stamp_sum = stamp.sum;
        self.buf[self.time.at..][..21].copy_from_slice(&stamp.bytes);
        self.buf[self.transact_time.at..][..21].copy_from_slice(&stamp.bytes);
    }
    /// The price in 1e-9 units (limit orders).
    pub fn set_price(&mut self, p: i64) -> core::result::Result<(), TemplateError> {
        let Some(mut slot) = self.price else { return Ok(()) };
        if p as u64 == slot.last {
            return Ok(());
        }
        let d = self.price_decimals;
        let unit = 10u64.pow(9 - d as u32);
        if p < 0 || !(p as u64).is_multiple_of(unit) {
            return Err(TemplateError::Price(p));
        }
        let v = p as u64 / unit;
        let whole_len = slot.len - if d > 0 { d + 1 } else { 0 };
        let mut b = [0u8; 32];
        if slot.len > 32 || !put_digits(&mut b[..whole_len], v / 10u64.pow(d as u32)) {
            return Err(TemplateError::TooWide("Price"));
        }
        if d > 0 {
            b[whole_len] = b'.';
            put_digits(&mut b[whole_len + 1..slot.len], v % 10u64.pow(d as u32));
        }
        self.patch(slot, &b[..slot.len]);
        slot.last = p as u64;
        self.price = Some(slot);
        Ok(())
    }
    /// A symbol of the same length as the template's (build a template per symbol).
    pub fn set_symbol(&mut self, symbol: &[u8]) -> core::result::Result<(), TemplateError> {
        if symbol.len() != self.symbol.len {
            return Err(TemplateError::SymbolLength { want: self.symbol.len, got: symbol.len() });
        }
        self.patch(self.symbol, symbol);
        Ok(())
    }
    fn write_checksum(&mut self) {
        // The three digits and the SOH after them as one four-byte store from a table:
        // no division by 10 per order.
        self.buf[self.check_at..self.check_at + 4].copy_from_slice(&CHECKSUM_FIELD[(self.sum % 256) as usize]);
    }
    /// The message, ready to send.
    #[inline]
    pub fn bytes(&mut self) -> &[u8] {
        self.write_checksum();
        &self.buf
    }
}

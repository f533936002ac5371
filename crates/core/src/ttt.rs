//! Tick-to-trade, sans-IO: the `fttc` strategy of the reference harness, from the bytes of
//! a market-data datagram to the bytes of the orders it decides.
//!
//! [`Fttc::on_market_data`] validates the FIX message (framing, BodyLength, CheckSum),
//! walks its fields once without building an index, and for every MDEntryPx (270) whose
//! value is a whole number of dollars (`123.000` and `123` alike) it decides a market BUY of
//! the configured quantity of that entry's Symbol (55) (the last one before the price; an
//! entry with none orders nothing and is counted as `no_symbol`). Each order passes the pre-trade
//! risk checks ([`crate::risk::Risk`]) and is written by patching the symbol's pre-built
//! [`OrderTemplate`]: the order bytes exist before the decision, as in the hardware design
//! we follow. [`Fttc::on_execution`] turns each BUY fill into a SELL of the same quantity.
//!
//! When the price collar is on, every trade entry (MDEntryType (269) `2`) sets its
//! symbol's last trade before the entry's own price is judged. A 269 applies to its own
//! entry only: the next MDEntryPx, or an MDUpdateAction (279, the incremental refresh's
//! entry delimiter), ends it. An order counts as open for risk only once its bytes are
//! written: one the template refuses never takes room under `max-open-orders`.
//!
//! No allocation per message once a symbol has been seen (its template is built the first
//! time it appears).
//!
//! One file (about 1,230 lines, 400 of them tests): the walk over a datagram's fields, the
//! symbol cache and the order path are one hot loop, read and tuned together (`cargo bench
//! -p tickplant-core --bench ttt`).

use crate::fxhash::FxMap;

use tickplant_wire::fix::{self, DigitCounter, Message, OrderSpec, OrderTemplate, TemplateError, UtcStamp};

use crate::risk::{OrderIntent, Risk, RiskLimits, RiskReject};
use crate::trigger::{Entry, TriggerAction, Triggers};

/// Where the caller takes over: the orders to send, and (for latency marks) the moments
/// the datagram was validated and an entry was decided.
pub trait FttcOutput {
    /// The message is validated (framing, BodyLength, CheckSum).
    fn parsed(&mut self) {}
    /// An entry's price trades: the decision is made (before risk and the template).
    fn decided(&mut self) {}
    /// An order, ready: its MsgSeqNum and bytes.
    fn send(&mut self, seq: u64, order: &[u8]);
}

impl<F: FnMut(u64, &[u8])> FttcOutput for F {
    fn send(&mut self, seq: u64, order: &[u8]) {
        self(seq, order)
    }
}

/// What [`Fttc`] needs to know.
#[derive(Debug, Clone)]
pub struct FttcConfig {
    pub begin_string: String,
    pub sender: String,
    pub target: String,
    pub qty: u64,
    pub limits: RiskLimits,
    /// Constant fields every order carries (Account, TimeInForce, ExDestination, ...), as
    /// `(tag, value)`; see [`parse_order_field`].
    pub order_fields: Vec<(u32, String)>,
}

/// Tags the engine writes itself in every order (the header, the trailer and the patched
/// slots): not for `order_fields`.
const ORDER_TAGS: [u32; 18] = [8, 9, 10, 11, 34, 35, 38, 40, 43, 44, 49, 52, 54, 55, 56, 60, 97, 122];

/// A constant order field from `TAG=VALUE` (`1=ACCT42`, `59=0`): refused when the tag is one
/// the engine writes itself, or the value is empty or holds an SOH.
pub fn parse_order_field(s: &str) -> Result<(u32, String), String> {
    let (tag, value) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected TAG=VALUE, such as 1=ACCT42"))?;
    let tag: u32 =
        tag.trim().parse().ok().filter(|&t| t > 0).ok_or_else(|| format!("{s:?}: {tag:?} is not a FIX tag number"))?;
    if ORDER_TAGS.contains(&tag) {
        return Err(format!(
            "{s:?}: tag {tag} is written by the engine itself (header, ClOrdID, Symbol, Side, OrderQty, OrdType, \
             Price, times)"
        ));
    }
    if value.is_empty() || value.contains('\x01') {
        return Err(format!("{s:?}: the value must be non-empty and hold no SOH"));
    }
    Ok((tag, value.to_string()))
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FttcStats {
    pub messages: u64,
    pub undecodable: u64,
    pub entries: u64,
    pub whole_dollar: u64,
    pub buys: u64,
    pub sells: u64,
    pub buy_fills: u64,
    pub sell_fills: u64,
    /// ExecutionReports with OrdStatus New (acknowledgements).
    pub acks: u64,
    /// Orders the exchange refused: an ExecutionReport with OrdStatus Rejected (39=8), or a
    /// session-level Reject or BusinessMessageReject of the order ([`Fttc::on_refused`]).
    pub rejected: u64,
    /// Orders that ended unfilled: ExecutionReports with OrdStatus Canceled (4) or
    /// Expired (C).
    pub cancelled: u64,
    /// ExecutionReports with OrdStatus Partially filled (1): each moves the position by its
    /// LastQty; the order's last fill (Filled) counts as its fill.
    pub partial_fills: u64,
    /// Orders the template could not hold (a number too wide).
    pub template_errors: u64,
    /// Entries whose price would trade but which name no Symbol (55), in their own fields
    /// or an earlier entry's: no order (it would go out with an empty Symbol).
    pub no_symbol: u64,
    /// BUY fills resent after a restart whose SELL had gone out before it (its ClOrdID is
    /// among those [`Fttc::set_sent_before`] gave): not sent twice.
    pub sells_sent_before: u64,
}

/// A new order's ClOrdID from `next` (every other number: the one after is the SELL's of
/// its fill). A free function, so that it can be called while a symbol's state is borrowed.
fn take_id(next: &mut u64) -> u64 {
    let id = *next;
    *next += 2;
    id
}

/// A symbol's state; its index in `Fttc::symbols` is its id (for risk).
struct SymbolState {
    template: OrderTemplate,
    /// The price of the last BUY (the SELL's risk checks use it).
    last_px: i64,
}

/// Why a datagram was not market data the strategy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MdError {
    Fix(tickplant_wire::Error),
    /// A price that is not a decimal.
    Price {
        offset: usize,
    },
}

impl std::fmt::Display for MdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MdError::Fix(e) => write!(f, "{e}"),
            MdError::Price { offset } => write!(f, "MDEntryPx (270) at byte {offset} is not a decimal"),
        }
    }
}

/// The strategy's state.
pub struct Fttc {
    cfg: FttcConfig,
    /// Symbols of up to 8 bytes, by their bytes as one number (no byte comparison).
    short_ids: FxMap<u128, u32>,
    /// The ids of recent symbols of up to 8 bytes, direct-mapped by a hash of their bytes:
    /// (bytes as one word, length, id); length 0 is an empty slot. One load and compare
    /// where the map's lookup costs about 70 instructions. Ids never change, so an entry
    /// never goes stale.
    recent_ids: Box<[(u64, u32, u32); RECENT_IDS]>,
    ids: FxMap<Box<[u8]>, u32>,
    symbols: Vec<SymbolState>,
    risk: Risk,
    /// The configured quantity fits the order template (every symbol's is built from the
    /// same spec). Else the strategy's orders would carry a wrong OrderQty: each is counted
    /// as a template error instead.
    qty_fits: bool,
    /// The ClOrdID of the next new order. New orders take every other number; the SELL of
    /// a BUY's fill takes the number after the BUY's, so that a fill handled twice (resent
    /// after a restart) gives the same SELL, which is sent once ([`Fttc::set_sent_before`])
    /// and which a venue refuses as a duplicate ClOrdID if it comes again.
    next_id: u64,
    /// ClOrdIDs of orders sent before a restart (the session's store).
    sent_before: std::collections::HashSet<u64>,
    /// MsgSeqNum and ClOrdID as digits, shared by every symbol's template.
    counters: Counters,
    stats: FttcStats,
    /// With triggers, they decide instead of the whole-dollar rule (and fills are only
    /// counted).
    triggers: Option<Triggers>,
    fired: Vec<(u64, TriggerAction)>,
    spare: Option<fix::FieldIndex<'static>>,
}

#[derive(Default)]
struct Counters {
    seq: DigitCounter,
    id: DigitCounter,
    /// SendingTime and TransactTime of the current millisecond.
    stamp: UtcStamp,
}

impl std::fmt::Debug for Fttc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fttc").field("symbols", &self.symbols.len()).field("stats", &self.stats).finish()
    }
}

impl Fttc {
    pub fn new(cfg: FttcConfig) -> Self {
        let qty_fits = OrderTemplate::new(&Self::spec(&cfg, "")).set_qty(cfg.qty).is_ok();
        Fttc {
            risk: Risk::new(cfg.limits),
            qty_fits,
            cfg,
            short_ids: FxMap::default(),
            recent_ids: Box::new([(0, 0, 0); RECENT_IDS]),
            ids: FxMap::default(),
            symbols: Vec::new(),
            next_id: 1,
            sent_before: std::collections::HashSet::new(),
            counters: Counters::default(),
            stats: FttcStats::default(),
            triggers: None,
            fired: Vec::new(),
            spare: Some(fix::FieldIndex::new()),
        }
    }
    pub fn stats(&self) -> FttcStats {
        self.stats
    }
    /// A message of ours the exchange refused at the session level (a Reject, 35=3, or a
    /// BusinessMessageReject, 35=j, naming its MsgSeqNum): if it was one of our orders, it
    /// is counted as rejected and no longer counts against the limits.
    pub fn on_refused(&mut self, sent: &[u8]) {
        let Ok(m) = Message::new_checked(sent) else { return };
        if m.msg_type() != b"D" {
            return;
        }
        let (mut side, mut symbol, mut qty): (&[u8], &[u8], u64) = (&[], &[], self.cfg.qty);
        for f in m.fields().flatten() {
            match f.tag {
                54 => side = f.value,
                55 => symbol = f.value,
                38 => qty = shares(&f).unwrap_or(qty),
                _ => {}
            }
        }
        self.stats.rejected += 1;
        if let Some(i) = self.known(symbol) {
            self.risk.on_done(i, side == b"1", qty);
        }
    }
    /// The ClOrdID of the next order (1 unless set). A venue refuses a ClOrdID it has
    /// seen that day: an engine that starts again must not count from 1 again.
    pub fn set_next_cl_ord_id(&mut self, n: u64) {
        self.next_id = n;
    }
    /// The ClOrdIDs of the orders sent before a restart (read from the session's store): a
    /// BUY fill resent at logon whose SELL is among them does not send it again.
    pub fn set_sent_before(&mut self, ids: impl IntoIterator<Item = u64>) {
        self.sent_before = ids.into_iter().collect();
    }

    pub fn risk(&self) -> &Risk {
        &self.risk
    }
    pub fn risk_mut(&mut self) -> &mut Risk {
        &mut self.risk
    }
    /// Decide by `triggers` instead of the whole-dollar rule (`None`: back to the rule).
    pub fn set_triggers(&mut self, triggers: Option<Triggers>) {
        self.triggers = triggers;
    }
    pub fn triggers_mut(&mut self) -> Option<&mut Triggers> {
        self.triggers.as_mut()
    }

    /// Build the templates of symbols known in advance (otherwise built on first sight).
    pub fn prepare(&mut self, symbol: &[u8]) {
        self.id(symbol);
    }

    /// The symbol's index (its template is built the first time).
    #[inline]
    fn id(&mut self, symbol: &[u8]) -> u32 {
        let found = match short_key(symbol) {
            Some(k) => self.short_ids.get(&k).copied(),
            None => self.ids.get(symbol).copied(),
        };
        match found {
            Some(i) => i,
            None => self.add(symbol),
        }
    }
    /// [`Fttc::id`] of the symbol at `buf[start..end]`, where eight bytes can be read from
    /// `start` (a field inside a message, the trailer after it): the key is read from the
    /// message as one word. Built from a copy on the stack, the key's wide load waited for
    /// the copy's narrow stores to drain.
    #[inline]
    fn id_in(&mut self, buf: &[u8], start: usize, end: usize) -> u32 {
        let len = end - start;
        match buf.get(start..start + 8) {
            // Length 0 marks an empty cache slot: an empty symbol takes the map's way.
            Some(w) if (1..=8).contains(&len) => {
                let w = word_bytes(u64::from_le_bytes(w.try_into().expect("eight bytes")), len);
                let slot = recent_slot(w, len);
                let (word, n, id) = self.recent_ids[slot];
                if word == w && n as usize == len {
                    return id;
                }
                let id = match self.short_ids.get(&word_key(w, len)).copied() {
                    Some(i) => i,
                    None => self.add(&buf[start..end]),
                };
                self.recent_ids[slot] = (w, len as u32, id);
                id
            }
            _ => self.id(&buf[start..end]),
        }
    }
    /// The index of a symbol already seen.
    fn known(&self, symbol: &[u8]) -> Option<u32> {
        match short_key(symbol) {
            Some(k) => self.short_ids.get(&k).copied(),
            None => self.ids.get(symbol).copied(),
        }
    }

    /// The order spec of every template: the session's ids and `symbol`.
    fn spec(cfg: &FttcConfig, symbol: &str) -> OrderSpec {
        let mut spec = OrderSpec::new(&cfg.begin_string, &cfg.sender, &cfg.target, symbol);
        // The user's fields take the place of a default of the same tag (HandlInst).
        spec.extra.retain(|(t, _)| !cfg.order_fields.iter().any(|(u, _)| u == t));
        spec.extra.extend(cfg.order_fields.iter().cloned());
        spec
    }

    #[cold]
    fn add(&mut self, symbol: &[u8]) -> u32 {
        let id = self.symbols.len() as u32;
        let mut template = OrderTemplate::new(&Self::spec(&self.cfg, &String::from_utf8_lossy(symbol)));
        // The configured quantity, written once when it fits (triggers patch their own per
        // order).
        if self.qty_fits {
            template.set_qty(self.cfg.qty).expect("the quantity fits the spec every template shares");
        }
        self.symbols.push(SymbolState { template, last_px: 0 });
        match short_key(symbol) {
            Some(k) => self.short_ids.insert(k, id),
            None => self.ids.insert(symbol.into(), id),
        };
        id
    }

    /// One market-data datagram at `now` (UNIX ns). Each order decided is written with
    /// MsgSeqNum `*next_seq` (then incremented) and handed to `send`.
    pub fn on_market_data(
        &mut self,
        now: u64,
        bytes: &[u8],
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> Result<usize, MdError> {
        self.stats.messages += 1;
        // Everything `new_checked` checks, the CheckSum apart: that one comes from the
        // pass that also finds the body's SOH bytes for the walk (each byte loaded once for
        // both), for a message of up to 512 bytes; a longer one is summed alone and its
        // walk finds the SOH bytes as it goes.
        let mut bits = [0u64; fix::SCAN_WORDS];
        let checked = Message::new_unsummed(bytes).and_then(|m| {
            let body = &bytes[..m.body().1];
            let pre = fix::soh_bits_and_sum(body, &mut bits);
            m.check_sum(pre.unwrap_or_else(|| fix::checksum(body)))?;
            Ok((m, pre.is_some()))
        });
        let (m, pre) = match checked {
            Ok(x) => x,
            Err(e) => {
                self.stats.undecodable += 1;
                return Err(MdError::Fix(e));
            }
        };
        send.parsed();
        if self.triggers.is_some() {
            return self.by_triggers(now, &m, next_seq, send);
        }
        // The loop in copies, so that a run without the collar does not ask about trades
        // at every field, and a walk with its SOH bits found reads them from `bits`.
        match (pre, self.risk.wants_trades()) {
            (true, true) => self.scan::<true, _>(now, &m, &bits, next_seq, send),
            (true, false) => self.scan::<false, _>(now, &m, &bits, next_seq, send),
            (false, true) => self.scan::<true, _>(now, &m, &Lazy, next_seq, send),
            (false, false) => self.scan::<false, _>(now, &m, &Lazy, next_seq, send),
        }
    }

    /// [`Fttc::on_market_data`]'s pass over the fields; `TRADES`: the collar wants trade
    /// prices.
    #[inline(always)]
    fn scan<const TRADES: bool, S: SohBits>(
        &mut self,
        now: u64,
        m: &Message<'_>,
        sohs_of: &S,
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> Result<usize, MdError> {
        // The current entry's Symbol (55), as `buf[sym.0..sym.1]`: the last one seen (an
        // entry without its own has the one before it), empty until there is one.
        let mut sym = (0usize, 0usize);
        let mut orders = 0;
        // This entry is a trade (its 269 was `2`) and the collar wants to know.
        let mut trade = false;
        let buf = m.as_bytes();
        let (_, body_end) = m.body();
        // The body and the 7-byte trailer after it: for every field start `i < end`, the
        // word at `i` lies inside (checked once here, not per field). `end` is taken back
        // from `scan`'s length, so that the compiler sees it too and checks nothing per field.
        let scan = buf.get(..body_end + 7).ok_or(MdError::Fix(truncated(body_end)))?;
        let end = scan.len().checked_sub(7).ok_or(MdError::Fix(truncated(body_end)))?;
        let body = &buf[..end];
        let mut i = m.after_msg_type();
        // One pass over the body's fields that reads only Symbol (55) and MDEntryPx (270):
        // each field is recognised by its first four bytes, and only a field whose tag
        // announces a data field (which may hold SOH bytes) is read the long way. Where
        // the fields end comes from `sohs`, the SOH bytes of 64 bytes from `base` as bits
        // (found 16 at a time): the next field's start is known without reading this one,
        // so fields do not wait on each other's loads.
        let (mut base, mut sohs) = sohs_of.start(body, i);
        // Driven by the SOH bits alone: each field takes the lowest bit left, so that its
        // SOH is at or after its start (`i <= soh`), and the walk ends when the body has
        // no SOH left (the body ends with one, checked by `new_unsummed`: `i == end` then).
        // No separate `i < end` test per field.
        loop {
            while sohs == 0 {
                base += 64;
                if base >= end {
                    debug_assert_eq!(i, end, "the body ends with an SOH");
                    return Ok(orders);
                }
                sohs = sohs_of.next(body, base);
            }
            let soh = base + sohs.trailing_zeros() as usize;
            sohs &= sohs - 1;
            debug_assert!(i <= soh && soh < end && end + 7 == scan.len());
            // SAFETY: `i <= soh` (above) and `soh < end`, as `sohs_of` sets no bit past
            // `body`'s end (the contract of `fix::soh_bits` and of `fix::soh_bits_and_sum`,
            // whose words of the same body `bits` are, each property-tested against a byte
            // loop), and `end == scan.len() - 7` (`checked_sub` above), so `i + 8 <=
            // scan.len()`: the eight bytes are inside `scan` (the field's first bytes, then
            // those after them, the trailer's at the last field). This read is the walk's
            // only unchecked one.
            #[allow(unsafe_code)]
            let word = u64::from_le_bytes(unsafe { *scan.as_ptr().add(i).cast::<[u8; 8]>() });
            let head = word as u32;
            if head & 0x00ff_ffff == u32::from_le_bytes(*b"55=\0") {
                sym = (i + 3, soh);
                i = soh + 1;
                continue;
            }
            if head == u32::from_le_bytes(*b"270=") {
                self.stats.entries += 1;
                let at = i;
                i = soh + 1;
                // The symbol is looked up only for a trade (the collar) or a price that
                // trades, and once for both. Any other price is only judged whole or not:
                // its value is worked out only when it is whole.
                let mut id = None;
                let px = if std::mem::take(&mut trade) && sym.0 != sym.1 {
                    let px = fix::parse_decimal_in(buf, at + 4, soh).ok_or(MdError::Price { offset: at })?;
                    let k = self.id_in(buf, sym.0, sym.1);
                    self.risk.on_trade(k, px);
                    id = Some(k);
                    if px % 1_000_000_000 != 0 {
                        continue;
                    }
                    px
                } else {
                    match fix::whole_decimal_in(buf, at + 4, soh) {
                        Some(Some(px)) => px,
                        Some(None) => continue,
                        None => return Err(MdError::Price { offset: at }),
                    }
                };
                if sym.0 == sym.1 {
                    self.stats.whole_dollar += 1;
                    self.stats.no_symbol += 1;
                    continue;
                }
                send.decided();
                let id = match id {
                    Some(k) => k,
                    None => self.id_in(buf, sym.0, sym.1),
                };
                let st = &mut self.symbols[id as usize];
                st.last_px = px;
                self.stats.whole_dollar += 1;
                let intent = OrderIntent { symbol: id, buy: true, qty: self.cfg.qty, price: px };
                // The template is asked first, so that the risk checks and the counting of
                // the order as open are one step (`check`): after both, the order goes.
                if !self.qty_fits || !st.template.fits(*next_seq, self.next_id + 1) {
                    self.stats.template_errors += 1;
                    continue;
                }
                if self.risk.check(now, &intent).is_err() {
                    continue;
                }
                let cl_ord_id = take_id(&mut self.next_id);
                if order(st, &mut self.counters, cl_ord_id, b'1', now, next_seq, send).is_ok() {
                    self.stats.buys += 1;
                    orders += 1;
                } else {
                    // Not reached (`fits` said yes): were it, the order is not open.
                    self.risk.on_done(id, true, intent.qty);
                    self.stats.template_errors += 1;
                }
                continue;
            }
            if TRADES {
                if head == u32::from_le_bytes(*b"269=") {
                    // The value is exactly `2`: `2` and the SOH, in the word already read.
                    trade = word & 0xffff_ffff_ffff == u64::from_le_bytes(*b"269=2\x01\0\0");
                    i = soh + 1;
                    continue;
                }
                if head == u32::from_le_bytes(*b"279=") {
                    trade = false;
                    i = soh + 1;
                    continue;
                }
            }
            if maybe_data(head) && announces_data(head) {
                // A length field: the data field it announces, when that comes next, may
                // hold SOH bytes and is read by its length (the slow reader, as the full
                // reader reads it). Anything else after it is the walk's again.
                let mut fields = fix::Fields::starting_at(buf, i, end);
                let length = fields.next().ok_or(MdError::Fix(truncated(i)))?.map_err(MdError::Fix)?;
                if let Some((tag, _)) = length.announces() {
                    let mut data = fields.clone();
                    match data.next() {
                        Some(Ok(f)) if f.tag == tag => fields = data,
                        Some(Err(e)) => return Err(MdError::Fix(e)),
                        _ => {}
                    }
                }
                i = fields.position();
                // Past the data field: the bits start again from here.
                (base, sohs) = sohs_of.start(body, i);
                continue;
            }
            i = soh + 1;
        }
    }

    /// An ExecutionReport for one of our orders: a BUY fill sends the SELL.
    pub fn on_execution(
        &mut self,
        now: u64,
        report: &[u8],
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> Result<(), MdError> {
        let m = Message::new_checked(report).map_err(MdError::Fix)?;
        let (mut status, mut side, mut symbol, mut qty) = (&[][..], &[][..], &[][..], 0u64);
        let (mut leaves, mut order_qty, mut cl_ord_id) = (None, None, None);
        for f in m.fields() {
            let f = f.map_err(MdError::Fix)?;
            match f.tag {
                11 => cl_ord_id = f.as_uint().ok(),
                39 => status = f.value,
                54 => side = f.value,
                55 => symbol = f.value,
                32 => qty = shares(&f).unwrap_or(0),
                151 => leaves = shares(&f),
                38 => order_qty = shares(&f),
                _ => {}
            }
        }
        if status == b"0" {
            self.stats.acks += 1;
        }
        if matches!(status, b"8" | b"4" | b"C") {
            // Ended unfilled: its open quantity no longer counts against the limits.
            if status == b"8" {
                self.stats.rejected += 1;
            } else {
                self.stats.cancelled += 1;
            }
            // What was still open: LeavesQty where the exchange says (a cancel after
            // partial fills), else the order's whole quantity.
            let open = leaves.filter(|&l| l > 0).or(order_qty).unwrap_or(self.cfg.qty);
            if let Some(i) = self.known(symbol) {
                self.risk.on_done(i, side == b"1", open);
            }
            return Ok(());
        }
        if status == b"1" {
            // A partial fill: the position moves by its LastQty, the order stays open; the
            // SELL waits for the last fill (OrdStatus Filled).
            self.stats.partial_fills += 1;
            if !symbol.is_empty() {
                let i = match self.known(symbol) {
                    Some(i) => i,
                    None => self.add(symbol),
                };
                self.risk.on_fill(i, side == b"1", qty, false);
            }
            return Ok(());
        }
        if status != b"2" {
            return Ok(());
        }
        if symbol.is_empty() {
            return Ok(());
        }
        // A fill of a symbol whose market data has not come yet: an order sent before a
        // restart, filled while the engine was away and resent at logon. Its SELL goes out
        // as any other's.
        let i = match self.known(symbol) {
            Some(i) => i,
            None => self.add(symbol),
        };
        let st = &mut self.symbols[i as usize];
        let (id, px) = (i, st.last_px);
        if self.triggers.is_some() {
            // Triggers send their own orders: a fill is only counted.
            if side == b"1" {
                self.stats.buy_fills += 1;
            } else {
                self.stats.sell_fills += 1;
            }
            self.risk.on_fill(id, side == b"1", qty, true);
            return Ok(());
        }
        if side == b"1" {
            self.stats.buy_fills += 1;
            self.risk.on_fill(id, true, qty, true);
            let intent = OrderIntent { symbol: id, buy: false, qty: self.cfg.qty, price: px };
            // The BUY's own number plus one: the same fill gives the same SELL. (A BUY's
            // ClOrdID that is not a number, not ours: a number of the SELL's own.)
            let sell_id = match cl_ord_id {
                Some(buy) => buy + 1,
                None => take_id(&mut self.next_id) + 1,
            };
            if self.sent_before.contains(&sell_id) {
                // Sent before a restart: open (or filled, its fill to come) at the venue.
                self.stats.sells_sent_before += 1;
                self.risk.on_sent(now, &intent);
            } else if !self.qty_fits {
                self.stats.template_errors += 1;
            } else if self.risk.verdict(now, &intent).is_ok() {
                match order(st, &mut self.counters, sell_id, b'2', now, next_seq, send) {
                    Ok(()) => {
                        self.risk.on_sent(now, &intent);
                        self.stats.sells += 1;
                    }
                    Err(_) => self.stats.template_errors += 1,
                }
            }
        } else {
            self.stats.sell_fills += 1;
            self.risk.on_fill(id, false, qty, true);
        }
        Ok(())
    }

    /// The general path: every entry of the NoMDEntries group (its first field is its
    /// delimiter) goes through the triggers.
    fn by_triggers(
        &mut self,
        now: u64,
        m: &Message<'_>,
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> Result<usize, MdError> {
        let mut ix = self.spare.take().unwrap_or_default().recycle();
        let r = self.by_triggers_in(now, m, &mut ix, next_seq, send);
        self.spare = Some(ix.recycle());
        r
    }

    fn by_triggers_in<'a>(
        &mut self,
        now: u64,
        m: &Message<'a>,
        ix: &mut fix::FieldIndex<'a>,
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> Result<usize, MdError> {
        ix.parse(m).map_err(MdError::Fix)?;
        let Some(p) = ix.fields().iter().position(|f| f.tag == fix::tag::NO_MD_ENTRIES) else { return Ok(0) };
        let Some(delim) = ix.fields().get(p + 1).map(|f| f.tag) else { return Ok(0) };
        let mut orders = 0;
        let group = ix.group(fix::tag::NO_MD_ENTRIES, delim, &[]).map_err(MdError::Fix)?;
        let mut fired = std::mem::take(&mut self.fired);
        for e in group {
            let mut entry = Entry::default();
            for f in e {
                match f.tag {
                    55 => entry.symbol = f.value,
                    269 => entry.entry_type = Some(f.value),
                    270 => entry.price = Some(fix::parse_decimal(f.value).ok_or(MdError::Price { offset: f.offset })?),
                    271 => entry.size = f.as_uint().ok(),
                    _ => {}
                }
            }
            if let Some(px) = entry.price {
                self.stats.entries += 1;
                if px % 1_000_000_000 == 0 {
                    self.stats.whole_dollar += 1;
                }
            }
            orders += self.fire_entry(now, &entry, &mut fired, next_seq, send);
        }
        self.fired = fired;
        Ok(orders)
    }

    /// Run one entry of any feed through the triggers (the trigger mode's entry point for
    /// the normalized events of the pipeline): each trigger it fires is risk-checked and
    /// sent as a market order of the entry's symbol. Returns the orders sent.
    pub fn on_entry(&mut self, now: u64, entry: &Entry<'_>, next_seq: &mut u64, send: &mut impl FttcOutput) -> usize {
        if self.triggers.is_none() {
            return 0;
        }
        let mut fired = std::mem::take(&mut self.fired);
        let n = self.fire_entry(now, entry, &mut fired, next_seq, send);
        self.fired = fired;
        n
    }

    fn fire_entry(
        &mut self,
        now: u64,
        entry: &Entry<'_>,
        fired: &mut Vec<(u64, TriggerAction)>,
        next_seq: &mut u64,
        send: &mut impl FttcOutput,
    ) -> usize {
        let mut orders = 0;
        if self.risk.wants_trades() && !entry.symbol.is_empty() {
            if let Some(px) = entry.trade_price() {
                let id = self.id(entry.symbol);
                self.risk.on_trade(id, px);
            }
        }
        self.triggers.as_mut().expect("trigger mode").fire(entry, fired);
        if entry.symbol.is_empty() {
            // Nothing to trade: what fired is counted, and nothing goes out.
            self.stats.no_symbol += fired.len() as u64;
            return 0;
        }
        for &(_, action) in fired.iter() {
            send.decided();
            let id = self.id(entry.symbol);
            let price = entry.price.unwrap_or(0);
            let intent = OrderIntent { symbol: id, buy: action.buy, qty: action.qty, price };
            if self.risk.verdict(now, &intent).is_err() {
                continue;
            }
            let st = &mut self.symbols[id as usize];
            st.last_px = price;
            if st.template.set_qty(action.qty).is_err() {
                self.stats.template_errors += 1;
                continue;
            }
            let cl_ord_id = take_id(&mut self.next_id);
            let side = if action.buy { b'1' } else { b'2' };
            match order(st, &mut self.counters, cl_ord_id, side, now, next_seq, send) {
                Ok(()) => {
                    self.risk.on_sent(now, &intent);
                    orders += 1;
                    if action.buy {
                        self.stats.buys += 1;
                    } else {
                        self.stats.sells += 1;
                    }
                }
                Err(_) => self.stats.template_errors += 1,
            }
        }
        orders
    }

    /// Refusals by reason.
    pub fn rejects(&self) -> impl Iterator<Item = (RiskReject, u64)> + '_ {
        self.risk.rejects()
    }
}

/// Where the walk learns the SOH bytes of a body, as words of bits: bit `k` of the word
/// of `base` is set when `body[base + k]` is SOH (none past `body`'s end).
trait SohBits {
    /// A base at or before `i` and its word, with the bits before `i` clear.
    fn start(&self, body: &[u8], i: usize) -> (usize, u64);
    /// The word of `base`, 64 bytes after the base before it.
    fn next(&self, body: &[u8], base: usize) -> u64;
}

/// Found as the walk goes, 64 bytes at a time from where it starts.
struct Lazy;

impl SohBits for Lazy {
    #[inline(always)]
    fn start(&self, body: &[u8], i: usize) -> (usize, u64) {
        (i, fix::soh_bits(body, i))
    }
    #[inline(always)]
    fn next(&self, body: &[u8], base: usize) -> u64 {
        fix::soh_bits(body, base)
    }
}

/// Found beforehand for the whole body by [`fix::soh_bits_and_sum`]: the words of bases
/// 0, 64, 128...
impl SohBits for [u64; fix::SCAN_WORDS] {
    #[inline(always)]
    fn start(&self, _: &[u8], i: usize) -> (usize, u64) {
        (i & !63, self.get(i / 64).map_or(0, |&w| w & (u64::MAX << (i % 64))))
    }
    #[inline(always)]
    fn next(&self, _: &[u8], base: usize) -> u64 {
        self.get(base / 64).copied().unwrap_or(0)
    }
}

/// Slots of [`Fttc`]'s cache of recent symbol ids.
const RECENT_IDS: usize = 256;

/// The cache slot of a symbol of `len <= 8` bytes held in `w` (bytes past `len` zero).
#[inline(always)]
fn recent_slot(w: u64, len: usize) -> usize {
    ((w ^ len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize
}

/// A symbol of up to 8 bytes as one number: its bytes and its length (exact).
#[inline]
fn short_key(symbol: &[u8]) -> Option<u128> {
    if symbol.len() > 8 {
        return None;
    }
    let mut b = [0u8; 8];
    b[..symbol.len()].copy_from_slice(symbol);
    Some(word_key(u64::from_le_bytes(b), symbol.len()))
}

/// The key of a symbol of `len <= 8` bytes that starts word `w` (the bytes after it are
/// masked off): the same number [`short_key`] makes from a copy.
#[inline]
fn word_key(w: u64, len: usize) -> u128 {
    u128::from(word_bytes(w, len)) | (len as u128) << 64
}

/// The first `len <= 8` bytes of word `w`, the bytes after them zero.
#[inline(always)]
fn word_bytes(w: u64, len: usize) -> u64 {
    if len >= 8 {
        w
    } else {
        w & ((1u64 << (len * 8)) - 1)
    }
}

fn truncated(offset: usize) -> tickplant_wire::Error {
    tickplant_wire::Error::Truncated { what: "field", offset, need: 1, have: 0 }
}

/// The multiplier of [`maybe_data`]'s hash, chosen by a search: the tags
/// [`announces_data`] flags fall in 10 of its 128 slots, and none of the tags common in
/// market data (49, 56, 34, 52, 55, 268 to 273, 279, 290, 346, 336, 326, 48, 22, 207, 15,
/// 1023, 83, 37, 278, 280, 60, 75, 10, 11, 38, 40, 44, 54 and others) does: 63 of the
/// other tags from 10 to 999 (the data fields 349 to 363 among them) share a slot, and only
/// cost the exact check.
const DATA_HASH: u32 = 0xb58f_0057;

/// A field's first three bytes as [`maybe_data`] hashes them (`tag` of two digits: its
/// digits and `=`; of more: its first three digits).
const fn tag_prefix(tag: u32) -> u32 {
    let mut digits = [0u8; 10];
    let (mut n, mut t) = (0, tag);
    while t > 0 {
        digits[n] = b'0' + (t % 10) as u8;
        t /= 10;
        n += 1;
    }
    let mut bytes = [0u8; 4];
    let mut k = 0;
    while k < 3 {
        bytes[k] = if k < n {
            digits[n - 1 - k]
        } else if k == n {
            b'='
        } else {
            0
        };
        k += 1;
    }
    u32::from_le_bytes(bytes)
}

const fn data_slot(prefix: u32) -> usize {
    (prefix.wrapping_mul(DATA_HASH) >> 25) as usize
}

/// The slots of the length fields of FIX 4.4 ([`fix::DATA_FIELDS`], the reader's own table):
/// the tags [`announces_data`] flags.
const DATA_SLOTS: [bool; 128] = {
    let mut t = [false; 128];
    let mut k = 0;
    while k < fix::DATA_FIELDS.len() {
        t[data_slot(tag_prefix(fix::DATA_FIELDS[k].0))] = true;
        k += 1;
    }
    t
};

/// Might a field starting with these four bytes be a length field? `false` is exact (one
/// multiply and one load, no branch on the tag's digits); `true` is checked by
/// [`announces_data`]. Most fields of market data are neither ours nor length fields: this
/// is their whole cost after the four comparisons.
#[inline(always)]
fn maybe_data(head: u32) -> bool {
    DATA_SLOTS[data_slot(head & 0x00ff_ffff)]
}

/// Does a field starting with these four bytes give the length of a data field (RawData
/// and the other length/data pairs of FIX 4.4)? The tags of [`fix::DATA_FIELDS`] by their
/// digits, a comparison or two for most tags where a table walk costs a loop
/// (`announces_data_is_the_readers_table` checks the two agree on every head).
#[inline]
fn announces_data(head: u32) -> bool {
    let b = head.to_le_bytes();
    // By the first digit: most tags are rejected by one comparison.
    match b[0] {
        b'9' => b[2] == b'=' && matches!(b[1], b'0' | b'3' | b'5'),
        b'2' => &b == b"212=",
        // 348 to 364, the even ones (the odd ones are their data fields).
        b'3' => {
            b[3] == b'='
                && matches!(
                    (b[1], b[2]),
                    (b'4', b'8') | (b'5', b'0' | b'2' | b'4' | b'6' | b'8') | (b'6', b'0' | b'2' | b'4')
                )
        }
        b'4' => &b == b"445=",
        b'6' => &b == b"618=" || &b == b"621=",
        _ => false,
    }
}

/// A quantity as whole shares: engines write them as `100` or `100.0` (QuickFIX/J's
/// doubles, among others).
fn shares(f: &fix::Field<'_>) -> Option<u64> {
    f.as_decimal().ok().map(|v| v.max(0) as u64 / 1_000_000_000)
}

/// Patch a symbol's template and hand it to `send`.
#[inline]
fn order(
    st: &mut SymbolState,
    counters: &mut Counters,
    cl_ord_id: u64,
    side: u8,
    now: u64,
    next_seq: &mut u64,
    send: &mut impl FttcOutput,
) -> Result<(), TemplateError> {
    let seq = *next_seq;
    counters.seq.set(seq);
    counters.id.set(cl_ord_id);
    let t = &mut st.template;
    t.set_seq_num_from(&counters.seq)?;
    t.set_cl_ord_id_from(&counters.id)?;
    t.set_side(side);
    counters.stamp.set(now);
    t.set_time_from(&counters.stamp);
    send.send(seq, t.bytes());
    *next_seq += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::fix::{FieldIndex, Writer};

    fn md(seq: u64, entries: &[(&str, &str)]) -> Vec<u8> {
        let mut w = Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, seq).field(52, b"20261121-14:30:00.000");
        w.field_uint(268, entries.len() as u64);
        for (s, p) in entries {
            w.field(279, b"0").field(269, b"2").field(55, s.as_bytes()).field(270, p.as_bytes()).field(271, b"100");
        }
        w.finish().to_vec()
    }

    /// Entries of (MDEntryType or none, symbol, price), each led by MDUpdateAction.
    fn md_typed(entries: &[(Option<&str>, &str, &str)]) -> Vec<u8> {
        let mut w = Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, 1).field(52, b"20261121-14:30:00.000");
        w.field_uint(268, entries.len() as u64);
        for (t, s, p) in entries {
            w.field(279, b"0");
            if let Some(t) = t {
                w.field(269, t.as_bytes());
            }
            w.field(55, s.as_bytes()).field(270, p.as_bytes());
        }
        w.finish().to_vec()
    }

    fn fttc(limits: RiskLimits) -> Fttc {
        Fttc::new(FttcConfig {
            begin_string: "FIX.4.4".into(),
            sender: "TP".into(),
            target: "EX".into(),
            qty: 100,
            limits,
            order_fields: Vec::new(),
        })
    }

    fn get(m: &[u8], tag: u32) -> Vec<u8> {
        let m = Message::new_checked(m).unwrap();
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        ix.get(tag).unwrap().value.to_vec()
    }

    #[test]
    fn whole_dollars_buy_and_fills_sell() {
        let mut f = fttc(RiskLimits::default());
        let mut seq = 2;
        let mut sent: Vec<(u64, Vec<u8>)> = Vec::new();
        let n = f
            .on_market_data(
                0,
                &md(1, &[("AAPL", "190.000"), ("MSFT", "410.001"), ("IBM", "99")]),
                &mut seq,
                &mut |s: u64, b: &[u8]| sent.push((s, b.to_vec())),
            )
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seq, 4);
        assert_eq!(get(&sent[0].1, 55), b"AAPL");
        assert_eq!(get(&sent[1].1, 55), b"IBM");
        assert_eq!(get(&sent[1].1, 34), b"000000003");
        assert_eq!(get(&sent[0].1, 54), b"1");
        // The BUY of AAPL fills: a SELL of 100.
        let mut w = Writer::new("FIX.4.4", "8");
        w.field(49, b"EX").field(56, b"TP").field_uint(34, 5).field(52, b"20261121-14:30:00.000");
        w.field(39, b"2").field(54, b"1").field(55, b"AAPL").field(32, b"100");
        f.on_execution(0, w.finish(), &mut seq, &mut |s: u64, b: &[u8]| sent.push((s, b.to_vec()))).unwrap();
        assert_eq!(sent.len(), 3);
        assert_eq!(get(&sent[2].1, 54), b"2");
        assert_eq!(get(&sent[2].1, 38), b"000000100");
        let s = f.stats();
        assert_eq!((s.entries, s.whole_dollar, s.buys, s.buy_fills, s.sells), (3, 2, 2, 1, 1));
        assert_eq!(f.risk().position(0), 100);
        // A broken datagram is counted, not a panic.
        assert!(f.on_market_data(0, b"8=FIX.4.4\x019=5\x01garbage", &mut seq, &mut |_: u64, _: &[u8]| {}).is_err());
        assert_eq!(f.stats().undecodable, 1);
    }

    /// After a restart: ClOrdIDs go on from where they are set, and the fill of an order
    /// sent before (resent at logon, its symbol not yet seen in market data) sends its SELL,
    /// whose ClOrdID is the BUY's plus one: a fill handled again after a restart whose SELL
    /// had gone out (its ClOrdID in the store) sends none.
    #[test]
    fn a_restarted_engine_neither_reuses_ids_nor_drops_earlier_fills() {
        let mut f = fttc(RiskLimits::default());
        f.set_next_cl_ord_id(5_000_001);
        let mut seq = 40;
        let mut sent: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut w = Writer::new("FIX.4.4", "8");
        w.field(49, b"EX").field(56, b"TP").field_uint(34, 9).field(43, b"Y").field(52, b"20261121-14:30:00.000");
        w.field(39, b"2").field(54, b"1").field(55, b"NVDA").field(32, b"100");
        f.on_execution(0, w.finish(), &mut seq, &mut |s: u64, b: &[u8]| sent.push((s, b.to_vec()))).unwrap();
        assert_eq!(sent.len(), 1);
        assert_eq!((get(&sent[0].1, 55), get(&sent[0].1, 54)), (b"NVDA".to_vec(), b"2".to_vec()));
        // A fill that names no ClOrdID of ours: the SELL takes a new order's pair.
        assert_eq!(get(&sent[0].1, 11), b"000005000002");
        assert_eq!(get(&sent[0].1, 34), b"000000040");
        let s = f.stats();
        assert_eq!((s.buy_fills, s.sells), (1, 1));
        // Its market data, when it comes, finds the symbol known: the next id follows.
        f.on_market_data(0, &md(1, &[("NVDA", "120.000")]), &mut seq, &mut |s: u64, b: &[u8]| {
            sent.push((s, b.to_vec()))
        })
        .unwrap();
        assert_eq!(get(&sent[1].1, 11), b"000005000003");
        assert_eq!(f.stats().buys, 1);
        // That BUY's fill: its SELL is the BUY's ClOrdID plus one.
        let fill = |seq: u64| {
            let mut w = Writer::new("FIX.4.4", "8");
            w.field(49, b"EX").field(56, b"TP").field_uint(34, seq).field(52, b"20261121-14:30:00.000");
            w.field(11, b"000005000003").field(39, b"2").field(54, b"1").field(55, b"NVDA").field(32, b"100");
            w.finish().to_vec()
        };
        f.on_execution(0, &fill(10), &mut seq, &mut |s: u64, b: &[u8]| sent.push((s, b.to_vec()))).unwrap();
        assert_eq!((get(&sent[2].1, 54), get(&sent[2].1, 11)), (b"2".to_vec(), b"000005000004".to_vec()));
        // The engine restarts; the store shows that SELL sent; the fill comes again (its
        // receipt was not kept): no second SELL, and the position still counts it.
        let mut g = fttc(RiskLimits::default());
        g.set_next_cl_ord_id(5_000_005);
        g.set_sent_before([5_000_001, 5_000_002, 5_000_003, 5_000_004]);
        let mut again = Vec::new();
        g.on_execution(0, &fill(10), &mut seq, &mut |s: u64, b: &[u8]| again.push((s, b.to_vec()))).unwrap();
        assert!(again.is_empty(), "a SELL sent before the restart went out again");
        let s = g.stats();
        assert_eq!((s.buy_fills, s.sells, s.sells_sent_before), (1, 0, 1));
        assert_eq!(g.risk().position(0), 100);
    }

    /// Constant order fields: every order carries them after its own, one given for a tag
    /// with a default (HandlInst in FIX 4.2) takes its place, and the engine's own tags
    /// are refused.
    #[test]
    fn order_fields_go_on_every_order() {
        assert_eq!(parse_order_field("1=ACCT42"), Ok((1, "ACCT42".into())));
        assert_eq!(parse_order_field("100=X=Y"), Ok((100, "X=Y".into())));
        for bad in ["38=5", "1=", "=5", "one=5", "1"] {
            assert!(parse_order_field(bad).is_err(), "{bad}");
        }
        for begin in ["FIX.4.4", "FIX.4.2"] {
            let mut f = Fttc::new(FttcConfig {
                begin_string: begin.into(),
                sender: "TP".into(),
                target: "EX".into(),
                qty: 100,
                limits: RiskLimits::default(),
                order_fields: vec![(1, "ACCT42".into()), (59, "0".into()), (21, "5".into())],
            });
            let mut sent = Vec::new();
            let mut seq = 1;
            f.on_market_data(0, &md(1, &[("AAPL", "190.000")]), &mut seq, &mut |_: u64, b: &[u8]| {
                sent.push(b.to_vec())
            })
            .unwrap();
            let m = Message::new_checked(&sent[0]).unwrap();
            let tags: Vec<u32> = m.fields().map(|f| f.unwrap().tag).collect();
            assert_eq!(tags.iter().filter(|&&t| t == 21).count(), 1, "{begin}: one HandlInst");
            assert_eq!((get(&sent[0], 1), get(&sent[0], 59)), (b"ACCT42".to_vec(), b"0".to_vec()));
            assert_eq!(get(&sent[0], 21), b"5");
        }
    }

    /// An order the exchange rejects (an ExecutionReport with OrdStatus 8, or a Reject of
    /// the message) is counted and frees its room under the open-order limit; quantities
    /// written as decimals (`100.0`) count as whole shares.
    #[test]
    fn rejected_orders_are_counted_and_free_the_limits() {
        let mut f = fttc(RiskLimits { max_open_orders: 2, ..RiskLimits::default() });
        let mut seq = 2;
        let mut sent: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut out = |s: u64, b: &[u8]| sent.push((s, b.to_vec()));
        f.on_market_data(0, &md(1, &[("AAPL", "190.000"), ("MSFT", "410.000"), ("IBM", "99")]), &mut seq, &mut out)
            .unwrap();
        assert_eq!((f.stats().buys, f.risk().open_orders()), (2, 2));
        let er = |status: &[u8], sym: &[u8], extra: &[(u32, &[u8])]| {
            let mut w = Writer::new("FIX.4.4", "8");
            w.field(49, b"EX").field(56, b"TP").field_uint(34, 5).field(52, b"20261121-14:30:00.000");
            w.field(39, status).field(54, b"1").field(55, sym);
            for (t, v) in extra {
                w.field(*t, v);
            }
            w.finish().to_vec()
        };
        f.on_execution(
            0,
            &er(b"8", b"AAPL", &[(151, b"0"), (38, b"100"), (58, b"unknown symbol")]),
            &mut seq,
            &mut out,
        )
        .unwrap();
        assert_eq!((f.stats().rejected, f.risk().open_orders()), (1, 1));
        // The Reject of the second order (its bytes as sent, from the session's store).
        let msft = sent.iter().find(|(_, b)| get(b, 55) == b"MSFT").unwrap().1.clone();
        f.on_refused(&msft);
        assert_eq!((f.stats().rejected, f.risk().open_orders()), (2, 0));
        // Room again: IBM's next whole dollar sends.
        f.on_market_data(0, &md(2, &[("IBM", "100")]), &mut seq, &mut |s: u64, b: &[u8]| sent.push((s, b.to_vec())))
            .unwrap();
        assert_eq!(f.stats().buys, 3);
        // Filled in two parts, 40.0 and 60 shares: a position of 100, one fill, the order
        // open until its last part.
        f.on_execution(0, &er(b"1", b"IBM", &[(32, b"40.0")]), &mut seq, &mut |_: u64, _: &[u8]| {}).unwrap();
        let ibm = f.known(b"IBM").unwrap();
        assert_eq!((f.risk().position(ibm), f.risk().open_orders(), f.stats().buy_fills), (40, 1, 0));
        f.on_execution(0, &er(b"2", b"IBM", &[(32, b"60")]), &mut seq, &mut |_: u64, _: &[u8]| {}).unwrap();
        // The BUY is done; the one order open is the SELL its fill sent.
        assert_eq!((f.risk().position(ibm), f.risk().open_orders(), f.stats().buy_fills), (100, 1, 1));
        assert_eq!((f.stats().partial_fills, f.stats().sells), (1, 1));
    }

    /// A datagram whose CheckSum is wrong by one sends nothing and is counted, short or
    /// long (past 512 bytes the CheckSum is summed apart from the walk's SOH bits).
    #[test]
    fn a_wrong_checksum_sends_nothing() {
        for pad in [0usize, 300, 600] {
            let mut w = Writer::new("FIX.4.4", "X");
            w.field(49, b"MD").field(56, b"TP").field_uint(34, 1).field(52, b"20261121-14:30:00.000");
            if pad > 0 {
                w.field(58, "x".repeat(pad).as_bytes());
            }
            w.field_uint(268, 1).field(279, b"0").field(269, b"0").field(55, b"AAPL").field(270, b"190.000");
            let good = w.finish().to_vec();
            let mut f = fttc(RiskLimits::default());
            let mut seq = 1;
            let n = f.on_market_data(0, &good, &mut seq, &mut |_: u64, _: &[u8]| {}).unwrap();
            assert_eq!(n, 1, "pad {pad}: the good one orders");
            let mut bad = good.clone();
            let at = bad.len() - 2;
            bad[at] = if bad[at] == b'9' { b'0' } else { bad[at] + 1 };
            let e = f.on_market_data(0, &bad, &mut seq, &mut |_: u64, _: &[u8]| panic!("pad {pad}: nothing to send"));
            assert!(
                matches!(
                    e,
                    Err(MdError::Fix(tickplant_wire::Error::Malformed { what: "CheckSum (10): computed", .. }))
                ),
                "pad {pad}: {e:?}"
            );
            assert_eq!((f.stats().undecodable, f.stats().entries), (1, 1), "pad {pad}");
        }
    }

    #[test]
    fn risk_refusals_send_nothing() {
        let mut f = fttc(RiskLimits { max_order_qty: 50, ..Default::default() });
        let mut seq = 1;
        let n = f
            .on_market_data(0, &md(1, &[("AAPL", "190.000")]), &mut seq, &mut |_: u64, _: &[u8]| {
                panic!("nothing to send")
            })
            .unwrap();
        assert_eq!((n, seq), (0, 1));
        assert_eq!(f.rejects().find(|r| r.0 == RiskReject::MaxOrderQty).unwrap().1, 1);
    }

    #[test]
    fn triggers_decide_instead_of_the_rule() {
        let mut f = fttc(RiskLimits::default());
        let mut t = Triggers::new();
        t.apply(&crate::trigger::parse_triggers("5: symbol = \"IBM\" and price >= 99 => sell 300\n").unwrap()).unwrap();
        f.set_triggers(Some(t));
        let mut seq = 1;
        let mut sent: Vec<Vec<u8>> = Vec::new();
        let n = f
            .on_market_data(0, &md(1, &[("AAPL", "190.000"), ("IBM", "99.5")]), &mut seq, &mut |_: u64, b: &[u8]| {
                sent.push(b.to_vec())
            })
            .unwrap();
        assert_eq!(n, 1, "AAPL's whole dollar does not trade now: only the trigger does");
        assert_eq!(get(&sent[0], 55), b"IBM");
        assert_eq!(get(&sent[0], 54), b"2");
        assert_eq!(get(&sent[0], 38), b"000000300");
        let s = f.stats();
        assert_eq!((s.entries, s.whole_dollar, s.buys, s.sells), (2, 1, 0, 1));
        // A trigger that fires on an entry with no Symbol sends nothing, and is counted.
        let mut t = Triggers::new();
        t.apply(&crate::trigger::parse_triggers("6: price >= 1 => buy 100\n").unwrap()).unwrap();
        f.set_triggers(Some(t));
        let entry = Entry { price: Some(2_000_000_000), ..Entry::default() };
        assert_eq!(f.on_entry(0, &entry, &mut seq, &mut |_: u64, b: &[u8]| sent.push(b.to_vec())), 0);
        assert_eq!((sent.len(), f.stats().no_symbol), (1, 1));
    }

    /// The collar takes its reference from the feed's trades, in the scan and in trigger
    /// mode alike: a 269 of `2` sets its own entry's symbol's last trade, before that
    /// entry's price is judged, and no other entry's.
    #[test]
    fn trades_in_the_feed_set_the_price_collar() {
        for by_triggers in [false, true] {
            let mut f = fttc(RiskLimits { collar_bps: 100, ..Default::default() });
            if by_triggers {
                let mut t = Triggers::new();
                // Every priced entry fires, trades included (the scan buys whole dollars).
                t.apply(&crate::trigger::parse_triggers("1: price >= 1 => buy 100\n").unwrap()).unwrap();
                f.set_triggers(Some(t));
            }
            let mut seq = 1;
            let mut sent: Vec<Vec<u8>> = Vec::new();
            let mut feed = |f: &mut Fttc, entries: &[(Option<&str>, &str, &str)]| {
                sent.clear();
                f.on_market_data(0, &md_typed(entries), &mut seq, &mut |_: u64, b: &[u8]| sent.push(get(b, 55)))
                    .unwrap();
                sent.clone()
            };
            let mode = if by_triggers { "triggers" } else { "scan" };
            // A trade at 120 and a BUY at the same price.
            assert_eq!(feed(&mut f, &[(Some("2"), "AAPL", "120.000")]), [b"AAPL".to_vec()], "{mode}");
            // A bid of 100 is 16.7% from 120: refused.
            assert!(feed(&mut f, &[(Some("0"), "AAPL", "100.000")]).is_empty(), "{mode}");
            // A trade at 100.26 moves the reference: 100 is now 0.26% away.
            let got = feed(&mut f, &[(Some("2"), "AAPL", "100.260"), (Some("0"), "AAPL", "100.000")]);
            assert_eq!(got.iter().filter(|s| s == &b"AAPL").count(), if by_triggers { 2 } else { 1 }, "{mode}");
            // No trade of MSFT yet: no collar.
            assert_eq!(feed(&mut f, &[(Some("1"), "MSFT", "50.000")]), [b"MSFT".to_vec()], "{mode}");
            // An entry without 269 after a trade sets no reference: IBM's last trade stays
            // 10.5, and 20 is refused.
            let got = feed(&mut f, &[(Some("2"), "IBM", "10.500"), (None, "IBM", "20.000")]);
            assert_eq!(got.iter().filter(|s| s == &b"IBM").count(), usize::from(by_triggers), "{mode}: {got:?}");
            let collared = f.rejects().find(|r| r.0 == RiskReject::PriceCollar).unwrap().1;
            assert_eq!(collared, 2, "{mode}");
        }
    }

    /// An order the template refuses (a quantity too wide for OrderQty) is never sent, so
    /// it never takes room under max-open-orders.
    #[test]
    fn an_order_never_sent_is_never_open() {
        let mut f = fttc(RiskLimits { max_open_orders: 1, ..Default::default() });
        let mut t = Triggers::new();
        let rules = "1: symbol = \"BIG\" => buy 1000000000\n2: symbol = \"AAPL\" => buy 100\n";
        t.apply(&crate::trigger::parse_triggers(rules).unwrap()).unwrap();
        f.set_triggers(Some(t));
        let mut seq = 1;
        let mut sent = Vec::new();
        for _ in 0..3 {
            f.on_market_data(0, &md(1, &[("BIG", "10.000")]), &mut seq, &mut |_: u64, b: &[u8]| sent.push(get(b, 55)))
                .unwrap();
        }
        assert!(sent.is_empty());
        assert_eq!(f.stats().template_errors, 3);
        assert_eq!(f.risk().open_orders(), 0);
        f.on_market_data(0, &md(1, &[("AAPL", "10.000")]), &mut seq, &mut |_: u64, b: &[u8]| sent.push(get(b, 55)))
            .unwrap();
        assert_eq!(sent, [b"AAPL".to_vec()]);
        assert_eq!(f.risk().open_orders(), 1);
    }

    /// A configured quantity the template cannot hold sends nothing (never a wrong
    /// OrderQty), counted as template errors.
    #[test]
    fn a_quantity_too_wide_sends_nothing() {
        let mut f = Fttc::new(FttcConfig {
            begin_string: "FIX.4.4".into(),
            sender: "TP".into(),
            target: "EX".into(),
            qty: 1_000_000_000,
            limits: RiskLimits::default(),
            order_fields: Vec::new(),
        });
        let mut seq = 1;
        let n = f
            .on_market_data(0, &md(1, &[("AAPL", "190.000")]), &mut seq, &mut |_: u64, _: &[u8]| {
                panic!("nothing to send")
            })
            .unwrap();
        assert_eq!((n, f.stats().template_errors, f.risk().open_orders()), (0, 1, 0));
    }

    /// A price that trades in an entry with no Symbol (55), here before any, sends nothing
    /// (an order would carry an empty Symbol) and is counted; the next entry orders.
    #[test]
    fn an_entry_with_no_symbol_orders_nothing() {
        let mut w = Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, 1).field(52, b"20261121-14:30:00.000");
        w.field_uint(268, 2).field(279, b"0").field(269, b"2").field(270, b"5.000");
        w.field(279, b"0").field(55, b"AB").field(270, b"6");
        let msg = w.finish().to_vec();
        for collar in [0, 500] {
            let mut f = fttc(RiskLimits { collar_bps: collar, ..RiskLimits::default() });
            let mut sent = Vec::new();
            let n = f.on_market_data(0, &msg, &mut 1, &mut |_: u64, b: &[u8]| sent.push(get(b, 55))).unwrap();
            assert_eq!((n, sent), (1, vec![b"AB".to_vec()]), "collar {collar}");
            assert_eq!((f.stats().no_symbol, f.stats().whole_dollar, f.stats().buys), (1, 2, 1));
        }
    }

    /// The key read from a message word equals the key built from a copy, whatever follows
    /// the symbol in the message.
    #[test]
    fn word_keys_equal_copied_keys() {
        proptest::proptest!(|(sym in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..=8), after in proptest::collection::vec(proptest::prelude::any::<u8>(), 8))| {
            let mut buf = sym.clone();
            buf.extend_from_slice(&after);
            let w = u64::from_le_bytes(buf[..8].try_into().unwrap());
            proptest::prop_assert_eq!(Some(word_key(w, sym.len())), short_key(&sym));
        });
    }

    /// The reference: every entry's symbol and price through the full reader.
    fn reference(m: &[u8]) -> Vec<(Vec<u8>, i64)> {
        let m = Message::new_checked(m).unwrap();
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        let mut sym = Vec::new();
        let mut out = Vec::new();
        for f in ix.fields() {
            match f.tag {
                55 => sym = f.value.to_vec(),
                270 => out.push((sym.clone(), fix::parse_decimal(f.value).unwrap())),
                _ => {}
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(500))]

        /// The one-pass scan orders exactly the whole-dollar entries the full reader sees,
        /// with data fields (which may hold "55=" and "270=" and SOH), length fields with no
        /// data after them, and long fields in the way.
        #[test]
        fn the_scan_agrees_with_the_full_reader(
            entries in proptest::collection::vec(("[A-Z]{1,5}", 0u32..3, 0u32..1000, proptest::prelude::any::<bool>()), 1..6),
            data in proptest::option::of("[a-z0-9=\x01]{0,12}"),
            // Up to 700 bytes: bodies past 512 take the walk that finds SOH bytes as it goes.
            text in proptest::option::of("[a-z ]{1,700}"),
            lone in 0u8..3,
        ) {
            let mut w = Writer::new("FIX.4.4", "X");
            w.field(49, b"MD").field(56, b"TP").field_uint(34, 1).field(52, b"20261121-14:30:00.000");
            if let Some(d) = &data {
                let raw = format!("55=ZZ\x01270=7.000\x01{d}");
                w.field_uint(95, raw.len() as u64).field(96, raw.as_bytes());
            }
            // A long field: 64-byte stretches with no SOH at all.
            if let Some(t) = &text {
                w.field(58, t.as_bytes());
            }
            w.field_uint(268, entries.len() as u64);
            for (k, (sym, dollars, mils, whole)) in entries.iter().enumerate() {
                let px = if *whole { format!("{dollars}.000") } else { format!("{dollars}.{:03}", mils.max(&1)) };
                w.field(279, b"0");
                // A length field with no data field after it: here, right before a Symbol
                // (which is still the entry's Symbol), or at the body's end.
                if lone == 1 && k == 0 {
                    w.field_uint(95, 4);
                }
                w.field(55, sym.as_bytes()).field(270, px.as_bytes());
            }
            if lone == 2 {
                w.field_uint(95, 4);
            }
            let msg = w.finish().to_vec();
            let want: Vec<Vec<u8>> = reference(&msg).into_iter().filter(|e| e.1 % 1_000_000_000 == 0).map(|e| e.0).collect();
            let mut f = fttc(RiskLimits::default());
            let mut seq = 1;
            let mut got = Vec::new();
            f.on_market_data(0, &msg, &mut seq, &mut |_: u64, b: &[u8]| got.push(get(b, 55))).unwrap();
            proptest::prop_assert_eq!(got, want);
            proptest::prop_assert_eq!(f.stats().entries, entries.len() as u64);
        }
    }

    /// The filter before `announces_data` never says no to a length field. Every head
    /// `announces_data` can accept is two digits, a digit or `=`, and any byte: all of
    /// them are tried.
    #[test]
    fn maybe_data_passes_every_length_field() {
        let mut flagged = 0;
        for d0 in b'0'..=b'9' {
            for d1 in b'0'..=b'9' {
                for d2 in (b'0'..=b'9').chain([b'=']) {
                    for b3 in 0..=255u8 {
                        let head = u32::from_le_bytes([d0, d1, d2, b3]);
                        if announces_data(head) {
                            flagged += 1;
                            assert!(maybe_data(head), "{:?}", [d0, d1, d2, b3].map(char::from));
                        }
                    }
                }
            }
        }
        // 90, 93 and 95 with any byte after their `=`; 212, 348 to 364 even, 445, 618, 621.
        assert_eq!(flagged, 3 * 256 + 13);
        for tag in [49u32, 56, 34, 52, 55, 268, 269, 270, 271, 272, 273, 279, 290, 346, 336, 326] {
            let f = format!("{tag}=1234").into_bytes();
            assert!(!maybe_data(u32::from_le_bytes(f[..4].try_into().unwrap())), "tag {tag} costs the exact check");
        }
    }

    /// `announces_data` flags exactly the length fields of the reader's table: every head
    /// of two or three digits and `=`, or four digits, is tried.
    #[test]
    fn announces_data_is_the_readers_table() {
        let mut heads = Vec::new();
        for tag in 10u32..10_000 {
            let text = format!("{tag}=");
            let b = text.as_bytes();
            if b.len() == 3 {
                heads.extend((0..=255u8).map(|x| (tag, [b[0], b[1], b[2], x])));
            } else {
                heads.push((tag, [b[0], b[1], b[2], b[3]]));
            }
        }
        for (tag, head) in heads {
            let listed = fix::DATA_FIELDS.iter().any(|&(length, _)| length == tag);
            assert_eq!(announces_data(u32::from_le_bytes(head)), listed, "tag {tag}");
        }
    }

    /// The cache of recent ids gives the map's id whatever shares its slot: 2,000 symbols
    /// of 1 to 12 bytes (many to a slot, the long ones past the cache) looked up in a
    /// scrambled order, each read from inside a message as the walk reads it; and an empty
    /// symbol, which must not take an empty slot for a hit.
    #[test]
    fn recent_ids_agree_with_the_map() {
        let mut f = fttc(RiskLimits::default());
        let names: Vec<String> = (0..2_000u32).map(|i| format!("{}", i * 7919).repeat(1 + (i % 3) as usize)).collect();
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let name = &names[(x >> 33) as usize % names.len()];
            let buf = format!("55={name}\x0110=000\x01").into_bytes();
            let id = f.id_in(&buf, 3, 3 + name.len());
            assert_eq!(Some(id), f.known(name.as_bytes()), "{name}");
            assert_eq!(get(f.symbols[id as usize].template.bytes(), 55), name.as_bytes(), "the template of id {id}");
        }
        // An empty symbol is not an empty slot's id 0.
        let mut f = fttc(RiskLimits::default());
        f.prepare(b"ABC");
        let empty = f.id_in(b"55=\x0110=000\x01", 3, 3);
        assert_eq!(Some(empty), f.known(b""));
        assert_ne!(empty, 0);
    }
}

//! Pre-trade risk checks: every order is checked before anything is sent, and a refused
//! order is counted with its reason.
//!
//! Checks, in order: the kill switch, maximum order quantity, maximum notional (quantity x
//! price), maximum open orders, maximum orders per second per symbol (a sliding one-second
//! window), the position limit (the position if every open order filled), and a price
//! collar around the symbol's last trade. A limit of 0 turns its check off. Prices are i64
//! in 1e-9 units; quantities whole shares. Sans-IO: `now` comes in (ns).

/// Why an order was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RiskReject {
    KillSwitch,
    MaxOrderQty,
    MaxNotional,
    MaxOpenOrders,
    RateLimit,
    PositionLimit,
    PriceCollar,
}

impl RiskReject {
    pub const ALL: [RiskReject; 7] = [
        RiskReject::KillSwitch,
        RiskReject::MaxOrderQty,
        RiskReject::MaxNotional,
        RiskReject::MaxOpenOrders,
        RiskReject::RateLimit,
        RiskReject::PositionLimit,
        RiskReject::PriceCollar,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            RiskReject::KillSwitch => "kill_switch",
            RiskReject::MaxOrderQty => "max_order_qty",
            RiskReject::MaxNotional => "max_notional",
            RiskReject::MaxOpenOrders => "max_open_orders",
            RiskReject::RateLimit => "orders_per_second",
            RiskReject::PositionLimit => "position_limit",
            RiskReject::PriceCollar => "price_collar",
        }
    }
}

/// The limits (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RiskLimits {
    pub max_order_qty: u64,
    /// Quantity x price, in whole currency units.
    pub max_notional: u64,
    pub max_open_orders: u64,
    pub max_orders_per_second: u64,
    /// Absolute position per symbol, counting open orders as if filled.
    pub max_position: u64,
    /// Largest distance from the last trade, in basis points of it.
    pub collar_bps: u64,
}

/// An order about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderIntent {
    pub symbol: u32,
    pub buy: bool,
    pub qty: u64,
    /// 1e-9 units; for a market order, the price it is expected to fill near.
    pub price: i64,
}

#[derive(Debug, Default, Clone)]
struct SymbolRisk {
    position: i64,
    /// Open buy and sell quantity.
    open_buy: u64,
    open_sell: u64,
    last_trade: Option<i64>,
    recent: RateWindow,
}

/// A symbol's recent send times, oldest first, in a ring: those of the last second, and
/// perhaps some older ones not yet dropped. Each check drops at most the oldest, with no
/// branch on whether it has expired; only when the count reaches the limit are all the
/// expired ones dropped and the window counted exactly. So the verdict is exact (under the
/// limit with the stale ones counted, the window is under it too), the ring holds no more
/// times than the limit in force when it took its last one (a time is taken only after a
/// check under the limit), and the usual check is one load and a compare. A `VecDeque`
/// dropping every expired time first cost a loop whose trip count the core could not
/// predict, about 4 ns of the tick-to-trade path.
#[derive(Debug, Clone, Default)]
struct RateWindow {
    /// A power of two long once anything is recorded.
    times: Vec<u64>,
    head: usize,
    len: usize,
}

impl RateWindow {
    /// May one more order go at `now` with at most `max` in any second?
    #[inline(always)]
    fn admits(&mut self, now: u64, max: u64) -> bool {
        if self.len > 0 {
            let mask = self.times.len() - 1;
            let expired = usize::from(self.times[self.head & mask] + 1_000_000_000 <= now);
            self.head = (self.head + expired) & mask;
            self.len -= expired;
        }
        if self.len as u64 >= max {
            return self.admits_exactly(now, max);
        }
        true
    }
    /// [`RateWindow::admits`] with every expired time dropped first.
    #[cold]
    fn admits_exactly(&mut self, now: u64, max: u64) -> bool {
        let mask = self.times.len().wrapping_sub(1);
        while self.len > 0 && self.times[self.head & mask] + 1_000_000_000 <= now {
            self.head = (self.head + 1) & mask;
            self.len -= 1;
        }
        (self.len as u64) < max
    }
    /// An order went at `now` (not before the last one recorded).
    #[inline(always)]
    fn record(&mut self, now: u64) {
        if self.len == self.times.len() {
            self.grow();
        }
        let mask = self.times.len() - 1;
        self.times[(self.head + self.len) & mask] = now;
        self.len += 1;
    }
    #[cold]
    fn grow(&mut self) {
        let n = (self.times.len() * 2).max(8);
        let mask = self.times.len().wrapping_sub(1);
        let mut t: Vec<u64> = (0..self.len).map(|k| self.times[(self.head + k) & mask]).collect();
        t.resize(n, 0);
        self.times = t;
        self.head = 0;
    }
}

/// Risk state: positions, open orders, recent order times, last trades.
#[derive(Debug, Clone, Default)]
pub struct Risk {
    limits: RiskLimits,
    killed: bool,
    open_orders: u64,
    /// By symbol id (ids are small and dense: the owner numbers its symbols).
    symbols: Vec<SymbolRisk>,
    rejects: [u64; 7],
    accepted: u64,
    /// `(max_notional + 1) * 1e9`: the smallest quantity x price (1e-9 units) that
    /// [`RiskLimits::max_notional`] refuses, worked out when the limits are set.
    notional_cap: u128,
}

impl Risk {
    pub fn new(limits: RiskLimits) -> Self {
        let mut r = Risk::default();
        r.set_limits(limits);
        r
    }
    pub fn limits(&self) -> &RiskLimits {
        &self.limits
    }
    pub fn set_limits(&mut self, limits: RiskLimits) {
        self.limits = limits;
        self.notional_cap = (u128::from(limits.max_notional) + 1) * 1_000_000_000;
    }
    /// Stop (or allow again) every order.
    pub fn set_kill_switch(&mut self, on: bool) {
        self.killed = on;
    }
    /// A trade printed on the market (for the collar).
    pub fn on_trade(&mut self, symbol: u32, price: i64) {
        self.sym(symbol).last_trade = Some(price);
    }
    #[inline]
    fn sym(&mut self, symbol: u32) -> &mut SymbolRisk {
        let i = symbol as usize;
        if i >= self.symbols.len() {
            self.symbols.resize_with(i + 1, SymbolRisk::default);
        }
        &mut self.symbols[i]
    }

    /// Check an order and count it as open (and in the rate window) when it passes: for a
    /// caller that sends at once. A caller that can still fail to send after the check
    /// (a template that refuses a number) calls [`Risk::verdict`], then [`Risk::on_sent`]
    /// once the order is out, so that an order never sent is never open.
    #[inline]
    pub fn check(&mut self, now: u64, o: &OrderIntent) -> Result<(), RiskReject> {
        // One pass: the symbol's state is found once for the checks and the counting.
        let r = self.judge::<true>(now, o);
        if let Err(why) = r {
            self.rejects[why as usize] += 1;
        }
        r
    }

    /// Would `o` pass every check now? A refusal is counted with its reason; a pass
    /// changes nothing until [`Risk::on_sent`].
    pub fn verdict(&mut self, now: u64, o: &OrderIntent) -> Result<(), RiskReject> {
        let r = self.judge::<false>(now, o);
        if let Err(why) = r {
            self.rejects[why as usize] += 1;
        }
        r
    }

    /// An order that passed [`Risk::verdict`] was sent: it is open (and in the rate
    /// window) until its fill or its end.
    pub fn on_sent(&mut self, now: u64, o: &OrderIntent) {
        let limited = self.limits.max_orders_per_second > 0;
        self.accepted += 1;
        self.open_orders += 1;
        Self::count_open(self.sym(o.symbol), limited, now, o);
    }

    /// `o` is open in its symbol's state (and in the rate window when the rate is limited:
    /// else the window would grow for ever).
    #[inline(always)]
    fn count_open(s: &mut SymbolRisk, limited: bool, now: u64, o: &OrderIntent) {
        if o.buy {
            s.open_buy += o.qty;
        } else {
            s.open_sell += o.qty;
        }
        if limited {
            s.recent.record(now);
        }
    }

    /// Is the collar on (else trades need not be reported)?
    pub fn wants_trades(&self) -> bool {
        self.limits.collar_bps > 0
    }

    /// Every check; with `RECORD`, a pass also counts the order as sent ([`Risk::on_sent`]).
    #[inline(always)]
    fn judge<const RECORD: bool>(&mut self, now: u64, o: &OrderIntent) -> Result<(), RiskReject> {
        let l = self.limits;
        if self.killed {
            return Err(RiskReject::KillSwitch);
        }
        if l.max_order_qty > 0 && o.qty > l.max_order_qty {
            return Err(RiskReject::MaxOrderQty);
        }
        if l.max_notional > 0 {
            // Whole currency units, rounded down, above the limit: floor(q * p / 1e9) > max
            // exactly when q * p >= (max + 1) * 1e9. No 128-bit division (a library call
            // of tens of cycles on every order).
            let value = u128::from(o.qty) * u128::from(o.price.unsigned_abs());
            if value >= self.notional_cap {
                return Err(RiskReject::MaxNotional);
            }
        }
        if l.max_open_orders > 0 && self.open_orders >= l.max_open_orders {
            return Err(RiskReject::MaxOpenOrders);
        }
        let s = self.sym(o.symbol);
        if l.max_orders_per_second > 0 && !s.recent.admits(now, l.max_orders_per_second) {
            return Err(RiskReject::RateLimit);
        }
        if l.max_position > 0 {
            let worst = if o.buy {
                s.position + (s.open_buy + o.qty) as i64
            } else {
                s.position - (s.open_sell + o.qty) as i64
            };
            if worst.unsigned_abs() > l.max_position {
                return Err(RiskReject::PositionLimit);
            }
        }
        if l.collar_bps > 0 {
            if let Some(last) = s.last_trade {
                let dist = (i128::from(o.price) - i128::from(last)).unsigned_abs();
                if dist * 10_000 > u128::from(last.unsigned_abs()) * u128::from(l.collar_bps) {
                    return Err(RiskReject::PriceCollar);
                }
            }
        }
        if RECORD {
            Self::count_open(s, l.max_orders_per_second > 0, now, o);
            self.accepted += 1;
            self.open_orders += 1;
        }
        Ok(())
    }

    /// A fill of `qty` of an order checked earlier; `done` when the order is finished.
    pub fn on_fill(&mut self, symbol: u32, buy: bool, qty: u64, done: bool) {
        let s = self.sym(symbol);
        if buy {
            s.position += qty as i64;
            s.open_buy = s.open_buy.saturating_sub(qty);
        } else {
            s.position -= qty as i64;
            s.open_sell = s.open_sell.saturating_sub(qty);
        }
        if done {
            self.open_orders = self.open_orders.saturating_sub(1);
        }
    }
    /// An order ended without filling (rejected or cancelled) with `qty` still open.
    pub fn on_done(&mut self, symbol: u32, buy: bool, qty: u64) {
        let s = self.sym(symbol);
        if buy {
            s.open_buy = s.open_buy.saturating_sub(qty);
        } else {
            s.open_sell = s.open_sell.saturating_sub(qty);
        }
        self.open_orders = self.open_orders.saturating_sub(1);
    }
    pub fn position(&self, symbol: u32) -> i64 {
        self.symbols.get(symbol as usize).map_or(0, |s| s.position)
    }
    pub fn open_orders(&self) -> u64 {
        self.open_orders
    }
    pub fn accepted(&self) -> u64 {
        self.accepted
    }
    /// Refusals by reason.
    pub fn rejects(&self) -> impl Iterator<Item = (RiskReject, u64)> + '_ {
        RiskReject::ALL.into_iter().map(|r| (r, self.rejects[r as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PX: i64 = 100_000_000_000; // 100.0

    fn buy(qty: u64) -> OrderIntent {
        OrderIntent { symbol: 1, buy: true, qty, price: PX }
    }

    #[test]
    fn each_limit_refuses_with_its_reason() {
        let mut r = Risk::new(RiskLimits { max_order_qty: 500, ..Default::default() });
        assert_eq!(r.check(0, &buy(501)), Err(RiskReject::MaxOrderQty));
        assert_eq!(r.check(0, &buy(500)), Ok(()));
        let mut r = Risk::new(RiskLimits { max_notional: 10_000, ..Default::default() });
        assert_eq!(r.check(0, &buy(101)), Err(RiskReject::MaxNotional));
        assert_eq!(r.check(0, &buy(100)), Ok(()));
        let mut r = Risk::new(RiskLimits { max_open_orders: 2, ..Default::default() });
        assert!(r.check(0, &buy(1)).is_ok() && r.check(0, &buy(1)).is_ok());
        assert_eq!(r.check(0, &buy(1)), Err(RiskReject::MaxOpenOrders));
        r.on_fill(1, true, 1, true);
        assert_eq!(r.check(0, &buy(1)), Ok(()));
        let mut r = Risk::new(RiskLimits { max_orders_per_second: 2, ..Default::default() });
        assert!(r.check(0, &buy(1)).is_ok() && r.check(10, &buy(1)).is_ok());
        assert_eq!(r.check(999_999_999, &buy(1)), Err(RiskReject::RateLimit));
        assert_eq!(r.check(1_000_000_000, &buy(1)), Ok(()), "the first left the window");
        let mut r = Risk::new(RiskLimits { max_position: 200, ..Default::default() });
        assert!(r.check(0, &buy(100)).is_ok());
        r.on_fill(1, true, 100, true);
        assert!(r.check(0, &buy(100)).is_ok());
        assert_eq!(r.check(0, &buy(1)), Err(RiskReject::PositionLimit), "100 held + 100 open + 1");
        assert_eq!(r.position(1), 100);
        let mut r = Risk::new(RiskLimits { collar_bps: 100, ..Default::default() });
        assert_eq!(r.check(0, &buy(1)), Ok(()), "no trade yet: no collar");
        r.on_trade(1, 98_000_000_000);
        assert_eq!(r.check(0, &buy(1)), Err(RiskReject::PriceCollar), "100 is 2% from 98");
        r.on_trade(1, 99_500_000_000);
        assert_eq!(r.check(0, &buy(1)), Ok(()));
        r.set_kill_switch(true);
        assert_eq!(r.check(0, &buy(1)), Err(RiskReject::KillSwitch));
        let counts: Vec<_> = r.rejects().filter(|x| x.1 > 0).collect();
        assert_eq!(counts, vec![(RiskReject::KillSwitch, 1), (RiskReject::PriceCollar, 1)]);
    }

    /// The notional is whole currency units rounded down: a hair under the limit's next
    /// unit passes, the next unit is refused, and sizes far past u64 do not overflow.
    #[test]
    fn the_notional_limit_is_exact_at_its_edge() {
        let mut r = Risk::new(RiskLimits { max_notional: 10_000, ..Default::default() });
        let at = |price: i64| OrderIntent { symbol: 1, buy: true, qty: 1, price };
        assert_eq!(r.verdict(0, &at(10_000_999_999_999)), Ok(()), "10,000.999999999 is 10,000 whole units");
        assert_eq!(r.verdict(0, &at(10_001_000_000_000)), Err(RiskReject::MaxNotional));
        assert_eq!(r.verdict(0, &at(-10_001_000_000_000)), Err(RiskReject::MaxNotional), "by absolute value");
        let huge = OrderIntent { symbol: 1, buy: true, qty: u64::MAX, price: i64::MAX };
        assert_eq!(r.verdict(0, &huge), Err(RiskReject::MaxNotional));
        // About 1.7e29 units: over even the largest limit, with no overflow on the way.
        let mut r = Risk::new(RiskLimits { max_notional: u64::MAX, ..Default::default() });
        assert_eq!(r.verdict(0, &huge), Err(RiskReject::MaxNotional));
        let big = OrderIntent { symbol: 1, buy: true, qty: 1_000_000_000, price: 1_000_000_000_000_000 };
        assert_eq!(r.verdict(0, &big), Ok(()), "1e15 units");
    }

    #[test]
    fn a_verdict_alone_opens_nothing() {
        let mut r = Risk::new(RiskLimits { max_open_orders: 1, max_orders_per_second: 1, ..Default::default() });
        for _ in 0..5 {
            assert_eq!(r.verdict(0, &buy(1)), Ok(()), "an order never sent takes no room");
        }
        assert_eq!((r.open_orders(), r.accepted()), (0, 0));
        r.on_sent(0, &buy(1));
        assert_eq!((r.open_orders(), r.accepted()), (1, 1));
        assert_eq!(r.verdict(0, &buy(1)), Err(RiskReject::MaxOpenOrders));
        assert_eq!(r.rejects().find(|x| x.0 == RiskReject::MaxOpenOrders).unwrap().1, 1);
    }

    proptest::proptest! {
        /// The rate check against a naive window (every send time kept, those of the past
        /// second counted), with time steps at and around the window's edge and the limit
        /// raised and lowered on the way (to 100: the ring grows while it wraps).
        #[test]
        fn the_rate_window_agrees_with_counting_every_order(
            steps in proptest::collection::vec((
                proptest::prop_oneof![
                    proptest::strategy::Just(0u64),
                    proptest::strategy::Just(1),
                    proptest::strategy::Just(333_333_333),
                    proptest::strategy::Just(999_999_999),
                    proptest::strategy::Just(1_000_000_000),
                    0u64..400_000_000,
                ],
                0u8..12,
            ), 1..300),
        ) {
            let mut limit = 3u64;
            let mut r = Risk::new(RiskLimits { max_orders_per_second: limit, ..Default::default() });
            let mut sent: Vec<u64> = Vec::new();
            let mut now = 0u64;
            for (dt, what) in steps {
                now += dt;
                if what == 0 {
                    // Small limits, and large ones that make the ring grow (and wrap).
                    limit = [1, 2, 3, 5, 40, 100][(dt % 6) as usize];
                    r.set_limits(RiskLimits { max_orders_per_second: limit, ..Default::default() });
                    continue;
                }
                let in_window = sent.iter().filter(|&&t| t + 1_000_000_000 > now).count() as u64;
                let want = if in_window >= limit { Err(RiskReject::RateLimit) } else { Ok(()) };
                let got = r.check(now, &OrderIntent { symbol: 1, buy: what % 2 == 0, qty: 1, price: PX });
                proptest::prop_assert_eq!(got, want, "now {}, limit {}, {} in the window", now, limit, in_window);
                if got.is_ok() {
                    sent.push(now);
                }
            }
        }

        /// The ring alone against every send time kept: its verdicts under limits up to 50
        /// (so that it grows while its head is anywhere), and the times it holds, oldest
        /// first, are the newest of those sent.
        #[test]
        fn the_ring_keeps_the_newest_times_in_order(
            steps in proptest::collection::vec((
                proptest::prop_oneof![
                    proptest::strategy::Just(0u64),
                    proptest::strategy::Just(1),
                    proptest::strategy::Just(999_999_999),
                    0u64..300_000_000,
                ],
                proptest::sample::select(vec![1u64, 2, 7, 8, 9, 50]),
            ), 1..400),
        ) {
            let mut w = RateWindow::default();
            let mut sent: Vec<u64> = Vec::new();
            let mut now = 0u64;
            for (dt, max) in steps {
                now += dt;
                let in_window = sent.iter().filter(|&&t| t + 1_000_000_000 > now).count() as u64;
                let ok = w.admits(now, max);
                proptest::prop_assert_eq!(ok, in_window < max, "now {}, max {}", now, max);
                if ok {
                    w.record(now);
                    sent.push(now);
                }
                let held: Vec<u64> = (0..w.len).map(|k| w.times[(w.head + k) % w.times.len()]).collect();
                proptest::prop_assert_eq!(&held[..], &sent[sent.len() - w.len..]);
            }
        }

        /// `check` (one pass) is `verdict` then, on a pass, `on_sent`: the same answers and
        /// the same state after, over every limit, fills, trades and the kill switch.
        #[test]
        fn check_is_verdict_then_on_sent(
            limits in (0u64..400, 0u64..60_000, 0u64..6, 0u64..5, 0u64..900, 0u64..300),
            steps in proptest::collection::vec((0u8..6, 0u32..3, 1u64..300, 90_000_000_000i64..110_000_000_000, 0u64..400_000_000), 1..200),
        ) {
            let (q, n, o, rate, pos, collar) = limits;
            let limits = RiskLimits { max_order_qty: q, max_notional: n, max_open_orders: o, max_orders_per_second: rate, max_position: pos, collar_bps: collar };
            let (mut one, mut two) = (Risk::new(limits), Risk::new(limits));
            let mut now = 0u64;
            for (what, symbol, qty, price, dt) in steps {
                now += dt;
                let o = OrderIntent { symbol, buy: what % 2 == 0, qty, price };
                match what {
                    0 | 1 => {
                        let a = one.check(now, &o);
                        let b = two.verdict(now, &o);
                        if b.is_ok() {
                            two.on_sent(now, &o);
                        }
                        proptest::prop_assert_eq!(a, b);
                    }
                    2 => {
                        one.on_fill(symbol, o.buy, qty / 2, qty % 2 == 0);
                        two.on_fill(symbol, o.buy, qty / 2, qty % 2 == 0);
                    }
                    3 => {
                        one.on_trade(symbol, price);
                        two.on_trade(symbol, price);
                    }
                    4 => {
                        one.on_done(symbol, o.buy, qty);
                        two.on_done(symbol, o.buy, qty);
                    }
                    _ => {
                        one.set_kill_switch(qty % 7 == 0);
                        two.set_kill_switch(qty % 7 == 0);
                    }
                }
                proptest::prop_assert_eq!(
                    (one.open_orders(), one.accepted(), one.position(symbol)),
                    (two.open_orders(), two.accepted(), two.position(symbol))
                );
                proptest::prop_assert!(one.rejects().eq(two.rejects()));
            }
        }
    }
}

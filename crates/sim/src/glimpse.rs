//! A GLIMPSE snapshot of an ITCH 5.0 feed at a sequence number, sans-IO: the book state
//! after the feed's messages before it, as GLIMPSE sends it (every stock directory message,
//! then an Add Order for every open order with the shares it has left, in the order they
//! were added, then the End of Snapshot with the sequence number the live feed continues
//! from). `tickplant sim glimpse` serves it over SoupBinTCP.

use std::collections::{BTreeMap, HashMap};

use tickplant_core::packed::Packed;
use tickplant_wire::itch50::{self, AddOrder, Message};

/// Every message of a feed, by sequence number.
#[derive(Debug, Default)]
pub struct FeedMessages {
    first_seq: u64,
    /// Message `first_seq + i` is string `i`.
    messages: Packed,
}

impl FeedMessages {
    /// Take the messages of a MoldUDP64 data packet (its UDP payload) that continue what it
    /// holds; returns how many.
    pub fn load_packet(&mut self, payload: &[u8]) -> Result<usize, tickplant_wire::Error> {
        let p = tickplant_wire::moldudp64::Packet::new_checked(payload)?;
        if p.is_heartbeat() || p.is_end_of_session() {
            return Ok(0);
        }
        if self.messages.is_empty() {
            self.first_seq = p.sequence_number();
        }
        let mut taken = 0;
        for (seq, m) in (p.sequence_number()..).zip(p.messages()) {
            let (_, msg) = m?;
            if seq == self.next_seq() {
                self.messages.push(msg);
                taken += 1;
            }
        }
        Ok(taken)
    }
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }
    /// One past the last message held.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.messages.len() as u64
    }
    /// Message `seq`, if held.
    pub fn get(&self, seq: u64) -> Option<&[u8]> {
        self.messages.get(usize::try_from(seq.checked_sub(self.first_seq)?).ok()?)
    }

    /// The snapshot at `seq`: the state after every message before it (clamped to what is
    /// held), as GLIMPSE's ITCH messages, and the sequence number it continues from.
    pub fn snapshot_at(&self, seq: u64) -> (Vec<Vec<u8>>, u64) {
        let seq = seq.clamp(self.first_seq, self.next_seq());
        let mut st = BookState::default();
        for s in self.first_seq..seq {
            if let Some(m) = self.get(s) {
                st.apply(m);
            }
        }
        (st.messages(), seq)
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    /// When it was added (its priority), for the snapshot's order.
    added: u64,
    order: AddOrder,
}

/// Open orders and the stock directory, from ITCH messages.
#[derive(Debug, Default)]
pub struct BookState {
    directory: BTreeMap<u16, Vec<u8>>,
    open: HashMap<u64, Open>,
    adds: u64,
}

impl BookState {
    /// Apply one ITCH message (others than the directory and order messages are passed
    /// over, as are messages that do not parse).
    pub fn apply(&mut self, b: &[u8]) {
        let Ok(m) = itch50::parse_exact(b) else { return };
        match m {
            Message::StockDirectory(d) => {
                self.directory.insert(d.stock_locate, b.to_vec());
            }
            Message::AddOrder(a) => self.add(a),
            Message::AddOrderMpid(a) => self.add(a.add_order()),
            Message::OrderExecuted(e) => self.reduce(e.order_reference_number, e.executed_shares),
            Message::OrderExecutedWithPrice(e) => self.reduce(e.order_reference_number, e.executed_shares),
            Message::OrderCancel(c) => self.reduce(c.order_reference_number, c.cancelled_shares),
            Message::OrderDelete(d) => {
                self.open.remove(&d.order_reference_number);
            }
            Message::OrderReplace(u) => {
                if let Some(old) = self.open.remove(&u.original_order_reference_number) {
                    let order = AddOrder {
                        order_reference_number: u.new_order_reference_number,
                        shares: u.shares,
                        price: u.price,
                        timestamp: u.timestamp,
                        ..old.order
                    };
                    self.add(order);
                }
            }
            _ => {}
        }
    }

    fn add(&mut self, order: AddOrder) {
        self.adds += 1;
        self.open.insert(order.order_reference_number, Open { added: self.adds, order });
    }

    fn reduce(&mut self, id: u64, shares: u32) {
        if let Some(o) = self.open.get_mut(&id) {
            o.order.shares = o.order.shares.saturating_sub(shares);
            if o.order.shares == 0 {
                self.open.remove(&id);
            }
        }
    }

    /// Open orders now.
    pub fn open_orders(&self) -> usize {
        self.open.len()
    }

    /// The state as GLIMPSE's messages: the directory, then each open order, oldest first.
    pub fn messages(&self) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self.directory.values().cloned().collect();
        let mut open: Vec<&Open> = self.open.values().collect();
        open.sort_unstable_by_key(|o| o.added);
        for o in open {
            let mut b = vec![0u8; AddOrder::LEN];
            o.order.emit(&mut b);
            out.push(b);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_wire::itch50::{OrderExecuted, OrderReplace, StockDirectory};

    fn bytes<const N: usize>(emit: impl Fn(&mut [u8])) -> Vec<u8> {
        let mut b = vec![0u8; N];
        emit(&mut b);
        b
    }

    #[test]
    fn the_state_is_what_is_left_open() {
        let dir = StockDirectory { stock_locate: 1, stock: itch50::stock("AAAA"), ..Default::default() };
        let a = |id: u64, shares: u32| AddOrder {
            stock_locate: 1,
            order_reference_number: id,
            buy_sell_indicator: b'B',
            shares,
            stock: itch50::stock("AAAA"),
            price: 1000,
            ..Default::default()
        };
        let mut st = BookState::default();
        st.apply(&bytes::<39>(|b| dir.emit(b)));
        st.apply(&bytes::<36>(|b| a(1, 100).emit(b)));
        st.apply(&bytes::<36>(|b| a(2, 50).emit(b)));
        st.apply(&bytes::<31>(|b| {
            OrderExecuted { order_reference_number: 1, executed_shares: 30, ..Default::default() }.emit(b)
        }));
        st.apply(&bytes::<35>(|b| {
            OrderReplace {
                original_order_reference_number: 2,
                new_order_reference_number: 3,
                shares: 40,
                price: 1100,
                ..Default::default()
            }
            .emit(b)
        }));
        let m = st.messages();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0][0], b'R');
        let o1 = AddOrder::parse(&m[1]).unwrap();
        let o3 = AddOrder::parse(&m[2]).unwrap();
        assert_eq!((o1.order_reference_number, o1.shares, o1.price), (1, 70, 1000));
        assert_eq!((o3.order_reference_number, o3.shares, o3.price, o3.stock_locate), (3, 40, 1100, 1));
    }
}

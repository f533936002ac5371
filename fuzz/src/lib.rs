//! Fuzz target bodies. Each takes arbitrary bytes and must not panic; where a format has an
//! emitter, what parses must emit back to the same bytes. `cargo fuzz run NAME` drives them
//! with libFuzzer; the smoke test below drives every one with generated inputs on stable
//! Rust, which is what CI runs.

use tickplant_core::arb::check_stats;
use tickplant_core::*;
use tickplant_wire::{ethernet, ipv4, moldudp64, opra, udp, xdp};

pub fn ethernet(data: &[u8]) {
    if let Ok(f) = ethernet::Frame::new_checked(data) {
        let r = ethernet::Repr::parse(&f).expect("checked frame parses");
        let _ = (f.payload(), f.vlan_id());
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..r.buffer_len()]);
    }
}

pub fn ipv4(data: &[u8]) {
    if let Ok(p) = ipv4::Packet::new_checked(data) {
        let _ = (p.payload(), p.options(), p.verify_checksum(), p.is_fragment());
        if let Ok(r) = ipv4::Repr::parse(&p) {
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut out);
            let back = ipv4::Repr::parse(&ipv4::Packet::new_unchecked(&[&out[..], p.payload()].concat()[..]))
                .expect("emitted header parses");
            assert_eq!(back, r);
        }
    }
}

pub fn udp(data: &[u8]) {
    if let Ok(p) = udp::Packet::new_checked(data) {
        let _ = (p.payload(), p.verify_checksum([1, 2, 3, 4], [5, 6, 7, 8]));
        let r = udp::Repr::parse(&p).expect("checked datagram parses");
        let mut out = vec![0u8; 8];
        r.emit(&mut out);
        assert_eq!(&out[..6], &data[..6]);
    }
}

pub fn moldudp64(data: &[u8]) {
    if let Ok(p) = moldudp64::Packet::new_checked(data) {
        let n = p.messages().count();
        assert!(n <= usize::from(p.message_count()));
        let r = moldudp64::Repr::parse(&p).expect("checked packet parses");
        let mut out = vec![0u8; 20];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..20]);
        for k in 0..=p.message_count().min(8) {
            let _ = moldudp64::block_offset(data, k);
        }
    }
}

pub fn xdp(data: &[u8]) {
    if let Ok(p) = xdp::Packet::new_checked(data) {
        let _ = (p.messages().count(), p.is_sequence_reset());
        // Each message through the Integrated Feed layouts: fields or an error.
        for (_, m) in p.messages().flatten() {
            use tickplant_wire::xdp_integrated::{fields_of, Dialect};
            for d in [Dialect::Xdp21, Dialect::Pillar25] {
                if let Ok((l, f)) = fields_of(d, &m) {
                    assert_eq!(f.len(), l.fields.len());
                }
            }
        }
        // The pipeline's decoder with its books: every message announced counted once.
        use tickplant_core::feed::FeedDecoder as _;
        let books = tickplant_core::book::Books::new(tickplant_core::book::BookConfig {
            max_orders: 64,
            max_instruments: 64,
            ..Default::default()
        });
        let mut feed = tickplant_core::nyse::NyseXdpFeed::new(books);
        let mut out = tickplant_core::feed::EventBatch::default();
        let pk = tickplant_core::feed::Packet { payload: data, seq: 1, count: 0, arrival_ns: 0, prefetched: false };
        let d = feed.decode(&pk, &mut out);
        assert_eq!(d.messages, d.decoded + d.undecodable);
        assert_eq!(feed.books().stats().total(), d.decoded);
        let r = xdp::Repr::parse(&p).expect("checked packet parses");
        let mut out = vec![0u8; 16];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..16]);
        for k in 0..=p.number_msgs().min(8) {
            let _ = xdp::message_offset(data, k);
        }
    }
}

pub fn opra(data: &[u8]) {
    if let Ok(b) = opra::Block::new_checked(data) {
        let _ = (b.payload(), b.block_timestamp(), b.session_indicator());
        let r = opra::Repr::parse(&b).expect("checked block parses");
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut out);
        assert_eq!(&out[..], &data[..r.buffer_len()]);
    }
}

/// An OPRA binary block: every message through the tables and the typed views, and the
/// pipeline's decoder, which counts every message announced once.
pub fn opra_binary(data: &[u8]) {
    use tickplant_wire::opra_binary as ob;
    if let Ok(b) = opra::Block::new_checked(data) {
        let mut end = 0;
        for (at, m) in ob::messages(b.payload(), b.messages_in_block()).flatten() {
            assert!(at >= end, "messages do not overlap");
            end = at + m.bytes.len();
            assert_eq!(ob::message_len(m.bytes), Ok(m.bytes.len()));
            let f = ob::fields(&m);
            assert!(f.len() >= ob::HEADER.len());
            let _ = (ob::Quote::parse(&m), ob::LastSale::parse(&m));
        }
    }
    let mut feed = tickplant_core::opra_binary::OpraBinaryFeed::new(4);
    let mut out = tickplant_core::feed::EventBatch::default();
    use tickplant_core::feed::FeedDecoder as _;
    let p = tickplant_core::feed::Packet { payload: data, seq: 1, count: 3, arrival_ns: 0, prefetched: false };
    let d = feed.decode(&p, &mut out);
    assert_eq!(d.messages, d.decoded + d.undecodable);
    assert_eq!(feed.stats().messages, d.decoded);
}

/// Classify a frame with every preset and, for market data, trim it at every message.
pub fn sequencer(data: &[u8]) {
    for proto in [Protocol::Moldudp64, Protocol::Xdp, Protocol::Opra, Protocol::Custom] {
        let s = Sequencer::new(SequencerConfig::preset(proto)).expect("preset");
        for link in [LinkType::Ethernet, LinkType::RawIp, LinkType::LinuxSll, LinkType::LinuxSll2] {
            if let Ok(info) = s.classify(link, data) {
                let mut out = Vec::new();
                for skip in 1..info.count.min(4) {
                    if s.trim(data, &info, skip, &mut out) {
                        let j = s.classify(link, &out).expect("a trimmed frame still classifies");
                        assert_eq!((j.seq, j.count), (info.seq + u64::from(skip), info.count - skip));
                    }
                }
            }
        }
    }
}

/// Drive an arbitrator with an arbitrary sequence of packets, timeouts, policy changes and
/// flushes; the outputs must stay in order and the accounting must balance.
pub fn arbitrator(data: &[u8]) {
    #[derive(Default)]
    struct Check {
        ll: Vec<u64>,
    }
    impl ArbSink for Check {
        fn ll(&mut self, r: &tickplant_core::Released<'_>) {
            self.ll.push(u64::from_be_bytes(r.frame[52..60].try_into().expect("8 bytes")));
        }
        fn hr(&mut self, r: &tickplant_core::Released<'_>) {
            assert!(r.release_ns >= r.arrival_ns);
        }
    }
    let Some((&cfg_byte, rest)) = data.split_first() else { return };
    let cfg = ArbConfig {
        capacity_packets: 1 + usize::from(cfg_byte & 7),
        reset_jump: if cfg_byte & 8 != 0 { 64 } else { 0 },
        idle_ns: if cfg_byte & 16 != 0 { 500 } else { 0 },
        start_seq: (cfg_byte & 32 != 0).then_some(1),
        // Re-request on: its answers are a third input, and its requests are drained.
        rerequest: (cfg_byte & 64 != 0).then_some(tickplant_core::RerequestConfig {
            line_wait_ns: 300,
            max_msgs: 3,
            max_outstanding: 2,
            retry_ns: 200,
            max_retries: 2,
            ..Default::default()
        }),
        ..Default::default()
    };
    let inputs = if cfg.rerequest.is_some() { 3 } else { 2 };
    let mut arb = Arbitrator::new(cfg, Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).expect("preset"))
        .expect("valid");
    let mut sink = Check::default();
    let (mut resets, mut last_ll) = (0u64, None::<u64>);
    let mut now = 0u64;
    let sessions = [*b"SESSION001", *b"SESSION002"];
    for op in rest.chunks(4) {
        let [kind, a, b, c] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0), *op.get(3).unwrap_or(&0)];
        now += u64::from(c) * 7;
        match kind % 8 {
            0..=4 => {
                let seq = 1 + u64::from(a) + (u64::from(b & 0x3f) << 8);
                let count = u16::from(b >> 6) + u16::from(kind >> 6);
                let session = &sessions[usize::from(kind >> 5 & 1)];
                let bodies: Vec<[u8; 2]> = (0..count).map(|i| i.to_be_bytes()).collect();
                let refs: Vec<&[u8]> = bodies.iter().map(|x| &x[..]).collect();
                let frame = tickplant_wire::build::udp_frame(
                    &Default::default(),
                    0,
                    &tickplant_wire::build::moldudp64_payload(session, seq, &refs),
                );
                arb.process(now, usize::from(kind) % inputs, &frame, &mut sink);
            }
            5 => arb.advance_to(now, &mut sink),
            6 => {
                let p = match a % 4 {
                    0 => Policy::LowLatency,
                    1 => Policy::Time { timeout_ns: u64::from(b) * 10 },
                    2 => Policy::Count { max_msgs: u64::from(b % 16) },
                    _ => Policy::TimeCount { timeout_ns: u64::from(b) * 10, max_msgs: u64::from(c % 16) },
                };
                arb.change_policy(now, p, &mut sink);
            }
            _ => arb.process(now, usize::from(a & 1), &op[..op.len().min(2)], &mut sink),
        }
        while let Some(q) = arb.poll_request() {
            assert!(q.count >= 1 && q.count <= 3, "a request of at most max_msgs: {q:?}");
        }
        let st = arb.stats();
        check_stats(&st).expect("accounting balances");
        // Within one sequence space the LL output only goes forward.
        if st.sequence_resets == resets {
            for &seq in &sink.ll {
                assert!(last_ll.is_none_or(|l| seq > l), "LL went backwards: {last_ll:?} then {seq}");
                last_ll = Some(seq);
            }
        } else {
            last_ll = sink.ll.last().copied();
            resets = st.sequence_resets;
        }
        sink.ll.clear();
    }
    arb.finish(now, &mut sink);
    let st = arb.stats();
    check_stats(&st).expect("accounting balances");
    assert_eq!(st.hr.pending, 0);
}

/// ITCH 5.0: parse (round trip through emit when it parses) and every framing; the batch
/// parser gives the stream's messages, offsets and error.
pub fn itch50(data: &[u8]) {
    use tickplant_wire::itch50::{Batch, Framing, Message, Stream};
    if let Ok(m) = Message::parse(data) {
        let mut out = vec![0u8; m.buffer_len()];
        m.emit(&mut out);
        assert_eq!(&out[..], &data[..m.buffer_len()], "emit gives back the bytes parse read");
    }
    for f in [Framing::LengthPrefixed, Framing::InferLength, Framing::Raw] {
        let mut one = Vec::new();
        let mut stop = None;
        for r in Stream::new(data, f) {
            match r {
                Ok((at, b)) => one.push((at, Message::parse(b).expect("a framed message parses"))),
                Err(e) => stop = Some(e),
            }
        }
        let (mut batch, mut pos, mut all) = (Batch::new(), 0, Vec::new());
        let end = loop {
            match batch.parse(data, pos, f) {
                Ok(next) if batch.messages().is_empty() => {
                    assert_eq!(next, data.len(), "an empty batch only at the end");
                    break None;
                }
                Ok(next) => {
                    all.extend(batch.messages().iter().enumerate().map(|(i, m)| (batch.offset(i), *m)));
                    pos = next;
                }
                Err(e) => break Some(e),
            }
        };
        assert_eq!(all, one, "the batch parser reads what the stream reads");
        assert_eq!(end, stop, "and stops where it stops, with its error");
    }
}

/// FIX: framing, validation and every field of whatever validates; the group reader; a
/// message that validates is re-written by the writer to the same bytes when its fields
/// parse (the writer writes BodyLength without leading zeros, so compare only then).
pub fn fix(data: &[u8]) {
    use tickplant_wire::fix::{
        frame_len, parse_decimal, parse_decimal_in, whole_decimal_in, FieldIndex, Message, Writer,
    };
    // The word-at-once decimal reads agree with the byte reader on any bytes, whatever
    // follows the value: the value, and whether it is whole.
    for start in 0..data.len().min(16) {
        for end in start..data.len().min(start + 12) {
            let slow = parse_decimal(&data[start..end]);
            assert_eq!(parse_decimal_in(data, start, end), slow, "{:?}", &data[start..end]);
            let whole = slow.map(|v| (v % 1_000_000_000 == 0).then_some(v));
            assert_eq!(whole_decimal_in(data, start, end), whole, "{:?}", &data[start..end]);
        }
    }
    let _ = frame_len(data);
    let scanned = tick_to_trade(data);
    let Ok(m) = Message::new_checked(data) else {
        // The scan validates as `new_checked` does (its CheckSum from its own pass).
        assert!(scanned.is_err(), "the scan took a message new_checked refuses");
        return;
    };
    assert!(m.len() <= data.len());
    let mut ix = FieldIndex::new();
    if ix.parse(&m).is_err() {
        return;
    }
    // The tick-to-trade scan agrees with the full reader: an order for exactly the entries
    // whose MDEntryPx (270) is a whole number of dollars, with the Symbol (55) before it
    // (none without one), in order; or, when a price is not a decimal, an error.
    let mut sym: &[u8] = b"";
    let mut want = Some(Vec::new());
    for f in ix.fields() {
        match f.tag {
            55 => sym = f.value,
            270 => match (parse_decimal(f.value), want.as_mut()) {
                (Some(px), Some(w)) if px % 1_000_000_000 == 0 && !sym.is_empty() => {
                    w.push(String::from_utf8_lossy(sym).into_owned())
                }
                (None, _) => want = None,
                _ => {}
            },
            _ => {}
        }
    }
    match want {
        Some(w) => assert_eq!(scanned, Ok(w), "the scan's orders"),
        None => assert!(scanned.is_err(), "a price that is not a decimal is an error"),
    }
    let _ = ix.group(268, 279, &[]).map(|g| g.count());
    let _ = ix.group(268, 269, &[269, 270, 271, 55]).map(|g| g.count());
    let plain =
        !ix.fields().iter().any(|f| [91, 89, 96, 213, 446, 619, 622].contains(&f.tag) || (349..=365).contains(&f.tag));
    if plain {
        let begin = std::str::from_utf8(m.begin_string()).unwrap_or("");
        let mt = std::str::from_utf8(m.msg_type()).unwrap_or("");
        let mut w = Writer::new(begin, mt);
        for f in &ix.fields()[1..] {
            w.field(f.tag, f.value);
        }
        let digits_are_plain = m
            .as_bytes()
            .windows(3)
            .position(|x| x == b"\x019=".as_slice())
            .is_some_and(|p| m.as_bytes()[p + 3] != b'0');
        if digits_are_plain && begin.len() == m.begin_string().len() && mt.len() == m.msg_type().len() {
            assert_eq!(w.finish(), m.as_bytes(), "the writer gives back the bytes");
        }
    }
}

/// The tick-to-trade path on `data` as a market-data datagram, with no risk limits (every
/// whole-dollar entry orders): the symbols of its orders, in order, or that it failed. A
/// second engine with the price collar on (the walk's other copy) must not panic either.
fn tick_to_trade(data: &[u8]) -> Result<Vec<String>, ()> {
    use tickplant_core::risk::RiskLimits;
    use tickplant_core::ttt::{Fttc, FttcConfig};
    use tickplant_wire::fix::{FieldIndex, Message};
    let config = |limits| FttcConfig {
        begin_string: "FIX.4.4".into(),
        sender: "TP".into(),
        target: "EX".into(),
        qty: 100,
        limits,
        order_fields: Vec::new(),
    };
    let mut collared = Fttc::new(config(RiskLimits { collar_bps: 100, ..RiskLimits::default() }));
    let _ = collared.on_market_data(0, data, &mut 1, &mut |_: u64, _: &[u8]| {});
    let mut f = Fttc::new(config(RiskLimits::default()));
    let mut symbols = Vec::new();
    let r = f.on_market_data(0, data, &mut 1, &mut |_: u64, order: &[u8]| {
        let m = Message::new_checked(order).expect("an order is a valid FIX message");
        let mut ix = FieldIndex::new();
        ix.parse(&m).expect("an order's fields read");
        symbols.push(String::from_utf8_lossy(ix.get(55).expect("an order has a Symbol").value).into_owned());
    });
    r.map(|_| symbols).map_err(|_| ())
}

/// FIX sessions: an initiator and an acceptor over a connection the input drives (sends
/// both ways, deliveries whole or split, time, and restarts that lose whatever was in
/// flight, each side then coming back from its store). Each side's application messages
/// reach the other exactly once and in order, under any schedule; once the connection
/// behaves (a last restart, then deliveries and time), every one has arrived.
pub fn fix_session(data: &[u8]) {
    use std::collections::VecDeque;
    use tickplant_core::fix_session::{MemoryStore, Role, Session, SessionConfig, SessionEvent};
    use tickplant_wire::fix::{FieldIndex, Message};
    type S = Session<MemoryStore>;
    let cfg = |role, me: &str, them: &str| SessionConfig { heartbeat_s: 1, ..SessionConfig::new(role, me, them) };
    let (ini_cfg, acc_cfg) = (cfg(Role::Initiator, "BUY", "EXCH"), cfg(Role::Acceptor, "EXCH", "BUY"));
    struct Side {
        s: S,
        /// Bytes on their way to the other side.
        wire: VecDeque<Vec<u8>>,
        /// Ids of the application messages this side sent, in order.
        sent: Vec<u64>,
        /// Ids received, in order.
        got: Vec<u64>,
        closed: bool,
    }
    let connect = |cfg: &SessionConfig, store: MemoryStore, now: u64| {
        let mut s = Session::new(cfg.clone(), store);
        s.handle_connected(now);
        s
    };
    let mut now = 1_795_000_000_000_000_000u64;
    let fresh = |cfg: &SessionConfig| Side {
        s: connect(cfg, MemoryStore::default(), now),
        wire: VecDeque::new(),
        sent: vec![],
        got: vec![],
        closed: false,
    };
    let mut side = [fresh(&ini_cfg), fresh(&acc_cfg)];
    let mut next_id = 1u64;
    // Take out what each side wrote and what it says; check the promise as it goes.
    fn pump(side: &mut [Side; 2]) {
        for x in side.iter_mut() {
            while let Some(b) = x.s.poll_transmit() {
                x.wire.push_back(b);
            }
            while let Some(e) = x.s.poll_event() {
                match e {
                    SessionEvent::App { message, .. } => {
                        let m = Message::new_checked(&message).expect("a delivered message is valid");
                        let mut ix = FieldIndex::new();
                        ix.parse(&m).expect("its fields read");
                        let id = ix.get(11).expect("our id").as_uint().expect("a number");
                        assert!(
                            x.got.last().is_none_or(|&l| id > l),
                            "delivered twice or out of order: {:?} then {id}",
                            x.got
                        );
                        x.got.push(id);
                    }
                    SessionEvent::LoggedOut { .. } => x.closed = true,
                    _ => {}
                }
            }
        }
    }
    let deliver = |side: &mut [Side; 2], from: usize, split: Option<usize>, now: u64| {
        if let Some(b) = side[from].wire.pop_front() {
            let to = &mut side[1 - from].s;
            match split {
                Some(k) => {
                    let k = k % (b.len() + 1);
                    to.handle_bytes(now, &b[..k]);
                    to.handle_bytes(now, &b[k..]);
                }
                None => to.handle_bytes(now, &b),
            }
        }
    };
    let restart = |side: &mut [Side; 2], now: u64| {
        for (x, cfg) in side.iter_mut().zip([&ini_cfg, &acc_cfg]) {
            x.wire.clear();
            x.s = connect(cfg, x.s.store().clone(), now);
        }
    };
    pump(&mut side);
    for op in data.chunks(2).take(400) {
        let (kind, arg) = (op[0], *op.get(1).unwrap_or(&0));
        match kind % 8 {
            k @ 0..=1 => {
                let x = &mut side[usize::from(k)];
                if x.s.is_active() {
                    let id = next_id.to_string();
                    x.s.send(now, if k == 0 { "D" } else { "8" }, &[(11, id.as_bytes())]);
                    x.sent.push(next_id);
                    next_id += 1;
                }
            }
            k @ 2..=3 => deliver(&mut side, usize::from(k - 2), None, now),
            k @ 4..=5 => deliver(&mut side, usize::from(k - 4), Some(usize::from(arg)), now),
            6 => {
                now += u64::from(arg) * 20_000_000;
                for x in side.iter_mut() {
                    if x.s.poll_timeout().is_some_and(|t| t <= now) {
                        x.s.handle_timeout(now);
                    }
                }
            }
            _ => restart(&mut side, now),
        }
        pump(&mut side);
        if side.iter().any(|x| x.closed) {
            return;
        }
    }
    // The connection behaves from here: everything sent arrives.
    now += 1_000_000_000;
    restart(&mut side, now);
    for _ in 0..200 {
        pump(&mut side);
        if side.iter().all(|x| x.wire.is_empty()) {
            break;
        }
        for from in 0..2 {
            while !side[from].wire.is_empty() {
                deliver(&mut side, from, None, now);
            }
        }
    }
    pump(&mut side);
    assert!(side.iter().all(|x| !x.closed && x.s.is_active()), "both sides logged on again");
    assert_eq!(side[1].got, side[0].sent, "the acceptor has every message the initiator sent, once, in order");
    assert_eq!(side[0].got, side[1].sent, "the initiator has every message the acceptor sent, once, in order");
}

/// Books: arbitrary event sequences keep levels equal to the orders and the accounting balanced.
pub fn book(data: &[u8]) {
    use tickplant_core::book::{BookConfig, Books};
    use tickplant_core::event::{Event, EventAction, Side};
    let mut books = Books::new(BookConfig { max_orders: 16, max_instruments: 4, tick: 2 });
    let mut n = 0u64;
    for c in data.chunks_exact(6) {
        let action = EventAction::ALL[usize::from(c[0]) % EventAction::ALL.len()];
        let side = match c[1] % 3 {
            0 => Side::Bid,
            1 => Side::Ask,
            _ => Side::None,
        };
        let mut e = Event {
            action,
            side,
            order_id: u64::from(c[2] % 24),
            aux: u64::from(c[3] % 24),
            price: i64::from(c[4] % 8),
            size: u32::from(c[5]),
            instrument_id: u32::from(c[1] >> 4) % 6,
            ..Default::default()
        };
        books.apply(&mut e);
        n += 1;
        // The best levels the pipeline puts in every record are the depth's first.
        if let Some(b) = books.book(e.instrument_id) {
            assert_eq!(b.best_bid(), b.depth(Side::Bid, 1).next(), "best bid");
            assert_eq!(b.best_ask(), b.depth(Side::Ask, 1).next(), "best ask");
        }
    }
    books.check_consistency().expect("levels equal the orders");
    assert_eq!(books.stats().total(), n);
}

/// The strategy language and the index. No text makes the parser panic; and an index built,
/// changed and matched as the input says (single inserts, bulk inserts that pile hundreds of
/// interval ends onto a few values, removals, events at, beside and between those values)
/// gives for every event exactly the strategies that hold as written, as does its own brute
/// force.
pub fn matcher(data: &[u8]) {
    use std::collections::BTreeMap;
    use tickplant_core::matcher::{lang::Type, MatchEvent, Matcher, Strategy, Value};

    // The input as strategy text: any line, parsed or refused with a reason.
    let text = String::from_utf8_lossy(data);
    let mut m = Matcher::new();
    for line in text.lines().take(64) {
        let _ = m.insert_text(line);
    }
    let _ = m.schema_mut().parse_strategies(&text);

    // The input as a program over a small alphabet, so that strategies share values.
    const NUMS: [&str; 16] = [
        "-2",
        "-1",
        "0",
        "0.5",
        "1",
        "2",
        "3",
        "7",
        "7.000000001",
        "10",
        "100",
        "1000000",
        "9223372036",
        "9223372037",
        "-9223372037",
        "40000000000",
    ];
    const OPS: [&str; 6] = ["=", "!=", "<", "<=", ">", ">="];
    let mut bytes = data.iter().copied();
    let mut next = move || bytes.next();
    let mut m = Matcher::new();
    let mut oracle: BTreeMap<u64, Strategy> = BTreeMap::new();
    let mut bulk_id = 1_000u64;
    let mut events = 0;
    let pred = |a: u8, b: u8, c: u8| -> String {
        let num = NUMS[usize::from(c % 16)];
        match a % 8 {
            0..=3 => format!("n{} {} {num}", a % 4, OPS[usize::from(b % 6)]),
            4 => format!("s{} {} \"v{}\"", b % 2, if c & 16 == 0 { "=" } else { "!=" }, c % 3),
            5 => format!("s{} in (\"v{}\", \"v{}\")", b % 2, c % 3, (c >> 2) % 3),
            6 => format!("n{} {} n{}", b % 4, OPS[usize::from(c % 6)], (c >> 3) % 4),
            _ => format!("n{} in ({num}, {})", b % 4, NUMS[usize::from((c >> 4) % 16)]),
        }
    };
    let insert = |m: &mut Matcher, oracle: &mut BTreeMap<u64, Strategy>, line: &str| {
        if let Ok(s) = m.schema_mut().parse_strategy(line, 1) {
            if m.insert(s.clone()).is_ok() {
                oracle.insert(s.id, s);
            }
        }
    };
    while let Some(op) = next() {
        match op % 8 {
            0..=2 => {
                let id = u64::from(next().unwrap_or(0) % 64) + 1;
                let n = usize::from(op >> 3) % 4 + 1;
                let preds: Vec<String> =
                    (0..n).map(|_| pred(next().unwrap_or(0), next().unwrap_or(0), next().unwrap_or(0))).collect();
                insert(&mut m, &mut oracle, &format!("{id}: {}", preds.join(" and ")));
            }
            3 if oracle.len() < 2_000 => {
                // Many ranges on few values: long boundary lists, pending batches, re-cuts.
                let k = 16 + usize::from(next().unwrap_or(0)) * 2;
                let mut x = u64::from(next().unwrap_or(1)) << 8 | u64::from(next().unwrap_or(1)) | 1;
                let mut rnd = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..k {
                    let r = rnd();
                    let lo = NUMS[(r % 11) as usize];
                    let hi = NUMS[((r >> 8) % 16) as usize];
                    let mut line = format!("{bulk_id}: n{} >= {lo} and n{} <= {hi}", (r >> 16) % 4, (r >> 20) % 4);
                    if r >> 24 & 3 == 0 {
                        line.push_str(&format!(" and s{} = \"v{}\"", (r >> 26) % 2, (r >> 28) % 3));
                    }
                    insert(&mut m, &mut oracle, &line);
                    bulk_id += 1;
                }
            }
            4 => {
                let b = next().unwrap_or(0);
                let id = if b & 1 == 0 {
                    u64::from(b >> 1) % 64 + 1
                } else {
                    oracle.range(1_000..).nth(usize::from(b >> 1)).map_or(0, |(&id, _)| id)
                };
                let got = m.remove(id).map(|s| s.id);
                assert_eq!(got, oracle.remove(&id).map(|s| s.id), "removed");
            }
            _ if events < 48 => {
                events += 1;
                let mut e = MatchEvent::new(m.schema().attrs());
                for a in 0..6u8 {
                    let b = next().unwrap_or(0);
                    if b % 8 == 0 {
                        continue; // missing
                    }
                    let name = if a < 4 { format!("n{a}") } else { format!("s{}", a - 4) };
                    let Some(id) = m.schema().attr_id(&name) else { continue };
                    let v = match m.schema().attr_type(id) {
                        Some(Type::Num) => {
                            let base = tickplant_core::matcher::lang::parse_num(NUMS[usize::from(b >> 4)])
                                .expect("the table's numbers parse");
                            Value::Num(base + i128::from(b % 8) - 4)
                        }
                        Some(Type::Str) => match m.schema().sym_id(&format!("v{}", b % 3)) {
                            Some(s) => Value::Sym(s),
                            None => continue,
                        },
                        None => continue,
                    };
                    e.set(id, v);
                }
                let (mut got, mut brute) = (Vec::new(), Vec::new());
                m.match_event(&e, &mut got);
                m.match_brute_force(&e, &mut brute);
                let want: Vec<u64> = oracle.values().filter(|s| s.matches(&e)).map(|s| s.id).collect();
                assert_eq!(got, want, "the index against the strategies as written");
                assert_eq!(brute, want, "brute force against the strategies as written");
            }
            _ => {}
        }
    }
}

/// A SoupBinTCP server's byte stream as the GLIMPSE client reads it (the recovery's snapshot
/// connection; the first byte says where TCP cuts it). No input panics, and the stream cut
/// into pieces gives the same events, the same error at the same byte of the stream, and
/// the same snapshot as the stream delivered whole.
pub fn soupbintcp(data: &[u8]) {
    use tickplant_core::glimpse::{Glimpse, SoupClient, SoupLogin};
    let Some((&cut, stream)) = data.split_first() else { return };
    let read = |pieces: Vec<&[u8]>| {
        let mut c = SoupClient::new(SoupLogin::default(), 0);
        let mut g = Glimpse::new();
        let mut events = Vec::new();
        let mut error = None;
        for (i, p) in pieces.into_iter().enumerate() {
            let r = c.handle_input(i as u64, p, &mut |e| {
                events.push(format!("{e:?}"));
                g.on_event(e);
            });
            if let Err(e) = r {
                error = Some(e);
                break;
            }
        }
        let closed = c.handle_close().err();
        (events, error, closed, c.ended(), format!("{:?}", g.result()))
    };
    let whole = read(vec![stream]);
    let pieces = read(stream.chunks(1 + usize::from(cut % 13)).collect());
    assert_eq!(whole, pieces, "the stream whole and in pieces");
}

/// A template set with every type, operator, presence, sequences, groups and both kinds of
/// template reference: the program the FAST decoder target runs.
pub const FAST_TEMPLATES: &str = r#"<templates>
  <template name="Hdr"><uInt32 name="Seq"><increment/></uInt32></template>
  <template name="Inner" id="3"><int64 name="x"><delta/></int64><string name="y" presence="optional"><tail value="ABCD"/></string></template>
  <template name="All" id="1" dictionary="template">
    <templateRef name="Hdr"/>
    <string name="Sym"><copy/></string>
    <string name="U" charset="unicode" presence="optional"><delta/></string>
    <byteVector name="B" presence="optional"><default/></byteVector>
    <uInt64 name="Q" presence="optional"><copy value="5"/></uInt64>
    <int32 name="C" presence="optional"><constant value="-3"/></int32>
    <decimal name="Px"><exponent><default value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
    <decimal name="Net" presence="optional"><copy/></decimal>
    <decimal name="D" presence="optional"><delta/></decimal>
    <sequence name="E" presence="optional"><length name="n"><copy/></length>
      <uInt32 name="a"><increment value="1"/></uInt32><string name="s" presence="optional"><default value="z"/></string>
      <group name="g" presence="optional"><int32 name="gi"><copy/></int32></group>
    </sequence>
    <templateRef/>
  </template>
</templates>"#;

/// Two FAST messages of the fuzz templates (template 1 with most fields present and a
/// dynamic reference to template 3, then one leaning on the dictionary).
pub fn smoke_fast_seed() -> Vec<u8> {
    vec![
        0x7f, 0xe0, 0x81, 0x85, 0x41, 0xc2, 0x81, 0x82, 0x78, 0x79, 0x83, 0x01, 0x02, 0x88, 0xfe, 0x39, 0x45, 0xa3,
        0x81, 0x82, 0x80, 0x83, 0xf0, 0x81, 0x41, 0xc2, 0xc0, 0x83, 0x80, 0xe0, 0x83, 0x85, 0x58, 0xd9, 0xc0, 0x81,
        0x80, 0x81, 0x80, 0x80, 0x80, 0xc0, 0x83, 0x81,
    ]
}

/// FAST template XML: no input makes the parser or the compiler panic; what compiles lists.
pub fn fast_templates(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(set) = tickplant_fast::TemplateSet::parse(&text) {
        if let Ok(p) = tickplant_fast::Program::compile(&set) {
            let _ = p.listing();
        }
    }
}

/// FAST decoding: no input panics, loops or allocates without bound; every message that
/// decodes encodes again (as received) to bytes that decode to the same values, with the
/// generic program and with segments specialised for the input itself.
pub fn fast_decode(data: &[u8]) {
    use tickplant_fast::{Decoder, Encoder, Message, Program};
    thread_local! {
        static PROGRAM: Program = Program::from_xml(FAST_TEMPLATES).expect("the fuzz templates compile");
    }
    PROGRAM.with(|p| {
        let mut dec = Decoder::new(p);
        let mut enc = Encoder::new(p);
        let mut msg = Message::new();
        let mut decoded = Vec::new();
        let mut again = Vec::new();
        let mut at = 0;
        while at < data.len() && decoded.len() < 64 {
            match dec.decode(&data[at..], &mut msg) {
                Ok(n) => {
                    assert!(n > 0);
                    at += n;
                    enc.encode_as_received(&msg, &mut again).expect("a decoded message encodes");
                    decoded.push(msg.clone());
                }
                Err(e) => {
                    assert!(e.offset <= data.len() - at, "error offset inside the input");
                    break;
                }
            }
        }
        let render = |p: &Program, m: &Message| -> Vec<String> {
            m.entries
                .iter()
                .map(|e| format!("{}:{:?}", e.field, m.bytes_of(p, &e.value).map(<[u8]>::to_vec).ok_or(e.value)))
                .collect()
        };
        let mut dec2 = Decoder::new(p);
        let mut at = 0;
        for m in &decoded {
            let n = dec2.decode(&again[at..], &mut msg).expect("re-encoded message decodes");
            at += n;
            assert_eq!(render(p, &msg), render(p, m));
        }
        assert_eq!(at, again.len());
        // Specialised for this input: the same values.
        if !decoded.is_empty() {
            let mut sp = p.clone();
            let profile = {
                let mut d = Decoder::new(&sp);
                d.start_profile();
                let mut at = 0;
                for _ in &decoded {
                    at += d.decode(&again[at..], &mut msg).expect("decodes");
                }
                d.take_profile()
            };
            sp.specialise(&profile, 8, 64, 0.0);
            let mut d = Decoder::new(&sp);
            let mut at = 0;
            for m in &decoded {
                at += d.decode(&again[at..], &mut msg).expect("specialised decode");
                assert_eq!(render(&sp, &msg), render(p, m));
            }
        }
    });
}

/// FAST decoding with the kernels as native code (tickplant-fast-jit): on any input, the
/// same messages, errors and dictionary state as the decoder's own kernels. The program is
/// specialised for the seed's presence maps and its kernels compiled once, so mutated seeds
/// run the native code and every way it hands back to the decoder.
pub fn fast_native(data: &[u8]) {
    use tickplant_fast::{Decoder, Message, Program};
    use tickplant_fast_jit::JitKernels;
    thread_local! {
        static NATIVE: (&'static Program, &'static JitKernels) = {
            let mut p = Program::from_xml(FAST_TEMPLATES).expect("the fuzz templates compile");
            let seed = smoke_fast_seed();
            let profile = {
                let mut d = Decoder::new(&p);
                d.start_profile();
                let mut m = Message::new();
                let mut at = 0;
                while at < seed.len() {
                    at += d.decode(&seed[at..], &mut m).expect("the seed decodes");
                }
                d.take_profile()
            };
            p.specialise(&profile, 8, 64, 0.0);
            let p: &'static Program = Box::leak(Box::new(p));
            let jit: &'static JitKernels = Box::leak(Box::new(JitKernels::compile(p).expect("the kernels compile")));
            assert!(jit.native_ops().0 > 0, "the seed's kernels have native operations");
            (p, jit)
        };
    }
    NATIVE.with(|&(p, jit)| {
        let mut native = Decoder::new(p);
        native.set_native(Some(jit)).expect("made for this program");
        let mut own = Decoder::new(p);
        let (mut mn, mut mo) = (Message::new(), Message::new());
        let mut at = 0;
        for _ in 0..64 {
            if at >= data.len() {
                break;
            }
            match (native.decode(&data[at..], &mut mn), own.decode(&data[at..], &mut mo)) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b, "bytes taken");
                    assert_eq!(mn.entries, mo.entries);
                    assert_eq!(mn.bytes, mo.bytes);
                    assert_eq!(mn.pmaps, mo.pmaps);
                    at += a;
                }
                (Err(a), Err(b)) => {
                    assert_eq!(format!("{a:?}"), format!("{b:?}"));
                    break;
                }
                (a, b) => panic!("native {a:?} against the decoder's {b:?}"),
            }
        }
    })
}

#[cfg(test)]
mod smoke {
    use super::*;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*: plenty for a smoke test.
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn seeds() -> Vec<Vec<u8>> {
        let mut w = tickplant_wire::fix::Writer::new("FIX.4.4", "X");
        w.field(49, b"MD").field(56, b"TP").field_uint(34, 7).field_uint(268, 2);
        w.field(279, b"0").field(269, b"0").field(55, b"AAPL").field(270, b"190.000");
        w.field(279, b"0")
            .field(269, b"2")
            .field(55, b"MSFT")
            .field(270, b"410.25")
            .field(95, b"3")
            .field(96, b"a\x01b");
        let fixmsg = w.finish().to_vec();
        let mold = tickplant_wire::build::moldudp64_payload(b"SESSION001", 5, &[b"AB", b"CDE", b"F"]);
        let mut x = vec![0u8; 16];
        xdp::push_message(&mut x, 100, &[1; 6]);
        xdp::push_message(&mut x, 1, &[0; 10]);
        xdp::Repr {
            pkt_size: x.len() as u16,
            delivery_flag: 11,
            number_msgs: 2,
            seq_num: 9,
            send_time: 0,
            send_time_ns: 0,
        }
        .emit(&mut x[..16]);
        let mut o = vec![0u8; 30];
        opra::Repr {
            version: 6,
            block_size: 30,
            data_feed_indicator: b'O',
            retransmission_indicator: b' ',
            session_indicator: Some(1),
            block_sequence_number: 77,
            messages_in_block: 2,
            timestamp: (1, 2),
            checksum: 0,
        }
        .emit(&mut o);
        // An OPRA binary block: a long quote with both appendages, a short quote, a control
        // message.
        let ob = {
            use tickplant_wire::opra_binary::build::{block, header, put, Put};
            use tickplant_wire::opra_binary::{layout, APPENDAGES};
            let mut k = Vec::new();
            header(&mut k, b'D', b'k', b' ', b'O', 7);
            let series = [Put::Bytes(b"AMZN"), Put::Bytes(&[0]), Put::Bytes(b"A"), Put::Int(19), Put::Int(24)];
            let tail = [
                Put::Bytes(b"B"),
                Put::Int(16525),
                Put::Bytes(b"B"),
                Put::Int(61),
                Put::Int(9),
                Put::Int(63),
                Put::Int(5),
            ];
            put(&mut k, layout(b'k', b' ').unwrap().fields, &[&series[..], &tail[..]].concat());
            for a in &APPENDAGES {
                put(&mut k, a, &[Put::Bytes(b"P"), Put::Bytes(b"B"), Put::Int(62), Put::Int(3)]);
            }
            let mut q = Vec::new();
            header(&mut q, b'T', b'q', b' ', b'F', 8);
            let v = [
                Put::Bytes(b"AMZN"),
                Put::Bytes(b"L"),
                Put::Int(29),
                Put::Int(23),
                Put::Int(1330),
                Put::Int(1410),
                Put::Int(4),
                Put::Int(1465),
                Put::Int(2),
            ];
            put(&mut q, layout(b'q', b' ').unwrap().fields, &v);
            let mut h = Vec::new();
            header(&mut h, b'O', b'H', b'N', b' ', 0);
            block(40, (1_701_291_404, 5), b'O', &[&k, &q, &h])
        };
        let flow = tickplant_wire::build::Flow::default();
        // FAST: template 1 with most fields present, then two short messages leaning on
        // the dictionary.
        let fast = smoke_fast_seed();
        // Strategy text: every predicate form, a comment, an attribute compared with another.
        let strategies = b"7: symbol = \"ABX\" and tsx_ask < nyse_bid and tsx_ask <= 40.04 # cross\n\
            8: symbol in (\"AAPL\", \"MSFT\") and spread < 0.01 and last > 190 and size != 100\n\
            9: n0 >= -1.5 and n0 <= 9223372037 and n1 in (1, 2, 3)\n"
            .to_vec();
        // A GLIMPSE snapshot as a SoupBinTCP server sends it, cut every 3 bytes.
        let glimpse = {
            use tickplant_wire::soupbintcp::Repr;
            let mut v = vec![2u8];
            let eos = tickplant_core::glimpse::end_of_snapshot(77);
            for p in [
                Repr::LoginAccepted { session: *b"0000000007", sequence: 1 },
                Repr::SequencedData(b"Rdirectory"),
                Repr::ServerHeartbeat,
                Repr::SequencedData(b"Aorder"),
                Repr::SequencedData(&eos),
                Repr::EndOfSession,
            ] {
                p.write_to(&mut v);
            }
            v
        };
        vec![
            glimpse,
            strategies,
            FAST_TEMPLATES.as_bytes().to_vec(),
            fast,
            tickplant_wire::build::udp_frame(&flow, 1, &mold),
            tickplant_wire::build::udp_frame(&flow, 2, &x),
            tickplant_wire::build::udp_frame(&flow, 3, &o),
            ob,
            mold,
            x,
            o,
            fixmsg,
        ]
    }

    /// Seeds every target's corpus for `cargo fuzz run` (which starts from nothing
    /// otherwise, and seldom builds a valid checksummed message by itself): the smoke's
    /// seeds, a three-entry market-data message, and slices of the real ITCH sample.
    /// `cargo test --manifest-path fuzz/Cargo.toml --lib -- --ignored seed_corpus`
    #[test]
    #[ignore = "writes fuzz/corpus/ for cargo fuzz"]
    fn seed_corpus() {
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut all = seeds();
        let mut w = tickplant_wire::fix::Writer::new("FIX.4.4", "X");
        w.field(49, b"MDSIM").field(56, b"TICKPLANT").field_uint(34, 8).field(52, b"20261121-14:30:00.123");
        w.field_uint(268, 3);
        for (t, sym, px) in
            [(b"0", &b"S0001"[..], &b"101.250"[..]), (b"1", b"AB", b"7"), (b"2", b"LONGSYMBOL1", b"99.000")]
        {
            w.field(279, b"0").field(269, t).field(55, sym).field(270, px).field(271, b"100");
        }
        all.push(w.finish().to_vec());
        let itch = here.join("../../shared/data/itch/ritch/ex20101224.TEST_ITCH_50");
        if let Ok(day) = std::fs::read(&itch) {
            all.extend(day.chunks(4096).step_by(16).map(|c| c[..c.len().min(1024)].to_vec()));
        }
        for target in std::fs::read_dir(here.join("fuzz_targets")).expect("fuzz_targets") {
            let name = target.expect("entry").path().file_stem().expect("a name").to_owned();
            let dir = here.join("corpus").join(name);
            std::fs::create_dir_all(&dir).expect("corpus directory");
            for (i, s) in all.iter().enumerate() {
                std::fs::write(dir.join(format!("seed-{i:02}")), s).expect("seed written");
            }
        }
    }

    fn drive(target: fn(&[u8]), iterations: usize, seed: u64) {
        let mut rng = Rng(seed);
        let seeds = seeds();
        for i in 0..iterations {
            let input: Vec<u8> = if i % 2 == 0 {
                // A seed with a few bytes changed, cut at a random length.
                let mut s = seeds[i / 2 % seeds.len()].clone();
                for _ in 0..1 + rng.next() % 4 {
                    let at = (rng.next() as usize) % s.len();
                    s[at] = rng.next() as u8;
                }
                let len = (rng.next() as usize) % (s.len() + 1);
                s.truncate(len.max(s.len() * 3 / 4));
                s
            } else {
                let len = (rng.next() % 200) as usize;
                (0..len).map(|_| rng.next() as u8).collect()
            };
            target(&input);
        }
    }

    /// The OPRA binary seed is a whole block of three messages, so the smoke mutates
    /// something the decoders read through.
    #[test]
    fn opra_binary_seed_decodes() {
        use tickplant_core::feed::FeedDecoder as _;
        let seed = seeds().into_iter().find(|s| s.len() > 21 && s[0] == 6 && s[21 + 1] == b'k').expect("the seed");
        let mut feed = tickplant_core::opra_binary::OpraBinaryFeed::new(4);
        let mut out = tickplant_core::feed::EventBatch::default();
        let p = tickplant_core::feed::Packet { payload: &seed, seq: 40, count: 3, arrival_ns: 0, prefetched: false };
        let d = feed.decode(&p, &mut out);
        assert_eq!((d.messages, d.decoded, d.undecodable), (3, 3, 0));
        assert_eq!(out.len(), 5, "two quotes' sides and a status");
    }

    #[test]
    fn every_target_survives_generated_inputs() {
        type Target = (&'static str, fn(&[u8]));
        let targets: [Target; 18] = [
            ("matcher", matcher),
            ("soupbintcp", soupbintcp),
            ("fix_session", fix_session),
            ("fast_templates", fast_templates),
            ("fast_decode", fast_decode),
            ("fast_native", fast_native),
            ("fix", fix),
            ("itch50", itch50),
            ("book", book),
            ("ethernet", ethernet),
            ("ipv4", ipv4),
            ("udp", udp),
            ("moldudp64", moldudp64),
            ("xdp", xdp),
            ("opra", opra),
            ("opra_binary", opra_binary),
            ("sequencer", sequencer),
            ("arbitrator", arbitrator),
        ];
        for (i, (name, t)) in targets.iter().enumerate() {
            let n = match *name {
                "arbitrator" => 3_000,
                "fix_session" => 5_000,
                "matcher" => 500,
                _ => 20_000,
            };
            drive(*t, n, 0x9e37_79b9 + i as u64);
        }
    }
}
#[cfg(test)]
mod fast_seed_check {
    /// The FAST seed decodes (two messages), so the smoke mutates something meaningful.
    #[test]
    fn fast_seed_decodes() {
        let p = tickplant_fast::Program::from_xml(super::FAST_TEMPLATES).unwrap();
        let seed = super::smoke_fast_seed();
        let mut d = tickplant_fast::Decoder::new(&p);
        let mut m = tickplant_fast::Message::new();
        let n = d.decode(&seed, &mut m).unwrap();
        assert_eq!(m.entries.len(), 20, "{:?}", m.entries);
        assert_eq!(d.decode(&seed[n..], &mut m).unwrap(), seed.len() - n);
    }
}

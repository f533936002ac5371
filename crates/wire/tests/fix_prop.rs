//! Property tests of the FIX reader, writer and order template against naive oracles: a
//! reader that splits on SOH (for messages without data fields), a checksum summed byte by
//! byte, and a stream cut at random points.

use proptest::prelude::*;
use tickplant_wire::fix::{self, FieldIndex, Message, OrderSpec, OrderTemplate, Writer, SOH};

/// Body fields: tags that are not header, trailer or length/data tags; values of printable
/// bytes, never empty.
fn fields() -> impl Strategy<Value = Vec<(u32, Vec<u8>)>> {
    let tag = (11u32..2000).prop_filter("not a length/data tag", |t| {
        ![89, 90, 91, 93, 95, 96, 212, 213, 445, 446, 618, 619, 621, 622].contains(t) && !(348..=365).contains(t)
    });
    let value = proptest::collection::vec(0x20u8..0x7f, 1..24);
    proptest::collection::vec((tag, value), 0..40)
}

/// The naive oracle: split the body on SOH and on the first '='.
fn naive(body: &[u8]) -> Vec<(u32, Vec<u8>)> {
    body.split(|&b| b == SOH)
        .filter(|f| !f.is_empty())
        .map(|f| {
            let eq = f.iter().position(|&b| b == b'=').unwrap();
            (std::str::from_utf8(&f[..eq]).unwrap().parse().unwrap(), f[eq + 1..].to_vec())
        })
        .collect()
}

fn build(msg_type: &str, fields: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new("FIX.4.4", msg_type);
    for (t, v) in fields {
        w.field(*t, v);
    }
    w.finish().to_vec()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn reader_agrees_with_a_naive_split(fields in fields(), msg_type in "[A-Z0-9]{1,2}") {
        let b = build(&msg_type, &fields);
        // The checksum, byte by byte.
        let sum: u32 = b[..b.len() - 7].iter().map(|&x| u32::from(x)).sum();
        prop_assert_eq!(&b[b.len() - 7..b.len() - 4], b"10=");
        prop_assert_eq!(std::str::from_utf8(&b[b.len() - 4..b.len() - 1]).unwrap(), format!("{:03}", sum % 256));
        let m = Message::new_checked(&b).unwrap();
        prop_assert_eq!(m.msg_type(), msg_type.as_bytes());
        let got: Vec<(u32, Vec<u8>)> = m.fields().map(|f| f.map(|f| (f.tag, f.value.to_vec()))).collect::<Result<_, _>>().unwrap();
        let body_start = b.iter().enumerate().filter(|x| *x.1 == SOH).nth(1).unwrap().0 + 1;
        prop_assert_eq!(&got, &naive(&b[body_start..b.len() - 7]));
        prop_assert_eq!(&got[1..], &fields[..]);
        let mut ix = FieldIndex::new();
        ix.parse(&m).unwrap();
        for f in ix.fields() {
            // Offsets point at the field's tag.
            let t = format!("{}=", f.tag);
            prop_assert_eq!(&b[f.offset..f.offset + t.len()], t.as_bytes());
        }
    }

    #[test]
    fn a_stream_cut_anywhere_frames_whole_messages(
        msgs in proptest::collection::vec(fields(), 1..5),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let wire: Vec<u8> = msgs.iter().flat_map(|f| build("X", f)).collect();
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
        points.push(wire.len());
        points.sort_unstable();
        // Feed the stream in pieces; take each whole message as soon as it is there.
        let (mut buf, mut from, mut seen) = (Vec::new(), 0, Vec::new());
        for p in points {
            buf.extend_from_slice(&wire[from..p]);
            from = p;
            while let Some(n) = fix::frame_len(&buf).unwrap() {
                let m = Message::new_checked(&buf[..n]).unwrap();
                seen.push(m.fields().count() - 1);
                buf.drain(..n);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(seen, msgs.iter().map(Vec::len).collect::<Vec<_>>());
    }

    #[test]
    fn changed_bytes_never_panic_and_rarely_pass(fields in fields(), at in any::<prop::sample::Index>(), x in 1u8..=255) {
        let mut b = build("X", &fields);
        let i = at.index(b.len());
        b[i] ^= x;
        if let Ok(m) = Message::new_checked(&b) {
            // A change the checksum cannot see (it only sums): the fields still parse or
            // fail with an error, never a panic.
            for f in m.fields() {
                let _ = f;
            }
        }
        let _ = fix::frame_len(&b);
    }

    #[test]
    fn template_equals_the_writer(
        seq in 0u64..1_000_000_000, id in 0u64..1_000_000_000_000, qty in 0u64..1_000_000_000,
        price in 0i64..10_000_000, sell in any::<bool>(), ns in 0u64..4_102_444_800_000_000_000,
        symbol in "[A-Z]{1,6}", steps in proptest::collection::vec((0u8..4, 0u64..3), 0..8),
    ) {
        let mut spec = OrderSpec::new("FIX.4.2", "TP", "EX", &symbol);
        spec.ord_type = b'2';
        let mut t = OrderTemplate::new(&spec);
        let (mut seq, mut id, mut qty, mut price, mut ns) = (seq, id, qty, price, ns);
        // The first order, then orders that change a little: the next sequence number and
        // order id (carries included: 999 -> 1000), the same quantity, another price.
        for k in 0..=steps.len() {
            if k > 0 {
                let (what, by) = steps[k - 1];
                match what {
                    0 => seq = (seq + by + 1).min(999_999_999),
                    1 => id = (id + by + 1).min(999_999_999_999),
                    2 => qty = (qty + by) % 1_000_000_000,
                    _ => price = (price + by as i64 * 7) % 10_000_000,
                }
                ns += by * 1_234_567;
            }
            let px = price * 100_000; // four decimals
            t.set_seq_num(seq).unwrap();
            t.set_cl_ord_id(id).unwrap();
            t.set_qty(qty).unwrap();
            t.set_price(px).unwrap();
            t.set_side(if sell { b'2' } else { b'1' });
            t.set_time(ns);
            let mut ts = [0u8; 21];
            fix::utc_timestamp(ns, &mut ts);
            let got = t.bytes().to_vec();
            let mut w = Writer::new("FIX.4.2", "D");
            w.field(49, b"TP").field(56, b"EX").field(34, format!("{seq:09}").as_bytes()).field(52, &ts);
            w.field(11, format!("{id:012}").as_bytes()).field(55, symbol.as_bytes());
            w.field(54, if sell { b"2" } else { b"1" }).field(60, &ts);
            w.field(38, format!("{qty:09}").as_bytes()).field(40, b"2");
            w.field(44, format!("{:07}.{:04}", price / 10_000, price % 10_000).as_bytes());
            w.field(21, b"1"); // HandlInst, required in FIX 4.2
            prop_assert_eq!(&got[..], w.finish());
            let m = Message::new_checked(&got).unwrap();
            let mut ix = FieldIndex::new();
            ix.parse(&m).unwrap();
            prop_assert_eq!(ix.get(44).unwrap().as_decimal().unwrap(), px);
            prop_assert_eq!(ix.get(34).unwrap().as_uint().unwrap(), seq);
        }
    }
}

fn naive_checksum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |s, &b| s.wrapping_add(b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Any bytes, any length up to several 1 KiB blocks, with and without high bits.
    #[test]
    fn checksum_equals_byte_by_byte(bytes in proptest::collection::vec(any::<u8>(), 0..5000), high in any::<bool>()) {
        let bytes: Vec<u8> = if high { bytes.iter().map(|b| b | 0x80).collect() } else { bytes };
        prop_assert_eq!(fix::checksum(&bytes), naive_checksum(&bytes));
    }
}

/// The worst cases for lane overflow: every length to 300 and long runs of the largest
/// bytes (a lane that overflowed 16 bits, or carried into its neighbour, shows here).
#[test]
fn checksum_of_long_runs_of_high_bytes() {
    for fill in [0x7fu8, 0xff, 0xfe, 0x80] {
        for len in (0..300).chain([1023, 1024, 1025, 2048, 4097, 65_536, 1 << 20]) {
            let bytes = vec![fill; len];
            assert_eq!(fix::checksum(&bytes), naive_checksum(&bytes), "{len} bytes of {fill:#x}");
        }
    }
}

/// A long message (a big snapshot) is read and written with the right CheckSum.
#[test]
fn long_messages_round_trip() {
    let mut w = Writer::new("FIX.4.4", "W");
    for i in 0..400u32 {
        w.field(58, format!("entry {i} ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~").as_bytes());
    }
    let bytes = w.finish().to_vec();
    assert!(bytes.len() > 10_000);
    let sum = naive_checksum(&bytes[..bytes.len() - 7]);
    assert_eq!(&bytes[bytes.len() - 4..bytes.len() - 1], format!("{sum:03}").as_bytes());
    Message::new_checked(&bytes).expect("a long message with a right CheckSum is read");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Counters shared by several templates, as the tick-to-trade engine runs them: mostly
    /// the next number (carries through runs of nines included), sometimes a jump or the
    /// same number again. Every order equals the writer's, CheckSum included.
    #[test]
    fn templates_fed_by_counters_equal_the_writer(
        start in prop_oneof![0u64..1_000, 999_990u64..1_000_010, 999_999_990u64..999_999_999],
        steps in proptest::collection::vec((0u8..10, 0u64..1_000_000, 0usize..3), 1..60),
        ns0 in 1_795_219_100_000_000_000u64..1_795_219_300_000_000_000,
        gaps in proptest::collection::vec(prop_oneof![0u64..2_000_000, 0u64..20_000_000_000], 60),
    ) {
        let symbols = ["A", "MSFT", "BRK.B"];
        let mut ts: Vec<OrderTemplate> = symbols.iter().map(|s| OrderTemplate::new(&OrderSpec::new("FIX.4.4", "TP", "EX", s))).collect();
        let (mut seq, mut id) = (fix::DigitCounter::default(), fix::DigitCounter::default());
        let mut n = start;
        // One stamp shared by every template, as the engine keeps it; time crosses
        // midnight (ns0 is a few minutes before one) and stays in one millisecond often.
        let mut stamp = fix::UtcStamp::default();
        let mut ns = ns0;
        for (k, (kind, jump, which)) in steps.into_iter().enumerate() {
            ns += gaps[k];
            n = match kind {
                0 => (n + jump) % 999_999_999,
                1 => n,
                _ => (n + 1) % 999_999_999,
            };
            seq.set(n);
            id.set(n * 7 % 999_999_999_999);
            let t = &mut ts[which];
            t.set_seq_num_from(&seq).unwrap();
            t.set_cl_ord_id_from(&id).unwrap();
            stamp.set(ns);
            t.set_time_from(&stamp);
            let got = t.bytes().to_vec();
            let mut w = Writer::new("FIX.4.4", "D");
            let mut ts21 = [0u8; 21];
            fix::utc_timestamp(ns, &mut ts21);
            w.field(49, b"TP").field(56, b"EX").field(34, format!("{:09}", seq.value()).as_bytes()).field(52, &ts21);
            w.field(11, format!("{:012}", id.value()).as_bytes()).field(55, symbols[which].as_bytes());
            w.field(54, b"1").field(60, &ts21).field(38, b"000000000").field(40, b"1");
            prop_assert_eq!(&got[..], w.finish());
            prop_assert!(Message::new_checked(&got).is_ok());
        }
    }
}

/// The naive oracle of `parse_decimal`: strings and i128, any length.
fn decimal_oracle(v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?;
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |x: &str| x.bytes().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return None;
    }
    let int = int.trim_start_matches('0');
    if int.len() > 19 {
        return None;
    }
    let iv: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let (f9, rest) = if frac.len() > 9 { frac.split_at(9) } else { (frac, "") };
    if rest.bytes().any(|c| c != b'0') {
        return None;
    }
    let fv: i128 = format!("{f9:0<9}").parse().unwrap();
    let x = iv * 1_000_000_000 + fv;
    if x > i128::from(i64::MAX) {
        return None;
    }
    Some(if neg { -x } else { x } as i64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The one-pass form, the long form and the oracle agree: prices as feeds write them,
    /// long runs of zeros (past the one-pass limit), values at the edge of i64, and junk.
    #[test]
    fn parse_decimal_equals_the_oracle(
        v in prop_oneof![
            "-?[0-9]{0,12}(\\.[0-9]{0,12})?",
            "-?0{0,20}[0-9]{0,3}\\.[0-9]{0,3}0{0,20}",
            "-?9{17,20}(\\.9{0,12})?",
            "-?922337203[0-9]{0,2}(\\.[0-9]{0,10})?",
            "[-.0-9a]{0,22}",
        ]
    ) {
        prop_assert_eq!(fix::parse_decimal(v.as_bytes()), decimal_oracle(v.as_bytes()), "{:?}", v);
    }
}

proptest! {
    /// The word-at-once price read equals `parse_decimal` on the same bytes, for values of
    /// every length up to 10 (the word path takes up to 8) with the bytes after the value
    /// anything (the rest of a message), and on values too close to the buffer's end for a
    /// word.
    #[test]
    fn parse_decimal_in_equals_parse_decimal(
        v in "[-.0-9]{0,3}[0-9]{0,4}[.]?[0-9]{0,3}|[0-9x.]{0,10}",
        after in prop::collection::vec(any::<u8>(), 0..10),
        before in 0usize..3,
    ) {
        let mut buf = vec![b'#'; before];
        buf.extend_from_slice(v.as_bytes());
        buf.extend_from_slice(&after);
        let (start, end) = (before, before + v.len());
        prop_assert_eq!(fix::parse_decimal_in(&buf, start, end), fix::parse_decimal(v.as_bytes()), "{:?} then {:?}", v, after);
        prop_assert_eq!(fix::whole_decimal_in(&buf, start, end), whole_oracle(v.as_bytes()), "{:?} then {:?}", v, after);
    }
}

/// What `whole_decimal_in` must give: `parse_decimal`'s value when it has no fractional
/// part, `Some(None)` when it has one, `None` for no decimal.
fn whole_oracle(v: &[u8]) -> Option<Option<i64>> {
    fix::parse_decimal(v).map(|x| (x % 1_000_000_000 == 0).then_some(x))
}

/// Every value of up to eight characters over digits and points, with the word path on
/// (eight bytes readable) and off: the same as `parse_decimal`.
#[test]
fn parse_decimal_in_every_short_shape() {
    let alphabet = [b'0', b'1', b'9', b'.', b'5'];
    for len in 1..=7usize {
        let mut idx = vec![0usize; len];
        loop {
            let v: Vec<u8> = idx.iter().map(|&k| alphabet[k]).collect();
            let mut buf = v.clone();
            buf.extend_from_slice(b"\x0110=123\x01");
            assert_eq!(
                fix::parse_decimal_in(&buf, 0, len),
                fix::parse_decimal(&v),
                "{:?}",
                String::from_utf8_lossy(&v)
            );
            assert_eq!(fix::parse_decimal_in(&v, 0, len), fix::parse_decimal(&v), "{:?}", String::from_utf8_lossy(&v));
            assert_eq!(fix::whole_decimal_in(&buf, 0, len), whole_oracle(&v), "{:?}", String::from_utf8_lossy(&v));
            assert_eq!(fix::whole_decimal_in(&v, 0, len), whole_oracle(&v), "{:?}", String::from_utf8_lossy(&v));
            let mut k = 0;
            while k < len {
                idx[k] += 1;
                if idx[k] < alphabet.len() {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
            if k == len {
                break;
            }
        }
    }
    for v in [
        &b"12345678"[..],
        b"99999999",
        b"1234.567",
        b".1234567",
        b"1234567.",
        b"00000000",
        b"-1234.56",
        b"12x4.567",
        b"1234.000",
        b"123.0000",
        b"-123.000",
        b"12345.00000",
    ] {
        let mut buf = v.to_vec();
        buf.push(1);
        assert_eq!(fix::parse_decimal_in(&buf, 0, v.len()), fix::parse_decimal(v), "{:?}", String::from_utf8_lossy(v));
        assert_eq!(fix::whole_decimal_in(&buf, 0, v.len()), whole_oracle(v), "{:?}", String::from_utf8_lossy(v));
    }
}

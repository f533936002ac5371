use super::*;
use crate::Error;

/// A counter's digits and digit sum follow it through carries, jumps and the wrap
/// from u64::MAX to 0 (which is a jump, not an increment).
#[test]
fn digit_counter_digits_and_sum() {
    let mut c = DigitCounter::default();
    for v in [1, 2, 9, 10, 99, 100, 101, 5, 999_999, 1_000_000, u64::MAX, 0, 1] {
        c.set(v);
        assert_eq!(c.tail(20), format!("{v:020}").as_bytes(), "{v}");
        assert_eq!(c.tail_sum(20), format!("{v:020}").bytes().map(u32::from).sum::<u32>(), "{v}");
    }
}

/// The framing fast path agrees with the general reader wherever it answers: whole
/// messages, messages cut short, one byte changed, other BeginStrings, long bodies.
#[test]
fn frame_fast_path_agrees_with_the_general_reader() {
    use proptest::prelude::*;
    let msg = (
        prop_oneof![Just("FIX.4.4"), Just("FIX.4.2"), Just("FIXT.1.1"), Just("FIX.4.x")],
        proptest::collection::vec(("[A-Za-z0-9]{1,30}", 11u32..80), 0..40),
    );
    proptest::proptest!(|(m in msg, cut in any::<prop::sample::Index>(), flip in any::<(prop::sample::Index, u8)>(), how in 0u8..3)| {
        let mut w = Writer::new(m.0, "X");
        for (v, t) in &m.1 {
            w.field(*t, v.as_bytes());
        }
        let mut b = w.finish().to_vec();
        match how {
            0 => {}
            1 => b.truncate(cut.index(b.len() + 1)),
            _ => {
                let at = flip.0.index(b.len().min(24));
                b[at] = flip.1;
            }
        }
        if let Some(fast) = frame_fix4(&b) {
            prop_assert_eq!(Ok(fast), frame_general(&b), "{:?}", String::from_utf8_lossy(&b));
        }
    });
}

/// The one-word trailer check says yes exactly when each of the byte checks does, on
/// words made of the bytes that matter and their neighbours.
#[test]
fn trailer_word_agrees_with_the_byte_checks() {
    use proptest::prelude::*;
    let byte = prop::sample::select(vec![SOH, b'1', b'0', b'=', b'9', b'/', b':', 0x02, 0xb1, 0xff]);
    proptest::proptest!(|(w in proptest::array::uniform8(byte))| {
        let bytes_ok = w[0] == SOH
            && &w[1..4] == b"10="
            && w[7] == SOH
            && w[4..7].iter().all(|b| b.is_ascii_digit());
        prop_assert_eq!(trailer_word_ok(&w), bytes_ok, "{:?}", w);
    });
}

/// BodyLength of every width: the fast path answers for 1 to 7 digits, as the general
/// reader does, and leaves longer ones and non-digits to it.
#[test]
fn frame_fast_path_every_body_length_width() {
    for digits in ["0", "7", "42", "209", "1234", "99999", "123456", "9999999", "12345678", "123456789", "12a", "-12"] {
        let mut b = fix(&format!("8=FIX.4.4|9={digits}|35=0|"));
        b.resize(b.len() + 40, b'x');
        match frame_fix4(&b) {
            Some(fast) => {
                assert!(digits.len() <= 7 && digits.bytes().all(|c| c.is_ascii_digit()), "{digits}");
                assert_eq!(Ok(fast), frame_general(&b), "{digits}");
            }
            None => assert!(digits.len() > 7 || !digits.bytes().all(|c| c.is_ascii_digit()), "{digits}"),
        }
    }
}

/// `|` for SOH, for readable test messages.
fn fix(s: &str) -> Vec<u8> {
    s.bytes().map(|b| if b == b'|' { SOH } else { b }).collect()
}
fn with_trailer(head_body: &str) -> Vec<u8> {
    // head_body: "8=FIX.4.4|9=?|35=...|" with ? replaced by the body length.
    let (head, body) = head_body.split_once("9=?|").unwrap();
    let mut m = fix(&format!("{head}9={}|{body}", body.len()));
    let sum = checksum(&m);
    m.extend_from_slice(&fix(&format!("10={sum:03}|")));
    m
}

const MD: &str = "8=FIX.4.4|9=?|35=X|49=MD|56=TP|34=7|52=20261121-14:30:00.123|268=2|279=0|269=0|55=AAPL|270=190.000|271=100|279=0|269=2|55=MSFT|270=410.25|271=5|";

#[test]
fn test_parse() {
    let b = with_trailer(MD);
    assert_eq!(frame_len(&b).unwrap(), Some(b.len()));
    let m = Message::new_checked(&b).unwrap();
    assert_eq!(m.begin_string(), b"FIX.4.4");
    assert_eq!(m.msg_type(), b"X");
    assert_eq!(m.len(), b.len());
    let mut ix = FieldIndex::new();
    ix.parse(&m).unwrap();
    assert_eq!(ix.get(tag::MSG_SEQ_NUM).unwrap().as_uint().unwrap(), 7);
    let entries: Vec<_> = ix.group(tag::NO_MD_ENTRIES, tag::MD_UPDATE_ACTION, &[]).unwrap().collect();
    assert_eq!(entries.len(), 2);
    let px: Vec<i64> =
        entries.iter().map(|e| e.iter().find(|f| f.tag == tag::MD_ENTRY_PX).unwrap().as_decimal().unwrap()).collect();
    assert_eq!(px, vec![190_000_000_000, 410_250_000_000]);
    assert_eq!(entries[1][2].value, b"MSFT");
    assert_eq!(&b[entries[1][2].offset..entries[1][2].offset + 3], b"55=");
}

#[test]
fn test_emit() {
    let mut w = Writer::new("FIX.4.4", "X");
    w.field(49, b"MD").field(56, b"TP").field_uint(34, 7).field(52, b"20261121-14:30:00.123");
    w.field_uint(268, 2).field(279, b"0").field(269, b"0").field(55, b"AAPL").field(270, b"190.000");
    w.field_uint(271, 100).field(279, b"0").field(269, b"2").field(55, b"MSFT");
    w.field_decimal(270, 410_250_000_000).field_uint(271, 5);
    assert_eq!(w.finish(), &with_trailer(MD)[..]);
}

#[test]
fn errors_say_what_and_where() {
    let good = with_trailer(MD);
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 2] = b'0' + (bad[n - 2] - b'0' + 1) % 10;
    let e = Message::new_checked(&bad).unwrap_err();
    assert!(matches!(e, Error::Malformed { what: "CheckSum (10) value" | "CheckSum (10): computed", .. }), "{e}");
    assert_eq!(e.offset(), n - 4);
    // A byte inside the body changed: the checksum catches it.
    let mut bad = good.clone();
    bad[30] ^= 0x20;
    assert!(Message::new_checked(&bad).is_err());
    // Truncated: more bytes needed, from the stream framer's point of view.
    assert_eq!(frame_len(&good[..good.len() - 1]).unwrap(), None);
    assert!(matches!(Message::new_checked(&good[..20]).unwrap_err(), Error::Truncated { .. }));
    assert!(matches!(frame_len(b"9=12|").unwrap_err(), Error::Malformed { what: "BeginString (8) first", .. }));
    let e = Message::new_checked(&fix("8=FIX.4.4|35=A|10=000|")).unwrap_err();
    assert_eq!(e, Error::Malformed { what: "BodyLength (9) second", offset: 10, value: 0 });
    // A tag with a leading zero (TagNum has none), and tag 0: said, with where.
    for (body, at) in [("8=FIX.4.4|9=?|35=X|0270=1.5|", 20), ("8=FIX.4.4|9=?|35=X|55=A|0=1|", 25)] {
        let b = with_trailer(body);
        let m = Message::new_checked(&b).unwrap();
        let e = FieldIndex::new().parse(&m).unwrap_err();
        assert!(matches!(e, Error::Malformed { what: "field tag (positive, no leading zeros)", .. }), "{e}");
        assert_eq!(e.offset(), at, "{body}");
    }
    // A wrong group count.
    let b = with_trailer("8=FIX.4.4|9=?|35=X|268=3|279=0|270=1|279=0|270=2|");
    let m = Message::new_checked(&b).unwrap();
    let mut ix = FieldIndex::new();
    ix.parse(&m).unwrap();
    let e = ix.group(268, 279, &[]).unwrap_err();
    assert_eq!(e, Error::Malformed { what: "group count: entries found", offset: 20, value: 2 });
    // An empty value and a bad tag.
    let b = with_trailer("8=FIX.4.4|9=?|35=X|55=|");
    let m = Message::new_checked(&b).unwrap();
    assert!(matches!(m.fields().nth(1).unwrap().unwrap_err(), Error::Malformed { what: "empty value", .. }));
    let b = with_trailer("8=FIX.4.4|9=?|35=X|5x5=A|");
    let m = Message::new_checked(&b).unwrap();
    assert!(matches!(m.fields().nth(1).unwrap().unwrap_err(), Error::Malformed { what: "field tag", offset: 21, .. }));
}

#[test]
fn data_fields_may_hold_soh() {
    let b = with_trailer("8=FIX.4.4|9=?|35=A|95=5|96=a|b|c|98=0|");
    let m = Message::new_checked(&b).unwrap();
    let f: Vec<_> = m.fields().map(|f| f.unwrap()).collect();
    assert_eq!(f.len(), 4);
    assert_eq!(f[2].value, &fix("a|b|c")[..]);
    assert_eq!(f[3].tag, 98);
}

#[test]
fn decimals_are_exact() {
    assert_eq!(parse_decimal(b"123.000"), Some(123_000_000_000));
    assert_eq!(parse_decimal(b"123"), parse_decimal(b"0123.0"));
    assert_eq!(parse_decimal(b"-0.000000001"), Some(-1));
    assert_eq!(parse_decimal(b".5"), Some(500_000_000));
    assert_eq!(parse_decimal(b"1.0000000001"), None);
    assert_eq!(parse_decimal(b"1.0000000000"), Some(1_000_000_000));
    for bad in [&b""[..], b"-", b".", b"1.2.3", b"1e5", b"99999999999"] {
        assert_eq!(parse_decimal(bad), None, "{:?}", std::str::from_utf8(bad));
    }
    assert_eq!(format_decimal(190_000_000_000), "190");
    assert_eq!(format_decimal(-410_250_000_000), "-410.25");
}

#[test]
fn timestamps_are_civil_utc() {
    let mut t = [0u8; 21];
    utc_timestamp(0, &mut t);
    assert_eq!(&t, b"19700101-00:00:00.000");
    // 2026-11-21 14:30:00.123 UTC.
    utc_timestamp(1_795_271_400_123_456_789, &mut t);
    assert_eq!(&t, b"20261121-14:30:00.123");
    utc_timestamp(951_782_400_000_000_000, &mut t); // a leap day
    assert_eq!(&t, b"20000229-00:00:00.000");
}

#[test]
fn template_patches_equal_a_fresh_message() {
    let mut spec = OrderSpec::new("FIX.4.4", "TP", "EXCH", "AAPL");
    spec.ord_type = b'2';
    spec.extra.push((59, "0".into()));
    let mut t = OrderTemplate::new(&spec);
    t.set_seq_num(42).unwrap();
    t.set_cl_ord_id(7).unwrap();
    t.set_side(b'2');
    t.set_qty(100).unwrap();
    t.set_price(190_125_000_000).unwrap();
    t.set_time(1_795_271_400_123_456_789);
    let got = t.bytes().to_vec();
    let mut w = Writer::new("FIX.4.4", "D");
    w.field(49, b"TP").field(56, b"EXCH").field(34, b"000000042").field(52, b"20261121-14:30:00.123");
    w.field(11, b"000000000007").field(55, b"AAPL").field(54, b"2").field(60, b"20261121-14:30:00.123");
    w.field(38, b"000000100").field(40, b"2").field(44, b"0000190.1250").field(59, b"0");
    assert_eq!(got, w.finish());
    assert!(Message::new_checked(&got).is_ok());
    assert_eq!(t.set_price(1), Err(TemplateError::Price(1)));
    assert_eq!(t.set_qty(10_000_000_000), Err(TemplateError::TooWide("OrderQty")));
    assert_eq!(t.set_symbol(b"MSFT"), Ok(()));
    assert_eq!(t.set_symbol(b"GOOGL"), Err(TemplateError::SymbolLength { want: 4, got: 5 }));
    assert!(Message::new_checked(t.bytes()).is_ok());
}

#[test]
fn counters_carry_and_feed_templates() {
    let mut c = DigitCounter::default();
    for v in [1u64, 2, 9, 10, 99, 100, 101, 12_345, 12_346, 999_999_999, 1_000_000_000] {
        c.set(v);
        assert_eq!(c.tail(12), format!("{v:012}").as_bytes());
    }
    let mut t = OrderTemplate::new(&OrderSpec::new("FIX.4.4", "A", "B", "X"));
    c.set(41);
    t.set_seq_num_from(&c).unwrap();
    c.set(42);
    t.set_cl_ord_id_from(&c).unwrap();
    let m = t.bytes().to_vec();
    let mut u = OrderTemplate::new(&OrderSpec::new("FIX.4.4", "A", "B", "X"));
    u.set_seq_num(41).unwrap();
    u.set_cl_ord_id(42).unwrap();
    assert_eq!(m, u.bytes());
    c.set(10_000_000_000);
    assert_eq!(t.set_seq_num_from(&c), Err(TemplateError::TooWide("MsgSeqNum")));
}

#[test]
fn soh_scan_agrees_with_a_plain_search() {
    let mut b = vec![b'a'; 40];
    for at in 0..40 {
        for from in 0..=at {
            b[at] = SOH;
            assert_eq!(find_soh(&b, from), Some(at));
            b[at] = b'a';
        }
    }
    assert_eq!(find_soh(&b, 0), None);
    assert_eq!(find_soh(&b, 100), None);
    // Bytes that differ from SOH in one bit, around a real one.
    let b = [0x00, 0x03, 0x81, 0x41, 0x11, 0x02, 0x01, 0x01, 0x00];
    assert_eq!(find_soh(&b, 0), Some(6));
    assert_eq!(checksum(&b), (b.iter().map(|&x| u32::from(x)).sum::<u32>() % 256) as u8);
}

/// The oracle of [`soh_bits`]: byte by byte.
fn soh_bits_naive(b: &[u8], base: usize) -> u64 {
    (0..64).filter(|&k| b.get(base + k) == Some(&SOH)).fold(0, |bits, k| bits | 1 << k)
}

#[test]
fn soh_bits_agree_with_a_byte_loop() {
    // Every length across the short, shifted-tail and whole-block cases, every base
    // (past the end too), one SOH at every place, and bytes one bit away from SOH.
    for n in 0..200 {
        let mut b: Vec<u8> = (0..n).map(|k| [b'a', 0x00, 0x03, 0x81, 0x41, 0x11][k % 6]).collect();
        for at in (0..n).step_by(7).chain(n.checked_sub(1)) {
            b[at] = SOH;
            for base in 0..n + 2 {
                assert_eq!(soh_bits(&b, base), soh_bits_naive(&b, base), "n {n} SOH at {at} base {base}");
            }
        }
    }
}

proptest::proptest! {
    #[test]
    fn soh_bits_agree_with_a_byte_loop_on_random_bytes(
        b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(SOH), proptest::arbitrary::any::<u8>()], 0..300),
        base in 0usize..320,
    ) {
        proptest::prop_assert_eq!(soh_bits(&b, base), soh_bits_naive(&b, base));
    }

    #[test]
    fn soh_bits_and_sum_agree_with_byte_loops_on_random_bytes(
        b in proptest::collection::vec(proptest::prop_oneof![proptest::strategy::Just(SOH), proptest::arbitrary::any::<u8>()], 0..530),
    ) {
        let mut bits = [u64::MAX; SCAN_WORDS];
        let got = soh_bits_and_sum(&b, &mut bits);
        if b.len() > 64 * SCAN_WORDS {
            proptest::prop_assert_eq!(got, None);
        } else {
            proptest::prop_assert_eq!(got, Some(b.iter().fold(0u8, |s, &c| s.wrapping_add(c))));
            for (w, &word) in bits.iter().enumerate() {
                proptest::prop_assert_eq!(word, soh_bits_naive(&b, 64 * w), "word {}", w);
            }
        }
    }
}

/// [`soh_bits_and_sum`] at every length it takes (and one past), with an SOH at every
/// seventh place and the last, bytes one bit away from SOH, and the sum's every lane.
#[test]
fn soh_bits_and_sum_agree_with_byte_loops() {
    for n in 0..=64 * SCAN_WORDS + 1 {
        let mut b: Vec<u8> = (0..n).map(|k| [b'a', 0x00, 0x03, 0x81, 0xff, 0x11, 0x7f][k % 7]).collect();
        for at in (0..n).step_by(7).chain(n.checked_sub(1)) {
            b[at] = SOH;
        }
        let mut bits = [u64::MAX; SCAN_WORDS];
        let got = soh_bits_and_sum(&b, &mut bits);
        if n > 64 * SCAN_WORDS {
            assert_eq!(got, None);
            continue;
        }
        assert_eq!(got, Some(b.iter().fold(0u8, |s, &c| s.wrapping_add(c))), "sum, n {n}");
        assert_eq!(got, Some(checksum(&b)), "checksum, n {n}");
        for (w, &word) in bits.iter().enumerate() {
            assert_eq!(word, soh_bits_naive(&b, 64 * w), "n {n} word {w}");
        }
    }
}

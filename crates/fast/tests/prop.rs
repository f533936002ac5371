//! Property tests: the fast stop-bit and presence-map readers against naive oracles, and
//! random templates with random values through encoder, decoder and specialised segments.

use proptest::prelude::*;
use tickplant_fast::codec::{self, naive};
use tickplant_fast::{Decimal, Decoder, Encoder, Entry, Message, Program, Value};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any bytes: the fast integer readers agree with the naive decoder, cases crossing 8, 9
    /// and 10 bytes included.
    #[test]
    fn integers_agree_with_naive(bytes in prop::collection::vec(any::<u8>(), 0..14), stop_at in 0usize..13) {
        let mut b = bytes.clone();
        // Bias towards well-formed values: clear stop bits before stop_at, set it there.
        if stop_at < b.len() {
            for x in &mut b[..stop_at] { *x &= 0x7f; }
            b[stop_at] |= 0x80;
        }
        let mut p = 0;
        let fast_u = codec::read_u64(&b, &mut p).ok().map(|v| (v, p));
        let slow_u = naive::read_unsigned(&b).and_then(|(v, n)| u64::try_from(v).ok().map(|v| (v, n)));
        prop_assert_eq!(fast_u, slow_u.filter(|(_, n)| *n <= 10));
        let mut p = 0;
        let fast_i = codec::read_i64(&b, &mut p).ok().map(|v| (v, p));
        let slow_i = naive::read_signed(&b).and_then(|(v, n)| i64::try_from(v).ok().map(|v| (v, n)));
        prop_assert_eq!(fast_i, slow_i.filter(|(_, n)| *n <= 10));
        let mut p = 0;
        let fast_nu = codec::read_u64_nullable(&b, &mut p).ok().map(|v| (v, p));
        let slow_nu = naive::read_unsigned(&b).filter(|(_, n)| *n <= 10).and_then(|(v, n)| {
            if v == 0 { Some((None, n)) } else { u64::try_from(v - 1).ok().map(|v| (Some(v), n)) }
        });
        prop_assert_eq!(fast_nu, slow_nu);
        let mut p = 0;
        let fast_ni = codec::read_i64_nullable(&b, &mut p).ok().map(|v| (v, p));
        let slow_ni = naive::read_signed(&b).filter(|(_, n)| *n <= 10).and_then(|(v, n)| {
            let v = match v { 0 => return Some((None, n)), v if v > 0 => v - 1, v => v };
            i64::try_from(v).ok().map(|v| (Some(v), n))
        });
        prop_assert_eq!(fast_ni, slow_ni);
    }

    /// Presence maps: the packed form agrees with the naive bit list.
    #[test]
    fn presence_maps_agree_with_naive(bytes in prop::collection::vec(any::<u8>(), 0..22), stop_at in 0usize..21) {
        let mut b = bytes.clone();
        if stop_at < b.len() {
            for x in &mut b[..stop_at] { *x &= 0x7f; }
            b[stop_at] |= 0x80;
        }
        let mut p = 0;
        let fast = codec::read_pmap(&b, &mut p).ok().map(|v| (v, p));
        let slow = naive::read_pmap(&b).filter(|(_, n)| *n <= 18).map(|(bits, n)| {
            let mut v = 0u128;
            for (i, &bit) in bits.iter().enumerate() {
                if bit { v |= 1u128 << (127 - i); }
            }
            (v, n)
        });
        prop_assert_eq!(fast, slow);
    }

    /// Writers then readers give the value back, in the fewest bytes.
    #[test]
    fn opra_blocks_give_back_their_messages(
        msgs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
        junk in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        // A well-formed block yields exactly its messages, with their offsets.
        let mut block = vec![0x01];
        for m in &msgs {
            block.push(m.len() as u8);
            block.extend_from_slice(m);
        }
        block.push(0x03);
        let got: Vec<_> = tickplant_fast::opra_block(&block).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got.len(), msgs.len());
        let mut at = 1;
        for ((off, body), m) in got.iter().zip(&msgs) {
            prop_assert_eq!(*off, at + 1);
            prop_assert_eq!(body, &m.as_slice());
            at += 1 + m.len();
        }
        // Any bytes: no panic, at most one error and it ends the walk, every message inside.
        let mut errors = 0;
        for r in tickplant_fast::opra_block(&junk) {
            prop_assert_eq!(errors, 0);
            match r {
                Ok((off, body)) => prop_assert!(off + body.len() < junk.len()),
                Err((off, _)) => {
                    prop_assert!(off < junk.len().max(1));
                    errors += 1;
                }
            }
        }
    }

    #[test]
    fn integers_round_trip(u in any::<u64>(), i in any::<i64>()) {
        let mut out = Vec::new();
        codec::write_u64(&mut out, u);
        let mut p = 0;
        prop_assert_eq!(codec::read_u64(&out, &mut p).unwrap(), u);
        prop_assert_eq!(p, out.len());
        prop_assert!(out.len() == 1 || out[0] != 0, "overlong {:x?}", out);
        out.clear();
        codec::write_i64(&mut out, i);
        p = 0;
        prop_assert_eq!(codec::read_i64(&out, &mut p).unwrap(), i);
        out.clear();
        codec::write_i64_nullable(&mut out, Some(i));
        p = 0;
        prop_assert_eq!(codec::read_i64_nullable(&out, &mut p).unwrap(), Some(i));
        out.clear();
        codec::write_u64_nullable(&mut out, Some(u));
        p = 0;
        prop_assert_eq!(codec::read_u64_nullable(&out, &mut p).unwrap(), Some(u));
    }
}

// ---------------------------------------------------------------------------------------
// Random templates and values
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    U32,
    I32,
    U64,
    I64,
    Dec,
    DecSplit,
    Ascii,
    Unicode,
    Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    None,
    Constant,
    Default,
    Copy,
    Increment,
    Delta,
    Tail,
}

#[derive(Debug, Clone)]
struct F {
    ty: Ty,
    op: Op,
    optional: bool,
    init: bool,
}

#[derive(Debug, Clone)]
enum Node {
    Field(F),
    Seq { optional: bool, body: Vec<F> },
    Group { optional: bool, body: Vec<F> },
}

fn field_strategy() -> impl Strategy<Value = F> {
    let ty = prop_oneof![
        Just(Ty::U32),
        Just(Ty::I32),
        Just(Ty::U64),
        Just(Ty::I64),
        Just(Ty::Dec),
        Just(Ty::DecSplit),
        Just(Ty::Ascii),
        Just(Ty::Unicode),
        Just(Ty::Bytes)
    ];
    let op = prop_oneof![
        Just(Op::None),
        Just(Op::Constant),
        Just(Op::Default),
        Just(Op::Copy),
        Just(Op::Increment),
        Just(Op::Delta),
        Just(Op::Tail)
    ];
    (ty, op, any::<bool>(), any::<bool>()).prop_map(|(ty, op, optional, init)| {
        // Keep only legal combinations: increment on integers, tail on vectors, values where
        // the specification requires them.
        let op = match (ty, op) {
            (Ty::Ascii | Ty::Unicode | Ty::Bytes | Ty::Dec | Ty::DecSplit, Op::Increment) => Op::Copy,
            (Ty::U32 | Ty::I32 | Ty::U64 | Ty::I64 | Ty::Dec | Ty::DecSplit, Op::Tail) => Op::Delta,
            (_, op) => op,
        };
        let init = init || op == Op::Constant || (op == Op::Default && !optional);
        F { ty, op, optional, init }
    })
}

fn node_strategy() -> impl Strategy<Value = Node> {
    prop_oneof![
        6 => field_strategy().prop_map(Node::Field),
        1 => (any::<bool>(), prop::collection::vec(field_strategy(), 1..5)).prop_map(|(optional, body)| Node::Seq { optional, body }),
        1 => (any::<bool>(), prop::collection::vec(field_strategy(), 1..5)).prop_map(|(optional, body)| Node::Group { optional, body }),
    ]
}

fn init_text(ty: Ty) -> &'static str {
    match ty {
        Ty::U32 | Ty::U64 => "7",
        Ty::I32 | Ty::I64 => "-3",
        Ty::Dec | Ty::DecSplit => "1.25",
        Ty::Ascii | Ty::Unicode => "AB",
        Ty::Bytes => "0a0b",
    }
}

fn op_xml(op: Op, init: Option<&str>) -> String {
    let name = match op {
        Op::None => return String::new(),
        Op::Constant => "constant",
        Op::Default => "default",
        Op::Copy => "copy",
        Op::Increment => "increment",
        Op::Delta => "delta",
        Op::Tail => "tail",
    };
    match init {
        Some(v) => format!("<{name} value=\"{v}\"/>"),
        None => format!("<{name}/>"),
    }
}

fn field_xml(f: &F, name: &str) -> String {
    let presence = if f.optional { " presence=\"optional\"" } else { "" };
    let init = if f.init { Some(init_text(f.ty)) } else { None };
    let (tag, extra) = match f.ty {
        Ty::U32 => ("uInt32", ""),
        Ty::I32 => ("int32", ""),
        Ty::U64 => ("uInt64", ""),
        Ty::I64 => ("int64", ""),
        Ty::Dec | Ty::DecSplit => ("decimal", ""),
        Ty::Ascii => ("string", ""),
        Ty::Unicode => ("string", " charset=\"unicode\""),
        Ty::Bytes => ("byteVector", ""),
    };
    if f.ty == Ty::DecSplit {
        // Exponent gets the operator; mantissa a delta (the usual exchange shape).
        let e_init = if f.init { Some("-2") } else { None };
        let e_op = if f.op == Op::Increment { Op::Copy } else { f.op };
        return format!(
            "<decimal name=\"{name}\"{presence}><exponent>{}</exponent><mantissa><delta/></mantissa></decimal>",
            op_xml(e_op, e_init)
        );
    }
    format!("<{tag} name=\"{name}\"{presence}{extra}>{}</{tag}>", op_xml(f.op, init))
}

fn template_xml(nodes: &[Node]) -> String {
    let mut s = String::from("<templates><template name=\"T\" id=\"5\">");
    for (i, n) in nodes.iter().enumerate() {
        match n {
            Node::Field(f) => s.push_str(&field_xml(f, &format!("f{i}"))),
            Node::Seq { optional, body } | Node::Group { optional, body } => {
                let tag = if matches!(n, Node::Seq { .. }) { "sequence" } else { "group" };
                let presence = if *optional { " presence=\"optional\"" } else { "" };
                s.push_str(&format!("<{tag} name=\"n{i}\"{presence}>"));
                if tag == "sequence" {
                    s.push_str(&format!("<length name=\"len{i}\"/>"));
                }
                for (j, f) in body.iter().enumerate() {
                    s.push_str(&field_xml(f, &format!("f{i}_{j}")));
                }
                s.push_str(&format!("</{tag}>"));
            }
        }
    }
    s.push_str("</template></templates>");
    s
}

/// A deterministic value generator (values derived from a seed, biased to repeat so copy,
/// increment and default get exercised).
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn small(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Prev {
    V(Value),
    S(Vec<u8>),
}

/// Values for one field of one message; `prev` carries each field's last value so repeats
/// (copy, increment, default) and tails happen.
fn fill(
    p: &Program,
    f: &F,
    field: u32,
    g: &mut Gen,
    msg: &mut Message,
    prev: &mut std::collections::HashMap<u32, Prev>,
) {
    if f.optional && g.small(4) == 0 {
        return;
    }
    let is_vec = matches!(f.ty, Ty::Ascii | Ty::Unicode | Ty::Bytes);
    let value = if f.op == Op::Constant {
        match f.ty {
            Ty::U32 | Ty::U64 => Prev::V(Value::UInt(7)),
            Ty::I32 | Ty::I64 => Prev::V(Value::Int(-3)),
            Ty::Dec => Prev::V(Value::Decimal(Decimal::new(125, -2))),
            Ty::DecSplit => Prev::V(Value::Decimal(Decimal::new(g.small(50) as i64, -2))),
            _ => {
                let idx = p.insns.iter().find(|i| i.field == field).map(|i| i.a).unwrap();
                Prev::S(p.strings[idx as usize].clone())
            }
        }
    } else if let (true, Some(v)) = (g.small(3) == 0, prev.get(&field)) {
        v.clone()
    } else if is_vec {
        let base = match prev.get(&field) {
            Some(Prev::S(s)) => s.clone(),
            _ => b"AB".to_vec(),
        };
        if f.op == Op::Tail {
            let mut s = base;
            let n = s.len();
            let k = n.min(1 + g.small(3) as usize);
            for c in &mut s[n - k..] {
                *c = b'a' + g.small(26) as u8;
            }
            if g.small(3) == 0 {
                s.push(b'z');
            }
            Prev::S(s)
        } else {
            let n = g.small(6) as usize;
            Prev::S((0..n).map(|_| if f.ty == Ty::Bytes { g.next() as u8 } else { b' ' + g.small(90) as u8 }).collect())
        }
    } else {
        Prev::V(match f.ty {
            Ty::U32 => Value::UInt(if g.small(2) == 0 { g.small(300) } else { g.next() & 0xffff_ffff }),
            // Within +-2^62: a delta between two values then fits the 64 bits it travels in.
            Ty::U64 => Value::UInt(if g.small(2) == 0 { g.small(300) } else { g.next() >> (2 + g.small(62)) }),
            Ty::I32 => Value::Int(i64::from(g.next() as i32 >> g.small(32))),
            Ty::I64 => Value::Int((g.next() as i64) >> (2 + g.small(62))),
            Ty::Dec => Value::Decimal(Decimal::new((g.next() as i64) >> (10 + g.small(50)), g.small(20) as i32 - 10)),
            _ => Value::Decimal(Decimal::new((g.next() as i64) >> (10 + g.small(50)), g.small(3) as i32 - 3)),
        })
    };
    let v = match &value {
        Prev::V(v) => *v,
        Prev::S(s) => {
            let start = msg.bytes.len() as u32;
            msg.bytes.extend_from_slice(s);
            Value::Bytes { start, len: s.len() as u32 }
        }
    };
    msg.entries.push(Entry { field, value: v });
    prev.insert(field, value);
}

/// Text form of a message's values, for comparison (strings by content).
fn render(p: &Program, m: &Message) -> Vec<String> {
    m.entries
        .iter()
        .map(|e| match e.value {
            Value::Bytes { .. } | Value::Static { .. } => format!("{}={:?}", e.field, m.bytes_of(p, &e.value).unwrap()),
            Value::Sequence { len, end } => format!("{}=seq{len}/{end}", e.field),
            v => format!("{}={v:?}", e.field),
        })
        .collect()
}

/// A random stream of six messages of the template `nodes` describes: the template XML, its
/// program, the stream, each message's byte range, and each message as rendered.
#[allow(clippy::type_complexity)]
fn random_stream(
    nodes: &[Node],
    seed: u64,
) -> Result<(String, Program, Vec<u8>, Vec<(usize, usize)>, Vec<Vec<String>>), TestCaseError> {
    let xml = template_xml(nodes);
    let p = match Program::from_xml(&xml) {
        Ok(p) => p,
        Err(e) => return Err(TestCaseError::fail(format!("{e}\n{xml}"))),
    };
    let mut g = Gen(seed);
    let mut enc = Encoder::new(&p);
    let mut stream = Vec::new();
    let mut frames = Vec::new();
    let mut sent = Vec::new();
    let mut prev = std::collections::HashMap::new();
    for _ in 0..6 {
        let mut msg = Message::new();
        msg.template = 0;
        // Walk the template's fields in order: fields map to program field indices in
        // compile order.
        let mut field = 0u32;
        for n in nodes {
            match n {
                Node::Field(f) => {
                    fill(&p, f, field, &mut g, &mut msg, &mut prev);
                    field += 1;
                }
                Node::Seq { optional, body } => {
                    let seq_field = field;
                    field += 2; // the sequence and its length
                    if *optional && g.small(4) == 0 {
                        field += body.len() as u32;
                        continue;
                    }
                    let len = g.small(3) as u32;
                    let si = msg.entries.len();
                    msg.entries.push(Entry { field: seq_field, value: Value::Sequence { len, end: 0 } });
                    for _ in 0..len {
                        let ei = msg.entries.len();
                        msg.entries.push(Entry { field: seq_field, value: Value::Element { end: 0 } });
                        for (j, f) in body.iter().enumerate() {
                            fill(&p, f, field + j as u32, &mut g, &mut msg, &mut prev);
                        }
                        let end = msg.entries.len() as u32;
                        msg.entries[ei].value = Value::Element { end };
                    }
                    let end = msg.entries.len() as u32;
                    msg.entries[si].value = Value::Sequence { len, end };
                    field += body.len() as u32;
                }
                Node::Group { optional, body } => {
                    let gf = field;
                    field += 1;
                    if *optional && g.small(3) == 0 {
                        field += body.len() as u32;
                        continue;
                    }
                    let gi = msg.entries.len();
                    msg.entries.push(Entry { field: gf, value: Value::Group { end: 0 } });
                    for (j, f) in body.iter().enumerate() {
                        fill(&p, f, field + j as u32, &mut g, &mut msg, &mut prev);
                    }
                    let end = msg.entries.len() as u32;
                    msg.entries[gi].value = Value::Group { end };
                    field += body.len() as u32;
                }
            }
        }
        let start = stream.len();
        match enc.encode(&msg, &mut stream) {
            Ok(()) => {}
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "encode: {e} ({:?})\n{xml}\n{:?}",
                    p.fields.get(e.field as usize),
                    msg.entries
                )))
            }
        }
        frames.push((start, stream.len()));
        sent.push(render(&p, &msg));
    }
    Ok((xml, p, stream, frames, sent))
}

/// `p` with segments specialised for every presence map a profile of `stream` saw.
fn specialised(p: &Program, stream: &[u8], frames: &[(usize, usize)]) -> Program {
    let mut sp = p.clone();
    let profile = {
        let mut d = Decoder::new(&sp);
        d.start_profile();
        let mut m = Message::new();
        for &(a, b) in frames {
            d.decode(&stream[a..b], &mut m).unwrap();
        }
        d.take_profile()
    };
    sp.specialise(&profile, 8, 64, 0.0);
    sp
}

/// A byte written over a stream's: any, or one of the bytes that reach the readers' edges
/// (NULL, a lost stop bit, the most negative one-byte value, the largest ones).
fn damaged_byte() -> impl Strategy<Value = u8> {
    prop_oneof![any::<u8>(), prop::sample::select(vec![0x00u8, 0x80, 0xc0, 0xbf, 0x7f, 0xff, 0x01, 0x81])]
}

/// A decoder's answer to one message, comparable across programs: the message as rendered
/// and the bytes it took, or the error as reported.
fn outcome(
    p: &Program,
    dec: &mut Decoder<'_>,
    bytes: &[u8],
    msg: &mut Message,
) -> Result<(Vec<String>, usize), String> {
    match dec.decode(bytes, msg) {
        Ok(n) => Ok((render(p, msg), n)),
        Err(e) => Err(format!("{e} [{:?} at {} field {}]", e.kind, e.offset, e.field)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random templates, random values: encode, then decode gives the values back; the
    /// encoding decodes the same with specialised segments; decode then encode as received
    /// gives back the bytes.
    #[test]
    fn random_templates_round_trip(nodes in prop::collection::vec(node_strategy(), 1..8), seed in 1u64..u64::MAX) {
        let (xml, p, stream, frames, sent) = random_stream(&nodes, seed)?;
        // Decode with one decoder.
        let mut dec = Decoder::new(&p);
        let mut got = Message::new();
        let mut received = Vec::new();
        for (k, &(a, b)) in frames.iter().enumerate() {
            let used = dec.decode(&stream[a..b], &mut got).map_err(|e| TestCaseError::fail(format!("decode {k}: {e}\n{xml}")))?;
            prop_assert_eq!(used, b - a);
            prop_assert_eq!(render(&p, &got), sent[k].clone(), "message {}\n{}", k, xml);
            received.push(got.clone());
        }
        // As received: identical bytes.
        let mut enc2 = Encoder::new(&p);
        let mut again = Vec::new();
        for m in &received {
            enc2.encode_as_received(m, &mut again).unwrap();
        }
        prop_assert_eq!(&again, &stream);
        // Specialised segments from a profile of this stream decode the same.
        let sp = specialised(&p, &stream, &frames);
        let mut dec = Decoder::new(&sp);
        for (k, &(a, b)) in frames.iter().enumerate() {
            dec.decode(&stream[a..b], &mut got).map_err(|e| TestCaseError::fail(format!("specialised decode {k}: {e}\n{xml}\n{}", sp.listing())))?;
            prop_assert_eq!(render(&sp, &got), sent[k].clone(), "specialised message {}\n{}\n{}", k, xml, sp.listing());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Specialised segments run by their kernels give what the engine gives on the same
    /// segments, byte for byte, on damaged streams too: the same messages, the same errors
    /// at the same offsets, the same dictionary state after each (every kernel operation that
    /// cannot finish hands over to the engine before it has changed anything).
    #[test]
    fn kernels_decode_as_the_engine(
        nodes in prop::collection::vec(node_strategy(), 1..8),
        seed in 1u64..u64::MAX,
        damage in prop::collection::vec((any::<prop::sample::Index>(), damaged_byte()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let (xml, p, stream, frames, _) = random_stream(&nodes, seed)?;
        let kernels = specialised(&p, &stream, &frames);
        let mut engine = kernels.clone();
        for s in &mut engine.specials {
            s.kernel = 0;
        }
        let mut bad = stream.clone();
        if !bad.is_empty() {
            for (at, x) in &damage {
                let i = at.index(bad.len());
                bad[i] = *x;
            }
            if !damage.is_empty() {
                bad.truncate(cut.index(bad.len() + 1));
            }
        }
        let (mut dk, mut de) = (Decoder::new(&kernels), Decoder::new(&engine));
        let (mut mk, mut me) = (Message::new(), Message::new());
        for (k, &(a, b)) in frames.iter().enumerate() {
            let (a, b) = (a.min(bad.len()), b.min(bad.len()));
            let ok = outcome(&kernels, &mut dk, &bad[a..b], &mut mk);
            let oe = outcome(&engine, &mut de, &bad[a..b], &mut me);
            prop_assert_eq!(ok, oe, "message {}, bytes {:02x?}\n{}\n{}", k, &bad[a..b], xml, kernels.listing());
        }
    }
}

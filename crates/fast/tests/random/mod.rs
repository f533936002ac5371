//! Random templates and random values for them: the generators the property tests of
//! tickplant-fast and tickplant-fast-jit share (each includes this file as a module).
#![allow(dead_code)]

use proptest::prelude::*;
use tickplant_fast::{Decimal, Decoder, Encoder, Entry, Message, Program, Value};

// ---------------------------------------------------------------------------------------
// Random templates and values
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
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
pub enum Op {
    None,
    Constant,
    Default,
    Copy,
    Increment,
    Delta,
    Tail,
}

#[derive(Debug, Clone)]
pub struct F {
    pub ty: Ty,
    pub op: Op,
    pub optional: bool,
    pub init: bool,
}

#[derive(Debug, Clone)]
pub enum Node {
    Field(F),
    Seq { optional: bool, body: Vec<F> },
    Group { optional: bool, body: Vec<F> },
}

pub fn field_strategy() -> impl Strategy<Value = F> {
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

/// Templates built around a sequence: a few nodes, a sequence of two to six fields, a few
/// nodes more.
pub fn seq_nodes_strategy() -> impl Strategy<Value = Vec<Node>> {
    (
        prop::collection::vec(node_strategy(), 0..3),
        any::<bool>(),
        prop::collection::vec(field_strategy(), 2..7),
        prop::collection::vec(node_strategy(), 0..3),
    )
        .prop_map(|(mut before, optional, body, after)| {
            before.push(Node::Seq { optional, body });
            before.extend(after);
            before
        })
}

/// Templates that open with fields and then a mandatory sequence of two to six fields (the
/// shape of most exchanges' market data: a header, then entries), a few nodes after it.
pub fn header_seq_nodes_strategy() -> impl Strategy<Value = Vec<Node>> {
    (
        prop::collection::vec(field_strategy(), 1..5),
        prop::collection::vec(field_strategy(), 2..7),
        prop::collection::vec(node_strategy(), 0..2),
    )
        .prop_map(|(before, body, after)| {
            let mut nodes: Vec<Node> = before.into_iter().map(Node::Field).collect();
            nodes.push(Node::Seq { optional: false, body });
            nodes.extend(after);
            nodes
        })
}

pub fn node_strategy() -> impl Strategy<Value = Node> {
    prop_oneof![
        6 => field_strategy().prop_map(Node::Field),
        1 => (any::<bool>(), prop::collection::vec(field_strategy(), 1..5)).prop_map(|(optional, body)| Node::Seq { optional, body }),
        1 => (any::<bool>(), prop::collection::vec(field_strategy(), 1..5)).prop_map(|(optional, body)| Node::Group { optional, body }),
    ]
}

pub fn init_text(ty: Ty) -> &'static str {
    match ty {
        Ty::U32 | Ty::U64 => "7",
        Ty::I32 | Ty::I64 => "-3",
        Ty::Dec | Ty::DecSplit => "1.25",
        Ty::Ascii | Ty::Unicode => "AB",
        Ty::Bytes => "0a0b",
    }
}

pub fn op_xml(op: Op, init: Option<&str>) -> String {
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

pub fn field_xml(f: &F, name: &str) -> String {
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

pub fn template_xml(nodes: &[Node]) -> String {
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
pub struct Gen(pub u64);
impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn small(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Prev {
    V(Value),
    S(Vec<u8>),
}

/// Values for one field of one message; `prev` carries each field's last value so repeats
/// (copy, increment, default) and tails happen.
pub fn fill(
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
pub fn render(p: &Program, m: &Message) -> Vec<String> {
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
pub fn random_stream(
    nodes: &[Node],
    seed: u64,
) -> Result<(String, Program, Vec<u8>, Vec<(usize, usize)>, Vec<Vec<String>>), TestCaseError> {
    random_stream_of(nodes, seed, 6, 3)
}

/// [`random_stream`] with `messages` messages, each sequence with fewer than `max_len`
/// elements.
#[allow(clippy::type_complexity)]
pub fn random_stream_of(
    nodes: &[Node],
    seed: u64,
    messages: usize,
    max_len: u64,
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
    for _ in 0..messages {
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
                    let len = g.small(max_len) as u32;
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
pub fn specialised(p: &Program, stream: &[u8], frames: &[(usize, usize)]) -> Program {
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

/// Damage for a stream: a few bytes overwritten, then (when any was) the stream cut at a
/// random length.
pub fn damage_strategy() -> impl Strategy<Value = (Vec<(prop::sample::Index, u8)>, prop::sample::Index)> {
    (prop::collection::vec((any::<prop::sample::Index>(), damaged_byte()), 0..4), any::<prop::sample::Index>())
}

/// `stream` with `damage` done to it (see [`damage_strategy`]).
pub fn damaged(stream: &[u8], damage: &(Vec<(prop::sample::Index, u8)>, prop::sample::Index)) -> Vec<u8> {
    let (writes, cut) = damage;
    let mut bad = stream.to_vec();
    if !bad.is_empty() {
        for (at, x) in writes {
            let i = at.index(bad.len());
            bad[i] = *x;
        }
        if !writes.is_empty() {
            bad.truncate(cut.index(bad.len() + 1));
        }
    }
    bad
}

/// A byte written over a stream's: any, or one of the bytes that reach the readers' edges
/// (NULL, a lost stop bit, the most negative one-byte value, the largest ones).
pub fn damaged_byte() -> impl Strategy<Value = u8> {
    prop_oneof![any::<u8>(), prop::sample::select(vec![0x00u8, 0x80, 0xc0, 0xbf, 0x7f, 0xff, 0x01, 0x81])]
}

/// A decoder's answer to one message, comparable across programs: the message as rendered
/// and the bytes it took, or the error as reported.
pub fn outcome(
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

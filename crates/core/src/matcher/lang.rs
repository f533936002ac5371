//! The strategy language: `ID: predicate and predicate and ...`, one strategy per line,
//! `#` to the end of a line a comment.
//!
//! A predicate is `attr op value`, `attr op attr` or `attr in (v1, v2, ...)`, with `op` one
//! of `= != < <= > >=`. Values are strings in double quotes (`\"` and `\\` escape) or
//! numbers (an optional `-`, digits, and up to 9 decimal places), kept exactly as integers
//! in units of 1e-9: never floating point. An attribute's type (string or number) is set by
//! the first literal it is compared with; comparing it later with the other type, ordering
//! strings (`<` and friends), or comparing attributes of different types is an error with
//! the line, the column and the reason.

use std::collections::HashMap;
use std::fmt;

/// Numbers are integers in units of 1e-9 (nine decimal places, exact).
pub const SCALE: i128 = 1_000_000_000;

/// Attributes and strings are interned to small integers.
pub type AttrId = u32;
pub type SymId = u32;

/// A value: a number in 1e-9 units, or an interned string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Num(i128),
    Sym(SymId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
    /// `a op b` on two values of one type (strings compare by identity, `=`/`!=` only).
    #[inline]
    pub fn holds(self, a: Value, b: Value) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
}

/// What a predicate compares its attribute with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rhs {
    Value(Value),
    Attr(AttrId),
    In(Vec<Value>),
}

/// One predicate, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pred {
    pub attr: AttrId,
    pub op: Op,
    pub rhs: Rhs,
}

/// A strategy: a conjunction of predicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Strategy {
    pub id: u64,
    pub preds: Vec<Pred>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Num,
    Str,
}

impl Type {
    fn name(self) -> &'static str {
        match self {
            Type::Num => "a number",
            Type::Str => "a string",
        }
    }
}

/// A parse error: where (1-based line and column) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Attribute names, their types, and interned strings: shared by strategies and events.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    attrs: HashMap<String, AttrId>,
    names: Vec<String>,
    types: Vec<Option<Type>>,
    /// Attributes compared with each other (`a < b`): they share a type.
    links: Vec<Vec<AttrId>>,
    syms: HashMap<String, SymId>,
    sym_names: Vec<String>,
}

impl Schema {
    pub fn new() -> Self {
        Self::default()
    }
    /// The id of attribute `name`, created if new.
    pub fn attr(&mut self, name: &str) -> AttrId {
        if let Some(&a) = self.attrs.get(name) {
            return a;
        }
        let a = self.names.len() as AttrId;
        self.attrs.insert(name.to_string(), a);
        self.names.push(name.to_string());
        self.types.push(None);
        self.links.push(Vec::new());
        a
    }
    pub fn attr_id(&self, name: &str) -> Option<AttrId> {
        self.attrs.get(name).copied()
    }
    pub fn attr_name(&self, a: AttrId) -> &str {
        &self.names[a as usize]
    }
    pub fn attr_type(&self, a: AttrId) -> Option<Type> {
        self.types.get(a as usize).copied().flatten()
    }
    /// Attributes known so far (ids are `0..attrs()`).
    pub fn attrs(&self) -> usize {
        self.names.len()
    }
    /// The id of string `s`, interned if new.
    pub fn sym(&mut self, s: &str) -> SymId {
        if let Some(&v) = self.syms.get(s) {
            return v;
        }
        let v = self.sym_names.len() as SymId;
        self.syms.insert(s.to_string(), v);
        self.sym_names.push(s.to_string());
        v
    }
    /// The id of string `s` if some strategy named it (an event's unknown string equals none).
    pub fn sym_id(&self, s: &str) -> Option<SymId> {
        self.syms.get(s).copied()
    }
    pub fn sym_name(&self, v: SymId) -> &str {
        &self.sym_names[v as usize]
    }
    /// Fix the type of `a` and of every attribute compared with it (the first use decides);
    /// false when one of them already has the other type.
    fn set_type(&mut self, a: AttrId, t: Type) -> bool {
        let mut todo = vec![a];
        while let Some(x) = todo.pop() {
            match self.types[x as usize] {
                Some(have) if have != t => return false,
                Some(_) => {}
                None => {
                    self.types[x as usize] = Some(t);
                    todo.extend_from_slice(&self.links[x as usize]);
                }
            }
        }
        true
    }
    fn link(&mut self, a: AttrId, b: AttrId) {
        self.links[a as usize].push(b);
        self.links[b as usize].push(a);
    }

    /// A value as written in the language.
    pub fn show_value(&self, v: Value) -> String {
        match v {
            Value::Num(n) => format_num(n),
            Value::Sym(s) => format!("{:?}", self.sym_name(s)),
        }
    }
    /// A predicate as written in the language.
    pub fn show_pred(&self, p: &Pred) -> String {
        let a = self.attr_name(p.attr);
        match &p.rhs {
            Rhs::Value(v) => format!("{a} {} {}", p.op.as_str(), self.show_value(*v)),
            Rhs::Attr(b) => format!("{a} {} {}", p.op.as_str(), self.attr_name(*b)),
            Rhs::In(vs) => {
                let list: Vec<String> = vs.iter().map(|v| self.show_value(*v)).collect();
                format!("{a} in ({})", list.join(", "))
            }
        }
    }

    /// Parse one strategy (`ID: pred and ...`); `line` is for error positions.
    pub fn parse_strategy(&mut self, text: &str, line: usize) -> Result<Strategy, ParseError> {
        let mut p = Parser { s: text.as_bytes(), i: 0, line };
        let id = p.number_id()?;
        p.ws();
        p.expect(b':', "':' after the strategy id")?;
        let mut preds = Vec::new();
        loop {
            preds.push(p.pred(self)?);
            p.ws();
            if p.at_end() {
                break;
            }
            let at = p.i;
            let w = p.ident();
            if !w.eq_ignore_ascii_case("and") {
                p.i = at;
                return Err(p.err("expected 'and' or the end of the strategy"));
            }
        }
        Ok(Strategy { id, preds })
    }

    /// Parse a strategies file: one per line, `#` comments, blank lines skipped. Ids must be
    /// unique.
    pub fn parse_strategies(&mut self, text: &str) -> Result<Vec<Strategy>, ParseError> {
        let mut out = Vec::new();
        let mut seen = HashMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = strip_comment(raw);
            if line.trim().is_empty() {
                continue;
            }
            let s = self.parse_strategy(line, n + 1)?;
            if let Some(first) = seen.insert(s.id, n + 1) {
                return Err(ParseError {
                    line: n + 1,
                    column: 1 + raw.len() - raw.trim_start().len(),
                    reason: format!("strategy id {} is already used on line {first}", s.id),
                });
            }
            out.push(s);
        }
        Ok(out)
    }
}

/// The line without its `#` comment (a `#` inside a string is not a comment).
fn strip_comment(line: &str) -> &str {
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in line.char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else if c == '"' {
            in_str = true;
        } else if c == '#' {
            return &line[..i];
        }
    }
    line
}

/// A number in 1e-9 units as the shortest plain decimal (`-5025`, `40.04`).
pub fn format_num(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let a = n.unsigned_abs();
    let (int, frac) = (a / SCALE as u128, a % SCALE as u128);
    if frac == 0 {
        format!("{sign}{int}")
    } else {
        let f = format!("{frac:09}");
        format!("{sign}{int}.{}", f.trim_end_matches('0'))
    }
}

/// Parse a plain decimal (`-12`, `40.04`, up to 9 decimal places) into 1e-9 units.
/// A decimal that [`parse_num`] cannot read: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadNumber {
    pub text: String,
    pub why: &'static str,
}

impl std::fmt::Display for BadNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}", self.text, self.why)
    }
}

impl std::error::Error for BadNumber {}

pub fn parse_num(s: &str) -> Result<i128, BadNumber> {
    let bad = |why: &'static str| BadNumber { text: s.to_string(), why };
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, f),
        None => (body, ""),
    };
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a number"));
    }
    if body.contains('.') && frac.is_empty() {
        return Err(bad("has no digits after the decimal point"));
    }
    if frac.len() > 9 {
        return Err(bad("has more than 9 decimal places"));
    }
    if int.len() > 27 {
        return Err(bad("is too large"));
    }
    let mut v: i128 = int.parse::<i128>().map_err(|_| bad("is too large"))? * SCALE;
    if !frac.is_empty() {
        let f: i128 = frac.parse().map_err(|_| bad("is not a number"))?;
        v += f * 10i128.pow(9 - frac.len() as u32);
    }
    Ok(if neg { -v } else { v })
}

/// A JSON number (`1e3`, `1.5E2`, `1e-05`, as JSON writers and Python's `str(float)` give
/// them, or a plain decimal) into 1e-9 units, exactly: the exponent moves the decimal point,
/// then the plain decimal's rules apply (so `1e-10` has more than 9 decimal places, as
/// `0.0000000001` has). Errors name the text as given.
pub fn parse_json_num(s: &str) -> Result<i128, BadNumber> {
    let Some(e) = s.find(['e', 'E']) else { return parse_num(s) };
    let bad = |why: &'static str| BadNumber { text: s.to_string(), why };
    let (mantissa, exp) = (&s[..e], &s[e + 1..]);
    let exp_digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
    if exp_digits.is_empty() || !exp_digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a number"));
    }
    let (neg, body) = match mantissa.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, mantissa),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    // The mantissa's digits; its places are counted after the shift (`1.0000000000e2`).
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("is not a number"));
    }
    if body.contains('.') && frac.is_empty() {
        return Err(bad("has no digits after the decimal point"));
    }
    let digits = format!("{int}{frac}");
    if digits.bytes().all(|b| b == b'0') {
        return Ok(0);
    }
    // Beyond 60 places either way the value cannot fit (27 integer digits at most) or
    // keeps a digit past the 9th decimal place.
    let shift: i64 = match exp_digits.parse::<i64>() {
        Ok(n) if n <= 60 => {
            if exp.starts_with('-') {
                -n
            } else {
                n
            }
        }
        _ if exp.starts_with('-') => return Err(bad("has more than 9 decimal places")),
        _ => return Err(bad("is too large")),
    };
    let point = int.len() as i64 + shift;
    let plain = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
    };
    // Zeros after the last digit that counts are not decimal places the value needs.
    let plain = if plain.contains('.') { plain.trim_end_matches('0').trim_end_matches('.') } else { &plain };
    let v = parse_num(plain).map_err(|p| bad(p.why))?;
    Ok(if neg { -v } else { v })
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> ParseError {
        self.err_at(self.i, reason)
    }
    fn err_at(&self, at: usize, reason: impl Into<String>) -> ParseError {
        let column = std::str::from_utf8(&self.s[..at.min(self.s.len())]).map_or(at, |p| p.chars().count()) + 1;
        ParseError { line: self.line, column, reason: reason.into() }
    }
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn expect(&mut self, c: u8, what: &str) -> Result<(), ParseError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.err(format!("expected {what}")))
        }
    }
    fn ident(&mut self) -> &str {
        let start = self.i;
        if matches!(self.peek(), Some(c) if c.is_ascii_alphabetic() || c == b'_') {
            while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'.') {
                self.i += 1;
            }
        }
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or("")
    }
    fn number_id(&mut self) -> Result<u64, ParseError> {
        self.ws();
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.err("expected a strategy id (a whole number) at the start of the line"));
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| self.err_at(start, "the strategy id does not fit in 64 bits"))
    }
    fn op(&mut self) -> Option<Op> {
        let two = self.s.get(self.i..self.i + 2);
        let (op, n) = match two {
            Some(b"!=") => (Op::Ne, 2),
            Some(b"<=") => (Op::Le, 2),
            Some(b">=") => (Op::Ge, 2),
            Some(b"==") => (Op::Eq, 2),
            _ => match self.peek()? {
                b'=' => (Op::Eq, 1),
                b'<' => (Op::Lt, 1),
                b'>' => (Op::Gt, 1),
                _ => return None,
            },
        };
        self.i += n;
        Some(op)
    }
    /// A literal value: its type and value; strings are interned.
    fn literal(&mut self, schema: &mut Schema) -> Result<Option<(Type, Value)>, ParseError> {
        self.ws();
        match self.peek() {
            Some(b'"') => {
                let start = self.i;
                self.i += 1;
                let mut out = Vec::new();
                loop {
                    match self.peek() {
                        None => return Err(self.err_at(start, "unterminated string")),
                        Some(b'"') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'\\') => {
                            match self.s.get(self.i + 1) {
                                Some(&c @ (b'"' | b'\\')) => out.push(c),
                                _ => return Err(self.err("unknown escape in string (only \\\" and \\\\)")),
                            }
                            self.i += 2;
                        }
                        Some(c) => {
                            out.push(c);
                            self.i += 1;
                        }
                    }
                }
                let s = String::from_utf8(out).map_err(|_| self.err_at(start, "string is not UTF-8"))?;
                Ok(Some((Type::Str, Value::Sym(schema.sym(&s)))))
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                self.i += 1;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'.' || c == b'_') {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                let n = parse_num(text).map_err(|e| self.err_at(start, e.to_string()))?;
                Ok(Some((Type::Num, Value::Num(n))))
            }
            _ => Ok(None),
        }
    }
    fn typed(&self, schema: &mut Schema, attr: AttrId, t: Type, at: usize) -> Result<(), ParseError> {
        if schema.set_type(attr, t) {
            Ok(())
        } else {
            let have = schema.attr_type(attr).map_or("untyped", Type::name);
            Err(self.err_at(at, format!("{} is {have}, compared here with {}", schema.attr_name(attr), t.name())))
        }
    }
    fn pred(&mut self, schema: &mut Schema) -> Result<Pred, ParseError> {
        self.ws();
        let at = self.i;
        let name = self.ident().to_string();
        if name.is_empty() {
            return Err(self.err("expected an attribute name"));
        }
        if name.eq_ignore_ascii_case("and") || name.eq_ignore_ascii_case("in") {
            return Err(self.err_at(at, format!("expected an attribute name, found the keyword '{name}'")));
        }
        let attr = schema.attr(&name);
        self.ws();
        let op_at = self.i;
        // `in (list)`
        let save = self.i;
        if self.ident().eq_ignore_ascii_case("in") {
            self.ws();
            self.expect(b'(', "'(' after 'in'")?;
            let mut vals = Vec::new();
            loop {
                let v_at = {
                    self.ws();
                    self.i
                };
                let Some((t, v)) = self.literal(schema)? else {
                    return Err(self.err("expected a value in the list"));
                };
                self.typed(schema, attr, t, v_at)?;
                vals.push(v);
                self.ws();
                match self.peek() {
                    Some(b',') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return Err(self.err("expected ',' or ')' in the list")),
                }
            }
            vals.sort_unstable();
            vals.dedup();
            return Ok(Pred { attr, op: Op::Eq, rhs: Rhs::In(vals) });
        }
        self.i = save;
        let Some(op) = self.op() else {
            return Err(self.err_at(op_at, "expected an operator (= != < <= > >=) or 'in'"));
        };
        self.ws();
        let rhs_at = self.i;
        let ordering = !matches!(op, Op::Eq | Op::Ne);
        if let Some((t, v)) = self.literal(schema)? {
            if ordering && t == Type::Str {
                return Err(
                    self.err_at(rhs_at, format!("strings are compared with = and != only, not {}", op.as_str()))
                );
            }
            self.typed(schema, attr, t, rhs_at)?;
            return Ok(Pred { attr, op, rhs: Rhs::Value(v) });
        }
        let other = self.ident().to_string();
        if other.is_empty() {
            return Err(self.err_at(rhs_at, "expected a value or an attribute after the operator"));
        }
        let b = schema.attr(&other);
        match (schema.attr_type(attr), schema.attr_type(b)) {
            (Some(x), Some(y)) if x != y => {
                return Err(self.err_at(rhs_at, format!("{name} is {} but {other} is {}", x.name(), y.name())));
            }
            (Some(t), None) | (None, Some(t)) => {
                schema.set_type(attr, t);
                schema.set_type(b, t);
            }
            _ => {}
        }
        schema.link(attr, b);
        if ordering && schema.attr_type(attr) == Some(Type::Str) {
            return Err(self.err_at(op_at, format!("strings are compared with = and != only, not {}", op.as_str())));
        }
        Ok(Pred { attr, op, rhs: Rhs::Attr(b) })
    }
}

/// A market event for matching: a value per attribute (by `AttrId`), missing ones `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchEvent {
    pub values: Vec<Option<Value>>,
}

impl MatchEvent {
    pub fn new(attrs: usize) -> Self {
        MatchEvent { values: vec![None; attrs] }
    }
    #[inline]
    pub fn get(&self, a: AttrId) -> Option<Value> {
        self.values.get(a as usize).copied().flatten()
    }
    pub fn set(&mut self, a: AttrId, v: Value) {
        let i = a as usize;
        if self.values.len() <= i {
            self.values.resize(i + 1, None);
        }
        self.values[i] = Some(v);
    }
    pub fn clear(&mut self) {
        self.values.iter_mut().for_each(|v| *v = None);
    }
}

impl Pred {
    /// Does the predicate hold on `e`? A predicate on a missing attribute is false.
    #[inline]
    pub fn holds(&self, e: &MatchEvent) -> bool {
        let Some(a) = e.get(self.attr) else { return false };
        match &self.rhs {
            Rhs::Value(v) => self.op.holds(a, *v),
            Rhs::Attr(b) => e.get(*b).is_some_and(|b| self.op.holds(a, b)),
            Rhs::In(vs) => vs.binary_search(&a).is_ok(),
        }
    }
}

impl Strategy {
    /// Brute force: every predicate holds.
    pub fn matches(&self, e: &MatchEvent) -> bool {
        self.preds.iter().all(|p| p.holds(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> ParseError {
        Schema::new().parse_strategies(text).unwrap_err()
    }

    #[test]
    fn test_parse() {
        let mut s = Schema::new();
        let v = s
            .parse_strategies(
                "# cross-venue\n7: symbol = \"ABX\" and tsx_ask < nyse_bid and tsx_ask <= 40.04\n\n8: symbol in (\"AAPL\", \"MSFT\") and spread < 0.01 and last > 190 # trailing\n",
            )
            .unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].id, 7);
        assert_eq!(v[0].preds.len(), 3);
        assert_eq!(s.show_pred(&v[0].preds[2]), "tsx_ask <= 40.04");
        assert_eq!(s.show_pred(&v[1].preds[0]), "symbol in (\"AAPL\", \"MSFT\")");
        assert_eq!(v[1].preds[1].rhs, Rhs::Value(Value::Num(10_000_000)));
        assert_eq!(s.attr_type(s.attr_id("symbol").unwrap()), Some(Type::Str));
        assert_eq!(s.attr_type(s.attr_id("nyse_bid").unwrap()), Some(Type::Num));
    }

    #[test]
    fn numbers_are_exact() {
        assert_eq!(parse_num("40.04").unwrap(), 40_040_000_000);
        assert_eq!(parse_num("-5025").unwrap(), -5_025_000_000_000);
        assert_eq!(parse_num("0.000000001").unwrap(), 1);
        assert_eq!(format_num(40_040_000_000), "40.04");
        assert_eq!(format_num(-1), "-0.000000001");
        assert!(parse_num("1.0000000001").unwrap_err().to_string().contains("9 decimal places"));
        assert!(parse_num("1.").unwrap_err().to_string().contains("no digits"));
        assert!(parse_num("1e5").unwrap_err().to_string().contains("not a number"));
    }

    #[test]
    fn json_numbers_in_every_notation_are_exact() {
        let ok: &[(&str, i128)] = &[
            ("150", 150 * SCALE),
            ("1e3", 1_000 * SCALE),
            ("1.5E2", 150 * SCALE),
            ("1.5e+2", 150 * SCALE),
            ("1e-05", 10_000),
            ("-2.5e-1", -250_000_000),
            ("1e+16", 10i128.pow(16) * SCALE),
            ("123.456e-3", 123_456_000),
            ("0.000000001e9", SCALE),
            ("1.0000000000e2", 100 * SCALE),
            ("0e-400", 0),
            ("-0.0E+99", 0),
            ("9.99999999999999999999999999e26", 999_999_999_999_999_999_999_999_999 * SCALE),
        ];
        for &(text, want) in ok {
            assert_eq!(parse_json_num(text), Ok(want), "{text}");
            // The plain decimal it stands for gives the same.
            if !text.contains(['e', 'E']) {
                assert_eq!(parse_num(text), Ok(want));
            }
        }
        let bad: &[(&str, &str)] = &[
            ("1e-10", "more than 9 decimal places"),
            ("1.5e-9", "more than 9 decimal places"),
            ("1e400", "too large"),
            ("1e-400", "more than 9 decimal places"),
            ("1e27", "too large"),
            ("e5", "not a number"),
            ("1e", "not a number"),
            ("1e+", "not a number"),
            ("1e2.5", "not a number"),
            ("1.e5", "no digits after the decimal point"),
            ("1e99999999999999999999", "too large"),
        ];
        for &(text, why) in bad {
            let e = parse_json_num(text).unwrap_err();
            assert_eq!((e.text.as_str(), e.why.contains(why)), (text, true), "{text}: {}", e.why);
        }
    }

    #[test]
    fn errors_say_where_and_why() {
        let cases: &[(&str, usize, usize, &str)] = &[
            ("x = 1", 1, 1, "strategy id"),
            ("1 x = 1", 1, 3, "':'"),
            ("1: = 1", 1, 4, "attribute name"),
            ("1: and = 1", 1, 4, "keyword 'and'"),
            ("1: x 1", 1, 6, "operator"),
            ("1: x = ", 1, 8, "value or an attribute"),
            ("1: x = 1 or y = 2", 1, 10, "'and'"),
            ("1: x = \"abc", 1, 8, "unterminated"),
            ("1: x = \"a\\n\"", 1, 10, "escape"),
            ("1: x < \"a\"", 1, 8, "= and != only"),
            ("1: x = 1 and x = \"a\"", 1, 18, "x is a number, compared here with a string"),
            ("1: x = 1 and y = \"a\" and x = y", 1, 30, "x is a number but y is a string"),
            ("1: x in (1, \"a\")", 1, 13, "compared here with a string"),
            ("1: x in 1", 1, 9, "'('"),
            ("1: x in (1 2)", 1, 12, "',' or ')'"),
            ("1: x in ()", 1, 10, "value in the list"),
            ("1: x = 1.2345678901", 1, 8, "9 decimal places"),
            ("1: x = 99999999999999999999999999999", 1, 8, "too large"),
            ("99999999999999999999: x = 1", 1, 1, "64 bits"),
            ("1: x = 1\n\n1: y = 2", 3, 1, "already used on line 1"),
            ("1: x = 1.", 1, 8, "no digits after the decimal point"),
            ("1: a = \"s\" and b = \"t\" and a < b", 1, 30, "= and != only, not <"),
        ];
        for &(text, line, column, reason) in cases {
            let e = err(text);
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.reason.contains(reason), "{text:?}: {e}");
        }
    }

    #[test]
    fn predicates_hold() {
        let mut s = Schema::new();
        let st = s.parse_strategy("1: sym = \"A\" and bid < ask and px in (1, 2.5) and q != 3", 1).unwrap();
        let mut e = MatchEvent::new(s.attrs());
        let (sym, bid, ask, px, q) = (0, 1, 2, 3, 4);
        e.set(sym, Value::Sym(s.sym_id("A").unwrap()));
        e.set(bid, Value::Num(10));
        e.set(ask, Value::Num(11));
        e.set(px, Value::Num(2_500_000_000));
        e.set(q, Value::Num(0));
        assert!(st.matches(&e));
        e.set(q, Value::Num(3 * SCALE));
        assert!(!st.matches(&e));
        e.values[q as usize] = None;
        assert!(!st.matches(&e), "a predicate on a missing attribute is false");
    }
}

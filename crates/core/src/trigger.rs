//! Triggers: rules on market-data entries that fire orders, in the strategy language of
//! [`crate::matcher`] with an action after `=>`:
//!
//! ```text
//! # buy 100 whenever a price is a whole dollar (the reference harness)
//! 1: price_frac = 0 => buy 100
//! 2: symbol = "AAPL" and entry_type = "2" and price < 190 and size >= 500 => sell 200
//! ```
//!
//! Attributes of an entry: `symbol` (55), `entry_type` (269: `"0"` bid, `"1"` offer, `"2"`
//! trade), `price` (270, exact decimal), `size` (271) and `price_frac` (the price's part
//! after the point: `price_frac = 0` for `123.000`). Normalized market events (the ITCH
//! pipeline, [`Entry::of_event`]) give `symbol`, `price`, `size`, `price_frac`, and also
//! `action` (`"add"`, `"execute"`, `"trade"`, ... as in [`crate::event::EventAction`]) and
//! `side` (`"bid"`, `"ask"`). An attribute the entry lacks makes its predicates false. The index is the strategy matcher, so thousands of triggers cost little
//! more than one, and triggers are inserted and removed while running
//! ([`Triggers::apply`] replaces the set with another, changing only what differs).

use std::collections::HashMap;

use crate::matcher::lang::SCALE;
use crate::matcher::{AttrId, MatchEvent, Matcher, Type, Value, UNKNOWN_SYM};

/// What a trigger does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriggerAction {
    pub buy: bool,
    pub qty: u64,
}

/// A trigger file's lines: (id, text of the conditions, action).
pub type TriggerSet = Vec<(u64, String, TriggerAction)>;

/// What is wrong with a trigger file or a trigger: the line (in a file) or the trigger's
/// id, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerError {
    /// A line of the file does not read as a trigger.
    Line { line: usize, reason: String },
    /// A trigger's conditions do not parse, or do not fit the market data's attributes.
    Trigger { id: Option<u64>, reason: String },
}

impl std::fmt::Display for TriggerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TriggerError::Line { line, reason } => write!(f, "line {line}: {reason}"),
            TriggerError::Trigger { id: Some(id), reason } => write!(f, "trigger {id}: {reason}"),
            TriggerError::Trigger { id: None, reason } => f.write_str(reason),
        }
    }
}

impl std::error::Error for TriggerError {}

/// Parse a trigger file: `ID: conditions => buy|sell QTY` per line, `#` comments.
pub fn parse_triggers(text: &str) -> Result<TriggerSet, TriggerError> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let at = |what: &str| TriggerError::Line { line: n + 1, reason: what.to_string() };
        let (cond, action) = line.rsplit_once("=>").ok_or_else(|| at("expected `ID: conditions => buy|sell QTY`"))?;
        let (id, cond) = cond.split_once(':').ok_or_else(|| at("expected `ID:` first"))?;
        let id: u64 = id.trim().parse().map_err(|_| at(&format!("{:?} is not a whole-number id", id.trim())))?;
        let mut words = action.split_whitespace();
        let buy = match words.next() {
            Some("buy") => true,
            Some("sell") => false,
            other => return Err(at(&format!("the action is `buy QTY` or `sell QTY`, not {:?}", other.unwrap_or("")))),
        };
        let qty: u64 = words
            .next()
            .and_then(|q| q.parse().ok())
            .filter(|&q| q > 0)
            .ok_or_else(|| at("the action needs a quantity above 0"))?;
        if words.next().is_some() {
            return Err(at("nothing may follow the quantity"));
        }
        if out.iter().any(|(i, _, _)| *i == id) {
            return Err(at(&format!("trigger id {id} is used twice")));
        }
        out.push((id, cond.trim().to_string(), TriggerAction { buy, qty }));
    }
    Ok(out)
}

/// The triggers in force, indexed.
#[derive(Debug, Default)]
pub struct Triggers {
    matcher: Matcher,
    actions: HashMap<u64, (String, TriggerAction)>,
    /// The ids of the attributes of [`ATTRS`], in its order, resolved once per set.
    attrs: [Option<AttrId>; 7],
    event: MatchEvent,
    ids: Vec<u64>,
}

const ATTRS: [(&str, Type); 7] = [
    ("symbol", Type::Str),
    ("entry_type", Type::Str),
    ("price", Type::Num),
    ("size", Type::Num),
    ("price_frac", Type::Num),
    ("action", Type::Str),
    ("side", Type::Str),
];

/// An entry of a market-data message.
#[derive(Debug, Clone, Copy, Default)]
pub struct Entry<'a> {
    pub symbol: &'a [u8],
    pub entry_type: Option<&'a [u8]>,
    /// 1e-9 units.
    pub price: Option<i64>,
    pub size: Option<u64>,
    /// A normalized event's action name (`"add"`, `"execute"`, ...).
    pub action: Option<&'a [u8]>,
    /// A normalized event's side (`"bid"`, `"ask"`).
    pub side: Option<&'a [u8]>,
}

impl<'a> Entry<'a> {
    /// The price of a trade printed on the market, when the entry is one: a FIX entry of
    /// MDEntryType (269) `2`, or a normalized `trade` or `execute` event. Risk's price
    /// collar takes its reference from these.
    pub fn trade_price(&self) -> Option<i64> {
        let trade = self.entry_type == Some(b"2") || matches!(self.action, Some(b"trade" | b"execute"));
        if trade {
            self.price
        } else {
            None
        }
    }
    /// The entry of a normalized market event of `symbol`: its action and side always, its
    /// price when it has one (not 0), its size when it has one.
    pub fn of_event(e: &crate::event::Event, symbol: &'a [u8]) -> Entry<'a> {
        Entry {
            symbol,
            entry_type: None,
            price: (e.price != 0).then_some(e.price),
            size: (e.size != 0).then_some(u64::from(e.size)),
            action: Some(e.action.as_str().as_bytes()),
            side: (e.side != crate::event::Side::None).then_some(e.side.as_str().as_bytes()),
        }
    }
}

impl Triggers {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.actions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The triggers in force, by id.
    pub fn set(&self) -> TriggerSet {
        let mut v: TriggerSet = self.actions.iter().map(|(id, (c, a))| (*id, c.clone(), *a)).collect();
        v.sort_by_key(|x| x.0);
        v
    }

    /// Make `set` the triggers in force: removed and changed ones leave, new and changed
    /// ones enter, the rest stay as they are. On an error nothing changes.
    pub fn apply(&mut self, set: &TriggerSet) -> Result<(usize, usize), TriggerError> {
        // Parse everything first (with a scratch copy of the schema) so that an error leaves
        // the set in force untouched.
        let mut schema = self.matcher.schema().clone();
        let mut parsed = Vec::new();
        for (id, cond, action) in set {
            if self.actions.get(id).is_some_and(|(c, a)| c == cond && a == action) {
                continue;
            }
            let s = schema
                .parse_strategy(&format!("{id}: {cond}"), 1)
                .map_err(|e| TriggerError::Trigger { id: Some(*id), reason: e.reason })?;
            parsed.push((s, *action, cond.clone()));
        }
        for (name, want) in ATTRS {
            if let Some(a) = schema.attr_id(name) {
                if schema.attr_type(a).is_some_and(|t| t != want) {
                    let kind = if want == Type::Str { "string" } else { "number" };
                    let reason = format!("{name} is a {kind} attribute of market data");
                    return Err(TriggerError::Trigger { id: None, reason });
                }
            }
        }
        let keep: std::collections::HashSet<u64> = set.iter().map(|x| x.0).collect();
        let gone: Vec<u64> = self
            .actions
            .iter()
            .filter(|(id, (c, a))| {
                !keep.contains(id) || parsed.iter().any(|p| p.0.id == **id && (&p.2 != c || p.1 != *a))
            })
            .map(|(id, _)| *id)
            .collect();
        self.attrs = ATTRS.map(|(name, _)| schema.attr_id(name));
        *self.matcher.schema_mut() = schema;
        for id in &gone {
            self.matcher.remove(*id);
            self.actions.remove(id);
        }
        let added = parsed.len();
        for (s, action, cond) in parsed {
            let id = s.id;
            self.matcher.insert(s).map_err(|e| TriggerError::Trigger { id: Some(id), reason: e.to_string() })?;
            self.actions.insert(id, (cond, action));
        }
        Ok((added, gone.len()))
    }

    /// The triggers an entry fires, with their actions, into `out` (cleared first).
    pub fn fire(&mut self, e: &Entry<'_>, out: &mut Vec<(u64, TriggerAction)>) {
        out.clear();
        if self.actions.is_empty() {
            return;
        }
        let n = self.matcher.schema().attrs();
        self.event.values.clear();
        self.event.values.resize(n, None);
        let sym = |m: &Matcher, b: &[u8]| {
            Value::Sym(std::str::from_utf8(b).ok().and_then(|s| m.schema().sym_id(s)).unwrap_or(UNKNOWN_SYM))
        };
        let [symbol, entry_type, price, size, price_frac, action, side] = self.attrs;
        let values = [
            (symbol, Some(sym(&self.matcher, e.symbol))),
            (entry_type, e.entry_type.map(|t| sym(&self.matcher, t))),
            (price, e.price.map(|p| Value::Num(i128::from(p)))),
            (size, e.size.map(|s| Value::Num(i128::from(s) * SCALE))),
            (price_frac, e.price.map(|p| Value::Num(i128::from(p.rem_euclid(1_000_000_000))))),
            (action, e.action.map(|t| sym(&self.matcher, t))),
            (side, e.side.map(|t| sym(&self.matcher, t))),
        ];
        for (a, v) in values {
            if let (Some(a), Some(v)) = (a, v) {
                self.event.values[a as usize] = Some(v);
            }
        }
        self.matcher.match_event(&self.event, &mut self.ids);
        out.extend(self.ids.iter().filter_map(|id| self.actions.get(id).map(|(_, a)| (*id, *a))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(sym: &'a str, px: i64, t: &'a str, size: u64) -> Entry<'a> {
        Entry {
            symbol: sym.as_bytes(),
            entry_type: Some(t.as_bytes()),
            price: Some(px),
            size: Some(size),
            ..Entry::default()
        }
    }

    #[test]
    fn triggers_fire_on_normalized_events() {
        use crate::event::{Event, EventAction, Side};
        let mut t = Triggers::new();
        t.apply(
            &parse_triggers(
                "3: action = \"execute\" and side = \"ask\" and size >= 100 => buy 10\n4: action = \"add\" => sell 1\n",
            )
            .unwrap(),
        )
        .unwrap();
        let mut fired = Vec::new();
        let e = Event {
            action: EventAction::Execute,
            side: Side::Ask,
            price: 12_500_000_000,
            size: 300,
            ..Event::default()
        };
        t.fire(&Entry::of_event(&e, b"AAPL"), &mut fired);
        assert_eq!(fired, [(3, TriggerAction { buy: true, qty: 10 })]);
        let e = Event { action: EventAction::Execute, side: Side::Bid, size: 300, ..Event::default() };
        t.fire(&Entry::of_event(&e, b"AAPL"), &mut fired);
        assert!(fired.is_empty());
        let e = Event { action: EventAction::Add, side: Side::Bid, price: 1, size: 1, ..Event::default() };
        t.fire(&Entry::of_event(&e, b"MSFT"), &mut fired);
        assert_eq!(fired, [(4, TriggerAction { buy: false, qty: 1 })]);
        // A status event has no price or size: predicates on them are false.
        let e = Event { action: EventAction::Status, ..Event::default() };
        let mut t2 = Triggers::new();
        t2.apply(&parse_triggers("5: price > 0 => buy 1\n").unwrap()).unwrap();
        t2.fire(&Entry::of_event(&e, b"X"), &mut fired);
        assert!(fired.is_empty());
    }

    #[test]
    fn triggers_fire_and_change_while_running() {
        let mut t = Triggers::new();
        let set = parse_triggers(
            "# the harness\n1: price_frac = 0 => buy 100\n2: symbol = \"AAPL\" and entry_type = \"2\" and price < 190 and size >= 500 => sell 200\n",
        )
        .unwrap();
        assert_eq!(t.apply(&set).unwrap(), (2, 0));
        let mut out = Vec::new();
        t.fire(&entry("MSFT", 410_000_000_000, "0", 100), &mut out);
        assert_eq!(out, vec![(1, TriggerAction { buy: true, qty: 100 })]);
        t.fire(&entry("AAPL", 189_500_000_000, "2", 500), &mut out);
        assert_eq!(out, vec![(2, TriggerAction { buy: false, qty: 200 })]);
        t.fire(&entry("AAPL", 189_500_000_000, "1", 500), &mut out);
        assert!(out.is_empty());
        // Change one, drop one, add one: only those move.
        let set = parse_triggers("1: price_frac = 0 => buy 300\n3: size > 1000 => sell 1\n").unwrap();
        assert_eq!(t.apply(&set).unwrap(), (2, 2));
        t.fire(&entry("AAPL", 190_000_000_000, "2", 5000), &mut out);
        assert_eq!(out, vec![(1, TriggerAction { buy: true, qty: 300 }), (3, TriggerAction { buy: false, qty: 1 })]);
        assert_eq!(t.len(), 2);
        // A bad set changes nothing.
        let bad = parse_triggers("4: symbol < 3 => buy 1\n").unwrap();
        assert!(t.apply(&bad).is_err());
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn bad_lines_say_where() {
        for (text, want) in [
            ("1: price > 1", "line 1: expected `ID: conditions => buy|sell QTY`"),
            ("x: price > 1 => buy 1", "is not a whole-number id"),
            ("1: price > 1 => hold 1", "`buy QTY` or `sell QTY`"),
            ("1: price > 1 => buy 0", "quantity above 0"),
            ("1: price > 1 => buy 1\n\n1: size > 1 => sell 2", "line 3: trigger id 1 is used twice"),
        ] {
            let e = parse_triggers(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let mut t = Triggers::new();
        let e = t.apply(&parse_triggers("1: price = \"x\" => buy 1").unwrap()).unwrap_err().to_string();
        assert!(e.contains("price is a number attribute"), "{e}");
    }
}

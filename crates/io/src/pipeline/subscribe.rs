//! A consumer's subscription as sets (symbols, actions, message types), changed at run time
//! by the control socket's `subscribe` and `unsubscribe`, and the [`Filter`] the hot path
//! tests, built again from it after each change.

use std::collections::{BTreeSet, HashMap};

use tickplant_core::event::EventAction;
use tickplant_core::route::Filter;
use tickplant_wire::itch50;

use crate::control::SubscriptionChange;

/// Each set `None` for every one, `Some` for just those (empty: none).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Subscription {
    /// Symbols as the feed sends them (8 bytes, space padded).
    pub(super) symbols: Option<BTreeSet<[u8; 8]>>,
    /// Actions by their code.
    pub(super) actions: Option<BTreeSet<u8>>,
    pub(super) types: Option<BTreeSet<u8>>,
}

/// The market's actions: what `actions=*` and "every action but" range over (gap and
/// trusted records reach every consumer of the stream whatever it subscribes to).
fn market_actions() -> impl Iterator<Item = EventAction> {
    EventAction::ALL.into_iter().filter(|a| !matches!(a, EventAction::Gap | EventAction::Trusted))
}

fn action_of(code: u8) -> Option<EventAction> {
    EventAction::ALL.into_iter().find(|a| *a as u8 == code)
}

impl Subscription {
    /// A consumer's subscription from its configuration (empty lists: every one).
    pub(super) fn new(symbols: &[String], actions: &[EventAction], types: &[u8]) -> Self {
        Subscription {
            symbols: (!symbols.is_empty()).then(|| symbols.iter().map(|s| itch50::stock(s)).collect()),
            actions: (!actions.is_empty()).then(|| actions.iter().map(|a| *a as u8).collect()),
            types: (!types.is_empty()).then(|| types.iter().copied().collect()),
        }
    }

    /// The subscription with `change` applied, or what is wrong with it (nothing changed).
    /// `opra`: the feed's message types are OPRA categories.
    pub(super) fn changed(&self, change: &SubscriptionChange, opra: bool) -> Result<Subscription, String> {
        let mut next = self.clone();
        if let Some(list) = &change.symbols {
            let items = list
                .iter()
                .map(|s| match s.len() {
                    1..=8 if s.bytes().all(|b| b.is_ascii_graphic()) => Ok(itch50::stock(s)),
                    _ => Err(format!("{s:?} is not a symbol (1 to 8 printable characters)")),
                })
                .collect::<Result<Vec<_>, _>>();
            next.symbols = apply(&self.symbols, list, items, change.add, "symbol", || {
                Err("it takes every symbol: `unsubscribe FEED CONSUMER symbols=*`, then subscribe the ones wanted"
                    .to_string())
            })?;
        }
        if let Some(list) = &change.actions {
            let items = list
                .iter()
                .map(|a| match a.parse::<EventAction>() {
                    Ok(x) if market_actions().any(|m| m == x) => Ok(x as u8),
                    Ok(_) => Err(format!("{a:?} records reach every consumer; it is not subscribed to")),
                    Err(e) => Err(e.to_string()),
                })
                .collect::<Result<Vec<_>, _>>();
            next.actions = apply(&self.actions, list, items, change.add, "action", || {
                Ok(market_actions().map(|a| a as u8).collect())
            })?;
        }
        if let Some(list) = &change.types {
            let items = list.iter().map(|t| crate::config::parse_msg_type(t, opra)).collect::<Result<Vec<_>, _>>();
            let every = || {
                Ok((0..=255u8)
                    .filter(|t| crate::config::parse_msg_type(&char::from(*t).to_string(), opra).is_ok())
                    .collect())
            };
            next.types = apply(&self.types, list, items, change.add, "type", every)?;
        }
        Ok(next)
    }

    /// The filter for the instruments named so far (`named`: symbol to instrument ids).
    pub(super) fn filter(&self, named: &HashMap<[u8; 8], Vec<u32>>) -> Filter {
        let ids: Option<Vec<u32>> =
            self.symbols.as_ref().map(|s| s.iter().filter_map(|k| named.get(k)).flatten().copied().collect());
        let actions: Option<Vec<EventAction>> =
            self.actions.as_ref().map(|a| a.iter().filter_map(|c| action_of(*c)).collect());
        let types: Option<Vec<u8>> = self.types.as_ref().map(|t| t.iter().copied().collect());
        Filter::select(ids.as_deref(), actions.as_deref(), types.as_deref())
    }

    /// The subscription as JSON: each set a list, or "*" for every one.
    pub(super) fn to_json(&self) -> serde_json::Value {
        let list = |v: Option<Vec<String>>| v.map_or_else(|| serde_json::json!("*"), |v| serde_json::json!(v));
        serde_json::json!({
            "symbols": list(self.symbols.as_ref().map(|s| s
                .iter()
                .map(|k| String::from_utf8_lossy(itch50::trim_stock(k)).into_owned())
                .collect())),
            "actions": list(self.actions.as_ref().map(|a| a
                .iter()
                .filter_map(|c| action_of(*c))
                .map(|a| a.as_str().to_string())
                .collect())),
            "types": list(self.types.as_ref().map(|t| t.iter().map(|b| char::from(*b).to_string()).collect())),
        })
    }
}

/// One set changed: `*` is every one (subscribe: `None`; unsubscribe: the empty set);
/// otherwise the items are added or taken away. Taking from "every one" needs the whole
/// domain (`every`), which symbols do not have (they are named as the feed goes).
fn apply<T: Ord + Copy>(
    cur: &Option<BTreeSet<T>>,
    list: &[String],
    items: Result<Vec<T>, String>,
    add: bool,
    what: &str,
    every: impl FnOnce() -> Result<BTreeSet<T>, String>,
) -> Result<Option<BTreeSet<T>>, String> {
    if list.iter().any(|x| x == "*") {
        if list.len() > 1 {
            return Err(format!("* is every {what}: name it alone"));
        }
        return Ok(if add { None } else { Some(BTreeSet::new()) });
    }
    let items = items?;
    Ok(match (cur, add) {
        (None, true) => None,
        (Some(s), true) => Some(s.iter().chain(&items).copied().collect()),
        (None, false) => Some(every()?.into_iter().filter(|x| !items.contains(x)).collect()),
        (Some(s), false) => Some(s.iter().filter(|x| !items.contains(x)).copied().collect()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickplant_core::event::Event;

    fn change(add: bool, symbols: Option<&str>, actions: Option<&str>, types: Option<&str>) -> SubscriptionChange {
        let l = |v: Option<&str>| v.map(|v| v.split(',').map(str::to_string).collect());
        SubscriptionChange { add, symbols: l(symbols), actions: l(actions), types: l(types) }
    }

    #[test]
    fn subscribe_adds_unsubscribe_takes_and_star_is_every_one() {
        let all = Subscription::default();
        let named: HashMap<[u8; 8], Vec<u32>> =
            [(itch50::stock("AAPL"), vec![1]), (itch50::stock("MSFT"), vec![2])].into_iter().collect();
        let e = |id, action, t| Event { instrument_id: id, action, msg_type: t, ..Default::default() };
        // Every symbol, then none, then AAPL.
        let none = all.changed(&change(false, Some("*"), None, None), false).unwrap();
        assert!(!none.filter(&named).matches(&e(1, EventAction::Add, b'A')));
        let aapl = none.changed(&change(true, Some("AAPL"), None, None), false).unwrap();
        let f = aapl.filter(&named);
        assert!(f.matches(&e(1, EventAction::Add, b'A')) && !f.matches(&e(2, EventAction::Add, b'A')));
        assert_eq!(aapl.to_json()["symbols"], serde_json::json!(["AAPL"]));
        // Every action but trades.
        let no_trades = aapl.changed(&change(false, None, Some("trade"), None), false).unwrap();
        let f = no_trades.filter(&named);
        assert!(f.matches(&e(1, EventAction::Execute, b'E')) && !f.matches(&e(1, EventAction::Trade, b'P')));
        // Types: A alone, then every one again.
        let a = no_trades.changed(&change(false, None, None, Some("*")), false).unwrap();
        let a = a.changed(&change(true, None, None, Some("A")), false).unwrap();
        assert!(a.filter(&named).matches(&e(1, EventAction::Add, b'A')));
        assert!(!a.filter(&named).matches(&e(1, EventAction::Add, b'F')));
        let back = a.changed(&change(true, Some("MSFT"), Some("*"), Some("*")), false).unwrap();
        assert_eq!(back.to_json(), serde_json::json!({"symbols": ["AAPL", "MSFT"], "actions": "*", "types": "*"}));
    }

    #[test]
    fn bad_changes_say_why_and_change_nothing() {
        let s = Subscription::new(&["AAPL".to_string()], &[], &[]);
        for (c, says) in [
            (change(true, Some("TOOLONGSYM"), None, None), "not a symbol"),
            (change(true, None, Some("buy"), None), "action"),
            (change(true, None, Some("gap"), None), "reach every consumer"),
            (change(true, None, None, Some("Z")), "not an ITCH 5.0 message type"),
            (change(true, None, None, Some("A,*")), "name it alone"),
            (change(false, Some("AAPL"), None, None).clone(), ""),
        ] {
            match s.changed(&c, false) {
                Err(e) => assert!(e.contains(says), "{c:?}: {e}"),
                Ok(n) => assert!(says.is_empty() && n.symbols == Some(BTreeSet::new()), "{c:?}"),
            }
        }
        let every = Subscription::default();
        let e = every.changed(&change(false, Some("AAPL"), None, None), false).unwrap_err();
        assert!(e.contains("takes every symbol"), "{e}");
        // OPRA categories are letters the ITCH check would refuse.
        assert!(every.changed(&change(true, None, None, Some("k")), true).is_ok());
    }
}

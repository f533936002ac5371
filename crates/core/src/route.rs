//! Subscriptions: which events a consumer wants, by instrument and by action / message type.
//!
//! A [`Filter`] answers in constant time per event: instruments are a bitmap over instrument
//! ids, actions and message types are bit sets. An empty list means "all".

use crate::event::{Event, EventAction};

/// What one consumer subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Bitmap over instrument ids; `None` subscribes to every instrument.
    instruments: Option<Vec<u64>>,
    /// Bit per [`EventAction`]; 0 means all.
    actions: u16,
    /// Bit per message type byte (the feed's letter); all zero means all.
    types: [u64; 4],
    /// `types` has a bit set (kept beside it: a test of four words an event cost more than
    /// the rest of the filter).
    some_types: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Filter::all()
    }
}

impl Filter {
    /// Every event.
    pub fn all() -> Self {
        Filter { instruments: None, actions: 0, types: [0; 4], some_types: false }
    }
    /// Only these instrument ids (in addition to those already subscribed).
    pub fn instruments(mut self, ids: impl IntoIterator<Item = u32>) -> Self {
        let bits = self.instruments.get_or_insert_with(Vec::new);
        for id in ids {
            let w = id as usize / 64;
            if bits.len() <= w {
                bits.resize(w + 1, 0);
            }
            bits[w] |= 1 << (id % 64);
        }
        self
    }
    /// Only these actions.
    pub fn actions(mut self, actions: impl IntoIterator<Item = EventAction>) -> Self {
        for a in actions {
            self.actions |= 1 << a.index();
        }
        self
    }
    /// Only these feed message types (ITCH letters).
    pub fn types(mut self, types: impl IntoIterator<Item = u8>) -> Self {
        for t in types {
            self.types[usize::from(t / 64)] |= 1 << (t % 64);
            self.some_types = true;
        }
        self
    }

    /// A filter from its three sets, each `None` for every one and `Some` for just those
    /// (an empty set takes nothing): what the control socket's `subscribe` and
    /// `unsubscribe` build, where "none" must be said as well as "all".
    pub fn select(instruments: Option<&[u32]>, actions: Option<&[EventAction]>, types: Option<&[u8]>) -> Self {
        // No action or no type takes nothing, as no instrument does: said by an empty
        // instrument set, so that `matches` tests no more than it did.
        if actions.is_some_and(<[_]>::is_empty) || types.is_some_and(<[_]>::is_empty) {
            return Filter::all().instruments(std::iter::empty());
        }
        let mut f = Filter::all();
        if let Some(ids) = instruments {
            f = f.instruments(ids.iter().copied());
        }
        f.actions(actions.unwrap_or_default().iter().copied()).types(types.unwrap_or_default().iter().copied())
    }

    /// Every event matches (no instrument, action or type named).
    #[inline]
    pub fn takes_all(&self) -> bool {
        self.instruments.is_none() && self.actions == 0 && !self.some_types
    }

    #[inline]
    pub fn matches(&self, e: &Event) -> bool {
        if let Some(bits) = &self.instruments {
            let id = e.instrument_id as usize;
            if bits.get(id / 64).is_none_or(|w| w & (1 << (id % 64)) == 0) {
                return false;
            }
        }
        if self.actions != 0 && self.actions & (1 << e.action.index()) == 0 {
            return false;
        }
        if self.some_types && self.types[usize::from(e.msg_type / 64)] & (1 << (e.msg_type % 64)) == 0 {
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_combine() {
        let e = |id, action, t| Event { instrument_id: id, action, msg_type: t, ..Default::default() };
        let f = Filter::all().instruments([3, 130]).actions([EventAction::Add, EventAction::Execute]);
        assert!(f.matches(&e(3, EventAction::Add, b'A')));
        assert!(f.matches(&e(130, EventAction::Execute, b'E')));
        assert!(!f.matches(&e(4, EventAction::Add, b'A')));
        assert!(!f.matches(&e(1000, EventAction::Add, b'A')));
        assert!(!f.matches(&e(3, EventAction::Trade, b'P')));
        let t = Filter::all().types([b'P', b'Q']);
        assert!(t.matches(&e(9, EventAction::Trade, b'P')));
        assert!(!t.matches(&e(9, EventAction::Add, b'A')));
        assert!(Filter::all().matches(&e(0, EventAction::Status, b'S')));
        // Only a filter that names nothing takes everything; empty lists name nothing, and
        // an empty instrument set takes nothing.
        assert!(Filter::all().takes_all());
        assert!(Filter::all().types([]).actions([]).takes_all());
        assert!(!f.takes_all() && !t.takes_all());
        assert!(!Filter::all().actions([EventAction::Add]).takes_all());
        let none = Filter::all().instruments(std::iter::empty());
        assert!(!none.takes_all() && !none.matches(&e(3, EventAction::Add, b'A')));
    }

    #[test]
    fn select_says_all_some_or_none_of_each() {
        let e = |id, action, t| Event { instrument_id: id, action, msg_type: t, ..Default::default() };
        assert!(Filter::select(None, None, None).takes_all());
        let add = e(3, EventAction::Add, b'A');
        for none in [
            Filter::select(Some(&[]), None, None),
            Filter::select(None, Some(&[]), None),
            Filter::select(None, None, Some(&[])),
        ] {
            assert!(!none.takes_all() && !none.matches(&add), "{none:?}");
        }
        let f = Filter::select(Some(&[3]), Some(&[EventAction::Add]), Some(b"AF"));
        assert!(f.matches(&add) && f.matches(&e(3, EventAction::Add, b'F')));
        assert!(!f.matches(&e(4, EventAction::Add, b'A')));
        assert!(!f.matches(&e(3, EventAction::Trade, b'A')));
        assert!(!f.matches(&e(3, EventAction::Add, b'P')));
        assert_eq!(f, Filter::all().instruments([3]).actions([EventAction::Add]).types(*b"AF"));
    }
}

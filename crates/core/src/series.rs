//! A table of instruments a feed names as it goes (OPRA's option series): each key gets an
//! id from 1 in order of first appearance, up to a number fixed at start. Shared by the OPRA
//! FAST and OPRA binary decoders.

use std::hash::Hash;

use crate::fxhash::FxMap;

#[derive(Debug, Clone)]
pub(crate) struct SeriesTable<K> {
    ids: FxMap<K, u32>,
    keys: Vec<K>,
    max: usize,
}

impl<K: Hash + Eq + Copy> SeriesTable<K> {
    /// Room for `max` keys, reserved now (no allocation on the per-message path after).
    pub(crate) fn new(max: usize) -> Self {
        let mut ids = FxMap::default();
        ids.reserve(max);
        SeriesTable { ids, keys: Vec::with_capacity(max), max }
    }

    /// The key's id, a new one for a new key; `None` when the table is full.
    #[inline]
    pub(crate) fn id(&mut self, key: K) -> Option<u32> {
        if let Some(&id) = self.ids.get(&key) {
            return Some(id);
        }
        if self.keys.len() >= self.max {
            return None;
        }
        self.keys.push(key);
        let id = self.keys.len() as u32;
        self.ids.insert(key, id);
        Some(id)
    }

    /// The key of an id (ids run 1..=len).
    pub(crate) fn get(&self, id: u32) -> Option<&K> {
        self.keys.get((id as usize).checked_sub(1)?)
    }

    pub(crate) fn len(&self) -> u32 {
        self.keys.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_order_of_appearance_up_to_the_room() {
        let mut t = SeriesTable::new(2);
        assert_eq!((t.id('a'), t.id('b'), t.id('a'), t.id('c')), (Some(1), Some(2), Some(1), None));
        assert_eq!((t.get(2), t.get(0), t.get(3), t.len()), (Some(&'b'), None, None, 2));
    }
}

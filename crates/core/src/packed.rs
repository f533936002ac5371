//! Byte strings held back to back in one buffer, with where each ends: messages of a
//! snapshot or of a feed, packets read into memory, datagrams queued for one send call.
//! One allocation for the bytes and one for the ends, however many strings, and strings
//! that follow each other in memory as a capture or a receive ring holds them.

/// Byte strings back to back: string `i` is `bytes[ends[i - 1]..ends[i]]` (`ends[-1]` = 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Packed {
    pub fn new() -> Packed {
        Packed::default()
    }

    /// Add `s` after the others.
    #[inline]
    pub fn push(&mut self, s: &[u8]) {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
    }

    /// How many strings.
    #[inline]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Empty, keeping the room.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// String `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(&self.bytes[start..end])
    }

    /// The strings in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.ends.len()).map(move |i| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            &self.bytes[start..self.ends[i]]
        })
    }

    /// Every string's bytes, back to back.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_as_pushed_empty_ones_included() {
        let mut p = Packed::new();
        assert!(p.is_empty() && p.get(0).is_none() && p.iter().next().is_none());
        for s in [&b"ab"[..], b"", b"cde", b""] {
            p.push(s);
        }
        assert_eq!(p.len(), 4);
        assert_eq!(p.iter().collect::<Vec<_>>(), [&b"ab"[..], b"", b"cde", b""]);
        assert_eq!(p.iter().len(), 4);
        assert_eq!((p.get(2), p.get(3), p.get(4)), (Some(&b"cde"[..]), Some(&b""[..]), None));
        assert_eq!(p.bytes(), b"abcde");
        p.clear();
        assert!(p.is_empty() && p.bytes().is_empty());
        p.push(b"x");
        assert_eq!(p.get(0), Some(&b"x"[..]));
    }
}

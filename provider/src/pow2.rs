//! Power-of-two tables indexed modulo their length: the wr_id tables a poll loop reads once
//! per completion, with the index masked instead of bounds-checked.

/// A table of `2^k` entries whose [`Pow2Table::at`] takes any index and reads entry
/// `index & (len - 1)`, with no bounds check and no panic.
#[derive(Debug, Clone)]
pub struct Pow2Table<T> {
    items: Box<[T]>,
    /// `items.len() - 1`; `items` is never resized, so this holds for the table's life.
    mask: usize,
}

impl<T> Pow2Table<T> {
    /// A table of `len` entries, entry `i` being `f(i)`; `None` unless `len` is a power of
    /// two.
    pub fn from_fn(len: usize, f: impl FnMut(usize) -> T) -> Option<Self> {
        if !len.is_power_of_two() {
            return None;
        }
        let items: Box<[T]> = (0..len).map(f).collect();
        Some(Self { items, mask: len - 1 })
    }

    /// Number of entries.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.mask + 1
    }

    /// Never true: a table has at least one entry.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `len() - 1`.
    #[inline(always)]
    pub fn mask(&self) -> usize {
        self.mask
    }

    /// Entry `index & mask()`.
    #[inline(always)]
    pub fn at(&self, index: usize) -> &T {
        let i = index & self.mask;
        // SAFETY: `items.len() == mask + 1` (set in `from_fn`, and `items` is never resized), so `i <= mask < items.len()`.
        unsafe { self.items.get_unchecked(i) }
    }

    /// The table by value (its base and mask), for a loop that keeps both in registers
    /// while it stores completions: through a reference, each store could change them as
    /// far as the compiler knows, so each lookup would reload them.
    #[inline(always)]
    pub fn by_value(&self) -> Pow2Ref<'_, T> {
        Pow2Ref { items: &self.items, mask: self.mask }
    }

    /// Entry `index & mask()`, mutably.
    #[inline(always)]
    pub fn at_mut(&mut self, index: usize) -> &mut T {
        let i = index & self.mask;
        // SAFETY: as in `at`: `i <= mask < items.len()`.
        unsafe { self.items.get_unchecked_mut(i) }
    }
}

/// A borrowed [`Pow2Table`] held by value ([`Pow2Table::by_value`]), with the same
/// masked [`Pow2Ref::at`].
#[derive(Debug)]
pub struct Pow2Ref<'a, T> {
    items: &'a [T],
    /// `items.len() - 1`, copied from the table.
    mask: usize,
}

impl<T> Clone for Pow2Ref<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Pow2Ref<'_, T> {}

impl<'a, T> Pow2Ref<'a, T> {
    /// `len() - 1`.
    #[inline(always)]
    pub fn mask(&self) -> usize {
        self.mask
    }

    /// Entry `index & mask()`.
    #[inline(always)]
    pub fn at(&self, index: usize) -> &'a T {
        let i = index & self.mask;
        // SAFETY: only `Pow2Table::by_value` builds a `Pow2Ref`, with the table's items and mask, and `items.len() == mask + 1` there; so `i <= mask < items.len()`.
        unsafe { self.items.get_unchecked(i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_powers_of_two() {
        assert!(Pow2Table::from_fn(0, |i| i).is_none());
        assert!(Pow2Table::from_fn(12, |i| i).is_none());
        assert_eq!(Pow2Table::from_fn(1, |i| i).map(|t| t.len()), Some(1));
    }

    proptest! {
        #[test]
        fn any_index_reads_the_entry_modulo_len(log2 in 0u32..12, index in any::<usize>()) {
            let len = 1usize << log2;
            let mut t = Pow2Table::from_fn(len, |i| i * 3).unwrap();
            prop_assert_eq!(*t.at(index), (index % len) * 3);
            prop_assert_eq!(*t.by_value().at(index), (index % len) * 3);
            prop_assert_eq!(t.by_value().mask(), t.mask());
            prop_assert_eq!((t.len(), t.mask(), t.is_empty()), (len, len - 1, false));
            *t.at_mut(index) = 7;
            prop_assert_eq!(*t.at(index % len), 7);
        }
    }
}

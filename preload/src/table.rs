//! A fixed open-addressing table from an rdma-core object's address to the preload's state
//! for it: lookups are wait-free (atomic loads only), which the poll path needs; inserts and
//! removals (object creation and destruction) are serialised by a lock.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A slot whose object was removed: probes go on past it.
const TOMBSTONE: usize = 1;

/// The table: `N` slots (a power of two).
pub(crate) struct Table<T, const N: usize> {
    keys: [AtomicUsize; N],
    vals: [AtomicPtr<T>; N],
    write: Mutex<()>,
}

fn slot(key: usize, n: usize) -> usize {
    // Objects are at least 8-byte aligned; Fibonacci hashing spreads the rest.
    ((key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) & (n - 1)
}

impl<T, const N: usize> Table<T, N> {
    /// An empty table.
    pub(crate) const fn new() -> Self {
        Table {
            keys: [const { AtomicUsize::new(0) }; N],
            vals: [const { AtomicPtr::new(core::ptr::null_mut()) }; N],
            write: Mutex::new(()),
        }
    }

    /// The state of `key`, if it has some.
    #[inline]
    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        let mut i = slot(key, N);
        for _ in 0..N {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == 0 {
                return None;
            }
            if k == key {
                let p = self.vals[i].load(Ordering::Acquire);
                // SAFETY: a non-null value was leaked from a Box by `insert` and is freed only by `remove` of the same key, which the application calls when it destroys the object (after which it no longer uses it).
                return (!p.is_null()).then(|| unsafe { &*p });
            }
            i = (i + 1) & (N - 1);
        }
        None
    }

    /// Stores `val` for `key`; gives it back when the table is full or `key` has a state.
    pub(crate) fn insert(&self, key: usize, val: Box<T>) -> Result<&T, Box<T>> {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        if self.get(key).is_some() {
            return Err(val);
        }
        let mut i = slot(key, N);
        for _ in 0..N {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == 0 || k == TOMBSTONE {
                let p = Box::into_raw(val);
                self.vals[i].store(p, Ordering::Release);
                self.keys[i].store(key, Ordering::Release);
                // SAFETY: just leaked; freed only by `remove`.
                return Ok(unsafe { &*p });
            }
            i = (i + 1) & (N - 1);
        }
        Err(val)
    }

    /// Takes `key`'s state out of the table.
    pub(crate) fn remove(&self, key: usize) -> Option<Box<T>> {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut i = slot(key, N);
        for _ in 0..N {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == 0 {
                return None;
            }
            if k == key {
                self.keys[i].store(TOMBSTONE, Ordering::Release);
                let p = self.vals[i].swap(core::ptr::null_mut(), Ordering::AcqRel);
                // SAFETY: leaked by `insert` for this key, and no longer reachable by a new lookup.
                return (!p.is_null()).then(|| unsafe { Box::from_raw(p) });
            }
            i = (i + 1) & (N - 1);
        }
        None
    }

    /// Calls `f` on every state (at exit).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&T)) {
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        for i in 0..N {
            if let Some(v) = (self.keys[i].load(Ordering::Acquire) > TOMBSTONE)
                .then(|| self.vals[i].load(Ordering::Acquire))
                .filter(|p| !p.is_null())
            {
                // SAFETY: as in `get`; the write lock keeps `remove` out meanwhile.
                f(unsafe { &*v });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove_and_reuse() {
        let t: Table<u32, 8> = Table::new();
        for k in 1..=8usize {
            assert!(t.insert(k * 8 + 0x1000, Box::new(k as u32)).is_ok());
        }
        assert!(t.insert(0x9000, Box::new(9)).is_err(), "a full table refuses");
        assert_eq!(t.get(0x1000 + 24).copied(), Some(3));
        assert_eq!(t.remove(0x1000 + 24).map(|b| *b), Some(3));
        assert_eq!(t.get(0x1000 + 24), None);
        assert_eq!(t.get(0x1000 + 64).copied(), Some(8), "probes go past a removed slot");
        assert!(t.insert(0x9000, Box::new(9)).is_ok(), "a removed slot is reused");
        assert_eq!(t.get(0x9000).copied(), Some(9));
        let mut n = 0;
        t.for_each(|_| n += 1);
        assert_eq!(n, 8);
    }
}

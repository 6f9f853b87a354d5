//! Test support (feature `testing`): a counting global allocator, so tests can show that a
//! hot path allocates nothing, drains that compare a backend's poll paths, and the
//! consumer's side of threaded producer/consumer tests ([`threaded`]).
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: dvcq_provider::testing::CountingAlloc = dvcq_provider::testing::CountingAlloc;
//! let before = dvcq_provider::testing::allocations();
//! // ... poll ...
//! assert_eq!(dvcq_provider::testing::allocations(), before);
//! ```

pub mod threaded;

use crate::{Completion, CqDriver};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// Allocations and reallocations made so far by the calling thread (counted per thread, so
/// tests running in parallel do not see each other's).
pub fn allocations() -> u64 {
    ALLOCS.try_with(Cell::get).unwrap_or(0)
}

/// The system allocator, counting allocations per thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

fn count() {
    // `try_with`: the thread-local may already be gone while a thread shuts down.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to the system allocator with the caller's arguments unchanged; counting touches only a thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we forward.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr`/`layout` came from `System` and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The reference drain: while `peek` (which never consumes) shows a completion, a
/// one-completion poll must return exactly that one. Once `peek` shows none, one more poll
/// must return none too; it still consumes CQEs that give no completion (an iWARP QP's
/// connection WQEs), as rdma-core's poll does, so the consumer index ends where a batch
/// drain leaves it. Returns the completions, or where the two first differ.
pub fn drain_one_by_one<D: CqDriver>(cq: &mut D) -> Result<Vec<Completion>, String> {
    let mut all = Vec::new();
    while let Some(want) = cq.peek() {
        let mut got = [Completion::default()];
        if cq.poll(&mut got) != 1 || got[0] != want {
            return Err(format!("item {}: peek gave {want:?}, a one-completion poll {:?}", all.len(), got[0]));
        }
        all.push(want);
    }
    let mut last = [Completion::default()];
    match cq.poll(&mut last) {
        0 => Ok(all),
        _ => Err(format!("item {}: peek gave none, a one-completion poll {:?}", all.len(), last[0])),
    }
}

/// Drains with polls of `batch` completions until one returns none.
pub fn drain<D: CqDriver>(cq: &mut D, batch: usize) -> Vec<Completion> {
    let mut all = Vec::new();
    let mut buf = vec![Completion::default(); batch];
    while let n @ 1.. = cq.poll(&mut buf) {
        all.extend_from_slice(&buf[..n]);
    }
    all
}

/// Drains with polls of the sizes in `batches`, taken in turn, `calls` polls in all, into
/// zeroed completions.
pub fn drain_in_batches<D: CqDriver>(cq: &mut D, batches: &[usize], calls: usize) -> Vec<Completion> {
    let mut all = Vec::new();
    for &k in batches.iter().cycle().take(calls) {
        let mut buf = vec![Completion::default(); k];
        let n = cq.poll(&mut buf);
        all.extend_from_slice(&buf[..n]);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::CqInfo;

    /// A CQ of `n` completions numbered by `wr_id`, whose poll takes them in order and
    /// whose peek shows `peek_shift` more than the next one.
    struct Numbered {
        next: u64,
        n: u64,
        peek_shift: u64,
    }

    impl CqDriver for Numbered {
        fn info(&self) -> CqInfo {
            CqInfo { vendor: "test", entries: 8, cqe_size: 64, cqn: 0 }
        }
        fn poll(&mut self, out: &mut [Completion]) -> usize {
            let mut k = 0;
            for slot in out.iter_mut().take((self.n - self.next) as usize) {
                *slot = Completion { wr_id: self.next, ..Completion::default() };
                self.next += 1;
                k += 1;
            }
            k
        }
        fn peek(&self) -> Option<Completion> {
            (self.next < self.n).then(|| Completion { wr_id: self.next + self.peek_shift, ..Completion::default() })
        }
        fn ci(&self) -> u32 {
            self.next as u32
        }
        fn update_ci(&mut self) {}
    }

    /// The reference drain returns what peek and poll agree on, and names the first item
    /// where they differ.
    #[test]
    fn drain_one_by_one_reports_where_peek_and_poll_differ() {
        let all = drain_one_by_one(&mut Numbered { next: 0, n: 3, peek_shift: 0 }).unwrap();
        assert_eq!(all.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
        let e = drain_one_by_one(&mut Numbered { next: 0, n: 3, peek_shift: 1 }).unwrap_err();
        assert!(e.starts_with("item 0: peek gave Completion { wr_id: 1,"), "{e}");

        let batches = drain_in_batches(&mut Numbered { next: 0, n: 6, peek_shift: 0 }, &[2, 0, 1], 4);
        // Calls of 2, 0, 1 and 2 again, the last one taking what is left.
        assert_eq!(batches.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    }
}

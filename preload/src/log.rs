//! Messages on standard error, each distinct one once per process, prefixed
//! `dvcq-preload:` so that a test can tell them from the program's own output.

use std::collections::HashSet;
use std::sync::Mutex;

static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Prints `msg` unless it was printed before.
pub(crate) fn once(msg: String) {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.get_or_insert_with(HashSet::new).insert(msg.clone()) {
        eprintln!("dvcq-preload: {msg}");
    }
}

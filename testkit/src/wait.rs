//! Waiting for an event another thread may cause a moment later, with a bound.
//!
//! Some of dlport's events happen on whichever thread lets go last: a plugin's `destroy` runs
//! when the last handle to it drops, and a test's neighbours (tests of the same binary that
//! list, look up or register plugins in the same process-wide table) may hold such a handle
//! for a moment. A test that asserts such an event waits for it here instead of reading a
//! counter once: it polls until the count is reached, fails at once when the count goes past
//! it (the event happened twice), and fails with the name of what it waited for when the bound
//! passes without it.

use std::time::{Duration, Instant};

/// How long [`count_reaches`] waits: long enough for a neighbour's listing or lookup to end on
/// a loaded machine or under an emulator, short enough that a missing event fails the test
/// instead of hanging it.
pub const BOUND: Duration = Duration::from_secs(30);

/// Waits until `count()` is `want`, for at most [`BOUND`]. Panics, naming `what`, when the
/// count goes past `want` or when the bound passes first.
pub fn count_reaches(what: &str, want: usize, count: impl Fn() -> usize) {
    count_reaches_within(what, want, BOUND, count);
}

/// [`count_reaches`] with a bound of `bound`.
pub fn count_reaches_within(what: &str, want: usize, bound: Duration, count: impl Fn() -> usize) {
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        let now = count();
        assert!(
            now <= want,
            "{what}: the count is {now}, past the {want} expected (it happened too often)"
        );
        if now == want {
            return;
        }
        let waited = start.elapsed();
        assert!(
            waited < bound,
            "{what}: the count is still {now} after waiting {waited:?} for {want} (the event \
             never happened, or something still holds what it waits for)"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_count_reached_on_another_thread_later_returns() {
        let n = Arc::new(AtomicUsize::new(0));
        let later = {
            let n = n.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                n.fetch_add(1, Ordering::SeqCst);
            })
        };
        count_reaches("the other thread's increment", 1, || {
            n.load(Ordering::SeqCst)
        });
        later.join().unwrap();
    }

    #[test]
    #[should_panic(expected = "the missing event: the count is still 0 after waiting")]
    fn a_count_never_reached_fails_naming_what_was_awaited() {
        count_reaches_within("the missing event", 1, Duration::from_millis(30), || 0);
    }

    #[test]
    #[should_panic(expected = "the double event: the count is 2, past the 1 expected")]
    fn a_count_past_the_one_expected_fails_at_once() {
        count_reaches("the double event", 1, || 2);
    }
}

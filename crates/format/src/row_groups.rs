//! Row groups shared by the reader threads of one loader (one rank), so that a row group is
//! fetched once however the batches that hold its rows are spread over the threads.
//!
//! The fork's parquet readers hand each DataLoader worker whole files, so a worker reads each
//! of its row groups once per epoch. dlio's loader gives batch `s` to thread `s % n`, and a
//! row group of `r` rows spans about `r / batch` consecutive batches, hence as many threads:
//! with a cache per thread, each of them fetched it (flux_b200's 288-row files, in batches of
//! 48 over 8 threads: every byte six times). Here the first thread to need a row group in an
//! epoch fetches it; a thread that needs it meanwhile waits for that fetch (its batch is not
//! ready before the bytes are), and one that needs it later finds it fetched. Nothing of the
//! data is kept (the readers decode nothing), only the fact, for the last `capacity` row
//! groups, as a cache of that many row groups would.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A row group of one epoch: (epoch, file identity, group).
type GroupKey = (u32, u64, u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Fetching,
    Fetched,
}

#[derive(Debug, Default)]
struct Claims {
    states: rustc_hash::FxHashMap<GroupKey, State>,
    /// Fetched groups, oldest first, for the bound.
    fetched: VecDeque<GroupKey>,
}

/// The row groups the readers of one loader have fetched or are fetching.
#[derive(Debug)]
pub(crate) struct SharedRowGroups {
    claims: Mutex<Claims>,
    changed: Condvar,
    capacity: usize,
}

/// What a reader does about a row group it needs.
#[must_use]
pub(crate) enum Claim<'a> {
    /// Another thread fetched it: no I/O.
    Fetched,
    /// This thread fetches it, then calls [`FetchClaim::done`]; dropped without that (an
    /// error), the claim is released for another thread to fetch.
    Fetch(FetchClaim<'a>),
}

/// The right, and the duty, to fetch one row group.
pub(crate) struct FetchClaim<'a> {
    shared: &'a SharedRowGroups,
    key: GroupKey,
    done: bool,
}

impl SharedRowGroups {
    /// Remembers up to `capacity` fetched row groups (at least one).
    pub(crate) fn new(capacity: usize) -> SharedRowGroups {
        SharedRowGroups {
            claims: Mutex::new(Claims::default()),
            changed: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Claims> {
        // A reader that panicked leaves nothing half-changed: every update is one statement.
        self.claims.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Row group `group` of the file `file` (an identity of its path) in `epoch`: fetched
    /// already, or this thread's to fetch, after waiting for a fetch in progress.
    pub(crate) fn claim(&self, epoch: u32, file: u64, group: u32) -> Claim<'_> {
        let key = (epoch, file, group);
        let mut claims = self.lock();
        loop {
            match claims.states.get(&key) {
                Some(State::Fetched) => return Claim::Fetched,
                Some(State::Fetching) => {
                    claims = self.changed.wait(claims).unwrap_or_else(|e| e.into_inner());
                }
                None => {
                    claims.states.insert(key, State::Fetching);
                    return Claim::Fetch(FetchClaim {
                        shared: self,
                        key,
                        done: false,
                    });
                }
            }
        }
    }
}

impl FetchClaim<'_> {
    /// The row group's bytes were read.
    pub(crate) fn done(mut self) {
        self.done = true;
        let shared = self.shared;
        let mut claims = shared.lock();
        claims.states.insert(self.key, State::Fetched);
        claims.fetched.push_back(self.key);
        while claims.fetched.len() > shared.capacity {
            if let Some(oldest) = claims.fetched.pop_front() {
                claims.states.remove(&oldest);
            }
        }
        // Groups of earlier epochs are never asked for again.
        let epoch = self.key.0;
        if claims.states.keys().any(|k| k.0 < epoch) {
            claims.states.retain(|k, _| k.0 >= epoch);
            claims.fetched.retain(|k| k.0 >= epoch);
        }
        drop(claims);
        shared.changed.notify_all();
    }
}

impl Drop for FetchClaim<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.lock().states.remove(&self.key);
            self.shared.changed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    #[test]
    fn a_group_is_fetched_once_per_epoch() {
        let shared = SharedRowGroups::new(8);
        let Claim::Fetch(claim) = shared.claim(1, 7, 0) else {
            panic!("the first claim fetches");
        };
        claim.done();
        assert!(matches!(shared.claim(1, 7, 0), Claim::Fetched));
        // Another group, another file, another epoch: fetched again.
        assert!(matches!(shared.claim(1, 7, 1), Claim::Fetch(_)));
        assert!(matches!(shared.claim(1, 8, 0), Claim::Fetch(_)));
        assert!(matches!(shared.claim(2, 7, 0), Claim::Fetch(_)));
    }

    #[test]
    fn a_failed_fetch_leaves_the_group_to_the_next_thread() {
        let shared = SharedRowGroups::new(8);
        let Claim::Fetch(claim) = shared.claim(1, 7, 0) else {
            panic!("the first claim fetches");
        };
        drop(claim);
        assert!(matches!(shared.claim(1, 7, 0), Claim::Fetch(_)));
    }

    #[test]
    fn only_the_last_groups_are_remembered() {
        let shared = SharedRowGroups::new(2);
        for group in 0..3 {
            let Claim::Fetch(claim) = shared.claim(1, 7, group) else {
                panic!("new groups are fetched");
            };
            claim.done();
        }
        assert!(matches!(shared.claim(1, 7, 2), Claim::Fetched));
        assert!(matches!(shared.claim(1, 7, 1), Claim::Fetched));
        assert!(matches!(shared.claim(1, 7, 0), Claim::Fetch(_)));
    }

    #[test]
    fn threads_that_need_a_group_being_fetched_wait_for_it_and_do_not_fetch_it() {
        let shared = Arc::new(SharedRowGroups::new(8));
        let fetches = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (shared, fetches) = (Arc::clone(&shared), Arc::clone(&fetches));
                std::thread::spawn(move || match shared.claim(1, 7, 0) {
                    Claim::Fetch(claim) => {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(50));
                        claim.done();
                    }
                    Claim::Fetched => {}
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }
}

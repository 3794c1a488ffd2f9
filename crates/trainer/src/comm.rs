//! How ranks synchronise: the [`Comm`] trait and the in-process implementation.
//!
//! DLIO runs one MPI rank per simulated accelerator and calls a barrier after every training
//! step (the emulated all-reduce). `dlio run --ranks N` runs N ranks as threads of one process
//! behind the same trait, so the step loop cannot tell the two apart; the MPI implementation
//! plugs in behind it later.

use std::sync::{Arc, Condvar, Mutex};

/// Why a collective call did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the run was aborted: {reason}")]
pub struct Aborted {
    /// What aborted it (another rank's error, Ctrl-C).
    pub reason: String,
}

/// The collective operations the step loop needs.
pub trait Comm: Send + Sync {
    /// This rank's number, 0-based.
    fn rank(&self) -> u32;
    /// Number of ranks.
    fn world(&self) -> u32;
    /// Waits until every rank has arrived, or fails when the run is aborted.
    fn barrier(&self) -> Result<(), Aborted>;
    /// Makes every current and future collective call of every rank fail with `reason`, so no
    /// rank waits forever for one that has failed.
    fn abort(&self, reason: &str);
}

/// The ranks of one process: an abortable barrier shared by [`LocalComm`]s.
#[derive(Debug)]
pub struct LocalGroup {
    world: u32,
    state: Mutex<BarrierState>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct BarrierState {
    arrived: u32,
    generation: u64,
    aborted: Option<String>,
}

impl LocalGroup {
    /// A group of `world` ranks.
    pub fn new(world: u32) -> Arc<LocalGroup> {
        Arc::new(LocalGroup {
            world: world.max(1),
            state: Mutex::new(BarrierState::default()),
            turn: Condvar::new(),
        })
    }

    /// The communicator of `rank`.
    pub fn comm(self: &Arc<Self>, rank: u32) -> LocalComm {
        LocalComm {
            group: Arc::clone(self),
            rank,
        }
    }

    /// Aborts every collective call (see [`Comm::abort`]). The first reason wins.
    pub fn abort(&self, reason: &str) {
        let mut s = self.lock();
        if s.aborted.is_none() {
            s.aborted = Some(reason.to_string());
        }
        self.turn.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn barrier(&self) -> Result<(), Aborted> {
        let mut s = self.lock();
        if let Some(reason) = &s.aborted {
            return Err(Aborted {
                reason: reason.clone(),
            });
        }
        s.arrived += 1;
        if s.arrived == self.world {
            s.arrived = 0;
            s.generation += 1;
            self.turn.notify_all();
            return Ok(());
        }
        let generation = s.generation;
        while s.generation == generation {
            if let Some(reason) = &s.aborted {
                return Err(Aborted {
                    reason: reason.clone(),
                });
            }
            s = self.turn.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        Ok(())
    }
}

/// One rank of a [`LocalGroup`].
#[derive(Debug, Clone)]
pub struct LocalComm {
    group: Arc<LocalGroup>,
    rank: u32,
}

impl Comm for LocalComm {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn world(&self) -> u32 {
        self.group.world
    }
    fn barrier(&self) -> Result<(), Aborted> {
        self.group.barrier()
    }
    fn abort(&self, reason: &str) {
        self.group.abort(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn barrier_holds_every_rank_until_the_last_arrives() {
        let group = LocalGroup::new(4);
        let passed = AtomicU32::new(0);
        std::thread::scope(|s| {
            for r in 0..4 {
                let comm = group.comm(r);
                let passed = &passed;
                s.spawn(move || {
                    for round in 0..50u32 {
                        comm.barrier().unwrap();
                        // Nobody can be a whole round ahead.
                        let seen = passed.fetch_add(1, Ordering::SeqCst);
                        assert!(seen / 4 <= round + 1);
                        comm.barrier().unwrap();
                    }
                });
            }
        });
        assert_eq!(passed.load(Ordering::SeqCst), 200);
    }

    #[test]
    fn abort_releases_ranks_waiting_at_the_barrier() {
        let group = LocalGroup::new(3);
        let started = Instant::now();
        std::thread::scope(|s| {
            for r in 0..2 {
                let comm = group.comm(r);
                s.spawn(move || {
                    let e = comm.barrier().unwrap_err();
                    assert_eq!(e.reason, "rank 2 failed");
                });
            }
            std::thread::sleep(Duration::from_millis(50));
            group.comm(2).abort("rank 2 failed");
        });
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            group.comm(0).barrier().is_err(),
            "an aborted group stays aborted"
        );
    }
}

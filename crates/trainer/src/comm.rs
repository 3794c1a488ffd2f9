//! How ranks synchronise: the [`Comm`] trait and its implementation.
//!
//! DLIO runs one MPI rank per simulated accelerator and calls a barrier after every training
//! step (the emulated all-reduce). Here a process runs `M` ranks as threads (`--ranks M`) in a
//! [`LocalGroup`]; under MPI, `N` processes each run their `M` ranks and the group's barrier
//! also meets the other processes through a [`CrossProcess`] link, so `N x M` ranks behave as
//! `N x M` MPI ranks would: global rank `process * M + local`, one barrier for all. The step
//! loop cannot tell the cases apart, and this crate does not depend on MPI: the binary
//! provides the link.

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

/// What a process needs from the other processes of the job (MPI, in the binary).
pub trait CrossProcess: Send + Sync {
    /// Waits until every process has called it.
    fn barrier(&self);
    /// Ends the whole job with a failure after printing `reason` (MPI_Abort); other processes
    /// may be blocked in a barrier, so nothing less can release them.
    fn abort(&self, reason: &str);
}

/// This process's place among the job's processes.
#[derive(Clone)]
struct Outer {
    process: u32,
    processes: u32,
    link: Arc<dyn CrossProcess>,
}

impl std::fmt::Debug for Outer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "process {} of {}", self.process, self.processes)
    }
}

/// The ranks of one process: an abortable barrier shared by [`LocalComm`]s.
#[derive(Debug)]
pub struct LocalGroup {
    world: u32,
    state: Mutex<BarrierState>,
    turn: Condvar,
    outer: Option<Outer>,
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
            outer: None,
        })
    }

    /// A group of `world` ranks in process `process` of `processes`, linked to the others.
    pub fn across_processes(
        world: u32,
        process: u32,
        processes: u32,
        link: Arc<dyn CrossProcess>,
    ) -> Arc<LocalGroup> {
        Arc::new(LocalGroup {
            world: world.max(1),
            state: Mutex::new(BarrierState::default()),
            turn: Condvar::new(),
            outer: Some(Outer {
                process,
                processes: processes.max(1),
                link,
            }),
        })
    }

    /// Ranks in this process.
    pub fn local_ranks(&self) -> u32 {
        self.world
    }

    /// The global rank of local rank `local`.
    pub fn global_rank(&self, local: u32) -> u32 {
        self.outer.as_ref().map_or(0, |o| o.process) * self.world + local
    }

    /// Ranks in the whole job.
    pub fn global_world(&self) -> u32 {
        self.outer.as_ref().map_or(1, |o| o.processes) * self.world
    }

    /// The communicator of `rank`.
    pub fn comm(self: &Arc<Self>, rank: u32) -> LocalComm {
        LocalComm {
            group: Arc::clone(self),
            rank,
        }
    }

    /// Aborts every collective call (see [`Comm::abort`]). The first reason wins. Across
    /// processes, this ends the job.
    pub fn abort(&self, reason: &str) {
        let first = {
            let mut s = self.lock();
            let first = s.aborted.is_none();
            if first {
                s.aborted = Some(reason.to_string());
            }
            self.turn.notify_all();
            first
        };
        if let (true, Some(outer)) = (first, &self.outer) {
            outer.link.abort(reason);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BarrierState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The barrier of one local rank: the local ranks meet; then, across processes, local rank
    /// 0 meets the other processes while the others wait for it.
    fn barrier_of(&self, local: u32) -> Result<(), Aborted> {
        self.local_barrier()?;
        if let Some(outer) = &self.outer {
            if local == 0 {
                outer.link.barrier();
            }
            self.local_barrier()?;
        }
        Ok(())
    }

    fn local_barrier(&self) -> Result<(), Aborted> {
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
        self.group.global_rank(self.rank)
    }
    fn world(&self) -> u32 {
        self.group.global_world()
    }
    fn barrier(&self) -> Result<(), Aborted> {
        self.group.barrier_of(self.rank)
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

    /// Two "processes" of two ranks each, linked by a std barrier: four global ranks.
    struct FakeLink(std::sync::Barrier);
    impl CrossProcess for FakeLink {
        fn barrier(&self) {
            self.0.wait();
        }
        fn abort(&self, _reason: &str) {}
    }

    #[test]
    fn two_processes_of_two_ranks_behave_as_four_ranks() {
        let link: Arc<dyn CrossProcess> = Arc::new(FakeLink(std::sync::Barrier::new(2)));
        let groups = [
            LocalGroup::across_processes(2, 0, 2, Arc::clone(&link)),
            LocalGroup::across_processes(2, 1, 2, Arc::clone(&link)),
        ];
        let passed = AtomicU32::new(0);
        let mut ranks = Vec::new();
        std::thread::scope(|s| {
            for g in &groups {
                for local in 0..2 {
                    let comm = g.comm(local);
                    ranks.push((comm.rank(), comm.world()));
                    let passed = &passed;
                    s.spawn(move || {
                        for round in 0..20u32 {
                            comm.barrier().unwrap();
                            let seen = passed.fetch_add(1, Ordering::SeqCst);
                            assert!(seen / 4 <= round + 1, "a rank ran a round ahead");
                            comm.barrier().unwrap();
                        }
                    });
                }
            }
        });
        ranks.sort();
        assert_eq!(ranks, [(0, 4), (1, 4), (2, 4), (3, 4)]);
        assert_eq!(passed.load(Ordering::SeqCst), 80);
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

//! The processes of a job: one for a plain run, many under `mpirun` (cargo feature `mpi`).
//!
//! Process 0 decides and the others follow: it broadcasts the resolved config and the file
//! lists (one listing for the whole job instead of one per rank), and it gathers every rank's
//! report to write the outputs. Ranks inside a process are threads; the processes meet in the
//! trainer's barrier through the [`CrossProcess`] link this module provides.

use std::sync::Arc;

use anyhow::{Context, Result};
use dlio_storage::PathTable;
use dlio_trainer::CrossProcess;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Environment variables that launchers set in every process they start, with the number of
/// processes (Open MPI, MPICH/Hydra and PMI-based launchers such as Slurm's).
const LAUNCHER_SIZE_VARS: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_SIZE",
    "MPI_LOCALNRANKS",
];

/// The number of processes a launcher says it started, if dlio runs under one.
fn launched_processes() -> Option<u32> {
    LAUNCHER_SIZE_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// This process's view of the job.
pub struct Cluster {
    process: u32,
    processes: u32,
    /// MPI_THREAD_MULTIPLE was granted (any thread may call MPI at any time).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    thread_multiple: bool,
    #[cfg(feature = "mpi")]
    mpi: Option<mpi::environment::Universe>,
}

impl Cluster {
    /// Joins the job: MPI when launched by `mpirun` (and built with the `mpi` feature),
    /// otherwise a job of one process.
    pub fn detect() -> Result<Cluster> {
        let launched = launched_processes();
        #[cfg(feature = "mpi")]
        if launched.is_some() {
            return Self::join_mpi();
        }
        #[cfg(not(feature = "mpi"))]
        if let Some(n) = launched.filter(|&n| n > 1) {
            anyhow::bail!(
                "dlio was started by an MPI launcher with {n} processes, but this dlio was built \
                 without MPI, so each process would run alone; rebuild it with \
                 `cargo build --release --features mpi` (needs `apt install libopenmpi-dev \
                 openmpi-bin libclang-dev`), or run one process with `--ranks {n}`"
            );
        }
        let _ = launched;
        Ok(Cluster {
            process: 0,
            processes: 1,
            thread_multiple: false,
            #[cfg(feature = "mpi")]
            mpi: None,
        })
    }

    #[cfg(feature = "mpi")]
    fn join_mpi() -> Result<Cluster> {
        use mpi::traits::Communicator;
        let (universe, threading) = mpi::initialize_with_threading(mpi::Threading::Multiple)
            .context("initialising MPI (was MPI already initialised?)")?;
        if matches!(threading, mpi::Threading::Single | mpi::Threading::Funneled) {
            anyhow::bail!(
                "the MPI library offers thread level {threading:?}; dlio needs at least \
                 Serialized (ranks are threads)"
            );
        }
        let world = universe.world();
        Ok(Cluster {
            process: world.rank() as u32,
            processes: world.size() as u32,
            thread_multiple: matches!(threading, mpi::Threading::Multiple),
            mpi: Some(universe),
        })
    }

    /// This process's number.
    pub fn process(&self) -> u32 {
        self.process
    }

    /// Processes in the job.
    pub fn processes(&self) -> u32 {
        self.processes
    }

    /// True on process 0, which lists, logs and writes the outputs.
    pub fn is_root(&self) -> bool {
        self.process == 0
    }

    /// The link the trainer's barrier uses across processes (`None` for one process).
    pub fn link(&self) -> Option<Arc<dyn CrossProcess>> {
        #[cfg(feature = "mpi")]
        if self.mpi.is_some() && self.processes > 1 {
            return Some(Arc::new(mpi_link::MpiLink));
        }
        None
    }

    /// Waits for every process.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        if self.mpi.is_some() {
            mpi_link::MpiLink.barrier();
        }
    }

    /// Process 0 computes a value and every process gets it.
    pub fn broadcast<T: Serialize + DeserializeOwned>(
        &self,
        root: impl FnOnce() -> T,
    ) -> Result<T> {
        if self.processes == 1 {
            return Ok(root());
        }
        #[cfg(feature = "mpi")]
        {
            let bytes = if self.is_root() {
                serde_json::to_vec(&root()).context("encoding a broadcast")?
            } else {
                Vec::new()
            };
            let bytes = mpi_link::broadcast_bytes(bytes);
            serde_json::from_slice(&bytes).context("decoding a broadcast from process 0")
        }
        #[cfg(not(feature = "mpi"))]
        unreachable!("several processes need the mpi feature")
    }

    /// Process 0's `table` on the other processes, sent as the table's own bytes
    /// ([`PathTable::encode`]), as a JSON list of ten million paths would be three times the
    /// size. `None` on process 0, which keeps its own (and passes it; the others pass `None`).
    pub fn broadcast_table(&self, table: Option<&PathTable>) -> Result<Option<PathTable>> {
        if self.processes == 1 {
            return Ok(None);
        }
        #[cfg(feature = "mpi")]
        {
            let bytes = if self.is_root() {
                table.map(PathTable::encode).unwrap_or_default()
            } else {
                Vec::new()
            };
            let bytes = mpi_link::broadcast_bytes(bytes);
            if self.is_root() {
                return Ok(None);
            }
            PathTable::decode(&bytes)
                .map(Some)
                .context("decoding the file list process 0 broadcast")
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = table;
            unreachable!("several processes need the mpi feature")
        }
    }

    /// Every process sends a value; process 0 gets them all in process order.
    pub fn gather<T: Serialize + DeserializeOwned>(&self, value: &T) -> Result<Option<Vec<T>>> {
        if self.processes == 1 {
            let bytes = serde_json::to_vec(value).context("encoding")?;
            return Ok(Some(vec![
                serde_json::from_slice(&bytes).context("decoding")?,
            ]));
        }
        #[cfg(feature = "mpi")]
        {
            let bytes = serde_json::to_vec(value).context("encoding a gather")?;
            match mpi_link::gather_bytes(&bytes, self.processes) {
                Some(all) => all
                    .iter()
                    .enumerate()
                    .map(|(p, b)| {
                        serde_json::from_slice(b)
                            .with_context(|| format!("decoding what process {p} sent"))
                    })
                    .collect::<Result<Vec<T>>>()
                    .map(Some),
                None => Ok(None),
            }
        }
        #[cfg(not(feature = "mpi"))]
        unreachable!("several processes need the mpi feature")
    }

    /// The storage for `reader.collective_io: True`: reads of `inner`'s files become MPI-IO
    /// collective calls. Every process must call this once (it duplicates the world
    /// communicator); `reader_threads` is the rank's reader thread count.
    pub fn collective_storage(
        &self,
        inner: Arc<dyn dlio_storage::Storage>,
        reader_threads: u32,
    ) -> Result<Arc<dyn dlio_storage::Storage>> {
        #[cfg(feature = "mpi")]
        if self.mpi.is_some() {
            if reader_threads > 0 && !self.thread_multiple {
                anyhow::bail!(
                    "reader.collective_io with a reader thread needs MPI_THREAD_MULTIPLE, which \
                     this MPI library does not grant; set ++workload.reader.read_threads=0"
                );
            }
            return Ok(Arc::new(crate::collective::CollectiveStorage::new(inner)));
        }
        let _ = (inner, reader_threads);
        anyhow::bail!(
            "reader.collective_io reads through MPI-IO, so dlio must be built with \
             `--features mpi` and started by mpirun; set ++workload.reader.collective_io=False \
             for independent reads"
        )
    }

    /// Ends the whole job after an error that the other processes cannot learn of otherwise.
    pub fn abort(&self, code: i32) {
        #[cfg(feature = "mpi")]
        if self.mpi.is_some() && self.processes > 1 {
            mpi_link::abort(code);
        }
        let _ = code;
    }
}

#[cfg(feature = "mpi")]
mod mpi_link {
    //! The MPI calls, on `MPI_COMM_WORLD`. Each call builds the world communicator handle
    //! afresh (a copy of a constant), so the link holds no MPI object and is Send + Sync.

    use mpi::topology::SimpleCommunicator;
    use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Root, Source};

    pub struct MpiLink;

    impl dlio_trainer::CrossProcess for MpiLink {
        fn barrier(&self) {
            SimpleCommunicator::world().barrier();
        }
        fn abort(&self, reason: &str) {
            eprintln!("error: {reason}; ending the MPI job");
            abort(1);
        }
    }

    pub fn abort(code: i32) -> ! {
        SimpleCommunicator::world().abort(code)
    }

    pub fn broadcast_bytes(mut bytes: Vec<u8>) -> Vec<u8> {
        let world = SimpleCommunicator::world();
        let root = world.process_at_rank(0);
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        if len > 0 {
            root.broadcast_into(&mut bytes[..]);
        }
        bytes
    }

    pub fn gather_bytes(bytes: &[u8], processes: u32) -> Option<Vec<Vec<u8>>> {
        let world = SimpleCommunicator::world();
        if world.rank() == 0 {
            let mut all = vec![bytes.to_vec()];
            for p in 1..processes as i32 {
                let (data, _status) = world.process_at_rank(p).receive_vec::<u8>();
                all.push(data);
            }
            Some(all)
        } else {
            world.process_at_rank(0).send(bytes);
            None
        }
    }
}

//! Loader threads run at a lower CPU priority than the rank threads they feed.
//!
//! A rank thread stands for an accelerator: when its emulated compute ends it must reach the
//! step's barrier at once, as a GPU's step does not wait for the host's loader threads to
//! finish their time slices. On a host with fewer cores than busy reader threads (many ranks
//! per process), a rank thread that wakes at nice 0 among readers at nice 0 waits its turn in
//! the run queue, every rank's barrier waits for the last one to be scheduled, and the delay
//! shows as lost AU although every batch was ready (measured: retinanet_b200, 24 ranks on 2
//! cores, batch waits p90 15 us, AU 83%). At a higher nice value the readers still get every
//! cycle the ranks leave, so I/O throughput is unchanged when the CPU is not contended.

/// How much nicer than the rank threads loader threads are: the most there is (19). With it,
/// retinanet_b200 at 24 ranks on 2 cores reaches AU 94.7% (83% at nice 0, 92.8% at 10).
const LOADER_NICENESS: libc::c_int = 19;

/// Lowers the calling thread's priority by [`LOADER_NICENESS`]. On Linux `nice` changes only
/// the calling thread (NPTL threads are scheduled one by one); where it fails (a sandbox that
/// forbids it) the thread keeps its priority, which changes timing but not correctness.
pub(crate) fn lower_this_thread() {
    // SAFETY: nice(2) takes an integer and touches no memory of ours; it can only fail, and a
    // failure is harmless here (see above).
    unsafe {
        libc::nice(LOADER_NICENESS);
    }
}

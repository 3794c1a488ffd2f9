//! Loader threads run at a lower CPU priority than the rank threads they feed; every thread
//! asks for precise timers.
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

/// The timer slack asked for, nanoseconds: the least there is.
const TIMER_SLACK_NS: libc::c_ulong = 1;

/// Makes the timed waits of the calling thread, and of every thread it starts afterwards
/// (they inherit it), end as close to their deadline as the kernel can. Linux lets a normal
/// thread's timed wait end up to 50 us late (its timer slack): a preprocess time of tens of
/// microseconds, slept by several reader threads, would last twice what was asked, and
/// [`crate::CompensatedSleep`] shortens a sleep by at most half. Where it fails, waits keep
/// the default slack, which changes timing but not correctness.
pub fn precise_timers() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes integers and touches no memory of ours; it can
    // only fail, and a failure is harmless here (see above).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn precise_timers_set_the_least_slack_and_new_threads_inherit_it() {
        std::thread::spawn(|| {
            super::precise_timers();
            // SAFETY: PR_GET_TIMERSLACK takes no pointer; it returns the slack.
            let own = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
            assert_eq!(own, 1);
            let child = std::thread::spawn(|| {
                // SAFETY: as above.
                unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) }
            })
            .join()
            .unwrap();
            assert_eq!(child, 1);
        })
        .join()
        .unwrap();
    }
}

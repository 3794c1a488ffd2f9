//! The run's stop signal: one place every wait of a rank watches.
//!
//! A run stops for one of two causes: Ctrl-C, or a rank that failed. Either must end every wait
//! of every rank promptly (the compute and preprocess sleeps, the reader threads, the stagger
//! delay), and the cause must survive so the run reports the failing rank's error rather than
//! the "aborted" echoes of its peers. Polling loops read an atomic flag; sleeps wait on a
//! condition variable that [`StopSignal::stop`] notifies, so they wake at once rather than at
//! the end of a polling slice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why the run is stopping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// Ctrl-C (SIGINT) or SIGTERM.
    Interrupted,
    /// A rank failed; the reason names it and its error.
    Failed(String),
}

/// Shared by every rank and reader thread of a process. The first cause wins.
#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    cause: Mutex<Option<StopCause>>,
    wake: Condvar,
}

/// A sleep or wait ended because the run is stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

impl StopSignal {
    /// A signal that has not fired.
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Fires the signal with `cause`, unless it has already fired; wakes every sleeper.
    pub fn stop(&self, cause: StopCause) {
        let mut current = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        if current.is_none() {
            *current = Some(cause);
        }
        self.stopped.store(true, Ordering::SeqCst);
        self.wake.notify_all();
    }

    /// True once the signal has fired. Cheap: one atomic load, for hot loops.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// The cause the signal fired with, if it has.
    pub fn cause(&self) -> Option<StopCause> {
        self.cause.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// True when the run was interrupted (Ctrl-C), as opposed to stopped by a failing rank.
    pub fn was_interrupted(&self) -> bool {
        self.cause() == Some(StopCause::Interrupted)
    }

    /// The flag itself, for code that polls an `AtomicBool` (generation).
    pub fn flag(&self) -> &AtomicBool {
        &self.stopped
    }

    /// Sleeps `d` (any length: a sleep past the clock's range waits until stopped), returning
    /// early with [`Stopped`] as soon as the signal fires.
    pub fn sleep(&self, d: Duration) -> Result<(), Stopped> {
        let deadline = Instant::now().checked_add(d);
        let mut cause = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if cause.is_some() {
                return Err(Stopped);
            }
            // An hour at most per wait keeps every timeout far inside what the OS accepts.
            let left = match deadline {
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Ok(()),
                },
                None => Duration::MAX,
            };
            let slice = left.min(Duration::from_secs(3600));
            cause = self
                .wake
                .wait_timeout(cause, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Keeps this thread's core busy for `d` (the CPU work a preprocess time stands for),
    /// returning early with [`Stopped`] as soon as the signal fires. Written by hand: a spin
    /// on the clock is all it is; no crate offers a stoppable busy wait.
    pub fn busy(&self, d: Duration) -> Result<(), Stopped> {
        let started = Instant::now();
        while started.elapsed() < d {
            if self.is_stopped() {
                return Err(Stopped);
            }
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }
}

/// A sleep kept to its asked length on average: a timed wait ends late by the timer's slack and
/// the scheduler's delay (0.05-0.3 ms on this project's VM, per wait: 1-6% of a 5 ms step), so
/// each wait is shortened by the mean lateness of the previous ones (at most by half). The
/// emulated compute and preprocess times then last what was drawn plus the noise around that
/// lateness, not plus the lateness itself.
#[derive(Debug, Default)]
pub struct CompensatedSleep {
    /// Mean lateness of the last waits, nanoseconds (exponentially weighted).
    late_ns: f64,
}

impl CompensatedSleep {
    /// Sleeps about `d` on `stop` (which ends the sleep early).
    pub fn sleep(&mut self, stop: &StopSignal, d: Duration) -> Result<(), Stopped> {
        let shorten = Duration::from_nanos(self.late_ns as u64).min(d / 2);
        let ask = d - shorten;
        let started = Instant::now();
        stop.sleep(ask)?;
        let late = started.elapsed().saturating_sub(ask).as_nanos() as f64;
        self.late_ns = 0.8 * self.late_ns + 0.2 * late;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_sleep_ends_as_soon_as_the_signal_fires() {
        let stop = Arc::new(StopSignal::new());
        let sleeper = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let started = Instant::now();
                let result = stop.sleep(Duration::MAX);
                (result, started.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        stop.stop(StopCause::Failed("rank 1 failed".into()));
        let (result, took) = sleeper.join().unwrap();
        assert_eq!(result, Err(Stopped));
        assert!(took < Duration::from_secs(1), "{took:?}");
    }

    #[test]
    fn a_busy_wait_lasts_what_was_asked_and_ends_when_stopped() {
        let stop = StopSignal::new();
        let started = Instant::now();
        assert_eq!(stop.busy(Duration::from_micros(300)), Ok(()));
        assert!(started.elapsed() >= Duration::from_micros(300));
        stop.stop(StopCause::Interrupted);
        let started = Instant::now();
        assert_eq!(stop.busy(Duration::from_secs(600)), Err(Stopped));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn the_first_cause_wins() {
        let stop = StopSignal::new();
        stop.stop(StopCause::Failed("rank 3 failed: bad file".into()));
        stop.stop(StopCause::Interrupted);
        assert!(!stop.was_interrupted());
        assert_eq!(
            stop.cause(),
            Some(StopCause::Failed("rank 3 failed: bad file".into()))
        );
    }

    #[test]
    fn a_short_sleep_completes() {
        let stop = StopSignal::new();
        assert_eq!(stop.sleep(Duration::from_millis(5)), Ok(()));
        assert_eq!(stop.sleep(Duration::ZERO), Ok(()));
    }
}

//! The trace's clock: what a hot-path timestamp costs.
//!
//! A small-record run takes eight timestamps per sample (open, pread, close and the
//! `data.item` span, start and end each). `clock_gettime` through the vDSO costs about
//! 25 ns here, 200 ns per sample, which alone is 3 % of a 6 µs sample. Where the kernel
//! itself keeps time with the CPU's time-stamp counter (clocksource `tsc`, which it only
//! selects when the counter is invariant and synchronised across cores), reading that
//! counter directly costs about a third of that. Ticks are turned into nanoseconds when
//! the trace is written, with the rate measured over the whole run (two `CLOCK_MONOTONIC`
//! readings paired with two counter readings), so no rate has to be assumed for the trace.
//! Durations needed during the run (the read latencies `Traced::counting` records) use a
//! rate measured over the clock's first 2 ms. Elsewhere (other architectures, virtual machines whose kernel distrusts the
//! counter) stamps are `CLOCK_MONOTONIC` nanoseconds.

use std::time::Instant;

/// A point on a trace's clock: nanoseconds or counter ticks since the trace started,
/// depending on the clock. Take one with [`crate::Tracer::stamp`]; stamps of different
/// tracers do not mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Stamp(pub(crate) u64);

/// `CLOCK_MONOTONIC` in nanoseconds: the clock `Instant` reads, as a plain number.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_MONOTONIC exists on every Linux kernel, so the call only writes `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn ticks() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU and only reads the time-stamp counter; it
    // has no memory effects. The clock is only used when the kernel's clocksource is
    // `tsc` (see `Clock::start`), so the value is consistent across cores.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn ticks() -> u64 {
    mono_ns()
}

/// True when the kernel keeps time with the time-stamp counter.
fn kernel_trusts_tsc() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Clock {
    /// Time-stamp counter ticks since `base_tick`, which was read with `base_ns`;
    /// `ns_per_tick` is the rate measured when the clock started.
    Tsc {
        base_tick: u64,
        base_ns: u64,
        ns_per_tick: f64,
    },
    /// `CLOCK_MONOTONIC` nanoseconds since `base_ns`.
    Mono { base_ns: u64 },
}

impl Clock {
    /// Starts the clock now, on the counter when the kernel trusts it, and returns with it the
    /// `Instant` of its base: spans timed with `Instant`s are placed from that one, stamps
    /// from the clock's, and the three readings are taken back to back so that both kinds of
    /// event fall on one time line. (Reading the clocksource file between them once put every
    /// `Instant`-timed span about 20 us after the stamped calls it followed.)
    pub(crate) fn start() -> (Clock, Instant) {
        let tsc = kernel_trusts_tsc();
        let base = Instant::now();
        let base_ns = mono_ns();
        if !tsc {
            return (Clock::Mono { base_ns }, base);
        }
        let base_tick = ticks();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (dt, dn) = (ticks().wrapping_sub(base_tick), mono_ns() - base_ns);
        let clock = Clock::Tsc {
            base_tick,
            base_ns,
            ns_per_tick: if dt == 0 { 1.0 } else { dn as f64 / dt as f64 },
        };
        (clock, base)
    }

    /// `CLOCK_MONOTONIC` nanoseconds at the start (the base of every stamp).
    #[cfg(test)]
    pub(crate) fn base_ns(&self) -> u64 {
        match *self {
            Clock::Tsc { base_ns, .. } | Clock::Mono { base_ns } => base_ns,
        }
    }

    #[inline]
    pub(crate) fn now(&self) -> Stamp {
        match *self {
            Clock::Tsc { base_tick, .. } => Stamp(ticks().wrapping_sub(base_tick)),
            Clock::Mono { base_ns } => Stamp(mono_ns().saturating_sub(base_ns)),
        }
    }

    /// `units` of this clock (a difference of two stamps) in nanoseconds, at the rate
    /// measured when the clock started.
    #[inline]
    pub(crate) fn nanos(&self, units: u64) -> u64 {
        match *self {
            Clock::Mono { .. } => units,
            Clock::Tsc { ns_per_tick, .. } => (units as f64 * ns_per_tick) as u64,
        }
    }

    /// The stamp `ns` nanoseconds after `start` (at the rate measured when the clock
    /// started): the end of a call timed by another clock from `start` on.
    #[inline]
    pub(crate) fn after(&self, start: Stamp, ns: u64) -> Stamp {
        match *self {
            Clock::Mono { .. } => Stamp(start.0.saturating_add(ns)),
            Clock::Tsc { ns_per_tick, .. } => {
                Stamp(start.0.saturating_add((ns as f64 / ns_per_tick) as u64))
            }
        }
    }

    /// Nanoseconds per stamp unit, measured from the start until now.
    pub(crate) fn ns_per_unit(&self) -> f64 {
        match *self {
            Clock::Mono { .. } => 1.0,
            Clock::Tsc {
                base_tick, base_ns, ..
            } => {
                let (tick, ns) = (ticks(), mono_ns());
                let (dt, dn) = (tick.wrapping_sub(base_tick), ns.saturating_sub(base_ns));
                if dt == 0 || dn == 0 {
                    // Too short to measure: any rate maps the (zero-length) trace right.
                    1.0
                } else {
                    dn as f64 / dt as f64
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_during_the_run_are_nanoseconds() {
        let (clock, _) = Clock::start();
        let (a, mono_a) = (clock.now(), mono_ns());
        std::thread::sleep(std::time::Duration::from_millis(30));
        let (b, mono_b) = (clock.now(), mono_ns());
        let measured = clock.nanos(b.0 - a.0) as f64;
        let expected = (mono_b - mono_a) as f64;
        assert!(
            (measured - expected).abs() < expected * 0.01 + 50_000.0,
            "{measured} ns by the start-up rate vs {expected} ns by CLOCK_MONOTONIC"
        );
    }

    #[test]
    fn stamps_convert_to_the_monotonic_clock() {
        let (clock, _) = Clock::start();
        let a = clock.now();
        let mono_a = mono_ns() - clock.base_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = clock.now();
        let mono_b = mono_ns() - clock.base_ns();
        let rate = clock.ns_per_unit();
        let measured = (b.0 - a.0) as f64 * rate;
        let expected = (mono_b - mono_a) as f64;
        assert!(
            (measured - expected).abs() < expected * 0.01 + 50_000.0,
            "{measured} ns by the trace clock vs {expected} ns by CLOCK_MONOTONIC"
        );
    }
}

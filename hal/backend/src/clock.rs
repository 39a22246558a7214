//! The host clock the ABI's device-clock calibration speaks, and a sample of it paired with a
//! device's timestamp clock.
//!
//! The ABI names one host clock, `CLOCK_MONOTONIC` in nanoseconds, because it is the clock
//! the drivers' own calibration calls report (Vulkan's `VK_TIME_DOMAIN_CLOCK_MONOTONIC`,
//! OpenCL's `clGetDeviceAndHostTimer` and Level Zero's `zeDeviceGetGlobalTimestamps` on
//! Linux), and the one Rust's `Instant` reads there. A plugin and its host are separate
//! libraries with separate copies of this module; both read the same kernel clock, so their
//! nanoseconds agree.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A device's timestamp clock and the host's monotonic clock, read together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// The device's timestamp clock, in nanoseconds (the clock event timestamps are on).
    pub device_ns: u64,
    /// The host's monotonic clock at the same moment ([`host_now_ns`]).
    pub host_ns: u64,
    /// How far apart in time the two reads may lie, in nanoseconds.
    pub uncertainty_ns: u64,
}

impl ClockSample {
    /// The sample of a device whose timestamps are the host's own clock: the CPU backend, or
    /// a device driven from a host thread ([`HostEvent`](crate::HostEvent)).
    pub fn host() -> ClockSample {
        let now = host_now_ns();
        ClockSample {
            device_ns: now,
            host_ns: now,
            uncertainty_ns: 0,
        }
    }

    /// Calibrates a device clock that has no calibration call of its own: `mark` completes a
    /// timestamped command on an idle queue and returns its device time, which therefore lies
    /// between the host reads taken before and after it; the middle of that round trip is its
    /// host time, and half the round trip the uncertainty. The shortest of `tries` round trips
    /// is kept, so one preempted try does not spoil the sample.
    pub fn by_round_trip(tries: usize, mut mark: impl FnMut() -> crate::Result<u64>) -> crate::Result<ClockSample> {
        let mut best: Option<ClockSample> = None;
        for _ in 0..tries.max(1) {
            let before = host_now_ns();
            let device_ns = mark()?;
            let half = host_now_ns().saturating_sub(before) / 2;
            let sample = ClockSample {
                device_ns,
                host_ns: before + half,
                uncertainty_ns: half,
            };
            if best.is_none_or(|best| sample.uncertainty_ns < best.uncertainty_ns) {
                best = Some(sample);
            }
        }
        best.ok_or_else(|| crate::Error::internal("no clock sample was taken"))
    }

    /// The host `Instant` at which the device's clock read `device_ns`.
    pub fn to_instant(&self, device_ns: u64) -> Instant {
        instant_of_host_ns(self.to_host_ns(device_ns))
    }

    /// Where device time `device_ns` falls on the host's monotonic clock, in nanoseconds.
    pub fn to_host_ns(&self, device_ns: u64) -> i128 {
        i128::from(device_ns) + (i128::from(self.host_ns) - i128::from(self.device_ns))
    }
}

/// What a device whose events measure only the time between two of them (CUDA's and HIP's)
/// gives a [`ReferenceClock`].
pub trait ElapsedTimer {
    /// A raw timing event of the device.
    type Event: Copy;
    /// Records a timing event on an idle queue of the clock's own, and waits for it.
    fn mark(&self) -> crate::Result<Self::Event>;
    /// Nanoseconds from `from` to `to`, negative when `to` completed first.
    fn elapsed_ns(&self, from: Self::Event, to: Self::Event) -> crate::Result<i64>;
    /// Destroys an event [`mark`](ElapsedTimer::mark) made.
    fn destroy(&self, event: Self::Event);
}

/// A device clock for a device whose events measure only elapsed time: it counts from a
/// reference event whose host time a round trip fixed, so an event's timestamp is the
/// reference's plus the device's elapsed time from it. The reference moves forward now and
/// then, because elapsed times are single-precision milliseconds (a microsecond of
/// resolution up to about 16 seconds).
pub struct ReferenceClock<E> {
    reference: parking_lot::Mutex<Option<(E, u64)>>,
}

/// How far the reference may fall behind a reading before a newer mark replaces it.
const REFERENCE_SPAN_NS: u64 = 8_000_000_000;

impl<E: Copy> Default for ReferenceClock<E> {
    fn default() -> Self {
        ReferenceClock {
            reference: parking_lot::Mutex::new(None),
        }
    }
}

impl<E: Copy> ReferenceClock<E> {
    /// The device's clock read with the host's: the round trip of a mark, placed by its
    /// elapsed time from the reference (made by the first reading).
    pub fn sample<T: ElapsedTimer<Event = E>>(&self, timer: &T) -> crate::Result<ClockSample> {
        let mut slot = self.reference.lock();
        let (reference, reference_ns) = match *slot {
            Some(reference) => reference,
            None => {
                let before = host_now_ns();
                let event = timer.mark()?;
                let after = host_now_ns();
                let reference = (event, before + after.saturating_sub(before) / 2);
                *slot = Some(reference);
                reference
            }
        };
        let mut newest: Option<(E, u64)> = None;
        let sample = ClockSample::by_round_trip(3, || {
            let event = timer.mark()?;
            let elapsed = match timer.elapsed_ns(reference, event) {
                Ok(elapsed) => elapsed,
                Err(error) => {
                    timer.destroy(event);
                    return Err(error);
                }
            };
            let device_ns = reference_ns.saturating_add_signed(elapsed);
            if let Some((older, _)) = newest.replace((event, device_ns)) {
                timer.destroy(older);
            }
            Ok(device_ns)
        });
        if let Some((event, device_ns)) = newest {
            if sample.is_ok() && device_ns.saturating_sub(reference_ns) > REFERENCE_SPAN_NS {
                timer.destroy(reference);
                *slot = Some((event, device_ns));
            } else {
                timer.destroy(event);
            }
        }
        sample
    }

    /// When `event` completed, on this clock.
    pub fn timestamp<T: ElapsedTimer<Event = E>>(&self, timer: &T, event: E) -> crate::Result<u64> {
        let current = *self.reference.lock();
        let (reference, reference_ns) = match current {
            Some(reference) => reference,
            None => {
                self.sample(timer)?;
                let current = *self.reference.lock();
                current.ok_or_else(|| crate::Error::internal("the device clock has no reference event"))?
            }
        };
        Ok(reference_ns.saturating_add_signed(timer.elapsed_ns(reference, event)?))
    }

    /// Destroys the reference event: the device is going.
    pub fn release<T: ElapsedTimer<Event = E>>(&self, timer: &T) {
        if let Some((event, _)) = self.reference.lock().take() {
            timer.destroy(event);
        }
    }
}

/// The host's monotonic clock now, in nanoseconds.
pub fn host_now_ns() -> u64 {
    monotonic_ns()
}

/// Where `instant` falls on the host's monotonic clock, in nanoseconds.
pub fn host_ns_of(instant: Instant) -> u64 {
    let (origin, origin_ns) = origin();
    match instant.checked_duration_since(origin) {
        Some(after) => origin_ns.saturating_add(nanoseconds(after)),
        None => origin_ns.saturating_sub(nanoseconds(origin - instant)),
    }
}

/// The `Instant` at host monotonic time `host_ns`.
pub fn instant_of_host_ns(host_ns: i128) -> Instant {
    let (origin, origin_ns) = origin();
    let offset = host_ns - i128::from(origin_ns);
    let magnitude = Duration::from_nanos(u64::try_from(offset.unsigned_abs()).unwrap_or(u64::MAX));
    if offset >= 0 {
        origin.checked_add(magnitude).unwrap_or(origin)
    } else {
        origin.checked_sub(magnitude).unwrap_or(origin)
    }
}

fn nanoseconds(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// One `Instant` and the monotonic nanoseconds read right after it: `Instant` is opaque, so
/// conversions go through this pair (they agree to within the few tens of nanoseconds between
/// the two reads).
fn origin() -> (Instant, u64) {
    static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();
    *ORIGIN.get_or_init(|| {
        let instant = Instant::now();
        (instant, monotonic_ns())
    })
}

#[cfg(unix)]
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out pointer; CLOCK_MONOTONIC exists on every POSIX system xhal builds for.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    if status != 0 {
        return 0;
    }
    (now.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(now.tv_nsec as u64)
}

#[cfg(not(unix))]
fn monotonic_ns() -> u64 {
    // No CLOCK_MONOTONIC: the process's own monotonic clock, from its first read.
    static START: OnceLock<Instant> = OnceLock::new();
    nanoseconds(START.get_or_init(Instant::now).elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_host_nanoseconds_convert_both_ways() {
        let now = Instant::now();
        let ns = host_ns_of(now);
        let direct = host_now_ns();
        assert!(direct >= ns && direct - ns < 50_000_000, "{direct} vs {ns}");
        let back = instant_of_host_ns(i128::from(ns));
        let error = if back > now { back - now } else { now - back };
        assert!(error < Duration::from_micros(1), "{error:?}");
        let earlier = now - Duration::from_millis(3);
        assert_eq!(host_ns_of(earlier), ns - 3_000_000);
    }

    #[test]
    fn a_sample_places_device_times_on_the_host_clock() {
        let sample = ClockSample {
            device_ns: 1_000,
            host_ns: 5_000_000,
            uncertainty_ns: 10,
        };
        assert_eq!(sample.to_host_ns(1_500), 5_000_500);
        assert_eq!(sample.to_host_ns(0), 4_999_000);
        let host = ClockSample::host();
        assert_eq!(host.to_host_ns(42), 42);
    }

    /// A timer whose events are host times, as a device whose clock is the host's would give.
    struct HostTimer {
        destroyed: std::cell::Cell<usize>,
        marks: std::cell::Cell<usize>,
    }

    impl ElapsedTimer for HostTimer {
        type Event = u64;
        fn mark(&self) -> crate::Result<u64> {
            self.marks.set(self.marks.get() + 1);
            Ok(host_now_ns())
        }
        fn elapsed_ns(&self, from: u64, to: u64) -> crate::Result<i64> {
            Ok(to as i64 - from as i64)
        }
        fn destroy(&self, _event: u64) {
            self.destroyed.set(self.destroyed.get() + 1);
        }
    }

    #[test]
    fn a_reference_clock_places_relative_times_on_the_host_clock() {
        let timer = HostTimer {
            destroyed: std::cell::Cell::new(0),
            marks: std::cell::Cell::new(0),
        };
        let clock = ReferenceClock::default();
        let before = host_now_ns();
        let event = host_now_ns();
        let timestamp = clock.timestamp(&timer, event).expect("timestamp");
        let sample = clock.sample(&timer).expect("sample");
        // The device's clock is the host's, offset by where the reference was placed.
        let placed = sample.to_host_ns(timestamp);
        assert!((placed - i128::from(event)).abs() < 1_000_000, "{placed} vs {event}");
        assert!(placed >= i128::from(before) - 1_000_000);
        // Every mark but the reference was destroyed, and releasing destroys that too.
        assert_eq!(timer.destroyed.get(), timer.marks.get() - 1);
        clock.release(&timer);
        assert_eq!(timer.destroyed.get(), timer.marks.get());
    }

    #[test]
    fn a_round_trip_keeps_the_shortest_try_and_fails_with_its_mark() {
        let mut tries = 0;
        let sample = ClockSample::by_round_trip(3, || {
            tries += 1;
            if tries == 1 {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(host_now_ns())
        })
        .expect("the marks succeed");
        assert_eq!(tries, 3);
        assert!(sample.uncertainty_ns < 10_000_000, "{sample:?}");
        assert!(sample.to_host_ns(sample.device_ns).abs_diff(i128::from(sample.host_ns)) == 0);
        let failed = ClockSample::by_round_trip(2, || Err(crate::Error::unsupported("no marker")));
        assert!(failed.unwrap_err().message().contains("no marker"));
    }
}

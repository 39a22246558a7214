//! One thread for the process that stops compiled kernels: past their time limit, or when
//! their backend shuts down. Compiled code polls a cancel flag in its loops; a kernel runs on
//! the stream's own worker (and pool helpers), so something else must raise the flag.
//!
//! A launch registers for as long as it runs and unregisters before it returns; the watchdog
//! only ever touches a registration under the registry's lock, so what a registration points
//! to (on the launch's stack) outlives every use. It sleeps until the earliest deadline, at
//! most [`POLL`] while anything is registered (to ask whether a backend is shutting down),
//! and without end while nothing is.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How often a running launch's backend is asked whether it is shutting down.
const POLL: Duration = Duration::from_millis(50);

/// Why the watchdog stopped a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It ran past its deadline.
    Timeout,
    /// Its backend is shutting down.
    Shutdown,
}

const RUNNING: u8 = 0;
const TIMED_OUT: u8 = 1;
const SHUT_DOWN: u8 = 2;

struct Entry {
    id: u64,
    deadline: Option<Instant>,
    cancel: *const AtomicU32,
    cancelled: *const (dyn Fn() -> bool + Sync),
    stopped: *const AtomicU8,
}

// SAFETY: the pointers are used only under the registry's lock, while the registration that
// owns them is alive (it removes its entry under that lock before its referents go), and
// what they point to is `Sync`.
unsafe impl Send for Entry {}

#[derive(Default)]
struct Registry {
    entries: Vec<Entry>,
    next_id: u64,
    /// When the watchdog means to look next; `None` while it sleeps without end.
    next_look: Option<Instant>,
    started: bool,
}

struct Watchdog {
    registry: Mutex<Registry>,
    changed: Condvar,
}

fn watchdog() -> &'static Watchdog {
    static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| Watchdog {
        registry: Mutex::new(Registry::default()),
        changed: Condvar::new(),
    })
}

/// A launch being watched; dropping it ends the watch.
pub(crate) struct Watch {
    id: u64,
    stopped: Box<AtomicU8>,
}

impl Watch {
    /// Watches a launch until the returned guard drops: past `deadline`, or once `cancelled`
    /// says the backend is shutting down, `cancel` is set to 1. The caller keeps `cancel` and
    /// `cancelled` alive until the guard is dropped.
    pub(crate) fn start(deadline: Option<Instant>, cancel: &AtomicU32, cancelled: &(dyn Fn() -> bool + Sync)) -> Watch {
        let stopped = Box::new(AtomicU8::new(RUNNING));
        let this = watchdog();
        let mut registry = this.registry.lock();
        if !registry.started {
            let spawned = std::thread::Builder::new()
                .name("xhal-cpu-watchdog".to_string())
                .spawn(|| watchdog().run());
            registry.started = spawned.is_ok();
        }
        let id = registry.next_id;
        registry.next_id += 1;
        // SAFETY: only the lifetime is erased; `Drop` removes the entry under the lock before
        // the caller's `cancelled` can go.
        let cancelled: *const (dyn Fn() -> bool + Sync) =
            unsafe { std::mem::transmute(cancelled as *const (dyn Fn() -> bool + Sync)) };
        registry.entries.push(Entry {
            id,
            deadline,
            cancel,
            cancelled,
            stopped: &*stopped,
        });
        let look = deadline.map_or(Instant::now() + POLL, |deadline| deadline.min(Instant::now() + POLL));
        if registry.next_look.is_none_or(|next| look < next) {
            this.changed.notify_one();
        }
        Watch { id, stopped }
    }

    /// Why the watchdog stopped the launch, if it did.
    pub(crate) fn stopped(&self) -> Option<Stopped> {
        match self.stopped.load(Ordering::Acquire) {
            TIMED_OUT => Some(Stopped::Timeout),
            SHUT_DOWN => Some(Stopped::Shutdown),
            _ => None,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut registry = watchdog().registry.lock();
        if let Some(position) = registry.entries.iter().position(|entry| entry.id == self.id) {
            registry.entries.swap_remove(position);
        }
    }
}

impl Watchdog {
    fn run(&self) {
        let mut registry = self.registry.lock();
        loop {
            let now = Instant::now();
            let mut next: Option<Instant> = None;
            for entry in &registry.entries {
                // SAFETY: see `Entry`: the registration is alive while its entry is listed.
                let stopped = unsafe { &*entry.stopped };
                if stopped.load(Ordering::Relaxed) != RUNNING {
                    continue;
                }
                // SAFETY: as above.
                let shutting_down = || unsafe { (*entry.cancelled)() };
                let reason = if entry.deadline.is_some_and(|deadline| now >= deadline) {
                    TIMED_OUT
                } else if shutting_down() {
                    SHUT_DOWN
                } else {
                    RUNNING
                };
                if reason != RUNNING {
                    stopped.store(reason, Ordering::Release);
                    // SAFETY: as above.
                    unsafe { (*entry.cancel).store(1, Ordering::Release) };
                    continue;
                }
                let look = entry.deadline.map_or(now + POLL, |deadline| deadline.min(now + POLL));
                next = Some(next.map_or(look, |next| next.min(look)));
            }
            registry.next_look = next;
            match next {
                Some(when) => {
                    self.changed.wait_until(&mut registry, when);
                }
                None => self.changed.wait(&mut registry),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_past_its_deadline_is_cancelled_and_says_why() {
        let cancel = AtomicU32::new(0);
        let never = || false;
        let watch = Watch::start(Some(Instant::now() + Duration::from_millis(30)), &cancel, &never);
        let started = Instant::now();
        while cancel.load(Ordering::Acquire) == 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "the watchdog never fired");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(watch.stopped(), Some(Stopped::Timeout));
    }

    #[test]
    fn a_launch_of_a_backend_shutting_down_is_cancelled() {
        let cancel = AtomicU32::new(0);
        let shutting_down = std::sync::atomic::AtomicBool::new(false);
        let asked = || shutting_down.load(Ordering::Relaxed);
        let watch = Watch::start(None, &cancel, &asked);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cancel.load(Ordering::Acquire), 0, "nothing asked for a stop yet");
        shutting_down.store(true, Ordering::Relaxed);
        let started = Instant::now();
        while cancel.load(Ordering::Acquire) == 0 {
            assert!(started.elapsed() < Duration::from_secs(10), "the watchdog never fired");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(watch.stopped(), Some(Stopped::Shutdown));
    }

    #[test]
    fn a_finished_launch_is_left_alone() {
        let cancel = AtomicU32::new(0);
        let never = || false;
        let watch = Watch::start(Some(Instant::now() + Duration::from_millis(20)), &cancel, &never);
        drop(watch);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(cancel.load(Ordering::Acquire), 0);
    }
}

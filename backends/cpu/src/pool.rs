//! The threads that help run a launch's workgroups, started once per process and kept: a
//! launch costs a hand-off to threads that are already there, never a thread start.
//!
//! One job runs at a time per priority level, and there are two: the launches of ordinary
//! streams and those of urgent ones (a stream made with priority -1). The thread that submits
//! a job (a stream's worker) works on it too, and helpers join while it lasts; a launch that
//! finds its level's job slot busy runs on its own thread alone, which only means less
//! parallelism. Urgent work runs first, as a GPU's scheduler prefers a high-priority stream's
//! blocks: while an urgent job runs, an ordinary job stops at its next chunk of workgroups
//! ([`Pool::should_leave`]): its helpers leave it for the urgent job (and come back to it
//! later), and its submitter waits until the urgent job is done. An urgent job never waits for
//! an ordinary one (a launch depends on other streams' work only between operations, through
//! events), so this cannot deadlock. The job is borrowed from the submitter's stack: the submitter closes the job
//! to new helpers and waits for the ones inside it before it returns, which is what makes
//! lending it to other threads sound.

use parking_lot::{Condvar, Mutex};
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A job as the helpers see it: the submitter's closure with its lifetime erased.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn() + Sync));

// SAFETY: the closure is `Sync`, and the submitter keeps it alive until every helper that
// took the pointer has finished with it (see `Pool::run`).
unsafe impl Send for JobRef {}

/// The priority levels, as indices of `State::slots`.
const ORDINARY: usize = 0;
const URGENT: usize = 1;

/// One level's job.
#[derive(Default)]
struct Slot {
    job: Option<JobRef>,
    /// Bumped for every job, so a helper joins each job at most once (unless it left early).
    generation: u64,
    /// Helpers that may still join the current job.
    wanted: usize,
    /// Helpers inside the current job.
    running: usize,
    /// A helper's panic, handed to the submitter to raise on its own thread.
    panic: Option<Box<dyn std::any::Any + Send>>,
    /// The submitter has finished its part and takes no helper back.
    closed: bool,
}

#[derive(Default)]
struct State {
    slots: [Slot; 2],
    /// Helpers started so far.
    started: usize,
}

/// The process's pool of helper threads.
pub(crate) struct Pool {
    state: Mutex<State>,
    job_posted: Condvar,
    helper_done: Condvar,
    /// Whether `slots[URGENT]` holds a job, readable without the lock.
    urgent_running: AtomicBool,
    /// When the last urgent job ended, in nanoseconds since `epoch`.
    urgent_ended_at: AtomicU64,
    epoch: Instant,
    /// Signalled when an urgent job is posted or ends, for ordinary jobs paused for it.
    urgent_changed: Condvar,
}

/// How long an ordinary job stays paused after an urgent job ends, for the urgent stream's
/// next launch: an urgent stream's launches follow each other with a few microseconds of host
/// work between them, and an ordinary job that resumed in that gap would hold the helpers for
/// a whole chunk of workgroups. Pauses are bounded by this and by the urgent job, so an
/// urgent stream waiting for an ordinary one (through an event) only waits this much longer.
const URGENT_GRACE: Duration = Duration::from_micros(500);

thread_local! {
    /// The level of the jobs this thread submits: set once by an urgent stream's worker.
    static SUBMITS_URGENT: Cell<bool> = const { Cell::new(false) };
    /// While a helper runs an ordinary job: whether it was asked to leave it.
    static HELPING: Cell<Helping> = const { Cell::new(Helping::No) };
    /// The urgent job this helper joined last, which it cannot join again.
    static JOINED_URGENT: Cell<u64> = const { Cell::new(0) };
    /// Whether this thread is running its own ordinary job (as its submitter).
    static SUBMITTING_ORDINARY: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as an ordinary job's submitter while it lives.
struct SubmittingOrdinary;

impl SubmittingOrdinary {
    fn enter() -> SubmittingOrdinary {
        SUBMITTING_ORDINARY.with(|cell| cell.set(true));
        SubmittingOrdinary
    }
}

impl Drop for SubmittingOrdinary {
    fn drop(&mut self) {
        SUBMITTING_ORDINARY.with(|cell| cell.set(false));
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Helping {
    No,
    Ordinary,
    Urgent,
    /// Helping an ordinary job, and told to leave it for an urgent one.
    Leaving,
}

/// Makes the calling thread's launches urgent (or ordinary again): a stream's worker calls it
/// once, with the stream's priority.
pub(crate) fn submit_as_urgent(urgent: bool) {
    SUBMITS_URGENT.with(|cell| cell.set(urgent));
}

impl Pool {
    /// The pool, made on first use.
    pub(crate) fn get() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool {
            state: Mutex::new(State::default()),
            job_posted: Condvar::new(),
            helper_done: Condvar::new(),
            urgent_running: AtomicBool::new(false),
            urgent_ended_at: AtomicU64::new(0),
            epoch: Instant::now(),
            urgent_changed: Condvar::new(),
        })
    }

    /// Threads one job may use: the submitter and a helper per further core.
    pub(crate) fn threads() -> usize {
        static THREADS: OnceLock<usize> = OnceLock::new();
        *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
    }

    /// Jobs call it between chunks of work. While an urgent job runs, and for
    /// `URGENT_GRACE` after one ends, it pauses an ordinary job: a helper of one leaves it
    /// (true: the job returns) when the urgent job wants helpers and waits otherwise, the
    /// submitter waits. Submitters and helpers of urgent jobs pass straight through.
    pub(crate) fn should_leave(&self) -> bool {
        let helping = HELPING.with(Cell::get);
        let ordinary_helper = helping == Helping::Ordinary;
        let ordinary_submitter = helping == Helping::No && SUBMITTING_ORDINARY.with(Cell::get);
        if !(ordinary_helper || ordinary_submitter) {
            return helping == Helping::Leaving;
        }
        if !self.urgent_running.load(Ordering::Relaxed) && self.grace_left().is_zero() {
            return false;
        }
        let mut state = self.state.lock();
        loop {
            let urgent = &state.slots[URGENT];
            if ordinary_helper
                && urgent.job.is_some()
                && urgent.wanted > 0
                && urgent.generation != JOINED_URGENT.with(Cell::get)
            {
                HELPING.with(|cell| cell.set(Helping::Leaving));
                return true;
            }
            if urgent.job.is_some() {
                self.urgent_changed.wait(&mut state);
                continue;
            }
            let grace = self.grace_left();
            if grace.is_zero() {
                return false;
            }
            self.urgent_changed.wait_for(&mut state, grace);
        }
    }

    fn nanoseconds(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// What is left of the pause after the last urgent job; zero when none ever ran.
    fn grace_left(&self) -> Duration {
        let ended = self.urgent_ended_at.load(Ordering::Relaxed);
        if ended == 0 {
            return Duration::ZERO;
        }
        URGENT_GRACE.saturating_sub(Duration::from_nanos(self.nanoseconds().saturating_sub(ended)))
    }

    /// Runs `job` on this thread and on up to `helpers` pool threads at once, and returns when
    /// every thread that ran it has finished. `job` must split its own work (it is called once
    /// per thread) and stop when there is none left, or when [`should_leave`](Pool::should_leave)
    /// says so.
    pub(crate) fn run(&'static self, job: &(dyn Fn() + Sync), helpers: usize) {
        let level = if SUBMITS_URGENT.with(Cell::get) {
            URGENT
        } else {
            ORDINARY
        };
        let _ordinary = (level == ORDINARY).then(SubmittingOrdinary::enter);
        let helpers = helpers.min(Self::threads().saturating_sub(1));
        if helpers == 0 || !self.post(job, helpers, level) {
            job();
            return;
        }
        let submitted = catch_unwind(AssertUnwindSafe(job));
        let helper_panic = {
            let mut state = self.state.lock();
            // No helper joins (or comes back) from here on; wait for those inside the job.
            state.slots[level].wanted = 0;
            state.slots[level].closed = true;
            while state.slots[level].running > 0 {
                self.helper_done.wait(&mut state);
            }
            state.slots[level].job = None;
            if level == URGENT {
                self.urgent_running.store(false, Ordering::Relaxed);
                self.urgent_ended_at.store(self.nanoseconds(), Ordering::Relaxed);
                self.urgent_changed.notify_all();
            }
            state.slots[level].panic.take()
        };
        if let Err(panic) = submitted {
            resume_unwind(panic);
        }
        if let Some(panic) = helper_panic {
            resume_unwind(panic);
        }
    }

    /// Makes `job` the current job of `level` for `helpers` helpers, starting helpers the pool
    /// lacks; false when another job holds the level.
    fn post(&'static self, job: &(dyn Fn() + Sync), helpers: usize, level: usize) -> bool {
        let mut state = self.state.lock();
        if state.slots[level].job.is_some() {
            return false;
        }
        while state.started < helpers {
            let spawned = std::thread::Builder::new()
                .name("xhal-cpu-kernel".to_string())
                .spawn(move || self.help());
            // A thread the host cannot start only means less parallelism.
            if spawned.is_err() {
                break;
            }
            state.started += 1;
        }
        if state.started == 0 {
            return false;
        }
        // SAFETY: only the lifetime is erased; `run` keeps `job` borrowed until no helper
        // holds the pointer (`running` is back to 0 after `wanted` was set to 0).
        let erased: *const (dyn Fn() + Sync) = unsafe { std::mem::transmute(job as *const (dyn Fn() + Sync)) };
        let wanted = helpers.min(state.started);
        let slot = &mut state.slots[level];
        slot.job = Some(JobRef(erased));
        slot.generation += 1;
        slot.wanted = wanted;
        slot.closed = false;
        if level == URGENT {
            self.urgent_running.store(true, Ordering::Relaxed);
            self.urgent_changed.notify_all();
        }
        self.job_posted.notify_all();
        true
    }

    /// A helper's life: join each job once while it wants helpers, the urgent one first, then
    /// sleep.
    fn help(&self) {
        let mut joined = [0u64; 2];
        let mut state = self.state.lock();
        loop {
            let ready = |state: &State, level: usize| {
                let slot = &state.slots[level];
                slot.job.filter(|_| slot.wanted > 0 && slot.generation != joined[level])
            };
            let (level, job) = match (ready(&state, URGENT), ready(&state, ORDINARY)) {
                (Some(job), _) => (URGENT, job),
                (None, Some(job)) => (ORDINARY, job),
                (None, None) => {
                    self.job_posted.wait(&mut state);
                    continue;
                }
            };
            let slot = &mut state.slots[level];
            joined[level] = slot.generation;
            slot.wanted -= 1;
            slot.running += 1;
            if level == URGENT {
                JOINED_URGENT.with(|joined_urgent| joined_urgent.set(joined[URGENT]));
            }
            drop(state);
            HELPING.with(|helping| {
                helping.set(if level == URGENT {
                    Helping::Urgent
                } else {
                    Helping::Ordinary
                })
            });
            // SAFETY: the submitter keeps the job alive until `running` drops back to 0.
            let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)() }));
            let left = HELPING.with(|helping| helping.replace(Helping::No)) == Helping::Leaving;
            state = self.state.lock();
            let slot = &mut state.slots[level];
            if let Err(panic) = result {
                slot.panic.get_or_insert(panic);
            }
            slot.running -= 1;
            if left && !slot.closed && slot.generation == joined[level] {
                // Back to the ordinary job after the urgent one, unless its submitter has
                // finished its part by then.
                slot.wanted += 1;
                joined[level] = 0;
            }
            if state.slots[level].running == 0 {
                self.helper_done.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_item_is_done_once_whatever_the_threads() {
        let next = AtomicUsize::new(0);
        let done: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
        let job = || loop {
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= done.len() {
                return;
            }
            done[item].fetch_add(1, Ordering::Relaxed);
        };
        for _ in 0..50 {
            next.store(0, Ordering::Relaxed);
            for item in &done {
                item.store(0, Ordering::Relaxed);
            }
            Pool::get().run(&job, 8);
            assert!(done.iter().all(|item| item.load(Ordering::Relaxed) == 1));
        }
    }

    /// A job over `items` that sleeps `pause` per item, leaves when the pool asks, and notes
    /// which items ran on a helper thread.
    fn counted_job<'a>(
        items: &'a [AtomicUsize],
        next: &'a AtomicUsize,
        on_helper: &'a AtomicUsize,
        pause: std::time::Duration,
    ) -> impl Fn() + Sync + 'a {
        move || loop {
            if Pool::get().should_leave() {
                return;
            }
            let item = next.fetch_add(1, Ordering::Relaxed);
            if item >= items.len() {
                return;
            }
            items[item].fetch_add(1, Ordering::Relaxed);
            if std::thread::current().name() == Some("xhal-cpu-kernel") {
                on_helper.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(pause);
        }
    }

    #[test]
    fn an_urgent_job_pauses_an_ordinary_one_and_takes_its_helpers_and_both_finish() {
        if Pool::threads() < 2 {
            eprintln!("one core: the pool has no helper for an urgent job to take");
            return;
        }
        // Other tests' launches share the pool: an attempt counts once a helper worked on this
        // test's ordinary job before the urgent one was posted.
        for _attempt in 0..20 {
            let pause = std::time::Duration::from_millis(2);
            let ordinary_items: Vec<AtomicUsize> = (0..400).map(|_| AtomicUsize::new(0)).collect();
            let (ordinary_next, ordinary_on_helper) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let urgent_items: Vec<AtomicUsize> = (0..100).map(|_| AtomicUsize::new(0)).collect();
            let (urgent_next, urgent_on_helper) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let mut helped = false;
            let mut ordinary_during_urgent = 0;
            std::thread::scope(|scope| {
                let ordinary = scope.spawn(|| {
                    Pool::get().run(
                        &counted_job(&ordinary_items, &ordinary_next, &ordinary_on_helper, pause),
                        8,
                    )
                });
                while ordinary_on_helper.load(Ordering::Relaxed) == 0 && !ordinary.is_finished() {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                helped = ordinary_on_helper.load(Ordering::Relaxed) > 0 && !ordinary.is_finished();
                let ordinary_before = ordinary_next.load(Ordering::Relaxed);
                let urgent = scope.spawn(|| {
                    submit_as_urgent(true);
                    Pool::get().run(&counted_job(&urgent_items, &urgent_next, &urgent_on_helper, pause), 8);
                    ordinary_next.load(Ordering::Relaxed)
                });
                ordinary_during_urgent = urgent.join().unwrap().saturating_sub(ordinary_before);
            });
            assert!(ordinary_items.iter().all(|item| item.load(Ordering::Relaxed) == 1));
            assert!(urgent_items.iter().all(|item| item.load(Ordering::Relaxed) == 1));
            if helped {
                assert!(
                    urgent_on_helper.load(Ordering::Relaxed) > 0,
                    "no helper left the ordinary job for the urgent one"
                );
                // The urgent job's 100 items take about 100 ms on two threads; an ordinary
                // job that went on meanwhile would have done about 50 of its own.
                assert!(
                    ordinary_during_urgent < 10,
                    "the ordinary job did {ordinary_during_urgent} items while the urgent one ran"
                );
                return;
            }
        }
        panic!("in 20 attempts, no helper ever joined the ordinary job");
    }

    #[test]
    fn a_helper_panic_reaches_the_submitter_and_the_pool_goes_on() {
        let calls = AtomicUsize::new(0);
        let job = || {
            if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                panic!("a helper's kernel panicked");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| Pool::get().run(&job, 1)));
        // A helper joins only when no other test's job holds the pool.
        if calls.load(Ordering::SeqCst) >= 2 {
            assert!(outcome.is_err(), "the second caller of the job panicked");
        }
        let ran = AtomicUsize::new(0);
        Pool::get().run(
            &|| {
                ran.fetch_add(1, Ordering::SeqCst);
            },
            1,
        );
        assert!(ran.load(Ordering::SeqCst) >= 1);
    }
}

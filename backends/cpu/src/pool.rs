//! The threads that help run a launch's workgroups, started once per process and kept: a
//! launch costs a hand-off to threads that are already there, never a thread start.
//!
//! One job runs at a time. The thread that submits it (a stream's worker) works on it too, and
//! helpers join while it lasts; a launch that finds the pool busy runs on its own thread alone,
//! which only means less parallelism. The job is borrowed from the submitter's stack: the
//! submitter closes the job to new helpers and waits for the ones inside it before it returns,
//! which is what makes lending it to other threads sound.

use parking_lot::{Condvar, Mutex};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// A job as the helpers see it: the submitter's closure with its lifetime erased.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn() + Sync));

// SAFETY: the closure is `Sync`, and the submitter keeps it alive until every helper that
// took the pointer has finished with it (see `Pool::run`).
unsafe impl Send for JobRef {}

#[derive(Default)]
struct State {
    job: Option<JobRef>,
    /// Bumped for every job, so a helper joins each job at most once.
    generation: u64,
    /// Helpers that may still join the current job.
    wanted: usize,
    /// Helpers inside the current job.
    running: usize,
    /// A helper's panic, handed to the submitter to raise on its own thread.
    panic: Option<Box<dyn std::any::Any + Send>>,
    /// Helpers started so far.
    started: usize,
}

/// The process's pool of helper threads.
pub(crate) struct Pool {
    state: Mutex<State>,
    job_posted: Condvar,
    helper_done: Condvar,
}

impl Pool {
    /// The pool, made on first use.
    pub(crate) fn get() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool {
            state: Mutex::new(State::default()),
            job_posted: Condvar::new(),
            helper_done: Condvar::new(),
        })
    }

    /// Threads one job may use: the submitter and a helper per further core.
    pub(crate) fn threads() -> usize {
        static THREADS: OnceLock<usize> = OnceLock::new();
        *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
    }

    /// Runs `job` on this thread and on up to `helpers` pool threads at once, and returns when
    /// every thread that ran it has finished. `job` must split its own work (it is called once
    /// per thread) and stop when there is none left.
    pub(crate) fn run(&'static self, job: &(dyn Fn() + Sync), helpers: usize) {
        let helpers = helpers.min(Self::threads().saturating_sub(1));
        if helpers == 0 || !self.post(job, helpers) {
            job();
            return;
        }
        let submitted = catch_unwind(AssertUnwindSafe(job));
        let helper_panic = {
            let mut state = self.state.lock();
            // No helper joins from here on; wait for those inside the job.
            state.wanted = 0;
            while state.running > 0 {
                self.helper_done.wait(&mut state);
            }
            state.job = None;
            state.panic.take()
        };
        if let Err(panic) = submitted {
            resume_unwind(panic);
        }
        if let Some(panic) = helper_panic {
            resume_unwind(panic);
        }
    }

    /// Makes `job` the current job for `helpers` helpers, starting helpers the pool lacks;
    /// false when another job holds the pool.
    fn post(&'static self, job: &(dyn Fn() + Sync), helpers: usize) -> bool {
        let mut state = self.state.lock();
        if state.job.is_some() {
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
        state.job = Some(JobRef(erased));
        state.generation += 1;
        state.wanted = helpers.min(state.started);
        self.job_posted.notify_all();
        true
    }

    /// A helper's life: join each job once while it wants helpers, then sleep.
    fn help(&self) {
        let mut joined = 0u64;
        let mut state = self.state.lock();
        loop {
            let job = match state.job {
                Some(job) if state.wanted > 0 && state.generation != joined => job,
                _ => {
                    self.job_posted.wait(&mut state);
                    continue;
                }
            };
            joined = state.generation;
            state.wanted -= 1;
            state.running += 1;
            drop(state);
            // SAFETY: the submitter keeps the job alive until `running` drops back to 0.
            let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*job.0)() }));
            state = self.state.lock();
            if let Err(panic) = result {
                state.panic.get_or_insert(panic);
            }
            state.running -= 1;
            if state.running == 0 {
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

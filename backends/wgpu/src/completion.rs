//! One-shot completion flags that wgpu callbacks set and the host waits on.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;
use xhal_backend::{Error, Result};

use crate::device::DeviceShared;

/// Set once, from a wgpu callback (work done, buffer mapped), with how it ended.
#[derive(Debug, Default)]
pub(crate) struct Completion {
    outcome: Mutex<Option<Result<()>>>,
    done: Condvar,
}

impl Completion {
    pub(crate) fn new() -> Arc<Completion> {
        Arc::new(Completion::default())
    }

    pub(crate) fn complete(&self, outcome: Result<()>) {
        *self.outcome.lock() = Some(outcome);
        self.done.notify_all();
    }

    /// The outcome, if it is known yet.
    pub(crate) fn peek(&self) -> Option<Result<()>> {
        self.outcome.lock().clone()
    }

    /// Blocks until the outcome is known. wgpu runs callbacks only inside `Device::poll`,
    /// possibly on another thread that polls at the same time, so this both waits for a
    /// notification and keeps polling.
    pub(crate) fn wait(&self, device: &DeviceShared) -> Result<()> {
        loop {
            {
                let mut outcome = self.outcome.lock();
                if let Some(outcome) = outcome.as_ref() {
                    return outcome.clone();
                }
                self.done.wait_for(&mut outcome, Duration::from_millis(1));
                if let Some(outcome) = outcome.as_ref() {
                    return outcome.clone();
                }
            }
            device.check_alive()?;
            device.wait(None)?;
        }
    }
}

/// The first error among completions that are known, and whether all are known.
pub(crate) fn settled(completions: &[Arc<Completion>]) -> (bool, Option<Error>) {
    let mut all = true;
    let mut first_error = None;
    for completion in completions {
        match completion.peek() {
            None => all = false,
            Some(Err(error)) if first_error.is_none() => first_error = Some(error),
            Some(_) => {}
        }
    }
    (all, first_error)
}

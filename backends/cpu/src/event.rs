//! Events: points in a stream that the host and other streams wait for.
//!
//! Each record makes a fresh one-shot [`Signal`] and makes it the event's latest. Waits,
//! queries and host synchronisation take the latest signal *at the time of the call* and
//! hold on to it, so re-recording an event never changes what an earlier wait waits for,
//! and signals that complete out of order (records on two streams) never confuse anyone.
//!
//! A record always completes, even on a stream that has failed, so nothing waiting on an
//! event can hang; it then carries the stream's error to whoever waits.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Instant;
use xhal_core::{Error, Result};

/// How a record completed.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub(crate) completed_at: Instant,
    pub(crate) error: Option<Error>,
}

/// One record of an event: set once, by the worker that reaches it.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    outcome: Mutex<Option<Outcome>>,
    completed: Condvar,
}

impl Signal {
    pub(crate) fn complete(&self, error: Option<Error>) {
        let mut outcome = self.outcome.lock();
        *outcome = Some(Outcome {
            completed_at: Instant::now(),
            error,
        });
        self.completed.notify_all();
    }

    pub(crate) fn wait(&self) -> Outcome {
        let mut outcome = self.outcome.lock();
        loop {
            if let Some(done) = outcome.as_ref() {
                return done.clone();
            }
            self.completed.wait(&mut outcome);
        }
    }

    pub(crate) fn peek(&self) -> Option<Outcome> {
        self.outcome.lock().clone()
    }
}

/// An event handle's object.
#[derive(Debug)]
pub(crate) struct Event {
    id: u64,
    device_index: u32,
    timing: bool,
    latest: Mutex<Option<Arc<Signal>>>,
}

impl Event {
    pub(crate) fn new(id: u64, device_index: u32, timing: bool) -> Event {
        Event {
            id,
            device_index,
            timing,
            latest: Mutex::new(None),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn device_index(&self) -> u32 {
        self.device_index
    }

    /// Starts a new record; the caller must enqueue an operation that completes the signal.
    pub(crate) fn begin_record(&self) -> Arc<Signal> {
        let signal = Arc::new(Signal::default());
        *self.latest.lock() = Some(Arc::clone(&signal));
        signal
    }

    /// The most recent record, if any.
    pub(crate) fn latest(&self) -> Option<Arc<Signal>> {
        self.latest.lock().clone()
    }

    /// True when the latest record completed, or none was made; the error a failed stream
    /// passed on through the record otherwise.
    pub(crate) fn query(&self) -> Result<bool> {
        let Some(signal) = self.latest() else {
            return Ok(true);
        };
        match signal.peek() {
            None => Ok(false),
            Some(Outcome { error: Some(error), .. }) => Err(error),
            Some(Outcome { error: None, .. }) => Ok(true),
        }
    }

    /// Blocks the calling thread until the latest record completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.latest().map(|signal| signal.wait()) {
            Some(Outcome { error: Some(error), .. }) => Err(error),
            _ => Ok(()),
        }
    }

    /// Nanoseconds from `start`'s latest record completing to `end`'s.
    ///
    /// Misuse is `InvalidArgument`, never `Unsupported` (the device does support timing):
    /// an event created without timing, one never recorded, one whose latest record has not
    /// completed yet ("not yet complete"), or an `end` that completed before `start`.
    pub(crate) fn elapsed_nanoseconds(start: &Event, end: &Event) -> Result<u64> {
        let started = start.timed_outcome("start")?;
        let ended = end.timed_outcome("end")?;
        let elapsed = ended
            .completed_at
            .checked_duration_since(started.completed_at)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "end event {:#x} completed before start event {:#x}",
                    end.id, start.id
                ))
            })?;
        Ok(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    fn timed_outcome(&self, role: &str) -> Result<Outcome> {
        if !self.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {:#x} was created without timing; create it with timing to measure elapsed time",
                self.id
            )));
        }
        let Some(signal) = self.latest() else {
            return Err(Error::invalid_argument(format!(
                "{role} event {:#x} was never recorded",
                self.id
            )));
        };
        match signal.peek() {
            None => Err(Error::invalid_argument(format!(
                "{role} event {:#x}: event not yet complete",
                self.id
            ))),
            Some(Outcome { error: Some(error), .. }) => Err(error),
            Some(outcome) => Ok(outcome),
        }
    }
}

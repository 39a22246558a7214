//! Events: points in a stream that the host and other streams wait for.
//!
//! Each record makes a fresh one-shot [`Signal`]; waits and queries take the latest signal at
//! the time of the call, so re-recording an event never changes what an earlier wait waits for.
//!
//! VENDOR: a device with hardware events keeps the driver's event here (created in
//! `Event::new`, recorded by the stream, destroyed in `Drop`). Timing comes from the device's
//! clock where it has one; `elapsed_nanoseconds` must refuse, with `InvalidArgument`, an event
//! created without timing, one never recorded, or one not yet complete.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Instant;
use xhal_core::{Error, Result};

/// One record of an event, completed once by the stream that reaches it.
#[derive(Default)]
pub(crate) struct Signal {
    /// When it completed, and the error of a failed stream it carries.
    outcome: Mutex<Option<(Instant, Option<Error>)>>,
    completed: Condvar,
}

impl Signal {
    pub(crate) fn complete(&self, error: Option<Error>) {
        *self.outcome.lock() = Some((Instant::now(), error));
        self.completed.notify_all();
    }

    /// Blocks until complete; the error it carries, if any.
    pub(crate) fn wait(&self) -> Option<Error> {
        let mut outcome = self.outcome.lock();
        loop {
            if let Some((_, error)) = outcome.as_ref() {
                return error.clone();
            }
            self.completed.wait(&mut outcome);
        }
    }

    fn peek(&self) -> Option<(Instant, Option<Error>)> {
        self.outcome.lock().clone()
    }
}

/// An event handle's object.
pub(crate) struct Event {
    id: u64,
    timing: bool,
    latest: Mutex<Option<Arc<Signal>>>,
}

impl Event {
    pub(crate) fn new(id: u64, timing: bool) -> Event {
        Event {
            id,
            timing,
            latest: Mutex::new(None),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Starts a record; the caller enqueues the command that completes it.
    pub(crate) fn begin_record(&self) -> Arc<Signal> {
        let signal = Arc::new(Signal::default());
        *self.latest.lock() = Some(Arc::clone(&signal));
        signal
    }

    pub(crate) fn latest(&self) -> Option<Arc<Signal>> {
        self.latest.lock().clone()
    }

    /// True when the latest record completed, or none was made; the error a failed stream
    /// passed on through the record otherwise.
    pub(crate) fn query(&self) -> Result<bool> {
        match self.latest().map(|signal| signal.peek()) {
            None => Ok(true),
            Some(None) => Ok(false),
            Some(Some((_, Some(error)))) => Err(error),
            Some(Some((_, None))) => Ok(true),
        }
    }

    /// Blocks the calling thread until the latest record completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.latest().and_then(|signal| signal.wait()) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Nanoseconds from `start`'s latest record completing to `end`'s.
    pub(crate) fn elapsed_nanoseconds(start: &Event, end: &Event) -> Result<u64> {
        let started = start.completed_at("start")?;
        let ended = end.completed_at("end")?;
        let elapsed = ended.checked_duration_since(started).ok_or_else(|| {
            Error::invalid_argument(format!(
                "end event {:#x} completed before start event {:#x}",
                end.id, start.id
            ))
        })?;
        Ok(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    fn completed_at(&self, role: &str) -> Result<Instant> {
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
            Some((_, Some(error))) => Err(error),
            Some((completed_at, None)) => Ok(completed_at),
        }
    }
}

//! Events: the submission a record made, and the completions it waits for.

use parking_lot::Mutex;
use std::sync::Arc;
use xhal_core::{Error, Result};

use crate::device::DeviceShared;
use crate::stream::Signal;

/// An event handle's object. Each record replaces the latest signal; waits and queries take
/// the signal current at the time of the call.
pub(crate) struct Event {
    pub(crate) id: u64,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) timing: bool,
    latest: Mutex<Option<Signal>>,
}

impl Event {
    pub(crate) fn new(id: u64, device: Arc<DeviceShared>, timing: bool) -> Event {
        Event {
            id,
            device,
            timing,
            latest: Mutex::new(None),
        }
    }

    pub(crate) fn set_latest(&self, signal: Signal) {
        *self.latest.lock() = Some(signal);
    }

    pub(crate) fn latest(&self) -> Option<Signal> {
        self.latest.lock().clone()
    }

    pub(crate) fn query(&self) -> Result<bool> {
        let Some(signal) = self.latest() else {
            return Ok(true);
        };
        match signal.query(&self.device)? {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(error)) => Err(self.failed(error)),
        }
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.latest() {
            None => Ok(()),
            Some(signal) => signal.wait(&self.device).map_err(|error| self.failed(error)),
        }
    }

    /// The device clock at the latest record, which must have completed.
    pub(crate) fn completed_timestamp(&self) -> Result<u64> {
        let Some(signal) = self.latest() else {
            return Err(Error::invalid_argument(format!(
                "event {:#x} was never recorded, so it has no time",
                self.id
            )));
        };
        if !signal.is_settled() {
            self.device.poll()?;
        }
        let ticks = signal.timestamp.as_ref().and_then(|slot| *slot.lock());
        ticks.ok_or_else(|| {
            Error::invalid_argument(format!(
                "event {:#x} has not completed yet; wait for it before asking for elapsed time",
                self.id
            ))
        })
    }

    fn failed(&self, error: Error) -> Error {
        error.context(format!("event {:#x} completed with an error", self.id))
    }
}

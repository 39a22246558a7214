//! Events: points in a stream that other streams and the host can wait for.

use crate::backend::EventHandle;
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct EventShared {
    device: Arc<DeviceShared>,
    handle: EventHandle,
    timing: bool,
    /// Set by [`Event::destroy`]; the backend object goes when queued work no longer holds it.
    destroyed: AtomicBool,
    /// The trace's flow from the latest traced record, for the waits it releases (0: none).
    trace_flow: AtomicU64,
}

impl Drop for EventShared {
    fn drop(&mut self) {
        self.device.backend.event_destroy(self.handle);
    }
}

/// An event. Cheap to clone; clones are the same event.
#[derive(Clone)]
pub struct Event {
    shared: Arc<EventShared>,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.shared.device.label())
            .field("timing", &self.shared.timing)
            .finish()
    }
}

impl Event {
    pub(crate) fn create(device: Arc<DeviceShared>, timing: bool) -> Result<Event> {
        let handle = device.backend.event_create(device.handle, timing)?;
        Ok(Event {
            shared: Arc::new(EventShared {
                device,
                handle,
                timing,
                destroyed: AtomicBool::new(false),
                trace_flow: AtomicU64::new(0),
            }),
        })
    }

    pub(crate) fn check_usable(&self, operation: &str) -> Result<()> {
        if self.shared.destroyed.load(Ordering::Acquire) {
            Err(Error::invalid_handle(format!("{operation} on a destroyed event")))
        } else {
            Ok(())
        }
    }

    /// Starts a trace flow at a record of this event, for the waits that follow it.
    pub(crate) fn begin_trace_flow(&self) -> u64 {
        let id = crate::trace::new_flow_id();
        self.shared.trace_flow.store(id, Ordering::Relaxed);
        id
    }

    /// The trace flow of the latest traced record, if any.
    pub(crate) fn trace_flow(&self) -> Option<u64> {
        Some(self.shared.trace_flow.load(Ordering::Relaxed)).filter(|id| *id != 0)
    }

    pub(crate) fn device(&self) -> &DeviceShared {
        &self.shared.device
    }

    pub(crate) fn handle(&self) -> EventHandle {
        self.shared.handle
    }

    pub(crate) fn keepalive(&self) -> Arc<dyn Send + Sync> {
        self.shared.clone() as Arc<dyn Send + Sync>
    }

    /// Whether the event records timestamps.
    pub fn has_timing(&self) -> bool {
        self.shared.timing
    }

    /// True when the most recent record has completed, or the event was never recorded.
    pub fn query(&self) -> Result<bool> {
        self.check_usable("query")?;
        self.shared.device.backend.event_query(self.shared.handle)
    }

    /// Blocks the host until the most recent record has completed. Returns the error of the
    /// recording stream if its work failed before the record.
    pub fn synchronize(&self) -> Result<()> {
        self.check_usable("synchronize")?;
        self.shared.device.backend.event_synchronize(self.shared.handle)
    }

    /// Time from `start` to this event; both must have completed and record timestamps.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        self.check_usable("elapsed time")?;
        start.check_usable("elapsed time")?;
        self.shared
            .device
            .check_same_device(&start.shared.device, "start event")?;
        for (event, role) in [(start, "start"), (self, "end")] {
            if !event.shared.timing {
                return Err(Error::invalid_argument(format!(
                    "the {role} event was created without timing; use Device::create_event on a device with the timestamps feature"
                )));
            }
        }
        let nanoseconds = self
            .shared
            .device
            .backend
            .event_elapsed_time(start.shared.handle, self.shared.handle)?;
        Ok(Duration::from_nanos(nanoseconds))
    }

    /// When the event's latest record completed, in nanoseconds on the device's timestamp
    /// clock ([`Device::clock`](crate::Device::clock) places it on the host's). The event must
    /// have timing and be complete. `Unsupported` from a device without absolute timestamps.
    pub fn device_timestamp(&self) -> Result<u64> {
        self.check_usable("device timestamp")?;
        if !self.shared.timing {
            return Err(Error::invalid_argument(
                "the event was created without timing; use Device::create_event on a device with the timestamps feature",
            ));
        }
        self.shared.device.backend.event_timestamp(self.shared.handle)
    }

    /// When the event's latest record completed on the device, on the host's clock: its
    /// [`device_timestamp`](Event::device_timestamp) placed by a fresh
    /// [`Device::clock`](crate::Device::clock) reading. For many events, read the clock once
    /// and convert each timestamp with [`ClockSample::to_instant`](crate::ClockSample::to_instant).
    pub fn completed_at(&self) -> Result<Instant> {
        let timestamp = self.device_timestamp()?;
        let clock = self.shared.device.backend.device_clock(self.shared.device.handle)?;
        Ok(clock.to_instant(timestamp))
    }

    /// Ends the event for every clone: later use fails with `InvalidHandle`. Work already
    /// queued that waits on it is unaffected.
    pub fn destroy(&self) -> Result<()> {
        if self.shared.destroyed.swap(true, Ordering::AcqRel) {
            Err(Error::invalid_handle("destroy on a destroyed event"))
        } else {
            Ok(())
        }
    }
}

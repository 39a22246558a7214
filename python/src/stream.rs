//! Streams and events.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::device::{Device, DeviceCore};
use crate::errors::IntoPy;

/// A queue of device work that runs in order. Operations take `stream=`; without it they use
/// the device's default stream.
#[pyclass(frozen, module = "xhal._native", name = "Stream")]
pub(crate) struct Stream {
    pub(crate) core: Arc<DeviceCore>,
    pub(crate) stream: xhal::Stream,
}

impl Stream {
    pub(crate) fn from_parts(core: &Arc<DeviceCore>, stream: xhal::Stream) -> Stream {
        Stream {
            core: Arc::clone(core),
            stream,
        }
    }
}

#[pymethods]
impl Stream {
    /// The device the stream belongs to.
    #[getter]
    fn device(&self) -> Device {
        Device::from_core(&self.core)
    }

    /// The stream's priority on its device: 0, or the urgent priority it was made with.
    #[getter]
    fn priority(&self) -> i32 {
        self.stream.priority()
    }

    /// Waits until every operation queued so far has finished; raises the first failure.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.core.check_open().py()?;
        let stream = self.stream.clone();
        py.detach(|| stream.synchronize()).py()
    }

    /// Whether everything queued so far has finished, without waiting.
    fn query(&self) -> PyResult<bool> {
        self.core.check_open().py()?;
        self.stream.query().py()
    }

    /// Records `event` (a new timing event when `None`) at this point of the stream, and
    /// returns it.
    #[pyo3(signature = (event = None))]
    fn record(&self, event: Option<PyRef<'_, Event>>) -> PyResult<Event> {
        self.core.check_open().py()?;
        let event = match event {
            Some(event) => {
                self.core.check_same(&event.core, "the event").py()?;
                Event::from_parts(&event.core, event.event.clone())
            }
            None => Event::from_parts(&self.core, self.core.device.create_event().py()?),
        };
        self.stream.record(&event.event).py()?;
        Ok(event)
    }

    /// Makes later work on this stream wait until `event` has completed.
    fn wait(&self, event: PyRef<'_, Event>) -> PyResult<()> {
        self.core.check_open().py()?;
        self.core.check_same(&event.core, "the event").py()?;
        self.stream.wait(&event.event).py()
    }

    /// Finishes the stream's work and releases it; any later use raises
    /// `InvalidHandleError`.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        self.core.check_open().py()?;
        let stream = self.stream.clone();
        py.detach(|| stream.destroy()).py()
    }

    fn __repr__(&self) -> String {
        format!("Stream(device='{}')", self.core.label)
    }
}

/// A point in a stream's work: wait for it, or time the work between two of them.
#[pyclass(frozen, module = "xhal._native", name = "Event")]
pub(crate) struct Event {
    pub(crate) core: Arc<DeviceCore>,
    pub(crate) event: xhal::Event,
}

impl Event {
    pub(crate) fn from_parts(core: &Arc<DeviceCore>, event: xhal::Event) -> Event {
        Event {
            core: Arc::clone(core),
            event,
        }
    }
}

#[pymethods]
impl Event {
    /// Waits until the work before the event's record has finished.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        self.core.check_open().py()?;
        let event = self.event.clone();
        py.detach(|| event.synchronize()).py()
    }

    /// Whether the work before the event's record has finished, without waiting.
    fn query(&self) -> PyResult<bool> {
        self.core.check_open().py()?;
        self.event.query().py()
    }

    /// Seconds of device time from `start` to this event (both recorded, with timing).
    fn elapsed_since(&self, py: Python<'_>, start: PyRef<'_, Event>) -> PyResult<f64> {
        self.core.check_open().py()?;
        self.core.check_same(&start.core, "the start event").py()?;
        let (end, start) = (self.event.clone(), start.event.clone());
        py.detach(|| end.elapsed_since(&start)).py().map(|d| d.as_secs_f64())
    }

    /// Whether the event can be timed.
    #[getter]
    fn timing(&self) -> bool {
        self.event.has_timing()
    }

    /// Releases the event; any later use raises `InvalidHandleError`.
    fn destroy(&self) -> PyResult<()> {
        self.core.check_open().py()?;
        self.event.destroy().py()
    }

    fn __repr__(&self) -> String {
        format!(
            "Event(device='{}', timing={})",
            self.core.label,
            self.event.has_timing()
        )
    }
}

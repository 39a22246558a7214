//! Devices: what discovery lists ([`DeviceEntry`]) and an open device ([`Device`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::array::{self, Array};
use crate::dtype::DType;
use crate::errors::{invalid, IntoPy, Res};
use crate::stream::{Event, Stream};

/// One device as discovery reports it, without opening it.
#[pyclass(frozen, module = "xhal._native", name = "DeviceEntry")]
pub(crate) struct DeviceEntry {
    entry: xhal::DeviceEntry,
}

impl From<xhal::DeviceEntry> for DeviceEntry {
    fn from(entry: xhal::DeviceEntry) -> Self {
        DeviceEntry { entry }
    }
}

pub(crate) fn type_name(kind: xhal::DeviceType) -> &'static str {
    match kind {
        xhal::DeviceType::Cpu => "cpu",
        xhal::DeviceType::IntegratedGpu => "integrated-gpu",
        xhal::DeviceType::DiscreteGpu => "discrete-gpu",
        xhal::DeviceType::Accelerator => "accelerator",
        xhal::DeviceType::Other => "other",
    }
}

/// The device's facts as a dict: name, vendor, type, memory, limits and features.
fn info_dict<'py>(py: Python<'py>, info: &xhal::DeviceInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &info.name)?;
    d.set_item("vendor", &info.vendor)?;
    d.set_item("type", type_name(info.device_type))?;
    d.set_item("driver_version", &info.driver_version)?;
    d.set_item("total_memory", info.total_memory)?;
    d.set_item("max_allocation_size", info.max_allocation_size)?;
    d.set_item("max_workgroup_size", info.max_workgroup_size.to_vec())?;
    d.set_item("max_workgroup_invocations", info.max_workgroup_invocations)?;
    d.set_item("max_workgroup_count", info.max_workgroup_count.to_vec())?;
    d.set_item("max_workgroup_memory", info.max_workgroup_memory)?;
    d.set_item("subgroup_size", info.subgroup_size)?;
    d.set_item("max_buffer_arguments", info.max_buffer_arguments)?;
    d.set_item("max_scalar_block_size", info.max_scalar_block_size)?;
    d.set_item("features", info.features.names())?;
    Ok(d)
}

#[pymethods]
impl DeviceEntry {
    /// `backend:index`, as `XHAL_DEVICE` names it.
    #[getter]
    fn label(&self) -> String {
        self.entry.label()
    }
    /// The backend's name.
    #[getter]
    fn backend(&self) -> &str {
        &self.entry.backend
    }
    /// The device's index within its backend.
    #[getter]
    fn index(&self) -> u32 {
        self.entry.index
    }
    /// The device's name.
    #[getter]
    fn name(&self) -> &str {
        &self.entry.info.name
    }
    /// `cpu`, `integrated-gpu`, `discrete-gpu`, `accelerator` or `other`.
    #[getter]
    fn r#type(&self) -> &'static str {
        type_name(self.entry.info.device_type)
    }
    /// The device's facts: vendor, memory, limits, features.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, &self.entry.info)
    }
    /// Opens the device.
    fn open(&self, py: Python<'_>) -> PyResult<Device> {
        let runtime = crate::runtime(py)?;
        let label = self.entry.label();
        let device = py.detach(|| runtime.open(&label)).py()?;
        Device::new(device, format!("opened {label} by its label"))
    }
    fn __repr__(&self) -> String {
        format!(
            "DeviceEntry('{}', name='{}', type='{}')",
            self.entry.label(),
            self.entry.info.name,
            type_name(self.entry.info.device_type)
        )
    }
}

/// An open device and its default stream. Shared by every object made from it.
pub(crate) struct DeviceCore {
    pub(crate) device: xhal::Device,
    pub(crate) stream: xhal::Stream,
    pub(crate) label: String,
    closed: AtomicBool,
}

impl DeviceCore {
    /// An error when the device was closed.
    pub(crate) fn check_open(&self) -> Res<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(xhal::Error::new(
                xhal::ErrorKind::InvalidHandle,
                format!("device {} is closed", self.label),
            ));
        }
        Ok(())
    }

    /// The stream an operation runs on: `stream`, which must be on this device, or the
    /// default stream; an error when the device is closed.
    pub(crate) fn stream_of(&self, stream: Option<&Stream>) -> Res<xhal::Stream> {
        self.check_open()?;
        match stream {
            Some(stream) => {
                self.check_same(&stream.core, "the stream")?;
                Ok(stream.stream.clone())
            }
            None => Ok(self.stream.clone()),
        }
    }

    /// An error when `other` is not this device.
    pub(crate) fn check_same(&self, other: &DeviceCore, what: &str) -> Res<()> {
        if !std::ptr::eq(self, other) {
            return Err(xhal::Error::new(
                xhal::ErrorKind::InvalidHandle,
                format!(
                    "{what} is on device {}, but this operation runs on device {}",
                    other.label, self.label
                ),
            ));
        }
        Ok(())
    }
}

/// An open device: arrays, streams, events and kernels come from it.
#[pyclass(frozen, module = "xhal._native", name = "Device")]
pub(crate) struct Device {
    pub(crate) core: Arc<DeviceCore>,
    why: String,
}

impl Device {
    pub(crate) fn new(device: xhal::Device, why: String) -> PyResult<Device> {
        let stream = device.create_stream().py()?;
        let label = device.label();
        Ok(Device {
            core: Arc::new(DeviceCore {
                device,
                stream,
                label,
                closed: AtomicBool::new(false),
            }),
            why,
        })
    }

    pub(crate) fn from_core(core: &Arc<DeviceCore>) -> Device {
        Device {
            core: Arc::clone(core),
            why: String::new(),
        }
    }

    fn stream_of(&self, stream: Option<PyRef<'_, Stream>>) -> PyResult<xhal::Stream> {
        self.core.stream_of(stream.as_deref()).py()
    }

    /// A new array of `shape` and `dtype` with every element `pattern` (one element's
    /// bytes, from `value` when given), finished when this returns.
    fn filled(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
    ) -> PyResult<Array> {
        let stream = self.stream_of(stream)?;
        let array = self.empty(shape, dtype)?;
        let pattern = match value {
            Some(value) => array::element_bytes(value, array.dtype)?,
            None => vec![0u8; array.dtype.itemsize()],
        };
        array.fill_bytes(&stream, &pattern).py()?;
        py.detach(|| stream.synchronize()).py()?;
        Ok(array)
    }
}

/// The shape argument of `empty`, `zeros` and `full`: an int or a sequence of ints.
pub(crate) fn shape_of(shape: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(n) = shape.extract::<i64>() {
        return shape_dims(&[n]);
    }
    let dims: Vec<i64> = shape.extract().map_err(|_| {
        crate::py_err(invalid(format!(
            "a shape is an int or a sequence of ints, not {}",
            shape.repr().map(|r| r.to_string()).unwrap_or_default()
        )))
    })?;
    shape_dims(&dims)
}

fn shape_dims(dims: &[i64]) -> PyResult<Vec<usize>> {
    dims.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| crate::py_err(invalid(format!("shape {dims:?} has a negative dimension"))))
        })
        .collect()
}

#[pymethods]
impl Device {
    /// `backend:index`.
    #[getter]
    fn label(&self) -> &str {
        &self.core.label
    }
    /// The device's name.
    #[getter]
    fn name(&self) -> &str {
        self.core.device.name()
    }
    /// The backend's name.
    #[getter]
    fn backend(&self) -> &str {
        self.core.device.backend_name()
    }
    /// The device's index within its backend.
    #[getter]
    fn index(&self) -> u32 {
        self.core.device.index()
    }
    /// `cpu`, `integrated-gpu`, `discrete-gpu`, `accelerator` or `other`.
    #[getter]
    fn r#type(&self) -> &'static str {
        type_name(self.core.device.info().device_type)
    }
    /// The device's facts: vendor, memory, limits, features.
    #[getter]
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        info_dict(py, self.core.device.info())
    }
    /// Why this device was chosen: one line naming the selector term that matched.
    #[getter]
    fn why(&self) -> &str {
        &self.why
    }
    /// Whether [`close`](Self::close) was called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.closed.load(Ordering::Acquire)
    }
    /// The stream operations use when they are given none.
    #[getter]
    fn default_stream(&self) -> Stream {
        Stream::from_parts(&self.core, self.core.stream.clone())
    }

    /// Finishes the device's work, then refuses every further use of the device and of
    /// everything made from it with `InvalidHandleError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if self.core.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let stream = self.core.stream.clone();
        py.detach(|| stream.synchronize()).py()?;
        self.core.closed.store(true, Ordering::Release);
        Ok(())
    }

    /// Waits until the device's default stream has finished its work.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let stream = self.stream_of(None)?;
        py.detach(|| stream.synchronize()).py()
    }

    /// A new stream: operations on it run in order, and independently of other streams. A
    /// negative `priority` asks for an urgent stream, whose work the device runs first where it
    /// schedules by priority; one beyond `stream_priorities` is clamped into them.
    #[pyo3(signature = (priority = 0))]
    fn stream(&self, priority: i32) -> PyResult<Stream> {
        self.core.check_open().py()?;
        let stream = self.core.device.create_stream_with_priority(priority).py()?;
        Ok(Stream::from_parts(&self.core, stream))
    }

    /// `(least, most urgent)`: the device's stream priorities, CUDA's numbering (a lower
    /// number is more urgent); `(0, 0)` on a device that runs every stream alike.
    #[getter]
    fn stream_priorities(&self) -> PyResult<(i32, i32)> {
        self.core.check_open().py()?;
        let priorities = self.core.device.stream_priorities().py()?;
        Ok((priorities.least, priorities.greatest))
    }

    /// A new event; with `timing`, events recorded on a stream can be timed against each
    /// other.
    #[pyo3(signature = (timing = true))]
    fn event(&self, timing: bool) -> PyResult<Event> {
        self.core.check_open().py()?;
        let event = if timing {
            self.core.device.create_event()
        } else {
            self.core.device.create_event_without_timing()
        }
        .py()?;
        Ok(Event::from_parts(&self.core, event))
    }

    /// An uninitialised array of `shape` and `dtype` (its contents are whatever the device
    /// holds; the CPU device fills fresh memory with a poison pattern).
    #[pyo3(signature = (shape, dtype = None))]
    fn empty(&self, shape: &Bound<'_, PyAny>, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<Array> {
        self.core.check_open().py()?;
        let dtype = match dtype {
            Some(d) => DType::from_py(d)?,
            None => DType::Float32,
        };
        Array::alloc(&self.core, shape_of(shape)?, dtype).py()
    }

    /// An array of `shape` and `dtype` filled with zeros, ready when this returns (on any
    /// stream).
    #[pyo3(signature = (shape, dtype = None, stream = None))]
    fn zeros(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
    ) -> PyResult<Array> {
        self.filled(py, shape, None, dtype, stream)
    }

    /// An array of `shape` and `dtype` with every element `value`, ready when this returns.
    #[pyo3(signature = (shape, value, dtype = None, stream = None))]
    fn full(
        &self,
        py: Python<'_>,
        shape: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
    ) -> PyResult<Array> {
        self.filled(py, shape, Some(value), dtype, stream)
    }

    /// An array with the contents of `data`: a numpy array, or anything `numpy.asarray`
    /// takes (lists, the buffer protocol, `__array__`). With `dtype`, the data is converted
    /// first. The copy finishes before this returns.
    #[pyo3(signature = (data, dtype = None, stream = None))]
    fn asarray(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
    ) -> PyResult<Array> {
        let stream = self.stream_of(stream)?;
        Array::upload(py, &self.core, &stream, data, dtype)
    }

    /// Loads a WGSL module, with values for its `override` constants by name (or by
    /// `@id` as a string).
    #[pyo3(signature = (source, overrides = None))]
    fn load_wgsl(
        &self,
        py: Python<'_>,
        source: &str,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::kernel::Module> {
        self.core.check_open().py()?;
        crate::kernel::Module::load(py, &self.core, source, overrides)
    }

    /// Bytes in blocks handed out to live arrays (torch's `memory_allocated`).
    fn memory_allocated(&self) -> u64 {
        self.core.device.memory_allocated()
    }
    /// The highest `memory_allocated` since the device opened or the last
    /// `reset_peak_memory_stats`.
    fn max_memory_allocated(&self) -> u64 {
        self.core.device.max_memory_allocated()
    }
    /// Bytes the caching allocator holds from the device: allocated plus cached.
    fn memory_reserved(&self) -> u64 {
        self.core.device.memory_reserved()
    }
    /// The highest `memory_reserved` since the device opened or the last reset.
    fn max_memory_reserved(&self) -> u64 {
        self.core.device.memory_stats().peak_reserved
    }
    /// Returns cached blocks no array uses to the device.
    fn empty_cache(&self) {
        self.core.device.empty_cache()
    }
    /// Starts the peaks over from the current values.
    fn reset_peak_memory_stats(&self) {
        self.core.device.reset_peak_memory_stats()
    }
    /// Every figure of the caching allocator, by name.
    fn memory_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.core.device.memory_stats();
        let d = PyDict::new(py);
        d.set_item("allocated_bytes", s.allocated)?;
        d.set_item("reserved_bytes", s.reserved)?;
        d.set_item("peak_allocated_bytes", s.peak_allocated)?;
        d.set_item("peak_reserved_bytes", s.peak_reserved)?;
        d.set_item("active_blocks", s.active_blocks)?;
        d.set_item("cached_blocks", s.cached_blocks)?;
        d.set_item("cache_hits", s.cache_hits)?;
        d.set_item("backend_allocations", s.backend_allocations)?;
        Ok(d)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Device>()
            .is_ok_and(|other| Arc::ptr_eq(&self.core, &other.get().core))
    }
    fn __hash__(&self) -> u64 {
        Arc::as_ptr(&self.core) as usize as u64
    }
    fn __repr__(&self) -> String {
        format!("Device('{}', name='{}')", self.core.label, self.core.device.name())
    }
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// Opens the device `selector` picks, in the `XHAL_DEVICE` grammar (`"vulkan:0,cpu"`,
/// `"type=discrete-gpu"`, ...), or the one `XHAL_DEVICE` (or, unset, the best device)
/// picks when `selector` is `None`. The device's `why` says why it was chosen.
#[pyfunction]
#[pyo3(signature = (selector = None))]
pub(crate) fn device(py: Python<'_>, selector: Option<&str>) -> PyResult<Device> {
    let runtime = crate::runtime(py)?;
    let selector = match selector {
        Some(text) => xhal::Selector::parse_from(text, "xhal.device()"),
        None => xhal::Selector::from_env(),
    }
    .py()?;
    let (device, why) = py.detach(|| runtime.choose(&selector)).py()?;
    Device::new(device, why.summary)
}

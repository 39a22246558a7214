//! Arrays: a contiguous run of elements in device memory, with a shape and a dtype. A view
//! (from indexing or `reshape`) shares its parent's memory, and kernels and copies take it
//! like any array.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PySlice, PyTuple};

use crate::device::{Device, DeviceCore};
use crate::dtype::DType;
use crate::errors::{invalid, IntoPy, Res};
use crate::stream::Stream;

/// Device memory that arrays view.
pub(crate) struct Storage {
    pub(crate) buffer: xhal::Buffer<u8>,
    pub(crate) device: Arc<DeviceCore>,
}

/// An n-dimensional array of one dtype in a device's memory, C-contiguous. `numpy()` and
/// `numpy.asarray(a)` copy it to the host; indexing along the leading axes and `reshape`
/// give views that share its memory.
#[pyclass(frozen, module = "xhal._native", name = "Array")]
pub(crate) struct Array {
    pub(crate) storage: Arc<Storage>,
    /// Byte offset of the first element in the storage.
    pub(crate) offset: usize,
    pub(crate) shape: Vec<usize>,
    pub(crate) dtype: DType,
}

/// Elements in `shape`, or an error when they overflow.
fn element_count(shape: &[usize]) -> Res<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| {
        invalid(format!(
            "shape {shape:?} holds more elements than this machine can count"
        ))
    })
}

/// `value` as the bytes of one element of `dtype` (numpy's conversion, with its checks).
pub(crate) fn element_bytes(value: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Vec<u8>> {
    let py = value.py();
    let numpy = py.import("numpy")?;
    let converted = numpy
        .getattr("asarray")?
        .call1((value, dtype.name()))
        .map_err(|e| crate::py_err(invalid(format!("{value} is not a {} value: {e}", dtype.name()))))?;
    let shape: Vec<usize> = converted.getattr("shape")?.extract()?;
    if !shape.is_empty() {
        return Err(crate::py_err(invalid(format!(
            "a fill value is one number, not an array of shape {shape:?}"
        ))));
    }
    converted.call_method0("tobytes")?.extract()
}

/// The data pointer of a numpy array (from its `__array_interface__`).
fn numpy_pointer(array: &Bound<'_, PyAny>) -> PyResult<usize> {
    let interface = array.getattr("__array_interface__")?;
    let data = interface.get_item("data")?;
    data.get_item(0)?.extract()
}

impl Array {
    /// Bytes the array covers.
    pub(crate) fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.itemsize()
    }

    /// The device memory the array covers, for kernels and copies.
    pub(crate) fn view(&self) -> xhal::BufferSlice<'_, u8> {
        self.storage.buffer.slice(self.offset..self.offset + self.nbytes())
    }

    pub(crate) fn alloc(core: &Arc<DeviceCore>, shape: Vec<usize>, dtype: DType) -> Res<Array> {
        core.check_open()?;
        let bytes = element_count(&shape)?
            .checked_mul(dtype.itemsize())
            .ok_or_else(|| invalid(format!("shape {shape:?} of {} overflows", dtype.name())))?;
        // A zero-size array still owns a little memory, so that every array has a buffer.
        let buffer = core.device.alloc::<u8>(bytes.max(4))?;
        Ok(Array {
            storage: Arc::new(Storage {
                buffer,
                device: Arc::clone(core),
            }),
            offset: 0,
            shape,
            dtype,
        })
    }

    /// An array with the same memory and another shape or offset.
    fn with_view(&self, offset: usize, shape: Vec<usize>) -> Array {
        Array {
            storage: Arc::clone(&self.storage),
            offset,
            shape,
            dtype: self.dtype,
        }
    }

    fn core(&self) -> &Arc<DeviceCore> {
        &self.storage.device
    }

    /// The stream to use: `stream`, which must be on the array's device, or the default.
    pub(crate) fn stream_of(&self, stream: Option<&Stream>) -> Res<xhal::Stream> {
        self.core().stream_of(stream)
    }

    /// Fills every element with `pattern`, the bytes of one element.
    pub(crate) fn fill_bytes(&self, stream: &xhal::Stream, pattern: &[u8]) -> Res<()> {
        if pattern.iter().all(|&b| b == pattern[0]) {
            return stream.fill(self.view(), pattern[0]);
        }
        let data: Vec<u8> = pattern.iter().copied().cycle().take(self.nbytes()).collect();
        stream.write(self.view(), &data)
    }

    /// A new array on `core` with the contents of `data` (anything `numpy.asarray` takes).
    pub(crate) fn upload(
        py: Python<'_>,
        core: &Arc<DeviceCore>,
        stream: &xhal::Stream,
        data: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Array> {
        if let Ok(array) = data.cast::<Array>() {
            // Another xhal array: a copy on the device (through the host between devices).
            let source = array.get();
            let same_dtype = match dtype {
                Some(d) => DType::from_py(d)? == source.dtype,
                None => true,
            };
            if Arc::ptr_eq(core, source.core()) && same_dtype {
                let copy = Array::alloc(core, source.shape.clone(), source.dtype).py()?;
                stream.copy(source.view(), copy.view()).py()?;
                py.detach(|| stream.synchronize()).py()?;
                return Ok(copy);
            }
            let host = source.download(py, &source.stream_of(None).py()?)?;
            return Array::upload(py, core, stream, &host, dtype);
        }
        let numpy = py.import("numpy")?;
        let dtype_arg = match dtype {
            Some(d) => Some(DType::from_py(d)?.to_numpy(py)?),
            None => None,
        };
        let host = numpy
            .getattr("ascontiguousarray")?
            .call1((data, dtype_arg))
            .map_err(|e| crate::py_err(invalid(format!("numpy cannot read the data: {e}"))))?;
        let typestr: String = host.getattr("dtype")?.getattr("str")?.extract()?;
        let dtype = DType::from_typestr(&typestr).ok_or_else(|| {
            crate::py_err(invalid(format!(
                "dtype {typestr} has no xhal array type; expected one of {}",
                crate::dtype::ALL.map(DType::name).join(", ")
            )))
        })?;
        let shape: Vec<usize> = host.getattr("shape")?.extract()?;
        let array = Array::alloc(core, shape, dtype).py()?;
        let bytes = array.nbytes();
        if bytes > 0 {
            let address = numpy_pointer(&host)?;
            // SAFETY: `host` is a C-contiguous numpy array of `bytes` bytes at `address`, held
            // (so neither freed nor resized) until this function returns.
            let data = unsafe { std::slice::from_raw_parts(address as *const u8, bytes) };
            let view = array.view();
            py.detach(|| stream.write(view, data)).py()?;
        }
        Ok(array)
    }

    /// A numpy array with the contents, once the work queued before on `stream` is done.
    pub(crate) fn download<'py>(&self, py: Python<'py>, stream: &xhal::Stream) -> PyResult<Bound<'py, PyAny>> {
        let numpy = py.import("numpy")?;
        let out = numpy
            .getattr("empty")?
            .call1((PyTuple::new(py, &self.shape)?, self.dtype.to_numpy(py)?))?;
        let bytes = self.nbytes();
        if bytes > 0 {
            let address = numpy_pointer(&out)?;
            // SAFETY: `out` is a fresh C-contiguous numpy array of `bytes` bytes at `address`
            // that nothing else references until this function returns it.
            let data = unsafe { std::slice::from_raw_parts_mut(address as *mut u8, bytes) };
            let view = self.view();
            py.detach(|| stream.read(view, data)).py()?;
        }
        Ok(out)
    }

    /// The view `key` selects: ints and at most one step-1 slice, on the leading axes, so
    /// that the view stays contiguous.
    fn index(&self, key: &Bound<'_, PyAny>) -> PyResult<Array> {
        let keys: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
            Ok(tuple) => tuple.iter().collect(),
            Err(_) => vec![key.clone()],
        };
        if keys.len() > self.shape.len() {
            return Err(crate::py_err(xhal::Error::out_of_bounds(format!(
                "{} indices for an array of {} dimensions",
                keys.len(),
                self.shape.len()
            ))));
        }
        let strides: Vec<usize> = (0..self.shape.len())
            .map(|axis| self.shape[axis + 1..].iter().product::<usize>() * self.dtype.itemsize())
            .collect();
        let mut offset = self.offset;
        let mut shape = Vec::new();
        let mut axis = 0;
        let mut sliced = false;
        for key in &keys {
            if sliced {
                return Err(crate::py_err(invalid(
                    "only the last index may be a slice: a slice followed by more indices would \
                     give a view that is not contiguous, which kernels cannot take (copy with \
                     numpy() to index freely)",
                )));
            }
            let length = self.shape[axis];
            if let Ok(slice) = key.cast::<PySlice>() {
                let range = slice.indices(length as isize)?;
                if range.step != 1 {
                    return Err(crate::py_err(invalid(format!(
                        "slice step {} gives a view that is not contiguous; xhal views take step 1",
                        range.step
                    ))));
                }
                offset += range.start.max(0) as usize * strides[axis];
                shape.push(range.slicelength);
                sliced = true;
            } else {
                let index: i64 = key.extract().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "array indices are ints or slices, not {}",
                        key.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ))
                })?;
                let position = if index < 0 { index + length as i64 } else { index };
                if position < 0 || position >= length as i64 {
                    return Err(crate::py_err(xhal::Error::out_of_bounds(format!(
                        "index {index} is out of bounds for axis {axis} of length {length}"
                    ))));
                }
                offset += position as usize * strides[axis];
            }
            axis += 1;
        }
        shape.extend_from_slice(&self.shape[axis..]);
        Ok(self.with_view(offset, shape))
    }
}

#[pymethods]
impl Array {
    /// The shape, as a tuple.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }
    /// The element type, as a numpy dtype.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dtype.to_numpy(py)
    }
    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes of one element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.dtype.itemsize()
    }
    /// Bytes the array covers.
    #[getter(nbytes)]
    fn nbytes_py(&self) -> usize {
        self.nbytes()
    }
    /// The device the array is on.
    #[getter]
    fn device(&self) -> Device {
        Device::from_core(self.core())
    }

    /// The contents as a new numpy array (a copy), once the work queued before on `stream`
    /// (the device's default stream when `None`) is done.
    #[pyo3(signature = (stream = None))]
    fn numpy<'py>(&self, py: Python<'py>, stream: Option<PyRef<'_, Stream>>) -> PyResult<Bound<'py, PyAny>> {
        let stream = self.stream_of(stream.as_deref()).py()?;
        self.download(py, &stream)
    }

    /// numpy's conversion protocol: `numpy.asarray(a)` copies the array to the host.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "an xhal array reaches numpy only as a copy (copy=False cannot be honoured)",
            ));
        }
        let host = self.numpy(py, None)?;
        match dtype {
            Some(dtype) => host.call_method1("astype", (dtype,)),
            None => Ok(host),
        }
    }

    /// The contents as nested Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.numpy(py, None)?.call_method0("tolist")
    }

    /// The same memory with another shape of as many elements; one dimension may be -1.
    #[pyo3(signature = (*shape))]
    fn reshape(&self, shape: &Bound<'_, PyTuple>) -> PyResult<Array> {
        let dims: Vec<i64> = if shape.len() == 1 && shape.get_item(0)?.extract::<i64>().is_err() {
            shape.get_item(0)?.extract()?
        } else {
            shape.extract()?
        };
        let total = self.size();
        let known: i64 = dims.iter().filter(|&&d| d != -1).product();
        let unknown = dims.iter().filter(|&&d| d == -1).count();
        if unknown > 1 || dims.iter().any(|&d| d < -1) {
            return Err(crate::py_err(invalid(format!(
                "cannot reshape to {dims:?}: at most one dimension may be -1 and none negative"
            ))));
        }
        let new: Vec<usize> = dims
            .iter()
            .map(|&d| {
                if d == -1 {
                    if known == 0 {
                        0
                    } else {
                        total / known as usize
                    }
                } else {
                    d as usize
                }
            })
            .collect();
        if new.iter().product::<usize>() != total {
            return Err(crate::py_err(invalid(format!(
                "cannot reshape an array of {total} elements (shape {:?}) to {dims:?}",
                self.shape
            ))));
        }
        Ok(self.with_view(self.offset, new))
    }

    /// A new array on the same device with the same contents.
    #[pyo3(signature = (stream = None))]
    fn copy(&self, stream: Option<PyRef<'_, Stream>>) -> PyResult<Array> {
        let stream = self.stream_of(stream.as_deref()).py()?;
        let out = Array::alloc(self.core(), self.shape.clone(), self.dtype).py()?;
        stream.copy(self.view(), out.view()).py()?;
        Ok(out)
    }

    /// Copies `source` (an xhal array of the same device, shape and dtype) into this array.
    #[pyo3(signature = (source, stream = None))]
    fn copy_from(&self, source: PyRef<'_, Array>, stream: Option<PyRef<'_, Stream>>) -> PyResult<()> {
        let stream = self.stream_of(stream.as_deref()).py()?;
        self.core().check_same(source.core(), "the source array").py()?;
        if source.shape != self.shape || source.dtype != self.dtype {
            return Err(crate::py_err(invalid(format!(
                "copy_from needs the same shape and dtype: this array is {:?} {}, the source {:?} {}",
                self.shape,
                self.dtype.name(),
                source.shape,
                source.dtype.name()
            ))));
        }
        stream.copy(source.view(), self.view()).py()
    }

    /// Sets every element to `value`.
    #[pyo3(signature = (value, stream = None))]
    fn fill(&self, value: &Bound<'_, PyAny>, stream: Option<PyRef<'_, Stream>>) -> PyResult<()> {
        let stream = self.stream_of(stream.as_deref()).py()?;
        let pattern = element_bytes(value, self.dtype)?;
        self.fill_bytes(&stream, &pattern).py()
    }

    /// A copy of the array on `device`.
    fn to(&self, py: Python<'_>, device: PyRef<'_, Device>) -> PyResult<Array> {
        let target = &device.core;
        target.check_open().py()?;
        if Arc::ptr_eq(target, self.core()) {
            return self.copy(None);
        }
        let host = self.download(py, &self.stream_of(None).py()?)?;
        Array::upload(py, target, &target.stream, &host, None)
    }

    /// DLPack export: the array as host memory. Where the device's memory is host-mappable
    /// (the CPU device, integrated GPUs) and the consumer reads versioned capsules, without a
    /// copy: the array is then mapped, read-only, until the consumer frees its tensor, and
    /// launches and copies naming it are refused meanwhile. Otherwise (or with `copy=True`) a
    /// host copy flagged as one; `copy=False` on a device that cannot map raises
    /// `BufferError`.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        crate::dlpack::export(self, py, stream, max_version, dl_device, copy)
    }

    /// Where DLPack finds the data: the host, `(kDLCPU, 0)`.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.shape
            .first()
            .copied()
            .ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a 0-dimensional array"))
    }

    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<Array> {
        self.index(key)
    }

    fn __repr__(&self) -> String {
        let shape = match self.shape.as_slice() {
            [one] => format!("({one},)"),
            dims => format!(
                "({})",
                dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")
            ),
        };
        format!(
            "xhal.Array(shape={shape}, dtype={}, device='{}')",
            self.dtype.name(),
            self.core().label
        )
    }
}

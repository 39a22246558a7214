//! DLPack export (`Array.__dlpack__`): the array's memory mapped for the host without a copy
//! where the device's memory is host-mappable, a host copy (flagged `IS_COPIED`) otherwise.
//! While a zero-copy export lives, the array is mapped: launches and copies that name it are
//! refused, so the consumer and the device never use the memory at once. Import
//! (`xhal.from_dlpack`) copies into device memory; it is written in Python over numpy.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use pyo3::{ffi, IntoPyObjectExt};

use crate::array::{Array, Storage};
use crate::errors::IntoPy;

const CPU: i32 = 1;
const READ_ONLY: u64 = 1 << 0;
const IS_COPIED: u64 = 1 << 1;

const VERSIONED: &CStr = c"dltensor_versioned";
const LEGACY: &CStr = c"dltensor";

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// A mapping of an array's memory, held by an export (dropping it unmaps).
#[allow(dead_code, reason = "held for what dropping it does")]
struct Mapping(xhal::Mapped<'static, u8>);

// SAFETY: the mapping only records which memory is mapped; the consumer may end it (drop it)
// from any thread, which `unmap` allows (it takes the buffer memory's lock).
unsafe impl Send for Mapping {}

/// What an export keeps alive until the consumer calls its deleter.
#[allow(dead_code, reason = "held for what dropping it does")]
enum Held {
    /// The mapping comes first so that it ends before the storage it borrows can go.
    Mapped(Mapping, Arc<Storage>),
    Copied(Vec<u8>),
}

struct Export {
    #[allow(dead_code, reason = "held for what dropping it does")]
    held: Held,
    shape: Vec<i64>,
}

unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` and its context were made by `Box::into_raw` in `export`, and the
    // consumer calls the deleter once.
    unsafe {
        let managed = Box::from_raw(managed);
        drop(Box::from_raw(managed.manager_ctx.cast::<Export>()));
    }
}

unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
    if managed.is_null() {
        return;
    }
    // SAFETY: as in `delete_versioned`.
    unsafe {
        let managed = Box::from_raw(managed);
        drop(Box::from_raw(managed.manager_ctx.cast::<Export>()));
    }
}

/// Frees a capsule's tensor when no consumer took it (renamed it `used_...`).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: `capsule` is a live capsule (Python calls this as it frees it); the names are
    // static C strings and the pointers were made by `export`.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr()).cast::<DLManagedTensorVersioned>();
            if let Some(deleter) = managed.as_ref().and_then(|m| m.deleter) {
                deleter(managed);
            }
        } else if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let managed = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()).cast::<DLManagedTensor>();
            if let Some(deleter) = managed.as_ref().and_then(|m| m.deleter) {
                deleter(managed);
            }
        }
        // Renamed `used_dltensor...`: the consumer owns the tensor and calls its deleter.
    }
}

fn buffer_error(message: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyBufferError::new_err(message.into())
}

/// `Array.__dlpack__`.
pub(crate) fn export<'py>(
    array: &Array,
    py: Python<'py>,
    stream: Option<&Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    if stream.is_some_and(|s| !s.is_none()) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "an xhal array is exported as host memory, which takes no stream (stream=None)",
        ));
    }
    if let Some(device) = dl_device {
        if device != (CPU, 0) {
            return Err(buffer_error(format!(
                "an xhal array is exported to the host (kDLCPU, 0), not to device {device:?}"
            )));
        }
    }
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    let core = &array.storage.device;
    core.check_open().py()?;
    let mappable = core.device.has_features(xhal::Features::HOST_MAPPABLE);
    // Without versioned capsules a consumer cannot be told the data is read-only; it gets a
    // copy unless it insists on none.
    let zero_copy = match copy {
        Some(true) => false,
        Some(false) if !mappable => {
            return Err(buffer_error(format!(
                "device {} cannot map its memory for the host (no host_mappable feature): \
                 exporting needs a copy, and copy=False forbids one",
                core.label
            )))
        }
        Some(false) => true,
        None => mappable && versioned,
    };
    let stream = core.stream.clone();
    let (held, data, flags) = if zero_copy {
        // The mapping needs the work queued on the array to be finished: the default
        // stream's is waited for here; work on other streams must be synchronized first, or
        // the mapping is refused, saying so.
        py.detach(|| stream.synchronize()).py()?;
        let storage = Arc::clone(&array.storage);
        let view = array.view();
        let mapped = view.map().py()?;
        // SAFETY: the mapping borrows `storage.buffer`, which `Held::Mapped` keeps alive
        // (in an `Arc`) for as long as the mapping, and drops after it.
        let mapped: xhal::Mapped<'static, u8> = unsafe { std::mem::transmute(mapped) };
        let data = mapped.as_ptr().cast_mut().cast::<c_void>();
        (Held::Mapped(Mapping(mapped), storage), data, READ_ONLY)
    } else {
        let mut bytes = vec![0u8; array.nbytes()];
        let view = array.view();
        py.detach(|| stream.read(view, &mut bytes)).py()?;
        let data = bytes.as_mut_ptr().cast::<c_void>();
        (Held::Copied(bytes), data, IS_COPIED)
    };
    let mut export = Box::new(Export {
        held,
        shape: array.shape.iter().map(|&d| d as i64).collect(),
    });
    let (code, bits) = array.dtype.dlpack();
    let tensor = DLTensor {
        data,
        device: DLDevice {
            device_type: CPU,
            device_id: 0,
        },
        ndim: export.shape.len() as i32,
        dtype: DLDataType { code, bits, lanes: 1 },
        shape: export.shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let context = Box::into_raw(export).cast::<c_void>();
    let (pointer, name) = if versioned {
        let managed = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: context,
            deleter: Some(delete_versioned),
            flags,
            dl_tensor: tensor,
        });
        (Box::into_raw(managed).cast::<c_void>(), VERSIONED)
    } else {
        let managed = Box::new(DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: context,
            deleter: Some(delete_legacy),
        });
        (Box::into_raw(managed).cast::<c_void>(), LEGACY)
    };
    let Some(pointer) = NonNull::new(pointer) else {
        return Err(buffer_error("the export could not be allocated"));
    };
    // SAFETY: `pointer` is the managed tensor `name` describes, and `capsule_destructor`
    // frees it (through its deleter) unless a consumer took it.
    let capsule = unsafe { PyCapsule::new_with_pointer_and_destructor(py, pointer, name, Some(capsule_destructor)) };
    match capsule {
        Ok(capsule) => capsule.into_bound_py_any(py),
        Err(error) => {
            // SAFETY: no capsule owns the tensor: free it as a consumer would.
            unsafe {
                if versioned {
                    delete_versioned(pointer.as_ptr().cast());
                } else {
                    delete_legacy(pointer.as_ptr().cast());
                }
            }
            Err(error)
        }
    }
}

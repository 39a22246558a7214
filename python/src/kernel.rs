//! WGSL modules and kernels: reflection, and checked launches.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::array::Array;
use crate::device::DeviceCore;
use crate::dtype::DType;
use crate::errors::{invalid, IntoPy};
use crate::stream::Stream;

/// A loaded WGSL module: its entry points are kernels.
#[pyclass(frozen, module = "xhal._native", name = "Module")]
pub(crate) struct Module {
    core: Arc<DeviceCore>,
    module: xhal::Module,
    overrides: Vec<xhal::kernel::OverrideInfo>,
}

impl Module {
    pub(crate) fn load(
        py: Python<'_>,
        core: &Arc<DeviceCore>,
        source: &str,
        overrides: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Module> {
        let mut values: Vec<(String, f64)> = Vec::new();
        for (name, value) in overrides.into_iter().flat_map(|d| d.iter()) {
            let name: String = name
                .extract()
                .map_err(|_| crate::py_err(invalid("override names are strings (a name, or an @id as \"12\")")))?;
            let number: f64 = value.extract().map_err(|_| {
                crate::py_err(invalid(format!(
                    "override `{name}` takes a number or a bool, not {value}"
                )))
            })?;
            values.push((name, number));
        }
        let declared = xhal::kernel::parse_wgsl(source)
            .map(|m| m.overrides().to_vec())
            .unwrap_or_default();
        let device = core.device.clone();
        let source = source.to_owned();
        let module = py
            .detach(move || {
                let refs: Vec<(&str, f64)> = values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
                device.load_wgsl_with_overrides(&source, &refs)
            })
            .py()?;
        Ok(Module {
            core: Arc::clone(core),
            module,
            overrides: declared,
        })
    }

    fn names(&self) -> Vec<String> {
        self.module
            .entry_points()
            .map(|eps| eps.iter().map(|ep| ep.name.clone()).collect())
            .unwrap_or_default()
    }
}

#[pymethods]
impl Module {
    /// The names of the module's compute entry points.
    #[getter]
    fn entry_points(&self) -> Vec<String> {
        self.names()
    }

    /// The `override` constants the source declares: name, `@id`, type and default.
    #[getter]
    fn overrides<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.overrides
            .iter()
            .map(|o| {
                let d = PyDict::new(py);
                d.set_item("name", &o.name)?;
                d.set_item("id", o.id)?;
                d.set_item("type", &o.type_name)?;
                d.set_item("default", o.default.as_deref())?;
                Ok(d)
            })
            .collect()
    }

    /// The kernel of entry point `name`; with no name, the module's only entry point.
    #[pyo3(signature = (name = None))]
    fn kernel(&self, py: Python<'_>, name: Option<&str>) -> PyResult<Kernel> {
        self.core.check_open().py()?;
        let names = self.names();
        let name = match name {
            Some(name) => name.to_owned(),
            None if names.len() == 1 => names[0].clone(),
            None => {
                return Err(crate::py_err(invalid(format!(
                    "the module has {} entry points ({}); name one",
                    names.len(),
                    names.join(", ")
                ))))
            }
        };
        let kernel = self.module.kernel(&name).py()?;
        let info = kernel.info().cloned().ok_or_else(|| {
            crate::py_err(invalid(format!(
                "entry point `{name}` has no reflection (not from WGSL)"
            )))
        })?;
        let members: Vec<&xhal::kernel::ScalarMemberInfo> =
            info.scalars.iter().flat_map(|block| block.members.iter()).collect();
        let buffer_keys = info
            .buffers
            .iter()
            .map(|b| {
                let scalar_too = members.iter().any(|m| m.name == b.name);
                (PyString::new(py, &b.name).unbind(), binding_dtype(b), scalar_too)
            })
            .collect();
        let scalar_keys = members
            .iter()
            .map(|m| {
                let buffer_too = info.buffers.iter().any(|b| b.name == m.name);
                (PyString::new(py, &m.name).unbind(), buffer_too)
            })
            .collect();
        Ok(Kernel {
            core: Arc::clone(&self.core),
            kernel,
            info,
            buffer_keys,
            scalar_keys,
        })
    }

    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Kernel> {
        self.kernel(py, Some(name))
    }

    fn __repr__(&self) -> String {
        format!("Module(device='{}', entry_points={:?})", self.core.label, self.names())
    }
}

/// One parameter of a kernel: a buffer binding or a member of the scalar block.
#[pyclass(frozen, module = "xhal._native", name = "Param", get_all)]
pub(crate) struct Param {
    /// The name a launch gives it by (`x=`).
    name: String,
    /// `"storage"`, `"uniform"` or `"scalar"`.
    kind: &'static str,
    /// The WGSL type (`array<f32>`, `Params`, `u32`).
    r#type: String,
    /// `"read"` or `"read_write"` for buffers, `None` for scalars.
    access: Option<&'static str>,
    /// Whether the kernel writes it (buffers).
    writes: bool,
    /// Its position among the buffers (buffers) or members (scalars).
    position: u32,
    /// `@binding(n)` (buffers).
    binding: Option<u32>,
    /// `@group(n)` (buffers).
    group: Option<u32>,
    /// The numpy dtype name an array for it has, where WGSL's element type fixes one.
    dtype: Option<&'static str>,
    /// Bytes: the smallest view a buffer takes, or a scalar's size.
    size: u64,
    /// Byte offset in the scalar block (scalars).
    offset: Option<u32>,
}

#[pymethods]
impl Param {
    fn __repr__(&self) -> String {
        match self.kind {
            "scalar" => format!("Param('{}', scalar {})", self.name, self.r#type),
            kind => format!(
                "Param('{}', {kind} {} {}, binding {})",
                self.name,
                self.access.unwrap_or(""),
                self.r#type,
                self.binding.unwrap_or(0)
            ),
        }
    }
}

/// A kernel: call it with its buffers (positionally, or by their WGSL names), its scalars by
/// name, and `invocations=` or `workgroups=`.
#[pyclass(frozen, module = "xhal._native", name = "Kernel")]
pub(crate) struct Kernel {
    core: Arc<DeviceCore>,
    kernel: xhal::Kernel,
    info: xhal::EntryPointInfo,
    /// Per buffer, in launch order: its name as a Python string (a launch looks it up in
    /// the keywords without making one), the dtype its elements have, and whether a scalar
    /// shares its name.
    buffer_keys: Vec<(Py<PyString>, Option<DType>, bool)>,
    /// Per scalar-block member: its name as a Python string, and whether a buffer shares it.
    scalar_keys: Vec<(Py<PyString>, bool)>,
}

/// The dtype of a binding's elements, where WGSL fixes one.
fn binding_dtype(binding: &xhal::kernel::BufferBindingInfo) -> Option<DType> {
    match &binding.element {
        Some(element) => DType::of_wgsl(&element.type_name),
        None => DType::of_wgsl(&binding.type_name),
    }
}

/// Appends the bytes of scalar-block member `member`, from `value`, to `out`.
fn scalar_bytes(member: &xhal::kernel::ScalarMemberInfo, value: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    let wrong = |expected: &str| {
        crate::py_err(invalid(format!(
            "scalar `{}` is a {}; {} is not {expected}",
            member.name,
            member.type_name,
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        )))
    };
    match member.type_name.as_str() {
        "u32" => out.extend_from_slice(
            &value
                .extract::<u32>()
                .map_err(|_| wrong("an int from 0 to 2^32 - 1"))?
                .to_le_bytes(),
        ),
        "i32" => out.extend_from_slice(
            &value
                .extract::<i32>()
                .map_err(|_| wrong("an int from -2^31 to 2^31 - 1"))?
                .to_le_bytes(),
        ),
        "f32" => {
            if value.is_instance_of::<pyo3::types::PyBool>() {
                return Err(wrong("a number"));
            }
            let v = value.extract::<f64>().map_err(|_| wrong("a number"))?;
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
        type_name => {
            let dtype = DType::of_wgsl(type_name).ok_or_else(|| wrong("a value xhal can pack"))?;
            let numpy = value.py().import("numpy")?;
            let array = numpy
                .getattr("asarray")?
                .call1((value, dtype.name()))
                .map_err(|_| wrong(&format!("convertible to {}", dtype.name())))?;
            let bytes: Vec<u8> = array.call_method0("tobytes")?.extract()?;
            if bytes.len() as u32 != member.size {
                return Err(wrong(&format!(
                    "{} values of {} ({} bytes)",
                    member.size as usize / dtype.itemsize(),
                    dtype.name(),
                    member.size
                )));
            }
            out.extend_from_slice(&bytes);
        }
    }
    Ok(())
}

/// The workgroup count `workgroups=` gives: an int or up to three ints.
fn workgroup_count(value: &Bound<'_, PyAny>) -> PyResult<[u32; 3]> {
    if let Ok(x) = value.extract::<u32>() {
        return Ok([x, 1, 1]);
    }
    let dims: Vec<u32> = value.extract().map_err(|_| {
        crate::py_err(invalid(format!(
            "workgroups= is an int or a tuple of up to three ints, not {value}"
        )))
    })?;
    match dims.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err(crate::py_err(invalid(format!(
            "workgroups= has {} dimensions; it takes one to three",
            dims.len()
        )))),
    }
}

impl Kernel {
    fn param_list(&self) -> Vec<Param> {
        let mut params: Vec<Param> = self
            .info
            .buffers
            .iter()
            .map(|b| Param {
                name: b.name.clone(),
                kind: match b.space {
                    xhal::kernel::BufferSpace::Storage => "storage",
                    xhal::kernel::BufferSpace::Uniform => "uniform",
                },
                r#type: b.type_name.clone(),
                access: Some(match b.access {
                    xhal::kernel::BufferAccess::Read => "read",
                    xhal::kernel::BufferAccess::ReadWrite => "read_write",
                }),
                writes: b.writes,
                position: b.argument,
                binding: Some(b.binding),
                group: Some(b.group),
                dtype: binding_dtype(b).map(DType::name),
                size: b.min_size(),
                offset: None,
            })
            .collect();
        if let Some(block) = &self.info.scalars {
            params.extend(block.members.iter().enumerate().map(|(k, m)| Param {
                name: m.name.clone(),
                kind: "scalar",
                r#type: m.type_name.clone(),
                access: None,
                writes: false,
                position: k as u32,
                binding: None,
                group: None,
                dtype: DType::of_wgsl(&m.type_name).map(DType::name),
                size: u64::from(m.size),
                offset: Some(m.offset),
            }));
        }
        params
    }

    fn describe_buffers(&self) -> String {
        self.info
            .buffers
            .iter()
            .map(|b| format!("`{}`", b.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What a buffer argument turned out to be.
enum Argument<'py> {
    Array(Bound<'py, Array>),
    Bytes(Vec<u8>),
}

#[pymethods]
impl Kernel {
    /// The entry point's name.
    #[getter]
    fn name(&self) -> &str {
        &self.info.name
    }
    /// `@workgroup_size(x, y, z)`.
    #[getter]
    fn workgroup_size(&self) -> (u32, u32, u32) {
        let [x, y, z] = self.info.workgroup_size;
        (x, y, z)
    }
    /// Bytes of workgroup memory the kernel uses.
    #[getter]
    fn workgroup_memory(&self) -> u64 {
        self.info.workgroup_memory_bytes
    }
    /// The parameters: buffers in launch order, then the scalar block's members.
    #[getter]
    fn params(&self) -> Vec<Param> {
        self.param_list()
    }

    /// The same as [`launch`](Self::launch).
    #[pyo3(signature = (*buffers, invocations = None, workgroups = None, stream = None, **named))]
    fn __call__(
        &self,
        buffers: &Bound<'_, PyTuple>,
        invocations: Option<u64>,
        workgroups: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
        named: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        self.launch(buffers, invocations, workgroups, stream, named)
    }

    /// Queues the kernel on `stream` (the device's default stream when `None`). Buffers come
    /// positionally in binding order or by their WGSL names, scalars by their names; give
    /// exactly one of `invocations=` (a 1-D count, the grid rounded up to whole workgroups)
    /// or `workgroups=`. Arrays must be on the kernel's device, with the dtype of the
    /// binding's elements; a `var<uniform>` binding also takes a numpy array or bytes.
    #[pyo3(signature = (*buffers, invocations = None, workgroups = None, stream = None, **named))]
    fn launch(
        &self,
        buffers: &Bound<'_, PyTuple>,
        invocations: Option<u64>,
        workgroups: Option<&Bound<'_, PyAny>>,
        stream: Option<PyRef<'_, Stream>>,
        named: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        self.core.check_open().py()?;
        let stream = self.core.stream_of(stream.as_deref()).py()?;
        let expected = self.info.buffers.len();
        if buffers.len() > expected {
            return Err(crate::py_err(invalid(format!(
                "kernel `{}` takes {expected} buffer arguments ({}); {} were given positionally",
                self.info.name,
                self.describe_buffers(),
                buffers.len()
            ))));
        }
        let py = buffers.py();
        // Named arguments this launch used; any other name is reported at the end.
        let mut used = 0usize;
        let lookup = |key: &Py<PyString>| -> PyResult<Option<Bound<'_, PyAny>>> {
            match named {
                Some(named) => named.get_item(key.bind(py)),
                None => Ok(None),
            }
        };
        let mut arguments: Vec<Argument<'_>> = Vec::with_capacity(expected);
        for (binding, (key, dtype, scalar_too)) in self.info.buffers.iter().zip(&self.buffer_keys) {
            let position = binding.argument as usize;
            // A buffer given positionally whose name a scalar shares leaves the keyword to
            // the scalar.
            let by_name = if *scalar_too && position < buffers.len() {
                None
            } else {
                lookup(key)?
            };
            let value = match (position < buffers.len(), by_name) {
                (true, Some(_)) => {
                    return Err(crate::py_err(invalid(format!(
                        "buffer `{}` was given both positionally and by name",
                        binding.name
                    ))))
                }
                (true, None) => buffers.get_item(position)?,
                (false, Some(value)) => {
                    used += 1;
                    value
                }
                (false, None) => {
                    return Err(crate::py_err(invalid(format!(
                        "kernel `{}` needs buffer `{}` ({} {}, {}); it takes {}",
                        self.info.name,
                        binding.name,
                        binding.type_name,
                        match binding.access {
                            xhal::kernel::BufferAccess::Read => "read",
                            xhal::kernel::BufferAccess::ReadWrite => "read_write",
                        },
                        binding.declared_binding(),
                        self.describe_buffers()
                    ))))
                }
            };
            if let Ok(array) = value.cast::<Array>() {
                let a = array.get();
                if !Arc::ptr_eq(&self.core, &a.storage.device) {
                    self.core
                        .check_same(&a.storage.device, &format!("buffer `{}`", binding.name))
                        .py()?;
                }
                if let Some(dtype) = *dtype {
                    if dtype != a.dtype {
                        return Err(crate::py_err(invalid(format!(
                            "buffer `{}` holds {} elements ({}), but the array is {}",
                            binding.name,
                            dtype.name(),
                            binding.type_name,
                            a.dtype.name()
                        ))));
                    }
                }
                arguments.push(Argument::Array(array.clone()));
            } else if binding.space == xhal::kernel::BufferSpace::Uniform
                || binding.access == xhal::kernel::BufferAccess::Read
            {
                let bytes: Vec<u8> = match value.extract::<Vec<u8>>() {
                    Ok(bytes) if value.is_instance_of::<pyo3::types::PyBytes>() => bytes,
                    _ => {
                        let numpy = value.py().import("numpy")?;
                        let host = numpy.getattr("ascontiguousarray")?.call1((&value,)).map_err(|_| {
                            pyo3::exceptions::PyTypeError::new_err(format!(
                                "buffer `{}` takes an xhal array, bytes or a numpy array, not {}",
                                binding.name,
                                value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                            ))
                        })?;
                        host.call_method0("tobytes")?.extract()?
                    }
                };
                arguments.push(Argument::Bytes(bytes));
            } else {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "buffer `{}` is read_write: it takes an xhal array, not {}",
                    binding.name,
                    value.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                )));
            }
        }
        // The scalar block's members, one after another in `block`, with their lengths and
        // alignments.
        let mut block: Vec<u8> = Vec::new();
        let mut scalars: Vec<(usize, usize)> = Vec::new();
        if let Some(info) = &self.info.scalars {
            for (member, (key, buffer_too)) in info.members.iter().zip(&self.scalar_keys) {
                let value = lookup(key)?.ok_or_else(|| {
                    crate::py_err(invalid(format!(
                        "kernel `{}` needs scalar `{}` ({}), by name",
                        self.info.name, member.name, member.type_name
                    )))
                })?;
                if *buffer_too
                    && self
                        .info
                        .buffers
                        .iter()
                        .any(|b| b.name == member.name && b.argument as usize >= buffers.len())
                {
                    // One keyword cannot name both: a call cannot tell them apart.
                    return Err(crate::py_err(invalid(format!(
                        "kernel `{}` has a buffer and a scalar both named `{}`; give the buffer \
                         positionally, or rename one",
                        self.info.name, member.name
                    ))));
                }
                used += 1;
                let alignment = (member.size as usize).next_power_of_two().clamp(1, 16);
                let start = block.len();
                scalar_bytes(member, &value, &mut block)?;
                scalars.push((block.len() - start, alignment));
            }
        }
        let given = named.map_or(0, |named| named.len());
        if used != given {
            let known: Vec<String> = self.param_list().into_iter().map(|p| p.name).collect();
            let unknown: Vec<String> = named
                .map(|named| named.keys().iter().map(|k| k.to_string()).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .filter(|k| !known.contains(k))
                .collect();
            return Err(crate::py_err(invalid(format!(
                "kernel `{}` has no parameter {}; its parameters are {}",
                self.info.name,
                unknown.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
                known.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ))));
        }
        let mut launch = xhal::Launch::new(&self.kernel);
        launch = match (invocations, workgroups) {
            (Some(n), None) => launch.workgroups_for_invocations(n),
            (None, Some(groups)) => {
                let [x, y, z] = workgroup_count(groups)?;
                launch.workgroups(x, y, z)
            }
            (None, None) => {
                return Err(crate::py_err(invalid(format!(
                    "a launch of `{}` needs invocations= or workgroups=",
                    self.info.name
                ))))
            }
            (Some(_), Some(_)) => return Err(crate::py_err(invalid("give invocations= or workgroups=, not both"))),
        };
        for argument in &arguments {
            launch = match argument {
                Argument::Array(array) => launch.buffer(array.get().view()),
                Argument::Bytes(bytes) => launch.uniform_bytes(bytes),
            };
        }
        let mut start = 0;
        for (length, alignment) in &scalars {
            launch = launch.scalar_bytes(&block[start..start + length], *alignment);
            start += length;
        }
        stream.launch(&launch).py()
    }

    fn __repr__(&self) -> String {
        let params: Vec<String> = self.param_list().into_iter().map(|p| p.name).collect();
        format!("Kernel('{}', params=[{}])", self.info.name, params.join(", "))
    }
}

//! WGSL modules, kernels with their reflection, and checked launches.

use smallvec::SmallVec;
use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use crate::handles::{self, Object};
use crate::memory::xhal_buffer_t;
use crate::runtime::xhal_device_t;
use crate::stream::{byte_range, xhal_stream_t, StreamObject};
use crate::{call, fill_sized, invalid, read_sized, text_arg, write_out, xhal_status_t, Result};

/// Loaded WGSL and its entry points. Opaque; from `xhal_module_load_wgsl`.
pub struct xhal_module_t {
    _private: [u8; 0],
}

/// One entry point of a module, with its reflection. Opaque; from `xhal_module_kernel`.
pub struct xhal_kernel_t {
    _private: [u8; 0],
}

pub(crate) struct ModuleObject {
    module: xhal::Module,
    entry_points: Vec<CString>,
}

pub(crate) struct KernelObject {
    kernel: xhal::Kernel,
    info: xhal::EntryPointInfo,
    name: CString,
    /// Per parameter (bindings, then scalar-block members): its name and its WGSL type.
    strings: Vec<(CString, CString)>,
}

/// A value for an `override` constant: by name, or by `@id` written as a decimal string.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_override_t {
    /// The constant's name, or its `@id` as `"12"`.
    pub name: *const c_char,
    /// Its value; booleans are 0 and 1, integers must be exact.
    pub value: f64,
}

/// Compiles WGSL `source` (NUL-terminated) for the device, with values for its `override`
/// constants (`overrides` may be null when `override_count` is 0; the others take their
/// defaults). An error names the line and what is wrong.
///
/// # Safety
///
/// `source` is NUL-terminated; `overrides` has `override_count` readable entries whose names
/// are NUL-terminated; `module` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_module_load_wgsl(
    device: *const xhal_device_t,
    source: *const c_char,
    overrides: *const xhal_override_t,
    override_count: usize,
    module: *mut *mut xhal_module_t,
) -> xhal_status_t {
    call("xhal_module_load_wgsl", || {
        let object = handles::device(device as usize, "device")?;
        // SAFETY: the caller passes a NUL-terminated string.
        let source = unsafe { text_arg(source, "source")? };
        if overrides.is_null() && override_count > 0 {
            return Err(invalid(format!(
                "overrides is a null pointer with override_count {override_count}"
            )));
        }
        let overrides: &[xhal_override_t] = if override_count == 0 {
            &[]
        } else {
            // SAFETY: the caller gives `override_count` readable entries, and the pointer is
            // not null.
            unsafe { std::slice::from_raw_parts(overrides, override_count) }
        };
        let mut values = Vec::with_capacity(overrides.len());
        for (i, o) in overrides.iter().enumerate() {
            // SAFETY: each entry's name is NUL-terminated, per the contract.
            let name = unsafe { text_arg(o.name, &format!("overrides[{i}].name"))? };
            values.push((name, o.value));
        }
        let loaded = object.device.load_wgsl_with_overrides(source, &values)?;
        let entry_points = loaded
            .entry_points()
            .unwrap_or_default()
            .iter()
            .map(|ep| CString::new(ep.name.as_str()).unwrap_or_default())
            .collect();
        let handle = handles::insert(Object::Module(Arc::new(ModuleObject {
            module: loaded,
            entry_points,
        })));
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(module, handle as *mut xhal_module_t, "module") }
    })
}

/// Destroys a module handle (null is accepted); its kernels stay usable.
#[no_mangle]
pub extern "C" fn xhal_module_destroy(module: *mut xhal_module_t) -> xhal_status_t {
    call("xhal_module_destroy", || {
        handles::remove(module as usize, "module", "module").map(drop)
    })
}

/// The number of compute entry points in the module.
///
/// # Safety
///
/// `count` points to a writable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn xhal_module_entry_point_count(module: *const xhal_module_t, count: *mut u32) -> xhal_status_t {
    call("xhal_module_entry_point_count", || {
        let object = handles::module(module as usize, "module")?;
        // SAFETY: the caller passes a writable u32.
        unsafe { write_out(count, object.entry_points.len() as u32, "count") }
    })
}

/// The name of entry point `index`; the string belongs to the module.
///
/// # Safety
///
/// `name` points to writable storage for a pointer.
#[no_mangle]
pub unsafe extern "C" fn xhal_module_entry_point_name(
    module: *const xhal_module_t,
    index: u32,
    name: *mut *const c_char,
) -> xhal_status_t {
    call("xhal_module_entry_point_name", || {
        let object = handles::module(module as usize, "module")?;
        let entry = object.entry_points.get(index as usize).ok_or_else(|| {
            xhal::Error::not_found(format!(
                "entry point {index}: the module has {}",
                object.entry_points.len()
            ))
        })?;
        // SAFETY: the caller passes writable storage for a pointer.
        unsafe { write_out(name, entry.as_ptr(), "name") }
    })
}

/// The kernel of entry point `name` (NUL-terminated), or of the module's only entry point
/// when `name` is null.
///
/// # Safety
///
/// `name` is null or NUL-terminated; `kernel` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_module_kernel(
    module: *const xhal_module_t,
    name: *const c_char,
    kernel: *mut *mut xhal_kernel_t,
) -> xhal_status_t {
    call("xhal_module_kernel", || {
        let object = handles::module(module as usize, "module")?;
        let name = if name.is_null() {
            match object.entry_points.as_slice() {
                [only] => only.to_str().unwrap_or_default().to_owned(),
                all => {
                    return Err(invalid(format!(
                        "name is null, which picks the only entry point, but the module has {}; name one",
                        all.len()
                    )))
                }
            }
        } else {
            // SAFETY: a non-null name is NUL-terminated, per the contract.
            unsafe { text_arg(name, "name")? }.to_owned()
        };
        let found = object.module.kernel(&name)?;
        let info = found
            .info()
            .cloned()
            .ok_or_else(|| xhal::Error::internal(format!("entry point `{name}` has no reflection")))?;
        let c = |text: &str| CString::new(text).unwrap_or_default();
        let mut strings: Vec<(CString, CString)> = info.buffers.iter().map(|b| (c(&b.name), c(&b.type_name))).collect();
        if let Some(block) = &info.scalars {
            strings.extend(block.members.iter().map(|m| (c(&m.name), c(&m.type_name))));
        }
        let handle = handles::insert(Object::Kernel(Arc::new(KernelObject {
            kernel: found,
            info,
            name: c(&name),
            strings,
        })));
        // SAFETY: the caller passes writable storage for a handle.
        unsafe { write_out(kernel, handle as *mut xhal_kernel_t, "kernel") }
    })
}

/// Destroys a kernel handle (null is accepted); launches already queued are unaffected.
#[no_mangle]
pub extern "C" fn xhal_kernel_destroy(kernel: *mut xhal_kernel_t) -> xhal_status_t {
    call("xhal_kernel_destroy", || {
        handles::remove(kernel as usize, "kernel", "kernel").map(drop)
    })
}

/// A kernel's interface. Zero-initialise it and set `struct_size`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_kernel_info_t {
    /// `sizeof(xhal_kernel_info_t)`, set by the caller.
    pub struct_size: usize,
    /// The entry point's name; belongs to the kernel.
    pub name: *const c_char,
    /// `@workgroup_size`, with overrides resolved and missing dimensions 1.
    pub workgroup_size: [u32; 3],
    /// Buffer bindings a launch passes, in `xhal_launch_t::bindings` order.
    pub binding_count: u32,
    /// Members of the scalar block (`var<immediate>`), 0 without one.
    pub scalar_count: u32,
    /// Bytes of the scalar block a launch passes in `xhal_launch_t::scalars`, 0 without one.
    pub scalar_block_size: u32,
    /// Bytes of `var<workgroup>` memory.
    pub workgroup_memory_bytes: u64,
}

const KERNEL_INFO_V1_0: usize = std::mem::offset_of!(xhal_kernel_info_t, workgroup_memory_bytes) + 8;

/// The kernel's interface: name, workgroup size and how many parameters of each kind.
///
/// # Safety
///
/// `info` points to a writable `xhal_kernel_info_t` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn xhal_kernel_get_info(
    kernel: *const xhal_kernel_t,
    info: *mut xhal_kernel_info_t,
) -> xhal_status_t {
    call("xhal_kernel_get_info", || {
        let object = handles::kernel(kernel as usize, "kernel")?;
        let i = &object.info;
        let value = xhal_kernel_info_t {
            struct_size: std::mem::size_of::<xhal_kernel_info_t>(),
            name: object.name.as_ptr(),
            workgroup_size: i.workgroup_size,
            binding_count: i.buffers.len() as u32,
            scalar_count: i.scalars.as_ref().map_or(0, |s| s.members.len() as u32),
            scalar_block_size: i.scalar_block_size(),
            workgroup_memory_bytes: i.workgroup_memory_bytes,
        };
        // SAFETY: the caller passes a writable struct of its struct_size.
        unsafe { fill_sized(info, value, KERNEL_INFO_V1_0, "info") }
    })
}

/// `xhal_param_info_t::kind`: a `var<storage>` binding.
pub const XHAL_PARAM_STORAGE: u32 = 1;
/// `xhal_param_info_t::kind`: a `var<uniform>` binding.
pub const XHAL_PARAM_UNIFORM: u32 = 2;
/// `xhal_param_info_t::kind`: a member of the scalar block.
pub const XHAL_PARAM_SCALAR: u32 = 3;
/// `xhal_param_info_t::access`: the kernel only reads the binding.
pub const XHAL_ACCESS_READ: u32 = 1;
/// `xhal_param_info_t::access`: declared `read_write`.
pub const XHAL_ACCESS_READ_WRITE: u32 = 2;

/// One parameter of a kernel. Zero-initialise it and set `struct_size`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_param_info_t {
    /// `sizeof(xhal_param_info_t)`, set by the caller.
    pub struct_size: usize,
    /// The WGSL name; belongs to the kernel.
    pub name: *const c_char,
    /// The WGSL type (`array<f32>`, `Params`, `u32`); belongs to the kernel.
    pub type_name: *const c_char,
    /// `XHAL_PARAM_`.
    pub kind: u32,
    /// `XHAL_ACCESS_` for bindings, 0 for scalars.
    pub access: u32,
    /// 1 when the kernel writes the binding, else 0.
    pub writes: u32,
    /// The position among the bindings (launch order), or among the scalar members.
    pub position: u32,
    /// `@group` (bindings).
    pub group: u32,
    /// `@binding` (bindings).
    pub binding: u32,
    /// Bytes: the smallest view a binding takes, or a scalar's size.
    pub size: u64,
    /// The scalar's byte offset in the scalar block (scalars).
    pub offset: u32,
    /// Bytes from one element of a binding's array to the next (0 when it has no array).
    pub element_stride: u32,
}

const PARAM_INFO_V1_0: usize = std::mem::offset_of!(xhal_param_info_t, element_stride) + 4;

/// Parameter `index` of the kernel: bindings first, in launch order, then the members of the
/// scalar block (`binding_count + scalar_count` in all).
///
/// # Safety
///
/// `param` points to a writable `xhal_param_info_t` whose `struct_size` is set.
#[no_mangle]
pub unsafe extern "C" fn xhal_kernel_param(
    kernel: *const xhal_kernel_t,
    index: u32,
    param: *mut xhal_param_info_t,
) -> xhal_status_t {
    call("xhal_kernel_param", || {
        let object = handles::kernel(kernel as usize, "kernel")?;
        let info = &object.info;
        let members = info.scalars.as_ref().map_or(&[][..], |s| s.members.as_slice());
        let total = info.buffers.len() + members.len();
        let (name, type_name) = object
            .strings
            .get(index as usize)
            .map(|(n, t)| (n.as_ptr(), t.as_ptr()))
            .ok_or_else(|| xhal::Error::not_found(format!("parameter {index}: the kernel has {total}")))?;
        let value = match info.buffers.get(index as usize) {
            Some(b) => xhal_param_info_t {
                struct_size: std::mem::size_of::<xhal_param_info_t>(),
                name,
                type_name,
                kind: match b.space {
                    xhal::kernel::BufferSpace::Storage => XHAL_PARAM_STORAGE,
                    xhal::kernel::BufferSpace::Uniform => XHAL_PARAM_UNIFORM,
                },
                access: match b.access {
                    xhal::kernel::BufferAccess::Read => XHAL_ACCESS_READ,
                    xhal::kernel::BufferAccess::ReadWrite => XHAL_ACCESS_READ_WRITE,
                },
                writes: u32::from(b.writes),
                position: b.argument,
                group: b.group,
                binding: b.binding,
                size: b.min_size(),
                offset: 0,
                element_stride: b.element.as_ref().map_or(0, |e| e.stride),
            },
            None => {
                let k = index as usize - info.buffers.len();
                let m = &members[k];
                xhal_param_info_t {
                    struct_size: std::mem::size_of::<xhal_param_info_t>(),
                    name,
                    type_name,
                    kind: XHAL_PARAM_SCALAR,
                    access: 0,
                    writes: 0,
                    position: k as u32,
                    group: 0,
                    binding: 0,
                    size: u64::from(m.size),
                    offset: m.offset,
                    element_stride: 0,
                }
            }
        };
        // SAFETY: the caller passes a writable struct of its struct_size.
        unsafe { fill_sized(param, value, PARAM_INFO_V1_0, "param") }
    })
}

/// `xhal_binding_t::size`: from `offset` to the end of the buffer.
pub const XHAL_WHOLE_SIZE: u64 = u64::MAX;

/// One binding of a launch: bytes `offset` to `offset + size` of `buffer`, or, with `buffer`
/// null, `size` bytes at `data` (a uniform's value), copied when the launch is queued.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_binding_t {
    /// The buffer, or null to pass `data`.
    pub buffer: *const xhal_buffer_t,
    /// Byte offset into the buffer (within the device's alignment for bindings).
    pub offset: u64,
    /// Bytes; `XHAL_WHOLE_SIZE` for the rest of the buffer.
    pub size: u64,
    /// With `buffer` null: `size` bytes of the binding's value.
    pub data: *const c_void,
}

/// A launch. Zero-initialise it and set `struct_size`. Give either `workgroups` or
/// `invocations`: with `invocations` not 0 (and `workgroups` all 0), enough workgroups for
/// that many invocations along x (spilling into y past 65,535 workgroups) are launched.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct xhal_launch_t {
    /// `sizeof(xhal_launch_t)`, set by the caller.
    pub struct_size: usize,
    /// The kernel.
    pub kernel: *const xhal_kernel_t,
    /// Workgroups in x, y and z; 0 in y or z counts as 1, so that a launch which sets only
    /// `workgroups[0]` is one-dimensional.
    pub workgroups: [u32; 3],
    /// Invocations along x, instead of `workgroups`.
    pub invocations: u64,
    /// `binding_count` bindings, in the kernel's binding order.
    pub bindings: *const xhal_binding_t,
    /// How many bindings; must be the kernel's `binding_count`.
    pub binding_count: usize,
    /// The scalar block, laid out as WGSL lays out the kernel's `var<immediate>` (see
    /// `xhal_kernel_param` for each member's offset); null when `scalar_size` is 0.
    pub scalars: *const c_void,
    /// Bytes at `scalars`; must be the kernel's `scalar_block_size`.
    pub scalar_size: usize,
}

const LAUNCH_V1_0: usize = std::mem::offset_of!(xhal_launch_t, scalar_size) + std::mem::size_of::<usize>();

/// Queues a launch on `stream`, checked first against the kernel's reflection: the number of
/// bindings, each binding's size, alignment, device and access, the scalar block's size, and
/// the workgroup counts. Nothing is queued when a check fails, and the message names the
/// parameter.
///
/// # Safety
///
/// `launch` points to a readable `xhal_launch_t` of its `struct_size`, whose `bindings` has
/// `binding_count` entries and whose `scalars` has `scalar_size` bytes; each `data` binding
/// has `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_launch(
    stream: *const xhal_stream_t,
    launch: *const xhal_launch_t,
) -> xhal_status_t {
    call("xhal_stream_launch", || {
        let defaults = xhal_launch_t {
            struct_size: 0,
            kernel: std::ptr::null(),
            workgroups: [0; 3],
            invocations: 0,
            bindings: std::ptr::null(),
            binding_count: 0,
            scalars: std::ptr::null(),
            scalar_size: 0,
        };
        // SAFETY: the caller passes a readable launch struct of its struct_size.
        let desc = unsafe { read_sized(launch, defaults, LAUNCH_V1_0, "launch")? };
        let stream = handles::stream(stream as usize, "stream")?;
        let kernel = handles::kernel(desc.kernel as usize, "launch.kernel")?;
        launch_checked(&stream, &kernel, &desc)
    })
}

fn launch_checked(stream: &StreamObject, kernel: &KernelObject, desc: &xhal_launch_t) -> Result<()> {
    let info = &kernel.info;
    let name = &info.name;
    if desc.binding_count != info.buffers.len() {
        return Err(invalid(format!(
            "kernel `{name}` has {} binding(s); launch.binding_count is {}",
            info.buffers.len(),
            desc.binding_count
        )));
    }
    if desc.bindings.is_null() && desc.binding_count > 0 {
        return Err(invalid("launch.bindings is a null pointer"));
    }
    let bindings: &[xhal_binding_t] = if desc.binding_count == 0 {
        &[]
    } else {
        // SAFETY: the caller gives `binding_count` readable entries, and the pointer is not null.
        unsafe { std::slice::from_raw_parts(desc.bindings, desc.binding_count) }
    };
    let block_size = info.scalar_block_size() as usize;
    if desc.scalar_size != block_size {
        return Err(invalid(format!(
            "kernel `{name}` takes a scalar block of {block_size} bytes; launch.scalar_size is {}",
            desc.scalar_size
        )));
    }
    if desc.scalars.is_null() && desc.scalar_size > 0 {
        return Err(invalid("launch.scalars is a null pointer"));
    }
    let name = |i: usize| format!("launch.bindings[{i}] (`{}`)", info.buffers[i].name);
    let buffer_objects = handles::buffers(
        bindings
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.buffer.is_null())
            .map(|(i, b)| (b.buffer as usize, i)),
        name,
    )?;
    let mut ranges: SmallVec<[_; 8]> = SmallVec::new();
    let mut next_buffer = 0;
    for (i, binding) in bindings.iter().enumerate() {
        // Messages are written only for errors: launches are hot.
        let what = || name(i);
        if binding.buffer.is_null() {
            if binding.data.is_null() {
                return Err(invalid(format!("{}: buffer and data are both null; pass one", what())));
            }
            if binding.size == 0 || binding.size == XHAL_WHOLE_SIZE {
                return Err(invalid(format!("{}: a data binding needs its size in bytes", what())));
            }
            let size = usize::try_from(binding.size).map_err(|_| invalid(format!("{}: size too large", what())))?;
            // SAFETY: the caller gives `size` readable bytes at `data`, which is not null.
            let bytes = unsafe { std::slice::from_raw_parts(binding.data.cast::<u8>(), size) };
            ranges.push(Err(bytes));
        } else {
            let object = &buffer_objects[next_buffer];
            next_buffer += 1;
            let size = if binding.size == XHAL_WHOLE_SIZE {
                object.buffer.size_bytes().saturating_sub(binding.offset)
            } else {
                binding.size
            };
            let range = byte_range(object, binding.offset, size, "")
                .or_else(|_| byte_range(object, binding.offset, size, &what()))?;
            ranges.push(Ok((object, range)));
        }
    }
    let mut builder = xhal::Launch::new(&kernel.kernel);
    builder = if desc.invocations != 0 {
        if desc.workgroups != [0, 0, 0] {
            return Err(invalid(
                "launch gives both invocations and workgroups; give one (leave the other 0)",
            ));
        }
        builder.workgroups_for_invocations(desc.invocations)
    } else {
        let [x, y, z] = desc.workgroups;
        if x == 0 {
            return Err(invalid(
                "launch gives neither invocations nor workgroups[0]; set one (a zero-initialised launch has neither)",
            ));
        }
        builder.workgroups(x, y.max(1), z.max(1))
    };
    for range in &ranges {
        builder = match range {
            Ok((object, bytes)) => builder.buffer(object.buffer.slice(bytes.clone())),
            Err(data) => builder.uniform_bytes(data),
        };
    }
    if desc.scalar_size > 0 {
        // SAFETY: the caller gives `scalar_size` readable bytes, which equals the block's
        // size (checked above), at a non-null pointer. The block is laid out as the kernel's
        // `var<immediate>`, so it passes whole.
        let bytes = unsafe { std::slice::from_raw_parts(desc.scalars.cast::<u8>(), desc.scalar_size) };
        builder = builder.scalar_block(bytes);
    }
    if let Some(recorded) = stream.if_capturing(|c| c.builder.launch(c.lane, &builder).map(|_| ())) {
        return recorded;
    }
    stream.stream.launch(&builder)
}

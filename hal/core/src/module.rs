//! Modules, kernels, and the launch-argument builder.
//!
//! The argument ABI is the same on every backend: an ordered list of buffer views (buffer,
//! byte offset, byte length) and one block of scalar bytes laid out by WGSL rules (each
//! scalar or vector aligned to its WGSL alignment, the block rounded up to the largest).

use crate::backend::{KernelFormat, KernelHandle, ModuleHandle};
use crate::buffer::{Buffer, BufferMemory};
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use std::ops::Range;
use std::sync::Arc;

struct ModuleShared {
    device: Arc<DeviceShared>,
    handle: ModuleHandle,
    format: KernelFormat,
}

impl Drop for ModuleShared {
    fn drop(&mut self) {
        self.device.backend.module_destroy(self.handle);
    }
}

/// Loaded kernel code. Kernels keep their module alive.
#[derive(Clone)]
pub struct Module {
    shared: Arc<ModuleShared>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("device", &self.shared.device.label())
            .field("format", &self.shared.format)
            .finish()
    }
}

impl Module {
    pub(crate) fn load(device: Arc<DeviceShared>, format: KernelFormat, code: &[u8]) -> Result<Module> {
        if !device.info.kernel_formats.contains(&format) {
            let accepted: Vec<String> = device.info.kernel_formats.iter().map(|f| f.name()).collect();
            return Err(Error::unsupported(format!(
                "device {} does not accept kernel format {format}; it accepts: {}",
                device.label(),
                accepted.join(", ")
            )));
        }
        let handle = device.backend.module_load(device.handle, format, code)?;
        Ok(Module {
            shared: Arc::new(ModuleShared { device, handle, format }),
        })
    }

    /// The format the module was loaded from.
    pub fn format(&self) -> KernelFormat {
        self.shared.format
    }

    /// Finds the entry point `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let handle = self.shared.device.backend.kernel_get(self.shared.handle, name)?;
        Ok(Kernel {
            shared: Arc::new(KernelShared {
                module: self.shared.clone(),
                handle,
                name: name.to_owned(),
            }),
        })
    }
}

struct KernelShared {
    module: Arc<ModuleShared>,
    handle: KernelHandle,
    name: String,
}

impl Drop for KernelShared {
    fn drop(&mut self) {
        self.module.device.backend.kernel_destroy(self.handle);
    }
}

/// One entry point of a module.
#[derive(Clone)]
pub struct Kernel {
    shared: Arc<KernelShared>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.shared.name).finish()
    }
}

impl Kernel {
    /// The entry point's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    pub(crate) fn handle(&self) -> KernelHandle {
        self.shared.handle
    }

    pub(crate) fn module_device(&self) -> Arc<DeviceShared> {
        self.shared.module.device.clone()
    }

    pub(crate) fn keepalive(&self) -> Arc<dyn Send + Sync> {
        self.shared.clone() as Arc<dyn Send + Sync>
    }
}

/// One buffer argument of a launch.
pub(crate) struct BufferBinding {
    pub(crate) memory: Arc<BufferMemory>,
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// A kernel launch being put together: workgroup counts, buffer arguments in parameter order,
/// and scalars. Mistakes are collected and reported by [`Stream::launch`](crate::Stream::launch),
/// naming the kernel and the argument.
pub struct Launch<'a> {
    kernel: &'a Kernel,
    workgroups: [u32; 3],
    buffers: Vec<BufferBinding>,
    scalars: Vec<u8>,
    scalar_alignment: usize,
    error: Option<Error>,
}

impl<'a> Launch<'a> {
    /// A launch of `kernel` over one workgroup with no arguments.
    pub fn new(kernel: &'a Kernel) -> Launch<'a> {
        Launch {
            kernel,
            workgroups: [1, 1, 1],
            buffers: Vec::new(),
            scalars: Vec::new(),
            scalar_alignment: 1,
            error: None,
        }
    }

    /// Number of workgroups in x, y and z.
    pub fn workgroups(mut self, x: u32, y: u32, z: u32) -> Self {
        self.workgroups = [x, y, z];
        self
    }

    /// Binds the whole buffer as the next buffer argument.
    pub fn buffer<T>(self, buffer: &Buffer<T>) -> Self {
        let len = buffer.len();
        self.buffer_range(buffer, 0..len)
    }

    /// Binds elements `range` of `buffer` as the next buffer argument.
    pub fn buffer_range<T>(mut self, buffer: &Buffer<T>, range: Range<usize>) -> Self {
        let position = self.buffers.len();
        let what = format!("buffer argument {position} of kernel `{}`", self.kernel.name());
        match buffer.byte_range(range, &what) {
            Ok((offset, size)) => self.buffers.push(BufferBinding {
                memory: buffer.memory.clone(),
                offset,
                size,
            }),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// Appends a scalar (or vector, as an array) to the scalar block, aligned as WGSL aligns
    /// it: to its size rounded up to a power of two, at most 16 (so `[f32; 3]` aligns to 16
    /// like a `vec3<f32>`).
    pub fn scalar<T: bytemuck::Pod>(mut self, value: T) -> Self {
        let bytes = bytemuck::bytes_of(&value);
        let alignment = bytes.len().next_power_of_two().clamp(1, 16);
        self.push_scalar_bytes(bytes, alignment);
        self
    }

    /// Appends raw bytes to the scalar block with the given alignment (a power of two).
    pub fn scalar_bytes(mut self, bytes: &[u8], alignment: usize) -> Self {
        if !alignment.is_power_of_two() {
            self.error.get_or_insert(Error::invalid_argument(format!(
                "scalar alignment {alignment} of kernel `{}` is not a power of two",
                self.kernel.name()
            )));
            return self;
        }
        self.push_scalar_bytes(bytes, alignment);
        self
    }

    fn push_scalar_bytes(&mut self, bytes: &[u8], alignment: usize) {
        let start = self.scalars.len().div_ceil(alignment) * alignment;
        self.scalars.resize(start, 0);
        self.scalars.extend_from_slice(bytes);
        self.scalar_alignment = self.scalar_alignment.max(alignment);
    }

    pub(crate) fn kernel(&self) -> &Kernel {
        self.kernel
    }

    pub(crate) fn buffers(&self) -> &[BufferBinding] {
        &self.buffers
    }

    pub(crate) fn workgroup_count(&self) -> [u32; 3] {
        self.workgroups
    }

    /// The scalar block, padded to its alignment as a WGSL struct would be. Padding bytes are
    /// zero so results never depend on leftover memory.
    pub(crate) fn scalar_bytes_padded(&self) -> Vec<u8> {
        let mut block = self.scalars.clone();
        let size = block.len().div_ceil(self.scalar_alignment) * self.scalar_alignment;
        block.resize(size, 0);
        block
    }

    /// Checks the collected arguments against the device's limits.
    pub(crate) fn validate_for(&self, device: &DeviceShared) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let name = self.kernel.name();
        let info = &device.info;
        for (axis, (&count, &max)) in ["x", "y", "z"]
            .iter()
            .zip(self.workgroups.iter().zip(&info.max_workgroup_count))
        {
            if count == 0 {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: workgroup count in {axis} is 0; every dimension needs at least 1"
                )));
            }
            if max > 0 && count > max {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: workgroup count {count} in {axis} exceeds the device limit {max}"
                )));
            }
        }
        if info.max_buffer_arguments > 0 && self.buffers.len() > info.max_buffer_arguments as usize {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: {} buffer arguments exceed the device limit {}",
                self.buffers.len(),
                info.max_buffer_arguments
            )));
        }
        let alignment = u64::from(info.buffer_offset_alignment.max(1));
        for (position, binding) in self.buffers.iter().enumerate() {
            if binding.offset % alignment != 0 {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: buffer argument {position} starts at byte {}, which is not a multiple of the device's \
                     buffer offset alignment {alignment}",
                    binding.offset
                )));
            }
        }
        let scalar_size = self.scalars.len().div_ceil(self.scalar_alignment) * self.scalar_alignment;
        if info.max_scalar_block_size > 0 && scalar_size > info.max_scalar_block_size as usize {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: scalar block of {scalar_size} bytes exceeds the device limit {}",
                info.max_scalar_block_size
            )));
        }
        Ok(())
    }
}

//! Modules, kernels, and the launch-argument builder.
//!
//! The argument ABI is the same on every backend: an ordered list of buffer views (buffer,
//! byte offset, byte length) and one block of scalar bytes laid out by WGSL rules. A module
//! loaded from WGSL carries its reflection, so a launch is checked against the kernel's
//! interface before any backend sees it: the number of buffers, buffer versus scalar, each
//! view's size against what its binding needs, and each scalar against the member of the
//! `var<immediate>` block it fills. Scalars are placed at their members' offsets.

use crate::backend::{KernelFormat, KernelHandle, ModuleHandle};
use crate::buffer::{BufferMemory, BufferSlice};
use crate::device::DeviceShared;
use crate::error::{Error, Result};
use smallvec::SmallVec;
use std::sync::Arc;
use xhal_kernel::{BufferAccess, BufferSize, EntryPointInfo, ScalarBlockInfo};

/// Most workgroups a launch may have in one dimension on every backend.
const MAX_WORKGROUPS_PER_DIMENSION: u64 = 65_535;

struct ModuleShared {
    device: Arc<DeviceShared>,
    handle: ModuleHandle,
    format: KernelFormat,
    /// Entry points as reflected from WGSL; `None` for native code loaded without it.
    reflection: Option<Arc<[EntryPointInfo]>>,
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
    pub(crate) fn load(
        device: Arc<DeviceShared>,
        format: KernelFormat,
        code: &[u8],
        reflection: Option<Arc<[EntryPointInfo]>>,
    ) -> Result<Module> {
        if !device.info.kernel_formats.contains(&format) {
            let accepted: Vec<String> = device.info.kernel_formats.iter().map(|f| f.name()).collect();
            return Err(Error::unsupported(format!(
                "device {} does not accept kernel format {format}; it accepts: {}",
                device.label(),
                accepted.join(", ")
            )));
        }
        let span = crate::trace::span("compile", "load module", || {
            vec![
                ("device", device.label().into()),
                ("format", format.name().into()),
                ("bytes", code.len().into()),
            ]
        });
        let handle = device.backend.module_load(device.handle, format, code)?;
        span.end();
        Ok(Module {
            shared: Arc::new(ModuleShared {
                device,
                handle,
                format,
                reflection,
            }),
        })
    }

    /// The format the device received (WGSL may have been translated on the way).
    pub fn format(&self) -> KernelFormat {
        self.shared.format
    }

    /// The compute entry points, when the module came from WGSL.
    pub fn entry_points(&self) -> Option<&[EntryPointInfo]> {
        self.shared.reflection.as_deref()
    }

    /// Finds the entry point `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        // A backend may build the entry point here (the CPU backend's C compile).
        let _span = crate::trace::span("compile", "get kernel", || {
            vec![
                ("kernel", name.to_string().into()),
                ("device", self.shared.device.label().into()),
            ]
        });
        let info = match &self.shared.reflection {
            None => None,
            Some(entry_points) => match entry_points.iter().find(|entry| entry.name == name) {
                Some(entry) => Some(entry.clone()),
                None => {
                    let names: Vec<&str> = entry_points.iter().map(|entry| entry.name.as_str()).collect();
                    return Err(Error::not_found(format!(
                        "the module has no compute entry point `{name}`; it has: {}",
                        if names.is_empty() {
                            "none".to_owned()
                        } else {
                            names.join(", ")
                        }
                    )));
                }
            },
        };
        let handle = self.shared.device.backend.kernel_get(self.shared.handle, name)?;
        Ok(Kernel {
            shared: Arc::new(KernelShared {
                module: self.shared.clone(),
                handle,
                name: name.to_owned(),
                info,
            }),
        })
    }
}

struct KernelShared {
    module: Arc<ModuleShared>,
    handle: KernelHandle,
    name: String,
    info: Option<EntryPointInfo>,
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

    /// The kernel's interface, when its module came from WGSL.
    pub fn info(&self) -> Option<&EntryPointInfo> {
        self.shared.info.as_ref()
    }

    /// `@workgroup_size`, when known.
    pub fn workgroup_size(&self) -> Option<[u32; 3]> {
        self.info().map(|info| info.workgroup_size)
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
pub(crate) enum BufferBinding {
    /// A view of a buffer the application owns.
    View {
        memory: Arc<BufferMemory>,
        offset: u64,
        size: u64,
    },
    /// Bytes that core copies into the stream's uniform arena when the launch is queued (see
    /// [`Launch::uniform`]).
    Staged(Arc<[u8]>),
}

/// One scalar given to a launch: its bytes, its WGSL-style alignment, and its Rust type's
/// name for messages.
struct ScalarArgument {
    bytes: SmallVec<[u8; 16]>,
    alignment: usize,
    type_name: &'static str,
}

/// What the builder was given, in order, so that a scalar where a buffer belongs (or the
/// reverse) can be named by its position.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ArgumentKind {
    Buffer,
    Scalar,
}

/// A kernel launch being put together: workgroup counts, buffer arguments in parameter order,
/// and scalars. Mistakes are collected and reported by [`Stream::launch`](crate::Stream::launch),
/// naming the kernel and the argument.
pub struct Launch<'a> {
    kernel: &'a Kernel,
    workgroups: [u32; 3],
    order: SmallVec<[ArgumentKind; 8]>,
    buffers: SmallVec<[BufferBinding; 8]>,
    // A Vec, empty (and unallocated) unless scalars come one by one: the builder is moved
    // by value at each step, so what it holds inline is copied each time.
    scalars: Vec<ScalarArgument>,
    /// The whole block, given at once with [`Launch::scalar_block`].
    block: Option<&'a [u8]>,
    error: Option<Error>,
}

/// A launch's scalar block as the backend receives it; most fit without a heap allocation.
pub(crate) type ScalarBlock = SmallVec<[u8; 128]>;

impl<'a> Launch<'a> {
    /// A launch of `kernel` over one workgroup with no arguments.
    pub fn new(kernel: &'a Kernel) -> Launch<'a> {
        Launch {
            kernel,
            workgroups: [1, 1, 1],
            order: SmallVec::new(),
            buffers: SmallVec::new(),
            scalars: Vec::new(),
            block: None,
            error: None,
        }
    }

    fn fail(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }

    /// Number of workgroups in x, y and z.
    #[inline]
    pub fn workgroups(mut self, x: u32, y: u32, z: u32) -> Self {
        self.workgroups = [x, y, z];
        self
    }

    /// Enough workgroups for `invocations` invocations along x, spilling into y once x would
    /// hold more than 65,535 workgroups, with the rows as even as they can be. The kernel then finds its flat index as
    /// `id.x + id.y * num_workgroups.x * workgroup_size.x` and must skip indices past the end.
    /// Needs the kernel's workgroup size, so a module loaded from WGSL.
    #[inline]
    pub fn workgroups_for_invocations(mut self, invocations: u64) -> Self {
        let Some([size_x, _, _]) = self.kernel.workgroup_size() else {
            self.fail(Error::invalid_argument(format!(
                "kernel `{}`: workgroups_for_invocations needs the kernel's workgroup size, which only a module \
                 loaded from WGSL reports; use workgroups(x, y, z)",
                self.kernel.name()
            )));
            return self;
        };
        let groups = invocations.div_ceil(u64::from(size_x.max(1))).max(1);
        // As few rows as fit, each as even as can be: 65,536 groups are 2 rows of 32,768,
        // not a full row of 65,535 and a second of 65,535 that are nearly all idle.
        let y = groups.div_ceil(MAX_WORKGROUPS_PER_DIMENSION);
        let x = groups.div_ceil(y);
        if y > MAX_WORKGROUPS_PER_DIMENSION {
            self.fail(Error::invalid_argument(format!(
                "kernel `{}`: {invocations} invocations need {groups} workgroups of {size_x}, more than a 65535 × 65535 grid",
                self.kernel.name()
            )));
            return self;
        }
        // Both fit in u32: each is at most 65,535.
        self.workgroups = [x as u32, y as u32, 1];
        self
    }

    /// Binds `view` (a [`Buffer`], or a view from [`Buffer::slice`]) as the next buffer
    /// argument.
    #[inline]
    pub fn buffer<'b, T: 'b>(mut self, view: impl Into<BufferSlice<'b, T>>) -> Self {
        let view = view.into();
        let position = self.buffers.len();
        self.order.push(ArgumentKind::Buffer);
        // The message names the argument only when there is one to write: launches are hot.
        let span = view.byte_span("").or_else(|_| {
            view.byte_span(&format!(
                "buffer argument {position} of kernel `{}`",
                self.kernel.name()
            ))
        });
        match span {
            Ok((offset, size)) => self.buffers.push(BufferBinding::View {
                memory: view.buffer.memory.clone(),
                offset,
                size,
            }),
            Err(error) => self.fail(error),
        }
        self
    }

    /// Passes `value` as the next buffer argument, for a `var<uniform>` (or a
    /// `var<storage, read>`) binding, without a buffer of the application's: core copies the
    /// bytes into a ring of device memory that the stream reuses, in stream order, when the
    /// launch is queued, so a launch allocates no device memory. `value` must have the
    /// binding's WGSL layout and, for a fixed-size type, exactly its size (a WGSL struct's
    /// size rounds up to its alignment: `struct { a: vec3<f32>, n: u32 }` is 16 bytes).
    pub fn uniform<T: bytemuck::Pod>(self, value: &T) -> Self {
        self.uniform_bytes(bytemuck::bytes_of(value))
    }

    /// [`Launch::uniform`] with the bytes as they are: for a value whose layout was built by
    /// hand, or an array.
    #[inline]
    pub fn uniform_bytes(mut self, bytes: &[u8]) -> Self {
        self.order.push(ArgumentKind::Buffer);
        if bytes.is_empty() {
            let position = self.buffers.len();
            self.fail(Error::invalid_argument(format!(
                "buffer argument {position} of kernel `{}`: a uniform value of no bytes; a kernel cannot bind no memory",
                self.kernel.name()
            )));
            return self;
        }
        self.buffers.push(BufferBinding::Staged(Arc::from(bytes)));
        self
    }

    /// Appends a scalar (or a vector, as an array) to the scalar block. For a kernel from
    /// WGSL it fills the next member of the `var<immediate>` block, at that member's offset,
    /// and must have the member's size. Otherwise it is aligned as WGSL aligns it: to its size
    /// rounded up to a power of two, at most 16 (so `[f32; 3]` aligns like a `vec3<f32>`).
    pub fn scalar<T: bytemuck::Pod>(mut self, value: T) -> Self {
        let bytes = SmallVec::from_slice(bytemuck::bytes_of(&value));
        let alignment = bytes.len().next_power_of_two().clamp(1, 16);
        self.order.push(ArgumentKind::Scalar);
        self.scalars.push(ScalarArgument {
            bytes,
            alignment,
            type_name: std::any::type_name::<T>(),
        });
        self
    }

    /// Appends raw bytes as one scalar with the given alignment (a power of two).
    #[inline]
    pub fn scalar_bytes(mut self, bytes: &[u8], alignment: usize) -> Self {
        self.order.push(ArgumentKind::Scalar);
        if !alignment.is_power_of_two() {
            self.fail(Error::invalid_argument(format!(
                "scalar alignment {alignment} of kernel `{}` is not a power of two",
                self.kernel.name()
            )));
            return self;
        }
        self.scalars.push(ScalarArgument {
            bytes: SmallVec::from_slice(bytes),
            alignment,
            type_name: "bytes",
        });
        self
    }

    /// Passes the whole scalar block at once, laid out as WGSL lays out the kernel's
    /// `var<immediate>` (each member at its reflected offset, padding included), instead of
    /// one [`Launch::scalar`] per member: for a caller that holds the block that way already,
    /// such as a C program. For a kernel from WGSL it must have the block's exact size; it
    /// cannot be mixed with [`Launch::scalar`].
    #[inline]
    pub fn scalar_block(mut self, bytes: &'a [u8]) -> Self {
        if self.block.is_some() {
            self.fail(Error::invalid_argument(format!(
                "kernel `{}`: the scalar block is given twice (scalar_block)",
                self.kernel.name()
            )));
            return self;
        }
        // Mixed with `scalar` (in either order), it is refused when the block is built.
        self.block = Some(bytes);
        self
    }

    pub(crate) fn kernel(&self) -> &Kernel {
        self.kernel
    }

    pub(crate) fn buffers(&self) -> &[BufferBinding] {
        &self.buffers
    }

    /// The workgroup counts the launch will use, in x, y and z.
    pub fn workgroup_count(&self) -> [u32; 3] {
        self.workgroups
    }

    /// The scalar block as the kernel expects it: members at their reflected offsets, or,
    /// without reflection, each scalar at its alignment and the block padded to the largest.
    /// Padding is zero so results never depend on leftover memory.
    fn build_scalar_block(&self) -> Result<ScalarBlock> {
        if let Some(bytes) = self.block {
            if !self.scalars.is_empty() {
                return Err(Error::invalid_argument(format!(
                    "kernel `{}`: the scalar block is given once, either whole (scalar_block) or member by \
                     member (scalar), not both",
                    self.kernel.name()
                )));
            }
            return self.whole_scalar_block(bytes);
        }
        match self.kernel.info() {
            Some(info) => self.scalar_block_from_reflection(info),
            None => Ok(self.scalar_block_sequential()),
        }
    }

    /// A block given whole: checked against the reflected size, where there is one.
    fn whole_scalar_block(&self, bytes: &[u8]) -> Result<ScalarBlock> {
        let name = self.kernel.name();
        match self.kernel.info().map(|info| &info.scalars) {
            Some(None) if !bytes.is_empty() => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes no scalars (it declares no var<immediate>), but a scalar block of {} bytes \
                 was given",
                bytes.len()
            ))),
            Some(Some(block)) if bytes.len() != block.size as usize => Err(Error::invalid_argument(format!(
                "kernel `{name}` takes a scalar block of {} bytes (`{}: {}`: {}), but {} bytes were given",
                block.size,
                block.name,
                block.type_name,
                describe_members(block),
                bytes.len()
            ))),
            _ => Ok(SmallVec::from_slice(bytes)),
        }
    }

    fn scalar_block_sequential(&self) -> ScalarBlock {
        let mut block = ScalarBlock::new();
        let mut block_alignment = 1;
        for scalar in &self.scalars {
            let start = block.len().div_ceil(scalar.alignment) * scalar.alignment;
            block.resize(start, 0);
            block.extend_from_slice(&scalar.bytes);
            block_alignment = block_alignment.max(scalar.alignment);
        }
        let size = block.len().div_ceil(block_alignment) * block_alignment;
        block.resize(size, 0);
        block
    }

    fn scalar_block_from_reflection(&self, info: &EntryPointInfo) -> Result<ScalarBlock> {
        let name = self.kernel.name();
        let Some(block) = &info.scalars else {
            return match self.scalars.len() {
                0 => Ok(ScalarBlock::new()),
                given => Err(Error::invalid_argument(format!(
                    "kernel `{name}` takes no scalars (it declares no var<immediate>), but {given} were given"
                ))),
            };
        };
        if self.scalars.len() != block.members.len() {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes {} scalar(s), the members of `{}: {}` ({}), but {} were given",
                block.members.len(),
                block.name,
                block.type_name,
                describe_members(block),
                self.scalars.len()
            )));
        }
        let mut bytes: ScalarBlock = smallvec::smallvec![0u8; block.size as usize];
        for (position, (scalar, member)) in self.scalars.iter().zip(&block.members).enumerate() {
            if scalar.bytes.len() != member.size as usize {
                return Err(Error::invalid_argument(format!(
                    "scalar {position} of kernel `{name}` fills member `{}: {}` ({} bytes), but a {} of {} bytes was given",
                    member.name,
                    member.type_name,
                    member.size,
                    scalar.type_name,
                    scalar.bytes.len()
                )));
            }
            let start = member.offset as usize;
            let end = start + scalar.bytes.len();
            match bytes.get_mut(start..end) {
                Some(slot) => slot.copy_from_slice(&scalar.bytes),
                None => {
                    return Err(Error::internal(format!(
                        "kernel `{name}`: member `{}` at bytes {start}..{end} lies outside its {}-byte block",
                        member.name, block.size
                    )))
                }
            }
        }
        Ok(bytes)
    }

    /// Checks the arguments against the kernel's interface (when reflected) and the device's
    /// limits, and returns the scalar block to pass, built once.
    pub(crate) fn validate_for(&self, device: &DeviceShared) -> Result<ScalarBlock> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        if let Some(info) = self.kernel.info() {
            self.validate_buffers_against(info)?;
        }
        let scalars = self.build_scalar_block()?;
        self.validate_limits(device, scalars.len())?;
        Ok(scalars)
    }

    /// Buffers in binding order, then scalars; every view large enough for its binding.
    fn validate_buffers_against(&self, info: &EntryPointInfo) -> Result<()> {
        let name = self.kernel.name();
        let expected = &info.buffers;
        // Buffers come first, in binding order, then the scalars: name the first argument
        // that breaks that pattern.
        for (position, kind) in self.order.iter().enumerate() {
            match (kind, expected.get(position)) {
                (ArgumentKind::Scalar, Some(binding)) => {
                    return Err(Error::invalid_argument(format!(
                        "argument {position} of kernel `{name}` must be buffer `{}` ({}, {}), but a scalar was given",
                        binding.name,
                        binding.declared_binding(),
                        binding.type_name
                    )))
                }
                (ArgumentKind::Buffer, None) => {
                    return Err(Error::invalid_argument(format!(
                        "argument {position} of kernel `{name}` is a buffer, but the kernel takes {} buffer(s){}",
                        expected.len(),
                        match &info.scalars {
                            Some(block) =>
                                format!(", then the scalars of `{}` ({})", block.name, describe_members(block)),
                            None => String::new(),
                        }
                    )))
                }
                _ => {}
            }
        }
        if self.buffers.len() < expected.len() {
            let missing: Vec<String> = expected[self.buffers.len()..]
                .iter()
                .map(|binding| {
                    format!(
                        "`{}` ({}, {})",
                        binding.name,
                        binding.declared_binding(),
                        binding.type_name
                    )
                })
                .collect();
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes {} buffer(s), but {} were given; missing {}",
                expected.len(),
                self.buffers.len(),
                missing.join(", ")
            )));
        }
        for (binding, given) in expected.iter().zip(&self.buffers) {
            let needed = binding.min_size();
            let argument = binding.argument;
            // Formatted only for a message: launches are hot.
            let declared = || binding.declared_binding();
            match given {
                BufferBinding::View { size, .. } if *size < needed => {
                    return Err(Error::invalid_argument(format!(
                        "buffer argument {argument} of kernel `{name}` (`{}`, {}, {}) is a view of {size} bytes, \
                         but it needs at least {needed}",
                        binding.name,
                        declared(),
                        binding.type_name
                    )));
                }
                BufferBinding::View { .. } => {}
                BufferBinding::Staged(bytes) => {
                    let what = || {
                        format!(
                            "buffer argument {argument} of kernel `{name}` (`{}`, {}, {})",
                            binding.name,
                            declared(),
                            binding.type_name
                        )
                    };
                    if binding.access != BufferAccess::Read {
                        return Err(Error::invalid_argument(format!(
                            "{} is read_write, so a value passed with `uniform` would lose what the kernel \
                             writes; bind a buffer",
                            what()
                        )));
                    }
                    let given = bytes.len() as u64;
                    match binding.size {
                        BufferSize::Fixed(exact) if given != exact => {
                            return Err(Error::invalid_argument(format!(
                                "{} takes exactly {exact} bytes, but the value has {given}; its Rust type must \
                                 have the WGSL layout (a struct's size rounds up to its alignment)",
                                what()
                            )));
                        }
                        BufferSize::Runtime { .. } if given < needed => {
                            return Err(Error::invalid_argument(format!(
                                "{} needs at least {needed} bytes, but the value has {given}",
                                what()
                            )));
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    fn validate_limits(&self, device: &DeviceShared, scalar_size: usize) -> Result<()> {
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
            match binding {
                BufferBinding::View { offset, .. } if offset % alignment != 0 => {
                    return Err(Error::invalid_argument(format!(
                        "kernel `{name}`: buffer argument {position} starts at byte {offset}, which is not a multiple of \
                         the device's buffer offset alignment {alignment}"
                    )));
                }
                _ => {}
            }
        }
        if info.max_scalar_block_size > 0 && scalar_size > info.max_scalar_block_size as usize {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: scalar block of {scalar_size} bytes exceeds the device limit {}",
                info.max_scalar_block_size
            )));
        }
        Ok(())
    }
}

/// `a: f32, n: u32`.
fn describe_members(block: &ScalarBlockInfo) -> String {
    block
        .members
        .iter()
        .map(|member| format!("{}: {}", member.name, member.type_name))
        .collect::<Vec<_>>()
        .join(", ")
}

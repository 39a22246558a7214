//! Modules and kernels (the built-ins and WGSL), the `cpu-builtin` module format, and
//! launching.
//!
//! A `cpu-builtin` module is UTF-8 text naming one built-in kernel per line; blank lines and
//! `#` comments are ignored. Every built-in runs workgroups of [`BuiltinKernel::WORKGROUP_SIZE`]
//! invocations in x; invocation `(x, y, z)` of the whole grid has the global index
//! `x + width * (y + height * z)` with `width = workgroups[0] * 64` and `height = workgroups[1]`.
//! Buffers hold little-endian elements; the scalar block is laid out by WGSL rules.

use crate::config::KernelTimeout;
use crate::device::{BUFFER_OFFSET_ALIGNMENT, MAX_WORKGROUP_COUNT};
use crate::memory::{AlignedBytes, Buffer};
use crate::native::{KernelMode, NativeKernel};
use crate::wgsl::{KernelLimits, Program, WgslLaunch, WgslModule};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use xhal_backend::{Error, Result};

/// A kernel the CPU backend runs natively, without compiling anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinKernel {
    /// 1 buffer `buf: array<u32>`, scalars `{ base: u32, n: u32 }`: `buf[i] = base + i` for `i < n`.
    FillIndexU32,
    /// 3 buffers `a, b, out: array<u32>`, scalars `{ n: u32 }`: `out[i] = a[i] + b[i]` (wrapping).
    AddU32,
    /// 2 buffers `x, y: array<f32>`, scalars `{ a: f32, n: u32 }`: `y[i] = a * x[i] + y[i]`
    /// (a multiply then an add, never fused, so results are the same on every host).
    SaxpyF32,
    /// No buffers, scalars `{ micros: u32 }`: sleeps that long, once per launch.
    SleepUs,
    /// No buffers, no scalars: fails while executing, with `KernelFault`, every time.
    Fault,
}

impl BuiltinKernel {
    /// Every built-in, in the order error messages list them.
    pub const ALL: [BuiltinKernel; 5] = [
        BuiltinKernel::FillIndexU32,
        BuiltinKernel::AddU32,
        BuiltinKernel::SaxpyF32,
        BuiltinKernel::SleepUs,
        BuiltinKernel::Fault,
    ];

    /// Invocations per workgroup, all in x.
    pub const WORKGROUP_SIZE: u32 = 64;

    /// The name a module uses for it.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinKernel::FillIndexU32 => "fill_index_u32",
            BuiltinKernel::AddU32 => "add_u32",
            BuiltinKernel::SaxpyF32 => "saxpy_f32",
            BuiltinKernel::SleepUs => "sleep_us",
            BuiltinKernel::Fault => "fault",
        }
    }

    /// The built-in called `name`.
    pub fn from_name(name: &str) -> Option<BuiltinKernel> {
        BuiltinKernel::ALL.into_iter().find(|kernel| kernel.name() == name)
    }

    /// Number of buffer arguments a launch must bind.
    pub fn buffer_count(self) -> usize {
        self.writes_buffer().len()
    }

    /// Size in bytes of the scalar block a launch must pass.
    pub fn scalar_size(self) -> usize {
        match self {
            BuiltinKernel::FillIndexU32 | BuiltinKernel::SaxpyF32 => 8,
            BuiltinKernel::AddU32 | BuiltinKernel::SleepUs => 4,
            BuiltinKernel::Fault => 0,
        }
    }

    /// For each buffer argument, whether the kernel writes it (it then needs it exclusively).
    fn writes_buffer(self) -> &'static [bool] {
        match self {
            BuiltinKernel::FillIndexU32 => &[true],
            BuiltinKernel::AddU32 => &[false, false, true],
            BuiltinKernel::SaxpyF32 => &[false, true],
            BuiltinKernel::SleepUs | BuiltinKernel::Fault => &[],
        }
    }

    fn known_names() -> String {
        BuiltinKernel::ALL.map(BuiltinKernel::name).join(", ")
    }
}

/// A loaded module: a `cpu-builtin` list or a WGSL module.
#[derive(Debug)]
pub(crate) struct Module {
    code: ModuleCode,
}

#[derive(Debug)]
enum ModuleCode {
    Builtin(Vec<BuiltinKernel>),
    Wgsl(WgslModule),
}

/// The code a kernel handle runs.
#[derive(Debug, Clone)]
pub(crate) enum KernelCode {
    Builtin(BuiltinKernel),
    /// The interpreter's program (it also checks launches) and, in compiled mode, the
    /// compiled kernel that runs instead.
    Wgsl(Arc<Program>, Option<Arc<NativeKernel>>),
}

impl Module {
    /// Parses `cpu-builtin` module text: one built-in name per line, blank lines and `#`
    /// comments allowed.
    pub(crate) fn parse(code: &[u8]) -> Result<Module> {
        let text = std::str::from_utf8(code)
            .map_err(|error| Error::invalid_argument(format!("a cpu-builtin module must be UTF-8 text: {error}")))?;
        let mut kernels: Vec<BuiltinKernel> = Vec::new();
        let mut listed_on: Vec<usize> = Vec::new();
        for (line_index, line) in text.lines().enumerate() {
            let line_number = line_index + 1;
            let name = line.split('#').next().unwrap_or_default().trim();
            if name.is_empty() {
                continue;
            }
            let kernel = BuiltinKernel::from_name(name).ok_or_else(|| {
                Error::invalid_argument(format!(
                    "line {line_number}: unknown built-in kernel `{name}`; known kernels: {}",
                    BuiltinKernel::known_names()
                ))
            })?;
            if let Some(position) = kernels.iter().position(|listed| *listed == kernel) {
                let first = listed_on.get(position).copied().unwrap_or_default();
                return Err(Error::invalid_argument(format!(
                    "line {line_number}: kernel `{name}` is already listed on line {first}"
                )));
            }
            kernels.push(kernel);
            listed_on.push(line_number);
        }
        if kernels.is_empty() {
            return Err(Error::invalid_argument(format!(
                "the cpu-builtin module names no kernels; list one per line from: {}",
                BuiltinKernel::known_names()
            )));
        }
        Ok(Module {
            code: ModuleCode::Builtin(kernels),
        })
    }

    /// Parses, validates and compiles WGSL source.
    pub(crate) fn wgsl(code: &[u8], mode: KernelMode) -> Result<Module> {
        Ok(Module {
            code: ModuleCode::Wgsl(WgslModule::load(code, mode)?),
        })
    }

    /// The kernel called `name`; `module_id` is only for the error message.
    pub(crate) fn kernel(&self, module_id: u64, name: &str) -> Result<KernelCode> {
        let kernels = match &self.code {
            ModuleCode::Wgsl(module) => {
                return module
                    .kernel(&format!("module {module_id:#x}"), name)
                    .map(|(program, native)| KernelCode::Wgsl(program, native))
            }
            ModuleCode::Builtin(kernels) => kernels,
        };
        kernels
            .iter()
            .copied()
            .find(|kernel| kernel.name() == name)
            .map(KernelCode::Builtin)
            .ok_or_else(|| {
                let names: Vec<&str> = kernels.iter().map(|kernel| kernel.name()).collect();
                Error::not_found(format!(
                    "module {module_id:#x} has no kernel `{name}`; its kernels: {}",
                    names.join(", ")
                ))
            })
    }
}

/// A launch's buffer arguments as the stream gives them: each allocation with the view's
/// offset and size. On the stack for up to 8: launches are hot.
pub(crate) type LaunchBuffers = SmallVec<[(Arc<Buffer>, u64, u64); 8]>;

/// A launch's buffer arguments once their ranges were checked.
pub(crate) type ResolvedViews = SmallVec<[(Arc<Buffer>, Range<usize>); 8]>;

/// A buffer argument after its handle was resolved: the allocation and the view's bytes.
#[derive(Debug)]
struct BoundBuffer {
    buffer: Arc<Buffer>,
    offset: usize,
    size: usize,
}

/// A launch checked at enqueue time and owning everything it needs to run later.
#[derive(Debug)]
// A WGSL launch holds its views and scalars inline, so that queueing one allocates nothing;
// boxing it would put an allocation back on every launch.
#[allow(clippy::large_enum_variant)]
pub(crate) enum PreparedLaunch {
    Builtin(BuiltinLaunch),
    Wgsl(WgslLaunch),
}

impl PreparedLaunch {
    /// Checks everything that can be checked before running: workgroup counts, each view's
    /// range and alignment, and the buffers and scalar bytes the kernel expects.
    /// `buffers` pairs each resolved allocation with the view's offset and size.
    pub(crate) fn new(
        kernel: &KernelCode,
        workgroups: [u32; 3],
        buffers: LaunchBuffers,
        scalars: &[u8],
        timeout: &KernelTimeout,
        strict: bool,
    ) -> Result<PreparedLaunch> {
        let name = match kernel {
            KernelCode::Builtin(builtin) => builtin.name(),
            KernelCode::Wgsl(program, _) => program.name.as_str(),
        };
        check_workgroups(name, workgroups)?;
        let views = resolve_views(name, buffers)?;
        match kernel {
            KernelCode::Builtin(builtin) => {
                BuiltinLaunch::new(*builtin, workgroups, views, scalars).map(PreparedLaunch::Builtin)
            }
            KernelCode::Wgsl(program, native) => {
                let limits = KernelLimits {
                    timeout: timeout.limit()?,
                    strict,
                };
                WgslLaunch::new(Arc::clone(program), native.clone(), workgroups, views, scalars, limits)
                    .map(PreparedLaunch::Wgsl)
            }
        }
    }

    /// Runs the kernel. `sleep` is how `sleep_us` waits, and `cancelled` says whether the
    /// backend is shutting down, so the stream can cut a long kernel short.
    pub(crate) fn execute(&self, sleep: &dyn Fn(Duration), cancelled: &(dyn Fn() -> bool + Sync)) -> Result<()> {
        match self {
            PreparedLaunch::Builtin(launch) => launch.execute(sleep),
            PreparedLaunch::Wgsl(launch) => launch.execute(cancelled),
        }
    }
}

pub(crate) fn check_workgroups(name: &str, workgroups: [u32; 3]) -> Result<()> {
    if workgroups.contains(&0) {
        return Err(Error::invalid_argument(format!(
            "kernel {name}: workgroup count {workgroups:?} has a zero dimension; each must be at least 1"
        )));
    }
    if workgroups
        .iter()
        .zip(MAX_WORKGROUP_COUNT)
        .any(|(count, limit)| *count > limit)
    {
        return Err(Error::invalid_argument(format!(
            "kernel {name}: workgroup count {workgroups:?} exceeds the device limit {MAX_WORKGROUP_COUNT:?}"
        )));
    }
    Ok(())
}

/// Checks each view's alignment and range against its allocation.
fn resolve_views(name: &str, buffers: LaunchBuffers) -> Result<ResolvedViews> {
    let mut views = ResolvedViews::new();
    for (index, (buffer, offset, size)) in buffers.into_iter().enumerate() {
        if offset % u64::from(BUFFER_OFFSET_ALIGNMENT) != 0 {
            return Err(Error::invalid_argument(format!(
                "kernel {name}: buffer argument {index} has offset {offset}, which is not a multiple of the device's buffer offset alignment {BUFFER_OFFSET_ALIGNMENT}"
            )));
        }
        let range = buffer.byte_range(format_args!("kernel {name} buffer argument {index}"), offset, size)?;
        views.push((buffer, range));
    }
    Ok(views)
}

/// A built-in kernel's launch.
#[derive(Debug)]
pub(crate) struct BuiltinLaunch {
    kernel: BuiltinKernel,
    workgroups: [u32; 3],
    buffers: Vec<BoundBuffer>,
    scalars: Vec<u8>,
}

impl BuiltinLaunch {
    /// Checks the number of buffers and scalar bytes the built-in expects.
    fn new(
        kernel: BuiltinKernel,
        workgroups: [u32; 3],
        buffers: ResolvedViews,
        scalars: &[u8],
    ) -> Result<BuiltinLaunch> {
        let name = kernel.name();
        if buffers.len() != kernel.buffer_count() {
            return Err(Error::invalid_argument(format!(
                "kernel {name} expects {} buffers, got {}",
                kernel.buffer_count(),
                buffers.len()
            )));
        }
        if scalars.len() != kernel.scalar_size() {
            return Err(Error::invalid_argument(format!(
                "kernel {name} expects {} scalar bytes, got {}",
                kernel.scalar_size(),
                scalars.len()
            )));
        }
        let bound = buffers
            .into_iter()
            .map(|(buffer, range)| BoundBuffer {
                buffer,
                offset: range.start,
                size: range.len(),
            })
            .collect();
        Ok(BuiltinLaunch {
            kernel,
            workgroups,
            buffers: bound,
            scalars: scalars.to_vec(),
        })
    }

    fn execute(&self, sleep: &dyn Fn(Duration)) -> Result<()> {
        match self.kernel {
            BuiltinKernel::SleepUs => {
                sleep(Duration::from_micros(u64::from(self.scalar_u32(0)?)));
                Ok(())
            }
            BuiltinKernel::Fault => Err(Error::kernel_fault("kernel `fault` raised a fault on purpose")),
            BuiltinKernel::FillIndexU32 => {
                let (base, n) = (self.scalar_u32(0)?, self.scalar_u32(4)?);
                let active = self.active_invocations(n)?;
                let mut memory = LockedViews::lock(self.kernel, &self.buffers);
                for i in 0..active {
                    // `base + i` wraps like u32 arithmetic in a shader; `i < n <= u32::MAX`.
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    memory.store_u32(0, i, base.wrapping_add(index))?;
                }
                Ok(())
            }
            BuiltinKernel::AddU32 => {
                let active = self.active_invocations(self.scalar_u32(0)?)?;
                let mut memory = LockedViews::lock(self.kernel, &self.buffers);
                for i in 0..active {
                    let sum = memory.load_u32(0, i)?.wrapping_add(memory.load_u32(1, i)?);
                    memory.store_u32(2, i, sum)?;
                }
                Ok(())
            }
            BuiltinKernel::SaxpyF32 => {
                let a = f32::from_bits(self.scalar_u32(0)?);
                let active = self.active_invocations(self.scalar_u32(4)?)?;
                let mut memory = LockedViews::lock(self.kernel, &self.buffers);
                for i in 0..active {
                    let x = f32::from_bits(memory.load_u32(0, i)?);
                    let y = f32::from_bits(memory.load_u32(1, i)?);
                    memory.store_u32(1, i, (a * x + y).to_bits())?;
                }
                Ok(())
            }
        }
    }

    /// How many invocations do work (`i < n` among those launched), after checking that every
    /// buffer view holds that many elements. Strict mode: an invocation that would index past
    /// its view faults the whole launch before anything is written, instead of being clamped.
    fn active_invocations(&self, n: u32) -> Result<usize> {
        let launched = self
            .workgroups
            .iter()
            .try_fold(u64::from(BuiltinKernel::WORKGROUP_SIZE), |total, count| {
                total.checked_mul(u64::from(*count))
            })
            .unwrap_or(u64::MAX);
        let active = launched.min(u64::from(n));
        for (index, view) in self.buffers.iter().enumerate() {
            let elements = (view.size / ELEMENT_SIZE) as u64;
            if elements < active {
                return Err(Error::kernel_fault(format!(
                    "kernel `{}`: invocation {elements} indexed element {elements} of buffer argument {index}, \
                     whose view holds only {elements} 4-byte elements ({} bytes at offset {} of buffer {:#x})",
                    self.kernel.name(),
                    view.size,
                    view.offset,
                    view.buffer.id()
                )));
            }
        }
        usize::try_from(active).map_err(|_| Error::internal("active invocation count does not fit usize"))
    }

    fn scalar_u32(&self, offset: usize) -> Result<u32> {
        read_u32(&self.scalars, offset).ok_or_else(|| {
            Error::internal(format!(
                "kernel {}: scalar block of {} bytes has no u32 at offset {offset}",
                self.kernel.name(),
                self.scalars.len()
            ))
        })
    }
}

const ELEMENT_SIZE: usize = 4;

fn read_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    let mut word = [0u8; 4];
    word.copy_from_slice(bytes.get(offset..offset.checked_add(4)?)?);
    Some(u32::from_le_bytes(word))
}

enum Guard<'a> {
    Shared(RwLockReadGuard<'a, AlignedBytes>),
    Exclusive(RwLockWriteGuard<'a, AlignedBytes>),
}

/// The launch's buffers, locked for the duration of the kernel. Several arguments may view
/// the same allocation; it is locked once.
struct LockedViews<'a> {
    kernel: BuiltinKernel,
    guards: Vec<Guard<'a>>,
    /// Per argument: which guard, and the view's first byte.
    views: Vec<(usize, usize)>,
}

impl<'a> LockedViews<'a> {
    fn lock(kernel: BuiltinKernel, buffers: &'a [BoundBuffer]) -> LockedViews<'a> {
        let mut distinct: BTreeMap<u64, (&'a Buffer, bool)> = BTreeMap::new();
        for (view, writes) in buffers.iter().zip(kernel.writes_buffer()) {
            let entry = distinct.entry(view.buffer.id()).or_insert((&view.buffer, false));
            entry.1 |= *writes;
        }
        // Handle order, like every other path that holds several buffer locks: no deadlocks.
        let mut slot_of: BTreeMap<u64, usize> = BTreeMap::new();
        let mut guards = Vec::with_capacity(distinct.len());
        for (id, (buffer, writes)) in distinct {
            slot_of.insert(id, guards.len());
            guards.push(if writes {
                Guard::Exclusive(buffer.bytes_mut())
            } else {
                Guard::Shared(buffer.bytes().read())
            });
        }
        let views = buffers
            .iter()
            .map(|view| {
                (
                    slot_of.get(&view.buffer.id()).copied().unwrap_or(usize::MAX),
                    view.offset,
                )
            })
            .collect();
        LockedViews { kernel, guards, views }
    }

    fn load_u32(&self, argument: usize, element: usize) -> Result<u32> {
        let (slot, start) = self.locate(argument, element)?;
        let bytes: &[u8] = match self.guards.get(slot) {
            Some(Guard::Shared(guard)) => guard,
            Some(Guard::Exclusive(guard)) => guard,
            None => return Err(self.broken(argument, element)),
        };
        read_u32(bytes, start).ok_or_else(|| self.broken(argument, element))
    }

    fn store_u32(&mut self, argument: usize, element: usize, value: u32) -> Result<()> {
        let (slot, start) = self.locate(argument, element)?;
        let target = match self.guards.get_mut(slot) {
            Some(Guard::Exclusive(guard)) => guard.get_mut(start..start + ELEMENT_SIZE),
            _ => None,
        };
        match target {
            Some(target) => {
                target.copy_from_slice(&value.to_le_bytes());
                Ok(())
            }
            None => Err(self.broken(argument, element)),
        }
    }

    fn locate(&self, argument: usize, element: usize) -> Result<(usize, usize)> {
        let (slot, offset) = self
            .views
            .get(argument)
            .copied()
            .ok_or_else(|| self.broken(argument, element))?;
        let start = element
            .checked_mul(ELEMENT_SIZE)
            .and_then(|relative| relative.checked_add(offset))
            .ok_or_else(|| self.broken(argument, element))?;
        Ok((slot, start))
    }

    /// Enqueue-time checks make this unreachable; if it happens, it is our bug, not the kernel's.
    fn broken(&self, argument: usize, element: usize) -> Error {
        Error::internal(format!(
            "kernel {}: element {element} of buffer argument {argument} was not accessible after validation",
            self.kernel.name()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_backend::ErrorKind;

    #[test]
    fn modules_allow_blank_lines_and_comments() {
        let module = Module::parse(b"# test kernels\n\nadd_u32\n  saxpy_f32  # the classic\n").unwrap();
        let ModuleCode::Builtin(kernels) = &module.code else {
            panic!("not a built-in module");
        };
        assert_eq!(kernels, &[BuiltinKernel::AddU32, BuiltinKernel::SaxpyF32]);
    }

    #[test]
    fn unknown_kernel_names_its_line_and_the_known_kernels() {
        let error = Module::parse(b"add_u32\n\nmatmul_f32\n").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(error.message().contains("line 3"), "{error}");
        assert!(error.message().contains("`matmul_f32`"), "{error}");
        assert!(
            error
                .message()
                .contains("fill_index_u32, add_u32, saxpy_f32, sleep_us, fault"),
            "{error}"
        );
    }

    #[test]
    fn invalid_utf8_empty_and_duplicate_modules_are_rejected() {
        let utf8 = Module::parse(&[0x61, 0xff, 0x0a]).unwrap_err();
        assert_eq!(utf8.kind(), ErrorKind::InvalidArgument);
        assert!(utf8.message().contains("UTF-8"), "{utf8}");
        let empty = Module::parse(b"# nothing\n").unwrap_err();
        assert!(empty.message().contains("no kernels"), "{empty}");
        let duplicate = Module::parse(b"fault\nfault\n").unwrap_err();
        assert!(duplicate.message().contains("already listed on line 1"), "{duplicate}");
    }

    #[test]
    fn every_builtin_round_trips_its_name() {
        for kernel in BuiltinKernel::ALL {
            assert_eq!(BuiltinKernel::from_name(kernel.name()), Some(kernel));
            assert!(kernel.scalar_size() <= crate::device::MAX_SCALAR_BLOCK_SIZE as usize);
        }
    }
}

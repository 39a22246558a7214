//! The CPU backend's WGSL executor, for other backends to reuse: load a WGSL module, then run
//! one of its kernels over host memory the caller owns.
//!
//! A backend whose device memory is host memory (the plugin template's `hostmem`, a vendor's
//! simulator, a device that shares RAM with the host) can run portable kernels without writing
//! a compiler: it keeps its buffers as byte slices and hands them to [`HostKernel::run`] with
//! the launch's views, workgroup count and scalar block. The argument ABI is xhal's: buffer
//! argument `i` is `@group(0) @binding(i)`, the scalar block is the kernel's `var<immediate>`.
//! Everything the CPU backend checks is checked here too, with the same messages: workgroup
//! counts, one view per binding, minimum binding sizes, the scalar block's size, and (strict)
//! out-of-bounds indices, which fail the run with `KernelFault` naming the place.
//!
//! ```
//! use xhal_cpu::executor::{HostArgument, HostLaunch, HostMemory, HostModule, RunLimits};
//! use xhal_cpu::KernelMode;
//!
//! let source = b"
//!     @group(0) @binding(0) var<storage, read_write> data: array<u32>;
//!     @compute @workgroup_size(4)
//!     fn double(@builtin(global_invocation_id) id: vec3<u32>) { data[id.x] = data[id.x] * 2u; }
//! ";
//! let module = HostModule::load(source, KernelMode::Interpret)?;
//! let kernel = module.kernel("double")?;
//! let mut bytes: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect();
//! let launch = HostLaunch {
//!     workgroups: [1, 1, 1],
//!     arguments: &[HostArgument { memory: 0, offset: 0, size: 16 }],
//!     scalars: &[],
//!     limits: RunLimits::from_env()?,
//! };
//! kernel.run(&launch, &mut [HostMemory::ReadWrite(&mut bytes)])?;
//! assert_eq!(bytes[4..8], 4u32.to_le_bytes());
//! # Ok::<(), xhal_backend::Error>(())
//! ```

use crate::config::KernelTimeout;
use crate::device::BUFFER_OFFSET_ALIGNMENT;
use crate::kernels::check_workgroups;
use crate::native::{KernelMode, NativeKernel};
use crate::wgsl::{check_arguments, HostBytes, HostView, KernelLimits, LaunchParts, Program, WgslModule};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;
use xhal_backend::{Error, Result};

/// A parsed, validated WGSL module whose compute entry points can run on the host.
#[derive(Debug)]
pub struct HostModule {
    module: WgslModule,
}

impl HostModule {
    /// Parses, validates and compiles WGSL source. A syntax or validation error is
    /// `InvalidArgument` with naga's message and the line and column it points at.
    /// `mode` chooses the interpreter or compiled C, as for the CPU backend
    /// ([`KernelMode::from_env`] reads `XHAL_CPU_MODE`).
    pub fn load(source: &[u8], mode: KernelMode) -> Result<HostModule> {
        Ok(HostModule {
            module: WgslModule::load(source, mode)?,
        })
    }

    /// The compute entry point called `name`; `NotFound` listing the module's entry points
    /// otherwise. In compiled mode the C compiler runs here, on first use of each name.
    pub fn kernel(&self, name: &str) -> Result<HostKernel> {
        let (program, native) = self.module.kernel("the WGSL module", name)?;
        Ok(HostKernel { program, native })
    }
}

/// One compute entry point, ready to run. Cheap to clone; safe to run from several threads at
/// once (each run has its own memory).
#[derive(Debug, Clone)]
pub struct HostKernel {
    program: Arc<Program>,
    native: Option<Arc<NativeKernel>>,
}

/// One buffer binding of a kernel, as reflected from its WGSL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelBinding {
    /// The variable's name in the source.
    pub name: String,
    /// Its WGSL type, for messages.
    pub type_name: String,
    /// Whether the kernel may write it: its memory must then be [`HostMemory::ReadWrite`].
    pub writes: bool,
    /// The fewest bytes a view of it may have.
    pub min_size: u64,
}

/// Memory a run reads or writes. A kernel binding that writes must be bound to `ReadWrite`.
#[derive(Debug)]
pub enum HostMemory<'a> {
    /// Bytes the kernel may only read.
    ReadOnly(&'a [u8]),
    /// Bytes the kernel may read and write. A slice that starts on a 4-byte boundary and has a
    /// whole number of 4-byte words is used in place; any other is copied in and out.
    ReadWrite(&'a mut [u8]),
}

impl HostMemory<'_> {
    fn len(&self) -> usize {
        match self {
            HostMemory::ReadOnly(bytes) => bytes.len(),
            HostMemory::ReadWrite(bytes) => bytes.len(),
        }
    }
}

/// A buffer argument: `size` bytes at `offset` of memory number `memory` of the run. Several
/// arguments may view the same memory, overlapping or not, as on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostArgument {
    /// Index into the run's memories.
    pub memory: usize,
    /// First byte of the view; a multiple of 4 (the CPU device's buffer offset alignment).
    pub offset: usize,
    /// Bytes in the view.
    pub size: usize,
}

/// How a run treats runaway and out-of-bounds kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Longest run time; past it the run fails with `Timeout`.
    pub timeout: Duration,
    /// An out-of-bounds index fails the run with `KernelFault` (otherwise it is clamped to the
    /// array, one of the behaviours WGSL allows).
    pub strict: bool,
}

impl RunLimits {
    /// Strict, with the time limit [`KERNEL_TIMEOUT_VARIABLE`] gives (default
    /// [`DEFAULT_KERNEL_TIMEOUT`]); a malformed value is `InvalidArgument` naming the variable.
    ///
    /// [`KERNEL_TIMEOUT_VARIABLE`]: crate::KERNEL_TIMEOUT_VARIABLE
    /// [`DEFAULT_KERNEL_TIMEOUT`]: crate::DEFAULT_KERNEL_TIMEOUT
    pub fn from_env() -> Result<RunLimits> {
        Ok(RunLimits {
            timeout: KernelTimeout::from_lookup(|name| std::env::var_os(name)).limit()?,
            strict: true,
        })
    }
}

/// Everything about one run but the memory.
#[derive(Debug, Clone, Copy)]
pub struct HostLaunch<'a> {
    /// Workgroups in x, y and z; each at least 1.
    pub workgroups: [u32; 3],
    /// One view per binding, in binding order.
    pub arguments: &'a [HostArgument],
    /// The `var<immediate>` block's bytes, laid out by WGSL rules (empty when it has none).
    pub scalars: &'a [u8],
    /// Time limit and bounds checking.
    pub limits: RunLimits,
}

impl HostKernel {
    /// The entry point's name.
    pub fn name(&self) -> &str {
        &self.program.name
    }

    /// Its `@workgroup_size`.
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.program.workgroup_size
    }

    /// Its buffer bindings, in binding order: what a launch must pass.
    pub fn bindings(&self) -> Vec<KernelBinding> {
        self.program
            .bindings
            .iter()
            .map(|binding| KernelBinding {
                name: binding.name.clone(),
                type_name: binding.type_name.clone(),
                writes: binding.writes,
                min_size: binding.min_size,
            })
            .collect()
    }

    /// Bytes of its scalar block (`var<immediate>`), 0 when it has none.
    pub fn scalar_size(&self) -> usize {
        self.program.immediate_size
    }

    /// Checks `launch` against this kernel's interface and memories of `memory_sizes` bytes,
    /// without running anything: what a backend does at enqueue time, so that misuse is
    /// reported by the call that made it. The errors are [`run`](HostKernel::run)'s.
    pub fn check(&self, launch: &HostLaunch<'_>, memory_sizes: &[usize]) -> Result<()> {
        let name = &self.program.name;
        check_workgroups(name, launch.workgroups)?;
        check_arguments(
            &self.program,
            launch.arguments.iter().map(|argument| argument.size),
            launch.scalars,
        )?;
        for (index, argument) in launch.arguments.iter().enumerate() {
            let Some(&memory_size) = memory_sizes.get(argument.memory) else {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: buffer argument {index} names memory {}, but the run has {} memories",
                    argument.memory,
                    memory_sizes.len()
                )));
            };
            if argument.offset % BUFFER_OFFSET_ALIGNMENT as usize != 0 {
                return Err(Error::invalid_argument(format!(
                    "kernel `{name}`: buffer argument {index} has offset {}, which is not a multiple of {BUFFER_OFFSET_ALIGNMENT}",
                    argument.offset
                )));
            }
            let end = argument.offset.checked_add(argument.size);
            if end.is_none_or(|end| end > memory_size) {
                return Err(Error::out_of_bounds(format!(
                    "kernel `{name}`: buffer argument {index} views {} bytes at offset {} of memory {}, which holds {memory_size} bytes",
                    argument.size, argument.offset, argument.memory
                )));
            }
        }
        Ok(())
    }

    /// Runs every workgroup of `launch` over `memories`, on up to as many threads as the host
    /// has cores, and returns when all are done. Misuse (what [`check`](HostKernel::check)
    /// refuses, or a written binding on read-only memory) is `InvalidArgument` or
    /// `OutOfBounds` before anything runs; a fault while running is `KernelFault`, a runaway
    /// kernel `Timeout`. After a fault, memory the kernel writes holds whatever it had written
    /// so far.
    pub fn run(&self, launch: &HostLaunch<'_>, memories: &mut [HostMemory<'_>]) -> Result<()> {
        let sizes: Vec<usize> = memories.iter().map(HostMemory::len).collect();
        self.check(launch, &sizes)?;
        let mut written = vec![false; memories.len()];
        for (index, (argument, binding)) in launch.arguments.iter().zip(&self.program.bindings).enumerate() {
            if !binding.writes {
                continue;
            }
            if let Some(HostMemory::ReadOnly(_)) = memories.get(argument.memory) {
                return Err(Error::invalid_argument(format!(
                    "kernel `{}` writes buffer argument {index} (`{}`), but memory {} was passed read-only",
                    self.program.name, binding.name, argument.memory
                )));
            }
            written[argument.memory] = true;
        }
        let mut bases: Vec<Base<'_>> = memories
            .iter_mut()
            .zip(&written)
            .map(|(memory, &writes)| Base::new(memory, writes))
            .collect();
        let words: Vec<HostBytes<'_>> = bases.iter_mut().map(Base::bytes).collect();
        let mut views = crate::wgsl::HostViews::new();
        for argument in launch.arguments {
            let range = argument.offset..argument.offset + argument.size;
            let broken = || Error::internal("a checked view did not fit its memory");
            let bytes = match words.get(argument.memory).copied().ok_or_else(broken)? {
                HostBytes::Shared(all) => HostBytes::Shared(all.get(range).ok_or_else(broken)?),
                HostBytes::Exclusive(all) => {
                    HostBytes::Exclusive(all.get(range.start / 4..range.end.div_ceil(4)).ok_or_else(broken)?)
                }
            };
            views.push(HostView {
                bytes,
                size: argument.size,
            });
        }
        let parts = LaunchParts {
            program: &self.program,
            workgroups: launch.workgroups,
            scalars: launch.scalars,
            limits: KernelLimits {
                timeout: launch.limits.timeout,
                strict: launch.limits.strict,
            },
        };
        let result = parts.run(self.native.as_deref(), views, &|| false);
        drop(words);
        for base in bases {
            base.finish();
        }
        result
    }
}

/// One memory as the kernel sees it: read as bytes, or written as atomic words (in place, or
/// through an aligned copy that is written back when the run ends).
enum Base<'a> {
    Shared(&'a [u8]),
    InPlace(&'a [AtomicU32]),
    Copied {
        words: Vec<AtomicU32>,
        target: &'a mut [u8],
    },
}

impl<'a> Base<'a> {
    fn new(memory: &'a mut HostMemory<'_>, writes: bool) -> Base<'a> {
        match memory {
            HostMemory::ReadOnly(bytes) => Base::Shared(bytes),
            HostMemory::ReadWrite(bytes) => {
                let bytes: &'a mut [u8] = bytes;
                if !writes {
                    Base::Shared(bytes)
                } else if bytes.as_ptr().align_offset(4) == 0 && bytes.len().is_multiple_of(4) {
                    let pointer = bytes.as_mut_ptr().cast::<AtomicU32>();
                    // SAFETY: the slice is 4-aligned and a whole number of words; `AtomicU32` has
                    // the size, alignment and bit validity of `u32`. The slice is borrowed
                    // exclusively for `'a`, so nothing but these atomics reaches the bytes.
                    Base::InPlace(unsafe { std::slice::from_raw_parts(pointer, bytes.len() / 4) })
                } else {
                    let words = bytes
                        .chunks(4)
                        .map(|chunk| {
                            let mut word = [0u8; 4];
                            word[..chunk.len()].copy_from_slice(chunk);
                            AtomicU32::new(u32::from_ne_bytes(word))
                        })
                        .collect();
                    Base::Copied { words, target: bytes }
                }
            }
        }
    }

    fn bytes(&mut self) -> HostBytes<'_> {
        match self {
            Base::Shared(bytes) => HostBytes::Shared(bytes),
            Base::InPlace(words) => HostBytes::Exclusive(words),
            Base::Copied { words, .. } => HostBytes::Exclusive(words),
        }
    }

    /// Writes a copied memory back.
    fn finish(self) {
        if let Base::Copied { words, target } = self {
            for (chunk, word) in target.chunks_mut(4).zip(words) {
                let bytes = word.into_inner().to_ne_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_backend::ErrorKind;

    const ADD: &[u8] = b"
        struct Params { n: u32, bias: u32 }
        var<immediate> params: Params;
        @group(0) @binding(0) var<storage, read> a: array<u32>;
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;
        @compute @workgroup_size(8)
        fn add_bias(@builtin(global_invocation_id) id: vec3<u32>) {
            if id.x < params.n { out[id.x] = a[id.x] + params.bias; }
        }
    ";

    fn words(values: &[u32]) -> Vec<u8> {
        values.iter().flat_map(|value| value.to_le_bytes()).collect()
    }

    fn scalars(n: u32, bias: u32) -> Vec<u8> {
        words(&[n, bias])
    }

    fn launch<'a>(arguments: &'a [HostArgument], scalars: &'a [u8]) -> HostLaunch<'a> {
        HostLaunch {
            workgroups: [2, 1, 1],
            arguments,
            scalars,
            limits: RunLimits {
                timeout: Duration::from_secs(30),
                strict: true,
            },
        }
    }

    fn both_modes() -> [KernelMode; 2] {
        [KernelMode::Interpret, KernelMode::Auto]
    }

    #[test]
    fn runs_over_host_slices_and_reflects_the_interface() {
        for mode in both_modes() {
            let kernel = HostModule::load(ADD, mode).unwrap().kernel("add_bias").unwrap();
            assert_eq!(kernel.name(), "add_bias");
            assert_eq!(kernel.workgroup_size(), [8, 1, 1]);
            assert_eq!(kernel.scalar_size(), 8);
            let bindings = kernel.bindings();
            assert_eq!(bindings.len(), 2);
            assert!(!bindings[0].writes && bindings[1].writes, "{bindings:?}");
            let input = words(&(0..16).collect::<Vec<u32>>());
            let mut output = vec![0u8; 64];
            let arguments = [
                HostArgument {
                    memory: 0,
                    offset: 0,
                    size: 64,
                },
                HostArgument {
                    memory: 1,
                    offset: 0,
                    size: 64,
                },
            ];
            let block = scalars(12, 100);
            kernel
                .run(
                    &launch(&arguments, &block),
                    &mut [HostMemory::ReadOnly(&input), HostMemory::ReadWrite(&mut output)],
                )
                .unwrap();
            let expected: Vec<u32> = (0..16).map(|i| if i < 12 { i + 100 } else { 0 }).collect();
            assert_eq!(output, words(&expected), "mode {mode:?}");
        }
    }

    #[test]
    fn views_into_one_memory_and_unaligned_slices_work() {
        let kernel = HostModule::load(ADD, KernelMode::Interpret)
            .unwrap()
            .kernel("add_bias")
            .unwrap();
        // One memory holds both the input (first 32 bytes) and the output (next 32), and the
        // slice starts one byte into its allocation, so it is copied in and out.
        let mut storage = [0u8; 65];
        storage[1..33].copy_from_slice(&words(&[1, 2, 3, 4, 5, 6, 7, 8]));
        let arguments = [
            HostArgument {
                memory: 0,
                offset: 0,
                size: 32,
            },
            HostArgument {
                memory: 0,
                offset: 32,
                size: 32,
            },
        ];
        let block = scalars(8, 1);
        let mut memories = [HostMemory::ReadWrite(&mut storage[1..])];
        kernel.run(&launch(&arguments, &block), &mut memories).unwrap();
        assert_eq!(storage[33..65], words(&[2, 3, 4, 5, 6, 7, 8, 9]));
        assert_eq!(storage[1..33], words(&[1, 2, 3, 4, 5, 6, 7, 8]));
    }

    #[test]
    fn misuse_is_refused_before_running_with_what_was_expected() {
        let kernel = HostModule::load(ADD, KernelMode::Interpret)
            .unwrap()
            .kernel("add_bias")
            .unwrap();
        let input = vec![0u8; 64];
        let mut output = vec![7u8; 64];
        let good = [
            HostArgument {
                memory: 0,
                offset: 0,
                size: 64,
            },
            HostArgument {
                memory: 1,
                offset: 0,
                size: 64,
            },
        ];
        let block = scalars(16, 0);
        let mut run = |launch: HostLaunch<'_>, read_only_output: bool| {
            let output_memory = if read_only_output {
                HostMemory::ReadOnly(&output)
            } else {
                HostMemory::ReadWrite(&mut output)
            };
            kernel
                .run(&launch, &mut [HostMemory::ReadOnly(&input), output_memory])
                .unwrap_err()
        };
        let one = run(launch(&good[..1], &block), false);
        assert_eq!(one.kind(), ErrorKind::InvalidArgument);
        assert!(one.message().contains("expects 2 buffer arguments"), "{one}");
        let short_scalars = run(launch(&good, &block[..4]), false);
        assert!(
            short_scalars.message().contains("expects 8 scalar bytes"),
            "{short_scalars}"
        );
        let read_only = run(launch(&good, &block), true);
        assert!(read_only.message().contains("passed read-only"), "{read_only}");
        let missing = [good[0], HostArgument { memory: 5, ..good[1] }];
        let missing = run(launch(&missing, &block), false);
        assert!(missing.message().contains("names memory 5"), "{missing}");
        let misaligned = [
            good[0],
            HostArgument {
                memory: 1,
                offset: 2,
                size: 32,
            },
        ];
        let misaligned = run(launch(&misaligned, &block), false);
        assert!(misaligned.message().contains("not a multiple of 4"), "{misaligned}");
        let past_end = [
            good[0],
            HostArgument {
                memory: 1,
                offset: 32,
                size: 64,
            },
        ];
        let past_end = run(launch(&past_end, &block), false);
        assert_eq!(past_end.kind(), ErrorKind::OutOfBounds);
        let zero = run(
            HostLaunch {
                workgroups: [0, 1, 1],
                ..launch(&good, &block)
            },
            false,
        );
        assert!(zero.message().contains("zero dimension"), "{zero}");
        assert_eq!(output, vec![7u8; 64], "a refused run must not write");
    }

    #[test]
    fn an_out_of_bounds_index_is_a_kernel_fault_and_a_missing_entry_point_is_named() {
        let module = HostModule::load(ADD, KernelMode::Interpret).unwrap();
        let missing = module.kernel("nope").unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert!(
            missing
                .message()
                .starts_with("the WGSL module has no entry point `nope`; its entry points: `add_bias`"),
            "{missing}"
        );
        let kernel = module.kernel("add_bias").unwrap();
        let input = vec![0u8; 16];
        let mut output = vec![0u8; 64];
        let arguments = [
            HostArgument {
                memory: 0,
                offset: 0,
                size: 16,
            },
            HostArgument {
                memory: 1,
                offset: 0,
                size: 64,
            },
        ];
        let block = scalars(16, 0);
        let fault = kernel
            .run(
                &launch(&arguments, &block),
                &mut [HostMemory::ReadOnly(&input), HostMemory::ReadWrite(&mut output)],
            )
            .unwrap_err();
        assert_eq!(fault.kind(), ErrorKind::KernelFault, "{fault}");
        let bad = HostModule::load(b"fn broken( {", KernelMode::Interpret).unwrap_err();
        assert!(bad.message().contains("WGSL parse error"), "{bad}");
    }
}

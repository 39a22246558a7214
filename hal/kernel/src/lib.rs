//! Portable xhal kernels: WGSL parsed and validated by naga, reflected against the xhal
//! argument ABI, and translated for each backend.
//!
//! # Kernels are WGSL
//!
//! A kernel is a WGSL compute entry point. [`parse_wgsl`] parses and validates it (naga, with
//! the capabilities in [`KERNEL_CAPABILITIES`]: `f16` with `enable f16;`, `f64`, `i64`/`u64`,
//! 64-bit atomics, immediates). Every problem is a [`KernelError`] that renders like a
//! compiler diagnostic: `file:line:column`, the source line, a caret, naga's explanation.
//!
//! # The argument ABI
//!
//! One ABI for every backend. A launch passes an ordered list of buffer views and one block
//! of scalar bytes:
//!
//! - the buffer arguments are the bindings an entry point uses, `var<storage, read>`,
//!   `var<storage, read_write>` and `var<uniform>`, in ascending (group, binding) order (gaps
//!   and several groups are fine);
//! - the scalar block is the kernel's one `var<immediate>` (naga 30's name for push
//!   constants; no `enable` directive is needed), a struct or a single scalar/vector, laid
//!   out by WGSL's host-shareable rules (std430-like: `vec3` aligns to 16, a struct's size
//!   rounds up to its alignment).
//!
//! ```wgsl
//! struct Params { n: u32, scale: f32 }
//! var<immediate> params: Params;
//! @group(0) @binding(0) var<storage, read> input: array<f32>;
//! @group(0) @binding(1) var<storage, read_write> output: array<f32>;
//!
//! @compute @workgroup_size(64)
//! fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
//!     if id.x < params.n { output[id.x] = input[id.x] * params.scale; }
//! }
//! ```
//!
//! Reflection ([`EntryPointInfo`]) is per entry point and covers exactly the globals that
//! entry point uses, directly or through the functions it calls. A texture or a sampler is a
//! [`KernelErrorKind::Reflection`] error that names the entry point and the binding, and so is
//! a buffer two entry points of one module use at different argument positions.
//!
//! What devices are given is always positional: the IR the translations are made from has
//! buffer argument `i` at `@group(0) @binding(i)` in the storage space, and a device that
//! takes WGSL gets the source with only those declarations edited
//! ([`WgslModule::to_device_wgsl`]; a device with native uniforms keeps its `var<uniform>`s).
//!
//! `override` constants take their default values, or the values [`apply_overrides`] writes
//! into the source as their initializers.
//!
//! # Translation and the cache
//!
//! [`WgslModule::to_spirv`] writes SPIR-V 1.3 for Vulkan (`var<immediate>` becomes a push
//! constant block); [`WgslModule::to_wgsl`] writes normalised WGSL; [`WgslModule::to_c`]
//! writes OpenCL C, CUDA C, HIP C or host C (module [`c`]); [`WgslModule::to_spirv_kernel`]
//! writes Kernel-flavoured SPIR-V for Level Zero and OpenCL (module [`spirv_kernel`]). [`translate`] does either
//! through a process-wide cache keyed by a stable hash of source and target ([`cache_key`]),
//! so the same kernel is translated once per process; [`cache_stats`] shows the effect.
//!
//! # Bundles
//!
//! A module is a [`ModuleBundle`] of [`Variant`]s, one per `XHAL_KERNEL_FORMAT_*`. For a
//! device that lists the formats it accepts, [`ModuleBundle::pick`] chooses: a binary or IR
//! variant the bundle already has, else a binary or IR xhal can produce from WGSL (SPIR-V),
//! else source for run-time compilation (WGSL as written; CUDA C, HIP C and OpenCL C written by
//! the [`c`] emitter). [`ModuleBundle::resolve`] also performs the translation.
//!
//! # The `translate` feature
//!
//! Everything above is the default feature `translate`, which brings in naga and xhal-abi (and
//! the `spirv` crate). Without it the crate is only the naga-free helpers a backend that
//! compiles C it is handed (and does not translate WGSL) needs: [`parameters`] (the parameter
//! classes and their order), [`c_signature`] (a reader of C kernel signatures), [`Dialect`],
//! [`c::c_symbol`], and [`KernelError`] with [`KernelErrorKind`] and [`SourceLocation`].
//!
//! With `translate` this crate depends on naga and xhal-abi only; without it, on nothing of
//! xhal's. xhal-core depends on it, not the reverse.

#![deny(missing_docs)]

#[cfg(feature = "translate")]
mod bundle;
pub mod c;
pub mod c_signature;
#[cfg(feature = "translate")]
mod cache;
mod dialect;
mod error;
#[cfg(feature = "translate")]
mod ir;
mod keywords;
#[cfg(feature = "translate")]
mod limits;
#[cfg(feature = "translate")]
mod overrides;
pub mod parameters;
#[cfg(feature = "translate")]
mod prune;
#[cfg(feature = "translate")]
mod reflect;
#[cfg(feature = "translate")]
mod rewrite;
#[cfg(feature = "translate")]
pub mod spirv_kernel;
#[cfg(feature = "translate")]
mod wgsl;

#[cfg(feature = "translate")]
pub use bundle::{format_name, is_source_format, ModuleBundle, Plan, ResolvedKernel, Variant};
#[cfg(feature = "translate")]
pub use c::{CEntryPoint, CSource};
#[cfg(feature = "translate")]
pub use cache::{
    cache_key, cache_stats, clear_cache, reflect, translate, translate_with, CacheStats, Reflection, Target,
    TranslateOptions, Translation,
};
pub use dialect::Dialect;
pub use error::{KernelError, KernelErrorKind, SourceLocation};
#[cfg(feature = "translate")]
pub use overrides::{apply_overrides, OverrideInfo};
#[cfg(feature = "translate")]
pub use prune::prune_decided_branches;
#[cfg(feature = "translate")]
pub use reflect::{
    BufferAccess, BufferBindingInfo, BufferSize, BufferSpace, ElementInfo, EntryPointInfo, ScalarBlockInfo,
    ScalarMemberInfo,
};
#[cfg(feature = "translate")]
pub use spirv_kernel::SpirvKernel;
#[cfg(feature = "translate")]
pub use wgsl::{parse_wgsl, resolve_pending_array_sizes, WgslModule, KERNEL_CAPABILITIES, SPIRV_VERSION};

/// The naga this crate is built on, re-exported so callers of [`WgslModule::naga_module`]
/// name the same types.
#[cfg(feature = "translate")]
pub use naga;

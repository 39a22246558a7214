//! WGSL compute kernels on the CPU: naga parses and validates the source, [`compile`] turns
//! each compute entry point into a [`Program`] once, at module load, and [`exec`] runs it a
//! workgroup at a time with the invocations in lockstep, workgroups in parallel.
//!
//! The argument ABI is xhal's: buffer argument `i` is `@group(0) @binding(i)` (a
//! `var<storage>`), and the scalar block is the bytes of the kernel's one `var<immediate>`.
//! Strict: an out-of-bounds index faults the launch, naming the kernel, the binding and the
//! index; a kernel running past [`KERNEL_TIMEOUT_VARIABLE`] is stopped with `Timeout`.
//!
//! [`KERNEL_TIMEOUT_VARIABLE`]: crate::KERNEL_TIMEOUT_VARIABLE

mod alias;
mod compile;
mod compile_access;
mod compile_globals;
mod compile_ops;
mod exec;
mod fuse;
mod half;
mod host;
mod instr;
mod launch;
mod mask;
mod ops;
mod program;
mod types;
mod wide;

pub(crate) use host::{HostBytes, HostView, HostViews};
pub(crate) use launch::{check_arguments, KernelLimits, LaunchParts, WgslLaunch};

/// Exact `f16` conversions, for tests that compute expected values.
#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use super::half::{f16_bits_to_f32, f32_to_f16_bits};
}
pub(crate) use program::Program;

use crate::native::{self, KernelMode, NativeKernel, NotCompiled};
use naga::valid::{Capabilities, ValidationFlags, Validator};
use std::sync::{Arc, OnceLock};
use xhal_backend::{Error, Result};

/// What the validator accepts: exactly what the interpreter implements. `f16` needs
/// `enable f16;` in the source (`quantizeToF16` and the `2x16float` packs need no `f16`
/// values and are always there); 64-bit atomics, subgroups, textures and the rest are refused.
const CAPABILITIES: Capabilities = Capabilities::IMMEDIATES
    .union(Capabilities::FLOAT64)
    .union(Capabilities::SHADER_INT64)
    .union(Capabilities::SHADER_FLOAT16)
    .union(Capabilities::SHADER_FLOAT16_IN_FLOAT32);

/// One entry point of a loaded module.
#[derive(Debug)]
struct EntryPoint {
    name: String,
    stage: naga::ShaderStage,
    /// The compiled program, or why the entry point cannot run here.
    program: Result<Arc<Program>>,
    /// The compiled-mode kernel, built on first use (`None`: the interpreter runs it).
    native: OnceLock<Option<Arc<NativeKernel>>>,
}

/// A loaded WGSL module: its entry points, compute ones compiled.
#[derive(Debug)]
pub(crate) struct WgslModule {
    entry_points: Vec<EntryPoint>,
    source: String,
    mode: KernelMode,
}

impl WgslModule {
    /// Parses, validates and compiles WGSL source. A syntax or validation error is
    /// `InvalidArgument` with naga's message and the line and column it points at.
    pub(crate) fn load(code: &[u8], mode: KernelMode) -> Result<WgslModule> {
        let source = std::str::from_utf8(code)
            .map_err(|error| Error::invalid_argument(format!("WGSL source must be UTF-8 text: {error}")))?;
        let module = naga::front::wgsl::parse_str(source).map_err(|error| {
            let at = error
                .location(source)
                .map(|at| format!(" at line {}:{}", at.line_number, at.line_position))
                .unwrap_or_default();
            Error::invalid_argument(format!(
                "WGSL parse error{at}: {}\n{}",
                error.message(),
                error.emit_to_string(source)
            ))
        })?;
        let info = Validator::new(ValidationFlags::all(), CAPABILITIES)
            .validate(&module)
            .map_err(|error| {
                let at = error
                    .location(source)
                    .map(|at| format!(" at line {}:{}", at.line_number, at.line_position))
                    .unwrap_or_default();
                let mut reasons = String::new();
                let mut cause: Option<&dyn std::error::Error> = Some(error.as_inner());
                while let Some(reason) = cause {
                    if !reasons.is_empty() {
                        reasons.push_str(": ");
                    }
                    reasons.push_str(&reason.to_string());
                    cause = reason.source();
                }
                Error::invalid_argument(format!(
                    "WGSL validation error{at}: {reasons}\n{}",
                    error.emit_to_string(source)
                ))
            })?;
        let (mut module, info) = resolve_overrides(module, info)?;
        xhal_kernel::prune_decided_branches(&mut module);
        let entry_points = module
            .entry_points
            .iter()
            .enumerate()
            .map(|(index, entry)| EntryPoint {
                name: entry.name.clone(),
                stage: entry.stage,
                program: if entry.stage == naga::ShaderStage::Compute {
                    compile::compile(&module, &info, index).map(Arc::new)
                } else {
                    Err(Error::unsupported(format!(
                        "`{}` is a {:?} entry point; the cpu backend runs compute kernels only",
                        entry.name, entry.stage
                    )))
                },
                native: OnceLock::new(),
            })
            .collect();
        Ok(WgslModule {
            entry_points,
            source: source.to_owned(),
            mode,
        })
    }

    /// The compute entry point called `name`; `module` names the module in the error message
    /// (`module 0x2a`).
    /// With it comes the compiled-mode kernel, unless the mode or the kernel keeps it on the
    /// interpreter.
    pub(crate) fn kernel(&self, module: &str, name: &str) -> Result<(Arc<Program>, Option<Arc<NativeKernel>>)> {
        match self.entry_points.iter().find(|entry| entry.name == name) {
            Some(entry) => {
                let program = entry.program.clone()?;
                if self.mode == KernelMode::Interpret {
                    return Ok((program, None));
                }
                if let Some(native) = entry.native.get() {
                    return Ok((program, native.clone()));
                }
                let native = match native::compile(&self.source, name) {
                    Ok(kernel) => Some(Arc::new(kernel)),
                    Err(NotCompiled::Unsupported(why)) => {
                        let count = count_fallback();
                        if self.mode == KernelMode::Compile {
                            tracing::warn!(
                                kernel = name,
                                fallbacks = count,
                                "cpu: interpreting `{name}` (kernel {count} the compiled path could not take in this process): the compiled path lacks {why}"
                            );
                        } else {
                            tracing::info!(
                                kernel = name,
                                fallbacks = count,
                                "cpu: interpreting `{name}` (kernel {count} the compiled path could not take in this process): the compiled path lacks {why}"
                            );
                        }
                        None
                    }
                    Err(NotCompiled::NoCompiler(why)) => {
                        if self.mode == KernelMode::Compile {
                            return Err(Error::unsupported(format!(
                                "{}=compile, but {why}",
                                native::MODE_VARIABLE
                            )));
                        }
                        static SAID: std::sync::Once = std::sync::Once::new();
                        SAID.call_once(|| tracing::info!("cpu: interpreting WGSL kernels: {why}"));
                        None
                    }
                    Err(NotCompiled::Failed(why)) => {
                        if self.mode == KernelMode::Compile {
                            return Err(Error::internal(format!("compiling kernel `{name}` failed: {why}")));
                        }
                        let count = count_fallback();
                        tracing::warn!(
                            kernel = name,
                            fallbacks = count,
                            "cpu: interpreting `{name}` (kernel {count} the compiled path could not take in this process): compiling it failed: {why}"
                        );
                        None
                    }
                };
                Ok((program, entry.native.get_or_init(|| native).clone()))
            }
            None => {
                let names: Vec<String> = self
                    .entry_points
                    .iter()
                    .map(|entry| match entry.stage {
                        naga::ShaderStage::Compute => format!("`{}`", entry.name),
                        stage => format!("`{}` ({stage:?})", entry.name),
                    })
                    .collect();
                let listed = if names.is_empty() {
                    "it has no entry points".to_string()
                } else {
                    format!("its entry points: {}", names.join(", "))
                };
                Err(Error::not_found(format!(
                    "{module} has no entry point `{name}`; {listed}"
                )))
            }
        }
    }
}

/// The module with every `override` at its default value (xhal launches pass no pipeline
/// constants; values an application gives were written into the source as defaults), and
/// every array sized by one given its length.
fn resolve_overrides(
    module: naga::Module,
    info: naga::valid::ModuleInfo,
) -> Result<(naga::Module, naga::valid::ModuleInfo)> {
    if module.overrides.is_empty() {
        return Ok((module, info));
    }
    let constants = naga::back::PipelineConstants::default();
    let (resolved, _) = naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants)
        .map_err(|error| Error::invalid_argument(format!("cannot resolve the module's override constants: {error}")))?;
    let mut resolved = resolved.into_owned();
    xhal_kernel::resolve_pending_array_sizes(&mut resolved);
    let info = Validator::new(ValidationFlags::all(), CAPABILITIES)
        .validate(&resolved)
        .map_err(|error| {
            Error::internal(format!(
                "the module with its overrides resolved does not validate: {error}"
            ))
        })?;
    Ok((resolved, info))
}

/// Kernels the compiled path handed to the interpreter in this process.
static INTERPRETER_FALLBACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts one more kernel handed to the interpreter, and returns the count.
fn count_fallback() -> u64 {
    INTERPRETER_FALLBACKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

/// How many kernels the compiled path (`XHAL_CPU_MODE` `auto` or `compile`) has handed to the
/// interpreter in this process, because it lacks something they use or the C compiler
/// refused them. Each is also logged, with the reason.
pub fn interpreter_fallbacks() -> u64 {
    INTERPRETER_FALLBACKS.load(std::sync::atomic::Ordering::Relaxed)
}

//! Parsing, validation and translation of WGSL with naga.

use std::sync::Arc;

use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use naga::AddressSpace;

use crate::error::{KernelError, KernelErrorKind};
use crate::overrides::OverrideInfo;
use crate::reflect::{reflect_module, EntryPointInfo};
use crate::rewrite::BindingRewrite;

/// The naga capabilities xhal kernels may use.
///
/// Each one maps to something a device can say it supports, so a kernel that needs more
/// than its device offers is refused by a feature check in core rather than by a driver:
/// `f64` ([`XHAL_FEATURE_F64`](xhal_abi::XHAL_FEATURE_F64)), `i64`/`u64` and their atomics
/// (`XHAL_FEATURE_I64`, `XHAL_FEATURE_ATOMICS_64`), `f16` with `enable f16;`
/// (`XHAL_FEATURE_F16`), and immediates (the scalar block, which every backend provides).
/// `SHADER_FLOAT16_IN_FLOAT32` covers the core WGSL built-ins `quantizeToF16`,
/// `pack2x16float` and `unpack2x16float`, which need no device feature.
///
/// Left out on purpose, because no `XHAL_FEATURE_*` bit can promise them yet: subgroups,
/// `f32` atomics, 16-bit integers, binding arrays, and everything graphics-only.
pub const KERNEL_CAPABILITIES: Capabilities = Capabilities::IMMEDIATES
    .union(Capabilities::FLOAT64)
    .union(Capabilities::SHADER_INT64)
    .union(Capabilities::SHADER_INT64_ATOMIC_MIN_MAX)
    .union(Capabilities::SHADER_INT64_ATOMIC_ALL_OPS)
    .union(Capabilities::SHADER_FLOAT16)
    .union(Capabilities::SHADER_FLOAT16_IN_FLOAT32);

/// SPIR-V version written for Vulkan: 1.3 is what Vulkan 1.1 accepts, so the output loads on
/// every Vulkan 1.1+ driver (lavapipe included) and still has the `StorageBuffer` storage
/// class and `OpGroupNonUniform*` available.
pub const SPIRV_VERSION: (u8, u8) = (1, 3);

/// A parsed, validated and reflected WGSL module.
///
/// Cloning is cheap: the naga module and its analysis are shared.
#[derive(Debug, Clone)]
pub struct WgslModule {
    source: Arc<str>,
    module: Arc<naga::Module>,
    info: Arc<ModuleInfo>,
    entry_points: Arc<[EntryPointInfo]>,
    required_features: u64,
    /// The declarations to change for a device that takes WGSL (see
    /// [`WgslModule::is_rewritten`]); empty when the source already is the positional ABI.
    rewrites: Arc<[BindingRewrite]>,
    /// The `override`s the source declares, before they were resolved.
    overrides: Arc<[OverrideInfo]>,
    /// When the source has uniforms: `module` with them kept, for devices that bind uniforms
    /// natively, and its analysis.
    with_uniforms: Option<(Arc<naga::Module>, Arc<ModuleInfo>)>,
}

/// Parses, validates and reflects WGSL source.
///
/// Steps: naga's WGSL front end, naga's validator with [`KERNEL_CAPABILITIES`], resolution of
/// pipeline-overridable constants to their defaults (xhal launches have no pipeline
/// constants), then reflection of every compute entry point against the xhal argument ABI.
/// Any failure is a [`KernelError`] that points into `source`.
///
/// No input can crash the caller: naga runs on a helper thread with a large stack, a
/// lexical pre-check refuses nesting too deep for that stack (thousands of operators in one
/// expression, hundreds of chained `else if`s: [`KernelErrorKind::Unsupported`]), and should
/// naga itself panic, the panic is caught and returned as [`KernelErrorKind::Internal`].
pub fn parse_wgsl(source: &str) -> Result<WgslModule, KernelError> {
    guard("parsing", || parse_inner(source))
}

/// naga's WGSL front end alone, with xhal's capabilities and the same protection against
/// deep nesting and panics as [`parse_wgsl`]: for a look at the declarations.
pub(crate) fn front_end(source: &str) -> Result<naga::Module, KernelError> {
    guard("parsing", || parse_front(source))
}

fn parse_front(source: &str) -> Result<naga::Module, KernelError> {
    crate::limits::check_nesting(source)?;
    let mut options = naga::front::wgsl::Options::new();
    // Telling the parser our capabilities turns `enable wgpu_int16;` and friends into
    // parse errors that point at the directive, instead of later validation errors.
    options.capabilities = KERNEL_CAPABILITIES;
    let mut frontend = naga::front::wgsl::Frontend::new_with_options(options);
    frontend.parse(source).map_err(|e| parse_error(source, &e))
}

fn parse_inner(source: &str) -> Result<WgslModule, KernelError> {
    let module = parse_front(source)?;
    let info = validate(source, &module)?;
    let overrides = crate::overrides::declared(source, &module);
    let without_value = module
        .overrides
        .iter()
        .find(|(_, o)| o.name.is_some() && o.init.is_none())
        .and_then(|(handle, o)| Some((module.overrides.get_span(handle), o.name.as_deref()?)));
    if let Some((span, name)) = without_value {
        let missing = overrides
            .iter()
            .find(|o| o.name == name)
            .cloned()
            .unwrap_or(OverrideInfo {
                name: name.to_owned(),
                id: None,
                type_name: String::new(),
                default: None,
            });
        let id = missing.id.map(|id| format!(" (@id({id}))")).unwrap_or_default();
        return Err(KernelError::at(
            KernelErrorKind::Override,
            format!(
                "override `{}`{id} has no default value, and none was given",
                missing.name
            ),
            source,
            span,
            "no default",
        )
        .with_note(format!(
            "give it one when loading the module (`Device::load_wgsl_with_overrides`, or `xhal run --override {}=VALUE`), \
             or declare a default: `override {}: {} = ...;`",
            missing.name, missing.name, missing.type_name
        )));
    }
    let (module, info) = resolve_overrides(source, module, info)?;
    let source_spaces: Vec<AddressSpace> = module.global_variables.iter().map(|(_, var)| var.space).collect();
    let entry_points = reflect_module(source, &module, &info)?;
    let required_features = crate::reflect::required_features(&module, &info);
    let (module, info, rewrites) = match positional_bindings(&module, &entry_points)? {
        Some((positional, rewrites)) => {
            let info = validate(source, &positional)?;
            (positional, info, rewrites)
        }
        None => (module, info, Vec::new()),
    };
    // For devices that bind uniforms natively: the same IR with its uniforms kept.
    let with_uniforms = if rewrites.iter().any(|r| r.uniform) {
        let mut kept = module.clone();
        for (handle, var) in kept.global_variables.iter_mut() {
            if source_spaces.get(handle.index()) == Some(&AddressSpace::Uniform) {
                var.space = AddressSpace::Uniform;
            }
        }
        let info = validate(source, &kept)?;
        Some((Arc::new(kept), Arc::new(info)))
    } else {
        None
    };
    tracing::debug!(
        entry_points = entry_points.len(),
        overrides = overrides.len(),
        rewritten = !rewrites.is_empty(),
        "parsed and reflected a WGSL module"
    );
    Ok(WgslModule {
        source: Arc::from(source),
        module: Arc::new(module),
        info: Arc::new(info),
        entry_points: entry_points.into(),
        required_features,
        rewrites: rewrites.into(),
        overrides: overrides.into(),
        with_uniforms,
    })
}

/// The module as every backend takes it: each buffer an entry point uses at
/// `@group(0) @binding(argument)`, and uniforms as read-only storage (the same bytes: WGSL lays
/// a type out alike in both spaces, and a type valid in a uniform is valid in storage). Then a
/// translation, and a backend that reflects what it is given, sees the positional ABI whatever
/// numbers and spaces the author chose. `None` when the module already is that way; otherwise
/// the module and the same changes as edits of the source (see the `rewrite` module).
///
/// One module serves all its entry points, so a buffer two entry points share must be at the
/// same argument in both; a module where it is not is refused, naming both.
fn positional_bindings(
    module: &naga::Module,
    entry_points: &[EntryPointInfo],
) -> Result<Option<(naga::Module, Vec<BindingRewrite>)>, KernelError> {
    use std::collections::HashMap;
    let key = |group: u32, binding: u32| (group, binding);
    // (group, binding) as declared -> (argument, the entry point that fixed it).
    let mut arguments: HashMap<(u32, u32), (u32, &str, &str)> = HashMap::new();
    for entry in entry_points {
        for buffer in &entry.buffers {
            let at = key(buffer.group, buffer.binding);
            match arguments.get(&at) {
                Some(&(argument, first, _)) if argument != buffer.argument => {
                    return Err(KernelError::new(
                        KernelErrorKind::Reflection,
                        format!(
                            "entry points `{first}` and `{}` both use `{}` (@group({}) @binding({})), as buffer \
                             argument {argument} of `{first}` but argument {} of `{}`",
                            entry.name, buffer.name, buffer.group, buffer.binding, buffer.argument, entry.name
                        ),
                    )
                    .with_note(
                        "a launch's buffer arguments are the bindings its entry point uses, in (group, binding) \
                         order, and one module serves every entry point: put these entry points in modules of \
                         their own, or give them the same bindings before this one",
                    ));
                }
                Some(_) => {}
                None => {
                    arguments.insert(at, (buffer.argument, entry.name.as_str(), buffer.name.as_str()));
                }
            }
        }
    }
    let buffer_space = |space: AddressSpace| matches!(space, AddressSpace::Storage { .. } | AddressSpace::Uniform);
    let positional = module.global_variables.iter().all(|(_, var)| {
        !buffer_space(var.space)
            || (var.space != AddressSpace::Uniform
                && var.binding.as_ref().is_none_or(|b| {
                    b.group == 0
                        && arguments
                            .get(&key(b.group, b.binding))
                            .is_none_or(|&(a, _, _)| a == b.binding)
                }))
    });
    if positional {
        return Ok(None);
    }
    let mut rewritten = module.clone();
    let mut rewrites = Vec::new();
    // Buffers no compute entry point uses are numbered after every argument, so they never
    // meet one.
    let mut unused = arguments
        .values()
        .map(|&(argument, _, _)| argument + 1)
        .max()
        .unwrap_or(0);
    for (handle, var) in rewritten.global_variables.iter_mut() {
        if !buffer_space(var.space) {
            continue;
        }
        let uniform = var.space == AddressSpace::Uniform;
        if uniform {
            var.space = AddressSpace::Storage {
                access: naga::StorageAccess::LOAD,
            };
        }
        if let Some(binding) = var.binding.as_mut() {
            let argument = match arguments.get(&key(binding.group, binding.binding)) {
                Some(&(argument, _, _)) => argument,
                None => {
                    unused += 1;
                    unused - 1
                }
            };
            let positional = naga::ResourceBinding {
                group: 0,
                binding: argument,
            };
            rewrites.push(BindingRewrite {
                declaration: module.global_variables.get_span(handle).to_range().unwrap_or(0..0),
                group: 0,
                binding: argument,
                renumbers: *binding != positional,
                uniform,
            });
            *binding = positional;
        }
    }
    Ok(Some((rewritten, rewrites)))
}

fn validate(source: &str, module: &naga::Module) -> Result<ModuleInfo, KernelError> {
    Validator::new(ValidationFlags::all(), KERNEL_CAPABILITIES)
        .validate(module)
        .map_err(|e| validation_error(source, &e))
}

/// Replaces every `override` with its default value.
///
/// The xhal launch has no pipeline constants, so defaults are the only values an override
/// can take; resolving them here also gives reflection real workgroup sizes and lets the
/// SPIR-V writer (which refuses overrides) run.
fn resolve_overrides(
    source: &str,
    module: naga::Module,
    info: ModuleInfo,
) -> Result<(naga::Module, ModuleInfo), KernelError> {
    if module.overrides.is_empty() {
        return Ok((module, info));
    }
    let constants = naga::back::PipelineConstants::default();
    match naga::back::pipeline_constants::process_overrides(&module, &info, None, &constants) {
        Ok((resolved, _)) => {
            // naga revalidates with every capability enabled, so its `ModuleInfo` is set
            // aside and the resolved module validated again with ours: it is held to the
            // same rules as the source.
            let mut resolved = resolved.into_owned();
            resolve_pending_array_sizes(&mut resolved);
            let info = validate(source, &resolved)?;
            Ok((resolved, info))
        }
        Err(e) => {
            let mut error = KernelError::new(
                KernelErrorKind::Unsupported,
                format!("cannot resolve pipeline-overridable constants: {e}"),
            )
            .with_note(
                "xhal launches pass no pipeline constants, so every `override` a kernel uses \
                 needs a default value (`override n: u32 = 64;`)",
            );
            let mut cause = std::error::Error::source(&e);
            while let Some(next) = cause {
                error = error.with_note(next.to_string());
                cause = next.source();
            }
            Err(error)
        }
    }
}

/// The capabilities SPIR-V for Vulkan may use: all of them but the integer dot products, so
/// that `dot4I8Packed` and `dot4U8Packed` are written as plain arithmetic. Their instructions
/// need `SPV_KHR_integer_dot_product`, which neither every Vulkan 1.1 driver nor the SPIR-V
/// readers that backends reflect with take.
fn spirv_capabilities() -> naga::FastHashSet<naga::back::spv::Capability> {
    use naga::back::spv::Capability;
    (0..=u32::from(u16::MAX))
        .filter_map(Capability::from_u32)
        .filter(|c| {
            !matches!(
                c,
                Capability::DotProduct
                    | Capability::DotProductInput4x8BitPacked
                    | Capability::DotProductInput4x8Bit
                    | Capability::DotProductInputAll
            )
        })
        .collect()
}

/// Gives every array whose length is an override (`array<f32, block>`) its resolved length.
/// naga's `process_overrides` evaluates the overrides but leaves such lengths pending, for
/// its own writers to look up; xhal's writers and reflection then see ordinary fixed-size
/// arrays. The module's overrides must be resolved already.
pub fn resolve_pending_array_sizes(module: &mut naga::Module) {
    let pending: Vec<(naga::Handle<naga::Type>, naga::Type)> = module
        .types
        .iter()
        .filter_map(|(handle, ty)| match ty.inner {
            naga::TypeInner::Array {
                base,
                size: size @ naga::ArraySize::Pending(_),
                stride,
            } => {
                let length = match size.resolve(module.to_ctx()) {
                    Ok(naga::proc::IndexableLength::Known(length)) => std::num::NonZeroU32::new(length)?,
                    _ => return None,
                };
                Some((
                    handle,
                    naga::Type {
                        name: ty.name.clone(),
                        inner: naga::TypeInner::Array {
                            base,
                            size: naga::ArraySize::Constant(length),
                            stride,
                        },
                    },
                ))
            }
            _ => None,
        })
        .collect();
    for (handle, mut ty) in pending {
        // The arena holds each type once: where the same fixed-size array is already there
        // (`array<f32, 256>` beside `array<f32, n * n>` with n = 16), a name of its own keeps
        // this one distinct, since other handles point at both.
        if module.types.get(&ty).is_some() {
            ty.name = Some(format!("xhal_override_sized_{}", handle.index()));
        }
        module.types.replace(handle, ty);
    }
}

impl WgslModule {
    /// The WGSL text this module was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The pipeline-overridable constants the source declares, with their types and
    /// defaults (see [`crate::apply_overrides`] for giving them values).
    pub fn overrides(&self) -> &[OverrideInfo] {
        &self.overrides
    }

    /// Whether the IR differs from the source in what a device sees: bindings renumbered to
    /// their argument positions, or uniforms lowered to read-only storage.
    pub fn is_rewritten(&self) -> bool {
        !self.rewrites.is_empty()
    }

    /// Whether a device that takes WGSL must get [`WgslModule::to_device_wgsl`] rather than
    /// the source as written: some buffer is not at its argument position, or a uniform must
    /// be lowered for a device without native uniforms.
    pub fn needs_device_wgsl(&self, native_uniforms: bool) -> bool {
        crate::rewrite::needed(&self.rewrites, native_uniforms)
    }

    /// WGSL as a device takes it: the source as written when it already is the positional
    /// ABI, else the source with its buffer declarations changed to it (bindings at
    /// `@group(0) @binding(argument)`, and `var<uniform>` as `var<storage, read>` unless the
    /// device takes uniforms natively) and nothing else (see the `rewrite` module). The result is
    /// checked: it must reflect the same launches and need no rewriting itself.
    pub fn to_device_wgsl(&self, native_uniforms: bool) -> Result<String, KernelError> {
        if !self.needs_device_wgsl(native_uniforms) {
            return Ok(self.source.to_string());
        }
        let text = crate::rewrite::apply(&self.source, &self.rewrites, native_uniforms)?;
        let reparsed = parse_wgsl(&text).map_err(|e| {
            KernelError::new(
                KernelErrorKind::Internal,
                format!("the WGSL rewritten for devices does not parse again: {}", e.message()),
            )
        })?;
        let same = !reparsed.needs_device_wgsl(native_uniforms)
            && reparsed.entry_points.len() == self.entry_points.len()
            && reparsed
                .entry_points
                .iter()
                .zip(self.entry_points.iter())
                .all(|(a, b)| a.same_interface(b));
        if !same {
            return Err(KernelError::new(
                KernelErrorKind::Internal,
                "the WGSL rewritten for devices changed the kernel interface",
            ));
        }
        Ok(text)
    }

    /// The validated naga IR, with `override`s replaced by their default values, and every
    /// buffer at `@group(0) @binding(argument)` in the storage address space (see
    /// [`WgslModule::is_rewritten`]).
    pub fn naga_module(&self) -> &naga::Module {
        &self.module
    }

    /// naga's analysis of [`WgslModule::naga_module`] (global uses per function, expression
    /// types...).
    pub fn module_info(&self) -> &ModuleInfo {
        &self.info
    }

    /// Reflection of every compute entry point, in source order. Vertex and fragment entry
    /// points are valid WGSL but not kernels, so they are not listed.
    pub fn entry_points(&self) -> &[EntryPointInfo] {
        &self.entry_points
    }

    /// The reflection shared as an `Arc`, for callers that keep it past the module.
    pub fn entry_points_arc(&self) -> Arc<[EntryPointInfo]> {
        Arc::clone(&self.entry_points)
    }

    /// Reflection of the compute entry point called `name`.
    pub fn entry_point(&self, name: &str) -> Result<&EntryPointInfo, KernelError> {
        self.entry_points.iter().find(|ep| ep.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.entry_points.iter().map(|ep| ep.name.as_str()).collect();
            let listed = if names.is_empty() {
                "the module has no compute entry points".to_owned()
            } else {
                format!("the module's compute entry points are: {}", names.join(", "))
            };
            KernelError::new(
                KernelErrorKind::NotFound,
                format!("no compute entry point named `{name}`"),
            )
            .with_note(listed)
        })
    }

    /// `XHAL_FEATURE_*` bits the module needs from a device: `F16`, `F64`, `I64` (64-bit
    /// integers), `ATOMICS_32` and `ATOMICS_64` (atomics on buffer or workgroup memory).
    ///
    /// Computed over the whole module (every type and every expression's type), so it may
    /// overstate what one entry point needs but never understates it.
    pub fn required_features(&self) -> u64 {
        self.required_features
    }

    /// Translates to SPIR-V for the Vulkan shader execution model.
    ///
    /// SPIR-V [`SPIRV_VERSION`] (1.3). `@group(g) @binding(b)` become `DescriptorSet g`,
    /// `Binding b`; the `var<immediate>` becomes a `PushConstant` block. Indices are clamped
    /// into bounds (naga's `Restrict` policy, as wgpu uses without robust buffer access): an
    /// out-of-bounds access touches some element of the same buffer, never other memory, on
    /// every driver, which is what WGSL allows. (`ReadZeroSkipWrite` would be tidier, but
    /// naga 30 cannot apply it to atomics.)
    /// Workgroup memory is zeroed by code (naga's polyfill) because the native
    /// zero-initialisation feature is only guaranteed from Vulkan 1.3. Integer division by
    /// zero gives the WGSL-defined result.
    pub fn to_spirv(&self) -> Result<Vec<u32>, KernelError> {
        self.to_spirv_with(false)
    }

    /// [`WgslModule::to_spirv`] for a device that binds uniforms natively when
    /// `native_uniforms`: each `var<uniform>` is then a `Uniform` block (a uniform buffer
    /// descriptor) rather than a read-only storage buffer.
    pub fn to_spirv_with(&self, native_uniforms: bool) -> Result<Vec<u32>, KernelError> {
        let (module, info) = match (&self.with_uniforms, native_uniforms) {
            (Some((module, info)), true) => (&**module, &**info),
            _ => (&*self.module, &*self.info),
        };
        let policy = naga::proc::BoundsCheckPolicy::Restrict;
        let options = naga::back::spv::Options {
            lang_version: SPIRV_VERSION,
            // Only debug names: the other default flags concern graphics stages, and naga
            // enables DEBUG only in debug builds, which would make output depend on the
            // profile this crate was built with.
            flags: naga::back::spv::WriterFlags::DEBUG,
            // With no binding map, "fake" bindings are the declared ones: `@group(g)
            // @binding(b)` is written as DescriptorSet g, Binding b, which is the ABI.
            fake_missing_bindings: true,
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: policy,
                buffer: policy,
                image_load: policy,
                binding_array: policy,
            },
            capabilities: Some(spirv_capabilities()),
            ..naga::back::spv::Options::default()
        };
        guard("writing SPIR-V", || {
            naga::back::spv::write_vec(module, info, &options, None)
                .map_err(|e| KernelError::new(KernelErrorKind::Translation, format!("cannot translate to SPIR-V: {e}")))
        })
    }

    /// Writes the module back as WGSL with naga's writer: one canonical spelling, the
    /// `override`s replaced by their values, the needed `enable` directives first.
    ///
    /// The result is checked before it is returned: it must parse again and reflect the same
    /// interface ([`EntryPointInfo::same_interface`]). naga's writer renames identifiers
    /// that end in a digit or clash with a WGSL built-in (`kernel2` becomes `kernel2_`,
    /// `step` becomes `step_`); for variables that is harmless, but entry points are looked up
    /// by name, so their original names are put back.
    pub fn to_wgsl(&self) -> Result<String, KernelError> {
        let written = guard("writing WGSL", || {
            let patched = keep_phony_globals(&self.module);
            let module = patched.as_ref().unwrap_or(&self.module);
            naga::back::wgsl::write_string(module, &self.info, naga::back::wgsl::WriterFlags::empty())
                .map_err(|e| KernelError::new(KernelErrorKind::Translation, format!("cannot translate to WGSL: {e}")))
        })?;
        let written = self.keep_f16_enable(written);
        let written = self.restore_entry_point_names(written)?;
        // The check: the text we hand out must be a kernel with the same interface.
        let reparsed = parse_wgsl(&written).map_err(|e| {
            KernelError::new(
                KernelErrorKind::Translation,
                format!(
                    "naga's WGSL writer produced text that does not parse again: {}",
                    e.message()
                ),
            )
            .with_note("this is a bug in naga's WGSL writer; the SPIR-V target is unaffected")
        })?;
        let same = reparsed.entry_points.len() == self.entry_points.len()
            && reparsed
                .entry_points
                .iter()
                .zip(self.entry_points.iter())
                .all(|(a, b)| a.same_interface(b));
        if !same {
            return Err(KernelError::new(
                KernelErrorKind::Translation,
                "naga's WGSL writer changed the kernel interface (entry points, bindings or layouts)",
            )
            .with_note("this is a bug in naga's WGSL writer; the SPIR-V target is unaffected"));
        }
        Ok(written)
    }

    /// naga's writer emits `enable f16;` only when an f16 *type* is declared, so a kernel that
    /// uses f16 only in expressions (`f16(x)`) would lose the directive and fail to parse
    /// again. When the source enabled f16, the written text enables it too.
    fn keep_f16_enable(&self, written: String) -> String {
        let enables_f16 = |text: &str| {
            text.lines().any(|line| {
                let line = line.trim_start();
                line.starts_with("enable")
                    && line
                        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                        .any(|word| word == "f16")
            })
        };
        if enables_f16(&self.source) && !enables_f16(&written) {
            format!("enable f16;\n{written}")
        } else {
            written
        }
    }

    /// Gives renamed entry points their names back in `written`.
    ///
    /// Entry points cannot be called, so a name appears once, in `fn name(`. The writer keeps
    /// entry points in module order, so reading the written names back in order pairs each
    /// with its original.
    fn restore_entry_point_names(&self, written: String) -> Result<String, KernelError> {
        let reread = guard("reading written WGSL", || {
            naga::front::wgsl::parse_str(&written).map_err(|e| {
                KernelError::new(
                    KernelErrorKind::Translation,
                    format!(
                        "naga's WGSL writer produced text that does not parse again: {}",
                        e.message()
                    ),
                )
            })
        })?;
        if reread.entry_points.len() != self.module.entry_points.len() {
            return Err(KernelError::new(
                KernelErrorKind::Translation,
                "naga's WGSL writer changed the number of entry points",
            ));
        }
        let mut text = written;
        for (original, renamed) in self.module.entry_points.iter().zip(&reread.entry_points) {
            if original.name == renamed.name {
                continue;
            }
            let from = format!("fn {}(", renamed.name);
            if text.matches(&from).count() != 1 {
                return Err(KernelError::new(
                    KernelErrorKind::Translation,
                    format!(
                        "naga's WGSL writer renamed entry point `{}` to `{}` and the name cannot be restored",
                        original.name, renamed.name
                    ),
                ));
            }
            text = text.replacen(&from, &format!("fn {}(", original.name), 1);
        }
        Ok(text)
    }
}

/// Stack for naga's recursive passes. The WGSL parser caps bracket and brace nesting, but
/// lowering, validation and the writers recurse over operator and `else if` chains without a
/// cap, and an unoptimised build spends kilobytes per level: a 2 MiB test thread overflows on
/// 100 nested blocks. A stack overflow aborts the process (it cannot be caught), so naga
/// always runs on a thread with this much stack, and `limits::check_nesting` keeps inputs
/// within what it can hold. The memory is reserved, not committed: untouched pages cost
/// nothing.
const NAGA_STACK_BYTES: usize = 128 << 20;

/// Runs `f` on a thread with [`NAGA_STACK_BYTES`] of stack, turning a panic inside naga into
/// an error, so that no input can crash the host.
pub(crate) fn guard<T: Send>(what: &str, f: impl FnOnce() -> Result<T, KernelError> + Send) -> Result<T, KernelError> {
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("xhal-kernel-naga".to_owned())
            .stack_size(NAGA_STACK_BYTES)
            .spawn_scoped(scope, f);
        let handle = match spawned {
            Ok(handle) => handle,
            Err(e) => {
                return Err(KernelError::new(
                    KernelErrorKind::Internal,
                    format!("cannot start a thread for {what}: {e}"),
                ))
            }
        };
        match handle.join() {
            Ok(result) => result,
            Err(payload) => {
                let detail = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".to_owned());
                tracing::error!(%detail, "naga panicked while {what}");
                Err(KernelError::new(
                    KernelErrorKind::Internal,
                    format!("naga panicked while {what}: {detail}"),
                )
                .with_note("this is a bug in naga; please report the kernel that triggered it"))
            }
        }
    })
}

fn parse_error(source: &str, error: &naga::front::wgsl::ParseError) -> KernelError {
    let mut labels = error.labels();
    let mut out = match labels.next() {
        Some((span, label)) => KernelError::at(KernelErrorKind::Parse, error.message(), source, span, label),
        None => KernelError::new(KernelErrorKind::Parse, error.message()),
    };
    for (span, label) in labels {
        out = out.with_note(secondary_note(source, span, label));
    }
    for note in error.notes() {
        out = out.with_note(note);
    }
    out
}

fn validation_error(source: &str, error: &naga::WithSpan<naga::valid::ValidationError>) -> KernelError {
    use std::error::Error as _;
    // naga's top-level message names the item ("Function [0] 'main' is invalid"); the
    // specific reason sits further down the `source()` chain, so the deepest cause makes the
    // best headline and the rest become notes.
    let mut chain = vec![error.as_inner().to_string()];
    let mut cause = error.as_inner().source();
    while let Some(next) = cause {
        chain.push(next.to_string());
        cause = next.source();
    }
    let headline = chain.pop().unwrap_or_default();
    let mut spans = error.spans();
    let mut out = match spans.next() {
        Some((span, label)) => KernelError::at(KernelErrorKind::Validation, headline, source, *span, label),
        None => KernelError::new(KernelErrorKind::Validation, headline),
    };
    for (span, label) in spans {
        out = out.with_note(secondary_note(source, *span, label));
    }
    for context in chain {
        out = out.with_note(context);
    }
    out
}

/// A one-line note for a secondary span: "line:column: label".
fn secondary_note(source: &str, span: naga::Span, label: &str) -> String {
    let located = KernelError::at(KernelErrorKind::Parse, "", source, span, label);
    match located.location() {
        Some(loc) => format!("{}:{}: {label}", loc.line, loc.column),
        None => label.to_owned(),
    }
}

/// Makes `_ = &buffer;` survive naga's WGSL writer.
///
/// The front end records a phony assignment as a named expression, and naga's analysis
/// counts the global as used (WGSL's way to put a binding in an entry point's interface).
/// But a bare global is never part of an `Emit` statement, and the writer only writes
/// named expressions when it meets their `Emit`, so the phony assignment vanished and the
/// written WGSL lost the binding. Emitting those expressions at the top of the body makes
/// the writer print `let phony = &buffer;`, which keeps the binding in the interface.
/// Returns `None` when nothing needs patching.
fn keep_phony_globals(module: &naga::Module) -> Option<naga::Module> {
    fn patch(function: &mut naga::Function) -> bool {
        let globals: Vec<naga::Handle<naga::Expression>> = function
            .named_expressions
            .keys()
            .copied()
            .filter(|&h| matches!(function.expressions.try_get(h), Ok(naga::Expression::GlobalVariable(_))))
            .collect();
        if globals.is_empty() {
            return false;
        }
        let mut body = naga::Block::with_capacity(globals.len() + function.body.len());
        for handle in globals {
            body.push(
                naga::Statement::Emit(naga::Range::new_from_bounds(handle, handle)),
                naga::Span::UNDEFINED,
            );
        }
        body.extend_block(std::mem::take(&mut function.body));
        function.body = body;
        true
    }
    let needs_patch = |f: &naga::Function| {
        f.named_expressions
            .keys()
            .any(|&h| matches!(f.expressions.try_get(h), Ok(naga::Expression::GlobalVariable(_))))
    };
    let any = module.functions.iter().any(|(_, f)| needs_patch(f))
        || module.entry_points.iter().any(|ep| needs_patch(&ep.function));
    if !any {
        return None;
    }
    let mut patched = module.clone();
    for (_, function) in patched.functions.iter_mut() {
        patch(function);
    }
    for ep in patched.entry_points.iter_mut() {
        patch(&mut ep.function);
    }
    Some(patched)
}

//! Module bundles: one kernel in several formats, and the choice of the one a device gets.

use std::sync::Arc;

use xhal_abi::{
    XHAL_KERNEL_FORMAT_CPU_BUILTIN, XHAL_KERNEL_FORMAT_CUBIN, XHAL_KERNEL_FORMAT_CUDA_C, XHAL_KERNEL_FORMAT_HIP_C,
    XHAL_KERNEL_FORMAT_HSACO, XHAL_KERNEL_FORMAT_OPENCL_C, XHAL_KERNEL_FORMAT_PTX, XHAL_KERNEL_FORMAT_SPIRV_KERNEL,
    XHAL_KERNEL_FORMAT_SPIRV_SHADER, XHAL_KERNEL_FORMAT_WGSL,
};

use crate::cache::{reflect, translate_with, Target, TranslateOptions};
use crate::error::{KernelError, KernelErrorKind};
use crate::reflect::EntryPointInfo;

/// The printable name of an `XHAL_KERNEL_FORMAT_*` code (`"spirv-shader"`, `"cuda-c"`), spelled
/// as xhal-core's `KernelFormat::name` spells it; any other value prints as `vendor-0x...`.
pub fn format_name(format: u32) -> String {
    let known = match format {
        XHAL_KERNEL_FORMAT_WGSL => "wgsl",
        XHAL_KERNEL_FORMAT_SPIRV_SHADER => "spirv-shader",
        XHAL_KERNEL_FORMAT_SPIRV_KERNEL => "spirv-kernel",
        XHAL_KERNEL_FORMAT_PTX => "ptx",
        XHAL_KERNEL_FORMAT_CUBIN => "cubin",
        XHAL_KERNEL_FORMAT_HSACO => "hsaco",
        XHAL_KERNEL_FORMAT_CUDA_C => "cuda-c",
        XHAL_KERNEL_FORMAT_HIP_C => "hip-c",
        XHAL_KERNEL_FORMAT_OPENCL_C => "opencl-c",
        XHAL_KERNEL_FORMAT_CPU_BUILTIN => "cpu-builtin",
        other => return format!("vendor-{other:#x}"),
    };
    known.to_owned()
}

/// Whether `format` is source text a device compiles at run time (WGSL, CUDA C, HIP C,
/// OpenCL C). Everything else, vendor formats included, counts as a binary or IR the driver
/// loads directly.
pub fn is_source_format(format: u32) -> bool {
    matches!(
        format,
        XHAL_KERNEL_FORMAT_WGSL | XHAL_KERNEL_FORMAT_CUDA_C | XHAL_KERNEL_FORMAT_HIP_C | XHAL_KERNEL_FORMAT_OPENCL_C
    )
}

/// One form of a kernel module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// `XHAL_KERNEL_FORMAT_*` code.
    pub format: u32,
    /// The module in that format (text as UTF-8; SPIR-V as little-endian words).
    pub bytes: Arc<[u8]>,
}

impl Variant {
    /// A variant of `format` holding `bytes`.
    pub fn new(format: u32, bytes: impl Into<Arc<[u8]>>) -> Self {
        Self {
            format,
            bytes: bytes.into(),
        }
    }

    /// The bytes as text, when they are UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }
}

/// A kernel module as a bundle of variants, one per format.
///
/// Typically the portable WGSL, plus whatever prebuilt binaries an author ships (a cubin for
/// one GPU generation, a hand-tuned PTX). Native variants must follow the xhal argument ABI;
/// when the bundle has WGSL, its reflection describes them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleBundle {
    variants: Vec<Variant>,
}

/// What to hand a device, as decided by [`ModuleBundle::pick`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Give the device this variant of the bundle as it is.
    Use(Variant),
    /// Translate the bundle's WGSL variant to `target` (see [`crate::translate`]) and give the
    /// device the result.
    Translate {
        /// What to produce.
        target: Target,
    },
}

impl Plan {
    /// The `XHAL_KERNEL_FORMAT_*` code the device will receive.
    pub fn format(&self) -> u32 {
        match self {
            Plan::Use(variant) => variant.format,
            Plan::Translate { target } => target.format(),
        }
    }
}

/// A kernel ready for a device: the outcome of [`ModuleBundle::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedKernel {
    /// `XHAL_KERNEL_FORMAT_*` code of `bytes`.
    pub format: u32,
    /// The kernel for the device.
    pub bytes: Arc<[u8]>,
    /// Reflection from the bundle's WGSL; `None` when the bundle has no WGSL variant (then
    /// the caller must know the interface some other way).
    pub reflection: Option<Arc<[EntryPointInfo]>>,
    /// `XHAL_FEATURE_*` bits the WGSL needs (0 without WGSL).
    pub required_features: u64,
    /// Whether `bytes` came out of a translation rather than straight from the bundle.
    pub translated: bool,
}

impl ModuleBundle {
    /// An empty bundle.
    pub fn new() -> Self {
        Self::default()
    }

    /// A bundle holding one WGSL variant.
    pub fn from_wgsl(source: &str) -> Self {
        Self::new().with_variant(XHAL_KERNEL_FORMAT_WGSL, source.as_bytes())
    }

    /// A bundle of WGSL whose `override` constants take `values` (by name, or by `@id` as a
    /// number; see [`crate::apply_overrides`]).
    pub fn from_wgsl_with_overrides(source: &str, values: &[(String, f64)]) -> Result<Self, KernelError> {
        Ok(Self::from_wgsl(&crate::apply_overrides(source, values)?))
    }

    /// Adds a variant, replacing any variant of the same format (one per format keeps the
    /// choice unambiguous).
    pub fn with_variant(mut self, format: u32, bytes: impl Into<Arc<[u8]>>) -> Self {
        let variant = Variant::new(format, bytes);
        match self.variants.iter_mut().find(|v| v.format == format) {
            Some(slot) => *slot = variant,
            None => self.variants.push(variant),
        }
        self
    }

    /// The variants, in the order they were added.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// The variant of `format`, if the bundle has one.
    pub fn variant(&self, format: u32) -> Option<&Variant> {
        self.variants.iter().find(|v| v.format == format)
    }

    /// The WGSL source, if the bundle has a WGSL variant; an error if that variant is not
    /// UTF-8.
    pub fn wgsl(&self) -> Option<Result<&str, KernelError>> {
        let variant = self.variant(XHAL_KERNEL_FORMAT_WGSL)?;
        Some(std::str::from_utf8(&variant.bytes).map_err(|e| {
            KernelError::new(
                KernelErrorKind::Parse,
                format!(
                    "the bundle's WGSL variant is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            )
        }))
    }

    /// The `XHAL_FEATURE_*` bits the bundle's WGSL needs (reflected through the process-wide
    /// cache), or `None` without a WGSL variant. A device can refuse a kernel for a feature
    /// it lacks before translating it, which might fail for that very feature.
    pub fn wgsl_required_features(&self) -> Result<Option<u64>, KernelError> {
        match self.wgsl().transpose()? {
            Some(source) => Ok(Some(reflect(source)?.required_features)),
            None => Ok(None),
        }
    }

    /// Chooses what to give a device that accepts `accepted` (`XHAL_KERNEL_FORMAT_*` codes,
    /// most preferred first, as in `XhalDeviceInfo::kernel_formats`; zeros are unused slots
    /// and skipped).
    ///
    /// The order, each step walking `accepted` in the device's order:
    /// 1. a variant the bundle already has in a binary or IR format the device accepts
    ///    (cubin, hsaco, PTX, SPIR-V, vendor formats): the author built it for this;
    /// 2. a binary or IR format xhal can produce from the bundle's WGSL (SPIR-V for Vulkan);
    /// 3. source for run-time compilation: a source variant the bundle has (WGSL itself, as
    ///    written, so compiler messages match the author's lines), or one xhal can produce
    ///    from WGSL (CUDA C, HIP C, OpenCL C: see [`Target`]).
    ///
    /// No I/O and no translation happens here; see [`ModuleBundle::resolve`] for that.
    pub fn pick(&self, accepted: &[u32]) -> Result<Plan, KernelError> {
        let accepted = || accepted.iter().copied().filter(|&f| f != 0);
        let has_wgsl = self.variant(XHAL_KERNEL_FORMAT_WGSL).is_some();
        // 1. Binaries and IR the bundle carries.
        for format in accepted().filter(|&f| !is_source_format(f)) {
            if let Some(variant) = self.variant(format) {
                return Ok(Plan::Use(variant.clone()));
            }
        }
        // 2. Binaries and IR produced from WGSL. A device that also takes OpenCL C gets that
        // instead of Kernel SPIR-V: the OpenCL C translation is the one proven by execution
        // (on PoCL, in CI); Kernel SPIR-V from WGSL is for devices that take nothing else
        // (Level Zero).
        let takes_opencl_c = accepted().any(|f| f == XHAL_KERNEL_FORMAT_OPENCL_C);
        if has_wgsl {
            for format in accepted() {
                if format == XHAL_KERNEL_FORMAT_SPIRV_KERNEL && takes_opencl_c {
                    continue;
                }
                if let Some(target) = Target::from_format(format).filter(|t| !t.is_source()) {
                    return Ok(Plan::Translate { target });
                }
            }
        }
        // 3. Source for run-time compilation, carried or produced.
        for format in accepted().filter(|&f| is_source_format(f)) {
            if let Some(variant) = self.variant(format) {
                return Ok(Plan::Use(variant.clone()));
            }
            if has_wgsl {
                if let Some(target) = Target::from_format(format).filter(|t| t.is_source()) {
                    return Ok(Plan::Translate { target });
                }
            }
        }
        Err(self.no_fit(accepted().collect()))
    }

    fn no_fit(&self, accepted: Vec<u32>) -> KernelError {
        let names = |formats: &mut dyn Iterator<Item = u32>| {
            let list: Vec<String> = formats.map(format_name).collect();
            if list.is_empty() {
                "nothing".to_owned()
            } else {
                list.join(", ")
            }
        };
        let device = names(&mut accepted.into_iter());
        let bundle = names(&mut self.variants.iter().map(|v| v.format));
        let hint = if self.variant(XHAL_KERNEL_FORMAT_WGSL).is_some() {
            format!(
                "from WGSL, xhal can produce: {}",
                names(&mut Target::ALL.iter().map(|t| t.format()))
            )
        } else {
            "add a WGSL variant so xhal can translate the kernel for the device".to_owned()
        };
        KernelError::new(
            KernelErrorKind::Unsupported,
            format!("no variant of this module fits the device: the device accepts {device}; the bundle has {bundle}"),
        )
        .with_note(hint)
    }

    /// Picks a variant for a device (see [`ModuleBundle::pick`]) and produces it: the variant
    /// as it is, or the translation (through the process-wide cache). The bundle's WGSL, when
    /// present, is parsed and reflected in every case, so a broken WGSL variant is reported
    /// even when a native variant is picked.
    pub fn resolve(&self, accepted: &[u32]) -> Result<ResolvedKernel, KernelError> {
        self.resolve_with(accepted, TranslateOptions::default())
    }

    /// [`ModuleBundle::resolve`] for a device with particular needs ([`TranslateOptions`]).
    pub fn resolve_with(&self, accepted: &[u32], options: TranslateOptions) -> Result<ResolvedKernel, KernelError> {
        let plan = self.pick(accepted)?;
        let wgsl = self.wgsl().transpose()?;
        match plan {
            Plan::Translate { target } => {
                let Some(source) = wgsl else {
                    // pick() only plans a translation when WGSL is present.
                    return Err(KernelError::new(
                        KernelErrorKind::Unsupported,
                        "nothing to translate: no WGSL variant",
                    ));
                };
                let translation = translate_with(source, target, options)?;
                Ok(ResolvedKernel {
                    format: translation.format,
                    bytes: Arc::clone(&translation.bytes),
                    reflection: Some(Arc::clone(&translation.reflection)),
                    required_features: translation.required_features,
                    translated: true,
                })
            }
            Plan::Use(variant) => {
                // Reflection comes from the WGSL, parsed but not translated (the device gets
                // the variant as it is), and cached, so repeated resolves cost one lookup.
                let reflected = wgsl.map(reflect).transpose()?;
                // WGSL whose bindings or uniforms the device must not see as written (gaps,
                // other groups, `var<uniform>` for a device without uniforms) goes rewritten
                // to the positional ABI instead.
                if let (Some(source), Some(reflected)) = (wgsl, &reflected) {
                    if variant.format == XHAL_KERNEL_FORMAT_WGSL && reflected.needs_device_wgsl(options.native_uniforms)
                    {
                        let translation = translate_with(source, Target::Wgsl, options)?;
                        return Ok(ResolvedKernel {
                            format: translation.format,
                            bytes: Arc::clone(&translation.bytes),
                            reflection: Some(Arc::clone(&translation.reflection)),
                            required_features: translation.required_features,
                            translated: true,
                        });
                    }
                }
                Ok(ResolvedKernel {
                    format: variant.format,
                    bytes: variant.bytes,
                    reflection: reflected.as_ref().map(|r| Arc::clone(&r.entry_points)),
                    required_features: reflected.as_ref().map_or(0, |r| r.required_features),
                    translated: false,
                })
            }
        }
    }
}

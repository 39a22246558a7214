//! Translation targets and the process-wide translation cache.
//!
//! Translating a kernel costs a parse, a validation and a back-end pass; an application
//! launches the same few kernels on the same devices over and over. So results are kept per
//! (source, target) for the life of the process and handed out as shared `Arc`s.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use xhal_abi::{
    XHAL_KERNEL_FORMAT_CUDA_C, XHAL_KERNEL_FORMAT_HIP_C, XHAL_KERNEL_FORMAT_OPENCL_C, XHAL_KERNEL_FORMAT_SPIRV_KERNEL,
    XHAL_KERNEL_FORMAT_SPIRV_SHADER, XHAL_KERNEL_FORMAT_WGSL,
};

use crate::c::Dialect;
use crate::error::KernelError;
use crate::reflect::EntryPointInfo;
use crate::wgsl::parse_wgsl;

/// A format xhal-kernel can produce from WGSL.
///
/// New targets are added here, with their format in
/// [`Target::format`] and their tier in [`Target::is_source`]; the bundle's variant picking
/// then offers them without further change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// SPIR-V for Vulkan (`XHAL_KERNEL_FORMAT_SPIRV_SHADER`), see [`crate::WgslModule::to_spirv`].
    SpirvShader,
    /// WGSL as a device takes it (`XHAL_KERNEL_FORMAT_WGSL`): the source, with its buffer
    /// declarations changed to the positional ABI where needed, see
    /// [`crate::WgslModule::to_device_wgsl`].
    Wgsl,
    /// OpenCL C 1.2 (`XHAL_KERNEL_FORMAT_OPENCL_C`) with every compute entry point, see
    /// [`crate::WgslModule::to_c`].
    OpenclC,
    /// CUDA C for NVRTC (`XHAL_KERNEL_FORMAT_CUDA_C`) with every compute entry point.
    CudaC,
    /// HIP C for hiprtc (`XHAL_KERNEL_FORMAT_HIP_C`) with every compute entry point.
    HipC,
    /// Kernel-flavoured SPIR-V for Level Zero and OpenCL (`XHAL_KERNEL_FORMAT_SPIRV_KERNEL`)
    /// with every compute entry point, see [`crate::WgslModule::to_spirv_kernel`].
    SpirvKernel,
}

impl Target {
    /// Every target, in no particular order.
    pub const ALL: &'static [Target] = &[
        Target::SpirvShader,
        Target::Wgsl,
        Target::OpenclC,
        Target::CudaC,
        Target::HipC,
        Target::SpirvKernel,
    ];

    /// The `XHAL_KERNEL_FORMAT_*` code of what this target produces.
    pub fn format(self) -> u32 {
        match self {
            Target::SpirvShader => XHAL_KERNEL_FORMAT_SPIRV_SHADER,
            Target::Wgsl => XHAL_KERNEL_FORMAT_WGSL,
            Target::OpenclC => XHAL_KERNEL_FORMAT_OPENCL_C,
            Target::CudaC => XHAL_KERNEL_FORMAT_CUDA_C,
            Target::HipC => XHAL_KERNEL_FORMAT_HIP_C,
            Target::SpirvKernel => XHAL_KERNEL_FORMAT_SPIRV_KERNEL,
        }
    }

    /// The target that produces `format`, if xhal-kernel can produce it.
    pub fn from_format(format: u32) -> Option<Target> {
        Target::ALL.iter().copied().find(|t| t.format() == format)
    }

    /// Whether the output is source text that the device compiles at run time (as opposed to
    /// a binary or an IR the driver consumes directly).
    pub fn is_source(self) -> bool {
        match self {
            Target::SpirvShader | Target::SpirvKernel => false,
            Target::Wgsl | Target::OpenclC | Target::CudaC | Target::HipC => true,
        }
    }

    /// A stable name that also identifies the translation settings, so a change of settings
    /// (say, another SPIR-V version) changes every cache key.
    fn cache_tag(self) -> &'static str {
        match self {
            Target::SpirvShader => "spirv-shader/1.3/restrict",
            Target::Wgsl => "wgsl/device-source",
            Target::OpenclC => "opencl-c/1.2/xhal-c-1",
            Target::CudaC => "cuda-c/nvrtc/xhal-c-1",
            Target::HipC => "hip-c/hiprtc/xhal-c-1",
            Target::SpirvKernel => "spirv-kernel/1.0/physical64/xhal-1",
        }
    }

    /// The C dialect of a C-family target.
    fn dialect(self) -> Option<Dialect> {
        match self {
            Target::OpenclC => Some(Dialect::OpenclC),
            Target::CudaC => Some(Dialect::CudaC),
            Target::HipC => Some(Dialect::HipC),
            Target::SpirvShader | Target::Wgsl | Target::SpirvKernel => None,
        }
    }
}

/// The result of translating WGSL to one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// What was produced.
    pub target: Target,
    /// `XHAL_KERNEL_FORMAT_*` code of `bytes` (`target.format()`).
    pub format: u32,
    /// The translated kernel: UTF-8 text for source targets, SPIR-V words as little-endian
    /// bytes for SPIR-V.
    pub bytes: Arc<[u8]>,
    /// Reflection of the compute entry points (the same for every target of one source).
    pub reflection: Arc<[EntryPointInfo]>,
    /// `XHAL_FEATURE_*` bits the kernel needs, see [`crate::WgslModule::required_features`].
    pub required_features: u64,
    /// [`cache_key`] of the source and target.
    pub key: u128,
}

/// Counters of the translation cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to translate (including those that failed).
    pub misses: u64,
    /// Translations held now.
    pub entries: usize,
}

struct Entry {
    target: Target,
    options: TranslateOptions,
    // The full source is kept and compared on every hit, so a hash collision can never hand
    // out another kernel's code.
    source: Box<str>,
    translation: Arc<Translation>,
}

/// What the host needs from WGSL that it hands to a device unchanged: no translation, only
/// the reflection and the features the kernel needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reflection {
    /// Reflection of the compute entry points.
    pub entry_points: Arc<[EntryPointInfo]>,
    /// `XHAL_FEATURE_*` bits the kernel needs.
    pub required_features: u64,
    /// Whether a device that takes WGSL must get [`crate::WgslModule::to_device_wgsl`]
    /// rather than the source as written: without native uniforms, then with them.
    device_wgsl: [bool; 2],
}

impl Reflection {
    /// Whether a device that takes WGSL, with native uniforms or not, must get the WGSL
    /// rewritten for devices ([`crate::WgslModule::to_device_wgsl`]) rather than the source
    /// as written.
    pub fn needs_device_wgsl(&self, native_uniforms: bool) -> bool {
        self.device_wgsl[usize::from(native_uniforms)]
    }
}

/// How a translation is made for one device, beyond its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TranslateOptions {
    /// The device takes `var<uniform>` natively ([`xhal_abi::XHAL_FEATURE_UNIFORM_BUFFERS`]):
    /// WGSL and Vulkan SPIR-V keep their uniforms. Otherwise they become read-only storage.
    /// (The C dialects and Kernel SPIR-V always get read-only storage, a const pointer.)
    pub native_uniforms: bool,
}

impl TranslateOptions {
    /// What the options add to a target's cache tag.
    fn tag(self) -> &'static str {
        if self.native_uniforms {
            "+uniforms"
        } else {
            ""
        }
    }
}

struct ReflectionEntry {
    // Compared on every hit, as for translations.
    source: Box<str>,
    reflection: Arc<Reflection>,
}

#[derive(Default)]
struct Cache {
    map: HashMap<u128, Vec<Entry>>,
    reflections: HashMap<u128, Vec<ReflectionEntry>>,
    hits: u64,
    misses: u64,
}

impl Cache {
    fn find(&self, key: u128, source: &str, target: Target, options: TranslateOptions) -> Option<Arc<Translation>> {
        self.map
            .get(&key)?
            .iter()
            .find(|e| e.target == target && e.options == options && &*e.source == source)
            .map(|e| Arc::clone(&e.translation))
    }
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(Cache::default()));

/// A stable 128-bit key for `source` translated to `target`: FNV-1a over this crate's version,
/// naga's major version, the target and its settings, and the source bytes.
///
/// Unlike `std`'s `DefaultHasher` it is the same in every process and on every platform, so it
/// can also name files in an on-disk cache. It is not collision-resistant against a deliberate
/// attacker; the in-process cache therefore also compares the source itself.
pub fn cache_key(source: &str, target: Target) -> u128 {
    key_for(target.cache_tag(), source)
}

fn key_for(tag: &str, source: &str) -> u128 {
    const OFFSET_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut hash = OFFSET_BASIS;
    let parts: [&[u8]; 4] = [
        concat!("xhal-kernel/", env!("CARGO_PKG_VERSION"), "/naga-30").as_bytes(),
        tag.as_bytes(),
        // A separator no tag contains, so tag and source cannot run into each other.
        &[0],
        source.as_bytes(),
    ];
    for part in parts {
        for &byte in part {
            hash ^= u128::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// Translates WGSL `source` to `target`, through the process-wide cache.
///
/// A repeated call with the same source and target returns the same `Arc` without
/// translating again. Errors are not cached: they are cheap to reproduce and a caller may be
/// editing the source. Two threads that miss at once both translate, and both get the one
/// translation that entered the cache first.
pub fn translate(source: &str, target: Target) -> Result<Arc<Translation>, KernelError> {
    translate_with(source, target, TranslateOptions::default())
}

/// [`translate`] for a device with particular needs ([`TranslateOptions`]); each set of
/// options has cache entries of its own.
pub fn translate_with(
    source: &str,
    target: Target,
    options: TranslateOptions,
) -> Result<Arc<Translation>, KernelError> {
    let key = if options == TranslateOptions::default() {
        cache_key(source, target)
    } else {
        key_for(&format!("{}{}", target.cache_tag(), options.tag()), source)
    };
    {
        let mut cache = CACHE.lock();
        if let Some(found) = cache.find(key, source, target, options) {
            cache.hits += 1;
            return Ok(found);
        }
        cache.misses += 1;
    }
    // Translate without holding the lock: other kernels need not wait for this one.
    let module = parse_wgsl(source)?;
    let bytes: Arc<[u8]> = match target {
        Target::SpirvShader => module
            .to_spirv_with(options.native_uniforms)?
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect(),
        Target::Wgsl => Arc::from(module.to_device_wgsl(options.native_uniforms)?.into_bytes()),
        Target::SpirvKernel => Arc::from(module.to_spirv_kernel(None)?.to_bytes()),
        Target::OpenclC | Target::CudaC | Target::HipC => {
            let dialect = target.dialect().unwrap_or(Dialect::CudaC);
            Arc::from(module.to_c(dialect, None)?.text.into_bytes())
        }
    };
    tracing::debug!(
        ?target,
        bytes = bytes.len(),
        key = format_args!("{key:032x}"),
        "translated kernel"
    );
    let translation = Arc::new(Translation {
        target,
        format: target.format(),
        bytes,
        reflection: module.entry_points_arc(),
        required_features: module.required_features(),
        key,
    });
    let mut cache = CACHE.lock();
    if let Some(found) = cache.find(key, source, target, options) {
        return Ok(found);
    }
    cache.map.entry(key).or_default().push(Entry {
        target,
        options,
        source: source.into(),
        translation: Arc::clone(&translation),
    });
    Ok(translation)
}

/// Parses, validates and reflects WGSL `source` without translating it, through the same
/// process-wide cache: for a device that takes the WGSL as it is. Unlike a translation to
/// normalised WGSL, this never depends on what naga's WGSL writer can express.
pub fn reflect(source: &str) -> Result<Arc<Reflection>, KernelError> {
    let key = key_for("reflection", source);
    {
        let mut cache = CACHE.lock();
        let found = cache
            .reflections
            .get(&key)
            .and_then(|entries| entries.iter().find(|entry| &*entry.source == source))
            .map(|entry| Arc::clone(&entry.reflection));
        if let Some(found) = found {
            cache.hits += 1;
            return Ok(found);
        }
        cache.misses += 1;
    }
    let module = parse_wgsl(source)?;
    let reflection = Arc::new(Reflection {
        entry_points: module.entry_points_arc(),
        required_features: module.required_features(),
        device_wgsl: [module.needs_device_wgsl(false), module.needs_device_wgsl(true)],
    });
    CACHE.lock().reflections.entry(key).or_default().push(ReflectionEntry {
        source: source.into(),
        reflection: Arc::clone(&reflection),
    });
    Ok(reflection)
}

/// Hits, misses and entries of the translation cache since the process started (or since
/// [`clear_cache`]).
pub fn cache_stats() -> CacheStats {
    let cache = CACHE.lock();
    CacheStats {
        hits: cache.hits,
        misses: cache.misses,
        entries: cache.map.values().map(Vec::len).sum::<usize>()
            + cache.reflections.values().map(Vec::len).sum::<usize>(),
    }
}

/// Drops every cached translation and zeroes the counters. `Arc`s already handed out stay
/// valid.
pub fn clear_cache() {
    *CACHE.lock() = Cache::default();
}

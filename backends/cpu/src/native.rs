//! The compiled mode: WGSL kernels translated to host C (`xhal-kernel`), compiled by the
//! system C compiler into a shared object, cached on disk, loaded, and run one workgroup per
//! call on every core.
//!
//! [`KernelMode`] (`XHAL_CPU_MODE=interpret|compile|auto`) picks the path. Whatever the mode,
//! the interpreter's program is built too: it checks every launch's arguments, and it runs a
//! kernel the compiled path cannot take (a log line says why).
//!
//! Compiled objects live in `$XHAL_CACHE_DIR/cpu` (else `$XDG_CACHE_HOME/xhal/cpu`, else
//! `~/.cache/xhal/cpu`), named by a hash of the C source, the compiler's `--version` output,
//! the flags and the processor they target (`-march=native`, where the compiler takes it),
//! so a new compiler, a new emitter or another machine never reuses a stale object. The
//! directory is created private to the user, since whatever is in it gets loaded.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use libloading::Library;
use parking_lot::Mutex;
use xhal_backend::{Error, Result};

/// Environment variable choosing how WGSL kernels run: `interpret`, `compile` or `auto`.
pub const MODE_VARIABLE: &str = "XHAL_CPU_MODE";
/// Environment variable naming the C compiler (default `cc`).
pub const COMPILER_VARIABLE: &str = "CC";
/// Environment variable with extra flags for the C compiler (split at whitespace), added
/// after xhal's own; they are part of the cache key.
pub const CFLAGS_VARIABLE: &str = "XHAL_CPU_CFLAGS";
/// Environment variable naming the directory that holds xhal's caches.
pub const CACHE_DIR_VARIABLE: &str = "XHAL_CACHE_DIR";

/// The flags every kernel is compiled with. Strict aliasing is off because views of one
/// buffer may be bound with different element types; contraction is off so that `a * b + c`
/// rounds twice, as in the interpreter.
const FLAGS: &[&str] = &[
    "-std=c11",
    "-O2",
    "-fPIC",
    "-shared",
    "-fno-strict-aliasing",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-Wl,-Bsymbolic",
    "-w",
];

/// How the CPU backend runs WGSL kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelMode {
    /// Always the interpreter.
    Interpret,
    /// Compile every kernel; a missing C compiler is an error. A kernel the compiled path
    /// cannot express still runs on the interpreter, with a warning saying why.
    Compile,
    /// Compile when a C compiler is present, interpret otherwise (the default).
    Auto,
}

impl KernelMode {
    /// The mode [`MODE_VARIABLE`] names in the environment; unset means [`KernelMode::Auto`],
    /// an unknown value is `InvalidArgument` naming the variable.
    pub fn from_env() -> Result<KernelMode> {
        KernelMode::from_lookup(|name| std::env::var_os(name))
    }

    /// The mode [`MODE_VARIABLE`] names; unset means [`KernelMode::Auto`].
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<KernelMode> {
        let Some(value) = lookup(MODE_VARIABLE) else {
            return Ok(KernelMode::Auto);
        };
        match value.to_string_lossy().trim() {
            "interpret" => Ok(KernelMode::Interpret),
            "compile" => Ok(KernelMode::Compile),
            "auto" | "" => Ok(KernelMode::Auto),
            other => Err(Error::invalid_argument(format!(
                "{MODE_VARIABLE} is `{other}`; expected `interpret`, `compile` or `auto`"
            ))),
        }
    }

    /// Its name, as [`MODE_VARIABLE`] spells it.
    pub fn name(self) -> &'static str {
        match self {
            KernelMode::Interpret => "interpret",
            KernelMode::Compile => "compile",
            KernelMode::Auto => "auto",
        }
    }
}

/// `xhal_workgroup` of the emitted C.
#[repr(C)]
pub(crate) struct Workgroup {
    pub(crate) workgroup_id: [u32; 3],
    pub(crate) num_workgroups: [u32; 3],
    pub(crate) cancel: *const u32,
    pub(crate) out_of_bounds: *mut u32,
}

type LaunchFn = unsafe extern "C" fn(*const *mut c_void, *const c_void, *const u64, *const Workgroup, *mut c_void);

/// One compiled entry point.
pub(crate) struct NativeKernel {
    /// Keeps the code loaded while `launch` may be called.
    _library: Arc<Library>,
    launch: LaunchFn,
    pub(crate) scratch_bytes: usize,
}

impl std::fmt::Debug for NativeKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeKernel")
            .field("scratch_bytes", &self.scratch_bytes)
            .finish_non_exhaustive()
    }
}

impl NativeKernel {
    /// Runs workgroup `group`.
    ///
    /// # Safety
    ///
    /// `buffers` holds one pointer per binding, to a view at least as long as the matching
    /// entry of `lengths` (which must have one per binding) and locked for the call as the
    /// kernel uses it; `scalars` is the kernel's scalar block (checked size); `scratch` is
    /// `scratch_bytes` bytes aligned to 64 that no other thread uses during the call.
    pub(crate) unsafe fn run(
        &self,
        buffers: &[*mut c_void],
        scalars: &[u8],
        lengths: &[u64],
        group: &Workgroup,
        scratch: *mut c_void,
    ) {
        // SAFETY: the caller's contract above is the emitted function's contract.
        unsafe {
            (self.launch)(
                buffers.as_ptr(),
                scalars.as_ptr().cast(),
                lengths.as_ptr(),
                group,
                scratch,
            )
        }
    }
}

/// Scratch memory for one worker: 64-byte aligned. A kernel that needs none (most) gets a
/// dangling, aligned pointer it never reads, and the launch allocates nothing for it.
pub(crate) struct Scratch {
    pointer: *mut u8,
    /// `None` for the empty scratch, which owns no memory.
    layout: Option<std::alloc::Layout>,
}

impl Scratch {
    pub(crate) fn new(bytes: usize) -> Result<Scratch> {
        if bytes == 0 {
            return Ok(Scratch {
                pointer: std::ptr::without_provenance_mut(64),
                layout: None,
            });
        }
        let layout = std::alloc::Layout::from_size_align(bytes, 64)
            .map_err(|_| Error::out_of_memory(format!("a kernel asks for {bytes} bytes of scratch memory")))?;
        // Zeroed: a region reads a shared value's frame slot before its loop and stores it
        // back after, so a region that computes it in no invocation must read a value, not
        // whatever the allocator left (a `bool` holding neither 0 nor 1).
        // SAFETY: the layout has a non-zero size.
        let pointer = unsafe { std::alloc::alloc_zeroed(layout) };
        if pointer.is_null() {
            return Err(Error::out_of_memory(format!(
                "cannot allocate {bytes} bytes of scratch memory for a kernel"
            )));
        }
        Ok(Scratch {
            pointer,
            layout: Some(layout),
        })
    }

    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.pointer.cast()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.pointer, layout) }
        }
    }
}

/// The C compiler and where its objects are cached.
struct Toolchain {
    compiler: String,
    /// xhal's flags, then [`CFLAGS_VARIABLE`]'s.
    flags: Vec<String>,
    /// The compiler's `--version` output and the processor it targets: part of every cache
    /// key.
    identity: String,
    cache_dir: PathBuf,
}

fn toolchain() -> std::result::Result<&'static Toolchain, String> {
    static TOOLCHAIN: OnceLock<std::result::Result<Toolchain, String>> = OnceLock::new();
    TOOLCHAIN.get_or_init(find_toolchain).as_ref().map_err(Clone::clone)
}

fn find_toolchain() -> std::result::Result<Toolchain, String> {
    let named = std::env::var(COMPILER_VARIABLE)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| "cc".to_owned());
    // gcc finds its own programs (cc1) from where it was started, so it is started by its
    // full path even where PATH is empty.
    let compiler = resolve_program(&named)
        .map(|path| path.to_string_lossy().into_owned())
        .ok_or_else(|| format!("no C compiler: `{named}` is not on PATH (set {COMPILER_VARIABLE} or install cc)"))?;
    let output = Command::new(&compiler)
        .env("PATH", search_path())
        .arg("--version")
        .output()
        .map_err(|error| {
            format!("no C compiler: `{compiler} --version` failed: {error} (set {COMPILER_VARIABLE} or install cc)")
        })?;
    if !output.status.success() {
        return Err(format!(
            "no working C compiler: `{compiler} --version` exited with {}",
            output.status
        ));
    }
    let identity = String::from_utf8_lossy(&output.stdout).into_owned();
    let cache_dir = cache_dir().join("cpu");
    create_private_dir(&cache_dir)
        .map_err(|error| format!("cannot create the kernel cache {}: {error}", cache_dir.display()))?;
    tracing::debug!(
        compiler = %compiler,
        version = identity.lines().next().unwrap_or_default(),
        cache = %cache_dir.display(),
        "cpu: compiled kernels enabled"
    );
    let mut flags: Vec<String> = FLAGS.iter().map(|flag| (*flag).to_owned()).collect();
    let mut identity = identity;
    match host_target(&compiler) {
        Some(target) => {
            flags.push(NATIVE_TARGET_FLAG.to_owned());
            identity.push_str(&target);
        }
        None => {
            tracing::debug!(compiler = %compiler, "cpu: the compiler takes no {NATIVE_TARGET_FLAG}; kernels are built for its default target")
        }
    }
    if accepts(&compiler, CHEAP_VECTORS_FLAG) {
        flags.push(CHEAP_VECTORS_FLAG.to_owned());
    }
    if accepts(&compiler, NO_HALF_VECTORS_FLAG) {
        flags.push(NO_HALF_VECTORS_FLAG.to_owned());
    }
    if let Ok(extra) = std::env::var(CFLAGS_VARIABLE) {
        flags.extend(extra.split_whitespace().map(str::to_owned));
    }
    Ok(Toolchain {
        compiler,
        flags,
        identity,
        cache_dir,
    })
}

/// Kernels are built for this machine's processor (its vector width: AVX2, AVX-512), as an
/// OpenCL driver for CPUs does; a flag of [`CFLAGS_VARIABLE`] such as `-march=x86-64`
/// comes after it and wins.
const NATIVE_TARGET_FLAG: &str = "-march=native";

/// GCC's `-O2` vectorises a loop only when it needs no remainder loop and no run-time
/// checks (its "very cheap" cost model), so a loop over the invocations a condition lets
/// through (a count known only at run time) stays scalar; the "cheap" model vectorises it
/// with a remainder, as clang's `-O2` does. Given only to a compiler that takes it without
/// a warning.
const CHEAP_VECTORS_FLAG: &str = "-fvect-cost-model=cheap";

/// Kernels compute f16 in f32 (converting with F16C's instructions), so AVX-512's f16
/// arithmetic gains them nothing; and where `-march=native` enables it, GCC 12 vectorises
/// loops over f16 with masked `vmovsh`, which the assembler of the same Debian release
/// rejects. Given only to a compiler that takes it without a warning.
const NO_HALF_VECTORS_FLAG: &str = "-mno-avx512fp16";

/// Whether `compiler` compiles an empty file with `flag` and no warning about it.
fn accepts(compiler: &str, flag: &str) -> bool {
    Command::new(compiler)
        .env("PATH", search_path())
        .args([flag, "-Werror", "-x", "c", "-c", "/dev/null", "-o", "/dev/null"])
        .output()
        .is_ok_and(|output| output.status.success())
}

/// What [`NATIVE_TARGET_FLAG`] means to `compiler` on this machine (the processor and its
/// features, as the compiler driver expands them), or `None` when the compiler refuses it.
/// It goes into every cache key, so that a cache shared with another machine never hands
/// over an object built for instructions this one lacks.
fn host_target(compiler: &str) -> Option<String> {
    let output = Command::new(compiler)
        .env("PATH", search_path())
        .args([
            NATIVE_TARGET_FLAG,
            "-###",
            "-x",
            "c",
            "-c",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    // The driver prints the commands it would run; their paths (temporary files among them)
    // change from run to run, the target options do not.
    let listing = String::from_utf8_lossy(&output.stderr);
    let target: Vec<&str> = listing
        .split_whitespace()
        .map(|word| word.trim_matches(|c| c == '"' || c == '\''))
        .filter(|word| !word.contains('/') && !word.is_empty())
        .collect();
    Some(format!("\ntarget: {}", target.join(" ")))
}

/// `name` as a path: as given when it has a `/`, else the first executable file of that name
/// on PATH (the usual system folders when PATH is unset).
fn resolve_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    std::env::split_paths(&search_path())
        .map(|folder| folder.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// PATH, or the usual system folders when it is unset or empty (the compiler driver also
/// looks up the assembler and the linker there).
fn search_path() -> std::ffi::OsString {
    std::env::var_os("PATH")
        .filter(|path| !path.is_empty())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
}

/// Where xhal keeps caches: `$XHAL_CACHE_DIR`, `$XDG_CACHE_HOME/xhal`, `~/.cache/xhal`, or a
/// per-user folder in the temporary directory.
pub(crate) fn cache_dir() -> PathBuf {
    let from = |name: &str| {
        std::env::var_os(name)
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = from(CACHE_DIR_VARIABLE) {
        return dir;
    }
    if let Some(dir) = from("XDG_CACHE_HOME") {
        return dir.join("xhal");
    }
    if let Some(home) = from("HOME") {
        return home.join(".cache").join("xhal");
    }
    std::env::temp_dir().join(format!("xhal-cache-{}", user_tag()))
}

fn user_tag() -> String {
    std::env::var("USER").unwrap_or_else(|_| "user".to_owned())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// FNV-1a over the parts, 128 bits, as 32 hex digits.
fn cache_key(parts: &[&[u8]]) -> String {
    const OFFSET_BASIS: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let mut hash = OFFSET_BASIS;
    for part in parts {
        for &byte in part.iter().chain(&[0xff]) {
            hash ^= u128::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    format!("{hash:032x}")
}

/// Libraries loaded in this process, by cache key.
fn loaded() -> &'static Mutex<HashMap<String, Arc<Library>>> {
    static LOADED: OnceLock<Mutex<HashMap<String, Arc<Library>>>> = OnceLock::new();
    LOADED.get_or_init(Mutex::default)
}

/// Why an entry point runs on the interpreter instead of compiled code.
#[derive(Debug)]
pub(crate) enum NotCompiled {
    /// The emitter cannot express the kernel in host C.
    Unsupported(String),
    /// There is no working C compiler.
    NoCompiler(String),
    /// The compiler or the loader failed (a bug: the emitted C must always compile).
    Failed(String),
}

/// Statistics of the compiled path, for benchmarks and `--json` reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Kernels compiled by the C compiler.
    pub compiled: u64,
    /// Kernels found in the disk cache.
    pub disk_hits: u64,
    /// Nanoseconds spent in the C compiler.
    pub compile_nanos: u64,
}

static COMPILED: AtomicU64 = AtomicU64::new(0);
static DISK_HITS: AtomicU64 = AtomicU64::new(0);
static COMPILE_NANOS: AtomicU64 = AtomicU64::new(0);

/// What the compiled path has done in this process so far.
pub fn compile_stats() -> CompileStats {
    CompileStats {
        compiled: COMPILED.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        compile_nanos: COMPILE_NANOS.load(Ordering::Relaxed),
    }
}

/// Translates entry point `entry` of WGSL `source` to host C, compiles (or finds) it and
/// loads it.
pub(crate) fn compile(source: &str, entry: &str) -> std::result::Result<NativeKernel, NotCompiled> {
    let module = xhal_kernel::parse_wgsl(source).map_err(|error| NotCompiled::Unsupported(error.to_string()))?;
    let c = module
        .to_c(xhal_kernel::Dialect::HostC, Some(entry))
        .map_err(|error| NotCompiled::Unsupported(error.message().to_owned()))?;
    let symbol = c
        .entry_points
        .first()
        .map(|point| point.symbol.clone())
        .ok_or_else(|| NotCompiled::Failed(format!("the host C for `{entry}` has no entry point")))?;
    let tools = toolchain().map_err(NotCompiled::NoCompiler)?;
    let flags = tools.flags.join(" ");
    let key = cache_key(&[
        env!("CARGO_PKG_VERSION").as_bytes(),
        tools.compiler.as_bytes(),
        tools.identity.as_bytes(),
        flags.as_bytes(),
        c.text.as_bytes(),
    ]);
    let library = load_or_build(tools, &key, &c.text).map_err(NotCompiled::Failed)?;
    let launch_name = format!("{symbol}__launch");
    let scratch_name = format!("{symbol}__scratch_bytes");
    // SAFETY: the symbols are the ones the emitter defines, with these types.
    let (launch, scratch_bytes) = unsafe {
        let launch = *library
            .get::<LaunchFn>(launch_name.as_bytes())
            .map_err(|error| NotCompiled::Failed(format!("{launch_name}: {error}")))?;
        let scratch = library
            .get::<*const usize>(scratch_name.as_bytes())
            .map_err(|error| NotCompiled::Failed(format!("{scratch_name}: {error}")))?;
        (launch, **scratch)
    };
    Ok(NativeKernel {
        _library: library,
        launch,
        scratch_bytes,
    })
}

fn load_or_build(tools: &Toolchain, key: &str, text: &str) -> std::result::Result<Arc<Library>, String> {
    let mut loaded = loaded().lock();
    if let Some(library) = loaded.get(key) {
        return Ok(Arc::clone(library));
    }
    let object = tools.cache_dir.join(format!("{key}.so"));
    let library = match open(&object).ok() {
        Some(library) => {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(object = %object.display(), "cpu: kernel found in the cache");
            library
        }
        None => {
            build(tools, key, text, &object)?;
            open(&object).map_err(|error| format!("cannot load the compiled kernel {}: {error}", object.display()))?
        }
    };
    let library = Arc::new(library);
    loaded.insert(key.to_owned(), Arc::clone(&library));
    Ok(library)
}

fn open(object: &Path) -> std::result::Result<Library, String> {
    if !object.is_file() {
        return Err("no such file".to_owned());
    }
    // Every symbol is bound now (RTLD_NOW), so that an object with an undefined one fails here
    // with an error instead of ending the process when a kernel first calls it.
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
    // SAFETY: the object is one this module compiled from emitted C, which has no
    // initialisers; a damaged one fails to load and is rebuilt.
    unsafe { libloading::os::unix::Library::open(Some(object), flags) }
        .map(Library::from)
        .map_err(|error| {
            tracing::debug!(object = %object.display(), %error, "cpu: a compiled kernel does not load");
            error.to_string()
        })
}

fn build(tools: &Toolchain, key: &str, text: &str, object: &Path) -> std::result::Result<(), String> {
    static BUILDS: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        "{key}.{}.{}",
        std::process::id(),
        BUILDS.fetch_add(1, Ordering::Relaxed)
    );
    let source = tools.cache_dir.join(format!("{unique}.c"));
    let partial = tools.cache_dir.join(format!("{unique}.so.partial"));
    std::fs::write(&source, text).map_err(|error| format!("cannot write {}: {error}", source.display()))?;
    let started = Instant::now();
    let output = Command::new(&tools.compiler)
        .env("PATH", search_path())
        .args(&tools.flags)
        .arg("-o")
        .arg(&partial)
        .arg(&source)
        .output();
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(&source);
    let output = output.map_err(|error| format!("cannot run {}: {error}", tools.compiler))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(format!(
            "{} failed on emitted C ({}): {}",
            tools.compiler,
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .chars()
                .take(2000)
                .collect::<String>()
        ));
    }
    // Another process may publish the same object meanwhile: a rename replaces it whole.
    std::fs::rename(&partial, object).map_err(|error| format!("cannot publish {}: {error}", object.display()))?;
    COMPILED.fetch_add(1, Ordering::Relaxed);
    COMPILE_NANOS.fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    tracing::debug!(object = %object.display(), millis = elapsed.as_millis() as u64, "cpu: kernel compiled");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use xhal_backend::ErrorKind;

    #[test]
    fn the_mode_variable_is_read_and_a_bad_value_names_it() {
        let mode = |value: Option<&'static str>| KernelMode::from_lookup(move |_| value.map(OsString::from));
        assert_eq!(mode(None).unwrap(), KernelMode::Auto);
        assert_eq!(mode(Some("interpret")).unwrap(), KernelMode::Interpret);
        assert_eq!(mode(Some(" compile ")).unwrap(), KernelMode::Compile);
        assert_eq!(mode(Some("auto")).unwrap(), KernelMode::Auto);
        let error = mode(Some("jit")).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument);
        assert!(
            error.message().contains(MODE_VARIABLE) && error.message().contains("`jit`"),
            "{error}"
        );
        assert!(error.message().contains("interpret"), "{error}");
    }

    #[test]
    fn the_host_target_is_the_same_from_run_to_run_and_absent_without_a_compiler() {
        // A program that refuses every option stands for a compiler without -march=native.
        assert_eq!(host_target("false"), None);
        assert_eq!(host_target("/nonexistent/cc"), None);
        let Some(compiler) = resolve_program("cc") else {
            println!("skipped: no cc on PATH; the host target cannot be read here");
            return;
        };
        let compiler = compiler.to_string_lossy().into_owned();
        let first = host_target(&compiler);
        // Part of every cache key: the driver's temporary files must not leak into it.
        assert_eq!(first, host_target(&compiler));
        if let Some(target) = first {
            assert!(!target.contains('/'), "{target}");
        }
    }

    #[test]
    fn cache_keys_separate_their_parts() {
        assert_ne!(cache_key(&[b"ab", b"c"]), cache_key(&[b"a", b"bc"]));
        assert_eq!(cache_key(&[b"x"]).len(), 32);
    }
}

//! The test double of the HIP runtime (`tests/stub_hip.c`), built with `cc` on first use, and
//! code objects made for it.

#![allow(dead_code)]

use std::ffi::{c_char, c_int, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Fails when CI requires the backend (`XHAL_REQUIRE_BACKENDS` names `rocm`) and what a test
/// needs is missing: a missing prerequisite must never pass as a quiet skip there.
pub fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "rocm"),
        "XHAL_REQUIRE_BACKENDS names rocm, but this test cannot run: {reason}"
    );
}

/// Device 0 of `backend`, opened as an application opens it: through a runtime that knows
/// this backend alone (no built-in backends, no plugins, whatever `XHAL_DEVICE` says).
pub fn open_device(backend: xhal_rocm::RocmBackend) -> xhal_core::Device {
    xhal_core::Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .device_selector(None)
        .backend(std::sync::Arc::new(backend))
        .build()
        .expect("a runtime of one backend")
        .open("rocm:0")
        .expect("rocm device 0 opens")
}

/// The stub library built once per test process, or why it could not be: only a missing C
/// compiler is a reason; a stub that does not compile fails the test. `defines` are passed to
/// the compiler (`-DSTUB_NO_GRAPHS`); each set of them is built once.
fn built_stub(defines: &[&str]) -> Result<PathBuf, String> {
    static BUILT: Mutex<Vec<(String, Result<PathBuf, String>)>> = Mutex::new(Vec::new());
    let key = defines.join(" ");
    let mut built = BUILT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, result)) = built.iter().find(|(known, _)| *known == key) {
        return result.clone();
    }
    let result = build_stub(defines, built.len());
    built.push((key, result.clone()));
    result
}

fn build_stub(defines: &[&str], variant: usize) -> Result<PathBuf, String> {
    let folder = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("rocm-stub-{}-{variant}", std::process::id()));
    std::fs::create_dir_all(&folder).map_err(|error| format!("cannot create {}: {error}", folder.display()))?;
    let output = folder.join("libamdhip64_stub.so");
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stub_hip.c");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let result = std::process::Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Werror"])
        .args(defines.iter().map(|define| format!("-D{define}")))
        .arg("-o")
        .arg(&output)
        .arg(&source)
        .output()
        .map_err(|error| format!("no C compiler `{compiler}` to build the HIP stub: {error}"))?;
    assert!(
        result.status.success(),
        "`{compiler}` could not build {}: {}",
        source.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    Ok(output)
}

/// One test's own copy of the stub (its settings are its own), opened so the test can set
/// it up; the backend, opening the same path, gets the same copy.
pub struct Stub {
    pub path: PathBuf,
    library: libloading::Library,
}

impl Stub {
    /// A fresh copy, or `None` (after saying why) where no C compiler is at hand.
    pub fn new() -> Option<Stub> {
        Stub::built_with(&[])
    }

    /// A fresh copy of the stub built without stream capture and graphs, as a HIP runtime
    /// that lacks them.
    pub fn without_graphs() -> Option<Stub> {
        Stub::built_with(&["STUB_NO_GRAPHS"])
    }

    fn built_with(defines: &[&str]) -> Option<Stub> {
        static COPIES: AtomicUsize = AtomicUsize::new(0);
        let built = match built_stub(defines) {
            Ok(built) => built,
            Err(reason) => {
                require_unless_absent(&reason);
                eprintln!("SKIPPED: the HIP stub library could not be built, so this test checked nothing: {reason}");
                return None;
            }
        };
        // Each copy gets its own folder, so a hiprtc looked for beside it is never another's.
        let folder = built
            .parent()
            .expect("the stub lies in a folder")
            .join(format!("copy-{}", COPIES.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&folder).expect("a folder for the copy");
        let path = folder.join("libamdhip64.so");
        std::fs::copy(&built, &path).expect("copying the stub");
        // SAFETY: the stub's initialisers do nothing.
        let library = unsafe { libloading::Library::new(&path) }.expect("opening the stub");
        Some(Stub { path, library })
    }

    /// The stub's function `name`, as type `T`, which must be its C signature.
    pub fn function<T: Copy>(&self, name: &str) -> T {
        // SAFETY: each caller names a function of the stub with the type it has there.
        unsafe { *self.library.get::<T>(name.as_bytes()).expect("a stub function") }
    }

    pub fn set_devices(&self, count: c_int) {
        let set = self.function::<unsafe extern "C" fn(c_int)>("stub_set_devices");
        // SAFETY: a plain setter.
        unsafe { set(count) }
    }

    /// What hipRuntimeGetVersion reports (`HIP_VERSION`: major * 10^7 + minor * 10^5 + patch).
    pub fn set_runtime_version(&self, version: c_int) {
        let set = self.function::<unsafe extern "C" fn(c_int)>("stub_set_runtime_version");
        // SAFETY: a plain setter.
        unsafe { set(version) }
    }

    pub fn set_init_result(&self, code: c_int) {
        let set = self.function::<unsafe extern "C" fn(c_int)>("stub_set_init_result");
        // SAFETY: a plain setter.
        unsafe { set(code) }
    }

    /// Makes `call` return `code` after `after` successful calls.
    pub fn fail(&self, call: &str, code: c_int, after: c_int) {
        let name = CString::new(call).unwrap();
        let fail = self.function::<unsafe extern "C" fn(*const c_char, c_int, c_int)>("stub_fail");
        // SAFETY: the stub copies the name.
        unsafe { fail(name.as_ptr(), code, after) }
    }

    pub fn set_kernels(&self, names: &str) {
        let names = CString::new(names).unwrap();
        let set = self.function::<unsafe extern "C" fn(*const c_char)>("stub_set_kernels");
        // SAFETY: the stub copies the names.
        unsafe { set(names.as_ptr()) }
    }

    pub fn set_parameter_sizes(&self, sizes: &[usize]) {
        let set = self.function::<unsafe extern "C" fn(c_int, *const usize)>("stub_set_parameter_sizes");
        // SAFETY: `sizes.len()` values.
        unsafe { set(sizes.len() as c_int, sizes.as_ptr()) }
    }

    pub fn set_compiled_code(&self, code: &[u8]) {
        let set = self.function::<unsafe extern "C" fn(*const u8, usize)>("stub_set_compiled_code");
        // SAFETY: the stub copies the bytes.
        unsafe { set(code.as_ptr(), code.len()) }
    }

    pub fn set_compile_failure(&self, log: &str) {
        let log = CString::new(log).unwrap();
        let set = self.function::<unsafe extern "C" fn(*const c_char)>("stub_set_compile_failure");
        // SAFETY: the stub copies the log.
        unsafe { set(log.as_ptr()) }
    }

    pub fn launches(&self) -> c_int {
        let get = self.function::<unsafe extern "C" fn() -> c_int>("stub_launches");
        // SAFETY: a plain getter.
        unsafe { get() }
    }

    /// Grid x, y, z, then block x, y, z, of the last launch.
    pub fn launch_dims(&self) -> [u32; 6] {
        let mut dims = [0u32; 6];
        let get = self.function::<unsafe extern "C" fn(*mut u32)>("stub_launch_dims");
        // SAFETY: six values.
        unsafe { get(dims.as_mut_ptr()) };
        dims
    }

    /// The bytes of parameter `index` of the last launch.
    pub fn launch_parameter(&self, index: usize, size: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; size];
        let get = self.function::<unsafe extern "C" fn(c_int, *mut u8, usize)>("stub_launch_parameter");
        // SAFETY: `size` bytes.
        unsafe { get(index as c_int, bytes.as_mut_ptr(), size) };
        bytes
    }

    pub fn compile_options(&self) -> String {
        let get = self.function::<unsafe extern "C" fn() -> *const c_char>("stub_compile_options");
        // SAFETY: a NUL-terminated static buffer.
        unsafe { std::ffi::CStr::from_ptr(get()) }
            .to_string_lossy()
            .trim()
            .to_string()
    }

    /// hipGraphLaunch calls that ran.
    pub fn graph_launches(&self) -> c_int {
        let get = self.function::<unsafe extern "C" fn() -> c_int>("stub_graph_launches");
        // SAFETY: a plain getter.
        unsafe { get() }
    }

    /// The mode of the last hipStreamBeginCapture (2: relaxed), -1 before any.
    pub fn last_capture_mode(&self) -> c_int {
        let get = self.function::<unsafe extern "C" fn() -> c_int>("stub_last_capture_mode");
        // SAFETY: a plain getter.
        unsafe { get() }
    }

    /// Graphs and executable graphs not yet destroyed.
    pub fn graph_objects(&self) -> c_int {
        let get = self.function::<unsafe extern "C" fn() -> c_int>("stub_graph_objects");
        // SAFETY: a plain getter.
        unsafe { get() }
    }

    pub fn allocated(&self) -> usize {
        let get = self.function::<unsafe extern "C" fn() -> usize>("stub_allocated");
        // SAFETY: a plain getter.
        unsafe { get() }
    }

    /// Makes streams created afterwards queue their work until something waits for it, as a
    /// GPU runs it (the stub's "Deferred streams"), rather than run it at once.
    pub fn set_deferred(&self, on: bool) {
        let set = self.function::<unsafe extern "C" fn(c_int)>("stub_set_deferred");
        // SAFETY: a plain setter.
        unsafe { set(c_int::from(on)) }
    }

    /// Queued work that ran after what it uses was released: a kernel of an unloaded module,
    /// or a destroyed executable graph.
    pub fn released_uses(&self) -> c_int {
        let get = self.function::<unsafe extern "C" fn() -> c_int>("stub_released_uses");
        // SAFETY: a plain getter.
        unsafe { get() }
    }
}

/// MessagePack and ELF, in the shapes the AMDGPU compiler writes its kernel metadata.
pub mod code_object {
    fn text(value: &str) -> Vec<u8> {
        let mut out = vec![0xd9, value.len() as u8];
        out.extend_from_slice(value.as_bytes());
        out
    }

    fn integer(value: u64) -> Vec<u8> {
        let mut out = vec![0xcf];
        out.extend_from_slice(&value.to_be_bytes());
        out
    }

    fn map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = vec![0xde];
        out.extend_from_slice(&(entries.len() as u16).to_be_bytes());
        for (key, value) in entries {
            out.extend(text(key));
            out.extend_from_slice(value);
        }
        out
    }

    fn array(values: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0xdc];
        out.extend_from_slice(&(values.len() as u16).to_be_bytes());
        for value in values {
            out.extend_from_slice(value);
        }
        out
    }

    /// One kernel: `arguments` as (value kind, size, name).
    pub fn kernel(name: &str, arguments: &[(&str, u64, Option<&str>)], reqd: Option<[u64; 3]>) -> Vec<u8> {
        let arguments: Vec<Vec<u8>> = arguments
            .iter()
            .map(|(kind, size, argument_name)| {
                let mut entries = vec![(".value_kind", text(kind)), (".size", integer(*size))];
                if let Some(argument_name) = argument_name {
                    entries.push((".name", text(argument_name)));
                }
                map(&entries)
            })
            .collect();
        let mut entries = vec![
            (".name", text(name)),
            (".args", array(&arguments)),
            (".max_flat_workgroup_size", integer(1024)),
        ];
        if let Some(reqd) = reqd {
            entries.push((".reqd_workgroup_size", array(&reqd.map(integer))));
        }
        map(&entries)
    }

    /// A little-endian ELF64 file whose one section is a note section holding an `AMDGPU`
    /// metadata note (type 32) listing `kernels`.
    pub fn with_kernels(kernels: &[Vec<u8>]) -> Vec<u8> {
        let payload = map(&[("amdhsa.kernels", array(kernels))]);
        let mut note = Vec::new();
        note.extend_from_slice(&7u32.to_le_bytes());
        note.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        note.extend_from_slice(&32u32.to_le_bytes());
        note.extend_from_slice(b"AMDGPU\0\0");
        note.extend_from_slice(&payload);
        while note.len() % 4 != 0 {
            note.push(0);
        }
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let section_offset = 64 + note.len() as u64;
        elf[0x28..0x30].copy_from_slice(&section_offset.to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&1u16.to_le_bytes());
        elf.extend_from_slice(&note);
        let mut section = vec![0u8; 64];
        section[4..8].copy_from_slice(&7u32.to_le_bytes());
        section[0x18..0x20].copy_from_slice(&64u64.to_le_bytes());
        section[0x20..0x28].copy_from_slice(&(note.len() as u64).to_le_bytes());
        elf.extend_from_slice(&section);
        elf
    }
}

//! What the tests against the stub loader share: building the stub, reading its record of the
//! last launch, kernels.
// Each test binary uses part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Builds the stub with `defines` as `NAME.so` in a folder of this test process; `None`
/// (after saying why) where there is no C compiler.
pub fn stub(name: &str, defines: &[&str]) -> Option<PathBuf> {
    let folder = std::env::temp_dir().join(format!("xhal-level-zero-stub-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    let output = folder.join(format!("{name}.so"));
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/stub/ze_stub.c");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = std::process::Command::new(&compiler)
        .args(["-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Werror", "-o"])
        .arg(&output)
        .arg(&source)
        .args(defines.iter().map(|define| format!("-D{define}")))
        .status();
    match status {
        Ok(status) if status.success() => Some(output),
        Ok(status) => panic!("{compiler} could not build the Level Zero stub: {status}"),
        Err(error) => {
            let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
            assert!(
                !required.split(',').any(|name| name.trim() == "level-zero"),
                "XHAL_REQUIRE_BACKENDS names level-zero, but no C compiler ({compiler}) builds its stub: {error}"
            );
            eprintln!("SKIPPED: no C compiler ({compiler}: {error}), so the Level Zero stub was not built");
            None
        }
    }
}

/// `stub_launch_t` of the stub.
#[repr(C)]
pub struct LastLaunch {
    pub launches: u32,
    pub groups: [u32; 3],
    pub group_size: [u32; 3],
    pub arg_count: u32,
    pub arg_size: [u64; 64],
    pub arg_value: [[u8; 256]; 64],
    pub kernels_alive: u32,
    pub modules_alive: u32,
    /// Regular command lists created and not yet destroyed.
    pub regular_lists_alive: u32,
    /// Memory allocations (device and host) not yet freed.
    pub allocations_alive: u32,
}

pub fn last_launch(path: &Path) -> Box<LastLaunch> {
    // SAFETY: the stub the backend already loaded (the same library, so the same record);
    // the function fills the struct it is given, declared above as the C declares it.
    unsafe {
        let library = libloading::Library::new(path).expect("the stub loads");
        let read: libloading::Symbol<unsafe extern "C" fn(*mut LastLaunch)> =
            library.get(b"xhal_ze_stub_last_launch\0").expect("the stub's record");
        let mut record: Box<LastLaunch> = Box::new(std::mem::zeroed());
        read(&mut *record);
        std::mem::forget(library);
        record
    }
}

/// Makes the next `times` calls of entry point `name` of the stub at `path` (already loaded by
/// the backend) fail with `code`.
pub fn fail_next(path: &Path, name: &str, code: u32, times: u32) {
    let name = std::ffi::CString::new(name).expect("an entry point's name");
    // SAFETY: as for `last_launch`; the stub copies the name.
    unsafe {
        let library = libloading::Library::new(path).expect("the stub loads");
        let fail: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char, u32, u32)> = library
            .get(b"xhal_ze_stub_fail_next\0")
            .expect("the stub's failure hook");
        fail(name.as_ptr(), code, times);
        std::mem::forget(library);
    }
}

/// Makes the stub at `path` (already loaded by the backend) signal the events of executed
/// regular lists only at the next `zeCommandListHostSynchronize` (`on`), or at once.
pub fn defer_completion(path: &Path, on: bool) {
    // SAFETY: as for `last_launch`.
    unsafe {
        let library = libloading::Library::new(path).expect("the stub loads");
        let defer: libloading::Symbol<unsafe extern "C" fn(i32)> = library
            .get(b"xhal_ze_stub_defer_completion\0")
            .expect("the stub's deferral");
        defer(i32::from(on));
        std::mem::forget(library);
    }
}

pub fn spirv(source: &str) -> Vec<u8> {
    xhal_kernel::parse_wgsl(source)
        .expect("parses")
        .to_spirv_kernel(None)
        .expect("emits Kernel SPIR-V")
        .to_bytes()
}

pub const SAXPY: &str = include_str!("../../../../examples/kernels/saxpy.wgsl");

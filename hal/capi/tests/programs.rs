//! The C API's own programs: `tests/c/capi_test.c` (C11) and `tests/c/capi_asan.cpp` (C++17
//! under AddressSanitizer and UndefinedBehaviorSanitizer), compiled against the committed
//! header and the library cargo just built, then run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folder holding the `libxhal_capi.so` built with this test (cargo's `deps` folder).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("the test binary's folder").to_path_buf();
    assert!(
        deps.join("libxhal_capi.so").exists(),
        "libxhal_capi.so is not beside the test binary in {}; cargo builds it with the tests",
        deps.display()
    );
    deps
}

fn build(compiler: &str, flags: &[&str], source: &str, output: &Path) {
    let result = Command::new(compiler)
        .args(flags)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(crate_dir().join("../../include"))
        .arg(crate_dir().join("tests/c").join(source))
        .arg("-L")
        .arg(library_dir())
        .args(["-lxhal_capi", "-lm", "-lpthread", "-o"])
        .arg(output)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} is required to build {source}: {e}"));
    assert!(
        result.status.success(),
        "{source} does not build:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

fn run(program: &Path, env: &[(&str, &str)]) -> String {
    let output = Command::new(program)
        .env("LD_LIBRARY_PATH", library_dir())
        // The programs pick their devices themselves; an outer selection must not hide the CPU.
        .env_remove("XHAL_DEVICE")
        .env_remove("XHAL_CAPI_DEVICE")
        .envs(env.iter().copied())
        .output()
        .expect("run the test program");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stdout}\n{stderr}",
        program.display(),
        output.status
    );
    assert!(stderr.is_empty(), "{} wrote to stderr:\n{stderr}", program.display());
    stdout
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xhal-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn the_c_program_passes() {
    let dir = scratch("c");
    let program = dir.join("capi_test");
    build("cc", &["-std=c11", "-pedantic"], "capi_test.c", &program);
    let out = run(&program, &[]);
    assert!(out.contains("capi_test: all checks passed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cpp_program_passes_under_address_sanitizer() {
    let dir = scratch("asan");
    let program = dir.join("capi_asan");
    build(
        "c++",
        &[
            "-std=c++17",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-fno-omit-frame-pointer",
        ],
        "capi_asan.cpp",
        &program,
    );
    let out = run(
        &program,
        &[
            ("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:halt_on_error=1"),
            ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"),
        ],
    );
    assert!(out.contains("capi_asan: all checks passed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

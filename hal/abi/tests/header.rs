//! The committed C header must match the Rust definitions, and must compile as strict C11.

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn committed_header() -> PathBuf {
    crate_dir().join("../../include/xhal.h")
}

fn generate_header() -> String {
    let config =
        cbindgen::Config::from_file(crate_dir().join("cbindgen.toml")).expect("hal/abi/cbindgen.toml must parse");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir())
        .with_config(config)
        .generate()
        .expect("cbindgen must understand hal/abi");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn committed_header_is_current() {
    let fresh = generate_header();
    let path = committed_header();
    if std::env::var_os("XHAL_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/xhal.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/xhal.h is stale: hal/abi changed without regenerating it. Run `make header` \
         (XHAL_BLESS=1 cargo test -p xhal-abi --test header) and record the change in docs/abi-changelog.md"
    );
}

fn compile_c(source: &str, dir: &Path, extra: &[&str]) -> std::process::Output {
    let file = dir.join("probe.c");
    std::fs::write(&file, source).expect("write probe.c");
    let include = crate_dir().join("../../include");
    Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-o"])
        .arg(dir.join("probe.o"))
        .arg("-I")
        .arg(&include)
        .args(extra)
        .arg(&file)
        .output()
        .expect("a C compiler (cc) is required to test the header")
}

#[test]
fn header_compiles_as_c11() {
    let dir = std::env::temp_dir().join(format!("xhal-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Use every public type so that a broken declaration cannot hide behind an unused one.
    let source = r#"
#include "xhal.h"
#include <assert.h>
static_assert(sizeof(XhalStr) == 2 * sizeof(void *), "XhalStr is pointer + length");
int probe(const XhalPluginApi *api, XhalDeviceInfo *info, XhalLaunchInfo *launch, XhalBufferArg *arg, XhalError *error) {
    XhalPluginQueryFn query = 0;
    (void)query;
    return (int)(api->struct_size + info->struct_size + launch->struct_size + (size_t)arg->size + error->code
        + XHAL_ABI_MAJOR + XHAL_STATUS_OK + XHAL_KERNEL_FORMAT_WGSL + (int)XHAL_FEATURE_F16);
}
"#;
    let output = compile_c(source, &dir, &[]);
    assert!(
        output.status.success(),
        "include/xhal.h does not compile as C11:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The same header from C++ must work too: vendors often write plugins in C++.
    let cxx = Command::new("c++")
        .args(["-std=c++17", "-Wall", "-Werror", "-fsyntax-only", "-x", "c++", "-I"])
        .arg(crate_dir().join("../../include"))
        .arg(dir.join("probe.c"))
        .output();
    if let Ok(out) = cxx {
        assert!(
            out.status.success(),
            "include/xhal.h does not compile as C++17:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn struct_sizes_match_between_rust_and_c() {
    let dir = std::env::temp_dir().join(format!("xhal-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = format!(
        r#"
#include "xhal.h"
#include <assert.h>
static_assert(sizeof(XhalPluginApi) == {}, "XhalPluginApi size");
static_assert(sizeof(XhalDeviceInfo) == {}, "XhalDeviceInfo size");
static_assert(sizeof(XhalLaunchInfo) == {}, "XhalLaunchInfo size");
static_assert(sizeof(XhalBufferArg) == {}, "XhalBufferArg size");
static_assert(sizeof(XhalError) == {}, "XhalError size");
static_assert(XHAL_PLUGIN_API_V1_0_SIZE == {}, "v1.0 table size");
static_assert(XHAL_DEVICE_INFO_V1_0_SIZE == {}, "v1.0 device info size");
static_assert(XHAL_LAUNCH_INFO_V1_0_SIZE == {}, "v1.0 launch info size");
static_assert(XHAL_ERROR_V1_0_SIZE == {}, "v1.0 error size");
static_assert(XHAL_PLUGIN_API_V1_1_SIZE == {}, "v1.1 table size");
static_assert(XHAL_PLUGIN_API_V1_3_SIZE == {}, "v1.3 table size");
static_assert(XHAL_PLUGIN_API_V1_4_SIZE == {}, "v1.4 table size");
static_assert(XHAL_PLUGIN_API_V1_5_SIZE == {}, "v1.5 table size");
"#,
        std::mem::size_of::<xhal_abi::XhalPluginApi>(),
        std::mem::size_of::<xhal_abi::XhalDeviceInfo>(),
        std::mem::size_of::<xhal_abi::XhalLaunchInfo>(),
        std::mem::size_of::<xhal_abi::XhalBufferArg>(),
        std::mem::size_of::<xhal_abi::XhalError>(),
        xhal_abi::XHAL_PLUGIN_API_V1_0_SIZE,
        xhal_abi::XHAL_DEVICE_INFO_V1_0_SIZE,
        xhal_abi::XHAL_LAUNCH_INFO_V1_0_SIZE,
        xhal_abi::XHAL_ERROR_V1_0_SIZE,
        xhal_abi::XHAL_PLUGIN_API_V1_1_SIZE,
        xhal_abi::XHAL_PLUGIN_API_V1_3_SIZE,
        xhal_abi::XHAL_PLUGIN_API_V1_4_SIZE,
        xhal_abi::XHAL_PLUGIN_API_V1_5_SIZE,
    );
    let output = compile_c(&source, &dir, &[]);
    assert!(
        output.status.success(),
        "C and Rust disagree on a struct size:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

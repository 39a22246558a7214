//! The committed include/xhal_capi.h must match the Rust definitions, and must compile as
//! strict C11 and as C++17 next to the plugin header.

use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate_header() -> String {
    let config =
        cbindgen::Config::from_file(crate_dir().join("cbindgen.toml")).expect("hal/capi/cbindgen.toml must parse");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir())
        .with_config(config)
        .generate()
        .expect("cbindgen must understand hal/capi");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn committed_header_is_current() {
    let fresh = generate_header();
    let path = crate_dir().join("../../include/xhal_capi.h");
    if std::env::var_os("XHAL_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/xhal_capi.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/xhal_capi.h is stale: hal/capi changed without regenerating it. Run `make header` \
         and record the change in docs/capi-changelog.md"
    );
}

fn compile(compiler: &str, flags: &[&str], source: &str, name: &str, dir: &Path) -> std::process::Output {
    let file = dir.join(name);
    std::fs::write(&file, source).expect("write the probe");
    Command::new(compiler)
        .args(flags)
        .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-c", "-o"])
        .arg(dir.join(format!("{name}.o")))
        .arg("-I")
        .arg(crate_dir().join("../../include"))
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} is required to test the header: {e}"))
}

const PROBE: &str = r#"
#include "xhal.h"
#include "xhal_capi.h"
int probe(void);
int probe(void) {
    xhal_device_info_t info = {0};
    info.struct_size = sizeof info;
    _Static_assert(XHAL_CAPI_DEVICE_INFO_V1_0_SIZE <= sizeof(xhal_device_info_t), "v1.0 prefix");
    _Static_assert(XHAL_CAPI_LAUNCH_V1_0_SIZE <= sizeof(xhal_launch_t), "v1.0 prefix");
    _Static_assert(XHAL_ERROR_OUT_OF_BOUNDS == XHAL_STATUS_OUT_OF_BOUNDS, "codes agree with the ABI's");
    _Static_assert(XHAL_DEVICE_FEATURE_HOST_MAPPABLE == XHAL_FEATURE_HOST_MAPPABLE, "feature bits agree");
    return (int)info.struct_size + (int)XHAL_API_MAJOR;
}
"#;

#[test]
fn header_compiles_as_c11_and_cpp17_beside_the_plugin_header() {
    let dir = std::env::temp_dir().join(format!("xhal-capi-header-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let c = compile("cc", &["-std=c11"], PROBE, "probe.c", &dir);
    assert!(c.status.success(), "C11: {}", String::from_utf8_lossy(&c.stderr));
    let cpp_probe = PROBE.replace("_Static_assert", "static_assert").replace("= {0}", "{}");
    let cpp = compile("c++", &["-std=c++17"], &cpp_probe, "probe.cpp", &dir);
    assert!(cpp.status.success(), "C++17: {}", String::from_utf8_lossy(&cpp.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

//! The plugin written in plain C (examples/c-plugin), built here with the system C compiler
//! exactly as `make c-plugin` builds it, checked by its own C checks, and certified by
//! `xhal-cts`: the proof that the ABI can be implemented without Rust.

use std::path::{Path, PathBuf};
use std::process::Command;

const FLAGS: [&str; 7] = ["-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O2", "-I"];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Compiles `source` with the Makefile's flags and `extra`; `None` (after a SKIPPED line)
/// when there is no C compiler, unless XHAL_REQUIRE_BACKENDS names c-plugin.
fn compile(source: &str, output: &Path, extra: &[&str]) -> Option<()> {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let root = repository();
    let status = Command::new(&compiler)
        .args(FLAGS)
        .arg(root.join("include"))
        .args(extra)
        .arg("-o")
        .arg(output)
        .arg(root.join(source))
        .status();
    match status {
        Ok(status) if status.success() => Some(()),
        Ok(status) => panic!("{compiler} could not build {source}: {status}"),
        Err(error) => {
            let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
            assert!(
                !required.split(',').any(|name| name.trim() == "c-plugin"),
                "XHAL_REQUIRE_BACKENDS names c-plugin, but no C compiler ({compiler}) builds it: {error}"
            );
            eprintln!("SKIPPED: no C compiler ({compiler}: {error}), so the C plugin was not built or certified");
            None
        }
    }
}

/// The plugin in a folder of its own, under the file name the loader requires.
fn build_plugin(folder: &str) -> Option<PathBuf> {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    std::fs::create_dir_all(&directory).unwrap();
    let plugin = directory.join("libxhal_c-plugin.so");
    compile(
        "examples/c-plugin/c_plugin.c",
        &plugin,
        &["-fPIC", "-shared", "-fvisibility=hidden", "-lpthread"],
    )?;
    Some(plugin)
}

#[test]
fn the_c_plugin_passes_its_own_checks() {
    let Some(plugin) = build_plugin("c-plugin-checked") else {
        return;
    };
    let checker = plugin.with_file_name("check_c_plugin");
    if compile("examples/c-plugin/check_c_plugin.c", &checker, &["-ldl"]).is_none() {
        return;
    }
    let output = Command::new(&checker).arg(&plugin).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "check_c_plugin failed:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(" checks, 0 failed"), "{stdout}");
}

#[test]
fn the_c_plugin_exports_only_the_query() {
    let Some(plugin) = build_plugin("c-plugin-exports") else {
        return;
    };
    let output = match Command::new("nm").args(["-D", "--defined-only"]).arg(&plugin).output() {
        Ok(output) if output.status.success() => output,
        other => {
            eprintln!("SKIPPED: `nm -D` did not run ({other:?}), so the exported symbols were not listed");
            return;
        }
    };
    let exported: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2).map(str::to_string))
        .collect();
    assert_eq!(exported, ["xhal_plugin_query"], "symbols the C plugin exports");
}

#[test]
fn xhal_cts_certifies_the_c_plugin_for_core() {
    let Some(plugin) = build_plugin("c-plugin-certified") else {
        return;
    };
    let report = plugin.with_file_name("report");
    let output = Command::new(env!("CARGO_BIN_EXE_xhal-cts"))
        .args(["run", "--plugin"])
        .arg(&plugin)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "xhal-cts refused the C plugin:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let certificate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("certificate.json")).unwrap()).unwrap();
    assert_eq!(certificate["plugin"]["name"], "c-plugin");
    assert_eq!(certificate["passed"], true);
    let device = &certificate["devices"][0];
    let core = device["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|profile| profile["name"] == "core")
        .expect("a core profile");
    assert_eq!(core["status"], "achieved", "{core}");

    let document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("report.json")).unwrap()).unwrap();
    let results = document["devices"][0]["results"].as_array().unwrap();
    let mut passed = Vec::new();
    let mut skipped_for_wgsl = Vec::new();
    for result in results {
        let id = result["id"].as_str().unwrap();
        match result["result"].as_str().unwrap() {
            "pass" => passed.push(id),
            "skipped" => {
                let reason = result["reason"].as_str().unwrap_or_default();
                assert!(!reason.trim().is_empty(), "{id} was skipped without a reason");
                if reason.contains("the host makes none of those from WGSL") {
                    assert!(
                        reason.contains("vendor-0x10000c01"),
                        "{id}: the reason does not name the format the device takes: {reason}"
                    );
                    skipped_for_wgsl.push(id);
                }
            }
            other => panic!("{id} ended as {other}: {result}"),
        }
    }
    // Everything that needs no kernel ran and passed: the ABI, the device, memory, and the
    // stream and event behaviour the suite checks without a kernel.
    for area in ["plugin.", "device.", "memory.", "streams.", "events."] {
        assert!(
            passed.iter().any(|id| id.starts_with(area)),
            "no {area}* test passed: {passed:?}"
        );
    }
    assert!(passed.len() >= 90, "only {} tests passed: {passed:?}", passed.len());
    // The WGSL tests are skipped, each saying why, never failed and never passed.
    for id in [
        "device.kernel_formats.wgsl_reachable",
        "kernels.load.syntax_error",
        "streams.order.kernel_chain",
    ] {
        assert!(
            skipped_for_wgsl.contains(&id),
            "{id} was not skipped for want of a WGSL path"
        );
    }
}

//! `xhal new-plugin`: what it refuses, and a scaffolded plugin that builds and is certified.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The xhal workspace this test belongs to.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// The target folder this test was built in: cargo runs below reuse what is built there.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp folder has a parent")
        .to_path_buf()
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.env("CARGO_TARGET_DIR", target_dir());
    command
}

fn run_checked(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: could not start: {error}"));
    assert!(
        output.status.success(),
        "{what} failed ({:?})\n--- stdout\n{}--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn names_outside_the_backend_grammar_are_refused_with_exit_2() {
    let sandbox = Sandbox::new("new-plugin-names");
    for (name, expected) in [
        ("Acme", "not a valid backend name"),
        ("9lives", "not a valid backend name"),
        ("ac.me", "not a valid backend name"),
        ("a/b", "not a valid backend name"),
        ("vulkan", "a backend xhal ships"),
    ] {
        let output = sandbox.run(&["new-plugin", name, "--dir", "out"], &[]);
        assert_exit(&output, 2);
        assert!(stderr(&output).contains(expected), "{name}: {}", stderr(&output));
        assert!(
            !sandbox.root().join("out").exists(),
            "{name}: a refused name wrote files"
        );
    }
}

#[test]
fn a_non_empty_folder_and_a_folder_that_is_no_checkout_are_refused() {
    let sandbox = Sandbox::new("new-plugin-folders");
    std::fs::create_dir_all(sandbox.root().join("taken")).unwrap();
    sandbox.write("taken/notes.txt", "mine");
    let output = sandbox.run(&["new-plugin", "acme", "--dir", "taken"], &[]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("taken already exists and is not empty"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_dir(sandbox.root().join("taken")).unwrap().count(), 1);

    sandbox.write("a-file", "");
    let output = sandbox.run(&["new-plugin", "acme", "--dir", "a-file"], &[]);
    assert_exit(&output, 2);
    assert!(stderr(&output).contains("is not a folder"), "{}", stderr(&output));

    let output = sandbox.run(&["new-plugin", "acme", "--dir", "out", "--xhal-source", "taken"], &[]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("is not an xhal checkout"),
        "{}",
        stderr(&output)
    );
    assert!(!sandbox.root().join("out").exists());

    // An existing empty folder is fine, and the default folder is xhal-NAME.
    std::fs::create_dir_all(sandbox.root().join("empty")).unwrap();
    assert_exit(&sandbox.run(&["new-plugin", "acme", "--dir", "empty"], &[]), 0);
    assert!(sandbox.root().join("empty/src/lib.rs").is_file());
    let output = sandbox.run(&["new-plugin", "zeta_2"], &[]);
    assert_exit(&output, 0);
    assert!(
        stdout(&output).contains("crate xhal-zeta_2, library xhal_zeta_2"),
        "{}",
        stdout(&output)
    );
    assert!(sandbox.root().join("xhal-zeta_2/Cargo.toml").is_file());
    // A `-` in NAME: cargo's file is copied to the name the loader wants before certifying.
    let output = sandbox.run(&["new-plugin", "my-npu"], &[]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(
        text.contains("cp target/release/libxhal_my_npu.so libxhal_my-npu.so"),
        "{text}"
    );
    assert!(text.contains("xhal-cts run --plugin libxhal_my-npu.so"), "{text}");
}

/// The check: scaffold `acme`, build it with cargo (offline, reusing this build's
/// target folder and dependency versions), and certify it with xhal-cts: the `core` profile.
#[test]
fn a_scaffolded_plugin_builds_and_is_certified_core() {
    let started = Instant::now();
    let sandbox = Sandbox::new("new-plugin-acme");
    let crate_dir = sandbox.root().join("acme");
    let output = sandbox.run(
        &[
            "new-plugin",
            "acme",
            "--dir",
            "acme",
            "--xhal-source",
            &workspace_root().to_string_lossy(),
            "--json",
        ],
        &[],
    );
    assert_exit(&output, 0);
    let document = json(&output);
    assert_eq!(document["backend"], "acme");
    assert_eq!(document["crate"], "xhal-acme");
    assert_eq!(document["library"], "xhal_acme");
    assert_eq!(document["xhal_dependency"]["kind"], "path");
    assert_eq!(document["files"].as_array().map(Vec::len), Some(5), "{document:#}");

    // The workspace's lock file pins the versions already built and in the local registry
    // cache, so the build needs no network.
    std::fs::copy(workspace_root().join("Cargo.lock"), crate_dir.join("Cargo.lock")).expect("copy Cargo.lock");
    run_checked(
        cargo().args(["build", "--offline", "--quiet"]).current_dir(&crate_dir),
        "cargo build of the scaffolded plugin",
    );
    let built = started.elapsed();
    // `--workspace` resolves features as `cargo build --workspace` (what `make test` runs
    // first) does, so there this finds xhal-cts built and builds nothing.
    run_checked(
        cargo()
            .args(["build", "--offline", "--quiet", "--workspace", "--bin", "xhal-cts"])
            .current_dir(workspace_root()),
        "cargo build of xhal-cts",
    );
    let plugin = target_dir()
        .join("debug")
        .join(format!("libxhal_acme{}", std::env::consts::DLL_SUFFIX));
    let report = sandbox.root().join("cts");
    let output = Command::new(target_dir().join("debug/xhal-cts"))
        .args(["run", "--plugin"])
        .arg(&plugin)
        .arg("--report")
        .arg(&report)
        .arg("--no-performance")
        .env_remove("XHAL_PLUGIN_PATH")
        .env_remove("XHAL_DEVICE")
        .output()
        .expect("run xhal-cts");
    assert_exit(&output, 0);
    let text = stdout(&output);
    let summary = text
        .lines()
        .find(|line| line.trim_start().starts_with("core "))
        .unwrap_or_else(|| panic!("no core profile line:\n{text}"));
    assert!(summary.contains("achieved"), "{summary}");
    let certificate: Value =
        serde_json::from_slice(&std::fs::read(report.join("certificate.json")).expect("read certificate.json"))
            .expect("certificate.json is JSON");
    assert_eq!(certificate["plugin"]["name"], "acme");
    assert_eq!(certificate["passed"], true);
    let profiles = &certificate["devices"][0]["profiles_achieved"];
    assert!(
        profiles
            .as_array()
            .is_some_and(|list| list.iter().any(|profile| profile == "core")),
        "{profiles}"
    );
    eprintln!(
        "scaffolded and built in {:.1}s, certified in {:.1}s more:{summary}",
        built.as_secs_f64(),
        (started.elapsed() - built).as_secs_f64()
    );
}

/// The template as a `cargo generate` template: the manifest is rendered with the name,
/// every other file is copied as it is, and the copy builds into a plugin whose backend is
/// that name. Needs cargo-generate, which CI does not install: skipped there, saying so.
#[test]
fn the_template_works_with_cargo_generate() {
    let probe = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["generate", "--version"])
        .output();
    if !probe.is_ok_and(|output| output.status.success()) {
        println!("SKIPPED: cargo-generate is not installed (cargo install cargo-generate), so `cargo generate` was not tried");
        return;
    }
    let sandbox = Sandbox::new("cargo-generate");
    run_checked(
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["generate", "--silent", "--name", "acmegen", "--path"])
            .arg(workspace_root().join("plugin-template"))
            .arg("--define")
            .arg(format!("xhal_path={}", workspace_root().display()))
            .current_dir(sandbox.root()),
        "cargo generate",
    );
    let crate_dir = sandbox.root().join("acmegen");
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).expect("read the generated Cargo.toml");
    assert!(manifest.contains("name = \"xhal-acmegen\""), "{manifest}");
    assert!(!manifest.contains("{{"), "{manifest}");
    for file in ["src/lib.rs", "tests/backend.rs"] {
        let template = std::fs::read_to_string(workspace_root().join("plugin-template").join(file)).expect("read");
        let generated = std::fs::read_to_string(crate_dir.join(file)).expect("read");
        assert!(template == generated, "cargo generate changed {file}");
    }
    std::fs::copy(workspace_root().join("Cargo.lock"), crate_dir.join("Cargo.lock")).expect("copy Cargo.lock");
    run_checked(
        cargo().args(["build", "--offline", "--quiet"]).current_dir(&crate_dir),
        "cargo build of the generated plugin",
    );
    let plugin = target_dir()
        .join("debug")
        .join(format!("libxhal_acmegen{}", std::env::consts::DLL_SUFFIX));
    let folder = sandbox.root().join("plugins");
    std::fs::create_dir_all(&folder).expect("create plugins/");
    std::fs::copy(&plugin, folder.join(plugin.file_name().expect("a file name"))).expect("copy the plugin");
    let output = sandbox.run(&["devices"], &[("XHAL_PLUGIN_PATH", &folder.to_string_lossy())]);
    assert_exit(&output, 0);
    assert!(stdout(&output).contains("acmegen:0"), "{}", stdout(&output));
}

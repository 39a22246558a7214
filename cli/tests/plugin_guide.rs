//! docs/plugin-guide.md, run as written: every `sh` block, in order, in one empty folder,
//! with this build's `xhal` and `xhal-cts` on PATH, so that the guide cannot go stale.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The xhal workspace this test belongs to.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

/// The target folder this test was built in.
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target tmp folder has a parent")
        .to_path_buf()
}

/// The guide's `sh` blocks, in order.
fn shell_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            Some(block) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    assert!(current.is_none(), "an `sh` block of the guide is not closed");
    blocks
}

#[test]
fn the_guide_finds_its_blocks() {
    let blocks = shell_blocks("text\n```sh\necho one\n```\n```text\nnot run\n```\n```sh\necho two\necho three\n```\n");
    assert_eq!(blocks, ["echo one\n", "echo two\necho three\n"]);
}

#[test]
fn every_command_of_the_plugin_guide_works_as_written() {
    let guide = std::fs::read_to_string(workspace_root().join("docs/plugin-guide.md")).expect("read the guide");
    let blocks = shell_blocks(&guide);
    assert!(blocks.len() >= 8, "the guide has {} sh blocks", blocks.len());
    // xhal-cts as `make test` builds it (`cargo build --workspace` first: then this builds
    // nothing).
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--offline", "--quiet", "--workspace", "--bin", "xhal-cts"])
        .env("CARGO_TARGET_DIR", target_dir())
        .current_dir(workspace_root())
        .status()
        .expect("start cargo");
    assert!(status.success(), "building xhal-cts failed");
    let binaries = Path::new(env!("CARGO_BIN_EXE_xhal"))
        .parent()
        .expect("a folder")
        .to_path_buf();
    assert!(
        binaries.join("xhal-cts").is_file(),
        "no xhal-cts in {}",
        binaries.display()
    );

    let work = target_dir().join("tmp").join("plugin-guide");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("home")).expect("create the guide's folder");
    let path = std::env::join_paths(
        std::iter::once(binaries.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    // The scaffolded crate builds into this build's own target folder, with this workspace's
    // lock file, so it needs no network, and its dependencies are compiled once for this test
    // and tests/new_plugin.rs, which builds the same crate there.
    let plugin_target = target_dir();

    for (number, block) in blocks.iter().enumerate() {
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", block])
            .current_dir(&work)
            .env("PATH", &path)
            .env("HOME", work.join("home"))
            .env("XHAL_SOURCE", workspace_root())
            .env("CARGO_NET_OFFLINE", "true")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("XHAL_PLUGIN_PATH")
            .env_remove("XHAL_DEVICE")
            .output()
            .expect("start bash");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "block {} of docs/plugin-guide.md failed ({:?}):\n{block}--- stdout\n{stdout}--- stderr\n{stderr}",
            number + 1,
            output.status
        );
        if block.contains("xhal new-plugin acme") {
            let crate_dir = work.join("acme");
            std::fs::copy(workspace_root().join("Cargo.lock"), crate_dir.join("Cargo.lock")).expect("copy Cargo.lock");
            std::os::unix::fs::symlink(&plugin_target, crate_dir.join("target")).expect("link the target folder");
        }
        if block.contains("xhal devices") {
            assert!(
                stdout.contains("acme:0"),
                "the installed plugin is not listed:\n{stdout}"
            );
        }
        if block.contains("certificate.json") {
            assert!(
                stdout.contains("\"passed\": true"),
                "the certificate does not pass:\n{stdout}"
            );
        }
    }
}

//! The library build and the test build of the workspace resolve every shared dependency with
//! the same features, so `make test` compiles each once (see this crate's Cargo.toml).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Every package of `cargo tree --workspace` with the given dependency kinds, and its features.
fn features(kinds: &str) -> BTreeMap<String, BTreeSet<String>> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--workspace",
            "--offline",
            "--prefix",
            "none",
            "--no-dedupe",
            "-e",
            kinds,
        ])
        .args(["-f", "{p}|{f}"])
        .current_dir(&workspace)
        .output()
        .expect("start cargo tree");
    assert!(
        output.status.success(),
        "cargo tree -e {kinds} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut packages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some((package, list)) = line.split_once('|') else {
            continue;
        };
        let entry = packages.entry(package.trim().to_owned()).or_default();
        entry.extend(list.split(',').filter(|f| !f.is_empty()).map(str::to_owned));
    }
    packages
}

#[test]
fn tests_turn_on_no_feature_of_a_shared_dependency_that_the_library_build_leaves_off() {
    let library = features("normal,build");
    let tests = features("normal,build,dev");
    assert!(library.len() > 50, "cargo tree listed only {} packages", library.len());
    let mut differences = Vec::new();
    for (package, on_in_library) in &library {
        let on_in_tests = &tests[package];
        let only_in_tests: Vec<_> = on_in_tests.difference(on_in_library).cloned().collect();
        if !only_in_tests.is_empty() {
            differences.push(format!("{package}: {}", only_in_tests.join(", ")));
        }
    }
    assert!(
        differences.is_empty(),
        "the test build turns on features the library build does not, so cargo compiles these \
         (and everything that depends on them) twice; add the features to \
         tools/workspace-features/Cargo.toml:\n{}",
        differences.join("\n")
    );
}

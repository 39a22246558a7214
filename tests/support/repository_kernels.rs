//! The WGSL kernels of the repository, for tests that run every one of them through a
//! translation: included by path (`#[path]`) into the test modules that need it, since no crate
//! of the workspace should carry test data for the others.

use std::path::Path;

/// `(where it came from, WGSL)` for every `.wgsl` file in `folders` (relative to the repository
/// root `repo`) and the folders below them, and every raw string holding a compute entry point
/// in their other files (the conformance catalogue's kernels). A missing folder is a test
/// failure, not an empty list.
pub(crate) fn repository_kernels(repo: &Path, folders: &[&str]) -> Vec<(String, String)> {
    let mut kernels = Vec::new();
    for folder in folders {
        let root = repo.join(folder);
        if !root.is_dir() {
            panic!("{folder}: not a folder");
        }
        let mut files = Vec::new();
        let mut pending = vec![root];
        while let Some(directory) = pending.pop() {
            let entries = std::fs::read_dir(&directory).unwrap_or_else(|error| panic!("{folder}: {error}"));
            for path in entries.filter_map(|entry| entry.ok().map(|entry| entry.path())) {
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        for path in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let name = path.display().to_string();
            if path.extension().is_some_and(|extension| extension == "wgsl") {
                kernels.push((name, text));
                continue;
            }
            let mut rest = text.as_str();
            while let Some(start) = rest.find("r#\"") {
                let after = &rest[start + 3..];
                let Some(end) = after.find("\"#") else { break };
                if after[..end].contains("@compute") {
                    kernels.push((name.clone(), after[..end].to_string()));
                }
                rest = &after[end + 2..];
            }
        }
    }
    kernels
}

//! The WGSL kernels of the repository, for the tests that run every emitter over them.

use std::path::{Path, PathBuf};

use xhal_kernel::parse_wgsl;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (name, WGSL) for every kernel: the example files, and every raw string literal in the
/// conformance catalogue that holds a compute entry point and parses.
pub fn kernels() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut examples: Vec<_> = std::fs::read_dir(repo().join("examples/kernels"))
        .expect("examples/kernels")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    examples.sort();
    for path in examples {
        let text = std::fs::read_to_string(&path).expect("read example");
        out.push((
            format!("examples/{}", path.file_name().unwrap_or_default().to_string_lossy()),
            text,
        ));
    }
    let mut catalogue: Vec<_> = std::fs::read_dir(repo().join("conformance/src/catalogue"))
        .expect("catalogue")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    catalogue.sort();
    for path in catalogue {
        let text = std::fs::read_to_string(&path).expect("read catalogue");
        let file = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
        let mut rest = text.as_str();
        let mut k = 0;
        while let Some(start) = rest.find("r#\"") {
            let after = &rest[start + 3..];
            let Some(end) = after.find("\"#") else { break };
            let body = &after[..end];
            rest = &after[end + 2..];
            if body.contains("@compute") && parse_wgsl(body).is_ok() {
                out.push((format!("{file}#{k}"), body.to_owned()));
                k += 1;
            }
        }
    }
    out
}

//! The Kernel SPIR-V writer on every WGSL kernel of the repository: examples/kernels and
//! every kernel string of the conformance catalogue (collected as in `c_dialects.rs`). Each
//! output is checked with `spirv-val --target-env opencl1.2` (SPIR-V 1.0 under the OpenCL 1.2
//! full profile, which admits Physical64, Int64, Float64 and Int8). A kernel the writer
//! cannot express must be refused with an `Unsupported` error, never a panic.
//!
//! Where the Khronos SPIR-V/LLVM translator is installed (`llvm-spirv`, Debian package
//! llvm-spirv-15), each output must also translate to LLVM IR with `llvm-spirv -r`: that
//! reader sits at the front of Intel's OpenCL and Level Zero compilers.
//!
//! Without `spirv-val` (Debian package spirv-tools) the test is skipped, except under CI
//! (the `CI` variable set), where it fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use xhal_kernel::{parse_wgsl, KernelErrorKind};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// (name, WGSL) for every kernel: the example files, and every raw string literal in the
/// conformance catalogue that holds a compute entry point and parses.
fn kernels() -> Vec<(String, String)> {
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

const SPIRV_VAL: &str = "spirv-val";
const TARGET_ENV: &str = "opencl1.2";

fn have_spirv_val() -> bool {
    Command::new(SPIRV_VAL)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The Khronos SPIR-V/LLVM translator, when installed (Debian: llvm-spirv-15): the reader
/// at the front of Intel's OpenCL and Level Zero compilers. Optional; `spirv-val` is not.
fn llvm_spirv() -> Option<&'static str> {
    const NAMES: &[&str] = &[
        "llvm-spirv",
        "llvm-spirv-20",
        "llvm-spirv-19",
        "llvm-spirv-18",
        "llvm-spirv-17",
        "llvm-spirv-16",
        "llvm-spirv-15",
        "llvm-spirv-14",
    ];
    NAMES.iter().copied().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let output = cmd.output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        Err(text.chars().take(3000).collect())
    }
}

/// `spirv-val --target-env opencl1.2`, then, where installed, a translation to LLVM IR.
fn validate(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let file = dir.join(format!("{}.spv", name.replace(['/', '#', '.'], "_")));
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    run(Command::new(SPIRV_VAL).args(["--target-env", TARGET_ENV]).arg(&file))?;
    if let Some(translator) = llvm_spirv() {
        run(Command::new(translator)
            .arg("-r")
            .arg(&file)
            .arg("-o")
            .arg(file.with_extension("bc")))
        .map_err(|e| format!("{translator} -r: {e}"))?;
    }
    Ok(())
}

#[test]
fn every_repository_kernel_validates_as_opencl_spirv_or_is_refused() {
    if !have_spirv_val() {
        assert!(
            std::env::var_os("CI").is_none(),
            "spirv-val not found under CI: install spirv-tools (apt install spirv-tools)"
        );
        println!("skipped: spirv-val not found (apt install spirv-tools)");
        return;
    }
    let kernels = kernels();
    assert!(kernels.len() >= 40, "found only {} kernels", kernels.len());
    let dir = std::env::temp_dir().join(format!("xhal-spirv-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // XHAL_SPIRV_KERNEL_DUMP=DIR keeps every emitted module there.
    let dump = std::env::var_os("XHAL_SPIRV_KERNEL_DUMP").map(PathBuf::from);
    let mut failures = Vec::new();
    let mut refused: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut validated = 0;
    for (name, source) in &kernels {
        let module = parse_wgsl(source).expect("parsed before");
        match module.to_spirv_kernel(None) {
            Ok(k) => {
                let bytes = k.to_bytes();
                if let Some(d) = &dump {
                    let file = format!("{}.spv", name.replace(['/', '#', '.'], "_"));
                    let _ = std::fs::create_dir_all(d).and_then(|()| std::fs::write(d.join(file), &bytes));
                }
                match validate(&dir, name, &bytes) {
                    Ok(()) => validated += 1,
                    Err(e) => failures.push(format!("{name}:\n{e}")),
                }
            }
            Err(e) => {
                if e.kind() != KernelErrorKind::Unsupported {
                    failures.push(format!("{name}: not an Unsupported error: {e}"));
                }
                refused.entry(e.message().to_owned()).or_default().push(name.clone());
            }
        }
    }
    let refused_count: usize = refused.values().map(Vec::len).sum();
    println!(
        "{} kernels: {validated} validated with {SPIRV_VAL} --target-env {TARGET_ENV}{}, {refused_count} refused",
        kernels.len(),
        llvm_spirv().map_or(String::new(), |t| format!(" and read by {t} -r"))
    );
    for (why, names) in &refused {
        println!("refused: {why}: {}", names.join(", "));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Kernels written to reach every mapping of the writer (tests/spirv_kernel/*.wgsl): each
/// must be written and validate.
#[test]
fn every_mapping_of_the_writer_validates() {
    if !have_spirv_val() {
        assert!(
            std::env::var_os("CI").is_none(),
            "spirv-val not found under CI: install spirv-tools (apt install spirv-tools)"
        );
        println!("skipped: spirv-val not found (apt install spirv-tools)");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spirv_kernel");
    let mut files: Vec<_> = std::fs::read_dir(&here)
        .expect("tests/spirv_kernel")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    files.sort();
    assert!(files.len() >= 4);
    let dir = std::env::temp_dir().join(format!("xhal-spirv-mappings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut failures = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(path).expect("read");
        let result = parse_wgsl(&source)
            .map_err(|e| e.with_file_name(&name).to_string())
            .and_then(|m| m.to_spirv_kernel(None).map_err(|e| e.with_file_name(&name).to_string()))
            .and_then(|k| {
                let bytes = k.to_bytes();
                if let Some(d) = std::env::var_os("XHAL_SPIRV_KERNEL_DUMP").map(PathBuf::from) {
                    let _ = std::fs::create_dir_all(&d)
                        .and_then(|()| std::fs::write(d.join(format!("{name}.spv")), &bytes));
                }
                validate(&dir, &name, &bytes)
            });
        if let Err(e) = result {
            failures.push(format!("{name}:\n{e}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

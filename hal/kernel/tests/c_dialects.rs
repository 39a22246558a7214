//! The C emitter on every WGSL kernel of the repository: examples/kernels and every kernel
//! string of the conformance catalogue. CUDA C and HIP C are checked with
//! `g++ -x c++ -std=c++17 -fsyntax-only`, OpenCL C with `gcc -x c -std=c11 -fsyntax-only`,
//! against the stub headers in `tests/stubs`, and host C is compiled with `gcc -std=c11 -O2`;
//! all with `-Wall -Werror`. A kernel a dialect cannot
//! express must be refused with an `Unsupported` error, never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

mod common;

use common::kernels;
use xhal_kernel::{parse_wgsl, Dialect, KernelErrorKind};

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn check(dir: &Path, name: &str, dialect: Dialect, text: &str) -> Result<(), String> {
    let stubs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stubs");
    let file = dir.join(format!("{}.src", name.replace(['/', '#', '.'], "_")));
    std::fs::write(&file, text).map_err(|e| e.to_string())?;
    let mut cmd = match dialect {
        Dialect::CudaC | Dialect::HipC => {
            let mut c = Command::new("g++");
            let stub = if dialect == Dialect::CudaC {
                "cuda_stub.h"
            } else {
                "hip_stub.h"
            };
            c.args([
                "-x",
                "c++",
                "-std=c++17",
                "-fsyntax-only",
                "-Wall",
                "-Werror",
                // NVRTC and hiprtc accept ISO C++ (plus their own keywords, which the stubs
                // declare); GNU extensions such as flexible array members must fail here.
                "-pedantic-errors",
                "-include",
            ])
            .arg(stubs.join(stub));
            c
        }
        Dialect::OpenclC => {
            let mut c = Command::new("gcc");
            // gcc does not know `#pragma OPENCL EXTENSION`.
            c.args([
                "-x",
                "c",
                "-std=c11",
                "-fsyntax-only",
                "-Wall",
                "-Werror",
                "-Wno-unknown-pragmas",
                "-include",
            ])
            .arg(stubs.join("opencl_stub.h"));
            c
        }
        Dialect::HostC => {
            // Host C is compiled for real, optimised, so that warnings only optimisation finds
            // (uninitialised values) count too.
            let mut c = Command::new("gcc");
            c.args([
                "-x",
                "c",
                "-std=c11",
                "-O2",
                "-c",
                "-o",
                "/dev/null",
                "-Wall",
                "-Werror",
            ]);
            c
        }
    };
    let output = cmd.arg(&file).output().map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).chars().take(3000).collect())
    }
}

#[test]
fn every_repository_kernel_emits_and_passes_a_syntax_check_in_every_dialect() {
    if !have("gcc") || !have("g++") {
        println!("skipped: gcc or g++ not found");
        return;
    }
    let kernels = kernels();
    assert!(kernels.len() >= 40, "found only {} kernels", kernels.len());
    let dir = std::env::temp_dir().join(format!("xhal-c-dialects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut failures = Vec::new();
    let mut refused: BTreeMap<(&str, String), Vec<String>> = BTreeMap::new();
    // XHAL_C_DUMP=DIR keeps every emitted file there (for checks with real compilers).
    let dump = std::env::var_os("XHAL_C_DUMP").map(PathBuf::from);
    // Emitting is quick; the compilers are what take time, so they run on every core.
    let mut emitted = Vec::new();
    for (name, source) in &kernels {
        let module = parse_wgsl(source).expect("parsed before");
        for &dialect in Dialect::ALL {
            match module.to_c(dialect, None) {
                Ok(c) => {
                    if let Some(d) = &dump {
                        let ext = match dialect {
                            Dialect::CudaC => "cu",
                            Dialect::HipC => "hip",
                            Dialect::OpenclC => "cl",
                            Dialect::HostC => "c",
                        };
                        let file = format!("{}.{ext}", name.replace(['/', '#', '.'], "_"));
                        if let Err(e) = std::fs::create_dir_all(d).and_then(|()| std::fs::write(d.join(file), &c.text))
                        {
                            failures.push(format!(
                                "{name} as {}: could not keep it in XHAL_C_DUMP: {e}",
                                dialect.name()
                            ));
                        }
                    }
                    emitted.push((name, dialect, c.text));
                }
                Err(e) => {
                    if e.kind() != KernelErrorKind::Unsupported {
                        failures.push(format!("{name} as {}: not an Unsupported error: {e}", dialect.name()));
                    }
                    refused
                        .entry((dialect.name(), e.message().to_owned()))
                        .or_default()
                        .push(name.clone());
                }
            }
        }
    }
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((name, dialect, text)) = emitted.get(index) else {
                    break;
                };
                let result = check(&dir, &format!("{name}_{dialect:?}"), *dialect, text);
                results
                    .lock()
                    .expect("no checker panicked")
                    .push((*name, *dialect, result));
            });
        }
    });
    let mut checked = BTreeMap::new();
    for (name, dialect, result) in results.into_inner().expect("no checker panicked") {
        match result {
            Ok(()) => *checked.entry(dialect.name()).or_insert(0) += 1,
            Err(e) => failures.push(format!("{name} as {}:\n{e}", dialect.name())),
        }
    }
    println!("{} kernels; passed the syntax check: {checked:?}", kernels.len());
    for ((dialect, why), names) in &refused {
        println!("refused for {dialect}: {why}: {}", names.join(", "));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

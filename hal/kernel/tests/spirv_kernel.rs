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

mod common;

use common::kernels;
use xhal_kernel::{parse_wgsl, KernelErrorKind};

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

/// Whether a module (little-endian words) declares `OpCapability Int64Atomics`.
fn declares_int64_atomics(bytes: &[u8]) -> bool {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut i = 5;
    while i < words.len() {
        let (count, op) = ((words[i] >> 16) as usize, words[i] & 0xffff);
        if op == OP_CAPABILITY && words.get(i + 1) == Some(&CAPABILITY_INT64_ATOMICS) {
            return true;
        }
        i += count.max(1);
    }
    false
}

const OP_CAPABILITY: u32 = 17;
const CAPABILITY_INT64_ATOMICS: u32 = 12;

/// The `spirv-val` environment of a module: `opencl1.2`, except for a module with 64-bit
/// atomics, whose `Int64Atomics` (OpenCL's `cl_khr_int64_base_atomics`) no OpenCL environment
/// of `spirv-val` admits: that one is checked under SPIR-V 1.0's own rules.
fn target_env(bytes: &[u8]) -> &'static str {
    if declares_int64_atomics(bytes) {
        "spv1.0"
    } else {
        TARGET_ENV
    }
}

/// `spirv-val --target-env opencl1.2`, then, where installed, a translation to LLVM IR.
fn validate(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let file = dir.join(format!("{}.spv", name.replace(['/', '#', '.'], "_")));
    std::fs::write(&file, bytes).map_err(|e| e.to_string())?;
    run(Command::new(SPIRV_VAL)
        .args(["--target-env", target_env(bytes)])
        .arg(&file))?;
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
    let mut int64_atomics = Vec::new();
    for (name, source) in &kernels {
        let module = parse_wgsl(source).expect("parsed before");
        match module.to_spirv_kernel(None) {
            Ok(k) => {
                let bytes = k.to_bytes();
                if let Some(d) = &dump {
                    let file = format!("{}.spv", name.replace(['/', '#', '.'], "_"));
                    let _ = std::fs::create_dir_all(d).and_then(|()| std::fs::write(d.join(file), &bytes));
                }
                if declares_int64_atomics(&bytes) {
                    int64_atomics.push(name.clone());
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
    if !int64_atomics.is_empty() {
        println!(
            "with Int64Atomics, so validated with --target-env spv1.0: {}",
            int64_atomics.join(", ")
        );
    }
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

/// (file name, WGSL) of the kernels written to reach every mapping of the writer
/// (tests/spirv_kernel/*.wgsl).
fn mapping_kernels() -> Vec<(String, String)> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spirv_kernel");
    let mut files: Vec<_> = std::fs::read_dir(&here)
        .expect("tests/spirv_kernel")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|path| {
            (
                path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                std::fs::read_to_string(path).expect("read"),
            )
        })
        .collect()
}

/// Kernels written to reach every mapping of the writer: each must be written and
/// validate.
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
    let kernels = mapping_kernels();
    assert!(kernels.len() >= 4);
    let dir = std::env::temp_dir().join(format!("xhal-spirv-mappings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut failures = Vec::new();
    for (name, source) in &kernels {
        let result = parse_wgsl(source)
            .map_err(|e| e.with_file_name(name).to_string())
            .and_then(|m| m.to_spirv_kernel(None).map_err(|e| e.with_file_name(name).to_string()))
            .and_then(|k| {
                let bytes = k.to_bytes();
                if let Some(d) = std::env::var_os("XHAL_SPIRV_KERNEL_DUMP").map(PathBuf::from) {
                    let _ = std::fs::create_dir_all(&d)
                        .and_then(|()| std::fs::write(d.join(format!("{name}.spv")), &bytes));
                }
                validate(&dir, name, &bytes)
            });
        if let Err(e) = result {
            failures.push(format!("{name}:\n{e}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Whether the first OpenCL device takes SPIR 1.2 bitcode (`cl_khr_spir`, as PoCL built with
/// SPIR support does), asked through `clinfo`.
fn opencl_takes_spir() -> bool {
    Command::new("clinfo")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("cl_khr_spir"))
}

/// Builds `tests/spirv_kernel/differential.c` into `dir`; `None` (having said why) where gcc
/// or the OpenCL headers are missing.
fn build_harness(dir: &Path) -> Option<PathBuf> {
    let harness = dir.join("differential");
    let compiled = Command::new("gcc")
        .args(["-std=c11", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&harness)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spirv_kernel/differential.c"))
        .arg("-l:libOpenCL.so.1")
        .output();
    match compiled {
        Ok(o) if o.status.success() => Some(harness),
        Ok(o) => {
            println!(
                "skipped: the OpenCL harness does not build here:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            println!("skipped: gcc not found ({e})");
            None
        }
    }
}

/// The translator, where Kernel SPIR-V can run on the OpenCL device through it (SPIR 1.2
/// bitcode); `None`, having said what is missing, otherwise.
fn spir_translator() -> Option<&'static str> {
    let Some(translator) = llvm_spirv() else {
        println!("skipped: llvm-spirv not found (apt install llvm-spirv-15)");
        return None;
    };
    if !opencl_takes_spir() {
        let clinfo = Command::new("clinfo").arg("--version").output().is_ok();
        if clinfo {
            println!("skipped: no OpenCL device with cl_khr_spir (clinfo)");
        } else {
            println!(
                "skipped: clinfo not found (apt install clinfo), which tells whether the OpenCL device takes SPIR"
            );
        }
        return None;
    }
    Some(translator)
}

/// The pack family over edge cases (`tests/spirv_kernel/packing.wgsl`), run on the OpenCL
/// device from the Kernel SPIR-V and from the OpenCL C: both must write exactly the words of
/// `tests/spirv_kernel/packing.expected`, which the CPU interpreter writes (the cpu backend's
/// `the_pack_family_on_edge_cases_writes_the_expected_words` checks that side).
#[test]
fn the_pack_family_writes_the_interpreters_words() {
    let Some(translator) = spir_translator() else {
        return;
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spirv_kernel");
    let source = std::fs::read_to_string(here.join("packing.wgsl")).expect("packing.wgsl");
    let expected: Vec<u32> = std::fs::read_to_string(here.join("packing.expected"))
        .expect("packing.expected")
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(|word| u32::from_str_radix(word, 16).expect("a hex word"))
        .collect();
    let dir = std::env::temp_dir().join(format!("xhal-spirv-packing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let Some(harness) = build_harness(&dir) else {
        return;
    };
    let module = parse_wgsl(&source).expect("parses");
    let spirv = module.to_spirv_kernel(None).expect("Kernel SPIR-V");
    let c = module.to_c(xhal_kernel::Dialect::OpenclC, None).expect("OpenCL C");
    let (cl, spv, bc) = (dir.join("packing.cl"), dir.join("packing.spv"), dir.join("packing.bc"));
    std::fs::write(&cl, format!("#pragma OPENCL FP_CONTRACT OFF\n{}", c.text)).expect("write");
    std::fs::write(&spv, spirv.to_bytes()).expect("write");
    run(Command::new(SPIRV_VAL).args(["--target-env", TARGET_ENV]).arg(&spv)).expect("spirv-val");
    run(Command::new(translator)
        .args(["-r", "--spirv-target-env=CL1.2"])
        .arg(&spv)
        .arg("-o")
        .arg(&bc))
    .expect("llvm-spirv -r");
    let ep = &spirv.entry_points[0];
    let output = Command::new(&harness)
        .arg(&cl)
        .arg(&bc)
        .arg(&ep.symbol)
        .args(["1", "0"])
        .arg(u8::from(ep.buffer_lengths).to_string())
        .args(ep.workgroup_size.map(|w| w.to_string()))
        .arg(&dir)
        .arg("0")
        .arg(if reads_its_workgroups_place(module.naga_module(), &ep.name) {
            "2"
        } else {
            "1"
        })
        .output()
        .expect("run the harness");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for (side, name) in [('s', "Kernel SPIR-V"), ('c', "OpenCL C")] {
        let bytes = std::fs::read(dir.join(format!("{side}0.bin"))).expect("output");
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .take(expected.len())
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(words.len(), expected.len());
        let wrong: Vec<String> = words
            .iter()
            .zip(&expected)
            .enumerate()
            .filter(|(_, (got, want))| got != want)
            .take(10)
            .map(|(i, (got, want))| format!("invocation {}, word {}: 0x{got:08x}, not 0x{want:08x}", i / 28, i % 28))
            .collect();
        assert!(
            wrong.is_empty(),
            "{name} on PoCL differs from the interpreter:\n{}",
            wrong.join("\n")
        );
    }
    println!(
        "{} words from Kernel SPIR-V and from OpenCL C, as the interpreter writes them",
        expected.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs every repository kernel twice on the OpenCL device, built from the OpenCL C dialect
/// and from the Kernel SPIR-V (translated to SPIR 1.2 bitcode by `llvm-spirv -r`, since the
/// PoCL here takes SPIR but not IL), with the same arguments through the same parameter ABI,
/// and compares every buffer: the two translations must compute the same bytes.
///
/// Needs gcc, the OpenCL headers and loader, a device with `cl_khr_spir` and `llvm-spirv`;
/// without them it says what is missing and passes (it is an extra check beyond
/// `spirv-val`).
#[test]
fn kernel_spirv_computes_what_opencl_c_computes() {
    let Some(translator) = spir_translator() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("xhal-spirv-differential-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let Some(harness) = build_harness(&dir) else {
        return;
    };
    let mut failures = Vec::new();
    let mut same = 0;
    // Repository kernels get small integers (some index by their data); the mapping kernels,
    // which index only by invocation id or clamp, get floats as well.
    let mut all: Vec<(String, String, u8)> = kernels().into_iter().map(|(n, s)| (n, s, 0)).collect();
    for (n, s) in mapping_kernels() {
        all.push((n.clone(), s.clone(), 0));
        all.push((format!("{n} (floats)"), s, 1));
    }
    for (name, source, pattern) in all {
        let module = parse_wgsl(&source).expect("parsed before");
        let (Ok(spirv), Ok(c)) = (
            module.to_spirv_kernel(None),
            module.to_c(xhal_kernel::Dialect::OpenclC, None),
        ) else {
            continue;
        };
        let stem = name.replace(['/', '#', '.', ' ', '(', ')'], "_");
        let cl = dir.join(format!("{stem}.cl"));
        let spv = dir.join(format!("{stem}.spv"));
        let bc = dir.join(format!("{stem}.bc"));
        // OpenCL C may contract `a * b + c` into one rounding (FP_CONTRACT is on by default
        // there); SPIR-V from this writer asks for no contraction. WGSL allows either; off, so
        // that the bits can be compared.
        std::fs::write(&cl, format!("#pragma OPENCL FP_CONTRACT OFF\n{}", c.text)).expect("write");
        std::fs::write(&spv, spirv.to_bytes()).expect("write");
        if let Err(e) = run(Command::new(translator)
            .args(["-r", "--spirv-target-env=CL1.2"])
            .arg(&spv)
            .arg("-o")
            .arg(&bc))
        {
            failures.push(format!("{name}: {translator} -r: {e}"));
            continue;
        }
        for ep in &spirv.entry_points {
            let info = module.entry_point(&ep.name).expect("reflected");
            let out = dir.join(format!("{stem}-{}", ep.symbol));
            std::fs::create_dir_all(&out).expect("out dir");
            let [wx, wy, wz] = ep.workgroup_size;
            let groups = if reads_its_workgroups_place(module.naga_module(), &ep.name) {
                2
            } else {
                1
            };
            let launch = |out: &Path| {
                Command::new(&harness)
                    .arg(&cl)
                    .arg(&bc)
                    .arg(&ep.symbol)
                    .arg(ep.buffers.to_string())
                    .arg(info.scalar_block_size().to_string())
                    .arg(u8::from(ep.buffer_lengths).to_string())
                    .args([wx, wy, wz].map(|w| w.to_string()))
                    .arg(out)
                    .arg(pattern.to_string())
                    .arg(groups.to_string())
                    .output()
                    .expect("run the harness")
            };
            let output = launch(&out);
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("OpenCL C: clCreateKernel failed: OpenCL error -46") {
                // The OpenCL C build has no kernel of that name: a kernel named after an
                // OpenCL C built-in (`step`) becomes an overload of it there. Nothing to
                // compare against.
                println!(
                    "not compared: {name} `{}`: OpenCL C has no kernel `{}`",
                    ep.name, ep.symbol
                );
                continue;
            }
            if !output.status.success() {
                failures.push(format!(
                    "{name} `{}`: {}{}",
                    ep.name,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
                continue;
            }
            match compare_buffers(module.naga_module(), (&out, 'c'), (&out, 's'), ep.buffers) {
                Ok(()) => same += 1,
                Err(e) => {
                    // A kernel whose result depends on the order of its invocations (atomic
                    // counters handed out as indices) may differ from run to run: run both
                    // builds again and compare each with itself.
                    let again = dir.join(format!("{stem}-{}-again", ep.symbol));
                    std::fs::create_dir_all(&again).expect("out dir");
                    let rerun = launch(&again).status.success();
                    let naga = module.naga_module();
                    let c_varies = rerun && compare_buffers(naga, (&out, 'c'), (&again, 'c'), ep.buffers).is_err();
                    let s_varies = rerun && compare_buffers(naga, (&out, 's'), (&again, 's'), ep.buffers).is_err();
                    if c_varies {
                        println!("not compared: {name} `{}`: its results vary from run to run", ep.name);
                    } else if s_varies && compare_buffers(naga, (&again, 'c'), (&again, 's'), ep.buffers).is_ok() {
                        // The OpenCL C build is steady and the SPIR-V build agreed with it on
                        // the rerun: the first difference was the driver's, not the translation's.
                        println!(
                            "same bytes on a rerun: {name} `{}` (the first run of the Kernel SPIR-V build varied: {e})",
                            ep.name
                        );
                        same += 1;
                    } else if source.contains("atomic") && same_values(&out, ep.buffers) {
                        // Values handed out by atomics (`before[i] = atomicSub(&n, 1)`) land
                        // in an order each build schedules its own way: the same values,
                        // permuted.
                        println!(
                            "same values in another order: {name} `{}` (atomics hand them out)",
                            ep.name
                        );
                        same += 1;
                    } else if source.contains("atomicExchange") {
                        // The last exchange wins: which invocation that is depends on how each
                        // build schedules them (one rerun of one build may not show it).
                        println!(
                            "not compared: {name} `{}`: the last atomicExchange depends on the schedule ({e})",
                            ep.name
                        );
                    } else {
                        failures.push(format!("{name} `{}`: {e}", ep.name));
                    }
                }
            }
        }
    }
    println!("{same} entry points computed the same bytes from OpenCL C and from Kernel SPIR-V");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether the entry point reads a built-in that differs between workgroups (its workgroup
/// id, its global invocation id or the number of workgroups). One that does not computes the
/// same cells in every workgroup, so two workgroups of it race: workloads#35's `diffuse`,
/// launched twice over one rod, gave whichever result the driver's schedule made, and both
/// builds varied from run to run under load.
fn reads_its_workgroups_place(module: &xhal_kernel::naga::Module, entry_point: &str) -> bool {
    use xhal_kernel::naga::{Binding, BuiltIn, TypeInner};
    let placed = |binding: &Option<Binding>| {
        matches!(
            binding,
            Some(Binding::BuiltIn(
                BuiltIn::WorkGroupId | BuiltIn::GlobalInvocationId | BuiltIn::NumWorkGroups
            ))
        )
    };
    let Some(ep) = module.entry_points.iter().find(|ep| ep.name == entry_point) else {
        return true;
    };
    ep.function.arguments.iter().any(|argument| {
        placed(&argument.binding)
            || match &module.types[argument.ty].inner {
                TypeInner::Struct { members, .. } => members.iter().any(|member| placed(&member.binding)),
                _ => false,
            }
    })
}

/// Whether each buffer holds the same 4-byte words after both builds, in any order.
fn same_values(dir: &Path, buffers: u32) -> bool {
    (0..buffers).all(|b| {
        let words = |side: char| {
            let bytes = std::fs::read(dir.join(format!("{side}{b}.bin"))).unwrap_or_default();
            let mut words: Vec<u32> = bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            words.sort_unstable();
            words
        };
        words('c') == words('s')
    })
}

/// Marks the bytes of a value of type `ty` at `offset` that hold data (not padding).
fn mark(
    m: &xhal_kernel::naga::Module,
    ty: xhal_kernel::naga::Handle<xhal_kernel::naga::Type>,
    offset: usize,
    mask: &mut [bool],
) {
    use xhal_kernel::naga::{ArraySize, TypeInner};
    let mut set = |at: usize, n: usize| {
        for byte in mask.iter_mut().skip(at).take(n) {
            *byte = true;
        }
    };
    match &m.types[ty].inner {
        TypeInner::Scalar(s) | TypeInner::Atomic(s) => set(offset, usize::from(s.width)),
        TypeInner::Vector { size, scalar } => set(offset, *size as usize * usize::from(scalar.width)),
        TypeInner::Matrix { columns, rows, scalar } => {
            let w = usize::from(scalar.width);
            let stride = if *rows as usize == 2 { 2 * w } else { 4 * w };
            for c in 0..*columns as usize {
                set(offset + c * stride, *rows as usize * w);
            }
        }
        TypeInner::Array { base, size, stride } => {
            let stride = *stride as usize;
            let count = match size {
                ArraySize::Constant(n) => n.get() as usize,
                _ => mask.len().saturating_sub(offset) / stride.max(1),
            };
            for i in 0..count {
                mark(m, *base, offset + i * stride, mask);
            }
        }
        TypeInner::Struct { members, .. } => {
            for member in members {
                mark(m, member.ty, offset + member.offset as usize, mask);
            }
        }
        _ => {}
    }
}

/// Compares what the OpenCL C build left in each buffer (in `first`) with what the Kernel
/// SPIR-V build left (in `second`; or, given a second run's directory, what the OpenCL C
/// build left there), byte by byte where the buffer's type holds data (padding may differ),
/// taking any two f32 NaNs as equal.
fn build_name(build: char) -> &'static str {
    if build == 'c' {
        "OpenCL C"
    } else {
        "Kernel SPIR-V"
    }
}

/// Compares the buffers one build wrote (`'c'`: OpenCL C, `'s'`: Kernel SPIR-V) in one folder
/// with those of a build in another (or the same) folder.
fn compare_buffers(
    m: &xhal_kernel::naga::Module,
    (first, first_build): (&Path, char),
    (second, second_build): (&Path, char),
    buffers: u32,
) -> Result<(), String> {
    for b in 0..buffers {
        let c = std::fs::read(first.join(format!("{first_build}{b}.bin"))).map_err(|e| e.to_string())?;
        let s = std::fs::read(second.join(format!("{second_build}{b}.bin"))).map_err(|e| e.to_string())?;
        let var = m
            .global_variables
            .iter()
            .find(|(_, v)| v.binding.as_ref().is_some_and(|r| r.group == 0 && r.binding == b))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("no binding {b}"))?;
        let mut mask = vec![false; c.len()];
        mark(m, var.ty, 0, &mut mask);
        for word in (0..c.len().min(s.len())).step_by(4) {
            let end = (word + 4).min(c.len());
            let differs = (word..end).any(|i| mask[i] && c[i] != s[i]);
            if !differs {
                continue;
            }
            let x = u32::from_le_bytes(c[word..word + 4].try_into().unwrap_or([0; 4]));
            let y = u32::from_le_bytes(s[word..word + 4].try_into().unwrap_or([0; 4]));
            if f32::from_bits(x).is_nan() && f32::from_bits(y).is_nan() {
                continue;
            }
            return Err(format!(
                "buffer {b} (`{}`), byte {word}: {} wrote 0x{x:08x}, {} wrote 0x{y:08x}",
                var.name.as_deref().unwrap_or("?"),
                build_name(first_build),
                build_name(second_build)
            ));
        }
    }
    Ok(())
}

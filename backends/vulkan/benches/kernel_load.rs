//! How long a kernel takes to load through xhal-vulkan against xhal-wgpu on the same Vulkan
//! driver (here Mesa's lavapipe), measured side by side in one run.
//!
//! "Load" is everything between WGSL source and a finished first dispatch: `load_wgsl`, the
//! kernel's pipeline, one launch of one workgroup and its synchronize. The first dispatch is
//! part of it because llvmpipe compiles a pipeline's machine code lazily, on its first
//! dispatch, and that compile is most of the cost. Mesa's on-disk shader cache is switched off
//! (`MESA_SHADER_CACHE_DISABLE`) before any Vulkan call, so every load compiles from scratch:
//! with the cache on, a second run measures the cache, not the translation.
//!
//! The kernels are those of `examples/kernels/` and of `benches/kernels/` (kernels in the
//! style people write: a 64x64 transpose through a 16 KiB tile, a register-tiled matmul, a
//! softmax with workgroup reductions). Each kernel is timed in rounds that alternate which
//! side goes first (`xhal_bench_report::paired`); the table gives medians and the median of
//! the per-round ratios vulkan / wgpu, and is written to
//! `target/criterion/xhal-vulkan-load-ratios.md`.
//!
//! Run with `cargo build --release -p xhal-wgpu && cargo bench -p xhal-vulkan --bench
//! kernel_load`. xhal-vulkan is linked in; xhal-wgpu is loaded as a plugin, from
//! `XHAL_LOAD_BENCH_WGPU_PLUGIN` or else `target/release/libxhal_wgpu.so`, since one backend
//! never depends on another. `XHAL_LOAD_BENCH_VULKAN_PLUGIN` measures a vulkan plugin file
//! instead of the linked backend (an older build, say), and `XHAL_LOAD_BENCH_ROUNDS` sets the
//! number of rounds (default 9).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use xhal_bench_report::{duration_text, paired, publish, target_dir};
use xhal_core::backend::Backend;
use xhal_core::{Device, Launch, Runtime};
use xhal_vulkan::{VulkanBackend, VulkanDriver};

/// The most a load through xhal-vulkan may take, as a multiple of the same load through
/// xhal-wgpu on the same driver.
const TARGET_RATIO: f64 = 1.5;
/// Elements of each buffer argument: enough for every kernel's indices at the sizes below.
const BUFFER_WORDS: usize = 1 << 18;
/// Every 32-bit word of the scalar block (`n`, `m`, `k`, `cols`...): small sizes that keep
/// the first dispatch short and every index inside [`BUFFER_WORDS`].
const SCALAR_WORD: u32 = 64;

struct Kernel {
    name: String,
    source: String,
}

fn kernels() -> Vec<Kernel> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut kernels = Vec::new();
    for folder in [
        manifest.join("../../examples/kernels"),
        manifest.join("benches/kernels"),
    ] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&folder)
            .unwrap_or_else(|error| panic!("cannot list {}: {error}", folder.display()))
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|extension| extension == "wgsl"))
            .collect();
        paths.sort();
        for path in paths {
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
            let name = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            kernels.push(Kernel { name, source });
        }
    }
    kernels
}

/// Loads `source` on `device`, makes its (only) kernel and runs one workgroup of it to the end.
fn load_and_run(device: &Device, source: &str) {
    let module = device.load_wgsl(source).unwrap();
    let entry = &module.entry_points().expect("a WGSL module is reflected")[0];
    let buffers: Vec<_> = (0..entry.buffers.len())
        .map(|_| device.alloc::<u32>(BUFFER_WORDS).unwrap())
        .collect();
    let kernel = module.kernel(&entry.name).unwrap();
    let mut launch = Launch::new(&kernel).workgroups(1, 1, 1);
    for buffer in &buffers {
        launch = launch.buffer(buffer);
    }
    // One scalar per member of the block, as the launch checks; the kernels here have 32-bit
    // members only.
    for member in entry.scalars.iter().flat_map(|block| &block.members) {
        let bytes: Vec<u8> = (0..member.size / 4).flat_map(|_| SCALAR_WORD.to_le_bytes()).collect();
        launch = launch.scalar_bytes(&bytes, 4);
    }
    let stream = device.create_stream().unwrap();
    stream.launch(&launch).unwrap();
    stream.synchronize().unwrap();
}

fn main() {
    // Before anything opens Vulkan, so that lavapipe sees it: every load compiles afresh.
    std::env::set_var("MESA_SHADER_CACHE_DISABLE", "true");
    let wgpu_plugin = std::env::var_os("XHAL_LOAD_BENCH_WGPU_PLUGIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("release/libxhal_wgpu.so"));
    if !wgpu_plugin.exists() {
        eprintln!(
            "no wgpu plugin at {} (cargo build --release -p xhal-wgpu, or set XHAL_LOAD_BENCH_WGPU_PLUGIN); nothing to compare against",
            wgpu_plugin.display()
        );
        return;
    }
    let mut builder = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .plugin(&wgpu_plugin);
    let vulkan_source = match std::env::var_os("XHAL_LOAD_BENCH_VULKAN_PLUGIN") {
        Some(path) => {
            builder = builder.plugin(PathBuf::from(&path));
            format!("plugin {}", Path::new(&path).display())
        }
        None => {
            let backend = VulkanBackend::new(VulkanDriver::from_env());
            if let Err(error) = backend.device_count() {
                eprintln!("no Vulkan device, nothing to measure: {error}");
                return;
            }
            builder = builder.backend(Arc::new(backend));
            "linked into this benchmark".to_string()
        }
    };
    let runtime = builder.build().unwrap();
    let vulkan = runtime.open("vulkan:0").unwrap();
    let wgpu = runtime.open("wgpu:0").unwrap();
    let rounds = std::env::var("XHAL_LOAD_BENCH_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(9);
    println!("vulkan:0 {} ({vulkan_source})", vulkan.info().name);
    println!("wgpu:0   {}", wgpu.info().name);

    let mut rows = Vec::new();
    let mut met = true;
    for kernel in kernels() {
        let result = paired(
            rounds,
            1,
            || load_and_run(&vulkan, &kernel.source),
            || load_and_run(&wgpu, &kernel.source),
        );
        let verdict = if result.ratio <= TARGET_RATIO {
            "met"
        } else {
            met = false;
            "NOT met"
        };
        let row = format!(
            "| {} | {} | {} | {} | ≤ {TARGET_RATIO} — {verdict} |",
            kernel.name,
            duration_text(result.ours_ns),
            duration_text(result.baseline_ns),
            result.ratio_text()
        );
        println!("{row}");
        rows.push(row);
    }
    publish(
        "xhal-vulkan-load-ratios.md",
        &[
            format!(
                "Kernel load (load_wgsl, pipeline, first dispatch of one workgroup, synchronize), Mesa shader cache off; {rounds} paired rounds"
            ),
            format!("vulkan:0 {} ({vulkan_source}); wgpu:0 {}", vulkan.info().name, wgpu.info().name),
        ],
        &[
            "kernel",
            "vulkan:0",
            "wgpu:0",
            "ratio vulkan / wgpu, median of paired rounds (quartiles)",
            "target",
        ],
        &rows,
    );
    if !met {
        println!("\nsome kernels load more than {TARGET_RATIO}x slower through xhal-vulkan than through xhal-wgpu");
    }
}

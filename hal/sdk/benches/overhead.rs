//! What the plugin boundary and the CPU backend cost, each against its baseline measured in
//! the same run:
//!
//! - a trivial call (event query) through the loaded CPU plugin against the same backend
//!   linked statically, at the backend-trait level and through the application API;
//! - CPU-backend copy bandwidth (host to device, device to host, device to device, 64 MiB)
//!   against `copy_from_slice` of the same size;
//! - stream enqueue throughput.
//!
//! Run with `make bench` (the plugin must be built: `make build`). After criterion's own
//! report, the ratios are printed and written to `target/criterion/xhal-ratios.md`.

use xhal_bench_report as report;

use criterion::{BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use xhal::backend::Backend;
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver};
use xhal::plugin::load_plugin;
use xhal::Runtime;

const COPY_BYTES: usize = 64 << 20;
const ENQUEUE_BATCH: usize = 10_000;

fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps");
    let path = dir.join("libxhal_cpu.so");
    assert!(path.is_file(), "{} is missing: run `make bench`", path.display());
    // `cargo bench` rebuilds the backend linked into this binary but not its plugin library;
    // comparing a fresh static backend with a stale plugin would measure two different codes.
    let modified = |file: &Path| std::fs::metadata(file).and_then(|meta| meta.modified()).ok();
    let newest_static = std::fs::read_dir(dir.join("deps"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|file| {
            let name = file.file_name().and_then(|name| name.to_str()).unwrap_or("");
            name.starts_with("libxhal_cpu-") && name.ends_with(".rlib")
        })
        .filter_map(|file| modified(&file))
        .max();
    if let (Some(plugin), Some(linked)) = (modified(&path), newest_static) {
        assert!(
            plugin >= linked,
            "{} is older than the CPU backend linked into this benchmark: run `make bench`",
            path.display()
        );
    }
    path
}

fn config() -> CpuConfig {
    CpuConfig {
        devices: 1,
        memory_per_device: 1 << 30,
    }
}

/// The CPU backend linked into this binary.
fn static_runtime() -> Runtime {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .backend(Arc::new(CpuBackend::new(CpuDriver::with_config(config()))))
        .device_selector(None)
        .build()
        .expect("runtime over the static CPU backend")
}

/// The same backend, loaded from its plugin library through the C ABI.
fn plugin_runtime() -> Runtime {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .plugin(plugin_path())
        .device_selector(None)
        .build()
        .expect("runtime over the CPU plugin")
}

fn bench_trivial_call(c: &mut Criterion) {
    let mut group = c.benchmark_group("event_query");
    group.measurement_time(Duration::from_secs(3));
    let plugin = load_plugin(&plugin_path()).expect("cpu plugin loads");
    let backends: [(&str, Arc<dyn Backend>); 2] = [
        ("static", Arc::new(CpuBackend::new(CpuDriver::with_config(config())))),
        ("plugin", plugin.backend.clone()),
    ];
    for (name, backend) in &backends {
        let device = backend.device_open(0).expect("device");
        let event = backend.event_create(device, false).expect("event");
        group.bench_function(BenchmarkId::new("backend", name), |b| {
            b.iter(|| black_box(backend.event_query(black_box(event))))
        });
    }
    // The same through the application API, as an application pays it.
    let static_runtime = static_runtime();
    let plugin_runtime = plugin_runtime();
    for (name, runtime) in [("static", &static_runtime), ("plugin", &plugin_runtime)] {
        let device = runtime.open("cpu:0").expect("device");
        let event = device.create_event().expect("event");
        group.bench_function(BenchmarkId::new("api", name), |b| b.iter(|| black_box(event.query())));
    }
    group.finish();
}

fn bench_bandwidth(c: &mut Criterion) {
    let mut group = c.benchmark_group("copy_64MiB");
    group.sample_size(20).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Bytes(COPY_BYTES as u64));
    let host: Vec<u8> = (0..COPY_BYTES).map(|i| (i * 31) as u8).collect();
    let mut host_out = vec![0u8; COPY_BYTES];
    group.bench_function("baseline_copy_from_slice", |b| {
        b.iter(|| {
            host_out.copy_from_slice(black_box(&host));
            black_box(&host_out);
        })
    });
    let runtime = static_runtime();
    let device = runtime.open("cpu:0").expect("device");
    let stream = device.create_stream().expect("stream");
    let source = device.alloc::<u8>(COPY_BYTES).expect("buffer");
    let destination = device.alloc::<u8>(COPY_BYTES).expect("buffer");
    stream.write(&source, &host).expect("warm-up write");
    stream.write(&destination, &host).expect("warm-up write");
    group.bench_function("host_to_device", |b| {
        b.iter(|| stream.write(&source, black_box(&host)).expect("write"))
    });
    group.bench_function("device_to_host", |b| {
        b.iter(|| stream.read(&source, black_box(&mut host_out)).expect("read"))
    });
    group.bench_function("device_to_device", |b| {
        b.iter(|| {
            stream.copy(&source, &destination).expect("copy");
            stream.synchronize().expect("sync");
        })
    });
    group.finish();
}

fn bench_enqueue(c: &mut Criterion) {
    let mut group = c.benchmark_group("enqueue");
    group.sample_size(20).measurement_time(Duration::from_secs(4));
    group.throughput(Throughput::Elements(ENQUEUE_BATCH as u64));
    let plugin_runtime = plugin_runtime();
    let static_runtime = static_runtime();
    for (name, runtime) in [("static", &static_runtime), ("plugin", &plugin_runtime)] {
        let device = runtime.open("cpu:0").expect("device");
        let stream = device.create_stream().expect("stream");
        let buffer = device.alloc::<u32>(1024).expect("buffer");
        // Enqueue alone: the clock stops before the stream drains.
        group.bench_function(BenchmarkId::new("enqueue_only", name), |b| {
            b.iter_custom(|iterations| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iterations {
                    let started = std::time::Instant::now();
                    for i in 0..ENQUEUE_BATCH {
                        stream
                            .fill(buffer.slice(i % 1024..i % 1024 + 1), i as u32)
                            .expect("fill");
                    }
                    elapsed += started.elapsed();
                    stream.synchronize().expect("sync");
                }
                elapsed
            })
        });
        group.bench_function(BenchmarkId::new("enqueue_and_execute", name), |b| {
            b.iter(|| {
                for i in 0..ENQUEUE_BATCH {
                    stream
                        .fill(buffer.slice(i % 1024..i % 1024 + 1), i as u32)
                        .expect("fill");
                }
                stream.synchronize().expect("sync");
            })
        });
    }
    group.finish();
}

fn report_ratios() {
    let mut lines = Vec::new();
    for level in ["backend", "api"] {
        if let (Some(plugin), Some(fixed)) = (
            report::criterion_estimate_ns("event_query", &format!("{level}/plugin")),
            report::criterion_estimate_ns("event_query", &format!("{level}/static")),
        ) {
            lines.push(format!(
                "| event query, {level} level: plugin vs static | {plugin:.1} ns | {fixed:.1} ns | {:.2}x ({:+.1} ns) |",
                plugin / fixed,
                plugin - fixed
            ));
        }
    }
    if let Some(baseline) = report::criterion_estimate_ns("copy_64MiB", "baseline_copy_from_slice") {
        for id in ["host_to_device", "device_to_host", "device_to_device"] {
            if let Some(measured) = report::criterion_estimate_ns("copy_64MiB", id) {
                let gbps = |ns: f64| COPY_BYTES as f64 / ns;
                lines.push(format!(
                    "| 64 MiB {id} vs copy_from_slice | {:.2} GB/s | {:.2} GB/s | {:.2}x |",
                    gbps(measured),
                    gbps(baseline),
                    baseline / measured
                ));
            }
        }
    }
    for (id, what) in [
        ("enqueue_only", "enqueue only"),
        ("enqueue_and_execute", "enqueue and execute"),
    ] {
        for name in ["static", "plugin"] {
            if let Some(batch) = report::criterion_estimate_ns("enqueue", &format!("{id}/{name}")) {
                let per_op = batch / ENQUEUE_BATCH as f64;
                lines.push(format!(
                    "| stream throughput, 4-byte fills, {what} ({name}) | {:.2} M ops/s | | {per_op:.0} ns/op |",
                    1e3 / per_op
                ));
            }
        }
    }
    report::publish(
        "xhal-ratios.md",
        &[],
        &["measurement", "xhal", "baseline", "ratio"],
        &lines,
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_trivial_call(&mut criterion);
    bench_bandwidth(&mut criterion);
    bench_enqueue(&mut criterion);
    criterion.final_summary();
    report_ratios();
}

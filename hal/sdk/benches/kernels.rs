//! WGSL kernels on the CPU reference backend against native single-threaded Rust loops doing
//! the same work, measured in the same run: saxpy over 16M elements, a tiled 512×512 f32
//! matmul, and a reduction over 16M elements. Also the cost of translating WGSL to SPIR-V
//! and of a translation-cache hit.
//!
//! Run with `make bench`. After criterion's report the ratios are printed and written to
//! `target/criterion/xhal-kernel-ratios.md`.

use xhal_bench_report as report;

use criterion::{Criterion, Throughput};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver};
use xhal::kernel::Target;
use xhal::{Device, Launch, Runtime};

const SAXPY: &str = include_str!("../../../examples/kernels/saxpy.wgsl");
const MATMUL: &str = include_str!("../../../examples/kernels/matmul.wgsl");
const REDUCE: &str = include_str!("../../../examples/kernels/reduce.wgsl");

const VECTOR_LEN: usize = 16 << 20;
const MATRIX: usize = 512;

fn cpu_device() -> Device {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        // The interpreter: the compiled mode is measured by `xhal bench --cpu-modes`.
        .backend(Arc::new(CpuBackend::new(
            CpuDriver::with_config(CpuConfig {
                devices: 1,
                memory_per_device: 2 << 30,
            })
            .with_kernel_mode(xhal::cpu::KernelMode::Interpret),
        )))
        .device_selector(None)
        .build()
        .expect("runtime over the CPU backend")
        .open("cpu:0")
        .expect("cpu:0")
}

fn bench_saxpy(c: &mut Criterion, device: &Device) {
    let mut group = c.benchmark_group("saxpy_16M");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(VECTOR_LEN as u64));
    let x: Vec<f32> = (0..VECTOR_LEN).map(|i| (i % 1000) as f32).collect();
    let mut y: Vec<f32> = vec![1.0; VECTOR_LEN];
    group.bench_function("native_loop", |b| {
        b.iter(|| {
            for (y, x) in y.iter_mut().zip(&x) {
                *y += 2.0 * x;
            }
            black_box(&y);
        })
    });
    let stream = device.create_stream().expect("stream");
    let x_buffer = device.alloc_from(&stream, &x).expect("x");
    let y_buffer = device.alloc_from(&stream, &y).expect("y");
    let module = device.load_wgsl(SAXPY).expect("saxpy compiles");
    let kernel = module.kernel("saxpy").expect("entry point");
    let launch = Launch::new(&kernel)
        .workgroups_for_invocations(VECTOR_LEN as u64)
        .buffer(&x_buffer)
        .buffer(&y_buffer)
        .scalar(2.0f32)
        .scalar(VECTOR_LEN as u32);
    group.bench_function("cpu_backend", |b| {
        b.iter(|| {
            stream.launch(&launch).expect("launch");
            stream.synchronize().expect("sync");
        })
    });
    group.finish();
}

fn bench_matmul(c: &mut Criterion, device: &Device) {
    let mut group = c.benchmark_group("matmul_512");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements((2 * MATRIX * MATRIX * MATRIX) as u64));
    let a: Vec<f32> = (0..MATRIX * MATRIX).map(|i| (i % 7) as f32).collect();
    let b_matrix: Vec<f32> = (0..MATRIX * MATRIX).map(|i| (i % 5) as f32).collect();
    let mut c_matrix = vec![0f32; MATRIX * MATRIX];
    // The baseline is tiled the same way (16×16), single-threaded.
    group.bench_function("native_loop", |bench| {
        bench.iter(|| {
            c_matrix.fill(0.0);
            for row_tile in (0..MATRIX).step_by(16) {
                for inner_tile in (0..MATRIX).step_by(16) {
                    for row in row_tile..row_tile + 16 {
                        for inner in inner_tile..inner_tile + 16 {
                            let scale = a[row * MATRIX + inner];
                            let b_row = &b_matrix[inner * MATRIX..(inner + 1) * MATRIX];
                            let c_row = &mut c_matrix[row * MATRIX..(row + 1) * MATRIX];
                            for (c, b) in c_row.iter_mut().zip(b_row) {
                                *c += scale * b;
                            }
                        }
                    }
                }
            }
            black_box(&c_matrix);
        })
    });
    let stream = device.create_stream().expect("stream");
    let a_buffer = device.alloc_from(&stream, &a).expect("a");
    let b_buffer = device.alloc_from(&stream, &b_matrix).expect("b");
    let c_buffer = device.alloc::<f32>(MATRIX * MATRIX).expect("c");
    let module = device.load_wgsl(MATMUL).expect("matmul compiles");
    let kernel = module.kernel("matmul").expect("entry point");
    let tiles = (MATRIX / 16) as u32;
    let launch = Launch::new(&kernel)
        .workgroups(tiles, tiles, 1)
        .buffer(&a_buffer)
        .buffer(&b_buffer)
        .buffer(&c_buffer)
        .scalar(MATRIX as u32)
        .scalar(MATRIX as u32)
        .scalar(MATRIX as u32);
    group.bench_function("cpu_backend", |bench| {
        bench.iter(|| {
            stream.launch(&launch).expect("launch");
            stream.synchronize().expect("sync");
        })
    });
    group.finish();
}

fn bench_reduce(c: &mut Criterion, device: &Device) {
    let mut group = c.benchmark_group("reduce_16M");
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    group.throughput(Throughput::Elements(VECTOR_LEN as u64));
    let values: Vec<f32> = (0..VECTOR_LEN).map(|i| (i % 3) as f32).collect();
    group.bench_function("native_loop", |b| b.iter(|| black_box(values.iter().sum::<f32>())));
    let stream = device.create_stream().expect("stream");
    let input = device.alloc_from(&stream, &values).expect("input");
    let module = device.load_wgsl(REDUCE).expect("reduce compiles");
    let kernel = module.kernel("reduce").expect("entry point");
    // The passes a full reduction takes: 16M -> 32K -> 64 -> 1 values.
    let mut buffers = vec![input];
    let mut lengths = vec![VECTOR_LEN];
    while lengths[lengths.len() - 1] > 1 {
        let groups = lengths[lengths.len() - 1].div_ceil(512);
        buffers.push(device.alloc::<f32>(groups).expect("partial sums"));
        lengths.push(groups);
    }
    group.bench_function("cpu_backend", |b| {
        b.iter(|| {
            for pass in 0..buffers.len() - 1 {
                let launch = Launch::new(&kernel)
                    .workgroups_for_invocations((lengths[pass + 1] * 256) as u64)
                    .buffer(&buffers[pass])
                    .buffer(&buffers[pass + 1])
                    .scalar(lengths[pass] as u32);
                stream.launch(&launch).expect("launch");
            }
            stream.synchronize().expect("sync");
        })
    });
    group.finish();
}

fn bench_translation(c: &mut Criterion) {
    let mut group = c.benchmark_group("translate");
    group.bench_function("wgsl_to_spirv_uncached", |b| {
        b.iter(|| {
            let module = xhal::kernel::parse_wgsl(black_box(MATMUL)).expect("parses");
            black_box(module.to_spirv().expect("translates"))
        })
    });
    xhal::kernel::translate(MATMUL, Target::SpirvShader).expect("first translation");
    group.bench_function("cache_hit", |b| {
        b.iter(|| black_box(xhal::kernel::translate(black_box(MATMUL), Target::SpirvShader).expect("hit")))
    });
    group.finish();
}

fn report_ratios() {
    let mut rows = Vec::new();
    for (group, what, target) in [
        ("saxpy_16M", "saxpy, 16M f32", 0.1),
        ("matmul_512", "tiled matmul, 512×512 f32", 0.05),
        ("reduce_16M", "reduction, 16M f32", 0.0),
    ] {
        if let (Some(native), Some(cpu)) = (
            report::criterion_estimate_ns(group, "native_loop"),
            report::criterion_estimate_ns(group, "cpu_backend"),
        ) {
            let goal = if target > 0.0 {
                format!(" (target ≥ {target}x)")
            } else {
                String::new()
            };
            rows.push(format!(
                "| {what}: CPU backend vs native single-threaded loop | {:.2} ms | {:.2} ms | {:.3}x{goal} |",
                cpu / 1e6,
                native / 1e6,
                native / cpu
            ));
        }
    }
    if let (Some(uncached), Some(hit)) = (
        report::criterion_estimate_ns("translate", "wgsl_to_spirv_uncached"),
        report::criterion_estimate_ns("translate", "cache_hit"),
    ) {
        rows.push(format!(
            "| WGSL → SPIR-V (matmul.wgsl): parse, validate, reflect, write vs cache hit | {:.1} µs | {:.2} µs | {:.0}x faster |",
            uncached / 1e3,
            hit / 1e3,
            uncached / hit
        ));
    }
    report::publish(
        "xhal-kernel-ratios.md",
        &[],
        &["measurement", "xhal", "baseline", "ratio"],
        &rows,
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let device = cpu_device();
    bench_saxpy(&mut criterion, &device);
    bench_matmul(&mut criterion, &device);
    bench_reduce(&mut criterion, &device);
    bench_translation(&mut criterion);
    criterion.final_summary();
    report_ratios();
}

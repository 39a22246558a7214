//! What tracing costs on the enqueue path of the CPU backend, measured in one run:
//!
//! - tracing off, in this build;
//! - tracing on (to a file under `target/`), in this build, when it has the `trace` feature;
//! - and, from the file the run without the feature left (`make bench-trace` runs both), the
//!   same enqueue path in a build without the recorder.
//!
//! Each round enqueues `OPERATIONS` 4-byte fills and then synchronizes; the time per
//! operation is the enqueue time only. Rounds alternate off and on; medians are reported.

use std::path::PathBuf;
use std::time::Instant;
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver};
use xhal::{trace, Runtime};

const OPERATIONS: usize = 20_000;
const ROUNDS: usize = 15;

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<bench>")
        .to_path_buf()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[path = "support/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_nanoseconds;

/// Nanoseconds per enqueued fill, enqueue only: (wall time, the calling thread's CPU time).
fn round(stream: &xhal::Stream, buffer: &xhal::Buffer<u32>) -> (f64, f64) {
    let (start, cpu_start) = (Instant::now(), thread_cpu_nanoseconds());
    for index in 0..OPERATIONS {
        stream.fill(buffer.slice(index % 1024..index % 1024 + 1), 7u32).unwrap();
    }
    let (enqueued, cpu) = (start.elapsed(), thread_cpu_nanoseconds() - cpu_start);
    stream.synchronize().unwrap();
    (enqueued.as_nanos() as f64 / OPERATIONS as f64, cpu / OPERATIONS as f64)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let backend = CpuBackend::new(CpuDriver::with_config(CpuConfig {
        devices: 1,
        memory_per_device: 256 << 20,
    }));
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(std::sync::Arc::new(backend))
        .build()
        .unwrap();
    let device = runtime.open("cpu:0").unwrap();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc::<u32>(1024).unwrap();
    let results = target_dir().join("bench-trace");
    std::fs::create_dir_all(&results).unwrap();
    let trace_file = results.join("enqueue-trace.json");

    // Warm up: threads, allocator, page faults.
    round(&stream, &buffer);
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut off_cpu, mut on_cpu) = (Vec::new(), Vec::new());
    let mut dropped = 0;
    for _ in 0..ROUNDS {
        let (wall, cpu) = round(&stream, &buffer);
        off.push(wall);
        off_cpu.push(cpu);
        if trace::built_in() {
            let session = trace::start(&trace_file).unwrap();
            let (wall, cpu) = round(&stream, &buffer);
            on.push(wall);
            on_cpu.push(cpu);
            dropped += session.stop().unwrap().dropped;
        }
    }
    let off = median(off);
    let off_cpu = median(off_cpu);
    let without_feature_file = results.join("without-feature.txt");
    if !trace::built_in() {
        std::fs::write(&without_feature_file, format!("{off}\n")).unwrap();
        println!(
            "trace bench, built WITHOUT the trace feature: enqueue {off:.1} ns per operation (median of {ROUNDS})"
        );
        println!(
            "(written to {}; the run with the feature compares against it)",
            without_feature_file.display()
        );
        return;
    }
    let on = median(on);
    let on_cpu = median(on_cpu);
    // The host span alone, without a stream operation: what the recorder itself costs.
    let session = trace::start(&trace_file).unwrap();
    let start = Instant::now();
    for index in 0..OPERATIONS {
        let _span = trace::span("api", "bench", || vec![("index", index.into())]);
    }
    let span_alone = start.elapsed().as_nanos() as f64 / OPERATIONS as f64;
    session.stop().unwrap();
    println!("trace bench: 4-byte fills on the CPU backend, {OPERATIONS} per round, median of {ROUNDS} rounds");
    println!("  {:<28}{:>12}{:>24}", "", "wall", "calling thread's CPU");
    println!("  {:<28}{off:>9.1} ns{off_cpu:>21.1} ns", "tracing off");
    println!(
        "  {:<28}{on:>9.1} ns{on_cpu:>21.1} ns   ({dropped} records dropped)",
        "tracing on"
    );
    println!(
        "  {:<28}{:>9.1} ns{:>21.1} ns",
        "cost of tracing",
        on - off,
        on_cpu - off_cpu
    );
    println!("  {:<28}{span_alone:>9.1} ns", "one host span alone");
    match std::fs::read_to_string(&without_feature_file) {
        Ok(text) => {
            let without: f64 = text.trim().parse().unwrap();
            println!(
                "  {:<28}{without:>9.1} ns   (tracing off / built without = {:.3})",
                "built without the feature",
                off / without
            );
        }
        Err(_) => println!("  built without the feature   not measured: run `make bench-trace`"),
    }
}

//! The Rust side of the Python package's overhead benchmark (python/benches/overhead.py runs
//! it in the same run and prints both): on the device `XHAL_DEVICE` selects, the launch that
//! the Python benchmark makes (one buffer, one scalar, one workgroup) queued back to back (wall
//! time, and the calling thread's CPU time, which leaves out the device's own threads), and
//! 64 MiB uploaded into a new buffer and downloaded into a new vector. Prints one JSON object.

use std::time::Instant;

use xhal::{Launch, Runtime, Selector};

#[path = "support/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_nanoseconds;

/// The same kernel as python/benches/overhead.py.
const KERNEL: &str = "
var<immediate> n: u32;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn touch(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < n { out[0] = n; }
}
";
const LAUNCHES: usize = 20_000;
const ROUNDS: usize = 7;
const BYTES: usize = 64 << 20;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> xhal::Result<()> {
    let runtime = Runtime::discover()?;
    let (device, _) = runtime.choose(&Selector::from_env()?)?;
    let stream = device.create_stream()?;
    let kernel = device.load_wgsl(KERNEL)?.kernel("touch")?;
    let out = device.alloc::<u32>(1)?;
    let (mut launch_ns, mut launch_cpu_ns) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stream.synchronize()?;
        let (start, cpu) = (Instant::now(), thread_cpu_nanoseconds());
        for _ in 0..LAUNCHES {
            stream.launch(&Launch::new(&kernel).workgroups(1, 1, 1).buffer(&out).scalar(1u32))?;
        }
        launch_cpu_ns.push((thread_cpu_nanoseconds() - cpu) / LAUNCHES as f64);
        launch_ns.push(start.elapsed().as_nanos() as f64 / LAUNCHES as f64);
        stream.synchronize()?;
    }
    let host: Vec<u8> = (0..BYTES).map(|i| i as u8).collect();
    let (mut upload, mut download) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        stream.synchronize()?;
        let start = Instant::now();
        let buffer = device.alloc_from(&stream, &host)?;
        upload.push(BYTES as f64 / start.elapsed().as_secs_f64() / 1e9);
        let start = Instant::now();
        let back = stream.read_to_vec(&buffer)?;
        download.push(BYTES as f64 / start.elapsed().as_secs_f64() / 1e9);
        if back.len() != BYTES {
            return Err(xhal::Error::new(
                xhal::ErrorKind::Internal,
                "the download came back short",
            ));
        }
    }
    println!(
        "{{\"device\": \"{}\", \"launch_enqueue_us\": {:.4}, \"launch_cpu_us\": {:.4}, \"upload_gb_s\": {:.3}, \"download_gb_s\": {:.3}}}",
        device.label(),
        median(launch_ns) / 1000.0,
        median(launch_cpu_ns) / 1000.0,
        median(upload),
        median(download)
    );
    Ok(())
}

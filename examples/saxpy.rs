//! y = a·x + y on the selected device, checked against Rust.
//!
//! ```sh
//! XHAL_DEVICE=cpu cargo run --release -p xhal --example saxpy [ELEMENTS]
//! ```

mod common;

use std::time::Instant;
use xhal::Launch;

const SOURCE: &str = include_str!("kernels/saxpy.wgsl");

fn main() {
    common::run(saxpy);
}

fn saxpy() -> xhal::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1 << 24);
    let (_runtime, device) = common::choose_device()?;
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();

    let stream = device.create_stream()?;
    let x_buffer = device.alloc_from(&stream, &x)?;
    let y_buffer = device.alloc_from(&stream, &y)?;
    let module = device.load_wgsl(SOURCE)?;
    let kernel = module.kernel("saxpy")?;
    let launch = Launch::new(&kernel)
        .workgroups_for_invocations(n as u64)
        .buffer(&x_buffer)
        .buffer(&y_buffer)
        .scalar(a)
        .scalar(n as u32);

    let started = Instant::now();
    stream.launch(&launch)?;
    stream.synchronize()?;
    common::report(
        &format!("saxpy on {n} elements"),
        started.elapsed(),
        (3 * 4 * n) as f64,
        "GB/s",
    );

    let result = stream.read_to_vec(&y_buffer)?;
    let expected: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    common::compare_floats(&result, &expected, 1e-6)
}

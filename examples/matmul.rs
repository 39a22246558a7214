//! A tiled f32 matrix product on the selected device, using workgroup memory and barriers,
//! checked against Rust.
//!
//! ```sh
//! XHAL_DEVICE=cpu cargo run --release -p xhal --example matmul [SIZE]
//! ```

mod common;

use std::time::Instant;
use xhal::Launch;

const SOURCE: &str = include_str!("kernels/matmul.wgsl");
const TILE: usize = 16;

fn main() {
    common::run(matmul);
}

fn matmul() -> xhal::Result<()> {
    let size: usize = std::env::args().nth(1).and_then(|arg| arg.parse().ok()).unwrap_or(512);
    let (m, n, k) = (size, size, size);
    let (_runtime, device) = common::choose_device()?;
    // Small integers keep every product exact in f32, so the check can be strict.
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();

    let stream = device.create_stream()?;
    let a_buffer = device.alloc_from(&stream, &a)?;
    let b_buffer = device.alloc_from(&stream, &b)?;
    let c_buffer = device.alloc::<f32>(m * n)?;
    let module = device.load_wgsl(SOURCE)?;
    let kernel = module.kernel("matmul")?;
    let launch = Launch::new(&kernel)
        .workgroups(n.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1)
        .buffer(&a_buffer)
        .buffer(&b_buffer)
        .buffer(&c_buffer)
        .scalar(m as u32)
        .scalar(n as u32)
        .scalar(k as u32);

    let started = Instant::now();
    stream.launch(&launch)?;
    stream.synchronize()?;
    common::report(
        &format!("matmul {m}x{k} * {k}x{n}"),
        started.elapsed(),
        (2 * m * n * k) as f64,
        "GFLOP/s",
    );

    let result = stream.read_to_vec(&c_buffer)?;
    let mut expected = vec![0f32; m * n];
    for row in 0..m {
        for inner in 0..k {
            let scale = a[row * k + inner];
            for col in 0..n {
                expected[row * n + col] += scale * b[inner * n + col];
            }
        }
    }
    common::compare_floats(&result, &expected, 0.0)
}

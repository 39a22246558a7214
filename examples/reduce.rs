//! A tree reduction with workgroup memory and barriers on the selected device: each pass sums
//! 512 values per workgroup, until one value is left. Checked against Rust.
//!
//! ```sh
//! XHAL_DEVICE=cpu cargo run --release -p xhal --example reduce [ELEMENTS]
//! ```

mod common;

use std::time::Instant;
use xhal::Launch;

const SOURCE: &str = include_str!("kernels/reduce.wgsl");
const PER_WORKGROUP: usize = 512;

fn main() {
    common::run(reduce);
}

fn reduce() -> xhal::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1 << 24);
    let (_runtime, device) = common::choose_device()?;
    // Small integers: every partial sum is exact in f32 (the total stays below 2^24).
    let values: Vec<f32> = (0..n).map(|i| (i % 3) as f32 - 1.0).collect();

    let stream = device.create_stream()?;
    let module = device.load_wgsl(SOURCE)?;
    let kernel = module.kernel("reduce")?;
    let mut input = device.alloc_from(&stream, &values)?;
    let mut remaining = n;
    let started = Instant::now();
    let mut passes = 0;
    while remaining > 1 {
        let groups = remaining.div_ceil(PER_WORKGROUP);
        let output = device.alloc::<f32>(groups)?;
        let launch = Launch::new(&kernel)
            .workgroups_for_invocations((groups * 256) as u64)
            .buffer(&input)
            .buffer(&output)
            .scalar(remaining as u32);
        stream.launch(&launch)?;
        input = output;
        remaining = groups;
        passes += 1;
    }
    stream.synchronize()?;
    common::report(
        &format!("reduce {n} elements in {passes} passes"),
        started.elapsed(),
        (4 * n) as f64,
        "GB/s",
    );

    let total = stream.read_to_vec(&input)?;
    let expected: f32 = values.iter().sum();
    common::compare_floats(&total, &[expected], 0.0)
}

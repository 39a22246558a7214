//! A histogram with storage atomics on the selected device, checked against Rust.
//!
//! ```sh
//! XHAL_DEVICE=cpu cargo run --release -p xhal --example histogram [ELEMENTS]
//! ```

mod common;

use std::time::Instant;
use xhal::Launch;

const SOURCE: &str = include_str!("kernels/histogram.wgsl");
const BINS: usize = 64;

fn main() {
    common::run(histogram);
}

fn histogram() -> xhal::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(1 << 22);
    let (_runtime, device) = common::choose_device()?;
    // A fixed pseudo-random sequence (xorshift), so runs are comparable.
    let mut state = 0x2545_f491_u32;
    let values: Vec<u32> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state % BINS as u32
        })
        .collect();

    let stream = device.create_stream()?;
    let values_buffer = device.alloc_from(&stream, &values)?;
    let counts = device.alloc::<u32>(BINS)?;
    stream.fill(counts.slice(..BINS), 0u32)?;
    let module = device.load_wgsl(SOURCE)?;
    let kernel = module.kernel("histogram")?;
    let launch = Launch::new(&kernel)
        .workgroups_for_invocations(n as u64)
        .buffer(&values_buffer)
        .buffer(&counts)
        .scalar(n as u32)
        .scalar(BINS as u32);

    let started = Instant::now();
    stream.launch(&launch)?;
    stream.synchronize()?;
    common::report(
        &format!("histogram of {n} values"),
        started.elapsed(),
        (4 * n) as f64,
        "GB/s",
    );

    let result = stream.read_to_vec(&counts)?;
    let mut expected = vec![0u32; BINS];
    for &value in &values {
        expected[value as usize] += 1;
    }
    let wrong = result.iter().zip(&expected).filter(|(got, want)| got != want).count();
    let first = result
        .iter()
        .zip(&expected)
        .enumerate()
        .find(|(_, (got, want))| got != want)
        .map(|(bin, (got, want))| format!("bin {bin}: got {got}, expected {want}"));
    common::verdict(wrong, BINS, first)
}

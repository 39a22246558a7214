//! A round trip on the best device: upload, copy on the device, fill, download, verify.
//!
//! ```sh
//! cargo run --release -p xhal --example roundtrip             # best device
//! XHAL_DEVICE=cpu cargo run --release -p xhal --example roundtrip
//! ```

use std::time::Instant;
use xhal::{KernelFormat, Launch, Runtime, Selector};

fn main() {
    if let Err(error) = run() {
        eprintln!("error: {error}");
        std::process::exit(1);
    }
}

fn run() -> xhal::Result<()> {
    let runtime = Runtime::discover()?;
    let (device, explanation) = runtime.choose(&Selector::from_env()?)?;
    println!(
        "device: {} ({}) from {}",
        device.label(),
        device.name(),
        source_of(&runtime, device.backend_name())
    );
    println!("why:    {explanation}");

    const LEN: usize = 4 << 20; // 16 MiB of u32
    let data: Vec<u32> = (0..LEN as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let stream = device.create_stream()?;
    let start_event = device.create_event()?;
    let end_event = device.create_event()?;

    // Allocations first, so the timings below are of data movement alone.
    let source = device.alloc::<u32>(LEN)?;
    let copy = device.alloc::<u32>(LEN)?;
    // Non-zero, so the host pages are touched now and not during the timed download.
    let mut copied_back = vec![u32::MAX; LEN];
    let mut filled_back = vec![u32::MAX; LEN];
    let bytes = (LEN * 4) as f64;
    let report = |step: &str, seconds: f64, traffic_bytes: f64| {
        println!(
            "  {step:<31} {:>8.2} ms  {:>6.2} GB/s",
            seconds * 1e3,
            traffic_bytes / seconds / 1e9
        );
    };
    println!("round trip of {} MiB:", (LEN * 4) >> 20);
    stream.record(&start_event)?;
    let timer = Instant::now();
    stream.write(&source, &data)?;
    report("upload (host to device)", timer.elapsed().as_secs_f64(), bytes);
    let timer = Instant::now();
    stream.copy(&source, &copy)?;
    stream.synchronize()?;
    report("copy (device to device)", timer.elapsed().as_secs_f64(), bytes);
    let timer = Instant::now();
    stream.fill(source.slice(..LEN / 2), 0xABAB_ABABu32)?;
    stream.synchronize()?;
    report("fill half", timer.elapsed().as_secs_f64(), bytes / 2.0);
    let timer = Instant::now();
    stream.read(&copy, &mut copied_back)?;
    stream.read(&source, &mut filled_back)?;
    report(
        "download both (device to host)",
        timer.elapsed().as_secs_f64(),
        2.0 * bytes,
    );
    stream.record(&end_event)?;
    stream.synchronize()?;

    let copy_ok = copied_back == data;
    let fill_ok = filled_back[..LEN / 2].iter().all(|&v| v == 0xABAB_ABAB) && filled_back[LEN / 2..] == data[LEN / 2..];
    if start_event.has_timing() {
        println!(
            "  {:<31} {:>8.2} ms",
            "device time between events",
            end_event.elapsed_since(&start_event)?.as_secs_f64() * 1e3
        );
    }

    let mut kernel_ok = true;
    if device.info().kernel_formats.contains(&KernelFormat::CPU_BUILTIN) {
        let module = device.load_module(KernelFormat::CPU_BUILTIN, b"saxpy_f32\n")?;
        let saxpy = module.kernel("saxpy_f32")?;
        let n = 1 << 20;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y: Vec<f32> = vec![1.0; n];
        let x_buffer = device.alloc_from(&stream, &x)?;
        let y_buffer = device.alloc_from(&stream, &y)?;
        let launch = Launch::new(&saxpy)
            .workgroups((n as u32).div_ceil(64), 1, 1)
            .buffer(&x_buffer)
            .buffer(&y_buffer)
            .scalar(2.0f32)
            .scalar(n as u32);
        stream.launch(&launch)?;
        let result = stream.read_to_vec(&y_buffer)?;
        kernel_ok = result.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32 + 1.0);
        println!(
            "saxpy_f32 on {n} elements: {}",
            if kernel_ok { "verified" } else { "WRONG" }
        );
    }

    let stats = device.memory_stats();
    println!(
        "memory: allocated {} MiB, reserved {} MiB, peak {} MiB",
        stats.allocated >> 20,
        stats.reserved >> 20,
        stats.peak_allocated >> 20
    );
    if copy_ok && fill_ok && kernel_ok {
        println!("verification: PASS");
        Ok(())
    } else {
        Err(xhal::Error::internal(format!(
            "verification failed: copy {copy_ok}, fill {fill_ok}, kernel {kernel_ok}"
        )))
    }
}

fn source_of(runtime: &Runtime, backend: &str) -> String {
    runtime
        .backend(backend)
        .map(|entry| entry.source.to_string())
        .unwrap_or_default()
}

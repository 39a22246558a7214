//! `xhal bench`: the cross-backend kernel benchmark. The saxpy, matmul and reduction kernels
//! of `examples/kernels/` run on every device (or every device `--device` accepts); each
//! result is checked against a host reference, and each time is set against a native
//! single-threaded Rust loop doing the same work (the loops of `hal/sdk/benches/kernels.rs`),
//! measured in the same run.
//!
//! One failure never stops the run: a device that does not open, a kernel that does not load
//! or launch, and a wrong result are each reported in their row, and the exit status is 1.

use super::{json_text, ExitError, Output, EXIT_PROBLEMS_FOUND, EXIT_RUNTIME_ERROR, EXIT_SUCCESS, EXIT_USAGE_ERROR};
use crate::commands::info::backends_without_devices;
use crate::listing::SCHEMA_VERSION;
use crate::progress::Progress;
use crate::table::Table;
use anyhow::{anyhow, Context};
use serde::Serialize;
use std::hint::black_box;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use xhal::cpu::KernelMode;
use xhal::{Buffer, Device, DeviceEntry, DeviceSelector, Kernel, Launch, Runtime, Selector, Stream};

const SAXPY_SOURCE: &str = include_str!("../../../examples/kernels/saxpy.wgsl");
const MATMUL_SOURCE: &str = include_str!("../../../examples/kernels/matmul.wgsl");
const REDUCE_SOURCE: &str = include_str!("../../../examples/kernels/reduce.wgsl");

/// The tile edge of `matmul.wgsl`: its workgroups are 16×16 and cover a 16×16 tile of `c`.
const MATMUL_TILE: usize = 16;
/// Elements one workgroup of `reduce.wgsl` sums (256 invocations, two elements each).
const REDUCE_PER_WORKGROUP: usize = 512;
/// Invocations in one workgroup of `reduce.wgsl`.
const REDUCE_WORKGROUP_SIZE: usize = 256;

/// The saxpy scale: with inputs that are multiples of 1/4 below 1000, every `a * x + y` is
/// exact in f32, fused or not, so the check can be exact.
const SAXPY_A: f32 = 2.0;

/// Relative tolerance of the matmul and reduction checks, against `max(|expected|, 1)`. The
/// inputs are small integers, so every partial sum is exact in f32 whatever the order of
/// summation and the check is in effect exact; the tolerance only admits a device that
/// rounds differently, never a lost or doubled term.
const SUM_TOLERANCE: f32 = 1e-5;

/// The name the selector's messages give the `--device` text.
const DEVICE_ORIGIN: &str = "--device";

/// Options, exit codes and an example, shown by `xhal bench --help` (and in docs/cli.md).
pub const AFTER_HELP: &str = "\
Kernels (examples/kernels/*.wgsl, built into the binary), full size / --size small:
  saxpy   y = a*x + y over 16M f32 / 64K;         native: `y += a * x` over slices
  matmul  512x512 f32 in 16x16 tiles / 64x64;      native: 16x16-tiled i-k-j loop
  reduce  sum of 16M f32 / 64K, tree passes of 512 elements per workgroup until one value
          is left;                                 native: `iter().sum()`

Every kernel runs once on each device and its result is checked against a host reference
(saxpy exactly; matmul and reduce within a relative 1e-5, on small-integer inputs whose
sums are exact in any order). Then --warmup untimed and --repeat timed runs of the
launch(es) + synchronize give the median and the minimum wall time. The native loop is
timed the same way, once per kernel, on this thread. VS NATIVE is native median / device
median: above 1 the device is faster. LOAD is the time to load the kernel (its module and
entry point), compiling it included: the cpu backend's compiled mode builds C there (or
finds it in its disk cache), OpenCL builds its program, Vulkan its pipeline.

Exit codes: 0 every row ok; 1 a device did not open, a kernel did not load or run, or a
result was wrong (each reported in its row; the others still run); 2 a usage error,
including a malformed --device; 3 no device to measure (--device matches nothing).

Examples:
  xhal bench
  xhal bench --size small --repeat 1
  xhal bench --device vulkan:0 --kernel matmul --repeat 20
  xhal bench --device cpu --cpu-modes
  XHAL_PLUGIN_PATH=target/plugins xhal bench --json > bench.json";

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Write a timeline of the run to this file (Chrome/Perfetto trace JSON); read it with
    /// `xhal trace summary`.
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// Which devices, in the XHAL_DEVICE grammar (`cpu`, `vulkan:0`, `gpu`, `wgpu,!cpu`):
    /// every device it accepts is measured. Default: every device, whatever XHAL_DEVICE says.
    #[arg(long, short = 'd', value_name = "SELECTOR")]
    pub device: Option<String>,
    /// A kernel to run; give the option again for more. Default: all three.
    #[arg(long = "kernel", short = 'k', value_name = "NAME", value_enum)]
    pub kernels: Vec<KernelName>,
    /// Problem sizes: `full` (16M-element vectors, 512x512 matrices) or `small` (64K, 64x64),
    /// for a quick check that every device gets the right answers.
    #[arg(long, value_enum, default_value_t = SizeClass::Full)]
    pub size: SizeClass,
    /// Timed runs of each kernel on each device, and of each native loop.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Untimed runs before the timed ones.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub warmup: u32,
    /// Measure each CPU device twice, with its WGSL kernels interpreted and compiled to C
    /// (rows `cpu:0/interpret` and `cpu:0/compile`), whatever XHAL_CPU_MODE says.
    #[arg(long)]
    pub cpu_modes: bool,
    /// Write JSON (schema in docs/cli.md) instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// The kernels the benchmark knows, in the order they are run and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelName {
    Saxpy,
    Matmul,
    Reduce,
}

impl KernelName {
    const ALL: [KernelName; 3] = [KernelName::Saxpy, KernelName::Matmul, KernelName::Reduce];

    fn as_str(self) -> &'static str {
        match self {
            KernelName::Saxpy => "saxpy",
            KernelName::Matmul => "matmul",
            KernelName::Reduce => "reduce",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeClass {
    Small,
    Full,
}

impl SizeClass {
    fn as_str(self) -> &'static str {
        match self {
            SizeClass::Small => "small",
            SizeClass::Full => "full",
        }
    }

    /// Elements of the saxpy and reduction vectors.
    fn vector_len(self) -> usize {
        match self {
            SizeClass::Small => 64 << 10,
            SizeClass::Full => 16 << 20,
        }
    }

    /// Rows (= columns) of the square matmul operands; a multiple of [`MATMUL_TILE`].
    fn matrix_size(self) -> usize {
        match self {
            SizeClass::Small => 64,
            SizeClass::Full => 512,
        }
    }
}

/// How many warm-up and timed runs each measurement takes.
#[derive(Debug, Clone, Copy)]
struct Runs {
    warmup: u32,
    repeat: u32,
}

/// The median and the fastest of the timed runs.
#[derive(Debug, Clone, Copy)]
struct Timing {
    median: Duration,
    min: Duration,
}

impl Timing {
    /// From at least one sample.
    fn from_samples(mut samples: Vec<Duration>) -> Timing {
        samples.sort_unstable();
        let middle = samples.len() / 2;
        let median = if samples.len().is_multiple_of(2) {
            (samples[middle - 1] + samples[middle]) / 2
        } else {
            samples[middle]
        };
        Timing {
            median,
            min: samples[0],
        }
    }
}

/// Runs `run` `runs.warmup` times untimed, then `runs.repeat` times timed.
fn measure<E>(runs: Runs, mut run: impl FnMut() -> Result<(), E>) -> Result<Timing, E> {
    for _ in 0..runs.warmup {
        run()?;
    }
    let mut samples = Vec::with_capacity(runs.repeat as usize);
    for _ in 0..runs.repeat.max(1) {
        let started = Instant::now();
        run()?;
        samples.push(started.elapsed());
    }
    Ok(Timing::from_samples(samples))
}

// ---------------------------------------------------------------------------------------------
// The host side: inputs, references, native loops
// ---------------------------------------------------------------------------------------------

/// One kernel's inputs and the result a device must produce from them.
enum Job {
    Saxpy {
        x: Vec<f32>,
        y: Vec<f32>,
        expected: Vec<f32>,
    },
    Matmul {
        size: usize,
        a: Vec<f32>,
        b: Vec<f32>,
        expected: Vec<f32>,
    },
    Reduce {
        values: Vec<f32>,
        expected: f32,
    },
}

impl Job {
    fn new(kernel: KernelName, size: SizeClass) -> Job {
        match kernel {
            KernelName::Saxpy => {
                let n = size.vector_len();
                let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
                let y: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
                let expected = x.iter().zip(&y).map(|(x, y)| SAXPY_A * x + y).collect();
                Job::Saxpy { x, y, expected }
            }
            KernelName::Matmul => {
                let size = size.matrix_size();
                // Entries in [-2, 2] and [-3, 3]: every sum of 512 products is an integer of
                // magnitude below 2^24, exact in f32 in any order.
                let a: Vec<f32> = (0..size * size).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
                let b: Vec<f32> = (0..size * size).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
                let mut expected = vec![0f64; size * size];
                for row in 0..size {
                    for inner in 0..size {
                        let scale = f64::from(a[row * size + inner]);
                        for col in 0..size {
                            expected[row * size + col] += scale * f64::from(b[inner * size + col]);
                        }
                    }
                }
                let expected = expected.into_iter().map(|value| value as f32).collect();
                Job::Matmul { size, a, b, expected }
            }
            KernelName::Reduce => {
                // Values in [-5, 5] with a period (11) that 512 is not a multiple of: a
                // workgroup's sum lost or counted twice changes the total, and every partial
                // sum stays a small integer, exact in any order.
                let n = size.vector_len();
                let values: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
                let expected = values.iter().map(|&value| f64::from(value)).sum::<f64>() as f32;
                Job::Reduce { values, expected }
            }
        }
    }

    /// `16M`, `512x512`: the size as the table shows it.
    fn size_text(&self) -> String {
        match self {
            Job::Saxpy { x, .. } => count_text(x.len()),
            Job::Matmul { size, .. } => format!("{size}x{size}"),
            Job::Reduce { values, .. } => count_text(values.len()),
        }
    }

    /// Times the native single-threaded loop doing the same work as the kernel: the loops of
    /// `hal/sdk/benches/kernels.rs`.
    fn time_native(&self, runs: Runs) -> Timing {
        let timing = match self {
            Job::Saxpy { x, y, .. } => {
                let mut y = y.clone();
                measure(runs, || {
                    for (y, x) in y.iter_mut().zip(black_box(x)) {
                        *y += SAXPY_A * x;
                    }
                    black_box(&y);
                    Ok::<(), std::convert::Infallible>(())
                })
            }
            Job::Matmul { size, a, b, .. } => {
                let mut c = vec![0f32; size * size];
                measure(runs, || {
                    native_matmul(black_box(a), black_box(b), &mut c, *size);
                    black_box(&c);
                    Ok(())
                })
            }
            Job::Reduce { values, .. } => measure(runs, || {
                black_box(black_box(values).iter().sum::<f32>());
                Ok(())
            }),
        };
        match timing {
            Ok(timing) => timing,
            Err(never) => match never {},
        }
    }
}

/// `c = a * b` for square row-major matrices, single-threaded, in 16×16 tiles of an i-k-j
/// loop (the baseline of `hal/sdk/benches/kernels.rs`). `size` is a multiple of 16.
fn native_matmul(a: &[f32], b: &[f32], c: &mut [f32], size: usize) {
    c.fill(0.0);
    for row_tile in (0..size).step_by(MATMUL_TILE) {
        for inner_tile in (0..size).step_by(MATMUL_TILE) {
            for row in row_tile..row_tile + MATMUL_TILE {
                for inner in inner_tile..inner_tile + MATMUL_TILE {
                    let scale = a[row * size + inner];
                    let b_row = &b[inner * size..(inner + 1) * size];
                    let c_row = &mut c[row * size..(row + 1) * size];
                    for (c, b) in c_row.iter_mut().zip(b_row) {
                        *c += scale * b;
                    }
                }
            }
        }
    }
}

/// `16M`, `64K`, `1000`: binary multiples, as the benchmark names sizes.
fn count_text(count: usize) -> String {
    if count >= 1 << 20 && count.is_multiple_of(1 << 20) {
        format!("{}M", count >> 20)
    } else if count >= 1 << 10 && count.is_multiple_of(1 << 10) {
        format!("{}K", count >> 10)
    } else {
        count.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// The device side
// ---------------------------------------------------------------------------------------------

/// The first wrong element of a result.
#[derive(Debug, Clone, Serialize)]
struct Mismatch {
    buffer: &'static str,
    index: usize,
    expected: f32,
    got: f32,
    /// Wrong elements in all.
    wrong: usize,
    elements: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}[{}] = {}, expected {} ({} of {} wrong)",
            self.buffer, self.index, self.got, self.expected, self.wrong, self.elements
        )
    }
}

/// What became of one kernel on one device.
#[derive(Debug, Clone)]
enum Outcome {
    /// The timed runs, and how long loading the kernel took (compiling it included).
    Measured(Timing, Duration),
    Mismatch(Mismatch),
    Error(String),
}

/// Compares a result with the reference: equal when `|got - expected| <= tolerance *
/// max(|expected|, 1)` (so a tolerance of 0 is exact equality, and NaN is always wrong).
fn compare(buffer: &'static str, got: &[f32], expected: &[f32], tolerance: f32) -> Option<Mismatch> {
    if got.len() != expected.len() {
        // Buffers are allocated at the reference's length; this is only a safety net.
        return Some(Mismatch {
            buffer,
            index: got.len().min(expected.len()),
            expected: expected.get(got.len()).copied().unwrap_or(f32::NAN),
            got: got.get(expected.len()).copied().unwrap_or(f32::NAN),
            wrong: got.len().abs_diff(expected.len()),
            elements: expected.len(),
        });
    }
    let close = |got: f32, expected: f32| (got - expected).abs() <= tolerance * expected.abs().max(1.0);
    let mut wrong = got
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (&g, &e))| !close(g, e));
    let (index, (&first_got, &first_expected)) = wrong.next()?;
    Some(Mismatch {
        buffer,
        index,
        expected: first_expected,
        got: first_got,
        wrong: 1 + wrong.count(),
        elements: expected.len(),
    })
}

/// Loads `entry` of the WGSL `source` on `device`, and says how long that took.
fn load_kernel(device: &Device, source: &str, entry: &str) -> anyhow::Result<(Kernel, Duration)> {
    let started = Instant::now();
    let module = device
        .load_wgsl(source)
        .with_context(|| format!("loading {entry}.wgsl"))?;
    let kernel = module.kernel(entry).with_context(|| format!("loading {entry}.wgsl"))?;
    Ok((kernel, started.elapsed()))
}

/// Allocates a buffer holding `data`.
fn upload(device: &Device, stream: &Stream, name: &str, data: &[f32]) -> anyhow::Result<Buffer<f32>> {
    device
        .alloc_from(stream, data)
        .with_context(|| format!("uploading `{name}` ({} bytes)", std::mem::size_of_val(data)))
}

/// Runs once and checks the result; when it is right, times the runs.
fn check_then_time(
    runs: Runs,
    load: Duration,
    mut run: impl FnMut() -> xhal::Result<()>,
    check: impl FnOnce() -> anyhow::Result<Option<Mismatch>>,
) -> anyhow::Result<Outcome> {
    run().context("running")?;
    if let Some(mismatch) = check()? {
        return Ok(Outcome::Mismatch(mismatch));
    }
    let timing = measure(runs, run).context("timed runs")?;
    Ok(Outcome::Measured(timing, load))
}

/// One kernel on one device: load, upload, run, check, time.
fn run_on_device(device: &Device, job: &Job, runs: Runs) -> anyhow::Result<Outcome> {
    let stream = device.create_stream().context("creating a stream")?;
    match job {
        Job::Saxpy { x, y, expected } => {
            let (kernel, load) = load_kernel(device, SAXPY_SOURCE, "saxpy")?;
            let x_buffer = upload(device, &stream, "x", x)?;
            let y_buffer = upload(device, &stream, "y", y)?;
            let launch = Launch::new(&kernel)
                .workgroups_for_invocations(x.len() as u64)
                .buffer(&x_buffer)
                .buffer(&y_buffer)
                .scalar(SAXPY_A)
                .scalar(x.len() as u32);
            check_then_time(
                runs,
                load,
                || {
                    stream.launch(&launch)?;
                    stream.synchronize()
                },
                || {
                    let got = stream.read_to_vec(&y_buffer).context("reading `y` back")?;
                    Ok(compare("y", &got, expected, 0.0))
                },
            )
        }
        Job::Matmul { size, a, b, expected } => {
            let (kernel, load) = load_kernel(device, MATMUL_SOURCE, "matmul")?;
            let a_buffer = upload(device, &stream, "a", a)?;
            let b_buffer = upload(device, &stream, "b", b)?;
            let c_buffer = device
                .alloc::<f32>(size * size)
                .with_context(|| format!("allocating `c` ({} bytes)", size * size * 4))?;
            let tiles = size.div_ceil(MATMUL_TILE) as u32;
            let launch = Launch::new(&kernel)
                .workgroups(tiles, tiles, 1)
                .buffer(&a_buffer)
                .buffer(&b_buffer)
                .buffer(&c_buffer)
                .scalar(*size as u32)
                .scalar(*size as u32)
                .scalar(*size as u32);
            check_then_time(
                runs,
                load,
                || {
                    stream.launch(&launch)?;
                    stream.synchronize()
                },
                || {
                    let got = stream.read_to_vec(&c_buffer).context("reading `c` back")?;
                    Ok(compare("c", &got, expected, SUM_TOLERANCE))
                },
            )
        }
        Job::Reduce { values, expected } => {
            let (kernel, load) = load_kernel(device, REDUCE_SOURCE, "reduce")?;
            // One buffer per pass: 16M -> 32K -> 64 -> 1 values.
            let mut buffers = vec![upload(device, &stream, "input", values)?];
            let mut lengths = vec![values.len()];
            while let Some(&length) = lengths.last().filter(|&&length| length > 1) {
                let groups = length.div_ceil(REDUCE_PER_WORKGROUP);
                let buffer = device
                    .alloc::<f32>(groups)
                    .with_context(|| format!("allocating partial sums ({} bytes)", groups * 4))?;
                buffers.push(buffer);
                lengths.push(groups);
            }
            let launches: Vec<Launch<'_>> = (0..buffers.len() - 1)
                .map(|pass| {
                    Launch::new(&kernel)
                        .workgroups_for_invocations((lengths[pass + 1] * REDUCE_WORKGROUP_SIZE) as u64)
                        .buffer(&buffers[pass])
                        .buffer(&buffers[pass + 1])
                        .scalar(lengths[pass] as u32)
                })
                .collect();
            let total = &buffers[buffers.len() - 1];
            check_then_time(
                runs,
                load,
                || {
                    for launch in &launches {
                        stream.launch(launch)?;
                    }
                    stream.synchronize()
                },
                || {
                    let got = stream.read_to_vec(total).context("reading the sum back")?;
                    Ok(compare("sum", &got, &[*expected], SUM_TOLERANCE))
                },
            )
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Choosing devices
// ---------------------------------------------------------------------------------------------

/// A runtime holding only the built-in CPU backend, running WGSL kernels in `mode`.
fn cpu_runtime(mode: KernelMode) -> xhal::Result<Runtime> {
    let backend = xhal::cpu::CpuBackend::new(xhal::cpu::CpuDriver::from_env()?.with_kernel_mode(mode));
    Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .device_selector(None)
        .backend(std::sync::Arc::new(backend))
        .build()
}

/// The devices to measure, sorted by backend and index, and the runtime that holds their
/// backends. The runtime only loads the plugins the selector can use.
fn choose_devices(selector_text: Option<&str>) -> anyhow::Result<(Runtime, Vec<DeviceEntry>)> {
    let selector = selector_text
        .map(|text| DeviceSelector::parse_from(text, DEVICE_ORIGIN))
        .transpose()
        .map_err(|error| ExitError::wrap(EXIT_USAGE_ERROR, error))?;
    let runtime = Runtime::builder()
        .device_selector(selector.clone())
        .build()
        .context("discovering backends")?;
    // The devices of the backends in use: a built-in shadowed by a plugin of the same name is
    // left out, as the runtime would never open it.
    let mut devices: Vec<DeviceEntry> = runtime
        .devices()
        .into_iter()
        .filter(|entry| {
            selector
                .as_ref()
                .is_none_or(|selector| selector.accepts(&entry.backend, entry.index, entry.info.device_type))
        })
        .collect();
    devices.sort_by(|a, b| (&a.backend, a.index).cmp(&(&b.backend, b.index)));
    if devices.is_empty() {
        return Err(ExitError::wrap(EXIT_PROBLEMS_FOUND, nothing_to_measure(selector)?));
    }
    Ok((runtime, devices))
}

/// Why there is no device to measure, listing every device present (plugins the selector
/// skipped included).
fn nothing_to_measure(selector: Option<DeviceSelector>) -> anyhow::Result<anyhow::Error> {
    let Some(selector) = selector else {
        return Ok(anyhow!(
            "no device to measure: no backend reports a device (`xhal doctor` says why)"
        ));
    };
    let runtime = Runtime::builder()
        .device_selector(None)
        .build()
        .context("discovering backends")?;
    let selector = Selector::new().with_devices(selector);
    let mut message = match runtime.choose_without_opening(&selector) {
        Err(error) => error.message().to_owned(),
        // Only plugins that could not be used were skipped, so this is not expected.
        Ok((entry, _)) => format!(
            "{DEVICE_ORIGIN} matches {} only among plugins it should have skipped",
            entry.label()
        ),
    };
    for note in backends_without_devices(&runtime, &selector) {
        message.push_str("\nnote: ");
        message.push_str(&note);
    }
    Ok(anyhow!(message).context("no device to measure"))
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

/// One kernel on one device.
struct Row {
    kernel: KernelName,
    size: String,
    backend: String,
    label: String,
    name: String,
    outcome: Outcome,
    /// Native median / device median.
    ratio: Option<f64>,
}

/// One native loop.
struct NativeRow {
    kernel: KernelName,
    size: String,
    timing: Timing,
}

pub fn run(args: &BenchArgs) -> anyhow::Result<Output> {
    // Stopped (and the file finished) when this returns, whatever the outcome.
    let _trace = super::trace::start_for_command(args.trace.as_deref())?;
    let kernels: Vec<KernelName> = if args.kernels.is_empty() {
        KernelName::ALL.to_vec()
    } else {
        KernelName::ALL
            .into_iter()
            .filter(|kernel| args.kernels.contains(kernel))
            .collect()
    };
    let runs = Runs {
        warmup: args.warmup,
        repeat: args.repeat,
    };
    // The runtime stays alive to the end: it holds the plugin libraries the devices run in.
    let (runtime, entries) = choose_devices(args.device.as_deref())?;
    tracing::debug!(
        devices = %entries.iter().map(DeviceEntry::label).collect::<Vec<_>>().join(", "),
        kernels = %kernels.iter().map(|kernel| kernel.as_str()).collect::<Vec<_>>().join(", "),
        size = args.size.as_str(),
        "benchmarking"
    );

    // With --cpu-modes each CPU device is measured in both kernel modes, from backends made
    // here: `cpu:0/interpret` and `cpu:0/compile`.
    let both_cpu_modes = args.cpu_modes;
    let mut targets: Vec<(String, DeviceEntry, Option<KernelMode>)> = Vec::new();
    for entry in entries {
        if both_cpu_modes && entry.backend == "cpu" {
            for mode in [KernelMode::Interpret, KernelMode::Compile] {
                targets.push((format!("{}/{}", entry.label(), mode.name()), entry.clone(), Some(mode)));
            }
        } else {
            targets.push((entry.label(), entry, None));
        }
    }
    let mut progress = Progress::new(
        targets.len() + kernels.len() * (targets.len() + 1),
        !args.json && std::io::stderr().is_terminal(),
    );
    let mut cpu_runtimes = Vec::new();
    let devices: Vec<(String, DeviceEntry, Result<Device, String>)> = targets
        .into_iter()
        .map(|(label, entry, mode)| {
            progress.step(&format!("opening {label} ({})", entry.info.name));
            let device = match mode {
                None => runtime.open(&format!("{}:{}", &entry.backend, entry.index)),
                Some(mode) => cpu_runtime(mode).and_then(|cpu| {
                    let device = cpu.open(&format!("cpu:{}", entry.index));
                    cpu_runtimes.push(cpu);
                    device
                }),
            }
            .map_err(|error| format!("opening the device: {error}"));
            if let Err(error) = &device {
                // Its rows say so; a warning as well would only repeat them.
                tracing::debug!(device = %label, "{error}");
            }
            (label, entry, device)
        })
        .collect();

    let mut native_rows = Vec::new();
    let mut rows = Vec::new();
    for &kernel in &kernels {
        progress.step(&format!("{} on the host: native loop", kernel.as_str()));
        let job = Job::new(kernel, args.size);
        let size = job.size_text();
        let native = job.time_native(runs);
        tracing::debug!(
            kernel = kernel.as_str(),
            size = %size,
            median_ns = native.median.as_nanos() as u64,
            min_ns = native.min.as_nanos() as u64,
            "native loop"
        );
        for (label, entry, device) in &devices {
            let label = label.clone();
            progress.step(&format!("{} on {label} ({})", kernel.as_str(), entry.info.name));
            let outcome = match device {
                Err(error) => Outcome::Error(error.clone()),
                Ok(device) => {
                    let outcome =
                        run_on_device(device, &job, runs).unwrap_or_else(|error| Outcome::Error(format!("{error:#}")));
                    // The next kernel starts from an empty cache, not from this one's buffers.
                    device.empty_cache();
                    outcome
                }
            };
            let ratio = match &outcome {
                Outcome::Measured(timing, _) => Some(native.median.as_secs_f64() / timing.median.as_secs_f64()),
                _ => None,
            };
            match &outcome {
                Outcome::Measured(timing, _) => tracing::debug!(
                    kernel = kernel.as_str(),
                    device = %label,
                    median_ns = timing.median.as_nanos() as u64,
                    min_ns = timing.min.as_nanos() as u64,
                    "measured"
                ),
                Outcome::Mismatch(mismatch) => {
                    tracing::debug!(kernel = kernel.as_str(), device = %label, "wrong result: {mismatch}")
                }
                Outcome::Error(error) => tracing::debug!(kernel = kernel.as_str(), device = %label, "failed: {error}"),
            }
            rows.push(Row {
                kernel,
                size: size.clone(),
                backend: entry.backend.clone(),
                label,
                name: entry.info.name.clone(),
                outcome,
                ratio,
            });
        }
        native_rows.push(NativeRow {
            kernel,
            size,
            timing: native,
        });
    }
    progress.finish();

    let failed = rows
        .iter()
        .filter(|row| !matches!(row.outcome, Outcome::Measured(..)))
        .count();
    let exit_code = if failed == 0 { EXIT_SUCCESS } else { EXIT_RUNTIME_ERROR };
    let text = if args.json {
        json_text(&report_json(args, &native_rows, &rows))?
    } else {
        report_text(args, &native_rows, &rows, failed)
    };
    Ok(Output::with_exit_code(text, exit_code))
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

/// What the host is, so that results from different machines can be told apart.
#[derive(Serialize)]
struct HostJson {
    os: &'static str,
    arch: &'static str,
    cpus: usize,
    cpu_model: Option<String>,
    xhal_version: &'static str,
    /// False for a debug build, whose times mean little.
    optimized: bool,
}

impl HostJson {
    fn current() -> HostJson {
        HostJson {
            os: std::env::consts::OS,
            arch: std::env::consts::ARCH,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model: cpu_model(),
            xhal_version: env!("CARGO_PKG_VERSION"),
            optimized: !cfg!(debug_assertions),
        }
    }
}

/// The CPU's model name where the system says it (`/proc/cpuinfo` on Linux).
fn cpu_model() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    cpuinfo
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

#[derive(Serialize)]
struct BenchJson {
    schema_version: u32,
    host: HostJson,
    size: SizeClass,
    warmup: u32,
    repeat: u32,
    native: Vec<NativeJson>,
    results: Vec<ResultJson>,
}

#[derive(Serialize)]
struct NativeJson {
    kernel: KernelName,
    size: String,
    median_ns: u64,
    min_ns: u64,
}

#[derive(Serialize)]
struct ResultJson {
    kernel: KernelName,
    size: String,
    backend: String,
    device: String,
    device_name: String,
    median_ns: Option<u64>,
    min_ns: Option<u64>,
    /// Loading the kernel (module and entry point), compiling it included.
    load_ns: Option<u64>,
    ratio_vs_native: Option<f64>,
    /// `ok`, `mismatch` or `error`.
    status: &'static str,
    /// What went wrong, in words: the CHECK column after `mismatch: ` or `error: `.
    message: Option<String>,
    mismatch: Option<Mismatch>,
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn report_json(args: &BenchArgs, native_rows: &[NativeRow], rows: &[Row]) -> BenchJson {
    BenchJson {
        schema_version: SCHEMA_VERSION,
        host: HostJson::current(),
        size: args.size,
        warmup: args.warmup,
        repeat: args.repeat,
        native: native_rows
            .iter()
            .map(|row| NativeJson {
                kernel: row.kernel,
                size: row.size.clone(),
                median_ns: nanos(row.timing.median),
                min_ns: nanos(row.timing.min),
            })
            .collect(),
        results: rows
            .iter()
            .map(|row| {
                let (timing, load) = match &row.outcome {
                    Outcome::Measured(timing, load) => (Some(timing), Some(*load)),
                    _ => (None, None),
                };
                let (status, message, mismatch) = match &row.outcome {
                    Outcome::Measured(..) => ("ok", None, None),
                    Outcome::Mismatch(mismatch) => ("mismatch", Some(mismatch.to_string()), Some(mismatch.clone())),
                    Outcome::Error(error) => ("error", Some(error.clone()), None),
                };
                ResultJson {
                    kernel: row.kernel,
                    size: row.size.clone(),
                    backend: row.backend.clone(),
                    device: row.label.clone(),
                    device_name: row.name.clone(),
                    median_ns: timing.map(|timing| nanos(timing.median)),
                    min_ns: timing.map(|timing| nanos(timing.min)),
                    load_ns: load.map(nanos),
                    ratio_vs_native: row.ratio,
                    status,
                    message,
                    mismatch,
                }
            })
            .collect(),
    }
}

/// `1.23 s`, `45.6 ms`, `789 µs`, `12.0 µs`: three significant digits.
fn duration_text(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    let (value, unit) = if seconds >= 1.0 {
        (seconds, "s")
    } else if seconds >= 1e-3 {
        (seconds * 1e3, "ms")
    } else if seconds >= 1e-6 {
        (seconds * 1e6, "µs")
    } else {
        (seconds * 1e9, "ns")
    };
    format!("{} {unit}", three_digits(value))
}

/// `0.241x`, `1.50x`, `12.3x`, `456x`.
fn ratio_text(ratio: f64) -> String {
    format!("{}x", three_digits(ratio))
}

/// A positive number with three significant digits (more when it is 1000 or above).
fn three_digits(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else if value >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// Error text on one line, for a table cell.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn report_text(args: &BenchArgs, native_rows: &[NativeRow], rows: &[Row], failed: usize) -> String {
    let host = HostJson::current();
    let mut text = format!(
        "xhal bench: {} sizes, median and minimum wall time of {} timed run{} (after {} warm-up{}) \
         of launch + synchronize\n",
        args.size.as_str(),
        args.repeat,
        if args.repeat == 1 { "" } else { "s" },
        args.warmup,
        if args.warmup == 1 { "" } else { "s" },
    );
    text.push_str(&format!(
        "host: {}{} CPUs, {} {}{}\n",
        host.cpu_model.map(|model| format!("{model}, ")).unwrap_or_default(),
        host.cpus,
        host.os,
        host.arch,
        if host.optimized {
            ""
        } else {
            ", debug build (times mean little; build with --release)"
        },
    ));

    text.push_str("\nnative single-threaded Rust loops, f32\n");
    let mut native_table = Table::with_header(["KERNEL", "SIZE", "MEDIAN", "MIN"]);
    for row in native_rows {
        native_table.row([
            row.kernel.as_str().to_owned(),
            row.size.clone(),
            duration_text(row.timing.median),
            duration_text(row.timing.min),
        ]);
    }
    text.push_str(&native_table.render("  "));

    text.push('\n');
    let mut table = Table::with_header([
        "KERNEL",
        "SIZE",
        "DEVICE",
        "NAME",
        "MEDIAN",
        "MIN",
        "VS NATIVE",
        "LOAD",
        "CHECK",
    ]);
    for row in rows {
        let (median, min, load, check) = match &row.outcome {
            Outcome::Measured(timing, load) => (
                duration_text(timing.median),
                duration_text(timing.min),
                duration_text(*load),
                "ok".to_owned(),
            ),
            Outcome::Mismatch(mismatch) => (
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                format!("mismatch: {mismatch}"),
            ),
            Outcome::Error(error) => (
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                format!("error: {}", one_line(error)),
            ),
        };
        table.row([
            row.kernel.as_str().to_owned(),
            row.size.clone(),
            row.label.clone(),
            row.name.clone(),
            median,
            min,
            row.ratio.map_or_else(|| "-".to_owned(), ratio_text),
            load,
            check,
        ]);
    }
    text.push_str(&table.render(""));
    if failed > 0 {
        text.push_str(&format!("\n{failed} of {} measurements failed\n", rows.len()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let ms = Duration::from_millis;
        let timing = Timing::from_samples(vec![ms(4), ms(1), ms(3), ms(2)]);
        assert_eq!((timing.median, timing.min), (Duration::from_micros(2500), ms(1)));
        let timing = Timing::from_samples(vec![ms(5), ms(9), ms(7)]);
        assert_eq!((timing.median, timing.min), (ms(7), ms(5)));
    }

    #[test]
    fn compare_finds_the_first_wrong_element_and_counts_them_all() {
        assert!(compare("y", &[1.0, 2.0], &[1.0, 2.0], 0.0).is_none());
        let mismatch = compare("y", &[1.0, 5.0, 3.0, 0.0], &[1.0, 2.0, 3.0, 4.0], 0.0).expect("wrong");
        assert_eq!(
            (mismatch.index, mismatch.got, mismatch.expected, mismatch.wrong),
            (1, 5.0, 2.0, 2)
        );
        assert_eq!(mismatch.to_string(), "y[1] = 5, expected 2 (2 of 4 wrong)");
        // Relative to the expected value, and never looser than absolute near zero.
        assert!(compare("c", &[1000.001], &[1000.0], 1e-5).is_none());
        assert!(compare("c", &[0.001], &[0.0], 1e-5).is_some());
        assert!(compare("c", &[f32::NAN], &[0.0], 1e-5).is_some());
    }

    #[test]
    fn sizes_durations_and_ratios_read_well() {
        assert_eq!(count_text(16 << 20), "16M");
        assert_eq!(count_text(64 << 10), "64K");
        assert_eq!(count_text(1000), "1000");
        assert_eq!(duration_text(Duration::from_nanos(1_234_567)), "1.23 ms");
        assert_eq!(duration_text(Duration::from_micros(456)), "456 µs");
        assert_eq!(duration_text(Duration::from_secs(2)), "2.00 s");
        assert_eq!(ratio_text(0.2414), "0.241x");
        assert_eq!(ratio_text(12.34), "12.3x");
    }

    #[test]
    fn the_native_matmul_matches_the_reference() {
        let Job::Matmul { size, a, b, expected } = Job::new(KernelName::Matmul, SizeClass::Small) else {
            unreachable!("a matmul job");
        };
        let mut c = vec![0f32; size * size];
        native_matmul(&a, &b, &mut c, size);
        assert!(compare("c", &c, &expected, 0.0).is_none());
    }

    #[test]
    fn the_reduction_input_sums_exactly_in_f32() {
        let Job::Reduce { values, expected } = Job::new(KernelName::Reduce, SizeClass::Full) else {
            unreachable!("a reduce job");
        };
        assert_eq!(values.iter().sum::<f32>(), expected);
        assert_eq!(
            values
                .chunks(REDUCE_PER_WORKGROUP)
                .map(|chunk| chunk.iter().sum::<f32>())
                .sum::<f32>(),
            expected
        );
    }
}

//! What one operation costs on every device, side by side (`make bench-ops`):
//!
//! - a 4-byte fill's enqueue through the application API and through the backend's own entry
//!   on the same loaded plugin and stream, and the difference: core's share of the enqueue,
//!   in wall time and in the calling thread's CPU time (which leaves out the time a driver's
//!   own threads, started by work the API path lets begin sooner, take from the two cores);
//! - an empty one-invocation launch waited for (the round trip), and launches per second
//!   queued back to back; for OpenCL, the same through the raw API beside it;
//! - 64 KiB allocations freed at once, per second, through the API (the caching allocator) and
//!   through the backend;
//! - a graph of 1,000 launches: the host's time to replay it against enqueuing the same
//!   launches one by one, natively (ABI 1.4 command lists) and op by op, and the time until
//!   the work is done for both;
//! - on devices whose memory the host can map, 64 MiB uploaded and downloaded through a
//!   mapping against `copy_from_slice` between two host vectors (the physical limit of a
//!   mapping), with `Stream::write` and `Stream::read` beside them.
//!
//! Every plugin in `target/plugins` is measured on each of its devices; one that cannot start
//! here is listed with its reason. Each figure is the median of several rounds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use xhal::backend::{Backend, BufferHandle, StreamHandle};
use xhal::plugin::load_plugin;
use xhal::{Launch, Runtime};

#[path = "support/null_fill.rs"]
mod null_fill;
#[path = "support/raw_opencl.rs"]
mod raw_opencl;
#[path = "support/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_nanoseconds;

const FILLS: usize = 2_000;
const ROUNDS: usize = 15;
const ROUND_TRIPS: usize = 200;
const LAUNCHES: usize = 2_000;
const ALLOCATIONS: usize = 2_000;
const ALLOCATION_BYTES: usize = 64 << 10;
const GRAPH_LAUNCHES: usize = 1_000;
const GRAPH_ROUNDS: usize = 7;
const MAPPED_BYTES: usize = 64 << 20;
const MAPPED_ROUNDS: usize = 7;

const EMPTY: &str = r#"
@group(0) @binding(0) var<storage, read_write> sink: array<u32>;

@compute @workgroup_size(1)
fn touch(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x == 0u {
        sink[0] = 1u;
    }
}
"#;

fn plugins_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<bench>")
        .join("plugins")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One device's figures, in nanoseconds and per second.
struct Figures {
    label: String,
    fill_api_ns: f64,
    fill_backend_ns: f64,
    /// The same, in the calling thread's CPU time.
    fill_api_cpu_ns: f64,
    fill_backend_cpu_ns: f64,
    /// Core's own share, over a backend whose fills do nothing (see `null_fill`): the
    /// calling thread's CPU time per fill through the API, less the same through that
    /// backend's entry.
    core_alone_ns: f64,
    round_trip_us: f64,
    /// The 10th and 90th percentiles of the round trips.
    round_trip_spread: (f64, f64),
    launches_per_second: f64,
    allocations_api_per_second: f64,
    allocations_backend_per_second: f64,
    graph: GraphFigures,
    mapping: Option<MappingFigures>,
}

/// 64 MiB moved between host memory and a buffer, in GB/s.
struct MappingFigures {
    host_copy: f64,
    mapped_upload: f64,
    mapped_download: f64,
    stream_write: f64,
    stream_read: f64,
}

fn measure_mapping(device: &xhal::Device, stream: &xhal::Stream) -> xhal::Result<MappingFigures> {
    let elements = MAPPED_BYTES / 4;
    let source: Vec<u32> = (0..elements as u32).collect();
    let mut host = vec![0u32; elements];
    let mut buffer = device.alloc::<u32>(elements)?;
    let rate = |seconds: f64| MAPPED_BYTES as f64 / seconds / 1e9;
    let mut rounds: [Vec<f64>; 5] = Default::default();
    for _ in 0..MAPPED_ROUNDS {
        let started = Instant::now();
        host.copy_from_slice(&source);
        rounds[0].push(rate(started.elapsed().as_secs_f64()));
        let started = Instant::now();
        buffer.map_mut(..)?.copy_from_slice(&source);
        rounds[1].push(rate(started.elapsed().as_secs_f64()));
        let started = Instant::now();
        host.copy_from_slice(&buffer.map()?);
        rounds[2].push(rate(started.elapsed().as_secs_f64()));
        let started = Instant::now();
        stream.write(&buffer, &source)?;
        rounds[3].push(rate(started.elapsed().as_secs_f64()));
        let started = Instant::now();
        stream.read(&buffer, &mut host)?;
        rounds[4].push(rate(started.elapsed().as_secs_f64()));
    }
    if host != source {
        return Err(xhal::Error::internal("the mapped round trip changed the data"));
    }
    let [host_copy, mapped_upload, mapped_download, stream_write, stream_read] = rounds.map(median);
    Ok(MappingFigures {
        host_copy,
        mapped_upload,
        mapped_download,
        stream_write,
        stream_read,
    })
}

/// A 1,000-launch graph against the same launches enqueued one by one, in microseconds.
struct GraphFigures {
    /// Whether the device replays the graph natively.
    native: bool,
    eager_host_us: f64,
    replay_host_us: f64,
    emulated_host_us: f64,
    eager_done_us: f64,
    replay_done_us: f64,
}

/// Host time to enqueue and time until done of the eager launches and of the two replays,
/// each the median of several rounds, the three taking turns.
fn measure_graph(device: &xhal::Device, stream: &xhal::Stream, launch: &Launch<'_>) -> xhal::Result<GraphFigures> {
    let record = |emulate: bool| -> xhal::Result<xhal::Graph> {
        let mut graph = device.graph();
        graph.emulate(emulate);
        let lane = graph.stream();
        for _ in 0..GRAPH_LAUNCHES {
            graph.launch(lane, launch)?;
        }
        graph.build()
    };
    let native = record(false)?;
    let emulated = record(true)?;
    let (mut eager_host, mut replay_host, mut emulated_host) = (Vec::new(), Vec::new(), Vec::new());
    let (mut eager_done, mut replay_done) = (Vec::new(), Vec::new());
    for _ in 0..GRAPH_ROUNDS {
        stream.synchronize()?;
        let started = Instant::now();
        for _ in 0..GRAPH_LAUNCHES {
            stream.launch(launch)?;
        }
        eager_host.push(started.elapsed().as_secs_f64() * 1e6);
        stream.synchronize()?;
        eager_done.push(started.elapsed().as_secs_f64() * 1e6);

        let started = Instant::now();
        native.replay(stream)?;
        replay_host.push(started.elapsed().as_secs_f64() * 1e6);
        stream.synchronize()?;
        replay_done.push(started.elapsed().as_secs_f64() * 1e6);

        let started = Instant::now();
        emulated.replay(stream)?;
        emulated_host.push(started.elapsed().as_secs_f64() * 1e6);
        stream.synchronize()?;
    }
    Ok(GraphFigures {
        native: native.is_native(),
        eager_host_us: median(eager_host),
        replay_host_us: median(replay_host),
        emulated_host_us: median(emulated_host),
        eager_done_us: median(eager_done),
        replay_done_us: median(replay_done),
    })
}

/// Core's own share of a 4-byte fill's enqueue, over `null` (a backend whose fills do
/// nothing): the calling thread's CPU time through the API less that through `null`'s entry,
/// medians of rounds that alternate the two.
fn measure_core_alone(null: &Arc<dyn Backend>, label: &str, index: u32) -> xhal::Result<f64> {
    let runtime = Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .backend(Arc::clone(null))
        .device_selector(None)
        .build()?;
    let device = runtime.open(label)?;
    let stream = device.create_stream()?;
    let buffer = device.alloc::<u32>(1024)?;
    let raw_device = null.device_open(index)?;
    let raw_stream = null.stream_create(raw_device)?;
    let raw_buffer = null.buffer_allocate(raw_device, 4096)?;
    let (mut api, mut direct) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS * 2 {
        let started = thread_cpu_nanoseconds();
        if round % 2 == 0 {
            for i in 0..FILLS {
                stream.fill(buffer.slice(i % 1024..i % 1024 + 1), round as u32)?;
            }
            api.push((thread_cpu_nanoseconds() - started) / FILLS as f64);
            stream.synchronize()?;
        } else {
            let pattern = (round as u32).to_le_bytes();
            for i in 0..FILLS {
                null.stream_fill(raw_stream, raw_buffer, (i % 1024) as u64 * 4, 4, &pattern)?;
            }
            direct.push((thread_cpu_nanoseconds() - started) / FILLS as f64);
        }
    }
    null.buffer_free(raw_buffer);
    null.stream_destroy(raw_stream);
    null.device_close(raw_device);
    Ok(median(api) - median(direct))
}

fn measure(backend: &Arc<dyn Backend>, runtime: &Runtime, label: &str, index: u32) -> xhal::Result<Figures> {
    let core_alone_ns = measure_core_alone(
        &(Arc::new(null_fill::NullFill {
            inner: Arc::clone(backend),
        }) as Arc<dyn Backend>),
        label,
        index,
    )?;
    let device = runtime.open(label)?;
    let stream = device.create_stream()?;
    let buffer = device.alloc::<u32>(1024)?;

    // The backend's own entry on a stream and buffer of its own, on the same device.
    let raw_device = backend.device_open(index)?;
    let raw_stream: StreamHandle = backend.stream_create(raw_device)?;
    let raw_buffer: BufferHandle = backend.buffer_allocate(raw_device, 4096)?;
    let mut fill_api = Vec::new();
    let mut fill_backend = Vec::new();
    let mut fill_api_cpu = Vec::new();
    let mut fill_backend_cpu = Vec::new();
    // The two alternate, and which goes first alternates by round, so neither gains from a
    // warmer cache or a driver that batches.
    for round in 0..ROUNDS * 2 {
        let pattern = (round as u32).to_le_bytes();
        let through_api = (round % 2 == 0) == (round / 2 % 2 == 0);
        let (started, cpu_started) = (Instant::now(), thread_cpu_nanoseconds());
        if through_api {
            for i in 0..FILLS {
                stream.fill(buffer.slice(i % 1024..i % 1024 + 1), round as u32)?;
            }
        } else {
            for i in 0..FILLS {
                backend.stream_fill(raw_stream, raw_buffer, (i % 1024) as u64 * 4, 4, &pattern)?;
            }
        }
        let per_fill = started.elapsed().as_nanos() as f64 / FILLS as f64;
        let cpu_per_fill = (thread_cpu_nanoseconds() - cpu_started) / FILLS as f64;
        if through_api {
            fill_api.push(per_fill);
            fill_api_cpu.push(cpu_per_fill);
            stream.synchronize()?;
        } else {
            fill_backend.push(per_fill);
            fill_backend_cpu.push(cpu_per_fill);
            backend.stream_synchronize(raw_stream)?;
        }
    }

    let kernel = device.load_wgsl(EMPTY)?.kernel("touch")?;
    let sink = device.alloc::<u32>(1)?;
    let launch = Launch::new(&kernel).workgroups(1, 1, 1).buffer(&sink);
    for _ in 0..20 {
        stream.launch(&launch)?;
    }
    stream.synchronize()?;
    let mut trips = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let started = Instant::now();
        stream.launch(&launch)?;
        stream.synchronize()?;
        trips.push(started.elapsed().as_secs_f64() * 1e6);
    }
    trips.sort_by(f64::total_cmp);
    let round_trip_spread = (trips[ROUND_TRIPS / 10], trips[ROUND_TRIPS * 9 / 10]);
    let mut rates = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..LAUNCHES {
            stream.launch(&launch)?;
        }
        stream.synchronize()?;
        rates.push(LAUNCHES as f64 / started.elapsed().as_secs_f64());
    }
    let graph = measure_graph(&device, &stream, &launch)?;
    let mapping = if device.has_features(xhal::Features::HOST_MAPPABLE) {
        Some(measure_mapping(&device, &stream)?)
    } else {
        None
    };

    let mut api_rates = Vec::new();
    let mut backend_rates = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..ALLOCATIONS {
            drop(device.alloc::<u8>(ALLOCATION_BYTES)?);
        }
        api_rates.push(ALLOCATIONS as f64 / started.elapsed().as_secs_f64());
        let started = Instant::now();
        for _ in 0..ALLOCATIONS {
            let handle = backend.buffer_allocate(raw_device, ALLOCATION_BYTES as u64)?;
            backend.buffer_free(handle);
        }
        backend_rates.push(ALLOCATIONS as f64 / started.elapsed().as_secs_f64());
    }
    backend.buffer_free(raw_buffer);
    backend.stream_destroy(raw_stream);
    backend.device_close(raw_device);
    Ok(Figures {
        label: label.to_string(),
        fill_api_ns: median(fill_api),
        fill_backend_ns: median(fill_backend),
        fill_api_cpu_ns: median(fill_api_cpu),
        fill_backend_cpu_ns: median(fill_backend_cpu),
        core_alone_ns,
        round_trip_us: median(trips),
        round_trip_spread,
        launches_per_second: median(rates),
        allocations_api_per_second: median(api_rates),
        allocations_backend_per_second: median(backend_rates),
        graph,
        mapping,
    })
}

fn plugin_figures(path: &Path, figures: &mut Vec<Figures>, notes: &mut Vec<String>) {
    let name = path
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("?")
        .trim_start_matches("libxhal_");
    let plugin = match load_plugin(path) {
        Ok(plugin) => plugin,
        Err(error) => return notes.push(format!("{name}: {error}")),
    };
    let backend: Arc<dyn Backend> = plugin.backend.clone();
    let count = match backend.device_count() {
        Ok(count) => count,
        Err(error) => return notes.push(format!("{name}: {error}")),
    };
    let runtime = match Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .backend(Arc::clone(&backend))
        .device_selector(None)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return notes.push(format!("{name}: {error}")),
    };
    let backend_name = backend.info().name;
    for index in 0..count {
        let label = format!("{backend_name}:{index}");
        eprintln!("bench-ops: {label}");
        match measure(&backend, &runtime, &label, index) {
            Ok(measured) => figures.push(measured),
            Err(error) => notes.push(format!("{label}: {error}")),
        }
    }
}

/// OpenCL launches through xhal against the same launches through the raw API, measured
/// after xhal's in the same run.
fn print_raw_opencl(figures: &[Figures], notes: &mut Vec<String>) {
    let Some(through_xhal) = figures.iter().find(|figure| figure.label == "opencl:0") else {
        return;
    };
    let raw = match raw_opencl::RawOpencl::new().and_then(|raw| raw.measure(ROUND_TRIPS, LAUNCHES)) {
        Ok(raw) => raw,
        Err(error) => return notes.push(format!("raw OpenCL baseline: {error}")),
    };
    println!();
    println!("an empty one-work-item kernel through xhal and through the raw OpenCL API (clEnqueueNDRangeKernel, clFinish), same device");
    println!("| path | round trip | launches/s |");
    println!("| --- | --- | --- |");
    println!(
        "| raw OpenCL | {:.1} µs | {:.0} |",
        raw.round_trip_us, raw.launches_per_second
    );
    println!(
        "| xhal opencl:0 | {:.1} µs ({:.2}x raw) | {:.0} ({:.2}x raw) |",
        through_xhal.round_trip_us,
        through_xhal.round_trip_us / raw.round_trip_us,
        through_xhal.launches_per_second,
        through_xhal.launches_per_second / raw.launches_per_second
    );
}

fn main() {
    if std::env::args().any(|argument| argument == "--list") {
        return;
    }
    let folder = plugins_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&folder)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "so"))
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    if paths.is_empty() {
        eprintln!("bench-ops: no plugins in {}; run `make build` first", folder.display());
        std::process::exit(2);
    }
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    for path in &paths {
        plugin_figures(path, &mut figures, &mut notes);
    }
    println!("per-operation figures, medians (fills: {ROUNDS} rounds of {FILLS}; round trip: {ROUND_TRIPS}; launches: 5 x {LAUNCHES}; allocations: 5 x {ALLOCATIONS} of 64 KiB)");
    println!(
        "| device | 4-byte fill enqueue, API | same, backend | core's share | core's share, calling thread's CPU | core alone (fills that do nothing) | empty launch round trip (p10 to p90) | launches/s | 64 KiB alloc+free/s, API | same, backend |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for figure in &figures {
        println!(
            "| {} | {:.0} ns | {:.0} ns | {:.0} ns | {:.0} ns ({:.0} against {:.0}) | {:.0} ns | {:.1} µs ({:.1} to {:.1}) | {:.0} | {:.0} | {:.0} |",
            figure.label,
            figure.fill_api_ns,
            figure.fill_backend_ns,
            figure.fill_api_ns - figure.fill_backend_ns,
            figure.fill_api_cpu_ns - figure.fill_backend_cpu_ns,
            figure.fill_api_cpu_ns,
            figure.fill_backend_cpu_ns,
            figure.core_alone_ns,
            figure.round_trip_us,
            figure.round_trip_spread.0,
            figure.round_trip_spread.1,
            figure.launches_per_second,
            figure.allocations_api_per_second,
            figure.allocations_backend_per_second,
        );
    }
    print_raw_opencl(&figures, &mut notes);
    println!();
    println!(
        "a graph of {GRAPH_LAUNCHES} empty launches against the same launches enqueued one by one, medians of {GRAPH_ROUNDS} rounds"
    );
    println!(
        "| device | replay | enqueue 1,000 launches (host) | replay (host) | replay / eager | op-by-op replay (host) | eager, enqueue to done | replay, enqueue to done |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for figure in &figures {
        let graph = &figure.graph;
        println!(
            "| {} | {} | {:.0} µs | {:.1} µs | {:.3}x | {:.0} µs | {:.0} µs | {:.0} µs |",
            figure.label,
            if graph.native { "native" } else { "op by op" },
            graph.eager_host_us,
            graph.replay_host_us,
            graph.replay_host_us / graph.eager_host_us,
            graph.emulated_host_us,
            graph.eager_done_us,
            graph.replay_done_us,
        );
    }
    println!();
    println!("64 MiB between host memory and a buffer, GB/s, medians of {MAPPED_ROUNDS} rounds (devices whose memory the host can map)");
    println!(
        "| device | host copy_from_slice | mapped upload | / host copy | mapped download | / host copy | Stream::write | Stream::read |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for figure in &figures {
        let Some(mapping) = &figure.mapping else {
            continue;
        };
        println!(
            "| {} | {:.2} | {:.2} | {:.2}x | {:.2} | {:.2}x | {:.2} | {:.2} |",
            figure.label,
            mapping.host_copy,
            mapping.mapped_upload,
            mapping.mapped_upload / mapping.host_copy,
            mapping.mapped_download,
            mapping.mapped_download / mapping.host_copy,
            mapping.stream_write,
            mapping.stream_read,
        );
    }
    for note in &notes {
        println!("not measured: {note}");
    }
}

//! The performance profile a report carries: launch latency and rate, the cost of enqueuing a
//! small operation, of replaying a graph against enqueuing its launches, transfer bandwidth
//! through streams and through mappings, and the allocation rate. Informational only: these figures never pass or fail a run, because
//! they depend on the machine and on what else it is doing.

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use xhal::{Device, Launch};

/// The figures, each `None` when it could not be measured (the reason is in `notes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerformanceProfile {
    /// Median time to launch an empty kernel and wait for it, in microseconds.
    pub launch_latency_us: Option<f64>,
    /// Empty-kernel launches per second when queued back to back.
    pub launches_per_second: Option<f64>,
    /// Median time to enqueue a 4-byte fill through the application API, in nanoseconds: what
    /// each small operation costs the thread that issues it (absent from reports before it).
    #[serde(default)]
    pub fill_enqueue_ns: Option<f64>,
    /// The host's time to replay a graph of 500 empty launches over its time to enqueue the
    /// same launches one by one (median of 5 rounds): below 1 where graphs pay off.
    #[serde(default)]
    pub graph_replay_ratio: Option<f64>,
    /// Whether that graph replayed as the device's native command lists (ABI 1.4).
    #[serde(default)]
    pub graph_native: Option<bool>,
    /// Host-to-device bandwidth in GB/s (best of the repetitions).
    pub host_to_device_gb_per_s: Option<f64>,
    /// Device-to-host bandwidth in GB/s.
    pub device_to_host_gb_per_s: Option<f64>,
    /// Device-to-device copy bandwidth in GB/s (bytes read plus bytes written).
    pub device_to_device_gb_per_s: Option<f64>,
    /// Host-to-device bandwidth through a mapping (`Buffer::map_mut`), in GB/s, on devices
    /// whose memory the host can map.
    #[serde(default)]
    pub mapped_upload_gb_per_s: Option<f64>,
    /// Device-to-host bandwidth through a mapping (`BufferSlice::map`), in GB/s.
    #[serde(default)]
    pub mapped_download_gb_per_s: Option<f64>,
    /// Bytes moved per transfer measurement.
    pub transfer_bytes: u64,
    /// Allocate-and-free pairs of 64 KiB per second.
    pub allocations_per_second: Option<f64>,
    /// Why a figure is missing.
    pub notes: Vec<String>,
}

const EMPTY_KERNEL: &str = r#"
@group(0) @binding(0) var<storage, read_write> sink: array<u32>;

@compute @workgroup_size(1)
fn touch(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x == 0xffffffffu {
        sink[0] = 1u;
    }
}
"#;

/// Measures the profile on `device`. Allocations go to the backend unless the process runs
/// with the caching allocator (the worker of `xhal-cts` turns it off).
pub fn measure(device: &Device) -> PerformanceProfile {
    let mut profile = PerformanceProfile::default();
    if let Err(error) = measure_launches(device, &mut profile) {
        profile.notes.push(format!("launch figures: {error}"));
    }
    if let Err(error) = measure_transfers(device, &mut profile) {
        profile.notes.push(format!("transfer figures: {error}"));
    }
    if let Err(error) = measure_allocations(device, &mut profile) {
        profile.notes.push(format!("allocation figures: {error}"));
    }
    profile
}

fn measure_launches(device: &Device, profile: &mut PerformanceProfile) -> xhal::Result<()> {
    let stream = device.create_stream()?;
    let sink = device.alloc::<u32>(1)?;
    let module = device.load_wgsl(EMPTY_KERNEL)?;
    let kernel = module.kernel("touch")?;
    let launch = Launch::new(&kernel).workgroups(1, 1, 1).buffer(&sink);
    // Warm up: first launches pay for pipeline creation and lazy initialisation.
    for _ in 0..5 {
        stream.launch(&launch)?;
    }
    stream.synchronize()?;
    let mut round_trips: Vec<Duration> = (0..50)
        .map(|_| {
            let started = Instant::now();
            stream.launch(&launch)?;
            stream.synchronize()?;
            Ok(started.elapsed())
        })
        .collect::<xhal::Result<_>>()?;
    round_trips.sort();
    profile.launch_latency_us = Some(round_trips[round_trips.len() / 2].as_secs_f64() * 1e6);

    let count = 500;
    let started = Instant::now();
    for _ in 0..count {
        stream.launch(&launch)?;
    }
    stream.synchronize()?;
    profile.launches_per_second = Some(count as f64 / started.elapsed().as_secs_f64());

    // Ten rounds of 1,000 fills of one word, the stream drained between rounds; the clock
    // stops before the drain.
    let words = device.alloc::<u32>(1024)?;
    let mut per_fill: Vec<f64> = Vec::with_capacity(10);
    for round in 0..10u32 {
        let started = Instant::now();
        for index in 0..1000usize {
            stream.fill(words.slice(index..index + 1), round)?;
        }
        per_fill.push(started.elapsed().as_secs_f64() * 1e9 / 1000.0);
        stream.synchronize()?;
    }
    per_fill.sort_by(f64::total_cmp);
    profile.fill_enqueue_ns = Some(per_fill[per_fill.len() / 2]);

    let mut graph = device.graph();
    let lane = graph.stream();
    for _ in 0..count {
        graph.launch(lane, &launch)?;
    }
    let graph = graph.build()?;
    let mut ratios = Vec::with_capacity(5);
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..count {
            stream.launch(&launch)?;
        }
        let eager = started.elapsed();
        stream.synchronize()?;
        let started = Instant::now();
        graph.replay(&stream)?;
        let replay = started.elapsed();
        stream.synchronize()?;
        ratios.push(replay.as_secs_f64() / eager.as_secs_f64().max(1e-9));
    }
    ratios.sort_by(f64::total_cmp);
    profile.graph_replay_ratio = Some(ratios[ratios.len() / 2]);
    profile.graph_native = Some(graph.is_native());
    Ok(())
}

fn measure_transfers(device: &Device, profile: &mut PerformanceProfile) -> xhal::Result<()> {
    let info = device.info();
    let bytes = (64u64 << 20)
        .min(info.max_allocation_size / 2)
        .min(info.total_memory / 4)
        & !3;
    if bytes < 4096 {
        profile.notes.push(format!(
            "the device allows too little memory ({bytes} bytes) for transfer figures"
        ));
        return Ok(());
    }
    profile.transfer_bytes = bytes;
    let words = (bytes / 4) as usize;
    let stream = device.create_stream()?;
    let host: Vec<u32> = (0..words as u32).collect();
    let mut back = vec![0u32; words];
    let first = device.alloc::<u32>(words)?;
    let second = device.alloc::<u32>(words)?;
    let best = |mut run: Box<dyn FnMut() -> xhal::Result<()> + '_>| -> xhal::Result<f64> {
        let mut best = Duration::MAX;
        for _ in 0..4 {
            let started = Instant::now();
            run()?;
            best = best.min(started.elapsed());
        }
        Ok(best.as_secs_f64().max(1e-9))
    };
    let write_seconds = best(Box::new(|| {
        stream.write(&first, &host)?;
        stream.synchronize()
    }))?;
    profile.host_to_device_gb_per_s = Some(bytes as f64 / write_seconds / 1e9);
    let read_seconds = best(Box::new(|| stream.read(&first, &mut back)))?;
    profile.device_to_host_gb_per_s = Some(bytes as f64 / read_seconds / 1e9);
    let copy_seconds = best(Box::new(|| {
        stream.copy(first.slice(..words), &second)?;
        stream.synchronize()
    }))?;
    profile.device_to_device_gb_per_s = Some(2.0 * bytes as f64 / copy_seconds / 1e9);
    if back != host {
        profile
            .notes
            .push("the data read back during the bandwidth measurement was wrong".to_string());
    }
    if !device.has_features(xhal::Features::HOST_MAPPABLE) {
        return Ok(());
    }
    let mut mapped = first;
    let upload_seconds = best(Box::new(|| {
        mapped.map_mut(..)?.copy_from_slice(&host);
        Ok(())
    }))?;
    profile.mapped_upload_gb_per_s = Some(bytes as f64 / upload_seconds / 1e9);
    let download_seconds = best(Box::new(|| {
        back.copy_from_slice(&mapped.map()?);
        Ok(())
    }))?;
    profile.mapped_download_gb_per_s = Some(bytes as f64 / download_seconds / 1e9);
    if back != host {
        profile
            .notes
            .push("the data read back through a mapping was wrong".to_string());
    }
    Ok(())
}

fn measure_allocations(device: &Device, profile: &mut PerformanceProfile) -> xhal::Result<()> {
    let count = 500;
    let started = Instant::now();
    for _ in 0..count {
        let buffer = device.alloc::<u8>(64 << 10)?;
        drop(buffer);
    }
    profile.allocations_per_second = Some(count as f64 / started.elapsed().as_secs_f64());
    Ok(())
}

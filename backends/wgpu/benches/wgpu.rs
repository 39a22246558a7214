//! What xhal adds on top of wgpu, each measurement against the same work written in raw wgpu
//! on the same adapter in the same run:
//!
//! - round trip: one empty-kernel dispatch, then wait for it;
//! - throughput: 1,000 back-to-back small dispatches, then one wait;
//! - bandwidth: a 64 MiB write, and a 64 MiB read.
//!
//! Run with `cargo bench -p xhal-wgpu`. `XHAL_WGPU_BENCH_ADAPTER` picks the adapter (its
//! index among the backend's devices, default 0). After criterion's own report each ratio
//! (xhal time / raw wgpu time) is measured again in rounds that alternate the two sides
//! (`xhal_bench_report::paired`), and the table of medians and quartiles is printed and written
//! to `target/criterion/xhal-wgpu-ratios-<adapter>.md`. Those paired ratios are the figures to quote:
//! criterion measures the two sides seconds apart, and on a shared machine the load changes in
//! between.

use criterion::{Criterion, Throughput};
use std::sync::Arc;
use std::time::Duration;
use xhal_bench_report::{duration_text, paired, publish};
use xhal_core::{Buffer, Device, Kernel, Launch, Runtime, Stream};
use xhal_wgpu::{WgpuBackend, WgpuDriver};

const BANDWIDTH_BYTES: usize = 64 << 20;
const DISPATCHES: usize = 1_000;

/// A kernel that does nothing, and one that does a little: one word per invocation.
const KERNELS: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn empty() {}

@compute @workgroup_size(64)
fn increment(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = data[id.x] + 1u;
    }
}
"#;

/// Words the small dispatches touch: one workgroup's worth.
const SMALL_WORDS: usize = 64;

struct XhalSide {
    _runtime: Runtime,
    stream: Stream,
    empty: Kernel,
    increment: Kernel,
    small: Buffer<u32>,
    large: Buffer<u8>,
}

struct RawSide {
    device: wgpu::Device,
    queue: wgpu::Queue,
    empty: wgpu::ComputePipeline,
    increment: wgpu::ComputePipeline,
    small_group: wgpu::BindGroup,
    large: wgpu::Buffer,
    staging: wgpu::Buffer,
    upload: wgpu::Buffer,
}

fn adapter_index() -> u32 {
    std::env::var("XHAL_WGPU_BENCH_ADAPTER")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

fn xhal_side() -> (XhalSide, String) {
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(Arc::new(WgpuBackend::new(WgpuDriver::from_env())))
        .build()
        .expect("a runtime with the wgpu backend");
    let device: Device = runtime
        .open(&format!("wgpu:{}", adapter_index()))
        .expect("a wgpu adapter");
    let name = device.info().name.clone();
    let stream = device.create_stream().expect("a stream");
    let module = device.load_wgsl(KERNELS).expect("the benchmark kernels");
    let side = XhalSide {
        stream,
        empty: module.kernel("empty").expect("kernel `empty`"),
        increment: module.kernel("increment").expect("kernel `increment`"),
        small: device.alloc::<u32>(SMALL_WORDS).expect("a small buffer"),
        large: device.alloc::<u8>(BANDWIDTH_BYTES).expect("a 64 MiB buffer"),
        _runtime: runtime,
    };
    (side, name)
}

/// The same adapter as the xhal side: the backend lists usable adapters in wgpu's order.
fn raw_side(name: &str) -> RawSide {
    let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
        flags: wgpu::InstanceFlags::VALIDATION_INDIRECT_CALL,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    });
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let adapter = adapters
        .into_iter()
        .find(|adapter| {
            let info = adapter.get_info();
            format!("{} ({:?})", info.name, info.backend) == name
        })
        .expect("the adapter the xhal side opened");
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: None,
        required_features: wgpu::Features::empty(),
        required_limits: adapter.limits(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .expect("a raw wgpu device");
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(KERNELS.into()),
    });
    let pipeline = |entry: &str| {
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    };
    let empty = pipeline("empty");
    let increment = pipeline("increment");
    let small = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: (SMALL_WORDS * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let small_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &increment.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: small.as_entire_binding(),
        }],
    });
    let large = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: BANDWIDTH_BYTES as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: BANDWIDTH_BYTES as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // Uploads go through one staging buffer kept for the whole run, as a careful program
    // would: `queue.write_buffer` takes a fresh staging allocation per call, and whether the
    // allocator then recycles its memory or maps fresh pages (and faults on every one of them)
    // depends on what else the device holds, which would make the baseline measure allocator luck.
    let upload = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: BANDWIDTH_BYTES as u64,
        usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    RawSide {
        upload,
        device,
        queue,
        empty,
        increment,
        small_group,
        large,
        staging,
    }
}

impl RawSide {
    fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        group: Option<&wgpu::BindGroup>,
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(pipeline);
        if let Some(group) = group {
            pass.set_bind_group(0, group, &[]);
        }
        pass.dispatch_workgroups(1, 1, 1);
    }

    fn wait(&self, submission: wgpu::SubmissionIndex) {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .expect("raw wgpu poll");
    }

    fn round_trip(&self) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        self.dispatch(&mut encoder, &self.empty, None);
        let submission = self.queue.submit([encoder.finish()]);
        self.wait(submission);
    }

    fn many_dispatches(&self) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        for _ in 0..DISPATCHES {
            self.dispatch(&mut encoder, &self.increment, Some(&self.small_group));
        }
        let submission = self.queue.submit([encoder.finish()]);
        self.wait(submission);
    }

    fn write(&self, data: &[u8]) {
        self.upload
            .map_async(wgpu::MapMode::Write, .., |result| result.expect("raw map"));
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .expect("raw wgpu poll");
        self.upload
            .get_mapped_range_mut(..)
            .expect("raw mapped range")
            .copy_from_slice(data);
        self.upload.unmap();
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.upload, 0, &self.large, 0, BANDWIDTH_BYTES as u64);
        let submission = self.queue.submit([encoder.finish()]);
        self.wait(submission);
    }

    fn read(&self, out: &mut [u8]) {
        let mut encoder = self.device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&self.large, 0, &self.staging, 0, BANDWIDTH_BYTES as u64);
        let submission = self.queue.submit([encoder.finish()]);
        self.staging
            .map_async(wgpu::MapMode::Read, .., |result| result.expect("raw map"));
        self.wait(submission);
        {
            let view = self.staging.get_mapped_range(..).expect("raw mapped range");
            out.copy_from_slice(&view);
        }
        self.staging.unmap();
    }
}

fn main() {
    let (xhal, name) = xhal_side();
    let raw = raw_side(&name);
    let mut criterion = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    let mut group = criterion.benchmark_group("round_trip");
    group.bench_function("xhal", |bench| {
        bench.iter(|| {
            xhal.stream
                .launch(&Launch::new(&xhal.empty).workgroups(1, 1, 1))
                .expect("launch");
            xhal.stream.synchronize().expect("synchronize");
        })
    });
    group.bench_function("wgpu", |bench| bench.iter(|| raw.round_trip()));
    group.finish();

    let mut group = criterion.benchmark_group("dispatches_1000");
    group.sample_size(20);
    group.bench_function("xhal", |bench| {
        bench.iter(|| {
            for _ in 0..DISPATCHES {
                xhal.stream
                    .launch(&Launch::new(&xhal.increment).workgroups(1, 1, 1).buffer(&xhal.small))
                    .expect("launch");
            }
            xhal.stream.synchronize().expect("synchronize");
        })
    });
    group.bench_function("wgpu", |bench| bench.iter(|| raw.many_dispatches()));
    group.finish();

    let data: Vec<u8> = (0..BANDWIDTH_BYTES).map(|index| index as u8).collect();
    let mut out = vec![0u8; BANDWIDTH_BYTES];
    let mut group = criterion.benchmark_group("write_64mib");
    group
        .sample_size(10)
        .throughput(Throughput::Bytes(BANDWIDTH_BYTES as u64));
    group.bench_function("xhal", |bench| {
        bench.iter(|| xhal.stream.write(&xhal.large, &data).expect("write"))
    });
    group.bench_function("wgpu", |bench| bench.iter(|| raw.write(&data)));
    group.finish();

    let mut group = criterion.benchmark_group("read_64mib");
    group
        .sample_size(10)
        .throughput(Throughput::Bytes(BANDWIDTH_BYTES as u64));
    group.bench_function("xhal", |bench| {
        bench.iter(|| xhal.stream.read(&xhal.large, &mut out).expect("read"))
    });
    group.bench_function("wgpu", |bench| bench.iter(|| raw.read(&mut out)));
    group.finish();
    criterion.final_summary();

    let round_trip = paired(
        61,
        50,
        || {
            xhal.stream
                .launch(&Launch::new(&xhal.empty).workgroups(1, 1, 1))
                .expect("launch");
            xhal.stream.synchronize().expect("synchronize");
        },
        || raw.round_trip(),
    );
    let dispatches = paired(
        61,
        1,
        || {
            for _ in 0..DISPATCHES {
                xhal.stream
                    .launch(&Launch::new(&xhal.increment).workgroups(1, 1, 1).buffer(&xhal.small))
                    .expect("launch");
            }
            xhal.stream.synchronize().expect("synchronize");
        },
        || raw.many_dispatches(),
    );
    let write = paired(
        21,
        2,
        || {
            xhal.stream.write(&xhal.large, &data).expect("write");
        },
        || raw.write(&data),
    );
    // Both sides read into the same host memory, so that only the path differs.
    let out = std::cell::RefCell::new(out);
    let read = paired(
        21,
        2,
        || xhal.stream.read(&xhal.large, &mut out.borrow_mut()).expect("read"),
        || raw.read(&mut out.borrow_mut()),
    );
    let rows: Vec<String> = [
        ("(a) empty-kernel dispatch and wait", round_trip, 1.10),
        ("(b) 1,000 dependent dispatches, then one wait", dispatches, 1.05),
        ("(c) 64 MiB write", write, 1.05),
        ("(c) 64 MiB read", read, 1.05),
    ]
    .into_iter()
    .map(|(label, measured, target)| {
        format!(
            "| {label} | {} | {} | {} | ≤ {target:.2} |",
            duration_text(measured.ours_ns),
            duration_text(measured.baseline_ns),
            measured.ratio_text()
        )
    })
    .collect();
    publish(
        &format!("xhal-wgpu-ratios-{}.md", adapter_index()),
        &[format!("adapter: {name}")],
        &[
            "measurement",
            "xhal-wgpu",
            "raw wgpu",
            "ratio, median of paired rounds (quartiles)",
            "target",
        ],
        &rows,
    );
}

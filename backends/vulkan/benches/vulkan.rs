//! xhal-vulkan against the same work written directly in ash, measured in the same run:
//!
//! - round trip: one dispatch of an empty kernel, then wait for it;
//! - 1,000 back-to-back dispatches of a small dependent kernel (each increments the same 64
//!   words, so each needs the one before it), then one wait;
//! - 64 MiB written from the host and read back.
//!
//! The ash baseline records and submits what a careful hand-written program would: one command
//! buffer per round trip, all 1,000 dispatches in one command buffer with a barrier between
//! each, and plain copies through the mapping where device memory is host-visible (else
//! through a staging buffer). After criterion's report each ratio (xhal / ash) is measured
//! again in rounds that alternate the two sides (`xhal_bench_report::paired`), and the table of
//! medians and quartiles is printed and written to `target/criterion/xhal-vulkan-ratios.md`.
//! Those paired ratios are the figures to quote: criterion measures the two sides seconds
//! apart, and on a shared machine the load changes in between.
//!
//! Run with `cargo bench -p xhal-vulkan`. Needs a Vulkan device (lavapipe will do).

use ash::vk;
use criterion::{Criterion, Throughput};
use std::sync::Arc;
use std::time::Duration;
use xhal_bench_report::{duration_text, paired, publish};
use xhal_core::backend::Backend;
use xhal_core::{Launch, Runtime};
use xhal_vulkan::{VulkanBackend, VulkanDriver};

const BYTES: usize = 64 << 20;
const DISPATCHES: usize = 1000;

const EMPTY: &str = "@compute @workgroup_size(1) fn empty() {}";
const INCREMENT: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: array<u32>;
@compute @workgroup_size(64)
fn increment(@builtin(local_invocation_index) lane: u32) { counter[lane] += 1u; }
"#;

fn spirv(source: &str) -> Vec<u32> {
    xhal_core::kernel::parse_wgsl(source).unwrap().to_spirv().unwrap()
}

/// The same work, written directly against ash.
struct Raw {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    queue: vk::Queue,
    command_pool: vk::CommandPool,
    command_buffer: vk::CommandBuffer,
    /// The 1,000 dependent dispatches, recorded once and submitted again for each replay.
    recorded: Option<vk::CommandBuffer>,
    timeline: vk::Semaphore,
    value: u64,
    empty: (vk::PipelineLayout, vk::Pipeline),
    increment: (vk::PipelineLayout, vk::Pipeline),
    set: vk::DescriptorSet,
    counter: (vk::Buffer, vk::DeviceMemory),
    big: (vk::Buffer, vk::DeviceMemory, *mut u8),
}

impl Raw {
    fn new() -> Raw {
        // SAFETY: a benchmark setting up Vulkan in the textbook way; every handle is used on
        // the device it was made on and destroyed in `Drop`.
        unsafe {
            let entry = ash::Entry::load().unwrap();
            let application = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
            let instance = entry
                .create_instance(&vk::InstanceCreateInfo::default().application_info(&application), None)
                .unwrap();
            let physical = instance.enumerate_physical_devices().unwrap()[0];
            let family = instance
                .get_physical_device_queue_family_properties(physical)
                .iter()
                .position(|family| family.queue_flags.contains(vk::QueueFlags::COMPUTE))
                .unwrap() as u32;
            let priorities = [1.0];
            let queues = [vk::DeviceQueueCreateInfo::default()
                .queue_family_index(family)
                .queue_priorities(&priorities)];
            let mut features12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
            let device = instance
                .create_device(
                    physical,
                    &vk::DeviceCreateInfo::default()
                        .queue_create_infos(&queues)
                        .push_next(&mut features12),
                    None,
                )
                .unwrap();
            let queue = device.get_device_queue(family, 0);
            let command_pool = device
                .create_command_pool(
                    &vk::CommandPoolCreateInfo::default()
                        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
                        .queue_family_index(family),
                    None,
                )
                .unwrap();
            let command_buffer = device
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(command_pool)
                        .command_buffer_count(1),
                )
                .unwrap()[0];
            let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
            let timeline = device
                .create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut kind), None)
                .unwrap();

            let binding = [vk::DescriptorSetLayoutBinding::default()
                .binding(0)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(1)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)];
            let one_buffer = device
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&binding), None)
                .unwrap();
            let no_buffer = device
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default(), None)
                .unwrap();
            let pipeline = |source: &str, name: &std::ffi::CStr, layout: vk::DescriptorSetLayout| {
                let code = spirv(source);
                let shader = device
                    .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
                    .unwrap();
                let layouts = [layout];
                let pipeline_layout = device
                    .create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None)
                    .unwrap();
                let stage = vk::PipelineShaderStageCreateInfo::default()
                    .stage(vk::ShaderStageFlags::COMPUTE)
                    .module(shader)
                    .name(name);
                let pipeline = device
                    .create_compute_pipelines(
                        vk::PipelineCache::null(),
                        &[vk::ComputePipelineCreateInfo::default()
                            .stage(stage)
                            .layout(pipeline_layout)],
                        None,
                    )
                    .unwrap()[0];
                device.destroy_shader_module(shader, None);
                (pipeline_layout, pipeline)
            };
            let empty = pipeline(EMPTY, c"empty", no_buffer);
            let increment = pipeline(INCREMENT, c"increment", one_buffer);

            let memory_properties = instance.get_physical_device_memory_properties(physical);
            let wanted = vk::MemoryPropertyFlags::DEVICE_LOCAL
                | vk::MemoryPropertyFlags::HOST_VISIBLE
                | vk::MemoryPropertyFlags::HOST_COHERENT;
            let buffer = |size: u64| {
                let buffer = device
                    .create_buffer(
                        &vk::BufferCreateInfo::default().size(size).usage(
                            vk::BufferUsageFlags::STORAGE_BUFFER
                                | vk::BufferUsageFlags::TRANSFER_SRC
                                | vk::BufferUsageFlags::TRANSFER_DST,
                        ),
                        None,
                    )
                    .unwrap();
                let requirements = device.get_buffer_memory_requirements(buffer);
                let memory_type = (0..memory_properties.memory_type_count)
                    .find(|&index| {
                        requirements.memory_type_bits & (1 << index) != 0
                            && memory_properties.memory_types[index as usize]
                                .property_flags
                                .contains(wanted)
                    })
                    .expect(
                        "this baseline needs host-visible device-local memory, as lavapipe and integrated GPUs have",
                    );
                let memory = device
                    .allocate_memory(
                        &vk::MemoryAllocateInfo::default()
                            .allocation_size(requirements.size)
                            .memory_type_index(memory_type),
                        None,
                    )
                    .unwrap();
                device.bind_buffer_memory(buffer, memory, 0).unwrap();
                (buffer, memory)
            };
            let counter = buffer(256);
            let (big_buffer, big_memory) = buffer(BYTES as u64);
            let mapped = device
                .map_memory(big_memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .unwrap()
                .cast::<u8>();

            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: 1,
            }];
            let pool = device
                .create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes),
                    None,
                )
                .unwrap();
            let layouts = [one_buffer];
            let set = device
                .allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(pool)
                        .set_layouts(&layouts),
                )
                .unwrap()[0];
            let info = [vk::DescriptorBufferInfo {
                buffer: counter.0,
                offset: 0,
                range: 256,
            }];
            device.update_descriptor_sets(
                &[vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info)],
                &[],
            );
            Raw {
                _entry: entry,
                instance,
                device,
                queue,
                command_pool,
                command_buffer,
                recorded: None,
                timeline,
                value: 0,
                empty,
                increment,
                set,
                counter,
                big: (big_buffer, big_memory, mapped),
            }
        }
    }

    /// Records with `record`, submits, and waits for the work.
    fn run(&mut self, record: impl FnOnce(&ash::Device, vk::CommandBuffer)) {
        self.value += 1;
        // SAFETY: the command buffer is idle (the last run was waited for).
        unsafe {
            let device = &self.device;
            device
                .reset_command_buffer(self.command_buffer, vk::CommandBufferResetFlags::empty())
                .unwrap();
            device
                .begin_command_buffer(
                    self.command_buffer,
                    &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .unwrap();
            record(device, self.command_buffer);
            device.end_command_buffer(self.command_buffer).unwrap();
            let values = [self.value];
            let mut timeline_info = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
            let command_buffers = [self.command_buffer];
            let semaphores = [self.timeline];
            device
                .queue_submit(
                    self.queue,
                    &[vk::SubmitInfo::default()
                        .command_buffers(&command_buffers)
                        .signal_semaphores(&semaphores)
                        .push_next(&mut timeline_info)],
                    vk::Fence::null(),
                )
                .unwrap();
            device
                .wait_semaphores(
                    &vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values),
                    u64::MAX,
                )
                .unwrap();
        }
    }

    fn empty_round_trip(&mut self) {
        let (_, pipeline) = self.empty;
        self.run(|device, command_buffer| {
            // SAFETY: recording into a command buffer in the recording state.
            unsafe {
                device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, pipeline);
                device.cmd_dispatch(command_buffer, 1, 1, 1);
            }
        });
    }

    /// Records the 1,000 dependent dispatches into `command_buffer`, which is recording.
    fn record_dispatches(&self, command_buffer: vk::CommandBuffer) {
        let (layout, pipeline) = self.increment;
        let device = &self.device;
        let barrier = [vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
        // SAFETY: recording into a command buffer in the recording state.
        unsafe {
            device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, pipeline);
            device.cmd_bind_descriptor_sets(
                command_buffer,
                vk::PipelineBindPoint::COMPUTE,
                layout,
                0,
                &[self.set],
                &[],
            );
            for _ in 0..DISPATCHES {
                device.cmd_pipeline_barrier(
                    command_buffer,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::DependencyFlags::empty(),
                    &barrier,
                    &[],
                    &[],
                );
                device.cmd_dispatch(command_buffer, 1, 1, 1);
            }
        }
    }

    fn dependent_dispatches(&mut self) {
        let command_buffer = self.command_buffer;
        self.value += 1;
        // SAFETY: the command buffer is idle (the last run was waited for).
        unsafe {
            self.device
                .reset_command_buffer(command_buffer, vk::CommandBufferResetFlags::empty())
                .unwrap();
            self.device
                .begin_command_buffer(
                    command_buffer,
                    &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                )
                .unwrap();
        }
        self.record_dispatches(command_buffer);
        // SAFETY: the command buffer is recording.
        unsafe { self.device.end_command_buffer(command_buffer).unwrap() };
        self.submit_and_wait(command_buffer);
    }

    /// The same dispatches from a command buffer recorded once: what a graph replay is to Vulkan.
    fn replay_recorded(&mut self) {
        let command_buffer = match self.recorded {
            Some(command_buffer) => command_buffer,
            None => {
                // SAFETY: a new command buffer of this pool, recorded once and only submitted after.
                let command_buffer = unsafe {
                    self.device
                        .allocate_command_buffers(
                            &vk::CommandBufferAllocateInfo::default()
                                .command_pool(self.command_pool)
                                .level(vk::CommandBufferLevel::PRIMARY)
                                .command_buffer_count(1),
                        )
                        .unwrap()[0]
                };
                // SAFETY: the command buffer is new.
                unsafe {
                    self.device
                        .begin_command_buffer(command_buffer, &vk::CommandBufferBeginInfo::default())
                        .unwrap()
                };
                self.record_dispatches(command_buffer);
                // SAFETY: the command buffer is recording.
                unsafe { self.device.end_command_buffer(command_buffer).unwrap() };
                self.recorded = Some(command_buffer);
                command_buffer
            }
        };
        self.value += 1;
        self.submit_and_wait(command_buffer);
    }

    /// Submits `command_buffer` signalling the timeline's current value, and waits for it.
    fn submit_and_wait(&self, command_buffer: vk::CommandBuffer) {
        let values = [self.value];
        let mut timeline_info = vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&values);
        let command_buffers = [command_buffer];
        let semaphores = [self.timeline];
        // SAFETY: the command buffer is executable and no earlier submission of it is pending.
        unsafe {
            self.device
                .queue_submit(
                    self.queue,
                    &[vk::SubmitInfo::default()
                        .command_buffers(&command_buffers)
                        .signal_semaphores(&semaphores)
                        .push_next(&mut timeline_info)],
                    vk::Fence::null(),
                )
                .unwrap();
            self.device
                .wait_semaphores(
                    &vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values),
                    u64::MAX,
                )
                .unwrap();
        }
    }

    fn write(&self, data: &[u8]) {
        // SAFETY: the mapping holds BYTES bytes and no work is pending.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.big.2, data.len()) };
    }

    fn read(&self, out: &mut [u8]) {
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(self.big.2, out.as_mut_ptr(), out.len()) };
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: the device is idle after the wait; everything here was made on it.
        unsafe {
            let device = &self.device;
            device.device_wait_idle().unwrap();
            device.destroy_buffer(self.counter.0, None);
            device.free_memory(self.counter.1, None);
            device.destroy_buffer(self.big.0, None);
            device.free_memory(self.big.1, None);
            for (layout, pipeline) in [self.empty, self.increment] {
                device.destroy_pipeline(pipeline, None);
                device.destroy_pipeline_layout(layout, None);
            }
            device.destroy_semaphore(self.timeline, None);
            device.destroy_command_pool(self.command_pool, None);
            device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}

fn main() {
    let backend = VulkanBackend::new(VulkanDriver::from_env());
    if let Err(error) = backend.device_count() {
        eprintln!("no Vulkan device, nothing to measure: {error}");
        return;
    }
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(Arc::new(backend))
        .build()
        .unwrap();
    let device = runtime.open("vulkan:0").unwrap();
    let device_name = device.info().name.clone();
    let stream = device.create_stream().unwrap();
    let empty = device.load_wgsl(EMPTY).unwrap().kernel("empty").unwrap();
    let increment = device.load_wgsl(INCREMENT).unwrap().kernel("increment").unwrap();
    let counter = device.alloc_from(&stream, &[0u32; 64]).unwrap();
    let big = device.alloc::<u8>(BYTES).unwrap();
    let mut raw = Raw::new();
    let data = vec![0x5au8; BYTES];
    let mut back = vec![0u8; BYTES];

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20)
        .configure_from_args();

    let mut group = criterion.benchmark_group("vulkan-round-trip");
    group.bench_function("xhal", |bench| {
        bench.iter(|| {
            stream.launch(&Launch::new(&empty).workgroups(1, 1, 1)).unwrap();
            stream.synchronize().unwrap();
        })
    });
    group.bench_function("ash", |bench| bench.iter(|| raw.empty_round_trip()));
    group.finish();

    let mut group = criterion.benchmark_group("vulkan-1000-dispatches");
    group.bench_function("xhal", |bench| {
        bench.iter(|| {
            for _ in 0..DISPATCHES {
                stream
                    .launch(&Launch::new(&increment).workgroups(1, 1, 1).buffer(&counter))
                    .unwrap();
            }
            stream.synchronize().unwrap();
        })
    });
    group.bench_function("ash", |bench| bench.iter(|| raw.dependent_dispatches()));
    group.finish();

    let mut group = criterion.benchmark_group("vulkan-64MiB");
    group.throughput(Throughput::Bytes(BYTES as u64));
    group.bench_function("xhal-write", |bench| bench.iter(|| stream.write(&big, &data).unwrap()));
    group.bench_function("ash-write", |bench| bench.iter(|| raw.write(&data)));
    group.bench_function("xhal-read", |bench| {
        bench.iter(|| stream.read(&big, &mut back).unwrap())
    });
    group.bench_function("ash-read", |bench| bench.iter(|| raw.read(&mut back)));
    group.finish();
    criterion.final_summary();

    let round_trip = paired(
        61,
        50,
        || {
            stream.launch(&Launch::new(&empty).workgroups(1, 1, 1)).unwrap();
            stream.synchronize().unwrap();
        },
        || raw.empty_round_trip(),
    );
    let dispatches = paired(
        61,
        1,
        || {
            for _ in 0..DISPATCHES {
                stream
                    .launch(&Launch::new(&increment).workgroups(1, 1, 1).buffer(&counter))
                    .unwrap();
            }
            stream.synchronize().unwrap();
        },
        || raw.dependent_dispatches(),
    );
    let mut graph = device.graph();
    let lane = graph.stream();
    for _ in 0..DISPATCHES {
        graph
            .launch(lane, &Launch::new(&increment).workgroups(1, 1, 1).buffer(&counter))
            .unwrap();
    }
    let graph = graph.build().unwrap();
    assert!(
        graph.is_native(),
        "the Vulkan backend replays graphs as command buffers"
    );
    let replay = paired(
        61,
        1,
        || {
            graph.replay(&stream).unwrap();
            stream.synchronize().unwrap();
        },
        || raw.replay_recorded(),
    );
    let write = paired(31, 2, || stream.write(&big, &data).unwrap(), || raw.write(&data));
    // Both sides read into the same host memory, so that only the path differs.
    let back = std::cell::RefCell::new(back);
    let read = paired(
        31,
        2,
        || stream.read(&big, &mut back.borrow_mut()).unwrap(),
        || raw.read(&mut back.borrow_mut()),
    );
    let rows: Vec<String> = [
        ("(a) empty-kernel dispatch and wait", round_trip, 1.10),
        ("(b) 1,000 dependent dispatches, then one wait", dispatches, 1.05),
        (
            "(d) the 1,000 dispatches recorded once: a graph replay against a command buffer submitted again, then one wait",
            replay,
            1.05,
        ),
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
        "xhal-vulkan-ratios.md",
        &[format!("device: {device_name}")],
        &[
            "measurement",
            "xhal-vulkan",
            "ash",
            "ratio, median of paired rounds (quartiles)",
            "target",
        ],
        &rows,
    );
}

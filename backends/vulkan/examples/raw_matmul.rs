//! The raw Vulkan baseline for the PyTorch device's matrix products
//! (python/benches/torch_ops.py): python/benches/raw/matmul.comp, compiled to SPIR-V by
//! glslang, on the first Vulkan device through ash alone, with nothing of xhal in between. For
//! each order n given, the product of two n x n float matrices is timed (one run to warm up,
//! then as many as fit a second, at most 20, recorded in one command buffer with a barrier
//! between runs), checked against a product computed here on a sample of rows, and printed as
//! one JSON object a line:
//!
//!   {"n": 1024, "ms": 12.3, "gflops": 174.2, "device": "...", "max_error": 1.2e-06}
//!
//!   glslangValidator -V python/benches/raw/matmul.comp -o target/raw_matmul.spv
//!   cargo run --release -p xhal-vulkan --example raw_matmul -- target/raw_matmul.spv 256 1024
//!
//! Exit status: 0 when every product was right, 1 when one was wrong, 2 on a usage or Vulkan
//! error (named on stderr).

use ash::vk;
use std::process::exit;
use std::time::Instant;

/// The shader's workgroup computes a BLOCK x BLOCK block of the product.
const BLOCK: u32 = 64;
/// Rows of the product checked against the host's.
const CHECKED_ROWS: usize = 8;

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    eprintln!("raw_matmul: {what} failed: {error}");
    exit(2)
}

/// Unwraps a Vulkan result or exits naming the call.
trait OrFail<T> {
    fn or_fail(self, what: &str) -> T;
}

impl<T, E: std::fmt::Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, what: &str) -> T {
        self.unwrap_or_else(|error| fail(what, error))
    }
}

/// A host-visible, coherent storage buffer and its mapping.
struct Matrix {
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    mapped: *mut f32,
}

/// `text` as a JSON string literal: a driver's device name is free text.
fn json_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' | '\\' => quoted.extend(['\\', character]),
            control if u32::from(control) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(control))),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// A pseudo-random float in [-1, 1) from a 32-bit linear congruential state.
fn next_value(state: &mut u32) -> f32 {
    *state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
    (*state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    if arguments.len() < 3 {
        eprintln!("usage: raw_matmul SHADER.spv N [N...]");
        exit(2);
    }
    let orders: Vec<u32> = arguments[2..]
        .iter()
        .map(|text| match text.parse::<u32>() {
            Ok(n) if (1..=8192).contains(&n) => n,
            _ => {
                eprintln!("raw_matmul: the order {text:?} is not a whole number from 1 to 8192");
                exit(2)
            }
        })
        .collect();
    let code_bytes =
        std::fs::read(&arguments[1]).unwrap_or_else(|error| fail(&format!("reading {}", arguments[1]), error));
    if !code_bytes.len().is_multiple_of(4) || code_bytes.len() < 20 || code_bytes[..4] != 0x0723_0203u32.to_le_bytes() {
        eprintln!(
            "raw_matmul: {} is not a SPIR-V module (little-endian words, magic 0x07230203)",
            arguments[1]
        );
        exit(2);
    }
    let code: Vec<u32> = code_bytes
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();

    // SAFETY: a benchmark setting up Vulkan in the textbook way; every handle is used on the
    // device it was made on, and the process ends when the measurements do.
    unsafe {
        let entry = ash::Entry::load().or_fail("loading libvulkan");
        let application = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        let instance = entry
            .create_instance(&vk::InstanceCreateInfo::default().application_info(&application), None)
            .or_fail("vkCreateInstance");
        let physical = *instance
            .enumerate_physical_devices()
            .or_fail("vkEnumeratePhysicalDevices")
            .first()
            .unwrap_or_else(|| fail("finding a Vulkan device", "there is none"));
        let properties = instance.get_physical_device_properties(physical);
        let device_name = properties
            .device_name_as_c_str()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let family = instance
            .get_physical_device_queue_family_properties(physical)
            .iter()
            .position(|family| family.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .unwrap_or_else(|| fail("finding a compute queue", "the device has none")) as u32;
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let device = instance
            .create_device(
                physical,
                &vk::DeviceCreateInfo::default().queue_create_infos(&queues),
                None,
            )
            .or_fail("vkCreateDevice");
        let queue = device.get_device_queue(family, 0);
        let command_pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
                    .queue_family_index(family),
                None,
            )
            .or_fail("vkCreateCommandPool");
        let command_buffer = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(command_pool)
                    .command_buffer_count(1),
            )
            .or_fail("vkAllocateCommandBuffers")[0];
        let fence = device
            .create_fence(&vk::FenceCreateInfo::default(), None)
            .or_fail("vkCreateFence");

        let bindings: Vec<_> = (0..3)
            .map(|binding| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let set_layout = device
            .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
            .or_fail("vkCreateDescriptorSetLayout");
        let set_layouts = [set_layout];
        let push_constants = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(4)];
        let pipeline_layout = device
            .create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default()
                    .set_layouts(&set_layouts)
                    .push_constant_ranges(&push_constants),
                None,
            )
            .or_fail("vkCreatePipelineLayout");
        let shader = device
            .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
            .or_fail("vkCreateShaderModule");
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(shader)
            .name(c"main");
        let pipeline = device
            .create_compute_pipelines(
                vk::PipelineCache::null(),
                &[vk::ComputePipelineCreateInfo::default()
                    .stage(stage)
                    .layout(pipeline_layout)],
                None,
            )
            .map_err(|(_, error)| error)
            .or_fail("vkCreateComputePipelines")[0];
        let pool_sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 3,
        }];
        let descriptor_pool = device
            .create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .flags(vk::DescriptorPoolCreateFlags::FREE_DESCRIPTOR_SET)
                    .max_sets(1)
                    .pool_sizes(&pool_sizes),
                None,
            )
            .or_fail("vkCreateDescriptorPool");

        let memory_properties = instance.get_physical_device_memory_properties(physical);
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let make_matrix = |elements: usize| -> Matrix {
            let size = (elements * 4) as u64;
            let buffer = device
                .create_buffer(
                    &vk::BufferCreateInfo::default()
                        .size(size)
                        .usage(vk::BufferUsageFlags::STORAGE_BUFFER),
                    None,
                )
                .or_fail("vkCreateBuffer");
            let requirements = device.get_buffer_memory_requirements(buffer);
            let memory_type = (0..memory_properties.memory_type_count)
                .find(|&index| {
                    requirements.memory_type_bits & (1 << index) != 0
                        && memory_properties.memory_types[index as usize]
                            .property_flags
                            .contains(wanted)
                })
                .unwrap_or_else(|| fail("finding memory", "this baseline needs host-visible, coherent memory"));
            let memory = device
                .allocate_memory(
                    &vk::MemoryAllocateInfo::default()
                        .allocation_size(requirements.size)
                        .memory_type_index(memory_type),
                    None,
                )
                .or_fail("vkAllocateMemory");
            device
                .bind_buffer_memory(buffer, memory, 0)
                .or_fail("vkBindBufferMemory");
            let mapped = device
                .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                .or_fail("vkMapMemory")
                .cast::<f32>();
            Matrix { buffer, memory, mapped }
        };

        let mut wrong = false;
        for &n in &orders {
            let elements = n as usize * n as usize;
            let matrices = [make_matrix(elements), make_matrix(elements), make_matrix(elements)];
            let mut state = 12_345u32;
            let a = std::slice::from_raw_parts_mut(matrices[0].mapped, elements);
            let b = std::slice::from_raw_parts_mut(matrices[1].mapped, elements);
            a.iter_mut().for_each(|value| *value = next_value(&mut state));
            b.iter_mut().for_each(|value| *value = next_value(&mut state));
            let set = device
                .allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(descriptor_pool)
                        .set_layouts(&set_layouts),
                )
                .or_fail("vkAllocateDescriptorSets")[0];
            let infos: Vec<[vk::DescriptorBufferInfo; 1]> = matrices
                .iter()
                .map(|matrix| {
                    [vk::DescriptorBufferInfo {
                        buffer: matrix.buffer,
                        offset: 0,
                        range: vk::WHOLE_SIZE,
                    }]
                })
                .collect();
            let writes: Vec<_> = infos
                .iter()
                .enumerate()
                .map(|(binding, info)| {
                    vk::WriteDescriptorSet::default()
                        .dst_set(set)
                        .dst_binding(binding as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(info)
                })
                .collect();
            device.update_descriptor_sets(&writes, &[]);

            // Records `runs` products, a barrier between each, submits them and waits.
            let run = |runs: u32| -> f64 {
                device
                    .reset_command_buffer(command_buffer, vk::CommandBufferResetFlags::empty())
                    .or_fail("vkResetCommandBuffer");
                device
                    .begin_command_buffer(
                        command_buffer,
                        &vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
                    )
                    .or_fail("vkBeginCommandBuffer");
                device.cmd_bind_pipeline(command_buffer, vk::PipelineBindPoint::COMPUTE, pipeline);
                device.cmd_bind_descriptor_sets(
                    command_buffer,
                    vk::PipelineBindPoint::COMPUTE,
                    pipeline_layout,
                    0,
                    &[set],
                    &[],
                );
                device.cmd_push_constants(
                    command_buffer,
                    pipeline_layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &n.to_le_bytes(),
                );
                let barrier = [vk::MemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::SHADER_WRITE)
                    .dst_access_mask(vk::AccessFlags::SHADER_WRITE)];
                let groups = n.div_ceil(BLOCK);
                for index in 0..runs {
                    if index > 0 {
                        device.cmd_pipeline_barrier(
                            command_buffer,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::PipelineStageFlags::COMPUTE_SHADER,
                            vk::DependencyFlags::empty(),
                            &barrier,
                            &[],
                            &[],
                        );
                    }
                    device.cmd_dispatch(command_buffer, groups, groups, 1);
                }
                device.end_command_buffer(command_buffer).or_fail("vkEndCommandBuffer");
                let command_buffers = [command_buffer];
                let started = Instant::now();
                device
                    .queue_submit(
                        queue,
                        &[vk::SubmitInfo::default().command_buffers(&command_buffers)],
                        fence,
                    )
                    .or_fail("vkQueueSubmit");
                device
                    .wait_for_fences(&[fence], true, u64::MAX)
                    .or_fail("vkWaitForFences");
                let seconds = started.elapsed().as_secs_f64();
                device.reset_fences(&[fence]).or_fail("vkResetFences");
                seconds
            };
            let once = run(1);
            let runs = ((1.0 / once.max(1e-9)) as u32).clamp(1, 20);
            let seconds = run(runs) / f64::from(runs);

            let c = std::slice::from_raw_parts(matrices[2].mapped, elements);
            let n_usize = n as usize;
            let mut max_error = 0.0f64;
            let mut largest = 0.0f64;
            let checked = CHECKED_ROWS.min(n_usize);
            for sample in 0..checked {
                // Rows spread from the first to the last, edge blocks included.
                let row = sample * (n_usize - 1) / (checked - 1).max(1);
                for column in 0..n_usize {
                    let expected: f64 = (0..n_usize)
                        .map(|depth| f64::from(a[row * n_usize + depth]) * f64::from(b[depth * n_usize + column]))
                        .sum();
                    largest = largest.max(expected.abs());
                    max_error = max_error.max((f64::from(c[row * n_usize + column]) - expected).abs());
                }
            }
            let relative = max_error / largest.max(1e-30);
            let right = relative <= 1e-4;
            wrong |= !right;
            if !right {
                eprintln!(
                    "raw_matmul: the {n}x{n} product is wrong: largest error {relative:.2e} of the largest value"
                );
            }
            let flops = 2.0 * f64::from(n).powi(3);
            println!(
                "{{\"n\": {n}, \"ms\": {:.4}, \"gflops\": {:.2}, \"device\": {}, \"max_error\": {:.3e}}}",
                seconds * 1e3,
                flops / seconds / 1e9,
                json_string(&device_name),
                relative
            );
            device
                .free_descriptor_sets(descriptor_pool, &[set])
                .or_fail("vkFreeDescriptorSets");
            for matrix in matrices {
                device.unmap_memory(matrix.memory);
                device.destroy_buffer(matrix.buffer, None);
                device.free_memory(matrix.memory, None);
            }
        }
        device.destroy_shader_module(shader, None);
        device.destroy_pipeline(pipeline, None);
        device.destroy_pipeline_layout(pipeline_layout, None);
        device.destroy_descriptor_pool(descriptor_pool, None);
        device.destroy_descriptor_set_layout(set_layout, None);
        device.destroy_fence(fence, None);
        device.destroy_command_pool(command_pool, None);
        device.destroy_device(None);
        instance.destroy_instance(None);
        exit(i32::from(wrong));
    }
}

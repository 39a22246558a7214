//! Kernel modules: SPIR-V (preferred) or WGSL, reflected against the xhal argument ABI
//! ([`reflect`](crate::reflect)), rewritten where the driver needs it, and one compute
//! pipeline per entry point, cached in its module; and what a launch must satisfy.

use crate::device::Gpu;
use crate::instance::vk_error;
use crate::memory::DeviceBuffer;
use crate::reflect::{reflect_spirv, spirv_words, BindingKind, EntryLayout};
use crate::VulkanDriver;
use ash::vk;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Arc;
use xhal_backend::{BufferView, DriverKernel, DriverModule, Error, Features, KernelFormat, Object, Result};

/// `OpSourceContinued`, `OpSource` and `OpSourceExtension`.
const SOURCE_OPCODES: [u32; 3] = [2, 3, 4];

/// A loaded module.
pub struct Module {
    gpu: Arc<Gpu>,
    shader: vk::ShaderModule,
    entries: Vec<EntryLayout>,
    pipelines: Mutex<HashMap<String, Arc<Pipeline>>>,
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: pipelines made from the shader module do not need it any more.
        unsafe { self.gpu.device.destroy_shader_module(self.shader, None) };
    }
}

/// One entry point's compute pipeline: what a kernel handle names.
pub struct Pipeline {
    pub(crate) gpu: Arc<Gpu>,
    pub(crate) entry: EntryLayout,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) pipeline: vk::Pipeline,
    /// The push-constant range size: the scalar block rounded up to whole words.
    pub(crate) push_constant_bytes: u32,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: streams hold the pipeline while queued work uses it, so none does now.
        unsafe {
            self.gpu.device.destroy_pipeline(self.pipeline, None);
            self.gpu.device.destroy_pipeline_layout(self.layout, None);
            self.gpu.device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

impl Pipeline {
    /// Checks a launch's arguments against the kernel's parameters and the device's limits:
    /// workgroup counts, the number of buffers, each view against its descriptor type's range
    /// limit, and the scalar block against the push-constant range.
    pub(crate) fn check_launch(
        &self,
        workgroups: [u32; 3],
        buffers: &[BufferView<DeviceBuffer>],
        scalars: &[u8],
    ) -> Result<()> {
        let info = &self.gpu.adapter.info;
        let name = &self.entry.name;
        for (dimension, (&count, max)) in workgroups.iter().zip(info.max_workgroup_count).enumerate() {
            if count > max {
                return Err(Error::invalid_argument(format!(
                    "launch of `{name}` asks for {count} workgroups in dimension {dimension}, but {} allows at most {max} (maxComputeWorkGroupCount)",
                    info.name
                )));
            }
        }
        let kinds = &self.entry.bindings;
        if buffers.len() != kinds.len() {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes {} buffer(s), but {} were given",
                kinds.len(),
                buffers.len()
            )));
        }
        for (index, (argument, kind)) in buffers.iter().zip(kinds).enumerate() {
            let (range_limit, what, limit_name) = match kind {
                BindingKind::Storage => (
                    self.gpu.adapter.max_storage_buffer_range,
                    "storage buffer",
                    "maxStorageBufferRange",
                ),
                BindingKind::Uniform => (
                    self.gpu.adapter.max_uniform_buffer_range,
                    "uniform buffer",
                    "maxUniformBufferRange",
                ),
            };
            if argument.size > range_limit {
                return Err(Error::unsupported(format!(
                    "buffer argument {index} of `{name}` is a view of {} bytes, but {} binds at most {range_limit} bytes per {what} ({limit_name})",
                    argument.size, info.name
                )));
            }
        }
        if scalars.len() > self.push_constant_bytes as usize {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}` takes a scalar block of {} bytes, but {} were given",
                self.entry.scalar_bytes,
                scalars.len()
            )));
        }
        Ok(())
    }
}

impl Module {
    fn create_pipeline(&self, entry: EntryLayout) -> Result<Pipeline> {
        let gpu = &self.gpu;
        let info = &gpu.adapter.info;
        if entry.workgroup_memory > u64::from(info.max_workgroup_memory) {
            return Err(Error::unsupported(format!(
                "kernel `{}` uses {} bytes of workgroup memory, but {} has only {} (maxComputeSharedMemorySize)",
                entry.name, entry.workgroup_memory, info.name, info.max_workgroup_memory
            )));
        }
        if entry.scalar_bytes > info.max_scalar_block_size {
            return Err(Error::unsupported(format!(
                "kernel `{}` has a scalar block of {} bytes, but {} takes at most {} (maxPushConstantsSize)",
                entry.name, entry.scalar_bytes, info.name, info.max_scalar_block_size
            )));
        }
        let count = |kind: BindingKind| entry.bindings.iter().filter(|&&bound| bound == kind).count() as u64;
        let storage_buffers = count(BindingKind::Storage);
        if storage_buffers > u64::from(gpu.adapter.max_storage_buffers) {
            return Err(Error::unsupported(format!(
                "kernel `{}` takes {storage_buffers} storage buffers, but {} binds at most {} (maxPerStageDescriptorStorageBuffers)",
                entry.name, info.name, gpu.adapter.max_storage_buffers
            )));
        }
        let uniform_buffers = count(BindingKind::Uniform);
        if uniform_buffers > u64::from(gpu.adapter.max_uniform_buffers) {
            return Err(Error::unsupported(format!(
                "kernel `{}` takes {uniform_buffers} uniform buffers, but {} binds at most {} (maxPerStageDescriptorUniformBuffers)",
                entry.name, info.name, gpu.adapter.max_uniform_buffers
            )));
        }
        let invocations: u64 = entry.workgroup_size.iter().map(|&d| u64::from(d)).product();
        let size_fits = entry
            .workgroup_size
            .iter()
            .zip(info.max_workgroup_size)
            .all(|(&size, max)| size <= max);
        if !size_fits || invocations > u64::from(info.max_workgroup_invocations) {
            return Err(Error::unsupported(format!(
                "kernel `{}` has workgroup size {:?} ({invocations} invocations), but {} allows at most {:?} and {} invocations",
                entry.name, entry.workgroup_size, info.name, info.max_workgroup_size, info.max_workgroup_invocations
            )));
        }
        let entry_name = CString::new(entry.name.clone())
            .map_err(|_| Error::invalid_argument(format!("entry point name {:?} holds a NUL byte", entry.name)))?;
        let bindings: Vec<vk::DescriptorSetLayoutBinding<'_>> = (0u32..)
            .zip(&entry.bindings)
            .map(|(binding, kind)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(binding)
                    .descriptor_type(kind.descriptor_type())
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let push_constant_bytes = entry.scalar_bytes.div_ceil(4) * 4;
        let push_ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .offset(0)
            .size(push_constant_bytes)];
        let device = &gpu.device;
        // SAFETY: object creation on a live device; each failure destroys what came before.
        unsafe {
            let set_layout = device
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .map_err(|result| vk_error("creating a descriptor set layout", result))?;
            let set_layouts = [set_layout];
            let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
            if push_constant_bytes > 0 {
                layout_info = layout_info.push_constant_ranges(&push_ranges);
            }
            let layout = match device.create_pipeline_layout(&layout_info, None) {
                Ok(layout) => layout,
                Err(result) => {
                    device.destroy_descriptor_set_layout(set_layout, None);
                    return Err(vk_error("creating a pipeline layout", result));
                }
            };
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(self.shader)
                .name(&entry_name);
            let create_info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout)];
            let pipeline = match device.create_compute_pipelines(vk::PipelineCache::null(), &create_info, None) {
                Ok(pipelines) => pipelines[0],
                Err((_, result)) => {
                    device.destroy_pipeline_layout(layout, None);
                    device.destroy_descriptor_set_layout(set_layout, None);
                    return Err(vk_error(
                        &format!("creating the pipeline of kernel `{}`", entry.name),
                        result,
                    ));
                }
            };
            let made = Pipeline {
                gpu: Arc::clone(gpu),
                entry,
                set_layout,
                layout,
                pipeline,
                push_constant_bytes,
            };
            if let Some(error) = gpu.validation_error() {
                return Err(error);
            }
            Ok(made)
        }
    }
}

impl DriverModule<VulkanDriver> for Module {
    /// Reflects and loads `code` of `format`.
    fn load(
        _driver: &VulkanDriver,
        device: &Arc<Object<Arc<Gpu>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Module> {
        if let Some(error) = device.validation_error() {
            return Err(error);
        }
        let gpu: &Arc<Gpu> = device;
        let (words, entries) = match format {
            KernelFormat::SPIRV_SHADER => {
                let words = spirv_words(code)?;
                let entries = reflect_spirv(code)?;
                (words, entries)
            }
            KernelFormat::WGSL => translate_wgsl(gpu, code)?,
            other => {
                return Err(Error::unsupported(format!(
                    "kernel format {other} is not supported by the vulkan backend; accepted formats: {}, {}",
                    KernelFormat::SPIRV_SHADER,
                    KernelFormat::WGSL
                )))
            }
        };
        let mut words = without_source_instructions(&words);
        if let Some(trimmed) = without_unused_io16_capability(&words) {
            words = trimmed;
        }
        if gpu.adapter.enable.zero_initialize_workgroup_memory {
            if let Some(native) = zero_workgroup_memory_natively(&words) {
                words = native;
            }
        }
        let create_info = vk::ShaderModuleCreateInfo::default().code(&words);
        // SAFETY: the code was parsed and validated by naga above, so the driver gets well-formed SPIR-V.
        let shader = unsafe { gpu.device.create_shader_module(&create_info, None) }
            .map_err(|result| vk_error("creating a shader module", result))?;
        if let Some(error) = gpu.validation_error() {
            // SAFETY: just created, used by nothing.
            unsafe { gpu.device.destroy_shader_module(shader, None) };
            return Err(error);
        }
        Ok(Module {
            gpu: Arc::clone(gpu),
            shader,
            entries,
            pipelines: Mutex::new(HashMap::new()),
        })
    }
}

impl DriverKernel<VulkanDriver> for Arc<Pipeline> {
    /// The pipeline of entry point `name`, made on first use.
    fn get(driver: &VulkanDriver, module: &Arc<Object<Module>>, name: &str) -> Result<Arc<Pipeline>> {
        let mut pipelines = module.pipelines.lock();
        let pipeline = match pipelines.get(name) {
            Some(pipeline) => Arc::clone(pipeline),
            None => {
                let Some(entry) = module.entries.iter().find(|entry| entry.name == name) else {
                    let names: Vec<&str> = module.entries.iter().map(|entry| entry.name.as_str()).collect();
                    return Err(Error::not_found(format!(
                        "no compute entry point named `{name}`; the module's entry points are: {}",
                        if names.is_empty() {
                            "(none)".to_string()
                        } else {
                            names.join(", ")
                        }
                    )));
                };
                let pipeline = Arc::new(module.create_pipeline(entry.clone())?);
                pipelines.insert(name.to_string(), Arc::clone(&pipeline));
                pipeline
            }
        };
        drop(pipelines);
        #[cfg(test)]
        driver.pipelines.lock().push(Arc::downgrade(&pipeline));
        #[cfg(not(test))]
        let _ = driver;
        Ok(pipeline)
    }
}

/// The module without its `OpSource*` instructions.
///
/// They are debug information only. SPIR-V that naga writes with debug information tags its
/// source language as WGSL (10), which older validation layers (1.3.239, as packaged here)
/// reject as an invalid operand; dropping the tag changes nothing the driver runs and keeps
/// validation silent for valid modules. Only this instruction is removed: messages are never
/// filtered.
fn without_source_instructions(words: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(words.len());
    out.extend_from_slice(&words[..5.min(words.len())]);
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            // Malformed; naga validated the module, so this cannot happen, but keep the rest as is.
            out.extend_from_slice(&words[at..]);
            break;
        }
        if !SOURCE_OPCODES.contains(&opcode) {
            out.extend_from_slice(&words[at..at + count]);
        }
        at += count;
    }
    out
}

/// The module without `OpCapability StorageInputOutput16`, when nothing can use it: every
/// `Input` and `Output` variable is a built-in (as in every compute kernel), so no 16-bit value
/// crosses a stage interface.
///
/// naga declares the capability in every module that uses `f16`, but Vulkan lets a module
/// declare it only on devices with `storageInputOutput16` (lavapipe has none), and the
/// validation layer refuses such a module even though the capability is unused. `None` when
/// the module does not declare it or might use it.
fn without_unused_io16_capability(words: &[u32]) -> Option<Vec<u32>> {
    const CAPABILITY: u32 = 17;
    const VARIABLE: u32 = 59;
    const DECORATE: u32 = 71;
    const STORAGE_INPUT_OUTPUT_16: u32 = 4436;
    const DECORATION_BUILT_IN: u32 = 11;
    const STORAGE_INPUT: u32 = 1;
    const STORAGE_OUTPUT: u32 = 3;
    let mut instructions = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return None;
        }
        instructions.push((at, count, words[at] & 0xffff));
        at += count;
    }
    let mut capability = None;
    let mut built_ins = std::collections::HashSet::new();
    let mut interface = Vec::new();
    for &(start, count, opcode) in &instructions {
        let operands = &words[start + 1..start + count];
        match opcode {
            CAPABILITY if operands == [STORAGE_INPUT_OUTPUT_16] => capability = Some(start),
            DECORATE if operands.len() >= 2 && operands[1] == DECORATION_BUILT_IN => {
                built_ins.insert(operands[0]);
            }
            VARIABLE if operands.len() >= 3 && matches!(operands[2], STORAGE_INPUT | STORAGE_OUTPUT) => {
                interface.push(operands[1]);
            }
            _ => {}
        }
    }
    let capability = capability?;
    if !interface.iter().all(|variable| built_ins.contains(variable)) {
        return None;
    }
    let mut out = words.to_vec();
    out.drain(capability..capability + 2);
    Some(out)
}

/// SPIR-V opcodes and operands the workgroup zeroing rewrite looks for.
mod op {
    pub(super) const ENTRY_POINT: u32 = 15;
    pub(super) const CONSTANT_NULL: u32 = 46;
    pub(super) const FUNCTION: u32 = 54;
    pub(super) const FUNCTION_END: u32 = 56;
    pub(super) const VARIABLE: u32 = 59;
    pub(super) const LOAD: u32 = 61;
    pub(super) const STORE: u32 = 62;
    pub(super) const IEQUAL: u32 = 170;
    pub(super) const CONTROL_BARRIER: u32 = 224;
    pub(super) const SELECTION_MERGE: u32 = 247;
    pub(super) const LABEL: u32 = 248;
    pub(super) const BRANCH: u32 = 249;
    pub(super) const BRANCH_CONDITIONAL: u32 = 250;
    pub(super) const GL_COMPUTE: u32 = 5;
    pub(super) const WORKGROUP: u32 = 4;
}

/// Instruction indices of one entry point's workgroup zeroing polyfill.
struct Polyfill {
    stores: Vec<usize>,
    barrier: usize,
}

/// naga's SPIR-V zeroes workgroup memory with a polyfill at the top of each entry point that
/// uses some: `if local_invocation_index == 0 { var = null; ... }` then a barrier. llvmpipe
/// turns the store of a large null array into one store per element, unrolled, and LLVM then
/// takes seconds to minutes on it (a 16 KiB tile: 80 s, where the same kernel without the
/// polyfill builds in 0.1 s). Where the device zero-initialises workgroup memory itself
/// (Vulkan 1.3's `shaderZeroInitializeWorkgroupMemory`), the same meaning is had by giving
/// each such variable a null initializer and dropping the polyfill's stores and its barrier,
/// which then orders nothing (the empty `if` stays).
///
/// naga reads `local_invocation_index` in the function's first block when the entry point
/// takes it as an argument, and otherwise declares a built-in of its own and loads it just
/// before the comparison; both shapes are recognised. Entry points without the polyfill (those
/// that use no workgroup memory) are left as they are. Returns `None`, leaving the module
/// unchanged, when no entry point starts with the polyfill.
fn zero_workgroup_memory_natively(words: &[u32]) -> Option<Vec<u32>> {
    let mut instructions = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        if count == 0 || at + count > words.len() {
            return None;
        }
        instructions.push((at, count, words[at] & 0xffff));
        at += count;
    }
    let operand = |index: usize, k: usize| -> Option<u32> {
        let &(start, count, _) = instructions.get(index)?;
        (k + 1 < count).then(|| words[start + 1 + k])
    };
    let opcode = |index: usize| instructions.get(index).map(|&(_, _, opcode)| opcode);
    let mut entry_points = std::collections::HashSet::new();
    let mut nulls = std::collections::HashMap::new();
    let mut workgroup_variables = std::collections::HashMap::new();
    for (index, &(_, count, opcode)) in instructions.iter().enumerate() {
        match opcode {
            op::ENTRY_POINT if operand(index, 0)? == op::GL_COMPUTE => {
                entry_points.insert(operand(index, 1)?);
            }
            op::CONSTANT_NULL => {
                nulls.insert(operand(index, 1)?, operand(index, 0)?);
            }
            op::VARIABLE if count == 4 && operand(index, 2)? == op::WORKGROUP => {
                workgroup_variables.insert(operand(index, 1)?, index);
            }
            _ => {}
        }
    }
    // The polyfill's stores and barrier when the instructions from `branch` (the `OpBranch`
    // that ends the entry point's first block) on are exactly the polyfill, else `None`.
    let polyfill_at = |branch: usize| -> Option<Polyfill> {
        let block = operand(branch, 0)?;
        if opcode(branch + 1)? != op::LABEL || operand(branch + 1, 0)? != block {
            return None;
        }
        let mut at = branch + 2;
        // The load of naga's own `local_invocation_index` built-in, when the entry point does
        // not take it as an argument; the comparison must then read it.
        let loaded = (opcode(at)? == op::LOAD).then(|| operand(at, 1)).flatten();
        if loaded.is_some() {
            at += 1;
        }
        if opcode(at)? != op::IEQUAL || loaded.is_some_and(|loaded| operand(at, 2) != Some(loaded)) {
            return None;
        }
        let condition = operand(at, 1)?;
        let merge = operand(at + 1, 0)?;
        if opcode(at + 1)? != op::SELECTION_MERGE
            || opcode(at + 2)? != op::BRANCH_CONDITIONAL
            || operand(at + 2, 0)? != condition
            || operand(at + 2, 2)? != merge
            || opcode(at + 3)? != op::LABEL
            || operand(at + 3, 0)? != operand(at + 2, 1)?
        {
            return None;
        }
        let first_store = at + 4;
        let mut store = first_store;
        while opcode(store)? == op::STORE {
            let (variable, value) = (operand(store, 0)?, operand(store, 1)?);
            if instructions[store].1 != 3 || !workgroup_variables.contains_key(&variable) || !nulls.contains_key(&value)
            {
                return None;
            }
            store += 1;
        }
        if store == first_store
            || opcode(store)? != op::BRANCH
            || operand(store, 0)? != merge
            || opcode(store + 1)? != op::LABEL
            || operand(store + 1, 0)? != merge
            || opcode(store + 2)? != op::CONTROL_BARRIER
        {
            return None;
        }
        Some(Polyfill {
            stores: (first_store..store).collect(),
            barrier: store + 2,
        })
    };
    let mut dropped = std::collections::HashSet::new();
    let mut initializers = std::collections::HashMap::new();
    let mut matched = 0;
    for index in 0..instructions.len() {
        if opcode(index)? != op::FUNCTION || !entry_points.contains(&operand(index, 1)?) {
            continue;
        }
        // naga's first block only declares variables and loads inputs; anything else there
        // means the entry point does not start with the polyfill.
        let first_block_end = (index + 1..instructions.len()).find(|&at| {
            matches!(
                opcode(at),
                Some(op::BRANCH | op::FUNCTION_END | op::SELECTION_MERGE | op::STORE)
            )
        });
        let Some(branch) = first_block_end.filter(|&at| opcode(at) == Some(op::BRANCH)) else {
            continue;
        };
        if let Some(polyfill) = polyfill_at(branch) {
            for &store in &polyfill.stores {
                let (variable, value) = (operand(store, 0)?, operand(store, 1)?);
                initializers.insert(*workgroup_variables.get(&variable)?, value);
            }
            dropped.extend(polyfill.stores);
            dropped.insert(polyfill.barrier);
            matched += 1;
        }
    }
    if matched == 0 {
        return None;
    }
    let mut out = Vec::with_capacity(words.len() + 4 * initializers.len());
    out.extend_from_slice(&words[..5]);
    for (index, &(start, count, _)) in instructions.iter().enumerate() {
        if dropped.contains(&index) {
            continue;
        }
        match initializers.get(&index) {
            Some(null) => {
                // naga declares the null constant after the variable, so declare another just
                // before it, under a fresh id.
                let fresh = out[3];
                out[3] += 1;
                out.extend_from_slice(&[(3 << 16) | op::CONSTANT_NULL, nulls[null], fresh]);
                out.push(((count as u32 + 1) << 16) | op::VARIABLE);
                out.extend_from_slice(&words[start + 1..start + count]);
                out.push(fresh);
            }
            None => out.extend_from_slice(&words[start..start + count]),
        }
    }
    Some(out)
}

/// Translates WGSL to SPIR-V host-side with xhal-kernel, which also reflects it.
fn translate_wgsl(gpu: &Gpu, code: &[u8]) -> Result<(Vec<u32>, Vec<EntryLayout>)> {
    let source = std::str::from_utf8(code)
        .map_err(|error| Error::invalid_argument(format!("WGSL source is not UTF-8: {error}")))?;
    let module = xhal_kernel::parse_wgsl(source)?;
    let missing = Features(module.required_features() & !gpu.adapter.info.features.0);
    if missing.0 != 0 {
        return Err(Error::unsupported(format!(
            "the kernel needs {} , which {} does not support",
            missing.describe().join(", "),
            gpu.adapter.info.name
        )));
    }
    // Uniforms stay uniform blocks, as core asks for this device's SPIR-V.
    let words = module.to_spirv_with(true)?;
    let entries = module
        .entry_points()
        .iter()
        .map(|entry| EntryLayout {
            name: entry.name.clone(),
            workgroup_size: entry.workgroup_size,
            // `buffers[i]` is argument `i`, at binding `i` in the SPIR-V.
            bindings: entry
                .buffers
                .iter()
                .map(|buffer| match buffer.space {
                    xhal_kernel::BufferSpace::Storage => BindingKind::Storage,
                    xhal_kernel::BufferSpace::Uniform => BindingKind::Uniform,
                })
                .collect(),
            scalar_bytes: entry.scalar_block_size(),
            workgroup_memory: entry.workgroup_memory_bytes,
        })
        .collect();
    Ok((words, entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reflect::tests::{saxpy_spirv, SAXPY};

    #[test]
    fn workgroup_zeroing_becomes_initializers() {
        let words = spirv_words(&saxpy_spirv()).unwrap();
        let native = zero_workgroup_memory_natively(&words).expect("naga's polyfill is recognised");
        // One store (3 words) and the barrier (4) dropped, one null constant (3 words) and
        // initializer (1 word) added.
        assert_eq!(native.len(), words.len() - 3 - 4 + 3 + 1);
        let bytes: Vec<u8> = native.iter().flat_map(|word| word.to_le_bytes()).collect();
        let entries = reflect_spirv(&bytes).unwrap();
        assert_eq!(entries[0].workgroup_memory, 256);
        let without_workgroup_memory = xhal_kernel::parse_wgsl(
            "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n@compute @workgroup_size(1) fn k() { x[0] = 1u; }",
        )
        .unwrap()
        .to_spirv()
        .unwrap();
        assert!(zero_workgroup_memory_natively(&without_workgroup_memory).is_none());
    }

    /// Every instruction's opcode and operands, in order.
    fn instructions(words: &[u32]) -> Vec<(u32, Vec<u32>)> {
        let mut at = 5;
        let mut out = Vec::new();
        while at < words.len() {
            let count = (words[at] >> 16) as usize;
            out.push((words[at] & 0xffff, words[at + 1..at + count].to_vec()));
            at += count;
        }
        out
    }

    /// Checks that `native` is `words` zeroing workgroup memory through initializers: no store
    /// of a null constant and no barrier before the kernel's own code, every workgroup variable
    /// initialized, and the same reflection.
    fn assert_zeroed_natively(words: &[u32], native: &[u32], barriers_in_kernels: usize) {
        let native_instructions = instructions(native);
        let nulls: std::collections::HashSet<u32> = native_instructions
            .iter()
            .filter(|(opcode, _)| *opcode == op::CONSTANT_NULL)
            .map(|(_, operands)| operands[1])
            .collect();
        for (opcode, operands) in &native_instructions {
            if *opcode == op::VARIABLE && operands[2] == op::WORKGROUP {
                assert!(
                    operands.len() == 4 && nulls.contains(&operands[3]),
                    "a workgroup variable without a null initializer: {operands:?}"
                );
            }
            if *opcode == op::STORE {
                assert!(!nulls.contains(&operands[1]), "a polyfill store is left: {operands:?}");
            }
        }
        let barriers = native_instructions
            .iter()
            .filter(|(opcode, _)| *opcode == op::CONTROL_BARRIER)
            .count();
        assert_eq!(
            barriers, barriers_in_kernels,
            "only the polyfill's barriers are dropped"
        );
        let bytes = |words: &[u32]| words.iter().flat_map(|word| word.to_le_bytes()).collect::<Vec<u8>>();
        let before = reflect_spirv(&bytes(words)).unwrap();
        let after = reflect_spirv(&bytes(native)).unwrap();
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
    }

    #[test]
    fn workgroup_zeroing_is_recognised_without_a_local_invocation_index_argument() {
        // No `local_invocation_index` argument: naga's polyfill declares and loads the
        // built-in itself. This shape (a 64x64 transpose through a 16 KiB tile) was missed, and
        // llvmpipe took 70-80 s to build the per-element zeroing of the tile.
        let source = r#"
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
var<workgroup> tile: array<f32, 4096>;
@compute @workgroup_size(16, 16)
fn transpose(@builtin(local_invocation_id) local: vec3<u32>, @builtin(workgroup_id) group: vec3<u32>) {
    let base = group.x * 4096u;
    for (var i = 0u; i < 4u; i++) { for (var j = 0u; j < 4u; j++) {
        let r = local.y * 4u + i; let c = local.x * 4u + j;
        tile[r * 64u + c] = input[base + r * 64u + c];
    } }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) { for (var j = 0u; j < 4u; j++) {
        let r = local.y * 4u + i; let c = local.x * 4u + j;
        output[base + r * 64u + c] = tile[c * 64u + r];
    } }
}
"#;
        let words = xhal_kernel::parse_wgsl(source).unwrap().to_spirv().unwrap();
        let native = zero_workgroup_memory_natively(&words).expect("naga's polyfill is recognised");
        assert_zeroed_natively(&words, &native, 1);
    }

    #[test]
    fn workgroup_zeroing_is_rewritten_beside_entry_points_without_workgroup_memory() {
        // `clear` uses no workgroup memory, so naga writes no polyfill in it; that must not
        // keep the polyfill of `sum`, nor may `clear` change.
        let source = r#"
@group(0) @binding(0) var<storage, read_write> data: array<f32>;
var<workgroup> scratch: array<f32, 256>;
var<workgroup> total: f32;
@compute @workgroup_size(256)
fn sum(@builtin(local_invocation_index) lane: u32) {
    scratch[lane] = data[lane];
    workgroupBarrier();
    if lane == 0u { total = scratch[255]; }
    workgroupBarrier();
    data[lane] = total;
}
@compute @workgroup_size(64)
fn clear(@builtin(global_invocation_id) id: vec3<u32>) { data[id.x] = 0.0; }
"#;
        let words = xhal_kernel::parse_wgsl(source).unwrap().to_spirv().unwrap();
        let native = zero_workgroup_memory_natively(&words).expect("naga's polyfill is recognised");
        assert_zeroed_natively(&words, &native, 2);
    }

    #[test]
    fn kernels_without_the_polyfill_are_left_alone() {
        // Workgroup memory zeroed by the kernel itself, as hand-written SPIR-V might: not
        // naga's shape, so nothing changes.
        let mut words = xhal_kernel::parse_wgsl(SAXPY).unwrap().to_spirv().unwrap();
        let polyfill_store = instructions(&words)
            .iter()
            .scan(5usize, |at, (opcode, operands)| {
                let start = *at;
                *at += operands.len() + 1;
                Some((start, *opcode))
            })
            .find(|&(_, opcode)| opcode == op::STORE)
            .map(|(start, _)| start)
            .unwrap();
        // OpNop in place of the store keeps the module valid but breaks the pattern.
        words.splice(polyfill_store..polyfill_store + 3, [(1 << 16), (1 << 16), (1 << 16)]);
        assert!(zero_workgroup_memory_natively(&words).is_none());
    }

    #[test]
    fn source_instructions_are_dropped_and_nothing_else() {
        let mut words = spirv_words(&saxpy_spirv()).unwrap();
        // OpSource WGSL (source language 10), version 1, as naga writes with debug info.
        words.splice(5..5, [(3 << 16) | 3, 10, 1]);
        let stripped = without_source_instructions(&words);
        assert_eq!(stripped.len(), words.len() - 3);
        let opcodes = |words: &[u32]| {
            let mut at = 5;
            let mut out = Vec::new();
            while at < words.len() {
                out.push(words[at] & 0xffff);
                at += (words[at] >> 16) as usize;
            }
            out
        };
        let mut expected = opcodes(&words);
        expected.retain(|opcode| !SOURCE_OPCODES.contains(opcode));
        assert_eq!(opcodes(&stripped), expected);
    }
}

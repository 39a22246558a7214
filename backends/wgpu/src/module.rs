//! WGSL modules, their compute pipelines, and the checks of a launch against its kernel.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use xhal_backend::{DriverKernel, DriverModule, Error, ErrorKind, Features, KernelFormat, Object, Result};
use xhal_kernel::{BufferAccess, BufferSpace, EntryPointInfo};

use crate::device::DeviceShared;
use crate::WgpuDriver;

/// A loaded WGSL module: wgpu compiles it once; each entry point's pipeline is built on first
/// use and then shared by every kernel handle that names it.
pub struct Module {
    pub(crate) device: Arc<DeviceShared>,
    shader: wgpu::ShaderModule,
    entry_points: Arc<[EntryPointInfo]>,
    pipelines: Mutex<HashMap<String, Arc<KernelPipeline>>>,
}

/// Names pipelines for the device's bind group cache; never reused, unlike addresses.
static NEXT_PIPELINE_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One entry point, ready to dispatch.
pub struct KernelPipeline {
    pub(crate) serial: u64,
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) name: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
    /// `None` for a kernel without buffer arguments.
    pub(crate) bind_group_layout: Option<wgpu::BindGroupLayout>,
    /// Bytes of immediate data the pipeline takes: the scalar block rounded up to 4.
    pub(crate) immediate_size: u32,
    pub(crate) buffer_count: usize,
}

impl KernelPipeline {
    /// Checks a launch's buffer count and workgroup counts against the kernel and its device.
    pub(crate) fn check_launch(&self, workgroups: [u32; 3], buffer_count: usize) -> Result<()> {
        if buffer_count != self.buffer_count {
            return Err(Error::invalid_argument(format!(
                "kernel `{}` takes {} buffer(s), but {buffer_count} were given",
                self.name, self.buffer_count
            )));
        }
        let limit = self.device.limits.max_compute_workgroups_per_dimension;
        if workgroups.iter().any(|&count| count > limit) {
            return Err(Error::invalid_argument(format!(
                "launch of kernel `{}` with {workgroups:?} workgroups; {} allows at most {limit} per dimension",
                self.name,
                self.device.name()
            )));
        }
        Ok(())
    }
}

impl Drop for KernelPipeline {
    fn drop(&mut self) {
        self.device.forget_pipeline(self.serial);
    }
}

impl DriverModule<WgpuDriver> for Module {
    /// Loads `code` in `format`; the backend accepts WGSL only.
    fn load(
        _driver: &WgpuDriver,
        device: &Arc<Object<Arc<DeviceShared>>>,
        format: KernelFormat,
        code: &[u8],
    ) -> Result<Module> {
        if format != KernelFormat::WGSL {
            return Err(Error::unsupported(format!(
                "kernel format {format} is not supported by the wgpu backend; it accepts {}",
                KernelFormat::WGSL
            )));
        }
        Module::load_wgsl(device, code)
    }
}

impl DriverKernel<WgpuDriver> for Arc<KernelPipeline> {
    fn get(_driver: &WgpuDriver, module: &Arc<Object<Module>>, name: &str) -> Result<Arc<KernelPipeline>> {
        let module_id = module.handle();
        if let Some(found) = module.pipelines.lock().get(name) {
            return Ok(Arc::clone(found));
        }
        let Some(entry) = module.entry_points.iter().find(|entry| entry.name == name) else {
            let names: Vec<&str> = module.entry_points.iter().map(|entry| entry.name.as_str()).collect();
            return Err(Error::not_found(format!(
                "module {module_id:#x} has no compute entry point `{name}`; it has: {}",
                names.join(", ")
            )));
        };
        let built = Arc::new(module.build(entry)?);
        Ok(Arc::clone(
            module.pipelines.lock().entry(name.to_string()).or_insert(built),
        ))
    }
}

impl Module {
    fn load_wgsl(device: &Arc<DeviceShared>, code: &[u8]) -> Result<Module> {
        device.check_alive()?;
        let source = std::str::from_utf8(code)
            .map_err(|error| Error::invalid_argument(format!("WGSL source is not UTF-8: {error}")))?;
        let reflection = xhal_kernel::reflect(source)
            .map_err(|error| Error::invalid_argument(format!("WGSL module refused: {error}")))?;
        let required = Features(reflection.required_features);
        let missing: Vec<&str> = required
            .names()
            .into_iter()
            .filter(|name| Features::from_name(name).is_some_and(|feature| !device.info.features.contains(feature)))
            .collect();
        if !missing.is_empty() {
            return Err(Error::unsupported(format!(
                "the WGSL module needs {} which {} does not support",
                missing.join(", "),
                device.name()
            )));
        }
        let shader = device
            .capture("compiling a WGSL module", || {
                device.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: None,
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                })
            })
            .map_err(|error| Error::invalid_argument(error.message().to_string()))?;
        Ok(Module {
            device: Arc::clone(device),
            shader,
            entry_points: Arc::clone(&reflection.entry_points),
            pipelines: Mutex::new(HashMap::new()),
        })
    }

    fn build(&self, entry: &EntryPointInfo) -> Result<KernelPipeline> {
        let device = &self.device;
        let limits = &device.limits;
        let invocations = entry.invocations_per_workgroup();
        let size = entry.workgroup_size;
        let maximum = device.info.max_workgroup_size;
        if size.iter().zip(maximum).any(|(&wanted, most)| wanted > most)
            || invocations > u64::from(limits.max_compute_invocations_per_workgroup)
        {
            return Err(Error::unsupported(format!(
                "kernel `{}` has workgroup size {size:?} ({invocations} invocations); {} allows at most {maximum:?} and {} invocations",
                entry.name,
                device.name(),
                limits.max_compute_invocations_per_workgroup
            )));
        }
        let scalar_bytes = entry.scalar_block_size();
        let immediate_size = scalar_bytes.div_ceil(4) * 4;
        if immediate_size > limits.max_immediate_size {
            return Err(Error::unsupported(format!(
                "kernel `{}` has a {scalar_bytes}-byte scalar block; {} takes at most {} bytes",
                entry.name,
                device.name(),
                limits.max_immediate_size
            )));
        }
        device
            .capture(&format!("building kernel `{}`", entry.name), || {
                let entries: Vec<wgpu::BindGroupLayoutEntry> = entry
                    .buffers
                    .iter()
                    .map(|buffer| wgpu::BindGroupLayoutEntry {
                        binding: buffer.binding,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: match buffer.space {
                                BufferSpace::Uniform => wgpu::BufferBindingType::Uniform,
                                BufferSpace::Storage => wgpu::BufferBindingType::Storage {
                                    read_only: buffer.access == BufferAccess::Read,
                                },
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                let bind_group_layout = (!entries.is_empty()).then(|| {
                    device
                        .device
                        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                            label: Some(&entry.name),
                            entries: &entries,
                        })
                });
                let layouts = [bind_group_layout.as_ref()];
                let pipeline_layout = device.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(&entry.name),
                    bind_group_layouts: if bind_group_layout.is_some() { &layouts } else { &[] },
                    immediate_size,
                });
                let pipeline = device.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&entry.name),
                    layout: Some(&pipeline_layout),
                    module: &self.shader,
                    entry_point: Some(&entry.name),
                    compilation_options: Default::default(),
                    cache: None,
                });
                KernelPipeline {
                    serial: NEXT_PIPELINE_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    device: Arc::clone(device),
                    name: entry.name.clone(),
                    pipeline,
                    bind_group_layout,
                    immediate_size,
                    buffer_count: entry.buffers.len(),
                }
            })
            .map_err(|error| {
                if error.kind() == ErrorKind::Internal {
                    Error::unsupported(error.message().to_string())
                } else {
                    error
                }
            })
    }
}

//! The backend and device a run certifies, and what each test is handed.

use crate::test_case::{TestResult, Verdict};
use std::path::{Path, PathBuf};
use xhal::{BackendSource, Device, DeviceInfo, Module, Runtime, Stream};

/// Why the suite's WGSL kernels cannot reach a device, or `None` when they can: the device
/// lists no kernel format that the host makes from WGSL. Tests that run kernels are then
/// skipped with this reason, so the device's certificate covers its memory, streams and
/// events, and says in every skipped test that its kernels were not tested.
pub fn wgsl_unreachable(info: &DeviceInfo) -> Option<String> {
    let formats = &info.kernel_formats;
    if formats
        .iter()
        .any(|format| xhal::kernel::Target::from_format(format.0).is_some())
    {
        return None;
    }
    let names: Vec<String> = formats.iter().map(|format| format.name()).collect();
    let made: Vec<String> = xhal::kernel::Target::ALL
        .iter()
        .map(|target| xhal::KernelFormat(target.format()).name())
        .collect();
    Some(format!(
        "the device takes only {} kernels, and the host makes none of those from WGSL (it makes {}); \
         this test runs WGSL kernels, so the device's own kernel format is not tested here",
        if names.is_empty() {
            "no".to_string()
        } else {
            names.join(", ")
        },
        made.join(", ")
    ))
}

/// Where the backend under test comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum TargetSpec {
    /// A plugin file, loaded on its own: no other plugin and no built-in backend is present.
    Plugin(PathBuf),
    /// A backend found by the usual discovery (built-in backends, then the plugin path), by name.
    Backend(String),
}

/// An error setting up a run: the plugin does not load, the backend is absent, no device.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(pub String);

/// The backend under test, ready to open its devices.
pub struct Target {
    runtime: Runtime,
    backend_name: String,
    plugin_path: Option<PathBuf>,
    spec: TargetSpec,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("backend", &self.backend_name)
            .field("plugin_path", &self.plugin_path)
            .finish()
    }
}

impl Target {
    /// Loads the backend `spec` names. Every failure says what was tried and why it failed.
    pub fn open(spec: &TargetSpec) -> Result<Target, SetupError> {
        match spec {
            TargetSpec::Plugin(path) => {
                let runtime = Runtime::builder()
                    .without_static_backends()
                    .without_plugin_search()
                    .device_selector(None)
                    .plugin(path.clone())
                    .build()
                    .map_err(|error| SetupError(format!("{}: {error}", path.display())))?;
                let backend_name = runtime
                    .backends()
                    .first()
                    .map(|backend| backend.name().to_string())
                    .ok_or_else(|| SetupError(format!("{}: the plugin provided no backend", path.display())))?;
                Ok(Target {
                    runtime,
                    backend_name,
                    plugin_path: Some(path.clone()),
                    spec: spec.clone(),
                })
            }
            TargetSpec::Backend(name) => {
                let runtime = Runtime::builder()
                    .device_selector(None)
                    .build()
                    .map_err(|error| SetupError(error.to_string()))?;
                let Some(backend) = runtime.backend(name) else {
                    let present: Vec<&str> = runtime.backends().iter().map(|b| b.name()).collect();
                    return Err(SetupError(format!(
                        "no backend named `{name}`; present: {}",
                        if present.is_empty() {
                            "none".to_string()
                        } else {
                            present.join(", ")
                        }
                    )));
                };
                let plugin_path = match &backend.source {
                    BackendSource::Plugin { path } => Some(path.clone()),
                    _ => None,
                };
                Ok(Target {
                    backend_name: backend.name().to_string(),
                    plugin_path,
                    runtime,
                    spec: spec.clone(),
                })
            }
        }
    }

    /// What this target was opened from.
    pub fn spec(&self) -> &TargetSpec {
        &self.spec
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &str {
        &self.backend_name
    }

    /// The plugin file, when the backend was loaded from one.
    pub fn plugin_path(&self) -> Option<&Path> {
        self.plugin_path.as_deref()
    }

    /// The runtime holding the backend.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The backend's name, version and ABI version.
    pub fn backend_info(&self) -> Result<xhal::BackendInfo, SetupError> {
        self.runtime
            .backend(&self.backend_name)
            .map(|entry| entry.backend().info())
            .ok_or_else(|| SetupError(format!("backend `{}` vanished", self.backend_name)))
    }

    /// Every device of the backend, with its information; an error when it has none.
    pub fn devices(&self) -> Result<Vec<(u32, DeviceInfo)>, SetupError> {
        let entry = self
            .runtime
            .backend(&self.backend_name)
            .ok_or_else(|| SetupError(format!("backend `{}` vanished", self.backend_name)))?;
        let backend = entry.backend();
        let count = backend
            .device_count()
            .map_err(|error| SetupError(format!("backend `{}` cannot list devices: {error}", self.backend_name)))?;
        if count == 0 {
            return Err(SetupError(format!("backend `{}` has no devices", self.backend_name)));
        }
        (0..count)
            .map(|index| {
                backend.device_info(index).map(|info| (index, info)).map_err(|error| {
                    SetupError(format!(
                        "backend `{}` cannot describe device {index}: {error}",
                        self.backend_name
                    ))
                })
            })
            .collect()
    }

    /// A fresh context for one test on device `index`: the device opened anew and a stream.
    pub fn context(&self, index: u32) -> xhal::Result<TestContext<'_>> {
        let device = self.runtime.open(&format!("{}:{}", &self.backend_name, index))?;
        let stream = device.create_stream()?;
        Ok(TestContext {
            target: self,
            index,
            device,
            stream,
        })
    }
}

/// What a test is handed: the device under test, freshly opened, and a stream on it.
pub struct TestContext<'a> {
    target: &'a Target,
    index: u32,
    device: Device,
    stream: Stream,
}

impl TestContext<'_> {
    /// The device under test.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// A stream on the device, created for this test.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The device's information as the backend reported it.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The device's index in its backend.
    pub fn device_index(&self) -> u32 {
        self.index
    }

    /// The backend under test.
    pub fn target(&self) -> &Target {
        self.target
    }

    /// The device as another part of the application opening it gets it: the runtime shares
    /// one open device per index, so this is the same device, not a second handle.
    pub fn reopen(&self) -> xhal::Result<Device> {
        self.target
            .runtime
            .open(&format!("{}:{}", &self.target.backend_name, self.index))
    }

    /// Loads a WGSL module; a refusal fails the test, naming the module. On a device that
    /// takes no format the host makes from WGSL the test is skipped instead (see
    /// [`wgsl_unreachable`]).
    pub fn load_wgsl(&self, what: &str, source: &str) -> std::result::Result<Module, Verdict> {
        self.require_wgsl_kernels()?;
        self.device
            .load_wgsl(source)
            .map_err(|error| Verdict::fail(format!("the {what} kernel does not load: {error}")))
    }

    /// Skips when the device takes no kernel format the host makes from WGSL: every kernel of
    /// the suite is WGSL, so such a device (one that takes only a vendor format of its own,
    /// say) cannot run them.
    pub fn require_wgsl_kernels(&self) -> TestResult {
        match wgsl_unreachable(self.info()) {
            Some(reason) => Err(Verdict::skip(reason)),
            None => Ok(()),
        }
    }

    /// Skips unless the device can launch `invocations` per workgroup.
    pub fn require_workgroup_invocations(&self, invocations: u32) -> TestResult {
        if self.info().max_workgroup_invocations < invocations {
            return Err(Verdict::skip(format!(
                "the device allows {} invocations per workgroup; the test needs {invocations}",
                self.info().max_workgroup_invocations
            )));
        }
        Ok(())
    }

    /// Seeded random values: the same test always sees the same data.
    pub fn random_u32(&self, seed: u64, count: usize) -> Vec<u32> {
        let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
        (0..count)
            .map(|_| {
                // splitmix64: tiny, seedable and good enough to make patterns nobody wrote by hand.
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) as u32
            })
            .collect()
    }

    /// Seeded random bytes.
    pub fn random_bytes(&self, seed: u64, count: usize) -> Vec<u8> {
        self.random_u32(seed, count)
            .into_iter()
            .map(|value| value as u8)
            .collect()
    }
}

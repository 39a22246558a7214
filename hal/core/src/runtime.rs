//! The runtime: every backend this process can use, built in or loaded, and their devices.

use crate::backend::registry;
use crate::backend::{Backend, BackendInfo, DeviceInfo};
use crate::device::{Device, DeviceShared};
use crate::error::{Error, ErrorKind, Result};
use crate::plugin::loader::{self, PluginFile, SearchFolder, SearchOrigin};
use crate::select::{Candidate, DeviceSelector, Explanation, Selector};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};

/// Where a backend came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BackendSource {
    /// Linked into this binary.
    Static,
    /// Loaded from a plugin file.
    Plugin {
        /// The file.
        path: PathBuf,
    },
    /// Handed to [`RuntimeBuilder::backend`] by the application.
    Provided,
}

impl std::fmt::Display for BackendSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendSource::Static => f.write_str("static"),
            BackendSource::Plugin { path } => write!(f, "plugin {}", path.display()),
            BackendSource::Provided => f.write_str("provided"),
        }
    }
}

/// One backend known to the runtime.
#[derive(Clone)]
pub struct BackendEntry {
    /// Name, version, ABI version.
    pub info: BackendInfo,
    /// Where it came from.
    pub source: BackendSource,
    /// The devices it reported, or why it could not (a missing driver, say).
    pub devices: std::result::Result<Vec<DeviceInfo>, Error>,
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for BackendEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendEntry")
            .field("info", &self.info)
            .field("source", &self.source)
            .field("devices", &self.devices)
            .finish()
    }
}

impl BackendEntry {
    fn enumerate(backend: Arc<dyn Backend>, source: BackendSource) -> BackendEntry {
        let info = backend.info();
        let devices = backend.device_count().and_then(|count| {
            (0..count)
                .map(|index| {
                    backend
                        .device_info(index)
                        .map_err(|error| error.context(format!("device {index}")))
                })
                .collect()
        });
        if let Err(error) = &devices {
            tracing::debug!(backend = %info.name, %error, "backend reported no devices");
        }
        BackendEntry {
            info,
            source,
            devices,
            backend,
        }
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The backend itself, for code that works below the application API (the conformance suite).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
}

/// What happened to one plugin file during discovery.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PluginOutcome {
    /// Loaded and in use.
    Loaded {
        /// The plugin's own name.
        name: String,
        /// The plugin's version.
        version: String,
        /// ABI version it implements, as `major.minor`.
        abi: String,
        /// Number of devices, or the reason there are none.
        devices: std::result::Result<u32, Error>,
    },
    /// Not loaded, because `XHAL_DEVICE` can never select its backend.
    Skipped {
        /// Why.
        reason: String,
    },
    /// Not loaded, because an earlier file provides the same backend.
    Shadowed {
        /// The file that won.
        by: PathBuf,
    },
    /// Loading failed.
    Failed {
        /// Why.
        error: Error,
    },
}

/// One plugin file and what happened to it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginAttempt {
    /// The file.
    pub path: PathBuf,
    /// The backend its name claims.
    pub backend: String,
    /// Why it was looked at: a search folder's origin, or `None` when named explicitly.
    pub origin: Option<SearchOrigin>,
    /// What happened.
    pub outcome: PluginOutcome,
}

/// Everything discovery did: the `xhal doctor` view.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiscoveryReport {
    /// `XHAL_DEVICE` as parsed, if set.
    pub device_selector: Option<String>,
    /// Folders searched, in order.
    pub search_folders: Vec<SearchFolder>,
    /// Every plugin file considered.
    pub plugins: Vec<PluginAttempt>,
    /// Backends linked into this binary.
    pub static_backends: Vec<String>,
    /// Built-in backends that failed to start, with the reason.
    pub static_failures: Vec<StaticFailure>,
}

/// A built-in backend that could not start (a malformed setting, say).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StaticFailure {
    /// The backend.
    pub name: String,
    /// Why it did not start.
    pub error: Error,
}

/// A device the runtime knows, before it is opened.
#[derive(Debug, Clone)]
pub struct DeviceEntry {
    /// Backend name.
    pub backend: String,
    /// Index within the backend.
    pub index: u32,
    /// What the backend reported.
    pub info: DeviceInfo,
}

impl DeviceEntry {
    /// `backend:index`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.backend, self.index)
    }
}

/// Builds a [`Runtime`] with control over where backends come from.
pub struct RuntimeBuilder {
    static_backends: bool,
    search_plugins: bool,
    plugin_files: Vec<PathBuf>,
    plugin_folders: Option<Vec<PathBuf>>,
    provided: Vec<Arc<dyn Backend>>,
    device_selector: Option<Option<DeviceSelector>>,
}

impl RuntimeBuilder {
    fn new() -> RuntimeBuilder {
        RuntimeBuilder {
            static_backends: true,
            search_plugins: true,
            plugin_files: Vec::new(),
            plugin_folders: None,
            provided: Vec::new(),
            device_selector: None,
        }
    }

    /// Leaves out the backends linked into the binary.
    pub fn without_static_backends(mut self) -> Self {
        self.static_backends = false;
        self
    }

    /// Leaves out the plugin search folders; only files named with [`plugin`](Self::plugin) load.
    pub fn without_plugin_search(mut self) -> Self {
        self.search_plugins = false;
        self
    }

    /// Loads this plugin file, ahead of everything else; a failure fails [`build`](Self::build).
    pub fn plugin(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin_files.push(path.into());
        self
    }

    /// Searches exactly these folders, in order, instead of `XHAL_PLUGIN_PATH` and the
    /// default folders.
    pub fn plugin_folders(mut self, folders: impl IntoIterator<Item = PathBuf>) -> Self {
        self.plugin_folders = Some(folders.into_iter().collect());
        self
    }

    /// Adds a backend object, ahead of plugins and built-ins of the same name.
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.provided.push(backend);
        self
    }

    /// Uses this selector to skip plugins it can never select, instead of `XHAL_DEVICE`.
    /// `None` loads everything.
    pub fn device_selector(mut self, selector: Option<DeviceSelector>) -> Self {
        self.device_selector = Some(selector);
        self
    }

    /// Discovers backends and enumerates their devices.
    pub fn build(self) -> Result<Runtime> {
        crate::trace::start_from_env()?;
        let _span = crate::trace::span("runtime", "discover backends", Vec::new);
        let device_selector = match self.device_selector {
            Some(selector) => selector,
            None => device_selector_from_env()?,
        };
        let may_use = |name: &str| {
            device_selector
                .as_ref()
                .is_none_or(|selector| selector.may_use_backend(name))
        };

        let mut active: Vec<BackendEntry> = Vec::new();
        let mut shadowed: Vec<BackendEntry> = Vec::new();
        let mut attempts: Vec<PluginAttempt> = Vec::new();
        let mut winners: HashMap<String, PathBuf> = HashMap::new();

        for backend in self.provided {
            let entry = BackendEntry::enumerate(backend, BackendSource::Provided);
            winners.insert(entry.info.name.clone(), PathBuf::from("(provided)"));
            active.push(entry);
        }

        for path in &self.plugin_files {
            let plugin = loader::load_plugin(path)?;
            let entry = BackendEntry::enumerate(
                plugin.backend.clone(),
                BackendSource::Plugin {
                    path: plugin.path.clone(),
                },
            );
            attempts.push(PluginAttempt {
                path: plugin.path.clone(),
                backend: entry.info.name.clone(),
                origin: None,
                outcome: loaded_outcome(&entry),
            });
            if winners.contains_key(&entry.info.name) {
                shadowed.push(entry);
            } else {
                winners.insert(entry.info.name.clone(), plugin.path.clone());
                active.push(entry);
            }
        }

        let search_folders = match (&self.plugin_folders, self.search_plugins) {
            (_, false) => Vec::new(),
            (Some(folders), true) => folders
                .iter()
                .map(|path| SearchFolder {
                    exists: path.is_dir(),
                    path: path.clone(),
                    origin: SearchOrigin::Environment,
                })
                .collect(),
            (None, true) => loader::search_folders(),
        };
        for file in loader::plugin_files(&search_folders) {
            let outcome = if let Some(winner) = winners.get(&file.backend) {
                PluginOutcome::Shadowed { by: winner.clone() }
            } else if !may_use(&file.backend) {
                PluginOutcome::Skipped {
                    reason: format!(
                        "XHAL_DEVICE=\"{}\" can never select backend `{}`",
                        device_selector.as_ref().map(ToString::to_string).unwrap_or_default(),
                        file.backend
                    ),
                }
            } else {
                match load_discovered(&file) {
                    Ok(entry) => {
                        let outcome = loaded_outcome(&entry);
                        winners.insert(file.backend.clone(), file.path.clone());
                        active.push(entry);
                        outcome
                    }
                    Err(error) => {
                        tracing::warn!(path = %file.path.display(), %error, "plugin failed to load");
                        PluginOutcome::Failed { error }
                    }
                }
            };
            attempts.push(PluginAttempt {
                path: file.path,
                backend: file.backend,
                origin: Some(file.origin),
                outcome,
            });
        }

        let mut static_failures = Vec::new();
        let statics = if self.static_backends {
            registry::static_backends()
        } else {
            Vec::new()
        };
        for registered in &statics {
            if !may_use(registered.name) && !winners.contains_key(registered.name) {
                continue;
            }
            let backend = match (registered.create)() {
                Ok(backend) => backend,
                Err(error) => {
                    tracing::warn!(backend = registered.name, %error, "built-in backend failed to start");
                    static_failures.push(StaticFailure {
                        name: registered.name.to_owned(),
                        error,
                    });
                    continue;
                }
            };
            let entry = BackendEntry::enumerate(backend, BackendSource::Static);
            if winners.contains_key(registered.name) {
                shadowed.push(entry);
            } else {
                active.push(entry);
            }
        }
        active.sort_by(|a, b| a.info.name.cmp(&b.info.name));

        Ok(Runtime {
            backends: active,
            shadowed,
            report: DiscoveryReport {
                device_selector: device_selector.as_ref().map(ToString::to_string),
                search_folders,
                plugins: attempts,
                static_backends: statics.iter().map(|b| b.name.to_owned()).collect(),
                static_failures,
            },
            opened: Mutex::new(HashMap::new()),
        })
    }
}

fn device_selector_from_env() -> Result<Option<DeviceSelector>> {
    match std::env::var("XHAL_DEVICE") {
        Ok(text) if !text.trim().is_empty() => DeviceSelector::parse(&text).map(Some),
        _ => Ok(None),
    }
}

fn loaded_outcome(entry: &BackendEntry) -> PluginOutcome {
    PluginOutcome::Loaded {
        name: entry.info.name.clone(),
        version: entry.info.version.clone(),
        abi: format!("{}.{}", entry.info.abi_version.0, entry.info.abi_version.1),
        devices: entry
            .devices
            .as_ref()
            .map(|devices| devices.len() as u32)
            .map_err(Clone::clone),
    }
}

fn load_discovered(file: &PluginFile) -> Result<BackendEntry> {
    let _span = crate::trace::span("plugin", "load plugin", || {
        vec![("file", file.path.display().to_string().into())]
    });
    let plugin = loader::load_plugin(&file.path)?;
    let entry = BackendEntry::enumerate(
        plugin.backend.clone(),
        BackendSource::Plugin {
            path: file.path.clone(),
        },
    );
    if entry.info.name != file.backend {
        return Err(Error::new(
            ErrorKind::PluginLoad,
            format!(
                "{}: the file name says backend `{}`, but the plugin calls itself `{}`",
                file.path.display(),
                file.backend,
                entry.info.name
            ),
        ));
    }
    Ok(entry)
}

/// Every backend and device this process can use.
pub struct Runtime {
    backends: Vec<BackendEntry>,
    shadowed: Vec<BackendEntry>,
    report: DiscoveryReport,
    /// Opened devices, so that opening one twice gives the same device (and the same allocator).
    opened: Mutex<HashMap<(String, u32), Weak<DeviceShared>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backends", &self.backends)
            .field("shadowed", &self.shadowed)
            .finish()
    }
}

impl Runtime {
    /// Discovers built-in backends and plugins, honouring `XHAL_PLUGIN_PATH` and `XHAL_DEVICE`.
    pub fn discover() -> Result<Runtime> {
        Runtime::builder().build()
    }

    /// A builder for control over discovery.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::new()
    }

    /// Backends in use, by name.
    pub fn backends(&self) -> &[BackendEntry] {
        &self.backends
    }

    /// Backends hidden by a plugin or provided backend of the same name.
    pub fn shadowed_backends(&self) -> &[BackendEntry] {
        &self.shadowed
    }

    /// The backend called `name`.
    pub fn backend(&self, name: &str) -> Option<&BackendEntry> {
        self.backends.iter().find(|entry| entry.info.name == name)
    }

    /// What discovery did.
    pub fn report(&self) -> &DiscoveryReport {
        &self.report
    }

    /// Every device of every backend in use, in discovery order.
    pub fn devices(&self) -> Vec<DeviceEntry> {
        self.backends
            .iter()
            .flat_map(|entry| {
                entry
                    .devices
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(index, info)| DeviceEntry {
                        backend: entry.info.name.clone(),
                        index: index as u32,
                        info: info.clone(),
                    })
            })
            .collect()
    }

    /// Chooses a device with `selector` without opening it, explaining the choice: for
    /// describing a device (`xhal info`) without depending on it opening.
    pub fn choose_without_opening(&self, selector: &Selector) -> Result<(DeviceEntry, Explanation)> {
        let mut devices = self.devices();
        let candidates: Vec<Candidate<'_>> = devices
            .iter()
            .map(|entry| Candidate {
                backend: &entry.backend,
                index: entry.index,
                info: &entry.info,
            })
            .collect();
        let choice = selector.choose(&candidates)?;
        if choice.index >= devices.len() {
            return Err(Error::internal("the selector chose a device that is not in the list"));
        }
        Ok((devices.swap_remove(choice.index), choice.explanation))
    }

    /// Chooses a device with `selector` and opens it, explaining the choice.
    pub fn choose(&self, selector: &Selector) -> Result<(Device, Explanation)> {
        let (chosen, explanation) = self.choose_without_opening(selector)?;
        let device = self.open_index(&chosen.backend, chosen.index)?;
        tracing::debug!(device = %device.label(), explanation = %explanation.summary, "chose a device");
        Ok((device, explanation))
    }

    /// Opens the device labelled `label` (`cuda:0`, as [`Device::label`] and `xhal devices`
    /// write it). Opening it again gives the same device. To choose a device by what it is,
    /// with an explanation, use [`Runtime::choose`].
    pub fn open(&self, label: &str) -> Result<Device> {
        let (backend, index) = label
            .rsplit_once(':')
            .and_then(|(backend, index)| Some((backend, index.parse::<u32>().ok()?)))
            .filter(|(backend, _)| !backend.is_empty())
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "`{label}` is not a device label; a label is BACKEND:INDEX, such as `cpu:0`"
                ))
            })?;
        self.open_index(backend, index)
    }

    fn open_index(&self, backend: &str, index: u32) -> Result<Device> {
        let entry = self.backend(backend).ok_or_else(|| {
            let present: Vec<&str> = self.backends.iter().map(|b| b.info.name.as_str()).collect();
            Error::not_found(format!(
                "backend `{backend}` is not present; present: {}",
                if present.is_empty() {
                    "none".to_owned()
                } else {
                    present.join(", ")
                }
            ))
        })?;
        let count = match &entry.devices {
            Ok(devices) => devices.len() as u32,
            Err(error) => return Err(error.clone().context(format!("backend `{backend}` has no devices"))),
        };
        if index >= count {
            return Err(Error::not_found(format!(
                "backend `{backend}` has {count} device(s); there is no device {index}"
            )));
        }
        let mut opened = self.opened.lock();
        let key = (backend.to_owned(), index);
        if let Some(shared) = opened.get(&key).and_then(Weak::upgrade) {
            return Ok(Device { shared });
        }
        let device = Device::open(entry.backend.clone(), backend, index)?;
        opened.insert(key, Arc::downgrade(&device.shared));
        Ok(device)
    }
}

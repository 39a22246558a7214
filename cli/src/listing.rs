//! What the commands show about backends and devices: one list built from a [`Runtime`], its
//! JSON form (the stable machine schema of `docs/cli.md`) and its human table.

use crate::table::Table;
use serde::Serialize;
use xhal::{BackendInfo, BackendSource, DeviceInfo, Error, Features, Runtime};

/// Version of every JSON document the CLI writes. Fields may be added without a bump; a
/// field that changes meaning or disappears bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// One backend as the commands show it: in use, shadowed, or a built-in that failed to start.
#[derive(Debug, Clone)]
pub struct ListedBackend {
    pub name: String,
    /// `None` for a built-in backend that failed to start, so never said who it is.
    pub info: Option<BackendInfo>,
    pub source: BackendSource,
    /// Hidden by a plugin (or provided backend) of the same name.
    pub shadowed: bool,
    pub devices: Vec<DeviceInfo>,
    /// Why the backend has no devices (a missing driver), or why it did not start.
    pub error: Option<Error>,
}

/// Every backend of `runtime`, sorted by name, a backend in use before a shadowed one of the
/// same name. `include_shadowed` adds the shadowed ones. `failed_static` are the built-in
/// backends that failed to start, from [`failed_static_backends`].
pub fn list_backends(
    runtime: &Runtime,
    include_shadowed: bool,
    failed_static: &[(String, Error)],
) -> Vec<ListedBackend> {
    let listed = |entry: &xhal::BackendEntry, shadowed: bool| {
        let (devices, error) = match &entry.devices {
            Ok(devices) => (devices.clone(), None),
            Err(error) => (Vec::new(), Some(error.clone())),
        };
        ListedBackend {
            name: entry.info.name.clone(),
            info: Some(entry.info.clone()),
            source: entry.source.clone(),
            shadowed,
            devices,
            error,
        }
    };
    let mut backends: Vec<ListedBackend> = runtime.backends().iter().map(|entry| listed(entry, false)).collect();
    if include_shadowed {
        backends.extend(runtime.shadowed_backends().iter().map(|entry| listed(entry, true)));
    }
    for (name, error) in failed_static {
        // A built-in whose name a plugin already provides would have been shadowed anyway.
        let shadowed = runtime.backend(name).is_some();
        if shadowed && !include_shadowed {
            continue;
        }
        backends.push(ListedBackend {
            name: name.clone(),
            info: None,
            source: BackendSource::Static,
            shadowed,
            devices: Vec::new(),
            error: Some(error.clone()),
        });
    }
    backends.sort_by(|a, b| (&a.name, a.shadowed).cmp(&(&b.name, b.shadowed)));
    backends
}

/// Built-in backends that discovery tried to start and could not (a malformed
/// `XHAL_CPU_DEVICES`, say), each with the error.
pub fn failed_static_backends(runtime: &Runtime) -> Vec<(String, Error)> {
    runtime
        .report()
        .static_failures
        .iter()
        .map(|failure| (failure.name.clone(), failure.error.clone()))
        .collect()
}

/// `1.0 GiB`, `512.0 MiB`, `1023 bytes`: binary units, one decimal.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{:.1} {unit}", bytes as f64 / size as f64);
        }
    }
    format!("{bytes} bytes")
}

/// Feature names in the order of [`Features::ALL`], then any unknown bits as one hex value.
pub fn feature_names(features: Features) -> Vec<String> {
    features.describe()
}

/// `major.minor`.
pub fn abi_text(info: &BackendInfo) -> String {
    format!("{}.{}", info.abi_version.0, info.abi_version.1)
}

/// A path as text; a path that is not UTF-8 is written lossily rather than failing the report.
pub fn path_text(path: &std::path::Path) -> String {
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

/// `{"kind": "static"}`, `{"kind": "plugin", "path": "..."}` or `{"kind": "provided"}`.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceJson {
    Static,
    Plugin { path: String },
    Provided,
}

impl From<&BackendSource> for SourceJson {
    fn from(source: &BackendSource) -> SourceJson {
        match source {
            BackendSource::Static => SourceJson::Static,
            BackendSource::Plugin { path } => SourceJson::Plugin { path: path_text(path) },
            BackendSource::Provided => SourceJson::Provided,
        }
    }
}

/// `{"kind": "driver_unavailable", "message": "..."}`.
#[derive(Debug, Serialize)]
pub struct ErrorJson {
    pub kind: &'static str,
    pub message: String,
}

impl From<&Error> for ErrorJson {
    fn from(error: &Error) -> ErrorJson {
        ErrorJson {
            kind: error.kind().name(),
            message: error.message().to_owned(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct BackendJson {
    pub name: String,
    pub version: Option<String>,
    pub abi: Option<String>,
    pub source: SourceJson,
    pub shadowed: bool,
    pub devices: Vec<DeviceJson>,
    pub error: Option<ErrorJson>,
}

impl From<&ListedBackend> for BackendJson {
    fn from(backend: &ListedBackend) -> BackendJson {
        BackendJson {
            name: backend.name.clone(),
            version: backend.info.as_ref().map(|info| info.version.clone()),
            abi: backend.info.as_ref().map(abi_text),
            source: SourceJson::from(&backend.source),
            shadowed: backend.shadowed,
            devices: backend
                .devices
                .iter()
                .enumerate()
                .map(|(index, info)| DeviceJson::new(&backend.name, index as u32, info))
                .collect(),
            error: backend.error.as_ref().map(ErrorJson::from),
        }
    }
}

/// Everything [`DeviceInfo`] holds (see its `Serialize`), with the device's label and index.
#[derive(Debug, Serialize)]
pub struct DeviceJson {
    pub label: String,
    pub index: u32,
    #[serde(flatten)]
    pub info: DeviceInfo,
}

impl DeviceJson {
    pub fn new(backend: &str, index: u32, info: &DeviceInfo) -> DeviceJson {
        DeviceJson {
            label: format!("{backend}:{index}"),
            index,
            info: info.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Human table
// ---------------------------------------------------------------------------------------------

/// The `xhal devices` table: one line per device, and one line for a backend without devices
/// saying why.
pub fn devices_table(backends: &[ListedBackend], indent: &str) -> String {
    let mut table = Table::with_header(["BACKEND", "DEVICE", "NAME", "TYPE", "MEMORY", "SOURCE"]);
    for backend in backends {
        let source = if backend.shadowed {
            format!("{} (shadowed)", backend.source)
        } else {
            backend.source.to_string()
        };
        if backend.devices.is_empty() {
            let (summary, why) = match (&backend.info, &backend.error) {
                (None, Some(error)) => ("(failed to start)", Some(error)),
                (_, error) => ("(no devices)", error.as_ref()),
            };
            table.row([backend.name.as_str(), "-", summary, "-", "-", source.as_str()]);
            // The reason goes on a line of its own under NAME: driver messages are long, and
            // in a cell they would widen the whole table.
            if let Some(error) = why {
                table.spanning_row(2, format!("{error}"));
            }
        }
        for (index, info) in backend.devices.iter().enumerate() {
            table.row([
                backend.name.clone(),
                format!("{}:{index}", backend.name),
                info.name.clone(),
                info.device_type.to_string(),
                format_bytes(info.total_memory),
                source.clone(),
            ]);
        }
    }
    if backends.is_empty() {
        return format!("{indent}no backends\n");
    }
    table.render(indent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_written_in_binary_units() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(8 << 30), "8.0 GiB");
        assert_eq!(format_bytes(u64::MAX), "16777216.0 TiB");
    }

    #[test]
    fn unknown_feature_bits_are_kept() {
        assert_eq!(
            feature_names(Features::F16 | Features(1 << 60)),
            ["f16", "0x1000000000000000"]
        );
        assert!(feature_names(Features::default()).is_empty());
    }
}

//! What the runner and its worker processes say to each other: one command per line on the
//! worker's stdin, one JSON message per line on its stdout, each prefixed with [`PREFIX`] so
//! that anything a plugin prints to stdout is told apart and ignored.

use serde::{Deserialize, Serialize};
use xhal_conformance::perf::PerformanceProfile;
use xhal_conformance::TestRecord;

/// Marks the worker's own lines on stdout.
pub const PREFIX: &str = "XHAL-CTS ";

/// A message from a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerMessage {
    /// Answer to `describe`.
    Description(Description),
    /// A test began.
    Started(String),
    /// A test ended (known-failure declarations not yet applied).
    Record(TestRecord),
    /// Answer to `perf`.
    Performance(PerformanceProfile),
    /// The backend could not be set up; the worker exits after this.
    SetupError(String),
}

/// The backend and its devices, as the worker found them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Description {
    /// Backend name.
    pub name: String,
    /// Backend version.
    pub version: String,
    /// `major.minor`.
    pub abi_version: String,
    /// The plugin file, when there is one.
    pub plugin_path: Option<String>,
    /// Every device.
    pub devices: Vec<DescribedDevice>,
}

/// One device.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DescribedDevice {
    /// Index in the backend.
    pub index: u32,
    /// Name.
    pub name: String,
    /// `cpu`, `discrete_gpu`...
    pub device_type: String,
    /// Claimed feature names.
    pub features: Vec<String>,
    /// The information exactly as reported.
    pub info: serde_json::Value,
}

/// A command to a worker.
pub enum Command<'a> {
    /// Describe the backend.
    Describe,
    /// Run test `id` on device `index`.
    Test { index: u32, id: &'a str },
    /// Measure the performance profile of device `index`.
    Performance { index: u32 },
}

impl Command<'_> {
    /// The line sent.
    pub fn line(&self) -> String {
        match self {
            Command::Describe => "describe\n".to_string(),
            Command::Test { index, id } => format!("test {index} {id}\n"),
            Command::Performance { index } => format!("perf {index}\n"),
        }
    }
}

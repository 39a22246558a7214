//! `xhal doctor`: every folder searched, every plugin file and what became of it, the built-in
//! backends, the environment, the devices, and the problems that would bite an application.

use super::info::ExplanationJson;
use super::{json_text, Output, EXIT_PROBLEMS_FOUND, EXIT_SUCCESS};
use crate::listing::{self, path_text, BackendJson, ErrorJson, SCHEMA_VERSION};
use crate::table::Table;
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use xhal::plugin::SearchOrigin;
use xhal::select::DeviceSelector;
use xhal::{BackendSource, PluginAttempt, PluginOutcome, Runtime, Selector};

/// The variables that change what xhal finds or how it behaves, shown by doctor.
const ENVIRONMENT: [&str; 10] = [
    "XHAL_DEVICE",
    "XHAL_PLUGIN_PATH",
    "XHAL_LOG",
    "XHAL_CACHING_ALLOCATOR",
    "XHAL_CPU_DEVICES",
    "XHAL_CPU_MEMORY",
    "XHAL_CPU_MODE",
    "XHAL_CACHE_DIR",
    "XHAL_NVRTC_LIBRARY",
    "XHAL_LEVEL_ZERO_LOADER",
];

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Write JSON (schema in docs/cli.md) instead of a report.
    #[arg(long)]
    pub json: bool,
}

/// One thing that would make an application fail or get less than it asked for.
#[derive(Debug, Serialize)]
struct Problem {
    kind: ProblemKind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum ProblemKind {
    /// XHAL_DEVICE does not parse (or is not UTF-8).
    SelectorInvalid,
    /// XHAL_DEVICE names a backend that is not present.
    BackendMissing,
    /// XHAL_DEVICE names a backend that is present without devices.
    BackendWithoutDevices,
    /// A plugin file failed to load.
    PluginFailed,
    /// A built-in backend failed to start.
    StaticBackendFailed,
    /// No device can be chosen with XHAL_DEVICE and the default policy.
    NoDeviceSelected,
}

/// XHAL_DEVICE as found, parsed, or why not.
struct DeviceVariable {
    text: Option<String>,
    selector: Option<DeviceSelector>,
    error: Option<String>,
}

impl DeviceVariable {
    fn read() -> DeviceVariable {
        let Some(value) = std::env::var_os("XHAL_DEVICE") else {
            return DeviceVariable {
                text: None,
                selector: None,
                error: None,
            };
        };
        let text = value.to_string_lossy().into_owned();
        let (selector, error) = if value.to_str().is_none() {
            (None, Some(format!("XHAL_DEVICE is not valid UTF-8: {value:?}")))
        } else if text.trim().is_empty() {
            // Whitespace only is taken as unset, as the runtime does.
            (None, None)
        } else {
            match DeviceSelector::parse(&text) {
                Ok(selector) => (Some(selector), None),
                Err(error) => (None, Some(error.message().to_owned())),
            }
        };
        DeviceVariable {
            text: Some(text),
            selector,
            error,
        }
    }
}

#[derive(Serialize)]
struct DoctorJson {
    schema_version: u32,
    xhal_version: &'static str,
    abi_version: String,
    environment: BTreeMap<&'static str, Option<String>>,
    device_selector: DeviceSelectorJson,
    search_folders: Vec<SearchFolderJson>,
    plugins: Vec<PluginJson>,
    static_backends: Vec<StaticBackendJson>,
    backends: Vec<BackendJson>,
    default_device: Option<DefaultDeviceJson>,
    /// Why there is no default device, when there is none.
    default_device_error: Option<String>,
    problems: Vec<Problem>,
}

#[derive(Serialize)]
struct DeviceSelectorJson {
    text: Option<String>,
    parsed: Option<String>,
    error: Option<String>,
}

#[derive(Serialize)]
struct SearchFolderJson {
    path: String,
    origin: &'static str,
    exists: bool,
}

#[derive(Serialize)]
struct PluginJson {
    path: String,
    backend: String,
    origin: Option<&'static str>,
    outcome: OutcomeJson,
}

#[derive(Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
enum OutcomeJson {
    Loaded {
        name: String,
        version: String,
        abi: String,
        device_count: Option<u32>,
        error: Option<ErrorJson>,
    },
    Skipped {
        reason: String,
    },
    Shadowed {
        by: String,
    },
    Failed {
        error: ErrorJson,
    },
}

#[derive(Serialize)]
struct StaticBackendJson {
    name: String,
    status: StaticStatus,
    detail: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
enum StaticStatus {
    InUse,
    Shadowed,
    Skipped,
    Failed,
}

#[derive(Serialize)]
struct DefaultDeviceJson {
    label: String,
    explanation: ExplanationJson,
}

/// A stable key for a search origin in JSON.
fn origin_key(origin: SearchOrigin) -> &'static str {
    match origin {
        SearchOrigin::Environment => "environment",
        SearchOrigin::Executable => "executable",
        SearchOrigin::User => "user",
        SearchOrigin::System => "system",
    }
}

fn outcome_json(outcome: &PluginOutcome) -> OutcomeJson {
    match outcome {
        PluginOutcome::Loaded {
            name,
            version,
            abi,
            devices,
        } => OutcomeJson::Loaded {
            name: name.clone(),
            version: version.clone(),
            abi: abi.clone(),
            device_count: devices.as_ref().ok().copied(),
            error: devices.as_ref().err().map(ErrorJson::from),
        },
        PluginOutcome::Skipped { reason } => OutcomeJson::Skipped { reason: reason.clone() },
        PluginOutcome::Shadowed { by } => OutcomeJson::Shadowed { by: path_text(by) },
        PluginOutcome::Failed { error } => OutcomeJson::Failed {
            error: ErrorJson::from(error),
        },
    }
}

/// What happened to one built-in backend, and in words.
fn static_status(runtime: &Runtime, name: &str, failed: &[(String, xhal::Error)]) -> (StaticStatus, Option<String>) {
    if let Some((_, error)) = failed.iter().find(|(failed_name, _)| failed_name == name) {
        return (StaticStatus::Failed, Some(error.to_string()));
    }
    let is_static = |entry: &xhal::BackendEntry| entry.info.name == name && entry.source == BackendSource::Static;
    if runtime.backends().iter().any(is_static) {
        return (StaticStatus::InUse, None);
    }
    if runtime.shadowed_backends().iter().any(is_static) {
        let by = runtime
            .backend(name)
            .map(|winner| winner.source.to_string())
            .unwrap_or_else(|| "another backend of the same name".to_owned());
        return (StaticStatus::Shadowed, Some(format!("by {by}")));
    }
    (
        StaticStatus::Skipped,
        Some("not started: XHAL_DEVICE can never select it".to_owned()),
    )
}

pub fn run(args: &DoctorArgs) -> anyhow::Result<Output> {
    let variable = DeviceVariable::read();
    // A malformed XHAL_DEVICE is reported, not fatal: discovery then loads everything, so the
    // rest of the report is still there to read.
    let runtime = Runtime::builder()
        .device_selector(variable.selector.clone())
        .build()
        .context("discovering backends")?;
    let report = runtime.report();
    let failed_statics = listing::failed_static_backends(&runtime);
    let backends = listing::list_backends(&runtime, true, &failed_statics);

    let mut problems = Vec::new();
    if let Some(error) = &variable.error {
        problems.push(Problem {
            kind: ProblemKind::SelectorInvalid,
            message: error.clone(),
        });
    }
    if let Some(selector) = &variable.selector {
        for name in selector.named_backends() {
            if let Some(problem) = named_backend_problem(&runtime, &name) {
                problems.push(problem);
            }
        }
    }
    for attempt in &report.plugins {
        if let PluginOutcome::Failed { error } = &attempt.outcome {
            problems.push(Problem {
                kind: ProblemKind::PluginFailed,
                message: format!(
                    "plugin {} failed to load: {}",
                    attempt.path.display(),
                    message_about(&attempt.path, error)
                ),
            });
        }
    }
    for (name, error) in &failed_statics {
        problems.push(Problem {
            kind: ProblemKind::StaticBackendFailed,
            message: format!("built-in backend `{name}` failed to start: {error}"),
        });
    }

    // What `Runtime::choose` with `Selector::from_env()` would choose, without opening it.
    let selector = match &variable.selector {
        Some(devices) => Selector::new().with_devices(devices.clone()),
        None => Selector::new(),
    };
    let choice = runtime.choose_without_opening(&selector);
    if let Err(error) = &choice {
        // The selector's own problems already say why; repeating it as a second problem
        // would only make the list longer.
        let explained = problems.iter().any(|problem| {
            matches!(
                problem.kind,
                ProblemKind::SelectorInvalid | ProblemKind::BackendMissing | ProblemKind::BackendWithoutDevices
            )
        });
        if !explained {
            problems.push(Problem {
                kind: ProblemKind::NoDeviceSelected,
                message: format!("no device can be chosen: {}", error.message()),
            });
        }
    }
    let default_device = choice
        .as_ref()
        .ok()
        .map(|(entry, explanation)| (entry.label(), explanation));

    let problems_found = !problems.is_empty();
    let static_backends: Vec<(String, StaticStatus, Option<String>)> = report
        .static_backends
        .iter()
        .map(|name| {
            let (status, detail) = static_status(&runtime, name, &failed_statics);
            (name.clone(), status, detail)
        })
        .collect();

    if args.json {
        let text = json_text(&DoctorJson {
            schema_version: SCHEMA_VERSION,
            xhal_version: env!("CARGO_PKG_VERSION"),
            abi_version: abi_version(),
            environment: ENVIRONMENT
                .iter()
                .map(|name| (*name, environment_value(name)))
                .collect(),
            device_selector: DeviceSelectorJson {
                text: variable.text.clone(),
                parsed: variable.selector.as_ref().map(ToString::to_string),
                error: variable.error.clone(),
            },
            search_folders: report
                .search_folders
                .iter()
                .map(|folder| SearchFolderJson {
                    path: path_text(&folder.path),
                    origin: origin_key(folder.origin),
                    exists: folder.exists,
                })
                .collect(),
            plugins: report
                .plugins
                .iter()
                .map(|attempt| PluginJson {
                    path: path_text(&attempt.path),
                    backend: attempt.backend.clone(),
                    origin: attempt.origin.map(origin_key),
                    outcome: outcome_json(&attempt.outcome),
                })
                .collect(),
            static_backends: static_backends
                .into_iter()
                .map(|(name, status, detail)| StaticBackendJson { name, status, detail })
                .collect(),
            backends: backends.iter().map(BackendJson::from).collect(),
            default_device: default_device.map(|(label, explanation)| DefaultDeviceJson {
                label,
                explanation: ExplanationJson::from(explanation),
            }),
            default_device_error: choice.as_ref().err().map(|error| error.message().to_owned()),
            problems,
        })?;
        return Ok(Output::with_exit_code(text, exit_code(problems_found)));
    }

    let mut text = format!("xhal {} (plugin ABI {})\n", env!("CARGO_PKG_VERSION"), abi_version());

    text.push_str("\nenvironment\n");
    let mut environment = Table::new();
    for name in ENVIRONMENT {
        let value = match environment_value(name) {
            None => "(unset)".to_owned(),
            Some(value) if name == "XHAL_DEVICE" => match &variable.selector {
                Some(selector) => format!("{value:?} (parsed as {selector})"),
                None if variable.error.is_some() => format!("{value:?} (does not parse)"),
                None => format!("{value:?} (blank: taken as unset)"),
            },
            Some(value) => format!("{value:?}"),
        };
        environment.row([name.to_owned(), value]);
    }
    text.push_str(&environment.render("  "));

    text.push_str("\nsearch folders, in order\n");
    let mut folders = Table::with_header(["ORIGIN", "EXISTS", "PATH"]);
    for folder in &report.search_folders {
        folders.row([
            folder.origin.to_string(),
            if folder.exists { "yes" } else { "no" }.to_owned(),
            folder.path.display().to_string(),
        ]);
    }
    text.push_str(&folders.render("  "));

    text.push_str("\nplugin files\n");
    if report.plugins.is_empty() {
        text.push_str("  none found (files are named libxhal_<backend>.so)\n");
    }
    for attempt in &report.plugins {
        text.push_str(&describe_attempt(attempt));
    }

    text.push_str("\nbuilt-in backends\n");
    if static_backends.is_empty() {
        text.push_str("  none linked into this binary\n");
    }
    let mut statics = Table::new();
    for (name, status, detail) in &static_backends {
        let status = match status {
            StaticStatus::InUse => "in use",
            StaticStatus::Shadowed => "shadowed",
            StaticStatus::Skipped => "skipped",
            StaticStatus::Failed => "failed",
        };
        statics.row([name.as_str(), status, detail.as_deref().unwrap_or("")]);
    }
    text.push_str(&statics.render("  "));

    text.push_str("\nbackends and devices\n");
    text.push_str(&listing::devices_table(&backends, "  "));

    text.push_str("\ndefault device (what Runtime::choose with Selector::from_env() would open)\n");
    match (&choice, default_device) {
        (Ok(_), Some((_, explanation))) => {
            text.push_str(&format!("  {}\n", explanation.summary));
            for verdict in &explanation.verdicts {
                text.push_str(&format!("    {verdict}\n"));
            }
        }
        (Err(error), _) => text.push_str(&format!("  none: {}\n", indent_continuation(error.message()))),
        (Ok(_), None) => text.push_str("  none\n"),
    }

    if problems_found {
        text.push_str("\nproblems:\n");
        for problem in &problems {
            text.push_str(&format!("  - {}\n", indent_continuation(&problem.message)));
        }
    } else {
        text.push_str("\nno problems found\n");
    }
    Ok(Output::with_exit_code(text, exit_code(problems_found)))
}

/// 3 when doctor found problems, else 0.
fn exit_code(problems_found: bool) -> u8 {
    if problems_found {
        EXIT_PROBLEMS_FOUND
    } else {
        EXIT_SUCCESS
    }
}

/// Why a backend named by XHAL_DEVICE cannot serve it, if it cannot.
fn named_backend_problem(runtime: &Runtime, name: &str) -> Option<Problem> {
    match runtime.backend(name) {
        None => {
            let files: Vec<String> = runtime
                .report()
                .plugins
                .iter()
                .filter(|attempt| attempt.backend == name)
                .map(|attempt| format!("{} ({})", attempt.path.display(), outcome_word(&attempt.outcome)))
                .collect();
            let hint = if files.is_empty() {
                format!(
                    "no plugin file libxhal_{name}{} is in the search folders, and it is not built in",
                    std::env::consts::DLL_SUFFIX
                )
            } else {
                format!("plugin files for it: {}", files.join(", "))
            };
            Some(Problem {
                kind: ProblemKind::BackendMissing,
                message: format!("XHAL_DEVICE names backend `{name}`, which is not present: {hint}"),
            })
        }
        Some(entry) => match &entry.devices {
            Err(error) => Some(Problem {
                kind: ProblemKind::BackendWithoutDevices,
                message: format!("XHAL_DEVICE names backend `{name}`, which has no devices: {error}"),
            }),
            Ok(devices) if devices.is_empty() => Some(Problem {
                kind: ProblemKind::BackendWithoutDevices,
                message: format!("XHAL_DEVICE names backend `{name}`, which reports no devices"),
            }),
            Ok(_) => None,
        },
    }
}

fn outcome_word(outcome: &PluginOutcome) -> &'static str {
    match outcome {
        PluginOutcome::Loaded { .. } => "loaded",
        PluginOutcome::Skipped { .. } => "skipped",
        PluginOutcome::Shadowed { .. } => "shadowed",
        PluginOutcome::Failed { .. } => "failed",
    }
}

fn describe_attempt(attempt: &PluginAttempt) -> String {
    let origin = match attempt.origin {
        Some(origin) => origin.to_string(),
        None => "named explicitly".to_owned(),
    };
    let what = match &attempt.outcome {
        PluginOutcome::Loaded {
            name,
            version,
            abi,
            devices,
        } => match devices {
            Ok(1) => format!("loaded: {name} {version}, ABI {abi}, 1 device"),
            Ok(count) => format!("loaded: {name} {version}, ABI {abi}, {count} devices"),
            Err(error) => format!("loaded: {name} {version}, ABI {abi}, no devices: {error}"),
        },
        PluginOutcome::Skipped { reason } => format!("skipped: {reason}"),
        PluginOutcome::Shadowed { by } => format!("shadowed by {}", by.display()),
        PluginOutcome::Failed { error } => {
            format!("failed: {}", message_about(&attempt.path, error))
        }
    };
    format!(
        "  {}  (backend `{}`, {origin})\n    {}\n",
        attempt.path.display(),
        attempt.backend,
        indent_continuation(&what)
    )
}

/// An error's message without the file name it starts with, for a line that already names
/// the file. A message naming another path (the target of a symbolic link) is kept whole.
fn message_about(path: &std::path::Path, error: &xhal::Error) -> String {
    let message = error.message();
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_owned()
}

/// Indents the second and later lines of a message (a selector error's caret lines) so that
/// they stay under the item they belong to.
fn indent_continuation(message: &str) -> String {
    message.replace('\n', "\n    ")
}

fn environment_value(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

fn abi_version() -> String {
    format!("{}.{}", xhal::abi::XHAL_ABI_MAJOR, xhal::abi::XHAL_ABI_MINOR)
}

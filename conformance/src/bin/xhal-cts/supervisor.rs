//! `xhal-cts run`: hands tests to worker processes, collects their results, applies the
//! known-failure declarations, and writes the reports.

use crate::protocol::{Command, Description, WorkerMessage};
use crate::worker_process::{Received, WorkerProcess};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::Digest;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use xhal_conformance::perf::PerformanceProfile;
use xhal_conformance::report::{self, DeviceReport, PluginInfo, RunOptions, RunReport};
use xhal_conformance::{run_declared, KnownFailurePolicy, Outcome, RunIdentity, TargetSpec, TestCase, TestRecord};

pub struct RunSettings {
    pub spec: TargetSpec,
    pub device: Option<xhal::DeviceSelector>,
    pub tests: Vec<TestCase>,
    pub isolate: bool,
    pub jobs: usize,
    pub timeout: Duration,
    pub policy: KnownFailurePolicy,
    pub performance: bool,
    pub options: RunOptions,
    pub quiet: bool,
}

/// A failure to set up the run (exit status 3).
pub struct SetupFailure(pub String);

/// Asks a fresh worker to describe the backend: the runner itself never loads the plugin, so
/// a plugin that crashes while loading is reported, not fatal.
pub fn describe(spec: &TargetSpec, timeout: Duration) -> Result<Description, SetupFailure> {
    let mut worker =
        WorkerProcess::spawn(spec).map_err(|error| SetupFailure(format!("cannot start a worker process: {error}")))?;
    worker.send(&Command::Describe);
    let answer = worker.receive(Instant::now() + timeout);
    let description = match answer {
        Received::Message(WorkerMessage::Description(description)) => Ok(description),
        Received::Message(WorkerMessage::SetupError(error)) => Err(SetupFailure(error)),
        Received::Message(other) => Err(SetupFailure(format!("unexpected answer from the worker: {other:?}"))),
        Received::TimedOut => Err(SetupFailure(format!(
            "the backend did not load and list its devices within {} s",
            timeout.as_secs_f64()
        ))),
        Received::Died(how) => Err(SetupFailure(format!("loading the backend killed the process: {how}"))),
    };
    worker.finish();
    description
}

pub fn run(settings: &RunSettings) -> Result<RunReport, SetupFailure> {
    let description = describe(&settings.spec, settings.timeout.max(Duration::from_secs(30)))?;
    let devices: Vec<_> = description
        .devices
        .iter()
        .filter(|device| {
            settings.device.as_ref().is_none_or(|selector| {
                let device_type = device_type_from_name(&device.device_type);
                selector.accepts(&description.name, device.index, device_type)
            })
        })
        .cloned()
        .collect();
    if devices.is_empty() {
        let present: Vec<String> = description
            .devices
            .iter()
            .map(|device| format!("{}:{} ({})", description.name, device.index, device.name))
            .collect();
        return Err(SetupFailure(format!(
            "--device {} selects none of the backend's devices: {}",
            settings.device.as_ref().map(ToString::to_string).unwrap_or_default(),
            present.join(", ")
        )));
    }
    let plugin_path = description.plugin_path.clone();
    let sha256 = match &plugin_path {
        Some(path) => Some(
            file_sha256(Path::new(path))
                .map_err(|error| SetupFailure(format!("cannot read {path} to hash it: {error}")))?,
        ),
        None => None,
    };
    let plugin = PluginInfo {
        name: description.name.clone(),
        version: description.version.clone(),
        abi_version: description.abi_version.clone(),
        path: plugin_path,
        sha256,
    };
    let catalogue = xhal_conformance::catalogue();
    let mut device_reports = Vec::new();
    for device in &devices {
        let identity = RunIdentity {
            backend: &description.name,
            plugin_version: &description.version,
            device: &device.name,
        };
        if !settings.quiet {
            eprintln!(
                "certifying {}:{} ({}) with {} tests{}",
                description.name,
                device.index,
                device.name,
                settings.tests.len(),
                if settings.isolate { ", one process per test" } else { "" }
            );
        }
        let results = run_tests(settings, device.index, identity);
        let performance = if settings.performance {
            Some(measure_performance(&settings.spec, device.index, settings.timeout))
        } else {
            None
        };
        device_reports.push(DeviceReport {
            index: device.index,
            info: device.info.clone(),
            counts: report::count_results(&results),
            profiles: report::profiles(&catalogue, &results, &device.features),
            performance,
            results,
        });
    }
    Ok(RunReport {
        suite: report::SuiteInfo::current(),
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host: report::HostInfo::current(),
        plugin,
        options: settings.options.clone(),
        devices: device_reports,
    })
}

fn device_type_from_name(name: &str) -> xhal::DeviceType {
    [
        xhal::DeviceType::Cpu,
        xhal::DeviceType::IntegratedGpu,
        xhal::DeviceType::DiscreteGpu,
        xhal::DeviceType::Accelerator,
    ]
    .into_iter()
    .find(|device_type| device_type.name() == name)
    .unwrap_or(xhal::DeviceType::Other)
}

fn file_sha256(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    let digest = sha2::Sha256::digest(&bytes);
    Ok(digest.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn progress_bar(settings: &RunSettings) -> ProgressBar {
    if settings.quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(settings.tests.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Runs the settings' tests on device `index` with `jobs` workers, in catalogue order of
/// results whatever order they finish in.
fn run_tests(settings: &RunSettings, index: u32, identity: RunIdentity<'_>) -> Vec<TestRecord> {
    let bar = progress_bar(settings);
    let queue: Mutex<VecDeque<(usize, TestCase)>> = Mutex::new(settings.tests.iter().copied().enumerate().collect());
    let results: Mutex<Vec<Option<TestRecord>>> = Mutex::new(vec![None; settings.tests.len()]);
    std::thread::scope(|scope| {
        for _ in 0..settings.jobs.max(1) {
            scope.spawn(|| {
                let mut worker: Option<WorkerProcess> = None;
                while let Some((position, case)) = next_test(&queue) {
                    bar.set_message(case.id);
                    let started = Instant::now();
                    let outcome = run_declared(&case, identity, &settings.policy, || {
                        run_in_worker(settings, &mut worker, index, &case)
                    });
                    let record = TestRecord {
                        id: case.id.to_string(),
                        area: case.area().to_string(),
                        profile: case.profile(),
                        outcome,
                        seconds: started.elapsed().as_secs_f64(),
                    };
                    if record.outcome.is_failure() || matches!(record.outcome, Outcome::UnexpectedPass { .. }) {
                        let line = format!(
                            "{:<15} {}  {}",
                            record.outcome.name(),
                            record.id,
                            record.outcome.detail()
                        );
                        if bar.is_hidden() {
                            if !settings.quiet {
                                eprintln!("{line}");
                            }
                        } else {
                            bar.println(line);
                        }
                    }
                    if let Ok(mut results) = results.lock() {
                        results[position] = Some(record);
                    }
                    bar.inc(1);
                }
                if let Some(worker) = worker.take() {
                    worker.finish();
                }
            });
        }
    });
    bar.finish_and_clear();
    results.into_inner().unwrap_or_default().into_iter().flatten().collect()
}

/// The next test to hand out. A function of its own so the queue's lock is released before
/// the test runs, not held for the loop body as a `while let` temporary would be.
fn next_test(queue: &Mutex<VecDeque<(usize, TestCase)>>) -> Option<(usize, TestCase)> {
    queue.lock().ok().and_then(|mut queue| queue.pop_front())
}

/// Runs one test in the slot's worker, starting one when there is none; a worker that hangs
/// is killed, one that dies is replaced for the next test.
fn run_in_worker(settings: &RunSettings, slot: &mut Option<WorkerProcess>, index: u32, case: &TestCase) -> Outcome {
    if slot.is_none() {
        match WorkerProcess::spawn(&settings.spec) {
            Ok(worker) => *slot = Some(worker),
            Err(error) => {
                return Outcome::Crashed {
                    message: format!("cannot start a worker process: {error}"),
                }
            }
        }
    }
    let Some(worker) = slot.as_mut() else {
        return Outcome::Crashed {
            message: "no worker process".to_string(),
        };
    };
    worker.send(&Command::Test { index, id: case.id });
    let deadline = Instant::now() + settings.timeout;
    let outcome = loop {
        match worker.receive(deadline) {
            Received::Message(WorkerMessage::Started(_)) => continue,
            Received::Message(WorkerMessage::Record(record)) if record.id == case.id => break record.outcome,
            Received::Message(WorkerMessage::SetupError(error)) => {
                if let Some(worker) = slot.take() {
                    worker.kill();
                }
                return Outcome::Crashed {
                    message: format!("the worker could not set up the backend: {error}"),
                };
            }
            Received::Message(other) => {
                tracing::warn!(?other, "unexpected worker message");
                continue;
            }
            Received::TimedOut => {
                if let Some(worker) = slot.take() {
                    worker.kill();
                }
                return Outcome::TimedOut {
                    limit_seconds: settings.timeout.as_secs_f64(),
                };
            }
            Received::Died(how) => {
                slot.take();
                return Outcome::Crashed { message: how };
            }
        }
    };
    if settings.isolate {
        if let Some(worker) = slot.take() {
            worker.finish();
        }
    }
    outcome
}

fn measure_performance(spec: &TargetSpec, index: u32, timeout: Duration) -> PerformanceProfile {
    let failed = |note: String| PerformanceProfile {
        notes: vec![note],
        ..Default::default()
    };
    let mut worker = match WorkerProcess::spawn(spec) {
        Ok(worker) => worker,
        Err(error) => return failed(format!("cannot start a worker process: {error}")),
    };
    worker.send(&Command::Performance { index });
    let limit = timeout.max(Duration::from_secs(120));
    let profile = match worker.receive(Instant::now() + limit) {
        Received::Message(WorkerMessage::Performance(profile)) => profile,
        Received::Message(other) => failed(format!("unexpected answer: {other:?}")),
        Received::TimedOut => failed(format!("the measurements did not finish within {} s", limit.as_secs())),
        Received::Died(how) => failed(format!("the measurements crashed: {how}")),
    };
    worker.finish();
    profile
}

/// Writes `report.json`, `junit.xml` and `certificate.json` into `dir`.
pub fn write_reports(report: &RunReport, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let files = [
        (dir.join("report.json"), serde_json::to_string_pretty(report)?),
        (dir.join("junit.xml"), report::junit_xml(report)),
        (
            dir.join("certificate.json"),
            serde_json::to_string_pretty(&report.certificate())?,
        ),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        std::fs::write(&path, text + "\n")?;
        written.push(path);
    }
    Ok(written)
}

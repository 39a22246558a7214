//! The worker process: opens the backend, then runs what the runner asks, one command at a
//! time. A crash or a hang here costs one test, not the run.

use crate::protocol::{DescribedDevice, Description, WorkerMessage, PREFIX};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use xhal_conformance::{catalogue, run_test, Outcome, Target, TargetSpec, TestRecord};

fn send(message: &WorkerMessage) {
    let line = serde_json::to_string(message).unwrap_or_else(|error| {
        serde_json::to_string(&WorkerMessage::SetupError(format!("cannot encode a message: {error}")))
            .unwrap_or_default()
    });
    let mut stdout = std::io::stdout().lock();
    // A closed pipe means the runner is gone; nothing is left to report to.
    let _ = writeln!(stdout, "{PREFIX}{line}");
    let _ = stdout.flush();
}

pub fn run(spec: TargetSpec) -> ExitCode {
    let target = match Target::open(&spec) {
        Ok(target) => target,
        Err(error) => {
            send(&WorkerMessage::SetupError(error.to_string()));
            return ExitCode::from(crate::EXIT_SETUP);
        }
    };
    let tests = catalogue();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["describe"] => match describe(&target) {
                Ok(description) => send(&WorkerMessage::Description(description)),
                Err(error) => {
                    send(&WorkerMessage::SetupError(error));
                    return ExitCode::from(crate::EXIT_SETUP);
                }
            },
            ["test", index, id] => {
                let Some(case) = tests.iter().find(|case| case.id == *id) else {
                    send(&WorkerMessage::SetupError(format!("no test `{id}` in the catalogue")));
                    return ExitCode::from(crate::EXIT_SETUP);
                };
                let index: u32 = index.parse().unwrap_or(u32::MAX);
                send(&WorkerMessage::Started(case.id.to_string()));
                let started = std::time::Instant::now();
                let trace = start_trace(&target, index, case.id);
                let outcome = run_test(&target, index, case);
                finish_trace(trace, &outcome);
                send(&WorkerMessage::Record(TestRecord {
                    id: case.id.to_string(),
                    area: case.area().to_string(),
                    profile: case.profile(),
                    outcome,
                    seconds: started.elapsed().as_secs_f64(),
                }));
            }
            ["perf", index] => {
                let index: u32 = index.parse().unwrap_or(u32::MAX);
                let profile = match target.runtime().open(&format!("{}:{index}", target.backend_name())) {
                    Ok(device) => xhal_conformance::perf::measure(&device),
                    Err(error) => xhal_conformance::perf::PerformanceProfile {
                        notes: vec![format!("cannot open the device: {error}")],
                        ..Default::default()
                    },
                };
                send(&WorkerMessage::Performance(profile));
            }
            _ => {
                send(&WorkerMessage::SetupError(format!(
                    "the worker does not understand `{line}`"
                )));
                return ExitCode::from(crate::EXIT_SETUP);
            }
        }
    }
    ExitCode::SUCCESS
}

fn describe(target: &Target) -> Result<Description, String> {
    let info = target.backend_info().map_err(|error| error.to_string())?;
    let devices = target.devices().map_err(|error| error.to_string())?;
    Ok(Description {
        name: info.name,
        version: info.version,
        abi_version: format!("{}.{}", info.abi_version.0, info.abi_version.1),
        plugin_path: target.plugin_path().map(|path| path.display().to_string()),
        devices: devices
            .into_iter()
            .map(|(index, info)| DescribedDevice {
                index,
                name: info.name.clone(),
                device_type: info.device_type.name().to_string(),
                features: info.features.names().into_iter().map(str::to_string).collect(),
                info: serde_json::to_value(&info).unwrap_or(serde_json::Value::Null),
            })
            .collect(),
    })
}

/// Starts the test's trace when the runner asked for traces (`--trace DIR`). A trace that
/// cannot start is said on stderr and the test runs untraced.
fn start_trace(target: &Target, index: u32, id: &str) -> Option<(xhal::trace::TraceSession, std::path::PathBuf)> {
    let folder = std::env::var_os(crate::worker_process::TRACE_FOLDER_VARIABLE)?;
    let path = std::path::Path::new(&folder).join(format!("{}-{index}-{id}.json", target.backend_name()));
    match xhal::trace::start(&path) {
        Ok(session) => Some((session, path)),
        Err(error) => {
            eprintln!("xhal-cts: test {id} is not traced: {error}");
            None
        }
    }
}

/// Ends the test's trace: kept for a failure (a crash or a timeout never gets here, and keeps
/// what was flushed), removed for a pass or a skip.
fn finish_trace(trace: Option<(xhal::trace::TraceSession, std::path::PathBuf)>, outcome: &Outcome) {
    let Some((session, path)) = trace else { return };
    if let Err(error) = session.stop() {
        eprintln!("xhal-cts: the trace {} could not be finished: {error}", path.display());
    }
    if matches!(outcome, Outcome::Pass | Outcome::Skipped { .. }) {
        let _ = std::fs::remove_file(&path);
    }
}

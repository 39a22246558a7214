//! Running a kernel on a device through the public xhal API, in this process (the oracle) or
//! in a worker process per device, so that a device that crashes or hangs is a finding and
//! the run goes on.
//!
//! A worker is this same binary started as `xhal-difftest --worker LABEL`. It opens its one
//! device, then reads one [`Job`] per line of stdin and answers one [`Outcome`] per line of
//! stdout, both JSON.

use crate::ast::Program;
use crate::emit::{BufferRole, Emitted, ENTRY};
use crate::gen::Inputs;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xhal::cpu::{CpuBackend, CpuConfig, CpuDriver, KernelMode};
use xhal::{Device, ErrorKind, Launch, Runtime};

/// The label of the oracle: the CPU backend's interpreter, in this process.
pub const ORACLE: &str = "cpu-interpret:0";
/// The label of the CPU backend compiling kernels to C, in a worker.
pub const CPU_COMPILE: &str = "cpu-compile:0";
/// Starts every line of the worker protocol. Drivers print to stdout too (PoCL prints its
/// barrier passes' block names while compiling some kernels), so answers are found by this
/// marker and anything else on stdout is kept as noise for reports.
const MARKER: &str = "\u{1e}xhal-difftest:";
/// How long the CPU backend lets one kernel run.
const CPU_KERNEL_TIMEOUT: Duration = Duration::from_secs(60);
/// Memory for each in-process CPU device: the kernels are small.
const CPU_MEMORY: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Xhal(#[from] xhal::Error),
    #[error("device `{0}`: {1}")]
    Device(String, String),
    #[error("worker for {label}: {message}")]
    Worker { label: String, message: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// One launch: the kernel, its grid, its buffers' initial bytes in binding order and the
/// immediates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub source: String,
    pub workgroups: [u32; 3],
    #[serde(with = "hex_buffers")]
    pub buffers: Vec<Vec<u8>>,
    /// The `var<immediate>` members, in order; empty when the kernel has none.
    pub scalars: Vec<u32>,
    /// The buffer of `buffers` to pass by value (`Launch::uniform_bytes`) instead of in a
    /// buffer; its bytes come back as they went.
    #[serde(default)]
    pub staged: Option<usize>,
    /// `override` values to set when the kernel is loaded.
    #[serde(default)]
    pub overrides: Vec<(String, f64)>,
}

impl Job {
    pub fn new(program: &Program, emitted: &Emitted, inputs: &Inputs) -> Job {
        let buffers = emitted
            .buffers
            .iter()
            .map(|role| match role {
                BufferRole::Input => words_to_bytes(&inputs.input),
                BufferRole::Output => vec![0; program.invocations() as usize * emitted.slots.max(1) as usize * 4],
                BufferRole::Atomics => words_to_bytes(&inputs.atomics),
                BufferRole::Params => {
                    let mut bytes = vec![0; 32];
                    bytes[0..4].copy_from_slice(&inputs.params[0].to_le_bytes());
                    bytes[28..32].copy_from_slice(&inputs.params[1].to_le_bytes());
                    bytes
                }
            })
            .collect();
        // Under overrides the immediate block is one zero, which each override is read through.
        let overriding = !emitted.overrides.is_empty();
        Job {
            source: emitted.source.clone(),
            workgroups: [program.workgroups[0], program.workgroups[1], 1],
            buffers,
            scalars: match (emitted.uses_params, overriding) {
                (false, _) => Vec::new(),
                (true, false) => inputs.params.to_vec(),
                (true, true) => vec![0],
            },
            staged: emitted.staged_params,
            overrides: emitted
                .overrides
                .iter()
                .map(|&(name, param)| (name.to_owned(), f64::from(inputs.params[param])))
                .collect(),
        }
    }
}

pub fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// What became of a job on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// It ran; every buffer afterwards.
    Ran {
        #[serde(with = "hex_buffers")]
        buffers: Vec<Vec<u8>>,
    },
    /// The device said it does not support the kernel.
    Refused { message: String },
    /// An error at `stage` (`load`, `launch`, `run`, `read`).
    Failed {
        stage: String,
        kind: String,
        message: String,
    },
    /// The worker died.
    Crashed { message: String },
    /// No answer within the time limit.
    Hung { seconds: u64 },
}

impl Outcome {
    fn from_error(stage: &str, error: &xhal::Error) -> Outcome {
        if error.kind() == ErrorKind::Unsupported {
            Outcome::Refused {
                message: error.to_string(),
            }
        } else {
            Outcome::Failed {
                stage: stage.to_owned(),
                kind: error.kind().name().to_owned(),
                message: error.to_string(),
            }
        }
    }
}

mod hex_buffers {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(buffers: &[Vec<u8>], serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(buffers.len()))?;
        for buffer in buffers {
            let mut text = String::with_capacity(buffer.len() * 2);
            for byte in buffer {
                text.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
                text.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
            }
            seq.serialize_element(&text)?;
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Vec<u8>>, D::Error> {
        let texts = Vec::<String>::deserialize(deserializer)?;
        texts
            .iter()
            .map(|text| {
                let digits = text.as_bytes();
                if digits.len() % 2 != 0 {
                    return Err(serde::de::Error::custom("odd number of hex digits"));
                }
                digits
                    .chunks(2)
                    .map(|pair| {
                        let digit = |d: u8| (d as char).to_digit(16).map(|v| v as u8);
                        match (digit(pair[0]), digit(pair[1])) {
                            (Some(high), Some(low)) => Ok(high << 4 | low),
                            _ => Err(serde::de::Error::custom("not a hex digit")),
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// Runs `job` on `device`, saying what happened; never panics on a device's error.
pub fn execute(device: &Device, job: &Job) -> Outcome {
    let overrides: Vec<(&str, f64)> = job
        .overrides
        .iter()
        .map(|(name, value)| (name.as_str(), *value))
        .collect();
    let module = match device.load_wgsl_with_overrides(&job.source, &overrides) {
        Ok(module) => module,
        Err(error) => return Outcome::from_error("load", &error),
    };
    let kernel = match module.kernel(ENTRY) {
        Ok(kernel) => kernel,
        Err(error) => return Outcome::from_error("load", &error),
    };
    let stream = match device.create_stream() {
        Ok(stream) => stream,
        Err(error) => return Outcome::from_error("launch", &error),
    };
    let mut buffers = Vec::with_capacity(job.buffers.len());
    for (index, bytes) in job.buffers.iter().enumerate() {
        if job.staged == Some(index) {
            buffers.push(None);
            continue;
        }
        let buffer = match device.alloc::<u8>(bytes.len()) {
            Ok(buffer) => buffer,
            Err(error) => return Outcome::from_error("launch", &error),
        };
        if let Err(error) = stream.write(&buffer, bytes) {
            return Outcome::from_error("launch", &error);
        }
        buffers.push(Some(buffer));
    }
    let [x, y, z] = job.workgroups;
    let mut launch = Launch::new(&kernel).workgroups(x, y, z);
    for (buffer, bytes) in buffers.iter().zip(&job.buffers) {
        launch = match buffer {
            Some(buffer) => launch.buffer(buffer),
            None => launch.uniform_bytes(bytes),
        };
    }
    for scalar in &job.scalars {
        launch = launch.scalar(*scalar);
    }
    if let Err(error) = stream.launch(&launch) {
        return Outcome::from_error("launch", &error);
    }
    if let Err(error) = stream.synchronize() {
        return Outcome::from_error("run", &error);
    }
    let mut results = Vec::with_capacity(buffers.len());
    for (buffer, bytes) in buffers.iter().zip(&job.buffers) {
        match buffer.as_ref().map(|buffer| stream.read_to_vec(buffer)) {
            Some(Ok(read)) => results.push(read),
            Some(Err(error)) => return Outcome::from_error("read", &error),
            None => results.push(bytes.clone()),
        }
    }
    Outcome::Ran { buffers: results }
}

/// A device to run on, by label: `cpu-interpret:0`, `cpu-compile:0`, or `BACKEND:INDEX` of a
/// plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub label: String,
    pub backend: String,
    pub index: u32,
    /// The device's own name, for reports.
    pub name: String,
}

impl Target {
    pub fn parse(label: &str) -> Option<Target> {
        let (backend, index) = label.rsplit_once(':')?;
        Some(Target {
            label: label.to_owned(),
            backend: backend.to_owned(),
            index: index.parse().ok()?,
            name: String::new(),
        })
    }

    fn cpu_mode(&self) -> Option<KernelMode> {
        match self.backend.as_str() {
            "cpu-interpret" => Some(KernelMode::Interpret),
            "cpu-compile" => Some(KernelMode::Compile),
            _ => None,
        }
    }
}

/// The CPU backend in this process, running kernels as `mode` says.
pub fn cpu_backend(mode: KernelMode) -> CpuBackend {
    CpuBackend::new(
        CpuDriver::with_config(CpuConfig {
            devices: 1,
            memory_per_device: CPU_MEMORY,
        })
        .with_kernel_mode(mode)
        .with_kernel_timeout(CPU_KERNEL_TIMEOUT),
    )
}

/// Opens `target`. The runtime must outlive the device: it holds the plugin library.
pub fn open(target: &Target) -> Result<(Runtime, Device), RunError> {
    let runtime = match target.cpu_mode() {
        Some(mode) => Runtime::builder()
            .without_static_backends()
            .without_plugin_search()
            .backend(Arc::new(cpu_backend(mode)))
            .build()?,
        None => {
            // Only this backend's plugin is loaded.
            let selector = xhal::DeviceSelector::parse_from(&target.backend, "--worker")?;
            Runtime::builder()
                .without_static_backends()
                .device_selector(Some(selector))
                .build()?
        }
    };
    let backend = if target.cpu_mode().is_some() {
        "cpu"
    } else {
        &target.backend
    };
    let device = runtime.open(&format!("{}:{}", backend, target.index))?;
    Ok((runtime, device))
}

/// A device found by [`discover`] and its type, for matching a selector.
pub type Discovered = (Target, xhal::DeviceType);

/// Every plugin device this process can find, labelled `backend:index`, with the in-process
/// compiled CPU device first.
pub fn discover() -> Result<Vec<Discovered>, RunError> {
    let runtime = Runtime::builder()
        .without_static_backends()
        .device_selector(None)
        .build()?;
    let mut targets = vec![Target {
        label: CPU_COMPILE.to_owned(),
        backend: "cpu-compile".to_owned(),
        index: 0,
        name: "CPU backend, kernels compiled to C".to_owned(),
    }];
    let mut types = vec![xhal::DeviceType::Cpu];
    for entry in runtime.devices() {
        types.push(entry.info.device_type);
        targets.push(Target {
            label: entry.label(),
            backend: entry.backend.clone(),
            index: entry.index,
            name: entry.info.name.clone(),
        });
    }
    Ok(targets.into_iter().zip(types).collect())
}

/// Whether the compiled CPU path would run the kernel itself, or why not (it then falls back
/// to the interpreter, which would compare the oracle with itself).
pub fn compiled_cpu_refusal(job: &Job) -> Option<String> {
    let module = match xhal::kernel::apply_overrides(&job.source, &job.overrides)
        .and_then(|source| xhal::kernel::parse_wgsl(&source))
    {
        Ok(module) => module,
        Err(error) => return Some(error.to_string()),
    };
    match module.to_c(xhal::kernel::Dialect::HostC, Some(ENTRY)) {
        Ok(_) => None,
        Err(error) => Some(format!("the compiled CPU path lacks {}", error.message())),
    }
}

/// The worker's side: opens `label`, then answers jobs until stdin closes.
pub fn worker_main(label: &str) -> Result<(), RunError> {
    let target = Target::parse(label).ok_or_else(|| RunError::Device(label.to_owned(), "not a label".to_owned()))?;
    let (_runtime, device) = open(&target)?;
    let compiled_cpu = target.cpu_mode() == Some(KernelMode::Compile);
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "\n{MARKER}{}", serde_json::json!({ "ready": device.name() }))?;
    stdout.flush()?;
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let job: Job = serde_json::from_str(&line)?;
        let refusal = if compiled_cpu { compiled_cpu_refusal(&job) } else { None };
        let outcome = match refusal {
            Some(message) => Outcome::Refused { message },
            None => execute(&device, &job),
        };
        // A newline first: a driver's output may have left the line unfinished.
        write!(stdout, "\n{MARKER}")?;
        serde_json::to_writer(&mut stdout, &outcome)?;
        writeln!(stdout)?;
        stdout.flush()?;
    }
    Ok(())
}

/// This binary, for starting workers. On Linux `/proc/self/exe`, which still runs when the
/// file has been replaced since (a `cargo build` during a long run does that), where the path
/// `current_exe` gives would then be gone.
fn worker_executable() -> Result<std::path::PathBuf, RunError> {
    let proc_self = std::path::Path::new("/proc/self/exe");
    if proc_self.exists() {
        return Ok(proc_self.to_path_buf());
    }
    Ok(std::env::current_exe()?)
}

fn outcome_is_device_lost(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Failed { kind, .. } if kind == ErrorKind::DeviceLost.name())
}

/// Lines of a worker's stderr kept for a crash report.
const STDERR_LINES: usize = 20;

/// A worker process for one device, started on first use and again after a crash or hang.
pub struct Worker {
    pub target: Target,
    process: Option<Process>,
    /// Seconds one job may take.
    pub timeout: Duration,
    /// Extra environment for the worker.
    env: Vec<(String, String)>,
    /// Whether workers' stderr goes to ours (XHAL_LOG set) instead of being kept for reports.
    inherit_stderr: bool,
}

struct Process {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Worker {
    pub fn new(target: Target, timeout: Duration, env: Vec<(String, String)>, inherit_stderr: bool) -> Worker {
        Worker {
            target,
            process: None,
            timeout,
            env,
            inherit_stderr,
        }
    }

    fn start(&mut self) -> Result<&mut Process, RunError> {
        if self.process.is_none() {
            let mut command = Command::new(worker_executable()?);
            command
                .arg("--worker")
                .arg(&self.target.label)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(if self.inherit_stderr {
                    Stdio::inherit()
                } else {
                    Stdio::piped()
                });
            for (key, value) in &self.env {
                command.env(key, value);
            }
            let mut child = command.spawn()?;
            let worker_error = |message: &str| RunError::Worker {
                label: self.target.label.clone(),
                message: message.to_owned(),
            };
            let stdin = child.stdin.take().ok_or_else(|| worker_error("no stdin"))?;
            let stdout = child.stdout.take().ok_or_else(|| worker_error("no stdout"))?;
            let stderr_lines = Arc::new(Mutex::new(VecDeque::new()));
            if let Some(stderr) = child.stderr.take() {
                let keep = Arc::clone(&stderr_lines);
                std::thread::spawn(move || {
                    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                        if let Ok(mut lines) = keep.lock() {
                            if lines.len() == STDERR_LINES {
                                lines.pop_front();
                            }
                            lines.push_back(line);
                        }
                    }
                });
            }
            let (sender, lines) = mpsc::channel();
            let noise = Arc::clone(&stderr_lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    match line.find(MARKER) {
                        Some(at) => {
                            if sender.send(line[at + MARKER.len()..].to_owned()).is_err() {
                                break;
                            }
                        }
                        None if line.is_empty() => {}
                        None => {
                            if let Ok(mut lines) = noise.lock() {
                                if lines.len() == STDERR_LINES {
                                    lines.pop_front();
                                }
                                lines.push_back(format!("(stdout) {line}"));
                            }
                        }
                    }
                }
            });
            let mut process = Process {
                child,
                stdin,
                lines,
                stderr: stderr_lines,
            };
            // Opening a device (a Vulkan instance, an OpenCL context) can take a while.
            match process.lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) if line.contains("\"ready\"") => {}
                Ok(line) => {
                    let _ = process.child.kill();
                    let _ = process.child.wait();
                    return Err(worker_error(&format!("did not start: {line}")));
                }
                Err(_) => {
                    let _ = process.child.kill();
                    let _ = process.child.wait();
                    let tail = process.stderr_tail();
                    return Err(worker_error(&format!("did not start{tail}")));
                }
            }
            self.process = Some(process);
        }
        self.process.as_mut().ok_or_else(|| RunError::Worker {
            label: self.target.label.clone(),
            message: "not started".to_owned(),
        })
    }

    /// Sends `job`; the answer comes from [`Worker::receive`]. Starting the worker may fail.
    pub fn send(&mut self, job: &Job) -> Result<(), RunError> {
        let line = serde_json::to_string(job)?;
        let process = self.start()?;
        let sent = writeln!(process.stdin, "{line}").and_then(|()| process.stdin.flush());
        if sent.is_err() {
            // It died; receive() reports the crash.
            tracing::debug!(label = %self.target.label, "worker closed its stdin");
        }
        Ok(())
    }

    /// The answer to the last job sent. A dead or silent worker is stopped, reported as a
    /// crash or hang, and started again for the next job.
    pub fn receive(&mut self) -> Outcome {
        let timeout = self.timeout;
        let Some(process) = self.process.as_mut() else {
            return Outcome::Crashed {
                message: "the worker is not running".to_owned(),
            };
        };
        let outcome = match process.lines.recv_timeout(timeout) {
            Ok(line) => match serde_json::from_str::<Outcome>(&line) {
                // A lost device stays lost: the next job gets a fresh worker, so that one
                // kernel's device loss is not every later kernel's finding too.
                Ok(outcome @ Outcome::Failed { .. }) if outcome_is_device_lost(&outcome) => {
                    self.stop();
                    return outcome;
                }
                Ok(outcome) => return outcome,
                Err(error) => Outcome::Crashed {
                    message: format!("unreadable answer ({error}): {line}"),
                },
            },
            Err(RecvTimeoutError::Timeout) => Outcome::Hung {
                seconds: timeout.as_secs(),
            },
            Err(RecvTimeoutError::Disconnected) => {
                let status = process.child.wait().map(|s| s.to_string()).unwrap_or_default();
                // The stderr reader may still be draining.
                std::thread::sleep(Duration::from_millis(50));
                Outcome::Crashed {
                    message: format!("worker exited ({status}){}", process.stderr_tail()),
                }
            }
        };
        self.stop();
        outcome
    }

    /// Runs one job and waits for its answer. A worker that cannot be started is not a
    /// crash of the kernel's making: it is a failure at stage `start`.
    pub fn run(&mut self, job: &Job) -> Outcome {
        match self.send(job) {
            Ok(()) => self.receive(),
            Err(error) => Outcome::Failed {
                stage: "start".to_owned(),
                kind: "worker".to_owned(),
                message: error.to_string(),
            },
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.child.kill();
            let _ = process.child.wait();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Process {
    fn stderr_tail(&self) -> String {
        let lines = self
            .stderr
            .lock()
            .map(|l| l.iter().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        if lines.is_empty() {
            String::new()
        } else {
            format!("; its stderr ended with:\n{}", lines.join("\n"))
        }
    }
}

/// The oracle: the CPU interpreter in this process.
pub struct Oracle {
    _runtime: Runtime,
    device: Device,
}

impl Oracle {
    pub fn new() -> Result<Oracle, RunError> {
        let target =
            Target::parse(ORACLE).ok_or_else(|| RunError::Device(ORACLE.to_owned(), "bad label".to_owned()))?;
        let (runtime, device) = open(&target)?;
        Ok(Oracle {
            _runtime: runtime,
            device,
        })
    }

    pub fn run(&self, job: &Job) -> Outcome {
        execute(&self.device, job)
    }
}

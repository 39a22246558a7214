//! A worker process seen from the runner: spawn it, send it a command, wait for its answer
//! with a deadline, and tell a crash from a hang.

use crate::protocol::{Command, WorkerMessage, PREFIX};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xhal_conformance::TargetSpec;

/// Lines of the worker's stderr kept for a crash report.
const STDERR_TAIL: usize = 12;

/// Where workers write each test's trace (`--trace DIR`), handed to them in this variable.
pub const TRACE_FOLDER_VARIABLE: &str = "XHAL_CTS_TRACE_DIR";

static TRACE_FOLDER: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Every worker started from now on traces each test into `folder`.
pub fn trace_into(folder: std::path::PathBuf) {
    let _ = TRACE_FOLDER.set(folder);
}

pub struct WorkerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    messages: Receiver<Option<WorkerMessage>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
}

/// What waiting for a worker's answer gave.
pub enum Received {
    Message(WorkerMessage),
    /// The deadline passed; the worker is still running.
    TimedOut,
    /// The worker exited; the text says how (signal or status) and what it printed last.
    Died(String),
}

impl WorkerProcess {
    pub fn spawn(spec: &TargetSpec) -> std::io::Result<WorkerProcess> {
        let executable = std::env::current_exe()?;
        let mut command = std::process::Command::new(executable);
        command.arg("worker");
        match spec {
            TargetSpec::Plugin(path) => command.arg("--plugin").arg(path),
            TargetSpec::Backend(name) => command.arg("--backend").arg(name),
        };
        if let Some(folder) = TRACE_FOLDER.get() {
            command.env(TRACE_FOLDER_VARIABLE, folder);
        }
        // The suite tests the backend's own allocation, not the caching allocator in front of it.
        command
            .env("XHAL_CACHING_ALLOCATOR", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("worker has no stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| std::io::Error::other("worker has no stderr"))?;
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Some(json) = line.strip_prefix(PREFIX) else {
                    tracing::debug!(line, "worker stdout");
                    continue;
                };
                match serde_json::from_str::<WorkerMessage>(json) {
                    Ok(message) => {
                        if sender.send(Some(message)).is_err() {
                            return;
                        }
                    }
                    Err(error) => tracing::warn!(%error, line, "unreadable worker message"),
                }
            }
            let _ = sender.send(None);
        });
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                tracing::debug!(line, "worker stderr");
                if let Ok(mut tail) = tail.lock() {
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            }
        });
        Ok(WorkerProcess {
            stdin: child.stdin.take(),
            child,
            messages,
            stderr_tail,
        })
    }

    /// Sends a command; a worker that has exited shows up as `Died` on the next receive.
    pub fn send(&mut self, command: &Command<'_>) {
        if let Ok(mut tail) = self.stderr_tail.lock() {
            tail.clear();
        }
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(command.line().as_bytes()).and_then(|()| stdin.flush());
        }
    }

    pub fn receive(&mut self, deadline: Instant) -> Received {
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(wait) {
            Ok(Some(message)) => Received::Message(message),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => Received::Died(self.death()),
            Err(RecvTimeoutError::Timeout) => Received::TimedOut,
        }
    }

    /// How the worker ended, once its stdout closed.
    fn death(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
            }
        };
        // Give the stderr reader a moment to take in the last lines the worker wrote.
        std::thread::sleep(Duration::from_millis(50));
        let how = match status {
            Some(status) => describe_exit(status),
            None => "the worker process ended in an unknown way".to_string(),
        };
        let tail: Vec<String> = self
            .stderr_tail
            .lock()
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default();
        if tail.is_empty() {
            how
        } else {
            format!("{how}; its last output: {}", tail.join(" | "))
        }
    }

    /// Ends the worker: closes its stdin so it exits, and kills it if it does not.
    pub fn finish(mut self) {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.kill();
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(unix)]
fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.signal(), status.code()) {
        (Some(signal), _) => format!(
            "the worker process was killed by signal {signal} ({})",
            signal_name(signal)
        ),
        (None, Some(code)) => format!("the worker process exited with status {code} in the middle of the test"),
        (None, None) => "the worker process ended without a status".to_string(),
    }
}

#[cfg(not(unix))]
fn describe_exit(status: std::process::ExitStatus) -> String {
    format!("the worker process exited with {status} in the middle of the test")
}

#[cfg(unix)]
fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

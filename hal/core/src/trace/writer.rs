//! The trace's writer thread: records in through a bounded queue, Chrome trace-event JSON out.
//!
//! The file is a JSON array written one event per line. The closing `]` is written when the
//! trace stops; a file cut short (a killed program) is still read by Perfetto, `chrome://tracing`
//! and `xhal trace summary`, which the trace-event format allows for exactly this reason.

use super::{FlowPhase, TraceSummary, Track, Value};
use crate::error::{Error, ErrorKind, Result};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The default cap on a trace file: 512 MiB, about four million spans.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;
/// The writer flushes to the file at least this often while records arrive.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// Records waiting for the writer at most; a record that finds the queue full is dropped and
/// counted, so a traced call never waits for the disk.
pub const QUEUE_CAPACITY: usize = 1 << 16;

/// How long a flush or the end of a trace waits for the writer before giving up.
const WRITER_TIMEOUT: Duration = Duration::from_secs(30);

/// Bytes kept free under the cap for the trailer.
const TRAILER_ROOM: u64 = 256;

/// The process id the host's threads are drawn under.
const HOST_PID: u64 = 1;
/// Device number `n` is drawn as process `DEVICE_PID_BASE + n`.
const DEVICE_PID_BASE: u64 = 100;

/// One thing to write.
pub(crate) enum Record {
    Complete {
        name: Cow<'static, str>,
        category: &'static str,
        track: Track,
        start: f64,
        duration: f64,
        args: Vec<(&'static str, Value)>,
    },
    ThreadName {
        track: u64,
        name: String,
    },
    StreamName {
        device: u64,
        device_label: String,
        stream: u64,
    },
    Counter {
        device: u64,
        name: Cow<'static, str>,
        at: f64,
        values: Vec<(&'static str, u64)>,
    },
    Flow {
        id: u64,
        phase: FlowPhase,
        track: Track,
        at: f64,
    },
}

enum Message {
    Record(Record),
    Flush(SyncSender<()>),
    Finish(SyncSender<Result<TraceSummary>>),
}

/// The sending side, held by the tracer.
pub(crate) struct Writer {
    path: PathBuf,
    sender: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
    generation: u64,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Creates (or truncates) `path` and starts the writer thread.
    pub(crate) fn create(path: &Path, max_bytes: u64) -> Result<Writer> {
        static GENERATION: AtomicU64 = AtomicU64::new(1);
        let file = File::create(path).map_err(|error| {
            Error::invalid_argument(format!("cannot create the trace file {}: {error}", path.display()))
        })?;
        let (sender, receiver) = mpsc::sync_channel(QUEUE_CAPACITY);
        let dropped = Arc::new(AtomicU64::new(0));
        let mut output = Output {
            file: BufWriter::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
            bytes: 0,
            records: 0,
            max_bytes,
            first: true,
            full: false,
            dirty: false,
            named_devices: HashSet::new(),
            dropped: Arc::clone(&dropped),
            error: None,
        };
        output.begin();
        let thread = std::thread::Builder::new()
            .name("xhal-trace-writer".into())
            .spawn(move || run(output, &receiver))
            .map_err(|error| Error::internal(format!("could not start the trace writer thread: {error}")))?;
        Ok(Writer {
            path: path.to_path_buf(),
            sender,
            dropped,
            generation: GENERATION.fetch_add(1, Ordering::Relaxed),
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Which trace this is, so per-thread state from an earlier trace is not reused.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Queues `record`, or counts it dropped when the queue is full. Never blocks.
    pub(crate) fn send(&self, record: Record) {
        match self.sender.try_send(Message::Record(record)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            // The trace stopped while this call was traced.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Waits until everything queued before this call is in the file.
    pub(crate) fn flush(&self) {
        let (acknowledge, acknowledged) = mpsc::sync_channel(1);
        if self.sender.send(Message::Flush(acknowledge)).is_ok() {
            let _ = acknowledged.recv_timeout(WRITER_TIMEOUT);
        }
    }

    /// Writes what is queued, ends the file and stops the thread.
    pub(crate) fn finish(&self) -> Result<TraceSummary> {
        let (reply, replied) = mpsc::sync_channel(1);
        self.sender
            .send(Message::Finish(reply))
            .map_err(|_| Error::internal("the trace writer thread is gone"))?;
        let summary = replied.recv_timeout(WRITER_TIMEOUT).map_err(|_| {
            Error::new(
                ErrorKind::Timeout,
                format!("the trace writer did not finish {} in time", self.path.display()),
            )
        })?;
        if let Some(thread) = self.thread.lock().take() {
            let _ = thread.join();
        }
        summary
    }
}

struct Output {
    file: BufWriter<File>,
    path: PathBuf,
    bytes: u64,
    records: u64,
    max_bytes: u64,
    first: bool,
    full: bool,
    dirty: bool,
    named_devices: HashSet<u64>,
    dropped: Arc<AtomicU64>,
    /// The first write error; the trace stops growing after it and `finish` reports it.
    error: Option<std::io::Error>,
}

fn run(mut output: Output, receiver: &Receiver<Message>) {
    loop {
        match receiver.recv_timeout(FLUSH_INTERVAL) {
            Ok(Message::Record(record)) => output.write(&record),
            Ok(Message::Flush(acknowledge)) => {
                output.flush();
                let _ = acknowledge.send(());
            }
            Ok(Message::Finish(reply)) => {
                // Records queued before the finish are in order in the channel: drain them.
                while let Ok(message) = receiver.try_recv() {
                    match message {
                        Message::Record(record) => output.write(&record),
                        Message::Flush(acknowledge) => {
                            let _ = acknowledge.send(());
                        }
                        Message::Finish(other) => {
                            let _ = other.send(Err(Error::invalid_argument("the trace was already stopped")));
                        }
                    }
                }
                let _ = reply.send(output.end());
                return;
            }
            Err(RecvTimeoutError::Timeout) => output.flush(),
            Err(RecvTimeoutError::Disconnected) => {
                let _ = output.end();
                return;
            }
        }
    }
}

impl Output {
    fn begin(&mut self) {
        self.put_raw("[\n");
        self.put_event(&format!(
            r#"{{"name":"process_name","ph":"M","pid":{HOST_PID},"tid":0,"args":{{"name":"host"}}}}"#
        ));
        self.put_event(&format!(
            r#"{{"name":"process_sort_index","ph":"M","pid":{HOST_PID},"tid":0,"args":{{"sort_index":0}}}}"#
        ));
    }

    fn write(&mut self, record: &Record) {
        if self.full || self.error.is_some() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = match record {
            Record::Complete {
                name,
                category,
                track,
                start,
                duration,
                args,
            } => {
                let (pid, tid) = place(*track);
                let mut line = format!(
                    r#"{{"name":{},"cat":"{category}","ph":"X","ts":{start:.3},"dur":{duration:.3},"pid":{pid},"tid":{tid}"#,
                    json_string(name)
                );
                if !args.is_empty() {
                    line.push_str(r#","args":{"#);
                    for (index, (key, value)) in args.iter().enumerate() {
                        if index > 0 {
                            line.push(',');
                        }
                        line.push_str(&json_string(key));
                        line.push(':');
                        line.push_str(&json_value(value));
                    }
                    line.push('}');
                }
                line.push('}');
                line
            }
            Record::ThreadName { track, name } => format!(
                r#"{{"name":"thread_name","ph":"M","pid":{HOST_PID},"tid":{track},"args":{{"name":{}}}}}"#,
                json_string(name)
            ),
            Record::StreamName {
                device,
                device_label,
                stream,
            } => {
                let pid = DEVICE_PID_BASE + device;
                if self.named_devices.insert(*device) {
                    self.put_event(&format!(
                        r#"{{"name":"process_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":{}}}}}"#,
                        json_string(&format!("device {device_label}"))
                    ));
                    self.put_event(&format!(
                        r#"{{"name":"process_sort_index","ph":"M","pid":{pid},"tid":0,"args":{{"sort_index":{pid}}}}}"#
                    ));
                }
                format!(
                    r#"{{"name":"thread_name","ph":"M","pid":{pid},"tid":{stream},"args":{{"name":{}}}}}"#,
                    json_string(&format!("stream {stream}"))
                )
            }
            Record::Counter {
                device,
                name,
                at,
                values,
            } => {
                let pid = DEVICE_PID_BASE + device;
                let values: Vec<String> = values
                    .iter()
                    .map(|(key, value)| format!("{}:{value}", json_string(key)))
                    .collect();
                format!(
                    r#"{{"name":{},"ph":"C","ts":{at:.3},"pid":{pid},"args":{{{}}}}}"#,
                    json_string(name),
                    values.join(",")
                )
            }
            Record::Flow { id, phase, track, at } => {
                let (pid, tid) = place(*track);
                let phase = match phase {
                    FlowPhase::Begin => "s",
                    FlowPhase::End => "f",
                };
                format!(
                    r#"{{"name":"enqueue","cat":"flow","ph":"{phase}","id":{id},"ts":{at:.3},"pid":{pid},"tid":{tid},"bp":"e"}}"#
                )
            }
        };
        self.put_event(&line);
    }

    fn put_event(&mut self, line: &str) {
        // Room is kept for the trailer, so a capped file still ends well.
        if self.bytes + line.len() as u64 + TRAILER_ROOM > self.max_bytes {
            self.full = true;
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.put_line(line);
    }

    fn put_line(&mut self, line: &str) {
        if !self.first {
            self.put_raw(",\n");
        }
        self.first = false;
        self.put_raw(line);
        self.records += 1;
    }

    fn put_raw(&mut self, text: &str) {
        if self.error.is_some() {
            return;
        }
        match self.file.write_all(text.as_bytes()) {
            Ok(()) => {
                self.bytes += text.len() as u64;
                self.dirty = true;
            }
            Err(error) => self.error = Some(error),
        }
    }

    fn flush(&mut self) {
        if self.dirty && self.error.is_none() {
            if let Err(error) = self.file.flush() {
                self.error = Some(error);
            }
            self.dirty = false;
        }
    }

    /// The trailer: how many records were dropped, then the array's end.
    fn end(&mut self) -> Result<TraceSummary> {
        let dropped = self.dropped.load(Ordering::Relaxed);
        let full = self.full;
        self.put_line(&format!(
            r#"{{"name":"trace end","cat":"xhal","ph":"i","s":"g","ts":0,"pid":{HOST_PID},"tid":0,"args":{{"records":{},"dropped":{dropped},"capped":{full}}}}}"#,
            self.records
        ));
        self.put_raw("\n]\n");
        self.dirty = true;
        self.flush();
        if let Some(error) = self.error.take() {
            return Err(Error::internal(format!(
                "writing the trace file {} failed: {error}",
                self.path.display()
            )));
        }
        Ok(TraceSummary {
            path: self.path.clone(),
            records: self.records,
            dropped,
            bytes: self.bytes,
        })
    }
}

fn place(track: Track) -> (u64, u64) {
    match track {
        Track::Thread(id) => (HOST_PID, id),
        Track::Stream { device, stream } => (DEVICE_PID_BASE + device, stream),
    }
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            control if (control as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", control as u32)),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

fn json_value(value: &Value) -> String {
    match value {
        Value::Unsigned(number) => number.to_string(),
        Value::Float(number) if number.is_finite() => format!("{number}"),
        Value::Float(_) => "null".to_string(),
        Value::Text(text) => json_string(text),
    }
}

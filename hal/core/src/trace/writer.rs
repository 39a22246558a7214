//! The trace's writer thread: records in through a bounded queue, Chrome trace-event JSON out.
//!
//! The file is a JSON array written one event per line. The closing `]` is written when the
//! trace stops; a file cut short (a killed program) is still read by Perfetto, `chrome://tracing`
//! and `xhal trace summary`, which the trace-event format allows for exactly this reason.

use super::{FlowPhase, TraceSummary, Track, Value};
use crate::error::{Error, ErrorKind, Result};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The default cap on a trace file: 512 MiB, about four million spans.
pub const DEFAULT_MAX_BYTES: u64 = 512 << 20;
/// The writer flushes to the file at least this often while records arrive.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// Records waiting for the writer at most (about 40 MiB of them); a record that finds the
/// queue full is dropped and counted, so a traced call never waits for the disk.
pub const QUEUE_CAPACITY: usize = 1 << 18;
/// How often the writer takes what is queued. Producers never wake it: a wake-up per record
/// would cost each traced call a context switch.
const DRAIN_INTERVAL: Duration = Duration::from_millis(5);

/// How long a flush or the end of a trace waits for the writer before giving up.
const WRITER_TIMEOUT: Duration = Duration::from_secs(30);

/// Bytes kept free under the cap for the trailer.
const TRAILER_ROOM: u64 = 256;

/// Device `n` of the process with id `p` is drawn as process `p * DEVICE_PID_SCALE + n`, so
/// the traces of several processes in one file never share a track.
const DEVICE_PID_SCALE: u64 = 1000;

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

/// What the writer is asked to do besides taking the queue.
enum Message {
    Flush(SyncSender<()>),
    Finish(SyncSender<Result<TraceSummary>>),
}

/// Records waiting for the writer.
type Queue = parking_lot::Mutex<Vec<Record>>;

/// The sending side, held by the tracer.
pub(crate) struct Writer {
    path: PathBuf,
    sender: SyncSender<Message>,
    queue: Arc<Queue>,
    dropped: Arc<AtomicU64>,
    generation: u64,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    /// Creates (or truncates) `path` and starts the writer thread. With `append`, a file that
    /// holds a finished trace is continued instead: this process's events join the same list.
    pub(crate) fn create(path: &Path, max_bytes: u64, append: bool) -> Result<Writer> {
        static GENERATION: AtomicU64 = AtomicU64::new(1);
        let cannot = |error: std::io::Error| {
            Error::invalid_argument(format!("cannot create the trace file {}: {error}", path.display()))
        };
        let (file, continued) = if append {
            open_to_continue(path).map_err(cannot)?
        } else {
            (None, 0)
        };
        let first = file.is_none();
        let file = match file {
            Some(file) => file,
            None => File::create(path).map_err(cannot)?,
        };
        let (sender, receiver) = mpsc::sync_channel(4);
        let queue = Arc::new(Queue::new(Vec::with_capacity(1024)));
        let dropped = Arc::new(AtomicU64::new(0));
        let mut output = Output {
            file: BufWriter::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
            bytes: continued,
            records: 0,
            max_bytes: max_bytes.saturating_add(continued),
            first,
            host_pid: u64::from(std::process::id()),
            last_ts: 0.0,
            scratch: String::with_capacity(512),
            full: false,
            dirty: false,
            named_devices: HashSet::new(),
            dropped: Arc::clone(&dropped),
            error: None,
        };
        output.begin(first);
        let thread = std::thread::Builder::new()
            .name("xhal-trace-writer".into())
            .spawn({
                let queue = Arc::clone(&queue);
                move || run(output, &receiver, &queue)
            })
            .map_err(|error| Error::internal(format!("could not start the trace writer thread: {error}")))?;
        Ok(Writer {
            path: path.to_path_buf(),
            sender,
            queue,
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
        let mut queue = self.queue.lock();
        if queue.len() < QUEUE_CAPACITY {
            queue.push(record);
        } else {
            drop(queue);
            self.dropped.fetch_add(1, Ordering::Relaxed);
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
    /// This process's id: its host threads are drawn under it.
    host_pid: u64,
    /// The latest time written, where the end record goes.
    last_ts: f64,
    /// Where a record is encoded before it is written.
    scratch: String,
    full: bool,
    dirty: bool,
    named_devices: HashSet<u64>,
    dropped: Arc<AtomicU64>,
    /// The first write error; the trace stops growing after it and `finish` reports it.
    error: Option<std::io::Error>,
}

fn run(mut output: Output, receiver: &Receiver<Message>, queue: &Queue) {
    let mut batch = Vec::with_capacity(1024);
    let mut last_flush = std::time::Instant::now();
    loop {
        let message = receiver.recv_timeout(DRAIN_INTERVAL);
        // Everything queued before the message is written before it is answered.
        std::mem::swap(&mut *queue.lock(), &mut batch);
        for record in batch.drain(..) {
            output.write(&record);
        }
        match message {
            Ok(Message::Flush(acknowledge)) => {
                output.flush();
                last_flush = std::time::Instant::now();
                let _ = acknowledge.send(());
            }
            Ok(Message::Finish(reply)) => {
                let _ = reply.send(output.end());
                // A second finish finds no writer; the caller reports that.
                return;
            }
            Err(RecvTimeoutError::Timeout) => {
                if last_flush.elapsed() >= FLUSH_INTERVAL {
                    output.flush();
                    last_flush = std::time::Instant::now();
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                let _ = output.end();
                return;
            }
        }
    }
}

impl Output {
    fn begin(&mut self, new_file: bool) {
        if new_file {
            self.put_raw("[\n");
        }
        let pid = self.host_pid;
        self.put_event(&format!(
            r#"{{"name":"process_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":"host (process {pid})"}}}}"#
        ));
    }

    fn write(&mut self, record: &Record) {
        if self.full || self.error.is_some() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let line = match record {
            // The common records are encoded into one reused buffer: no allocation each.
            Record::Complete {
                name,
                category,
                track,
                start,
                duration,
                args,
            } => {
                self.last_ts = self.last_ts.max(start + duration);
                let (pid, tid) = self.place(*track);
                let mut line = std::mem::take(&mut self.scratch);
                line.clear();
                line.push_str(r#"{"name":"#);
                push_json_string(&mut line, name);
                let _ = write!(
                    line,
                    r#","cat":"{category}","ph":"X","ts":{start:.3},"dur":{duration:.3},"pid":{pid},"tid":{tid}"#
                );
                if !args.is_empty() {
                    line.push_str(r#","args":{"#);
                    for (index, (key, value)) in args.iter().enumerate() {
                        if index > 0 {
                            line.push(',');
                        }
                        push_json_string(&mut line, key);
                        line.push(':');
                        push_json_value(&mut line, value);
                    }
                    line.push('}');
                }
                line.push('}');
                self.put_event(&line);
                self.scratch = line;
                return;
            }
            Record::ThreadName { track, name } => format!(
                r#"{{"name":"thread_name","ph":"M","pid":{},"tid":{track},"args":{{"name":{}}}}}"#,
                self.host_pid,
                json_string(name)
            ),
            Record::StreamName {
                device,
                device_label,
                stream,
            } => {
                let pid = self.host_pid * DEVICE_PID_SCALE + device;
                if self.named_devices.insert(*device) {
                    self.put_event(&format!(
                        r#"{{"name":"process_name","ph":"M","pid":{pid},"tid":0,"args":{{"name":{}}}}}"#,
                        json_string(&format!("device {device_label} (process {})", self.host_pid))
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
                let pid = self.host_pid * DEVICE_PID_SCALE + device;
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
                let (pid, tid) = self.place(*track);
                let phase = match phase {
                    FlowPhase::Begin => "s",
                    FlowPhase::End => "f",
                };
                let mut line = std::mem::take(&mut self.scratch);
                line.clear();
                let _ = write!(
                    line,
                    r#"{{"name":"enqueue","cat":"flow","ph":"{phase}","id":{id},"ts":{at:.3},"pid":{pid},"tid":{tid},"bp":"e"}}"#
                );
                self.put_event(&line);
                self.scratch = line;
                return;
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
            r#"{{"name":"trace end","cat":"xhal","ph":"i","s":"p","ts":{},"pid":{},"tid":0,"args":{{"records":{},"dropped":{dropped},"capped":{full}}}}}"#,
            self.last_ts, self.host_pid, self.records
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

impl Output {
    fn place(&self, track: Track) -> (u64, u64) {
        match track {
            Track::Thread(id) => (self.host_pid, id),
            Track::Stream { device, stream } => (self.host_pid * DEVICE_PID_SCALE + device, stream),
        }
    }
}

/// Opens `path` to add to the finished trace it holds: the closing `]` is cut off. `None`
/// when there is no such trace (no file, an empty one, or one not finished).
fn open_to_continue(path: &Path) -> std::io::Result<(Option<File>, u64)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((None, 0)),
        Err(error) => return Err(error),
    };
    let kept = text.trim_end();
    let Some(body) = kept.strip_suffix(']') else {
        return Ok((None, 0));
    };
    let body = body.trim_end();
    if !body.trim_start().starts_with('[') || body.trim() == "[" {
        return Ok((None, 0));
    }
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.set_len(body.len() as u64)?;
    let mut file = file;
    std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))?;
    Ok((Some(file), body.len() as u64))
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_json_string(&mut out, text);
    out
}

fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            control if (control as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", control as u32);
            }
            other => out.push(other),
        }
    }
    out.push('"');
}

fn push_json_value(out: &mut String, value: &Value) {
    match value {
        Value::Unsigned(number) => {
            let _ = write!(out, "{number}");
        }
        Value::Float(number) if number.is_finite() => {
            let _ = write!(out, "{number}");
        }
        Value::Float(_) => out.push_str("null"),
        Value::Text(text) => push_json_string(out, text),
        Value::Shared(text) => push_json_string(out, text),
    }
}

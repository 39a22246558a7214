//! A timeline of what the runtime does, written as a Chrome/Perfetto trace (JSON).
//!
//! Tracing is off unless `XHAL_TRACE=PATH` is set when the first [`Runtime`](crate::Runtime) is
//! built, or a program calls [`start`]. While it is off, each traced call costs one relaxed
//! atomic load. While it is on, a call records its span (name, host start and end, arguments)
//! and hands it to a writer thread through a bounded queue; the writer encodes and writes it,
//! flushing at least every [`FLUSH_INTERVAL`], so a program that crashes or is killed leaves a
//! readable trace of what it did up to shortly before. The file is capped at
//! [`DEFAULT_MAX_BYTES`] (`XHAL_TRACE_MAX_MB`); what comes after the cap, or while the queue is
//! full, is counted as dropped and the count written at the end. Tracing never blocks a call
//! on the writer and never changes a result.
//!
//! Clock: every timestamp is microseconds since the trace started, on the host's monotonic
//! clock ([`std::time::Instant`]). Device work is placed on the same clock (see
//! docs/observability.md).

mod activity;
mod device;
mod writer;

pub use activity::{
    correlation, is_collecting, set_correlation, start_collecting, stop_collecting, take_activities, Activity,
    MAX_ACTIVITIES,
};

pub(crate) use device::{memory_counter, StreamTrace};

use parking_lot::RwLock;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use writer::{Record, Writer};

pub use writer::{DEFAULT_MAX_BYTES, FLUSH_INTERVAL, QUEUE_CAPACITY};

use crate::error::{Error, Result};

/// The environment variable naming the file a program's trace goes to.
pub const TRACE_VARIABLE: &str = "XHAL_TRACE";
/// `1` makes `XHAL_TRACE` add this process's trace to a finished trace already in the file,
/// so the processes of one job (`make demo`) share one timeline.
pub const APPEND_VARIABLE: &str = "XHAL_TRACE_APPEND";
/// The environment variable capping the trace file's size, in MiB.
pub const MAX_MB_VARIABLE: &str = "XHAL_TRACE_MAX_MB";

/// Timestamps count microseconds from 2024-01-01T00:00:00Z: one clock for every process
/// writing to a file, and numbers small enough that a double (as trace viewers read them)
/// keeps nanoseconds, which microseconds since 1970 would not.
pub const CLOCK_ORIGIN_UNIX_SECONDS: u64 = 1_704_067_200;

/// Whether a trace is being recorded: the only thing an untraced call reads.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static TRACER: RwLock<Option<Arc<Tracer>>> = RwLock::new(None);

/// One trace being recorded.
struct Tracer {
    epoch: Instant,
    /// `epoch` as microseconds since [`CLOCK_ORIGIN_UNIX_SECONDS`]: the traces of several
    /// processes written to one file share this clock.
    epoch_unix_us: f64,
    writer: Writer,
    next_track: AtomicU64,
}

/// An argument of a span: what the call was given.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A count, a size, an index.
    Unsigned(u64),
    /// A measured figure.
    Float(f64),
    /// A name or a label.
    Text(Cow<'static, str>),
    /// A name shared by many records (a device's label), cloned without copying.
    Shared(Arc<str>),
}

impl From<Arc<str>> for Value {
    fn from(value: Arc<str>) -> Value {
        Value::Shared(value)
    }
}

impl From<u64> for Value {
    fn from(value: u64) -> Value {
        Value::Unsigned(value)
    }
}

impl From<u32> for Value {
    fn from(value: u32) -> Value {
        Value::Unsigned(u64::from(value))
    }
}

impl From<usize> for Value {
    fn from(value: usize) -> Value {
        Value::Unsigned(value as u64)
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Value {
        Value::Float(value)
    }
}

impl From<&'static str> for Value {
    fn from(value: &'static str) -> Value {
        Value::Text(Cow::Borrowed(value))
    }
}

impl From<String> for Value {
    fn from(value: String) -> Value {
        Value::Text(Cow::Owned(value))
    }
}

/// The arguments of one span, by name.
pub type Args = Vec<(&'static str, Value)>;

/// True while a trace is recorded. Callers test it before building a span's arguments.
#[inline]
pub fn is_active() -> bool {
    cfg!(feature = "trace") && ACTIVE.load(Ordering::Relaxed)
}

/// Whether this build has the trace recorder (the `trace` feature, on by default).
pub const fn built_in() -> bool {
    cfg!(feature = "trace")
}

fn tracer() -> Option<Arc<Tracer>> {
    TRACER.read().clone()
}

/// Which trace is being recorded, if one is: objects keep per-trace state under it.
pub(crate) fn current_generation() -> Option<u64> {
    if !is_active() {
        return None;
    }
    tracer().map(|tracer| tracer.writer.generation())
}

/// A trace being recorded, from [`start`] until [`TraceSession::stop`] (or until it is dropped).
#[derive(Debug)]
pub struct TraceSession {
    path: PathBuf,
    stopped: bool,
}

/// What a finished trace holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSummary {
    /// The file written.
    pub path: PathBuf,
    /// Records written.
    pub records: u64,
    /// Records dropped because the queue was full or the file reached its cap.
    pub dropped: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Starts recording a trace to `path` (created or truncated), capped at `XHAL_TRACE_MAX_MB`
/// MiB ([`DEFAULT_MAX_BYTES`] when unset). One trace at a time: starting a second while one
/// is recorded is an error naming the file being written.
pub fn start(path: impl AsRef<Path>) -> Result<TraceSession> {
    let max_bytes = max_bytes_from_env()?;
    start_with_cap(path.as_ref(), max_bytes)
}

/// [`start`] with an explicit cap on the file's size.
pub fn start_with_cap(path: &Path, max_bytes: u64) -> Result<TraceSession> {
    start_with(path, max_bytes, false)
}

fn start_with(path: &Path, max_bytes: u64, append: bool) -> Result<TraceSession> {
    if !built_in() {
        return Err(Error::unsupported(format!(
            "cannot trace to {}: this program was built without xhal's `trace` feature",
            path.display()
        )));
    }
    let mut slot = TRACER.write();
    if let Some(current) = slot.as_ref() {
        return Err(Error::invalid_argument(format!(
            "a trace is already being recorded to {}; stop it before starting another",
            current.writer.path().display()
        )));
    }
    let epoch = Instant::now();
    let epoch_unix_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH + Duration::from_secs(CLOCK_ORIGIN_UNIX_SECONDS))
        .map_or(0.0, |since| since.as_secs_f64() * 1e6);
    let writer = Writer::create(path, max_bytes, append)?;
    *slot = Some(Arc::new(Tracer {
        epoch,
        epoch_unix_us,
        writer,
        next_track: AtomicU64::new(1),
    }));
    ACTIVE.store(true, Ordering::Release);
    tracing::debug!(path = %path.display(), max_bytes, "trace started");
    Ok(TraceSession {
        path: path.to_path_buf(),
        stopped: false,
    })
}

/// Starts the trace `XHAL_TRACE` names, once per process, when it is set and none is recorded.
/// The trace then lasts as long as the process; the writer flushes it as it goes.
pub(crate) fn start_from_env() -> Result<()> {
    static STARTED: std::sync::Once = std::sync::Once::new();
    let mut outcome = Ok(());
    STARTED.call_once(|| {
        let Some(path) = std::env::var_os(TRACE_VARIABLE).filter(|path| !path.is_empty()) else {
            return;
        };
        let append = std::env::var_os(APPEND_VARIABLE).is_some_and(|value| value == "1");
        outcome = max_bytes_from_env()
            .and_then(|max_bytes| start_with(Path::new(&path), max_bytes, append))
            .map(|session| {
                // The trace lasts until the process exits; it is finished then.
                std::mem::forget(session);
                finish_at_exit();
            })
            .map_err(|error| error.context(format_args!("{TRACE_VARIABLE}={}", Path::new(&path).display())));
    });
    outcome
}

/// Finishes the trace `XHAL_TRACE` started when the process exits normally (returning from
/// `main` or calling `exit`), so its last records and closing bracket reach the file. A
/// process killed or aborted keeps what the writer flushed until then.
fn finish_at_exit() {
    extern "C" fn finish() {
        if is_active() {
            if let Err(error) = stop() {
                tracing::warn!(%error, "the trace could not be finished at exit");
            }
        }
    }
    extern "C" {
        fn atexit(callback: extern "C" fn()) -> std::ffi::c_int;
    }
    // SAFETY: `atexit` is the C library's, and `finish` is a function that lives as long as
    // the program, takes nothing, never unwinds (stop returns errors) and may run on the
    // exiting thread while other threads still run.
    if unsafe { atexit(finish) } != 0 {
        tracing::warn!("could not register the trace's finish at exit; the last 100 ms may be missing");
    }
}

fn max_bytes_from_env() -> Result<u64> {
    match std::env::var(MAX_MB_VARIABLE) {
        Err(_) => Ok(DEFAULT_MAX_BYTES),
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(megabytes) if megabytes > 0 => Ok(megabytes.saturating_mul(1 << 20)),
            _ => Err(Error::invalid_argument(format!(
                "{MAX_MB_VARIABLE}={text:?} is not a size: expected a whole number of MiB above 0"
            ))),
        },
    }
}

impl TraceSession {
    /// The file the trace goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops recording, writes what is queued and closes the file.
    pub fn stop(mut self) -> Result<TraceSummary> {
        self.stopped = true;
        stop()
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        if !self.stopped {
            if let Err(error) = stop() {
                tracing::warn!(%error, "the trace could not be finished");
            }
        }
    }
}

fn stop() -> Result<TraceSummary> {
    let tracer = {
        let mut slot = TRACER.write();
        ACTIVE.store(false, Ordering::Release);
        slot.take()
    };
    let Some(tracer) = tracer else {
        return Err(Error::invalid_argument("no trace is being recorded"));
    };
    // Spans still open on other threads hold the tracer; they finish into a closed writer.
    tracer.writer.finish()
}

/// Writes out everything recorded so far and waits until it is in the file.
pub fn flush() {
    if let Some(tracer) = tracer() {
        tracer.writer.flush();
    }
}

impl Tracer {
    /// `at` in microseconds since [`CLOCK_ORIGIN_UNIX_SECONDS`], measured on the monotonic
    /// clock from the trace's start.
    fn micros(&self, at: Instant) -> f64 {
        self.epoch_unix_us + at.saturating_duration_since(self.epoch).as_secs_f64() * 1e6
    }
}

/// A host span: from its creation until it is dropped (or [`HostSpan::end`]).
#[must_use = "a span ends when it is dropped"]
pub struct HostSpan {
    inner: Option<OpenSpan>,
}

struct OpenSpan {
    tracer: Arc<Tracer>,
    name: Cow<'static, str>,
    category: &'static str,
    start: Instant,
    args: Args,
}

impl HostSpan {
    /// A span that records nothing (tracing is off).
    pub const fn off() -> HostSpan {
        HostSpan { inner: None }
    }

    /// Adds an argument learnt during the call (an allocation's outcome, a cache hit).
    pub fn arg(&mut self, name: &'static str, value: impl Into<Value>) {
        if let Some(span) = &mut self.inner {
            span.args.push((name, value.into()));
        }
    }

    /// Ends the span now.
    pub fn end(self) {}
}

impl Drop for HostSpan {
    fn drop(&mut self) {
        if let Some(span) = self.inner.take() {
            let end = Instant::now();
            let record = Record::Complete {
                name: span.name,
                category: span.category,
                track: Track::thread_of(&span.tracer),
                start: span.tracer.micros(span.start),
                duration: end.saturating_duration_since(span.start).as_secs_f64() * 1e6,
                args: span.args,
            };
            span.tracer.writer.send(record);
        }
    }
}

/// Starts a host span of `category` (`api`, `compile`, `plugin`...) called `name`; `args`
/// is only called when a trace is recorded.
#[inline]
pub fn span(category: &'static str, name: impl Into<Cow<'static, str>>, args: impl FnOnce() -> Args) -> HostSpan {
    if !is_active() {
        return HostSpan::off();
    }
    span_slow(category, name.into(), args())
}

#[cold]
fn span_slow(category: &'static str, name: Cow<'static, str>, args: Args) -> HostSpan {
    let Some(tracer) = tracer() else {
        return HostSpan::off();
    };
    HostSpan {
        inner: Some(OpenSpan {
            tracer,
            name,
            category,
            start: Instant::now(),
            args,
        }),
    }
}

/// A region the application names, as a span on the calling thread: everything traced
/// inside it appears under it in the viewer.
pub fn region(label: impl Into<Cow<'static, str>>) -> HostSpan {
    span("region", label, Vec::new)
}

/// Where a record is drawn: a host thread, or a device stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    /// A host thread, by the trace's own number for it.
    Thread(u64),
    /// A device's stream: the trace's number for the device and for the stream.
    Stream {
        /// The device's number in the trace.
        device: u64,
        /// The stream's number in the trace.
        stream: u64,
    },
}

thread_local! {
    static THREAD_TRACK: std::cell::Cell<Option<(u64, u64)>> = const { std::cell::Cell::new(None) };
}

/// Trace numbers for threads count from here, so they never collide with device tracks.
const THREAD_TRACK_BASE: u64 = 1;

impl Track {
    /// The calling thread's track, named in the trace the first time it is used.
    fn current_thread() -> Track {
        match tracer() {
            Some(tracer) => Track::thread_of(&tracer),
            None => Track::Thread(0),
        }
    }

    /// The calling thread's track in `tracer`'s trace.
    fn thread_of(tracer: &Tracer) -> Track {
        let generation = tracer.writer.generation();
        if let Some((id, seen)) = THREAD_TRACK.with(std::cell::Cell::get) {
            if seen == generation {
                return Track::Thread(id);
            }
        }
        let id = THREAD_TRACK_BASE + tracer.next_track.fetch_add(1, Ordering::Relaxed);
        THREAD_TRACK.with(|cell| cell.set(Some((id, generation))));
        let thread = std::thread::current();
        let name = thread.name().map_or_else(|| format!("thread {id}"), str::to_string);
        tracer.writer.send(Record::ThreadName { track: id, name });
        Track::Thread(id)
    }
}

/// A number for a device or stream, unique in the current trace (0 when none is recorded).
pub fn new_track_number() -> u64 {
    tracer().map_or(0, |tracer| tracer.next_track.fetch_add(1, Ordering::Relaxed))
}

/// Names a device's track group and a stream's track (sent once, when the stream is first traced).
pub fn name_stream(device: u64, device_label: &str, stream: u64) {
    if let Some(tracer) = tracer() {
        tracer.writer.send(Record::StreamName {
            device,
            device_label: device_label.to_string(),
            stream,
        });
    }
}

/// How a device span's times were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceClock {
    /// From the device's own timestamps, placed on the host clock by a calibration read.
    Device,
    /// The device's elapsed time back from an event whose completion the host observed, kept
    /// inside the operation's submission window.
    Elapsed,
    /// Observed by the host: the operation completed no later than the end given.
    HostObserved,
}

impl DeviceClock {
    /// The `clock` argument a span carries: none for device timestamps.
    fn marker(self) -> Option<&'static str> {
        match self {
            DeviceClock::Device => None,
            DeviceClock::Elapsed => Some("device-elapsed"),
            DeviceClock::HostObserved => Some("host-observed"),
        }
    }
}

/// Records work as the device executed it: `start` and `end` on the host clock.
pub fn device_span(
    track: Track,
    name: impl Into<Cow<'static, str>>,
    category: &'static str,
    start: Instant,
    end: Instant,
    clock: DeviceClock,
    mut args: Args,
) {
    let Some(tracer) = tracer() else { return };
    if let Some(name) = clock.marker() {
        args.push(("clock", Value::from(name)));
    }
    tracer.writer.send(Record::Complete {
        name: name.into(),
        category,
        track,
        start: tracer.micros(start),
        // From the two ends on the trace's clock, so a span that starts where another ends
        // reads so in the file (times are large doubles, good to about 0.02 µs).
        duration: (tracer.micros(end) - tracer.micros(start)).max(0.0),
        args,
    });
}

/// A counter's value now (memory in use, work queued), drawn as a curve under its device.
pub fn counter(device: u64, name: Cow<'static, str>, values: Vec<(&'static str, u64)>) {
    let Some(tracer) = tracer() else { return };
    tracer.writer.send(Record::Counter {
        device,
        name,
        at: tracer.micros(Instant::now()),
        values,
    });
}

/// An arrow from the current point of the calling thread (`begin`) to a later point on
/// another track (`end`), such as an enqueue and the work it became. `id` pairs them.
pub fn flow(id: u64, phase: FlowPhase, track: Track, at: Instant) {
    let Some(tracer) = tracer() else { return };
    tracer.writer.send(Record::Flow {
        id,
        phase,
        track,
        at: tracer.micros(at),
    });
}

/// The two ends of a flow arrow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowPhase {
    /// Where the arrow starts.
    Begin,
    /// Where the arrow ends.
    End,
}

/// The trace being recorded, held by an object that records often (a traced stream), so
/// that each record skips the lookup.
#[derive(Clone)]
pub(crate) struct Recorder(Arc<Tracer>);

impl Recorder {
    /// The trace being recorded now, if any.
    pub(crate) fn current() -> Option<Recorder> {
        if !is_active() {
            return None;
        }
        tracer().map(Recorder)
    }

    pub(crate) fn generation(&self) -> u64 {
        self.0.writer.generation()
    }

    /// The calling thread's track.
    pub(crate) fn thread_track(&self) -> Track {
        Track::thread_of(&self.0)
    }

    pub(crate) fn flow(&self, id: u64, phase: FlowPhase, track: Track, at: Instant) {
        self.0.writer.send(Record::Flow {
            id,
            phase,
            track,
            at: self.0.micros(at),
        });
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn device_span(
        &self,
        track: Track,
        name: Cow<'static, str>,
        category: &'static str,
        start: Instant,
        end: Instant,
        clock: DeviceClock,
        mut args: Args,
    ) {
        if let Some(name) = clock.marker() {
            args.push(("clock", Value::from(name)));
        }
        self.0.writer.send(Record::Complete {
            name,
            category,
            track,
            start: self.0.micros(start),
            duration: (self.0.micros(end) - self.0.micros(start)).max(0.0),
            args,
        });
    }

    /// `at` in nanoseconds since the Unix epoch, on the trace's clock.
    pub(crate) fn unix_ns(&self, at: Instant) -> i64 {
        activity::unix_ns(self.0.micros(at))
    }

    pub(crate) fn counter(&self, device: u64, name: Cow<'static, str>, values: Vec<(&'static str, u64)>) {
        self.0.writer.send(Record::Counter {
            device,
            name,
            at: self.0.micros(Instant::now()),
            values,
        });
    }
}

/// The calling thread's track in the current trace.
pub fn thread_track() -> Track {
    Track::current_thread()
}

/// A fresh number for a flow arrow.
pub fn new_flow_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// How long the writer may hold records before they are in the file.
pub fn flush_interval() -> Duration {
    FLUSH_INTERVAL
}

#[cfg(test)]
mod tests;

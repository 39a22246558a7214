//! Streams and events: one worker thread per stream, running an in-order queue, and the
//! points in it that the host and other streams wait for.
//!
//! Enqueueing validates nothing (the checked adapter and the kernel did that) and never blocks
//! on the work. The worker pops operations one at a time, runs them without holding the queue
//! lock, and counts them complete. An error while running becomes the stream's sticky error:
//! later data operations are skipped, records still complete (carrying the error), and every
//! later call on the stream returns it.
//!
//! Each record of an event makes a fresh one-shot [`Signal`] and makes it the event's latest.
//! Waits, queries and host synchronisation take the latest signal *at the time of the call*
//! and hold on to it, so re-recording an event never changes what an earlier wait waits for,
//! and signals that complete out of order (records on two streams) never confuse anyone.
//!
//! A record always completes, even on a stream that has failed, so nothing waiting on an
//! event can hang; it then carries the stream's error to whoever waits.

use crate::kernels::PreparedLaunch;
use crate::memory::{host_range, Buffer, FillPattern, HostDestination, HostSource};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xhal_backend::{Error, Object, Result};

/// One queued operation, owning (through `Arc`s) everything it touches, so that freeing a
/// handle never frees memory that queued work still uses.
#[derive(Debug)]
enum Operation {
    Write {
        buffer: Arc<Buffer>,
        range: Range<usize>,
        source: HostSource,
    },
    Read {
        buffer: Arc<Buffer>,
        range: Range<usize>,
        destination: HostDestination,
    },
    Copy {
        source: Arc<Buffer>,
        source_range: Range<usize>,
        destination: Arc<Buffer>,
        destination_start: usize,
    },
    Fill {
        buffer: Arc<Buffer>,
        range: Range<usize>,
        pattern: FillPattern,
    },
    Launch(PreparedLaunch),
    Record {
        signal: Arc<Signal>,
    },
    Wait {
        event_id: u64,
        signal: Arc<Signal>,
    },
}

#[derive(Debug, Default)]
struct QueueState {
    queue: VecDeque<Operation>,
    enqueued: u64,
    completed: u64,
    sticky_error: Option<Error>,
    /// No more work is accepted; the worker exits once the queue is empty.
    closing: bool,
    /// The backend is going away: skip what is queued and cut sleeps short.
    cancelled: bool,
}

#[derive(Debug, Default)]
struct StreamShared {
    state: Mutex<QueueState>,
    work_available: Condvar,
    progress: Condvar,
    interrupt: Condvar,
}

impl StreamShared {
    /// Stops accepting work and tells the worker to exit once the queue is empty; with
    /// `cancel`, the worker skips what is left and cuts sleeps short. Does not wait.
    fn begin_shutdown(&self, cancel: bool) {
        let mut state = self.state.lock();
        state.closing = true;
        state.cancelled |= cancel;
        self.work_available.notify_all();
        self.interrupt.notify_all();
    }
}

/// The streams of one driver that are still alive, so that shutting the driver down can
/// cancel all their work at once.
#[derive(Debug, Default)]
pub(crate) struct LiveStreams(Mutex<Vec<Weak<StreamShared>>>);

impl LiveStreams {
    fn add(&self, shared: &Arc<StreamShared>) {
        let mut live = self.0.lock();
        live.retain(|stream| stream.strong_count() > 0);
        live.push(Arc::downgrade(shared));
    }

    /// Cancels every live stream's queued work and cuts its running kernel short, without
    /// waiting: a synchronize that follows returns as soon as each worker has skipped what
    /// was left. Cancelling all streams first means a stream waiting on another never holds
    /// up the shutdown.
    pub(crate) fn cancel_all(&self) {
        let live: Vec<Arc<StreamShared>> = self.0.lock().iter().filter_map(Weak::upgrade).collect();
        for shared in live {
            shared.begin_shutdown(true);
        }
    }
}

/// A stream: an in-order queue and the worker thread that runs it.
#[derive(Debug)]
pub struct Stream {
    shared: Arc<StreamShared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Stream {
    /// Starts a stream of cpu device `device_index`, known to `live` until it is dropped.
    pub(crate) fn spawn(device_index: u32, live: &LiveStreams) -> Result<Stream> {
        let shared = Arc::new(StreamShared::default());
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("xhal-cpu-{device_index}-stream"))
            .spawn(move || run_worker(device_index, &worker_shared))
            .map_err(|error| {
                Error::internal(format!(
                    "could not start the worker thread of a stream of cpu device {device_index}: {error}"
                ))
            })?;
        live.add(&shared);
        tracing::debug!(device = device_index, "stream created");
        Ok(Stream {
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The sticky error, if the stream has one: what every call on a failed stream returns,
    /// an empty command included.
    pub(crate) fn check_usable(&self) -> Result<()> {
        let state = self.shared.state.lock();
        Self::refuse_if_unusable(&state)
    }

    fn refuse_if_unusable(state: &QueueState) -> Result<()> {
        if let Some(error) = &state.sticky_error {
            return Err(error.clone());
        }
        if state.closing {
            return Err(Error::invalid_handle(
                "the stream was shut down: the cpu backend is going away",
            ));
        }
        Ok(())
    }

    /// Enqueues a write of `size` bytes from `source` to `offset` of `buffer`.
    ///
    /// # Safety
    /// `source` satisfies `Driver::stream_write`'s contract for `size` bytes.
    pub(crate) unsafe fn write(
        &self,
        buffer: &Object<Arc<Buffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let range = host_range(offset, size)?;
        // SAFETY: our caller passes `stream_write`'s contract for `source` on, which is
        // exactly what `HostSource::new` requires.
        let source = unsafe { HostSource::new(source) };
        self.enqueue(Operation::Write {
            buffer: Buffer::named(buffer),
            range,
            source,
        })
    }

    /// Enqueues a read of `size` bytes at `offset` of `buffer` into `destination`.
    ///
    /// # Safety
    /// `destination` satisfies `Driver::stream_read`'s contract for `size` bytes.
    pub(crate) unsafe fn read(
        &self,
        buffer: &Object<Arc<Buffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let range = host_range(offset, size)?;
        // SAFETY: our caller passes `stream_read`'s contract for `destination` on, which is
        // exactly what `HostDestination::new` requires.
        let destination = unsafe { HostDestination::new(destination) };
        self.enqueue(Operation::Read {
            buffer: Buffer::named(buffer),
            range,
            destination,
        })
    }

    /// Enqueues a copy of `size` bytes between two buffers, or within one.
    pub(crate) fn copy(
        &self,
        source: &Object<Arc<Buffer>>,
        source_offset: u64,
        destination: &Object<Arc<Buffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let source_range = host_range(source_offset, size)?;
        let destination_start = host_range(destination_offset, size)?.start;
        self.enqueue(Operation::Copy {
            source: Buffer::named(source),
            source_range,
            destination: Buffer::named(destination),
            destination_start,
        })
    }

    /// Enqueues a fill of `size` bytes at `offset` of `buffer` with `pattern`.
    pub(crate) fn fill(&self, buffer: &Object<Arc<Buffer>>, offset: u64, size: u64, pattern: &[u8]) -> Result<()> {
        let range = host_range(offset, size)?;
        self.enqueue(Operation::Fill {
            buffer: Buffer::named(buffer),
            range,
            pattern: FillPattern::new(pattern),
        })
    }

    /// Enqueues a launch that was checked against its kernel.
    pub(crate) fn launch(&self, launch: PreparedLaunch) -> Result<()> {
        self.enqueue(Operation::Launch(launch))
    }

    /// Enqueues a new record of `event`.
    pub(crate) fn record(&self, event: &Event) -> Result<()> {
        self.enqueue_with(|| {
            Some(Operation::Record {
                signal: event.begin_record(),
            })
        })
    }

    /// Makes later work wait for the event's most recent record; nothing, if it has none.
    pub(crate) fn wait(&self, event: &Object<Event>) -> Result<()> {
        self.enqueue_with(|| {
            event.latest().map(|signal| Operation::Wait {
                event_id: event.handle(),
                signal,
            })
        })
    }

    fn enqueue(&self, operation: Operation) -> Result<()> {
        self.enqueue_with(|| Some(operation))
    }

    /// Builds the operation under the queue lock, so that it is created if and only if it
    /// is queued: an event's record must never exist without the operation that completes it.
    /// `None` enqueues nothing.
    fn enqueue_with(&self, build: impl FnOnce() -> Option<Operation>) -> Result<()> {
        let mut state = self.shared.state.lock();
        Self::refuse_if_unusable(&state)?;
        if let Some(operation) = build() {
            state.queue.push_back(operation);
            state.enqueued += 1;
            self.shared.work_available.notify_one();
        }
        Ok(())
    }

    /// Blocks until everything enqueued has completed, then returns the sticky error if any.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        while state.completed < state.enqueued {
            self.shared.progress.wait(&mut state);
        }
        state.sticky_error.clone().map_or(Ok(()), Err)
    }

    /// True when everything enqueued has completed; the sticky error if any.
    pub(crate) fn query(&self) -> Result<bool> {
        let state = self.shared.state.lock();
        if let Some(error) = &state.sticky_error {
            return Err(error.clone());
        }
        Ok(state.completed == state.enqueued)
    }
}

impl Drop for Stream {
    /// The adapter synchronised the stream before letting it go, so the queue is empty unless
    /// the driver was shut down; either way the worker thread is not left behind.
    fn drop(&mut self) {
        self.shared.begin_shutdown(true);
        let worker = self.worker.lock().take();
        if let Some(worker) = worker {
            if worker.join().is_err() {
                tracing::error!("a cpu stream's worker thread panicked");
            }
        }
    }
}

fn run_worker(device_index: u32, shared: &StreamShared) {
    loop {
        let (operation, sticky_error, cancelled) = {
            let mut state = shared.state.lock();
            loop {
                if let Some(operation) = state.queue.pop_front() {
                    break (operation, state.sticky_error.clone(), state.cancelled);
                }
                if state.closing {
                    return;
                }
                shared.work_available.wait(&mut state);
            }
        };
        // The operation (and the buffers it holds) is dropped inside `execute`, before it
        // counts as complete, so memory accounting is exact once a synchronize returns.
        let result = catch_unwind(AssertUnwindSafe(|| {
            execute(shared, operation, sticky_error.as_ref(), cancelled)
        }))
        .unwrap_or_else(|panic| {
            Err(Error::internal(format!(
                "the cpu backend panicked while executing on a stream of cpu device {device_index}: {}",
                panic_message(panic.as_ref())
            )))
        });
        let mut state = shared.state.lock();
        if let Err(error) = result {
            if state.sticky_error.is_none() {
                tracing::warn!(device = device_index, %error, "stream failed; its error is now sticky");
                state.sticky_error = Some(error);
            }
        }
        state.completed += 1;
        shared.progress.notify_all();
    }
}

fn execute(shared: &StreamShared, operation: Operation, sticky_error: Option<&Error>, cancelled: bool) -> Result<()> {
    match operation {
        Operation::Record { signal } => {
            let carried = sticky_error.cloned().or_else(|| {
                cancelled.then(|| Error::internal("the record never ran: the backend was shut down first"))
            });
            signal.complete(carried);
            Ok(())
        }
        // A failed or cancelled stream runs nothing but records.
        _ if sticky_error.is_some() || cancelled => Ok(()),
        Operation::Wait { event_id, signal } => match signal.wait().error {
            Some(error) => Err(error.context(format!(
                "dependency failed: event {event_id:#x} was recorded on a stream that had failed"
            ))),
            None => Ok(()),
        },
        Operation::Write { buffer, range, source } => {
            buffer.write_from_host(range, source);
            Ok(())
        }
        Operation::Read {
            buffer,
            range,
            destination,
        } => {
            buffer.read_to_host(range, destination);
            Ok(())
        }
        Operation::Copy {
            source,
            source_range,
            destination,
            destination_start,
        } => {
            Buffer::copy(&source, source_range, &destination, destination_start);
            Ok(())
        }
        Operation::Fill { buffer, range, pattern } => {
            buffer.fill(range, pattern);
            Ok(())
        }
        Operation::Launch(launch) => launch.execute(&|duration| sleep_unless_cancelled(shared, duration), &|| {
            shared.state.lock().cancelled
        }),
    }
}

fn sleep_unless_cancelled(shared: &StreamShared, duration: Duration) {
    let Some(deadline) = Instant::now().checked_add(duration) else {
        return;
    };
    let mut state = shared.state.lock();
    while !state.cancelled {
        if shared.interrupt.wait_until(&mut state, deadline).timed_out() {
            break;
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// How a record completed.
#[derive(Debug, Clone)]
struct Outcome {
    completed_at: Instant,
    error: Option<Error>,
}

/// One record of an event: set once, by the worker that reaches it.
#[derive(Debug, Default)]
struct Signal {
    outcome: Mutex<Option<Outcome>>,
    completed: Condvar,
}

impl Signal {
    fn complete(&self, error: Option<Error>) {
        let mut outcome = self.outcome.lock();
        *outcome = Some(Outcome {
            completed_at: Instant::now(),
            error,
        });
        self.completed.notify_all();
    }

    fn wait(&self) -> Outcome {
        let mut outcome = self.outcome.lock();
        loop {
            if let Some(done) = outcome.as_ref() {
                return done.clone();
            }
            self.completed.wait(&mut outcome);
        }
    }

    fn peek(&self) -> Option<Outcome> {
        self.outcome.lock().clone()
    }
}

/// An event: its latest record, and whether it takes timestamps.
#[derive(Debug)]
pub struct Event {
    timing: bool,
    latest: Mutex<Option<Arc<Signal>>>,
}

impl Event {
    pub(crate) fn new(timing: bool) -> Event {
        Event {
            timing,
            latest: Mutex::new(None),
        }
    }

    /// Starts a new record; the caller must enqueue an operation that completes the signal.
    fn begin_record(&self) -> Arc<Signal> {
        let signal = Arc::new(Signal::default());
        *self.latest.lock() = Some(Arc::clone(&signal));
        signal
    }

    /// The most recent record, if any.
    fn latest(&self) -> Option<Arc<Signal>> {
        self.latest.lock().clone()
    }

    /// True when the latest record completed, or none was made; the error a failed stream
    /// passed on through the record otherwise.
    pub(crate) fn query(&self) -> Result<bool> {
        let Some(signal) = self.latest() else {
            return Ok(true);
        };
        match signal.peek() {
            None => Ok(false),
            Some(Outcome { error: Some(error), .. }) => Err(error),
            Some(Outcome { error: None, .. }) => Ok(true),
        }
    }

    /// Blocks the calling thread until the latest record completed.
    pub(crate) fn synchronize(&self) -> Result<()> {
        match self.latest().map(|signal| signal.wait()) {
            Some(Outcome { error: Some(error), .. }) => Err(error),
            _ => Ok(()),
        }
    }

    /// Nanoseconds from `start`'s latest record completing to `end`'s.
    ///
    /// Misuse is `InvalidArgument`, never `Unsupported` (the device does support timing):
    /// an event created without timing, one never recorded, one whose latest record has not
    /// completed yet ("not yet complete"), or an `end` that completed before `start`.
    pub(crate) fn elapsed_nanoseconds(start: &Object<Event>, end: &Object<Event>) -> Result<u64> {
        let started = Event::timed_outcome(start, "start")?;
        let ended = Event::timed_outcome(end, "end")?;
        let elapsed = ended
            .completed_at
            .checked_duration_since(started.completed_at)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "end event {:#x} completed before start event {:#x}",
                    end.handle(),
                    start.handle()
                ))
            })?;
        Ok(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    fn timed_outcome(event: &Object<Event>, role: &str) -> Result<Outcome> {
        if !event.timing {
            return Err(Error::invalid_argument(format!(
                "{role} event {:#x} was created without timing; create it with timing to measure elapsed time",
                event.handle()
            )));
        }
        let Some(signal) = event.latest() else {
            return Err(Error::invalid_argument(format!(
                "{role} event {:#x} was never recorded",
                event.handle()
            )));
        };
        match signal.peek() {
            None => Err(Error::invalid_argument(format!(
                "{role} event {:#x}: event not yet complete",
                event.handle()
            ))),
            Some(Outcome { error: Some(error), .. }) => Err(error),
            Some(outcome) => Ok(outcome),
        }
    }
}

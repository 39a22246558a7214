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

use crate::device::DeviceMemory;
use crate::kernels::PreparedLaunch;
use crate::memory::{host_range, Buffer, FillPattern, HostDestination, HostSource};
use crate::module::Kernel;
use crate::CpuDriver;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xhal_backend::{Command, DriverCommandList, DriverEvent, DriverStream, Error, Launch, Object, OwnedLaunch, Result};

/// One queued operation, owning (through `Arc`s) everything it touches, so that freeing a
/// handle never frees memory that queued work still uses.
#[derive(Debug)]
// A launch is held inline (see `PreparedLaunch`): queueing it allocates nothing.
#[allow(clippy::large_enum_variant)]
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
    /// A submission of a command list: the list as it was when submitted.
    List(Arc<Vec<Arc<ListCommand>>>),
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
    /// The smallest `completed` count that a thread asleep in a synchronize waits for: the
    /// worker wakes it when that count is reached, not after every operation, so a wait for
    /// a long queue costs one wake-up instead of one per operation (each a context switch,
    /// and on a host with few cores, time taken from the worker itself).
    wake_at: Option<u64>,
}

#[derive(Debug, Default)]
struct StreamShared {
    state: Mutex<QueueState>,
    work_available: Condvar,
    progress: Condvar,
    interrupt: Condvar,
    /// `QueueState::enqueued` and `completed`, readable without the lock: the worker and a
    /// synchronizing thread watch them for a moment before they sleep on a condition variable,
    /// because work usually follows work at once and waking a sleeping thread costs a system
    /// call on each side.
    enqueued_hint: AtomicU64,
    completed_hint: AtomicU64,
    /// Set (under the lock) once the stream has a sticky error or is closing, so that a launch
    /// can skip the lock when it checks that the stream is usable, as it nearly always is.
    unusable_hint: AtomicBool,
}

/// How long the worker looks for more work before it sleeps.
const WORKER_SPIN: Duration = Duration::from_micros(50);
/// How long a synchronize watches for the stream to finish before it sleeps.
const SYNCHRONIZE_SPIN: Duration = Duration::from_micros(100);

/// Watches `done` for up to `limit`, without the lock; true once it holds.
///
/// It yields the processor between short bursts of polling: the thread it waits for may be
/// queued on this very processor (the scheduler often wakes a thread where its waker runs,
/// expecting the waker to sleep), and would otherwise wait out the whole spin.
fn spin_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let started = Instant::now();
    loop {
        for _ in 0..64 {
            if done() {
                return true;
            }
            std::hint::spin_loop();
        }
        if started.elapsed() >= limit {
            return done();
        }
        std::thread::yield_now();
    }
}

impl StreamShared {
    /// Stops accepting work and tells the worker to exit once the queue is empty; with
    /// `cancel`, the worker skips what is left and cuts sleeps short. Does not wait.
    fn begin_shutdown(&self, cancel: bool) {
        let mut state = self.state.lock();
        state.closing = true;
        self.unusable_hint.store(true, Ordering::Release);
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
            self.shared.enqueued_hint.store(state.enqueued, Ordering::Release);
            self.shared.work_available.notify_one();
        }
        Ok(())
    }
}

impl DriverStream<CpuDriver> for Stream {
    /// Starts a stream of the device, known to the driver (which cancels it when the backend
    /// goes) until it is dropped.
    fn create(driver: &CpuDriver, device: &Arc<Object<Arc<DeviceMemory>>>) -> Result<Stream> {
        Self::create_with_priority(driver, device, 0)
    }

    /// Priority -1 makes the stream urgent: its launches pause ordinary streams' launches and
    /// take their helper threads (see `pool`).
    fn create_with_priority(
        driver: &CpuDriver,
        device: &Arc<Object<Arc<DeviceMemory>>>,
        priority: i32,
    ) -> Result<Stream> {
        let device_index = device.device_index();
        let shared = Arc::new(StreamShared::default());
        let worker_shared = Arc::clone(&shared);
        let urgent = priority < 0;
        let worker = std::thread::Builder::new()
            .name(format!("xhal-cpu-{device_index}-stream"))
            .spawn(move || {
                crate::pool::submit_as_urgent(urgent);
                run_worker(device_index, &worker_shared)
            })
            .map_err(|error| {
                Error::internal(format!(
                    "could not start the worker thread of a stream of cpu device {device_index}: {error}"
                ))
            })?;
        driver.streams.add(&shared);
        tracing::debug!(device = device_index, priority, "stream created");
        Ok(Stream {
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// What every call on a failed stream returns, an empty command included; a stream of a
    /// backend going away refuses work too.
    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        // Whatever races with this check is caught again under the lock when enqueueing.
        if !stream.shared.unusable_hint.load(Ordering::Acquire) {
            return Ok(());
        }
        let state = stream.shared.state.lock();
        Self::refuse_if_unusable(&state)
    }

    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Arc<Buffer>>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let range = host_range(offset, size)?;
        // SAFETY: our caller passes `DriverStream::write`'s contract for `source` on, which is
        // exactly what `HostSource::new` requires.
        let source = unsafe { HostSource::new(source) };
        stream.enqueue(Operation::Write {
            buffer: Buffer::named(buffer),
            range,
            source,
        })
    }

    unsafe fn read(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Arc<Buffer>>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let range = host_range(offset, size)?;
        // SAFETY: our caller passes `DriverStream::read`'s contract for `destination` on, which
        // is exactly what `HostDestination::new` requires.
        let destination = unsafe { HostDestination::new(destination) };
        stream.enqueue(Operation::Read {
            buffer: Buffer::named(buffer),
            range,
            destination,
        })
    }

    fn copy(
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<Arc<Buffer>>>,
        source_offset: u64,
        destination: &Arc<Object<Arc<Buffer>>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let source_range = host_range(source_offset, size)?;
        let destination_start = host_range(destination_offset, size)?.start;
        stream.enqueue(Operation::Copy {
            source: Buffer::named(source),
            source_range,
            destination: Buffer::named(destination),
            destination_start,
        })
    }

    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Arc<Buffer>>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let range = host_range(offset, size)?;
        stream.enqueue(Operation::Fill {
            buffer: Buffer::named(buffer),
            range,
            pattern: FillPattern::new(pattern),
        })
    }

    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, CpuDriver>) -> Result<()> {
        // A failed stream says so before the launch is checked against its kernel.
        Self::sticky_error(stream)?;
        stream.enqueue(Operation::Launch(Kernel::prepare(launch)?))
    }

    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        stream.enqueue_with(|| {
            Some(Operation::Record {
                signal: event.begin_record(),
            })
        })
    }

    /// Later work waits for the event's most recent record; nothing, if it has none.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        stream.enqueue_with(|| {
            event.latest().map(|signal| Operation::Wait {
                event_id: event.handle(),
                signal,
            })
        })
    }

    /// Blocks until everything enqueued before the call has completed, then returns the
    /// sticky error if any.
    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let shared = &stream.shared;
        let mut state = shared.state.lock();
        let target = state.enqueued;
        if state.completed < target {
            drop(state);
            spin_until(SYNCHRONIZE_SPIN, || {
                shared.completed_hint.load(Ordering::Acquire) >= target
            });
            state = shared.state.lock();
        }
        while state.completed < target {
            state.wake_at = Some(state.wake_at.map_or(target, |other| other.min(target)));
            shared.progress.wait(&mut state);
        }
        state.sticky_error.clone().map_or(Ok(()), Err)
    }

    /// True when everything enqueued has completed; the sticky error if any.
    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let state = stream.shared.state.lock();
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
    // The result of the operation that just ran, counted under the same lock that takes the
    // next one: one lock per operation, which the enqueueing thread contends with less.
    let mut finished: Option<Result<()>> = None;
    loop {
        let (operation, sticky_error, cancelled) = {
            let mut state = shared.state.lock();
            if let Some(result) = finished.take() {
                if let Err(error) = result {
                    if state.sticky_error.is_none() {
                        tracing::warn!(device = device_index, %error, "stream failed; its error is now sticky");
                        state.sticky_error = Some(error);
                        shared.unusable_hint.store(true, Ordering::Release);
                    }
                }
                state.completed += 1;
                shared.completed_hint.store(state.completed, Ordering::Release);
                if state.wake_at.is_some_and(|target| state.completed >= target) {
                    // Every sleeper wakes; those waiting for more work name their target again.
                    state.wake_at = None;
                    shared.progress.notify_all();
                }
            }
            let mut spun = false;
            loop {
                if let Some(operation) = state.queue.pop_front() {
                    break (operation, state.sticky_error.clone(), state.cancelled);
                }
                if state.closing {
                    return;
                }
                if spun {
                    shared.work_available.wait(&mut state);
                    spun = false;
                } else {
                    let seen = state.enqueued;
                    drop(state);
                    spin_until(WORKER_SPIN, || shared.enqueued_hint.load(Ordering::Acquire) != seen);
                    state = shared.state.lock();
                    spun = true;
                }
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
        finished = Some(result);
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
        Operation::List(commands) => {
            for (index, command) in commands.iter().enumerate() {
                command
                    .execute(shared)
                    .map_err(|error| error.context(format!("command {index} of a command list")))?;
                if shared.state.lock().cancelled {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// One command of a CPU command list: checked and prepared once, when the list is built, so a
/// submission only queues the list.
#[derive(Debug)]
// Launches inline, as in `Operation`; a list is built once, so the size costs little.
#[allow(clippy::large_enum_variant)]
pub(crate) enum ListCommand {
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
}

impl ListCommand {
    fn new(command: &Command<CpuDriver>) -> Result<ListCommand> {
        Ok(match command {
            Command::Copy {
                source,
                source_offset,
                destination,
                destination_offset,
                size,
            } => ListCommand::Copy {
                source: Buffer::named(source),
                source_range: host_range(*source_offset, *size)?,
                destination: Buffer::named(destination),
                destination_start: host_range(*destination_offset, *size)?.start,
            },
            Command::Fill {
                buffer,
                offset,
                size,
                pattern,
            } => ListCommand::Fill {
                buffer: Buffer::named(buffer),
                range: host_range(*offset, *size)?,
                pattern: FillPattern::new(pattern),
            },
            Command::Launch(launch) => ListCommand::Launch(Kernel::prepare(&launch.borrowed())?),
        })
    }

    fn execute(&self, shared: &StreamShared) -> Result<()> {
        match self {
            ListCommand::Copy {
                source,
                source_range,
                destination,
                destination_start,
            } => {
                Buffer::copy(source, source_range.clone(), destination, *destination_start);
                Ok(())
            }
            ListCommand::Fill { buffer, range, pattern } => {
                buffer.fill(range.clone(), *pattern);
                Ok(())
            }
            ListCommand::Launch(launch) => launch
                .execute(&|duration| sleep_unless_cancelled(shared, duration), &|| {
                    shared.state.lock().cancelled
                }),
        }
    }
}

/// A CPU command list: its prepared commands, replaced as a whole when a launch is updated so
/// that submissions already queued keep the commands they were queued with.
pub(crate) struct CommandList {
    commands: Mutex<Arc<Vec<Arc<ListCommand>>>>,
}

impl CommandList {
    pub(crate) fn build(commands: &[Command<CpuDriver>]) -> Result<CommandList> {
        let prepared = commands
            .iter()
            .map(|command| ListCommand::new(command).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(CommandList {
            commands: Mutex::new(Arc::new(prepared)),
        })
    }
}

impl DriverCommandList<CpuDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        let commands = Arc::clone(&self.commands.lock());
        stream.enqueue(Operation::List(commands))
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<CpuDriver>) -> Result<()> {
        let prepared = Arc::new(ListCommand::Launch(Kernel::prepare(&launch.borrowed())?));
        let mut commands = self.commands.lock();
        let mut updated = Vec::clone(&commands);
        let slot = updated
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("a cpu command list has no command {index}")))?;
        *slot = prepared;
        *commands = Arc::new(updated);
        Ok(())
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

impl DriverEvent<CpuDriver> for Event {
    fn create(_driver: &CpuDriver, _device: &Arc<Object<Arc<DeviceMemory>>>, timing: bool) -> Result<Event> {
        Ok(Event {
            timing,
            latest: Mutex::new(None),
        })
    }

    /// True when the latest record completed, or none was made; the error a failed stream
    /// passed on through the record otherwise.
    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        let Some(signal) = event.latest() else {
            return Ok(true);
        };
        match signal.peek() {
            None => Ok(false),
            Some(Outcome { error: Some(error), .. }) => Err(error),
            Some(Outcome { error: None, .. }) => Ok(true),
        }
    }

    /// Blocks the calling thread until the latest record completed.
    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        match event.latest().map(|signal| signal.wait()) {
            Some(Outcome { error: Some(error), .. }) => Err(error),
            _ => Ok(()),
        }
    }

    /// Nanoseconds from `start`'s latest record completing to `end`'s.
    ///
    /// Misuse is `InvalidArgument`, never `Unsupported` (the device does support timing):
    /// an event created without timing, one never recorded, one whose latest record has not
    /// completed yet ("not yet complete"), or an `end` that completed before `start`.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
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

    /// When the latest record completed, on the host's monotonic clock: this device's clock.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        let outcome = Event::timed_outcome(event, "the")?;
        Ok(xhal_backend::clock::host_ns_of(outcome.completed_at))
    }
}

//! An in-order stream and its events on a host thread, for a device without hardware queues.
//!
//! A driver whose device runs work when the host tells it to (an emulator, a simulator, an
//! accelerator driven by blocking calls) gets the stream semantics the ABI demands from
//! [`HostQueue`] and [`HostEvent`], instead of writing them again:
//!
//! - enqueueing never waits for the work;
//! - an error found while executing sticks to the stream: later work is skipped, records still
//!   complete (carrying the error, so nothing waiting on them hangs), and every later call on
//!   the stream returns it;
//! - a panic in queued work becomes the stream's error, never a lost thread;
//! - each record makes a fresh one-shot signal, so re-recording an event never changes what
//!   an earlier wait waits for.
//!
//! Queued work owns what it touches (`Arc`s), so freeing a handle never frees memory in use.

use crate::driver::{Driver, DriverEvent, Object};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Work for a stream's thread.
enum Command {
    /// A copy, fill or launch, checked at enqueue time.
    Work(Box<dyn FnOnce() -> Result<()> + Send>),
    /// Completes an event's record.
    Record(Arc<Signal>),
    /// Waits for another record (the event's handle, for the message when it failed).
    Wait(u64, Arc<Signal>),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Command>,
    enqueued: u64,
    completed: u64,
    sticky_error: Option<Error>,
    /// No more work is accepted; the worker exits once the queue is empty.
    closing: bool,
    /// The queue is being dropped: what is still queued is skipped.
    cancelled: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work_available: Condvar,
    progress: Condvar,
}

/// An in-order queue of work run by one host thread.
pub struct HostQueue {
    name: String,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl HostQueue {
    /// Starts the queue's thread, named `name` (it also names the queue in errors).
    pub fn spawn(name: impl Into<String>) -> Result<HostQueue> {
        let name = name.into();
        let shared = Arc::new(Shared::default());
        let worker_shared = Arc::clone(&shared);
        let worker_name = name.clone();
        let worker = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || run_worker(&worker_name, &worker_shared))
            .map_err(|error| Error::internal(format!("could not start the thread of {name}: {error}")))?;
        Ok(HostQueue {
            name,
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The sticky error, if the queue has failed.
    pub fn sticky_error(&self) -> Result<()> {
        self.shared.state.lock().sticky_error.clone().map_or(Ok(()), Err)
    }

    /// Enqueues `work`; it runs after everything enqueued before it, unless the queue has
    /// failed by then. An error it returns becomes the queue's sticky error.
    pub fn enqueue(&self, work: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        self.enqueue_with(|| Some(Command::Work(Box::new(work))))
    }

    /// Enqueues a record of `event`: it completes when the work before it has.
    pub fn record(&self, event: &HostEvent) -> Result<()> {
        // The signal is made under the queue lock, so a record exists if and only if the
        // command that completes it is queued.
        self.enqueue_with(|| Some(Command::Record(event.begin_record())))
    }

    /// Makes later work wait for the event's most recent record; an event never recorded is
    /// complete, so nothing is enqueued for it.
    pub fn wait(&self, event: &Object<HostEvent>) -> Result<()> {
        self.enqueue_with(|| event.latest().map(|signal| Command::Wait(event.handle(), signal)))
    }

    fn enqueue_with(&self, build: impl FnOnce() -> Option<Command>) -> Result<()> {
        let mut state = self.shared.state.lock();
        if let Some(error) = &state.sticky_error {
            return Err(error.clone());
        }
        if state.closing {
            return Err(Error::invalid_handle(format!("{} is being destroyed", self.name)));
        }
        if let Some(command) = build() {
            state.queue.push_back(command);
            state.enqueued += 1;
            self.shared.work_available.notify_one();
        }
        Ok(())
    }

    /// Blocks until everything enqueued has completed; then the sticky error, if any.
    pub fn synchronize(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        while state.completed < state.enqueued {
            self.shared.progress.wait(&mut state);
        }
        state.sticky_error.clone().map_or(Ok(()), Err)
    }

    /// True when everything enqueued has completed; the sticky error, if any.
    pub fn query(&self) -> Result<bool> {
        let state = self.shared.state.lock();
        match &state.sticky_error {
            Some(error) => Err(error.clone()),
            None => Ok(state.completed == state.enqueued),
        }
    }
}

impl Drop for HostQueue {
    /// Skips what is still queued (records still complete), then stops the thread. The
    /// checked adapter synchronises a stream before dropping it, so this skips work only when
    /// the queue is dropped some other way.
    fn drop(&mut self) {
        {
            let mut state = self.shared.state.lock();
            state.closing = true;
            state.cancelled = true;
            self.shared.work_available.notify_all();
        }
        if let Some(worker) = self.worker.lock().take() {
            if worker.join().is_err() {
                tracing::error!(queue = %self.name, "queue thread panicked");
            }
        }
    }
}

fn run_worker(name: &str, shared: &Shared) {
    loop {
        let (command, sticky_error, cancelled) = {
            let mut state = shared.state.lock();
            loop {
                if let Some(command) = state.queue.pop_front() {
                    break (command, state.sticky_error.clone(), state.cancelled);
                }
                if state.closing {
                    return;
                }
                shared.work_available.wait(&mut state);
            }
        };
        // The command (and the buffers it holds) is dropped before it counts as complete, so
        // memory accounting is exact once a synchronize returns.
        let result = catch_unwind(AssertUnwindSafe(|| execute(command, sticky_error.as_ref(), cancelled)))
            .unwrap_or_else(|_| Err(Error::internal(format!("work panicked while executing on {name}"))));
        let mut state = shared.state.lock();
        if let Err(error) = result {
            if state.sticky_error.is_none() {
                tracing::warn!(queue = name, %error, "stream failed; its error is now sticky");
                state.sticky_error = Some(error);
            }
        }
        state.completed += 1;
        shared.progress.notify_all();
    }
}

fn execute(command: Command, sticky_error: Option<&Error>, cancelled: bool) -> Result<()> {
    match command {
        Command::Record(signal) => {
            let carried = sticky_error
                .cloned()
                .or_else(|| cancelled.then(|| Error::internal("the record never ran: its stream was dropped first")));
            signal.complete(carried);
            Ok(())
        }
        // A failed or cancelled stream runs nothing but records.
        _ if sticky_error.is_some() || cancelled => Ok(()),
        Command::Wait(event, signal) => match signal.wait() {
            Some(error) => Err(error.context(format!(
                "dependency failed: event {event:#x} was recorded on a stream that had failed"
            ))),
            None => Ok(()),
        },
        Command::Work(work) => work(),
    }
}

/// One record of an event, completed once by the queue that reaches it.
#[derive(Default)]
struct Signal {
    /// When it completed, and the error of a failed stream it carries.
    outcome: Mutex<Option<(Instant, Option<Error>)>>,
    completed: Condvar,
}

impl Signal {
    fn complete(&self, error: Option<Error>) {
        *self.outcome.lock() = Some((Instant::now(), error));
        self.completed.notify_all();
    }

    /// Blocks until complete; the error it carries, if any.
    fn wait(&self) -> Option<Error> {
        let mut outcome = self.outcome.lock();
        loop {
            if let Some((_, error)) = outcome.as_ref() {
                return error.clone();
            }
            self.completed.wait(&mut outcome);
        }
    }

    fn peek(&self) -> Option<(Instant, Option<Error>)> {
        self.outcome.lock().clone()
    }
}

/// A point in a [`HostQueue`] that the host and other queues wait for; timed by the host clock.
pub struct HostEvent {
    timing: bool,
    latest: Mutex<Option<Arc<Signal>>>,
}

impl HostEvent {
    /// An event never recorded (complete); `timing` lets it measure elapsed time.
    pub fn new(timing: bool) -> HostEvent {
        HostEvent {
            timing,
            latest: Mutex::new(None),
        }
    }

    fn begin_record(&self) -> Arc<Signal> {
        let signal = Arc::new(Signal::default());
        *self.latest.lock() = Some(Arc::clone(&signal));
        signal
    }

    fn latest(&self) -> Option<Arc<Signal>> {
        self.latest.lock().clone()
    }

    /// True when the latest record completed, or none was made; the error a failed stream
    /// passed on through the record otherwise.
    pub fn query(&self) -> Result<bool> {
        match self.latest().map(|signal| signal.peek()) {
            None => Ok(true),
            Some(None) => Ok(false),
            Some(Some((_, Some(error)))) => Err(error),
            Some(Some((_, None))) => Ok(true),
        }
    }

    /// Blocks the calling thread until the latest record completed.
    pub fn synchronize(&self) -> Result<()> {
        match self.latest().and_then(|signal| signal.wait()) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Nanoseconds from `start`'s latest record completing to `end`'s.
    pub fn elapsed_nanoseconds(start: &Object<HostEvent>, end: &Object<HostEvent>) -> Result<u64> {
        let started = completed_at(start, "start")?;
        let ended = completed_at(end, "end")?;
        let elapsed = ended.checked_duration_since(started).ok_or_else(|| {
            Error::invalid_argument(format!(
                "end event {:#x} completed before start event {:#x}",
                end.handle(),
                start.handle()
            ))
        })?;
        Ok(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A driver whose events are host events gets them whole: creating, polling, waiting and
/// timing need nothing from the device.
impl<D: Driver<Event = HostEvent>> DriverEvent<D> for HostEvent {
    fn create(_driver: &D, _device: &Arc<Object<D::Device>>, timing: bool) -> Result<HostEvent> {
        Ok(HostEvent::new(timing))
    }

    fn query(event: &Arc<Object<HostEvent>>) -> Result<bool> {
        HostEvent::query(event)
    }

    fn synchronize(event: &Arc<Object<HostEvent>>) -> Result<()> {
        HostEvent::synchronize(event)
    }

    fn elapsed_time(start: &Arc<Object<HostEvent>>, end: &Arc<Object<HostEvent>>) -> Result<u64> {
        HostEvent::elapsed_nanoseconds(start, end)
    }

    /// When the latest record completed, on the host's monotonic clock: the clock of a
    /// device driven from a host thread, whose `DriverDevice::clock` is
    /// [`ClockSample::host`](crate::ClockSample::host).
    fn timestamp(event: &Arc<Object<HostEvent>>) -> Result<u64> {
        Ok(crate::clock::host_ns_of(completed_at(event, "the")?))
    }
}

fn completed_at(event: &Object<HostEvent>, role: &str) -> Result<Instant> {
    let handle = event.handle();
    if !event.timing {
        return Err(Error::invalid_argument(format!(
            "{role} event {handle:#x} was created without timing; create it with timing to measure elapsed time"
        )));
    }
    let Some(signal) = event.latest() else {
        return Err(Error::invalid_argument(format!(
            "{role} event {handle:#x} was never recorded"
        )));
    };
    match signal.peek() {
        None => Err(Error::invalid_argument(format!(
            "{role} event {handle:#x}: event not yet complete"
        ))),
        Some((_, Some(error))) => Err(error),
        Some((completed_at, None)) => Ok(completed_at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn event(handle: u64, timing: bool) -> Object<HostEvent> {
        Object::new(handle, 0, 0, HostEvent::new(timing))
    }

    #[test]
    fn work_runs_in_order_and_an_error_sticks_and_reaches_waiting_queues() {
        let queue = HostQueue::spawn("test-stream").unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        for step in 0..3 {
            let order = Arc::clone(&order);
            queue
                .enqueue(move || {
                    order.lock().push(step);
                    Ok(())
                })
                .unwrap();
        }
        queue.synchronize().unwrap();
        assert_eq!(*order.lock(), [0, 1, 2]);

        let failed = event(0x40, false);
        queue
            .enqueue(|| Err(Error::kernel_fault("the kernel faulted")))
            .unwrap();
        // The record may be refused (the failure already stuck) or carry the error.
        if queue.record(&failed).is_ok() {
            assert_eq!(failed.synchronize().unwrap_err().kind(), ErrorKind::KernelFault);
        }
        assert_eq!(queue.synchronize().unwrap_err().kind(), ErrorKind::KernelFault);
        assert_eq!(queue.enqueue(|| Ok(())).unwrap_err().kind(), ErrorKind::KernelFault);
        assert!(queue.query().is_err());

        // A record queued behind work that then fails carries the error to its waiters.
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let failing = HostQueue::spawn("test-failing").unwrap();
        failing
            .enqueue(move || {
                let _ = gate.recv();
                Err(Error::new(ErrorKind::DeviceLost, "the device is gone"))
            })
            .unwrap();
        let carrying = event(0x41, false);
        failing.record(&carrying).unwrap();
        let waiter = HostQueue::spawn("test-waiter").unwrap();
        waiter.wait(&carrying).unwrap();
        release.send(()).unwrap();
        let error = waiter.synchronize().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::DeviceLost);
        assert!(error.message().contains("dependency failed: event 0x41"), "{error}");
    }

    #[test]
    fn a_panic_in_queued_work_becomes_the_stream_error() {
        let queue = HostQueue::spawn("test-panics").unwrap();
        queue.enqueue(|| panic!("driver bug")).unwrap();
        let error = queue.synchronize().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Internal);
        assert!(error.message().contains("test-panics"), "{error}");
    }

    #[test]
    fn elapsed_time_needs_timing_events_that_were_recorded_and_completed() {
        let queue = HostQueue::spawn("test-timing").unwrap();
        let (start, end, untimed) = (event(1, true), event(2, true), event(3, false));
        let never = HostEvent::elapsed_nanoseconds(&start, &end).unwrap_err();
        assert!(never.message().contains("never recorded"), "{never}");
        queue.record(&start).unwrap();
        queue
            .enqueue(|| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok(())
            })
            .unwrap();
        queue.record(&end).unwrap();
        queue.record(&untimed).unwrap();
        end.synchronize().unwrap();
        assert!(HostEvent::elapsed_nanoseconds(&start, &end).unwrap() >= 2_000_000);
        let untimed = HostEvent::elapsed_nanoseconds(&start, &untimed).unwrap_err();
        assert!(untimed.message().contains("without timing"), "{untimed}");
        let backwards = HostEvent::elapsed_nanoseconds(&end, &start).unwrap_err();
        assert!(backwards.message().contains("completed before"), "{backwards}");
    }
}

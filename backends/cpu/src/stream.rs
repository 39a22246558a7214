//! Streams: one worker thread per stream, running an in-order queue.
//!
//! Enqueueing validates nothing (the backend did that) and never blocks on the work. The
//! worker pops operations one at a time, runs them without holding the queue lock, and
//! counts them complete. An error while running becomes the stream's sticky error: later
//! data operations are skipped, records still complete (carrying the error), and every later
//! call on the stream returns it.

use crate::event::Signal;
use crate::kernels::PreparedLaunch;
use crate::memory::{Buffer, FillPattern, HostDestination, HostSource};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use xhal_core::{Error, Result};

/// One queued operation, owning (through `Arc`s) everything it touches, so that freeing a
/// handle never frees memory that queued work still uses.
#[derive(Debug)]
pub(crate) enum Operation {
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

/// A stream handle's object.
#[derive(Debug)]
pub(crate) struct Stream {
    id: u64,
    device_index: u32,
    shared: Arc<StreamShared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Stream {
    pub(crate) fn spawn(id: u64, device_index: u32) -> Result<Stream> {
        let shared = Arc::new(StreamShared::default());
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("xhal-cpu-stream-{id:#x}"))
            .spawn(move || run_worker(id, &worker_shared))
            .map_err(|error| {
                Error::internal(format!("could not start the worker thread of stream {id:#x}: {error}"))
            })?;
        tracing::debug!(
            stream = format_args!("{id:#x}"),
            device = device_index,
            "stream created"
        );
        Ok(Stream {
            id,
            device_index,
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    pub(crate) fn device_index(&self) -> u32 {
        self.device_index
    }

    /// The sticky error, if the stream has one, so calls fail before validating their arguments.
    pub(crate) fn check_usable(&self) -> Result<()> {
        let state = self.shared.state.lock();
        self.refuse_if_unusable(&state)
    }

    fn refuse_if_unusable(&self, state: &QueueState) -> Result<()> {
        if let Some(error) = &state.sticky_error {
            return Err(error.clone());
        }
        if state.closing {
            return Err(Error::invalid_handle(format!(
                "stream {:#x} is being destroyed",
                self.id
            )));
        }
        Ok(())
    }

    pub(crate) fn enqueue(&self, operation: Operation) -> Result<()> {
        self.enqueue_with(|| Some(operation))
    }

    /// Builds the operation under the queue lock, so that it is created if and only if it
    /// is queued: an event's record must never exist without the operation that completes it.
    /// `None` enqueues nothing.
    pub(crate) fn enqueue_with(&self, build: impl FnOnce() -> Option<Operation>) -> Result<()> {
        let mut state = self.shared.state.lock();
        self.refuse_if_unusable(&state)?;
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

    /// Stops accepting work and tells the worker to exit once the queue is empty; with
    /// `cancel`, the worker skips what is left and cuts sleeps short. Does not wait.
    pub(crate) fn begin_shutdown(&self, cancel: bool) {
        let mut state = self.shared.state.lock();
        state.closing = true;
        state.cancelled |= cancel;
        self.shared.work_available.notify_all();
        self.shared.interrupt.notify_all();
    }

    /// Waits for the worker thread to exit (after [`begin_shutdown`](Stream::begin_shutdown)).
    pub(crate) fn join(&self) {
        let worker = self.worker.lock().take();
        if let Some(worker) = worker {
            if worker.join().is_err() {
                tracing::error!(stream = format_args!("{:#x}", self.id), "stream worker thread panicked");
            }
        }
    }

    /// Runs everything queued, then stops the worker.
    pub(crate) fn destroy(&self) {
        self.begin_shutdown(false);
        self.join();
        if let Some(error) = &self.shared.state.lock().sticky_error {
            tracing::debug!(stream = format_args!("{:#x}", self.id), %error, "destroyed a failed stream");
        }
    }
}

impl Drop for Stream {
    /// A stream dropped without [`destroy`](Stream::destroy) (the backend going away) must
    /// still not leave its thread behind.
    fn drop(&mut self) {
        self.begin_shutdown(true);
        self.join();
    }
}

fn run_worker(stream_id: u64, shared: &StreamShared) {
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
                "the cpu backend panicked while executing on stream {stream_id:#x}: {}",
                panic_message(panic.as_ref())
            )))
        });
        let mut state = shared.state.lock();
        if let Err(error) = result {
            if state.sticky_error.is_none() {
                tracing::warn!(stream = format_args!("{stream_id:#x}"), %error, "stream failed; its error is now sticky");
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

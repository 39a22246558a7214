//! Streams: one worker thread per stream, running its commands in order.
//!
//! VENDOR: a device with hardware queues replaces the worker with the driver's stream (a
//! `CUstream`, a command queue): enqueue becomes the driver's asynchronous call, and
//! `synchronize`/`query` its wait and poll. What must stay, whatever the device:
//! - enqueueing never waits for the device;
//! - an error found while executing sticks to the stream: later work is skipped, records still
//!   complete (carrying the error, so nothing waiting on them hangs), and every later call on
//!   the stream returns it;
//! - queued work owns what it touches (`Arc`s), so freeing a handle never frees memory in use.

use crate::event::Signal;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;
use xhal_core::{Error, Result};

/// Work for a stream's thread.
pub(crate) enum Command {
    /// A copy, fill or launch, checked at enqueue time.
    Work(Box<dyn FnOnce() -> Result<()> + Send>),
    /// Completes an event's record.
    Record(Arc<Signal>),
    /// Waits for another record (the event's id, for the message when it failed).
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
    /// The backend is going away: what is still queued is skipped.
    cancelled: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work_available: Condvar,
    progress: Condvar,
}

/// A stream handle's object.
pub(crate) struct Stream {
    id: u64,
    shared: Arc<Shared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Stream {
    pub(crate) fn spawn(id: u64) -> Result<Stream> {
        let shared = Arc::new(Shared::default());
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(format!("{}-stream-{id:#x}", crate::BACKEND_NAME))
            .spawn(move || run_worker(id, &worker_shared))
            .map_err(|error| Error::internal(format!("could not start the thread of stream {id:#x}: {error}")))?;
        Ok(Stream {
            id,
            shared,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// The sticky error, so calls on a failed stream fail before checking their arguments.
    pub(crate) fn check_usable(&self) -> Result<()> {
        match &self.shared.state.lock().sticky_error {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    pub(crate) fn enqueue(&self, command: Command) -> Result<()> {
        self.enqueue_with(|| Some(command))
    }

    /// Builds the command under the queue lock, so that an event's record exists if and only
    /// if the command that completes it is queued. `None` enqueues nothing.
    pub(crate) fn enqueue_with(&self, build: impl FnOnce() -> Option<Command>) -> Result<()> {
        let mut state = self.shared.state.lock();
        if let Some(error) = &state.sticky_error {
            return Err(error.clone());
        }
        if state.closing {
            return Err(Error::invalid_handle(format!(
                "stream {:#x} is being destroyed",
                self.id
            )));
        }
        if let Some(command) = build() {
            state.queue.push_back(command);
            state.enqueued += 1;
            self.shared.work_available.notify_one();
        }
        Ok(())
    }

    /// Blocks until everything enqueued has completed; then the sticky error, if any.
    pub(crate) fn synchronize(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        while state.completed < state.enqueued {
            self.shared.progress.wait(&mut state);
        }
        state.sticky_error.clone().map_or(Ok(()), Err)
    }

    /// True when everything enqueued has completed; the sticky error, if any.
    pub(crate) fn query(&self) -> Result<bool> {
        let state = self.shared.state.lock();
        match &state.sticky_error {
            Some(error) => Err(error.clone()),
            None => Ok(state.completed == state.enqueued),
        }
    }

    /// Runs what is queued, then stops the thread.
    pub(crate) fn finish_and_join(&self) {
        self.stop(false);
    }

    /// Skips what is queued (records still complete), then stops the thread.
    pub(crate) fn shut_down(&self) {
        self.stop(true);
    }

    fn stop(&self, cancel: bool) {
        {
            let mut state = self.shared.state.lock();
            state.closing = true;
            state.cancelled |= cancel;
            self.shared.work_available.notify_all();
        }
        if let Some(worker) = self.worker.lock().take() {
            if worker.join().is_err() {
                tracing::error!(stream = format_args!("{:#x}", self.id), "stream thread panicked");
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.stop(true);
    }
}

fn run_worker(stream_id: u64, shared: &Shared) {
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
        // A panic must not cross into the host or kill the thread silently: it becomes the
        // stream's error. The command (and the buffers it holds) is dropped before it counts as
        // complete, so memory accounting is exact once a synchronize returns.
        let result = catch_unwind(AssertUnwindSafe(|| execute(command, sticky_error.as_ref(), cancelled)))
            .unwrap_or_else(|_| {
                Err(Error::internal(format!(
                    "{} panicked while executing on stream {stream_id:#x}",
                    crate::BACKEND_NAME
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

fn execute(command: Command, sticky_error: Option<&Error>, cancelled: bool) -> Result<()> {
    match command {
        Command::Record(signal) => {
            let carried = sticky_error.cloned().or_else(|| {
                cancelled.then(|| Error::internal("the record never ran: the backend was shut down first"))
            });
            signal.complete(carried);
            Ok(())
        }
        // A failed or cancelled stream runs nothing but records.
        _ if sticky_error.is_some() || cancelled => Ok(()),
        Command::Wait(event_id, signal) => match signal.wait() {
            Some(error) => Err(error.context(format!(
                "dependency failed: event {event_id:#x} was recorded on a stream that had failed"
            ))),
            None => Ok(()),
        },
        Command::Work(work) => work(),
    }
}

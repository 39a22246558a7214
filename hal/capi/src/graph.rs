//! Graphs by stream capture: the work an application queues on a stream between
//! `xhal_stream_begin_capture` and `xhal_stream_end_capture` is recorded, not run, and becomes
//! a graph that `xhal_graph_replay` enqueues again as often as wanted (core's graphs: native
//! command lists where the device has them).
//!
//! While a stream captures, copies, fills, launches and event records and waits are recorded
//! (a wait for an event recorded before the capture is done on the host then);
//! everything that would need the captured work to have run (reads, synchronisation, queries)
//! or host bytes that a replay could not read again (writes from host memory) is refused with
//! an error naming the call. A graph holds the memory its work names: a buffer freed after
//! capture stays allocated, for the replays, until the graph is destroyed.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::handles::{self, Object};
use crate::stream::{xhal_stream_t, StreamObject};
use crate::{call, invalid, write_out, xhal_status_t, Result};

/// A captured graph. Opaque; from `xhal_stream_end_capture`.
pub struct xhal_graph_t {
    _private: [u8; 0],
}

pub(crate) struct GraphObject {
    graph: xhal::Graph,
}

/// What a capturing stream records into.
pub(crate) struct Capture {
    pub(crate) builder: xhal::GraphBuilder,
    pub(crate) lane: xhal::GraphStream,
    /// The graph's own event for each application event recorded during the capture (by its
    /// handle): as in CUDA, a record during a capture orders the graph's work and records
    /// nothing at replay, so the application's event may be destroyed after the capture.
    pub(crate) events: std::collections::HashMap<usize, xhal::GraphEvent>,
}

impl Capture {
    /// Records `event` (handle `key`) as a point in the graph.
    pub(crate) fn record(&mut self, key: usize) -> Result<()> {
        let event = *self.events.entry(key).or_insert_with(|| self.builder.event());
        self.builder.record(self.lane, event)
    }

    /// Waits for `event`: its record in this capture, as a dependency inside the graph; or, for
    /// an event recorded before the capture (on another stream), on the host now. Nothing
    /// captured runs before the capture ends, so every replay comes after that record; replays
    /// do not wait for the event's later records, and the event may be destroyed.
    pub(crate) fn wait(&mut self, key: usize, event: &xhal::Event) -> Result<()> {
        match self.events.get(&key) {
            Some(&recorded) => self.builder.wait(self.lane, recorded),
            None => event.synchronize(),
        }
    }
}

/// A stream's capture state: `None` while it runs its work as it comes.
pub(crate) type CaptureState = Mutex<Option<Capture>>;

impl StreamObject {
    /// Runs `record` on the capture when the stream captures (Some of its result), or returns
    /// None for the caller to queue the work itself.
    pub(crate) fn if_capturing<T>(&self, record: impl FnOnce(&mut Capture) -> Result<T>) -> Option<Result<T>> {
        let mut capture = self.capture.lock();
        capture.as_mut().map(record)
    }

    /// An error when the stream captures: `what` needs work to run now, which a capture defers.
    pub(crate) fn refuse_while_capturing(&self, what: &str) -> Result<()> {
        if self.capture.lock().is_some() {
            return Err(invalid(format!(
                "{what} is not allowed on a stream that is capturing a graph: it needs the work queued before it to \
                 have run, and captured work runs only when the graph is replayed; end the capture first \
                 (xhal_stream_end_capture)"
            )));
        }
        Ok(())
    }
}

/// Starts capturing `stream`'s work into a graph: until `xhal_stream_end_capture`, copies,
/// fills, launches and event records and waits queued on it are recorded instead of run, and
/// reads, writes from host memory, synchronisation and queries of it are errors.
#[no_mangle]
pub extern "C" fn xhal_stream_begin_capture(stream: *const xhal_stream_t) -> xhal_status_t {
    call("xhal_stream_begin_capture", || {
        let object = handles::stream(stream as usize, "stream")?;
        let mut capture = object.capture.lock();
        if capture.is_some() {
            return Err(invalid(
                "the stream is already capturing a graph; end that capture first",
            ));
        }
        let mut builder = object.device.graph();
        let lane = builder.stream();
        *capture = Some(Capture {
            builder,
            lane,
            events: Default::default(),
        });
        Ok(())
    })
}

/// Ends `stream`'s capture and returns the graph of what it recorded (checked and ready to
/// replay on any stream of the same device). The stream runs its work as it comes again. A
/// capture that recorded nothing gives a graph that does nothing.
///
/// # Safety
///
/// `graph` points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_end_capture(
    stream: *const xhal_stream_t,
    graph: *mut *mut xhal_graph_t,
) -> xhal_status_t {
    call("xhal_stream_end_capture", || {
        if graph.is_null() {
            return Err(invalid("graph is a null pointer"));
        }
        let object = handles::stream(stream as usize, "stream")?;
        let capture = object
            .capture
            .lock()
            .take()
            .ok_or_else(|| invalid("the stream is not capturing a graph (xhal_stream_begin_capture starts one)"))?;
        let built = capture.builder.build()?;
        let handle = handles::insert(Object::Graph(Arc::new(GraphObject { graph: built })));
        // SAFETY: the caller passes writable storage for a handle (checked not null above).
        unsafe { write_out(graph, handle as *mut xhal_graph_t, "graph") }
    })
}

/// Whether `stream` is capturing a graph (1) or not (0).
///
/// # Safety
///
/// `capturing` points to a writable int.
#[no_mangle]
pub unsafe extern "C" fn xhal_stream_is_capturing(stream: *const xhal_stream_t, capturing: *mut i32) -> xhal_status_t {
    call("xhal_stream_is_capturing", || {
        let object = handles::stream(stream as usize, "stream")?;
        let value = i32::from(object.capture.lock().is_some());
        // SAFETY: the caller passes a writable int.
        unsafe { write_out(capturing, value, "capturing") }
    })
}

/// Enqueues all of `graph`'s work on `stream` (of the graph's device), after the work queued
/// there before; work queued after it waits for all of it. Does not wait for the device.
#[no_mangle]
pub extern "C" fn xhal_graph_replay(graph: *const xhal_graph_t, stream: *const xhal_stream_t) -> xhal_status_t {
    call("xhal_graph_replay", || {
        let graph = handles::graph(graph as usize, "graph")?;
        let stream = handles::stream(stream as usize, "stream")?;
        stream.refuse_while_capturing("replaying a graph")?;
        graph.graph.replay(&stream.stream)
    })
}

/// Whether every part of `graph` replays as the device's native command list (1), or core
/// enqueues some of its operations one by one (0).
///
/// # Safety
///
/// `native` points to a writable int.
#[no_mangle]
pub unsafe extern "C" fn xhal_graph_is_native(graph: *const xhal_graph_t, native: *mut i32) -> xhal_status_t {
    call("xhal_graph_is_native", || {
        let graph = handles::graph(graph as usize, "graph")?;
        // SAFETY: the caller passes a writable int.
        unsafe { write_out(native, i32::from(graph.graph.is_native()), "native") }
    })
}

/// Destroys a graph (null is accepted). Replays already queued finish first; the memory the
/// graph held returns to the allocator once they have.
#[no_mangle]
pub extern "C" fn xhal_graph_destroy(graph: *mut xhal_graph_t) -> xhal_status_t {
    call("xhal_graph_destroy", || {
        handles::remove(graph as usize, "graph", "graph")?;
        Ok(())
    })
}

//! Device spans: each traced stream operation as the device executed it.
//!
//! While a trace is recorded, every operation a stream enqueues is followed by a record of a
//! timing event of the stream's own (pooled). When the stream is next known idle (a
//! synchronize, or a query that finds it idle), one more event, the anchor, is recorded and
//! waited for: the stream is idle, so the anchor completes at once, at a host time known to
//! within half the round trip. Each operation's end is then the anchor's host time minus the
//! device's own elapsed time from the operation's event to the anchor (`event_elapsed_time`,
//! the device's timestamps), and its start the later of the previous operation's end and its
//! own enqueue, as an in-order queue runs it. A device without timing events gets the time
//! the host observed the stream idle as every pending operation's end, marked
//! `host-observed`.

use super::{DeviceClock, FlowPhase, Recorder, Track};
use crate::backend::{Backend, DeviceHandle, EventHandle, Features, StreamHandle};
use crate::device::DeviceShared;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Operations a stream holds for resolution at most; beyond it they are not traced on the
/// device (the host spans still are), so a program that never waits cannot grow the list.
const MAX_PENDING: usize = 1 << 14;

/// One enqueued operation, waiting for the stream to go idle.
struct Pending {
    name: Cow<'static, str>,
    category: &'static str,
    submitted: Instant,
    event: Option<EventHandle>,
    /// A flow from the enqueue (or an event record) that ends where this operation starts.
    flow_in: Option<u64>,
    /// A flow that starts where this operation ends (an event record, to the waits it releases).
    flow_out: Option<u64>,
    args: super::Args,
}

/// What a stream keeps for tracing, for one trace.
pub(crate) struct StreamTrace {
    recorder: Recorder,
    generation: u64,
    device_track: u64,
    stream_track: u64,
    timing: bool,
    pending: VecDeque<Pending>,
    idle_events: Vec<EventHandle>,
    /// When the last resolved operation ended, on the host clock.
    last_end: Option<Instant>,
}

impl StreamTrace {
    /// The stream's trace state for the trace being recorded: made on first use, and made
    /// afresh (its old events released) when another trace began since.
    pub(crate) fn current<'a>(
        slot: &'a mut Option<StreamTrace>,
        device: &DeviceShared,
        stream_serial: u64,
    ) -> Option<&'a mut StreamTrace> {
        let recorder = Recorder::current()?;
        let generation = recorder.generation();
        if slot.as_ref().is_some_and(|trace| trace.generation != generation) {
            if let Some(mut old) = slot.take() {
                old.release(&*device.backend);
            }
        }
        if slot.is_none() {
            let (device_track, stream_track) = (device.id, stream_serial);
            super::name_stream(device_track, &device.label(), stream_track);
            *slot = Some(StreamTrace {
                recorder,
                generation,
                device_track,
                stream_track,
                timing: device.info.features.contains(Features::TIMESTAMPS),
                pending: VecDeque::new(),
                idle_events: Vec::new(),
                last_end: None,
            });
        }
        slot.as_mut()
    }

    fn track(&self) -> Track {
        Track::Stream {
            device: self.device_track,
            stream: self.stream_track,
        }
    }

    fn take_event(&mut self, backend: &dyn Backend, device: DeviceHandle) -> Option<EventHandle> {
        if !self.timing {
            return None;
        }
        if let Some(event) = self.idle_events.pop() {
            return Some(event);
        }
        match backend.event_create(device, true) {
            Ok(event) => Some(event),
            Err(error) => {
                // Traced without device times from here on; the results are unaffected.
                tracing::debug!(%error, "no timing event for the trace; device spans are host-observed");
                self.timing = false;
                None
            }
        }
    }

    /// Notes an operation just enqueued on the stream: records its end event after it, and
    /// starts a flow from the calling thread to where the device will run it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn enqueued(
        &mut self,
        device: &DeviceShared,
        stream: StreamHandle,
        name: Cow<'static, str>,
        category: &'static str,
        args: super::Args,
        flow_in: Option<u64>,
        flow_out: Option<u64>,
    ) {
        if self.pending.len() >= MAX_PENDING {
            return;
        }
        let submitted = Instant::now();
        let flow_in = flow_in.or_else(|| {
            let id = super::new_flow_id();
            self.recorder
                .flow(id, FlowPhase::Begin, self.recorder.thread_track(), submitted);
            Some(id)
        });
        let mut event = self.take_event(&*device.backend, device.handle);
        if let Some(handle) = event {
            if let Err(error) = device.backend.stream_record_event(stream, handle) {
                tracing::debug!(%error, "the trace's event record failed; this operation is host-observed");
                self.idle_events.push(handle);
                event = None;
            }
        }
        self.pending.push_back(Pending {
            name,
            category,
            submitted,
            event,
            flow_in,
            flow_out,
            args,
        });
        // Sampled where the queue doubles, so a long burst costs a few records, not one each.
        if self.pending.len().is_power_of_two() {
            self.queued_counter(self.pending.len());
        }
    }

    fn queued_counter(&self, operations: usize) {
        self.recorder.counter(
            self.device_track,
            Cow::Owned(format!("stream {} queued", self.stream_track)),
            vec![("operations", operations as u64)],
        );
    }

    /// Resolves every pending operation; the stream is known idle (its work all completed).
    pub(crate) fn resolve_idle(&mut self, device: &DeviceShared, stream: StreamHandle) {
        if self.pending.is_empty() {
            return;
        }
        let backend = &*device.backend;
        let observed = Instant::now();
        let anchor = self.anchor(backend, device.handle, stream);
        for pending in std::mem::take(&mut self.pending) {
            let (end, clock) = match (pending.event, anchor) {
                (Some(event), Some((anchor_event, anchor_time, round_trip))) => {
                    match backend.event_elapsed_time(event, anchor_event) {
                        Ok(nanoseconds) => {
                            let end = anchor_time
                                .checked_sub(Duration::from_nanos(nanoseconds))
                                .unwrap_or(anchor_time)
                                .clamp(pending.submitted, anchor_time + round_trip);
                            (end, DeviceClock::Device)
                        }
                        Err(error) => {
                            tracing::debug!(%error, "no device time for a traced operation");
                            (observed, DeviceClock::HostObserved)
                        }
                    }
                }
                _ => (observed, DeviceClock::HostObserved),
            };
            if let Some(event) = pending.event {
                self.idle_events.push(event);
            }
            let start = self
                .last_end
                .map_or(pending.submitted, |last| last.max(pending.submitted))
                .min(end);
            self.last_end = Some(end);
            let track = self.track();
            if let Some(id) = pending.flow_in {
                self.recorder.flow(id, FlowPhase::End, track, start);
            }
            self.recorder
                .device_span(track, pending.name, pending.category, start, end, clock, pending.args);
            if let Some(id) = pending.flow_out {
                self.recorder.flow(id, FlowPhase::Begin, track, end);
            }
        }
        if let Some((anchor_event, _, _)) = anchor {
            self.idle_events.push(anchor_event);
        }
        self.queued_counter(0);
    }

    /// Records an event on the idle stream and waits for it: its host time, and how long the
    /// round trip took (the uncertainty of that time).
    fn anchor(
        &mut self,
        backend: &dyn Backend,
        device: DeviceHandle,
        stream: StreamHandle,
    ) -> Option<(EventHandle, Instant, Duration)> {
        let event = self.take_event(backend, device)?;
        let before = Instant::now();
        let recorded = backend
            .stream_record_event(stream, event)
            .and_then(|()| backend.event_synchronize(event));
        let after = Instant::now();
        if let Err(error) = recorded {
            tracing::debug!(%error, "the trace's anchor event failed; spans are host-observed");
            self.idle_events.push(event);
            return None;
        }
        let round_trip = after - before;
        Some((event, before + round_trip / 2, round_trip / 2))
    }

    /// Destroys the stream's events: the stream is going, or another trace began.
    pub(crate) fn release(&mut self, backend: &dyn Backend) {
        for pending in self.pending.drain(..) {
            if let Some(event) = pending.event {
                backend.event_destroy(event);
            }
        }
        for event in self.idle_events.drain(..) {
            backend.event_destroy(event);
        }
    }
}

/// Memory counters of a device after an allocation or a release.
pub(crate) fn memory_counter(device: &DeviceShared) {
    if super::current_generation().is_none() {
        return;
    }
    let stats = device.allocator.stats();
    super::counter(
        device.id,
        Cow::Borrowed("memory"),
        vec![("allocated", stats.allocated), ("reserved", stats.reserved)],
    );
}

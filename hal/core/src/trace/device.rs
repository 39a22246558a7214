//! Device spans: each traced stream operation as the device executed it.
//!
//! While a trace is recorded, every operation a stream enqueues is followed by a record of a
//! timing event of the stream's own (pooled). When the stream is next known idle (a
//! synchronize, or a query that finds it idle), each operation's end is read from its event,
//! in one of two ways:
//!
//! - **Device timestamps** (ABI 1.3 `device_clock` and `event_timestamp`): the event's
//!   completion on the device's own clock, placed on the host's clock by one calibration read
//!   at resolution (`host = device + (host_ns - device_ns)`, good to the `uncertainty_ns` the
//!   device reports). Nothing is clamped: where the device's times disagree with the host's,
//!   the trace shows it, and the conformance suite checks that they do not.
//! - **Elapsed from an anchor** (a plugin without the 1.3 entries): one more event, the
//!   anchor, is recorded on the idle stream and waited for, so it completes at a host time
//!   known to within half the round trip; each end is the anchor's time minus the device's
//!   elapsed time from the operation's event to the anchor, kept inside the operation's
//!   submission window. Marked `device-elapsed`.
//!
//! An operation's start is the later of the previous operation's end and its own submission
//! (taken just before the enqueue call): the earliest an in-order queue can start it. A device
//! without timing events gets the time the host observed the stream idle as every pending
//! operation's end, marked `host-observed`.

use super::{DeviceClock, FlowPhase, Recorder, Track};
use crate::backend::{Backend, DeviceHandle, EventHandle, Features, StreamHandle};
use crate::device::DeviceShared;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Operations a stream holds for resolution at most; beyond it they are not traced on the
/// device (the host spans still are), so a program that never waits cannot grow the list.
const MAX_PENDING: usize = 1 << 14;

/// How a stream's trace reads its operations' device times.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Timing {
    /// The device's absolute timestamps, calibrated against the host clock.
    Timestamps,
    /// Elapsed device time back from an anchor event.
    Elapsed,
    /// No timing events: the host-observed idle time.
    None,
}

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
    /// The enqueuing thread's correlation id, for profilers (activity.rs).
    correlation: u64,
}

/// What a stream keeps for tracing, for one trace.
pub(crate) struct StreamTrace {
    recorder: Recorder,
    generation: u64,
    device_label: String,
    device_track: u64,
    stream_track: u64,
    timing: Timing,
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
                device_label: device.label(),
                device_track,
                stream_track,
                timing: Self::timing_of(device),
                pending: VecDeque::new(),
                idle_events: Vec::new(),
                last_end: None,
            });
        }
        slot.as_mut()
    }

    /// Timestamps where the device has timing events. Whether it also has a clock is learnt
    /// at the first resolution, which reads the clock anyway and falls back to an anchor when
    /// it cannot: asking first would cost a calibration (round trips on most devices) per
    /// stream and trace.
    fn timing_of(device: &DeviceShared) -> Timing {
        if device.info.features.contains(Features::TIMESTAMPS) {
            Timing::Timestamps
        } else {
            Timing::None
        }
    }

    fn track(&self) -> Track {
        Track::Stream {
            device: self.device_track,
            stream: self.stream_track,
        }
    }

    fn take_event(&mut self, backend: &dyn Backend, device: DeviceHandle) -> Option<EventHandle> {
        if self.timing == Timing::None {
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
                self.timing = Timing::None;
                None
            }
        }
    }

    /// Notes an operation just enqueued on the stream (`submitted` just before the call):
    /// records its end event after it, and starts a flow from the calling thread to where the
    /// device will run it, unless `flows` brings one in (a wait, from its record).
    pub(crate) fn enqueued(
        &mut self,
        device: &DeviceShared,
        stream: StreamHandle,
        (name, category): (Cow<'static, str>, &'static str),
        submitted: Instant,
        args: super::Args,
        (flow_in, flow_out): (Option<u64>, Option<u64>),
    ) {
        if self.pending.len() >= MAX_PENDING {
            return;
        }
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
            correlation: super::activity::correlation(),
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
        let observed = Instant::now();
        let pending = std::mem::take(&mut self.pending);
        let ends = match self.timing {
            Timing::Timestamps => match Self::ends_from_timestamps(device, &pending) {
                Ok(ends) => ends,
                Err(error) => {
                    // Timed back from an anchor from here on; the results are unaffected.
                    tracing::debug!(%error, "no device timestamps; device spans are timed back from an anchor");
                    self.timing = Timing::Elapsed;
                    self.ends_from_anchor(device, stream, &pending, observed)
                }
            },
            Timing::Elapsed => self.ends_from_anchor(device, stream, &pending, observed),
            Timing::None => vec![(observed, DeviceClock::HostObserved); pending.len()],
        };
        for (pending, (end, clock)) in pending.into_iter().zip(ends) {
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
            super::activity::record(|| super::Activity {
                name: pending.name.clone(),
                category: pending.category,
                device: self.device_label.clone(),
                stream: self.stream_track,
                start_unix_ns: self.recorder.unix_ns(start),
                end_unix_ns: self.recorder.unix_ns(end),
                correlation: pending.correlation,
            });
            self.recorder
                .device_span(track, pending.name, pending.category, start, end, clock, pending.args);
            if let Some(id) = pending.flow_out {
                self.recorder.flow(id, FlowPhase::Begin, track, end);
            }
        }
        self.queued_counter(0);
    }

    /// Each operation's end from its event's device timestamp, placed on the host clock by one
    /// calibration read. An operation without an event (its record failed) ends with the one
    /// before it.
    fn ends_from_timestamps(
        device: &DeviceShared,
        pending: &VecDeque<Pending>,
    ) -> crate::Result<Vec<(Instant, DeviceClock)>> {
        let backend = &*device.backend;
        let clock = backend.device_clock(device.handle)?;
        let mut ends = Vec::with_capacity(pending.len());
        let mut previous = None;
        for operation in pending {
            let end = match operation.event {
                Some(event) => clock.to_instant(backend.event_timestamp(event)?),
                None => previous.unwrap_or(operation.submitted),
            };
            previous = Some(end);
            ends.push((end, DeviceClock::Device));
        }
        Ok(ends)
    }

    /// Each operation's end as the anchor's host time minus the device's elapsed time from the
    /// operation's event to the anchor, kept inside the operation's submission window.
    fn ends_from_anchor(
        &mut self,
        device: &DeviceShared,
        stream: StreamHandle,
        pending: &VecDeque<Pending>,
        observed: Instant,
    ) -> Vec<(Instant, DeviceClock)> {
        let backend = &*device.backend;
        let anchor = self.anchor(backend, device.handle, stream);
        let ends = pending
            .iter()
            .map(|operation| match (operation.event, anchor) {
                (Some(event), Some((anchor_event, anchor_time, round_trip))) => {
                    match backend.event_elapsed_time(event, anchor_event) {
                        Ok(nanoseconds) => {
                            let end = anchor_time
                                .checked_sub(Duration::from_nanos(nanoseconds))
                                .unwrap_or(anchor_time)
                                .clamp(operation.submitted, anchor_time + round_trip);
                            (end, DeviceClock::Elapsed)
                        }
                        Err(error) => {
                            tracing::debug!(%error, "no device time for a traced operation");
                            (observed, DeviceClock::HostObserved)
                        }
                    }
                }
                _ => (observed, DeviceClock::HostObserved),
            })
            .collect();
        if let Some((anchor_event, _, _)) = anchor {
            self.idle_events.push(anchor_event);
        }
        ends
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

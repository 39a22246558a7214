//! Command lists (ABI 1.4) as Level Zero regular command lists, run from a stream's immediate
//! command list with `zeCommandListImmediateAppendCommandListsExp`.
//!
//! A list's copies, fills and launches are appended once to a regular command list
//! (`zeCommandListCreate` on the compute queue group the streams use), in order:
//! `ZE_COMMAND_LIST_FLAG_IN_ORDER` where the driver's API is 1.9 or later, as for the streams'
//! immediate lists, otherwise a barrier between every two commands. The list is then closed. A
//! submission is one call, `zeCommandListImmediateAppendCommandListsExp` on the stream's
//! immediate list (the `ZE_experimental_immediate_command_list_append` extension): the
//! regular list runs as one more command of the stream, after the work before it and before
//! the work after it, with no event between them, and the stream's synchronize and events
//! cover it as they cover every other command.
//!
//! That is the cheaper of the two ways Level Zero offers. The other, a command queue of the
//! stream's own (`zeCommandQueueExecuteCommandLists`), is ordered with the immediate list only
//! through events: a barrier on the immediate list signalling one the regular list waits for,
//! and another the stream's next work waits for, each reset between submissions, so one extra
//! command and two events per submission, and a second queue per stream. Drivers without the
//! extension (or loaders older than API 1.9, which lack its entry point) get no native lists:
//! core replays graphs operation by operation there, which is correct everywhere.
//!
//! Level Zero takes a launch's arguments when the launch is appended ("the argument values
//! will be used when a zeCommandListAppendLaunchKernel variant is called"), so a launch sets
//! its kernel's arguments and is appended under the kernel's lock, as on a stream, and one
//! kernel serves every launch of it in any list.
//!
//! The driver may change a regular list when it runs it (`zeCommandQueueExecuteCommandLists`:
//! "the implementation is allowed to modify the contents of the command list for submission"),
//! so a list is not submitted again while the device may still run it. A list therefore keeps
//! recordings: a regular list, an event its submissions signal when they complete, and, for
//! each copy between overlapping ranges (which Level Zero refuses), a bounce buffer of its own,
//! since its submissions may run alongside another recording's on another stream. A submission
//! takes the first recording whose event says it is idle, and records another when every one
//! may still run. It never waits: a list holds as many recordings as it has submissions
//! outstanding, and a replay loop keeps the device busy, where oneAPI's own adapter waits on
//! the host for the previous submission of a command buffer before each next one. Recordings a
//! submission finds idle beyond [`SPARE_RECORDINGS`] are destroyed, so what a burst of
//! overlapping submissions took is given back once they complete. A submission queries the
//! event of each recording in flight, one query per outstanding submission.
//!
//! An update records the list again (`zeCommandListReset`, then every command with the new
//! arguments) in the recordings it keeps, at most [`SPARE_RECORDINGS`] and one: the adapter has
//! waited for every submission first, and a recording whose event is somehow still unsignalled
//! is left to the submission holding it, never reset. An update that fails keeps the previous
//! launch and no recording; the next submission records one. Each submission holds its
//! recording, and the recording holds the buffers, kernels and fill patterns it names, until
//! the stream sees the submission complete, so a list dropped with submissions queued stays
//! valid for them.

use crate::device::Gpu;
use crate::ffi::{self, CommandListHandle};
use crate::memory::{host_size, DeviceBuffer, HostStaging};
use crate::stream::{
    append_copy, append_launch, check_launch, describe_launch, launch_holds, set_arguments, KeepAlive, Stream, ZeEvent,
};
use crate::LevelZeroDriver;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{BufferView, Command, CopyOverlap, DriverCommandList, Error, Object, OwnedLaunch, Result};

/// How many idle recordings a list keeps besides the one a submission takes, for the
/// submissions after it; an update records at most this many plus one. More are destroyed as
/// submissions find them idle, so a list that many submissions overlapped once does not hold
/// that many copies of itself ever after.
pub(crate) const SPARE_RECORDINGS: usize = 4;

/// A command as the list keeps it, to record again after an update.
enum Step {
    Copy {
        source: Arc<Object<DeviceBuffer>>,
        source_offset: u64,
        destination: Arc<Object<DeviceBuffer>>,
        destination_offset: u64,
        bytes: usize,
        overlap: CopyOverlap,
    },
    Fill {
        buffer: Arc<Object<DeviceBuffer>>,
        offset: u64,
        bytes: usize,
        /// The pattern, in host memory the device reads when the fill runs.
        pattern: Arc<HostStaging>,
    },
    Launch(OwnedLaunch<LevelZeroDriver>),
}

fn owned(launch: &OwnedLaunch<LevelZeroDriver>) -> OwnedLaunch<LevelZeroDriver> {
    OwnedLaunch {
        kernel: Arc::clone(&launch.kernel),
        workgroups: launch.workgroups,
        buffers: launch
            .buffers
            .iter()
            .map(|view| BufferView {
                buffer: Arc::clone(&view.buffer),
                offset: view.offset,
                size: view.size,
            })
            .collect(),
        scalars: launch.scalars.clone(),
    }
}

/// The sizes of the buffers the overlapping copies go through on their way, one per such copy,
/// in order: Level Zero refuses overlapping ranges.
fn bounce_sizes(steps: &[Step]) -> impl Iterator<Item = usize> + '_ {
    steps.iter().filter_map(|step| match step {
        Step::Copy {
            overlap: CopyOverlap::Overlapping,
            bytes,
            ..
        } => Some(*bytes),
        _ => None,
    })
}

fn step(gpu: &Arc<Gpu>, command: &Command<LevelZeroDriver>) -> Result<Step> {
    Ok(match command {
        Command::Copy {
            source,
            source_offset,
            destination,
            destination_offset,
            size,
        } => Step::Copy {
            source: Arc::clone(source),
            source_offset: *source_offset,
            destination: Arc::clone(destination),
            destination_offset: *destination_offset,
            bytes: host_size(*size, "copy size")?,
            overlap: CopyOverlap::of(source, *source_offset, destination, *destination_offset, *size),
        },
        Command::Fill {
            buffer,
            offset,
            size,
            pattern,
        } => {
            let staging = HostStaging::new(gpu, pattern.len())?;
            // SAFETY: the staging memory holds the pattern's length.
            unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), staging.pointer, pattern.len()) };
            Step::Fill {
                buffer: Arc::clone(buffer),
                offset: *offset,
                bytes: host_size(*size, "fill size")?,
                pattern: Arc::new(staging),
            }
        }
        Command::Launch(launch) => {
            check_launch(&launch.borrowed())?;
            Step::Launch(owned(launch))
        }
    })
}

/// One regular command list holding every step, the event its submissions signal, and the
/// buffers its overlapping copies go through.
struct Recording {
    gpu: Arc<Gpu>,
    list: CommandListHandle,
    /// Signalled when a submission of the list completes; reset before the next one.
    done: ZeEvent,
    /// One per overlapping copy, in order, this recording's own: submissions of other
    /// recordings may run at the same time, on other streams.
    bounces: Vec<DeviceBuffer>,
    /// What the recorded commands name: buffers, kernels, fill patterns.
    holds: Mutex<Vec<KeepAlive>>,
}

// A regular list may be used from any thread; this backend appends to it and submits it under
// the command list's lock only.
// SAFETY: see above.
unsafe impl Send for Recording {}
// SAFETY: see above.
unsafe impl Sync for Recording {}

impl Drop for Recording {
    fn drop(&mut self) {
        // SAFETY: every submission holds the recording until the stream saw it complete, so
        // the device no longer references the list; the memory it names (the bounce buffers
        // too) goes after it.
        unsafe { (self.gpu.api().command_list_destroy)(self.list) };
    }
}

/// Appends commands to an open regular list, a barrier between every two where the list is
/// not in order.
struct Recorder<'a> {
    gpu: &'a Gpu,
    list: CommandListHandle,
    in_order: bool,
    appended: usize,
}

impl Recorder<'_> {
    fn append(
        &mut self,
        doing: impl FnOnce() -> String,
        call: impl FnOnce(CommandListHandle) -> (&'static str, ffi::ZeResult),
    ) -> Result<()> {
        let name = self.gpu.name();
        if !self.in_order && self.appended > 0 {
            // SAFETY: a barrier with no events on an open list.
            let code = unsafe {
                (self.gpu.api().command_list_append_barrier)(self.list, std::ptr::null_mut(), 0, std::ptr::null_mut())
            };
            ffi::check(code, "zeCommandListAppendBarrier", || {
                format!("ordering the commands of a command list on {name}")
            })?;
        }
        let (function, code) = call(self.list);
        ffi::check(code, function, || {
            format!("recording a command list on {name}: {}", doing())
        })?;
        self.appended += 1;
        Ok(())
    }
}

impl Recording {
    /// A new regular list on the streams' compute queue group, its event and its bounce
    /// buffers, with `steps` recorded.
    fn new(gpu: &Arc<Gpu>, steps: &[Step]) -> Result<Recording> {
        let adapter = gpu.adapter();
        let desc = ffi::CommandListDesc {
            stype: ffi::ZE_STRUCTURE_TYPE_COMMAND_LIST_DESC,
            p_next: std::ptr::null(),
            command_queue_group_ordinal: adapter.compute_ordinal,
            flags: if adapter.in_order_lists {
                ffi::ZE_COMMAND_LIST_FLAG_IN_ORDER
            } else {
                0
            },
        };
        let done = ZeEvent::new(gpu, false)?;
        let bounces = bounce_sizes(steps)
            .map(|bytes| DeviceBuffer::new(gpu, bytes as u64))
            .collect::<Result<Vec<_>>>()?;
        let mut list = std::ptr::null_mut();
        // SAFETY: a live context and its device, a filled descriptor.
        let code = unsafe { (gpu.api().command_list_create)(gpu.context, adapter.device, &desc, &mut list) };
        ffi::check(code, "zeCommandListCreate", || {
            format!("creating a command list on {}", gpu.name())
        })?;
        if list.is_null() {
            return Err(Error::internal(format!(
                "zeCommandListCreate returned no command list on {}",
                gpu.name()
            )));
        }
        let recording = Recording {
            gpu: Arc::clone(gpu),
            list,
            done,
            bounces,
            holds: Mutex::new(Vec::new()),
        };
        recording.record(steps)?;
        Ok(recording)
    }

    /// Appends every step to the list, which is open (new or reset), closes it, and holds what
    /// the steps name.
    fn record(&self, steps: &[Step]) -> Result<()> {
        let api = self.gpu.api();
        let mut recorder = Recorder {
            gpu: &self.gpu,
            list: self.list,
            in_order: self.gpu.adapter().in_order_lists,
            appended: 0,
        };
        let mut holds: Vec<KeepAlive> = Vec::with_capacity(steps.len() * 2);
        let mut bounces = self.bounces.iter();
        for (index, step) in steps.iter().enumerate() {
            match step {
                Step::Copy {
                    source,
                    source_offset,
                    destination,
                    destination_offset,
                    bytes,
                    overlap,
                } => {
                    let (from, to) = (source.address(*source_offset), destination.address(*destination_offset));
                    let mut copy = |to: *mut std::ffi::c_void, from: *mut std::ffi::c_void| {
                        recorder.append(
                            || format!("command {index}, a copy of {bytes} bytes"),
                            |list| {
                                // SAFETY: device memory of this context, in range (the adapter
                                // checked), not overlapping; the recording holds both buffers.
                                unsafe { append_copy(api, list, to, from.cast_const(), *bytes) }
                            },
                        )
                    };
                    match overlap {
                        // A copy onto itself changes nothing.
                        CopyOverlap::SameRange => {}
                        CopyOverlap::Overlapping => {
                            // The steps' copies never change (an update replaces a launch), so
                            // there is a bounce buffer for each.
                            let Some(bounce) = bounces.next() else {
                                return Err(Error::internal(format!(
                                    "command {index} of a Level Zero command list has no bounce buffer"
                                )));
                            };
                            copy(bounce.address(0), from)?;
                            copy(to, bounce.address(0))?;
                        }
                        CopyOverlap::Disjoint => copy(to, from)?,
                    }
                    holds.push(Box::new(Arc::clone(source)));
                    holds.push(Box::new(Arc::clone(destination)));
                }
                Step::Fill {
                    buffer,
                    offset,
                    bytes,
                    pattern,
                } => {
                    let (target, from, length) = (buffer.address(*offset), pattern.pointer, pattern.size);
                    recorder.append(
                        || format!("command {index}, a fill of {bytes} bytes with a {length}-byte pattern"),
                        |list| {
                            // SAFETY: device memory of this context, in range and aligned to the
                            // pattern (the adapter checked); the recording holds the buffer and
                            // the pattern, which the device reads when the fill runs.
                            let code = unsafe {
                                (api.command_list_append_memory_fill)(
                                    list,
                                    target,
                                    from.cast_const().cast(),
                                    length,
                                    *bytes,
                                    std::ptr::null_mut(),
                                    0,
                                    std::ptr::null_mut(),
                                )
                            };
                            ("zeCommandListAppendMemoryFill", code)
                        },
                    )?;
                    holds.push(Box::new(Arc::clone(buffer)));
                    holds.push(Box::new(Arc::clone(pattern)));
                }
                Step::Launch(launch) => {
                    let launch = launch.borrowed();
                    let native = launch.kernel.kernel.lock();
                    set_arguments(*native, &launch)?;
                    let workgroups = launch.workgroups;
                    recorder.append(
                        || format!("command {index}, {}", describe_launch(&launch)),
                        |list| {
                            // SAFETY: every argument was set just above, under the kernel's
                            // lock, which is held until the launch is appended.
                            unsafe { append_launch(api, list, *native, workgroups) }
                        },
                    )?;
                    holds.extend(launch_holds(&launch));
                }
            }
        }
        // SAFETY: an open list, appended to by this thread only (the command list's lock).
        let code = unsafe { (api.command_list_close)(self.list) };
        ffi::check(code, "zeCommandListClose", || {
            format!("closing a command list on {}", self.gpu.name())
        })?;
        *self.holds.lock() = holds;
        Ok(())
    }

    /// Empties the list for recording again; the device no longer references it.
    fn reset(&self) -> Result<()> {
        // SAFETY: a list no submission still runs (the caller waited for its event).
        let code = unsafe { (self.gpu.api().command_list_reset)(self.list) };
        ffi::check(code, "zeCommandListReset", || {
            format!("resetting a command list on {}", self.gpu.name())
        })
    }
}

/// A recording and where its submissions stand.
struct Slot {
    recording: Arc<Recording>,
    /// Submitted, and not yet seen complete. An idle slot's event is unsignalled.
    in_flight: bool,
}

/// Where each recording stands, as a submission finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Never submitted, or its submission failed.
    Idle,
    /// Its latest submission completed.
    Completed,
    /// Its latest submission may still run.
    Running,
}

/// What a submission does with the recordings it finds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Choice {
    /// The recording to submit, idle or completed; `None`: record another.
    pub(crate) take: Option<usize>,
    /// Idle or completed recordings beyond the spares, to destroy: ascending, each after `take`.
    pub(crate) release: Vec<usize>,
}

/// The first recording that is idle or completed, else a new one: never a wait. Of the other
/// idle or completed recordings, the first [`SPARE_RECORDINGS`] stay for later submissions
/// and the rest go.
pub(crate) fn choose(slots: &[SlotState]) -> Choice {
    let mut free = slots
        .iter()
        .enumerate()
        .filter(|(_, state)| **state != SlotState::Running)
        .map(|(index, _)| index);
    let take = free.next();
    Choice {
        take,
        release: free.skip(SPARE_RECORDINGS).collect(),
    }
}

struct State {
    steps: Vec<Step>,
    slots: Vec<Slot>,
}

/// A Level Zero command list: its commands, and the regular lists recorded from them.
pub(crate) struct CommandList {
    gpu: Arc<Gpu>,
    state: Mutex<State>,
}

impl CommandList {
    /// Checks `commands` and records them once, so that a refused command fails the build.
    pub(crate) fn build(gpu: &Arc<Gpu>, commands: &[Command<LevelZeroDriver>]) -> Result<CommandList> {
        let steps = commands
            .iter()
            .map(|command| step(gpu, command))
            .collect::<Result<Vec<_>>>()?;
        let recording = Recording::new(gpu, &steps)?;
        Ok(CommandList {
            gpu: Arc::clone(gpu),
            state: Mutex::new(State {
                steps,
                slots: vec![Slot {
                    recording: Arc::new(recording),
                    in_flight: false,
                }],
            }),
        })
    }

    /// The index of an idle recording to submit: one whose submission is seen complete, or one
    /// recorded now. Recordings idle beyond the spares are destroyed (once the streams that ran
    /// them let go of them).
    fn idle_slot(&self, state: &mut State) -> Result<usize> {
        let mut states = Vec::with_capacity(state.slots.len());
        for slot in &state.slots {
            states.push(match slot.in_flight {
                false => SlotState::Idle,
                true if slot.recording.done.is_signalled()? => SlotState::Completed,
                true => SlotState::Running,
            });
        }
        let choice = choose(&states);
        for &index in choice.release.iter().rev() {
            state.slots.remove(index);
        }
        let Some(index) = choice.take else {
            let recording = Recording::new(&self.gpu, &state.steps)?;
            state.slots.push(Slot {
                recording: Arc::new(recording),
                in_flight: false,
            });
            return Ok(state.slots.len() - 1);
        };
        let slot = &mut state.slots[index];
        if slot.in_flight {
            slot.recording.done.reset()?;
            slot.in_flight = false;
        }
        Ok(index)
    }
}

impl DriverCommandList<LevelZeroDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        let Some(append_lists) = self.gpu.api().command_list_immediate_append_command_lists_exp else {
            return Err(Error::internal(format!(
                "a command list was built on {}, whose Level Zero loader has no \
                 zeCommandListImmediateAppendCommandListsExp",
                self.gpu.name()
            )));
        };
        let mut state = self.state.lock();
        let index = self.idle_slot(&mut state)?;
        let slot = &mut state.slots[index];
        slot.in_flight = true;
        let recording = Arc::clone(&slot.recording);
        // A stream that had already failed refuses the append without making it.
        let failed_before = stream.failed();
        let (list, done) = (recording.list, recording.done.event);
        let submitted = stream.enqueue(
            || format!("submitting a command list on {}", self.gpu.name()),
            |immediate| {
                let mut lists = [list];
                // SAFETY: a closed regular list of this context and the streams' queue group,
                // which no other submission runs (its event said so), from a live immediate list;
                // the submission holds the recording, and so the list and its event, until the
                // stream sees it complete.
                let code = unsafe { append_lists(immediate, 1, lists.as_mut_ptr(), done, 0, std::ptr::null_mut()) };
                ("zeCommandListImmediateAppendCommandListsExp", code)
            },
            vec![Box::new(Arc::clone(&recording))],
        );
        if submitted.is_err() && (failed_before || !stream.failed()) {
            // Refused before it reached the device: nothing will signal its event, and the
            // recording is idle again. A failure that stuck to the stream may have left the
            // list running, so that recording is never reused.
            state.slots[index].in_flight = false;
        }
        submitted.map(drop)
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<LevelZeroDriver>) -> Result<()> {
        check_launch(&launch.borrowed())?;
        let mut state = self.state.lock();
        let state = &mut *state;
        let Some(step) = state.steps.get_mut(index) else {
            return Err(Error::internal(format!(
                "a Level Zero command list has no command {index}"
            )));
        };
        if !matches!(step, Step::Launch(_)) {
            return Err(Error::internal(format!(
                "command {index} of a Level Zero command list is not a launch"
            )));
        }
        let previous = std::mem::replace(step, Step::Launch(owned(launch)));
        let recorded = (|| {
            let mut kept = Vec::new();
            for slot in std::mem::take(&mut state.slots) {
                if kept.len() > SPARE_RECORDINGS {
                    break;
                }
                if slot.in_flight {
                    // The adapter waited for every stream the list was submitted to, so the
                    // event is signalled. Were it not, the device might still run the list: it
                    // is left to the submission that holds it, never reset.
                    if !slot.recording.done.is_signalled()? {
                        continue;
                    }
                    slot.recording.done.reset()?;
                }
                slot.recording.reset()?;
                slot.recording.record(&state.steps)?;
                kept.push(Slot {
                    recording: slot.recording,
                    in_flight: false,
                });
            }
            if kept.is_empty() {
                kept.push(Slot {
                    recording: Arc::new(Recording::new(&self.gpu, &state.steps)?),
                    in_flight: false,
                });
            }
            Ok(kept)
        })();
        match recorded {
            Ok(kept) => {
                state.slots = kept;
                Ok(())
            }
            Err(error) => {
                // The previous launch stays, as the adapter keeps it; the recordings, reset or
                // half recorded, are gone, and the next submission records one again.
                state.steps[index] = previous;
                Err(error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use SlotState::{Completed, Idle, Running};

    #[test]
    fn a_submission_takes_the_first_idle_or_completed_recording() {
        assert_eq!(
            choose(&[Idle]),
            Choice {
                take: Some(0),
                release: vec![]
            }
        );
        assert_eq!(choose(&[Running, Completed, Idle]).take, Some(1));
    }

    #[test]
    fn a_submission_records_again_whenever_every_recording_may_run() {
        assert_eq!(choose(&[]).take, None, "after a failed update");
        for count in [1, 8, 100] {
            let running = vec![Running; count];
            assert_eq!(
                choose(&running),
                Choice {
                    take: None,
                    release: vec![]
                },
                "{count} running: no wait, however many"
            );
        }
    }

    #[test]
    fn idle_recordings_beyond_the_spares_go() {
        let mut slots = vec![Running, Completed];
        slots.extend(vec![Idle; SPARE_RECORDINGS]);
        slots.extend([Running, Completed, Idle]);
        let choice = choose(&slots);
        assert_eq!(choice.take, Some(1));
        assert_eq!(
            choice.release,
            vec![SPARE_RECORDINGS + 3, SPARE_RECORDINGS + 4],
            "the recording taken and {SPARE_RECORDINGS} spares stay; running ones are never released"
        );
    }
}

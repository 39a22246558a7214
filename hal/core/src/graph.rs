//! Graphs: stream work recorded once, checked once, replayed many times.
//!
//! A [`GraphBuilder`] records writes, copies, fills, launches and event records and waits on
//! one or more of its streams ([`GraphStream`]), with the dependencies the events make.
//! [`GraphBuilder::build`] turns it into a [`Graph`]: every argument was checked as it was
//! recorded, write payloads and uniform values are staged in device memory the graph owns,
//! and each run of copies, fills and launches on one stream becomes the device's native
//! command list where the plugin has them (ABI 1.4). [`Graph::replay`] enqueues it all on a
//! stream; a plugin without command lists gets the same operations one by one, already
//! checked, so applications use one API everywhere.
//!
//! The first stream of a graph is the stream it is replayed on. The others are streams the
//! graph owns: a replay forks them from the replay stream with an event and joins them back
//! before the replay's end, so work queued on the replay stream after a replay waits for all
//! of it.

use crate::backend::{BufferArg, BufferHandle, CommandListHandle, KernelHandle, LaunchArgs};
use crate::buffer::{Buffer, BufferMemory, BufferSlice, QueuedUse};
use crate::device::DeviceShared;
use crate::error::{Error, ErrorKind, Result};
use crate::event::Event;
use crate::module::{BufferBinding, Kernel, Launch};
use crate::stream::Stream;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Something a graph keeps alive while it exists: a buffer's memory, a kernel, an event.
type Held = Arc<dyn Send + Sync>;

static NEXT_GRAPH_ID: AtomicU64 = AtomicU64::new(1);

/// Alignment of the values a graph stages in its own memory: WebGPU's uniform offset
/// alignment, which covers every backend's buffer offset alignment for views.
const STAGING_ALIGNMENT: u64 = 256;

/// One of a graph's streams, as [`GraphBuilder::stream`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphStream {
    graph: u64,
    lane: usize,
}

/// An event inside a graph, recorded on one of its streams and waited for on others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphEvent {
    graph: u64,
    index: usize,
}

/// A launch recorded in a graph, whose arguments [`Graph::update_launch`] can replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchNode {
    graph: u64,
    index: usize,
}

/// Where the bytes a recorded command names live: memory the application owns, or the
/// graph's staging buffer (write payloads, uniform values), known only once it is built.
#[derive(Debug, Clone, Copy)]
enum Place {
    Memory(BufferHandle),
    Staged,
}

/// A recorded copy, fill or launch, with the handles the backend takes.
#[derive(Debug, Clone)]
enum Command {
    Copy {
        source: Place,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    },
    Fill {
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: Vec<u8>,
    },
    Launch {
        kernel: KernelHandle,
        workgroups: [u32; 3],
        /// A staged argument names the staging buffer by handle 0 until the graph is built.
        buffers: Vec<BufferArg>,
        staged: Vec<bool>,
        scalars: Vec<u8>,
        node: usize,
    },
}

/// One recorded step of one stream of the graph.
enum Step {
    Command(Command),
    Record(usize),
    Wait(usize),
    RecordEvent(Event),
    WaitEvent(Event),
}

/// What the graph knows of a recorded launch, to check and apply updates.
struct LaunchRecord {
    kernel: Kernel,
    /// Per argument: a view of the application's memory (its size), or a staged value (its
    /// offset in the staging buffer and its size).
    arguments: Vec<ArgumentShape>,
    scalar_size: usize,
    /// The memory its current views name.
    held: Vec<Arc<BufferMemory>>,
    /// Where the launch sits once built: segment and position in it.
    position: (usize, usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgumentShape {
    View { size: u64 },
    Staged { offset: u64, size: u64 },
}

/// Records stream work into a [`Graph`]. Made by [`Device::graph`](crate::Device::graph).
pub struct GraphBuilder {
    device: Arc<DeviceShared>,
    id: u64,
    lanes: usize,
    events: Vec<bool>,
    steps: Vec<(usize, Step)>,
    staged: Vec<u8>,
    launches: Vec<LaunchRecord>,
    /// The memory the copies, fills and writes name.
    held: Vec<Arc<BufferMemory>>,
    emulate: bool,
}

impl std::fmt::Debug for GraphBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("device", &self.device.label())
            .field("streams", &self.lanes)
            .field("steps", &self.steps.len())
            .finish()
    }
}

impl GraphBuilder {
    pub(crate) fn new(device: Arc<DeviceShared>) -> GraphBuilder {
        GraphBuilder {
            device,
            id: NEXT_GRAPH_ID.fetch_add(1, Ordering::Relaxed),
            lanes: 0,
            events: Vec::new(),
            steps: Vec::new(),
            staged: Vec::new(),
            launches: Vec::new(),
            held: Vec::new(),
            emulate: false,
        }
    }

    /// A new stream of the graph. The first is the stream the graph is replayed on; work on
    /// the others runs beside it, ordered only by the graph's events.
    pub fn stream(&mut self) -> GraphStream {
        self.lanes += 1;
        GraphStream {
            graph: self.id,
            lane: self.lanes - 1,
        }
    }

    /// A new event of the graph, for [`record`](GraphBuilder::record) and
    /// [`wait`](GraphBuilder::wait).
    pub fn event(&mut self) -> GraphEvent {
        self.events.push(false);
        GraphEvent {
            graph: self.id,
            index: self.events.len() - 1,
        }
    }

    /// Replays the graph operation by operation even where the device has native command
    /// lists: the path every device without them takes, for comparisons and tests.
    pub fn emulate(&mut self, emulate: bool) -> &mut Self {
        self.emulate = emulate;
        self
    }

    fn lane(&self, stream: GraphStream) -> Result<usize> {
        if stream.graph != self.id {
            return Err(Error::invalid_handle(format!(
                "graph stream {} belongs to another graph",
                stream.lane
            )));
        }
        Ok(stream.lane)
    }

    fn event_index(&self, event: GraphEvent) -> Result<usize> {
        if event.graph != self.id {
            return Err(Error::invalid_handle(format!(
                "graph event {} belongs to another graph",
                event.index
            )));
        }
        Ok(event.index)
    }

    fn check_buffer<T>(&self, buffer: &Buffer<T>, what: &str) -> Result<BufferHandle> {
        self.device.check_same_device(&buffer.memory.device, what)?;
        buffer
            .memory
            .block
            .as_ref()
            .map(|block| block.handle)
            .ok_or_else(|| Error::internal("a non-empty access reached a zero-length buffer"))
    }

    /// Copies `bytes` into the staging area and returns their offset there.
    fn stage(&mut self, bytes: &[u8]) -> u64 {
        let alignment = STAGING_ALIGNMENT.max(u64::from(self.device.info.buffer_offset_alignment));
        let offset = (self.staged.len() as u64).div_ceil(alignment) * alignment;
        self.staged.resize(offset as usize, 0);
        self.staged.extend_from_slice(bytes);
        offset
    }

    fn push(&mut self, lane: usize, step: Step) {
        self.steps.push((lane, step));
    }

    /// Records a write of `data` to the start of `destination`. The graph keeps its own copy
    /// of `data`: every replay writes these bytes.
    pub fn write<'a, T: bytemuck::Pod>(
        &mut self,
        stream: GraphStream,
        destination: impl Into<BufferSlice<'a, T>>,
        data: &[T],
    ) -> Result<()> {
        let lane = self.lane(stream)?;
        let destination = destination.into().prefix(data.len(), "write")?;
        let (destination_offset, size) = destination.byte_span("write")?;
        if size == 0 {
            return Ok(());
        }
        let handle = self.check_buffer(destination.buffer, "write destination")?;
        let source_offset = self.stage(bytemuck::cast_slice(data));
        self.held.push(destination.buffer.memory.clone());
        let command = Command::Copy {
            source: Place::Staged,
            source_offset,
            destination: handle,
            destination_offset,
            size,
        };
        self.push(lane, Step::Command(command));
        Ok(())
    }

    /// Records a copy of the elements of `source` to the start of `destination`.
    pub fn copy<'a, 'b, T: bytemuck::Pod>(
        &mut self,
        stream: GraphStream,
        source: impl Into<BufferSlice<'a, T>>,
        destination: impl Into<BufferSlice<'b, T>>,
    ) -> Result<()> {
        let lane = self.lane(stream)?;
        let source = source.into();
        let destination = destination.into().prefix(source.len(), "copy destination")?;
        let (source_offset, size) = source.byte_span("copy source")?;
        let (destination_offset, _) = destination.byte_span("copy destination")?;
        if size == 0 {
            return Ok(());
        }
        let from = self.check_buffer(source.buffer, "copy source")?;
        let to = self.check_buffer(destination.buffer, "copy destination")?;
        self.held.push(source.buffer.memory.clone());
        self.held.push(destination.buffer.memory.clone());
        let command = Command::Copy {
            source: Place::Memory(from),
            source_offset,
            destination: to,
            destination_offset,
            size,
        };
        self.push(lane, Step::Command(command));
        Ok(())
    }

    /// Records a fill of every element of `destination` with `value` (1, 2 or 4 bytes).
    pub fn fill<'a, T: bytemuck::Pod>(
        &mut self,
        stream: GraphStream,
        destination: impl Into<BufferSlice<'a, T>>,
        value: T,
    ) -> Result<()> {
        let pattern = bytemuck::bytes_of(&value);
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill patterns are 1, 2 or 4 bytes; {} is {} bytes",
                std::any::type_name::<T>(),
                pattern.len()
            )));
        }
        self.fill_pattern(stream, destination, pattern)
    }

    /// Records a fill of the bytes of `destination` with `pattern` repeated (1, 2 or 4 bytes,
    /// whose size divides the view's byte offset and length), as [`Stream::fill_pattern`].
    pub fn fill_pattern<'a, T: 'a>(
        &mut self,
        stream: GraphStream,
        destination: impl Into<BufferSlice<'a, T>>,
        pattern: &[u8],
    ) -> Result<()> {
        let lane = self.lane(stream)?;
        let destination = destination.into();
        if !matches!(pattern.len(), 1 | 2 | 4) {
            return Err(Error::invalid_argument(format!(
                "fill patterns are 1, 2 or 4 bytes, not {}",
                pattern.len()
            )));
        }
        let (offset, size) = destination.byte_span("fill")?;
        let width = pattern.len() as u64;
        if offset % width != 0 || size % width != 0 {
            return Err(Error::invalid_argument(format!(
                "fill: a {width}-byte pattern needs a byte offset and length that are multiples of {width}, \
                 not {offset} and {size}"
            )));
        }
        if size == 0 {
            return Ok(());
        }
        let buffer = self.check_buffer(destination.buffer, "fill destination")?;
        self.held.push(destination.buffer.memory.clone());
        let command = Command::Fill {
            buffer,
            offset,
            size,
            pattern: pattern.to_vec(),
        };
        self.push(lane, Step::Command(command));
        Ok(())
    }

    /// Records a kernel launch, checked now as [`Stream::launch`] checks it. The node it
    /// returns names the launch for [`Graph::update_launch`].
    pub fn launch(&mut self, stream: GraphStream, launch: &Launch<'_>) -> Result<LaunchNode> {
        let lane = self.lane(stream)?;
        let kernel = launch.kernel();
        let device = self.device.clone();
        device.check_same_device(&kernel.module_device(), &format!("kernel `{}`", kernel.name()))?;
        let scalars = launch.validate_for(&device)?;
        let mut buffers = Vec::with_capacity(launch.buffers().len());
        let mut staged = Vec::with_capacity(launch.buffers().len());
        let mut arguments = Vec::with_capacity(launch.buffers().len());
        let mut held = Vec::new();
        for (position, binding) in launch.buffers().iter().enumerate() {
            match binding {
                BufferBinding::View { memory, offset, size } => {
                    let handle = view_handle(&device, kernel, position, memory)?;
                    held.push(memory.clone());
                    arguments.push(ArgumentShape::View { size: *size });
                    staged.push(false);
                    buffers.push(BufferArg {
                        buffer: handle,
                        offset: *offset,
                        size: *size,
                    });
                }
                BufferBinding::Staged(bytes) => {
                    let offset = self.stage(bytes);
                    let size = bytes.len() as u64;
                    arguments.push(ArgumentShape::Staged { offset, size });
                    staged.push(true);
                    buffers.push(BufferArg {
                        buffer: BufferHandle(0),
                        offset,
                        size,
                    });
                }
            }
        }
        let node = self.launches.len();
        self.launches.push(LaunchRecord {
            kernel: kernel.clone(),
            arguments,
            scalar_size: scalars.len(),
            held,
            position: (0, 0),
        });
        let command = Command::Launch {
            kernel: kernel.handle(),
            workgroups: launch.workgroup_count(),
            buffers,
            staged,
            scalars: scalars.to_vec(),
            node,
        };
        self.push(lane, Step::Command(command));
        Ok(LaunchNode {
            graph: self.id,
            index: node,
        })
    }

    /// Records a record of a graph event on `stream`.
    pub fn record(&mut self, stream: GraphStream, event: GraphEvent) -> Result<()> {
        let lane = self.lane(stream)?;
        let index = self.event_index(event)?;
        self.events[index] = true;
        self.push(lane, Step::Record(index));
        Ok(())
    }

    /// Makes what is recorded on `stream` after this wait for the most recent record of
    /// `event` before it. The event must have been recorded already: a graph's order of
    /// recording is an order in which it can run, so it never waits on itself.
    pub fn wait(&mut self, stream: GraphStream, event: GraphEvent) -> Result<()> {
        let lane = self.lane(stream)?;
        let index = self.event_index(event)?;
        if !self.events[index] {
            return Err(Error::invalid_argument(format!(
                "graph event {index} is waited for before any record of it; record it on one of the graph's \
                 streams first"
            )));
        }
        self.push(lane, Step::Wait(index));
        Ok(())
    }

    /// Records a record of an application event: each replay records it, as
    /// [`Stream::record`] would.
    pub fn record_event(&mut self, stream: GraphStream, event: &Event) -> Result<()> {
        let lane = self.lane(stream)?;
        event.check_usable("record")?;
        self.device.check_same_device(event.device(), "event")?;
        self.push(lane, Step::RecordEvent(event.clone()));
        Ok(())
    }

    /// Records a wait for an application event: each replay waits for its most recent record
    /// at the time of the replay, as [`Stream::wait`] would.
    pub fn wait_event(&mut self, stream: GraphStream, event: &Event) -> Result<()> {
        let lane = self.lane(stream)?;
        event.check_usable("wait")?;
        self.device.check_same_device(event.device(), "event")?;
        self.push(lane, Step::WaitEvent(event.clone()));
        Ok(())
    }

    /// Makes the graph ready to replay: stages its values in memory it owns, builds native
    /// command lists where the device has them, and creates the streams and events it needs.
    pub fn build(mut self) -> Result<Graph> {
        if self.lanes == 0 {
            return Err(Error::invalid_argument(
                "a graph has no streams; take one with GraphBuilder::stream and record work on it",
            ));
        }
        let _span = crate::trace::span("api", "graph build", || {
            vec![
                ("device", self.device.label().into()),
                ("steps", (self.steps.len() as u64).into()),
            ]
        });
        let device = self.device.clone();
        let staging = self.upload_staged()?;
        let staging_handle = staging
            .as_ref()
            .and_then(|buffer| buffer.memory.block.as_ref().map(|b| b.handle));
        let staged_place = || staging_handle.ok_or_else(|| Error::internal("a staged value has no staging buffer"));
        // Each maximal run of commands on one stream becomes a segment, scheduled where its
        // first command was recorded: the recording order is an order in which the graph
        // can run, since every wait follows the record it waits for.
        let mut schedule = Vec::new();
        let mut segments: Vec<Vec<Command>> = Vec::new();
        let mut open_segment: Vec<Option<usize>> = vec![None; self.lanes];
        let mut internal_events = 0;
        for (lane, step) in std::mem::take(&mut self.steps) {
            let mut command = match step {
                Step::Command(command) => command,
                other => {
                    open_segment[lane] = None;
                    schedule.push(match other {
                        Step::Record(event) => {
                            internal_events = internal_events.max(event + 1);
                            Scheduled::Record { lane, event }
                        }
                        Step::Wait(event) => Scheduled::Wait { lane, event },
                        Step::RecordEvent(event) => Scheduled::RecordEvent { lane, event },
                        Step::WaitEvent(event) => Scheduled::WaitEvent { lane, event },
                        Step::Command(_) => unreachable!("commands are taken above"),
                    });
                    continue;
                }
            };
            let segment = match open_segment[lane] {
                Some(segment) => segment,
                None => {
                    schedule.push(Scheduled::Segment {
                        lane,
                        segment: segments.len(),
                    });
                    segments.push(Vec::new());
                    open_segment[lane] = Some(segments.len() - 1);
                    segments.len() - 1
                }
            };
            match &mut command {
                Command::Copy { source, .. } => {
                    if let Place::Staged = source {
                        *source = Place::Memory(staged_place()?);
                    }
                }
                Command::Launch {
                    buffers, staged, node, ..
                } => {
                    for (argument, staged) in buffers.iter_mut().zip(staged.iter()) {
                        if *staged {
                            argument.buffer = staged_place()?;
                        }
                    }
                    self.launches[*node].position = (segment, segments[segment].len());
                }
                Command::Fill { .. } => {}
            }
            segments[segment].push(command);
        }
        let events = (0..internal_events)
            .map(|_| Event::create(device.clone(), false))
            .collect::<Result<Vec<_>>>()?;
        let helpers = (1..self.lanes)
            .map(|_| Stream::create(device.clone()))
            .collect::<Result<Vec<_>>>()?;
        let (fork, joins) = if self.lanes > 1 {
            let fork = Event::create(device.clone(), false)?;
            let joins = (1..self.lanes)
                .map(|_| Event::create(device.clone(), false))
                .collect::<Result<Vec<_>>>()?;
            (Some(fork), joins)
        } else {
            (None, Vec::new())
        };
        let mut built = Vec::with_capacity(segments.len());
        for commands in segments {
            let native = if self.emulate {
                None
            } else {
                native_list(&device, &commands)?
            };
            built.push(Segment { commands, native });
        }
        tracing::debug!(
            device = %device.label(),
            streams = self.lanes,
            segments = built.len(),
            native = built.iter().filter(|segment| segment.native.is_some()).count(),
            emulated = self.emulate,
            "built a graph: each segment is a run of copies, fills and launches on one stream"
        );
        Ok(Graph {
            id: self.id,
            exec: Arc::new(GraphExec {
                device,
                schedule,
                helpers,
                events,
                fork,
                joins,
                state: Mutex::new(ExecState {
                    memories: unique_memories(&self.held, &self.launches),
                    segments: built,
                    launches: self.launches,
                    replayed_on: Vec::new(),
                }),
                staging,
                fixed: self.held,
            }),
        })
    }

    /// Copies the staged bytes into device memory the graph owns, once.
    fn upload_staged(&self) -> Result<Option<Buffer<u8>>> {
        if self.staged.is_empty() {
            return Ok(None);
        }
        let (buffer, _) = Buffer::<u8>::allocate(self.device.clone(), self.staged.len(), None)?;
        let stream = Stream::create(self.device.clone())?;
        stream.write(&buffer, &self.staged)?;
        stream.destroy()?;
        Ok(Some(buffer))
    }
}

/// Each memory of `fixed` and of the launches' views, once.
fn unique_memories(fixed: &[Arc<BufferMemory>], launches: &[LaunchRecord]) -> Vec<Arc<BufferMemory>> {
    let mut unique: Vec<Arc<BufferMemory>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for memory in fixed
        .iter()
        .chain(launches.iter().flat_map(|launch| launch.held.iter()))
    {
        if seen.insert(Arc::as_ptr(memory)) {
            unique.push(Arc::clone(memory));
        }
    }
    unique
}

/// The backend handle of a launch's view, after the checks a stream's launch makes.
fn view_handle(device: &DeviceShared, kernel: &Kernel, position: usize, memory: &BufferMemory) -> Result<BufferHandle> {
    let what = format!("buffer argument {position} of kernel `{}`", kernel.name());
    device.check_same_device(&memory.device, &what)?;
    memory.block.as_ref().map(|block| block.handle).ok_or_else(|| {
        Error::invalid_argument(format!(
            "{what} is a zero-length buffer; a kernel cannot bind no memory"
        ))
    })
}

/// The device's command list for `commands`, or `None` where the device has none, or refuses
/// one of these commands as unsupported (the graph then replays them one by one).
fn native_list(device: &DeviceShared, commands: &[Command]) -> Result<Option<CommandListHandle>> {
    let backend = &device.backend;
    let list = match backend.command_list_create(device.handle) {
        Ok(list) => list,
        Err(error) if error.kind() == ErrorKind::Unsupported => return Ok(None),
        Err(error) => return Err(error),
    };
    let appended = (|| {
        issue(device, Destination::List(list), commands)?;
        backend.command_list_finish(list)
    })();
    match appended {
        Ok(()) => Ok(Some(list)),
        Err(error) => {
            backend.command_list_destroy(list);
            if error.kind() == ErrorKind::Unsupported {
                tracing::debug!(%error, device = %device.label(), "a graph segment replays op by op");
                Ok(None)
            } else {
                Err(error.context("building a graph's command list"))
            }
        }
    }
}

fn placed(place: Place) -> Result<BufferHandle> {
    match place {
        Place::Memory(handle) => Ok(handle),
        Place::Staged => Err(Error::internal("a graph command names staging memory it was not given")),
    }
}

/// One step of a replay, in an order in which the graph can run.
enum Scheduled {
    Segment { lane: usize, segment: usize },
    Record { lane: usize, event: usize },
    Wait { lane: usize, event: usize },
    RecordEvent { lane: usize, event: Event },
    WaitEvent { lane: usize, event: Event },
}

/// A run of commands on one stream: a native command list, or the commands to enqueue one by
/// one.
struct Segment {
    commands: Vec<Command>,
    native: Option<CommandListHandle>,
}

struct ExecState {
    /// Every buffer's memory the graph's commands name now, once each: a replay counts as a
    /// queued use of each (so none can be mapped while it may run).
    memories: Vec<Arc<BufferMemory>>,
    segments: Vec<Segment>,
    launches: Vec<LaunchRecord>,
    /// Streams a replay may still be running on; an update waits for them.
    replayed_on: Vec<std::sync::Weak<crate::stream::StreamShared>>,
}

/// What a graph holds; queued replays hold it too, so a graph dropped while it runs lives
/// until its work is done.
pub(crate) struct GraphExec {
    device: Arc<DeviceShared>,
    schedule: Vec<Scheduled>,
    /// The streams of lanes 1.., owned by the graph.
    helpers: Vec<Stream>,
    events: Vec<Event>,
    fork: Option<Event>,
    joins: Vec<Event>,
    state: Mutex<ExecState>,
    staging: Option<Buffer<u8>>,
    /// Memory the recorded copies, fills and writes name, held for as long as the graph.
    fixed: Vec<Arc<BufferMemory>>,
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // The helper streams finish their work before the lists they run go.
        for helper in self.helpers.drain(..) {
            let _ = helper.destroy();
        }
        for segment in &self.state.get_mut().segments {
            if let Some(list) = segment.native {
                self.device.backend.command_list_destroy(list);
            }
        }
    }
}

/// A recorded graph, ready to replay on any stream of its device. Cheap to clone; clones are
/// the same graph. Dropping it while replays run is safe: they keep what they use.
#[derive(Clone)]
pub struct Graph {
    id: u64,
    exec: Arc<GraphExec>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.exec.device.label())
            .field("streams", &(self.exec.helpers.len() + 1))
            .field("native", &self.is_native())
            .finish()
    }
}

impl Graph {
    /// True when every run of commands replays as the device's native command list; false
    /// when core enqueues some of them one by one (a device without command lists, or
    /// [`GraphBuilder::emulate`]).
    pub fn is_native(&self) -> bool {
        self.exec
            .state
            .lock()
            .segments
            .iter()
            .all(|segment| segment.native.is_some())
    }

    /// Number of streams the graph uses, the replay stream included.
    pub fn stream_count(&self) -> usize {
        self.exec.helpers.len() + 1
    }

    /// Enqueues the whole graph on `stream`, after the work already queued there; work queued
    /// after it waits for all of it. Never blocks on the device.
    pub fn replay(&self, stream: &Stream) -> Result<()> {
        let exec = &self.exec;
        exec.device
            .check_same_device(stream.device(), "the stream a graph is replayed on")?;
        let _span = crate::trace::span("api", "graph replay", || {
            vec![
                ("device", exec.device.label().into()),
                ("steps", (exec.schedule.len() as u64).into()),
            ]
        });
        let mut state = exec.state.lock();
        // A helper stream whose work failed has a sticky error, which the replay stream
        // would not see; the replay stream takes it, as it would had the work run on it.
        for helper in &exec.helpers {
            if let Err(error) = helper.check_sticky() {
                stream.poison(error.clone());
                return Err(error);
            }
        }
        let lane_stream = |lane: usize| if lane == 0 { stream } else { &exec.helpers[lane - 1] };
        if let Some(fork) = &exec.fork {
            stream.record(fork)?;
            for helper in &exec.helpers {
                helper.wait(fork)?;
            }
        }
        // The replay's uses of every buffer it names, refused while one is mapped. Every stream
        // that runs part of the replay holds them, so they end when the last part is known done;
        // the replay stream also holds the graph (the graph's own streams do not: it owns them).
        let uses: Arc<Vec<QueuedUse>> = Arc::new(
            state
                .memories
                .iter()
                .map(|memory| QueuedUse::new(memory, "a buffer the graph uses", None))
                .collect::<Result<Vec<_>>>()?,
        );
        let keep = Arc::new((self.exec.clone(), Arc::clone(&uses))) as Held;
        for step in &exec.schedule {
            match step {
                Scheduled::Segment { lane, segment } => {
                    let segment = &state.segments[*segment];
                    let keep = if *lane == 0 {
                        keep.clone()
                    } else {
                        Arc::clone(&uses) as Held
                    };
                    let keep = Some(keep);
                    lane_stream(*lane).enqueue_graph_segment(keep, |device, handle| match segment.native {
                        Some(list) => device.backend.stream_submit_command_list(handle, list),
                        None => issue(device, Destination::Stream(handle), &segment.commands),
                    })?;
                }
                Scheduled::Record { lane, event } => lane_stream(*lane).record(&exec.events[*event])?,
                Scheduled::Wait { lane, event } => lane_stream(*lane).wait(&exec.events[*event])?,
                Scheduled::RecordEvent { lane, event } => lane_stream(*lane).record(event)?,
                Scheduled::WaitEvent { lane, event } => lane_stream(*lane).wait(event)?,
            }
        }
        for (helper, join) in exec.helpers.iter().zip(&exec.joins) {
            helper.record(join)?;
            stream.wait(join)?;
        }
        if !exec.helpers.is_empty() {
            // The replay stream now waits for every helper's part, so it is idle only once the
            // whole replay is done: it holds the graph and the uses until then, even where none
            // of the replay's runs is its own.
            stream.hold_until_idle(keep);
            stream.link_helpers(&exec.helpers);
        }
        let shared = stream.shared_weak();
        if !state.replayed_on.iter().any(|known| known.ptr_eq(&shared)) {
            state.replayed_on.retain(|known| known.strong_count() > 0);
            state.replayed_on.push(shared);
        }
        Ok(())
    }

    /// Replaces the arguments of a recorded launch for the replays that follow, without
    /// recording again (as `cudaGraphExecKernelNodeSetParams` does): the same kernel, each
    /// buffer a view of the same size as before (another buffer, another offset), each uniform
    /// value of the same size, and scalars of the same types. Replays already queued keep the
    /// arguments they were queued with: the update waits for them first.
    pub fn update_launch(&self, node: LaunchNode, launch: &Launch<'_>) -> Result<()> {
        if node.graph != self.id {
            return Err(Error::invalid_handle(format!(
                "launch node {} belongs to another graph",
                node.index
            )));
        }
        let exec = &self.exec;
        let device = &exec.device;
        let mut state = exec.state.lock();
        let record = state
            .launches
            .get(node.index)
            .ok_or_else(|| Error::internal(format!("launch node {} is not in its graph", node.index)))?;
        let (recorded_kernel, recorded_arguments, recorded_scalar_size) =
            (record.kernel.clone(), record.arguments.clone(), record.scalar_size);
        let kernel = launch.kernel();
        if kernel.handle() != recorded_kernel.handle()
            || kernel.module_device().id != recorded_kernel.module_device().id
        {
            return Err(Error::invalid_argument(format!(
                "launch node {} runs kernel `{}`; an update may change its arguments, not its kernel (given `{}`)",
                node.index,
                recorded_kernel.name(),
                kernel.name()
            )));
        }
        let scalars = launch.validate_for(device)?;
        if scalars.len() != recorded_scalar_size {
            return Err(Error::invalid_argument(format!(
                "launch node {} of kernel `{}` has a scalar block of {} bytes; the update's is {} bytes",
                node.index,
                kernel.name(),
                recorded_scalar_size,
                scalars.len()
            )));
        }
        if launch.buffers().len() != recorded_arguments.len() {
            return Err(Error::invalid_argument(format!(
                "launch node {} of kernel `{}` binds {} buffer(s); the update gives {}",
                node.index,
                kernel.name(),
                recorded_arguments.len(),
                launch.buffers().len()
            )));
        }
        let mut arguments = Vec::with_capacity(recorded_arguments.len());
        let mut held = Vec::new();
        let mut staged_writes: Vec<(u64, Arc<[u8]>)> = Vec::new();
        for (position, (shape, given)) in recorded_arguments.iter().zip(launch.buffers()).enumerate() {
            match (shape, given) {
                (
                    ArgumentShape::View { size },
                    BufferBinding::View {
                        memory,
                        offset,
                        size: given,
                    },
                ) => {
                    if size != given {
                        return Err(Error::invalid_argument(format!(
                            "buffer argument {position} of launch node {} (kernel `{}`) is a view of {size} bytes; an \
                             update must give a view of the same size, not {given}",
                            node.index,
                            kernel.name()
                        )));
                    }
                    let handle = view_handle(device, kernel, position, memory)?;
                    held.push(memory.clone());
                    arguments.push(BufferArg {
                        buffer: handle,
                        offset: *offset,
                        size: *size,
                    });
                }
                (ArgumentShape::Staged { offset, size }, BufferBinding::Staged(bytes)) => {
                    if *size != bytes.len() as u64 {
                        return Err(Error::invalid_argument(format!(
                            "uniform argument {position} of launch node {} (kernel `{}`) holds {size} bytes; the \
                             update gives {}",
                            node.index,
                            kernel.name(),
                            bytes.len()
                        )));
                    }
                    let staging = exec
                        .staging
                        .as_ref()
                        .and_then(|buffer| buffer.memory.block.as_ref().map(|block| block.handle))
                        .ok_or_else(|| Error::internal("a staged value has no staging buffer"))?;
                    staged_writes.push((*offset, Arc::clone(bytes)));
                    arguments.push(BufferArg {
                        buffer: staging,
                        offset: *offset,
                        size: *size,
                    });
                }
                (ArgumentShape::View { .. }, BufferBinding::Staged(_)) | (ArgumentShape::Staged { .. }, _) => {
                    return Err(Error::invalid_argument(format!(
                        "argument {position} of launch node {} (kernel `{}`) was recorded as a {}; an update must give \
                         the same kind",
                        node.index,
                        kernel.name(),
                        match shape {
                            ArgumentShape::View { .. } => "buffer view",
                            ArgumentShape::Staged { .. } => "uniform value",
                        }
                    )));
                }
            }
        }
        // Replays already queued keep the arguments they were queued with.
        for stream in std::mem::take(&mut state.replayed_on) {
            if let Some(stream) = Stream::from_weak(&stream) {
                let _ = stream.synchronize();
            }
        }
        for helper in &exec.helpers {
            let _ = helper.synchronize();
        }
        let (segment, position) = state.launches[node.index].position;
        let segment = &mut state.segments[segment];
        let Some(Command::Launch {
            kernel: kernel_handle,
            workgroups,
            buffers,
            scalars: recorded,
            ..
        }) = segment.commands.get_mut(position)
        else {
            return Err(Error::internal(format!(
                "launch node {} does not point at a launch",
                node.index
            )));
        };
        if let Some(list) = segment.native {
            device.backend.command_list_update_launch(
                list,
                u32::try_from(position).map_err(|_| Error::internal("a command list past u32 commands"))?,
                &LaunchArgs {
                    kernel: *kernel_handle,
                    workgroups: launch.workgroup_count(),
                    buffers: &arguments,
                    scalars: &scalars,
                },
            )?;
        }
        // Written after the plugin accepted the update, which is the step that can refuse it.
        if !staged_writes.is_empty() {
            let staging = exec
                .staging
                .as_ref()
                .ok_or_else(|| Error::internal("a staged value has no staging buffer"))?;
            let writer = Stream::create(device.clone())?;
            for (offset, bytes) in &staged_writes {
                let start = *offset as usize;
                writer.write(staging.slice(start..start + bytes.len()), bytes)?;
            }
            writer.destroy()?;
        }
        *workgroups = launch.workgroup_count();
        *recorded = scalars.to_vec();
        *buffers = arguments;
        state.launches[node.index].held = held;
        state.memories = unique_memories(&exec.fixed, &state.launches);
        Ok(())
    }
}

/// Where [`issue`] sends recorded commands.
#[derive(Clone, Copy)]
enum Destination {
    /// Appended to a command list being built.
    List(CommandListHandle),
    /// Enqueued on a stream, one by one: the replay of a device without command lists.
    Stream(crate::backend::StreamHandle),
}

/// Appends or enqueues already-checked commands, in order.
fn issue(device: &DeviceShared, destination: Destination, commands: &[Command]) -> Result<()> {
    let backend = &device.backend;
    for command in commands {
        match command {
            Command::Copy {
                source,
                source_offset,
                destination: to,
                destination_offset,
                size,
            } => {
                let (from, source_offset, destination_offset, size) =
                    (placed(*source)?, *source_offset, *destination_offset, *size);
                match destination {
                    Destination::List(list) => {
                        backend.command_list_append_copy(list, from, source_offset, *to, destination_offset, size)?
                    }
                    Destination::Stream(stream) => {
                        backend.stream_copy(stream, from, source_offset, *to, destination_offset, size)?
                    }
                }
            }
            Command::Fill {
                buffer,
                offset,
                size,
                pattern,
            } => match destination {
                Destination::List(list) => backend.command_list_append_fill(list, *buffer, *offset, *size, pattern)?,
                Destination::Stream(stream) => backend.stream_fill(stream, *buffer, *offset, *size, pattern)?,
            },
            Command::Launch {
                kernel,
                workgroups,
                buffers,
                scalars,
                ..
            } => {
                let launch = LaunchArgs {
                    kernel: *kernel,
                    workgroups: *workgroups,
                    buffers,
                    scalars,
                };
                match destination {
                    Destination::List(list) => backend.command_list_append_launch(list, &launch)?,
                    Destination::Stream(stream) => backend.stream_launch(stream, &launch)?,
                }
            }
        }
    }
    Ok(())
}

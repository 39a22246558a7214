//! Command lists (ABI 1.4) as HIP graphs, captured from a stream of their own.
//!
//! Building a list captures its copies, fills and launches, in order, from a private stream in
//! relaxed capture mode (so another thread's `hipMalloc` neither fails nor breaks the capture),
//! and instantiates the graph once; a submission is one `hipGraphLaunch` on the stream, ordered
//! with the stream's other work. An update captures the whole list again with the new
//! arguments: the adapter has waited for every submission first. HIP copies a launch's
//! argument values when it is captured, so the list keeps only what it captures again.
//!
//! A stream keeps the executable graph it launched until it is idle, even once the list is
//! gone, and the executable graph keeps the kernels it launches, which keep their modules:
//! `hipModuleUnload` does not wait for pending launches, so a module must not be unloaded
//! while a queued submission may still run one of its kernels. (The buffers a graph uses need
//! no such care: `hipFree` waits for the device.)
//!
//! A copy between overlapping ranges goes through a buffer the list allocates once (a HIP
//! copy between overlapping ranges is undefined), which every submission of the list uses.
//! CUDA orders the launches of one executable graph with each other, but HIP documents no such
//! thing for `hipGraphLaunch`, and the ABI (docs/abi.md) lets a list be submitted to several
//! streams before earlier submissions complete: two submissions on two streams could then use
//! the buffer at once. So the submissions of a list with such a buffer are ordered on the
//! device, without the host waiting: each records an event of the list's executable graph
//! after its `hipGraphLaunch`, and the next one's stream waits for that record
//! (`hipStreamWaitEvent` waits for the record made before it, not for later ones) before its
//! own launch, so each submission follows all those before it. Where the record fails after
//! the launch, the next submission could not wait for this one, so the host waits for the
//! stream before the error is returned. A list without such a buffer has nothing of its own
//! that two submissions could share (a launch's arguments are values in the graph), and its
//! submissions are ordered only by their streams, like any work.
//!
//! The graph calls are optional entry points of the runtime (HIP 4.3 and later), and only
//! ROCm 5.3 and later capture `hipModuleLaunchKernel`; a runtime without any of the calls, or
//! older, has no command lists, and core replays graphs operation by operation.

use crate::device::Gpu;
use crate::ffi::{self, GraphApi, HipEvent, HipGraph, HipGraphExec, HipStream};
use crate::memory::DeviceBuffer;
use crate::module::KernelObject;
use crate::stream::{LaunchParameters, Stream};
use crate::RocmDriver;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xhal_backend::{Command, CopyOverlap, DriverCommandList, DriverStream, Error, Object, OwnedLaunch, Result};

/// A command as the list keeps it, to capture again after an update.
enum Recordable {
    Copy {
        from: ffi::DevicePointer,
        to: ffi::DevicePointer,
        size: usize,
        /// Where an overlapping copy goes on its way (a HIP copy between overlapping ranges is
        /// undefined). Freed with the list: hipFree waits for the device first.
        bounce: Option<DeviceBuffer>,
    },
    Fill {
        address: ffi::DevicePointer,
        pattern: Vec<u8>,
        count: usize,
    },
    Launch {
        parameters: LaunchParameters,
        /// The kernel, which holds its module: a capture hands it on to its executable graph.
        kernel: Arc<Object<KernelObject>>,
    },
}

// Device addresses and runtime handles, usable from any thread; the list is behind its lock.
// SAFETY: see above.
unsafe impl Send for Recordable {}
// SAFETY: see above.
unsafe impl Sync for Recordable {}

/// A captured graph and its executable form. Streams that launched it keep it (by `Arc`) until
/// they are idle, so it is destroyed only once no launch of it is pending.
pub(crate) struct Executable {
    gpu: Arc<Gpu>,
    graphs: GraphApi,
    graph: HipGraph,
    exec: HipGraphExec,
    /// The kernels the graph launches, each holding its module, released after the graphs:
    /// hipModuleUnload does not wait for pending launches, so the module of a kernel a pending
    /// launch runs must stay loaded even once the application destroyed list, kernel and module.
    _kernels: Vec<Arc<Object<KernelObject>>>,
    /// Where the list has a bounce buffer: what orders its submissions (see the module's
    /// comment).
    order: Option<Order>,
}

/// An event recorded after each launch of an executable graph, which the next launch waits
/// for. It goes with the executable graph, once no stream holds it: no wait for it is pending.
struct Order {
    event: HipEvent,
    /// Whether a submission recorded it: the first has nothing to wait for.
    recorded: AtomicBool,
}

// SAFETY: HIP graph handles may be used and destroyed from any thread.
unsafe impl Send for Executable {}
// SAFETY: see above.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        let (graphs, exec, graph) = (self.graphs, self.exec, self.graph);
        // The executable graph goes first: before ROCm 6, it used the graph's nodes.
        // SAFETY: the handles this capture made, each destroyed once, with no launch pending.
        let code = unsafe { (graphs.graph_exec_destroy)(exec) };
        if let Err(error) = self.gpu.api().check(code, "hipGraphExecDestroy", || {
            "destroying a command list's executable graph".to_string()
        }) {
            tracing::warn!(%error, "an executable graph was not destroyed");
        }
        // SAFETY: as above.
        let code = unsafe { (graphs.graph_destroy)(graph) };
        if let Err(error) = self.gpu.api().check(code, "hipGraphDestroy", || {
            "destroying a command list's graph".to_string()
        }) {
            tracing::warn!(%error, "a graph was not destroyed");
        }
        if let Some(order) = &self.order {
            // SAFETY: the event this executable graph made, destroyed once, with no submission
            // pending that records or waits for it.
            let code = unsafe { (self.gpu.api().event_destroy)(order.event) };
            if let Err(error) = self.gpu.api().check(code, "hipEventDestroy", || {
                "destroying the event that orders a command list's submissions".to_string()
            }) {
                tracing::warn!(%error, "an event was not destroyed");
            }
        }
    }
}

struct State {
    commands: Vec<Recordable>,
    executable: Arc<Executable>,
}

/// A HIP command list.
pub(crate) struct CommandList {
    gpu: Arc<Gpu>,
    graphs: GraphApi,
    state: Mutex<State>,
}

fn host(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what} {value} does not fit this host")))
}

fn recordable(gpu: &Arc<Gpu>, command: &Command<RocmDriver>) -> Result<Recordable> {
    Ok(match command {
        Command::Copy {
            source,
            source_offset,
            destination,
            destination_offset,
            size,
        } => {
            let overlap = CopyOverlap::of(source, *source_offset, destination, *destination_offset, *size);
            let bounce = match overlap {
                CopyOverlap::Overlapping => Some(DeviceBuffer::new(gpu, *size)?),
                _ => None,
            };
            Recordable::Copy {
                from: source.at(*source_offset),
                to: destination.at(*destination_offset),
                size: host(*size, "copy size")?,
                bounce,
            }
        }
        Command::Fill {
            buffer,
            offset,
            size,
            pattern,
        } => Recordable::Fill {
            address: buffer.at(*offset),
            pattern: pattern.clone(),
            count: host(*size / pattern.len() as u64, "fill size")?,
        },
        Command::Launch(launch) => Recordable::Launch {
            parameters: parameters(launch)?,
            kernel: Arc::clone(&launch.kernel),
        },
    })
}

fn parameters(launch: &OwnedLaunch<RocmDriver>) -> Result<LaunchParameters> {
    LaunchParameters::new(&launch.kernel, launch.workgroups, &launch.buffers, &launch.scalars)
}

/// Issues `command` on `stream`, which is capturing, on the current device `gpu`.
fn issue(gpu: &Gpu, command: &mut Recordable, stream: HipStream) -> Result<()> {
    let api = gpu.api();
    match command {
        Recordable::Copy { from, to, size, bounce } => {
            let (from, to, size) = (*from, *to, *size);
            let copy = |from: ffi::DevicePointer, to: ffi::DevicePointer| {
                // SAFETY: both ranges lie in live buffers the list holds, and do not overlap.
                let code = unsafe { (api.memcpy_dtod_async)(to, from, size, stream) };
                api.check(code, "hipMemcpyDtoDAsync", || {
                    format!("capturing a copy of {size} bytes on {}", gpu.name())
                })
            };
            match bounce {
                Some(bounce) => {
                    copy(from, bounce.at(0))?;
                    copy(bounce.at(0), to)
                }
                // A copy onto itself changes nothing; the capture keeps the list's order anyway.
                None if from == to => Ok(()),
                None => copy(from, to),
            }
        }
        Recordable::Fill {
            address,
            pattern,
            count,
        } => {
            let (address, count) = (*address, *count);
            let doing = || {
                format!(
                    "capturing a fill of {count} {}-byte patterns on {}",
                    pattern.len(),
                    gpu.name()
                )
            };
            match **pattern {
                [byte] => {
                    // SAFETY: the range lies in a live buffer; the count is in elements.
                    let code = unsafe { (api.memset_d8_async)(address, byte, count, stream) };
                    api.check(code, "hipMemsetD8Async", doing)
                }
                [first, second] => {
                    let value = u16::from_ne_bytes([first, second]);
                    // SAFETY: the range lies in a live buffer, aligned to the pattern.
                    let code = unsafe { (api.memset_d16_async)(address, value, count, stream) };
                    api.check(code, "hipMemsetD16Async", doing)
                }
                [first, second, third, fourth] => {
                    let value = i32::from_ne_bytes([first, second, third, fourth]);
                    // SAFETY: the range lies in a live buffer, aligned to the pattern.
                    let code = unsafe { (api.memset_d32_async)(address, value, count, stream) };
                    api.check(code, "hipMemsetD32Async", doing)
                }
                _ => Err(Error::internal(format!(
                    "a {}-byte fill pattern reached the HIP runtime",
                    pattern.len()
                ))),
            }
        }
        Recordable::Launch { parameters, .. } => {
            // SAFETY: the device is current and the stream live; the parameters were checked
            // against the kernel, and HIP copies their values into the graph.
            let code = unsafe { parameters.launch(api, stream) };
            api.check(code, "hipModuleLaunchKernel", || {
                format!("capturing {}", parameters.describe())
            })
        }
    }
}

/// Captures `commands` from a private stream and instantiates the graph.
fn capture(gpu: &Arc<Gpu>, graphs: GraphApi, commands: &mut [Recordable]) -> Result<Executable> {
    gpu.bind()?;
    let api = gpu.api();
    let mut stream: HipStream = std::ptr::null_mut();
    // SAFETY: writes one stream handle on the current device.
    let code = unsafe { (api.stream_create_with_flags)(&mut stream, ffi::HIP_STREAM_NON_BLOCKING) };
    api.check(code, "hipStreamCreateWithFlags", || {
        format!("creating a capture stream on {}", gpu.name())
    })?;
    let captured = capture_on(gpu, graphs, commands, stream).and_then(|mut executable| {
        let bounces = commands
            .iter()
            .any(|command| matches!(command, Recordable::Copy { bounce: Some(_), .. }));
        if bounces {
            executable.order = Some(order(gpu)?);
        }
        Ok(executable)
    });
    // SAFETY: the capture stream, out of capture mode, with nothing queued (captured work is
    // not executed).
    let code = unsafe { (api.stream_destroy)(stream) };
    if let Err(error) = api.check(code, "hipStreamDestroy", || {
        format!("destroying a capture stream on {}", gpu.name())
    }) {
        tracing::warn!(%error, "a capture stream was not destroyed");
    }
    captured
}

fn capture_on(gpu: &Arc<Gpu>, graphs: GraphApi, commands: &mut [Recordable], stream: HipStream) -> Result<Executable> {
    let api = gpu.api();
    // SAFETY: a new, idle stream of the current device.
    let code = unsafe { (graphs.stream_begin_capture)(stream, ffi::HIP_STREAM_CAPTURE_MODE_RELAXED) };
    api.check(code, "hipStreamBeginCapture", || {
        format!("capturing a command list on {}", gpu.name())
    })?;
    let issued = commands.iter_mut().try_for_each(|command| issue(gpu, command, stream));
    let mut graph: HipGraph = std::ptr::null_mut();
    // Ended whatever happened, so the stream leaves capture mode before it is destroyed.
    // SAFETY: the stream is capturing; writes one graph handle (null where the capture failed).
    let code = unsafe { (graphs.stream_end_capture)(stream, &mut graph) };
    let ended = api.check(code, "hipStreamEndCapture", || {
        format!("ending the capture of a command list on {}", gpu.name())
    });
    let destroy_graph = |graph: HipGraph| {
        if !graph.is_null() {
            // SAFETY: the graph this capture made, used by nothing else.
            unsafe { (graphs.graph_destroy)(graph) };
        }
    };
    if let Err(error) = issued.and(ended) {
        destroy_graph(graph);
        return Err(error);
    }
    if graph.is_null() {
        return Err(Error::internal(format!(
            "hipStreamEndCapture succeeded but gave no graph for a command list on {}",
            gpu.name()
        )));
    }
    let mut exec: HipGraphExec = std::ptr::null_mut();
    // SAFETY: a graph just captured; writes one executable graph handle. No error node or log
    // buffer is asked for.
    let code = unsafe { (graphs.graph_instantiate)(&mut exec, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    if let Err(error) = api.check(code, "hipGraphInstantiate", || {
        format!("instantiating a command list's graph on {}", gpu.name())
    }) {
        destroy_graph(graph);
        return Err(error);
    }
    let mut kernels: Vec<Arc<Object<KernelObject>>> = Vec::new();
    for command in commands.iter() {
        if let Recordable::Launch { kernel, .. } = command {
            if !kernels.iter().any(|kept| Arc::ptr_eq(kept, kernel)) {
                kernels.push(Arc::clone(kernel));
            }
        }
    }
    Ok(Executable {
        gpu: Arc::clone(gpu),
        graphs,
        graph,
        exec,
        _kernels: kernels,
        order: None,
    })
}

/// An event to order the submissions of a list with a bounce buffer, on the current device
/// `gpu`.
fn order(gpu: &Gpu) -> Result<Order> {
    let api = gpu.api();
    let mut event: HipEvent = std::ptr::null_mut();
    // SAFETY: writes one event handle on the current device.
    let code = unsafe { (api.event_create_with_flags)(&mut event, ffi::HIP_EVENT_DISABLE_TIMING) };
    api.check(code, "hipEventCreateWithFlags", || {
        format!(
            "creating the event that orders a command list's submissions on {}",
            gpu.name()
        )
    })?;
    Ok(Order {
        event,
        recorded: AtomicBool::new(false),
    })
}

impl CommandList {
    /// Captures `commands` once.
    pub(crate) fn build(gpu: &Arc<Gpu>, commands: &[Command<RocmDriver>]) -> Result<CommandList> {
        let graphs = gpu.instance.graphs.ok_or_else(|| {
            Error::unsupported(format!(
                "the HIP runtime of {} cannot capture command lists (no graph calls, or before ROCm 5.3)",
                gpu.name()
            ))
        })?;
        let mut commands = commands
            .iter()
            .map(|command| recordable(gpu, command))
            .collect::<Result<Vec<_>>>()?;
        let executable = Arc::new(capture(gpu, graphs, &mut commands)?);
        Ok(CommandList {
            gpu: Arc::clone(gpu),
            graphs,
            state: Mutex::new(State { commands, executable }),
        })
    }
}

impl DriverCommandList<RocmDriver> for CommandList {
    /// One `hipGraphLaunch`; for a list with a bounce buffer, after a wait for the previous
    /// submission and before a record for the next (see the module's comment). The list's lock
    /// keeps submissions from racing between the wait and the record.
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        let state = self.state.lock();
        let executable = &state.executable;
        let api = self.gpu.api();
        // Held from before the wait on its ordering event: were the launch to fail after the
        // wait was queued, the event must still outlive that wait.
        stream.retain_graph(executable);
        if let Some(order) = executable
            .order
            .as_ref()
            .filter(|order| order.recorded.load(Ordering::Acquire))
        {
            stream.enqueue(
                "hipStreamWaitEvent",
                || {
                    format!(
                        "ordering a command list's submission after the one before on {}",
                        self.gpu.name()
                    )
                },
                // SAFETY: a live event and stream of this device; flags must be 0.
                |raw| unsafe { (api.stream_wait_event)(raw, order.event, 0) },
            )?;
        }
        let launch = self.graphs.graph_launch;
        stream.enqueue(
            "hipGraphLaunch",
            || format!("launching a command list's graph on {}", self.gpu.name()),
            // SAFETY: an executable graph of this device, on a live stream of it.
            |raw| unsafe { launch(executable.exec, raw) },
        )?;
        if let Some(order) = &executable.order {
            let recorded = stream.enqueue(
                "hipEventRecord",
                || {
                    format!(
                        "recording the end of a command list's submission on {}",
                        self.gpu.name()
                    )
                },
                // SAFETY: a live event and stream of this device.
                |raw| unsafe { (api.event_record)(order.event, raw) },
            );
            if let Err(error) = recorded {
                // The next submission cannot wait for this one on the device: the host does.
                if let Err(waited) = Stream::synchronize(stream) {
                    tracing::warn!(%waited, "a command list's submission could not be waited for");
                }
                return Err(error);
            }
            order.recorded.store(true, Ordering::Release);
        }
        Ok(())
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<RocmDriver>) -> Result<()> {
        let updated = Recordable::Launch {
            parameters: parameters(launch)?,
            kernel: Arc::clone(&launch.kernel),
        };
        let mut state = self.state.lock();
        let state = &mut *state;
        let slot = state
            .commands
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("a HIP command list has no command {index}")))?;
        let previous = std::mem::replace(slot, updated);
        match capture(&self.gpu, self.graphs, &mut state.commands) {
            Ok(executable) => {
                // The old graph goes once no stream holds it; no submission of it is pending
                // (the adapter waited).
                state.executable = Arc::new(executable);
                Ok(())
            }
            Err(error) => {
                state.commands[index] = previous;
                Err(error)
            }
        }
    }
}

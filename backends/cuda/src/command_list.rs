//! Command lists (ABI 1.4) as CUDA graphs, captured from a stream of their own.
//!
//! Building a list captures its copies, fills and launches, in order, from a private stream in
//! relaxed capture mode, and instantiates the graph once; a submission is one `cuGraphLaunch`
//! on the stream, ordered with the stream's other work. An update captures the whole list again
//! with the new arguments: the adapter has waited for every submission first. CUDA keeps an
//! executable graph that is destroyed while launched alive until its launches complete.

use crate::device::Gpu;
use crate::ffi::{call, sys, CUstream};
use crate::memory::DeviceBuffer;
use crate::stream::{LaunchParameters, Stream};
use crate::CudaDriver;
use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{Command, CopyOverlap, DriverCommandList, Error, Object, OwnedLaunch, Result};

/// A command as the list keeps it, to capture again after an update.
enum Recordable {
    Copy {
        from: sys::CUdeviceptr,
        to: sys::CUdeviceptr,
        size: usize,
        /// Where an overlapping copy goes on its way (CUDA's copies refuse overlap).
        bounce: Option<DeviceBuffer>,
    },
    Fill {
        address: sys::CUdeviceptr,
        pattern: Vec<u8>,
        count: usize,
    },
    Launch(LaunchParameters),
}

// Device addresses and driver handles, usable from any thread; the list is behind its lock.
// SAFETY: see above.
unsafe impl Send for Recordable {}
// SAFETY: see above.
unsafe impl Sync for Recordable {}

/// A captured graph and its executable form.
struct Executable {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

// SAFETY: CUDA graph handles may be used and destroyed from any thread.
unsafe impl Send for Executable {}
// SAFETY: see above.
unsafe impl Sync for Executable {}

impl Drop for Executable {
    fn drop(&mut self) {
        let (exec, graph) = (self.exec, self.graph);
        // SAFETY: handles this list made; CUDA lets launched work finish first.
        let _ = call("cuGraphExecDestroy", crate::ffi::quiet, || unsafe {
            sys::cuGraphExecDestroy(exec)
        });
        // SAFETY: as above.
        let _ = call("cuGraphDestroy", crate::ffi::quiet, || unsafe {
            sys::cuGraphDestroy(graph)
        });
    }
}

struct State {
    commands: Vec<Recordable>,
    executable: Executable,
}

/// A CUDA command list.
pub(crate) struct CommandList {
    gpu: Arc<Gpu>,
    state: Mutex<State>,
}

fn host(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what} {value} does not fit this host")))
}

fn recordable(gpu: &Arc<Gpu>, command: &Command<CudaDriver>) -> Result<Recordable> {
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
                from: source.address(*source_offset),
                to: destination.address(*destination_offset),
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
            address: buffer.address(*offset),
            pattern: pattern.clone(),
            count: host(*size / pattern.len() as u64, "fill size")?,
        },
        Command::Launch(launch) => Recordable::Launch(parameters(launch)?),
    })
}

fn parameters(launch: &OwnedLaunch<CudaDriver>) -> Result<LaunchParameters> {
    LaunchParameters::new(&launch.kernel, launch.workgroups, &launch.buffers, &launch.scalars)
}

/// Issues `command` on `stream`, which is capturing.
fn issue(command: &mut Recordable, stream: CUstream) -> Result<()> {
    match command {
        Recordable::Copy { from, to, size, bounce } => {
            let (from, to, size) = (*from, *to, *size);
            let copy = |from: sys::CUdeviceptr, to: sys::CUdeviceptr| {
                call(
                    "cuMemcpyDtoDAsync_v2",
                    || format!("capturing a copy of {size} bytes"),
                    // SAFETY: both ranges lie in live buffers the list holds, and do not overlap.
                    || unsafe { sys::cuMemcpyDtoDAsync_v2(to, from, size, stream) },
                )
            };
            match bounce {
                Some(bounce) => {
                    copy(from, bounce.address(0))?;
                    copy(bounce.address(0), to)
                }
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
            let doing = || format!("capturing a fill of {count} {}-byte patterns", pattern.len());
            match **pattern {
                // SAFETY: the range lies in a live buffer, aligned to the pattern.
                [byte] => call("cuMemsetD8Async", doing, || unsafe {
                    sys::cuMemsetD8Async(address, byte, count, stream)
                }),
                // SAFETY: as above.
                [a, b] => call("cuMemsetD16Async", doing, || unsafe {
                    sys::cuMemsetD16Async(address, u16::from_ne_bytes([a, b]), count, stream)
                }),
                // SAFETY: as above.
                [a, b, c, d] => call("cuMemsetD32Async", doing, || unsafe {
                    sys::cuMemsetD32Async(address, u32::from_ne_bytes([a, b, c, d]), count, stream)
                }),
                _ => Err(Error::internal(format!(
                    "a {}-byte fill pattern reached the CUDA driver",
                    pattern.len()
                ))),
            }
        }
        Recordable::Launch(parameters) => {
            // SAFETY: the context is current and the stream is live; the parameters were
            // checked against the kernel.
            call(
                "cuLaunchKernel",
                || parameters.describe(),
                || unsafe { parameters.launch(stream) },
            )
        }
    }
}

/// Captures `commands` from a private stream and instantiates the graph.
fn capture(gpu: &Gpu, commands: &mut [Recordable]) -> Result<Executable> {
    gpu.bind()?;
    let mut stream: CUstream = std::ptr::null_mut();
    call(
        "cuStreamCreate",
        || format!("creating a capture stream on {}", gpu.name()),
        // SAFETY: writes one stream handle in the current context.
        || unsafe { sys::cuStreamCreate(&mut stream, crate::ffi::STREAM_NON_BLOCKING) },
    )?;
    let captured = (|| {
        call(
            "cuStreamBeginCapture_v2",
            || format!("capturing a command list on {}", gpu.name()),
            // SAFETY: a new, idle stream; relaxed mode leaves other threads' calls alone.
            || unsafe {
                sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            },
        )?;
        let issued = commands.iter_mut().try_for_each(|command| issue(command, stream));
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // Ended whatever happened, so the stream leaves capture mode before it is destroyed.
        let ended = call(
            "cuStreamEndCapture",
            || format!("ending the capture of a command list on {}", gpu.name()),
            // SAFETY: the stream is capturing; writes one graph handle.
            || unsafe { sys::cuStreamEndCapture(stream, &mut graph) },
        );
        if let Err(error) = issued {
            if ended.is_ok() && !graph.is_null() {
                // SAFETY: the partial graph the capture made, used by nothing else.
                let _ = call("cuGraphDestroy", crate::ffi::quiet, || unsafe {
                    sys::cuGraphDestroy(graph)
                });
            }
            return Err(error);
        }
        ended?;
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        let instantiated = call(
            "cuGraphInstantiateWithFlags",
            || format!("instantiating a command list's graph on {}", gpu.name()),
            // SAFETY: a graph just captured; writes one executable graph handle.
            || unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) },
        );
        if let Err(error) = instantiated {
            // SAFETY: the graph this capture made, used by nothing else.
            let _ = call("cuGraphDestroy", crate::ffi::quiet, || unsafe {
                sys::cuGraphDestroy(graph)
            });
            return Err(error);
        }
        Ok(Executable { graph, exec })
    })();
    // SAFETY: the capture stream, out of capture mode, with nothing queued (captured work is
    // not executed).
    let _ = call("cuStreamDestroy_v2", crate::ffi::quiet, || unsafe {
        sys::cuStreamDestroy_v2(stream)
    });
    captured
}

impl CommandList {
    /// Captures `commands` once.
    pub(crate) fn build(gpu: &Arc<Gpu>, commands: &[Command<CudaDriver>]) -> Result<CommandList> {
        let mut commands = commands
            .iter()
            .map(|command| recordable(gpu, command))
            .collect::<Result<Vec<_>>>()?;
        let executable = capture(gpu, &mut commands)?;
        Ok(CommandList {
            gpu: Arc::clone(gpu),
            state: Mutex::new(State { commands, executable }),
        })
    }
}

impl DriverCommandList<CudaDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        let state = self.state.lock();
        let exec = state.executable.exec;
        stream.enqueue(
            "cuGraphLaunch",
            || format!("launching a command list's graph on {}", self.gpu.name()),
            // SAFETY: an executable graph of this context, on a live stream of it.
            |raw| unsafe { sys::cuGraphLaunch(exec, raw) },
        )
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<CudaDriver>) -> Result<()> {
        let updated = parameters(launch)?;
        let mut state = self.state.lock();
        let state = &mut *state;
        let slot = state
            .commands
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("a CUDA command list has no command {index}")))?;
        let previous = std::mem::replace(slot, Recordable::Launch(updated));
        match capture(&self.gpu, &mut state.commands) {
            Ok(executable) => {
                // The old graph goes here; no submission of it is pending (the adapter waited).
                state.executable = executable;
                Ok(())
            }
            Err(error) => {
                state.commands[index] = previous;
                Err(error)
            }
        }
    }
}

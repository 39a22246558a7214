//! Command lists (ABI 1.4) as `cl_khr_command_buffer` command buffers.
//!
//! A command buffer is recorded against one command queue, and is enqueued on that queue. A
//! list therefore records a command buffer for each stream it is submitted to, the first time
//! it is, from the commands it keeps; each submission is then one
//! `clEnqueueCommandBufferKHR`, ordered with the stream's other work because the queue is in
//! order. The buffers are created with simultaneous use, so a list may be submitted again before
//! earlier submissions complete. An update drops the recorded buffers (the adapter has waited
//! for every submission first), and the next submissions record them again.

use crate::ffi::{self, ClUint, CommandBuffer, CommandBufferApi, CommandQueue};
use crate::memory::{DeviceBuffer, View};
use crate::module::OwnKernel;
use crate::stream::{prepare_launch, set_arguments, Stream};
use crate::OpenClDriver;
use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::{Arc, Weak};
use xhal_backend::{BufferView, Command, CopyOverlap, DriverCommandList, Error, Object, OwnedLaunch, Result};

/// A command as the list keeps it, to record for each stream.
enum Recordable {
    Copy {
        source: Arc<Object<DeviceBuffer>>,
        source_offset: usize,
        destination: Arc<Object<DeviceBuffer>>,
        destination_offset: usize,
        size: usize,
        /// Where an overlapping copy goes on its way, as Vulkan and the eager path do.
        bounce: Option<Arc<DeviceBuffer>>,
    },
    Fill {
        buffer: Arc<Object<DeviceBuffer>>,
        offset: usize,
        size: usize,
        pattern: Vec<u8>,
    },
    Launch {
        launch: OwnedLaunch<OpenClDriver>,
        /// The kernel object its arguments are set on, its own.
        kernel: OwnKernel,
        /// The views it binds (sub-buffers for views at an offset), alive as long as the
        /// command buffers that name them.
        views: Vec<View>,
        global: [usize; 3],
    },
}

/// One recorded command buffer, for one stream's queue.
struct Recorded {
    stream: Weak<Object<Stream>>,
    buffer: NativeBuffer,
}

/// A `cl_command_buffer_khr` this backend owns one reference to; OpenCL keeps it for enqueued
/// submissions itself.
struct NativeBuffer {
    api: CommandBufferApi,
    buffer: CommandBuffer,
}

impl Drop for NativeBuffer {
    fn drop(&mut self) {
        // SAFETY: this backend's one reference; OpenCL keeps what enqueued work still uses.
        unsafe { (self.api.release)(self.buffer) };
    }
}

struct State {
    commands: Vec<Recordable>,
    recorded: Vec<Recorded>,
}

/// An OpenCL command list.
pub(crate) struct CommandList {
    api: CommandBufferApi,
    state: Mutex<State>,
}

// Command buffers, queues and memory objects may be used from any thread; the list's state is
// behind its lock.
// SAFETY: see above.
unsafe impl Send for CommandList {}
// SAFETY: see above.
unsafe impl Sync for CommandList {}
// SAFETY: as above: a command buffer is an OpenCL object usable from any thread.
unsafe impl Send for NativeBuffer {}
// SAFETY: as above.
unsafe impl Sync for NativeBuffer {}

fn host(value: u64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::out_of_bounds(format!("{what} {value} does not fit this host")))
}

fn recordable(command: &Command<OpenClDriver>) -> Result<Recordable> {
    Ok(match command {
        Command::Copy {
            source,
            source_offset,
            destination,
            destination_offset,
            size,
        } => {
            let overlap = CopyOverlap::of(source, *source_offset, destination, *destination_offset, *size);
            let bounce = if overlap == CopyOverlap::Overlapping {
                Some(Arc::new(DeviceBuffer::new(&source.gpu, *size)?))
            } else {
                None
            };
            Recordable::Copy {
                source: Arc::clone(source),
                source_offset: host(*source_offset, "copy source offset")?,
                destination: Arc::clone(destination),
                destination_offset: host(*destination_offset, "copy destination offset")?,
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
            buffer: Arc::clone(buffer),
            offset: host(*offset, "fill offset")?,
            size: host(*size, "fill size")?,
            pattern: pattern.clone(),
        },
        Command::Launch(launch) => recordable_launch(launch)?,
    })
}

fn recordable_launch(launch: &OwnedLaunch<OpenClDriver>) -> Result<Recordable> {
    let (views, global) = prepare_launch(&launch.kernel, launch.workgroups, &launch.buffers, &launch.scalars)?;
    Ok(Recordable::Launch {
        kernel: launch.kernel.own_kernel()?,
        launch: OwnedLaunch {
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
        },
        views,
        global,
    })
}

impl CommandList {
    /// Checks and keeps `commands`; command buffers are recorded per stream on first submission.
    pub(crate) fn build(api: CommandBufferApi, commands: &[Command<OpenClDriver>]) -> Result<CommandList> {
        let commands = commands.iter().map(recordable).collect::<Result<Vec<_>>>()?;
        Ok(CommandList {
            api,
            state: Mutex::new(State {
                commands,
                recorded: Vec::new(),
            }),
        })
    }

    /// Records every command into a new command buffer for `queue`.
    fn record(&self, commands: &[Recordable], queue: CommandQueue, name: &str) -> Result<NativeBuffer> {
        let api = self.api;
        let properties = [
            ffi::CL_COMMAND_BUFFER_FLAGS_KHR,
            ffi::CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR,
            0,
        ];
        let mut code = ffi::CL_SUCCESS;
        // SAFETY: one live queue; the property list is zero-terminated.
        let buffer = unsafe { (api.create)(1, &queue, properties.as_ptr(), &mut code) };
        ffi::check(code, || format!("creating a command buffer on {name}"))?;
        if buffer.is_null() {
            return Err(Error::internal(format!(
                "creating a command buffer on {name} returned none"
            )));
        }
        let native = NativeBuffer { api, buffer };
        let none = std::ptr::null_mut();
        // Each command waits for the one before it: the list runs in order, as a stream does,
        // whatever order the driver would otherwise pick within a command buffer.
        let previous: Cell<Option<ClUint>> = Cell::new(None);
        let waits = |held: &mut [ClUint; 1]| -> (ClUint, *const ClUint) {
            match previous.get() {
                Some(point) => {
                    held[0] = point;
                    (1, held.as_ptr())
                }
                None => (0, std::ptr::null()),
            }
        };
        for (index, command) in commands.iter().enumerate() {
            let doing = || format!("recording command {index} of a command list on {name}");
            match command {
                Recordable::Copy {
                    source,
                    source_offset,
                    destination,
                    destination_offset,
                    size,
                    bounce,
                } => {
                    let copy = |from: ffi::Mem, from_offset: usize, to: ffi::Mem, to_offset: usize| {
                        let mut held = [0];
                        let (count, wait_list) = waits(&mut held);
                        let mut point: ClUint = 0;
                        // SAFETY: both memory objects are live (the list holds them) and the
                        // ranges were checked; the wait list holds `count` sync points.
                        let code = unsafe {
                            (api.copy)(
                                buffer,
                                std::ptr::null_mut(),
                                from,
                                to,
                                from_offset,
                                to_offset,
                                *size,
                                count,
                                wait_list,
                                &mut point,
                                none,
                            )
                        };
                        ffi::check(code, doing)?;
                        previous.set(Some(point));
                        Ok::<(), Error>(())
                    };
                    match bounce {
                        Some(bounce) => {
                            copy(source.mem.0, *source_offset, bounce.mem.0, 0)?;
                            copy(bounce.mem.0, 0, destination.mem.0, *destination_offset)?;
                        }
                        None => copy(source.mem.0, *source_offset, destination.mem.0, *destination_offset)?,
                    }
                }
                Recordable::Fill {
                    buffer: target,
                    offset,
                    size,
                    pattern,
                } => {
                    let mut held = [0];
                    let (count, wait_list) = waits(&mut held);
                    let mut point: ClUint = 0;
                    // SAFETY: OpenCL copies the pattern; the range was checked; the wait list
                    // holds `count` sync points.
                    let code = unsafe {
                        (api.fill)(
                            buffer,
                            std::ptr::null_mut(),
                            target.mem.0,
                            pattern.as_ptr().cast(),
                            pattern.len(),
                            *offset,
                            *size,
                            count,
                            wait_list,
                            &mut point,
                            none,
                        )
                    };
                    ffi::check(code, doing)?;
                    previous.set(Some(point));
                }
                Recordable::Launch {
                    launch,
                    kernel: own,
                    views,
                    global,
                } => {
                    let kernel = &launch.kernel;
                    let native_kernel = &own.kernel;
                    set_arguments(kernel, *native_kernel, views, &launch.buffers, &launch.scalars)?;
                    let local = kernel.signature.workgroup_size;
                    let mut held = [0];
                    let (count, wait_list) = waits(&mut held);
                    let mut point: ClUint = 0;
                    // SAFETY: every argument was set just above, on a kernel object no one else
                    // uses; three-element sizes; the wait list holds `count` sync points.
                    let code = unsafe {
                        (api.nd_range)(
                            buffer,
                            std::ptr::null_mut(),
                            std::ptr::null(),
                            *native_kernel,
                            3,
                            std::ptr::null(),
                            global.as_ptr(),
                            local.as_ptr(),
                            count,
                            wait_list,
                            &mut point,
                            none,
                        )
                    };
                    ffi::check(code, doing)?;
                    previous.set(Some(point));
                }
            }
        }
        // SAFETY: a command buffer in the recording state.
        let code = unsafe { (api.finalize)(buffer) };
        ffi::check(code, || format!("finalizing a command list's command buffer on {name}"))?;
        Ok(native)
    }
}

impl DriverCommandList<OpenClDriver> for CommandList {
    fn submit(&self, stream: &Arc<Object<Stream>>) -> Result<()> {
        let mut state = self.state.lock();
        let state = &mut *state;
        state.recorded.retain(|recorded| recorded.stream.strong_count() > 0);
        let known = state
            .recorded
            .iter()
            .position(|recorded| std::ptr::eq(recorded.stream.as_ptr(), Arc::as_ptr(stream)));
        let position = match known {
            Some(position) => position,
            None => {
                let buffer = self.record(&state.commands, stream.queue(), stream.device_name())?;
                state.recorded.push(Recorded {
                    stream: Arc::downgrade(stream),
                    buffer,
                });
                state.recorded.len() - 1
            }
        };
        let (api, buffer) = (self.api, state.recorded[position].buffer.buffer);
        stream
            .enqueue(
                || format!("submitting a command list on {}", stream.device_name()),
                |_queue, out| {
                    // SAFETY: a finalized command buffer recorded for this stream's queue, enqueued
                    // on it (no queue list: the one it was recorded with).
                    unsafe { (api.enqueue)(0, std::ptr::null_mut(), buffer, 0, std::ptr::null(), out) }
                },
            )
            .map(drop)
    }

    fn update_launch(&self, index: usize, launch: &OwnedLaunch<OpenClDriver>) -> Result<()> {
        let updated = recordable_launch(launch)?;
        let mut state = self.state.lock();
        let slot = state
            .commands
            .get_mut(index)
            .ok_or_else(|| Error::internal(format!("an OpenCL command list has no command {index}")))?;
        *slot = updated;
        // Recorded again, with the new arguments, on each stream's next submission.
        state.recorded.clear();
        Ok(())
    }
}

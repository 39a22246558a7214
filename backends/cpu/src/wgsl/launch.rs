//! A WGSL launch: the enqueue-time checks of the argument ABI, then execution on the
//! stream's worker, workgroups spread over it and the pool's helper threads.

use super::exec::{Control, Launch, Machine, Stop};
use super::host::{HostBytes, HostView, HostViews};
use super::program::Program;
use crate::memory::{AlignedBytes, Buffer};
use crate::native::{NativeKernel, Scratch, Workgroup};
use crate::pool::Pool;
use crate::watchdog::{Stopped, Watch};
use parking_lot::{Mutex, RwLockReadGuard, RwLockWriteGuard};
use smallvec::SmallVec;
use std::ffi::c_void;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xhal_backend::{Error, Result};

/// A buffer argument: the allocation and the view's byte range in it.
#[derive(Debug)]
struct BoundView {
    buffer: Arc<Buffer>,
    range: Range<usize>,
}

/// A WGSL launch checked at enqueue time, owning everything it needs to run later.
pub(crate) struct WgslLaunch {
    program: Arc<Program>,
    /// Runs the kernel instead of the interpreter when present (compiled mode).
    native: Option<Arc<NativeKernel>>,
    workgroups: [u32; 3],
    buffers: SmallVec<[BoundView; 8]>,
    scalars: SmallVec<[u8; 128]>,
    limits: KernelLimits,
}

/// How a launch treats runaway and out-of-bounds kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KernelLimits {
    /// Longest run time.
    pub(crate) timeout: Duration,
    /// An out-of-bounds index faults the launch (the default); otherwise it is clamped to
    /// the array, one of the behaviours WGSL allows.
    pub(crate) strict: bool,
}

impl std::fmt::Debug for WgslLaunch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgslLaunch")
            .field("kernel", &self.program.name)
            .field("workgroups", &self.workgroups)
            .field("buffers", &self.buffers)
            .finish_non_exhaustive()
    }
}

/// Checks a launch's arguments against the kernel's interface: one view per binding, each at
/// least the binding's minimum size, and exactly the `var<immediate>` block's bytes.
pub(crate) fn check_arguments(
    program: &Program,
    view_sizes: impl ExactSizeIterator<Item = usize>,
    scalars: &[u8],
) -> Result<()> {
    let name = &program.name;
    let bindings = &program.bindings;
    if view_sizes.len() != bindings.len() {
        let names: Vec<String> = bindings.iter().map(|b| format!("`{}`", b.name)).collect();
        let expected = match bindings.len() {
            0 => "no buffer arguments".to_string(),
            1 => format!("1 buffer argument (@binding(0): {})", names.join(", ")),
            n => format!(
                "{n} buffer arguments (@binding(0) to @binding({}): {})",
                n - 1,
                names.join(", ")
            ),
        };
        return Err(Error::invalid_argument(format!(
            "kernel `{name}` expects {expected}, got {}",
            view_sizes.len()
        )));
    }
    if scalars.len() != program.immediate_size {
        let expected = match &program.immediate_name {
            Some(block) => format!(
                "{} scalar bytes (the size of its var<immediate> `{block}`)",
                program.immediate_size
            ),
            None => "no scalar bytes (it declares no var<immediate>)".to_string(),
        };
        return Err(Error::invalid_argument(format!(
            "kernel `{name}` expects {expected}, got {}",
            scalars.len()
        )));
    }
    for (index, (size, binding)) in view_sizes.zip(bindings).enumerate() {
        if (size as u64) < binding.min_size {
            return Err(Error::invalid_argument(format!(
                "kernel `{name}`: buffer argument {index} (`{}`: {}) is a {size}-byte view; the binding needs at \
                 least {} bytes",
                binding.name, binding.type_name, binding.min_size
            )));
        }
    }
    Ok(())
}

impl WgslLaunch {
    /// Checks the arguments against the kernel's interface: one view per binding, each at
    /// least the binding's minimum size, and exactly the `var<immediate>` block's bytes.
    /// `buffers` are views already checked against their allocations.
    pub(crate) fn new(
        program: Arc<Program>,
        native: Option<Arc<NativeKernel>>,
        workgroups: [u32; 3],
        buffers: crate::kernels::ResolvedViews,
        scalars: &[u8],
        limits: KernelLimits,
    ) -> Result<WgslLaunch> {
        check_arguments(&program, buffers.iter().map(|(_, range)| range.len()), scalars)?;
        let bound = buffers
            .into_iter()
            .map(|(buffer, range)| BoundView { buffer, range })
            .collect();
        Ok(WgslLaunch {
            program,
            native,
            workgroups,
            buffers: bound,
            scalars: SmallVec::from_slice(scalars),
            limits,
        })
    }

    /// Runs every workgroup. Each distinct buffer is locked once for the whole launch, in
    /// handle order like every other path holding several buffer locks (no deadlocks):
    /// exclusively if any binding of it is written, shared otherwise.
    ///
    /// `cancelled` is polled with the clock: when it says the backend is shutting down, the
    /// kernel stops with an error instead of running to its end.
    pub(crate) fn execute(&self, cancelled: &(dyn Fn() -> bool + Sync)) -> Result<()> {
        // Distinct buffers in handle order, each with whether any binding writes it; a short
        // sorted list, since a launch binds a few buffers and runs often.
        let mut distinct: SmallVec<[(u64, &Buffer, bool); 8]> = SmallVec::new();
        for (view, binding) in self.buffers.iter().zip(&self.program.bindings) {
            let id = view.buffer.id();
            match distinct.binary_search_by_key(&id, |(known, _, _)| *known) {
                Ok(found) => distinct[found].2 |= binding.writes,
                Err(at) => distinct.insert(at, (id, &*view.buffer, binding.writes)),
            }
        }
        let mut guards: SmallVec<[(u64, Guard<'_>); 8]> = distinct
            .into_iter()
            .map(|(id, buffer, writes)| {
                let guard = if writes {
                    Guard::Exclusive(buffer.bytes_mut())
                } else {
                    Guard::Shared(buffer.bytes().read())
                };
                (id, guard)
            })
            .collect();
        let mut bases: SmallVec<[(u64, HostBytes<'_>); 8]> = SmallVec::new();
        for (id, guard) in &mut guards {
            let bytes = match guard {
                Guard::Shared(guard) => HostBytes::Shared(&guard[..]),
                Guard::Exclusive(guard) => HostBytes::Exclusive(guard.as_atomic_words()),
            };
            bases.push((*id, bytes));
        }
        let mut views = HostViews::new();
        for view in &self.buffers {
            let broken = || Error::internal("a launch's buffer view was not locked");
            let base = bases
                .iter()
                .find(|(id, _)| *id == view.buffer.id())
                .map(|(_, bytes)| *bytes);
            let bytes = match base.ok_or_else(broken)? {
                HostBytes::Shared(all) => HostBytes::Shared(all.get(view.range.clone()).ok_or_else(broken)?),
                HostBytes::Exclusive(words) => {
                    if view.range.start % 4 != 0 {
                        return Err(broken());
                    }
                    let words = words
                        .get(view.range.start / 4..view.range.end.div_ceil(4))
                        .ok_or_else(broken)?;
                    HostBytes::Exclusive(words)
                }
            };
            views.push(HostView {
                bytes,
                size: view.range.len(),
            });
        }
        let parts = LaunchParts {
            program: &self.program,
            workgroups: self.workgroups,
            scalars: &self.scalars,
            limits: self.limits,
        };
        parts.run(self.native.as_deref(), views, cancelled)
    }
}

/// What running a launch needs besides its buffer views, borrowed from whoever owns it (a
/// queued [`WgslLaunch`], or a caller of the public executor).
pub(crate) struct LaunchParts<'a> {
    pub(crate) program: &'a Program,
    pub(crate) workgroups: [u32; 3],
    pub(crate) scalars: &'a [u8],
    pub(crate) limits: KernelLimits,
}

impl LaunchParts<'_> {
    /// Runs the compiled kernel when there is one, the interpreter otherwise.
    pub(crate) fn run(
        &self,
        native: Option<&NativeKernel>,
        views: HostViews<'_>,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<()> {
        if let Some(native) = native {
            match self.run_native(native, &views, cancelled)? {
                NativeOutcome::Done => return Ok(()),
                // Strict mode and an index out of bounds: the interpreter runs the launch
                // again to name the place, as it would have without compiled code.
                NativeOutcome::OutOfBounds => {
                    tracing::debug!(kernel = %self.program.name, "cpu: compiled kernel indexed out of bounds; interpreting it to report where");
                    let error = self.interpret(views, cancelled);
                    return Err(error.err().unwrap_or_else(|| {
                        Error::kernel_fault(format!("kernel `{}`: an index is out of bounds", self.program.name))
                    }));
                }
            }
        }
        self.interpret(views, cancelled)
    }

    fn interpret(&self, views: HostViews<'_>, cancelled: &(dyn Fn() -> bool + Sync)) -> Result<()> {
        let control = Control {
            deadline: Instant::now().checked_add(self.limits.timeout),
            timeout: self.limits.timeout,
            abort: AtomicBool::new(false),
            cancelled,
        };
        let launch = Launch {
            strict: self.limits.strict,
            // The interpreter is the slow path; its launch keeps a plain list.
            views: views.into_vec(),
            immediate: HostView {
                bytes: HostBytes::Shared(self.scalars),
                size: self.scalars.len(),
            },
            workgroups: self.workgroups,
            control: &control,
        };
        run_workgroups(self.program, &launch)
    }
}

impl LaunchParts<'_> {
    /// Runs the compiled kernel over every workgroup, on this thread and the pool's helpers
    /// (up to `available_parallelism` threads), while the watchdog keeps the time limit: past
    /// it (or when the backend shuts down) the kernel is told to stop, and its loops end at
    /// their next iteration.
    fn run_native(
        &self,
        native: &NativeKernel,
        views: &[HostView<'_>],
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Result<NativeOutcome> {
        let pointers: SmallVec<[usize; 8]> = views
            .iter()
            .map(|view| match view.bytes {
                HostBytes::Shared(bytes) => bytes.as_ptr() as usize,
                HostBytes::Exclusive(words) => words.as_ptr() as usize,
            })
            .collect();
        let lengths: SmallVec<[u64; 8]> = views.iter().map(|view| view.size as u64).collect();
        let [x, y, z] = self.workgroups.map(u64::from);
        let total = x * y * z;
        let threads = (Pool::threads() as u64).min(total).max(1);
        let chunk = (total / (threads * 16)).clamp(1, 64);
        let next = AtomicU64::new(0);
        let cancel = AtomicU32::new(0);
        let fault = Mutex::new(None::<Error>);
        let out_of_bounds = AtomicU32::new(0);
        let deadline = Instant::now().checked_add(self.limits.timeout);
        let scalars = self.scalars;
        // Runs chunks of workgroups until none is left. With `alone_while_under`, it runs them
        // only while what is left looks shorter than that at the pace of the chunks run so
        // far, and says whether it stopped early for want of help.
        let run_chunks = |alone_while_under: Option<Duration>| -> bool {
            let result = (|| -> Result<bool> {
                let scratch = Scratch::new(native.scratch_bytes)?;
                let buffers: SmallVec<[*mut c_void; 8]> =
                    pointers.iter().map(|&address| address as *mut c_void).collect();
                let mut record = 0u32;
                let started = Instant::now();
                let mut done = 0u64;
                loop {
                    // A helper may be wanted by an urgent stream's launch: it leaves between
                    // chunks, and the threads still here finish the workgroups.
                    if Pool::get().should_leave() {
                        break;
                    }
                    if let Some(limit) = alone_while_under {
                        let left = total.saturating_sub(next.load(Ordering::Relaxed));
                        if done > 0 && left > 0 {
                            let pace = started.elapsed().as_nanos() / u128::from(done);
                            if pace * u128::from(left) > limit.as_nanos() {
                                return Ok(true);
                            }
                        }
                    }
                    let start = next.fetch_add(chunk, Ordering::Relaxed);
                    if start >= total || cancel.load(Ordering::Relaxed) != 0 {
                        break;
                    }
                    let end = (start + chunk).min(total);
                    for index in start..end {
                        let group = Workgroup {
                            workgroup_id: [(index % x) as u32, ((index / x) % y) as u32, (index / (x * y)) as u32],
                            num_workgroups: self.workgroups,
                            cancel: cancel.as_ptr(),
                            out_of_bounds: &mut record,
                        };
                        // SAFETY: every pointer is a locked view of the length passed with it
                        // (shared views are never written: WGSL refuses stores to read-only
                        // storage); the scalar block has the kernel's size (checked at
                        // enqueue); the scratch is this thread's own.
                        unsafe { native.run(&buffers, scalars, &lengths, &group, scratch.as_ptr()) };
                    }
                    done += end - start;
                    if record != 0 && self.limits.strict {
                        cancel.store(1, Ordering::Relaxed);
                        out_of_bounds.store(1, Ordering::Relaxed);
                        break;
                    }
                }
                Ok(false)
            })();
            result.unwrap_or_else(|error| {
                cancel.store(1, Ordering::Relaxed);
                let mut slot = fault.lock();
                if slot.is_none() {
                    *slot = Some(error);
                }
                false
            })
        };
        let work = || {
            run_chunks(None);
        };
        // The watchdog raises `cancel` past the deadline or when the backend shuts down; the
        // kernel's loops poll it. This thread starts the launch alone and calls the pool's
        // helpers only when the rest looks long enough to be worth waking them: a wake-up
        // costs this thread a system call and the helper tens of microseconds before it
        // starts, and on a host with few cores it takes the core that enqueues the next
        // operation.
        let watch = Watch::start(deadline, &cancel, cancelled);
        let wants_helpers = AtomicBool::new(false);
        let alone = || {
            let limit = (threads > 1).then_some(WORTH_HELPERS);
            wants_helpers.store(run_chunks(limit), Ordering::Relaxed);
        };
        Pool::get().run(&alone, 0);
        if wants_helpers.into_inner() {
            Pool::get().run(&work, (threads - 1) as usize);
        }
        let stopped = watch.stopped();
        drop(watch);
        match stopped {
            Some(Stopped::Timeout) => {
                return Err(Error::new(
                    xhal_backend::ErrorKind::Timeout,
                    format!(
                        "kernel `{}` ran past {}={}s",
                        self.program.name,
                        crate::config::KERNEL_TIMEOUT_VARIABLE,
                        self.limits.timeout.as_secs_f64()
                    ),
                ));
            }
            Some(Stopped::Shutdown) => {
                return Err(Error::internal(format!(
                    "kernel `{}` was stopped: the backend is shutting down",
                    self.program.name
                )));
            }
            None => {}
        }
        if let Some(error) = fault.into_inner() {
            return Err(error);
        }
        Ok(if out_of_bounds.into_inner() != 0 {
            NativeOutcome::OutOfBounds
        } else {
            NativeOutcome::Done
        })
    }
}

/// The shortest rest of a compiled launch, at the pace of its first workgroups, that the
/// pool's helpers are woken for; shorter launches finish on the stream's worker alone.
const WORTH_HELPERS: Duration = Duration::from_micros(40);

/// How a compiled run ended, when it did not fail.
enum NativeOutcome {
    Done,
    /// An index was out of bounds (and clamped), in strict mode.
    OutOfBounds,
}

enum Guard<'a> {
    Shared(RwLockReadGuard<'a, AlignedBytes>),
    Exclusive(RwLockWriteGuard<'a, AlignedBytes>),
}

/// Hands out workgroups in small chunks to this thread and the pool's helpers, up to
/// `available_parallelism` threads (never more than there are workgroups); the first error
/// stops every thread.
fn run_workgroups(program: &Program, launch: &Launch<'_>) -> Result<()> {
    let [x, y, z] = launch.workgroups.map(u64::from);
    let total = x * y * z;
    let threads = (Pool::threads() as u64).min(total).max(1);
    let chunk = (total / (threads * 16)).clamp(1, 64);
    let next = AtomicU64::new(0);
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let fail = |error: Error| {
        let mut slot = failure.lock();
        if slot.is_none() {
            *slot = Some(error);
        }
        launch.control.abort.store(true, Ordering::Relaxed);
    };
    let work = || {
        let mut machine = match Machine::new(program, launch) {
            Ok(machine) => machine,
            Err(error) => return fail(error),
        };
        loop {
            if Pool::get().should_leave() {
                return;
            }
            let start = next.fetch_add(chunk, Ordering::Relaxed);
            if start >= total {
                return;
            }
            for index in start..(start + chunk).min(total) {
                let id = [(index % x) as u32, ((index / x) % y) as u32, (index / (x * y)) as u32];
                // The clock is read as work is counted (see `Machine::tick`); between
                // workgroups only the cheap flag is looked at.
                if launch.control.abort.load(Ordering::Relaxed) {
                    return;
                }
                match machine.run_workgroup(id) {
                    Ok(()) => {}
                    Err(Stop::Aborted) => return,
                    Err(Stop::Fault(error)) => return fail(error),
                }
            }
        }
    };
    Pool::get().run(&work, (threads - 1) as usize);
    match failure.into_inner() {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

//! Command lists (ABI 1.4) as Level Zero regular command lists, against the stub loader
//! (`tests/stub/ze_stub.c`): what the stub does with regular lists, called directly, and the
//! backend's lists on it: replays equal to the same work enqueued eagerly, launches that keep
//! the arguments they were recorded with, updates, lifetimes, and the fallback where the loader
//! or the driver lacks `zeCommandListImmediateAppendCommandListsExp`.
//!
//! The plain stub reports API 1.3, so the backend's lists are not in order there and carry a
//! barrier between every two commands; the stub runs the commands between two barriers last
//! first, so a missing barrier shows in the bytes.

mod common;

use common::{fail_next, last_launch, spirv, stub, SAXPY};
use std::ffi::{c_char, c_void, CStr};
use std::path::Path;
use xhal_backend::{Backend, BufferArg, BufferHandle, DeviceHandle, ErrorKind, KernelFormat, LaunchArgs};
use xhal_level_zero::{LevelZeroBackend, LevelZeroDriver};

type ZeResult = u32;
type Handle = *mut c_void;

const ZE_RESULT_SUCCESS: ZeResult = 0;
const ZE_RESULT_ERROR_DEVICE_LOST: ZeResult = 0x7000_0001;
const ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY: ZeResult = 0x7000_0002;
const ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY: ZeResult = 0x7000_0003;
const ZE_RESULT_ERROR_INVALID_ARGUMENT: ZeResult = 0x7800_0004;
const ZE_RESULT_ERROR_INVALID_ENUMERATION: ZeResult = 0x7800_000c;
const ZE_COMMAND_LIST_FLAG_IN_ORDER: u32 = 1 << 3;

/// `ze_command_list_desc_t`.
#[repr(C)]
struct ListDesc {
    stype: u32,
    p_next: *const c_void,
    ordinal: u32,
    flags: u32,
}

/// `ze_command_queue_desc_t`.
#[repr(C)]
struct QueueDesc {
    stype: u32,
    p_next: *const c_void,
    ordinal: u32,
    index: u32,
    flags: u32,
    mode: u32,
    priority: u32,
}

/// The stub's entry points, called as a driver's would be.
struct Driver {
    library: libloading::Library,
}

impl Driver {
    fn open(path: &Path) -> Driver {
        // SAFETY: the stub built for this test; its initialisers do nothing.
        let library = unsafe { libloading::Library::new(path) }.expect("the stub loads");
        let driver = Driver { library };
        let init: unsafe extern "C" fn(u32) -> ZeResult = driver.entry("zeInit");
        // SAFETY: zeInit takes flags only.
        let code = unsafe { init(1) };
        assert_eq!(code, ZE_RESULT_SUCCESS);
        driver
    }

    /// Entry point `name`, whose C signature is `F`.
    fn entry<F: Copy>(&self, name: &str) -> F {
        let symbol = format!("{name}\0");
        // SAFETY: each caller names the type ze_api.h gives the entry point.
        unsafe {
            *self
                .library
                .get::<F>(symbol.as_bytes())
                .unwrap_or_else(|_| panic!("the stub has {name}"))
        }
    }

    fn last_error(&self) -> String {
        let describe: unsafe extern "C" fn(Handle, *mut *const c_char) -> ZeResult =
            self.entry("zeDriverGetLastErrorDescription");
        let mut text = std::ptr::null();
        // SAFETY: the stub's per-thread text, copied at once.
        unsafe {
            describe(std::ptr::null_mut(), &mut text);
            CStr::from_ptr(text).to_string_lossy().into_owned()
        }
    }

    fn regular(&self, flags: u32) -> Result<Handle, ZeResult> {
        let create: unsafe extern "C" fn(Handle, Handle, *const ListDesc, *mut Handle) -> ZeResult =
            self.entry("zeCommandListCreate");
        let desc = ListDesc {
            stype: 0xf,
            p_next: std::ptr::null(),
            ordinal: 0,
            flags,
        };
        let mut list = std::ptr::null_mut();
        // SAFETY: a filled descriptor and a place for the handle; the stub ignores the context.
        match unsafe { create(std::ptr::null_mut(), std::ptr::null_mut(), &desc, &mut list) } {
            ZE_RESULT_SUCCESS => Ok(list),
            code => Err(code),
        }
    }

    fn immediate(&self) -> Handle {
        let create: unsafe extern "C" fn(Handle, Handle, *const QueueDesc, *mut Handle) -> ZeResult =
            self.entry("zeCommandListCreateImmediate");
        let desc = QueueDesc {
            stype: 0xe,
            p_next: std::ptr::null(),
            ordinal: 0,
            index: 0,
            flags: 0,
            mode: 2,
            priority: 0,
        };
        let mut list = std::ptr::null_mut();
        // SAFETY: as above.
        let code = unsafe { create(std::ptr::null_mut(), std::ptr::null_mut(), &desc, &mut list) };
        assert_eq!(code, ZE_RESULT_SUCCESS);
        list
    }

    fn fill(&self, list: Handle, memory: &mut [u8], pattern: &[u8]) -> ZeResult {
        let fill: unsafe extern "C" fn(
            Handle,
            *mut c_void,
            *const c_void,
            usize,
            usize,
            Handle,
            u32,
            *mut Handle,
        ) -> ZeResult = self.entry("zeCommandListAppendMemoryFill");
        // SAFETY: the plain stub's memory is host memory; `memory` and `pattern` outlive every
        // execution of the list in these tests.
        unsafe {
            fill(
                list,
                memory.as_mut_ptr().cast(),
                pattern.as_ptr().cast(),
                pattern.len(),
                memory.len(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            )
        }
    }

    fn copy(&self, list: Handle, to: &mut [u8], from: &[u8]) -> ZeResult {
        let copy: unsafe extern "C" fn(
            Handle,
            *mut c_void,
            *const c_void,
            usize,
            Handle,
            u32,
            *mut Handle,
        ) -> ZeResult = self.entry("zeCommandListAppendMemoryCopy");
        // SAFETY: as for `fill`.
        unsafe {
            copy(
                list,
                to.as_mut_ptr().cast(),
                from.as_ptr().cast(),
                to.len().min(from.len()),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            )
        }
    }

    fn barrier(&self, list: Handle) -> ZeResult {
        let barrier: unsafe extern "C" fn(Handle, Handle, u32, *mut Handle) -> ZeResult =
            self.entry("zeCommandListAppendBarrier");
        // SAFETY: no events.
        unsafe { barrier(list, std::ptr::null_mut(), 0, std::ptr::null_mut()) }
    }

    fn call(&self, name: &str, list: Handle) -> ZeResult {
        let call: unsafe extern "C" fn(Handle) -> ZeResult = self.entry(name);
        // SAFETY: a list of this stub.
        unsafe { call(list) }
    }

    fn execute(&self, immediate: Handle, lists: &[Handle]) -> ZeResult {
        let execute: unsafe extern "C" fn(Handle, u32, *mut Handle, Handle, u32, *mut Handle) -> ZeResult =
            self.entry("zeCommandListImmediateAppendCommandListsExp");
        let mut lists = lists.to_vec();
        // SAFETY: lists of this stub; no events.
        unsafe {
            execute(
                immediate,
                lists.len() as u32,
                lists.as_mut_ptr(),
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            )
        }
    }
}

#[test]
fn the_stub_runs_a_regular_list_when_it_is_executed_and_refuses_misuse() {
    let Some(path) = stub("lists-misuse", &[]) else { return };
    let driver = Driver::open(&path);
    let immediate = driver.immediate();
    let list = driver.regular(0).unwrap();
    let mut memory = vec![0u8; 16];
    assert_eq!(driver.fill(list, &mut memory, &[7]), 0);
    assert_eq!(memory, [0; 16], "an appended command waits for the list to run");
    assert_eq!(
        driver.execute(immediate, &[list]),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "an open list"
    );
    assert!(driver.last_error().contains("not closed"), "{}", driver.last_error());
    assert_eq!(driver.call("zeCommandListClose", list), 0);
    assert_eq!(
        driver.call("zeCommandListClose", list),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    assert_eq!(driver.fill(list, &mut memory, &[9]), ZE_RESULT_ERROR_INVALID_ARGUMENT);
    assert!(driver.last_error().contains("is closed"), "{}", driver.last_error());
    assert_eq!(driver.execute(immediate, &[list]), 0);
    assert_eq!(memory, [7; 16]);
    memory.fill(0);
    assert_eq!(driver.execute(immediate, &[list]), 0);
    assert_eq!(memory, [7; 16], "each execution runs the list again");
    assert_eq!(
        driver.execute(list, &[list]),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "lists run from an immediate list only"
    );
    assert_eq!(
        driver.execute(immediate, &[immediate]),
        ZE_RESULT_ERROR_INVALID_ARGUMENT,
        "an immediate list does not run from another"
    );
    assert_eq!(
        driver.call("zeCommandListClose", immediate),
        ZE_RESULT_ERROR_INVALID_ARGUMENT
    );
    // A reset list is open again, and empty.
    assert_eq!(driver.call("zeCommandListReset", list), 0);
    assert_eq!(driver.fill(list, &mut memory[..4], &[1]), 0);
    assert_eq!(driver.call("zeCommandListClose", list), 0);
    memory.fill(0);
    assert_eq!(driver.execute(immediate, &[list]), 0);
    assert_eq!(memory[..8], [1, 1, 1, 1, 0, 0, 0, 0]);
    // The plain stub's API is 1.3: the in-order flag is newer.
    assert_eq!(
        driver.regular(ZE_COMMAND_LIST_FLAG_IN_ORDER),
        Err(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    );
    driver.call("zeCommandListDestroy", list);
    driver.call("zeCommandListDestroy", immediate);
}

#[test]
fn the_stub_orders_a_list_without_the_in_order_flag_by_its_barriers_only() {
    let Some(path) = stub("lists-barriers", &[]) else {
        return;
    };
    let driver = Driver::open(&path);
    let immediate = driver.immediate();
    let (mut first, mut second) = (vec![0u8; 8], vec![0u8; 8]);
    let unordered = driver.regular(0).unwrap();
    assert_eq!(driver.fill(unordered, &mut first, &[5]), 0);
    assert_eq!(driver.copy(unordered, &mut second, &first), 0);
    assert_eq!(driver.call("zeCommandListClose", unordered), 0);
    assert_eq!(driver.execute(immediate, &[unordered]), 0);
    assert_eq!(
        (first.as_slice(), second.as_slice()),
        (&[5u8; 8][..], &[0u8; 8][..]),
        "without a barrier the copy ran before the fill"
    );
    first.fill(0);
    let ordered = driver.regular(0).unwrap();
    assert_eq!(driver.fill(ordered, &mut first, &[6]), 0);
    assert_eq!(driver.barrier(ordered), 0);
    assert_eq!(driver.copy(ordered, &mut second, &first), 0);
    assert_eq!(driver.call("zeCommandListClose", ordered), 0);
    assert_eq!(driver.execute(immediate, &[ordered]), 0);
    assert_eq!(second, [6; 8], "the barrier orders the copy after the fill");
    for list in [unordered, ordered, immediate] {
        driver.call("zeCommandListDestroy", list);
    }
}

/// A launch of saxpy over `buffers` (x, then y) with `scalars`.
fn saxpy<'a>(kernel: xhal_backend::KernelHandle, buffers: &'a [BufferArg], scalars: &'a [u8]) -> LaunchArgs<'a> {
    LaunchArgs {
        kernel,
        workgroups: [2, 1, 1],
        buffers,
        scalars,
    }
}

fn views(x: BufferHandle, y: BufferHandle) -> [BufferArg; 2] {
    [
        BufferArg {
            buffer: x,
            offset: 0,
            size: 64,
        },
        BufferArg {
            buffer: y,
            offset: 0,
            size: 64,
        },
    ]
}

fn scalars(multiplier: f32, count: u32) -> Vec<u8> {
    let mut bytes = multiplier.to_ne_bytes().to_vec();
    bytes.extend(count.to_ne_bytes());
    bytes
}

/// The bytes of `buffer` now.
fn read(backend: &LevelZeroBackend, stream: xhal_backend::StreamHandle, buffer: BufferHandle, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; size];
    // SAFETY: `out` outlives the synchronize.
    unsafe {
        backend
            .stream_read(stream, buffer, 0, out.as_mut_ptr(), size as u64)
            .unwrap()
    };
    backend.stream_synchronize(stream).unwrap();
    out
}

fn write(backend: &LevelZeroBackend, stream: xhal_backend::StreamHandle, buffer: BufferHandle, data: &[u8]) {
    // SAFETY: `data` outlives the synchronize.
    unsafe {
        backend
            .stream_write(stream, buffer, 0, data.as_ptr(), data.len() as u64)
            .unwrap()
    };
    backend.stream_synchronize(stream).unwrap();
}

fn open(path: &Path) -> (LevelZeroBackend, DeviceHandle) {
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path(path));
    let device = backend.device_open(0).unwrap();
    (backend, device)
}

#[test]
fn a_replayed_list_leaves_what_the_same_work_enqueued_eagerly_leaves() {
    let Some(path) = stub("lists-replay", &[]) else { return };
    let (backend, device) = open(&path);
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let (source, destination) = (
        backend.buffer_allocate(device, 64).unwrap(),
        backend.buffer_allocate(device, 64).unwrap(),
    );
    let initial: Vec<u8> = (0..64).collect();
    let (arguments, block) = (views(source, destination), scalars(2.5, 16));
    let launch = saxpy(kernel, &arguments, &block);
    // Fills, a copy, a copy between overlapping ranges of one buffer, a launch: each reads what
    // the one before wrote, so an order the stub may choose without barriers shows.
    let enqueue = || {
        backend.stream_fill(stream, destination, 0, 16, &[0xee]).unwrap();
        backend.stream_copy(stream, source, 16, destination, 16, 32).unwrap();
        backend.stream_copy(stream, destination, 0, destination, 8, 32).unwrap();
        backend.stream_fill(stream, destination, 48, 16, &[1, 2, 3, 4]).unwrap();
        backend.stream_launch(stream, &launch).unwrap();
    };
    let record = |list| {
        backend
            .command_list_append_fill(list, destination, 0, 16, &[0xee])
            .unwrap();
        backend
            .command_list_append_copy(list, source, 16, destination, 16, 32)
            .unwrap();
        backend
            .command_list_append_copy(list, destination, 0, destination, 8, 32)
            .unwrap();
        backend
            .command_list_append_fill(list, destination, 48, 16, &[1, 2, 3, 4])
            .unwrap();
        backend.command_list_append_launch(list, &launch).unwrap();
    };
    write(&backend, stream, source, &initial);
    write(&backend, stream, destination, &initial);
    enqueue();
    let eager = read(&backend, stream, destination, 64);
    let eager_launch = last_launch(&path);
    assert_eq!(eager_launch.launches, 1);
    assert_ne!(eager, initial, "the work changes the destination");

    write(&backend, stream, destination, &initial);
    let list = backend.command_list_create(device).unwrap();
    record(list);
    backend.command_list_finish(list).unwrap();
    assert_eq!(
        read(&backend, stream, destination, 64),
        initial,
        "a recorded list runs when it is submitted"
    );
    assert_eq!(last_launch(&path).launches, 1);
    backend.stream_submit_command_list(stream, list).unwrap();
    assert_eq!(read(&backend, stream, destination, 64), eager);
    let replayed = last_launch(&path);
    assert_eq!(replayed.launches, 2);
    assert_eq!(replayed.groups, eager_launch.groups);
    assert_eq!(replayed.arg_count, eager_launch.arg_count);
    assert_eq!(replayed.arg_size, eager_launch.arg_size);
    assert_eq!(
        replayed.arg_value, eager_launch.arg_value,
        "the replayed launch has the eager launch's addresses, scalars and lengths"
    );
    // Each submission runs the whole list again.
    write(&backend, stream, destination, &initial);
    backend.stream_submit_command_list(stream, list).unwrap();
    backend.stream_submit_command_list(stream, list).unwrap();
    assert_eq!(read(&backend, stream, destination, 64), eager);
    assert_eq!(last_launch(&path).launches, 4);
    backend.command_list_destroy(list);
    backend.stream_destroy(stream);
}

#[test]
fn a_recorded_launch_keeps_its_arguments_until_an_update_changes_them() {
    let Some(path) = stub("lists-update", &[]) else { return };
    let (backend, device) = open(&path);
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let buffers: Vec<BufferHandle> = (0..4).map(|_| backend.buffer_allocate(device, 64).unwrap()).collect();
    for (index, &buffer) in buffers.iter().enumerate() {
        write(&backend, stream, buffer, &[index as u8 + 1; 64]);
    }
    // The plain stub's device memory is host memory: a pointer argument is read back through.
    let first_byte_at = |record: &common::LastLaunch, argument: usize| {
        let address = u64::from_ne_bytes(record.arg_value[argument][..8].try_into().unwrap()) as usize;
        // SAFETY: the address of a live buffer of the plain stub, host memory.
        unsafe { *(address as *const u8) }
    };
    let list = backend.command_list_create(device).unwrap();
    let recorded = scalars(2.5, 16);
    backend
        .command_list_append_launch(list, &saxpy(kernel, &views(buffers[0], buffers[1]), &recorded))
        .unwrap();
    backend.command_list_finish(list).unwrap();
    // An eager launch of the same kernel sets other arguments on it after the list recorded.
    let eager = scalars(7.0, 3);
    backend
        .stream_launch(stream, &saxpy(kernel, &views(buffers[2], buffers[3]), &eager))
        .unwrap();
    backend.stream_submit_command_list(stream, list).unwrap();
    backend.stream_synchronize(stream).unwrap();
    let record = last_launch(&path);
    assert_eq!(record.launches, 2);
    assert_eq!(
        record.arg_value[2][..8],
        recorded[..],
        "the list's launch runs with the scalars it was recorded with"
    );
    assert_eq!((first_byte_at(&record, 0), first_byte_at(&record, 1)), (1, 2));

    let updated = scalars(-1.0, 9);
    backend
        .command_list_update_launch(list, 0, &saxpy(kernel, &views(buffers[3], buffers[2]), &updated))
        .unwrap();
    backend.stream_submit_command_list(stream, list).unwrap();
    backend.stream_synchronize(stream).unwrap();
    let record = last_launch(&path);
    assert_eq!(record.launches, 3);
    assert_eq!(record.arg_value[2][..8], updated[..]);
    assert_eq!(
        (first_byte_at(&record, 0), first_byte_at(&record, 1)),
        (4, 3),
        "the updated views"
    );
    // An update the kernel cannot take is refused, and the list still replays its last update.
    let error = backend
        .command_list_update_launch(list, 0, &saxpy(kernel, &views(buffers[3], buffers[2]), &[0; 4]))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    backend.stream_submit_command_list(stream, list).unwrap();
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(last_launch(&path).arg_value[2][..8], updated[..]);
    backend.command_list_destroy(list);
    backend.stream_destroy(stream);
}

/// The device must not lose what a queued submission names: the list's recording holds its
/// kernel (and the module) and buffers until the stream sees the submission complete.
#[test]
fn a_submitted_list_holds_what_it_names_until_the_submission_completes() {
    let Some(path) = stub("lists-lifetimes", &[]) else {
        return;
    };
    let (backend, device) = open(&path);
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let (x, y) = (
        backend.buffer_allocate(device, 64).unwrap(),
        backend.buffer_allocate(device, 64).unwrap(),
    );
    let list = backend.command_list_create(device).unwrap();
    backend
        .command_list_append_launch(list, &saxpy(kernel, &views(x, y), &scalars(1.0, 16)))
        .unwrap();
    backend.command_list_finish(list).unwrap();
    backend.kernel_destroy(kernel);
    backend.module_destroy(module);
    let alive = |path: &Path| {
        let record = last_launch(path);
        (record.kernels_alive, record.modules_alive)
    };
    assert_eq!(alive(&path), (1, 1), "held by the list");
    backend.stream_submit_command_list(stream, list).unwrap();
    backend.command_list_destroy(list);
    assert_eq!(alive(&path), (1, 1), "held by the queued submission");
    backend.stream_synchronize(stream).unwrap();
    assert_eq!(alive(&path), (0, 0), "released once the submission completed");
    backend.stream_destroy(stream);
}

/// How many regular lists of the stub at `path` are alive.
fn regular_lists(path: &Path) -> u32 {
    last_launch(path).regular_lists_alive
}

/// A submission the driver refuses returns its error, and leaves the list's recording free for
/// the next one: nothing will signal its event, so a recording left marked in flight would
/// never be taken again, and each later submission would record another list.
#[test]
fn a_refused_submission_names_the_call_and_frees_the_recording() {
    let Some(path) = stub("lists-refused", &[]) else { return };
    let (backend, device) = open(&path);
    let stream = backend.stream_create(device).unwrap();
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let list = backend.command_list_create(device).unwrap();
    backend.command_list_append_fill(list, buffer, 0, 16, &[3]).unwrap();
    backend.command_list_finish(list).unwrap();
    assert_eq!(regular_lists(&path), 1);
    // Out of host memory refuses the submission without failing the stream, so every attempt
    // reaches the driver.
    let attempts = 12;
    fail_next(
        &path,
        "zeCommandListImmediateAppendCommandListsExp",
        ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
        attempts,
    );
    for attempt in 0..attempts {
        let error = backend.stream_submit_command_list(stream, list).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory, "attempt {attempt}: {error}");
        assert!(
            error
                .message()
                .contains("zeCommandListImmediateAppendCommandListsExp failed"),
            "attempt {attempt}: {error}"
        );
        assert_eq!(
            regular_lists(&path),
            1,
            "attempt {attempt}: the refused submission's recording is taken again"
        );
    }
    backend.stream_submit_command_list(stream, list).unwrap();
    assert_eq!(
        read(&backend, stream, buffer, 16),
        [3; 16],
        "the stream and the list still work"
    );
    assert_eq!(regular_lists(&path), 1);
    backend.command_list_destroy(list);
    backend.stream_destroy(stream);
    assert_eq!(regular_lists(&path), 0);
}

/// A lost device reported by the submission itself is an execution-time error: it sticks to the
/// stream, as it would from the stream's synchronize, while the list stays usable elsewhere
/// (with a recording other than the one the failed stream may still run).
#[test]
fn a_device_lost_submitting_a_list_sticks_to_the_stream() {
    let Some(path) = stub("lists-lost", &[]) else { return };
    let (backend, device) = open(&path);
    let (lost, other) = (
        backend.stream_create(device).unwrap(),
        backend.stream_create(device).unwrap(),
    );
    let buffer = backend.buffer_allocate(device, 16).unwrap();
    let list = backend.command_list_create(device).unwrap();
    backend.command_list_append_fill(list, buffer, 0, 16, &[5]).unwrap();
    backend.command_list_finish(list).unwrap();
    fail_next(
        &path,
        "zeCommandListImmediateAppendCommandListsExp",
        ZE_RESULT_ERROR_DEVICE_LOST,
        1,
    );
    let error = backend.stream_submit_command_list(lost, list).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DeviceLost, "{error}");
    assert!(
        error
            .message()
            .contains("zeCommandListImmediateAppendCommandListsExp failed"),
        "{error}"
    );
    // The driver would accept the next calls; the stream refuses them with its error.
    assert_eq!(backend.stream_submit_command_list(lost, list).unwrap_err(), error);
    assert_eq!(backend.stream_fill(lost, buffer, 0, 16, &[1]).unwrap_err(), error);
    assert_eq!(backend.stream_query(lost).unwrap_err(), error);
    assert_eq!(backend.stream_synchronize(lost).unwrap_err(), error);
    backend.stream_submit_command_list(other, list).unwrap();
    assert_eq!(read(&backend, other, buffer, 16), [5; 16]);
    // The lost device may have left the failed submission's list running: its recording is
    // never taken again, and the other stream's submission records its own.
    assert_eq!(
        regular_lists(&path),
        2,
        "the recording a failed submission may still run was taken again"
    );
    backend.command_list_destroy(list);
    backend.stream_destroy(lost);
    backend.stream_destroy(other);
}

/// Two streams and a list of one copy between overlapping ranges of a buffer, which goes
/// through a bounce buffer; the counts of regular lists and allocations the stub has after it.
struct Overlapping {
    backend: LevelZeroBackend,
    streams: [xhal_backend::StreamHandle; 2],
    list: xhal_backend::CommandListHandle,
    buffer: BufferHandle,
    /// The same copies enqueued eagerly.
    eager: BufferHandle,
    allocations: u32,
}

impl Overlapping {
    fn new(path: &Path) -> Overlapping {
        let (backend, device) = open(path);
        let streams = [
            backend.stream_create(device).unwrap(),
            backend.stream_create(device).unwrap(),
        ];
        let initial: Vec<u8> = (0..64).collect();
        let (eager, buffer) = (
            backend.buffer_allocate(device, 64).unwrap(),
            backend.buffer_allocate(device, 64).unwrap(),
        );
        write(&backend, streams[0], eager, &initial);
        write(&backend, streams[0], buffer, &initial);
        let list = backend.command_list_create(device).unwrap();
        backend
            .command_list_append_copy(list, buffer, 0, buffer, 8, 32)
            .unwrap();
        backend.command_list_finish(list).unwrap();
        let (lists, allocations) = counts(path);
        assert_eq!(lists, 1);
        Overlapping {
            backend,
            streams,
            list,
            buffer,
            eager,
            allocations,
        }
    }

    /// Checks that the buffer holds what `submissions` copies enqueued eagerly leave.
    fn check(&self, submissions: usize) {
        for stream in self.streams {
            self.backend.stream_synchronize(stream).unwrap();
        }
        for _ in 0..submissions {
            self.backend
                .stream_copy(self.streams[0], self.eager, 0, self.eager, 8, 32)
                .unwrap();
        }
        assert_eq!(
            read(&self.backend, self.streams[0], self.buffer, 64),
            read(&self.backend, self.streams[0], self.eager, 64),
            "every submission ran"
        );
    }

    fn destroy(self, path: &Path) {
        self.backend.command_list_destroy(self.list);
        for stream in self.streams {
            self.backend.stream_destroy(stream);
        }
        assert_eq!(counts(path).0, 0);
    }
}

/// The regular lists and the allocations the stub at `path` has alive.
fn counts(path: &Path) -> (u32, u32) {
    let record = last_launch(path);
    (record.regular_lists_alive, record.allocations_alive)
}

/// Submissions that may still run when the next comes, here on two streams, use recordings of
/// their own, each with its own bounce buffer for a copy between overlapping ranges.
#[test]
fn recordings_that_may_run_together_have_bounce_buffers_of_their_own() {
    let Some(path) = stub("lists-bounces", &[]) else { return };
    let lists = Overlapping::new(&path);
    common::defer_completion(&path, true);
    lists
        .backend
        .stream_submit_command_list(lists.streams[0], lists.list)
        .unwrap();
    assert_eq!(counts(&path), (1, lists.allocations), "the list's recording");
    lists
        .backend
        .stream_submit_command_list(lists.streams[1], lists.list)
        .unwrap();
    assert_eq!(
        counts(&path),
        (2, lists.allocations + 1),
        "a second recording, with its own bounce buffer"
    );
    common::defer_completion(&path, false);
    lists.check(2);
    lists.destroy(&path);
}

/// A submission never waits for earlier ones, however many may still run: it records another
/// recording. Once they complete, recordings beyond the spares go.
#[test]
fn a_submission_never_waits_and_idle_recordings_beyond_the_spares_go() {
    let Some(path) = stub("lists-never-wait", &[]) else {
        return;
    };
    let lists = Overlapping::new(&path);
    common::defer_completion(&path, true);
    let submissions = 12u32;
    for submission in 0..submissions {
        lists
            .backend
            .stream_submit_command_list(lists.streams[submission as usize % 2], lists.list)
            .unwrap_or_else(|error| panic!("submission {submission}: {error}"));
        assert_eq!(
            counts(&path),
            (submission + 1, lists.allocations + submission),
            "submission {submission}: a recording for each submission that may run"
        );
    }
    common::defer_completion(&path, false);
    lists.check(submissions as usize);
    // Every recording is idle now: the next submission takes one, and four spares stay.
    lists
        .backend
        .stream_submit_command_list(lists.streams[1], lists.list)
        .unwrap();
    lists.backend.stream_synchronize(lists.streams[1]).unwrap();
    assert_eq!(counts(&path), (5, lists.allocations + 4));
    lists.destroy(&path);
}

/// An update the driver fails part way (closing, resetting or appending to a regular list)
/// returns the driver's error; the list keeps replaying its previous launch, and a later update
/// succeeds.
#[test]
fn a_list_recovers_from_an_update_the_driver_fails() {
    let Some(path) = stub("lists-update-fails", &[]) else {
        return;
    };
    let (backend, device) = open(&path);
    let stream = backend.stream_create(device).unwrap();
    let module = backend
        .module_load(device, KernelFormat::SPIRV_KERNEL, &spirv(SAXPY))
        .unwrap();
    let kernel = backend.kernel_get(module, "saxpy").unwrap();
    let (x, y) = (
        backend.buffer_allocate(device, 64).unwrap(),
        backend.buffer_allocate(device, 64).unwrap(),
    );
    let list = backend.command_list_create(device).unwrap();
    let mut current = scalars(1.0, 16);
    backend
        .command_list_append_launch(list, &saxpy(kernel, &views(x, y), &current))
        .unwrap();
    backend.command_list_finish(list).unwrap();
    let replayed = |backend: &LevelZeroBackend| {
        backend.stream_submit_command_list(stream, list).unwrap();
        backend.stream_synchronize(stream).unwrap();
        last_launch(&path).arg_value[2][..8].to_vec()
    };
    for (round, call) in [
        "zeCommandListClose",
        "zeCommandListReset",
        "zeCommandListAppendLaunchKernel",
    ]
    .into_iter()
    .enumerate()
    {
        // Several recordings, so that the update records more than one.
        common::defer_completion(&path, true);
        for _ in 0..3 {
            backend.stream_submit_command_list(stream, list).unwrap();
        }
        common::defer_completion(&path, false);
        let refused = scalars(round as f32 + 2.0, 16);
        fail_next(&path, call, ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY, 1);
        let error = backend
            .command_list_update_launch(list, 0, &saxpy(kernel, &views(x, y), &refused))
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{call}: {error}");
        assert!(error.message().contains(&format!("{call} failed")), "{call}: {error}");
        assert_eq!(replayed(&backend), current, "{call}: the previous launch replays");
        assert_eq!(regular_lists(&path), 1, "{call}: the recordings the update left went");
        current = scalars(-(round as f32) - 2.0, 16);
        backend
            .command_list_update_launch(list, 0, &saxpy(kernel, &views(x, y), &current))
            .unwrap();
        assert_eq!(replayed(&backend), current, "{call}: a later update succeeds");
    }
    backend.command_list_destroy(list);
    backend.stream_destroy(stream);
}

/// Without the entry point (a loader older than API 1.9), or with it over a driver that does
/// not list the extension (or cannot count its extensions sensibly), the device has no command
/// lists: core replays graphs op by op.
#[test]
fn without_the_append_extension_the_device_has_no_command_lists() {
    for (name, defines, native) in [
        ("lists-native", &[][..], true),
        ("lists-no-entry", &["STUB_NO_APPEND_LISTS"][..], false),
        ("lists-no-extension", &["STUB_NO_APPEND_LISTS_EXTENSION"][..], false),
        // A driver counting 2^32 - 1 extensions is refused as broken, not allocated for.
        ("lists-count-lies", &["STUB_EXTENSION_COUNT_LIES"][..], false),
    ] {
        let Some(path) = stub(name, defines) else { return };
        let (backend, device) = open(&path);
        match backend.command_list_create(device) {
            Ok(list) => {
                assert!(native, "{name}: a command list on a device without them");
                backend.command_list_destroy(list);
            }
            Err(error) => {
                assert!(!native, "{name}: {error}");
                assert_eq!(error.kind(), ErrorKind::Unsupported, "{name}: {error}");
            }
        }
        // Streams work the same either way.
        let stream = backend.stream_create(device).unwrap();
        let buffer = backend.buffer_allocate(device, 8).unwrap();
        backend.stream_fill(stream, buffer, 0, 8, &[4]).unwrap();
        assert_eq!(read(&backend, stream, buffer, 8), [4; 8], "{name}");
        backend.stream_destroy(stream);
    }
}

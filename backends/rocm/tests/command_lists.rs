//! Command lists (ABI 1.4) as HIP graphs, on the stub runtime (tests/stub_hip.c), which
//! captures copies, fills and launches with the rules of AMD's runtime; and the stub's own
//! capture rules, so that what the plugin is tested against is what HIP does.

mod support;

use std::ffi::{c_int, c_uint, c_void};
use support::{code_object, open_device, Stub};
use xhal_core::backend::{
    Backend, BufferArg, BufferHandle, CommandListHandle, DeviceHandle, KernelHandle, LaunchArgs, ModuleHandle,
    StreamHandle,
};
use xhal_core::{Buffer, Device, ErrorKind, GraphBuilder, GraphStream, KernelFormat, Stream};
use xhal_rocm::{RocmBackend, RocmDriver};

/// The buffers the copies and fills below work on.
struct Buffers {
    words: Buffer<u32>,
    halves: Buffer<u16>,
    bytes: Buffer<u8>,
}

fn buffers(device: &Device, stream: &Stream) -> Buffers {
    Buffers {
        words: device.alloc_from(stream, &[0u32; 64]).unwrap(),
        halves: device.alloc_from(stream, &[0u16; 64]).unwrap(),
        bytes: device.alloc_from(stream, &[0u8; 64]).unwrap(),
    }
}

fn contents(stream: &Stream, buffers: &Buffers) -> (Vec<u32>, Vec<u16>, Vec<u8>) {
    (
        stream.read_to_vec(&buffers.words).unwrap(),
        stream.read_to_vec(&buffers.halves).unwrap(),
        stream.read_to_vec(&buffers.bytes).unwrap(),
    )
}

/// A fill of each width, a write, a copy, and a copy between overlapping ranges (which the
/// list makes through a buffer of its own), recorded into `graph`.
fn record(graph: &mut GraphBuilder, lane: GraphStream, buffers: &Buffers) {
    graph.fill(lane, &buffers.words, 0x0102_0304u32).unwrap();
    graph.write(lane, buffers.words.slice(8..12), &[1, 2, 3, 4]).unwrap();
    graph
        .copy(lane, buffers.words.slice(0..16), buffers.words.slice(16..32))
        .unwrap();
    graph
        .copy(lane, buffers.words.slice(10..30), buffers.words.slice(14..34))
        .unwrap();
    graph.fill(lane, &buffers.halves, 0xbeefu16).unwrap();
    graph.fill(lane, buffers.bytes.slice(4..60), 0x5au8).unwrap();
}

/// The same operations as `record`, run on `stream` at once.
fn run(stream: &Stream, buffers: &Buffers) {
    stream.fill(&buffers.words, 0x0102_0304u32).unwrap();
    stream.write(buffers.words.slice(8..12), &[1, 2, 3, 4]).unwrap();
    stream
        .copy(buffers.words.slice(0..16), buffers.words.slice(16..32))
        .unwrap();
    stream
        .copy(buffers.words.slice(10..30), buffers.words.slice(14..34))
        .unwrap();
    stream.fill(&buffers.halves, 0xbeefu16).unwrap();
    stream.fill(buffers.bytes.slice(4..60), 0x5au8).unwrap();
}

/// The result the operations above must have, worked out by hand.
fn expected() -> (Vec<u32>, Vec<u16>, Vec<u8>) {
    let mut words = vec![0x0102_0304u32; 64];
    words[8..12].copy_from_slice(&[1, 2, 3, 4]);
    let first = words[0..16].to_vec();
    words[16..32].copy_from_slice(&first);
    let second = words[10..30].to_vec();
    words[14..34].copy_from_slice(&second);
    let mut bytes = vec![0u8; 64];
    bytes[4..60].fill(0x5a);
    (words, vec![0xbeef; 64], bytes)
}

/// A replay of a native list does what the same operations do eagerly, through one
/// hipGraphLaunch, every time it is replayed.
#[test]
fn a_replayed_list_does_what_eager_work_does() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    let device = open_device(RocmBackend::new(RocmDriver::with_library_path(&stub.path)));
    let stream = device.create_stream().unwrap();
    let eager = buffers(&device, &stream);
    run(&stream, &eager);
    assert_eq!(contents(&stream, &eager), expected());

    let replayed = buffers(&device, &stream);
    let mut builder = device.graph();
    let lane = builder.stream();
    record(&mut builder, lane, &replayed);
    let graph = builder.build().unwrap();
    assert!(graph.is_native(), "the stub runtime has graphs, so the list is native");
    // Captured work does not run.
    assert_eq!(contents(&stream, &replayed), (vec![0; 64], vec![0; 64], vec![0; 64]));
    assert_eq!(stub.last_capture_mode(), 2, "captures are in relaxed mode");
    let launches = stub.graph_launches();
    graph.replay(&stream).unwrap();
    assert_eq!(contents(&stream, &replayed), contents(&stream, &eager));
    assert!(stub.graph_launches() > launches);

    // Cleared, and replayed again: the graph does it all again.
    stream.fill(&replayed.words, 0u32).unwrap();
    stream.fill(&replayed.halves, 0u16).unwrap();
    stream.fill(&replayed.bytes, 0u8).unwrap();
    let launches = stub.graph_launches();
    graph.replay(&stream).unwrap();
    assert_eq!(contents(&stream, &replayed), expected());
    assert!(stub.graph_launches() > launches);
}

/// A runtime without the graph entry points still loads; the device has no command lists,
/// and graphs replay operation by operation with the same result.
#[test]
fn a_runtime_without_graphs_falls_back_to_replaying_operations() {
    let Some(stub) = Stub::without_graphs() else {
        return;
    };
    stub.set_devices(1);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let handle = backend.device_open(0).unwrap();
    let error = backend.command_list_create(handle).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
    assert!(error.message().contains("has no command lists"), "{error}");

    let device = open_device(backend);
    let stream = device.create_stream().unwrap();
    let replayed = buffers(&device, &stream);
    let mut builder = device.graph();
    let lane = builder.stream();
    record(&mut builder, lane, &replayed);
    let graph = builder.build().unwrap();
    assert!(!graph.is_native());
    graph.replay(&stream).unwrap();
    assert_eq!(contents(&stream, &replayed), expected());
    assert_eq!(stub.graph_launches(), 0);
    assert_eq!(stub.last_capture_mode(), -1, "nothing was captured");
}

/// ROCm 5.0 to 5.2 export the graph calls, but run a hipModuleLaunchKernel on a capturing
/// stream at once instead of capturing it: their devices have no command lists. ROCm 5.3 does.
#[test]
fn runtimes_before_rocm_5_3_have_no_command_lists() {
    for (version, native) in [(50_221_153, false), (50_300_000, true)] {
        let Some(stub) = Stub::new() else {
            return;
        };
        stub.set_devices(1);
        stub.set_runtime_version(version);
        let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
        let device = backend.device_open(0).unwrap();
        match backend.command_list_create(device) {
            Ok(list) => {
                assert!(native, "HIP_VERSION {version} got a command list");
                backend.command_list_destroy(list);
            }
            Err(error) => {
                assert!(!native, "HIP_VERSION {version}: {error}");
                assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
            }
        }
    }
}

/// The stub's device, a recording kernel `scale` (two buffers and an 8-byte scalar block,
/// workgroups of 64x2) and its module, a stream and two 256-byte buffers, the first holding
/// 0..=255.
struct Recording {
    stub: Stub,
    backend: RocmBackend,
    device: DeviceHandle,
    module: ModuleHandle,
    kernel: KernelHandle,
    stream: StreamHandle,
    data: BufferHandle,
    out: BufferHandle,
}

fn recording() -> Option<Recording> {
    recording_on(Stub::new()?)
}

/// `recording`, on streams that run their work only once something waits for it.
fn deferred_recording() -> Option<Recording> {
    let stub = Stub::new()?;
    stub.set_deferred(true);
    recording_on(stub)
}

fn recording_on(stub: Stub) -> Option<Recording> {
    stub.set_devices(1);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let device = backend.device_open(0).unwrap();
    let code = code_object::with_kernels(&[code_object::kernel(
        "scale",
        &[
            ("global_buffer", 8, Some("data")),
            ("global_buffer", 8, None),
            ("by_value", 8, Some("params")),
        ],
        Some([64, 2, 1]),
    )]);
    stub.set_kernels("scale");
    stub.set_parameter_sizes(&[8, 8, 8]);
    let module = backend.module_load(device, KernelFormat::HSACO, &code).unwrap();
    let kernel = backend.kernel_get(module, "scale").unwrap();
    let stream = backend.stream_create(device).unwrap();
    let data = backend.buffer_allocate(device, 256).unwrap();
    let out = backend.buffer_allocate(device, 256).unwrap();
    let pattern: Vec<u8> = (0..=255).collect();
    // SAFETY: `pattern` outlives the synchronize.
    unsafe { backend.stream_write(stream, data, 0, pattern.as_ptr(), 256).unwrap() };
    backend.stream_synchronize(stream).unwrap();
    Some(Recording {
        stub,
        backend,
        device,
        module,
        kernel,
        stream,
        data,
        out,
    })
}

impl Recording {
    /// `scale`'s buffers: a 64-byte view of `data` at `offset`, and all of `out`.
    fn views(&self, offset: u64) -> [BufferArg; 2] {
        [
            BufferArg {
                buffer: self.data,
                offset,
                size: 64,
            },
            BufferArg {
                buffer: self.out,
                offset: 0,
                size: 256,
            },
        ]
    }

    fn launch<'a>(&self, views: &'a [BufferArg], workgroups: [u32; 3], scalars: &'a [u8]) -> LaunchArgs<'a> {
        LaunchArgs {
            kernel: self.kernel,
            workgroups,
            buffers: views,
            scalars,
        }
    }

    /// A finished list of a fill of `out` and one launch (command 1).
    fn list(&self, scalars: &[u8]) -> xhal_core::Result<CommandListHandle> {
        let backend = &self.backend;
        let list = backend.command_list_create(self.device)?;
        backend.command_list_append_fill(list, self.out, 0, 256, &[7])?;
        let views = self.views(32);
        backend.command_list_append_launch(list, &self.launch(&views, [3, 2, 1], scalars))?;
        match backend.command_list_finish(list) {
            Ok(()) => Ok(list),
            Err(error) => {
                backend.command_list_destroy(list);
                Err(error)
            }
        }
    }

    /// What the last launch got: its grid and block, the first 4 bytes its buffer 0 points
    /// at, and its scalar block.
    fn last_launch(&self) -> ([u32; 6], Vec<u8>, Vec<u8>) {
        let address = usize::from_ne_bytes(self.stub.launch_parameter(0, 8).try_into().unwrap());
        // SAFETY: the stub's "device" pointers are host allocations, here into the 256-byte
        // `data`, still allocated, at most 96 bytes in.
        let pointed = unsafe { std::slice::from_raw_parts(address as *const u8, 4) }.to_vec();
        (self.stub.launch_dims(), pointed, self.stub.launch_parameter(2, 8))
    }
}

/// An update replaces a launch's arguments for the submissions after it: the graph is
/// captured again, not launched with what it held.
#[test]
fn an_updated_launch_runs_with_its_new_arguments() {
    let Some(setup) = recording() else {
        return;
    };
    let (backend, stub) = (&setup.backend, &setup.stub);
    let first = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let list = setup.list(&first).unwrap();
    assert_eq!(stub.launches(), 0, "captured launches do not run");
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    assert_eq!((stub.launches(), stub.graph_launches()), (1, 1));
    assert_eq!(
        setup.last_launch(),
        ([3, 2, 1, 64, 2, 1], vec![32, 33, 34, 35], first.to_vec())
    );
    let mut out = [0u8; 256];
    // SAFETY: the read's destination outlives the synchronize.
    unsafe {
        backend
            .stream_read(setup.stream, setup.out, 0, out.as_mut_ptr(), 256)
            .unwrap()
    };
    backend.stream_synchronize(setup.stream).unwrap();
    assert_eq!(out, [7u8; 256], "the list's fill ran before its launch");

    let second = [9u8, 10, 11, 12, 13, 14, 15, 16];
    let views = setup.views(96);
    backend
        .command_list_update_launch(list, 1, &setup.launch(&views, [5, 1, 1], &second))
        .unwrap();
    assert_eq!(stub.launches(), 1, "an update runs nothing");
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    assert_eq!((stub.launches(), stub.graph_launches()), (3, 3));
    assert_eq!(
        setup.last_launch(),
        ([5, 1, 1, 64, 2, 1], vec![96, 97, 98, 99], second.to_vec())
    );

    // An update the runtime cannot capture leaves the list as it was.
    stub.fail("hipGraphInstantiate", 2, 0);
    let views = setup.views(0);
    let error = backend
        .command_list_update_launch(list, 1, &setup.launch(&views, [1, 1, 1], &first))
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("hipGraphInstantiate failed: hipErrorOutOfMemory (2)"),
        "{error}"
    );
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    assert_eq!(
        setup.last_launch(),
        ([5, 1, 1, 64, 2, 1], vec![96, 97, 98, 99], second.to_vec())
    );
    backend.command_list_destroy(list);
}

/// A list's graphs are destroyed once no stream may still run them: a stream that launched
/// one keeps it until it is next idle, even after the list is gone.
#[test]
fn graphs_live_until_their_launches_are_done() {
    let Some(setup) = recording() else {
        return;
    };
    let (backend, stub) = (&setup.backend, &setup.stub);
    let list = setup.list(&[0; 8]).unwrap();
    assert_eq!(stub.graph_objects(), 2, "a graph and its executable form");
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    backend.command_list_destroy(list);
    assert_eq!(stub.graph_objects(), 2, "the stream still holds the launched graph");
    backend.stream_synchronize(setup.stream).unwrap();
    assert_eq!(stub.graph_objects(), 0);

    // A list never submitted goes with the list.
    let list = setup.list(&[0; 8]).unwrap();
    assert_eq!(stub.graph_objects(), 2);
    backend.command_list_destroy(list);
    assert_eq!(stub.graph_objects(), 0);
}

/// A capture or an instantiation that fails is an error naming the call, and leaves no
/// graph behind.
#[test]
fn a_failed_capture_names_the_call_and_leaks_no_graph() {
    let Some(setup) = recording() else {
        return;
    };
    let stub = &setup.stub;
    stub.fail("hipGraphInstantiate", 2, 0);
    let error = setup.list(&[0; 8]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory, "{error}");
    assert!(
        error
            .message()
            .contains("instantiating a command list's graph on xhal stub HIP device")
            && error
                .message()
                .contains("hipGraphInstantiate failed: hipErrorOutOfMemory (2)"),
        "{error}"
    );
    assert_eq!(stub.graph_objects(), 0);

    stub.fail("hipModuleLaunchKernel", 1, 0);
    let error = setup.list(&[0; 8]).unwrap_err();
    assert!(
        error.message().contains("capturing launching kernel `scale`")
            && error
                .message()
                .contains("hipModuleLaunchKernel failed: hipErrorInvalidValue (1)"),
        "{error}"
    );
    assert_eq!(stub.graph_objects(), 0, "the capture's graph was destroyed");
    assert_eq!(stub.launches(), 0);

    // The runtime works as before: a list builds and runs.
    stub.fail("", 0, 0);
    let list = setup.list(&[0; 8]).unwrap();
    setup.backend.stream_submit_command_list(setup.stream, list).unwrap();
    assert_eq!(stub.launches(), 1);
    setup.backend.command_list_destroy(list);
}

/// A fault the runtime reports for a launched graph is the stream's sticky error, as for any
/// other work on it.
#[test]
fn a_fault_in_a_launched_graph_sticks_to_the_stream() {
    let Some(setup) = recording() else {
        return;
    };
    let (backend, stub) = (&setup.backend, &setup.stub);
    let list = setup.list(&[0; 8]).unwrap();
    stub.fail("hipGraphLaunch", 700, 0);
    let error = backend.stream_submit_command_list(setup.stream, list).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert!(
        error
            .message()
            .contains("hipGraphLaunch failed: hipErrorIllegalAddress (700)"),
        "{error}"
    );
    stub.fail("", 0, 0);
    assert_eq!(backend.stream_synchronize(setup.stream).unwrap_err(), error);
    assert_eq!(
        backend.stream_fill(setup.stream, setup.out, 0, 4, &[1]).unwrap_err(),
        error
    );
    backend.command_list_destroy(list);
}

/// A list whose launch is queued keeps its kernel, and so the kernel's module, loaded until
/// the launch has run, however soon the application destroys list, kernel and module
/// (hipModuleUnload does not wait for the device).
#[test]
fn a_queued_submission_keeps_its_kernels_module_loaded() {
    let Some(setup) = deferred_recording() else {
        return;
    };
    let (backend, stub) = (&setup.backend, &setup.stub);
    let list = setup.list(&[0; 8]).unwrap();
    backend.stream_submit_command_list(setup.stream, list).unwrap();
    backend.command_list_destroy(list);
    backend.kernel_destroy(setup.kernel);
    backend.module_destroy(setup.module);
    assert_eq!(stub.launches(), 0, "the submission is queued still");
    backend.stream_synchronize(setup.stream).unwrap();
    assert_eq!(stub.launches(), 1);
    assert_eq!(stub.released_uses(), 0, "the launch ran with its module loaded");
    assert_eq!(stub.graph_objects(), 0, "the graphs went once the stream was idle");
}

/// The same holds for a launch made directly on a stream: its kernel's module stays loaded
/// until the stream has run it.
#[test]
fn a_queued_launch_keeps_its_kernels_module_loaded() {
    let Some(setup) = deferred_recording() else {
        return;
    };
    let (backend, stub) = (&setup.backend, &setup.stub);
    let views = setup.views(0);
    backend
        .stream_launch(setup.stream, &setup.launch(&views, [1, 1, 1], &[0; 8]))
        .unwrap();
    backend.kernel_destroy(setup.kernel);
    backend.module_destroy(setup.module);
    assert_eq!(stub.launches(), 0, "the launch is queued still");
    backend.stream_synchronize(setup.stream).unwrap();
    assert_eq!(stub.launches(), 1);
    assert_eq!(stub.released_uses(), 0, "the launch ran with its module loaded");
}

/// Copies `size` bytes of `bytes` from `from` to `to`, as a copy between overlapping ranges
/// does: through a copy of the source.
fn copy_within(bytes: &mut [u8], from: usize, to: usize, size: usize) {
    let source = bytes[from..from + size].to_vec();
    bytes[to..to + size].copy_from_slice(&source);
}

/// A list with a copy between overlapping ranges copies through a buffer of its own, which
/// every submission of the list uses. Submissions to different streams therefore run one
/// after the other on the device (each waits for the one before): nothing orders the launches
/// of one executable graph in HIP. Lists without such a buffer are not held back.
#[test]
fn submissions_of_a_list_with_a_bounce_buffer_run_in_order() {
    let Some(stub) = Stub::new() else {
        return;
    };
    stub.set_devices(1);
    stub.set_deferred(true);
    let backend = RocmBackend::new(RocmDriver::with_library_path(&stub.path));
    let device = backend.device_open(0).unwrap();
    let (first, second) = (
        backend.stream_create(device).unwrap(),
        backend.stream_create(device).unwrap(),
    );
    let buffer = backend.buffer_allocate(device, 256).unwrap();
    let mut expected: Vec<u8> = (0..=255).collect();
    // SAFETY: `expected` is unchanged until the synchronize.
    unsafe { backend.stream_write(first, buffer, 0, expected.as_ptr(), 256).unwrap() };
    backend.stream_synchronize(first).unwrap();
    let list = |from: u64, to: u64| {
        let list = backend.command_list_create(device).unwrap();
        backend
            .command_list_append_copy(list, buffer, from, buffer, to, 128)
            .unwrap();
        backend.command_list_append_fill(list, buffer, 252, 4, &[9]).unwrap();
        backend.command_list_finish(list).unwrap();
        list
    };

    let overlapping = list(0, 64);
    backend.stream_submit_command_list(first, overlapping).unwrap();
    backend.stream_submit_command_list(second, overlapping).unwrap();
    assert_eq!(stub.graph_launches(), 0, "both submissions are queued");
    backend.stream_synchronize(second).unwrap();
    assert_eq!(
        stub.graph_launches(),
        2,
        "the second submission ran after the first, which it waited for"
    );
    assert!(
        backend.stream_query(first).unwrap(),
        "the first stream's submission ran for the second's"
    );
    for _ in 0..2 {
        copy_within(&mut expected, 0, 64, 128);
        expected[252..].fill(9);
    }
    let mut contents = [0u8; 256];
    // SAFETY: `contents` outlives the synchronize.
    unsafe {
        backend
            .stream_read(first, buffer, 0, contents.as_mut_ptr(), 256)
            .unwrap()
    };
    backend.stream_synchronize(first).unwrap();
    assert_eq!(contents.to_vec(), expected);

    // A list without a buffer of its own is submitted as it is.
    let apart = list(0, 128);
    let launches = stub.graph_launches();
    backend.stream_submit_command_list(first, apart).unwrap();
    backend.stream_submit_command_list(second, apart).unwrap();
    backend.stream_synchronize(second).unwrap();
    assert_eq!(
        stub.graph_launches(),
        launches + 1,
        "only the second stream's submission ran"
    );
    backend.stream_synchronize(first).unwrap();
    assert_eq!(stub.graph_launches(), launches + 2);

    // Where the record after a launch fails, the next submission could not wait for the
    // launch: the host waits for it instead, before reporting the failure.
    stub.fail("hipEventRecord", 1, 0);
    let launches = stub.graph_launches();
    let error = backend.stream_submit_command_list(first, overlapping).unwrap_err();
    assert!(
        error
            .message()
            .contains("hipEventRecord failed: hipErrorInvalidValue (1)"),
        "{error}"
    );
    assert_eq!(
        stub.graph_launches(),
        launches + 1,
        "the launch ran before the error came back"
    );
    stub.fail("", 0, 0);
    backend.stream_submit_command_list(second, overlapping).unwrap();
    backend.stream_synchronize(second).unwrap();
    assert_eq!(stub.graph_launches(), launches + 2);

    for list in [overlapping, apart] {
        backend.command_list_destroy(list);
    }
    backend.buffer_free(buffer);
    backend.stream_destroy(first);
    backend.stream_destroy(second);
    assert_eq!(stub.released_uses(), 0);
}

type StreamCreate = unsafe extern "C" fn(*mut *mut c_void, c_uint) -> c_int;
type BeginCapture = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type EndCapture = unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> c_int;
type OnStream = unsafe extern "C" fn(*mut c_void) -> c_int;
type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type MemsetD8 = unsafe extern "C" fn(*mut c_void, u8, usize, *mut c_void) -> c_int;
type Instantiate = unsafe extern "C" fn(*mut *mut c_void, *mut c_void, *mut *mut c_void, *mut u8, usize) -> c_int;
type GraphLaunch = unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int;
type Destroy = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The stub refuses what AMD's runtime refuses around a capture (ROCm's clr, hip_graph.cpp,
/// hip_stream.cpp, hip_internal.hpp), so a plugin that breaks HIP's rules fails here too.
#[test]
fn the_stub_captures_by_hips_rules() {
    let Some(stub) = Stub::new() else {
        return;
    };
    let create: StreamCreate = stub.function("hipStreamCreateWithFlags");
    let begin: BeginCapture = stub.function("hipStreamBeginCapture");
    let end: EndCapture = stub.function("hipStreamEndCapture");
    let synchronize: OnStream = stub.function("hipStreamSynchronize");
    let query: OnStream = stub.function("hipStreamQuery");
    let malloc: Malloc = stub.function("hipMalloc");
    let free: Destroy = stub.function("hipFree");
    let memset: MemsetD8 = stub.function("hipMemsetD8Async");
    let instantiate: Instantiate = stub.function("hipGraphInstantiate");
    let launch: GraphLaunch = stub.function("hipGraphLaunch");
    let destroy_exec: Destroy = stub.function("hipGraphExecDestroy");
    let destroy_graph: Destroy = stub.function("hipGraphDestroy");
    let null = std::ptr::null_mut::<c_void>();
    // SAFETY: the stub's functions, called with their C signatures on handles it made; the
    // memory set is the 16 bytes hipMalloc gave.
    unsafe {
        let (mut stream, mut memory, mut graph, mut exec) = (null, null, null, null);
        assert_eq!(create(&mut stream, 1), 0);
        assert_eq!(malloc(&mut memory, 16), 0);
        let bytes = || std::slice::from_raw_parts(memory as *const u8, 16).to_vec();
        assert_eq!(memset(memory, 0, 16, stream), 0);
        assert_eq!(bytes(), [0u8; 16], "run at once outside a capture");
        assert_eq!(begin(null, 2), 900, "no capture on the null stream");
        assert_eq!(begin(stream, 3), 1, "no such capture mode");

        // Global mode: an allocation during the capture is refused and breaks it.
        assert_eq!(begin(stream, 0), 0);
        assert_eq!(begin(stream, 2), 401, "already capturing");
        assert_eq!(synchronize(stream), 900);
        assert_eq!(query(stream), 900);
        assert_eq!(malloc(&mut graph, 16), 900);
        assert_eq!(memset(memory, 1, 16, stream), 901, "the capture is invalidated");
        assert_eq!(end(stream, &mut graph), 901);
        assert!(graph.is_null());
        assert_eq!(end(stream, &mut graph), 401, "no capture is open");

        // Relaxed mode allows it; the captured work runs only when the graph is launched.
        assert_eq!(begin(stream, 2), 0);
        let mut other = null;
        assert_eq!(malloc(&mut other, 16), 0);
        assert_eq!(free(other), 0);
        assert_eq!(memset(memory, 0x5a, 16, stream), 0);
        assert_eq!(bytes(), [0u8; 16], "captured, not run");
        assert_eq!(end(stream, &mut graph), 0);
        assert!(!graph.is_null());
        assert_eq!(launch(graph, stream), 1, "a graph is not an executable graph");
        assert_eq!(instantiate(&mut exec, graph, null.cast(), std::ptr::null_mut(), 0), 0);
        assert_eq!(destroy_graph(graph), 0);
        assert_eq!(destroy_graph(graph), 401, "destroyed already");
        assert_eq!(launch(exec, stream), 0, "the executable graph outlives its graph");
        assert_eq!(bytes(), [0x5au8; 16]);
        assert_eq!(destroy_exec(exec), 0);
        assert_eq!(launch(exec, stream), 1, "destroyed");
        assert_eq!(stub.graph_objects(), 0);
        assert_eq!(synchronize(stream), 0);
        assert_eq!(free(memory), 0);
    }
}

//! ABI evolution: how this host treats plugins of other minor and major versions, proven
//! against plugins whose tables are laid out byte by byte in C
//! (`tests/abi_evolution/evolution_plugin.c`, one variant per build).
//!
//! "The host never reads or calls beyond the plugin's `struct_size`" is checked in the two
//! ways a violation shows: entries beyond `struct_size` are traps that end the process with
//! status 86, and tables placed so that `struct_size` ends where an unreadable page begins
//! end the process with SIGSEGV on any read past it. Each test therefore runs its body in a
//! child process (this test binary, run again for that one test) and reads the child's end.
//!
//! The plugins are compiled here with `$CC` (or `cc`); without a C compiler each test prints
//! `SKIPPED: ...` on stderr and passes without running.
//!
//! Each minor's optional entries are driven on both sides: the newer-minor plugin has them and
//! the host calls them; the 1.0 table lacks them and the host takes the documented fallback
//! (`unsupported` naming the entry, or, for 1.4's command lists, graphs replayed op by op).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use xhal_core::abi::{
    XHAL_ABI_MAJOR, XHAL_ABI_MINOR, XHAL_DEVICE_INFO_V1_0_SIZE, XHAL_KERNEL_FORMAT_VENDOR_BASE,
    XHAL_LAUNCH_INFO_V1_0_SIZE, XHAL_PLUGIN_API_V1_0_SIZE,
};
use xhal_core::backend::Backend;
use xhal_core::plugin::load_plugin;
use xhal_core::{Device, ErrorKind, Graph, KernelFormat, Launch, Runtime};

/// Set in the child process: the plugin library its test body loads.
const PLUGIN_UNDER_TEST: &str = "XHAL_ABI_EVOLUTION_PLUGIN";

/// The exit status of a trap entry in the C plugin.
const TRAP_EXIT_STATUS: i32 = 86;

/// The C plugin's own kernel format.
const ZOO_KERNEL_FORMAT: KernelFormat = KernelFormat(XHAL_KERNEL_FORMAT_VENDOR_BASE + 0xE70);

const PLUGIN_NAME: &str = "zoo_evolution";

/// Size of a table that ends just before `kernel_get`: the v1.0 table less its last two entries.
const TRUNCATED_TABLE_SIZE: usize = XHAL_PLUGIN_API_V1_0_SIZE - 2 * std::mem::size_of::<usize>();

fn c_compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// `target/<profile>`, from this test binary's path (`target/<profile>/deps/...`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("test binary lives in target/<profile>/deps")
}

/// Compiles variant `variant` of the C plugin, or says why it cannot and returns `None`.
fn build_variant(variant: &str) -> Option<PathBuf> {
    let compiler = c_compiler();
    if Command::new(&compiler).arg("--version").output().is_err() {
        eprintln!("SKIPPED: the ABI evolution plugin ({variant}) is not built because no C compiler `{compiler}` was found (set CC)");
        return None;
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = manifest.join("tests/abi_evolution/evolution_plugin.c");
    let include = manifest.join("../../include");
    let dir = target_dir().join("abi-evolution").join(variant.to_lowercase());
    std::fs::create_dir_all(&dir).expect("create the plugin build folder");
    let library = dir.join(format!("libxhal_{PLUGIN_NAME}.so"));
    let output = Command::new(&compiler)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
            "-fPIC",
            "-shared",
            "-pthread",
        ])
        .arg(format!("-DZOO_VARIANT_{variant}"))
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .output()
        .expect("run the C compiler");
    assert!(
        output.status.success(),
        "{compiler} failed to build variant {variant} of {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    Some(library)
}

/// Runs `body` on the plugin built as `variant`, in a child process. `test_name` must be the
/// name of the calling test: the child runs exactly that test, which then finds the plugin in
/// its environment and runs `body` itself.
fn in_child_process(test_name: &str, variant: &str, body: fn(&Path)) {
    if let Some(library) = std::env::var_os(PLUGIN_UNDER_TEST) {
        body(Path::new(&library));
        return;
    }
    let Some(library) = build_variant(variant) else {
        return;
    };
    let output = Command::new(std::env::current_exe().expect("test binary path"))
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(PLUGIN_UNDER_TEST, &library)
        .output()
        .expect("run the test binary again as a child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let cause = match (output.status.code(), signal_of(&output.status)) {
        (Some(0), _) => None,
        (Some(TRAP_EXIT_STATUS), _) => Some(
            "the host called an entry that lies beyond the plugin's struct_size (a trap entry ended the process)"
                .to_owned(),
        ),
        (_, Some(11)) => Some(
            "the host read beyond the plugin's struct_size (SIGSEGV on the unreadable page after the table)".to_owned(),
        ),
        (_, Some(signal)) => Some(format!("the child process was killed by signal {signal}")),
        (Some(code), _) => Some(format!("the child process exited with status {code}")),
        (None, None) => Some("the child process ended without a status".to_owned()),
    };
    if let Some(cause) = cause {
        panic!(
            "{test_name} on plugin variant {variant}: {cause}\n--- child stdout\n{stdout}\n--- child stderr\n{stderr}"
        );
    }
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "the child process did not run exactly the test {test_name}:\n{stdout}"
    );
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn signal_of(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

fn runtime_with(library: &Path) -> Runtime {
    Runtime::builder()
        .without_plugin_search()
        .without_static_backends()
        .plugin(library)
        .device_selector(None)
        .build()
        .expect("a runtime holding the evolution plugin")
}

fn refusal(library: &Path) -> xhal_core::Error {
    match load_plugin(library) {
        Ok(plugin) => {
            // A host that ignored struct_size got this far: drive the entries a truncated
            // table lacks, so that their traps end the process and the parent names the fault.
            exercise_kernel_entries(plugin.backend);
            panic!("{} loaded, expected a refusal", library.display())
        }
        Err(error) => error,
    }
}

fn exercise_kernel_entries(backend: Arc<xhal_core::plugin::AbiBackend>) {
    let backend: Arc<dyn Backend> = backend;
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(backend)
        .build()
        .expect("a runtime of the one plugin");
    let device = runtime.open(&format!("{PLUGIN_NAME}:0")).expect("device 0");
    let module = device.load_module(ZOO_KERNEL_FORMAT, b"").expect("module");
    drop(module.kernel("add_scalar"));
}

/// Writes, fills, copies, launches both kernels, times two events and reads an error back:
/// every host path a plugin's table serves.
fn exercise_every_path(device: &Device) {
    let stream = device.create_stream().expect("stream");
    let numbers = device.alloc_from(&stream, &[1u32, 2, 3, 4]).expect("buffer from data");
    let copy = device.alloc::<u32>(4).expect("buffer");
    stream.fill(&copy, 7u32).expect("fill");
    assert_eq!(stream.read_to_vec(&copy).expect("read"), [7, 7, 7, 7]);
    stream.copy(&numbers, &copy).expect("copy");

    let module = device.load_module(ZOO_KERNEL_FORMAT, b"zoo kernels").expect("module");
    let add = module.kernel("add_scalar").expect("kernel add_scalar");
    let start = device.create_event().expect("timing event");
    let end = device.create_event().expect("timing event");
    stream.record(&start).expect("record start");
    stream
        .launch(&Launch::new(&add).buffer(&copy).scalar(10u32).workgroups(1, 1, 1))
        .expect("launch add_scalar");
    stream.record(&end).expect("record end");
    stream.synchronize().expect("synchronize");
    end.elapsed_since(&start).expect("elapsed time between the events");
    assert_eq!(stream.read_to_vec(&copy).expect("read"), [11, 12, 13, 14]);

    let report = module
        .kernel("report_launch_struct_size")
        .expect("kernel report_launch_struct_size");
    let seen = device.alloc::<u64>(1).expect("buffer");
    stream.launch(&Launch::new(&report).buffer(&seen)).expect("launch");
    assert_eq!(
        stream.read_to_vec(&seen).expect("read"),
        [XHAL_LAUNCH_INFO_V1_0_SIZE as u64],
        "the host passes the XhalLaunchInfo struct_size of the ABI it speaks"
    );

    let missing = module
        .kernel("no_such_kernel")
        .expect_err("an unknown kernel name is an error");
    assert_eq!(missing.kind(), ErrorKind::NotFound, "{missing}");
    assert!(missing.message().contains("no such kernel"), "{missing}");
    stream.synchronize().expect("synchronize");
}

fn check_device_info(device: &Device) {
    let info = device.info();
    assert_eq!(info.name, "zoo evolution device");
    assert_eq!(info.vendor, "xhal plugin zoo");
    assert_eq!(info.kernel_formats, [ZOO_KERNEL_FORMAT]);
    assert_eq!(info.total_memory, 64 << 20);
    assert_eq!(
        info.driver_version,
        format!("host ABI {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR}, device-info struct_size {XHAL_DEVICE_INFO_V1_0_SIZE}"),
        "the plugin reports what the host passed to xhal_plugin_query and device_get_info"
    );
}

/// A plugin of the next minor: its table is longer than this host's and ends in entries this
/// host does not know (traps if called), its errors are a larger `XhalError`, and it knows a
/// device-info field the host's struct lacks (written only when the host's `struct_size`
/// has room for it, which the host's does not). It has the optional entries of 1.1 and 1.3,
/// and implements the 1.4 command lists: its graphs replay natively.
#[test]
fn a_newer_minor_plugin_with_a_longer_table_loads_and_works() {
    in_child_process(
        "a_newer_minor_plugin_with_a_longer_table_loads_and_works",
        "NEWER_MINOR",
        |library| {
            let runtime = runtime_with(library);
            let entry = runtime.backend(PLUGIN_NAME).expect("the plugin is a backend");
            assert_eq!(entry.backend().info().abi_version, (XHAL_ABI_MAJOR, XHAL_ABI_MINOR + 1));
            let device = runtime.open(&format!("{PLUGIN_NAME}:0")).expect("device 0");
            check_device_info(&device);
            exercise_every_path(&device);
            // The 1.1 entry, which this plugin has: called.
            let usage = device.memory_usage().expect("device_memory_usage");
            assert_eq!((usage.free, usage.total), (16 << 20, 64 << 20));
            // The 1.3 entries, which this plugin has: called.
            check_device_timestamps(&device);
            // The 1.4 entries, which this plugin implements: each graph segment is one of its
            // command lists, submitted once per replay (two replays, then one after the update).
            let graph = check_graph(&device);
            assert!(graph.is_native(), "a plugin with command lists replays graphs natively");
            assert_eq!(list_submissions(&device), 3, "each replay submitted the plugin's list");
            // The 1.5 entries, which this plugin has: its range, and streams of a priority in it,
            // requests beyond it clamped by the host before the plugin sees them.
            let priorities = device.stream_priorities().expect("device_stream_priorities");
            assert_eq!((priorities.least, priorities.greatest), (0, -2));
            for (asked, given) in [(-1, -1), (-9, -2), (4, 0)] {
                let stream = device
                    .create_stream_with_priority(asked)
                    .expect("stream_create_with_priority");
                assert_eq!(stream.priority(), given, "a stream asked for priority {asked}");
                check_stream_works(&device, &stream);
            }
        },
    );
}

/// A table of exactly the v1.0 size, ending where an unreadable page begins: an older minor
/// than this host. It loads and works, the host answers for the 1.1 and 1.3 entries it lacks
/// (`unsupported`), replays graphs op by op for lack of the 1.4 command lists, and the
/// unreadable page proves the host reads none of the entries beyond its `struct_size`.
#[test]
fn a_v1_0_table_loads_and_works_and_nothing_beyond_its_struct_size_is_read() {
    in_child_process(
        "a_v1_0_table_loads_and_works_and_nothing_beyond_its_struct_size_is_read",
        "V1_0_TABLE_AT_PAGE_END",
        |library| {
            let runtime = runtime_with(library);
            let entry = runtime.backend(PLUGIN_NAME).expect("the plugin is a backend");
            assert_eq!(entry.backend().info().abi_version, (XHAL_ABI_MAJOR, 0));
            let device = runtime.open(&format!("{PLUGIN_NAME}:0")).expect("device 0");
            check_device_info(&device);
            exercise_every_path(&device);
            // The host is 1.1; device_memory_usage lies beyond this table, in the unreadable
            // page: the host answers for the plugin instead of reading it.
            let error = device
                .memory_usage()
                .expect_err("a 1.0 plugin has no device_memory_usage");
            assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
            assert!(
                error.message().contains("device_memory_usage is an ABI 1.1 entry"),
                "{error}"
            );
            // The 1.3 entries lie in the unreadable page too: unsupported, and a trace still
            // times the plugin's operations from elapsed times.
            let error = device.clock().expect_err("a 1.0 plugin has no device_clock");
            assert_eq!(error.kind(), ErrorKind::Unsupported, "{error}");
            assert!(error.message().contains("device_clock is an ABI 1.3 entry"), "{error}");
            let stream = device.create_stream().expect("stream");
            let event = device.create_event().expect("timing event");
            stream.record(&event).expect("record");
            stream.synchronize().expect("synchronize");
            let error = event
                .device_timestamp()
                .expect_err("a 1.0 plugin has no event_timestamp");
            assert!(
                error.message().contains("event_timestamp is an ABI 1.3 entry"),
                "{error}"
            );
            let clocks = traced_device_clocks(&device);
            assert!(
                !clocks.is_empty() && clocks.iter().all(|clock| clock == "device-elapsed"),
                "a 1.0 plugin's device spans are timed from elapsed times: {clocks:?}"
            );
            // The 1.4 command-list entries lie in the unreadable page too: the host replays
            // each graph segment op by op with the 1.0 entries, with the same results.
            let graph = check_graph(&device);
            assert!(!graph.is_native(), "a 1.0 plugin's graphs replay op by op");
            assert_eq!(list_submissions(&device), 0, "nothing was submitted as a command list");
            // The 1.5 entries lie in the unreadable page too: one priority, 0, and a stream asked
            // for another is a plain stream.
            let priorities = device.stream_priorities().expect("priorities of a 1.0 plugin");
            assert_eq!(priorities, xhal_core::StreamPriorities::SINGLE);
            let stream = device
                .create_stream_with_priority(-1)
                .expect("a stream asked for priority -1");
            assert_eq!(stream.priority(), 0);
            check_stream_works(&device, &stream);
        },
    );
}

/// A fill and a read on `stream` give the filled bytes.
fn check_stream_works(device: &Device, stream: &xhal_core::Stream) {
    let buffer = device.alloc::<u32>(8).expect("buffer");
    stream.fill(&buffer, 0x0102_0304u32).expect("fill");
    assert_eq!(stream.read_to_vec(&buffer).expect("read"), vec![0x0102_0304u32; 8]);
}

/// Records a graph of a fill, a launch of `add_scalar` and a copy on one stream, replays it
/// twice, updates the launch to another buffer and scalar, and replays it once more, checking
/// the bytes after each step. Returns the graph, so the caller can ask how it replayed.
fn check_graph(device: &Device) -> Graph {
    let stream = device.create_stream().expect("stream");
    let filled = device.alloc::<u32>(4).expect("buffer");
    let accumulated = device.alloc_from(&stream, &[1u32, 2, 3, 4]).expect("buffer from data");
    let other = device.alloc_from(&stream, &[0u32; 4]).expect("buffer from data");
    let copied = device.alloc::<u32>(4).expect("buffer");
    stream.synchronize().expect("synchronize");
    let module = device.load_module(ZOO_KERNEL_FORMAT, b"zoo kernels").expect("module");
    let add = module.kernel("add_scalar").expect("kernel add_scalar");

    let mut builder = device.graph();
    let lane = builder.stream();
    builder.fill(lane, &filled, 7u32).expect("record a fill");
    let node = builder
        .launch(
            lane,
            &Launch::new(&add).buffer(&accumulated).scalar(10u32).workgroups(1, 1, 1),
        )
        .expect("record a launch");
    builder.copy(lane, &accumulated, &copied).expect("record a copy");
    let graph = builder.build().expect("build the graph");

    // Each replay runs every command again: the launch adds 10 each time.
    graph.replay(&stream).expect("replay");
    graph.replay(&stream).expect("replay again");
    stream.synchronize().expect("synchronize");
    assert_eq!(stream.read_to_vec(&filled).expect("read"), [7; 4]);
    assert_eq!(stream.read_to_vec(&accumulated).expect("read"), [21, 22, 23, 24]);
    assert_eq!(stream.read_to_vec(&copied).expect("read"), [21, 22, 23, 24]);

    // The launch now adds 100 to `other`, a view of the same size; `accumulated` stays.
    graph
        .update_launch(
            node,
            &Launch::new(&add).buffer(&other).scalar(100u32).workgroups(1, 1, 1),
        )
        .expect("update the launch");
    graph.replay(&stream).expect("replay after the update");
    stream.synchronize().expect("synchronize");
    assert_eq!(stream.read_to_vec(&other).expect("read"), [100; 4]);
    assert_eq!(stream.read_to_vec(&accumulated).expect("read"), [21, 22, 23, 24]);
    assert_eq!(stream.read_to_vec(&copied).expect("read"), [21, 22, 23, 24]);
    graph
}

/// How many command lists the zoo's streams have run so far, as its `report_list_submissions`
/// kernel reports it.
fn list_submissions(device: &Device) -> u64 {
    let stream = device.create_stream().expect("stream");
    let module = device.load_module(ZOO_KERNEL_FORMAT, b"zoo kernels").expect("module");
    let report = module
        .kernel("report_list_submissions")
        .expect("kernel report_list_submissions");
    let count = device.alloc::<u64>(1).expect("buffer");
    stream.launch(&Launch::new(&report).buffer(&count)).expect("launch");
    stream.read_to_vec(&count).expect("read")[0]
}

/// The 1.3 entries of a plugin that has them: a clock reading, event timestamps inside the
/// host's windows, and device spans of a trace that carry no `clock` marker.
fn check_device_timestamps(device: &Device) {
    let clock = device.clock().expect("device_clock");
    let stream = device.create_stream().expect("stream");
    let event = device.create_event().expect("timing event");
    let before = std::time::Instant::now();
    stream.record(&event).expect("record");
    stream.synchronize().expect("synchronize");
    let after = std::time::Instant::now();
    let completed = clock.to_instant(event.device_timestamp().expect("event_timestamp"));
    assert!(
        before <= completed && completed <= after,
        "{before:?} <= {completed:?} <= {after:?}"
    );
    let clocks = traced_device_clocks(device);
    assert!(
        !clocks.is_empty() && clocks.iter().all(|clock| clock == "device"),
        "a 1.3 plugin's device spans come from its timestamps: {clocks:?}"
    );
}

/// Traces a fill, a launch, a copy and a record on a fresh stream and returns each device
/// span's clock: its `clock` argument, or `device` where it has none.
fn traced_device_clocks(device: &Device) -> Vec<String> {
    let folder = std::env::temp_dir().join(format!("xhal-evolution-trace-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("trace folder");
    let path = folder.join("trace.json");
    let session = xhal_core::trace::start(&path).expect("start a trace");
    let stream = device.create_stream().expect("stream");
    let buffer = device.alloc::<u32>(4).expect("buffer");
    let event = device.create_event().expect("timing event");
    let copy = device.alloc::<u32>(4).expect("buffer");
    let module = device.load_module(ZOO_KERNEL_FORMAT, b"zoo kernels").expect("module");
    let add = module.kernel("add_scalar").expect("kernel add_scalar");
    stream.fill(&buffer, 3u32).expect("fill");
    stream
        .launch(&Launch::new(&add).buffer(&buffer).scalar(1u32).workgroups(1, 1, 1))
        .expect("launch add_scalar");
    stream.copy(&buffer, &copy).expect("copy");
    stream.record(&event).expect("record");
    stream.synchronize().expect("synchronize");
    session.stop().expect("stop the trace");
    let text = std::fs::read_to_string(&path).expect("read the trace");
    let _ = std::fs::remove_dir_all(&folder);
    let host = u64::from(std::process::id());
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim().trim_end_matches(',')).ok())
        .filter(|record| record["ph"] == "X" && record["pid"].as_u64().is_some_and(|pid| pid != host))
        .map(|record| record["args"]["clock"].as_str().unwrap_or("device").to_string())
        .collect()
}

fn check_truncated_refusal(error: &xhal_core::Error) {
    assert_eq!(error.kind(), ErrorKind::PluginLoad, "{error}");
    let message = error.message();
    assert!(
        message.contains(&format!("struct_size is {TRUNCATED_TABLE_SIZE} bytes")),
        "{error}"
    );
    assert!(
        message.ends_with("lie beyond the plugin's struct_size: kernel_get, kernel_destroy"),
        "the refusal names exactly the entries beyond struct_size: {error}"
    );
}

/// The v1.0 table less its last two entries, whose slots in memory hold traps. v1.0 is the
/// oldest ABI, so such a table is refused, naming the entries beyond its `struct_size`; a
/// host that read those slots would find them filled, and calling them ends the process.
#[test]
fn a_table_truncated_before_kernel_get_is_refused_naming_the_entries_beyond_it() {
    in_child_process(
        "a_table_truncated_before_kernel_get_is_refused_naming_the_entries_beyond_it",
        "TRUNCATED_TRAPPED",
        |library| check_truncated_refusal(&refusal(library)),
    );
}

/// The same truncated table, ending where an unreadable page begins: the refusal is made
/// without reading a byte past `struct_size`.
#[test]
fn a_table_truncated_before_kernel_get_is_refused_without_reading_beyond_it() {
    in_child_process(
        "a_table_truncated_before_kernel_get_is_refused_without_reading_beyond_it",
        "TRUNCATED_AT_PAGE_END",
        |library| check_truncated_refusal(&refusal(library)),
    );
}

fn check_major_refusal(error: &xhal_core::Error, plugin_version: &str) {
    assert_eq!(error.kind(), ErrorKind::PluginLoad, "{error}");
    assert!(
        error.message().contains(&format!(
            "plugin implements ABI {plugin_version}, this host speaks {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR}: major versions must match"
        )),
        "{error}"
    );
}

/// A plugin of the next major whose table is only the header that every version begins with
/// (`struct_size`, `abi_major`, `abi_minor`), before an unreadable page: the host refuses it
/// by its version, naming both, having read nothing else.
#[test]
fn a_newer_major_plugin_is_refused_by_its_header_naming_both_versions() {
    in_child_process(
        "a_newer_major_plugin_is_refused_by_its_header_naming_both_versions",
        "MAJOR_ABOVE",
        |library| check_major_refusal(&refusal(library), &format!("{}.3", XHAL_ABI_MAJOR + 1)),
    );
}

/// A plugin of the previous major with a complete, working table is refused all the same.
#[test]
fn an_older_major_plugin_is_refused_naming_both_versions() {
    in_child_process(
        "an_older_major_plugin_is_refused_naming_both_versions",
        "MAJOR_BELOW",
        |library| check_major_refusal(&refusal(library), &format!("{}.9", XHAL_ABI_MAJOR - 1)),
    );
}

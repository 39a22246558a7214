//! Loading plugins: the real CPU plugin, and a zoo of broken ones. Every broken plugin must
//! give a clear error naming the file and the reason, and the process must survive.
//!
//! The plugins are cdylibs of this workspace; `make test` builds them first
//! (`cargo build --workspace`). A missing one fails the test with that instruction.

mod support;

use std::path::{Path, PathBuf};
use xhal::abi::{XHAL_ABI_MAJOR, XHAL_ABI_MINOR};
use xhal::backend::Backend;
use xhal::plugin::load_plugin;
use xhal::{ErrorKind, Runtime};

fn zoo(name: &str) -> PathBuf {
    support::built_library(&format!("libxhal_zoo_{name}.so"))
}

fn load_error(path: &Path) -> xhal::Error {
    match load_plugin(path) {
        Ok(plugin) => panic!("{} loaded as {:?}, expected an error", path.display(), plugin.backend),
        Err(error) => error,
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xhal-loading-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

#[test]
fn nonexistent_path_is_an_error_naming_the_path() {
    let error = load_error(Path::new("/nonexistent/libxhal_ghost.so"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(error.message().contains("/nonexistent/libxhal_ghost.so"), "{error}");
    assert!(error.message().contains("cannot open"), "{error}");
}

#[test]
fn a_file_that_is_not_a_library_is_an_error() {
    let dir = temp_dir("text");
    let path = dir.join("libxhal_text.so");
    std::fs::write(&path, "this is not an ELF file\n").expect("write");
    let error = load_error(&path);
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(error.message().contains("not a loadable shared library"), "{error}");
    assert!(error.message().contains("libxhal_text.so"), "{error}");
}

#[test]
fn a_directory_is_not_a_plugin() {
    let dir = temp_dir("dir");
    let error = load_error(&dir);
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(error.message().contains("not a file"), "{error}");
}

#[test]
fn a_library_without_the_query_symbol_is_an_error() {
    let error = load_error(&zoo("no_query"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(
        error.message().contains("does not export `xhal_plugin_query`"),
        "{error}"
    );
}

#[test]
fn a_query_returning_null_is_an_error() {
    let error = load_error(&zoo("null_query"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(error.message().contains("returned null"), "{error}");
    assert!(
        error
            .message()
            .contains(&format!("declined host ABI {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR}")),
        "{error}"
    );
}

#[test]
fn an_abi_major_mismatch_is_an_error() {
    let error = load_error(&zoo("abi_major"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(
        error
            .message()
            .contains(&format!(
                "plugin implements ABI 2.{XHAL_ABI_MINOR}, this host speaks {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR}: major versions must match"
            )),
        "the refusal names the plugin's version and the host's: {error}"
    );
}

#[test]
fn a_table_below_the_v1_0_size_is_an_error() {
    let error = load_error(&zoo("small_table"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(error.message().contains("struct_size is 16 bytes"), "{error}");
}

#[test]
fn a_table_with_a_null_entry_is_refused_up_front() {
    let error = load_error(&zoo("missing_entry"));
    assert_eq!(error.kind(), ErrorKind::PluginLoad);
    assert!(
        error
            .message()
            .contains("lacks required ABI 1.0 entries: stream_launch"),
        "{error}"
    );
}

#[test]
fn a_panicking_rust_plugin_reports_errors_and_the_host_survives() {
    let plugin = load_plugin(&zoo("panicking")).expect("the panicking plugin loads: only its entries panic");
    let backend = plugin.backend.clone();
    assert_eq!(backend.info().name, "zoo_panicking");
    let error = backend.device_count().expect_err("device_count panics");
    assert_eq!(error.kind(), ErrorKind::Internal);
    assert!(error.message().contains("plugin panicked in device_count"), "{error}");
    assert!(error.message().contains("on purpose"), "{error}");
    // Again, to show that a panic does not poison the plugin for later calls.
    let again = backend.device_info(0).expect_err("device_info panics");
    assert!(
        again.message().contains("plugin panicked in device_get_info"),
        "{again}"
    );
    // Destroy entries swallow the panic: nothing to report to, and nothing may unwind into C.
    backend.buffer_free(xhal::backend::BufferHandle(1));
}

#[test]
fn loading_the_same_file_twice_gives_the_same_plugin() {
    let path = support::built_library("libxhal_cpu.so");
    let first = load_plugin(&path).expect("cpu plugin loads");
    let second = load_plugin(&path).expect("cpu plugin loads again");
    assert!(std::sync::Arc::ptr_eq(&first.backend, &second.backend));
}

/// The ABI 1.1 entry through the boundary: a Rust plugin reports its device's memory, and
/// memory taken by a buffer shows as used.
#[test]
fn memory_usage_crosses_the_plugin_boundary() {
    let path = support::built_library("libxhal_cpu.so");
    let loaded = load_plugin(&path).expect("cpu plugin loads");
    let runtime = Runtime::builder()
        .without_static_backends()
        .without_plugin_search()
        .backend(loaded.backend.clone())
        .build()
        .expect("a runtime with the plugin");
    let device = runtime.open("cpu:0").expect("cpu device");
    let before = device.memory_usage().expect("memory usage");
    assert_eq!(before.total, device.info().total_memory);
    let buffer = device.alloc::<u8>(1 << 20).expect("1 MiB");
    let during = device.memory_usage().expect("memory usage");
    assert!(during.free <= before.free - (1 << 20), "{before:?} then {during:?}");
    drop(buffer);
}

#[test]
fn discovery_survives_a_folder_of_broken_plugins() {
    let dir = temp_dir("folder");
    for name in [
        "no_query",
        "null_query",
        "abi_major",
        "small_table",
        "missing_entry",
        "panicking",
    ] {
        std::fs::copy(zoo(name), dir.join(format!("libxhal_zoo_{name}.so"))).expect("copy zoo plugin");
    }
    std::fs::write(dir.join("libxhal_garbage.so"), b"\x7fELF but not really").expect("write");
    let runtime = Runtime::builder()
        .plugin_folders([dir.clone()])
        .device_selector(None)
        .build()
        .expect("discovery never fails on a bad plugin");
    let report = runtime.report();
    let outcome_of = |file: &str| {
        report
            .plugins
            .iter()
            .find(|attempt| attempt.path.file_name().and_then(|n| n.to_str()) == Some(file))
            .map(|attempt| outcome_text(&attempt.outcome))
            .unwrap_or_else(|| panic!("{file} not in the report: {report:?}"))
    };
    assert!(outcome_of("libxhal_garbage.so").contains("not a loadable shared library"));
    assert!(outcome_of("libxhal_zoo_no_query.so").contains("does not export"));
    assert!(outcome_of("libxhal_zoo_abi_major.so").contains("major versions must match"));
    let panicking = outcome_of("libxhal_zoo_panicking.so");
    assert!(
        panicking.contains("Loaded") && panicking.contains("plugin panicked in device_count"),
        "{panicking}"
    );
    // The built-in CPU backend is still there and usable.
    let device = runtime.open("cpu:0").expect("cpu device");
    let stream = device.create_stream().expect("stream");
    let buffer = device.alloc_from(&stream, &[7u32, 8, 9]).expect("upload");
    assert_eq!(stream.read_to_vec(&buffer).expect("download"), [7, 8, 9]);
}

fn outcome_text(outcome: &xhal::PluginOutcome) -> String {
    format!("{outcome:?}")
}

#[test]
fn a_plugin_takes_precedence_over_the_builtin_of_the_same_name() {
    let path = support::built_library("libxhal_cpu.so");
    let runtime = Runtime::builder()
        .without_plugin_search()
        .plugin(&path)
        .device_selector(None)
        .build()
        .expect("runtime with the cpu plugin");
    let cpu = runtime.backend("cpu").expect("cpu backend");
    match &cpu.source {
        xhal::BackendSource::Plugin { path: loaded } => {
            assert_eq!(loaded, &std::fs::canonicalize(&path).expect("canonical path"))
        }
        other => panic!("cpu should come from the plugin, came from {other:?}"),
    }
    let shadowed: Vec<_> = runtime
        .shadowed_backends()
        .iter()
        .map(|b| (b.name().to_owned(), b.source.clone()))
        .collect();
    assert_eq!(shadowed, [("cpu".to_owned(), xhal::BackendSource::Static)]);

    // The loaded plugin does real work through the C ABI.
    let device = runtime.open("cpu:0").expect("cpu device through the plugin");
    let stream = device.create_stream().expect("stream");
    let data: Vec<u32> = (0..1000).collect();
    let buffer = device.alloc_from(&stream, &data).expect("upload");
    assert_eq!(stream.read_to_vec(&buffer).expect("download"), data);
    let error = stream
        .read(buffer.slice(999..), &mut [0u32; 2])
        .expect_err("out of bounds");
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
}

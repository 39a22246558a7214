//! The `plugin` area: the C ABI itself, seen from the plugin file as a host sees it.
//!
//! These tests open the library and call `xhal_plugin_query` and table entries directly,
//! because the host's own checks (in `xhal-core`) would otherwise hide what the plugin does.

use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, Requirement, TestCase, TestResult, Verdict};
use xhal::abi::{self as abi, XhalDeviceInfo, XhalError, XhalPluginApi, XhalPluginQueryFn, XhalStr};

pub(super) fn tests() -> Vec<TestCase> {
    let plugin = Requirement::PLUGIN_FILE;
    vec![
        test_case!(
            "plugin.abi.query_returns_a_v1_table",
            "xhal_plugin_query(1, 0) returns a table of major 1 that reaches at least the v1.0 size",
            plugin,
            query_returns_v1_table
        ),
        test_case!(
            "plugin.abi.query_returns_the_same_table",
            "repeated calls of xhal_plugin_query return the same table",
            plugin,
            query_is_stable
        ),
        test_case!(
            "plugin.abi.other_major_is_declined",
            "a host of another major version (0 or 2) is declined with null, never handed a table claiming its major",
            plugin,
            other_major_declined
        ),
        test_case!(
            "plugin.abi.newer_minor_is_served",
            "a host with a newer minor version (1.999) is served the major-1 table",
            plugin,
            newer_minor_served
        ),
        test_case!(
            "plugin.abi.v1_entries_present",
            "every v1.0 entry of the table is non-null",
            plugin,
            v1_entries_present
        ),
        test_case!(
            "plugin.metadata.name",
            "the plugin name is non-empty UTF-8, a valid backend name, and matches the file name libxhal_<name>",
            plugin,
            metadata_name
        ),
        test_case!(
            "plugin.metadata.version",
            "the plugin version is non-empty, valid UTF-8",
            plugin,
            metadata_version
        ),
        test_case!(
            "plugin.metadata.device_strings",
            "every device's name is non-empty UTF-8, and its vendor, driver version and PCI bus id are valid UTF-8",
            plugin,
            device_strings
        ),
        test_case!(
            "plugin.struct_size.device_info_respected",
            "device_get_info writes nothing beyond the struct_size the host passes, even a v1.0 size below sizeof",
            plugin,
            device_info_respects_struct_size
        ),
        test_case!(
            "plugin.struct_size.device_info_formats_bounded",
            "device_get_info reports at most XHAL_MAX_KERNEL_FORMATS kernel formats",
            plugin,
            device_info_format_count
        ),
        test_case!(
            "plugin.struct_size.error_objects",
            "an error object has a struct_size reaching its message, and a code equal to the returned status",
            plugin,
            error_object_shape
        ),
        test_case!(
            "plugin.errors.message_is_utf8",
            "a failing entry describes the failure with a non-empty UTF-8 message",
            plugin,
            error_message_utf8
        ),
        test_case!(
            "plugin.errors.null_error_pointer",
            "a failing entry given a null error pointer returns its status without writing an error",
            plugin,
            null_error_pointer
        ),
        test_case!(
            "plugin.errors.known_status",
            "a device index past the count is refused with a documented status code",
            plugin,
            known_status
        ),
        test_case!(
            "plugin.null_safety.destroy_entries",
            "every destroy entry, and error_free, accepts null and does nothing",
            plugin,
            destroy_entries_accept_null
        ),
        test_case!(
            "plugin.device.count_is_stable",
            "device_count returns the same number each time it is asked",
            plugin,
            device_count_stable
        ),
        test_case!(
            "plugin.device.open_close_raw",
            "a device opened through the raw table gives a non-null handle and closes cleanly, twice over",
            plugin,
            open_close_raw
        ),
    ]
}

/// The plugin library, opened again (the dynamic linker hands back the same mapping).
struct RawPlugin {
    library: libloading::Library,
}

impl RawPlugin {
    fn open(context: &TestContext) -> Result<RawPlugin, Verdict> {
        let path = context
            .target()
            .plugin_path()
            .ok_or_else(|| Verdict::skip("the backend is not loaded from a plugin file"))?;
        // SAFETY: the file was already loaded as this run's plugin; opening it again maps the
        // same library and runs no new initialisers.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|error| Verdict::fail(format!("cannot reopen {}: {error}", path.display())))?;
        Ok(RawPlugin { library })
    }

    fn query_function(&self) -> Result<XhalPluginQueryFn, Verdict> {
        let name = format!("{}\0", abi::XHAL_PLUGIN_QUERY_SYMBOL);
        // SAFETY: the symbol has the documented signature; that is the ABI contract under test.
        unsafe { self.library.get::<XhalPluginQueryFn>(name.as_bytes()) }
            .map(|symbol| *symbol)
            .map_err(|_| Verdict::fail(format!("the library does not export {}", abi::XHAL_PLUGIN_QUERY_SYMBOL)))
    }

    /// Calls the query with a host version; the raw pointer it returned.
    fn query(&self, major: u32, minor: u32) -> Result<*const XhalPluginApi, Verdict> {
        let query = self.query_function()?;
        // SAFETY: calling the plugin's exported query as the ABI defines it.
        Ok(unsafe { query(major, minor) })
    }

    /// The table for this host (1.0), copied into a zeroed full-size table so an entry beyond
    /// the plugin's struct_size reads as null, as the host does.
    fn table(&self) -> Result<XhalPluginApi, Verdict> {
        let pointer = self.query(abi::XHAL_ABI_MAJOR, abi::XHAL_ABI_MINOR)?;
        if pointer.is_null() {
            return Err(Verdict::fail("xhal_plugin_query(1, 0) returned null"));
        }
        // SAFETY: a non-null table starts with its struct_size, readable per the ABI.
        let size = unsafe { (*pointer).struct_size };
        if size < abi::XHAL_PLUGIN_API_V1_0_SIZE {
            return Err(Verdict::mismatch(
                "the table is smaller than v1.0",
                format!(">= {}", abi::XHAL_PLUGIN_API_V1_0_SIZE),
                size,
            ));
        }
        let mut table = XhalPluginApi::without_entries(XhalStr::EMPTY, XhalStr::EMPTY);
        let copied = size.min(std::mem::size_of::<XhalPluginApi>());
        // SAFETY: the plugin guarantees `size` readable bytes; we copy no more than both sides know.
        unsafe {
            std::ptr::copy_nonoverlapping(
                pointer as *const u8,
                &mut table as *mut XhalPluginApi as *mut u8,
                copied,
            )
        };
        Ok(table)
    }
}

fn utf8(text: XhalStr, what: &str) -> Result<String, Verdict> {
    if text.ptr.is_null() && text.len != 0 {
        return Err(Verdict::fail(format!("{what}: null pointer with length {}", text.len)));
    }
    // SAFETY: the ABI makes the plugin's strings readable for `len` bytes while it is loaded.
    let bytes = unsafe { text.as_bytes() };
    String::from_utf8(bytes.to_vec())
        .map_err(|error| Verdict::mismatch(format!("{what} is not valid UTF-8"), "UTF-8 text", error.to_string()))
}

fn entry<T>(entry: Option<T>, name: &str) -> Result<T, Verdict> {
    entry.ok_or_else(|| Verdict::fail(format!("the table's `{name}` entry is null")))
}

fn query_returns_v1_table(context: &TestContext) -> TestResult {
    let plugin = RawPlugin::open(context)?;
    let table = plugin.table()?;
    check_eq(table.abi_major, abi::XHAL_ABI_MAJOR, "abi_major of the table")
}

fn query_is_stable(context: &TestContext) -> TestResult {
    let plugin = RawPlugin::open(context)?;
    let first = plugin.query(1, 0)?;
    let second = plugin.query(1, 0)?;
    check(first == second, || {
        format!("two calls returned different tables ({first:p} then {second:p}); the table must be one static object")
    })
}

fn other_major_declined(context: &TestContext) -> TestResult {
    let plugin = RawPlugin::open(context)?;
    for major in [0u32, 2] {
        let pointer = plugin.query(major, 0)?;
        if !pointer.is_null() {
            // SAFETY: a non-null table is readable per the ABI.
            let claimed = unsafe { (*pointer).abi_major };
            if claimed == major {
                return Err(Verdict::mismatch(
                    format!("a host of ABI {major}.0 was handed a table claiming major {major}"),
                    "null, or a table of major 1 that the host refuses",
                    format!("a table of major {claimed}"),
                ));
            }
        }
    }
    Ok(())
}

fn newer_minor_served(context: &TestContext) -> TestResult {
    let plugin = RawPlugin::open(context)?;
    let pointer = plugin.query(1, 999)?;
    check(!pointer.is_null(), || {
        "xhal_plugin_query(1, 999) returned null; any minor of the same major must be served".to_string()
    })?;
    // SAFETY: non-null, readable per the ABI.
    check_eq(
        unsafe { (*pointer).abi_major },
        1,
        "abi_major of the table served to 1.999",
    )
}

fn v1_entries_present(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let entries: [(&str, bool); 27] = [
        ("error_free", table.error_free.is_some()),
        ("device_count", table.device_count.is_some()),
        ("device_get_info", table.device_get_info.is_some()),
        ("device_open", table.device_open.is_some()),
        ("device_close", table.device_close.is_some()),
        ("buffer_allocate", table.buffer_allocate.is_some()),
        ("buffer_free", table.buffer_free.is_some()),
        ("stream_create", table.stream_create.is_some()),
        ("stream_destroy", table.stream_destroy.is_some()),
        ("stream_write", table.stream_write.is_some()),
        ("stream_read", table.stream_read.is_some()),
        ("stream_copy", table.stream_copy.is_some()),
        ("stream_fill", table.stream_fill.is_some()),
        ("stream_launch", table.stream_launch.is_some()),
        ("stream_record_event", table.stream_record_event.is_some()),
        ("stream_wait_event", table.stream_wait_event.is_some()),
        ("stream_synchronize", table.stream_synchronize.is_some()),
        ("stream_query", table.stream_query.is_some()),
        ("event_create", table.event_create.is_some()),
        ("event_destroy", table.event_destroy.is_some()),
        ("event_query", table.event_query.is_some()),
        ("event_synchronize", table.event_synchronize.is_some()),
        ("event_elapsed_time", table.event_elapsed_time.is_some()),
        ("module_load", table.module_load.is_some()),
        ("module_destroy", table.module_destroy.is_some()),
        ("kernel_get", table.kernel_get.is_some()),
        ("kernel_destroy", table.kernel_destroy.is_some()),
    ];
    let missing: Vec<&str> = entries
        .iter()
        .filter(|(_, present)| !present)
        .map(|(name, _)| *name)
        .collect();
    check(missing.is_empty(), || {
        format!("v1.0 entries are null: {}", missing.join(", "))
    })
}

fn metadata_name(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let name = utf8(table.plugin_name, "plugin_name")?;
    check(!name.is_empty(), || "plugin_name is empty".to_string())?;
    check(xhal::plugin::adapter::is_valid_backend_name(&name), || {
        format!("plugin_name `{name}` is not a valid backend name (lowercase letter, then a-z 0-9 _ -, at most 64)")
    })?;
    let path = context.target().plugin_path().unwrap_or(std::path::Path::new(""));
    let from_file = xhal::plugin::loader::backend_name_of_file(path);
    check_eq(
        from_file.as_deref(),
        Some(name.as_str()),
        "the backend name the file name gives",
    )
}

fn metadata_version(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let version = utf8(table.plugin_version, "plugin_version")?;
    check(!version.trim().is_empty(), || "plugin_version is empty".to_string())
}

/// Calls device_get_info for `index` into `info`; the status and any error's message.
fn raw_device_info(
    table: &XhalPluginApi,
    index: u32,
    info: *mut XhalDeviceInfo,
) -> Result<(u32, Option<String>), Verdict> {
    let get_info = entry(table.device_get_info, "device_get_info")?;
    let mut error: *mut XhalError = std::ptr::null_mut();
    // SAFETY: `info` points to a writable XhalDeviceInfo of at least its struct_size; `error`
    // is a valid out-pointer.
    let status = unsafe { get_info(index, info, &mut error) };
    Ok((status, take_error(table, error)?))
}

/// Reads and frees an error object.
fn take_error(table: &XhalPluginApi, error: *mut XhalError) -> Result<Option<String>, Verdict> {
    if error.is_null() {
        return Ok(None);
    }
    // SAFETY: a non-null error is a plugin-allocated XhalError, readable until error_free.
    let message = unsafe { utf8((*error).message, "error message") };
    let free = entry(table.error_free, "error_free")?;
    // SAFETY: freeing the error with the same plugin's error_free, once.
    unsafe { free(error) };
    message.map(Some)
}

fn device_count(table: &XhalPluginApi) -> Result<u32, Verdict> {
    let count_entry = entry(table.device_count, "device_count")?;
    let mut count = 0u32;
    let mut error: *mut XhalError = std::ptr::null_mut();
    // SAFETY: valid out-pointers.
    let status = unsafe { count_entry(&mut count, &mut error) };
    let message = take_error(table, error)?;
    if status != abi::XHAL_STATUS_OK {
        return Err(Verdict::fail(format!(
            "device_count failed with status {status}: {}",
            message.unwrap_or_default()
        )));
    }
    Ok(count)
}

fn device_strings(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    for index in 0..device_count(&table)? {
        let mut info = XhalDeviceInfo::new();
        let (status, message) = raw_device_info(&table, index, &mut info)?;
        check_eq(
            status,
            abi::XHAL_STATUS_OK,
            &format!("device_get_info({index}) status ({message:?})"),
        )?;
        let name = utf8(info.name, "device name")?;
        check(!name.trim().is_empty(), || format!("device {index} has an empty name"))?;
        utf8(info.vendor, "vendor")?;
        utf8(info.driver_version, "driver_version")?;
        utf8(info.pci_bus_id, "pci_bus_id")?;
    }
    Ok(())
}

fn device_info_respects_struct_size(context: &TestContext) -> TestResult {
    const GUARD: u8 = 0xA5;
    let table = RawPlugin::open(context)?.table()?;
    // A buffer larger than the struct, filled with a guard pattern; the host claims only v1.0.
    let total = std::mem::size_of::<XhalDeviceInfo>() + 64;
    let mut storage = vec![0u64; total.div_ceil(8)];
    let bytes = storage.as_mut_ptr() as *mut u8;
    // SAFETY: `storage` holds `total` bytes, 8-byte aligned as XhalDeviceInfo needs.
    unsafe { std::ptr::write_bytes(bytes, GUARD, total) };
    let info = bytes as *mut XhalDeviceInfo;
    // SAFETY: writing the first field of a suitably aligned, large enough buffer.
    unsafe { (*info).struct_size = abi::XHAL_DEVICE_INFO_V1_0_SIZE };
    let (status, message) = raw_device_info(&table, context.device_index(), info)?;
    check_eq(
        status,
        abi::XHAL_STATUS_OK,
        &format!("device_get_info status ({message:?})"),
    )?;
    // SAFETY: reading back bytes of our own buffer.
    let after = unsafe {
        std::slice::from_raw_parts(
            bytes.add(abi::XHAL_DEVICE_INFO_V1_0_SIZE),
            total - abi::XHAL_DEVICE_INFO_V1_0_SIZE,
        )
    };
    match after.iter().position(|&byte| byte != GUARD) {
        None => Ok(()),
        Some(position) => Err(Verdict::mismatch(
            format!(
                "device_get_info wrote byte {} of the struct, beyond the struct_size {} it was given",
                abi::XHAL_DEVICE_INFO_V1_0_SIZE + position,
                abi::XHAL_DEVICE_INFO_V1_0_SIZE
            ),
            format!("{GUARD:#04x}"),
            format!("{:#04x}", after[position]),
        )),
    }
}

fn device_info_format_count(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let mut info = XhalDeviceInfo::new();
    let (status, message) = raw_device_info(&table, context.device_index(), &mut info)?;
    check_eq(
        status,
        abi::XHAL_STATUS_OK,
        &format!("device_get_info status ({message:?})"),
    )?;
    check(
        info.kernel_format_count as usize <= abi::XHAL_MAX_KERNEL_FORMATS && info.kernel_format_count > 0,
        || {
            format!(
                "kernel_format_count is {}; it must be 1..={}",
                info.kernel_format_count,
                abi::XHAL_MAX_KERNEL_FORMATS
            )
        },
    )
}

/// A call every plugin must refuse: information about the device one past the last.
fn failing_call(table: &XhalPluginApi, error: *mut *mut XhalError) -> Result<u32, Verdict> {
    let count = device_count(table)?;
    let get_info = entry(table.device_get_info, "device_get_info")?;
    let mut info = XhalDeviceInfo::new();
    // SAFETY: valid pointers; `error` is null or a valid out-pointer.
    Ok(unsafe { get_info(count, &mut info, error) })
}

fn error_object_shape(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let mut error: *mut XhalError = std::ptr::null_mut();
    let status = failing_call(&table, &mut error)?;
    check(status != abi::XHAL_STATUS_OK, || {
        "device_get_info(count) succeeded".to_string()
    })?;
    if error.is_null() {
        return Err(Verdict::fail(format!(
            "device_get_info(count) failed with status {status} but wrote no error object"
        )));
    }
    // SAFETY: a non-null error is readable until freed.
    let (size, code) = unsafe { ((*error).struct_size, (*error).code) };
    take_error(&table, error)?;
    check(size >= abi::XHAL_ERROR_V1_0_SIZE, || {
        format!(
            "the error's struct_size is {size}, below {} (the v1.0 size)",
            abi::XHAL_ERROR_V1_0_SIZE
        )
    })?;
    check_eq(code, status, "the error's code against the status returned")
}

fn error_message_utf8(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let mut error: *mut XhalError = std::ptr::null_mut();
    let status = failing_call(&table, &mut error)?;
    check(status != abi::XHAL_STATUS_OK, || {
        "device_get_info(count) succeeded".to_string()
    })?;
    let message = take_error(&table, error)?.unwrap_or_default();
    check(!message.trim().is_empty(), || "the error message is empty".to_string())
}

fn null_error_pointer(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let status = failing_call(&table, std::ptr::null_mut())?;
    check(status != abi::XHAL_STATUS_OK, || {
        "device_get_info(count) succeeded with a null error pointer".to_string()
    })
}

fn known_status(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let mut error: *mut XhalError = std::ptr::null_mut();
    let status = failing_call(&table, &mut error)?;
    take_error(&table, error)?;
    check(
        matches!(
            status,
            abi::XHAL_STATUS_INVALID_ARGUMENT | abi::XHAL_STATUS_OUT_OF_BOUNDS | abi::XHAL_STATUS_NOT_FOUND
        ),
        || {
            format!("device index past the count gave status {status}; expected INVALID_ARGUMENT (1), OUT_OF_BOUNDS (2) or NOT_FOUND (5)")
        },
    )
}

fn destroy_entries_accept_null(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    // SAFETY: the ABI requires each of these to accept null and do nothing; a crash here is
    // the failure this test exists to find (reported as crashed when run isolated).
    unsafe {
        entry(table.error_free, "error_free")?(std::ptr::null_mut());
        entry(table.kernel_destroy, "kernel_destroy")?(std::ptr::null_mut());
        entry(table.module_destroy, "module_destroy")?(std::ptr::null_mut());
        entry(table.event_destroy, "event_destroy")?(std::ptr::null_mut());
        entry(table.stream_destroy, "stream_destroy")?(std::ptr::null_mut());
        entry(table.buffer_free, "buffer_free")?(std::ptr::null_mut());
        entry(table.device_close, "device_close")?(std::ptr::null_mut());
    }
    Ok(())
}

fn device_count_stable(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let first = device_count(&table)?;
    let second = device_count(&table)?;
    check_eq(second, first, "device_count asked a second time")?;
    check(first > 0, || {
        "device_count is 0 although the backend listed devices".to_string()
    })
}

fn open_close_raw(context: &TestContext) -> TestResult {
    let table = RawPlugin::open(context)?.table()?;
    let open = entry(table.device_open, "device_open")?;
    let close = entry(table.device_close, "device_close")?;
    for round in 1..=2 {
        let mut device: *mut abi::XhalDevice = std::ptr::null_mut();
        let mut error: *mut XhalError = std::ptr::null_mut();
        // SAFETY: valid out-pointers.
        let status = unsafe { open(context.device_index(), &mut device, &mut error) };
        let message = take_error(&table, error)?;
        check_eq(
            status,
            abi::XHAL_STATUS_OK,
            &format!("device_open status, round {round} ({message:?})"),
        )?;
        check(!device.is_null(), || {
            format!("device_open returned OK and a null handle, round {round}")
        })?;
        // SAFETY: closing the handle just opened, once, with nothing created on it.
        unsafe { close(device) };
    }
    Ok(())
}

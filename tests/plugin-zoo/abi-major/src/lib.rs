//! A plugin from the future: it implements ABI 2.0 and answers a 1.x host anyway.

use xhal_abi::{XhalPluginApi, XhalStr, XHAL_PLUGIN_API_V1_0_SIZE};

static TABLE: XhalPluginApi = XhalPluginApi {
    struct_size: XHAL_PLUGIN_API_V1_0_SIZE,
    abi_major: 2,
    abi_minor: 0,
    plugin_name: XhalStr::from_str("zoo_abi_major"),
    plugin_version: XhalStr::from_str("2.0.0"),
    error_free: None,
    device_count: None,
    device_get_info: None,
    device_open: None,
    device_close: None,
    buffer_allocate: None,
    buffer_free: None,
    stream_create: None,
    stream_destroy: None,
    stream_write: None,
    stream_read: None,
    stream_copy: None,
    stream_fill: None,
    stream_launch: None,
    stream_record_event: None,
    stream_wait_event: None,
    stream_synchronize: None,
    stream_query: None,
    event_create: None,
    event_destroy: None,
    event_query: None,
    event_synchronize: None,
    event_elapsed_time: None,
    module_load: None,
    module_destroy: None,
    kernel_get: None,
    kernel_destroy: None,
};

/// Returns a table that claims ABI 2.0.
///
/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn xhal_plugin_query(_major: u32, _minor: u32) -> *const XhalPluginApi {
    &TABLE
}

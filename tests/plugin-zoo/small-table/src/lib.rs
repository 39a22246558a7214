//! A plugin whose table is smaller than ABI 1.0 requires.

use xhal_abi::{XhalPluginApi, XhalStr};

static TABLE: XhalPluginApi = XhalPluginApi {
    struct_size: 16,
    ..XhalPluginApi::without_entries(XhalStr::from_str("zoo_small_table"), XhalStr::from_str("1.0.0"))
};

/// Returns the broken table.
///
/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn xhal_plugin_query(_major: u32, _minor: u32) -> *const XhalPluginApi {
    &TABLE
}

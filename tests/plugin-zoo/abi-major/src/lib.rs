//! A plugin from the future: it implements ABI 2.0 and answers a 1.x host anyway.

use xhal_abi::{XhalPluginApi, XhalStr};

static TABLE: XhalPluginApi = XhalPluginApi {
    abi_major: 2,
    ..XhalPluginApi::without_entries(XhalStr::from_str("zoo_abi_major"), XhalStr::from_str("2.0.0"))
};

/// Returns the broken table.
///
/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn xhal_plugin_query(_major: u32, _minor: u32) -> *const XhalPluginApi {
    &TABLE
}

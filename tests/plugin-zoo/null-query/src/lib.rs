//! A plugin that declines every host.

use xhal_abi::XhalPluginApi;

/// Declines: returns null whatever the host's version.
///
/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn xhal_plugin_query(_major: u32, _minor: u32) -> *const XhalPluginApi {
    std::ptr::null()
}

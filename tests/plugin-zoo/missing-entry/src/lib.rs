//! A plugin whose table lacks one v1.0 entry: a host that called it would crash, so the
//! loader must refuse it up front.

use std::sync::OnceLock;
use xhal_abi::XhalPluginApi;

mod backend {
    include!("../../panicking/src/backend.rs");
}

fn create() -> xhal_core::Result<backend::PanickingBackend> {
    Ok(backend::PanickingBackend::named("zoo_missing_entry"))
}

fn create_boxed() -> xhal_core::Result<Box<dyn xhal_core::backend::Backend>> {
    create().map(|backend| Box::new(backend) as Box<dyn xhal_core::backend::Backend>)
}

/// Returns the full exported table with `stream_launch` removed.
///
/// # Safety
/// Takes no pointers.
#[no_mangle]
pub unsafe extern "C" fn xhal_plugin_query(major: u32, minor: u32) -> *const XhalPluginApi {
    static TABLE: OnceLock<XhalPluginApi> = OnceLock::new();
    let full = xhal_core::plugin::export::query(major, minor, create_boxed);
    if full.is_null() {
        return full;
    }
    TABLE.get_or_init(|| {
        // SAFETY: non-null tables from the export layer are static and complete.
        let mut table = unsafe { *full };
        table.stream_launch = None;
        table
    })
}

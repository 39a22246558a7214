//! A shared library that is not an xhal plugin: it exports something else.

/// Not the entry point the loader looks for.
#[no_mangle]
pub extern "C" fn xhal_plugin_query_misspelled() -> u32 {
    0
}

//! Turns a [`Backend`](crate::Backend) into the C ABI.

/// Exports a backend as an xhal plugin: `export_plugin!(constructor)` where
/// `constructor: fn() -> xhal_core::Result<B>` and `B: Backend`.
#[macro_export]
macro_rules! export_plugin {
    ($create:path) => {};
}

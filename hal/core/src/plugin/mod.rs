//! Plugins: exporting a Rust backend through the C ABI, and loading any plugin back.

pub mod adapter;
pub mod loader;

pub use adapter::AbiBackend;
pub use loader::{load_plugin, LoadedPlugin, PluginFile, SearchFolder, SearchOrigin};
pub use xhal_backend::{export, init_logging};

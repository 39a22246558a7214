//! Plugins: exporting a Rust backend through the C ABI, and loading any plugin back.

pub mod adapter;
pub mod export;
pub mod loader;
mod logging;

pub use adapter::AbiBackend;
pub use loader::{load_plugin, LoadedPlugin, PluginFile, SearchFolder, SearchOrigin};
pub use logging::init_logging;

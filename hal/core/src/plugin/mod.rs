//! Plugins: exporting a Rust backend through the C ABI, and loading any plugin back.

pub mod export;

//! No code. This crate's dependencies turn on, in `cargo build --workspace`, the features that
//! `cargo test --workspace` turns on through the dev-dependencies, so that both compile the
//! shared dependencies once (see Cargo.toml; tests/aligned.rs keeps it true).

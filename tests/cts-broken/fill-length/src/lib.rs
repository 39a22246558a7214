//! A broken test plugin: fills ignore their length and run to the end of the buffer.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_fill_length", Fault::FillIgnoresLength)
}

xhal_core::backend::export_plugin!(create);

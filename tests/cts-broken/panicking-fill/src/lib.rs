//! A broken test plugin: the fill entry panics.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_panicking_fill", Fault::FillPanics)
}

xhal_core::backend::export_plugin!(create);

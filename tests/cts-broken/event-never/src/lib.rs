//! A broken test plugin: events never signal.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_event_never", Fault::EventNeverSignals)
}

xhal_core::backend::export_plugin!(create);

//! A broken test plugin: waits on events are ignored, so streams are not ordered.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_wait_ignored", Fault::WaitIgnored)
}

xhal_core::backend::export_plugin!(create);

//! A broken test plugin: device-to-device copies ignore the source offset.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_copy_offset", Fault::CopyIgnoresSourceOffset)
}

xhal_core::backend::export_plugin!(create);

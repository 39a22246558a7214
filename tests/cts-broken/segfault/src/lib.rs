//! A broken test plugin: device-to-device copies crash the process with SIGSEGV.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_segfault", Fault::CopySegfaults)
}

xhal_core::backend::export_plugin!(create);

//! A broken test plugin: claims f64 and computes it one unit in the last place off.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_f64_wrong", Fault::F64Wrong)
}

xhal_core::backend::export_plugin!(create);

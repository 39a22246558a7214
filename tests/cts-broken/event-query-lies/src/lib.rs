//! A broken test plugin: event queries say complete before the work is done.
//! The conformance suite must catch it (see `conformance/tests/self_proof.rs`).

use xhal_cts_broken::{BrokenBackend, Fault};

fn create() -> xhal_core::Result<BrokenBackend> {
    BrokenBackend::new("broken_event_query_lies", Fault::EventQueryLies)
}

xhal_core::backend::export_plugin!(create);

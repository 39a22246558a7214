//! `xhal devices`: every backend and device, the `sycl-ls` of xhal.

use super::{json_text, Output};
use crate::listing::{self, BackendJson, SCHEMA_VERSION};
use anyhow::Context;
use serde::Serialize;
use xhal::Runtime;

#[derive(Debug, clap::Args)]
pub struct DevicesArgs {
    /// Write JSON (schema in docs/cli.md) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also list backends shadowed by a plugin of the same name.
    #[arg(long)]
    pub all: bool,
}

#[derive(Serialize)]
struct DevicesJson {
    schema_version: u32,
    backends: Vec<BackendJson>,
}

pub fn run(args: &DevicesArgs) -> anyhow::Result<Output> {
    // Everything present, whatever XHAL_DEVICE says: this is the list of what there is to
    // choose from, and a malformed XHAL_DEVICE must not hide it.
    let runtime = Runtime::builder()
        .device_selector(None)
        .build()
        .context("discovering backends")?;
    let failed_static = listing::failed_static_backends(&runtime);
    let backends = listing::list_backends(&runtime, args.all, &failed_static);
    let failed_plugins = runtime
        .report()
        .plugins
        .iter()
        .filter(|attempt| matches!(attempt.outcome, xhal::PluginOutcome::Failed { .. }))
        .count();

    if args.json {
        return json_text(&DevicesJson {
            schema_version: SCHEMA_VERSION,
            backends: backends.iter().map(BackendJson::from).collect(),
        })
        .map(Output::success);
    }
    let mut text = listing::devices_table(&backends, "");
    if failed_plugins > 0 {
        text.push_str(&format!(
            "\n{failed_plugins} plugin file(s) failed to load; `xhal doctor` says why\n"
        ));
    }
    Ok(Output::success(text))
}

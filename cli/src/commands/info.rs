//! `xhal info SELECTOR`: everything known about the device a selector picks, and why.

use super::{json_text, Output};
use crate::listing::{self, format_bytes, DeviceJson, SourceJson, SCHEMA_VERSION};
use crate::table::Table;
use anyhow::{anyhow, Context};
use serde::Serialize;
use xhal::{BackendEntry, DeviceInfo, Explanation, Runtime, Selector};

/// The name the selector's messages give its text: the argument's name in the usage line.
const SELECTOR_ORIGIN: &str = "SELECTOR";

#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// Which device, in the XHAL_DEVICE grammar: `cpu`, `cpu:0`, `gpu`, `cuda,vulkan`,
    /// `vulkan:*,!cpu`... A list is an order of preference.
    pub selector: String,
    /// Write JSON (schema in docs/cli.md) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct InfoJson {
    schema_version: u32,
    selector: String,
    backend: BackendSummaryJson,
    device: DeviceJson,
    explanation: ExplanationJson,
}

#[derive(Serialize)]
struct BackendSummaryJson {
    name: String,
    version: String,
    abi: String,
    source: SourceJson,
}

#[derive(Serialize)]
pub struct ExplanationJson {
    summary: String,
    verdicts: Vec<VerdictJson>,
}

#[derive(Serialize)]
struct VerdictJson {
    device: String,
    accepted: bool,
    rank: Option<usize>,
    reason: String,
}

impl From<&Explanation> for ExplanationJson {
    fn from(explanation: &Explanation) -> ExplanationJson {
        ExplanationJson {
            summary: explanation.summary.clone(),
            verdicts: explanation
                .verdicts
                .iter()
                .map(|verdict| VerdictJson {
                    device: verdict.device.clone(),
                    accepted: verdict.accepted,
                    rank: verdict.rank,
                    reason: verdict.reason.clone(),
                })
                .collect(),
        }
    }
}

pub fn run(args: &InfoArgs) -> anyhow::Result<Output> {
    // Messages name the argument, as the usage line does, not XHAL_DEVICE.
    let selector = Selector::parse_from(&args.selector, SELECTOR_ORIGIN)?;
    // Every backend, not only those the selector can reach, so that a failed choice can list
    // everything that is present.
    let runtime = Runtime::builder()
        .device_selector(None)
        .build()
        .context("discovering backends")?;
    // Choosing without opening: describing a device must not depend on it opening.
    let (chosen, explanation) = match runtime.choose_without_opening(&selector) {
        Ok(choice) => choice,
        Err(error) => {
            let mut message = error.to_string();
            for note in backends_without_devices(&runtime, &selector) {
                message.push_str("\nnote: ");
                message.push_str(&note);
            }
            return Err(anyhow!(message).context(format!("choosing a device for {:?}", args.selector)));
        }
    };
    let backend = runtime
        .backend(&chosen.backend)
        .with_context(|| format!("backend `{}` vanished after discovery", chosen.backend))?;

    if args.json {
        return json_text(&InfoJson {
            schema_version: SCHEMA_VERSION,
            selector: args.selector.clone(),
            backend: BackendSummaryJson {
                name: backend.info.name.clone(),
                version: backend.info.version.clone(),
                abi: listing::abi_text(&backend.info),
                source: SourceJson::from(&backend.source),
            },
            device: DeviceJson::new(&chosen.backend, chosen.index, &chosen.info),
            explanation: ExplanationJson::from(&explanation),
        })
        .map(Output::success);
    }

    let mut text = format!("{}  {}\n\n", chosen.label(), chosen.info.name);
    text.push_str(&describe_device(backend, &chosen.info).render("  "));
    text.push_str("\nwhy this device\n");
    text.push_str(&format!("  {}\n", explanation.summary));
    for verdict in &explanation.verdicts {
        text.push_str(&format!("    {verdict}\n"));
    }
    Ok(Output::success(text))
}

/// Backends the selector names that are present but have no devices, with the reason: the
/// selector's own error cannot know them, since it only sees devices.
pub(crate) fn backends_without_devices(runtime: &Runtime, selector: &Selector) -> Vec<String> {
    let Some(device_selector) = selector.device_selector() else {
        return Vec::new();
    };
    device_selector
        .named_backends()
        .iter()
        .filter_map(|name| runtime.backend(name))
        .filter_map(|entry| match &entry.devices {
            Err(error) => Some(format!(
                "backend `{}` is present but has no devices: {error}",
                entry.info.name
            )),
            Ok(devices) if devices.is_empty() => Some(format!(
                "backend `{}` is present but reports no devices",
                entry.info.name
            )),
            Ok(_) => None,
        })
        .collect()
}

fn describe_device(backend: &BackendEntry, info: &DeviceInfo) -> Table {
    let dimensions = |d: [u32; 3]| format!("{} x {} x {}", d[0], d[1], d[2]);
    let none_if_empty = |text: &str| {
        if text.is_empty() {
            "none".to_owned()
        } else {
            text.to_owned()
        }
    };
    let features = listing::feature_names(info.features);
    let formats: Vec<String> = info.kernel_formats.iter().map(|f| f.name()).collect();

    let mut table = Table::new();
    table.row([
        "backend".to_owned(),
        format!(
            "{} {}, ABI {}, {}",
            backend.info.name,
            backend.info.version,
            listing::abi_text(&backend.info),
            backend.source
        ),
    ]);
    table.row(["name".to_owned(), none_if_empty(&info.name)]);
    table.row([
        "vendor".to_owned(),
        format!(
            "{} (vendor id {:#06x}, device id {:#06x})",
            none_if_empty(&info.vendor),
            info.vendor_id,
            info.device_id
        ),
    ]);
    table.row(["type".to_owned(), info.device_type.to_string()]);
    table.row(["uuid".to_owned(), info.uuid_string()]);
    table.row([
        "pci bus id".to_owned(),
        info.pci_bus_id.clone().unwrap_or_else(|| "none".to_owned()),
    ]);
    table.row(["driver version".to_owned(), none_if_empty(&info.driver_version)]);
    table.row(["memory".to_owned(), format_bytes(info.total_memory)]);
    table.row(["free memory".to_owned(), format_bytes(info.free_memory)]);
    table.row(["max allocation size".to_owned(), format_bytes(info.max_allocation_size)]);
    table.row(["max workgroup size".to_owned(), dimensions(info.max_workgroup_size)]);
    table.row([
        "max workgroup invocations".to_owned(),
        info.max_workgroup_invocations.to_string(),
    ]);
    table.row(["max workgroup count".to_owned(), dimensions(info.max_workgroup_count)]);
    table.row([
        "max workgroup memory".to_owned(),
        format_bytes(info.max_workgroup_memory.into()),
    ]);
    table.row(["subgroup size".to_owned(), info.subgroup_size.to_string()]);
    table.row(["max buffer arguments".to_owned(), info.max_buffer_arguments.to_string()]);
    table.row([
        "max scalar block size".to_owned(),
        format_bytes(info.max_scalar_block_size.into()),
    ]);
    table.row([
        "buffer offset alignment".to_owned(),
        format_bytes(info.buffer_offset_alignment.into()),
    ]);
    table.row(["features".to_owned(), none_if_empty(&features.join(", "))]);
    table.row(["kernel formats".to_owned(), none_if_empty(&formats.join(", "))]);
    table
}

//! What `xhal run` prints after a run: the device, the launch, the time and every buffer, as a
//! table and lists for people or as JSON (`--json`).

use super::layout::Shape;
use super::values::{decode, Decoded};
use super::{BufferPlan, ScalarPlan};
use crate::listing::SCHEMA_VERSION;
use crate::table::Table;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;
use xhal::kernel::{BufferAccess, BufferBindingInfo, BufferSpace, EntryPointInfo};
use xhal::{Device, Explanation};

/// Elements shown of a buffer without `--full`: all of them up to this many...
const SHOWN_IN_FULL: usize = 20;
/// ...else this many from each end, around `...`.
const SHOWN_AT_EACH_END: usize = 8;

/// Width human output wraps long lists at.
const LINE_WIDTH: usize = 100;

/// What a run did and what it ran on: printed by [`Report::text`], serialised by [`Report::json`].
pub(super) struct Report<'a> {
    pub(super) file: &'a str,
    pub(super) overrides: &'a [xhal::kernel::OverrideInfo],
    pub(super) given_overrides: &'a [(String, f64)],
    pub(super) device: &'a Device,
    pub(super) explanation: &'a Explanation,
    pub(super) entry: &'a EntryPointInfo,
    pub(super) workgroups: [u32; 3],
    pub(super) invocations: Option<u64>,
    pub(super) wall: Duration,
    pub(super) device_time: Option<Duration>,
    pub(super) scalars: &'a [ScalarPlan],
    pub(super) buffers: &'a [BufferPlan<'a>],
    pub(super) results: &'a [Vec<u8>],
}

#[derive(Serialize)]
pub(super) struct RunJson {
    schema_version: u32,
    device: DeviceSummaryJson,
    why: String,
    kernel: KernelJson,
    overrides: Vec<OverrideJson>,
    time: TimeJson,
    scalars: Vec<ScalarJson>,
    buffers: Vec<BufferJson>,
}

#[derive(Serialize)]
struct DeviceSummaryJson {
    label: String,
    name: String,
    backend: String,
}

#[derive(Serialize)]
struct KernelJson {
    file: String,
    entry: String,
    workgroups: [u32; 3],
    workgroup_size: [u32; 3],
    invocations: Option<u64>,
}

#[derive(Serialize)]
struct OverrideJson {
    name: String,
    id: Option<u16>,
    #[serde(rename = "type")]
    type_name: String,
    /// The initializer the kernel ran with, as WGSL.
    value: Option<String>,
    /// Whether --override gave it.
    given: bool,
}

#[derive(Serialize)]
struct TimeJson {
    wall_ms: f64,
    device_ms: Option<f64>,
}

#[derive(Serialize)]
struct ScalarJson {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    values: Vec<Value>,
}

#[derive(Serialize)]
struct BufferJson {
    argument: u32,
    group: u32,
    binding: u32,
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    element: Option<String>,
    access: &'static str,
    length: Option<u64>,
    bytes: u64,
    header_values: usize,
    values_per_element: usize,
    /// The types of the header's values, then of one element's.
    value_types: Vec<&'static str>,
    values: Vec<Value>,
}

/// Milliseconds with nanosecond resolution: one correctly rounded division, so that JSON
/// shows `0.325678`, not the `0.32567799999999997` of a seconds-times-1000 product.
fn milliseconds(duration: Duration) -> f64 {
    duration.as_nanos() as f64 / 1e6
}

fn access_name(binding: &BufferBindingInfo) -> &'static str {
    match (binding.space, binding.access) {
        (BufferSpace::Uniform, _) => "uniform",
        (BufferSpace::Storage, BufferAccess::Read) => "read",
        (BufferSpace::Storage, BufferAccess::ReadWrite) => "read_write",
    }
}

/// Every value of a buffer's bytes, in the order the spec gave them.
fn decode_buffer(shape: &Shape, elements: Option<u64>, bytes: &[u8]) -> Vec<Decoded> {
    let total = shape.header.len() as u64 + elements.unwrap_or(0) * shape.values_per_element() as u64;
    (0..total)
        .filter_map(|index| {
            let slot = shape.slot(index)?;
            let start = usize::try_from(slot.offset).ok()?;
            let value = bytes.get(start..start + slot.ty.size())?;
            Some(decode(slot.ty, value))
        })
        .collect()
}

impl Report<'_> {
    /// Whether `--override` gave this override its value.
    fn given(&self, o: &xhal::kernel::OverrideInfo) -> bool {
        self.given_overrides
            .iter()
            .any(|(name, _)| *name == o.name || o.id.is_some_and(|id| id.to_string() == *name))
    }

    pub(super) fn json(&self) -> RunJson {
        RunJson {
            schema_version: SCHEMA_VERSION,
            device: DeviceSummaryJson {
                label: self.device.label(),
                name: self.device.name().to_owned(),
                backend: self.device.backend_name().to_owned(),
            },
            why: self.explanation.summary.clone(),
            kernel: KernelJson {
                file: self.file.to_owned(),
                entry: self.entry.name.clone(),
                workgroups: self.workgroups,
                workgroup_size: self.entry.workgroup_size,
                invocations: self.invocations,
            },
            overrides: self
                .overrides
                .iter()
                .map(|o| OverrideJson {
                    name: o.name.clone(),
                    id: o.id,
                    type_name: o.type_name.clone(),
                    value: o.default.clone(),
                    given: self.given(o),
                })
                .collect(),
            time: TimeJson {
                wall_ms: milliseconds(self.wall),
                device_ms: self.device_time.map(milliseconds),
            },
            scalars: self
                .scalars
                .iter()
                .map(|scalar| ScalarJson {
                    name: scalar.name.clone(),
                    type_name: scalar.type_name.clone(),
                    values: scalar.values.iter().map(Decoded::to_json).collect(),
                })
                .collect(),
            buffers: self
                .buffers
                .iter()
                .zip(self.results)
                .map(|(plan, bytes)| BufferJson {
                    argument: plan.binding.argument,
                    group: plan.binding.group,
                    binding: plan.binding.binding,
                    name: plan.binding.name.clone(),
                    type_name: plan.binding.type_name.clone(),
                    element: plan.shape.element.as_ref().map(|element| element.type_name.clone()),
                    access: access_name(plan.binding),
                    length: plan.elements,
                    bytes: bytes.len() as u64,
                    header_values: plan.shape.header.len(),
                    values_per_element: plan.shape.values_per_element(),
                    value_types: plan
                        .shape
                        .header
                        .iter()
                        .chain(plan.shape.element.iter().flat_map(|element| element.slots.iter()))
                        .map(|slot| slot.ty.name())
                        .collect(),
                    values: decode_buffer(&plan.shape, plan.elements, bytes)
                        .iter()
                        .map(Decoded::to_json)
                        .collect(),
                })
                .collect(),
        }
    }

    pub(super) fn text(&self, full: bool) -> String {
        let [x, y, z] = self.workgroups;
        let [sx, sy, sz] = self.entry.workgroup_size;
        let mut launch = format!(
            "{} from {}, {x} x {y} x {z} workgroups of {sx} x {sy} x {sz}",
            self.entry.name, self.file
        );
        if let Some(invocations) = self.invocations {
            launch.push_str(&format!(", for {invocations} invocations"));
        }
        let time = match self.device_time {
            Some(device) => format!(
                "{:.3} ms wall, {:.3} ms on the device",
                milliseconds(self.wall),
                milliseconds(device)
            ),
            None => format!("{:.3} ms wall (the device has no timestamps)", milliseconds(self.wall)),
        };
        let mut table = Table::new();
        table.row([
            "device".to_owned(),
            format!("{}  {}", self.device.label(), self.device.name()),
        ]);
        table.row(["why".to_owned(), self.explanation.summary.clone()]);
        table.row(["kernel".to_owned(), launch]);
        if !self.overrides.is_empty() {
            let overrides: Vec<String> = self
                .overrides
                .iter()
                .map(|o| {
                    let value = o.default.as_deref().unwrap_or("?");
                    let how = if self.given(o) { "given" } else { "default" };
                    format!("{}: {} = {value} ({how})", o.name, o.type_name)
                })
                .collect();
            table.row(["overrides".to_owned(), overrides.join(", ")]);
        }
        table.row(["time".to_owned(), time]);
        if !self.scalars.is_empty() {
            let scalars: Vec<String> = self
                .scalars
                .iter()
                .map(|scalar| {
                    let values: Vec<String> = scalar.values.iter().map(Decoded::text).collect();
                    match values.as_slice() {
                        [one] => format!("{} = {one}", scalar.name),
                        _ => format!("{} = ({})", scalar.name, values.join(", ")),
                    }
                })
                .collect();
            table.row(["scalars".to_owned(), scalars.join(", ")]);
        }
        let mut text = table.render("");
        for (plan, bytes) in self.buffers.iter().zip(self.results) {
            text.push('\n');
            text.push_str(&describe_buffer(plan, bytes, full));
        }
        text
    }
}

/// Pretty JSON, as the other commands write it, except that an array of numbers or strings
/// stays on one line: a buffer of a thousand values is one line, not a thousand.
pub(super) fn json_with_inline_arrays(value: &impl Serialize) -> anyhow::Result<String> {
    let compact = serde_json::to_string(value)?;
    let tokens = json_tokens(&compact);
    let mut out = String::with_capacity(compact.len() * 2);
    let mut indent = 0usize;
    // Depth of nesting inside an inline array (whose contents are all scalars).
    let mut inline = 0usize;
    let newline = |out: &mut String, indent: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(indent));
    };
    let mut index = 0;
    while let Some(&token) = tokens.get(index) {
        match token {
            "{" | "[" if tokens.get(index + 1).is_some_and(|next| matches!(*next, "}" | "]")) => {
                out.push_str(token);
                out.push_str(tokens[index + 1]);
                index += 1;
            }
            "[" if inline > 0 || !array_holds_containers(&tokens[index + 1..]) => {
                out.push('[');
                inline += 1;
            }
            "]" if inline > 0 => {
                out.push(']');
                inline -= 1;
            }
            "{" | "[" => {
                out.push_str(token);
                indent += 1;
                newline(&mut out, indent);
            }
            "}" | "]" => {
                indent = indent.saturating_sub(1);
                newline(&mut out, indent);
                out.push_str(token);
            }
            "," if inline > 0 => out.push_str(", "),
            "," => {
                out.push(',');
                newline(&mut out, indent);
            }
            ":" => out.push_str(": "),
            other => out.push_str(other),
        }
        index += 1;
    }
    out.push('\n');
    Ok(out)
}

/// Whether the array whose contents start at `rest` holds an object or an array.
fn array_holds_containers(rest: &[&str]) -> bool {
    for token in rest {
        match *token {
            "{" | "[" => return true,
            "]" => return false,
            _ => {}
        }
    }
    false
}

/// The tokens of compact JSON (which has no whitespace outside strings): punctuation, and
/// strings and other values whole.
fn json_tokens(compact: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut chars = compact.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        match c {
            '{' | '}' | '[' | ']' | ',' | ':' => tokens.push(&compact[start..start + 1]),
            '"' => {
                let mut end = compact.len();
                while let Some((at, c)) = chars.next() {
                    match c {
                        // The escaped character cannot end the string.
                        '\\' => {
                            chars.next();
                        }
                        '"' => {
                            end = at + 1;
                            break;
                        }
                        _ => {}
                    }
                }
                tokens.push(&compact[start..end]);
            }
            _ => {
                let mut end = compact.len();
                while let Some(&(at, c)) = chars.peek() {
                    if matches!(c, '{' | '}' | '[' | ']' | ',' | ':') {
                        end = at;
                        break;
                    }
                    chars.next();
                }
                tokens.push(&compact[start..end]);
            }
        }
    }
    tokens
}

/// `buffer 1  y: array<f32>, read_write, 64 elements (256 bytes)` (with `(binding 3)` after
/// the position where the source declares it elsewhere), then its values.
fn describe_buffer(plan: &BufferPlan<'_>, bytes: &[u8], full: bool) -> String {
    let binding = plan.binding;
    let shape = &plan.shape;
    let values = decode_buffer(shape, plan.elements, bytes);
    let plural = |count: u64, one: &str| format!("{count} {one}{}", if count == 1 { "" } else { "s" });
    let size = match plan.elements {
        Some(elements) => plural(elements, "element"),
        None => plural(values.len() as u64, "value"),
    };
    // The argument's position, and where the source declares it when that differs.
    let declared = if (binding.group, binding.binding) == (0, binding.argument) {
        String::new()
    } else {
        format!(" ({})", binding.declared_binding())
    };
    let mut text = format!(
        "buffer {}{declared}  {}: {}, {}, {size} ({} bytes)\n",
        binding.argument,
        binding.name,
        binding.type_name,
        access_name(binding),
        bytes.len()
    );
    let header_count = shape.header.len().min(values.len());
    let (header, rest) = values.split_at(header_count);
    let texts = |values: &[Decoded]| values.iter().map(Decoded::text).collect::<Vec<_>>();
    if shape.element.is_none() {
        text.push_str(&wrap_list(&texts(header), full, "  "));
        return text;
    }
    if !header.is_empty() {
        text.push_str(&wrap_list(&texts(header), full, "  header "));
    }
    let per_element = shape.values_per_element().max(1);
    let elements: Vec<String> = rest
        .chunks(per_element)
        .map(|element| match element {
            [one] => one.text(),
            many => format!("({})", texts(many).join(", ")),
        })
        .collect();
    text.push_str(&wrap_list(&elements, full, "  "));
    text
}

/// `[a, b, c]` on lines of at most [`LINE_WIDTH`] characters, cut to both ends around
/// `...` when long and not `full`.
fn wrap_list(items: &[String], full: bool, first_prefix: &str) -> String {
    let shown: Vec<&str> = if full || items.len() <= SHOWN_IN_FULL {
        items.iter().map(String::as_str).collect()
    } else {
        let head = items[..SHOWN_AT_EACH_END].iter().map(String::as_str);
        let tail = items[items.len() - SHOWN_AT_EACH_END..].iter().map(String::as_str);
        head.chain(std::iter::once("...")).chain(tail).collect()
    };
    let indent = " ".repeat(first_prefix.len() + 1);
    let mut out = format!("{first_prefix}[");
    let mut line_length = out.len();
    for (index, item) in shown.iter().enumerate() {
        let last = index + 1 == shown.len();
        let piece = if last { format!("{item}]") } else { format!("{item},") };
        if index > 0 {
            if line_length + 1 + piece.len() > LINE_WIDTH {
                out.push('\n');
                out.push_str(&indent);
                line_length = indent.len();
            } else {
                out.push(' ');
                line_length += 1;
            }
        }
        out.push_str(&piece);
        line_length += piece.len();
    }
    if shown.is_empty() {
        out.push(']');
    }
    out.push('\n');
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_arrays_of_scalars_on_one_line() {
        let value = serde_json::json!({
            "a": [1, 2.5, "NaN"],
            "b": [{"c": [], "d": "x,]}[\\\"y"}, {}],
            "e": {"f": null},
            "g": []
        });
        let text = json_with_inline_arrays(&value).unwrap_or_default();
        assert_eq!(
            text,
            "{\n  \"a\": [1, 2.5, \"NaN\"],\n  \"b\": [\n    {\n      \"c\": [],\n      \"d\": \"x,]}[\\\\\\\"y\"\n    },\n    {}\n  ],\n  \"e\": {\n    \"f\": null\n  },\n  \"g\": []\n}\n"
        );
        let back: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, value);
    }

    #[test]
    fn long_lists_are_cut_and_wrapped() {
        let items: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(
            wrap_list(&items, false, "  "),
            "  [0, 1, 2, 3, 4, 5, 6, 7, ..., 92, 93, 94, 95, 96, 97, 98, 99]\n"
        );
        let wrapped = wrap_list(&items, true, "  ");
        assert!(wrapped.lines().all(|line| line.len() <= LINE_WIDTH), "{wrapped}");
        assert!(wrapped.lines().skip(1).all(|line| line.starts_with("   ")), "{wrapped}");
        assert!(wrapped.ends_with("99]\n"));
        assert_eq!(wrap_list(&[], false, "  "), "  []\n");
    }
}

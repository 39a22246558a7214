//! `xhal run FILE.wgsl`: try a kernel from the shell. Buffers and scalars come from the
//! command line, shaped by the kernel's reflection; every buffer is printed after the run,
//! with the device used and the time taken.
//!
//! The order of work puts the cheapest mistakes first: the file, the WGSL, the entry point
//! and every argument are checked before a device is opened, so a typo never waits for
//! discovery, and a kernel that does not compile never needs a device at all.

mod layout;
mod report;
mod spec;
mod values;

use super::Output;
use crate::commands::info::backends_without_devices;
use anyhow::{anyhow, bail, Context};
use layout::Shape;
use report::{json_with_inline_arrays, Report};
use spec::{split_name, Spec};
use std::path::{Path, PathBuf};
use std::time::Instant;
use values::{decode, parse_value, Decoded};
use xhal::kernel::{BufferBindingInfo, EntryPointInfo, KernelError, ScalarBlockInfo, WgslModule};
use xhal::{Device, Explanation, Features, Launch, Runtime, Selector};

/// The name the selector's messages give the `--device` text.
const DEVICE_ORIGIN: &str = "--device";

/// The argument syntax, shown by `xhal run --help` (and in docs/cli.md).
pub const AFTER_HELP: &str = "\
Buffers (--buffer, -b), one per binding, in binding order, or NAME=SPEC for the binding of
that name (unnamed ones fill the other bindings in order). A buffer's values are its scalars
in memory order: a vec4<f32> element takes 4 values, a struct element its members' values,
a struct with a runtime array its other members' values first. Padding is zero. SPEC is:
  1,2,3  or  [1,2,3]          values, each parsed as the type of its place
  range:START..END[:STEP]     START, START+STEP, ... below END (STEP defaults to 1):
                              range:0..1024, range:1..0:-0.25
  zeros:N                     N zero values
  fill:VALUE:N                N copies of VALUE
  random:N[:SEED][:MIN..MAX]  N seeded pseudo-random values in [MIN, MAX); defaults: SEED
                              the binding number, [0, 1) for floats, the type's whole
                              range for integers
  file:PATH                   the buffer's bytes, little-endian, as laid out in memory
                              (padding included): what --output-dir writes
A runtime-sized array takes its length from the SPEC; a fixed-size buffer takes exactly
its number of values.

Scalars (--scalar, -s), one per member of the kernel's var<immediate>, in order, or
NAME=VALUE. A vector or struct member takes its values separated by commas: -s 1,2,3.

Overrides (--override, -o NAME=VALUE): a value for an `override` constant, by name or by
its @id; a number, or true/false for a bool. The others keep their defaults; one without a
default must be given. The workgroup size may depend on them.

Values: integers in decimal, 0x hex or 0b binary, with an optional sign; floats as 1.5,
-2, 1e-3, inf, -inf or nan. Each is checked against its type (u32 takes 0 to 4294967295).

Types: f32, f16, f64, i32, u32, i64, u64, their atomics, vectors, matrices (column by
column), fixed-size arrays and structs of them.

Output: the device and why it was chosen, the launch, the time (wall: launch to
completion; device: from timestamp events, when the device has them), the scalars, then
every buffer after the run (long ones cut to their ends; --full prints all). --json writes
it all, every value included (schema in docs/cli.md).

Examples:
  xhal run saxpy.wgsl -b range:0..1024 -b fill:1:1024 -s 2 -s 1024 --invocations 1024
  xhal run saxpy.wgsl --entry saxpy -b y=zeros:8 -b x=1,2,3,4,5,6,7,8 -s a=0.5 -s n=8 -w 1
  xhal run histogram.wgsl -b random:4096:7:0..16 -b zeros:16 -s 4096 -s 16 -n 4096 --json
  xhal run tiled.wgsl -o block=16 -b range:0..4096 -b zeros:4096 -n 4096

Exit codes: 0 success; 1 a runtime error: bad WGSL, a missing entry point, arguments that
do not fit the kernel, no device, a kernel fault; 2 a usage error.";

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("grid").required(true).args(["workgroups", "invocations"])))]
pub struct RunArgs {
    /// Write a timeline of the run to this file (Chrome/Perfetto trace JSON); read it with
    /// `xhal trace summary`.
    #[arg(long, value_name = "PATH")]
    pub trace: Option<PathBuf>,
    /// The WGSL file (`-` reads standard input).
    #[arg(value_name = "FILE.wgsl")]
    pub file: PathBuf,
    /// The compute entry point; may be left out when the file has only one.
    #[arg(long, short = 'e', value_name = "NAME")]
    pub entry: Option<String>,
    /// Workgroups in x, y and z (`64`, `8,8`, `4,4,4`); y and z default to 1.
    #[arg(long, short = 'w', value_name = "X[,Y,Z]", value_parser = parse_workgroups)]
    pub workgroups: Option<[u32; 3]>,
    /// Instead of --workgroups: enough workgroups for N invocations along x, spilling into
    /// y past 65535 workgroups (the kernel must skip invocations past N).
    #[arg(long, short = 'n', value_name = "N")]
    pub invocations: Option<u64>,
    /// A buffer's initial contents, one per binding (see below).
    #[arg(long = "buffer", short = 'b', value_name = "[NAME=]SPEC", allow_hyphen_values = true)]
    pub buffers: Vec<String>,
    /// A scalar, one per member of the var<immediate> (see below).
    #[arg(
        long = "scalar",
        short = 's',
        value_name = "[NAME=]VALUE",
        allow_hyphen_values = true
    )]
    pub scalars: Vec<String>,
    /// A value for one of the kernel's `override` constants, by name or by @id (see below).
    #[arg(long = "override", short = 'o', value_name = "NAME=VALUE", value_parser = parse_override, allow_hyphen_values = true)]
    pub overrides: Vec<(String, f64)>,
    /// Which device, in the XHAL_DEVICE grammar (`cpu`, `cuda:0`, `gpu`, `vulkan,cpu`);
    /// default: XHAL_DEVICE, else the best device.
    #[arg(long, short = 'd', value_name = "SELECTOR")]
    pub device: Option<String>,
    /// Write JSON (schema in docs/cli.md), with every value, instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print every value of long buffers, not only their ends.
    #[arg(long)]
    pub full: bool,
    /// Also write each buffer after the run to DIR/NAME.bin, as raw bytes (what `file:`
    /// reads).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
}

/// `NAME=VALUE` for `--override`: a number, or `true`/`false` for a bool override. Whether
/// the value fits the override's type is checked against the kernel.
fn parse_override(text: &str) -> Result<(String, f64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=VALUE"))?;
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() {
        return Err(format!("`{text}` names no override"));
    }
    let number = match value {
        "true" => 1.0,
        "false" => 0.0,
        _ => value
            .parse::<f64>()
            .map_err(|_| format!("`{value}` (for override `{name}`) is not a number, `true` or `false`"))?,
    };
    Ok((name.to_owned(), number))
}

/// `64`, `8,8` or `4,4,4`: workgroups in x, y and z. Zero is left for the launch to refuse,
/// with the kernel's name in the message.
fn parse_workgroups(text: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!("`{text}` has {} numbers; write X, X,Y or X,Y,Z", parts.len()));
    }
    let mut counts = [1u32; 3];
    for (count, part) in counts.iter_mut().zip(&parts) {
        *count = part
            .parse()
            .map_err(|_| format!("`{part}` is not a workgroup count (a whole number from 1 to 4294967295)"))?;
    }
    Ok(counts)
}

/// One buffer argument, checked against its binding.
struct BufferPlan<'a> {
    binding: &'a BufferBindingInfo,
    shape: Shape,
    spec: Spec,
    /// Elements of the array, or `None` when the buffer is not an array.
    elements: Option<u64>,
    bytes: u64,
}

/// One scalar argument: the member it fills and its bytes.
struct ScalarPlan {
    name: String,
    type_name: String,
    bytes: Vec<u8>,
    values: Vec<Decoded>,
}

pub fn run(args: &RunArgs) -> anyhow::Result<Output> {
    // Stopped (and the file finished) when this returns, whatever the outcome.
    let _trace = super::trace::start_for_command(args.trace.as_deref())?;
    let (file, source) = read_source(&args.file)?;
    // Override values become the overrides' initializers, so everything below (the plan,
    // the reflection, the load) sees one module.
    let source = xhal::kernel::apply_overrides(&source, &args.overrides).map_err(|error| kernel_error(&file, error))?;
    let module = xhal::kernel::parse_wgsl(&source).map_err(|error| kernel_error(&file, error))?;
    let entry = choose_entry(&module, args.entry.as_deref(), &file)?;
    let buffers = plan_buffers(&module, entry, &args.buffers)?;
    let scalars = plan_scalars(&module, entry, &args.scalars)?;

    // The runtime stays alive to the end: it holds the plugin library the device may run in.
    let (_runtime, device, explanation) = choose_device(args.device.as_deref(), &module)?;
    let label = device.label();
    let mut images = Vec::with_capacity(buffers.len());
    for plan in &buffers {
        images.push(initial_bytes(plan, &device)?);
    }

    let loaded = device
        .load_wgsl(&source)
        .with_context(|| format!("loading {file} on {label}"))?;
    let kernel = loaded
        .kernel(&entry.name)
        .with_context(|| format!("loading {file} on {label}"))?;
    let stream = device
        .create_stream()
        .with_context(|| format!("creating a stream on {label}"))?;
    let mut device_buffers = Vec::with_capacity(buffers.len());
    for (plan, image) in buffers.iter().zip(&images) {
        let what = || format!("buffer `{}` ({} bytes) on {label}", plan.binding.name, image.len());
        let buffer = device
            .alloc::<u8>(image.len())
            .with_context(|| format!("allocating {}", what()))?;
        stream
            .write(&buffer, image)
            .with_context(|| format!("writing {}", what()))?;
        device_buffers.push(buffer);
    }

    let mut launch = Launch::new(&kernel);
    let (workgroups, invocations) = match (args.workgroups, args.invocations) {
        (Some([x, y, z]), _) => {
            launch = launch.workgroups(x, y, z);
            ([x, y, z], None)
        }
        (None, Some(invocations)) => {
            launch = launch.workgroups_for_invocations(invocations);
            (launch.workgroup_count(), Some(invocations))
        }
        // clap requires one of the two; this is only reached if that rule is lost.
        (None, None) => bail!("give --workgroups X[,Y,Z] or --invocations N"),
    };
    for buffer in &device_buffers {
        launch = launch.buffer(buffer);
    }
    for scalar in &scalars {
        // With reflection the member's offset places the bytes; the alignment only has to be
        // a power of two.
        let alignment = scalar.bytes.len().next_power_of_two().clamp(1, 16);
        launch = launch.scalar_bytes(&scalar.bytes, alignment);
    }

    // Device time comes from two timestamp events around the launch, when the device has them.
    let events = if device.has_features(Features::TIMESTAMPS) {
        let event = || {
            device
                .create_event()
                .with_context(|| format!("creating a timing event on {label}"))
        };
        Some((event()?, event()?))
    } else {
        None
    };
    let started = Instant::now();
    if let Some((start, _)) = &events {
        stream.record(start).context("recording the start event")?;
    }
    stream
        .launch(&launch)
        .with_context(|| format!("launching kernel `{}` on {label}", entry.name))?;
    // The launch runs while the end event is queued, so a kernel fault can surface at either
    // call: both are the run's error. The stream is drained either way.
    let recorded = match &events {
        Some((_, end)) => stream.record(end),
        None => Ok(()),
    };
    let synchronized = stream.synchronize();
    recorded
        .and(synchronized)
        .with_context(|| format!("running kernel `{}` on {label}", entry.name))?;
    let wall = started.elapsed();
    let device_time = events.and_then(|(start, end)| match end.elapsed_since(&start) {
        Ok(elapsed) => Some(elapsed),
        Err(error) => {
            // The run itself succeeded; a missing measurement is not worth failing it.
            tracing::warn!("device time not measured: {error}");
            None
        }
    });

    let mut results = Vec::with_capacity(buffers.len());
    for (plan, buffer) in buffers.iter().zip(&device_buffers) {
        let bytes = stream
            .read_to_vec(buffer)
            .with_context(|| format!("reading buffer `{}` back from {label}", plan.binding.name))?;
        results.push(bytes);
    }
    if let Some(folder) = &args.output_dir {
        write_outputs(folder, &buffers, &results)?;
    }

    let report = Report {
        file: &file,
        overrides: module.overrides(),
        given_overrides: &args.overrides,
        device: &device,
        explanation: &explanation,
        entry,
        workgroups,
        invocations,
        wall,
        device_time,
        scalars: &scalars,
        buffers: &buffers,
        results: &results,
    };
    if args.json {
        return json_with_inline_arrays(&report.json()).map(Output::success);
    }
    Ok(Output::success(report.text(args.full)))
}

/// The file's name for messages, and its text.
fn read_source(path: &Path) -> anyhow::Result<(String, String)> {
    if path.as_os_str() == "-" {
        let mut source = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut source).context("reading the kernel from stdin")?;
        return Ok(("<stdin>".to_owned(), source));
    }
    let file = path.display().to_string();
    let source = std::fs::read_to_string(path).with_context(|| format!("reading {file}"))?;
    Ok((file, source))
}

/// A WGSL problem as the compiler-style diagnostic it is: `file:line:column`, the line, a
/// caret, naga's notes. The first line says which file and what kind of problem, so that the
/// `error: ` the binary puts in front reads well.
fn kernel_error(file: &str, error: KernelError) -> anyhow::Error {
    let kind = error.kind().as_str();
    let diagnostic = error.with_file_name(file);
    anyhow!("cannot load {file} ({kind})\n{diagnostic}")
}

fn choose_entry<'m>(module: &'m WgslModule, name: Option<&str>, file: &str) -> anyhow::Result<&'m EntryPointInfo> {
    let entry_points = module.entry_points();
    let names = || {
        entry_points
            .iter()
            .map(|entry| entry.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (name, entry_points) {
        (_, []) => bail!("{file} has no compute entry point: a kernel is a `@compute` function"),
        (Some(name), _) => entry_points.iter().find(|entry| entry.name == name).ok_or_else(|| {
            anyhow!(
                "{file} has no compute entry point `{name}`; its compute entry points are: {}",
                names()
            )
        }),
        (None, [only]) => Ok(only),
        (None, _) => bail!(
            "{file} has {} compute entry points ({}); choose one with --entry NAME",
            entry_points.len(),
            names()
        ),
    }
}

/// Gives each argument its place: `NAME=` ones by name, the others in order to the places
/// left. `what` is `buffer` or `scalar`; `places` are the names in order.
fn assign<'t>(
    arguments: &'t [String],
    places: &[String],
    what: &str,
    describe_all: &dyn Fn() -> String,
) -> anyhow::Result<Vec<Option<&'t str>>> {
    let mut assigned: Vec<Option<&str>> = vec![None; places.len()];
    let mut unnamed = Vec::new();
    for argument in arguments {
        match split_name(argument) {
            (Some(name), text) => {
                let Some(index) = places.iter().position(|place| place == name) else {
                    bail!(
                        "--{what} {argument}: the kernel has no {what} `{name}`; its {what}s are: {}",
                        if places.is_empty() {
                            "none".to_owned()
                        } else {
                            places.join(", ")
                        }
                    );
                };
                if assigned[index].is_some() {
                    bail!("--{what} {argument}: {what} `{name}` is given twice");
                }
                assigned[index] = Some(text);
            }
            (None, text) => unnamed.push(text),
        }
    }
    let mut free = assigned.iter_mut().filter(|slot| slot.is_none());
    for text in unnamed {
        match free.next() {
            Some(slot) => *slot = Some(text),
            None => bail!(
                "{}, but {} --{what} argument{} given",
                describe_all(),
                arguments.len(),
                if arguments.len() == 1 { " was" } else { "s were" }
            ),
        }
    }
    Ok(assigned)
}

/// `buffer `x` (binding 0, array<f32>)`.
fn buffer_label(binding: &BufferBindingInfo) -> String {
    format!(
        "buffer `{}` ({}, {})",
        binding.name,
        binding.declared_binding(),
        binding.type_name
    )
}

fn plan_buffers<'m>(
    module: &WgslModule,
    entry: &'m EntryPointInfo,
    arguments: &[String],
) -> anyhow::Result<Vec<BufferPlan<'m>>> {
    let bindings = &entry.buffers;
    let names: Vec<String> = bindings.iter().map(|binding| binding.name.clone()).collect();
    let describe_all = || {
        let list: Vec<String> = bindings
            .iter()
            .map(|binding| format!("{}: {}", binding.name, binding.type_name))
            .collect();
        format!(
            "kernel `{}` takes {} buffer{}{}",
            entry.name,
            bindings.len(),
            if bindings.len() == 1 { "" } else { "s" },
            if list.is_empty() {
                String::new()
            } else {
                format!(" ({})", list.join(", "))
            }
        )
    };
    let assigned = assign(arguments, &names, "buffer", &describe_all)?;
    let missing: Vec<String> = bindings
        .iter()
        .zip(&assigned)
        .filter(|(_, text)| text.is_none())
        .map(|(binding, _)| {
            format!(
                "`{}` ({}, {})",
                binding.name,
                binding.declared_binding(),
                binding.type_name
            )
        })
        .collect();
    if !missing.is_empty() {
        let given = arguments.len();
        bail!(
            "{}, but {given} --buffer argument{} {} given; missing {}",
            describe_all(),
            if given == 1 { "" } else { "s" },
            if given == 1 { "was" } else { "were" },
            missing.join(", ")
        );
    }
    let mut plans = Vec::with_capacity(bindings.len());
    for (binding, text) in bindings.iter().zip(assigned) {
        let text = text.unwrap_or_default();
        let label = buffer_label(binding);
        let shape = layout::buffer_shape(module.naga_module(), binding).map_err(|error| anyhow!("{label}: {error}"))?;
        let spec = Spec::parse(text).map_err(|error| anyhow!("{label}: {error}"))?;
        let (elements, bytes) =
            size_buffer(binding, &shape, &spec, text).map_err(|error| anyhow!("{label}: {error}"))?;
        spec.check(&shape)
            .map_err(|error| anyhow!("{label}: `{text}`: {error}"))?;
        plans.push(BufferPlan {
            binding,
            shape,
            spec,
            elements,
            bytes,
        });
    }
    Ok(plans)
}

/// The number of elements (for an array) and bytes the spec makes of the buffer, or why the
/// two do not fit.
fn size_buffer(
    binding: &BufferBindingInfo,
    shape: &Shape,
    spec: &Spec,
    text: &str,
) -> Result<(Option<u64>, u64), String> {
    let fixed_count = shape.element.as_ref().and_then(|element| element.count);
    let header_values = shape.header.len() as u64;
    let per_element = shape.values_per_element() as u64;
    let Some(given) = spec.value_count() else {
        return size_from_file(binding, shape, spec);
    };
    let plural = |count: u64, one: &str| format!("{count} {one}{}", if count == 1 { "" } else { "s" });
    let element_type = shape
        .element
        .as_ref()
        .map(|element| element.type_name.as_str())
        .unwrap_or("");
    match (&shape.element, fixed_count) {
        // A fixed-size buffer takes exactly its number of values.
        (None, _) | (Some(_), Some(_)) => {
            let count = fixed_count.unwrap_or(0);
            let expected = header_values + count * per_element;
            let bytes = shape.bytes_for(count).ok_or("its size overflows")?;
            if given != expected {
                return Err(format!(
                    "it has a fixed size: it takes exactly {} ({bytes} bytes), but `{text}` gives {given}",
                    plural(expected, "value")
                ));
            }
            Ok((fixed_count, bytes))
        }
        (Some(_), None) => {
            let header = if header_values > 0 {
                format!("{} of header, then ", plural(header_values, "value"))
            } else {
                String::new()
            };
            if per_element == 0 {
                return Err(format!("its element type {element_type} has no values"));
            }
            if given < header_values || !(given - header_values).is_multiple_of(per_element) {
                return Err(format!(
                    "it takes {header}{} per element ({element_type}), but `{text}` gives {given}, which is not a whole \
                     number of elements",
                    plural(per_element, "value")
                ));
            }
            let elements = (given - header_values) / per_element;
            if elements == 0 {
                return Err(format!(
                    "it needs at least one element ({header}{} per element), but `{text}` gives {}",
                    plural(per_element, "value"),
                    if given == 0 {
                        "none".to_owned()
                    } else {
                        plural(given, "value")
                    }
                ));
            }
            let bytes = shape.bytes_for(elements).ok_or("its size overflows")?;
            Ok((Some(elements), bytes))
        }
    }
}

/// The size of a `file:` buffer: the file's, which must be a possible size of the buffer.
fn size_from_file(binding: &BufferBindingInfo, shape: &Shape, spec: &Spec) -> Result<(Option<u64>, u64), String> {
    let Spec::File(path) = spec else {
        return Err("internal: a spec without a value count that is not a file".to_owned());
    };
    let bytes = std::fs::metadata(path)
        .map_err(|error| format!("`file:{}`: {error}", path.display()))?
        .len();
    let shown = path.display();
    match (&shape.element, shape.element.as_ref().and_then(|element| element.count)) {
        (Some(element), None) => {
            let header = shape.header_bytes;
            if bytes <= header || !(bytes - header).is_multiple_of(element.stride.max(1)) {
                let start = if header > 0 {
                    format!("{header} bytes of header, then ")
                } else {
                    String::new()
                };
                return Err(format!(
                    "file {shown} has {bytes} bytes, but the buffer takes {start}one or more elements of {} bytes ({})",
                    element.stride, element.type_name
                ));
            }
            Ok((Some((bytes - header) / element.stride.max(1)), bytes))
        }
        (element, count) => {
            let expected = binding.min_size();
            if bytes != expected {
                return Err(format!(
                    "it has a fixed size of {expected} bytes, but file {shown} has {bytes} bytes"
                ));
            }
            Ok((element.as_ref().and(count), bytes))
        }
    }
}

fn plan_scalars(module: &WgslModule, entry: &EntryPointInfo, arguments: &[String]) -> anyhow::Result<Vec<ScalarPlan>> {
    let Some(block) = &entry.scalars else {
        if arguments.is_empty() {
            return Ok(Vec::new());
        }
        bail!(
            "kernel `{}` takes no scalars (it declares no var<immediate>), but {} --scalar argument{} given",
            entry.name,
            arguments.len(),
            if arguments.len() == 1 { " was" } else { "s were" }
        );
    };
    let names: Vec<String> = block.members.iter().map(|member| member.name.clone()).collect();
    let describe_all = || {
        format!(
            "kernel `{}` takes {} scalar{}, the members of `{}: {}` ({})",
            entry.name,
            block.members.len(),
            if block.members.len() == 1 { "" } else { "s" },
            block.name,
            block.type_name,
            describe_members(block)
        )
    };
    let assigned = assign(arguments, &names, "scalar", &describe_all)?;
    let missing: Vec<String> = block
        .members
        .iter()
        .zip(&assigned)
        .filter(|(_, text)| text.is_none())
        .map(|(member, _)| format!("`{}: {}`", member.name, member.type_name))
        .collect();
    if !missing.is_empty() {
        let given = arguments.len();
        bail!(
            "{}, but {given} --scalar argument{} {} given; missing {}",
            describe_all(),
            if given == 1 { "" } else { "s" },
            if given == 1 { "was" } else { "were" },
            missing.join(", ")
        );
    }
    let mut plans = Vec::with_capacity(block.members.len());
    for (index, (member, text)) in block.members.iter().zip(assigned).enumerate() {
        let text = text.unwrap_or_default();
        // A block that is one scalar or vector is its own only member: no "member of" then.
        let label = if block.members.len() == 1 && member.name == block.name {
            format!("scalar `{}` ({})", member.name, member.type_name)
        } else {
            format!(
                "scalar `{}` ({}, member of `{}: {}`)",
                member.name, member.type_name, block.name, block.type_name
            )
        };
        let slots = layout::scalar_member_slots(module.naga_module(), block, index)
            .map_err(|error| anyhow!("{label}: {error}"))?;
        let inner = text.trim();
        let inner = inner
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(inner);
        let items: Vec<&str> = inner.split(',').map(str::trim).collect();
        if items.len() != slots.len() {
            bail!(
                "{label} takes {} value{}{}, but `{text}` gives {}",
                slots.len(),
                if slots.len() == 1 { "" } else { "s" },
                if slots.len() > 1 { " separated by commas" } else { "" },
                items.len()
            );
        }
        let mut bytes = vec![0u8; member.size as usize];
        let mut decoded = Vec::with_capacity(slots.len());
        for (slot, item) in slots.iter().zip(&items) {
            let raw = parse_value(slot.ty, item).map_err(|error| anyhow!("{label}: {error}"))?;
            let start = slot.offset as usize;
            let place = bytes
                .get_mut(start..start + raw.as_bytes().len())
                .ok_or_else(|| anyhow!("{label}: a value lies outside the member's {} bytes", member.size))?;
            place.copy_from_slice(raw.as_bytes());
            decoded.push(decode(slot.ty, raw.as_bytes()));
        }
        plans.push(ScalarPlan {
            name: member.name.clone(),
            type_name: member.type_name.clone(),
            bytes,
            values: decoded,
        });
    }
    Ok(plans)
}

/// `a: f32, n: u32`.
fn describe_members(block: &ScalarBlockInfo) -> String {
    block
        .members
        .iter()
        .map(|member| format!("{}: {}", member.name, member.type_name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens the device `--device` (else XHAL_DEVICE, else the default policy) picks among those
/// with the features the kernel needs (f16, f64...), so that an automatic choice never lands
/// on a device that cannot run it.
fn choose_device(device: Option<&str>, module: &WgslModule) -> anyhow::Result<(Runtime, Device, Explanation)> {
    let selector = match device {
        Some(text) => Selector::parse_from(text, DEVICE_ORIGIN)?,
        None => Selector::from_env()?,
    };
    let selector = selector.require_features(Features(module.required_features()));
    // Every backend, not only those the selector can reach, so that a failed choice can list
    // everything that is present (as `xhal info` does).
    let runtime = Runtime::builder()
        .device_selector(None)
        .build()
        .context("discovering backends")?;
    match runtime.choose(&selector) {
        Ok((device, explanation)) => Ok((runtime, device, explanation)),
        Err(error) => {
            let mut message = error.to_string();
            for note in backends_without_devices(&runtime, &selector) {
                message.push_str("\nnote: ");
                message.push_str(&note);
            }
            let context = match device {
                Some(text) => format!("choosing a device for --device {text:?}"),
                None => "choosing a device".to_owned(),
            };
            Err(anyhow!(message).context(context))
        }
    }
}

/// The buffer's bytes before the run, made after the device is known so that a size past
/// the device's largest allocation is refused before the host tries to hold it.
fn initial_bytes(plan: &BufferPlan<'_>, device: &Device) -> anyhow::Result<Vec<u8>> {
    let label = buffer_label(plan.binding);
    let largest = device.info().max_allocation_size;
    if largest > 0 && plan.bytes > largest {
        bail!(
            "{label} needs {} bytes, more than the largest allocation of {} ({largest} bytes)",
            plan.bytes,
            device.label()
        );
    }
    if let Spec::File(path) = &plan.spec {
        let bytes = std::fs::read(path).with_context(|| format!("{label}: reading {}", path.display()))?;
        if bytes.len() as u64 != plan.bytes {
            bail!("{label}: {} changed size while being read", path.display());
        }
        return Ok(bytes);
    }
    let size =
        usize::try_from(plan.bytes).map_err(|_| anyhow!("{label}: {} bytes do not fit in memory", plan.bytes))?;
    let mut image = Vec::new();
    // A failed reservation is an error to report, not an abort.
    image
        .try_reserve_exact(size)
        .map_err(|_| anyhow!("{label}: cannot hold {size} bytes in host memory"))?;
    image.resize(size, 0);
    let seed = u64::from(plan.binding.binding);
    plan.spec
        .write(&plan.shape, seed, &mut image)
        .map_err(|error| anyhow!("{label}: {error}"))?;
    Ok(image)
}

fn write_outputs(folder: &Path, buffers: &[BufferPlan<'_>], results: &[Vec<u8>]) -> anyhow::Result<()> {
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    for (plan, bytes) in buffers.iter().zip(results) {
        let path = folder.join(format!("{}.bin", plan.binding.name));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workgroups_parse_one_to_three_numbers() {
        assert_eq!(parse_workgroups("4"), Ok([4, 1, 1]));
        assert_eq!(parse_workgroups("4, 2"), Ok([4, 2, 1]));
        assert_eq!(parse_workgroups("4,2,3"), Ok([4, 2, 3]));
        assert!(parse_workgroups("4,2,3,1").is_err());
        assert!(parse_workgroups("x").is_err());
        assert!(parse_workgroups("-1").is_err());
    }
}

//! The `kernels` area: loading modules and finding entry points, grids and workgroup shapes,
//! the argument ABI (buffers, views and the scalar block), and launches that must be refused.

use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, TestCase, TestResult, Verdict};
use xhal::{ErrorKind, Kernel, Launch};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        // Loading.
        test_case!(
            "kernels.load.syntax_error",
            "WGSL with a syntax error is refused as an invalid argument whose message names the line",
            load_syntax_error
        ),
        test_case!(
            "kernels.load.type_error",
            "WGSL with a type mismatch is refused as an invalid argument whose message names the line",
            load_type_error
        ),
        test_case!(
            "kernels.load.validation_error",
            "WGSL that parses but stores to a read-only buffer is refused as an invalid argument naming the line",
            load_validation_error
        ),
        test_case!(
            "kernels.load.interface_error",
            "a kernel taking a texture, outside the argument ABI, is refused as an invalid argument naming it",
            load_interface_error
        ),
        test_case!(
            "kernels.load.override_defaults",
            "override constants, in the workgroup size and in code, take their default values",
            load_override_defaults
        ),
        test_case!(
            "kernels.load.override_values",
            "override values given at load, by name and by @id, size the workgroup and a workgroup array and reach the code",
            load_override_values
        ),
        test_case!(
            "kernels.load.override_refusals",
            "an override value of the wrong type, for an undeclared name, or missing where there is no default is refused, naming the override",
            load_override_refusals
        ),
        // Uniforms and binding numbers.
        test_case!(
            "kernels.bindings.gaps_and_groups",
            "buffers at bindings with gaps and in several groups are the launch's arguments in (group, binding) order",
            bindings_gaps_and_groups
        ),
        test_case!(
            "kernels.uniform.struct_in_a_buffer",
            "a var<uniform> parameter struct, bound as a buffer the application wrote, is read with the uniform layout",
            uniform_struct_in_a_buffer
        ),
        test_case!(
            "kernels.uniform.staged_values",
            "values passed with Launch::uniform, 700 launches in a row, each reach their own launch and no other",
            uniform_staged_values
        ),
        test_case!(
            "kernels.uniform.refused_misuse",
            "a uniform view smaller than its struct, a staged value of the wrong size, or one for a read_write buffer is refused, naming the binding",
            uniform_refused_misuse
        ),
        // Entry points.
        test_case!(
            "kernels.entry.found_by_name",
            "an entry point is found by its name, reports its workgroup size, and runs",
            entry_found_by_name
        ),
        test_case!(
            "kernels.entry.missing_not_found",
            "asking for an absent entry point, or for a helper function that is not one, is refused as not found, naming it",
            entry_missing_not_found
        ),
        test_case!(
            "kernels.entry.several_in_one_module",
            "a module with three entry points of different shapes and arguments runs each of them as itself",
            entry_several_in_one_module
        ),
        test_case!(
            "kernels.entry.same_name_in_two_modules",
            "entry points of the same name in two modules stay distinct kernels",
            entry_same_name_in_two_modules
        ),
        test_case!(
            "kernels.entry.kernel_outlives_module",
            "a kernel still launches after the module it came from has been dropped",
            entry_kernel_outlives_module
        ),
        // Grids.
        test_case!(
            "kernels.grid.one_dimensional",
            "a 1D grid of 37 workgroups of 64 runs every invocation once, each seeing its own global id",
            grid_one_dimensional
        ),
        test_case!(
            "kernels.grid.two_dimensional",
            "a 2D grid of 5x3 workgroups of 8x8 runs every invocation once, each seeing its own global id",
            grid_two_dimensional
        ),
        test_case!(
            "kernels.grid.three_dimensional",
            "a 3D grid of 3x2x2 workgroups of 4x4x4 runs every invocation once, each seeing its own global id",
            grid_three_dimensional
        ),
        test_case!(
            "kernels.grid.yz_workgroup_counts",
            "a grid of 2x3x4 workgroups of a 1D workgroup reaches every y and z, each invocation seeing its own id",
            grid_yz_workgroup_counts
        ),
        test_case!(
            "kernels.grid.builtins_agree",
            "local id, local index, workgroup id, workgroup count and global id agree with each other in a 3D launch",
            grid_builtins_agree
        ),
        test_case!(
            "kernels.grid.max_workgroup_count_x",
            "a launch of the largest workgroup count in x (65535 where unlimited) runs every workgroup once",
            grid_max_workgroup_count_x
        ),
        test_case!(
            "kernels.grid.max_workgroup_count_y",
            "a launch of the largest workgroup count in y (65535 where unlimited) runs every workgroup once",
            grid_max_workgroup_count_y
        ),
        test_case!(
            "kernels.grid.max_workgroup_count_z",
            "a launch of the largest workgroup count in z (65535 where unlimited) runs every workgroup once",
            grid_max_workgroup_count_z
        ),
        // Workgroup shapes.
        test_case!(
            "kernels.workgroup_size.x1",
            "a workgroup of one invocation runs",
            workgroup_size_x1
        ),
        test_case!(
            "kernels.workgroup_size.x2",
            "workgroups of 2 along x run every invocation with its own local id",
            workgroup_size_x2
        ),
        test_case!(
            "kernels.workgroup_size.x3",
            "workgroups of 3 along x, not a power of two, run every invocation with its own local id",
            workgroup_size_x3
        ),
        test_case!(
            "kernels.workgroup_size.x7",
            "workgroups of 7 along x, smaller than any subgroup, run every invocation with its own local id",
            workgroup_size_x7
        ),
        test_case!(
            "kernels.workgroup_size.x64",
            "workgroups of 64 along x run every invocation with its own local id",
            workgroup_size_x64
        ),
        test_case!(
            "kernels.workgroup_size.x_max",
            "workgroups of the device's largest size along x run every invocation with its own local id",
            workgroup_size_x_max
        ),
        test_case!(
            "kernels.workgroup_size.y64",
            "workgroups of 1x64x1 run every invocation with its own local id",
            workgroup_size_y64
        ),
        test_case!(
            "kernels.workgroup_size.z64",
            "workgroups of 1x1x64 run every invocation with its own local id",
            workgroup_size_z64
        ),
        test_case!(
            "kernels.workgroup_size.shape_5x3x2",
            "workgroups of 5x3x2 run every invocation with its own local id",
            workgroup_size_5x3x2
        ),
        test_case!(
            "kernels.workgroup_size.shape_4x4x4",
            "workgroups of 4x4x4 run every invocation with its own local id",
            workgroup_size_4x4x4
        ),
        test_case!(
            "kernels.workgroup_size.max_3d",
            "3D workgroups as large as the device allows (Nx4x4) run every invocation with its own local id",
            workgroup_size_max_3d
        ),
        // The scalar block.
        test_case!(
            "kernels.scalars.struct_layout",
            "u32, i32, f32, vec2, vec4 and vec3 members of the scalar block arrive at their WGSL offsets, bit for bit",
            scalars_struct_layout
        ),
        test_case!(
            "kernels.scalars.vector_block",
            "a scalar block that is a single vec4<u32> arrives whole",
            scalars_vector_block
        ),
        test_case!(
            "kernels.scalars.each_launch_keeps_its_own",
            "32 launches queued back to back, each with other scalars, each see their own",
            scalars_each_launch_keeps_its_own
        ),
        // Buffers.
        test_case!(
            "kernels.buffers.eight_arguments",
            "a kernel with 8 buffer arguments sees each buffer at its own binding",
            buffers_eight_arguments
        ),
        test_case!(
            "kernels.buffers.sixteen_arguments",
            "a kernel with 16 buffer arguments sees each buffer at its own binding",
            buffers_sixteen_arguments
        ),
        test_case!(
            "kernels.views.offset_views",
            "buffer views at aligned offsets read and write exactly their own elements",
            views_offset_views
        ),
        test_case!(
            "kernels.views.offset_alignment",
            "a view at a multiple of the offset alignment works, one between multiples is refused naming the alignment",
            views_offset_alignment
        ),
        test_case!(
            "kernels.views.array_length",
            "arrayLength counts the elements that fit in the bound view, bare or after a struct header, at any offset",
            views_array_length
        ),
        // Launches that must be refused.
        test_case!(
            "kernels.arguments.too_few_buffers",
            "a launch missing buffers is refused as an invalid argument naming the kernel and the missing binding",
            arguments_too_few_buffers
        ),
        test_case!(
            "kernels.arguments.too_many_buffers",
            "a launch with a buffer too many is refused as an invalid argument naming the kernel and the argument",
            arguments_too_many_buffers
        ),
        test_case!(
            "kernels.arguments.scalar_for_buffer",
            "a scalar where a buffer belongs is refused as an invalid argument naming the kernel and the binding",
            arguments_scalar_for_buffer
        ),
        test_case!(
            "kernels.arguments.view_too_small",
            "a view smaller than its binding needs is refused as an invalid argument naming the kernel and the binding",
            arguments_view_too_small
        ),
        test_case!(
            "kernels.arguments.missing_scalars",
            "a launch with too few scalars is refused as an invalid argument naming the kernel and the members",
            arguments_missing_scalars
        ),
        test_case!(
            "kernels.arguments.too_many_scalars",
            "a launch with a scalar too many is refused as an invalid argument naming the kernel",
            arguments_too_many_scalars
        ),
        test_case!(
            "kernels.arguments.wrong_scalar_size",
            "a scalar of the wrong size is refused as an invalid argument naming the kernel and the member",
            arguments_wrong_scalar_size
        ),
        test_case!(
            "kernels.arguments.zero_workgroups",
            "a launch with no workgroups in x, y or z is refused as an invalid argument naming the kernel and the axis",
            arguments_zero_workgroups
        ),
        test_case!(
            "kernels.arguments.too_many_workgroups",
            "a launch with more workgroups than the device allows is refused as an invalid argument naming the kernel",
            arguments_too_many_workgroups
        ),
        test_case!(
            "kernels.arguments.refusals_run_nothing",
            "refused launches leave every buffer as it was and the stream usable",
            arguments_refusals_run_nothing
        ),
        // Launch order.
        test_case!(
            "kernels.launch.in_order",
            "20 launches of a kernel on one buffer, queued without waiting, apply in the order queued",
            launch_in_order
        ),
    ]
}

// ---- helpers shared with the compute area ------------------------------------------------

/// Loads `source` and finds `entry`; either failing fails the test, naming `what`.
pub(super) fn kernel_of(context: &TestContext, what: &str, source: &str, entry: &str) -> Result<Kernel, Verdict> {
    context.load_wgsl(what, source)?.kernel(entry).map_err(|error| {
        Verdict::fail(format!(
            "the {what} kernel has no usable entry point `{entry}`: {error}"
        ))
    })
}

/// Skips unless the device takes workgroups of `size`: each dimension, and the product.
pub(super) fn require_workgroup_shape(context: &TestContext, size: [u32; 3]) -> TestResult {
    for (axis, (wanted, most)) in size.iter().zip(context.info().max_workgroup_size).enumerate() {
        if *wanted > most {
            return Err(Verdict::skip(format!(
                "the device's workgroups are at most {most} in {}; the test needs {wanted}",
                ["x", "y", "z"][axis]
            )));
        }
    }
    context.require_workgroup_invocations(size.iter().product())
}

/// Workgroups of `width` invocations needed to cover `count` invocations.
pub(super) fn groups_for(count: usize, width: u32) -> u32 {
    count.div_ceil(width as usize) as u32
}

/// Fails unless `message` mentions each of `needles`.
pub(super) fn mentions(message: &str, needles: &[&str], what: &str) -> TestResult {
    for needle in needles {
        check(message.contains(needle), || {
            format!("{what}: the error message does not name `{needle}`: {message}")
        })?;
    }
    Ok(())
}

/// Marks elements no invocation wrote.
const UNWRITTEN: u32 = 0xdead_beef;

// ---- loading -------------------------------------------------------------------------------

const SYNTAX_ERROR: &str = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn broken(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = 1u
}
";

const TYPE_ERROR: &str = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn broken(@builtin(global_invocation_id) id: vec3<u32>) {
    let x: u32 = 1.5;
    out[id.x] = x;
}
";

const VALIDATION_ERROR: &str = "@group(0) @binding(0) var<storage, read> out: array<u32>;

@compute @workgroup_size(64)
fn broken(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = 1u;
}
";

const INTERFACE_ERROR: &str = "@group(0) @binding(0) var image: texture_2d<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn broken(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = textureLoad(image, vec2<i32>(0, 0), 0).x;
}
";

/// The message must point at `line` as `file:line:column`.
fn names_line(message: &str, line: u32, what: &str) -> TestResult {
    let marker = format!(":{line}:");
    check(message.contains(&marker), || {
        format!("{what}: the error message does not point at line {line} (`{marker}`): {message}")
    })
}

fn load_syntax_error(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let message = expect_error(
        context.device().load_wgsl(SYNTAX_ERROR),
        &[ErrorKind::InvalidArgument],
        "WGSL missing a `;`",
    )?;
    // naga reports the missing `;` where the next token starts.
    names_line(&message, 6, "WGSL missing a `;` at the end of line 5")
}

fn load_type_error(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let message = expect_error(
        context.device().load_wgsl(TYPE_ERROR),
        &[ErrorKind::InvalidArgument],
        "WGSL initialising a u32 with 1.5",
    )?;
    names_line(&message, 5, "WGSL initialising a u32 with 1.5")
}

fn load_validation_error(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let message = expect_error(
        context.device().load_wgsl(VALIDATION_ERROR),
        &[ErrorKind::InvalidArgument],
        "WGSL storing to a read-only buffer",
    )?;
    names_line(&message, 5, "WGSL storing to a read-only buffer")
}

fn load_interface_error(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let message = expect_error(
        context.device().load_wgsl(INTERFACE_ERROR),
        &[ErrorKind::InvalidArgument],
        "a kernel taking a texture",
    )?;
    mentions(&message, &["texture", "broken", "image"], "a kernel taking a texture")
}

const OVERRIDES: &str = r#"
override width: u32 = 16u;
override scale: u32 = 3u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(width)
fn scaled(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    if id.x < arrayLength(&out) {
        out[id.x] = id.x * scale + lane * 1000u;
    }
}
"#;

fn load_override_defaults(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "override", OVERRIDES, "scaled")?;
    check_eq(kernel.workgroup_size(), Some([16, 1, 1]), "reflected workgroup size")?;
    let out = context.device().alloc_from(context.stream(), &[UNWRITTEN; 48])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(3, 1, 1).buffer(&out))?;
    let expected: Vec<u32> = (0..48).map(|i| i * 3 + (i % 16) * 1000).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "output of a kernel using overrides",
    )
}

// ---- uniforms and binding numbers ----------------------------------------------------------

const GAPS_AND_GROUPS: &str = r#"
@group(2) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(7) var<storage, read> second: array<u32>;
@group(0) @binding(1) var<storage, read> first: array<u32>;
@group(1) @binding(3) var<storage, read> third: array<u32>;

@compute @workgroup_size(64)
fn combine(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&out) {
        out[id.x] = first[id.x] * 1000000u + second[id.x] * 1000u + third[id.x];
    }
}
"#;

fn bindings_gaps_and_groups(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "gaps and groups", GAPS_AND_GROUPS, "combine")?;
    let order: Vec<(u32, u32, u32)> = kernel
        .info()
        .map(|info| info.buffers.iter().map(|b| (b.argument, b.group, b.binding)).collect())
        .unwrap_or_default();
    check_eq(
        order,
        vec![(0, 0, 1), (1, 0, 7), (2, 1, 3), (3, 2, 0)],
        "arguments as reflected",
    )?;
    let n = 300usize;
    let [first, second, third]: [Vec<u32>; 3] =
        [1, 2, 3].map(|seed| context.random_u32(70 + seed, n).iter().map(|v| v % 1000).collect());
    let device = context.device();
    let stream = context.stream();
    let buffers = [&first, &second, &third].map(|data| device.alloc_from(stream, data));
    let [first_buffer, second_buffer, third_buffer] = buffers;
    let out = device.alloc_from(stream, &vec![UNWRITTEN; n])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&first_buffer?)
            .buffer(&second_buffer?)
            .buffer(&third_buffer?)
            .buffer(&out),
    )?;
    let expected: Vec<u32> = (0..n)
        .map(|i| first[i] * 1_000_000 + second[i] * 1000 + third[i])
        .collect();
    check_slice_eq(
        &stream.read_to_vec(&out)?,
        &expected,
        "values from the three inputs, each in its place",
    )
}

/// Members that the uniform layout places with gaps: a vec3 then a scalar in its last lane,
/// an array of vec4 (stride 16), a vec2 after it, and a nested struct, which the uniform
/// address space requires at a multiple of 16 (so `@align(16)`: bytes 56..64 are padding).
const UNIFORM_STRUCT: &str = r#"
struct Pair { low: u32, high: u32 }
struct Params {
    direction: vec3<f32>,
    count: u32,
    weights: array<vec4<f32>, 2>,
    offset: vec2<f32>,
    @align(16) pair: Pair,
}
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(1) @binding(0) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn apply(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= params.count {
        return;
    }
    let w = params.weights[id.x % 2u];
    let x = input[id.x];
    out[id.x] = x * params.direction.y + w.z + params.offset.x - f32(params.pair.high - params.pair.low);
}
"#;

/// `Params` of `UNIFORM_STRUCT` as bytes, by the uniform address space's layout.
fn uniform_params(
    direction: [f32; 3],
    count: u32,
    weights: [[f32; 4]; 2],
    offset: [f32; 2],
    pair: [u32; 2],
) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(64);
    for value in direction {
        bytes.extend(value.to_le_bytes());
    }
    bytes.extend(count.to_le_bytes());
    for value in weights.iter().flatten() {
        bytes.extend(value.to_le_bytes());
    }
    for value in offset {
        bytes.extend(value.to_le_bytes());
    }
    bytes.extend([0xee; 8]);
    for value in pair {
        bytes.extend(value.to_le_bytes());
    }
    // The struct's size rounds up to its alignment, 16.
    bytes.extend([0xee; 8]);
    bytes
}

fn uniform_struct_in_a_buffer(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "uniform parameters", UNIFORM_STRUCT, "apply")?;
    let params = kernel.info().and_then(|info| info.buffers.get(1));
    check_eq(
        params.map(|b| (b.name.as_str(), b.space, b.size)),
        Some((
            "params",
            xhal::kernel::BufferSpace::Uniform,
            xhal::kernel::BufferSize::Fixed(80),
        )),
        "the uniform argument as reflected",
    )?;
    let n = 200usize;
    let input: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let bytes = uniform_params(
        [9.0, 2.0, 7.0],
        150,
        [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 3.0, 0.0]],
        [0.25, 8.0],
        [5, 9],
    );
    let device = context.device();
    let stream = context.stream();
    let input_buffer = device.alloc_from(stream, &input)?;
    let params_buffer = device.alloc_from(stream, &bytes)?;
    let out = device.alloc_from(stream, &vec![-1.0f32; n])?;
    stream.launch(
        &Launch::new(&kernel)
            .workgroups(groups_for(n, 64), 1, 1)
            .buffer(&input_buffer)
            .buffer(&params_buffer)
            .buffer(&out),
    )?;
    let expected: Vec<f32> = (0..n)
        .map(|i| {
            if i < 150 {
                input[i] * 2.0 + [1.0, 3.0][i % 2] + 0.25 - 4.0
            } else {
                -1.0
            }
        })
        .collect();
    check_slice_eq(
        &stream.read_to_vec(&out)?,
        &expected,
        "values computed from the uniform's members",
    )
}

const UNIFORM_STAGED: &str = r#"
struct Step { index: u32, value: u32 }
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn record() {
    out[step.index] = step.value * 3u + 1u;
}
"#;

fn uniform_staged_values(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "staged uniform", UNIFORM_STAGED, "record")?;
    // More launches than the stream's 64 KiB ring has 256-byte slots, so it wraps around.
    let launches = 700u32;
    let stream = context.stream();
    let out = context
        .device()
        .alloc_from(stream, &vec![UNWRITTEN; launches as usize])?;
    for index in 0..launches {
        let step = [index, index.wrapping_mul(2_654_435_761)];
        stream.launch(&Launch::new(&kernel).uniform(&step).buffer(&out))?;
    }
    let expected: Vec<u32> = (0..launches)
        .map(|index| index.wrapping_mul(2_654_435_761).wrapping_mul(3).wrapping_add(1))
        .collect();
    check_slice_eq(&stream.read_to_vec(&out)?, &expected, "one value per launch")
}

fn uniform_refused_misuse(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "uniform parameters", UNIFORM_STRUCT, "apply")?;
    let device = context.device();
    let stream = context.stream();
    let input = device.alloc_from(stream, &[0.0f32; 64])?;
    let out = device.alloc_from(stream, &[0.0f32; 64])?;
    let short = device.alloc_from(stream, &[0u8; 72])?;
    refused(
        stream.launch(&Launch::new(&kernel).buffer(&input).buffer(&short).buffer(&out)),
        "a 72-byte view for an 80-byte uniform",
        &["params", "72", "80"],
    )?;
    refused(
        stream.launch(&Launch::new(&kernel).buffer(&input).uniform(&[0u32; 18]).buffer(&out)),
        "a 72-byte staged value for an 80-byte uniform",
        &["params", "72", "80"],
    )?;
    refused(
        stream.launch(
            &Launch::new(&kernel)
                .buffer(&input)
                .uniform(&[0u32; 20])
                .uniform(&[0f32; 64]),
        ),
        "a staged value for a read_write buffer",
        &["out", "read_write"],
    )
}

const OVERRIDE_VALUES: &str = r#"
override block: u32 = 8u;
@id(5) override scale: f32 = 1.0;
override reversed: bool = false;
override needed: u32;
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
var<workgroup> tile: array<f32, block>;

@compute @workgroup_size(block)
fn staged(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) group: vec3<u32>) {
    tile[lane] = f32(group.x * block + lane + needed) * scale;
    workgroupBarrier();
    let source_lane = select(lane, block - 1u - lane, reversed);
    out[group.x * block + lane] = tile[source_lane];
}
"#;

fn load_override_values(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    require_workgroup_shape(context, [32, 1, 1])?;
    let module = context.device().load_wgsl_with_overrides(
        OVERRIDE_VALUES,
        &[("block", 32.0), ("5", 0.5), ("reversed", 1.0), ("needed", 1000.0)],
    )?;
    let kernel = module.kernel("staged")?;
    check_eq(
        kernel.workgroup_size(),
        Some([32, 1, 1]),
        "workgroup size from an override value",
    )?;
    let stream = context.stream();
    let out = context.device().alloc_from(stream, &[-1.0f32; 96])?;
    stream.launch(&Launch::new(&kernel).workgroups(3, 1, 1).buffer(&out))?;
    let expected: Vec<f32> = (0..96u32)
        .map(|i| {
            let (group, lane) = (i / 32, i % 32);
            (group * 32 + (31 - lane) + 1000) as f32 * 0.5
        })
        .collect();
    check_slice_eq(
        &stream.read_to_vec(&out)?,
        &expected,
        "values computed with the given overrides",
    )
}

fn load_override_refusals(context: &TestContext) -> TestResult {
    context.require_wgsl_kernels()?;
    let device = context.device();
    for (values, needles, what) in [
        (&[("needed", -3.0)][..], &["`needed`", "u32"][..], "a negative u32"),
        (
            &[("needed", 1.0), ("blocks", 2.0)][..],
            &["`blocks`", "`block`", "@id(5)"][..],
            "an undeclared override",
        ),
        (
            &[][..],
            &["`needed`", "no default"][..],
            "an override with neither value nor default",
        ),
    ] {
        let message = expect_error(
            device.load_wgsl_with_overrides(OVERRIDE_VALUES, values),
            &[ErrorKind::InvalidArgument],
            what,
        )?;
        mentions(&message, needles, what)?;
    }
    Ok(())
}

// ---- entry points --------------------------------------------------------------------------

const ENTRY_POINTS: &str = r#"
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> copy: array<u32>;

fn helper(x: u32) -> u32 {
    return x * 2u + 1u;
}

@compute @workgroup_size(32)
fn fill(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = id.x + 100u;
    }
}

@compute @workgroup_size(8, 4)
fn twice_plus_one(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 8u;
    if i < arrayLength(&data) {
        data[i] = helper(data[i]);
    }
}

@compute @workgroup_size(1)
fn copy_reversed(@builtin(workgroup_id) group: vec3<u32>) {
    let n = arrayLength(&data);
    if group.x < n {
        copy[group.x] = data[n - 1u - group.x];
    }
}
"#;

fn entry_found_by_name(context: &TestContext) -> TestResult {
    let module = context.load_wgsl("entry points", ENTRY_POINTS)?;
    require_workgroup_shape(context, [8, 4, 1])?;
    let kernel = module.kernel("twice_plus_one")?;
    check_eq(kernel.name(), "twice_plus_one", "kernel name")?;
    check_eq(kernel.workgroup_size(), Some([8, 4, 1]), "reflected workgroup size")?;
    let data = context
        .device()
        .alloc_from(context.stream(), &(0..64).collect::<Vec<u32>>())?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(1, 2, 1).buffer(&data))?;
    let expected: Vec<u32> = (0..64).map(|i| i * 2 + 1).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&data)?,
        &expected,
        "output of `twice_plus_one`",
    )
}

fn entry_missing_not_found(context: &TestContext) -> TestResult {
    let module = context.load_wgsl("entry points", ENTRY_POINTS)?;
    let message = expect_error(
        module.kernel("does_not_exist"),
        &[ErrorKind::NotFound],
        "asking for entry point `does_not_exist`",
    )?;
    mentions(&message, &["does_not_exist"], "asking for entry point `does_not_exist`")?;
    let message = expect_error(
        module.kernel("helper"),
        &[ErrorKind::NotFound],
        "asking for `helper`, a function that is not an entry point",
    )?;
    mentions(&message, &["helper"], "asking for `helper`")
}

fn entry_several_in_one_module(context: &TestContext) -> TestResult {
    require_workgroup_shape(context, [8, 4, 1])?;
    let module = context.load_wgsl("entry points", ENTRY_POINTS)?;
    let names: Vec<String> = module
        .entry_points()
        .map(|entries| entries.iter().map(|entry| entry.name.clone()).collect())
        .unwrap_or_default();
    check_eq(
        names,
        vec![
            "fill".to_string(),
            "twice_plus_one".to_string(),
            "copy_reversed".to_string(),
        ],
        "entry points listed by the module",
    )?;
    let fill = module.kernel("fill")?;
    let twice = module.kernel("twice_plus_one")?;
    let reverse = module.kernel("copy_reversed")?;
    let n = 100usize;
    let data = context.device().alloc_from(context.stream(), &vec![UNWRITTEN; n])?;
    let copy = context.device().alloc_from(context.stream(), &vec![UNWRITTEN; n])?;
    let stream = context.stream();
    stream.launch(&Launch::new(&fill).workgroups(groups_for(n, 32), 1, 1).buffer(&data))?;
    stream.launch(&Launch::new(&twice).workgroups(2, 7, 1).buffer(&data))?;
    stream.launch(
        &Launch::new(&reverse)
            .workgroups(n as u32, 1, 1)
            .buffer(&data)
            .buffer(&copy),
    )?;
    let data_expected: Vec<u32> = (0..n as u32).map(|i| (i + 100) * 2 + 1).collect();
    check_slice_eq(
        &stream.read_to_vec(&data)?,
        &data_expected,
        "data after `fill` then `twice_plus_one`",
    )?;
    let copy_expected: Vec<u32> = data_expected.iter().rev().copied().collect();
    check_slice_eq(&stream.read_to_vec(&copy)?, &copy_expected, "output of `copy_reversed`")
}

const SAME_NAME_A: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = id.x + 1000u;
}
"#;

const SAME_NAME_B: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = id.x * id.x;
}
"#;

fn entry_same_name_in_two_modules(context: &TestContext) -> TestResult {
    let first = kernel_of(context, "first `main`", SAME_NAME_A, "main")?;
    let second = kernel_of(context, "second `main`", SAME_NAME_B, "main")?;
    let a = context.device().alloc_from(context.stream(), &[UNWRITTEN; 32])?;
    let b = context.device().alloc_from(context.stream(), &[UNWRITTEN; 32])?;
    context
        .stream()
        .launch(&Launch::new(&second).workgroups(2, 1, 1).buffer(&b))?;
    context
        .stream()
        .launch(&Launch::new(&first).workgroups(2, 1, 1).buffer(&a))?;
    let expected_a: Vec<u32> = (0..32).map(|i| i + 1000).collect();
    let expected_b: Vec<u32> = (0..32).map(|i| i * i).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&a)?,
        &expected_a,
        "output of the first module's `main`",
    )?;
    check_slice_eq(
        &context.stream().read_to_vec(&b)?,
        &expected_b,
        "output of the second module's `main`",
    )
}

fn entry_kernel_outlives_module(context: &TestContext) -> TestResult {
    let kernel = {
        let module = context.load_wgsl("entry points", ENTRY_POINTS)?;
        module.kernel("fill")?
    };
    let data = context.device().alloc_from(context.stream(), &[UNWRITTEN; 40])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(2, 1, 1).buffer(&data))?;
    let expected: Vec<u32> = (0..40).map(|i| i + 100).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&data)?,
        &expected,
        "output of `fill` after its module was dropped",
    )
}

// ---- grids ---------------------------------------------------------------------------------

const GRID: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

// Writes the global id at the invocation's place in the grid, so the host sees which
// invocation wrote each element, and which element none did.
fn record(id: vec3<u32>, extent: vec3<u32>) {
    let flat = id.x + extent.x * (id.y + extent.y * id.z);
    out[3u * flat] = id.x;
    out[3u * flat + 1u] = id.y;
    out[3u * flat + 2u] = id.z;
}

@compute @workgroup_size(64)
fn grid_1d(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    record(id, groups * vec3<u32>(64u, 1u, 1u));
}

@compute @workgroup_size(8, 8)
fn grid_2d(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    record(id, groups * vec3<u32>(8u, 8u, 1u));
}

@compute @workgroup_size(4, 4, 4)
fn grid_3d(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    record(id, groups * vec3<u32>(4u, 4u, 4u));
}
"#;

fn run_grid(context: &TestContext, entry: &str, size: [u32; 3], groups: [u32; 3]) -> TestResult {
    require_workgroup_shape(context, size)?;
    let kernel = kernel_of(context, "grid", GRID, entry)?;
    let extent = [size[0] * groups[0], size[1] * groups[1], size[2] * groups[2]];
    let count = (extent[0] * extent[1] * extent[2]) as usize;
    let out = context
        .device()
        .alloc_from(context.stream(), &vec![UNWRITTEN; 3 * count])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups[0], groups[1], groups[2])
            .buffer(&out),
    )?;
    let mut expected = Vec::with_capacity(3 * count);
    for z in 0..extent[2] {
        for y in 0..extent[1] {
            for x in 0..extent[0] {
                expected.extend([x, y, z]);
            }
        }
    }
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        &format!("global ids (x, y, z per invocation) recorded by `{entry}` over {groups:?} workgroups"),
    )
}

fn grid_one_dimensional(context: &TestContext) -> TestResult {
    run_grid(context, "grid_1d", [64, 1, 1], [37, 1, 1])
}

fn grid_two_dimensional(context: &TestContext) -> TestResult {
    run_grid(context, "grid_2d", [8, 8, 1], [5, 3, 1])
}

fn grid_three_dimensional(context: &TestContext) -> TestResult {
    run_grid(context, "grid_3d", [4, 4, 4], [3, 2, 2])
}

fn grid_yz_workgroup_counts(context: &TestContext) -> TestResult {
    run_grid(context, "grid_1d", [64, 1, 1], [2, 3, 4])
}

const BUILTINS: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(4, 2, 3)
fn builtins(
    @builtin(global_invocation_id) global: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(local_invocation_index) index: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let extent = groups * vec3<u32>(4u, 2u, 3u);
    let o = 10u * (global.x + extent.x * (global.y + extent.y * global.z));
    out[o] = local.x;
    out[o + 1u] = local.y;
    out[o + 2u] = local.z;
    out[o + 3u] = index;
    out[o + 4u] = group.x;
    out[o + 5u] = group.y;
    out[o + 6u] = group.z;
    out[o + 7u] = groups.x;
    out[o + 8u] = groups.y;
    out[o + 9u] = groups.z;
}
"#;

fn grid_builtins_agree(context: &TestContext) -> TestResult {
    let size = [4u32, 2, 3];
    require_workgroup_shape(context, size)?;
    let kernel = kernel_of(context, "builtins", BUILTINS, "builtins")?;
    let groups = [3u32, 2, 2];
    let extent = [12u32, 4, 6];
    let count = (extent[0] * extent[1] * extent[2]) as usize;
    let out = context
        .device()
        .alloc_from(context.stream(), &vec![UNWRITTEN; 10 * count])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(3, 2, 2).buffer(&out))?;
    let mut expected = Vec::with_capacity(10 * count);
    for z in 0..extent[2] {
        for y in 0..extent[1] {
            for x in 0..extent[0] {
                let local = [x % size[0], y % size[1], z % size[2]];
                expected.extend(local);
                expected.push(local[0] + size[0] * (local[1] + size[1] * local[2]));
                expected.extend([x / size[0], y / size[1], z / size[2]]);
                expected.extend(groups);
            }
        }
    }
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "built-ins per invocation (local id, local index, workgroup id, workgroup count)",
    )
}

const ONE_PER_WORKGROUP: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn mark(@builtin(workgroup_id) group: vec3<u32>) {
    out[group.x + group.y + group.z] = group.x + group.y + group.z + 1u;
}
"#;

fn run_max_workgroup_count(context: &TestContext, axis: usize) -> TestResult {
    let kernel = kernel_of(context, "one per workgroup", ONE_PER_WORKGROUP, "mark")?;
    // 0 means no limit; 65535 is then the most every backend takes (and enough).
    let limit = context.info().max_workgroup_count[axis];
    let count = if limit == 0 { 65_535 } else { limit.min(65_535) };
    let out = context.device().alloc::<u32>(count as usize)?;
    context.stream().fill(out.slice(..count as usize), 0u32)?;
    let mut groups = [1u32; 3];
    groups[axis] = count;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups[0], groups[1], groups[2])
            .buffer(&out),
    )?;
    let expected: Vec<u32> = (1..=count).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        &format!("marks of {count} workgroups along {}", ["x", "y", "z"][axis]),
    )
}

fn grid_max_workgroup_count_x(context: &TestContext) -> TestResult {
    run_max_workgroup_count(context, 0)
}

fn grid_max_workgroup_count_y(context: &TestContext) -> TestResult {
    run_max_workgroup_count(context, 1)
}

fn grid_max_workgroup_count_z(context: &TestContext) -> TestResult {
    run_max_workgroup_count(context, 2)
}

// ---- workgroup shapes ----------------------------------------------------------------------

/// The shape is filled in per test, since the largest one depends on the device.
const SHAPE_TEMPLATE: &str = r#"
const SIZE_X: u32 = __X__u;
const SIZE_Y: u32 = __Y__u;
const SIZE_Z: u32 = __Z__u;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(SIZE_X, SIZE_Y, SIZE_Z)
fn shape(
    @builtin(local_invocation_id) local: vec3<u32>,
    @builtin(local_invocation_index) index: u32,
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    let group_index = group.x + groups.x * (group.y + groups.y * group.z);
    let slot = group_index * (SIZE_X * SIZE_Y * SIZE_Z) + index;
    out[2u * slot] = local.x | (local.y << 11u) | (local.z << 22u);
    out[2u * slot + 1u] = group_index;
}
"#;

fn run_shape(context: &TestContext, size: [u32; 3]) -> TestResult {
    require_workgroup_shape(context, size)?;
    let invocations = size[0] * size[1] * size[2];
    let source = SHAPE_TEMPLATE
        .replace("__X__", &size[0].to_string())
        .replace("__Y__", &size[1].to_string())
        .replace("__Z__", &size[2].to_string());
    let kernel = kernel_of(context, &format!("{size:?} workgroup"), &source, "shape")?;
    let groups = [2u32, 1, 2];
    let group_count = groups.iter().product::<u32>();
    let total = (group_count * invocations) as usize;
    let out = context
        .device()
        .alloc_from(context.stream(), &vec![UNWRITTEN; 2 * total])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(groups[0], groups[1], groups[2])
            .buffer(&out),
    )?;
    let mut expected = Vec::with_capacity(2 * total);
    for group in 0..group_count {
        for index in 0..invocations {
            let x = index % size[0];
            let y = (index / size[0]) % size[1];
            let z = index / (size[0] * size[1]);
            expected.extend([x | (y << 11) | (z << 22), group]);
        }
    }
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        &format!("local id (packed) and workgroup of each invocation, workgroups of {size:?}"),
    )
}

fn workgroup_size_x1(context: &TestContext) -> TestResult {
    run_shape(context, [1, 1, 1])
}

fn workgroup_size_x2(context: &TestContext) -> TestResult {
    run_shape(context, [2, 1, 1])
}

fn workgroup_size_x3(context: &TestContext) -> TestResult {
    run_shape(context, [3, 1, 1])
}

fn workgroup_size_x7(context: &TestContext) -> TestResult {
    run_shape(context, [7, 1, 1])
}

fn workgroup_size_x64(context: &TestContext) -> TestResult {
    run_shape(context, [64, 1, 1])
}

fn workgroup_size_x_max(context: &TestContext) -> TestResult {
    let info = context.info();
    run_shape(
        context,
        [info.max_workgroup_size[0].min(info.max_workgroup_invocations), 1, 1],
    )
}

fn workgroup_size_y64(context: &TestContext) -> TestResult {
    run_shape(context, [1, 64, 1])
}

fn workgroup_size_z64(context: &TestContext) -> TestResult {
    run_shape(context, [1, 1, 64])
}

fn workgroup_size_5x3x2(context: &TestContext) -> TestResult {
    run_shape(context, [5, 3, 2])
}

fn workgroup_size_4x4x4(context: &TestContext) -> TestResult {
    run_shape(context, [4, 4, 4])
}

fn workgroup_size_max_3d(context: &TestContext) -> TestResult {
    let info = context.info();
    let y = info.max_workgroup_size[1].min(4);
    let z = info.max_workgroup_size[2].min(4);
    let x = info.max_workgroup_size[0].min(info.max_workgroup_invocations / (y * z).max(1));
    run_shape(context, [x, y, z])
}

// ---- the scalar block ----------------------------------------------------------------------

const SCALAR_LAYOUT: &str = r#"
struct Params {
    a: u32,
    b: i32,
    c: f32,
    pair: vec2<f32>,
    quad: vec4<f32>,
    d: u32,
    triple: vec3<f32>,
    e: f32,
}

var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> out: array<u32, 14>;

@compute @workgroup_size(1)
fn echo() {
    out[0] = params.a;
    out[1] = bitcast<u32>(params.b);
    out[2] = bitcast<u32>(params.c);
    out[3] = bitcast<u32>(params.pair.x);
    out[4] = bitcast<u32>(params.pair.y);
    out[5] = bitcast<u32>(params.quad.x);
    out[6] = bitcast<u32>(params.quad.y);
    out[7] = bitcast<u32>(params.quad.z);
    out[8] = bitcast<u32>(params.quad.w);
    out[9] = params.d;
    out[10] = bitcast<u32>(params.triple.x);
    out[11] = bitcast<u32>(params.triple.y);
    out[12] = bitcast<u32>(params.triple.z);
    out[13] = bitcast<u32>(params.e);
}
"#;

fn scalars_struct_layout(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "scalar layout", SCALAR_LAYOUT, "echo")?;
    // Offsets by WGSL rules: a 0, b 4, c 8, pair 16, quad 32, d 48, triple 64, e 76 (in the
    // vec3's tail), 80 bytes in all.
    let a = 0x8000_0001u32;
    let b = -123_456i32;
    let c = -2.5f32;
    let pair = [1.25f32, 3.0e-3];
    let quad = [f32::MAX, f32::MIN_POSITIVE, -7.0, 1.0e10];
    let d = 42u32;
    let triple = [0.1f32, 0.2, 0.3];
    let e = 99.5f32;
    let out = context.device().alloc_from(context.stream(), &[UNWRITTEN; 14])?;
    context.stream().launch(
        &Launch::new(&kernel)
            .buffer(&out)
            .scalar(a)
            .scalar(b)
            .scalar(c)
            .scalar(pair)
            .scalar(quad)
            .scalar(d)
            .scalar(triple)
            .scalar(e),
    )?;
    let mut expected = vec![a, b as u32, c.to_bits()];
    expected.extend(pair.map(f32::to_bits));
    expected.extend(quad.map(f32::to_bits));
    expected.push(d);
    expected.extend(triple.map(f32::to_bits));
    expected.push(e.to_bits());
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "scalar block members as the kernel read them (a, b, c, pair, quad, d, triple, e)",
    )
}

const VECTOR_BLOCK: &str = r#"
var<immediate> offsets: vec4<u32>;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(16)
fn add_offsets(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = id.x + offsets[id.x % 4u];
}
"#;

fn scalars_vector_block(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "vector block", VECTOR_BLOCK, "add_offsets")?;
    let offsets = [10u32, 2_000, 300_000, 4_000_000_000];
    let out = context.device().alloc_from(context.stream(), &[UNWRITTEN; 32])?;
    context
        .stream()
        .launch(&Launch::new(&kernel).workgroups(2, 1, 1).buffer(&out).scalar(offsets))?;
    let expected: Vec<u32> = (0..32u32).map(|i| i.wrapping_add(offsets[i as usize % 4])).collect();
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &expected,
        "output using a vec4<u32> scalar block",
    )
}

const STORE_SCALAR: &str = r#"
struct Params { slot: u32, value: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn store() {
    out[params.slot] = params.value;
}
"#;

fn scalars_each_launch_keeps_its_own(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "store scalar", STORE_SCALAR, "store")?;
    let out = context.device().alloc_from(context.stream(), &[UNWRITTEN; 32])?;
    let values = context.random_u32(31, 32);
    for (slot, value) in values.iter().enumerate() {
        context
            .stream()
            .launch(&Launch::new(&kernel).buffer(&out).scalar(slot as u32).scalar(*value))?;
    }
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &values,
        "values stored by 32 queued launches, one per slot",
    )
}

// ---- buffers and views ---------------------------------------------------------------------

const EIGHT_BUFFERS: &str = r#"
@group(0) @binding(0) var<storage, read> in0: array<u32>;
@group(0) @binding(1) var<storage, read> in1: array<u32>;
@group(0) @binding(2) var<storage, read> in2: array<u32>;
@group(0) @binding(3) var<storage, read> in3: array<u32>;
@group(0) @binding(4) var<storage, read> in4: array<u32>;
@group(0) @binding(5) var<storage, read> in5: array<u32>;
@group(0) @binding(6) var<storage, read> in6: array<u32>;
@group(0) @binding(7) var<storage, read_write> sum: array<u32>;

@compute @workgroup_size(64)
fn weighted_sum(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&sum) {
        return;
    }
    sum[i] = in0[i] * 1u + in1[i] * 2u + in2[i] * 3u + in3[i] * 4u + in4[i] * 5u + in5[i] * 6u + in6[i] * 7u;
}
"#;

const SIXTEEN_BUFFERS: &str = r#"
@group(0) @binding(0) var<storage, read> in0: array<u32>;
@group(0) @binding(1) var<storage, read> in1: array<u32>;
@group(0) @binding(2) var<storage, read> in2: array<u32>;
@group(0) @binding(3) var<storage, read> in3: array<u32>;
@group(0) @binding(4) var<storage, read> in4: array<u32>;
@group(0) @binding(5) var<storage, read> in5: array<u32>;
@group(0) @binding(6) var<storage, read> in6: array<u32>;
@group(0) @binding(7) var<storage, read> in7: array<u32>;
@group(0) @binding(8) var<storage, read> in8: array<u32>;
@group(0) @binding(9) var<storage, read> in9: array<u32>;
@group(0) @binding(10) var<storage, read> in10: array<u32>;
@group(0) @binding(11) var<storage, read> in11: array<u32>;
@group(0) @binding(12) var<storage, read> in12: array<u32>;
@group(0) @binding(13) var<storage, read> in13: array<u32>;
@group(0) @binding(14) var<storage, read> in14: array<u32>;
@group(0) @binding(15) var<storage, read_write> sum: array<u32>;

@compute @workgroup_size(64)
fn weighted_sum(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i >= arrayLength(&sum) {
        return;
    }
    sum[i] = in0[i] * 1u + in1[i] * 2u + in2[i] * 3u + in3[i] * 4u + in4[i] * 5u + in5[i] * 6u + in6[i] * 7u
        + in7[i] * 8u + in8[i] * 9u + in9[i] * 10u + in10[i] * 11u + in11[i] * 12u + in12[i] * 13u
        + in13[i] * 14u + in14[i] * 15u;
}
"#;

fn run_many_buffers(context: &TestContext, count: u32, source: &str) -> TestResult {
    let limit = context.info().max_buffer_arguments;
    if limit != 0 && limit < count {
        return Err(Verdict::skip(format!(
            "the device allows {limit} buffer arguments per launch; the test needs {count}"
        )));
    }
    let kernel = kernel_of(context, &format!("{count}-buffer"), source, "weighted_sum")?;
    let n = 300usize;
    let inputs: Vec<Vec<u32>> = (0..count - 1)
        .map(|k| context.random_u32(100 + u64::from(k), n))
        .collect();
    let buffers = inputs
        .iter()
        .map(|data| context.device().alloc_from(context.stream(), data))
        .collect::<xhal::Result<Vec<_>>>()?;
    let sum = context.device().alloc_from(context.stream(), &vec![UNWRITTEN; n])?;
    let launch = buffers
        .iter()
        .fold(
            Launch::new(&kernel).workgroups(groups_for(n, 64), 1, 1),
            |launch, buffer| launch.buffer(buffer),
        )
        .buffer(&sum);
    context.stream().launch(&launch)?;
    let expected: Vec<u32> = (0..n)
        .map(|i| {
            inputs.iter().enumerate().fold(0u32, |acc, (k, data)| {
                acc.wrapping_add(data[i].wrapping_mul(k as u32 + 1))
            })
        })
        .collect();
    check_slice_eq(
        &context.stream().read_to_vec(&sum)?,
        &expected,
        &format!("weighted sum of {} input buffers", count - 1),
    )
}

fn buffers_eight_arguments(context: &TestContext) -> TestResult {
    run_many_buffers(context, 8, EIGHT_BUFFERS)
}

fn buffers_sixteen_arguments(context: &TestContext) -> TestResult {
    run_many_buffers(context, 16, SIXTEEN_BUFFERS)
}

const COPY_PLUS_ONE: &str = r#"
@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> destination: array<u32>;

@compute @workgroup_size(64)
fn copy_plus_one(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&destination) {
        destination[id.x] = source[id.x] + 1u;
    }
}
"#;

/// Elements of u32 per buffer offset alignment unit (at least one).
fn aligned_elements(context: &TestContext) -> usize {
    (context.info().buffer_offset_alignment.max(4) / 4) as usize
}

fn views_offset_views(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "copy plus one", COPY_PLUS_ONE, "copy_plus_one")?;
    let unit = aligned_elements(context);
    let len = 8 * unit + 100;
    let source_data = context.random_u32(41, len);
    let source = context.device().alloc_from(context.stream(), &source_data)?;
    let destination = context.device().alloc_from(context.stream(), &vec![UNWRITTEN; len])?;
    let (from, to, count) = (3 * unit, 5 * unit, 50usize);
    context.stream().launch(
        &Launch::new(&kernel)
            .workgroups(1, 1, 1)
            .buffer(source.slice(from..from + count))
            .buffer(destination.slice(to..to + count)),
    )?;
    let mut expected = vec![UNWRITTEN; len];
    for i in 0..count {
        expected[to + i] = source_data[from + i].wrapping_add(1);
    }
    check_slice_eq(
        &context.stream().read_to_vec(&destination)?,
        &expected,
        &format!("destination after copying elements {from}.. of the source into a view at element {to}"),
    )
}

fn views_offset_alignment(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "copy plus one", COPY_PLUS_ONE, "copy_plus_one")?;
    let alignment = context.info().buffer_offset_alignment.max(1) as usize;
    let len = 2 * alignment.max(4) + 64;
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let source = context.device().alloc_from(context.stream(), &bytes)?;
    let destination = context.device().alloc_from(context.stream(), &[UNWRITTEN; 16])?;
    // A view starting one alignment unit in (a multiple of 4, so its words are aligned too).
    let start = alignment.max(4);
    context.stream().launch(
        &Launch::new(&kernel)
            .buffer(source.slice(start..start + 64))
            .buffer(&destination),
    )?;
    let expected: Vec<u32> = bytes[start..start + 64]
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]).wrapping_add(1))
        .collect();
    check_slice_eq(
        &context.stream().read_to_vec(&destination)?,
        &expected,
        &format!("words read through a view at byte offset {start}"),
    )?;
    if alignment < 2 {
        return Err(Verdict::skip(format!(
            "the device's buffer offset alignment is {alignment} byte, so no offset is misaligned"
        )));
    }
    let misaligned = alignment / 2;
    let message = expect_error(
        context.stream().launch(
            &Launch::new(&kernel)
                .buffer(source.slice(misaligned..misaligned + 64))
                .buffer(&destination),
        ),
        &[ErrorKind::InvalidArgument],
        &format!("a view at byte offset {misaligned} with an offset alignment of {alignment}"),
    )?;
    mentions(&message, &["copy_plus_one", "alignment"], "a misaligned view")
}

const ARRAY_LENGTH: &str = r#"
struct WithHeader {
    count: u32,
    items: array<vec2<f32>>,
}

@group(0) @binding(0) var<storage, read> plain: array<u32>;
@group(0) @binding(1) var<storage, read> with_header: WithHeader;
@group(0) @binding(2) var<storage, read_write> lengths: array<u32, 2>;

@compute @workgroup_size(1)
fn lengths_of() {
    lengths[0] = arrayLength(&plain);
    lengths[1] = arrayLength(&with_header.items);
}
"#;

fn views_array_length(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "array length", ARRAY_LENGTH, "lengths_of")?;
    let unit = aligned_elements(context);
    // The struct aligns to 8 bytes, so its views start at multiples of 2 words as well.
    let header_unit = unit.max(2);
    let plain = context
        .device()
        .alloc_from(context.stream(), &vec![7u32; 2 * unit + 128])?;
    let header = context
        .device()
        .alloc_from(context.stream(), &vec![0u32; 2 * header_unit + 40])?;
    let lengths = context.device().alloc::<u32>(2)?;
    // (plain view, header view in u32 words, expected lengths). The header is 8 bytes (the
    // items align to 8), each item 8; a half item at the end does not count.
    let cases = [
        (0..1, 0..4, [1, 1]),
        (0..7, 0..12, [7, 5]),
        (0..64, 0..13, [64, 5]),
        (
            0..2 * unit + 128,
            0..2 * header_unit + 40,
            [2 * unit as u32 + 128, header_unit as u32 + 19],
        ),
        (unit..unit + 50, header_unit..header_unit + 6, [50, 2]),
        (
            2 * unit..2 * unit + 128,
            2 * header_unit..2 * header_unit + 40,
            [128, 19],
        ),
    ];
    for (plain_view, header_view, expected) in cases {
        context.stream().fill(lengths.slice(..2), UNWRITTEN)?;
        context.stream().launch(
            &Launch::new(&kernel)
                .buffer(plain.slice(plain_view.clone()))
                .buffer(header.slice(header_view.clone()))
                .buffer(&lengths),
        )?;
        check_slice_eq(
            &context.stream().read_to_vec(&lengths)?,
            &expected,
            &format!(
                "arrayLength of a u32 view of elements {plain_view:?} and of a struct view of words {header_view:?}"
            ),
        )?;
    }
    Ok(())
}

// ---- launches that must be refused ---------------------------------------------------------

const SCALE: &str = r#"
struct Params { factor: f32, count: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<storage, read_write> table: array<u32, 16>;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if i < params.count {
        output[i] = input[i] * params.factor;
    }
    if i < 16u {
        table[i] = params.count + i;
    }
}
"#;

/// The buffers of a correct `scale` launch over 100 elements.
struct ScaleBuffers {
    input: xhal::Buffer<f32>,
    output: xhal::Buffer<f32>,
    table: xhal::Buffer<u32>,
}

const SENTINEL: f32 = -12345.0;

fn scale_setup(context: &TestContext) -> Result<(Kernel, ScaleBuffers), Verdict> {
    let kernel = kernel_of(context, "scale", SCALE, "scale")?;
    let input: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let buffers = ScaleBuffers {
        input: context.device().alloc_from(context.stream(), &input)?,
        output: context.device().alloc_from(context.stream(), &[SENTINEL; 100])?,
        table: context.device().alloc_from(context.stream(), &[UNWRITTEN; 16])?,
    };
    Ok((kernel, buffers))
}

fn refused(result: xhal::Result<()>, what: &str, needles: &[&str]) -> TestResult {
    let message = expect_error(result, &[ErrorKind::InvalidArgument], what)?;
    mentions(&message, needles, what)
}

fn arguments_too_few_buffers(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    let stream = context.stream();
    refused(
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output),
        ),
        "a launch of `scale` with 2 of its 3 buffers and no scalars",
        &["scale", "table"],
    )?;
    refused(
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .scalar(2.0f32)
                .scalar(100u32),
        ),
        "a launch of `scale` with 1 of its 3 buffers, then the scalars",
        &["scale", "output"],
    )
}

fn arguments_too_many_buffers(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    refused(
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output)
                .buffer(&b.table)
                .buffer(&b.table)
                .scalar(2.0f32)
                .scalar(100u32),
        ),
        "a launch of `scale` with 4 buffers for its 3 bindings",
        &["scale", "argument 3"],
    )
}

fn arguments_scalar_for_buffer(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    refused(
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .scalar(2.0f32)
                .buffer(&b.output)
                .buffer(&b.table)
                .scalar(100u32),
        ),
        "a launch of `scale` with a scalar where buffer `output` belongs",
        &["scale", "output"],
    )
}

fn arguments_view_too_small(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    refused(
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output)
                .buffer(b.table.slice(0..8))
                .scalar(2.0f32)
                .scalar(100u32),
        ),
        "a launch of `scale` binding 8 words to `table: array<u32, 16>`",
        &["scale", "table", "64"],
    )?;
    refused(
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(b.input.slice(10..10))
                .buffer(&b.output)
                .buffer(&b.table)
                .scalar(2.0f32)
                .scalar(100u32),
        ),
        "a launch of `scale` binding an empty view to `input: array<f32>`",
        &["scale", "input"],
    )
}

fn arguments_missing_scalars(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    let buffers = || {
        Launch::new(&kernel)
            .workgroups(2, 1, 1)
            .buffer(&b.input)
            .buffer(&b.output)
            .buffer(&b.table)
    };
    refused(
        context.stream().launch(&buffers().scalar(2.0f32)),
        "a launch of `scale` with 1 of its 2 scalars",
        &["scale", "count"],
    )?;
    refused(
        context.stream().launch(&buffers()),
        "a launch of `scale` with none of its 2 scalars",
        &["scale", "factor"],
    )
}

fn arguments_too_many_scalars(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    refused(
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output)
                .buffer(&b.table)
                .scalar(2.0f32)
                .scalar(100u32)
                .scalar(7u32),
        ),
        "a launch of `scale` with 3 scalars for its 2 members",
        &["scale"],
    )
}

fn arguments_wrong_scalar_size(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    let buffers = || {
        Launch::new(&kernel)
            .workgroups(2, 1, 1)
            .buffer(&b.input)
            .buffer(&b.output)
            .buffer(&b.table)
    };
    refused(
        context.stream().launch(&buffers().scalar(2.0f64).scalar(100u32)),
        "a launch of `scale` passing an f64 for `factor: f32`",
        &["scale", "factor"],
    )?;
    refused(
        context.stream().launch(&buffers().scalar(2.0f32).scalar(100u16)),
        "a launch of `scale` passing a u16 for `count: u32`",
        &["scale", "count"],
    )
}

fn full_scale_launch<'a>(kernel: &'a Kernel, b: &ScaleBuffers, groups: [u32; 3]) -> Launch<'a> {
    Launch::new(kernel)
        .workgroups(groups[0], groups[1], groups[2])
        .buffer(&b.input)
        .buffer(&b.output)
        .buffer(&b.table)
        .scalar(2.0f32)
        .scalar(100u32)
}

fn arguments_zero_workgroups(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    for (axis, groups) in [("x", [0, 1, 1]), ("y", [2, 0, 1]), ("z", [2, 1, 0])] {
        refused(
            context.stream().launch(&full_scale_launch(&kernel, &b, groups)),
            &format!("a launch of `scale` with workgroups {groups:?}"),
            &["scale", &format!(" {axis} ")],
        )?;
    }
    Ok(())
}

fn arguments_too_many_workgroups(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    let mut tried = 0;
    for (axis, limit) in context.info().max_workgroup_count.iter().enumerate() {
        if *limit == 0 || *limit == u32::MAX {
            continue;
        }
        tried += 1;
        let mut groups = [1u32; 3];
        groups[axis] = limit + 1;
        refused(
            context.stream().launch(&full_scale_launch(&kernel, &b, groups)),
            &format!("a launch of `scale` with workgroups {groups:?}, past the device's {limit}"),
            &["scale", &(limit + 1).to_string()],
        )?;
    }
    if tried == 0 {
        return Err(Verdict::skip("the device sets no limit on workgroup counts"));
    }
    Ok(())
}

fn arguments_refusals_run_nothing(context: &TestContext) -> TestResult {
    let (kernel, b) = scale_setup(context)?;
    let stream = context.stream();
    let attempts = [
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output),
        ),
        stream.launch(&full_scale_launch(&kernel, &b, [0, 1, 1])),
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output)
                .buffer(b.table.slice(0..8))
                .scalar(2.0f32)
                .scalar(100u32),
        ),
        stream.launch(
            &Launch::new(&kernel)
                .workgroups(2, 1, 1)
                .buffer(&b.input)
                .buffer(&b.output)
                .buffer(&b.table)
                .scalar(2.0f64)
                .scalar(100u32),
        ),
    ];
    for (position, attempt) in attempts.into_iter().enumerate() {
        check(attempt.is_err(), || {
            format!("bad launch {position} of `scale` was accepted")
        })?;
    }
    stream.synchronize()?;
    check_slice_eq(
        &stream.read_to_vec(&b.output)?,
        &[SENTINEL; 100],
        "`output` after refused launches",
    )?;
    check_slice_eq(
        &stream.read_to_vec(&b.table)?,
        &[UNWRITTEN; 16],
        "`table` after refused launches",
    )?;
    stream.launch(&full_scale_launch(&kernel, &b, [2, 1, 1]))?;
    let expected: Vec<f32> = (0..100).map(|i| i as f32 * 2.0).collect();
    check_slice_eq(
        &stream.read_to_vec(&b.output)?,
        &expected,
        "`output` of a correct launch after refusals",
    )?;
    let table: Vec<u32> = (0..16).map(|i| 100 + i).collect();
    check_slice_eq(
        &stream.read_to_vec(&b.table)?,
        &table,
        "`table` of a correct launch after refusals",
    )
}

// ---- launch order --------------------------------------------------------------------------

const STEP: &str = r#"
var<immediate> increment: u32;
@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn apply(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = data[id.x] * 3u + increment;
    }
}
"#;

fn launch_in_order(context: &TestContext) -> TestResult {
    let kernel = kernel_of(context, "step", STEP, "apply")?;
    let start = context.random_u32(51, 200);
    let data = context.device().alloc_from(context.stream(), &start)?;
    let steps = context.random_u32(52, 20);
    for step in &steps {
        context.stream().launch(
            &Launch::new(&kernel)
                .workgroups(groups_for(start.len(), 64), 1, 1)
                .buffer(&data)
                .scalar(*step),
        )?;
    }
    // x * 3 + step does not commute between steps, so any reordering shows.
    let expected: Vec<u32> = start
        .iter()
        .map(|&x| {
            steps
                .iter()
                .fold(x, |acc, &step| acc.wrapping_mul(3).wrapping_add(step))
        })
        .collect();
    check_slice_eq(
        &context.stream().read_to_vec(&data)?,
        &expected,
        "data after 20 queued launches",
    )
}

//! Reflection of entry points against the xhal argument ABI.

use xhal_abi::{
    XHAL_FEATURE_ATOMICS_32, XHAL_FEATURE_ATOMICS_64, XHAL_FEATURE_F16, XHAL_FEATURE_F64, XHAL_FEATURE_I64,
};
use xhal_kernel::{
    parse_wgsl, BufferAccess, BufferBindingInfo, BufferSize, BufferSpace, EntryPointInfo, KernelError, KernelErrorKind,
    WgslModule,
};

fn parse(source: &str) -> WgslModule {
    parse_wgsl(source).unwrap_or_else(|e| panic!("{e}"))
}

fn only_entry(source: &str) -> EntryPointInfo {
    let module = parse(source);
    assert_eq!(module.entry_points().len(), 1);
    module.entry_points()[0].clone()
}

fn reflection_error(source: &str) -> KernelError {
    match parse_wgsl(source) {
        Ok(m) => panic!("expected a reflection error, got {:#?}", m.entry_points()),
        Err(e) => {
            assert_eq!(e.kind(), KernelErrorKind::Reflection, "{e}");
            e
        }
    }
}

#[test]
fn runtime_arrays_read_and_read_write() {
    let ep = only_entry(
        "@group(0) @binding(0) var<storage, read> input: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> output: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn double(@builtin(global_invocation_id) id: vec3<u32>) { output[id.x] = input[id.x] * 2.0; }\n",
    );
    assert_eq!(ep.name, "double");
    assert_eq!(ep.workgroup_size, [64, 1, 1]);
    assert_eq!(ep.scalars, None);
    let [input, output] = &ep.buffers[..] else {
        panic!("{:#?}", ep.buffers)
    };
    assert_eq!(
        (input.binding, input.name.as_str(), input.access, input.writes),
        (0, "input", BufferAccess::Read, false)
    );
    assert_eq!(
        (output.binding, output.name.as_str(), output.access, output.writes),
        (1, "output", BufferAccess::ReadWrite, true)
    );
    for buffer in [input, output] {
        assert_eq!(buffer.type_name, "array<f32>");
        let element = buffer.element.as_ref().unwrap_or_else(|| panic!("no element"));
        assert_eq!(
            (element.type_name.as_str(), element.stride, element.size),
            ("f32", 4, 4)
        );
        assert_eq!(
            buffer.size,
            BufferSize::Runtime {
                header_bytes: 0,
                stride: 4
            }
        );
        // WebGPU's minimum binding size: one element.
        assert_eq!(buffer.min_size(), 4);
        assert_eq!(buffer.runtime_element_count(40), Some(10));
        assert_eq!(buffer.runtime_element_count(2), Some(0));
    }
}

#[test]
fn read_write_buffer_only_read_is_not_written() {
    let ep = only_entry(
        "@group(0) @binding(0) var<storage, read_write> a: array<u32>;\n\
         @group(0) @binding(1) var<storage, read_write> counter: atomic<u32>;\n\
         @compute @workgroup_size(1) fn main() { let x = a[0]; atomicAdd(&counter, x); }\n",
    );
    assert_eq!(ep.buffers[0].access, BufferAccess::ReadWrite);
    assert!(!ep.buffers[0].writes);
    assert!(ep.buffers[1].writes, "atomics count as writes");
    assert_eq!(ep.buffers[1].type_name, "atomic<u32>");
    assert_eq!(ep.buffers[1].size, BufferSize::Fixed(4));
}

#[test]
fn struct_with_trailing_runtime_array() {
    let ep = only_entry(
        "struct Particles { count: u32, center: vec3<f32>, items: array<vec4<f32>> }\n\
         struct Words { n: u32, data: array<u32> }\n\
         struct Matrices { m: mat4x4<f32>, data: array<u32> }\n\
         @group(0) @binding(0) var<storage, read_write> particles: Particles;\n\
         @group(0) @binding(1) var<storage, read> words: Words;\n\
         @group(0) @binding(2) var<storage, read> mats: Matrices;\n\
         @compute @workgroup_size(1) fn main() {\n\
             particles.items[0] = vec4<f32>(f32(words.data[0] + mats.data[0]));\n\
         }\n",
    );
    let particles = &ep.buffers[0];
    assert_eq!(particles.type_name, "Particles");
    // count @0, center @16 (vec3 aligns to 16), items @32 (vec4 aligns to 16).
    assert_eq!(
        particles.size,
        BufferSize::Runtime {
            header_bytes: 32,
            stride: 16
        }
    );
    let element = particles.element.as_ref().unwrap_or_else(|| panic!("no element"));
    assert_eq!((element.type_name.as_str(), element.stride), ("vec4<f32>", 16));
    assert_eq!(particles.alignment, 16);
    assert_eq!(particles.min_size(), 48);
    assert_eq!(particles.runtime_element_count(32 + 16 * 5 + 8), Some(5));

    let words = &ep.buffers[1];
    assert_eq!(
        words.size,
        BufferSize::Runtime {
            header_bytes: 4,
            stride: 4
        }
    );
    assert_eq!(words.min_size(), 8);

    // SizeOf(Matrices with array<u32, 1>) = roundUp(16, 64 + 4) = 80.
    let mats = &ep.buffers[2];
    assert_eq!(
        mats.size,
        BufferSize::Runtime {
            header_bytes: 64,
            stride: 4
        }
    );
    assert_eq!(mats.min_size(), 80);
}

#[test]
fn fixed_size_buffers() {
    let ep = only_entry(
        "struct Header { a: u32, b: vec2<f32> }\n\
         @group(0) @binding(0) var<storage, read_write> table: array<u32, 16>;\n\
         @group(0) @binding(1) var<storage, read> header: Header;\n\
         @group(0) @binding(2) var<storage, read> one: vec3<f32>;\n\
         @compute @workgroup_size(1) fn main() { table[0] = header.a + u32(one.x + header.b.y); }\n",
    );
    let table = &ep.buffers[0];
    assert_eq!(table.type_name, "array<u32, 16>");
    assert_eq!(table.size, BufferSize::Fixed(64));
    assert_eq!(table.min_size(), 64);
    assert_eq!(table.element.as_ref().map(|e| e.stride), Some(4));
    assert_eq!(table.runtime_element_count(1000), None);
    let header = &ep.buffers[1];
    assert_eq!(header.size, BufferSize::Fixed(16));
    assert_eq!(header.element, None);
    assert_eq!(ep.buffers[2].size, BufferSize::Fixed(12));
}

#[test]
fn vec3_elements_have_stride_16() {
    let ep = only_entry(
        "@group(0) @binding(0) var<storage, read_write> v: array<vec3<f32>>;\n\
         @compute @workgroup_size(1) fn main() { v[1] = v[0]; }\n",
    );
    let element = ep.buffers[0].element.clone().unwrap_or_else(|| panic!("no element"));
    assert_eq!(
        (element.type_name.as_str(), element.stride, element.size),
        ("vec3<f32>", 16, 12)
    );
    assert_eq!(
        ep.buffers[0].size,
        BufferSize::Runtime {
            header_bytes: 0,
            stride: 16
        }
    );
    assert_eq!(ep.buffers[0].min_size(), 16);
}

#[test]
fn struct_scalar_block_follows_wgsl_layout() {
    let ep = only_entry(
        "struct Params { a: f32, c: vec2<f32>, b: u32, d: vec3<f32>, e: f32 }\n\
         var<immediate> params: Params;\n\
         @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { out[params.b] = params.a + params.c.x + params.d.z + params.e; }\n",
    );
    let scalars = ep.scalars.clone().unwrap_or_else(|| panic!("no scalar block"));
    assert_eq!(
        (scalars.name.as_str(), scalars.type_name.as_str()),
        ("params", "Params")
    );
    // a @0, c @8 (vec2 aligns to 8), b @16, d @32 (vec3 aligns to 16), e @44; size
    // roundUp(16, 48) = 48.
    assert_eq!((scalars.size, scalars.alignment), (48, 16));
    let members: Vec<(&str, u32, u32, &str)> = scalars
        .members
        .iter()
        .map(|m| (m.name.as_str(), m.offset, m.size, m.type_name.as_str()))
        .collect();
    assert_eq!(
        members,
        [
            ("a", 0, 4, "f32"),
            ("c", 8, 8, "vec2<f32>"),
            ("b", 16, 4, "u32"),
            ("d", 32, 12, "vec3<f32>"),
            ("e", 44, 4, "f32")
        ]
    );
    assert_eq!(ep.scalar_block_size(), 48);
}

#[test]
fn single_scalar_and_vector_immediates() {
    let ep = only_entry(
        "var<immediate> n: u32;\n\
         @group(0) @binding(0) var<storage, read_write> out: array<u32>;\n\
         @compute @workgroup_size(1) fn main() { out[0] = n; }\n",
    );
    let scalars = ep.scalars.unwrap_or_else(|| panic!("no scalar block"));
    assert_eq!(
        (scalars.type_name.as_str(), scalars.size, scalars.alignment),
        ("u32", 4, 4)
    );
    assert_eq!(scalars.members.len(), 1);
    assert_eq!((scalars.members[0].name.as_str(), scalars.members[0].offset), ("n", 0));

    let ep = only_entry(
        "var<immediate> v: vec3<f32>;\n\
         @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { out[0] = v.y; }\n",
    );
    let scalars = ep.scalars.unwrap_or_else(|| panic!("no scalar block"));
    assert_eq!(
        (scalars.type_name.as_str(), scalars.size, scalars.alignment),
        ("vec3<f32>", 12, 16)
    );
}

#[test]
fn workgroup_size_and_memory() {
    let ep = only_entry(
        "var<workgroup> tile: array<f32, 256>;\n\
         var<workgroup> flag: u32;\n\
         var<workgroup> unused: array<f32, 1024>;\n\
         var<private> scratch: array<f32, 64>;\n\
         @compute @workgroup_size(8, 4) fn main(@builtin(local_invocation_index) i: u32) {\n\
             scratch[0] = 1.0; tile[i] = scratch[0]; flag = 1u;\n\
         }\n",
    );
    assert_eq!(ep.workgroup_size, [8, 4, 1]);
    assert_eq!(ep.invocations_per_workgroup(), 32);
    assert_eq!(ep.workgroup_memory_bytes, 1024 + 4);
    assert!(ep.buffers.is_empty());
}

#[test]
fn override_workgroup_size_takes_the_default() {
    let module = parse("override block: u32 = 128;\n@compute @workgroup_size(block, 2) fn main() {}\n");
    assert_eq!(module.entry_points()[0].workgroup_size, [128, 2, 1]);
}

#[test]
fn entry_points_reflect_only_what_they_use() {
    let module = parse(
        "struct P { scale: f32 }\n\
         var<immediate> p: P;\n\
         @group(0) @binding(0) var<storage, read> src: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> dst: array<f32>;\n\
         @group(0) @binding(2) var<storage, read_write> hist: array<atomic<u32>>;\n\
         var<workgroup> local: array<u32, 32>;\n\
         fn bump(i: u32) { atomicAdd(&hist[i], 1u); }\n\
         @compute @workgroup_size(64) fn copy(@builtin(global_invocation_id) id: vec3<u32>) { dst[id.x] = src[id.x]; }\n\
         @compute @workgroup_size(32) fn scale(@builtin(global_invocation_id) id: vec3<u32>) { dst[0] = src[id.x] * p.scale; }\n\
         @compute @workgroup_size(16) fn count(@builtin(global_invocation_id) id: vec3<u32>) {\n\
             local[0] = 1u; bump(u32(src[id.x])); _ = &dst;\n\
         }\n\
         @compute @workgroup_size(1) fn nothing() {}\n\
         @compute @workgroup_size(1) fn first_only() { _ = src[0]; }\n",
    );
    let names: Vec<&str> = module.entry_points().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["copy", "scale", "count", "nothing", "first_only"]);
    let bindings = |ep: &EntryPointInfo| {
        ep.buffers
            .iter()
            .map(|b: &BufferBindingInfo| b.name.clone())
            .collect::<Vec<_>>()
    };

    let copy = module.entry_point("copy").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bindings(copy), ["src", "dst"]);
    assert_eq!(copy.scalars, None);

    let scale = module.entry_point("scale").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bindings(scale), ["src", "dst"]);
    assert_eq!(scale.scalars.as_ref().map(|s| s.size), Some(4));
    assert_eq!(scale.workgroup_size, [32, 1, 1]);

    // `hist` is used through `bump`; `dst` only through a phony assignment.
    let count = module.entry_point("count").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bindings(count), ["src", "dst", "hist"]);
    assert!(!count.buffers[1].writes);
    assert!(count.buffers[2].writes);
    assert_eq!(count.workgroup_memory_bytes, 128);

    let nothing = module.entry_point("nothing").unwrap_or_else(|e| panic!("{e}"));
    assert!(nothing.buffers.is_empty() && nothing.scalars.is_none());

    let first = module.entry_point("first_only").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bindings(first), ["src"]);
}

#[test]
fn unused_declarations_do_not_count() {
    // Binding 2 is declared but unused; the gap at binding 1 is not this entry point's concern,
    // and neither is the uniform buffer nobody reads.
    let ep = only_entry(
        "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
         @group(0) @binding(2) var<storage, read_write> b: array<f32>;\n\
         @group(1) @binding(0) var<uniform> u: vec4<f32>;\n\
         @compute @workgroup_size(1) fn main() { a[0] = 1.0; }\n",
    );
    assert_eq!(ep.buffers.len(), 1);
}

#[test]
fn bindings_with_gaps_and_groups_are_arguments_in_group_then_binding_order() {
    let module = parse(
        "struct Params { n: u32, scale: f32 }\n\
         @group(1) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @group(0) @binding(3) var<uniform> params: Params;\n\
         @group(0) @binding(0) var<storage, read> input: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { out[0] = input[0] * params.scale + f32(params.n); }\n",
    );
    assert!(module.is_rewritten());
    let entry = &module.entry_points()[0];
    let arguments: Vec<(u32, u32, u32, &str, BufferSpace, BufferAccess)> = entry
        .buffers
        .iter()
        .map(|b| (b.argument, b.group, b.binding, b.name.as_str(), b.space, b.access))
        .collect();
    assert_eq!(
        arguments,
        [
            (0, 0, 0, "input", BufferSpace::Storage, BufferAccess::Read),
            (1, 0, 3, "params", BufferSpace::Uniform, BufferAccess::Read),
            (2, 1, 0, "out", BufferSpace::Storage, BufferAccess::ReadWrite),
        ]
    );
    assert_eq!(entry.buffers[1].size, BufferSize::Fixed(8));
    assert_eq!(entry.buffers[1].min_size(), 8);
    // What a device sees: each buffer at group 0, binding = argument, uniforms as read-only
    // storage; the normalised WGSL says so and reflects the same launches.
    let ir = module.naga_module();
    let mut seen: Vec<(String, u32, u32, bool)> = ir
        .global_variables
        .iter()
        .filter_map(|(_, var)| {
            let binding = var.binding?;
            let storage = matches!(var.space, xhal_kernel::naga::AddressSpace::Storage { .. });
            Some((var.name.clone()?, binding.group, binding.binding, storage))
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("input".to_owned(), 0, 0, true),
            ("out".to_owned(), 0, 2, true),
            ("params".to_owned(), 0, 1, true)
        ]
    );
    for written in [module.to_wgsl(), module.to_device_wgsl(false)] {
        let written = written.unwrap_or_else(|e| panic!("{e}"));
        let again = parse(&written);
        assert!(!again.needs_device_wgsl(false), "{written}");
        assert!(again.entry_points()[0].same_interface(entry), "{written}");
    }
    // The device's WGSL is the author's, line for line, with only the declarations changed.
    let device = module.to_device_wgsl(false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(device.lines().count(), module.source().lines().count(), "{device}");
    assert!(
        device.contains("@group(0) @binding(1) var<storage, read> params: Params;"),
        "{device}"
    );
    // A device with native uniforms keeps the uniform.
    let native = module.to_device_wgsl(true).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        native.contains("@group(0) @binding(1) var<uniform> params: Params;"),
        "{native}"
    );
    assert!(parse(&native).entry_points()[0].same_interface(entry), "{native}");
}

#[test]
fn explicit_layouts_survive_the_rewrite_for_devices() {
    // naga's WGSL writer drops `@align` and `@size`; the device's WGSL is the source itself.
    let module = parse(
        "struct Pair { low: u32, high: u32 }\n\
         struct Params { direction: vec3<f32>, count: u32, offset: vec2<f32>, @align(16) pair: Pair, @align(16) @size(32) last: f32 }\n\
         @group(0) @binding(4) var<uniform> params: Params;\n\
         @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { out[0] = params.direction.x + f32(params.pair.high) + params.last; }\n",
    );
    let entry = &module.entry_points()[0];
    assert_eq!(entry.buffers[1].size, BufferSize::Fixed(80));
    let device = module.to_device_wgsl(false).unwrap_or_else(|e| panic!("{e}"));
    assert!(parse(&device).entry_points()[0].same_interface(entry), "{device}");
}

#[test]
fn a_module_already_positional_is_not_rewritten() {
    let module = parse(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> b: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { b[0] = a[0]; }\n",
    );
    assert!(!module.is_rewritten());
}

#[test]
fn entry_points_sharing_a_buffer_at_different_positions_are_an_error_naming_both() {
    let error = reflection_error(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
         @group(0) @binding(1) var<storage, read_write> shared_out: array<f32>;\n\
         @compute @workgroup_size(1) fn first() { shared_out[0] = a[0]; }\n\
         @compute @workgroup_size(1) fn second() { shared_out[0] = 1.0; }\n",
    );
    let text = error.to_string();
    assert!(
        error.message().contains("`first`") && error.message().contains("`second`"),
        "{text}"
    );
    assert!(error.message().contains("`shared_out`"), "{text}");
    assert!(text.contains("modules of their own"), "{text}");
}

#[test]
fn entry_points_sharing_buffers_at_the_same_positions_share_a_module() {
    let module = parse(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
         @group(0) @binding(5) var<storage, read_write> out: array<f32>;\n\
         @group(2) @binding(0) var<uniform> k: vec4<f32>;\n\
         @compute @workgroup_size(1) fn first() { out[0] = a[0]; }\n\
         @compute @workgroup_size(1) fn second() { out[0] = a[1] * k.x; }\n",
    );
    let arguments = |entry: &EntryPointInfo| {
        entry
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.argument))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        arguments(&module.entry_points()[0]),
        [("a".to_owned(), 0), ("out".to_owned(), 1)]
    );
    assert_eq!(
        arguments(&module.entry_points()[1]),
        [("a".to_owned(), 0), ("out".to_owned(), 1), ("k".to_owned(), 2)]
    );
}

#[test]
fn one_binding_used_twice_by_an_entry_point_is_an_error() {
    let error = parse_wgsl(
        "@group(0) @binding(0) var<storage, read> a: array<f32>;\n\
         @group(0) @binding(0) var<storage, read_write> b: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { b[0] = a[0]; }\n",
    )
    .expect_err("two buffers at one binding");
    assert_eq!(error.location().map(|l| l.line), Some(2), "{error}");
    assert!(error.to_string().contains("conflict"), "{error}");
}

#[test]
fn textures_are_an_error() {
    let error = reflection_error(
        "@group(0) @binding(0) var<storage, read_write> a: array<vec4<f32>>;\n\
         @group(0) @binding(1) var tex: texture_2d<f32>;\n\
         @compute @workgroup_size(1) fn main() { a[0] = textureLoad(tex, vec2<i32>(0, 0), 0); }\n",
    );
    assert!(error.message().contains("`tex`"), "{error}");
}

#[test]
fn required_features_follow_the_types_used() {
    let plain = parse("@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n@compute @workgroup_size(1) fn main() { a[0] = 1.0; }\n");
    assert_eq!(plain.required_features(), 0);
    let f64_temp = parse(
        "@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { a[0] = f32(f64(a[1]) * 2.0lf); }\n",
    );
    assert_eq!(f64_temp.required_features(), XHAL_FEATURE_F64);
    let mixed = parse(
        "enable f16;\n\
         @group(0) @binding(0) var<storage, read_write> h: array<f16>;\n\
         @group(0) @binding(1) var<storage, read_write> c: atomic<u32>;\n\
         @group(0) @binding(2) var<storage, read_write> big: atomic<u64>;\n\
         @compute @workgroup_size(1) fn main() { h[0] = 1.0h; atomicAdd(&c, 1u); atomicMax(&big, 1lu); }\n",
    );
    assert_eq!(
        mixed.required_features(),
        XHAL_FEATURE_F16 | XHAL_FEATURE_ATOMICS_32 | XHAL_FEATURE_ATOMICS_64 | XHAL_FEATURE_I64
    );
}

//! Translation to SPIR-V and WGSL, and the translation cache.

use std::sync::Arc;

use xhal_abi::{XHAL_KERNEL_FORMAT_SPIRV_SHADER, XHAL_KERNEL_FORMAT_WGSL};
use xhal_kernel::{cache_key, cache_stats, parse_wgsl, translate, KernelErrorKind, Target, WgslModule};

const SPIRV_MAGIC: u32 = 0x0723_0203;

/// Kernels that exercise the interesting corners: immediates, runtime arrays in structs,
/// atomics, workgroup memory, overrides, f16, phony uses, several entry points.
const KERNELS: &[&str] = &[
    "struct Params { n: u32, scale: f32 }\n\
     var<immediate> params: Params;\n\
     @group(0) @binding(0) var<storage, read> input: array<f32>;\n\
     @group(0) @binding(1) var<storage, read_write> output: array<f32>;\n\
     @compute @workgroup_size(64)\n\
     fn scale(@builtin(global_invocation_id) id: vec3<u32>) {\n\
         if id.x < params.n { output[id.x] = input[id.x] * params.scale; }\n\
     }\n",
    "struct Particles { count: u32, center: vec3<f32>, items: array<vec4<f32>> }\n\
     @group(0) @binding(0) var<storage, read_write> particles: Particles;\n\
     @group(0) @binding(1) var<storage, read_write> hist: array<atomic<u32>, 16>;\n\
     var<workgroup> tile: array<vec4<f32>, 64>;\n\
     override block: u32 = 64;\n\
     @compute @workgroup_size(block)\n\
     fn step(@builtin(local_invocation_index) li: u32, @builtin(global_invocation_id) id: vec3<u32>) {\n\
         tile[li] = particles.items[id.x];\n\
         workgroupBarrier();\n\
         particles.items[id.x] = tile[block - 1u - li] + vec4<f32>(particles.center, 0.0);\n\
         atomicAdd(&hist[id.x % 16u], 1u);\n\
     }\n\
     @compute @workgroup_size(1)\n\
     fn touch() { _ = &particles; _ = &hist; }\n",
    "enable f16;\n\
     var<immediate> k: f32;\n\
     @group(0) @binding(0) var<storage, read_write> h: array<f16>;\n\
     @group(0) @binding(1) var<storage, read> unused_here: array<u32>;\n\
     @group(0) @binding(2) var<storage, read_write> d: array<f32>;\n\
     @compute @workgroup_size(8, 8)\n\
     fn half(@builtin(global_invocation_id) id: vec3<u32>) { h[id.x] = f16(k) * h[id.x]; _ = &unused_here; d[0] = k; }\n",
];

fn parse(source: &str) -> WgslModule {
    parse_wgsl(source).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn spirv_has_the_magic_number_and_version_1_3() {
    for source in KERNELS {
        let words = parse(source).to_spirv().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(words[0], SPIRV_MAGIC);
        assert_eq!(words[1], 0x0001_0300, "SPIR-V version word");
    }
}

#[test]
fn spirv_declares_immediates_as_push_constants() {
    // OpVariable (opcode 59) with storage class PushConstant (9).
    let words = parse(KERNELS[0]).to_spirv().unwrap_or_else(|e| panic!("{e}"));
    let mut at = 5;
    let mut push_constants = 0;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if opcode == 59 && words.get(at + 3) == Some(&9) {
            push_constants += 1;
        }
        at += count.max(1);
    }
    assert_eq!(push_constants, 1);
}

/// naga's own SPIR-V front end reads the output back, and the validator accepts what it read.
/// naga 30's reader does not know the `StorageInputOutput16` capability that f16 kernels
/// declare, so those are checked by the magic-number and push-constant tests only.
#[test]
fn spirv_round_trips_through_naga_spv_in() {
    let readable: Vec<(usize, &&str)> = KERNELS
        .iter()
        .enumerate()
        .filter(|(_, source)| !source.contains("enable f16"))
        .collect();
    assert!(readable.len() >= 2, "the round trip must cover several kernels");
    for (i, source) in readable {
        let words = parse(source).to_spirv().unwrap_or_else(|e| panic!("{e}"));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let module = xhal_kernel::naga::front::spv::parse_u8_slice(&bytes, &Default::default())
            .unwrap_or_else(|e| panic!("naga cannot read the SPIR-V of kernel {i}: {e:?}"));
        xhal_kernel::naga::valid::Validator::new(
            xhal_kernel::naga::valid::ValidationFlags::all(),
            xhal_kernel::KERNEL_CAPABILITIES,
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("the SPIR-V of kernel {i} does not validate after reading it back: {e:?}"));
    }
}

#[test]
fn wgsl_output_parses_again_and_reflects_the_same() {
    for source in KERNELS {
        let module = parse(source);
        let written = module.to_wgsl().unwrap_or_else(|e| panic!("{e}"));
        let again = parse_wgsl(&written).unwrap_or_else(|e| panic!("{e}\nin:\n{written}"));
        assert_eq!(again.entry_points().len(), module.entry_points().len());
        for (a, b) in again.entry_points().iter().zip(module.entry_points()) {
            assert!(a.same_interface(b), "{a:#?}\n{b:#?}\n{written}");
        }
        assert_eq!(again.required_features(), module.required_features());
    }
}

#[test]
fn wgsl_output_keeps_entry_point_names_the_writer_would_change() {
    // naga's writer renames names ending in a digit and names of WGSL built-ins.
    let source = "@group(0) @binding(0) var<storage, read_write> length: array<f32>;\n\
                  @compute @workgroup_size(1) fn kernel2() { length[0] = 1.0; }\n\
                  @compute @workgroup_size(2) fn step() { length[1] = 2.0; }\n\
                  @compute @workgroup_size(4) fn main() { length[2] = 3.0; }\n";
    let module = parse(source);
    let written = module.to_wgsl().unwrap_or_else(|e| panic!("{e}"));
    let again = parse(&written);
    let names: Vec<&str> = again.entry_points().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["kernel2", "step", "main"], "{written}");
    for (a, b) in again.entry_points().iter().zip(module.entry_points()) {
        assert!(a.same_interface(b));
    }
}

#[test]
fn translate_produces_the_format_and_reflection() {
    let spirv = translate(KERNELS[0], Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spirv.format, XHAL_KERNEL_FORMAT_SPIRV_SHADER);
    assert_eq!(spirv.bytes[..4], SPIRV_MAGIC.to_le_bytes());
    assert_eq!(spirv.bytes.len() % 4, 0);
    assert_eq!(spirv.reflection.len(), 1);
    assert_eq!(spirv.reflection[0].name, "scale");
    let wgsl = translate(KERNELS[0], Target::Wgsl).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(wgsl.format, XHAL_KERNEL_FORMAT_WGSL);
    assert!(std::str::from_utf8(&wgsl.bytes).is_ok_and(|t| t.contains("var<immediate>")));
    assert_eq!(wgsl.reflection, spirv.reflection);
    assert_eq!(
        Target::from_format(XHAL_KERNEL_FORMAT_SPIRV_SHADER),
        Some(Target::SpirvShader)
    );
    assert_eq!(Target::from_format(12345), None);
}

#[test]
fn c_family_targets_write_every_entry_point_in_their_dialect() {
    let expected = [
        (
            Target::OpenclC,
            xhal_abi::XHAL_KERNEL_FORMAT_OPENCL_C,
            "__kernel __attribute__((reqd_work_group_size(",
        ),
        (
            Target::CudaC,
            xhal_abi::XHAL_KERNEL_FORMAT_CUDA_C,
            ") extern \"C\" __global__ void __launch_bounds__(64) scale(",
        ),
        (
            Target::HipC,
            xhal_abi::XHAL_KERNEL_FORMAT_HIP_C,
            ") extern \"C\" __global__ void __launch_bounds__(64) scale(",
        ),
    ];
    for (target, format, needle) in expected {
        assert_eq!(Target::from_format(format), Some(target));
        assert!(target.is_source());
        let c = translate(KERNELS[0], target).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.format, format);
        let text = std::str::from_utf8(&c.bytes).unwrap_or_default();
        assert!(text.contains(needle), "{target:?}:\n{text}");
        assert_eq!(c.reflection.len(), 1);
        let again = translate(KERNELS[0], target).unwrap_or_else(|e| panic!("{e}"));
        assert!(std::sync::Arc::ptr_eq(&c.bytes, &again.bytes), "a cache hit");
    }
}

#[test]
fn second_translation_is_a_cache_hit_returning_the_same_arc() {
    // A source no other test uses, so parallel tests cannot have cached it.
    let source = format!("// {}\n{}", line!(), KERNELS[1]);
    let before = cache_stats();
    let first = translate(&source, Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    let middle = cache_stats();
    let second = translate(&source, Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    let after = cache_stats();
    assert!(Arc::ptr_eq(&first, &second));
    assert!(middle.misses > before.misses);
    assert!(after.hits > middle.hits);
    assert!(after.entries >= 1);
    // Another target of the same source is another entry.
    let wgsl = translate(&source, Target::Wgsl).unwrap_or_else(|e| panic!("{e}"));
    assert!(!Arc::ptr_eq(&first, &wgsl));
    assert_eq!(first.key, cache_key(&source, Target::SpirvShader));
}

#[test]
fn cache_keys_are_stable_and_distinct() {
    let a = cache_key("fn f() {}", Target::SpirvShader);
    assert_eq!(a, cache_key("fn f() {}", Target::SpirvShader));
    assert_ne!(a, cache_key("fn f() {}", Target::Wgsl));
    assert_ne!(a, cache_key("fn g() {}", Target::SpirvShader));
}

#[test]
fn errors_are_not_cached() {
    let source = format!("// {}\nfn broken( {{", line!());
    for _ in 0..2 {
        let error = translate(&source, Target::SpirvShader)
            .err()
            .unwrap_or_else(|| panic!("no error"));
        assert_eq!(error.kind(), KernelErrorKind::Parse);
    }
}

#[test]
fn concurrent_translations_agree() {
    let source = format!("// {}\n{}", line!(), KERNELS[2]);
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| translate(&source, Target::SpirvShader)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("thread panicked")))
            .collect()
    });
    let first = results[0].as_ref().unwrap_or_else(|e| panic!("{e}"));
    for result in &results {
        let result = result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(result.bytes, first.bytes);
    }
    // Whatever raced, the cache now hands out one translation.
    let later = translate(&source, Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    assert!(results.iter().any(|r| r.as_ref().is_ok_and(|t| Arc::ptr_eq(t, &later))));
}

/// naga's writer drops `enable f16;` when f16 appears only in expressions; the translation
/// keeps it, so the written WGSL parses again.
#[test]
fn wgsl_output_keeps_enable_f16_for_f16_expressions() {
    let source = "enable f16;\n@group(0) @binding(0) var<storage, read_write> a: array<f32>;\n\
                  @compute @workgroup_size(1)\nfn main() { a[0] = f32(f16(a[0]) * 2.0h); }\n";
    let written = parse(source).to_wgsl().unwrap_or_else(|e| panic!("{e}"));
    assert!(written.contains("enable f16;"), "{written}");
    parse_wgsl(&written).unwrap_or_else(|e| panic!("{e}\nin:\n{written}"));
}

/// The storage classes of a SPIR-V module's `OpVariable`s (opcode 59: result type, id,
/// storage class).
fn variable_storage_classes(words: &[u32]) -> Vec<u32> {
    let mut classes = Vec::new();
    let mut at = 5;
    while at < words.len() {
        let (count, opcode) = ((words[at] >> 16) as usize, words[at] & 0xffff);
        if opcode == 59 && count >= 4 {
            classes.push(words[at + 3]);
        }
        at += count.max(1);
    }
    classes
}

#[test]
fn uniforms_are_uniform_blocks_only_for_devices_that_bind_them_natively() {
    const UNIFORM: u32 = 2;
    const STORAGE_BUFFER: u32 = 12;
    let module = parse(
        "struct Params { scale: f32, n: u32 }\n\
         @group(0) @binding(3) var<uniform> params: Params;\n\
         @group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(1) fn main() { out[0] = params.scale * f32(params.n); }\n",
    );
    let lowered = variable_storage_classes(&module.to_spirv().unwrap_or_else(|e| panic!("{e}")));
    assert!(!lowered.contains(&UNIFORM), "{lowered:?}");
    assert_eq!(
        lowered.iter().filter(|&&c| c == STORAGE_BUFFER).count(),
        2,
        "{lowered:?}"
    );
    let native = variable_storage_classes(&module.to_spirv_with(true).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(native.iter().filter(|&&c| c == UNIFORM).count(), 1, "{native:?}");
    assert_eq!(native.iter().filter(|&&c| c == STORAGE_BUFFER).count(), 1, "{native:?}");
}

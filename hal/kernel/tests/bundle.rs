//! Variant picking: native first, then IR from WGSL, then source.

use xhal_abi::{
    XHAL_KERNEL_FORMAT_CPU_BUILTIN, XHAL_KERNEL_FORMAT_CUBIN, XHAL_KERNEL_FORMAT_CUDA_C, XHAL_KERNEL_FORMAT_HIP_C,
    XHAL_KERNEL_FORMAT_HSACO, XHAL_KERNEL_FORMAT_OPENCL_C, XHAL_KERNEL_FORMAT_PTX, XHAL_KERNEL_FORMAT_SPIRV_KERNEL,
    XHAL_KERNEL_FORMAT_SPIRV_SHADER, XHAL_KERNEL_FORMAT_VENDOR_BASE, XHAL_KERNEL_FORMAT_WGSL,
};
use xhal_kernel::{format_name, is_source_format, KernelErrorKind, ModuleBundle, Plan, Target};

const KERNEL: &str = "@group(0) @binding(0) var<storage, read_write> a: array<u32>;\n\
                      @compute @workgroup_size(64) fn fill(@builtin(global_invocation_id) id: vec3<u32>) { a[id.x] = id.x; }\n";

const WGSL: u32 = XHAL_KERNEL_FORMAT_WGSL;
const SPIRV: u32 = XHAL_KERNEL_FORMAT_SPIRV_SHADER;
const PTX: u32 = XHAL_KERNEL_FORMAT_PTX;
const CUBIN: u32 = XHAL_KERNEL_FORMAT_CUBIN;
const CUDA_C: u32 = XHAL_KERNEL_FORMAT_CUDA_C;
const VENDOR: u32 = XHAL_KERNEL_FORMAT_VENDOR_BASE + 7;

fn plan(bundle: &ModuleBundle, accepted: &[u32]) -> Plan {
    bundle.pick(accepted).unwrap_or_else(|e| panic!("{e}"))
}

fn uses(format: u32) -> impl Fn(&Plan) -> bool {
    move |p| matches!(p, Plan::Use(v) if v.format == format)
}

#[test]
fn wgsl_only_bundle() {
    let bundle = ModuleBundle::from_wgsl(KERNEL);
    // Vulkan: SPIR-V produced from WGSL.
    assert_eq!(
        plan(&bundle, &[SPIRV]),
        Plan::Translate {
            target: Target::SpirvShader
        }
    );
    // wgpu or the CPU backend: the WGSL as written.
    assert!(uses(WGSL)(&plan(&bundle, &[WGSL])));
    // IR produced from WGSL beats shipping source, whatever order the device lists them in.
    assert_eq!(
        plan(&bundle, &[WGSL, SPIRV]),
        Plan::Translate {
            target: Target::SpirvShader
        }
    );
    // Formats xhal cannot produce are passed over; source it can produce comes in the
    // device's order.
    assert!(uses(WGSL)(&plan(&bundle, &[PTX, WGSL])));
    assert_eq!(
        plan(&bundle, &[PTX, CUDA_C, WGSL]),
        Plan::Translate { target: Target::CudaC }
    );
    // Unused slots of XhalDeviceInfo::kernel_formats are zeros.
    assert_eq!(
        plan(&bundle, &[0, 0, SPIRV, 0]),
        Plan::Translate {
            target: Target::SpirvShader
        }
    );
}

#[test]
fn native_variants_come_first() {
    let bundle = ModuleBundle::from_wgsl(KERNEL)
        .with_variant(CUBIN, vec![1u8, 2, 3])
        .with_variant(PTX, b".version 8.0".to_vec())
        .with_variant(CUDA_C, b"extern \"C\" __global__ void fill() {}".to_vec());
    // The device's preference decides among native formats.
    assert!(uses(CUBIN)(&plan(&bundle, &[CUBIN, PTX, CUDA_C])));
    assert!(uses(PTX)(&plan(&bundle, &[PTX, CUBIN, CUDA_C])));
    // Binary and IR before source, even when the device lists source first.
    assert!(uses(PTX)(&plan(&bundle, &[CUDA_C, PTX])));
    assert!(uses(CUDA_C)(&plan(&bundle, &[CUDA_C])));
    // A shipped SPIR-V is used as is rather than translated.
    let with_spirv = ModuleBundle::from_wgsl(KERNEL).with_variant(SPIRV, vec![0x03, 0x02, 0x23, 0x07]);
    assert!(uses(SPIRV)(&plan(&with_spirv, &[SPIRV])));
    // Vendor formats are native.
    let vendor = ModuleBundle::from_wgsl(KERNEL).with_variant(VENDOR, vec![9u8]);
    assert!(uses(VENDOR)(&plan(&vendor, &[VENDOR, SPIRV])));
    // A shipped variant beats a translation even when the device prefers the translated format.
    assert!(uses(VENDOR)(&plan(&vendor, &[SPIRV, VENDOR])));
}

#[test]
fn native_only_bundle_without_a_fit_explains() {
    let bundle = ModuleBundle::new().with_variant(CUBIN, vec![1u8]);
    let error = bundle
        .pick(&[SPIRV, WGSL])
        .err()
        .unwrap_or_else(|| panic!("picked something"));
    assert_eq!(error.kind(), KernelErrorKind::Unsupported);
    let text = error.to_string();
    assert!(
        text.contains("spirv-shader, wgsl") && text.contains("the bundle has cubin"),
        "{text}"
    );
    assert!(text.contains("add a WGSL variant"), "{text}");
}

#[test]
fn wgsl_bundle_for_a_cuda_device_becomes_cuda_c() {
    let bundle = ModuleBundle::from_wgsl(KERNEL);
    assert_eq!(
        bundle.pick(&[CUBIN, PTX, CUDA_C]).ok(),
        Some(Plan::Translate { target: Target::CudaC })
    );
    let resolved = bundle.resolve(&[CUBIN, PTX, CUDA_C]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.format, CUDA_C);
    assert!(resolved.translated);
    let text = std::str::from_utf8(&resolved.bytes).unwrap_or_default();
    assert!(text.contains("extern \"C\" __global__ void"), "{text}");
}

#[test]
fn wgsl_bundle_becomes_opencl_c_on_opencl_and_kernel_spirv_where_nothing_else_is_taken() {
    let bundle = ModuleBundle::from_wgsl(KERNEL);
    // An OpenCL device that also takes IL still gets OpenCL C from WGSL: that translation is
    // the one proven by execution (on PoCL).
    assert_eq!(
        plan(&bundle, &[XHAL_KERNEL_FORMAT_OPENCL_C, XHAL_KERNEL_FORMAT_SPIRV_KERNEL]),
        Plan::Translate {
            target: Target::OpenclC
        }
    );
    assert_eq!(
        plan(&bundle, &[XHAL_KERNEL_FORMAT_OPENCL_C]),
        Plan::Translate {
            target: Target::OpenclC
        }
    );
    // A device that takes only Kernel SPIR-V (Level Zero) gets it.
    assert_eq!(
        plan(&bundle, &[XHAL_KERNEL_FORMAT_SPIRV_KERNEL]),
        Plan::Translate {
            target: Target::SpirvKernel
        }
    );
    let resolved = bundle
        .resolve(&[XHAL_KERNEL_FORMAT_SPIRV_KERNEL])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.format, XHAL_KERNEL_FORMAT_SPIRV_KERNEL);
    assert!(resolved.translated);
}

#[test]
fn wgsl_bundle_for_a_binary_only_device_explains() {
    let error = ModuleBundle::from_wgsl(KERNEL).pick(&[CUBIN, PTX]).err();
    let text = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("cubin, ptx"), "{text}");
    assert!(
        text.contains("from WGSL, xhal can produce: spirv-shader, wgsl, opencl-c, cuda-c, hip-c"),
        "{text}"
    );
}

#[test]
fn empty_inputs() {
    assert!(ModuleBundle::new().pick(&[SPIRV]).is_err());
    let error = ModuleBundle::from_wgsl(KERNEL)
        .pick(&[])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(error.contains("the device accepts nothing"), "{error}");
}

#[test]
fn with_variant_replaces_the_same_format() {
    let bundle = ModuleBundle::from_wgsl(KERNEL)
        .with_variant(PTX, vec![1u8])
        .with_variant(PTX, vec![2u8]);
    assert_eq!(bundle.variants().len(), 2);
    assert_eq!(bundle.variant(PTX).map(|v| &v.bytes[..]), Some(&[2u8][..]));
}

#[test]
fn resolve_translates_and_reflects() {
    let bundle = ModuleBundle::from_wgsl(KERNEL);
    let spirv = bundle.resolve(&[SPIRV]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spirv.format, SPIRV);
    assert!(spirv.translated);
    assert_eq!(spirv.bytes[..4], 0x0723_0203u32.to_le_bytes());
    let reflection = spirv.reflection.unwrap_or_else(|| panic!("no reflection"));
    assert_eq!(reflection[0].name, "fill");

    let kernel_spirv = bundle
        .resolve(&[XHAL_KERNEL_FORMAT_SPIRV_KERNEL])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kernel_spirv.format, XHAL_KERNEL_FORMAT_SPIRV_KERNEL);
    assert!(kernel_spirv.translated);
    assert_eq!(kernel_spirv.bytes[..4], 0x0723_0203u32.to_le_bytes());
    assert_ne!(
        kernel_spirv.bytes, spirv.bytes,
        "Kernel SPIR-V is not the Vulkan flavour"
    );

    let wgsl = bundle.resolve(&[WGSL]).unwrap_or_else(|e| panic!("{e}"));
    assert!(!wgsl.translated);
    assert_eq!(&wgsl.bytes[..], KERNEL.as_bytes(), "WGSL goes to the device as written");
    assert!(wgsl.reflection.is_some());
}

#[test]
fn resolve_native_variant_uses_wgsl_reflection() {
    let with_wgsl = ModuleBundle::from_wgsl(KERNEL).with_variant(CUBIN, vec![7u8; 8]);
    let resolved = with_wgsl.resolve(&[CUBIN]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((resolved.format, &resolved.bytes[..]), (CUBIN, &[7u8; 8][..]));
    assert_eq!(resolved.reflection.map(|r| r[0].buffers.len()), Some(1));

    let native_only = ModuleBundle::new().with_variant(CUBIN, vec![7u8; 8]);
    let resolved = native_only.resolve(&[CUBIN]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(resolved.reflection, None);
}

/// naga's WGSL writer cannot name the result struct of `atomicCompareExchangeWeak`, so such a
/// kernel has no normalised WGSL; a device that takes WGSL as written must still get it.
#[test]
fn wgsl_given_as_written_needs_no_wgsl_writer() {
    const COMPARE_EXCHANGE: &str = "@group(0) @binding(0) var<storage, read_write> cell: atomic<u32>;\n\
        @group(0) @binding(1) var<storage, read_write> out: array<u32>;\n\
        @compute @workgroup_size(1) fn swap() { var r = atomicCompareExchangeWeak(&cell, 0u, 1u); out[0] = r.old_value; }\n";
    let bundle = ModuleBundle::from_wgsl(COMPARE_EXCHANGE);
    let resolved = bundle.resolve(&[WGSL]).unwrap_or_else(|e| panic!("{e}"));
    assert!(!resolved.translated);
    assert_eq!(&resolved.bytes[..], COMPARE_EXCHANGE.as_bytes());
    assert_eq!(resolved.reflection.map(|r| r[0].buffers.len()), Some(2));
    assert!(bundle.resolve(&[SPIRV]).is_ok(), "the SPIR-V writer handles it");
}

#[test]
fn resolve_reports_broken_wgsl() {
    let not_utf8 = ModuleBundle::new().with_variant(WGSL, vec![0xff, 0xfe, b'f']);
    let error = not_utf8.resolve(&[SPIRV]).err().unwrap_or_else(|| panic!("resolved"));
    assert_eq!(error.kind(), KernelErrorKind::Parse);
    assert!(error.message().contains("UTF-8"), "{error}");
    let invalid = ModuleBundle::from_wgsl("fn broken(").with_variant(CUBIN, vec![1u8]);
    assert!(
        invalid.resolve(&[CUBIN]).is_err(),
        "a broken WGSL variant is reported even when unused"
    );
}

#[test]
fn format_names_and_kinds() {
    let names: Vec<String> = [
        WGSL,
        SPIRV,
        XHAL_KERNEL_FORMAT_SPIRV_KERNEL,
        PTX,
        CUBIN,
        XHAL_KERNEL_FORMAT_HSACO,
        CUDA_C,
        XHAL_KERNEL_FORMAT_HIP_C,
        XHAL_KERNEL_FORMAT_OPENCL_C,
        XHAL_KERNEL_FORMAT_CPU_BUILTIN,
        VENDOR,
    ]
    .into_iter()
    .map(format_name)
    .collect();
    assert_eq!(
        names,
        [
            "wgsl",
            "spirv-shader",
            "spirv-kernel",
            "ptx",
            "cubin",
            "hsaco",
            "cuda-c",
            "hip-c",
            "opencl-c",
            "cpu-builtin",
            "vendor-0x10000007"
        ]
    );
    assert!(is_source_format(WGSL) && is_source_format(CUDA_C) && is_source_format(XHAL_KERNEL_FORMAT_OPENCL_C));
    assert!(!is_source_format(SPIRV) && !is_source_format(PTX) && !is_source_format(VENDOR));
    assert_eq!(
        Plan::Translate {
            target: Target::SpirvShader
        }
        .format(),
        SPIRV
    );
}

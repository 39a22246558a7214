//! C-family source from WGSL: OpenCL C 1.2, CUDA C (NVRTC), HIP C (hiprtc) and host C (C11).
//!
//! One writer walks naga's IR of a validated module and prints C; the dialects differ only in
//! a prelude (type names, qualifiers, bit casts), in how atomics and barriers are spelled and
//! in the kernel wrapper that turns the dialect's built-ins into WGSL's.
//!
//! # What the output looks like
//!
//! - Scalars are `xh_i32`, `xh_u32`, `xh_f32`, `xh_bool` (and the 64-bit types, and `xh_f16`:
//!   see [f16](#f16)); vectors are
//!   plain structs `xh_f32x3 { x, y, z }` in every dialect, so layouts agree everywhere;
//!   matrices are `xh_f32m{C}x{R}`, an array of column structs (a three-row column is padded
//!   to 16 bytes, as in WGSL).
//! - Every WGSL struct becomes a C struct with explicit padding members at WGSL's offsets, and
//!   every fixed-size array a struct holding a C array (so arrays are values, as in WGSL);
//!   where WGSL's stride is larger than the element (an `array<vec3<f32>>`), each element is
//!   wrapped with its padding. Host C and C++ dialects check the sizes with static asserts.
//! - WGSL's rules hold without undefined behaviour: signed `+ - *` and negation wrap (computed
//!   in unsigned), `x / 0 == x`, `x % 0 == 0`, `MIN / -1 == MIN`, `MIN % -1 == 0`, shift amounts
//!   use their low 5 (or 6) bits, float-to-integer conversions saturate and turn NaN into 0,
//!   `round` rounds half to even (`rint`). Indices into fixed-size arrays, vectors and matrices
//!   are clamped into bounds (as the SPIR-V target's `Restrict` policy); indices into
//!   runtime-sized arrays are not checked.
//!
//! # Kernel parameters
//!
//! Buffer `i` (`@group(0) @binding(i)`) is pointer parameter `i`; the scalar block (the one
//! `var<immediate>`) follows as one by-value parameter, absent when the kernel has none. A
//! kernel that calls `arrayLength` or indexes a runtime-sized array takes one more by-value
//! parameter after those: `struct { xh_u64 bytes[n]; }` with the byte length of each bound
//! buffer view, in binding order ([`CEntryPoint::buffer_lengths`]). Indices into runtime-sized
//! arrays are clamped to the array's length from it, so no kernel reaches outside its views
//! (as the SPIR-V target's `Restrict` policy and robust buffer access do).
//!
//! Workgroup memory is zeroed by the kernel itself at its start (all invocations share the
//! work, then a barrier), as WGSL requires.
//!
//! # Host C
//!
//! Each entry point `NAME` becomes a function that runs **one whole workgroup**:
//!
//! ```c
//! void NAME(T0 *buffer0, ..., Params scalars, /* lengths, */ const xhal_workgroup *group, void *scratch);
//! extern const uint32_t NAME__workgroup_size[3];
//! extern const size_t NAME__workgroup_bytes;
//! extern const size_t NAME__scratch_bytes;
//! ```
//!
//! `xhal_workgroup` holds `workgroup_id[3]` and `num_workgroups[3]` (`uint32_t`), then
//! `const uint32_t *cancel` and `uint32_t *out_of_bounds`. `scratch` points to `NAME__scratch_bytes`
//! bytes, aligned to 64, that the call owns (workgroup memory and per-invocation state); its
//! contents on entry do not matter, so a runner keeps one per thread. Workgroups may run
//! concurrently on any threads (atomics use the compiler's `__atomic` built-ins).
//!
//! - Without barriers the invocations run one after another, an order WGSL allows.
//! - With barriers ([`CEntryPoint::barriers`]) the entry point is split into regions at its
//!   barriers; each region runs in a loop over the invocations, and the control flow around
//!   barriers (uniform, by WGSL's rules) runs once. Values that live across a barrier are
//!   kept per invocation in the scratch frame; the rest are plain C locals. Calls to functions
//!   that reach a barrier are inlined first, and a `switch` with a barrier in it becomes
//!   `if`s (see `lower.rs`), so barriers may sit anywhere WGSL allows them.
//! - When `*cancel` becomes non-zero, every loop ends at its next iteration, so a runner can
//!   stop a runaway kernel (its results are then meaningless).
//! - An index out of bounds (of a runtime-sized array, and of a fixed-size array, vector or
//!   matrix) is clamped, and `*out_of_bounds` set to 1, so that a strict runner can fault.
//!
//! # 64-bit atomics
//!
//! Host C uses the `__atomic` built-ins, CUDA C and HIP C their atomics on `unsigned long
//! long`. OpenCL C 1.2 has them from two extensions, which a module with 64-bit atomics
//! enables in its prelude: `cl_khr_int64_base_atomics` (`atom_add`, `atom_sub`, `atom_xchg`,
//! `atom_cmpxchg`) and `cl_khr_int64_extended_atomics` (`atom_min`, `atom_max`, `atom_and`,
//! `atom_or`, `atom_xor`), on `__global` and `__local` `long` and `ulong`; a device that lacks
//! either refuses to build the program, so backends claim 64-bit atomics only where both are
//! listed.
//!
//! # f16
//!
//! `f16` is `xh_f16`: `_Float16` in host C and HIP C, `half` in OpenCL C (a module that uses
//! f16 enables `cl_khr_fp16`, so a device without the extension cannot build it), and in
//! CUDA C a struct of the bits converted with PTX's `cvt` (NVRTC has no `cuda_fp16.h`).
//! Vectors and matrices of f16 are `xh_f16x{N}` and `xh_f16m{C}x{R}` (a three-row column
//! padded to four rows, as WGSL aligns it). Every operation is computed in f32 and rounded to f16 at once (`XH_F2H`):
//! `xh_add_f16(a, b)` is `XH_F2H(XH_H2F(a) + XH_H2F(b))`, so C's excess precision never keeps
//! an unrounded intermediate, and results are the CPU interpreter's. The math built-ins on
//! f16 are the f32 ones on widened arguments, rounded once, as in the interpreter; `dot`,
//! `length`, `normalize`, `cross`, matrix products and determinants round each step.
//! Conversions into f16 go through f32 (exact for every integer an f16 holds); out of f16
//! they widen exactly and then convert as from f32. (naga itself refuses f16 in immediates,
//! and bitcasts of f16 vectors.)
//!
//! # Refused
//!
//! Textures and samplers, subgroup operations, derivatives, `discard`, and two entry points
//! whose C names coincide (`main` and `main_`, see [`c_symbol`]). Each is a
//! [`KernelErrorKind::Unsupported`](crate::KernelErrorKind) error naming the feature and the
//! dialect, pointing into the source where naga kept a span.
//!
//! # Without the `translate` feature
//!
//! Only [`c_symbol`] and [`Dialect`] are here (they need no naga): what a backend that compiles
//! C it is handed needs to find a kernel by its WGSL name.

#[cfg(feature = "translate")]
mod bounds;
#[cfg(feature = "translate")]
mod counted;
#[cfg(feature = "translate")]
mod lower;
#[cfg(feature = "translate")]
mod math;
#[cfg(feature = "translate")]
mod prelude;
#[cfg(feature = "translate")]
mod region;
#[cfg(feature = "translate")]
mod types;
#[cfg(feature = "translate")]
mod uniform;
#[cfg(feature = "translate")]
mod workgroup;
#[cfg(feature = "translate")]
mod writer;

pub use crate::dialect::Dialect;
pub use crate::keywords::c_symbol;

#[cfg(feature = "translate")]
use crate::error::KernelError;
#[cfg(feature = "translate")]
use crate::wgsl::WgslModule;

/// What the C source holds for one entry point.
#[cfg(feature = "translate")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CEntryPoint {
    /// The WGSL entry point's name.
    pub name: String,
    /// The C function name: `name`, with `_` appended where the dialects reserve the name
    /// (`main` becomes `main_`; see [`c_symbol`]).
    pub symbol: String,
    /// Buffer parameters (bindings `0..buffers`).
    pub buffers: u32,
    /// Whether the scalar block parameter follows the buffers.
    pub scalar_block: bool,
    /// Whether the byte-lengths parameter follows (the entry point calls `arrayLength`).
    pub buffer_lengths: bool,
    /// `@workgroup_size`.
    pub workgroup_size: [u32; 3],
    /// Bytes of workgroup memory (host C: what `workgroup` must point to).
    pub workgroup_bytes: u64,
    /// Whether the entry point reaches a workgroup barrier (host C: the invocations of a
    /// workgroup must then run so that they can wait for each other).
    pub barriers: bool,
}

/// C source for one or more entry points of a module.
#[cfg(feature = "translate")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CSource {
    /// The dialect written.
    pub dialect: Dialect,
    /// The source text.
    pub text: String,
    /// The entry points it defines, in module order.
    pub entry_points: Vec<CEntryPoint>,
}

#[cfg(feature = "translate")]
impl WgslModule {
    /// Writes C-family source in `dialect` for the compute entry point `entry`, or for every
    /// compute entry point when `entry` is `None`. See the [module docs](crate::c) for the
    /// output's conventions and what is refused.
    pub fn to_c(&self, dialect: Dialect, entry: Option<&str>) -> Result<CSource, KernelError> {
        if let Some(name) = entry {
            self.entry_point(name)?;
        }
        let source = crate::wgsl::guard("writing C", || writer::write(self, dialect, entry))?;
        // Two entry points whose C names coincide (`main` and `main_`) would be one function
        // defined twice.
        for (k, later) in source.entry_points.iter().enumerate() {
            if let Some(first) = source.entry_points[..k].iter().find(|e| e.symbol == later.symbol) {
                return Err(KernelError::new(
                    crate::KernelErrorKind::Unsupported,
                    format!(
                        "entry points `{}` and `{}` would both be the {} function `{}`; rename one of them",
                        first.name,
                        later.name,
                        dialect.name(),
                        later.symbol
                    ),
                ));
            }
        }
        Ok(source)
    }
}

#[cfg(all(test, feature = "translate"))]
mod tests {
    use super::*;
    use crate::{parse_wgsl, KernelErrorKind};

    fn emit(source: &str, dialect: Dialect) -> String {
        parse_wgsl(source)
            .expect("parses")
            .to_c(dialect, None)
            .expect("emits")
            .text
    }

    const ARITH: &str = r#"
        @group(0) @binding(0) var<storage, read_write> data: array<i32>;
        @group(0) @binding(1) var<storage, read_write> floats: array<f32>;
        @compute @workgroup_size(1)
        fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
            let a = data[id.x];
            let b = data[id.x + 1u];
            data[0] = a / b;
            data[1] = a % b;
            data[2] = a << u32(b);
            data[3] = a + b;
            data[4] = -a;
            data[5] = i32(floats[0]);
            floats[1] = round(floats[2]);
            data[6] = bitcast<i32>(floats[3]);
        }
    "#;

    #[test]
    fn integer_operations_go_through_the_helpers_without_undefined_behaviour() {
        for &dialect in Dialect::ALL {
            let c = emit(ARITH, dialect);
            for needle in [
                "xh_div_i32(",
                "xh_rem_i32(",
                "xh_shl_i32(",
                "xh_add_i32(",
                "xh_neg_i32(",
                "xh_f32_to_i32(",
            ] {
                assert!(c.contains(needle), "{}: no {needle} in\n{c}", dialect.name());
            }
            // The helpers themselves: division by zero and MIN / -1 give the dividend,
            // shifts mask the amount, signed arithmetic wraps in unsigned.
            assert!(c.contains("if (b == 0 || (a == (-2147483647 - 1) && b == -1)) return a; return a / b;"));
            assert!(c.contains("if (b == 0 || (a == (-2147483647 - 1) && b == -1)) return 0; return a % b;"));
            assert!(c.contains("<< (b & 31u)"));
            assert!(c.contains("return (xh_i32)((xh_u32)a + (xh_u32)b);"));
            // Saturating conversion: NaN is 0, the bounds are the largest f32 inside the range.
            assert!(c.contains("if (v != v) return 0; if (v <= -2147483648.0f) return (-2147483647 - 1); if (v >= 2147483648.0f) return 2147483520;"));
        }
        assert!(emit(ARITH, Dialect::HostC).contains("rintf("));
        assert!(emit(ARITH, Dialect::CudaC).contains("rintf("));
        assert!(emit(ARITH, Dialect::OpenclC).contains("rint("));
        assert!(emit(ARITH, Dialect::CudaC).contains("__float_as_uint("));
    }

    #[test]
    fn structs_and_arrays_are_padded_to_the_wgsl_layout() {
        let source = r#"
            struct Item { p: vec3<f32>, w: f32, q: vec3<f32> }
            struct Params { n: u32, v: vec3<f32> }
            var<immediate> params: Params;
            @group(0) @binding(0) var<storage, read_write> items: array<Item>;
            @group(0) @binding(1) var<storage, read_write> dirs: array<vec3<f32>, 4>;
            @compute @workgroup_size(1)
            fn pad() { items[0].w = params.v.x + dirs[1].y + f32(params.n); }
        "#;
        let c = emit(source, Dialect::HostC);
        // `w` sits in `p`'s padding; `q` starts at 16; the struct is 32 bytes.
        assert!(c.contains("typedef struct xh_s2_Item { xh_f32x3 p_; xh_f32 w_; xh_f32x3 q_; unsigned char pad_end_[4]; } xh_s2_Item;"), "{c}");
        assert!(c.contains("XH_STATIC_ASSERT(sizeof(xh_s2_Item) == 32"));
        // `v` aligns to 16 behind `n`.
        assert!(
            c.contains("{ xh_u32 n_; unsigned char pad1_[12]; xh_f32x3 v_; unsigned char pad_end_[4]; }"),
            "{c}"
        );
        // array<vec3<f32>, 4> has a stride of 16: elements are wrapped with their padding.
        assert!(c.contains("{ xh_f32x3 v; unsigned char pad_[4]; }"));
        assert!(c.contains("XH_STATIC_ASSERT(sizeof(xh_arr"));
        // The scalar block is one by-value parameter after the buffers.
        assert!(
            c.contains("void pad(XH_GLOBAL xh_s2_Item* buffer0, XH_GLOBAL xh_arr"),
            "{c}"
        );
        assert!(
            c.contains(
                "* buffer1, xh_s4_Params scalars, xh_lengths_pad lengths, const xhal_workgroup* group, void* scratch)"
            ),
            "{c}"
        );
    }

    #[test]
    fn refused_features_name_the_feature_the_dialect_and_the_place() {
        let elements: Vec<String> = (0..1025).map(|i| format!("{i}.0")).collect();
        let source = format!(
            "@group(0) @binding(0) var<storage, read_write> d: array<f32>;\n\
             @compute @workgroup_size(1)\n\
             fn big() {{ let t = array<f32, 1025>({}); d[0] = t[u32(d[0])]; }}\n",
            elements.join(", ")
        );
        for &dialect in Dialect::ALL {
            let e = parse_wgsl(&source)
                .expect("parses")
                .to_c(dialect, None)
                .expect_err("a constructor of 1025 elements refused");
            assert_eq!(e.kind(), KernelErrorKind::Unsupported);
            assert!(
                e.message().contains("more than 1024 elements") && e.message().contains(dialect.name()),
                "{}",
                e.message()
            );
            assert!(e.location().is_some(), "{e}");
        }
        let atomics64 = "@group(0) @binding(0) var<storage, read_write> c: atomic<u64>;\n\
                         @compute @workgroup_size(1)\nfn add() { atomicAdd(&c, 1lu); }\n";
        // OpenCL C has them through cl_khr_int64_base_atomics and cl_khr_int64_extended_atomics.
        let cl = parse_wgsl(atomics64)
            .expect("parses")
            .to_c(Dialect::OpenclC, None)
            .expect("emits");
        assert!(cl
            .text
            .contains("#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable"));
        assert!(cl
            .text
            .contains("#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable"));
        assert!(cl.text.contains("atom_add(&"), "{}", cl.text);
        // Only a module with 64-bit atomics enables the extensions.
        let cl32 = emit(ARITH, Dialect::OpenclC);
        assert!(!cl32.contains("int64_base_atomics"));
        // CUDA and HIP have them on `unsigned long long`.
        let c = parse_wgsl(atomics64)
            .expect("parses")
            .to_c(Dialect::CudaC, None)
            .expect("emits");
        assert!(c.text.contains("atomicAdd((xh_u64*)&"), "{}", c.text);
    }

    #[test]
    fn reserved_entry_point_names_get_a_suffix() {
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(1)\nfn main() { d[0] = 1u; }\n";
        let c = parse_wgsl(source)
            .expect("parses")
            .to_c(Dialect::CudaC, Some("main"))
            .expect("emits");
        assert_eq!(c.entry_points[0].name, "main");
        assert_eq!(c.entry_points[0].symbol, "main_");
        // The workgroup size is stated for backends that read the source (`XH_WORKGROUP_SIZE`,
        // empty once preprocessed) and for the compiler (`__launch_bounds__`).
        assert!(
            c.text
                .contains("XH_WORKGROUP_SIZE(1, 1, 1) extern \"C\" __global__ void __launch_bounds__(1) main_("),
            "{}",
            c.text
        );
        // OpenCL C built-in functions and vector types, `<math.h>` variants and the emitter's
        // prefixes get one too; other names stay as they are.
        for (name, symbol) in [
            ("step", "step_"),
            ("dot", "dot_"),
            ("sqrtf", "sqrtf_"),
            ("float4", "float4_"),
            ("native_sin", "native_sin_"),
            ("vload4", "vload4_"),
            ("atom_add", "atom_add_"),
            ("xh_ep", "xh_ep_"),
            ("stepper", "stepper"),
            ("main_", "main_"),
            ("fill", "fill"),
            ("float5", "float5"),
        ] {
            assert_eq!(c_symbol(name), symbol);
        }
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(1)\nfn step() { d[0] = 1u; }\n";
        let c = parse_wgsl(source)
            .expect("parses")
            .to_c(Dialect::OpenclC, None)
            .expect("emits");
        assert_eq!(c.entry_points[0].symbol, "step_");
        assert!(c.text.contains(" void step_("), "{}", c.text);
        // Two entry points that would get the same C name are refused, naming both.
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(1)\nfn main() { d[0] = 1u; }\n\
                      @compute @workgroup_size(1)\nfn main_() { d[0] = 2u; }\n";
        let module = parse_wgsl(source).expect("parses");
        for &dialect in Dialect::ALL {
            let e = module.to_c(dialect, None).expect_err("refused");
            assert_eq!(e.kind(), KernelErrorKind::Unsupported);
            assert!(
                e.message().contains("`main` and `main_`") && e.message().contains("function `main_`"),
                "{e}"
            );
            // One of them alone is fine.
            assert_eq!(
                module.to_c(dialect, Some("main_")).expect("emits").entry_points[0].symbol,
                "main_"
            );
        }
    }

    #[test]
    fn workgroup_memory_is_zeroed_by_the_device_kernels() {
        let source = include_str!("../../../../examples/kernels/reduce.wgsl");
        let cuda = emit(source, Dialect::CudaC);
        assert!(cuda.contains("__shared__ xh_arr"), "{cuda}");
        assert!(cuda.contains("zp[zi] = 0;") && cuda.contains("__syncthreads();"));
        let cl = emit(source, Dialect::OpenclC);
        assert!(cl.contains("__local xh_arr") && cl.contains("reqd_work_group_size(256, 1, 1)"));
        // Host C runs the workgroup in regions between the barriers, zeroes workgroup
        // memory itself, and keeps what lives across a barrier in the frame.
        let host = parse_wgsl(source)
            .expect("parses")
            .to_c(Dialect::HostC, None)
            .expect("emits");
        assert!(host.text.contains("memset(&S->wg, 0, sizeof S->wg);"));
        assert!(host.text.contains("for (li = 0; li < 256u; li++) {"), "{}", host.text);
        // `stride` is the same in every invocation: one slot, updated once per step.
        assert!(host.text.contains("xh_u32 stride_l1;"), "{}", host.text);
        // Each step's `if lane < stride` region stops at the first inactive invocation.
        assert!(host.text.contains("goto xh_r3_past;"), "{}", host.text);
        assert!(host.entry_points[0].barriers);
        assert_eq!(host.entry_points[0].workgroup_bytes, 1024);
        let saxpy = include_str!("../../../../examples/kernels/saxpy.wgsl");
        let host = parse_wgsl(saxpy)
            .expect("parses")
            .to_c(Dialect::HostC, None)
            .expect("emits");
        assert!(!host.entry_points[0].barriers);
    }

    #[test]
    fn indices_the_workgroup_size_bounds_are_not_clamped() {
        let source = "var<workgroup> tile: array<u32, 64>;\n\
                      @group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(8, 8)\n\
                      fn f(@builtin(local_invocation_index) lane: u32, @builtin(local_invocation_id) id: vec3<u32>) {\n\
                          tile[lane] = 1u;\n\
                          tile[id.y * 8u + id.x] = 2u;\n\
                          tile[(lane + 9u) % 64u] = 3u;\n\
                          tile[lane + 1u] = 4u;\n\
                          workgroupBarrier();\n\
                          d[lane] = tile[lane];\n\
                      }\n";
        for dialect in [Dialect::HostC, Dialect::OpenclC, Dialect::CudaC] {
            let text = emit(source, dialect);
            // Only `lane + 1u` can reach past the end (in invocation 63). Host C writes the
            // body twice, with and without the checks of `d`'s (affine) indices; both keep
            // that one clamp, which no check at the workgroup's start replaces.
            let clamps = text.matches(if dialect == Dialect::HostC {
                "xh_fx_index(&"
            } else {
                "xh_min_u32((xh_u32)("
            });
            let bodies = if dialect == Dialect::HostC { 2 } else { 1 };
            assert_eq!(clamps.count(), bodies, "{}: {text}", dialect.name());
        }
    }

    #[test]
    fn host_c_indexes_buffers_in_workgroup_mode_through_pointers_in_locals() {
        let source = "@group(0) @binding(0) var<storage, read> source: array<f32>;\n\
                      @group(0) @binding(1) var<storage, read_write> output: array<f32>;\n\
                      var<workgroup> tile: array<f32, 64>;\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(local_invocation_index) lane: u32) {\n\
                          tile[lane] = source[lane];\n\
                          workgroupBarrier();\n\
                          output[lane] = tile[63u - lane];\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        // Read from the context in the invocations' loop, a pointer would be loaded again
        // after each store of a float, which keeps GCC from vectorising the loop.
        for (ty, name) in [
            ("XH_GLOBAL xh_f32*", "g_source0"),
            ("XH_GLOBAL xh_f32*", "g_output1"),
            ("XH_LOCAL xh_arr", "g_tile2"),
        ] {
            assert!(host.contains(&format!("XH_UNUSED {ty}")), "{host}");
            assert!(
                host.contains(&format!(" const x{name} = proto->{name};")),
                "{name}: {host}"
            );
            assert!(!host.contains(&format!("ctx->{name}")), "{name}: {host}");
        }
    }

    #[test]
    fn host_c_runs_a_uniform_loop_once_for_the_workgroup() {
        let source = include_str!("../../../../examples/kernels/matmul.wgsl");
        let host = emit(source, Dialect::HostC);
        // The tile's dot product (`i`, the same in every invocation) is a loop at workgroup
        // level around one over the invocations, x innermost, which the compiler vectorises.
        assert!(host.contains("xh_u32 i_l4;"), "{host}");
        assert!(
            host.contains("XH_INVOCATIONS\n") && host.contains("for (lx = 0; lx < 16u; lx++) {"),
            "{host}"
        );
        // A loop whose exit differs between invocations stays inside each invocation.
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      var<workgroup> w: array<u32, 4>;\n\
                      @compute @workgroup_size(4)\n\
                      fn f(@builtin(local_invocation_index) lane: u32) {\n\
                          var s = 0u;\n\
                          for (var i = 0u; i < 8u; i++) { if i > lane { break; } s += i; }\n\
                          w[lane] = s;\n\
                          workgroupBarrier();\n\
                          d[lane] = w[3u - lane];\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        let frame = host
            .lines()
            .find(|line| line.starts_with("typedef struct xh_frame_f"))
            .unwrap_or_default();
        assert!(!frame.contains("i_l1"), "{host}");
        assert!(host.contains("XH_UNUSED xh_u32 i_l1 = 0u;"), "{host}");
    }

    #[test]
    fn host_c_runs_a_row_across_the_invocations_with_vector_indices() {
        // A workgroup per row, as softmax.wgsl's `_wide` kernels are written.
        let source = "struct Rows { rows: u32, length: u32 }\n\
                      @group(0) @binding(0) var<storage, read> x: array<f32>;\n\
                      @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
                      var<immediate> shape: Rows;\n\
                      var<workgroup> w: array<f32, 64>;\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {\n\
                          if wid.x >= shape.rows { return; }\n\
                          let base = wid.x * shape.length;\n\
                          var top = x[base];\n\
                          for (var start = 0u; start < shape.length; start += 64u) {\n\
                              let j = start + lane;\n\
                              if j < shape.length { top = max(top, x[base + j]); }\n\
                          }\n\
                          w[lane] = top;\n\
                          workgroupBarrier();\n\
                          for (var start = 0u; start < shape.length; start += 64u) {\n\
                              let j = start + lane;\n\
                              if j < shape.length { y[base + j] = x[base + j] - w[0]; }\n\
                          }\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        // The uniform `return` ends the whole workgroup: no invocation carries a flag that
        // every later region would test.
        assert!(!host.contains("done_"), "{host}");
        // An index the region's test proves in bounds is a step from the first invocation's,
        // in 64 bits, where a 32-bit sum that may wrap is a gather (or a scatter).
        assert!(host.contains("xh_lane_site[0] = xh_lin_"), "{host}");
        assert!(host.contains("xh_lane_site[0].b + (xh_i64)li * 1"), "{host}");
        // `max` of floats is a comparison, not a call to libm's fmaxf.
        assert!(host.contains("xh_fmax_f32(") && !host.contains("fmaxf("), "{host}");
        // A `var<uniform>` block (read-only for the dispatch) and a call to a function of
        // uniform values alone are the same in every invocation: the loop whose count they
        // give runs once for the workgroup, its counter in one slot of the frame.
        let source = "struct L { count: u32, part: u32 }\n\
                      @group(0) @binding(0) var<uniform> shape: L;\n\
                      @group(0) @binding(1) var<storage, read> input: array<vec4<f32>>;\n\
                      @group(0) @binding(2) var<storage, read_write> out: array<f32>;\n\
                      var<workgroup> w: array<f32, 256>;\n\
                      fn first(o: u32) -> u32 { return o * shape.count; }\n\
                      @compute @workgroup_size(256)\n\
                      fn split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {\n\
                          let base = first(wid.y);\n\
                          let quads = min(shape.count, shape.part) / 4u;\n\
                          var sums = vec4<f32>(0.0);\n\
                          for (var step = 0u; step < quads; step = step + 256u) {\n\
                              let k = step + lane;\n\
                              if (k < quads) { sums = sums + input[base / 4u + k]; }\n\
                          }\n\
                          w[lane] = sums.x + sums.y + sums.z + sums.w;\n\
                          workgroupBarrier();\n\
                          if (lane == 0u) { out[wid.y] = w[0] + w[1]; }\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        let frame = host
            .lines()
            .find(|line| line.starts_with("typedef struct xh_frame_split"))
            .unwrap_or_default();
        assert!(frame.contains("xh_u32 step_l"), "{host}");
        assert!(host.contains("xh_lane_site[0].b + (xh_i64)li * 1"), "{host}");
    }

    #[test]
    fn host_c_runs_a_guarded_body_for_the_prefix_of_invocations_it_guards() {
        let source = include_str!("../../../../examples/kernels/saxpy.wgsl");
        let host = emit(source, Dialect::HostC);
        // `if i < params.n { ... }` with `i` one step per invocation: the unchecked body runs
        // for the invocations below the limit, with no condition left in it.
        assert!(host.contains("static xh_u32 xh_ep_saxpy_active("), "{host}");
        assert!(host.contains("for (li = 0; li < xh_active; li++) {"), "{host}");
        let fast = host
            .split("XH_FN void xh_ep_saxpy_fast(")
            .nth(1)
            .and_then(|rest| rest.split("\n}\n").next())
            .unwrap_or_default();
        assert!(!fast.is_empty() && !fast.contains("if ("), "{host}");
        // A condition that is not a prefix (`i` falls as the invocation index rises) keeps
        // its check in the body.
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(global_invocation_id) id: vec3<u32>) {\n\
                          let i = 4096u - id.x;\n\
                          if i < arrayLength(&d) { d[i] = 1u; }\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        assert!(!host.contains("_active("), "{host}");
    }

    #[test]
    fn host_c_gives_a_kernel_with_barriers_an_unchecked_body_and_stores_shared_values_once() {
        let source = include_str!("../../../../examples/kernels/reduce.wgsl");
        let host = emit(source, Dialect::HostC);
        // Every index into `input` and `partial_sums` is affine in the invocation index: the
        // workgroup runs the body without checks when the check at its start passes.
        assert!(host.contains("static void xh_ep_reduce_fast("), "{host}");
        assert!(
            host.contains("if (xh_ep_reduce_inbounds(&c, wid, nwg, xh_site)) xh_ep_reduce_fast("),
            "{host}"
        );
        // `group_index`, the same in every invocation and read after the barrier, is kept in
        // a register through the region's loop and stored to the frame once after it.
        assert!(host.contains("group_index_e7_r = (e3 + e6);"), "{host}");
        assert!(host.contains("F->group_index_e7 = group_index_e7_r;"), "{host}");
        assert!(!host.contains("F->group_index_e7 = (e3 + e6);"), "{host}");
        // The tiled matmul indexes with a loop's counter: no unchecked body.
        let source = include_str!("../../../../examples/kernels/matmul.wgsl");
        assert!(!emit(source, Dialect::HostC).contains("xh_ep_matmul_fast("));
    }

    const HALF: &str = r#"
        enable f16;
        struct Item { a: f16, v: vec3<f16>, b: f16, m: mat3x3<f16>, w: vec2<f16> }
        @group(0) @binding(0) var<storage, read_write> h: array<vec4<f16>>;
        @group(0) @binding(1) var<storage, read_write> items: array<Item>;
        @group(0) @binding(2) var<storage, read_write> out: array<f32>;
        @compute @workgroup_size(1)
        fn half(@builtin(global_invocation_id) id: vec3<u32>) {
            let x = h[id.x];
            let y = x * x.w + vec4<f16>(1.5h);
            h[id.x] = y;
            out[0] = f32(dot(x, y)) + f32(i32(x.x)) + f32(x.y < y.y);
            items[0].m = items[1].m * items[0].m;
            items[0].b = f16(out[1]) + f16(id.y) + sqrt(items[0].a);
            items[0].v = normalize(items[0].v);
        }
    "#;

    #[test]
    fn f16_is_written_in_every_dialect_rounded_after_each_operation() {
        for &dialect in Dialect::ALL {
            let c = emit(HALF, dialect);
            // `x * x.w + 1.5` and `dot(x, y)`: each operation in f32, rounded to f16 at once.
            assert!(
                c.contains("xh_add_f16(xh_add_f16(xh_add_f16(xh_mul_f16(") && c.contains("XH_F16(1.5f)"),
                "{}: {c}",
                dialect.name()
            );
            assert!(c.contains("XH_FN xh_f16 xh_mul_f16(xh_f16 a, xh_f16 b) { return XH_F2H(XH_H2F(a) * XH_H2F(b)); }"));
            // Conversions go through f32: out of f16 exactly, into f16 rounded once.
            assert!(c.contains("xh_f32_to_i32(XH_H2F("), "{}: {c}", dialect.name());
            assert!(c.contains("XH_F2H(((xh_f32)("), "{}: {c}", dialect.name());
            // The math built-ins are the f32 ones, rounded.
            assert!(c.contains("XH_F2H(sqrt"), "{}: {c}", dialect.name());
            // Matrices of f16 have their own types; three-row columns are padded to four.
            assert!(c.contains("typedef struct { xh_f16x3 v; xh_f16 pad_; } xh_f16x3_col;"));
            assert!(c.contains("xh_f16m3x3"));
        }
        // Each dialect's f16 type, and OpenCL C's extension only where the module uses f16.
        let cl = emit(HALF, Dialect::OpenclC);
        assert!(cl.contains("#pragma OPENCL EXTENSION cl_khr_fp16 : enable"));
        assert!(cl.contains("typedef half xh_f16;"));
        assert!(!emit(ARITH, Dialect::OpenclC).contains("cl_khr_fp16"));
        assert!(!emit(ARITH, Dialect::HostC).contains("_Float16"));
        assert!(emit(HALF, Dialect::HostC).contains("typedef _Float16 xh_f16;"));
        // CUDA C converts with PTX's cvt on the device (NVRTC has no cuda_fp16.h), HIP C has
        // clang's _Float16.
        let cuda = emit(HALF, Dialect::CudaC);
        assert!(cuda.contains("cvt.rn.f16.f32") && !cuda.contains("#include"), "{cuda}");
        assert!(!emit(ARITH, Dialect::CudaC).contains("cvt.rn.f16"));
        assert!(emit(HALF, Dialect::HipC).contains("typedef _Float16 xh_f16;"));
    }

    #[test]
    fn f16_values_take_wgsl_offsets_in_structs_and_arrays() {
        let c = emit(HALF, Dialect::HostC);
        // a at 0, v (align 8) at 8, b in v's padding at 14, m (columns of 8 bytes, align 8)
        // at 16, w at 40; 44 rounded up to the struct's alignment of 8.
        assert!(
            c.contains("{ xh_f16 a_; unsigned char pad1_[6]; xh_f16x3 v_; xh_f16 b_; xh_f16m3x3 m_; xh_f16x2 w_; unsigned char pad_end_[4]; }"),
            "{c}"
        );
        assert!(c.contains("== 48, \"WGSL layout\""), "{c}");
        // array<vec4<f16>> has a stride of 8: no wrapping.
        assert!(c.contains("void half_(XH_GLOBAL xh_f16x4* buffer0"), "{c}");
    }

    #[test]
    fn host_c_divides_by_a_workgroup_invariant_divisor_through_a_memo() {
        let source = "struct Shape { inner: u32, count: u32, step: i32 }\n\
                      var<immediate> shape: Shape;\n\
                      @group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      fn split(e: u32, size: u32) -> vec2<u32> { return vec2<u32>(e / size, e % size); }\n\
                      fn spread(e: u32, size: u32) -> u32 { return e / size; }\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(global_invocation_id) id: vec3<u32>) {\n\
                          let e = id.x;\n\
                          let parts = split(e, shape.inner * shape.count);\n\
                          let signed = i32(e) / shape.step;\n\
                          d[e] = parts.x + parts.y + u32(signed) + e / 7u + spread(100u, e + 1u) + e / id.x;\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        // The helper's divisor is an argument that every call passes from the scalar block.
        assert!(host.contains("xh_div_memo_u32(a_e0, a_size1, &ctx->div_["), "{host}");
        assert!(host.contains("xh_rem_memo_u32(a_e0, a_size1, &ctx->div_["), "{host}");
        assert!(host.contains("xh_div_memo_i32("), "{host}");
        assert!(host.contains("xh_divisor div_[4];"), "{host}");
        // A constant divisor is the C compiler's to fold; one that differs between
        // invocations (an argument computed from the invocation's id) keeps the plain division.
        assert!(host.contains("xh_div_u32(e"), "{host}");
        assert!(host.contains("xh_div_u32(a_e0, a_size1)"), "{host}");
        for dialect in [Dialect::OpenclC, Dialect::CudaC] {
            let text = emit(source, dialect);
            assert!(!text.contains("memo"), "{}: {text}", dialect.name());
        }
        // In a loop, a dividend the loop changes goes through the memo; one it does not keeps
        // the plain division, which the C compiler moves out of the loop.
        let source = "struct Shape { size: u32, count: u32 }\n\
                      var<immediate> shape: Shape;\n\
                      @group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(global_invocation_id) id: vec3<u32>) {\n\
                          var total = 0u;\n\
                          for (var k = 0u; k < shape.count; k++) {\n\
                              total += (id.x + k) % shape.size + id.x / shape.size;\n\
                          }\n\
                          d[id.x] = total;\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        assert!(host.contains("xh_rem_memo_u32(e"), "{host}");
        assert!(!host.contains("xh_div_memo_u32(e"), "{host}");
        assert!(host.contains("xh_div_u32("), "{host}");
    }

    #[test]
    fn host_c_gives_a_counted_loop_an_unchecked_copy_behind_a_check() {
        let source = "struct Params { count: u32, stride: u32 }\n\
                      var<immediate> params: Params;\n\
                      @group(0) @binding(0) var<storage, read> x: array<f32>;\n\
                      @group(0) @binding(1) var<storage, read_write> y: array<f32>;\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(global_invocation_id) id: vec3<u32>) {\n\
                          let row = id.x * params.count;\n\
                          for (var k = 0u; k < params.count; k++) { y[row + k] = x[row + k * params.stride]; }\n\
                          for (var k = 0u; k < params.count; k++) { y[row + k] += 1.0; if (y[row] > 2.0) { k += 1u; } }\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        // One unchecked copy, for the first loop: the second changes its own counter.
        assert_eq!(host.matches("for (; k_l").count(), 1, "{host}");
        let fast = &host[host.find("for (; k_l").expect("the unchecked copy")..];
        let fast = &fast[..fast.find("} else {").expect("the checked loop after it")];
        // Indices in 64 bits from the first iteration's: a literal step where the kernel
        // fixes it, the checked step where the scalar block does.
        assert!(fast.contains("xg_y2[xv_a") && fast.contains(") * 1] = "), "{fast}");
        assert!(fast.contains(") * xv_s"), "{fast}");
        assert!(!fast.contains("xh_rt_index") && !fast.contains("cancel_"), "{fast}");
        // The check reads the scalar block's copy that the copy indexes with.
        assert!(host.contains("xv_z >= (xh_i64)ctx->n_[0]) xv_fast"), "{host}");
        for dialect in [Dialect::OpenclC, Dialect::CudaC] {
            assert!(!emit(source, dialect).contains("xv_fast"), "{}", dialect.name());
        }
    }

    #[test]
    fn host_c_calls_a_pure_function_of_a_uniform_value_once_for_the_workgroup() {
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<f32>;\n\
                      var<workgroup> total: f32;\n\
                      fn costly(x: f32) -> f32 { var y = x; for (var i = 0; i < 8; i++) { y = sqrt(y + 1.0); } return y; }\n\
                      @compute @workgroup_size(64)\n\
                      fn f(@builtin(local_invocation_index) lane: u32) {\n\
                          if (lane == 0u) { total = d[0]; }\n\
                          let whole = workgroupUniformLoad(&total);\n\
                          let scale = costly(whole);\n\
                          d[lane] = d[lane] * scale;\n\
                      }\n";
        let host = emit(source, Dialect::HostC);
        // The call sits in a region of its own that runs as invocation 0 only, with no loop
        // over the invocations around it.
        let call = host.find("= xh_fn0_costly(ctx,").expect("the call");
        let region = &host[host[..call].rfind("{ xh_u32 xh_oob").expect("its region")..call];
        assert!(region.contains("li = 0u; lx = 0u;"), "{region}");
        assert!(!region.contains("for (li = 0;"), "{region}");
    }
}

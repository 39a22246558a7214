//! Kernel-flavoured SPIR-V from WGSL: the OpenCL execution environment, for Level Zero and
//! for OpenCL devices that take IL (`clCreateProgramWithIL`).
//!
//! naga's own SPIR-V back end writes the Vulkan (`Shader`) flavour only; this writer walks
//! naga's IR of a validated module and writes the words itself (opcodes and enums from the
//! `spirv` crate).
//!
//! # What the output looks like
//!
//! - SPIR-V 1.0; `Capability Addresses`, `Kernel`, `Int64` (built-ins are `size_t` vectors),
//!   plus `Float64` when the kernel uses `f64`, `Int8` when a struct needs odd padding and
//!   `Int64Atomics` when it has atomics on 64-bit integers (OpenCL's
//!   `cl_khr_int64_base_atomics` and `cl_khr_int64_extended_atomics`; Level Zero's
//!   `ZE_DEVICE_MODULE_FLAG_INT64_ATOMICS`);
//!   `OpMemoryModel Physical64 OpenCL`; math through `OpExtInstImport "OpenCL.std"`.
//! - One `OpEntryPoint Kernel` per compute entry point, with `OpExecutionMode LocalSize`
//!   set to `@workgroup_size` and `ContractionOff` (each multiplication and addition rounds
//!   on its own, as on the CPU interpreter; OpenCL would let a consumer fuse `a * b + c`).
//!   The kernel's name is the OpenCL C dialect's ([`c_symbol`]:
//!   the WGSL name, `_` appended to names C reserves), so a backend looks kernels up the
//!   same way in either format.
//! - Built-ins come from `Input` variables of `size_t` 3-vectors (`LocalInvocationId`,
//!   `WorkgroupId`, `NumWorkgroups`), converted to `u32`; `global_invocation_id` and
//!   `local_invocation_index` are computed from them and the workgroup size, exactly as the
//!   C dialects do (no global offset).
//! - Integers are `OpTypeInt` with signedness 0 (the Kernel rule); the operations carry the
//!   sign. Vectors are SPIR-V vectors; a matrix is an array of its column vectors; a
//!   fixed-size array is `OpTypeArray`; `bool` is `OpTypeBool`.
//! - Layout: every WGSL struct becomes a SPIR-V struct with explicit padding members (arrays
//!   of `u32`, or of `u8` for odd sizes) at WGSL's offsets. Under OpenCL's rules a 3-vector
//!   takes 16 bytes, as a `vec3` does in WGSL arrays and matrices; where a struct places the
//!   next member inside a `vec3`'s last 4 bytes (`struct { p: vec3<f32>, w: f32 }`), that
//!   member is stored as an array of 3 scalars and converted on load and store. A struct
//!   whose natural OpenCL layout would still differ from WGSL's is decorated `CPacked`. So
//!   the host sees WGSL's layout in every buffer and in the scalar block.
//! - WGSL's rules hold without undefined behaviour, as in the C dialects: signed `+ - *`
//!   wrap (SPIR-V integer arithmetic wraps), `x / 0 == x`, `x % 0 == 0`, `MIN / -1 == MIN`,
//!   `MIN % -1 == 0` (the divisor is replaced by 1 where C's would be undefined), shift
//!   amounts are masked to their low 5 (or 6) bits, float-to-integer conversions clamp into
//!   the range of floats the integer holds and turn NaN into 0, `round` is `rint` (half to
//!   even). Indices into fixed-size arrays, vectors and matrices are clamped into bounds;
//!   indices into runtime-sized arrays are clamped to the element count of the bound view
//!   (`i < n ? i : (n == 0 ? 0 : n - 1)`), as in the C dialects, so no kernel reaches outside
//!   its views.
//! - The pack built-ins, `unpack4xI8`/`unpack4xU8`, `unpack2x16float`, `dot4I8Packed`/
//!   `dot4U8Packed` and `quantizeToF16` are integer and float operations on the lanes, as the
//!   CPU interpreter computes them (and the C dialects' prelude): the normalized packs are
//!   `floor(0.5 + scale * clamp(x))` with a NaN packing as 0; binary16 conversion is done on
//!   the bits, rounding to nearest with ties to even (subnormal results too), too large
//!   values becoming infinities, too small ones signed zeros, a NaN quiet with the top ten
//!   bits of its payload; binary16 to `f32` is exact and keeps a NaN's payload. Nothing
//!   depends on the device's own half conversions or its denormal mode.
//! - Atomics are relaxed (`MemorySemantics` 0), with `Device` scope in buffers and
//!   `Workgroup` scope in workgroup memory. `workgroupBarrier` is `OpControlBarrier
//!   Workgroup Workgroup SequentiallyConsistent|WorkgroupMemory`; `storageBarrier` uses
//!   `CrossWorkgroupMemory`; `workgroupUniformLoad` is a barrier, a load, a barrier.
//!
//! # Kernel parameters
//!
//! The same as the OpenCL C dialect ([`crate::c`]), so one OpenCL backend runs either:
//! buffer `i` (`@group(0) @binding(i)`) is `CrossWorkgroup` pointer parameter `i` (to the
//! element of a runtime-sized array, to the struct otherwise; a struct that ends in a
//! runtime-sized array is reached through a `u32` pointer and address arithmetic). The
//! scalar block (the one `var<immediate>`) follows as one by-value parameter, absent when the
//! kernel has none: a scalar is passed as itself; a struct, array or matrix as a
//! `Function`-storage pointer decorated `FuncParamAttr ByVal`, as OpenCL compilers pass
//! structs by value; a vector as a by-value array of its components (so it has WGSL's size,
//! 12 bytes for a `vec3<f32>`). A kernel that calls `arrayLength` or uses a buffer with a
//! runtime-sized array takes one more by-value parameter, `struct { u64 bytes[n]; }` with the
//! byte length of each bound buffer view in binding order ([`CEntryPoint::buffer_lengths`]).
//! The kernel turns those into the element count of each runtime-sized array once, at its
//! start, into a `Function` array that the functions it calls receive by pointer; `arrayLength`
//! reads it, and so does every index into a runtime-sized array. Indexing a runtime-sized
//! array through a pointer parameter (which names no binding) is refused, as in the C
//! dialects.
//!
//! Workgroup variables are module-scope `Workgroup` variables, zeroed by the kernel at its
//! start (arrays element by element across the workgroup's invocations, anything else by
//! invocation 0), then a barrier, as WGSL requires. Only kernels name them: the functions a
//! kernel calls receive a `Workgroup` pointer to each one they use, as the C dialects pass
//! them. (PoCL 3.1 turns the workgroup variables of a kernel into hidden arguments of that
//! kernel alone; a function that named the module-scope variable itself reached other memory
//! there, and read zeros where the kernel had written.) `var<private>` variables are
//! `Function` variables of the kernel, passed by pointer to the functions that use them.
//!
//! # How it is checked
//!
//! Every kernel of the repository is checked with `spirv-val --target-env opencl1.2`
//! (`tests/spirv_kernel.rs`): SPIR-V 1.0 under the OpenCL 1.2 full profile's rules, which
//! admit Physical64 and every capability written here but `Int64Atomics`: `spirv-val`
//! refuses it in every OpenCL environment it knows (1.2 to 2.2), not knowing the extensions
//! that allow it, so a module with 64-bit atomics is checked under SPIR-V 1.0's own rules
//! (`--target-env spv1.0`); they run on PoCL like every other kernel below. The PoCL used
//! for the OpenCL
//! backend's tests takes no IL (its IL version is empty), so the output cannot be loaded
//! there as SPIR-V. Where the Khronos translator `llvm-spirv` is installed, the test also
//! reads every output back into LLVM IR (`llvm-spirv -r`, the reader at the front of Intel's
//! compilers), and, on a device with `cl_khr_spir` (PoCL is built with it), runs every
//! kernel from that SPIR 1.2 bitcode and from the OpenCL C dialect with the same arguments
//! and compares the buffers byte for byte. That runs the SPIR-V's meaning, through the
//! translator, not the SPIR-V loader of a driver: no Level Zero or IL-taking OpenCL device
//! has run this output yet. The pack family is also run over edge cases
//! (`tests/spirv_kernel/packing.wgsl`: NaNs, infinities, subnormals, binary16 ties and
//! overflow, halfway and out-of-range values) and must write exactly the words that the CPU
//! interpreter writes (`tests/spirv_kernel/packing.expected`, which the cpu backend's tests
//! hold the interpreter to).
//!
//! Two choices come from that reader (as shipped with LLVM 15): composites are built by
//! `OpCompositeInsert` into an `OpUndef` (it takes `OpCompositeConstruct` only with
//! constant constituents), and zeros of scalars and vectors are `OpConstant` /
//! `OpConstantComposite` (it takes `OpConstantNull` only for aggregates). Geometry (`dot`,
//! `length`, `distance`, `normalize`, `reflect`, `faceForward`, `refract`), `modf` and `frexp`
//! are written out as the C dialects write them, so both translations compute the same bits.
//!
//! # Refused
//!
//! `f16`: `Capability Float16` needs a device with `cl_khr_fp16`, and the only device that runs
//! this output here (PoCL 3.1 on the CPU, behind the emulated Level Zero device) has none, so
//! no `f16` kernel could be checked. Also refused: textures and samplers,
//! subgroup operations, derivatives, `discard`, matrix inverses and `outerProduct` (naga's,
//! which WGSL does not have), indexing a runtime-sized array through a pointer parameter, and passing a pointer
//! to a packed `vec3` member to a function. Each is a
//! [`KernelErrorKind::Unsupported`](crate::KernelErrorKind) error naming the feature and
//! "Kernel SPIR-V", pointing into the source where naga kept a span.

mod words;
mod writer;

#[cfg(doc)]
use crate::c::c_symbol;
use crate::c::CEntryPoint;
use crate::error::KernelError;
use crate::wgsl::WgslModule;

/// Kernel-flavoured SPIR-V for one or more entry points of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpirvKernel {
    /// The module's words.
    pub words: Vec<u32>,
    /// The kernels it defines, in module order, with the same parameter description as the
    /// OpenCL C dialect (`symbol` is the `OpEntryPoint` name; `workgroup_bytes` the bytes of
    /// workgroup memory the kernel declares).
    pub entry_points: Vec<CEntryPoint>,
}

impl SpirvKernel {
    /// The words as little-endian bytes, as `clCreateProgramWithIL` and
    /// `zeModuleCreate` take them.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

impl WgslModule {
    /// Writes Kernel-flavoured SPIR-V for the compute entry point `entry`, or for every
    /// compute entry point when `entry` is `None`. See the [module docs](crate::spirv_kernel)
    /// for the output's conventions and what is refused.
    pub fn to_spirv_kernel(&self, entry: Option<&str>) -> Result<SpirvKernel, KernelError> {
        if let Some(name) = entry {
            self.entry_point(name)?;
        }
        crate::wgsl::guard("writing Kernel SPIR-V", || writer::write(self, entry))
    }
}

#[cfg(test)]
mod tests {
    use spirv::Op;

    use crate::{parse_wgsl, KernelErrorKind};

    /// The instructions of a module: opcode and operands.
    fn instructions(words: &[u32]) -> Vec<(u32, Vec<u32>)> {
        let mut out = Vec::new();
        let mut i = 5;
        while i < words.len() {
            let count = (words[i] >> 16) as usize;
            let op = words[i] & 0xFFFF;
            assert!(count >= 1 && i + count <= words.len(), "bad word count at {i}");
            out.push((op, words[i + 1..i + count].to_vec()));
            i += count;
        }
        out
    }

    fn emit(source: &str) -> Vec<(u32, Vec<u32>)> {
        let k = parse_wgsl(source)
            .expect("parses")
            .to_spirv_kernel(None)
            .expect("emits");
        assert_eq!(k.words[0], 0x0723_0203);
        instructions(&k.words)
    }

    fn has(insts: &[(u32, Vec<u32>)], op: Op) -> bool {
        insts.iter().any(|(o, _)| *o == op as u32)
    }

    fn count(insts: &[(u32, Vec<u32>)], op: Op) -> usize {
        insts.iter().filter(|(o, _)| *o == op as u32).count()
    }

    #[test]
    fn header_memory_model_and_entry_point() {
        let source = include_str!("../../../../examples/kernels/saxpy.wgsl");
        let k = parse_wgsl(source)
            .expect("parses")
            .to_spirv_kernel(None)
            .expect("emits");
        let insts = instructions(&k.words);
        assert_eq!(k.words[1], 0x0001_0000, "SPIR-V 1.0");
        let caps: Vec<u32> = insts
            .iter()
            .filter(|(o, _)| *o == Op::Capability as u32)
            .map(|(_, v)| v[0])
            .collect();
        assert!(caps.contains(&(spirv::Capability::Kernel as u32)));
        assert!(caps.contains(&(spirv::Capability::Addresses as u32)));
        assert!(!caps.contains(&(spirv::Capability::Shader as u32)));
        let model = insts
            .iter()
            .find(|(o, _)| *o == Op::MemoryModel as u32)
            .expect("memory model");
        assert_eq!(model.1, vec![2, 2], "Physical64 OpenCL");
        let ep = insts
            .iter()
            .find(|(o, _)| *o == Op::EntryPoint as u32)
            .expect("entry point");
        assert_eq!(ep.1[0], spirv::ExecutionModel::Kernel as u32);
        let mode = insts
            .iter()
            .find(|(o, _)| *o == Op::ExecutionMode as u32)
            .expect("local size");
        assert_eq!(mode.1[1..], [spirv::ExecutionMode::LocalSize as u32, 256, 1, 1]);
        let e = &k.entry_points[0];
        // saxpy indexes runtime-sized arrays, so it takes the byte lengths (to clamp them).
        assert_eq!((e.buffers, e.scalar_block, e.buffer_lengths), (2, true, true));
        assert_eq!(k.to_bytes().len(), k.words.len() * 4);
        // The counts come from the byte lengths once (a division), and each index into x or
        // y is clamped by a select before the pointer arithmetic.
        assert_eq!(count(&insts, Op::UDiv), 2, "one count per runtime-sized array");
        assert!(count(&insts, Op::Select) >= 2 * 3);
        assert!(has(&insts, Op::PtrAccessChain));
    }

    #[test]
    fn a_vec3_followed_by_a_member_in_its_padding_is_stored_as_three_scalars() {
        let source = r#"
            struct Item { p: vec3<f32>, w: f32, q: vec3<f32> }
            @group(0) @binding(0) var<storage, read_write> items: array<Item>;
            @compute @workgroup_size(1)
            fn pad() { items[0].w = items[1].p.x + items[2].q.y; items[3].p = items[4].q; }
        "#;
        let insts = emit(source);
        // Find the struct: members are array<f32, 3> (p, 12 bytes), f32 (w, at 12), and a
        // 16-byte float3 (q, at 16): 32 bytes, WGSL's size, with no padding member needed.
        let id_of = |op: Op, pred: &dyn Fn(&[u32]) -> bool| {
            insts
                .iter()
                .find(|(o, v)| *o == op as u32 && pred(v))
                .map(|(_, v)| v[0])
        };
        let f32t = id_of(Op::TypeFloat, &|v| v[1] == 32).expect("f32");
        let v3 = id_of(Op::TypeVector, &|v| v[1] == f32t && v[2] == 3).expect("vec3");
        let arr3 = insts
            .iter()
            .find(|(o, v)| *o == Op::TypeArray as u32 && v[1] == f32t)
            .map(|(_, v)| v[0])
            .expect("array<f32, 3>");
        let st = insts.iter().find(|(o, _)| *o == Op::TypeStruct as u32).expect("struct");
        assert_eq!(st.1[1..], [arr3, f32t, v3], "{:?}", st.1);
        // The natural OpenCL layout matches, so no CPacked.
        assert!(!insts
            .iter()
            .any(|(o, v)| *o == Op::Decorate as u32 && v[1] == spirv::Decoration::CPacked as u32));
        // Loads of `p` rebuild a vector from the three scalars, inserted into an undefined
        // vector one by one (no `OpCompositeConstruct`, which old LLVM translators refuse).
        assert!(has(&insts, Op::CompositeInsert) && has(&insts, Op::Undef));
        assert!(!has(&insts, Op::CompositeConstruct));
    }

    #[test]
    fn padding_members_hold_wgsl_offsets() {
        let source = r#"
            struct Params { n: u32, v: vec3<f32> }
            var<immediate> params: Params;
            @group(0) @binding(0) var<storage, read_write> out: array<f32>;
            @compute @workgroup_size(1)
            fn pad() { out[0] = params.v.x + f32(params.n); }
        "#;
        let insts = emit(source);
        let st = insts.iter().find(|(o, _)| *o == Op::TypeStruct as u32).expect("struct");
        // u32, 12 bytes of padding (array<u32, 3>), then the vec3 (16 bytes: WGSL's 32).
        assert_eq!(st.1.len(), 4, "{:?}", st.1);
        // The scalar block is passed by value.
        assert!(insts.iter().any(|(o, v)| *o == Op::Decorate as u32
            && v[1] == spirv::Decoration::FuncParamAttr as u32
            && v[2] == spirv::FunctionParameterAttribute::ByVal as u32));
    }

    #[test]
    fn integer_division_and_shifts_have_no_undefined_results() {
        let source = r#"
            @group(0) @binding(0) var<storage, read_write> data: array<i32>;
            @group(0) @binding(1) var<storage, read_write> floats: array<f32>;
            @compute @workgroup_size(1)
            fn arith(@builtin(global_invocation_id) id: vec3<u32>) {
                let a = data[id.x];
                let b = data[id.x + 1u];
                data[0] = a / b;
                data[1] = a % b;
                data[2] = a << u32(b);
                data[3] = i32(floats[0]);
            }
        "#;
        let insts = emit(source);
        // The divisor goes through a select (0, or -1 under MIN, become 1).
        assert!(has(&insts, Op::SDiv) && has(&insts, Op::SRem));
        assert!(count(&insts, Op::Select) >= 3);
        // Shift amounts are masked with 31.
        assert!(has(&insts, Op::BitwiseAnd) && has(&insts, Op::ShiftLeftLogical));
        // Saturating conversion: clamped with fmax/fmin, NaN tested.
        assert!(has(&insts, Op::IsNan) && has(&insts, Op::ConvertFToS));
        let i32_max_f32 = 2_147_483_520f32.to_bits();
        assert!(insts
            .iter()
            .any(|(o, v)| *o == Op::Constant as u32 && v.len() == 3 && v[2] == i32_max_f32));
    }

    #[test]
    fn workgroup_memory_is_zeroed_then_a_barrier() {
        let source = include_str!("../../../../examples/kernels/reduce.wgsl");
        let k = parse_wgsl(source)
            .expect("parses")
            .to_spirv_kernel(None)
            .expect("emits");
        let insts = instructions(&k.words);
        assert!(insts
            .iter()
            .any(|(o, v)| *o == Op::Variable as u32 && v[2] == spirv::StorageClass::Workgroup as u32));
        assert!(has(&insts, Op::ControlBarrier));
        assert_eq!(k.entry_points[0].workgroup_bytes, 1024);
        assert!(k.entry_points[0].barriers);
    }

    #[test]
    fn the_pack_family_is_written_in_integer_arithmetic_without_contraction() {
        let source = r#"
            @group(0) @binding(0) var<storage, read_write> d: array<u32>;
            @compute @workgroup_size(1)
            fn packs() {
                let v = bitcast<vec4<f32>>(vec4<u32>(d[0], d[1], d[2], d[3]));
                d[4] = pack4x8snorm(v) ^ pack2x16float(v.xy) ^ pack4xI8Clamp(vec4<i32>(v));
                d[5] = bitcast<u32>(quantizeToF16(v.x)) ^ bitcast<u32>(unpack2x16float(d[6]).y);
                d[7] = dot4U8Packed(d[8], d[9]) ^ bitcast<u32>(dot4I8Packed(d[8], d[9]));
            }
        "#;
        let insts = emit(source);
        // No half type, no device conversion: the binary16 bits are worked out in u32s.
        assert!(!insts.iter().any(|(o, v)| *o == Op::TypeFloat as u32 && v[1] == 16));
        assert!(has(&insts, Op::IsNan) && has(&insts, Op::ShiftRightArithmetic));
        assert!(count(&insts, Op::Select) >= 10);
        let modes: Vec<u32> = insts
            .iter()
            .filter(|(o, _)| *o == Op::ExecutionMode as u32)
            .map(|(_, v)| v[1])
            .collect();
        assert!(
            modes.contains(&(spirv::ExecutionMode::ContractionOff as u32)),
            "{modes:?}"
        );
    }

    #[test]
    fn functions_get_workgroup_variables_by_pointer() {
        let source = r#"
            @group(0) @binding(0) var<storage, read_write> d: array<u32>;
            var<workgroup> lanes: array<u32, 8>;
            fn read_lane(i: u32) -> u32 { return lanes[i]; }
            @compute @workgroup_size(8)
            fn main(@builtin(local_invocation_index) i: u32) {
                lanes[i] = i;
                workgroupBarrier();
                d[i] = read_lane(7u - i);
            }
        "#;
        let insts = emit(source);
        let workgroup_ptrs: Vec<u32> = insts
            .iter()
            .filter(|(o, v)| *o == Op::TypePointer as u32 && v[1] == spirv::StorageClass::Workgroup as u32)
            .map(|(_, v)| v[0])
            .collect();
        // The helper's first parameter is a Workgroup pointer (to the array).
        let params: Vec<u32> = insts
            .iter()
            .filter(|(o, _)| *o == Op::FunctionParameter as u32)
            .map(|(_, v)| v[0])
            .collect();
        assert!(params.iter().any(|t| workgroup_ptrs.contains(t)), "{params:?}");
    }

    #[test]
    fn refused_features_name_themselves_and_the_place() {
        let source = "enable f16;\n@group(0) @binding(0) var<storage, read_write> d: array<f32>;\n\
                      @compute @workgroup_size(1)\nfn half() { d[0] = f32(f16(d[1]) * 2.0h); }\n";
        let e = parse_wgsl(source)
            .expect("parses")
            .to_spirv_kernel(None)
            .expect_err("f16 refused");
        assert_eq!(e.kind(), KernelErrorKind::Unsupported);
        assert!(
            e.message().contains("f16") && e.message().contains("Kernel SPIR-V"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn atomics_on_64_bit_integers_declare_int64_atomics() {
        let source = "@group(0) @binding(0) var<storage, read_write> c: array<atomic<u64>, 2>;\n\
                      @group(0) @binding(1) var<storage, read_write> s: atomic<i64>;\n\
                      @compute @workgroup_size(1)\nfn add() {\n\
                      atomicAdd(&c[0], 1lu); atomicMax(&c[1], atomicLoad(&c[0]));\n\
                      atomicMin(&s, -1li); atomicStore(&c[0], 7lu); }\n";
        let insts = emit(source);
        let caps: Vec<u32> = insts
            .iter()
            .filter(|(o, _)| *o == Op::Capability as u32)
            .map(|(_, v)| v[0])
            .collect();
        assert!(caps.contains(&(spirv::Capability::Int64Atomics as u32)), "{caps:?}");
        assert!(has(&insts, Op::AtomicIAdd) && has(&insts, Op::AtomicUMax) && has(&insts, Op::AtomicSMin));
        assert!(has(&insts, Op::AtomicLoad) && has(&insts, Op::AtomicStore));
        // 32-bit atomics alone do not declare it.
        let narrow = emit(
            "@group(0) @binding(0) var<storage, read_write> c: atomic<u32>;\n\
             @compute @workgroup_size(1)\nfn add() { atomicAdd(&c, 1u); }\n",
        );
        assert!(!narrow
            .iter()
            .any(|(o, v)| *o == Op::Capability as u32 && v[0] == spirv::Capability::Int64Atomics as u32));
    }

    #[test]
    fn one_entry_point_or_all() {
        let source = "@group(0) @binding(0) var<storage, read_write> d: array<u32>;\n\
                      @compute @workgroup_size(1)\nfn main() { d[0] = 1u; }\n\
                      @compute @workgroup_size(2)\nfn other() { d[1] = 2u; }\n";
        let module = parse_wgsl(source).expect("parses");
        let all = module.to_spirv_kernel(None).expect("emits");
        assert_eq!(all.entry_points.len(), 2);
        assert_eq!(all.entry_points[0].symbol, "main_");
        let one = module.to_spirv_kernel(Some("other")).expect("emits");
        assert_eq!(one.entry_points.len(), 1);
        let e = module.to_spirv_kernel(Some("nope")).expect_err("no such entry point");
        assert_eq!(e.kind(), KernelErrorKind::NotFound);
    }
}

//! Reading a kernel's signature: which buffers (storage or uniform), push constants and
//! workgroup memory each entry point of a SPIR-V module uses, against the xhal argument ABI.

use ash::vk;
use std::collections::HashMap;
use xhal_backend::{Error, Result};

/// SPIR-V's magic number, the first word of every module.
const SPIRV_MAGIC: u32 = 0x0723_0203;
/// Stack for naga's SPIR-V reader, which recurses over nested control flow.
const REFLECTION_STACK: usize = 64 << 20;

/// How a buffer argument is bound: which descriptor type its binding needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindingKind {
    /// A `StorageBuffer` block (or a legacy `Uniform` + `BufferBlock` one).
    Storage,
    /// A `Uniform` + `Block` block: a `var<uniform>` kept as such.
    Uniform,
}

impl BindingKind {
    pub(crate) fn descriptor_type(self) -> vk::DescriptorType {
        match self {
            BindingKind::Storage => vk::DescriptorType::STORAGE_BUFFER,
            BindingKind::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
        }
    }
}

/// What a launch of one entry point needs.
#[derive(Debug, Clone)]
pub(crate) struct EntryLayout {
    pub(crate) name: String,
    pub(crate) workgroup_size: [u32; 3],
    /// Buffer arguments: binding `i` is argument `i`, bound as `bindings[i]`.
    pub(crate) bindings: Vec<BindingKind>,
    /// Bytes of the push-constant block (the scalar block), 0 when there is none.
    pub(crate) scalar_bytes: u32,
    pub(crate) workgroup_memory: u64,
}

/// The module's words, after checking that it is a whole number of little-endian words that
/// starts with the SPIR-V header.
pub(crate) fn spirv_words(code: &[u8]) -> Result<Vec<u32>> {
    if code.len() < 20 || !code.len().is_multiple_of(4) {
        return Err(Error::invalid_argument(format!(
            "invalid SPIR-V: {} bytes is not a whole number of 4-byte words holding at least the 5-word header",
            code.len()
        )));
    }
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    if words[0] != SPIRV_MAGIC {
        return Err(Error::invalid_argument(format!(
            "invalid SPIR-V: the first word is {:#010x}, not the magic number {SPIRV_MAGIC:#010x} (big-endian SPIR-V is not accepted)",
            words[0]
        )));
    }
    Ok(words)
}

/// Runs naga (which recurses over nested code and may panic on hostile input) on a helper
/// thread with a large stack, turning a panic into an error.
fn guarded<T: Send + 'static>(what: &str, work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let handle = std::thread::Builder::new()
        .name("xhal-vulkan-reflect".to_string())
        .stack_size(REFLECTION_STACK)
        .spawn(move || std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
        .map_err(|error| Error::internal(format!("cannot start a thread for {what}: {error}")))?;
    match handle.join() {
        Ok(Ok(result)) => result,
        _ => Err(Error::invalid_argument(format!(
            "{what} failed: naga panicked on this input"
        ))),
    }
}

/// Parses SPIR-V with naga's reader, which refuses malformed modules, and reflects every
/// compute entry point.
///
/// naga's IR validator is not run on the result: the reader's IR for valid SPIR-V (naga's own
/// output included) does not always satisfy it (integer-vector division helpers, workgroup
/// atomics), and the reader gives every function an expression for every global whether it
/// uses it or not. So which globals an entry point uses is read from the SPIR-V itself
/// ([`SpirvUses`]), and their sizes from naga's module.
pub(crate) fn reflect_spirv(code: &[u8]) -> Result<Vec<EntryLayout>> {
    let code = code.to_vec();
    guarded("reading SPIR-V", move || {
        let options = naga::front::spv::Options {
            adjust_coordinate_space: false,
            strict_capabilities: false,
            block_ctx_dump_prefix: None,
        };
        let module = naga::front::spv::parse_u8_slice(&code, &options)
            .map_err(|error| Error::invalid_argument(format!("invalid SPIR-V: {error}")))?;
        let uses = SpirvUses::read(&spirv_words(&code)?)?;
        reflect_naga(&module, &uses)
    })
}

/// What each entry point of a SPIR-V module uses, from its call graph.
#[derive(Debug, Default)]
struct SpirvUses {
    /// Per entry point name: the module-scope variables its functions reference.
    entry_points: HashMap<String, std::collections::HashSet<u32>>,
    /// Module-scope variables: storage class.
    variables: HashMap<u32, u32>,
    /// Module-scope variables: the type they point to.
    variable_types: HashMap<u32, u32>,
    /// Types decorated `BufferBlock`: storage buffers declared in the Uniform class.
    buffer_blocks: std::collections::HashSet<u32>,
    bindings: HashMap<u32, (Option<u32>, Option<u32>)>,
    names: HashMap<u32, String>,
}

mod spirv_op {
    pub(super) const NAME: u32 = 5;
    pub(super) const ENTRY_POINT: u32 = 15;
    pub(super) const FUNCTION: u32 = 54;
    pub(super) const FUNCTION_END: u32 = 56;
    pub(super) const FUNCTION_CALL: u32 = 57;
    pub(super) const TYPE_POINTER: u32 = 32;
    pub(super) const VARIABLE: u32 = 59;
    pub(super) const DECORATE: u32 = 71;
    pub(super) const DECORATION_BUFFER_BLOCK: u32 = 3;
    pub(super) const DECORATION_BINDING: u32 = 33;
    pub(super) const DECORATION_DESCRIPTOR_SET: u32 = 34;
    pub(super) const STORAGE_UNIFORM: u32 = 2;
    pub(super) const STORAGE_WORKGROUP: u32 = 4;
    pub(super) const STORAGE_PUSH_CONSTANT: u32 = 9;
    pub(super) const STORAGE_BUFFER: u32 = 12;
}

/// The operands of a function's instruction that can be a pointer to a module-scope
/// variable: how a function uses one. Other operands are ids of values or literals, and a
/// literal (an `OpSwitch` case, an `OpCompositeExtract` index) can equal a variable's id.
fn pointer_operands(opcode: u32, operands: &[u32]) -> &[u32] {
    let from = |start: usize| operands.get(start..).unwrap_or(&[]);
    let at = |index: usize| operands.get(index..index + 1).unwrap_or(&[]);
    match opcode {
        // OpLoad, the access chains, OpArrayLength, OpCopyObject, OpBitcast,
        // OpConvertPtrToU, and the atomics but OpAtomicStore: result type, result, pointer.
        61 | 65 | 66 | 67 | 68 | 70 | 83 | 117 | 124 | 227 | 229..=242 | 5614 | 5615 | 6035 => at(2),
        // OpStore and OpAtomicStore: the pointer first.
        62 | 228 => at(0),
        // OpCopyMemory and OpCopyMemorySized: target and source.
        63 | 64 => operands.get(..2).unwrap_or(&[]),
        // OpFunctionCall: its arguments; OpPtrEqual, OpPtrNotEqual, OpPtrDiff: both pointers.
        57 => from(3),
        401..=403 => operands.get(2..4).unwrap_or(&[]),
        // OpSelect of pointers: both values; OpPhi: (value, block) pairs.
        169 => operands.get(3..5).unwrap_or(&[]),
        245 => from(2),
        _ => &[],
    }
}

/// A SPIR-V literal string: UTF-8 bytes packed little-endian into words, NUL-terminated.
fn spirv_string(words: &[u32]) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    let end = bytes.iter().position(|&byte| byte == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl SpirvUses {
    fn read(words: &[u32]) -> Result<SpirvUses> {
        let malformed = || Error::invalid_argument("invalid SPIR-V: an instruction runs past the end of the module");
        let mut uses = SpirvUses::default();
        let mut entry_functions: Vec<(String, u32)> = Vec::new();
        // Per function id: the ids its instructions mention, and the functions it calls.
        let mut functions: HashMap<u32, (Vec<u32>, Vec<u32>)> = HashMap::new();
        let mut current: Option<u32> = None;
        // Pointer type id to the type it points to.
        let mut pointees: HashMap<u32, u32> = HashMap::new();
        let mut variable_pointers: HashMap<u32, u32> = HashMap::new();
        let mut at = 5;
        while at < words.len() {
            let count = (words[at] >> 16) as usize;
            if count == 0 || at + count > words.len() {
                return Err(malformed());
            }
            let opcode = words[at] & 0xffff;
            let operands = &words[at + 1..at + count];
            match (opcode, current) {
                (spirv_op::FUNCTION, _) if operands.len() >= 2 => {
                    current = Some(operands[1]);
                    functions.entry(operands[1]).or_default();
                }
                (spirv_op::FUNCTION_END, _) => current = None,
                (_, Some(function)) => {
                    let entry = functions.entry(function).or_default();
                    if opcode == spirv_op::FUNCTION_CALL && operands.len() >= 3 {
                        entry.1.push(operands[2]);
                    }
                    entry.0.extend_from_slice(pointer_operands(opcode, operands));
                }
                (spirv_op::ENTRY_POINT, None) if operands.len() >= 3 => {
                    entry_functions.push((spirv_string(&operands[2..]), operands[1]));
                }
                (spirv_op::NAME, None) if operands.len() >= 2 => {
                    uses.names.insert(operands[0], spirv_string(&operands[1..]));
                }
                (spirv_op::TYPE_POINTER, None) if operands.len() >= 3 => {
                    pointees.insert(operands[0], operands[2]);
                }
                (spirv_op::VARIABLE, None) if operands.len() >= 3 => {
                    uses.variables.insert(operands[1], operands[2]);
                    variable_pointers.insert(operands[1], operands[0]);
                }
                (spirv_op::DECORATE, None)
                    if operands.len() == 2 && operands[1] == spirv_op::DECORATION_BUFFER_BLOCK =>
                {
                    uses.buffer_blocks.insert(operands[0]);
                }
                (spirv_op::DECORATE, None) if operands.len() >= 3 => {
                    let binding = uses.bindings.entry(operands[0]).or_default();
                    match operands[1] {
                        spirv_op::DECORATION_DESCRIPTOR_SET => binding.0 = Some(operands[2]),
                        spirv_op::DECORATION_BINDING => binding.1 = Some(operands[2]),
                        _ => {}
                    }
                }
                _ => {}
            }
            at += count;
        }
        uses.variable_types = variable_pointers
            .into_iter()
            .filter_map(|(variable, pointer)| Some((variable, *pointees.get(&pointer)?)))
            .collect();
        for (name, function) in entry_functions {
            let mut used = std::collections::HashSet::new();
            let mut pending = vec![function];
            let mut visited = std::collections::HashSet::new();
            while let Some(next) = pending.pop() {
                if !visited.insert(next) {
                    continue;
                }
                if let Some((mentioned, callees)) = functions.get(&next) {
                    used.extend(mentioned.iter().filter(|id| uses.variables.contains_key(id)));
                    pending.extend(callees);
                }
            }
            uses.entry_points.insert(name, used);
        }
        Ok(uses)
    }

    /// Whether `variable` is a block decorated `BufferBlock`.
    fn is_buffer_block(&self, variable: u32) -> bool {
        self.variable_types
            .get(&variable)
            .is_some_and(|ty| self.buffer_blocks.contains(ty))
    }
}

fn reflect_naga(module: &naga::Module, uses: &SpirvUses) -> Result<Vec<EntryLayout>> {
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(module.to_ctx())
        .map_err(|error| Error::invalid_argument(format!("cannot lay out the module's types: {error}")))?;
    let mut scalar_bytes = 0;
    let mut workgroup_sizes: Vec<(Option<String>, u64, u64)> = Vec::new();
    for (_, variable) in module.global_variables.iter() {
        let layout = layouter[variable.ty];
        match variable.space {
            naga::AddressSpace::Immediate => scalar_bytes = scalar_bytes.max(layout.size),
            naga::AddressSpace::WorkGroup => workgroup_sizes.push((
                variable.name.clone(),
                u64::from(layout.size),
                u64::from(layout.alignment * 1u32),
            )),
            _ => {}
        }
    }
    let mut entries = Vec::new();
    for entry in module.entry_points.iter() {
        if entry.stage != naga::ShaderStage::Compute {
            continue;
        }
        let Some(used) = uses.entry_points.get(&entry.name) else {
            return Err(Error::invalid_argument(format!(
                "invalid SPIR-V: entry point `{}` has no OpEntryPoint",
                entry.name
            )));
        };
        let mut bindings: Vec<(u32, BindingKind)> = Vec::new();
        let mut uses_scalars = false;
        let mut workgroup_names = Vec::new();
        for &variable in used {
            let kind = match uses.variables[&variable] {
                spirv_op::STORAGE_BUFFER => BindingKind::Storage,
                // SPIR-V before 1.3 declares storage buffers in the Uniform class, marked
                // BufferBlock; a Block there is a uniform buffer.
                spirv_op::STORAGE_UNIFORM if uses.is_buffer_block(variable) => BindingKind::Storage,
                spirv_op::STORAGE_UNIFORM => BindingKind::Uniform,
                spirv_op::STORAGE_PUSH_CONSTANT => {
                    uses_scalars = true;
                    continue;
                }
                spirv_op::STORAGE_WORKGROUP => {
                    workgroup_names.push(uses.names.get(&variable).cloned());
                    continue;
                }
                _ => continue,
            };
            let what = match kind {
                BindingKind::Storage => "storage buffer",
                BindingKind::Uniform => "uniform buffer",
            };
            let (set, binding) = uses.bindings.get(&variable).copied().unwrap_or_default();
            let (Some(set), Some(binding)) = (set, binding) else {
                return Err(Error::invalid_argument(format!(
                    "entry point `{}` uses a {what} without a descriptor set and binding",
                    entry.name
                )));
            };
            if set != 0 {
                return Err(Error::invalid_argument(format!(
                    "entry point `{}` uses a {what} in descriptor set {set}; the xhal argument ABI puts buffer i at set 0, binding i",
                    entry.name
                )));
            }
            bindings.push((binding, kind));
        }
        bindings.sort_unstable_by_key(|&(binding, _)| binding);
        let numbers: Vec<u32> = bindings.iter().map(|&(binding, _)| binding).collect();
        let expected: Vec<u32> = (0..bindings.len() as u32).collect();
        if numbers != expected {
            return Err(Error::invalid_argument(format!(
                "entry point `{}` binds buffers {numbers:?}; the xhal argument ABI needs exactly bindings 0..{}",
                entry.name,
                bindings.len()
            )));
        }
        // Sized by name; should a used variable have no name naga kept, count every one.
        let all_named = workgroup_names.iter().all(|name| {
            name.as_ref()
                .is_some_and(|name| workgroup_sizes.iter().any(|(known, _, _)| known.as_ref() == Some(name)))
        });
        let mut workgroup_memory = 0u64;
        for (name, size, alignment) in &workgroup_sizes {
            if all_named && !workgroup_names.contains(name) {
                continue;
            }
            let alignment = (*alignment).max(1);
            workgroup_memory = workgroup_memory.div_ceil(alignment) * alignment + size;
        }
        entries.push(EntryLayout {
            name: entry.name.clone(),
            workgroup_size: entry.workgroup_size,
            bindings: bindings.into_iter().map(|(_, kind)| kind).collect(),
            scalar_bytes: if uses_scalars { scalar_bytes } else { 0 },
            workgroup_memory,
        });
    }
    Ok(entries)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A kernel with a scalar block, two storage buffers and workgroup memory.
    pub(crate) const SAXPY: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
var<workgroup> tile: array<f32, 64>;
@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    tile[lane] = x[id.x];
    workgroupBarrier();
    if id.x < params.n { y[id.x] = params.a * tile[lane] + y[id.x]; }
}
"#;

    pub(crate) fn saxpy_spirv() -> Vec<u8> {
        let words = xhal_kernel::parse_wgsl(SAXPY).unwrap().to_spirv().unwrap();
        words.iter().flat_map(|word| word.to_le_bytes()).collect()
    }

    #[test]
    fn spirv_reflection_matches_wgsl_reflection() {
        let entries = reflect_spirv(&saxpy_spirv()).unwrap();
        assert_eq!(entries.len(), 1);
        let entry = &entries[0];
        assert_eq!(entry.name, "saxpy");
        assert_eq!(entry.workgroup_size, [64, 1, 1]);
        assert_eq!(entry.bindings, [BindingKind::Storage; 2]);
        assert_eq!(entry.scalar_bytes, 8);
        assert_eq!(entry.workgroup_memory, 256);
    }

    #[test]
    fn each_entry_point_reflects_only_what_it_uses() {
        let source = r#"
var<immediate> scale: u32;
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
var<workgroup> big: array<u32, 512>;
var<workgroup> small: array<u32, 4>;
fn helper(i: u32) { b[i] = a[i] * scale + big[i % 512u]; }
@compute @workgroup_size(8) fn first(@builtin(global_invocation_id) id: vec3<u32>) { a[id.x] = small[id.x % 4u]; }
@compute @workgroup_size(16) fn second(@builtin(global_invocation_id) id: vec3<u32>) { helper(id.x); }
"#;
        let words = xhal_kernel::parse_wgsl(source).unwrap().to_spirv().unwrap();
        let bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
        let entries = reflect_spirv(&bytes).unwrap();
        let first = entries.iter().find(|entry| entry.name == "first").unwrap();
        let second = entries.iter().find(|entry| entry.name == "second").unwrap();
        assert_eq!(
            (first.bindings.len(), first.scalar_bytes, first.workgroup_memory),
            (1, 0, 16)
        );
        assert_eq!(
            (second.bindings.len(), second.scalar_bytes, second.workgroup_memory),
            (2, 4, 2048)
        );
        assert_eq!(second.workgroup_size, [16, 1, 1]);
    }

    #[test]
    fn literals_that_equal_a_variable_s_id_are_not_uses() {
        // A switch over many case values: some of its literals equal the ids of `other`, which
        // only `second` uses, and of the other variables. 64-bit types make naga number the
        // ids differently, as the PyTorch device's kernels do.
        let cases: String = (0..400u32)
            .map(|case| format!("case {case}u: {{ v = {case}lu; }}\n"))
            .collect();
        let source = format!(
            r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> input: array<f64>;
@group(0) @binding(2) var<uniform> other: vec4<u32>;
fn pick(k: u32) -> u64 {{
    var v = 0lu;
    switch k {{
{cases}        default: {{ v = 7lu; }}
    }}
    return v + u64(input[k]);
}}
@compute @workgroup_size(1) fn first(@builtin(global_invocation_id) id: vec3<u32>) {{ out[id.x] = u32(pick(id.x)); }}
@compute @workgroup_size(1) fn second(@builtin(global_invocation_id) id: vec3<u32>) {{ out[other.x] = u32(pick(id.x)); }}
"#
        );
        let words = xhal_kernel::parse_wgsl(&source).unwrap().to_spirv().unwrap();
        let entries = reflect_spirv(&bytes_of(&words)).unwrap();
        let first = entries.iter().find(|entry| entry.name == "first").unwrap();
        let second = entries.iter().find(|entry| entry.name == "second").unwrap();
        assert_eq!(first.bindings, [BindingKind::Storage; 2]);
        assert_eq!(second.bindings.len(), 3);
    }

    /// A `var<uniform>` between storage buffers, with gaps and a second group.
    const UNIFORM_BETWEEN_STORAGE: &str = r#"
struct Params { origin: vec3<f32>, count: u32, @align(16) weights: array<vec4<f32>, 2> }
@group(0) @binding(3) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> input: array<f32>;
@group(1) @binding(5) var<storage, read_write> output: array<f32>;
@compute @workgroup_size(8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.count { output[id.x] = input[id.x] * params.weights[id.x % 2u].x + params.origin.y; }
}
"#;

    fn bytes_of(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|word| word.to_le_bytes()).collect()
    }

    #[test]
    fn uniform_blocks_reflect_as_uniform_bindings() {
        let module = xhal_kernel::parse_wgsl(UNIFORM_BETWEEN_STORAGE).unwrap();
        let native = reflect_spirv(&bytes_of(&module.to_spirv_with(true).unwrap())).unwrap();
        // Arguments in (group, binding) order: input (0, 1), params (0, 3), output (1, 5).
        assert_eq!(
            native[0].bindings,
            [BindingKind::Storage, BindingKind::Uniform, BindingKind::Storage]
        );
        // The same kinds as xhal-kernel's own reflection, which the WGSL path uses.
        let spaces: Vec<BindingKind> = module.entry_points()[0]
            .buffers
            .iter()
            .map(|buffer| match buffer.space {
                xhal_kernel::BufferSpace::Storage => BindingKind::Storage,
                xhal_kernel::BufferSpace::Uniform => BindingKind::Uniform,
            })
            .collect();
        assert_eq!(native[0].bindings, spaces);
        // Lowered for devices without native uniforms, every binding is a storage buffer.
        let lowered = reflect_spirv(&bytes_of(&module.to_spirv_with(false).unwrap())).unwrap();
        assert_eq!(lowered[0].bindings, [BindingKind::Storage; 3]);
    }

    #[test]
    fn buffer_blocks_in_the_uniform_class_are_storage_buffers() {
        // SPIR-V before 1.3 (glslang's default for Vulkan 1.0) declares storage buffers as
        // Uniform-class blocks decorated BufferBlock. Rewrite naga's StorageBuffer blocks so.
        // (naga's reader takes runtime-sized arrays only in the StorageBuffer class.)
        let source = "@group(0) @binding(0) var<storage, read_write> data: array<u32, 4>;\n\
                      @compute @workgroup_size(1) fn main() { data[0] = 7u; }";
        let words = xhal_kernel::parse_wgsl(source).unwrap().to_spirv().unwrap();
        let mut legacy = words;
        let mut at = 5;
        let mut rewritten = 0;
        while at < legacy.len() {
            let count = (legacy[at] >> 16) as usize;
            let operands = at + 1..at + count;
            match legacy[at] & 0xffff {
                // `OpTypePointer %id Class %type`, `OpVariable %type %id Class`.
                opcode @ (spirv_op::TYPE_POINTER | spirv_op::VARIABLE) => {
                    let class = operands.start + if opcode == spirv_op::TYPE_POINTER { 1 } else { 2 };
                    if legacy[class] == spirv_op::STORAGE_BUFFER {
                        legacy[class] = spirv_op::STORAGE_UNIFORM;
                        rewritten += 1;
                    }
                }
                // `OpDecorate %struct Block` (decoration 2).
                spirv_op::DECORATE if count == 3 && legacy[operands.start + 1] == 2 => {
                    legacy[operands.start + 1] = spirv_op::DECORATION_BUFFER_BLOCK;
                    rewritten += 1;
                }
                _ => {}
            }
            at += count;
        }
        assert!(rewritten >= 3, "naga's output changed shape: {rewritten} rewrites");
        let entries = reflect_spirv(&bytes_of(&legacy)).unwrap();
        assert_eq!(entries[0].bindings, [BindingKind::Storage]);
    }

    #[test]
    fn invalid_spirv_is_an_invalid_argument() {
        for code in [vec![1u8, 2, 3], vec![0u8; 40], {
            let mut code = saxpy_spirv();
            code.truncate(code.len() / 2);
            code
        }] {
            let error = spirv_words(&code).and_then(|_| reflect_spirv(&code)).unwrap_err();
            assert_eq!(error.kind(), xhal_backend::ErrorKind::InvalidArgument, "{error}");
            assert!(error.message().contains("invalid SPIR-V"), "{error}");
        }
    }
}

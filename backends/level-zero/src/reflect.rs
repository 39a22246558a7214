//! Just enough of a SPIR-V reader to learn a kernel's parameters and workgroup size, which
//! Level Zero does not report: for each `OpEntryPoint Kernel`, its `OpExecutionMode
//! LocalSize` and the types of its `OpFunctionParameter`s, sized by OpenCL's layout rules.

use std::collections::{HashMap, HashSet};
use xhal_kernel::parameters::ParameterClass;

const MAGIC: u32 = 0x0723_0203;
const OP_NAME_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const OP_TYPE_BOOL: u32 = 20;
const OP_TYPE_INT: u32 = 21;
const OP_TYPE_FLOAT: u32 = 22;
const OP_TYPE_VECTOR: u32 = 23;
const OP_TYPE_ARRAY: u32 = 28;
const OP_TYPE_STRUCT: u32 = 30;
const OP_TYPE_POINTER: u32 = 32;
const OP_CONSTANT: u32 = 43;
const OP_FUNCTION: u32 = 54;
const OP_FUNCTION_PARAMETER: u32 = 55;
const OP_DECORATE: u32 = 71;
const EXECUTION_MODEL_KERNEL: u32 = 6;
const EXECUTION_MODE_LOCAL_SIZE: u32 = 17;
const STORAGE_CLASS_CROSS_WORKGROUP: u32 = 5;
const STORAGE_CLASS_FUNCTION: u32 = 7;
const DECORATION_CPACKED: u32 = 10;
const DECORATION_FUNC_PARAM_ATTR: u32 = 38;
const FUNC_PARAM_ATTR_BYVAL: u32 = 2;

/// How one kernel parameter is passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Parameter {
    /// A pointer to global memory: a buffer argument.
    Buffer,
    /// A value of this many bytes (a scalar, or an aggregate passed `ByVal`); `None` where
    /// the size is not known here.
    Value(Option<usize>),
    /// A `ByVal` struct holding one array of `n` 64-bit integers: the buffer-lengths
    /// parameter the Kernel SPIR-V writer adds.
    Lengths(usize),
    /// Anything else (a pointer to local or private memory).
    Other,
}

impl Parameter {
    /// What the argument ABI makes of it.
    pub(crate) fn class(&self) -> ParameterClass {
        match self {
            Parameter::Buffer => ParameterClass::Buffer,
            Parameter::Value(_) => ParameterClass::Value,
            Parameter::Lengths(_) => ParameterClass::Lengths,
            Parameter::Other => ParameterClass::Unpassable("a pointer to local or private memory"),
        }
    }

    /// What SPIR-V says of it, for messages (its parameters have no names there).
    pub(crate) fn describe(&self) -> String {
        match self {
            Parameter::Buffer => "(a global pointer)".to_string(),
            Parameter::Value(Some(size)) => format!("({size} bytes)"),
            Parameter::Value(None) => "(by value)".to_string(),
            Parameter::Lengths(count) => format!("({count} lengths)"),
            Parameter::Other => "(a pointer)".to_string(),
        }
    }
}

/// One entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntryPoint {
    pub(crate) name: String,
    pub(crate) workgroup_size: Option<[u32; 3]>,
    pub(crate) parameters: Vec<Parameter>,
}

#[derive(Debug, Clone)]
enum Type {
    Scalar(usize),
    Bool,
    Vector(u32, u32),
    Array(u32, u32),
    Struct(Vec<u32>),
    Pointer(u32, u32),
}

fn string(words: &[u32]) -> (String, usize) {
    let mut bytes = Vec::new();
    for (index, word) in words.iter().enumerate() {
        for byte in word.to_le_bytes() {
            if byte == 0 {
                return (String::from_utf8_lossy(&bytes).into_owned(), index + 1);
            }
            bytes.push(byte);
        }
    }
    (String::from_utf8_lossy(&bytes).into_owned(), words.len())
}

/// The entry points of a module, or `None` where the words are not SPIR-V this reader follows.
pub(crate) fn entry_points(code: &[u8]) -> Option<Vec<EntryPoint>> {
    if code.len() < 20 || !code.len().is_multiple_of(4) {
        return None;
    }
    let words: Vec<u32> = code
        .chunks_exact(4)
        .map(|chunk| u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect();
    if words[0] != MAGIC {
        return None;
    }
    let mut entries: Vec<(u32, String)> = Vec::new();
    let mut sizes: HashMap<u32, [u32; 3]> = HashMap::new();
    let mut types: HashMap<u32, Type> = HashMap::new();
    let mut constants: HashMap<u32, u64> = HashMap::new();
    let mut packed: HashSet<u32> = HashSet::new();
    let mut by_value: HashSet<u32> = HashSet::new();
    let mut functions: HashMap<u32, Vec<(u32, u32)>> = HashMap::new();
    let mut current: Option<u32> = None;
    let mut at = 5;
    while at < words.len() {
        let count = (words[at] >> 16) as usize;
        let opcode = words[at] & 0xffff;
        if count == 0 || at + count > words.len() {
            return None;
        }
        let operands = &words[at + 1..at + count];
        match (opcode, operands) {
            (OP_NAME_ENTRY_POINT, [model, function, rest @ ..]) if *model == EXECUTION_MODEL_KERNEL => {
                entries.push((*function, string(rest).0));
            }
            (OP_EXECUTION_MODE, [function, mode, x, y, z, ..]) if *mode == EXECUTION_MODE_LOCAL_SIZE => {
                sizes.insert(*function, [*x, *y, *z]);
            }
            (OP_TYPE_BOOL, [id]) => {
                types.insert(*id, Type::Bool);
            }
            (OP_TYPE_INT, [id, width, ..]) | (OP_TYPE_FLOAT, [id, width, ..]) => {
                types.insert(*id, Type::Scalar(*width as usize / 8));
            }
            (OP_TYPE_VECTOR, [id, component, lanes]) => {
                types.insert(*id, Type::Vector(*component, *lanes));
            }
            (OP_TYPE_ARRAY, [id, element, length]) => {
                types.insert(*id, Type::Array(*element, *length));
            }
            (OP_TYPE_STRUCT, [id, members @ ..]) => {
                types.insert(*id, Type::Struct(members.to_vec()));
            }
            (OP_TYPE_POINTER, [id, storage, pointee]) => {
                types.insert(*id, Type::Pointer(*storage, *pointee));
            }
            (OP_CONSTANT, [_type, id, low, rest @ ..]) => {
                let high = rest.first().copied().unwrap_or(0);
                constants.insert(*id, u64::from(*low) | (u64::from(high) << 32));
            }
            (OP_DECORATE, [id, decoration, ..]) if *decoration == DECORATION_CPACKED => {
                packed.insert(*id);
            }
            (OP_DECORATE, [id, decoration, attribute, ..])
                if *decoration == DECORATION_FUNC_PARAM_ATTR && *attribute == FUNC_PARAM_ATTR_BYVAL =>
            {
                by_value.insert(*id);
            }
            (OP_FUNCTION, [_result, id, ..]) => {
                current = Some(*id);
                functions.insert(*id, Vec::new());
            }
            (OP_FUNCTION_PARAMETER, [parameter_type, id]) => {
                if let Some(function) = current.and_then(|function| functions.get_mut(&function)) {
                    function.push((*parameter_type, *id));
                }
            }
            _ => current = None,
        }
        at += count;
    }
    let layout = Layouts {
        types: &types,
        constants: &constants,
        packed: &packed,
    };
    Some(
        entries
            .into_iter()
            .map(|(function, name)| {
                let parameters = functions
                    .get(&function)
                    .map(|parameters| {
                        parameters
                            .iter()
                            .map(|(parameter_type, id)| layout.classify(*parameter_type, by_value.contains(id)))
                            .collect()
                    })
                    .unwrap_or_default();
                EntryPoint {
                    name,
                    workgroup_size: sizes.get(&function).copied(),
                    parameters,
                }
            })
            .collect(),
    )
}

struct Layouts<'a> {
    types: &'a HashMap<u32, Type>,
    constants: &'a HashMap<u32, u64>,
    packed: &'a HashSet<u32>,
}

impl Layouts<'_> {
    fn classify(&self, parameter_type: u32, by_value: bool) -> Parameter {
        match self.types.get(&parameter_type) {
            Some(Type::Pointer(STORAGE_CLASS_CROSS_WORKGROUP, _)) => Parameter::Buffer,
            Some(Type::Pointer(STORAGE_CLASS_FUNCTION, pointee)) if by_value => {
                if let Some(Type::Struct(members)) = self.types.get(pointee) {
                    if let [member] = members.as_slice() {
                        if let Some(Type::Array(element, length)) = self.types.get(member) {
                            if matches!(self.types.get(element), Some(Type::Scalar(8))) {
                                if let Some(&length) = self.constants.get(length) {
                                    return Parameter::Lengths(length as usize);
                                }
                            }
                        }
                    }
                }
                Parameter::Value(self.layout(*pointee).map(|(size, _)| size))
            }
            Some(Type::Pointer(..)) => Parameter::Other,
            Some(_) => Parameter::Value(self.layout(parameter_type).map(|(size, _)| size)),
            None => Parameter::Value(None),
        }
    }

    /// Size and alignment under OpenCL C's rules: natural alignment, a 3-lane vector as 4,
    /// a `CPacked` struct without padding.
    fn layout(&self, id: u32) -> Option<(usize, usize)> {
        match self.types.get(&id)? {
            Type::Scalar(size) => Some((*size, (*size).max(1))),
            Type::Bool => None,
            Type::Vector(component, lanes) => {
                let (size, _) = self.layout(*component)?;
                let lanes = if *lanes == 3 { 4 } else { *lanes as usize };
                Some((size * lanes, size * lanes))
            }
            Type::Array(element, length) => {
                let (size, align) = self.layout(*element)?;
                let length = usize::try_from(*self.constants.get(length)?).ok()?;
                Some((size.checked_mul(length)?, align))
            }
            Type::Struct(members) => {
                let packed = self.packed.contains(&id);
                let (mut offset, mut align) = (0usize, 1usize);
                for member in members {
                    let (size, member_align) = self.layout(*member)?;
                    let member_align = if packed { 1 } else { member_align };
                    offset = offset.div_ceil(member_align) * member_align + size;
                    align = align.max(member_align);
                }
                Some((offset.div_ceil(align) * align, align))
            }
            Type::Pointer(..) => Some((8, 8)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(source: &str, entry: Option<&str>) -> Vec<u8> {
        xhal_kernel::parse_wgsl(source)
            .expect("parses")
            .to_spirv_kernel(entry)
            .expect("emits")
            .to_bytes()
    }

    #[test]
    fn saxpy_has_two_buffers_a_scalar_block_and_lengths() {
        let code = words(include_str!("../../../examples/kernels/saxpy.wgsl"), None);
        let entries = entry_points(&code).expect("SPIR-V");
        assert_eq!(entries.len(), 1);
        let saxpy = &entries[0];
        assert_eq!(saxpy.workgroup_size, Some([256, 1, 1]));
        assert_eq!(saxpy.parameters.len(), 4, "{:?}", saxpy.parameters);
        assert_eq!(saxpy.parameters[0], Parameter::Buffer);
        assert_eq!(saxpy.parameters[1], Parameter::Buffer);
        assert!(
            matches!(saxpy.parameters[2], Parameter::Value(Some(_))),
            "{:?}",
            saxpy.parameters
        );
        assert_eq!(saxpy.parameters[3], Parameter::Lengths(2));
    }

    #[test]
    fn scalar_blocks_are_sized_with_wgsl_offsets() {
        let source = r#"
            struct Params { n: u32, v: vec3<f32>, w: f32 }
            var<immediate> params: Params;
            @group(0) @binding(0) var<storage, read_write> out: array<f32, 4>;
            @compute @workgroup_size(8, 2, 1)
            fn main() { out[0] = params.v.x + f32(params.n) + params.w; }
        "#;
        let entries = entry_points(&words(source, None)).expect("SPIR-V");
        let main = &entries[0];
        assert_eq!(main.name, "main_");
        assert_eq!(main.workgroup_size, Some([8, 2, 1]));
        // WGSL: n at 0, v at 16 (12 bytes), w at 28: 32 bytes.
        assert_eq!(main.parameters, vec![Parameter::Buffer, Parameter::Value(Some(32))]);
    }

    #[test]
    fn a_single_scalar_is_passed_as_itself() {
        let source = r#"
            var<immediate> scale: f32;
            @group(0) @binding(0) var<storage, read_write> out: array<f32, 4>;
            @compute @workgroup_size(1)
            fn scaled() { out[0] = scale; }
        "#;
        let entries = entry_points(&words(source, None)).expect("SPIR-V");
        assert_eq!(
            entries[0].parameters,
            vec![Parameter::Buffer, Parameter::Value(Some(4))]
        );
    }

    #[test]
    fn not_spirv_is_none() {
        assert_eq!(entry_points(b"not spir-v at all, really"), None);
        assert_eq!(entry_points(&[0; 3]), None);
    }
}

//! Reflection from compiled code: the kernel descriptions an AMD GPU code object carries,
//! read host-side. A file of its own because it is a reader of two binary formats (ELF notes
//! and MessagePack, and clang offload bundles) that the rest of the backend never sees.
//!
//! HIP has no call that lists a kernel's parameters, but every code object the AMDGPU
//! compiler writes (code object v3 and later, as hiprtc and clang write for ROCm 5 to 7)
//! holds them: an ELF note named `AMDGPU` of type `NT_AMDGPU_METADATA` (32) whose payload is
//! a MessagePack map. Its `amdhsa.kernels` list gives each kernel's `.name`, `.symbol`,
//! `.args` (each with `.value_kind`, `.size`, `.offset` and, where the source language keeps
//! them, `.name` and `.type_name`), `.max_flat_workgroup_size` and, where the kernel declares
//! it, `.reqd_workgroup_size`. Arguments of a `hidden_*` kind are the runtime's own, placed
//! after the explicit ones; they are not parameters a launch passes.
//!
//! A clang offload bundle (`__CLANG_OFFLOAD_BUNDLE__`, what `hipcc --genco` writes for
//! several targets) is opened to the code object for the device's target.

/// One explicit kernel argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgumentMetadata {
    /// `.value_kind`: `global_buffer`, `by_value`, `dynamic_shared_pointer`...
    pub(crate) value_kind: String,
    /// `.size` in bytes.
    pub(crate) size: u64,
    /// `.name`, where the compiler kept it.
    pub(crate) name: Option<String>,
    /// `.type_name`, where the compiler kept it.
    pub(crate) type_name: Option<String>,
}

/// One kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KernelMetadata {
    pub(crate) name: String,
    pub(crate) arguments: Vec<ArgumentMetadata>,
    pub(crate) reqd_workgroup_size: Option<[u32; 3]>,
    pub(crate) max_flat_workgroup_size: Option<u32>,
}

const ELF_MAGIC: &[u8; 4] = b"\x7fELF";
const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const NT_AMDGPU_METADATA: u32 = 32;

/// Whether `code` looks like something `hipModuleLoadData` takes: an ELF code object or an
/// offload bundle.
pub(crate) fn is_code_object(code: &[u8]) -> bool {
    code.starts_with(ELF_MAGIC) || code.starts_with(BUNDLE_MAGIC)
}

/// The kernels `code` describes; `arch` picks the entry of an offload bundle. An error says
/// what could not be read.
pub(crate) fn kernels(code: &[u8], arch: Option<&str>) -> Result<Vec<KernelMetadata>, String> {
    let elf = if code.starts_with(BUNDLE_MAGIC) {
        bundle_entry(code, arch)?
    } else {
        code
    };
    let metadata = metadata_note(elf)?;
    let (value, _) = decode(metadata, 0).ok_or("the AMDGPU metadata note is not valid MessagePack")?;
    let kernels = value
        .get("amdhsa.kernels")
        .and_then(Value::as_array)
        .ok_or("the AMDGPU metadata has no amdhsa.kernels list (code object v2 or older is not read)")?;
    kernels.iter().map(kernel_metadata).collect()
}

fn kernel_metadata(kernel: &Value) -> Result<KernelMetadata, String> {
    let name = kernel
        .get(".name")
        .and_then(Value::as_str)
        .ok_or("a kernel in the AMDGPU metadata has no .name")?
        .to_string();
    let mut arguments = Vec::new();
    for argument in kernel.get(".args").and_then(Value::as_array).unwrap_or(&[]) {
        let value_kind = argument
            .get(".value_kind")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("an argument of kernel `{name}` has no .value_kind"))?;
        if value_kind.starts_with("hidden_") {
            continue;
        }
        arguments.push(ArgumentMetadata {
            value_kind: value_kind.to_string(),
            size: argument
                .get(".size")
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("an argument of kernel `{name}` has no .size"))?,
            name: argument.get(".name").and_then(Value::as_str).map(str::to_string),
            type_name: argument.get(".type_name").and_then(Value::as_str).map(str::to_string),
        });
    }
    let reqd_workgroup_size = kernel
        .get(".reqd_workgroup_size")
        .and_then(Value::as_array)
        .and_then(|sizes| {
            let sizes: Vec<u32> = sizes
                .iter()
                .filter_map(Value::as_u64)
                .filter_map(|size| u32::try_from(size).ok())
                .collect();
            <[u32; 3]>::try_from(sizes).ok()
        })
        .filter(|sizes| !sizes.contains(&0));
    let max_flat_workgroup_size = kernel
        .get(".max_flat_workgroup_size")
        .and_then(Value::as_u64)
        .and_then(|size| u32::try_from(size).ok());
    Ok(KernelMetadata {
        name,
        arguments,
        reqd_workgroup_size,
        max_flat_workgroup_size,
    })
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// The code object for `arch` in an offload bundle (or the only AMD GPU one).
fn bundle_entry<'a>(code: &'a [u8], arch: Option<&str>) -> Result<&'a [u8], String> {
    let count = read_u64(code, BUNDLE_MAGIC.len()).ok_or("the offload bundle is truncated")?;
    let mut at = BUNDLE_MAGIC.len() + 8;
    let mut candidates = Vec::new();
    for _ in 0..count.min(4096) {
        let (Some(offset), Some(size), Some(id_length)) =
            (read_u64(code, at), read_u64(code, at + 8), read_u64(code, at + 16))
        else {
            return Err("the offload bundle's entry table is truncated".to_string());
        };
        let id_start = at + 24;
        let id_end = id_start
            .checked_add(usize::try_from(id_length).map_err(|_| "an offload bundle id is too long")?)
            .ok_or("an offload bundle id is too long")?;
        let id = String::from_utf8_lossy(code.get(id_start..id_end).ok_or("an offload bundle id is truncated")?);
        at = id_end;
        let (Ok(offset), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
            continue;
        };
        if id.contains("amdgcn") && size > 0 {
            if let Some(entry) = offset.checked_add(size).and_then(|end| code.get(offset..end)) {
                candidates.push((id.into_owned(), entry));
            }
        }
    }
    let matching = arch.and_then(|arch| {
        candidates
            .iter()
            .find(|(id, _)| id.split(['-', ':']).any(|part| part == arch))
    });
    match (matching, candidates.as_slice()) {
        (Some((_, entry)), _) => Ok(entry),
        (None, [(_, entry)]) => Ok(entry),
        (None, []) => Err("the offload bundle holds no AMD GPU code object".to_string()),
        (None, many) => Err(format!(
            "the offload bundle holds code objects for {}, none for {}",
            many.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>().join(", "),
            arch.unwrap_or("this device (whose target is unknown)")
        )),
    }
}

/// The payload of the `AMDGPU` metadata note of a little-endian ELF64 file.
fn metadata_note(elf: &[u8]) -> Result<&[u8], String> {
    if !elf.starts_with(ELF_MAGIC) || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err("the code object is not a little-endian 64-bit ELF file".to_string());
    }
    let truncated = || "the code object's ELF headers are truncated".to_string();
    let mut regions = Vec::new();
    // Sections of type SHT_NOTE (7), then segments of type PT_NOTE (4).
    let section_offset = read_u64(elf, 0x28).ok_or_else(truncated)? as usize;
    let section_size = read_u16(elf, 0x3A).ok_or_else(truncated)? as usize;
    let section_count = read_u16(elf, 0x3C).ok_or_else(truncated)? as usize;
    for index in 0..section_count {
        let at = section_offset.saturating_add(index.saturating_mul(section_size));
        if read_u32(elf, at + 4) == Some(7) {
            if let (Some(offset), Some(size)) = (read_u64(elf, at + 0x18), read_u64(elf, at + 0x20)) {
                regions.push((offset, size));
            }
        }
    }
    let segment_offset = read_u64(elf, 0x20).ok_or_else(truncated)? as usize;
    let segment_size = read_u16(elf, 0x36).ok_or_else(truncated)? as usize;
    let segment_count = read_u16(elf, 0x38).ok_or_else(truncated)? as usize;
    for index in 0..segment_count {
        let at = segment_offset.saturating_add(index.saturating_mul(segment_size));
        if read_u32(elf, at) == Some(4) {
            if let (Some(offset), Some(size)) = (read_u64(elf, at + 8), read_u64(elf, at + 0x20)) {
                regions.push((offset, size));
            }
        }
    }
    for (offset, size) in regions {
        let (Ok(offset), Ok(size)) = (usize::try_from(offset), usize::try_from(size)) else {
            continue;
        };
        let Some(notes) = offset.checked_add(size).and_then(|end| elf.get(offset..end)) else {
            continue;
        };
        let mut at = 0;
        while let (Some(name_size), Some(payload_size), Some(kind)) =
            (read_u32(notes, at), read_u32(notes, at + 4), read_u32(notes, at + 8))
        {
            let name_start = at + 12;
            let payload_start = name_start + (name_size as usize).next_multiple_of(4);
            let payload_end = payload_start + payload_size as usize;
            let name = notes
                .get(name_start..name_start + name_size as usize)
                .unwrap_or_default();
            let name = name.strip_suffix(&[0]).unwrap_or(name);
            if kind == NT_AMDGPU_METADATA && name == b"AMDGPU" {
                return notes
                    .get(payload_start..payload_end)
                    .ok_or_else(|| "the AMDGPU metadata note is truncated".to_string());
            }
            at = payload_start + (payload_size as usize).next_multiple_of(4);
        }
    }
    Err("the code object has no AMDGPU metadata note".to_string())
}

/// A decoded MessagePack value (the subset the metadata uses, and the rest skipped as `Nil`).
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Nil,
    Bool(bool),
    Integer(i128),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(name, _)| name.as_str() == Some(key))
                .map(|(_, value)| value),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(text) => Some(text),
            _ => None,
        }
    }

    fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Integer(value) => u64::try_from(*value).ok(),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(values) => Some(values),
            _ => None,
        }
    }
}

/// Decodes the value at `at`; returns it and the offset after it. Nesting is bounded so a
/// hostile file cannot exhaust the stack.
fn decode(bytes: &[u8], at: usize) -> Option<(Value, usize)> {
    decode_nested(bytes, at, 0)
}

fn decode_nested(bytes: &[u8], at: usize, depth: u32) -> Option<(Value, usize)> {
    if depth > 64 {
        return None;
    }
    let marker = *bytes.get(at)?;
    let be = |start: usize, length: usize| -> Option<u64> {
        let slice = bytes.get(start..start + length)?;
        Some(slice.iter().fold(0u64, |value, byte| (value << 8) | u64::from(*byte)))
    };
    let text = |start: usize, length: usize| -> Option<(Value, usize)> {
        let slice = bytes.get(start..start.checked_add(length)?)?;
        Some((Value::Text(String::from_utf8_lossy(slice).into_owned()), start + length))
    };
    let binary = |start: usize, length: usize| -> Option<(Value, usize)> {
        let slice = bytes.get(start..start.checked_add(length)?)?;
        Some((Value::Bytes(slice.to_vec()), start + length))
    };
    let array = |start: usize, count: u64| -> Option<(Value, usize)> {
        let mut values = Vec::new();
        let mut next = start;
        for _ in 0..count {
            let (value, after) = decode_nested(bytes, next, depth + 1)?;
            values.push(value);
            next = after;
        }
        Some((Value::Array(values), next))
    };
    let map = |start: usize, count: u64| -> Option<(Value, usize)> {
        let mut entries = Vec::new();
        let mut next = start;
        for _ in 0..count {
            let (key, after_key) = decode_nested(bytes, next, depth + 1)?;
            let (value, after_value) = decode_nested(bytes, after_key, depth + 1)?;
            entries.push((key, value));
            next = after_value;
        }
        Some((Value::Map(entries), next))
    };
    let at1 = at + 1;
    match marker {
        0x00..=0x7f => Some((Value::Integer(i128::from(marker)), at1)),
        0x80..=0x8f => map(at1, u64::from(marker & 0x0f)),
        0x90..=0x9f => array(at1, u64::from(marker & 0x0f)),
        0xa0..=0xbf => text(at1, usize::from(marker & 0x1f)),
        0xc0 => Some((Value::Nil, at1)),
        0xc2 => Some((Value::Bool(false), at1)),
        0xc3 => Some((Value::Bool(true), at1)),
        0xc4 => binary(at1 + 1, be(at1, 1)? as usize),
        0xc5 => binary(at1 + 2, be(at1, 2)? as usize),
        0xc6 => binary(at1 + 4, be(at1, 4)? as usize),
        0xca => Some((Value::Float(f64::from(f32::from_bits(be(at1, 4)? as u32))), at1 + 4)),
        0xcb => Some((Value::Float(f64::from_bits(be(at1, 8)?)), at1 + 8)),
        0xcc => Some((Value::Integer(i128::from(be(at1, 1)?)), at1 + 1)),
        0xcd => Some((Value::Integer(i128::from(be(at1, 2)?)), at1 + 2)),
        0xce => Some((Value::Integer(i128::from(be(at1, 4)?)), at1 + 4)),
        0xcf => Some((Value::Integer(i128::from(be(at1, 8)?)), at1 + 8)),
        0xd0 => Some((Value::Integer(i128::from(be(at1, 1)? as u8 as i8)), at1 + 1)),
        0xd1 => Some((Value::Integer(i128::from(be(at1, 2)? as u16 as i16)), at1 + 2)),
        0xd2 => Some((Value::Integer(i128::from(be(at1, 4)? as u32 as i32)), at1 + 4)),
        0xd3 => Some((Value::Integer(i128::from(be(at1, 8)? as i64)), at1 + 8)),
        0xd9 => text(at1 + 1, be(at1, 1)? as usize),
        0xda => text(at1 + 2, be(at1, 2)? as usize),
        0xdb => text(at1 + 4, be(at1, 4)? as usize),
        0xdc => array(at1 + 2, be(at1, 2)?),
        0xdd => array(at1 + 4, be(at1, 4)?),
        0xde => map(at1 + 2, be(at1, 2)?),
        0xdf => map(at1 + 4, be(at1, 4)?),
        0xe0..=0xff => Some((Value::Integer(i128::from(marker as i8)), at1)),
        // Extension types: skipped.
        0xd4 => Some((Value::Nil, at1 + 2)),
        0xd5 => Some((Value::Nil, at1 + 3)),
        0xd6 => Some((Value::Nil, at1 + 5)),
        0xd7 => Some((Value::Nil, at1 + 9)),
        0xd8 => Some((Value::Nil, at1 + 17)),
        0xc7 => Some((Value::Nil, at1 + 2 + be(at1, 1)? as usize)),
        0xc8 => Some((Value::Nil, at1 + 3 + be(at1, 2)? as usize)),
        0xc9 => Some((Value::Nil, at1 + 5 + be(at1, 4)? as usize)),
        0xc1 => None,
    }
}

/// Builders of MessagePack and ELF notes for tests, in the shapes the AMDGPU compiler writes.
#[cfg(test)]
pub(crate) mod testing {
    /// A MessagePack string.
    pub(crate) fn text(value: &str) -> Vec<u8> {
        let mut out = Vec::new();
        if value.len() < 32 {
            out.push(0xa0 | value.len() as u8);
        } else {
            out.push(0xd9);
            out.push(value.len() as u8);
        }
        out.extend_from_slice(value.as_bytes());
        out
    }

    /// A MessagePack unsigned integer.
    pub(crate) fn integer(value: u64) -> Vec<u8> {
        if value < 128 {
            vec![value as u8]
        } else {
            let mut out = vec![0xcf];
            out.extend_from_slice(&value.to_be_bytes());
            out
        }
    }

    /// A MessagePack map of already-encoded entries.
    pub(crate) fn map(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
        let mut out = vec![0xde];
        out.extend_from_slice(&(entries.len() as u16).to_be_bytes());
        for (key, value) in entries {
            out.extend(text(key));
            out.extend_from_slice(value);
        }
        out
    }

    /// A MessagePack array of already-encoded values.
    pub(crate) fn array(values: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0xdc];
        out.extend_from_slice(&(values.len() as u16).to_be_bytes());
        for value in values {
            out.extend_from_slice(value);
        }
        out
    }

    /// A minimal little-endian ELF64 file whose one section is a note section holding an
    /// `AMDGPU` metadata note with `payload`.
    pub(crate) fn elf_with_metadata(payload: &[u8]) -> Vec<u8> {
        let mut note = Vec::new();
        note.extend_from_slice(&7u32.to_le_bytes());
        note.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        note.extend_from_slice(&32u32.to_le_bytes());
        note.extend_from_slice(b"AMDGPU\0\0");
        note.extend_from_slice(payload);
        while note.len() % 4 != 0 {
            note.push(0);
        }
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let note_offset = 64u64;
        let section_offset = 64 + note.len() as u64;
        elf[0x28..0x30].copy_from_slice(&section_offset.to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&1u16.to_le_bytes());
        elf.extend_from_slice(&note);
        let mut section = vec![0u8; 64];
        section[4..8].copy_from_slice(&7u32.to_le_bytes());
        section[0x18..0x20].copy_from_slice(&note_offset.to_le_bytes());
        section[0x20..0x28].copy_from_slice(&(note.len() as u64).to_le_bytes());
        elf.extend_from_slice(&section);
        elf
    }

    /// The metadata of one kernel: `arguments` as (value kind, size, name).
    pub(crate) fn kernel(name: &str, arguments: &[(&str, u64, Option<&str>)], reqd: Option<[u64; 3]>) -> Vec<u8> {
        let arguments: Vec<Vec<u8>> = arguments
            .iter()
            .map(|(kind, size, argument_name)| {
                let mut entries = vec![(".value_kind", text(kind)), (".size", integer(*size))];
                if let Some(argument_name) = argument_name {
                    entries.push((".name", text(argument_name)));
                }
                map(&entries)
            })
            .collect();
        let mut entries = vec![
            (".name", text(name)),
            (".symbol", text(&format!("{name}.kd"))),
            (".args", array(&arguments)),
            (".max_flat_workgroup_size", integer(1024)),
        ];
        if let Some(reqd) = reqd {
            entries.push((".reqd_workgroup_size", array(&reqd.map(integer))));
        }
        map(&entries)
    }

    /// A code object with `kernels` (each from [`kernel`]).
    pub(crate) fn code_object(kernels: &[Vec<u8>]) -> Vec<u8> {
        elf_with_metadata(&map(&[
            ("amdhsa.version", array(&[integer(1), integer(1)])),
            ("amdhsa.kernels", array(kernels)),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn kernels_and_explicit_arguments_are_read_from_the_metadata_note() {
        let code = code_object(&[
            kernel(
                "saxpy",
                &[
                    ("global_buffer", 8, Some("x")),
                    ("global_buffer", 8, None),
                    ("by_value", 8, None),
                    ("hidden_global_offset_x", 8, None),
                ],
                Some([64, 1, 1]),
            ),
            kernel("empty", &[], None),
        ]);
        assert!(is_code_object(&code));
        let kernels = kernels(&code, None).expect("reads");
        assert_eq!(kernels.len(), 2);
        assert_eq!(kernels[0].name, "saxpy");
        assert_eq!(kernels[0].arguments.len(), 3);
        assert_eq!(kernels[0].arguments[0].name.as_deref(), Some("x"));
        assert_eq!(kernels[0].arguments[2].value_kind, "by_value");
        assert_eq!(kernels[0].arguments[2].size, 8);
        assert_eq!(kernels[0].reqd_workgroup_size, Some([64, 1, 1]));
        assert_eq!(kernels[0].max_flat_workgroup_size, Some(1024));
        assert_eq!(kernels[1].arguments, vec![]);
        assert_eq!(kernels[1].reqd_workgroup_size, None);
    }

    #[test]
    fn bundles_are_opened_to_the_devices_target() {
        let first = code_object(&[kernel("for_gfx90a", &[], None)]);
        let second = code_object(&[kernel("for_gfx1100", &[], None)]);
        let ids = [
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
        ];
        let blobs: [&[u8]; 3] = [&[], &first, &second];
        let header = BUNDLE_MAGIC.len() + 8 + ids.iter().map(|id| 24 + id.len()).sum::<usize>();
        let mut bundle = BUNDLE_MAGIC.to_vec();
        bundle.extend_from_slice(&3u64.to_le_bytes());
        let mut offset = header;
        for (id, blob) in ids.iter().zip(blobs) {
            bundle.extend_from_slice(&(offset as u64).to_le_bytes());
            bundle.extend_from_slice(&(blob.len() as u64).to_le_bytes());
            bundle.extend_from_slice(&(id.len() as u64).to_le_bytes());
            bundle.extend_from_slice(id.as_bytes());
            offset += blob.len();
        }
        for blob in blobs {
            bundle.extend_from_slice(blob);
        }
        assert!(is_code_object(&bundle));
        assert_eq!(kernels(&bundle, Some("gfx1100")).expect("reads")[0].name, "for_gfx1100");
        assert_eq!(kernels(&bundle, Some("gfx90a")).expect("reads")[0].name, "for_gfx90a");
        let error = kernels(&bundle, Some("gfx942")).unwrap_err();
        assert!(error.contains("none for gfx942"), "{error}");
    }

    #[test]
    fn damaged_code_objects_are_errors_not_panics() {
        assert!(kernels(b"not an elf", None).is_err());
        let code = code_object(&[kernel("k", &[("by_value", 4, None)], None)]);
        for cut in [8, 40, 70, code.len() / 2, code.len() - 70] {
            let _ = kernels(&code[..cut], None);
        }
        let mut corrupt = code.clone();
        for byte in corrupt.iter_mut().skip(64).take(40) {
            *byte = 0xdf;
        }
        let _ = kernels(&corrupt, None);
        assert!(kernels(&elf_with_metadata(&[0xc1]), None).is_err());
        assert!(
            kernels(&elf_with_metadata(&map(&[("amdhsa.version", integer(1))])), None)
                .unwrap_err()
                .contains("amdhsa.kernels")
        );
    }

    #[test]
    fn messagepack_scalars_decode() {
        assert_eq!(decode(&[0xff], 0), Some((Value::Integer(-1), 1)));
        assert_eq!(decode(&[0xcd, 0x04, 0x00], 0), Some((Value::Integer(1024), 3)));
        assert_eq!(decode(&[0xd0, 0x80], 0), Some((Value::Integer(-128), 2)));
        assert_eq!(decode(&[0xc3], 0), Some((Value::Bool(true), 1)));
        assert_eq!(decode(&[0xa2, b'h', b'i'], 0), Some((Value::Text("hi".into()), 3)));
        assert_eq!(decode(&[0xc4, 1, 7], 0), Some((Value::Bytes(vec![7]), 3)));
        assert_eq!(decode(&[0xa5, b'h'], 0), None);
        let nested: Vec<u8> = std::iter::repeat_n(0x91u8, 100).collect();
        assert_eq!(decode(&nested, 0), None);
    }
}

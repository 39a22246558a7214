//! SPIR-V words: instructions, literal strings, and the module's sections in the order the
//! specification requires.

use std::collections::{BTreeSet, HashMap};

use spirv::Op;

/// Appends one instruction: its word count and opcode, then its operands.
pub(super) fn inst(out: &mut Vec<u32>, op: Op, operands: &[u32]) {
    let count = u32::try_from(operands.len() + 1).unwrap_or(u32::MAX);
    out.push((count << 16) | op as u32);
    out.extend_from_slice(operands);
}

/// A literal string: UTF-8 bytes, NUL-terminated, padded with NULs to whole words, each word
/// little-endian.
pub(super) fn string(text: &str) -> Vec<u32> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.push(0);
    while !bytes.len().is_multiple_of(4) {
        bytes.push(0);
    }
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The sections of a module, filled in any order and joined in the specification's order.
#[derive(Default)]
pub(super) struct Module {
    pub capabilities: BTreeSet<u32>,
    pub imports: Vec<u32>,
    pub entry_points: Vec<u32>,
    pub execution_modes: Vec<u32>,
    pub names: Vec<u32>,
    pub decorations: Vec<u32>,
    /// Types, constants and module-scope variables, in the order they were made (each after
    /// what it refers to).
    pub globals: Vec<u32>,
    pub functions: Vec<u32>,
    /// The last id handed out.
    pub bound: u32,
    /// Types and constants already made, by opcode and operands (without the result id).
    cache: HashMap<(u32, Vec<u32>), u32>,
}

impl Module {
    pub fn id(&mut self) -> u32 {
        self.bound += 1;
        self.bound
    }

    /// A type (`OpType*`), made once per distinct opcode and operands.
    pub fn ty(&mut self, op: Op, operands: &[u32]) -> u32 {
        if let Some(&id) = self.cache.get(&(op as u32, operands.to_vec())) {
            return id;
        }
        let id = self.id();
        let mut all = vec![id];
        all.extend_from_slice(operands);
        inst(&mut self.globals, op, &all);
        self.cache.insert((op as u32, operands.to_vec()), id);
        id
    }

    /// A constant (`OpConstant*`) of type `ty`, made once per distinct opcode, type and
    /// operands.
    pub fn constant(&mut self, op: Op, ty: u32, operands: &[u32]) -> u32 {
        let mut key = vec![ty];
        key.extend_from_slice(operands);
        // Tag constants apart from types that have the same operand words.
        let tag = 0x1_0000 | op as u32;
        if let Some(&id) = self.cache.get(&(tag, key.clone())) {
            return id;
        }
        let id = self.id();
        let mut all = vec![ty, id];
        all.extend_from_slice(operands);
        inst(&mut self.globals, op, &all);
        self.cache.insert((tag, key), id);
        id
    }

    /// The module's words: header, then every section in order.
    pub fn finish(self) -> Vec<u32> {
        // SPIR-V 1.0, which every OpenCL 2.1+/3.0 driver that takes IL and Level Zero accept.
        let mut out = vec![0x0723_0203, 0x0001_0000, 0, self.bound + 1, 0];
        for &capability in &self.capabilities {
            inst(&mut out, Op::Capability, &[capability]);
        }
        out.extend(&self.imports);
        inst(
            &mut out,
            Op::MemoryModel,
            &[
                spirv::AddressingModel::Physical64 as u32,
                spirv::MemoryModel::OpenCL as u32,
            ],
        );
        out.extend(&self.entry_points);
        out.extend(&self.execution_modes);
        out.extend(&self.names);
        out.extend(&self.decorations);
        out.extend(&self.globals);
        out.extend(&self.functions);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_nul_terminated_and_padded() {
        assert_eq!(string("abc"), vec![u32::from_le_bytes(*b"abc\0")]);
        assert_eq!(string("abcd"), vec![u32::from_le_bytes(*b"abcd"), 0]);
    }

    #[test]
    fn types_and_constants_are_made_once() {
        let mut m = Module::default();
        let a = m.ty(Op::TypeInt, &[32, 0]);
        let b = m.ty(Op::TypeInt, &[32, 0]);
        assert_eq!(a, b);
        let one = m.constant(Op::Constant, a, &[1]);
        assert_eq!(one, m.constant(Op::Constant, a, &[1]));
        assert_ne!(one, m.constant(Op::Constant, a, &[2]));
        // OpTypeInt 32 0 is four words: header, result id, width, signedness.
        assert_eq!(m.globals[0], (4 << 16) | Op::TypeInt as u32);
    }
}

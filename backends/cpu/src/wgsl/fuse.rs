//! Fuses neighbouring instructions of a compiled program where the first one's result has
//! no other reader: each fusion saves a dispatch and a pass over a register column.
//!
//! - `Index` + the `LoadShared` through it → `LoadSharedAt` (checked, then loaded in one pass);
//! - `MulF` + the `AddF` of its product → `Tern(MulAddF)` (still rounded twice);
//! - `Un`/`Bin`/`Tern` + the `StoreLane` of its result into a variable → `UnSet`/`BinSet`/
//!   `TernSet`, which compute straight into the variable.
//!
//! Only neighbours within one straight-line block fuse, so they run under the same lanes and
//! nothing runs between them.

use super::ops::{Bin32, Tern32};
use super::program::{Instr, Node, Operand, Reg};

/// Fuses the instructions of a program's prologue and body.
pub(super) fn fuse(prologue: &mut Vec<Instr>, body: &mut [Node]) {
    let mut uses = Uses(Vec::new());
    for instr in prologue.iter() {
        uses.instr(instr);
    }
    uses.nodes(body);
    fuse_code(prologue, &uses);
    fuse_nodes(body, &uses);
}

fn fuse_nodes(nodes: &mut [Node], uses: &Uses) {
    for node in nodes {
        match node {
            Node::Code(code) => fuse_code(code, uses),
            Node::If { accept, reject, .. } => {
                fuse_nodes(accept, uses);
                fuse_nodes(reject, uses);
            }
            Node::Loop { body, continuing, .. } => {
                fuse_nodes(body, uses);
                fuse_nodes(continuing, uses);
            }
            Node::Switch { cases, .. } => {
                for case in cases {
                    fuse_nodes(&mut case.body, uses);
                }
            }
            Node::Region(body) => fuse_nodes(body, uses),
            Node::Break | Node::Continue | Node::Return => {}
        }
    }
}

fn fuse_code(code: &mut Vec<Instr>, uses: &Uses) {
    let mut out: Vec<Instr> = Vec::with_capacity(code.len());
    for mut instr in code.drain(..) {
        while let Some(fused) = out.last().and_then(|last| fused(last, &instr, uses)) {
            out.pop();
            instr = fused;
        }
        out.push(instr);
    }
    *code = out;
}

/// The one instruction doing `first` then `second`, when `second` is the only reader of
/// `first`'s result and they fuse.
fn fused(first: &Instr, second: &Instr, uses: &Uses) -> Option<Instr> {
    let only = |reg: Reg| uses.count(reg) == 1;
    Some(match (first, second) {
        (
            Instr::Index { dst: t, at },
            Instr::LoadShared {
                dst,
                word,
                offset: Some(offset),
            },
        ) if offset == t && only(*t) => Instr::LoadSharedAt {
            dst: *dst,
            word: *word,
            at: *at,
        },
        (
            Instr::Bin {
                op: Bin32::MulF,
                dst: t,
                a,
                b,
            },
            Instr::Bin {
                op: Bin32::AddF,
                dst,
                a: x,
                b: y,
            },
        ) if (x == t) != (y == t) && only(*t) => Instr::Tern {
            op: Tern32::MulAddF,
            dst: *dst,
            a: *a,
            b: *b,
            c: if x == t { *y } else { *x },
        },
        (
            first,
            Instr::StoreLane {
                column,
                offset: None,
                src: Operand::Reg(src),
            },
        ) => match *first {
            Instr::Un { op, dst, a } if dst == *src && only(dst) => Instr::UnSet { op, column: *column, a },
            Instr::Bin { op, dst, a, b } if dst == *src && only(dst) => Instr::BinSet {
                op,
                column: *column,
                a,
                b,
            },
            Instr::Tern { op, dst, a, b, c } if dst == *src && only(dst) => Instr::TernSet {
                op,
                column: *column,
                a,
                b,
                c,
            },
            _ => return None,
        },
        _ => return None,
    })
}

/// How many times each register is read, by instructions and by control flow.
struct Uses(Vec<u32>);

impl Uses {
    fn count(&self, reg: Reg) -> u32 {
        self.0.get(reg as usize).copied().unwrap_or(0)
    }

    fn read(&mut self, reg: Reg) {
        let index = reg as usize;
        if index >= self.0.len() {
            self.0.resize(index + 1, 0);
        }
        if let Some(count) = self.0.get_mut(index) {
            *count = count.saturating_add(1);
        }
    }

    fn operand(&mut self, operand: Operand) {
        if let Operand::Reg(reg) = operand {
            self.read(reg);
        }
    }

    fn maybe(&mut self, reg: Option<Reg>) {
        if let Some(reg) = reg {
            self.read(reg);
        }
    }

    fn nodes(&mut self, nodes: &[Node]) {
        for node in nodes {
            match node {
                Node::Code(code) => {
                    for instr in code {
                        self.instr(instr);
                    }
                }
                Node::If {
                    condition,
                    accept,
                    reject,
                } => {
                    self.read(*condition);
                    self.nodes(accept);
                    self.nodes(reject);
                }
                Node::Loop {
                    body,
                    continuing,
                    break_if,
                } => {
                    self.nodes(body);
                    self.nodes(continuing);
                    self.maybe(*break_if);
                }
                Node::Switch { selector, cases } => {
                    self.read(*selector);
                    for case in cases {
                        self.nodes(&case.body);
                    }
                }
                Node::Region(body) => self.nodes(body),
                Node::Break | Node::Continue | Node::Return => {}
            }
        }
    }

    fn instr(&mut self, instr: &Instr) {
        match *instr {
            Instr::Un { a, .. } | Instr::UnSet { a, .. } => self.read(a),
            Instr::Bin { a, b, .. } | Instr::BinSet { a, b, .. } => {
                self.read(a);
                self.read(b);
            }
            Instr::Tern { a, b, c, .. } | Instr::TernSet { a, b, c, .. } => {
                self.read(a);
                self.read(b);
                self.read(c);
            }
            Instr::Lanes { ref args, .. } => {
                for arg in args.iter() {
                    self.maybe(*arg);
                }
            }
            Instr::Copy { src, .. } => self.read(src),
            Instr::Fill { .. } | Instr::ArrayLength { .. } => {}
            Instr::Set { src, .. } => self.operand(src),
            Instr::Pick { index, ref choices, .. } => {
                self.read(index);
                for choice in choices.iter() {
                    self.read(*choice);
                }
            }
            Instr::Index { at, .. } | Instr::LoadSharedAt { at, .. } => {
                self.maybe(at.base);
                self.read(at.index);
            }
            Instr::LoadLane { column, offset, .. } => {
                self.read(column);
                self.maybe(offset);
            }
            Instr::StoreLane { offset, src, .. } => {
                self.maybe(offset);
                self.operand(src);
            }
            Instr::LoadShared { offset, .. } | Instr::LoadHost { offset, .. } => self.maybe(offset),
            Instr::StoreShared { offset, src, .. } | Instr::StoreHost { offset, src, .. } => {
                self.maybe(offset);
                self.operand(src);
            }
            Instr::Atomic {
                offset, value, compare, ..
            } => {
                self.maybe(offset);
                self.read(value);
                self.maybe(compare);
            }
        }
    }
}

//! Compiling operators, conversions and the math built-ins to column instructions.
//!
//! Vector and matrix operations are split into scalar operations at compile time; a scalar
//! is one register (two for 64-bit types, which go through [`wide`]). `f16` values are held
//! as `f32` and every `f16` result is rounded back to `f16` (exact for the basic operations,
//! since `f32` has more than twice the precision).

use super::compile::{Compiler, FnCtx, Known, Val};
use super::ops::{self, Bin32, LaneFn, Tern32, Un32};
use super::program::{Instr, Reg};
use super::types::Num;
use super::wide;
use naga::{BinaryOperator, Expression, Handle, MathFunction, TypeInner};
use xhal_backend::{Error, Result};

/// A scalar: one register, or two (low, high) for 64-bit types.
type Scalar = Vec<Reg>;

fn unsupported(what: impl std::fmt::Display, num: Num) -> Error {
    Error::unsupported(format!("{what} on {num:?} operands"))
}

fn is_comparison(op: BinaryOperator) -> bool {
    use BinaryOperator as B;
    matches!(
        op,
        B::Equal | B::NotEqual | B::Less | B::LessEqual | B::Greater | B::GreaterEqual
    )
}

/// The 32-bit column operation for a binary operator on operands of type `num`.
fn bin32(op: BinaryOperator, num: Num) -> Option<Bin32> {
    use BinaryOperator as B;
    use Num::*;
    let float = matches!(num, F32 | F16);
    Some(match op {
        B::Add if float => Bin32::AddF,
        B::Subtract if float => Bin32::SubF,
        B::Multiply if float => Bin32::MulF,
        B::Divide if float => Bin32::DivF,
        B::Modulo if float => Bin32::RemF,
        B::Equal if float => Bin32::EqF,
        B::NotEqual if float => Bin32::NeF,
        B::Less if float => Bin32::LtF,
        B::LessEqual if float => Bin32::LeF,
        B::Greater if float => Bin32::GtF,
        B::GreaterEqual if float => Bin32::GeF,
        _ if float => return None,
        B::Add => Bin32::AddI,
        B::Subtract => Bin32::SubI,
        B::Multiply => Bin32::MulI,
        B::Divide if num == I32 => Bin32::DivI,
        B::Divide => Bin32::DivU,
        B::Modulo if num == I32 => Bin32::RemI,
        B::Modulo => Bin32::RemU,
        B::Equal => Bin32::Eq,
        B::NotEqual => Bin32::Ne,
        B::Less if num == I32 => Bin32::LtI,
        B::LessEqual if num == I32 => Bin32::LeI,
        B::Greater if num == I32 => Bin32::GtI,
        B::GreaterEqual if num == I32 => Bin32::GeI,
        B::Less => Bin32::LtU,
        B::LessEqual => Bin32::LeU,
        B::Greater => Bin32::GtU,
        B::GreaterEqual => Bin32::GeU,
        B::And | B::LogicalAnd => Bin32::And,
        B::InclusiveOr | B::LogicalOr => Bin32::Or,
        B::ExclusiveOr => Bin32::Xor,
        B::ShiftLeft => Bin32::Shl,
        B::ShiftRight if num == I32 => Bin32::ShrI,
        B::ShiftRight => Bin32::ShrU,
    })
}

/// How a component-wise math built-in is computed on 32-bit operands.
enum Math32 {
    Identity,
    Un(Un32),
    Bin(Bin32),
    Tern(Tern32),
    Lanes(LaneFn),
}

fn math32(fun: MathFunction, num: Num) -> Option<Math32> {
    use MathFunction as M;
    use Num::*;
    let float = matches!(num, F32 | F16);
    let signed = num == I32;
    let un = Math32::Un;
    Some(match fun {
        M::Abs if float => un(Un32::AbsF),
        M::Abs if signed => un(Un32::AbsI),
        M::Abs => Math32::Identity,
        M::Min if float => Math32::Bin(Bin32::MinF),
        M::Min if signed => Math32::Bin(Bin32::MinI),
        M::Min => Math32::Bin(Bin32::MinU),
        M::Max if float => Math32::Bin(Bin32::MaxF),
        M::Max if signed => Math32::Bin(Bin32::MaxI),
        M::Max => Math32::Bin(Bin32::MaxU),
        M::Clamp if float => Math32::Tern(Tern32::ClampF),
        M::Clamp if signed => Math32::Tern(Tern32::ClampI),
        M::Clamp => Math32::Tern(Tern32::ClampU),
        M::Sign if float => un(Un32::SignF),
        M::Sign if signed => un(Un32::SignI),
        M::CountTrailingZeros if !float => un(Un32::CountTrailingZeros),
        M::CountLeadingZeros if !float => un(Un32::CountLeadingZeros),
        M::CountOneBits if !float => un(Un32::CountOneBits),
        M::ReverseBits if !float => un(Un32::ReverseBits),
        M::FirstTrailingBit if !float => un(Un32::FirstTrailingBit),
        M::FirstLeadingBit if signed => un(Un32::FirstLeadingBitI),
        M::FirstLeadingBit if !float => un(Un32::FirstLeadingBitU),
        M::ExtractBits if signed => Math32::Tern(Tern32::ExtractBitsI),
        M::ExtractBits if !float => Math32::Tern(Tern32::ExtractBitsU),
        M::InsertBits if !float => Math32::Lanes(ops::insert_bits),
        _ if !float => return None,
        M::Saturate => un(Un32::Saturate),
        M::Cos => un(Un32::Cos),
        M::Cosh => un(Un32::Cosh),
        M::Sin => un(Un32::Sin),
        M::Sinh => un(Un32::Sinh),
        M::Tan => un(Un32::Tan),
        M::Tanh => un(Un32::Tanh),
        M::Acos => un(Un32::Acos),
        M::Asin => un(Un32::Asin),
        M::Atan => un(Un32::Atan),
        M::Atan2 => Math32::Bin(Bin32::Atan2),
        M::Asinh => un(Un32::Asinh),
        M::Acosh => un(Un32::Acosh),
        M::Atanh => un(Un32::Atanh),
        M::Radians => un(Un32::Radians),
        M::Degrees => un(Un32::Degrees),
        M::Ceil => un(Un32::Ceil),
        M::Floor => un(Un32::Floor),
        M::Round => un(Un32::Round),
        M::Fract => un(Un32::Fract),
        M::Trunc => un(Un32::Trunc),
        M::Ldexp => Math32::Bin(Bin32::Ldexp),
        M::Exp => un(Un32::Exp),
        M::Exp2 => un(Un32::Exp2),
        M::Log => un(Un32::Log),
        M::Log2 => un(Un32::Log2),
        M::Pow => Math32::Bin(Bin32::Pow),
        M::Fma => Math32::Tern(Tern32::Fma),
        M::Mix => Math32::Tern(Tern32::Mix),
        M::Step => Math32::Bin(Bin32::Step),
        M::SmoothStep => Math32::Tern(Tern32::SmoothStep),
        M::Sqrt => un(Un32::Sqrt),
        M::InverseSqrt => un(Un32::InverseSqrt),
        M::QuantizeToF16 => un(Un32::QuantizeF16),
        _ => return None,
    })
}

impl<'m> Compiler<'m> {
    // ---- instruction helpers ------------------------------------------------------------

    // A repeat of a computation whose result is still in a register reuses it: loops
    // recompute loop-invariant values like `local.y * TILE` on every iteration otherwise.

    pub(super) fn un(&mut self, op: Un32, a: Reg) -> Result<Reg> {
        let key = Known::Un(op, a);
        if let Some(reg) = self.known(&key) {
            return Ok(reg);
        }
        let dst = self.alloc()?;
        self.push(Instr::Un { op, dst, a })?;
        self.remember(key, dst, &[Some(a)]);
        Ok(dst)
    }

    pub(super) fn bin(&mut self, op: Bin32, a: Reg, b: Reg) -> Result<Reg> {
        // Unsigned division and remainder by a constant power of two are exactly a shift and
        // a mask; the hardware divide they replace runs lane by lane.
        let (op, b) = match (op, self.constant_value(b)) {
            (Bin32::DivU, Some(divisor)) if divisor.is_power_of_two() => {
                (Bin32::ShrU, self.constant(divisor.trailing_zeros())?)
            }
            (Bin32::RemU, Some(divisor)) if divisor.is_power_of_two() => (Bin32::And, self.constant(divisor - 1)?),
            _ => (op, b),
        };
        let key = Known::Bin(op, a, b);
        if let Some(reg) = self.known(&key) {
            return Ok(reg);
        }
        let dst = self.alloc()?;
        self.push(Instr::Bin { op, dst, a, b })?;
        self.remember(key, dst, &[Some(a), Some(b)]);
        Ok(dst)
    }

    pub(super) fn tern(&mut self, op: Tern32, a: Reg, b: Reg, c: Reg) -> Result<Reg> {
        let key = Known::Tern(op, a, b, c);
        if let Some(reg) = self.known(&key) {
            return Ok(reg);
        }
        let dst = self.alloc()?;
        self.push(Instr::Tern { op, dst, a, b, c })?;
        self.remember(key, dst, &[Some(a), Some(b), Some(c)]);
        Ok(dst)
    }

    /// A per-lane function call producing `outputs` words.
    fn lanes(&mut self, f: LaneFn, args: Vec<Option<Reg>>, outputs: usize) -> Result<Vec<Reg>> {
        let dst = self.alloc_n(outputs as u32)?;
        self.push(Instr::Lanes {
            f,
            args: args.into_boxed_slice(),
            dst: dst.iter().map(|reg| Some(*reg)).collect(),
        })?;
        Ok(dst)
    }

    /// Rounds an `f16` result held as `f32`.
    fn round_f16(&mut self, num: Num, reg: Reg) -> Result<Reg> {
        if num == Num::F16 {
            self.un(Un32::QuantizeF16, reg)
        } else {
            Ok(reg)
        }
    }

    /// The scalar type and scalar components of a value of type `ty`.
    fn components(&mut self, value: &Val, ty: &TypeInner) -> Result<(Num, Vec<Scalar>)> {
        let (num, count) = match *ty {
            TypeInner::Scalar(scalar) => (Num::of(scalar)?, 1),
            TypeInner::Vector { size, scalar } => (Num::of(scalar)?, size as usize),
            TypeInner::Matrix { columns, rows, scalar } => (Num::of(scalar)?, columns as usize * rows as usize),
            _ => {
                return Err(Error::internal(
                    "an operator on a composite that is not a vector or matrix",
                ))
            }
        };
        let regs = self.regs(value)?;
        let width = num.words() as usize;
        if regs.len() != count * width {
            return Err(Error::internal("a value's registers do not match its type"));
        }
        Ok((num, regs.chunks(width).map(<[Reg]>::to_vec).collect()))
    }

    fn operand(&mut self, f: &mut FnCtx<'m>, handle: Handle<Expression>) -> Result<(Num, Vec<Scalar>)> {
        let ty = self.ty(f, handle);
        let value = self.expr(f, handle)?;
        self.components(&value, ty)
    }

    // ---- scalar arithmetic --------------------------------------------------------------

    /// `a op b` on scalars of type `num` (for shifts `b` is a `u32`).
    fn scalar_binary(&mut self, op: BinaryOperator, num: Num, a: &[Reg], b: &[Reg]) -> Result<Scalar> {
        if num.is_wide() {
            let f = wide::binary(op, num).ok_or_else(|| unsupported(format!("{op:?}"), num))?;
            let args = wide_args(&[a, b]);
            return self.lanes(f, args, if is_comparison(op) { 1 } else { 2 });
        }
        let op32 = bin32(op, num).ok_or_else(|| unsupported(format!("{op:?}"), num))?;
        let (a, b) = (first(a)?, first(b)?);
        let dst = self.bin(op32, a, b)?;
        if is_comparison(op) {
            Ok(vec![dst])
        } else {
            Ok(vec![self.round_f16(num, dst)?])
        }
    }

    /// `Σ a[i] * b[i]`, multiplied and added left to right.
    fn dot(&mut self, num: Num, a: &[Scalar], b: &[Scalar]) -> Result<Scalar> {
        let mut sum: Option<Scalar> = None;
        for (x, y) in a.iter().zip(b) {
            let product = self.scalar_binary(BinaryOperator::Multiply, num, x, y)?;
            sum = Some(match sum {
                Some(sum) => self.scalar_binary(BinaryOperator::Add, num, &sum, &product)?,
                None => product,
            });
        }
        sum.ok_or_else(|| Error::internal("a dot product of empty vectors"))
    }

    fn constant_scalar(&mut self, num: Num, value: f64) -> Result<Scalar> {
        let words: Vec<u32> = match num {
            Num::F64 => {
                let bits = value.to_bits();
                vec![bits as u32, (bits >> 32) as u32]
            }
            _ => vec![(value as f32).to_bits()],
        };
        words.into_iter().map(|word| self.constant(word)).collect()
    }

    fn sqrt(&mut self, num: Num, x: &[Reg]) -> Result<Scalar> {
        self.component_math(MathFunction::Sqrt, num, &[x])
    }

    // ---- expressions --------------------------------------------------------------------

    pub(super) fn unary(
        &mut self,
        f: &mut FnCtx<'m>,
        _handle: Handle<Expression>,
        op: naga::UnaryOperator,
        expr: Handle<Expression>,
    ) -> Result<Val> {
        let (num, components) = self.operand(f, expr)?;
        let mut out = Vec::new();
        for component in components {
            let result = match (op, num.is_wide()) {
                (naga::UnaryOperator::LogicalNot, _) => vec![self.un(Un32::NotB, first(&component)?)?],
                // Bitwise not works word by word, whatever the width.
                (naga::UnaryOperator::BitwiseNot, _) => component
                    .iter()
                    .map(|reg| self.un(Un32::BitNot, *reg))
                    .collect::<Result<_>>()?,
                (naga::UnaryOperator::Negate, true) => {
                    let f = wide::unary(op, num).ok_or_else(|| unsupported("negation", num))?;
                    self.lanes(f, wide_args(&[&component]), 2)?
                }
                (naga::UnaryOperator::Negate, false) => {
                    let op = if num.is_float() { Un32::NegF } else { Un32::NegI };
                    vec![self.un(op, first(&component)?)?]
                }
            };
            out.extend(result);
        }
        Ok(Val::Regs(out))
    }

    pub(super) fn binary(
        &mut self,
        f: &mut FnCtx<'m>,
        _handle: Handle<Expression>,
        op: BinaryOperator,
        left: Handle<Expression>,
        right: Handle<Expression>,
    ) -> Result<Val> {
        let left_ty = self.ty(f, left);
        let right_ty = self.ty(f, right);
        let (num, a) = self.operand(f, left)?;
        let (_, b) = self.operand(f, right)?;
        let mut out = Vec::new();
        match (left_ty, right_ty, op) {
            (TypeInner::Matrix { columns, rows, .. }, TypeInner::Vector { .. }, BinaryOperator::Multiply) => {
                let (columns, rows) = (*columns as usize, *rows as usize);
                for r in 0..rows {
                    let row = (0..columns).map(|c| at(&a, c * rows + r)).collect::<Result<Vec<_>>>()?;
                    out.extend(self.dot(num, &row, &b)?);
                }
            }
            (TypeInner::Vector { .. }, TypeInner::Matrix { columns, rows, .. }, BinaryOperator::Multiply) => {
                let (columns, rows) = (*columns as usize, *rows as usize);
                for c in 0..columns {
                    out.extend(self.dot(num, &a, span(&b, c * rows, rows)?)?);
                }
            }
            (
                TypeInner::Matrix {
                    columns: inner, rows, ..
                },
                TypeInner::Matrix { columns, .. },
                BinaryOperator::Multiply,
            ) => {
                let (inner, rows, columns) = (*inner as usize, *rows as usize, *columns as usize);
                for c in 0..columns {
                    for r in 0..rows {
                        let row = (0..inner).map(|k| at(&a, k * rows + r)).collect::<Result<Vec<_>>>()?;
                        out.extend(self.dot(num, &row, span(&b, c * inner, inner)?)?);
                    }
                }
            }
            _ => {
                let count = a.len().max(b.len());
                for i in 0..count {
                    let x = a.get(if a.len() == 1 { 0 } else { i });
                    let y = b.get(if b.len() == 1 { 0 } else { i });
                    let (Some(x), Some(y)) = (x, y) else {
                        return Err(Error::internal("operands of different sizes"));
                    };
                    out.extend(self.scalar_binary(op, num, x, y)?);
                }
            }
        }
        Ok(Val::Regs(out))
    }

    pub(super) fn select(
        &mut self,
        f: &mut FnCtx<'m>,
        condition: Handle<Expression>,
        accept: Handle<Expression>,
        reject: Handle<Expression>,
    ) -> Result<Val> {
        let width = match *self.ty(f, accept) {
            TypeInner::Scalar(scalar) | TypeInner::Vector { scalar, .. } => Num::of(scalar)?.words() as usize,
            _ => 1,
        };
        let per_component = matches!(*self.ty(f, condition), TypeInner::Vector { .. });
        let condition = self.expr(f, condition)?;
        let condition = self.regs(&condition)?;
        let accept = self.expr(f, accept)?;
        let accept = self.regs(&accept)?;
        let reject = self.expr(f, reject)?;
        let reject = self.regs(&reject)?;
        let mut out = Vec::with_capacity(accept.len());
        for (k, (a, r)) in accept.iter().zip(&reject).enumerate() {
            let c = if per_component { k / width } else { 0 };
            let c = *condition
                .get(c)
                .ok_or_else(|| Error::internal("a select condition too short"))?;
            out.push(self.tern(Tern32::Select, c, *a, *r)?);
        }
        Ok(Val::Regs(out))
    }

    pub(super) fn relational(
        &mut self,
        f: &mut FnCtx<'m>,
        fun: naga::RelationalFunction,
        argument: Handle<Expression>,
    ) -> Result<Val> {
        let (num, components) = self.operand(f, argument)?;
        let mut out = Vec::new();
        match fun {
            naga::RelationalFunction::All | naga::RelationalFunction::Any => {
                let op = if fun == naga::RelationalFunction::All {
                    Bin32::And
                } else {
                    Bin32::Or
                };
                let mut acc = first(components.first().map(Vec::as_slice).unwrap_or_default())?;
                for component in components.iter().skip(1) {
                    acc = self.bin(op, acc, first(component)?)?;
                }
                out.push(acc);
            }
            naga::RelationalFunction::IsNan | naga::RelationalFunction::IsInf => {
                for component in components {
                    if num.is_wide() {
                        let f = wide::relational(fun).ok_or_else(|| unsupported(format!("{fun:?}"), num))?;
                        out.extend(self.lanes(f, wide_args(&[&component]), 1)?);
                    } else {
                        let op = if fun == naga::RelationalFunction::IsNan {
                            Un32::IsNan
                        } else {
                            Un32::IsInf
                        };
                        out.push(self.un(op, first(&component)?)?);
                    }
                }
            }
        }
        Ok(Val::Regs(out))
    }

    pub(super) fn convert(
        &mut self,
        f: &mut FnCtx<'m>,
        _handle: Handle<Expression>,
        expr: Handle<Expression>,
        kind: naga::ScalarKind,
        convert: Option<u8>,
    ) -> Result<Val> {
        let ty = self.ty(f, expr);
        let value = self.expr(f, expr)?;
        let (from, components) = self.components(&value, ty)?;
        let Some(width) = convert else {
            // A bitcast between types of one width: the bits are the value.
            let to = Num::of(naga::Scalar {
                kind,
                width: from.host_bytes() as u8,
            })?;
            if (from == Num::F16) != (to == Num::F16) {
                return Err(Error::unsupported("bitcasts to or from f16"));
            }
            return Ok(value);
        };
        let to = Num::of(naga::Scalar { kind, width })?;
        let mut out = Vec::new();
        for component in components {
            out.extend(self.convert_scalar(from, to, &component)?);
        }
        Ok(Val::Regs(out))
    }

    fn convert_scalar(&mut self, from: Num, to: Num, value: &[Reg]) -> Result<Scalar> {
        use Num::*;
        if from == to {
            return Ok(value.to_vec());
        }
        if from.is_wide() || to.is_wide() {
            let f = wide::convert(from, to)
                .ok_or_else(|| Error::unsupported(format!("conversion from {from:?} to {to:?}")))?;
            let mut out = self.lanes(f, wide_args(&[value]), to.words() as usize)?;
            if to == F16 {
                let rounded = self.round_f16(to, first(&out)?)?;
                out = vec![rounded];
            }
            return Ok(out);
        }
        let a = first(value)?;
        let reg = match (from, to) {
            (I32, U32) | (U32, I32) | (Bool, I32) | (Bool, U32) | (F16, F32) => a,
            (F32 | F16, I32) => self.un(Un32::F32ToI32, a)?,
            (F32 | F16, U32) => self.un(Un32::F32ToU32, a)?,
            (I32, F32) => self.un(Un32::I32ToF32, a)?,
            (U32, F32) => self.un(Un32::U32ToF32, a)?,
            (Bool, F32 | F16) => self.un(Un32::BoolToF32, a)?,
            (F32 | F16, Bool) => self.un(Un32::F32ToBool, a)?,
            (I32 | U32, Bool) => self.un(Un32::IntToBool, a)?,
            (F32, F16) => self.un(Un32::QuantizeF16, a)?,
            (I32, F16) => {
                let wide = self.un(Un32::I32ToF32, a)?;
                self.un(Un32::QuantizeF16, wide)?
            }
            (U32, F16) => {
                let wide = self.un(Un32::U32ToF32, a)?;
                self.un(Un32::QuantizeF16, wide)?
            }
            _ => return Err(Error::unsupported(format!("conversion from {from:?} to {to:?}"))),
        };
        Ok(vec![reg])
    }

    // ---- math built-ins -------------------------------------------------------------------

    /// One component of a component-wise built-in.
    fn component_math(&mut self, fun: MathFunction, num: Num, args: &[&[Reg]]) -> Result<Scalar> {
        if num.is_wide() {
            let f = wide::math(fun, num).ok_or_else(|| unsupported(format!("{fun:?}"), num))?;
            return self.lanes(f, wide_args(args), 2);
        }
        let arg = |k: usize| -> Result<Reg> {
            args.get(k)
                .and_then(|a| a.first().copied())
                .ok_or_else(|| Error::internal("a math built-in is missing an argument"))
        };
        let op = math32(fun, num).ok_or_else(|| unsupported(format!("{fun:?}"), num))?;
        let reg = match op {
            Math32::Identity => arg(0)?,
            Math32::Un(op) => self.un(op, arg(0)?)?,
            Math32::Bin(op) => self.bin(op, arg(0)?, arg(1)?)?,
            Math32::Tern(op) => self.tern(op, arg(0)?, arg(1)?, arg(2)?)?,
            Math32::Lanes(f) => {
                let words = args.iter().map(|a| a.first().copied()).collect::<Vec<_>>();
                self.lanes(f, wide_args_32(&words), 1)?
                    .first()
                    .copied()
                    .ok_or_else(|| Error::internal("a lane function without a result"))?
            }
        };
        let bits = matches!(
            fun,
            MathFunction::CountTrailingZeros
                | MathFunction::CountLeadingZeros
                | MathFunction::CountOneBits
                | MathFunction::ReverseBits
                | MathFunction::FirstTrailingBit
                | MathFunction::FirstLeadingBit
                | MathFunction::ExtractBits
                | MathFunction::InsertBits
        );
        Ok(vec![if bits { reg } else { self.round_f16(num, reg)? }])
    }

    pub(super) fn math(
        &mut self,
        f: &mut FnCtx<'m>,
        handle: Handle<Expression>,
        fun: MathFunction,
        args: [Option<Handle<Expression>>; 4],
    ) -> Result<Val> {
        use MathFunction as M;
        let mut operands = Vec::new();
        for arg in args.into_iter().flatten() {
            operands.push(self.operand(f, arg)?);
        }
        let Some((num, x)) = operands.first().cloned() else {
            return Err(Error::internal("a math built-in without arguments"));
        };
        let y = operands.get(1).map(|(_, c)| c.clone()).unwrap_or_default();
        let z = operands.get(2).map(|(_, c)| c.clone()).unwrap_or_default();
        let result_ty = self.ty(f, handle);
        let out: Vec<Reg> = match fun {
            M::Dot => self.dot(num, &x, &y)?,
            M::Dot4I8Packed | M::Dot4U8Packed => {
                let op = if fun == M::Dot4I8Packed {
                    Bin32::Dot4I8Packed
                } else {
                    Bin32::Dot4U8Packed
                };
                vec![self.bin(op, first(&at(&x, 0)?)?, first(&at(&y, 0)?)?)?]
            }
            M::Cross => {
                let mut out = Vec::new();
                for (i, j) in [(1, 2), (2, 0), (0, 1)] {
                    let p = self.scalar_binary(BinaryOperator::Multiply, num, &at(&x, i)?, &at(&y, j)?)?;
                    let q = self.scalar_binary(BinaryOperator::Multiply, num, &at(&x, j)?, &at(&y, i)?)?;
                    out.extend(self.scalar_binary(BinaryOperator::Subtract, num, &p, &q)?);
                }
                out
            }
            M::Length => self.length(num, &x)?,
            M::Distance => {
                let mut difference = Vec::new();
                for (a, b) in x.iter().zip(&y) {
                    difference.push(self.scalar_binary(BinaryOperator::Subtract, num, a, b)?);
                }
                self.length(num, &difference)?
            }
            M::Normalize => {
                let length = self.length(num, &x)?;
                let mut out = Vec::new();
                for component in &x {
                    out.extend(self.scalar_binary(BinaryOperator::Divide, num, component, &length)?);
                }
                out
            }
            M::FaceForward => {
                // select(-e1, e1, dot(e2, e3) < 0)
                let d = self.dot(num, &y, &z)?;
                let zero = self.constant_scalar(num, 0.0)?;
                let negative = self.scalar_binary(BinaryOperator::Less, num, &d, &zero)?;
                let mut out = Vec::new();
                for component in &x {
                    let negated = self.negate(num, component)?;
                    for (keep, flip) in component.iter().zip(&negated) {
                        out.push(self.tern(Tern32::Select, first(&negative)?, *keep, *flip)?);
                    }
                }
                out
            }
            M::Reflect => {
                // e1 - 2 * dot(e2, e1) * e2
                let d = self.dot(num, &y, &x)?;
                let two = self.constant_scalar(num, 2.0)?;
                let scale = self.scalar_binary(BinaryOperator::Multiply, num, &two, &d)?;
                let mut out = Vec::new();
                for (e1, e2) in x.iter().zip(&y) {
                    let term = self.scalar_binary(BinaryOperator::Multiply, num, &scale, e2)?;
                    out.extend(self.scalar_binary(BinaryOperator::Subtract, num, e1, &term)?);
                }
                out
            }
            M::Refract => self.refract(num, &x, &y, &z)?,
            M::Outer => {
                // Column j is `x * y[j]` (GLSL's outerProduct; WGSL has no spelling for it).
                let mut out = Vec::new();
                for b in &y {
                    for a in &x {
                        out.extend(self.scalar_binary(BinaryOperator::Multiply, num, a, b)?);
                    }
                }
                out
            }
            M::Transpose => {
                let TypeInner::Matrix { columns, rows, .. } = *self.ty(f, args[0].unwrap_or(handle)) else {
                    return Err(Error::internal("transpose of a non-matrix"));
                };
                let (columns, rows) = (columns as usize, rows as usize);
                let mut out = Vec::new();
                for r in 0..rows {
                    for c in 0..columns {
                        out.extend(at(&x, c * rows + r)?);
                    }
                }
                out
            }
            M::Determinant => {
                let n = (x.len() as f64).sqrt() as usize;
                let columns: Vec<Vec<Scalar>> = x.chunks(n.max(1)).map(<[Scalar]>::to_vec).collect();
                self.determinant(num, &columns)?
            }
            M::Modf => {
                let mut fract = Vec::new();
                let mut whole = Vec::new();
                for component in &x {
                    let w = self.component_math(M::Trunc, num, &[component])?;
                    fract.extend(self.scalar_binary(BinaryOperator::Subtract, num, component, &w)?);
                    whole.extend(w);
                }
                fract.extend(whole);
                fract
            }
            M::Frexp => {
                // An f16 is held as an f32, whose frexp is exact in f16 (the same significand).
                let mut fract = Vec::new();
                let mut exponent = Vec::new();
                for component in &x {
                    match num {
                        Num::F32 | Num::F16 => {
                            fract.push(self.un(Un32::FrexpFract, first(component)?)?);
                            exponent.push(self.un(Un32::FrexpExp, first(component)?)?);
                        }
                        Num::F64 => {
                            let (f, e) = wide::frexp();
                            fract.extend(self.lanes(f, wide_args(&[component]), 2)?);
                            exponent.extend(self.lanes(e, wide_args(&[component]), 2)?);
                        }
                        _ => return Err(unsupported("frexp", num)),
                    }
                }
                fract.extend(exponent);
                fract
            }
            M::Inverse => return Err(Error::unsupported("the matrix inverse built-in")),
            M::Pack4x8snorm | M::Pack4x8unorm | M::Pack4xI8 | M::Pack4xU8 | M::Pack4xI8Clamp | M::Pack4xU8Clamp => {
                let f: LaneFn = match fun {
                    M::Pack4x8snorm => ops::pack4x8_snorm,
                    M::Pack4x8unorm => ops::pack4x8_unorm,
                    M::Pack4xI8 => ops::pack4x_i8,
                    M::Pack4xU8 => ops::pack4x_u8,
                    M::Pack4xI8Clamp => ops::pack4x_i8_clamp,
                    _ => ops::pack4x_u8_clamp,
                };
                let words: Vec<Option<Reg>> = x.iter().map(|c| c.first().copied()).collect();
                self.lanes(f, wide_args_32(&words), 1)?
            }
            M::Pack2x16snorm | M::Pack2x16unorm | M::Pack2x16float => {
                let op = match fun {
                    M::Pack2x16snorm => Bin32::Pack2x16Snorm,
                    M::Pack2x16unorm => Bin32::Pack2x16Unorm,
                    _ => Bin32::Pack2x16Float,
                };
                vec![self.bin(op, first(&at(&x, 0)?)?, first(&at(&x, 1)?)?)?]
            }
            M::Unpack4x8snorm | M::Unpack4x8unorm | M::Unpack4xI8 | M::Unpack4xU8 => {
                let f: LaneFn = match fun {
                    M::Unpack4x8snorm => ops::unpack4x8_snorm,
                    M::Unpack4x8unorm => ops::unpack4x8_unorm,
                    M::Unpack4xI8 => ops::unpack4x_i8,
                    _ => ops::unpack4x_u8,
                };
                self.lanes(f, vec![Some(first(&at(&x, 0)?)?)], 4)?
            }
            M::Unpack2x16snorm | M::Unpack2x16unorm | M::Unpack2x16float => {
                let f: LaneFn = match fun {
                    M::Unpack2x16snorm => ops::unpack2x16_snorm,
                    M::Unpack2x16unorm => ops::unpack2x16_unorm,
                    _ => ops::unpack2x16_float,
                };
                self.lanes(f, vec![Some(first(&at(&x, 0)?)?)], 2)?
            }
            _ => {
                // Component-wise: scalar arguments apply to every component.
                let count = match *result_ty {
                    TypeInner::Vector { size, .. } => size as usize,
                    _ => 1,
                };
                let mut out = Vec::new();
                for i in 0..count {
                    let mut component_args: Vec<&[Reg]> = Vec::new();
                    for (_, components) in &operands {
                        let index = if components.len() == 1 { 0 } else { i };
                        let component = components
                            .get(index)
                            .ok_or_else(|| Error::internal("math arguments of different sizes"))?;
                        component_args.push(component);
                    }
                    out.extend(self.component_math(fun, num, &component_args)?);
                }
                out
            }
        };
        Ok(Val::Regs(out))
    }

    fn negate(&mut self, num: Num, x: &[Reg]) -> Result<Scalar> {
        if num.is_wide() {
            let f = wide::unary(naga::UnaryOperator::Negate, num).ok_or_else(|| unsupported("negation", num))?;
            return self.lanes(f, wide_args(&[x]), 2);
        }
        Ok(vec![self.un(Un32::NegF, first(x)?)?])
    }

    /// `length`: `|x|` for a scalar, `sqrt(dot(x, x))` for a vector.
    fn length(&mut self, num: Num, x: &[Scalar]) -> Result<Scalar> {
        if let [single] = x {
            return self.component_math(MathFunction::Abs, num, &[single]);
        }
        let squares = self.dot(num, x, x)?;
        self.sqrt(num, &squares)
    }

    /// `refract(e1, e2, eta)`: `k = 1 - eta² (1 - dot(e2, e1)²)`; 0 when `k < 0`, else
    /// `eta e1 - (eta dot(e2, e1) + sqrt(k)) e2`.
    fn refract(&mut self, num: Num, e1: &[Scalar], e2: &[Scalar], eta: &[Scalar]) -> Result<Scalar> {
        use BinaryOperator::{Add, Less, Multiply, Subtract};
        let eta = eta
            .first()
            .ok_or_else(|| Error::internal("refract without eta"))?
            .clone();
        let d = self.dot(num, e2, e1)?;
        let one = self.constant_scalar(num, 1.0)?;
        let zero = self.constant_scalar(num, 0.0)?;
        let d2 = self.scalar_binary(Multiply, num, &d, &d)?;
        let one_minus_d2 = self.scalar_binary(Subtract, num, &one, &d2)?;
        let eta2 = self.scalar_binary(Multiply, num, &eta, &eta)?;
        let scaled = self.scalar_binary(Multiply, num, &eta2, &one_minus_d2)?;
        let k = self.scalar_binary(Subtract, num, &one, &scaled)?;
        let negative = self.scalar_binary(Less, num, &k, &zero)?;
        let root = self.sqrt(num, &k)?;
        let eta_d = self.scalar_binary(Multiply, num, &eta, &d)?;
        let factor = self.scalar_binary(Add, num, &eta_d, &root)?;
        let mut out = Vec::new();
        for (a, b) in e1.iter().zip(e2) {
            let left = self.scalar_binary(Multiply, num, &eta, a)?;
            let right = self.scalar_binary(Multiply, num, &factor, b)?;
            let value = self.scalar_binary(Subtract, num, &left, &right)?;
            for (v, z) in value.iter().zip(&zero) {
                out.push(self.tern(Tern32::Select, first(&negative)?, *z, *v)?);
            }
        }
        Ok(out)
    }

    /// Laplace expansion along the first row; `columns[c][r]`.
    fn determinant(&mut self, num: Num, columns: &[Vec<Scalar>]) -> Result<Scalar> {
        use BinaryOperator::{Add, Multiply, Subtract};
        let n = columns.len();
        let at = |c: usize, r: usize| -> Result<Scalar> {
            columns
                .get(c)
                .and_then(|column| column.get(r))
                .cloned()
                .ok_or_else(|| Error::internal("a determinant of a non-square matrix"))
        };
        match n {
            1 => at(0, 0),
            2 => {
                let ad = self.scalar_binary(Multiply, num, &at(0, 0)?, &at(1, 1)?)?;
                let cb = self.scalar_binary(Multiply, num, &at(1, 0)?, &at(0, 1)?)?;
                self.scalar_binary(Subtract, num, &ad, &cb)
            }
            _ => {
                let mut sum: Option<Scalar> = None;
                for j in 0..n {
                    let minor: Vec<Vec<Scalar>> = columns
                        .iter()
                        .enumerate()
                        .filter(|(c, _)| *c != j)
                        .map(|(_, column)| column.iter().skip(1).cloned().collect())
                        .collect();
                    let cofactor = self.determinant(num, &minor)?;
                    let term = self.scalar_binary(Multiply, num, &at(j, 0)?, &cofactor)?;
                    sum = Some(match sum {
                        None => term,
                        Some(sum) if j % 2 == 1 => self.scalar_binary(Subtract, num, &sum, &term)?,
                        Some(sum) => self.scalar_binary(Add, num, &sum, &term)?,
                    });
                }
                sum.ok_or_else(|| Error::internal("an empty determinant"))
            }
        }
    }
}

fn at(components: &[Scalar], index: usize) -> Result<Scalar> {
    components
        .get(index)
        .cloned()
        .ok_or_else(|| Error::internal("a component out of range"))
}

fn span(components: &[Scalar], start: usize, length: usize) -> Result<&[Scalar]> {
    components
        .get(start..start + length)
        .ok_or_else(|| Error::internal("a matrix column out of range"))
}

fn first(scalar: &[Reg]) -> Result<Reg> {
    scalar
        .first()
        .copied()
        .ok_or_else(|| Error::internal("an empty scalar"))
}

/// Lane-function arguments: each scalar as (low, high), high absent for 32-bit scalars.
fn wide_args(args: &[&[Reg]]) -> Vec<Option<Reg>> {
    args.iter()
        .flat_map(|scalar| [scalar.first().copied(), scalar.get(1).copied()])
        .collect()
}

/// Lane-function arguments for 32-bit scalars.
fn wide_args_32(words: &[Option<Reg>]) -> Vec<Option<Reg>> {
    words.iter().flat_map(|word| [*word, None]).collect()
}

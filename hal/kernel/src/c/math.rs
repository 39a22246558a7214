//! WGSL's built-in functions (`MathFunction`) in C.

use naga::{BinaryOperator as Bin, Expression, Handle, MathFunction as Mf, Scalar, ScalarKind, TypeInner};

use super::prelude::math_name;
use super::writer::{comp, paren, scalar_suffix, Fx, Writer};
use crate::error::KernelError;
use crate::ir::scalar_wgsl;

type Res<T> = Result<T, KernelError>;

impl<'a> Writer<'a> {
    pub(super) fn math(&self, fx: &Fx, h: Handle<Expression>, fun: Mf, args: &[Handle<Expression>]) -> Res<String> {
        let vals: Vec<String> = args.iter().map(|&a| self.expr(fx, a)).collect::<Res<_>>()?;
        // The pack family and quantizeToF16: helpers of the prelude (see `prelude::packing`).
        let packing = match fun {
            Mf::Pack4x8snorm => Some("xh_pack4x8snorm"),
            Mf::Pack4x8unorm => Some("xh_pack4x8unorm"),
            Mf::Pack2x16snorm => Some("xh_pack2x16snorm"),
            Mf::Pack2x16unorm => Some("xh_pack2x16unorm"),
            Mf::Pack2x16float => Some("xh_pack2x16float"),
            Mf::Unpack4x8snorm => Some("xh_unpack4x8snorm"),
            Mf::Unpack4x8unorm => Some("xh_unpack4x8unorm"),
            Mf::Unpack2x16snorm => Some("xh_unpack2x16snorm"),
            Mf::Unpack2x16unorm => Some("xh_unpack2x16unorm"),
            Mf::Unpack2x16float => Some("xh_unpack2x16float"),
            Mf::Pack4xI8 => Some("xh_pack4xi8"),
            Mf::Pack4xU8 => Some("xh_pack4xu8"),
            Mf::Pack4xI8Clamp => Some("xh_pack4xi8clamp"),
            Mf::Pack4xU8Clamp => Some("xh_pack4xu8clamp"),
            Mf::Unpack4xI8 => Some("xh_unpack4xi8"),
            Mf::Unpack4xU8 => Some("xh_unpack4xu8"),
            _ => None,
        };
        if let Some(helper) = packing {
            return Ok(format!("{helper}({})", vals[0]));
        }
        // Four products of at most 128 * 128 each: the i32 sum cannot overflow.
        match fun {
            Mf::Dot4I8Packed => return Ok(format!("xh_dot4i8packed({}, {})", vals[0], vals[1])),
            Mf::Dot4U8Packed => return Ok(format!("xh_dot4u8packed({}, {})", vals[0], vals[1])),
            _ => {}
        }
        if fun == Mf::QuantizeToF16 {
            let t = self.ty(fx, args[0]).clone();
            return self.map_components(&t, &vals, |_, parts| Ok(format!("xh_quantize_f16({})", parts[0])), None);
        }
        let t0 = self.ty(fx, args[0]).clone();
        let result = self.ty(fx, h).clone();
        let err = |e: KernelError| self.relocate(fx, h, e);
        let (size, scalar) = match t0 {
            TypeInner::Scalar(s) => (None, s),
            TypeInner::Vector { size, scalar } => (Some(size as usize), scalar),
            TypeInner::Matrix { columns, rows, scalar } => {
                let sfx = scalar_suffix(scalar).unwrap_or("f32");
                return match fun {
                    Mf::Transpose => {
                        let m = &vals[0];
                        let cols: Vec<String> = (0..rows as usize)
                            .map(|i| {
                                let parts: Vec<String> = (0..columns as usize)
                                    .map(|j| comp(&format!("{}.c[{j}].v", paren(m)), i))
                                    .collect();
                                format!("xh_make_xh_{sfx}x{}({})", columns as u8, parts.join(", "))
                            })
                            .collect();
                        Ok(format!("xh_make_{}({})", self.inner_name(&result)?, cols.join(", ")))
                    }
                    Mf::Determinant => {
                        let m = &vals[0];
                        let e = |j: usize, i: usize| comp(&format!("{}.c[{j}].v", paren(m)), i);
                        let all: Vec<usize> = (0..columns as usize).collect();
                        let op = |op: Bin, x: &str, y: &str| self.sbin(op, scalar, x, y);
                        determinant_text(&e, &all, &all, &op).map_err(err)
                    }
                    _ => Err(self.expr_err(fx, h, &format!("{fun:?} on matrices"))),
                };
            }
            _ => return Err(self.expr_err(fx, h, &format!("{fun:?} on this type"))),
        };
        let n = size.unwrap_or(1);
        let c = |v: &str, i: usize| if size.is_some() { comp(v, i) } else { v.to_owned() };
        // Geometric functions that look across components.
        match fun {
            Mf::Dot => {
                let mut acc: Option<String> = None;
                for i in 0..n {
                    let p = self
                        .sbin(Bin::Multiply, scalar, &c(&vals[0], i), &c(&vals[1], i))
                        .map_err(err)?;
                    acc = Some(match acc {
                        None => p,
                        Some(a) => self.sbin(Bin::Add, scalar, &a, &p).map_err(err)?,
                    });
                }
                return Ok(acc.unwrap_or_default());
            }
            Mf::Length | Mf::Distance | Mf::Normalize => {
                if scalar.kind != ScalarKind::Float {
                    return Err(self.expr_err(fx, h, "length of integers"));
                }
                // As the interpreter: the length of a scalar is its magnitude; of a vector,
                // the square root of its dot product with itself, each operation rounded.
                let diff = |i: usize| {
                    if fun == Mf::Distance {
                        self.sbin(Bin::Subtract, scalar, &c(&vals[0], i), &c(&vals[1], i))
                    } else {
                        Ok(c(&vals[0], i))
                    }
                };
                let len = if size.is_none() {
                    self.smath(Mf::Abs, scalar, &[diff(0).map_err(err)?]).map_err(err)?
                } else {
                    let mut acc: Option<String> = None;
                    for i in 0..n {
                        let d = diff(i).map_err(err)?;
                        let p = self.sbin(Bin::Multiply, scalar, &d, &d).map_err(err)?;
                        acc = Some(match acc {
                            None => p,
                            Some(a) => self.sbin(Bin::Add, scalar, &a, &p).map_err(err)?,
                        });
                    }
                    self.smath(Mf::Sqrt, scalar, &[acc.unwrap_or_default()]).map_err(err)?
                };
                if fun != Mf::Normalize {
                    return Ok(len);
                }
                if size.is_none() {
                    return self.sbin(Bin::Divide, scalar, &vals[0], &len).map_err(err);
                }
                let parts: Vec<String> = (0..n)
                    .map(|i| self.sbin(Bin::Divide, scalar, &c(&vals[0], i), &len))
                    .collect::<Res<_>>()
                    .map_err(err)?;
                return Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", ")));
            }
            Mf::Reflect | Mf::FaceForward | Mf::Refract | Mf::Modf | Mf::Frexp if scalar.kind != ScalarKind::Float => {
                return Err(self.expr_err(fx, h, &format!("{fun:?} on integers")));
            }
            Mf::Reflect | Mf::FaceForward | Mf::Refract => {
                // The interpreter's formulas, operation by operation (each rounded to the
                // type, f16 included), so that both give the same bits.
                let bin = |op: Bin, x: &str, y: &str| self.sbin(op, scalar, x, y).map_err(err);
                let lit = |v: f32| match scalar.width {
                    2 => format!("XH_F16({v:?}f)"),
                    4 => format!("{v:?}f"),
                    _ => format!("{v:?}"),
                };
                let dot = |x: &str, y: &str| -> Res<String> {
                    let mut acc: Option<String> = None;
                    for i in 0..n {
                        let p = bin(Bin::Multiply, &c(x, i), &c(y, i))?;
                        acc = Some(match acc {
                            None => p,
                            Some(a) => bin(Bin::Add, &a, &p)?,
                        });
                    }
                    Ok(acc.unwrap_or_default())
                };
                let parts: Vec<String> = match fun {
                    // e1 - (2 * dot(e2, e1)) * e2
                    Mf::Reflect => {
                        let scale = bin(Bin::Multiply, &lit(2.0), &dot(&vals[1], &vals[0])?)?;
                        (0..n)
                            .map(|i| {
                                let term = bin(Bin::Multiply, &scale, &c(&vals[1], i))?;
                                bin(Bin::Subtract, &c(&vals[0], i), &term)
                            })
                            .collect::<Res<_>>()?
                    }
                    // dot(e2, e3) < 0 ? e1 : -e1
                    Mf::FaceForward => {
                        let negative = bin(Bin::Less, &dot(&vals[1], &vals[2])?, &lit(0.0))?;
                        (0..n)
                            .map(|i| {
                                let e = c(&vals[0], i);
                                let negated = if scalar.width == 2 {
                                    format!("xh_neg_f16({e})")
                                } else {
                                    format!("(-{})", paren(&e))
                                };
                                format!("({negative} ? {e} : {negated})")
                            })
                            .collect()
                    }
                    // k = 1 - eta * eta * (1 - d * d) with d = dot(e2, e1); 0 where k < 0,
                    // else eta * e1 - (eta * d + sqrt(k)) * e2.
                    _ => {
                        let eta = &vals[2];
                        let d = dot(&vals[1], &vals[0])?;
                        let one_minus_d2 = bin(Bin::Subtract, &lit(1.0), &bin(Bin::Multiply, &d, &d)?)?;
                        let eta2 = bin(Bin::Multiply, eta, eta)?;
                        let k = bin(Bin::Subtract, &lit(1.0), &bin(Bin::Multiply, &eta2, &one_minus_d2)?)?;
                        let negative = bin(Bin::Less, &k, &lit(0.0))?;
                        let root = self.smath(Mf::Sqrt, scalar, std::slice::from_ref(&k)).map_err(err)?;
                        let factor = bin(Bin::Add, &bin(Bin::Multiply, eta, &d)?, &root)?;
                        (0..n)
                            .map(|i| {
                                let left = bin(Bin::Multiply, eta, &c(&vals[0], i))?;
                                let right = bin(Bin::Multiply, &factor, &c(&vals[1], i))?;
                                let value = bin(Bin::Subtract, &left, &right)?;
                                Ok(format!("({negative} ? {} : {value})", lit(0.0)))
                            })
                            .collect::<Res<_>>()?
                    }
                };
                return match size {
                    None => Ok(parts.into_iter().next().unwrap_or_default()),
                    Some(_) => Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", "))),
                };
            }
            Mf::Modf | Mf::Frexp => {
                // The predeclared result structs: (fract, whole) and (fract, exp).
                let (first, second): (Vec<String>, Vec<String>) = if fun == Mf::Modf {
                    // whole = trunc(e), fract = e - whole, as the interpreter computes them.
                    (0..n)
                        .map(|i| {
                            let e = c(&vals[0], i);
                            let whole = self.smath(Mf::Trunc, scalar, std::slice::from_ref(&e))?;
                            Ok((self.sbin(Bin::Subtract, scalar, &e, &whole)?, whole))
                        })
                        .collect::<Res<Vec<_>>>()
                        .map_err(err)?
                        .into_iter()
                        .unzip()
                } else {
                    // An f16 goes through f32, whose frexp is exact in f16 (as in the
                    // interpreter, which holds an f16 as an f32).
                    (0..n)
                        .map(|i| {
                            let e = c(&vals[0], i);
                            match scalar.width {
                                2 => (
                                    format!("XH_F2H(xh_frexp_fract_f32(XH_H2F({e})))"),
                                    format!("xh_frexp_exp_f32(XH_H2F({e}))"),
                                ),
                                4 => (format!("xh_frexp_fract_f32({e})"), format!("xh_frexp_exp_f32({e})")),
                                // naga types the exponent of an f64's frexp `i64`.
                                _ => (
                                    format!("xh_frexp_fract_f64({e})"),
                                    format!("((xh_i64)xh_frexp_exp_f64({e}))"),
                                ),
                            }
                        })
                        .unzip()
                };
                let second_scalar = match (fun, scalar.width) {
                    (Mf::Modf, _) => scalar,
                    (_, 8) => Scalar::I64,
                    _ => Scalar::I32,
                };
                let members = match size {
                    None => [first.join(""), second.join("")],
                    Some(_) => {
                        let arg = self.ty(fx, args[0]).clone();
                        let TypeInner::Vector { size: vsize, .. } = arg else {
                            return Err(self.expr_err(fx, h, &format!("{fun:?} on this type")));
                        };
                        let exp = TypeInner::Vector {
                            size: vsize,
                            scalar: second_scalar,
                        };
                        [
                            format!("xh_make_{}({})", self.inner_name(&arg)?, first.join(", ")),
                            format!("xh_make_{}({})", self.inner_name(&exp)?, second.join(", ")),
                        ]
                    }
                };
                return Ok(format!(
                    "xh_make_{}({}, {})",
                    self.inner_name(&result)?,
                    members[0],
                    members[1]
                ));
            }
            Mf::Cross => {
                let (a, b) = (&vals[0], &vals[1]);
                let x = |i: usize, j: usize| -> Res<String> {
                    let p = self.sbin(Bin::Multiply, scalar, &comp(a, i), &comp(b, j))?;
                    let q = self.sbin(Bin::Multiply, scalar, &comp(a, j), &comp(b, i))?;
                    self.sbin(Bin::Subtract, scalar, &p, &q)
                };
                return Ok(format!(
                    "xh_make_{}({}, {}, {})",
                    self.inner_name(&result)?,
                    x(1, 2).map_err(err)?,
                    x(2, 0).map_err(err)?,
                    x(0, 1).map_err(err)?
                ));
            }
            _ => {}
        }
        let arg_is_vec: Vec<bool> = args
            .iter()
            .map(|&a| matches!(self.ty(fx, a), TypeInner::Vector { .. }))
            .collect();
        let mut parts = Vec::new();
        for i in 0..n {
            let a: Vec<String> = vals
                .iter()
                .zip(&arg_is_vec)
                .map(|(v, &is_vec)| if is_vec { comp(v, i) } else { v.clone() })
                .collect();
            parts.push(self.smath(fun, scalar, &a).map_err(err)?);
        }
        match size {
            None => Ok(parts.pop().unwrap_or_default()),
            Some(_) => Ok(format!("xh_make_{}({})", self.inner_name(&result)?, parts.join(", "))),
        }
    }

    fn smath(&self, fun: Mf, s: Scalar, a: &[String]) -> Res<String> {
        let sfx = scalar_suffix(s).ok_or_else(|| self.unsupported(&scalar_wgsl(s)))?;
        if s == Scalar::F16 {
            // Computed in f32 and rounded once, as the interpreter computes it (`ldexp`'s
            // exponent is an integer).
            let wide: Vec<String> = a
                .iter()
                .enumerate()
                .map(|(k, x)| {
                    if fun == Mf::Ldexp && k == 1 {
                        x.clone()
                    } else {
                        format!("XH_H2F({x})")
                    }
                })
                .collect();
            return Ok(format!("XH_F2H({})", self.smath(fun, Scalar::F32, &wide)?));
        }
        if s.kind == ScalarKind::Float {
            let f32 = s.width == 4;
            let n = |name: &str| math_name(self.d, name, f32);
            let lit = |v: &str| if f32 { format!("{v}f") } else { v.to_owned() };
            let one = |name: &str| format!("{}({})", n(name), a[0]);
            // Host C's own fmin and fmax are comparisons the C compiler can vectorise, where
            // libm's are calls (see the prelude).
            let (fmin, fmax) = if self.d == super::Dialect::HostC {
                (format!("xh_fmin_{sfx}"), format!("xh_fmax_{sfx}"))
            } else {
                (n("fmin"), n("fmax"))
            };
            return Ok(match fun {
                Mf::Abs => one("fabs"),
                Mf::Min => format!("{fmin}({}, {})", a[0], a[1]),
                Mf::Max => format!("{fmax}({}, {})", a[0], a[1]),
                Mf::Clamp => format!("{fmin}({fmax}({}, {}), {})", a[0], a[1], a[2]),
                Mf::Saturate => format!("{fmin}({fmax}({}, {}), {})", a[0], lit("0.0"), lit("1.0")),
                Mf::Cos => one("cos"),
                Mf::Cosh => one("cosh"),
                Mf::Sin => one("sin"),
                Mf::Sinh => one("sinh"),
                Mf::Tan => one("tan"),
                Mf::Tanh => one("tanh"),
                Mf::Acos => one("acos"),
                Mf::Asin => one("asin"),
                Mf::Atan => one("atan"),
                Mf::Asinh => one("asinh"),
                Mf::Acosh => one("acosh"),
                Mf::Atanh => one("atanh"),
                Mf::Atan2 => format!("{}({}, {})", n("atan2"), a[0], a[1]),
                Mf::Radians => format!("({} * {})", a[0], lit("0.017453292519943295")),
                Mf::Degrees => format!("({} * {})", a[0], lit("57.29577951308232")),
                Mf::Ceil => one("ceil"),
                Mf::Floor => one("floor"),
                Mf::Round => one("rint"),
                Mf::Trunc => one("trunc"),
                Mf::Fract => format!("({} - {}({}))", a[0], n("floor"), a[0]),
                Mf::Exp => one("exp"),
                Mf::Exp2 => one("exp2"),
                Mf::Log => one("log"),
                Mf::Log2 => one("log2"),
                Mf::Pow => format!("{}({}, {})", n("pow"), a[0], a[1]),
                Mf::Sqrt => one("sqrt"),
                Mf::InverseSqrt => format!("({} / {}({}))", lit("1.0"), n("sqrt"), a[0]),
                Mf::Sign => format!("xh_sign_{sfx}({})", a[0]),
                Mf::Fma => format!("{}({}, {}, {})", n("fma"), a[0], a[1], a[2]),
                Mf::Mix => format!("({} * ({} - {}) + {} * {})", a[0], lit("1.0"), a[2], a[1], a[2]),
                Mf::Step => format!("({} <= {} ? {} : {})", a[0], a[1], lit("1.0"), lit("0.0")),
                Mf::SmoothStep => format!("xh_smoothstep_{sfx}({}, {}, {})", a[0], a[1], a[2]),
                Mf::Ldexp => format!("{}({}, (int)({}))", n("ldexp"), a[0], a[1]),
                other => return Err(self.unsupported(&format!("the built-in {other:?}"))),
            });
        }
        let t = self.inner_name(&TypeInner::Scalar(s))?;
        let wide = s.width == 8;
        let signed = s.kind == ScalarKind::Sint;
        // The unsigned helper, on the bits of a signed operand.
        let bits = |f: &str| -> Res<String> {
            let u = if wide { "u64" } else { "u32" };
            Ok(if signed {
                format!("(({t})xh_{f}_{u}((xh_{u})({})))", a[0])
            } else {
                format!("xh_{f}_{u}({})", a[0])
            })
        };
        Ok(match fun {
            Mf::Abs if signed => format!("xh_abs_{sfx}({})", a[0]),
            Mf::Abs => a[0].clone(),
            Mf::Min => format!("xh_min_{sfx}({}, {})", a[0], a[1]),
            Mf::Max => format!("xh_max_{sfx}({}, {})", a[0], a[1]),
            Mf::Clamp => format!("xh_min_{sfx}(xh_max_{sfx}({}, {}), {})", a[0], a[1], a[2]),
            Mf::Sign if signed => format!("xh_sign_{sfx}({})", a[0]),
            Mf::CountOneBits => bits("popcount")?,
            Mf::ReverseBits => bits("reverse")?,
            Mf::CountLeadingZeros => bits("clz")?,
            Mf::CountTrailingZeros => bits("ctz")?,
            Mf::FirstTrailingBit => bits("first_trailing_bit")?,
            Mf::FirstLeadingBit => format!("xh_first_leading_bit_{sfx}({})", a[0]),
            Mf::ExtractBits => format!("xh_extract_bits_{sfx}({}, {}, {})", a[0], a[1], a[2]),
            Mf::InsertBits => format!("xh_insert_bits_{sfx}({}, {}, {}, {})", a[0], a[1], a[2], a[3]),
            other => return Err(self.unsupported(&format!("the built-in {other:?} on {}", scalar_wgsl(s)))),
        })
    }
}

/// The determinant of the square sub-matrix of `columns` and `rows` (indices into a matrix
/// whose element of column `c` and row `r` is `element(c, r)`), as a C expression: Laplace
/// expansion along the first row, terms added left to right with alternating signs, the
/// same operations in the same order as the CPU interpreter, so the compiled result is the
/// same bits.
fn determinant_text(
    element: &dyn Fn(usize, usize) -> String,
    columns: &[usize],
    rows: &[usize],
    op: &dyn Fn(Bin, &str, &str) -> Res<String>,
) -> Res<String> {
    match (columns, rows) {
        ([c], [r]) => Ok(element(*c, *r)),
        ([c0, c1], [r0, r1]) => {
            let ad = op(Bin::Multiply, &element(*c0, *r0), &element(*c1, *r1))?;
            let cb = op(Bin::Multiply, &element(*c1, *r0), &element(*c0, *r1))?;
            op(Bin::Subtract, &ad, &cb)
        }
        _ => {
            let mut sum = String::new();
            for (k, &column) in columns.iter().enumerate() {
                let minor: Vec<usize> = columns.iter().copied().filter(|&c| c != column).collect();
                let cofactor = determinant_text(element, &minor, &rows[1..], op)?;
                let term = op(Bin::Multiply, &element(column, rows[0]), &cofactor)?;
                sum = match k {
                    0 => term,
                    _ if k % 2 == 1 => op(Bin::Subtract, &sum, &term)?,
                    _ => op(Bin::Add, &sum, &term)?,
                };
            }
            Ok(sum)
        }
    }
}

//! Element types of arrays, in numpy's vocabulary, and how they meet WGSL's.

use pyo3::prelude::*;

use crate::errors::invalid;

/// An array's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DType {
    Bool,
    Int8,
    UInt8,
    Int16,
    UInt16,
    Int32,
    UInt32,
    Int64,
    UInt64,
    Float16,
    Float32,
    Float64,
}

pub(crate) const ALL: [DType; 12] = [
    DType::Bool,
    DType::Int8,
    DType::UInt8,
    DType::Int16,
    DType::UInt16,
    DType::Int32,
    DType::UInt32,
    DType::Int64,
    DType::UInt64,
    DType::Float16,
    DType::Float32,
    DType::Float64,
];

impl DType {
    /// numpy's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::Int8 => "int8",
            DType::UInt8 => "uint8",
            DType::Int16 => "int16",
            DType::UInt16 => "uint16",
            DType::Int32 => "int32",
            DType::UInt32 => "uint32",
            DType::Int64 => "int64",
            DType::UInt64 => "uint64",
            DType::Float16 => "float16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
        }
    }

    /// numpy's array-interface type string (little-endian, as every xhal device is).
    pub(crate) fn typestr(self) -> &'static str {
        match self {
            DType::Bool => "|b1",
            DType::Int8 => "|i1",
            DType::UInt8 => "|u1",
            DType::Int16 => "<i2",
            DType::UInt16 => "<u2",
            DType::Int32 => "<i4",
            DType::UInt32 => "<u4",
            DType::Int64 => "<i8",
            DType::UInt64 => "<u8",
            DType::Float16 => "<f2",
            DType::Float32 => "<f4",
            DType::Float64 => "<f8",
        }
    }

    pub(crate) fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::Int8 | DType::UInt8 => 1,
            DType::Int16 | DType::UInt16 | DType::Float16 => 2,
            DType::Int32 | DType::UInt32 | DType::Float32 => 4,
            DType::Int64 | DType::UInt64 | DType::Float64 => 8,
        }
    }

    /// DLPack's type code and bits.
    pub(crate) fn dlpack(self) -> (u8, u8) {
        let code = match self {
            DType::Bool => 6,
            DType::Int8 | DType::Int16 | DType::Int32 | DType::Int64 => 0,
            DType::UInt8 | DType::UInt16 | DType::UInt32 | DType::UInt64 => 1,
            DType::Float16 | DType::Float32 | DType::Float64 => 2,
        };
        (code, (self.itemsize() * 8) as u8)
    }

    pub(crate) fn from_typestr(typestr: &str) -> Option<DType> {
        let normalized = typestr.replace('=', "<");
        ALL.into_iter().find(|d| d.typestr() == normalized)
    }

    /// Anything numpy takes as a dtype: `"float32"`, `numpy.float32`, `numpy.dtype("<f4")`.
    pub(crate) fn from_py(dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
        let py = dtype.py();
        let numpy_dtype = py.import("numpy")?.getattr("dtype")?.call1((dtype,)).map_err(|e| {
            crate::py_err(invalid(format!(
                "{} is not a dtype numpy knows: {}",
                dtype.repr().map(|r| r.to_string()).unwrap_or_default(),
                e
            )))
        })?;
        let typestr: String = numpy_dtype.getattr("str")?.extract()?;
        DType::from_typestr(&typestr).ok_or_else(|| {
            crate::py_err(invalid(format!(
                "dtype {typestr} has no xhal array type; expected one of {}",
                ALL.map(DType::name).join(", ")
            )))
        })
    }

    /// The numpy dtype object.
    pub(crate) fn to_numpy<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("numpy")?.getattr("dtype")?.call1((self.name(),))
    }

    /// The dtype that matches a WGSL element type, where there is one: the scalar of a
    /// scalar, vector, matrix or atomic (`vec4<f32>` is float32). `None` for a struct, which
    /// takes any dtype whose bytes fit.
    pub(crate) fn of_wgsl(type_name: &str) -> Option<DType> {
        let scalar = type_name
            .rsplit(['<', ','])
            .next()
            .unwrap_or(type_name)
            .trim_end_matches('>')
            .trim();
        let wrapped = type_name.contains('<');
        let known =
            type_name.starts_with("vec") || type_name.starts_with("mat") || type_name.starts_with("atomic") || !wrapped;
        if !known {
            return None;
        }
        match scalar {
            "f32" => Some(DType::Float32),
            "f16" => Some(DType::Float16),
            "i32" => Some(DType::Int32),
            "u32" => Some(DType::UInt32),
            "f64" => Some(DType::Float64),
            "i64" => Some(DType::Int64),
            "u64" => Some(DType::UInt64),
            _ => None,
        }
    }
}

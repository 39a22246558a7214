//! The C-family languages xhal writes kernels in and backends compile ([`Dialect`]).

/// A C-family language the emitter writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenCL C 1.2 (`__kernel` functions, `__global` / `__local` pointers).
    OpenclC,
    /// CUDA C++ for NVRTC (`extern "C" __global__` functions).
    CudaC,
    /// HIP C++ for hiprtc (`extern "C" __global__` functions).
    HipC,
    /// C11 for the system C compiler: one function per entry point that runs one invocation.
    HostC,
}

impl Dialect {
    /// Every dialect.
    pub const ALL: &'static [Dialect] = &[Dialect::OpenclC, Dialect::CudaC, Dialect::HipC, Dialect::HostC];

    /// A printable name ("OpenCL C", "CUDA C", "HIP C", "host C").
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenclC => "OpenCL C",
            Dialect::CudaC => "CUDA C",
            Dialect::HipC => "HIP C",
            Dialect::HostC => "host C",
        }
    }
}

//! NVRTC, loaded at run time like the driver: `cuda-c` source becomes a cubin for the device.

use crate::driver::panic_text;
use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use xhal_core::{Error, ErrorKind, Result};

/// NVRTC's version, where the library is found and answers; asked once per process.
pub(crate) fn version() -> Option<(i32, i32)> {
    static VERSION: OnceLock<Option<(i32, i32)>> = OnceLock::new();
    *VERSION.get_or_init(|| {
        let found = catch_unwind(|| {
            // SAFETY: only tries to open the candidate libraries by name.
            if !unsafe { sys::is_culib_present() } {
                return None;
            }
            let (mut major, mut minor): (c_int, c_int) = (0, 0);
            // SAFETY: writes two ints.
            match unsafe { sys::nvrtcVersion(&mut major, &mut minor) } {
                nvrtcResult::NVRTC_SUCCESS => Some((major, minor)),
                _ => None,
            }
        });
        match found {
            Ok(version) => version,
            Err(payload) => {
                tracing::warn!(reason = %panic_text(&*payload), "NVRTC is present but unusable; cuda-c is not offered");
                None
            }
        }
    })
}

fn nvrtc_error(function: &str, code: nvrtcResult, doing: &str) -> Error {
    let kind = match code {
        nvrtcResult::NVRTC_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        nvrtcResult::NVRTC_ERROR_COMPILATION | nvrtcResult::NVRTC_ERROR_INVALID_INPUT => ErrorKind::InvalidArgument,
        nvrtcResult::NVRTC_ERROR_INVALID_OPTION => ErrorKind::Unsupported,
        _ => ErrorKind::Internal,
    };
    Error::new(kind, format!("{function} failed: {code:?} ({}) ({doing})", code as u32))
}

fn check(function: &str, code: nvrtcResult, doing: &str) -> Result<()> {
    match code {
        nvrtcResult::NVRTC_SUCCESS => Ok(()),
        code => Err(nvrtc_error(function, code, doing)),
    }
}

/// Destroys the program when dropped.
struct Program(nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: a program this module created, destroyed once.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe { sys::nvrtcDestroyProgram(&mut self.0) }));
    }
}

impl Program {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: writes one size.
        if unsafe { sys::nvrtcGetProgramLogSize(self.0, &mut size) } != nvrtcResult::NVRTC_SUCCESS || size <= 1 {
            return String::new();
        }
        let mut log = vec![0 as c_char; size];
        // SAFETY: the buffer holds `size` bytes, as asked.
        if unsafe { sys::nvrtcGetProgramLog(self.0, log.as_mut_ptr()) } != nvrtcResult::NVRTC_SUCCESS {
            return String::new();
        }
        let bytes: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).trim_end().to_string()
    }
}

/// What NVRTC made: a cubin for a real architecture.
pub(crate) struct Compiled {
    pub(crate) image: Vec<u8>,
}

/// Compiles CUDA C `source` for `sm_<compute_capability>` into a cubin; a failed compilation
/// is an error carrying NVRTC's log.
pub(crate) fn compile(source: &str, compute_capability: u32, device_name: &str) -> Result<Compiled> {
    if version().is_none() {
        return Err(Error::unsupported(format!(
            "NVRTC (libnvrtc.so.12 or libnvrtc.so) was not found, so {device_name} takes no cuda-c; install the CUDA \
             runtime compiler (the CUDA toolkit, Debian's libnvrtc12, or pip's nvidia-cuda-nvrtc-cu12) and put its \
             folder on LD_LIBRARY_PATH, or load ptx or cubin"
        )));
    }
    let text = CString::new(source).map_err(|_| Error::invalid_argument("CUDA C source contains a NUL byte"))?;
    catch_unwind(AssertUnwindSafe(|| {
        compile_checked(&text, compute_capability, device_name)
    }))
    .unwrap_or_else(|payload| {
        Err(Error::new(
            ErrorKind::DriverUnavailable,
            format!("NVRTC could not be called: {}", panic_text(&*payload)),
        ))
    })
}

fn compile_checked(text: &CString, compute_capability: u32, device_name: &str) -> Result<Compiled> {
    let doing = format!("compiling CUDA C for {device_name}");
    let mut raw: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: a NUL-terminated source and name, no headers.
    let code = unsafe {
        sys::nvrtcCreateProgram(
            &mut raw,
            text.as_ptr(),
            c"xhal_module.cu".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    check("nvrtcCreateProgram", code, &doing)?;
    let program = Program(raw);
    let architecture = CString::new(format!("--gpu-architecture=sm_{compute_capability}"))
        .map_err(|_| Error::internal("architecture option with a NUL byte"))?;
    let options = [architecture.as_ptr(), c"--std=c++17".as_ptr()];
    // SAFETY: two NUL-terminated options.
    let code = unsafe { sys::nvrtcCompileProgram(program.0, options.len() as c_int, options.as_ptr()) };
    if code != nvrtcResult::NVRTC_SUCCESS {
        let log = program.log();
        let error = nvrtc_error(
            "nvrtcCompileProgram",
            code,
            &format!("{doing} with --gpu-architecture=sm_{compute_capability}"),
        );
        return Err(if log.is_empty() {
            error
        } else {
            Error::new(error.kind(), format!("{}; NVRTC log:\n{log}", error.message()))
        });
    }
    let log = program.log();
    if !log.is_empty() {
        tracing::debug!(%log, "NVRTC compiled with messages");
    }
    let mut size = 0usize;
    // SAFETY: writes one size.
    check(
        "nvrtcGetCUBINSize",
        unsafe { sys::nvrtcGetCUBINSize(program.0, &mut size) },
        &doing,
    )?;
    let mut image = vec![0u8; size];
    // SAFETY: the buffer holds `size` bytes, as asked.
    check(
        "nvrtcGetCUBIN",
        unsafe { sys::nvrtcGetCUBIN(program.0, image.as_mut_ptr().cast()) },
        &doing,
    )?;
    Ok(Compiled { image })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where it is found, the CUDA C of every repository kernel compiles
    /// for sm_90, and a broken source fails with NVRTC's log.
    #[test]
    fn every_repository_kernel_compiles_where_nvrtc_is_found() {
        let Some((major, minor)) = version() else {
            let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
            assert!(
                !required.split(',').any(|name| name.trim() == "cuda"),
                "XHAL_REQUIRE_BACKENDS names cuda, but NVRTC was not found"
            );
            eprintln!("SKIPPED: NVRTC (libnvrtc.so.12 or libnvrtc.so) was not found, so no CUDA C was compiled");
            return;
        };
        eprintln!("NVRTC {major}.{minor}");
        let mut compiled = 0;
        for (name, wgsl) in crate::reflect::tests::repository_kernels() {
            let Ok(module) = xhal_kernel::parse_wgsl(&wgsl) else {
                continue;
            };
            let Ok(source) = module.to_c(xhal_kernel::Dialect::CudaC, None) else {
                continue;
            };
            match compile(&source.text, 90, "sm_90") {
                Ok(output) => assert!(output.image.starts_with(b"\x7fELF"), "{name}: not a cubin"),
                Err(error) => panic!("{name}: {error}\n{}", source.text),
            }
            compiled += 1;
        }
        assert!(compiled >= 50, "only {compiled} modules compiled");
        let error = compile("extern \"C\" __global__ void broken() { undeclared = 1; }", 90, "sm_90")
            .err()
            .expect("a broken source compiles");
        assert!(error.message().contains("nvrtcCompileProgram failed"), "{error}");
        assert!(error.message().contains("undeclared"), "{error}");
    }
}

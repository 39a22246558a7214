//! NVRTC, opened at run time like the driver: `cuda-c` source becomes a cubin for the device,
//! or PTX for the newest architecture NVRTC knows when the device is newer than that.
//!
//! NVRTC's API has been stable since CUDA 11.2 while its file name carries the toolkit's
//! major version, so the library is opened by its own table here rather than through cudarc,
//! whose names stop at the major version it was built for: a CUDA 13 machine has only
//! `libnvrtc.so.13`.

use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use xhal_backend::{Error, ErrorKind, Result};

/// Names tried in order when `XHAL_NVRTC_LIBRARY` is unset: the newest toolkit first, then the
/// unversioned name a toolkit's development files add.
pub(crate) const LIBRARY_NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"];

/// The environment variable naming the NVRTC library to open, as a path or a file name.
pub(crate) const LIBRARY_VARIABLE: &str = "XHAL_NVRTC_LIBRARY";

type Program = *mut c_void;
/// `nvrtcResult`: 0 is success.
type Status = c_int;
const SUCCESS: Status = 0;
const ERROR_OUT_OF_MEMORY: Status = 1;
const ERROR_INVALID_INPUT: Status = 3;
const ERROR_INVALID_OPTION: Status = 5;
const ERROR_COMPILATION: Status = 6;
const ERROR_BUILTIN_OPERATION_FAILURE: Status = 7;

/// NVRTC's entry points, resolved when the library is opened; the library stays open for the
/// life of the process, so the pointers stay valid.
struct Api {
    path: String,
    version: (i32, i32),
    /// The real architectures (`sm_XY` as `XY`) this NVRTC compiles for, ascending.
    architectures: Vec<u32>,
    get_error_string: unsafe extern "C" fn(Status) -> *const c_char,
    create_program: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    destroy_program: unsafe extern "C" fn(*mut Program) -> Status,
    compile_program: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    get_program_log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    get_program_log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    get_cubin_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    get_cubin: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    get_ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    get_ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    _library: libloading::Library,
    /// NVRTC's built-in headers, from the folder of a library opened by path: NVRTC opens
    /// them by name, which the loader finds only where that folder is on its search path.
    _builtins: Option<libloading::Library>,
}

/// Resolves `name` in `library`, as a value of the function pointer type `F`.
///
/// # Safety
/// `F` must be the C signature of `name`.
unsafe fn symbol<F: Copy>(library: &libloading::Library, path: &str, name: &str) -> std::result::Result<F, String> {
    // SAFETY: the caller gives the symbol's true type.
    unsafe { library.get::<F>(name.as_bytes()) }
        .map(|symbol| *symbol)
        .map_err(|error| format!("{path} has no {name} ({error}); it is not an NVRTC of CUDA 11.2 or later"))
}

impl Api {
    fn open(file: &str) -> std::result::Result<Api, String> {
        // SAFETY: NVRTC's initialisers only set up the library itself.
        let library = unsafe { libloading::Library::new(file) }.map_err(|error| format!("{file}: {error}"))?;
        // SAFETY: each type below is the signature in nvrtc.h.
        unsafe {
            let version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status =
                symbol(&library, file, "nvrtcVersion")?;
            let count_architectures: unsafe extern "C" fn(*mut c_int) -> Status =
                symbol(&library, file, "nvrtcGetNumSupportedArchs")?;
            let list_architectures: unsafe extern "C" fn(*mut c_int) -> Status =
                symbol(&library, file, "nvrtcGetSupportedArchs")?;
            let (mut major, mut minor) = (0, 0);
            if version(&mut major, &mut minor) != SUCCESS {
                return Err(format!("{file}: nvrtcVersion failed"));
            }
            let mut count = 0;
            if count_architectures(&mut count) != SUCCESS || !(0..=4096).contains(&count) {
                return Err(format!("{file}: nvrtcGetNumSupportedArchs failed"));
            }
            let mut architectures = vec![0 as c_int; count as usize];
            if count > 0 && list_architectures(architectures.as_mut_ptr()) != SUCCESS {
                return Err(format!("{file}: nvrtcGetSupportedArchs failed"));
            }
            let mut architectures: Vec<u32> = architectures
                .into_iter()
                .filter_map(|value| u32::try_from(value).ok())
                .collect();
            architectures.sort_unstable();
            let builtins = std::path::Path::new(file)
                .parent()
                .filter(|folder| !folder.as_os_str().is_empty())
                .map(|folder| folder.join(format!("libnvrtc-builtins.so.{major}.{minor}")))
                .filter(|builtins| builtins.is_file())
                .and_then(|builtins| {
                    libloading::Library::new(&builtins)
                        .inspect_err(|error| tracing::warn!(path = %builtins.display(), %error, "NVRTC's builtins could not be opened"))
                        .ok()
                });
            Ok(Api {
                path: file.to_string(),
                version: (major, minor),
                architectures,
                get_error_string: symbol(&library, file, "nvrtcGetErrorString")?,
                create_program: symbol(&library, file, "nvrtcCreateProgram")?,
                destroy_program: symbol(&library, file, "nvrtcDestroyProgram")?,
                compile_program: symbol(&library, file, "nvrtcCompileProgram")?,
                get_program_log_size: symbol(&library, file, "nvrtcGetProgramLogSize")?,
                get_program_log: symbol(&library, file, "nvrtcGetProgramLog")?,
                get_cubin_size: symbol(&library, file, "nvrtcGetCUBINSize")?,
                get_cubin: symbol(&library, file, "nvrtcGetCUBIN")?,
                get_ptx_size: symbol(&library, file, "nvrtcGetPTXSize")?,
                get_ptx: symbol(&library, file, "nvrtcGetPTX")?,
                _library: library,
                _builtins: builtins,
            })
        }
    }

    fn error_name(&self, code: Status) -> String {
        // SAFETY: NVRTC returns a static string for any code.
        let name = unsafe { (self.get_error_string)(code) };
        if name.is_null() {
            return format!("NVRTC error {code}");
        }
        // SAFETY: a NUL-terminated static string.
        unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned()
    }
}

/// NVRTC, or why it is not usable; looked for once per process.
fn api() -> std::result::Result<&'static Api, &'static str> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        let found = catch_unwind(|| match std::env::var(LIBRARY_VARIABLE) {
            Ok(file) if !file.trim().is_empty() => {
                Api::open(file.trim()).map_err(|error| format!("{LIBRARY_VARIABLE} names an unusable NVRTC: {error}"))
            }
            _ => {
                let mut reasons = Vec::new();
                for name in LIBRARY_NAMES {
                    match Api::open(name) {
                        Ok(api) => return Ok(api),
                        Err(reason) => reasons.push(reason),
                    }
                }
                Err(format!(
                    "NVRTC was not found ({}); install the CUDA runtime compiler (the CUDA toolkit, Debian's \
                     libnvrtc12, or pip's nvidia-cuda-nvrtc) and put its folder on LD_LIBRARY_PATH, or set \
                     {LIBRARY_VARIABLE} to the library's path",
                    LIBRARY_NAMES.join(", ")
                ))
                .inspect_err(|_| tracing::debug!(?reasons, "NVRTC not found"))
            }
        });
        found.unwrap_or_else(|_| Err("opening NVRTC panicked".to_string()))
    })
    .as_ref()
    .map_err(String::as_str)
}

/// NVRTC's version, where the library is found and answers.
pub(crate) fn version() -> Option<(i32, i32)> {
    api().ok().map(|api| api.version)
}

/// Why NVRTC is not usable, where it is not.
pub(crate) fn unavailable_reason() -> Option<&'static str> {
    api().err()
}

/// The file NVRTC was opened from, for `xhal devices` and logs.
pub(crate) fn library_path() -> Option<&'static str> {
    api().ok().map(|api| api.path.as_str())
}

fn nvrtc_error(api: &Api, function: &str, code: Status, doing: &str) -> Error {
    let kind = match code {
        ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        ERROR_COMPILATION | ERROR_INVALID_INPUT => ErrorKind::InvalidArgument,
        ERROR_INVALID_OPTION => ErrorKind::Unsupported,
        _ => ErrorKind::Internal,
    };
    let hint = if code == ERROR_BUILTIN_OPERATION_FAILURE {
        format!(
            "; NVRTC could not open its built-in headers (libnvrtc-builtins.so.{}.{}): put them beside {} or \
             their folder on LD_LIBRARY_PATH",
            api.version.0, api.version.1, api.path
        )
    } else {
        String::new()
    };
    Error::new(
        kind,
        format!("{function} failed: {} ({code}) ({doing}){hint}", api.error_name(code)),
    )
}

fn check(api: &Api, function: &str, code: Status, doing: &str) -> Result<()> {
    match code {
        SUCCESS => Ok(()),
        code => Err(nvrtc_error(api, function, code, doing)),
    }
}

/// A program, destroyed when dropped.
struct ProgramHandle<'a> {
    api: &'a Api,
    raw: Program,
}

impl Drop for ProgramHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: a program this module created, destroyed once.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            (self.api.destroy_program)(&mut self.raw)
        }));
    }
}

impl ProgramHandle<'_> {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: writes one size.
        if unsafe { (self.api.get_program_log_size)(self.raw, &mut size) } != SUCCESS || size <= 1 {
            return String::new();
        }
        let mut log = vec![0 as c_char; size];
        // SAFETY: the buffer holds `size` bytes, as asked.
        if unsafe { (self.api.get_program_log)(self.raw, log.as_mut_ptr()) } != SUCCESS {
            return String::new();
        }
        let bytes: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).trim_end().to_string()
    }
}

/// What NVRTC made for a device.
pub(crate) struct Compiled {
    /// A cubin, or NUL-terminated PTX text: either is what `cuModuleLoadData` takes.
    pub(crate) image: Vec<u8>,
    /// The `--gpu-architecture` it was compiled with (`sm_90`, or `compute_90` for PTX).
    pub(crate) architecture: String,
}

/// What to ask NVRTC for, for a device of `compute_capability` (`90` for 9.0): machine code for
/// the device when NVRTC knows its architecture; otherwise PTX for the newest architecture NVRTC
/// knows below it, which the driver compiles for the device when loading.
fn target_for(compute_capability: u32, known: &[u32]) -> std::result::Result<String, String> {
    if known.is_empty() || known.contains(&compute_capability) {
        return Ok(format!("sm_{compute_capability}"));
    }
    match known
        .iter()
        .rev()
        .find(|&&architecture| architecture < compute_capability)
    {
        Some(older) => Ok(format!("compute_{older}")),
        None => Err(format!(
            "compiles for sm_{} to sm_{} only",
            known.first().copied().unwrap_or_default(),
            known.last().copied().unwrap_or_default()
        )),
    }
}

/// Compiles CUDA C `source` for a device of `compute_capability`; a failed compilation is an
/// error carrying NVRTC's log.
pub(crate) fn compile(source: &str, compute_capability: u32, device_name: &str) -> Result<Compiled> {
    let api = api().map_err(|reason| {
        Error::unsupported(format!("{device_name} takes no cuda-c: {reason}; or load ptx or cubin"))
    })?;
    let architecture = target_for(compute_capability, &api.architectures).map_err(|known| {
        Error::unsupported(format!(
            "{device_name} is sm_{compute_capability}, but NVRTC {}.{} ({}) {known}; install an NVRTC that \
             supports it, or load ptx or cubin",
            api.version.0, api.version.1, api.path
        ))
    })?;
    let text = CString::new(source).map_err(|_| Error::invalid_argument("CUDA C source contains a NUL byte"))?;
    catch_unwind(AssertUnwindSafe(|| {
        compile_checked(api, &text, &architecture, device_name)
    }))
    .unwrap_or_else(|_| {
        Err(Error::new(
            ErrorKind::Internal,
            format!("NVRTC ({}) panicked while compiling", api.path),
        ))
    })
}

fn compile_checked(api: &Api, text: &CString, architecture: &str, device_name: &str) -> Result<Compiled> {
    let doing = format!("compiling CUDA C for {device_name} with --gpu-architecture={architecture}");
    let mut raw: Program = std::ptr::null_mut();
    // SAFETY: a NUL-terminated source and name, no headers.
    let code = unsafe {
        (api.create_program)(
            &mut raw,
            text.as_ptr(),
            c"xhal_module.cu".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    check(api, "nvrtcCreateProgram", code, &doing)?;
    let program = ProgramHandle { api, raw };
    let option = CString::new(format!("--gpu-architecture={architecture}"))
        .map_err(|_| Error::internal("architecture option with a NUL byte"))?;
    let options = [option.as_ptr(), c"--std=c++17".as_ptr()];
    // SAFETY: two NUL-terminated options.
    let code = unsafe { (api.compile_program)(program.raw, options.len() as c_int, options.as_ptr()) };
    if code != SUCCESS {
        let log = program.log();
        let error = nvrtc_error(api, "nvrtcCompileProgram", code, &doing);
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
    let (size_of, get, what): (
        unsafe extern "C" fn(Program, *mut usize) -> Status,
        unsafe extern "C" fn(Program, *mut c_char) -> Status,
        _,
    ) = if architecture.starts_with("sm_") {
        (api.get_cubin_size, api.get_cubin, "nvrtcGetCUBIN")
    } else {
        (api.get_ptx_size, api.get_ptx, "nvrtcGetPTX")
    };
    let mut size = 0usize;
    check(
        api,
        &format!("{what}Size"),
        // SAFETY: writes one size.
        unsafe { size_of(program.raw, &mut size) },
        &doing,
    )?;
    let mut image = vec![0u8; size];
    check(
        api,
        what,
        // SAFETY: the buffer holds `size` bytes, as asked.
        unsafe { get(program.raw, image.as_mut_ptr().cast()) },
        &doing,
    )?;
    if what == "nvrtcGetPTX" && image.last() != Some(&0) {
        image.push(0);
    }
    Ok(Compiled {
        image,
        architecture: architecture.to_string(),
    })
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
            assert!(
                std::env::var_os("XHAL_REQUIRE_NVRTC").is_none(),
                "XHAL_REQUIRE_NVRTC is set, but NVRTC is unusable: {}",
                unavailable_reason().unwrap_or("?")
            );
            eprintln!(
                "SKIPPED: {}, so no CUDA C was compiled",
                unavailable_reason().unwrap_or("NVRTC was not found")
            );
            return;
        };
        eprintln!("NVRTC {major}.{minor} from {}", library_path().unwrap_or("?"));
        let mut compiled = 0;
        for (name, wgsl) in crate::reflect::tests::repository_kernels() {
            let Ok(module) = xhal_kernel::parse_wgsl(&wgsl) else {
                continue;
            };
            let Ok(source) = module.to_c(xhal_kernel::Dialect::CudaC, None) else {
                continue;
            };
            match compile(&source.text, 90, "sm_90") {
                Ok(output) => {
                    assert!(output.image.starts_with(b"\x7fELF"), "{name}: not a cubin");
                    assert_eq!(output.architecture, "sm_90");
                }
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
        // A device newer than every architecture NVRTC knows gets PTX for the newest of them.
        let newest = *api().unwrap().architectures.last().unwrap();
        let ptx = compile("extern \"C\" __global__ void empty() {}", newest + 1, "a newer device").unwrap();
        assert_eq!(ptx.architecture, format!("compute_{newest}"));
        assert!(
            ptx.image.starts_with(b"//") && ptx.image.ends_with(b"\0"),
            "PTX text, NUL-terminated"
        );
    }

    #[test]
    fn the_target_is_the_device_or_the_newest_older_architecture() {
        let known = [75, 80, 86, 89, 90, 100, 120];
        assert_eq!(target_for(90, &known).unwrap(), "sm_90");
        assert_eq!(target_for(91, &known).unwrap(), "compute_90");
        assert_eq!(target_for(130, &known).unwrap(), "compute_120");
        assert_eq!(target_for(61, &known).unwrap_err(), "compiles for sm_75 to sm_120 only");
        // An NVRTC that lists nothing is asked for the device's own architecture.
        assert_eq!(target_for(90, &[]).unwrap(), "sm_90");
    }
}

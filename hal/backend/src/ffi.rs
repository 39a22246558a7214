//! Vendor libraries opened at run time: the [`function_table!`](crate::function_table) macro
//! that declares a library's entry points as a struct of function pointers, and the
//! [`LoadError`] that says which library or which entry point was missing.
//!
//! A backend that needs no vendor SDK to build (HIP, Level Zero, OpenCL) declares the C
//! functions it calls by hand and resolves them with `libloading` when it starts. The table
//! keeps its library loaded for the life of the process: a vendor runtime unloaded while
//! anything of it still runs (its threads, its drivers, a queue) is not safe, and xhal never
//! unloads plugins for the same reason.

/// Why a [`function_table!`](crate::function_table) could not be opened. Each message names
/// the library as it was asked for; a backend puts its own words around it (what the library
/// is, what to install).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The library itself could not be opened (not found, not a library, a missing dependency).
    #[error("{library}: {error}")]
    Open {
        /// The name or path the library was asked for by.
        library: String,
        /// The dynamic loader's explanation.
        error: libloading::Error,
    },
    /// The library opened but lacks an entry point the table requires.
    #[error("{library} has no {symbol} ({error})")]
    MissingSymbol {
        /// The name or path the library was opened by.
        library: String,
        /// The entry point that is missing.
        symbol: &'static str,
        /// The dynamic loader's explanation.
        error: libloading::Error,
    },
}

impl LoadError {
    /// The name or path of the library at fault.
    pub fn library(&self) -> &str {
        match self {
            LoadError::Open { library, .. } | LoadError::MissingSymbol { library, .. } => library,
        }
    }
}

/// Declares a struct of function pointers resolved from a shared library at run time.
///
/// ```text
/// function_table! {
///     /// Docs of the struct.
///     VISIBILITY struct NAME: extern "ABI";
///     required {
///         FIELD = "SYMBOL": fn(ARGUMENT, ...) -> RESULT;
///         ...
///     }
///     optional {
///         FIELD = "SYMBOL": fn(ARGUMENT, ...) -> RESULT;
///         ...
///     }
/// }
/// ```
///
/// Each `required` entry becomes a field holding `unsafe extern "ABI" fn(...) -> R`, and each
/// `optional` entry a field holding `Option` of it (`None` where the library does not export
/// the symbol). The struct gets:
///
/// - `unsafe fn open(library: &str) -> Result<Self, xhal_backend::ffi::LoadError>`: opens
///   `library` (a file name the dynamic loader searches for, or a path) and resolves every
///   entry. A library that does not open is [`LoadError::Open`]; a missing required entry is
///   [`LoadError::MissingSymbol`], naming the library and the symbol. The library is never
///   unloaded, so the pointers stay valid for the life of the process.
/// - `fn library_name(&self) -> &str`: the name or path it was opened by, for messages.
///
/// The fields and both functions take the struct's visibility. The table is `Send` and `Sync`
/// (plain function pointers and a library handle); whether a function may be called from
/// several threads is the library's contract, kept by each (unsafe) call.
///
/// `libloading` is reached through `xhal_backend::libloading`, so the backend needs no
/// dependency of its own for the table.
///
/// # Safety of `open`
///
/// Opening a library runs its initialisers, and every call through the table trusts the
/// declared signature: the caller of `open` vouches that the library's initialisers are safe
/// to run in this process and that each declared signature (arguments, result, ABI) is the
/// one the library defines for that symbol.
///
/// # Example
///
/// ```no_run
/// use std::ffi::c_char;
///
/// xhal_backend::function_table! {
///     /// The two functions of the C library this example calls.
///     pub(crate) struct Libc: extern "C";
///     required {
///         strlen = "strlen": fn(*const c_char) -> usize;
///     }
///     optional {
///         /// Not in every C library.
///         strnlen = "strnlen": fn(*const c_char, usize) -> usize;
///     }
/// }
///
/// // SAFETY: the C library's initialisers have already run in this process; both signatures
/// // are those of <string.h>.
/// let libc = unsafe { Libc::open("libc.so.6") }?;
/// // SAFETY: a NUL-terminated string.
/// assert_eq!(unsafe { (libc.strlen)(c"xhal".as_ptr()) }, 4);
/// assert_eq!(libc.library_name(), "libc.so.6");
/// # Ok::<(), xhal_backend::ffi::LoadError>(())
/// ```
#[macro_export]
macro_rules! function_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $table:ident : extern $abi:literal;
        required {
            $(
                $(#[$field_meta:meta])*
                $field:ident = $symbol:literal : fn($($argument:ty),* $(,)?) -> $result:ty;
            )*
        }
        $(optional {
            $(
                $(#[$optional_meta:meta])*
                $optional_field:ident = $optional_symbol:literal
                    : fn($($optional_argument:ty),* $(,)?) -> $optional_result:ty;
            )*
        })?
    ) => {
        $(#[$meta])*
        $vis struct $table {
            $(
                $(#[$field_meta])*
                $vis $field: unsafe extern $abi fn($($argument),*) -> $result,
            )*
            $($(
                $(#[$optional_meta])*
                $vis $optional_field: ::std::option::Option<unsafe extern $abi fn($($optional_argument),*) -> $optional_result>,
            )*)?
            /// Never dropped: the entry points must outlive every caller.
            _library: ::std::mem::ManuallyDrop<$crate::libloading::Library>,
            library_name: ::std::string::String,
        }

        impl $table {
            /// Opens `library` and resolves every entry point: `LoadError::Open` where the
            /// library does not open, `LoadError::MissingSymbol` where it lacks a required one.
            ///
            /// # Safety
            /// Opening `library` runs its initialisers, and the declared signatures are
            /// trusted: the caller vouches that the initialisers are safe to run in this
            /// process and that every declared signature is the one the library defines.
            $vis unsafe fn open(library: &str) -> ::std::result::Result<$table, $crate::ffi::LoadError> {
                // SAFETY: the caller vouches for the library's initialisers.
                let loaded = unsafe { $crate::libloading::Library::new(library) }.map_err(|error| {
                    $crate::ffi::LoadError::Open {
                        library: ::std::string::ToString::to_string(library),
                        error,
                    }
                })?;
                // SAFETY: the caller vouches for each signature; the pointers stay valid
                // because the library is kept in a `ManuallyDrop` and never unloaded.
                unsafe {
                    ::std::result::Result::Ok($table {
                        $(
                            $field: *loaded
                                .get::<unsafe extern $abi fn($($argument),*) -> $result>(
                                    ::std::concat!($symbol, "\0").as_bytes(),
                                )
                                .map_err(|error| $crate::ffi::LoadError::MissingSymbol {
                                    library: ::std::string::ToString::to_string(library),
                                    symbol: $symbol,
                                    error,
                                })?,
                        )*
                        $($(
                            $optional_field: loaded
                                .get::<unsafe extern $abi fn($($optional_argument),*) -> $optional_result>(
                                    ::std::concat!($optional_symbol, "\0").as_bytes(),
                                )
                                .ok()
                                .map(|symbol| *symbol),
                        )*)?
                        _library: ::std::mem::ManuallyDrop::new(loaded),
                        library_name: ::std::string::ToString::to_string(library),
                    })
                }
            }

            /// The name or path the library was opened by.
            #[allow(dead_code)]
            $vis fn library_name(&self) -> &str {
                &self.library_name
            }
        }
    };
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::LoadError;
    use std::ffi::c_char;

    /// The C library, which every Linux process has loaded.
    const LIBC: &str = "libc.so.6";

    crate::function_table! {
        /// Entry points every C library has, and one none has.
        struct Libc: extern "C";
        required {
            strlen = "strlen": fn(*const c_char) -> usize;
            abs = "abs": fn(i32,) -> i32;
        }
        optional {
            /// Present.
            strnlen = "strnlen": fn(*const c_char, usize) -> usize;
            /// Absent.
            absent = "xhal_function_no_library_has": fn() -> i32;
        }
    }

    crate::function_table! {
        /// A table whose second required entry no library has; it never opens.
        #[allow(dead_code)]
        struct Missing: extern "C";
        required {
            strlen = "strlen": fn(*const c_char) -> usize;
            absent = "xhal_function_no_library_has": fn() -> i32;
        }
    }

    crate::function_table! {
        /// `extern "system"` (the C ABI on Linux) and no optional entries.
        struct System: extern "system";
        required {
            strlen = "strlen": fn(*const c_char) -> usize;
        }
    }

    fn assert_send_and_sync<T: Send + Sync>() {}

    #[test]
    fn a_table_resolves_and_calls_what_the_library_exports() {
        // SAFETY: the C library is already loaded and initialised in this process; the
        // signatures are those of <string.h> and <stdlib.h>.
        let libc = unsafe { Libc::open(LIBC) }.unwrap_or_else(|error| panic!("{error}"));
        // SAFETY: NUL-terminated strings; `strnlen` reads at most 3 bytes.
        unsafe {
            assert_eq!((libc.strlen)(c"xhal".as_ptr()), 4);
            assert_eq!((libc.abs)(-7), 7);
            let strnlen = libc.strnlen.expect("glibc exports strnlen");
            assert_eq!(strnlen(c"xhal".as_ptr(), 3), 3);
        }
        assert!(libc.absent.is_none());
        assert_eq!(libc.library_name(), LIBC);
        // SAFETY: as above.
        let system = unsafe { System::open(LIBC) }.unwrap_or_else(|error| panic!("{error}"));
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { (system.strlen)(c"".as_ptr()) }, 0);
        assert_send_and_sync::<Libc>();
    }

    #[test]
    fn a_missing_entry_point_names_the_library_and_the_symbol() {
        // SAFETY: as above; the missing symbol is never called.
        let error = match unsafe { Missing::open(LIBC) } {
            Ok(_) => panic!("{LIBC} exports xhal_function_no_library_has"),
            Err(error) => error,
        };
        assert!(
            matches!(&error, LoadError::MissingSymbol { library, symbol: "xhal_function_no_library_has", .. } if library == LIBC),
            "{error:?}"
        );
        assert_eq!(error.library(), LIBC);
        let message = error.to_string();
        assert!(
            message.starts_with("libc.so.6 has no xhal_function_no_library_has ("),
            "{message}"
        );
    }

    #[test]
    fn a_missing_library_is_named() {
        let library = "libxhal_no_such_library.so.1";
        // SAFETY: nothing is loaded: the library does not exist.
        let error = match unsafe { Libc::open(library) } {
            Ok(_) => panic!("{library} opened"),
            Err(error) => error,
        };
        assert!(matches!(error, LoadError::Open { .. }), "{error:?}");
        assert_eq!(error.library(), library);
        assert!(
            error.to_string().starts_with("libxhal_no_such_library.so.1: "),
            "{error}"
        );
    }
}

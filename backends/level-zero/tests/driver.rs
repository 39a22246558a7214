//! The backend without a loader, and with Debian's loader (`libze1`) but no driver behind it.

use xhal_backend::{Backend, ErrorKind};
use xhal_level_zero::{LevelZeroBackend, LevelZeroDriver};

/// Where Debian and Ubuntu install the loader.
const SYSTEM_LOADER: &str = "libze_loader.so.1";

#[test]
fn missing_loader_is_driver_unavailable() {
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path("/nonexistent/libze_loader.so.1"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("/nonexistent/libze_loader.so.1"), "{error}");
    assert!(error.message().contains("libze1"), "names what to install: {error}");
    // Asking again gives the same answer, and describing or opening a device is refused too.
    assert_eq!(backend.device_count().unwrap_err(), error);
    assert_eq!(backend.device_info(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// A library that is not a Level Zero loader at all is refused the same way, naming the
/// entry point it lacks.
#[test]
fn a_library_without_the_api_is_driver_unavailable() {
    let backend = LevelZeroBackend::new(LevelZeroDriver::with_library_path("libc.so.6"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("zeInit"), "{error}");
}

/// The real loader with no driver behind it, as Debian's `libze1` is on a machine without
/// an Intel GPU driver: zero devices, and a reason naming the missing driver.
#[test]
fn the_loader_without_a_driver_is_zero_devices_and_a_reason() {
    // SAFETY: probing for the library only; it is never used through this handle.
    if unsafe { libloading::Library::new(SYSTEM_LOADER) }.is_err() {
        let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
        assert!(
            !required.split(',').any(|name| name.trim() == "level-zero"),
            "XHAL_REQUIRE_BACKENDS names level-zero, but {SYSTEM_LOADER} is not installed"
        );
        eprintln!(
            "SKIPPED: {SYSTEM_LOADER} is not installed (apt-get install libze1), so the no-driver path was not checked"
        );
        return;
    }
    let backend = LevelZeroBackend::new(LevelZeroDriver::from_env());
    match backend.device_count() {
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
            assert!(error.message().contains("no Level Zero driver"), "{error}");
            assert!(error.message().contains(SYSTEM_LOADER), "{error}");
            eprintln!("the loader without a driver says: {error}");
        }
        Ok(count) => {
            // A machine with a Level Zero driver: the path under test does not exist here.
            assert!(count > 0, "a device count of zero must be an error with a reason");
            eprintln!("SKIPPED: this machine has a Level Zero driver ({count} device(s)), so the no-driver path was not checked");
        }
    }
}

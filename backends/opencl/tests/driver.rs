//! The backend without a loader, and with a loader but no driver behind it.

use xhal_core::backend::Backend;
use xhal_core::ErrorKind;
use xhal_opencl::{OpenClBackend, OpenClDriver};

/// Set in the child process of [`no_icd_is_driver_unavailable`].
const CHILD_VARIABLE: &str = "XHAL_OPENCL_TEST_NO_ICD_CHILD";

#[test]
fn missing_loader_is_driver_unavailable() {
    let backend = OpenClBackend::new(OpenClDriver::with_library_path("/nonexistent/libOpenCL.so.1"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("/nonexistent/libOpenCL.so.1"), "{error}");
    // Asking again gives the same answer, and describing or opening a device is refused too.
    assert_eq!(backend.device_count().unwrap_err(), error);
    assert_eq!(backend.device_info(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
}

/// A library that is not an OpenCL loader at all is refused the same way, naming the entry
/// point it lacks.
#[test]
fn a_library_without_the_api_is_driver_unavailable() {
    let backend = OpenClBackend::new(OpenClDriver::with_library_path("libc.so.6"));
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("clGetPlatformIDs"), "{error}");
}

/// The loader is present but finds no driver: run in a child process whose environment points
/// the loader at a vendor folder that does not exist.
#[test]
fn no_icd_is_driver_unavailable() {
    if std::env::var_os(CHILD_VARIABLE).is_some() {
        return;
    }
    if let Err(error) = OpenClBackend::new(OpenClDriver::with_library_path("libOpenCL.so.1")).device_count() {
        if error.message().contains("could not be loaded") {
            require_unless_absent(&error.to_string());
            eprintln!("SKIPPED: no OpenCL loader on this machine: {error}");
            return;
        }
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "no_icd_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_VARIABLE, "1")
        .env("OCL_ICD_VENDORS", "/nonexistent/vendors")
        .env("OPENCL_VENDOR_PATH", "/nonexistent/vendors")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    assert!(text.contains("no platform"), "{text}");
}

#[test]
fn no_icd_child() {
    if std::env::var_os(CHILD_VARIABLE).is_none() {
        return;
    }
    let backend = OpenClBackend::new(OpenClDriver::from_env());
    let error = backend.device_count().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::DriverUnavailable, "{error}");
    assert!(error.message().contains("libOpenCL.so.1"), "{error}");
    assert_eq!(backend.device_open(0).unwrap_err().kind(), ErrorKind::DriverUnavailable);
    eprintln!("reason: {error}");
}

/// Fails when CI requires the backend (`XHAL_REQUIRE_BACKENDS` names `opencl`) and it is
/// missing: a missing driver must never pass as a quiet skip there.
fn require_unless_absent(reason: &str) {
    let required = std::env::var("XHAL_REQUIRE_BACKENDS").unwrap_or_default();
    assert!(
        !required.split(',').any(|name| name.trim() == "opencl"),
        "XHAL_REQUIRE_BACKENDS names opencl, but it is unavailable: {reason}"
    );
}

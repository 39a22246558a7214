//! Keeping libwayland's complaint about a missing `XDG_RUNTIME_DIR` off stderr.
//!
//! wgpu enables `VK_KHR_wayland_surface` on its Vulkan instance whenever the driver offers it,
//! and Mesa's implicit `VK_LAYER_MESA_device_select` then asks the Wayland compositor which GPU
//! is the default, through `wl_display_connect`. On a machine without a Wayland session (a
//! server, a container, CI) libwayland answers by printing `error: XDG_RUNTIME_DIR is invalid
//! or not set in the environment.` to stderr, twice per enumeration, though nothing failed
//! that a compute SDK needs. A command that succeeds must print nothing on stderr.
//!
//! So when this process cannot reach a compositor at all (the same test libwayland makes),
//! libwayland's client log is routed to `tracing` at debug level before wgpu enumerates its
//! adapters. Only then: in a process that can reach one, libwayland's messages are left alone.
//! The handler stays for the life of the process, since libwayland offers no way to read the
//! previous one back; any client message in such a process can only be this same failure.

use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;

/// `wl_log_func_t`: a printf format and its `va_list`, which this handler never reads (the
/// message it exists for has no arguments), so its ABI representation does not matter.
type LogHandler = unsafe extern "C" fn(format: *const c_char, arguments: *mut c_void);

unsafe extern "C" fn log_to_tracing(format: *const c_char, _arguments: *mut c_void) {
    if format.is_null() {
        return;
    }
    // SAFETY: libwayland passes a NUL-terminated format string that lives for the call.
    let format = unsafe { CStr::from_ptr(format) };
    tracing::debug!(target: "xhal_wgpu::wayland", message = %format.to_string_lossy().trim_end(), "libwayland");
}

/// Whether libwayland could find a compositor's socket here: `WAYLAND_SOCKET`, an absolute
/// `WAYLAND_DISPLAY`, or an absolute `XDG_RUNTIME_DIR` to find the display's socket in.
fn wayland_reachable(variable: impl Fn(&str) -> Option<String>) -> bool {
    let absolute = |name: &str| variable(name).is_some_and(|value| value.starts_with('/'));
    variable("WAYLAND_SOCKET").is_some() || absolute("WAYLAND_DISPLAY") || absolute("XDG_RUNTIME_DIR")
}

/// Routes libwayland's client log to `tracing` when no compositor can be reached (see the
/// module documentation). Does nothing where libwayland is not installed. Runs once.
pub(crate) fn quiet_when_unreachable() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        if wayland_reachable(|name| std::env::var(name).ok()) {
            return;
        }
        // SAFETY: libwayland-client's initialisers only set up its defaults; loading it (or
        // finding it already loaded, as Mesa's layer loads it) has no other side effect.
        let library = match unsafe { libloading::Library::new("libwayland-client.so.0") } {
            Ok(library) => library,
            Err(_) => return,
        };
        // SAFETY: `wl_log_set_handler_client` has this signature in every libwayland release.
        let set_handler =
            match unsafe { library.get::<unsafe extern "C" fn(LogHandler)>(b"wl_log_set_handler_client\0") } {
                Ok(symbol) => symbol,
                Err(_) => return,
            };
        // SAFETY: the handler is a plain function that lives as long as the process.
        unsafe { set_handler(log_to_tracing) };
        tracing::debug!("no Wayland compositor reachable: libwayland's client log goes to tracing");
        // The handler must outlive every later call into libwayland: never unload it.
        std::mem::forget(library);
    });
}

#[cfg(test)]
mod tests {
    use super::wayland_reachable;

    fn with(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        }
    }

    #[test]
    fn a_compositor_is_reachable_only_through_an_absolute_path_or_a_socket() {
        assert!(!wayland_reachable(with(&[])));
        assert!(!wayland_reachable(with(&[("XDG_RUNTIME_DIR", "relative/dir")])));
        assert!(!wayland_reachable(with(&[("WAYLAND_DISPLAY", "wayland-0")])));
        assert!(wayland_reachable(with(&[("XDG_RUNTIME_DIR", "/run/user/0")])));
        assert!(wayland_reachable(with(&[("WAYLAND_DISPLAY", "/tmp/wayland-1")])));
        assert!(wayland_reachable(with(&[("WAYLAND_SOCKET", "3")])));
    }
}

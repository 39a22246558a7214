//! How many CPU devices to simulate and how much memory each one has.

use std::ffi::OsString;
use std::time::Duration;
use xhal_backend::{Error, Result};

/// Environment variable giving the number of CPU devices (default 1).
pub const DEVICES_VARIABLE: &str = "XHAL_CPU_DEVICES";
/// Environment variable giving each CPU device's memory in bytes (default: half the host's memory).
pub const MEMORY_VARIABLE: &str = "XHAL_CPU_MEMORY";

/// Environment variable giving the longest a WGSL kernel may run, in seconds (a decimal
/// number, default [`DEFAULT_KERNEL_TIMEOUT`]); a kernel running longer is stopped with a
/// `Timeout` error and the stream stays usable.
pub const KERNEL_TIMEOUT_VARIABLE: &str = "XHAL_KERNEL_TIMEOUT";

/// The kernel time limit when [`KERNEL_TIMEOUT_VARIABLE`] is unset.
pub const DEFAULT_KERNEL_TIMEOUT: Duration = Duration::from_secs(60);

/// Memory per device when the host's total memory cannot be read.
pub const FALLBACK_MEMORY_PER_DEVICE: u64 = 4 << 30;

/// The shape of a [`CpuBackend`](crate::CpuBackend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuConfig {
    /// Number of devices; each is an independent memory pool with its own streams.
    pub devices: u32,
    /// Bytes each device may hand out; allocations beyond it fail with `OutOfMemory`.
    pub memory_per_device: u64,
}

impl Default for CpuConfig {
    /// One device with [`default_memory_per_device`] bytes.
    fn default() -> CpuConfig {
        CpuConfig {
            devices: 1,
            memory_per_device: default_memory_per_device(),
        }
    }
}

impl CpuConfig {
    /// Reads [`DEVICES_VARIABLE`] and [`MEMORY_VARIABLE`]; unset variables take the defaults.
    /// A malformed value is an `InvalidArgument` error naming the variable and what it expects.
    pub fn from_env() -> Result<CpuConfig> {
        CpuConfig::from_lookup(|name| std::env::var_os(name))
    }

    /// [`from_env`](CpuConfig::from_env) over any variable source, so tests need not touch
    /// the process environment (which other threads may be reading).
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<CpuConfig> {
        let devices = match lookup(DEVICES_VARIABLE) {
            None => 1,
            Some(value) => parse_variable(DEVICES_VARIABLE, &value, "a whole number of devices")?,
        };
        let memory_per_device = match lookup(MEMORY_VARIABLE) {
            None => default_memory_per_device(),
            Some(value) => parse_variable(MEMORY_VARIABLE, &value, "a whole number of bytes, without a unit")?,
        };
        Ok(CpuConfig {
            devices,
            memory_per_device,
        })
    }
}

/// The kernel time limit, as read from [`KERNEL_TIMEOUT_VARIABLE`] when the backend was made.
///
/// A malformed value does not stop the backend from being created (nothing but kernels
/// depends on it): it is reported by every launch that would need the limit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KernelTimeout {
    Limit(Duration),
    Malformed(String),
}

impl KernelTimeout {
    pub(crate) fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> KernelTimeout {
        let Some(value) = lookup(KERNEL_TIMEOUT_VARIABLE) else {
            return KernelTimeout::Limit(DEFAULT_KERNEL_TIMEOUT);
        };
        let text = value.to_string_lossy();
        let seconds = text.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0);
        match seconds.and_then(|s| Duration::try_from_secs_f64(s).ok()) {
            Some(limit) => KernelTimeout::Limit(limit),
            None => KernelTimeout::Malformed(format!(
                "{KERNEL_TIMEOUT_VARIABLE} must be a positive number of seconds (such as `60` or `0.5`), got `{text}`"
            )),
        }
    }

    /// The limit, or the `InvalidArgument` error naming the variable.
    pub(crate) fn limit(&self) -> Result<Duration> {
        match self {
            KernelTimeout::Limit(limit) => Ok(*limit),
            KernelTimeout::Malformed(message) => Err(Error::invalid_argument(message.clone())),
        }
    }
}

fn parse_variable<T>(name: &str, value: &OsString, expected: &str) -> Result<T>
where
    T: std::str::FromStr + Bounded,
{
    let expectation = format!("{expected} from 0 to {}", T::MAX_TEXT);
    let Some(text) = value.to_str() else {
        return Err(Error::invalid_argument(format!(
            "{name} must be {expectation}, got a value that is not valid UTF-8"
        )));
    };
    text.trim()
        .parse()
        .map_err(|_| Error::invalid_argument(format!("{name} must be {expectation}, got `{text}`")))
}

/// The largest value of a parsed type, for error messages.
trait Bounded {
    const MAX_TEXT: &'static str;
}

impl Bounded for u32 {
    const MAX_TEXT: &'static str = "4294967295";
}

impl Bounded for u64 {
    const MAX_TEXT: &'static str = "18446744073709551615";
}

/// Half of the host's memory (`MemTotal` in `/proc/meminfo`), or
/// [`FALLBACK_MEMORY_PER_DEVICE`] where that cannot be read. Half, so that a program filling
/// the simulated device still leaves the host room to run.
pub fn default_memory_per_device() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text))
        .map(|total| total / 2)
        .filter(|half| *half > 0)
        .unwrap_or(FALLBACK_MEMORY_PER_DEVICE)
}

/// `MemTotal` from the text of `/proc/meminfo`, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let amount: u64 = fields.next()?.parse().ok()?;
    let multiplier = match fields.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    amount.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_backend::ErrorKind;

    fn lookup_from(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(*value))
        }
    }

    #[test]
    fn unset_variables_take_the_defaults() {
        let config = CpuConfig::from_lookup(lookup_from(&[])).unwrap();
        assert_eq!(config.devices, 1);
        assert_eq!(config.memory_per_device, default_memory_per_device());
        assert!(config.memory_per_device > 0);
    }

    #[test]
    fn set_variables_are_read() {
        let config =
            CpuConfig::from_lookup(lookup_from(&[(DEVICES_VARIABLE, "3"), (MEMORY_VARIABLE, "1048576")])).unwrap();
        assert_eq!(
            config,
            CpuConfig {
                devices: 3,
                memory_per_device: 1 << 20
            }
        );
    }

    #[test]
    fn malformed_variables_name_the_variable_and_the_expectation() {
        let devices = CpuConfig::from_lookup(lookup_from(&[(DEVICES_VARIABLE, "two")])).unwrap_err();
        assert_eq!(devices.kind(), ErrorKind::InvalidArgument);
        assert!(devices.message().contains(DEVICES_VARIABLE), "{devices}");
        assert!(devices.message().contains("`two`"), "{devices}");
        assert!(devices.message().contains("whole number of devices"), "{devices}");

        let memory = CpuConfig::from_lookup(lookup_from(&[(MEMORY_VARIABLE, "4G")])).unwrap_err();
        assert_eq!(memory.kind(), ErrorKind::InvalidArgument);
        assert!(memory.message().contains(MEMORY_VARIABLE), "{memory}");
        assert!(memory.message().contains("bytes"), "{memory}");
    }

    #[test]
    fn kernel_timeout_is_read_in_seconds_and_a_bad_value_names_the_variable() {
        assert_eq!(
            KernelTimeout::from_lookup(lookup_from(&[])).limit().unwrap(),
            DEFAULT_KERNEL_TIMEOUT
        );
        let half = KernelTimeout::from_lookup(lookup_from(&[(KERNEL_TIMEOUT_VARIABLE, " 0.5 ")]));
        assert_eq!(half.limit().unwrap(), Duration::from_millis(500));
        for bad in ["soon", "-1", "0", "inf"] {
            let pairs: &'static [(&'static str, &'static str)] = match bad {
                "soon" => &[(KERNEL_TIMEOUT_VARIABLE, "soon")],
                "-1" => &[(KERNEL_TIMEOUT_VARIABLE, "-1")],
                "0" => &[(KERNEL_TIMEOUT_VARIABLE, "0")],
                _ => &[(KERNEL_TIMEOUT_VARIABLE, "inf")],
            };
            let error = KernelTimeout::from_lookup(lookup_from(pairs)).limit().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidArgument);
            assert!(error.message().contains(KERNEL_TIMEOUT_VARIABLE), "{error}");
            assert!(error.message().contains(&format!("`{bad}`")), "{error}");
        }
    }

    #[test]
    fn meminfo_total_is_parsed_in_bytes() {
        let text = "MemTotal:       16318424 kB\nMemFree:         1000 kB\n";
        assert_eq!(mem_total_bytes(text), Some(16318424 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots kB"), None);
    }
}

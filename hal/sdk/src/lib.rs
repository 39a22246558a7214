//! xhal: one API for every accelerator.
//!
//! ```no_run
//! use xhal::{Runtime, Selector};
//!
//! # fn main() -> xhal::Result<()> {
//! let runtime = Runtime::discover()?;                       // built-in CPU backend + plugins
//! let (device, why) = runtime.choose(&Selector::from_env()?)?; // XHAL_DEVICE, or the best device
//! println!("{}: {}", device.label(), why.summary);
//! let stream = device.create_stream()?;
//! let buffer = device.alloc_from(&stream, &[1u32, 2, 3, 4])?;
//! assert_eq!(stream.read_to_vec(&buffer)?, [1, 2, 3, 4]);
//! # Ok(())
//! # }
//! ```
//!
//! This crate re-exports `xhal-core` and links the CPU reference backend, so an application
//! always has a device, even on a machine with no accelerator and no plugins.

pub use xhal_core::*;

/// The CPU reference backend, linked in.
pub use xhal_cpu as cpu;

/// The README's examples, compiled and run as doctests so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

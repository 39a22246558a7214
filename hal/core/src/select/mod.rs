//! Finding and choosing a device: the `XHAL_DEVICE` grammar ([`DeviceSelector`]) and the
//! [`Selector`] that code uses, with policies and requirements.
//!
//! `XHAL_DEVICE` is a comma-separated list of terms:
//!
//! ```text
//! selector := term (',' term)*          whitespace around terms is allowed
//! term     := '!'? atom
//! atom     := '*' | WORD | WORD ':' device
//! device   := '*' | INDEX | TYPEWORD
//! WORD     := [a-z][a-z0-9_-]*          a backend name, or a device-type word
//! TYPEWORD := cpu | gpu | discrete | discrete_gpu | integrated | integrated_gpu
//!           | accelerator | other
//! ```
//!
//! - A bare `WORD` matches the devices of backend `WORD` and, when `WORD` is a type word, every
//!   device of that type: `cpu` matches the `cpu` backend and any CPU; `gpu` matches integrated
//!   and discrete GPUs of every backend.
//! - `vulkan:0` is device 0 of backend `vulkan`, `vulkan:*` any of its devices, `vulkan:gpu`
//!   its GPUs.
//! - `!term` excludes whatever the term matches, wherever it appears in the list.
//! - Positive terms are an order of preference (`cuda,vulkan,cpu`) and restrict the choice to
//!   what they name. A list of only negative terms (`!cpu`) allows anything not excluded.
//!
//! Every choice explains itself: [`Selector::choose`] returns an [`Explanation`] with a verdict
//! for every candidate, and an error that lists what is present when nothing was chosen.
//!
//! The grammar is parsed in `grammar.rs`; choosing and explaining are in `policy.rs`.

mod grammar;
mod policy;
#[cfg(test)]
mod tests;

pub use grammar::DeviceSelector;
pub use policy::{Candidate, Choice, Explanation, Policy, Ranking, Selector, Verdict};

/// The environment variable read by [`Selector::from_env`].
pub const ENV_VAR: &str = "XHAL_DEVICE";

//! What happens to the Vulkan validation layer's messages when validation is turned on.
//!
//! wgpu passes the layer's messages to the `log` crate only; they never become API errors.
//! With validation on, this backend forwards them to `tracing` so that none is lost, and
//! recognises the one message that is known to be wrong. With wgpu's `DEBUG` flag, naga
//! records the WGSL source in every SPIR-V module's `OpSource`, with source language 10
//! (WGSL); the Khronos layer of Vulkan SDK 1.3.239, packaged on Debian 12, predates that
//! value and reports each shader module as "SPIR-V module not valid: Invalid source language
//! operand: 10". That message, and the object list wgpu logs right after it, are logged at
//! debug level with the reason; every other message keeps its level.

use std::sync::atomic::{AtomicBool, Ordering};

/// The layer's own words for the check that refuses source language 10.
const SPURIOUS_CHECK: &str = "UNASSIGNED-CoreValidation-Shader-InconsistentSpirv";
const SPURIOUS_DETAIL: &str = "Invalid source language operand: 10";

/// Set after the spurious message, so that the object list wgpu logs for it follows it.
static AFTER_SPURIOUS: AtomicBool = AtomicBool::new(false);

/// True for the layer's refusal of naga's source-language tag.
pub(crate) fn is_spurious_source_language(message: &str) -> bool {
    message.contains(SPURIOUS_CHECK) && message.contains(SPURIOUS_DETAIL)
}

struct ForwardToTracing;

impl log::Log for ForwardToTracing {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = record.args().to_string();
        let spurious = is_spurious_source_language(&message);
        let object_list = message.trim_start().starts_with("objects:");
        let follows_spurious = AFTER_SPURIOUS.swap(spurious, Ordering::Relaxed);
        if spurious || (object_list && follows_spurious) {
            tracing::debug!(
                source = record.target(),
                %message,
                "the Vulkan validation layer refused naga's SPIR-V source-language tag, which it is too old to know; ignored"
            );
            return;
        }
        match record.level() {
            log::Level::Error => tracing::error!(source = record.target(), "{message}"),
            _ => tracing::warn!(source = record.target(), "{message}"),
        }
    }

    fn flush(&self) {}
}

/// Forwards wgpu's warnings and errors to `tracing`, unless the process already has a logger
/// (an application linking this backend statically may have its own, which then sees them).
pub(crate) fn forward_wgpu_log() {
    static FORWARDER: ForwardToTracing = ForwardToTracing;
    if log::set_logger(&FORWARDER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_source_language_message_is_spurious() {
        assert!(is_spurious_source_language(
            "Validation Error: [ UNASSIGNED-CoreValidation-Shader-InconsistentSpirv ] Object 0: handle = 0x1, \
             type = VK_OBJECT_TYPE_DEVICE; | MessageID = 0x6bbb14 | SPIR-V module not valid: Invalid source \
             language operand: 10"
        ));
        assert!(!is_spurious_source_language(
            "Validation Error: [ UNASSIGNED-CoreValidation-Shader-InconsistentSpirv ] SPIR-V module not valid: \
             OpLoad Pointer type does not match"
        ));
        assert!(!is_spurious_source_language("Invalid source language operand: 10"));
    }
}

//! Logging for a backend loaded as a plugin.

/// Sends the calling library's logs to stderr, filtered by `XHAL_LOG` (warnings by default).
///
/// Loaded as a plugin, a library has its own copy of `tracing`, which does not see the host's
/// subscriber, so a plugin's constructor calls this. Linked into a program that already has a
/// subscriber, it does nothing.
pub fn init_logging() {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let directives = std::env::var("XHAL_LOG").unwrap_or_default();
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse_lossy(if directives.trim().is_empty() {
            "warn"
        } else {
            directives.as_str()
        });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

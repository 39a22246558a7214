//! Logging for a backend loaded as a plugin.
//!
//! Loaded as a plugin, a library has its own copy of `tracing`, which does not see the host's
//! subscriber, so a plugin writes its own logs to stderr. This is a small subscriber of its
//! own rather than `tracing-subscriber`, so that a plugin pulls in no log framework: it reads
//! `XHAL_LOG` with the directives people use (`debug`, `xhal_cuda=trace,warn`: a level, or a
//! target prefix and its level; the longest matching prefix wins) and prints one line per
//! event.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Sends the calling library's logs to stderr, filtered by `XHAL_LOG` (warnings by default).
/// Linked into a program that already has a subscriber, it does nothing.
pub fn init_logging() {
    let directives = std::env::var("XHAL_LOG").unwrap_or_default();
    let _ = tracing::subscriber::set_global_default(StderrLog::new(&directives));
}

/// The subscriber: a filter and a span counter (spans are not printed, only events).
struct StderrLog {
    filter: Filter,
    next_span: AtomicU64,
}

impl StderrLog {
    fn new(directives: &str) -> StderrLog {
        StderrLog {
            filter: Filter::parse(directives),
            next_span: AtomicU64::new(1),
        }
    }
}

/// `XHAL_LOG`'s directives: a default level and levels by target prefix.
#[derive(Debug, PartialEq)]
struct Filter {
    default: LevelFilter,
    by_target: Vec<(String, LevelFilter)>,
}

impl Filter {
    /// Unreadable directives are skipped, as a log setting must never stop a plugin.
    fn parse(directives: &str) -> Filter {
        let mut filter = Filter {
            default: LevelFilter::WARN,
            by_target: Vec::new(),
        };
        for directive in directives.split(',').map(str::trim).filter(|text| !text.is_empty()) {
            match directive.split_once('=') {
                Some((target, level)) => {
                    if let Ok(level) = level.trim().parse::<LevelFilter>() {
                        filter.by_target.push((target.trim().to_owned(), level));
                    }
                }
                None => match directive.parse::<LevelFilter>() {
                    Ok(level) => filter.default = level,
                    // A bare target means all of its levels, as in `tracing-subscriber`.
                    Err(_) => filter.by_target.push((directive.to_owned(), LevelFilter::TRACE)),
                },
            }
        }
        filter
    }

    fn level_for(&self, target: &str) -> LevelFilter {
        self.by_target
            .iter()
            .filter(|(prefix, _)| target.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map_or(self.default, |(_, level)| *level)
    }

    fn most_verbose(&self) -> LevelFilter {
        self.by_target
            .iter()
            .map(|(_, level)| *level)
            .fold(self.default, LevelFilter::max)
    }
}

/// An event's message and fields as one line.
#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

impl Subscriber for StderrLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.filter.level_for(metadata.target())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.filter.most_verbose())
    }

    fn new_span(&self, _attributes: &Attributes<'_>) -> Id {
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed))
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let metadata = event.metadata();
        let mut line = Line::default();
        event.record(&mut line);
        // One write per line, so lines of concurrent threads do not interleave.
        let text = format!(
            "{:>5} {}: {}{}\n",
            metadata.level(),
            metadata.target(),
            line.message,
            line.fields
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_set_a_default_and_levels_by_the_longest_target_prefix() {
        let filter = Filter::parse(" xhal_cuda=trace, info ,xhal_cuda::stream=error,nonsense=loud");
        assert_eq!(filter.level_for("xhal_opencl::stream"), LevelFilter::INFO);
        assert_eq!(filter.level_for("xhal_cuda::module"), LevelFilter::TRACE);
        assert_eq!(filter.level_for("xhal_cuda::stream"), LevelFilter::ERROR);
        assert_eq!(filter.most_verbose(), LevelFilter::TRACE);
        assert_eq!(Filter::parse("").level_for("anything"), LevelFilter::WARN);
        assert_eq!(Filter::parse("off").most_verbose(), LevelFilter::OFF);
        assert_eq!(
            Filter::parse("xhal_vulkan").level_for("xhal_vulkan"),
            LevelFilter::TRACE
        );
    }
}

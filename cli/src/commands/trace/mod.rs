//! `xhal trace summary FILE`: where the time of a traced run went (see docs/observability.md).

pub mod summary;
pub mod svg;

use super::{json_text, ExitError, Output, EXIT_USAGE_ERROR};
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum TraceCommand {
    /// Summarise a trace written by XHAL_TRACE or `--trace`: busy and idle time per stream,
    /// the idle gaps with what the host was doing, kernels by device time, copy bandwidths,
    /// memory peaks and host calls.
    ///
    /// Reads a trace cut short by a killed program up to its last whole record.
    Summary(SummaryArgs),
}

#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// The trace file (Chrome trace-event JSON).
    pub file: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// List idle gaps of at least this many microseconds.
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 100.0)]
    pub gap_us: f64,
    /// Only the process with this id, in a trace several processes wrote (`make demo`).
    #[arg(long, value_name = "PID")]
    pub process: Option<u64>,
    /// Also draw the timeline as an SVG picture at this path.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
}

/// The trace a command's `--trace PATH` asks for, recorded until the value is dropped.
pub fn start_for_command(path: Option<&std::path::Path>) -> anyhow::Result<Option<xhal::trace::TraceSession>> {
    path.map(|path| xhal::trace::start(path).with_context(|| format!("--trace {}", path.display())))
        .transpose()
}

pub fn run(args: &TraceArgs) -> anyhow::Result<Output> {
    match &args.command {
        TraceCommand::Summary(summary_args) => run_summary(summary_args),
    }
}

fn run_summary(args: &SummaryArgs) -> anyhow::Result<Output> {
    if !(args.gap_us.is_finite() && args.gap_us > 0.0) {
        return Err(ExitError::wrap(
            EXIT_USAGE_ERROR,
            anyhow::anyhow!(
                "--gap-us {} is not a duration: expected microseconds above 0",
                args.gap_us
            ),
        ));
    }
    let mut trace = summary::read(&args.file)?;
    if let Some(pid) = args.process {
        trace = trace.only_process(pid)?;
    }
    let report = summary::summarise(&args.file, &trace, args.gap_us);
    if let Some(path) = &args.svg {
        std::fs::write(path, svg::render(&trace)).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let text = if args.json {
        json_text(&report)?
    } else {
        summary::render(&report)
    };
    Ok(Output::success(text))
}

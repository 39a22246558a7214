//! `xhal`: see which backends and devices this machine has, what a selector picks and why,
//! what went wrong when a plugin does not show up, what a kernel does (`xhal run`), and how
//! fast the same kernels run on each device (`xhal bench`), and start a plugin of your own
//! (`xhal new-plugin`).
//!
//! Exit codes: 0 success, 1 runtime error, 2 usage error (for `new-plugin`, a NAME or folder it
//! refuses), 3 `xhal doctor` found problems or `xhal bench` found no device to measure.
//! Full reference: `docs/cli.md`.

mod commands;
mod listing;
mod progress;
mod table;

use clap::{Parser, Subcommand};
use commands::{
    bench::BenchArgs, devices::DevicesArgs, doctor::DoctorArgs, info::InfoArgs, new_plugin::NewPluginArgs,
    run::RunArgs, trace::TraceArgs, ExitError, Output, EXIT_RUNTIME_ERROR,
};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

const ENVIRONMENT_HELP: &str = "\
Environment:
  XHAL_DEVICE             which devices an application may use, in order of preference:
                          `cuda:0`, `vulkan`, `gpu`, `cpu`, `vulkan:*,!cpu`
  XHAL_PLUGIN_PATH        colon-separated folders searched first for libxhal_<backend>.so
  XHAL_LOG                log filter for stderr, e.g. `debug` or `xhal_core=trace` (default: warn)
  XHAL_CACHING_ALLOCATOR  `0` turns the caching allocator off
  XHAL_CPU_DEVICES        number of CPU reference devices (default 1)
  XHAL_CPU_MEMORY         bytes of memory per CPU reference device (default: half the host's)
  XHAL_CPU_MODE           how the CPU backend runs WGSL: interpret, compile or auto (default)
  XHAL_CACHE_DIR          where compiled kernels are cached (default ~/.cache/xhal)
  XHAL_NVRTC_LIBRARY      the NVRTC the cuda backend opens (default: libnvrtc.so.13, .so.12, ...)
  XHAL_LEVEL_ZERO_LOADER  the loader the level-zero backend opens (default libze_loader.so.1)
  XHAL_TRACE              write a timeline of the run to this file (Perfetto, `xhal trace summary`)
  XHAL_TRACE_MAX_MB       cap on the trace file's size in MiB (default 512)

Exit codes: 0 success, 1 runtime error, 2 usage error (also a NAME or --dir new-plugin
refuses), 3 doctor found problems or bench found no device to measure.";

/// xhal: list accelerators, explain device selection, diagnose plugins, try and time kernels,
/// start a plugin.
#[derive(Debug, Parser)]
#[command(name = "xhal", version, after_help = ENVIRONMENT_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List every backend and device: backend, device label, name, type, memory, source.
    ///
    /// Lists everything present, whatever XHAL_DEVICE says. A backend without devices is
    /// listed with the reason (a missing driver, say).
    Devices(DevicesArgs),
    /// Describe the device SELECTOR picks, and why it was chosen.
    ///
    /// SELECTOR uses the XHAL_DEVICE grammar: `cpu`, `cpu:0`, `gpu`, `cuda,vulkan`,
    /// `vulkan:*,!cpu`. The device is described, not opened.
    Info(InfoArgs),
    /// Explain discovery: search folders, plugin files and what became of each, built-in
    /// backends, environment, devices, and problems.
    ///
    /// Exits with 3 when it finds a problem: a plugin that failed to load, a malformed
    /// XHAL_DEVICE, or a backend XHAL_DEVICE names that is missing or has no devices.
    Doctor(DoctorArgs),
    /// Run a WGSL kernel on a device with buffers and scalars from the command line, and
    /// print every buffer afterwards.
    ///
    /// Buffers follow the kernel's bindings and scalars the members of its var<immediate>;
    /// the kernel's reflection gives each value its type.
    #[command(after_help = commands::run::AFTER_HELP)]
    Run(RunArgs),
    /// Time the saxpy, matmul and reduction kernels on every device against native Rust
    /// loops measured in the same run, checking every result.
    ///
    /// One table: each kernel on each device (or each device --device accepts), median and
    /// minimum wall time of launch + synchronize, and the ratio to the native single-threaded
    /// loop (bigger is faster). A device or kernel that fails is reported in its row.
    #[command(after_help = commands::bench::AFTER_HELP)]
    Bench(BenchArgs),
    /// Write a new plugin crate, a copy of xhal's plugin template with the names filled in,
    /// that builds and passes xhal-cts as it is.
    ///
    /// The crate is `xhal-NAME` with library `xhal_NAME` and backend `NAME`; it depends on
    /// xhal-backend and xhal-cpu by path (an xhal checkout) or by version. Refuses an invalid
    /// NAME, a reserved one, and a --dir that exists and is not empty (exit 2).
    NewPlugin(NewPluginArgs),
    /// Read a trace written by XHAL_TRACE=PATH or `--trace PATH`: `xhal trace summary FILE`
    /// says where the time went (`--json`, `--svg OUT.svg` draws the timeline).
    Trace(TraceArgs),
}

fn main() -> ExitCode {
    // Usage errors exit with 2 and `--help`/`--version` with 0, as clap decides.
    let cli = Cli::parse();
    // Doctor reports every plugin failure itself; discovery's warnings about them would only
    // repeat its report on stderr. XHAL_LOG, when set, still decides.
    let default_log_filter = match cli.command {
        Command::Doctor(_) => "warn,xhal_core::runtime=error",
        // A kernel fault is the command's error (for bench, its row's); the CPU backend's
        // warning that its stream failed would only say it twice.
        Command::Run(_) | Command::Bench(_) => "warn,xhal_cpu::stream=error",
        _ => "warn",
    };
    init_logging(default_log_filter);
    let result = match &cli.command {
        Command::Devices(args) => commands::devices::run(args),
        Command::Info(args) => commands::info::run(args),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::NewPlugin(args) => commands::new_plugin::run(args),
        Command::Trace(args) => commands::trace::run(args),
    };
    match result {
        Ok(output) => finish(output),
        Err(error) => {
            // `{:#}` writes the whole chain: "context: cause: root cause". A closed stderr is
            // ignored rather than allowed to panic, as `eprintln!` would.
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            let code = error
                .downcast_ref::<ExitError>()
                .map_or(EXIT_RUNTIME_ERROR, |exit| exit.exit_code);
            ExitCode::from(code)
        }
    }
}

/// Writes the command's text to stdout and picks the exit code.
fn finish(output: Output) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout.write_all(output.text.as_bytes()).and_then(|()| stdout.flush()) {
        // A reader that went away (`xhal devices | head -1`) is not an error worth a message.
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = writeln!(std::io::stderr(), "error: writing to stdout: {error}");
            return ExitCode::from(EXIT_RUNTIME_ERROR);
        }
    }
    ExitCode::from(output.exit_code)
}

/// Logs go to stderr, filtered by `XHAL_LOG` (`default_filter` when unset or blank), so
/// stdout stays parseable. A malformed XHAL_LOG falls back to `warn` rather than failing.
fn init_logging(default_filter: &str) {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let from_environment = std::env::var("XHAL_LOG").ok().filter(|value| !value.trim().is_empty());
    let directives = from_environment.as_deref().unwrap_or(default_filter);
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse_lossy(directives);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

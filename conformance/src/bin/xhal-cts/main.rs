//! `xhal-cts`: certifies an xhal plugin against the conformance catalogue.
//!
//! Exit status: 0 when nothing failed, crashed or timed out; 1 when something did; 2 for a
//! usage error; 3 when the run could not start (the plugin does not load, no device, a bad
//! known-failure file, a filter that matches nothing).

mod protocol;
mod supervisor;
mod worker;
mod worker_process;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use xhal_conformance::report::RunOptions;
use xhal_conformance::{catalogue, glob, KnownFailurePolicy, KnownFailures, TargetSpec, TestCase};

/// Exit status: a test failed, crashed or timed out.
pub const EXIT_FAILED: u8 = 1;
/// Exit status: the command line was wrong.
pub const EXIT_USAGE: u8 = 2;
/// Exit status: the run could not start.
pub const EXIT_SETUP: u8 = 3;

#[derive(Parser)]
#[command(
    name = "xhal-cts",
    version,
    about = "Certify an xhal plugin against the conformance suite"
)]
#[command(after_help = "Exit status: 0 all passed, 1 something failed, crashed or timed out, \
2 usage error, 3 the run could not start.\nLogs: XHAL_LOG=debug.")]
struct Cli {
    #[command(subcommand)]
    command: CommandLine,
}

#[derive(Subcommand)]
enum CommandLine {
    /// List the catalogue: every test's id, profile and what a pass proves.
    List {
        /// One JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// Only tests whose id matches one of these comma-separated globs (`memory.*,*overlap*`).
        #[arg(long)]
        filter: Option<String>,
    },
    /// Run the catalogue against a plugin and report.
    Run(RunArgs),
    /// Internal: the per-test worker process.
    #[command(hide = true)]
    Worker {
        #[arg(long, conflicts_with = "backend", required_unless_present = "backend")]
        plugin: Option<PathBuf>,
        #[arg(long)]
        backend: Option<String>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// The plugin file to certify (`libxhal_NAME.so`), loaded on its own.
    #[arg(long, conflicts_with = "backend", required_unless_present = "backend")]
    plugin: Option<PathBuf>,
    /// A backend found by the usual discovery (built-in, then XHAL_PLUGIN_PATH and the search folders).
    #[arg(long)]
    backend: Option<String>,
    /// Which devices of the backend, in XHAL_DEVICE syntax (`cpu:0`, `vulkan:gpu`); default all.
    #[arg(long, value_name = "SELECTOR")]
    device: Option<String>,
    /// Only tests whose id matches one of these comma-separated globs.
    #[arg(long, value_name = "GLOB")]
    filter: Option<String>,
    /// Run every test in a process of its own (slower; crashes are caught either way).
    #[arg(long)]
    isolate: bool,
    /// Worker processes running tests at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    jobs: usize,
    /// Seconds a test may take before it is stopped and reported as timed out.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    timeout: f64,
    /// Write report.json, junit.xml and certificate.json into this folder.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// TOML file declaring known failures (see docs/conformance.md).
    #[arg(long, value_name = "FILE")]
    known_failures: Option<PathBuf>,
    /// Run declared known failures anyway; a pass is reported as an unexpected pass.
    #[arg(long)]
    run_known_failures: bool,
    /// Skip the informational performance profile.
    #[arg(long)]
    no_performance: bool,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Record a trace of every test into this folder (`BACKEND-INDEX-TEST.json`, read with
    /// `xhal trace summary`); the traces of tests that pass or are skipped are removed, those
    /// of failures, crashes and timeouts kept.
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,
}

fn main() -> ExitCode {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        CommandLine::List { json, filter } => list(json, filter.as_deref()),
        CommandLine::Run(args) => run(args),
        CommandLine::Worker { plugin, backend } => match (plugin, backend) {
            (Some(path), _) => worker::run(TargetSpec::Plugin(path)),
            (None, Some(name)) => worker::run(TargetSpec::Backend(name)),
            (None, None) => ExitCode::from(EXIT_USAGE),
        },
    }
}

fn init_logging() {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let directives = std::env::var("XHAL_LOG").ok().filter(|value| !value.trim().is_empty());
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::WARN.into())
        .parse_lossy(directives.as_deref().unwrap_or("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn selected(filter: Option<&str>) -> Result<Vec<TestCase>, String> {
    let tests: Vec<TestCase> = catalogue()
        .into_iter()
        .filter(|case| filter.is_none_or(|patterns| glob::any_glob_matches(patterns, case.id)))
        .collect();
    if tests.is_empty() {
        return Err(format!(
            "--filter {} matches no test; `xhal-cts list` shows the ids",
            filter.unwrap_or_default()
        ));
    }
    Ok(tests)
}

fn list(json: bool, filter: Option<&str>) -> ExitCode {
    let tests = match selected(filter) {
        Ok(tests) => tests,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if json {
        let entries: Vec<serde_json::Value> = tests
            .iter()
            .map(|case| {
                serde_json::json!({
                    "id": case.id,
                    "area": case.area(),
                    "profile": case.profile(),
                    "requires_features": case.requires.features.names(),
                    "requires_plugin_file": case.requires.plugin_file,
                    "description": case.description,
                })
            })
            .collect();
        let document = serde_json::json!({
            "suite_version": xhal_conformance::SUITE_VERSION,
            "tests": entries,
        });
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else {
        let width = tests.iter().map(|case| case.id.len()).max().unwrap_or(0);
        for case in &tests {
            println!("{:<width$}  {:<10}  {}", case.id, case.profile(), case.description);
        }
        println!("{} tests", tests.len());
    }
    ExitCode::SUCCESS
}

fn run(args: RunArgs) -> ExitCode {
    let spec = match (&args.plugin, &args.backend) {
        (Some(path), _) => TargetSpec::Plugin(path.clone()),
        (None, Some(name)) => TargetSpec::Backend(name.clone()),
        (None, None) => {
            eprintln!("error: give --plugin PATH or --backend NAME");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        eprintln!(
            "error: --timeout must be a positive number of seconds, not {}",
            args.timeout
        );
        return ExitCode::from(EXIT_USAGE);
    }
    if args.jobs == 0 {
        eprintln!("error: --jobs must be at least 1");
        return ExitCode::from(EXIT_USAGE);
    }
    if let Some(folder) = &args.trace {
        if let Err(error) = std::fs::create_dir_all(folder) {
            eprintln!("error: --trace {}: cannot create the folder: {error}", folder.display());
            return ExitCode::from(EXIT_SETUP);
        }
        worker_process::trace_into(folder.clone());
    }
    let tests = match selected(args.filter.as_deref()) {
        Ok(tests) => tests,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    let device = match args
        .device
        .as_deref()
        .map(|text| xhal::DeviceSelector::parse_from(text, "--device"))
    {
        None => None,
        Some(Ok(selector)) => Some(selector),
        Some(Err(error)) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let declared = match &args.known_failures {
        None => KnownFailures::none(),
        Some(path) => match KnownFailures::load(path, &catalogue()) {
            Ok(declared) => declared,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_SETUP);
            }
        },
    };
    let settings = supervisor::RunSettings {
        spec,
        device,
        tests,
        isolate: args.isolate,
        jobs: args.jobs,
        timeout: Duration::from_secs_f64(args.timeout),
        policy: KnownFailurePolicy {
            declared,
            run_anyway: args.run_known_failures,
        },
        performance: !args.no_performance,
        options: RunOptions {
            filter: args.filter.clone(),
            isolate: args.isolate,
            jobs: args.jobs,
            timeout_seconds: args.timeout,
            known_failures: args.known_failures.as_ref().map(|path| path.display().to_string()),
            run_known_failures: args.run_known_failures,
        },
        quiet: args.json,
    };
    let report = match supervisor::run(&settings) {
        Ok(report) => report,
        Err(supervisor::SetupFailure(error)) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_SETUP);
        }
    };
    if let Some(dir) = &args.report {
        match supervisor::write_reports(&report, dir) {
            Ok(files) => {
                if !args.json {
                    for file in files {
                        eprintln!("wrote {}", file.display());
                    }
                }
            }
            Err(error) => {
                eprintln!("error: cannot write the reports into {}: {error}", dir.display());
                return ExitCode::from(EXIT_SETUP);
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", xhal_conformance::report::summary_table(&report));
        println!(
            "\n{}",
            if report.passed() {
                "PASSED: nothing failed, crashed or timed out"
            } else {
                "FAILED: see the results above"
            }
        );
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

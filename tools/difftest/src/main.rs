//! `xhal-difftest`: random WGSL kernels on the CPU interpreter (the oracle) and on every other
//! device, compared bit for bit; every difference shrunk to a minimal kernel.
//!
//! Exit codes: 0 no finding, 1 findings, 2 usage error, 3 the run itself could not be made
//! (no oracle, an output folder that cannot be written). See docs/difftest.md.

use anyhow::{bail, Context};
use clap::Parser;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use xhal::DeviceSelector;
use xhal_difftest::ast::Program;
use xhal_difftest::compare::{judge, Verdict};
use xhal_difftest::emit::{emit, BufferRole, Emitted};
use xhal_difftest::gen::{generate, inputs, Inputs};
use xhal_difftest::run::{self, Job, Oracle, Outcome, Target, Worker, ORACLE};
use xhal_difftest::shrink::{shrink, ShrinkStats};

const EXIT_FINDINGS: u8 = 1;
const EXIT_CANNOT_RUN: u8 = 3;

/// Random WGSL compute kernels, run on the CPU interpreter (the oracle) and on every other
/// device, compared bit for bit; each difference is shrunk to a minimal kernel and written to
/// --out.
#[derive(Debug, Parser)]
#[command(
    name = "xhal-difftest",
    version,
    after_help = "Devices: the compiled CPU path (cpu-compile:0) and every device of the plugins in \
XHAL_PLUGIN_PATH (else next to the binary, then the usual folders). The cpu plugin's own device \
is left out unless --devices names it: it is the compiled path again, through the ABI.

Exit codes: 0 no finding, 1 findings, 2 usage error, 3 the run could not be made.
Environment: XHAL_PLUGIN_PATH, XHAL_LOG (e.g. debug), XHAL_CACHE_DIR (default: OUT/kernel-cache)."
)]
struct Cli {
    /// Seeds to run, START..END (END excluded), or one seed.
    #[arg(long, value_name = "START..END", value_parser = parse_seeds, required_unless_present_any = ["worker", "print"])]
    seeds: Option<Range<u64>>,
    /// Devices to test against the oracle, in the XHAL_DEVICE grammar: `vulkan`, `wgpu:1`,
    /// `cpu-compile,opencl`, `!wgpu:1`.
    #[arg(long, value_name = "SELECTOR", value_parser = parse_devices)]
    devices: Option<DeviceSelector>,
    /// Where findings are written.
    #[arg(long, value_name = "DIR", default_value = "target/difftest")]
    out: PathBuf,
    /// Write the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// Stop starting new programs after this many minutes.
    #[arg(long, value_name = "M")]
    minutes: Option<f64>,
    /// Show a progress line on stderr even when it is not a terminal.
    #[arg(long)]
    progress: bool,
    /// Seconds spent shrinking each finding.
    #[arg(long, value_name = "S", default_value_t = 60)]
    shrink_seconds: u64,
    /// Seconds a device may take for one program before it counts as hung.
    #[arg(long, value_name = "S", default_value_t = 120)]
    timeout: u64,
    /// Shrink at most this many findings per device (the rest are written unshrunk), so that
    /// one device's many findings cannot take all the time.
    #[arg(long, value_name = "N", default_value_t = 20)]
    max_shrinks: usize,
    /// Make every integer divisor nonzero, for a device whose division-by-zero bug is known
    /// and would otherwise hide its other findings (WGSL defines `x / 0 == x`, `x % 0 == 0`).
    #[arg(long)]
    avoid_zero_divisors: bool,
    /// Print the WGSL of one seed and exit.
    #[arg(long, value_name = "SEED", conflicts_with = "seeds")]
    print: Option<u64>,
    /// Internal: serve jobs for one device on stdin/stdout.
    #[arg(long, value_name = "LABEL", hide = true)]
    worker: Option<String>,
}

fn parse_seeds(text: &str) -> Result<Range<u64>, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{t}` is not a seed (a whole number)"))
    };
    match text.split_once("..") {
        Some((start, end)) => {
            let (start, end) = (number(start)?, number(end)?);
            if end <= start {
                return Err(format!("`{text}` is empty: END must be greater than START"));
            }
            Ok(start..end)
        }
        None => {
            let seed = number(text)?;
            Ok(seed..seed.saturating_add(1))
        }
    }
}

fn parse_devices(text: &str) -> Result<DeviceSelector, String> {
    DeviceSelector::parse_from(text, "--devices").map_err(|e| e.message().to_owned())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    if let Some(label) = &cli.worker {
        return match run::worker_main(label) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                // The parent reads this line as the reason the worker did not start.
                println!("{}", serde_json::json!({ "error": error.to_string() }));
                let _ = writeln!(std::io::stderr(), "error: {error}");
                ExitCode::from(EXIT_CANNOT_RUN)
            }
        };
    }
    if let Some(seed) = cli.print {
        let mut program = generate(seed);
        program.nonzero_divisors = cli.avoid_zero_divisors;
        print!("{}", emit(&program).source);
        return ExitCode::SUCCESS;
    }
    match campaign(&cli) {
        Ok(summary) => {
            let text = if cli.json {
                serde_json::to_string_pretty(&summary).unwrap_or_default() + "\n"
            } else {
                summary.text()
            };
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
            if summary.findings.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_FINDINGS)
            }
        }
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::from(EXIT_CANNOT_RUN)
        }
    }
}

/// Logs go to stderr, filtered by XHAL_LOG; without it only errors, so that a clean run
/// leaves stderr empty (a device's warnings about a kernel are in its finding instead).
fn init_logging() {
    use tracing_subscriber::filter::{EnvFilter, LevelFilter};
    let directives = std::env::var("XHAL_LOG")
        .ok()
        .filter(|value| !value.trim().is_empty())
        .unwrap_or_else(|| "error".to_owned());
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::ERROR.into())
        .parse_lossy(directives);
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

#[derive(Debug, Default, Serialize)]
struct DeviceSummary {
    label: String,
    name: String,
    programs: usize,
    agreed: usize,
    refused: usize,
    findings: usize,
    /// Refusal messages (first line) and how often each was given.
    refusal_messages: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
struct FindingSummary {
    seed: u64,
    device: String,
    verdict: String,
    description: String,
    minimal_description: String,
    original_size: usize,
    minimal_size: usize,
    shrink: Option<ShrinkStats>,
    folder: String,
}

#[derive(Debug, Serialize)]
struct Summary {
    schema: u32,
    seeds: [u64; 2],
    programs: usize,
    oracle: String,
    devices: Vec<DeviceSummary>,
    findings: Vec<FindingSummary>,
    refusals: usize,
    elapsed_seconds: f64,
    programs_per_minute: f64,
    /// Seeds left unrun because --minutes ran out.
    stopped_early: bool,
}

impl Summary {
    fn text(&self) -> String {
        let mut text = String::new();
        for device in &self.devices {
            text.push_str(&format!(
                "{:<16} {:<40} {} programs: {} agree, {} refused, {} findings\n",
                device.label,
                shorten(&device.name, 40),
                device.programs,
                device.agreed,
                device.refused,
                device.findings
            ));
            for (message, count) in &device.refusal_messages {
                text.push_str(&format!("    refused {count}x: {}\n", shorten(message, 150)));
            }
        }
        for finding in &self.findings {
            text.push_str(&format!(
                "finding: seed {} on {}: {} (shrunk from {} to {}), in {}\n",
                finding.seed,
                finding.device,
                finding.verdict,
                finding.original_size,
                finding.minimal_size,
                finding.folder
            ));
            for line in finding.minimal_description.lines().take(6) {
                text.push_str(&format!("    {line}\n"));
            }
        }
        text.push_str(&format!(
            "{} programs, {} devices, {} findings, {} refusals ({:.1} programs/minute, {:.0} s{})\n",
            self.programs,
            self.devices.len(),
            self.findings.len(),
            self.refusals,
            self.programs_per_minute,
            self.elapsed_seconds,
            if self.stopped_early {
                ", stopped by --minutes"
            } else {
                ""
            }
        ));
        text
    }
}

fn shorten(text: &str, width: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= width {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(width.saturating_sub(3)).collect();
        format!("{cut}...")
    }
}

fn campaign(cli: &Cli) -> anyhow::Result<Summary> {
    let seeds = cli.seeds.clone().context("--seeds is required")?;
    let started = Instant::now();
    let deadline = cli
        .minutes
        .map(|minutes| started + Duration::from_secs_f64((minutes * 60.0).max(0.0)));
    std::fs::create_dir_all(&cli.out).with_context(|| format!("creating {}", cli.out.display()))?;

    let chosen: Vec<Target> = run::discover()
        .context("discovering devices")?
        .into_iter()
        .filter(|(target, device_type)| match &cli.devices {
            Some(selector) => selector.accepts(&target.backend, target.index, *device_type),
            // The cpu plugin is the compiled path again: left out unless named.
            None => target.backend != "cpu",
        })
        .map(|(target, _)| target)
        .collect();
    if chosen.is_empty() {
        bail!("no device to compare with the oracle (see `xhal devices`; --devices picks among them)");
    }
    let oracle = Oracle::new().context("opening the oracle (the CPU interpreter)")?;

    let mut env = Vec::new();
    if std::env::var_os(xhal::cpu::CACHE_DIR_VARIABLE).is_none() {
        let cache = std::path::absolute(cli.out.join("kernel-cache")).unwrap_or_else(|_| cli.out.join("kernel-cache"));
        env.push((xhal::cpu::CACHE_DIR_VARIABLE.to_owned(), cache.display().to_string()));
    }
    let inherit_stderr = std::env::var_os("XHAL_LOG").is_some();
    let timeout = Duration::from_secs(cli.timeout.max(1));
    let mut workers: Vec<Worker> = chosen
        .iter()
        .map(|target| Worker::new(target.clone(), timeout, env.clone(), inherit_stderr))
        .collect();
    let mut devices: Vec<DeviceSummary> = chosen
        .iter()
        .map(|t| DeviceSummary {
            label: t.label.clone(),
            name: t.name.clone(),
            ..DeviceSummary::default()
        })
        .collect();
    // Devices whose worker cannot start are reported once and dropped.
    let mut dead: Vec<bool> = vec![false; workers.len()];

    let show_progress = cli.progress || std::io::stderr().is_terminal();
    let mut findings: Vec<FindingSummary> = Vec::new();
    let mut programs = 0usize;
    let mut refusals = 0usize;
    let mut shrinks = vec![0usize; workers.len()];
    let mut stopped_early = false;
    let total = seeds.end - seeds.start;

    for seed in seeds.clone() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stopped_early = true;
            break;
        }
        let mut program = generate(seed);
        program.nonzero_divisors = cli.avoid_zero_divisors;
        let emitted = emit(&program);
        let data = inputs(seed);
        programs += 1;
        if let Err(error) = emitted.parse() {
            // The generator's own bug: reported like a finding so that it cannot go unseen.
            let folder = write_finding(
                &cli.out,
                seed,
                "generator",
                &program,
                &emitted,
                None,
                &data,
                &format!("the generator made invalid WGSL:\n{error}\n"),
                "",
            )?;
            findings.push(FindingSummary {
                seed,
                device: "generator".to_owned(),
                verdict: "invalid".to_owned(),
                description: error.to_string(),
                minimal_description: error.to_string(),
                original_size: program.size(),
                minimal_size: program.size(),
                shrink: None,
                folder,
            });
            continue;
        }
        let job = Job::new(&program, &emitted, &data);
        let mut sent = vec![false; workers.len()];
        for (index, worker) in workers.iter_mut().enumerate() {
            if dead[index] {
                continue;
            }
            match worker.send(&job) {
                Ok(()) => sent[index] = true,
                Err(error) => {
                    dead[index] = true;
                    tracing::error!(device = %worker.target.label, %error, "device dropped from the run");
                    devices[index]
                        .refusal_messages
                        .insert(format!("worker did not start: {error}"), 1);
                }
            }
        }
        let oracle_outcome = oracle.run(&job);
        let mut answers = Vec::with_capacity(workers.len());
        for (index, worker) in workers.iter_mut().enumerate() {
            answers.push(if sent[index] { Some(worker.receive()) } else { None });
        }
        let Outcome::Ran { buffers: expected } = &oracle_outcome else {
            let description = format!("the oracle did not run the kernel: {oracle_outcome:?}\n");
            let folder = write_finding(
                &cli.out,
                seed,
                ORACLE,
                &program,
                &emitted,
                None,
                &data,
                &description,
                "",
            )?;
            findings.push(FindingSummary {
                seed,
                device: ORACLE.to_owned(),
                verdict: "oracle_failed".to_owned(),
                description: description.clone(),
                minimal_description: description,
                original_size: program.size(),
                minimal_size: program.size(),
                shrink: None,
                folder,
            });
            continue;
        };
        for (index, answer) in answers.into_iter().enumerate() {
            let Some(outcome) = answer else { continue };
            devices[index].programs += 1;
            let verdict = judge(&emitted.buffers, emitted.slots, expected, &outcome);
            match &verdict {
                Verdict::Agrees => devices[index].agreed += 1,
                Verdict::Refused { message } => {
                    devices[index].refused += 1;
                    refusals += 1;
                    *devices[index]
                        .refusal_messages
                        .entry(shorten(message, 200))
                        .or_default() += 1;
                }
                _ => {
                    devices[index].findings += 1;
                    let label = workers[index].target.label.clone();
                    if show_progress {
                        eprint!("\r\x1b[K[seed {seed}] {label}: {}; shrinking...", verdict.name());
                    }
                    let may_shrink = shrinks[index] < cli.max_shrinks && !matches!(verdict, Verdict::Hung { .. });
                    let (minimal, stats, minimal_verdict) = if may_shrink {
                        shrinks[index] += 1;
                        let shrink_deadline = Instant::now() + Duration::from_secs(cli.shrink_seconds);
                        let (minimal, stats, minimal_verdict) =
                            shrink_finding(&program, &data, &verdict, &oracle, &mut workers[index], shrink_deadline);
                        (minimal, Some(stats), minimal_verdict)
                    } else {
                        (program.clone(), None, verdict.clone())
                    };
                    let minimal_emitted = emit(&minimal);
                    let folder = write_finding(
                        &cli.out,
                        seed,
                        &label,
                        &program,
                        &emitted,
                        Some((&minimal, &minimal_emitted)),
                        &data,
                        &verdict.describe(),
                        &minimal_verdict.describe(),
                    )?;
                    findings.push(FindingSummary {
                        seed,
                        device: label,
                        verdict: verdict.name().to_owned(),
                        description: verdict.describe(),
                        minimal_description: minimal_verdict.describe(),
                        original_size: program.size(),
                        minimal_size: minimal.size(),
                        shrink: stats,
                        folder,
                    });
                }
            }
        }
        if show_progress {
            let minutes = started.elapsed().as_secs_f64() / 60.0;
            eprint!(
                "\r\x1b[K[{}/{total}] seed {seed}: {} findings, {refusals} refusals, {:.1} programs/min",
                programs,
                findings.len(),
                programs as f64 / minutes.max(1e-9)
            );
        }
    }
    if show_progress {
        eprintln!();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let summary = Summary {
        schema: 1,
        seeds: [seeds.start, seeds.end],
        programs,
        oracle: ORACLE.to_owned(),
        devices,
        findings,
        refusals,
        elapsed_seconds: elapsed,
        programs_per_minute: programs as f64 * 60.0 / elapsed.max(1e-9),
        stopped_early,
    };
    let json = serde_json::to_string_pretty(&summary)?;
    std::fs::write(cli.out.join("summary.json"), json + "\n")
        .with_context(|| format!("writing {}", cli.out.join("summary.json").display()))?;
    Ok(summary)
}

/// Shrinks `program` while `worker`'s device still disagrees with the oracle in the same way.
fn shrink_finding(
    program: &Program,
    data: &Inputs,
    verdict: &Verdict,
    oracle: &Oracle,
    worker: &mut Worker,
    deadline: Instant,
) -> (Program, ShrinkStats, Verdict) {
    let mut last = verdict.clone();
    let mut still_fails = |candidate: &Program| {
        let emitted = emit(candidate);
        if emitted.parse().is_err() {
            return false;
        }
        let job = Job::new(candidate, &emitted, data);
        let Outcome::Ran { buffers: expected } = oracle.run(&job) else {
            return false;
        };
        let outcome = worker.run(&job);
        let candidate_verdict = judge(&emitted.buffers, emitted.slots, &expected, &outcome);
        if candidate_verdict.same_kind(verdict) {
            last = candidate_verdict;
            true
        } else {
            false
        }
    };
    let (minimal, stats) = shrink(program, deadline, usize::MAX, &mut still_fails);
    (minimal, stats, last)
}

/// The `xhal run` command line that runs `emitted` on `device` (a label) with the seed's data.
fn xhal_run_command(program: &Program, emitted: &Emitted, data: &Inputs, file: &str, device: &str) -> String {
    let mut args = vec![format!("target/release/xhal run {file}")];
    args.push(format!("-w {},{},1", program.workgroups[0], program.workgroups[1]));
    for role in &emitted.buffers {
        args.push(match role {
            BufferRole::Input => "-b file:input.bin".to_owned(),
            BufferRole::Output => format!("-b zeros:{}", program.invocations() * emitted.slots.max(1)),
            BufferRole::Atomics => "-b file:acc.bin".to_owned(),
            // `a`, the three values of `gap`, `b`.
            BufferRole::Params => format!("-b params={},0,0,0,{}", data.params[0], data.params[1]),
        });
    }
    for (name, param) in &emitted.overrides {
        args.push(format!("-o {name}={}", data.params[*param]));
    }
    if emitted.uses_params {
        if emitted.overrides.is_empty() {
            args.push(format!("-s {} -s {}", data.params[0], data.params[1]));
        } else {
            args.push("-s 0".to_owned());
        }
    }
    let prefix = match device {
        "cpu-interpret:0" => "XHAL_CPU_MODE=interpret ".to_owned(),
        "cpu-compile:0" => "XHAL_CPU_MODE=compile ".to_owned(),
        _ => "XHAL_PLUGIN_PATH=target/plugins ".to_owned(),
    };
    let selector = if device.starts_with("cpu-") { "cpu" } else { device };
    format!("{prefix}{} --device {selector} --full", args.join(" "))
}

/// Writes a finding's folder: the original and minimal kernels, the seed's data, and
/// finding.txt saying what differs and how to see it again. Returns the folder.
#[allow(clippy::too_many_arguments)]
fn write_finding(
    out: &Path,
    seed: u64,
    device: &str,
    program: &Program,
    emitted: &Emitted,
    minimal: Option<(&Program, &Emitted)>,
    data: &Inputs,
    description: &str,
    minimal_description: &str,
) -> anyhow::Result<String> {
    let name = format!("seed-{seed}-{}", device.replace(':', "-"));
    let folder = out.join(&name);
    std::fs::create_dir_all(&folder).with_context(|| format!("creating {}", folder.display()))?;
    let write = |file: &str, bytes: &[u8]| {
        std::fs::write(folder.join(file), bytes).with_context(|| format!("writing {}", folder.join(file).display()))
    };
    write("original.wgsl", emitted.source.as_bytes())?;
    write("input.bin", &run::words_to_bytes(&data.input))?;
    write("acc.bin", &run::words_to_bytes(&data.atomics))?;
    let mut text = format!(
        "seed: {seed}\ndevice: {device}\noracle: {ORACLE}\nimmediates (params.a, params.b): {} {}\n\n",
        data.params[0], data.params[1]
    );
    text.push_str(&format!(
        "original kernel (original.wgsl): {} workgroups of {}x{}, {} output slots per invocation\n{description}\n",
        program.workgroups[0] * program.workgroups[1],
        program.workgroup_size[0],
        program.workgroup_size[1],
        emitted.slots
    ));
    if let Some((minimal_program, minimal_emitted)) = minimal {
        write("minimal.wgsl", minimal_emitted.source.as_bytes())?;
        text.push_str(&format!(
            "minimal kernel (minimal.wgsl): {} workgroups ({},{}) of {}x{}, {} output slots per invocation\n{minimal_description}\n",
            minimal_program.workgroups[0] * minimal_program.workgroups[1],
            minimal_program.workgroups[0],
            minimal_program.workgroups[1],
            minimal_program.workgroup_size[0],
            minimal_program.workgroup_size[1],
            minimal_emitted.slots
        ));
        text.push_str(&format!(
            "To see it again, from the repository root (the data files are in this folder, so run\n\
             from here or give their paths):\n  target/release/xhal-difftest --seeds {seed} --devices {}\n\
             The minimal kernel on the device, then on the oracle:\n  {}\n  {}\n",
            device,
            xhal_run_command(minimal_program, minimal_emitted, data, "minimal.wgsl", device),
            xhal_run_command(minimal_program, minimal_emitted, data, "minimal.wgsl", ORACLE),
        ));
    }
    write("finding.txt", text.as_bytes())?;
    Ok(folder.display().to_string())
}

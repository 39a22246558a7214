//! What xhal's benchmarks share: criterion's saved estimates, ratios against a baseline
//! measured in the same run, and the Markdown tables they print and save under
//! `target/criterion/`.
//!
//! A ratio of two criterion estimates compares figures measured seconds apart, and on a shared
//! machine the load can change in between. [`paired`] alternates the two sides in short rounds
//! instead and takes the median of the per-round ratios, so a change of load during the run
//! moves both sides of most rounds alike; its spread (the quartiles) says how far to trust it.

use std::path::{Path, PathBuf};
use std::time::Instant;

/// `target/`: `CARGO_TARGET_DIR` when set, else from this benchmark binary's path
/// (`target/<profile>/deps/<bench>`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap_or_default();
            exe.ancestors().nth(3).map(Path::to_path_buf).unwrap_or_default()
        })
}

/// Criterion's point estimate in ns of one benchmark, from its saved report: the slope of the
/// linear fit where criterion made one (that is the figure it prints), else the mean.
pub fn criterion_estimate_ns(group: &str, id: &str) -> Option<f64> {
    let path = target_dir()
        .join("criterion")
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["slope"]["point_estimate"]
        .as_f64()
        .or_else(|| value["mean"]["point_estimate"].as_f64())
}

/// Prints a Markdown table (with `preamble` lines before it) and writes the same text to
/// `target/criterion/<file_name>`.
pub fn publish(file_name: &str, preamble: &[String], header: &[&str], rows: &[String]) {
    let mut lines: Vec<String> = preamble.to_vec();
    if !preamble.is_empty() {
        lines.push(String::new());
    }
    lines.push(format!("| {} |", header.join(" | ")));
    lines.push(format!("|{}", " --- |".repeat(header.len())));
    lines.extend_from_slice(rows);
    let table = lines.join("\n");
    println!("\n{table}");
    let folder = target_dir().join("criterion");
    let _ = std::fs::create_dir_all(&folder);
    let _ = std::fs::write(folder.join(file_name), format!("{table}\n"));
}

/// Two sides of one measurement, timed alternately.
#[derive(Clone, Copy, Debug)]
pub struct Paired {
    /// Median time of one run of the measured side, in ns.
    pub ours_ns: f64,
    /// Median time of one run of the baseline, in ns.
    pub baseline_ns: f64,
    /// Median over the rounds of (measured time / baseline time).
    pub ratio: f64,
    /// First quartile of the per-round ratios.
    pub ratio_low: f64,
    /// Third quartile of the per-round ratios.
    pub ratio_high: f64,
    /// How many paired rounds the figures come from.
    pub rounds: usize,
}

impl Paired {
    /// `1.02 (0.99–1.05)`: the median ratio and its interquartile range.
    pub fn ratio_text(&self) -> String {
        format!("{:.3} ({:.3}–{:.3})", self.ratio, self.ratio_low, self.ratio_high)
    }
}

/// Times `ours` against `baseline` over `rounds` rounds, each side running `repeat` times back
/// to back per round; which side goes first alternates, so neither always runs on a warmer
/// machine. Run one untimed round first to warm both up.
pub fn paired(rounds: usize, repeat: usize, mut ours: impl FnMut(), mut baseline: impl FnMut()) -> Paired {
    let rounds = rounds.max(1);
    let repeat = repeat.max(1);
    let time = |work: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..repeat {
            work();
        }
        start.elapsed().as_secs_f64() * 1e9 / repeat as f64
    };
    ours();
    baseline();
    let mut ours_times = Vec::with_capacity(rounds);
    let mut baseline_times = Vec::with_capacity(rounds);
    let mut ratios = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (mine, theirs) = if round % 2 == 0 {
            let mine = time(&mut ours);
            (mine, time(&mut baseline))
        } else {
            let theirs = time(&mut baseline);
            (time(&mut ours), theirs)
        };
        ours_times.push(mine);
        baseline_times.push(theirs);
        ratios.push(mine / theirs);
    }
    Paired {
        ours_ns: quantile(&mut ours_times, 0.5),
        baseline_ns: quantile(&mut baseline_times, 0.5),
        ratio: quantile(&mut ratios, 0.5),
        ratio_low: quantile(&mut ratios, 0.25),
        ratio_high: quantile(&mut ratios, 0.75),
        rounds,
    }
}

/// The `q` quantile (0 to 1) of `values`, by the nearest rank.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let index = ((values.len() - 1) as f64 * q).round() as usize;
    values[index]
}

/// A duration in ns as text with a unit that keeps three or four significant figures.
pub fn duration_text(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut values = [5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&mut values, 0.5), 3.0);
        assert_eq!(quantile(&mut values, 0.25), 2.0);
        assert_eq!(quantile(&mut values, 0.75), 4.0);
        assert_eq!(quantile(&mut [7.0], 0.5), 7.0);
    }

    #[test]
    fn sides_alternate_and_each_runs_rounds_times_repeat_plus_a_warm_up() {
        let order = std::cell::RefCell::new(Vec::new());
        let result = paired(4, 3, || order.borrow_mut().push('o'), || order.borrow_mut().push('b'));
        let order: String = order.into_inner().into_iter().collect();
        assert_eq!(order, "ob".to_owned() + "ooobbb" + "bbbooo" + "ooobbb" + "bbbooo");
        assert_eq!(result.rounds, 4);
        assert!(result.ratio_low <= result.ratio && result.ratio <= result.ratio_high);
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(duration_text(12.34), "12.3 ns");
        assert_eq!(duration_text(1_234.0), "1.2 µs");
        assert_eq!(duration_text(2_500_000.0), "2.50 ms");
        assert_eq!(duration_text(3e9), "3.00 s");
    }
}

//! Ratio tables from criterion's saved estimates, shared by the benchmarks.

use std::path::{Path, PathBuf};

/// `target/`, from this benchmark binary's path (`target/<profile>/deps/<bench>`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().unwrap_or_default();
            exe.ancestors().nth(3).map(Path::to_path_buf).unwrap_or_default()
        })
}

/// Criterion's point estimate in ns of one benchmark, from its saved report: the slope of the
/// linear fit where criterion made one (that is the figure it prints), else the mean.
pub fn mean_ns(group: &str, id: &str) -> Option<f64> {
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

/// Prints the table and writes it to `target/criterion/<file_name>`.
pub fn publish(file_name: &str, rows: &[String]) {
    let mut lines = vec![
        "| measurement | xhal | baseline | ratio |".to_owned(),
        "| --- | --- | --- | --- |".to_owned(),
    ];
    lines.extend_from_slice(rows);
    let table = lines.join("\n");
    println!("\n{table}");
    let _ = std::fs::write(target_dir().join("criterion").join(file_name), format!("{table}\n"));
}

//! What a run produces: `report.json`, `junit.xml`, `certificate.json` and the terminal table.

use crate::catalogue::AREAS;
use crate::outcome::{Outcome, TestRecord};
use crate::perf::PerformanceProfile;
use crate::test_case::TestCase;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The suite that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteInfo {
    /// `xhal-conformance` version.
    pub version: String,
    /// Git commit it was built from.
    pub commit: String,
    /// Tests in the catalogue.
    pub catalogue_size: usize,
}

impl SuiteInfo {
    /// This suite.
    pub fn current() -> SuiteInfo {
        SuiteInfo {
            version: crate::SUITE_VERSION.to_string(),
            commit: crate::SUITE_COMMIT.to_string(),
            catalogue_size: crate::catalogue().len(),
        }
    }
}

/// The machine the run happened on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// `linux`, `macos`, `windows`...
    pub os: String,
    /// `x86_64`, `aarch64`...
    pub arch: String,
}

impl HostInfo {
    /// This machine.
    pub fn current() -> HostInfo {
        HostInfo {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
        }
    }
}

/// The backend under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginInfo {
    /// The backend's name as it reports it.
    pub name: String,
    /// The backend's version.
    pub version: String,
    /// ABI version it implements, `major.minor`.
    pub abi_version: String,
    /// The plugin file, or `None` for a backend linked into the runner.
    pub path: Option<String>,
    /// SHA-256 of the plugin file, hex.
    pub sha256: Option<String>,
}

/// How the run was asked for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    /// `--filter`, when given.
    pub filter: Option<String>,
    /// `--isolate`.
    pub isolate: bool,
    /// `--jobs`.
    pub jobs: usize,
    /// `--timeout` in seconds.
    pub timeout_seconds: f64,
    /// `--known-failures`, when given.
    pub known_failures: Option<String>,
    /// `--run-known-failures`.
    pub run_known_failures: bool,
}

/// Whether a device earned a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileStatus {
    /// Every test of the profile passed (or was skipped for a stated reason).
    Achieved,
    /// Nothing failed, but some tests are declared known failures.
    AchievedWithKnownFailures,
    /// A test failed, crashed or timed out.
    NotAchieved,
    /// Not every test of the profile ran (a `--filter` excluded some).
    Incomplete,
}

/// One profile's standing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileResult {
    /// `core`, or the optional features, joined by `+`.
    pub name: String,
    /// The standing.
    pub status: ProfileStatus,
    /// Tests of the profile that ran and passed.
    pub passed: usize,
    /// Tests of the profile in the catalogue.
    pub total: usize,
    /// Ids of tests that failed, crashed or timed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// Ids of declared known failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_failures: Vec<String>,
    /// Tests not run (filtered out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// Results on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// Index in the backend.
    pub index: u32,
    /// The device information exactly as reported.
    pub info: serde_json::Value,
    /// Tests per result name.
    pub counts: BTreeMap<String, usize>,
    /// Profiles: `core`, then one per optional feature the device claims.
    pub profiles: Vec<ProfileResult>,
    /// Informational performance figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance: Option<PerformanceProfile>,
    /// Every test's result, in catalogue order.
    pub results: Vec<TestRecord>,
}

/// A whole run: what `report.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The suite.
    pub suite: SuiteInfo,
    /// When the run finished, RFC 3339 UTC.
    pub date: String,
    /// The machine.
    pub host: HostInfo,
    /// The backend under test.
    pub plugin: PluginInfo,
    /// How the run was asked for.
    pub options: RunOptions,
    /// Every device tested.
    pub devices: Vec<DeviceReport>,
}

impl RunReport {
    /// True when nothing failed, crashed or timed out on any device.
    pub fn passed(&self) -> bool {
        self.devices
            .iter()
            .all(|device| device.results.iter().all(|record| !record.outcome.is_failure()))
    }

    /// The certificate: everything but the per-test details and performance figures, plus
    /// each test's result name.
    pub fn certificate(&self) -> Certificate {
        Certificate {
            certificate_version: 1,
            suite: self.suite.clone(),
            date: self.date.clone(),
            host: self.host.clone(),
            plugin: self.plugin.clone(),
            passed: self.passed(),
            devices: self
                .devices
                .iter()
                .map(|device| CertifiedDevice {
                    index: device.index,
                    info: device.info.clone(),
                    counts: device.counts.clone(),
                    profiles_achieved: device
                        .profiles
                        .iter()
                        .filter(|profile| {
                            matches!(
                                profile.status,
                                ProfileStatus::Achieved | ProfileStatus::AchievedWithKnownFailures
                            )
                        })
                        .map(|profile| profile.name.clone())
                        .collect(),
                    profiles: device.profiles.clone(),
                    results: device
                        .results
                        .iter()
                        .map(|record| (record.id.clone(), record.outcome.name().to_string()))
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `certificate.json`: what a plugin was certified for, by which suite, on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    /// Version of this document's layout.
    pub certificate_version: u32,
    /// The suite.
    pub suite: SuiteInfo,
    /// When the run finished.
    pub date: String,
    /// The machine.
    pub host: HostInfo,
    /// The plugin, with the file's sha256.
    pub plugin: PluginInfo,
    /// True when nothing failed, crashed or timed out.
    pub passed: bool,
    /// Each device.
    pub devices: Vec<CertifiedDevice>,
}

/// One device in a certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertifiedDevice {
    /// Index in the backend.
    pub index: u32,
    /// The device information exactly as reported.
    pub info: serde_json::Value,
    /// Tests per result name.
    pub counts: BTreeMap<String, usize>,
    /// Names of the profiles achieved (with or without known failures).
    pub profiles_achieved: Vec<String>,
    /// Every profile's standing.
    pub profiles: Vec<ProfileResult>,
    /// Each test's result name, by id.
    pub results: BTreeMap<String, String>,
}

/// Counts per result name, every name present.
pub fn count_results(records: &[TestRecord]) -> BTreeMap<String, usize> {
    let mut counts: BTreeMap<String, usize> = Outcome::NAMES.iter().map(|name| (name.to_string(), 0)).collect();
    for record in records {
        *counts.entry(record.outcome.name().to_string()).or_default() += 1;
    }
    counts
}

/// The profiles of a device: `core`, then one per optional feature set the catalogue has and
/// the device claims (`claimed` holds the feature names).
pub fn profiles(catalogue: &[TestCase], records: &[TestRecord], claimed: &[String]) -> Vec<ProfileResult> {
    let mut names: Vec<String> = vec!["core".to_string()];
    for case in catalogue {
        let profile = case.profile();
        let all_claimed = case
            .requires
            .features
            .names()
            .iter()
            .all(|feature| claimed.iter().any(|claim| claim == feature));
        if !names.contains(&profile) && all_claimed {
            names.push(profile);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let members: Vec<&TestCase> = catalogue.iter().filter(|case| case.profile() == name).collect();
            let mut result = ProfileResult {
                name: name.clone(),
                status: ProfileStatus::Achieved,
                passed: 0,
                total: members.len(),
                failed: Vec::new(),
                known_failures: Vec::new(),
                not_run: Vec::new(),
            };
            for case in members {
                match records
                    .iter()
                    .find(|record| record.id == case.id)
                    .map(|record| &record.outcome)
                {
                    None => result.not_run.push(case.id.to_string()),
                    Some(Outcome::Pass) => result.passed += 1,
                    Some(Outcome::Skipped { .. }) => {}
                    Some(Outcome::KnownFailure { .. }) | Some(Outcome::UnexpectedPass { .. }) => {
                        result.known_failures.push(case.id.to_string())
                    }
                    Some(_) => result.failed.push(case.id.to_string()),
                }
            }
            result.status = if !result.failed.is_empty() {
                ProfileStatus::NotAchieved
            } else if !result.not_run.is_empty() {
                ProfileStatus::Incomplete
            } else if !result.known_failures.is_empty() {
                ProfileStatus::AchievedWithKnownFailures
            } else {
                ProfileStatus::Achieved
            };
            result
        })
        .collect()
}

/// The terminal summary: a table of results per area, then every result that is not a pass
/// or a skip with its detail, then the skips with their reasons, then the profiles.
pub fn summary_table(report: &RunReport) -> String {
    let mut out = String::new();
    let columns = [
        "pass",
        "fail",
        "skipped",
        "known_failure",
        "unexpected_pass",
        "crashed",
        "timed_out",
    ];
    let headers = [
        "area",
        "pass",
        "fail",
        "skip",
        "known",
        "unexp.pass",
        "crash",
        "timeout",
    ];
    for device in &report.devices {
        let name = device.info.get("name").and_then(|name| name.as_str()).unwrap_or("?");
        let _ = writeln!(out, "\n{}:{}  {name}", report.plugin.name, device.index);
        let mut rows: Vec<Vec<String>> = vec![headers.iter().map(|h| h.to_string()).collect()];
        let mut areas: Vec<&str> = AREAS.to_vec();
        for record in &device.results {
            if !areas.contains(&record.area.as_str()) {
                areas.push(&record.area);
            }
        }
        for area in areas {
            let in_area: Vec<&TestRecord> = device.results.iter().filter(|r| r.area == area).collect();
            if in_area.is_empty() {
                continue;
            }
            let mut row = vec![area.to_string()];
            for column in columns {
                let count = in_area.iter().filter(|r| r.outcome.name() == column).count();
                row.push(if count == 0 { "-".to_string() } else { count.to_string() });
            }
            rows.push(row);
        }
        let mut total = vec!["total".to_string()];
        for column in columns {
            total.push(device.counts.get(column).copied().unwrap_or(0).to_string());
        }
        rows.push(total);
        let widths: Vec<usize> = (0..headers.len())
            .map(|c| rows.iter().map(|row| row[c].len()).max().unwrap_or(0))
            .collect();
        for (position, row) in rows.iter().enumerate() {
            let mut line = String::from("  ");
            for (c, cell) in row.iter().enumerate() {
                if c == 0 {
                    let _ = write!(line, "{cell:<width$}", width = widths[c]);
                } else {
                    let _ = write!(line, "  {cell:>width$}", width = widths[c]);
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
            if position == 0 || position == rows.len() - 2 {
                let _ = writeln!(
                    out,
                    "  {}",
                    "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
                );
            }
        }
        let noteworthy: Vec<&TestRecord> = device
            .results
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Pass | Outcome::Skipped { .. }))
            .collect();
        if !noteworthy.is_empty() {
            let _ = writeln!(out, "\n  not passed:");
            for record in noteworthy {
                let _ = writeln!(
                    out,
                    "    {:<15} {}  {}",
                    record.outcome.name(),
                    record.id,
                    record.outcome.detail()
                );
            }
        }
        let skipped: Vec<&TestRecord> = device
            .results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skipped { .. }))
            .collect();
        if !skipped.is_empty() {
            let _ = writeln!(out, "\n  skipped:");
            for record in skipped {
                let _ = writeln!(out, "    {}  {}", record.id, record.outcome.detail());
            }
        }
        let _ = writeln!(out, "\n  profiles:");
        for profile in &device.profiles {
            let status = match profile.status {
                ProfileStatus::Achieved => "achieved",
                ProfileStatus::AchievedWithKnownFailures => "achieved with known failures",
                ProfileStatus::NotAchieved => "NOT achieved",
                ProfileStatus::Incomplete => "incomplete (not every test ran)",
            };
            let _ = writeln!(
                out,
                "    {:<16} {status} ({}/{} passed)",
                profile.name, profile.passed, profile.total
            );
        }
        if let Some(performance) = &device.performance {
            let _ = writeln!(out, "\n  performance (informational):");
            let figure = |value: Option<f64>, unit: &str| match value {
                Some(value) => format!("{value:.2} {unit}"),
                None => "not measured".to_string(),
            };
            let _ = writeln!(
                out,
                "    launch latency      {}",
                figure(performance.launch_latency_us, "us")
            );
            let _ = writeln!(
                out,
                "    launches            {}",
                figure(performance.launches_per_second, "/s")
            );
            let _ = writeln!(
                out,
                "    enqueue (fill)      {}",
                figure(performance.fill_enqueue_ns, "ns")
            );
            let _ = writeln!(
                out,
                "    graph replay        {}{}",
                figure(performance.graph_replay_ratio, "x the host time of eager launches"),
                match performance.graph_native {
                    Some(true) => " (native)",
                    Some(false) => " (op by op)",
                    None => "",
                }
            );
            let _ = writeln!(
                out,
                "    host to device      {}",
                figure(performance.host_to_device_gb_per_s, "GB/s")
            );
            let _ = writeln!(
                out,
                "    device to host      {}",
                figure(performance.device_to_host_gb_per_s, "GB/s")
            );
            let _ = writeln!(
                out,
                "    device to device    {}",
                figure(performance.device_to_device_gb_per_s, "GB/s")
            );
            if performance.mapped_upload_gb_per_s.is_some() {
                let _ = writeln!(
                    out,
                    "    mapped upload       {}",
                    figure(performance.mapped_upload_gb_per_s, "GB/s")
                );
                let _ = writeln!(
                    out,
                    "    mapped download     {}",
                    figure(performance.mapped_download_gb_per_s, "GB/s")
                );
            }
            let _ = writeln!(
                out,
                "    alloc + free        {}",
                figure(performance.allocations_per_second, "/s")
            );
            for note in &performance.notes {
                let _ = writeln!(out, "    note: {note}");
            }
        }
    }
    out
}

/// JUnit XML: one `<testsuite>` per device and area, one `<testcase>` per test. Skips and
/// known failures are `<skipped>` with the reason, failures `<failure>`, crashes and
/// timeouts `<error>`.
pub fn junit_xml(report: &RunReport) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let all: Vec<&TestRecord> = report.devices.iter().flat_map(|d| &d.results).collect();
    let count = |f: fn(&Outcome) -> bool| all.iter().filter(|r| f(&r.outcome)).count();
    let _ = writeln!(
        out,
        "<testsuites name=\"xhal-cts {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        xml_escape(&report.plugin.name),
        all.len(),
        count(|o| matches!(o, Outcome::Fail { .. })),
        count(|o| matches!(o, Outcome::Crashed { .. } | Outcome::TimedOut { .. })),
        count(|o| matches!(o, Outcome::Skipped { .. } | Outcome::KnownFailure { .. })),
    );
    for device in &report.devices {
        let mut areas: Vec<&str> = Vec::new();
        for record in &device.results {
            if !areas.contains(&record.area.as_str()) {
                areas.push(&record.area);
            }
        }
        for area in areas {
            let records: Vec<&TestRecord> = device.results.iter().filter(|r| r.area == area).collect();
            let failures = records
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Fail { .. }))
                .count();
            let errors = records
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Crashed { .. } | Outcome::TimedOut { .. }))
                .count();
            let skipped = records
                .iter()
                .filter(|r| matches!(r.outcome, Outcome::Skipped { .. } | Outcome::KnownFailure { .. }))
                .count();
            let seconds: f64 = records.iter().map(|r| r.seconds).sum();
            let _ = writeln!(
                out,
                "  <testsuite name=\"{}:{}.{area}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{seconds:.3}\">",
                xml_escape(&report.plugin.name),
                device.index,
                records.len()
            );
            for record in records {
                let _ = write!(
                    out,
                    "    <testcase classname=\"{}:{}.{area}\" name=\"{}\" time=\"{:.3}\"",
                    xml_escape(&report.plugin.name),
                    device.index,
                    xml_escape(&record.id),
                    record.seconds
                );
                let detail = xml_escape(&record.outcome.detail());
                match &record.outcome {
                    Outcome::Pass => out.push_str("/>\n"),
                    Outcome::UnexpectedPass { .. } => {
                        let _ = writeln!(
                            out,
                            ">\n      <system-out>unexpected pass: {detail}</system-out>\n    </testcase>"
                        );
                    }
                    Outcome::Skipped { .. } => {
                        let _ = writeln!(out, ">\n      <skipped message=\"{detail}\"/>\n    </testcase>");
                    }
                    Outcome::KnownFailure { .. } => {
                        let _ = writeln!(
                            out,
                            ">\n      <skipped message=\"known failure: {detail}\"/>\n    </testcase>"
                        );
                    }
                    Outcome::Fail { .. } => {
                        let _ = writeln!(
                            out,
                            ">\n      <failure message=\"{detail}\" type=\"fail\">{detail}</failure>\n    </testcase>"
                        );
                    }
                    Outcome::Crashed { .. } | Outcome::TimedOut { .. } => {
                        let _ = writeln!(
                            out,
                            ">\n      <error message=\"{detail}\" type=\"{}\">{detail}</error>\n    </testcase>",
                            record.outcome.name()
                        );
                    }
                }
            }
            out.push_str("  </testsuite>\n");
        }
    }
    out.push_str("</testsuites>\n");
    out
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot carry most control characters at all, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, outcome: Outcome) -> TestRecord {
        TestRecord {
            id: id.to_string(),
            area: id.split('.').next().unwrap().to_string(),
            profile: "core".to_string(),
            outcome,
            seconds: 0.01,
        }
    }

    #[test]
    fn xml_special_and_control_characters_are_escaped() {
        assert_eq!(xml_escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\\u{1}");
    }

    #[test]
    fn profiles_follow_the_worst_result() {
        let catalogue: Vec<TestCase> = crate::catalogue();
        let core: Vec<&TestCase> = catalogue.iter().filter(|case| case.profile() == "core").collect();
        let mut records: Vec<TestRecord> = core.iter().map(|case| record(case.id, Outcome::Pass)).collect();
        let standing = |records: &[TestRecord]| profiles(&catalogue, records, &[])[0].status;
        assert_eq!(standing(&records), ProfileStatus::Achieved);
        records[0].outcome = Outcome::KnownFailure {
            reason: "driver".to_string(),
            observed: None,
        };
        assert_eq!(standing(&records), ProfileStatus::AchievedWithKnownFailures);
        records.pop();
        assert_eq!(standing(&records), ProfileStatus::Incomplete);
        records[1].outcome = Outcome::TimedOut { limit_seconds: 1.0 };
        assert_eq!(standing(&records), ProfileStatus::NotAchieved);
    }
}

//! Reading a trace and finding where the time went: busy and idle time per stream, the gaps
//! with what the host did meanwhile, the kernels by device time, copy bandwidths, memory peaks.

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One span of a trace.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub category: String,
    pub pid: u64,
    pub tid: u64,
    /// Microseconds from the trace's start.
    pub start: f64,
    pub duration: f64,
    pub bytes: Option<u64>,
    pub host_observed: bool,
    /// Timed from the device's elapsed times back from an anchor (a plugin before ABI 1.3).
    pub device_elapsed: bool,
}

impl Span {
    pub fn end(&self) -> f64 {
        self.start + self.duration
    }
}

/// A counter sample.
#[derive(Debug, Clone)]
pub struct Sample {
    pub pid: u64,
    pub name: String,
    pub at: f64,
    pub values: BTreeMap<String, f64>,
}

/// A trace as read.
#[derive(Debug, Default)]
pub struct Trace {
    pub spans: Vec<Span>,
    pub samples: Vec<Sample>,
    /// Names of processes (`host`, `device cpu:0`) and threads, by id.
    pub process_names: BTreeMap<u64, String>,
    pub thread_names: BTreeMap<(u64, u64), String>,
    /// Lines that were not whole events (a trace cut short by a killed program ends in one).
    pub unreadable_lines: usize,
    /// Whether every process's end record was there (false for a trace cut short).
    pub complete: bool,
    pub ended_processes: usize,
    pub dropped: u64,
}

/// Reads a trace-event file: an xhal trace line by line (so a file cut short mid-line still
/// reads), or any JSON array or `{"traceEvents": [...]}` object.
pub fn read(path: &Path) -> anyhow::Result<Trace> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the trace {}", path.display()))?;
    if text.trim().is_empty() {
        bail!("{} is empty: not a trace", path.display());
    }
    let mut trace = Trace::default();
    let whole: Option<Vec<Value>> = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(events)) => Some(events),
        Ok(Value::Object(mut object)) => match object.remove("traceEvents") {
            Some(Value::Array(events)) => Some(events),
            _ => bail!(
                "{} is a JSON object without a traceEvents array: not a trace",
                path.display()
            ),
        },
        Ok(_) => bail!("{} holds JSON that is not a list of trace events", path.display()),
        Err(_) => None,
    };
    match whole {
        Some(events) => events.iter().for_each(|event| trace.add(event)),
        None => {
            if !text.trim_start().starts_with('[') {
                bail!(
                    "{} is not a trace: expected a JSON array of trace events, as XHAL_TRACE writes",
                    path.display()
                );
            }
            for line in text.lines() {
                let line = line.trim().trim_start_matches('[').trim_end_matches(',').trim();
                if line.is_empty() || line == "]" {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(event) => trace.add(&event),
                    Err(_) => trace.unreadable_lines += 1,
                }
            }
        }
    }
    trace.spans.sort_by(|a, b| a.start.total_cmp(&b.start));
    let hosts = trace
        .process_names
        .values()
        .filter(|name| name.starts_with("host"))
        .count();
    trace.complete = trace.ended_processes > 0 && trace.ended_processes >= hosts;
    Ok(trace)
}

impl Trace {
    /// Keeps only process `pid` of a trace several processes wrote: its host threads and its
    /// devices (processes `pid * 1000 + n`). An error names the processes there are.
    pub fn only_process(mut self, pid: u64) -> anyhow::Result<Trace> {
        let belongs = |other: u64| other == pid || other / 1000 == pid;
        if !self.process_names.keys().any(|other| *other == pid) {
            let hosts: Vec<String> = self
                .process_names
                .iter()
                .filter(|(_, name)| name.starts_with("host"))
                .map(|(other, _)| other.to_string())
                .collect();
            bail!("the trace has no process {pid}; its processes are {}", hosts.join(", "));
        }
        self.spans.retain(|span| belongs(span.pid));
        self.samples.retain(|sample| belongs(sample.pid));
        self.process_names.retain(|other, _| belongs(*other));
        self.thread_names.retain(|(other, _), _| belongs(*other));
        Ok(self)
    }

    fn add(&mut self, event: &Value) {
        let number = |key: &str| event.get(key).and_then(Value::as_f64);
        let pid = event.get("pid").and_then(Value::as_u64).unwrap_or(0);
        let tid = event.get("tid").and_then(Value::as_u64).unwrap_or(0);
        let name = event.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let args = event.get("args");
        match event.get("ph").and_then(Value::as_str) {
            Some("X") => {
                let (Some(start), Some(duration)) = (number("ts"), number("dur")) else {
                    return;
                };
                let clock = args.and_then(|args| args.get("clock")).and_then(Value::as_str);
                self.spans.push(Span {
                    name,
                    category: event.get("cat").and_then(Value::as_str).unwrap_or("").to_string(),
                    pid,
                    tid,
                    start,
                    duration,
                    bytes: args.and_then(|args| args.get("bytes")).and_then(Value::as_u64),
                    host_observed: clock == Some("host-observed"),
                    device_elapsed: clock == Some("device-elapsed"),
                });
            }
            Some("C") => {
                let values = args
                    .and_then(Value::as_object)
                    .map(|object| {
                        object
                            .iter()
                            .filter_map(|(key, value)| value.as_f64().map(|value| (key.clone(), value)))
                            .collect()
                    })
                    .unwrap_or_default();
                self.samples.push(Sample {
                    pid,
                    name,
                    at: number("ts").unwrap_or(0.0),
                    values,
                });
            }
            Some("M") => {
                let label = args.and_then(|args| args.get("name")).and_then(Value::as_str);
                match (name.as_str(), label) {
                    ("process_name", Some(label)) => {
                        self.process_names.insert(pid, label.to_string());
                    }
                    ("thread_name", Some(label)) => {
                        self.thread_names.insert((pid, tid), label.to_string());
                    }
                    _ => {}
                }
            }
            // One per process that finished its trace.
            Some("i") if name == "trace end" => {
                self.ended_processes += 1;
                self.dropped += args
                    .and_then(|args| args.get("dropped"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            _ => {}
        }
    }

    /// `device cpu:0 / stream 3`.
    pub fn track_name(&self, pid: u64, tid: u64) -> String {
        let process = self
            .process_names
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| format!("process {pid}"));
        let thread = self
            .thread_names
            .get(&(pid, tid))
            .cloned()
            .unwrap_or_else(|| format!("track {tid}"));
        format!("{process} / {thread}")
    }

    /// Whether `pid` is a device's process (its name begins `device`), not a host's.
    pub fn is_device(&self, pid: u64) -> bool {
        self.process_names
            .get(&pid)
            .is_some_and(|name| name.starts_with("device"))
    }
}

/// What `xhal trace summary` reports.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub file: String,
    /// Microseconds from the first span's start to the last one's end.
    pub duration_us: f64,
    pub complete: bool,
    pub dropped_records: u64,
    pub unreadable_lines: usize,
    pub gap_threshold_us: f64,
    pub streams: Vec<StreamSummary>,
    pub kernels: Vec<KernelSummary>,
    pub copies: Vec<CopySummary>,
    pub memory: Vec<MemorySummary>,
    pub host_calls: Vec<HostCallSummary>,
}

#[derive(Debug, Serialize)]
pub struct StreamSummary {
    pub track: String,
    pub operations: usize,
    /// Time the stream ran work (waits excluded), in microseconds.
    pub busy_us: f64,
    /// From its first operation's start to its last one's end.
    pub active_us: f64,
    /// Time in waits for other streams' events.
    pub waiting_us: f64,
    /// Operations whose times the host observed, without device timestamps.
    pub host_observed: usize,
    /// Operations timed from elapsed times back from an anchor, without a device clock.
    pub device_elapsed: usize,
    pub gaps: Vec<Gap>,
}

/// How many of a stream's operations were not timed by the device's own clock.
fn clock_note(stream: &StreamSummary) -> String {
    let mut note = String::new();
    if stream.device_elapsed > 0 {
        note.push_str(&format!(", {} device-elapsed", stream.device_elapsed));
    }
    if stream.host_observed > 0 {
        note.push_str(&format!(", {} host-observed", stream.host_observed));
    }
    note
}

/// A stretch longer than the threshold in which a stream ran nothing.
#[derive(Debug, Serialize)]
pub struct Gap {
    /// From the trace's first span.
    pub start_us: f64,
    pub duration_us: f64,
    /// What the host was doing then: the host calls overlapping the gap, longest overlap first.
    pub host_was: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct KernelSummary {
    pub name: String,
    pub count: usize,
    pub total_us: f64,
    pub mean_us: f64,
}

#[derive(Debug, Serialize)]
pub struct CopySummary {
    pub name: String,
    pub count: usize,
    pub bytes: u64,
    pub total_us: f64,
    /// Bytes per second over the copies' device time, in GB/s (10^9 bytes).
    pub gigabytes_per_second: f64,
}

#[derive(Debug, Serialize)]
pub struct MemorySummary {
    pub device: String,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    pub peak_at_us: f64,
}

#[derive(Debug, Serialize)]
pub struct HostCallSummary {
    pub name: String,
    pub count: usize,
    pub total_us: f64,
}

/// Summarises `trace`; gaps shorter than `gap_threshold_us` are not listed.
pub fn summarise(file: &Path, trace: &Trace, gap_threshold_us: f64) -> Summary {
    let first = trace.spans.iter().map(|span| span.start).fold(f64::INFINITY, f64::min);
    let last = trace.spans.iter().map(Span::end).fold(f64::NEG_INFINITY, f64::max);
    let host_spans: Vec<&Span> = trace
        .spans
        .iter()
        .filter(|span| !trace.is_device(span.pid) && span.category != "region")
        .collect();

    let mut by_stream: BTreeMap<(u64, u64), Vec<&Span>> = BTreeMap::new();
    for span in trace.spans.iter().filter(|span| trace.is_device(span.pid)) {
        by_stream.entry((span.pid, span.tid)).or_default().push(span);
    }
    let streams = by_stream
        .iter()
        .map(|(&(pid, tid), spans)| {
            let mut stream = stream_summary(trace.track_name(pid, tid), spans, &host_spans, gap_threshold_us);
            // Gaps are placed from the trace's first span, as viewers show time.
            stream.gaps.iter_mut().for_each(|gap| gap.start_us -= first);
            stream
        })
        .collect();

    let mut kernels: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    let mut copies: BTreeMap<&str, (usize, u64, f64)> = BTreeMap::new();
    for span in trace.spans.iter().filter(|span| trace.is_device(span.pid)) {
        match span.category.as_str() {
            "kernel" => {
                let entry = kernels.entry(&span.name).or_default();
                entry.0 += 1;
                entry.1 += span.duration;
            }
            "copy" | "fill" => {
                let entry = copies.entry(&span.name).or_default();
                entry.0 += 1;
                entry.1 += span.bytes.unwrap_or(0);
                entry.2 += span.duration;
            }
            _ => {}
        }
    }
    let mut kernels: Vec<KernelSummary> = kernels
        .into_iter()
        .map(|(name, (count, total))| KernelSummary {
            name: name.to_string(),
            count,
            total_us: total,
            mean_us: total / count as f64,
        })
        .collect();
    kernels.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));
    let copies = copies
        .into_iter()
        .map(|(name, (count, bytes, total))| CopySummary {
            name: name.to_string(),
            count,
            bytes,
            total_us: total,
            gigabytes_per_second: if total > 0.0 { bytes as f64 / (total * 1e3) } else { 0.0 },
        })
        .collect();

    let mut memory: BTreeMap<u64, MemorySummary> = BTreeMap::new();
    for sample in trace.samples.iter().filter(|sample| sample.name == "memory") {
        let entry = memory.entry(sample.pid).or_insert_with(|| MemorySummary {
            device: trace
                .process_names
                .get(&sample.pid)
                .cloned()
                .unwrap_or_else(|| format!("process {}", sample.pid)),
            peak_allocated: 0,
            peak_reserved: 0,
            peak_at_us: 0.0,
        });
        let allocated = sample.values.get("allocated").copied().unwrap_or(0.0) as u64;
        let reserved = sample.values.get("reserved").copied().unwrap_or(0.0) as u64;
        if allocated > entry.peak_allocated {
            entry.peak_allocated = allocated;
            entry.peak_at_us = sample.at - first;
        }
        entry.peak_reserved = entry.peak_reserved.max(reserved);
    }

    let mut host_calls: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for span in &host_spans {
        let entry = host_calls.entry(&span.name).or_default();
        entry.0 += 1;
        entry.1 += span.duration;
    }
    let mut host_calls: Vec<HostCallSummary> = host_calls
        .into_iter()
        .map(|(name, (count, total))| HostCallSummary {
            name: name.to_string(),
            count,
            total_us: total,
        })
        .collect();
    host_calls.sort_by(|a, b| b.total_us.total_cmp(&a.total_us));

    Summary {
        file: file.display().to_string(),
        duration_us: if last > first { last - first } else { 0.0 },
        complete: trace.complete,
        dropped_records: trace.dropped,
        unreadable_lines: trace.unreadable_lines,
        gap_threshold_us,
        streams,
        kernels,
        copies,
        memory: memory.into_values().collect(),
        host_calls,
    }
}

fn stream_summary(track: String, spans: &[&Span], host: &[&Span], threshold: f64) -> StreamSummary {
    let mut busy = 0.0;
    let mut waiting = 0.0;
    let mut gaps = Vec::new();
    // Work ends here so far; spans are sorted by start.
    let mut covered_until: Option<f64> = None;
    for span in spans {
        if span.category == "wait" {
            waiting += span.duration;
            continue;
        }
        let (start, end) = (span.start, span.end());
        match covered_until {
            Some(until) if start > until => {
                if start - until >= threshold {
                    gaps.push(Gap {
                        start_us: until,
                        duration_us: start - until,
                        host_was: host_during(host, until, start),
                    });
                }
                busy += end - start;
                covered_until = Some(end);
            }
            Some(until) => {
                busy += (end - until).max(0.0);
                covered_until = Some(until.max(end));
            }
            None => {
                busy += end - start;
                covered_until = Some(end);
            }
        }
    }
    let first = spans.first().map_or(0.0, |span| span.start);
    let last = spans.iter().map(|span| span.end()).fold(first, f64::max);
    StreamSummary {
        track,
        operations: spans.len(),
        busy_us: busy,
        active_us: last - first,
        waiting_us: waiting,
        host_observed: spans.iter().filter(|span| span.host_observed).count(),
        device_elapsed: spans.iter().filter(|span| span.device_elapsed).count(),
        gaps,
    }
}

/// The host calls overlapping `start..end`, longest overlap first, as `name (µs)`.
fn host_during(host: &[&Span], start: f64, end: f64) -> Vec<String> {
    let mut overlaps: BTreeMap<&str, f64> = BTreeMap::new();
    for span in host {
        let overlap = span.end().min(end) - span.start.max(start);
        if overlap > 0.0 {
            *overlaps.entry(&span.name).or_default() += overlap;
        }
    }
    let mut overlaps: Vec<(&str, f64)> = overlaps.into_iter().collect();
    overlaps.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut described: Vec<String> = overlaps
        .iter()
        .take(3)
        .map(|(name, overlap)| format!("{name} ({overlap:.0} µs)"))
        .collect();
    if described.is_empty() {
        described.push("nothing xhal saw (application code)".to_string());
    }
    described
}

/// The summary as text.
pub fn render(summary: &Summary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace {}: {:.3} ms{}{}",
        summary.file,
        summary.duration_us / 1e3,
        if summary.complete {
            ""
        } else {
            ", cut short (no end record)"
        },
        if summary.dropped_records > 0 {
            format!(", {} records dropped", summary.dropped_records)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "\nstreams (busy = running work; gaps over {:.0} µs listed)",
        summary.gap_threshold_us
    );
    for stream in &summary.streams {
        let share = if stream.active_us > 0.0 {
            100.0 * stream.busy_us / stream.active_us
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  {}: {} operations, busy {:.1} µs of {:.1} µs ({share:.0}%), waiting {:.1} µs{}",
            stream.track,
            stream.operations,
            stream.busy_us,
            stream.active_us,
            stream.waiting_us,
            clock_note(stream)
        );
        for gap in &stream.gaps {
            let _ = writeln!(
                out,
                "    idle {:.1} µs at {:.1} µs; host: {}",
                gap.duration_us,
                gap.start_us,
                gap.host_was.join(", ")
            );
        }
    }
    if !summary.kernels.is_empty() {
        let _ = writeln!(
            out,
            "\nkernels by device time\n  {:<32} {:>6} {:>12} {:>12}",
            "kernel", "count", "total µs", "mean µs"
        );
        for kernel in &summary.kernels {
            let _ = writeln!(
                out,
                "  {:<32} {:>6} {:>12.1} {:>12.2}",
                kernel.name, kernel.count, kernel.total_us, kernel.mean_us
            );
        }
    }
    if !summary.copies.is_empty() {
        let _ = writeln!(
            out,
            "\ncopies and fills\n  {:<10} {:>6} {:>14} {:>12} {:>8}",
            "operation", "count", "bytes", "total µs", "GB/s"
        );
        for copy in &summary.copies {
            let _ = writeln!(
                out,
                "  {:<10} {:>6} {:>14} {:>12.1} {:>8.2}",
                copy.name, copy.count, copy.bytes, copy.total_us, copy.gigabytes_per_second
            );
        }
    }
    if !summary.memory.is_empty() {
        let _ = writeln!(out, "\nmemory peaks");
        for memory in &summary.memory {
            let _ = writeln!(
                out,
                "  {}: {} bytes allocated at {:.1} µs, {} reserved",
                memory.device, memory.peak_allocated, memory.peak_at_us, memory.peak_reserved
            );
        }
    }
    if !summary.host_calls.is_empty() {
        let _ = writeln!(
            out,
            "\nhost calls by time\n  {:<20} {:>6} {:>12}",
            "call", "count", "total µs"
        );
        for call in summary.host_calls.iter().take(10) {
            let _ = writeln!(out, "  {:<20} {:>6} {:>12.1}", call.name, call.count, call.total_us);
        }
    }
    out
}

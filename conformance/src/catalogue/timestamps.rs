//! Device timestamps (ABI 1.3 `device_clock` and `event_timestamp`), part of the `events`
//! area: that a device's times, placed on the host's clock by its own calibration, fall
//! inside the windows in which the host saw the work submitted and complete, run at the
//! host's rate, agree with elapsed times, and come out of a trace the same way.
//!
//! A device without the entries is skipped here, saying so: its traces time operations from
//! elapsed times instead, which the host keeps inside those windows itself.

use super::streams::{busy_kernel, queue_busy, BUSY_ELEMENTS, BUSY_ITERATIONS};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, expect_error, Requirement, TestCase, TestResult, Verdict};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use xhal::{ClockSample, ErrorKind, Features};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "events.timestamp.inside_host_windows",
            "event timestamps, placed by the device's clock reading, fall between each submission and the host's wait, in order",
            Requirement::features(Features::TIMESTAMPS),
            inside_host_windows
        ),
        test_case!(
            "events.timestamp.clock_keeps_the_host_rate",
            "two readings of the device clock advance as far as the host's clock did between them",
            Requirement::features(Features::TIMESTAMPS),
            clock_keeps_the_host_rate
        ),
        test_case!(
            "events.timestamp.agree_with_elapsed_time",
            "differences of event timestamps equal the elapsed times the device measures",
            Requirement::features(Features::TIMESTAMPS),
            agree_with_elapsed_time
        ),
        test_case!(
            "events.timestamp.misuse_refused",
            "a timestamp of an event without timing, or never recorded, is refused as an invalid argument",
            Requirement::features(Features::TIMESTAMPS),
            misuse_refused
        ),
        test_case!(
            "events.trace.device_spans_inside_submission_windows",
            "a trace's device spans lie inside their host submission windows and are ordered on each stream",
            Requirement::features(Features::TIMESTAMPS),
            trace_spans_inside_submission_windows
        ),
    ]
}

/// Host time allowed beyond the clock reading's own uncertainty: the rounding of tick periods,
/// and a reading that is itself a round trip.
const SLACK: Duration = Duration::from_micros(200);

/// The device's clock, or a skip that says the device has none.
fn device_clock(context: &TestContext) -> Result<ClockSample, Verdict> {
    match context.device().clock() {
        Ok(sample) => Ok(sample),
        Err(error) if error.kind() == ErrorKind::Unsupported => Err(Verdict::skip(format!(
            "the device has no clock to calibrate (ABI 1.3 device_clock and event_timestamp): {error}"
        ))),
        Err(error) => Err(error.into()),
    }
}

fn tolerance(clock: &ClockSample) -> Duration {
    Duration::from_nanos(clock.uncertainty_ns.saturating_mul(2)) + SLACK
}

fn inside_host_windows(context: &TestContext) -> TestResult {
    device_clock(context)?;
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let mut marks = Vec::new();
    for round in 0..4u32 {
        let submitted = Instant::now();
        queue_busy(stream, &busy, &out, BUSY_ITERATIONS, round)?;
        let event = device.create_event()?;
        stream.record(&event)?;
        marks.push((submitted, event));
    }
    stream.synchronize()?;
    let waited = Instant::now();
    let clock = device_clock(context)?;
    let slack = tolerance(&clock);
    let mut previous: Option<Instant> = None;
    for (index, (submitted, event)) in marks.iter().enumerate() {
        let timestamp = event.device_timestamp()?;
        let completed = clock.to_instant(timestamp);
        check(completed + slack >= *submitted, || {
            format!(
                "event {index} completed {:?} before the host submitted the work before it (device clock reading {clock:?})",
                submitted.saturating_duration_since(completed)
            )
        })?;
        check(completed <= waited + slack, || {
            format!(
                "event {index} completed {:?} after the host's wait for it returned (device clock reading {clock:?})",
                completed.saturating_duration_since(waited)
            )
        })?;
        if let Some(previous) = previous {
            check(completed >= previous, || {
                format!(
                    "event {index} completed {:?} before the event recorded before it on the same stream",
                    previous.saturating_duration_since(completed)
                )
            })?;
        }
        previous = Some(completed);
    }
    Ok(())
}

fn clock_keeps_the_host_rate(context: &TestContext) -> TestResult {
    let first = device_clock(context)?;
    std::thread::sleep(Duration::from_millis(50));
    let second = device_clock(context)?;
    let host = second.host_ns.saturating_sub(first.host_ns);
    check(second.device_ns > first.device_ns && host > 0, || {
        format!("the device clock did not advance: {first:?} then {second:?}")
    })?;
    let device = second.device_ns - first.device_ns;
    // Rates differ by parts per million; the readings' own uncertainty dominates.
    let allowed = first.uncertainty_ns + second.uncertainty_ns + host / 100 + SLACK.as_nanos() as u64;
    check(device.abs_diff(host) <= allowed, || {
        format!(
            "between two readings the device clock advanced {device} ns and the host's {host} ns; \
             they may differ by {allowed} ns ({first:?} then {second:?})"
        )
    })
}

fn agree_with_elapsed_time(context: &TestContext) -> TestResult {
    device_clock(context)?;
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let start = device.create_event()?;
    stream.record(&start)?;
    queue_busy(stream, &busy, &out, BUSY_ITERATIONS, 5)?;
    let end = device.create_event()?;
    stream.record(&end)?;
    stream.synchronize()?;
    let elapsed = end.elapsed_since(&start)?;
    let (first, last) = (start.device_timestamp()?, end.device_timestamp()?);
    check(last >= first, || {
        format!("the end event's timestamp {last} is before the start event's {first}")
    })?;
    let difference = Duration::from_nanos(last - first);
    // Devices round elapsed times (to half a microsecond on some).
    let allowed = Duration::from_micros(2) + elapsed / 1000;
    check(difference.abs_diff(elapsed) <= allowed, || {
        format!("timestamps differ by {difference:?}, but the elapsed time between the events is {elapsed:?}")
    })
}

fn misuse_refused(context: &TestContext) -> TestResult {
    device_clock(context)?;
    let device = context.device();
    let stream = context.stream();
    let untimed = device.create_event_without_timing()?;
    stream.record(&untimed)?;
    stream.synchronize()?;
    expect_error(
        untimed.device_timestamp(),
        &[ErrorKind::InvalidArgument],
        "the timestamp of an event created without timing",
    )?;
    let never = device.create_event()?;
    expect_error(
        never.device_timestamp(),
        &[ErrorKind::InvalidArgument],
        "the timestamp of an event never recorded",
    )?;
    Ok(())
}

/// One complete span of a trace.
struct Span {
    name: String,
    start: f64,
    end: f64,
}

/// How far two equal times of a trace may read apart, in microseconds: they are microseconds
/// since 2024 in a double.
const ROUNDING_US: f64 = 0.1;

/// A device span and its `clock` marker, if it has one.
type DeviceSpan = (Span, Option<String>);

fn trace_spans_inside_submission_windows(context: &TestContext) -> TestResult {
    let clock = device_clock(context)?;
    if xhal::trace::is_active() {
        return Err(Verdict::skip(
            "a trace is already being recorded (xhal-cts run --trace); this test records one of its own",
        ));
    }
    let folder = std::env::temp_dir().join(format!("xhal-cts-trace-{}", std::process::id()));
    std::fs::create_dir_all(&folder).map_err(|error| Verdict::fail(format!("making {}: {error}", folder.display())))?;
    let path = folder.join("spans.json");
    let session = xhal::trace::start(&path)?;
    let traced = traced_work(context);
    session.stop()?;
    let text = std::fs::read_to_string(&path);
    let _ = std::fs::remove_dir_all(&folder);
    traced?;
    let text = text.map_err(|error| Verdict::fail(format!("reading the trace {}: {error}", path.display())))?;
    check_spans(&text, &clock)
}

/// Work on two streams, one waiting for an event of the other, each synchronized at the end.
fn traced_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let (first, second) = (device.create_stream()?, device.create_stream()?);
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let copy = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let event = device.create_event()?;
    first.fill(&out, 7u32)?;
    queue_busy(&first, &busy, &out, BUSY_ITERATIONS, 1)?;
    queue_busy(&first, &busy, &out, BUSY_ITERATIONS, 2)?;
    first.record(&event)?;
    second.wait(&event)?;
    second.copy(&out, &copy)?;
    second.fill(&out, 0u32)?;
    first.synchronize()?;
    second.synchronize()?;
    Ok(())
}

/// Pairs each stream's device spans with the host calls that enqueued them, in order, and
/// checks each lies between its call's start and the end of the synchronize that followed.
fn check_spans(text: &str, clock: &ClockSample) -> TestResult {
    let pid = u64::from(std::process::id());
    let mut enqueues: BTreeMap<u64, Vec<Span>> = BTreeMap::new();
    let mut synchronizes: BTreeMap<u64, Vec<Span>> = BTreeMap::new();
    let mut device_spans: BTreeMap<(u64, u64), Vec<DeviceSpan>> = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim().trim_end_matches(',');
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if record["ph"] != "X" {
            continue;
        }
        let (Some(start), Some(duration)) = (record["ts"].as_f64(), record["dur"].as_f64()) else {
            continue;
        };
        let span = Span {
            name: record["name"].as_str().unwrap_or_default().to_string(),
            start,
            end: start + duration,
        };
        let record_pid = record["pid"].as_u64().unwrap_or_default();
        let args = &record["args"];
        if record_pid == pid {
            let Some(stream) = args["stream"].as_u64() else {
                continue;
            };
            match span.name.as_str() {
                "fill" | "launch" | "copy" | "record" | "wait" => enqueues.entry(stream).or_default().push(span),
                "synchronize" => synchronizes.entry(stream).or_default().push(span),
                _ => {}
            }
        } else if record_pid / 1000 == pid {
            let Some(tid) = record["tid"].as_u64() else { continue };
            let marker = args["clock"].as_str().map(str::to_string);
            device_spans.entry((record_pid, tid)).or_default().push((span, marker));
        }
    }
    check(device_spans.len() == 2, || {
        format!(
            "the trace holds device spans on {} stream tracks; expected the 2 streams the test used",
            device_spans.len()
        )
    })?;
    // Microseconds, as the trace writes them.
    let slack = tolerance(clock).as_secs_f64() * 1e6;
    for ((_, stream), spans) in &device_spans {
        let calls = enqueues.get(stream).map(Vec::as_slice).unwrap_or_default();
        check(calls.len() == spans.len(), || {
            format!(
                "stream {stream}: {} device spans for {} enqueuing calls; expected one each",
                spans.len(),
                calls.len()
            )
        })?;
        let waits = synchronizes.get(stream).map(Vec::as_slice).unwrap_or_default();
        let mut previous_end = f64::NEG_INFINITY;
        for (index, ((span, marker), call)) in spans.iter().zip(calls).enumerate() {
            check(marker.is_none(), || {
                format!(
                    "stream {stream}: device span {index} ({}) is marked `{}`; a device with a clock gives device times",
                    span.name,
                    marker.as_deref().unwrap_or_default()
                )
            })?;
            let Some(observed) = waits.iter().find(|wait| wait.end >= call.end) else {
                return Err(Verdict::fail(format!(
                    "stream {stream}: no synchronize follows the call that enqueued device span {index}"
                )));
            };
            check(
                span.start + slack >= call.start && span.end <= observed.end + slack,
                || {
                    format!(
                        "stream {stream}: device span {index} ({}) runs {:.1}..{:.1} µs, outside its window from the \
                     `{}` call at {:.1} µs to the end of the synchronize at {:.1} µs (tolerance {slack:.1} µs)",
                        span.name, span.start, span.end, call.name, call.start, observed.end
                    )
                },
            )?;
            // Trace times are microseconds since 2024 in a double, good to a few hundredths
            // of a microsecond: a start equal to the previous end may read a little below it.
            check(
                span.start + ROUNDING_US >= previous_end && span.end >= span.start,
                || {
                    format!(
                        "stream {stream}: device span {index} ({}) runs {:.1}..{:.1} µs, before the span before it \
                     ended at {previous_end:.1} µs",
                        span.name, span.start, span.end
                    )
                },
            )?;
            previous_end = span.end;
        }
    }
    Ok(())
}

//! The trace file: what a traced region writes, read back as JSON.

use super::*;
use parking_lot::Mutex;

/// Traces are process-wide: these tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn temporary(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("xhal-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(name)
}

/// Reads a trace the way a viewer does: the closing `]` may be missing.
fn events(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let trimmed = text.trim_end();
    let whole = if trimmed.ends_with(']') {
        trimmed.to_string()
    } else {
        format!("{}\n]", trimmed.trim_end_matches(','))
    };
    serde_json::from_str::<Vec<serde_json::Value>>(&whole).unwrap()
}

#[test]
fn spans_regions_counters_and_flows_are_written_as_trace_events() {
    let _turn = ONE_AT_A_TIME.lock();
    let path = temporary("spans.json");
    let session = start(&path).unwrap();
    {
        let _region = region("my region");
        let mut span = span("api", "launch", || {
            vec![("kernel", Value::from("saxpy")), ("workgroups", Value::from(4u64))]
        });
        span.arg("cache", "hit");
    }
    let device = new_track_number();
    let stream = new_track_number();
    name_stream(device, "cpu:0", stream);
    let now = Instant::now();
    device_span(
        Track::Stream { device, stream },
        "saxpy",
        "kernel",
        now,
        now + Duration::from_micros(5),
        DeviceClock::HostObserved,
        Vec::new(),
    );
    counter(device, "memory".into(), vec![("allocated", 4096)]);
    flow(9, FlowPhase::Begin, thread_track(), now);
    let summary = session.stop().unwrap();
    assert_eq!(summary.dropped, 0);

    let events = events(&path);
    let named = |name: &str| events.iter().filter(|event| event["name"] == name).collect::<Vec<_>>();
    let launch = named("launch");
    assert_eq!(launch.len(), 1);
    assert_eq!(launch[0]["ph"], "X");
    assert_eq!(launch[0]["cat"], "api");
    assert_eq!(launch[0]["args"]["kernel"], "saxpy");
    assert_eq!(launch[0]["args"]["workgroups"], 4);
    assert_eq!(launch[0]["args"]["cache"], "hit");
    let region = &named("my region")[0];
    // The region encloses the launch on the same thread.
    assert_eq!(region["tid"], launch[0]["tid"]);
    let (region_start, launch_start) = (region["ts"].as_f64().unwrap(), launch[0]["ts"].as_f64().unwrap());
    assert!(region_start <= launch_start);
    let kernel = &named("saxpy")[0];
    assert_eq!(kernel["args"]["clock"], "host-observed");
    assert!((kernel["dur"].as_f64().unwrap() - 5.0).abs() < 0.01);
    assert!(named("process_name").iter().any(|event| event["args"]["name"]
        .as_str()
        .unwrap()
        .starts_with("device cpu:0 (process ")));
    assert!(named("thread_name")
        .iter()
        .any(|event| event["tid"] == launch[0]["tid"]));
    assert_eq!(named("memory")[0]["args"]["allocated"], 4096);
    assert_eq!(named("enqueue")[0]["ph"], "s");
    assert_eq!(named("trace end")[0]["args"]["dropped"], 0);
}

#[test]
fn a_trace_cut_short_is_still_readable_after_a_flush() {
    let _turn = ONE_AT_A_TIME.lock();
    let path = temporary("cut.json");
    let session = start(&path).unwrap();
    for index in 0..100u64 {
        let _span = span("api", "fill", || vec![("bytes", Value::from(index))]);
    }
    flush();
    // What a killed program leaves: the file as flushed, without the closing bracket.
    let cut = events(&path);
    assert_eq!(cut.iter().filter(|event| event["name"] == "fill").count(), 100);
    session.stop().unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().trim_end().ends_with(']'));
}

#[test]
fn a_second_trace_and_a_stop_without_a_trace_are_refused() {
    let _turn = ONE_AT_A_TIME.lock();
    let path = temporary("first.json");
    let session = start(&path).unwrap();
    let error = start(temporary("second.json")).unwrap_err();
    assert!(error.to_string().contains("already being recorded"), "{error}");
    assert!(error.to_string().contains("first.json"), "{error}");
    session.stop().unwrap();
    assert!(!is_active());
    assert!(stop().unwrap_err().to_string().contains("no trace"));
    let unwritable = start(Path::new("/nonexistent-folder/trace.json")).unwrap_err();
    assert!(
        unwritable.to_string().contains("cannot create the trace file"),
        "{unwritable}"
    );
}

#[test]
fn the_cap_drops_what_comes_after_it_and_says_how_much() {
    let _turn = ONE_AT_A_TIME.lock();
    let path = temporary("capped.json");
    let session = start_with_cap(&path, 4096).unwrap();
    for _ in 0..1000 {
        let _span = span("api", "copy", || vec![("bytes", Value::from(1u64))]);
    }
    let summary = session.stop().unwrap();
    assert!(summary.bytes <= 4096, "{summary:?}");
    assert!(summary.dropped > 0);
    let events = events(&path);
    let end = events.iter().find(|event| event["name"] == "trace end").unwrap();
    assert_eq!(end["args"]["capped"], true);
    assert_eq!(end["args"]["dropped"], summary.dropped);
}

#[test]
fn off_spans_record_nothing_and_do_not_build_their_arguments() {
    let _turn = ONE_AT_A_TIME.lock();
    assert!(!is_active());
    let _span = span("api", "write", || {
        unreachable!("arguments are built only while tracing")
    });
}

#[test]
fn an_appended_trace_continues_a_finished_one_in_one_list() {
    let _turn = ONE_AT_A_TIME.lock();
    let path = temporary("appended.json");
    let first = start(&path).unwrap();
    drop(span("api", "first process", Vec::new));
    first.stop().unwrap();
    let second = start_with(&path, DEFAULT_MAX_BYTES, true).unwrap();
    drop(span("api", "second process", Vec::new));
    second.stop().unwrap();
    // The file is still one JSON array, holding both traces.
    let text = std::fs::read_to_string(&path).unwrap();
    let events: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    for name in ["first process", "second process"] {
        assert_eq!(events.iter().filter(|event| event["name"] == name).count(), 1, "{name}");
    }
    assert_eq!(events.iter().filter(|event| event["name"] == "trace end").count(), 2);
    // A file that is not a finished trace is started afresh.
    std::fs::write(&path, "[\n{\"name\":\"cut\"").unwrap();
    start_with(&path, DEFAULT_MAX_BYTES, true).unwrap().stop().unwrap();
    let events: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(events.iter().all(|event| event["name"] != "cut"));
}

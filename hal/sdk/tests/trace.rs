//! A traced program on the CPU reference backend: every call appears once on the host and
//! once on the device, in order, and a cross-stream wait shows as a flow.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use xhal::{trace, Launch};

const SCALE: &str = r#"
struct Params { a: f32, n: u32 }
var<immediate> params: Params;
@group(0) @binding(0) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < params.n {
        y[id.x] = params.a * y[id.x];
    }
}
"#;

fn trace_file(name: &str) -> PathBuf {
    let folder = support::target_dir().join("trace-tests");
    std::fs::create_dir_all(&folder).unwrap();
    folder.join(name)
}

fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn of<'a>(events: &'a [Value], category: &str, name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["cat"] == category && event["name"] == name)
        .collect()
}

fn start(event: &Value) -> f64 {
    event["ts"].as_f64().unwrap()
}

fn end(event: &Value) -> f64 {
    start(event) + event["dur"].as_f64().unwrap()
}

// One test: a trace is process-wide, so two traced tests in one binary would see each other.
#[test]
fn a_traced_program_shows_each_launch_on_the_host_and_the_device_and_waits_as_flows() {
    let device = support::static_cpu_device();
    let path = trace_file("program.json");
    let session = trace::start(&path).unwrap();

    let producer = device.create_stream().unwrap();
    let consumer = device.create_stream().unwrap();
    let data: Vec<f32> = (0..4096).map(|value| value as f32).collect();
    let y = device.alloc_from(&producer, &data).unwrap();
    let module = device.load_wgsl(SCALE).unwrap();
    let kernel = module.kernel("scale").unwrap();
    for _ in 0..3 {
        let launch = Launch::new(&kernel)
            .buffer(&y)
            .scalar(2.0f32)
            .scalar(4096u32)
            .workgroups(64, 1, 1);
        producer.launch(&launch).unwrap();
    }
    let ready = device.create_event().unwrap();
    producer.record(&ready).unwrap();
    consumer.wait(&ready).unwrap();
    consumer.fill(&y, 0f32).unwrap();
    consumer.synchronize().unwrap();
    producer.synchronize().unwrap();
    let summary = session.stop().unwrap();
    assert_eq!(summary.dropped, 0);

    let events = events(&path);
    let host_launches = of(&events, "api", "launch");
    let device_launches = of(&events, "kernel", "scale");
    assert_eq!(host_launches.len(), 3, "each launch once on the host");
    assert_eq!(device_launches.len(), 3, "each launch once on the device");
    for (host, device) in host_launches.iter().zip(&device_launches) {
        assert_eq!(host["args"]["kernel"], "scale");
        assert_eq!(device["args"]["workgroups"], "64x1x1");
        assert!(
            device["args"].get("clock").is_none(),
            "the CPU backend has device timers"
        );
        // The device ran it after it was enqueued.
        assert!(start(device) + 1.0 >= start(host), "{device} starts before {host}");
    }
    // In order on one stream, never overlapping.
    for pair in device_launches.windows(2) {
        assert_eq!(pair[0]["tid"], pair[1]["tid"]);
        assert!(
            // Trace times are microseconds since 2024 in doubles, good to about 0.02 µs.
            end(pair[0]) <= start(pair[1]) + 0.05,
            "{} overlaps {}",
            pair[0],
            pair[1]
        );
    }
    // The wait is a device span on the consumer's track, reached by a flow from the record.
    let record = of(&events, "sync", "record")[0];
    let wait = of(&events, "wait", "wait")[0];
    assert_ne!(record["tid"], wait["tid"]);
    let flows: Vec<&Value> = events.iter().filter(|event| event["cat"] == "flow").collect();
    let starts_at_record = flows
        .iter()
        .find(|flow| flow["ph"] == "s" && flow["tid"] == record["tid"] && flow["pid"] == record["pid"])
        .expect("a flow leaves the record");
    assert!(flows
        .iter()
        .any(|flow| flow["ph"] == "f" && flow["id"] == starts_at_record["id"] && flow["tid"] == wait["tid"]));
    // The fill ran after the wait, on the consumer.
    let fill = of(&events, "fill", "fill")[0];
    assert_eq!(fill["tid"], wait["tid"]);
    assert!(start(fill) + 0.05 >= end(wait));
    // Memory counters and the one-time work are there.
    assert!(events
        .iter()
        .any(|event| event["ph"] == "C" && event["name"] == "memory"));
    assert_eq!(of(&events, "compile", "load module").len(), 1);
    assert!(events
        .iter()
        .any(|event| event["name"] == "process_name"
            && event["args"]["name"].as_str().unwrap().starts_with("device cpu:0")));
}

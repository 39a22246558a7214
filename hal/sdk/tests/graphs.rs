//! Graphs on the CPU reference backend: which replays are native, how failures on a graph's
//! own streams reach the replay stream, and the refusals the conformance suite does not cover
//! (devices, destroyed streams, uniforms). The `graphs` area of `xhal-cts` holds every device
//! to the rest.

mod support;

use xhal::{Device, ErrorKind, KernelFormat, Launch};

fn cpu_device() -> Device {
    support::static_cpu_runtime(2).open("cpu:0").expect("cpu:0")
}

const SCALE: &str = r#"
struct Params { factor: u32, offset: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = data[id.x] * params.factor + params.offset;
    }
}
"#;

#[test]
fn the_cpu_device_replays_natively_unless_asked_to_emulate() {
    let device = cpu_device();
    let buffer = device.alloc::<u32>(16).unwrap();
    for (emulate, native) in [(false, true), (true, false)] {
        let mut graph = device.graph();
        graph.emulate(emulate);
        let lane = graph.stream();
        graph.fill(lane, &buffer, 7u32).unwrap();
        let graph = graph.build().unwrap();
        assert_eq!(graph.is_native(), native, "emulate({emulate})");
        let stream = device.create_stream().unwrap();
        graph.replay(&stream).unwrap();
        assert_eq!(stream.read_to_vec(&buffer).unwrap(), vec![7; 16]);
    }
}

#[test]
fn uniform_values_are_staged_once_and_updated_between_replays() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let kernel = device.load_wgsl(SCALE).unwrap().kernel("scale").unwrap();
    let data = device.alloc_from(&stream, &[1u32, 2, 3, 4]).unwrap();
    let mut graph = device.graph();
    let lane = graph.stream();
    let node = graph
        .launch(lane, &Launch::new(&kernel).uniform(&[2u32, 1]).buffer(&data))
        .unwrap();
    let graph = graph.build().unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(stream.read_to_vec(&data).unwrap(), vec![3, 5, 7, 9]);
    graph
        .update_launch(node, &Launch::new(&kernel).uniform(&[10u32, 0]).buffer(&data))
        .unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(stream.read_to_vec(&data).unwrap(), vec![30, 50, 70, 90]);
    let error = graph
        .update_launch(node, &Launch::new(&kernel).uniform(&[10u32, 0, 0, 0]).buffer(&data))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("16"), "names the sizes: {error}");
    let error = graph
        .update_launch(node, &Launch::new(&kernel).buffer(&data).buffer(&data))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
}

#[test]
fn a_failure_on_a_graph_stream_of_its_own_reaches_the_replay_stream() {
    let device = cpu_device();
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"fault\n").unwrap();
    let fault = module.kernel("fault").unwrap();
    let buffer = device.alloc::<u32>(4).unwrap();
    let mut graph = device.graph();
    let main = graph.stream();
    let side = graph.stream();
    let forked = graph.event();
    graph.fill(main, &buffer, 1u32).unwrap();
    graph.record(main, forked).unwrap();
    graph.wait(side, forked).unwrap();
    graph.launch(side, &Launch::new(&fault)).unwrap();
    let graph = graph.build().unwrap();
    let stream = device.create_stream().unwrap();
    graph.replay(&stream).unwrap();
    let error = stream.synchronize().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault, "{error}");
    assert_eq!(stream.synchronize().unwrap_err(), error, "sticky");
    // A replay on another stream is refused with the graph's failed stream's error too.
    let other = device.create_stream().unwrap();
    let again = graph.replay(&other).unwrap_err();
    assert_eq!(again.kind(), ErrorKind::KernelFault, "{again}");
}

#[test]
fn objects_of_another_device_and_destroyed_streams_are_refused() {
    let runtime = support::static_cpu_runtime(2);
    let device = runtime.open("cpu:0").unwrap();
    let other = runtime.open("cpu:1").unwrap();
    let foreign = other.alloc::<u32>(4).unwrap();
    let mut graph = device.graph();
    let lane = graph.stream();
    let error = graph.fill(lane, &foreign, 0u32).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle, "{error}");
    assert!(error.message().contains("cpu:1"), "{error}");
    let buffer = device.alloc::<u32>(4).unwrap();
    graph.fill(lane, &buffer, 3u32).unwrap();
    let graph = graph.build().unwrap();
    let foreign_stream = other.create_stream().unwrap();
    let error = graph.replay(&foreign_stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle, "{error}");
    let stream = device.create_stream().unwrap();
    stream.destroy().unwrap();
    let error = graph.replay(&stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle, "{error}");
    assert!(error.message().contains("destroyed"), "{error}");
}

#[test]
fn buffers_a_graph_stream_of_its_own_writes_stay_unmappable_until_the_replay_stream_synchronizes() {
    let device = cpu_device();
    let buffer = device.alloc::<u32>(64).unwrap();
    let mut graph = device.graph();
    let main = graph.stream();
    let side = graph.stream();
    let forked = graph.event();
    graph.record(main, forked).unwrap();
    graph.wait(side, forked).unwrap();
    graph.fill(side, &buffer, 9u32).unwrap();
    let graph = graph.build().unwrap();
    let stream = device.create_stream().unwrap();
    graph.replay(&stream).unwrap();
    // Dropped at once: the replay stream holds it, and the uses of its buffers, until idle.
    drop(graph);
    let error = buffer.map().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{error}");
    assert!(error.message().contains("synchronize"), "{error}");
    stream.synchronize().unwrap();
    assert_eq!(*buffer.map().unwrap(), [9u32; 64]);
}

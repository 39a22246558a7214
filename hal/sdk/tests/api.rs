//! The application API on the CPU reference backend: what works, and a clear error for every
//! misuse. The same checks run through the loaded plugin at the end, to show that the C ABI
//! carries kinds and messages unchanged.

mod support;

use xhal::{Device, ErrorKind, KernelFormat, Launch, Policy, Runtime, Selector};

const MEMORY: u64 = support::TEST_DEVICE_MEMORY;

fn runtime_with(devices: u32) -> Runtime {
    support::static_cpu_runtime(devices)
}

fn cpu_device() -> Device {
    runtime_with(1).open("cpu:0").expect("cpu:0")
}

#[test]
fn round_trip_copy_and_fill() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let data: Vec<u16> = (0..1001).collect();
    let a = device.alloc_from(&stream, &data).unwrap();
    let b = device.alloc::<u16>(1001).unwrap();
    stream.copy(&a, &b).unwrap();
    stream.fill(b.slice(3..3 + 5), 0xBEEFu16).unwrap();
    let out = stream.read_to_vec(&b).unwrap();
    assert_eq!(&out[..3], &data[..3]);
    assert!(out[3..8].iter().all(|&v| v == 0xBEEF));
    assert_eq!(&out[8..], &data[8..]);
    // Overlapping copy within one buffer behaves like memmove.
    stream.copy(a.slice(..1000), a.slice(1..)).unwrap();
    let shifted = stream.read_to_vec(&a).unwrap();
    assert_eq!(shifted[0], 0);
    assert_eq!(&shifted[1..], &data[..1000]);
}

#[test]
fn copy_out_of_bounds_is_an_error() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let a = device.alloc::<u32>(16).unwrap();
    let b = device.alloc::<u32>(8).unwrap();
    let error = stream.copy(a.slice(..8), b.slice(4..)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    assert!(error.message().contains("copy destination"), "{error}");
    assert!(
        error.message().contains("8 elements do not fit a view of 4 elements"),
        "{error}"
    );
    let error = stream.read(a.slice(10..), &mut [0u32; 8]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    // The stream stays usable after a rejected call.
    stream.copy(a.slice(..8), &b).unwrap();
    stream.synchronize().unwrap();
}

#[test]
fn offset_plus_length_overflowing_u64_is_an_error() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let a = device.alloc::<u32>(16).unwrap();
    let error = stream
        .fill(a.slice(usize::MAX / 2..usize::MAX / 2 + 4), 1u32)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    // A view is checked in elements first, so its bytes can never overflow.
    assert!(
        error
            .message()
            .contains("reach past the end of a buffer of 16 elements"),
        "{error}"
    );
    let error = stream.copy(a.slice(1..1 + 2), a.slice(usize::MAX / 4..)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    // At the backend level, with raw byte offsets, the same check holds.
    let runtime = runtime_with(1);
    let backend = runtime.backend("cpu").unwrap().backend().clone();
    let raw_device = backend.device_open(0).unwrap();
    let raw_stream = backend.stream_create(raw_device).unwrap();
    let raw_buffer = backend.buffer_allocate(raw_device, 64).unwrap();
    let error = backend
        .stream_fill(raw_stream, raw_buffer, u64::MAX - 3, 8, &[0; 4])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    assert!(error.message().contains("overflows u64"), "{error}");
    backend.buffer_free(raw_buffer);
    backend.stream_destroy(raw_stream);
    backend.device_close(raw_device);
}

#[test]
fn zero_size_allocation_is_an_empty_buffer_without_memory() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let before = device.memory_stats();
    let empty = device.alloc::<f32>(0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.size_bytes(), 0);
    assert_eq!(device.memory_stats(), before, "an empty buffer owns no device memory");
    // Empty accesses are no-ops; anything else is out of bounds.
    stream.write(&empty, &[]).unwrap();
    assert_eq!(stream.read_to_vec(&empty).unwrap(), Vec::<f32>::new());
    let error = stream.write(&empty, &[1.0]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
}

#[test]
fn allocation_larger_than_the_device_is_out_of_memory() {
    let device = cpu_device();
    let error = device.alloc::<u8>(MEMORY as usize + 1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfMemory);
    assert!(error.message().contains(&format!("{}", MEMORY + 1)), "{error}");
    // Several allocations that together exceed the device also end in OutOfMemory, and the
    // device works afterwards.
    let mut held = Vec::new();
    let error = loop {
        match device.alloc::<u8>(16 << 20) {
            Ok(buffer) => held.push(buffer),
            Err(error) => break error,
        }
        assert!(
            held.len() <= 8,
            "a 64 MiB device cannot hold {} buffers of 16 MiB",
            held.len()
        );
    };
    assert_eq!(error.kind(), ErrorKind::OutOfMemory);
    drop(held);
    device
        .alloc::<u8>(16 << 20)
        .expect("memory is usable again after the buffers are dropped");
}

#[test]
fn a_buffer_from_another_device_is_an_error() {
    let runtime = runtime_with(2);
    let device0 = runtime.open("cpu:0").unwrap();
    let device1 = runtime.open("cpu:1").unwrap();
    let stream0 = device0.create_stream().unwrap();
    let foreign = device1.alloc::<u32>(4).unwrap();
    let error = stream0.write(&foreign, &[1, 2, 3, 4]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    assert!(error.message().contains("belongs to device cpu:1"), "{error}");
    assert!(error.message().contains("used on device cpu:0"), "{error}");
    let local = device0.alloc::<u32>(4).unwrap();
    let error = stream0.copy(local.slice(..4), &foreign).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    let foreign_event = device1.create_event().unwrap();
    let error = stream0.record(&foreign_event).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    // Opening the same device twice gives the same device, so its buffers stay usable.
    let again = runtime.open("cpu:0").unwrap();
    let stream_again = again.create_stream().unwrap();
    stream_again.write(&local, &[5, 6, 7, 8]).unwrap();
}

#[test]
fn a_destroyed_stream_is_an_error() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let clone = stream.clone();
    let buffer = device.alloc::<u32>(4).unwrap();
    stream.destroy().unwrap();
    let error = clone.fill(buffer.slice(..4), 0u32).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    assert!(error.message().contains("destroyed stream"), "{error}");
    assert_eq!(clone.synchronize().unwrap_err().kind(), ErrorKind::InvalidHandle);
    assert_eq!(clone.destroy().unwrap_err().kind(), ErrorKind::InvalidHandle);
}

#[test]
fn a_destroyed_event_is_an_error() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let event = device.create_event().unwrap();
    stream.record(&event).unwrap();
    event.destroy().unwrap();
    for error in [
        stream.record(&event).unwrap_err(),
        stream.wait(&event).unwrap_err(),
        event.query().unwrap_err(),
        event.synchronize().unwrap_err(),
    ] {
        assert_eq!(error.kind(), ErrorKind::InvalidHandle);
        assert!(error.message().contains("destroyed event"), "{error}");
    }
    stream.synchronize().unwrap();
}

#[test]
fn destroyed_handles_at_the_backend_level_are_errors() {
    let runtime = runtime_with(1);
    let backend = runtime.backend("cpu").unwrap().backend().clone();
    let device = backend.device_open(0).unwrap();
    let stream = backend.stream_create(device).unwrap();
    let event = backend.event_create(device, true).unwrap();
    backend.stream_destroy(stream);
    backend.event_destroy(event);
    let error = backend.stream_synchronize(stream).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    let error = backend.event_query(event).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidHandle);
    backend.device_close(device);
}

#[test]
fn queued_work_keeps_dropped_buffers_alive() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"sleep_us\n").unwrap();
    let sleep = module.kernel("sleep_us").unwrap();
    let target = device.alloc::<u32>(1 << 16).unwrap();
    let source = device.alloc::<u32>(1 << 16).unwrap();
    stream.fill(source.slice(..1 << 16), 7u32).unwrap();
    // The copy runs after a sleep; both buffers are dropped before it starts.
    stream.launch(&Launch::new(&sleep).scalar(20_000u32)).unwrap();
    stream.copy(&source, &target).unwrap();
    let before = device.memory_stats();
    drop(source);
    drop(target);
    // The blocks now wait for the stream (which alone may reuse them, in its order): nothing
    // else gets them while the copy is queued.
    let stats = device.memory_stats();
    assert_eq!(
        stats.reserved, before.reserved,
        "memory used by queued work must not be released"
    );
    let other = device.alloc::<u32>(1 << 16).unwrap();
    assert_eq!(
        device.memory_stats().backend_allocations,
        before.backend_allocations + 1,
        "memory used by queued work must not be handed to another user early"
    );
    drop(other);
    stream.synchronize().unwrap();
    assert_eq!(device.memory_allocated(), 0, "released once the work completed");
    assert_eq!(device.memory_stats().cached_blocks, 3);
}

#[test]
fn write_owned_returns_before_the_copy_and_keeps_the_data() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc::<u64>(1000).unwrap();
    stream.write_owned(&buffer, (0..1000u64).collect()).unwrap();
    assert_eq!(stream.read_to_vec(&buffer).unwrap(), (0..1000u64).collect::<Vec<_>>());
}

#[test]
fn an_execution_error_sticks_to_the_stream() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let module = device
        .load_module(KernelFormat::CPU_BUILTIN, b"fault\nfill_index_u32\n")
        .unwrap();
    let fault = module.kernel("fault").unwrap();
    let buffer = device.alloc::<u32>(4).unwrap();
    stream
        .launch(&Launch::new(&fault))
        .expect("the fault is found while executing, not at enqueue");
    let error = stream.synchronize().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::KernelFault);
    assert!(error.message().contains("fault"), "{error}");
    // Every later call on the stream returns the same error.
    assert_eq!(stream.fill(buffer.slice(..4), 0u32).unwrap_err(), error);
    assert_eq!(stream.query().unwrap_err(), error);
    assert_eq!(stream.synchronize().unwrap_err(), error);
    // Other streams are unaffected.
    let healthy = device.create_stream().unwrap();
    healthy.write(&buffer, &[1, 2, 3, 4]).unwrap();
    assert_eq!(healthy.read_to_vec(&buffer).unwrap(), [1, 2, 3, 4]);
    // The failed stream still allocates, memory free of any stream's work, usable elsewhere;
    // a destroyed one refuses.
    let fresh = stream.alloc::<u32>(4).unwrap();
    healthy.write(&fresh, &[5, 6, 7, 8]).unwrap();
    assert_eq!(healthy.read_to_vec(&fresh).unwrap(), [5, 6, 7, 8]);
    let _ = stream.destroy();
    assert_eq!(stream.alloc::<u32>(4).unwrap_err().kind(), ErrorKind::InvalidHandle);
}

#[test]
fn wrong_kernel_arguments_are_errors_naming_the_kernel() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"saxpy_f32\n").unwrap();
    let saxpy = module.kernel("saxpy_f32").unwrap();
    let x = device.alloc::<f32>(64).unwrap();
    let error = stream
        .launch(&Launch::new(&saxpy).buffer(&x).scalar(1.0f32).scalar(64u32))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("saxpy_f32"), "{error}");
    let error = stream.launch(&Launch::new(&saxpy).buffer(x.slice(60..70))).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::OutOfBounds);
    assert!(
        error.message().contains("buffer argument 0 of kernel `saxpy_f32`"),
        "{error}"
    );
    let error = stream.launch(&Launch::new(&saxpy).workgroups(0, 1, 1)).unwrap_err();
    assert!(error.message().contains("workgroup count in x is 0"), "{error}");
    let error = module.kernel("nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    let error = device.load_module(KernelFormat::PTX, b"").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Unsupported);
    assert!(error.message().contains("cpu-builtin"), "{error}");
}

#[test]
fn events_order_work_across_streams_and_time_it() {
    let device = cpu_device();
    let producer = device.create_stream().unwrap();
    let consumer = device.create_stream().unwrap();
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"sleep_us\n").unwrap();
    let sleep = module.kernel("sleep_us").unwrap();
    let buffer = device.alloc::<u32>(1024).unwrap();
    let copy = device.alloc::<u32>(1024).unwrap();
    let start = device.create_event().unwrap();
    let done = device.create_event().unwrap();
    producer.record(&start).unwrap();
    producer.launch(&Launch::new(&sleep).scalar(30_000u32)).unwrap();
    producer.fill(buffer.slice(..1024), 42u32).unwrap();
    producer.record(&done).unwrap();
    consumer.wait(&done).unwrap();
    consumer.copy(&buffer, &copy).unwrap();
    assert_eq!(consumer.read_to_vec(&copy).unwrap(), vec![42u32; 1024]);
    assert!(done.query().unwrap());
    let elapsed = done.elapsed_since(&start).unwrap();
    assert!(
        elapsed.as_micros() >= 30_000,
        "the events bracket a 30 ms sleep, measured {elapsed:?}"
    );
}

#[test]
fn caching_allocator_reuses_blocks_and_reports_statistics() {
    let device = cpu_device();
    let first = device.alloc::<u8>(1000).unwrap();
    let stats = device.memory_stats();
    assert_eq!(stats.allocated, 1024, "1000 bytes round up to 1024");
    assert_eq!(stats.reserved, 1024);
    drop(first);
    let stats = device.memory_stats();
    assert_eq!((stats.allocated, stats.reserved, stats.cached_blocks), (0, 1024, 1));
    let _second = device.alloc::<u8>(900).unwrap();
    let stats = device.memory_stats();
    assert_eq!(stats.cache_hits, 1, "900 bytes rounds to the same 1024-byte block");
    assert_eq!(stats.backend_allocations, 1);
    assert_eq!(device.max_memory_allocated(), 1024);
    let _third = device.alloc::<u8>(4096).unwrap();
    assert_eq!(device.max_memory_allocated(), 1024 + 4096);
    drop(_third);
    device.reset_peak_memory_stats();
    assert_eq!(device.max_memory_allocated(), 1024);
    device.empty_cache();
    assert_eq!(device.memory_reserved(), 1024, "only the live block stays reserved");
}

/// A stream that sleeps for `micros` on the device before its later work.
fn busy_stream(device: &Device, micros: u32) -> (xhal::Stream, xhal::Module) {
    let stream = device.create_stream().unwrap();
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"sleep_us\n").unwrap();
    let sleep = module.kernel("sleep_us").unwrap();
    stream.launch(&Launch::new(&sleep).scalar(micros)).unwrap();
    (stream, module)
}

#[test]
fn memory_freed_under_queued_work_is_reused_by_the_same_stream_at_once() {
    let device = cpu_device();
    let (stream, _module) = busy_stream(&device, 200_000);
    let first = stream.alloc::<u32>(1024).unwrap();
    stream.fill(&first, 7u32).unwrap();
    drop(first);
    let stats = device.memory_stats();
    assert_eq!(
        (stats.allocated, stats.cached_blocks),
        (0, 1),
        "the block waits for its stream"
    );
    // Another stream's allocation, and one free of any stream, must not get memory the
    // sleeping stream's fill has yet to write.
    let other = device.create_stream().unwrap();
    let elsewhere = other.alloc::<u32>(1024).unwrap();
    let anyone = device.alloc::<u32>(1024).unwrap();
    assert_eq!(device.memory_stats().backend_allocations, 3);
    // The same stream gets it back with no wait, and its work runs after the fill.
    let second = stream.alloc::<u32>(1024).unwrap();
    let stats = device.memory_stats();
    assert_eq!((stats.backend_allocations, stats.cache_hits), (3, 1), "{stats:?}");
    let mut second = second;
    let error = second.map_mut(..).unwrap_err();
    assert!(
        error.message().contains("queued"),
        "the host cannot touch memory the stream's queued work may use: {error}"
    );
    stream.fill(&second, 9u32).unwrap();
    assert_eq!(stream.read_to_vec(&second).unwrap(), vec![9u32; 1024]);
    drop((elsewhere, anyone));
    // Once the stream is idle, its kept blocks are anyone's.
    let (busy, _module) = busy_stream(&device, 1_000);
    let third = busy.alloc::<u32>(1024).unwrap();
    busy.fill(&third, 1u32).unwrap();
    drop(third);
    busy.synchronize().unwrap();
    let before = device.memory_stats();
    let _fourth = device.alloc::<u32>(1024).unwrap();
    assert_eq!(device.memory_stats().backend_allocations, before.backend_allocations);
}

#[test]
fn memory_queued_on_two_streams_waits_for_both() {
    let device = cpu_device();
    let (first, _module) = busy_stream(&device, 100_000);
    let (second, _module2) = busy_stream(&device, 100_000);
    let shared = device.alloc::<u32>(256).unwrap();
    first.fill(&shared, 1u32).unwrap();
    second.fill(&shared, 2u32).unwrap();
    drop(shared);
    let stats = device.memory_stats();
    assert_eq!(stats.cached_blocks, 0, "still in use on two streams: {stats:?}");
    let _fresh = first.alloc::<u32>(256).unwrap();
    assert_eq!(device.memory_stats().backend_allocations, 2);
    first.synchronize().unwrap();
    second.synchronize().unwrap();
    assert_eq!(device.memory_stats().cached_blocks, 1, "both done: the block is cached");
}

#[test]
fn a_dropped_stream_hands_its_kept_memory_to_everyone() {
    let device = cpu_device();
    let (stream, _module) = busy_stream(&device, 20_000);
    let buffer = stream.alloc::<u8>(4096).unwrap();
    stream.fill(&buffer, 3u8).unwrap();
    drop(buffer);
    drop(stream);
    let before = device.memory_stats();
    let _again = device.alloc::<u8>(4096).unwrap();
    let after = device.memory_stats();
    assert_eq!(after.backend_allocations, before.backend_allocations, "{after:?}");
    device.empty_cache();
}

#[test]
fn allocator_empties_its_cache_when_the_device_is_full() {
    let device = cpu_device();
    // Fill the cache with blocks of one size, then ask for another size that only fits once
    // the cache is given back.
    let blocks: Vec<_> = (0..3).map(|_| device.alloc::<u8>(16 << 20).unwrap()).collect();
    drop(blocks);
    assert_eq!(device.memory_reserved(), 48 << 20);
    let big = device
        .alloc::<u8>(40 << 20)
        .expect("the allocator empties its cache and retries");
    assert_eq!(big.size_bytes(), 40 << 20);
    assert_eq!(device.memory_reserved(), 40 << 20);
}

#[test]
fn a_bad_selector_points_at_the_position() {
    let error = Selector::parse("vulkan:@").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert!(error.message().contains("column 8"), "{error}");
    assert!(error.message().contains("         ^"), "{error}");
}

#[test]
fn a_selector_naming_an_absent_backend_lists_what_is_present() {
    let runtime = runtime_with(1);
    let error = runtime.choose(&Selector::parse("cuda").unwrap()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Selection);
    assert!(error.message().contains("backend \"cuda\" is not present"), "{error}");
    assert!(error.message().contains("present: cpu:0"), "{error}");
}

#[test]
fn every_choice_explains_itself() {
    let runtime = runtime_with(2);
    let (device, explanation) = runtime.choose(&Selector::parse("cpu:1").unwrap()).unwrap();
    assert_eq!(device.label(), "cpu:1");
    assert!(explanation.summary.contains("cpu:1"), "{explanation}");
    assert_eq!(explanation.verdicts.len(), 2);
    let (device, explanation) = runtime.choose(&Selector::new().policy(Policy::PreferCpu)).unwrap();
    assert_eq!(device.label(), "cpu:0");
    assert!(!explanation.summary.is_empty());
}

#[test]
fn the_loaded_plugin_reports_the_same_errors_as_the_static_backend() {
    let runtime = support::plugin_cpu_runtime();
    let device = runtime.open("cpu:0").unwrap();
    let stream = device.create_stream().unwrap();
    let module = device
        .load_module(KernelFormat::CPU_BUILTIN, b"fault\nadd_u32\n")
        .unwrap();
    // An error raised inside the plugin crosses the ABI with its kind and message.
    let add = module.kernel("add_u32").unwrap();
    let a = device.alloc::<u32>(64).unwrap();
    let error = stream.launch(&Launch::new(&add).buffer(&a).scalar(64u32)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains("add_u32"), "{error}");
    let error = module.kernel("missing").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert!(error.message().contains("missing"), "{error}");
    stream.launch(&Launch::new(&module.kernel("fault").unwrap())).unwrap();
    assert_eq!(stream.synchronize().unwrap_err().kind(), ErrorKind::KernelFault);
    let healthy = device.create_stream().unwrap();
    let b = device.alloc_from(&healthy, &[1u32; 64]).unwrap();
    let c = device.alloc::<u32>(64).unwrap();
    healthy
        .launch(&Launch::new(&add).buffer(&b).buffer(&b).buffer(&c).scalar(64u32))
        .unwrap();
    assert_eq!(healthy.read_to_vec(&c).unwrap(), vec![2u32; 64]);
}

#[test]
fn a_device_opens_by_its_label_and_a_bad_label_is_named() {
    let runtime = runtime_with(2);
    assert_eq!(runtime.open("cpu:1").unwrap().label(), "cpu:1");
    for bad in ["cpu", "cpu:", ":0", "cpu:one", ""] {
        let error = runtime.open(bad).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidArgument, "{bad}: {error}");
        assert!(
            error.message().contains(&format!("`{bad}` is not a device label")),
            "{error}"
        );
    }
    let absent = runtime.open("cuda:0").unwrap_err();
    assert_eq!(absent.kind(), ErrorKind::NotFound);
    assert!(absent.message().contains("present: cpu"), "{absent}");
    let past = runtime.open("cpu:2").unwrap_err();
    assert!(past.message().contains("there is no device 2"), "{past}");
}

#[test]
fn buffer_views_go_wherever_a_buffer_does() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc_from(&stream, &[0u32; 8]).unwrap();
    stream.write(buffer.slice(2..5), &[1, 2, 3]).unwrap();
    stream.fill(buffer.slice(6..), 9u32).unwrap();
    stream.copy(buffer.slice(2..4), buffer.slice(0..)).unwrap();
    assert_eq!(stream.read_to_vec(&buffer).unwrap(), [1, 2, 1, 2, 3, 0, 9, 9]);
    let mut middle = [0u32; 3];
    stream.read(buffer.slice(1..=3), &mut middle).unwrap();
    assert_eq!(middle, [2, 1, 2]);
    assert_eq!(stream.read_to_vec(buffer.slice(5..5)).unwrap(), []);
    assert_eq!(buffer.slice(3..).len(), 5);
    assert_eq!(buffer.slice(..).range(), 0..8);
}

#[test]
fn a_view_that_does_not_hold_the_transfer_is_refused_naming_both_sizes() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let buffer = device.alloc::<u32>(8).unwrap();
    let short = stream.write(buffer.slice(6..), &[1, 2, 3]).unwrap_err();
    assert_eq!(short.kind(), ErrorKind::OutOfBounds);
    assert!(
        short.message().contains("3 elements do not fit a view of 2 elements"),
        "{short}"
    );
    let past = stream.fill(buffer.slice(4..9), 0u32).unwrap_err();
    assert!(
        past.message()
            .contains("elements 4..9 reach past the end of a buffer of 8 elements"),
        "{past}"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = stream.read_to_vec(buffer.slice(5..2)).unwrap_err();
    assert!(
        reversed.message().contains("element range 5..2 is reversed"),
        "{reversed}"
    );
    let copy = stream.copy(&buffer, buffer.slice(1..)).unwrap_err();
    assert!(
        copy.message()
            .contains("copy destination: 8 elements do not fit a view of 7"),
        "{copy}"
    );
    let mut out = [0u32; 9];
    assert_eq!(
        stream.read(&buffer, &mut out).unwrap_err().kind(),
        ErrorKind::OutOfBounds
    );
    let overflow = stream.fill(buffer.slice(usize::MAX..), 0u32).unwrap_err();
    assert_eq!(overflow.kind(), ErrorKind::OutOfBounds, "{overflow}");
    let kernel = device
        .load_wgsl(
            "@group(0) @binding(0) var<storage, read_write> data: array<u32>;
             @compute @workgroup_size(1) fn main() { data[0] = 1u; }",
        )
        .unwrap()
        .kernel("main")
        .unwrap();
    let launch = stream
        .launch(&Launch::new(&kernel).buffer(buffer.slice(4..12)))
        .unwrap_err();
    assert!(
        launch.message().contains("buffer argument 0 of kernel `main`"),
        "{launch}"
    );
}

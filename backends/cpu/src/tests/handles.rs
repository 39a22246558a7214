use super::*;
use xhal_backend::{DeviceType, EventHandle, Features, ModuleHandle};

#[test]
fn destroyed_stream_is_an_invalid_handle_naming_it() {
    let fixture = Fixture::new();
    let stream = fixture.new_stream();
    fixture.backend.stream_destroy(stream);
    let expected = [hex(stream.0), "destroyed".to_string()];
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_error(
        fixture.backend.stream_synchronize(stream),
        ErrorKind::InvalidHandle,
        &expected,
    );
    assert_error(
        fixture.backend.stream_query(stream),
        ErrorKind::InvalidHandle,
        &expected,
    );
    let buffer = fixture.allocate(4);
    assert_error(
        fixture.backend.stream_fill(stream, buffer, 0, 4, &[0]),
        ErrorKind::InvalidHandle,
        &expected,
    );
    // Destroying again is reported in the log, never a crash.
    fixture.backend.stream_destroy(stream);
}

#[test]
fn destroyed_event_is_an_invalid_handle_naming_it() {
    let fixture = Fixture::new();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    fixture.backend.event_destroy(event);
    let name = hex(event.0);
    assert_error(
        fixture.backend.event_query(event),
        ErrorKind::InvalidHandle,
        &[&name, "destroyed"],
    );
    assert_error(
        fixture.backend.stream_record_event(fixture.stream, event),
        ErrorKind::InvalidHandle,
        &[&name, "destroyed"],
    );
}

#[test]
fn wrong_kind_of_handle_says_what_it_is_and_what_was_expected() {
    let fixture = Fixture::new();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    let result = fixture
        .backend
        .stream_fill(fixture.stream, BufferHandle(event.0), 0, 4, &[0]);
    let expected = format!("handle {} is an event, expected a buffer", hex(event.0));
    assert_error(result, ErrorKind::InvalidHandle, &[&expected]);
    let result = fixture.backend.stream_query(StreamHandle(fixture.device.0));
    assert_error(result, ErrorKind::InvalidHandle, &["is a device, expected a stream"]);
    let result = fixture.backend.kernel_get(ModuleHandle(fixture.stream.0), "fault");
    assert_error(result, ErrorKind::InvalidHandle, &["is a stream, expected a module"]);
    let result = fixture.backend.event_query(EventHandle(0));
    assert_error(result, ErrorKind::InvalidHandle, &["0x0 is null, expected an event"]);
}

#[test]
fn destroy_entries_accept_null_and_stale_handles() {
    let fixture = Fixture::new();
    fixture.backend.buffer_free(BufferHandle(0));
    fixture.backend.event_destroy(EventHandle(0));
    fixture.backend.stream_destroy(StreamHandle(0));
    let buffer = fixture.allocate(4);
    fixture.backend.buffer_free(buffer);
    fixture.backend.buffer_free(buffer);
    // The handle table is the adapter's now: the buffer is gone when its handle is, and its
    // memory came back.
    assert_error(fixture.backend.buffer(buffer), ErrorKind::InvalidHandle, &["freed"]);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, TEST_MEMORY);
}

#[test]
fn devices_describe_themselves_and_unknown_indices_are_not_found() {
    let backend = CpuBackend::new(CpuDriver::with_config(CpuConfig {
        devices: 2,
        memory_per_device: TEST_MEMORY,
    }));
    let info = backend.info();
    assert_eq!(info.name, "cpu");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        info.abi_version,
        (xhal_backend::abi::XHAL_ABI_MAJOR, xhal_backend::abi::XHAL_ABI_MINOR)
    );
    assert_eq!(backend.device_count().unwrap(), 2);
    let device = backend.device_info(1).unwrap();
    assert_eq!(device.name, "xhal CPU reference device 1");
    assert_eq!(device.vendor, "xhal");
    assert_eq!(device.device_type, DeviceType::Cpu);
    assert_eq!(device.pci_bus_id, None);
    assert_eq!(device.total_memory, TEST_MEMORY);
    assert_eq!(device.kernel_formats, [KernelFormat::WGSL, KernelFormat::CPU_BUILTIN]);
    assert!(device.features.contains(Features::TIMESTAMPS));
    assert!(device
        .features
        .contains(Features::F16 | Features::F64 | Features::I64 | Features::ATOMICS_32));
    assert!(!device.features.contains(Features::ATOMICS_64));
    assert_ne!(device.uuid, backend.device_info(0).unwrap().uuid);
    assert_eq!(
        device.uuid,
        CpuBackend::new(CpuDriver::with_config(backend.driver().config()))
            .device_info(1)
            .unwrap()
            .uuid
    );
    assert_error(
        backend.device_info(2),
        ErrorKind::NotFound,
        &["cpu device 2 does not exist", "2 device(s)"],
    );
    assert_error(backend.device_open(7), ErrorKind::NotFound, &["cpu device 7"]);
}

#[test]
fn closed_device_handle_is_invalid() {
    let fixture = Fixture::new();
    let device = fixture.backend.device_open(0).unwrap();
    assert_ne!(device, fixture.device, "every open issues a new handle");
    fixture.backend.device_close(device);
    let result = fixture.backend.buffer_allocate(device, 16);
    assert_error(result, ErrorKind::InvalidHandle, &[&hex(device.0), "closed"]);
}

#[test]
fn the_backend_registers_itself_as_cpu() {
    let registered = xhal_backend::registry::static_backends();
    let cpu = registered
        .iter()
        .find(|backend| backend.name == "cpu")
        .expect("the cpu backend is registered");
    let backend = (cpu.create)().unwrap();
    assert_eq!(backend.info().name, "cpu");
    backend.device_count().unwrap();
}

#[test]
fn a_huge_device_count_costs_nothing_until_used() {
    let backend = CpuBackend::new(CpuDriver::with_config(CpuConfig {
        devices: u32::MAX,
        memory_per_device: TEST_MEMORY,
    }));
    let last = backend.device_info(u32::MAX - 1).unwrap();
    assert_eq!(last.name, format!("xhal CPU reference device {}", u32::MAX - 1));
    assert_error(backend.device_info(u32::MAX), ErrorKind::NotFound, &["4294967295"]);
}

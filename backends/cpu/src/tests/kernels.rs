use super::*;

fn floats(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

#[test]
fn fill_index_u32_writes_base_plus_index_below_n() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4 * 160);
    let kernel = fixture.kernel("fill_index_u32");
    fixture
        .launch(
            fixture.stream,
            kernel,
            [3, 1, 1],
            &[whole(buffer, 4 * 160)],
            &words(&[7, 150]),
        )
        .unwrap();
    let values = fixture.read_u32s(buffer, 160);
    for (index, value) in values.iter().enumerate() {
        let expected = if index < 150 {
            7 + index as u32
        } else {
            crate::POISON_PATTERN
        };
        assert_eq!(*value, expected, "element {index}");
    }
}

#[test]
fn fill_index_u32_flattens_y_and_z_workgroups() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4 * 512);
    let kernel = fixture.kernel("fill_index_u32");
    fixture
        .launch(
            fixture.stream,
            kernel,
            [2, 2, 2],
            &[whole(buffer, 4 * 512)],
            &words(&[0, 512]),
        )
        .unwrap();
    let expected: Vec<u32> = (0..512).collect();
    assert_eq!(fixture.read_u32s(buffer, 512), expected);
}

#[test]
fn only_launched_invocations_do_work() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4 * 128);
    let kernel = fixture.kernel("fill_index_u32");
    fixture
        .launch(
            fixture.stream,
            kernel,
            [1, 1, 1],
            &[whole(buffer, 4 * 128)],
            &words(&[1, 100]),
        )
        .unwrap();
    let values = fixture.read_u32s(buffer, 128);
    assert_eq!(values[63], 64);
    assert_eq!(values[64], crate::POISON_PATTERN, "invocation 64 was never launched");
}

#[test]
fn add_u32_wraps_and_may_write_in_place() {
    let fixture = Fixture::new();
    let a = fixture.allocate(16);
    let b = fixture.allocate(16);
    let out = fixture.allocate(16);
    fixture.write_now(a, 0, &words(&[1, 2, u32::MAX, 40]));
    fixture.write_now(b, 0, &words(&[10, 20, 2, 2]));
    let kernel = fixture.kernel("add_u32");
    let arguments = [whole(a, 16), whole(b, 16), whole(out, 16)];
    fixture
        .launch(fixture.stream, kernel, [1, 1, 1], &arguments, &words(&[4]))
        .unwrap();
    assert_eq!(fixture.read_u32s(out, 4), [11, 22, 1, 42]);

    let in_place = [whole(a, 16), whole(b, 16), whole(a, 16)];
    fixture
        .launch(fixture.stream, kernel, [1, 1, 1], &in_place, &words(&[4]))
        .unwrap();
    assert_eq!(fixture.read_u32s(a, 4), [11, 22, 1, 42]);
}

#[test]
fn saxpy_f32_uses_views_at_offsets() {
    let fixture = Fixture::new();
    let x = fixture.allocate(16);
    let y = fixture.allocate(24);
    fixture.write_now(x, 0, &floats(&[1.0, 2.0, 3.0, 4.0]));
    fixture.write_now(y, 8, &floats(&[0.5, 0.25, -1.0, 100.0]));
    let kernel = fixture.kernel("saxpy_f32");
    let arguments = [
        whole(x, 16),
        BufferArg {
            buffer: y,
            offset: 8,
            size: 16,
        },
    ];
    let mut scalars = floats(&[2.0]);
    scalars.extend(words(&[3]));
    fixture
        .launch(fixture.stream, kernel, [1, 1, 1], &arguments, &scalars)
        .unwrap();
    let bytes = fixture.read_now(y, 8, 16);
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect();
    assert_eq!(values, [2.5, 4.25, 5.0, 100.0]);
}

#[test]
fn sleep_us_and_a_clean_launch_leave_the_stream_healthy() {
    let fixture = Fixture::new();
    fixture.sleep(fixture.stream, 1_000);
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
}

#[test]
fn indexing_past_the_view_is_a_kernel_fault_not_a_clamp() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(64);
    let kernel = fixture.kernel("fill_index_u32");
    let view = BufferArg {
        buffer,
        offset: 16,
        size: 40,
    };
    fixture
        .launch(fixture.stream, kernel, [1, 1, 1], &[view], &words(&[0, 20]))
        .unwrap();
    assert_error(
        fixture.backend.stream_synchronize(fixture.stream),
        ErrorKind::KernelFault,
        &["fill_index_u32", "element 10 of buffer argument 0", "holds only 10"],
    );
    let healthy = fixture.new_stream();
    let mut bytes = [0u8; 64];
    // SAFETY: `bytes` outlives the synchronize below and is not touched meanwhile.
    unsafe {
        fixture
            .backend
            .stream_read(healthy, buffer, 0, bytes.as_mut_ptr(), 64)
            .unwrap();
    }
    fixture.backend.stream_synchronize(healthy).unwrap();
    let poison: Vec<u8> = crate::POISON_PATTERN
        .to_le_bytes()
        .into_iter()
        .cycle()
        .take(64)
        .collect();
    assert_eq!(bytes.to_vec(), poison, "a faulting launch writes nothing");
}

#[test]
fn argument_count_and_scalar_size_mismatches_are_refused_at_enqueue() {
    let fixture = Fixture::new();
    let x = fixture.allocate(16);
    let kernel = fixture.kernel("saxpy_f32");
    let result = fixture.launch(fixture.stream, kernel, [1, 1, 1], &[whole(x, 16)], &[0; 8]);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["kernel saxpy_f32 expects 2 buffers, got 1"],
    );
    let arguments = [whole(x, 16), whole(x, 16)];
    let result = fixture.launch(fixture.stream, kernel, [1, 1, 1], &arguments, &[0; 4]);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["kernel saxpy_f32 expects 8 scalar bytes, got 4"],
    );
    assert!(
        fixture.backend.stream_query(fixture.stream).unwrap(),
        "nothing was enqueued"
    );
}

#[test]
fn launch_geometry_and_views_are_checked_at_enqueue() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(16);
    let kernel = fixture.kernel("fill_index_u32");
    let scalars = words(&[0, 4]);
    let result = fixture.launch(fixture.stream, kernel, [1, 0, 1], &[whole(buffer, 16)], &scalars);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["fill_index_u32", "[1, 0, 1]", "at least 1"],
    );
    let result = fixture.launch(fixture.stream, kernel, [65536, 1, 1], &[whole(buffer, 16)], &scalars);
    assert_error(result, ErrorKind::InvalidArgument, &["exceeds the device limit"]);
    let misaligned = BufferArg {
        buffer,
        offset: 2,
        size: 8,
    };
    let result = fixture.launch(fixture.stream, kernel, [1, 1, 1], &[misaligned], &scalars);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["buffer argument 0", "byte 2", "multiple of 4", "offset alignment"],
    );
    let too_long = BufferArg {
        buffer,
        offset: 8,
        size: 16,
    };
    let result = fixture.launch(fixture.stream, kernel, [1, 1, 1], &[too_long], &scalars);
    assert_error(result, ErrorKind::OutOfBounds, &["buffer argument 0", "8..24"]);
}

#[test]
fn modules_reject_unknown_kernels_and_unsupported_formats() {
    let fixture = Fixture::new();
    let result = fixture
        .backend
        .module_load(fixture.device, KernelFormat::CPU_BUILTIN, b"add_u32\nmystery\n");
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["line 2", "`mystery`", "known kernels: fill_index_u32, add_u32"],
    );
    let result = fixture
        .backend
        .module_load(fixture.device, KernelFormat::PTX, b".version 8.0");
    assert_error(
        result,
        ErrorKind::Unsupported,
        &["kernel format ptx", "accepted formats: wgsl, cpu-builtin"],
    );
    let module = fixture
        .backend
        .module_load(fixture.device, KernelFormat::CPU_BUILTIN, b"add_u32\nfault\n")
        .unwrap();
    let result = fixture.backend.kernel_get(module, "saxpy_f32");
    assert_error(
        result,
        ErrorKind::NotFound,
        &[&hex(module.0), "`saxpy_f32`", "its kernels: add_u32, fault"],
    );
}

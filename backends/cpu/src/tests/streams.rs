use super::*;

#[test]
fn streams_run_concurrently() {
    let fixture = Fixture::new();
    let blocked = fixture.allocate(8);
    let free = fixture.allocate(8);
    let other = fixture.new_stream();
    // Stream A is stuck on a buffer the test holds; stream B must still finish its work,
    // which it can only do on a thread of its own.
    let held = fixture.hold(blocked);
    let gate = held.bytes().write();
    fixture
        .backend
        .stream_fill(fixture.stream, blocked, 0, 8, &[1])
        .unwrap();
    fixture.backend.stream_fill(other, free, 0, 8, &[2]).unwrap();
    fixture.backend.stream_synchronize(other).unwrap();
    assert!(fixture.backend.stream_query(other).unwrap());
    assert!(!fixture.backend.stream_query(fixture.stream).unwrap());
    drop(gate);
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    assert!(fixture.backend.stream_query(fixture.stream).unwrap());
    assert_eq!(fixture.read_now(blocked, 0, 8), [1; 8]);
    assert_eq!(fixture.read_now(free, 0, 8), [2; 8]);
}

#[test]
fn cross_stream_event_wait_orders_work() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let reader = fixture.new_stream();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    let data = [9u8, 8, 7, 6];
    fixture.sleep(fixture.stream, 50_000);
    fixture.write(fixture.stream, buffer, 0, &data).unwrap();
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    fixture.backend.stream_wait_event(reader, event).unwrap();
    let mut seen = [0u8; 4];
    // SAFETY: `seen` outlives the synchronize below and is not touched meanwhile.
    unsafe {
        fixture
            .backend
            .stream_read(reader, buffer, 0, seen.as_mut_ptr(), 4)
            .unwrap();
    }
    fixture.backend.stream_synchronize(reader).unwrap();
    assert_eq!(seen, data);
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
}

#[test]
fn waiting_on_a_never_recorded_event_is_a_no_op() {
    let fixture = Fixture::new();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    fixture.backend.stream_wait_event(fixture.stream, event).unwrap();
    assert!(fixture.backend.stream_query(fixture.stream).unwrap());
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
}

#[test]
fn a_kernel_fault_sticks_to_the_stream_and_fails_its_dependents() {
    let fixture = Fixture::new();
    let gate_buffer = fixture.allocate(4);
    let skipped = fixture.allocate(4);
    let dependent = fixture.new_stream();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    let fault = fixture.kernel("fault");

    // Hold the stream before the fault so that everything below is enqueued before it runs.
    let held = fixture.hold(gate_buffer);
    let gate = held.bytes().write();
    fixture
        .backend
        .stream_fill(fixture.stream, gate_buffer, 0, 4, &[0])
        .unwrap();
    fixture.launch(fixture.stream, fault, [1, 1, 1], &[], &[]).unwrap();
    fixture
        .backend
        .stream_fill(fixture.stream, skipped, 0, 4, &[5])
        .unwrap();
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    fixture.backend.stream_wait_event(dependent, event).unwrap();
    drop(gate);

    let on_purpose = "kernel `fault` raised a fault on purpose";
    let sticky = assert_error(
        fixture.backend.stream_synchronize(fixture.stream),
        ErrorKind::KernelFault,
        &[on_purpose],
    );
    assert_eq!(fixture.backend.stream_synchronize(fixture.stream).unwrap_err(), sticky);
    assert_eq!(fixture.backend.stream_query(fixture.stream).unwrap_err(), sticky);
    let later = fixture.backend.stream_fill(fixture.stream, skipped, 0, 4, &[6]);
    assert_eq!(later.unwrap_err(), sticky);
    let later = fixture.launch(fixture.stream, fault, [1, 1, 1], &[], &[]);
    assert_eq!(later.unwrap_err(), sticky);

    assert_eq!(fixture.backend.event_synchronize(event).unwrap_err(), sticky);
    assert_eq!(fixture.backend.event_query(event).unwrap_err(), sticky);
    let dependency = assert_error(
        fixture.backend.stream_synchronize(dependent),
        ErrorKind::KernelFault,
        &["dependency failed", &hex(event.0), on_purpose],
    );
    assert_eq!(fixture.backend.stream_query(dependent).unwrap_err(), dependency);

    // The fill queued after the fault was skipped: the buffer still holds poison.
    let healthy = fixture.new_stream();
    let mut bytes = [0u8; 4];
    // SAFETY: `bytes` outlives the synchronize below and is not touched meanwhile.
    unsafe {
        fixture
            .backend
            .stream_read(healthy, skipped, 0, bytes.as_mut_ptr(), 4)
            .unwrap();
    }
    fixture.backend.stream_synchronize(healthy).unwrap();
    assert_eq!(bytes, crate::POISON_PATTERN.to_le_bytes());
}

#[test]
fn stream_destroy_finishes_queued_work_first() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let doomed = fixture.new_stream();
    fixture.sleep(doomed, 20_000);
    fixture.backend.stream_fill(doomed, buffer, 0, 4, &[3]).unwrap();
    fixture.backend.stream_destroy(doomed);
    assert_eq!(fixture.read_now(buffer, 0, 4), [3; 4]);
}

#[test]
fn dropping_the_backend_with_busy_streams_does_not_hang() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let waiting = fixture.new_stream();
    let quick = fixture.new_stream();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    // Over an hour of sleeping, and a stream waiting behind it: only cancellation ends these.
    fixture.sleep(fixture.stream, u32::MAX);
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    fixture.backend.stream_wait_event(waiting, event).unwrap();
    fixture.backend.stream_fill(waiting, buffer, 0, 4, &[1]).unwrap();
    fixture.backend.stream_fill(quick, buffer, 0, 4, &[2]).unwrap();
    fixture.backend.stream_synchronize(quick).unwrap();
    assert!(!fixture.backend.stream_query(fixture.stream).unwrap());
    assert!(!fixture.backend.stream_query(waiting).unwrap());
    drop(fixture);
}

#[test]
fn a_synchronize_waits_for_the_work_before_it_and_no_more() {
    let fixture = Fixture::new();
    let first = fixture.allocate(8);
    let second = fixture.allocate(8);
    let first_held = fixture.hold(first);
    let second_held = fixture.hold(second);
    let first_gate = first_held.bytes().write();
    let second_gate = second_held.bytes().write();
    let stream = fixture.stream;
    fixture.backend.stream_fill(stream, first, 0, 8, &[1]).unwrap();
    std::thread::scope(|scope| {
        let (early_done, early_finished) = std::sync::mpsc::channel();
        let (late_done, late_finished) = std::sync::mpsc::channel();
        let backend = &fixture.backend;
        // This one waits for the first fill only.
        scope.spawn(move || early_done.send(backend.stream_synchronize(stream)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        fixture.backend.stream_fill(stream, second, 0, 8, &[2]).unwrap();
        // This one waits for both fills: while it sleeps, the two waiters want different
        // counts of completed work, and each must be woken at its own.
        scope.spawn(move || late_done.send(backend.stream_synchronize(stream)).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(first_gate);
        let timeout = std::time::Duration::from_secs(10);
        early_finished
            .recv_timeout(timeout)
            .expect("a synchronize waits for work enqueued after it began")
            .unwrap();
        assert!(
            late_finished
                .recv_timeout(std::time::Duration::from_millis(50))
                .is_err(),
            "a synchronize returned before the work enqueued ahead of it had run"
        );
        drop(second_gate);
        late_finished
            .recv_timeout(timeout)
            .expect("a synchronize was not woken when its work completed")
            .unwrap();
    });
    assert_eq!(fixture.read_now(first, 0, 8), [1; 8]);
    assert_eq!(fixture.read_now(second, 0, 8), [2; 8]);
}

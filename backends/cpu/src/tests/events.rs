use super::*;
use std::time::Duration;

#[test]
fn event_query_goes_from_pending_to_complete() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    assert!(
        fixture.backend.event_query(event).unwrap(),
        "a never-recorded event counts as complete"
    );
    fixture.backend.event_synchronize(event).unwrap();

    let held = fixture.hold(buffer);
    let gate = held.bytes().write();
    fixture.backend.stream_fill(fixture.stream, buffer, 0, 4, &[1]).unwrap();
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    assert!(!fixture.backend.event_query(event).unwrap());
    drop(gate);
    fixture.backend.event_synchronize(event).unwrap();
    assert!(fixture.backend.event_query(event).unwrap());
}

#[test]
fn elapsed_time_covers_the_work_between_two_timing_events() {
    let fixture = Fixture::new();
    let start = fixture.backend.event_create(fixture.device, true).unwrap();
    let end = fixture.backend.event_create(fixture.device, true).unwrap();
    fixture.backend.stream_record_event(fixture.stream, start).unwrap();
    fixture.sleep(fixture.stream, 20_000);
    fixture.backend.stream_record_event(fixture.stream, end).unwrap();
    fixture.backend.event_synchronize(end).unwrap();
    let elapsed = fixture.backend.event_elapsed_time(start, end).unwrap();
    assert!(elapsed >= Duration::from_millis(20).as_nanos() as u64, "{elapsed} ns");
    let result = fixture.backend.event_elapsed_time(end, start);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &["completed before start event", &hex(end.0), &hex(start.0)],
    );
}

#[test]
fn elapsed_time_misuse_is_an_invalid_argument_naming_the_event() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let timed = fixture.backend.event_create(fixture.device, true).unwrap();
    let untimed = fixture.backend.event_create(fixture.device, false).unwrap();
    let never = fixture.backend.event_create(fixture.device, true).unwrap();
    let pending = fixture.backend.event_create(fixture.device, true).unwrap();
    fixture.backend.stream_record_event(fixture.stream, timed).unwrap();
    fixture.backend.stream_record_event(fixture.stream, untimed).unwrap();
    fixture.backend.stream_synchronize(fixture.stream).unwrap();

    let result = fixture.backend.event_elapsed_time(untimed, timed);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &[&hex(untimed.0), "created without timing"],
    );
    let result = fixture.backend.event_elapsed_time(timed, never);
    assert_error(result, ErrorKind::InvalidArgument, &[&hex(never.0), "never recorded"]);

    let held = fixture.hold(buffer);
    let gate = held.bytes().write();
    fixture.backend.stream_fill(fixture.stream, buffer, 0, 4, &[1]).unwrap();
    fixture.backend.stream_record_event(fixture.stream, pending).unwrap();
    let result = fixture.backend.event_elapsed_time(timed, pending);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &[&hex(pending.0), "event not yet complete"],
    );
    drop(gate);
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    fixture.backend.event_elapsed_time(timed, pending).unwrap();
}

#[test]
fn waits_see_the_record_made_before_them_not_later_ones() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4);
    let waiter = fixture.new_stream();
    let event = fixture.backend.event_create(fixture.device, false).unwrap();
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    fixture.backend.stream_wait_event(waiter, event).unwrap();

    // A later record that cannot complete yet must not hold up the earlier wait.
    let held = fixture.hold(buffer);
    let gate = held.bytes().write();
    fixture.backend.stream_fill(fixture.stream, buffer, 0, 4, &[1]).unwrap();
    fixture.backend.stream_record_event(fixture.stream, event).unwrap();
    fixture.backend.stream_synchronize(waiter).unwrap();
    assert!(!fixture.backend.event_query(event).unwrap());
    drop(gate);
    fixture.backend.event_synchronize(event).unwrap();
}

#[test]
fn event_of_another_device_is_an_invalid_handle() {
    let fixture = Fixture::with_config(CpuConfig {
        devices: 2,
        memory_per_device: TEST_MEMORY,
    });
    let other_device = fixture.backend.device_open(1).unwrap();
    let foreign = fixture.backend.event_create(other_device, false).unwrap();
    let result = fixture.backend.stream_record_event(fixture.stream, foreign);
    let expected = format!(
        "event {} belongs to cpu device 1, the stream is on device 0",
        hex(foreign.0)
    );
    assert_error(result, ErrorKind::InvalidHandle, &[&expected]);
}

//! The `events` area: waits that order work across streams, queries, host waits, elapsed
//! time, and re-recording.
//!
//! The ordering tests put a long kernel before the record, so that a wait that did not wait
//! would let the consumer read the buffer before the producer wrote it, and the data would
//! show it.

use super::streams::{
    affine, busy_kernel, poll_until, queue_busy, queue_update, update_kernel, zeros, SlowWriter, BUSY_ELEMENTS,
    BUSY_ITERATIONS,
};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, Requirement, TestCase, TestResult, Verdict};
use std::time::Duration;
use xhal::{ErrorKind, Event, Features};

pub(super) fn tests() -> Vec<TestCase> {
    let mut tests = vec![
        test_case!(
            "events.wait.orders_work_across_streams",
            "a stream waiting on another stream's event sees the data written before the record",
            orders_work_across_streams
        ),
        test_case!(
            "events.wait.chain_through_three_streams",
            "waits chained through three streams order a kernel, an update and a copy",
            chain_through_three_streams
        ),
        test_case!(
            "events.wait.several_events",
            "a stream waiting on events of two producer streams sees both producers' data",
            several_events
        ),
        test_case!(
            "events.wait.never_recorded_is_a_no_op",
            "waiting on an event never recorded does not block the stream",
            wait_never_recorded
        ),
        test_case!(
            "events.wait.on_the_same_stream",
            "a stream waiting on an event it recorded itself goes on with its work",
            wait_on_the_same_stream
        ),
        test_case!(
            "events.wait.survives_event_destroy",
            "a wait already queued still orders work after its event is destroyed",
            wait_survives_event_destroy
        ),
        test_case!(
            "events.record.rerecord_moves_the_event",
            "recording an event again makes later waits and host waits refer to the new record",
            rerecord_moves_the_event
        ),
        test_case!(
            "events.query.pending_to_complete",
            "an event recorded after long work goes from pending to complete and never back",
            query_pending_to_complete
        ),
        test_case!(
            "events.query.never_recorded_is_complete",
            "an event never recorded queries as complete",
            query_never_recorded
        ),
        test_case!(
            "events.query.idle_stream_record_completes",
            "an event recorded on an idle stream completes",
            idle_stream_record_completes
        ),
        test_case!(
            "events.synchronize.waits_for_recorded_work",
            "a host wait on an event returns only once the work before its record is done",
            synchronize_waits_for_recorded_work
        ),
        test_case!(
            "events.synchronize.never_recorded_returns",
            "a host wait on an event never recorded returns at once",
            synchronize_never_recorded
        ),
        test_case!(
            "events.timing.matches_the_feature",
            "events record timestamps exactly when the device claims timestamps, and never when asked not to",
            timing_matches_the_feature
        ),
        test_case!(
            "events.elapsed.plausible",
            "the time between events around a long kernel is above zero and below a minute",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_plausible
        ),
        test_case!(
            "events.elapsed.additive",
            "elapsed(a, b) + elapsed(b, c) equals elapsed(a, c) within a loose bound",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_additive
        ),
        test_case!(
            "events.elapsed.monotonic",
            "a later event is never measured as earlier: spans that contain others are no shorter",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_monotonic
        ),
        test_case!(
            "events.elapsed.across_streams",
            "elapsed time between events of two streams ordered by a wait is plausible",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_across_streams
        ),
        test_case!(
            "events.elapsed.without_timing_refused",
            "elapsed time involving an event created without timing is refused as an invalid argument",
            elapsed_without_timing_refused
        ),
        test_case!(
            "events.elapsed.never_recorded_refused",
            "elapsed time from or to an event never recorded is refused as an invalid argument",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_never_recorded_refused
        ),
        test_case!(
            "events.elapsed.end_before_start_refused",
            "elapsed time whose end completed before its start is refused as an invalid argument",
            Requirement::features(Features::TIMESTAMPS),
            elapsed_end_before_start_refused
        ),
        test_case!(
            "events.destroy.later_use_refused",
            "every use of a destroyed event, through any clone, is refused as an invalid handle",
            destroy_later_use_refused
        ),
        test_case!(
            "events.misuse.event_of_another_device",
            "a stream refuses to record or wait on an event of another device",
            event_of_another_device
        ),
    ];
    tests.extend(super::timestamps::tests());
    tests
}

/// Loosest bound any elapsed time in these tests may reach.
const ELAPSED_CEILING: Duration = Duration::from_secs(60);

fn orders_work_across_streams(context: &TestContext) -> TestResult {
    let device = context.device();
    let producer = device.create_stream()?;
    let consumer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    let done = device.create_event()?;
    writer.queue(&producer, &out, 61)?;
    producer.record(&done)?;
    consumer.wait(&done)?;
    consumer.copy(&out, &copy)?;
    check_slice_eq(
        &consumer.read_to_vec(&copy)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 61),
        "the consumer's copy of the producer's output",
    )
}

fn chain_through_three_streams(context: &TestContext) -> TestResult {
    let device = context.device();
    let streams = [
        device.create_stream()?,
        device.create_stream()?,
        device.create_stream()?,
    ];
    let writer = SlowWriter::new(context)?;
    let update = update_kernel(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    let first = device.create_event()?;
    let second = device.create_event()?;
    writer.queue(&streams[0], &out, 62)?;
    streams[0].record(&first)?;
    streams[1].wait(&first)?;
    queue_update(&streams[1], &update, &out, 5, 7)?;
    streams[1].record(&second)?;
    streams[2].wait(&second)?;
    streams[2].copy(&out, &copy)?;
    check_slice_eq(
        &streams[2].read_to_vec(&copy)?,
        &affine(&SlowWriter::expected(BUSY_ELEMENTS, 62), 5, 7),
        "the third stream's copy",
    )
}

fn several_events(context: &TestContext) -> TestResult {
    let device = context.device();
    let producers = [device.create_stream()?, device.create_stream()?];
    let consumer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let outs = [zeros(context, BUSY_ELEMENTS)?, zeros(context, BUSY_ELEMENTS)?];
    let joined = zeros(context, 2 * BUSY_ELEMENTS)?;
    let events = [device.create_event()?, device.create_event()?];
    for (index, ((producer, out), event)) in producers.iter().zip(&outs).zip(&events).enumerate() {
        writer.queue(producer, out, 63 + index as u32)?;
        producer.record(event)?;
    }
    for event in &events {
        consumer.wait(event)?;
    }
    consumer.copy(outs[0].slice(..BUSY_ELEMENTS), &joined)?;
    consumer.copy(outs[1].slice(..BUSY_ELEMENTS), joined.slice(BUSY_ELEMENTS..))?;
    let mut expected = SlowWriter::expected(BUSY_ELEMENTS, 63);
    expected.extend(SlowWriter::expected(BUSY_ELEMENTS, 64));
    check_slice_eq(
        &consumer.read_to_vec(&joined)?,
        &expected,
        "both producers' outputs, copied after waiting on both",
    )
}

fn wait_never_recorded(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let event = device.create_event()?;
    let buffer = device.alloc::<u32>(64)?;
    stream.wait(&event)?;
    stream.fill(buffer.slice(..64), 77u32)?;
    // A wait that blocked forever would hang here; the runner's time limit would catch it.
    check_slice_eq(
        &stream.read_to_vec(&buffer)?,
        &[77u32; 64],
        "the fill queued after the wait",
    )
}

fn wait_on_the_same_stream(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let update = update_kernel(context)?;
    let buffer = device.alloc_from(stream, &[1u32; 64])?;
    let event = device.create_event()?;
    queue_update(stream, &update, &buffer, 2, 1)?;
    stream.record(&event)?;
    stream.wait(&event)?;
    queue_update(stream, &update, &buffer, 3, 0)?;
    check_slice_eq(
        &stream.read_to_vec(&buffer)?,
        &[9u32; 64],
        "the buffer after both updates",
    )?;
    check_eq(event.query()?, true, "the event after the stream synchronized")
}

fn wait_survives_event_destroy(context: &TestContext) -> TestResult {
    let device = context.device();
    let producer = device.create_stream()?;
    let consumer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    let event = device.create_event()?;
    writer.queue(&producer, &out, 65)?;
    producer.record(&event)?;
    consumer.wait(&event)?;
    event.destroy()?;
    drop(event);
    consumer.copy(&out, &copy)?;
    check_slice_eq(
        &consumer.read_to_vec(&copy)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 65),
        "the copy queued after a wait on a since destroyed event",
    )
}

fn rerecord_moves_the_event(context: &TestContext) -> TestResult {
    let device = context.device();
    let producer = device.create_stream()?;
    let consumer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    let event = device.create_event()?;
    // The first record completes at once; the second follows a long kernel.
    producer.record(&event)?;
    producer.synchronize()?;
    writer.queue(&producer, &out, 66)?;
    producer.record(&event)?;
    consumer.wait(&event)?;
    consumer.copy(&out, &copy)?;
    let expected = SlowWriter::expected(BUSY_ELEMENTS, 66);
    check_slice_eq(
        &consumer.read_to_vec(&copy)?,
        &expected,
        "a copy queued after waiting on the re-recorded event",
    )?;
    // The host wait, too, refers to the newest record.
    writer.queue(&producer, &out, 67)?;
    producer.record(&event)?;
    event.synchronize()?;
    check_slice_eq(
        &consumer.read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 67),
        "the output once a host wait on the third record returned",
    )
}

fn query_pending_to_complete(context: &TestContext) -> TestResult {
    let device = context.device();
    let producer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let event = device.create_event()?;
    writer.queue(&producer, &out, 68)?;
    producer.record(&event)?;
    let mut seen = Vec::new();
    poll_until("the event recorded after a long kernel", || {
        let complete = event.query()?;
        seen.push(complete);
        Ok(complete)
    })?;
    // Complete means the work before the record is done, before anyone waits for it: a
    // stream that never synchronized with the producer sees the output.
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 68),
        "the output read by another stream as soon as the event queried complete",
    )?;
    // Complete stays complete.
    for _ in 0..3 {
        seen.push(event.query()?);
    }
    event.synchronize()?;
    seen.push(event.query()?);
    let first_complete = seen.iter().position(|complete| *complete).unwrap_or(seen.len());
    check(seen[first_complete..].iter().all(|complete| *complete), || {
        format!("the event went from complete back to pending; queries in order: {seen:?}")
    })?;
    // Complete means the work before the record is done.
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 68),
        "the output of the work recorded before the event",
    )
}

fn query_never_recorded(context: &TestContext) -> TestResult {
    let device = context.device();
    check_eq(device.create_event()?.query()?, true, "query on a new event")?;
    check_eq(
        device.create_event_without_timing()?.query()?,
        true,
        "query on a new event without timing",
    )
}

fn idle_stream_record_completes(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let event = context.device().create_event()?;
    stream.record(&event)?;
    poll_until("an event recorded on an idle stream", || event.query())?;
    event.synchronize()?;
    check_eq(event.query()?, true, "query after the host wait")
}

fn synchronize_waits_for_recorded_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let producer = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let event = device.create_event_without_timing()?;
    writer.queue(&producer, &out, 69)?;
    producer.record(&event)?;
    event.synchronize()?;
    check_eq(event.query()?, true, "query after the host wait")?;
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 69),
        "the output read by another stream after the host wait",
    )
}

fn synchronize_never_recorded(context: &TestContext) -> TestResult {
    context.device().create_event()?.synchronize()?;
    context.device().create_event_without_timing()?.synchronize()?;
    Ok(())
}

fn timing_matches_the_feature(context: &TestContext) -> TestResult {
    let device = context.device();
    let claimed = device.has_features(Features::TIMESTAMPS);
    check_eq(
        device.create_event()?.has_timing(),
        claimed,
        "timing of a default event, against the device's timestamps feature",
    )?;
    check_eq(
        device.create_event_without_timing()?.has_timing(),
        false,
        "timing of an event created without it",
    )
}

/// Records `count` timing events on `stream` with a long kernel queued before each but the
/// first, and waits for the last.
fn timed_marks(context: &TestContext, count: usize) -> Result<Vec<Event>, Verdict> {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let mut marks = Vec::with_capacity(count);
    for index in 0..count {
        if index > 0 {
            queue_busy(stream, &busy, &out, BUSY_ITERATIONS, 70 + index as u32)?;
        }
        let event = device.create_event()?;
        check(event.has_timing(), || {
            "the device claims timestamps, but its default event has no timing".into()
        })?;
        stream.record(&event)?;
        marks.push(event);
    }
    stream.synchronize()?;
    Ok(marks)
}

fn elapsed_plausible(context: &TestContext) -> TestResult {
    let started = std::time::Instant::now();
    let marks = timed_marks(context, 2)?;
    // The device cannot measure more time between two events than passed on the host from
    // before the first was queued to after the second completed (the slack covers clocks
    // that tick at different rates by a little).
    let wall = started.elapsed();
    let elapsed = marks[1].elapsed_since(&marks[0])?;
    check(elapsed > Duration::ZERO && elapsed < ELAPSED_CEILING, || {
        format!("events around a long kernel measured {elapsed:?}; expected more than zero and less than a minute")
    })?;
    check(elapsed <= wall + wall / 10 + Duration::from_millis(1), || {
        format!("events around a long kernel measured {elapsed:?}, more than the {wall:?} that passed on the host")
    })
}

fn elapsed_additive(context: &TestContext) -> TestResult {
    let marks = timed_marks(context, 3)?;
    let ab = marks[1].elapsed_since(&marks[0])?;
    let bc = marks[2].elapsed_since(&marks[1])?;
    let ac = marks[2].elapsed_since(&marks[0])?;
    let sum = ab + bc;
    let difference = sum.abs_diff(ac);
    // Devices round each measurement (to half a microsecond on some); allow far more.
    let tolerance = Duration::from_millis(1) + ac / 20;
    check(difference <= tolerance, || {
        format!("elapsed(a, b) {ab:?} + elapsed(b, c) {bc:?} = {sum:?}, but elapsed(a, c) is {ac:?}")
    })
}

fn elapsed_monotonic(context: &TestContext) -> TestResult {
    let marks = timed_marks(context, 4)?;
    let from_first: Vec<Duration> = marks[1..]
        .iter()
        .map(|mark| mark.elapsed_since(&marks[0]))
        .collect::<xhal::Result<_>>()?;
    check(from_first.windows(2).all(|pair| pair[0] <= pair[1]), || {
        format!("times from the first event to each later one decrease: {from_first:?}")
    })?;
    let inner = marks[2].elapsed_since(&marks[1])?;
    check(inner <= from_first[1], || {
        format!(
            "the span from event 1 to 2 ({inner:?}) is longer than the span from 0 to 2 ({:?}) containing it",
            from_first[1]
        )
    })?;
    check(from_first[2] < ELAPSED_CEILING, || {
        format!("three long kernels measured {:?}", from_first[2])
    })
}

fn elapsed_across_streams(context: &TestContext) -> TestResult {
    let device = context.device();
    let first = device.create_stream()?;
    let second = device.create_stream()?;
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let start = device.create_event()?;
    let middle = device.create_event()?;
    let end = device.create_event()?;
    first.record(&start)?;
    queue_busy(&first, &busy, &out, BUSY_ITERATIONS, 75)?;
    first.record(&middle)?;
    second.wait(&middle)?;
    queue_busy(&second, &busy, &out, BUSY_ITERATIONS, 76)?;
    second.record(&end)?;
    end.synchronize()?;
    start.synchronize()?;
    let to_middle = middle.elapsed_since(&start)?;
    let to_end = end.elapsed_since(&start)?;
    check(to_middle > Duration::ZERO && to_end < ELAPSED_CEILING, || {
        format!("start to middle measured {to_middle:?}, start to end {to_end:?}")
    })?;
    check(to_middle <= to_end, || {
        format!("the end, recorded after waiting on the middle, measured {to_end:?} from the start, before the middle's {to_middle:?}")
    })
}

fn elapsed_without_timing_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let plain_start = device.create_event_without_timing()?;
    let plain_end = device.create_event_without_timing()?;
    let timed = device.create_event()?;
    stream.record(&plain_start)?;
    stream.record(&timed)?;
    stream.record(&plain_end)?;
    stream.synchronize()?;
    let refused = [ErrorKind::InvalidArgument];
    expect_error(
        plain_end.elapsed_since(&plain_start),
        &refused,
        "elapsed time between two events without timing",
    )?;
    expect_error(
        timed.elapsed_since(&plain_start),
        &refused,
        "elapsed time from an event without timing",
    )?;
    expect_error(
        plain_end.elapsed_since(&timed),
        &refused,
        "elapsed time to an event without timing",
    )?;
    Ok(())
}

fn elapsed_never_recorded_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    let recorded = device.create_event()?;
    let never = device.create_event()?;
    context.stream().record(&recorded)?;
    context.stream().synchronize()?;
    let refused = [ErrorKind::InvalidArgument];
    expect_error(
        never.elapsed_since(&recorded),
        &refused,
        "elapsed time to an event never recorded",
    )?;
    expect_error(
        recorded.elapsed_since(&never),
        &refused,
        "elapsed time from an event never recorded",
    )?;
    Ok(())
}

fn elapsed_end_before_start_refused(context: &TestContext) -> TestResult {
    let marks = timed_marks(context, 2)?;
    expect_error(
        marks[0].elapsed_since(&marks[1]),
        &[ErrorKind::InvalidArgument],
        "elapsed time to an event that completed a long kernel before its start",
    )?;
    Ok(())
}

fn destroy_later_use_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let event = device.create_event()?;
    let clone = event.clone();
    let other = device.create_event()?;
    stream.record(&event)?;
    stream.record(&other)?;
    stream.synchronize()?;
    event.destroy()?;
    let refused = [ErrorKind::InvalidHandle];
    expect_error(stream.record(&clone), &refused, "recording a destroyed event")?;
    expect_error(stream.wait(&clone), &refused, "waiting on a destroyed event")?;
    expect_error(clone.query(), &refused, "querying a destroyed event")?;
    expect_error(clone.synchronize(), &refused, "a host wait on a destroyed event")?;
    expect_error(
        other.elapsed_since(&clone),
        &refused,
        "elapsed time from a destroyed event",
    )?;
    expect_error(clone.destroy(), &refused, "destroying an event twice")?;
    // The stream and the other event are unaffected.
    stream.record(&other)?;
    stream.synchronize()?;
    check_eq(other.query()?, true, "another event recorded afterwards")
}

fn event_of_another_device(context: &TestContext) -> TestResult {
    let Some(other) = super::memory::other_device(context)? else {
        return Err(Verdict::skip("the backend has one device; the test needs a second one"));
    };
    let stream = context.stream();
    let foreign = other.create_event()?;
    let refused = [ErrorKind::InvalidHandle];
    expect_error(stream.record(&foreign), &refused, "recording another device's event")?;
    expect_error(stream.wait(&foreign), &refused, "waiting on another device's event")?;
    let local = context.device().create_event()?;
    stream.record(&local)?;
    stream.synchronize()?;
    check_eq(local.query()?, true, "a local event recorded afterwards")
}

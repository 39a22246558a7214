//! The `streams` area: in-order execution, many streams at once, synchronize and query, and
//! what a stream promises after a refused call, a destroy or a drop.
//!
//! The kernels here are shared with the `events`, `concurrency` and `stress` areas: a busy
//! kernel that keeps the device occupied long enough for a missing dependency to show as a
//! wrong result (on the CPU reference backend every stream has its own worker thread, so two
//! streams really race), and small arithmetic kernels whose results depend on the order in
//! which they ran.

use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, TestCase, TestResult, Verdict};
use std::time::{Duration, Instant};
use xhal::{Buffer, Device, ErrorKind, Kernel, Launch, Stream};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "streams.order.transfer_chain",
            "a write, copy, fill, copy and read queued back to back on one stream run in order",
            transfer_chain
        ),
        test_case!(
            "streams.order.kernel_chain",
            "64 kernels queued back to back, each reading the previous one's output, run in order",
            kernel_chain
        ),
        test_case!(
            "streams.order.mixed_operations",
            "kernels, fills, copies and asynchronous writes interleaved on one stream run in order",
            mixed_operations
        ),
        test_case!(
            "streams.order.write_after_read",
            "a fill or write queued after a kernel that reads the buffer does not change what the kernel read",
            write_after_read
        ),
        test_case!(
            "streams.order.copy_waits_for_long_kernel",
            "a copy queued behind a long kernel on the same stream sees the kernel's output",
            copy_waits_for_long_kernel
        ),
        test_case!(
            "streams.many.sixteen_streams",
            "16 streams, each given its own kernels, fills and copies at once, all produce their own results",
            sixteen_streams
        ),
        test_case!(
            "streams.sync.new_stream_is_idle",
            "a stream with nothing queued reports itself complete",
            new_stream_is_idle
        ),
        test_case!(
            "streams.sync.query_after_synchronize",
            "after synchronize returns, the stream reports itself complete and stays so",
            query_after_synchronize
        ),
        test_case!(
            "streams.sync.query_reaches_complete",
            "polling query alone eventually reports completion, and the work's results are then there",
            query_reaches_complete
        ),
        test_case!(
            "streams.sync.synchronize_idle_stream",
            "synchronize on an idle stream, repeated, returns at once without error",
            synchronize_idle_stream
        ),
        test_case!(
            "streams.sync.results_visible_to_other_streams",
            "once a stream has synchronized, another stream reads the results of its work",
            results_visible_to_other_streams
        ),
        test_case!(
            "streams.write.complete_on_return",
            "a write has reached the device when it returns: another stream reads the data at once",
            write_complete_on_return
        ),
        test_case!(
            "streams.misuse.usable_after_out_of_bounds_call",
            "a stream that refused out-of-bounds calls still does correct work afterwards",
            usable_after_out_of_bounds_call
        ),
        test_case!(
            "streams.misuse.usable_after_refused_launch",
            "a stream that refused a malformed launch still runs correct launches afterwards",
            usable_after_refused_launch
        ),
        test_case!(
            "streams.misuse.refused_launch_does_not_run",
            "a launch refused for its arguments never runs: its output buffer stays unchanged",
            refused_launch_does_not_run
        ),
        test_case!(
            "streams.misuse.buffer_of_another_device",
            "a stream refuses a buffer of another device as an invalid handle",
            buffer_of_another_device
        ),
        test_case!(
            "streams.destroy.completes_pending_work",
            "destroying a stream with queued work finishes that work before returning",
            destroy_completes_pending_work
        ),
        test_case!(
            "streams.destroy.later_calls_refused",
            "every call on a destroyed stream, through any clone, is refused as an invalid handle",
            destroy_later_calls_refused
        ),
        test_case!(
            "streams.drop.completes_pending_work",
            "dropping the last handle of a stream with queued work lets that work finish",
            drop_completes_pending_work
        ),
        test_case!(
            "streams.clone.shares_one_queue",
            "work queued through two clones of a stream runs in the one order it was queued",
            clones_share_one_queue
        ),
        test_case!(
            "streams.lifetime.buffers_dropped_while_queued",
            "buffers dropped while queued work still uses them stay valid until that work is done",
            buffers_dropped_while_queued
        ),
        test_case!(
            "streams.priority.range_is_well_formed",
            "the device's stream priorities (ABI 1.5) run from 0, a plain stream's, down to the most urgent, and a \
             plain stream has priority 0",
            priority_range_is_well_formed
        ),
        test_case!(
            "streams.priority.every_priority_runs_work",
            "a stream of each of the device's priorities runs kernels, fills and copies in order, with the right \
             results, and reports its priority",
            every_priority_runs_work
        ),
        test_case!(
            "streams.priority.out_of_range_is_clamped",
            "a priority beyond either end of the device's range gives a working stream of that end's priority",
            out_of_range_priority_is_clamped
        ),
        test_case!(
            "streams.priority.urgent_and_plain_streams_at_once",
            "long work queued on the most urgent and on plain streams at once, with events between them, gives every \
             stream its own results",
            urgent_and_plain_streams_at_once
        ),
    ]
}

/// Keeps each invocation busy for `iterations` steps of a linear congruential generator, then
/// stores the result: work whose length the test chooses and whose output it can predict.
pub(super) const BUSY: &str = r#"
struct Params {
    iterations: u32,
    seed: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn busy(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x >= arrayLength(&out) {
        return;
    }
    var x = params.seed ^ id.x;
    for (var i = 0u; i < params.iterations; i++) {
        x = x * 1664525u + 1013904223u;
    }
    out[id.x] = x;
}
"#;

/// `destination[i] = source[i] * multiplier + addend`, wrapping: applied twice with different
/// constants, the order shows in the result.
pub(super) const STEP: &str = r#"
struct Params {
    multiplier: u32,
    addend: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> source: array<u32>;
@group(0) @binding(1) var<storage, read_write> destination: array<u32>;

@compute @workgroup_size(64)
fn step(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&destination) {
        destination[id.x] = source[id.x] * params.multiplier + params.addend;
    }
}
"#;

/// The same update as [`STEP`], in place.
pub(super) const UPDATE: &str = r#"
struct Params {
    multiplier: u32,
    addend: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read_write> data: array<u32>;

@compute @workgroup_size(64)
fn update(@builtin(global_invocation_id) id: vec3<u32>) {
    if id.x < arrayLength(&data) {
        data[id.x] = data[id.x] * params.multiplier + params.addend;
    }
}
"#;

/// Iterations of the busy kernel that take tens of milliseconds per workgroup on the CPU
/// reference backend in a debug build: long enough that work racing past it would be seen.
pub(super) const BUSY_ITERATIONS: u32 = 2_000;

/// Elements of a busy kernel's output in the ordering tests: a few workgroups.
pub(super) const BUSY_ELEMENTS: usize = 256;

/// Workgroups of 64 invocations covering `elements`.
pub(super) fn groups_of_64(elements: usize) -> u32 {
    u32::try_from(elements.div_ceil(64)).unwrap_or(u32::MAX).max(1)
}

/// The busy kernel.
pub(super) fn busy_kernel(context: &TestContext) -> Result<Kernel, Verdict> {
    Ok(context.load_wgsl("busy", BUSY)?.kernel("busy")?)
}

/// The ping-pong step kernel.
pub(super) fn step_kernel(context: &TestContext) -> Result<Kernel, Verdict> {
    Ok(context.load_wgsl("step", STEP)?.kernel("step")?)
}

/// The in-place update kernel.
pub(super) fn update_kernel(context: &TestContext) -> Result<Kernel, Verdict> {
    Ok(context.load_wgsl("update", UPDATE)?.kernel("update")?)
}

/// Queues the busy kernel over all of `out`.
pub(super) fn queue_busy(
    stream: &Stream,
    kernel: &Kernel,
    out: &Buffer<u32>,
    iterations: u32,
    seed: u32,
) -> xhal::Result<()> {
    stream.launch(
        &Launch::new(kernel)
            .workgroups(groups_of_64(out.len()), 1, 1)
            .buffer(out)
            .scalar(iterations)
            .scalar(seed),
    )
}

/// What the busy kernel leaves in a buffer of `len` elements.
pub(super) fn busy_expected(len: usize, iterations: u32, seed: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|index| {
            let mut x = seed ^ index;
            for _ in 0..iterations {
                x = lcg(x);
            }
            x
        })
        .collect()
}

fn lcg(x: u32) -> u32 {
    x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
}

/// Writes a predictable result into a buffer only at the end of a long stretch of work: the
/// busy kernel runs on a scratch buffer of its own, then a copy moves its output over, so a
/// reader that does not really wait sees the buffer's old contents. (Having the busy kernel
/// write the buffer itself would not do: a backend may hold a kernel's buffers for as long as
/// it runs, which would hide a missing wait.)
pub(super) struct SlowWriter {
    device: Device,
    kernel: Kernel,
}

impl SlowWriter {
    pub(super) fn new(context: &TestContext) -> Result<SlowWriter, Verdict> {
        Ok(SlowWriter {
            device: context.device().clone(),
            kernel: busy_kernel(context)?,
        })
    }

    /// Queues the work on `stream`; once it is done, `out` holds [`SlowWriter::expected`].
    pub(super) fn queue(&self, stream: &Stream, out: &Buffer<u32>, seed: u32) -> xhal::Result<()> {
        // Dropped at once: the stream keeps it alive for the queued work.
        let scratch = self.device.alloc::<u32>(out.len())?;
        queue_busy(stream, &self.kernel, &scratch, BUSY_ITERATIONS, seed)?;
        stream.copy(&scratch, out)
    }

    /// What `out` holds once the work queued with `seed` is done.
    pub(super) fn expected(len: usize, seed: u32) -> Vec<u32> {
        busy_expected(len, BUSY_ITERATIONS, seed)
    }
}

/// A buffer of `len` zeros, written through the test's stream.
pub(super) fn zeros(context: &TestContext, len: usize) -> Result<Buffer<u32>, Verdict> {
    Ok(context.device().alloc_from(context.stream(), &vec![0u32; len])?)
}

/// Queues `destination = source * multiplier + addend`.
pub(super) fn queue_step(
    stream: &Stream,
    kernel: &Kernel,
    source: &Buffer<u32>,
    destination: &Buffer<u32>,
    multiplier: u32,
    addend: u32,
) -> xhal::Result<()> {
    stream.launch(
        &Launch::new(kernel)
            .workgroups(groups_of_64(destination.len()), 1, 1)
            .buffer(source)
            .buffer(destination)
            .scalar(multiplier)
            .scalar(addend),
    )
}

/// Queues `data = data * multiplier + addend`.
pub(super) fn queue_update(
    stream: &Stream,
    kernel: &Kernel,
    data: &Buffer<u32>,
    multiplier: u32,
    addend: u32,
) -> xhal::Result<()> {
    stream.launch(
        &Launch::new(kernel)
            .workgroups(groups_of_64(data.len()), 1, 1)
            .buffer(data)
            .scalar(multiplier)
            .scalar(addend),
    )
}

/// The host's version of the step and update kernels.
pub(super) fn affine(values: &[u32], multiplier: u32, addend: u32) -> Vec<u32> {
    values
        .iter()
        .map(|value| value.wrapping_mul(multiplier).wrapping_add(addend))
        .collect()
}

/// Polls `done` until it says true, failing after a minute: long enough for any device, short
/// enough that a backend that never completes fails instead of hanging the suite.
pub(super) fn poll_until(what: &str, mut done: impl FnMut() -> xhal::Result<bool>) -> TestResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if done()? {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Verdict::fail(format!("{what}: still not complete after 60 s")));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn transfer_chain(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let n = 1000;
    let data = context.random_u32(21, n);
    let a = device.alloc::<u32>(n)?;
    let b = device.alloc::<u32>(n)?;
    let c = device.alloc::<u32>(n)?;
    // Nothing synchronizes until the read: each step must wait for the one before on its own.
    stream.write_owned(&a, data.clone())?;
    stream.copy(a.slice(..n), &b)?;
    stream.fill(b.slice(100..100 + 200), 0xDEAD_BEEFu32)?;
    stream.copy(b.slice(50..50 + (n - 50)), &c)?;
    stream.fill(c.slice(n - 50..n - 50 + 50), 7u32)?;
    let back = stream.read_to_vec(&c)?;
    let mut b_expected = data;
    b_expected[100..300].fill(0xDEAD_BEEF);
    let mut expected = b_expected[50..].to_vec();
    expected.extend([7u32; 50]);
    check_slice_eq(&back, &expected, "the chain's final buffer")
}

fn kernel_chain(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let n = 512;
    let data = context.random_u32(22, n);
    let ping = device.alloc_from(stream, &data)?;
    let pong = device.alloc::<u32>(n)?;
    let mut expected = data;
    for round in 0..64u32 {
        let (multiplier, addend) = (2 * round + 3, round);
        let (source, destination) = if round % 2 == 0 { (&ping, &pong) } else { (&pong, &ping) };
        queue_step(stream, &step, source, destination, multiplier, addend)?;
        expected = affine(&expected, multiplier, addend);
    }
    // 64 rounds end in `ping`.
    let back = stream.read_to_vec(&ping)?;
    check_slice_eq(&back, &expected, "the result of 64 chained kernels")
}

fn mixed_operations(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let update = update_kernel(context)?;
    let n = 300;
    let data = context.random_u32(23, n);
    let later = context.random_u32(24, 40);
    let a = device.alloc::<u32>(n)?;
    let b = device.alloc::<u32>(n)?;
    stream.write_owned(&a, data.clone())?;
    queue_update(stream, &update, &a, 3, 1)?;
    stream.copy(&a, &b)?;
    stream.fill(a.slice(..n), 0u32)?;
    queue_step(stream, &step, &b, &a, 5, 2)?;
    stream.fill(b.slice(..10), 9u32)?;
    stream.write_owned(b.slice(200..), later.clone())?;
    queue_update(stream, &update, &b, 7, 0)?;
    let back_a = stream.read_to_vec(&a)?;
    let back_b = stream.read_to_vec(&b)?;
    let b_after_copy = affine(&data, 3, 1);
    check_slice_eq(&back_a, &affine(&b_after_copy, 5, 2), "buffer a")?;
    let mut b_expected = b_after_copy;
    b_expected[..10].fill(9);
    b_expected[200..240].copy_from_slice(&later);
    check_slice_eq(&back_b, &affine(&b_expected, 7, 0), "buffer b")
}

fn write_after_read(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let n = 256;
    let data = context.random_u32(25, n);
    let source = device.alloc_from(stream, &data)?;
    let first = device.alloc::<u32>(n)?;
    let second = device.alloc::<u32>(n)?;
    queue_step(stream, &step, &source, &first, 1, 1)?;
    stream.fill(source.slice(..n), 5u32)?;
    queue_step(stream, &step, &source, &second, 1, 1)?;
    stream.write_owned(&source, vec![11u32; n])?;
    check_slice_eq(
        &stream.read_to_vec(&first)?,
        &affine(&data, 1, 1),
        "the kernel queued before the fill",
    )?;
    check_slice_eq(
        &stream.read_to_vec(&second)?,
        &vec![6u32; n],
        "the kernel queued between the fill and the write",
    )?;
    check_slice_eq(
        &stream.read_to_vec(&source)?,
        &vec![11u32; n],
        "the source after the write",
    )
}

fn copy_waits_for_long_kernel(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let out = device.alloc::<u32>(BUSY_ELEMENTS)?;
    let copy = device.alloc_from(stream, &vec![0u32; BUSY_ELEMENTS])?;
    queue_busy(stream, &busy, &out, BUSY_ITERATIONS, 31)?;
    stream.copy(&out, &copy)?;
    check_slice_eq(
        &stream.read_to_vec(&copy)?,
        &busy_expected(BUSY_ELEMENTS, BUSY_ITERATIONS, 31),
        "the copy of the long kernel's output",
    )
}

fn sixteen_streams(context: &TestContext) -> TestResult {
    const STREAMS: usize = 16;
    const ELEMENTS: usize = 64;
    const ITERATIONS: u32 = 300;
    let device = context.device();
    let busy = busy_kernel(context)?;
    let update = update_kernel(context)?;
    let mut lanes = Vec::with_capacity(STREAMS);
    // Queue everything on every stream before synchronizing any of them.
    for lane in 0..STREAMS as u32 {
        let stream = device.create_stream()?;
        let out = device.alloc::<u32>(ELEMENTS)?;
        let copy = device.alloc::<u32>(ELEMENTS)?;
        queue_busy(&stream, &busy, &out, ITERATIONS, lane)?;
        queue_update(&stream, &update, &out, lane + 2, lane)?;
        stream.fill(out.slice(..4), lane)?;
        stream.copy(&out, &copy)?;
        lanes.push((stream, copy));
    }
    for (lane, (stream, copy)) in lanes.iter().enumerate() {
        stream.synchronize()?;
        let lane = lane as u32;
        let mut expected = affine(&busy_expected(ELEMENTS, ITERATIONS, lane), lane + 2, lane);
        expected[..4].fill(lane);
        check_slice_eq(
            &stream.read_to_vec(copy)?,
            &expected,
            &format!("stream {lane}'s result"),
        )?;
    }
    Ok(())
}

fn new_stream_is_idle(context: &TestContext) -> TestResult {
    check_eq(context.stream().query()?, true, "query on the test's new stream")?;
    let another = context.device().create_stream()?;
    check_eq(another.query()?, true, "query on a second new stream")
}

fn query_after_synchronize(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let out = context.device().alloc::<u32>(BUSY_ELEMENTS)?;
    queue_busy(stream, &busy, &out, BUSY_ITERATIONS, 41)?;
    stream.synchronize()?;
    for attempt in 0..3 {
        check(stream.query()?, || {
            format!("query after synchronize returned false (attempt {attempt})")
        })?;
    }
    Ok(())
}

fn query_reaches_complete(context: &TestContext) -> TestResult {
    let device = context.device();
    let worker = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    writer.queue(&worker, &out, 42)?;
    poll_until("the stream with a long kernel", || worker.query())?;
    // Complete means complete: a stream that never synchronized with `worker` sees the output.
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 42),
        "the output read by another stream once query said complete",
    )
}

fn synchronize_idle_stream(context: &TestContext) -> TestResult {
    let stream = context.stream();
    for _ in 0..3 {
        stream.synchronize()?;
    }
    check_eq(stream.query()?, true, "query after synchronizing an idle stream")
}

fn results_visible_to_other_streams(context: &TestContext) -> TestResult {
    let device = context.device();
    let worker = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    writer.queue(&worker, &out, 43)?;
    worker.synchronize()?;
    check_slice_eq(
        &context.stream().read_to_vec(&out)?,
        &SlowWriter::expected(BUSY_ELEMENTS, 43),
        "the output read by another stream after synchronize",
    )
}

fn write_complete_on_return(context: &TestContext) -> TestResult {
    let device = context.device();
    let writer = device.create_stream()?;
    let data = context.random_u32(44, 4096);
    let buffer = device.alloc::<u32>(data.len())?;
    writer.write(&buffer, &data)?;
    check_slice_eq(
        &context.stream().read_to_vec(&buffer)?,
        &data,
        "data read by another stream right after the write returned",
    )
}

fn usable_after_out_of_bounds_call(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let a = device.alloc::<u32>(16)?;
    let b = device.alloc::<u32>(8)?;
    stream.fill(a.slice(..16), 3u32)?;
    expect_error(
        stream.copy(a.slice(..8), b.slice(4..)),
        &[ErrorKind::OutOfBounds],
        "copying past b's end",
    )?;
    expect_error(
        stream.fill(b.slice(8..8 + 1), 0u32),
        &[ErrorKind::OutOfBounds],
        "filling past b's end",
    )?;
    expect_error(
        stream.read(a.slice(10..), &mut [0u32; 8]),
        &[ErrorKind::OutOfBounds],
        "reading past a's end",
    )?;
    expect_error(
        stream.write(b.slice(1..), &[0u32; 8]),
        &[ErrorKind::OutOfBounds],
        "writing past b's end",
    )?;
    stream.copy(a.slice(8..8 + 8), &b)?;
    stream.fill(b.slice(6..6 + 2), 9u32)?;
    check_slice_eq(
        &stream.read_to_vec(&b)?,
        &[3, 3, 3, 3, 3, 3, 9, 9],
        "b after the refused calls",
    )?;
    check_eq(stream.query()?, true, "query after the refused calls")
}

fn usable_after_refused_launch(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let update = update_kernel(context)?;
    let data = device.alloc_from(stream, &[1u32, 2, 3, 4])?;
    expect_error(
        stream.launch(&Launch::new(&update).buffer(&data).scalar(2u32)),
        &[ErrorKind::InvalidArgument],
        "a launch missing a scalar",
    )?;
    expect_error(
        stream.launch(&Launch::new(&update).buffer(&data).scalar(2u32).scalar(1u64)),
        &[ErrorKind::InvalidArgument],
        "a launch with a scalar of the wrong size",
    )?;
    expect_error(
        stream.launch(
            &Launch::new(&update)
                .workgroups(0, 1, 1)
                .buffer(&data)
                .scalar(2u32)
                .scalar(1u32),
        ),
        &[ErrorKind::InvalidArgument],
        "a launch of zero workgroups",
    )?;
    queue_update(stream, &update, &data, 2, 1)?;
    check_slice_eq(
        &stream.read_to_vec(&data)?,
        &[3, 5, 7, 9],
        "the buffer after a valid launch",
    )
}

fn refused_launch_does_not_run(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let source = device.alloc_from(stream, &[1u32; 64])?;
    let destination = device.alloc_from(stream, &[0u32; 64])?;
    let short = device.alloc_from(stream, &[5u32; 1])?;
    expect_error(
        stream.launch(
            &Launch::new(&step)
                .buffer(&source)
                .buffer(&destination)
                .scalar(2u32)
                .scalar(1u32)
                .scalar(0u32),
        ),
        &[ErrorKind::InvalidArgument],
        "a launch with a scalar too many",
    )?;
    expect_error(
        stream.launch(&Launch::new(&step).buffer(&source).scalar(2u32).scalar(1u32)),
        &[ErrorKind::InvalidArgument],
        "a launch missing its destination buffer",
    )?;
    // A view reaching past the end of its buffer is refused before anything is queued.
    expect_error(
        stream.launch(
            &Launch::new(&step)
                .buffer(&source)
                .buffer(short.slice(0..2))
                .scalar(2u32)
                .scalar(1u32),
        ),
        &[ErrorKind::OutOfBounds],
        "a launch binding a view past the end of a buffer",
    )?;
    stream.synchronize()?;
    check_slice_eq(
        &stream.read_to_vec(&destination)?,
        &[0u32; 64],
        "the destination of the refused launches",
    )?;
    check_slice_eq(&stream.read_to_vec(&short)?, &[5u32], "the short buffer")
}

fn buffer_of_another_device(context: &TestContext) -> TestResult {
    let Some(other) = super::memory::other_device(context)? else {
        return Err(Verdict::skip("the backend has one device; the test needs a second one"));
    };
    let stream = context.stream();
    let local = context.device().alloc::<u32>(4)?;
    let foreign = other.alloc::<u32>(4)?;
    expect_error(
        stream.write(&foreign, &[1, 2, 3, 4]),
        &[ErrorKind::InvalidHandle],
        "writing a buffer of another device",
    )?;
    expect_error(
        stream.read(&foreign, &mut [0u32; 4]),
        &[ErrorKind::InvalidHandle],
        "reading a buffer of another device",
    )?;
    expect_error(
        stream.fill(foreign.slice(..4), 1u32),
        &[ErrorKind::InvalidHandle],
        "filling a buffer of another device",
    )?;
    let update = update_kernel(context)?;
    expect_error(
        queue_update(stream, &update, &foreign, 1, 1),
        &[ErrorKind::InvalidHandle],
        "launching on a buffer of another device",
    )?;
    stream.write(&local, &[1, 2, 3, 4])?;
    check_slice_eq(&stream.read_to_vec(&local)?, &[1, 2, 3, 4], "a local buffer afterwards")
}

fn destroy_completes_pending_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let doomed = device.create_stream()?;
    let writer = SlowWriter::new(context)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    writer.queue(&doomed, &copy, 51)?;
    doomed.fill(copy.slice(..8), 1u32)?;
    doomed.destroy()?;
    let mut expected = SlowWriter::expected(BUSY_ELEMENTS, 51);
    expected[..8].fill(1);
    check_slice_eq(
        &context.stream().read_to_vec(&copy)?,
        &expected,
        "the output of work queued before destroy",
    )
}

fn destroy_later_calls_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = device.create_stream()?;
    let clone = stream.clone();
    let buffer = device.alloc::<u32>(4)?;
    let event = device.create_event()?;
    stream.destroy()?;
    let refused = [ErrorKind::InvalidHandle];
    expect_error(
        clone.fill(buffer.slice(..4), 0u32),
        &refused,
        "fill on a destroyed stream",
    )?;
    expect_error(clone.write(&buffer, &[1u32]), &refused, "write on a destroyed stream")?;
    expect_error(
        clone.read(&buffer, &mut [0u32; 4]),
        &refused,
        "read on a destroyed stream",
    )?;
    expect_error(
        clone.copy(buffer.slice(..2), buffer.slice(2..)),
        &refused,
        "copy on a destroyed stream",
    )?;
    expect_error(clone.record(&event), &refused, "record on a destroyed stream")?;
    expect_error(clone.wait(&event), &refused, "wait on a destroyed stream")?;
    expect_error(clone.query(), &refused, "query on a destroyed stream")?;
    expect_error(clone.synchronize(), &refused, "synchronize on a destroyed stream")?;
    expect_error(stream.destroy(), &refused, "a second destroy")?;
    // Other streams of the device are unaffected.
    let other = device.create_stream()?;
    other.write(&buffer, &[4, 3, 2, 1])?;
    check_slice_eq(
        &other.read_to_vec(&buffer)?,
        &[4, 3, 2, 1],
        "a buffer through another stream",
    )
}

fn drop_completes_pending_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let writer = SlowWriter::new(context)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    {
        let dropped = device.create_stream()?;
        writer.queue(&dropped, &copy, 52)?;
    }
    // Dropping the last handle destroys the stream, which waits for its queued work.
    let expected = SlowWriter::expected(BUSY_ELEMENTS, 52);
    check_slice_eq(
        &context.stream().read_to_vec(&copy)?,
        &expected,
        "the output of work queued on a dropped stream",
    )
}

fn clones_share_one_queue(context: &TestContext) -> TestResult {
    let device = context.device();
    let first = device.create_stream()?;
    let second = first.clone();
    let writer = SlowWriter::new(context)?;
    let update = update_kernel(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    writer.queue(&first, &out, 53)?;
    queue_update(&second, &update, &out, 3, 3)?;
    first.copy(&out, &copy)?;
    second.synchronize()?;
    check_eq(first.query()?, true, "query through the other clone after synchronize")?;
    check_slice_eq(
        &context.stream().read_to_vec(&copy)?,
        &affine(&SlowWriter::expected(BUSY_ELEMENTS, 53), 3, 3),
        "work queued alternately through two clones",
    )
}

fn buffers_dropped_while_queued(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let step = step_kernel(context)?;
    let kept = device.alloc::<u32>(BUSY_ELEMENTS)?;
    {
        let scratch = device.alloc::<u32>(BUSY_ELEMENTS)?;
        let scratch_copy = device.alloc::<u32>(BUSY_ELEMENTS)?;
        queue_busy(stream, &busy, &scratch, BUSY_ITERATIONS, 54)?;
        stream.copy(&scratch, &scratch_copy)?;
        queue_step(stream, &step, &scratch_copy, &kept, 1, 0)?;
        // Both scratch buffers go out of scope with the work still queued.
    }
    // Fresh allocations filled on another stream, at once, must not be handed the scratch
    // memory while the queued work still uses it.
    let other = device.create_stream()?;
    let fresh: Vec<Buffer<u32>> = (0..4)
        .map(|_| device.alloc::<u32>(BUSY_ELEMENTS))
        .collect::<xhal::Result<_>>()?;
    for buffer in &fresh {
        other.fill(buffer.slice(..BUSY_ELEMENTS), 0xFFFF_FFFFu32)?;
    }
    other.synchronize()?;
    check_slice_eq(
        &stream.read_to_vec(&kept)?,
        &busy_expected(BUSY_ELEMENTS, BUSY_ITERATIONS, 54),
        "the result computed through dropped buffers",
    )
}

fn priority_range_is_well_formed(context: &TestContext) -> TestResult {
    let priorities = context.device().stream_priorities()?;
    check_eq(priorities.least, 0, "the least urgent priority (a plain stream's)")?;
    check(priorities.greatest <= priorities.least, || {
        format!(
            "the most urgent priority {} is numerically greater than the least urgent {}",
            priorities.greatest, priorities.least
        )
    })?;
    check_eq(context.stream().priority(), 0, "a plain stream's priority")
}

/// Fills a buffer with `seed`, steps it twice and copies it; the host's expectation.
fn queue_small_chain(
    stream: &Stream,
    update: &Kernel,
    data: &Buffer<u32>,
    copy: &Buffer<u32>,
    seed: u32,
) -> xhal::Result<Vec<u32>> {
    stream.fill(data, seed)?;
    queue_update(stream, update, data, 3, seed)?;
    queue_update(stream, update, data, 5, 1)?;
    stream.copy(data, copy)?;
    Ok(affine(&affine(&vec![seed; data.len()], 3, seed), 5, 1))
}

fn every_priority_runs_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let priorities = device.stream_priorities()?;
    let update = update_kernel(context)?;
    for priority in priorities.greatest..=priorities.least {
        let stream = device.create_stream_with_priority(priority)?;
        check_eq(
            stream.priority(),
            priority,
            "the priority of a stream made with one of the device's",
        )?;
        let (data, copy) = (device.alloc::<u32>(1000)?, device.alloc::<u32>(1000)?);
        let expected = queue_small_chain(&stream, &update, &data, &copy, 7 + priority.unsigned_abs())?;
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(&copy)?,
            &expected,
            &format!("the work of a stream of priority {priority}"),
        )?;
    }
    Ok(())
}

fn out_of_range_priority_is_clamped(context: &TestContext) -> TestResult {
    let device = context.device();
    let priorities = device.stream_priorities()?;
    let update = update_kernel(context)?;
    let asked = [
        (priorities.least.saturating_add(3), priorities.least),
        (i32::MAX, priorities.least),
        (priorities.greatest.saturating_sub(3), priorities.greatest),
        (i32::MIN, priorities.greatest),
    ];
    for (index, (requested, expected_priority)) in asked.into_iter().enumerate() {
        let stream = device.create_stream_with_priority(requested)?;
        check_eq(
            stream.priority(),
            expected_priority,
            &format!("the priority given for a request of {requested}"),
        )?;
        let (data, copy) = (device.alloc::<u32>(300)?, device.alloc::<u32>(300)?);
        let expected = queue_small_chain(&stream, &update, &data, &copy, index as u32 + 1)?;
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(&copy)?,
            &expected,
            &format!("the work of a stream asked for priority {requested}"),
        )?;
    }
    Ok(())
}

fn urgent_and_plain_streams_at_once(context: &TestContext) -> TestResult {
    const ELEMENTS: usize = 64;
    const ITERATIONS: u32 = 300;
    let device = context.device();
    let busy = busy_kernel(context)?;
    let update = update_kernel(context)?;
    let most_urgent = device.stream_priorities()?.greatest;
    // Three pairs of a plain and an urgent stream, everything queued before anything is
    // waited for; each urgent stream also copies the head of its plain partner's result, after
    // an event recorded on the partner.
    let mut lanes = Vec::new();
    for pair in 0..3u32 {
        let (plain_seed, urgent_seed) = (2 * pair, 2 * pair + 1);
        let plain = device.create_stream()?;
        let plain_out = device.alloc::<u32>(ELEMENTS)?;
        queue_busy(&plain, &busy, &plain_out, ITERATIONS, plain_seed)?;
        queue_update(&plain, &update, &plain_out, plain_seed + 2, plain_seed)?;
        let plain_done = device.create_event()?;
        plain.record(&plain_done)?;
        let plain_expected = affine(
            &busy_expected(ELEMENTS, ITERATIONS, plain_seed),
            plain_seed + 2,
            plain_seed,
        );

        let urgent = device.create_stream_with_priority(most_urgent)?;
        let urgent_out = device.alloc::<u32>(ELEMENTS)?;
        queue_busy(&urgent, &busy, &urgent_out, ITERATIONS, urgent_seed)?;
        queue_update(&urgent, &update, &urgent_out, urgent_seed + 2, urgent_seed)?;
        urgent.wait(&plain_done)?;
        urgent.copy(plain_out.slice(..8), urgent_out.slice(..8))?;
        let mut urgent_expected = affine(
            &busy_expected(ELEMENTS, ITERATIONS, urgent_seed),
            urgent_seed + 2,
            urgent_seed,
        );
        urgent_expected[..8].copy_from_slice(&plain_expected[..8]);

        lanes.push((plain, plain_out, plain_expected));
        lanes.push((urgent, urgent_out, urgent_expected));
    }
    for (lane, (stream, out, expected)) in lanes.iter().enumerate() {
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(out)?,
            expected,
            &format!("lane {lane}'s result (priority {})", stream.priority()),
        )?;
    }
    Ok(())
}

//! The `graphs` area: stream work recorded once and replayed many times (ABI 1.4 command
//! lists where the plugin has them, core's operation-by-operation replay where it does not).
//!
//! Every test compares a replay with the same work enqueued eagerly, bit for bit, and most
//! run twice: once as the device replays graphs by default (natively where it can) and once
//! with [`GraphBuilder::emulate`], so a plugin's command lists are held to core's replay.

use super::streams::{affine, busy_kernel, groups_of_64, queue_busy, step_kernel, update_kernel, BUSY_ITERATIONS};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, TestCase, TestResult, Verdict};
use xhal::{Buffer, ErrorKind, Graph, GraphBuilder, Kernel, KernelFormat, Launch, LaunchNode};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "graphs.replay.equals_eager",
            "a graph of writes, fills, copies and launches leaves the same bytes as the same work enqueued eagerly, \
             natively and op by op",
            replay_equals_eager
        ),
        test_case!(
            "graphs.replay.runs_every_time",
            "each replay runs the whole graph again: three replays of an in-place update apply it three times",
            replay_runs_every_time
        ),
        test_case!(
            "graphs.replay.copies_and_fills_without_kernels",
            "a graph of writes, fills and copies alone replays bit for bit, on devices that run no kernels too",
            copies_and_fills_without_kernels
        ),
        test_case!(
            "graphs.replay.on_other_streams",
            "one graph replayed on several streams of its device gives each the same result, and work queued after a \
             replay waits for it",
            replay_on_other_streams
        ),
        test_case!(
            "graphs.replay.concurrent_from_threads",
            "four threads replaying one graph on their own streams at once finish with the right result",
            concurrent_replays
        ),
        test_case!(
            "graphs.streams.dependencies_hold",
            "a graph over two streams keeps its events' order inside a replay and joins both streams at its end",
            two_stream_dependencies
        ),
        test_case!(
            "graphs.update.arguments_change",
            "updating a launch's buffers and scalars changes later replays and leaves the replay queued before it alone",
            update_changes_later_replays
        ),
        test_case!(
            "graphs.update.misuse_refused",
            "updates of another kernel, views of another size, another argument count or scalars of another size are \
             refused, and the graph still replays",
            update_misuse_refused
        ),
        test_case!(
            "graphs.lifetime.dropped_while_in_flight",
            "a graph and the buffers it reads, dropped while a replay is queued behind long work, stay valid until it \
             completes",
            dropped_while_in_flight
        ),
        test_case!(
            "graphs.failure.sticks_to_the_stream",
            "a replayed kernel that fails makes the replay stream's error sticky, as the same launch enqueued alone does",
            failure_sticks_to_the_stream
        ),
        test_case!(
            "graphs.build.misuse_refused",
            "a graph without streams, a wait before any record, and streams or events of another graph are refused",
            build_misuse_refused
        ),
    ]
}

/// Elements of the buffers the graphs work on: a few workgroups, and a length that is not a
/// multiple of the workgroup.
const ELEMENTS: usize = 200;

/// The two ways a device replays a graph: as it does by default, then op by op.
const MODES: [(bool, &str); 2] = [(false, "default replay"), (true, "op-by-op replay")];

fn builder(context: &TestContext, emulate: bool) -> GraphBuilder {
    let mut builder = context.device().graph();
    builder.emulate(emulate);
    builder
}

fn step_launch<'a>(
    kernel: &'a Kernel,
    source: &Buffer<u32>,
    destination: &Buffer<u32>,
    multiplier: u32,
    addend: u32,
) -> Launch<'a> {
    Launch::new(kernel)
        .workgroups(groups_of_64(destination.len()), 1, 1)
        .buffer(source)
        .buffer(destination)
        .scalar(multiplier)
        .scalar(addend)
}

fn update_launch<'a>(kernel: &'a Kernel, data: &Buffer<u32>, multiplier: u32, addend: u32) -> Launch<'a> {
    Launch::new(kernel)
        .workgroups(groups_of_64(data.len()), 1, 1)
        .buffer(data)
        .scalar(multiplier)
        .scalar(addend)
}

/// Records (or enqueues) work on three buffers.
type Recording<'a> = dyn FnMut(&Buffer<u32>, &Buffer<u32>, &Buffer<u32>) -> xhal::Result<()> + 'a;

fn replay_equals_eager(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let update = update_kernel(context)?;
    let input = context.random_u32(19, ELEMENTS);
    let run = |record: &mut Recording<'_>| -> Result<Vec<u32>, Verdict> {
        let a = device.alloc::<u32>(ELEMENTS)?;
        let b = device.alloc::<u32>(ELEMENTS)?;
        let c = device.alloc::<u32>(ELEMENTS)?;
        stream.fill(&a, 0u32)?;
        stream.fill(&b, 0u32)?;
        stream.fill(&c, 0u32)?;
        record(&a, &b, &c)?;
        stream.synchronize()?;
        let mut out = stream.read_to_vec(&a)?;
        out.extend(stream.read_to_vec(&b)?);
        out.extend(stream.read_to_vec(&c)?);
        Ok(out)
    };
    let eager = run(&mut |a, b, c| {
        stream.write(a, &input)?;
        stream.launch(&step_launch(&step, a, b, 3, 7))?;
        stream.fill(c.slice(..100), 0xdead_beefu32)?;
        stream.copy(b.slice(..150), c.slice(50..))?;
        stream.launch(&update_launch(&update, c, 5, 1))?;
        stream.launch(&step_launch(&step, c, a, 1, 9))
    })?;
    for (emulate, mode) in MODES {
        let replayed = run(&mut |a, b, c| {
            let mut graph = builder(context, emulate);
            let lane = graph.stream();
            graph.write(lane, a, &input)?;
            graph.launch(lane, &step_launch(&step, a, b, 3, 7))?;
            graph.fill(lane, c.slice(..100), 0xdead_beefu32)?;
            graph.copy(lane, b.slice(..150), c.slice(50..))?;
            graph.launch(lane, &update_launch(&update, c, 5, 1))?;
            graph.launch(lane, &step_launch(&step, c, a, 1, 9))?;
            graph.build()?.replay(stream)
        })?;
        check_slice_eq(
            &replayed,
            &eager,
            &format!("{mode}: buffers after one replay against eager work"),
        )?;
    }
    Ok(())
}

fn replay_runs_every_time(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let update = update_kernel(context)?;
    let input = context.random_u32(20, ELEMENTS);
    let mut expected = input.clone();
    for _ in 0..3 {
        expected = affine(&expected, 3, 1);
    }
    for (emulate, mode) in MODES {
        let data = device.alloc_from(stream, &input)?;
        let mut graph = builder(context, emulate);
        let lane = graph.stream();
        graph.launch(lane, &update_launch(&update, &data, 3, 1))?;
        let graph = graph.build()?;
        for _ in 0..3 {
            graph.replay(stream)?;
        }
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(&data)?,
            &expected,
            &format!("{mode}: data after three replays"),
        )?;
    }
    Ok(())
}

fn copies_and_fills_without_kernels(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let input = context.random_bytes(21, 1000);
    let mut expected = vec![0u8; 1000];
    expected[..1000].copy_from_slice(&input);
    expected[100..300].fill(0xab);
    expected.copy_within(0..400, 600);
    for (emulate, mode) in MODES {
        let buffer = device.alloc::<u8>(1000)?;
        let scratch = device.alloc::<u8>(1000)?;
        stream.fill(&buffer, 0u8)?;
        let mut graph = builder(context, emulate);
        let lane = graph.stream();
        graph.write(lane, &buffer, &input)?;
        graph.fill(lane, buffer.slice(100..300), 0xabu8)?;
        graph.copy(lane, buffer.slice(0..400), &scratch)?;
        graph.copy(lane, scratch.slice(0..400), buffer.slice(600..))?;
        let graph = graph.build()?;
        for round in 0..2 {
            stream.fill(&buffer, 0x11u8)?;
            graph.replay(stream)?;
            let out = stream.read_to_vec(&buffer)?;
            check_slice_eq(&out, &expected, &format!("{mode}: bytes after replay {round}"))?;
        }
    }
    Ok(())
}

fn replay_on_other_streams(context: &TestContext) -> TestResult {
    let device = context.device();
    let step = step_kernel(context)?;
    let input = context.random_u32(22, ELEMENTS);
    let source = device.alloc_from(context.stream(), &input)?;
    for (emulate, mode) in MODES {
        let destination = device.alloc::<u32>(ELEMENTS)?;
        let mut graph = builder(context, emulate);
        let lane = graph.stream();
        graph.launch(lane, &step_launch(&step, &source, &destination, 7, 3))?;
        let graph = graph.build()?;
        for index in 0..3 {
            let stream = device.create_stream()?;
            stream.fill(&destination, 0u32)?;
            graph.replay(&stream)?;
            // Queued after the replay, so it must see the replay's result.
            let copy = device.alloc::<u32>(ELEMENTS)?;
            stream.copy(&destination, &copy)?;
            let out = stream.read_to_vec(&copy)?;
            check_slice_eq(
                &out,
                &affine(&input, 7, 3),
                &format!("{mode}: replay on stream {index}"),
            )?;
            stream.destroy()?;
        }
    }
    Ok(())
}

fn concurrent_replays(context: &TestContext) -> TestResult {
    let device = context.device();
    let step = step_kernel(context)?;
    let input = context.random_u32(23, ELEMENTS);
    let source = device.alloc_from(context.stream(), &input)?;
    let destination = device.alloc::<u32>(ELEMENTS)?;
    let mut graph = device.graph();
    let lane = graph.stream();
    graph.launch(lane, &step_launch(&step, &source, &destination, 11, 5))?;
    let graph = graph.build()?;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let graph = graph.clone();
                scope.spawn(move || -> xhal::Result<()> {
                    let stream = device.create_stream()?;
                    for _ in 0..25 {
                        graph.replay(&stream)?;
                    }
                    stream.synchronize()?;
                    stream.destroy()
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|worker| match worker.join() {
                Ok(Ok(())) => None,
                Ok(Err(error)) => Some(error.to_string()),
                Err(_) => Some("a replaying thread panicked".to_string()),
            })
            .collect()
    });
    check(failures.is_empty(), || {
        format!("concurrent replays failed: {}", failures.join("; "))
    })?;
    let out = context.stream().read_to_vec(&destination)?;
    check_slice_eq(&out, &affine(&input, 11, 5), "destination after 100 concurrent replays")
}

/// Lane 0 makes `a` with a long kernel and records; lane 1 waits, steps `a` into `b`, and
/// records; lane 0 waits for that and steps `b` into `c`, while lane 1 goes on to step `a` into
/// `d`, which only the graph's final join orders before the reads. Each replay starts from
/// cleared outputs, so a wait that did not wait shows in `b`, `c` or `d`.
fn two_stream_dependencies(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let step = step_kernel(context)?;
    for (emulate, mode) in MODES {
        let a = device.alloc::<u32>(ELEMENTS)?;
        let b = device.alloc::<u32>(ELEMENTS)?;
        let c = device.alloc::<u32>(ELEMENTS)?;
        let d = device.alloc::<u32>(ELEMENTS)?;
        let mut graph = builder(context, emulate);
        let main = graph.stream();
        let side = graph.stream();
        let made = graph.event();
        let stepped = graph.event();
        graph.fill(main, &b, 0u32)?;
        graph.fill(main, &c, 0u32)?;
        graph.fill(main, &d, 0u32)?;
        graph.launch(
            main,
            &Launch::new(&busy)
                .workgroups(groups_of_64(ELEMENTS), 1, 1)
                .buffer(&a)
                .scalar(BUSY_ITERATIONS)
                .scalar(4u32),
        )?;
        graph.record(main, made)?;
        graph.wait(side, made)?;
        graph.launch(side, &step_launch(&step, &a, &b, 3, 1))?;
        graph.record(side, stepped)?;
        graph.wait(main, stepped)?;
        graph.launch(main, &step_launch(&step, &b, &c, 5, 2))?;
        // Work on the side stream after its last event: only the graph's join orders it.
        graph.launch(side, &step_launch(&step, &a, &d, 1, 1))?;
        let graph = graph.build()?;
        check_eq(graph.stream_count(), 2, "streams of the graph")?;
        let made_by_busy = super::streams::busy_expected(ELEMENTS, BUSY_ITERATIONS, 4);
        let b_expected = affine(&made_by_busy, 3, 1);
        let c_expected = affine(&b_expected, 5, 2);
        let d_expected = affine(&made_by_busy, 1, 1);
        for round in 0..2 {
            stream.fill(&a, 0u32)?;
            graph.replay(stream)?;
            let b_out = stream.read_to_vec(&b)?;
            let c_out = stream.read_to_vec(&c)?;
            let d_out = stream.read_to_vec(&d)?;
            check_slice_eq(
                &b_out,
                &b_expected,
                &format!("{mode}, replay {round}: b = step(busy) on the side stream"),
            )?;
            check_slice_eq(
                &c_out,
                &c_expected,
                &format!("{mode}, replay {round}: c = step(b) after the wait"),
            )?;
            check_slice_eq(
                &d_out,
                &d_expected,
                &format!("{mode}, replay {round}: d, ordered only by the join"),
            )?;
        }
    }
    Ok(())
}

fn update_changes_later_replays(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let busy = busy_kernel(context)?;
    let first_input = context.random_u32(24, ELEMENTS);
    let second_input = context.random_u32(25, ELEMENTS);
    for (emulate, mode) in MODES {
        let first = device.alloc_from(stream, &first_input)?;
        let second = device.alloc_from(stream, &second_input)?;
        let out_first = device.alloc::<u32>(ELEMENTS)?;
        let out_second = device.alloc::<u32>(ELEMENTS)?;
        let mut graph = builder(context, emulate);
        let lane = graph.stream();
        let node: LaunchNode = graph.launch(lane, &step_launch(&step, &first, &out_first, 2, 1))?;
        let graph: Graph = graph.build()?;
        // A replay queued behind long work, then an update: the queued replay keeps the
        // arguments it was queued with.
        let scratch = device.alloc::<u32>(ELEMENTS)?;
        queue_busy(stream, &busy, &scratch, BUSY_ITERATIONS, 1)?;
        graph.replay(stream)?;
        graph.update_launch(node, &step_launch(&step, &second, &out_second, 9, 4))?;
        graph.replay(stream)?;
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(&out_first)?,
            &affine(&first_input, 2, 1),
            &format!("{mode}: output of the replay queued before the update"),
        )?;
        check_slice_eq(
            &stream.read_to_vec(&out_second)?,
            &affine(&second_input, 9, 4),
            &format!("{mode}: output of the replay after the update"),
        )?;
    }
    Ok(())
}

fn update_misuse_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let update = update_kernel(context)?;
    let input = context.random_u32(26, ELEMENTS);
    let source = device.alloc_from(stream, &input)?;
    let destination = device.alloc::<u32>(ELEMENTS)?;
    let smaller = device.alloc::<u32>(ELEMENTS / 2)?;
    let mut graph = device.graph();
    let lane = graph.stream();
    let node = graph.launch(lane, &step_launch(&step, &source, &destination, 2, 3))?;
    let graph = graph.build()?;
    let invalid = [ErrorKind::InvalidArgument];
    let message = expect_error(
        graph.update_launch(node, &update_launch(&update, &destination, 1, 1)),
        &invalid,
        "an update that runs another kernel",
    )?;
    check(message.contains("kernel"), || {
        format!("the refusal does not name the kernel: {message}")
    })?;
    let message = expect_error(
        graph.update_launch(node, &step_launch(&step, &source, &smaller, 2, 3).workgroups(1, 1, 1)),
        &invalid,
        "an update with a view of another size",
    )?;
    check(message.contains("size"), || {
        format!("the refusal does not name the size: {message}")
    })?;
    expect_error(
        graph.update_launch(
            node,
            &Launch::new(&step)
                .buffer(&source)
                .buffer(&destination)
                .scalar(2u32)
                .scalar(3u64),
        ),
        &invalid,
        "an update whose scalars have another size",
    )?;
    expect_error(
        graph.update_launch(node, &Launch::new(&step).buffer(&source).scalar(2u32).scalar(3u32)),
        &invalid,
        "an update with a buffer missing",
    )?;
    let mut other = device.graph();
    let other_lane = other.stream();
    let other_node = other.launch(other_lane, &step_launch(&step, &source, &destination, 1, 0))?;
    expect_error(
        graph.update_launch(other_node, &step_launch(&step, &source, &destination, 1, 0)),
        &[ErrorKind::InvalidHandle],
        "an update naming a launch of another graph",
    )?;
    graph.replay(stream)?;
    check_slice_eq(
        &stream.read_to_vec(&destination)?,
        &affine(&input, 2, 3),
        "output of a replay after refused updates",
    )
}

fn dropped_while_in_flight(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let step = step_kernel(context)?;
    let input = context.random_u32(27, ELEMENTS);
    for (emulate, mode) in MODES {
        let kept = device.alloc::<u32>(ELEMENTS)?;
        {
            let source = device.alloc_from(stream, &input)?;
            let scratch = device.alloc::<u32>(ELEMENTS)?;
            let mut graph = builder(context, emulate);
            let lane = graph.stream();
            graph.launch(lane, &step_launch(&step, &source, &kept, 3, 3))?;
            graph.copy(lane, &source, &scratch)?;
            let graph = graph.build()?;
            queue_busy(stream, &busy, &scratch, BUSY_ITERATIONS, 2)?;
            graph.replay(stream)?;
            // The graph, its source and its scratch buffer all go here, the replay still queued.
        }
        stream.synchronize()?;
        check_slice_eq(
            &stream.read_to_vec(&kept)?,
            &affine(&input, 3, 3),
            &format!("{mode}: output of a replay whose graph and source were dropped while it was queued"),
        )?;
    }
    Ok(())
}

fn failure_sticks_to_the_stream(context: &TestContext) -> TestResult {
    let device = context.device();
    if !context.info().kernel_formats.contains(&KernelFormat::CPU_BUILTIN) {
        return Err(Verdict::skip(
            "WGSL has no kernel that fails portably (out-of-bounds accesses are defined); this test needs the \
             reference device's built-in `fault` kernel",
        ));
    }
    let module = device.load_module(KernelFormat::CPU_BUILTIN, b"fault\n")?;
    let fault = module.kernel("fault")?;
    for (emulate, mode) in MODES {
        let stream = device.create_stream()?;
        let buffer = device.alloc::<u32>(16)?;
        let mut graph = builder(context, emulate);
        let lane = graph.stream();
        graph.fill(lane, &buffer, 1u32)?;
        graph.launch(lane, &Launch::new(&fault))?;
        graph.fill(lane, &buffer, 2u32)?;
        let graph = graph.build()?;
        // Replayed op by op, the enqueue after the fault may already see it, as the same eager
        // enqueue would: then the replay itself returns the error.
        if let Err(error) = graph.replay(&stream) {
            check_eq(
                error.kind(),
                ErrorKind::KernelFault,
                &format!("{mode}: kind of the replay's own error"),
            )?;
        }
        let error = match stream.synchronize() {
            Err(error) => error,
            Ok(()) => {
                return Err(Verdict::fail(format!(
                    "{mode}: a replay of a failing kernel synchronized cleanly"
                )))
            }
        };
        check_eq(
            error.kind(),
            ErrorKind::KernelFault,
            &format!("{mode}: kind of the replay's error"),
        )?;
        let again = expect_error(
            graph.replay(&stream),
            &[ErrorKind::KernelFault],
            &format!("{mode}: a replay on the failed stream"),
        )?;
        check(again == error.message(), || {
            format!("{mode}: a later replay returned another error: {again}")
        })?;
        let other = device.create_stream()?;
        let out = other.read_to_vec(&buffer)?;
        check(out.iter().all(|&value| value == 1), || {
            format!("{mode}: the fill after the failing kernel ran anyway: {out:?}")
        })?;
    }
    Ok(())
}

fn build_misuse_refused(context: &TestContext) -> TestResult {
    let device = context.device();
    expect_error(
        device.graph().build(),
        &[ErrorKind::InvalidArgument],
        "a graph with no streams",
    )?;
    let mut graph = device.graph();
    let lane = graph.stream();
    let event = graph.event();
    let message = expect_error(
        graph.wait(lane, event),
        &[ErrorKind::InvalidArgument],
        "a wait before any record",
    )?;
    check(message.contains("record"), || {
        format!("the refusal does not say the event was never recorded: {message}")
    })?;
    let mut other = device.graph();
    let other_lane = other.stream();
    let other_event = other.event();
    let buffer = device.alloc::<u32>(4)?;
    expect_error(
        graph.fill(other_lane, &buffer, 0u32),
        &[ErrorKind::InvalidHandle],
        "a fill on a stream of another graph",
    )?;
    other.record(other_lane, other_event)?;
    expect_error(
        graph.wait(lane, other_event),
        &[ErrorKind::InvalidHandle],
        "a wait for an event of another graph",
    )?;
    Ok(())
}

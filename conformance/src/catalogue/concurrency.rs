//! The `concurrency` area: the API used from several threads at once, as a multi-threaded
//! application would: each thread with its own stream, threads sharing a stream, a module or
//! an event, and allocating and freeing side by side.

use super::streams::{
    affine, busy_expected, busy_kernel, queue_busy, queue_step, queue_update, step_kernel, update_kernel, zeros,
    SlowWriter, BUSY_ELEMENTS, STEP,
};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check_eq, check_slice_eq, TestCase, TestResult, Verdict};
use std::sync::mpsc;
use std::thread::ScopedJoinHandle;
use xhal::{Launch, Stream};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "concurrency.streams.thread_per_stream",
            "8 threads, each queueing writes, kernels, fills and copies on its own stream, all get their own results",
            thread_per_stream
        ),
        test_case!(
            "concurrency.streams.shared_stream",
            "launches queued on one stream from 4 threads at once all run: a counter counts every one",
            shared_stream
        ),
        test_case!(
            "concurrency.alloc.threads_allocate_and_free",
            "4 threads allocating, using and freeing buffers at once keep their data and leak nothing",
            threads_allocate_and_free
        ),
        test_case!(
            "concurrency.launch.shared_module",
            "8 threads launching kernels of one shared module, each on its own stream, get correct results",
            shared_module
        ),
        test_case!(
            "concurrency.modules.load_in_threads",
            "4 threads each loading a module and launching from it at once get correct results",
            load_in_threads
        ),
        test_case!(
            "concurrency.events.record_and_wait_in_different_threads",
            "an event recorded in one thread and waited on by a stream in another orders their work",
            record_and_wait_in_different_threads
        ),
        test_case!(
            "concurrency.events.host_waits_from_many_threads",
            "8 threads waiting on one event from the host all return once the work is done",
            host_waits_from_many_threads
        ),
        test_case!(
            "concurrency.device.opened_in_threads",
            "4 threads that each open the device themselves can each use it correctly at once",
            opened_in_threads
        ),
    ]
}

/// Joins every thread, failing with the first failure or panic.
fn join_all(handles: Vec<ScopedJoinHandle<'_, TestResult>>) -> TestResult {
    let mut first_failure = None;
    for (index, handle) in handles.into_iter().enumerate() {
        let outcome = match handle.join() {
            Ok(outcome) => outcome,
            Err(_) => Err(Verdict::fail(format!("thread {index} panicked"))),
        };
        if let Err(verdict) = outcome {
            first_failure.get_or_insert(verdict);
        }
    }
    first_failure.map_or(Ok(()), Err)
}

/// Counts launches: one invocation adds one.
const INCREMENT: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: array<u32>;

@compute @workgroup_size(1)
fn increment() {
    counter[0] = counter[0] + 1u;
}
"#;

fn thread_per_stream(context: &TestContext) -> TestResult {
    const THREADS: u32 = 8;
    let device = context.device();
    let step = step_kernel(context)?;
    let update = update_kernel(context)?;
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                let (step, update) = (&step, &update);
                let data = context.random_u32(80 + u64::from(thread), 500);
                scope.spawn(move || -> TestResult {
                    let stream = device.create_stream()?;
                    let a = device.alloc::<u32>(data.len())?;
                    let b = device.alloc::<u32>(data.len())?;
                    let mut expected = data.clone();
                    stream.write_owned(&a, data)?;
                    for round in 0..10 {
                        queue_step(&stream, step, &a, &b, thread + 2, round)?;
                        queue_update(&stream, update, &b, 3, thread)?;
                        stream.copy(&b, &a)?;
                        expected = affine(&affine(&expected, thread + 2, round), 3, thread);
                    }
                    stream.fill(a.slice(..3), thread)?;
                    expected[..3].fill(thread);
                    check_slice_eq(
                        &stream.read_to_vec(&a)?,
                        &expected,
                        &format!("thread {thread}'s result"),
                    )
                })
            })
            .collect();
        join_all(handles)
    })
}

fn shared_stream(context: &TestContext) -> TestResult {
    const THREADS: u32 = 4;
    const LAUNCHES: u32 = 100;
    let device = context.device();
    let stream = context.stream();
    let increment = context.load_wgsl("increment", INCREMENT)?.kernel("increment")?;
    let counter = device.alloc_from(stream, &[0u32])?;
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|_| {
                let (increment, counter) = (&increment, &counter);
                let stream: Stream = stream.clone();
                scope.spawn(move || -> TestResult {
                    for _ in 0..LAUNCHES {
                        stream.launch(&Launch::new(increment).buffer(counter))?;
                    }
                    Ok(())
                })
            })
            .collect();
        join_all(handles)
    })?;
    check_eq(
        stream.read_to_vec(&counter)?,
        vec![THREADS * LAUNCHES],
        "the counter after 4 threads each queued 100 increments",
    )
}

fn threads_allocate_and_free(context: &TestContext) -> TestResult {
    const THREADS: u64 = 4;
    let device = context.device();
    let before = device.memory_allocated();
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                let pool = context.random_bytes(90 + thread, 20_000);
                scope.spawn(move || -> TestResult {
                    let stream = device.create_stream()?;
                    let mut live = Vec::new();
                    for cycle in 0..60usize {
                        let len = 1 + (cycle * 131 + thread as usize * 17) % 9000;
                        let start = (cycle * 29) % 10_000;
                        let buffer = device.alloc::<u8>(len)?;
                        stream.write(&buffer, &pool[start..start + len])?;
                        live.push((buffer, start, len));
                        // Keep a few alive across cycles so frees and allocations interleave.
                        if live.len() > 4 {
                            let (buffer, start, len) = live.remove(cycle % 4);
                            let back = stream.read_to_vec(&buffer)?;
                            check_slice_eq(
                                &back,
                                &pool[start..start + len],
                                &format!("thread {thread}, a buffer of {len} bytes"),
                            )?;
                        }
                    }
                    for (buffer, start, len) in live {
                        check_slice_eq(
                            &stream.read_to_vec(&buffer)?,
                            &pool[start..start + len],
                            &format!("thread {thread}, a buffer of {len} bytes"),
                        )?;
                    }
                    Ok(())
                })
            })
            .collect();
        join_all(handles)
    })?;
    check_eq(
        device.memory_allocated(),
        before,
        "bytes allocated once every thread freed its buffers",
    )
}

fn shared_module(context: &TestContext) -> TestResult {
    const THREADS: u32 = 8;
    let device = context.device();
    let busy = busy_kernel(context)?;
    let update = update_kernel(context)?;
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                let (busy, update) = (&busy, &update);
                scope.spawn(move || -> TestResult {
                    let stream = device.create_stream()?;
                    let out = device.alloc::<u32>(64)?;
                    let mut expected = busy_expected(64, 200, thread);
                    queue_busy(&stream, busy, &out, 200, thread)?;
                    for round in 0..20 {
                        queue_update(&stream, update, &out, thread + 1, round)?;
                        expected = affine(&expected, thread + 1, round);
                    }
                    check_slice_eq(
                        &stream.read_to_vec(&out)?,
                        &expected,
                        &format!("thread {thread}'s result"),
                    )
                })
            })
            .collect();
        join_all(handles)
    })
}

fn load_in_threads(context: &TestContext) -> TestResult {
    const THREADS: u32 = 4;
    context.require_wgsl_kernels()?;
    let device = context.device();
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                scope.spawn(move || -> TestResult {
                    let stream = device.create_stream()?;
                    let mut modules = Vec::new();
                    for _ in 0..3 {
                        modules.push(
                            device
                                .load_wgsl(STEP)
                                .map_err(|error| Verdict::fail(format!("thread {thread}: loading failed: {error}")))?,
                        );
                    }
                    let data: Vec<u32> = (0..128).map(|index| index * (thread + 1)).collect();
                    let source = device.alloc_from(&stream, &data)?;
                    let destination = device.alloc::<u32>(128)?;
                    let mut expected = data.clone();
                    for (index, module) in modules.iter().enumerate() {
                        let kernel = module.kernel("step")?;
                        queue_step(&stream, &kernel, &source, &destination, thread + 2, index as u32)?;
                        stream.copy(&destination, &source)?;
                        expected = affine(&expected, thread + 2, index as u32);
                    }
                    check_slice_eq(
                        &stream.read_to_vec(&source)?,
                        &expected,
                        &format!("thread {thread}'s result"),
                    )
                })
            })
            .collect();
        join_all(handles)
    })
}

fn record_and_wait_in_different_threads(context: &TestContext) -> TestResult {
    let device = context.device();
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let copy = zeros(context, BUSY_ELEMENTS)?;
    let (sender, receiver) = mpsc::channel();
    std::thread::scope(|scope| {
        let (writer, out, copy) = (&writer, &out, &copy);
        let producer = scope.spawn(move || -> TestResult {
            let stream = device.create_stream()?;
            let event = device.create_event()?;
            writer.queue(&stream, out, 81)?;
            stream.record(&event)?;
            sender
                .send(event)
                .map_err(|_| Verdict::fail("the consumer thread went away"))?;
            // Keep the stream until its work is done, so the test does not rely on drop.
            stream.synchronize()?;
            Ok(())
        });
        let consumer = scope.spawn(move || -> TestResult {
            let stream = device.create_stream()?;
            let event = receiver
                .recv()
                .map_err(|_| Verdict::fail("the producer thread sent no event"))?;
            stream.wait(&event)?;
            stream.copy(out, copy)?;
            check_slice_eq(
                &stream.read_to_vec(copy)?,
                &SlowWriter::expected(BUSY_ELEMENTS, 81),
                "the consumer thread's copy",
            )
        });
        join_all(vec![producer, consumer])
    })
}

fn host_waits_from_many_threads(context: &TestContext) -> TestResult {
    const THREADS: usize = 8;
    let device = context.device();
    let writer = SlowWriter::new(context)?;
    let out = zeros(context, BUSY_ELEMENTS)?;
    let producer = device.create_stream()?;
    let event = device.create_event_without_timing()?;
    writer.queue(&producer, &out, 82)?;
    producer.record(&event)?;
    let expected = SlowWriter::expected(BUSY_ELEMENTS, 82);
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                let (event, out, expected) = (event.clone(), &out, &expected);
                scope.spawn(move || -> TestResult {
                    event.synchronize()?;
                    check_eq(
                        event.query()?,
                        true,
                        &format!("thread {thread}: query after the host wait"),
                    )?;
                    let reader = device.create_stream()?;
                    check_slice_eq(
                        &reader.read_to_vec(out)?,
                        expected,
                        &format!("thread {thread}: the output after the host wait"),
                    )
                })
            })
            .collect();
        join_all(handles)
    })
}

fn opened_in_threads(context: &TestContext) -> TestResult {
    const THREADS: u32 = 4;
    std::thread::scope(|scope| {
        let handles = (0..THREADS)
            .map(|thread| {
                scope.spawn(move || -> TestResult {
                    let device = context.reopen()?;
                    let stream = device.create_stream()?;
                    let data: Vec<u32> = (0..1000).map(|index| index ^ (thread << 16)).collect();
                    let buffer = device.alloc_from(&stream, &data)?;
                    stream.fill(buffer.slice(500..500 + 10), thread)?;
                    let mut expected = data;
                    expected[500..510].fill(thread);
                    check_slice_eq(
                        &stream.read_to_vec(&buffer)?,
                        &expected,
                        &format!("thread {thread}'s buffer"),
                    )
                })
            })
            .collect();
        join_all(handles)
    })
}

//! The `stress` area: the same operations as elsewhere, many times over: thousands of small
//! launches, copies and records, a thousand live buffers, long chains of events across
//! streams, and many modules and streams made and dropped. Every count is checked exactly.

use super::streams::{affine, queue_update, update_kernel, STEP};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check_eq, check_slice_eq, TestCase, TestResult, Verdict};
use xhal::{Buffer, Launch};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "stress.launches.ten_thousand_increments",
            "10,000 launches of a kernel adding one to a counter leave exactly 10,000",
            ten_thousand_increments
        ),
        test_case!(
            "stress.alloc.thousand_live_buffers",
            "1,000 buffers alive at once each keep their own distinct contents",
            thousand_live_buffers
        ),
        test_case!(
            "stress.alloc.churn",
            "5,000 allocations and frees of varied sizes, with data checks, leave nothing allocated",
            alloc_churn
        ),
        test_case!(
            "stress.events.thousand_chained_across_streams",
            "1,000 events chaining updates round-robin across 4 streams apply every update in order",
            thousand_chained_across_streams
        ),
        test_case!(
            "stress.events.one_event_recorded_many_times",
            "one event recorded 2,000 times, each record waited on by another stream, orders every copy after its fill",
            one_event_recorded_many_times
        ),
        test_case!(
            "stress.modules.load_and_drop",
            "100 modules loaded, used and dropped one after another each compute correctly",
            load_and_drop_modules
        ),
        test_case!(
            "stress.modules.many_alive",
            "50 distinct modules alive at once each run their own kernel correctly",
            many_modules_alive
        ),
        test_case!(
            "stress.streams.create_and_destroy",
            "200 streams created, used and destroyed one after another each do correct work",
            create_and_destroy_streams
        ),
        test_case!(
            "stress.copies.ten_thousand_small",
            "10,000 single-element copies queued back to back move every element to its place",
            ten_thousand_small_copies
        ),
    ]
}

const INCREMENT: &str = r#"
@group(0) @binding(0) var<storage, read_write> counter: array<u32>;

@compute @workgroup_size(1)
fn increment() {
    counter[0] = counter[0] + 1u;
}
"#;

fn ten_thousand_increments(context: &TestContext) -> TestResult {
    const LAUNCHES: u32 = 10_000;
    let stream = context.stream();
    let increment = context.load_wgsl("increment", INCREMENT)?.kernel("increment")?;
    let counter = context.device().alloc_from(stream, &[0u32])?;
    for _ in 0..LAUNCHES {
        stream.launch(&Launch::new(&increment).buffer(&counter))?;
    }
    check_eq(
        stream.read_to_vec(&counter)?,
        vec![LAUNCHES],
        "the counter after 10,000 launches",
    )
}

fn thousand_live_buffers(context: &TestContext) -> TestResult {
    const BUFFERS: u32 = 1_000;
    const ELEMENTS: usize = 33;
    let device = context.device();
    let stream = context.stream();
    let mut buffers: Vec<Buffer<u32>> = Vec::with_capacity(BUFFERS as usize);
    for index in 0..BUFFERS {
        let buffer = device.alloc::<u32>(ELEMENTS)?;
        stream.fill(buffer.slice(..ELEMENTS), index.wrapping_mul(0x9e37_79b9))?;
        buffers.push(buffer);
    }
    // Read in an order unlike the allocation order.
    for step in 0..BUFFERS {
        let index = (step * 7) % BUFFERS;
        let value = index.wrapping_mul(0x9e37_79b9);
        check_slice_eq(
            &stream.read_to_vec(&buffers[index as usize])?,
            &[value; ELEMENTS],
            &format!("buffer {index} of 1,000"),
        )?;
    }
    Ok(())
}

fn alloc_churn(context: &TestContext) -> TestResult {
    const CYCLES: usize = 5_000;
    let device = context.device();
    let stream = context.stream();
    let before = device.memory_allocated();
    let mut live: Vec<(Buffer<u16>, u16, usize)> = Vec::new();
    for cycle in 0..CYCLES {
        let len = 1 + (cycle * 7919) % 3000;
        let value = cycle as u16;
        let buffer = device.alloc::<u16>(len)?;
        stream.fill(buffer.slice(..len), value)?;
        live.push((buffer, value, len));
        if live.len() >= 16 || cycle + 1 == CYCLES {
            // Check the first and the last element of each, then free them all.
            for (buffer, value, len) in live.drain(..) {
                let mut ends = [0u16; 2];
                stream.read(&buffer, &mut ends[..1])?;
                stream.read(buffer.slice(len - 1..), &mut ends[1..])?;
                check_eq(
                    ends,
                    [value; 2],
                    &format!("the ends of a {len}-element buffer filled with {value}"),
                )?;
            }
        }
    }
    check_eq(device.memory_allocated(), before, "bytes allocated after 5,000 cycles")
}

fn thousand_chained_across_streams(context: &TestContext) -> TestResult {
    const EVENTS: u32 = 1_000;
    const STREAMS: usize = 4;
    let device = context.device();
    let update = update_kernel(context)?;
    let streams = (0..STREAMS)
        .map(|_| device.create_stream())
        .collect::<xhal::Result<Vec<_>>>()?;
    let data = context.random_u32(95, 64);
    let buffer = device.alloc_from(context.stream(), &data)?;
    let mut expected = data;
    let mut previous = None;
    for link in 0..EVENTS {
        let stream = &streams[link as usize % STREAMS];
        if let Some(event) = &previous {
            stream.wait(event)?;
        }
        // Each link's constants differ, so links applied out of order or twice give other values.
        queue_update(stream, &update, &buffer, 3, link)?;
        expected = affine(&expected, 3, link);
        let event = device.create_event_without_timing()?;
        stream.record(&event)?;
        previous = Some(event);
    }
    let last = previous.ok_or_else(|| Verdict::fail("no events were recorded"))?;
    let reader = context.stream();
    reader.wait(&last)?;
    check_slice_eq(
        &reader.read_to_vec(&buffer)?,
        &expected,
        "the buffer after 1,000 chained updates",
    )
}

fn one_event_recorded_many_times(context: &TestContext) -> TestResult {
    const RECORDS: usize = 2_000;
    let device = context.device();
    let producer = device.create_stream()?;
    let consumer = device.create_stream()?;
    let source = device.alloc_from(context.stream(), &vec![0u32; RECORDS])?;
    let history = device.alloc_from(context.stream(), &vec![0u32; RECORDS])?;
    let event = device.create_event_without_timing()?;
    for round in 0..RECORDS {
        producer.fill(source.slice(round..round + 1), round as u32 + 1)?;
        producer.record(&event)?;
        consumer.wait(&event)?;
        // Copied before the fill it waited for, the slot would still hold zero.
        consumer.copy(source.slice(round..round + 1), history.slice(round..))?;
    }
    let expected: Vec<u32> = (1..=RECORDS as u32).collect();
    check_slice_eq(
        &consumer.read_to_vec(&history)?,
        &expected,
        "the slots copied after each wait on the re-recorded event",
    )
}

fn load_and_drop_modules(context: &TestContext) -> TestResult {
    const MODULES: u32 = 100;
    let device = context.device();
    let stream = context.stream();
    let source = device.alloc_from(stream, &(0..64).collect::<Vec<u32>>())?;
    let destination = device.alloc::<u32>(64)?;
    for index in 0..MODULES {
        let module = context.load_wgsl("step", STEP)?;
        let kernel = module.kernel("step")?;
        super::streams::queue_step(stream, &kernel, &source, &destination, index, 1)?;
        drop(kernel);
        drop(module);
        let expected: Vec<u32> = (0..64).map(|value: u32| value.wrapping_mul(index) + 1).collect();
        check_slice_eq(
            &stream.read_to_vec(&destination)?,
            &expected,
            &format!("module {index}'s result"),
        )?;
    }
    Ok(())
}

/// A kernel whose constant differs per module, so each module is distinct code.
fn constant_kernel(value: u32) -> String {
    format!(
        "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n\n\
         @compute @workgroup_size(64)\n\
         fn store(@builtin(global_invocation_id) id: vec3<u32>) {{\n\
         \x20   if id.x < arrayLength(&out) {{\n\
         \x20       out[id.x] = {value}u + id.x;\n\
         \x20   }}\n\
         }}\n"
    )
}

fn many_modules_alive(context: &TestContext) -> TestResult {
    const MODULES: u32 = 50;
    let device = context.device();
    let stream = context.stream();
    let mut kernels = Vec::with_capacity(MODULES as usize);
    for index in 0..MODULES {
        let module = context.load_wgsl(&format!("constant {index}"), &constant_kernel(1000 * index))?;
        kernels.push(module.kernel("store")?);
    }
    let outputs = (0..MODULES)
        .map(|_| device.alloc::<u32>(64))
        .collect::<xhal::Result<Vec<_>>>()?;
    // Launch in reverse so a backend that mixes up modules cannot pass by luck of order.
    for (kernel, out) in kernels.iter().zip(&outputs).rev() {
        stream.launch(&Launch::new(kernel).buffer(out))?;
    }
    for (index, out) in outputs.iter().enumerate() {
        let expected: Vec<u32> = (0..64).map(|lane| 1000 * index as u32 + lane).collect();
        check_slice_eq(
            &stream.read_to_vec(out)?,
            &expected,
            &format!("module {index}'s output"),
        )?;
    }
    Ok(())
}

fn create_and_destroy_streams(context: &TestContext) -> TestResult {
    const STREAMS: u32 = 200;
    let device = context.device();
    let buffer = device.alloc::<u32>(64)?;
    for index in 0..STREAMS {
        let stream = device.create_stream()?;
        stream.fill(buffer.slice(..64), index)?;
        stream.fill(buffer.slice(63..63 + 1), !index)?;
        // Every other stream is dropped rather than destroyed: both must finish its work.
        if index % 2 == 0 {
            stream.destroy()?;
        } else {
            drop(stream);
        }
        let mut ends = [0u32; 2];
        context.stream().read(&buffer, &mut ends[..1])?;
        context.stream().read(buffer.slice(63..), &mut ends[1..])?;
        check_eq(ends, [index, !index], &format!("the buffer after stream {index}"))?;
    }
    Ok(())
}

fn ten_thousand_small_copies(context: &TestContext) -> TestResult {
    const ELEMENTS: usize = 10_000;
    let device = context.device();
    let stream = context.stream();
    let data = context.random_u32(96, ELEMENTS);
    let source = device.alloc_from(stream, &data)?;
    let destination = device.alloc_from(stream, &vec![0u32; ELEMENTS])?;
    // Reverse the buffer one element at a time.
    for index in 0..ELEMENTS {
        stream.copy(
            source.slice(index..index + 1),
            destination.slice(ELEMENTS - 1 - index..),
        )?;
    }
    let expected: Vec<u32> = data.iter().rev().copied().collect();
    check_slice_eq(
        &stream.read_to_vec(&destination)?,
        &expected,
        "the buffer reversed by 10,000 copies",
    )
}

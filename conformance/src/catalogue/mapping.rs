//! Host mapping (ABI 1.4 `buffer_map` and `buffer_unmap`), part of the `memory` area: on a
//! device whose memory the host can address, a mapping shows what completed work wrote, the
//! work queued after it sees what the host wrote, and the two never overlap in time: a mapping
//! is refused while queued work may use the buffer, and work is refused while it is mapped.

use super::streams::{busy_kernel, queue_busy, step_kernel, BUSY_ITERATIONS};
use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_slice_eq, expect_error, Requirement, TestCase, TestResult, Verdict};
use xhal::{ErrorKind, Features, Launch};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "memory.map.reads_completed_writes",
            "a read mapping of a buffer, whole or a range, shows exactly what completed work wrote",
            Requirement::features(Features::HOST_MAPPABLE),
            reads_completed_writes
        ),
        test_case!(
            "memory.map.writes_reach_later_work",
            "what the host writes through a mapping is what a copy and a kernel queued after it read",
            Requirement::features(Features::HOST_MAPPABLE),
            writes_reach_later_work
        ),
        test_case!(
            "memory.map.refused_while_work_is_queued",
            "mapping a buffer that queued work may still use is refused until its stream is synchronized",
            Requirement::features(Features::HOST_MAPPABLE),
            refused_while_work_is_queued
        ),
        test_case!(
            "memory.map.work_refused_while_mapped",
            "launches, copies, fills and transfers naming a mapped buffer are refused, and accepted once it is unmapped",
            Requirement::features(Features::HOST_MAPPABLE),
            work_refused_while_mapped
        ),
        test_case!(
            "memory.map.follows_the_feature",
            "a mapping works exactly where the device claims host_mappable, and is refused as unsupported, naming \
             the feature, where it does not",
            follows_the_feature
        ),
    ]
}

fn reads_completed_writes(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let data = context.random_u32(31, 4099);
    let buffer = device.alloc_from(stream, &data)?;
    stream.synchronize()?;
    {
        let whole = buffer.map()?;
        check_slice_eq(&whole, &data, "a mapping of the whole buffer")?;
        // Several read mappings may live at once.
        let range = buffer.slice(1000..1037).map()?;
        check_slice_eq(&range, &data[1000..1037], "a mapping of elements 1000..1037")?;
    }
    let empty = buffer.slice(7..7).map()?;
    check(empty.is_empty(), || {
        "a mapping of no element holds elements".to_string()
    })
}

fn writes_reach_later_work(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let data = context.random_u32(32, 1000);
    let mut buffer = device.alloc::<u32>(1000)?;
    stream.fill(&buffer, 0u32)?;
    stream.synchronize()?;
    buffer.map_mut(..)?.copy_from_slice(&data);
    let mut edited = data.clone();
    {
        let mut range = buffer.map_mut(10..20)?;
        for (index, value) in range.iter_mut().enumerate() {
            *value = index as u32 * 3;
        }
        edited[10..20].copy_from_slice(&range);
    }
    let copied = device.alloc::<u32>(1000)?;
    stream.copy(&buffer, &copied)?;
    let stepped = device.alloc::<u32>(1000)?;
    stream.launch(
        &Launch::new(&step)
            .workgroups(16, 1, 1)
            .buffer(&buffer)
            .buffer(&stepped)
            .scalar(2u32)
            .scalar(1u32),
    )?;
    check_slice_eq(&stream.read_to_vec(&copied)?, &edited, "a copy of the mapped writes")?;
    let expected: Vec<u32> = edited
        .iter()
        .map(|value| value.wrapping_mul(2).wrapping_add(1))
        .collect();
    check_slice_eq(
        &stream.read_to_vec(&stepped)?,
        &expected,
        "a kernel's view of the mapped writes",
    )
}

fn refused_while_work_is_queued(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let buffer = device.alloc::<u32>(256)?;
    queue_busy(stream, &busy, &buffer, BUSY_ITERATIONS, 9)?;
    let message = expect_error(
        buffer.map(),
        &[ErrorKind::InvalidArgument],
        "a mapping while a kernel is queued",
    )?;
    check(message.contains("synchronize"), || {
        format!("the refusal does not say what to do: {message}")
    })?;
    stream.synchronize()?;
    let mapped = buffer.map()?;
    check(mapped.len() == 256, || {
        format!("the mapping holds {} elements, not 256", mapped.len())
    })
}

fn work_refused_while_mapped(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let buffer = device.alloc_from(stream, &[5u32; 64])?;
    let other = device.alloc::<u32>(64)?;
    stream.synchronize()?;
    let invalid = [ErrorKind::InvalidArgument];
    {
        let _mapped = buffer.map()?;
        let launch = Launch::new(&step)
            .workgroups(1, 1, 1)
            .buffer(&buffer)
            .buffer(&other)
            .scalar(1u32)
            .scalar(0u32);
        let message = expect_error(stream.launch(&launch), &invalid, "a launch reading a mapped buffer")?;
        check(message.contains("mapped"), || {
            format!("the refusal does not say the buffer is mapped: {message}")
        })?;
        expect_error(stream.copy(&buffer, &other), &invalid, "a copy from a mapped buffer")?;
        expect_error(stream.fill(&buffer, 0u32), &invalid, "a fill of a mapped buffer")?;
        expect_error(
            stream.write(&buffer, &[1u32; 64]),
            &invalid,
            "a write to a mapped buffer",
        )?;
        expect_error(stream.read_to_vec(&buffer), &invalid, "a read of a mapped buffer")?;
    }
    stream.copy(&buffer, &other)?;
    check_slice_eq(
        &stream.read_to_vec(&other)?,
        &[5u32; 64],
        "a copy after the mapping was dropped",
    )
}

fn follows_the_feature(context: &TestContext) -> TestResult {
    let buffer = context.device().alloc::<u32>(16)?;
    if context.info().features.contains(Features::HOST_MAPPABLE) {
        context.stream().fill(&buffer, 7u32)?;
        context.stream().synchronize()?;
        let mapped = buffer.map().map_err(|error| {
            Verdict::fail(format!(
                "the device claims host_mappable, but a mapping was refused: {error}"
            ))
        })?;
        return check_slice_eq(&mapped, &[7u32; 16], "a mapping on a device that claims host_mappable");
    }
    let message = expect_error(
        buffer.map(),
        &[ErrorKind::Unsupported],
        "a mapping on a device without host_mappable",
    )?;
    check(message.contains("host_mappable"), || {
        format!("the refusal does not name the feature: {message}")
    })
}

/// Host memory for transfers (ABI 1.4 `host_memory_allocate`, ordinary memory where the device
/// has none): transfers from and to it are queued without waiting, keep it alive, and keep the
/// host's hands off it until they complete.
pub(super) fn pinned_tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "memory.pinned.round_trip_without_waiting",
            "data written from pinned memory, stepped by a kernel and read back into pinned memory arrives unchanged, \
             every transfer queued without the host waiting",
            pinned_round_trip
        ),
        test_case!(
            "memory.pinned.host_waits_for_transfers",
            "pinned memory a queued read will write cannot be read, nor memory a queued write reads be changed, until \
             the stream is synchronized",
            pinned_host_waits
        ),
        test_case!(
            "memory.pinned.dropped_while_queued",
            "pinned memory dropped while a write from it is queued behind long work still arrives",
            pinned_dropped_while_queued
        ),
    ]
}

fn pinned_round_trip(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let step = step_kernel(context)?;
    let data = context.random_u32(41, 3000);
    let mut upload = device.alloc_pinned::<u32>(3000)?;
    upload.as_mut_slice()?.copy_from_slice(&data);
    let source = device.alloc::<u32>(3000)?;
    let stepped = device.alloc::<u32>(3000)?;
    stream.write_from_pinned(&source, &upload)?;
    stream.launch(
        &Launch::new(&step)
            .workgroups(47, 1, 1)
            .buffer(&source)
            .buffer(&stepped)
            .scalar(3u32)
            .scalar(5u32),
    )?;
    let mut download = device.alloc_pinned::<u32>(3000)?;
    stream.read_into_pinned(&stepped, &mut download)?;
    stream.synchronize()?;
    let expected: Vec<u32> = data.iter().map(|value| value.wrapping_mul(3).wrapping_add(5)).collect();
    check_slice_eq(download.as_slice()?, &expected, "pinned memory after the round trip")?;
    // A view reads into the front of the pinned buffer.
    stream.read_into_pinned(source.slice(10..20), &mut download)?;
    stream.synchronize()?;
    check_slice_eq(
        &download.as_slice()?[..10],
        &data[10..20],
        "a view read into pinned memory",
    )
}

fn pinned_host_waits(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let buffer = device.alloc::<u32>(256)?;
    let mut pinned = device.alloc_pinned::<u32>(256)?;
    queue_busy(stream, &busy, &buffer, BUSY_ITERATIONS, 3)?;
    stream.read_into_pinned(&buffer, &mut pinned)?;
    let invalid = [ErrorKind::InvalidArgument];
    let message = expect_error(
        pinned.as_slice().map(<[u32]>::len),
        &invalid,
        "reading pinned memory a queued read writes",
    )?;
    check(message.contains("synchronize"), || {
        format!("the refusal does not say what to do: {message}")
    })?;
    expect_error(
        pinned.as_mut_slice().map(|slice| slice.len()),
        &invalid,
        "changing pinned memory a queued read writes",
    )?;
    stream.synchronize()?;
    check_slice_eq(
        pinned.as_slice()?,
        &super::streams::busy_expected(256, BUSY_ITERATIONS, 3),
        "pinned memory once the read completed",
    )?;
    queue_busy(stream, &busy, &buffer, BUSY_ITERATIONS, 4)?;
    stream.write_from_pinned(&buffer, &pinned)?;
    // Reading memory a queued write only reads is fine; changing it is not.
    check(pinned.as_slice().is_ok(), || {
        "reading pinned memory a queued write reads was refused".to_string()
    })?;
    expect_error(
        pinned.as_mut_slice().map(|slice| slice.len()),
        &invalid,
        "changing pinned memory a queued write reads",
    )?;
    stream.synchronize()?;
    check(pinned.as_mut_slice().is_ok(), || {
        "pinned memory stayed refused after a synchronize".to_string()
    })
}

fn pinned_dropped_while_queued(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let busy = busy_kernel(context)?;
    let data = context.random_u32(42, 256);
    let target = device.alloc::<u32>(256)?;
    let scratch = device.alloc::<u32>(256)?;
    {
        let mut pinned = device.alloc_pinned::<u32>(256)?;
        pinned.as_mut_slice()?.copy_from_slice(&data);
        queue_busy(stream, &busy, &scratch, BUSY_ITERATIONS, 5)?;
        stream.write_from_pinned(&target, &pinned)?;
    }
    stream.synchronize()?;
    check_slice_eq(
        &stream.read_to_vec(&target)?,
        &data,
        "a write from pinned memory dropped while it was queued",
    )
}

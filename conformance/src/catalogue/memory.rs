//! The `memory` area: allocation, and write, read, copy and fill at every size and offset.

use super::test_case;
use crate::context::TestContext;
use crate::test_case::{check, check_eq, check_slice_eq, expect_error, TestCase, TestResult, Verdict};
use xhal::{Buffer, Device, ErrorKind, Launch};

pub(super) fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            "memory.roundtrip.random_u32",
            "1 MiB of random words written and read back arrive unchanged",
            roundtrip_random_u32
        ),
        test_case!(
            "memory.copy.out_of_bounds",
            "a copy reaching past the end of a buffer is refused as out of bounds",
            copy_out_of_bounds
        ),
        test_case!(
            "memory.alloc.zero_length_is_empty",
            "a zero-length buffer is empty, has no bytes and takes no device memory",
            zero_length_is_empty
        ),
        test_case!(
            "memory.alloc.zero_length_operations_are_no_ops",
            "writes, reads, copies and fills of zero elements succeed and change nothing",
            zero_length_operations_are_no_ops
        ),
        test_case!(
            "memory.alloc.zero_length_buffer_access_out_of_bounds",
            "any non-empty access to a zero-length buffer is refused as out of bounds",
            zero_length_buffer_access_out_of_bounds
        ),
        test_case!(
            "memory.alloc.zero_length_buffer_not_a_kernel_argument",
            "a zero-length buffer bound to a kernel is refused, since it has no memory to bind",
            zero_length_buffer_not_a_kernel_argument
        ),
        test_case!(
            "memory.alloc.reports_length_and_size",
            "a buffer reports the element count it was allocated with and its size in bytes",
            reports_length_and_size
        ),
        test_case!(
            "memory.alloc.zero_sized_element_refused",
            "a buffer of a zero-sized element type is refused as an invalid argument",
            zero_sized_element_refused
        ),
        test_case!(
            "memory.alloc.byte_size_overflow_refused",
            "an allocation whose byte size overflows 64 bits is refused, not truncated",
            byte_size_overflow_refused
        ),
        test_case!(
            "memory.roundtrip.one_byte",
            "a one-byte buffer holds each value written to it",
            roundtrip_one_byte
        ),
        test_case!(
            "memory.roundtrip.three_bytes",
            "a three-byte buffer round-trips its bytes exactly",
            roundtrip_three_bytes
        ),
        test_case!(
            "memory.roundtrip.odd_4097_bytes",
            "a 4097-byte buffer round-trips random bytes, the last one included",
            roundtrip_4097_bytes
        ),
        test_case!(
            "memory.roundtrip.large",
            "64 MiB (or a quarter of the largest allocation, if smaller) round-trips unchanged",
            roundtrip_large
        ),
        test_case!(
            "memory.roundtrip.element_types",
            "buffers of 1-, 2-, 4-, 8- and 16-byte elements round-trip every bit pattern given",
            roundtrip_element_types
        ),
        test_case!(
            "memory.roundtrip.overwrite",
            "each of several random patterns written over the last reads back exactly",
            roundtrip_overwrite
        ),
        test_case!(
            "memory.roundtrip.write_owned",
            "an asynchronous write of owned data is read back unchanged",
            roundtrip_write_owned
        ),
        test_case!(
            "memory.write.odd_offsets",
            "writes of odd lengths at odd byte offsets change exactly the bytes they cover",
            write_odd_offsets
        ),
        test_case!(
            "memory.read.odd_offsets",
            "reads of odd lengths at odd byte offsets return exactly the bytes they cover",
            read_odd_offsets
        ),
        test_case!(
            "memory.copy.odd_offsets",
            "copies of odd lengths between odd byte offsets of two buffers move exactly those bytes",
            copy_odd_offsets
        ),
        test_case!(
            "memory.copy.whole_buffer",
            "a copy of a whole buffer copies every element, and refuses a destination too short to hold it",
            copy_whole_buffer
        ),
        test_case!(
            "memory.copy.destination_out_of_bounds",
            "a copy writing past the end of its destination is refused and writes nothing",
            copy_destination_out_of_bounds
        ),
        test_case!(
            "memory.copy.overlap_forward",
            "a copy within one buffer to a higher, overlapping range behaves like memmove",
            copy_overlap_forward
        ),
        test_case!(
            "memory.copy.overlap_backward",
            "a copy within one buffer to a lower, overlapping range behaves like memmove",
            copy_overlap_backward
        ),
        test_case!(
            "memory.copy.overlap_words",
            "overlapping copies of 4-byte elements one element apart behave like memmove",
            copy_overlap_words
        ),
        test_case!(
            "memory.copy.onto_itself",
            "a copy of a range onto itself leaves the buffer unchanged",
            copy_onto_itself
        ),
        test_case!(
            "memory.fill.one_byte_pattern",
            "1-byte fills at odd offsets and lengths set exactly their bytes and nothing else",
            fill_one_byte_pattern
        ),
        test_case!(
            "memory.fill.two_byte_pattern",
            "2-byte fills at odd element offsets set exactly their elements and nothing else",
            fill_two_byte_pattern
        ),
        test_case!(
            "memory.fill.four_byte_pattern",
            "4-byte fills of integers and floats at odd element offsets set exactly their elements",
            fill_four_byte_pattern
        ),
        test_case!(
            "memory.fill.eight_byte_pattern_refused",
            "a fill with an 8-byte pattern is refused as an invalid argument and changes nothing",
            fill_eight_byte_pattern_refused
        ),
        test_case!(
            "memory.oom.larger_than_max_allocation",
            "an allocation above the device's largest allocation is refused as out of memory",
            oom_larger_than_max_allocation
        ),
        test_case!(
            "memory.oom.larger_than_total_memory",
            "an allocation above the device's total memory is refused as out of memory",
            oom_larger_than_total_memory
        ),
        test_case!(
            "memory.oom.device_works_after_refusal",
            "after refusing an allocation the device allocates, writes and reads as before",
            oom_device_works_after_refusal
        ),
        test_case!(
            "memory.oom.exhaustion",
            "allocations that together exceed the device's memory end in out of memory, and the memory is usable again once freed",
            oom_exhaustion
        ),
        test_case!(
            "memory.churn.alloc_free_cycles",
            "hundreds of allocate, write, read, free cycles of varied sizes keep their data and leak nothing",
            churn_alloc_free_cycles
        ),
        test_case!(
            "memory.churn.freed_memory_reusable",
            "a buffer of up to 16 MiB freed and allocated again six times is granted each time and holds data",
            churn_freed_memory_reusable
        ),
        test_case!(
            "memory.stats.track_live_buffers",
            "memory statistics count a live buffer's bytes and stop counting them once it is freed",
            stats_track_live_buffers
        ),
        test_case!(
            "memory.misuse.read_out_of_bounds",
            "a read reaching past the end of a buffer is refused as out of bounds",
            read_out_of_bounds
        ),
        test_case!(
            "memory.misuse.write_out_of_bounds",
            "a write reaching past the end of a buffer is refused and changes nothing",
            write_out_of_bounds
        ),
        test_case!(
            "memory.misuse.fill_out_of_bounds",
            "a fill reaching past the end of a buffer is refused and changes nothing",
            fill_out_of_bounds
        ),
        test_case!(
            "memory.misuse.zero_length_past_the_end",
            "a zero-length access at the end of a buffer is fine, one past the end is out of bounds",
            zero_length_past_the_end
        ),
        test_case!(
            "memory.misuse.offset_overflow",
            "offsets and lengths whose sum overflows are refused as out of bounds, not wrapped",
            offset_overflow
        ),
        test_case!(
            "memory.misuse.copy_between_devices",
            "a copy between buffers of two different devices is refused as an invalid handle",
            copy_between_devices
        ),
    ]
}

/// Another device of the backend under test, opened, or `None` when it has only one.
pub(super) fn other_device(context: &TestContext) -> Result<Option<Device>, Verdict> {
    let target = context.target();
    let devices = target
        .devices()
        .map_err(|error| Verdict::fail(format!("cannot list the backend's devices: {error}")))?;
    match devices.iter().find(|(index, _)| *index != context.device_index()) {
        None => Ok(None),
        Some((index, _)) => Ok(Some(
            target.runtime().open(&format!("{}:{index}", target.backend_name()))?,
        )),
    }
}

/// Reads the whole buffer and compares it with `expected`.
fn check_contents<T>(context: &TestContext, buffer: &Buffer<T>, expected: &[T], what: &str) -> TestResult
where
    T: bytemuck::Pod + PartialEq + std::fmt::Debug,
{
    let back = context.stream().read_to_vec(buffer)?;
    check_slice_eq(&back, expected, what)
}

/// A buffer holding random bytes, and those bytes.
fn random_byte_buffer(context: &TestContext, seed: u64, len: usize) -> Result<(Buffer<u8>, Vec<u8>), Verdict> {
    let data = context.random_bytes(seed, len);
    let buffer = context.device().alloc_from(context.stream(), &data)?;
    Ok((buffer, data))
}

/// Bytes the device may use for one large buffer: 64 MiB, or a quarter of the largest
/// allocation or of the total memory, whichever is smallest.
fn large_size(context: &TestContext) -> usize {
    let info = context.info();
    let mut size: u64 = 64 << 20;
    for limit in [info.max_allocation_size, info.total_memory] {
        if limit > 0 {
            size = size.min(limit / 4);
        }
    }
    // Whole 8-byte words, so the buffer can be handled as u64.
    usize::try_from(size).unwrap_or(usize::MAX) & !7
}

fn roundtrip_random_u32(context: &TestContext) -> TestResult {
    let data = context.random_u32(1, 1 << 18);
    let buffer = context.device().alloc_from(context.stream(), &data)?;
    let back = context.stream().read_to_vec(&buffer)?;
    check_slice_eq(&back, &data, "read back")
}

fn copy_out_of_bounds(context: &TestContext) -> TestResult {
    let source = context.device().alloc::<u32>(16)?;
    let destination = context.device().alloc::<u32>(16)?;
    expect_error(
        context.stream().copy(source.slice(8..8 + 9), &destination),
        &[ErrorKind::OutOfBounds],
        "copying 9 elements from offset 8 of a 16-element buffer",
    )?;
    Ok(())
}

fn zero_length_is_empty(context: &TestContext) -> TestResult {
    let device = context.device();
    let before = device.memory_allocated();
    let empty = device.alloc::<f32>(0)?;
    check_eq(empty.len(), 0, "the length of a zero-length buffer")?;
    check(empty.is_empty(), || "a zero-length buffer says it is not empty".into())?;
    check_eq(empty.size_bytes(), 0, "the size of a zero-length buffer")?;
    check_eq(
        device.memory_allocated(),
        before,
        "bytes allocated with a zero-length buffer alive",
    )?;
    let many: Vec<Buffer<u8>> = (0..100).map(|_| device.alloc::<u8>(0)).collect::<xhal::Result<_>>()?;
    check_eq(
        device.memory_allocated(),
        before,
        "bytes allocated with 100 zero-length buffers alive",
    )?;
    drop(many);
    check_eq(
        context.stream().read_to_vec(&empty)?,
        Vec::<f32>::new(),
        "reading a zero-length buffer",
    )
}

fn zero_length_operations_are_no_ops(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let empty = device.alloc::<u32>(0)?;
    let data = context.random_u32(3, 16);
    let full = device.alloc_from(stream, &data)?;
    stream.write(&empty, &[])?;
    stream.write(full.slice(5..), &[])?;
    stream.write_owned(full.slice(16..), Vec::new())?;
    stream.read(&empty, &mut [])?;
    stream.read(full.slice(16..), &mut [])?;
    stream.copy(empty.slice(..0), full.slice(3..))?;
    stream.copy(full.slice(3..3), &empty)?;
    stream.copy(full.slice(..0), full.slice(7..))?;
    stream.copy(&empty, &device.alloc::<u32>(0)?)?;
    stream.fill(empty.slice(..0), 1u32)?;
    stream.fill(full.slice(9..9), 1u32)?;
    stream.synchronize()?;
    check_contents(context, &full, &data, "a buffer after zero-length operations on it")
}

fn zero_length_buffer_access_out_of_bounds(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let empty = device.alloc::<u32>(0)?;
    let full = device.alloc::<u32>(4)?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(stream.write(&empty, &[1]), &refused, "writing one element")?;
    expect_error(stream.read(&empty, &mut [0u32]), &refused, "reading one element")?;
    expect_error(stream.fill(empty.slice(..1), 1u32), &refused, "filling one element")?;
    expect_error(
        stream.copy(empty.slice(..1), &full),
        &refused,
        "copying one element out",
    )?;
    expect_error(stream.copy(full.slice(..1), &empty), &refused, "copying one element in")?;
    expect_error(
        stream.write_owned(&empty, vec![1u32]),
        &refused,
        "an asynchronous write of one element",
    )?;
    Ok(())
}

const STORE: &str = r#"
@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn store() {
    out[0] = 1u;
}
"#;

fn zero_length_buffer_not_a_kernel_argument(context: &TestContext) -> TestResult {
    let kernel = context.load_wgsl("store", STORE)?.kernel("store")?;
    let empty = context.device().alloc::<u32>(0)?;
    expect_error(
        context.stream().launch(&Launch::new(&kernel).buffer(&empty)),
        &[ErrorKind::InvalidArgument],
        "a zero-length buffer as a kernel argument",
    )?;
    let one = context.device().alloc_from(context.stream(), &[0u32])?;
    context.stream().launch(&Launch::new(&kernel).buffer(&one))?;
    check_contents(
        context,
        &one,
        &[1],
        "a one-element buffer after the kernel stored to it",
    )
}

fn reports_length_and_size(context: &TestContext) -> TestResult {
    let device = context.device();
    let bytes = device.alloc::<u8>(4097)?;
    check_eq(
        (bytes.len(), bytes.size_bytes()),
        (4097, 4097),
        "u8 buffer length and size",
    )?;
    let halves = device.alloc::<u16>(3)?;
    check_eq(
        (halves.len(), halves.size_bytes()),
        (3, 6),
        "u16 buffer length and size",
    )?;
    let floats = device.alloc::<f32>(1000)?;
    check_eq(
        (floats.len(), floats.size_bytes()),
        (1000, 4000),
        "f32 buffer length and size",
    )?;
    let vectors = device.alloc::<[u64; 2]>(7)?;
    check_eq(
        (vectors.len(), vectors.size_bytes()),
        (7, 112),
        "[u64; 2] buffer length and size",
    )?;
    check(!floats.is_empty(), || "a 1000-element buffer says it is empty".into())
}

fn zero_sized_element_refused(context: &TestContext) -> TestResult {
    expect_error(
        context.device().alloc::<()>(16),
        &[ErrorKind::InvalidArgument],
        "a buffer of 16 zero-sized elements",
    )?;
    Ok(())
}

fn byte_size_overflow_refused(context: &TestContext) -> TestResult {
    // On a 64-bit host these byte sizes overflow u64; on a smaller one they exceed any device.
    expect_error(
        context.device().alloc::<u64>(usize::MAX / 2),
        &[ErrorKind::OutOfBounds, ErrorKind::OutOfMemory],
        "an allocation of usize::MAX / 2 eight-byte elements",
    )?;
    expect_error(
        context.device().alloc::<[u32; 4]>(usize::MAX),
        &[ErrorKind::OutOfBounds, ErrorKind::OutOfMemory],
        "an allocation of usize::MAX sixteen-byte elements",
    )?;
    Ok(())
}

fn roundtrip_one_byte(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let buffer = context.device().alloc::<u8>(1)?;
    for value in [0xA5u8, 0x00, 0xFF, 0x5A] {
        stream.write(&buffer, &[value])?;
        check_contents(
            context,
            &buffer,
            &[value],
            &format!("a one-byte buffer after writing {value:#04x}"),
        )?;
    }
    Ok(())
}

fn roundtrip_three_bytes(context: &TestContext) -> TestResult {
    let (buffer, data) = random_byte_buffer(context, 4, 3)?;
    check_contents(context, &buffer, &data, "a three-byte buffer")?;
    let mut last = [0u8; 1];
    context.stream().read(buffer.slice(2..), &mut last)?;
    check_eq(last[0], data[2], "the last byte of a three-byte buffer, read alone")
}

fn roundtrip_4097_bytes(context: &TestContext) -> TestResult {
    let (buffer, data) = random_byte_buffer(context, 5, 4097)?;
    check_contents(context, &buffer, &data, "a 4097-byte buffer")?;
    let mut tail = [0u8; 2];
    context.stream().read(buffer.slice(4095..), &mut tail)?;
    check_slice_eq(&tail, &data[4095..], "the last two bytes of a 4097-byte buffer")
}

fn roundtrip_large(context: &TestContext) -> TestResult {
    let bytes = large_size(context);
    if bytes < 8 {
        return Err(Verdict::skip(format!(
            "the device's memory limits leave {bytes} bytes for a large buffer"
        )));
    }
    let words = bytes / 8;
    let seeds: Vec<u64> = context
        .random_u32(6, 8192)
        .chunks_exact(2)
        .map(|pair| u64::from(pair[0]) << 32 | u64::from(pair[1]))
        .collect();
    // Random blocks mixed with the word index: no two 32 KiB stretches are alike.
    let data: Vec<u64> = (0..words)
        .map(|index| seeds[index % seeds.len()] ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let buffer = context.device().alloc_from(context.stream(), &data)?;
    let back = context.stream().read_to_vec(&buffer)?;
    if back == data {
        return Ok(());
    }
    check_slice_eq(&back, &data, &format!("a {bytes}-byte buffer"))
}

fn roundtrip_element_types(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let random = context.random_u32(7, 64);
    let bytes: Vec<u8> = random.iter().map(|value| *value as u8).collect();
    let halves: Vec<u16> = random.iter().map(|value| *value as u16).collect();
    let words: Vec<u32> = random.clone();
    // Floats travel as bits: NaN payloads, infinities and negative zero must survive unchanged.
    let mut float_bits: Vec<u32> = random.clone();
    float_bits.extend([0x7fc0_0001, 0xffc0_1234, 0x7f80_0000, 0x8000_0000, 0x0000_0001]);
    let floats: Vec<f32> = float_bits.iter().map(|bits| f32::from_bits(*bits)).collect();
    let longs: Vec<u64> = random
        .chunks_exact(2)
        .map(|pair| u64::from(pair[0]) << 32 | u64::from(pair[1]))
        .collect();
    let quads: Vec<[u32; 4]> = random
        .chunks_exact(4)
        .map(|chunk| [chunk[0], chunk[1], chunk[2], chunk[3]])
        .collect();
    let buffer = device.alloc_from(stream, &bytes)?;
    check_slice_eq(&stream.read_to_vec(&buffer)?, &bytes, "u8 elements")?;
    let buffer = device.alloc_from(stream, &halves)?;
    check_slice_eq(&stream.read_to_vec(&buffer)?, &halves, "u16 elements")?;
    let buffer = device.alloc_from(stream, &words)?;
    check_slice_eq(&stream.read_to_vec(&buffer)?, &words, "u32 elements")?;
    let buffer = device.alloc_from(stream, &floats)?;
    let back: Vec<u32> = stream
        .read_to_vec(&buffer)?
        .iter()
        .map(|value| value.to_bits())
        .collect();
    check_slice_eq(&back, &float_bits, "f32 elements, as bits")?;
    let buffer = device.alloc_from(stream, &longs)?;
    check_slice_eq(&stream.read_to_vec(&buffer)?, &longs, "u64 elements")?;
    let buffer = device.alloc_from(stream, &quads)?;
    check_slice_eq(&stream.read_to_vec(&buffer)?, &quads, "[u32; 4] elements")
}

fn roundtrip_overwrite(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let buffer = context.device().alloc::<u8>(10_007)?;
    for seed in 0..6u64 {
        let data = context.random_bytes(100 + seed, 10_007);
        stream.write(&buffer, &data)?;
        check_contents(context, &buffer, &data, &format!("pattern {seed}"))?;
    }
    Ok(())
}

fn roundtrip_write_owned(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let data = context.random_u32(8, 5001);
    let buffer = context.device().alloc::<u32>(data.len())?;
    stream.write_owned(&buffer, data.clone())?;
    check_contents(context, &buffer, &data, "a buffer written asynchronously")
}

/// (offset, length) pairs at odd positions inside a 1000-byte buffer, touching both ends.
const ODD_SPANS: [(usize, usize); 6] = [(0, 1), (3, 17), (1, 999), (501, 499), (999, 1), (77, 3)];

fn write_odd_offsets(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, mut model) = random_byte_buffer(context, 9, 1000)?;
    for (round, (offset, len)) in ODD_SPANS.into_iter().enumerate() {
        let data = context.random_bytes(200 + round as u64, len);
        stream.write(buffer.slice(offset..), &data)?;
        model[offset..offset + len].copy_from_slice(&data);
        check_contents(
            context,
            &buffer,
            &model,
            &format!("the buffer after writing {len} bytes at offset {offset}"),
        )?;
    }
    Ok(())
}

fn read_odd_offsets(context: &TestContext) -> TestResult {
    let (buffer, data) = random_byte_buffer(context, 10, 1000)?;
    for (offset, len) in ODD_SPANS {
        // Bytes around the destination slice must stay as the host left them.
        let mut out = vec![0xCCu8; len + 2];
        context.stream().read(buffer.slice(offset..), &mut out[1..=len])?;
        let mut expected = vec![0xCCu8; len + 2];
        expected[1..=len].copy_from_slice(&data[offset..offset + len]);
        check_slice_eq(&out, &expected, &format!("{len} bytes read at offset {offset}"))?;
    }
    Ok(())
}

fn copy_odd_offsets(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (source, source_data) = random_byte_buffer(context, 11, 5000)?;
    let (destination, mut model) = random_byte_buffer(context, 12, 4097)?;
    for (from, to, len) in [(3, 7, 13), (0, 0, 1), (4999, 4096, 1), (1, 2, 4095), (777, 1001, 2049)] {
        stream.copy(source.slice(from..from + len), destination.slice(to..))?;
        model[to..to + len].copy_from_slice(&source_data[from..from + len]);
    }
    check_contents(context, &destination, &model, "the destination after five copies")?;
    check_contents(context, &source, &source_data, "the source after being copied from")
}

fn copy_whole_buffer(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let data = context.random_u32(13, 3001);
    let source = context.device().alloc_from(stream, &data)?;
    let destination = context.device().alloc::<u32>(3001)?;
    stream.copy(&source, &destination)?;
    check_contents(context, &destination, &data, "the destination of a whole-buffer copy")?;
    let shorter = context.device().alloc_from(stream, &[1u32; 3000])?;
    expect_error(
        stream.copy(&source, &shorter),
        &[ErrorKind::OutOfBounds],
        "a copy of 3001 elements into a buffer of 3000",
    )?;
    check_contents(
        context,
        &shorter,
        &[1u32; 3000],
        "the shorter buffer after the refused copy",
    )
}

fn copy_destination_out_of_bounds(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let source = context.device().alloc_from(stream, &[7u32; 16])?;
    let destination = context.device().alloc_from(stream, &[1u32; 8])?;
    expect_error(
        stream.copy(source.slice(..8), destination.slice(4..)),
        &[ErrorKind::OutOfBounds],
        "copying 8 elements to offset 4 of an 8-element buffer",
    )?;
    expect_error(
        stream.copy(source.slice(..0), destination.slice(9..)),
        &[ErrorKind::OutOfBounds],
        "copying 0 elements to offset 9 of an 8-element buffer",
    )?;
    stream.synchronize()?;
    check_contents(context, &destination, &[1u32; 8], "the destination of the refused copy")
}

/// The host's memmove of `len` bytes from `from` to `to` within `model`.
fn memmove<T: Copy>(model: &mut [T], from: usize, to: usize, len: usize) {
    model.copy_within(from..from + len, to);
}

fn copy_overlap_forward(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, mut model) = random_byte_buffer(context, 14, 4097)?;
    for (from, to, len) in [(5, 12, 1000), (0, 1, 4096), (100, 101, 1), (2000, 2999, 1001)] {
        stream.copy(buffer.slice(from..from + len), buffer.slice(to..))?;
        memmove(&mut model, from, to, len);
        check_contents(
            context,
            &buffer,
            &model,
            &format!("the buffer after copying {len} bytes from {from} to {to}"),
        )?;
    }
    Ok(())
}

fn copy_overlap_backward(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, mut model) = random_byte_buffer(context, 15, 4097)?;
    for (from, to, len) in [(12, 5, 1000), (1, 0, 4096), (101, 100, 1), (2999, 2000, 1001)] {
        stream.copy(buffer.slice(from..from + len), buffer.slice(to..))?;
        memmove(&mut model, from, to, len);
        check_contents(
            context,
            &buffer,
            &model,
            &format!("the buffer after copying {len} bytes from {from} to {to}"),
        )?;
    }
    Ok(())
}

fn copy_overlap_words(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let data: Vec<u32> = (0..1001).collect();
    let buffer = context.device().alloc_from(stream, &data)?;
    let mut model = data;
    // Both directions queued back to back before one read: order and memmove together.
    stream.copy(buffer.slice(..1000), buffer.slice(1..))?;
    memmove(&mut model, 0, 1, 1000);
    stream.copy(buffer.slice(501..501 + 500), buffer.slice(500..))?;
    memmove(&mut model, 501, 500, 500);
    check_contents(context, &buffer, &model, "the buffer after two overlapping copies")
}

fn copy_onto_itself(context: &TestContext) -> TestResult {
    let (buffer, data) = random_byte_buffer(context, 16, 999)?;
    context.stream().copy(buffer.slice(3..3 + 990), buffer.slice(3..))?;
    check_contents(context, &buffer, &data, "the buffer after copying a range onto itself")
}

fn fill_one_byte_pattern(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, mut model) = random_byte_buffer(context, 17, 4097)?;
    for (offset, count, value) in [
        (1, 1, 0xABu8),
        (3, 17, 0x00),
        (1001, 2047, 0xFF),
        (4096, 1, 0x5C),
        (0, 3, 0x11),
    ] {
        stream.fill(buffer.slice(offset..offset + count), value)?;
        model[offset..offset + count].fill(value);
    }
    check_contents(context, &buffer, &model, "the buffer after five 1-byte fills")
}

fn fill_two_byte_pattern(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let data: Vec<u16> = context.random_u32(18, 2049).iter().map(|value| *value as u16).collect();
    let buffer = context.device().alloc_from(stream, &data)?;
    let mut model = data;
    for (offset, count, value) in [
        (1, 1, 0xBEEFu16),
        (3, 333, 0x0102),
        (1025, 1023, 0xFFFF),
        (2048, 1, 0x8001),
    ] {
        stream.fill(buffer.slice(offset..offset + count), value)?;
        model[offset..offset + count].fill(value);
    }
    check_contents(context, &buffer, &model, "the buffer after four 2-byte fills")
}

fn fill_four_byte_pattern(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let data = context.random_u32(19, 1025);
    let buffer = context.device().alloc_from(stream, &data)?;
    let mut model = data;
    for (offset, count, value) in [(1, 3, 0xDEAD_BEEFu32), (7, 501, 0x0102_0304), (1024, 1, 0)] {
        stream.fill(buffer.slice(offset..offset + count), value)?;
        model[offset..offset + count].fill(value);
    }
    check_contents(context, &buffer, &model, "the u32 buffer after three fills")?;
    let floats = context.device().alloc_from(stream, &vec![1.5f32; 99])?;
    stream.fill(floats.slice(33..33 + 33), -0.0f32)?;
    stream.fill(floats.slice(97..97 + 1), f32::from_bits(0x7fc0_0abc))?;
    let mut expected = vec![1.5f32.to_bits(); 99];
    expected[33..66].fill(0x8000_0000);
    expected[97] = 0x7fc0_0abc;
    let back: Vec<u32> = stream
        .read_to_vec(&floats)?
        .iter()
        .map(|value| value.to_bits())
        .collect();
    check_slice_eq(&back, &expected, "the f32 buffer after two fills, as bits")
}

fn fill_eight_byte_pattern_refused(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let buffer = context.device().alloc_from(stream, &[3u64; 8])?;
    expect_error(
        stream.fill(buffer.slice(..8), 0x0102_0304_0506_0708u64),
        &[ErrorKind::InvalidArgument],
        "a fill with an 8-byte pattern",
    )?;
    check_contents(context, &buffer, &[3u64; 8], "the buffer after the refused fill")
}

fn oom_larger_than_max_allocation(context: &TestContext) -> TestResult {
    let max = context.info().max_allocation_size;
    if max == 0 {
        return Err(Verdict::skip("the device reports no largest allocation size"));
    }
    let Some(bytes) = max.checked_add(1).and_then(|bytes| usize::try_from(bytes).ok()) else {
        return Err(Verdict::skip(format!(
            "the largest allocation, {max} bytes, is past what this host can ask for"
        )));
    };
    expect_error(
        context.device().alloc::<u8>(bytes),
        &[ErrorKind::OutOfMemory],
        &format!("an allocation of {bytes} bytes (the largest allocation plus one)"),
    )?;
    expect_error(
        context.device().alloc::<u32>(bytes / 4 + 1),
        &[ErrorKind::OutOfMemory],
        &format!("an allocation of {} four-byte elements", bytes / 4 + 1),
    )?;
    Ok(())
}

fn oom_larger_than_total_memory(context: &TestContext) -> TestResult {
    let total = context.info().total_memory;
    if total == 0 {
        return Err(Verdict::skip("the device reports no total memory"));
    }
    let Some(bytes) = total.checked_add(1).and_then(|bytes| usize::try_from(bytes).ok()) else {
        return Err(Verdict::skip(format!(
            "the total memory, {total} bytes, is past what this host can ask for"
        )));
    };
    expect_error(
        context.device().alloc::<u8>(bytes),
        &[ErrorKind::OutOfMemory],
        &format!("an allocation of {bytes} bytes (the total memory plus one)"),
    )?;
    Ok(())
}

fn oom_device_works_after_refusal(context: &TestContext) -> TestResult {
    let device = context.device();
    let info = context.info();
    let limit = [info.max_allocation_size, info.total_memory]
        .into_iter()
        .filter(|limit| *limit > 0)
        .max();
    let Some(bytes) = limit
        .and_then(|limit| limit.checked_add(1))
        .and_then(|bytes| usize::try_from(bytes).ok())
    else {
        return Err(Verdict::skip(
            "the device reports no memory limit this host can ask past",
        ));
    };
    let data = context.random_u32(20, 4096);
    let kept = device.alloc_from(context.stream(), &data)?;
    let before = device.memory_allocated();
    expect_error(
        device.alloc::<u8>(bytes),
        &[ErrorKind::OutOfMemory],
        "an oversized allocation",
    )?;
    check_eq(device.memory_allocated(), before, "bytes allocated after the refusal")?;
    check_contents(context, &kept, &data, "a buffer allocated before the refusal")?;
    let fresh = device.alloc_from(context.stream(), &data)?;
    check_contents(context, &fresh, &data, "a buffer allocated after the refusal")
}

fn oom_exhaustion(context: &TestContext) -> TestResult {
    const LARGEST_EXHAUSTED: u64 = 1 << 30;
    let total = context.info().total_memory;
    if total == 0 || total > LARGEST_EXHAUSTED {
        return Err(Verdict::skip(format!(
            "the device has {total} bytes; exhausting more than {LARGEST_EXHAUSTED} would take too long"
        )));
    }
    let device = context.device();
    let chunk = usize::try_from(total / 8).map_err(|_| Verdict::fail("an eighth of the memory overflows usize"))?;
    let mut held = Vec::new();
    let error = loop {
        match device.alloc::<u8>(chunk) {
            Ok(buffer) => held.push(buffer),
            Err(error) => break error,
        }
        if held.len() > 8 {
            return Err(Verdict::fail(format!(
                "the device granted {} buffers of {chunk} bytes but has only {total} bytes",
                held.len()
            )));
        }
    };
    check_eq(
        error.kind(),
        ErrorKind::OutOfMemory,
        "the kind of error once memory ran out",
    )?;
    let granted = held.len();
    check(granted >= 1, || {
        format!("not even one buffer of {chunk} bytes (an eighth of the memory) was granted")
    })?;
    drop(held);
    // Everything freed: the same number of buffers fits again, and they hold data.
    let stream = context.stream();
    let mut again = Vec::new();
    for index in 0..granted {
        let buffer = device.alloc::<u8>(chunk)?;
        stream.write(&buffer, &[index as u8])?;
        stream.write(buffer.slice(chunk - 1..), &[index as u8])?;
        again.push(buffer);
    }
    for (index, buffer) in again.iter().enumerate() {
        let mut ends = [0u8; 2];
        stream.read(buffer, &mut ends[..1])?;
        stream.read(buffer.slice(chunk - 1..), &mut ends[1..])?;
        check_eq(
            ends,
            [index as u8; 2],
            &format!("the first and last bytes of buffer {index}"),
        )?;
    }
    Ok(())
}

fn churn_alloc_free_cycles(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    let pool = context.random_bytes(21, 12_000);
    let before = device.memory_allocated();
    for cycle in 0..300usize {
        let len = 1 + (cycle * 37) % 5000;
        let start = (cycle * 13) % 7000;
        let data = &pool[start..start + len];
        let buffer = device.alloc::<u8>(len)?;
        stream.write(&buffer, data)?;
        let back = stream.read_to_vec(&buffer)?;
        check_slice_eq(&back, data, &format!("cycle {cycle}, {len} bytes"))?;
    }
    check_eq(device.memory_allocated(), before, "bytes allocated after 300 cycles")
}

fn churn_freed_memory_reusable(context: &TestContext) -> TestResult {
    let device = context.device();
    let stream = context.stream();
    // On a device of 64 MiB or less this is a quarter of its memory, so the six buffers below
    // fit only if each one's memory is reused once it is freed.
    let bytes = large_size(context).min(16 << 20);
    if bytes == 0 {
        return Err(Verdict::skip(
            "the device's memory limits leave no room for a large buffer",
        ));
    }
    let before = device.memory_allocated();
    for cycle in 0..6u8 {
        let buffer = device.alloc::<u8>(bytes)?;
        stream.write(&buffer, &[cycle])?;
        stream.write(buffer.slice(bytes / 2..), &[cycle ^ 0xFF])?;
        stream.write(buffer.slice(bytes - 1..), &[cycle])?;
        let mut probe = [0u8; 3];
        stream.read(&buffer, &mut probe[..1])?;
        stream.read(buffer.slice(bytes / 2..), &mut probe[1..2])?;
        stream.read(buffer.slice(bytes - 1..), &mut probe[2..])?;
        check_eq(probe, [cycle, cycle ^ 0xFF, cycle], &format!("probes of cycle {cycle}"))?;
        drop(buffer);
        check_eq(
            device.memory_allocated(),
            before,
            &format!("bytes allocated after freeing the buffer of cycle {cycle}"),
        )?;
    }
    Ok(())
}

fn stats_track_live_buffers(context: &TestContext) -> TestResult {
    let device = context.device();
    let before = device.memory_allocated();
    let buffer = device.alloc::<u8>(3 << 20)?;
    let during = device.memory_allocated();
    check(during >= before + (3 << 20), || {
        format!("{during} bytes allocated with a 3 MiB buffer alive, {before} before it")
    })?;
    check(device.max_memory_allocated() >= during, || {
        format!(
            "the peak, {}, is below the current {during} bytes",
            device.max_memory_allocated()
        )
    })?;
    check(device.memory_reserved() >= during, || {
        format!(
            "{} bytes reserved, fewer than the {during} allocated",
            device.memory_reserved()
        )
    })?;
    drop(buffer);
    check_eq(
        device.memory_allocated(),
        before,
        "bytes allocated once the buffer is freed",
    )
}

fn read_out_of_bounds(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let buffer = context.device().alloc::<u8>(4097)?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(
        stream.read(buffer.slice(4090..), &mut [0u8; 8]),
        &refused,
        "reading 8 bytes at 4090",
    )?;
    expect_error(
        stream.read(&buffer, &mut vec![0u8; 4098]),
        &refused,
        "reading 4098 bytes",
    )?;
    expect_error(
        stream.read(buffer.slice(4097..), &mut [0u8; 1]),
        &refused,
        "reading one byte at the end",
    )?;
    Ok(())
}

fn write_out_of_bounds(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, data) = random_byte_buffer(context, 22, 4097)?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(
        stream.write(buffer.slice(4090..), &[0u8; 8]),
        &refused,
        "writing 8 bytes at 4090",
    )?;
    expect_error(stream.write(&buffer, &vec![0u8; 4098]), &refused, "writing 4098 bytes")?;
    expect_error(
        stream.write_owned(buffer.slice(4000..), vec![0u8; 98]),
        &refused,
        "an asynchronous write of 98 bytes at 4000",
    )?;
    stream.synchronize()?;
    // A refused write writes nothing, not even the part that would have fitted.
    check_contents(context, &buffer, &data, "the buffer after the refused writes")
}

fn fill_out_of_bounds(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let (buffer, data) = random_byte_buffer(context, 23, 4097)?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(
        stream.fill(buffer.slice(4090..4090 + 8), 0u8),
        &refused,
        "filling 8 bytes at 4090",
    )?;
    expect_error(stream.fill(buffer.slice(..4098), 0u8), &refused, "filling 4098 bytes")?;
    let words = context.device().alloc_from(stream, &[1u32; 10])?;
    expect_error(
        stream.fill(words.slice(9..9 + 2), 0u32),
        &refused,
        "filling 2 words at 9 of 10",
    )?;
    stream.synchronize()?;
    check_contents(context, &buffer, &data, "the byte buffer after the refused fills")?;
    check_contents(context, &words, &[1u32; 10], "the word buffer after the refused fill")
}

fn zero_length_past_the_end(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let buffer = context.device().alloc_from(stream, &[1u32; 10])?;
    stream.write(buffer.slice(10..), &[])?;
    stream.read(buffer.slice(10..), &mut [])?;
    stream.fill(buffer.slice(10..10), 0u32)?;
    stream.copy(buffer.slice(10..10), buffer.slice(10..))?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(
        stream.write(buffer.slice(11..), &[]),
        &refused,
        "an empty write one past the end",
    )?;
    expect_error(
        stream.read(buffer.slice(11..), &mut []),
        &refused,
        "an empty read one past the end",
    )?;
    expect_error(
        stream.fill(buffer.slice(11..11), 0u32),
        &refused,
        "an empty fill one past the end",
    )?;
    expect_error(
        stream.copy(buffer.slice(11..11), &buffer),
        &refused,
        "an empty copy from one past the end",
    )?;
    check_contents(context, &buffer, &[1u32; 10], "the buffer after the empty accesses")
}

fn offset_overflow(context: &TestContext) -> TestResult {
    let stream = context.stream();
    let bytes = context.device().alloc_from(stream, &[9u8; 64])?;
    let words = context.device().alloc_from(stream, &[9u32; 16])?;
    let refused = [ErrorKind::OutOfBounds];
    expect_error(
        stream.read(bytes.slice(usize::MAX..), &mut [0u8; 2]),
        &refused,
        "reading 2 bytes at offset usize::MAX",
    )?;
    expect_error(
        stream.write(bytes.slice(usize::MAX - 1..), &[0u8; 4]),
        &refused,
        "writing 4 bytes at offset usize::MAX - 1",
    )?;
    expect_error(
        stream.fill(words.slice(usize::MAX / 2..usize::MAX / 2 + 4), 1u32),
        &refused,
        "filling 4 words at element usize::MAX / 2 (a byte offset past u64)",
    )?;
    expect_error(
        stream.fill(bytes.slice(1..=usize::MAX), 1u8),
        &refused,
        "filling usize::MAX bytes at offset 1",
    )?;
    expect_error(
        stream.copy(words.slice(1..1 + 2), words.slice(usize::MAX / 4..)),
        &refused,
        "copying to element usize::MAX / 4",
    )?;
    expect_error(
        stream.copy(bytes.slice(usize::MAX..=usize::MAX), &bytes),
        &refused,
        "copying from byte usize::MAX",
    )?;
    stream.synchronize()?;
    check_contents(context, &bytes, &[9u8; 64], "the byte buffer after the refused calls")?;
    check_contents(context, &words, &[9u32; 16], "the word buffer after the refused calls")
}

fn copy_between_devices(context: &TestContext) -> TestResult {
    let Some(other) = other_device(context)? else {
        return Err(Verdict::skip("the backend has one device; the test needs a second one"));
    };
    let stream = context.stream();
    let other_stream = other.create_stream()?;
    let local = context.device().alloc_from(stream, &[1u32; 8])?;
    let foreign = other.alloc_from(&other_stream, &[2u32; 8])?;
    let refused = [ErrorKind::InvalidHandle];
    expect_error(
        stream.copy(local.slice(..8), &foreign),
        &refused,
        "copying into another device's buffer",
    )?;
    expect_error(
        stream.copy(foreign.slice(..8), &local),
        &refused,
        "copying from another device's buffer",
    )?;
    expect_error(
        other_stream.copy(local.slice(..8), &foreign),
        &refused,
        "copying with the other device's stream",
    )?;
    check_contents(context, &local, &[1u32; 8], "the local buffer")?;
    check_slice_eq(
        &other_stream.read_to_vec(&foreign)?,
        &[2u32; 8],
        "the other device's buffer",
    )
}

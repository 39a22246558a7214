use super::*;
use crate::POISON_PATTERN;

#[test]
fn copy_out_of_bounds_names_the_buffer_and_the_range() {
    let fixture = Fixture::new();
    let source = fixture.allocate(16);
    let destination = fixture.allocate(16);
    let result = fixture
        .backend
        .stream_copy(fixture.stream, source, 0, destination, 8, 16);
    assert_error(
        result,
        ErrorKind::OutOfBounds,
        &["copy destination", "8..24", "16-byte buffer"],
    );
    let result = fixture
        .backend
        .stream_copy(fixture.stream, source, 1, destination, 0, 16);
    assert_error(result, ErrorKind::OutOfBounds, &["copy source", "1..17"]);
}

#[test]
fn offset_plus_length_overflowing_u64_is_out_of_bounds() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(16);
    let data = [0u8; 2];
    // SAFETY: the call is refused before anything is enqueued, so `data` is never read later.
    let result = unsafe {
        fixture
            .backend
            .stream_write(fixture.stream, buffer, u64::MAX, data.as_ptr(), 2)
    };
    assert_error(result, ErrorKind::OutOfBounds, &["write", "overflows"]);
    let result = fixture.backend.stream_fill(fixture.stream, buffer, u64::MAX, 1, &[0]);
    assert_error(result, ErrorKind::OutOfBounds, &["overflows"]);
}

#[test]
fn zero_size_allocation_is_rejected() {
    let fixture = Fixture::new();
    let result = fixture.backend.buffer_allocate(fixture.device, 0);
    assert_error(result, ErrorKind::InvalidArgument, &["0 bytes"]);
}

#[test]
fn allocation_larger_than_free_memory_is_out_of_memory() {
    let fixture = Fixture::new();
    let result = fixture.backend.buffer_allocate(fixture.device, TEST_MEMORY + 1);
    assert_error(
        result,
        ErrorKind::OutOfMemory,
        &["requested 1048577 bytes, device has 1048576 of 1048576 free"],
    );
    let half = fixture.allocate(TEST_MEMORY / 2);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, TEST_MEMORY / 2);
    let result = fixture.backend.buffer_allocate(fixture.device, TEST_MEMORY);
    assert_error(result, ErrorKind::OutOfMemory, &["device has 524288 of 1048576 free"]);
    fixture.backend.buffer_free(half);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, TEST_MEMORY);
}

#[test]
fn allocation_the_host_cannot_provide_fails_cleanly() {
    let fixture = Fixture::with_config(CpuConfig {
        devices: 1,
        memory_per_device: u64::MAX,
    });
    // More than isize::MAX bytes: no allocator can provide it, whatever the overcommit policy.
    let result = fixture.backend.buffer_allocate(fixture.device, 1 << 63);
    assert_error(result, ErrorKind::OutOfMemory, &["requested 9223372036854775808 bytes"]);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, u64::MAX);
}

#[test]
fn buffer_of_another_device_is_an_invalid_handle() {
    let fixture = Fixture::with_config(CpuConfig {
        devices: 2,
        memory_per_device: TEST_MEMORY,
    });
    let other_device = fixture.backend.device_open(1).unwrap();
    let foreign = fixture.backend.buffer_allocate(other_device, 16).unwrap();
    let local = fixture.allocate(16);
    let result = fixture.backend.stream_copy(fixture.stream, local, 0, foreign, 0, 16);
    let expected = format!(
        "buffer {} belongs to cpu device 1, the stream is on device 0",
        hex(foreign.0)
    );
    assert_error(result, ErrorKind::InvalidHandle, &[&expected]);
    let result = fixture.backend.stream_fill(fixture.stream, foreign, 0, 4, &[1]);
    assert_error(result, ErrorKind::InvalidHandle, &[&expected]);
}

#[test]
fn fresh_buffers_hold_the_poison_pattern() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(10);
    let poison = POISON_PATTERN.to_le_bytes();
    assert_eq!(poison, [0xEF, 0xBE, 0xAD, 0xDE]);
    let expected: Vec<u8> = poison.iter().copied().cycle().take(10).collect();
    assert_eq!(fixture.read_now(buffer, 0, 10), expected);
}

#[test]
fn reused_memory_holds_the_poison_whether_or_not_it_was_written() {
    let fixture = Fixture::new();
    let size = 4096usize;
    let poison: Vec<u8> = POISON_PATTERN
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(size)
        .collect();
    let next = |previous: BufferHandle| {
        fixture.backend.buffer_free(previous);
        let buffer = fixture.allocate(size as u64);
        assert_eq!(
            fixture.read_now(buffer, 0, size),
            poison,
            "a new allocation holds the poison"
        );
        buffer
    };
    // Read but never written: its block is kept and handed out again as it is.
    let buffer = fixture.allocate(size as u64);
    assert_eq!(fixture.read_now(buffer, 0, size), poison);
    let buffer = next(buffer);
    // Written by each kind of operation: its block is never handed out again unpoisoned.
    fixture.write_now(buffer, 0, &vec![0u8; size]);
    let buffer = next(buffer);
    fixture
        .backend
        .stream_fill(fixture.stream, buffer, 0, size as u64, &[1])
        .unwrap();
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    let buffer = next(buffer);
    let zeros = fixture.allocate(size as u64);
    fixture.write_now(zeros, 0, &vec![0u8; size]);
    fixture
        .backend
        .stream_copy(fixture.stream, zeros, 0, buffer, 0, size as u64)
        .unwrap();
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    let buffer = next(buffer);
    fixture.backend.buffer_free(buffer);
    fixture.backend.buffer_free(zeros);
}

#[test]
fn write_read_copy_round_trip_with_offsets_and_odd_lengths() {
    let fixture = Fixture::new();
    let first = fixture.allocate(33);
    let second = fixture.allocate(21);
    let data: Vec<u8> = (1..=7).collect();
    fixture.write_now(first, 3, &data);
    assert_eq!(fixture.read_now(first, 3, 7), data);
    assert_eq!(fixture.read_now(first, 5, 3), [3, 4, 5]);

    fixture
        .backend
        .stream_copy(fixture.stream, first, 4, second, 13, 5)
        .unwrap();
    let copied = fixture.read_now(second, 12, 7);
    assert_eq!(copied[1..6], [2, 3, 4, 5, 6]);
    assert_eq!(copied[0], 0xEF, "byte 12 is still poison");
    assert_eq!(copied[6], 0xAD, "byte 18 is still poison");
}

#[test]
fn fill_with_each_pattern_size_respects_offset_and_size() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(24);
    let backend = &fixture.backend;
    backend.stream_fill(fixture.stream, buffer, 1, 3, &[0x11]).unwrap();
    backend
        .stream_fill(fixture.stream, buffer, 6, 4, &[0x21, 0x22])
        .unwrap();
    backend
        .stream_fill(fixture.stream, buffer, 12, 8, &[1, 2, 3, 4])
        .unwrap();
    let bytes = fixture.read_now(buffer, 0, 24);
    assert_eq!(
        bytes,
        [
            0xEF, 0x11, 0x11, 0x11, 0xEF, 0xBE, 0x21, 0x22, 0x21, 0x22, 0xAD, 0xDE, 1, 2, 3, 4, 1, 2, 3, 4, 0xEF, 0xBE,
            0xAD, 0xDE
        ]
    );
}

#[test]
fn large_copies_shared_among_threads_copy_every_byte_and_no_more() {
    // Copies of 4 MiB or more go in 1 MiB chunks over the pool's threads: sizes just below
    // and above that, a chunk's edge, and a last chunk cut short, at odd offsets.
    let fixture = Fixture::with_config(CpuConfig {
        devices: 1,
        memory_per_device: 32 << 20,
    });
    let backend = &fixture.backend;
    for size in [(4u64 << 20) - 4, 4 << 20, (5 << 20) + 7, (9 << 20) + 1] {
        let (from_offset, to_offset) = (13u64, 5u64);
        let source = fixture.allocate(from_offset + size);
        let destination = fixture.allocate(to_offset + size + 8);
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4093) as u8).collect();
        fixture.write_now(source, from_offset, &data);
        backend
            .stream_copy(fixture.stream, source, from_offset, destination, to_offset, size)
            .unwrap();
        let bytes = fixture.read_now(destination, 0, (to_offset + size + 8) as usize);
        assert_eq!(
            bytes[..5],
            [0xEF, 0xBE, 0xAD, 0xDE, 0xEF],
            "size {size}: poison before the copy survives"
        );
        assert!(bytes[5..5 + size as usize] == data[..], "size {size}: the copy differs");
        assert_eq!(bytes[5 + size as usize..].len(), 8, "size {size}");
        assert!(
            bytes[5 + size as usize..]
                .iter()
                .all(|&b| [0xEF, 0xBE, 0xAD, 0xDE].contains(&b)),
            "size {size}: poison after the copy survives"
        );
        backend.buffer_free(source);
        backend.buffer_free(destination);
    }
}

#[test]
fn large_fills_repeat_the_pattern_exactly_and_stop_at_the_end() {
    // Sizes around and beyond the fill's internal 4096-byte block, at odd pattern-aligned offsets.
    let fixture = Fixture::new();
    let backend = &fixture.backend;
    for pattern in [&[0x5A][..], &[1, 2][..], &[9, 8, 7, 6][..]] {
        for size in [4092u64, 4096, 4100, 3 * 4096 + 8, 65_536 + 4] {
            let offset = 4 * 3;
            let buffer = fixture.allocate(offset + size + 8);
            backend
                .stream_fill(fixture.stream, buffer, offset, size, pattern)
                .unwrap();
            let bytes = fixture.read_now(buffer, 0, (offset + size + 8) as usize);
            let (before, rest) = bytes.split_at(offset as usize);
            let (filled, after) = rest.split_at(size as usize);
            assert_eq!(
                before,
                [0xEF, 0xBE, 0xAD, 0xDE].repeat(3),
                "poison before the fill survives"
            );
            for (index, chunk) in filled.chunks(pattern.len()).enumerate() {
                assert_eq!(chunk, pattern, "size {size}, pattern {pattern:?}, element {index}");
            }
            assert_eq!(
                after,
                [0xEF, 0xBE, 0xAD, 0xDE, 0xEF, 0xBE, 0xAD, 0xDE],
                "poison after the fill survives"
            );
            backend.buffer_free(buffer);
        }
    }
}

#[test]
fn fill_rejects_bad_patterns_and_misaligned_ranges() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(16);
    let backend = &fixture.backend;
    let result = backend.stream_fill(fixture.stream, buffer, 0, 6, &[1, 2, 3]);
    assert_error(result, ErrorKind::InvalidArgument, &["1, 2 or 4 bytes", "not 3"]);
    let result = backend.stream_fill(fixture.stream, buffer, 2, 4, &[1, 2, 3, 4]);
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &[&hex(buffer.0), "offset 2", "multiples of the 4-byte pattern"],
    );
    let result = backend.stream_fill(fixture.stream, buffer, 0, 3, &[1, 2]);
    assert_error(result, ErrorKind::InvalidArgument, &["size 3", "2-byte pattern"]);
}

#[test]
fn overlapping_copy_within_one_buffer_behaves_like_memmove() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(16);
    let data: Vec<u8> = (0..16).collect();
    fixture.write_now(buffer, 0, &data);
    fixture
        .backend
        .stream_copy(fixture.stream, buffer, 0, buffer, 3, 10)
        .unwrap();
    assert_eq!(
        fixture.read_now(buffer, 0, 16),
        [0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 14, 15]
    );
    fixture.write_now(buffer, 0, &data);
    fixture
        .backend
        .stream_copy(fixture.stream, buffer, 5, buffer, 1, 11)
        .unwrap();
    assert_eq!(
        fixture.read_now(buffer, 0, 16),
        [0, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 12, 13, 14, 15]
    );
}

#[test]
fn freed_buffers_are_invalid_and_give_their_memory_back() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(4096);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, TEST_MEMORY - 4096);
    fixture.backend.buffer_free(buffer);
    assert_eq!(fixture.backend.device_info(0).unwrap().free_memory, TEST_MEMORY);
    let result = fixture.backend.stream_fill(fixture.stream, buffer, 0, 4, &[0]);
    assert_error(result, ErrorKind::InvalidHandle, &[&hex(buffer.0), "freed"]);
}

#[test]
fn a_freed_buffer_lives_until_queued_work_is_done() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(8);
    let other = fixture.allocate(8);
    let held = fixture.hold(buffer);
    let gate = held.bytes().write();
    fixture.backend.stream_fill(fixture.stream, buffer, 0, 8, &[7]).unwrap();
    fixture
        .backend
        .stream_copy(fixture.stream, buffer, 0, other, 0, 8)
        .unwrap();
    fixture.backend.buffer_free(buffer);
    drop(gate);
    drop(held);
    assert_eq!(fixture.read_now(other, 0, 8), [7; 8]);
    assert_eq!(
        fixture.backend.device_info(0).unwrap().free_memory,
        TEST_MEMORY - 8,
        "the freed buffer's bytes come back once its queued work is done"
    );
}

#[test]
fn null_host_pointers_are_refused_unless_nothing_is_copied() {
    let fixture = Fixture::new();
    let buffer = fixture.allocate(8);
    // SAFETY: a 0-byte write and read touch no host memory.
    unsafe {
        fixture
            .backend
            .stream_write(fixture.stream, buffer, 8, std::ptr::null(), 0)
            .unwrap();
        fixture
            .backend
            .stream_read(fixture.stream, buffer, 0, std::ptr::null_mut(), 0)
            .unwrap();
    }
    fixture.backend.stream_synchronize(fixture.stream).unwrap();
    // SAFETY: refused at enqueue, so the null pointer is never used.
    let result = unsafe {
        fixture
            .backend
            .stream_read(fixture.stream, buffer, 0, std::ptr::null_mut(), 4)
    };
    assert_error(
        result,
        ErrorKind::InvalidArgument,
        &[&hex(buffer.0), "null host pointer"],
    );
}

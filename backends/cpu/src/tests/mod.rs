//! Tests through the `Backend` trait, as core and the conformance suite use the backend (the
//! driver behind the checked adapter, whose messages the handle, range and argument tests
//! check). Every error test checks the kind and that the message names the thing that was wrong.

mod events;
mod handles;
mod kernels;
mod memory;
mod native;
mod streams;
mod wgsl;
mod wgsl_errors;
mod wgsl_fused;
mod wgsl_layout;
mod wgsl_math;

use crate::{CpuBackend, CpuConfig, CpuDriver};
use std::sync::Arc;
use xhal_backend::{
    Backend, BufferArg, BufferHandle, DeviceHandle, Error, ErrorKind, KernelFormat, KernelHandle, LaunchArgs, Result,
    StreamHandle,
};

/// Small enough that tests can exhaust it, large enough for every test's buffers.
const TEST_MEMORY: u64 = 1 << 20;

struct Fixture {
    backend: CpuBackend,
    device: DeviceHandle,
    stream: StreamHandle,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with_config(CpuConfig {
            devices: 1,
            memory_per_device: TEST_MEMORY,
        })
    }

    fn with_config(config: CpuConfig) -> Fixture {
        Fixture::with_driver(CpuDriver::with_config(config))
    }

    fn with_driver(driver: CpuDriver) -> Fixture {
        let backend = CpuBackend::new(driver);
        let device = backend.device_open(0).unwrap();
        let stream = backend.stream_create(device).unwrap();
        Fixture {
            backend,
            device,
            stream,
        }
    }

    fn allocate(&self, size: u64) -> BufferHandle {
        self.backend.buffer_allocate(self.device, size).unwrap()
    }

    fn new_stream(&self) -> StreamHandle {
        self.backend.stream_create(self.device).unwrap()
    }

    /// Enqueues a write of `data`, which the caller keeps alive until the stream is synchronised.
    fn write(&self, stream: StreamHandle, buffer: BufferHandle, offset: u64, data: &[u8]) -> Result<()> {
        // SAFETY: every caller synchronises `stream` before `data` goes out of scope.
        unsafe {
            self.backend
                .stream_write(stream, buffer, offset, data.as_ptr(), data.len() as u64)
        }
    }

    fn write_now(&self, buffer: BufferHandle, offset: u64, data: &[u8]) {
        self.write(self.stream, buffer, offset, data).unwrap();
        self.backend.stream_synchronize(self.stream).unwrap();
    }

    fn read_now(&self, buffer: BufferHandle, offset: u64, length: usize) -> Vec<u8> {
        let mut data = vec![0u8; length];
        // SAFETY: `data` outlives the synchronize below and nothing else touches it meanwhile.
        unsafe {
            self.backend
                .stream_read(self.stream, buffer, offset, data.as_mut_ptr(), length as u64)
                .unwrap();
        }
        self.backend.stream_synchronize(self.stream).unwrap();
        data
    }

    fn read_u32s(&self, buffer: BufferHandle, count: usize) -> Vec<u32> {
        self.read_now(buffer, 0, count * 4)
            .chunks_exact(4)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect()
    }

    fn kernel(&self, name: &str) -> KernelHandle {
        let module = self
            .backend
            .module_load(self.device, KernelFormat::CPU_BUILTIN, name.as_bytes())
            .unwrap();
        self.backend.kernel_get(module, name).unwrap()
    }

    fn launch(
        &self,
        stream: StreamHandle,
        kernel: KernelHandle,
        workgroups: [u32; 3],
        buffers: &[BufferArg],
        scalars: &[u8],
    ) -> Result<()> {
        self.backend.stream_launch(
            stream,
            &LaunchArgs {
                kernel,
                workgroups,
                buffers,
                scalars,
            },
        )
    }

    /// Launches `sleep_us` on `stream`.
    fn sleep(&self, stream: StreamHandle, micros: u32) {
        let kernel = self.kernel("sleep_us");
        self.launch(stream, kernel, [1, 1, 1], &[], &micros.to_le_bytes())
            .unwrap();
    }

    /// Holds `buffer` locked so that any stream operation touching it blocks until the guard
    /// is dropped: a deterministic way to keep a stream busy without timing assumptions.
    fn hold(&self, buffer: BufferHandle) -> Arc<crate::memory::Buffer> {
        let object = self.backend.buffer(buffer).unwrap();
        Arc::clone(&**object)
    }
}

fn whole(buffer: BufferHandle, size: u64) -> BufferArg {
    BufferArg {
        buffer,
        offset: 0,
        size,
    }
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|value| value.to_le_bytes()).collect()
}

#[track_caller]
fn assert_error<T: std::fmt::Debug>(result: Result<T>, kind: ErrorKind, fragments: &[&str]) -> Error {
    let error = result.expect_err("expected an error");
    assert_eq!(error.kind(), kind, "wrong kind for: {error}");
    for fragment in fragments {
        assert!(
            error.message().contains(fragment),
            "message `{}` does not contain `{fragment}`",
            error.message()
        );
    }
    error
}

fn hex(raw: u64) -> String {
    format!("{raw:#x}")
}

//! A backend whose fills do nothing, wrapped around a real one: what the application API's
//! fill costs over it is core's own share of an enqueue, without the driver's time (and its
//! threads' noise on two cores) in the difference.

use std::sync::Arc;
use xhal::backend::{
    Backend, BufferHandle, DeviceHandle, EventHandle, KernelHandle, LaunchArgs, ModuleHandle, StreamHandle,
};
use xhal::{BackendInfo, DeviceInfo, KernelFormat, Result};

/// `inner` with `stream_fill` answering at once; everything else goes to `inner`.
pub struct NullFill {
    pub inner: Arc<dyn Backend>,
}

impl Backend for NullFill {
    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
    fn device_count(&self) -> Result<u32> {
        self.inner.device_count()
    }
    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        self.inner.device_info(index)
    }
    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        self.inner.device_open(index)
    }
    fn device_close(&self, device: DeviceHandle) {
        self.inner.device_close(device)
    }
    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        self.inner.buffer_allocate(device, size)
    }
    fn buffer_free(&self, buffer: BufferHandle) {
        self.inner.buffer_free(buffer)
    }
    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        self.inner.stream_create(device)
    }
    fn stream_destroy(&self, stream: StreamHandle) {
        self.inner.stream_destroy(stream)
    }
    unsafe fn stream_write(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract is the inner backend's.
        unsafe { self.inner.stream_write(stream, buffer, offset, source, size) }
    }
    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        // SAFETY: the caller's contract is the inner backend's.
        unsafe { self.inner.stream_read(stream, buffer, offset, destination, size) }
    }
    fn stream_copy(
        &self,
        stream: StreamHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        self.inner
            .stream_copy(stream, source, source_offset, destination, destination_offset, size)
    }
    fn stream_fill(&self, _: StreamHandle, _: BufferHandle, _: u64, _: u64, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        self.inner.stream_launch(stream, launch)
    }
    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.inner.stream_record_event(stream, event)
    }
    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.inner.stream_wait_event(stream, event)
    }
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        self.inner.stream_synchronize(stream)
    }
    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        self.inner.stream_query(stream)
    }
    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        self.inner.event_create(device, timing)
    }
    fn event_destroy(&self, event: EventHandle) {
        self.inner.event_destroy(event)
    }
    fn event_query(&self, event: EventHandle) -> Result<bool> {
        self.inner.event_query(event)
    }
    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        self.inner.event_synchronize(event)
    }
    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        self.inner.event_elapsed_time(start, end)
    }
    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        self.inner.module_load(device, format, code)
    }
    fn module_destroy(&self, module: ModuleHandle) {
        self.inner.module_destroy(module)
    }
    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        self.inner.kernel_get(module, name)
    }
    fn kernel_destroy(&self, kernel: KernelHandle) {
        self.inner.kernel_destroy(kernel)
    }
}

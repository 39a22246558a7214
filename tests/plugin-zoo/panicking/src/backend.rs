// A backend whose every entry but `info` panics. Shared with the missing-entry plugin
// through `include!`, since a cdylib cannot be a dependency.

use xhal_core::backend::{
    Backend, BufferHandle, DeviceHandle, EventHandle, KernelHandle, LaunchArgs, ModuleHandle, StreamHandle,
};
use xhal_core::{BackendInfo, DeviceInfo, KernelFormat, Result};

/// Panics in every entry, with the entry's name in the message.
pub struct PanickingBackend {
    name: &'static str,
}

impl PanickingBackend {
    /// A backend reporting `name`.
    pub fn named(name: &'static str) -> PanickingBackend {
        PanickingBackend { name }
    }
}

fn boom(entry: &str) -> ! {
    panic!("zoo plugin panics in {entry} on purpose")
}

impl Backend for PanickingBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: self.name.to_owned(),
            version: "0.0.1".to_owned(),
            abi_version: (xhal_core::abi::XHAL_ABI_MAJOR, xhal_core::abi::XHAL_ABI_MINOR),
        }
    }
    fn device_count(&self) -> Result<u32> {
        boom("device_count")
    }
    fn device_info(&self, _index: u32) -> Result<DeviceInfo> {
        boom("device_info")
    }
    fn device_open(&self, _index: u32) -> Result<DeviceHandle> {
        boom("device_open")
    }
    fn device_close(&self, _device: DeviceHandle) {
        boom("device_close")
    }
    fn buffer_allocate(&self, _device: DeviceHandle, _size: u64) -> Result<BufferHandle> {
        boom("buffer_allocate")
    }
    fn buffer_free(&self, _buffer: BufferHandle) {
        boom("buffer_free")
    }
    fn stream_create(&self, _device: DeviceHandle) -> Result<StreamHandle> {
        boom("stream_create")
    }
    fn stream_destroy(&self, _stream: StreamHandle) {
        boom("stream_destroy")
    }
    unsafe fn stream_write(&self, _: StreamHandle, _: BufferHandle, _: u64, _: *const u8, _: u64) -> Result<()> {
        boom("stream_write")
    }
    unsafe fn stream_read(&self, _: StreamHandle, _: BufferHandle, _: u64, _: *mut u8, _: u64) -> Result<()> {
        boom("stream_read")
    }
    fn stream_copy(&self, _: StreamHandle, _: BufferHandle, _: u64, _: BufferHandle, _: u64, _: u64) -> Result<()> {
        boom("stream_copy")
    }
    fn stream_fill(&self, _: StreamHandle, _: BufferHandle, _: u64, _: u64, _: &[u8]) -> Result<()> {
        boom("stream_fill")
    }
    fn stream_launch(&self, _: StreamHandle, _: &LaunchArgs<'_>) -> Result<()> {
        boom("stream_launch")
    }
    fn stream_record_event(&self, _: StreamHandle, _: EventHandle) -> Result<()> {
        boom("stream_record_event")
    }
    fn stream_wait_event(&self, _: StreamHandle, _: EventHandle) -> Result<()> {
        boom("stream_wait_event")
    }
    fn stream_synchronize(&self, _: StreamHandle) -> Result<()> {
        boom("stream_synchronize")
    }
    fn stream_query(&self, _: StreamHandle) -> Result<bool> {
        boom("stream_query")
    }
    fn event_create(&self, _: DeviceHandle, _: bool) -> Result<EventHandle> {
        boom("event_create")
    }
    fn event_destroy(&self, _: EventHandle) {
        boom("event_destroy")
    }
    fn event_query(&self, _: EventHandle) -> Result<bool> {
        boom("event_query")
    }
    fn event_synchronize(&self, _: EventHandle) -> Result<()> {
        boom("event_synchronize")
    }
    fn event_elapsed_time(&self, _: EventHandle, _: EventHandle) -> Result<u64> {
        boom("event_elapsed_time")
    }
    fn module_load(&self, _: DeviceHandle, _: KernelFormat, _: &[u8]) -> Result<ModuleHandle> {
        boom("module_load")
    }
    fn module_destroy(&self, _: ModuleHandle) {
        boom("module_destroy")
    }
    fn kernel_get(&self, _: ModuleHandle, _: &str) -> Result<KernelHandle> {
        boom("kernel_get")
    }
    fn kernel_destroy(&self, _: KernelHandle) {
        boom("kernel_destroy")
    }
}

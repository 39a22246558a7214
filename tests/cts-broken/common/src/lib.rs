//! The CPU reference backend with one deliberate fault each: the conformance suite proves
//! itself by catching every one with the right result. Each fault is a plugin of its own
//! (a `cdylib` in a sibling folder) so the suite meets it exactly as it would a vendor's.

use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use xhal_core::backend::{
    Backend, BufferHandle, DeviceHandle, EventHandle, KernelHandle, LaunchArgs, ModuleHandle, StreamHandle,
};
use xhal_core::{BackendInfo, DeviceInfo, KernelFormat, Result};
use xhal_cpu::{CpuBackend, CpuDriver, KernelMode};

/// What is wrong with the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Device-to-device copies ignore the source offset and copy from the start.
    CopyIgnoresSourceOffset,
    /// Fills run to the end of the buffer, whatever length was asked for.
    FillIgnoresLength,
    /// Events never signal: queries say pending forever and host waits never return.
    EventNeverSignals,
    /// The fill entry panics.
    FillPanics,
    /// Device-to-device copies dereference a wild pointer.
    CopySegfaults,
    /// The device claims f64, but kernels using f64 return results one unit in the last
    /// place off.
    F64Wrong,
    /// Event queries say complete at once, before the recorded work is done.
    EventQueryLies,
    /// Waits on events are ignored, so streams are not ordered against each other.
    WaitIgnored,
}

/// The CPU backend with `fault` injected.
pub struct BrokenBackend {
    name: &'static str,
    fault: Fault,
    inner: CpuBackend,
    buffer_sizes: Mutex<HashMap<BufferHandle, u64>>,
    f64_modules: Mutex<HashSet<ModuleHandle>>,
    f64_kernels: Mutex<HashSet<KernelHandle>>,
}

impl BrokenBackend {
    /// The backend named `name` (the plugin file must be `libxhal_<name>.so`).
    pub fn new(name: &'static str, fault: Fault) -> Result<BrokenBackend> {
        Ok(BrokenBackend {
            name,
            fault,
            // The interpreter: the self-proofs need kernels slow enough that a fault in
            // ordering or completion shows (compiled kernels finish before the first query).
            inner: CpuBackend::new(CpuDriver::from_env()?.with_kernel_mode(KernelMode::Interpret)),
            buffer_sizes: Mutex::new(HashMap::new()),
            f64_modules: Mutex::new(HashSet::new()),
            f64_kernels: Mutex::new(HashSet::new()),
        })
    }

    /// Makes every 8-byte word of the launch's buffers one unit in the last place off, after
    /// the kernel ran: what a device with a broken f64 unit would leave behind.
    fn corrupt_doubles(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        self.inner.stream_synchronize(stream)?;
        for argument in launch.buffers {
            let mut bytes = vec![0u8; argument.size as usize];
            // SAFETY: `bytes` stays alive and untouched until the synchronize below.
            unsafe {
                self.inner.stream_read(
                    stream,
                    argument.buffer,
                    argument.offset,
                    bytes.as_mut_ptr(),
                    argument.size,
                )?
            };
            self.inner.stream_synchronize(stream)?;
            for word in bytes.chunks_exact_mut(8) {
                word[0] ^= 1;
            }
            // SAFETY: as above.
            unsafe {
                self.inner
                    .stream_write(stream, argument.buffer, argument.offset, bytes.as_ptr(), argument.size)?
            };
            self.inner.stream_synchronize(stream)?;
        }
        Ok(())
    }
}

impl Backend for BrokenBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: self.name.to_string(),
            ..self.inner.info()
        }
    }

    fn device_count(&self) -> Result<u32> {
        self.inner.device_count()
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        let mut info = self.inner.device_info(index)?;
        info.name = format!("{} ({:?})", info.name, self.fault);
        Ok(info)
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        self.inner.device_open(index)
    }

    fn device_close(&self, device: DeviceHandle) {
        self.inner.device_close(device)
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let buffer = self.inner.buffer_allocate(device, size)?;
        self.buffer_sizes.lock().insert(buffer, size);
        Ok(buffer)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        self.buffer_sizes.lock().remove(&buffer);
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
        // SAFETY: the caller's guarantees are passed on unchanged.
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
        // SAFETY: the caller's guarantees are passed on unchanged.
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
        match self.fault {
            Fault::CopyIgnoresSourceOffset => {
                self.inner
                    .stream_copy(stream, source, 0, destination, destination_offset, size)
            }
            Fault::CopySegfaults => {
                // SAFETY: none; this is the fault. A wild write the compiler cannot prove
                // null, so it stays a real memory access and the process gets SIGSEGV.
                unsafe { std::ptr::write_volatile(std::hint::black_box(16usize) as *mut u64, 1) };
                Ok(())
            }
            _ => self
                .inner
                .stream_copy(stream, source, source_offset, destination, destination_offset, size),
        }
    }

    fn stream_fill(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        match self.fault {
            Fault::FillIgnoresLength => {
                let capacity = self.buffer_sizes.lock().get(&buffer).copied().unwrap_or(offset + size);
                let to_end = (capacity - offset) / pattern.len() as u64 * pattern.len() as u64;
                self.inner
                    .stream_fill(stream, buffer, offset, to_end.max(size), pattern)
            }
            Fault::FillPanics => panic!("fill is broken in this plugin"),
            _ => self.inner.stream_fill(stream, buffer, offset, size, pattern),
        }
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        self.inner.stream_launch(stream, launch)?;
        if self.fault == Fault::F64Wrong && self.f64_kernels.lock().contains(&launch.kernel) {
            self.corrupt_doubles(stream, launch)?;
        }
        Ok(())
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        self.inner.stream_record_event(stream, event)
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        if self.fault == Fault::WaitIgnored {
            return Ok(());
        }
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
        match self.fault {
            Fault::EventNeverSignals => return Ok(false),
            Fault::EventQueryLies => return Ok(true),
            _ => {}
        }
        self.inner.event_query(event)
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        if self.fault == Fault::EventNeverSignals {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        self.inner.event_synchronize(event)
    }

    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        self.inner.event_elapsed_time(start, end)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let module = self.inner.module_load(device, format, code)?;
        let uses_f64 = format == KernelFormat::WGSL && String::from_utf8_lossy(code).contains("f64");
        if uses_f64 {
            self.f64_modules.lock().insert(module);
        }
        Ok(module)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        self.f64_modules.lock().remove(&module);
        self.inner.module_destroy(module)
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let kernel = self.inner.kernel_get(module, name)?;
        if self.f64_modules.lock().contains(&module) {
            self.f64_kernels.lock().insert(kernel);
        }
        Ok(kernel)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        self.f64_kernels.lock().remove(&kernel);
        self.inner.kernel_destroy(kernel)
    }
}

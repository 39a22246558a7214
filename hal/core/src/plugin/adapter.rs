//! The host side: a loaded C ABI table, seen again as a [`Backend`].
//!
//! [`AbiBackend`] is what makes a plugin (Rust or C) and a built-in backend look the same to
//! the rest of xhal. It copies the plugin's table (only the part the plugin's `struct_size`
//! covers), checks that every v1.0 entry is present, and turns statuses and plugin-owned
//! errors back into [`Error`]s, freeing each error through the plugin's own `error_free`.

use crate::backend::ClockSample;
use crate::backend::{
    Backend, BackendInfo, BufferHandle, CommandListHandle, DeviceHandle, DeviceInfo, DeviceType, EventHandle, Features,
    KernelFormat, KernelHandle, LaunchArgs, MemoryUsage, ModuleHandle, StreamHandle, StreamPriorities,
};
use crate::error::{Error, ErrorKind, Result};
use smallvec::SmallVec;
use xhal_abi::*;

/// A plugin's function table, wrapped as a [`Backend`].
pub struct AbiBackend {
    api: XhalPluginApi,
    name: String,
    version: String,
}

impl std::fmt::Debug for AbiBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbiBackend")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("abi", &(self.api.abi_major, self.api.abi_minor))
            .finish()
    }
}

/// Every v1.0 entry of `$api`: its name, its offset in the table, and whether it is present,
/// so that a missing entry, or one beyond a plugin's `struct_size`, can be named.
macro_rules! v1_0_entries {
    ($api:expr) => {
        v1_0_entries!(
            $api,
            error_free,
            device_count,
            device_get_info,
            device_open,
            device_close,
            buffer_allocate,
            buffer_free,
            stream_create,
            stream_destroy,
            stream_write,
            stream_read,
            stream_copy,
            stream_fill,
            stream_launch,
            stream_record_event,
            stream_wait_event,
            stream_synchronize,
            stream_query,
            event_create,
            event_destroy,
            event_query,
            event_synchronize,
            event_elapsed_time,
            module_load,
            module_destroy,
            kernel_get,
            kernel_destroy,
        )
    };
    ($api:expr, $($entry:ident),* $(,)?) => {
        [$((
            stringify!($entry),
            std::mem::offset_of!(XhalPluginApi, $entry),
            $api.$entry.is_some(),
        )),*]
    };
}

/// The part of the table that every ABI version, of every major, begins with: `struct_size`,
/// `abi_major`, `abi_minor`. The host reads it before anything else, so that a plugin of
/// another major is refused by its version, whatever the rest of its table looks like.
const TABLE_HEADER_SIZE: usize = std::mem::offset_of!(XhalPluginApi, plugin_name);

/// Fetches an entry that [`AbiBackend::new`] already proved present.
macro_rules! entry {
    ($self:ident, $entry:ident) => {
        match $self.api.$entry {
            Some(function) => function,
            None => {
                return Err(Error::internal(format!(
                    "plugin `{}` has no `{}` entry",
                    $self.name,
                    stringify!($entry)
                )))
            }
        }
    };
}

/// Reads a plugin string, replacing invalid UTF-8 rather than trusting it.
///
/// # Safety
/// `text` must follow the ABI: `len` readable bytes at `ptr`, or `len` 0.
unsafe fn read_str(text: XhalStr) -> String {
    if text.len > 0 && text.ptr.is_null() {
        return String::new();
    }
    // SAFETY: per the caller's contract.
    String::from_utf8_lossy(unsafe { text.as_bytes() }).into_owned()
}

impl AbiBackend {
    /// Wraps the table a plugin's `xhal_plugin_query` returned.
    ///
    /// # Safety
    /// `table` must be null or point to a table that follows the ABI and stays valid for the
    /// life of the process (the library is never unloaded).
    pub unsafe fn new(table: *const XhalPluginApi) -> Result<AbiBackend> {
        if table.is_null() {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!("xhal_plugin_query returned null: the plugin declined host ABI {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR} or failed to start"),
            ));
        }
        // SAFETY: non-null; struct_size is the first field of every version of the table, of
        // every major.
        let plugin_size = unsafe { std::ptr::addr_of!((*table).struct_size).read() };
        if plugin_size < TABLE_HEADER_SIZE {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!(
                    "plugin table struct_size is {plugin_size} bytes, too small to hold even the header \
                     (struct_size, abi_major, abi_minor: {TABLE_HEADER_SIZE} bytes) that every ABI version begins with"
                ),
            ));
        }
        // SAFETY: the header lies within the plugin's struct_size (checked just above).
        let (plugin_major, plugin_minor) = unsafe {
            (
                std::ptr::addr_of!((*table).abi_major).read(),
                std::ptr::addr_of!((*table).abi_minor).read(),
            )
        };
        if plugin_major != XHAL_ABI_MAJOR {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!(
                    "plugin implements ABI {plugin_major}.{plugin_minor}, this host speaks {XHAL_ABI_MAJOR}.{XHAL_ABI_MINOR}: major versions must match"
                ),
            ));
        }
        // Copy only what both sides know: entries a newer plugin appended are beyond this
        // host's struct, and entries this host knows but an older minor plugin lacks stay null.
        let mut api = XhalPluginApi::without_entries(XhalStr::EMPTY, XhalStr::EMPTY);
        let known = plugin_size.min(std::mem::size_of::<XhalPluginApi>());
        if plugin_size < XHAL_PLUGIN_API_V1_0_SIZE {
            let beyond: Vec<&str> = v1_0_entries!(api)
                .iter()
                .filter(|(_, offset, _)| offset + std::mem::size_of::<usize>() > plugin_size)
                .map(|(name, _, _)| *name)
                .collect();
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!(
                    "plugin table struct_size is {plugin_size} bytes (ABI {plugin_major}.{plugin_minor}); \
                     ABI {XHAL_ABI_MAJOR}.0 needs at least {XHAL_PLUGIN_API_V1_0_SIZE}, and these required entries \
                     lie beyond the plugin's struct_size: {}",
                    beyond.join(", ")
                ),
            ));
        }
        // SAFETY: the plugin promised `plugin_size` readable bytes at `table`, and `known`
        // bytes fit in `api`.
        unsafe {
            std::ptr::copy_nonoverlapping(table.cast::<u8>(), (&mut api as *mut XhalPluginApi).cast::<u8>(), known)
        };
        let missing: Vec<&str> = v1_0_entries!(api)
            .iter()
            .filter(|(_, _, present)| !present)
            .map(|(name, _, _)| *name)
            .collect();
        if !missing.is_empty() {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!("plugin table lacks required ABI 1.0 entries: {}", missing.join(", ")),
            ));
        }
        // SAFETY: static strings of the plugin, per the ABI.
        let name = unsafe { read_str(api.plugin_name) };
        // SAFETY: as above.
        let version = unsafe { read_str(api.plugin_version) };
        if !is_valid_backend_name(&name) {
            return Err(Error::new(
                ErrorKind::PluginLoad,
                format!("plugin name {name:?} is not a backend name: expected lowercase letters, digits, '_' or '-', starting with a letter"),
            ));
        }
        Ok(AbiBackend { api, name, version })
    }

    /// The error for a 1.3 entry the plugin's table does not reach or leaves null.
    fn absent_1_3(&self, entry: &str, what: &str) -> Error {
        Error::unsupported(format!(
            "plugin `{}` (ABI {}.{}) {what}: {entry} is an ABI 1.3 entry it does not provide",
            self.name, self.api.abi_major, self.api.abi_minor
        ))
    }

    /// The 1.4 command-list entries the host calls, or why the plugin has none: a plugin provides
    /// all of them or none (the ABI's rule), so one absent entry means the plugin has none.
    fn command_lists(&self) -> Result<CommandListEntries> {
        let api = &self.api;
        match (
            api.command_list_create,
            api.command_list_append_copy,
            api.command_list_append_fill,
            api.command_list_append_launch,
            api.command_list_finish,
            api.command_list_update_launch,
            api.stream_submit_command_list,
        ) {
            (
                Some(create),
                Some(append_copy),
                Some(append_fill),
                Some(append_launch),
                Some(finish),
                Some(update_launch),
                Some(submit),
            ) => Ok(CommandListEntries {
                create,
                append_copy,
                append_fill,
                append_launch,
                finish,
                update_launch,
                submit,
            }),
            _ => Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) has no command lists: they are ABI 1.4 entries it does not provide \
                 (all of command_list_create .. stream_submit_command_list)",
                self.name, self.api.abi_major, self.api.abi_minor
            ))),
        }
    }

    /// Runs one entry and turns its status into a `Result`.
    fn call(&self, entry: &str, body: impl FnOnce(XhalErrorOut) -> XhalStatus) -> Result<()> {
        match self.call_status(entry, body)? {
            XHAL_STATUS_OK => Ok(()),
            // Only the query entries may answer "not yet": anything else that does would let
            // the host release memory that work still uses.
            status => Err(Error::internal(format!(
                "plugin `{}` returned status {status} (not ready) from {entry}, which must complete or fail",
                self.name
            ))),
        }
    }

    /// Runs a query entry: `Ok(true)` for `XHAL_STATUS_OK`, `Ok(false)` for `XHAL_STATUS_NOT_READY`.
    fn call_query(&self, entry: &str, body: impl FnOnce(XhalErrorOut) -> XhalStatus) -> Result<bool> {
        Ok(self.call_status(entry, body)? == XHAL_STATUS_OK)
    }

    fn call_status(&self, entry: &str, body: impl FnOnce(XhalErrorOut) -> XhalStatus) -> Result<XhalStatus> {
        let mut error: *mut XhalError = std::ptr::null_mut();
        let status = body(&mut error);
        if status == XHAL_STATUS_OK || status == XHAL_STATUS_NOT_READY {
            if !error.is_null() {
                self.free_error(error);
            }
            return Ok(status);
        }
        Err(self.take_error(entry, status, error))
    }

    fn take_error(&self, entry: &str, status: XhalStatus, error: *mut XhalError) -> Error {
        let kind = ErrorKind::from_status(status);
        if error.is_null() {
            return Error::new(
                kind,
                format!(
                    "plugin `{}` {entry} failed with status {status} and no message",
                    self.name
                ),
            );
        }
        // SAFETY: a non-null error is a plugin-owned XhalError, valid until error_free.
        let size = unsafe { (*error).struct_size };
        let text = if size >= XHAL_ERROR_V1_0_SIZE {
            // SAFETY: the struct is large enough to hold `message`, which belongs to the error
            // and lives until error_free below.
            unsafe { read_str((*error).message) }
        } else {
            format!("(malformed error struct of {size} bytes)")
        };
        self.free_error(error);
        Error::new(kind, text)
    }

    fn free_error(&self, error: *mut XhalError) {
        if let Some(free) = self.api.error_free {
            // SAFETY: the error came from this plugin and is freed exactly once.
            unsafe { free(error) };
        }
    }

    /// The plugin's ABI version.
    pub fn abi_version(&self) -> (u32, u32) {
        (self.api.abi_major, self.api.abi_minor)
    }
}

/// Backend names double as file names (`libxhal_<name>.so`) and selector words.
pub fn is_valid_backend_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_' | '-'))
        && name.len() <= 64
}

fn ptr<T>(handle: u64) -> *mut T {
    handle as usize as *mut T
}

fn handle<T>(pointer: *mut T) -> u64 {
    pointer as usize as u64
}

/// Converts a device description read from a plugin.
///
/// # Safety
/// Strings in `raw` must follow the ABI.
pub(crate) unsafe fn device_info_from_abi(raw: &XhalDeviceInfo) -> DeviceInfo {
    let count = (raw.kernel_format_count as usize).min(XHAL_MAX_KERNEL_FORMATS);
    // SAFETY: per the caller's contract, for each string below.
    let (name, vendor, pci, driver) = unsafe {
        (
            read_str(raw.name),
            read_str(raw.vendor),
            read_str(raw.pci_bus_id),
            read_str(raw.driver_version),
        )
    };
    DeviceInfo {
        name,
        vendor,
        vendor_id: raw.vendor_id,
        device_id: raw.device_id,
        device_type: DeviceType::from_abi(raw.device_type),
        uuid: raw.uuid,
        pci_bus_id: if pci.is_empty() { None } else { Some(pci) },
        driver_version: driver,
        total_memory: raw.total_memory,
        free_memory: raw.free_memory,
        max_allocation_size: raw.max_allocation_size,
        max_workgroup_size: raw.max_workgroup_size,
        max_workgroup_invocations: raw.max_workgroup_invocations,
        max_workgroup_count: raw.max_workgroup_count,
        max_workgroup_memory: raw.max_workgroup_memory,
        subgroup_size: raw.subgroup_size,
        max_buffer_arguments: raw.max_buffer_arguments,
        max_scalar_block_size: raw.max_scalar_block_size,
        buffer_offset_alignment: raw.buffer_offset_alignment,
        features: Features(raw.features),
        kernel_formats: raw.kernel_formats[..count].iter().map(|&f| KernelFormat(f)).collect(),
    }
}

impl Backend for AbiBackend {
    fn info(&self) -> BackendInfo {
        BackendInfo {
            name: self.name.clone(),
            version: self.version.clone(),
            abi_version: self.abi_version(),
        }
    }

    fn device_count(&self) -> Result<u32> {
        let function = entry!(self, device_count);
        let mut count = 0u32;
        // SAFETY: count is a valid out pointer; error is handled by `call`.
        self.call("device_count", |error| unsafe { function(&mut count, error) })?;
        Ok(count)
    }

    fn device_info(&self, index: u32) -> Result<DeviceInfo> {
        let function = entry!(self, device_get_info);
        let mut raw = XhalDeviceInfo::new();
        // SAFETY: raw is a v1.0 struct with struct_size set.
        self.call("device_get_info", |error| unsafe { function(index, &mut raw, error) })?;
        // SAFETY: the plugin filled raw following the ABI.
        Ok(unsafe { device_info_from_abi(&raw) })
    }

    fn device_open(&self, index: u32) -> Result<DeviceHandle> {
        let function = entry!(self, device_open);
        let mut device: *mut XhalDevice = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        self.call("device_open", |error| unsafe { function(index, &mut device, error) })?;
        non_null("device_open", device).map(DeviceHandle)
    }

    fn device_close(&self, device: DeviceHandle) {
        if let Some(function) = self.api.device_close {
            // SAFETY: a handle this plugin gave out, closed once.
            unsafe { function(ptr(device.0)) };
        }
    }

    fn device_memory_usage(&self, device: DeviceHandle) -> Result<MemoryUsage> {
        // Added in 1.1: null in a 1.0 table (the host copied only the plugin's struct_size
        // bytes of it), or left null by a plugin that cannot tell.
        let Some(function) = self.api.device_memory_usage else {
            return Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) does not report memory usage: device_memory_usage is an ABI 1.1 entry \
                 it does not provide",
                self.name, self.api.abi_major, self.api.abi_minor
            )));
        };
        let (mut free, mut total) = (0u64, 0u64);
        // SAFETY: valid out pointers; device came from this plugin.
        self.call("device_memory_usage", |error| unsafe {
            function(ptr(device.0), &mut free, &mut total, error)
        })?;
        Ok(MemoryUsage { free, total })
    }

    fn device_clock(&self, device: DeviceHandle) -> Result<ClockSample> {
        // Added in 1.3: null in an older table, or left null by a plugin without device clocks.
        let Some(function) = self.api.device_clock else {
            return Err(self.absent_1_3("device_clock", "has no device clock to calibrate"));
        };
        let (mut device_ns, mut host_ns, mut uncertainty_ns) = (0u64, 0u64, 0u64);
        // SAFETY: valid out pointers; device came from this plugin.
        self.call("device_clock", |error| unsafe {
            function(ptr(device.0), &mut device_ns, &mut host_ns, &mut uncertainty_ns, error)
        })?;
        Ok(ClockSample {
            device_ns,
            host_ns,
            uncertainty_ns,
        })
    }

    fn buffer_allocate(&self, device: DeviceHandle, size: u64) -> Result<BufferHandle> {
        let function = entry!(self, buffer_allocate);
        let mut buffer: *mut XhalBuffer = std::ptr::null_mut();
        // SAFETY: valid out pointer; device came from this plugin.
        self.call("buffer_allocate", |error| unsafe {
            function(ptr(device.0), size, &mut buffer, error)
        })?;
        non_null("buffer_allocate", buffer).map(BufferHandle)
    }

    fn buffer_free(&self, buffer: BufferHandle) {
        if let Some(function) = self.api.buffer_free {
            // SAFETY: a handle this plugin gave out, freed once.
            unsafe { function(ptr(buffer.0)) };
        }
    }

    fn stream_create(&self, device: DeviceHandle) -> Result<StreamHandle> {
        let function = entry!(self, stream_create);
        let mut stream: *mut XhalStream = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        self.call("stream_create", |error| unsafe {
            function(ptr(device.0), &mut stream, error)
        })?;
        non_null("stream_create", stream).map(StreamHandle)
    }

    fn device_stream_priorities(&self, device: DeviceHandle) -> Result<StreamPriorities> {
        let (Some(priorities), Some(_)) = (self.api.device_stream_priorities, self.api.stream_create_with_priority)
        else {
            return Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) schedules every stream alike: device_stream_priorities and \
                 stream_create_with_priority are ABI 1.5 entries it does not provide",
                self.name, self.api.abi_major, self.api.abi_minor
            )));
        };
        let (mut least, mut greatest) = (0i32, 0i32);
        // SAFETY: valid out pointers; the device came from this plugin.
        self.call("device_stream_priorities", |error| unsafe {
            priorities(ptr(device.0), &mut least, &mut greatest, error)
        })?;
        if least != 0 || greatest > 0 {
            return Err(Error::internal(format!(
                "plugin `{}` reported stream priorities from {least} (least) to {greatest} (greatest): the ABI asks \
                 for 0 to a number at most 0",
                self.name
            )));
        }
        Ok(StreamPriorities { least, greatest })
    }

    fn stream_create_with_priority(&self, device: DeviceHandle, priority: i32) -> Result<StreamHandle> {
        let Some(function) = self.api.stream_create_with_priority else {
            return Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) has no stream_create_with_priority (an ABI 1.5 entry)",
                self.name, self.api.abi_major, self.api.abi_minor
            )));
        };
        let mut stream: *mut XhalStream = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        self.call("stream_create_with_priority", |error| unsafe {
            function(ptr(device.0), priority, &mut stream, error)
        })?;
        non_null("stream_create_with_priority", stream).map(StreamHandle)
    }

    fn stream_destroy(&self, stream: StreamHandle) {
        if let Some(function) = self.api.stream_destroy {
            // SAFETY: a handle this plugin gave out, destroyed once.
            unsafe { function(ptr(stream.0)) };
        }
    }

    unsafe fn stream_write(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let function = entry!(self, stream_write);
        // SAFETY: the caller upholds the lifetime of `source` (this fn's contract).
        self.call("stream_write", |error| unsafe {
            function(ptr(stream.0), ptr(buffer.0), offset, source, size, error)
        })?;
        Ok(())
    }

    unsafe fn stream_read(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        let function = entry!(self, stream_read);
        // SAFETY: the caller upholds the lifetime of `destination` (this fn's contract).
        self.call("stream_read", |error| unsafe {
            function(ptr(stream.0), ptr(buffer.0), offset, destination, size, error)
        })?;
        Ok(())
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
        let function = entry!(self, stream_copy);
        // SAFETY: plain values and handles from this plugin.
        self.call("stream_copy", |error| unsafe {
            function(
                ptr(stream.0),
                ptr(source.0),
                source_offset,
                ptr(destination.0),
                destination_offset,
                size,
                error,
            )
        })?;
        Ok(())
    }

    fn stream_fill(
        &self,
        stream: StreamHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let function = entry!(self, stream_fill);
        // SAFETY: pattern is a live slice for the duration of the call; the plugin copies it.
        self.call("stream_fill", |error| unsafe {
            function(
                ptr(stream.0),
                ptr(buffer.0),
                offset,
                size,
                pattern.as_ptr(),
                pattern.len(),
                error,
            )
        })?;
        Ok(())
    }

    fn stream_launch(&self, stream: StreamHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let function = entry!(self, stream_launch);
        let mut buffers = SmallVec::new();
        let raw = raw_launch(launch, &mut buffers)?;
        // SAFETY: raw and the arrays it points to outlive the call; the plugin copies the scalars.
        self.call("stream_launch", |error| unsafe { function(ptr(stream.0), &raw, error) })?;
        Ok(())
    }

    fn stream_record_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let function = entry!(self, stream_record_event);
        // SAFETY: handles from this plugin.
        self.call("stream_record_event", |error| unsafe {
            function(ptr(stream.0), ptr(event.0), error)
        })?;
        Ok(())
    }

    fn stream_wait_event(&self, stream: StreamHandle, event: EventHandle) -> Result<()> {
        let function = entry!(self, stream_wait_event);
        // SAFETY: handles from this plugin.
        self.call("stream_wait_event", |error| unsafe {
            function(ptr(stream.0), ptr(event.0), error)
        })?;
        Ok(())
    }

    fn stream_synchronize(&self, stream: StreamHandle) -> Result<()> {
        let function = entry!(self, stream_synchronize);
        // SAFETY: handle from this plugin.
        self.call("stream_synchronize", |error| unsafe { function(ptr(stream.0), error) })?;
        Ok(())
    }

    fn stream_query(&self, stream: StreamHandle) -> Result<bool> {
        let function = entry!(self, stream_query);
        // SAFETY: handle from this plugin.
        self.call_query("stream_query", |error| unsafe { function(ptr(stream.0), error) })
    }

    fn event_create(&self, device: DeviceHandle, timing: bool) -> Result<EventHandle> {
        let function = entry!(self, event_create);
        let flags = if timing { XHAL_EVENT_FLAG_TIMING } else { 0 };
        let mut event: *mut XhalEvent = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        self.call("event_create", |error| unsafe {
            function(ptr(device.0), flags, &mut event, error)
        })?;
        non_null("event_create", event).map(EventHandle)
    }

    fn event_destroy(&self, event: EventHandle) {
        if let Some(function) = self.api.event_destroy {
            // SAFETY: a handle this plugin gave out, destroyed once.
            unsafe { function(ptr(event.0)) };
        }
    }

    fn event_query(&self, event: EventHandle) -> Result<bool> {
        let function = entry!(self, event_query);
        // SAFETY: handle from this plugin.
        self.call_query("event_query", |error| unsafe { function(ptr(event.0), error) })
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<()> {
        let function = entry!(self, event_synchronize);
        // SAFETY: handle from this plugin.
        self.call("event_synchronize", |error| unsafe { function(ptr(event.0), error) })?;
        Ok(())
    }

    fn event_elapsed_time(&self, start: EventHandle, end: EventHandle) -> Result<u64> {
        let function = entry!(self, event_elapsed_time);
        let mut nanoseconds = 0u64;
        // SAFETY: valid out pointer and handles from this plugin.
        self.call("event_elapsed_time", |error| unsafe {
            function(ptr(start.0), ptr(end.0), &mut nanoseconds, error)
        })?;
        Ok(nanoseconds)
    }

    fn event_timestamp(&self, event: EventHandle) -> Result<u64> {
        let Some(function) = self.api.event_timestamp else {
            return Err(self.absent_1_3("event_timestamp", "has no absolute event timestamps"));
        };
        let mut device_ns = 0u64;
        // SAFETY: valid out pointer; event came from this plugin.
        self.call("event_timestamp", |error| unsafe {
            function(ptr(event.0), &mut device_ns, error)
        })?;
        Ok(device_ns)
    }

    fn module_load(&self, device: DeviceHandle, format: KernelFormat, code: &[u8]) -> Result<ModuleHandle> {
        let function = entry!(self, module_load);
        let mut module: *mut XhalModule = std::ptr::null_mut();
        // SAFETY: code is a live slice for the call; the plugin copies what it keeps.
        self.call("module_load", |error| unsafe {
            function(ptr(device.0), format.0, code.as_ptr(), code.len(), &mut module, error)
        })?;
        non_null("module_load", module).map(ModuleHandle)
    }

    fn module_destroy(&self, module: ModuleHandle) {
        if let Some(function) = self.api.module_destroy {
            // SAFETY: a handle this plugin gave out, destroyed once.
            unsafe { function(ptr(module.0)) };
        }
    }

    fn kernel_get(&self, module: ModuleHandle, name: &str) -> Result<KernelHandle> {
        let function = entry!(self, kernel_get);
        let mut kernel: *mut XhalKernel = std::ptr::null_mut();
        // SAFETY: name is a live str for the call; valid out pointer.
        self.call("kernel_get", |error| unsafe {
            function(ptr(module.0), XhalStr::from_str(name), &mut kernel, error)
        })?;
        non_null("kernel_get", kernel).map(KernelHandle)
    }

    fn kernel_destroy(&self, kernel: KernelHandle) {
        if let Some(function) = self.api.kernel_destroy {
            // SAFETY: a handle this plugin gave out, destroyed once.
            unsafe { function(ptr(kernel.0)) };
        }
    }

    fn command_list_create(&self, device: DeviceHandle) -> Result<CommandListHandle> {
        let function = self.command_lists()?.create;
        let mut list: *mut XhalCommandList = std::ptr::null_mut();
        // SAFETY: valid out pointer; device came from this plugin.
        self.call("command_list_create", |error| unsafe {
            function(ptr(device.0), &mut list, error)
        })?;
        non_null("command_list_create", list).map(CommandListHandle)
    }

    fn command_list_append_copy(
        &self,
        list: CommandListHandle,
        source: BufferHandle,
        source_offset: u64,
        destination: BufferHandle,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        let function = self.command_lists()?.append_copy;
        // SAFETY: handles from this plugin.
        self.call("command_list_append_copy", |error| unsafe {
            function(
                ptr(list.0),
                ptr(source.0),
                source_offset,
                ptr(destination.0),
                destination_offset,
                size,
                error,
            )
        })
    }

    fn command_list_append_fill(
        &self,
        list: CommandListHandle,
        buffer: BufferHandle,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let function = self.command_lists()?.append_fill;
        // SAFETY: pattern is a live slice for the duration of the call; the plugin copies it.
        self.call("command_list_append_fill", |error| unsafe {
            function(
                ptr(list.0),
                ptr(buffer.0),
                offset,
                size,
                pattern.as_ptr(),
                pattern.len(),
                error,
            )
        })
    }

    fn command_list_append_launch(&self, list: CommandListHandle, launch: &LaunchArgs<'_>) -> Result<()> {
        let function = self.command_lists()?.append_launch;
        let mut buffers = SmallVec::new();
        let raw = raw_launch(launch, &mut buffers)?;
        // SAFETY: raw and the arrays it points to outlive the call; the plugin copies them.
        self.call("command_list_append_launch", |error| unsafe {
            function(ptr(list.0), &raw, error)
        })
    }

    fn command_list_finish(&self, list: CommandListHandle) -> Result<()> {
        let function = self.command_lists()?.finish;
        // SAFETY: a handle from this plugin.
        self.call("command_list_finish", |error| unsafe { function(ptr(list.0), error) })
    }

    fn command_list_update_launch(&self, list: CommandListHandle, index: u32, launch: &LaunchArgs<'_>) -> Result<()> {
        let function = self.command_lists()?.update_launch;
        let mut buffers = SmallVec::new();
        let raw = raw_launch(launch, &mut buffers)?;
        // SAFETY: raw and the arrays it points to outlive the call; the plugin copies them.
        self.call("command_list_update_launch", |error| unsafe {
            function(ptr(list.0), index, &raw, error)
        })
    }

    fn stream_submit_command_list(&self, stream: StreamHandle, list: CommandListHandle) -> Result<()> {
        let function = self.command_lists()?.submit;
        // SAFETY: handles from this plugin.
        self.call("stream_submit_command_list", |error| unsafe {
            function(ptr(stream.0), ptr(list.0), error)
        })
    }

    fn host_memory_allocate(&self, device: DeviceHandle, size: u64) -> Result<*mut u8> {
        let (Some(allocate), Some(_)) = (self.api.host_memory_allocate, self.api.host_memory_free) else {
            return Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) has no host memory of its own: host_memory_allocate and host_memory_free \
                 are ABI 1.4 entries it does not provide",
                self.name, self.api.abi_major, self.api.abi_minor
            )));
        };
        let mut pointer: *mut u8 = std::ptr::null_mut();
        // SAFETY: a valid out pointer; the device came from this plugin.
        self.call("host_memory_allocate", |error| unsafe {
            allocate(ptr(device.0), size, &mut pointer, error)
        })?;
        if pointer.is_null() || !(pointer as usize).is_multiple_of(64) {
            return Err(Error::internal(format!(
                "plugin `{}` returned host memory at {pointer:p}: null, or not 64-byte aligned as the ABI asks",
                self.name
            )));
        }
        Ok(pointer)
    }

    // The address is only handed back to the plugin that made it, never dereferenced here.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn host_memory_free(&self, device: DeviceHandle, pointer: *mut u8) {
        if let Some(free) = self.api.host_memory_free {
            // SAFETY: memory this plugin allocated on this device, freed once.
            unsafe { free(ptr(device.0), pointer) };
        }
    }

    fn buffer_map(&self, buffer: BufferHandle, offset: u64, size: u64, flags: u32) -> Result<*mut u8> {
        let (Some(map), Some(_)) = (self.api.buffer_map, self.api.buffer_unmap) else {
            return Err(Error::unsupported(format!(
                "plugin `{}` (ABI {}.{}) cannot map device memory for the host: buffer_map and buffer_unmap are \
                 ABI 1.4 entries it does not provide",
                self.name, self.api.abi_major, self.api.abi_minor
            )));
        };
        let mut pointer: *mut u8 = std::ptr::null_mut();
        // SAFETY: a valid out pointer; the buffer came from this plugin.
        self.call("buffer_map", |error| unsafe {
            map(ptr(buffer.0), offset, size, flags, &mut pointer, error)
        })?;
        if pointer.is_null() {
            return Err(Error::internal(format!(
                "plugin `{}` reported a mapping at a null address",
                self.name
            )));
        }
        Ok(pointer)
    }

    // The address is only handed back to the plugin that made it, never dereferenced here.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn buffer_unmap(&self, buffer: BufferHandle, pointer: *mut u8) -> Result<()> {
        let Some(unmap) = self.api.buffer_unmap else {
            return Err(Error::internal(format!(
                "plugin `{}` has no buffer_unmap for a mapping it made",
                self.name
            )));
        };
        // SAFETY: a mapping this plugin made of a buffer it gave out.
        self.call("buffer_unmap", |error| unsafe { unmap(ptr(buffer.0), pointer, error) })
    }

    fn command_list_destroy(&self, list: CommandListHandle) {
        if let Some(function) = self.api.command_list_destroy {
            // SAFETY: a handle this plugin gave out, destroyed once.
            unsafe { function(ptr(list.0)) };
        }
    }
}

/// A plugin's command-list entries, all present.
struct CommandListEntries {
    create: unsafe extern "C" fn(*mut XhalDevice, *mut *mut XhalCommandList, XhalErrorOut) -> XhalStatus,
    append_copy: unsafe extern "C" fn(
        *mut XhalCommandList,
        *mut XhalBuffer,
        u64,
        *mut XhalBuffer,
        u64,
        u64,
        XhalErrorOut,
    ) -> XhalStatus,
    append_fill: unsafe extern "C" fn(
        *mut XhalCommandList,
        *mut XhalBuffer,
        u64,
        u64,
        *const u8,
        usize,
        XhalErrorOut,
    ) -> XhalStatus,
    append_launch: unsafe extern "C" fn(*mut XhalCommandList, *const XhalLaunchInfo, XhalErrorOut) -> XhalStatus,
    finish: unsafe extern "C" fn(*mut XhalCommandList, XhalErrorOut) -> XhalStatus,
    update_launch: unsafe extern "C" fn(*mut XhalCommandList, u32, *const XhalLaunchInfo, XhalErrorOut) -> XhalStatus,
    submit: unsafe extern "C" fn(*mut XhalStream, *mut XhalCommandList, XhalErrorOut) -> XhalStatus,
}

/// `launch` as the ABI passes it; `buffers` holds the array it points to and must outlive it.
fn raw_launch(launch: &LaunchArgs<'_>, buffers: &mut SmallVec<[XhalBufferArg; 8]>) -> Result<XhalLaunchInfo> {
    buffers.clear();
    buffers.extend(launch.buffers.iter().map(|arg| XhalBufferArg {
        buffer: ptr(arg.buffer.0),
        offset: arg.offset,
        size: arg.size,
    }));
    Ok(XhalLaunchInfo {
        struct_size: XHAL_LAUNCH_INFO_V1_0_SIZE,
        kernel: ptr(launch.kernel.0),
        workgroups: launch.workgroups,
        buffers: if buffers.is_empty() {
            std::ptr::null()
        } else {
            buffers.as_ptr()
        },
        buffer_count: u32::try_from(buffers.len())
            .map_err(|_| Error::invalid_argument(format!("{} buffer arguments do not fit in u32", buffers.len())))?,
        scalars: if launch.scalars.is_empty() {
            std::ptr::null()
        } else {
            launch.scalars.as_ptr()
        },
        scalar_size: launch.scalars.len(),
    })
}

/// A plugin that reports success must hand out a handle; null would alias "no object".
fn non_null<T>(entry: &str, pointer: *mut T) -> Result<u64> {
    if pointer.is_null() {
        Err(Error::internal(format!(
            "plugin {entry} reported success but returned a null handle"
        )))
    } else {
        Ok(handle(pointer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_smaller_than_the_header_is_refused_without_reading_its_version() {
        let table = XhalPluginApi {
            struct_size: 8,
            abi_major: XHAL_ABI_MAJOR + 1,
            ..XhalPluginApi::without_entries(XhalStr::EMPTY, XhalStr::EMPTY)
        };
        // SAFETY: a live table; the host must read no more of it than its struct_size says.
        let error = unsafe { AbiBackend::new(&table) }.expect_err("an 8-byte table is refused");
        assert_eq!(error.kind(), ErrorKind::PluginLoad);
        assert!(
            error
                .message()
                .contains("struct_size is 8 bytes, too small to hold even the header (struct_size, abi_major, abi_minor: 16 bytes)"),
            "{error}"
        );
        assert!(!error.message().contains("implements ABI"), "{error}");
    }
}

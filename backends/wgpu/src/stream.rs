//! Streams over the device's one queue, and the events recorded on them.
//!
//! A stream records its commands into a command encoder and submits the encoder when
//! something needs the work to be on the queue: a read, an event record, a synchronisation,
//! or a full batch. wgpu executes submissions in order and inserts the barriers between
//! them, so everything a stream submits runs after everything submitted before it, from
//! any stream. That makes cross-stream waits simple: an event's record has always been
//! submitted, so the waiting stream's later work, submitted later, runs after it.
//!
//! `queue.write_buffer` data lands before the *next* submission, so a stream submits its
//! recorded commands before it writes; the write then sits between them and what follows.
//!
//! An event is the submission its latest record made, plus the completions (work done, reads
//! copied out) that must finish with it.

use parking_lot::Mutex;
use std::sync::Arc;
use xhal_backend::{DriverEvent, DriverStream, Error, ErrorKind, Features, Launch, Object, Result};

use crate::completion::{settled, Completion};
use crate::device::{BindingKey, DeviceShared, TRANSFER_WORKGROUP};
use crate::memory::{align_down4, align_up4, Buffer};
use crate::module::KernelPipeline;
use crate::staging::staging_size;
use crate::WgpuDriver;

/// Commands recorded before a stream submits on its own, so work starts without a sync. A
/// submission costs tens of microseconds in wgpu; 512 commands make that a fraction of a
/// microsecond each while long launch sequences still start running early.
const BATCH_COMMANDS: u32 = 512;

/// Writes of at least this many bytes go through the device's pool of mapped staging buffers
/// and a copy in the stream's encoder; smaller ones through `queue.write_buffer`, whose
/// per-call staging costs little at that size.
const POOLED_WRITE_BYTES: u64 = 1 << 20;

/// A host pointer that a read callback writes through.
struct HostDestination(*mut u8);

// SAFETY: `stream_read`'s caller keeps the destination valid and untouched by anyone else
// until the read completes; the callback is the only writer.
unsafe impl Send for HostDestination {}

/// A point on the queue that an event names: the submission and what must finish with it.
#[derive(Clone)]
pub(crate) struct Signal {
    submission: wgpu::SubmissionIndex,
    completions: Vec<Arc<Completion>>,
    /// The device's clock at the record, in ticks, once read back; only for timing events.
    pub(crate) timestamp: Option<Arc<Mutex<Option<u64>>>>,
}

impl Signal {
    /// `Some(outcome)` once everything up to the signal has finished.
    pub(crate) fn query(&self, device: &DeviceShared) -> Result<Option<Result<()>>> {
        device.poll()?;
        Ok(match settled(&self.completions) {
            (true, None) => Some(Ok(())),
            (true, Some(error)) => Some(Err(error)),
            (false, _) => None,
        })
    }

    /// Whether everything up to the signal has finished, without polling.
    pub(crate) fn is_settled(&self) -> bool {
        settled(&self.completions).0
    }

    pub(crate) fn wait(&self, device: &DeviceShared) -> Result<()> {
        device.wait(Some(self.submission.clone()))?;
        for completion in &self.completions {
            completion.wait(device)?;
        }
        Ok(())
    }
}

/// A source for the transfer kernel.
enum TransferSource<'a> {
    Buffer { buffer: &'a wgpu::Buffer, offset: u64 },
    Pattern(u32),
}

#[derive(Default)]
struct StreamState {
    encoder: Option<wgpu::CommandEncoder>,
    recorded: u32,
    /// `queue.write_buffer` data that waits for the next submission to reach the device.
    unsubmitted_writes: bool,
    /// Pooled write staging buffers the recorded commands copy from: mapped again for the
    /// pool once the submission that uses them completes.
    write_staging: Vec<wgpu::Buffer>,
    /// Submissions and reads not yet seen to finish.
    in_flight: Vec<Arc<Completion>>,
    last_submission: Option<wgpu::SubmissionIndex>,
    error: Option<Error>,
}

/// An in-order queue of work on one device.
pub struct Stream {
    pub(crate) device: Arc<DeviceShared>,
    state: Mutex<StreamState>,
}

impl Stream {
    /// Runs `enqueue` on the stream's state unless the stream has failed; an error it returns
    /// sticks to the stream, since recorded commands may be lost with it.
    fn with_usable<T>(&self, enqueue: impl FnOnce(&Stream, &mut StreamState) -> Result<T>) -> Result<T> {
        let mut state = self.state.lock();
        if let Some(error) = &state.error {
            return Err(error.clone());
        }
        self.device.check_alive()?;
        let result = enqueue(self, &mut state);
        if let Err(error) = &result {
            state.error = Some(error.clone());
        }
        result
    }

    fn encoder<'s>(&self, state: &'s mut StreamState) -> &'s mut wgpu::CommandEncoder {
        state.encoder.get_or_insert_with(|| {
            self.device
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        })
    }

    /// Counts a recorded command and submits a full batch.
    fn recorded(&self, state: &mut StreamState) -> Result<()> {
        state.recorded += 1;
        if state.recorded >= BATCH_COMMANDS {
            self.submit(state)?;
        }
        Ok(())
    }

    /// Submits what is recorded (possibly nothing, which still flushes pending queue writes)
    /// and returns the completion of everything submitted so far.
    fn submit(&self, state: &mut StreamState) -> Result<Arc<Completion>> {
        let encoder = state.encoder.take();
        state.recorded = 0;
        state.unsubmitted_writes = false;
        let completion = Completion::new();
        let device = &self.device;
        let submission = device.capture("submitting stream work", || {
            let buffers = encoder.map(wgpu::CommandEncoder::finish);
            let index = device.queue.submit(buffers);
            let done = Arc::clone(&completion);
            device.queue.on_submitted_work_done(move || done.complete(Ok(())));
            // wgpu maps a buffer only after the submitted work that uses it has finished.
            for staging in state.write_staging.drain(..) {
                let pool = Arc::clone(&device.write_staging);
                let mapped = staging.clone();
                staging.map_async(wgpu::MapMode::Write, .., move |result| {
                    if result.is_ok() {
                        pool.give_back(mapped);
                    }
                });
            }
            index
        })?;
        state.last_submission = Some(submission);
        state.in_flight.push(Arc::clone(&completion));
        Ok(completion)
    }

    /// Copies whole words into a mapped staging buffer from the device's pool (or a new one)
    /// and records the copy from it into `buffer`, in order with the stream's other commands.
    fn write_through_pool(&self, state: &mut StreamState, buffer: &Buffer, offset: u64, words: &[u8]) -> Result<()> {
        let device = &self.device;
        let size = words.len() as u64;
        let staging = match device.write_staging.take(size) {
            Some(staging) => staging,
            None => device.capture("staging a write", || {
                device.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("xhal write staging"),
                    size: staging_size(size),
                    usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                })
            })?,
        };
        {
            let mut view = staging
                .get_mapped_range_mut(..size)
                .map_err(|error| Error::internal(format!("writing into a staging buffer failed: {error}")))?;
            view.copy_from_slice(words);
        }
        staging.unmap();
        self.encoder(state)
            .copy_buffer_to_buffer(&staging, 0, &buffer.buffer, offset, size);
        state.write_staging.push(staging);
        self.recorded(state)
    }

    /// Writes fewer than 4 bytes that do not fill a word, through a staging word and the
    /// transfer kernel, so the rest of the word keeps its bytes.
    fn write_edge(&self, state: &mut StreamState, buffer: &Buffer, offset: u64, bytes: &[u8]) -> Result<()> {
        let word_start = align_down4(offset);
        let mut staged = [0u8; 8];
        let shift = (offset - word_start) as usize;
        staged[shift..shift + bytes.len()].copy_from_slice(bytes);
        let staged_len = align_up4((shift + bytes.len()) as u64);
        let device = &self.device;
        let staging = device.capture("staging a write", || {
            let staging = device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("xhal write staging"),
                size: staged_len,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            device.queue.write_buffer(&staging, 0, &staged[..staged_len as usize]);
            staging
        })?;
        state.unsubmitted_writes = true;
        self.transfer(
            state,
            &buffer.buffer,
            offset,
            bytes.len() as u64,
            TransferSource::Buffer {
                buffer: &staging,
                offset: shift as u64,
            },
        )
    }

    /// Encodes the transfer kernel over `destination[offset..offset + size]`, in chunks
    /// that fit one storage binding and one dispatch.
    fn transfer(
        &self,
        state: &mut StreamState,
        destination: &wgpu::Buffer,
        offset: u64,
        size: u64,
        source: TransferSource<'_>,
    ) -> Result<()> {
        let device = &self.device;
        let kernel = device.transfer_kernel()?;
        let alignment = u64::from(device.limits.min_storage_buffer_offset_alignment.max(4));
        let largest_binding = device.limits.max_storage_buffer_binding_size.min(64 << 20);
        let chunk = align_down4(largest_binding.saturating_sub(2 * alignment + 8)).max(4);
        let max_groups = u64::from(device.limits.max_compute_workgroups_per_dimension.max(1));
        let mut done = 0;
        while done < size {
            let length = chunk.min(size - done);
            let first = offset + done;
            let last = first + length;
            let first_word = first / 4;
            let word_end = last.div_ceil(4);
            let view_start = first_word * 4 / alignment * alignment;
            let word_count = word_end - first_word;
            let (source_buffer, source_view_start, source_view_size, source_base, pattern, fill) = match &source {
                TransferSource::Buffer { buffer, offset } => {
                    let source_first = offset + done;
                    let view_start = source_first / alignment * alignment;
                    let view_end = align_up4(source_first + length);
                    (
                        *buffer,
                        view_start,
                        view_end - view_start,
                        source_first - view_start,
                        0,
                        0,
                    )
                }
                TransferSource::Pattern(word) => (&device.placeholder, 0, 4, 0, *word, 1),
            };
            let groups = word_count.div_ceil(u64::from(TRANSFER_WORKGROUP));
            let columns = groups.min(max_groups);
            let rows = groups.div_ceil(columns);
            let immediates: [u32; 8] = [
                ((first_word * 4 - view_start) / 4) as u32,
                word_count as u32,
                (first - first_word * 4) as u32,
                (last - first_word * 4) as u32,
                source_base as u32,
                fill,
                pattern,
                (columns * u64::from(TRANSFER_WORKGROUP)) as u32,
            ];
            let immediate_bytes: Vec<u8> = immediates.iter().flat_map(|value| value.to_le_bytes()).collect();
            let bind_group = device.capture("binding a transfer", || {
                device.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &kernel.layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: source_buffer,
                                offset: source_view_start,
                                size: std::num::NonZeroU64::new(source_view_size),
                            }),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: destination,
                                offset: view_start,
                                size: std::num::NonZeroU64::new(word_end * 4 - view_start),
                            }),
                        },
                    ],
                })
            })?;
            {
                let mut pass = self
                    .encoder(state)
                    .begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&kernel.pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.set_immediates(0, &immediate_bytes);
                pass.dispatch_workgroups(columns as u32, rows as u32, 1);
            }
            self.recorded(state)?;
            done += length;
        }
        Ok(())
    }

    /// Writes the device clock into a query, resolved into a mappable buffer it returns.
    fn encode_timestamp(&self, state: &mut StreamState) -> Result<wgpu::Buffer> {
        let device = &self.device;
        let (query_set, resolved, staging) = device.capture("creating a timestamp query", || {
            let query_set = device.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("xhal event"),
                ty: wgpu::QueryType::Timestamp,
                count: 1,
            });
            let resolved = device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("xhal timestamp"),
                size: 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let staging = device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("xhal timestamp staging"),
                size: 8,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (query_set, resolved, staging)
        })?;
        let inside_encoders = device
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
        let encoder = self.encoder(state);
        if inside_encoders {
            encoder.write_timestamp(&query_set, 0);
        } else {
            // An empty pass whose end is timed: the end of a pass follows the earlier work.
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("xhal event"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &query_set,
                    beginning_of_pass_write_index: None,
                    end_of_pass_write_index: Some(0),
                }),
            });
        }
        encoder.resolve_query_set(&query_set, 0..1, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &staging, 0, 8);
        Ok(staging)
    }

    /// One reading of the device's clock, in nanoseconds: a timestamp written on a stream of
    /// its own, submitted, and waited for.
    pub(crate) fn clock_mark(device: &Arc<DeviceShared>) -> Result<u64> {
        let stream = Stream {
            device: Arc::clone(device),
            state: Mutex::new(StreamState::default()),
        };
        let slot = stream.with_usable(|stream, state| {
            let staging = stream.encode_timestamp(state)?;
            stream.submit(state)?;
            stream.read_timestamp(state, staging)
        })?;
        let (submission, completions) = {
            let state = stream.state.lock();
            (state.last_submission.clone(), state.in_flight.clone())
        };
        device.wait(submission)?;
        for completion in &completions {
            completion.wait(device)?;
        }
        let ticks = slot
            .lock()
            .ok_or_else(|| Error::internal("a clock timestamp completed without a value"))?;
        Ok(device.nanoseconds(ticks))
    }

    /// Maps a submitted timestamp's staging buffer; the returned slot fills when it is read.
    fn read_timestamp(&self, state: &mut StreamState, staging: wgpu::Buffer) -> Result<Arc<Mutex<Option<u64>>>> {
        let slot = Arc::new(Mutex::new(None));
        let completion = Completion::new();
        let done = Arc::clone(&completion);
        let filled = Arc::clone(&slot);
        let mapped = staging.clone();
        self.device.capture("reading a timestamp", || {
            staging.map_async(wgpu::MapMode::Read, .., move |result| {
                let outcome = match result {
                    Ok(()) => match mapped.get_mapped_range(..) {
                        Ok(view) => {
                            let mut bytes = [0u8; 8];
                            bytes.copy_from_slice(&view[..8]);
                            drop(view);
                            mapped.unmap();
                            *filled.lock() = Some(u64::from_le_bytes(bytes));
                            Ok(())
                        }
                        Err(error) => Err(Error::internal(format!("reading a timestamp failed: {error}"))),
                    },
                    Err(error) => Err(Error::new(
                        ErrorKind::DeviceLost,
                        format!("mapping a timestamp failed: {error}"),
                    )),
                };
                done.complete(outcome);
            })
        })?;
        state.in_flight.push(completion);
        Ok(slot)
    }
}

impl DriverStream<WgpuDriver> for Stream {
    fn create(_driver: &WgpuDriver, device: &Arc<Object<Arc<DeviceShared>>>) -> Result<Stream> {
        let device: &Arc<DeviceShared> = device;
        device.check_alive()?;
        Ok(Stream {
            device: Arc::clone(device),
            state: Mutex::new(StreamState::default()),
        })
    }

    fn sticky_error(stream: &Arc<Object<Stream>>) -> Result<()> {
        stream.with_usable(|_, _| Ok(()))
    }

    unsafe fn write(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        source: *const u8,
        size: u64,
    ) -> Result<()> {
        let length = usize::try_from(size)
            .map_err(|_| Error::out_of_bounds(format!("a write of {size} bytes exceeds this host's address space")))?;
        // SAFETY: the caller guarantees `size` readable bytes at `source` until the write
        // completes; they are copied into wgpu's staging memory before this call returns.
        let data = unsafe { std::slice::from_raw_parts(source, length) };
        stream.with_usable(|stream, state| {
            let end = offset + size;
            let middle_start = align_up4(offset).min(end);
            let middle_end = align_down4(end).max(middle_start);
            if middle_end > middle_start {
                let middle = &data[(middle_start - offset) as usize..(middle_end - offset) as usize];
                if middle.len() as u64 >= POOLED_WRITE_BYTES {
                    stream.write_through_pool(state, buffer, middle_start, middle)?;
                } else {
                    if state.encoder.is_some() {
                        stream.submit(state)?;
                    }
                    stream.device.capture("writing a buffer", || {
                        stream.device.queue.write_buffer(&buffer.buffer, middle_start, middle)
                    })?;
                    state.unsubmitted_writes = true;
                }
            }
            for (edge_start, edge_end) in [(offset, middle_start), (middle_end.max(middle_start), end)] {
                if edge_end > edge_start {
                    let bytes = &data[(edge_start - offset) as usize..(edge_end - offset) as usize];
                    stream.write_edge(state, buffer, edge_start, bytes)?;
                }
            }
            Ok(())
        })
    }

    /// # Safety
    /// `destination` must stay valid for `size` bytes, untouched by anyone else, until the
    /// read completes.
    unsafe fn read(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        destination: *mut u8,
        size: u64,
    ) -> Result<()> {
        stream.with_usable(|stream, state| {
            let start = align_down4(offset);
            let end = align_up4(offset + size);
            let length = end - start;
            let device = &stream.device;
            let staging = match device.read_staging.take(length) {
                Some(staging) => staging,
                None => device.capture("staging a read", || {
                    device.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("xhal read staging"),
                        size: staging_size(length),
                        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    })
                })?,
            };
            stream
                .encoder(state)
                .copy_buffer_to_buffer(&buffer.buffer, start, &staging, 0, length);
            stream.submit(state)?;
            let completion = Completion::new();
            let done = Arc::clone(&completion);
            let destination = HostDestination(destination);
            let skip = (offset - start) as usize;
            let length_on_host = size as usize;
            let mapped = staging.clone();
            let pool = Arc::clone(&device.read_staging);
            device.capture("mapping a read", || {
                staging.map_async(wgpu::MapMode::Read, ..length, move |result| {
                    let destination = destination;
                    let outcome = match result {
                        Ok(()) => match mapped.get_mapped_range(..length) {
                            Ok(view) => {
                                let source = &view[skip..skip + length_on_host];
                                // SAFETY: `read`'s caller guarantees `length_on_host` writable
                                // bytes at the destination until this completion is set, and
                                // the staging buffer is host memory wgpu does not alias with it.
                                unsafe {
                                    std::ptr::copy_nonoverlapping(source.as_ptr(), destination.0, length_on_host)
                                };
                                drop(view);
                                mapped.unmap();
                                pool.give_back(mapped);
                                Ok(())
                            }
                            Err(error) => Err(Error::internal(format!("reading the staging buffer failed: {error}"))),
                        },
                        Err(error) => Err(Error::new(
                            ErrorKind::DeviceLost,
                            format!("mapping the staging buffer of a read failed: {error}"),
                        )),
                    };
                    done.complete(outcome);
                })
            })?;
            state.in_flight.push(completion);
            Ok(())
        })
    }

    fn copy(
        stream: &Arc<Object<Stream>>,
        source: &Arc<Object<Buffer>>,
        source_offset: u64,
        destination: &Arc<Object<Buffer>>,
        destination_offset: u64,
        size: u64,
    ) -> Result<()> {
        stream.with_usable(|stream, state| {
            let aligned =
                source_offset.is_multiple_of(4) && destination_offset.is_multiple_of(4) && size.is_multiple_of(4);
            if source.serial != destination.serial {
                if aligned {
                    stream.encoder(state).copy_buffer_to_buffer(
                        &source.buffer,
                        source_offset,
                        &destination.buffer,
                        destination_offset,
                        size,
                    );
                    return stream.recorded(state);
                }
                return stream.transfer(
                    state,
                    &destination.buffer,
                    destination_offset,
                    size,
                    TransferSource::Buffer {
                        buffer: &source.buffer,
                        offset: source_offset,
                    },
                );
            }
            // wgpu never copies within one buffer, and the ranges may overlap: go through
            // a temporary copy of the source words.
            let start = align_down4(source_offset);
            let end = align_up4(source_offset + size);
            let device = &stream.device;
            let temporary = device.capture("allocating a copy buffer", || {
                device.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("xhal copy"),
                    size: end - start,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            })?;
            stream
                .encoder(state)
                .copy_buffer_to_buffer(&source.buffer, start, &temporary, 0, end - start);
            if aligned {
                stream.encoder(state).copy_buffer_to_buffer(
                    &temporary,
                    0,
                    &destination.buffer,
                    destination_offset,
                    size,
                );
                return stream.recorded(state);
            }
            stream.transfer(
                state,
                &destination.buffer,
                destination_offset,
                size,
                TransferSource::Buffer {
                    buffer: &temporary,
                    offset: source_offset - start,
                },
            )
        })
    }

    fn fill(
        stream: &Arc<Object<Stream>>,
        buffer: &Arc<Object<Buffer>>,
        offset: u64,
        size: u64,
        pattern: &[u8],
    ) -> Result<()> {
        let mut word = [0u8; 4];
        for (index, byte) in word.iter_mut().enumerate() {
            *byte = pattern[index % pattern.len()];
        }
        let word = u32::from_le_bytes(word);
        stream.with_usable(|stream, state| {
            if word == 0 && offset.is_multiple_of(4) && size.is_multiple_of(4) {
                stream.encoder(state).clear_buffer(&buffer.buffer, offset, Some(size));
                return stream.recorded(state);
            }
            stream.transfer(state, &buffer.buffer, offset, size, TransferSource::Pattern(word))
        })
    }

    fn launch(stream: &Arc<Object<Stream>>, launch: &Launch<'_, WgpuDriver>) -> Result<()> {
        let kernel: &KernelPipeline = launch.kernel;
        let (workgroups, buffers, scalars) = (launch.workgroups, launch.buffers, launch.scalars);
        kernel.check_launch(workgroups, buffers.len())?;
        stream.with_usable(|stream, state| {
            let device = &stream.device;
            let bind_group = match &kernel.bind_group_layout {
                None => None,
                Some(layout) => {
                    // Storage bindings are whole words; every WGSL storage type's stride is a
                    // multiple of 4, so no element is lost.
                    let key: Vec<BindingKey> = buffers
                        .iter()
                        .map(|view| (view.buffer.serial, view.offset, align_down4(view.size).max(4)))
                        .collect();
                    match device.cached_bind_group(kernel.serial, &key) {
                        Some(group) => Some(group),
                        None => {
                            let entries: Vec<wgpu::BindGroupEntry> = buffers
                                .iter()
                                .zip(&key)
                                .enumerate()
                                .map(|(binding, (view, (_, offset, size)))| wgpu::BindGroupEntry {
                                    binding: binding as u32,
                                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                        buffer: &view.buffer.buffer,
                                        offset: *offset,
                                        size: std::num::NonZeroU64::new(*size),
                                    }),
                                })
                                .collect();
                            let group =
                                device.capture(&format!("binding the buffers of kernel `{}`", kernel.name), || {
                                    device.device.create_bind_group(&wgpu::BindGroupDescriptor {
                                        label: None,
                                        layout,
                                        entries: &entries,
                                    })
                                })?;
                            device.cache_bind_group(kernel.serial, key, group.clone());
                            Some(group)
                        }
                    }
                }
            };
            if workgroups.contains(&0) {
                return Ok(());
            }
            let mut immediates = scalars.to_vec();
            immediates.resize(kernel.immediate_size as usize, 0);
            {
                let mut pass = stream
                    .encoder(state)
                    .begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&kernel.pipeline);
                if let Some(bind_group) = &bind_group {
                    pass.set_bind_group(0, bind_group, &[]);
                }
                if !immediates.is_empty() {
                    pass.set_immediates(0, &immediates);
                }
                pass.dispatch_workgroups(workgroups[0], workgroups[1], workgroups[2]);
            }
            stream.recorded(state)
        })
    }

    /// Submits everything so far and makes that the event's latest signal; for a timing
    /// event, a timestamp is written after the stream's earlier commands and read back.
    fn record_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let timing = event.timing;
        let signal = stream.with_usable(|stream, state| {
            let timestamp = if timing {
                Some(stream.encode_timestamp(state)?)
            } else {
                None
            };
            stream.submit(state)?;
            let ticks = match timestamp {
                None => None,
                Some(staging) => Some(stream.read_timestamp(state, staging)?),
            };
            state.in_flight.retain(|completion| completion.peek().is_none());
            let submission = state
                .last_submission
                .clone()
                .ok_or_else(|| Error::internal("a stream submitted work but has no submission index"))?;
            Ok(Signal {
                submission,
                completions: state.in_flight.clone(),
                timestamp: ticks,
            })
        })?;
        *event.latest.lock() = Some(signal);
        Ok(())
    }

    /// Orders this stream's later work after the event's latest signal. The signal's work is
    /// already submitted, and this stream's later work is submitted later, so the queue orders
    /// them; only a failure of the awaited work has to be carried over.
    fn wait_event(stream: &Arc<Object<Stream>>, event: &Arc<Object<Event>>) -> Result<()> {
        let Some(signal) = event.latest() else {
            return Self::sticky_error(stream);
        };
        let event_id = event.handle();
        stream.with_usable(|_, state| {
            if let (_, Some(error)) = settled(&signal.completions) {
                state.error = Some(error.context(format!(
                    "dependency failed: event {event_id:#x} was recorded on a stream that had failed"
                )));
            }
            Ok(())
        })
    }

    fn synchronize(stream: &Arc<Object<Stream>>) -> Result<()> {
        let (submission, completions) = {
            let mut state = stream.state.lock();
            if (state.encoder.is_some() || state.unsubmitted_writes) && state.error.is_none() {
                if let Err(error) = stream.submit(&mut state) {
                    state.error = Some(error);
                }
            }
            (state.last_submission.clone(), state.in_flight.clone())
        };
        let mut failure = stream.device.wait(submission).err();
        for completion in &completions {
            if let Err(error) = completion.wait(&stream.device) {
                failure.get_or_insert(error);
            }
        }
        if let Some(error) = stream.device.take_uncaptured() {
            failure.get_or_insert(error);
        }
        let mut state = stream.state.lock();
        state
            .in_flight
            .retain(|completion| !completions.iter().any(|waited| Arc::ptr_eq(waited, completion)));
        if let Some(error) = failure {
            state.error.get_or_insert(error);
        }
        match &state.error {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    fn query(stream: &Arc<Object<Stream>>) -> Result<bool> {
        let mut state = stream.state.lock();
        if (state.encoder.is_some() || state.unsubmitted_writes) && state.error.is_none() {
            if let Err(error) = stream.submit(&mut state) {
                state.error = Some(error);
            }
        }
        if let Some(error) = &state.error {
            return Err(error.clone());
        }
        stream.device.poll()?;
        let (all, error) = settled(&state.in_flight);
        if let Some(error) = error {
            state.error = Some(error.clone());
            return Err(error);
        }
        if all {
            state.in_flight.clear();
        }
        Ok(all)
    }
}

/// An event. Each record replaces the latest signal; waits and queries take the signal
/// current at the time of the call. Messages name the event by its handle.
pub struct Event {
    pub(crate) device: Arc<DeviceShared>,
    pub(crate) timing: bool,
    latest: Mutex<Option<Signal>>,
}

impl Event {
    fn latest(&self) -> Option<Signal> {
        self.latest.lock().clone()
    }

    /// The device clock at the latest record, which must have completed.
    fn completed_timestamp(&self, handle: u64) -> Result<u64> {
        let Some(signal) = self.latest() else {
            return Err(Error::invalid_argument(format!(
                "event {handle:#x} was never recorded, so it has no time"
            )));
        };
        if !signal.is_settled() {
            self.device.poll()?;
        }
        let ticks = signal.timestamp.as_ref().and_then(|slot| *slot.lock());
        ticks.ok_or_else(|| {
            Error::invalid_argument(format!(
                "event {handle:#x} has not completed yet; wait for it before asking for elapsed time"
            ))
        })
    }
}

impl DriverEvent<WgpuDriver> for Event {
    /// An event that was never recorded; `timing` needs a device with timestamps.
    fn create(_driver: &WgpuDriver, device: &Arc<Object<Arc<DeviceShared>>>, timing: bool) -> Result<Event> {
        let device: &Arc<DeviceShared> = device;
        if timing && !device.info.features.contains(Features::TIMESTAMPS) {
            return Err(Error::unsupported(format!(
                "{} has no timestamps; create the event without timing",
                device.name()
            )));
        }
        Ok(Event {
            device: Arc::clone(device),
            timing,
            latest: Mutex::new(None),
        })
    }

    fn query(event: &Arc<Object<Event>>) -> Result<bool> {
        let handle = event.handle();
        let Some(signal) = event.latest() else {
            return Ok(true);
        };
        match signal.query(&event.device)? {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(error)) => Err(event_failed(handle, error)),
        }
    }

    fn synchronize(event: &Arc<Object<Event>>) -> Result<()> {
        let handle = event.handle();
        match event.latest() {
            None => Ok(()),
            Some(signal) => signal.wait(&event.device).map_err(|error| event_failed(handle, error)),
        }
    }

    /// Nanoseconds from `start`'s latest record to `end`'s; both must be completed timing
    /// events.
    fn elapsed_time(start: &Arc<Object<Event>>, end: &Arc<Object<Event>>) -> Result<u64> {
        if !start.timing || !end.timing {
            return Err(Error::invalid_argument(format!(
                "elapsed time needs two events created with timing; event {:#x} or {:#x} has none",
                start.handle(),
                end.handle()
            )));
        }
        let start_ticks = start.completed_timestamp(start.handle())?;
        let end_ticks = end.completed_timestamp(end.handle())?;
        if end_ticks < start_ticks {
            return Err(Error::invalid_argument(format!(
                "event {:#x} completed before event {:#x}; elapsed time runs from the earlier to the later",
                end.handle(),
                start.handle()
            )));
        }
        let period = f64::from(start.device.queue.get_timestamp_period());
        Ok(((end_ticks - start_ticks) as f64 * period).round() as u64)
    }

    /// The record's timestamp, in nanoseconds of the device's clock.
    fn timestamp(event: &Arc<Object<Event>>) -> Result<u64> {
        if !event.timing {
            return Err(Error::invalid_argument(format!(
                "event {:#x} was created without timing, so it has no timestamp",
                event.handle()
            )));
        }
        let ticks = event.completed_timestamp(event.handle())?;
        Ok(event.device.nanoseconds(ticks))
    }
}

fn event_failed(handle: u64, error: Error) -> Error {
    error.context(format!("event {handle:#x} completed with an error"))
}

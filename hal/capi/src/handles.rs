//! The table of live objects behind every handle.
//!
//! A handle is `(generation << 32) | (slot + 1)` cast to a pointer, never the address of an
//! object: looking it up checks that the slot holds an object of the expected kind and of the
//! same generation. A destroyed handle, a handle used after its slot was reused, a null one
//! or one of another kind is therefore an error that names what it is, not a use of freed
//! memory. The table also maps buffer addresses back to buffers.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

use crate::graph::GraphObject;
use crate::kernel::{KernelObject, ModuleObject};
use crate::memory::BufferObject;
use crate::pinned::PinnedObject;
use crate::runtime::{DeviceObject, RuntimeObject};
use crate::stream::{EventObject, StreamObject};
use crate::Result;

/// One live object.
#[derive(Clone)]
pub(crate) enum Object {
    Runtime(Arc<RuntimeObject>),
    Device(Arc<DeviceObject>),
    Buffer(Arc<BufferObject>),
    Stream(Arc<StreamObject>),
    Event(Arc<EventObject>),
    Module(Arc<ModuleObject>),
    Kernel(Arc<KernelObject>),
    Pinned(Arc<PinnedObject>),
    Graph(Arc<GraphObject>),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::Runtime(_) => "runtime",
            Object::Device(_) => "device",
            Object::Buffer(_) => "buffer",
            Object::Stream(_) => "stream",
            Object::Event(_) => "event",
            Object::Module(_) => "module",
            Object::Kernel(_) => "kernel",
            Object::Pinned(_) => "pinned memory",
            Object::Graph(_) => "graph",
        }
    }
}

struct Slot {
    generation: u32,
    object: Option<Object>,
}

#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Buffer base address -> (end address, handle), for resolving addresses.
    addresses: BTreeMap<u64, (u64, usize)>,
    /// Pinned memory's first host address -> (end address, handle).
    pinned: BTreeMap<u64, (u64, usize)>,
}

static TABLE: Mutex<Table> = Mutex::new(Table {
    slots: Vec::new(),
    free: Vec::new(),
    addresses: BTreeMap::new(),
    pinned: BTreeMap::new(),
});

fn split(handle: usize) -> Option<(usize, u32)> {
    let raw = handle as u64;
    let slot = (raw & 0xffff_ffff).checked_sub(1)?;
    Some((slot as usize, (raw >> 32) as u32))
}

fn invalid_handle(what: &str, message: String) -> xhal::Error {
    xhal::Error::new(xhal::ErrorKind::InvalidHandle, format!("{what}: {message}"))
}

impl Table {
    fn get(&self, handle: usize, what: &str) -> Result<&Object> {
        if handle == 0 {
            return Err(invalid_handle(what, "a null handle".to_owned()));
        }
        let Some((slot, generation)) = split(handle) else {
            return Err(invalid_handle(
                what,
                format!("{handle:#x} is not a handle from this library"),
            ));
        };
        match self.slots.get(slot) {
            Some(Slot {
                generation: current,
                object: Some(object),
            }) if *current == generation => Ok(object),
            Some(_) => Err(invalid_handle(
                what,
                format!("handle {handle:#x} was destroyed (or never made by this library)"),
            )),
            None => Err(invalid_handle(
                what,
                format!("{handle:#x} is not a handle from this library"),
            )),
        }
    }
}

/// Registers `object` and returns its handle.
pub(crate) fn insert(object: Object) -> usize {
    let mut table = TABLE.lock();
    let slot = match table.free.pop() {
        Some(slot) => {
            table.slots[slot as usize].object = Some(object);
            slot
        }
        None => {
            table.slots.push(Slot {
                generation: 1,
                object: Some(object),
            });
            (table.slots.len() - 1) as u32
        }
    };
    let generation = table.slots[slot as usize].generation;
    ((u64::from(generation) << 32) | (u64::from(slot) + 1)) as usize
}

/// The object of `handle`, which must be live.
pub(crate) fn get(handle: usize, what: &str) -> Result<Object> {
    TABLE.lock().get(handle, what).cloned()
}

/// Removes the object of `handle` and returns it. A null handle is `Ok(None)`, as destroy
/// functions accept null.
pub(crate) fn remove(handle: usize, expected: &str, what: &str) -> Result<Option<Object>> {
    if handle == 0 {
        return Ok(None);
    }
    let mut table = TABLE.lock();
    let kind = table.get(handle, what)?.kind();
    if kind != expected {
        return Err(invalid_handle(
            what,
            format!("handle {handle:#x} is a {kind}, not a {expected}"),
        ));
    }
    let Some((slot, _)) = split(handle) else {
        return Ok(None);
    };
    let entry = &mut table.slots[slot];
    let object = entry.object.take();
    // A new generation makes every copy of the old handle fail its lookup.
    entry.generation = entry.generation.wrapping_add(1).max(1);
    table.free.push(slot as u32);
    if let Some(Object::Buffer(buffer)) = &object {
        table.addresses.remove(&buffer.address);
    }
    if let Some(Object::Pinned(pinned)) = &object {
        table.pinned.remove(&pinned.address);
    }
    Ok(object)
}

/// Records that the buffer of `handle` occupies addresses `base..end`.
pub(crate) fn register_address(base: u64, end: u64, handle: usize) {
    TABLE.lock().addresses.insert(base, (end, handle));
}

/// The buffer handle whose addresses hold `address` (its end counts, for empty views at the
/// end), and the offset of `address` in it.
pub(crate) fn resolve_address(address: u64) -> Option<(usize, u64)> {
    let table = TABLE.lock();
    let (&base, &(end, handle)) = table.addresses.range(..=address).next_back()?;
    (address <= end).then_some((handle, address - base))
}

/// Records that the pinned memory of `handle` occupies host addresses `base..end`.
pub(crate) fn register_pinned(base: u64, end: u64, handle: usize) {
    TABLE.lock().pinned.insert(base, (end, handle));
}

/// The pinned memory handle whose host addresses hold `address` (its end counts), and the
/// offset of `address` in it.
pub(crate) fn resolve_pinned(address: u64) -> Option<(usize, u64)> {
    let table = TABLE.lock();
    let (&base, &(end, handle)) = table.pinned.range(..=address).next_back()?;
    (address <= end).then_some((handle, address - base))
}

macro_rules! getter {
    ($name:ident, $variant:ident, $ty:ty, $kind:literal) => {
        /// The live object of this kind behind `handle`.
        pub(crate) fn $name(handle: usize, what: &str) -> Result<Arc<$ty>> {
            match get(handle, what)? {
                Object::$variant(object) => Ok(object),
                other => Err(invalid_handle(
                    what,
                    format!("handle {handle:#x} is a {}, not a {}", other.kind(), $kind),
                )),
            }
        }
    };
}

getter!(runtime, Runtime, RuntimeObject, "runtime");
getter!(device, Device, DeviceObject, "device");
getter!(buffer, Buffer, BufferObject, "buffer");
getter!(stream, Stream, StreamObject, "stream");
getter!(event, Event, EventObject, "event");
getter!(module, Module, ModuleObject, "module");
getter!(kernel, Kernel, KernelObject, "kernel");
getter!(pinned, Pinned, PinnedObject, "pinned memory");
getter!(graph, Graph, GraphObject, "graph");

/// Several buffers at once, under one lock: what a launch binds. Each handle comes with a key
/// that `name` turns into the argument's name, written only for an error.
pub(crate) fn buffers<K: Copy>(
    handles: impl Iterator<Item = (usize, K)>,
    name: impl Fn(K) -> String,
) -> Result<SmallVec<[Arc<BufferObject>; 8]>> {
    let table = TABLE.lock();
    handles
        .map(|(handle, key)| match table.get(handle, "") {
            Ok(Object::Buffer(buffer)) => Ok(Arc::clone(buffer)),
            Ok(other) => Err(invalid_handle(
                &name(key),
                format!("handle {handle:#x} is a {}, not a buffer", other.kind()),
            )),
            Err(_) => match table.get(handle, &name(key)) {
                Err(error) => Err(error),
                Ok(_) => Err(xhal::Error::internal(
                    "a buffer handle both failed and passed its lookup",
                )),
            },
        })
        .collect()
}

//! Opaque handles and the tables that resolve them, for a backend written in Rust.
//!
//! A handle is a non-zero `u64`: the object kind in the top byte and a serial number from one
//! process-wide counter in the rest. Serials are never reused, so a stale handle can never
//! alias a newer object, and the kind byte lets a wrong-kind handle be reported as exactly
//! that ("handle 0x.. is an event, expected a buffer") rather than as "not found".

use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Hashes a handle with one multiply. Handles are serial numbers, not attacker-chosen keys
/// that could flood a bucket, and every backend call looks one up, so SipHash's cost (and,
/// in the plugin build, its out-of-line calls) would dominate a trivial call.
#[derive(Default)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, value: u64) {
        // Fibonacci hashing spreads consecutive serials over the high bits the table uses.
        self.0 = (self.0 ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The kinds of object a handle can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// An opened device.
    Device,
    /// A device allocation.
    Buffer,
    /// An in-order queue of work.
    Stream,
    /// A point in a stream.
    Event,
    /// Loaded kernel code.
    Module,
    /// One entry point of a module.
    Kernel,
    /// A recorded command list.
    CommandList,
}

impl ObjectKind {
    const ALL: [ObjectKind; 7] = [
        ObjectKind::Device,
        ObjectKind::Buffer,
        ObjectKind::Stream,
        ObjectKind::Event,
        ObjectKind::Module,
        ObjectKind::Kernel,
        ObjectKind::CommandList,
    ];

    /// The value stored in a handle's top byte; 0 is left unused so no handle of any kind is 0.
    fn tag(self) -> u64 {
        match self {
            ObjectKind::Device => 1,
            ObjectKind::Buffer => 2,
            ObjectKind::Stream => 3,
            ObjectKind::Event => 4,
            ObjectKind::Module => 5,
            ObjectKind::Kernel => 6,
            ObjectKind::CommandList => 7,
        }
    }

    fn from_tag(tag: u64) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|kind| kind.tag() == tag)
    }

    /// `device`, `buffer`, `stream`, `event`, `module` or `kernel`.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Device => "device",
            ObjectKind::Buffer => "buffer",
            ObjectKind::Stream => "stream",
            ObjectKind::Event => "event",
            ObjectKind::Module => "module",
            ObjectKind::Kernel => "kernel",
            ObjectKind::CommandList => "command list",
        }
    }

    fn with_article(self) -> &'static str {
        match self {
            ObjectKind::Device => "a device",
            ObjectKind::Buffer => "a buffer",
            ObjectKind::Stream => "a stream",
            ObjectKind::Event => "an event",
            ObjectKind::Module => "a module",
            ObjectKind::Kernel => "a kernel",
            ObjectKind::CommandList => "a command list",
        }
    }

    /// How an object of this kind stops existing, for "was freed" / "was closed" messages.
    fn ended(self) -> &'static str {
        match self {
            ObjectKind::Device => "closed",
            ObjectKind::Buffer => "freed",
            _ => "destroyed",
        }
    }
}

const TAG_SHIFT: u32 = 56;
const SERIAL_LIMIT: u64 = 1 << TAG_SHIFT;

/// Shared by every backend instance in the process, so a handle from one instance handed to
/// another is reported as unknown instead of silently naming a different object.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

fn issue(backend: &str, kind: ObjectKind) -> Result<u64> {
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
    if serial >= SERIAL_LIMIT {
        return Err(Error::internal(format!(
            "the {backend} backend ran out of handle serial numbers ({SERIAL_LIMIT} issued)"
        )));
    }
    Ok((kind.tag() << TAG_SHIFT) | serial)
}

/// The kind encoded in `raw`, if it is one this backend issues.
pub fn kind_of(raw: u64) -> Option<ObjectKind> {
    ObjectKind::from_tag(raw >> TAG_SHIFT)
}

/// Live objects of one kind, by handle.
pub struct HandleTable<T> {
    backend: &'static str,
    kind: ObjectKind,
    live: RwLock<HashMap<u64, Arc<T>, BuildHasherDefault<HandleHasher>>>,
}

impl<T> HandleTable<T> {
    /// An empty table of `kind` objects for the backend named `backend` (errors name it).
    pub fn new(backend: &'static str, kind: ObjectKind) -> HandleTable<T> {
        HandleTable {
            backend,
            kind,
            live: RwLock::new(HashMap::default()),
        }
    }

    /// Issues a handle for `value` and makes it live.
    pub fn insert(&self, value: T) -> Result<u64> {
        self.insert_with(|_| Ok(value))
    }

    /// Issues a handle, builds the object (which may want to know its own handle) and makes it live.
    pub fn insert_with(&self, build: impl FnOnce(u64) -> Result<T>) -> Result<u64> {
        let raw = issue(self.backend, self.kind)?;
        let object = Arc::new(build(raw)?);
        self.live.write().insert(raw, object);
        Ok(raw)
    }

    /// Issues another handle for an object that is live already (a device opened twice).
    pub fn insert_shared(&self, object: Arc<T>) -> Result<u64> {
        let raw = issue(self.backend, self.kind)?;
        self.live.write().insert(raw, object);
        Ok(raw)
    }

    /// The live object named by `raw`, or an `InvalidHandle` error saying why there is none.
    pub fn get(&self, raw: u64) -> Result<Arc<T>> {
        if let Some(object) = self.live.read().get(&raw) {
            return Ok(Arc::clone(object));
        }
        Err(self.explain_missing(raw))
    }

    /// Takes the object out of the table; it lives on while queued work still holds it.
    pub fn remove(&self, raw: u64) -> Result<Arc<T>> {
        if let Some(object) = self.live.write().remove(&raw) {
            return Ok(object);
        }
        Err(self.explain_missing(raw))
    }

    /// Empties the table, for shutting the backend down.
    pub fn drain(&self) -> Vec<Arc<T>> {
        self.live.write().drain().map(|(_, object)| object).collect()
    }

    /// Live objects.
    pub fn len(&self) -> usize {
        self.live.read().len()
    }

    /// True when no object is live.
    pub fn is_empty(&self) -> bool {
        self.live.read().is_empty()
    }

    fn explain_missing(&self, raw: u64) -> Error {
        let expected = self.kind.with_article();
        if raw == 0 {
            return Error::invalid_handle(format!("handle 0x0 is null, expected {expected}"));
        }
        match kind_of(raw) {
            None => Error::invalid_handle(format!(
                "handle {raw:#x} was not issued by the xhal {} backend, expected {expected}",
                self.backend
            )),
            Some(actual) if actual != self.kind => Error::invalid_handle(format!(
                "handle {raw:#x} is {}, expected {expected}",
                actual.with_article()
            )),
            Some(kind) => Error::invalid_handle(format!(
                "{} handle {raw:#x} is not live: it was {} or never issued by this backend",
                kind.name(),
                kind.ended()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn handles_are_unique_non_zero_and_carry_their_kind() {
        let table: HandleTable<u32> = HandleTable::new("cpu", ObjectKind::Event);
        let first = table.insert_with(|_| Ok(1)).unwrap();
        let second = table.insert_with(|_| Ok(2)).unwrap();
        assert_ne!(first, 0);
        assert_ne!(first, second);
        assert_eq!(kind_of(first), Some(ObjectKind::Event));
        assert_eq!(*table.get(second).unwrap(), 2);
    }

    #[test]
    fn removed_handles_stay_dead() {
        let table: HandleTable<u32> = HandleTable::new("cpu", ObjectKind::Buffer);
        let raw = table.insert_with(|_| Ok(7)).unwrap();
        table.remove(raw).unwrap();
        let error = table.get(raw).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidHandle);
        assert!(error.message().contains(&format!("{raw:#x}")), "{error}");
        assert!(error.message().contains("freed"), "{error}");
        let again = table.insert_with(|_| Ok(8)).unwrap();
        assert_ne!(again, raw, "a serial must never be reused");
    }

    #[test]
    fn wrong_kind_foreign_and_null_handles_are_named() {
        let events: HandleTable<u32> = HandleTable::new("cpu", ObjectKind::Event);
        let buffers: HandleTable<u32> = HandleTable::new("cpu", ObjectKind::Buffer);
        let event = events.insert_with(|_| Ok(0)).unwrap();
        let wrong = buffers.get(event).unwrap_err();
        assert_eq!(wrong.kind(), ErrorKind::InvalidHandle);
        assert_eq!(
            wrong.message(),
            format!("handle {event:#x} is an event, expected a buffer")
        );
        let foreign = buffers.get(0xff00_0000_0000_0001).unwrap_err();
        assert!(foreign.message().contains("not issued"), "{foreign}");
        let null = buffers.get(0).unwrap_err();
        assert!(null.message().contains("null"), "{null}");
    }
}

//! Opaque handles and the tables that resolve them.
//!
//! A handle is a non-zero `u64`: the object kind in the top byte and a serial number from one
//! process-wide counter in the rest, so a stale handle never aliases a newer object and a
//! handle of the wrong kind is reported as exactly that.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xhal_core::{Error, Result};

/// Hashes a handle with one multiply. Handles are serial numbers, not attacker-chosen keys,
/// and every backend call looks one up, so SipHash's cost would show in trivial calls.
#[derive(Default)]
pub(crate) struct HandleHasher(u64);

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
pub(crate) enum ObjectKind {
    Device,
    Buffer,
    Stream,
    Event,
    Module,
    Kernel,
}

impl ObjectKind {
    const ALL: [ObjectKind; 6] = [
        ObjectKind::Device,
        ObjectKind::Buffer,
        ObjectKind::Stream,
        ObjectKind::Event,
        ObjectKind::Module,
        ObjectKind::Kernel,
    ];

    fn tag(self) -> u64 {
        match self {
            ObjectKind::Device => 0x11,
            ObjectKind::Buffer => 0x12,
            ObjectKind::Stream => 0x13,
            ObjectKind::Event => 0x14,
            ObjectKind::Module => 0x15,
            ObjectKind::Kernel => 0x16,
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
        }
    }
}

const TAG_SHIFT: u32 = 56;
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// Live objects of one kind, by handle.
pub(crate) struct HandleTable<T> {
    kind: ObjectKind,
    live: RwLock<HashMap<u64, Arc<T>, BuildHasherDefault<HandleHasher>>>,
}

impl<T> HandleTable<T> {
    pub(crate) fn new(kind: ObjectKind) -> HandleTable<T> {
        HandleTable {
            kind,
            live: RwLock::new(HashMap::default()),
        }
    }

    /// Makes `object` live under a fresh handle.
    pub(crate) fn insert(&self, object: Arc<T>) -> u64 {
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed) & ((1 << TAG_SHIFT) - 1);
        let raw = (self.kind.tag() << TAG_SHIFT) | serial;
        self.live.write().insert(raw, object);
        raw
    }

    /// The live object named by `raw`, or an `InvalidHandle` error saying why there is none.
    pub(crate) fn get(&self, raw: u64) -> Result<Arc<T>> {
        if let Some(object) = self.live.read().get(&raw) {
            return Ok(Arc::clone(object));
        }
        Err(self.explain_missing(raw))
    }

    /// Takes the object out of the table; it lives on while queued work still holds it.
    pub(crate) fn remove(&self, raw: u64) -> Option<Arc<T>> {
        if raw == 0 {
            return None;
        }
        let removed = self.live.write().remove(&raw);
        if removed.is_none() {
            tracing::warn!(error = %self.explain_missing(raw), "ignored a destroy call");
        }
        removed
    }

    /// Empties the table, for shutting the backend down.
    pub(crate) fn drain(&self) -> Vec<Arc<T>> {
        self.live.write().drain().map(|(_, object)| object).collect()
    }

    /// Every live object, for tests that look behind a handle core keeps to itself.
    #[cfg(test)]
    pub(crate) fn live(&self) -> Vec<Arc<T>> {
        self.live.read().values().cloned().collect()
    }

    fn explain_missing(&self, raw: u64) -> Error {
        let expected = self.kind.with_article();
        if raw == 0 {
            return Error::invalid_handle(format!("handle 0x0 is null, expected {expected}"));
        }
        match ObjectKind::ALL.into_iter().find(|kind| kind.tag() == raw >> TAG_SHIFT) {
            None => Error::invalid_handle(format!(
                "handle {raw:#x} was not issued by the xhal vulkan backend, expected {expected}"
            )),
            Some(actual) if actual != self.kind => Error::invalid_handle(format!(
                "handle {raw:#x} is {}, expected {expected}",
                actual.with_article()
            )),
            Some(_) => Error::invalid_handle(format!(
                "handle {raw:#x} is not live: it was destroyed or never issued by this backend, expected {expected}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xhal_core::ErrorKind;

    #[test]
    fn handles_are_unique_and_wrong_kinds_are_named() {
        let events: HandleTable<u32> = HandleTable::new(ObjectKind::Event);
        let buffers: HandleTable<u32> = HandleTable::new(ObjectKind::Buffer);
        let first = events.insert(Arc::new(1));
        let second = events.insert(Arc::new(2));
        assert_ne!(first, second);
        assert_eq!(*events.get(second).unwrap(), 2);
        let wrong = buffers.get(first).unwrap_err();
        assert_eq!(wrong.kind(), ErrorKind::InvalidHandle);
        assert!(wrong.message().contains("is an event, expected a buffer"), "{wrong}");
        events.remove(first);
        assert!(events.get(first).unwrap_err().message().contains("not live"));
    }
}

//! Where a backend's vendor library comes from, and the API loaded from it on first use.
//!
//! A backend that opens its vendor library at run time is constructed without touching it
//! (so `xhal devices` on a machine without the driver only says why it is missing, when asked),
//! loads it once, on the first call that needs it, and remembers a failure to load as the
//! answer to every later call.

use crate::error::Result;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// Where a backend's vendor library comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibrarySource {
    /// The library the system's dynamic loader finds by the backend's usual names
    /// (`LD_LIBRARY_PATH`, `/etc/ld.so.conf.d`).
    System,
    /// The library (or one exporting the same API, an emulator) at this path.
    Path(PathBuf),
}

impl LibrarySource {
    /// The library at `path`.
    pub fn path(path: impl Into<PathBuf>) -> LibrarySource {
        LibrarySource::Path(path.into())
    }
}

/// A backend's loaded API (its instance: the library, its entry points, the devices it found),
/// made on first use from a [`LibrarySource`].
pub struct LazyInstance<I> {
    source: LibrarySource,
    instance: OnceLock<Result<Arc<I>>>,
}

impl<I> LazyInstance<I> {
    /// Nothing loaded yet.
    pub fn new(source: LibrarySource) -> LazyInstance<I> {
        LazyInstance {
            source,
            instance: OnceLock::new(),
        }
    }

    /// Where the library comes from.
    pub fn source(&self) -> &LibrarySource {
        &self.source
    }

    /// The instance, made by `create` on the first call; the first call's error, for every
    /// call, when it failed.
    pub fn get(&self, create: impl FnOnce(&LibrarySource) -> Result<I>) -> Result<&Arc<I>> {
        self.instance
            .get_or_init(|| create(&self.source).map(Arc::new))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl<I> std::fmt::Debug for LazyInstance<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyInstance")
            .field("source", &self.source)
            .field("loaded", &self.instance.get().map(Result::is_ok))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorKind};
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn the_instance_is_made_once_and_a_failure_is_remembered() {
        let made = AtomicU32::new(0);
        let lazy: LazyInstance<u32> = LazyInstance::new(LibrarySource::path("/opt/vendor/libfoo.so"));
        let create = |source: &LibrarySource| {
            made.fetch_add(1, Ordering::Relaxed);
            assert_eq!(source, &LibrarySource::Path("/opt/vendor/libfoo.so".into()));
            Ok(7)
        };
        assert_eq!(**lazy.get(create).unwrap(), 7);
        assert_eq!(**lazy.get(create).unwrap(), 7);
        assert_eq!(made.load(Ordering::Relaxed), 1);

        let missing: LazyInstance<u32> = LazyInstance::new(LibrarySource::System);
        let fail = |_: &LibrarySource| {
            made.fetch_add(1, Ordering::Relaxed);
            Err(Error::new(ErrorKind::DriverUnavailable, "libfoo.so.1 not found"))
        };
        assert_eq!(missing.get(fail).unwrap_err().kind(), ErrorKind::DriverUnavailable);
        assert_eq!(missing.get(fail).unwrap_err().kind(), ErrorKind::DriverUnavailable);
        assert_eq!(made.load(Ordering::Relaxed), 2, "a failed load is not retried");
        assert!(format!("{missing:?}").contains("System"));
    }
}

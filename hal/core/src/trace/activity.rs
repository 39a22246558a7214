//! Device activity for profilers: the device spans of a trace, also kept in memory as
//! [`Activity`] records that a profiler takes ([`take_activities`]), each tagged with the
//! correlation id its enqueuing thread had set ([`set_correlation`]), so that a framework's
//! profiler (PyTorch's, through Kineto) links the device's work to the operator that queued it.
//!
//! Collection rides on the trace: [`start_collecting`] starts one (into the null device) when
//! none is recorded, so device spans are resolved, and [`stop_collecting`] stops the trace it
//! started. A trace the program records itself (`XHAL_TRACE`) goes on as before.

use super::{is_active, start_with, stop, CLOCK_ORIGIN_UNIX_SECONDS};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::borrow::Cow;
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// One operation a stream ran while activities were collected.
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    /// The kernel's entry point, or the operation (`copy`, `fill`, `write`, ...).
    pub name: Cow<'static, str>,
    /// The trace's category: `kernel`, `copy`, `fill`, `write`, `read`, ...
    pub category: &'static str,
    /// The device's label (`vulkan:0`).
    pub device: String,
    /// The stream's number within the trace.
    pub stream: u64,
    /// When the device started it, in nanoseconds since the Unix epoch (host clock).
    pub start_unix_ns: i64,
    /// When the device finished it, on the same clock.
    pub end_unix_ns: i64,
    /// The correlation id the enqueuing thread had set (0: none).
    pub correlation: u64,
}

/// Activities kept at most between two takes; past it they are counted as dropped.
pub const MAX_ACTIVITIES: usize = 1 << 20;

static COLLECTING: AtomicBool = AtomicBool::new(false);

struct Collection {
    activities: Vec<Activity>,
    dropped: u64,
    /// Whether collection started the trace it rides on (and so stops it).
    owns_trace: bool,
}

static COLLECTION: Mutex<Option<Collection>> = Mutex::new(None);

thread_local! {
    static CORRELATION: Cell<u64> = const { Cell::new(0) };
}

/// Tags the operations this thread enqueues from now on with `id` (0: none).
pub fn set_correlation(id: u64) {
    CORRELATION.with(|c| c.set(id));
}

/// The calling thread's correlation id.
pub fn correlation() -> u64 {
    CORRELATION.with(Cell::get)
}

/// Whether activities are being collected.
pub fn is_collecting() -> bool {
    COLLECTING.load(Ordering::Acquire)
}

/// Starts keeping device activities in memory. One collection at a time.
pub fn start_collecting() -> Result<()> {
    let mut collection = COLLECTION.lock();
    if collection.is_some() {
        return Err(Error::invalid_argument(
            "device activities are already being collected; stop that collection first",
        ));
    }
    let owns_trace = if is_active() {
        false
    } else {
        // The spans go nowhere but here: the trace exists to resolve them.
        std::mem::forget(start_with(Path::new("/dev/null"), u64::MAX, false)?);
        true
    };
    *collection = Some(Collection {
        activities: Vec::new(),
        dropped: 0,
        owns_trace,
    });
    COLLECTING.store(true, Ordering::Release);
    Ok(())
}

/// Stops collecting and returns how many activities were dropped for want of room. Activities
/// not yet taken stay for [`take_activities`] until the next collection starts.
pub fn stop_collecting() -> Result<u64> {
    let mut slot = COLLECTION.lock();
    let Some(collection) = slot.as_mut() else {
        return Err(Error::invalid_argument("device activities are not being collected"));
    };
    COLLECTING.store(false, Ordering::Release);
    let owned_trace = std::mem::replace(&mut collection.owns_trace, false);
    let dropped = collection.dropped;
    let activities = std::mem::take(&mut collection.activities);
    *slot = None;
    drop(slot);
    PENDING_TAKE.lock().extend(activities);
    if owned_trace && is_active() {
        stop()?;
    }
    Ok(dropped)
}

/// What a stopped collection left for [`take_activities`].
static PENDING_TAKE: Mutex<Vec<Activity>> = Mutex::new(Vec::new());

/// Takes up to `max` of the activities collected so far (oldest first).
pub fn take_activities(max: usize) -> Vec<Activity> {
    let collected = COLLECTION
        .lock()
        .as_mut()
        .map(|collection| std::mem::take(&mut collection.activities))
        .unwrap_or_default();
    let mut left = PENDING_TAKE.lock();
    left.extend(collected);
    let count = left.len().min(max);
    left.drain(..count).collect()
}

/// Keeps one resolved device span, when collecting.
pub(crate) fn record(activity: impl FnOnce() -> Activity) {
    if !is_collecting() {
        return;
    }
    let mut slot = COLLECTION.lock();
    if let Some(collection) = slot.as_mut() {
        if collection.activities.len() >= MAX_ACTIVITIES {
            collection.dropped += 1;
        } else {
            collection.activities.push(activity());
        }
    }
}

/// The trace's microseconds since [`CLOCK_ORIGIN_UNIX_SECONDS`] as nanoseconds since the Unix epoch.
pub(crate) fn unix_ns(trace_us: f64) -> i64 {
    (trace_us * 1e3) as i64 + (CLOCK_ORIGIN_UNIX_SECONDS as i64) * 1_000_000_000
}

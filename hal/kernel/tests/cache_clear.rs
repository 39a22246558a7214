//! `clear_cache` empties the process-wide cache. In its own test binary (its own process), so
//! clearing cannot disturb the hit counts other tests observe.

use std::sync::Arc;

use xhal_kernel::{cache_stats, clear_cache, translate, CacheStats, Target};

#[test]
fn clear_cache_drops_entries_and_counters() {
    let source = "@compute @workgroup_size(1) fn main() {}\n";
    let first = translate(source, Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    let _ = translate(source, Target::SpirvShader);
    let stats = cache_stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
    clear_cache();
    assert_eq!(cache_stats(), CacheStats::default());
    // Handed-out translations stay valid; the next request translates afresh.
    let again = translate(source, Target::SpirvShader).unwrap_or_else(|e| panic!("{e}"));
    assert!(!Arc::ptr_eq(&first, &again));
    assert_eq!(first.bytes, again.bytes);
    assert_eq!(cache_stats().misses, 1);
}

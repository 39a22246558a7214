//! Backends linked into the binary, found through `inventory`.
//!
//! A backend crate registers itself with [`register_static_backend!`](crate::register_static_backend);
//! linking the crate is enough for the runtime's discovery (`xhal::Runtime::discover`) to see it.

use crate::backend::Backend;
use crate::error::Result;
use std::sync::Arc;

/// A backend compiled into this binary.
pub struct StaticBackend {
    /// Backend name; a plugin of the same name takes precedence over it.
    pub name: &'static str,
    /// Creates the backend. Called at most once per runtime.
    pub create: fn() -> Result<Arc<dyn Backend>>,
}

inventory::collect!(StaticBackend);

/// Every backend registered in this binary, sorted by name so discovery order is deterministic.
pub fn static_backends() -> Vec<&'static StaticBackend> {
    let mut all: Vec<&'static StaticBackend> = inventory::iter::<StaticBackend>.into_iter().collect();
    all.sort_by_key(|backend| backend.name);
    all
}

/// Registers a backend that is linked into the binary.
///
/// ```text
/// xhal_core::register_static_backend!("cpu", || Ok(std::sync::Arc::new(CpuBackend::from_env())));
/// ```
#[macro_export]
macro_rules! register_static_backend {
    ($name:expr, $create:expr) => {
        $crate::inventory::submit! {
            $crate::registry::StaticBackend { name: $name, create: $create }
        }
    };
}

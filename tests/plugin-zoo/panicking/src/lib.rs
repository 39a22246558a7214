//! A Rust plugin whose entries panic. The export layer must turn each panic into an error;
//! the host must survive and report it.

mod backend;

fn create() -> xhal_core::Result<backend::PanickingBackend> {
    Ok(backend::PanickingBackend::named("zoo_panicking"))
}

xhal_core::backend::export_plugin!(create);

//! Empty: the package has a build script only so that its build-dependencies count (see
//! Cargo.toml).

fn main() {}

//! xhal-difftest: differential testing of xhal's devices against the CPU interpreter.
//!
//! [`gen`] makes a random, valid, terminating, deterministic WGSL kernel from a seed;
//! [`emit`] prints it; [`run`] runs it on the oracle (the CPU backend's interpreter) and on
//! other devices, each in a worker process so that a crash is a finding rather than the end
//! of the run; [`compare`] says where results differ; [`shrink`] cuts a differing kernel down
//! to a minimal one.

pub mod ast;
pub mod compare;
pub mod emit;
pub mod gen;
pub mod rng;
pub mod run;
pub mod shrink;

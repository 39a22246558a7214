//! Prints the C-family source the emitter writes for a WGSL file:
//! `cargo run -p xhal-kernel --example emit_c -- host|opencl|cuda|hip FILE.wgsl`.

use std::process::ExitCode;

use xhal_kernel::{parse_wgsl, Dialect};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dialect, path] = args.as_slice() else {
        eprintln!("usage: emit_c host|opencl|cuda|hip FILE.wgsl");
        return ExitCode::from(2);
    };
    let dialect = match dialect.as_str() {
        "host" => Dialect::HostC,
        "opencl" => Dialect::OpenclC,
        "cuda" => Dialect::CudaC,
        "hip" => Dialect::HipC,
        other => {
            eprintln!("unknown dialect `{other}`: expected host, opencl, cuda or hip");
            return ExitCode::from(2);
        }
    };
    let source = match std::fs::read_to_string(path) {
        Ok(source) => source,
        Err(error) => {
            eprintln!("cannot read {path}: {error}");
            return ExitCode::from(2);
        }
    };
    match parse_wgsl(&source).and_then(|module| module.to_c(dialect, None)) {
        Ok(c) => {
            print!("{}", c.text);
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}

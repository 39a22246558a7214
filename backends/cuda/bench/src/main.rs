//! Measures the CUDA backend against the raw driver API in one run, on CUDA device 0:
//! - launch cost of an empty kernel (xhal `Stream::launch` against `cuLaunchKernel`);
//! - host-to-device and device-to-host bandwidth (xhal's pageable `write`/`read`, staged
//!   through pinned blocks, against `cuMemcpyHtoD`/`cuMemcpyDtoH` from pinned memory);
//! - device-to-device bandwidth (xhal `copy_buffer` against `cuMemcpyDtoD` of the same size,
//!   the card's measured copy ceiling).
//!
//! `cargo run --release -p xhal-cuda-bench [-- --plugin PATH]`: with `--plugin`,
//! xhal's side goes through that plugin file (the C ABI), as an application's would; without
//! it, through the backend linked in. Exits with status 2 and the reason when there is no
//! CUDA device, and 1 on any other failure. Prints a Markdown table last.

use cudarc::driver::sys;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;
use xhal_core::backend::Backend;
use xhal_core::{KernelFormat, Launch, Runtime};
use xhal_cuda::{CudaBackend, CudaDriver};

/// One empty kernel with a pointer parameter (the argument ABI's buffer 0), one thread.
const EMPTY_PTX: &str = ".version 7.0\n.target sm_50\n.address_size 64\n\
    .visible .entry empty(\n.param .u64 empty_param_0\n)\n.reqntid 1, 1, 1\n{\nret;\n}\n";

const LAUNCHES: u32 = 20_000;
const TRANSFER_BYTES: usize = 256 << 20;
const TRANSFER_REPEATS: u32 = 10;
const COPY_BYTES: usize = 1 << 30;
const COPY_REPEATS: u32 = 10;

fn main() {
    match run() {
        Ok(()) => {}
        Err(Failure::NoDevice(reason)) => {
            eprintln!("xhal-cuda-bench: no CUDA device, nothing measured: {reason}");
            std::process::exit(2);
        }
        Err(Failure::Other(reason)) => {
            eprintln!("xhal-cuda-bench: failed: {reason}");
            std::process::exit(1);
        }
    }
}

enum Failure {
    NoDevice(String),
    Other(String),
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure::Other(error.to_string())
    }
}

fn check(what: &str, code: sys::CUresult) -> Result<(), Failure> {
    match code {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        code => Err(Failure::Other(format!("{what} failed: {code:?}"))),
    }
}

struct Row {
    what: &'static str,
    unit: &'static str,
    xhal: f64,
    raw: f64,
    /// Higher is better (bandwidth) or lower is better (time).
    higher_is_better: bool,
}

fn run() -> Result<(), Failure> {
    let plugin = std::env::args().skip_while(|argument| argument != "--plugin").nth(1);
    let builder = Runtime::builder().without_static_backends().without_plugin_search();
    let runtime = match &plugin {
        Some(path) => builder.plugin(path).build()?,
        None => {
            let backend = CudaBackend::new(CudaDriver::from_env());
            if let Err(error) = backend.device_count() {
                return Err(Failure::NoDevice(error.to_string()));
            }
            builder.backend(Arc::new(backend)).build()?
        }
    };
    let device = runtime
        .open("cuda:0")
        .map_err(|error| Failure::NoDevice(error.to_string()))?;
    let info = device.info().clone();
    eprintln!(
        "device: {} ({}), {}",
        info.name,
        info.uuid_string(),
        info.driver_version
    );
    let stream = device.create_stream()?;
    let mut rows = Vec::new();

    // Raw side: the primary context of device 0, current on this thread, its own stream.
    let mut cu_device: sys::CUdevice = 0;
    let mut context: sys::CUcontext = std::ptr::null_mut();
    let mut raw_stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: the driver is loaded (xhal opened device 0 through it); plain driver calls.
    unsafe {
        check("cuDeviceGet", sys::cuDeviceGet(&mut cu_device, 0))?;
        check(
            "cuDevicePrimaryCtxRetain",
            sys::cuDevicePrimaryCtxRetain(&mut context, cu_device),
        )?;
        check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
        check("cuStreamCreate", sys::cuStreamCreate(&mut raw_stream, 1))?;
    }

    // Launch cost.
    let module = device.load_module(KernelFormat::PTX, EMPTY_PTX.as_bytes())?;
    let kernel = module.kernel("empty")?;
    let target = device.alloc::<u32>(64)?;
    let launch = Launch::new(&kernel).workgroups(1, 1, 1).buffer(&target);
    for _ in 0..1000 {
        stream.launch(&launch)?;
    }
    stream.synchronize()?;
    let started = Instant::now();
    for _ in 0..LAUNCHES {
        stream.launch(&launch)?;
    }
    stream.synchronize()?;
    let xhal_launch = started.elapsed().as_secs_f64() / f64::from(LAUNCHES) * 1e6;

    let ptx = std::ffi::CString::new(EMPTY_PTX)?;
    let mut raw_module: sys::CUmodule = std::ptr::null_mut();
    let mut function: sys::CUfunction = std::ptr::null_mut();
    let mut raw_buffer: sys::CUdeviceptr = 0;
    // SAFETY: a NUL-terminated PTX text; one 256-byte allocation.
    unsafe {
        check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
        check(
            "cuModuleLoadData",
            sys::cuModuleLoadData(&mut raw_module, ptx.as_ptr().cast()),
        )?;
        check(
            "cuModuleGetFunction",
            sys::cuModuleGetFunction(&mut function, raw_module, c"empty".as_ptr()),
        )?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut raw_buffer, 256))?;
    }
    let mut argument = raw_buffer;
    let mut parameters = [(&mut argument as *mut sys::CUdeviceptr).cast::<c_void>()];
    let mut raw_launch = || -> Result<(), Failure> {
        // SAFETY: one pointer parameter, as the kernel declares.
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                raw_stream,
                parameters.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    };
    for _ in 0..1000 {
        raw_launch()?;
    }
    // SAFETY: the raw stream.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(raw_stream) })?;
    let started = Instant::now();
    for _ in 0..LAUNCHES {
        raw_launch()?;
    }
    // SAFETY: the raw stream.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(raw_stream) })?;
    let raw_launch_us = started.elapsed().as_secs_f64() / f64::from(LAUNCHES) * 1e6;
    rows.push(Row {
        what: "empty kernel launch",
        unit: "us",
        xhal: xhal_launch,
        raw: raw_launch_us,
        higher_is_better: false,
    });

    // Host <-> device.
    let host: Vec<u8> = (0..TRANSFER_BYTES).map(|i| i as u8).collect();
    let mut back = vec![0u8; TRANSFER_BYTES];
    let buffer = device.alloc::<u8>(TRANSFER_BYTES)?;
    stream.write(&buffer, &host)?;
    stream.read(&buffer, &mut back)?;
    if back != host {
        return Err(Failure::Other(
            "the host-device round trip changed the data".to_string(),
        ));
    }
    let gib =
        |bytes: usize, repeats: u32, seconds: f64| bytes as f64 * f64::from(repeats) / seconds / (1u64 << 30) as f64;
    let started = Instant::now();
    for _ in 0..TRANSFER_REPEATS {
        stream.write(&buffer, &host)?;
    }
    let xhal_h2d = gib(TRANSFER_BYTES, TRANSFER_REPEATS, started.elapsed().as_secs_f64());
    let started = Instant::now();
    for _ in 0..TRANSFER_REPEATS {
        stream.read(&buffer, &mut back)?;
    }
    let xhal_d2h = gib(TRANSFER_BYTES, TRANSFER_REPEATS, started.elapsed().as_secs_f64());

    let mut pinned: *mut c_void = std::ptr::null_mut();
    let mut raw_large: sys::CUdeviceptr = 0;
    // SAFETY: one pinned host allocation and one device allocation of the same size.
    unsafe {
        check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
        check("cuMemAllocHost", sys::cuMemAllocHost_v2(&mut pinned, TRANSFER_BYTES))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut raw_large, TRANSFER_BYTES))?;
        std::ptr::copy_nonoverlapping(host.as_ptr(), pinned.cast::<u8>(), TRANSFER_BYTES);
        check("cuMemcpyHtoD", sys::cuMemcpyHtoD_v2(raw_large, pinned, TRANSFER_BYTES))?;
    }
    let started = Instant::now();
    for _ in 0..TRANSFER_REPEATS {
        // SAFETY: pinned memory and a device allocation of TRANSFER_BYTES each.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(raw_large, pinned, TRANSFER_BYTES)
        })?;
    }
    let raw_h2d = gib(TRANSFER_BYTES, TRANSFER_REPEATS, started.elapsed().as_secs_f64());
    let started = Instant::now();
    for _ in 0..TRANSFER_REPEATS {
        // SAFETY: as above.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(pinned, raw_large, TRANSFER_BYTES)
        })?;
    }
    let raw_d2h = gib(TRANSFER_BYTES, TRANSFER_REPEATS, started.elapsed().as_secs_f64());
    rows.push(Row {
        what: "host to device, 256 MiB (xhal pageable, raw pinned)",
        unit: "GiB/s",
        xhal: xhal_h2d,
        raw: raw_h2d,
        higher_is_better: true,
    });
    rows.push(Row {
        what: "device to host, 256 MiB (xhal pageable, raw pinned)",
        unit: "GiB/s",
        xhal: xhal_d2h,
        raw: raw_d2h,
        higher_is_better: true,
    });
    drop(buffer);

    // Device <-> device: bytes copied per second.
    let source = device.alloc::<u8>(COPY_BYTES)?;
    let destination = device.alloc::<u8>(COPY_BYTES)?;
    stream.fill(&source, 7u8)?;
    stream.copy(&source, &destination)?;
    stream.synchronize()?;
    let started = Instant::now();
    for _ in 0..COPY_REPEATS {
        stream.copy(&source, &destination)?;
    }
    stream.synchronize()?;
    let xhal_d2d = gib(COPY_BYTES, COPY_REPEATS, started.elapsed().as_secs_f64());
    let (mut raw_source, mut raw_destination): (sys::CUdeviceptr, sys::CUdeviceptr) = (0, 0);
    // SAFETY: two device allocations of COPY_BYTES.
    unsafe {
        check("cuCtxSetCurrent", sys::cuCtxSetCurrent(context))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut raw_source, COPY_BYTES))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut raw_destination, COPY_BYTES))?;
        check(
            "cuMemcpyDtoD",
            sys::cuMemcpyDtoD_v2(raw_destination, raw_source, COPY_BYTES),
        )?;
        check("cuCtxSynchronize", sys::cuCtxSynchronize())?;
    }
    let started = Instant::now();
    for _ in 0..COPY_REPEATS {
        // SAFETY: two device allocations of COPY_BYTES, on the raw stream.
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(raw_destination, raw_source, COPY_BYTES, raw_stream)
        })?;
    }
    // SAFETY: the raw stream.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(raw_stream) })?;
    let raw_d2d = gib(COPY_BYTES, COPY_REPEATS, started.elapsed().as_secs_f64());
    rows.push(Row {
        what: "device to device, 1 GiB (bytes copied)",
        unit: "GiB/s",
        xhal: xhal_d2d,
        raw: raw_d2d,
        higher_is_better: true,
    });

    // SAFETY: everything raw made above, no longer used.
    unsafe {
        sys::cuCtxSetCurrent(context);
        sys::cuMemFree_v2(raw_source);
        sys::cuMemFree_v2(raw_destination);
        sys::cuMemFree_v2(raw_large);
        sys::cuMemFree_v2(raw_buffer);
        sys::cuMemFreeHost(pinned);
        sys::cuModuleUnload(raw_module);
        sys::cuStreamDestroy_v2(raw_stream);
        sys::cuDevicePrimaryCtxRelease_v2(cu_device);
    }

    println!();
    println!(
        "CUDA backend against the raw driver API, {} ({})",
        info.name, info.driver_version
    );
    println!();
    println!("| measure | unit | xhal | raw CUDA | xhal / raw |");
    println!("| --- | --- | ---: | ---: | ---: |");
    for row in &rows {
        let ratio = row.xhal / row.raw;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2}{} |",
            row.what,
            row.unit,
            row.xhal,
            row.raw,
            ratio,
            if row.higher_is_better {
                " (higher is better)"
            } else {
                " (lower is better)"
            }
        );
    }
    Ok(())
}

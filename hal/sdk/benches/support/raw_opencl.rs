//! The raw-API baseline for OpenCL launches: an empty one-work-item kernel enqueued with
//! `clEnqueueNDRangeKernel` on an in-order queue of the first OpenCL device, as a careful
//! hand-written program would, through the ICD loader opened at run time.

use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::time::Instant;

type Int = i32;
type Handle = *mut c_void;

const SOURCE: &str = "__kernel void touch(__global uint* sink) { if (get_global_id(0) == 0) sink[0] = 1u; }";
const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
const CL_MEM_READ_WRITE: u64 = 1;

/// The entries the baseline calls, as the OpenCL 3.0 headers declare them.
struct Api {
    _library: libloading::Library,
    get_platform_ids: unsafe extern "C" fn(u32, *mut Handle, *mut u32) -> Int,
    get_device_ids: unsafe extern "C" fn(Handle, u64, u32, *mut Handle, *mut u32) -> Int,
    create_context:
        unsafe extern "C" fn(*const isize, u32, *const Handle, *const c_void, *mut c_void, *mut Int) -> Handle,
    create_queue: unsafe extern "C" fn(Handle, Handle, *const u64, *mut Int) -> Handle,
    create_program: unsafe extern "C" fn(Handle, u32, *const *const c_char, *const usize, *mut Int) -> Handle,
    build_program: unsafe extern "C" fn(Handle, u32, *const Handle, *const c_char, *const c_void, *mut c_void) -> Int,
    create_kernel: unsafe extern "C" fn(Handle, *const c_char, *mut Int) -> Handle,
    create_buffer: unsafe extern "C" fn(Handle, u64, usize, *mut c_void, *mut Int) -> Handle,
    set_kernel_arg: unsafe extern "C" fn(Handle, u32, usize, *const c_void) -> Int,
    enqueue_nd_range: unsafe extern "C" fn(
        Handle,
        Handle,
        u32,
        *const usize,
        *const usize,
        *const usize,
        u32,
        *const Handle,
        *mut Handle,
    ) -> Int,
    finish: unsafe extern "C" fn(Handle) -> Int,
    release_kernel: unsafe extern "C" fn(Handle) -> Int,
    release_program: unsafe extern "C" fn(Handle) -> Int,
    release_mem: unsafe extern "C" fn(Handle) -> Int,
    release_queue: unsafe extern "C" fn(Handle) -> Int,
    release_context: unsafe extern "C" fn(Handle) -> Int,
}

impl Api {
    fn load() -> Result<Api, String> {
        // SAFETY: the ICD loader is a C library whose initialisation has no preconditions.
        let library = unsafe { libloading::Library::new("libOpenCL.so.1") }
            .map_err(|error| format!("libOpenCL.so.1: {error}"))?;
        macro_rules! entry {
            ($name:literal) => {
                // SAFETY: each name is bound to the type its OpenCL 3.0 declaration has.
                *unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|error| format!("{}: {error}", $name))?
            };
        }
        Ok(Api {
            get_platform_ids: entry!("clGetPlatformIDs"),
            get_device_ids: entry!("clGetDeviceIDs"),
            create_context: entry!("clCreateContext"),
            create_queue: entry!("clCreateCommandQueueWithProperties"),
            create_program: entry!("clCreateProgramWithSource"),
            build_program: entry!("clBuildProgram"),
            create_kernel: entry!("clCreateKernel"),
            create_buffer: entry!("clCreateBuffer"),
            set_kernel_arg: entry!("clSetKernelArg"),
            enqueue_nd_range: entry!("clEnqueueNDRangeKernel"),
            finish: entry!("clFinish"),
            release_kernel: entry!("clReleaseKernel"),
            release_program: entry!("clReleaseProgram"),
            release_mem: entry!("clReleaseMemObject"),
            release_queue: entry!("clReleaseCommandQueue"),
            release_context: entry!("clReleaseContext"),
            _library: library,
        })
    }
}

fn check(what: &str, status: Int) -> Result<(), String> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with OpenCL status {status}"))
    }
}

/// An in-order queue, the empty kernel and its one-word buffer on the first device.
pub struct RawOpencl {
    api: Api,
    context: Handle,
    queue: Handle,
    program: Handle,
    kernel: Handle,
    sink: Handle,
}

/// The raw figures: the median round trip (launch, then `clFinish`) in µs, and launches per
/// second enqueued back to back with one `clFinish` per batch.
pub struct RawFigures {
    pub round_trip_us: f64,
    pub launches_per_second: f64,
}

impl RawOpencl {
    pub fn new() -> Result<RawOpencl, String> {
        let api = Api::load()?;
        // SAFETY: every call gets the pointers and sizes its declaration asks for, and each
        // handle is used only with the context it was made in; `Drop` releases them.
        unsafe {
            let mut platform: Handle = ptr::null_mut();
            check(
                "clGetPlatformIDs",
                (api.get_platform_ids)(1, &mut platform, ptr::null_mut()),
            )?;
            let mut device: Handle = ptr::null_mut();
            check(
                "clGetDeviceIDs",
                (api.get_device_ids)(platform, CL_DEVICE_TYPE_ALL, 1, &mut device, ptr::null_mut()),
            )?;
            let mut status = 0;
            let context = (api.create_context)(ptr::null(), 1, &device, ptr::null(), ptr::null_mut(), &mut status);
            check("clCreateContext", status)?;
            let mut raw = RawOpencl {
                api,
                context,
                queue: ptr::null_mut(),
                program: ptr::null_mut(),
                kernel: ptr::null_mut(),
                sink: ptr::null_mut(),
            };
            raw.queue = (raw.api.create_queue)(context, device, ptr::null(), &mut status);
            check("clCreateCommandQueueWithProperties", status)?;
            let source = CString::new(SOURCE).expect("no NUL in the source");
            let text = source.as_ptr();
            raw.program = (raw.api.create_program)(context, 1, &text, ptr::null(), &mut status);
            check("clCreateProgramWithSource", status)?;
            check(
                "clBuildProgram",
                (raw.api.build_program)(raw.program, 1, &device, ptr::null(), ptr::null(), ptr::null_mut()),
            )?;
            let name = CString::new("touch").expect("no NUL in the name");
            raw.kernel = (raw.api.create_kernel)(raw.program, name.as_ptr(), &mut status);
            check("clCreateKernel", status)?;
            raw.sink = (raw.api.create_buffer)(context, CL_MEM_READ_WRITE, 4, ptr::null_mut(), &mut status);
            check("clCreateBuffer", status)?;
            check(
                "clSetKernelArg",
                (raw.api.set_kernel_arg)(raw.kernel, 0, size_of::<Handle>(), (&raw.sink as *const Handle).cast()),
            )?;
            Ok(raw)
        }
    }

    fn launch(&self) -> Result<(), String> {
        let global = 1usize;
        // SAFETY: the queue and kernel are this baseline's own, with its argument set.
        let status = unsafe {
            (self.api.enqueue_nd_range)(
                self.queue,
                self.kernel,
                1,
                ptr::null(),
                &global,
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut(),
            )
        };
        check("clEnqueueNDRangeKernel", status)
    }

    fn finish(&self) -> Result<(), String> {
        // SAFETY: the queue is this baseline's own.
        check("clFinish", unsafe { (self.api.finish)(self.queue) })
    }

    /// The round trip (median of `trips`) and the rate of `launches` back-to-back launches
    /// (median of 5 batches), as the xhal side of the table measures them.
    pub fn measure(&self, trips: usize, launches: usize) -> Result<RawFigures, String> {
        for _ in 0..20 {
            self.launch()?;
        }
        self.finish()?;
        let mut round_trips = Vec::with_capacity(trips);
        for _ in 0..trips {
            let started = Instant::now();
            self.launch()?;
            self.finish()?;
            round_trips.push(started.elapsed().as_secs_f64() * 1e6);
        }
        let mut rates = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            for _ in 0..launches {
                self.launch()?;
            }
            self.finish()?;
            rates.push(launches as f64 / started.elapsed().as_secs_f64());
        }
        Ok(RawFigures {
            round_trip_us: super::median(round_trips),
            launches_per_second: super::median(rates),
        })
    }
}

impl Drop for RawOpencl {
    fn drop(&mut self) {
        // SAFETY: each handle was made by `new` (or is null and skipped) and is released once.
        unsafe {
            if !self.queue.is_null() {
                (self.api.finish)(self.queue);
            }
            for (handle, release) in [
                (self.sink, self.api.release_mem),
                (self.kernel, self.api.release_kernel),
                (self.program, self.api.release_program),
                (self.queue, self.api.release_queue),
                (self.context, self.api.release_context),
            ] {
                if !handle.is_null() {
                    release(handle);
                }
            }
        }
    }
}

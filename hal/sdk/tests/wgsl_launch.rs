//! WGSL kernels through the application API: the argument ABI is enforced on the host before
//! a backend is called, and each mismatch names the kernel, the argument and what was
//! expected. The kernels then run on the CPU reference backend, static and as a plugin.

mod support;

use xhal::{Device, ErrorKind, Launch};

const SAXPY: &str = r#"
struct Params {
    a: f32,
    n: u32,
}

var<immediate> params: Params;

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn saxpy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 64u;
    if i < params.n {
        y[i] = params.a * x[i] + y[i];
    }
}

struct Header {
    count: u32,
    scale: f32,
    values: array<f32, 4>,
}

@group(0) @binding(0) var<storage, read_write> header: Header;

@compute @workgroup_size(1)
fn fixed(@builtin(global_invocation_id) id: vec3<u32>) {
    header.count = header.count + 1u;
}
"#;

fn cpu_device() -> Device {
    support::static_cpu_device()
}

fn run_saxpy(device: &Device) {
    let stream = device.create_stream().unwrap();
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y = vec![1.0f32; n];
    let x_buffer = device.alloc_from(&stream, &x).unwrap();
    let y_buffer = device.alloc_from(&stream, &y).unwrap();
    let module = device.load_wgsl(SAXPY).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    assert_eq!(saxpy.workgroup_size(), Some([64, 1, 1]));
    let launch = Launch::new(&saxpy)
        .workgroups_for_invocations(n as u64)
        .buffer(&x_buffer)
        .buffer(&y_buffer)
        .scalar(3.0f32)
        .scalar(n as u32);
    stream.launch(&launch).unwrap();
    let result = stream.read_to_vec(&y_buffer).unwrap();
    let expected: Vec<f32> = x.iter().map(|x| 3.0 * x + 1.0).collect();
    assert_eq!(result, expected);
}

#[test]
fn saxpy_runs_on_the_static_cpu_backend() {
    run_saxpy(&cpu_device());
}

#[test]
fn saxpy_runs_through_the_cpu_plugin() {
    run_saxpy(&support::plugin_cpu_device());
}

fn launch_error(build: impl FnOnce(&Device, &xhal::Kernel) -> xhal::Result<()>) -> xhal::Error {
    let device = cpu_device();
    let module = device.load_wgsl(SAXPY).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    build(&device, &saxpy).expect_err("the launch must be refused")
}

#[test]
fn too_few_buffers_name_the_missing_binding() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x))
    });
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(
        error
            .message()
            .contains("kernel `saxpy` takes 2 buffer(s), but 1 were given"),
        "{error}"
    );
    assert!(
        error.message().contains("missing `y` (binding 1, array<f32>)"),
        "{error}"
    );
}

#[test]
fn a_scalar_where_a_buffer_belongs_is_named() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x).scalar(1.0f32).scalar(16u32))
    });
    assert!(
        error.message().contains(
            "argument 1 of kernel `saxpy` must be buffer `y` (binding 1, array<f32>), but a scalar was given"
        ),
        "{error}"
    );
}

#[test]
fn a_buffer_too_many_is_named() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x).buffer(&x).buffer(&x))
    });
    assert!(
        error.message().contains("argument 2 of kernel `saxpy` is a buffer"),
        "{error}"
    );
    assert!(
        error
            .message()
            .contains("then the scalars of `params` (a: f32, n: u32)"),
        "{error}"
    );
}

#[test]
fn a_view_smaller_than_the_binding_needs_is_refused() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(
            &Launch::new(kernel)
                .buffer(&x)
                .buffer(x.slice(0..0))
                .scalar(1.0f32)
                .scalar(0u32),
        )
    });
    assert!(
        error.message().contains(
            "buffer argument 1 of kernel `saxpy` (`y`, binding 1, array<f32>) is a view of 0 bytes, but it needs at least 4"
        ),
        "{error}"
    );
    // A fixed-size struct binding needs its whole size.
    let device = cpu_device();
    let module = device.load_wgsl(SAXPY).unwrap();
    let fixed = module.kernel("fixed").unwrap();
    let stream = device.create_stream().unwrap();
    let small = device.alloc::<u32>(3).unwrap();
    let error = stream.launch(&Launch::new(&fixed).buffer(&small)).unwrap_err();
    assert!(
        error
            .message()
            .contains("(`header`, binding 0, Header) is a view of 12 bytes, but it needs at least 24"),
        "{error}"
    );
}

#[test]
fn the_scalar_block_must_match_the_immediate_members() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x).buffer(&x).scalar(1.0f32))
    });
    assert!(
        error.message().contains(
            "kernel `saxpy` takes 2 scalar(s), the members of `params: Params` (a: f32, n: u32), but 1 were given"
        ),
        "{error}"
    );
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x).buffer(&x).scalar(1.0f64).scalar(16u32))
    });
    assert!(
        error
            .message()
            .contains("scalar 0 of kernel `saxpy` fills member `a: f32` (4 bytes), but a f64 of 8 bytes was given"),
        "{error}"
    );
}

#[test]
fn a_whole_scalar_block_runs_like_its_members() {
    let device = cpu_device();
    let stream = device.create_stream().unwrap();
    let x = device.alloc_from(&stream, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let y = device.alloc_from(&stream, &[10.0f32; 4]).unwrap();
    let module = device.load_wgsl(SAXPY).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    // `Params { a: f32, n: u32 }` as WGSL lays it out: a at 0, n at 4.
    let mut block = [0u8; 8];
    block[..4].copy_from_slice(&2.0f32.to_ne_bytes());
    block[4..].copy_from_slice(&3u32.to_ne_bytes());
    let launch = Launch::new(&saxpy)
        .workgroups_for_invocations(4)
        .buffer(&x)
        .buffer(&y)
        .scalar_block(&block);
    stream.launch(&launch).unwrap();
    assert_eq!(stream.read_to_vec(&y).unwrap(), vec![12.0, 14.0, 16.0, 10.0]);
}

#[test]
fn a_whole_scalar_block_of_the_wrong_size_or_mixed_with_members_is_refused() {
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(&Launch::new(kernel).buffer(&x).buffer(&x).scalar_block(&[0u8; 4]))
    });
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(
        error.message().contains(
            "kernel `saxpy` takes a scalar block of 8 bytes (`params: Params`: a: f32, n: u32), but 4 bytes were given"
        ),
        "{error}"
    );
    for mixed in [true, false] {
        let error = launch_error(|device, kernel| {
            let stream = device.create_stream()?;
            let x = device.alloc::<f32>(16)?;
            let launch = Launch::new(kernel).buffer(&x).buffer(&x);
            let launch = if mixed {
                launch.scalar(1.0f32).scalar_block(&[0u8; 8])
            } else {
                launch.scalar_block(&[0u8; 8]).scalar(1.0f32)
            };
            stream.launch(&launch)
        });
        assert!(
            error
                .message()
                .contains("the scalar block is given once, either whole (scalar_block) or member by member (scalar)"),
            "{error}"
        );
    }
    let error = launch_error(|device, kernel| {
        let stream = device.create_stream()?;
        let x = device.alloc::<f32>(16)?;
        stream.launch(
            &Launch::new(kernel)
                .buffer(&x)
                .buffer(&x)
                .scalar_block(&[0u8; 8])
                .scalar_block(&[0u8; 8]),
        )
    });
    assert!(
        error
            .message()
            .contains("kernel `saxpy`: the scalar block is given twice"),
        "{error}"
    );
    // A kernel without a var<immediate> takes no block.
    let device = cpu_device();
    let module = device.load_wgsl(SAXPY).unwrap();
    let fixed = module.kernel("fixed").unwrap();
    let stream = device.create_stream().unwrap();
    let header = device.alloc::<u32>(6).unwrap();
    let error = stream
        .launch(&Launch::new(&fixed).buffer(&header).scalar_block(&[0u8; 4]))
        .unwrap_err();
    assert!(
        error
            .message()
            .contains("kernel `fixed` takes no scalars (it declares no var<immediate>), but a scalar block of 4 bytes"),
        "{error}"
    );
}

#[test]
fn bad_wgsl_and_missing_entry_points_are_clear_errors() {
    let device = cpu_device();
    let error = device
        .load_wgsl("@compute @workgroup_size(1)\nfn main() {\n    let x: u32 = 1.5;\n}\n")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::InvalidArgument);
    assert!(error.message().contains(":3:"), "the error gives the line: {error}");
    let module = device.load_wgsl(SAXPY).unwrap();
    let error = module.kernel("sax").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotFound);
    assert!(
        error
            .message()
            .contains("no compute entry point `sax`; it has: saxpy, fixed"),
        "{error}"
    );
}

#[test]
fn invocations_spill_into_y_past_65535_workgroups() {
    let device = cpu_device();
    let module = device.load_wgsl(SAXPY).unwrap();
    let saxpy = module.kernel("saxpy").unwrap();
    let counts = |invocations: u64| {
        Launch::new(&saxpy)
            .workgroups_for_invocations(invocations)
            .workgroup_count()
    };
    assert_eq!(counts(0), [1, 1, 1]);
    assert_eq!(counts(64), [1, 1, 1]);
    assert_eq!(counts(1000), [16, 1, 1]);
    assert_eq!(counts(65_535 * 64), [65_535, 1, 1]);
    // Rows as even as they can be, so that no row is nearly all idle.
    assert_eq!(counts(65_536 * 64), [32_768, 2, 1]);
    assert_eq!(counts((3 * 65_535 + 4) * 64), [49_153, 4, 1]);
    // Past a 65535 × 65535 grid the launch is refused, naming the kernel.
    let stream = device.create_stream().unwrap();
    let error = stream
        .launch(&Launch::new(&saxpy).workgroups_for_invocations(u64::MAX))
        .unwrap_err();
    assert!(error.message().contains("kernel `saxpy`"), "{error}");
    assert!(error.message().contains("65535 × 65535"), "{error}");
}

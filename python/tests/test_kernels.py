import threading

import numpy as np
import pytest

import xhal
from conftest import SAXPY, floats


def test_reflection(saxpy):
    assert saxpy.name == "saxpy"
    assert saxpy.workgroup_size == (64, 1, 1)
    params = {p.name: p for p in saxpy.params}
    assert list(params) == ["x", "y", "a", "n"]
    x, y, a, n = (params[k] for k in ["x", "y", "a", "n"])
    assert (x.kind, x.access, x.writes, x.binding, x.dtype) == ("storage", "read", False, 0, "float32")
    assert (y.kind, y.access, y.writes, y.binding) == ("storage", "read_write", True, 1)
    assert (a.kind, a.type, a.offset, a.size, a.dtype) == ("scalar", "f32", 0, 4, "float32")
    assert (n.type, n.offset) == ("u32", 4)


def test_saxpy_positional_and_by_name(dev, saxpy):
    n = 1000
    xs, ys = floats(n, 1), floats(n, 2)
    x, y = dev.asarray(xs), dev.asarray(ys)
    saxpy(x, y, a=3.0, n=n, invocations=n)
    saxpy(y=y, x=x, a=-1.0, n=n, invocations=n)
    np.testing.assert_array_equal(y.numpy(), 2 * xs + ys)
    saxpy.launch(x, y, a=1.0, n=n, workgroups=(n + 63) // 64)
    np.testing.assert_array_equal(y.numpy(), 3 * xs + ys)


def test_views_in_launches(dev, saxpy):
    xs = floats(256, 3)
    x = dev.asarray(xs)
    y = dev.zeros(256)
    saxpy(x[64:128], y[128:192], a=1.0, n=64, invocations=64)
    out = y.numpy()
    np.testing.assert_array_equal(out[128:192], xs[64:128])
    assert not out[:128].any() and not out[192:].any()


UNIFORM = """
struct Scale { factor: vec4<f32> }
@group(0) @binding(0) var<uniform> scale: Scale;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
override offset: f32 = 0.0;
@compute @workgroup_size(4)
fn scaled(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = out[id.x] * scale.factor + vec4<f32>(offset);
}
"""


def test_uniforms_and_overrides(dev):
    module = dev.load_wgsl(UNIFORM, overrides={"offset": 1.0})
    assert module.entry_points == ["scaled"]
    assert module.overrides == [{"name": "offset", "id": None, "type": "f32", "default": "0.0"}]
    kernel = module.kernel()
    kinds = [(p.name, p.kind) for p in kernel.params]
    assert kinds == [("scale", "uniform"), ("out", "storage")]
    out = dev.asarray(np.ones((4, 4), np.float32))
    kernel(np.array([1, 2, 3, 4], np.float32), out, workgroups=1)
    np.testing.assert_array_equal(out.numpy(), np.tile([2, 3, 4, 5], (4, 1)))
    kernel(np.array([1, 1, 1, 1], np.float32).tobytes(), out, workgroups=(1, 1, 1))
    np.testing.assert_array_equal(out.numpy(), np.tile([3, 4, 5, 6], (4, 1)))


def test_launch_misuse_raises_and_leaves_the_device_healthy(dev, saxpy):
    x, y = dev.zeros(64), dev.zeros(64)
    cases = [
        (lambda: saxpy(x, y, a=1.0, invocations=64), xhal.InvalidArgumentError, "scalar `n`"),
        (lambda: saxpy(x, a=1.0, n=64, invocations=64), xhal.InvalidArgumentError, "buffer `y`"),
        (lambda: saxpy(x, y, x, a=1.0, n=64, invocations=64), xhal.InvalidArgumentError, "takes 2 buffer"),
        (lambda: saxpy(x, y, a=1.0, n=64, m=3, invocations=64), xhal.InvalidArgumentError, "no parameter `m`"),
        (lambda: saxpy(x, y, x=x, a=1.0, n=64, invocations=64), xhal.InvalidArgumentError, "both"),
        (lambda: saxpy(x, dev.zeros(64, dtype="int32"), a=1.0, n=64, invocations=64),
         xhal.InvalidArgumentError, "int32"),
        (lambda: saxpy(x, y, a=1.0, n=-1, invocations=64), xhal.InvalidArgumentError, "u32"),
        (lambda: saxpy(x, y, a="fast", n=64, invocations=64), xhal.InvalidArgumentError, "f32"),
        (lambda: saxpy(x, y, a=1.0, n=64), xhal.InvalidArgumentError, "invocations= or workgroups="),
        (lambda: saxpy(x, y, a=1.0, n=64, invocations=64, workgroups=1), xhal.InvalidArgumentError, "not both"),
        (lambda: saxpy(x, y, a=1.0, n=64, workgroups=(1, 1, 1, 1)), xhal.InvalidArgumentError, "dimensions"),
        (lambda: saxpy(x, np.zeros(64, np.float32), a=1.0, n=64, invocations=64), TypeError, "read_write"),
        (lambda: saxpy(x, dev.zeros(0), a=1.0, n=64, invocations=64), xhal.XhalError, "y|binding"),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message):
            call()
    saxpy(dev.full(64, 2.0), y, a=1.0, n=64, invocations=64)
    np.testing.assert_array_equal(y.numpy(), np.full(64, 2.0))


FIXED = """
@group(0) @binding(0) var<storage, read_write> fixed: array<f32, 16>;
@compute @workgroup_size(1)
fn first(@builtin(global_invocation_id) id: vec3<u32>) { fixed[id.x] = 1.0; }
"""


def test_a_buffer_too_small_for_its_binding_is_refused(dev):
    kernel = dev.load_wgsl(FIXED).kernel()
    (param,) = kernel.params
    assert param.size == 64 and param.type == "array<f32, 16>"
    for small in (dev.zeros(8), dev.zeros(32)[:15], dev.zeros(0)):
        with pytest.raises(xhal.InvalidArgumentError, match="`fixed`.*needs at least 64"):
            kernel(small, workgroups=1)
    whole = dev.zeros(16)
    kernel(whole, workgroups=1)
    assert whole.numpy()[0] == 1.0


def test_an_array_of_another_device_is_refused(dev, saxpy):
    other = xhal.device(dev.label)
    with pytest.raises(xhal.InvalidHandleError, match="buffer `x` is on device"):
        saxpy(other.zeros(64), dev.zeros(64), a=1.0, n=64, invocations=64)
    with pytest.raises(xhal.InvalidHandleError, match="stream"):
        saxpy(dev.zeros(64), dev.zeros(64), a=1.0, n=64, invocations=64, stream=other.stream())


def test_a_module_that_does_not_compile_names_the_line(dev):
    with pytest.raises(xhal.XhalError, match="line|:"):
        dev.load_wgsl("@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }")
    with pytest.raises(xhal.XhalError):
        dev.load_wgsl(SAXPY).kernel("nonesuch")


def test_streams_and_events(dev, saxpy):
    stream = dev.stream()
    assert stream.device == dev
    n = 4096
    x, y = dev.asarray(floats(n, 5)), dev.zeros(n)
    start = stream.record()
    for _ in range(10):
        saxpy(x, y, a=1.0, n=n, invocations=n, stream=stream)
    end = stream.record(dev.event())
    end.synchronize()
    assert end.query()
    stream.synchronize()
    assert stream.query()
    assert end.timing and end.elapsed_since(start) >= 0.0
    other = dev.stream()
    other.wait(end)
    np.testing.assert_array_equal(y.numpy(stream=other), 10 * floats(n, 5))
    untimed = dev.event(timing=False)
    stream.record(untimed)
    with pytest.raises(xhal.XhalError):
        untimed.elapsed_since(start)
    stream.destroy()
    with pytest.raises(xhal.InvalidHandleError):
        stream.synchronize()
    with pytest.raises(xhal.InvalidHandleError):
        saxpy(x, y, a=1.0, n=n, invocations=n, stream=stream)
    end.destroy()
    with pytest.raises(xhal.InvalidHandleError):
        end.synchronize()


def test_stream_priorities(dev, saxpy):
    least, most_urgent = dev.stream_priorities
    assert least == 0 and most_urgent <= 0
    assert dev.stream().priority == 0
    urgent = dev.stream(priority=-1)
    assert urgent.priority == max(-1, most_urgent)
    # Beyond either end is clamped to it, as CUDA does.
    assert dev.stream(priority=-1000).priority == most_urgent
    assert dev.stream(priority=5).priority == 0
    n = 2048
    x, y = dev.asarray(floats(n, 3), stream=urgent), dev.zeros(n, stream=urgent)
    saxpy(x, y, a=2.0, n=n, invocations=n, stream=urgent)
    np.testing.assert_array_equal(y.numpy(stream=urgent), 2 * floats(n, 3))


def test_several_python_threads(dev, saxpy):
    n, rounds = 2048, 20
    results, errors = {}, []

    def work(k):
        try:
            stream = dev.stream()
            x = dev.asarray(np.full(n, k, np.float32), stream=stream)
            y = dev.zeros(n, stream=stream)
            for _ in range(rounds):
                saxpy(x, y, a=1.0, n=n, invocations=n, stream=stream)
            results[k] = y.numpy(stream=stream)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k in range(4):
        np.testing.assert_array_equal(results[k], np.full(n, k * rounds, np.float32))


def test_help_shows_docstrings():
    assert "WGSL" in (xhal.__doc__ or "")
    assert "invocations=" in (xhal.Kernel.launch.__doc__ or "")
    assert "contiguous" in (xhal.Array.__doc__ or "")
    assert "XHAL_DEVICE" in (xhal.device.__doc__ or "")


def test_a_name_shared_by_a_buffer_and_a_scalar_is_reported(dev):
    source = """
struct P { n: u32 }
var<immediate> p: P;
@group(0) @binding(0) var<storage, read_write> n: array<u32>;
@compute @workgroup_size(1)
fn f() { n[0] = p.n; }
"""
    kernel = dev.load_wgsl(source).kernel()
    with pytest.raises(xhal.InvalidArgumentError, match="both named `n`"):
        kernel(n=dev.zeros(1, dtype="uint32"), workgroups=1)
    out = dev.zeros(1, dtype="uint32")
    kernel(out, n=7, workgroups=1)
    assert out.numpy()[0] == 7

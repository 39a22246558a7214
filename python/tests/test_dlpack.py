import numpy as np
import pytest

import xhal


def test_numpy_takes_an_array_through_dlpack(dev):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = dev.asarray(host)
    assert a.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(a)
    np.testing.assert_array_equal(out, host)
    mappable = "host_mappable" in dev.info["features"]
    if mappable:
        # Zero-copy: the array is mapped, read-only, while numpy holds it.
        assert not out.flags.writeable
        with pytest.raises(xhal.XhalError, match="mapped"):
            a.fill(0)
        del out
    else:
        # A copy, which numpy may write.
        assert out.flags.writeable
    a.fill(1)  # usable again once numpy let go
    np.testing.assert_array_equal(a.numpy(), np.ones((3, 4)))


def test_copy_requests(dev):
    a = dev.asarray(np.arange(4, dtype=np.int32))
    copied = np.from_dlpack(a, copy=True)
    assert copied.flags.writeable
    copied[0] = 99
    assert a.numpy()[0] == 0
    if "host_mappable" not in dev.info["features"]:
        with pytest.raises(BufferError, match="copy=False"):
            np.from_dlpack(a, copy=False)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError, match="stream"):
        a.__dlpack__(stream=1)


def test_a_view_exports_its_own_elements(dev):
    a = dev.asarray(np.arange(20, dtype=np.int16).reshape(4, 5))
    np.testing.assert_array_equal(np.from_dlpack(a[2]), [10, 11, 12, 13, 14])
    np.testing.assert_array_equal(np.from_dlpack(a[1:3]), np.arange(5, 15).reshape(2, 5))


def test_legacy_consumers_get_a_copy(dev):
    a = dev.asarray(np.arange(3, dtype=np.float64))
    capsule = a.__dlpack__()
    assert "dltensor" in repr(capsule)
    del capsule  # freed by its destructor, never consumed


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64", "float16", "float32", "float64"])
def test_from_dlpack_round_trips(dev, dtype):
    host = (np.arange(6) % 3).astype(dtype)
    a = xhal.from_dlpack(host, device=dev)
    assert a.device == dev and a.dtype == host.dtype
    np.testing.assert_array_equal(np.from_dlpack(a), host)
    b = xhal.from_dlpack(a, device=dev)
    np.testing.assert_array_equal(b.numpy(), host)


def test_from_dlpack_misuse(dev):
    with pytest.raises(TypeError, match="__dlpack__"):
        xhal.from_dlpack([1, 2, 3], device=dev)
    with pytest.raises(BufferError):
        xhal.from_dlpack(np.zeros(2), device=dev, copy=False)
    # Strided numpy views arrive contiguous.
    strided = np.arange(10, dtype=np.int32)[::2]
    np.testing.assert_array_equal(xhal.from_dlpack(strided, device=dev).numpy(), [0, 2, 4, 6, 8])


def test_torch_takes_a_cpu_tensor_through_dlpack(dev):
    torch = pytest.importorskip("torch", reason="torch is not installed in this environment")
    t = torch.arange(6, dtype=torch.float32)
    a = xhal.from_dlpack(t, device=dev)
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype=np.float32))
    back = torch.from_dlpack(a)
    assert back.tolist() == list(range(6))

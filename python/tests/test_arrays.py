import numpy as np
import pytest

import xhal

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_of_every_dtype(dev, dtype):
    host = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    a = dev.asarray(host)
    assert a.shape == (2, 3, 4) and a.ndim == 3 and a.size == 24
    assert a.dtype == np.dtype(dtype)
    assert a.nbytes == host.nbytes and a.itemsize == host.itemsize
    assert a.device == dev
    back = a.numpy()
    assert back.dtype == host.dtype
    np.testing.assert_array_equal(back, host)
    np.testing.assert_array_equal(np.asarray(a), host)
    assert a.tolist() == host.tolist()


def test_lists_and_the_buffer_protocol(dev):
    assert dev.asarray([1.5, 2.5]).numpy().tolist() == [1.5, 2.5]
    assert dev.asarray([1.5, 2.5], dtype="float32").dtype == np.float32
    assert dev.asarray(bytearray(b"\x01\x02")).numpy().tolist() == [1, 2]
    import array as pyarray
    assert dev.asarray(pyarray.array("i", [7, -7])).numpy().tolist() == [7, -7]


def test_zeros_full_and_empty(dev):
    np.testing.assert_array_equal(dev.zeros((3, 2), dtype="int32").numpy(), np.zeros((3, 2), np.int32))
    np.testing.assert_array_equal(dev.full(5, 2.5).numpy(), np.full(5, 2.5, np.float32))
    np.testing.assert_array_equal(dev.full(3, -3, dtype=np.int16).numpy(), [-3, -3, -3])
    np.testing.assert_array_equal(dev.full(2, 1e300, dtype="float64").numpy(), [1e300, 1e300])
    assert dev.empty((4, 0)).shape == (4, 0)
    assert dev.zeros(0).numpy().shape == (0,)


def test_views_share_memory_and_kernels_see_them(dev):
    a = dev.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    row = a[1]
    assert row.shape == (4,)
    np.testing.assert_array_equal(row.numpy(), [4, 5, 6, 7])
    part = a[2, 1:3]
    np.testing.assert_array_equal(part.numpy(), [9, 10])
    np.testing.assert_array_equal(a[1:].numpy(), np.arange(4, 12).reshape(2, 4))
    np.testing.assert_array_equal(a[-1].numpy(), [8, 9, 10, 11])
    row.fill(0)
    np.testing.assert_array_equal(a.numpy()[1], [0, 0, 0, 0])
    flat = a.reshape(-1)
    assert flat.shape == (12,)
    assert a.reshape(2, 6).shape == (2, 6)


def test_views_that_are_not_contiguous_are_refused(dev):
    a = dev.zeros((3, 4))
    with pytest.raises(xhal.InvalidArgumentError, match="step"):
        a[::2]
    with pytest.raises(xhal.InvalidArgumentError, match="last index"):
        a[1:, 2]
    with pytest.raises(xhal.OutOfBoundsError) as caught:
        a[3]
    assert isinstance(caught.value, IndexError)
    with pytest.raises(xhal.OutOfBoundsError):
        a[0, 0, 0]
    with pytest.raises(TypeError):
        a["x"]
    with pytest.raises(xhal.InvalidArgumentError, match="reshape"):
        a.reshape(5, 5)


def test_copies(dev):
    a = dev.asarray(np.arange(6, dtype=np.int32))
    b = a.copy()
    a.fill(9)
    np.testing.assert_array_equal(b.numpy(), np.arange(6))
    b.copy_from(a)
    np.testing.assert_array_equal(b.numpy(), np.full(6, 9))
    with pytest.raises(xhal.InvalidArgumentError, match="same shape and dtype"):
        b.copy_from(dev.zeros(6))
    other = xhal.device(dev.label)
    moved = a.to(other)
    assert moved.device == other
    np.testing.assert_array_equal(moved.numpy(), np.full(6, 9))
    with pytest.raises(xhal.InvalidHandleError, match="another|device"):
        b.copy_from(moved)
    assert np.asarray(dev.asarray(np.ones(2)), dtype=np.int8).dtype == np.int8
    with pytest.raises(ValueError):
        np.asarray(a, copy=False)
    # From another xhal array: a device copy, or a conversion through the host.
    again = dev.asarray(a)
    a.fill(5)
    np.testing.assert_array_equal(again.numpy(), np.full(6, 9))
    np.testing.assert_array_equal(dev.asarray(a, dtype="float32").numpy(), np.full(6, 5.0))
    np.testing.assert_array_equal(other.asarray(a).numpy(), np.full(6, 5))


def test_bad_arguments(dev):
    with pytest.raises(xhal.InvalidArgumentError, match="negative"):
        dev.zeros((2, -1))
    with pytest.raises(xhal.InvalidArgumentError, match="dtype"):
        dev.zeros(2, dtype="complex64")
    with pytest.raises(xhal.InvalidArgumentError, match="dtype"):
        dev.zeros(2, dtype="no such type")
    with pytest.raises(xhal.InvalidArgumentError):
        dev.asarray(np.array(["a", "b"]))
    with pytest.raises(xhal.InvalidArgumentError, match="one number"):
        dev.full(3, [1, 2])
    with pytest.raises(xhal.InvalidArgumentError):
        dev.full(3, 300, dtype="int8")
    with pytest.raises(xhal.InvalidArgumentError, match="shape"):
        dev.zeros("big")
    with pytest.raises(xhal.XhalError):
        dev.zeros(1 << 62)


def test_memory_statistics_in_torch_vocabulary(dev):
    dev.synchronize()
    before = dev.memory_allocated()
    a = dev.zeros(1 << 16, dtype="uint8")
    assert dev.memory_allocated() >= before + (1 << 16)
    assert dev.max_memory_allocated() >= dev.memory_allocated()
    assert dev.memory_reserved() >= dev.memory_allocated()
    assert dev.max_memory_reserved() >= dev.memory_reserved()
    stats = dev.memory_stats()
    assert stats["allocated_bytes"] == dev.memory_allocated()
    del a
    dev.synchronize()
    assert dev.memory_allocated() == before
    dev.empty_cache()
    dev.reset_peak_memory_stats()
    assert dev.max_memory_allocated() == dev.memory_allocated()

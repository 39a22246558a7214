"""The device contract, in the manner of PyTorch's OpenReg checks: creation, round trips,
views, in-place operations, item(), autograd, modules, the generated methods, memory
statistics, streams and events, and misuse that must raise rather than crash."""

import pytest
import torch

import xhal.torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]


def sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(1)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def test_the_accelerator_is_xhal(dev):
    assert torch.accelerator.current_accelerator().type == "xhal"
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == xhal.torch.device_count() >= 1
    assert torch.xhal.is_available() and torch.xhal.device_count() >= 1
    torch.xhal.set_device(0)
    assert torch.xhal.current_device() == 0
    assert xhal.torch.devices()[0]["label"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trips(dev, dtype):
    cpu = sample(dtype)
    on = cpu.to(dev)
    assert on.device == dev and on.dtype == dtype
    assert torch.equal(on.cpu(), cpu)
    # Non-contiguous in both directions.
    assert torch.equal(on.t().cpu(), cpu.t())
    assert torch.equal(cpu.t().to(dev).cpu(), cpu.t())
    assert torch.equal(on[:, ::2].cpu(), cpu[:, ::2])
    target = torch.zeros_like(cpu).to(dev)
    target[:, 1:3] = cpu[:, 1:3].to(dev)
    expected = torch.zeros_like(cpu)
    expected[:, 1:3] = cpu[:, 1:3]
    assert torch.equal(target.cpu(), expected)
    # Device to device, and a dtype change on the way.
    assert torch.equal(on.clone().cpu(), cpu)
    if dtype not in (torch.bool, torch.complex64):
        assert torch.equal(on.to(torch.float32).cpu(), cpu.to(torch.float32))


def test_creation(dev):
    assert torch.equal(torch.zeros(4, 3, device=dev).cpu(), torch.zeros(4, 3))
    assert torch.equal(torch.ones(7, device=dev, dtype=torch.int64).cpu(), torch.ones(7, dtype=torch.int64))
    assert torch.equal(torch.full((2, 2), 2.5, device=dev).cpu(), torch.full((2, 2), 2.5))
    assert torch.equal(torch.full((3,), 2**40 + 3, device=dev).cpu(), torch.full((3,), 2**40 + 3))
    assert torch.equal(torch.arange(10, device=dev).cpu(), torch.arange(10))
    empty = torch.empty(0, 3, device=dev)
    assert empty.shape == (0, 3) and empty.cpu().shape == (0, 3)
    assert torch.empty(5, device=dev).device == dev


def test_views_share_memory_and_data_ptr_arithmetic(dev):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(dev)
    row = base[1]
    assert row.data_ptr() == base.data_ptr() + 4 * 4
    assert base.t()[2, 1].data_ptr() == base.data_ptr() + (1 * 4 + 2) * 4
    row.mul_(10)
    assert base.cpu()[1].tolist() == [40, 50, 60, 70]
    view = base.view(2, 6)
    view[0, 0] = -1
    assert base.cpu()[0, 0] == -1
    strided = base.as_strided((2, 2), (1, 4), 1)
    assert torch.equal(strided.cpu(), base.cpu().as_strided((2, 2), (1, 4), 1))
    assert torch.equal(base.unsqueeze(0).permute(2, 0, 1).cpu(), base.cpu().unsqueeze(0).permute(2, 0, 1))
    assert torch.equal(base.expand(2, 3, 4).cpu(), base.cpu().expand(2, 3, 4))


def test_in_place_operations(dev):
    cpu = torch.randn(4, 4)
    on = cpu.to(dev)
    on.add_(1).mul_(2).sub_(torch.ones(4, device=dev), alpha=3)
    cpu.add_(1).mul_(2).sub_(torch.ones(4), alpha=3)
    assert torch.allclose(on.cpu(), cpu)
    on.zero_()
    assert torch.count_nonzero(on.cpu()) == 0
    on.fill_(1.5)
    assert torch.all(on.cpu() == 1.5)
    on[1:3, 1:3].fill_(-2)
    assert on.cpu()[2, 2] == -2 and on.cpu()[0, 0] == 1.5
    on.resize_(20)
    assert on.shape == (20,) and on.cpu()[:16].tolist()[:5] == [1.5, 1.5, 1.5, 1.5, 1.5]


def test_item(dev):
    assert torch.tensor(3.25).to(dev).item() == 3.25
    assert torch.tensor(-7, dtype=torch.int64).to(dev).item() == -7
    assert torch.tensor(True).to(dev).item() is True
    assert torch.arange(5.0).to(dev).sum().item() == 10.0
    with pytest.raises(RuntimeError):
        torch.ones(2, device=dev).item()


def test_autograd(dev):
    x = torch.randn(5, 3, requires_grad=True)
    w = torch.randn(3, 2, requires_grad=True)
    (torch.tanh(x @ w).sigmoid() * 2).sum().backward()
    xd = x.detach().to(dev).requires_grad_()
    wd = w.detach().to(dev).requires_grad_()
    (torch.tanh(xd @ wd).sigmoid() * 2).sum().backward()
    assert torch.allclose(xd.grad.cpu(), x.grad, atol=1e-5)
    assert torch.allclose(wd.grad.cpu(), w.grad, atol=1e-5)


def test_modules_and_generated_methods(dev):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    model.to("xhal")
    assert all(p.device.type == "xhal" for p in model.parameters())
    t = torch.ones(2, 3).xhal()
    assert t.is_xhal and t.device.type == "xhal"
    assert model(t).shape == (2, 4)
    back = torch.nn.Linear(2, 2).xhal()
    assert back.weight.is_xhal
    storage = torch.ones(3).untyped_storage().xhal()
    assert storage.device.type == "xhal"


def test_memory_statistics(dev):
    torch.xhal.synchronize()
    before = torch.accelerator.memory_allocated(dev)
    big = torch.empty(1 << 20, device=dev)
    assert torch.accelerator.memory_allocated(dev) >= before + (4 << 20)
    assert torch.accelerator.max_memory_allocated(dev) >= before + (4 << 20)
    assert torch.accelerator.memory_reserved(dev) >= torch.accelerator.memory_allocated(dev)
    del big
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats(dev)
    assert torch.accelerator.max_memory_allocated(dev) <= before + (4 << 20)


def test_streams_and_events(dev):
    stream = torch.Stream(device=dev)
    start = torch.Event(device=dev, enable_timing=True)
    end = torch.Event(device=dev, enable_timing=True)
    x = torch.randn(256, 256, device=dev)
    # x was written on the current stream: as with CUDA, another stream waits for it.
    stream.wait_stream(torch.accelerator.current_stream(dev))
    with stream:
        start.record()
        y = x @ x
        end.record()
    torch.accelerator.current_stream(dev).wait_stream(stream)
    end.synchronize()
    assert end.query()
    # wait_stream recorded an event on `stream` after `end`; the stream is idle once it has run.
    stream.synchronize()
    assert stream.query()
    assert start.elapsed_time(end) >= 0
    assert torch.allclose(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-4, atol=1e-3)
    torch.accelerator.synchronize()


def test_pinned_memory_and_non_blocking_copies(dev):
    x = torch.arange(4096, dtype=torch.float32)
    pinned = x.pin_memory()
    assert pinned.is_pinned() and not x.is_pinned()
    assert pinned[100:].is_pinned()  # a pointer inside pinned memory is pinned
    assert torch.empty(16, pin_memory=True).is_pinned()
    # To the device and back, queued without waiting; a synchronize makes the result visible.
    on_device = pinned.to(dev, non_blocking=True)
    back = torch.empty(4096).pin_memory()
    back.copy_(on_device * 2, non_blocking=True)
    torch.xhal.synchronize()
    assert torch.equal(back, x * 2)
    # Ordered by an event instead: the host waits for the event, then reads.
    done = torch.Event(device=dev)
    view = torch.empty(1000, dtype=torch.float32).pin_memory()
    view.copy_(on_device[:1000] + 1, non_blocking=True)
    done.record()
    done.synchronize()
    assert torch.equal(view, x[:1000] + 1)
    # A blocking copy from pinned memory takes the bytes at once: changing them after is safe.
    snapshot = pinned.to(dev)
    pinned.fill_(-1)
    assert torch.equal(snapshot.cpu(), x)
    # Pinned memory that does not match the device tensor's layout takes the ordinary path.
    odd = torch.empty(64, 64).pin_memory()
    odd.t().copy_(on_device[:4096].view(64, 64), non_blocking=True)
    torch.xhal.synchronize()
    assert torch.equal(odd.t(), x.view(64, 64))
    with pytest.raises(RuntimeError, match="only CPU memory can be pinned"):
        torch.empty(4, device=dev, pin_memory=True)


def test_dlpack_export_shares_memory(dev):
    from torch.utils.dlpack import DLDeviceType

    t = torch.arange(12.0).reshape(3, 4).to(dev)
    view = t[:, 1:3]
    assert view.__dlpack_device__() == (DLDeviceType.kDLExtDev, dev.index)
    shared = torch.from_dlpack(view)
    assert shared.device == view.device and shared.data_ptr() == view.data_ptr()
    assert shared.stride() == view.stride()
    assert torch.equal(shared.cpu(), view.cpu())
    shared.add_(100)  # the same memory: t changes
    assert torch.equal(t.cpu()[:, 1:3], torch.arange(12.0).reshape(3, 4)[:, 1:3] + 100)
    capsule = torch.utils.dlpack.to_dlpack(t[1])
    assert torch.equal(torch.utils.dlpack.from_dlpack(capsule).cpu(), t.cpu()[1])
    # CPU tensors keep torch's own answer.
    assert torch.arange(3).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)


def test_fallbacks_are_counted(dev):
    x = torch.randn(8, device=dev)
    # A Bessel function has no xhal kernel.
    torch.special.bessel_j0(x)
    torch.special.bessel_j0(x)
    _ = x + x
    counts = xhal.torch.fallback_counts()
    assert counts.get("aten::special_bessel_j0.out") == 2
    assert "aten::add.out" not in counts
    xhal.torch.reset_fallback_counts()
    assert xhal.torch.fallback_counts() == {}


def test_misuse_raises(dev):
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.zeros(2, device=f"xhal:{xhal.torch.device_count() + 3}")
    with pytest.raises(RuntimeError):
        torch.ones(3, device=dev) + torch.ones(4, device=dev)
    with pytest.raises(RuntimeError):
        torch.ones(2, 3, device=dev) @ torch.ones(2, 3, device=dev)
    with pytest.raises(ValueError):
        xhal.torch.set_device("cpu")
    # The device still works afterwards.
    assert torch.ones(2, device=dev).sum().item() == 2

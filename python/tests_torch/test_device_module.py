"""torch.xhal, the device module PyTorch's utilities look for, in the manner of OpenReg's device,
stream, event and memory tests: the device context manager, properties, streams with
priorities, events, memory statistics, lazy initialisation, and the refusals of a forked child
and of sharing tensors between processes."""

import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import xhal.torch


def test_the_device_module_is_registered(dev):
    assert torch.get_device_module("xhal") is torch.xhal
    assert torch.xhal.is_available() and torch.xhal.is_initialized()
    for name in ("device", "device_of", "get_device_name", "get_device_properties", "get_device_capability",
                 "Stream", "Event", "memory_stats", "mem_get_info", "manual_seed", "get_rng_state",
                 "get_amp_supported_dtype", "current_stream", "synchronize"):
        assert hasattr(torch.xhal, name), name


def test_device_context_manager(dev):
    count = torch.xhal.device_count()
    with torch.xhal.device(count - 1):
        assert torch.xhal.current_device() == count - 1
        assert torch.empty(1, device="xhal").device.index == count - 1
    assert torch.xhal.current_device() == 0
    with torch.xhal.device(None):
        assert torch.xhal.current_device() == 0
    with torch.xhal.device_of(torch.empty(1, device=dev)):
        assert torch.xhal.current_device() == 0
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.xhal.set_device(count + 5)
    with pytest.raises(ValueError, match="expected an xhal device"):
        torch.xhal.device("cpu")


def test_device_properties(dev):
    properties = torch.xhal.get_device_properties(dev)
    label = xhal.torch.devices()[0]["label"]
    assert properties.label == label and properties.name == torch.xhal.get_device_name(0)
    assert properties.backend == label.split(":")[0]
    assert properties.total_memory > 0 and properties.max_workgroup_invocations > 0
    assert isinstance(properties.features, tuple)
    assert ("f64" in properties.features) == (torch.float64 in xhal.torch.native_dtypes(0))
    capability = torch.xhal.get_device_capability()
    assert torch.float32 in capability["supported_dtypes"]
    assert torch.bfloat16 in capability["supported_dtypes"]
    assert torch.accelerator.get_device_capability(dev) == capability


# The backends whose plugins schedule streams by priority (ABI 1.5); the others run every
# stream alike, and their urgent streams are plain ones.
SCHEDULES_BY_PRIORITY = ("cpu", "cuda", "rocm", "level-zero")


def test_streams_and_priorities(dev):
    low, high = torch.xhal.stream_priority_range()
    backend = xhal.torch.devices()[dev.index or 0]["label"].split(":")[0]
    assert (low, high) == ((0, -1) if backend in SCHEDULES_BY_PRIORITY else (0, 0)), backend
    assert torch.xhal.Stream.priority_range() == (low, high)
    s = torch.xhal.Stream()
    urgent = torch.xhal.Stream(priority=-1)
    assert s.priority == 0 and urgent.priority == high
    assert s.stream_id != urgent.stream_id
    generic = torch.Stream(device=dev, priority=-1)
    assert torch.xhal.Stream.priority.fget(generic) == high
    # Beyond the most urgent priority is clamped to it, as on CUDA; a positive one is refused.
    assert torch.xhal.Stream(priority=-5).priority == high
    with pytest.raises(ValueError, match="priority is 0 or negative"):
        torch.xhal.Stream(priority=1)
    a = torch.ones(1000, device=dev)
    # As on CUDA, work on another stream waits for what it reads only when told to.
    urgent.wait_stream(torch.xhal.current_stream())
    with torch.xhal.stream(urgent):
        assert torch.xhal.current_stream() == urgent
        b = a * 2
    assert torch.xhal.current_stream() == torch.xhal.default_stream()
    torch.xhal.current_stream().wait_stream(urgent)
    assert torch.equal(b.cpu(), torch.full((1000,), 2.0))
    urgent.synchronize()
    assert urgent.query()


def test_events_time_and_order(dev):
    start = torch.xhal.Event(enable_timing=True)
    end = torch.xhal.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device=dev)
    for _ in range(3):
        x = x @ x.t() / 256
    end.record()
    end.synchronize()
    assert end.query()
    if "timestamps" in torch.xhal.get_device_properties().features:
        assert start.elapsed_time(end) >= 0
    with pytest.raises(ValueError, match="interprocess"):
        torch.xhal.Event(interprocess=True)


def test_memory_statistics(dev):
    torch.xhal.synchronize()
    torch.xhal.reset_peak_memory_stats()
    before = torch.xhal.memory_allocated()
    x = torch.empty(1 << 20, device=dev)
    assert torch.xhal.memory_allocated() >= before + x.nbytes
    assert torch.xhal.max_memory_allocated() >= torch.xhal.memory_allocated()
    assert torch.xhal.memory_reserved() >= torch.xhal.memory_allocated()
    stats = torch.xhal.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.xhal.memory_allocated()
    free, total = torch.xhal.mem_get_info()
    assert 0 <= free <= total == torch.xhal.get_device_properties().total_memory
    del x
    torch.xhal.empty_cache()
    assert torch.xhal.memory_allocated() == before


def test_initialisation_is_lazy():
    # Importing xhal.torch and seeding find no devices; the first use does.
    script = textwrap.dedent(
        """
        import torch, xhal.torch
        assert not torch.xhal.is_initialized()
        torch.manual_seed(3)
        assert not torch.xhal.is_initialized()
        a = torch.rand(4, device="xhal")
        assert torch.xhal.is_initialized()
        torch.manual_seed(3)
        assert torch.equal(a.cpu(), torch.rand(4, device="xhal").cpu())
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def _child_uses_xhal(queue):
    try:
        torch.ones(1, device="xhal").sum().item()
        queue.put("ran")
    except RuntimeError as error:
        queue.put(str(error))
    queue.put(f"bad fork {torch.xhal._is_in_bad_fork()}, available {torch.xhal.is_available()}")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="this platform has no fork()")
def test_a_forked_child_of_an_initialised_parent_is_refused(dev):
    torch.ones(1, device=dev).sum().item()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_uses_xhal, args=(queue,))
    child.start()
    child.join(120)
    assert child.exitcode == 0
    message = queue.get(timeout=10)
    assert "forked child" in message and "spawn" in message
    assert queue.get(timeout=10) == "bad fork True, available False"
    # The parent goes on.
    assert torch.ones(2, device=dev).sum().item() == 2


def test_tensors_are_not_shared_between_processes(dev):
    from multiprocessing.reduction import ForkingPickler

    with pytest.raises(RuntimeError, match="cannot be shared with another process"):
        ForkingPickler.dumps(torch.ones(3, device=dev))
    with pytest.raises(RuntimeError, match="cannot be shared with another process"):
        ForkingPickler.dumps(torch.nn.Parameter(torch.ones(3, device=dev)))
    # CPU tensors still are.
    assert ForkingPickler.dumps(torch.ones(3))


def test_checkpoints_round_trip(dev, tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 2)).to(dev)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(4, 6, device=dev)).square().mean().backward()
    optimizer.step()
    path = tmp_path / "checkpoint.pt"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "view": torch.arange(12.0, device=dev).view(3, 4)[:, 1:]}, path)

    loaded = torch.load(path)
    assert loaded["model"]["0.weight"].device == dev
    assert loaded["optimizer"]["state"][0]["exp_avg"].device == dev
    assert torch.equal(loaded["view"].cpu(), torch.arange(12.0).view(3, 4)[:, 1:])
    for name, value in model.state_dict().items():
        assert torch.equal(loaded["model"][name].cpu(), value.cpu()), name

    on_cpu = torch.load(path, map_location="cpu")
    assert on_cpu["model"]["0.weight"].device.type == "cpu"
    remapped = torch.load(path, map_location={"xhal:0": "cpu"})
    assert remapped["model"]["0.weight"].device.type == "cpu"
    assert torch.load(path, map_location=dev)["model"]["0.weight"].device == dev

    # A fresh model and optimizer resume from the checkpoint and take the same next step.
    resumed = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5), torch.nn.Linear(5, 2)).to(dev)
    resumed.load_state_dict(torch.load(path, map_location="xhal:0")["model"])
    resumed_optimizer = torch.optim.AdamW(resumed.parameters(), lr=1e-2)
    resumed_optimizer.load_state_dict(loaded["optimizer"])
    x = torch.randn(4, 6, device=dev)
    for m, o in ((model, optimizer), (resumed, resumed_optimizer)):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert torch.equal(a.detach().cpu(), b.detach().cpu())

    # A CPU checkpoint loads onto the device.
    torch.save(torch.arange(5.0), tmp_path / "cpu.pt")
    assert torch.load(tmp_path / "cpu.pt", map_location="xhal").device == dev

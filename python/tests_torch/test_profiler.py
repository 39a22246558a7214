"""torch.profiler on xhal, in the manner of OpenReg's profiler tests: with
ProfilerActivity.PrivateUse1, every kernel, copy and fill the device ran is a device event with
the device's times, linked to the operator that queued it, in key_averages() and in the Chrome
trace; and xhal's own trace of the same run has the same kernels."""

import json
import os
import subprocess
import sys
import textwrap

import torch
from torch.profiler import ProfilerActivity, profile

import xhal.torch

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def training_step(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(dev)
    x = torch.randn(16, 32, device=dev)
    model(x).sum().backward()  # compiles the kernels before profiling
    torch.xhal.synchronize()

    def step():
        model.zero_grad()
        model(x).square().mean().backward()

    return step


def test_operators_have_device_time(dev):
    step = training_step(dev)
    with profile(activities=ACTIVITIES) as prof:
        step()
    averages = {event.key: event for event in prof.key_averages()}
    assert averages["aten::addmm"].device_time_total > 0
    assert averages["aten::mm"].device_time_total > 0
    total = sum(event.self_device_time_total for event in prof.key_averages())
    assert total > 0
    # Device events are the device's own work, on its track, linked to their operators.
    device_events = [e for e in prof.events() if str(e.device_type) == "DeviceType.XHAL"]
    assert device_events and all(e.device_index == 0 for e in device_events)
    operators_with_kernels = {e.name for e in prof.events() if e.kernels}
    assert {"aten::addmm", "aten::mm"} <= operators_with_kernels
    table = prof.key_averages().table(row_limit=5)
    assert "Self XHAL" in table and "XHAL total" in table


def test_the_chrome_trace_has_a_device_track(dev, tmp_path):
    step = training_step(dev)
    with profile(activities=ACTIVITIES) as prof:
        step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels and all(e["dur"] >= 0 for e in kernels)
    label = xhal.torch.devices()[0]["label"]
    assert all(e["args"]["device"] == label for e in kernels)
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert f"xhal:0 ({label})" in names
    # Each kernel carries the id of the operator that queued it, and an arrow comes from it.
    operators = {e["args"].get("External id") for e in events if e.get("cat") == "cpu_op"}
    assert all(e["args"]["External id"] in operators for e in kernels)
    assert any(e.get("cat") == "ac2g" for e in events)
    # The device's work falls inside the profiled window, after the operator that queued it.
    starts = {e["args"].get("External id"): e["ts"] for e in events if e.get("cat") == "cpu_op"}
    assert all(e["ts"] + 1 >= starts[e["args"]["External id"]] for e in kernels)


def test_cpu_only_profiling_has_no_device_events(dev):
    step = training_step(dev)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    assert sum(event.self_device_time_total for event in prof.key_averages()) == 0


def test_profiles_one_after_another(dev):
    step = training_step(dev)
    for _ in range(2):
        with profile(activities=ACTIVITIES) as prof:
            step()
        assert sum(event.self_device_time_total for event in prof.key_averages()) > 0


def test_the_xhal_trace_and_the_torch_trace_agree(tmp_path):
    # One run with XHAL_TRACE set: the profiler rides on that trace, and both record the same
    # kernels, with the same device times.
    xhal_trace = tmp_path / "xhal.json"
    torch_trace = tmp_path / "torch.json"
    script = textwrap.dedent(
        f"""
        import torch, xhal.torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.randn(64, 64, device="xhal")
        (x @ x).relu().sum().item()  # compiled before profiling
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = (x @ x).relu().sum()
            torch.xhal.synchronize()
        prof.export_chrome_trace({str(torch_trace)!r})
        """
    )
    environment = dict(os.environ, XHAL_TRACE=str(xhal_trace))
    result = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    torch_kernels = [(e["name"], e["dur"]) for e in json.loads(torch_trace.read_text())["traceEvents"]
                     if e.get("cat") == "kernel"]
    assert torch_kernels
    xhal_events = json.loads(xhal_trace.read_text())  # an array of trace events
    xhal_kernels = [(e["name"], e["dur"]) for e in xhal_events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    # xhal's trace also has the kernels of the warm-up before the profile. Its timestamps are
    # microseconds since 2024 as doubles, good to about 0.008 µs at that size: the same span
    # agrees to a few of those.
    for name, duration in torch_kernels:
        assert any(n == name and abs(d - duration) <= 0.05 for n, d in xhal_kernels), (name, duration, xhal_kernels)

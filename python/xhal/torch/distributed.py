"""``torch.distributed`` with ``xhal`` tensors, on Gloo.

Gloo takes CPU and CUDA tensors only (its collectives refuse any other device), so this
module registers the process-group backend ``"xhal-gloo"``: a real Gloo process group, to
which xhal tensors travel through host memory and come back. CPU tensors go to Gloo as they
are. No transport of xhal's own is involved::

    import torch.distributed as dist
    import xhal.torch.distributed  # registers "xhal-gloo", the default for xhal tensors

    dist.init_process_group(rank=rank, world_size=world_size)   # or backend="xhal-gloo"
    dist.all_reduce(torch.ones(4, device="xhal"))

Every collective here completes before it returns (the staging copies synchronise), so the
``Work`` it returns is already done; ``async_op=True`` is accepted and changes nothing.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import xhal.torch  # noqa: F401  (the device must exist before tensors do)

BACKEND = "xhal-gloo"

__all__ = ["BACKEND"]


class _Done(dist._Work):
    """A collective that has already completed."""

    def __init__(self, result=None):
        super().__init__()
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def get_future(self):
        return self._future


def _to_host(tensors):
    return [t if t.device.type == "cpu" else t.cpu() for t in tensors]


def _back(destinations, staged):
    for destination, host in zip(destinations, staged):
        if destination is not host:
            destination.copy_(host)


class StagedGloo(dist.ProcessGroup):
    """Gloo for xhal tensors: each collective copies them to host memory, runs on Gloo, and
    copies the results back into the same tensors."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):
        return BACKEND

    def allreduce(self, tensors, opts=None):
        staged = _to_host(tensors)
        options = dist.AllreduceOptions()
        if opts is not None:
            options.reduceOp = opts.reduceOp
        self._gloo.allreduce(staged, options).wait()
        _back(tensors, staged)
        return _Done(tensors)

    def broadcast(self, tensors, opts=None):
        staged = _to_host(tensors)
        self._gloo.broadcast(staged, opts if opts is not None else dist.BroadcastOptions()).wait()
        _back(tensors, staged)
        return _Done(tensors)

    def reduce(self, tensors, opts=None):
        staged = _to_host(tensors)
        self._gloo.reduce(staged, opts if opts is not None else dist.ReduceOptions()).wait()
        _back(tensors, staged)
        return _Done(tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        staged_out = [_to_host(outputs) for outputs in output_tensors]
        self._gloo.allgather(staged_out, _to_host(input_tensors)).wait()
        for outputs, staged in zip(output_tensors, staged_out):
            _back(outputs, staged)
        return _Done(output_tensors)

    def _allgather_base(self, output, input, opts=None):
        staged = output.cpu()
        self._gloo._allgather_base(staged, input.cpu()).wait()
        output.copy_(staged)
        return _Done(output)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        staged_out = _to_host(output_tensors)
        staged_in = [_to_host(inputs) for inputs in input_tensors]
        options = dist.ReduceScatterOptions()
        if opts is not None:
            options.reduceOp = opts.reduceOp
        self._gloo.reduce_scatter(staged_out, staged_in, options).wait()
        _back(output_tensors, staged_out)
        return _Done(output_tensors)

    def send(self, tensors, dst, tag=0):
        self._gloo.send(_to_host(tensors), dst, tag).wait()
        return _Done(tensors)

    def recv(self, tensors, src, tag=0):
        staged = _to_host(tensors)
        self._gloo.recv(staged, src, tag).wait()
        _back(tensors, staged)
        return _Done(tensors)

    def barrier(self, opts=None):
        self._gloo.barrier().wait()
        return _Done()


def _create(store, rank, size, timeout):
    return StagedGloo(store, rank, size, timeout)


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "xhal"])
# `init_process_group()` without a backend picks it when the accelerator is xhal.
dist.Backend.default_device_backend_map.setdefault("xhal", BACKEND)

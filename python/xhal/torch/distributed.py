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

_C10dBackend = torch._C._distributed_c10d.Backend

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


def _reduce_op(opts, size):
    """Gloo's reduction for `opts.reduceOp`, and the divisor an average needs after it (Gloo
    has no AVG): the sum, divided by the group's size."""
    op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
    if op == dist.ReduceOp.AVG:
        return dist.ReduceOp.SUM, size
    return op, None


def _divide(tensors, divisor):
    if divisor is not None:
        for t in tensors:
            t.div_(divisor)


class StagedGloo(_C10dBackend):
    """Gloo for xhal tensors, as a c10d backend that PyTorch wraps in its own process group
    (so group names, DeviceMesh, DTensor and FSDP2 work as with any backend): each collective
    copies the xhal tensors to host memory, runs on Gloo, and copies the results back into the
    same tensors. AVG, which Gloo lacks, is a sum divided by the group's size."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):
        return BACKEND

    def name(self):
        return BACKEND

    def allreduce(self, tensors, opts=None):
        staged = _to_host(tensors)
        options = dist.AllreduceOptions()
        options.reduceOp, divisor = _reduce_op(opts, self.size())
        self._gloo.allreduce(staged, options).wait()
        _divide(staged, divisor)
        _back(tensors, staged)
        return _Done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        for tensor in tensors:
            options = dist.AllreduceOptions()
            if opts is not None:
                options.reduceOp = opts.reduceOp
            self.allreduce([tensor], options)
        return _Done(tensors)

    def broadcast(self, tensors, opts=None):
        staged = _to_host(tensors)
        self._gloo.broadcast(staged, opts if opts is not None else dist.BroadcastOptions()).wait()
        _back(tensors, staged)
        return _Done(tensors)

    def reduce(self, tensors, opts=None):
        staged = _to_host(tensors)
        options = dist.ReduceOptions()
        if opts is not None:
            options.rootRank, options.rootTensor = opts.rootRank, opts.rootTensor
        options.reduceOp, divisor = _reduce_op(opts, self.size())
        self._gloo.reduce(staged, options).wait()
        if self.rank() == options.rootRank:
            _divide(staged, divisor)
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

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._allgather_base(output, input)
        return _Done(outputs)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        staged_out = _to_host(output_tensors)
        staged_in = [_to_host(inputs) for inputs in input_tensors]
        options = dist.ReduceScatterOptions()
        options.reduceOp, divisor = _reduce_op(opts, self.size())
        self._gloo.reduce_scatter(staged_out, staged_in, options).wait()
        _divide(staged_out, divisor)
        _back(output_tensors, staged_out)
        return _Done(output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        # The input is the outputs of every rank one after another: scattered as a list.
        chunks = list(input.cpu().chunk(self.size()))
        staged = output.cpu()
        options = dist.ReduceScatterOptions()
        options.reduceOp, divisor = _reduce_op(opts, self.size())
        self._gloo.reduce_scatter([staged], [chunks], options).wait()
        _divide([staged], divisor)
        output.copy_(staged)
        return _Done(output)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._reduce_scatter_base(output, input, opts)
        return _Done(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        staged = output.cpu()
        self._gloo.alltoall_base(staged, input.cpu(), output_split_sizes, input_split_sizes,
                                 opts if opts is not None else dist.AllToAllOptions()).wait()
        output.copy_(staged)
        return _Done(output)

    def scatter(self, output_tensors, input_tensors, opts=None):
        staged_out = _to_host(output_tensors)
        staged_in = [_to_host(inputs) for inputs in input_tensors]
        self._gloo.scatter(staged_out, staged_in, opts if opts is not None else dist.ScatterOptions()).wait()
        _back(output_tensors, staged_out)
        return _Done(output_tensors)

    def gather(self, output_tensors, input_tensors, opts=None):
        staged_out = [_to_host(outputs) for outputs in output_tensors]
        self._gloo.gather(staged_out, _to_host(input_tensors),
                          opts if opts is not None else dist.GatherOptions()).wait()
        for outputs, staged in zip(output_tensors, staged_out):
            _back(outputs, staged)
        return _Done(output_tensors)

    # The names PyTorch's newer collectives call (all_gather_single and the rest).
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

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


def _create(options, backend_options):
    backend = StagedGloo(options.store, options.group_rank, options.group_size, options.timeout)
    # `init_process_group()` without a backend names only the accelerator's; this backend takes
    # CPU tensors as well, as the group's backend for the CPU when it has none.
    group = options.process_group
    if group is not None:
        try:
            group._get_backend(torch.device("cpu"))
        except RuntimeError:
            group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.CUSTOM, backend)
    return backend


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu", "xhal"])
# `init_process_group()` without a backend picks it when the accelerator is xhal.
dist.Backend.default_device_backend_map.setdefault("xhal", BACKEND)

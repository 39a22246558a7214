"""The PyTorch device ``xhal``: every certified xhal plugin as ``torch.device("xhal")``.

``import xhal.torch`` builds the device's C++ extension against the installed torch the first
time (about a minute on two cores; cached after that), renames PyTorch's PrivateUse1 backend to
``xhal`` and registers ``torch.xhal``. ``xhal:N`` is the Nth device that ``XHAL_DEVICE``
selects, in its order; without ``XHAL_DEVICE``, every device in xhal's default order.

Operators with an xhal kernel (WGSL, the same on every backend) run on the device; every
other operator runs on the CPU through PyTorch's fallback and is counted:
:func:`fallback_counts`. See docs/pytorch.md.
"""

from __future__ import annotations

from pathlib import Path

import torch

# torch's Triton carries its own LLVM, whose static initialisers bind to any LLVM already in
# the process's global scope, and Mesa's GL driver (behind wgpu's GL device) puts the
# system's libLLVM there: importing Triton after discovery then crashes (torch.optim imports
# it). Imported first, Triton binds to its own copy, and Mesa's later LLVM to itself.
try:
    import triton  # noqa: F401
except ImportError:
    pass

__all__ = [
    "device_count",
    "current_device",
    "set_device",
    "synchronize",
    "is_available",
    "devices",
    "native_dtypes",
    "fallback_counts",
    "reset_fallback_counts",
]

from . import _device
from ._device import _C, _index, current_device, device_count, is_available, set_device, synchronize

_package = Path(__file__).resolve().parent.parent
_C.set_plugin_path(str(_package / "plugins"))


def _tuning_cache_path() -> str:
    """Where tuning passes keep their choices: XHAL_TORCH_TUNING_CACHE (``off`` for nowhere),
    or ``xhal/tuning.tsv`` in the user's cache folder."""
    import os

    configured = os.environ.get("XHAL_TORCH_TUNING_CACHE")
    if configured is not None:
        return "" if configured.strip().lower() in ("", "off", "0", "none") else configured
    try:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:  # no home folder: no cache, rather than a shared one
        return ""
    return str(Path(cache) / "xhal" / "tuning.tsv")


def _xhal_version() -> str:
    import xhal

    return getattr(xhal, "__version__", "unknown")


_C.set_tuning_cache(_tuning_cache_path(), _xhal_version())


def devices() -> list[dict]:
    """Each ``xhal:N`` with the xhal device behind it: ``[{"index", "label", "name"}]``."""
    return [
        {"index": i, "label": _C.device_label(i), "name": _C.device_name(i)}
        for i in range(_C.device_count())
    ]


_DTYPES = (torch.float32, torch.float16, torch.float64, torch.int32, torch.int64, torch.bool)


def native_dtypes(device=None) -> list[torch.dtype]:
    """The dtypes ``device`` (the current one by default) has kernels for: float32, int32 and
    bool everywhere, and float16, float64 and int64 where the xhal device claims them (its
    ``f16``, ``f64`` and ``i64`` features). Operations on other dtypes run on the CPU."""
    index = _index(device) if device is not None else _C.current_device()
    return [dtype for dtype in _DTYPES if _C.native_dtype(index, dtype)]


def fallback_counts() -> dict[str, int]:
    """How many times each operator without an xhal kernel ran on the CPU instead, by
    ``aten`` name (``"sin.out"``), since the start or :func:`reset_fallback_counts`."""
    return dict(_C.fallback_counts())


def reset_fallback_counts() -> None:
    """Starts the fallback counts again from zero."""
    _C.reset_fallback_counts()


def _answer_dlpack_device() -> None:
    # torch 2.15's Tensor.__dlpack_device__ recognises PrivateUse1 only by the name
    # "privateuse1", and raises for a renamed backend. An xhal tensor answers what an unrenamed
    # one would: kDLExtDev and its index. Every other tensor gets torch's own answer.
    original = torch.Tensor.__dlpack_device__
    if getattr(original, "_xhal", False):
        return

    def __dlpack_device__(self):
        if self.device.type == "xhal":
            from torch.utils.dlpack import DLDeviceType

            return (DLDeviceType.kDLExtDev, self.device.index if self.device.index is not None else 0)
        return original(self)

    __dlpack_device__._xhal = True
    __dlpack_device__.__doc__ = original.__doc__
    torch.Tensor.__dlpack_device__ = __dlpack_device__


def _refuse_sharing_between_processes() -> None:
    # torch.multiprocessing shares CPU tensors through shared memory and CUDA tensors through
    # CUDA's IPC; an xhal tensor would reach the CPU path, which fails deep inside with
    # "_share_fd_: only available on CPU". It is refused by name instead: xhal has no memory
    # that two processes can map.
    from multiprocessing.reduction import ForkingPickler

    from torch.multiprocessing import reductions

    def refuse(what):
        raise RuntimeError(
            f"xhal: {what} on an xhal device cannot be shared with another process: xhal devices have no memory "
            "that two processes can map. Send a CPU copy (tensor.cpu()) and move it to the device in the other "
            "process, or exchange values with torch.distributed (xhal.torch.distributed)"
        )

    def reduce_tensor(tensor):
        if tensor.device.type == "xhal":
            refuse("a tensor")
        return reductions.reduce_tensor(tensor)

    def reduce_storage(storage):
        if storage.device.type == "xhal":
            refuse("a storage")
        return reductions.reduce_storage(storage)

    reductions.init_reductions()
    ForkingPickler.register(torch.Tensor, reduce_tensor)
    ForkingPickler.register(torch.nn.parameter.Parameter, reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)


torch.utils.rename_privateuse1_backend("xhal")
_answer_dlpack_device()
_refuse_sharing_between_processes()
if not hasattr(torch, "xhal"):
    torch._register_device_module("xhal", _device)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, for_packed_sequence=True
    )

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

import types
from pathlib import Path

import torch

from . import _build

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

_C = _build.load()

_package = Path(__file__).resolve().parent.parent
_C.set_plugin_path(str(_package / "plugins"))


def device_count() -> int:
    """How many ``xhal`` devices there are: those ``XHAL_DEVICE`` selects."""
    return _C.device_count()


def is_available() -> bool:
    """Whether there is at least one ``xhal`` device."""
    return _C.device_count() > 0


def current_device() -> int:
    """This thread's current ``xhal`` device index."""
    return _C.current_device()


def set_device(device) -> None:
    """Makes ``device`` (an index, ``"xhal:N"`` or a ``torch.device``) this thread's current device."""
    _C.set_device(_index(device))


def synchronize(device=None) -> None:
    """Waits for the work queued on every stream of ``device`` (the current one by default)."""
    _C.synchronize(_index(device) if device is not None else _C.current_device())


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


def _index(device) -> int:
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "xhal":
        raise ValueError(f"expected an xhal device, not {device}")
    return device.index if device.index is not None else _C.current_device()


def _device_module() -> types.ModuleType:
    module = types.ModuleType("torch.xhal")
    module.__doc__ = "torch.xhal: the xhal device module (see xhal.torch)"
    for name in ("device_count", "current_device", "set_device", "synchronize", "is_available"):
        setattr(module, name, globals()[name])
    module.is_initialized = lambda: True
    module._lazy_init = lambda: None
    # Random numbers for xhal tensors come from the CPU generator (random operators run on the
    # CPU), which torch.manual_seed seeds; there is no generator of xhal's own to seed, and its
    # state, which torch.random.fork_rng saves and restores for the accelerator, is empty.
    module._is_in_bad_fork = lambda: False
    module.manual_seed_all = lambda seed: None
    module.manual_seed = lambda seed: None
    module.get_rng_state = _get_rng_state
    module.set_rng_state = _set_rng_state
    module.get_rng_state_all = lambda: [_get_rng_state(i) for i in range(device_count())]
    module.set_rng_state_all = lambda states: [_set_rng_state(s, i) for i, s in enumerate(states)]
    return module


def _get_rng_state(device="xhal") -> torch.Tensor:
    _index(device)  # an unknown device is an error here too
    return torch.empty(0, dtype=torch.uint8)


def _set_rng_state(new_state: torch.Tensor, device="xhal") -> None:
    _index(device)
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8 or new_state.numel() != 0:
        raise ValueError(
            "xhal devices have no random number generator of their own yet (random operators draw from the "
            f"CPU's), so their state is an empty uint8 tensor; got {new_state!r}"
        )


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


torch.utils.rename_privateuse1_backend("xhal")
_answer_dlpack_device()
if not hasattr(torch, "xhal"):
    torch._register_device_module("xhal", _device_module())
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_storage=True, for_packed_sequence=True
    )

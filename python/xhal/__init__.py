"""xhal: one API for every accelerator, from Python.

Pick a device at run time, move numpy data to it, and run the same WGSL kernel on any
backend xhal certifies (the CPU reference device, Vulkan, wgpu, OpenCL, CUDA, ROCm, Level
Zero)::

    import numpy as np
    import xhal

    dev = xhal.device()                # XHAL_DEVICE, or the best device here
    print(dev.label, dev.why)
    x = dev.asarray(np.arange(4, dtype=np.float32))
    y = dev.zeros(4)
    saxpy = dev.load_wgsl(SOURCE).kernel("saxpy")
    saxpy(x, y, a=2.0, invocations=4)
    print(y.numpy())

Every error from xhal is an :class:`XhalError`; its subclasses mirror xhal's error kinds and
carry xhal's message.
"""

import os as _os

from . import _native
from ._native import (
    Array,
    Device,
    DeviceEntry,
    Event,
    Kernel,
    Module,
    Param,
    Stream,
    __version__,
    device,
    devices,
    doctor,
)


class XhalError(Exception):
    """Base class of every error xhal raises."""


class InvalidArgumentError(XhalError, ValueError):
    """An argument was malformed: a wrong dtype or shape, a missing kernel argument."""


class OutOfBoundsError(XhalError, IndexError):
    """An offset, length or index reached outside an array or buffer."""


class OutOfMemoryError(XhalError, MemoryError):
    """The device could not provide the memory asked for."""


class UnsupportedError(XhalError, NotImplementedError):
    """The device or its backend does not support what was asked."""


class NotFoundError(XhalError, LookupError):
    """A device, backend, kernel or file does not exist."""


class InvalidHandleError(XhalError):
    """An object was closed or destroyed, or belongs to another device."""


class DeviceLostError(XhalError):
    """The device stopped working."""


class KernelFaultError(XhalError):
    """A kernel failed while it ran."""


class TimedOutError(XhalError, TimeoutError):
    """An operation ran past its time limit."""


class InternalError(XhalError):
    """A backend broke an internal rule (a plugin panicked, say)."""


class DriverUnavailableError(XhalError):
    """The vendor driver a backend needs is missing."""


class PluginLoadError(XhalError):
    """A plugin file could not be loaded."""


class SelectionError(XhalError, ValueError):
    """A device selector was malformed or matched no device."""


class UnknownStatusError(XhalError):
    """A plugin returned a status code this version of xhal does not know."""


def from_dlpack(x, *, device=None, copy=None):
    """An xhal array on ``device`` (the one :func:`device` picks when ``None``) with the
    contents of ``x``: anything with ``__dlpack__`` whose data is on the host (a numpy array, a
    CPU torch tensor, an xhal array). An xhal array owns its device memory, so the data is
    always copied into it; ``copy=False`` raises ``BufferError``."""
    import numpy as np

    if copy is False:
        raise BufferError("xhal.from_dlpack copies into device memory; copy=False cannot be honoured")
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"xhal.from_dlpack takes an object with __dlpack__, not {type(x).__name__}")
    host = np.from_dlpack(x)
    target = device if device is not None else _native.device()
    return target.asarray(host)


_native._register_errors(
    {
        "InvalidArgument": InvalidArgumentError,
        "OutOfBounds": OutOfBoundsError,
        "OutOfMemory": OutOfMemoryError,
        "Unsupported": UnsupportedError,
        "NotFound": NotFoundError,
        "InvalidHandle": InvalidHandleError,
        "DeviceLost": DeviceLostError,
        "KernelFault": KernelFaultError,
        "Timeout": TimedOutError,
        "Internal": InternalError,
        "DriverUnavailable": DriverUnavailableError,
        "PluginLoad": PluginLoadError,
        "Selection": SelectionError,
        "Unknown": UnknownStatusError,
    }
)

# The plugins that came with the package serve when XHAL_PLUGIN_PATH does not name others.
_bundled = _os.path.join(_os.path.dirname(__file__), "plugins")
if _os.path.isdir(_bundled):
    _native._set_bundled_plugins(_bundled)

__all__ = [
    "Array",
    "Device",
    "DeviceEntry",
    "DeviceLostError",
    "DriverUnavailableError",
    "Event",
    "InternalError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "Kernel",
    "KernelFaultError",
    "Module",
    "NotFoundError",
    "OutOfBoundsError",
    "OutOfMemoryError",
    "Param",
    "PluginLoadError",
    "SelectionError",
    "Stream",
    "TimedOutError",
    "UnknownStatusError",
    "UnsupportedError",
    "XhalError",
    "__version__",
    "device",
    "devices",
    "doctor",
    "from_dlpack",
]

"""``torch.xhal``: the device module PyTorch's utilities look for (``torch.get_device_module``).

It has what ``torch.cuda`` offers for the same purposes: devices (a context manager, names,
properties), streams and events, memory statistics, the random number generators' seeds and
states, mixed precision's dtypes, and lazy initialisation that refuses a forked child of an
initialised parent. See docs/pytorch.md.
"""

from __future__ import annotations

import dataclasses
import threading

import torch

from . import _build

_C = _build.load()

__all__ = [
    "Event",
    "Stream",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]

# --- Initialisation --------------------------------------------------------------------------

_init_lock = threading.Lock()


def _is_in_bad_fork() -> bool:
    """Whether this process is a forked child of a parent that had initialised xhal: its
    devices cannot be used here (a driver's state does not survive fork)."""
    return _C.in_bad_fork()


def is_initialized() -> bool:
    """Whether xhal's runtime has found its devices in this process (on first use of a device)."""
    return _C.is_initialized()


def __getattr__(name: str):
    # `_initialized`, as torch.cuda has it: torch.utils.checkpoint saves and restores a device's
    # random state only when its module says it is initialised. A module attribute cannot
    # change by itself, so it is answered here.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.xhal' has no attribute '{name}'")


def _check_not_bad_fork() -> None:
    if _C.in_bad_fork():
        raise RuntimeError(
            "xhal: cannot use xhal devices in a forked child process whose parent had initialised them "
            "(a device driver's state does not survive fork()); start the child processes with the 'spawn' "
            "method (torch.multiprocessing.set_start_method('spawn')), or use xhal only in the children"
        )


def _lazy_init() -> None:
    """Finds the devices (xhal's runtime: plugin discovery), once. Seeds given before apply to
    the generators when they are made."""
    if is_initialized():
        return
    _check_not_bad_fork()
    with _init_lock:
        _C.device_count()  # creates the runtime


def init() -> None:
    """Initialises xhal now (PyTorch does it on first use)."""
    _lazy_init()


# --- Devices -----------------------------------------------------------------------------------


def _index(device=None, optional: bool = True) -> int:
    if device is None:
        if not optional:
            raise ValueError("expected an xhal device, got None")
        return current_device()
    if isinstance(device, int):
        if device < 0:
            return current_device()
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "xhal":
            raise ValueError(f"expected an xhal device, not {device}")
        return device.index if device.index is not None else current_device()
    raise TypeError(f"expected an xhal device (an index, 'xhal:N' or a torch.device), got {device!r}")


def is_available() -> bool:
    """Whether there is at least one ``xhal`` device (``XHAL_DEVICE`` chooses them)."""
    if _C.in_bad_fork():
        return False
    return _C.device_count() > 0


def device_count() -> int:
    """How many ``xhal`` devices there are: those ``XHAL_DEVICE`` selects."""
    if _C.in_bad_fork():
        return 0
    return _C.device_count()


def current_device() -> int:
    """This thread's current ``xhal`` device index."""
    return _C.current_device()


def set_device(device) -> None:
    """Makes ``device`` (an index, ``"xhal:N"`` or a ``torch.device``) this thread's current device."""
    _lazy_init()
    _C.set_device(_index(device))


class device:
    """Makes ``device`` the current xhal device inside a ``with`` block (None or a negative
    index: no change), as ``torch.cuda.device`` does."""

    def __init__(self, device):
        self.index = -1 if device is None else _index(device)
        self.previous = -1

    def __enter__(self):
        if self.index >= 0:
            self.previous = current_device()
            set_device(self.index)
        return self

    def __exit__(self, *exc_info):
        if self.previous >= 0:
            set_device(self.previous)
        return False


class device_of(device):
    """Makes the device of ``tensor`` current inside a ``with`` block (no change for a tensor
    that is not on an xhal device)."""

    def __init__(self, tensor):
        super().__init__(tensor.get_device() if tensor.device.type == "xhal" else -1)


def synchronize(device=None) -> None:
    """Waits for the work queued on every stream of ``device`` (the current one by default)."""
    _lazy_init()
    _C.synchronize(_index(device))


@dataclasses.dataclass(frozen=True)
class XhalDeviceProperties:
    """What ``get_device_properties`` reports of an xhal device."""

    name: str
    label: str  # `vulkan:0`: the backend and the device's index in it
    backend: str
    vendor: str
    driver_version: str
    type: str  # `gpu`, `cpu`, ...
    total_memory: int  # bytes
    max_allocation_size: int  # bytes
    max_workgroup_invocations: int
    max_workgroup_memory: int  # bytes
    subgroup_size: int  # 0 when the device does not say
    features: tuple[str, ...]  # `f16`, `f64`, `i64`, `timestamps`, ...


def get_device_properties(device=None) -> XhalDeviceProperties:
    """The facts of ``device`` (the current one by default) as its xhal plugin reports them."""
    _lazy_init()
    return XhalDeviceProperties(**_C.device_properties(_index(device)))


def get_device_name(device=None) -> str:
    """The name of ``device`` (the current one by default), as its driver gives it."""
    return get_device_properties(device).name


def get_device_capability(device=None) -> dict:
    """What ``device`` can hold, as ``torch.accelerator.get_device_capability`` says: tensors of
    these dtypes can be made on it and converted (operators on dtypes without kernels run on the
    CPU: ``xhal.torch.native_dtypes``)."""
    _lazy_init()
    return torch._C._accelerator_getDeviceCapability(_index(device))


# --- Streams and events ----------------------------------------------------------------------


class Stream(torch.Stream):
    """A stream of an xhal device: an in-order queue that runs beside the device's other streams.

    ``priority`` is 0 (the default) or negative (urgent), PyTorch's convention: an urgent
    stream's work is run first where the device schedules by priority (the cpu device's kernel
    threads, CUDA's, HIP's and Level Zero's queues; see ``stream_priority_range``). A priority
    below the device's most urgent is clamped to it, as on CUDA; a positive one is refused."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuilding one from its parts (torch.Stream's own path)
            return super().__new__(cls, **kwargs)
        if priority > 0:
            raise ValueError(f"xhal: a stream's priority is 0 or negative (more urgent); got {priority}")
        _lazy_init()
        with torch.xhal.device(device):
            return super().__new__(cls, device=torch.device("xhal", current_device()), priority=priority)

    @property
    def priority(self) -> int:
        return _C.stream_priority(self.device_index, self.stream_id)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """The current device's ``(least, most urgent)`` priorities: ``stream_priority_range()``."""
        return stream_priority_range()

    def __repr__(self):
        return f"torch.xhal.Stream(device={self.device}, stream_id={self.stream_id}, priority={self.priority})"


def stream_priority_range(device=None) -> tuple[int, int]:
    """The least and the most urgent stream priority of the device, as
    ``torch.cuda.Stream.priority_range``: ``(0, -1)`` where it schedules streams by priority,
    ``(0, 0)`` where it runs every stream alike (vulkan, opencl, wgpu)."""
    _lazy_init()
    return _C.stream_priority_range(_index(device))


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:  # noqa: N802
    """A ``torch.Event`` of the current xhal device. ``enable_timing`` makes it record a device
    timestamp, on devices that have them (``timestamps`` in ``get_device_properties().features``).
    It is a plain ``torch.Event``: PyTorch's event methods accept no subclass as the other event."""
    if interprocess:
        raise ValueError("xhal: events cannot be shared between processes (interprocess=True)")
    _lazy_init()
    return torch.Event(device=torch.device("xhal", current_device()), enable_timing=enable_timing, blocking=blocking)


def current_stream(device=None) -> torch.Stream:
    """This thread's current stream on ``device``."""
    _lazy_init()
    return torch.accelerator.current_stream(torch.device("xhal", _index(device)))


def default_stream(device=None) -> torch.Stream:
    """The default stream of ``device``: what runs when no other stream is current."""
    _lazy_init()
    index = _index(device)
    return torch.Stream(stream_id=0, device_index=index, device_type=_C.device_type_index())


def set_stream(stream: torch.Stream) -> None:
    """Makes ``stream`` current on its device."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


class stream:
    """Makes ``stream`` current inside a ``with`` block (and its device), as ``torch.cuda.stream``."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.device = torch.xhal.device(self.stream.device_index)
        self.device.__enter__()
        self.previous = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info):
        if self.stream is None:
            return False
        set_stream(self.previous)
        self.device.__exit__(*exc_info)
        return False


# --- Memory ----------------------------------------------------------------------------------


def _memory_device(device) -> int:
    _lazy_init()
    return _index(device)


def memory_stats(device=None) -> dict:
    """The caching allocator's statistics of ``device``, in ``torch.cuda.memory_stats``' keys."""
    return torch.accelerator.memory_stats(_memory_device(device))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_memory_device(device))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_memory_device(device))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_memory_device(device))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_memory_device(device))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_memory_device(device))


def mem_get_info(device=None) -> tuple[int, int]:
    """Free and total bytes of ``device``: its memory less what xhal's allocator holds."""
    return torch.accelerator.get_memory_info(_memory_device(device))


def empty_cache() -> None:
    """Returns the memory the caching allocator holds unused to the devices."""
    if is_initialized():
        torch.accelerator.empty_cache()


# --- Random numbers --------------------------------------------------------------------------


def _generator(device=None) -> torch.Generator:
    _lazy_init()
    return _C.default_generator(_index(device))


class _DefaultGenerators:
    """``torch.xhal.default_generators``: each device's default generator, made on first use."""

    def __getitem__(self, index):
        return _generator(index)

    def __len__(self):
        return device_count()

    def __iter__(self):
        return (_generator(i) for i in range(device_count()))


default_generators = _DefaultGenerators()


def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator. It does not initialise xhal."""
    _C.seed_device(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    """Seeds every device's default generator (``torch.manual_seed`` calls it). It does not
    initialise xhal: generators made later start from this seed."""
    _C.seed_all(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> int:
    """Seeds the current device's default generator with a random number, and returns it."""
    return _generator().seed()


def seed_all() -> None:
    """Seeds every device's default generator with one random number."""
    value = _generator(0).seed() if device_count() else 0
    manual_seed_all(value)


def initial_seed() -> int:
    """The current device's default generator's seed."""
    return _generator().initial_seed()


def get_rng_state(device="xhal") -> torch.Tensor:
    """The state of ``device``'s default generator: a CPU uint8 tensor of 16 bytes, its seed
    then its offset (8 bytes each, little-endian), as CUDA's."""
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="xhal") -> None:
    """Restores a state from ``get_rng_state``."""
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


# --- Mixed precision -------------------------------------------------------------------------


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("xhal")`` computes in: float16 and bfloat16 on every device
    (kernels compute float16 in f32 where the device lacks f16; bfloat16 runs on f32 copies)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 tensors work on every xhal device; their operators compute on f32 copies, which
    is emulation, so ``including_emulation=False`` answers False."""
    return bool(including_emulation)

"""Builds the C++ half of ``xhal.torch`` against the installed torch, once, and loads it.

The extension links the xhal C API (``xhal/lib/libxhal_capi.so``), so it does not depend on
which backends exist: plugins are found at run time. It is rebuilt only when its sources or
the torch version change; ``XHAL_TORCH_BUILD_DIR`` chooses where the build is kept
(default: ``~/.cache/xhal/torch-<torch version>``).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
_PACKAGE = _HERE.parent
_NAME = "xhal_torch_C"


def build_directory() -> Path:
    configured = os.environ.get("XHAL_TORCH_BUILD_DIR")
    if configured:
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    version = torch.__version__.replace("+", "-")
    return cache / "xhal" / f"torch-{version}-py{sys.version_info.major}{sys.version_info.minor}"


def _ninja_on_path() -> None:
    """cpp_extension needs ninja; the one pip installs sits beside the interpreter."""
    if shutil.which("ninja") is None:
        scripts = sysconfig.get_path("scripts")
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def load():
    from torch.utils import cpp_extension

    sources = sorted(str(p) for p in (_HERE / "csrc").glob("*.cpp"))
    library = _PACKAGE / "lib"
    include = _PACKAGE / "include"
    if not (library / "libxhal_capi.so").exists():
        raise ImportError(
            f"xhal.torch needs the xhal C API library, {library / 'libxhal_capi.so'}, which this "
            "installation of xhal lacks; build the package with `make python`"
        )
    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    _ninja_on_path()
    if not (directory / f"{_NAME}.so").exists():
        print(
            f"xhal.torch: building the PyTorch extension against torch {torch.__version__} "
            f"(first import; about a minute; kept in {directory})",
            file=sys.stderr,
            flush=True,
        )
    return cpp_extension.load(
        name=_NAME,
        sources=sources,
        extra_include_paths=[str(include), str(_HERE / "csrc")],
        extra_cflags=["-O2", "-Wall", "-Wno-unused-parameter"],
        extra_ldflags=[f"-L{library}", "-lxhal_capi", f"-Wl,-rpath,{library}"],
        build_directory=str(directory),
        verbose=os.environ.get("XHAL_TORCH_VERBOSE_BUILD") == "1",
    )

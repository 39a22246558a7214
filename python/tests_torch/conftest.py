"""The PyTorch device's tests: run once per backend by scripts/python-test.sh, with
XHAL_DEVICE naming the backend, so ``xhal:0`` is that backend's first device. torch is
required: a missing torch fails the run rather than skipping it."""

import os

import pytest
import torch

import xhal.torch  # noqa: F401  (registers the device)


@pytest.fixture(scope="session")
def dev():
    assert xhal.torch.device_count() > 0, "no xhal device: " + os.environ.get("XHAL_DEVICE", "(XHAL_DEVICE unset)")
    return torch.device("xhal:0")


@pytest.fixture(autouse=True)
def fresh_counts():
    xhal.torch.reset_fallback_counts()
    yield


def pytest_configure(config):
    # On the emulated CUDA device, torch's own CUDA support finds the emulator's driver stub
    # on the library path and warns that it is too old; xhal does not use torch's CUDA.
    config.addinivalue_line("filterwarnings", "ignore:CUDA initialization:UserWarning")

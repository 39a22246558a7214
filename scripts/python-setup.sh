#!/usr/bin/env bash
# Creates the project's virtual environment (.venv at the repository root) when it is
# missing, and installs the pinned tools the Python package needs into it: numpy is the
# package's one dependency, pytest runs its tests, and torch with ninja are what xhal.torch
# builds against. (scripts/python-wheel.py packs the wheel; `pip install ./python` fetches
# its own maturin.)
set -euo pipefail
cd "$(dirname "$0")/.."

# One setup at a time: CI starts one in the background while the Rust code compiles, and
# `make python` runs it again; the second waits for the first, then finds everything there.
mkdir -p target
exec 9>target/.python-setup.lock
flock 9

venv=.venv
requirements=(numpy==2.4.6 pytest==9.2.0 ninja==1.13.0)
torch_version=2.15.0

if [ ! -x "$venv/bin/python" ]; then
  echo "python: creating $venv" >&2
  python3 -m venv "$venv"
fi
missing=()
for requirement in "${requirements[@]}"; do
  name="${requirement%%==*}"
  version="${requirement##*==}"
  installed="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)"
  if [ "$installed" != "$version" ]; then
    missing+=("$requirement")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "python: installing ${missing[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

# PyTorch for xhal.torch (python/xhal/torch), with ninja, which builds its C++ extension. The
# only Linux x86_64 wheel of torch is a CUDA build: about 3 GB to download and 5.4 GB
# installed, so it is installed once and reused.
if [ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)" != "$torch_version" ]; then
  echo "python: installing torch==$torch_version into $venv (about 3 GB; a few minutes)" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "torch==$torch_version"
fi

# What the PyTorch device's tests read beside torch: PyTorch's OpInfo database needs expecttest
# (scripts/torch-ops.py, the operator sweep), and the models the tests train come from the
# ecosystem's libraries, built from their configs (python/tests_torch/test_models.py).
# Installed after torch, whose version they accept, so that none of them replaces it.
torch_companions=(expecttest==0.3.0 torchvision==0.29.2 timm==1.0.31 transformers==5.25.0)
missing=()
for requirement in "${torch_companions[@]}"; do
  name="${requirement%%==*}"
  version="${requirement##*==}"
  installed="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)"
  if [ "${installed%%+*}" != "$version" ]; then
    missing+=("$requirement")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "python: installing ${missing[*]} into $venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" "torch==$torch_version"
fi

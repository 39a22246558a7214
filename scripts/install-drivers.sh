#!/usr/bin/env bash
# Installs the user-space drivers the GPU backends are tested on, when they are missing and
# this runs as root with apt: Mesa lavapipe (Vulkan on the CPU) with the Khronos validation
# layer, llvmpipe through EGL (GL), PoCL (OpenCL on the CPU) behind the ICD loader,
# spirv-tools (spirv-val checks the Kernel SPIR-V that xhal-kernel writes), and the Level Zero
# loader libze1 (without a driver: the level-zero backend's tests check that it then reports
# no device and says why), and the Khronos SPIR-V/LLVM translator llvm-spirv-15 (the emulated
# Level Zero device runs Kernel SPIR-V on PoCL through it).
# Otherwise it says loudly which backends will find no device; their tests then skip with
# that reason, unless XHAL_REQUIRE_BACKENDS names them.
# Best effort, never failing: the OpenCL headers and clinfo, with which the Kernel SPIR-V test
# also runs every kernel on PoCL (it skips that part without: clinfo tells it whether the
# device takes SPIR), and
# Debian's HIP runtime and headers, with which the rocm backend's tests also check its
# declarations against the headers, compile with the real hiprtc, and see the real runtime
# report no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."

# One install at a time: CI starts one in the background while the Rust code compiles, and
# `make test` runs it again before the tests; the second waits, then finds everything there.
mkdir -p target
exec 9>target/.install-drivers.lock
flock 9

# NVRTC (CUDA's runtime compiler) runs without a GPU: with it, the cuda backend's tests
# compile the CUDA C of every repository kernel with the real compiler. It comes as a Python
# wheel; only its libraries are kept, in target/nvrtc/ (the Makefile points
# XHAL_NVRTC_LIBRARY at it). Best effort: without pip or network the test skips, saying so,
# unless XHAL_REQUIRE_NVRTC is set.
nvrtc_version=13.0.88
nvrtc_folder=target/nvrtc
if [ ! -f "$nvrtc_folder/libnvrtc.so.13" ] && command -v python3 >/dev/null 2>&1; then
  wheels=$(mktemp -d)
  if python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_12_x86_64 \
    --python-version 3.11 -d "$wheels" "nvidia-cuda-nvrtc==$nvrtc_version" >/dev/null 2>&1; then
    mkdir -p "$nvrtc_folder"
    python3 - "$wheels" "$nvrtc_folder" <<'PYTHON'
import pathlib, sys, zipfile
wheels, folder = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for wheel in wheels.glob("*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            name = pathlib.PurePosixPath(member).name
            if "/lib/" in member and name.startswith("libnvrtc") and ".alt." not in name:
                (folder / name).write_bytes(archive.read(member))
PYTHON
    echo "NVRTC $nvrtc_version: $nvrtc_folder/libnvrtc.so.13"
  else
    echo "note: NVRTC $nvrtc_version could not be downloaded; the cuda backend's NVRTC test will skip" >&2
  fi
  rm -rf "$wheels"
fi

optional=(opencl-c-headers clinfo libamdhip64-dev)
optional_missing=()
for package in "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    optional_missing+=("$package")
  fi
done
install_optional() {
  [ ${#optional_missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  for package in "${optional_missing[@]}"; do
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null 2>&1 ||
      echo "note: optional $package not installed; the Kernel SPIR-V test will not run kernels through it" >&2
  done
}

packages=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers libegl1 libegl-mesa0 libgl1-mesa-dri ocl-icd-libopencl1 pocl-opencl-icd spirv-tools libze1 llvm-spirv-15)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  if [ ${#optional_missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1
  fi
  install_optional
  exit 0
fi

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing the GPU drivers the tests run on: ${missing[*]}"
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    install_optional
    exit 0
  fi
fi
echo "" >&2
echo "!!! missing and not installed: ${missing[*]}" >&2
echo "!!! The wgpu, vulkan and opencl backends may find no device here: their tests and certification are SKIPPED." >&2
echo "!!! Without spirv-tools the Kernel SPIR-V validation test is skipped (and fails under CI)." >&2
echo "!!! Install those packages (as root: apt-get install ${missing[*]}) to run them." >&2
echo "" >&2
exit 0

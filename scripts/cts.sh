#!/usr/bin/env bash
# Certifies backend plugins with xhal-cts: `scripts/cts.sh BACKEND...` (what `make cts` runs).
#
# Each backend's plugin is target/plugins/libxhal_<backend>.so (hostmem, the plugin template:
# target/release/libxhal_hostmem.so); its reports go to
# target/cts/<backend>/, and conformance/known-failures/<backend>.toml is passed when present.
# A backend whose driver is missing (xhal-cts exits 3: no device, or the plugin cannot start)
# is skipped loudly, unless XHAL_REQUIRE_BACKENDS (comma-separated, as CI sets it) names it:
# then it fails. Any failure, crash or timeout fails.
#
# `cpu-interpret` and `cpu-compile` certify the cpu plugin with XHAL_CPU_MODE set to that
# mode (its interpreter, and its compiled kernels built from a fresh kernel cache).
# `cuda-emulated` certifies the cuda plugin on the emulated CUDA device that
# `make cuda-emulator` builds (backends/cuda/tests/emulator/README.md), with
# conformance/known-failures/cuda-emulated.toml where present. `rocm-emulated` certifies the
# rocm plugin on the emulated HIP device that `make rocm-emulator` builds, the same way.
# `level-zero-emulated` certifies the level-zero plugin on the emulated Level Zero device that
# `make level-zero-emulator` builds (backends/level-zero/tests/emulator.md); without PoCL or
# llvm-spirv that device cannot start (exit 3).
set -uo pipefail
cd "$(dirname "$0")/.."

required=",${XHAL_REQUIRE_BACKENDS:-},"
passed=()
skipped=()
failed=()
for backend in "$@"; do
  name="$backend"
  mode_variables=()
  case "$backend" in
    cpu-interpret | cpu-compile)
      name=cpu
      cache="target/cts/${backend}/kernel-cache"
      rm -rf "$cache"
      mode_variables=("XHAL_CPU_MODE=${backend#cpu-}" "XHAL_CACHE_DIR=${cache}")
      ;;
    cuda-emulated)
      # The cuda plugin on the emulated CUDA device (`make cuda-emulator`): the stub driver
      # and the emulator's NVRTC come first on the library path, and nothing else is opened;
      # streams run asynchronously, each on a thread of its own, as on a GPU.
      name=cuda
      emulator="$PWD/target/cuda-emulator"
      if [ ! -f "$emulator/libcuda.so.1" ] || [ ! -f "$emulator/libnvrtc.so.12" ]; then
        echo "FAILED: the CUDA emulator is not built; run make cuda-emulator" >&2
        failed+=("$backend")
        continue
      fi
      mode_variables=(
        "LD_LIBRARY_PATH=${emulator}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        "XHAL_NVRTC_LIBRARY=${emulator}/libnvrtc.so.12"
        "XHEMU_CACHE_DIR=$PWD/target/cts/${backend}/module-cache"
        STUB_DEVICES=1 STUB_POOLS=1 STUB_CLOCK=real STUB_ASYNC=1
      )
      ;;
    level-zero-emulated)
      # The level-zero plugin on the emulated Level Zero device (`make level-zero-emulator`):
      # the stub loader, opened by path, whose kernels run on PoCL. PoCL keeps the kernels it
      # compiles here rather than in the user's cache.
      name=level-zero
      emulator="$PWD/target/level-zero-emulator/libze_loader.so.1"
      if [ ! -f "$emulator" ]; then
        echo "FAILED: the Level Zero emulator is not built; run make level-zero-emulator" >&2
        failed+=("$backend")
        continue
      fi
      mode_variables=(
        "XHAL_LEVEL_ZERO_LOADER=${emulator}"
        "POCL_CACHE_DIR=$PWD/target/cts/${backend}/pocl-cache"
      )
      ;;
    rocm-emulated)
      # The rocm plugin on the emulated HIP device (`make rocm-emulator`): it opens the HIP
      # runtime and hiprtc by name, so the stub runtime and the emulator's hiprtc come first
      # on the library path, before any ROCm installed here.
      name=rocm
      emulator="$PWD/target/rocm-emulator"
      if [ ! -f "$emulator/libamdhip64.so" ] || [ ! -f "$emulator/libhiprtc.so" ]; then
        echo "FAILED: the HIP emulator is not built; run make rocm-emulator" >&2
        failed+=("$backend")
        continue
      fi
      mode_variables=(
        "LD_LIBRARY_PATH=${emulator}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        "XHEMU_CACHE_DIR=$PWD/target/cts/${backend}/module-cache"
        STUB_DEVICES=1
      )
      ;;
  esac
  plugin="target/plugins/libxhal_${name}.so"
  # The plugin template (plugin-template/) is not installed in target/plugins.
  if [ "$backend" = hostmem ]; then
    plugin="target/release/libxhal_hostmem.so"
  fi
  arguments=(run --plugin "$plugin" --report "target/cts/${backend}")
  known="conformance/known-failures/${name}.toml"
  if [ -f "conformance/known-failures/${backend}.toml" ]; then
    known="conformance/known-failures/${backend}.toml"
  fi
  if [ -f "$known" ]; then
    arguments+=(--known-failures "$known")
  fi
  echo "=== xhal-cts: ${backend} ==="
  if [ "$backend" = vulkan ]; then
    # The Vulkan backend is certified with the Khronos validation layer on: any validation
    # message fails the test that caused it.
    XHAL_VULKAN_VALIDATION=1 target/release/xhal-cts "${arguments[@]}"
  else
    env "${mode_variables[@]}" target/release/xhal-cts "${arguments[@]}"
  fi
  status=$?
  case "$status" in
    0) passed+=("$backend") ;;
    3)
      if [[ "$required" == *",${backend},"* || "$required" == *",${name},"* ]]; then
        echo "FAILED: backend ${backend} is required (XHAL_REQUIRE_BACKENDS) but could not be certified; see the error above" >&2
        failed+=("$backend")
      else
        echo "" >&2
        echo "!!! SKIPPED: backend ${backend} could not start here (see the error above); it was NOT certified." >&2
        echo "!!! Install its driver, or set XHAL_REQUIRE_BACKENDS=${backend} to make this a failure." >&2
        echo "" >&2
        skipped+=("$backend")
      fi
      ;;
    *) failed+=("$backend") ;;
  esac
done

echo "=== certification summary ==="
echo "certified: ${passed[*]:-none}"
echo "skipped (no driver): ${skipped[*]:-none}"
echo "failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]

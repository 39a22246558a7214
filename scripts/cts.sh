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
source scripts/backend-env.sh

required=",${XHAL_REQUIRE_BACKENDS:-},"
passed=()
skipped=()
failed=()
for backend in "$@"; do
  if ! backend_environment "$backend" "target/cts/${backend}"; then
    failed+=("$backend")
    continue
  fi
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

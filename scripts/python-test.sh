#!/usr/bin/env bash
# Runs the Python package's tests (python/tests) and the C API's test program
# (hal/capi/tests/c/capi_test.c) once per backend: `scripts/python-test.sh BACKEND...` (what
# `make python-test` runs, after `make python` installed the wheel into .venv and `make capi`
# built the program), and, on the backends XHAL_TORCH_BACKENDS names, the PyTorch device's
# tests (python/tests_torch). Each backend runs as `make cts` runs it (scripts/backend-env.sh), with XHAL_DEVICE
# naming it and the plugins that came with the wheel. A backend with no device here is skipped
# loudly, unless XHAL_REQUIRE_BACKENDS names it: then it fails, as in scripts/cts.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/backend-env.sh

python=.venv/bin/python
required=",${XHAL_REQUIRE_BACKENDS:-},"
passed=()
torch_ran=()
skipped=()
failed=()
for backend in "$@"; do
  if ! backend_environment "$backend" "target/python-test/${backend}"; then
    failed+=("$backend")
    continue
  fi
  mkdir -p "target/python-test/${backend}"
  variables=("${mode_variables[@]}" "XHAL_DEVICE=${name}")
  if [ "$backend" = vulkan ]; then
    variables+=(XHAL_VULKAN_VALIDATION=1)
  fi
  echo "=== python tests: ${backend} ==="
  if ! env -u XHAL_PLUGIN_PATH "${variables[@]}" "$python" -c "import xhal; print(xhal.device().label)"; then
    if [[ "$required" == *",${backend},"* || "$required" == *",${name},"* ]]; then
      echo "FAILED: backend ${backend} is required (XHAL_REQUIRE_BACKENDS) but has no device here; see the error above" >&2
      failed+=("$backend")
    else
      echo "!!! SKIPPED: backend ${backend} has no device here; its Python tests did NOT run." >&2
      skipped+=("$backend")
    fi
    continue
  fi
  if ! env -u XHAL_PLUGIN_PATH "${variables[@]}" "$python" -m pytest python/tests -q -p no:cacheprovider; then
    failed+=("$backend")
    continue
  fi
  # The C API's program on the same device (built by `make capi`), with the same plugins.
  echo "--- C API: ${backend} ---"
  if ! env "${mode_variables[@]}" XHAL_PLUGIN_PATH=python/xhal/plugins "XHAL_CAPI_DEVICE=${name}" target/capi/capi_test; then
    failed+=("$backend")
    continue
  fi
  # The PyTorch device on the backends XHAL_TORCH_BACKENDS names, xhal:0 being the backend's
  # first device; its C++ extension is built once, into target/torch-extension.
  if [[ " ${XHAL_TORCH_BACKENDS:-} " == *" ${backend} "* ]]; then
    echo "--- PyTorch device: ${backend} ---"
    if ! env -u XHAL_PLUGIN_PATH "${mode_variables[@]}" "XHAL_DEVICE=${name}:*" XHAL_TORCH_BUILD_DIR=target/torch-extension \
      "$python" -m pytest python/tests_torch -q -p no:cacheprovider; then
      failed+=("$backend")
      continue
    fi
    torch_ran+=("$backend")
  fi
  passed+=("$backend")
done

echo "=== python test summary ==="
echo "passed: ${passed[*]:-none}"
echo "PyTorch device tests ran on: ${torch_ran[*]:-none}"
echo "skipped (no device): ${skipped[*]:-none}"
echo "failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]

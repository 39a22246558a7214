#!/bin/bash
# Compiles emitted CUDA C with NVRTC, loads it with the driver API and runs a few kernels on
# the first GPU, checking the results. Needs the CUDA toolkit (nvcc, nvrtc) and a GPU.
#
#   XHAL_C_DUMP=/tmp/xhal-c cargo test -p xhal-kernel --test c_dialects
#   hal/kernel/tests/nvrtc/run.sh /tmp/xhal-c
#
# The run step expects the dump's file names: examples_*_wgsl.cu for the examples and
# compute_12.cu, compute_13.cu, compute_17.cu for the conformance kernels `division`,
# `shifts` and `convert`.
set -e
dir=$(cd "${1:?usage: run.sh DUMP_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
CUDA=$(dirname "$(dirname "$NVCC")")
out=$(mktemp -d)
g++ -O1 -std=c++17 -I"$CUDA/include" "$here/harness.cpp" -o "$out/harness" -L"$CUDA/lib64" -L"$CUDA/lib64/stubs" \
    -lnvrtc -lcuda -Wl,-rpath,"$CUDA/lib64"
"$out/harness" compile "$dir"/*.cu 2>&1 | grep -E "^(compiled|NVRTC FAIL|LOAD FAIL)" -A20
"$out/harness" run "$dir" 2>&1 | grep -E "^(PASS|FAIL|failures|CUDA error|NVRTC FAIL|LOAD FAIL)" -A20

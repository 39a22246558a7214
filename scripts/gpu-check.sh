#!/usr/bin/env bash
# Certifies the CUDA plugin on an NVIDIA machine and measures it against the raw driver API,
# in one run of under ten minutes, build included: `scripts/gpu-check.sh`.
#
# 1. builds the workspace in release, the plugins into target/plugins (the CUDA one included),
#    and the benchmark program (backends/cuda/examples/gpu_bench.rs);
# 2. runs `xhal devices`, which must list a CUDA device;
# 3. runs the whole conformance suite against target/plugins/libxhal_cuda.so (scripts/cts.sh
#    with XHAL_REQUIRE_BACKENDS=cuda, so a missing driver fails instead of skipping);
# 4. runs the benchmarks through the plugin: empty-kernel launch cost against cuLaunchKernel,
#    host-to-device and device-to-host bandwidth against cuMemcpy from pinned memory, and
#    device-to-device bandwidth against cuMemcpyDtoD of the same size;
# 5. prints a short table last.
#
# Everything lands in target/gpu-check/. Any failure stops the script with a non-zero status
# and says which step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO="${CARGO:-cargo}"
OUT=target/gpu-check
mkdir -p "$OUT"
started=$SECONDS

fail() {
  echo "" >&2
  echo "!!! gpu-check FAILED: $*" >&2
  exit 1
}

step() {
  echo ""
  echo "=== gpu-check: $* ($((SECONDS - started)) s) ==="
}

step "the machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader | tee "$OUT/nvidia-smi.txt" \
    || fail "nvidia-smi could not read the GPUs"
else
  echo "(nvidia-smi is not installed; the CUDA plugin will say what it finds)"
fi
# WGSL reaches CUDA as CUDA C compiled by NVRTC, which cudarc opens by name (libnvrtc.so,
# libnvrtc.so.12, ...): when the loader cache has none, add the first folder that has one.
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
  for folder in /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 /usr/local/cuda/targets/*/lib \
    /usr/lib/x86_64-linux-gnu /opt/conda/lib \
    "$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.join(nvidia.cuda_nvrtc.__path__[0], "lib"))' 2>/dev/null || true)"; do
    if [ -n "$folder" ] && compgen -G "$folder/libnvrtc.so*" >/dev/null; then
      export LD_LIBRARY_PATH="$folder${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "NVRTC: $folder"
      break
    fi
  done
fi

step "build (cargo build --release --workspace, plugins, gpu_bench)"
"$CARGO" build --release --workspace || fail "the release build failed"
"$CARGO" build --release -p xhal-cuda --example gpu_bench || fail "building the benchmark failed"
make --no-print-directory plugins || fail "copying the plugins failed"
[ -f target/plugins/libxhal_cuda.so ] || fail "the CUDA plugin was not built"

step "xhal devices"
XHAL_PLUGIN_PATH=target/plugins target/release/xhal devices | tee "$OUT/devices.txt" \
  || fail "xhal devices failed"
grep -q "cuda:0" "$OUT/devices.txt" || fail "xhal devices lists no CUDA device (no cuda:0); see the reason above"

step "conformance suite against the CUDA plugin"
cts_status=0
XHAL_REQUIRE_BACKENDS=cuda timeout 420 scripts/cts.sh cuda 2>&1 | tee "$OUT/cts.txt" || cts_status=$?
[ "$cts_status" -eq 0 ] || fail "the conformance suite did not certify the CUDA plugin (status $cts_status); see $OUT/cts.txt and target/cts/cuda/"

step "benchmarks through the plugin, against the raw driver API"
bench_status=0
timeout 180 target/release/examples/gpu_bench --plugin target/plugins/libxhal_cuda.so | tee "$OUT/bench.md" \
  || bench_status=$?
[ "$bench_status" -eq 0 ] || fail "the benchmark failed (status $bench_status)"

cts_counts="see target/cts/cuda/report.json"
if command -v python3 >/dev/null 2>&1; then
  cts_counts=$(python3 - <<'EOF' || echo "see target/cts/cuda/report.json"
import json
report = json.load(open("target/cts/cuda/report.json"))
lines = []
for device in report.get("devices", []):
    counts = ", ".join(f"{name} {count}" for name, count in sorted(device.get("counts", {}).items()))
    profiles = ", ".join(f"{p['name']} {p['status']}" for p in device.get("profiles", []))
    lines.append(f"device {device.get('index')}: {counts}; profiles: {profiles}")
print("\n".join(lines) if lines else "no device in the report")
EOF
)
fi

step "summary"
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if [ -s "$OUT/nvidia-smi.txt" ]; then
  echo "card: $(head -n 1 "$OUT/nvidia-smi.txt")"
fi
echo "conformance (xhal-cts, CUDA plugin): certified"
echo "$cts_counts"
grep '^|' "$OUT/bench.md"
echo "total time: $((SECONDS - started)) s"

#!/usr/bin/env bash
# Certifies the CUDA plugin on an NVIDIA machine and measures it against the raw driver API,
# in one run of under ten minutes, build included: `scripts/gpu-check.sh` (`--help` for options).
#
# 1. finds NVRTC (the CUDA C compiler WGSL kernels go through) and hands it to the plugin in
#    XHAL_NVRTC_LIBRARY;
# 2. builds the workspace in release, the plugins into target/plugins (the CUDA one included),
#    and the benchmark program (backends/cuda/bench, `xhal-cuda-bench`); or, without cargo or
#    with --prebuilt / --bundle DIR, uses binaries built elsewhere (`make gpu-bundle`);
# 3. runs `xhal devices`, which must list a CUDA device;
# 4. runs the whole conformance suite against target/plugins/libxhal_cuda.so (scripts/cts.sh
#    with XHAL_REQUIRE_BACKENDS=cuda, so a missing driver fails instead of skipping);
# 5. runs the benchmarks through the plugin: empty-kernel launch cost against cuLaunchKernel,
#    host-to-device and device-to-host bandwidth against cuMemcpy from pinned memory, and
#    device-to-device bandwidth against cuMemcpyDtoD of the same size;
# 6. prints a short table last.
#
# Every step's output lands in target/gpu-check/ (or $GPU_CHECK_OUT), the conformance report
# in its cts-report/. Any failure stops the script with a non-zero status and names the step.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/gpu-check.sh [--prebuilt] [--bundle DIR] [--help]

Certifies the CUDA plugin with the conformance suite on an NVIDIA machine and benchmarks it
against the raw driver API, in under ten minutes. Exits non-zero, naming the failed step,
when anything fails (no CUDA device or driver included).

  (no option)    build with cargo (release), then check; without cargo on PATH, behave
                 as --prebuilt
  --prebuilt     do not build: use target/release and target/plugins of this checkout,
                 else the bundle in target/gpu-bundle
  --bundle DIR   do not build: use the bundle in DIR (made by `make gpu-bundle`)
  --help         print this help

A bundle is made on any machine with Rust: `make gpu-bundle`, then copy target/gpu-bundle
(alone, or inside the repository) to the GPU machine; neither Rust nor network is needed there.

Environment:
  CARGO                cargo to build with (default: cargo)
  GPU_CHECK_OUT        folder for every step's output (default: target/gpu-check)
  XHAL_NVRTC_LIBRARY   NVRTC to use (/path/libnvrtc.so.N); found when unset
EOF
}

caller_dir=$PWD
root=$(cd "$(dirname "$0")/.." && pwd)
CARGO="${CARGO:-cargo}"

prebuilt=0
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --prebuilt) prebuilt=1 ;;
    --bundle)
      [ $# -ge 2 ] || {
        echo "gpu-check: --bundle needs a folder" >&2
        exit 2
      }
      bundle=$2
      shift
      ;;
    --bundle=*) bundle=${1#--bundle=} ;;
    *)
      echo "gpu-check: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
  shift
done

# Relative paths given by the caller mean the caller's folder; the script then works elsewhere.
absolute() {
  case "$1" in
    /*) echo "$1" ;;
    *) echo "$caller_dir/$1" ;;
  esac
}

out=$(absolute "${GPU_CHECK_OUT:-$root/target/gpu-check}")
mkdir -p "$out"
rm -rf "$out/cts-report"
rm -f "$out"/{FAILED.txt,summary.txt,mode.txt,nvidia-smi.txt,nvrtc.txt,build.txt,devices.txt,cts.txt,bench.md}

started=$SECONDS
# Under ten minutes in all: each step's timeout is what is left, less what the later steps need.
deadline=590
current_step="start"
# What to do about a failure of the current step, when the failure itself does not say.
hint=""

fail() {
  echo "" >&2
  {
    echo "!!! gpu-check FAILED at step '$current_step': $*"
    [ -z "$hint" ] || echo "!!! $hint"
  } | tee "$out/FAILED.txt" >&2
  echo "!!! every step's output is in $out" >&2
  exit 1
}

step() {
  current_step=$1
  echo ""
  echo "=== gpu-check: $* ($((SECONDS - started)) s) ==="
}

# Sets seconds, what a step may take: at most CAP, and never so long that the steps after it,
# which need RESERVE seconds, miss the deadline.
budget() {
  local cap=$1 reserve=$2
  seconds=$((deadline - (SECONDS - started) - reserve))
  [ "$seconds" -lt "$cap" ] || seconds=$cap
  [ "$seconds" -ge 10 ] || fail "no time left for this step (ten minutes in all)"
}

# Runs a command under a timeout, its output shown and saved in FILE; fails the step with WHAT.
run_step() {
  local seconds=$1 file=$2 what=$3 status=0
  shift 3
  timeout -k 10 "$seconds" "$@" 2>&1 | tee "$out/$file" || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    fail "$what: timed out after $seconds s; see $out/$file"
  elif [ "$status" -ne 0 ]; then
    fail "$what (status $status); see $out/$file"
  fi
}

prebuilt_files=(target/release/xhal target/release/xhal-cts target/release/xhal-cuda-bench
  target/plugins/libxhal_cuda.so scripts/cts.sh)

missing_in() {
  local file
  for file in "${prebuilt_files[@]}"; do
    [ -f "$1/$file" ] || echo "$1/$file"
  done
}

step "how the binaries are found"
if [ -n "$bundle" ]; then
  # `--bundle target/gpu-bundle` also means this repository's bundle when run from elsewhere.
  if [[ "$bundle" != /* ]] && [ ! -d "$caller_dir/$bundle" ] && [ -d "$root/$bundle" ]; then
    bundle=$root/$bundle
  else
    bundle=$(absolute "$bundle")
  fi
  [ -d "$bundle" ] || fail "--bundle $bundle: no such folder; run \`make gpu-bundle\` on a machine with Rust and copy target/gpu-bundle over"
  missing=$(missing_in "$bundle")
  [ -z "$missing" ] || fail "--bundle $bundle is not a complete bundle; it lacks: $(echo "$missing" | tr '\n' ' ')(run \`make gpu-bundle\` again)"
  run_dir=$(cd "$bundle" && pwd)
  mode="prebuilt: the bundle $run_dir (--bundle)"
elif [ "$prebuilt" -eq 1 ] || ! command -v "$CARGO" >/dev/null 2>&1 || [ ! -f "$root/Cargo.toml" ]; then
  if [ "$prebuilt" -eq 1 ]; then
    why="--prebuilt"
  elif [ ! -f "$root/Cargo.toml" ]; then
    why="not a checkout"
  else
    why="no $CARGO on PATH"
  fi
  if [ -z "$(missing_in "$root")" ]; then
    run_dir=$root
    mode="prebuilt ($why): $root/target/release and target/plugins"
  elif [ -z "$(missing_in "$root/target/gpu-bundle")" ]; then
    run_dir=$root/target/gpu-bundle
    mode="prebuilt ($why): the bundle $run_dir"
  else
    fail "no prebuilt binaries to run ($why): neither $root/target/release (with target/plugins/libxhal_cuda.so) nor the bundle $root/target/gpu-bundle is complete. Run \`make gpu-bundle\` on a machine with Rust, copy target/gpu-bundle over, and run scripts/gpu-check.sh --bundle target/gpu-bundle"
  fi
else
  run_dir=$root
  mode="build: $CARGO build --release in $root"
fi
cd "$run_dir"
echo "$mode" | tee "$out/mode.txt"
# Some ways of copying a folder drop the execute bits.
for file in target/release/xhal target/release/xhal-cts target/release/xhal-cuda-bench scripts/cts.sh; do
  [ ! -f "$file" ] || [ -x "$file" ] || chmod +x "$file" || fail "$run_dir/$file is not executable"
done
echo "output: $out"
if [ -f target/release/libxhal_cuda.so ] && [ target/release/libxhal_cuda.so -nt target/plugins/libxhal_cuda.so ] &&
  [[ "$mode" == prebuilt* ]]; then
  echo "WARNING: target/plugins/libxhal_cuda.so is older than target/release/libxhal_cuda.so; \`make plugins\` installs the newer one" >&2
fi

step "the machine"
driver_cuda_major=""
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader | tee "$out/nvidia-smi.txt" ||
    fail "nvidia-smi could not read the GPUs"
  driver_cuda_major=$(timeout 30 nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1 || true)
  [ -z "$driver_cuda_major" ] || echo "driver: CUDA $driver_cuda_major"
else
  echo "(nvidia-smi is not installed; the CUDA plugin will say what it finds)"
fi
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
echo "libcuda: $("$ldconfig" -p 2>/dev/null | sed -n 's/^[[:space:]]*libcuda\.so\.1 .*=> //p' | head -n 1 | grep . ||
  echo "not in the loader cache (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})")"

step "NVRTC"
# The plugin opens the NVRTC named by XHAL_NVRTC_LIBRARY, else searches names on the library
# path, where a toolkit or pip install often is not. NVRTC compiles kernels to the device's
# binary code, which a driver older than that NVRTC may refuse: so the newest NVRTC the
# driver's CUDA version covers, the first found among equals.
nvrtc_major() {
  local name
  name=$(basename "$1")
  [[ "$name" =~ ^libnvrtc\.so\.[0-9] ]] || name=$(basename "$(readlink -f "$1")")
  if [[ "$name" =~ ^libnvrtc\.so\.([0-9]+) ]]; then
    echo "${BASH_REMATCH[1]}"
  else
    echo 0
  fi
}

# Sets nvrtc to the library found, or to nothing.
find_nvrtc() {
  local candidates=() library_path=() python_folders=() folder file major best=-1 newest="" newest_major=-1
  IFS=: read -r -a library_path <<<"${LD_LIBRARY_PATH:-}"
  for folder in "${library_path[@]}"; do
    [ -z "$folder" ] || candidates+=("$folder"/libnvrtc.so*)
  done
  while IFS= read -r file; do
    candidates+=("$file")
  done < <("$ldconfig" -p 2>/dev/null | sed -n 's/^[[:space:]]*libnvrtc\.so[.0-9]* (.*) => //p')
  if command -v python3 >/dev/null 2>&1; then
    while IFS= read -r folder; do
      python_folders+=("$folder/cuda_nvrtc/lib" "$folder"/cu[0-9]*/lib)
    done < <(timeout 20 python3 -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null || true)
  fi
  for folder in /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 /usr/local/cuda/targets/*/lib \
    /usr/local/cuda-*/targets/*/lib "${python_folders[@]}" /opt/conda/lib; do
    candidates+=("$folder"/libnvrtc.so*)
  done
  nvrtc=""
  for file in "${candidates[@]}"; do
    # Versioned sonames (libnvrtc.so.13, libnvrtc.so.11.2) and the bare libnvrtc.so; not the
    # full-version files they point to, nor libnvrtc-builtins or the static library.
    if ! [[ "$(basename "$file")" =~ ^libnvrtc\.so(\.[0-9]+){0,2}$ ]] || [ ! -e "$file" ]; then
      continue
    fi
    major=$(nvrtc_major "$file")
    echo "found: $file (CUDA $major)"
    if [ "$major" -gt "$newest_major" ]; then
      newest=$file
      newest_major=$major
    fi
    if { [ -z "$driver_cuda_major" ] || [ "$major" -le "$driver_cuda_major" ]; } && [ "$major" -gt "$best" ]; then
      nvrtc=$file
      best=$major
    fi
  done
  if [ -z "$nvrtc" ] && [ -n "$newest" ]; then
    nvrtc=$newest
    echo "WARNING: every NVRTC found is newer than the driver's CUDA $driver_cuda_major; using $nvrtc anyway"
  fi
}

if [ -n "${XHAL_NVRTC_LIBRARY:-}" ]; then
  # The steps run in the binaries' folder, where a relative path would name another file.
  nvrtc=$(absolute "$XHAL_NVRTC_LIBRARY")
  [ -f "$nvrtc" ] || fail "XHAL_NVRTC_LIBRARY=$XHAL_NVRTC_LIBRARY is not a file"
  echo "XHAL_NVRTC_LIBRARY is set: used as given" >"$out/nvrtc.txt"
else
  find_nvrtc >"$out/nvrtc.txt"
fi
if [ -n "$nvrtc" ]; then
  export XHAL_NVRTC_LIBRARY="$nvrtc"
  nvrtc_folder=$(dirname "$nvrtc")
  # NVRTC opens its libnvrtc-builtins by name at its first compilation: its folder must be on
  # the library path, not only the file named in XHAL_NVRTC_LIBRARY.
  case ":${LD_LIBRARY_PATH:-}:" in
    *":$nvrtc_folder:"*) ;;
    *) export LD_LIBRARY_PATH="$nvrtc_folder${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
  compgen -G "$nvrtc_folder/libnvrtc-builtins.so*" >/dev/null ||
    echo "WARNING: no libnvrtc-builtins.so* beside $nvrtc; NVRTC will fail to compile" >>"$out/nvrtc.txt"
  echo "NVRTC: XHAL_NVRTC_LIBRARY=$XHAL_NVRTC_LIBRARY, and $nvrtc_folder on LD_LIBRARY_PATH" >>"$out/nvrtc.txt"
fi
cat "$out/nvrtc.txt"
# Without NVRTC the plugin takes no cuda-c, so no WGSL kernel of the suite would run: that is
# not a certification of the plugin.
[ -n "$nvrtc" ] || fail "NVRTC was not found (LD_LIBRARY_PATH, the loader cache, /usr/local/cuda*, python's nvidia packages, /opt/conda/lib), so the suite's WGSL kernels cannot reach the device; install the CUDA toolkit or pip's nvidia-cuda-nvrtc, or set XHAL_NVRTC_LIBRARY"

if [[ "$mode" == build* ]]; then
  step "build (cargo build --release --workspace, plugins)"
  hint="if cargo could not fetch crates (no network): run \`make gpu-bundle\` on a machine with Rust, copy target/gpu-bundle here and run scripts/gpu-check.sh --bundle target/gpu-bundle"
  budget 330 240
  # shellcheck disable=SC2016 # "$1" is cargo, expanded by the inner shell
  run_step "$seconds" build.txt "the release build failed" \
    bash -c '"$1" build --release --workspace &&
      make --no-print-directory plugins' build "$CARGO"
  [ -f target/plugins/libxhal_cuda.so ] || fail "the CUDA plugin was not built"
  hint=""
fi

step "xhal devices"
budget 60 180
run_step "$seconds" devices.txt "xhal devices failed" env XHAL_PLUGIN_PATH=target/plugins target/release/xhal devices
if ! grep -q "cuda:0" "$out/devices.txt"; then
  # The reason printed under the CUDA plugin's row says which of driver or device is missing.
  reason=$(awk '$1 == "cuda" { show = 1; next } show && /^[[:space:]]/ { print; next } { show = 0 }' "$out/devices.txt" |
    sed 's/^[[:space:]]*//' | paste -sd ' ' -)
  fail "no CUDA device or driver was found: xhal devices lists no cuda:0${reason:+; the CUDA plugin says: $reason}"
fi

step "conformance suite against the CUDA plugin"
budget 420 60
cts_status=0
# A report left from an earlier run must not pass for this one's.
rm -rf target/cts/cuda
XHAL_REQUIRE_BACKENDS=cuda timeout -k 10 "$seconds" scripts/cts.sh cuda 2>&1 | tee "$out/cts.txt" || cts_status=$?
if [ -d target/cts/cuda ]; then
  cp -r target/cts/cuda "$out/cts-report"
fi
if [ "$cts_status" -eq 124 ] || [ "$cts_status" -eq 137 ]; then
  fail "the conformance suite timed out after $seconds s; see $out/cts.txt"
fi
[ "$cts_status" -eq 0 ] || fail "the conformance suite did not certify the CUDA plugin (status $cts_status); see $out/cts.txt and $out/cts-report/"

step "benchmarks through the plugin, against the raw driver API"
budget 180 5
# Status 2: no CUDA device after all, which the benchmark's last line explains.
run_step "$seconds" bench.md "the benchmark failed" target/release/xhal-cuda-bench --plugin target/plugins/libxhal_cuda.so

cts_counts="see $out/cts-report/report.json"
if command -v python3 >/dev/null 2>&1; then
  cts_counts=$(python3 - <<'EOF' || echo "see $out/cts-report/report.json"
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
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [ -s "$out/nvidia-smi.txt" ]; then
    echo "card: $(head -n 1 "$out/nvidia-smi.txt")"
  fi
  grep -m 1 '^device:' "$out/bench.md" || true
  echo "binaries: $mode"
  echo "NVRTC: $XHAL_NVRTC_LIBRARY"
  echo "conformance (xhal-cts, CUDA plugin): certified"
  echo "$cts_counts"
  grep '^|' "$out/bench.md"
  echo "total time: $((SECONDS - started)) s"
} | tee "$out/summary.txt"

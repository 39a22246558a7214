#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs and copies it into target/gpu-bundle/, a folder that
# certifies and benchmarks the CUDA plugin on an NVIDIA machine without Rust or network:
# `make gpu-bundle` here, copy target/gpu-bundle (alone, or inside the repository) there, then
# `scripts/gpu-check.sh` in the copied folder, or `scripts/gpu-check.sh --bundle
# target/gpu-bundle` in the copied repository.
#
# The folder mirrors the repository's layout (target/release, target/plugins, scripts,
# conformance/known-failures), so gpu-check.sh and cts.sh run from it unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO="${CARGO:-cargo}"
BUNDLE=target/gpu-bundle
# Well under 64 MiB, so that the folder travels whole wherever a copy is size-limited.
MAX_MIB=48

fail() {
  echo "!!! gpu-bundle FAILED: $*" >&2
  exit 1
}

# The same build as gpu-check.sh's, so a bundle and a build on the GPU machine run the same code.
"$CARGO" build --release --workspace || fail "the release build failed"

binaries=(target/release/xhal target/release/xhal-cts target/release/xhal-cuda-bench)
for file in "${binaries[@]}" target/release/libxhal_cuda.so; do
  [ -f "$file" ] || fail "$file was not built"
done

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/target/release" "$BUNDLE/target/plugins" "$BUNDLE/scripts"
for file in "${binaries[@]}"; do
  cp "$file" "$BUNDLE/$file"
  # The binaries carry symbol tables only (release has no debug info); stripped they halve.
  if command -v strip >/dev/null 2>&1; then
    strip "$BUNDLE/$file"
  fi
done
# The file `make plugins` installs as target/plugins/libxhal_cuda.so, copied from cargo's
# output so that the repository's target/plugins is left as it is. Not stripped: a panic's
# backtrace from inside the plugin then still names its functions.
cp target/release/libxhal_cuda.so "$BUNDLE/target/plugins/libxhal_cuda.so"
cp scripts/gpu-check.sh scripts/cts.sh "$BUNDLE/scripts/"
if [ -f conformance/known-failures/cuda.toml ]; then
  mkdir -p "$BUNDLE/conformance/known-failures"
  cp conformance/known-failures/cuda.toml "$BUNDLE/conformance/known-failures/"
fi

# The binaries run only where the C library is at least as new as the one they were linked
# against; the README says which, since the GPU machine is not this one.
glibc="unknown"
if command -v objdump >/dev/null 2>&1; then
  glibc=$(for file in "$BUNDLE"/target/release/xhal "$BUNDLE"/target/release/xhal-cts \
    "$BUNDLE"/target/release/xhal-cuda-bench "$BUNDLE"/target/plugins/libxhal_cuda.so; do
    objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*'
  done | sed 's/^GLIBC_//' | sort -uV | tail -n 1)
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit-dirty"
fi
cat >"$BUNDLE/README.txt" <<EOF
xhal GPU check bundle (commit $commit, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), needs glibc $glibc or later):
run scripts/gpu-check.sh in this folder (or scripts/gpu-check.sh --bundle DIR from a checkout) to certify and benchmark the CUDA plugin; no Rust or network needed.
EOF

bytes=$(du -sb "$BUNDLE" | cut -f1)
mib=$(((bytes + 1048575) / 1048576))
echo ""
find "$BUNDLE" -type f | sort
echo "gpu-bundle: $BUNDLE, $mib MiB ($bytes bytes), commit $commit, needs glibc $glibc or later"
[ "$mib" -le "$MAX_MIB" ] || fail "the bundle is $mib MiB, over the $MAX_MIB MiB it must stay under"

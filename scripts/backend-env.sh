# The environment that runs a backend's plugin as `make cts` certifies it, shared by
# scripts/cts.sh and scripts/python-test.sh. `backend_environment BACKEND STATE_DIR` sets
# `name` (the plugin's backend: `cpu` for cpu-interpret) and `mode_variables` (the
# assignments to run it with; kernel and module caches go under STATE_DIR). It fails, saying
# why, when an emulated device it needs is not built.
backend_environment() {
  local backend="$1" state="$2" emulator cache
  name="$backend"
  mode_variables=()
  case "$backend" in
    cpu-interpret | cpu-compile)
      name=cpu
      cache="${state}/kernel-cache"
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
        return 1
      fi
      mode_variables=(
        "LD_LIBRARY_PATH=${emulator}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        "XHAL_NVRTC_LIBRARY=${emulator}/libnvrtc.so.12"
        "XHEMU_CACHE_DIR=$PWD/${state}/module-cache"
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
        return 1
      fi
      mode_variables=(
        "XHAL_LEVEL_ZERO_LOADER=${emulator}"
        "POCL_CACHE_DIR=$PWD/${state}/pocl-cache"
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
        return 1
      fi
      mode_variables=(
        "LD_LIBRARY_PATH=${emulator}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        "XHEMU_CACHE_DIR=$PWD/${state}/module-cache"
        STUB_DEVICES=1
      )
      ;;
  esac
  return 0
}

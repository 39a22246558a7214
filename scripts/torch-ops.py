#!/usr/bin/env python3
"""The operator sweep: PyTorch's OpInfo database run on xhal devices against torch's own CPU, as
PyTorch's test_compare_cpu (test/test_ops.py) runs CUDA against it, and the matrix it gives,
docs/torch-ops.md (`make torch-ops`).

    scripts/torch-ops.py --backend cpu-compile --dtype native
    scripts/torch-ops.py --backend vulkan --dtype float32 --subset ci --check
    scripts/torch-ops.py --markdown docs/torch-ops.md

Backends are named as scripts/python-test.sh names them and set up by scripts/backend-env.sh;
`xhal:0` is the backend's first device. Cases (an OpInfo on a dtype) run in worker processes
(scripts/torch_ops/worker.py), so a crash or a hang costs only the case in flight. Results go
to target/torch-ops/<backend>.json; the summary to stdout (--json for JSON), progress to
stderr. Known failures, each with its reason: python/tests_torch/known_ops.toml.

Exits 0 when every backend ran; 1 when one could not run, no case ran on xhal, or (with
--check) a failure is undeclared or a known entry stale; 2 on misuse.
"""

import sys

# The package beside this script is not installed: no __pycache__ folders in the source tree.
sys.dont_write_bytecode = True

from torch_ops.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

"""The scripts in examples/python run on the device under test and check their own answers."""

import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")


@pytest.mark.parametrize("script", ["saxpy.py", "matmul.py", "softmax.py", "choose_device.py"])
def test_example_runs(script):
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

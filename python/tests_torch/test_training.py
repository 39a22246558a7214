"""A small MLP and a small transformer block train on xhal:0 and on the CPU from the same
seed, and their losses agree at every step."""

import copy

import pytest
import torch

import xhal.torch
from models import MLP, TransformerBlock, mlp_batches, token_batches, train

# Float32 on different devices sums in different orders; over 20 steps of training the
# losses stay within this relative distance of the CPU's.
TOLERANCE = 2e-3


def compare(model, batches, dev, optimizer, lr=0.05):
    cpu_model = copy.deepcopy(model)
    expected = train(cpu_model, batches, "cpu", optimizer, lr)
    got = train(model, batches, dev, optimizer, lr)
    for step, (e, g) in enumerate(zip(expected, got)):
        assert g == pytest.approx(e, rel=TOLERANCE), f"step {step}: xhal loss {g}, CPU loss {e}\nxhal: {got}\ncpu: {expected}"
    assert got[-1] < got[0], f"the loss did not fall: {got}"
    return got


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_mlp_trains_like_cpu(dev, optimizer):
    torch.manual_seed(0)
    compare(MLP(), mlp_batches(20), dev, optimizer)
    # The forward and backward passes and the optimizer's step run natively.
    assert xhal.torch.fallback_counts() == {}


def test_transformer_block_trains_like_cpu(dev):
    torch.manual_seed(0)
    compare(TransformerBlock(), token_batches(20), dev, "adamw", lr=0.01)
    # The causal mask (a bool triu) too.
    assert xhal.torch.fallback_counts() == {}

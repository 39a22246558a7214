"""Models from the ecosystem's libraries train on xhal:0 as on the CPU: a decoder language
model and an encoder (transformers), a CNN with batch norm (torchvision) and a mobile CNN with
depthwise convolutions and squeeze-excitation (timm), and a recurrent language model (torch.nn),
each built from its library's config (no downloads), with dropout off so that both devices
compute the same function. From the same seed, the losses agree at every step, evaluation after
training agrees (batch norm's running statistics included), and the share of operator calls
that fell back to the CPU is printed (`pytest -s`); the goal, and the assertion, is none."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import xhal.torch

transformers = pytest.importorskip("transformers", reason="transformers is installed by scripts/python-setup.sh")
torchvision = pytest.importorskip("torchvision", reason="torchvision is installed by scripts/python-setup.sh")
timm = pytest.importorskip("timm", reason="timm is installed by scripts/python-setup.sh")

STEPS = 3
# Float32 sums in other orders on other devices: the losses of a few steps stay within this
# relative distance of the CPU's.
TOLERANCE = 2e-3


class CountCalls(TorchDispatchMode):
    """Counts the ATen operator calls that reach the device."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def language_batches(vocabulary, batch=2, length=12):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, vocabulary, (batch, length), generator=g) for _ in range(STEPS)]


def image_batches(classes, batch=8, size=40):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(batch, 3, size, size, generator=g), torch.randint(0, classes, (batch,), generator=g))
            for _ in range(STEPS)]


def gpt2():
    config = transformers.GPT2Config(vocab_size=96, n_positions=32, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(config), language_batches(96)


def bert():
    config = transformers.BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, num_labels=3)
    return transformers.BertForSequenceClassification(config), language_batches(96)


def resnet():
    return torchvision.models.resnet18(num_classes=10), image_batches(10)


def mobilenet():
    return timm.create_model("mobilenetv3_small_050", num_classes=10, drop_rate=0.0), image_batches(10)


class RecurrentLanguageModel(nn.Module):
    def __init__(self, vocabulary=96, width=32):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.lstm = nn.LSTM(width, width, num_layers=2, batch_first=True)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        x, _ = self.lstm(self.embed(tokens))
        x, _ = self.gru(x)
        return self.head(x)


def recurrent():
    return RecurrentLanguageModel(), language_batches(96)


def loss_of(name, model, batch, device):
    if name in ("gpt2", "recurrent"):
        tokens = batch.to(device)
        if name == "gpt2":
            return model(input_ids=tokens, labels=tokens).loss
        logits = model(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    if name == "bert":
        tokens = batch.to(device)
        labels = (tokens[:, 0] % 3).to(device)
        return model(input_ids=tokens, labels=labels).loss
    images, labels = batch
    return F.cross_entropy(model(images.to(device)), labels.to(device))


def train(name, model, batches, device):
    model.to(device).train()
    # The CNNs' gradients are sensitive to the last bits of float32 sums, which differ between
    # devices (and between CPU builds): an activation that lands within rounding of a ReLU's
    # or hardswish's kink passes its gradient on one device and not on the other, and batch
    # norm spreads that over the batch, so gradients differ by about 1% (measured on
    # ResNet-18: one flipped ReLU among 18,432 elements). Adam would move every parameter by
    # about the learning rate whatever its gradient; a small SGD step keeps each step in
    # proportion to its gradient, so the losses stay within the tolerance.
    if name == "image":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.002, momentum=0.9)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        loss = loss_of(name, model, batch, device)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def evaluate(name, model, batches, device):
    model.eval()
    with torch.no_grad():
        return [loss_of(name, model, batch, device).item() for batch in batches]


MODELS = {"gpt2": gpt2, "bert": bert, "resnet18": resnet, "mobilenetv3": mobilenet, "recurrent": recurrent}


@pytest.mark.parametrize("name", MODELS)
def test_model_trains_like_on_the_cpu(dev, name):
    torch.manual_seed(0)
    model, batches = MODELS[name]()
    on_cpu = copy.deepcopy(model)
    kind = "recurrent" if name == "recurrent" else name if name in ("gpt2", "bert") else "image"
    expected = train(kind, on_cpu, batches, "cpu")
    xhal.torch.reset_fallback_counts()
    with CountCalls() as counter:
        got = train(kind, model, batches, dev)
    fallbacks = xhal.torch.fallback_counts()
    fell_back = sum(fallbacks.values())
    print(f"\n{name}: {counter.calls} operator calls in {STEPS} training steps, {fell_back} fell back "
          f"({100.0 * fell_back / max(counter.calls, 1):.1f}%){': ' + str(fallbacks) if fallbacks else ''}")
    for step, (e, g) in enumerate(zip(expected, got)):
        assert g == pytest.approx(e, rel=TOLERANCE), f"step {step}: xhal loss {g}, CPU loss {e}\nxhal {got}\ncpu  {expected}"
    # Evaluation after training: batch norm's running statistics, updated on the device.
    evaluated, evaluated_cpu = evaluate(kind, model, batches, dev), evaluate(kind, on_cpu, batches, "cpu")
    for e, g in zip(evaluated_cpu, evaluated):
        assert g == pytest.approx(e, rel=TOLERANCE), f"evaluation: xhal {evaluated}, CPU {evaluated_cpu}"
    assert fallbacks == {}, f"{name} fell back: {fallbacks}"

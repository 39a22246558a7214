"""Small models of the kind people train, written here for the tests and the benchmark."""

import math

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, inputs=32, hidden=64, classes=10):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, classes)
        )

    def forward(self, x):
        return self.layers(x)


class Attention(nn.Module):
    """Causal multi-head self-attention, the products written out."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        batch, length, width = x.shape
        head = width // self.heads
        q, k, v = self.qkv(x).split(width, dim=-1)

        def split(t):
            return t.reshape(batch, length, self.heads, head).transpose(1, 2).reshape(batch * self.heads, length, head)

        q, k, v = split(q), split(k), split(v)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(head)
        mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        y = torch.bmm(weights, v).reshape(batch, self.heads, length, head).transpose(1, 2).reshape(batch, length, width)
        return self.out(y)


class TransformerBlock(nn.Module):
    """A pre-norm transformer block with an embedding and a classifier head."""

    def __init__(self, vocabulary=50, width=32, heads=4, length=8):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.02)
        self.norm1 = nn.LayerNorm(width)
        self.attention = Attention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, vocabulary)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x)


def mlp_batches(steps, batch=16, inputs=32, classes=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, inputs, generator=g), torch.randint(0, classes, (batch,), generator=g)) for _ in range(steps)]


def token_batches(steps, batch=4, length=8, vocabulary=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        # Counting sequences from a random start: the next token is learnable.
        start = torch.randint(0, vocabulary, (batch, 1), generator=g)
        tokens = (start + torch.arange(length + 1)) % vocabulary
        out.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
    return out


def train(model, batches, device, optimizer="sgd", lr=0.05):
    """Trains `model` (moved to `device`) on `batches`; returns the loss of every step."""
    model = model.to(device)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses

"""A small GPT-style decoder (pre-LayerNorm, causal attention) and named size presets.

The model is deliberately plain PyTorch so that it runs deterministically on CPU with
``torch.use_deterministic_algorithms(True)``. Real models plug in through ``--model-factory``
(``module:callable`` returning an ``nn.Module`` whose ``forward(idx, targets)`` returns the loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    """Shape of the decoder; ``vocab_size`` must cover the dataset's token range."""

    vocab_size: int = 256
    seq_len: int = 64
    d_model: int = 128
    n_layer: int = 2
    n_head: int = 4
    dropout: float = 0.1


# "tiny" is ~0.43 M parameters (correctness tests); "bench50m" is ~50 M (checkpoint benchmark).
PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(),
    "bench50m": GPTConfig(seq_len=128, d_model=512, n_layer=16, n_head=8),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool))
        # A buffer, not a parameter: it is rebuilt from the config, so keep it out of checkpoints.
        self.register_buffer("mask", mask.view(1, 1, cfg.seq_len, cfg.seq_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, channels = x.shape
        q, k, v = self.qkv(x).split(channels, dim=2)
        shape = (batch, time, self.n_head, channels // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(~self.mask[:, :, :time, :time], float("-inf"))
        att = self.dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(batch, time, channels)
        return self.dropout(self.proj(y))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only LM; ``forward(idx, targets)`` returns the mean cross-entropy loss."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def build_model(preset: str) -> GPT:
    """The built-in model for a preset name (``tiny`` or ``bench50m``)."""
    try:
        return GPT(PRESETS[preset])
    except KeyError:
        raise ValueError(
            f"unknown model preset {preset!r}; choose from {sorted(PRESETS)}"
        ) from None


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

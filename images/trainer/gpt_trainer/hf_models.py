"""Hugging Face ``transformers`` causal LMs: Llama/Qwen presets built from config objects, or a
model from a local directory / S3 prefix, wrapped to the trainer's ``forward(idx, targets)``.

Nothing here touches the Hub: presets are config objects written in code (random init), and a
path is loaded with ``local_files_only=True`` under ``HF_HUB_OFFLINE=1``. Preset shapes are
copied from the public ``config.json`` of the models they are named after (Llama 3.1/3.2,
Qwen2.5, Qwen3); the ``tiny``/``10m``/``20m`` presets are scaled-down members of the same
families for tests and CPU benchmarks. ``tests/trainer`` checks every preset's parameter count
against its name on the meta device.

Spec strings (``--model hf:<spec>``):

- a preset name, e.g. ``hf:llama3.2-1b`` (see ``PRESETS``);
- a directory with ``config.json`` and weights: ``from_pretrained`` (weights loaded);
- a directory (or ``.json`` file) with only a config: that architecture, randomly initialised —
  any ``AutoModelForCausalLM`` architecture, not only Llama/Qwen;
- ``s3://bucket/prefix``: the prefix is downloaded to a local cache dir first, then as above.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Before transformers is imported anywhere: no code path of this trainer may reach the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch import nn
from torch.nn import functional

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class HFPreset:
    """A named architecture: config family, its keyword arguments, and a training seq_len."""

    family: str  # llama | qwen2 | qwen3
    seq_len: int
    params: dict[str, Any] = field(default_factory=dict)
    nominal_params: float = 0.0  # what the name promises, for the preset test


def _llama(**kw: Any) -> dict[str, Any]:
    # Llama 3 defaults: SiLU MLP, RMSNorm 1e-5, no biases, rope theta 500k.
    base: dict[str, Any] = {"rms_norm_eps": 1e-5, "rope_parameters": _rope(500_000.0)}
    return {**base, **kw}


def _qwen(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"rms_norm_eps": 1e-6, "rope_parameters": _rope(1_000_000.0)}
    return {**base, **kw}


def _rope(theta: float) -> dict[str, Any]:
    # transformers 5 takes rope settings as one dict; plain rope (no long-context scaling):
    # scaling only matters beyond the original context, far past the seq_len trained here.
    return {"rope_type": "default", "rope_theta": theta}


PRESETS: dict[str, HFPreset] = {
    # ~0.16 M / ~0.13 M: the multi-process tests (a few seconds per run on 2 CPU cores).
    "llama-tiny": HFPreset(
        "llama",
        64,
        _llama(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=192,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=False,
        ),
        0.164e6,
    ),
    "qwen3-tiny": HFPreset(
        "qwen3",
        64,
        _qwen(
            vocab_size=512,
            hidden_size=64,
            intermediate_size=192,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            tie_word_embeddings=True,
        ),
        0.131e6,
    ),
    # CPU-sized members of the Llama family (8 k vocabulary, as data-prep trains by default).
    "llama-10m": HFPreset(
        "llama",
        256,
        _llama(
            vocab_size=8192,
            hidden_size=256,
            intermediate_size=768,
            num_hidden_layers=8,
            num_attention_heads=8,
            num_key_value_heads=4,
            tie_word_embeddings=False,
        ),
        10.5e6,
    ),
    "llama-20m": HFPreset(
        "llama",
        256,
        _llama(
            vocab_size=8192,
            hidden_size=384,
            intermediate_size=1024,
            num_hidden_layers=8,
            num_attention_heads=6,
            num_key_value_heads=2,
            tie_word_embeddings=False,
        ),
        18.9e6,
    ),
    # Real shapes (random init). Llama 3.2 1B/3B tie embeddings, Llama 3.1 8B does not.
    "llama3.2-1b": HFPreset(
        "llama",
        2048,
        _llama(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            tie_word_embeddings=True,
        ),
        1.24e9,
    ),
    "llama3.2-3b": HFPreset(
        "llama",
        2048,
        _llama(
            vocab_size=128256,
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=28,
            num_attention_heads=24,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
        ),
        3.21e9,
    ),
    "llama3.1-8b": HFPreset(
        "llama",
        2048,
        _llama(
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            tie_word_embeddings=False,
        ),
        8.03e9,
    ),
    "qwen2.5-0.5b": HFPreset(
        "qwen2",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
        0.49e9,
    ),
    "qwen2.5-1.5b": HFPreset(
        "qwen2",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=28,
            num_attention_heads=12,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
        1.54e9,
    ),
    "qwen3-0.6b": HFPreset(
        "qwen3",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
        ),
        0.6e9,
    ),
    "qwen3-1.7b": HFPreset(
        "qwen3",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=2048,
            intermediate_size=6144,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
        ),
        1.72e9,
    ),
    "qwen3-4b": HFPreset(
        "qwen3",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=2560,
            intermediate_size=9728,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
        ),
        4.02e9,
    ),
    "qwen3-8b": HFPreset(
        "qwen3",
        2048,
        _qwen(
            vocab_size=151936,
            hidden_size=4096,
            intermediate_size=12288,
            num_hidden_layers=36,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=False,
        ),
        8.19e9,
    ),
}


def preset_config(name: str, vocab_size: int | None = None) -> Any:
    """The ``transformers`` config of a preset (``vocab_size`` overrides, e.g. the tokenizer's)."""
    from transformers import LlamaConfig, Qwen2Config, Qwen3Config

    try:
        preset = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown hf preset {name!r}; choose from {sorted(PRESETS)}") from None
    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config}[preset.family]
    params = dict(preset.params)
    if vocab_size is not None:
        params["vocab_size"] = vocab_size
    # Training only: a KV cache would be built and thrown away at every forward.
    return config_cls(**params, max_position_embeddings=max(preset.seq_len, 2048), use_cache=False)


class HFCausalLM(nn.Module):
    """Adapts an ``AutoModelForCausalLM`` to the trainer's ``forward(idx, targets) -> loss``.

    The loss is computed here in fp32 from the logits (the trainer's targets are already shifted
    by one token, so the model's own shifting ``labels=`` path does not apply).
    """

    def __init__(self, lm: nn.Module, seq_len: int) -> None:
        super().__init__()
        self.lm = lm
        self.seq_len = seq_len
        self.vocab_size = int(lm.config.vocab_size)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.lm(input_ids=idx, use_cache=False).logits
        return functional.cross_entropy(
            logits.float().view(-1, logits.size(-1)), targets.reshape(-1)
        )

    def decoder_layers(self) -> list[nn.Module]:
        """The repeated blocks: FSDP's sharding units and activation checkpointing's."""
        names = set(getattr(self.lm, "_no_split_modules", None) or ())
        return [m for m in self.lm.modules() if type(m).__name__ in names]

    def config_dict(self) -> dict[str, Any]:
        return dict(self.lm.config.to_dict())

    def init_weights(self) -> None:
        """Random init in place (after ``to_empty`` from the meta device; rotary buffers too)."""
        self.lm.init_weights()


def attention_shape(config: Any) -> tuple[int, int, int]:
    """(layers, attention heads, head dim) of a transformers config."""
    heads = int(config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or int(config.hidden_size) // heads
    return int(config.num_hidden_layers), heads, int(head_dim)


def s3_cache_dir(uri: str, cache_root: Path) -> Path:
    return cache_root / "models" / hashlib.sha256(uri.encode()).hexdigest()[:16]


def download_prefix(client: Any, uri: str, dest: Path) -> Path:
    """Copy every object under an S3 prefix to ``dest`` (skipped if a previous copy finished)."""
    from .s3_sync import parse_s3_uri

    done = dest / ".complete"
    if done.is_file():
        return dest
    bucket, prefix = parse_s3_uri(uri)
    staging = dest.with_name(f".tmp-{dest.name}-{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    count = 0
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""
    ):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) + 1 :] if prefix else obj["Key"]
            if not rel or rel.endswith("/"):
                continue
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
            count += 1
    if count == 0:
        raise FileNotFoundError(f"nothing under {uri}")
    (staging / ".complete").write_text(uri + "\n")
    if dest.exists():  # another process of this node finished first: keep its copy
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    else:
        os.replace(staging, dest)
    return dest


def load_hf(
    spec: str,
    *,
    seq_len: int | None = None,
    vocab_size: int | None = None,
    meta: bool = False,
    local_dir: Path | None = None,
) -> HFCausalLM:
    """Build the model a spec names (see the module docstring); ``local_dir`` replaces an S3 spec
    by its downloaded copy. ``meta`` builds a random-init model on the meta device (weights are
    materialised after sharding with ``to_empty`` + ``init_weights``)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = local_dir or (Path(spec) if ("/" in spec or spec.endswith(".json")) else None)
    kwargs = {"attn_implementation": "sdpa"}
    if path is None:
        config = preset_config(spec, vocab_size)
        length = seq_len or PRESETS[spec].seq_len
    else:
        config_path = path if path.suffix == ".json" else path / "config.json"
        if not config_path.is_file():
            raise FileNotFoundError(f"no transformers config at {config_path}")
        config = AutoConfig.from_pretrained(str(config_path), local_files_only=True)
        config.use_cache = False
        length = seq_len or min(int(getattr(config, "max_position_embeddings", 2048)), 2048)
        has_weights = path.is_dir() and any((path / name).is_file() for name in WEIGHT_FILES)
        if has_weights:
            if vocab_size is not None and vocab_size > config.vocab_size:
                raise ValueError(
                    f"data vocabulary ({vocab_size}) exceeds the model's ({config.vocab_size})"
                )
            lm = AutoModelForCausalLM.from_pretrained(
                str(path), config=config, local_files_only=True, dtype=torch.float32, **kwargs
            )
            return HFCausalLM(lm, length)
        if vocab_size is not None:
            config.vocab_size = vocab_size
    if meta:
        with torch.device("meta"):
            lm = AutoModelForCausalLM.from_config(config, **kwargs)
    else:
        lm = AutoModelForCausalLM.from_config(config, **kwargs)
    return HFCausalLM(lm, length)

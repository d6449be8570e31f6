"""One way to name, build and describe every model the trainer can train.

``--model`` takes ``tiny`` / ``bench50m`` (the built-in GPT of model.py), ``hf:<spec>`` (a
Hugging Face causal LM, see hf_models.py), and ``--model-factory module:callable`` takes your own
``nn.Module``. Whatever the source, the trainer gets a ``BuiltModel``: the module with the
``forward(idx, targets) -> loss`` contract, its training sequence length and vocabulary, its
repeated blocks (the units FSDP shards and activation checkpointing wraps) and its model FLOPs
per token (for MFU).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from .model import GPT, PRESETS, build_model


@dataclass
class BuiltModel:
    """A model ready for wrapping (DDP / FSDP2 / DeepSpeed) plus what the trainer must know."""

    module: nn.Module
    seq_len: int
    vocab_size: int
    # The repeated blocks, outermost-first; empty when unknown (FSDP then shards the root only).
    layers: list[nn.Module]
    # (layers, attention heads, head dim) for the attention term of the FLOPs formula.
    attention: tuple[int, int, int] | None
    # Parameters that take part in a matmul: all, minus input embeddings that are not tied to
    # the output head (a lookup costs no FLOPs; a tied matrix is counted once, as the head).
    matmul_params: int
    spec: str
    config: dict[str, Any] = field(default_factory=dict)
    # True when built on the meta device: the caller materialises it after sharding.
    on_meta: bool = False

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Model FLOPs per trained token, forward + backward (the MFU numerator per token).

        6 N + 12 L H Q T (Chowdhery et al. 2022, PaLM, appendix B): 6 FLOPs per matmul
        parameter (2 forward, 4 backward) plus the attention score and value matmuls, which
        grow with the sequence length T. Recomputation by activation checkpointing is not
        counted (that would be hardware FLOPs, HFU), so MFU stays comparable across settings.
        """
        flops = 6.0 * self.matmul_params
        if self.attention is not None:
            layers, heads, head_dim = self.attention
            flops += 12.0 * layers * heads * head_dim * (seq_len or self.seq_len)
        return flops

    @property
    def num_params(self) -> int:
        return count_unique_parameters(self.module)


def count_unique_parameters(module: nn.Module) -> int:
    """Parameter count with tied weights counted once (``parameters()`` deduplicates)."""
    return sum(p.numel() for p in module.parameters())


def load_callable(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"expected module:callable, got {spec!r}")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _gpt(model: GPT, spec: str) -> BuiltModel:
    cfg = model.cfg
    embeddings = model.tok_emb.weight.numel() + model.pos_emb.weight.numel()
    return BuiltModel(
        module=model,
        seq_len=cfg.seq_len,
        vocab_size=cfg.vocab_size,
        layers=list(model.blocks),
        attention=(cfg.n_layer, cfg.n_head, cfg.d_model // cfg.n_head),
        matmul_params=count_unique_parameters(model) - embeddings,
        spec=spec,
        config={"family": "gpt_trainer.GPT", **asdict(cfg)},
    )


def build(
    spec: str,
    *,
    factory: str | None = None,
    seq_len: int | None = None,
    vocab_size: int | None = None,
    meta: bool = False,
    local_dir: Any = None,
) -> BuiltModel:
    """Build the model ``spec`` names.

    ``seq_len``/``vocab_size`` override the preset's (the vocabulary usually comes from the
    tokenized data). ``meta`` is honoured for random-init Hugging Face models only.
    """
    if factory:
        module = load_callable(factory)()
        cfg = getattr(module, "cfg", None)
        layers = getattr(module, "layers", None)
        return BuiltModel(
            module=module,
            seq_len=seq_len or int(getattr(cfg, "seq_len", 64)),
            vocab_size=int(getattr(cfg, "vocab_size", 256)),
            layers=list(layers) if isinstance(layers, nn.ModuleList) else [],
            attention=None,  # unknown: MFU then counts 6 N only (a slight under-estimate)
            matmul_params=count_unique_parameters(module),
            spec=f"factory:{factory}",
        )
    if spec.startswith("hf:"):
        from .hf_models import attention_shape, load_hf

        model = load_hf(
            spec[3:], seq_len=seq_len, vocab_size=vocab_size, meta=meta, local_dir=local_dir
        )
        lm: Any = model.lm
        embeddings = lm.get_input_embeddings().weight
        tied = embeddings is lm.get_output_embeddings().weight
        total = count_unique_parameters(model)
        return BuiltModel(
            module=model,
            seq_len=model.seq_len,
            vocab_size=model.vocab_size,
            layers=model.decoder_layers(),
            attention=attention_shape(lm.config),
            matmul_params=total if tied else total - embeddings.numel(),
            spec=spec,
            config=model.config_dict(),
            on_meta=meta and embeddings.is_meta,
        )
    if spec in PRESETS:
        if vocab_size is not None and vocab_size > PRESETS[spec].vocab_size:
            raise ValueError(f"--model {spec} has a {PRESETS[spec].vocab_size}-token vocabulary")
        if seq_len is not None and seq_len != PRESETS[spec].seq_len:
            raise ValueError(f"--model {spec} is built for seq_len {PRESETS[spec].seq_len}")
        return _gpt(build_model(spec), spec)
    raise ValueError(f"unknown --model {spec!r}: use {sorted(PRESETS)} or hf:<preset|dir|s3://...>")

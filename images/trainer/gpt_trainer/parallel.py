"""Wrapping a built model for training: activation checkpointing, ``torch.compile``, and the
data-parallel mode (DDP, or FSDP2 ``fully_shard``; DeepSpeed wraps itself in train.py).

Order matters and follows torchtitan's: activation checkpointing first (it replaces the layer
modules), then compile per layer, then ``fully_shard`` per layer and once on the root. Each
decoder layer is its own FSDP unit, so only one layer's full parameters exist at a time.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from .models import BuiltModel

log = logging.getLogger(__name__)


def apply_activation_checkpointing(built: BuiltModel) -> None:
    """Recompute each layer's activations in backward instead of storing them.

    Non-reentrant ``torch.utils.checkpoint`` through torch's ``checkpoint_wrapper`` (the module
    the FSDP docs use); the wrapper strips its ``_checkpoint_wrapped_module.`` prefix from state
    dicts, so checkpoints load with or without it. RNG state is restored for the recompute, so
    dropout draws the same mask and the loss is bit-identical on CPU (tested).
    """
    from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as ac

    if not built.layers:
        raise ValueError(f"{built.spec}: no repeated layers known, cannot checkpoint them")
    targets = {id(layer) for layer in built.layers}
    ac.apply_activation_checkpointing(
        built.module,
        checkpoint_wrapper_fn=ac.checkpoint_wrapper,
        check_fn=lambda m: id(m) in targets,
    )
    built.layers = [m for m in built.module.modules() if isinstance(m, ac.CheckpointWrapper)]


def apply_compile(built: BuiltModel) -> None:
    """``torch.compile`` each layer in place (whole model when the layers are unknown).

    Per layer rather than whole model: every layer has the same code, so it compiles once, and
    FSDP2's hooks sit between layers where graph breaks would otherwise land.
    """
    if built.layers:
        for layer in built.layers:
            layer.compile()
    else:
        built.module.compile()


def shard_fsdp(
    built: BuiltModel, mesh: Any, param_dtype: torch.dtype | None, device: torch.device
) -> None:
    """FSDP2: ``fully_shard`` each layer, then the root (embeddings, final norm, head).

    ``param_dtype`` (bf16 on GPU) is the compute dtype of the unsharded parameters; gradients
    are reduced in fp32 and the sharded master weights stay fp32. The last layer is not
    resharded after forward since backward needs it first (saves one all-gather per step).
    A model built on the meta device is materialised here, after sharding, so no rank ever
    holds the full weights: ``to_empty`` then the model's own ``init_weights``.
    """
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(
        param_dtype=param_dtype, reduce_dtype=torch.float32 if param_dtype else None
    )
    last = len(built.layers) - 1
    for index, layer in enumerate(built.layers):
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=index < last)
    fully_shard(built.module, mesh=mesh, mp_policy=policy)
    if built.on_meta:
        built.module.to_empty(device=device)
        init = getattr(built.module, "init_weights", None)
        if init is None:
            raise ValueError(f"{built.spec}: built on meta but has no init_weights()")
        with torch.no_grad():
            init()
        built.on_meta = False


def wrap_ddp(module: nn.Module, world_size: int, device: torch.device) -> nn.Module:
    """DDP for more than one rank; the bare module for one.

    With a single process DDP only adds cost: its reducer copies every gradient into flat
    buckets and all-reduces them over a group of one (measured: see README, "Throughput").
    """
    if world_size == 1:
        return module
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(module, device_ids=device_ids)

"""Model-state memory per rank: parameters, gradients and optimizer state of mixed-precision
Adam, replicated or sharded by the job's mode. Pure; facts.py computes it once per job and the
will-it-run verdict compares it with the GPU's memory."""

from __future__ import annotations

from components.config import TrainingJobConfig

#: Bytes of model state per parameter for mixed-precision Adam: bf16/fp16 parameters (2) and
#: gradients (2), fp32 master parameters (4), Adam momentum and variance (4 + 4) — the "16
#: bytes per parameter" of Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
#: Trillion Parameter Models" (SC'20), section 3.1. Activations and buffers come on top.
PARAM_BYTES = 2
GRAD_BYTES = 2
OPTIMIZER_BYTES = 12


def model_state_gib(job: TrainingJobConfig, world: int) -> float | None:
    """Per-rank parameters + gradients + optimizer state in GiB (None without a model size).
    DDP replicates all three; FSDP (full shard) and ZeRO-3 shard all three over the world;
    ZeRO-1 shards the optimizer, ZeRO-2 optimizer and gradients; CPU offload moves the
    optimizer (and with ZeRO-3 the parameters) to host memory."""
    if job.model_parameters is None or world < 1:
        return None
    p = job.model_parameters
    param, grad, opt = PARAM_BYTES * p, GRAD_BYTES * p, OPTIMIZER_BYTES * p
    if job.mode == "fsdp":
        total = (param + grad + opt) / world
    elif job.mode == "deepspeed" and job.deepspeed is not None:
        ds = job.deepspeed
        stage = ds.zero_stage
        opt = 0.0 if ds.offload_optimizer != "none" else opt
        param_part = 0.0 if ds.offload_param != "none" else (param / world if stage == 3 else param)
        total = (
            param_part
            + (grad / world if stage >= 2 else grad)
            + (opt / world if stage >= 1 else opt)
        )
    else:
        total = param + grad + opt
    return total / 2**30

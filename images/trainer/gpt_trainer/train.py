"""Per-rank training worker: DDP, FSDP2 or DeepSpeed (ZeRO 1-3), spot-safe with exact resume.

Started by torchrun (through ``python -m gpt_trainer.launch``), one process per rank. Each step:
load the rank's batch by cursor arithmetic, forward/backward/step, then one small
``all_reduce(MAX)`` over [SIGTERM seen, time-based save due, async save unfinished] so every
rank takes the same decision at the same optimizer-step boundary. Every ``--log-every`` steps
rank 0 reads the loss back and reports the window's step time, data-loader wait, tokens/s and
MFU. Exit codes: 0 done (or already done), 75 preempted after a committed checkpoint,
1 failure (see exit_codes.py).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import logging
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from . import checkpoint as ckpt
from . import models
from .checkpoint_policy import CheckpointPolicy
from .data import BatchLoader, DataCursor, SyntheticTokens, TokenDataset, advance
from .exit_codes import (
    EXIT_PREEMPTED,
    EXIT_SUCCESS,
    STATUS_COMPLETE,
    STATUS_DIR_ENV,
    STATUS_FAILED,
    STATUS_PREEMPTED,
    STATUS_RUNNING,
    status_path,
)
from .metrics import DEFAULT_METRICS_PORT, JsonLog, TrainerMetrics
from .perf import StepWindow, peak_flops_from_env
from .preemption import FLAG_SAVE_NOT_DONE, FLAG_STOP, FLAG_TIME_DUE, PreemptionHandler, agree

log = logging.getLogger("gpt_trainer")

RESULT_NAME = "result.json"
DS_TAG = "ds"
DCP_DIR = "dcp"
UNIVERSAL_INFO = {"universal_checkpoint_version": 0.4}
MODES = ("ddp", "fsdp", "deepspeed")


@dataclass(frozen=True)
class RunMetadata:
    """Provenance recorded in every manifest, from the environment the platform sets."""

    run_id: str
    git_sha: str
    image_digest: str
    config_hash: str
    team: str

    @classmethod
    def from_env(cls) -> RunMetadata:
        env = os.environ.get
        return cls(
            run_id=env("RUN_ID", "local"),
            git_sha=env("GIT_SHA", "unknown"),
            image_digest=env("IMAGE_DIGEST", "unknown"),
            config_hash=env("CONFIG_HASH", "unknown"),
            team=env("TEAM", "unknown"),
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpt_trainer.train", description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=MODES, default="ddp")
    p.add_argument("--ds-config", type=Path, help="DeepSpeed JSON config (the ConfigMap's)")
    p.add_argument(
        "--ds-config-json",
        help="DeepSpeed config inline (a fleet job: no ConfigMap travels with the job)",
    )
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--s3-uri", help="s3://bucket/prefix to replicate committed checkpoints to")
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--checkpoint-every-steps", type=int, default=0, help="0 disables")
    p.add_argument(
        "--checkpoint-interval-s",
        default="600",
        help="seconds between time-based saves; 'auto' = Young/Daly from --mtbf-s; 0 disables",
    )
    p.add_argument("--mtbf-s", type=float, default=6 * 3600.0, help="ungraceful-failure MTBF")
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--async-save", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT, help="0 disables")
    p.add_argument("--log-jsonl", type=Path, help="also append rank 0's JSON events here")
    p.add_argument("--log-every", type=int, default=1, help="steps per loss read-back / log line")
    p.add_argument("--grace-s", type=float, default=25.0, help="SIGTERM-to-exit budget")
    p.add_argument(
        "--model", default="tiny", help="tiny | bench50m | hf:<preset> | hf:<dir> | hf:s3://..."
    )
    p.add_argument("--model-factory", help="module:callable returning an nn.Module")
    p.add_argument("--seq-len", type=int, help="override the model preset's sequence length")
    p.add_argument(
        "--data", default="synthetic", help="synthetic | token-shard dir | s3://bucket/prefix"
    )
    p.add_argument("--dataset-factory", help="module:callable(seq_len, vocab, seed) -> dataset")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=Path("/tmp/gpt-trainer-cache"),
        help="node-local cache for S3 data shards and S3 model weights",
    )
    p.add_argument("--num-samples", type=int, default=4096, help="synthetic data only")
    p.add_argument("--micro-batch", type=int, default=8, help="per rank (DDP/FSDP mode)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--grad-clip", type=float, default=1.0, help="max grad norm; 0 disables")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--precision",
        choices=("auto", "fp32", "bf16"),
        default="auto",
        help="auto: bf16 on GPU (autocast; FSDP: bf16 params, fp32 reduce), fp32 on CPU",
    )
    p.add_argument(
        "--deterministic",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.use_deterministic_algorithms (default: on for CPU, off for GPU)",
    )
    p.add_argument("--activation-checkpointing", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile each layer")
    p.add_argument(
        "--init-device",
        choices=("auto", "cpu", "meta"),
        default="auto",
        help="meta: FSDP builds random-init HF models without full weights on any rank "
        "(auto = meta for FSDP on GPU)",
    )
    p.add_argument(
        "--peak-tflops", type=float, help="per-GPU peak for MFU (default: $GPU_PEAK_TFLOPS)"
    )
    p.add_argument("--sleep-per-step-s", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--log-params-hash", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode == "deepspeed" and (args.ds_config is None) == (args.ds_config_json is None):
        p.error("--mode deepspeed needs one of --ds-config, --ds-config-json")
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    return args


def state_dict_sha256(state: dict[str, torch.Tensor]) -> str:
    """Hash of every tensor in state_dict order: the bit-identity witness."""
    sha = hashlib.sha256()
    for key, tensor in state.items():
        sha.update(key.encode())
        sha.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()


def rng_state() -> dict[str, Any]:
    """Every RNG this rank draws from; numpy's key goes as a list so weights_only loads it."""
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            **np_state,
            "state": {k: np.asarray(v).tolist() for k, v in np_state["state"].items()},
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np_state = dict(state["numpy"])
    np_state["state"] = {
        k: np.asarray(v, dtype=np.uint64) if k == "key" else v for k, v in np_state["state"].items()
    }
    np.random.set_state(np_state)
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def to_universal(tag_dir: Path, out_dir: Path) -> None:
    """Convert a ZeRO-1/2/3 checkpoint to DeepSpeed's universal format (loads at any world size).

    In-process with one worker: ds_to_universal forks a process pool otherwise, which is heavy
    inside a training rank.
    """
    from deepspeed.checkpoint import ds_to_universal

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    options = argparse.Namespace(
        input_folder=str(tag_dir),
        output_folder=str(out_dir),
        num_extract_workers=1,
        num_merge_workers=1,
        keep_temp_folder=False,
        strict=True,
        inject_missing_state=False,
    )
    ds_to_universal.main(options)


def report_status(rank: int, status: str, **extra: Any) -> None:
    """Tell the launcher how this worker ended (it maps that to the container's exit code)."""
    status_dir = os.environ.get(STATUS_DIR_ENV)
    if status_dir:
        payload = {"rank": rank, "status": status, "pid": os.getpid(), **extra}
        ckpt.write_json_durable(status_path(Path(status_dir), rank), payload)


class Trainer:
    """One rank's training run; ``run()`` returns the process exit code.

    ``setup()`` + ``iteration()`` are the same run split for callers that interleave it with
    other work (bench_throughput.py); ``run()`` is ``setup()`` then iterations to the end.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.root: Path = args.checkpoint_dir
        self.meta = RunMetadata.from_env()
        self.is_main = self.rank == 0
        self.jsonl = JsonLog(args.log_jsonl if self.is_main else None, stream=sys.stdout)
        self.metrics = TrainerMetrics() if self.is_main else None
        self.preempt = PreemptionHandler(grace_s=args.grace_s)
        self.policy = self._build_policy()
        self.pending: ckpt.PendingSave | None = None
        self.pending_meta: dict[str, Any] = {}
        self.uploader: Any = None
        self.step = 0
        self.cursor = DataCursor()
        self.last_loss = float("nan")
        self._loss_t: torch.Tensor | None = None
        self.last_committed_step = -1
        self.engine: Any = None
        self.ds_config: dict[str, Any] | None = None
        self.device = (
            torch.device("cuda", self.local_rank)
            if torch.cuda.is_available()
            else torch.device("cpu")
        )
        # Collectives the loop adds (the per-step agreement) and checkpoint I/O run on gloo
        # groups over CPU tensors: no device sync, and DCP's async save needs a CPU backend.
        self.ctrl_pg: Any = None
        self.ckpt_pg: Any = None
        self.tokenizer_bytes: bytes | None = None
        self.data_meta: dict[str, Any] = {}
        # Rank 0's measurement of what a background write costs the steps it overlaps.
        self._write_in_window = False
        self._clean_step_s: float | None = None
        self._overlap_extra_s: float | None = None
        self._last_blocked_s = 0.0

    # ----------------------------------------------------------------------------- setup

    def _build_policy(self) -> CheckpointPolicy:
        raw = str(self.args.checkpoint_interval_s)
        policy = CheckpointPolicy(every_steps=self.args.checkpoint_every_steps or None)
        if raw == "auto":
            policy.auto_mtbf_s = self.args.mtbf_s
        elif float(raw) > 0:
            policy.interval_s = float(raw)
        return policy

    @property
    def bf16(self) -> bool:
        precision = self.args.precision
        return precision == "bf16" or (precision == "auto" and self.device.type == "cuda")

    @property
    def deterministic(self) -> bool:
        if self.args.deterministic is None:
            return self.device.type == "cpu"
        return bool(self.args.deterministic)

    def _init_distributed(self) -> None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("LOCAL_RANK", "0")
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(self.device)
        if self.args.mode == "deepspeed":
            import deepspeed

            # Not "import deepspeed.comm.torch as ...": deepspeed.comm has an attribute named
            # torch (the real torch), which that statement would bind instead.
            ds_comm_torch = importlib.import_module("deepspeed.comm.torch")
            if not torch.cuda.is_available():
                # On CPU DeepSpeed JIT-compiles a shared-memory all-reduce op at init (60-100 s
                # on 2 cores, per fresh machine). It serves only inference_all_reduce, never
                # training, so skip it; collectives go through gloo.
                ds_comm_torch.build_shm_op = lambda: None
            deepspeed.init_distributed(dist_backend=backend)
        else:
            dist.init_process_group(backend=backend)
        # new_group is collective: every rank creates the same groups in the same order.
        self.ctrl_pg = dist.new_group(backend="gloo") if backend != "gloo" else None
        if self.args.mode == "fsdp":
            # DCP's async save runs its collectives in a thread while the loop runs its own:
            # they must not share a group (TRAINER.md: dedicated gloo group).
            self.ckpt_pg = dist.new_group(backend="gloo")

    def _choose_resume_point(self) -> tuple[Path, dict[str, Any]] | None:
        """Rank 0 picks the newest verifiable checkpoint (local, else S3); all ranks follow."""
        choice: list[Any] = [None]
        if self.is_main:
            self.root.mkdir(parents=True, exist_ok=True)
            # Torn saves of an earlier attempt: remove them before any rank writes a new save
            # into a dir of the same name (the broadcast below orders this before all saves).
            for stale in self.root.glob(f"{ckpt.TMP_PREFIX}{ckpt.STEP_PREFIX}*"):
                self.jsonl.event("stale_tmp_removed", dir=stale.name)
                shutil.rmtree(stale, ignore_errors=True)
            found = ckpt.find_latest_valid(self.root, on_skip=self._on_skip)
            if found is None and self.args.s3_uri:
                from .s3_sync import download_latest_valid

                step_dir = download_latest_valid(self._s3_client(), self.args.s3_uri, self.root)
                found = (step_dir, ckpt.verify(step_dir)) if step_dir else None
            if found is not None:
                choice = [(str(found[0]), found[1])]
        dist.broadcast_object_list(choice, src=0)
        if choice[0] is None:
            return None
        return Path(choice[0][0]), choice[0][1]

    def _on_skip(self, step_dir: Path, why: str) -> None:
        self.jsonl.event("checkpoint_skipped", dir=step_dir.name, why=why)
        if self.metrics is not None:
            self.metrics.checkpoints_skipped.inc()

    def _s3_client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3"))

    def _open_data_index(self) -> Any:
        """The token-shard index when ``--data`` names one (its vocabulary sizes the model)."""
        if self.args.data == "synthetic" or self.args.dataset_factory:
            return None
        from .shards import open_source

        return open_source(self.args.data, self.args.cache_dir)[0]

    def _model_local_dir(self) -> Path | None:
        """``hf:s3://...``: download once per node (local rank 0), then everyone loads it."""
        spec = self.args.model
        if not spec.startswith("hf:s3://"):
            return None
        from .hf_models import download_prefix, s3_cache_dir

        local = s3_cache_dir(spec[3:], self.args.cache_dir)
        if self.local_rank == 0:
            download_prefix(self._s3_client(), spec[3:], local)
        dist.barrier(group=self.ctrl_pg)
        return local

    def _build(self) -> None:
        args = self.args
        index = self._open_data_index()
        meta_init = args.init_device == "meta" or (
            args.init_device == "auto" and args.mode == "fsdp" and self.device.type == "cuda"
        )
        # Same seed on every rank: identical initial weights, which DDP requires and FSDP
        # shards (each rank keeps its slice of the same full tensor).
        torch.manual_seed(args.seed)
        built = models.build(
            args.model,
            factory=args.model_factory,
            seq_len=args.seq_len,
            vocab_size=index.vocab_size if index is not None else None,
            meta=meta_init and args.mode == "fsdp",
            local_dir=self._model_local_dir(),
        )
        self.built = built
        self.seq_len = built.seq_len
        self._build_data(index, built)
        self._build_model(built)
        # bf16 autocast for DDP/DeepSpeed on GPU; FSDP2 casts through its MixedPrecisionPolicy.
        self._autocast = self.bf16 and args.mode != "fsdp"
        self.flops_per_token = built.flops_per_token(self.seq_len)
        self.peak_flops = peak_flops_from_env(args.peak_tflops)
        # Distinct dropout streams per rank; a resume overwrites this with the saved state.
        torch.manual_seed(args.seed * 1000 + self.rank + 1)
        np.random.seed(args.seed + self.rank)
        random.seed(args.seed + self.rank)

    def _build_data(self, index: Any, built: models.BuiltModel) -> None:
        """The dataset (factory, token shards or synthetic), the DeepSpeed config's batch, and
        this rank's batch loader."""
        args = self.args
        self.dataset: TokenDataset
        if args.dataset_factory:
            self.dataset = models.load_callable(args.dataset_factory)(
                built.seq_len, built.vocab_size, args.seed
            )
            self.data_meta = {"source": f"factory:{args.dataset_factory}"}
        elif index is not None:
            from .shards import TokenShards

            shards = TokenShards(args.data, built.seq_len, cache_dir=args.cache_dir)
            self.dataset = shards
            tokenizer = shards.tokenizer_path()
            self.tokenizer_bytes = tokenizer.read_bytes() if tokenizer else None
            self.data_meta = {"source": args.data, "index_sha256": index.digest()}
        else:
            self.dataset = SyntheticTokens(
                args.num_samples, built.seq_len, built.vocab_size, args.seed
            )
            self.data_meta = {"source": "synthetic", "num_samples": args.num_samples}
        micro_batch = args.micro_batch
        if args.mode == "deepspeed":
            text = args.ds_config_json or Path(args.ds_config).read_text(encoding="utf-8")
            self.ds_config = json.loads(text)
            if int(self.ds_config.get("gradient_accumulation_steps", 1)) != 1:
                raise ValueError("this trainer takes one batch per optimizer step: set gas to 1")
            micro_batch = int(self.ds_config.get("train_micro_batch_size_per_gpu", micro_batch))
            self.ds_config["train_micro_batch_size_per_gpu"] = micro_batch
            self.ds_config.setdefault("train_batch_size", micro_batch * self.world)
            # Our torch optimizer instead of DeepSpeed's fused one: no JIT op build on CPU.
            self.ds_config.setdefault("zero_allow_untested_optimizer", True)
        self.micro_batch = micro_batch
        self.loader = BatchLoader(
            self.dataset,
            seed=args.seed,
            rank=self.rank,
            world_size=self.world,
            micro_batch=micro_batch,
        )
        self.per_epoch = self.loader.per_epoch

    def _build_model(self, built: models.BuiltModel) -> None:
        """Activation checkpointing / compile, the parallel wrapper (FSDP2, DDP or DeepSpeed),
        the optimizer after sharding and the warmup + cosine schedule."""
        args = self.args
        from . import parallel

        if args.activation_checkpointing:
            parallel.apply_activation_checkpointing(built)
        if args.compile:
            parallel.apply_compile(built)
        model = built.module
        if args.mode == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh

            mesh = init_device_mesh(self.device.type, (self.world,))
            parallel.shard_fsdp(built, mesh, torch.bfloat16 if self.bf16 else None, self.device)
        elif args.mode == "ddp":
            model.to(self.device)
        # The optimizer comes after fully_shard: it must hold the sharded (DTensor) parameters.
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
        warmup, total = max(args.warmup_steps, 1), max(args.max_steps, 1)

        def lr_factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            return 0.5 * (
                1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup)))
            )

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
        self.module = model
        if args.mode == "deepspeed":
            import deepspeed

            self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
                model=model, optimizer=optimizer, lr_scheduler=scheduler, config=self.ds_config
            )
            self.model: nn.Module = self.engine
        else:
            self.model = (
                parallel.wrap_ddp(model, self.world, self.device) if args.mode == "ddp" else model
            )
            self.optimizer = optimizer
            self.scheduler = scheduler

    @property
    def sharding(self) -> str:
        if self.args.mode in ("ddp", "fsdp"):
            return self.args.mode
        return f"zero-{(self.ds_config or {}).get('zero_optimization', {}).get('stage', 0)}"

    def params_sha256(self) -> str:
        """Hash of the full model; collective under ZeRO-3 and FSDP (full weights gathered);
        the value is rank 0's (FSDP gathers to rank 0 only)."""
        if self.sharding == "zero-3":
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.module.parameters())):
                return state_dict_sha256(self.module.state_dict())
        if self.args.mode == "fsdp":
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
            )

            full = get_model_state_dict(
                self.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
            return state_dict_sha256(full) if self.is_main else ""
        return state_dict_sha256(self.module.state_dict())

    # ----------------------------------------------------------------------------- resume

    def _resume(self, step_dir: Path, manifest: dict[str, Any]) -> None:
        saved_world = int(manifest["world_size"])
        if manifest.get("num_threads") != torch.get_num_threads() or saved_world != self.world:
            self.jsonl.event(
                "resume_not_bit_exact",
                saved_world=saved_world,
                world=self.world,
                saved_threads=manifest.get("num_threads"),
                threads=torch.get_num_threads(),
            )
        saved_mode = manifest.get("mode", "ddp")
        if saved_mode != self.args.mode:
            raise ValueError(
                f"{step_dir.name} was saved in {saved_mode} mode, not {self.args.mode}"
            )
        if self.args.mode == "ddp":
            self.module.load_state_dict(
                torch.load(step_dir / "model.pt", weights_only=True, map_location=self.device)
            )
            state = torch.load(
                step_dir / "train_state.pt", weights_only=True, map_location=self.device
            )
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        elif self.args.mode == "fsdp":
            self._resume_fsdp(step_dir)
        else:
            self._resume_deepspeed(step_dir, saved_world)
        self.step = int(manifest["global_step"])
        self.last_committed_step = self.step
        rank_file = step_dir / f"rank_{self.rank:05d}.pt"
        if saved_world == self.world and rank_file.is_file():
            rank_state = torch.load(rank_file, weights_only=True)
            set_rng_state(rank_state["rng"])
            self.cursor = DataCursor.from_dict(rank_state["cursor"])
        else:
            # A new world size changes the global batch: keep the epoch, map the sample offset
            # to the nearest batch boundary (a few samples may repeat); RNG streams are fresh.
            old = manifest["data_cursor"]
            offset = old["batch"] * saved_world * int(manifest.get("micro_batch", self.micro_batch))
            self.cursor = DataCursor(
                old["epoch"], min(offset // (self.world * self.micro_batch), self.per_epoch - 1)
            )
        if self.metrics is not None:
            self.metrics.resumed_from_step.set(self.step)
        self.jsonl.event(
            "resumed",
            dir=step_dir.name,
            step=self.step,
            cursor=self.cursor.to_dict(),
            params_sha256=self.params_sha256(),
        )

    def _fsdp_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(self.module, self.optimizer)
        return {"model": model_state, "optim": optim_state}

    def _resume_fsdp(self, step_dir: Path) -> None:
        """DCP load into this world's shards: a checkpoint of any world size reshards here."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict

        state = self._fsdp_state()
        dcp.load(state, checkpoint_id=str(step_dir / DCP_DIR), process_group=self.ckpt_pg)
        set_state_dict(
            self.module,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
        )
        train_state = torch.load(step_dir / "train_state.pt", weights_only=True)
        self.scheduler.load_state_dict(train_state["scheduler"])

    def _resume_deepspeed(self, step_dir: Path, saved_world: int) -> None:
        if saved_world == self.world:
            self.engine.load_checkpoint(str(step_dir), tag=DS_TAG)
            return
        universal = self.root / f".universal-{step_dir.name}"
        if self.is_main and not (universal / "DONE").is_file():
            to_universal(step_dir / DS_TAG, universal / DS_TAG)
            (universal / "DONE").write_text("ok\n")
        dist.barrier()
        self.engine._config.load_universal_checkpoint = True
        self.engine.load_checkpoint(str(universal), tag=DS_TAG)
        self.engine._config.load_universal_checkpoint = False

    # ----------------------------------------------------------------------------- saving

    def _manifest_meta(self, reason: str, complete: bool) -> dict[str, Any]:
        return {
            "run": asdict(self.meta),
            "world_size": self.world,
            "mode": self.args.mode,
            "sharding": self.sharding,
            "num_threads": torch.get_num_threads(),
            "torch_version": torch.__version__,
            "reason": reason,
            "complete": complete,
            "healthy": math.isfinite(self.last_loss),
            "data_cursor": self.cursor.to_dict(),
            "model": self.built.spec,
            "seq_len": self.seq_len,
            "micro_batch": self.micro_batch,
            "data": self.data_meta,
        }

    def _rank_state(self) -> dict[str, Any]:
        return {"rng": rng_state(), "cursor": self.cursor.to_dict(), "rank": self.rank}

    def _describing_files(self) -> dict[str, Any]:
        """Rank 0's small files that say what the weights are: model config and tokenizer."""
        files: dict[str, Any] = {
            "model_config.json": json.dumps(self.built.config, sort_keys=True, default=str).encode()
        }
        if self.tokenizer_bytes is not None:
            files["tokenizer.json"] = self.tokenizer_bytes
        return files

    def _read_loss(self) -> float:
        """The last step's loss as a float (on GPU: a device sync, so only at log/save time)."""
        if self._loss_t is not None:
            self.last_loss = float(self._loss_t.item())
            self._loss_t = None
        return self.last_loss

    def _start_save(self, reason: str, background: bool, complete: bool = False) -> float:
        """Begin this rank's share of a checkpoint of the current step; returns seconds blocked."""
        started = time.perf_counter()
        self._read_loss()  # the manifest's "healthy" flag
        tmp_dir = self.root / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(self.step)}"
        prelude: Callable[[], list[ckpt.FileEntry]] | None = None
        files: dict[str, Any] = {f"rank_{self.rank:05d}.pt": self._rank_state()}
        params_hash = self.params_sha256() if self.args.log_params_hash else None
        if self.args.mode == "deepspeed":
            self.engine.save_checkpoint(
                str(tmp_dir),
                tag=DS_TAG,
                client_state={"universal_checkpoint_info": UNIVERSAL_INFO},
                save_latest=False,
            )
            background = False
        elif self.args.mode == "fsdp":
            prelude = self._dcp_save(tmp_dir, background)
            if self.is_main:
                files["train_state.pt"] = {
                    "scheduler": self.scheduler.state_dict(),
                    "global_step": self.step,
                }
        else:
            if self.is_main:
                files["model.pt"] = self.module.state_dict()
                files["train_state.pt"] = {
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "global_step": self.step,
                }
            if background:
                files = ckpt.clone_to_cpu(files)
        if self.is_main:
            files.update(self._describing_files())
        self.pending = ckpt.PendingSave(
            self.step, tmp_dir, files, self.rank, background, prelude=prelude
        )
        self.pending_meta = {
            **self._manifest_meta(reason, complete),
            "save_started_unix": time.time(),
            "started": started,
            "params_sha256": params_hash,
        }
        blocked = time.perf_counter() - started
        if self.is_main:
            self.policy.record_save(time.monotonic(), blocked)
            self._last_blocked_s = blocked
            assert self.metrics is not None
            self.metrics.checkpoint_blocking.set(blocked)
        return blocked

    def _dcp_save(self, tmp_dir: Path, background: bool) -> Callable[[], list[ckpt.FileEntry]]:
        """Start (async) or run (sync) the sharded DCP save of model + optimizer; returns the
        prelude that waits for it and hashes this rank's files.

        ``dcp.async_save`` (thread mode; process mode hung here, TRAINER.md) stages a CPU copy
        of the state before it returns, so the loop blocks only for that copy; the write and
        DCP's own collectives then run in its thread on the dedicated checkpoint group.
        """
        import torch.distributed.checkpoint as dcp

        state = self._fsdp_state()
        target = str(tmp_dir / DCP_DIR)
        future: Any = None
        if background:
            future = dcp.async_save(state, checkpoint_id=target, process_group=self.ckpt_pg)
        else:
            dcp.save(state, checkpoint_id=target, process_group=self.ckpt_pg)
        rank = self.rank

        def prelude() -> list[ckpt.FileEntry]:
            if future is not None:
                future.result()
            return ckpt.dcp_rank_entries(tmp_dir, DCP_DIR, rank)

        return prelude

    def _finish_save(self, synchronize: bool) -> None:
        """Rank 0 commits once every rank's share is on disk: known from the per-step agreement,
        or (``synchronize``) by waiting for this rank's writer and then a barrier."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        meta = dict(self.pending_meta)
        started = meta.pop("started")
        params_hash = meta.pop("params_sha256")
        try:
            pending.wait()
        except ckpt.CheckpointError as exc:
            self.jsonl.event("checkpoint_failed", step=pending.step, rank=self.rank, why=str(exc))
        if synchronize:
            dist.barrier(group=self.ctrl_pg)
        if not self.is_main:
            return
        try:
            if self.args.mode == "deepspeed":
                entries = ckpt.hash_tree(pending.tmp_dir)
            else:
                entries = ckpt.read_rank_indices(pending.tmp_dir, self.world)
                if self.args.mode == "fsdp":
                    entries = ckpt.complete_entries(pending.tmp_dir, entries)
            final = ckpt.commit(self.root, pending.tmp_dir, pending.step, entries, meta)
        except (ckpt.CheckpointError, OSError) as exc:
            # A failed periodic save must not end the run: the previous checkpoint still stands.
            self.jsonl.event("checkpoint_failed", step=pending.step, why=str(exc))
            return
        self.last_committed_step = pending.step
        duration = time.perf_counter() - started
        assert self.metrics is not None
        self.metrics.checkpoint_save_duration.set(duration)
        self.metrics.last_checkpoint_timestamp.set(time.time())
        protected = self.uploader.protected() if self.uploader else set()
        removed = ckpt.apply_retention(self.root, self.args.keep_last, protected | {final})
        if self.uploader is not None:
            self.uploader.submit(final)
        extra = {"params_sha256": params_hash} if params_hash is not None else {}
        self.jsonl.event(
            "checkpoint",
            step=pending.step,
            dir=final.name,
            reason=meta["reason"],
            save_duration_s=duration,
            removed=[p.name for p in removed],
            **extra,
        )

    def _save_now(self, reason: str, complete: bool = False) -> None:
        """Synchronous save of the current step by all ranks (preemption and final saves)."""
        self._finish_save(synchronize=True)  # an async save still in flight commits first
        if self.last_committed_step == self.step and not complete:
            return  # nothing new since the last commit
        self._start_save(reason, background=False, complete=complete)
        self._finish_save(synchronize=True)  # files fsynced on every rank before the seal
        dist.barrier(group=self.ctrl_pg)  # nobody reports success before the commit is durable

    # ----------------------------------------------------------------------------- loop

    def _train_step(self) -> float:
        """One optimizer step; returns the seconds spent waiting for the batch. The loss stays
        on the device until a log or save point reads it."""
        t0 = time.perf_counter()
        inputs, targets = self.loader.batch(self.cursor)
        if self.device.type != "cpu":
            inputs = inputs.to(self.device, non_blocking=True)
            targets = targets.to(self.device, non_blocking=True)
        data_s = time.perf_counter() - t0
        autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if self._autocast
            else contextlib.nullcontext()
        )
        if self.args.mode == "deepspeed":
            with autocast:
                loss = self.engine(inputs, targets)
            self.engine.backward(loss)
            self.engine.step()
        else:
            self.optimizer.zero_grad(set_to_none=True)
            with autocast:
                loss = self.model(inputs, targets)
            loss.backward()
            if self.args.grad_clip > 0:
                nn.utils.clip_grad_norm_(self.model.parameters(), self.args.grad_clip)
            self.optimizer.step()
            self.scheduler.step()
        if self.args.sleep_per_step_s:
            time.sleep(self.args.sleep_per_step_s)
        self.step += 1
        self.cursor = advance(self.cursor, self.per_epoch)
        self._loss_t = loss.detach()
        return data_s

    def setup(self) -> int | None:
        """Distributed init, resume point, model, data, metrics. Returns an exit code when
        there is nothing to train (the run had already completed), else None."""
        self._init_distributed()
        self.preempt.install()
        if self.deterministic:
            torch.use_deterministic_algorithms(True)
        choice = self._choose_resume_point()
        if (
            choice is not None
            and choice[1].get("complete")
            and (int(choice[1]["global_step"]) >= self.args.max_steps)
        ):
            self.jsonl.event("already_complete", dir=choice[0].name)
            report_status(self.rank, STATUS_COMPLETE, step=int(choice[1]["global_step"]))
            return EXIT_SUCCESS
        self._build()
        if choice is not None:
            self._resume(*choice)
        tokens_per_step = self.micro_batch * self.world * self.seq_len
        self.window = StepWindow(tokens_per_step, self.flops_per_token, self.world, self.peak_flops)
        if self.is_main:
            assert self.metrics is not None
            self.metrics.run_info.info({k: str(v) for k, v in asdict(self.meta).items()})
            self.metrics.flops_per_token.set(self.flops_per_token)
            if choice is None:
                self.metrics.resumed_from_step.set(-1)
            if self.args.metrics_port:
                self.metrics.serve(self.args.metrics_port)
            if self.args.s3_uri:
                from .s3_sync import S3Uploader

                self.uploader = S3Uploader(self._s3_client(), self.args.s3_uri)
        self.policy.last_save_time = time.monotonic()
        self.jsonl.event(
            "start",
            # Run metadata in the log stream too: CloudWatch Logs Insights finds a run's pods
            # by `log_processed.run.run_id` (docs/security.md "Run metadata").
            run=asdict(self.meta),
            step=self.step,
            world=self.world,
            mode=self.args.mode,
            model=self.built.spec,
            params=self.built.num_params if self.args.mode != "fsdp" else self._fsdp_num_params(),
            seq_len=self.seq_len,
            micro_batch=self.micro_batch,
            tokens_per_step=tokens_per_step,
            flops_per_token=self.flops_per_token,
            peak_flops=self.peak_flops,
            precision="bf16" if self.bf16 else "fp32",
            deterministic=self.deterministic,
            activation_checkpointing=self.args.activation_checkpointing,
            compile=self.args.compile,
            data=self.data_meta,
            device=str(self.device),
        )
        self.window.reset()
        return None

    def _fsdp_num_params(self) -> int:
        # DTensor.numel() is the global size, so this counts the full model on every rank.
        return sum(p.numel() for p in self.module.parameters())

    def run(self) -> int:
        code = self.setup()
        if code is not None:
            return code
        try:
            return self._loop()
        finally:
            self.close()

    def close(self) -> None:
        if self.uploader is not None:
            # Bounded by the preemption watchdog when we are on the SIGTERM path.
            self.uploader.close()
        close = getattr(getattr(self, "dataset", None), "close", None)
        if close is not None:
            close()

    def _loop(self) -> int:
        while True:
            if self.step >= self.args.max_steps:
                return self._complete()
            code = self.iteration()
            if code is not None:
                return code

    def _complete(self) -> int:
        self._save_now("final", complete=True)
        digest = self.params_sha256()
        if self.is_main:
            result = {"global_step": self.step, "params_sha256": digest}
            ckpt.write_json_durable(self.root / RESULT_NAME, result)
            self.jsonl.event("complete", **result)
        dist.barrier(group=self.ctrl_pg)
        report_status(self.rank, STATUS_COMPLETE, step=self.step)
        return EXIT_SUCCESS

    def iteration(self) -> int | None:
        """One step plus the per-step agreement, logging and saves; an exit code if the run
        must stop here (preempted), else None."""
        data_s = self._train_step()
        self.window.add(data_s)
        if self.pending is not None:
            self._write_in_window = True
        compute_end = time.perf_counter()
        local = [0, 0, 0]
        local[FLAG_STOP] = int(self.preempt.requested)
        local[FLAG_TIME_DUE] = int(self.is_main and self.policy.time_due(time.monotonic()))
        local[FLAG_SAVE_NOT_DONE] = int(self.pending is not None and not self.pending.done())
        agreed = agree(local, group=self.ctrl_pg)
        stall_s = time.perf_counter() - compute_end
        if self.pending is not None and not agreed[FLAG_SAVE_NOT_DONE]:
            self._finish_save(synchronize=False)
        stopping = bool(agreed[FLAG_STOP]) and self.step < self.args.max_steps
        if self.is_main and (
            self.step % self.args.log_every == 0 or stopping or self.step >= self.args.max_steps
        ):
            self._log_window(stall_s)
        if stopping:
            self._save_now("preempt")
            self.preempt.disarm()
            self.jsonl.event("preempted", step=self.step)
            report_status(self.rank, STATUS_PREEMPTED, step=self.step)
            return EXIT_PREEMPTED
        due = self.policy.step_due(self.step) or bool(agreed[FLAG_TIME_DUE])
        if due and self.step < self.args.max_steps:
            # The previous async save may still be writing: wait rather than skip a save.
            self._finish_save(synchronize=True)
            self._start_save("interval", background=self.args.async_save)
        return None

    def _account_write_interference(self, step_s: float, steps: int) -> None:
        """Windows that overlapped a background write, against the usual step time: the extra
        (less the blocking time, counted already) is that save's cost beyond blocking, which
        ``--checkpoint-interval-s auto`` adds to Young/Daly's delta."""
        if self._write_in_window:
            if self._clean_step_s is not None:
                extra = max(0.0, step_s - self._clean_step_s) * steps
                self._overlap_extra_s = (self._overlap_extra_s or 0.0) + extra
        else:
            if self._overlap_extra_s is not None:
                self.policy.record_interference(self._overlap_extra_s - self._last_blocked_s)
                self._overlap_extra_s = None
            previous = self._clean_step_s
            self._clean_step_s = step_s if previous is None else 0.7 * previous + 0.3 * step_s
        self._write_in_window = self.pending is not None

    def _log_window(self, stall_s: float) -> None:
        """Rank 0: read the loss back (closes the window on GPU too) and publish the window."""
        loss = self._read_loss()
        stats = self.window.close()
        self._account_write_interference(stats.step_s, stats.steps)
        m = self.metrics
        assert m is not None
        for _ in range(stats.steps):
            m.step_duration.observe(stats.step_s)
        m.tokens.inc(self.window.tokens_per_step * stats.steps)
        m.tokens_per_second.set(stats.tokens_per_s)
        m.data_loading.set(stats.data_s)
        if stats.mfu is not None:
            m.mfu.set(stats.mfu)
        m.global_step.set(self.step)
        m.collective_stall.set(stall_s)
        m.loss.set(loss)
        self.jsonl.event(
            "step",
            step=self.step,
            loss=loss,
            loss_hex=loss.hex(),
            lr=self.scheduler.get_last_lr()[0],
            step_time_s=stats.step_s,
            data_time_s=stats.data_s,
            tokens_per_s=stats.tokens_per_s,
            mfu=stats.mfu,
            window_steps=stats.steps,
        )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(argv)
    if args.deterministic and torch.cuda.is_available():
        # cuBLAS needs this before its first handle is created, or deterministic mode raises
        # (https://docs.nvidia.com/cuda/cublas/#results-reproducibility).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    rank = int(os.environ.get("RANK", "0"))
    report_status(rank, STATUS_RUNNING)
    trainer = Trainer(args)
    try:
        code = trainer.run()
    except BaseException as exc:
        report_status(rank, STATUS_FAILED, error=repr(exc))
        raise
    finally:
        trainer.jsonl.close()
    return code


if __name__ == "__main__":
    exit_code = main()
    # Everything that matters (checkpoint, result.json, status file) is durable by now. Skip the
    # interpreter and process-group teardown: gloo occasionally aborts in it after a successful
    # run, and DeepSpeed's exit hooks add seconds to every restart.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)

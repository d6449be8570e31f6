"""Per-rank training worker: DDP or DeepSpeed (ZeRO 1-3), spot-safe with exact resume.

Started by torchrun (through ``python -m gpt_trainer.launch``), one process per rank. Each step:
load the rank's batch by cursor arithmetic, forward/backward/step, then one small
``all_reduce(MAX)`` over [SIGTERM seen, time-based save due, async save unfinished] so every
rank takes the same decision at the same optimizer-step boundary. Exit codes: 0 done (or already
done), 75 preempted after a committed checkpoint, 1 failure (see exit_codes.py).
"""

from __future__ import annotations

import argparse
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
from .checkpoint_policy import CheckpointPolicy
from .data import (
    DataCursor,
    SyntheticTokens,
    TokenDataset,
    advance,
    batches_per_epoch,
    collate,
    rank_indices,
)
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
from .model import build_model
from .preemption import FLAG_SAVE_NOT_DONE, FLAG_STOP, FLAG_TIME_DUE, PreemptionHandler, agree

log = logging.getLogger("gpt_trainer")

RESULT_NAME = "result.json"
DS_TAG = "ds"
UNIVERSAL_INFO = {"universal_checkpoint_version": 0.4}


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
    p.add_argument("--mode", choices=("ddp", "deepspeed"), default="ddp")
    p.add_argument("--ds-config", type=Path, help="DeepSpeed JSON config (the ConfigMap's)")
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
    p.add_argument("--grace-s", type=float, default=25.0, help="SIGTERM-to-exit budget")
    p.add_argument("--model", default="tiny", help="built-in preset: tiny | bench50m")
    p.add_argument("--model-factory", help="module:callable returning an nn.Module")
    p.add_argument("--dataset-factory", help="module:callable(seq_len, vocab, seed) -> dataset")
    p.add_argument("--num-samples", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=8, help="per rank (DDP mode)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--sleep-per-step-s", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode == "deepspeed" and args.ds_config is None:
        p.error("--mode deepspeed needs --ds-config")
    return args


def _load_callable(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"expected module:callable, got {spec!r}")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


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
    """One rank's training run; ``run()`` returns the process exit code."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
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
        self.last_committed_step = -1
        self.engine: Any = None
        self.ds_config: dict[str, Any] | None = None

    # ----------------------------------------------------------------------------- setup

    def _build_policy(self) -> CheckpointPolicy:
        raw = str(self.args.checkpoint_interval_s)
        policy = CheckpointPolicy(every_steps=self.args.checkpoint_every_steps or None)
        if raw == "auto":
            policy.auto_mtbf_s = self.args.mtbf_s
        elif float(raw) > 0:
            policy.interval_s = float(raw)
        return policy

    def _init_distributed(self) -> None:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29511")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("LOCAL_RANK", "0")
        backend = "nccl" if torch.cuda.is_available() else "gloo"
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
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))

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
            found = ckpt.find_latest_valid(
                self.root,
                on_skip=lambda d, why: self.jsonl.event("checkpoint_skipped", dir=d.name, why=why),
            )
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

    def _s3_client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3"))

    def _build(self) -> None:
        args = self.args
        torch.manual_seed(args.seed)
        model: nn.Module = (
            _load_callable(args.model_factory)() if args.model_factory else build_model(args.model)
        )
        cfg = getattr(model, "cfg", None)
        seq_len = getattr(cfg, "seq_len", 64)
        vocab = getattr(cfg, "vocab_size", 256)
        self.dataset: TokenDataset = (
            _load_callable(args.dataset_factory)(seq_len, vocab, args.seed)
            if args.dataset_factory
            else SyntheticTokens(args.num_samples, seq_len, vocab, args.seed)
        )
        self.seq_len = seq_len
        micro_batch = args.micro_batch
        if args.mode == "deepspeed":
            self.ds_config = json.loads(Path(args.ds_config).read_text(encoding="utf-8"))
            if int(self.ds_config.get("gradient_accumulation_steps", 1)) != 1:
                raise ValueError("this trainer takes one batch per optimizer step: set gas to 1")
            micro_batch = int(self.ds_config.get("train_micro_batch_size_per_gpu", micro_batch))
            self.ds_config["train_micro_batch_size_per_gpu"] = micro_batch
            self.ds_config.setdefault("train_batch_size", micro_batch * self.world)
            # Our torch optimizer instead of DeepSpeed's fused one: no JIT op build on CPU.
            self.ds_config.setdefault("zero_allow_untested_optimizer", True)
        self.micro_batch = micro_batch
        self.per_epoch = batches_per_epoch(len(self.dataset), self.world, micro_batch)
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
        if args.mode == "ddp":
            self.model: nn.Module = nn.parallel.DistributedDataParallel(model)
            self.optimizer = optimizer
            self.scheduler = scheduler
        else:
            import deepspeed

            self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
                model=model, optimizer=optimizer, lr_scheduler=scheduler, config=self.ds_config
            )
            self.model = self.engine
        # Distinct dropout streams per rank; a resume overwrites this with the saved state.
        torch.manual_seed(args.seed * 1000 + self.rank + 1)
        np.random.seed(args.seed + self.rank)
        random.seed(args.seed + self.rank)

    @property
    def sharding(self) -> str:
        if self.args.mode == "ddp":
            return "ddp"
        return f"zero-{(self.ds_config or {}).get('zero_optimization', {}).get('stage', 0)}"

    def params_sha256(self) -> str:
        """Hash of the full model; collective under ZeRO-3 (parameters are gathered first)."""
        if self.sharding == "zero-3":
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(self.module.parameters())):
                return state_dict_sha256(self.module.state_dict())
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
        if self.args.mode == "ddp":
            self.module.load_state_dict(torch.load(step_dir / "model.pt", weights_only=True))
            state = torch.load(step_dir / "train_state.pt", weights_only=True)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
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
            offset = old["batch"] * saved_world * self.micro_batch
            self.cursor = DataCursor(
                old["epoch"], min(offset // (self.world * self.micro_batch), self.per_epoch - 1)
            )
        self.jsonl.event(
            "resumed",
            dir=step_dir.name,
            step=self.step,
            cursor=self.cursor.to_dict(),
            params_sha256=self.params_sha256(),
        )

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
        }

    def _rank_state(self) -> dict[str, Any]:
        return {"rng": rng_state(), "cursor": self.cursor.to_dict(), "rank": self.rank}

    def _start_save(self, reason: str, background: bool, complete: bool = False) -> float:
        """Begin this rank's share of a checkpoint of the current step; returns seconds blocked."""
        started = time.perf_counter()
        tmp_dir = self.root / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(self.step)}"
        if self.args.mode == "deepspeed":
            self.engine.save_checkpoint(
                str(tmp_dir),
                tag=DS_TAG,
                client_state={"universal_checkpoint_info": UNIVERSAL_INFO},
                save_latest=False,
            )
            files: dict[str, Any] = {f"rank_{self.rank:05d}.pt": self._rank_state()}
            background = False
        else:
            files = {f"rank_{self.rank:05d}.pt": self._rank_state()}
            if self.is_main:
                files["model.pt"] = self.module.state_dict()
                files["train_state.pt"] = {
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "global_step": self.step,
                }
            if background:
                files = ckpt.clone_to_cpu(files)
        self.pending = ckpt.PendingSave(self.step, tmp_dir, files, self.rank, background)
        self.pending_meta = {
            **self._manifest_meta(reason, complete),
            "save_started_unix": time.time(),
            "started": started,
        }
        blocked = time.perf_counter() - started
        if self.is_main:
            self.policy.record_save(time.monotonic(), blocked)
            assert self.metrics is not None
            self.metrics.checkpoint_blocking.set(blocked)
        return blocked

    def _finish_save(self, synchronize: bool) -> None:
        """Rank 0 commits once every rank's share is on disk: known from the per-step agreement,
        or (``synchronize``) by waiting for this rank's writer and then a barrier."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        meta = dict(self.pending_meta)
        started = meta.pop("started")
        try:
            pending.wait()
        except ckpt.CheckpointError as exc:
            self.jsonl.event("checkpoint_failed", step=pending.step, rank=self.rank, why=str(exc))
        if synchronize:
            dist.barrier()
        if not self.is_main:
            return
        try:
            if self.args.mode == "deepspeed":
                entries = ckpt.hash_tree(pending.tmp_dir)
            else:
                entries = ckpt.read_rank_indices(pending.tmp_dir, self.world)
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
        self.jsonl.event(
            "checkpoint",
            step=pending.step,
            dir=final.name,
            reason=meta["reason"],
            save_duration_s=duration,
            removed=[p.name for p in removed],
        )

    def _save_now(self, reason: str, complete: bool = False) -> None:
        """Synchronous save of the current step by all ranks (preemption and final saves)."""
        self._finish_save(synchronize=True)  # an async save still in flight commits first
        if self.last_committed_step == self.step and not complete:
            return  # nothing new since the last commit
        self._start_save(reason, background=False, complete=complete)
        self._finish_save(synchronize=True)  # files fsynced on every rank before the seal
        dist.barrier()  # nobody reports success before the commit is durable

    # ----------------------------------------------------------------------------- loop

    def _train_step(self) -> tuple[float, float]:
        t0 = time.perf_counter()
        indices = rank_indices(
            self.cursor,
            num_samples=len(self.dataset),
            seed=self.args.seed,
            rank=self.rank,
            world_size=self.world,
            micro_batch=self.micro_batch,
        )
        inputs, targets = collate(self.dataset, indices)
        data_s = time.perf_counter() - t0
        if self.args.mode == "ddp":
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.model(inputs, targets)
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
        else:
            loss = self.engine(inputs, targets)
            self.engine.backward(loss)
            self.engine.step()
        if self.args.sleep_per_step_s:
            time.sleep(self.args.sleep_per_step_s)
        self.step += 1
        self.cursor = advance(self.cursor, self.per_epoch)
        return float(loss.item()), data_s

    def run(self) -> int:
        self._init_distributed()
        self.preempt.install()
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
        if self.is_main:
            assert self.metrics is not None
            self.metrics.run_info.info({k: str(v) for k, v in asdict(self.meta).items()})
            if self.args.metrics_port:
                self.metrics.serve(self.args.metrics_port)
            if self.args.s3_uri:
                from .s3_sync import S3Uploader

                self.uploader = S3Uploader(self._s3_client(), self.args.s3_uri)
        self.policy.last_save_time = time.monotonic()
        self.jsonl.event("start", step=self.step, world=self.world, mode=self.args.mode)
        try:
            return self._loop()
        finally:
            if self.uploader is not None:
                # Bounded by the preemption watchdog when we are on the SIGTERM path.
                self.uploader.close()

    def _loop(self) -> int:
        tokens_per_step = self.micro_batch * self.world * self.seq_len
        while True:
            if self.step >= self.args.max_steps:
                self._save_now("final", complete=True)
                digest = self.params_sha256()
                if self.is_main:
                    result = {"global_step": self.step, "params_sha256": digest}
                    ckpt.write_json_durable(self.root / RESULT_NAME, result)
                    self.jsonl.event("complete", **result)
                dist.barrier()
                report_status(self.rank, STATUS_COMPLETE, step=self.step)
                return EXIT_SUCCESS
            t0 = time.perf_counter()
            loss, data_s = self._train_step()
            self.last_loss = loss
            compute_end = time.perf_counter()
            local = [0, 0, 0]
            local[FLAG_STOP] = int(self.preempt.requested)
            local[FLAG_TIME_DUE] = int(self.is_main and self.policy.time_due(time.monotonic()))
            local[FLAG_SAVE_NOT_DONE] = int(self.pending is not None and not self.pending.done())
            agreed = agree(local)
            stall_s = time.perf_counter() - compute_end
            if self.pending is not None and not agreed[FLAG_SAVE_NOT_DONE]:
                self._finish_save(synchronize=False)
            step_s = time.perf_counter() - t0
            if self.is_main:
                assert self.metrics is not None
                m = self.metrics
                m.step_duration.observe(step_s)
                m.tokens_per_second.set(tokens_per_step / step_s)
                m.data_loading.set(data_s)
                m.global_step.set(self.step)
                m.collective_stall.set(stall_s)
                m.loss.set(loss)
                self.jsonl.event(
                    "step",
                    step=self.step,
                    loss=loss,
                    loss_hex=loss.hex(),
                    lr=self.scheduler.get_last_lr()[0],
                    step_time_s=step_s,
                    data_time_s=data_s,
                    tokens_per_s=tokens_per_step / step_s,
                )
            if agreed[FLAG_STOP] and self.step < self.args.max_steps:
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


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(argv)
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

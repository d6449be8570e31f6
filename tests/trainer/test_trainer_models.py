"""Models, in-process: every Hugging Face preset has the size its name says; the FLOPs-per-token
formula matches torch's FLOP counter; activation checkpointing changes neither losses nor
gradients nor state-dict keys; weights load from a local directory; FSDP2 on one rank
materialises a meta-device model; MFU and the step window."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from gpt_trainer import models, parallel
from gpt_trainer.hf_models import PRESETS
from gpt_trainer.perf import StepWindow, mfu, peak_flops_from_env


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_hf_preset_has_the_parameter_count_its_name_says(name: str) -> None:
    built = models.build(f"hf:{name}", meta=True)
    assert built.on_meta
    assert built.num_params == pytest.approx(PRESETS[name].nominal_params, rel=0.02)
    assert len(built.layers) == built.attention[0]  # type: ignore[index]


@pytest.mark.parametrize("spec", ["hf:llama-tiny", "hf:qwen3-tiny", "tiny"])
def test_flops_per_token_matches_torch_flop_counter(spec: str) -> None:
    """6 N + 12 L H Q T against the matmul FLOPs torch counts for one forward + backward
    (eager attention, which the counter sees; norms and biases make the small difference)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    built = models.build(spec)
    if spec.startswith("hf:"):
        built.module.lm.set_attn_implementation("eager")
    batch = torch.randint(0, built.vocab_size, (2, built.seq_len + 1))
    with FlopCounterMode(display=False) as counter:
        built.module(batch[:, :-1], batch[:, 1:]).backward()
    measured = counter.get_total_flops() / (2 * built.seq_len)
    assert measured == pytest.approx(built.flops_per_token(), rel=0.01)


def test_tied_embeddings_are_counted_once_as_the_head() -> None:
    llama = models.build("hf:llama-tiny")  # untied: the input embedding is a lookup
    qwen = models.build("hf:qwen3-tiny")  # tied: the one matrix is the output head
    embedding = llama.module.lm.get_input_embeddings().weight.numel()
    assert llama.matmul_params == llama.num_params - embedding
    assert qwen.matmul_params == qwen.num_params


@pytest.mark.parametrize("spec", ["hf:llama-tiny", "tiny"])
def test_activation_checkpointing_is_bit_identical(spec: str) -> None:
    def loss_and_grads(checkpointing: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor], list]:
        torch.manual_seed(3)
        built = models.build(spec)
        if checkpointing:
            parallel.apply_activation_checkpointing(built)
        built.module.train()
        torch.manual_seed(4)  # the built-in GPT has dropout: the recompute must redraw the mask
        batch = torch.randint(0, built.vocab_size, (2, built.seq_len + 1))
        loss = built.module(batch[:, :-1], batch[:, 1:])
        loss.backward()
        grads = {n: p.grad for n, p in built.module.named_parameters()}
        return loss.detach(), grads, list(built.module.state_dict())

    plain_loss, plain_grads, plain_keys = loss_and_grads(False)
    ac_loss, ac_grads, ac_keys = loss_and_grads(True)
    assert torch.equal(plain_loss, ac_loss)
    assert ac_keys == plain_keys  # checkpoints load with or without the wrapper
    assert len(ac_grads) == len(plain_grads)
    for (name, grad), other in zip(plain_grads.items(), ac_grads.values(), strict=True):
        assert torch.equal(grad, other), name


def test_hf_weights_load_from_a_local_directory_and_a_config_alone_builds(tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = models.build("hf:qwen3-tiny")
    source.module.lm.save_pretrained(tmp_path / "weights")
    loaded = models.build(f"hf:{tmp_path / 'weights'}", seq_len=32)
    assert loaded.seq_len == 32
    expected = source.module.state_dict()
    for key, value in loaded.module.state_dict().items():
        assert torch.equal(value, expected[key]), key
    # A directory with only config.json: that architecture, randomly initialised, any vocab.
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.json").write_bytes(
        (tmp_path / "weights" / "config.json").read_bytes()
    )
    fresh = models.build(f"hf:{tmp_path / 'config'}", vocab_size=300)
    assert fresh.vocab_size == 300 and fresh.config["model_type"] == "qwen3"
    with pytest.raises(ValueError, match="exceeds"):
        models.build(f"hf:{tmp_path / 'weights'}", vocab_size=100_000)


def test_unknown_model_specs_fail_with_the_choices() -> None:
    with pytest.raises(ValueError, match="llama-tiny"):
        models.build("hf:llama-7t")
    with pytest.raises(ValueError, match="bench50m"):
        models.build("gpt-4")
    with pytest.raises(FileNotFoundError):
        models.build("hf:/nonexistent/model")
    with pytest.raises(ValueError, match="vocabulary"):
        models.build("tiny", vocab_size=10_000)


@pytest.fixture
def one_rank_group() -> Iterator[None]:
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_fsdp2_materialises_a_meta_model_after_sharding_and_trains(one_rank_group: None) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    built = models.build("hf:llama-tiny", meta=True)
    parallel.apply_activation_checkpointing(built)
    mesh = init_device_mesh("cpu", (1,))
    parallel.shard_fsdp(built, mesh, None, torch.device("cpu"))
    params = list(built.module.parameters())
    assert all(isinstance(p, DTensor) and not p.to_local().is_meta for p in params)
    # Rotary frequencies are buffers rebuilt by init_weights, not left as to_empty garbage.
    inv_freq = built.module.lm.model.rotary_emb.inv_freq
    assert torch.isfinite(inv_freq).all() and inv_freq[0] == 1.0
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    batch = torch.randint(0, built.vocab_size, (2, built.seq_len + 1))
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = built.module(batch[:, :-1], batch[:, 1:])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_mfu_and_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    # 8 GPUs at 989 TFLOPS, a 1 B model at 6e9 FLOPs/token, 600 k tokens/s: 45.5 %.
    assert mfu(600_000, 6e9, 8, 989e12) == pytest.approx(0.455, abs=0.001)
    monkeypatch.delenv("GPU_PEAK_TFLOPS", raising=False)
    assert peak_flops_from_env() is None
    monkeypatch.setenv("GPU_PEAK_TFLOPS", "989")
    assert peak_flops_from_env() == 989e12
    assert peak_flops_from_env(312.0) == 312e12
    monkeypatch.setenv("GPU_PEAK_TFLOPS", "-1")
    with pytest.raises(ValueError):
        peak_flops_from_env()


def test_step_window_averages_over_its_steps() -> None:
    window = StepWindow(tokens_per_step=1000, flops_per_token=6e6, world=2, peak=1e12)
    window.reset(now=100.0)
    for data_s in (0.1, 0.2, 0.3):
        window.add(data_s)
    stats = window.close(now=106.0)
    assert (stats.steps, stats.step_s, stats.tokens_per_s) == (3, 2.0, 500.0)
    assert stats.data_s == pytest.approx(0.2)
    assert stats.mfu == pytest.approx(500 * 6e6 / 2e12)
    assert window.steps == 0 and window.started == 106.0
    assert StepWindow(1, 1.0, 1, None).close().mfu is None


def test_hub_is_never_contacted() -> None:
    import gpt_trainer.hf_models  # noqa: F401 - importing it sets the variable

    assert os.environ.get("HF_HUB_OFFLINE") == "1"

"""`python -m synth.region`: the AWS region a stack deploys to, as its stack file names it (the
deploy workflows configure each stack's credentials for it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from synth import region
from synth.fleet import FLEET_ROOT
from tests.conftest import stack_values


def test_every_committed_stack_names_its_region() -> None:
    assert region.stack_region("dev") == "us-east-1"
    assert region.stack_region("prod-use1") == "us-east-1"
    assert region.stack_region("prod-usw2") == "us-west-2"
    assert region.stack_region("prod", FLEET_ROOT) == "us-east-1"


def test_the_cli_prints_the_region(capsys: pytest.CaptureFixture[str]) -> None:
    assert region.main(["--stack", "prod-usw2"]) == region.EXIT_OK
    assert capsys.readouterr().out == "us-west-2\n"
    assert region.main(["--project", "fleet", "--stack", "prod"]) == region.EXIT_OK
    assert capsys.readouterr().out == "us-east-1\n"


def test_a_stack_without_a_region_is_exit_2_naming_the_file(
    make_stack: Callable[[dict[str, Any]], Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = stack_values("dev")
    cfg.pop("aws:region")
    project = make_stack(cfg)
    with pytest.raises(region.StackFileError, match=r"Pulumi\.t\.yaml: `aws:region` is not set"):
        region.stack_region("t", project)
    monkeypatch.setitem(region.ROOTS, "platform", project)
    assert region.main(["--stack", "t"]) == region.EXIT_CONFIG
    assert "Pulumi.t.yaml: `aws:region` is not set" in capsys.readouterr().err
    assert region.main(["--stack", "no-such-stack"]) == region.EXIT_CONFIG
    assert "Pulumi.no-such-stack.yaml: file not found" in capsys.readouterr().err

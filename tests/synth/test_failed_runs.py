"""A run that fails leaves no unretrieved future behind (README command 2 ends at its summary
line, not with asyncio's "Future exception was never retrieved" tracebacks), and a second,
different failure of the same run is still reported (synth/harness.py `_retrieve_failure`)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pulumi
import pytest

from synth import harness
from synth.harness import run_program
from tests.conftest import stack_values

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


def _unretrieved(error: BaseException) -> list[asyncio.Future[Any]]:
    """Live futures that failed with `error` and whose exception nobody asked for."""
    gc.collect()
    return [
        obj
        for obj in gc.get_objects()
        if issubclass(type(obj), asyncio.Future)  # no `__class__` read: see harness._retrieve
        and obj.done()
        and not obj.cancelled()
        and getattr(obj, "_log_traceback", False)
        and getattr(obj, "_exception", None) is error
    ]


def test_a_run_error_inside_an_apply_leaves_no_unretrieved_future() -> None:
    # The tag is resolved inside an apply (components/ecr_tags.py): its RunError fails every
    # output derived from it, and the runtime re-raises only the first.
    jobs = stack_values("dev")["gpu-platform:trainingJobs"]
    jobs = [{**jobs[0], "image": f"{ECR}/gpu-dev/teams/research/llm:7"}, *jobs[1:]]
    with pytest.raises(pulumi.RunError, match=r"trainingJobs\[0\]\.image: got '7'") as caught:
        run_program("dev", overrides={"gpu-platform:trainingJobs": jobs}, published={})
    assert _unretrieved(caught.value) == []


def test_a_different_failure_of_the_same_run_is_reported_not_dropped() -> None:
    from pulumi.runtime.sync_await import _ensure_event_loop

    loop = _ensure_event_loop()  # the loop the harness runs programs on
    before = loop.get_exception_handler()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        raised = pulumi.RunError("the failure the caller gets")
        derived = loop.create_future()
        derived.set_exception(raised)
        other = RuntimeError("a second, unrelated failure")
        second = loop.create_future()
        second.set_exception(other)
        harness._retrieve(raised)
        # Both are retrieved now (asyncio will not log them when they are collected) ...
        assert not derived._log_traceback and not second._log_traceback  # type: ignore[attr-defined]
        # ... and only the unrelated one was reported, at once.
        assert [c["exception"] for c in reported] == [other]
        assert reported[0]["future"] is second
    finally:
        loop.set_exception_handler(before)

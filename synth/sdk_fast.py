"""Two costs of the Pulumi SDK that synth avoids without changing what the program does: the
thread pool every monitor call goes through (`InlineExecutor`) and the stack trace attached to
every registration (`stack_trace`). synth/harness.py installs both for the length of a run."""

from __future__ import annotations

import concurrent.futures
import sys
import traceback
from types import FrameType
from typing import Any

from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime.proto import source_pb2


class InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs each submitted call at once, on the caller's thread.

    The SDK hands every monitor call to the loop's thread pool, because against a real engine
    it is a blocking gRPC request. The mock monitor answers in-process without blocking, so the
    pool only adds thread hand-offs (a tenth of a synth on two cores); the program and the
    SDK's own code paths are unchanged.
    """

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future


#: The SDK's own stack-trace capture, restored after each run (see `stack_trace`).
SDK_STACK_TRACE = pulumi_resource._get_stack_trace
#: Source-position URI of each file name (None: not expressible, as the SDK decides).
_URIS: dict[str, str | None] = {}
#: Stack traces by the (file, line) of each frame they are built from.
_TRACES: dict[tuple[tuple[str, int | None], ...], source_pb2.StackTrace] = {}


def _uri(filename: str) -> str | None:
    if filename not in _URIS:
        position = pulumi_resource._get_source_position_for_frame(
            traceback.FrameSummary(filename, 1, "", lookup_line=False)
        )
        _URIS[filename] = position.uri if position is not None else None
    return _URIS[filename]


def stack_trace() -> source_pb2.StackTrace:
    """The message `pulumi.runtime.resource._get_stack_trace` returns, at a tenth of its cost.

    The SDK attaches the program's call stack to every registration request (the engine shows
    it in diagnostics); no setting turns that off. It extracts the whole stack with
    `traceback.extract_stack`, which also stats every source file and reads its lines through
    `linecache`, turns each frame's file name into a URI through `pathlib`, and builds a
    protobuf message per frame: 7 % of a 100-team synth. The same frames are selected here
    (those outside the third `__init__` counted from the innermost frame — Resource, Custom- or
    ComponentResource, the concrete class: the program's code above the constructor), with the
    same file names and line numbers through the SDK's own URI function, and the message is
    built once per distinct stack: every team's resources repeat the same call sites.
    tests/synth/test_scale.py checks that every request carries the same trace either way.
    """
    if getattr(sys, "tracebacklimit", None) is not None:
        return SDK_STACK_TRACE()  # a limit changes which frames extract_stack sees
    frame: FrameType | None = sys._getframe(1)
    inits = 0
    while frame is not None:
        if frame.f_code.co_name == "__init__":
            inits += 1
            if inits == 3:
                break
        frame = frame.f_back
    caller = frame.f_back if frame is not None else None
    if caller is None:
        return source_pb2.StackTrace()
    key = []
    while caller is not None:
        key.append((caller.f_code.co_filename, caller.f_lineno))
        caller = caller.f_back
    frozen = tuple(key)
    cached = _TRACES.get(frozen)
    if cached is None:
        frames = []
        for filename, line in frozen:
            uri = _uri(filename) if filename and line is not None else None
            position = None if uri is None else source_pb2.SourcePosition(uri=uri, line=line)
            frames.append(source_pb2.StackFrame(pc=position))
        cached = _TRACES[frozen] = source_pb2.StackTrace(frames=frames)
    trace = source_pb2.StackTrace()
    trace.CopyFrom(cached)  # the caller gets its own message, as from the SDK
    return trace

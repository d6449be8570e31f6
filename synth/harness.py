"""Run the real `__main__.py` under Pulumi's mock runtime and capture every registration.

The mocks replace the engine, never the program: the same `__main__.py`, the same stack files and
the same config loading run as under `pulumi up`. What the engine would be told — type, name,
parent, provider, dependencies and wire-format inputs of each resource — is recorded by a
`MockMonitor` subclass, with deterministic fake ids, ARNs and endpoints so that the same input
always gives the same output. Facts and pitfalls: docs/architecture.md ("Offline synth").
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import runpy
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pulumi
import yaml
from google.protobuf import struct_pb2  # type: ignore[import-untyped]
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from synth.mocks import PlatformMocks, published_tags, replica_tags, trainer_home
from synth.sdk_fast import SDK_STACK_TRACE, InlineExecutor, stack_trace

if TYPE_CHECKING:
    from components.analysis import Judgement, StackFacts
    from components.analysis.fleet import FleetFacts
    from components.analysis.fleet_jobs import FleetJudgement
    from components.config import StackConfig
    from components.contract.fleet_contract import FleetJobs
    from components.roots.results import RootResult
    from components.training_jobs.plan import JobPlan

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SECRET_PLACEHOLDER = "[secret]"

# Wire-format signatures (pulumi/sdk/go/common/resource/sig).
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


class StackFileError(Exception):
    """The stack or project file cannot be read (missing, not YAML, wrong shape)."""


@dataclass(frozen=True)
class Registration:
    """One resource as the engine would see it."""

    urn: str
    type: str
    name: str
    parent: str
    provider: str
    dependencies: tuple[str, ...]
    custom: bool
    inputs: dict[str, Any]
    #: Resource options the engine enforces; not part of resources.json.
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()
    #: customTimeouts as the engine gets them ({"create": "10m", ...}; empty = defaults).
    custom_timeouts: tuple[tuple[str, str], ...] = ()
    #: The `transforms` in the resource's options, as callables (see child_inputs).
    transforms: tuple[Any, ...] = ()

    def child_inputs(self, child_type: str, props: dict[str, Any]) -> dict[str, Any]:
        """`props` (camelCase wire keys) of a child of type `child_type` after this resource's
        transforms: what the engine does at `up` to packaged components' children, unseen here."""
        for transform in self.transforms:
            args = pulumi.ResourceTransformArgs(
                True, child_type, self.name, props, pulumi.ResourceOptions()
            )
            result = transform(args)
            if result is not None:
                props = dict(result.props)
        return props

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "provider": self.provider,
            "dependencies": list(self.dependencies),
            "custom": self.custom,
            "inputs": self.inputs,
        }


@dataclass
class SynthResult:
    """Everything a synthesized stack declared, sorted by URN."""

    stack: str
    resources: list[Registration] = field(default_factory=list)
    #: policy-report.json records, once synth has run the policy pack (None: not run).
    policy_violations: list[dict[str, str]] | None = None
    #: What the composition root returned (components/roots/results.py), the one channel from
    #: the program to the report, and its parts: the validated stack config the program ran with
    #: (`facts.cfg`), its facts, the judgement of its workloads and the training jobs' plans.
    #: None: not captured (a failed run), or not what this kind of root builds.
    root: RootResult | None = None
    config: StackConfig | None = None
    facts: StackFacts | None = None
    judgement: Judgement | FleetJudgement | None = None
    plans: tuple[JobPlan, ...] | None = None
    #: The stack's exports (`pulumi.export`), resolved: what a StackReference to this stack
    #: reads (the job stacks' stub of the platform, jobs/). Never written to the build files.
    outputs: dict[str, Any] = field(default_factory=dict)
    #: Names of the exports that are secrets (StackReference's `secretOutputNames`).
    secret_outputs: list[str] = field(default_factory=list)
    #: A job stack's platform synth (what its StackReference read; synth/jobs.py): the report
    #: reads the admission policies the job's pods will meet from it.
    platform: SynthResult | None = None
    #: A fleet's manager (FleetRoot: analysis/fleet.py FleetFacts) or a job stack on one
    #: (FleetJobsRoot: contract/fleet_contract.py FleetJobs).
    fleet: FleetFacts | None = None
    fleet_jobs: FleetJobs | None = None
    #: A manager's worker synths, by the stack names its StackReferences read (synth/fleet.py).
    workers: dict[str, SynthResult] = field(default_factory=dict)

    def of_type(self, type_token: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]


# --- stack files ------------------------------------------------------------------------------


def _stub_secrets(value: Any) -> tuple[Any, bool]:
    """Replace `secure:` values by a placeholder; report whether any was found."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER, True
        found = False
        out = {}
        for key, item in value.items():
            out[key], inner = _stub_secrets(item)
            found = found or inner
        return out, found
    if isinstance(value, list):
        items = [_stub_secrets(item) for item in value]
        return [item for item, _ in items], any(flag for _, flag in items)
    return value, False


def _encode(value: Any) -> str:
    # The CLI hands every config value over as a string; structured values JSON-encoded.
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


#: libyaml's parser (PyYAML's wheels bundle it) with the safe constructor: the same data as
#: `yaml.safe_load`, parsed in C — a 200-team stack file takes a fifth of a second in Python.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)
    except FileNotFoundError:
        raise StackFileError(f"{path.name}: file not found") from None
    except yaml.YAMLError as exc:
        raise StackFileError(f"{path.name}: not valid YAML ({exc})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StackFileError(f"{path.name}: expected a mapping at the top level")
    return data


def with_overrides(
    config: dict[str, str], overrides: Mapping[str, Any] | None, namespace: str
) -> dict[str, str]:
    """`config` with whole keys replaced (`None` removes one); a bare key is put in
    `namespace`. Returns the overrides with full keys (what `run_program` takes)."""
    full = {(k if ":" in k else f"{namespace}:{k}"): v for k, v in (overrides or {}).items()}
    for key, value in full.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value if isinstance(value, str) else json.dumps(value)
    return full


def load_stack_config(
    stack: str, root: Path = PROJECT_ROOT
) -> tuple[str, dict[str, str], list[str]]:
    """Project name, flat config map and secret keys, as the CLI would build them.

    `Pulumi.yaml` `config:` values and defaults apply first; a key set in the stack file replaces
    the default as a whole (no deep merge).
    """
    project_file = _read_yaml(root / "Pulumi.yaml")
    project = project_file.get("name")
    if not isinstance(project, str):
        raise StackFileError("Pulumi.yaml: `name` is missing")
    config: dict[str, str] = {}
    secret_keys: list[str] = []

    def put(key: str, raw: Any) -> None:
        full = key if ":" in key else f"{project}:{key}"
        value, secret = _stub_secrets(raw)
        config[full] = _encode(value)
        if secret:
            secret_keys.append(full)
        elif full in secret_keys:
            secret_keys.remove(full)

    for key, spec in (project_file.get("config") or {}).items():
        if isinstance(spec, dict) and ("value" in spec or "default" in spec):
            put(key, spec.get("value", spec.get("default")))
        elif not isinstance(spec, dict):
            put(key, spec)
    stack_file = _read_yaml(root / f"Pulumi.{stack}.yaml")
    for key, raw in (stack_file.get("config") or {}).items():
        put(key, raw)
    return project, config, sorted(secret_keys)


def _plain_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        text: str = value.string_value
        return "[unknown]" if text == _UNKNOWN else text
    if kind == "number_value":
        number: float = value.number_value
        return int(number) if number.is_integer() else number
    if kind == "bool_value":
        return bool(value.bool_value)
    if kind == "struct_value":
        return _plain(value.struct_value)
    if kind == "list_value":
        return [_plain_value(item) for item in value.list_value.values]
    return None


def _plain(struct: struct_pb2.Struct) -> Any:
    """Wire struct → JSON value: secrets stubbed, unknowns marked, integral floats as ints.

    One pass over the protobuf message (the generic `json_format.MessageToDict` and a second
    walk over its result took half as long again, once per resource).
    """
    fields = struct.fields
    sig = fields.get(_SIG_KEY)
    if sig is not None:
        if sig.string_value == _SECRET_SIG:
            return SECRET_PLACEHOLDER
        if sig.string_value == _RESOURCE_SIG:
            urn = fields.get("urn")
            return urn.string_value if urn is not None else ""
    return {key: _plain_value(item) for key, item in fields.items()}


class CapturingMonitor(pulumi_mocks.MockMonitor):
    """The stock mock monitor, recording what `RegisterResource` receives.

    Resource references are switched off (OFFLINE.md, sharp edge 1): a resource passed as an
    input (`ManagedNodeGroup(cluster=...)`) then arrives as its URN instead of crashing.
    """

    def __init__(self, mocks: pulumi_mocks.Mocks, *, echo_nested: bool = False) -> None:
        super().__init__(mocks)
        self.echo_nested = echo_nested
        self.captured: list[Registration] = []
        self._lock = threading.Lock()

    def SupportsFeature(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        if request.id == "resourceReferences":
            return type("SupportsFeatureResponse", (object,), {"hasSupport": False})
        return super().SupportsFeature(request)  # type: ignore[no-untyped-call]

    def GetDeploymentInfo(self, request: Any) -> Any:  # noqa: N802
        info = super().GetDeploymentInfo(request)  # type: ignore[no-untyped-call]
        features = [
            f
            for f in info.supportedFeatures
            if f != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802
        # Replaces the stock implementation, which deserializes the inputs and serializes the
        # whole state back through the SDK's async RPC layer for every resource: here the wire
        # struct is read once. The response echoes the request's scalar inputs (names, sizes:
        # what a program reads back) plus the outputs the mocks compute (ids, ARNs, URLs).
        # Nested input structures are echoed only with `echo_nested`: translating them back
        # through the SDK's output types costs a third of a synth, the program reads none of
        # them, and tests/synth/test_stack.py proves the synthesized files are identical either way.
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        inputs = _plain(request.object)
        args = pulumi_mocks.MockResourceArgs(
            typ=request.type,
            name=request.name,
            inputs=inputs,
            provider=request.provider,
            resource_id=request.importId,
            custom=bool(request.custom),
        )
        id_, state = self.mocks.new_resource(args)
        outputs = self._echo(request, inputs, state)
        registration = _registration(urn, request, inputs)
        with self._lock:
            self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(
                urn, id_ or "", state
            )
            self.captured.append(registration)
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_ or "", object=outputs)

    def _echo(
        self, request: Any, inputs: dict[str, Any], state: dict[str, Any]
    ) -> struct_pb2.Struct:
        """What the program reads back: the request's inputs (scalars only unless
        `echo_nested`) and whatever the mocks computed that differs from them."""
        outputs = struct_pb2.Struct()
        if self.echo_nested:
            outputs.CopyFrom(request.object)
        else:
            for key, value in request.object.fields.items():
                if value.WhichOneof("kind") not in ("struct_value", "list_value"):
                    outputs.fields[key].CopyFrom(value)
        outputs.update({k: v for k, v in state.items() if k not in inputs or inputs[k] != v})
        return outputs


def _registration(urn: str, request: Any, inputs: dict[str, Any]) -> Registration:
    """The record of one RegisterResource request: what resources.json and the checks read."""
    return Registration(
        urn=urn,
        type=request.type,
        name=request.name,
        parent=request.parent,
        provider=request.provider,
        dependencies=tuple(sorted(set(request.dependencies))),
        custom=bool(request.custom),
        inputs=inputs,
        protect=bool(request.protect),
        retain_on_delete=bool(request.retainOnDelete),
        delete_before_replace=bool(request.deleteBeforeReplace),
        replace_on_changes=tuple(request.replaceOnChanges),
        custom_timeouts=tuple(
            (phase, value)
            for phase in ("create", "update", "delete")
            if (value := getattr(request.customTimeouts, phase, ""))
        ),
        transforms=tuple(pulumi_mocks._resolve_callbacks(request.transforms))
        if request.transforms
        else (),
    )


# --- running ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _deploy_environment(deploy_env: Mapping[str, str] | None) -> Iterator[None]:
    """The deploy provenance variables the program sees: `deploy_env` only, whatever this
    process's environment holds; restored afterwards."""
    from components.training_jobs.plan import DEPLOY_RUN_ENV, DEPLOYED_BY_ENV

    saved = {name: os.environ.pop(name, None) for name in (DEPLOYED_BY_ENV, DEPLOY_RUN_ENV)}
    os.environ.update(deploy_env or {})
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


#: The composition root's one name the harness reads after the program ran: the typed value its
#: root function returned (components/roots/results.py RootResult).
ROOT_RESULT = "result"


def _install_mock_runtime(
    mocks: PlatformMocks,
    monitor: CapturingMonitor,
    *,
    project: str,
    stack: str,
    config: dict[str, str],
    secret_keys: list[str],
) -> None:
    """Point the Pulumi SDK at the mocks and the capturing monitor, with the stack's config."""
    # set_mocks builds a root Stack resource only when none exists: without this reset a second
    # stack synthesized in the same process (the test session) parents its top-level components
    # to the first stack's root (private SDK state; the SDK is pinned and a golden test covers it).
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    _ensure_event_loop().set_default_executor(  # type: ignore[no-untyped-call]
        InlineExecutor(max_workers=1)
    )
    pulumi.runtime.set_all_config(config, secret_keys)


def run_program(
    stack: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    root: Path = PROJECT_ROOT,
    echo_nested: bool = False,
    stack_refs: Mapping[str, SynthResult] | None = None,
    sdk_stack_traces: bool = False,
    deploy_env: Mapping[str, str] | None = None,
    published: Mapping[str, list[str]] | None = None,
    workers: Mapping[str, SynthResult] | None = None,
) -> SynthResult:
    """Synthesize `stack`. `overrides` replace whole config keys (`gpu-platform:cluster`), as a
    `pulumi config set` would; a value of None removes the key. `sdk_stack_traces` lets the
    SDK capture each registration's stack trace instead of synth.sdk_fast (same result).

    Raises `components.config.ConfigError` for an invalid config (nothing registered),
    `StackFileError` for unreadable stack files; anything else is a bug. `stack_refs` answer
    StackReferences (referenced stack name -> that stack's synth, whose outputs they read).
    `published`: ECR repository -> tags the mocked registry holds (default: every tag the stack
    config names, `published_tags`). `deploy_env`: the deploy workflow's provenance variables
    (plan.DEPLOYED_BY_ENV, ...) the program sees; none by default, whatever this process's
    environment holds, so that synth output (and the golden hashes) never depends on who runs
    it. A fleet worker that runs its trainer home's trainer (`gpu-platform:fleet.trainerHome`)
    reads the home's stack: its synth is the one in `workers` (stack name -> synth), else it is
    synthesized first; the mocked registry then holds the home's trainer, replicated, in this
    region (`replica_tags`).
    """
    project, config, secret_keys = load_stack_config(stack, root)
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = _encode(value)
    region = config.get("aws:region", "us-east-1")
    registry = published_tags(config) if published is None else dict(published)
    refs = dict(stack_refs or {})
    home = trainer_home(config)
    if home is not None and home not in refs:
        name = home.rsplit("/", 1)[-1]
        refs[home] = (workers or {}).get(name) or run_program(name, workers=workers)
    if home is not None and published is None:
        for repository, tags in replica_tags(refs[home].outputs).items():
            registry.setdefault(repository, []).extend(tags)
    mocks = PlatformMocks(region, refs, registry)
    monitor = CapturingMonitor(mocks, echo_nested=echo_nested)
    _install_mock_runtime(
        mocks, monitor, project=project, stack=stack, config=config, secret_keys=secret_keys
    )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    main = str(root / "__main__.py")

    exports: dict[str, Any] = {}
    secrets: list[str] = []
    root_names: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> None:
        # The module namespace the program leaves: its `result` (ROOT_RESULT) is what it built.
        root_names.update(runpy.run_path(main, run_name="__main__"))
        _sync_await(_resolve_exports(exports, secrets))

    if not sdk_stack_traces:
        pulumi_resource._get_stack_trace = stack_trace
    try:
        with _deploy_environment(deploy_env):
            program()
    except BaseException as error:
        _retrieve_failure(error)
        raise
    finally:
        pulumi_resource._get_stack_trace = SDK_STACK_TRACE
    return _result(stack, monitor, root_names, exports, secrets)


def _retrieve_failure(error: BaseException) -> None:
    """After a failed run: the futures that failed with `error` — the exception the caller is
    about to get — retrieved; any future that failed with another exception reported now.

    A RunError raised inside an `apply` (a check that needs a deploy-time value, e.g. an ECR
    tag that is absent: components/ecr_tags.py) fails that Output's future and the future of
    every Output and resource input derived from it, all with the same exception object. The
    runtime re-raises the first it awaits and stops there (pulumi 3.272.0
    pulumi/runtime/stack.py `wait_for_rpcs`, `run_pulumi_func`): under `pulumi up` the language
    host then exits, here the process goes on, and asyncio logs each never-awaited future as
    "Future exception was never retrieved", with a traceback, whenever it is garbage-collected
    (after pytest's summary line, or in the middle of another test). Those are `error` itself,
    which the caller handles: asking each for its exception is what retrieving means. A future
    that failed with something else is a second failure: it goes to the event loop's exception
    handler at once — exactly what asyncio would have printed later — and is never dropped."""
    settings = pulumi.runtime.settings.SETTINGS
    if settings.rpc_manager.rpcs or settings.outputs:
        _retrieve(error)
    # Else nothing was in flight when the run stopped (a config error raised before the first
    # registration): no Output derived from the error exists, and the heap need not be walked.


def _retrieve(error: BaseException) -> None:
    """`_retrieve_failure`'s walk over the live futures."""
    loop = _ensure_event_loop()  # type: ignore[no-untyped-call]
    related = _chain(error)
    for obj in gc.get_objects():
        # type(), not isinstance(): the latter reads `__class__`, which some lazy module
        # attributes (torch's deprecated aliases) answer with a warning.
        if not issubclass(type(obj), asyncio.Future) or not obj.done() or obj.cancelled():
            continue
        # asyncio's own flag (the C and the Python Future both keep it): set from the moment a
        # future fails until its exception is asked for; never set again after that.
        if not getattr(obj, "_log_traceback", False):
            continue
        exception = obj.exception()
        if exception is None or related & _chain(exception):
            continue
        loop.call_exception_handler(
            {
                "message": "Future exception was never retrieved (beside the failure raised)",
                "exception": exception,
                "future": obj,
            }
        )


def _chain(error: BaseException) -> set[int]:
    """Ids of `error` and the exceptions it was raised from or while handling."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return seen


def _result(
    stack: str,
    monitor: CapturingMonitor,
    root_names: dict[str, Any],
    exports: dict[str, Any],
    secrets: list[str],
) -> SynthResult:
    """What a run left: the captured resources, the root's result (`components.roots`), exports."""
    from components.roots.results import FleetJobsRoot, FleetRoot, PlatformRoot, TeamJobsRoot

    # The one value the root leaves (its `result`: __main__.py, jobs/__main__.py,
    # fleet/__main__.py), typed: a root that leaves anything else is a bug, not a missing report.
    root = root_names.get(ROOT_RESULT)
    if not isinstance(root, PlatformRoot | TeamJobsRoot | FleetJobsRoot | FleetRoot):
        raise TypeError(
            f"{stack}: the composition root left {ROOT_RESULT} = {type(root).__name__}, "
            "not a components.roots.results.RootResult"
        )
    facts = root.facts if isinstance(root, PlatformRoot | TeamJobsRoot) else None
    return SynthResult(
        stack=stack,
        resources=sorted(monitor.captured, key=lambda r: r.urn),
        root=root,
        # What the program built and judged: for a job stack (jobs/) the platform's config
        # with the stack's jobs.
        config=facts.cfg if facts is not None else None,
        facts=facts,
        judgement=root.judgement if not isinstance(root, FleetRoot) else None,
        plans=root.plans if not isinstance(root, FleetRoot) else None,
        fleet=root.fleet if isinstance(root, FleetRoot) else None,
        fleet_jobs=root.fleet_jobs if isinstance(root, FleetJobsRoot) else None,
        outputs=exports,
        secret_outputs=secrets,
    )


def _plain_json(value: Any) -> Any:
    """A resolved output value → JSON value: secrets stubbed, unknowns marked, integral floats
    as ints (what a StackReference reads; the wire inputs go through `_plain`)."""
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SECRET_SIG:
            return SECRET_PLACEHOLDER
        if sig == _RESOURCE_SIG:
            return value.get("urn", "")
        return {key: _plain_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain_json(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == _UNKNOWN:
        return "[unknown]"
    return value


async def _resolve_exports(into: dict[str, Any], secrets: list[str]) -> None:
    # Under the mocks the root stack never sends its exports to the monitor: read them from the
    # Stack resource (private SDK state of the pinned SDK, like `settings.ROOT` above).
    root = pulumi.runtime.settings.get_root_resource()
    for name, value in sorted(getattr(root, "outputs", {}).items()):
        out = pulumi.Output.from_input(value)
        if await out.is_secret():
            secrets.append(name)
        into[name] = _plain_json(await out.future())

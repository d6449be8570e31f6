"""Tenancy rules for team job stacks (jobs/): everything a job stack declares lives in its team's
namespace.

The rule is inert on the platform's stacks (they create namespaces, CRDs and cluster roles on
purpose); a job stack's pack config names its team's namespace (jobs/policies/config.<stack>.json,
the file its CI preview passes as `policyPackConfigs`) and then every Kubernetes object must be
namespaced and in it, and no cloud resource may be declared at all. The cluster enforces the same
through the team identity's namespace-scoped access entry
(components/platform/tenancy/team_deploy.py); this rule says so at preview, with the object's name,
before `pulumi up` half-applies a stack.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pulumi_policy import PolicyResource

from policies.rules.common import HIGH, MANDATORY, Config, dig, stack_rule

#: Resource types a job stack may declare besides namespaced Kubernetes objects: its own
#: component resources and the Kubernetes provider built from the platform's kubeconfig.
_ALLOWED_PREFIXES = ("gpu-platform:", "pulumi:providers:kubernetes")


def _check_confined(
    resources: Sequence[PolicyResource], config: Config
) -> Iterator[tuple[str, str | None]]:
    namespace = config["teamNamespace"]
    if not namespace:
        return
    for resource in resources:
        typ = resource.resource_type
        if typ.startswith(_ALLOWED_PREFIXES):
            continue
        if not typ.startswith("kubernetes:"):
            yield f"{typ} is not a Kubernetes object in namespace {namespace}", resource.urn
            continue
        found = dig(resource.props, "metadata", "namespace")
        if not found:
            yield f"{typ} is cluster-scoped or has no namespace (want {namespace})", resource.urn
        elif found != namespace:
            yield f"{typ} is in namespace {found} (want {namespace})", resource.urn


POLICIES = [
    stack_rule(
        name="gpu-platform-job-stack-confined",
        description="A team's job stack declares only Kubernetes objects in its team's namespace: "
        "nothing cluster-scoped, nothing in another namespace, no cloud resources.",
        check=_check_confined,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set metadata.namespace to the team's namespace; cluster-scoped objects and "
        "cloud resources belong in the platform stack.",
        config={
            "teamNamespace": {
                "type": "string",
                "default": "",
                "description": "The team namespace of a job stack; empty on platform stacks.",
            }
        },
    ),
]

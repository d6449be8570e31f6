"""The real-engine tier's own logic, without the engines (fast tier): the v1beta2 -> v1beta1
converter, the deploy walk's order, the node shapes, the launcher stand-ins, the Kueue webhook
selection and the tier's plan. The tier itself: tests/e2e (`pytest -m e2e`)."""

from __future__ import annotations

import lzma
from typing import Any

import pytest

from components import catalog
from synth.deploy_plan import HELM_RELEASE
from synth.engines import assets, deploy, kueue, kueue_v1beta1, nodes, tier, trainjob
from synth.engines.client import Resource
from synth.harness import SynthResult
from synth.output import manifests

# --- converter ----------------------------------------------------------------------------------


def test_cluster_queue_cohort_and_fungibility_take_their_v1beta1_names() -> None:
    queue = {
        "apiVersion": kueue_v1beta1.V1BETA2,
        "kind": "ClusterQueue",
        "metadata": {"name": "t"},
        "spec": {
            "cohortName": "c",
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "MayStopSearch",
            },
        },
    }
    out = kueue_v1beta1.convert_object(queue)
    assert out["apiVersion"] == kueue_v1beta1.V1BETA1
    assert out["spec"]["cohort"] == "c" and "cohortName" not in out["spec"]
    assert out["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "Borrow",
        "whenCanPreempt": "Preempt",
    }
    assert queue["spec"]["cohortName"] == "c"  # the input is not touched


def test_multikueue_cluster_kubeconfig_moves_out_of_cluster_source() -> None:
    out = kueue_v1beta1.convert_object(
        {
            "apiVersion": kueue_v1beta1.V1BETA2,
            "kind": "MultiKueueCluster",
            "metadata": {"name": "w"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "w", "locationType": "Secret"}}},
        }
    )
    assert out["spec"] == {"kubeConfig": {"location": "w", "locationType": "Secret"}}


def test_other_objects_pass_unchanged() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    assert kueue_v1beta1.convert_object(job) == job


def test_configuration_turns_presence_into_enable_and_drops_what_the_build_lacks() -> None:
    out = kueue_v1beta1.convert_configuration(
        {
            "apiVersion": kueue_v1beta1.CONFIG_V1BETA2,
            "waitForPodsReady": {"timeout": "19m", "blockAdmission": False},
            "integrations": {"frameworks": ["batch/job", "trainer.kubeflow.org/trainjob"]},
        }
    )
    assert out["apiVersion"] == kueue_v1beta1.CONFIG_V1BETA1
    assert out["waitForPodsReady"] == {"enable": True, "timeout": "19m", "blockAdmission": False}
    assert out["integrations"]["frameworks"] == ["batch/job"]


def test_every_translation_names_its_upstream_source() -> None:
    assert kueue_v1beta1.TRANSLATIONS
    assert all(t.source and t.becomes for t in kueue_v1beta1.TRANSLATIONS)


def test_the_local_configuration_runs_one_instance_on_its_own_ports(tmp_path: Any) -> None:
    config = kueue.local_configuration(
        {"apiVersion": kueue_v1beta1.CONFIG_V1BETA2, "leaderElection": {"leaderElect": True}},
        namespace="kueue-system",
        cert_dir=tmp_path,
        ports={"health": 1, "metrics": 2, "webhook": 3},
        feature_gates={"MultiKueueBatchJobWithManagedBy": True},
    )
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["webhook"] == {"port": 3, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert config["featureGates"] == {"MultiKueueBatchJobWithManagedBy": True}
    assert config["internalCertManagement"] == {"enable": False}


# --- webhooks -------------------------------------------------------------------------------------


def _hook(name: str, group: str, resource: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"service": {"name": "s", "namespace": "n", "path": f"/{name}"}},
        "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "resources": [resource]}],
    }


def test_only_hooks_of_kueues_kinds_and_enabled_served_frameworks_are_registered() -> None:
    manifest = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _hook("mjob", "batch", "jobs"),
            _hook("mpod", "", "pods"),  # pod integration off: no handler would answer
            _hook("mcq", "kueue.x-k8s.io", "clusterqueues"),
            _hook("mjobset", "jobset.x-k8s.io", "jobsets"),  # enabled, CRD not served
        ],
    }
    out = kueue.webhook_configurations(
        [manifest],
        served=lambda group, version, resource: resource != "jobsets",
        ca_pem=b"ca",
        port=9443,
        namespace="kueue-system",
        frameworks=["batch/job", "jobset.x-k8s.io/jobset"],
    )
    assert [h["name"] for h in out[0]["webhooks"]] == ["mjob", "mcq"]
    job, queue = out[0]["webhooks"]
    assert job["clientConfig"]["url"] == "https://127.0.0.1:9443/mjob"
    # The job hook skips kube-system and Kueue's namespace, as the v0.19.2 chart's does.
    assert job["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "kube-system",
        "kueue-system",
    ]
    assert "namespaceSelector" not in queue


# --- the deploy walk ------------------------------------------------------------------------------


def test_namespaces_crds_and_releases_go_last_in_their_wave(dev: SynthResult) -> None:
    names = [deploy._order(r) for r in dev.resources if r.type.endswith(":Namespace")]
    assert names and all(rank == 1 for rank, _ in names)
    release = next(r for r in dev.resources if r.type == HELM_RELEASE)
    assert deploy._order(release)[0] == 3
    job = next(r for r in dev.resources if r.type == "kubernetes:batch/v1:Job")
    assert deploy._order(job)[0] == 0


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_custom_resource_has_its_crd_from_a_release_the_stack_installs(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    library = deploy.CrdLibrary()
    charts = {deploy.chart_name(r) for r in result.of_type(HELM_RELEASE)}
    served = {
        (crd["spec"]["group"], crd["spec"]["names"]["kind"])
        for chart in charts
        for crd in library.chart(chart)
    }
    served |= {
        (o["spec"]["group"], o["spec"]["names"]["kind"])
        for o in manifests(result)
        if o["kind"] == "CustomResourceDefinition"
    }
    custom = {
        (o["apiVersion"].split("/")[0], o["kind"])
        for o in manifests(result)
        if "." in o["apiVersion"].split("/")[0] and not o["apiVersion"].endswith(".k8s.io/v1")
    }
    assert custom and custom <= served, custom - served


# --- nodes ----------------------------------------------------------------------------------------


def test_sources_are_read_from_the_rendered_pools_and_groups(dev: SynthResult) -> None:
    found = {s.name: s for s in nodes.sources(dev, "us-east-1", manifests(dev))}
    assert {"system", "ng-l4-spot", "kp-a10g-spot", "kp-a10g-od"} <= set(found)
    group = found["ng-l4-spot"]
    assert group.kind == "managed" and group.autoscaled and group.max_size == 2
    assert group.instance_types[0] == "g6.xlarge"
    assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"} in group.taints
    pool = found["kp-a10g-spot"]
    assert pool.kind == "karpenter" and pool.gpu_limit is not None and pool.gpu_limit > 0
    assert pool.system_labels["karpenter.sh/capacity-type"] == "spot"


def test_a_managed_node_has_no_karpenter_labels_and_a_karpenter_node_has_them(
    dev: SynthResult,
) -> None:
    found = {s.name: s for s in nodes.sources(dev, "us-east-1", manifests(dev))}
    fleet = nodes.Fleet(client=None, shapes=nodes.load_shapes(), region="us-east-1")  # type: ignore[arg-type]
    managed = fleet.node_labels(found["ng-l4-spot"], "g6.xlarge", "us-east-1a")
    karpenter = fleet.node_labels(found["kp-a10g-spot"], "g5.xlarge", "us-east-1b")
    assert not any(k.startswith("karpenter.") for k in managed)
    assert managed["eks.amazonaws.com/nodegroup"] == "gpu-dev-ng-l4-spot"
    assert karpenter["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert karpenter["topology.kubernetes.io/zone"] == "us-east-1b"


def test_node_allocatable_is_karpenters_not_ours() -> None:
    shapes = nodes.load_shapes()
    assert set(shapes) == set(catalog.INSTANCE_TYPES)
    p5 = shapes["p5.48xlarge"].allocatable
    assert p5["nvidia.com/gpu"] == "8" and p5["vpc.amazonaws.com/efa"] == "32"
    assert nodes.fits({"cpu": 191.45, "nvidia.com/gpu": 8}, p5)
    assert not nodes.fits({"cpu": 191.46}, p5)


def test_pod_matching_reads_selectors_affinity_and_taints() -> None:
    spec = {
        "nodeSelector": {"a": "1"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "b", "operator": "In", "values": ["x"]}]}
                    ]
                }
            }
        },
        "tolerations": [{"key": "t", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert nodes.selects(spec, {"a": "1", "b": "x"})
    assert not nodes.selects(spec, {"a": "1", "b": "y"})
    assert not nodes.selects(spec, {"b": "x"})
    assert nodes.tolerated(spec, [{"key": "t", "value": "v", "effect": "NoSchedule"}])
    assert not nodes.tolerated(spec, [{"key": "u", "value": "v", "effect": "NoSchedule"}])
    requests = nodes.pod_requests(
        {"containers": [{"resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}}]}
    )
    assert requests == {"cpu": 0.5, "memory": 2**30}


# --- stand-ins ------------------------------------------------------------------------------------


class _Runtimes:
    """What as_job reads of a cluster: the runtimes the stack renders."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self._by_name = {
            o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterTrainingRuntime"
        }

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Any:
        return self._by_name[name]


def test_a_trainjob_stands_in_as_the_indexed_job_of_its_node_replicated_job(
    dev: SynthResult,
) -> None:
    objects = manifests(dev)
    train = next(o for o in objects if o["kind"] == "TrainJob")
    job = trainjob.as_job(_Runtimes(objects), train)  # type: ignore[arg-type]
    spec = job["spec"]
    nodes_ = train["spec"]["trainer"]["numNodes"]
    assert spec["parallelism"] == spec["completions"] == nodes_ and spec["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "applied"
    pod = spec["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "node")
    assert container["resources"] == train["spec"]["trainer"]["resourcesPerNode"]
    assert container["image"] == train["spec"]["trainer"]["image"]
    # Merged by name from the runtime patch: the volumes, the mounts, the tolerations.
    assert {"dshm", "scratch", "checkpoints"} <= {v["name"] for v in pod["volumes"]}
    assert pod["tolerations"]
    # Kueue v0.19.2 reads the TrainJob through Trainer v2.2.1's types: a grace period in the
    # patch is gone, only the runtime's own (if any) reaches the pods.
    ref = train["spec"]["runtimeRef"]["name"]
    runtime = next(o for o in objects if o["metadata"]["name"] == ref)
    runtime_pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"]
    assert pod.get("terminationGracePeriodSeconds") == runtime_pod.get(
        "terminationGracePeriodSeconds"
    )


def test_a_patch_field_trainer_v2_2_1_lacks_never_reaches_the_stand_in() -> None:
    patch = {
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "terminationGracePeriodSeconds": 120,
                                        "nodeSelector": {"a": "b"},
                                    }
                                }
                            }
                        },
                    }
                ]
            }
        }
    }
    kept = trainjob._v221_patch(patch)
    pod = kept["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod == {"nodeSelector": {"a": "b"}}
    assert "terminationGracePeriodSeconds" not in catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS


def test_strategic_merge_merges_named_lists_and_replaces_the_others() -> None:
    base = {"containers": [{"name": "a", "image": "x"}], "tolerations": [{"key": "t"}]}
    patch = {
        "containers": [{"name": "a", "args": ["y"]}, {"name": "b"}],
        "tolerations": [{"key": "u"}],
    }
    out = trainjob.strategic_merge(base, patch)
    assert out["containers"] == [{"name": "a", "image": "x", "args": ["y"]}, {"name": "b"}]
    assert out["tolerations"] == [{"key": "u"}]


# --- assets and the plan --------------------------------------------------------------------------


def test_missing_assets_say_where_they_were_looked_for(tmp_path: Any) -> None:
    with pytest.raises(assets.MissingAssetsError, match=str(tmp_path / "nowhere")):
        assets.find(tmp_path / "nowhere")
    (tmp_path / "bin").mkdir()
    with pytest.raises(assets.MissingAssetsError, match="no etcd"):
        assets.find(tmp_path)


def test_packed_binaries_are_unpacked_once_into_the_cache(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "bin").mkdir()
    for name in assets.BINARIES:
        (tmp_path / "bin" / f"{name}.xz").write_bytes(lzma.compress(b"#!/bin/sh\n"))
    crds = tmp_path / "kueue-v0.13.1" / "crds"
    crds.mkdir(parents=True)
    (tmp_path / "kueue-v0.13.1" / "webhook").mkdir()
    (tmp_path / "kueue-v0.13.1" / "webhook" / "manifests.yaml").write_text("")
    found = assets.find(tmp_path)
    assert found.kueue_version == "v0.13.1"
    unpacked = found["etcd"]
    assert unpacked.read_bytes() == b"#!/bin/sh\n" and unpacked.stat().st_mode & 0o111
    assert assets.find(tmp_path)["etcd"] == unpacked


def test_the_plan_covers_every_stack_once() -> None:
    groups = tier.plan()
    platforms = {g.stack for g in groups if g.kind == "platform"}
    fleets = [g for g in groups if g.kind == "fleet"]
    assert platforms == {"dev", "prod"}
    assert [(g.stack, g.workers) for g in fleets] == [("prod", ("prod-use1", "prod-usw2"))]
    jobs = sorted(j for g in groups for j in g.job_stacks)
    assert jobs == ["pretrain-fleet", "pretrain-prod", "research-dev", "research-prod"]


def test_client_paths_follow_discovery() -> None:
    from synth.engines.client import Client

    client = Client.__new__(Client)
    client._resources = {("batch/v1", "Job"): Resource("batch/v1", "jobs", True)}  # type: ignore[attr-defined]
    assert client.path("batch/v1", "Job", "j", "ns") == "/apis/batch/v1/namespaces/ns/jobs/j"
    client._resources[("v1", "Node")] = Resource("v1", "nodes", False)  # type: ignore[attr-defined]
    assert client.path("v1", "Node", "n", "ns") == "/api/v1/nodes/n"


# --- network topology (#38) ---------------------------------------------------------------------


def test_a_topology_becomes_the_v1alpha1_the_local_build_serves() -> None:
    rendered = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "l40s-x1"},
        "spec": {
            "levels": [{"nodeLabel": catalog.ZONE_LABEL}, {"nodeLabel": "kubernetes.io/hostname"}]
        },
    }
    local = kueue_v1beta1.convert_object(rendered)
    assert local["apiVersion"] == "kueue.x-k8s.io/v1alpha1"
    assert local["spec"] == rendered["spec"]
    flavor = {**rendered, "kind": "ResourceFlavor", "spec": {"topologyName": "l40s-x1"}}
    assert kueue_v1beta1.convert_object(flavor)["apiVersion"] == "kueue.x-k8s.io/v1beta1"


def test_the_tas_gate_is_on_exactly_when_a_stack_renders_a_topology(dev: SynthResult) -> None:
    assert kueue_v1beta1.feature_gates(manifests(dev)) == {}
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {}}
    assert kueue_v1beta1.feature_gates([*manifests(dev), topology]) == {
        "TopologyAwareScheduling": True
    }


def test_the_simulated_network_is_deterministic_and_spreads_a_zones_nodes() -> None:
    layout = nodes.NetworkLayout()
    assert layout.blocks(3) == 4 and layout.blocks(4) == 8
    first = layout.labels("us-east-1", "us-east-1a", 3, 0)
    assert first == layout.labels("us-east-1", "us-east-1a", 3, 0), "stable from run to run"
    assert set(first) == {catalog.network_node_label(n) for n in (1, 2, 3)}
    assert all(len(v) == 20 and v.startswith("nn-") for v in first.values())
    bottoms = [
        layout.labels("us-east-1", "us-east-1a", 3, n)[catalog.network_node_label(3)]
        for n in range(6)
    ]
    assert bottoms[:4] == sorted(set(bottoms[:4]), key=bottoms.index) and bottoms[4:] == bottoms[:2]
    spines = [
        layout.labels("us-east-1", "us-east-1a", 3, n)[catalog.network_node_label(2)]
        for n in range(4)
    ]
    assert spines[0] == spines[1] != spines[2] == spines[3]
    other_zone = layout.labels("us-east-1", "us-east-1b", 3, 0)
    assert not set(other_zone.values()) & set(first.values())


def test_only_nodes_of_types_with_a_topology_get_network_labels(dev: SynthResult) -> None:
    class Recorder:
        def create(self, obj: dict[str, Any]) -> None:
            self.made = obj

        def merge_patch(self, *args: Any, **kwargs: Any) -> None:
            return None

    found = {s.name: s for s in nodes.sources(dev, "us-east-1", manifests(dev))}
    client = Recorder()
    fleet = nodes.Fleet(client=client, shapes=nodes.load_shapes(), region="us-east-1")  # type: ignore[arg-type]
    fleet.create(found["ng-l4-spot"], "g6.xlarge", "us-east-1a", "test")
    assert not any(
        k.startswith(catalog.NETWORK_NODE_LABEL_PREFIX) for k in client.made["metadata"]["labels"]
    )
    fleet.create(found["ng-l4-spot"], "g6e.xlarge", "us-east-1a", "test")
    labels = client.made["metadata"]["labels"]
    assert labels[catalog.network_node_label(3)].startswith("nn-")
    assert fleet.blocks[client.made["metadata"]["name"]] == labels[catalog.network_node_label(3)]

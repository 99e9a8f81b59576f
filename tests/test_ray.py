"""Training fleets scheduled by Ray (KubeRay on the blueprint's EKS cluster): the rendered RayCluster and RayJob
pass KubeRay v1.7.0's own CRD schemas (tests/crd/, converted from the tag's CRDs by tests/tools/kuberay_crds.py)
and the Namespace kubernetes-validate --strict; the sizes fleetform derives follow Ray's source; the cluster rules
admit the head and the workers; the Pulumi program installs the pinned KubeRay chart with values keys its
values.yaml has (tests/data/kuberay-operator-1.7.0-values.yaml) before the RayCluster that needs its CRD.

What only a real cluster would prove (not run here): that the operator starts the pods, that Ray sees 8 GPUs and
the object store in each worker, that NCCL connects the workers, and that a RayJob's Ray Train run finishes."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, check_text as _check, checked_model as _model, require, rule_findings as _rules, \
    rule_messages as _run
from fleetform.cluster import addons_data
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render

EXAMPLE = ROOT / "blueprints/ray-train.yaml"
TEXT = EXAMPLE.read_text()
EFA = TEXT.replace("    interconnect:\n      fabric: tcp\n", "")  # g6e.48xlarge has EFA: the default fabric
CRDS = {kind: json.loads((ROOT / f"tests/crd/ray.io_v1_{kind}.json").read_text()) for kind in ("RayCluster", "RayJob")}
RELEASE = "kubernetes:helm.sh/v3:Release"


def _crd_errors(doc: dict) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(CRDS[doc["kind"]]).iter_errors(doc)]


def _cluster(files) -> dict:
    return yaml.safe_load(files["tune/k8s/raycluster.yaml"])


# --- shape: the CRDs of the pinned KubeRay, strict Kubernetes ------------------------------------------------


def test_rendered_objects_pass_kuberay_crds_and_strict_validation(tmp_path):
    model = _model(TEXT, tmp_path)
    files = render(model)
    assert sorted(n for n in files if n.startswith("tune/")) == [
        "tune/k8s/kustomization.yaml", "tune/k8s/namespace.yaml", "tune/k8s/networkpolicy.yaml",
        "tune/k8s/raycluster.yaml", "tune/nccl.env", "tune/ray/rayjob.yaml"]
    for name in ("tune/k8s/raycluster.yaml", "tune/ray/rayjob.yaml"):
        doc = yaml.safe_load(files[name])
        assert doc["apiVersion"] == "ray.io/v1" and _crd_errors(doc) == [], name
    for name in ("tune/k8s/namespace.yaml", "tune/k8s/networkpolicy.yaml"):
        kubernetes_validate.validate(yaml.safe_load(files[name]), "1.35.0", strict=True)


def test_only_the_fleets_pods_and_the_operator_reach_the_ray_pods(tmp_path):
    """Whoever reaches a Ray head's dashboard or GCS runs code on every worker: ingress from the fleet's own
    namespace and from the KubeRay operator's, which submits RayJobs to the dashboard (dashboardclient)."""
    files = render(_model(TEXT, tmp_path))
    policy = yaml.safe_load(files["tune/k8s/networkpolicy.yaml"])
    assert policy["metadata"]["namespace"] == "ray" and policy["spec"]["podSelector"] == {}
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {}},
                            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-operator"}}}]
    assert addons_data()["charts"]["kuberay-operator"]["namespace"] == "kuberay-operator"


def test_the_crd_schemas_refuse_what_the_api_server_would(tmp_path):
    """Negative controls: the converted schemas are closed, typed and keep the CRD's enums."""
    cluster = _cluster(render(_model(TEXT, tmp_path)))
    misspelt = json.loads(json.dumps(cluster))
    misspelt["spec"]["enableInTreeAutoscalling"] = True
    assert any("enableInTreeAutoscalling" in e for e in _crd_errors(misspelt))
    number = json.loads(json.dumps(cluster))
    number["spec"]["workerGroupSpecs"][0]["rayStartParams"]["num-gpus"] = 8  # rayStartParams values are strings
    assert _crd_errors(number)
    version = json.loads(json.dumps(cluster))
    version["spec"]["autoscalerOptions"]["version"] = "v3"  # enum v1 | v2
    assert _crd_errors(version)
    pod = json.loads(json.dumps(cluster))
    pod["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resource"] = {}  # a PodSpec typo
    assert _crd_errors(pod)


def test_kustomize_builds_the_fleet_folder(tmp_path):
    kubectl = require("kubectl", "kubernetes-client")
    files = render(_model(TEXT, tmp_path))
    for name, data in files.items():
        (tmp_path / "out" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / name).write_bytes(data)
    built = subprocess.run([kubectl, "kustomize", str(tmp_path / "out/tune/k8s")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert sorted(d["kind"] for d in yaml.safe_load_all(built.stdout)) == ["Namespace", "NetworkPolicy", "RayCluster"]


# --- what fleetform derives ---------------------------------------------------------------------------------


def test_workers_take_a_whole_node_and_scale_between_the_fleets_min_and_max(tmp_path):
    cluster = _cluster(render(_model(TEXT, tmp_path)))
    spec = cluster["spec"]
    assert spec["enableInTreeAutoscaling"] is True and spec["autoscalerOptions"]["version"] == "v2"
    assert spec["upgradeStrategy"] == {"type": "Recreate"}  # a changed spec reaches the running pods
    (group,) = spec["workerGroupSpecs"]
    # no replicas: KubeRay starts minReplicas and the autoscaler owns the count; a replicas that `pulumi up`
    # re-applies while the autoscaler has scaled up is a server-side apply conflict (pulumi-kubernetes
    # patchForce is off unless asked) or a reset of the count (KubeRay PR #1443 made the field optional for this)
    assert "replicas" not in group and (group["minReplicas"], group["maxReplicas"]) == (1, 4)
    assert group["rayStartParams"]["num-gpus"] == "8"
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == worker["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert group["template"]["spec"]["nodeSelector"] == {"fleetform.dev/fleet": "tune"}
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # the head runs no tasks
    assert head["template"]["spec"]["nodeSelector"] == {"fleetform.dev/node-group": "system"}
    assert "nvidia.com/gpu" not in json.dumps(head)
    fixed = _cluster(render(_model(TEXT.replace("nodes: {min: 1, max: 4}", "nodes: 3"), tmp_path)))
    (group,) = fixed["spec"]["workerGroupSpecs"]
    assert fixed["spec"]["enableInTreeAutoscaling"] is False and "autoscalerOptions" not in fixed["spec"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (3, 3, 3)


@pytest.mark.parametrize("instance, memory, object_store, shm", [
    # g6e.48xlarge: 1,536 GiB; 90% = 1,382 GiB; 30% of it is above Ray's 200 GB cap
    ("g6e.48xlarge", "1382Gi", 200 * 10**9, "197Gi"),
    # g6e.12xlarge: 384 GiB; 90% = 345 GiB; 30% = 111,132,278,784 bytes (floor), /dev/shm >= that / 0.95
    ("g6e.12xlarge", "345Gi", 111132278784, "109Gi"),
])
def test_object_store_and_shm_follow_rays_defaults(instance, memory, object_store, shm, tmp_path):
    """python/ray/_private/ray_constants.py: DEFAULT_OBJECT_STORE_MEMORY_PROPORTION = 0.3,
    DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES = 200e9; python/ray/_private/utils.py resolve_object_store_memory caps
    the object store at 95% of /dev/shm (get_shared_memory_bytes() * 0.95)."""
    text = TEXT.replace("instance_type: g6e.48xlarge", f"instance_type: {instance}")
    group = _cluster(render(_model(text, tmp_path)))["spec"]["workerGroupSpecs"][0]
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["memory"] == memory
    assert group["rayStartParams"]["object-store-memory"] == str(object_store)
    (volume,) = [v for v in group["template"]["spec"]["volumes"] if v["name"] == "shm"]
    assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": shm}
    assert object_store <= int(shm[:-2]) * 2**30 * 0.95 < object_store + 2**30


def test_workers_carry_the_fleets_nccl_env_and_mount_its_file_system(tmp_path):
    files = render(_model(TEXT, tmp_path))
    group = _cluster(files)["spec"]["workerGroupSpecs"][0]
    (worker,) = group["template"]["spec"]["containers"]
    env_file = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in files["tune/nccl.env"].decode().splitlines()
                if line and not line.startswith("#")}
    assert {e["name"]: e["value"] for e in worker["env"]} == {k.removeprefix("export "): v for k, v in env_file.items()}
    assert {"name": "fsx-scratch", "mountPath": "/fsx"} in worker["volumeMounts"]
    assert {"name": "fsx-scratch", "persistentVolumeClaim": {"claimName": "scratch"}} in group["template"]["spec"]["volumes"]


def test_the_rayjob_runs_on_the_fleets_raycluster(tmp_path):
    job = yaml.safe_load(render(_model(TEXT, tmp_path))["tune/ray/rayjob.yaml"])
    # the key names the RayCluster to submit to (kuberay v1.7.0 rayjob_controller.go, utils.RayJobClusterSelectorKey)
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": "tune"}
    assert "rayClusterSpec" not in job["spec"] and job["metadata"]["namespace"] == "ray"
    assert job["metadata"]["name"] == "tune-train"  # the API server's checks of a name (fuzz_oracles.check_object)
    assert job["spec"]["entrypoint"].startswith("python ")
    # Ray runs an entrypoint that asks for no resources on the head (ray-project/ray#42436), here a 4Gi CPU pod
    # with num-cpus 0: one CPU puts the user's driver on a worker
    assert job["spec"]["entrypointNumCpus"] == 1


# --- rules ---------------------------------------------------------------------------------------------------


def test_ray_version_without_a_pinned_image_is_an_error(tmp_path):
    assert _rules(TEXT, tmp_path, "ray-version") == []
    found = _rules(TEXT.replace('ray_version: "2.52.0"', 'ray_version: "2.9.3"'), tmp_path, "ray-version")
    assert found == ["Ray 2.9.3 has no image fleetform pins for KubeRay 1.7.0"]


def test_efa_guard_catches_a_worker_without_its_nodes_efa_interfaces(tmp_path):
    """ray-efa guards fleetform's derivation: on EFA each worker asks for every EFA interface of its node."""
    model = _model(EFA, tmp_path)
    assert _run("ray-efa", model) == [] and _rules(EFA, tmp_path, "ray-efa") == []
    fleet = model.fleets[0]
    for bad in (replace(fleet.ray, efa=0, hugepages=None), replace(fleet.ray, efa=fleet.instance.max_efa - 1),
                replace(fleet.ray, hugepages=None)):
        assert len(_run("ray-efa", replace(model, fleets=(replace(fleet, ray=bad),)))) == 1, bad
    assert _run("ray-efa", _model(TEXT, tmp_path)) == []  # TCP: no EFA asked, none expected


def test_efa_workers_ask_for_their_nodes_efa_interfaces_and_huge_pages(tmp_path):
    """On EFA (g6e.48xlarge's default fabric) every worker pod asks for the node's EFA interfaces, as many as the
    catalog gives the instance (vpc.amazonaws.com/efa: one per interface the EFA device plugin finds, EKS User
    Guide "Run machine learning training on Amazon EKS with Elastic Fabric Adapter"), and the 2 MiB huge pages
    that guide's pods ask for; the node group offers them, the cluster installs the EFA device plugin, and the
    cluster rules admit the worker. The RayCluster still passes KubeRay's CRD schema."""
    model = _model(EFA, tmp_path)
    fleet = model.fleets[0]
    efa = fleet.instance.max_efa
    assert efa > 0
    files = render(model)
    doc = _cluster(files)
    assert _crd_errors(doc) == []
    (worker,) = doc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    for side in ("requests", "limits"):
        assert worker["resources"][side]["vpc.amazonaws.com/efa"] == efa
        assert worker["resources"][side]["hugepages-2Mi"] == "5120Mi"
    group = next(g for g in model.cluster.node_groups if g.fleet == "tune")
    assert dict(group.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": efa}
    work = next(w for w in model.cluster.workloads if w.name == "tune/tune-gpu")
    assert dict(work.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": efa}
    assert "aws-efa-k8s-device-plugin" in {r.name for r in model.cluster.releases}
    assert _run("cluster-admission", model) == []
    more = tuple(replace(w, devices=(("nvidia.com/gpu", 8), ("vpc.amazonaws.com/efa", efa + 1)))
                 if w is work else w for w in model.cluster.workloads)
    assert _run("cluster-admission", replace(model, cluster=replace(model.cluster, workloads=more)))
    # TCP: no EFA asked for, no device plugin installed
    tcp = _model(TEXT, tmp_path)
    (plain,) = _cluster(render(tcp))["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert "vpc.amazonaws.com/efa" not in plain["resources"]["limits"]
    assert "aws-efa-k8s-device-plugin" not in {r.name for r in tcp.cluster.releases}


def test_efa_workers_get_the_nccl_env_of_the_same_fleet_under_slurm(tmp_path):
    """The same EFA fleet under Slurm and under Ray: the Ray workers' env is what the Slurm nodes' nccl.env sets
    as bash reads it (`set -a; . nccl.env`), the aws-ofi-nccl/libfabric variables a blueprint sets included."""
    from test_kueue import _sourced

    nccl = "    nccl: {debug: INFO, env: {FI_EFA_USE_DEVICE_RDMA: 1, NCCL_BUFFSIZE: 8388608}}\n"
    ray_text = EFA.replace("    storage: [scratch, checkpoints]\n", "    storage: [scratch, checkpoints]\n" + nccl)
    slurm_text = ray_text.replace("""    scheduler:
      type: ray
      version: "1.35"
      namespace: ray
      ray_version: "2.52.0"
""", """    scheduler:
      type: slurm
      partitions: [{name: gpu, default: true}]
""")
    assert slurm_text != ray_text
    (tmp_path / "ray").mkdir()
    (tmp_path / "slurm").mkdir()
    ray_files = render(_model(ray_text, tmp_path / "ray"))
    slurm_files = render(_model(slurm_text, tmp_path / "slurm"))
    assert "tune/slurm/slurm.conf" in slurm_files
    env_file = tmp_path / "nccl.env"
    env_file.write_bytes(slurm_files["tune/nccl.env"])
    sourced = _sourced(env_file)
    assert sourced["FI_EFA_USE_DEVICE_RDMA"] == "1" and sourced["NCCL_DEBUG"] == "INFO"
    (worker,) = _cluster(ray_files)["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert {e["name"]: e["value"] for e in worker["env"]} == sourced


def test_the_plan_gives_efa_ray_nodes_interfaces_and_a_placement_group(tmp_path):
    """Under Pulumi's mocks the Ray node group's launch template has the Slurm nodes' EFA card layout (card 0 an
    interface and an efa-only device, every other card efa-only) with the security groups on each interface, and
    a cluster placement group, as a Kueue fleet's (tests/test_kueue.py); the EFA device plugin is a release the
    RayCluster waits for."""
    model = _model(EFA, tmp_path)
    resources = record(model, render(model))
    by_name = {r["name"]: r for r in resources}
    template = by_name["tune-nodes"]["inputs"]
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == model.fleets[0].instance.network_cards + 1
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in interfaces[:3]] == [
        (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert all(len(i["securityGroups"]) == 2 and "subnetId" not in i for i in interfaces)
    assert "vpcSecurityGroupIds" not in template
    assert by_name["tune-placement"]["inputs"]["strategy"] == "cluster"
    assert "tune-placement" in by_name["tune-nodes"]["depends_on"]
    (raycluster,) = [r for r in resources if r["type"] == "kubernetes:ray.io/v1:RayCluster"]
    assert "eks-aws-efa-k8s-device-plugin" in raycluster["depends_on"]
    tcp = _model(TEXT, tmp_path)
    plain = {r["name"]: r for r in record(tcp, render(tcp))}
    assert "networkInterfaces" not in plain["tune-nodes"]["inputs"]
    # nor a placement group: a TCP fleet's running nodes keep their launch template
    assert "tune-placement" not in plain and "placement" not in plain["tune-nodes"]["inputs"]


def test_ray_is_a_training_scheduler_on_aws_only(tmp_path):
    assert _rules(TEXT, tmp_path, "role-scheduler") == []
    onprem = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {name: a, version: 1.0.0}
provider: {cloud: onprem, site: lab}
fleets:
  - name: train
    role: training
    hosts: gpu-[01-02]
    hardware: {gpu: A100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 32, threads_per_core: 2, memory_gib: 1024}
    interconnect: {fabric: tcp}
    scheduler: {type: ray, version: "1.35"}
"""
    assert len(_rules(onprem, tmp_path, "ray-placement")) == 1
    serving = TEXT.replace("role: training", "role: inference")
    assert any("not ray" in m for m in _rules(serving, tmp_path, "role-scheduler"))


def test_the_schema_keeps_slurm_and_kubernetes_fields_out_of_a_ray_scheduler(tmp_path):
    bad = TEXT.replace("      namespace: ray\n", "      namespace: ray\n      autoscaler: keda\n")
    assert any(f.rule == "schema" and "autoscaler" in f.path for f in _check(bad, tmp_path).findings)
    missing = TEXT.replace('      version: "1.35"\n', "")
    assert any(f.rule == "schema" for f in _check(missing, tmp_path).findings)


def test_worker_guard_catches_a_worker_that_does_not_match_its_node(tmp_path):
    model = _model(TEXT, tmp_path)
    assert _run("ray-workers", model) == []
    fleet = model.fleets[0]
    wrong = [replace(fleet.ray, gpus=4), replace(fleet.ray, max_replicas=5),
             replace(fleet.ray, object_store_bytes=300 * 10**9)]
    for bad in wrong:
        assert len(_run("ray-workers", replace(model, fleets=(replace(fleet, ray=bad),)))) == 1, bad


def test_cluster_admission_places_the_head_and_workers(tmp_path):
    """The cluster-wide rules see the RayCluster's pods: a worker asking for more than a node can allocate, or
    a head that the system nodes cannot hold, is an error."""
    model = _model(TEXT, tmp_path)
    names = {w.name for w in model.cluster.workloads}
    assert {"tune/tune-head", "tune/tune-gpu"} <= names
    assert _run("cluster-admission", model) == [] and _run("ray-head", model) == []
    cluster = model.cluster
    big = tuple(replace(w, memory_mib=1536 * 1024) if w.name == "tune/tune-gpu" else w for w in cluster.workloads)
    found = _run("cluster-admission", replace(model, cluster=replace(cluster, workloads=big)))
    assert found and "tune/tune-gpu" in found[0]
    on_gpu = tuple(replace(w, node_selector=(("fleetform.dev/fleet", "tune"),), devices=(("nvidia.com/gpu", 1),))
                   if w.name == "tune/tune-head" else w for w in cluster.workloads)
    assert len(_run("ray-head", replace(model, cluster=replace(cluster, workloads=on_gpu)))) == 1
    small = TEXT.replace("system_nodes: {instance_type: m7i.xlarge, nodes: 2}", "system_nodes: {instance_type: t3.small, nodes: 2}")
    assert _rules(small, tmp_path, "cluster-admission") or _rules(small, tmp_path, "cluster-min-capacity")


def test_reference_blueprint_has_no_ray_fleet(tmp_path):
    model = check(ROOT / "blueprints/reference.yaml").model
    assert all(f.ray is None for f in model.fleets) and model.cluster.release("kuberay-operator") is None


# --- the Pulumi program under mocks ---------------------------------------------------------------------------


def _keys(values, prefix=()):
    for key, value in values.items():
        yield prefix + (key,)
        if isinstance(value, dict) and value:
            yield from _keys(value, prefix + (key,))


WHOLE = {("resources",): {"limits", "requests", "claims"}}
"""Values the chart renders whole with toYaml, and the keys of the Kubernetes type they become: `resources` is a
container's ResourceRequirements (kuberay v1.7.0 helm-chart/kuberay-operator/templates/deployment.yaml:
`{{- with .Values.resources }} resources: {{- toYaml . }}`); the chart's own default sets only `limits`."""


def _missing_keys(values: dict, chart: dict) -> list[tuple]:
    """Keys fleetform sets that the chart's values.yaml does not have (a map the chart leaves empty, `{}`, takes
    any key: nodeSelector, labels)."""
    out = []
    for path in _keys(values):
        if path[:-1] in WHOLE:
            if path[-1] not in WHOLE[path[:-1]]:
                out.append(path)
            continue
        if any(path[:n] in WHOLE for n in range(1, len(path) - 1)):
            continue  # inside a Kubernetes object the chart copies whole: its schema is Kubernetes'
        node = chart
        for key in path:
            if not isinstance(node, dict):
                break
            if key not in node:
                if node and not any(path[:n] in out for n in range(1, len(path))):
                    out.append(path)
                break
            node = node[key]
    return out


def test_kuberay_operator_is_a_pinned_release_with_keys_of_its_chart_before_the_raycluster(tmp_path):
    model = _model(TEXT, tmp_path)
    resources = record(model, render(model))
    releases = {r["name"]: r for r in resources if r["type"] == RELEASE}
    kuberay = releases["eks-kuberay-operator"]["inputs"]
    assert (kuberay["chart"], kuberay["version"]) == ("kuberay-operator", "1.7.0")
    assert kuberay["repositoryOpts"]["repo"] == "https://ray-project.github.io/kuberay-helm/"
    chart = yaml.safe_load((ROOT / "tests/data/kuberay-operator-1.7.0-values.yaml").read_text())
    assert kuberay["values"] and _missing_keys(kuberay["values"], chart) == []
    assert _missing_keys({"resources": {"request": {}}, "operator": {"resources": {}}, "image": {"tags": "x"}},
                         chart) == [("resources", "request"), ("operator",), ("image", "tags")]
    (raycluster,) = [r for r in resources if r["type"] == "kubernetes:ray.io/v1:RayCluster"]
    assert "eks-kuberay-operator" in raycluster["depends_on"] and "tune-gpu" in raycluster["depends_on"]
    groups = {r["name"]: r["inputs"] for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"}
    assert groups["tune-gpu"]["scalingConfig"]["minSize"] == 1 and groups["tune-gpu"]["scalingConfig"]["maxSize"] == 4
    assert groups["tune-gpu"]["labels"]["fleetform.dev/fleet"] == "tune"
    assert addons_data()["charts"]["kuberay-operator"]["version"] == "1.7.0"


def test_the_plans_policies_see_the_rayclusters_fsx_claim(tmp_path):
    """pod-references-exist and eks-volume-claims-mount read the RayCluster's pod templates: its FSx claim is
    declared by the blueprint and served by the FSx CSI driver add-on (negative controls: without the add-on;
    a claim the blueprint does not declare)."""
    from fleetform.policies import POLICIES

    model = _model(TEXT, tmp_path)
    resources = record(model, render(model))
    references, claims = POLICIES["pod-references-exist"][1], POLICIES["eks-volume-claims-mount"][1]
    assert references(resources, model) == [] and claims(resources, model) == []
    without = [r for r in resources if r["inputs"].get("addonName") != "aws-fsx-csi-driver"]
    assert [name for name, _ in claims(without, model)] == ["tune-raycluster-ray-tune"]  # the worker group's pods
    undeclared = replace(model, fleets=(replace(model.fleets[0], ray=replace(model.fleets[0].ray, mounts=())),))
    assert [name for name, _ in references(resources, undeclared)] == ["tune-raycluster-ray-tune"]


RAY_BESIDE_SERVING = (ROOT / "blueprints/reference.yaml").read_text() + """
  - name: tune
    role: training
    instance_type: g6e.48xlarge
    nodes: {min: 1, max: 2}
    interconnect: {fabric: tcp}
    storage: [scratch, checkpoints]
    scheduler: {type: ray, version: "1.33", namespace: ray}
waivers:
  - {rule: efa-multinode, fleet: tune, reason: data-parallel fine-tuning over TCP}
"""


def test_a_ray_fleet_shares_the_serving_fleets_cluster(tmp_path):
    """The reference's inference fleets and a Ray fleet: one EKS cluster, one GPU node group each, the KubeRay
    release beside KEDA's and the adapter's; the Ray fleet's Kubernetes version must be the cluster's."""
    result = _check(RAY_BESIDE_SERVING, tmp_path)
    assert [f.rule for f in result.findings if f.severity.value == "error"] == []
    cluster = result.model.cluster
    assert [g.name for g in cluster.node_groups] == ["system", "serve", "small-models", "tune"]
    assert {r.name for r in cluster.releases} >= {"kuberay-operator", "keda", "prometheus-adapter", "gpu-operator"}
    assert cluster.fleets == ("serve", "small-models", "tune")
    other = RAY_BESIDE_SERVING.replace('{type: ray, version: "1.33"', '{type: ray, version: "1.34"')
    assert any("'tune' asks for Kubernetes 1.34" in m for m in _rules(other, tmp_path, "cluster-version"))


def test_a_ray_only_clusters_kubernetes_version_is_checked_like_a_serving_one(tmp_path):
    """The Ray fleet's scheduler.version is the EKS cluster's: k8s-version (what fleetform renders for) and
    eks-version (EKS's release calendar) read it as they read an inference fleet's."""
    assert _rules(TEXT, tmp_path, "eks-version") == [] and _rules(TEXT, tmp_path, "k8s-version") == []
    assert len(_rules(TEXT.replace('version: "1.35"', 'version: "1.29"'), tmp_path, "eks-version")) == 1
    assert len(_rules(TEXT.replace('version: "1.35"', 'version: "1.24"'), tmp_path, "k8s-version")) == 1


def test_diff_says_when_a_change_ends_the_running_ray_jobs(tmp_path):
    """KubeRay v1.7.0 recreates a RayCluster's pods (upgradeStrategy Recreate) when its spec changes beyond the
    worker groups' counts (GenerateHashWithoutReplicasAndWorkersToDelete): diff calls that a drain; a change of
    the fleet's node range alone stays in place."""
    from conftest import run_cli

    old = tmp_path / "old.yaml"
    old.write_text(TEXT)
    counts = tmp_path / "counts.yaml"
    counts.write_text(TEXT.replace("nodes: {min: 1, max: 4}", "nodes: {min: 1, max: 6}"))
    version = tmp_path / "version.yaml"
    version.write_text(TEXT.replace('ray_version: "2.52.0"', 'ray_version: "2.56.0"'))
    out = run_cli("diff", str(old), str(counts)).stdout
    assert "most disruptive: in place" in out and "[drain] RayCluster" not in out
    out = run_cli("diff", str(old), str(version)).stdout
    assert "most disruptive: drain" in out and "[drain] RayCluster tune-raycluster-ray-tune: KubeRay recreates" in out


def test_diff_does_not_promise_a_ray_fleets_nccl_change_to_the_next_job(tmp_path):
    """nccl.env of a Slurm fleet is installed by its nodes before their next job ("next job"); no node of a Ray
    fleet reads the file: its workers get the variables from the RayCluster's env, whose change KubeRay applies by
    recreating every pod (upgradeStrategy Recreate), so diff says drain for the file too."""
    from conftest import run_cli

    old = tmp_path / "old.yaml"
    old.write_text(TEXT)
    debug = tmp_path / "debug.yaml"
    debug.write_text(TEXT.replace("    storage: [scratch, checkpoints]\n",
                                  "    storage: [scratch, checkpoints]\n    nccl: {debug: INFO}\n"))
    out = run_cli("diff", str(old), str(debug)).stdout
    line = next(x for x in out.splitlines() if "tune/nccl.env:" in x)
    assert line.strip().startswith("[drain]") and "RayCluster's env" in line and "next job" not in line
    # and the file itself says so, instead of telling the user to load it as a systemd EnvironmentFile
    text = render(_model(TEXT, tmp_path))["tune/nccl.env"].decode()
    assert "do not read this file" in text and "EnvironmentFile" not in text


def test_nccl_socket_interface_is_one_the_worker_pods_have(tmp_path):
    """The workers get the fleet's NCCL environment in pods, whose one interface is eth0 (containerd's
    defaultIfName): a node interface name in socket_ifname or NCCL_SOCKET_IFNAME would leave NCCL none."""
    ifname = TEXT.replace("fabric: tcp\n", "fabric: tcp\n      socket_ifname: ens5\n")
    assert len(_rules(ifname, tmp_path, "ray-socket-ifname")) == 1
    assert _rules(ifname.replace("ens5", "eth0"), tmp_path, "ray-socket-ifname") == []
    assert _rules(TEXT, tmp_path, "ray-socket-ifname") == []
    env = "    storage: [scratch, checkpoints]\n    nccl: {env: {NCCL_SOCKET_IFNAME: '%s'}}\n"
    for value, found in (("=ens5", 1), ("^eth", 1), ("^=eth0", 1), ("eth", 0), ("=eth0", 0), ("^docker,lo", 0)):
        text = TEXT.replace("    storage: [scratch, checkpoints]\n", env % value)
        assert len(_rules(text, tmp_path, "ray-socket-ifname")) == found, value


def test_all_reduce_estimate_counts_the_one_network_card_a_tcp_node_uses(tmp_path):
    """A Ray fleet's (as a TCP Slurm fleet's) nodes have one network interface, on card 0, and EC2 gives each
    network card its own bandwidth (NetworkCardInfo baselineBandwidthInGbps): a g6e.48xlarge's 4 cards x 100
    Gbit/s are 100 Gbit/s for NCCL's sockets, not the instance's 400."""
    from fleetform.sizing import node_network

    fleet = _model(TEXT, tmp_path).fleets[0]
    gbps, source = node_network(fleet)
    assert gbps == fleet.instance.net_baseline_gbps / fleet.instance.network_cards == 100 and "card 0" in source


def test_a_node_range_upside_down_is_the_users_mistake_not_a_bug_to_report(tmp_path):
    """nodes min above max is size-range's error; the ray-workers guard (whose hint says to report a bug in
    fleetform) stays quiet instead of saying '4-1 pods, but the fleet has 4-1 nodes'."""
    text = TEXT.replace("nodes: {min: 1, max: 4}", "nodes: {min: 4, max: 1}")
    assert len(_rules(text, tmp_path, "size-range")) == 1 and _rules(text, tmp_path, "ray-workers") == []


def test_a_single_node_ray_fleet_on_an_efa_instance_gets_no_efa_interfaces(tmp_path):
    """Before Ray workers got EFA, ray-efa refused only multi-node Ray fleets on EFA: a one-node fleet on an EFA
    instance was valid and deployed with no EFA interfaces. Its one node's NCCL runs over NVLink and would never use
    EFA, so giving it interfaces (a new launch template version) would roll its running node on a fleetform upgrade
    for nothing, as adding a placement group to a TCP fleet would (providers/aws/ray.py)."""
    one = EFA.replace("nodes: {min: 1, max: 4}", "nodes: {min: 1, max: 1}")
    assert one != EFA
    model = _model(one, tmp_path)
    fleet = model.fleets[0]
    assert fleet.interconnect.fabric == "efa" and fleet.ray.efa == 0 and fleet.ray.hugepages is None
    (worker,) = _cluster(render(model))["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert "vpc.amazonaws.com/efa" not in worker["resources"]["limits"]
    assert _rules(one, tmp_path, "ray-efa") == []

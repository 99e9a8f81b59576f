"""Training fleets scheduled by Kubernetes (fleetform/kueue.py): every object passes strict validation,
built-in kinds by kubernetes-validate at the fleet's Kubernetes version, Kueue's and JobSet's kinds by the
openAPIV3Schema of their pinned releases' own CRDs (tests/crd, sources in tests/crd/README.md), closed as
the API server's strict field validation closes them; the JobSet template fits a node of the fleet; the
fleet's NCCL ConfigMap holds what the same fleet's nccl.env holds under Slurm."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, require
from test_k8s import _rendered as _model  # a blueprint (path or text) checked and rendered
from fleetform import kueue
from fleetform.cluster import cpu_reserved_m, memory_reserved_mib, quantity
from fleetform.pipeline import check

EXAMPLE = ROOT / "blueprints/train-eks.yaml"
PINNED = {  # kind -> (schema file, the release it is taken from)
    "ResourceFlavor": ("kueue.x-k8s.io_v1beta2_ResourceFlavor.json", "kubernetes-sigs/kueue v0.19.2"),
    "ClusterQueue": ("kueue.x-k8s.io_v1beta2_ClusterQueue.json", "kubernetes-sigs/kueue v0.19.2"),
    "LocalQueue": ("kueue.x-k8s.io_v1beta2_LocalQueue.json", "kubernetes-sigs/kueue v0.19.2"),
    "WorkloadPriorityClass": ("kueue.x-k8s.io_v1beta2_WorkloadPriorityClass.json", "kubernetes-sigs/kueue v0.19.2"),
    "Topology": ("kueue.x-k8s.io_v1beta2_Topology.json", "kubernetes-sigs/kueue v0.19.2"),
    "JobSet": ("jobset.x-k8s.io_v1alpha2_JobSet.json", "kubernetes-sigs/jobset v0.12.0"),
}


def _closed(schema):
    """A structural CRD schema as the API server applies it with strict field validation: an object with
    declared properties takes no others, unless it says x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


SCHEMAS = {kind: jsonschema.Draft202012Validator(_closed(json.loads((ROOT / "tests/crd" / name).read_text())))
           for kind, (name, _) in PINNED.items()}


def _docs(files, fleet: str):
    for name, data in files.items():
        if name.startswith(f"{fleet}/k8s/") and not name.endswith("kustomization.yaml") or \
                name.startswith(f"{fleet}/jobs/"):
            for doc in yaml.safe_load_all(data):
                yield name, doc


def _errors(doc: dict, version: str) -> list[str]:
    kind = doc["kind"]
    if kind in SCHEMAS and doc["apiVersion"] in (kueue.KUEUE_API, kueue.JOBSET_API):
        return [f"{list(e.absolute_path)}: {e.message}" for e in SCHEMAS[kind].iter_errors(doc)]
    try:
        kubernetes_validate.validate(doc, f"{version}.0", strict=True)
    except kubernetes_validate.SchemaNotFoundError as err:  # an unknown kind fails, it does not warn
        return [f"no schema for {doc['apiVersion']} {kind}: {err}"]
    except kubernetes_validate.ValidationError as err:
        return [f"{err.message} at {list(err.path)}"]
    return []


def test_every_object_validates_strictly(tmp_path):
    model, files = _model(EXAMPLE, tmp_path)
    fleet = next(f for f in model.fleets if f.kueue is not None)
    kinds = []
    for name, doc in _docs(files, fleet.name):
        assert _errors(doc, fleet.kueue.version) == [], name
        kinds.append(doc["kind"])
    assert sorted(set(kinds)) == sorted(set(PINNED) | {"Namespace", "PriorityClass", "ConfigMap"})
    assert kinds.count("LocalQueue") == kinds.count("ConfigMap") == 2  # training and research
    # the Topology CRD's CEL rules, which jsonschema does not evaluate: levels unique, the host name last only
    topology = next(d for _, d in _docs(files, fleet.name) if d["kind"] == "Topology")
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert len(set(levels)) == len(levels) and "kubernetes.io/hostname" not in levels[:-1]


@pytest.mark.parametrize("kind, path, value", [
    ("ClusterQueue", ("spec", "resourceGroup"), []),  # misspelt: resourceGroups
    ("ClusterQueue", ("spec", "preemption", "withinClusterQueue"), "Lower"),  # not in the enum
    ("Topology", ("spec", "levels", 0, "nodeLabel"), "Not A Label"),
    ("JobSet", ("spec", "replicatedJobs", 0, "template", "spec", "template", "spec", "containers", 0, "resource"), {}),
    ("ResourceFlavor", ("spec", "topology"), "x"),  # the field is topologyName
])
def test_the_pinned_schemas_refuse_a_broken_object(kind, path, value, tmp_path):
    """Negative controls: the validation above would see a wrong field name or value."""
    model, files = _model(EXAMPLE, tmp_path)
    doc = copy.deepcopy(next(d for _, d in _docs(files, "train") if d["kind"] == kind))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert _errors(doc, "1.35") != []


def test_kustomize_builds_the_training_folder(tmp_path):
    kubectl = require("kubectl", "kubernetes-client")
    _, files = _model(EXAMPLE, tmp_path)
    out = tmp_path / "out"
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    built = subprocess.run([kubectl, "kustomize", str(out / "train/k8s")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    listed = yaml.safe_load((out / "train/k8s/kustomization.yaml").read_text())["resources"]
    assert len(list(yaml.safe_load_all(built.stdout))) == len(listed)


def _pod(files) -> dict:
    jobset = yaml.safe_load(files["train/jobs/jobset.yaml"])
    return jobset, jobset["spec"]["replicatedJobs"][0]["template"]["spec"]


def test_the_job_fits_a_node_and_the_queue_holds_the_fleet(tmp_path):
    """Cluster admission of the job template: one pod per node asks for the node's GPUs and EFA interfaces
    (p5.48xlarge: 8 H100s, 32 EFA interfaces: providers/aws/instances.json) and no more CPU or memory than a
    node can allocate after EKS's kube-reserved; it selects and tolerates the fleet's nodes; the ClusterQueue's
    quota is every node's worth; the topology level it asks for is a level of the flavor's Topology."""
    model, files = _model(EXAMPLE, tmp_path)
    fleet = next(f for f in model.fleets if f.kueue is not None)
    instance, k = fleet.instance, fleet.kueue
    jobset, job = _pod(files)
    spec = job["template"]["spec"]
    requests = spec["containers"][0]["resources"]["requests"]
    assert requests == spec["containers"][0]["resources"]["limits"]
    assert requests["nvidia.com/gpu"] == instance.gpu_count == 8
    assert requests["vpc.amazonaws.com/efa"] == instance.max_efa == 32
    # the EFA driver's 2 MiB huge pages, as the EKS User Guide's EFA worker asks: without them the pod's hugetlb
    # limit is 0 and libfabric's huge-page buffers fault
    assert requests["hugepages-2Mi"] == kueue.EFA_HUGEPAGES == "5120Mi"
    assert quantity(requests["cpu"]) * 1000 <= instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus)
    assert quantity(requests["memory"]) / 2**20 <= instance.mem_gib * 1024 - memory_reserved_mib()
    assert job["parallelism"] == job["completions"] == fleet.nodes.max
    docs = {d["kind"]: d for _, d in _docs(files, "train")}
    flavor, queue, topology = docs["ResourceFlavor"], docs["ClusterQueue"], docs["Topology"]
    assert set(flavor["spec"]["nodeLabels"].items()) - {("node.kubernetes.io/instance-type", instance.name)} \
        == set(spec["nodeSelector"].items())
    for taint in flavor["spec"]["nodeTaints"]:
        assert any(t["key"] == taint["key"] and t.get("value") == taint["value"] and t["effect"] == taint["effect"]
                   for t in spec["tolerations"])
    quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    for resource, value in requests.items():
        assert quantity(quota[resource]) == pytest.approx(quantity(value) * fleet.nodes.max)
    annotation = job["template"]["metadata"]["annotations"][kueue.PREFERRED_TOPOLOGY]
    assert annotation in [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    assert jobset["metadata"]["labels"][kueue.QUEUE_LABEL] in \
        [d["metadata"]["name"] for _, d in _docs(files, "train") if d["kind"] == "LocalQueue"]
    # torchrun's rendezvous host is the first pod's JobSet host name
    args = spec["containers"][0]["args"]
    assert f"--master-addr={jobset['metadata']['name']}-workers-0-0.{jobset['metadata']['name']}" in args


def test_training_never_preempts_serving(tmp_path):
    _, files = _model(EXAMPLE, tmp_path)
    training = yaml.safe_load(files["train/k8s/priorityclass.yaml"])
    serving = yaml.safe_load(files["chat/k8s/priorityclass.yaml"])
    assert training["value"] < serving["value"]
    assert training["preemptionPolicy"] == "Never" and serving["preemptionPolicy"] == "PreemptLowerPriority"
    workload = yaml.safe_load(files["train/k8s/workloadpriorityclass.yaml"])
    assert workload["value"] == training["value"]
    _, job = _pod(files)
    assert job["template"]["spec"]["priorityClassName"] == training["metadata"]["name"]


def _sourced(path: Path) -> dict[str, str]:
    """What a shell has in its environment after `set -a; . nccl.env`, as the file's header says to load it."""
    bash = shutil.which("bash")
    out = subprocess.run([bash, "-c", 'set -a; . "$1"; env -0', "-", str(path)], env={},
                         capture_output=True, check=True).stdout
    pairs = dict(item.split("=", 1) for item in out.decode().split("\0") if item)
    return {k: v for k, v in pairs.items() if k.startswith(("NCCL_", "FI_", "OFI_"))}


NCCL_BLUEPRINT = """\
apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: nccl-pair, version: 1.0.0}}
provider:
  cloud: aws
  region: us-east-1
  availability_zone: us-east-1a
  network: {{cidr: 10.40.0.0/16}}
fleets:
  - name: train
    role: training
    instance_type: p5.48xlarge
    nodes: 2
    interconnect: {{fabric: efa, socket_ifname: ens32}}
    scheduler: {scheduler}
    nccl:
      debug: INFO
      env: {{NCCL_NVLS_ENABLE: 0, NCCL_BUFFSIZE: 8388608}}
"""


def test_the_nccl_configmap_is_the_slurm_nccl_env(tmp_path):
    """The same fleet scheduled by Slurm and by Kubernetes: the ConfigMap of the second holds what the
    nccl.env of the first sets, as bash reads it, except SCHEDULER_SPECIFIC."""
    slurm_dir, k8s_dir = tmp_path / "slurm", tmp_path / "k8s"
    slurm_dir.mkdir()
    k8s_dir.mkdir()
    _, slurm_files = _model(NCCL_BLUEPRINT.format(
        scheduler="{type: slurm, partitions: [{name: gpu, default: true}]}"), slurm_dir)
    _, k8s_files = _model(NCCL_BLUEPRINT.format(
        scheduler='{type: kubernetes, version: "1.35", namespace: training, job_image: "nvcr.io/nvidia/pytorch:25.01-py3"}'),
        k8s_dir)
    env_file = tmp_path / "nccl.env"
    env_file.write_bytes(slurm_files["train/nccl.env"])
    sourced = _sourced(env_file)
    assert sourced["NCCL_SOCKET_IFNAME"] == "=ens32" and sourced["NCCL_NVLS_ENABLE"] == "0"
    config_map = yaml.safe_load(k8s_files["train/k8s/training-nccl-configmap.yaml"])
    assert config_map["data"] == {k: v for k, v in sourced.items() if k not in kueue.SCHEDULER_SPECIFIC}
    # the Kubernetes fleet's own nccl.env is the Slurm fleet's, byte for byte
    assert k8s_files["train/nccl.env"] == slurm_files["train/nccl.env"]
    # and the job loads it
    _, job = _pod(k8s_files)
    assert job["template"]["spec"]["containers"][0]["envFrom"] == [
        {"configMapRef": {"name": config_map["metadata"]["name"]}}]


# ---- the Pulumi program: the EFA node group, the pinned releases, CRDs before objects ----

CHARTS = ROOT / "tests/data/charts"
TRAINING_CHARTS = ("jobset", "kueue", "aws-efa-k8s-device-plugin")


def _missing(values, chart, path=()) -> list[str]:
    """Key paths of `values` the chart's values.yaml does not have (a key under a value the chart leaves
    empty or gives as a list or scalar is the user's to fill: not checked below it)."""
    out = []
    for key, value in values.items():
        if key not in chart:
            out.append(".".join(path + (key,)))
        elif isinstance(value, dict) and isinstance(chart[key], dict) and chart[key]:
            out += _missing(value, chart[key], path + (key,))
    return out


def test_every_values_key_exists_in_its_chart_version(tmp_path):
    model, _ = _model(EXAMPLE, tmp_path)
    releases = {r.name: r for r in model.cluster.releases}
    assert set(TRAINING_CHARTS) <= set(releases)
    for name in TRAINING_CHARTS:
        release = releases[name]
        chart = yaml.safe_load((CHARTS / f"{name}-{release.version}-values.yaml").read_text())
        values = release.values
        assert values and _missing(values, chart) == [], name
    # negative control: a misspelt key is seen
    kueue_chart = yaml.safe_load((CHARTS / f"kueue-{releases['kueue'].version}-values.yaml").read_text())
    assert _missing({"controllerManager": {"manger": {"resources": {}}}}, kueue_chart) == ["controllerManager.manger"]


def test_kueue_webhooks_reach_only_the_training_namespaces(tmp_path):
    """Kueue's chart makes its Job, JobSet, Pod, Deployment and StatefulSet webhooks failurePolicy Fail for the
    frameworks it integrates, in every namespace but kube-system and kueue-system (kueue v0.19.2
    charts/kueue/templates/webhook/manifests.yaml): with its defaults a Kueue outage would stop serving pods from
    being created. The release's manager config is the chart's default with the training namespaces as
    managedJobsNamespaceSelector (the webhooks' namespaceSelector) and only JobSet and Job integrated."""
    model, _ = _model(EXAMPLE, tmp_path)
    release = next(r for r in model.cluster.releases if r.name == "kueue")
    ours = yaml.safe_load(release.values["managerConfig"]["controllerManagerConfigYaml"])
    chart = yaml.safe_load(yaml.safe_load((CHARTS / f"kueue-{release.version}-values.yaml").read_text())
                           ["managerConfig"]["controllerManagerConfigYaml"])
    assert "pod" in chart["integrations"]["frameworks"] and "managedJobsNamespaceSelector" not in chart
    assert ours["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert ours.pop("managedJobsNamespaceSelector") == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research", "training"]}]}
    assert {k: v for k, v in ours.items() if k != "integrations"} == \
        {k: v for k, v in chart.items() if k != "integrations"}


def test_the_efa_device_plugin_runs_on_the_training_nodes(tmp_path):
    """The chart tolerates no taint by default, and the training group carries nvidia.com/gpu: its workload
    as the cluster sees it runs on the group, and the group offers the EFA interfaces the job asks for."""
    model, _ = _model(EXAMPLE, tmp_path)
    from fleetform.rules.cluster import _untolerated

    group = next(g for g in model.cluster.node_groups if g.fleet == "train")
    plugin = next(w for w in model.cluster.workloads if w.name == "aws-efa-k8s-device-plugin")
    assert plugin.daemon and _untolerated(plugin, group) == []
    release = next(r for r in model.cluster.releases if r.name == "aws-efa-k8s-device-plugin")
    assert release.values["tolerations"] == [{"operator": "Exists"}]  # what the workload above says it tolerates
    assert dict(group.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    assert dict(group.labels)["fleetform.dev/fleet"] == "train"


def test_the_job_template_is_a_workload_the_cluster_admits(tmp_path):
    """cluster-admission sees the JobSet's pods: asking for one EFA interface more than a node has is an error."""
    text = EXAMPLE.read_text()
    model, _ = _model(text, tmp_path)
    job = next(w for w in model.cluster.workloads if w.kind == "JobSet")
    assert (job.min_replicas, dict(job.devices)) == (1, {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32})
    from fleetform.rules import Reporter
    from fleetform.rules.cluster import cluster_admission

    def admitted(bp) -> list[str]:
        found: list[str] = []
        cluster_admission(bp, lambda path, message, hint="": found.append(message))
        return found

    assert admitted(model) == []
    from dataclasses import replace

    bigger = replace(job, devices=(("nvidia.com/gpu", 8), ("vpc.amazonaws.com/efa", 33)))
    broken = replace(model, cluster=replace(model.cluster, workloads=tuple(
        bigger if w is job else w for w in model.cluster.workloads)))
    assert any("33 x vpc.amazonaws.com/efa > 32 per node" in m for m in admitted(broken))


def test_the_plan_builds_an_efa_node_group_and_installs_crds_first(tmp_path):
    """Under Pulumi's mocks: the training node group's launch template has the Slurm nodes' card layout
    (card 0 an interface and an efa-only device, every other card efa-only: 33 interfaces on p5.48xlarge's
    32 cards) with the security groups on each interface and none in vpc_security_group_ids, and a cluster
    placement group; the node group is in one subnet; Kueue is installed after JobSet, and every Kueue object
    after the Kueue release."""
    from fleetform.plan import record

    model, files = _model(EXAMPLE, tmp_path)
    resources = record(model, files)
    by_name = {r["name"]: r for r in resources}
    template = by_name["train-nodes"]["inputs"]
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == model.fleets[0].instance.network_cards + 1 == 33
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in interfaces[:3]] == [
        (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert all(len(i["securityGroups"]) == 2 and "subnetId" not in i for i in interfaces)
    assert "vpcSecurityGroupIds" not in template
    assert by_name["train-placement"]["inputs"]["strategy"] == "cluster"
    assert "train-placement" in by_name["train-nodes"]["depends_on"]
    group = by_name["train-gpu"]["inputs"]
    assert len(group["subnetIds"]) == 1 and group["instanceTypes"] == ["p5.48xlarge"]
    assert "eks-jobset" in by_name["eks-kueue"]["depends_on"]
    assert by_name["eks-kueue"]["inputs"]["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    kinds = {"ClusterQueue", "LocalQueue", "ResourceFlavor", "Topology", "WorkloadPriorityClass"}
    late = [r for r in resources if r["type"].split(":")[-1] in kinds and r["name"].startswith("train-")]
    assert len(late) == 6 and all("eks-kueue" in r["depends_on"] for r in late)
    # the training fleet's component is a training fleet's, in the plan and the diagram: not an InferenceFleet,
    # whose token, once deployed, could only change with an alias on every child
    assert by_name["train"]["type"] == "fleetform:aws:KubeTrainingFleet"
    assert by_name["chat"]["type"] == "fleetform:aws:InferenceFleet"
    from fleetform.diagram import part_of
    assert part_of(model, "aws:ec2/placementGroup:PlacementGroup", "train-placement",
                   ("KubeTrainingFleet", "train")) == ("fleet", "train", "placement")
    assert part_of(model, "aws:eks/nodeGroup:NodeGroup", "train-gpu", ("KubeTrainingFleet", "train")) == (
        "fleet", "train", "nodes")


def test_training_nodes_beside_a_mig_fleet_keep_whole_gpus(tmp_path):
    """The GPU Operator's MIG manager applies its `default` config to every node without a
    nvidia.com/mig.config label: beside one MIG serving fleet that default must be all-disabled, or the
    training nodes would be partitioned into the serving fleet's slices."""
    text = EXAMPLE.read_text().replace("""    instance_type: g6.12xlarge
    nodes: {min: 1, max: 2}""", """    instance_type: p4de.24xlarge
    nodes: 1
    gpu_sharing: {strategy: mig, profile: 3g.40gb}""").replace("replicas: {min: 2, max: 8}", "replicas: {min: 2, max: 4}")
    model, _ = _model(text, tmp_path)
    operator = next(r for r in model.cluster.releases if r.name == "gpu-operator")
    assert operator.values["migManager"]["config"]["default"] == "all-disabled"
    group = next(g for g in model.cluster.node_groups if g.fleet == "train")
    assert "nvidia.com/mig.config" not in dict(group.labels)


def test_the_training_rules_apply_whatever_the_orchestrator(tmp_path):
    """The same fleet under Slurm and under Kubernetes draws the same training findings (memory, multi-node
    fabric, sizing) and the same sizing lines: only the scheduler differs."""
    from fleetform.sizing import cost, sizing

    workload = """    workload: {model_params_billion: 400, precision: bf16, optimizer: adamw, tokens_billion: 100, mfu: 0.4}
    placement: spread
"""
    results = {}
    for name, scheduler in (("slurm", "{type: slurm, partitions: [{name: gpu, default: true}]}"),
                            ("k8s", '{type: kubernetes, version: "1.35", namespace: training, '
                                    'job_image: "nvcr.io/nvidia/pytorch:25.01-py3"}')):
        text = NCCL_BLUEPRINT.format(scheduler=scheduler).replace("    nccl:\n", workload + "    nccl:\n")
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        result = check(path)
        plan = (sizing(result.model), cost(result.model)[0])
        results[name] = (sorted((f.rule, f.severity.value, f.message) for f in result.findings
                                if f.rule.startswith(("training", "efa", "spread", "placement"))), plan)
    assert results["slurm"][0] == results["k8s"][0]
    assert any(rule == "training-memory" for rule, _, _ in results["k8s"][0])
    assert results["slurm"][1] == results["k8s"][1]  # sizing steps and notes, cost rows


def test_diff_calls_dropping_a_queue_namespace_data_loss(tmp_path):
    """A namespace left out of `queue_namespaces` is deleted by `pulumi up`, and Kubernetes deletes every object in
    it, the JobSets users submitted there included: diff names it data loss; adding one is nothing."""
    from conftest import run_cli

    text = (ROOT / "blueprints/train-eks.yaml").read_text()
    old = tmp_path / "old.yaml"
    old.write_text(text)
    fewer = tmp_path / "fewer.yaml"
    fewer.write_text(text.replace("queue_namespaces: [training, research]", "queue_namespaces: [training]"))
    more = tmp_path / "more.yaml"
    more.write_text(text.replace("queue_namespaces: [training, research]", "queue_namespaces: [training, research, eval]"))
    out = run_cli("diff", str(old), str(fewer)).stdout
    assert "most disruptive: data loss" in out, out
    assert "[data loss] Namespace" in out and "research" in out and "JobSets" in out, out
    out = run_cli("diff", str(old), str(more)).stdout
    assert "data loss" not in out, out

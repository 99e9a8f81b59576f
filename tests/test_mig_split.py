"""A node split by GPU (issue 22, "partition by GPU inside one node"; blueprints/shared-node.yaml): GPUs 4-7 of each
p5.48xlarge in 1g.20gb MIG slices for the models, GPUs 0-3 whole for training jobs Kueue queues.

What is checked here: the mig-parted config against mig-parted's own config rules (NVIDIA/mig-parted
api/spec/v1/spec.go MigConfigSpec.UnmarshalJSON: `devices` is "all" or a list of ints, `mig-devices` required when
MIG is on and refused when it is off; helpers.go MatchesDevices: an entry applies to the GPU indices it lists);
that the two workloads ask for different resources and their quotas add up (the model servers request
nvidia.com/mig-1g.20gb, the ClusterQueue's nvidia.com/gpu quota is the whole GPUs only, the node's CPU and memory
are split in the same proportion); the Kueue objects against the pinned Kueue CRDs closed as the API server's
strict field validation does (tests/test_kueue.py), the Job and the rest with kubernetes-validate --strict; the
mig-split rule's refusals; the memory rules against the slice.

What only a real cluster with p5 nodes would prove (not run here): that the GPU Operator's MIG manager applies the
per-GPU layout on the EKS NVIDIA AMI (it reboots the node where a GPU reset is refused, WITH_REBOOT), that the
device plugin then advertises 16 nvidia.com/mig-1g.20gb and 4 nvidia.com/gpu per node, and that a training pod's
four GPUs are the four without MIG."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from conftest import ROOT, check_text as _check, checked_model as _model, rule_findings as _found
from fleetform.render import render
from test_kueue import _docs, _errors

EXAMPLE = ROOT / "blueprints/shared-node.yaml"
TEXT = EXAMPLE.read_text()


def _mig_parted_errors(config: dict, gpus: int) -> list[str]:
    """mig-parted's own checks of a config (spec.go UnmarshalJSON), and which GPU indices each entry reaches
    (helpers.go MatchesDevices): every GPU of the node reached by exactly one entry."""
    errors = []
    if config.get("version") != "v1":
        errors.append("version")
    for name, entries in config["mig-configs"].items():
        reached: list[int] = []
        for entry in entries:
            if not {"devices", "mig-enabled"} <= set(entry):
                errors.append(f"{name}: missing devices or mig-enabled")
                continue
            devices = entry["devices"]
            if devices == "all":
                reached += range(gpus)
            elif isinstance(devices, list) and all(isinstance(i, int) for i in devices):
                reached += [i for i in devices if i < gpus]
                errors += [f"{name}: GPU {i} is not on the node" for i in devices if i >= gpus]
            else:
                errors.append(f"{name}: devices {devices!r}")
            if entry["mig-enabled"] and entry.get("mig-devices") is None:
                errors.append(f"{name}: missing required field 'mig-devices' when 'mig-enabled' is true")
            if not entry["mig-enabled"] and entry.get("mig-devices"):
                errors.append(f"{name}: MIG devices included when 'mig-enabled' is false")
        if sorted(reached) != list(range(gpus)):
            errors.append(f"{name}: GPUs reached {sorted(reached)}")
    return errors


def test_the_mig_parted_config_splits_the_listed_gpus_and_leaves_the_others_whole(tmp_path):
    model = _model(TEXT, tmp_path)
    files = render(model)
    config_map = yaml.safe_load(files["shared/k8s/mig-parted-config.yaml"])
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert _mig_parted_errors(config, 8) == []
    layout = config["mig-configs"]["shared-split-1g.20gb-f0"]
    assert layout == [{"devices": [0, 1, 2, 3], "mig-enabled": False},
                      {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.20gb": 4}}]
    # the node group selects that layout, and the GPU Operator runs the mixed strategy
    fleet = model.fleets[0]
    assert ("nvidia.com/mig.config", "shared-split-1g.20gb-f0") in fleet.kube.node_labels
    values = yaml.safe_load(files["shared/gpu-operator-values.yaml"])
    assert values["mig"] == {"strategy": "mixed"}
    assert values["migManager"]["config"] == {"name": "shared-mig-parted", "default": "shared-split-1g.20gb-f0"}
    # negative controls of the checker: a GPU the node lacks, a GPU reached twice, slices on a GPU with MIG off
    broken = {"version": "v1", "mig-configs": {"x": [{"devices": [0, 1, 2, 3, 8], "mig-enabled": False},
                                                      {"devices": [3, 4, 5, 6, 7], "mig-enabled": True,
                                                       "mig-devices": {"1g.20gb": 4}}]}}
    assert len(_mig_parted_errors(broken, 8)) == 2
    off = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": False,
                                                    "mig-devices": {"1g.20gb": 4}}]}}
    assert _mig_parted_errors(off, 8) == ["x: MIG devices included when 'mig-enabled' is false"]


def test_serving_asks_for_slices_and_training_for_whole_gpus_within_one_node(tmp_path):
    """The node group advertises 16 slices and 4 whole GPUs; the Deployment asks for a slice, the Job for whole
    GPUs; the ClusterQueue's GPU quota is the whole GPUs of the fleet's largest size, not its 8 x 2; and the CPU
    and memory the servers at their most and a training pod ask for fit one node together."""
    from fleetform.cluster import quantity

    model = _model(TEXT, tmp_path)
    files = render(model)
    fleet = model.fleets[0]
    group = next(g for g in model.cluster.node_groups if g.fleet == "shared")
    assert dict(group.devices) == {"nvidia.com/mig-1g.20gb": 16, "nvidia.com/gpu": 4}
    deployment = yaml.safe_load(files["shared/k8s/qwen-7b-deployment.yaml"])
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.20gb"] == 1 and "nvidia.com/gpu" not in limits
    queue = yaml.safe_load(files["shared/k8s/training-clusterqueue.yaml"])
    quotas = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quotas["nvidia.com/gpu"] == str(4 * fleet.nodes.max) == "8"
    job = yaml.safe_load(files["shared/jobs/whole-gpus-job.yaml"])
    pod = job["spec"]["template"]["spec"]
    asked = pod["containers"][0]["resources"]["requests"]
    assert asked["nvidia.com/gpu"] == 4 and not any(k.startswith("nvidia.com/mig-") for k in asked)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "shared-whole-gpus"
    assert set(pod["nodeSelector"].items()) <= set(group.labels)
    # the quota's CPU and memory are whole pods' worth, x nodes.max
    assert quantity(quotas["cpu"]) == quantity(asked["cpu"]) * fleet.nodes.max
    # one node holds the servers' 16 slices and one training pod
    server = fleet.kube.servers[0]
    cpu = 16 * quantity(server.cpu_request) + quantity(asked["cpu"])
    memory = 16 * quantity(server.memory) + quantity(asked["memory"])
    assert cpu * 1000 <= group.cpu_m and memory <= group.memory_mib * 2**20
    assert [w.name for w in model.cluster.workloads if w.kind == "Job"] == ["shared/shared-whole-gpus"]


def test_the_split_objects_validate_against_the_pinned_schemas(tmp_path):
    model = _model(TEXT, tmp_path)
    files = render(model)
    kinds = []
    for name, doc in _docs(files, "shared"):
        if doc["kind"] in ("ServiceMonitor", "ScaledObject"):  # tests/test_k8s.py checks them with their CRDs
            continue
        assert _errors(doc, "1.35") == [], name
        kinds.append(doc["kind"])
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "WorkloadPriorityClass", "Job", "Deployment",
            "ConfigMap"} <= set(kinds)
    # Kueue and JobSet are installed, and Kueue manages the training namespace's jobs only
    releases = {r.name: r for r in model.cluster.releases}
    assert {"kueue", "jobset"} <= set(releases)
    config = yaml.safe_load(releases["kueue"].values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == ["research"]
    assert "batch/job" in config["integrations"]["frameworks"]
    # negative control: a misspelt field of the flavor is refused
    flavor = next(d for _, d in _docs(files, "shared") if d["kind"] == "ResourceFlavor")
    flavor["spec"]["nodeLabel"] = flavor["spec"].pop("nodeLabels")
    assert _errors(flavor, "1.35") != []


def test_the_plan_applies_the_queue_after_kueue(tmp_path):
    from fleetform.plan import record

    model = _model(TEXT, tmp_path)
    resources = record(model, render(model))
    queue = next(r for r in resources if r["type"].endswith(":ClusterQueue"))
    assert "eks-kueue" in queue["depends_on"]
    (group,) = [r["inputs"] for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"] == "shared-gpu"]
    assert group["labels"]["nvidia.com/mig.config"] == "shared-split-1g.20gb-f0"


def test_a_changed_split_is_a_changed_mig_config_label(tmp_path):
    """The MIG manager repartitions a node when its nvidia.com/mig.config label changes: the name of the config
    carries the split GPUs (a bit mask), so moving the split changes the label, as changing the profile does."""
    labels = {}
    for gpus in ("[4, 5, 6, 7]", "[0, 1, 6, 7]", "[0, 1, 2, 3]"):
        text = TEXT.replace("mig_gpus: [4, 5, 6, 7]", f"mig_gpus: {gpus}")
        labels[gpus] = dict(_model(text, tmp_path).fleets[0].kube.node_labels)["nvidia.com/mig.config"]
    assert labels == {"[4, 5, 6, 7]": "shared-split-1g.20gb-f0", "[0, 1, 6, 7]": "shared-split-1g.20gb-c3",
                      "[0, 1, 2, 3]": "shared-split-1g.20gb-f"}


# --- rules ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("old, new, rule, message", [
    ("mig_gpus: [4, 5, 6, 7]", "mig_gpus: [4, 5, 6, 7, 8]", "mig-split",
     "GPU 8 of mig_gpus is beyond a p5.48xlarge node's 8 GPUs (indices 0-7)"),
    # none of the node's GPUs (found by tests/test_fuzz_schema.py's sweep: a division by zero GPUs split)
    ("mig_gpus: [4, 5, 6, 7]", "mig_gpus: [8, 9]", "mig-split",
     "GPU 8, 9 of mig_gpus is beyond a p5.48xlarge node's 8 GPUs (indices 0-7)"),
    ("gpus_per_job: 4", "gpus_per_job: 5", "mig-split",
     "a training pod asks for 5 whole GPUs, but a p5.48xlarge node has 4 left whole (8 GPUs, 4 in MIG slices): "
     "Kueue would never admit the job"),
    ("mig_gpus: [4, 5, 6, 7]", "mig_gpus: [0, 1, 2, 3, 4, 5, 6, 7]", "mig-split",
     "mig_gpus splits all 8 GPUs of a p5.48xlarge node: none is left whole for whole_gpus' training jobs"),
    ("mig_strategy: mixed ", "mig_strategy: single ", "mig-split",
     "a node split between MIG slices and whole GPUs needs the mixed MIG strategy: under single the slices and the "
     "whole GPUs are one resource, nvidia.com/gpu"),
    ("      mig_gpus: [4, 5, 6, 7]        # split into slices; GPUs 0-3 stay whole\n", "", "mig-split",
     "whole_gpus needs mig_gpus: without it every GPU is split into slices and none is left whole"),
    ("profile: 1g.20gb", "profile: 1g.5gb", "gpu-sharing", "'1g.5gb' is not a MIG profile of H100-80GB"),
    # the whole GPUs' namespaces are the jobs' own, as kueue-namespace asks of a training fleet: the fleet's serving
    # namespace enforces Pod Security restricted, which refuses the rendered Job's pod (root, no securityContext)
    # after Kueue admits it; kube-system in managedJobsNamespaceSelector is refused by Kueue's config validation
    # (kueue v0.19.2 pkg/config/validation.go), which stops Kueue
    ("namespaces: [research]", "namespaces: [serve]", "mig-split",
     "namespace 'serve' of fleet 'shared''s whole GPUs is inference fleet 'shared''s: its Pod Security Admission "
     "(restricted) and NetworkPolicy would apply to training pods too"),
    ("namespaces: [research]", "namespaces: [research, kube-system]", "mig-split",
     "namespace 'kube-system' of fleet 'shared''s whole GPUs is Kubernetes' own"),
])
def test_a_split_that_does_not_add_up_is_an_error(old, new, rule, message, tmp_path):
    assert old in TEXT
    assert _found(TEXT, tmp_path, rule) == []
    assert _found(TEXT.replace(old, new), tmp_path, rule) == [message]


def test_the_memory_rules_judge_the_model_against_the_slice(tmp_path):
    """The slice's memory (1g.20gb: 20480 MiB, 19.3 GB usable at vLLM's 0.9), not the H100's 80 GB: a 14B bf16
    model does not fit (model-fits), a 7.6B bf16 one fits with too little KV cache (kv-cache-room), the example's
    fp8 copy fits; a 3g.40gb slice holds the 14B one."""
    def findings(text):
        return {(f.rule, f.severity.value): f.message for f in _check(text, tmp_path).findings}

    bf16 = TEXT.replace("RedHatAI/Qwen2.5-7B-Instruct-FP8-dynamic", "Qwen/Qwen2.5-7B-Instruct").replace(
        "precision: fp8", "precision: bf16")
    assert "of 19.3 GB" in findings(bf16)[("kv-cache-room", "warning")]
    assert ("kv-cache-room", "warning") not in findings(TEXT)
    big = bf16.replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-14B-Instruct").replace(
        "model_params_billion: 7.6", "model_params_billion: 14.7")
    assert ("model-fits", "error") in findings(big)
    wider = big.replace("profile: 1g.20gb", "profile: 3g.40gb").replace("replicas: {min: 4, max: 32}",
                                                                        "replicas: {min: 2, max: 8}")
    assert ("model-fits", "error") not in findings(wider)


def test_the_servers_capacity_counts_only_the_split_gpus(tmp_path):
    """16 slices a node (4 GPUs x 4), 32 at nodes.max: 33 replicas have no slice (the capacity rule), where the
    8 GPUs of an unsplit node would have held 64."""
    model = _model(TEXT, tmp_path)
    assert model.fleets[0].devices()[0] == 16
    over = TEXT.replace("replicas: {min: 4, max: 32}", "replicas: {min: 4, max: 33}")
    errors = [f for f in _check(over, tmp_path).findings if f.severity.value == "error"]
    assert errors, "33 replicas of one slice on 2 nodes of 16 slices"
    whole = replace(model.fleets[0].gpu_sharing, mig_gpus=(), whole_gpus=None)
    assert replace(model.fleets[0], gpu_sharing=whole).devices()[0] == 32


def test_the_gpu_operator_keys_of_a_split_node_exist_in_the_pinned_chart(tmp_path):
    """The mig and migManager keys the fleet's gpu-operator-values.yaml and the cluster's release set exist in the
    GPU Operator chart v26.7.0's values.yaml (tests/data/charts/gpu-operator-v26.7.0-mig-values.yaml, copied from
    the tag), and the strategy is one the chart's ClusterPolicy takes (mixed)."""
    from test_kueue import _missing

    chart = yaml.safe_load((ROOT / "tests/data/charts/gpu-operator-v26.7.0-mig-values.yaml").read_text())
    model = _model(TEXT, tmp_path)
    rendered = yaml.safe_load(render(model)["shared/gpu-operator-values.yaml"])
    ours = {key: rendered[key] for key in ("mig", "migManager")}
    assert ours["mig"] == {"strategy": "mixed"} and _missing(ours, chart) == []
    release = next(r for r in model.cluster.releases if r.name == "gpu-operator")
    mig_values = {k: v for k, v in release.values.items() if k in ("mig", "migManager")}
    assert mig_values and _missing(mig_values, chart) == []
    assert _missing({"migManager": {"config": {"defualt": "x"}}}, chart) == ["migManager.config.defualt"]


def test_diff_says_a_changed_split_repartitions_the_running_nodes():
    """EKS applies a node group's label update to its running nodes (EKS API UpdateNodegroupConfig, labels), and the
    MIG manager then repartitions each of them at once, stopping only the GPU Operator's own pods and rebooting the
    node where a busy GPU's MIG mode cannot change (NVIDIA/mig-parted pkg/mig/reconfigure/reconfigure.go, WITH_REBOOT):
    diff must not call that "nothing running notices"."""
    from fleetform.changes import classify, compare

    def group(label: str) -> list[dict]:
        return [{"type": "aws:eks/nodeGroup:NodeGroup", "name": "shared-gpu", "parent": None,
                 "inputs": {"labels": {"fleetform.dev/fleet": "shared", "nvidia.com/mig.config": label}}}]

    (change,) = compare(group("shared-split-1g.20gb-f0"), group("shared-split-1g.20gb-e0"))
    disruption = classify(change, ("InferenceFleet", "shared"))
    assert disruption.cls == "drain"
    assert "without draining" in disruption.how and "reboots" in disruption.how
    (other,) = compare(group("shared-split-1g.20gb-f0"), [{**group("x")[0], "inputs": {"labels": {
        "fleetform.dev/fleet": "other", "nvidia.com/mig.config": "shared-split-1g.20gb-f0"}}}])
    assert classify(other, ("InferenceFleet", "shared")).cls != "drain"

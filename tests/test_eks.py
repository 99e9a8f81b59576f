"""The one EKS cluster of a blueprint's inference fleets: what the Pulumi program records under
the mocks (node groups, Helm releases and their order, Capacity Blocks, Pod Identity), and the
cluster rule stage, each check with a negative control."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml

from conftest import ROOT
from fleetform.cluster import addons_data, cpu_reserved_m
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render
from fleetform.rules import REGISTRY, Reporter
from variants import INFERENCE_VARIANTS

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
REFERENCE = (ROOT / "blueprints/reference.yaml").read_text()


def _check(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _plan(text: str, tmp_path):
    result = _check(text, tmp_path)
    assert result.model is not None, [f.message for f in result.findings]
    return result.model, record(result.model, render(result.model))


def _named(resources, type_):
    return {r["name"]: r for r in resources if r["type"] == type_}


def _findings(text: str, tmp_path, rule: str) -> list[str]:
    return [f.message for f in _check(text, tmp_path).findings if f.rule == rule]


def _run(rule: str, bp) -> list[str]:
    reporter = Reporter()
    reporter.current = REGISTRY[rule]
    REGISTRY[rule].check(bp, reporter)
    return [i.message for i in reporter.issues]


# --- the recorded plan ---------------------------------------------------------------------------

def test_two_inference_fleets_share_one_cluster_with_an_untainted_system_group(tmp_path):
    _, resources = _plan(REFERENCE, tmp_path)
    assert [r["inputs"]["name"] for r in resources if r["type"] == "aws:eks/cluster:Cluster"] == ["llm-70b"]
    groups = _named(resources, NODE_GROUP)
    assert set(groups) == {"eks-system", "serve-gpu", "small-models-gpu"}
    system = groups["eks-system"]["inputs"]
    assert "taints" not in system or system["taints"] == []  # CoreDNS, the operators and Prometheus land here
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and system["instanceTypes"] == ["m7i.large"]
    assert system["scalingConfig"] == {"desiredSize": 2, "maxSize": 2, "minSize": 2}
    for name in ("serve-gpu", "small-models-gpu"):
        gpu = groups[name]["inputs"]
        assert gpu["taints"] == [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}]
        assert gpu["clusterName"] == "llm-70b" and gpu["labels"]["fleetform.dev/fleet"] == name.removesuffix("-gpu")
        # the node group's tags never reach its Auto Scaling group: none pretends to steer the autoscaler
        assert not [t for t in gpu["tags"] if t.startswith("k8s.io/cluster-autoscaler/")]


def test_node_group_names_do_not_move_when_a_fleet_is_removed(tmp_path):
    _, both = _plan(REFERENCE, tmp_path)
    start = REFERENCE.index("  - name: small-models\n")
    _, one = _plan(REFERENCE[:start], tmp_path)
    def serve(resources):  # names and inputs, but the manifest digest every tag carries
        return {r["name"]: {k: v for k, v in r["inputs"].items() if k not in ("tags", "tagSpecifications")}
                for r in resources if r["parent"] == "serve"}

    assert serve(both) == serve(one) and len(serve(one)) >= 8
    assert "small-models-gpu" not in _named(one, NODE_GROUP) and "eks-cluster" in _named(one, "aws:eks/cluster:Cluster")


def test_a_renamed_inference_fleet_keeps_its_node_group_through_an_alias(tmp_path):
    text = REFERENCE.replace("  - name: small-models\n    role: inference\n",
                             "  - name: small\n    role: inference\n    renamed_from: [small-models]\n")
    _, resources = _plan(text, tmp_path)
    (component,) = [r for r in resources if r["type"] == "fleetform:aws:InferenceFleet" and r["name"] == "small"]
    assert component["aliases"] == ["small-models"]
    children = [r["name"] for r in resources if r["parent"] == "small"]
    assert "small-gpu" in children and all(name.startswith("small-") for name in children)
    # the EKS name is Pulumi's auto-name, which the alias keeps: no forced replacement of the group
    assert "nodeGroupName" not in _named(resources, NODE_GROUP)["small-gpu"]["inputs"]


def test_helm_releases_are_pinned_and_ordered(tmp_path):
    _, resources = _plan(REFERENCE, tmp_path)
    releases = _named(resources, RELEASE)
    charts = addons_data()["charts"]
    assert set(releases) == {f"eks-{n}" for n in ("gpu-operator", "kube-prometheus-stack", "keda",
                                                  "prometheus-adapter", "cluster-autoscaler")}
    for name, r in releases.items():
        pin = charts[name.removeprefix("eks-")]
        assert (r["inputs"]["version"], r["inputs"]["repositoryOpts"]["repo"]) == (str(pin["version"]), pin["repo"])
        # after the untainted nodes, DNS, the namespaces and the ConfigMaps the GPU Operator reads
        assert {"eks-system", "eks-coredns", "eks-namespace-gpu-operator",
                "small-models-configmap-gpu-operator-small-models-mig-parted"} <= set(r["depends_on"])
    assert "eks-cluster-autoscaler" in releases["eks-cluster-autoscaler"]["depends_on"]  # its Pod Identity first
    # the objects that use the releases' CRDs come after them
    scaled = next(r for r in resources if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject")
    assert {"eks-keda", "eks-kube-prometheus-stack", "serve-namespace-llm"} <= set(scaled["depends_on"])
    monitor = next(r for r in resources if r["type"] == "kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    assert "eks-kube-prometheus-stack" in monitor["depends_on"]
    # every Kubernetes object goes through the provider built from the cluster's kubeconfig
    (provider,) = [r for r in resources if r["type"] == "pulumi:providers:kubernetes"]
    kubeconfig = json.loads(provider["inputs"]["kubeconfig"])
    assert kubeconfig["users"][0]["user"]["exec"]["args"][2:5] == ["eks", "get-token", "--cluster-name"]


def test_gpu_operator_values_merge_the_fleets_rendered_values(tmp_path):
    model, resources = _plan(REFERENCE, tmp_path)
    values = _named(resources, RELEASE)["eks-gpu-operator"]["inputs"]["values"]
    small = yaml.safe_load(render(model)["small-models/gpu-operator-values.yaml"])
    assert values["migManager"]["config"]["name"] == small["migManager"]["config"]["name"]
    # serve's H100s carry no mig.config label: the cluster-wide default must leave them whole
    assert values["migManager"]["config"]["default"] == "all-disabled" != small["migManager"]["config"]["default"]
    assert values["driver"] == {"enabled": False} and values["operator"]["resources"]["requests"]["cpu"] == "200m"


def test_capacity_block_and_reservation_node_groups(tmp_path):
    block = REFERENCE.replace("""    nodes: {min: 1, max: 10}
    capacity:
      type: on-demand""", """    nodes: {min: 1, max: 10}
    capacity:
      type: capacity-block
      reservation_id: cr-0123456789abcdef0""")
    _, resources = _plan(block, tmp_path)
    assert _named(resources, NODE_GROUP)["serve-gpu"]["inputs"]["capacityType"] == "CAPACITY_BLOCK"
    template = _named(resources, LT)["serve-nodes"]["inputs"]
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    reserved = block.replace("type: capacity-block\n      reservation_id: cr-0123456789abcdef0",
                             "type: reservation\n      reservation_id: cr-0123456789abcdef0")
    _, resources = _plan(reserved, tmp_path)
    assert _named(resources, NODE_GROUP)["serve-gpu"]["inputs"]["capacityType"] == "ON_DEMAND"
    template = _named(resources, LT)["serve-nodes"]["inputs"]
    assert "instanceMarketOptions" not in template and template["capacityReservationSpecification"]
    # negative control: on-demand targets nothing
    _, resources = _plan(REFERENCE, tmp_path)
    assert "capacityReservationSpecification" not in _named(resources, LT)["serve-nodes"]["inputs"]


def test_cluster_autoscaler_gets_its_role_through_pod_identity(tmp_path):
    _, resources = _plan(REFERENCE, tmp_path)
    (assoc,) = [r["inputs"] for r in resources if r["type"] == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    assert (assoc["namespace"], assoc["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    role = _named(resources, "aws:iam/role:Role")["eks-cluster-autoscaler"]["inputs"]
    trust = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    policy = json.loads(_named(resources, "aws:iam/rolePolicy:RolePolicy")["eks-cluster-autoscaler"]["inputs"]["policy"])
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    (scale,) = [s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert scale["Condition"] == {"Null": {"aws:ResourceTag/k8s.io/cluster-autoscaler/llm-70b": "false"}}
    assert {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup",
            "autoscaling:DescribeAutoScalingGroups", "eks:DescribeNodegroup"} <= actions
    values = _named(resources, RELEASE)["eks-cluster-autoscaler"]["inputs"]["values"]
    assert values["rbac"]["serviceAccount"]["name"] == assoc["serviceAccount"]
    assert values["autoDiscovery"]["clusterName"] == "llm-70b"
    assert values["image"]["tag"] == "v1.33.6"  # the autoscaler's minor follows the cluster's 1.33


def test_models_streaming_weights_from_s3_get_a_read_only_pod_identity(tmp_path):
    text = REFERENCE.replace("        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                             "        weights: {source: s3, uri: \"s3://acme-weights/llama-3.1-70b/\"}\n")
    _, resources = _plan(text, tmp_path)
    assocs = _named(resources, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assoc = assocs["eks-serve-llama-70b-weights"]
    assert (assoc["inputs"]["namespace"], assoc["inputs"]["serviceAccount"]) == ("llm", "llama-70b-weights")
    assert "eks-eks-pod-identity-agent" in assoc["depends_on"]
    policy = json.loads(_named(resources, "aws:iam/rolePolicy:RolePolicy")["eks-serve-llama-70b-weights"]
                        ["inputs"]["policy"])
    # every statement exactly: a resource widened to the bucket or `*`, an action added or a condition dropped fails
    assert policy == {"Version": "2012-10-17", "Statement": [
        {"Sid": "Read0", "Effect": "Allow", "Action": "s3:GetObject",
         "Resource": "arn:aws:s3:::acme-weights/llama-3.1-70b/*"},
        {"Sid": "List0", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::acme-weights",
         "Condition": {"StringLike": {"s3:prefix": ["llama-3.1-70b/*"]}}}]}
    # the service account exists before the Deployment that names it
    account = next(r for r in resources if r["type"] == "kubernetes:core/v1:ServiceAccount")
    deployment = next(r for r in resources if r["type"] == "kubernetes:apps/v1:Deployment" and r["parent"] == "serve")
    assert account["name"] in deployment["depends_on"]
    # negative control: models from the Hub get no S3 role
    _, hub = _plan(REFERENCE, tmp_path)
    assert set(_named(hub, "aws:eks/podIdentityAssociation:PodIdentityAssociation")) == {"eks-cluster-autoscaler"}


def test_one_adapter_release_serves_every_fleets_rendered_rules(tmp_path):
    model = _check(REFERENCE, tmp_path).model
    files = dict(render(model))
    rendered = yaml.safe_load(files["small-models/prometheus-adapter-values.yaml"])
    values = _named(record(model, files), RELEASE)["eks-prometheus-adapter"]["inputs"]["values"]
    assert values["rules"] == rendered["rules"] and rendered["rules"]["custom"]  # the rule the HPA reads
    assert values["prometheus"]["url"] == "http://prometheus-operated.monitoring.svc"  # fleetform's own values stay
    # a second fleet with the same rule: one release, the rule once
    files["serve/prometheus-adapter-values.yaml"] = files["small-models/prometheus-adapter-values.yaml"]
    values = _named(record(model, files), RELEASE)["eks-prometheus-adapter"]["inputs"]["values"]
    assert values["rules"] == rendered["rules"]


def test_every_kubernetes_version_fleetform_renders_has_a_cluster_autoscaler():
    from fleetform.rules.inference import K8S_MAX, K8S_MIN

    tags = addons_data()["charts"]["cluster-autoscaler"]["image_tags"]
    assert set(tags) == {f"1.{m}" for m in range(K8S_MIN[1], K8S_MAX[1] + 1)}
    assert all(tag.startswith("v1.") and int(tag.split(".")[1]) <= int(minor.split(".")[1]) for minor, tag in tags.items())


def test_switching_keda_to_hpa_deletes_the_scaled_object(tmp_path):
    _, keda = _plan(INFERENCE_VARIANTS["hpa-three-models"].replace("autoscaler: hpa", "autoscaler: keda"), tmp_path)
    _, hpa = _plan(INFERENCE_VARIANTS["hpa-three-models"], tmp_path)
    before = {r["name"] for r in keda if r["type"].startswith("kubernetes:")}
    after = {r["name"] for r in hpa if r["type"].startswith("kubernetes:")}
    gone, new = before - after, after - before
    # Pulumi deletes what leaves the program: the ScaledObjects and the KEDA release go, HPAs come
    assert {n for n in gone if "scaledobject" in n} == {f"serve-scaledobject-serve-model-{i}" for i in range(3)}
    assert "eks-keda" in gone and "eks-prometheus-adapter" in new
    assert {n for n in new if "horizontalpodautoscaler" in n} == {
        f"serve-horizontalpodautoscaler-serve-model-{i}" for i in range(3)}
    # and no node is replaced for it: the launch templates' data (instance tags included) is unchanged
    templates = [{n: r["inputs"]["tagSpecifications"] for n, r in _named(plan, LT).items()} for plan in (keda, hpa)]
    assert templates[0] == templates[1] and set(templates[0]) == {"eks-system-nodes", "serve-nodes"}


def test_fleetform_diff_shows_the_scaled_object_deleted_and_no_node_rolled(tmp_path):
    from conftest import run_cli

    old, new = tmp_path / "keda.yaml", tmp_path / "hpa.yaml"
    old.write_text(INFERENCE_VARIANTS["hpa-three-models"].replace("autoscaler: hpa", "autoscaler: keda"))
    new.write_text(INFERENCE_VARIANTS["hpa-three-models"])
    result = run_cli("diff", str(old), str(new))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  - ScaledObject serve-scaledobject-serve-model-0" in lines
    assert "  + HorizontalPodAutoscaler serve-horizontalpodautoscaler-serve-model-0" in lines
    assert not [line for line in lines if "rolls the nodes" in line]


def test_plan_text_lists_releases_and_node_groups(tmp_path):
    from conftest import run_cli

    result = run_cli("plan", str(ROOT / "blueprints/reference.yaml"))
    assert result.returncode == 0, result.stderr
    assert "gpu-operator v26.7.0" in result.stdout and "https://helm.ngc.nvidia.com/nvidia" in result.stdout
    assert "eks-system" in result.stdout and "m7i.large" in result.stdout and "small-models-gpu" in result.stdout


# --- the cluster rules ---------------------------------------------------------------------------

def _reference(tmp_path):
    return _check(REFERENCE, tmp_path).model


def test_reference_cluster_admits_everything(tmp_path):
    bp = _reference(tmp_path)
    for rule in ("cluster-admission", "cluster-min-capacity", "cluster-max-capacity", "cluster-system-nodes",
                 "cluster-version", "cluster-gpu-operator"):
        assert _run(rule, bp) == [], rule


def test_allocatable_follows_nodeadm():
    assert [cpu_reserved_m(n) for n in (1, 2, 4, 16, 192)] == [60, 70, 80, 110, 550]  # 192 vCPUs: 60 + 10 + 10 + 188 x 2.5


def _with(bp, groups=None, workloads=None):
    cluster = bp.cluster
    return replace(bp, cluster=replace(cluster, node_groups=groups or cluster.node_groups,
                                       workloads=workloads or cluster.workloads))


def test_admission_needs_an_untainted_node_for_the_system_pods(tmp_path):
    bp = _reference(tmp_path)
    system, *gpu = bp.cluster.node_groups
    tainted = replace(system, taints=(("dedicated", "system", "NoSchedule"),))
    messages = _run("cluster-admission", _with(bp, groups=(tainted, *gpu)))
    assert any("coredns" in m and "taint dedicated=system:NoSchedule not tolerated" in m for m in messages)
    assert any("gpu-operator" in m for m in messages) and any("nfd-master" in m for m in messages)


def test_admission_checks_labels_taints_and_resources_of_the_gpu_group(tmp_path):
    bp = _reference(tmp_path)
    workloads = list(bp.cluster.workloads)
    i = next(n for n, w in enumerate(workloads) if w.name == "serve/llama-70b")
    vllm = workloads[i]
    for change, expected in (
            (dict(node_selector=(("nvidia.com/gpu.product", "NVIDIA-H100-PCIe"),)),
             "label nvidia.com/gpu.product=NVIDIA-H100-PCIe missing"),
            (dict(tolerations=()), "taint nvidia.com/gpu=present:NoSchedule not tolerated"),
            (dict(memory_mib=3_000_000), "memory 2929.7 GiB >"),
            (dict(ephemeral_gib=40_000), "ephemeral storage 40000 GiB >"),
            (dict(devices=(("nvidia.com/gpu", 9),)), "9 x nvidia.com/gpu > 8 per node")):
        workloads[i] = replace(vllm, **change)
        messages = _run("cluster-admission", _with(bp, workloads=tuple(workloads)))
        assert len(messages) == 1 and expected in messages[0], (change, messages)
    workloads[i] = vllm
    assert _run("cluster-admission", _with(bp, workloads=tuple(workloads))) == []


def test_minimum_system_nodes_hold_the_system_pods(tmp_path):
    bp = _reference(tmp_path)
    system, *gpu = bp.cluster.node_groups
    small = replace(system, min=1, cpu_m=1000)  # every pod fits a node, not all of them one node
    assert _run("cluster-admission", _with(bp, groups=(small, *gpu))) == []
    (message,) = _run("cluster-min-capacity", _with(bp, groups=(small, *gpu)))
    assert "node group system at its minimum of 1" in message
    assert _run("cluster-min-capacity", bp) == []


def test_maximum_nodes_hold_maximum_replicas_in_cpu_not_only_gpus(tmp_path):
    bp = _reference(tmp_path)
    workloads = list(bp.cluster.workloads)
    i = next(n for n, w in enumerate(workloads) if w.name == "serve/llama-70b")
    # GPUs allow 2 replicas a node, CPU only one: 20 replicas need 20 nodes, the fleet has 10
    workloads[i] = replace(workloads[i], cpu_m=120_000)
    (message,) = _run("cluster-max-capacity", _with(bp, workloads=tuple(workloads)))
    assert "node group serve at its maximum of 10" in message and "20 x serve/llama-70b" in message
    # and the minimum: 2 replicas on 1 node
    (message,) = _run("cluster-min-capacity", _with(bp, workloads=tuple(workloads)))
    assert "at its minimum of 1 x p5.48xlarge" in message and "2 x serve/llama-70b" in message


def test_gpu_shortage_is_left_to_the_inference_rules(tmp_path):
    text = REFERENCE.replace("replicas: {min: 2, max: 20}", "replicas: {min: 2, max: 30}")
    findings = _check(text, tmp_path).findings
    assert [f.rule for f in findings if f.rule.startswith(("cluster-", "autoscaler-reach"))] == ["autoscaler-reach"]


def test_fleets_sharing_a_cluster_share_its_version(tmp_path):
    text = REFERENCE.replace('      version: "1.33"\n      namespace: small-models',
                             '      version: "1.32"\n      namespace: small-models')
    (message,) = _findings(text, tmp_path, "cluster-version")
    assert "'small-models' asks for Kubernetes 1.32" in message


def test_one_gpu_operator_cannot_share_some_fleets_gpus_and_not_others(tmp_path):
    text = REFERENCE.replace("    gpu_sharing:\n      strategy: mig                 # none | time-slicing | mps | mig\n"
                             "      profile: 3g.40gb              # must be a MIG profile of this GPU\n",
                             "    gpu_sharing: {strategy: time-slicing, replicas: 2}\n")
    messages = _findings(text, tmp_path, "cluster-gpu-operator")
    assert len(messages) == 1 and "fleet 'serve' shares the cluster's GPU Operator" in messages[0]
    assert _findings(REFERENCE, tmp_path, "cluster-gpu-operator") == []


def test_system_nodes_from_the_blueprint(tmp_path):
    text = REFERENCE.replace("    ssh_ingress_cidrs: []", "    ssh_ingress_cidrs: []\n"
                             "  eks:\n    system_nodes: {instance_type: m7i.lrge, nodes: 2}")
    (message,) = _findings(text, tmp_path, "cluster-system-nodes")
    assert "'m7i.lrge'" in message
    result = _check(text, tmp_path)
    (finding,) = [f for f in result.findings if f.rule == "cluster-system-nodes"]
    assert "did you mean 'm7i.large'?" in finding.hint
    good = text.replace("m7i.lrge, nodes: 2}", "m7i.xlarge, nodes: {min: 2, max: 4}}\n"
                        "    api_access_cidrs: [203.0.113.0/24]")
    _, resources = _plan(good, tmp_path)
    system = _named(resources, NODE_GROUP)["eks-system"]["inputs"]
    assert system["instanceTypes"] == ["m7i.xlarge"] and system["scalingConfig"]["maxSize"] == 4
    vpc = _named(resources, "aws:eks/cluster:Cluster")["eks-cluster"]["inputs"]["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["203.0.113.0/24"]

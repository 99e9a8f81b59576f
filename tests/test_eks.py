"""The one EKS cluster of a blueprint's inference fleets: what the Pulumi program records under
the mocks (node groups, Helm releases and their order, Capacity Blocks, Pod Identity), and the
cluster rule stage, each check with a negative control."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml

from conftest import ROOT, check_text as _check, rule_messages as _run
from fleetform.cluster import addons_data, cpu_reserved_m
from fleetform.plan import record
from fleetform.render import render
from variants import INFERENCE_VARIANTS

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
REFERENCE = (ROOT / "blueprints/reference.yaml").read_text()


def _plan(text: str, tmp_path):
    result = _check(text, tmp_path)
    assert result.model is not None, [f.message for f in result.findings]
    return result.model, record(result.model, render(result.model))


def _named(resources, type_):
    return {r["name"]: r for r in resources if r["type"] == type_}


def _findings(text: str, tmp_path, rule: str) -> list[str]:
    return [f.message for f in _check(text, tmp_path).findings if f.rule == rule]


# --- the recorded plan ---------------------------------------------------------------------------

def test_two_inference_fleets_share_one_cluster_with_an_untainted_system_group(tmp_path):
    _, resources = _plan(REFERENCE, tmp_path)
    assert [r["inputs"]["name"] for r in resources if r["type"] == "aws:eks/cluster:Cluster"] == ["llm-70b_plan"]  # cluster_id: blueprint and stack
    groups = _named(resources, NODE_GROUP)
    assert set(groups) == {"eks-system", "serve-gpu", "small-models-gpu"}
    system = groups["eks-system"]["inputs"]
    assert "taints" not in system or system["taints"] == []  # CoreDNS, the operators and Prometheus land here
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and system["instanceTypes"] == ["m7i.large"]
    assert system["scalingConfig"] == {"desiredSize": 2, "maxSize": 2, "minSize": 2}
    for name in ("serve-gpu", "small-models-gpu"):
        gpu = groups[name]["inputs"]
        assert gpu["taints"] == [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}]
        assert gpu["clusterName"] == "llm-70b_plan" and gpu["labels"]["fleetform.dev/fleet"] == name.removesuffix("-gpu")
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
    assert scale["Condition"] == {"Null": {"aws:ResourceTag/k8s.io/cluster-autoscaler/llm-70b_plan": "false"}}
    assert {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup",
            "autoscaling:DescribeAutoScalingGroups", "eks:DescribeNodegroup"} <= actions
    values = _named(resources, RELEASE)["eks-cluster-autoscaler"]["inputs"]["values"]
    assert values["rbac"]["serviceAccount"]["name"] == assoc["serviceAccount"]
    assert values["autoDiscovery"]["clusterName"] == "llm-70b_plan"  # the EKS name: blueprint and stack
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


# --- issue 18: what the first `pulumi up` of an inference blueprint needs ----------------------------

import copy  # noqa: E402
import http.server  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402

from fleetform.policies import check as check_policies  # noqa: E402

CLUSTER = "aws:eks/cluster:Cluster"
SECRET = "kubernetes:core/v1:Secret"
EXISTING_NETWORK = ("    cidr: 10.40.0.0/16              # create a VPC; or give vpc_id + subnet_id to use existing ones\n",
                    "    vpc_id: vpc-0a1b2c3d4e5f67890\n    subnet_id: subnet-0a1b2c3d4e5f67890\n")


@pytest.fixture(scope="module")
def reference_plan(tmp_path_factory):
    return _plan(REFERENCE, tmp_path_factory.mktemp("reference"))


def _policy_ids(resources, model) -> list[str]:
    return [v[0] for v in check_policies(resources, model)]


def test_the_endpoint_answers_the_address_pulumi_up_runs_from(reference_plan):
    """The reference lists no api_access_cidrs and its VPC is made by the same run: the endpoint is public
    for the deploying address only (the mocks' stand-in, fleetform/plan.py MOCK_DEPLOYER_CIDR), private
    access stays on for the nodes."""
    model, resources = reference_plan
    (cluster,) = [r["inputs"] for r in resources if r["type"] == CLUSTER]
    assert cluster["vpcConfig"]["endpointPublicAccess"] is True and cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.10/32"]


def test_endpoint_check_fails_on_a_private_endpoint_in_a_new_vpc(reference_plan):
    """Negative control of eks-endpoint-reachable (EKS User Guide, "Cluster API server endpoint": a
    private-only endpoint is reached only from within the cluster's VPC)."""
    model, resources = reference_plan
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == CLUSTER:
            r["inputs"]["vpcConfig"].update(endpointPublicAccess=False)
            r["inputs"]["vpcConfig"].pop("publicAccessCidrs")
    assert _policy_ids(broken, model) == ["eks-endpoint-reachable"]
    for r in broken:  # public access without CIDRs: EKS opens it to 0.0.0.0/0
        if r["type"] == CLUSTER:
            r["inputs"]["vpcConfig"].update(endpointPublicAccess=True)
    assert _policy_ids(broken, model) == ["eks-endpoint-reachable"]


def test_a_private_endpoint_needs_an_existing_vpc(tmp_path):
    text = REFERENCE.replace("    ssh_ingress_cidrs: []", "    ssh_ingress_cidrs: []\n  eks:\n    api_access_cidrs: []")
    assert _findings(text, tmp_path, "eks-api-access") == [
        "api_access_cidrs is empty, so the EKS endpoint is private, but this run creates the VPC it lives in: "
        "`pulumi up` cannot reach the cluster to install what the fleets need"]
    text = text.replace(*EXISTING_NETWORK).replace("api_access_cidrs: []",
                                                    "api_access_cidrs: []\n    subnet_ids: [subnet-0b1b2c3d4e5f67890]")
    assert _findings(text, tmp_path, "eks-api-access") == []
    model, resources = _plan(text, tmp_path)
    (cluster,) = [r["inputs"] for r in resources if r["type"] == CLUSTER]
    assert cluster["vpcConfig"]["endpointPublicAccess"] is False and "publicAccessCidrs" not in cluster["vpcConfig"]
    # the endpoint's security group admits HTTPS from the VPC `pulumi up` then runs in
    rule = _named(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")["eks-api-from-vpc"]["inputs"]
    assert (rule["fromPort"], rule["toPort"], rule["cidrIpv4"]) == (443, 443, "10.0.0.0/16")
    assert _policy_ids(resources, model) == []
    without = [r for r in resources if r["name"] != "eks-api-from-vpc"]
    assert _policy_ids(without, model) == ["eks-endpoint-reachable"]


def test_an_existing_vpc_gives_the_control_plane_two_subnets(tmp_path):
    """EKS User Guide, "View Amazon EKS networking requirements for VPC and subnets": "at least two subnets
    that are in different Availability Zones"."""
    text = REFERENCE.replace(*EXISTING_NETWORK)
    assert _findings(text, tmp_path, "eks-subnets") == [
        "the EKS cluster would get the single subnet subnet_id; CreateCluster requires subnets in at least two "
        "availability zones"]
    text = text.replace("    ssh_ingress_cidrs: []", "    ssh_ingress_cidrs: []\n  eks:\n    subnet_ids: [subnet-0b1b2c3d4e5f67890]")
    assert _findings(text, tmp_path, "eks-subnets") == []
    model, resources = _plan(text, tmp_path)
    (cluster,) = [r["inputs"] for r in resources if r["type"] == CLUSTER]
    assert cluster["vpcConfig"]["subnetIds"] == ["subnet-0a1b2c3d4e5f67890", "subnet-0b1b2c3d4e5f67890"]
    groups = _named(resources, NODE_GROUP)
    assert {tuple(g["inputs"]["subnetIds"]) for g in groups.values()} == {("subnet-0a1b2c3d4e5f67890",)}
    assert _policy_ids(resources, model) == []


def test_subnet_check_fails_on_one_subnet_or_one_zone(reference_plan):
    model, resources = reference_plan
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == CLUSTER:
            r["inputs"]["vpcConfig"]["subnetIds"] = ["network-private-id"]
    assert _policy_ids(broken, model) == ["eks-subnets"]
    broken = copy.deepcopy(resources)
    for r in broken:  # two subnets, one zone
        if r["type"] == "aws:ec2/subnet:Subnet" and r["name"] == "network-private-b":
            r["inputs"]["availabilityZone"] = "us-east-1a"
    assert _policy_ids(broken, model) == ["eks-subnets"]


def test_eks_nodes_keep_pods_off_instance_metadata(reference_plan):
    """Hop limit 1 on every EKS node (EKS Best Practices Guide, Security: restrict the instance profile to
    the node); the training nodes, which run no pods, are not EKS node groups."""
    model, resources = reference_plan
    templates = _named(resources, LT)
    for name in ("eks-system-nodes", "serve-nodes", "small-models-nodes"):
        assert templates[name]["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] == 1
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == LT and r["name"] == "serve-nodes":
            r["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] = 2
    assert _policy_ids(broken, model) == ["eks-node-metadata"]


def test_a_later_update_leaves_the_desired_size_to_the_autoscaler(reference_plan):
    model, resources = reference_plan
    for group in _named(resources, NODE_GROUP).values():
        assert group["options"]["ignoreChanges"] == ["scalingConfig.desiredSize"]
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == NODE_GROUP and r["name"] == "serve-gpu":
            del r["options"]
    assert _policy_ids(broken, model) == ["eks-node-group-size"]


def test_gpu_node_groups_carry_the_autoscalers_gpu_label(reference_plan):
    """kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/aws_cloud_provider.go:
    GPULabel = "k8s.amazonaws.com/accelerator"; the system group has no GPU and no label."""
    _, resources = reference_plan
    groups = _named(resources, NODE_GROUP)
    assert groups["serve-gpu"]["inputs"]["labels"]["k8s.amazonaws.com/accelerator"] == "nvidia-h100-80gb"
    assert "k8s.amazonaws.com/accelerator" not in groups["eks-system"]["inputs"]["labels"]


def test_network_policies_are_enforced_and_admit_what_the_servers_need(reference_plan, tmp_path):
    """vpc-cni enforces NetworkPolicy only with enableNetworkPolicy "true" (EKS User Guide, "Restrict Pod
    network traffic with Kubernetes network policies"). What must still pass once it is enforced: the
    policy isolates ingress only, so DNS and the weight download (egress) are untouched; kubelet probes
    come from the node, which is always allowed (Kubernetes docs, "Network Policies": "traffic to and from
    the node where a Pod is running is always allowed"); Prometheus scrapes the servers' port from the
    namespace kube-prometheus-stack is installed in."""
    model, resources = reference_plan
    (cni,) = [r for r in resources if r["type"] == "aws:eks/addon:Addon" and r["inputs"]["addonName"] == "vpc-cni"]
    assert json.loads(cni["inputs"]["configurationValues"]) == {"enableNetworkPolicy": "true"}
    prometheus = model.cluster.release("kube-prometheus-stack").namespace
    files = render(model)
    for fleet in ("serve", "small-models"):
        policy = yaml.safe_load(files[f"{fleet}/k8s/networkpolicy.yaml"])["spec"]
        assert policy["policyTypes"] == ["Ingress"]
        sources = policy["ingress"][0]["from"]
        assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": prometheus}}} in sources
        ports = {p["port"] for p in policy["ingress"][0]["ports"]}
        server = next(f for f in model.fleets if f.name == fleet).kube.servers[0]
        deployment = yaml.safe_load(files[f"{fleet}/k8s/{server.name}-deployment.yaml"])
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        assert {p["containerPort"] for p in container["ports"]} <= ports  # the API and /metrics port
    broken = copy.deepcopy(resources)
    for r in broken:
        if r is not None and r["type"] == "aws:eks/addon:Addon" and r["inputs"]["addonName"] == "vpc-cni":
            del r["inputs"]["configurationValues"]
    assert _policy_ids(broken, model) == ["eks-network-policy-enforced"]


def test_every_secret_a_pod_reads_is_created_from_a_pulumi_secret(reference_plan, tmp_path):
    """The gated models' hf-token Secret lives in a namespace only this run creates: the program makes it
    from the Pulumi secret fleetform:secret-hf-token, and its value never reaches the plan."""
    model, resources = reference_plan
    secrets = {(r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r
               for r in resources if r["type"] == SECRET}
    assert set(secrets) == {("llm", "hf-token"), ("small-models", "hf-token")}
    assert all(s["inputs"]["stringData"] == "[secret]" for s in secrets.values())
    assert "mock-secret-value" not in json.dumps(resources)
    # a Secret exists before the Deployment that mounts it
    deployment = _named(resources, "kubernetes:apps/v1:Deployment")["serve-deployment-llm-llama-70b"]
    assert secrets[("llm", "hf-token")]["name"] in deployment["depends_on"]
    text = REFERENCE.replace("        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                             "        hf_token_secret: hf-token\n        api_key_secret: llama-api-key\n")
    model2, resources2 = _plan(text, tmp_path)
    (api_key,) = [r for r in resources2 if r["type"] == SECRET and r["inputs"]["metadata"]["name"] == "llama-api-key"]
    assert api_key["inputs"]["stringData"] == "[secret]" and _policy_ids(resources2, model2) == []


def test_references_check_fails_on_what_nobody_creates(reference_plan):
    """Negative controls of pod-references-exist: the Secret gone, a ConfigMap and a claim nobody makes."""
    model, resources = reference_plan
    without = [r for r in resources if not (r["type"] == SECRET and r["inputs"]["metadata"]["namespace"] == "llm")]
    assert _policy_ids(without, model) == ["pod-references-exist"]
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["name"] == "serve-deployment-llm-llama-70b":
            spec = r["inputs"]["spec"]["template"]["spec"]
            spec["volumes"] += [{"name": "x", "configMap": {"name": "nowhere"}},
                                {"name": "y", "persistentVolumeClaim": {"claimName": "nobody"}}]
            spec["serviceAccountName"] = "ghost"
    messages = [m for p, _, m in check_policies(broken, model) if p == "pod-references-exist"]
    assert messages == ["reads ServiceAccount llm/ghost, which the program does not create and the blueprint does not "
                        "declare",
                        "reads ConfigMap llm/nowhere, which the program does not create and the blueprint does not declare",
                        "reads PersistentVolumeClaim llm/nobody, which the program does not create and the blueprint "
                        "does not declare"]


def test_a_weights_claim_is_declared_by_the_blueprint(tmp_path):
    text = REFERENCE.replace("        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                             "        weights: {source: volume, claim: model-weights, path: llama-3.1-70b}\n")
    model, resources = _plan(text, tmp_path)
    assert _policy_ids(resources, model) == []


ADDON = "aws:eks/addon:Addon"
VOLUME_WEIGHTS = ("        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n",
                  "        weights: {source: volume, claim: model-weights, path: llama-3.1-70b}\n")


@pytest.fixture(scope="module")
def volume_plan(tmp_path_factory):
    return _plan(REFERENCE.replace(*VOLUME_WEIGHTS), tmp_path_factory.mktemp("volume"))


def test_a_weights_claim_gets_the_fsx_csi_driver_without_a_role(volume_plan, reference_plan):
    """The claim's volume is the blueprint's FSx for Lustre: the EKS add-on aws-fsx-csi-driver (EKS User Guide,
    "Amazon FSx CSI driver") serves it, after the Pod Identity agent it fails without ("Without this component,
    the add-on will fail") and the system nodes its controller runs on. Static provisioning calls no AWS API
    (kubernetes-sigs/aws-fsx-csi-driver v1.9.0: CSIDriver attachRequired false, pkg/driver/node.go
    NodePublishVolume only mounts DNSNAME@tcp:/MOUNTNAME), so the add-on gets no role."""
    model, resources = volume_plan
    addons = _named(resources, ADDON)
    fsx = addons["eks-aws-fsx-csi-driver"]
    assert fsx["inputs"]["addonName"] == "aws-fsx-csi-driver" and "serviceAccountRoleArn" not in fsx["inputs"]
    assert {"eks-eks-pod-identity-agent", "eks-system"} <= set(fsx["depends_on"])
    assert not [i for i in model.cluster.pod_identities if "fsx" in i.name]
    # its controller and node plugin are workloads the cluster must admit; the node plugin reaches the GPU nodes
    node = next(w for w in model.cluster.workloads if w.name == "fsx-csi-node")
    assert node.daemon and node.tolerations[0].tolerates("nvidia.com/gpu", "NoSchedule")
    assert any(w.name == "fsx-csi-controller" and w.min_replicas == 2 for w in model.cluster.workloads)
    # no claim, no driver
    assert "eks-aws-fsx-csi-driver" not in _named(reference_plan[1], ADDON)
    assert not [w for w in reference_plan[0].cluster.workloads if w.name.startswith("fsx-csi")]


def test_the_eks_nodes_reach_the_fsx_of_a_weights_claim(volume_plan, reference_plan):
    """FSx for Lustre User Guide, "File system access control with Amazon VPC": the file system's security
    group admits TCP 988 and 1018-1023 from its clients. The EKS managed nodes carry the cluster security group
    EKS makes (EKS User Guide, "Customize managed nodes with launch templates": no security group in the launch
    template, the cluster security group), not the training nodes' group the FSx admits already."""
    model, resources = volume_plan
    rules = _named(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    (fs,) = [r for r in resources if r["type"] == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    (group,) = fs["inputs"]["securityGroupIds"]
    ports = set()
    for name in ("eks-nodes-lustre-988", "eks-nodes-lustre-1018"):
        rule = rules[name]
        assert rule["inputs"]["securityGroupId"] == group and rule["inputs"]["ipProtocol"] == "tcp"
        assert rule["inputs"]["referencedSecurityGroupId"] == "eks-cluster-sg"  # the mocks' clusterSecurityGroupId
        assert rule["deps"]["referencedSecurityGroupId"] == ["aws:eks/cluster:Cluster::eks-cluster"]
        ports.add((rule["inputs"]["fromPort"], rule["inputs"]["toPort"]))
    assert ports == {(988, 988), (1018, 1023)}
    assert not [n for n in _named(reference_plan[1], "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
                if n.startswith("eks-nodes-lustre")]
    assert _policy_ids(resources, model) == []


def test_the_claim_check_fails_without_the_driver_or_the_lustre_rule(volume_plan):
    """Negative controls of eks-volume-claims-mount."""
    model, resources = volume_plan
    without = [r for r in resources if r["name"] != "eks-aws-fsx-csi-driver"]
    messages = [m for p, _, m in check_policies(without, model) if p == "eks-volume-claims-mount"]
    assert messages == ["mounts the weights claim model-weights, but no EKS add-on aws-fsx-csi-driver serves its volume"]
    without = [r for r in resources if r["name"] != "eks-nodes-lustre-1018"]
    messages = [m for p, _, m in check_policies(without, model) if p == "eks-volume-claims-mount"]
    assert messages == ["its security group security-nodes-id admits no Lustre (TCP 1018-1023) from the EKS cluster's "
                        "security group: the nodes cannot mount the weights claim"]
    broken = copy.deepcopy(resources)  # a rule from the training nodes' own group is no rule for the EKS nodes
    for r in broken:
        if r["name"] == "eks-nodes-lustre-988":
            r["deps"]["referencedSecurityGroupId"] = ["aws:ec2/securityGroup:SecurityGroup::security-nodes"]
    assert _policy_ids(broken, model) == ["eks-volume-claims-mount"]


def test_every_inference_cluster_gets_metrics_server(reference_plan):
    """EKS User Guide, "Community add-ons": metrics-server (namespace kube-system, no IAM). It serves
    metrics.k8s.io (`kubectl top`, cpu/memory triggers); fleetform's HPA reads the adapter's external metric,
    so it is installed for the people reading the cluster, on every inference cluster. It runs a Deployment:
    created after the system nodes, and admitted there (chart values: 100m/200Mi, no tolerations)."""
    model, resources = reference_plan
    addon = _named(resources, ADDON)["eks-metrics-server"]
    assert addon["inputs"]["addonName"] == "metrics-server" and "eks-system" in addon["depends_on"]
    (server,) = [w for w in model.cluster.workloads if w.name == "metrics-server"]
    assert (server.cpu_m, server.memory_mib, server.tolerations) == (100, 200, ())
    assert "metrics-server" in model.cluster.addons


def _secret_findings(tmp_path, args: str):
    text = REFERENCE.replace("        max_model_len: 8192\n        replicas: {min: 2, max: 20}",
                             f"        max_model_len: 8192\n        extra_args: {args}\n        replicas: {{min: 2, max: 20}}")
    return _findings(text, tmp_path, "secret-flags")


@pytest.mark.parametrize("args, flag", [
    ('["--hf-token", "hf_x"]', "--hf-token"), ('["--hf_token=hf_x"]', "--hf-token"), ('["--hf-tok", "hf_x"]', "--hf-token"),
    ('["--api-key=k"]', "--api-key"), ('["--api_key", "k"]', "--api-key"), ('["--api-ke", "k"]', "--api-key"),
])
def test_secret_flags_are_refused_by_name_and_alias(tmp_path, args, flag):
    """vLLM 0.11.0: --hf-token (engine/arg_utils.py) and --api-key (entrypoints/openai/cli_args.py) carry
    secrets; FlexibleArgumentParser reads `_` as `-` and leaves argparse's prefix matching on."""
    (message,) = _secret_findings(tmp_path, args)
    assert "would put a secret in plain text" in message and flag in message
    assert "hf_x" not in message and "=k" not in message


def test_other_flags_are_no_secret(tmp_path):
    assert _secret_findings(tmp_path, '["--max-num-seqs", "256", "--api-server-count", "2", "--hf-overrides", "{}"]') == []


def test_scale_to_zero_is_refused(tmp_path):
    text = REFERENCE.replace("    nodes: {min: 1, max: 10}", "    nodes: {min: 0, max: 10}").replace(
        "        replicas: {min: 2, max: 20}", "        replicas: {min: 0, max: 20}")
    messages = _findings(text, tmp_path, "scale-to-zero")
    assert len(messages) == 2 and "may scale to 0 nodes" in messages[0] and "minReplicas 0" in messages[1]


def test_internet_however_split_is_a_warning(tmp_path):
    text = REFERENCE.replace("    ssh_ingress_cidrs: []", "    ssh_ingress_cidrs: [0.0.0.0/1, 128.0.0.0/1]\n"
                             "  eks:\n    api_access_cidrs: [1.2.3.4/0]")
    assert _findings(text, tmp_path, "ssh-open") == [
        "SSH is open to the whole internet: 0.0.0.0/1, 128.0.0.0/1 together cover every IPv4 address"]
    assert len(_findings(text, tmp_path, "eks-api-open")) == 1
    text = text.replace("[1.2.3.4/0]", "[0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/2]")  # a quarter stays closed
    assert _findings(text, tmp_path, "eks-api-open") == []


def test_label_values_over_63_characters_are_refused(tmp_path):
    """Kubernetes "Labels and Selectors": a label value is at most 63 characters."""
    text = REFERENCE.replace("  - name: small-models\n", "  - name: small-models\n    renamed_from: [" + "s" * 60 + "]\n")
    (message,) = _findings(text, tmp_path, "k8s-label-values")
    assert "is 69 characters" in message
    assert _findings(REFERENCE, tmp_path, "k8s-label-values") == []


class _Echo(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, expected", [(b"52.94.76.10\n", "52.94.76.10/32"), (b"<html>", None),
                                            (b"10.1.2.3\n", None), (b"198.51.100.7\n", None)])
def test_the_deploying_address_is_one_public_ipv4_address(body, expected):
    """fleetform/pulumi_program.py asks checkip.amazonaws.com; here a server on 127.0.0.1 answers instead."""
    from fleetform.providers.aws.deployer import deployer_cidr

    handler = type("Handler", (_Echo,), {"body": body})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        if expected:
            assert deployer_cidr(url, timeout=5) == expected
        else:
            with pytest.raises(ValueError):
                deployer_cidr(url, timeout=5)
    finally:
        server.shutdown()
        server.server_close()


def test_a_non_http_answer_to_the_address_lookup_is_a_value_error():
    """A captive portal or a proxy that answers something other than HTTP raised http.client.BadStatusLine,
    which is neither the OSError nor the ValueError fleetform/pulumi_program.py turns into one line: `pulumi up`
    printed a traceback."""
    from fleetform.providers.aws.deployer import deployer_cidr

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def answer():
        connection, _ = listener.accept()
        connection.recv(4096)
        connection.sendall(b"garbage\r\n\r\n")
        connection.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        with pytest.raises(ValueError, match="no HTTP answer"):
            deployer_cidr(f"http://127.0.0.1:{listener.getsockname()[1]}/", timeout=5)
    finally:
        listener.close()


def test_a_hand_typed_deployer_address_is_sent_to_eks_as_a_cidr(reference_plan):
    """`pulumi config set fleetform:deployer-cidr 203.0.113.10` went to EKS as written; publicAccessCidrs takes
    CIDR blocks ("Indicates which CIDR blocks can access the Amazon EKS public API server endpoint", EKS API
    Reference, VpcConfigRequest), so the address is its /32."""
    import dataclasses

    from fleetform.providers.aws.kube import api_access

    model, _ = reference_plan
    cluster = dataclasses.replace(model.cluster, api_access_cidrs=None)
    assert api_access(cluster, "203.0.113.10") == ("203.0.113.10/32",)
    assert api_access(cluster, "203.0.113.10/32\n") == ("203.0.113.10/32",)
    assert api_access(cluster, "198.51.100.7/24") == ("198.51.100.0/24",)
    assert "ipaddress.ip_network(deployer.strip(), strict=False)" in (ROOT / "fleetform/pulumi_program.py").read_text()


FAKE_KUBECTL = r'''#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
    if args[:3] == ["apply", "-f", "-"]:
        log.write("STDIN " + sys.stdin.read() + "\n")
mode = os.environ.get("FAKE_MODE", "")
def pod():
    return args[args.index("pod") + 1] if "pod" in args else args[args.index("logs") + 1]
if "get" in args and "pod" in args and any("exitCode" in a for a in args):
    outsider = pod().endswith("-outsider")
    print(0 if not outsider or mode == "open" else 6 if mode == "dns" else 28)
elif "get" in args and "pod" in args:
    outsider = pod().endswith("-outsider")
    print("Succeeded" if not outsider or mode == "open" else "Failed")
elif "logs" in args:
    name = pod()
    if name.endswith("-models"):
        print(json.dumps({"data": [{"id": name[len("e2e-"):-len("-models")]}]}))
    elif name.endswith("-completion"):
        print(json.dumps({"choices": [{"text": " Paris"}]}))
elif "get" in args and "hpa" in args:
    metrics = [] if mode == "no-metric" else [{"type": "External", "external": {"current": {"averageValue": "0"}}}]
    print(json.dumps({"status": {"currentMetrics": metrics, "conditions": []}}))
'''


@pytest.mark.parametrize("mode, expected", [("", None), ("open", "the NetworkPolicy is not enforced"),
                                            ("no-metric", "reads no current metric value"),
                                            # the outsider's probe failed on DNS, not on the policy: no proof
                                            ("dns", "did not fail by a blocked connection (curl exit code 6")])
def test_the_end_to_end_check_asks_the_cluster_what_a_user_would(mode, expected, tmp_path, monkeypatch, capsys):
    """stacks/check_inference.py is for a user with an AWS account after `pulumi up`; it has not run against
    AWS here. A fake kubectl answers as a working cluster would (or with the policy open, or an HPA without a
    metric value), and the check must pass or fail on exactly that."""
    import runpy

    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_MODE", mode)
    module = runpy.run_path(str(ROOT / "stacks/check_inference.py"))
    code = module["main"]([str(ROOT / "blueprints/reference.yaml"), "--kubectl", str(kubectl)])
    out = capsys.readouterr()
    calls = (tmp_path / "calls").read_text().splitlines()
    if expected is None:
        assert code == 0 and "2 model(s) checked end to end" in out.out
        assert '["-n", "llm", "rollout", "status", "deploy/llama-70b", "--timeout=60m"]' in calls
        assert '["-n", "llm", "get", "hpa", "keda-hpa-llama-70b", "-o", "json"]' in calls  # KEDA's HPA
        assert '["-n", "small-models", "get", "hpa", "llama-8b", "-o", "json"]' in calls  # the adapter's
        pods = [json.loads(c[len("STDIN "):]) for c in calls if c.startswith("STDIN ") and '"Pod"' in c]
        outsider = next(p for p in pods if p["metadata"]["name"] == "e2e-llama-70b-outsider")
        assert outsider["metadata"]["namespace"] == "fleetform-e2e-outsider"
        assert outsider["spec"]["containers"][0]["args"][-1] == "http://llama-70b.llm.svc:8000/v1/models"
        completion = next(p for p in pods if p["metadata"]["name"] == "e2e-llama-70b-completion")
        assert completion["metadata"]["namespace"] == "llm"
        assert all(p["spec"]["securityContext"]["runAsNonRoot"] for p in pods)  # restricted Pod Security
    else:
        assert code == 1 and expected in out.err
    assert calls[-1] == json.dumps(["delete", "namespace", "fleetform-e2e-outsider", "--ignore-not-found",
                                    "--wait=false"])


def test_the_mig_manager_may_reboot_a_node_to_apply_mig(reference_plan, tmp_path):
    """NVIDIA/gpu-operator #1606: with the host driver, turning MIG on may need a reset only a reboot gives;
    the chart's migManager.env WITH_REBOOT defaults to "false" (deployments/gpu-operator/values.yaml)."""
    _, resources = reference_plan
    values = _named(resources, RELEASE)["eks-gpu-operator"]["inputs"]["values"]
    assert {"name": "WITH_REBOOT", "value": "true"} in values["migManager"]["env"]
    _, plain = _plan((ROOT / "blueprints/inference-l4.yaml").read_text(), tmp_path)  # no MIG: no reboots
    assert "migManager" not in _named(plain, RELEASE)["eks-gpu-operator"]["inputs"]["values"]


def test_two_fleets_scrape_the_dcgm_exporter_once(reference_plan):
    """Both fleets render a ServiceMonitor of the GPU Operator's one DCGM exporter; on their shared cluster
    only one is applied, or Prometheus would scrape every GPU twice."""
    _, resources = reference_plan
    monitors = [r["inputs"] for r in resources if r["type"] == "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
                and r["inputs"]["metadata"]["namespace"] == "gpu-operator"]
    assert [m["metadata"]["name"] for m in monitors] == ["serve-dcgm-exporter"]


def test_no_monitor_of_a_control_plane_eks_hides(reference_plan):
    """kube-prometheus-stack scrapes the controller manager, scheduler, etcd and kube-proxy by default
    (chart values kubeControllerManager/kubeScheduler/kubeEtcd/kubeProxy.enabled); on EKS none is reachable,
    and their targets and alerts would be down forever."""
    _, resources = reference_plan
    values = _named(resources, RELEASE)["eks-kube-prometheus-stack"]["inputs"]["values"]
    assert all(values[k] == {"enabled": False} for k in ("kubeControllerManager", "kubeScheduler", "kubeEtcd",
                                                          "kubeProxy"))


def test_a_range_with_host_bits_is_the_network_it_names(tmp_path):
    """`1.2.3.4/0` validated, then `fleetform plan` crashed on it (ValueError: has host bits set) in the
    no-open-ingress policy. In api_access_cidrs the program now passes the network itself (0.0.0.0/0),
    which eks-api-open warns about; in ssh_ingress_cidrs such a range is an error of the `network` rule
    (issue 17), and the Internet split in two halves still gets ssh-open's warning."""
    text = REFERENCE.replace("    ssh_ingress_cidrs: []           # empty: no SSH ingress at all; nodes are reached through SSM",
                             "    ssh_ingress_cidrs: [1.2.3.4/0]\n  eks:\n    api_access_cidrs: [198.51.100.0/24, 1.2.3.4/0]")
    assert _findings(text, tmp_path, "network") == [
        "SSH ingress CIDR '1.2.3.4/0' has host bits set"]
    text = text.replace("ssh_ingress_cidrs: [1.2.3.4/0]", "ssh_ingress_cidrs: [0.0.0.0/1, 128.0.0.0/1]")
    assert len(_findings(text, tmp_path, "ssh-open")) == 1 and len(_findings(text, tmp_path, "eks-api-open")) == 1
    model, resources = _plan(text, tmp_path)
    rules = _named(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert [rules[f"security-ssh-{i}"]["inputs"]["cidrIpv4"] for i in (0, 1)] == ["0.0.0.0/1", "128.0.0.0/1"]
    (cluster,) = [r["inputs"] for r in resources if r["type"] == CLUSTER]
    assert cluster["vpcConfig"]["publicAccessCidrs"] == ["198.51.100.0/24", "0.0.0.0/0"]
    assert _policy_ids(resources, model) == []


def test_the_fsx_stack_output_names_what_a_persistent_volume_needs(tmp_path, monkeypatch):
    """kubernetes-sigs/aws-fsx-csi-driver examples/kubernetes/static_provisioning/specs/pv.yaml: volumeHandle is
    the file system id, volumeAttributes dnsname and mountname; the README's PersistentVolume reads them from
    `pulumi stack output fsx`."""
    import pulumi

    exported = {}
    real = pulumi.export

    def export(name, value):
        pulumi.Output.from_input(value).apply(lambda v: exported.__setitem__(name, v))
        real(name, value)

    monkeypatch.setattr(pulumi, "export", export)
    _plan(REFERENCE.replace(*VOLUME_WEIGHTS), tmp_path)
    assert exported["fsx"] == {"scratch": {"file_system_id": "storage-scratch-id",
                                           "dns_name": "storage-scratch-id.fsx.us-east-1.amazonaws.com",
                                           "mount_name": "abcdefgh"}}

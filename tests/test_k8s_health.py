"""GPU node health on Kubernetes fleets (issue 20, docs/health.md): the EKS node monitoring agent
add-on with its DCGM host engine on the tainted GPU nodes, node auto repair on the GPU node groups,
and the GPU Operator's DCGM settings, each checked against the pinned chart's own values or schema
(tests/data/charts/README.md)."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from conftest import ROOT
from fleetform.cluster import addons_data
from fleetform.health import KUBE_REPAIR_OVERRIDES
from fleetform.render import render

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ADDON = "aws:eks/addon:Addon"
RELEASE = "kubernetes:helm.sh/v3:Release"
CHARTS = ROOT / "tests/data/charts"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from test_eks import REFERENCE, _plan
    return _plan(REFERENCE, tmp_path_factory.mktemp("k8shealth"))


def _named(resources, type_):
    return {r["name"]: r for r in resources if r["type"] == type_}


def test_gpu_node_groups_get_node_auto_repair_and_the_system_group_does_not(plan):
    _, resources = plan
    groups = _named(resources, NODE_GROUP)
    for name in ("serve-gpu", "small-models-gpu"):
        repair = groups[name]["inputs"].get("nodeRepairConfig")
        assert repair is not None and repair["enabled"] is True, (name, repair)
        overrides = repair["nodeRepairConfigOverrides"]
        assert [(o["nodeMonitoringCondition"], o["nodeUnhealthyReason"], o["repairAction"],
                 o["minRepairWaitTimeMins"]) for o in overrides] == list(KUBE_REPAIR_OVERRIDES)
    assert "nodeRepairConfig" not in groups["eks-system"]["inputs"]


def test_repair_overrides_use_what_the_eks_api_accepts():
    """EKS API NodeRepairConfigOverrides: repairAction Replace | Reboot | NoAction, minRepairWaitTimeMins
    at least 1, and all four values given; the reason is one the agent v1.7.0 reports for the condition
    (pkg/reasons/reasons.yaml: AcceleratedHardwareReady DCGMError, "Connection to the DCGM host process
    was lost or could not be established")."""
    for condition, reason, action, minutes in KUBE_REPAIR_OVERRIDES:
        assert action in ("Replace", "Reboot", "NoAction") and minutes >= 1
        assert (condition, reason) == ("AcceleratedHardwareReady", "DCGMError")


def test_the_node_monitoring_agent_addon_lets_its_dcgm_server_onto_tainted_gpu_nodes(plan):
    model, resources = plan
    addons = {r["inputs"]["addonName"]: r["inputs"] for r in _named(resources, ADDON).values()}
    assert "eks-node-monitoring-agent" in addons, sorted(addons)
    config = json.loads(addons["eks-node-monitoring-agent"]["configurationValues"])
    # the add-on accepts only what the chart's configuration schema names (additionalProperties: false)
    schema = json.loads((CHARTS / "eks-node-monitoring-agent-v1.7.0-configuration.schema.json").read_text())
    jsonschema.validate(config, schema)
    tolerations = config["dcgmAgent"]["tolerations"]
    for group in model.cluster.node_groups:
        for key, _value, effect in group.taints:  # every GPU taint is tolerated
            assert any(t.get("operator") == "Exists" and t.get("key") in (None, key)
                       and t.get("effect") in (None, effect) for t in tolerations), (group.name, key)
    assert any(g.taints for g in model.cluster.node_groups), "the reference's GPU groups are tainted"


def test_the_schema_copy_refuses_a_key_the_addon_would_refuse():
    schema = json.loads((CHARTS / "eks-node-monitoring-agent-v1.7.0-configuration.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"dcgmAgent": {"runtimeClassName": "nvidia"}}, schema)  # aws/eks-node-monitoring-agent#241


def test_the_agents_daemonsets_count_on_every_node():
    model_workloads = {w["name"]: w for w in addons_data()["optional_addons"]["eks-node-monitoring-agent"]["workloads"]}
    assert set(model_workloads) == {"eks-node-monitoring-agent", "dcgm-server"}
    assert all(w["kind"] == "DaemonSet" for w in model_workloads.values())


def test_the_cluster_model_holds_the_agents_workloads(plan):
    model, _ = plan
    sources = {w.name: w.source for w in model.cluster.workloads}
    assert sources.get("eks-node-monitoring-agent") == "EKS add-on eks-node-monitoring-agent"
    assert sources.get("dcgm-server") == "EKS add-on eks-node-monitoring-agent"


def test_gpu_operator_runs_no_second_dcgm_and_its_keys_exist_in_the_pinned_chart(plan):
    model, resources = plan
    chart = yaml.safe_load((CHARTS / "gpu-operator-v26.7.0-dcgm-values.yaml").read_text())
    values = _named(resources, RELEASE)["eks-gpu-operator"]["inputs"]["values"]
    rendered = yaml.safe_load(render(model)["serve/gpu-operator-values.yaml"])
    for source in (values, rendered):
        assert source["dcgm"] == {"enabled": False}, source.get("dcgm")
        assert source["dcgmExporter"]["enabled"] is True
        for block in ("dcgm", "dcgmExporter"):
            for key in source[block]:
                assert key in chart[block], (block, key)
        assert "enabled" in chart["dcgmExporter"]["serviceMonitor"]


def test_every_cataloged_gpu_instance_runs_the_agents_dcgm_host_engine():
    """dcgm-server runs only on the instance types its chart lists (node affinity); on any other the
    agent has no DCGM and sees only the kernel log's Xids. Every instance type of the catalog an
    inference fleet may use must be listed, or its GPUs' DCGM health is never read."""
    listed = {line.strip() for line in (CHARTS / "eks-node-monitoring-agent-v1.7.0-dcgm-instance-types.txt")
              .read_text().splitlines() if line.strip() and not line.startswith("#")}
    assert "p5.48xlarge" in listed and len(listed) > 50
    catalog = json.loads((ROOT / "providers/aws/instances.json").read_text())["rows"]
    names = list(catalog) if isinstance(catalog, dict) else [r.get("name") or r.get("instance_type") for r in catalog]
    assert names and not sorted(set(names) - listed), sorted(set(names) - listed)


def test_an_inference_fleet_off_aws_is_told_it_has_no_node_health_agent(tmp_path):
    from fleetform.pipeline import check
    from variants import INFERENCE_VARIANTS
    path = tmp_path / "onprem.yaml"
    path.write_text(INFERENCE_VARIANTS["tp8-k8s-125"])
    found = [f for f in check(path).findings if f.rule == "health-kube-agent"]
    assert len(found) == 1 and found[0].severity.value == "warning", [str(f) for f in found]
    assert "no GPU node health agent" in found[0].message and found[0].path == "fleets[0].scheduler"
    aws = [f.rule for f in check(ROOT / "blueprints/reference.yaml").findings]
    assert "health-kube-agent" not in aws  # EKS: the node monitoring agent and node auto repair


def test_the_gpu_operator_values_off_aws_name_no_eks_agent(tmp_path):
    """The values file is the same template on every cloud: off AWS no node monitoring agent runs
    (health-kube-agent), so its comments must not say that one runs the node's DCGM."""
    from fleetform.pipeline import check
    from variants import INFERENCE_VARIANTS
    path = tmp_path / "onprem.yaml"
    path.write_text(INFERENCE_VARIANTS["tp8-k8s-125"])
    model = check(path).model
    (values,) = [data for name, data in render(model).items() if name.endswith("gpu-operator-values.yaml")]
    text = values.decode() if isinstance(values, bytes) else values
    dcgm = [line for line in text.splitlines() if "DCGM" in line or "hostengine" in line or line.startswith("dcgm")]
    assert dcgm and not [line for line in dcgm if "EKS" in line or "agent" in line], dcgm
    assert yaml.safe_load(text)["dcgm"] == {"enabled": False}

"""Update safety: the disruption class of single-field changes of the reference blueprint, as
`fleetform diff` reports them, kept as golden files (tests/golden-diff/fields/) and as the table of
docs/update-safety.md, which this test regenerates with FLEETFORM_UPDATE_GOLDEN=1 and otherwise
compares: the documented table is what the code derives, never written by hand.

Training-side classes follow the day-2 contract (the controller's keeper applies the uploaded
artifact: Slurm files in place within about a minute, nccl.env before each node's next job, a changed
launch template rolls each node once it is idle)."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import ROOT
from fleetform.changes import GENERIC
from fleetform.commands.diff import compute
from fleetform.commands.plan import build

REF = ROOT / "blueprints/reference.yaml"
FIELDS = ROOT / "tests/golden-diff/fields"
DOC = ROOT / "docs/update-safety.md"

SERVE = "  - name: serve\n    role: inference\n"

# case: (field as a reviewer names it, old text, new text); each changes one field of the reference
CASES = {
    "train-instance-type": ("fleets[train].instance_type", "    instance_type: p5.48xlarge\n    nodes: 6 ",
                            "    instance_type: p5en.48xlarge\n    nodes: 6 "),
    "train-nodes": ("fleets[train].nodes", "    nodes: 6 ", "    nodes: 8 "),
    "train-partition-max-time": ("fleets[train].scheduler.partitions[].max_time", "max_time: 7-00:00:00",
                                 "max_time: 3-00:00:00"),
    "train-nccl-debug": ("fleets[train].nccl.debug", "      debug: WARN", "      debug: INFO"),
    "train-nccl-env": ("fleets[train].nccl.env", "      env: {}  ", '      env: {NCCL_NVLS_ENABLE: "0"}  '),
    "train-placement": ("fleets[train].placement", "    placement: cluster ", "    placement: none "),
    "train-controller-type": ("fleets[train].scheduler.controller.instance_type", "instance_type: m7i.4xlarge",
                              "instance_type: m7i.8xlarge"),
    "train-topology": ("fleets[train].scheduler.topology.nodes_per_switch", "nodes_per_switch: 2 ",
                       "nodes_per_switch: 3 "),
    "availability-zone": ("provider.availability_zone", "availability_zone: us-east-1a",
                          "availability_zone: us-east-1b"),
    "region": ("provider.region (and its zone)", "  region: us-east-1\n  availability_zone: us-east-1a",
               "  region: us-west-2\n  availability_zone: us-west-2a"),
    "network-cidr": ("provider.network.cidr", "cidr: 10.40.0.0/16", "cidr: 10.41.0.0/16"),
    "labels": ("metadata.labels", "    team: ml-platform", "    team: ml-research"),
    "scratch-capacity": ("storage[scratch].capacity_gib", "capacity_gib: 9600", "capacity_gib: 12000"),
    "scratch-throughput": ("storage[scratch].throughput_mb_per_tib", "throughput_mb_per_tib: 250",
                           "throughput_mb_per_tib: 500"),
    "checkpoints-expiry": ("storage[checkpoints].noncurrent_expiry_days", "noncurrent_expiry_days: 30",
                           "noncurrent_expiry_days: 60"),
    "serve-instance-type": ("fleets[serve].instance_type", SERVE + "    instance_type: p5.48xlarge\n",
                            SERVE + "    instance_type: p4d.24xlarge\n"),
    "serve-nodes-max": ("fleets[serve].nodes.max", "    nodes: {min: 1, max: 10}", "    nodes: {min: 1, max: 12}"),
    "serve-image": ("fleets[serve].models[].image", "        image: vllm/vllm-openai:v0.11.0\n        model: meta-llama/"
                    "Llama-3.1-70B", "        image: vllm/vllm-openai:v0.11.1\n        model: meta-llama/Llama-3.1-70B"),
    "serve-model": ("fleets[serve].models[].model", "model: meta-llama/Llama-3.1-70B-Instruct",
                    "model: Qwen/Qwen2.5-72B-Instruct"),
    "serve-max-model-len": ("fleets[serve].models[].max_model_len", "        max_model_len: 8192\n        replicas: "
                            "{min: 2, max: 20}", "        max_model_len: 16384\n        replicas: {min: 2, max: 20}"),
    "serve-replicas-max": ("fleets[serve].models[].replicas.max", "replicas: {min: 2, max: 20}",
                           "replicas: {min: 2, max: 16}"),
    "serve-autoscale-target": ("fleets[serve].models[].autoscale.target_per_replica",
                               "          target_per_replica: 5\n          scale_down_window_s",
                               "          target_per_replica: 8\n          scale_down_window_s"),
    "serve-max-surge": ("fleets[serve].models[].max_surge", "replicas: {min: 2, max: 20}",
                        "replicas: {min: 2, max: 20}\n        max_surge: 1"),
    # 4g.40gb, not 2g.20gb: on a 20 GB slice Llama-3.1-8B's 8192-token KV cache (1.00 GiB) does not fit
    # the 0.79 GiB its weights leave, which vLLM refuses at start (kv-cache-fit)
    "small-models-mig-profile": ("fleets[small-models].gpu_sharing.profile", "profile: 3g.40gb",
                                 "profile: 4g.40gb"),
}


@pytest.fixture(scope="module")
def base():
    result, built = build(str(REF), display="blueprints/reference.yaml")
    assert built is not None
    return result, built


def _diff(case: str, base, tmp_path) -> dict:
    _, old, new = CASES[case]
    text = REF.read_text()
    assert text.count(old) >= 1, old
    path = tmp_path / f"{case}.yaml"
    path.write_text(text.replace(old, new, 1))
    result, built = build(str(path), display=f"{case}.yaml")
    assert built is not None, [f.to_text() for f in result.findings]
    return compute("blueprints/reference.yaml", base[1], f"{case}.yaml", built, base[0], result)


def _golden(data: dict) -> str:
    """What a reviewer must see for one field: the worst class, every disruption a running machine
    notices (with the count of the rest), model swaps and the findings of the change itself."""
    lines = [f"most disruptive: {data['summary']['disruption']}"]
    quiet = {"in place": 0, "none": 0}
    for d in data["disruptions"]:
        if d["how"] in GENERIC and not d.get("part"):
            quiet[d["class"]] += 1
            continue
        lines.append(f"[{d['class']}] {d['what']}: {d['how']}" + (f" (part {d['part']}, waived {d['waived']})"
                                                                 if d.get("part") else ""))
    lines.append(f"in place: {quiet['in place']}, none: {quiet['none']}")
    lines += [f"model change: {json.dumps(m, sort_keys=True)}" for m in data["model_changes"]]
    lines += [f"finding: {f['rule']}: {f['path']}: {f['message']}" for f in data["findings_introduced"]
              if f["rule"] in ("replace-stateful", "rollout-fit")]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def results(base, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fields")
    return {case: _diff(case, base, tmp) for case in CASES}


def test_at_least_twenty_single_field_changes():
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", sorted(CASES))
def test_field_change_matches_golden(case, results):
    text = _golden(results[case])
    golden = FIELDS / f"{case}.txt"
    if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.read_text() == text, f"regenerate (FLEETFORM_UPDATE_GOLDEN=1) and review tests/golden-diff/fields/{case}.txt"


TABLE_START, TABLE_END = "<!-- table: generated by tests/test_update_safety.py -->", "<!-- end of table -->"


def _table(results) -> str:
    rows = ["| field changed (reference blueprint) | class | what running machines or stored data notice |",
            "|---|---|---|"]
    for case in CASES:
        data = results[case]
        noticed = [d for d in data["disruptions"] if d["how"] not in GENERIC or d.get("part")]
        shown = ", ".join(f"{d['what']} ({d['class']})" for d in noticed[:4]) + \
            (f", {len(noticed) - 4} more" if len(noticed) > 4 else "")
        rows.append(f"| `{CASES[case][0]}` | {data['summary']['disruption']} | {shown or 'cloud resources updated in place only'} |")
    return "\n".join(rows)


def test_the_documented_table_is_the_derived_one(results):
    text = DOC.read_text()
    table = _table(results)
    if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
        text = re.sub(re.escape(TABLE_START) + ".*?" + re.escape(TABLE_END),
                      lambda _: f"{TABLE_START}\n{table}\n{TABLE_END}", text, flags=re.S)
        DOC.write_text(text)
    assert f"{TABLE_START}\n{table}\n{TABLE_END}" in text, "regenerate docs/update-safety.md (FLEETFORM_UPDATE_GOLDEN=1)"


def _by_what(data: dict) -> dict[str, dict]:
    return {d["what"]: d for d in data["disruptions"]}


def test_a_slurm_fleets_instance_type_says_what_running_nodes_do(results):
    """Issue 19, review defect 5: it said "0 to replace" and nothing about the running nodes."""
    data = results["train-instance-type"]
    assert data["summary"]["resources"]["replace"] == 0 and data["summary"]["disruption"] == "node roll"
    roll = _by_what(data)["LaunchTemplate train-nodes"]
    assert roll["class"] == "node roll" and "keep the old instance until their jobs end" in roll["how"]
    assert "needs no spare capacity" in roll["how"]
    conf = next(d for d in data["disruptions"] if "train/slurm/slurm.conf" in d["what"])
    assert conf["class"] == "in place" and "scontrol reconfigure" in conf["how"]


def test_a_replaced_state_volume_says_its_data_is_lost(results):
    """Issue 19, review defect 6: replacing the controller's state volume had no "data lost" line."""
    data = results["availability-zone"]
    volume = _by_what(data)["Volume train-controller-state"]
    assert volume["class"] == "data loss" and volume["part"] == "train/state-volume" and not volume["waived"]
    assert "replaces Volume train-controller-state: the data stored on it is lost" in data["summary"]["effects"]


def test_a_model_swap_names_both_models_with_gpus_and_startup(results):
    """Issue 19, review defect 6: a model swap read as "3 to update" and a hash."""
    from fleetform.changes import model_change_text

    (swap,) = results["serve-model"]["model_changes"]
    assert (swap["old"]["model"], swap["new"]["model"]) == ("meta-llama/Llama-3.1-70B-Instruct",
                                                            "Qwen/Qwen2.5-72B-Instruct")
    text = model_change_text(swap)
    assert text.startswith("fleet serve: model llama-70b (meta-llama/Llama-3.1-70B-Instruct, 4 GPUs of p5.48xlarge "
                           "per replica x 2-20 replicas) replaced by llama-70b (Qwen/Qwen2.5-72B-Instruct")
    assert "may take up to 33 min to start" in text  # the startup probe: 200 x 10 s
    assert results["serve-image"]["model_changes"] == []  # a new image serves the same model


def test_a_region_move_replaces_everything_regional_and_says_what_is_lost(results):
    """Issue 19, review defect 4: the VPC and buckets were missing and the EKS cluster "updated in place"."""
    data = results["region"]
    actions = {c["name"]: c["action"] for c in data["resources"]}
    for name in ("network-vpc", "storage-checkpoints", "rendered-bucket", "eks-cluster", "storage-scratch",
                 "train-controller-state", "serve-gpu"):
        assert actions[name] == "replace", name
    assert all(c["action"] != "replace" for c in data["resources"] if c["type"].startswith("aws:iam/"))
    move = data["region_move"]
    assert (move["old"], move["new"]) == ("us-east-1", "us-west-2")
    assert move["data_lost"] == ["Bucket storage-checkpoints", "LustreFileSystem storage-scratch",
                                 "Volume train-controller-state"]
    assert any("copy the data first" in step for step in move["steps"])
    rules = sorted(f["rule"] for f in data["findings_introduced"])
    assert rules.count("replace-stateful") == 4  # bucket, file system, controller, state volume


def test_a_rollout_that_cannot_fit_is_a_finding_with_the_numbers(results, base, tmp_path):
    (finding,) = [f for f in results["serve-max-surge"]["findings_introduced"] if f["rule"] == "rollout-fit"]
    assert "needs 4 spare GPUs (max_surge 1 x 4 GPUs per replica), but fleet serve has 0" in finding["message"]
    assert finding["severity"] == "error" and finding["path"] == "fleets[1].models[0].max_surge"
    # negative control: at most 18 replicas leave 8 GPUs spare, enough for one more replica of 4
    text = REF.read_text().replace("replicas: {min: 2, max: 20}", "replicas: {min: 2, max: 18}\n        max_surge: 1", 1)
    path = tmp_path / "fits.yaml"
    path.write_text(text)
    result, built = build(str(path), display="fits.yaml")
    data = compute("blueprints/reference.yaml", base[1], "fits.yaml", built, base[0], result)
    assert _by_what(data)["Deployment serve-deployment-llm-llama-70b"]["class"] == "rolling"
    assert [f for f in data["findings_introduced"] if f["rule"] == "rollout-fit"] == []


def test_allow_replace_names_a_part_the_blueprint_has(tmp_path):
    from fleetform.pipeline import check

    good = "update_safety:\n  allow_replace:\n    - {part: train/state-volume, reason: drained}\n"
    path = tmp_path / "bp.yaml"
    path.write_text(REF.read_text() + good)
    assert [f.rule for f in check(str(path)).findings if f.rule == "allow-replace-part"] == []
    path.write_text(REF.read_text() + good.replace("train/state-volume", "serve/state-volume"))
    (finding,) = [f for f in check(str(path)).findings if f.rule == "allow-replace-part"]
    assert finding.path == "update_safety.allow_replace[0].part" and "no stateful part" in finding.message


def test_an_eks_node_roll_on_a_reservation_is_a_finding_with_the_numbers(tmp_path):
    """EKS launches new nodes before it drains old ones (EKS_SURGE_SOURCE): a fleet on a capacity
    reservation sized for nodes.max has no room for them. A label change rolls every node group (new
    launch template version). Negative control: the same change on demand is no finding."""
    text = REF.read_text()
    old = "    nodes: {min: 1, max: 10}\n    capacity:\n      type: on-demand\n"
    reserved = text.replace(old, "    nodes: {min: 1, max: 10}\n    capacity:\n      type: reservation\n"
                                 "      reservation_id: cr-0123456789abcdef0\n", 1)
    assert reserved != text
    sides = {}
    for name, body in (("on-demand", text), ("reserved", reserved)):
        for side, content in (("old", body), ("new", body.replace("    team: ml-platform", "    team: ml-research", 1))):
            path = tmp_path / f"{name}-{side}.yaml"
            path.write_text(content)
            sides[(name, side)] = build(str(path), display=path.name)
    found = {}
    for name in ("on-demand", "reserved"):
        (old_result, old_built), (new_result, new_built) = sides[(name, "old")], sides[(name, "new")]
        data = compute("old", old_built, "new", new_built, old_result, new_result)
        assert _by_what(data)["NodeGroup serve-gpu"]["class"] == "node roll"
        found[name] = [f for f in data["findings_introduced"] if f["rule"] == "rollout-fit"]
    assert found["on-demand"] == []
    (finding,) = found["reserved"]
    assert finding["path"] == "fleets[1].capacity"
    assert "launching up to 2 new nodes before it drains old ones" in finding["message"]
    assert "10 + 2 = 12 nodes, beyond a reservation sized for the fleet's 10" in finding["message"]


def test_a_replaced_node_group_on_a_reservation_is_not_an_eks_surge(tmp_path):
    """An instance type change replaces the EKS node group (instanceTypes forces a new one): that
    is no EKS rolling update of 2 extra nodes, and the hint "reserve 2 more nodes" does not work
    when followed: a capacity reservation (or Capacity Block) holds one instance type, so the new
    group's nodes cannot launch in it at all. Pulumi creates the new group (its nodes.min nodes)
    before it deletes the old one. The finding says so, with both types."""
    text = REF.read_text()
    old = "    nodes: {min: 1, max: 10}\n    capacity:\n      type: on-demand\n"
    reserved = text.replace(old, "    nodes: {min: 1, max: 10}\n    capacity:\n      type: reservation\n"
                                 "      reservation_id: cr-0123456789abcdef0\n", 1)
    new = reserved.replace(SERVE + "    instance_type: p5.48xlarge\n", SERVE + "    instance_type: p5en.48xlarge\n", 1)
    assert text != reserved != new
    sides = []
    for side, content in (("old", reserved), ("new", new)):
        path = tmp_path / f"{side}.yaml"
        path.write_text(content)
        sides.append(build(str(path), display=path.name))
    (old_result, old_built), (new_result, new_built) = sides
    data = compute("old", old_built, "new", new_built, old_result, new_result)
    assert _by_what(data)["NodeGroup serve-gpu"]["class"] == "drain"
    (finding,) = [f for f in data["findings_introduced"] if f["rule"] == "rollout-fit"]
    assert finding["path"] == "fleets[1].capacity"
    assert "10 + 2" not in finding["message"]
    assert "p5.48xlarge" in finding["message"] and "p5en.48xlarge" in finding["message"]
    assert "new node group" in finding["message"]
    assert "reserve 2 more" not in finding["hint"] and "p5en.48xlarge" in finding["hint"]


def test_a_region_move_without_resources_still_says_what_data_is_lost(tmp_path):
    """`diff --no-resources` compares no cloud resources, but a region move loses the same data
    whatever the resources say: the buckets, file systems and Slurm state volumes the blueprint
    declares. The region-move section named none ("data lost" missing) and the summary said the
    most disruptive class was "none"."""
    _, old, new = CASES["region"]
    path = tmp_path / "moved.yaml"
    path.write_text(REF.read_text().replace(old, new, 1))
    old_result, old_built = build(str(REF), resources=False, display="reference.yaml")
    new_result, new_built = build(str(path), resources=False, display="moved.yaml")
    data = compute("reference.yaml", old_built, "moved.yaml", new_built, old_result, new_result)
    assert data["resources_not_recorded"]
    lost = data["region_move"]["data_lost"]
    assert any("checkpoints" in x for x in lost) and any("scratch" in x for x in lost)
    assert any("state volume" in x for x in lost)
    assert data["summary"]["disruption"] == "data loss"

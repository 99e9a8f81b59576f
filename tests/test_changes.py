"""fleetform/changes.py: update or replace, from which input, and what it does to nodes and data.

The replacement data (providers/aws/replacements.json) must cover every resource type the Pulumi
program records; the rules are checked on crafted plans, each with its negative control."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, ROOT
from fleetform.changes import CREATE, DELETE, REPLACE, UPDATE, compare, replacement_data, show_value


def _res(type_: str, name: str, inputs: dict, **extra) -> dict:
    return {"type": type_, "name": name, "parent": extra.pop("parent", None), "inputs": inputs, **extra}


SUBNET = "aws:ec2/subnet:Subnet"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"


def _one(changes, name):
    (change,) = [c for c in changes if c.name == name]
    return change


def test_a_forcing_input_replaces_and_a_plain_one_updates():
    old = [_res(SUBNET, "s", {"availabilityZone": "us-east-1a", "tags": {"a": "1"}})]
    moved = [_res(SUBNET, "s", {"availabilityZone": "us-east-1b", "tags": {"a": "1"}})]
    retagged = [_res(SUBNET, "s", {"availabilityZone": "us-east-1a", "tags": {"a": "2"}})]
    assert _one(compare(old, moved), "s").action == REPLACE
    change = _one(compare(old, retagged), "s")
    assert change.action == UPDATE and [(i.path, i.old, i.new) for i in change.inputs] == [("tags.a", "1", "2")]
    assert compare(old, old) == []


def test_a_replacement_cascades_along_forcing_inputs_only():
    def plan(zone):
        return [_res(SUBNET, "s", {"availabilityZone": zone}),
                _res(FSX, "fs", {"subnetIds": "s-id"}, deps={"subnetIds": [f"{SUBNET}::s"]}),
                _res(LT, "lt", {"networkInterfaces": [{"subnetId": "s-id"}]}, deps={"networkInterfaces": [f"{SUBNET}::s"]})]

    changes = compare(plan("us-east-1a"), plan("us-east-1b"))
    fs = _one(changes, "fs")
    assert fs.action == REPLACE and fs.inputs[0].via == "s"
    assert any("data stored on it is lost" in e for e in fs.effects)
    assert _one(changes, "lt").action == UPDATE  # a launch template takes a new version, in place


def test_a_changed_launch_template_rolls_the_node_group_that_uses_it():
    def plan(user_data, ami_type="AL2023_x86_64_NVIDIA"):
        return [_res(LT, "lt", {"userData": user_data}),
                _res(NG, "ng", {"amiType": ami_type, "launchTemplate": {"id": "lt-id", "version": "1"},
                                "instanceTypes": ["p5.48xlarge"], "scalingConfig": {"minSize": 1, "maxSize": 10}},
                     deps={"launchTemplate": [f"{LT}::lt"]})]

    rolled = _one(compare(plan("a"), plan("b")), "ng")
    assert rolled.action == UPDATE
    assert rolled.effects == ["rolls the nodes of node group ng: EKS replaces each running node (1-10 x p5.48xlarge)"]
    # negative control: an unchanged template rolls nothing
    assert compare(plan("a"), plan("a")) == []
    replaced = _one(compare(plan("a"), plan("a", "BOTTLEROCKET_x86_64_NVIDIA")), "ng")
    assert replaced.action == REPLACE and "replaces all nodes of node group ng" in replaced.effects[0]


def test_ignore_changes_and_replace_on_changes_options_are_honoured():
    old = [_res(SUBNET, "s", {"availabilityZone": "a", "mapPublicIpOnLaunch": False},
                options={"ignoreChanges": ["availabilityZone"], "replaceOnChanges": ["mapPublicIpOnLaunch"]})]
    new = [_res(SUBNET, "s", {"availabilityZone": "b", "mapPublicIpOnLaunch": False},
                options={"ignoreChanges": ["availabilityZone"], "replaceOnChanges": ["mapPublicIpOnLaunch"]})]
    assert compare(old, new) == []
    flipped = [_res(SUBNET, "s", {"availabilityZone": "a", "mapPublicIpOnLaunch": True},
                    options={"replaceOnChanges": ["mapPublicIpOnLaunch"]})]
    assert _one(compare(old, flipped), "s").action == REPLACE


def test_a_renamed_component_and_its_children_are_matched_by_alias():
    old = [_res("fleetform:aws:InferenceFleet", "serve", {}),
           _res(LT, "serve-nodes", {"userData": "x"}, parent="serve")]
    new = [_res("fleetform:aws:InferenceFleet", "chat", {}, aliases=["serve"]),
           _res(LT, "chat-nodes", {"userData": "x"}, parent="chat")]
    assert compare(old, new) == []
    # negative control: without the alias it is a delete and a create
    unaliased = [_res("fleetform:aws:InferenceFleet", "chat", {}),
                 _res(LT, "chat-nodes", {"userData": "x"}, parent="chat")]
    assert sorted(c.action for c in compare(old, unaliased)) == [CREATE, DELETE]


def test_resources_of_two_types_may_share_a_name():
    """The Slurm controller's role and its instance are both train-controller."""
    role, instance = "aws:iam/role:Role", "aws:ec2/instance:Instance"
    old = [_res(instance, "c", {"instanceType": "m7i.4xlarge"}), _res(role, "c", {"path": "/"})]
    new = [_res(instance, "c", {"instanceType": "m7i.8xlarge"}), _res(role, "c", {"path": "/"})]
    (change,) = compare(old, new)
    assert (change.type, change.action) == (instance, UPDATE)
    assert change.effects == ["stops and starts instance c (m7i.8xlarge)"]


def test_a_type_without_replacement_data_is_marked():
    old = [_res("aws:new/thing:Thing", "t", {"a": 1})]
    new = [_res("aws:new/thing:Thing", "t", {"a": 2})]
    change = _one(compare(old, new), "t")
    assert change.action == UPDATE and not change.known
    assert change.to_dict()["replacement_data"] == "missing"


def test_long_values_are_shown_by_size_and_hash():
    assert show_value("short") == '"short"'
    long = show_value("x" * 500)
    assert long.startswith("<500 characters, sha256 ") and long != show_value("y" * 500)


def test_replacement_data_names_a_source_for_every_type():
    data = replacement_data()
    for type_, entry in data.items():
        provider = ("https://github.com/pulumi/pulumi-kubernetes/" if type_.startswith(("kubernetes:", "pulumi:providers:"))
                    else "https://github.com/pulumi/pulumi-command/" if type_.startswith("command:")
                    else "https://registry.terraform.io/providers/hashicorp/aws/")
        assert entry["source"].startswith(provider), type_
        assert isinstance(entry["replace_on"], list), type_


@pytest.fixture(scope="module")
def recorded_types(tmp_path_factory):
    from fleetform.commands.plan import build
    from variants import VARIANTS

    folder = tmp_path_factory.mktemp("variants")
    paths = [str(p) for p in EXAMPLES]
    for name, text in VARIANTS.items():
        (folder / f"{name}.yaml").write_text(text)
        paths.append(str(folder / f"{name}.yaml"))
    types = set()
    for path in paths:
        _, built = build(path)
        if built is not None:
            types |= {r["type"] for r in built[0]["resources"]}
    return types


def test_every_recorded_resource_type_has_replacement_data(recorded_types):
    cloud = {t for t in recorded_types if not t.startswith("fleetform:")}
    assert cloud, "the examples record no cloud resources"
    missing = sorted(cloud - set(replacement_data()))
    assert not missing, f"add these types to providers/aws/replacements.json with their source: {missing}"


def test_replacement_data_is_sorted_json():
    text = (ROOT / "providers/aws/replacements.json").read_text()
    types = json.loads(text)["types"]
    assert list(types) == sorted(types)


def test_raising_a_node_groups_minimum_says_eks_refuses_it_above_the_running_desired_size():
    """The program leaves desiredSize to the Cluster Autoscaler (ignore_changes); EKS's UpdateNodegroupConfig
    then refuses a minimum above the running desired size ("Minimum capacity 4 can't be greater than desired
    size 3", terraform-aws-modules/terraform-aws-eks #944 and #3306 with the same ignore_changes). diff says so
    and what to run first."""
    def plan(low, ignored=("scalingConfig.desiredSize",)):
        return [_res(NG, "ng", {"instanceTypes": ["g6.xlarge"],
                                "scalingConfig": {"minSize": low, "maxSize": 8, "desiredSize": low}},
                     options={"ignoreChanges": list(ignored)})]

    raised = _one(compare(plan(1), plan(3)), "ng")
    assert raised.action == UPDATE
    assert any("EKS refuses a minimum above it" in e and "desiredSize=3" in e for e in raised.effects)
    # negative controls: a lowered minimum, and a group whose desired size pulumi up sets itself
    assert not any("refuses" in e for e in _one(compare(plan(3), plan(1)), "ng").effects)
    assert not any("refuses" in e for e in _one(compare(plan(1, ()), plan(3, ())), "ng").effects)

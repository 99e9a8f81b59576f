"""The Pulumi program under Pulumi's mocks: what it creates for each example and variant, the
security policies over the recorded graph, and the stacks/ program's handling of a bad blueprint."""

from __future__ import annotations

import copy
import json
import runpy

import pytest

from conftest import EXAMPLES, ROOT, run_cli
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.policies import check as check_policies
from fleetform.render import render
from variants import INFERENCE_VARIANTS, VARIANTS

LT = "aws:ec2/launchTemplate:LaunchTemplate"


def _plan(source, tmp_path):
    if isinstance(source, str):
        path = tmp_path / "bp.yaml"
        path.write_text(source)
        source = path
    model = check(source).model
    assert model is not None
    return model, record(model, render(model))


def _one(resources, type_, name):
    (found,) = [r for r in resources if r["type"] == type_ and r["name"] == name]
    return found["inputs"]


def test_reference_training_fleet(tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    template = _one(resources, LT, "train-nodes")
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == 33 and len({i["networkCardIndex"] for i in interfaces}) == 32
    assert interfaces[0] == {**interfaces[0], "networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}
    assert interfaces[1]["interfaceType"] == "efa-only" and interfaces[1]["deviceIndex"] == 1
    assert all(i["interfaceType"] == "efa-only" and i["deviceIndex"] == 0 for i in interfaces[2:])
    assert all(i["securityGroups"] == ["security-nodes-id"] for i in interfaces)
    assert "vpcSecurityGroupIds" not in template
    assert template["metadataOptions"]["httpTokens"] == "required"
    assert template["blockDeviceMappings"][0]["ebs"] == {"deleteOnTermination": "true", "encrypted": "true",
                                                         "volumeSize": 200, "volumeType": "gp3"}
    # a Capacity Block: its own placement, targeted by reservation id
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0a1b2c3d4e5f67890"}}
    assert not [r for r in resources if r["type"] == "aws:ec2/placementGroup:PlacementGroup"]
    group = _one(resources, "aws:autoscaling/group:Group", "train-static")
    assert (group["minSize"], group["maxSize"], group["desiredCapacity"]) == (6, 6, 6)
    fsx = _one(resources, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-scratch")
    assert (fsx["deploymentType"], fsx["storageCapacity"], fsx["perUnitStorageThroughput"]) == ("PERSISTENT_2", 9600, 250)
    dra = _one(resources, "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "storage-scratch-dra")
    assert dra["dataRepositoryPath"] == "s3://acme-llm-data/tokenized/"
    lifecycle = _one(resources, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                     "storage-checkpoints-lifecycle")
    assert lifecycle["rules"][0]["noncurrentVersionExpiration"] == {"noncurrentDays": 30}


def test_tags_on_every_taggable_resource(tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    manifest = render(model)["manifest.json"]
    import hashlib

    digest = hashlib.sha256(manifest).hexdigest()
    tagged = [r for r in resources if "tags" in r["inputs"]]
    assert len(tagged) > 40
    for r in tagged:
        tags = r["inputs"]["tags"]
        if isinstance(tags, list):  # the Auto Scaling group's tag list
            tags = {t["key"]: t["value"] for t in tags}
        assert tags["fleetform:blueprint"] == "llm-70b" and tags["fleetform:version"] == "1.0.0"
        assert tags["fleetform:manifest-sha256"] == digest and tags["team"] == "ml-platform", r["name"]


def test_no_resource_that_takes_tags_goes_without(tmp_path):
    import importlib
    import inspect

    _, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    untagged = []
    for r in resources:
        if r["type"].startswith("fleetform:"):
            continue
        module, cls = r["type"].split(":")[1].split("/")[0], r["type"].split(":")[2]
        resource_class = getattr(importlib.import_module(f"pulumi_aws.{module}"), cls)
        takes_tags = "tags" in inspect.signature(resource_class._internal_init).parameters
        if takes_tags and "tags" not in r["inputs"]:
            untagged.append(r["name"])
    assert untagged == []


def test_rendered_files_are_uploaded_byte_for_byte(tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    files = render(model)
    objects = {r["inputs"]["key"]: r["inputs"]["content"] for r in resources
               if r["type"] == "aws:s3/bucketObjectv2:BucketObjectv2"}
    assert objects == {f"1.0.0/{path}": data.decode() for path, data in files.items()}


def test_inference_fleet_eks(tmp_path):
    _, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    cluster = _one(resources, "aws:eks/cluster:Cluster", "serve-cluster")
    assert cluster["accessConfig"]["authenticationMode"] == "API" and cluster["version"] == "1.33"
    nodes = _one(resources, "aws:eks/nodeGroup:NodeGroup", "small-models-gpu")
    assert nodes["amiType"] == "AL2023_x86_64_NVIDIA" and nodes["instanceTypes"] == ["p4de.24xlarge"]
    assert nodes["labels"] == {"fleetform.dev/fleet": "small-models", "nvidia.com/mig.config": "all-3g.40gb"}
    assert nodes["taints"] == [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}]
    serve = _one(resources, "aws:eks/nodeGroup:NodeGroup", "serve-gpu")
    assert serve["scalingConfig"] == {"desiredSize": 1, "maxSize": 10, "minSize": 1}
    import base64

    user_data = base64.b64decode(_one(resources, LT, "serve-nodes")["userData"]).decode()
    assert "kind: NodeConfig" in user_data and "strategy: RAID0" in user_data  # model caches on local NVMe


def test_p4d_has_five_interfaces_over_four_cards(tmp_path):
    _, resources = _plan(VARIANTS["p4d-slurm-2405"], tmp_path)
    interfaces = _one(resources, LT, "train-nodes")["networkInterfaces"]
    assert len(interfaces) == 5 and sorted({i["networkCardIndex"] for i in interfaces}) == [0, 1, 2, 3]


def test_elastic_fleet_starts_only_the_static_nodes_and_may_resume_the_rest(tmp_path):
    _, resources = _plan(VARIANTS["elastic"], tmp_path)
    group = _one(resources, "aws:autoscaling/group:Group", "train-static")
    assert (group["minSize"], group["maxSize"]) == (2, 2)
    resume = _one(resources, "aws:iam/rolePolicy:RolePolicy", "train-resume")
    assert resume["role"] == "train-controller-id"  # the controller's role, not the compute nodes'
    statements = {s["Sid"]: s for s in json.loads(resume["policy"])["Statement"]}
    assert statements["LaunchTaggedInstances"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/fleetform:fleet": "train"}}
    assert statements["TerminateOwn"]["Condition"] == {"StringEquals": {"aws:ResourceTag/fleetform:fleet": "train"}}
    assert statements["PassNodeRole"]["Resource"].endswith("iam-node")
    assert _one(resources, "aws:ec2/placementGroup:PlacementGroup", "train-placement")["strategy"] == "cluster"


def test_spot_and_existing_network(tmp_path):
    text = VARIANTS["partitions"].replace("network: {cidr: 10.0.0.0/16}",
                                          "network: {vpc_id: vpc-0a1b2c3d4e5f67890, subnet_id: subnet-0a1b2c3d4e5f67890}")
    text = text.replace("    instance_type: p5.48xlarge\n", "    instance_type: p5.48xlarge\n    capacity: {type: spot}\n")
    _, resources = _plan(text, tmp_path)
    assert not [r for r in resources if r["type"] in ("aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet")]
    template = _one(resources, LT, "train-nodes")
    assert template["instanceMarketOptions"]["marketType"] == "spot"
    assert template["networkInterfaces"][0]["subnetId"] == "subnet-0a1b2c3d4e5f67890"


def test_reservation_targets_its_id(tmp_path):
    text = VARIANTS["partitions"].replace(
        "    instance_type: p5.48xlarge\n",
        "    instance_type: p5.48xlarge\n    capacity: {type: reservation, reservation_id: cr-0123456789abcdef0}\n")
    _, resources = _plan(text, tmp_path)
    template = _one(resources, LT, "train-nodes")
    assert template["capacityReservationSpecification"]["capacityReservationTarget"] == {
        "capacityReservationId": "cr-0123456789abcdef0"}
    assert "instanceMarketOptions" not in template


def test_a_renamed_fleet_keeps_its_resources_through_an_alias(tmp_path):
    text = VARIANTS["partitions"].replace("  - name: train\n    role: training\n",
                                          "  - name: pretrain\n    role: training\n    renamed_from: [train]\n")
    text = text.replace('nodes: "train-[001-002]"', 'nodes: "pretrain-[001-002]"')
    _, resources = _plan(text, tmp_path)
    (component,) = [r for r in resources if r["type"] == "fleetform:aws:TrainingFleet"]
    assert component["name"] == "pretrain" and component["aliases"] == ["train"]
    # every child is named after its component, so the engine carries the alias over to each of them
    assert all(r["name"].startswith("pretrain-") for r in resources if r["parent"] == "pretrain")


def test_resource_count_does_not_grow_with_nodes(tmp_path):
    counts = {}
    for nodes in (10, 1000, 10000):
        _, resources = _plan(VARIANTS["partitions"].replace("nodes: 8", f"nodes: {nodes}").replace(
            'nodes: "train-[001-002]", ', ""), tmp_path)
        counts[nodes] = len(resources)
    assert len(set(counts.values())) == 1, counts


CASES = ([pytest.param(p, id=p.stem) for p in EXAMPLES]
         + [pytest.param(VARIANTS[n], id=n) for n in ("elastic", "partitions", "p4d-slurm-2405")]
         + [pytest.param(INFERENCE_VARIANTS[n], id=n) for n in ("mig-single", "time-slicing-k8s-137")])


@pytest.mark.parametrize("source", CASES)
def test_policies_pass(source, tmp_path):
    model, resources = _plan(source, tmp_path)
    assert check_policies(resources, model) == []


def _break(resources, type_, name, fn):
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == type_ and r["name"] == name:
            fn(r["inputs"])
    return broken


@pytest.mark.parametrize("policy, type_, name, fn", [
    ("imdsv2-required", LT, "train-nodes", lambda i: i["metadataOptions"].update(httpTokens="optional")),
    ("encrypted-storage", LT, "train-nodes", lambda i: i["blockDeviceMappings"][0]["ebs"].update(encrypted="false")),
    ("encrypted-storage", "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
     "storage-checkpoints-sse", lambda i: i.update(bucket="elsewhere")),
    ("public-access-blocked", "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "rendered-bucket-public-access",
     lambda i: i.update(blockPublicPolicy=False)),
    ("no-open-ingress", "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule", "security-lustre-988",
     lambda i: i.update(cidrIpv4="0.0.0.0/0")),
    ("efa-security-groups", LT, "train-nodes", lambda i: i["networkInterfaces"][5].update(securityGroups=[])),
    ("efa-security-groups", LT, "train-nodes", lambda i: i.update(vpcSecurityGroupIds=["sg-1"])),
])
def test_each_policy_fails_on_a_crafted_graph(policy, type_, name, fn, tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    violations = check_policies(_break(resources, type_, name, fn), model)
    assert [v[0] for v in violations] == [policy], violations


def test_plan_cli_is_deterministic_and_reports_policies(tmp_path):
    first = run_cli("plan", "blueprints/reference.yaml", "--format", "json")
    second = run_cli("plan", "blueprints/reference.yaml", "--format", "json")
    assert first.returncode == 0 and first.stdout == second.stdout and "Traceback" not in first.stderr
    data = json.loads(first.stdout)
    assert [f["rule"] for f in data["findings"]] == ["capacity-duration"] and len(data["resources"]) == 92
    assert {"type", "name", "parent", "inputs"} <= set(data["resources"][0])
    assert set().union(*data["resources"]) <= {"type", "name", "parent", "inputs", "deps", "options", "aliases"}
    text = run_cli("plan", "blueprints/reference.yaml")
    assert "Cloud resources: 84" in text.stdout.splitlines()
    onprem = run_cli("plan", "blueprints/onprem-ib.yaml")
    assert "Cloud resources: none (on-prem blueprint)" in onprem.stdout.splitlines()


def test_stack_program_stops_a_bad_blueprint_before_any_resource(tmp_path, monkeypatch):
    import pulumi

    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "blueprints/reference.yaml").read_text().replace("p5.48xlarge", "p5.48xlarg", 1))
    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.name)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": str(bad)})
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    assert "'p5.48xlarg' is not a GPU instance type in the catalog" in str(err.value)
    assert registered == []


def test_stack_program_builds_the_reference(tmp_path):
    import pulumi

    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.typ)
            return [f"{args.name}-id", {**args.inputs, "arn": "arn", "name": args.name, "bucket": args.name,
                                        "latestVersion": 1}]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1"})

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(ROOT / "stacks/__main__.py"))

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({})
    assert registered.count("aws:eks/cluster:Cluster") == 2 and "aws:autoscaling/group:Group" in registered


@pytest.mark.parametrize("region", ["us-west-2", None])
def test_stack_program_refuses_a_region_that_is_not_the_blueprints(region, monkeypatch):
    """team-llm.yaml is us-west-2's; the example stack said us-east-1 (issue 12, defect 7)."""
    import pulumi

    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.typ)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    config = {"fleetform:blueprint": "../blueprints/reference.yaml"}
    if region:
        config["aws:region"] = region
    pulumi.runtime.set_all_config(config)
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    where = f"the stack builds in {region}" if region else "the stack names no AWS region"
    assert f"the blueprint's provider.region is us-east-1, but {where}" in str(err.value)
    assert "pulumi config set aws:region us-east-1" in str(err.value)
    assert registered == []

"""The Pulumi program under Pulumi's mocks: what it creates for each example and variant, the
security policies over the recorded graph, and the stacks/ program's handling of a bad blueprint."""

from __future__ import annotations

import copy
import json
import runpy

import pytest
import yaml

from conftest import EXAMPLES, ROOT, run_cli
from fleetform.pipeline import check
from fleetform.plan import MOCK_AMI, record
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
    # the default image, resolved at deploy time (pinned until the next `pulumi up`, never
    # `resolve:ssm:` at each launch); nodes read their own tags (their Slurm name)
    assert template["imageId"] == MOCK_AMI
    assert template["metadataOptions"]["instanceMetadataTags"] == "enabled"
    assert template["tagSpecifications"][0]["tags"]["fleetform:role"] == "compute"
    # no Auto Scaling group: the controller's ResumeProgram launches and names every node
    assert not [r for r in resources if r["type"] == "aws:autoscaling/group:Group"]
    fsx = _one(resources, "aws:fsx/lustreFileSystem:LustreFileSystem", "storage-scratch")
    assert (fsx["deploymentType"], fsx["storageCapacity"], fsx["perUnitStorageThroughput"]) == ("PERSISTENT_2", 9600, 250)
    lifecycle = _one(resources, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
                     "storage-checkpoints-lifecycle")
    assert lifecycle["rules"][0]["noncurrentVersionExpiration"] == {"noncurrentDays": 30}


def test_tags_on_every_taggable_resource(tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    manifest = render(model)["manifest.json"]
    import hashlib

    digest = hashlib.sha256(manifest).hexdigest()
    tagged = [r for r in resources if "tags" in r["inputs"]]
    assert len(tagged) > 35
    for r in tagged:
        tags = r["inputs"]["tags"]
        assert tags["fleetform:blueprint"] == "llm-70b" and tags["fleetform:version"] == "1.0.0"
        assert tags["fleetform:cluster"] == "llm-70b_plan" and tags["team"] == "ml-platform", r["name"]
    # the digest of the rendered files changes with every render: it sits on the artifact object
    # alone, never where a change rolls nodes (launch templates, instances)
    carriers = [r["name"] for r in resources if "fleetform:manifest-sha256" in json.dumps(r["inputs"].get("tags"))
                or "fleetform:manifest-sha256" in json.dumps(r["inputs"].get("tagSpecifications"))]
    assert carriers == ["rendered-artifact"]
    assert _one(resources, "aws:s3/bucketObjectv2:BucketObjectv2", "rendered-artifact")["tags"][
        "fleetform:manifest-sha256"] == digest


def test_no_resource_that_takes_tags_goes_without(tmp_path):
    import importlib
    import inspect

    _, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    untagged = []
    for r in resources:
        if not r["type"].startswith("aws:"):  # components, and Kubernetes objects (no AWS tags)
            continue
        module, cls = r["type"].split(":")[1].split("/")[0], r["type"].split(":")[2]
        resource_class = getattr(importlib.import_module(f"pulumi_aws.{module}"), cls)
        takes_tags = "tags" in inspect.signature(resource_class._internal_init).parameters
        if takes_tags and "tags" not in r["inputs"]:
            untagged.append(r["name"])
    assert untagged == []


def _artifact(resources) -> bytes:
    import base64

    (obj,) = [r["inputs"] for r in resources if r["type"] == "aws:s3/bucketObjectv2:BucketObjectv2"]
    assert obj["key"] == "fleetform/rendered.tar.gz" and obj["contentType"] == "application/gzip"
    return base64.b64decode(obj["contentBase64"])


def test_rendered_files_are_one_deterministic_archive(tmp_path):
    import gzip
    import io
    import tarfile

    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    files = render(model)
    data = _artifact(resources)
    assert data == _artifact(record(model, files))  # the same bytes on every run
    assert gzip.decompress(data)  # a gzip without a name or a time in its header
    assert data[4:8] == b"\0\0\0\0" and not data[3] & 0x08
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == sorted(files)  # sorted, manifest.json at the root
        for m in members:
            assert tar.extractfile(m).read() == files[m.name]  # byte for byte what reviewers read
            assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
            assert m.mode == (0o755 if files[m.name].startswith(b"#!") else 0o644)


def test_plan_does_not_grow_with_rendered_files(tmp_path):
    """Issue 13: one object for all rendered files, so 20 models plan the same cloud resources as 1;
    what grows is what truly is a resource: the Kubernetes objects the program applies on EKS, one
    per object of the rendered manifests."""
    from variants import inference

    counts = {}
    for models in (1, 20):
        # 20 one-GPU replicas need 3 p5 nodes from the start (min-nodes-hold)
        text = inference("many", models=models, nodes=8).replace("min: 1, max: 8", "min: 3, max: 8")
        model, resources = _plan(text, tmp_path)
        objects = sum(len([d for d in yaml.safe_load_all(data) if d]) for path, data in render(model).items()
                      if "/k8s/" in path and not path.endswith("kustomization.yaml"))
        counts[models] = (len(render(model)), sorted((r["type"], r["name"]) for r in resources
                                                     if not r["type"].startswith("kubernetes:")),
                          objects, len([r for r in resources if r["type"].startswith("kubernetes:")]))
    assert counts[20][0] > counts[1][0] + 19  # many more rendered files...
    assert counts[20][1] == counts[1][1]  # ...and not one more cloud resource
    releases = 4  # gpu-operator, kube-prometheus-stack, keda, cluster-autoscaler
    namespaces = 3  # the releases' gpu-operator, monitoring and keda
    for models in (1, 20):  # the Kubernetes resources are the rendered objects, the releases and their namespaces
        assert counts[models][3] == counts[models][2] + releases + namespaces


def test_inference_fleet_eks(tmp_path):
    _, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    cluster = _one(resources, "aws:eks/cluster:Cluster", "eks-cluster")  # one cluster for both inference fleets
    assert cluster["accessConfig"]["authenticationMode"] == "API" and cluster["version"] == "1.33"
    nodes = _one(resources, "aws:eks/nodeGroup:NodeGroup", "small-models-gpu")
    assert nodes["amiType"] == "AL2023_x86_64_NVIDIA" and nodes["instanceTypes"] == ["p4de.24xlarge"]
    assert nodes["labels"] == {"fleetform.dev/fleet": "small-models", "nvidia.com/mig.config": "all-3g.40gb",
                               # the Cluster Autoscaler's AWS GPU label (cloudprovider/aws/aws_cloud_provider.go GPULabel)
                               "k8s.amazonaws.com/accelerator": "nvidia-a100-80gb"}
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


def _statements(resources, name):
    return {s["Sid"]: s for s in json.loads(_one(resources, "aws:iam/rolePolicy:RolePolicy", name)["policy"])["Statement"]}


def test_controller_rights_are_scoped_to_this_cluster_fleet_and_compute_nodes(tmp_path):
    _, resources = _plan(VARIANTS["elastic"], tmp_path)
    policy = _one(resources, "aws:iam/rolePolicy:RolePolicy", "train-controller")
    assert policy["role"] == "train-controller-id"  # the controller's role, not the compute nodes'
    statements = _statements(resources, "train-controller")
    own = {"fleetform:cluster": "elastic_plan", "fleetform:fleet": "train", "fleetform:role": "compute"}
    assert statements["LaunchComputeNodes"]["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{k}": v for k, v in own.items()}}
    assert statements["LaunchComputeNodes"]["Resource"] == "arn:aws:ec2:*:*:instance/*"
    # the interfaces and volumes of a launch carry no tag of the call: authorized by the template
    launch = statements["LaunchFromTheFleetTemplate"]
    assert {"arn:aws:ec2:*:*:network-interface/*", "arn:aws:ec2:*:*:volume/*"} <= set(launch["Resource"])
    assert launch["Condition"] == {"ArnLike": {"ec2:LaunchTemplate": launch["Resource"][0]}}
    assert launch["Resource"][0].startswith("arn:aws:ec2:") and ":launch-template/" in launch["Resource"][0]
    naming = statements["NameComputeNodes"]["Condition"]  # only the name tags, only on own compute nodes
    assert naming["ForAllValues:StringEquals"] == {"aws:TagKeys": ["Name", "fleetform:node"]}
    assert naming["StringEquals"] == {f"aws:ResourceTag/{k}": v for k, v in own.items()}
    terminate = statements["TerminateComputeNodes"]["Condition"]["StringEquals"]
    assert terminate == {f"aws:ResourceTag/{k}": v for k, v in own.items()}
    # the condition excludes the controller itself and every other blueprint's or stack's nodes
    controller = _one(resources, "aws:ec2/instance:Instance", "train-controller")["tags"]
    assert controller["fleetform:role"] == "controller"
    assert not all(controller.get(k.split("/", 1)[1]) == v for k, v in terminate.items())
    other_stack = {**own, "fleetform:cluster": "elastic_prod"}
    assert not all(other_stack.get(k.split("/", 1)[1]) == v for k, v in terminate.items())
    assert statements["PassComputeRole"]["Resource"].endswith("train-node")
    assert "ResolveImage" not in statements  # the launch template names an AMI id: no SSM right needed
    assert _one(resources, "aws:ec2/placementGroup:PlacementGroup", "train-placement")["strategy"] == "cluster"


def _program_aws_calls(files: dict[str, bytes]) -> set[tuple[str, str, str]]:
    """(program, service, command) of every AWS CLI call in the rendered programs: shell lines
    `aws [--opt value] SERVICE COMMAND` and Python calls `aws(env, "SERVICE", "COMMAND", ...)`."""
    import re
    import shlex

    calls = set()
    for path, data in files.items():
        if "/bin/" not in path:
            continue
        program = path.rsplit("/", 1)[1]
        text = data.decode()
        for service, command in re.findall(r"\baws\(\s*\w+\s*,\s*[\"']([a-z0-9-]+)[\"']\s*,\s*[\"']([a-z0-9-]+)[\"']", text):
            calls.add((program, service, command))
        for line in text.replace("\\\n", " ").splitlines():
            if line.lstrip().startswith("#"):
                continue
            for match in re.finditer(r"(?:^|[\s;(|&$])aws\s+(.*)", line):
                try:
                    words = shlex.split(match.group(1), comments=True)
                except ValueError:
                    words = match.group(1).split()
                words = [w for i, w in enumerate(words)
                         if not w.startswith("--") and not (i and words[i - 1].startswith("--") and "=" not in words[i - 1])]
                if len(words) >= 2 and re.fullmatch(r"[a-z0-9-]+", words[0]) and re.fullmatch(r"[a-z0-9-]+", words[1]):
                    calls.add((program, words[0], words[1]))
    return calls


def test_the_program_call_scan_reads_shell_and_python():
    files = {"t/slurm/bin/resume": b'#!/bin/bash\naws --region "$r" ec2 run-instances \\\n  --count 1\n',
             "t/slurm/bin/bootstrap": b'#!/usr/bin/python3\nx = aws(env, "secretsmanager", "get-secret-value", "--x")\n',
             "t/slurm/slurm.conf": b"aws ec2 nothing-here\n"}
    assert _program_aws_calls(files) == {("resume", "ec2", "run-instances"),
                                         ("bootstrap", "secretsmanager", "get-secret-value")}


def test_every_aws_call_of_the_rendered_programs_is_listed_and_allowed(tmp_path):
    """The programs train-cluster renders call only what providers/aws/calls.py lists (the controller
    runs them all), and the recorded policies allow every listed call (iam-caller-actions)."""
    from fleetform.providers.aws.calls import COMPUTE, CONTROLLER, cli_action

    model, resources = _plan(VARIANTS["elastic"], tmp_path)
    calls = _program_aws_calls(render(model))
    assert {(program, service) for program, service, _ in calls} >= {("resume", "ec2"), ("update", "s3api")}
    # bin/update runs on both roles; its Prolog part (list-object-versions) only on compute nodes
    listed = {c.action for c in CONTROLLER + COMPUTE}
    unlisted = sorted(f"{program}: aws {service} {command} ({cli_action(service, command)})"
                      for program, service, command in calls if cli_action(service, command) not in listed)
    assert unlisted == []
    assert [v for v in check_policies(resources, model) if v[0] == "iam-caller-actions"] == []


@pytest.mark.parametrize("break_it, missing", [
    # the defect of issue 10: interfaces under a request-tag condition no call sets
    (lambda s: s["LaunchComputeNodes"].update(Resource=["arn:aws:ec2:*:*:instance/*",
                                                         "arn:aws:ec2:*:*:network-interface/*"])
     or s["LaunchFromTheFleetTemplate"]["Resource"].remove("arn:aws:ec2:*:*:network-interface/*"),
     "ec2:RunInstances on network-interface"),
    (lambda s: s["MungeKey"].update(Action="secretsmanager:GetSecretValue"), "secretsmanager:PutSecretValue"),
    (lambda s: s.pop("Describe"), "ec2:DescribeInstances"),
    # naming the nodes after the launch: a tag-on-create grant does not cover it, nor the reverse
    (lambda s: s.pop("NameComputeNodes"), "ec2:CreateTags on instance"),
    (lambda s: s.pop("TagAtLaunch"), "ec2:CreateTags on volume"),
])
def test_iam_caller_actions_fails_on_a_crafted_policy(break_it, missing, tmp_path):
    model, resources = _plan(VARIANTS["elastic"], tmp_path)
    for r in resources:
        if r["type"] == "aws:iam/rolePolicy:RolePolicy" and r["name"] == "train-controller":
            statements = {s["Sid"]: s for s in json.loads(r["inputs"]["policy"])["Statement"]}
            break_it(statements)
            r["inputs"]["policy"] = json.dumps({"Version": "2012-10-17", "Statement": list(statements.values())})
    violations = check_policies(resources, model)
    assert {v[:2] for v in violations} == {("iam-caller-actions", "train-controller")}, violations
    assert any(f"does not allow {missing}," in v[2] for v in violations), violations


def test_iam_caller_actions_fails_when_the_compute_role_cannot_list_the_artifacts_versions(tmp_path):
    """Day 2's Prolog (bin/update --job) lists the artifact's versions with the compute role: the
    plan check sees a policy without that right."""
    model, resources = _plan(VARIANTS["elastic"], tmp_path)
    assert [v for v in check_policies(resources, model) if v[0] == "iam-caller-actions"] == []
    for r in resources:
        if r["type"] == "aws:iam/rolePolicy:RolePolicy" and r["name"] == "train-node-s3":
            document = json.loads(r["inputs"]["policy"])
            document["Statement"] = [s for s in document["Statement"] if s["Sid"] != "RenderedArtifactVersions"]
            r["inputs"]["policy"] = json.dumps(document)
    violations = [v for v in check_policies(resources, model) if v[0] == "iam-caller-actions"]
    assert [v[1] for v in violations] == ["train-node"] and "s3:ListBucketVersions" in violations[0][2], violations


def test_compute_role_reads_the_munge_key_and_the_artifact_only(tmp_path):
    _, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    munge = _statements(resources, "train-node-munge")
    assert munge["MungeKey"]["Action"] == "secretsmanager:GetSecretValue"
    s3 = _statements(resources, "train-node-s3")
    assert s3["RenderedArtifact"] == {"Sid": "RenderedArtifact", "Effect": "Allow",
                                      "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                                      "Resource": "arn:aws:mock:::bucket/rendered-bucket/fleetform/rendered.tar.gz"}
    # day 2: the Prolog lists the artifact's versions, and nothing else in its bucket
    assert s3["RenderedArtifactVersions"] == {
        "Sid": "RenderedArtifactVersions", "Effect": "Allow", "Action": "s3:ListBucketVersions",
        "Resource": "arn:aws:mock:::bucket/rendered-bucket",
        "Condition": {"StringEquals": {"s3:prefix": "fleetform/rendered.tar.gz"}}}
    assert not [r for r in s3["OwnBuckets"]["Resource"] if "rendered" in r]  # nodes cannot rewrite it
    secret = _one(resources, "aws:secretsmanager/secret:Secret", "train-munge")
    assert secret["kmsKeyId"] == "arn:aws:mock:::key/train-munge"
    deny = json.loads(_one(resources, "aws:secretsmanager/secretPolicy:SecretPolicy", "train-munge")["policy"])
    (statement,) = deny["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
    assert statement["Condition"] == {"StringNotEquals": {"aws:PrincipalArn": [
        "arn:aws:mock:::role/train-controller", "arn:aws:mock:::role/train-node"]}}


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


def _statement(inputs: dict, sid: str) -> dict:
    return next(s for s in json.loads(inputs["policy"])["Statement"] if s.get("Sid") == sid)


def _restate(inputs: dict, sid: str, **changes) -> None:
    """One statement of a recorded policy document changed."""
    document = json.loads(inputs["policy"])
    for statement in document["Statement"]:
        if statement.get("Sid") == sid:
            statement.update(changes)
    inputs["policy"] = json.dumps(document)


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
    ("instance-image-id", "aws:ec2/instance:Instance", "train-controller",
     lambda i: i.update(ami="resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/"
                            "ebs-gp3/ami-id")),
    # the node-name zone: public, or in another VPC than the fleet's (its nodes resolve nothing)
    ("dns-zone-private", "aws:route53/zone:Zone", "train-names", lambda i: i.update(vpcs=[])),
    ("dns-zone-private", "aws:route53/zone:Zone", "train-names", lambda i: i.update(vpcs=[{"vpcId": "vpc-other"}])),
    # the controller may change records of any zone, or of another cluster's too
    ("dns-zone-private", "aws:iam/rolePolicy:RolePolicy", "train-controller",
     lambda i: _restate(i, "NodeNames", Resource="*")),
    ("dns-zone-private", "aws:iam/rolePolicy:RolePolicy", "train-controller",
     lambda i: _restate(i, "NodeNames", Resource=[_statement(i, "NodeNames")["Resource"],
                                                  "arn:aws:route53:::hostedzone/Z0THERCLUSTER"])),
])
def test_each_policy_fails_on_a_crafted_graph(policy, type_, name, fn, tmp_path):
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    violations = check_policies(_break(resources, type_, name, fn), model)
    assert [v[0] for v in violations] == [policy], violations


def test_asg_zones_fails_on_a_crafted_group(tmp_path):
    """No program of fleetform makes an Auto Scaling group any more; the check keeps any future one
    honest: the group of issue 10 (no subnets, no zones) fails, one with subnets passes."""
    model, resources = _plan(ROOT / "blueprints/reference.yaml", tmp_path)
    group = {"type": "aws:autoscaling/group:Group", "name": "train-static", "parent": "train",
             "inputs": {"minSize": 6, "maxSize": 6, "desiredCapacity": 6,
                        "launchTemplate": {"id": "train-nodes-id", "version": "1"}}}
    assert check_policies(resources + [group], model) == [
        ("asg-zones", "train-static", "names neither subnets (vpc_zone_identifiers) nor availability zones; "
                                      "AWS rejects CreateAutoScalingGroup")]
    group["inputs"]["vpcZoneIdentifiers"] = ["network-private-id"]
    assert check_policies(resources + [group], model) == []


def test_plan_cli_is_deterministic_and_reports_policies(tmp_path):
    first = run_cli("plan", "blueprints/reference.yaml", "--format", "json")
    second = run_cli("plan", "blueprints/reference.yaml", "--format", "json")
    assert first.returncode == 0 and first.stdout == second.stdout and "Traceback" not in first.stderr
    data = json.loads(first.stdout)
    assert [f["rule"] for f in data["findings"]] == ["capacity-duration", "eks-version-support", "hf-revision-unpinned",
                                                      "hf-revision-unpinned"] and len(data["resources"]) == 115  # 114 + the node monitoring agent add-on
    assert {"type", "name", "parent", "inputs"} <= set(data["resources"][0])
    assert set().union(*data["resources"]) <= {"type", "name", "parent", "inputs", "deps", "options", "aliases",
                                               "depends_on"}
    text = run_cli("plan", "blueprints/reference.yaml")
    assert "Cloud resources: 106" in text.stdout.splitlines()  # AWS resources and the Kubernetes objects on EKS
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
                                        "latestVersion": 1, "privateIp": "10.0.0.10", "dnsName": "fsx.example",
                                        "mountName": "abcdefgh"}]

        def call(self, args):
            return {"value": "ami-0123456789abcdef0"} if "getParameter" in args.token else {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1",
                                   "fleetform:secret-hf-token": "hf_test", "fleetform:deployer-cidr": "198.51.100.7/32"},
                                  ["fleetform:secret-hf-token"])

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(ROOT / "stacks/__main__.py"))

    try:
        program()
    finally:
        pulumi.runtime.set_all_config({})
    assert registered.count("aws:eks/cluster:Cluster") == 1 and "aws:ec2/instance:Instance" in registered
    assert "aws:autoscaling/group:Group" not in registered


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


def test_stack_program_asks_for_every_secret_before_any_resource(monkeypatch):
    """The gated models' hf-token Secret is made from a Pulumi secret: without it the run stops before
    anything is built and names the command, instead of failing after the Deployment's 43-minute wait."""
    import pulumi

    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.typ)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1"})
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    assert "`pulumi config set --secret fleetform:secret-hf-token <value>`" in str(err.value)
    assert registered == []

"""Issue 17, items 5 and 6: what EC2 refuses but moto's server and Pulumi's mocks accept (tag keys
of instances whose tags are in instance metadata, a spread placement group of more than 7), and the
cluster id that scopes one deployment's nodes and rights.

Each proof has two halves: moto on 127.0.0.1 shows the mock accepts the mistake (so only fleetform's
own checks stand between it and a failed launch), and the plan check refuses it, with a negative
control that passes.
"""

from __future__ import annotations

import importlib
import re
import runpy
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import awslocal
from conftest import ROOT
from fleetform.catalog import load_catalog
from fleetform.loader import load
from fleetform.plan import record
from fleetform.policies import check as check_policies
from fleetform.providers.aws.common import ClusterIdError, cluster_id
from fleetform.render import render
from fleetform.resolve import resolve

CORPUS = ROOT / "tests" / "corpus"
EKS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
"""Amazon EKS API Reference, CreateCluster `name`: 1-100 characters, `^[0-9A-Za-z][A-Za-z0-9\\-_]*`."""
BLUEPRINT_NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # the schema's metadata.name, at most 40


class Named:
    def __init__(self, name: str):
        self.name = name


def _model(path):
    """The resolved model of a blueprint that the rules refuse: what the program would build if
    fleetform's rules did not stop it (they do: tests/corpus)."""
    return resolve(load(path), load_catalog())


# --- the cluster id -------------------------------------------------------------------------------

def test_the_issues_two_deployments_get_two_cluster_ids():
    """Blueprint `ml` on stack `team-dev` and `ml-team` on stack `dev` were both `ml-team-dev`, and each
    controller could terminate the other's nodes."""
    assert cluster_id(Named("ml"), "team-dev") != cluster_id(Named("ml-team"), "dev")
    assert cluster_id(Named("ml"), "team-dev") == "ml_team-dev"


@given(st.from_regex(BLUEPRINT_NAME, fullmatch=True).filter(lambda s: len(s) <= 40),
       st.from_regex(r"[A-Za-z0-9_-]{1,59}", fullmatch=True))
def test_a_cluster_id_names_one_blueprint_and_stack_and_is_a_valid_eks_name(name, stack):
    cluster = cluster_id(Named(name), stack)
    assert cluster.split("_", 1) == [name, stack]  # decodable: no two pairs share it
    assert EKS_NAME.fullmatch(cluster) and len(cluster) <= 100


@pytest.mark.parametrize("stack, says", [("team.dev", "has a character other than"),
                                         ("dev/eu", "has a character other than"),
                                         ("s" * 60, "more than the 100 an EKS cluster name allows")])
def test_a_stack_name_that_cannot_be_mapped_is_refused(stack, says):
    with pytest.raises(ClusterIdError, match=says):
        cluster_id(Named("a" * 40), stack)


def test_a_cluster_id_too_long_for_a_dns_label_is_refused_where_a_slurm_fleet_names_its_zone():
    """The node names' zone `<fleet>.<cluster>.fleetform.internal` has the cluster id as one label: past 63
    octets Route 53 refuses the zone ("DNS domain name format", Route 53 Developer Guide) at `pulumi up`,
    after the VPC is built. An inference-only blueprint has no zone: its limit stays EKS's 100."""
    model = _model(ROOT / "blueprints" / "reference.yaml")
    slurm = [f.name for f in model.fleets if f.training and f.slurm is not None]
    assert slurm, "the reference has a Slurm fleet"
    fits = "s" * (63 - len(model.name) - 1)
    assert len(cluster_id(model, fits)) == 63
    with pytest.raises(ClusterIdError, match=f"a DNS label has at most 63: use a stack name of at most {len(fits)}"):
        cluster_id(model, fits + "s")
    # a blueprint without Slurm fleets keeps the longer bound
    inference = _model(ROOT / "blueprints" / "inference-l4.yaml")
    assert not [f for f in inference.fleets if f.training and f.slurm is not None]
    assert len(cluster_id(inference, "s" * (99 - len(inference.name)))) == 100


def test_the_stack_program_refuses_such_a_stack_before_any_resource(monkeypatch):
    import pulumi

    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.name)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="team.dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1"})
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    assert "the Pulumi stack name 'team.dev' has a character other than" in str(err.value)
    assert "Nothing was built" in str(err.value) and registered == []


@pytest.fixture(scope="module")
def moto():
    awslocal.need(awslocal.available())
    with awslocal.moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def node_programs(tmp_path_factory):
    """The rendered fleetform_node.py (what resume, suspend and the keeper call) as a module."""
    rendered = awslocal.render_fleet(tmp_path_factory.mktemp("scopes"), awslocal.blueprint("{min: 0, max: 4}"))
    sys.path.insert(0, str(rendered / "bin"))
    try:
        sys.modules.pop("fleetform_node", None)
        yield importlib.import_module("fleetform_node")
    finally:
        sys.path.remove(str(rendered / "bin"))
        sys.modules.pop("fleetform_node", None)


@pytest.mark.parametrize("scheme", ["fleetform", "before issue 17"])
def test_the_programs_see_only_their_own_clusters_nodes_in_moto(scheme, moto, node_programs):
    """Two deployments in one account: the instances the controller's programs find (and would
    terminate) are its own only. The same test with the id as it was (`<blueprint>-<stack>`) finds
    the other deployment's node too: the negative control."""
    ec2 = awslocal.client("ec2", moto)

    def ident(name, stack):
        return cluster_id(Named(name), stack) if scheme == "fleetform" else f"{name}-{stack}"

    mine, theirs = ident("ml", f"team-dev-{len(scheme)}"), ident("ml-team", f"dev-{len(scheme)}")
    launched = []
    for cluster in (mine, theirs):
        tags = {"fleetform:cluster": cluster, "fleetform:fleet": "train", "fleetform:role": "compute",
                "fleetform:node": "train-001"}
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        launched.append(ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.large",
                                          TagSpecifications=spec)["Instances"][0]["InstanceId"])
    env = {"FLEETFORM_CLUSTER": mine, "FLEETFORM_FLEET": "train", "FLEETFORM_REGION": awslocal.REGION,
           "FLEETFORM_AWS_CLI": awslocal.aws_cli(), "AWS_ENDPOINT_URL": moto, **awslocal.CREDENTIALS}
    found = {i["InstanceId"] for i in node_programs.instances(env, ("pending", "running"))}
    if scheme == "fleetform":
        assert found == {launched[0]}
    else:  # one id for both deployments: the other's node is found, and suspend would terminate it
        assert mine == theirs and found == set(launched)


# --- tag keys in instance metadata ----------------------------------------------------------------

def test_moto_launches_an_instance_tag_key_with_a_slash_while_tags_are_in_instance_metadata(moto):
    """EC2 refuses this launch (Amazon EC2 User Guide, "View tags for your EC2 instances using
    instance metadata"); moto does not: the mocks are no judge of it."""
    ec2 = awslocal.client("ec2", moto)
    template = ec2.create_launch_template(LaunchTemplateName="slash-tags", LaunchTemplateData={
        "ImageId": "ami-12c6146b", "InstanceType": "m7i.large",
        "MetadataOptions": {"HttpTokens": "required", "InstanceMetadataTags": "enabled"},
        "TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "example.com/team", "Value": "ml"}]}]})
    started = ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={
        "LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"]})["Instances"][0]
    assert started["State"]["Name"] in ("pending", "running")


def test_the_plan_refuses_instance_tag_keys_that_instance_metadata_cannot_serve():
    bad = _model(CORPUS / "334-tag-key-imds.yaml")
    violations = check_policies(record(bad, render(bad)), bad)
    assert sorted(violations) == [
        ("instance-tag-keys", "train-controller", "tags its instances with 'example.com/team' while their tags are in instance metadata: "
                             "EC2 refuses the launch"),
        ("instance-tag-keys", "train-nodes", "tags its instances with 'example.com/team' while their tags are in instance metadata: "
                        "EC2 refuses the launch")]
    good = _model(ROOT / "blueprints" / "reference.yaml")  # labels team, cost-center: the negative control
    assert [v for v in check_policies(record(good, render(good)), good) if v[0] == "instance-tag-keys"] == []


# --- spread placement -----------------------------------------------------------------------------

def test_moto_has_no_placement_groups_and_runs_eight_instances_into_one(moto):
    """EC2 runs at most 7 instances per availability zone in a spread placement group (Amazon EC2
    User Guide, "Placement strategies"). moto 5 does not implement CreatePlacementGroup at all, and
    runs 8 instances that name a (never created) group: the mocks are no judge of the limit."""
    from botocore.config import Config
    from botocore.parsers import ResponseParserError

    ec2 = awslocal.client("ec2", moto)
    import boto3

    once = boto3.client("ec2", region_name=awslocal.REGION, endpoint_url=moto, aws_access_key_id="testing",
                        aws_secret_access_key="testing", config=Config(retries={"max_attempts": 1}))
    with pytest.raises(ResponseParserError, match="500 Internal Server Error"):  # NotImplementedError in moto
        once.create_placement_group(GroupName="spread-8", Strategy="spread")
    started = ec2.run_instances(ImageId="ami-12c6146b", MinCount=8, MaxCount=8, InstanceType="m7i.large",
                                Placement={"GroupName": "spread-8", "AvailabilityZone": "us-east-1a"})["Instances"]
    assert len(started) == 8


def test_the_plan_refuses_a_spread_group_of_more_than_seven_and_passes_seven():
    bad = _model(CORPUS / "335-spread-placement.yaml")  # train: up to 8 nodes, small: 7
    assert check_policies(record(bad, render(bad)), bad) == [
        ("spread-placement-size", "train-nodes",
         "launches up to 8 nodes into spread placement group train-placement, which runs at most 7 in one "
         "availability zone")]


# --- one role per fleet ---------------------------------------------------------------------------

def test_each_training_fleet_has_its_own_compute_role_and_only_it_reads_its_munge_key(tmp_path):
    """With one compute role for every training fleet, fleet b's nodes could read fleet a's munge key
    (and forge any user's credential there). Each fleet now has its own role; each munge key's
    reader policy sits on that fleet's role, and its secret's policy denies every other principal."""
    import json

    from conftest import AWS_TRAINING_HEAD
    from fleetform.pipeline import check

    fleet = """    instance_type: p5.48xlarge
    nodes: 2
    scheduler: {type: slurm, partitions: [{name: gpu, default: true}]}
"""
    text = AWS_TRAINING_HEAD + fleet + "  - name: other\n    role: training\n" + fleet
    (tmp_path / "two.yaml").write_text(text)
    model = check(tmp_path / "two.yaml").model
    assert model is not None
    resources = record(model, render(model))
    roles = sorted(r["name"] for r in resources if r["type"] == "aws:iam/role:Role"
                   and r["inputs"]["tags"].get("fleetform:role") == "compute")
    assert roles == ["other-node", "train-node"]
    for name in ("train", "other"):
        (munge,) = [r for r in resources if r["type"] == "aws:iam/rolePolicy:RolePolicy" and r["name"] == f"{name}-node-munge"]
        assert munge["inputs"]["role"] == f"{name}-node-id"
        (secret,) = [r for r in resources if r["type"] == "aws:secretsmanager/secretPolicy:SecretPolicy"
                     and r["name"] == f"{name}-munge"]
        (deny,) = json.loads(secret["inputs"]["policy"])["Statement"]
        assert deny["Condition"]["StringNotEquals"]["aws:PrincipalArn"] == [
            f"arn:aws:mock:::role/{name}-controller", f"arn:aws:mock:::role/{name}-node"]
        (template,) = [r for r in resources if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
                       and r["name"] == f"{name}-nodes"]
        assert template["inputs"]["iamInstanceProfile"]["arn"] == f"arn:aws:mock:::instanceprofile/{name}-node"

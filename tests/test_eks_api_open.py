"""An EKS API endpoint open to the whole Internet is one finding, eks-api-open, whichever way it is asked
for: the blueprint's provider.eks.api_access_cidrs (a warning at validate), or the stack's
fleetform:deployer-cidr (refused at `pulumi up`, before anything is built; the plan check eks-api-open
rejects any recorded cluster whose publicAccessCidrs cover the Internet without the blueprint asking)."""

from __future__ import annotations

import copy
import dataclasses
import runpy

import pytest

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.policies import check as check_policies
from fleetform.render import render

REFERENCE = (ROOT / "blueprints/reference.yaml").read_text()
CLUSTER = "aws:eks/cluster:Cluster"
INTERNET = ["0.0.0.0/0", "1.2.3.4/0", "0.0.0.0/1,128.0.0.0/1"]


@pytest.fixture(scope="module")
def reference_plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "bp.yaml"
    path.write_text(REFERENCE)
    model = check(path).model
    return model, record(model, render(model))


def _open(resources, cidrs):
    broken = copy.deepcopy(resources)
    for r in broken:
        if r["type"] == CLUSTER:
            r["inputs"]["vpcConfig"]["publicAccessCidrs"] = cidrs
    return broken


def test_the_reference_plan_keeps_its_endpoint_closed(reference_plan):
    model, resources = reference_plan
    assert [p for p, _, _ in check_policies(resources, model) if p == "eks-api-open"] == []


@pytest.mark.parametrize("cidrs", [["0.0.0.0/0"], ["0.0.0.0/1", "128.0.0.0/1"], ["203.0.113.10/32", "0.0.0.0/0"]])
def test_the_plan_check_rejects_an_endpoint_open_to_the_internet(reference_plan, cidrs):
    """Negative control: the same plan with publicAccessCidrs that cover every IPv4 address, split or not."""
    model, resources = reference_plan
    violations = [(p, m) for p, _, m in check_policies(_open(resources, cidrs), model) if p == "eks-api-open"]
    assert len(violations) == 1 and "admit the whole Internet" in violations[0][1]


def test_the_plan_check_leaves_a_quarter_closed_and_what_the_blueprint_asks(reference_plan, tmp_path):
    model, resources = reference_plan
    quarter = ["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2"]
    assert [p for p, _, _ in check_policies(_open(resources, quarter), model) if p == "eks-api-open"] == []
    # api_access_cidrs covering the Internet is the blueprint's own, reviewed ask: the rule warns, the plan passes
    text = REFERENCE.replace("    ssh_ingress_cidrs: []", "    ssh_ingress_cidrs: []\n  eks:\n"
                             "    api_access_cidrs: [0.0.0.0/1, 128.0.0.0/1]")
    path = tmp_path / "open.yaml"
    path.write_text(text)
    result = check(path)
    assert [f.rule for f in result.findings if f.severity == "warning" and f.rule == "eks-api-open"] == ["eks-api-open"]
    opened = record(result.model, render(result.model))
    assert [p for p, _, _ in check_policies(opened, result.model) if p == "eks-api-open"] == []


@pytest.mark.parametrize("deployer", INTERNET[:2])
def test_a_deployer_cidr_covering_the_internet_is_refused_by_the_program(reference_plan, deployer):
    from fleetform.providers.aws.kube import api_access

    model, _ = reference_plan
    cluster = dataclasses.replace(model.cluster, api_access_cidrs=None)
    with pytest.raises(ValueError, match=r"admit the whole Internet .*\[eks-api-open\]"):
        api_access(cluster, deployer)
    assert api_access(cluster, "0.0.0.0/1") == ("0.0.0.0/1",)  # half is a range, not the Internet


@pytest.mark.parametrize("deployer", ["0.0.0.0/0", " 1.2.3.4/0 "])
def test_the_stack_refuses_a_deployer_cidr_covering_the_internet_before_building(deployer):
    """`pulumi config set fleetform:deployer-cidr 0.0.0.0/0` opened the EKS API to the Internet with no finding:
    the same words as eks-api-open, and nothing is built."""
    import pulumi

    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.typ)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1",
                                   "fleetform:secret-hf-token": "hf_test", "fleetform:deployer-cidr": deployer},
                                  ["fleetform:secret-hf-token"])
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    message = str(err.value)
    assert "admit the whole Internet to the cluster's API endpoint [eks-api-open]" in message
    assert "api_access_cidrs" in message and message.endswith("Nothing was built.")
    assert registered == []


@pytest.mark.parametrize("deployer", ["::/0", "2001:db8::1"])
def test_the_stack_refuses_an_ipv6_deployer_cidr_before_building(deployer):
    """EKS's publicAccessCidrs: "You can't add IPv6 CIDR blocks to IPv4 clusters" (EKS API VpcConfigRequest),
    and fleetform's clusters are IPv4. Before, `fleetform:deployer-cidr ::/0` passed the Internet check (which
    counts IPv4 only) and reached CreateCluster, which refused it after the VPC and IAM roles were built."""
    import pulumi

    registered = []

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            registered.append(args.typ)
            return [f"{args.name}-id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="fleetform", stack="dev", preview=False)
    pulumi.runtime.set_all_config({"fleetform:blueprint": "../blueprints/reference.yaml", "aws:region": "us-east-1",
                                   "fleetform:secret-hf-token": "hf_test", "fleetform:deployer-cidr": deployer},
                                  ["fleetform:secret-hf-token"])
    try:
        with pytest.raises(pulumi.RunError) as err:
            runpy.run_path(str(ROOT / "stacks/__main__.py"))
    finally:
        pulumi.runtime.set_all_config({})
    message = str(err.value)
    assert "IPv4" in message and message.endswith("Nothing was built.")
    assert registered == []

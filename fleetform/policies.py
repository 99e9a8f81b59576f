"""Security policies: plain functions over the recorded resource graph of `fleetform plan`.

Each policy takes the resources ({type, name, parent, inputs}) and the blueprint, and returns
violations as (resource name, message). The plan reports every violation as an error finding.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
from typing import Callable

from .model import Blueprint

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
BUCKET = "aws:s3/bucket:Bucket"
AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
Violation = tuple[str, str]
Policy = Callable[[list[dict], Blueprint], list[Violation]]
POLICIES: dict[str, tuple[str, Policy]] = {}


def policy(id: str, summary: str):
    def register(fn: Policy) -> Policy:
        POLICIES[id] = (summary, fn)
        return fn
    return register


def _of(resources, type_):
    return [r for r in resources if r["type"] == type_]


@policy("imdsv2-required", "every launch template and instance requires IMDSv2 tokens")
def imdsv2(resources, bp):
    return [(r["name"], "does not require IMDSv2 (metadata_options.http_tokens must be 'required')")
            for r in _of(resources, LAUNCH_TEMPLATE) + _of(resources, INSTANCE)
            if (r["inputs"].get("metadataOptions") or {}).get("httpTokens") != "required"]


@policy("encrypted-storage", "volumes and buckets are encrypted")
def encrypted(resources, bp):
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        for device in r["inputs"].get("blockDeviceMappings", []):
            if str((device.get("ebs") or {}).get("encrypted")).lower() != "true":
                out.append((r["name"], f"volume {device.get('deviceName')} is not encrypted"))
    for r in _of(resources, INSTANCE):
        if not (r["inputs"].get("rootBlockDevice") or {}).get("encrypted"):
            out.append((r["name"], "root volume is not encrypted"))
    encrypted_buckets = {r["inputs"].get("bucket") for r in
                         _of(resources, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")}
    out += [(b["name"], "bucket has no server-side encryption configuration") for b in _of(resources, BUCKET)
            if f"{b['name']}-id" not in encrypted_buckets]
    return out


@policy("public-access-blocked", "every bucket blocks public ACLs and policies")
def public_access(resources, bp):
    blocked = {r["inputs"].get("bucket") for r in _of(resources, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
               if all(r["inputs"].get(k) is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                                            "restrictPublicBuckets"))}
    return [(b["name"], "bucket does not block public access") for b in _of(resources, BUCKET)
            if f"{b['name']}-id" not in blocked]


@policy("no-open-ingress", "no ingress from 0.0.0.0/0 unless ssh_ingress_cidrs asks for it")
def open_ingress(resources, bp):
    allowed = set(bp.network.ssh_ingress_cidrs)
    out = []
    for r in _of(resources, "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        cidr = r["inputs"].get("cidrIpv4")
        if cidr and ipaddress.ip_network(cidr, strict=False).prefixlen == 0 and cidr not in allowed:
            out.append((r["name"], f"allows ingress from {cidr}"))
    return out


@policy("efa-security-groups", "every interface of a launch template carries the security groups, and only there")
def efa_groups(resources, bp):
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        interfaces = r["inputs"].get("networkInterfaces") or []
        if interfaces and r["inputs"].get("vpcSecurityGroupIds"):
            out.append((r["name"], "sets vpc_security_group_ids as well as network interfaces"))
        for i in interfaces:
            if not i.get("securityGroups"):
                out.append((r["name"], f"interface card {i.get('networkCardIndex', 0)} device {i.get('deviceIndex')} "
                                       "has no security group"))
    return out


@policy("asg-zones", "every Auto Scaling group names its subnets or availability zones")
def asg_zones(resources, bp):
    """AWS rejects CreateAutoScalingGroup without either ("At least one Availability Zone or VPC
    Subnet is required"); the mocks accept it. The provider documents one of `availability_zones` and
    `vpc_zone_identifiers` as required:
    https://www.pulumi.com/registry/packages/aws/api-docs/autoscaling/group/ and
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CreateAutoScalingGroup.html
    (fleetform's training fleets have no Auto Scaling group; EKS makes its node groups' own, which
    the plan does not record: the check holds for any group a program adds)."""
    return [(r["name"], "names neither subnets (vpc_zone_identifiers) nor availability zones; "
                        "AWS rejects CreateAutoScalingGroup")
            for r in _of(resources, AUTOSCALING_GROUP)
            if not r["inputs"].get("vpcZoneIdentifiers") and not r["inputs"].get("availabilityZones")]


@policy("instance-image-id", "an instance with a root_block_device names its image by AMI id, not resolve:ssm:")
def instance_image_id(resources, bp):
    """The AWS provider looks the image up with DescribeImages to fill a root_block_device, which
    fails on `resolve:ssm:` (InvalidAMIID.Malformed,
    https://github.com/hashicorp/terraform-provider-aws/issues/43488); without the block the
    instance is replaced on every update (#43364). Resolve the id at deploy time instead."""
    return [(r["name"], f"ami {r['inputs']['ami']!r} with a root_block_device: the provider fails with "
                        "InvalidAMIID.Malformed (terraform-provider-aws #43488)")
            for r in _of(resources, INSTANCE)
            if str(r["inputs"].get("ami", "")).startswith("resolve:ssm:") and r["inputs"].get("rootBlockDevice")]


def _statements(document: str) -> list[dict]:
    statements = json.loads(document).get("Statement", [])
    return [statements] if isinstance(statements, dict) else statements


def _listed(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _allows(statement: dict, call) -> bool:
    """Whether an Allow statement authorizes a call on its resource type, with conditions the call
    can meet: a request-tag condition holds only where the call tags the resource itself, and an
    ec2:CreateAction condition only for the tags of a launch."""
    if statement.get("Effect") != "Allow":
        return False
    if not any(fnmatch.fnmatchcase(call.action, pattern) for pattern in _listed(statement.get("Action"))):
        return False
    resources = _listed(statement.get("Resource"))
    if call.resource != "*" and not any(r == "*" or f":{call.resource}/" in r for r in resources):
        return False
    keys = [key for operator in (statement.get("Condition") or {}).values() for key in operator]
    if "ec2:CreateAction" in keys and not call.at_launch:  # tag-on-create only, and this call tags later
        return False
    return call.sets_tags or not any(key.startswith("aws:RequestTag/") for key in keys)


@policy("iam-caller-actions", "each instance role allows every AWS call its programs make")
def iam_caller_actions(resources, bp):
    """The role of a controller or compute node (tag `fleetform:role`) must allow each call in
    providers/aws/calls.py, on the resource types the call touches, under conditions the call meets.
    EC2 authorizes RunInstances per resource it creates or uses and fails the whole launch for one
    denied (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ExamplePolicies_EC2.html); a
    `resolve:ssm:` image needs ssm:GetParameters
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-ec2-aliases.html)."""
    from .providers.aws.calls import CALLS

    ssm_fleets = {(r["inputs"].get("tags") or {}).get("fleetform:fleet") for r in _of(resources, LAUNCH_TEMPLATE)
                  if str(r["inputs"].get("imageId", "")).startswith("resolve:ssm:")}
    out = []
    for role in _of(resources, ROLE):
        tags = role["inputs"].get("tags") or {}
        calls = CALLS.get(tags.get("fleetform:role"))
        if calls is None:
            continue
        statements = [s for p in _of(resources, ROLE_POLICY) if p["inputs"].get("role") in (f"{role['name']}-id",
                                                                                               role["name"])
                      for s in _statements(p["inputs"].get("policy", "{}"))]
        for call in calls:
            if call.when == "ssm-image" and tags.get("fleetform:fleet") not in ssm_fleets:
                continue
            if call.when == "own-buckets" and not any(s.type == "s3" for s in bp.storage):
                continue
            if not any(_allows(s, call) for s in statements):
                where = f" on {call.resource}" if call.resource != "*" else ""
                out.append((role["name"], f"does not allow {call.action}{where}, which {call.program} calls "
                                          "(providers/aws/calls.py)"))
    return out


def check(resources: list[dict], bp: Blueprint) -> list[tuple[str, str, str]]:
    """(policy id, resource name, message) for every violation."""
    return [(pid, name, message) for pid, (_, fn) in POLICIES.items() for name, message in fn(resources, bp)]


PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"


@policy("instance-tag-keys", "an instance whose tags are in instance metadata has only tag keys it can serve")
def instance_tag_keys(resources, bp):
    """With `instance_metadata_tags` enabled, EC2 refuses to launch an instance with a tag key that
    has `/` or a space (Amazon EC2 User Guide, "View tags for your EC2 instances using instance
    metadata"); moto's server and Pulumi's mocks launch it. The `tag-key-imds` rule stops such a
    label before the plan; this checks what the program actually puts on instances."""
    from .rules.blueprint import INSTANCE_TAG_KEY, INSTANCE_TAG_KEYS_REFUSED

    out = []
    for r in _of(resources, LAUNCH_TEMPLATE) + _of(resources, INSTANCE):
        inputs = r["inputs"]
        if (inputs.get("metadataOptions") or {}).get("instanceMetadataTags") != "enabled":
            continue
        keys = set(inputs.get("tags") or {})
        for spec in inputs.get("tagSpecifications") or []:
            if spec.get("resourceType") == "instance":
                keys |= set(spec.get("tags") or {})
        bad = sorted(k for k in keys if not INSTANCE_TAG_KEY.fullmatch(k) or k in INSTANCE_TAG_KEYS_REFUSED)
        if bad:
            out.append((r["name"], f"tags its instances with {', '.join(repr(k) for k in bad)} while their tags are "
                                   "in instance metadata: EC2 refuses the launch"))
    return out


@policy("spread-placement-size", "a spread placement group's launch template starts at most 7 nodes (one zone)")
def spread_placement_size(resources, bp):
    """A spread placement group runs at most 7 instances per availability zone (Amazon EC2 User
    Guide, "Placement strategies"); a fleet's nodes share one subnet, so one zone. moto's server and
    Pulumi's mocks launch an eighth; EC2 does not."""
    from .rules.fleets import SPREAD_MAX_PER_ZONE

    spread = {r["name"] for r in _of(resources, PLACEMENT_GROUP) if r["inputs"].get("strategy") == "spread"}
    sizes = {f.name: f.nodes.max for f in bp.fleets if f.nodes is not None}
    out = []
    for r in _of(resources, LAUNCH_TEMPLATE):
        group = (r["inputs"].get("placement") or {}).get("groupName")
        fleet = (r["inputs"].get("tags") or {}).get("fleetform:fleet")
        if group in spread and sizes.get(fleet, 0) > SPREAD_MAX_PER_ZONE:
            out.append((r["name"], f"launches up to {sizes[fleet]} nodes into spread placement group {group}, "
                                   f"which runs at most {SPREAD_MAX_PER_ZONE} in one availability zone"))
    return out

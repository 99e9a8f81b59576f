"""Security policies: plain functions over the recorded resource graph of `fleetform plan`.

Each policy takes the resources ({type, name, parent, inputs}) and the blueprint, and returns
violations as (resource name, message). The plan reports every violation as an error finding.
"""

from __future__ import annotations

import ipaddress
from typing import Callable

from .model import Blueprint

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
BUCKET = "aws:s3/bucket:Bucket"
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
        if cidr and ipaddress.ip_network(cidr).prefixlen == 0 and cidr not in allowed:
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


def check(resources: list[dict], bp: Blueprint) -> list[tuple[str, str, str]]:
    """(policy id, resource name, message) for every violation."""
    return [(pid, name, message) for pid, (_, fn) in POLICIES.items() for name, message in fn(resources, bp)]

"""What every AWS component shares: the images, root volume size, tags, resource options, and
the helpers for user data, IAM documents and protected buckets.

Raw pulumi_aws resources only (no remote components), so the program runs unchanged under Pulumi's
mocks for `fleetform plan` and the tests. Every child's logical name starts with its component's
name: when a blueprint renames a fleet and lists the old name in `renamed_from`, the component's
alias carries over to every child, and nothing is replaced silently.
"""

from __future__ import annotations

import base64
import json
import re

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint

ROOT_GIB = 200
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
"""Kubernetes taint effects as the EKS API spells them."""
LUSTRE_VERSION = "2.15"
LUSTRE_PORTS = ((988, 988), (1018, 1023))
"""FSx for Lustre: LNET (988) and the ports 1018-1023 its clients and servers use."""


STACK_NAME = re.compile(r"[A-Za-z0-9_-]+")
CLUSTER_ID_MAX = 100
"""The cluster id names the EKS cluster of an inference fleet too: 1-100 letters, digits, `-` and `_`,
starting with a letter or digit (Amazon EKS API Reference, CreateCluster, `name`). It is also a tag
value (at most 256 of letters, digits, spaces and `_ . : / = + - @`) and an IAM condition value."""


DNS_LABEL_MAX = 63
"""A label of a domain name has at most 63 octets (RFC 1035, 2.3.4); Route 53 refuses a hosted zone
whose name has a longer one ("DNS domain name format", Amazon Route 53 Developer Guide)."""


class ClusterIdError(ValueError):
    """A Pulumi stack whose name cannot be part of a cluster id."""


def cluster_id(bp: Blueprint, stack: str | None = None) -> str:
    """What scopes every resource, instance and right of one deployment: `<blueprint>_<stack>`, the
    blueprint's name and the Pulumi stack's, so two blueprints or two stacks of one blueprint in an
    account never touch each other's nodes. A blueprint name is a DNS label (letters, digits, `-`) and
    never has `_`: everything before the first `_` is the blueprint, the rest the stack, and no two
    pairs share an id (with `-` between them, blueprint `ml` on stack `team-dev` and `ml-team` on
    stack `dev` both were `ml-team-dev`). A stack name with another character (Pulumi allows `.`) or
    too long for the id is refused."""
    stack = pulumi.get_stack() if stack is None else stack
    if not STACK_NAME.fullmatch(stack):
        raise ClusterIdError(f"the Pulumi stack name {stack!r} has a character other than letters, digits, '-' "
                             f"and '_'; the cluster id <blueprint>_<stack> tags, scopes and names this "
                             f"deployment's resources (an EKS cluster name allows no other): use a stack name "
                             f"such as {re.sub(r'[^A-Za-z0-9_-]', '-', stack) or 'dev'!r}")
    cluster = f"{bp.name}_{stack}"
    if len(cluster) > CLUSTER_ID_MAX:
        raise ClusterIdError(f"the cluster id {cluster!r} (<blueprint>_<stack>) has {len(cluster)} characters, more "
                             f"than the {CLUSTER_ID_MAX} an EKS cluster name allows: use a stack name of at most "
                             f"{CLUSTER_ID_MAX - len(bp.name) - 1} characters")
    slurm = [fleet.name for fleet in getattr(bp, "fleets", ()) if fleet.training and fleet.slurm is not None]
    if slurm and len(cluster) > DNS_LABEL_MAX:
        raise ClusterIdError(f"the cluster id {cluster!r} (<blueprint>_<stack>) has {len(cluster)} characters; it is "
                             f"one label of the node names' zone <fleet>.<cluster>.fleetform.internal of the Slurm "
                             f"fleet {slurm[0]!r}, and a DNS label has at most {DNS_LABEL_MAX}: use a stack name of "
                             f"at most {DNS_LABEL_MAX - len(bp.name) - 1} characters")
    return cluster


def tags_of(bp: Blueprint, **extra: str) -> dict[str, str]:
    """The tags of every resource: the blueprint's labels, its name and version, the cluster id.
    Nothing that changes on every render (a digest of the rendered files) is a tag here: on a launch
    template it would roll every node; the artifact object alone carries the manifest digest."""
    tags = dict(bp.labels)
    tags.update({"fleetform:blueprint": bp.name, "fleetform:version": bp.version, "fleetform:cluster": cluster_id(bp)})
    tags.update(extra)
    return tags


def _opts(parent: pulumi.Resource, **kwargs) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, **kwargs)


def _user_data(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def _protect_bucket(name: str, bucket: aws.s3.Bucket, parent: pulumi.Resource, versioning: bool = True,
                    noncurrent_days: int | None = None) -> None:
    """Encryption, public access blocked, ownership enforced, versioning, expiry of old versions."""
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-sse", bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "aws:kms"}, "bucket_key_enabled": True}],
        opts=_opts(parent))
    aws.s3.BucketPublicAccessBlock(f"{name}-public-access", bucket=bucket.id, block_public_acls=True,
                                   block_public_policy=True, ignore_public_acls=True, restrict_public_buckets=True,
                                   opts=_opts(parent))
    aws.s3.BucketOwnershipControls(f"{name}-ownership", bucket=bucket.id,
                                   rule={"object_ownership": "BucketOwnerEnforced"}, opts=_opts(parent))
    aws.s3.BucketVersioning(f"{name}-versioning", bucket=bucket.id,
                            versioning_configuration={"status": "Enabled" if versioning else "Suspended"},
                            opts=_opts(parent))
    if noncurrent_days:
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle", bucket=bucket.id,
            rules=[{"id": "expire-noncurrent", "status": "Enabled", "filter": {},
                    "noncurrent_version_expiration": {"noncurrent_days": noncurrent_days}}],
            opts=_opts(parent))


def _policy(document: dict) -> str:
    return json.dumps(document, sort_keys=True)



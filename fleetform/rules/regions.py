"""Rules over the AWS region: a region AWS does not have is a finding of its own, with the regions
there are, rather than a missing price or instance offering later."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from ..model import Blueprint
from . import Reporter, did_you_mean, rule


@lru_cache(maxsize=1)
def known_regions() -> dict[str, str]:
    """Every AWS region code with AWS's description of it, from providers/aws/regions.json (its
    source: botocore's partitions.json, the partition data the AWS SDKs' endpoint rules read)."""
    data = json.loads(resources.files("fleetform.providers.aws").joinpath("regions.json").read_text(encoding="utf-8"))
    return {code: text for regions in data["partitions"].values() for code, text in regions.items()}


@lru_cache(maxsize=1)
def partition_of() -> dict[str, str]:
    """The partition of every known region (aws, aws-cn, aws-us-gov, ...), from providers/aws/regions.json."""
    data = json.loads(resources.files("fleetform.providers.aws").joinpath("regions.json").read_text(encoding="utf-8"))
    return {code: partition for partition, regions in data["partitions"].items() for code in regions}


BUILT_PARTITION = "aws"
"""The one partition fleetform builds in: the Pulumi program writes its IAM policies' resources, managed
policy attachments and Route 53 zone ARNs as arn:aws:... (providers/aws/training.py, iam.py, kube.py),
which IAM refuses in any other partition (MalformedPolicyDocument: Partition "aws" is not valid for
resource ...; an ARN's partition is aws, aws-cn or aws-us-gov,
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html). `fleetform init` offers only
its regions too."""


@rule("unknown-region", "error", "provider.region is a region AWS has (providers/aws/regions.json, from botocore's "
      "partition data), in the aws partition, the one whose ARNs fleetform writes")
def unknown_region(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws" or bp.region is None:
        return
    regions = known_regions()
    partition = partition_of().get(bp.region)
    if partition == BUILT_PARTITION:
        return
    if partition is not None:
        report(("provider", "region"), f"'{bp.region}' is a region of the {partition} partition ({regions[bp.region]}), "
               "where fleetform cannot build: its IAM policies and role attachments name "
               "arn:aws:... ARNs, which IAM refuses there (MalformedPolicyDocument), at pulumi up",
               f"use a region of the {BUILT_PARTITION} partition, e.g. us-east-1")
        return
    regions = {r: text for r, text in regions.items() if partition_of()[r] == BUILT_PARTITION}
    guess = did_you_mean(bp.region, regions)
    close = guess if guess.startswith("did you mean") else ""
    prefix = bp.region.split("-")[0] + "-"
    near = sorted(r for r in regions if r.startswith(prefix)) or sorted(regions)
    listed = ", ".join(near)
    report(("provider", "region"), f"'{bp.region}' is not an AWS region",
           f"{close + ' ' if close else ''}the regions{f' starting with {prefix}' if near != sorted(regions) else ''}"
           f": {listed}")

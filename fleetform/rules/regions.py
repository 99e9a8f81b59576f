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


@rule("unknown-region", "error", "provider.region is a region AWS has (providers/aws/regions.json, from botocore's "
      "endpoint data)")
def unknown_region(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws" or bp.region is None:
        return
    regions = known_regions()
    if bp.region in regions:
        return
    guess = did_you_mean(bp.region, regions)
    close = guess if guess.startswith("did you mean") else ""
    prefix = bp.region.split("-")[0] + "-"
    near = sorted(r for r in regions if r.startswith(prefix)) or sorted(regions)
    listed = ", ".join(near)
    report(("provider", "region"), f"'{bp.region}' is not an AWS region",
           f"{close + ' ' if close else ''}the regions{f' starting with {prefix}' if near != sorted(regions) else ''}"
           f": {listed}")

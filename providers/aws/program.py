"""The Pulumi program: the resolved model and its rendered files -> AWS resources.

stacks/__main__.py calls `build` under `pulumi up`; `fleetform plan` calls it under Pulumi's
mocks to record what it would create. Both pass the same model and the same rendered bytes.
"""

from __future__ import annotations

import pulumi

from fleetform.model import Blueprint

from .common import tags_of
from .iam import Iam
from .inference import InferenceFleet
from .network import Network, Security
from .storage import RenderedFiles, Storage
from .training import TrainingFleet


def build(bp: Blueprint, files: dict[str, bytes]) -> None:
    if bp.cloud != "aws":
        return
    tags = tags_of(bp)
    net = Network("network", bp, tags)
    security = Security("security", bp, net.vpc_id, tags)
    storage = Storage("storage", bp, net.subnet_id, security.group_id, tags)
    rendered = RenderedFiles("rendered", bp, files, tags)
    iam = Iam("iam", bp, [b.arn for b in storage.buckets.values()], rendered, tags)
    for fleet in bp.fleets:
        opts = pulumi.ResourceOptions(aliases=[pulumi.Alias(name=old) for old in fleet.renamed_from])
        if fleet.training and fleet.slurm is not None and fleet.instance is not None:
            TrainingFleet(fleet.name, bp, fleet, net, security, iam, storage, rendered, tags, opts)
        elif fleet.kube is not None and fleet.instance is not None:
            InferenceFleet(fleet.name, bp, fleet, net, security, iam, tags, opts)
    pulumi.export("config_bucket", rendered.bucket.bucket)
    pulumi.export("config_key", rendered.key)
    pulumi.export("manifest_sha256", rendered.manifest_sha256)

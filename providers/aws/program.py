"""The Pulumi program: the resolved model and its rendered files -> AWS resources.

fleetform/pulumi_program.py (run by stacks/__main__.py and every blueprint repository) calls `build` under `pulumi up`; `fleetform plan` calls it under Pulumi's
mocks to record what it would create. Both pass the same model and the same rendered bytes.
"""

from __future__ import annotations

import pulumi

from fleetform.cluster import volume_weights
from fleetform.model import Blueprint

from .common import tags_of
from .iam import Iam
from .inference import InferenceFleet
from .kube import EksCluster
from .kueue import KubeTrainingFleet
from .network import Network, Security
from .ray import RayFleet
from .slinky import SlinkyFleet
from .storage import RenderedFiles, Storage, admit_lustre_clients, file_system_outputs
from .training import TrainingFleet


def build(bp: Blueprint, files: dict[str, bytes], deployer_cidr: str | None = None) -> None:
    """deployer_cidr: the public address (a /32) `pulumi up` runs from; the EKS endpoint answers it when the
    blueprint lists no provider.eks.api_access_cidrs."""
    if bp.cloud != "aws":
        return
    tags = tags_of(bp)
    net = Network("network", bp, tags)
    security = Security("security", bp, net.vpc_id, tags)
    storage = Storage("storage", bp, net.subnet_id, security.group_id, tags)
    rendered = RenderedFiles("rendered", bp, files, tags)
    iam = Iam("iam", bp, [b.arn for b in storage.buckets.values()], rendered, tags)
    # inference fleets share one EKS cluster (providers/aws/kube.py says in what order it is built)
    eks = EksCluster("eks", bp, net, security, iam, files, tags, deployer_cidr) if bp.cluster is not None else None
    serving = []
    for fleet in bp.fleets:
        opts = pulumi.ResourceOptions(aliases=[pulumi.Alias(name=old) for old in fleet.renamed_from])
        if fleet.training and fleet.slurm is not None and fleet.instance is not None:
            TrainingFleet(fleet.name, bp, fleet, net, security, iam, storage, rendered, tags, opts)
        elif eks is not None and fleet.name in {g.fleet for g in bp.cluster.node_groups}:
            kind = (KubeTrainingFleet if fleet.kueue is not None else RayFleet if fleet.ray is not None
                    else SlinkyFleet if fleet.slinky is not None else InferenceFleet)
            serving.append(kind(fleet.name, fleet, eks, files, tags, opts))
    if eks is not None:
        from .caches import CacheFileSystem  # a fleet's shared cache on EFS (providers/aws/caches.py)

        for fleet in serving:
            shared = next((f.kube.shared_cache for f in bp.fleets if f.name == fleet.name and f.kube is not None), None)
            if shared is not None and shared.efs:  # its claim, a late object, waits for the StorageClass
                fleet.early.append(CacheFileSystem(f"{fleet.name}-cache", shared, net, eks, tags).storage_class)
        eks.install([r for f in serving for r in f.early])
        for fleet in serving:
            fleet.apply()
        pulumi.export("eks_cluster", eks.cluster.name)
        if storage.file_systems and (volume_weights([f for f in bp.fleets if f.kube is not None])
                                     or any(f.ray is not None and f.ray.mounts for f in bp.fleets)
                                     or any(f.slinky is not None and f.slinky.mounts for f in bp.fleets)):
            # a weights claim's (or a Ray fleet's claim's) PersistentVolume is the blueprint's FSx for Lustre:
            # the EKS nodes mount it
            admit_lustre_clients("eks-nodes", storage, security.group_id,
                                 eks.cluster.vpc_config.cluster_security_group_id, tags)
    if storage.file_systems:
        pulumi.export("fsx", file_system_outputs(storage))
    pulumi.export("config_bucket", rendered.bucket.bucket)
    pulumi.export("config_key", rendered.key)
    pulumi.export("manifest_sha256", rendered.manifest_sha256)

"""Rules over an inference fleet's shared cache (`cache:`, fleetform/k8s.py SharedCache): the ReadWriteMany claim that
keeps vLLM's torch.compile cache and Hugging Face Hub downloads past a pod."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


@rule("cache-scope", "error",
      "a shared cache belongs to an inference fleet on Kubernetes, and off AWS it names its StorageClass")
def cache_scope(bp: Blueprint, report: Reporter) -> None:
    """The claim is mounted by the model servers of an inference fleet scheduled by Kubernetes: another fleet has
    no pod that would mount it, and the block would be silently ignored. On AWS fleetform makes the EFS file system
    and its StorageClass (providers/aws/caches.py); elsewhere it cannot know which class gives ReadWriteMany volumes,
    and a claim of a class that does not exist stays Pending, with every replica behind it."""
    for fleet in bp.fleets:
        cache = fleet.cache
        if cache is None:
            continue
        if fleet.training or fleet.scheduler is None or fleet.scheduler.type != "kubernetes":
            report(cache.path, f"fleet '{fleet.name}' has a cache, but only the model servers of an inference fleet "
                               "scheduled by Kubernetes mount one", "remove `cache`")
        elif bp.cloud != "aws" and cache.storage_class is None:
            report(cache.path, f"fleet '{fleet.name}' has a cache with no storage_class: off AWS fleetform makes no "
                               "file system, and a claim of no existing class stays Pending",
                   "set cache.storage_class to a StorageClass that provisions ReadWriteMany volumes (NFS, CephFS, "
                   "a CSI driver of your file system)")

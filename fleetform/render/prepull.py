"""<fleet>/node/user-data: the user data of an inference fleet's EKS GPU node group (its launch template's), which
pre-pulls the fleet's model server images on each new node (fleetform/prepull.py) and, on instances with local
NVMe, gives nodeadm the RAID0 NodeConfig. The Pulumi program sends this file as it is (providers/aws/inference.py),
so the review reads what the nodes run; a change of it is a new launch template version, a node roll."""

from __future__ import annotations

from ..model import Blueprint, Fleet
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    cluster = getattr(bp, "cluster", None)
    if cluster is None or fleet.kube is None or fleet.training:
        return {}
    group = next((g for g in cluster.node_groups if g.fleet == fleet.name), None)
    if group is None or not group.prepull:
        return {}
    return {f"{fleet.name}/node/user-data": render("prepull/user-data.j2", images=group.prepull,
                                                  local_nvme=group.local_nvme)}

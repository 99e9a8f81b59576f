"""The node group of an inference fleet whose replicas span nodes (fleetform/lws.py): EFA interfaces and a cluster
placement group in its launch template, as a Kubernetes training fleet's (providers/aws/kueue.py), so a
LeaderWorkerSet group's NCCL traffic between its nodes runs over EFA. The LWS controller and the EFA device plugin
are Helm releases of the cluster (fleetform/cluster.py), installed before the fleet's LeaderWorkerSets."""

from __future__ import annotations

import pulumi_aws as aws

from fleetform.model import Fleet

from .common import _opts
from .training import own_placement_group


def spans_nodes(fleet: Fleet) -> bool:
    return fleet.kube is not None and any(s.group is not None for s in fleet.kube.servers)


def launch_extras(component, fleet: Fleet, tags: dict) -> dict:
    """launch_template's extra arguments for such a fleet: its EFA interfaces (the EKS cluster security group and
    the blueprint's, whose self-referencing rules admit EFA traffic, on each interface, never also in
    vpc_security_group_ids) where the instance has EFA, and its own placement group."""
    from .kueue import efa_interfaces

    more: dict = {}
    if not spans_nodes(fleet):
        return more
    if fleet.instance is not None and fleet.instance.max_efa:
        groups = [component.eks.cluster.vpc_config.cluster_security_group_id, component.eks.security_group]
        more["network_interfaces"] = efa_interfaces(fleet, groups)
    if own_placement_group(fleet):
        placement = aws.ec2.PlacementGroup(f"{component.name}-placement", strategy=fleet.placement, tags=tags,
                                           opts=_opts(component))
        more["placement"] = {"group_name": placement.name}
    return more

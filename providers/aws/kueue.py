"""A training fleet scheduled by Kubernetes on the blueprint's EKS cluster: an EFA node group in a cluster
placement group, then its rendered Kueue objects (fleetform/kueue.py) once the Kueue and JobSet releases,
whose CRDs they use, are up (providers/aws/kube.py installs the releases; EksCluster.install)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.cluster import ROOT_GIB
from fleetform.model import Fleet

from .common import _opts
from .inference import InferenceFleet
from .kube import launch_template
from .training import efa_layout, own_placement_group


def efa_interfaces(fleet: Fleet, security_groups: list) -> list[dict]:
    """The launch template's network interfaces: the same card layout as the fleet's Slurm nodes would have
    (providers/aws/training.py efa_layout), the security groups on each interface. No subnet: EKS launches a
    managed node group's instances in the node group's subnets and refuses a launch template that names one
    in its network interfaces (EKS User Guide, "Customize managed nodes with launch templates")."""
    return [{"network_card_index": i.card, "device_index": i.device, "interface_type": i.kind,
             "security_groups": security_groups, "delete_on_termination": "true"}
            for i in efa_layout(fleet.instance)]


def efa_launch_extras(component, fleet: Fleet, tags: dict, efa: bool) -> dict:
    """launch_template's extra arguments for a node group whose pods talk NCCL across nodes (a Kueue training
    fleet, an inference fleet of LeaderWorkerSet groups: providers/aws/lws.py): where efa, its EFA interfaces with
    the EKS cluster security group (node <-> control plane, CoreDNS) and the blueprint's, whose self-referencing
    rules admit EFA traffic between the nodes, on each interface and never also in vpc_security_group_ids (EC2
    refuses both); and the fleet's own placement group."""
    more: dict = {}
    if efa:
        groups = [component.eks.cluster.vpc_config.cluster_security_group_id, component.eks.security_group]
        more["network_interfaces"] = efa_interfaces(fleet, groups)
    if own_placement_group(fleet):
        placement = aws.ec2.PlacementGroup(f"{component.name}-placement", strategy=fleet.placement, tags=tags,
                                           opts=_opts(component))
        more["placement"] = {"group_name": placement.name}
    return more


class KubeTrainingFleet(InferenceFleet):
    """As an inference fleet's node group and objects (the same order: namespaces, PriorityClass and
    ConfigMaps before the releases, the Kueue objects after them), with EFA interfaces and a cluster placement
    group in the launch template. Its GPU nodes join the cluster's one subnet (one availability zone), as EFA
    and cluster placement need."""

    # its own type token: the plan and the diagram call it a training fleet, and a later rename of the token would
    # change every child's URN (a replacement of the node group) without an alias
    TYPE = "fleetform:aws:KubeTrainingFleet"

    def _launch_template(self, name: str, fleet: Fleet, group, tags: dict):
        efa = fleet.interconnect is not None and fleet.interconnect.fabric == "efa"
        more = efa_launch_extras(self, fleet, tags, efa)
        return launch_template(name, group, None, tags, self, ROOT_GIB, **more)

"""The node group of an inference fleet whose replicas span nodes (fleetform/lws.py): EFA interfaces and a cluster
placement group in its launch template, as a Kubernetes training fleet's (providers/aws/kueue.py), so a
LeaderWorkerSet group's NCCL traffic between its nodes runs over EFA. The LWS controller and the EFA device plugin
are Helm releases of the cluster (fleetform/cluster.py), installed before the fleet's LeaderWorkerSets."""

from __future__ import annotations

from fleetform.model import Fleet


def spans_nodes(fleet: Fleet) -> bool:
    return fleet.kube is not None and any(s.group is not None for s in fleet.kube.servers)


def launch_extras(component, fleet: Fleet, tags: dict) -> dict:
    """launch_template's extra arguments for such a fleet: its EFA interfaces where the instance has EFA, and its
    own placement group (providers/aws/kueue.py efa_launch_extras, as a Kubernetes training fleet's)."""
    from .kueue import efa_launch_extras

    if not spans_nodes(fleet):
        return {}
    return efa_launch_extras(component, fleet, tags, bool(fleet.instance is not None and fleet.instance.max_efa))

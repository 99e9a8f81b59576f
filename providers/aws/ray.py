"""A training fleet scheduled by Ray on the blueprint's EKS cluster: its GPU node group, then its rendered
objects (the Namespace early, the RayCluster once the KubeRay operator's release has installed the ray.io CRDs).

The KubeRay operator itself is a Helm release of the cluster (providers/aws/addons.yaml `kuberay-operator`,
pinned; installed by EksCluster.install with the other releases)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.cluster import ROOT_GIB
from fleetform.model import Fleet

from .common import _opts, _user_data
from .inference import LOCAL_NVME_NODECONFIG
from .kube import EARLY_KINDS, EksCluster, KubeObject, launch_template, node_group, objects_of
from .kueue import efa_interfaces
from .training import own_placement_group


class RayFleet(pulumi.ComponentResource):
    """A managed GPU node group with the NVIDIA AMI, the nvidia.com/gpu taint and the fleet's label, which the
    RayCluster's workers select and tolerate; on EFA its launch template has the EFA interfaces and, as a Kueue
    fleet's, its nodes are in a placement group of their own (the fleet's `placement`); the Cluster Autoscaler adds nodes
    for the worker pods KubeRay's autoscaler creates, up to nodes.max. Children are named after the fleet, like an inference fleet's."""

    def __init__(self, name: str, fleet: Fleet, eks: EksCluster, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:RayFleet", name, None, opts)
        self.name, self.eks = name, eks
        tags = {**tags, "fleetform:fleet": fleet.cloud_name}
        group = next(g for g in eks.model.node_groups if g.fleet == fleet.name)
        more: dict = {}
        if fleet.ray.efa:
            # as a Kueue fleet's nodes (providers/aws/kueue.py): the Slurm nodes' EFA card layout, the EKS cluster
            # security group and the blueprint's (whose self-referencing rules admit EFA traffic) on each interface
            groups = [eks.cluster.vpc_config.cluster_security_group_id, eks.security_group]
            more["network_interfaces"] = efa_interfaces(fleet, groups)
        if fleet.ray.efa and own_placement_group(fleet):
            # on EFA only: a TCP Ray fleet's node group had no placement group, and one added now would be a new
            # launch template version, rolling every running node
            placement = aws.ec2.PlacementGroup(f"{name}-placement", strategy=fleet.placement, tags=tags,
                                               opts=_opts(self))
            more["placement"] = {"group_name": placement.name}
        template = launch_template(f"{name}-nodes", group,
                                   _user_data(LOCAL_NVME_NODECONFIG) if group.local_nvme else None, tags, self, ROOT_GIB,
                                   **more)
        self.node_group = node_group(f"{name}-gpu", eks, group, "AL2023_x86_64_NVIDIA", template, tags, self,
                                     [eks.addons["vpc-cni"]])
        objects = [o for o in objects_of(files, fleet.name) if eks.claim(o)]
        self._late = [o for o in objects if o["kind"] not in EARLY_KINDS]
        namespaces = [self._object(o, [eks.system]) for o in objects if o["kind"] == "Namespace"]
        self.early = namespaces + [self._object(o, namespaces + list(eks.namespaces.values()))
                                   for o in objects if o["kind"] in EARLY_KINDS - {"Namespace"}]
        self.register_outputs({})

    def _object(self, obj: dict, depends_on: list) -> KubeObject:
        meta = obj["metadata"]
        name = "-".join(p for p in (self.name, obj["kind"].lower(), meta.get("namespace"), meta["name"]) if p)
        return KubeObject(name, obj, self.eks.k8s_opts(self, depends_on))

    def apply(self) -> None:
        """The RayCluster: after the node group and the releases (the KubeRay operator brings its CRD)."""
        after = [self.node_group, *self.early, *self.eks.releases.values()]
        for obj in self._late:
            self._object(obj, after)

"""A training fleet scheduled by Slurm on EKS through Slinky: an EFA node group in a cluster placement group (as a
Kueue training fleet's: providers/aws/kueue.py), its Namespace early, then the fleet's own release of SchedMD's
`slurm` chart with the rendered values (<fleet>/slinky/values.yaml), once the `slurm-operator` release of the
cluster (providers/aws/addons.yaml, with the slinky.slurm.net CRDs) is up."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import yaml

from fleetform.model import Fleet

from .kueue import KubeTrainingFleet

SLURM_CHART = "oci://ghcr.io/slinkyproject/charts/slurm"
"""SlinkyProject/slurm-operator v1.2.1 README.md: `helm install slurm oci://ghcr.io/slinkyproject/charts/slurm`."""


class SlinkyFleet(KubeTrainingFleet):
    """The GPU node group (EFA interfaces, placement group, the nvidia.com/gpu taint and the fleet's labels the
    NodeSet's pods select) and the `slurm` release: Controller, NodeSet (one slurmd pod per node), LoginSet,
    RestApi and the key Secrets the chart generates."""

    TYPE = "fleetform:aws:SlinkyFleet"

    def __init__(self, name: str, fleet: Fleet, eks, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(name, fleet, eks, files, tags, opts)
        self.fleet, self.values = fleet, yaml.safe_load(files[f"{fleet.name}/slinky/values.yaml"])

    def apply(self) -> None:
        """The `slurm` release: after the node group, the Namespace and the operator's release (its CRDs)."""
        super().apply()
        s = self.fleet.slinky
        after = [self.node_group, *self.early, *self.eks.releases.values()]
        k8s.helm.v3.Release(
            f"{self.name}-slurm", name=s.release, chart=SLURM_CHART, version=s.chart_version, namespace=s.namespace,
            create_namespace=False, values=self.values, timeout=900, opts=self.eks.k8s_opts(self, after))

"""<fleet>/k8s/: the Kubernetes objects of a training fleet scheduled by Ray (its Namespace, NetworkPolicy and RayCluster,
applied by `pulumi up` after the KubeRay operator's CRDs) and <fleet>/ray/rayjob.yaml, the Ray Train job a
user copies and submits to that RayCluster (not applied)."""

from __future__ import annotations

from ..kueue import EFA_RESOURCE, HUGEPAGES_RESOURCE
from ..model import Blueprint, Fleet
from .jinja import render


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    r = fleet.ray
    if r is None:
        return {}
    labels = (("app.kubernetes.io/part-of", bp.name), ("app.kubernetes.io/managed-by", "fleetform"),
              ("fleetform.dev/fleet", fleet.cloud_name)) + tuple(sorted(bp.labels.items()))
    common = {"fleet": fleet.name, "r": r, "labels": labels, "efa_resource": EFA_RESOURCE,
              "hugepages_resource": HUGEPAGES_RESOURCE}
    objects = {"namespace.yaml": render("ray/namespace.yaml.j2", **common),
               "raycluster.yaml": render("ray/raycluster.yaml.j2", **common),
               "networkpolicy.yaml": render("ray/networkpolicy.yaml.j2", **common)}
    out = {f"{fleet.name}/k8s/{name}": data for name, data in objects.items()}
    out[f"{fleet.name}/k8s/kustomization.yaml"] = render("ray/kustomization.yaml.j2", fleet=fleet.name,
                                                         resources=sorted(objects))
    out[f"{fleet.name}/ray/rayjob.yaml"] = render("ray/rayjob.yaml.j2", **common)
    return out
